/* run_util.h — helpers shared by the disposable-run integration tests
 * (test_run*.c): one-call runs, leftover listings, host temp trees and their
 * snapshots, host process scans, and a child `brig` that can be signalled. */
#ifndef BRIG_TEST_RUN_UTIL_H
#define BRIG_TEST_RUN_UTIL_H

#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/run.h"
#include "brig/spec.h"
#include "util/util.h"

/* Every helper is static; each test file uses a subset. */
#define RU_FN static __attribute__((unused))

static brig_engine *E;

RU_FN int ru_setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	return 0;
}

RU_FN int ru_teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	E = NULL;
	return 0;
}

RU_FN void ru_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

RU_FN const char *ru_label(void)
{
	static char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	return l;
}

/* A token unique to this process for `sleep 1000.<token>`, so the test can
 * find (or miss) exactly its own processes in the host's /proc. */
RU_FN const char *ru_sleep_arg(const char *tag)
{
	static char s[8][64];
	static int next;
	char *b = s[next++ % 8];
	unsigned h = 5381;
	for (const char *p = tag; *p; p++)
		h = h * 33 + (unsigned char)*p;
	snprintf(b, 64, "1000.%u%05u", (unsigned)getpid() % 100000, h % 100000);
	return b;
}

/* The default spec on the test image, labelled with this run id. */
RU_FN void ru_spec(brig_spec *s)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", brig_test_image(), &err), err);
	ASSERT_OK(brig_spec_add_label(s, ru_label(), &err), err);
}

typedef struct ru_run {
	brig_run_result res;
	int rc;
	brig_error *err;
	int64_t wall_ms; /* the whole brig_run call */
} ru_run;

typedef struct ru_args {
	const brig_spec *spec; /* NULL: ru_spec() */
	const char *out_dir;
	int64_t out_mb;
	int64_t timeout_s; /* 0: 60 */
	const char *const *inputs;
	size_t input_count;
	const char *const *argv; /* instead of sh -c script */
} ru_args;

/* Runs `sh -c script` (or a->argv) through brig_run; fills r. */
RU_FN void ru_run_sh(ru_run *r, const ru_args *a, const char *script)
{
	static const ru_args none;
	if (!a)
		a = &none;
	brig_spec own;
	const brig_spec *spec = a->spec;
	if (!spec) {
		ru_spec(&own);
		spec = &own;
	}
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_run_opts o = {.version = BRIG_RUN_OPTS_VERSION,
			   .spec = spec,
			   .argv = a->argv ? a->argv : argv,
			   .inputs = a->inputs,
			   .input_count = a->input_count,
			   .out_dir = a->out_dir,
			   .out_mb = a->out_mb,
			   .timeout_s = a->timeout_s ? a->timeout_s : 60,
			   .stdin_fd = -1,
			   .cancel_fd = -1};
	memset(r, 0, sizeof *r);
	int64_t t0 = brig_now_ms();
	r->rc = brig_run(E, &o, &r->res, &r->err);
	r->wall_ms = brig_now_ms() - t0;
	if (spec == &own)
		brig_spec_clear(&own);
}

RU_FN void ru_run_free(ru_run *r)
{
	brig_run_result_clear(&r->res);
	brig_error_free(r->err);
	r->err = NULL;
}

/* A run that must have ended by itself with exit code want. */
RU_FN void ru_assert_exit(ru_run *r, int want)
{
	if (r->rc != 0)
		fail_msg("brig_run -> %s: %s", brig_error_name(r->rc), brig_error_message(r->err));
	if (r->res.exec.exit_code != want)
		fail_msg("exit code %d, expected %d; stdout: %.2000s; stderr: %.2000s", r->res.exec.exit_code, want,
			 r->res.exec.out.data ? r->res.exec.out.data : "",
			 r->res.exec.err.data ? r->res.exec.err.data : "");
}

/* ---- what is left in the daemon ---- */

/* Containers, volumes and networks carrying this run id's label, described
 * one per line ("" when none). Caller frees. */
RU_FN char *ru_leftovers(void)
{
	brig_buf b;
	brig_buf_init(&b, 1u << 20);
	brig_error *err = NULL;
	cleanup_json json_t *f = brig_test_filters();
	cleanup_json json_t *cs = NULL;
	ASSERT_OK(brig_engine_container_list(E, &cs, true, f, &err), err);
	size_t i;
	json_t *c;
	json_array_foreach (cs, i, c) {
		brig_buf_putf(&b, "container %s (%s)\n",
			      json_string_value(json_array_get(json_object_get(c, "Names"), 0)),
			      json_string_value(json_object_get(c, "State")));
	}
	cleanup_json json_t *vs = NULL;
	ASSERT_OK(brig_engine_volume_list(E, &vs, f, &err), err);
	json_array_foreach (json_object_get(vs, "Volumes"), i, c) {
		brig_buf_putf(&b, "volume %s\n", json_string_value(json_object_get(c, "Name")));
	}
	cleanup_json json_t *ns = NULL;
	ASSERT_OK(brig_engine_network_list(E, &ns, f, &err), err);
	json_array_foreach (ns, i, c) {
		brig_buf_putf(&b, "network %s\n", json_string_value(json_object_get(c, "Name")));
	}
	brig_buf_puts(&b, "");
	return brig_buf_steal(&b, NULL);
}

RU_FN void ru_assert_nothing_left(const char *when)
{
	cleanup_free char *left = ru_leftovers();
	if (*left)
		fail_msg("after %s, brig left behind:\n%s", when, left);
}

/* Waits up to timeout_ms for nothing to be left; returns the ms it took, or
 * -1 (with *left set, caller frees) when something still is. */
RU_FN int64_t ru_wait_nothing_left(int64_t timeout_ms, char **left)
{
	int64_t t0 = brig_now_ms();
	for (;;) {
		char *l = ru_leftovers();
		if (!*l) {
			free(l);
			return brig_now_ms() - t0;
		}
		if (brig_now_ms() - t0 > timeout_ms) {
			*left = l;
			return -1;
		}
		free(l);
		ru_sleep_ms(200);
	}
}

/* ---- host processes ---- */

/* How many host processes have argument arg (exactly) in their command
 * line. Container processes are host processes too (same kernel). */
RU_FN int ru_host_procs_with_arg(const char *arg)
{
	int n = 0;
	DIR *d = opendir("/proc");
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char p[300];
		snprintf(p, sizeof p, "/proc/%s/cmdline", de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		char buf[4096];
		ssize_t len = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1)
			if (strcmp(buf + i, arg) == 0) {
				n++;
				break;
			}
	}
	closedir(d);
	return n;
}

/* Waits up to timeout_ms for exactly `want` such processes; returns the
 * last count seen. (A shell prints before it forks the next command.) */
RU_FN int ru_host_procs_wait(const char *arg, int want, int64_t timeout_ms)
{
	int64_t t0 = brig_now_ms();
	int n;
	while ((n = ru_host_procs_with_arg(arg)) != want && brig_now_ms() - t0 < timeout_ms)
		ru_sleep_ms(20);
	return n;
}

/* ---- host files ---- */

RU_FN char *ru_tmpdir(const char *tag)
{
	char *t = xasprintf("/tmp/brigtest-%s-%s-XXXXXX", brig_test_run_id(), tag);
	if (!mkdtemp(t))
		fail_msg("mkdtemp %s: %s", t, strerror(errno));
	return t;
}

static int ru__rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP || flag == FTW_D)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

RU_FN void ru_rmrf(const char *path)
{
	if (path)
		nftw(path, ru__rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

RU_FN void ru_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		fail_msg("write %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* The file's contents (NUL-terminated), or NULL when it cannot be read. */
RU_FN char *ru_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	brig_buf b;
	brig_buf_init(&b, 1u << 30);
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		brig_buf_put(&b, buf, (size_t)n);
	close(fd);
	brig_buf_puts(&b, "");
	return brig_buf_steal(&b, len);
}

/* Lowercase hex SHA-256 of a host file (not following a final symlink). */
RU_FN void ru_sha256_file(const char *path, char out[65])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	static char buf[1 << 20];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		EVP_DigestUpdate(c, buf, (size_t)n);
	close(fd);
	unsigned char md[32];
	unsigned len = 0;
	EVP_DigestFinal_ex(c, md, &len);
	EVP_MD_CTX_free(c);
	brig_hex(out, md, 32);
	out[64] = '\0';
}

static int ru__cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void ru__tree(brig_buf *b, int dfd, const char *rel)
{
	DIR *d = fdopendir(dfd);
	if (!d)
		return;
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		names = xrealloc(names, (n + 1) * sizeof *names);
		names[n++] = xstrdup(de->d_name);
	}
	if (n)
		qsort(names, n, sizeof *names, ru__cmp);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		cleanup_free char *p = *rel ? xasprintf("%s/%s", rel, names[i]) : xstrdup(names[i]);
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			brig_buf_putf(b, "%s ?\n", p);
		} else if (S_ISLNK(st.st_mode)) {
			char t[4096];
			ssize_t l = readlinkat(dirfd(d), names[i], t, sizeof t - 1);
			t[l < 0 ? 0 : l] = '\0';
			brig_buf_putf(b, "%s -> %s\n", p, t);
		} else if (S_ISDIR(st.st_mode)) {
			brig_buf_putf(b, "%s/ %o\n", p, (unsigned)(st.st_mode & 07777));
			int fd = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				ru__tree(b, fd, p);
		} else {
			brig_buf_putf(b, "%s %o %lld %lld.%09ld\n", p, (unsigned)(st.st_mode & 07777),
				      (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		}
		free(names[i]);
	}
	free(names);
	closedir(d);
}

/* Every entry under path with its type, mode, size, mtime and link target,
 * sorted: two snapshots are equal when nothing under path changed. */
RU_FN char *ru_tree(const char *path)
{
	brig_buf b;
	brig_buf_init(&b, 256u << 20);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		ru__tree(&b, fd, "");
	brig_buf_puts(&b, "");
	return brig_buf_steal(&b, NULL);
}

/* Bytes of disk the tree under path really occupies (st_blocks). */
static uint64_t ru__du_total;
static int ru__du_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p;
	(void)flag;
	(void)f;
	ru__du_total += (uint64_t)st->st_blocks * 512;
	return 0;
}

RU_FN uint64_t ru_du(const char *path)
{
	ru__du_total = 0;
	nftw(path, ru__du_one, 32, FTW_PHYS);
	return ru__du_total;
}

/* ---- a brig child process that can be signalled ---- */

typedef struct ru_proc {
	pid_t pid;
	int out_fd, err_fd;
	brig_buf out, err;
} ru_proc;

/* Starts argv (argv[0] "brig" is the binary under test) with stdin from
 * /dev/null and stdout/stderr piped back. */
RU_FN void ru_proc_start(ru_proc *p, char *const argv[])
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC))
		fail_msg("pipe: %s", strerror(errno));
	memset(p, 0, sizeof *p);
	brig_buf_init(&p->out, 64u << 20);
	brig_buf_init(&p->err, 64u << 20);
	p->pid = fork();
	if (p->pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (p->pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		const char *prog = strcmp(argv[0], "brig") == 0 ? brig_test_brig_bin() : argv[0];
		execvp(prog, argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	p->out_fd = po[0];
	p->err_fd = pe[0];
}

/* Reads what is available for up to wait_ms; false once both pipes closed. */
static bool ru__proc_pump(ru_proc *p, int wait_ms)
{
	struct pollfd f[2] = {{.fd = p->out_fd, .events = POLLIN}, {.fd = p->err_fd, .events = POLLIN}};
	if (p->out_fd < 0 && p->err_fd < 0)
		return false;
	int r = poll(f, 2, wait_ms);
	if (r <= 0)
		return true;
	for (int i = 0; i < 2; i++) {
		if (f[i].fd < 0 || !f[i].revents)
			continue;
		char buf[65536];
		ssize_t n = read(f[i].fd, buf, sizeof buf);
		if (n > 0) {
			brig_buf_put(i ? &p->err : &p->out, buf, (size_t)n);
		} else if (n == 0 || errno != EINTR) {
			close(f[i].fd);
			if (i)
				p->err_fd = -1;
			else
				p->out_fd = -1;
		}
	}
	return true;
}

/* Waits until stdout contains needle; fails the test after timeout_ms. */
RU_FN void ru_proc_wait_for(ru_proc *p, const char *needle, int64_t timeout_ms)
{
	int64_t t0 = brig_now_ms();
	for (;;) {
		if (p->out.len && memmem(p->out.data, p->out.len, needle, strlen(needle)))
			return;
		if (brig_now_ms() - t0 > timeout_ms || !ru__proc_pump(p, 100)) {
			if (p->out.len && memmem(p->out.data, p->out.len, needle, strlen(needle)))
				return;
			kill(p->pid, SIGKILL);
			fail_msg("brig did not print '%s' within %lld ms; stderr: %s", needle, (long long)timeout_ms,
				 brig_buf_cstr(&p->err));
		}
	}
}

/* Waits for the child to exit (killing it after timeout_ms and failing);
 * returns the exit status, or 128+signal. Read what it printed with
 * brig_buf_cstr(&p->out) / (&p->err). */
RU_FN int ru_proc_wait(ru_proc *p, int64_t timeout_ms)
{
	int64_t t0 = brig_now_ms();
	int st = 0;
	for (;;) {
		ru__proc_pump(p, 50);
		pid_t w = waitpid(p->pid, &st, WNOHANG);
		if (w == p->pid)
			break;
		if (brig_now_ms() - t0 > timeout_ms) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			fail_msg("brig did not exit within %lld ms; stderr: %s", (long long)timeout_ms,
				 brig_buf_cstr(&p->err));
		}
	}
	while (ru__proc_pump(p, 50))
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

RU_FN void ru_proc_free(ru_proc *p)
{
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	brig_buf_free(&p->out);
	brig_buf_free(&p->err);
}

#endif
