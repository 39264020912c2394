/* testutil.c — shared test helpers: unique labels, cleanup of the objects a
 * test created (even when it fails), spawning brig, collecting exec output. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

const char *brig_test_image(void)
{
	const char *i = getenv("BRIG_TEST_IMAGE");
	return i && *i ? i : "brig-test:local";
}

const char *brig_test_run_id(void)
{
	static char id[32];
	if (!id[0]) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(id, sizeof id, "t%d-%04lx", (int)getpid(), (unsigned long)(ts.tv_nsec / 1000) & 0xffff);
	}
	return id;
}

char *brig_test_name(const char *tag) { return xasprintf("brigtest-%s-%s", brig_test_run_id(), tag); }

json_t *brig_test_filters(void)
{
	cleanup_free char *l = xasprintf(BRIG_TEST_LABEL "=%s", brig_test_run_id());
	return json_pack("{s:[s]}", "label", l);
}

json_t *brig_test_labels(void) { return json_pack("{s:s}", BRIG_TEST_LABEL, brig_test_run_id()); }

brig_engine *brig_test_engine(void)
{
	brig_engine *e = NULL;
	brig_error *err = NULL;
	if (brig_engine_open(&e, NULL, &err) != 0) {
		fprintf(stderr, "test: no Docker daemon: %s\n", brig_error_message(err));
		brig_error_free(err);
		fail_msg("no Docker daemon");
	}
	return e;
}

unsigned brig_test_userns_shift(void)
{
	static int known;
	static unsigned shift;
	if (!known) {
		brig_engine *e = brig_test_engine();
		uint32_t u = 0, g = 0;
		brig_error *err = NULL;
		if (brig_engine_userns_root(e, &u, &g, &err) != 0) {
			fprintf(stderr, "test: the daemon's userns-remap: %s\n", brig_error_message(err));
			brig_error_free(err);
			brig_engine_free(e);
			fail_msg("cannot ask the daemon for its userns-remap");
		}
		brig_engine_free(e);
		shift = u;
		known = 1;
	}
	return shift;
}

int brig_test_cleanup(brig_engine *e)
{
	int removed = 0;
	json_t *f = brig_test_filters();
	json_t *list = NULL;
	if (brig_engine_container_list(e, &list, true, f, NULL) == 0) {
		size_t i;
		json_t *c;
		json_array_foreach(list, i, c)
		{
			const char *id = json_string_value(json_object_get(c, "Id"));
			if (id && brig_engine_container_remove(e, id, true, true, NULL) == 0)
				removed++;
		}
		json_decref(list);
	}
	list = NULL;
	if (brig_engine_volume_list(e, &list, f, NULL) == 0) {
		size_t i;
		json_t *v;
		json_array_foreach(json_object_get(list, "Volumes"), i, v)
		{
			const char *n = json_string_value(json_object_get(v, "Name"));
			if (n && brig_engine_volume_remove(e, n, true, NULL) == 0)
				removed++;
		}
		json_decref(list);
	}
	list = NULL;
	if (brig_engine_network_list(e, &list, f, NULL) == 0) {
		size_t i;
		json_t *n;
		json_array_foreach(list, i, n)
		{
			const char *id = json_string_value(json_object_get(n, "Id"));
			if (id && brig_engine_network_remove(e, id, NULL) == 0)
				removed++;
		}
		json_decref(list);
	}
	json_decref(f);
	return removed;
}

static void cleanup_now(void)
{
	brig_engine *e = NULL;
	if (brig_engine_open(&e, NULL, NULL) == 0) {
		brig_test_cleanup(e);
		brig_engine_free(e);
	}
}

static void on_signal(int sig)
{
	cleanup_now();
	signal(sig, SIG_DFL);
	raise(sig);
}

void brig_test_cleanup_at_exit(void)
{
	static int done;
	if (done++)
		return;
	atexit(cleanup_now);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGABRT, on_signal);
}

const char *brig_test_brig_bin(void)
{
	const char *b = getenv("BRIG_BIN");
	return b && *b ? b : BRIG_BINARY_DIR "/brig";
}

static void drain(int fd, brig_buf *b)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n > 0 && brig_buf_add(b, buf, (size_t)n) < 0)
		fail_msg("child output exceeds %zu bytes", b->cap);
}

int brig_test_spawn(char *const argv[], const char *stdin_text, char *const extra_env[], char **out, char **errout)
{
	int pin[2], pout[2], perr[2];
	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC))
		fail_msg("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		for (char *const *e = extra_env; e && *e; e++)
			putenv(*e);
		const char *prog = strcmp(argv[0], "brig") == 0 ? brig_test_brig_bin() : argv[0];
		execvp(prog, argv);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	if (stdin_text)
		brig_write_all(pin[1], stdin_text, strlen(stdin_text));
	close(pin[1]);
	brig_buf bo, be;
	brig_buf_init(&bo, 64u << 20);
	brig_buf_init(&be, 64u << 20);
	struct pollfd pfd[2] = {{.fd = pout[0], .events = POLLIN}, {.fd = perr[0], .events = POLLIN}};
	int open_fds = 2;
	while (open_fds) {
		if (poll(pfd, 2, -1) < 0 && errno == EINTR)
			continue;
		for (int i = 0; i < 2; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			size_t before = i ? be.len : bo.len;
			drain(pfd[i].fd, i ? &be : &bo);
			if ((i ? be.len : bo.len) == before && (pfd[i].revents & (POLLHUP | POLLERR | POLLIN))) {
				char c;
				if (read(pfd[i].fd, &c, 0) == 0) {
					close(pfd[i].fd);
					pfd[i].fd = -1;
					open_fds--;
				}
			}
		}
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (out)
		*out = brig_buf_steal(&bo, NULL);
	else
		brig_buf_free(&bo);
	if (errout)
		*errout = brig_buf_steal(&be, NULL);
	else
		brig_buf_free(&be);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int brig_test_output_cb(int stream, const char *data, size_t len, void *payload)
{
	brig_test_output *o = payload;
	char **p = stream == BRIG_STREAM_STDERR ? &o->err : &o->out;
	size_t *n = stream == BRIG_STREAM_STDERR ? &o->err_len : &o->out_len;
	*p = xrealloc(*p, *n + len + 1);
	memcpy(*p + *n, data, len);
	*n += len;
	(*p)[*n] = '\0';
	return 0;
}

void brig_test_output_free(brig_test_output *o)
{
	free(o->out);
	free(o->err);
	memset(o, 0, sizeof *o);
}

char *brig_test_container(brig_engine *e, const char *tag, json_t *config_extra)
{
	cleanup_free char *name = brig_test_name(tag);
	json_t *cfg = json_pack("{s:s, s:[s,s], s:o, s:{s:b, s:s}}", "Image", brig_test_image(), "Cmd", "sleep", "3600",
				"Labels", brig_test_labels(), "HostConfig", "Init", 1, "NetworkMode", "none");
	if (config_extra)
		json_object_update_recursive(cfg, config_extra);
	char *id = NULL;
	brig_error *err = NULL;
	if (brig_engine_container_create(e, &id, name, cfg, &err) != 0 ||
	    brig_engine_container_start(e, id, &err) != 0)
		fail_msg("create test container: %s", brig_error_message(err));
	json_decref(cfg);
	return id;
}

int brig_test_exec(brig_engine *e, const char *id, const char *const argv[], brig_test_output *out)
{
	json_t *cmd = json_array();
	for (const char *const *a = argv; *a; a++)
		json_array_append_new(cmd, json_string(*a));
	json_t *cfg = json_pack("{s:o, s:b, s:b}", "Cmd", cmd, "AttachStdout", 1, "AttachStderr", 1);
	char *xid = NULL;
	brig_error *err = NULL;
	if (brig_engine_exec_create(e, &xid, id, cfg, &err) != 0)
		fail_msg("exec create: %s", brig_error_message(err));
	brig_engine_exec_io io = {.stdin_fd = -1, .cancel_fd = -1, .on_output = brig_test_output_cb, .payload = out};
	if (brig_engine_exec_start(e, xid, &io, &err) != 0)
		fail_msg("exec start: %s", brig_error_message(err));
	int code = -1;
	if (brig_engine_exec_exit_code(e, xid, 0, &code, &err) != 0)
		fail_msg("exec exit code: %s", brig_error_message(err));
	json_decref(cfg);
	free(xid);
	return code;
}

void brig_test_assert_own_netns(const char *ns)
{
	size_t len = strcspn(ns, "\n");
	if (strncmp(ns, "net:[", 5) != 0)
		fail_msg("not a network namespace: %s", ns);
	char self[64] = "", daemon[64] = "", path[64];
	if (readlink("/proc/self/ns/net", self, sizeof self - 1) <= 0)
		fail_msg("readlink /proc/self/ns/net: %s", strerror(errno));
	FILE *f = fopen("/var/run/docker.pid", "r");
	long pid = 0;
	if (f) {
		if (fscanf(f, "%ld", &pid) != 1)
			pid = 0;
		fclose(f);
	}
	snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
	if (pid > 0 && readlink(path, daemon, sizeof daemon - 1) <= 0)
		daemon[0] = '\0';
	if ((strlen(self) == len && strncmp(ns, self, len) == 0) ||
	    (daemon[0] && strlen(daemon) == len && strncmp(ns, daemon, len) == 0))
		fail_msg("the container shares a network namespace: %.*s (ours %s, dockerd's %s)", (int)len, ns, self,
			 daemon[0] ? daemon : "unknown");
}

typedef struct zero_feeder {
	int fd;
	size_t n;
} zero_feeder;

static void *feed_zeros(void *p)
{
	zero_feeder *f = p;
	static const char zeros[65536];
	for (size_t left = f->n; left;) {
		size_t k = left < sizeof zeros ? left : sizeof zeros;
		if (brig_write_all(f->fd, zeros, k) != 0)
			break;
		left -= k;
	}
	close(f->fd);
	return NULL;
}

void brig_test_exec_write_before_read(brig_engine *e, const char *id, size_t n, bool from_fd)
{
	char cmd[96];
	snprintf(cmd, sizeof cmd, "head -c %zu /dev/zero; wc -c", n);
	json_t *cfg = json_pack("{s:[s,s,s], s:b, s:b, s:b}", "Cmd", "sh", "-c", cmd, "AttachStdin", 1, "AttachStdout",
				1, "AttachStderr", 1);
	char *xid = NULL;
	brig_error *err = NULL;
	if (brig_engine_exec_create(e, &xid, id, cfg, &err) != 0)
		fail_msg("exec create: %s", brig_error_message(err));
	json_decref(cfg);
	brig_test_output o = {0};
	brig_engine_exec_io io = {.stdin_fd = -1,
				  .cancel_fd = -1,
				  .on_output = brig_test_output_cb,
				  .payload = &o,
				  .deadline_ms = brig_now_ms() + 60000};
	char *data = NULL;
	pthread_t th;
	zero_feeder f = {.n = n};
	int p[2] = {-1, -1};
	if (from_fd) {
		if (pipe(p) != 0)
			fail_msg("pipe: %s", strerror(errno));
		f.fd = p[1];
		if (pthread_create(&th, NULL, feed_zeros, &f) != 0)
			fail_msg("pthread_create failed");
		io.stdin_fd = p[0];
	} else {
		data = xcalloc(n ? n : 1, 1);
		io.stdin_data = data;
		io.stdin_len = n;
	}
	int rc = brig_engine_exec_start(e, xid, &io, &err);
	if (from_fd) {
		close(p[0]); /* a feeder still writing gets EPIPE and ends */
		pthread_join(th, NULL);
	}
	free(data);
	if (rc != 0)
		fail_msg("exec start (%zu bytes each way, stdin from %s): %s", n, from_fd ? "a pipe" : "memory",
			 brig_error_message(err));
	char tail[32];
	int tl = snprintf(tail, sizeof tail, "%zu\n", n);
	if (o.out_len != n + (size_t)tl || memcmp(o.out + n, tail, (size_t)tl) != 0)
		fail_msg("write-before-read: %zu bytes of output, wanted %zu and then %s", o.out_len, n + (size_t)tl,
			 tail);
	for (size_t i = 0; i < n; i++)
		if (o.out[i])
			fail_msg("write-before-read: byte %zu is not zero", i);
	int code = -1;
	if (brig_engine_exec_exit_code(e, xid, 0, &code, &err) != 0)
		fail_msg("exec exit code: %s", brig_error_message(err));
	if (code != 0)
		fail_msg("write-before-read exited %d: %s", code, o.err ? o.err : "");
	brig_test_output_free(&o);
	free(xid);
}

char *brig_test_network(brig_engine *e, const char *tag)
{
	char *name = brig_test_name(tag);
	json_t *spec = json_pack("{s:s, s:s, s:b, s:o}", "Name", name, "Driver", "bridge", "CheckDuplicate", 1, "Labels",
				 brig_test_labels());
	brig_error *err = NULL;
	if (brig_engine_network_create(e, NULL, spec, &err) != 0)
		fail_msg("create test network %s: %s", name, brig_error_message(err));
	json_decref(spec);
	return name;
}

/* ---- the fixture the integration tests share ---- */

int brig_test_setup(brig_engine **e, char *ns, size_t ns_size, const char *prefix)
{
	brig_test_cleanup_at_exit();
	*e = brig_test_engine();
	snprintf(ns, ns_size, "%s%s", prefix, brig_test_run_id());
	return 0;
}

int brig_test_teardown(brig_engine **e)
{
	brig_test_cleanup(*e);
	brig_engine_free(*e);
	*e = NULL;
	return 0;
}

int brig_test_tmpdir(char *dir, size_t dir_size, const char *tag)
{
	snprintf(dir, dir_size, "/tmp/%s-XXXXXX", tag);
	if (!mkdtemp(dir)) {
		print_error("cannot make %s: %s\n", dir, strerror(errno));
		return -1;
	}
	return 0;
}

void brig_test_rmdir(const char *dir)
{
	char *cmd = xasprintf("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		print_error("could not remove %s\n", dir);
	free(cmd);
}

void brig_test_spec(brig_spec *s, const char *image)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", image ? image : brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(s, l, &err), err);
}

void brig_test_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}
