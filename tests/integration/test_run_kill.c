/* test_run_kill.c — `kill -9` of `brig run` mid-command: nobody is left to
 * clean up, so the run's container must end itself at its deadline (PID 1 is
 * `sleep <timeout + grace>`) and Docker must remove it with its volumes
 * (AutoRemove). Waits for the real deadline, read from the container's
 * brig.deadline label, so it stays right whatever the grace becomes; it is
 * slow (timeout + grace), hence its own file: ctest -j runs it beside the
 * others. */
#include "helpers/run_util.h"

static void test_kill_9_run_ends_itself(void **state)
{
	(void)state;
	const char *arg = ru_sleep_arg("kill9");
	cleanup_free char *script = xasprintf("echo started; sleep %s", arg);
	char label[96];
	snprintf(label, sizeof label, "%s", ru_label());
	char *argv[] = {"brig", "run", "--label", label,  "--image", (char *)brig_test_image(), "--timeout", "3",
			"--",   "sh",  "-c",      script, NULL};
	ru_proc p;
	ru_proc_start(&p, argv);
	ru_proc_wait_for(&p, "started\n", 30000);
	assert_int_equal(kill(p.pid, SIGKILL), 0);
	assert_int_equal(ru_proc_wait(&p, 10000), 128 + SIGKILL);
	ru_proc_free(&p);
	int64_t killed_at = brig_wall_s();

	/* brig is gone; its run is not: one running container, the command in it. */
	cleanup_json json_t *f = brig_test_filters();
	cleanup_json json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	assert_int_equal(json_array_size(list), 1);
	json_t *c = json_array_get(list, 0);
	assert_string_equal(json_string_value(json_object_get(c, "State")), "running");
	json_t *labels = json_object_get(c, "Labels");
	assert_string_equal(json_string_value(json_object_get(labels, BRIG_LABEL_KIND)), "run");
	const char *dl = json_string_value(json_object_get(labels, BRIG_LABEL_DEADLINE));
	assert_non_null(dl);
	int64_t deadline = strtoll(dl, NULL, 10);
	assert_true(deadline > killed_at);
	assert_int_equal(ru_host_procs_wait(arg, 1, 5000), 1);
	print_message("kill -9: brig dead; its run's deadline is %lld s away\n", (long long)(deadline - killed_at));

	/* At the deadline the container ends itself; Docker removes it and its
	 * anonymous volumes. */
	char *left = NULL;
	int64_t waited = ru_wait_nothing_left((deadline - killed_at + 15) * 1000, &left);
	if (waited < 0)
		fail_msg("%lld s after the deadline, still left:\n%s", (long long)(brig_wall_s() - deadline), left);
	int64_t gone_at = brig_wall_s();
	print_message("kill -9: everything gone %lld ms after brig died, %lld s after the deadline label\n",
		      (long long)waited, (long long)(gone_at - deadline));
	assert_true(gone_at <= deadline + 10);
	assert_int_equal(ru_host_procs_with_arg(arg), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_9_run_ends_itself),
	};
	return cmocka_run_group_tests(tests, ru_setup, ru_teardown);
}
