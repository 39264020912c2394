/* test_session_lost.c — `brig up` never hands back a computer that lost its
 * files without saying so: after a stop, a kill, a destroy or a restart of
 * the current generation's computer, up restores the latest checkpoint into
 * a new generation (one, also when two callers race) and says why; with no
 * checkpoint it refuses loudly, creating nothing, unless --fresh. */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brig/session.h"
#include "brig/store.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];
static char TMP[64];
static char *STORE;
static char *CPDIR;

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "l%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brig-lost-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	STORE = xasprintf("%s/store.db", TMP);
	CPDIR = xasprintf("%s/checkpoints", TMP);
	return mkdir(CPDIR, 0700);
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	char *cmd = xasprintf("rm -rf '%s'", TMP);
	if (system(cmd) != 0)
		print_error("could not remove %s\n", TMP);
	free(cmd);
	free(STORE);
	free(CPDIR);
	return 0;
}

static void test_spec(brig_spec *s)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(s, l, &err), err);
}

static brig_store *open_store(void)
{
	brig_store *s = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, STORE, &err), err);
	return s;
}

/* `sh -c script` in computer ref; returns its stdout (caller frees). */
static char *sh_ok(const char *ref, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, ref, &o, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("`%s` exited %d: %s", script, r.exit_code, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

static brig_up_result up(brig_store *s, const char *session, bool fresh, int want_rc)
{
	brig_spec spec;
	test_spec(&spec);
	brig_identity id = {NS, "agent", session, 1};
	brig_up_opts o = BRIG_UP_OPTS_INIT;
	o.fresh = fresh;
	o.checkpoint_dir = CPDIR;
	brig_up_result res;
	brig_error *err = NULL;
	int rc = brig_session_open(E, s, &res, &id, &spec, &o, &err);
	brig_spec_clear(&spec);
	if (rc != want_rc)
		fail_msg("up %s: got %s (%s), wanted %s", session, brig_error_name(rc), brig_error_message(err),
			 brig_error_name(want_rc));
	if (rc)
		print_message("up %s refused as it should: %s\n", session, brig_error_message(err));
	brig_error_free(err);
	return res;
}

static void checkpoint(brig_store *s, const char *ref)
{
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = CPDIR};
	brig_error *err = NULL;
	ASSERT_OK(brig_checkpoint_create(E, s, NULL, ref, &co, &err), err);
}

enum loss { LOSS_STOP, LOSS_KILL, LOSS_DESTROY, LOSS_RESTART };
static const char *const LOSS_NAME[] = {"stop", "kill", "destroy", "restart"};

static void lose(const char *name, enum loss how)
{
	brig_error *err = NULL;
	switch (how) {
	case LOSS_STOP: ASSERT_OK(brig_computer_stop(E, name, &err), err); break;
	case LOSS_KILL: ASSERT_OK(brig_engine_container_kill(E, name, "KILL", &err), err); break;
	case LOSS_DESTROY: ASSERT_OK(brig_computer_destroy(E, name, &err), err); break;
	case LOSS_RESTART:
		/* Stopped and started behind brig's back: it runs, but empty. */
		ASSERT_OK(brig_engine_container_stop(E, name, 5, &err), err);
		ASSERT_OK(brig_engine_container_start(E, name, &err), err);
		break;
	}
}

/* Each way of losing a computer: up restores the latest checkpoint into
 * generation 2, says why, and the old computer is gone. */
static void lost_then_up(enum loss how)
{
	brig_store *s = open_store();
	char session[32];
	snprintf(session, sizeof session, "lost-%s", LOSS_NAME[how]);
	brig_up_result a = up(s, session, false, 0);
	assert_null(a.lost);
	assert_int_equal(a.computer->generation, 1);
	free(sh_ok(a.computer->name, "echo kept > /workspace/f; mkdir -p /runtime/.claude; echo conv > /runtime/.claude/c"));
	checkpoint(s, a.computer->name);
	free(sh_ok(a.computer->name, "echo after-checkpoint > /workspace/g"));
	cleanup_free char *old = xstrdup(a.computer->name);
	brig_up_result_clear(&a);

	lose(old, how);
	brig_up_result b = up(s, session, false, 0);
	assert_non_null(b.lost);
	print_message("%s: the computer %s\n", LOSS_NAME[how], b.lost);
	assert_int_equal(b.old_generation, 1);
	assert_int_equal(b.computer->generation, 2);
	assert_true(b.checkpoint_id > 0);
	assert_true(b.checkpoint_created_ms > 0);
	cleanup_free char *got = sh_ok(b.computer->name, "cat /workspace/f /runtime/.claude/c; ls /workspace");
	assert_string_equal(got, "kept\nconv\nf\n");
	/* Only the new computer's own started marker: the checkpoint left the
	 * old one out. */
	cleanup_free char *marks = sh_ok(b.computer->name, "ls /runtime/.brig | wc -l");
	assert_string_equal(marks, "1\n");
	/* The old generation's container is gone. */
	json_t *j = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &j, old, NULL), BRIG_ENOTFOUND);

	/* And up again adopts generation 2 as it is: nothing more is lost. */
	brig_up_result c = up(s, session, false, 0);
	assert_null(c.lost);
	assert_int_equal(c.computer->generation, 2);
	assert_string_equal(c.computer->name, b.computer->name);
	brig_up_result_clear(&b);
	brig_up_result_clear(&c);
	brig_store_close(s);
}

static void test_lost_by_stop(void **state) { (void)state, lost_then_up(LOSS_STOP); }
static void test_lost_by_kill(void **state) { (void)state, lost_then_up(LOSS_KILL); }
static void test_lost_by_destroy(void **state) { (void)state, lost_then_up(LOSS_DESTROY); }
static void test_lost_by_restart(void **state) { (void)state, lost_then_up(LOSS_RESTART); }

/* No checkpoint: a loud refusal that creates nothing, then --fresh. */
static void test_lost_without_checkpoint(void **state)
{
	(void)state;
	brig_store *s = open_store();
	brig_up_result a = up(s, "nockpt", false, 0);
	cleanup_free char *old = xstrdup(a.computer->name);
	brig_up_result_clear(&a);
	lose(old, LOSS_STOP);

	brig_spec spec;
	test_spec(&spec);
	brig_identity id = {NS, "agent", "nockpt", 1};
	brig_up_opts o = BRIG_UP_OPTS_INIT;
	o.checkpoint_dir = CPDIR;
	brig_up_result r;
	brig_error *err = NULL;
	assert_int_equal(brig_session_open(E, s, &r, &id, &spec, &o, &err), BRIG_ESTATE);
	const char *m = brig_error_message(err);
	assert_non_null(strstr(m, "gone"));
	assert_non_null(strstr(m, "no checkpoint"));
	assert_non_null(strstr(m, "--fresh"));
	assert_non_null(strstr(m, "nothing was created"));
	brig_error_free(err);
	err = NULL;
	/* Nothing was created, and the store still names generation 1. */
	brig_identity g2 = {NS, "agent", "nockpt", 2};
	char n2[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(n2, &g2, &err), err);
	json_t *j = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &j, n2, NULL), BRIG_ENOTFOUND);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(s, &rec, NS, "agent", "nockpt", &err), err);
	assert_int_equal(rec->generation, 1);
	brig_store_session_free(rec);

	/* The same through brig up: exit 125 and the message on stderr. */
	char *out = NULL, *errout = NULL;
	char *argv[] = {"brig", "up", "--ns", NS, "--agent", "agent", "--session", "nockpt", "--store", STORE, NULL};
	char cp_env[256];
	snprintf(cp_env, sizeof cp_env, "BRIG_CHECKPOINT_DIR=%s", CPDIR);
	char *env[] = {cp_env, NULL};
	assert_int_equal(brig_test_spawn(argv, NULL, env, &out, &errout), 125);
	assert_non_null(strstr(errout, "no checkpoint"));
	free(out);
	free(errout);

	o.fresh = true;
	ASSERT_OK(brig_session_open(E, s, &r, &id, &spec, &o, &err), err);
	brig_spec_clear(&spec);
	assert_non_null(r.lost);
	assert_int_equal(r.checkpoint_id, 0);
	assert_int_equal(r.computer->generation, 2);
	cleanup_free char *ls = sh_ok(r.computer->name, "ls /workspace | wc -l");
	assert_string_equal(ls, "0\n");
	brig_up_result_clear(&r);
	brig_store_close(s);
}

/* The CLI says what it restored, naming the checkpoint and the generation. */
static void test_cli_says_restored(void **state)
{
	(void)state;
	brig_store *s = open_store();
	brig_up_result a = up(s, "cli", false, 0);
	free(sh_ok(a.computer->name, "echo x > /workspace/x"));
	checkpoint(s, a.computer->name);
	lose(a.computer->name, LOSS_KILL);
	brig_up_result_clear(&a);
	brig_store_close(s);

	char *out = NULL, *errout = NULL;
	char *argv[] = {"brig", "up", "--ns", NS, "--agent", "agent", "--session", "cli", "--store", STORE, NULL};
	char cp_env[256];
	snprintf(cp_env, sizeof cp_env, "BRIG_CHECKPOINT_DIR=%s", CPDIR);
	char *env[] = {cp_env, NULL};
	assert_int_equal(brig_test_spawn(argv, NULL, env, &out, &errout), 0);
	print_message("brig up said: %s", errout);
	assert_non_null(strstr(errout, "restored checkpoint"));
	assert_non_null(strstr(errout, "into generation 2"));
	assert_non_null(strstr(errout, "was stopped"));
	free(out);
	free(errout);
}

/* Two callers racing up on a lost session make one new generation. */
typedef struct racer {
	pthread_t t;
	int rc;
	char name[BRIG_NAME_SIZE];
	uint32_t gen;
} racer;

static void *race_main(void *p)
{
	racer *r = p;
	brig_engine *e = brig_test_engine();
	brig_store *s = NULL;
	brig_error *err = NULL;
	r->rc = brig_store_open(&s, STORE, &err);
	if (r->rc == 0) {
		brig_spec spec;
		test_spec(&spec);
		brig_identity id = {NS, "agent", "race", 1};
		brig_up_opts o = BRIG_UP_OPTS_INIT;
		o.checkpoint_dir = CPDIR;
		brig_up_result res;
		r->rc = brig_session_open(e, s, &res, &id, &spec, &o, &err);
		if (r->rc == 0) {
			snprintf(r->name, sizeof r->name, "%s", res.computer->name);
			r->gen = res.computer->generation;
		} else {
			print_error("racer: %s\n", brig_error_message(err));
		}
		brig_up_result_clear(&res);
		brig_spec_clear(&spec);
	}
	brig_error_free(err);
	brig_store_close(s);
	brig_engine_free(e);
	return NULL;
}

static void test_race_on_lost(void **state)
{
	(void)state;
	brig_store *s = open_store();
	brig_up_result a = up(s, "race", false, 0);
	free(sh_ok(a.computer->name, "echo r > /workspace/r"));
	checkpoint(s, a.computer->name);
	lose(a.computer->name, LOSS_STOP);
	brig_up_result_clear(&a);

	racer rs[4];
	memset(rs, 0, sizeof rs);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&rs[i].t, NULL, race_main, &rs[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(rs[i].t, NULL);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(rs[i].rc, 0);
		assert_int_equal(rs[i].gen, 2);
		assert_string_equal(rs[i].name, rs[0].name);
	}
	brig_store_session *rec = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_session_get(s, &rec, NS, "agent", "race", &err), err);
	assert_int_equal(rec->generation, 2);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	brig_store_session_free(rec);
	cleanup_free char *got = sh_ok(rs[0].name, "cat /workspace/r");
	assert_string_equal(got, "r\n");
	brig_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_by_stop),      cmocka_unit_test(test_lost_by_kill),
		cmocka_unit_test(test_lost_by_destroy),   cmocka_unit_test(test_lost_by_restart),
		cmocka_unit_test(test_lost_without_checkpoint), cmocka_unit_test(test_cli_says_restored),
		cmocka_unit_test(test_race_on_lost),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
