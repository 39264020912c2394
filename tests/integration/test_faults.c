/* test_faults.c — brig under faults (`make faults`, label faults): no daemon
 * at the socket, a daemon that refuses, an answer lost after a create went
 * through, and `kill -9` of the brig command during create, exec, run and
 * checkpoint followed by `brig gc`. The daemon restart case lives in
 * test_faults_restart.c. Every object carries brig.test=<run id>; traffic
 * stays on this machine (unix sockets only). Ends with "N passed, N failed". */
#include "testutil.h"

#include <dirent.h>
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

#include "guest/host.h"
#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];
static char LABEL[96];
static char TMP[80];
/* Findings of test_kill9_then_gc for test_kill9_checkpoint_thawed. */
static bool KILL9_RAN;
static int FROZEN, DISAGREE;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "f%s", brig_test_run_id());
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brigtest-faults-%s", brig_test_run_id());
	mkdir(TMP, 0700);
	/* brig-init's volume first, directly: the faults below are meant for
	 * the requests they name (a computer's create), not for the one-time
	 * fill of that volume. */
	brig_error *err = NULL;
	if (brig_guest__volume_ensure(E, brig_test_image(), &err) != 0) {
		print_error("brig-init volume: %s\n", brig_error_message(err));
		brig_error_free(err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	char *argv[] = {"rm", "-rf", TMP, NULL};
	brig_test_spawn(argv, NULL, NULL, NULL, NULL);
	return 0;
}

static void test_spec(brig_spec *s)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", brig_test_image(), &err), err);
	ASSERT_OK(brig_spec_add_label(s, LABEL, &err), err);
}

/* The daemon's socket path (DOCKER_HOST when it is unix://). */
static const char *daemon_socket(void)
{
	const char *h = getenv("DOCKER_HOST");
	if (h && strncmp(h, "unix://", 7) == 0)
		return h + 7;
	return "/var/run/docker.sock";
}

static size_t count_containers(const char *extra_label)
{
	cleanup_json json_t *f = json_pack("{s:[s]}", "label", LABEL);
	if (extra_label)
		json_array_append_new(json_object_get(f, "label"), json_string(extra_label));
	cleanup_json json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	return json_array_size(list);
}

/* ---- 1. no daemon, or one that refuses ---- */

static void expect_not_sent(const char *host)
{
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION, .host = host, .tls_verify = 0};
	brig_engine *e = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_open(&e, &o, &err);
	print_message("%s: %s: %s\n", host, brig_error_name(rc), brig_error_message(err));
	assert_int_equal(rc, BRIG_ENOTSENT);
	assert_null(e);
	const char *m = brig_error_message(err);
	if (!strstr(m, "dockerd") || !strstr(m, "start"))
		fail_msg("the message does not say how to start Docker: %s", m);
	brig_error_free(err);
}

static void test_no_daemon(void **state)
{
	(void)state;
	/* Missing socket. */
	cleanup_free char *missing = xasprintf("unix://%s/no-such-docker.sock", TMP);
	expect_not_sent(missing);
	/* A socket nobody listens on: connect is refused. */
	cleanup_free char *path = xasprintf("%s/refusing.sock", TMP);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	cleanup_free char *refusing = xasprintf("unix://%s", path);
	expect_not_sent(refusing);

	/* Through the command line: exit 125, the same advice, and nothing
	 * recorded — neither in Docker nor in the session store. */
	cleanup_free char *env_host = xasprintf("DOCKER_HOST=%s", missing);
	cleanup_free char *store = xasprintf("sqlite://%s/nodaemon.db", TMP);
	char *env[] = {env_host, NULL};
	char *argv[] = {"brig", "up", "--store", store, "--ns", NS, "--agent", "a", "--session", "nodaemon",
			"--image", (char *)brig_test_image(), "--label", LABEL, NULL};
	char *out = NULL, *errout = NULL;
	int code = brig_test_spawn(argv, NULL, env, &out, &errout);
	print_message("brig up without a daemon: exit %d: %s", code, errout);
	assert_int_equal(code, 125);
	if (!strstr(errout, "dockerd"))
		fail_msg("no advice on starting Docker: %s", errout);
	free(out);
	free(errout);
	char *argv2[] = {"brig", "create", "--ns", NS, "--agent", "a", "--session", "nodaemon", "--image",
			 (char *)brig_test_image(), "--label", LABEL, NULL};
	cleanup_free char *env_ref = xasprintf("DOCKER_HOST=%s", refusing);
	env[0] = env_ref;
	code = brig_test_spawn(argv2, NULL, env, &out, &errout);
	assert_int_equal(code, 125);
	free(out);
	free(errout);
	close(fd);

	brig_identity id = {.ns = NS, .agent = "a", .session = "nodaemon", .generation = 1};
	char name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	json_t *j = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &j, name, NULL), BRIG_ENOTFOUND);
	cleanup_free char *vol = brig_spec_volume_name(name, BRIG_VOLUME_WORKSPACE);
	assert_int_equal(brig_engine_volume_inspect(E, &j, vol, NULL), BRIG_ENOTFOUND);
	brig_store *st = NULL;
	ASSERT_OK(brig_store_open(&st, store, &err), err);
	brig_store_session *rec = NULL;
	assert_int_equal(brig_store_session_get(st, &rec, NS, "a", "nodaemon", NULL), BRIG_ENOTFOUND);
	brig_store_close(st);
}

/* ---- 2. a proxy that forwards a create and drops the answer ---- */

typedef struct proxy {
	char path[108];
	int lfd;
	atomic_int stop;
	atomic_int armed;   /* drop the answer of the next container create */
	atomic_int dropped; /* creates whose answer was dropped */
	atomic_int creates; /* creates seen */
	/* Answer requests "<fail_method> …<fail_path>…" with a 500 of the
	 * daemon's shape (never forwarded) while fail_armed is set. */
	const char *fail_method, *fail_path;
	atomic_int fail_armed;
	atomic_int failed; /* requests answered so */
	pthread_t thr;
} proxy;

typedef struct relay {
	proxy *p;
	int cfd;
} relay;

static int dial_daemon(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", daemon_socket());
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *relay_main(void *arg)
{
	relay *r = arg;
	proxy *p = r->p;
	int ufd = dial_daemon();
	bool drop = false, sink = false;
	char window[512] = ""; /* the tail of the client's bytes, to spot a request line */
	while (ufd >= 0 && !atomic_load(&p->stop)) {
		struct pollfd pf[2] = {{.fd = r->cfd, .events = POLLIN}, {.fd = ufd, .events = POLLIN}};
		if (poll(pf, 2, 100) <= 0)
			continue;
		char buf[65536];
		if (pf[0].revents) {
			ssize_t n = read(r->cfd, buf, sizeof buf);
			if (n <= 0)
				break;
			if (sink)
				continue;
			/* The request line may straddle reads, and a create's body is
			 * large: scan the previous tail plus the whole chunk. */
			size_t keep = strlen(window);
			char *scan = xmalloc(keep + (size_t)n + 1);
			memcpy(scan, window, keep);
			memcpy(scan + keep, buf, (size_t)n);
			scan[keep + (size_t)n] = '\0';
			for (size_t z = 0; z < keep + (size_t)n; z++)
				if (!scan[z])
					scan[z] = ' ';
			bool fail = false;
			for (const char *fh = atomic_load(&p->fail_armed) && p->fail_path ? strstr(scan, p->fail_path)
											: NULL;
			     fh && !fail; fh = strstr(fh + 1, p->fail_path)) {
				/* the request line's method just before the path (a
				 * request may follow the last one's body directly) */
				size_t ml = strlen(p->fail_method);
				const char *from = fh - scan > (ptrdiff_t)(ml + 16) ? fh - (ml + 16) : scan;
				fail = memmem(from, (size_t)(fh - from), p->fail_method, ml) != NULL;
			}
			{
				if (fail) {
					static const char ans[] =
						"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
						"Content-Length: 41\r\nConnection: close\r\n\r\n"
						"{\"message\":\"injected by test_faults 500\"}";
					atomic_fetch_add(&p->failed, 1);
					(void)!write(r->cfd, ans, sizeof ans - 1);
					/* the rest of the request (its body) is taken and
					 * dropped until the client, told to, closes */
					sink = true;
					free(scan);
					continue;
				}
			}
			const char *hit = strstr(scan, "/containers/create");
			const char *from = hit && hit - scan > 64 ? hit - 64 : scan;
			if (hit && memmem(from, (size_t)(hit - from), "POST ", 5)) {
				atomic_fetch_add(&p->creates, 1);
				if (atomic_exchange(&p->armed, 0))
					drop = true;
				window[0] = '\0';
			} else {
				size_t total = keep + (size_t)n;
				size_t tail = total < sizeof window - 1 ? total : sizeof window - 1;
				memcpy(window, scan + total - tail, tail);
				window[tail] = '\0';
			}
			free(scan);
			if (write(ufd, buf, (size_t)n) != n)
				break;
		}
		if (pf[1].revents) {
			ssize_t n = read(ufd, buf, sizeof buf);
			if (n <= 0)
				break;
			if (drop) {
				/* The daemon answered — the container exists — and the
				 * client never hears it. */
				atomic_fetch_add(&p->dropped, 1);
				break;
			}
			if (write(r->cfd, buf, (size_t)n) != n)
				break;
		}
	}
	if (ufd >= 0)
		close(ufd);
	close(r->cfd);
	free(r);
	return NULL;
}

static void *proxy_main(void *arg)
{
	proxy *p = arg;
	while (!atomic_load(&p->stop)) {
		struct pollfd pf = {.fd = p->lfd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		int c = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		relay *r = xcalloc(1, sizeof *r);
		r->p = p;
		r->cfd = c;
		pthread_t t;
		pthread_create(&t, NULL, relay_main, r);
		pthread_detach(t);
	}
	return NULL;
}

static void proxy_start(proxy *p)
{
	memset(p, 0, sizeof *p);
	snprintf(p->path, sizeof p->path, "%s/proxy.sock", TMP);
	unlink(p->path);
	p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p->path);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(p->lfd, 64), 0);
	assert_int_equal(pthread_create(&p->thr, NULL, proxy_main, p), 0);
}

static void proxy_stop(proxy *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->thr, NULL);
	close(p->lfd);
	sleep_ms(150); /* relays notice stop within their poll interval */
	unlink(p->path);
}

static void test_lost_create_answer(void **state)
{
	(void)state;
	proxy p;
	proxy_start(&p);
	cleanup_free char *host = xasprintf("unix://%s", p.path);
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION, .host = host, .tls_verify = 0};
	brig_engine *e = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_open(&e, &o, &err), err);

	brig_spec s;
	test_spec(&s);
	brig_identity id = {.ns = NS, .agent = "a", .session = "lost-answer", .generation = 1};
	brig_computer *c = NULL;
	atomic_store(&p.armed, 1);
	int rc = brig_computer_create(e, &c, &id, &s, &err);
	print_message("create through the proxy: %s %s; creates seen %d, answers dropped %d\n", brig_error_name(rc),
		      brig_error_message(err), atomic_load(&p.creates), atomic_load(&p.dropped));
	ASSERT_OK(rc, err);
	assert_int_equal(atomic_load(&p.dropped), 1);
	assert_string_equal(c->state, "running");
	/* Exactly one container (and its two volumes): the lost create was
	 * looked up and adopted, not repeated. */
	cleanup_free char *sess = xasprintf(BRIG_LABEL_SESSION "=lost-answer");
	assert_int_equal(count_containers(sess), 1);
	cleanup_free char *vl = xasprintf(BRIG_LABEL_CONTAINER "=%s", c->name);
	cleanup_json json_t *vf = json_pack("{s:[s,s]}", "label", LABEL, vl);
	cleanup_json json_t *vols = NULL;
	ASSERT_OK(brig_engine_volume_list(E, &vols, vf, &err), err);
	assert_int_equal(json_array_size(json_object_get(vols, "Volumes")), 2);
	/* And a second create adopts it. */
	brig_computer *again = NULL;
	ASSERT_OK(brig_computer_create(E, &again, &id, &s, &err), err);
	assert_true(again->adopted);
	assert_string_equal(again->id, c->id);
	brig_computer_free(again);
	brig_computer_free(c);
	brig_spec_clear(&s);
	brig_engine_free(e);
	proxy_stop(&p);
	brig_test_cleanup(E);
}

/* A fresh brig process fills brig-init's volume before its first computer:
 * when the answer to the filler's own create is lost, the filler that did
 * land is used (and removed), not left behind to block every later fill. */
static void test_lost_filler_answer(void **state)
{
	(void)state;
	proxy p;
	proxy_start(&p);
	cleanup_free char *host = xasprintf("DOCKER_HOST=unix://%s", p.path);
	char *env[] = {host, NULL};
	char *argv[] = {"brig", "create", "--ns", NS, "--agent", "a", "--session", "lost-filler", "--image",
			(char *)brig_test_image(), "--label", LABEL, NULL};
	atomic_store(&p.armed, 1);
	char *out = NULL, *errout = NULL;
	int code = brig_test_spawn(argv, NULL, env, &out, &errout);
	print_message("brig create through the proxy: exit %d; creates seen %d, answers dropped %d; %s\n", code,
		      atomic_load(&p.creates), atomic_load(&p.dropped), errout);
	assert_int_equal(code, 0);
	assert_int_equal(atomic_load(&p.dropped), 1);
	free(out);
	free(errout);
	/* no filler left behind */
	cleanup_json json_t *f = json_pack("{s:[s]}", "label", BRIG_LABEL_KIND "=init");
	cleanup_json json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	assert_int_equal(json_array_size(list), 0);
	proxy_stop(&p);
	brig_test_cleanup(E);
}

/* ---- 2b. the daemon failing a request: nothing lost, nothing half-made ---- */

static int spawn_code(char *const argv[], char *const env[], char **errout)
{
	char *out = NULL;
	int code = brig_test_spawn(argv, NULL, env, &out, errout);
	free(out);
	return code;
}

/* brig up of session in store, script (may be NULL) run in it, then one
 * checkpoint: all through the command line, against the daemon itself. */
static void session_checkpointed(const char *store, const char *session, char *const env[], const char *script)
{
	char *up[] = {"brig", "up", "--store", (char *)store, "--ns", NS, "--agent", "a", "--session", (char *)session,
		      "--image", (char *)brig_test_image(), "--label", LABEL, NULL};
	char *put[] = {"brig", "exec", "--store", (char *)store, "--ns", NS, "--agent", "a", "--session",
		       (char *)session, "--", "sh", "-c", (char *)script, NULL};
	char *ck[] = {"brig", "checkpoint", "--store", (char *)store, "--ns", NS, "--agent", "a", "--session",
		      (char *)session, NULL};
	char *const *steps[] = {up, script ? put : NULL, ck};
	for (size_t i = 0; i < 3; i++) {
		if (!steps[i])
			continue;
		char *errout = NULL;
		int code = spawn_code(steps[i], env, &errout);
		if (code != 0)
			fail_msg("brig %s: %d %s", steps[i][1], code, errout);
		free(errout);
	}
}

/* brig sessions rm --force when the daemon fails the computer's removal:
 * it says so, and the session, its computer and its checkpoint stay. */
static void test_sessions_rm_engine_fails(void **state)
{
	(void)state;
	cleanup_free char *store = xasprintf("sqlite://%s/rmfail.db", TMP);
	cleanup_free char *cpdir = xasprintf("BRIG_CHECKPOINT_DIR=%s/rmfail-cp", TMP);
	char *env0[] = {cpdir, NULL};
	session_checkpointed(store, "rmfail", env0, NULL);
	char *errout = NULL;
	int code;

	proxy p;
	proxy_start(&p);
	p.fail_method = "DELETE ";
	p.fail_path = "/containers/";
	atomic_store(&p.fail_armed, 1);
	cleanup_free char *host = xasprintf("DOCKER_HOST=unix://%s", p.path);
	char *env[] = {host, cpdir, NULL};
	char *rm[] = {"brig",	 "sessions", "rm",	"--force",  "--store", store, "--ns",
		      NS,	 "--agent",  "a",	"--session", "rmfail", NULL};
	code = spawn_code(rm, env, &errout);
	print_message("brig sessions rm --force, the daemon failing DELETE: exit %d: %s", code, errout);
	assert_int_not_equal(code, 0);
	if (!strstr(errout, "the session stays in the store") || !strstr(errout, "injected by test_faults"))
		fail_msg("sessions rm did not say what failed and what stays: %s", errout);
	free(errout);
	assert_true(atomic_load(&p.failed) >= 1);
	proxy_stop(&p);

	/* Everything is still there: the record, the computer, the checkpoint. */
	brig_store *st = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&st, store, &err), err);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(st, &rec, NS, "a", "rmfail", &err), err);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, rec->container_name, &err), err);
	json_decref(j);
	brig_store_session_free(rec);
	brig_store_checkpoint *cps = NULL;
	size_t ncp = 0;
	ASSERT_OK(brig_store_checkpoint_list(st, &cps, &ncp, NS, "a", "rmfail", &err), err);
	assert_int_equal(ncp, 1);
	brig_store_checkpoint_free_array(cps, ncp);
	brig_store_close(st);

	/* And the same command against the daemon itself goes through. */
	code = spawn_code(rm, env0, &errout);
	if (code != 0)
		fail_msg("brig sessions rm --force: %d %s", code, errout);
	free(errout);
}

/* brig exec by identity on a session whose computer was lost restores it
 * first; when the daemon fails that restore's create, the command does
 * not run, brig says why, and the session and what the next try needs
 * are as they were: the record's generation, the checkpoint, no computer
 * or volume of a new generation left behind. */
static void test_exec_restore_engine_fails(void **state)
{
	(void)state;
	cleanup_free char *store = xasprintf("sqlite://%s/exfail.db", TMP);
	cleanup_free char *cpdir = xasprintf("BRIG_CHECKPOINT_DIR=%s/exfail-cp", TMP);
	char *env0[] = {cpdir, NULL};
	session_checkpointed(store, "exfail", env0, "echo kept > /workspace/f");
	char *errout = NULL;
	int code;
	/* lost behind brig's back */
	brig_store *st = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&st, store, &err), err);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(st, &rec, NS, "a", "exfail", &err), err);
	int64_t gen = rec->generation;
	cleanup_free char *old = xstrdup(rec->container_name);
	brig_store_session_free(rec);
	ASSERT_OK(brig_computer_destroy(E, old, &err), err);

	brig_identity next = {NS, "a", "exfail", (uint32_t)gen + 1};
	char name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name, &next, &err), err);
	cleanup_free char *create = xasprintf("/containers/create?name=%s", name);
	proxy p;
	proxy_start(&p);
	p.fail_method = "POST ";
	p.fail_path = create;
	atomic_store(&p.fail_armed, 1);
	cleanup_free char *host = xasprintf("DOCKER_HOST=unix://%s", p.path);
	char *env[] = {host, cpdir, NULL};
	char *run[] = {"brig", "exec", "--store", store, "--ns", NS, "--agent", "a", "--session", "exfail", "--",
		       "sh", "-c", "echo ran > /workspace/ran", NULL};
	code = spawn_code(run, env, &errout);
	print_message("brig exec on a lost session, the daemon failing %s: exit %d, %d failed: %s", create, code,
		      atomic_load(&p.failed), errout);
	assert_int_not_equal(code, 0);
	if (!strstr(errout, "injected by test_faults"))
		fail_msg("brig exec did not say what failed: %s", errout);
	free(errout);
	assert_true(atomic_load(&p.failed) >= 1);
	proxy_stop(&p);

	/* The new generation was claimed and, unmade, is marked failed (a
	 * half-made generation never runs on); the checkpoint stays. */
	ASSERT_OK(brig_store_session_get(st, &rec, NS, "a", "exfail", &err), err);
	print_message("after the failed restore: generation %lld, %s\n", (long long)rec->generation,
		      brig_store_state_to_string(rec->state));
	assert_true(rec->generation == gen || (rec->generation == gen + 1 && rec->state == BRIG_STORE_FAILED));
	bool claimed = rec->generation == gen + 1;
	brig_store_session_free(rec);
	brig_store_checkpoint *cps = NULL;
	size_t ncp = 0;
	ASSERT_OK(brig_store_checkpoint_list(st, &cps, &ncp, NS, "a", "exfail", &err), err);
	assert_int_equal(ncp, 1);
	brig_store_checkpoint_free_array(cps, ncp);
	json_t *j = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &j, name, NULL), BRIG_ENOTFOUND);
	cleanup_free char *vol = brig_spec_volume_name(name, BRIG_VOLUME_WORKSPACE);
	if (brig_engine_volume_inspect(E, &j, vol, NULL) != BRIG_ENOTFOUND) {
		json_decref(j);
		fail_msg("the failed restore left volume %s behind", vol);
	}

	/* The next try, against the daemon itself: a failed generation is
	 * said, with what to run; brig recover restores the checkpoint. */
	char *look[] = {"brig", "exec", "--store", store, "--ns", NS, "--agent", "a", "--session", "exfail", "--",
			"cat", "/workspace/f", NULL};
	char *out = NULL;
	if (claimed) {
		code = brig_test_spawn(look, NULL, env0, &out, &errout);
		assert_int_not_equal(code, 0);
		if (!strstr(errout, "brig recover"))
			fail_msg("brig exec on a failed generation: %s", errout);
		free(out);
		free(errout);
		char *rec_argv[] = {"brig", "recover", "--store", store, "--ns", NS, "--agent", "a", "--session",
				    "exfail", NULL};
		code = spawn_code(rec_argv, env0, &errout);
		if (code != 0)
			fail_msg("brig recover: %d %s", code, errout);
		free(errout);
	}
	code = brig_test_spawn(look, NULL, env0, &out, &errout);
	if (code != 0 || !strstr(out, "kept"))
		fail_msg("brig exec after: %d %s %s", code, out, errout);
	free(out);
	free(errout);
	brig_store_close(st);
}

/* ---- 3. kill -9 of brig mid-command, then brig gc ---- */

/* Starts brig with argv (argv[0] "brig"), extra env, output to a log. */
static pid_t spawn_brig(char *const argv[], char *const env[], const char *log)
{
	pid_t p = fork();
	if (p == 0) {
		for (char *const *e = env; e && *e; e++)
			putenv(*e);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(brig_test_brig_bin(), argv);
		_exit(127);
	}
	return p;
}

/* Kills p with SIGKILL after ms; says whether brig was still running. */
static bool kill_after(pid_t p, long ms)
{
	sleep_ms(ms);
	int st = 0;
	bool running = waitpid(p, &st, WNOHANG) == 0;
	kill(p, SIGKILL);
	if (running)
		waitpid(p, &st, 0);
	return running;
}

static int killed, missed;

static void kill_one(const char *what, char *const argv[], char *const env[], long ms)
{
	cleanup_free char *log = xasprintf("%s/kill.log", TMP);
	int64_t t0 = brig_now_ms();
	pid_t p = spawn_brig(argv, env, log);
	bool hit = kill_after(p, ms);
	print_message("kill -9 %-10s after %4ld ms: %s (%lld ms)\n", what, ms,
		      hit ? "killed mid-command" : "it had already finished", (long long)(brig_now_ms() - t0));
	if (hit)
		killed++;
	else
		missed++;
}

static char *sh_out(const char *ref, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1,
			    .timeout_ms = 60000};
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, ref, &o, &r, &err), err);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

static void test_kill9_then_gc(void **state)
{
	(void)state;
	char *img = (char *)brig_test_image();
	cleanup_free char *store = xasprintf("sqlite://%s/kill.db", TMP);
	cleanup_free char *env_store = xasprintf("BRIG_STORE=%s", store);
	char *env[] = {env_store, NULL};
	int64_t start = brig_now_ms();

	/* create: killed before, while and after Docker creates things. */
	static const long create_ms[] = {40, 120, 220, 350, 600};
	for (size_t i = 0; i < sizeof create_ms / sizeof create_ms[0]; i++) {
		char sess[32];
		snprintf(sess, sizeof sess, "k-create-%zu", i);
		char *argv[] = {"brig", "create", "--ns", NS, "--agent", "a", "--session", sess, "--image", img,
				"--label", LABEL, NULL};
		kill_one("create", argv, env, create_ms[i]);
	}

	/* exec: a computer made whole, then execs killed while they stream. */
	char *mk[] = {"brig", "create", "--ns", NS, "--agent", "a", "--session", "k-exec", "--image", img, "--label", LABEL,
		      NULL};
	char *out = NULL, *errout = NULL;
	int code = brig_test_spawn(mk, NULL, env, &out, &errout);
	if (code != 0)
		fail_msg("brig create k-exec: exit %d %s", code, errout);
	char exec_name[BRIG_NAME_SIZE];
	snprintf(exec_name, sizeof exec_name, "%.*s", BRIG_NAME_SIZE - 1, out);
	free(out);
	free(errout);
	static const long exec_ms[] = {30, 150, 400};
	for (size_t i = 0; i < sizeof exec_ms / sizeof exec_ms[0]; i++) {
		char *argv[] = {"brig", "exec", exec_name, "--", "sh", "-c", "echo started; sleep 20", NULL};
		kill_one("exec", argv, env, exec_ms[i]);
	}

	/* run: killed while creating, starting and running. The run's own
	 * deadline (timeout 1 s + 60 s grace) ends its container regardless. */
	static const long run_ms[] = {30, 150, 300, 600, 1200};
	for (size_t i = 0; i < sizeof run_ms / sizeof run_ms[0]; i++) {
		char *argv[] = {"brig", "run", "--image", img, "--label", LABEL, "--timeout", "1", "--", "sleep", "30", NULL};
		kill_one("run", argv, env, run_ms[i]);
	}

	/* checkpoint: a session with 64 MB of data, killed while frozen and
	 * copying. */
	char *up[] = {"brig", "up", "--ns", NS, "--agent", "a", "--session", "k-cp", "--image", img, "--label", LABEL, NULL};
	code = brig_test_spawn(up, NULL, env, &out, &errout);
	if (code != 0)
		fail_msg("brig up k-cp: exit %d %s", code, errout);
	char cp_name[BRIG_NAME_SIZE];
	snprintf(cp_name, sizeof cp_name, "%.*s", BRIG_NAME_SIZE - 1, out);
	free(out);
	free(errout);
	free(sh_out(cp_name, "dd if=/dev/urandom of=/workspace/data bs=1M count=64 2>/dev/null; echo one > /workspace/keep"));
	char *cp_ok[] = {"brig", "checkpoint", "--ns", NS, "--agent", "a", "--session", "k-cp", NULL};
	code = brig_test_spawn(cp_ok, NULL, env, &out, &errout);
	print_message("a good checkpoint first: exit %d %s", code, out);
	assert_int_equal(code, 0);
	free(out);
	free(errout);
	free(sh_out(cp_name, "echo two > /workspace/keep"));
	static const long cp_ms[] = {60, 250, 700};
	for (size_t i = 0; i < sizeof cp_ms / sizeof cp_ms[0]; i++) {
		char *argv[] = {"brig", "checkpoint", "--ns", NS, "--agent", "a", "--session", "k-cp", NULL};
		kill_one("checkpoint", argv, env, cp_ms[i]);
	}
	print_message("%d commands killed mid-way, %d had finished first\n", killed, missed);
	assert_true(killed >= 10);

	/* brig gc leaves young objects alone for 60 s (a creator may still be
	 * at work): wait that out, then collect. */
	int64_t ready = brig_now_ms() + 62000;
	print_message("waiting %lld s for gc's grace period\n", (long long)((ready - brig_now_ms()) / 1000));
	while (brig_now_ms() < ready)
		sleep_ms(500);
	char *gc[] = {"brig", "gc", "--label", LABEL, NULL};
	code = brig_test_spawn(gc, NULL, env, &out, &errout);
	print_message("brig gc: exit %d\n%s%s", code, out, errout);
	assert_int_equal(code, 0);
	free(out);
	free(errout);

	/* What is left is live computers, and volumes of containers that exist. */
	cleanup_json json_t *f = json_pack("{s:[s]}", "label", LABEL);
	cleanup_json json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	size_t i;
	json_t *c;
	int bad = 0;
	json_array_foreach(list, i, c)
	{
		json_t *labels = json_object_get(c, "Labels");
		const char *kind = json_string_value(json_object_get(labels, BRIG_LABEL_KIND));
		const char *st = json_string_value(json_object_get(c, "State"));
		const char *nm = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		const char *sess = json_string_value(json_object_get(labels, BRIG_LABEL_SESSION));
		bool computer = kind && strcmp(kind, "computer") == 0;
		bool paused = st && strcmp(st, "paused") == 0;
		bool live = computer && st && (strcmp(st, "running") == 0 || paused);
		print_message("left: %s %s %s (%s)%s\n", kind ? kind : "?", sess ? sess : "-", st ? st : "?",
			      nm ? nm : "?",
			      paused ? " <- frozen by a checkpoint whose brig was killed: nothing thaws it" : "");
		if (computer && paused)
			FROZEN++; /* judged by test_kill9_checkpoint_thawed */
		if (!live)
			bad++;
	}
	cleanup_json json_t *vols = NULL;
	ASSERT_OK(brig_engine_volume_list(E, &vols, f, &err), err);
	json_t *v;
	json_array_foreach(json_object_get(vols, "Volumes"), i, v)
	{
		const char *owner = json_string_value(json_object_get(json_object_get(v, "Labels"), BRIG_LABEL_CONTAINER));
		json_t *j = NULL;
		bool alive = owner && brig_engine_container_inspect(E, &j, owner, NULL) == 0;
		if (j)
			json_decref(j);
		if (!alive) {
			print_message("left: volume %s of a container that is gone\n",
				      json_string_value(json_object_get(v, "Name")));
			bad++;
		}
	}

	/* The store agrees with Docker: its session's computer runs, and every
	 * checkpoint it lists has its blob, the good one still restorable. */
	brig_store *st = NULL;
	ASSERT_OK(brig_store_open(&st, store, &err), err);
	brig_store_session *sessions = NULL;
	size_t ns = 0;
	ASSERT_OK(brig_store_session_list(st, &sessions, &ns, NS, &err), err);
	for (size_t k = 0; k < ns; k++) {
		json_t *j = NULL;
		const char *cn = sessions[k].container_name;
		int rc = cn ? brig_engine_container_inspect(E, &j, cn, NULL) : BRIG_ENOTFOUND;
		const char *dstate = rc == 0 ? json_string_value(json_object_get(json_object_get(j, "State"), "Status")) : "gone";
		print_message("store: session %s gen %lld state %s; Docker: %s\n", sessions[k].session,
			      (long long)sessions[k].generation, brig_store_state_to_string(sessions[k].state),
			      dstate ? dstate : "?");
		if (rc != 0 || !dstate)
			bad++;
		else if (strcmp(dstate, brig_store_state_to_string(sessions[k].state)) != 0)
			DISAGREE++; /* judged by test_kill9_checkpoint_thawed */
		if (j)
			json_decref(j);
	}
	brig_store_session_free_array(sessions, ns);
	cleanup_free char *dir = NULL;
	ASSERT_OK(brig_checkpoint_dir(&dir, st, &err), err);
	brig_store_checkpoint *cps = NULL;
	size_t ncp = 0;
	ASSERT_OK(brig_store_checkpoint_list(st, &cps, &ncp, NS, "a", "k-cp", &err), err);
	print_message("store: %zu checkpoint(s) of k-cp\n", ncp);
	assert_true(ncp >= 1);
	for (size_t k = 0; k < ncp; k++) {
		cleanup_free char *blob = cps[k].blob[0] == '/' ? xstrdup(cps[k].blob) : xasprintf("%s/%s", dir, cps[k].blob);
		struct stat sb;
		/* an incremental checkpoint's record names its manifest; bytes_stored counts new file blobs too */
		bool manifest = strstr(blob, ".manifest") != NULL;
		if (stat(blob, &sb) != 0 || (!manifest && sb.st_size != cps[k].bytes_stored)) {
			print_message("checkpoint %lld: blob %s missing or of the wrong size\n", (long long)cps[k].id, blob);
			bad++;
		}
	}
	DIR *d = opendir(dir);
	for (struct dirent *de; d && (de = readdir(d));)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 && !strstr(de->d_name, ".tar.zst") &&
		    !strstr(de->d_name, ".manifest") && strcmp(de->d_name, "blobs") != 0 &&
		    strcmp(de->d_name, ".gc.lock") != 0)
			print_message("note: %s/%s is left in the checkpoint directory\n", dir, de->d_name);
	if (d)
		closedir(d);
	/* The last good checkpoint restores into a fresh computer. */
	if (ncp > 0) {
		brig_spec s;
		test_spec(&s);
		brig_identity rid = {.ns = NS, .agent = "a", .session = "k-restore", .generation = 1};
		brig_computer *rc2 = NULL;
		ASSERT_OK(brig_computer_create(E, &rc2, &rid, &s, &err), err);
		ASSERT_OK(brig_checkpoint_restore(E, dir, &cps[ncp - 1], rc2->name, &err), err);
		cleanup_free char *keep = sh_out(rc2->name, "cat /workspace/keep; stat -c %s /workspace/data");
		print_message("restored: %s", keep);
		if (strncmp(keep, "one\n", 4) != 0 && strncmp(keep, "two\n", 4) != 0)
			fail_msg("the restored checkpoint is not one brig took: %s", keep);
		assert_non_null(strstr(keep, "67108864"));
		brig_computer_free(rc2);
		brig_spec_clear(&s);
	}
	brig_store_checkpoint_free_array(cps, ncp);
	brig_store_close(st);
	print_message("the kill -9 case took %lld s\n", (long long)((brig_now_ms() - start) / 1000));
	KILL9_RAN = true;
	if (bad)
		fail_msg("%d brig object(s) left that are not live computers, or that are gone from under the store",
			 bad);
	brig_test_cleanup(E);
}

/* The checkpoint's freeze must not outlive a killed brig: once gc has run,
 * no computer is left paused by it, and the store says what Docker says. */
static void test_kill9_checkpoint_thawed(void **state)
{
	(void)state;
	if (!KILL9_RAN)
		skip();
	print_message("computers left frozen: %d; sessions whose store state differs from Docker's: %d\n", FROZEN,
		      DISAGREE);
	if (FROZEN || DISAGREE)
		fail_msg("a checkpoint killed while its computer was frozen left it paused (nothing thaws it) and the "
			 "store still says running: the freeze needs a guard that outlives brig");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_daemon),
		cmocka_unit_test(test_lost_create_answer),
		cmocka_unit_test(test_lost_filler_answer),
		cmocka_unit_test(test_sessions_rm_engine_fails),
		cmocka_unit_test(test_exec_restore_engine_fails),
		cmocka_unit_test(test_kill9_then_gc),
		cmocka_unit_test(test_kill9_checkpoint_thawed),
	};
	if (getenv("BRIG_TEST_FILTER")) /* e.g. test_lost_create_answer */
		cmocka_set_test_filter(getenv("BRIG_TEST_FILTER"));
	int failed = cmocka_run_group_tests(tests, setup, teardown);
	int total = (int)(sizeof tests / sizeof tests[0]);
	printf("%d passed, %d failed\n", failed > total ? 0 : total - failed, failed > total ? total : failed);
	return failed ? 1 : 0;
}
