/* bench_run.c — issue 4's benchmark: wall time of one disposable run of
 * `true` through `brig run` (the CLI, spawned), the seed's own recipe
 * (`docker run --rm --network none --memory 512m --cpus 1.0 --read-only IMG
 * sh -c true`), the Docker SDK for Python doing the same, and brig_run()
 * called in this process — median and p95, one table.
 *
 * The four are interleaved round by round (rotating order) so that noise on
 * a small shared machine falls on all alike. The two CLIs include process
 * start; the SDK and brig_run() do not (the SDK's interpreter and client are
 * started once, bench/docker_sdk_run.py --serve). --steps then shows where
 * brig_run's time goes: the same Engine API calls, timed one by one.
 * --sdk-network-disabled adds a fifth way: the SDK asking dockerd for what
 * brig asks of it for an image labelled brig.etc-hosts=optional (the test
 * image and brig's): network none without Docker's network sandbox.
 *
 *   cmake -S . -B build -DBRIG_BENCH=ON && cmake --build build --target bench_run brig_cli
 *   build/bench/bench_run [-n 30] [-w 2] [-i brig-test:local] [--steps] [--no-steps]
 *                         [--sdk-network-disabled]
 *
 * Every object it makes carries brig.bench=1 (brig's runs, removed by
 * brig_run itself; docker's and the SDK's use --rm). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/run.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "stats.h"
#include "util/util.h"

#ifndef BRIG_BENCH_DIR
#define BRIG_BENCH_DIR "bench"
#endif
#ifndef BRIG_BIN_DEFAULT
#define BRIG_BIN_DEFAULT "brig"
#endif

extern char **environ;

enum { C_BRIG_CLI, C_DOCKER, C_SDK, C_BRIG_LIB, C_SDK_ND, NCOLS };
static const char *const col_names[NCOLS] = {"brig run (CLI)", "docker run --rm", "Docker SDK (Python)",
					     "brig_run() in-process", "SDK, network_disabled"};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench_run: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
	if (g_stop) {
		signal(sig, SIG_DFL);
		raise(sig);
	}
	g_stop = 1;
}

/* ---- the four ways ---- */

static const char *g_image = "brig-test:local", *g_brig, *g_docker = "docker", *g_python = "/usr/bin/python3";
static brig_engine *g_engine;
static brig_spec g_spec;

/* Runs argv with stdio on /dev/null; returns its wall time, dies when it
 * fails (a benchmark of failures measures nothing). */
static double spawn_ms(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		die("cannot start %s: %s", argv[0], strerror(rc));
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	double t = now_ms() - t0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("%s exited with status %d (its stderr is above)", argv[0],
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return t;
}

static double run_brig_cli(void)
{
	char *argv[] = {(char *)g_brig, "run",  "--image", (char *)g_image, "--label", "brig.bench=1",
			"--",           "true", NULL};
	return spawn_ms(argv);
}

static double run_docker(void)
{
	char *argv[] = {(char *)g_docker, "run",  "--rm",   "--network", "none",
			"--memory",       "512m", "--cpus", "1.0",       "--read-only",
			(char *)g_image,  "sh",   "-c",     "true",      NULL};
	return spawn_ms(argv);
}

/* An SDK child: one run per line written to it, one ms line back. The
 * second (--sdk-network-disabled) asks dockerd for what brig asks of it for
 * an image labelled brig.etc-hosts=optional: no network sandbox. */
typedef struct sdk_child {
	FILE *in, *out;
	pid_t pid;
} sdk_child;
static sdk_child g_sdk, g_sdk_nd;

static void sdk_start(sdk_child *c, bool network_disabled)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	cleanup_free char *script = xasprintf("%s/docker_sdk_run.py", BRIG_BENCH_DIR);
	char *argv[] = {(char *)g_python, script, "--serve", "-i", (char *)g_image,
			network_disabled ? "--network-disabled" : NULL, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	int rc = posix_spawn(&c->pid, g_python, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		die("cannot start %s: %s", g_python, strerror(rc));
	close(in[0]);
	close(out[1]);
	c->in = fdopen(in[1], "w");
	c->out = fdopen(out[0], "r");
	char line[64];
	if (!fgets(line, sizeof line, c->out) || strcmp(line, "ready\n") != 0)
		die("%s %s did not start (is python3-docker installed for it?)", g_python, script);
}

static double sdk_run(sdk_child *c)
{
	fputs("run\n", c->in);
	fflush(c->in);
	char line[64];
	if (!fgets(line, sizeof line, c->out))
		die("the Docker SDK run failed (its traceback is above)");
	return strtod(line, NULL);
}

static double run_sdk(void)
{
	return sdk_run(&g_sdk);
}

static double run_sdk_nd(void)
{
	return sdk_run(&g_sdk_nd);
}

static void sdk_stop(sdk_child *c)
{
	if (!c->in)
		return;
	fclose(c->in);
	fclose(c->out);
	waitpid(c->pid, NULL, 0);
	c->in = NULL;
}

static samples g_phase[5]; /* brig_run's own durations: create, run, copy_out, rest, total */

static double run_brig_lib(void)
{
	const char *argv[] = {"true", NULL};
	brig_run_opts o = {.version = BRIG_RUN_OPTS_VERSION,
			   .spec = &g_spec,
			   .argv = argv,
			   .timeout_s = 60,
			   .stdin_fd = -1,
			   .cancel_fd = -1};
	brig_run_result res;
	brig_error *err = NULL;
	double t0 = now_ms();
	int rc = brig_run(g_engine, &o, &res, &err);
	double t = now_ms() - t0;
	if (rc || res.exec.exit_code != 0)
		die("brig_run: %s (exit %d)", rc ? brig_error_message(err) : "the command failed", res.exec.exit_code);
	add(&g_phase[0], (double)res.create_ms);
	add(&g_phase[1], (double)res.run_ms);
	add(&g_phase[2], (double)res.copy_out_ms);
	add(&g_phase[3], (double)(res.total_ms - res.create_ms - res.copy_in_ms - res.run_ms - res.copy_out_ms));
	add(&g_phase[4], (double)res.total_ms);
	brig_run_result_clear(&res);
	return t;
}

/* ---- --steps: brig_run's Engine API calls, one by one ---- */

enum {
	S_IMAGE,
	S_VOLUME,
	S_CREATE,
	S_CHECK,
	S_ATTACH,
	S_WAIT_BEGIN,
	S_START,
	S_STREAM,
	S_REMOVED,
	NSTEPS
};
static const char *const step_names[NSTEPS] = {
	"image inspect (pin the tag)",
	"brig-init marker inspect",
	"container create",
	"HEAD of brig-init's copy (no marker)",
	"attach (before start)",
	"wait begin (condition removed)",
	"container start",
	"output stream to its end (true)",
	"wait answer (exit, AutoRemove done)",
};
static samples g_steps[NSTEPS];

static void check(int rc, const char *what, brig_error *err)
{
	if (rc)
		die("%s: %s", what, brig_error_message(err));
}

/* The calls of brig_run's direct path (a run with nothing to copy), in its
 * order, each timed alone. */
static void steps_round(void)
{
	brig_error *err = NULL;
	double t;
	json_t *j = NULL;

	t = now_ms();
	check(brig_engine_image_inspect(g_engine, &j, g_image, &err), "image inspect", err);
	add(&g_steps[S_IMAGE], now_ms() - t);
	cleanup_free char *image_id = xstrdup(json_string_value(json_object_get(j, "Id")));
	const char *hosts = json_string_value(
		json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_ETC_HOSTS));
	bool no_sandbox = g_spec.network == BRIG_NET_NONE && hosts && strcmp(hosts, BRIG_ETC_HOSTS_OPTIONAL) == 0;
	json_decref(j);

	brig_spec spec;
	brig_spec_copy(&spec, &g_spec);
	free(spec.image);
	spec.image = xstrdup(image_id);
	char rid[25];
	snprintf(rid, sizeof rid, "bench%019lld", (long long)(now_ms() * 1000) % 1000000000000000000LL);
	cleanup_free char *name = xasprintf("brig-bench-run-%s", rid);
	brig_container_opts co = {.version = BRIG_CONTAINER_OPTS_VERSION,
				  .kind = BRIG_KIND_RUN,
				  .name = name,
				  .lifetime_s = 120,
				  .run_id = rid,
				  .deadline_unix = brig_wall_s() + 120,
				  .plain_tmpfs = true,
				  .network_disabled = no_sandbox};
	/* as brig_run: brig-init's volume by its label, PID 1 `brig-init run` */
	const char *vname = brig_guest__volume_name();
	bool need_check = false;
	t = now_ms();
	if (vname) {
		check(brig_guest__volume_quick(g_engine, image_id, &need_check, &err), "brig-init volume", err);
		co.init_hash = vname + strlen("brig-init-");
	}
	add(&g_steps[S_VOLUME], now_ms() - t);
	json_t *body = NULL;
	check(brig_spec_container_json(&body, &spec, &co, &err), "container body", err);
	json_object_set_new(body, "Entrypoint",
			    vname ? json_pack("[s, s, s, s, s, s]", "/.brig/brig-init", "run", "--timeout-ms", "60000",
					      "--", "true")
				  : json_pack("[s, s, s, s, s]", "timeout", "-s", "KILL", "120", "true"));
	json_object_set_new(body, "AttachStdout", json_true());
	json_object_set_new(body, "AttachStderr", json_true());
	cleanup_free char *cid = NULL;
	t = now_ms();
	check(brig_engine_container_create(g_engine, &cid, name, body, &err), "create", err);
	add(&g_steps[S_CREATE], now_ms() - t);
	json_decref(body);
	t = now_ms();
	if (need_check)
		check(brig_guest__volume_check(g_engine, cid, &err), "brig-init copy", err);
	add(&g_steps[S_CHECK], now_ms() - t);

	brig_engine_stream *stream = NULL;
	t = now_ms();
	check(brig_engine_container_attach(g_engine, &stream, cid, false, &err), "attach", err);
	add(&g_steps[S_ATTACH], now_ms() - t);
	brig_engine_waiter *w = NULL;
	t = now_ms();
	check(brig_engine_container_wait_begin(g_engine, &w, cid, "removed", &err), "wait begin", err);
	add(&g_steps[S_WAIT_BEGIN], now_ms() - t);
	t = now_ms();
	check(brig_engine_container_start(g_engine, cid, &err), "start", err);
	add(&g_steps[S_START], now_ms() - t);
	brig_engine_exec_io io = {.stdin_fd = -1, .cancel_fd = -1, .deadline_ms = brig_now_ms() + 60000};
	t = now_ms();
	check(brig_engine_stream_pump(stream, &io, &err), "output stream", err);
	add(&g_steps[S_STREAM], now_ms() - t);
	brig_engine_stream_free(stream);
	int64_t code = -1;
	t = now_ms();
	check(brig_engine_waiter_finish(w, brig_now_ms() + 30000, &code, &err), "wait answer", err);
	add(&g_steps[S_REMOVED], now_ms() - t);
	brig_engine_waiter_free(w);
	if (code != 0)
		die("the container's `true` exited %lld", (long long)code);
	brig_spec_clear(&spec);
}

/* ---- main ---- */

static void usage(void)
{
	fputs("usage: bench_run [-n N] [-w WARMUP] [-i IMAGE] [--brig PATH] [--docker PATH] [--python PATH]\n"
	      "                 [--steps | --no-steps] [--sdk-network-disabled]\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	int n = 30, warm = 2;
	bool steps = true, sdk_nd = false;
	g_brig = getenv("BRIG_BIN") ? getenv("BRIG_BIN") : BRIG_BIN_DEFAULT;
	static const struct option lo[] = {
		{"brig", required_argument, NULL, 'b'},   {"docker", required_argument, NULL, 'd'},
		{"python", required_argument, NULL, 'p'}, {"steps", no_argument, NULL, 's'},
		{"no-steps", no_argument, NULL, 'S'},     {"sdk-network-disabled", no_argument, NULL, 'N'},
		{NULL, 0, NULL, 0}};
	int opt;
	while ((opt = getopt_long(argc, argv, "n:w:i:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'w': warm = atoi(optarg); break;
		case 'i': g_image = optarg; break;
		case 'b': g_brig = optarg; break;
		case 'd': g_docker = optarg; break;
		case 'p': g_python = optarg; break;
		case 's': steps = true; break;
		case 'S': steps = false; break;
		case 'N': sdk_nd = true; break;
		default: usage();
		}
	}
	if (n < 1 || warm < 0)
		usage();
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	brig_error *err = NULL;
	check(brig_engine_open(&g_engine, NULL, &err), "connect to dockerd", err);
	brig_spec_init(&g_spec);
	check(brig_spec_set(&g_spec, "image", g_image, &err), "image", err);
	check(brig_spec_add_label(&g_spec, "brig.bench=1", &err), "label", err);
	sdk_start(&g_sdk, false);
	if (sdk_nd)
		sdk_start(&g_sdk_nd, true);
	int ncols = sdk_nd ? NCOLS : C_SDK_ND;

	double (*fn[NCOLS])(void) = {run_brig_cli, run_docker, run_sdk, run_brig_lib, run_sdk_nd};
	samples s[NCOLS] = {{0}};
	/* Paired per round (same moment, same machine state): brig minus the other. */
	enum { P_CLI_DOCKER, P_CLI_SDK, P_LIB_SDK, P_CLI_SDK_ND, NPAIRS };
	static const char *const pair_names[NPAIRS] = {
		"brig run (CLI) - docker run --rm", "brig run (CLI) - Docker SDK (Python)",
		"brig_run() - Docker SDK (Python)", "brig run (CLI) - SDK, network_disabled"};
	static const int pair_cols[NPAIRS][2] = {
		{C_BRIG_CLI, C_DOCKER}, {C_BRIG_CLI, C_SDK}, {C_BRIG_LIB, C_SDK}, {C_BRIG_CLI, C_SDK_ND}};
	int npairs = sdk_nd ? NPAIRS : P_CLI_SDK_ND;
	samples d[NPAIRS] = {{0}};
	fprintf(stderr, "bench_run: %d warm-up + %d interleaved rounds of `true` (image %s)\n", warm, n, g_image);
	for (int r = -warm; r < n && !g_stop; r++) {
		double t[NCOLS];
		int done = 0;
		for (int k = 0; k < ncols && !g_stop; k++, done++) {
			int c = (r + warm + k) % ncols; /* rotating order */
			t[c] = fn[c]();
			if (r >= 0)
				add(&s[c], t[c]);
		}
		if (r >= 0 && done == ncols)
			for (int i = 0; i < npairs; i++)
				add(&d[i], t[pair_cols[i][0]] - t[pair_cols[i][1]]);
		if (r < 0)
			for (int i = 0; i < 5; i++)
				g_phase[i].n = 0;
		if (r >= 0 && (r + 1) % 10 == 0)
			fprintf(stderr, "bench_run: %d/%d\n", r + 1, n);
	}
	sdk_stop(&g_sdk);
	sdk_stop(&g_sdk_nd);

	printf("\nDisposable run of `true`, %zu rounds interleaved (ms)\n\n", s[0].n);
	printf("| %-24s | %8s | %8s |\n", "way", "median", "p95");
	printf("|--------------------------|----------|----------|\n");
	for (int c = 0; c < ncols; c++)
		printf("| %-24s | %8.1f | %8.1f |\n", col_names[c], median(&s[c]), pct(&s[c], 95));
	printf("\nPaired by round, brig minus the other (ms; negative: brig was faster)\n\n");
	printf("| %-38s | %8s | %17s | %12s |\n", "pair", "median", "95 % CI of median", "brig faster");
	printf("|----------------------------------------|----------|-------------------|--------------|\n");
	for (int i = 0; i < npairs; i++) {
		double ci_lo, ci_hi;
		size_t wins = count_below(&d[i], 0);
		median_ci(&d[i], &ci_lo, &ci_hi);
		char ci[32], w[32];
		snprintf(ci, sizeof ci, "%.1f .. %.1f", ci_lo, ci_hi);
		snprintf(w, sizeof w, "%zu of %zu", wins, d[i].n);
		printf("| %-38s | %8.1f | %17s | %12s |\n", pair_names[i], median(&d[i]), ci, w);
	}
	printf("\nbrig_run()'s own durations (brig_run_result, ms)\n\n");
	static const char *const ph[5] = {"create (pin+create+attach+start)", "run (to exit and removal)",
					  "copy_out (none here)", "rest", "total"};
	printf("| %-36s | %8s | %8s |\n", "phase", "median", "p95");
	printf("|--------------------------------------|----------|----------|\n");
	for (int i = 0; i < 5; i++)
		printf("| %-36s | %8.1f | %8.1f |\n", ph[i], median(&g_phase[i]), pct(&g_phase[i], 95));

	if (steps && !g_stop) {
		fprintf(stderr, "bench_run: %d rounds of brig_run's calls one by one\n", n);
		for (int r = 0; r < n && !g_stop; r++)
			steps_round();
		printf("\nbrig_run's Engine API calls for a run with nothing to copy, in its order,\n"
		       "timed one by one (ms)\n\n");
		printf("| %-36s | %8s | %8s |\n", "call", "median", "p95");
		printf("|--------------------------------------|----------|----------|\n");
		for (int i = 0; i < NSTEPS; i++)
			printf("| %-36s | %8.1f | %8.1f |\n", step_names[i], median(&g_steps[i]), pct(&g_steps[i], 95));
	}
	brig_spec_clear(&g_spec);
	brig_engine_free(g_engine);
	return g_stop ? 130 : 0;
}
