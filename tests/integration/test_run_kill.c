/* test_run_kill.c — `kill -9` of `brig run` mid-command: nobody is left to
 * clean up, so the run's container must end itself at its deadline and what
 * remains goes with `brig gc`. Two shapes: a run with outputs (PID 1 is
 * `sleep <timeout + grace>`, AutoRemove'd: Docker removes it and its volumes
 * by itself) and a plain run (the command runs directly under the image's
 * `timeout`: the container stops itself, `brig gc` removes it). Waits for
 * the real deadline, read from the container's brig.deadline label. */
#include "helpers/run_util.h"

static void kill_9_run(bool with_out)
{
	const char *arg = ru_sleep_arg(with_out ? "kill9out" : "kill9");
	cleanup_free char *script = xasprintf("echo started; sleep %s", arg);
	char label[96];
	snprintf(label, sizeof label, "%s", ru_label());
	cleanup_free char *out_dir = with_out ? ru_tmpdir("kill9-out") : NULL;
	char *argv[16];
	int n = 0;
	char *fixed[] = {"brig", "run", "--label", label, "--image", (char *)brig_test_image(), "--timeout", "3"};
	for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
		argv[n++] = fixed[i];
	if (with_out) {
		argv[n++] = "--out";
		argv[n++] = out_dir;
	}
	char *cmd[] = {"--", "sh", "-c", script, NULL};
	for (size_t i = 0; i < sizeof cmd / sizeof *cmd; i++)
		argv[n++] = cmd[i];
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

	/* At the deadline the command's processes end: the container stops
	 * itself (with outputs, Docker also removes it with its volumes). */
	int64_t t_end = brig_now_ms() + (deadline - killed_at + 15) * 1000;
	while (ru_host_procs_with_arg(arg) > 0 && brig_now_ms() < t_end)
		ru_sleep_ms(100);
	assert_int_equal(ru_host_procs_with_arg(arg), 0);
	assert_true(brig_wall_s() <= deadline + 10);

	if (!with_out) {
		/* What remains goes with brig gc (only this test's objects). The
		 * daemon may take a moment to record the container as exited. */
		cleanup_free char *sel = xasprintf("%s", label);
		char *gc[] = {"brig", "gc", "--label", sel, NULL};
		int64_t gc_until = brig_now_ms() + 15000;
		for (;;) {
			char *gout = NULL, *gerr = NULL;
			int code = brig_test_spawn(gc, NULL, NULL, &gout, &gerr);
			if (code != 0)
				fail_msg("brig gc exited %d: %s", code, gerr);
			bool removed = strstr(gout, "brig-run-") != NULL;
			if (removed)
				print_message("brig gc: %s", gout);
			free(gout);
			free(gerr);
			if (removed || brig_now_ms() > gc_until)
				break;
			ru_sleep_ms(500);
		}
	}
	char *left = NULL;
	int64_t waited = ru_wait_nothing_left(15000, &left);
	if (waited < 0)
		fail_msg("%lld s after the deadline, still left:\n%s", (long long)(brig_wall_s() - deadline), left);
	print_message("kill -9 (%s): everything gone %lld s after the deadline label\n",
		      with_out ? "with outputs" : "plain", (long long)(brig_wall_s() - deadline));
}

static void test_kill_9_run_ends_itself(void **state)
{
	(void)state;
	kill_9_run(false);
}

static void test_kill_9_run_with_outputs_ends_itself(void **state)
{
	(void)state;
	kill_9_run(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_9_run_ends_itself),
		cmocka_unit_test(test_kill_9_run_with_outputs_ends_itself),
	};
	return cmocka_run_group_tests(tests, ru_setup, ru_teardown);
}
