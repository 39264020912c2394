/* test_run_kill.c — `kill -9` of `brig run` mid-command: nobody is left to
 * clean up, so the run's container must end itself and nothing may remain.
 * brig-init is PID 1 of both shapes and holds the deadline: a plain run
 * (`brig-init run`: the command is its child) ends at the run's timeout; a
 * run with outputs (`brig-init init --lifetime`, the command over a relay)
 * loses its command as soon as brig's relay is gone and ends itself at its
 * lifetime, read from the container's brig.deadline label. Both are
 * AutoRemove'd: Docker removes them and their volumes by itself. */
#include "helpers/run_util.h"

#define TIMEOUT_S 3

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
	int64_t started = brig_now_ms();
	ru_proc_start(&p, argv);
	ru_proc_wait_for(&p, "started\n", 30000);
	assert_int_equal(kill(p.pid, SIGKILL), 0);
	assert_int_equal(ru_proc_wait(&p, 10000), 128 + SIGKILL);
	ru_proc_free(&p);
	int64_t killed_at = brig_wall_s();
	int64_t killed_ms = brig_now_ms();

	/* brig is gone; its run is not: one running container with brig-init
	 * as PID 1. */
	cleanup_json json_t *f = brig_test_filters();
	cleanup_json json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	assert_int_equal(json_array_size(list), 1);
	json_t *c = json_array_get(list, 0);
	assert_string_equal(json_string_value(json_object_get(c, "State")), "running");
	const char *pid1 = json_string_value(json_object_get(c, "Command"));
	if (!pid1 ||
	    strncmp(pid1, with_out ? "/.brig/brig-init init --lifetime " : "/.brig/brig-init run --timeout-ms 3000 ",
		    with_out ? 33 : 38) != 0)
		fail_msg("PID 1 is not brig-init: %s", pid1 ? pid1 : "(none)");
	json_t *labels = json_object_get(c, "Labels");
	assert_string_equal(json_string_value(json_object_get(labels, BRIG_LABEL_KIND)), "run");
	assert_non_null(json_object_get(labels, BRIG_LABEL_INIT));
	const char *dl = json_string_value(json_object_get(labels, BRIG_LABEL_DEADLINE));
	assert_non_null(dl);
	int64_t deadline = strtoll(dl, NULL, 10);
	assert_true(deadline > killed_at);

	if (with_out) {
		/* brig's relay went with brig: brig-init ends the command at once
		 * (it was not detached), and the container at its lifetime. */
		assert_int_equal(ru_host_procs_wait(arg, 0, 5000), 0);
		print_message("kill -9: command gone %lld ms after brig; the run's lifetime ends %lld s later\n",
			      (long long)(brig_now_ms() - killed_ms), (long long)(deadline - killed_at));
	} else {
		/* The command runs on until brig-init's deadline: TIMEOUT_S after
		 * the container started, long before the lifetime label. */
		int64_t end_by = started + (TIMEOUT_S + 5) * 1000;
		while (ru_host_procs_with_arg(arg) > 0 && brig_now_ms() < end_by)
			ru_sleep_ms(50);
		assert_int_equal(ru_host_procs_with_arg(arg), 0);
		print_message("kill -9: the command ended %lld ms after brig started (timeout %d s)\n",
			      (long long)(brig_now_ms() - started), TIMEOUT_S);
	}
	char *left = NULL;
	int64_t wait_s = with_out ? deadline - brig_wall_s() + 15 : 10;
	int64_t waited = ru_wait_nothing_left(wait_s * 1000, &left);
	if (waited < 0)
		fail_msg("%lld s after the deadline, still left:\n%s", (long long)(brig_wall_s() - deadline), left);
	if (with_out)
		assert_true(brig_wall_s() <= deadline + 10);
	print_message("kill -9 (%s): everything gone %lld s %s the deadline label\n",
		      with_out ? "with outputs" : "plain", (long long)llabs(brig_wall_s() - deadline),
		      brig_wall_s() > deadline ? "after" : "before");
	if (out_dir) /* nothing was copied out: brig died before the end */
		brig_test_rmdir(out_dir);
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
