/* test_two_daemons.c — one process, two Docker daemons (userns.sh starts the
 * second, with the other userns-remap setting, and names it in
 * BRIG_OTHER_HOST): what libbrig learns about one daemon through an engine
 * handle — brig-init's volume seen whole, the userns shift its tmpfs
 * volumes are owned by — must not be taken for a fact of the other. It
 * was, process-wide: a computer on the second daemon then started without
 * brig-init ("stat /.brig/brig-init: no such file"), or with a workspace
 * its user could not write. The first daemon is used first, so the second
 * meets a process that already trusts a volume of the first. userns.sh runs
 * this before anything of brig touches the second daemon. Every object
 * carries brig.test=<run id> and is removed at exit. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "brig/spec.h"

static brig_engine *A, *B;
static char NS[64];

static int setup(void **state)
{
	(void)state;
	brig_test_setup(&A, NS, sizeof NS, "two");
	const char *other = getenv("BRIG_OTHER_HOST");
	if (!other || !*other) {
		fprintf(stderr, "test_two_daemons: BRIG_OTHER_HOST names no second daemon (run by userns.sh)\n");
		return -1;
	}
	brig_engine_opts o = BRIG_ENGINE_OPTS_INIT;
	o.host = other;
	brig_error *err = NULL;
	if (brig_engine_open(&B, &o, &err) != 0) {
		fprintf(stderr, "test_two_daemons: open %s: %s\n", other, brig_error_message(err));
		brig_error_free(err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (B) { /* NULL when setup found no second daemon */
		brig_test_cleanup(B);
		brig_engine_free(B);
	}
	return brig_test_teardown(&A);
}

/* Runs sh -c script in computer name on e; returns its stdout (caller frees). */
static char *sh(brig_engine *e, const char *name, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	o.argv = argv;
	o.timeout_ms = 30000;
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(e, name, &o, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("%s in %s exited %d: %s", script, name, r.exit_code, r.err.data ? r.err.data : "");
	char *out = strdup(r.out.data ? r.out.data : "");
	brig_exec_result_clear(&r);
	return out;
}

static brig_computer *make(brig_engine *e, const char *session)
{
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(&s, "network", "none", &err), err);
	brig_identity id = {.ns = NS, .agent = "t", .session = session, .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(e, &c, &id, &s, &err), err);
	brig_spec_clear(&s);
	return c;
}

/* A computer on each daemon, first A's: each has brig-init as PID 1 and a
 * workspace its user owns and writes. */
static void test_facts_are_per_daemon(void **state)
{
	(void)state;
	/* two daemons, not two handles to one (their IDs may match: both read
	 * /etc/docker/key.json; their data roots do not) */
	json_t *ia = NULL, *ib = NULL;
	brig_error *e0 = NULL;
	ASSERT_OK(brig_engine_info(A, &ia, &e0), e0);
	ASSERT_OK(brig_engine_info(B, &ib, &e0), e0);
	const char *da = json_string_value(json_object_get(ia, "DockerRootDir")),
		   *db = json_string_value(json_object_get(ib, "DockerRootDir"));
	assert_non_null(da);
	assert_non_null(db);
	assert_string_not_equal(da, db);
	json_decref(ia);
	json_decref(ib);
	brig_computer *ca = make(A, "a"), *cb = make(B, "b");
	const char *probe = "echo x > /workspace/f && stat -c '%u %g' /workspace /workspace/f && cat /proc/1/comm";
	char *oa = sh(A, ca->name, probe), *ob = sh(B, cb->name, probe);
	assert_string_equal(oa, "1000 1000\n1000 1000\nbrig-init\n");
	assert_string_equal(ob, "1000 1000\n1000 1000\nbrig-init\n");
	free(oa);
	free(ob);
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_destroy(A, ca->name, &err), err);
	ASSERT_OK(brig_computer_destroy(B, cb->name, &err), err);
	brig_computer_free(ca);
	brig_computer_free(cb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_facts_are_per_daemon),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
