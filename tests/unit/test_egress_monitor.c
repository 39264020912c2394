/* test_egress_monitor.c — the egress proxy's monitor answers a worker by
 * the connections it accepted, never by a name the worker gives: a worker
 * that was taken over cannot ask for another sandbox's secrets or rules,
 * though they are on disk and the monitor would read them. No daemon here,
 * so no address is anyone's: what is checked is what the requests may
 * name. */
#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/egress.h"
#include "egress/egress_internal.h"
#include "util/util.h"

#define VICTIM "brig-unit-mon-victim"

static char *dir;

static int setup(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/brig-unit-mon-XXXXXX";
	if (!mkdtemp(tmpl))
		return -1;
	dir = xstrdup(tmpl);
	setenv("BRIG_EGRESS_DIR", dir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cleanup_free char *rm = xasprintf("rm -rf '%s'", dir);
	int rc = system(rm);
	free(dir);
	unsetenv("BRIG_EGRESS_DIR");
	return rc == 0 ? 0 : -1;
}

/* The answer to the request text; fails unless it is an object. */
static json_t *ask(const char *text)
{
	json_t *req = json_loads(text, 0, NULL);
	assert_non_null(req);
	json_t *resp = brig_egress__mon_answer(req);
	json_decref(req);
	assert_true(json_is_object(resp));
	return resp;
}

static void assert_empty(const char *text)
{
	json_t *r = ask(text);
	if (json_object_size(r) != 0) {
		char *dump = json_dumps(r, JSON_COMPACT);
		fail_msg("%s answered %s", text, dump);
	}
	json_decref(r);
}

static void test_names_are_not_asked_by(void **state)
{
	(void)state;
	brig_error *err = NULL;
	/* what the victim's computer has on disk: a secret and a rule */
	cleanup_free char *path = NULL;
	ASSERT_OK(brig_egress__sandbox_path(&path, VICTIM, ".secrets", &err), err);
	static const char line[] = "API_KEY brig-placeholder-0123 api.example.com 7365637265742d76616c7565\n";
	ASSERT_OK(brig_egress__file_write(path, line, strlen(line), &err), err);
	const char *rule = "api.example.com";
	ASSERT_OK(brig_egress_rules_set(VICTIM, &rule, 1, &err), err);
	brig_egress_secret *sec = NULL;
	size_t n = 0;
	ASSERT_OK(brig_egress__secrets_read(&sec, &n, VICTIM, &err), err);
	assert_int_equal(n, 1); /* it is there to be had */
	brig_egress__secrets_free(sec, n);

	/* by name, by address, by a connection never accepted: nothing */
	assert_empty("{\"op\":\"secrets\",\"sandbox\":\"" VICTIM "\"}");
	assert_empty("{\"op\":\"rules\",\"sandbox\":\"" VICTIM "\"}");
	assert_empty("{\"op\":\"who\",\"ip\":\"172.30.0.2\"}");
	assert_empty("{\"op\":\"secrets\",\"conn\":987654321}");
	assert_empty("{\"op\":\"secrets\",\"conn\":\"1\"}");
	assert_empty("{\"op\":\"secrets\",\"conn\":-1}");
	assert_empty("{\"op\":\"secrets\"}");

	/* an accepted connection from an address no sandbox has: nothing,
	 * and once ended (its ledger row), the number names nothing more */
	uint64_t id = brig_egress__mon_accepted(0x0200a8c0u);
	assert_true(id > 0);
	cleanup_free char *who = xasprintf("{\"op\":\"who\",\"conn\":%llu}", (unsigned long long)id);
	cleanup_free char *secrets = xasprintf("{\"op\":\"secrets\",\"sandbox\":\"" VICTIM "\",\"conn\":%llu}",
					       (unsigned long long)id);
	assert_empty(who);
	assert_empty(secrets);
	cleanup_free char *row = xasprintf("{\"op\":\"ledger\",\"conn\":%llu,\"sandbox\":\"" VICTIM
					   "\",\"host\":\"api.example.com\",\"port\":443,\"decision\":\"denied\","
					   "\"reason\":\"x\"}",
					   (unsigned long long)id);
	assert_empty(row);
	assert_true(brig_egress__mon_accepted(0x0300a8c0u) > id); /* numbers are never reused */
}

static void test_many_accepts(void **state)
{
	(void)state;
	/* more connections than the monitor keeps: the oldest go, the
	 * numbers keep rising, nothing breaks */
	uint64_t last = 0;
	for (int i = 0; i < 5000; i++) {
		uint64_t id = brig_egress__mon_accepted(0x0400a8c0u + ((uint32_t)i << 24));
		assert_true(id > last);
		last = id;
	}
	json_t *r = ask("{\"op\":\"attached\"}");
	json_decref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names_are_not_asked_by, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_accepts, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
