/* test_runtime.c — `--runtime`: a runtime the daemon does not know is refused
 * with the fix and creates nothing; under gVisor (runsc, when the daemon
 * registers it) a computer runs brig-init as PID 1, runs commands, pauses and
 * resumes, ends a timed-out command and keeps its files, and a checkpoint
 * taken through the archive API holds the files written inside and restores
 * them into the next generation. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];
static char DIR_[512];
static char STORE[600];
static char CKPT[600];
static char LABEL[96];

static int setup(void **state)
{
	(void)state;
	if (brig_test_setup(&E, NS, sizeof NS, "rt") != 0)
		return -1;
	if (brig_test_tmpdir(DIR_, sizeof DIR_, "runtime") != 0)
		return -1;
	snprintf(STORE, sizeof STORE, "%s/brig.db", DIR_);
	snprintf(CKPT, sizeof CKPT, "BRIG_CHECKPOINT_DIR=%s/ckpt", DIR_);
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_rmdir(DIR_);
	return brig_test_teardown(&E);
}

typedef struct run_out {
	int code;
	char *out, *err;
} run_out;

static void run_free(run_out *r)
{
	free(r->out);
	free(r->err);
}

/* brig ARGS… with the test's store and checkpoint directory. */
static run_out brig(const char *const *args, const char *extra_env)
{
	char *argv[40] = {"brig"};
	int n = 1;
	for (; args[n - 1] && n < 38; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	char *env[] = {CKPT, (char *)extra_env, NULL};
	run_out r = {0};
	r.code = brig_test_spawn(argv, NULL, env, &r.out, &r.err);
	return r;
}

static run_out brig_expect(int want, const char *const *args, const char *extra_env)
{
	run_out r = brig(args, extra_env);
	if (r.code != want)
		fail_msg("brig %s %s exited %d, expected %d\nstdout: %s\nstderr: %s", args[0], args[1], r.code, want,
			 r.out, r.err);
	return r;
}

static size_t count_ours(void)
{
	json_t *list = NULL;
	brig_error *err = NULL;
	json_t *filters = brig_test_filters();
	ASSERT_OK(brig_engine_container_list(E, &list, true, filters, &err), err);
	size_t n = json_array_size(list);
	json_decref(list);
	json_decref(filters);
	return n;
}

/* An unknown runtime: refused before anything is made, with the fix, from
 * the library and from both command-line paths (flag and BRIG_RUNTIME). */
static void test_unknown_runtime_refused(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	brig_test_spec(&s, brig_test_image());
	ASSERT_OK(brig_spec_set(&s, "runtime", "brig-no-such-runtime", &err), err);
	brig_identity id = {.ns = NS, .agent = "a", .session = "unknown", .generation = 1};
	brig_computer *c = NULL;
	int rc = brig_computer_create(E, &c, &id, &s, &err);
	assert_int_equal(rc, BRIG_EINVAL);
	assert_non_null(strstr(brig_error_message(err), "brig-no-such-runtime"));
	assert_non_null(strstr(brig_error_message(err), "scripts/bootstrap"));
	assert_non_null(strstr(brig_error_message(err), "daemon.json"));
	assert_non_null(strstr(brig_error_message(err), "runc")); /* what it has */
	brig_error_free(err);
	brig_spec_clear(&s);
	assert_int_equal(count_ours(), 0);

	const char *run[] = {"run", "--runtime", "brig-no-such-runtime", "--image", brig_test_image(), "--label",
			     LABEL, "--", "true", NULL};
	run_out r = brig_expect(125, run, NULL);
	assert_non_null(strstr(r.err, "does not know runtime 'brig-no-such-runtime'"));
	run_free(&r);
	const char *run_env[] = {"run", "--image", brig_test_image(), "--label", LABEL, "--", "true", NULL};
	r = brig_expect(125, run_env, "BRIG_RUNTIME=brig-no-such-runtime");
	assert_non_null(strstr(r.err, "does not know runtime 'brig-no-such-runtime'"));
	run_free(&r);
	r = brig_expect(125, run_env, "BRIG_RUNTIME=bad name");
	assert_non_null(strstr(r.err, "BRIG_RUNTIME"));
	run_free(&r);
	assert_int_equal(count_ours(), 0);
}

static bool runsc_registered(void)
{
	json_t *info = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_info(E, &info, &err), err);
	bool yes = json_object_get(json_object_get(info, "Runtimes"), "runsc") != NULL;
	json_decref(info);
	return yes;
}

static int sh(const char *ref, const char *script, int64_t timeout_ms, brig_exec_result *r, brig_error **err)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = timeout_ms};
	memset(r, 0, sizeof *r);
	return brig_computer_exec(E, ref, &o, r, err);
}

static char *sh_out(const char *ref, const char *script)
{
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(sh(ref, script, 30000, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("'%s' exited %d: %s %s", script, r.exit_code, r.out.data ? r.out.data : "",
			 r.err.data ? r.err.data : "");
	char *o = xstrdup(r.out.data ? r.out.data : "");
	brig_exec_result_clear(&r);
	return o;
}

static void test_runsc_computer(void **state)
{
	(void)state;
	if (!runsc_registered()) {
		print_message("runsc is not registered with the Docker daemon (scripts/bootstrap registers it): "
			      "skipped\n");
		skip();
	}
	const char *up[] = {"up",    "--ns",      NS,    "--agent", "a",    "--session", "g",
			    "--store", STORE, "--runtime", "runsc", "--image", brig_test_image(), "--label", LABEL,
			    NULL};
	run_out r = brig_expect(0, up, NULL);
	char name[BRIG_NAME_SIZE];
	snprintf(name, sizeof name, "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_free(&r);

	json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "HostConfig"), "Runtime")),
			    "runsc");
	json_decref(j);

	/* gVisor's kernel, brig-init as PID 1, only lo */
	char *o = sh_out(name, "dmesg | head -1; cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /sys/class/net");
	assert_non_null(strstr(o, "gVisor"));
	assert_non_null(strstr(o, "/.brig/brig-init init"));
	assert_non_null(strstr(o, "\nlo\n"));
	assert_null(strstr(o, "eth0"));
	free(o);

	/* files written inside, then pause and resume */
	free(sh_out(name, "mkdir -p /workspace/d && echo kept > /workspace/d/f && head -c 200000 /dev/zero > "
			  "/workspace/big"));
	ASSERT_OK(brig_computer_pause(E, name, &err), err);
	ASSERT_OK(brig_computer_resume(E, name, &err), err);
	o = sh_out(name, "cat /workspace/d/f");
	assert_string_equal(o, "kept\n");
	free(o);

	/* a deadline ends the command, not the computer */
	brig_exec_result x;
	assert_int_equal(sh(name, "sleep 30", 1000, &x, &err), BRIG_ETIMEDOUT);
	assert_non_null(strstr(brig_error_message(err), "keeps running"));
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&x);
	o = sh_out(name, "cat /workspace/d/f");
	assert_string_equal(o, "kept\n");
	free(o);

	/* the archive API sees what gVisor wrote: checkpoint, then restore */
	const char *ck[] = {"checkpoint", "--ns", NS, "--agent", "a", "--session", "g", "--store", STORE, NULL};
	r = brig_expect(0, ck, NULL);
	run_free(&r);
	ASSERT_OK(brig_computer_stop(E, name, &err), err);
	const char *rec[] = {"recover", "--ns", NS, "--agent", "a", "--session", "g", "--store", STORE, NULL};
	r = brig_expect(0, rec, NULL);
	run_free(&r);
	const char *up2[] = {"up", "--ns", NS, "--agent", "a", "--session", "g", "--store", STORE, NULL};
	r = brig_expect(0, up2, NULL);
	snprintf(name, sizeof name, "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_free(&r);
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "HostConfig"), "Runtime")),
			    "runsc"); /* the next generation keeps the runtime */
	json_decref(j);
	o = sh_out(name, "cat /workspace/d/f; wc -c < /workspace/big");
	assert_string_equal(o, "kept\n200000\n");
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_runtime_refused),
		cmocka_unit_test(test_runsc_computer),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
