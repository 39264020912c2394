/* test_fakedaemon.c — the engine client against a fake daemon on a unix socket
 * in a temp dir: how each way a daemon can fail is classified, keep-alive reuse. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/util.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

#define ASSERT_CODE(expr, want, err)                                                                         \
	do {                                                                                                 \
		int r_ = (expr);                                                                             \
		if (r_ != (want))                                                                            \
			fail_msg("%s -> %s, want %s: %s", #expr, brig_error_name(r_), brig_error_name(want), \
				 brig_error_message(err));                                                   \
	} while (0)

/* ---- the fake daemon: one thread, one connection at a time ---- */

typedef enum fake_mode {
	FAKE_ANSWER,          /* answer each request with `answer`; keep the connection */
	FAKE_NO_ANSWER,       /* read the whole request, then close */
	FAKE_PARTIAL,         /* read the request, send `answer`, close */
	FAKE_STALL,           /* read the request, send `answer`, then say nothing more */
	FAKE_CLOSE_ON_ACCEPT, /* close each connection as soon as it is accepted */
} fake_mode;

typedef struct fake {
	char dir[64];
	char sock[128];
	char host[160]; /* unix://<sock> */
	int lfd;
	int stop[2]; /* test -> fake: end now */
	int ctl[2];  /* test -> fake: close the idle connection */
	int ack[2];  /* fake -> test: closed it */
	pthread_t thread;
	bool running;
	fake_mode mode;
	const char *answer;
	size_t answer_len;
	int accepts;
	int requests;
	pthread_mutex_t lock;
	char last_line[512]; /* request line of the last request */
	char last_head[4096];
} fake;

static fake F;

/* Waits for fd (and the stop pipe, and ctl when given). Returns 1 when fd is
 * ready, 2 when ctl is, 0 on stop. */
static int fake_wait(fake *f, int fd, short ev, bool with_ctl)
{
	struct pollfd p[3] = {
		{.fd = fd, .events = ev}, {.fd = f->stop[0], .events = POLLIN}, {.fd = f->ctl[0], .events = POLLIN}};
	for (;;) {
		int r = poll(p, with_ctl ? 3 : 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || p[1].revents)
			return 0;
		if (with_ctl && p[2].revents) {
			char c;
			if (read(f->ctl[0], &c, 1) != 1)
				return 0;
			return 2;
		}
		return 1;
	}
}

/* Reads one request (headers and a Content-Length or chunked body). Returns
 * 1 when complete, 2 when asked to close an idle connection, 0 otherwise. */
static int fake_read_request(fake *f, int fd)
{
	brig_buf b;
	brig_buf_init(&b, 64 << 20);
	int rc = 0;
	size_t need = 0; /* total bytes once the head is known */
	bool chunked = false;
	for (;;) {
		int w = fake_wait(f, fd, POLLIN, b.len == 0);
		if (w != 1) {
			rc = w;
			break;
		}
		char buf[65536];
		ssize_t n = recv(fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		brig_buf_put(&b, buf, (size_t)n);
		const char *data = brig_buf_cstr(&b);
		const char *end = need ? NULL : strstr(data, "\r\n\r\n");
		if (end) {
			size_t hl = (size_t)(end - data) + 4;
			pthread_mutex_lock(&f->lock);
			snprintf(f->last_line, sizeof f->last_line, "%.*s", (int)strcspn(data, "\r"), data);
			snprintf(f->last_head, sizeof f->last_head, "%.*s", (int)hl, data);
			pthread_mutex_unlock(&f->lock);
			size_t cl = 0;
			for (const char *h = strstr(data, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n")) {
				if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
					cl = strtoul(h + 17, NULL, 10);
				if (strncasecmp(h + 2, "Transfer-Encoding: chunked", 26) == 0)
					chunked = true;
			}
			need = hl + cl;
		}
		if (need && !chunked && b.len >= need) {
			rc = 1;
			break;
		}
		if (need && chunked && b.len >= need + 5 &&
		    (memcmp(b.data + b.len - 7, "\r\n0\r\n\r\n", 7) == 0 || b.len == need + 5)) {
			rc = 1;
			break;
		}
	}
	brig_buf_free(&b);
	return rc;
}

static void fake_send(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		data += n;
		len -= (size_t)n;
	}
}

/* Serves one connection; true when it was closed on the test's request. */
static bool fake_serve(fake *f, int fd)
{
	if (f->mode == FAKE_CLOSE_ON_ACCEPT)
		return false;
	for (;;) {
		int r = fake_read_request(f, fd);
		if (r == 2)
			return true;
		if (r != 1)
			return false;
		__atomic_add_fetch(&f->requests, 1, __ATOMIC_SEQ_CST);
		switch (f->mode) {
		case FAKE_NO_ANSWER: return false;
		case FAKE_PARTIAL: fake_send(fd, f->answer, f->answer_len); return false;
		case FAKE_STALL:
			fake_send(fd, f->answer, f->answer_len);
			/* until the client gives up and closes */
			while (fake_wait(f, fd, POLLIN, false) == 1) {
				char buf[4096];
				if (recv(fd, buf, sizeof buf, 0) <= 0)
					break;
			}
			return false;
		case FAKE_ANSWER: fake_send(fd, f->answer, f->answer_len); break;
		case FAKE_CLOSE_ON_ACCEPT: return false;
		}
	}
}

static void *fake_main(void *arg)
{
	fake *f = arg;
	while (fake_wait(f, f->lfd, POLLIN, false) == 1) {
		int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		__atomic_add_fetch(&f->accepts, 1, __ATOMIC_SEQ_CST);
		bool asked = fake_serve(f, fd);
		close(fd);
		if (asked && write(f->ack[1], "a", 1) != 1)
			break;
	}
	return NULL;
}

static int bind_unix(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		fail_msg("bind %s: %s", path, strerror(errno));
	return fd;
}

static void fake_start_n(fake *f, fake_mode mode, const char *answer, size_t answer_len)
{
	assert_false(f->running);
	unlink(f->sock);
	f->lfd = bind_unix(f->sock);
	assert_int_equal(listen(f->lfd, 16), 0);
	f->mode = mode;
	f->answer = answer ? answer : "";
	f->answer_len = answer ? answer_len : 0;
	f->accepts = f->requests = 0;
	f->last_line[0] = f->last_head[0] = '\0';
	assert_int_equal(pipe2(f->stop, O_CLOEXEC), 0);
	assert_int_equal(pipe2(f->ctl, O_CLOEXEC), 0);
	assert_int_equal(pipe2(f->ack, O_CLOEXEC), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
	f->running = true;
}

static void fake_start(fake *f, fake_mode mode, const char *answer)
{
	fake_start_n(f, mode, answer, answer ? strlen(answer) : 0);
}

static void fake_stop(fake *f)
{
	if (!f->running)
		return;
	if (write(f->stop[1], "s", 1) != 1)
		abort();
	pthread_join(f->thread, NULL);
	f->running = false;
	close(f->lfd);
	for (int i = 0; i < 2; i++) {
		close(f->stop[i]);
		close(f->ctl[i]);
		close(f->ack[i]);
	}
	unlink(f->sock);
}

/* Asks the fake to close its idle keep-alive connection and waits until it did. */
static void fake_close_idle(fake *f)
{
	assert_int_equal(write(f->ctl[1], "c", 1), 1);
	struct pollfd p = {.fd = f->ack[0], .events = POLLIN};
	assert_int_equal(poll(&p, 1, 5000), 1);
	char c;
	assert_int_equal(read(f->ack[0], &c, 1), 1);
}

static int fake_accepts(fake *f)
{
	return __atomic_load_n(&f->accepts, __ATOMIC_SEQ_CST);
}

static int fake_requests(fake *f)
{
	return __atomic_load_n(&f->requests, __ATOMIC_SEQ_CST);
}

static void fake_last_line(fake *f, char *out, size_t n)
{
	pthread_mutex_lock(&f->lock);
	snprintf(out, n, "%s", f->last_line);
	pthread_mutex_unlock(&f->lock);
}

static int setup(void **state)
{
	memset(&F, 0, sizeof F);
	pthread_mutex_init(&F.lock, NULL);
	snprintf(F.dir, sizeof F.dir, "/tmp/brig-fake-XXXXXX");
	if (!mkdtemp(F.dir))
		return -1;
	snprintf(F.sock, sizeof F.sock, "%s/docker.sock", F.dir);
	snprintf(F.host, sizeof F.host, "unix://%s", F.sock);
	return 0;
}

static int teardown(void **state)
{
	fake_stop(&F);
	unlink(F.sock);
	if (rmdir(F.dir) != 0)
		fprintf(stderr, "teardown: rmdir %s: %s\n", F.dir, strerror(errno));
	pthread_mutex_destroy(&F.lock);
	return 0;
}

static brig_engine *open_engine(unsigned timeout_ms)
{
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION,
			      .host = F.host,
			      .tls_verify = 0,
			      .timeout_ms = timeout_ms,
			      .skip_negotiation = true};
	brig_engine *e = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_open(&e, &o, &err), err);
	assert_string_equal(brig_engine_api_version(e), "1.41");
	return e;
}

static json_t *create_config(void)
{
	return json_pack("{s:s, s:[s,s]}", "Image", "brig-test:local", "Cmd", "sleep", "60");
}

/* ---- (a), (b): nothing reached a daemon ---- */

static void test_socket_missing(void **state)
{
	brig_engine *e = open_engine(2000);
	brig_error *err = NULL;
	ASSERT_CODE(brig_engine_container_start(e, "abc", &err), BRIG_ENOTSENT, err);
	ASSERT_CONTAINS(err->message, "start container abc");
	ASSERT_CONTAINS(err->message, F.sock);
	/* says how to start Docker */
	ASSERT_CONTAINS(err->message, "dockerd");
	ASSERT_CONTAINS(err->message, "DOCKER_HOST");
	assert_int_equal(err->sys_errno, ENOENT);
	brig_error_free(err);
	brig_engine_free(e);

	/* Opening with negotiation fails the same way, up front. */
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION, .host = F.host, .tls_verify = 0};
	err = NULL;
	e = NULL;
	ASSERT_CODE(brig_engine_open(&e, &o, &err), BRIG_ENOTSENT, err);
	assert_null(e);
	ASSERT_CONTAINS(err->message, "dockerd");
	brig_error_free(err);
}

static void test_nothing_listens(void **state)
{
	/* A stale socket file: bound, never listening, closed. */
	int fd = bind_unix(F.sock);
	close(fd);
	brig_engine *e = open_engine(2000);
	brig_error *err = NULL;
	ASSERT_CODE(brig_engine_container_start(e, "abc", &err), BRIG_ENOTSENT, err);
	assert_int_equal(err->sys_errno, ECONNREFUSED);
	ASSERT_CONTAINS(err->message, "dockerd");
	brig_error_free(err);

	/* A listener that went away. */
	unlink(F.sock);
	fd = bind_unix(F.sock);
	assert_int_equal(listen(fd, 1), 0);
	close(fd);
	err = NULL;
	json_t *cfg = create_config();
	char *id = NULL;
	ASSERT_CODE(brig_engine_container_create(e, &id, "x", cfg, &err), BRIG_ENOTSENT, err);
	assert_null(id);
	json_decref(cfg);
	brig_error_free(err);
	brig_engine_free(e);
	unlink(F.sock);
}

/* ---- (c), (d), (e): the request went out, no complete answer came ---- */

static void test_closed_without_answer(void **state)
{
	fake_start(&F, FAKE_NO_ANSWER, NULL);
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	ASSERT_CODE(brig_engine_container_start(e, "abc", &err), BRIG_EUNCERTAIN, err);
	ASSERT_CONTAINS(err->message, "start container abc");
	ASSERT_CONTAINS(err->message, "may have taken effect");
	assert_int_equal(fake_requests(&F), 1);
	char line[512];
	fake_last_line(&F, line, sizeof line);
	assert_string_equal(line, "POST /v1.41/containers/abc/start HTTP/1.1");
	brig_error_free(err);

	/* With a JSON body the whole request was read before the close. */
	err = NULL;
	json_t *cfg = create_config();
	char *id = NULL;
	ASSERT_CODE(brig_engine_container_create(e, &id, "web", cfg, &err), BRIG_EUNCERTAIN, err);
	assert_null(id);
	assert_int_equal(fake_requests(&F), 2);
	fake_last_line(&F, line, sizeof line);
	assert_string_equal(line, "POST /v1.41/containers/create?name=web HTTP/1.1");
	json_decref(cfg);
	brig_error_free(err);
	brig_engine_free(e);
}

static void test_half_answer(void **state)
{
	static const char *const halves[] = {
		/* status line and some headers */
		"HTTP/1.1 201 Created\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\nConte",
		/* only part of the status line */
		"HTTP/1.1 20",
		/* headers and half a Content-Length body */
		"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 88\r\n\r\n"
		"{\"Id\":\"4fa6e0f0c678",
		/* headers and a chunked body cut in a chunk */
		"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		"1c\r\n{\"Id\":\"4fa6e0f0c678\",\"War",
		/* a chunked body without its last chunk */
		"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
		"1b\r\n{\"Id\":\"4fa6\",\"Warnings\":[]}\r\n",
		/* an error answer cut short is uncertain too, not a conflict */
		"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"message\":",
	};
	for (size_t i = 0; i < sizeof halves / sizeof *halves; i++) {
		fake_start(&F, FAKE_PARTIAL, halves[i]);
		brig_engine *e = open_engine(5000);
		brig_error *err = NULL;
		json_t *cfg = create_config();
		char *id = NULL;
		int r = brig_engine_container_create(e, &id, "web", cfg, &err);
		if (r != BRIG_EUNCERTAIN)
			fail_msg("half %zu: want BRIG_EUNCERTAIN, got %s: %s", i, brig_error_name(r),
				 brig_error_message(err));
		ASSERT_CONTAINS(err->message, "create container web");
		ASSERT_CONTAINS(err->message, "may have taken effect");
		assert_null(id);
		json_decref(cfg);
		brig_error_free(err);
		brig_engine_free(e);
		fake_stop(&F);
	}
}

static void test_silent_daemon_times_out(void **state)
{
	static const char *const stalls[] = {
		"",                                                      /* accepts, reads, never answers */
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", /* headers stop */
		/* a 2xx whose JSON body stops: the answer is still incomplete */
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"Id\":",
	};
	for (size_t i = 0; i < sizeof stalls / sizeof *stalls; i++) {
		fake_start(&F, FAKE_STALL, stalls[i]);
		brig_engine *e = open_engine(300);
		brig_error *err = NULL;
		int64_t t0 = brig_now_ms();
		json_t *j = NULL;
		int r = brig_engine_container_inspect(e, &j, "abc", &err);
		int64_t took = brig_now_ms() - t0;
		if (r != BRIG_EUNCERTAIN)
			fail_msg("stall %zu: want BRIG_EUNCERTAIN, got %s: %s", i, brig_error_name(r),
				 brig_error_message(err));
		ASSERT_CONTAINS(err->message, "inspect container abc");
		assert_null(j);
		/* bounded by timeout_ms, with slack for a loaded machine or valgrind */
		if (took < 250 || took > 3000)
			fail_msg("stall %zu: took %lld ms for a 300 ms deadline", i, (long long)took);
		brig_error_free(err);
		brig_engine_free(e);
		fake_stop(&F);
	}
}

/* ---- (f): the daemon's own error text ---- */

static void test_conflict_message(void **state)
{
	static const char body[] = "{\"message\":\"Conflict. The container name \\\"/x\\\" is already in use by "
				   "container \\\"abc\\\". You have to remove (or rename) that container to be able to "
				   "reuse that name.\"}\n";
	char answer[1024];
	snprintf(answer, sizeof answer,
		 "HTTP/1.1 409 Conflict\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\n"
		 "Docker-Experimental: false\r\nOstype: linux\r\nServer: Docker/24.0.7 (linux)\r\n"
		 "Date: Mon, 04 Dec 2023 10:00:00 GMT\r\nContent-Length: %zu\r\n\r\n%s",
		 sizeof body - 1, body);
	fake_start(&F, FAKE_ANSWER, answer);
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	json_t *cfg = create_config();
	char *id = NULL;
	ASSERT_CODE(brig_engine_container_create(e, &id, "x", cfg, &err), BRIG_ECONFLICT, err);
	assert_null(id);
	ASSERT_CONTAINS(err->message, "create container x: ");
	ASSERT_CONTAINS(err->message, "The container name \"/x\" is already in use by container \"abc\"");
	assert_int_equal(err->http_status, 409);
	json_decref(cfg);
	brig_error_free(err);
	brig_engine_free(e);
}

static void test_not_found(void **state)
{
	fake_start(&F, FAKE_ANSWER,
		   "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 39\r\n\r\n"
		   "{\"message\":\"No such container: ghost\"}\n");
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	ASSERT_CODE(brig_engine_container_start(e, "ghost", &err), BRIG_ENOTFOUND, err);
	assert_string_equal(err->message, "start container ghost: No such container: ghost");
	assert_int_equal(err->http_status, 404);
	brig_error_free(err);
	/* A 404 answer is complete: the connection is kept for the next call. */
	err = NULL;
	ASSERT_CODE(brig_engine_container_remove(e, "ghost", true, true, &err), BRIG_ENOTFOUND, err);
	assert_int_equal(fake_accepts(&F), 1);
	assert_int_equal(fake_requests(&F), 2);
	brig_error_free(err);
	brig_engine_free(e);
}

/* ---- (g): keep-alive ---- */

static const char inspect_body[] = "{\"Id\":\"4fa6e0f0c678\",\"Name\":\"/web\",\"State\":{\"Status\":\"running\","
				   "\"Running\":true,\"Paused\":false,\"Pid\":4242,\"ExitCode\":0}}";

static void check_inspect(json_t *j)
{
	assert_true(json_is_object(j));
	assert_string_equal(json_string_value(json_object_get(j, "Id")), "4fa6e0f0c678");
	json_t *st = json_object_get(j, "State");
	assert_true(json_is_true(json_object_get(st, "Running")));
	assert_true(json_is_false(json_object_get(st, "Paused")));
}

static void test_keep_alive(void **state)
{
	char answer[1024];
	snprintf(answer, sizeof answer,
		 "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\nContent-Length: "
		 "%zu\r\n\r\n%s",
		 sizeof inspect_body - 1, inspect_body);
	fake_start(&F, FAKE_ANSWER, answer);
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	for (int i = 0; i < 2; i++) {
		json_t *j = NULL;
		ASSERT_OK(brig_engine_container_inspect(e, &j, "web", &err), err);
		check_inspect(j);
		json_decref(j);
	}
	assert_int_equal(fake_requests(&F), 2);
	assert_int_equal(fake_accepts(&F), 1); /* one connection carried both */

	/* The daemon drops the idle connection (its idle timeout, a restart):
	 * the next call sees that before reusing it and connects afresh —
	 * not an uncertain failure. */
	fake_close_idle(&F);
	json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(e, &j, "web", &err), err);
	check_inspect(j);
	json_decref(j);
	assert_int_equal(fake_accepts(&F), 2);
	assert_int_equal(fake_requests(&F), 3);

	/* And a POST after another drop. */
	fake_close_idle(&F);
	ASSERT_OK(brig_engine_container_start(e, "web", &err), err);
	assert_int_equal(fake_accepts(&F), 3);
	brig_engine_free(e);
}

static void test_connection_close_not_reused(void **state)
{
	char answer[1024];
	snprintf(answer, sizeof answer,
		 "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: "
		 "%zu\r\n\r\n%s",
		 sizeof inspect_body - 1, inspect_body);
	fake_start(&F, FAKE_ANSWER, answer);
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	for (int i = 0; i < 3; i++) {
		json_t *j = NULL;
		ASSERT_OK(brig_engine_container_inspect(e, &j, "web", &err), err);
		check_inspect(j);
		json_decref(j);
	}
	assert_int_equal(fake_accepts(&F), 3);
	brig_engine_free(e);
}

/* ---- (h): a chunked JSON answer ---- */

static void test_chunked_json(void **state)
{
	/* inspect_body in three chunks, one with an extension, and a trailer */
	size_t n = sizeof inspect_body - 1;
	char answer[2048];
	snprintf(answer, sizeof answer,
		 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
		 "%zx\r\n%.*s\r\n%zx;ext=1\r\n%.*s\r\n%zx\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n",
		 (size_t)10, 10, inspect_body, (size_t)40, 40, inspect_body + 10, n - 50, inspect_body + 50);
	fake_start(&F, FAKE_ANSWER, answer);
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	for (int i = 0; i < 2; i++) {
		json_t *j = NULL;
		ASSERT_OK(brig_engine_container_inspect(e, &j, "web", &err), err);
		check_inspect(j);
		json_decref(j);
	}
	assert_int_equal(fake_accepts(&F), 1); /* chunked answers keep the connection too */
	brig_engine_free(e);
}

/* ---- (i): the daemon hangs up while a large body is being written ---- */

static void test_no_sigpipe(void **state)
{
	fake_start(&F, FAKE_CLOSE_ON_ACCEPT, NULL);
	brig_engine *e = open_engine(5000);
	size_t len = 8u << 20;
	char *tar = xcalloc(1, len);
	struct sigaction old, dfl = {.sa_handler = SIG_DFL};
	for (int round = 0; round < 2; round++) {
		/* Round 1 restores the default disposition: the plain-socket path
		 * must not depend on the library's process-wide SIG_IGN. */
		if (round == 1)
			sigaction(SIGPIPE, &dfl, &old);
		brig_error *err = NULL;
		int r = brig_engine_archive_put_buf(e, "abc", "/tmp", tar, len, &err);
		if (r != BRIG_ENOTSENT && r != BRIG_EUNCERTAIN)
			fail_msg("round %d: want BRIG_ENOTSENT or BRIG_EUNCERTAIN, got %s: %s", round,
				 brig_error_name(r), brig_error_message(err));
		ASSERT_CONTAINS(err->message, "copy files into /tmp of container abc");
		brig_error_free(err);
		if (round == 1)
			sigaction(SIGPIPE, &old, NULL);
	}
	free(tar);
	brig_engine_free(e);
}

/* ---- more of the engine over the fake ---- */

static void test_not_modified_is_success(void **state)
{
	/* 304: start of a running / stop of a stopped container — the state
	 * the caller asked for (engine.h: "Already stopped is success"). */
	fake_start(&F, FAKE_ANSWER, "HTTP/1.1 304 Not Modified\r\nApi-Version: 1.41\r\n\r\n");
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_start(e, "web", &err), err);
	ASSERT_OK(brig_engine_container_stop(e, "web", 5, &err), err);
	assert_null(err);
	char line[512];
	fake_last_line(&F, line, sizeof line);
	assert_string_equal(line, "POST /v1.41/containers/web/stop?t=5 HTTP/1.1");
	brig_engine_free(e);
}

static void test_negotiation(void **state)
{
	static const struct {
		const char *version;
		int rc;
		const char *api;
	} cases[] = {{"1.40", 0, "1.40"},
		     {"1.43", 0, "1.41"},
		     {"1.40 ", 0, "1.40"},
		     {"1.24", BRIG_EPROTO, NULL},
		     {"junk", 0, "1.41"}};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char answer[256];
		snprintf(answer, sizeof answer,
			 "HTTP/1.1 200 OK\r\nApi-Version: %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: 2\r\n\r\nOK",
			 cases[i].version);
		fake_start(&F, FAKE_ANSWER, answer);
		brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION, .host = F.host, .tls_verify = 0};
		brig_engine *e = NULL;
		brig_error *err = NULL;
		int r = brig_engine_open(&e, &o, &err);
		if (r != cases[i].rc)
			fail_msg("Api-Version '%s': want %s, got %s: %s", cases[i].version,
				 brig_error_name(cases[i].rc), brig_error_name(r), brig_error_message(err));
		char line[512];
		fake_last_line(&F, line, sizeof line);
		assert_string_equal(line, "GET /_ping HTTP/1.1");
		if (r == 0) {
			assert_string_equal(brig_engine_api_version(e), cases[i].api);
			ASSERT_OK(brig_engine_ping(e, &err), err);
			json_t *j = NULL;
			/* "OK" is not JSON: a 2xx that is not JSON is a protocol error */
			ASSERT_CODE(brig_engine_version(e, &j, &err), BRIG_EPROTO, err);
			fake_last_line(&F, line, sizeof line);
			char want[64];
			snprintf(want, sizeof want, "GET /v%s/version HTTP/1.1", cases[i].api);
			assert_string_equal(line, want);
			assert_int_equal(fake_accepts(&F), 1);
		} else {
			ASSERT_CONTAINS(err->message, "speaks API 1.24; brig needs 1.25");
			assert_null(e);
		}
		brig_error_free(err);
		brig_engine_free(e);
		fake_stop(&F);
	}
}

static void test_exec_stream_in_first_read(void **state)
{
	/* The 101 and the first frames arrive in one write: the bytes past the
	 * headers are output, not lost. */
	static const char answer[] = "HTTP/1.1 101 UPGRADED\r\n"
				     "Content-Type: application/vnd.docker.raw-stream\r\n"
				     "Connection: Upgrade\r\n"
				     "Upgrade: tcp\r\n"
				     "\r\n"
				     "\x01\0\0\0\0\0\0\x06hello\n"
				     "\x02\0\0\0\0\0\0\x05oops\n"
				     "\x01\0\0\0\0\0\0\x00"
				     "\x01\0\0\0\0\0\0\x06world\n";
	fake_start_n(&F, FAKE_PARTIAL, answer, sizeof answer - 1);
	brig_engine *e = open_engine(5000);
	brig_error *err = NULL;
	brig_test_output out = {0};
	brig_engine_exec_io io = {.stdin_fd = -1,
				  .cancel_fd = -1,
				  .on_output = brig_test_output_cb,
				  .payload = &out,
				  .deadline_ms = brig_now_ms() + 5000};
	ASSERT_OK(brig_engine_exec_start(e, "0123456789abcdef", &io, &err), err);
	assert_int_equal(out.out_len, 12);
	assert_memory_equal(out.out, "hello\nworld\n", 12);
	assert_int_equal(out.err_len, 5);
	assert_memory_equal(out.err, "oops\n", 5);
	char line[512];
	fake_last_line(&F, line, sizeof line);
	assert_string_equal(line, "POST /v1.41/exec/0123456789abcdef/start HTTP/1.1");
	pthread_mutex_lock(&F.lock);
	ASSERT_CONTAINS(F.last_head, "Upgrade: tcp");
	pthread_mutex_unlock(&F.lock);
	brig_test_output_free(&out);
	brig_engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_socket_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_listens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_closed_without_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_half_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_silent_daemon_times_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_conflict_message, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connection_close_not_reused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunked_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_sigpipe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_modified_is_success, setup, teardown),
		cmocka_unit_test_setup_teardown(test_negotiation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_stream_in_first_read, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
