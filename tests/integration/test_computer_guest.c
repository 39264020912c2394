/* test_computer_guest.c — brig-init from the host against the real dockerd: the
 * engine's held exec stream, fake guests that say garbage, huge frames or
 * nothing (brig neither crashes nor waits past its deadline, and a computer
 * exec through one is uncertain and stops it), and, when this build carries
 * brig-init, computers whose commands go through it: exit codes, output,
 * stdin, env, deadlines and cancels that end setsid'd double-forked trees
 * while the computer keeps its files, and 8 threads x 50 commands on one
 * relay. Every object carries brig.test=<run id> and is removed at exit. */
#include "testutil.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "brig/guest.h"
#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "sandbox/computer_guest.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];

static int setup(void **state)
{
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "t%s", brig_test_run_id());
	return 0;
}

static int teardown(void **state)
{
	brig_test_cleanup(E);
	brig_engine_free(E);
	return 0;
}

static int collect(int stream, const char *d, size_t n, void *payload)
{
	brig_buf *b = payload; /* [0] stdout, [1] stderr */
	brig_buf_put(&b[stream == BRIG_STREAM_STDERR], d, n);
	return 0;
}

/* A running container of the test image (sleeping), labelled for cleanup;
 * extra: more of its body (Env, Labels, Mounts…), merged. */
static char *container(const char *tag, json_t *labels_extra, json_t *env, json_t *mounts, const char *const *entry)
{
	brig_error *err = NULL;
	cleanup_free char *name = brig_test_name(tag);
	json_t *labels = brig_test_labels();
	if (labels_extra)
		json_object_update(labels, labels_extra);
	json_t *ep = json_array();
	for (const char *const *a = entry; *a; a++)
		json_array_append_new(ep, json_string(*a));
	cleanup_json json_t *body =
		json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:o, s:s}}", "Image", brig_test_image(), "User", "1000:1000",
			  "Entrypoint", ep, "Labels", labels, "Env", env ? env : json_array(), "HostConfig", "Mounts",
			  mounts ? mounts : json_array(), "NetworkMode", "none");
	char *id = NULL;
	ASSERT_OK(brig_engine_container_create(E, &id, name, body, &err), err);
	ASSERT_OK(brig_engine_container_start(E, id, &err), err);
	return id;
}

/* ---- the engine's held exec stream ---- */

static void test_engine_stream(void **state)
{
	brig_error *err = NULL;
	const char *sleep_ep[] = {"sleep", "600", NULL};
	cleanup_free char *cid = container("stream", NULL, NULL, NULL, sleep_ep);
	cleanup_json json_t *cfg = json_pack("{s:[s,s,s], s:b, s:b, s:b}", "Cmd", "sh", "-c", "cat; echo done >&2",
					     "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 1);
	cleanup_free char *xid = NULL;
	ASSERT_OK(brig_engine_exec_create(E, &xid, cid, cfg, &err), err);
	brig_engine_stream *s = NULL;
	ASSERT_OK(brig_engine_exec_attach(E, &s, xid, brig_now_ms() + 10000, &err), err);
	size_t w = 0;
	ASSERT_OK(brig_engine_stream_write_some(s, "ping\n", 5, &w, &err), err);
	assert_int_equal(w, 5);
	ASSERT_OK(brig_engine_stream_close_write(s, &err), err);
	brig_buf out[2];
	brig_buf_init(&out[0], 1 << 20);
	brig_buf_init(&out[1], 1 << 20);
	int64_t by = brig_now_ms() + 10000;
	for (;;) {
		if (!brig_engine_stream_pending(s)) {
			struct pollfd p = {.fd = brig_engine_stream_fd(s), .events = POLLIN};
			assert_true(poll(&p, 1, brig_remaining_ms(by)) > 0);
		}
		ssize_t r = brig_engine_stream_read(s, collect, out, by, &err);
		assert_true(r >= 0);
		if (r == 0)
			break;
	}
	assert_string_equal(brig_buf_cstr(&out[0]), "ping\n");
	assert_string_equal(brig_buf_cstr(&out[1]), "done\n");
	brig_buf_free(&out[0]);
	brig_buf_free(&out[1]);
	brig_engine_stream_free(s);
}

/* ---- fake guests ---- */

/* A volume holding a shell script as /.brig/brig-init: PID 1 sleeps, the
 * relay says what $FAKE says. */
static const char FAKE[] = "#!/bin/sh\n"
			   "case \"$1\" in\n"
			   "init) exec sleep 2147483647;;\n"
			   "esac\n"
			   "case \"$FAKE\" in\n"
			   "garbage) printf 'HTTP/1.1 200 OK\\r\\n\\r\\nnot a frame at all'; exec sleep 60;;\n"
			   "huge) printf 'bg\\002\\000\\000\\000\\000\\000\\377\\377\\377\\377'; exec sleep 60;;\n"
			   "*) exec sleep 60;;\n"
			   "esac\n";

static char *fake_volume(void)
{
	brig_error *err = NULL;
	char *vname = brig_test_name("fakeinit");
	cleanup_json json_t *vspec = json_pack("{s:s, s:o}", "Name", vname, "Labels", brig_test_labels());
	cleanup_json json_t *v = NULL;
	ASSERT_OK(brig_engine_volume_create(E, &v, vspec, &err), err);
	/* filled through a created, never-started container, as brig does */
	cleanup_free char *fname = brig_test_name("fakefill");
	cleanup_json json_t *body = json_pack("{s:s, s:o, s:{s:[{s:s, s:s, s:s}]}}", "Image", brig_test_image(),
					      "Labels", brig_test_labels(), "HostConfig", "Mounts", "Type", "volume",
					      "Source", vname, "Target", "/.brig");
	cleanup_free char *fid = NULL;
	ASSERT_OK(brig_engine_container_create(E, &fid, fname, body, &err), err);
	/* one-entry tar by hand */
	size_t len = sizeof FAKE - 1;
	size_t total = 512 + ((len + 511) / 512) * 512 + 1024;
	unsigned char *t = calloc(1, total);
	char *h = (char *)t;
	strcpy(h, "brig-init");
	snprintf(h + 100, 8, "%07o", 0555);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011o", (unsigned)len);
	snprintf(h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	memcpy(t + 512, FAKE, len);
	ASSERT_OK(brig_engine_archive_put_buf(E, fid, "/.brig", t, total, &err), err);
	free(t);
	brig_engine_container_remove(E, fid, true, false, NULL);
	return vname;
}

static void test_fake_guests(void **state)
{
	brig_error *err = NULL;
	cleanup_free char *vname = fake_volume();
	const char *modes[] = {"garbage", "huge", "silent"};
	const int codes[] = {BRIG_EPROTO, BRIG_EPROTO, BRIG_ETIMEDOUT};
	const char *ep[] = {"/.brig/brig-init", "init", NULL};
	for (int i = 0; i < 3; i++) {
		json_t *env = json_pack("[s+]", "FAKE=", modes[i]);
		json_t *mounts = json_pack("[{s:s, s:s, s:s, s:b}]", "Type", "volume", "Source", vname, "Target",
					   "/.brig", "ReadOnly", 1);
		json_t *labels = json_pack("{s:s, s:s, s:s}", BRIG_LABEL_MANAGED, "1", BRIG_LABEL_KIND, "computer",
					   BRIG_LABEL_INIT, "0000000000000000");
		char tag[32];
		snprintf(tag, sizeof tag, "fake-%s", modes[i]);
		cleanup_free char *cid = container(tag, labels, env, mounts, ep);
		json_decref(labels);

		/* the handle: refused in time, nothing crashes */
		brig_guest *g = NULL;
		int64_t t0 = brig_now_ms();
		int rc = brig_guest_open(&g, E, cid, t0 + 1500, &err);
		int64_t took = brig_now_ms() - t0;
		if (rc != codes[i])
			fail_msg("%s: rc %d (%s), want %d", modes[i], rc, brig_error_message(err), codes[i]);
		assert_null(g);
		assert_true(took < 1500 + 1000);
		brig_error_free(err);
		err = NULL;

		/* a computer exec through it: uncertain, the computer stopped, in time */
		const char *argv[] = {"true", NULL};
		brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
				    .argv = argv,
				    .stdin_fd = -1,
				    .cancel_fd = -1,
				    .timeout_ms = 1500};
		brig_exec_result res;
		t0 = brig_now_ms();
		rc = brig_computer_exec(E, cid, &o, &res, &err);
		took = brig_now_ms() - t0;
		if (rc != BRIG_EUNCERTAIN)
			fail_msg("%s: exec rc %d (%s)", modes[i], rc, brig_error_message(err));
		assert_true(res.uncertain);
		assert_true(res.container_stopped);
		assert_true(took < 1500 + 10000 + 3000); /* open, then one more try to ask */
		brig_error_free(err);
		err = NULL;
		brig_exec_result_clear(&res);
	}
}

/* ---- real brig-init (only when this build carries it) ---- */

static bool have_init(void)
{
	if (brig_guest__volume_name())
		return true;
	print_message("skipped: this build carries no brig-init\n");
	return false;
}

static brig_computer *computer(const char *session)
{
	brig_error *err = NULL;
	brig_spec s;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "image", brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(&s, l, &err), err);
	brig_identity id = {.ns = NS, .agent = "agent", .session = session, .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	brig_spec_clear(&s);
	return c;
}

static int sh(const char *ref, const char *script, int64_t timeout_ms, int cancel_fd, const char *in,
	      brig_exec_result *res, brig_error **err)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	const char *env[] = {"GREETING=hi there", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .env = env,
			    .env_count = 1,
			    .stdin_fd = -1,
			    .stdin_data = in,
			    .stdin_len = in ? strlen(in) : 0,
			    .timeout_ms = timeout_ms,
			    .cancel_fd = cancel_fd};
	return brig_computer_exec(E, ref, &o, res, err);
}

static void test_exec_basics(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_computer *c = computer("basics");
	brig_exec_result r;
	ASSERT_OK(sh(c->name, "echo out; echo err >&2; echo $GREETING; exit 7", 0, -1, NULL, &r, &err), err);
	assert_int_equal(r.exit_code, 7);
	assert_string_equal(r.out.data, "out\nhi there\n");
	assert_string_equal(r.err.data, "err\n");
	brig_exec_result_clear(&r);
	ASSERT_OK(sh(c->name, "tr a-z A-Z; id -u; pwd", 0, -1, "shout\n", &r, &err), err);
	assert_string_equal(r.out.data, "SHOUT\n1000\n/workspace\n");
	brig_exec_result_clear(&r);
	const char *argv[] = {"nosuchcmd", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	ASSERT_OK(brig_computer_exec(E, c->name, &o, &r, &err), err);
	assert_int_equal(r.exit_code, 127);
	assert_string_equal(r.err.data, "brig: nosuchcmd: not found in the image\n"); /* as a run says it */
	brig_exec_result_clear(&r);
	brig_computer_free(c);
}

/* The per-process relay cache stays bounded: past its cap the least
 * recently used relay goes (its computer still answers, over a new one),
 * and a relay whose computer is gone leaves at the next exec anywhere. */
static void test_relay_cache_pruned(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_sandbox__guest_cache_cap(2);
	size_t before = brig_sandbox__guest_cache_size();
	assert_true(before <= 2);
	brig_computer *c[3];
	const char *sess[] = {"cache-a", "cache-b", "cache-c"};
	for (int i = 0; i < 3; i++) {
		c[i] = computer(sess[i]);
		brig_exec_result r;
		ASSERT_OK(sh(c[i]->name, "echo $GREETING", 0, -1, NULL, &r, &err), err);
		assert_string_equal(r.out.data, "hi there\n");
		brig_exec_result_clear(&r);
		assert_true(brig_sandbox__guest_cache_size() <= 2);
	}
	/* a's relay was the least recently used: gone, and a new one serves it */
	brig_exec_result r;
	ASSERT_OK(sh(c[0]->name, "echo again", 0, -1, NULL, &r, &err), err);
	assert_string_equal(r.out.data, "again\n");
	brig_exec_result_clear(&r);
	assert_int_equal(brig_sandbox__guest_cache_size(), 2); /* c and a */

	/* c is destroyed: its relay breaks and leaves at the next exec */
	ASSERT_OK(brig_computer_destroy(E, c[2]->name, &err), err);
	int64_t until = brig_now_ms() + 10000;
	size_t n;
	do {
		ASSERT_OK(sh(c[0]->name, "true", 0, -1, NULL, &r, &err), err);
		brig_exec_result_clear(&r);
		n = brig_sandbox__guest_cache_size();
		if (n > 1)
			brig_test_sleep_ms(100);
	} while (n > 1 && brig_now_ms() < until);
	assert_int_equal(n, 1);
	brig_sandbox__guest_cache_cap(0);
	for (int i = 0; i < 3; i++) {
		if (i < 2)
			ASSERT_OK(brig_computer_destroy(E, c[i]->name, &err), err);
		brig_computer_free(c[i]);
	}
}

/* ---- round trips: a proxy in front of dockerd counting requests ---- */

typedef struct proxy {
	char dir[64], path[128];
	int lfd;
	int inspects, exec_creates; /* atomics */
	pthread_t th;
} proxy;

typedef struct pipe_pair {
	proxy *p;
	int c, u;
} pipe_pair;

static void *proxy_pump(void *x)
{
	pipe_pair *pp = x;
	char buf[65536];
	for (;;) {
		struct pollfd pf[2] = {{.fd = pp->c, .events = POLLIN}, {.fd = pp->u, .events = POLLIN}};
		if (poll(pf, 2, -1) < 0)
			break;
		int from = pf[0].revents ? 0 : 1;
		int src = from ? pp->u : pp->c, dst = from ? pp->c : pp->u;
		ssize_t n = read(src, buf, sizeof buf - 1);
		if (n <= 0)
			break;
		if (!from) { /* brig's requests start their writes */
			buf[n] = '\0';
			if (strncmp(buf, "GET /v1.41/containers/", 22) == 0 && strstr(buf, "/json HTTP/1.1"))
				__atomic_add_fetch(&pp->p->inspects, 1, __ATOMIC_RELAXED);
			if (strncmp(buf, "POST /v1.41/containers/", 23) == 0 && strstr(buf, "/exec HTTP/1.1"))
				__atomic_add_fetch(&pp->p->exec_creates, 1, __ATOMIC_RELAXED);
		}
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(dst, buf + off, (size_t)(n - off));
			if (w <= 0)
				goto out;
			off += w;
		}
	}
out:
	close(pp->c);
	close(pp->u);
	free(pp);
	return NULL;
}

static void *proxy_accept(void *x)
{
	proxy *p = x;
	for (;;) {
		int c = accept(p->lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		int u = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		snprintf(a.sun_path, sizeof a.sun_path, "/var/run/docker.sock");
		if (connect(u, (struct sockaddr *)&a, sizeof a) < 0) {
			close(c);
			close(u);
			continue;
		}
		pipe_pair *pp = xcalloc(1, sizeof *pp);
		*pp = (pipe_pair){p, c, u};
		pthread_t t;
		pthread_create(&t, NULL, proxy_pump, pp);
		pthread_detach(t);
	}
}

static void proxy_start(proxy *p)
{
	memset(p, 0, sizeof *p);
	assert_int_equal(brig_test_tmpdir(p->dir, sizeof p->dir, "proxy"), 0);
	snprintf(p->path, sizeof p->path, "%s/docker.sock", p->dir);
	p->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%.100s", p->path);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(p->lfd, 16), 0);
	pthread_create(&p->th, NULL, proxy_accept, p);
}

/* A command in a computer over a warm relay costs one Engine API call (the
 * inspect of its state and labels), through brig_computer_exec and through
 * brig_session_exec alike (issue 16: the session's exec looked twice). */
static void test_exec_round_trips(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_computer *c = computer("round-trips");
	proxy p;
	proxy_start(&p);
	cleanup_free char *host = xasprintf("unix://%s", p.path);
	brig_engine_opts eo = BRIG_ENGINE_OPTS_INIT;
	eo.host = host;
	eo.skip_negotiation = true;
	brig_engine *pe = NULL;
	ASSERT_OK(brig_engine_open(&pe, &eo, &err), err);
	const char *argv[] = {"true", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	brig_exec_result r;
	ASSERT_OK(brig_computer_exec(pe, c->name, &o, &r, &err), err); /* opens and caches the relay */
	brig_exec_result_clear(&r);
	assert_int_equal(__atomic_load_n(&p.exec_creates, __ATOMIC_RELAXED), 1);
	__atomic_store_n(&p.inspects, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < 5; i++) {
		ASSERT_OK(brig_computer_exec(pe, c->name, &o, &r, &err), err);
		assert_int_equal(r.exit_code, 0);
		brig_exec_result_clear(&r);
		ASSERT_OK(brig_session_exec(pe, NULL, c->name, &o, &r, &err), err);
		assert_int_equal(r.exit_code, 0);
		brig_exec_result_clear(&r);
	}
	print_message("10 commands over a warm relay: %d inspects, %d exec creates\n", p.inspects, p.exec_creates);
	assert_int_equal(__atomic_load_n(&p.inspects, __ATOMIC_RELAXED), 10);
	assert_int_equal(__atomic_load_n(&p.exec_creates, __ATOMIC_RELAXED), 1);
	brig_sandbox__guest_cache_prune(0); /* ends this engine's relay before the engine goes */
	brig_engine_free(pe);
	shutdown(p.lfd, SHUT_RDWR);
	close(p.lfd);
	pthread_join(p.th, NULL);
	brig_test_rmdir(p.dir);
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	brig_computer_free(c);
}

/* A tree that hides: a setsid'd child that double-forks, all sleeping
 * with a marker. After the deadline / the cancel none is left and the file
 * written first is still there. */
#define TREE                                                                        \
	"echo kept > /workspace/kept; setsid sh -c '(sleep 1001 &); sleep 1001' & " \
	"sh -c '(setsid sleep 1001 &)'; sleep 1001"
#define COUNT "n=0; for p in /proc/[0-9]*; do grep -q '100[1]' $p/cmdline 2>/dev/null && n=$((n+1)); done; echo $n"

static void check_tree_gone(const char *ref)
{
	brig_error *err = NULL;
	brig_exec_result r;
	ASSERT_OK(sh(ref, COUNT "; cat /workspace/kept", 0, -1, NULL, &r, &err), err);
	assert_string_equal(r.out.data, "0\nkept\n");
	brig_exec_result_clear(&r);
}

/* cancels after 500 ms */
static void *canceler(void *x)
{
	usleep(500000);
	ssize_t w = write(*(int *)x, "x", 1);
	(void)w;
	return NULL;
}

/* A command that never reads the 16 MiB it is given: brig-init stops
 * reading the relay once its stdin and deferred buffers are full, so the
 * client's queue fills. The deadline and a cancel still end it on time —
 * the stdin pump does not hold the call — and the relay serves the next
 * command. */
static void test_unread_stdin_deadline_and_cancel(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_computer *c = computer("unread-stdin");
	size_t big = 16u << 20;
	char *in = xmalloc(big + 1);
	memset(in, 'z', big);
	in[big] = '\0';
	brig_exec_result r;

	int64_t t0 = brig_now_ms();
	int rc = sh(c->name, "echo up; sleep 1002", 2000, -1, in, &r, &err);
	int64_t took = brig_now_ms() - t0;
	print_message("unread stdin, deadline 2 s: %s after %lld ms, exit %d\n", brig_error_name(rc), (long long)took,
		      r.exit_code);
	assert_int_equal(rc, BRIG_ETIMEDOUT);
	assert_true(r.timed_out);
	assert_int_equal(r.exit_code, 124);
	assert_false(r.container_stopped);
	assert_true(took < 2000 + BRIG_GUEST_GRACE_MS);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);

	int cfd[2];
	assert_int_equal(pipe(cfd), 0);
	pthread_t t;
	pthread_create(&t, NULL, canceler, &cfd[1]);
	t0 = brig_now_ms();
	rc = sh(c->name, "echo up; sleep 1002", 60000, cfd[0], in, &r, &err);
	took = brig_now_ms() - t0;
	pthread_join(t, NULL);
	print_message("unread stdin, cancel at 0.5 s: %s after %lld ms, exit %d: %s\n", brig_error_name(rc),
		      (long long)took, r.exit_code, brig_error_message(err));
	/* stdin goes out only as the command takes it (a window per call), so
	 * brig-init keeps reading the relay and the KILL is never queued
	 * behind stdin: cancelled at once, over the same relay */
	assert_int_equal(rc, BRIG_ECANCELED);
	assert_int_equal(r.exit_code, 130);
	assert_false(r.container_stopped);
	assert_false(r.uncertain);
	assert_true(took < 500 + 2500);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);
	close(cfd[0]);
	close(cfd[1]);
	free(in);

	ASSERT_OK(sh(c->name,
		     "n=0; for p in /proc/[0-9]*; do grep -q '100[2]' $p/cmdline 2>/dev/null && n=$((n+1)); done; echo "
		     "$n",
		     10000, -1, NULL, &r, &err),
		  err);
	assert_string_equal(r.out.data, "0\n");
	brig_exec_result_clear(&r);
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	brig_computer_free(c);
}

static void test_deadline_and_cancel(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_computer *c = computer("tree");
	brig_exec_result r;
	int64_t t0 = brig_now_ms();
	assert_int_equal(sh(c->name, TREE, 1000, -1, NULL, &r, &err), BRIG_ETIMEDOUT);
	assert_true(brig_now_ms() - t0 < 1000 + BRIG_GUEST_GRACE_MS);
	assert_int_equal(r.exit_code, 124);
	assert_true(r.timed_out);
	assert_false(r.container_stopped);
	assert_false(r.uncertain);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);
	check_tree_gone(c->name);

	int p[2];
	assert_int_equal(pipe(p), 0);
	pthread_t th;
	pthread_create(&th, NULL, canceler, &p[1]);
	assert_int_equal(sh(c->name, TREE, 0, p[0], NULL, &r, &err), BRIG_ECANCELED);
	pthread_join(th, NULL);
	close(p[0]);
	close(p[1]);
	assert_int_equal(r.exit_code, 130);
	assert_true(r.canceled);
	assert_false(r.container_stopped);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);
	check_tree_gone(c->name);
	brig_computer_free(c);
}

typedef struct worker {
	const char *ref;
	int n;
	int bad;
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < 50; i++) {
		char script[128], want[64];
		snprintf(want, sizeof want, "w%d-%d\n", w->n, i);
		snprintf(script, sizeof script, "printf 'w%d-'; echo %d", w->n, i);
		brig_exec_result r;
		brig_error *err = NULL;
		if (sh(w->ref, script, 30000, -1, NULL, &r, &err) != 0 || r.exit_code != 0 || strcmp(r.out.data, want))
			w->bad++;
		brig_error_free(err);
		brig_exec_result_clear(&r);
	}
	return NULL;
}

static void test_threads(void **state)
{
	if (!have_init())
		return;
	brig_computer *c = computer("threads");
	pthread_t th[8];
	worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (worker){.ref = c->name, .n = i};
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	brig_computer_free(c);
}

static void test_handle_calls(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_computer *c = computer("handle");
	brig_guest *g = NULL;
	ASSERT_OK(brig_guest_open(&g, E, c->id, 0, &err), err);
	const char *argv[] = {"sleep", "1002", NULL};
	brig_guest_exec_opts o = {
		.version = BRIG_GUEST_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	int64_t proc = 0;
	ASSERT_OK(brig_guest_start(g, &o, &proc, &err), err);
	json_t *ps = NULL;
	ASSERT_OK(brig_guest_ps(g, &ps, 0, &err), err);
	bool seen = false;
	size_t i;
	json_t *it;
	json_array_foreach (ps, i, it)
		seen |= json_integer_value(json_object_get(it, "id")) == proc;
	assert_true(seen);
	json_decref(ps);
	brig_guest_exit x;
	ASSERT_OK(brig_guest_kill(g, proc, &x, 0, &err), err);

	ASSERT_OK(brig_guest_write(g, "/workspace/f.txt", -1, "hello", 5, 0644, false, 0, &err), err);
	json_t *st = NULL;
	ASSERT_OK(brig_guest_stat(g, &st, "/workspace/f.txt", false, 0, &err), err);
	assert_int_equal(json_integer_value(json_object_get(st, "size")), 5);
	json_decref(st);
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	ASSERT_OK(brig_guest_read(g, "/workspace/f.txt", 0, -1, (brig_engine_data_cb)(void *)0, NULL, 0, &err), err);
	brig_buf_free(&b);
	assert_int_equal(brig_guest_mkdir(g, "/etc/nope", 0755, false, 0, &err), BRIG_EDENIED);
	brig_error_free(err);
	err = NULL;
	/* SYMLINK: stored as given, never resolved; uid 1000's permissions */
	ASSERT_OK(brig_guest_symlink(g, "/workspace/l", "f.txt", 0, &err), err);
	ASSERT_OK(brig_guest_stat(g, &st, "/workspace/l", true, 0, &err), err);
	assert_string_equal(json_string_value(json_object_get(st, "link")), "f.txt");
	json_decref(st);
	assert_int_equal(brig_guest_symlink(g, "/workspace/l", "g", 0, &err), BRIG_ECONFLICT);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_guest_symlink(g, "/runtime/.brig/l", "x", 0, &err), BRIG_EDENIED);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_guest_symlink(g, "/workspace/l2", "", 0, &err), BRIG_EINVAL);
	brig_error_free(err);
	brig_guest_free(g);
	brig_computer_free(c);
}

/* ---- a slow reader (flow control) ---- */

typedef struct seqcheck {
	uint64_t next; /* the number expected next */
	char cur[32];
	size_t curlen;
	uint64_t bytes;
	bool bad;
	int64_t stall_until; /* nobody reads until then */
} seqcheck;

/* Checks `seq 1 N` as it streams by, holding nothing, and reads slowly. */
static int seq_check(int stream, const char *d, size_t n, void *payload)
{
	seqcheck *s = payload;
	if (stream != BRIG_STREAM_STDOUT)
		s->bad = true;
	while (brig_now_ms() < s->stall_until)
		usleep(20000);
	for (size_t i = 0; i < n; i++) {
		if (d[i] != '\n') {
			if (s->curlen < sizeof s->cur - 1)
				s->cur[s->curlen++] = d[i];
			continue;
		}
		s->cur[s->curlen] = '\0';
		if (strtoull(s->cur, NULL, 10) != s->next)
			s->bad = true;
		s->next++;
		s->curlen = 0;
	}
	s->bytes += n;
	usleep(1000); /* ~64 KiB per ms at best: far slower than the command */
	return 0;
}

typedef struct slowjob {
	brig_guest *g;
	seqcheck s;
	brig_guest_exit x;
	int rc;
	atomic_bool finished;
} slowjob;

static void *slow_main(void *arg)
{
	slowjob *j = arg;
	const char *argv[] = {"seq", "1", "12000000", NULL}; /* 95 MB */
	brig_guest_exec_opts o = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				  .argv = argv,
				  .stdin_fd = -1,
				  .cancel_fd = -1,
				  .deadline_ms = brig_now_ms() + 300000,
				  .on_output = seq_check,
				  .payload = &j->s};
	brig_error *err = NULL;
	j->rc = brig_guest_exec(j->g, &o, &j->x, &err);
	if (j->rc)
		print_message("slow reader: %s\n", brig_error_message(err));
	brig_error_free(err);
	atomic_store(&j->finished, true);
	return NULL;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* 95 MB to a reader that first reads nothing for 3 s, then slowly: the
 * command waits in write(2) (brig's memory stays within the call's window),
 * everything arrives in order, and another call on the same relay answers
 * at once all along. */
static void test_slow_reader(void **state)
{
	if (!have_init())
		return;
	brig_error *err = NULL;
	brig_computer *c = computer("slow");
	brig_guest *g = NULL;
	ASSERT_OK(brig_guest_open(&g, E, c->id, 0, &err), err);
	slowjob j = {.g = g, .s = {.next = 1, .stall_until = brig_now_ms() + 3000}};
	long rss0 = rss_kb(), rss_max = rss0;
	pthread_t th;
	pthread_create(&th, NULL, slow_main, &j);
	int64_t lat[4000];
	size_t nlat = 0;
	const char *argv[] = {"true", NULL};
	brig_guest_exec_opts o = {
		.version = BRIG_GUEST_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	for (;;) {
		if (atomic_load(&j.finished) || nlat == sizeof lat / sizeof *lat)
			break;
		o.deadline_ms = brig_now_ms() + 30000;
		int64_t t0 = brig_now_ms();
		brig_guest_exit x;
		ASSERT_OK(brig_guest_exec(g, &o, &x, &err), err);
		assert_int_equal(x.code, 0);
		lat[nlat++] = brig_now_ms() - t0;
		long r = rss_kb();
		if (r > rss_max)
			rss_max = r;
		usleep(20000);
	}
	pthread_join(th, NULL);
	qsort(lat, nlat, sizeof *lat, cmp_i64);
	print_message("slow reader: %llu bytes, %zu other calls meanwhile: p50 %lld ms, max %lld ms; rss +%ld kB\n",
		      (unsigned long long)j.s.bytes, nlat, (long long)lat[nlat / 2], (long long)lat[nlat - 1],
		      rss_max - rss0);
	assert_int_equal(j.rc, 0);
	assert_int_equal(j.x.code, 0);
	assert_false(j.s.bad);
	assert_int_equal(j.s.next, 12000001);
	assert_true(nlat > 10);
	assert_true(lat[nlat / 2] < 200);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine holds freed memory: RSS says nothing there */
	assert_true(rss_max - rss0 < 24 * 1024);
#endif
	brig_guest_free(g);
	brig_computer_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_stream),
		cmocka_unit_test(test_fake_guests),
		cmocka_unit_test(test_exec_basics),
		cmocka_unit_test(test_deadline_and_cancel),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_handle_calls),
		cmocka_unit_test(test_relay_cache_pruned),
		cmocka_unit_test(test_exec_round_trips),
		cmocka_unit_test(test_unread_stdin_deadline_and_cancel),
		cmocka_unit_test(test_slow_reader),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
