/* test_session.c — sessions end to end against the real dockerd and a real
 * store: files survive a failure through checkpoint and recovery (owners,
 * modes, links, a 100 MB file), and racing brig processes (two processes,
 * eight threads each) make one generation on `up` and exactly one new
 * generation on `recover`, on SQLite and on PostgreSQL ($BRIG_TEST_PG, in a
 * schema of its own that is dropped afterwards). */
#include "testutil.h"
#include "helpers/pg_schema.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
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

static brig_engine *E;
static char NS[64];
static char TMP[64];  /* mkdtemp: the SQLite store and its checkpoints */
static char *SQLITE;  /* its store URL */
static char *PG;      /* $BRIG_TEST_PG + schema=…, or NULL (skipped) */
static char PG_SCHEMA[64];

static int setup(void **state)
{
	/* the plain exec path (computers made before brig-init): test_computer_guest.c has brig-init's */
	setenv("BRIG_GUEST", "0", 1);
	(void)state;
	brig_test_setup(&E, NS, sizeof NS, "s");
	if (brig_test_tmpdir(TMP, sizeof TMP, "brig-session") != 0)
		return -1;
	SQLITE = xasprintf("%s/store.db", TMP);
	PG = pg_schema_url(PG_SCHEMA, sizeof PG_SCHEMA, "brig_t_");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_teardown(&E);
	if (PG)
		pg_schema_drop(PG_SCHEMA);
	brig_test_rmdir(TMP);
	free(SQLITE);
	free(PG);
	return 0;
}

/* A fresh checkpoint directory under TMP (caller frees). */
static char *make_dir(const char *tag)
{
	char *d = xasprintf("%s/%s", TMP, tag);
	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", d, strerror(errno));
	return d;
}

static brig_store *open_store(const char *url)
{
	brig_store *s = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	return s;
}

/* Runs `sh -c script` through brig_session_exec. */
static int sh(brig_store *s, const char *ref, const char *script, int64_t timeout_ms, brig_exec_result *res,
	      brig_error **err)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = timeout_ms,
			    .capture_max = 8u << 20};
	return brig_session_exec(E, s, ref, &o, res, err);
}

/* A script that must succeed; returns its stdout (caller frees). */
static char *sh_ok(brig_store *s, const char *ref, const char *script)
{
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(sh(s, ref, script, 300000, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("`%s` exited %d: %s", script, r.exit_code, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

static brig_store_session *session_get(brig_store *s, const char *session)
{
	brig_store_session *r = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_session_get(s, &r, NS, "agent", session, &err), err);
	return r;
}

/* Containers of this run and session: array of {name, generation, state}. */
static json_t *session_containers(const char *session)
{
	char l1[96], l2[128], l3[128];
	snprintf(l1, sizeof l1, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(l2, sizeof l2, BRIG_LABEL_SESSION "=%s", session);
	snprintf(l3, sizeof l3, BRIG_LABEL_NS "=%s", NS);
	json_t *f = json_pack("{s:[s,s,s]}", "label", l1, l2, l3);
	json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	json_decref(f);
	return list;
}

static const char *container_gen(json_t *c)
{
	return json_string_value(json_object_get(json_object_get(c, "Labels"), BRIG_LABEL_GENERATION));
}

static bool container_exists(const char *name)
{
	json_t *j = NULL;
	int rc = brig_engine_container_inspect(E, &j, name, NULL);
	json_decref(j);
	if (rc != 0 && rc != BRIG_ENOTFOUND)
		fail_msg("inspect %s: %s", name, brig_error_name(rc));
	return rc == 0;
}

static bool volume_exists(const char *name)
{
	json_t *j = NULL;
	int rc = brig_engine_volume_inspect(E, &j, name, NULL);
	json_decref(j);
	if (rc != 0 && rc != BRIG_ENOTFOUND)
		fail_msg("volume inspect %s: %s", name, brig_error_name(rc));
	return rc == 0;
}

/* ------------------------------------------------------------------------
 * End to end: files → checkpoint → more files → timeout → recover.
 * ---------------------------------------------------------------------- */

/* /runtime/.brig is brig's started marker of each container, not a file of
 * the session: checkpoints leave it out. */
static const char LISTING[] = "find /workspace /runtime -exec stat -c '%n %a %u:%g %s %F' {} + | "
			      "grep -v '^/runtime/.brig' | sort; "
			      "md5sum /workspace/big";

static void test_end_to_end(void **state)
{
	(void)state;
	brig_store *s = open_store(SQLITE);
	cleanup_free char *ckdir = make_dir("ck-e2e");
	brig_error *err = NULL;
	brig_spec spec;
	brig_test_spec(&spec, NULL);
	brig_identity id = {NS, "agent", "e2e", 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_session_up(E, s, &c, &id, &spec, &err), err);
	assert_int_equal(c->generation, 1);
	cleanup_free char *gen1 = xstrdup(c->name);

	free(sh_ok(s, gen1,
		   "set -e; cd /workspace; mkdir -p d/empty keep; echo hello > d/f; ln -s d/f link; "
		   "ln -s ../big keep/uplink; printf '#!/bin/sh\\necho run\\n' > run.sh; chmod 0700 run.sh; "
		   "chmod 0750 keep; echo secret > keep/private; chmod 0600 keep/private; "
		   "dd if=/dev/urandom of=big bs=1M count=100 2>/dev/null; "
		   "mkdir -p /runtime/.config; echo rt > /runtime/.config/rt; chmod 0640 /runtime/.config/rt"));
	cleanup_free char *before = sh_ok(s, gen1, LISTING);
	assert_non_null(strstr(before, "/workspace/big 644 1000:1000 104857600 regular file"));
	assert_non_null(strstr(before, "/workspace/run.sh 700 1000:1000"));
	assert_non_null(strstr(before, "/workspace/link 777 1000:1000 3 symbolic link"));
	assert_non_null(strstr(before, "/workspace/d/empty 755 1000:1000"));
	assert_non_null(strstr(before, "/runtime/.config/rt 640 1000:1000 3 regular file"));

	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = ckdir};
	brig_store_checkpoint *cp = NULL;
	ASSERT_OK(brig_checkpoint_create(E, s, &cp, gen1, &co, &err), err);
	assert_int_equal(cp->generation, 1);
	assert_true(cp->bytes_raw > 100 * 1024 * 1024);
	print_message("checkpoint %lld: %lld bytes archived, %lld stored\n", (long long)cp->id,
		      (long long)cp->bytes_raw, (long long)cp->bytes_stored);

	/* Work after the checkpoint, which recovery must not bring back. */
	free(sh_ok(s, gen1,
		   "echo later > /workspace/later; rm -r /workspace/d/empty; echo changed > /workspace/d/f; "
		   "chmod 0644 /workspace/run.sh; echo later > /runtime/later; "
		   "dd if=/dev/zero of=/workspace/big bs=1M count=1 conv=notrunc 2>/dev/null"));

	/* A command that times out stops the computer and fails the session. */
	brig_exec_result r;
	int rc = sh(s, gen1, "sleep 60", 1000, &r, &err);
	assert_int_equal(rc, BRIG_ETIMEDOUT);
	assert_true(r.timed_out);
	assert_true(r.container_stopped);
	brig_exec_result_clear(&r);
	brig_error_free(err);
	err = NULL;
	brig_store_session *rec = session_get(s, "e2e");
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	assert_int_equal(rec->generation, 1);
	brig_store_session_free(rec);
	brig_store_audit *au = NULL;
	size_t nau = 0;
	ASSERT_OK(brig_store_audit_list(s, &au, &nau, NS, "agent", "e2e", 1, &err), err);
	assert_int_equal(nau, 1);
	assert_string_equal(au[0].outcome, "timeout");
	assert_true(au[0].timed_out);
	assert_string_equal(au[0].argv_json, "[\"sh\",\"-c\",\"sleep 60\"]");
	brig_store_audit_free_array(au, nau);

	/* up refuses a failed session and says to recover. */
	brig_computer *again = NULL;
	assert_int_equal(brig_session_up(E, s, &again, &id, NULL, &err), BRIG_ESTATE);
	assert_non_null(strstr(brig_error_message(err), "brig recover"));
	brig_error_free(err);
	err = NULL;

	brig_recover_result rr;
	ASSERT_OK(brig_session_recover(E, s, &rr, NS, "agent", "e2e", ckdir, &err), err);
	assert_true(rr.won);
	assert_int_equal(rr.old_generation, 1);
	assert_int_equal(rr.new_generation, 2);
	assert_int_equal(rr.checkpoint_id, cp->id);
	assert_int_equal(rr.computer->generation, 2);
	assert_string_not_equal(rr.computer->name, gen1);
	cleanup_free char *gen2 = xstrdup(rr.computer->name);
	brig_recover_result_clear(&rr);

	rec = session_get(s, "e2e");
	assert_int_equal(rec->generation, 2);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	assert_string_equal(rec->container_name, gen2);
	brig_store_session_free(rec);
	char *resolved = NULL;
	ASSERT_OK(brig_session_resolve(s, &resolved, NS, "agent", "e2e", &err), err);
	assert_string_equal(resolved, gen2);
	free(resolved);

	/* Exactly the checkpointed tree: names, modes, owners, sizes, types. */
	cleanup_free char *after = sh_ok(s, gen2, LISTING);
	if (strcmp(before, after) != 0)
		fail_msg("generation 2 differs from the checkpoint\n--- checkpointed:\n%s--- restored:\n%s", before,
			 after);
	cleanup_free char *link = sh_ok(s, gen2,
					"readlink /workspace/link; cat /workspace/link; "
					"readlink /workspace/keep/uplink; /workspace/run.sh");
	assert_string_equal(link, "d/f\nhello\n../big\nrun\n");

	/* Generation 1 is gone, with its volumes; only generation 2 is left. */
	assert_false(container_exists(gen1));
	cleanup_free char *v1 = brig_spec_volume_name(gen1, BRIG_VOLUME_WORKSPACE);
	cleanup_free char *v2 = brig_spec_volume_name(gen1, BRIG_VOLUME_RUNTIME);
	assert_false(volume_exists(v1));
	assert_false(volume_exists(v2));
	json_t *list = session_containers("e2e");
	assert_int_equal(json_array_size(list), 1);
	assert_string_equal(container_gen(json_array_get(list, 0)), "2");
	json_decref(list);

	brig_store_checkpoint_free(cp);
	brig_computer_free(c);
	brig_spec_clear(&spec);
	brig_store_close(s);
}

/* ------------------------------------------------------------------------
 * Races: two processes × eight threads on one session and one store.
 * ---------------------------------------------------------------------- */

enum { RACE_PROCS = 2, RACE_THREADS = 8 };
enum { OP_UP, OP_RECOVER };

typedef struct race_arg {
	const char *url;
	const char *session;
	const char *ckdir;
	const brig_spec *spec;
	int op;
	long delay_ms; /* after the gate opens */
	pthread_barrier_t *ready, *go;
	char line[512];
} race_arg;

static void *race_thread(void *p)
{
	race_arg *a = p;
	brig_engine *e = NULL;
	brig_store *s = NULL;
	brig_error *err = NULL;
	int orc = brig_engine_open(&e, NULL, &err);
	if (orc == 0)
		orc = brig_store_open(&s, a->url, &err);
	pthread_barrier_wait(a->ready);
	pthread_barrier_wait(a->go);
	if (a->delay_ms) {
		struct timespec ts = {a->delay_ms / 1000, (a->delay_ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	if (orc != 0) {
		snprintf(a->line, sizeof a->line, "open %d - 0 0 %s", orc, brig_error_message(err));
	} else if (a->op == OP_UP) {
		brig_identity id = {NS, "agent", a->session, 1};
		brig_computer *c = NULL;
		int rc = brig_session_up(e, s, &c, &id, a->spec, &err);
		snprintf(a->line, sizeof a->line, "up %d %s %u 0 %s", rc, c ? c->name : "-", c ? c->generation : 0,
			 brig_error_message(err));
		brig_computer_free(c);
	} else {
		brig_recover_result rr;
		int rc = brig_session_recover(e, s, &rr, NS, "agent", a->session, a->ckdir, &err);
		snprintf(a->line, sizeof a->line, "recover %d %s %lld %d %s", rc, rr.computer ? rr.computer->name : "-",
			 (long long)rr.new_generation, rr.won ? 1 : 0, brig_error_message(err));
		brig_recover_result_clear(&rr);
	}
	for (char *q = a->line; *q; q++)
		if (*q == '\n')
			*q = ' ';
	brig_error_free(err);
	brig_store_close(s);
	brig_engine_free(e);
	return NULL;
}

/* One racing process: eight threads, each with its own engine and store
 * handle, released together once the parent opens the gate. Writes one
 * line per thread to out_fd. Never returns. */
static void race_child(int op, const char *url, const char *session, const char *ckdir, long stagger_ms, int proc,
		       int ready_fd, int gate_fd, int out_fd)
{
	brig_spec spec;
	brig_test_spec(&spec, NULL);
	pthread_barrier_t ready, go;
	pthread_barrier_init(&ready, NULL, RACE_THREADS + 1);
	pthread_barrier_init(&go, NULL, RACE_THREADS + 1);
	race_arg args[RACE_THREADS];
	pthread_t t[RACE_THREADS];
	for (int i = 0; i < RACE_THREADS; i++) {
		args[i] = (race_arg){.url = url,
				     .session = session,
				     .ckdir = ckdir,
				     .spec = &spec,
				     .op = op,
				     .delay_ms = stagger_ms * (i * RACE_PROCS + proc),
				     .ready = &ready,
				     .go = &go};
		pthread_create(&t[i], NULL, race_thread, &args[i]);
	}
	pthread_barrier_wait(&ready);
	(void)!write(ready_fd, "r", 1);
	char b;
	(void)!read(gate_fd, &b, 1);
	pthread_barrier_wait(&go);
	for (int i = 0; i < RACE_THREADS; i++) {
		pthread_join(t[i], NULL);
		char *l = xasprintf("%s\n", args[i].line);
		(void)!write(out_fd, l, strlen(l));
		free(l);
	}
	/* _exit: the parent's atexit cleanup must not run here. */
	_exit(0);
}

typedef struct race_line {
	char op[16];
	int rc;
	char name[80];
	long long gen;
	int won;
	char msg[400];
} race_line;

/* Runs the race; fills lines[RACE_PROCS * RACE_THREADS]. */
static void race(int op, const char *url, const char *session, const char *ckdir, long stagger_ms, race_line *lines)
{
	int ready[2], gate[2], outp[2];
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(gate), 0);
	assert_int_equal(pipe(outp), 0);
	pid_t pids[RACE_PROCS];
	for (int i = 0; i < RACE_PROCS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			close(ready[0]);
			close(gate[1]);
			close(outp[0]);
			race_child(op, url, session, ckdir, stagger_ms, i, ready[1], gate[0], outp[1]);
		}
	}
	close(ready[1]);
	close(gate[0]);
	close(outp[1]);
	for (int i = 0; i < RACE_PROCS; i++) {
		char b;
		assert_int_equal(read(ready[0], &b, 1), 1);
	}
	/* Both processes have their threads at the barrier: go. */
	close(gate[1]);
	brig_buf out;
	brig_buf_init(&out, 1u << 20);
	char buf[4096];
	ssize_t n;
	while ((n = read(outp[0], buf, sizeof buf)) > 0)
		brig_buf_put(&out, buf, (size_t)n);
	close(outp[0]);
	close(ready[0]);
	for (int i = 0; i < RACE_PROCS; i++) {
		int st = 0;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("racing process %d ended with status %d", i, st);
	}
	brig_buf_put(&out, "", 1);
	char *save = NULL;
	int k = 0;
	for (char *l = strtok_r(out.data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (k >= RACE_PROCS * RACE_THREADS)
			fail_msg("too many result lines");
		race_line *r = &lines[k++];
		memset(r, 0, sizeof *r);
		int used = 0;
		if (sscanf(l, "%15s %d %79s %lld %d %n", r->op, &r->rc, r->name, &r->gen, &r->won, &used) < 5)
			fail_msg("bad result line: %s", l);
		snprintf(r->msg, sizeof r->msg, "%s", l + used);
	}
	brig_buf_free(&out);
	assert_int_equal(k, RACE_PROCS * RACE_THREADS);
}

/* stagger_ms: 0 starts all recovers at once; otherwise racer k starts
 * k × stagger_ms late, so some arrive while the winner is still restoring. */
static void race_backend(const char *url, const char *tag, long stagger_ms)
{
	brig_store *s = open_store(url);
	brig_error *err = NULL;
	cleanup_free char *session = xasprintf("race-%s", tag);
	cleanup_free char *cktag = xasprintf("ck-%s", tag);
	cleanup_free char *ckdir = make_dir(cktag);
	race_line lines[RACE_PROCS * RACE_THREADS];

	/* 16 × up → one generation, one container. */
	race(OP_UP, url, session, ckdir, 0, lines);
	brig_identity id1 = {NS, "agent", session, 1};
	char name1[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name1, &id1, &err), err);
	for (int i = 0; i < RACE_PROCS * RACE_THREADS; i++) {
		if (lines[i].rc != 0)
			fail_msg("up %d failed: %s: %s", i, brig_error_name(lines[i].rc), lines[i].msg);
		assert_string_equal(lines[i].name, name1);
		assert_int_equal(lines[i].gen, 1);
	}
	brig_store_session *rec = session_get(s, session);
	assert_int_equal(rec->generation, 1);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	assert_string_equal(rec->container_name, name1);
	brig_store_session_free(rec);
	json_t *list = session_containers(session);
	assert_int_equal(json_array_size(list), 1);
	assert_string_equal(container_gen(json_array_get(list, 0)), "1");
	json_decref(list);

	/* A checkpoint worth restoring, then a timeout fails the session. */
	free(sh_ok(s, name1,
		   "dd if=/dev/urandom of=/workspace/data bs=1M count=128 2>/dev/null; "
		   "md5sum /workspace/data > /runtime/sum"));
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = ckdir};
	brig_store_checkpoint *cp = NULL;
	ASSERT_OK(brig_checkpoint_create(E, s, &cp, name1, &co, &err), err);
	brig_exec_result r;
	assert_int_equal(sh(s, name1, "sleep 60", 500, &r, &err), BRIG_ETIMEDOUT);
	brig_exec_result_clear(&r);
	brig_error_free(err);
	err = NULL;
	rec = session_get(s, session);
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	brig_store_session_free(rec);

	/* 16 × recover → exactly one new generation, won once. */
	race(OP_RECOVER, url, session, ckdir, stagger_ms, lines);
	brig_identity id2 = {NS, "agent", session, 2};
	char name2[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name2, &id2, &err), err);
	int won = 0, adopted = 0, refused = 0;
	for (int i = 0; i < RACE_PROCS * RACE_THREADS; i++) {
		race_line *l = &lines[i];
		if (l->rc != 0 && l->rc != BRIG_ESTATE ? true : l->rc == 0 && l->gen != 2)
			for (int j = 0; j < RACE_PROCS * RACE_THREADS; j++)
				print_message("racer %2d: rc=%s gen=%lld won=%d %.12s %s\n", j,
					      brig_error_name(lines[j].rc), lines[j].gen, lines[j].won, lines[j].name,
					      lines[j].msg);
		if (l->rc == 0) {
			assert_string_equal(l->name, name2);
			assert_int_equal(l->gen, 2);
			if (l->won)
				won++;
			else
				adopted++;
		} else if (l->rc == BRIG_ESTATE) {
			/* Came after the winner had finished: nothing to recover. */
			refused++;
		} else {
			fail_msg("recover %d failed: %s: %s", i, brig_error_name(l->rc), l->msg);
		}
	}
	print_message("%s: recover race: %d won, %d adopted the winner's generation, %d found it running\n", tag, won,
		      adopted, refused);
	assert_int_equal(won, 1);
	rec = session_get(s, session);
	assert_int_equal(rec->generation, 2);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	assert_string_equal(rec->container_name, name2);
	brig_store_session_free(rec);
	list = session_containers(session);
	assert_int_equal(json_array_size(list), 1);
	assert_string_equal(container_gen(json_array_get(list, 0)), "2");
	json_decref(list);
	cleanup_free char *check = sh_ok(s, name2, "md5sum -c /runtime/sum");
	assert_non_null(strstr(check, "OK"));

	brig_store_checkpoint_free(cp);
	brig_store_close(s);
}

static void test_race_sqlite(void **state)
{
	(void)state;
	race_backend(SQLITE, "sqlite", 0);
}

static void test_race_postgresql(void **state)
{
	(void)state;
	if (!PG) {
		print_message("[  SKIP    ] set BRIG_TEST_PG to a PostgreSQL URL to run the PostgreSQL race\n");
		skip();
	}
	race_backend(PG, "pg", 0);
}

/* Recovers that arrive while the winner is still creating and restoring
 * generation 2 (the store says generation 2, creating) must not advance the
 * session again. */
static void test_race_staggered(void **state)
{
	(void)state;
	race_backend(SQLITE, "stagger", 60);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_end_to_end),
		cmocka_unit_test(test_race_sqlite),
		cmocka_unit_test(test_race_postgresql),
		cmocka_unit_test(test_race_staggered),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
