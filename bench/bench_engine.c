/* bench_engine.c — times /_ping, container inspect and exec of `true` through
 * brig's engine client, curl --unix-socket and the docker CLI, side by side.
 *
 * Why this shape: issue 2 asks that brig's client is never slower than curl.
 * A curl process per request mostly measures process start, so the table also
 * shows curl's own clock for those same requests (-w %{time_total}) and, for
 * the single-request operations, one curl process reusing one connection —
 * the comparisons where the transport itself is what is measured. The three
 * ways of one operation are interleaved round by round so that noise on this
 * small machine falls on all of them alike. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/engine.h"
#include "util/util.h"

extern char **environ;

enum { OP_PING, OP_INSPECT, OP_EXEC, NOPS };
/* curl_self is curl's own -w %{time_total} (summed over the processes of one
 * sample): the request without process start. */
enum { M_BRIG, M_CURL, M_CURL_SELF, M_DOCKER, M_BRIG_B2B, M_CURL_KA, NMETHODS };

static const char *const op_names[NOPS] = {"/_ping", "container inspect", "exec of `true`"};
static const char *const method_names[NMETHODS] = {"brig client", "curl (process)",    "curl self-time",
						   "docker CLI",  "brig back-to-back", "curl keep-alive"};

typedef struct samples {
	double *v;
	size_t n;
} samples;

static samples S[NOPS][NMETHODS];

/* What the exit path needs: the client and the container to remove. */
static brig_engine *g_engine;
static char *g_container;
static volatile sig_atomic_t g_stop;

static const char *g_curl, *g_docker, *g_sock;
static char *g_api;
static int g_out = -1; /* memfd receiving a child's stdout */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void die_err(const char *what, int rc, brig_error *err)
{
	die("%s: %s (%s)", what, brig_error_message(err), brig_error_name(rc));
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void add_sample(int op, int m, double v, size_t cap)
{
	samples *s = &S[op][m];
	if (!s->v)
		s->v = xcalloc(cap, sizeof *s->v);
	if (s->n < cap)
		s->v[s->n++] = v;
}

static void check_stop(void)
{
	if (g_stop) {
		fputs("bench: interrupted\n", stderr);
		exit(130);
	}
}

/* ---- cleanup: the container goes away on every exit path ---- */

static void remove_container(void)
{
	if (!g_container || !g_engine)
		return;
	brig_error *err = NULL;
	int rc = brig_engine_container_remove(g_engine, g_container, true, true, &err);
	if (rc && rc != BRIG_ENOTFOUND)
		fprintf(stderr, "bench: could not remove container %.12s: %s — remove it with `docker rm -f %s`\n",
			g_container, brig_error_message(err), g_container);
	else
		fprintf(stderr, "bench: removed container %.12s\n", g_container);
	brig_error_free(err);
	free(g_container);
	g_container = NULL;
}

static void on_signal(int sig)
{
	/* The loops check the flag between samples and exit through atexit; a
	 * second signal means the user really wants out now. */
	if (g_stop) {
		signal(sig, SIG_DFL);
		raise(sig);
	}
	g_stop = 1;
}

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: waits wake up */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* ---- child processes ---- */

static char *find_in_path(const char *name)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");
		char *cand = xasprintf("%.*s/%s", (int)len, len ? path : ".", name);
		struct stat st;
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			return cand;
		free(cand);
		path += len;
		if (*path == ':')
			path++;
	}
	return NULL;
}

/* Runs argv with stdin and (unless capture) stdout on /dev/null, stderr
 * inherited so failures explain themselves. With capture, stdout lands in
 * g_out and is returned NUL-terminated in *out. Returns the wait status. */
static int run(char *const argv[], bool capture, char **out)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (capture) {
		if (ftruncate(g_out, 0) < 0 || lseek(g_out, 0, SEEK_SET) < 0)
			die("memfd: %s", strerror(errno));
		posix_spawn_file_actions_adddup2(&fa, g_out, 1);
	} else {
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	}
	pid_t pid;
	int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		die("cannot start %s: %s", argv[0], strerror(r));
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	}
	if (capture) {
		off_t len = lseek(g_out, 0, SEEK_CUR);
		if (len < 0 || len > (1 << 24))
			die("child output: unexpected size");
		char *buf = xmalloc((size_t)len + 1);
		ssize_t got = pread(g_out, buf, (size_t)len, 0);
		buf[got > 0 ? got : 0] = '\0';
		*out = buf;
	}
	return status;
}

static void run_ok(char *const argv[])
{
	int st = run(argv, false, NULL);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("`%s %s …` failed (status %d)", argv[0], argv[1], st);
}

#define CURL_W "\n%{http_code} %{time_total} %{num_connects}\n"

/* One curl process: method/body as given, body captured or discarded.
 * Returns curl's own time_total in ms; *body (may be NULL) gets the body. */
static double curl_once(const char *url, const char *data, int want_status, char **body)
{
	char *argv[16];
	int n = 0;
	argv[n++] = (char *)g_curl;
	argv[n++] = "-sS";
	argv[n++] = "--unix-socket";
	argv[n++] = (char *)g_sock;
	if (data) {
		argv[n++] = "-H";
		argv[n++] = "Content-Type: application/json";
		argv[n++] = "--data-binary";
		argv[n++] = (char *)data;
	}
	if (!body) {
		argv[n++] = "-o";
		argv[n++] = "/dev/null";
	}
	argv[n++] = "-w";
	argv[n++] = CURL_W;
	argv[n++] = (char *)url;
	argv[n] = NULL;
	char *out = NULL;
	int st = run(argv, true, &out);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("curl %s failed (status %d)", url, st);
	/* The -w line is the last one; the body (if any) precedes it. */
	size_t len = strlen(out);
	while (len && out[len - 1] == '\n')
		out[--len] = '\0';
	char *line = strrchr(out, '\n');
	int code = 0;
	double secs = 0;
	if (!line || sscanf(line + 1, "%d %lf", &code, &secs) != 2)
		die("curl %s: cannot read its -w line", url);
	if (code != want_status)
		die("curl %s: HTTP %d (want %d): %.200s", url, code, want_status, out);
	*line = '\0';
	if (body)
		*body = out;
	else
		free(out);
	return secs * 1e3;
}

/* ---- the operations, one sample each ---- */

static json_t *g_exec_cfg;
static char *g_exec_body;

static int discard_output(int stream, const char *data, size_t len, void *payload)
{
	return 0;
}

static double brig_op(int op)
{
	brig_error *err = NULL;
	double t0 = now_ms();
	int rc = 0;
	if (op == OP_PING) {
		rc = brig_engine_ping(g_engine, &err);
		if (rc)
			die_err("brig ping", rc, err);
	} else if (op == OP_INSPECT) {
		json_t *j = NULL;
		rc = brig_engine_container_inspect(g_engine, &j, g_container, &err);
		if (rc)
			die_err("brig inspect", rc, err);
		json_decref(j);
	} else {
		char *xid = NULL;
		rc = brig_engine_exec_create(g_engine, &xid, g_container, g_exec_cfg, &err);
		if (rc)
			die_err("brig exec create", rc, err);
		brig_engine_exec_io io = {.stdin_fd = -1, .cancel_fd = -1, .on_output = discard_output};
		rc = brig_engine_exec_start(g_engine, xid, &io, &err);
		if (rc)
			die_err("brig exec start", rc, err);
		int code = -1;
		rc = brig_engine_exec_exit_code(g_engine, xid, 0, &code, &err);
		if (rc)
			die_err("brig exec exit code", rc, err);
		if (code != 0)
			die("brig exec of true exited %d", code);
		free(xid);
	}
	return now_ms() - t0;
}

/* Copies the value of "key":"…" out of a JSON text (the daemon's compact
 * output); enough for an exec Id. */
static char *json_str_field(const char *text, const char *key)
{
	char *pat = xasprintf("\"%s\":\"", key);
	const char *p = strstr(text, pat);
	free(pat);
	if (!p)
		return NULL;
	p = strchr(p, ':') + 2;
	size_t n = strcspn(p, "\"");
	return p[n] == '"' && n ? xstrndup(p, n) : NULL;
}

/* Returns wall time; *self gets curl's own time for the same requests. */
static double curl_op(int op, double *self)
{
	double t0 = now_ms();
	if (op == OP_PING) {
		*self = curl_once("http://d/_ping", NULL, 200, NULL);
	} else if (op == OP_INSPECT) {
		cleanup_free char *url = xasprintf("http://d/v%s/containers/%s/json", g_api, g_container);
		*self = curl_once(url, NULL, 200, NULL);
	} else {
		cleanup_free char *url = xasprintf("http://d/v%s/containers/%s/exec", g_api, g_container);
		cleanup_free char *body = NULL;
		*self = curl_once(url, g_exec_body, 201, &body);
		cleanup_free char *xid = json_str_field(body, "Id");
		if (!xid)
			die("curl exec create: no Id in %.200s", body);
		cleanup_free char *surl = xasprintf("http://d/v%s/exec/%s/start", g_api, xid);
		*self += curl_once(surl, "{\"Detach\":false,\"Tty\":false}", 200, NULL);
		cleanup_free char *iurl = xasprintf("http://d/v%s/exec/%s/json", g_api, xid);
		for (int tries = 0;; tries++) {
			cleanup_free char *j = NULL;
			*self += curl_once(iurl, NULL, 200, &j);
			/* Like brig: ExitCode is null until the daemon has reaped it. */
			if (strstr(j, "\"Running\":false") && !strstr(j, "\"ExitCode\":null")) {
				if (!strstr(j, "\"ExitCode\":0,") && !strstr(j, "\"ExitCode\":0}"))
					die("curl exec of true: bad exit: %.300s", j);
				break;
			}
			if (tries > 1000)
				die("curl exec %.12s: still running", xid);
		}
	}
	return now_ms() - t0;
}

static double docker_op(int op)
{
	double t0 = now_ms();
	if (op == OP_PING) {
		char *argv[] = {(char *)g_docker, "version", "--format", "{{.Server.APIVersion}}", NULL};
		run_ok(argv);
	} else if (op == OP_INSPECT) {
		char *argv[] = {(char *)g_docker, "inspect", g_container, NULL};
		run_ok(argv);
	} else {
		char *argv[] = {(char *)g_docker, "exec", g_container, "true", NULL};
		run_ok(argv);
	}
	return now_ms() - t0;
}

/* brig, curl and docker in a rotating order per round. */
static void bench_op(int op, int n, int warm)
{
	fprintf(stderr, "bench: %s: %d rounds of brig/curl/docker (+%d warm-up)\n", op_names[op], n, warm);
	for (int i = 0; i < warm + n; i++) {
		bool keep = i >= warm;
		for (int k = 0; k < 3; k++) {
			int which = (i + k) % 3;
			if (which == 0) {
				double v = brig_op(op);
				if (keep)
					add_sample(op, M_BRIG, v, (size_t)n);
			} else if (which == 1) {
				double self = 0, v = curl_op(op, &self);
				if (keep) {
					add_sample(op, M_CURL, v, (size_t)n);
					add_sample(op, M_CURL_SELF, self, (size_t)n);
				}
			} else {
				double v = docker_op(op);
				if (keep)
					add_sample(op, M_DOCKER, v, (size_t)n);
			}
			check_stop();
		}
	}
}

/* One curl process fetching url warm+count times over one connection; each
 * transfer's own time_total after the warm-up is a sample. */
static void curl_keepalive_chunk(int op, const char *url, int count, int warm, int n)
{
	int total = warm + count;
	char **argv = xcalloc((size_t)total * 3 + 8, sizeof *argv);
	int k = 0;
	argv[k++] = (char *)g_curl;
	argv[k++] = "-sS";
	argv[k++] = "--unix-socket";
	argv[k++] = (char *)g_sock;
	argv[k++] = "-w";
	argv[k++] = "%{http_code} %{time_total} %{num_connects}\n";
	for (int i = 0; i < total; i++) {
		argv[k++] = "-o";
		argv[k++] = "/dev/null";
		argv[k++] = (char *)url;
	}
	argv[k] = NULL;
	char *out = NULL;
	int st = run(argv, true, &out);
	free(argv);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("curl keep-alive run failed (status %d)", st);
	int i = 0, connects = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
		int code = 0, nc = 0;
		double secs = 0;
		if (sscanf(line, "%d %lf %d", &code, &secs, &nc) != 3 || code != 200)
			die("curl keep-alive: unexpected line '%.80s'", line);
		connects += nc;
		if (i >= warm)
			add_sample(op, M_CURL_KA, secs * 1e3, (size_t)n);
	}
	free(out);
	if (i != total)
		die("curl keep-alive: %d results for %d requests", i, total);
	if (connects != 1)
		fprintf(stderr, "bench: note: curl opened %d connections for %d requests\n", connects, total);
}

static void brig_b2b_chunk(int op, int count, int warm, int n)
{
	for (int i = 0; i < warm + count; i++) {
		double v = brig_op(op);
		if (i >= warm)
			add_sample(op, M_BRIG_B2B, v, (size_t)n);
	}
}

/* Requests back to back find the daemon's threads awake, which the rounds
 * above never do (a process runs between two requests), so one curl process
 * reusing its connection is compared with brig also running back to back.
 * The two alternate in chunks so that drift on the machine hits both. */
static void bench_back_to_back(int op, const char *url, int n, int warm)
{
	enum { CHUNKS = 4 };
	fprintf(stderr, "bench: %s: brig back to back and one curl process per chunk, %d chunks of %d (+%d warm-up)\n",
		op_names[op], CHUNKS, (n + CHUNKS - 1) / CHUNKS, warm);
	for (int c = 0; c < CHUNKS; c++) {
		int count = n / CHUNKS + (c < n % CHUNKS);
		if (!count)
			continue;
		if (c % 2 == 0) {
			brig_b2b_chunk(op, count, warm, n);
			curl_keepalive_chunk(op, url, count, warm, n);
		} else {
			curl_keepalive_chunk(op, url, count, warm, n);
			brig_b2b_chunk(op, count, warm, n);
		}
		check_stop();
	}
}

/* ---- statistics and the table ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(const samples *s)
{
	return s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
}

/* Nearest-rank p95. */
static double p95(const samples *s)
{
	size_t r = (s->n * 95 + 99) / 100;
	return s->v[r ? r - 1 : 0];
}

static void verdict(int op, int mb, int mc, const char *label)
{
	const samples *b = &S[op][mb], *c = &S[op][mc];
	if (!b->n || !c->n)
		return;
	double bm = median(b), cm = median(c);
	printf("  %-30s %5.2fx  (%.2f vs %.2f ms)%s\n", label, bm / cm, bm, cm, bm > cm ? "  <- brig SLOWER" : "");
}

static void print_table(int n, int warm, const char *server)
{
	for (int o = 0; o < NOPS; o++)
		for (int m = 0; m < NMETHODS; m++)
			if (S[o][m].n)
				qsort(S[o][m].v, S[o][m].n, sizeof(double), cmp_double);

	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	printf("bench_engine: median / p95 in ms, %d samples per cell after %d warm-up, CLOCK_MONOTONIC; "
	       "Docker %s, API %s, %ld CPUs.\n",
	       n, warm, server, g_api, cpus);
	printf("curl (process) and docker CLI include process start (posix_spawn to waitpid). "
	       "curl self-time = curl's own -w %%{time_total} of those same processes (fresh connection each).\n"
	       "Columns 1-4 are measured in interleaved rounds; back-to-back = brig's calls in a tight loop vs one "
	       "curl process fetching the URL repeatedly over one connection, alternating in chunks.\n\n");
	printf("%-18s", "operation");
	for (int m = 0; m < NMETHODS; m++)
		printf(" | %-17s", method_names[m]);
	printf("\n------------------");
	for (int m = 0; m < NMETHODS; m++)
		printf("-+------------------");
	printf("\n");
	for (int o = 0; o < NOPS; o++) {
		printf("%-18s", op_names[o]);
		for (int m = 0; m < NMETHODS; m++) {
			if (S[o][m].n)
				printf(" | %7.2f / %7.2f", median(&S[o][m]), p95(&S[o][m]));
			else
				printf(" | %17s", "n/a");
		}
		printf("\n");
	}
	printf("\ndocker CLI: /_ping = `docker version --format '{{.Server.APIVersion}}'` (closest ping-equivalent; it "
	       "also GETs /version), inspect = `docker inspect ID`, exec = `docker exec ID true`.\n");
	printf("exec: brig = exec create + start + exit code on one client (pooled keep-alive; the hijacked start "
	       "takes its own connection); curl = 3 processes: POST /containers/ID/exec, POST /exec/XID/start, "
	       "GET /exec/XID/json (repeated until Running is false).\n\n");
	printf("brig/curl, ratio of medians (below 1 = brig faster):\n");
	for (int o = 0; o < NOPS; o++) {
		printf("%s\n", op_names[o]);
		verdict(o, M_BRIG, M_CURL, "brig vs curl (process)");
		verdict(o, M_BRIG, M_CURL_SELF, "brig vs curl self-time");
		verdict(o, M_BRIG_B2B, M_CURL_KA, "brig vs curl, back to back");
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_engine [-n N] [-w WARMUP] [-i IMAGE]\n"
		   "  Times /_ping, container inspect and exec of `true` through brig's client, curl\n"
		   "  --unix-socket and the docker CLI. Table on stdout, progress on stderr.\n"
		   "  -n N        samples per cell (default 200)\n"
		   "  -w WARMUP   warm-up rounds per operation (default 10)\n"
		   "  -i IMAGE    image for the benchmark container (default brig-test:local)\n");
}

int main(int argc, char **argv)
{
	int n = 200, warm = 10, c;
	const char *image = "brig-test:local";
	while ((c = getopt(argc, argv, "n:w:i:h")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'w': warm = atoi(optarg); break;
		case 'i': image = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (n < 1 || n > 1000000 || warm < 0 || warm > 100000) {
		usage(stderr);
		return 2;
	}

	const char *host = getenv("DOCKER_HOST");
	if (!host || !*host)
		g_sock = "/var/run/docker.sock";
	else if (strncmp(host, "unix://", 7) == 0)
		g_sock = host + 7;
	else
		die("DOCKER_HOST=%s: the curl columns need a unix socket", host);
	char *curl = find_in_path("curl"), *docker = find_in_path("docker");
	if (!curl)
		die("curl not found in PATH (apt-get install curl)");
	if (!docker)
		die("docker not found in PATH (apt-get install docker.io)");
	g_curl = curl;
	g_docker = docker;
	g_out = memfd_create("bench-out", MFD_CLOEXEC);
	if (g_out < 0)
		die("memfd_create: %s", strerror(errno));

	install_signals();
	atexit(remove_container);
	brig_error *err = NULL;
	int rc = brig_engine_open(&g_engine, NULL, &err);
	if (rc)
		die_err("open the engine client", rc, err);
	g_api = xstrdup(brig_engine_api_version(g_engine));
	json_t *ver = NULL;
	rc = brig_engine_version(g_engine, &ver, &err);
	if (rc)
		die_err("version", rc, err);
	cleanup_free char *server = xstrdup(json_string_value(json_object_get(ver, "Version")) ?: "?");
	json_decref(ver);

	cleanup_free char *name = xasprintf("brigbench-%ld-%d", (long)time(NULL), (int)getpid());
	json_t *cfg = json_pack("{s:s, s:[s,s], s:{s:s}, s:{s:s, s:b}}", "Image", image, "Cmd", "sleep", "3600",
				"Labels", "brig.bench", "1", "HostConfig", "NetworkMode", "none", "Init", 1);
	fprintf(stderr, "bench: creating container %s from %s\n", name, image);
	rc = brig_engine_container_create(g_engine, &g_container, name, cfg, &err);
	json_decref(cfg);
	if (rc)
		die_err("create the benchmark container (is the image there? bash scripts/build-test-image)", rc, err);
	rc = brig_engine_container_start(g_engine, g_container, &err);
	if (rc)
		die_err("start the benchmark container", rc, err);
	check_stop();

	g_exec_cfg = json_pack("{s:[s], s:b, s:b}", "Cmd", "true", "AttachStdout", 1, "AttachStderr", 1);
	g_exec_body = json_dumps(g_exec_cfg, JSON_COMPACT);

	for (int o = 0; o < NOPS; o++)
		bench_op(o, n, warm);
	bench_back_to_back(OP_PING, "http://d/_ping", n, warm);
	cleanup_free char *iurl = xasprintf("http://d/v%s/containers/%s/json", g_api, g_container);
	bench_back_to_back(OP_INSPECT, iurl, n, warm);

	remove_container();
	print_table(n, warm, server);
	fflush(stdout);

	json_decref(g_exec_cfg);
	free(g_exec_body);
	brig_engine_free(g_engine);
	g_engine = NULL;
	free(g_api);
	free(curl);
	free(docker);
	for (int o = 0; o < NOPS; o++)
		for (int m = 0; m < NMETHODS; m++)
			free(S[o][m].v);
	return 0;
}
