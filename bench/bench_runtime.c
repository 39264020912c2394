/* bench_runtime.c — issue 20's runtime benchmark: runc against gVisor (runsc)
 * in one run, rounds interleaved so both see the same machine: `brig run --
 * true` as a process, `true` over a held brig-init relay, and a cold computer
 * (create, then its first command through brig_computer_exec).
 *
 *     bench_runtime [--rounds N] [--image IMG] [--runtime NAME]
 *
 * NAME (default runsc) must be registered with the daemon (scripts/bootstrap
 * does it). Everything it makes carries brig.bench=runtime and is removed. */
#include <errno.h>
#include <fcntl.h>
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

static brig_engine *E;
static const char *IMAGE = "brig-test:local", *BRIG = BRIG_BIN_DEFAULT, *RUNSC = "runsc";
static char NS[32];

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
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

/* `brig run --image IMG [--runtime R] -- true`, stdio on /dev/null. */
static double brig_run_ms(const char *runtime)
{
	char *argv[] = {(char *)BRIG, "run", "--image", (char *)IMAGE, "--label", "brig.bench=runtime",
			runtime ? "--runtime" : "--", (char *)runtime, "--", "true", NULL};
	if (!runtime) {
		argv[7] = "true";
		argv[8] = NULL;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	int rc = posix_spawn(&pid, BRIG, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		die("cannot start %s: %s", BRIG, strerror(rc));
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	double t = now_ms() - t0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("brig run%s%s exited %d", runtime ? " --runtime " : "", runtime ? runtime : "",
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
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

static brig_computer *create(const char *session, const char *runtime)
{
	brig_spec s;
	spec_for(&s, runtime);
	brig_identity id = {.ns = NS, .agent = "bench", .session = session, .generation = 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	check(brig_computer_create(E, &c, &id, &s, &err), "create computer", err);
	brig_spec_clear(&s);
	return c;
}

static void exec_true(const char *name)
{
	static const char *const argv[] = {"true", NULL};
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	o.argv = argv;
	o.timeout_ms = 30000;
	brig_exec_result r;
	brig_error *err = NULL;
	check(brig_computer_exec(E, name, &o, &r, &err), "exec", err);
	if (r.exit_code != 0)
		die("true exited %d in %s", r.exit_code, name);
	brig_exec_result_clear(&r);
}

/* Create, first command, destroy: the first two are timed. */
static double cold_ms(const char *runtime, int round)
{
	char session[32];
	snprintf(session, sizeof session, "cold-%s-%d", runtime ? "b" : "a", round);
	double t0 = now_ms();
	brig_computer *c = create(session, runtime);
	exec_true(c->name);
	double t = now_ms() - t0;
	brig_computer_destroy(E, c->name, NULL);
	brig_computer_free(c);
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

static void row(const char *what, samples *a, samples *b)
{
	printf("%-38s %9.1f %9.1f   %9.1f %9.1f   %5.1fx\n", what, median(a), pct(a, 90), median(b), pct(b, 90),
	       median(b) / median(a));
}

int main(int argc, char **argv)
{
	int rounds = 10;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--image") == 0 && i + 1 < argc)
			IMAGE = argv[++i];
		else if (strcmp(argv[i], "--runtime") == 0 && i + 1 < argc)
			RUNSC = argv[++i];
		else
			die("usage: bench_runtime [--rounds N] [--image IMG] [--runtime NAME]");
	}
	if (rounds < 1)
		rounds = 1;
	const char *b = getenv("BRIG_BIN");
	if (b && *b)
		BRIG = b;
	snprintf(NS, sizeof NS, "bench%ld", (long)getpid());
	brig_error *err = NULL;
	check(brig_engine_open(&E, NULL, &err), "open the Docker engine", err);

	/* One computer per runtime holding a relay. */
	brig_computer *ca = create("held-a", NULL), *cb = create("held-b", RUNSC);
	brig_guest *ga = NULL, *gb = NULL;
	check(brig_guest_open(&ga, E, ca->id, 0, &err), "relay (runc)", err);
	check(brig_guest_open(&gb, E, cb->id, 0, &err), "relay (runsc)", err);

	samples run_a = {0}, run_b = {0}, held_a = {0}, held_b = {0}, cold_a = {0}, cold_b = {0};
	held_ms(ga), held_ms(gb), brig_run_ms(NULL), brig_run_ms(RUNSC); /* warm-up */
	for (int r = 0; r < rounds; r++) {
		add(&run_a, brig_run_ms(NULL));
		add(&run_b, brig_run_ms(RUNSC));
		for (int k = 0; k < 5; k++) {
			add(&held_a, held_ms(ga));
			add(&held_b, held_ms(gb));
		}
		add(&cold_a, cold_ms(NULL, r));
		add(&cold_b, cold_ms(RUNSC, r));
	}
	brig_guest_free(ga);
	brig_guest_free(gb);
	brig_computer_destroy(E, ca->name, NULL);
	brig_computer_destroy(E, cb->name, NULL);
	brig_computer_free(ca);
	brig_computer_free(cb);

	printf("image %s, %d rounds (held relay: %d execs), ms\n", IMAGE, rounds, 5 * rounds);
	printf("%-38s %9s %9s   %9s %9s   %6s\n", "", "runc p50", "p90", "runsc p50", "p90", "ratio");
	row("brig run -- true (process)", &run_a, &run_b);
	row("true over a held relay", &held_a, &held_b);
	row("cold computer to first command", &cold_a, &cold_b);
	brig_engine_free(E);
	return 0;
}
