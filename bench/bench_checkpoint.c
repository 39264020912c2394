/* bench_checkpoint.c — times brig checkpoints and a brig restore of a 256 MB
 * workspace, in two shapes (25 000 files of 10 KB; one 256 MiB file of
 * random data), next to `docker cp` out of and into a container of the same
 * data. Median of N rounds (5 by default), one table on stdout.
 *
 * What each column does:
 *  - checkpoint: brig_checkpoint_create in-process into an empty checkpoint
 *    directory (no previous manifest, no blobs): brig-init lists the tree,
 *    every file is read through it, SHA-256'd once and stored as a blob,
 *    the listing is taken again, manifest, syncfs, store record;
 *  - 2nd unchanged: the next checkpoint with nothing changed (list twice,
 *    every digest reused, the same manifest);
 *  - 2nd one changed: the next one after one 10 KB file was rewritten;
 *  - full copy: the older format (BRIG_CHECKPOINT_FULL=1) — pause, archive
 *    GET, entry checks, zstd (level 3), SHA-256, fsync, verify, rename;
 *  - restore: brig_checkpoint_restore of the last incremental checkpoint into
 *    a computer with empty volumes — every blob's digest checked first, then
 *    one archive PUT per volume;
 *  - docker cp out / in: the docker CLI (process start included, ≈20–40 ms)
 *    copying container:/workspace to a host directory, and that directory
 *    back into an empty /workspace: no compression, no digest, no freeze.
 * Rounds are interleaved so noise falls on all columns alike. Every object
 * carries brig.bench=<id> and is removed at exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/session.h"
#include "brig/store.h"
#include "util/util.h"

extern char **environ;

static brig_engine *E;
static brig_store *S;
static char TMP[64];
static char LABEL[64];
static char NS[32];
static int ROUNDS = 5;

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

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs argv (argv[0] through PATH), output to /dev/null unless out_fd >= 0.
 * Returns the exit status. */
static int run(char *const argv[], int out_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		die("cannot run %s: %s", argv[0], strerror(r));
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void run_ok(char *const argv[])
{
	int rc = run(argv, -1);
	if (rc != 0)
		die("`%s %s …` exited %d", argv[0], argv[1], rc);
}

/* ---- cleanup ---- */

static void cleanup(void)
{
	if (!E)
		return;
	json_t *f = json_pack("{s:[s]}", "label", LABEL);
	json_t *list = NULL;
	if (brig_engine_container_list(E, &list, true, f, NULL) == 0) {
		size_t i;
		json_t *c;
		json_array_foreach (list, i, c) {
			const char *names = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
			if (names)
				brig_computer_destroy(E, names[0] == '/' ? names + 1 : names, NULL);
		}
		json_decref(list);
	}
	list = NULL;
	if (brig_engine_volume_list(E, &list, f, NULL) == 0) {
		size_t i;
		json_t *v;
		json_array_foreach (json_object_get(list, "Volumes"), i, v) {
			const char *n = json_string_value(json_object_get(v, "Name"));
			if (n)
				brig_engine_volume_remove(E, n, true, NULL);
		}
		json_decref(list);
	}
	json_decref(f);
	if (TMP[0]) {
		char *argv[] = {"rm", "-rf", TMP, NULL};
		run(argv, -1);
	}
}

static void on_signal(int sig)
{
	signal(sig, SIG_DFL);
	cleanup();
	raise(sig);
}

/* ---- data ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static void fill_random(char *buf, size_t n)
{
	for (size_t i = 0; i + 8 <= n; i += 8) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		memcpy(buf + i, &rng, 8);
	}
}

static void write_file(const char *path, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("create %s: %s", path, strerror(errno));
	static char buf[1 << 20];
	for (size_t done = 0; done < size;) {
		size_t n = size - done < sizeof buf ? size - done : sizeof buf;
		fill_random(buf, sizeof buf);
		if (brig_write_all(fd, buf, n) < 0)
			die("write %s: %s", path, strerror(errno));
		done += n;
	}
	if (fchown(fd, 1000, 1000) < 0)
		die("chown %s: %s", path, strerror(errno));
	close(fd);
}

static void make_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("mkdir %s: %s", path, strerror(errno));
	if (chown(path, 1000, 1000) < 0)
		die("chown %s: %s", path, strerror(errno));
}

typedef struct shape {
	const char *tag;
	const char *label;
	int files;
	size_t file_size;
	int per_dir; /* files per subdirectory; 0: top level */
	uint64_t bytes;
	char *host; /* host copy of the data */
	char *src, *dst;
	double t[7][16];
	uint64_t blob_bytes, one_bytes;
} shape;

static void make_data(shape *sh)
{
	sh->host = xasprintf("%s/data-%s", TMP, sh->tag);
	make_dir(sh->host);
	for (int i = 0; i < sh->files; i++) {
		char *path;
		if (sh->per_dir) {
			char *d = xasprintf("%s/d%03d", sh->host, i / sh->per_dir);
			if (i % sh->per_dir == 0)
				make_dir(d);
			path = xasprintf("%s/f%05d", d, i);
			free(d);
		} else {
			path = xasprintf("%s/big", sh->host);
		}
		write_file(path, sh->file_size);
		free(path);
	}
	sh->bytes = (uint64_t)sh->files * sh->file_size;
}

/* ---- computers ---- */

static char *up(const char *session)
{
	brig_error *err = NULL;
	brig_spec spec;
	brig_spec_init(&spec);
	int rc;
	if ((rc = brig_spec_set(&spec, "image",
				getenv("BRIG_TEST_IMAGE") ? getenv("BRIG_TEST_IMAGE") : "brig-test:local", &err)) !=
		    0 ||
	    (rc = brig_spec_set(&spec, "workspace-mb", "384", &err)) != 0 ||
	    (rc = brig_spec_set(&spec, "memory-mb", "2048", &err)) != 0 ||
	    (rc = brig_spec_add_label(&spec, LABEL, &err)) != 0)
		die_err("spec", rc, err);
	brig_identity id = {NS, "bench", session, 1};
	brig_computer *c = NULL;
	if ((rc = brig_session_up(E, S, &c, &id, &spec, &err)) != 0)
		die_err("brig up", rc, err);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	brig_spec_clear(&spec);
	return name;
}

/* Runs a shell script in ref; returns stdout (caller frees). */
static char *sh_run(const char *ref, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {
		.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1, .timeout_ms = 600000};
	brig_exec_result r;
	brig_error *err = NULL;
	int rc = brig_computer_exec(E, ref, &o, &r, &err);
	if (rc != 0 || r.exit_code != 0)
		die("`%s` in %s: %s (exit %d) %s", script, ref, brig_error_message(err), r.exit_code, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

/* A fresh target with empty volumes. docker cp writes root-owned files
 * (-a fails on this daemon: "getent unable to find entry \"1000:1000\""),
 * which uid 1000 cannot delete, so the target is recreated instead. */
static void fresh_target(shape *sh)
{
	if (sh->dst)
		brig_computer_destroy(E, sh->dst, NULL);
	free(sh->dst);
	/* a new session each time: up refuses a session whose computer was removed without a checkpoint */
	static int n;
	char *session = xasprintf("%s-dst%d", sh->tag, ++n);
	sh->dst = up(session);
	free(session);
}

/* Count and content digest of /workspace: proves a copy was complete. */
static char *fingerprint(const char *ref)
{
	return sh_run(ref, "cd /workspace && find . -type f | sort | tee /runtime/.list | wc -l && "
			   "xargs cat < /runtime/.list | md5sum && rm /runtime/.list");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double tmp[16];
	memcpy(tmp, v, (size_t)n * sizeof *v);
	qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

enum { T_CKPT, T_SAME, T_ONE, T_FULL, T_RESTORE, T_CP_OUT, T_CP_IN, T_N };

static void bench_shape(shape *sh, const char *ckdir)
{
	note("%s: writing %d × %zu bytes on the host", sh->label, sh->files, sh->file_size);
	make_data(sh);
	char *s_src = xasprintf("%s-src", sh->tag);
	sh->src = up(s_src);
	free(s_src);
	/* Seed the source (untimed). */
	char *from = xasprintf("%s/.", sh->host);
	char *to = xasprintf("%s:/workspace", sh->src);
	char *seed[] = {"docker", "cp", from, to, NULL};
	run_ok(seed);
	free(from);
	free(to);
	char *want = fingerprint(sh->src);
	note("%s: source holds %s", sh->label, want);

	char *out_dir = xasprintf("%s/out-%s", TMP, sh->tag);
	for (int r = 0; r < ROUNDS; r++) {
		brig_error *err = NULL;
		int rc;
		/* each round starts from an empty checkpoint directory: the first checkpoint copies everything */
		char *rdir = xasprintf("%s/%s-%d", ckdir, sh->tag, r);
		make_dir(rdir);
		brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = rdir};
		brig_store_checkpoint *cp = NULL;
		double t0 = now_s();
		if ((rc = brig_checkpoint_create(E, S, &cp, sh->src, &co, &err)) != 0)
			die_err("checkpoint", rc, err);
		sh->t[T_CKPT][r] = now_s() - t0;
		sh->blob_bytes = (uint64_t)cp->bytes_stored;
		if (!strstr(cp->blob, ".manifest"))
			die("%s: the first checkpoint was not incremental (%s)", sh->label, cp->blob);
		brig_store_checkpoint_free(cp);

		t0 = now_s();
		if ((rc = brig_checkpoint_create(E, S, &cp, sh->src, &co, &err)) != 0)
			die_err("checkpoint", rc, err);
		sh->t[T_SAME][r] = now_s() - t0;
		if ((uint64_t)cp->bytes_stored > sh->bytes / 10)
			die("%s: a checkpoint of nothing changed stored %lld bytes", sh->label,
			    (long long)cp->bytes_stored);
		brig_store_checkpoint_free(cp);

		free(sh_run(sh->src, "head -c 10240 /dev/urandom > /workspace/changed"));
		free(want);
		want = fingerprint(sh->src);
		t0 = now_s();
		if ((rc = brig_checkpoint_create(E, S, &cp, sh->src, &co, &err)) != 0)
			die_err("checkpoint", rc, err);
		sh->t[T_ONE][r] = now_s() - t0;
		sh->one_bytes = (uint64_t)cp->bytes_stored;

		brig_store_checkpoint *full = NULL;
		setenv("BRIG_CHECKPOINT_FULL", "1", 1);
		t0 = now_s();
		if ((rc = brig_checkpoint_create(E, S, &full, sh->src, &co, &err)) != 0)
			die_err("full checkpoint", rc, err);
		sh->t[T_FULL][r] = now_s() - t0;
		unsetenv("BRIG_CHECKPOINT_FULL");
		if (!strstr(full->blob, ".tar.zst"))
			die("%s: BRIG_CHECKPOINT_FULL did not take the full copy", sh->label);
		brig_store_checkpoint_free(full);

		/* brig restore (of the incremental one) into empty volumes */
		fresh_target(sh);
		t0 = now_s();
		if ((rc = brig_checkpoint_restore(E, rdir, cp, sh->dst, &err)) != 0)
			die_err("restore", rc, err);
		sh->t[T_RESTORE][r] = now_s() - t0;
		if (r == 0) {
			char *got = fingerprint(sh->dst);
			if (strcmp(got, want) != 0)
				die("%s: restored workspace differs: %s vs %s", sh->label, got, want);
			free(got);
		}
		brig_store_checkpoint_free(cp);
		char *rmd[] = {"rm", "-rf", rdir, NULL};
		run_ok(rmd);
		free(rdir);

		/* docker cp out to a fresh host directory */
		char *rm[] = {"rm", "-rf", out_dir, NULL};
		run_ok(rm);
		char *src_ref = xasprintf("%s:/workspace", sh->src);
		char *cp_out[] = {"docker", "cp", src_ref, out_dir, NULL};
		t0 = now_s();
		run_ok(cp_out);
		sh->t[T_CP_OUT][r] = now_s() - t0;
		free(src_ref);

		/* docker cp in to empty volumes */
		fresh_target(sh);
		char *in_from = xasprintf("%s/.", out_dir);
		char *dst_ref = xasprintf("%s:/workspace", sh->dst);
		char *cp_in[] = {"docker", "cp", in_from, dst_ref, NULL};
		t0 = now_s();
		run_ok(cp_in);
		sh->t[T_CP_IN][r] = now_s() - t0;
		free(in_from);
		free(dst_ref);
		if (r == 0) {
			char *got = fingerprint(sh->dst);
			if (strcmp(got, want) != 0)
				die("%s: docker cp copy differs: %s vs %s", sh->label, got, want);
			free(got);
		}
		note("%s round %d: checkpoint %.2f s, unchanged %.3f s, one changed %.3f s, full copy %.2f s, "
		     "restore %.2f s, docker cp out %.2f s, in %.2f s",
		     sh->label, r + 1, sh->t[T_CKPT][r], sh->t[T_SAME][r], sh->t[T_ONE][r], sh->t[T_FULL][r],
		     sh->t[T_RESTORE][r], sh->t[T_CP_OUT][r], sh->t[T_CP_IN][r]);
	}
	free(want);
	free(out_dir);
	brig_computer_destroy(E, sh->src, NULL);
	brig_computer_destroy(E, sh->dst, NULL);
	char *rm[] = {"rm", "-rf", sh->host, NULL};
	run_ok(rm);
}

static void cell(char *out, size_t n, double secs, uint64_t bytes)
{
	snprintf(out, n, "%.2f s (%.0f MB/s)", secs, (double)bytes / 1e6 / secs);
}

int main(int argc, char **argv)
{
	int opt;
	const char *only = NULL;
	while ((opt = getopt(argc, argv, "n:s:h")) != -1) {
		switch (opt) {
		case 's':
			only = optarg;
			if (strcmp(only, "small") != 0 && strcmp(only, "large") != 0)
				die("-s: small or large");
			break;
		case 'n':
			ROUNDS = atoi(optarg);
			if (ROUNDS < 1 || ROUNDS > 15)
				die("-n: 1..15 rounds");
			break;
		default:
			fprintf(stderr, "Usage: bench_checkpoint [-n ROUNDS] [-s small|large]\n"
					"Needs root (files owned by 1000:1000), dockerd, the docker CLI and the image\n"
					"brig-test:local ($BRIG_TEST_IMAGE). Table on stdout, progress on stderr.\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	snprintf(LABEL, sizeof LABEL, "brig.bench=ckpt-%d", (int)getpid());
	snprintf(NS, sizeof NS, "bench%d", (int)getpid());
	snprintf(TMP, sizeof TMP, "/var/tmp/brig-bench-ckpt-XXXXXX");
	if (!mkdtemp(TMP))
		die("mkdtemp: %s", strerror(errno));
	chmod(TMP, 0755);
	brig_error *err = NULL;
	int rc;
	if ((rc = brig_engine_open(&E, NULL, &err)) != 0)
		die_err("engine", rc, err);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	char *url = xasprintf("%s/store.db", TMP);
	if ((rc = brig_store_open(&S, url, &err)) != 0)
		die_err("store", rc, err);
	free(url);
	char *ckdir = xasprintf("%s/checkpoints", TMP);
	make_dir(ckdir);

	shape shapes[] = {
		{.tag = "small", .label = "25000 files x 10 KB", .files = 25000, .file_size = 10240, .per_dir = 1000},
		{.tag = "large", .label = "1 file x 256 MiB", .files = 1, .file_size = 256u << 20},
	};
	size_t nshapes = sizeof shapes / sizeof shapes[0];
	if (only) { /* one shape: the table has its row alone */
		if (strcmp(only, shapes[0].tag) != 0)
			shapes[0] = shapes[1];
		nshapes = 1;
	}
	for (size_t i = 0; i < nshapes; i++)
		bench_shape(&shapes[i], ckdir);

	json_t *ver = NULL;
	const char *dv = "?";
	if (brig_engine_version(E, &ver, NULL) == 0)
		dv = json_string_value(json_object_get(ver, "Version"));
	printf("bench_checkpoint: median of %d rounds; Docker %s, API %s, %ld CPUs; data incompressible\n", ROUNDS,
	       dv ? dv : "?", brig_engine_api_version(E), sysconf(_SC_NPROCESSORS_ONLN));
	printf("%-20s %8s %8s | %-18s %-10s %-10s %-18s %-18s | %-18s %-18s\n", "workspace", "data MB", "blob MB",
	       "checkpoint", "unchanged", "1 changed", "full copy (old)", "restore", "docker cp out", "docker cp in");
	for (size_t i = 0; i < nshapes; i++) {
		shape *sh = &shapes[i];
		char c[T_N][48];
		for (int k = 0; k < T_N; k++) {
			double m = median(sh->t[k], ROUNDS);
			if (k == T_SAME || k == T_ONE)
				snprintf(c[k], sizeof c[k], "%.0f ms", m * 1000);
			else
				cell(c[k], sizeof c[k], m, sh->bytes);
		}
		printf("%-20s %8.1f %8.1f | %-18s %-10s %-10s %-18s %-18s | %-18s %-18s\n", sh->label,
		       (double)sh->bytes / 1e6, (double)sh->blob_bytes / 1e6, c[T_CKPT], c[T_SAME], c[T_ONE], c[T_FULL],
		       c[T_RESTORE], c[T_CP_OUT], c[T_CP_IN]);
	}
	json_decref(ver);
	free(ckdir);
	brig_store_close(S);
	S = NULL;
	cleanup();
	brig_engine_free(E);
	E = NULL;
	return 0;
}
