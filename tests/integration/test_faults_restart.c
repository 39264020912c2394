/* test_faults_restart.c — the Docker daemon restarted while an exec streams:
 * brig answers BRIG_EUNCERTAIN, never runs the command a second time, marks
 * the session failed, and the session recovers into a new generation from
 * its checkpoint.
 *
 * Restarting dockerd stops every container on the machine, so this runs
 * only with BRIG_TEST_DAEMON_RESTART=1 (scripts/test sets it for the fault
 * suite, last, after every other suite). The daemon is stopped with SIGTERM
 * (pid from /var/run/docker.pid) and started again exactly as
 * scripts/bootstrap does (its start_dockerd), then /_ping is awaited; the
 * daemon is brought back on every way out of the test, failures included.
 * BRIG_TEST_DOCKERD_PIDFILE and BRIG_TEST_DOCKERD_START (a shell command)
 * point the test at a private daemon instead (with DOCKER_HOST). Ends with
 * "N passed, N failed". */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "util/util.h"

#define MARKER "BRIG-RESTART-MARKER"

static brig_engine *E;
static char NS[64];
static char LABEL[96];
static char TMP[80];
static atomic_int DAEMON_STOPPED; /* we stopped it and have not seen it back */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static const char *pidfile(void)
{
	const char *p = getenv("BRIG_TEST_DOCKERD_PIDFILE");
	return p && *p ? p : "/var/run/docker.pid";
}

static bool daemon_answers(void)
{
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION, .tls_verify = -1, .timeout_ms = 3000};
	brig_engine *e = NULL;
	bool ok = brig_engine_open(&e, &o, NULL) == 0;
	brig_engine_free(e);
	return ok;
}

static bool wait_daemon(int seconds)
{
	for (int i = 0; i < seconds * 4; i++) {
		if (daemon_answers())
			return true;
		sleep_ms(250);
	}
	return false;
}

/* Starts dockerd as scripts/bootstrap does (or BRIG_TEST_DOCKERD_START),
 * unless it answers already; waits for /_ping. */
static bool daemon_start(void)
{
	if (daemon_answers()) {
		atomic_store(&DAEMON_STOPPED, 0);
		return true;
	}
	const char *custom = getenv("BRIG_TEST_DOCKERD_START");
	cleanup_free char *cmd = custom && *custom
					 ? xstrdup(custom)
					 : xasprintf(". '%s/scripts/bootstrap' && start_dockerd", BRIG_SOURCE_DIR);
	char *argv[] = {"bash", "-c", cmd, NULL};
	char *out = NULL, *errout = NULL;
	int code = brig_test_spawn(argv, NULL, NULL, &out, &errout);
	fprintf(stderr, "test: starting dockerd: exit %d\n%s%s", code, out ? out : "", errout ? errout : "");
	free(out);
	free(errout);
	bool up = wait_daemon(90);
	if (up)
		atomic_store(&DAEMON_STOPPED, 0);
	return up;
}

/* SIGTERM to dockerd, then wait for the process to be gone. */
static bool daemon_stop(pid_t *out_pid)
{
	FILE *f = fopen(pidfile(), "r");
	long pid = 0;
	if (!f || fscanf(f, "%ld", &pid) != 1 || pid <= 1) {
		if (f)
			fclose(f);
		fprintf(stderr, "test: no dockerd pid in %s\n", pidfile());
		return false;
	}
	fclose(f);
	*out_pid = (pid_t)pid;
	atomic_store(&DAEMON_STOPPED, 1);
	if (kill((pid_t)pid, SIGTERM) != 0) {
		fprintf(stderr, "test: kill -TERM %ld: %s\n", pid, strerror(errno));
		return false;
	}
	for (int i = 0; i < 120 * 4; i++) {
		char p[64];
		snprintf(p, sizeof p, "/proc/%ld/status", pid);
		FILE *s = fopen(p, "r");
		if (!s)
			return true;
		char line[128];
		bool zombie = false;
		while (fgets(line, sizeof line, s))
			if (strncmp(line, "State:", 6) == 0 && strchr(line, 'Z'))
				zombie = true;
		fclose(s);
		if (zombie)
			return true;
		sleep_ms(250);
	}
	return false;
}

/* Whatever happened, the machine gets its daemon back. */
static void ensure_daemon_back(void)
{
	if (atomic_load(&DAEMON_STOPPED) && !daemon_answers()) {
		fprintf(stderr, "test: dockerd is down; starting it again\n");
		daemon_start();
	}
}

static void on_fatal(int sig)
{
	ensure_daemon_back();
	exit(128 + sig); /* runs testutil's cleanup (atexit) too */
}

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	atexit(ensure_daemon_back); /* runs before testutil's cleanup, which needs the daemon */
	signal(SIGINT, on_fatal);
	signal(SIGTERM, on_fatal);
	signal(SIGSEGV, on_fatal);
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "r%s", brig_test_run_id());
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brigtest-restart-%s", brig_test_run_id());
	mkdir(TMP, 0700);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ensure_daemon_back();
	brig_engine_free(E);
	E = brig_test_engine(); /* the old one's connections died with the daemon */
	brig_test_cleanup(E);
	brig_engine_free(E);
	char *argv[] = {"rm", "-rf", TMP, NULL};
	brig_test_spawn(argv, NULL, NULL, NULL, NULL);
	return 0;
}

typedef struct streamer {
	const char *ref;
	const char *store_url;
	atomic_int started;
	int rc;
	brig_exec_result res;
	char msg[512];
} streamer;

static int on_out(int stream, const char *data, size_t len, void *payload)
{
	streamer *s = payload;
	if (stream == BRIG_STREAM_STDOUT && memmem(data, len, "started", 7))
		atomic_store(&s->started, 1);
	return 0;
}

static void *stream_main(void *arg)
{
	streamer *s = arg;
	brig_engine *e = NULL;
	brig_store *st = NULL;
	brig_error *err = NULL;
	s->rc = brig_engine_open(&e, NULL, &err);
	if (s->rc == 0)
		s->rc = brig_store_open(&st, s->store_url, &err);
	if (s->rc == 0) {
		/* The marker goes to PID 1's stdout, i.e. the container's log
		 * file, which outlives the daemon: it counts the runs. */
		const char *argv[] = {"sh", "-c", "echo " MARKER " > /proc/1/fd/1; echo started; sleep 60; echo finished", NULL};
		brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
				    .argv = argv,
				    .stdin_fd = -1,
				    .cancel_fd = -1,
				    .timeout_ms = 180000,
				    .on_output = on_out,
				    .payload = s};
		s->rc = brig_session_exec(e, st, s->ref, &o, &s->res, &err);
	}
	snprintf(s->msg, sizeof s->msg, "%s", brig_error_message(err));
	brig_error_free(err);
	brig_store_close(st);
	brig_engine_free(e);
	return NULL;
}

static int count_in_file(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = 0;
	char line[4096];
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

static void test_daemon_restart_mid_exec(void **state)
{
	(void)state;
	brig_error *err = NULL;
	cleanup_free char *store_url = xasprintf("sqlite://%s/store.db", TMP);
	cleanup_free char *cpdir = xasprintf("%s/checkpoints", TMP);
	mkdir(cpdir, 0700);
	brig_store *st = NULL;
	ASSERT_OK(brig_store_open(&st, store_url, &err), err);

	brig_spec s;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "image", brig_test_image(), &err), err);
	ASSERT_OK(brig_spec_add_label(&s, LABEL, &err), err);
	brig_identity id = {.ns = NS, .agent = "a", .session = "restart", .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_session_up(E, st, &c, &id, &s, &err), err);
	brig_spec_clear(&s);

	/* A checkpoint to recover from. */
	const char *put[] = {"sh", "-c", "echo before-restart > /workspace/f", NULL};
	brig_exec_opts po = {.version = BRIG_EXEC_OPTS_VERSION, .argv = put, .stdin_fd = -1, .cancel_fd = -1};
	brig_exec_result r;
	ASSERT_OK(brig_computer_exec(E, c->name, &po, &r, &err), err);
	brig_exec_result_clear(&r);
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = cpdir};
	ASSERT_OK(brig_checkpoint_create(E, st, NULL, c->name, &co, &err), err);
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	cleanup_free char *log_path = xstrdup(json_string_value(json_object_get(j, "LogPath")));

	/* The exec streams… */
	streamer sm = {.ref = c->name, .store_url = store_url};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, stream_main, &sm), 0);
	for (int i = 0; i < 200 && !atomic_load(&sm.started); i++)
		sleep_ms(100);
	if (!atomic_load(&sm.started)) {
		pthread_join(t, NULL);
		fail_msg("the exec never started: %s %s", brig_error_name(sm.rc), sm.msg);
	}

	/* …and the daemon goes away and comes back. */
	int64_t t0 = brig_now_ms();
	pid_t old = 0;
	bool stopped = daemon_stop(&old);
	int64_t t1 = brig_now_ms();
	bool back = daemon_start();
	int64_t t2 = brig_now_ms();
	print_message("dockerd %d stopped %s in %lld ms, back %s after %lld ms\n", (int)old, stopped ? "ok" : "FAILED",
		      (long long)(t1 - t0), back ? "ok" : "NOT", (long long)(t2 - t1));
	pthread_join(t, NULL);
	assert_true(stopped);
	assert_true(back);
	brig_engine_free(E);
	E = brig_test_engine();

	print_message("exec: %s, exit %d, uncertain %d, stdout '%s': %s\n", brig_error_name(sm.rc), sm.res.exit_code,
		      sm.res.uncertain, sm.res.out.data ? sm.res.out.data : "", sm.msg);
	assert_int_equal(sm.rc, BRIG_EUNCERTAIN);
	assert_true(sm.res.uncertain);
	if (sm.res.out.data && strstr(sm.res.out.data, "finished"))
		fail_msg("the command finished although the daemon went away mid-stream");
	if (!strstr(sm.msg, "not retried"))
		fail_msg("the message does not say the command is not retried: %s", sm.msg);
	int started = 0;
	for (const char *p = sm.res.out.data; p && (p = strstr(p, "started")) != NULL; p += 7)
		started++;
	print_message("the command's output says 'started' %d time(s)\n", started);
	assert_int_equal(started, 1);
	brig_exec_result_clear(&sm.res);

	/* Run once, not twice: the marker is in the container's log once —
	 * when there is a log: computers log nothing through dockerd now
	 * (issue 20), so the witness is the command's own output, which a
	 * second run would have added to. */
	int runs = count_in_file(log_path, MARKER);
	print_message("%s: the marker appears %d time(s)\n", log_path, runs);
	if (runs >= 0)
		assert_int_equal(runs, 1);

	/* The session is failed in the store, and recovers from its checkpoint. */
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(st, &rec, NS, "a", "restart", &err), err);
	print_message("store: generation %lld %s\n", (long long)rec->generation, brig_store_state_to_string(rec->state));
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	brig_store_session_free(rec);
	brig_recover_result rr;
	memset(&rr, 0, sizeof rr);
	ASSERT_OK(brig_session_recover(E, st, &rr, NS, "a", "restart", cpdir, &err), err);
	assert_int_equal(rr.new_generation, 2);
	assert_true(rr.checkpoint_id > 0);
	const char *cat[] = {"cat", "/workspace/f", NULL};
	brig_exec_opts ro = {.version = BRIG_EXEC_OPTS_VERSION, .argv = cat, .stdin_fd = -1, .cancel_fd = -1};
	ASSERT_OK(brig_computer_exec(E, rr.computer->name, &ro, &r, &err), err);
	assert_string_equal(r.out.data, "before-restart\n");
	brig_exec_result_clear(&r);
	brig_recover_result_clear(&rr);
	brig_computer_free(c);
	brig_store_close(st);
}

int main(void)
{
	const char *gate = getenv("BRIG_TEST_DAEMON_RESTART");
	if (!gate || strcmp(gate, "1") != 0) {
		printf("daemon restart case skipped: it stops every container on this machine; set "
		       "BRIG_TEST_DAEMON_RESTART=1 (scripts/test does, for the fault suite, last)\n");
		printf("0 passed, 0 failed\n");
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_daemon_restart_mid_exec),
	};
	int failed = cmocka_run_group_tests(tests, setup, teardown);
	ensure_daemon_back();
	int total = (int)(sizeof tests / sizeof tests[0]);
	printf("%d passed, %d failed\n", failed > total ? 0 : total - failed, failed > total ? total : failed);
	return failed ? 1 : 0;
}
