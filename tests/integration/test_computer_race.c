/* test_computer_race.c — computers under races and broken transports: many
 * creators of one identity (threads and processes), a create whose answer is
 * lost, and commands ended by a timeout, a cancel or a killed daemon
 * connection. A small unix-socket proxy in front of dockerd loses answers
 * and kills streams on purpose. Objects carry brig.test=<run id>. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "util/util.h"

#define DOCKER_SOCK "/var/run/docker.sock"
#define MARKER "brig-marker-7q"

static brig_engine *E;
static char NS[64];

static int setup(void **state)
{
	/* the plain exec path (computers made before brig-init): test_computer_guest.c has brig-init's */
	setenv("BRIG_GUEST", "0", 1);
	(void)state;
	signal(SIGPIPE, SIG_IGN); /* the proxy writes to peers that went away */
	return brig_test_setup(&E, NS, sizeof NS, "t");
}

static int teardown(void **state)
{
	(void)state;
	return brig_test_teardown(&E);
}

static brig_identity ident(const char *session)
{
	return (brig_identity){.ns = NS, .agent = "agent", .session = session, .generation = 1};
}

/* Containers of this run whose name is the identity's. */
static json_t *containers_named(const char *name)
{
	json_t *f = brig_test_filters();
	cleanup_free char *n = xasprintf("^/%s$", name);
	json_object_set_new(f, "name", json_pack("[s]", n));
	json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	json_decref(f);
	return list;
}

/* ------------------------------------------------------------------------
 * A proxy in front of dockerd that misbehaves once, on purpose.
 * Each client connection gets its own upstream connection and the bytes are
 * pumped both ways unchanged (so keep-alive and hijacked exec streams work),
 * except:
 *  LOSE_CREATE:     the first POST …/containers/create is forwarded, and when
 *                   the daemon starts answering both sides are closed: the
 *                   container exists but the client never hears of it.
 *  KILL_AT_MARKER:  in the first exec stream whose output carries MARKER, the
 *                   chunk holding it is relayed and the connection is closed
 *                   (a clean frame boundary: it looks like an ordinary end).
 *  KILL_MID_FRAME:  the same, but the last bytes of that chunk are held
 *                   back, so the stream ends inside a frame.
 * ---------------------------------------------------------------------- */

enum { PROXY_PASS, PROXY_LOSE_CREATE, PROXY_KILL_AT_MARKER, PROXY_KILL_MID_FRAME };

#define PROXY_MAX_CONNS 256

typedef struct proxy {
	char dir[32];
	char path[64];
	int mode;
	int lfd;
	int wake[2];
	pthread_t thr;
	atomic_int stop;
	atomic_int triggered; /* how many times the misbehaviour happened (0 or 1) */
	atomic_int creates;   /* POST …/containers/create requests seen */
	pthread_mutex_t mu;
	pthread_t conns[PROXY_MAX_CONNS];
	int nconns;
} proxy;

typedef struct proxy_conn {
	proxy *p;
	int cfd;
} proxy_conn;

static bool request_is(const char *buf, size_t n, const char *path_part, const char *line_end)
{
	/* Looks for "POST /…<path_part>…<line_end>" on one request line. */
	for (const char *s = memmem(buf, n, "POST /", 6); s;
	     s = memmem(s + 1, n - (size_t)(s + 1 - buf), "POST /", 6)) {
		const char *eol = memmem(s, n - (size_t)(s - buf), "\r\n", 2);
		size_t len = eol ? (size_t)(eol - s) : n - (size_t)(s - buf);
		const char *hit = memmem(s, len, path_part, strlen(path_part));
		if (hit && (!line_end || memmem(hit, len - (size_t)(hit - s), line_end, strlen(line_end))))
			return true;
		if (s + 1 >= buf + n)
			break;
	}
	return false;
}

static int write_full(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static void *proxy_conn_main(void *arg)
{
	proxy_conn *pc = arg;
	proxy *p = pc->p;
	int cfd = pc->cfd;
	free(pc);
	int ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", DOCKER_SOCK);
	if (ufd < 0 || connect(ufd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(cfd);
		if (ufd >= 0)
			close(ufd);
		return NULL;
	}
	bool c_open = true, u_open = true;
	bool armed = false;  /* the request we misbehave on went upstream */
	char tail[64] = {0}; /* end of the previous upstream chunk, for a split marker */
	size_t tail_len = 0;
	char *buf = xmalloc(65536 + sizeof tail);
	while (!atomic_load(&p->stop) && (c_open || u_open)) {
		struct pollfd pf[2] = {{.fd = c_open ? cfd : -1, .events = POLLIN},
				       {.fd = u_open ? ufd : -1, .events = POLLIN}};
		int pr = poll(pf, 2, 100);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		if (c_open && pf[0].revents) {
			ssize_t n = read(cfd, buf, 65536);
			if (n <= 0) {
				c_open = false;
				shutdown(ufd, SHUT_WR);
			} else {
				if (request_is(buf, (size_t)n, "/containers/create", NULL))
					atomic_fetch_add(&p->creates, 1);
				if (!armed && !atomic_load(&p->triggered)) {
					if (p->mode == PROXY_LOSE_CREATE)
						armed = request_is(buf, (size_t)n, "/containers/create", NULL);
					else if (p->mode == PROXY_KILL_AT_MARKER || p->mode == PROXY_KILL_MID_FRAME)
						armed = request_is(buf, (size_t)n, "/exec/", "/start HTTP/1.1");
				}
				if (write_full(ufd, buf, (size_t)n) != 0)
					break;
			}
		}
		if (u_open && pf[1].revents) {
			ssize_t n = read(ufd, buf + tail_len, 65536);
			if (n <= 0) {
				u_open = false;
				shutdown(cfd, SHUT_WR);
				continue;
			}
			if (armed && p->mode == PROXY_LOSE_CREATE) {
				/* The daemon answered: the create happened. Lose the answer. */
				if (atomic_fetch_add(&p->triggered, 1) == 0)
					break;
			}
			if (armed && (p->mode == PROXY_KILL_AT_MARKER || p->mode == PROXY_KILL_MID_FRAME)) {
				memcpy(buf, tail, tail_len); /* search across the chunk boundary */
				bool hit = memmem(buf, tail_len + (size_t)n, MARKER "\n", sizeof MARKER) != NULL;
				if (hit && atomic_fetch_add(&p->triggered, 1) == 0) {
					size_t keep = (size_t)n;
					if (p->mode == PROXY_KILL_MID_FRAME)
						keep = keep > 3 ? keep - 3 : 0;
					write_full(cfd, buf + tail_len, keep);
					break;
				}
				size_t all = tail_len + (size_t)n;
				size_t t = all < sizeof tail ? all : sizeof tail;
				memcpy(tail, buf + all - t, t);
				if (write_full(cfd, buf + tail_len, (size_t)n) != 0)
					break;
				tail_len = t;
				continue;
			}
			if (write_full(cfd, buf + tail_len, (size_t)n) != 0)
				break;
		}
	}
	free(buf);
	close(cfd);
	close(ufd);
	return NULL;
}

static void *proxy_main(void *arg)
{
	proxy *p = arg;
	while (!atomic_load(&p->stop)) {
		struct pollfd pf[2] = {{.fd = p->lfd, .events = POLLIN}, {.fd = p->wake[0], .events = POLLIN}};
		if (poll(pf, 2, 200) <= 0 || pf[1].revents)
			continue;
		int cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		pthread_mutex_lock(&p->mu);
		if (p->nconns == PROXY_MAX_CONNS) {
			pthread_mutex_unlock(&p->mu);
			close(cfd);
			continue;
		}
		proxy_conn *pc = xmalloc(sizeof *pc);
		*pc = (proxy_conn){.p = p, .cfd = cfd};
		if (pthread_create(&p->conns[p->nconns], NULL, proxy_conn_main, pc) == 0)
			p->nconns++;
		else {
			close(cfd);
			free(pc);
		}
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

/* The running proxy, if any: on the heap and stopped by the tests' teardown,
 * so a failing test (cmocka longjmps out) leaves no thread on a dead stack. */
static proxy *LIVE_PROXY;

static proxy *proxy_start(int mode)
{
	assert_null(LIVE_PROXY);
	proxy *p = xcalloc(1, sizeof *p);
	LIVE_PROXY = p;
	p->mode = mode;
	snprintf(p->dir, sizeof p->dir, "/tmp/brigproxy-XXXXXX");
	assert_non_null(mkdtemp(p->dir));
	snprintf(p->path, sizeof p->path, "%s/proxy.sock", p->dir);
	p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(p->lfd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, p->path, strlen(p->path) + 1);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(p->lfd, 64), 0);
	assert_int_equal(pipe2(p->wake, O_CLOEXEC), 0);
	pthread_mutex_init(&p->mu, NULL);
	assert_int_equal(pthread_create(&p->thr, NULL, proxy_main, p), 0);
	return p;
}

/* Stops accepting and ends every connection (each notices within 100 ms). */
static void proxy_stop(proxy *p)
{
	atomic_store(&p->stop, 1);
	if (write(p->wake[1], "x", 1) < 0) {
		/* the accept loop also polls with a timeout */
	}
	pthread_join(p->thr, NULL);
	for (int i = 0; i < p->nconns; i++)
		pthread_join(p->conns[i], NULL);
	close(p->lfd);
	close(p->wake[0]);
	close(p->wake[1]);
	unlink(p->path);
	rmdir(p->dir);
	pthread_mutex_destroy(&p->mu);
	free(p);
	LIVE_PROXY = NULL;
}

static int stop_live_proxy(void **state)
{
	(void)state;
	if (LIVE_PROXY)
		proxy_stop(LIVE_PROXY);
	return 0;
}

static brig_engine *proxy_engine(proxy *p)
{
	cleanup_free char *host = xasprintf("unix://%s", p->path);
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION, .host = host, .tls_verify = 0};
	brig_engine *e = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_open(&e, &o, &err), err);
	return e;
}

/* ---- 3. many creators, one container ---- */

#define THREADS 16
#define PROCS 16

typedef struct creator {
	pthread_barrier_t *go;
	const char *session;
	int rc;
	char msg[256];
	char id[80];
	bool adopted;
} creator;

static int create_once(const char *session, char id_out[80], bool *adopted, char msg[256])
{
	brig_engine *e = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_open(&e, NULL, &err);
	if (rc == 0) {
		brig_spec s;
		brig_spec_init(&s);
		char l[96];
		snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
		brig_spec_set(&s, "image", brig_test_image(), NULL);
		brig_spec_add_label(&s, l, NULL);
		brig_identity id = ident(session);
		brig_computer *c = NULL;
		rc = brig_computer_create(e, &c, &id, &s, &err);
		if (rc == 0) {
			snprintf(id_out, 80, "%s", c->id);
			*adopted = c->adopted;
		}
		brig_computer_free(c);
		brig_spec_clear(&s);
		brig_engine_free(e);
	}
	snprintf(msg, 256, "%s", brig_error_message(err));
	brig_error_free(err);
	return rc;
}

static void *creator_main(void *arg)
{
	creator *c = arg;
	pthread_barrier_wait(c->go);
	c->rc = create_once(c->session, c->id, &c->adopted, c->msg);
	return NULL;
}

static void assert_one_container(const char *session, const char *id)
{
	brig_identity ident_ = ident(session);
	char name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(name, &ident_, &err), err);
	cleanup_json json_t *list = containers_named(name);
	if (json_array_size(list) != 1)
		fail_msg("%zu containers named %s, expected exactly one", json_array_size(list), name);
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "Id")), id);
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "State")), "running");
	/* And one brig computer with that identity in this run. */
	brig_computer **cs = NULL;
	size_t n = 0;
	char tl[96];
	snprintf(tl, sizeof tl, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_computer_list(E, &cs, &n, NS, tl, &err), err);
	size_t same = 0;
	for (size_t i = 0; i < n; i++)
		same += strcmp(cs[i]->session, session) == 0;
	brig_computer_free_array(cs, n);
	assert_int_equal(same, 1);
}

static void test_threads_create_one(void **state)
{
	(void)state;
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, THREADS);
	creator cs[THREADS];
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		cs[i] = (creator){.go = &go, .session = "race-threads"};
		assert_int_equal(pthread_create(&t[i], NULL, creator_main, &cs[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	int created = 0;
	for (int i = 0; i < THREADS; i++) {
		if (cs[i].rc != 0)
			fail_msg("creator %d: %s: %s", i, brig_error_name(cs[i].rc), cs[i].msg);
		assert_string_equal(cs[i].id, cs[0].id);
		created += !cs[i].adopted;
	}
	/* Exactly one of them made it; the others adopted it. */
	assert_int_equal(created, 1);
	assert_one_container("race-threads", cs[0].id);
	brig_test_cleanup(E);
}

static void test_processes_create_one(void **state)
{
	(void)state;
	int go[2], res[2];
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(res, O_CLOEXEC), 0);
	pid_t pids[PROCS];
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			/* A separate brig: its own engine, no cmocka, no atexit cleanup. */
			close(go[1]);
			close(res[0]);
			char c;
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			char id[80] = "", msg[256] = "";
			bool adopted = false;
			int rc = create_once("race-procs", id, &adopted, msg);
			char line[400];
			int len = rc == 0 ? snprintf(line, sizeof line, "OK %s %d\n", id, adopted)
					  : snprintf(line, sizeof line, "ERR %s %.200s\n", brig_error_name(rc), msg);
			/* One write under PIPE_BUF: lines never interleave. */
			_exit(write(res[1], line, (size_t)len) == len ? 0 : 1);
		}
	}
	close(go[0]);
	close(res[1]);
	close(go[1]); /* everyone starts */
	brig_buf b;
	brig_buf_init(&b, 1u << 20);
	char buf[4096];
	int64_t deadline = brig_now_ms() + 120000;
	for (;;) {
		struct pollfd pf = {.fd = res[0], .events = POLLIN};
		int pr = poll(&pf, 1, brig_remaining_ms(deadline));
		if (pr == 0)
			fail_msg("creator processes did not finish in time");
		if (pr < 0)
			continue;
		ssize_t n = read(res[0], buf, sizeof buf);
		if (n <= 0)
			break;
		brig_buf_put(&b, buf, (size_t)n);
	}
	close(res[0]);
	for (int i = 0; i < PROCS; i++) {
		int st = 0;
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	char first[80] = "";
	int lines = 0, created = 0;
	char *save = NULL;
	for (char *l = strtok_r((char *)brig_buf_cstr(&b), "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char id[80];
		int adopted = -1;
		if (sscanf(l, "OK %79s %d", id, &adopted) != 2)
			fail_msg("creator process: %s", l);
		if (!first[0])
			snprintf(first, sizeof first, "%s", id);
		assert_string_equal(id, first);
		created += adopted == 0;
		lines++;
	}
	brig_buf_free(&b);
	assert_int_equal(lines, PROCS);
	assert_int_equal(created, 1);
	assert_one_container("race-procs", first);
	brig_test_cleanup(E);
}

static void test_lost_create_answer(void **state)
{
	(void)state;
	proxy *p = proxy_start(PROXY_LOSE_CREATE);
	brig_engine *pe = proxy_engine(p);
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_identity id = ident("lost-answer");
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(pe, &c, &id, &s, &err), err);
	if (atomic_load(&p->triggered) != 1 || atomic_load(&p->creates) != 1)
		fail_msg("proxy: %d answers lost, %d creates seen; want 1 and 1", atomic_load(&p->triggered),
			 atomic_load(&p->creates));
	/* The answer really was lost, the create was not sent twice, and brig
	 * found the container it had made by looking the name up. */
	assert_int_equal(atomic_load(&p->triggered), 1);
	assert_int_equal(atomic_load(&p->creates), 1);
	assert_false(c->adopted);
	assert_string_equal(c->state, "running");
	assert_one_container("lost-answer", c->id);
	/* Creating it again adopts the same one. */
	brig_computer *again = NULL;
	ASSERT_OK(brig_computer_create(pe, &again, &id, &s, &err), err);
	assert_string_equal(again->id, c->id);
	assert_true(again->adopted);
	brig_computer_free(again);
	brig_computer_free(c);
	brig_spec_clear(&s);
	brig_engine_free(pe);
	proxy_stop(p);
	brig_test_cleanup(E);
}

/* ---- 6. timeout, cancel and a killed connection stop the computer ---- */

typedef struct ended {
	const char *what;
	char id[80];
	int64_t since;
} ended;

static void assert_stopped(const char *id)
{
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, id, &err), err);
	json_t *st = json_object_get(j, "State");
	if (!json_is_false(json_object_get(st, "Running")))
		fail_msg("container %.12s still running after the command was ended", id);
}

static void *cancel_after(void *arg)
{
	int fd = *(int *)arg;
	brig_test_sleep_ms(300);
	if (write(fd, "x", 1) != 1)
		abort();
	return NULL;
}

/* Runs `echo MARKER; sleep 30` and returns the rc; fills *res. */
static int run_long(brig_engine *e, const char *ref, int64_t timeout_ms, int cancel_fd, brig_exec_result *res,
		    brig_error **err)
{
	const char *argv[] = {"sh", "-c", "echo " MARKER "; sleep 30", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = cancel_fd,
			    .timeout_ms = timeout_ms};
	return brig_computer_exec(e, ref, &o, res, err);
}

static brig_computer *create_session(const char *session)
{
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_identity id = ident(session);
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	brig_spec_clear(&s);
	return c;
}

static void check_ended(const char *what, int rc, int want, const brig_exec_result *r, brig_error *err, const char *id,
			bool partial)
{
	print_message("%s: %s (%lld ms): %s\n", what, brig_error_name(rc), (long long)r->duration_ms,
		      brig_error_message(err));
	if (rc != want)
		fail_msg("%s: got %s, want %s", what, brig_error_name(rc), brig_error_name(want));
	assert_true(r->container_stopped);
	assert_true(r->duration_ms < 20000);
	const char *m = brig_error_message(err);
	if (!strstr(m, "stopped") || !strstr(m, "checkpoint") || !strstr(m, "not retried"))
		fail_msg("%s: the message must say the computer was stopped and how to recover: %s", what, m);
	/* The command's output up to the end, once; a stream cut inside the
	 * frame delivers a piece of it. */
	const char *out = r->out.data ? r->out.data : "";
	if (partial) {
		if (!*out || strncmp(out, MARKER "\n", strlen(out)) != 0 || strlen(out) > strlen(MARKER))
			fail_msg("%s: expected a cut-off marker, got '%s'", what, out);
	} else if (strcmp(out, MARKER "\n") != 0) {
		fail_msg("%s: expected the marker exactly once in the output, got '%s'", what, out);
	}
	assert_stopped(id);
}

/* Counts exec_create / exec_start events per container of this run, live:
 * the daemon keeps only its last 256 events for `since` queries, and other
 * tests on the same daemon may push ours out. */
typedef struct exec_watch {
	pthread_mutex_t mu;
	struct {
		char id[80];
		int creates, starts;
	} c[64];
	int n;
	atomic_int stop;
	char stop_id[80]; /* the stream ends at this container's next "start" after stop */
	int rc;
	brig_error *err;
	int64_t since;
	pthread_t thr;
} exec_watch;

static int watch_event(json_t *ev, void *payload)
{
	exec_watch *w = payload;
	const char *action = json_string_value(json_object_get(ev, "Action"));
	const char *id = json_string_value(json_object_get(json_object_get(ev, "Actor"), "ID"));
	if (action && id) {
		bool create = strncmp(action, "exec_create:", 12) == 0, start = strncmp(action, "exec_start:", 11) == 0;
		pthread_mutex_lock(&w->mu);
		int i = 0;
		while (i < w->n && strcmp(w->c[i].id, id) != 0)
			i++;
		if (i == w->n && w->n < 64)
			snprintf(w->c[w->n++].id, sizeof w->c[0].id, "%s", id);
		if (i < w->n) {
			w->c[i].creates += create;
			w->c[i].starts += start;
		}
		pthread_mutex_unlock(&w->mu);
	}
	return atomic_load(&w->stop) && action && id && strcmp(action, "start") == 0 && strcmp(id, w->stop_id) == 0;
}

static void *watch_main(void *arg)
{
	exec_watch *w = arg;
	cleanup_free char *l = xasprintf(BRIG_TEST_LABEL "=%s", brig_test_run_id());
	json_t *f = json_pack("{s:[s], s:[s]}", "type", "container", "label", l);
	w->rc = brig_engine_events(E, w->since, 0, f, brig_now_ms() + 240000, watch_event, w, &w->err);
	json_decref(f);
	return NULL;
}

static void watch_start(exec_watch *w)
{
	memset(w, 0, sizeof *w);
	pthread_mutex_init(&w->mu, NULL);
	w->since = brig_wall_s() - 1;
	assert_int_equal(pthread_create(&w->thr, NULL, watch_main, w), 0);
}

/* Waits for the stream to end at the stop event (the caller makes it). */
static void watch_finish(exec_watch *w)
{
	pthread_join(w->thr, NULL);
	if (w->rc != 1)
		fail_msg("event stream: %s: %s", brig_error_name(w->rc), brig_error_message(w->err));
	pthread_mutex_destroy(&w->mu);
}

static void watch_counts(exec_watch *w, const char *id, int *creates, int *starts)
{
	*creates = *starts = 0;
	for (int i = 0; i < w->n; i++) {
		if (strcmp(w->c[i].id, id) == 0) {
			*creates = w->c[i].creates;
			*starts = w->c[i].starts;
		}
	}
}

static void test_timeout_cancel_uncertain(void **state)
{
	(void)state;
	/* Static: its thread outlives a failing test. */
	static exec_watch w;
	watch_start(&w);
	brig_error *err = NULL;
	brig_exec_result r;
	int rc;

	/* Timeout: 124, timed_out, the container stopped. */
	brig_computer *ct = create_session("end-timeout");
	rc = run_long(E, ct->name, 1000, -1, &r, &err);
	check_ended("timeout", rc, BRIG_ETIMEDOUT, &r, err, ct->id, false);
	assert_true(r.timed_out);
	assert_false(r.canceled || r.uncertain);
	assert_int_equal(r.exit_code, 124);
	if (!strstr(brig_error_message(err), "timed out"))
		fail_msg("timeout message: %s", brig_error_message(err));
	assert_true(r.duration_ms >= 1000);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);

	/* Cancel through the fd, 300 ms in. */
	brig_computer *cc = create_session("end-cancel");
	int cp[2];
	assert_int_equal(pipe2(cp, O_CLOEXEC), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, cancel_after, &cp[1]), 0);
	rc = run_long(E, cc->name, 0, cp[0], &r, &err);
	pthread_join(t, NULL);
	close(cp[0]);
	close(cp[1]);
	check_ended("cancel", rc, BRIG_ECANCELED, &r, err, cc->id, false);
	assert_true(r.canceled);
	assert_false(r.timed_out || r.uncertain);
	if (!strstr(brig_error_message(err), "cancel"))
		fail_msg("cancel message: %s", brig_error_message(err));
	assert_true(r.duration_ms >= 250 && r.duration_ms < 10000);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);

	/* The daemon connection dies mid-stream, at a frame boundary (it looks
	 * like an ordinary end of output) and inside a frame. */
	static const struct {
		int mode;
		const char *session;
	} kills[] = {{PROXY_KILL_AT_MARKER, "end-killed-boundary"}, {PROXY_KILL_MID_FRAME, "end-killed-midframe"}};
	brig_computer *ck[2];
	for (int k = 0; k < 2; k++) {
		ck[k] = create_session(kills[k].session);
		proxy *p = proxy_start(kills[k].mode);
		brig_engine *pe = proxy_engine(p);
		rc = run_long(pe, ck[k]->name, 0, -1, &r, &err);
		if (atomic_load(&p->triggered) != 1)
			fail_msg("%s: the proxy did not cut the stream (%s: %s)", kills[k].session, brig_error_name(rc),
				 brig_error_message(err));
		check_ended(kills[k].session, rc, BRIG_EUNCERTAIN, &r, err, ck[k]->id,
			    kills[k].mode == PROXY_KILL_MID_FRAME);
		assert_true(r.uncertain);
		assert_false(r.timed_out || r.canceled);
		if (!strstr(brig_error_message(err), "connection"))
			fail_msg("uncertain message: %s", brig_error_message(err));
		brig_error_free(err);
		err = NULL;
		brig_exec_result_clear(&r);
		brig_engine_free(pe);
		proxy_stop(p);
	}

	/* Recovery is the caller's: creating the computer again starts it, and
	 * that start ends the event watch below. */
	snprintf(w.stop_id, sizeof w.stop_id, "%s", ct->id);
	atomic_store(&w.stop, 1);
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_identity id = ident("end-timeout");
	brig_computer *again = NULL;
	ASSERT_OK(brig_computer_create(E, &again, &id, &s, &err), err);
	assert_string_equal(again->id, ct->id);
	assert_string_equal(again->state, "running");
	brig_computer_free(again);
	brig_spec_clear(&s);

	/* Not run twice: the daemon's own record of exec starts per container. */
	watch_finish(&w);
	const char *ids[] = {ct->id, cc->id, ck[0]->id, ck[1]->id};
	for (size_t i = 0; i < 4; i++) {
		int creates, starts;
		watch_counts(&w, ids[i], &creates, &starts);
		print_message("container %.12s: %d exec created, %d started\n", ids[i], creates, starts);
		if (creates != 1 || starts != 1)
			fail_msg("container %.12s: the command was created %d and started %d times, not once", ids[i],
				 creates, starts);
	}

	brig_computer_free(ct);
	brig_computer_free(cc);
	brig_computer_free(ck[0]);
	brig_computer_free(ck[1]);
	brig_test_cleanup(E);
}

/* A session's command whose end is uncertain (the proxy cuts the daemon
 * connection mid-stream): before brig stops the computer it freezes it and
 * takes a checkpoint, names it in the message, and recover brings the files
 * back from it into a new generation. */
static void test_uncertain_checkpoints_first(void **state)
{
	(void)state;
	char dir[64];
	assert_int_equal(brig_test_tmpdir(dir, sizeof dir, "brig-race-store"), 0);
	cleanup_free char *url = xasprintf("sqlite://%s/store.db", dir);
	cleanup_free char *ckdir = xasprintf("%s/ck", dir);
	assert_int_equal(mkdir(ckdir, 0700), 0);
	brig_store *s = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	brig_spec spec;
	brig_test_spec(&spec, NULL);
	brig_identity id = ident("cut-keep");
	brig_computer *c = NULL;
	ASSERT_OK(brig_session_up(E, s, &c, &id, &spec, &err), err);
	brig_spec_clear(&spec);
	brig_exec_result r;
	ASSERT_OK(
		brig_computer_exec(E, c->name,
				   &(brig_exec_opts){.version = BRIG_EXEC_OPTS_VERSION,
						     .argv = (const char *const[]){"sh", "-c",
										   "echo kept > /workspace/kept", NULL},
						     .stdin_fd = -1,
						     .cancel_fd = -1},
				   &r, &err),
		err);
	brig_exec_result_clear(&r);

	proxy *p = proxy_start(PROXY_KILL_AT_MARKER);
	brig_engine *pe = proxy_engine(p);
	const char *argv[] = {"sh", "-c", "echo " MARKER "; sleep 30", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	int rc = brig_session_exec_keep(pe, s, c->name, &o, ckdir, &r, &err);
	print_message("uncertain in a session: %s: %s\n", brig_error_name(rc), brig_error_message(err));
	assert_int_equal(atomic_load(&p->triggered), 1);
	assert_int_equal(rc, BRIG_EUNCERTAIN);
	assert_true(r.uncertain);
	assert_true(r.container_stopped);
	assert_false(r.stop_checkpoint_failed);
	assert_true(r.stop_checkpoint_id > 0);
	char named[48];
	snprintf(named, sizeof named, "checkpoint %lld", (long long)r.stop_checkpoint_id);
	if (!strstr(brig_error_message(err), named))
		fail_msg("the message must name %s: %s", named, brig_error_message(err));
	int64_t ck = r.stop_checkpoint_id;
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);
	brig_engine_free(pe);
	proxy_stop(p);
	assert_stopped(c->id);

	/* The store: the session failed, the checkpoint its latest. */
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(s, &rec, NS, "agent", "cut-keep", &err), err);
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	brig_store_session_free(rec);
	brig_store_checkpoint *latest = NULL;
	ASSERT_OK(brig_store_checkpoint_latest(s, &latest, NS, "agent", "cut-keep", &err), err);
	assert_int_equal(latest->id, ck);
	assert_int_equal(latest->generation, 1);
	brig_store_checkpoint_free(latest);

	brig_recover_result rr;
	ASSERT_OK(brig_session_recover(E, s, &rr, NS, "agent", "cut-keep", ckdir, &err), err);
	assert_int_equal(rr.checkpoint_id, ck);
	assert_int_equal(rr.new_generation, 2);
	ASSERT_OK(brig_computer_exec(E, rr.computer->name,
				     &(brig_exec_opts){.version = BRIG_EXEC_OPTS_VERSION,
						       .argv = (const char *const[]){"cat", "/workspace/kept", NULL},
						       .stdin_fd = -1,
						       .cancel_fd = -1},
				     &r, &err),
		  err);
	assert_string_equal(r.out.data, "kept\n");
	brig_exec_result_clear(&r);
	brig_recover_result_clear(&rr);
	brig_computer_free(c);
	brig_store_close(s);
	brig_test_rmdir(dir);
	brig_test_cleanup(E);
}

/* With brig-init, a daemon connection that dies mid-command is not the
 * end of certainty: brig reopens the relay once, brig-init says the
 * command ended (it ends the commands of a relay that closed), nothing is
 * run twice and the computer keeps running with its files. */
static void test_guest_relay_cut(void **state)
{
	(void)state;
	setenv("BRIG_GUEST", "1", 1);
	brig_computer *c = create_session("guest-cut");
	setenv("BRIG_GUEST", "0", 1);
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	if (!json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_INIT)) {
		print_message("skipped: this build carries no brig-init\n");
		brig_computer_free(c);
		return;
	}
	brig_exec_result r;
	ASSERT_OK(
		brig_computer_exec(E, c->name,
				   &(brig_exec_opts){.version = BRIG_EXEC_OPTS_VERSION,
						     .argv = (const char *const[]){"sh", "-c",
										   "echo kept > /workspace/kept", NULL},
						     .stdin_fd = -1,
						     .cancel_fd = -1},
				   &r, &err),
		err);
	brig_exec_result_clear(&r);
	proxy *p = proxy_start(PROXY_KILL_AT_MARKER);
	brig_engine *pe = proxy_engine(p);
	int rc = run_long(pe, c->name, 0, -1, &r, &err);
	print_message("relay cut: %s (%lld ms): %s\n", brig_error_name(rc), (long long)r.duration_ms,
		      brig_error_message(err));
	assert_int_equal(atomic_load(&p->triggered), 1);
	assert_int_equal(rc, BRIG_EIO);
	assert_false(r.uncertain);
	assert_false(r.container_stopped);
	assert_true(r.duration_ms < 20000);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);
	brig_engine_free(pe);
	proxy_stop(p);
	/* the sleep is gone, the file is there */
	const char *argv[] = {
		"sh", "-c",
		"n=0; for p in /proc/[0-9]*; do grep -q 'sleep.3[0]' $p/cmdline 2>/dev/null && n=$((n+1)); "
		"done; echo $n; cat /workspace/kept",
		NULL};
	ASSERT_OK(brig_computer_exec(
			  E, c->name,
			  &(brig_exec_opts){
				  .version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1},
			  &r, &err),
		  err);
	assert_string_equal(r.out.data, "0\nkept\n");
	brig_exec_result_clear(&r);
	brig_computer_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_create_one),
		cmocka_unit_test(test_processes_create_one),
		cmocka_unit_test_teardown(test_lost_create_answer, stop_live_proxy),
		cmocka_unit_test_teardown(test_timeout_cancel_uncertain, stop_live_proxy),
		cmocka_unit_test_teardown(test_guest_relay_cut, stop_live_proxy),
		cmocka_unit_test_teardown(test_uncertain_checkpoints_first, stop_live_proxy),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
