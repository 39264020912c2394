/* bench_runtime.c — issue 20's runtime benchmark: runc against gVisor (runsc),
 * and runc with and without userns-remap, in one run, rounds interleaved so
 * every column sees the same machine: `brig run -- true` as a process, `true`
 * over a held brig-init relay, and a cold computer (create, then its first
 * command through brig_computer_exec).
 *
 *     bench_runtime [--rounds N] [--image IMG] [--runtime NAME] [--other-host URL]
 *
 * NAME (default runsc) must be registered with the daemon (scripts/bootstrap
 * does it). --other-host adds a column: runc on a second daemon (DOCKER_HOST
 * form) — bench/runtime_remap starts one with the other userns-remap setting
 * than this machine's and passes it. Everything it makes carries
 * brig.bench=runtime and is removed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/brig.h"
#include "stats.h"

extern char **environ;

static const char *IMAGE = "brig-test:local", *BRIG = BRIG_BIN_DEFAULT, *RUNSC = "runsc";
static char NS[32];

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The engines of the columns opened so far, for leave_nothing. */
static brig_engine *ENGINES[3];
static int NENGINES;
static volatile sig_atomic_t STOP;

/* At every exit (die included): whatever this run made on every daemon it
 * opened, found by its namespace label, goes. */
static void leave_nothing(void)
{
	char l[64];
	snprintf(l, sizeof l, "brig.ns=%s", NS);
	for (int i = 0; i < NENGINES; i++) {
		json_t *f = json_pack("{s:[s]}", "label", l), *list = NULL;
		if (f && brig_engine_container_list(ENGINES[i], &list, true, f, NULL) == 0) {
			size_t k;
			json_t *c;
			json_array_foreach(list, k, c)
			{
				const char *id = json_string_value(json_object_get(c, "Id"));
				if (id)
					brig_computer_destroy(ENGINES[i], id, NULL);
			}
		}
		json_decref(list);
		list = NULL;
		if (f && brig_engine_volume_list(ENGINES[i], &list, f, NULL) == 0) {
			json_t *vols = json_object_get(list, "Volumes");
			size_t k;
			json_t *v;
			json_array_foreach(vols, k, v)
			{
				const char *name = json_string_value(json_object_get(v, "Name"));
				if (name)
					brig_engine_volume_remove(ENGINES[i], name, true, NULL);
			}
		}
		json_decref(list);
		json_decref(f);
	}
}

static void on_signal(int sig)
{
	(void)sig;
	STOP = 1;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "bench_runtime: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void check(int rc, const char *what, brig_error *err)
{
	if (rc)
		die("%s: %s", what, brig_error_message(err));
}

/* One column: a daemon and a runtime (NULL: the daemon's default). */
typedef struct column {
	char label[32];
	brig_engine *e;
	const char *runtime;
	const char *host; /* DOCKER_HOST for `brig run`; NULL: this process's */
	char **env;       /* `brig run`'s environment: environ, or a copy naming host */
	char hostvar[512];
	brig_computer *held;
	brig_guest *g;
	samples run, relay, cold;
} column;

/* `brig run --image IMG [--runtime R] -- true`, stdio on /dev/null. */
static double brig_run_ms(const column *c)
{
	char *argv[] = {(char *)BRIG, "run", "--image", (char *)IMAGE, "--label", "brig.bench=runtime",
			c->runtime ? "--runtime" : "--", (char *)c->runtime, "--", "true", NULL};
	if (!c->runtime) {
		argv[7] = "true";
		argv[8] = NULL;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	int rc = posix_spawn(&pid, BRIG, &fa, NULL, argv, c->env);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		die("cannot start %s: %s", BRIG, strerror(rc));
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	double t = now_ms() - t0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("brig run (%s) exited %d", c->label, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return t;
}

static void spec_for(brig_spec *s, const char *runtime)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	check(brig_spec_set(s, "image", IMAGE, &err), "spec image", err);
	check(brig_spec_add_label(s, "brig.bench=runtime", &err), "spec label", err);
	if (runtime)
		check(brig_spec_set(s, "runtime", runtime, &err), "spec runtime", err);
}

static brig_computer *create(const column *c, const char *session)
{
	brig_spec s;
	spec_for(&s, c->runtime);
	brig_identity id = {.ns = NS, .agent = "bench", .session = session, .generation = 1};
	brig_computer *out = NULL;
	brig_error *err = NULL;
	if (brig_computer_create(c->e, &out, &id, &s, &err) != 0)
		die("create a computer (%s): %s (%s)", c->label, brig_error_message(err),
		    err ? brig_error_name(err->code) : "no error object");
	brig_spec_clear(&s);
	return out;
}

static void exec_true(const column *c, const char *name)
{
	static const char *const argv[] = {"true", NULL};
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	o.argv = argv;
	o.timeout_ms = 30000;
	brig_exec_result r;
	brig_error *err = NULL;
	check(brig_computer_exec(c->e, name, &o, &r, &err), "exec", err);
	if (r.exit_code != 0)
		die("true exited %d in %s", r.exit_code, name);
	brig_exec_result_clear(&r);
}

/* Create, first command, destroy: the first two are timed. */
static double cold_ms(const column *c, int col, int round)
{
	char session[32];
	snprintf(session, sizeof session, "cold-%d-%d", col, round);
	double t0 = now_ms();
	brig_computer *k = create(c, session);
	exec_true(c, k->name);
	double t = now_ms() - t0;
	brig_computer_destroy(c->e, k->name, NULL);
	brig_computer_free(k);
	return t;
}

static double held_ms(brig_guest *g)
{
	static const char *const argv[] = {"true", NULL};
	brig_guest_exec_opts o = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				  .argv = argv,
				  .stdin_fd = -1,
				  .cancel_fd = -1,
				  .resize_fd = -1,
				  .deadline_ms = (int64_t)now_ms() + 30000};
	brig_guest_exit x;
	brig_error *err = NULL;
	double t0 = now_ms();
	check(brig_guest_exec(g, &o, &x, &err), "brig_guest_exec", err);
	double t = now_ms() - t0;
	if (x.code != 0)
		die("true exited %d over the relay", x.code);
	return t;
}

static bool remapped(brig_engine *e)
{
	uint32_t u = 0, g = 0;
	brig_error *err = NULL;
	check(brig_engine_userns_root(e, &u, &g, &err), "ask the daemon for its userns-remap", err);
	return u != 0;
}

static void open_column(column *c, const char *host, const char *runtime, const char *what)
{
	brig_error *err = NULL;
	brig_engine_opts o = BRIG_ENGINE_OPTS_INIT;
	o.host = host;
	check(brig_engine_open(&c->e, host ? &o : NULL, &err), "open the Docker engine", err);
	ENGINES[NENGINES++] = c->e;
	c->runtime = runtime;
	c->host = host;
	c->env = environ;
	if (host) { /* environ without DOCKER_HOST, then DOCKER_HOST=host */
		size_t n = 0;
		while (environ[n])
			n++;
		c->env = calloc(n + 2, sizeof *c->env);
		if (!c->env)
			die("out of memory");
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (strncmp(environ[i], "DOCKER_HOST=", 12) != 0)
				c->env[k++] = environ[i];
		snprintf(c->hostvar, sizeof c->hostvar, "DOCKER_HOST=%s", host);
		c->env[k] = c->hostvar;
	}
	/* runsc runs in the host's user namespace on any daemon (spec.h) */
	snprintf(c->label, sizeof c->label, "%s%s", what, !runtime && remapped(c->e) ? "+remap" : "");
}

int main(int argc, char **argv)
{
	int rounds = 10;
	const char *other = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--image") == 0 && i + 1 < argc)
			IMAGE = argv[++i];
		else if (strcmp(argv[i], "--runtime") == 0 && i + 1 < argc)
			RUNSC = argv[++i];
		else if (strcmp(argv[i], "--other-host") == 0 && i + 1 < argc)
			other = argv[++i];
		else
			die("usage: bench_runtime [--rounds N] [--image IMG] [--runtime NAME] [--other-host URL]");
	}
	if (rounds < 1)
		rounds = 1;
	const char *b = getenv("BRIG_BIN");
	if (b && *b)
		BRIG = b;
	snprintf(NS, sizeof NS, "bench%ld", (long)getpid());
	atexit(leave_nothing);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	column cols[3] = {0};
	int n = 0;
	open_column(&cols[n++], NULL, NULL, "runc");
	open_column(&cols[n++], NULL, RUNSC, RUNSC);
	if (other)
		open_column(&cols[n++], other, NULL, "runc");
	brig_error *err = NULL;
	/* One computer per column holding a relay. */
	for (int i = 0; i < n; i++) {
		char session[16];
		snprintf(session, sizeof session, "held-%d", i);
		cols[i].held = create(&cols[i], session);
		check(brig_guest_open(&cols[i].g, cols[i].e, cols[i].held->id, 0, &err), "relay", err);
		held_ms(cols[i].g); /* warm-up */
		brig_run_ms(&cols[i]);
	}
	for (int r = 0; r < rounds; r++) {
		if (STOP)
			die("interrupted: removing what this run made");
		for (int i = 0; i < n; i++)
			add(&cols[i].run, brig_run_ms(&cols[i]));
		for (int k = 0; k < 5; k++)
			for (int i = 0; i < n; i++)
				add(&cols[i].relay, held_ms(cols[i].g));
		for (int i = 0; i < n; i++)
			add(&cols[i].cold, cold_ms(&cols[i], i, r));
	}

	printf("image %s, %d rounds (held relay: %d execs), ms (p50 / p90)\n", IMAGE, rounds, 5 * rounds);
	printf("%-32s", "");
	for (int i = 0; i < n; i++)
		printf(" %19s", cols[i].label);
	printf("\n");
	const char *what[3] = {"brig run -- true (process)", "true over a held relay",
			       "cold computer to first command"};
	for (int w = 0; w < 3; w++) {
		printf("%-32s", what[w]);
		for (int i = 0; i < n; i++) {
			samples *s = w == 0 ? &cols[i].run : w == 1 ? &cols[i].relay : &cols[i].cold;
			printf("   %7.1f / %7.1f", median(s), pct(s, 90));
		}
		printf("\n");
	}
	NENGINES = 0; /* all destroyed: nothing for leave_nothing */
	for (int i = 0; i < n; i++) {
		brig_guest_free(cols[i].g);
		brig_computer_destroy(cols[i].e, cols[i].held->name, NULL);
		brig_computer_free(cols[i].held);
		free(cols[i].run.v), free(cols[i].relay.v), free(cols[i].cold.v);
		if (cols[i].env != environ)
			free(cols[i].env);
		brig_engine_free(cols[i].e);
	}
	return 0;
}
