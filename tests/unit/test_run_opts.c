/* test_run_opts.c — the version rule for brig_run_opts and
 * brig_checkpoint_opts: 1..current accepted, 0 and current+1 refused with a
 * message naming the struct, before any call to the daemon. */
#include "testutil.h"

#include <string.h>

#include "brig/run.h"
#include "brig/session.h"

static void expect_refused(int r, brig_error **errp, const char *what)
{
	brig_error *err = *errp;
	*errp = NULL;
	assert_int_equal(r, BRIG_EINVAL);
	assert_non_null(err);
	if (!strstr(brig_error_message(err), what))
		fail_msg("expected '%s' in '%s'", what, brig_error_message(err));
	brig_error_free(err);
}

static void test_run_opts_versions(void **state)
{
	(void)state;
	brig_run_result res;
	brig_error *err = NULL;
	brig_run_opts o = BRIG_RUN_OPTS_INIT;
	assert_int_equal(o.stdin_fd, -1);
	assert_int_equal(o.cancel_fd, -1);

	/* version 1 passes the check: what stops it is the missing spec */
	o.version = 1;
	assert_int_equal(brig_run(NULL, &o, &res, &err), BRIG_EINVAL);
	if (!strstr(brig_error_message(err), "spec is required"))
		fail_msg("version 1 was not accepted: %s", brig_error_message(err));
	brig_error_free(err);
	err = NULL;

	o.version = 0;
	expect_refused(brig_run(NULL, &o, &res, &err), &err, "run options: version 0");
	o.version = BRIG_RUN_OPTS_VERSION + 1;
	expect_refused(brig_run(NULL, &o, &res, &err), &err, "run options: version");
	/* no defaults: a run has no spec or command of its own */
	expect_refused(brig_run(NULL, NULL, &res, &err), &err, "run options");
	brig_run_result_clear(&res);
}

static void test_checkpoint_opts_versions(void **state)
{
	(void)state;
	brig_error *err = NULL;
	brig_checkpoint_opts o = BRIG_CHECKPOINT_OPTS_INIT;
	assert_int_equal(o.version, BRIG_CHECKPOINT_OPTS_VERSION);
	/* version 1 accepted: every checkpoint of integration/test_checkpoint
	 * passes version 1 (it needs a daemon) */
	o.version = 0;
	expect_refused(brig_checkpoint_create(NULL, NULL, NULL, "x", &o, &err), &err, "checkpoint options: version 0");
	o.version = BRIG_CHECKPOINT_OPTS_VERSION + 1;
	expect_refused(brig_checkpoint_create(NULL, NULL, NULL, "x", &o, &err), &err, "checkpoint options: version");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_opts_versions),
		cmocka_unit_test(test_checkpoint_opts_versions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
