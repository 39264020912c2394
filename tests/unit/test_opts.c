/* test_opts.c — the one rule for versioned options, struct by struct:
 * version 1 is taken, 0 and current+1 are BRIG_EINVAL naming the struct,
 * and NULL means the defaults (or is refused where there are none). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "brig/engine.h"
#include "brig/sandbox.h"
#include "brig/spec.h"

/* No daemon here: a call that gets past its options check fails to connect
 * (BRIG_ENOTSENT), which tells "accepted" from "refused" (BRIG_EINVAL). */
#define NO_DAEMON "unix:///nonexistent/brig-test-opts.sock"

static void assert_refused(int rc, brig_error **err, const char *what)
{
	if (rc != BRIG_EINVAL)
		fail_msg("%s: want BRIG_EINVAL, got %s: %s", what, brig_error_name(rc), brig_error_message(*err));
	const char *msg = brig_error_message(*err);
	if (!msg || strncmp(msg, what, strlen(what)) != 0 || !strstr(msg, "version"))
		fail_msg("message should name %s and its version: '%s'", what, msg ? msg : "(none)");
	brig_error_free(*err);
	*err = NULL;
}

static void assert_got_past_opts(int rc, brig_error **err)
{
	if (rc != BRIG_ENOTSENT)
		fail_msg("want BRIG_ENOTSENT (options taken, no daemon), got %s: %s", brig_error_name(rc),
			 brig_error_message(*err));
	brig_error_free(*err);
	*err = NULL;
}

static brig_engine *open_offline(void)
{
	brig_engine_opts o = BRIG_ENGINE_OPTS_INIT;
	o.host = NO_DAEMON;
	o.tls_verify = 0;
	o.skip_negotiation = true;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_open(&e, &o, &err), err);
	return e;
}

static void test_engine_opts(void **state)
{
	brig_error *err = NULL;
	brig_engine *e = NULL;
	brig_engine_opts o = BRIG_ENGINE_OPTS_INIT;
	assert_int_equal(o.version, BRIG_ENGINE_OPTS_VERSION);
	assert_int_equal(o.tls_verify, -1);
	o.host = NO_DAEMON;
	o.tls_verify = 0;
	o.skip_negotiation = true;
	o.version = 1;
	ASSERT_OK(brig_engine_open(&e, &o, &err), err);
	brig_engine_free(e);
	o.version = 0;
	assert_refused(brig_engine_open(&e, &o, &err), &err, "engine options");
	o.version = BRIG_ENGINE_OPTS_VERSION + 1;
	assert_refused(brig_engine_open(&e, &o, &err), &err, "engine options");
	/* NULL: the defaults, which read DOCKER_HOST and then ping. */
	const char *saved = getenv("DOCKER_HOST");
	char *keep = saved ? strdup(saved) : NULL;
	setenv("DOCKER_HOST", NO_DAEMON, 1);
	assert_got_past_opts(brig_engine_open(&e, NULL, &err), &err);
	if (keep)
		setenv("DOCKER_HOST", keep, 1);
	else
		unsetenv("DOCKER_HOST");
	free(keep);
}

static void test_exec_opts(void **state)
{
	brig_error *err = NULL;
	brig_exec_result res;
	brig_engine *e = open_offline();
	const char *argv[] = {"true", NULL};
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	assert_int_equal(o.version, BRIG_EXEC_OPTS_VERSION);
	assert_int_equal(o.stdin_fd, -1);
	assert_int_equal(o.cancel_fd, -1);
	o.argv = argv;
	o.version = 1;
	assert_got_past_opts(brig_computer_exec(e, "brig-opts-test", &o, &res, &err), &err);
	brig_exec_result_clear(&res);
	o.version = 0;
	assert_refused(brig_computer_exec(e, "brig-opts-test", &o, &res, &err), &err, "exec options");
	brig_exec_result_clear(&res);
	o.version = BRIG_EXEC_OPTS_VERSION + 1;
	assert_refused(brig_computer_exec(e, "brig-opts-test", &o, &res, &err), &err, "exec options");
	brig_exec_result_clear(&res);
	/* No default command: NULL is refused, and says why. */
	assert_int_equal(brig_computer_exec(e, "brig-opts-test", NULL, &res, &err), BRIG_EINVAL);
	assert_non_null(strstr(brig_error_message(err), "exec options"));
	assert_non_null(strstr(brig_error_message(err), "argv"));
	brig_error_free(err);
	brig_exec_result_clear(&res);
	brig_engine_free(e);
}

static void test_gc_opts(void **state)
{
	brig_error *err = NULL;
	brig_engine *e = open_offline();
	brig_gc_opts o = BRIG_GC_OPTS_INIT;
	assert_int_equal(o.version, BRIG_GC_OPTS_VERSION);
	o.dry_run = true;
	o.version = 1;
	assert_got_past_opts(brig_gc(e, &o, NULL, &err), &err);
	o.version = 0;
	assert_refused(brig_gc(e, &o, NULL, &err), &err, "gc options");
	o.version = BRIG_GC_OPTS_VERSION + 1;
	assert_refused(brig_gc(e, &o, NULL, &err), &err, "gc options");
	assert_got_past_opts(brig_gc(e, NULL, NULL, &err), &err);
	brig_engine_free(e);
}

static void test_container_opts(void **state)
{
	brig_error *err = NULL;
	brig_spec spec;
	brig_spec_init(&spec);
	brig_identity id = {"acme", "coder", "sess-1", 1};
	char name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	brig_container_opts o = BRIG_CONTAINER_OPTS_INIT;
	assert_int_equal(o.version, BRIG_CONTAINER_OPTS_VERSION);
	assert_int_equal(o.kind, BRIG_KIND_COMPUTER);
	o.id = &id;
	o.name = name;
	json_t *body = NULL;
	o.version = 1;
	ASSERT_OK(brig_spec_container_json(&body, &spec, &o, &err), err);
	json_decref(body);
	body = NULL;
	o.version = 0;
	assert_refused(brig_spec_container_json(&body, &spec, &o, &err), &err, "container options");
	o.version = BRIG_CONTAINER_OPTS_VERSION + 1;
	assert_refused(brig_spec_container_json(&body, &spec, &o, &err), &err, "container options");
	/* A computer needs its identity, a run its lifetime: no default body. */
	assert_int_equal(brig_spec_container_json(&body, &spec, NULL, &err), BRIG_EINVAL);
	assert_non_null(strstr(brig_error_message(err), "container options"));
	brig_error_free(err);
	assert_null(body);
	brig_spec_clear(&spec);
}

/* brig_spec is not an options struct (brig_spec_init fills it) but carries
 * a version under the same rule. */
static void test_spec_version(void **state)
{
	brig_error *err = NULL;
	brig_spec spec;
	brig_spec_init(&spec);
	spec.version = 1;
	ASSERT_OK(brig_spec_validate(&spec, NULL, &err), err);
	spec.version = 0;
	assert_refused(brig_spec_validate(&spec, NULL, &err), &err, "spec");
	spec.version = BRIG_SPEC_VERSION + 1;
	assert_refused(brig_spec_validate(&spec, NULL, &err), &err, "spec");
	brig_spec_clear(&spec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_opts),  cmocka_unit_test(test_exec_opts),
		cmocka_unit_test(test_gc_opts),      cmocka_unit_test(test_container_opts),
		cmocka_unit_test(test_spec_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
