/* bench_guest.c — issue 14's "Speed": commands in a computer whose PID 1 is
 * brig-init, over its relay, against the ways Docker offers — median and
 * p95, side by side, in one run, on one computer.
 *
 *  1. exec of `true`: brig_guest_exec on one held handle and
 *     brig_computer_exec (which caches the relay), against the raw Engine
 *     API exec (create + start + exit code, brig's plain path), `docker exec
 *     NAME true` and the Docker SDK for Python's exec_run (one warm
 *     interpreter and client, bench/docker_sdk_exec.py --serve);
 *     The two brig ways are also timed back to back (nothing between
 *     calls): the relay's own cost, without the wake of another way's exec.
 *  2. `brig exec NAME -- true` as a process against `docker exec` (both
 *     include process start; measured in the same rounds as 1);
 *  3. 200 small commands (ls, echo > file, cat, grep) in this process, total
 *     time, over the held relay, through brig_computer_exec and through the
 *     raw API exec.
 *
 * The ways run in interleaved rounds (random order each round) so that noise on a
 * small shared machine falls on all alike; "paired" tables take per-round
 * differences, which cancels most of it.
 *
 *   cmake --build build --target bench_guest brig_cli
 *   build/bench/bench_guest [-n 100] [-w 3] [-b 3] [-i brig-test:local]
 *
 * It creates one computer (its own namespace, label brig.test=<unique>) and
 * destroys it on every exit it can see (errors and Ctrl-C included). The
 * brig CLI audits into a SQLite store in a temporary directory (unless
 * BRIG_STORE is set), removed at the end. */
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

#include "brig/guest.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "stats.h"
#include "util/util.h"

#ifndef BRIG_BENCH_DIR
#define BRIG_BENCH_DIR "bench"
#endif
#ifndef BRIG_BIN_DEFAULT
#define BRIG_BIN_DEFAULT "brig"
#endif

extern char **environ;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- what it made, undone on every exit ---- */

static brig_engine *g_engine;
static brig_guest *g_guest;
static char *g_name, *g_cid, g_store_dir[64], g_store_file[96], g_store_before[96];
static FILE *g_sdk_in, *g_sdk_out;
static pid_t g_sdk_pid;

static void sdk_stop(void)
{
	if (!g_sdk_in)
		return;
	fclose(g_sdk_in);
	fclose(g_sdk_out);
	g_sdk_in = NULL;
	waitpid(g_sdk_pid, NULL, 0);
}

static void cleanup(void)
{
	sdk_stop();
	brig_guest_free(g_guest);
	g_guest = NULL;
	if (g_name) {
		brig_error *err = NULL;
		if (brig_computer_destroy(g_engine, g_name, &err) != 0) {
			fprintf(stderr, "bench_guest: cannot destroy computer %s: %s (remove it: docker rm -f %s)\n",
				g_name, brig_error_message(err), g_name);
			brig_error_free(err);
		} else {
			fprintf(stderr, "bench_guest: computer %s destroyed\n", g_name);
		}
		free(g_name);
		g_name = NULL;
	}
	if (g_store_dir[0]) {
		unlink(g_store_file);
		unlink(g_store_before);
		cleanup_free char *wal = xasprintf("%s-wal", g_store_file), *shm = xasprintf("%s-shm", g_store_file),
				  *jr = xasprintf("%s-journal", g_store_file);
		unlink(wal);
		unlink(shm);
		unlink(jr);
		rmdir(g_store_dir);
		g_store_dir[0] = 0;
	}
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench_guest: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1); /* cleanup() runs from atexit */
}

static void check(int rc, const char *what, brig_error *err)
{
	if (rc)
		die("%s: %s", what, brig_error_message(err));
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

/* ---- the ways ---- */

static const char *g_image = "brig-test:local", *g_brig, *g_docker = "docker", *g_python = "/usr/bin/python3";

static int discard(int stream, const char *data, size_t len, void *payload)
{
	(void)stream, (void)data;
	*(size_t *)payload += len;
	return 0;
}

/* Runs argv with stdio on /dev/null; returns its wall time, dies when it
 * fails (a benchmark of failures measures nothing). */
static double spawn_ms(char *const argv[], char *const envp[])
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		die("cannot start %s: %s", argv[0], strerror(rc));
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	double t = now_ms() - t0;
	if (g_stop) /* a Ctrl-C reached it too: this round is not counted */
		return t;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("%s exited with status %d (its stderr is above)", argv[0],
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return t;
}

/* argv over the held relay; returns its exit code. */
static int guest_exec(const char *const *argv)
{
	brig_guest_exec_opts o = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				  .argv = argv,
				  .stdin_fd = -1,
				  .cancel_fd = -1,
				  .resize_fd = -1,
				  .deadline_ms = brig_now_ms() + 30000};
	brig_guest_exit x;
	brig_error *err = NULL;
	check(brig_guest_exec(g_guest, &o, &x, &err), "brig_guest_exec", err);
	return x.code;
}

/* argv through brig_computer_exec (inspect, then the cached relay). */
static int computer_exec(const char *const *argv)
{
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	o.argv = argv;
	o.timeout_ms = 30000;
	brig_exec_result res;
	brig_error *err = NULL;
	check(brig_computer_exec(g_engine, g_name, &o, &res, &err), "brig_computer_exec", err);
	int code = res.exit_code;
	brig_exec_result_clear(&res);
	return code;
}

/* argv through the raw Engine API, as brig's plain path does: exec create,
 * start (output streamed to its end), exit code. */
static int raw_exec(const char *const *argv)
{
	json_t *cmd = json_array();
	for (const char *const *a = argv; *a; a++)
		json_array_append_new(cmd, json_string(*a));
	cleanup_json json_t *cfg =
		json_pack("{s:o, s:[], s:s, s:b, s:b, s:b, s:b}", "Cmd", cmd, "Env", "WorkingDir", "/workspace",
			  "AttachStdin", 0, "AttachStdout", 1, "AttachStderr", 1, "Tty", 0);
	brig_error *err = NULL;
	cleanup_free char *xid = NULL;
	check(brig_engine_exec_create(g_engine, &xid, g_cid, cfg, &err), "exec create", err);
	size_t bytes = 0;
	brig_engine_exec_io io = {.stdin_fd = -1,
				  .cancel_fd = -1,
				  .on_output = discard,
				  .payload = &bytes,
				  .deadline_ms = brig_now_ms() + 30000};
	check(brig_engine_exec_start(g_engine, xid, &io, &err), "exec start", err);
	int code = -1;
	check(brig_engine_exec_exit_code(g_engine, xid, brig_now_ms() + 10000, &code, &err), "exec exit code", err);
	return code;
}

static const char *const TRUE_ARGV[] = {"true", NULL};

static double timed(int (*fn)(const char *const *), const char *what)
{
	double t0 = now_ms();
	int code = fn(TRUE_ARGV);
	double t = now_ms() - t0;
	if (code != 0)
		die("%s: `true` exited %d", what, code);
	return t;
}

static double run_guest(void)
{
	return timed(guest_exec, "brig_guest_exec");
}

static double run_computer(void)
{
	return timed(computer_exec, "brig_computer_exec");
}

static double run_raw(void)
{
	return timed(raw_exec, "raw API exec");
}

static double run_docker(void)
{
	char *argv[] = {(char *)g_docker, "exec", g_name, "true", NULL};
	return spawn_ms(argv, environ);
}

static double run_brig_cli(void)
{
	char *argv[] = {(char *)g_brig, "exec", g_name, "--", "true", NULL};
	return spawn_ms(argv, environ);
}

/* --brig-before: an older brig binary (built from an earlier commit), with
 * a store of its own (its schema may be older). */
static const char *g_brig_before;
static char **g_before_env;

static double run_brig_before(void)
{
	char *argv[] = {(char *)g_brig_before, "exec", g_name, "--", "true", NULL};
	return spawn_ms(argv, g_before_env);
}

static void sdk_start(void)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	cleanup_free char *script = xasprintf("%s/docker_sdk_exec.py", BRIG_BENCH_DIR);
	char *argv[] = {(char *)g_python, script, "--serve", "-c", g_name, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	int rc = posix_spawn(&g_sdk_pid, g_python, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		die("cannot start %s: %s", g_python, strerror(rc));
	close(in[0]);
	close(out[1]);
	g_sdk_in = fdopen(in[1], "w");
	g_sdk_out = fdopen(out[0], "r");
	char line[64];
	if (!fgets(line, sizeof line, g_sdk_out) || strcmp(line, "ready\n") != 0)
		die("%s %s did not start (is python3-docker installed for it?)", g_python, script);
}

static double run_sdk(void)
{
	fputs("exec\n", g_sdk_in);
	fflush(g_sdk_in);
	char line[64] = "0";
	if (!fgets(line, sizeof line, g_sdk_out) && !g_stop)
		die("the Docker SDK exec_run failed (its traceback is above)");
	return strtod(line, NULL);
}

/* ---- part 3: 200 small commands ---- */

enum { SMALL = 200 };

/* The i-th small command: ls, echo > file, cat and grep of that file, by
 * turns (the file is written just before it is read). */
static void small_cmd(int i, char *buf, size_t bufsz, const char *argv[5])
{
	int f = (i / 4) % 8;
	switch (i % 4) {
	case 0: argv[0] = "ls", argv[1] = "-l", argv[2] = "/workspace", argv[3] = NULL; break;
	case 1:
		snprintf(buf, bufsz, "echo line %d > /workspace/bench-%d.txt", i, f);
		argv[0] = "sh", argv[1] = "-c", argv[2] = buf, argv[3] = NULL;
		break;
	case 2:
		snprintf(buf, bufsz, "/workspace/bench-%d.txt", f);
		argv[0] = "cat", argv[1] = buf, argv[2] = NULL;
		break;
	default:
		snprintf(buf, bufsz, "/workspace/bench-%d.txt", f);
		argv[0] = "grep", argv[1] = "-c", argv[2] = "line", argv[3] = buf, argv[4] = NULL;
	}
}

static double small_batch(int (*fn)(const char *const *), const char *what)
{
	double t0 = now_ms();
	for (int i = 0; i < SMALL; i++) {
		char buf[96];
		const char *argv[5];
		small_cmd(i, buf, sizeof buf, argv);
		int code = fn(argv);
		if (code != 0)
			die("%s: small command %d (%s) exited %d", what, i, argv[0], code);
	}
	return now_ms() - t0;
}

/* ---- main ---- */

enum { C_GUEST, C_COMPUTER, C_RAW, C_DOCKER, C_SDK, C_BRIG_CLI, C_BEFORE, NCOLS };
static const char *const col_names[NCOLS] = {
	"brig_guest_exec (held relay)", "brig_computer_exec", "raw Engine API exec", "docker exec (CLI)",
	"Docker SDK exec_run",          "brig exec (CLI)",    "brig exec (before)",
};

static void usage(void)
{
	fputs("usage: bench_guest [-n N] [-w WARMUP] [-b BATCHES] [-i IMAGE] [--brig PATH] [--docker PATH]\n"
	      "                   [--python PATH] [--brig-before PATH]\n",
	      stderr);
	exit(2);
}

static void row(const char *name, samples *s)
{
	printf("| %-30s | %8.2f | %8.2f |\n", name, median(s), pct(s, 95));
}

int main(int argc, char **argv)
{
	int n = 100, warm = 3, batches = 3;
	g_brig = getenv("BRIG_BIN") ? getenv("BRIG_BIN") : BRIG_BIN_DEFAULT;
	static const struct option lo[] = {{"brig", required_argument, NULL, 'B'},
					   {"docker", required_argument, NULL, 'd'},
					   {"python", required_argument, NULL, 'p'},
					   {"brig-before", required_argument, NULL, 'o'},
					   {NULL, 0, NULL, 0}};
	int opt;
	while ((opt = getopt_long(argc, argv, "n:w:b:i:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'w': warm = atoi(optarg); break;
		case 'b': batches = atoi(optarg); break;
		case 'i': g_image = optarg; break;
		case 'B': g_brig = optarg; break;
		case 'd': g_docker = optarg; break;
		case 'p': g_python = optarg; break;
		case 'o': g_brig_before = optarg; break;
		default: usage();
		}
	}
	if (n < 1 || warm < 0 || batches < 0)
		usage();
	/* SA_RESTART: a Ctrl-C ends the rounds where they stand, not a read from
	 * the SDK's pipe halfway (the tables of what was measured still print). */
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	atexit(cleanup);
	srandom((unsigned)getpid());

	/* brig exec audits every command into a session store: a private one. */
	if (!getenv("BRIG_STORE")) {
		snprintf(g_store_dir, sizeof g_store_dir, "/tmp/bench_guest.XXXXXX");
		if (!mkdtemp(g_store_dir))
			die("mkdtemp: %s", strerror(errno));
		snprintf(g_store_file, sizeof g_store_file, "%s/store.db", g_store_dir);
		setenv("BRIG_STORE", g_store_file, 1);
	}
	if (g_brig_before) {
		if (!g_store_dir[0])
			die("--brig-before needs its own store: leave BRIG_STORE unset");
		snprintf(g_store_before, sizeof g_store_before, "%s/before.db", g_store_dir);
		size_t k = 0;
		while (environ[k])
			k++;
		g_before_env = xcalloc(k + 1, sizeof *g_before_env);
		for (size_t i = 0; i < k; i++)
			g_before_env[i] = strncmp(environ[i], "BRIG_STORE=", 11) == 0
						  ? xasprintf("BRIG_STORE=%s", g_store_before)
						  : environ[i];
	}
	int ncols = g_brig_before ? NCOLS : C_BEFORE;

	brig_error *err = NULL;
	check(brig_engine_open(&g_engine, NULL, &err), "connect to dockerd", err);
	char uniq[40], ns[48], label[64];
	snprintf(uniq, sizeof uniq, "bench%d-%llx", (int)getpid(), (unsigned long long)brig_wall_s());
	snprintf(ns, sizeof ns, "b%d%llx", (int)getpid(), (unsigned long long)brig_wall_s());
	snprintf(label, sizeof label, "brig.test=%s", uniq);
	brig_spec spec;
	brig_spec_init(&spec);
	check(brig_spec_set(&spec, "image", g_image, &err), "image", err);
	check(brig_spec_add_label(&spec, label, &err), "label", err);
	brig_identity id = {.ns = ns, .agent = "bench", .session = "guest", .generation = 1};
	char name[BRIG_NAME_SIZE];
	check(brig_identity_name(name, &id, &err), "identity", err);
	g_name = xstrdup(name); /* destroyed at exit even if create fails half-way */
	brig_computer *c = NULL;
	fprintf(stderr, "bench_guest: creating computer %s (image %s, label %s)\n", name, g_image, label);
	check(brig_computer_create(g_engine, &c, &id, &spec, &err), "create the computer", err);
	g_cid = xstrdup(c->id);
	brig_computer_free(c);
	brig_spec_clear(&spec);
	check(brig_guest_open(&g_guest, g_engine, g_cid, 0, &err), "open the relay (is brig-init in this build?)", err);
	sdk_start();

	/* Parts 1 and 2: one exec of `true` per way per round. */
	double (*fn[NCOLS])(void) = {run_guest, run_computer, run_raw,        run_docker,
				     run_sdk,   run_brig_cli, run_brig_before};
	samples s[NCOLS] = {{0}};
	enum { P_GUEST_RAW, P_GUEST_DOCKER, P_GUEST_SDK, P_COMP_RAW, P_CLI_DOCKER, P_CLI_BEFORE, NPAIRS };
	static const char *const pair_names[NPAIRS] = {"held relay - raw API exec",     "held relay - docker exec",
						       "held relay - SDK exec_run",     "brig_computer_exec - raw API",
						       "brig exec (CLI) - docker exec", "brig exec (CLI) - before"};
	static const int pair_cols[NPAIRS][2] = {{C_GUEST, C_RAW},    {C_GUEST, C_DOCKER},    {C_GUEST, C_SDK},
						 {C_COMPUTER, C_RAW}, {C_BRIG_CLI, C_DOCKER}, {C_BRIG_CLI, C_BEFORE}};
	samples d[NPAIRS] = {{0}};
	int npairs = g_brig_before ? NPAIRS : P_CLI_BEFORE;
	fprintf(stderr, "bench_guest: %d warm-up + %d interleaved rounds of `true`, %d ways\n", warm, n, ncols);
	for (int r = -warm; r < n && !g_stop; r++) {
		double t[NCOLS];
		/* A fresh random order each round: a fixed rotation would always put
		 * the same way right after another (say, the held relay right after
		 * a brig or docker process whose exec dockerd is still tearing
		 * down), and charge one way for another's wake. */
		int order[NCOLS], done = 0;
		for (int k = 0; k < ncols; k++)
			order[k] = k;
		for (int k = ncols - 1; k > 0; k--) {
			int j = (int)(random() % (k + 1)), tmp = order[k];
			order[k] = order[j];
			order[j] = tmp;
		}
		for (int k = 0; k < ncols && !g_stop; k++, done++)
			t[order[k]] = fn[order[k]]();
		if (r >= 0 && done == ncols && !g_stop) {
			for (int col = 0; col < ncols; col++)
				add(&s[col], t[col]);
			for (int i = 0; i < npairs; i++)
				add(&d[i], t[pair_cols[i][0]] - t[pair_cols[i][1]]);
		}
		if (r >= 0 && (r + 1) % 20 == 0)
			fprintf(stderr, "bench_guest: %d/%d\n", r + 1, n);
	}
	sdk_stop();

	/* The relay's own cost: the two brig ways back to back, alternating in
	 * chunks of 10, nothing else between them (no process exits, no Docker
	 * exec being torn down). */
	samples bb[2] = {{0}};
	if (!g_stop)
		fprintf(stderr, "bench_guest: %d back-to-back execs of `true` per relay way\n", n);
	for (int r = 0; r < n && !g_stop; r += 10)
		for (int w = 0; w < 2 && !g_stop; w++)
			for (int k = r; k < r + 10 && k < n; k++)
				add(&bb[w], w ? run_computer() : run_guest());

	/* Part 3: batches of 200 small commands, the ways alternating. */
	enum { B_GUEST, B_COMPUTER, B_RAW, NB };
	static const char *const b_names[NB] = {"held relay (brig_guest_exec)", "brig_computer_exec",
						"raw Engine API exec"};
	int (*bfn[NB])(const char *const *) = {guest_exec, computer_exec, raw_exec};
	samples bs[NB] = {{0}};
	if (batches && !g_stop)
		fprintf(stderr, "bench_guest: %d batches of %d small commands, %d ways\n", batches, SMALL, NB);
	for (int b = 0; b < batches && !g_stop; b++)
		for (int k = 0; k < NB && !g_stop; k++) {
			int w = (b + k) % NB;
			add(&bs[w], small_batch(bfn[w], b_names[w]));
		}

	printf("\n1. Exec of `true` in one running computer, %zu rounds interleaved in random order;\n"
	       "   the last two rows: %zu calls back to back (ms)\n\n",
	       s[0].n, bb[0].n);
	printf("| %-30s | %8s | %8s |\n", "way", "median", "p95");
	printf("|--------------------------------|----------|----------|\n");
	for (int col = 0; col < C_BRIG_CLI; col++)
		row(col_names[col], &s[col]);
	row("held relay, back to back", &bb[0]);
	row("brig_computer_exec, b2b", &bb[1]);
	printf("\n2. As a process (both include process start), same rounds (ms)\n\n");
	printf("| %-30s | %8s | %8s |\n", "way", "median", "p95");
	printf("|--------------------------------|----------|----------|\n");
	row(col_names[C_BRIG_CLI], &s[C_BRIG_CLI]);
	row(col_names[C_DOCKER], &s[C_DOCKER]);
	if (g_brig_before)
		row(col_names[C_BEFORE], &s[C_BEFORE]);
	printf("\nPaired by round (ms; negative: the first was faster)\n\n");
	printf("| %-30s | %8s | %17s | %14s |\n", "pair", "median", "95 % CI of median", "first faster");
	printf("|--------------------------------|----------|-------------------|----------------|\n");
	for (int i = 0; i < npairs; i++) {
		double ci_lo, ci_hi;
		size_t wins = count_below(&d[i], 0);
		median_ci(&d[i], &ci_lo, &ci_hi);
		char ci[40], w[40];
		snprintf(ci, sizeof ci, "%.2f .. %.2f", ci_lo, ci_hi);
		snprintf(w, sizeof w, "%zu of %zu", wins, d[i].n);
		printf("| %-30s | %8.2f | %17s | %14s |\n", pair_names[i], median(&d[i]), ci, w);
	}
	if (bs[0].n) {
		printf("\n3. %d small commands (ls, echo > file, cat, grep) in one process, total per batch,\n"
		       "   %zu batches (ms; min and max of the batches)\n\n",
		       SMALL, bs[0].n);
		printf("| %-30s | %9s | %9s | %9s | %8s |\n", "way", "median", "min", "max", "per cmd");
		printf("|--------------------------------|-----------|-----------|-----------|----------|\n");
		for (int w = 0; w < NB; w++) {
			double m = median(&bs[w]);
			printf("| %-30s | %9.1f | %9.1f | %9.1f | %8.2f |\n", b_names[w], m, bs[w].v[0],
			       bs[w].v[bs[w].n - 1], m / SMALL);
		}
	}
	fflush(stdout);
	for (int col = 0; col < NCOLS; col++)
		free(s[col].v);
	for (int i = 0; i < NPAIRS; i++)
		free(d[i].v);
	for (int w = 0; w < NB; w++)
		free(bs[w].v);
	free(bb[0].v);
	free(bb[1].v);
	cleanup();
	free(g_cid);
	brig_engine_free(g_engine);
	g_engine = NULL;
	return g_stop ? 130 : 0;
}
