/* test_run_cli.c — `brig run` as a user types it: exit codes (the command's,
 * 124, 125, 126, 127, 130), --json, --in/--out, --image by id or from
 * BRIG_IMAGE, and Ctrl-C — each followed by a listing of what is left. */
#include "helpers/run_util.h"

/* argv for `brig run --image IMG --label L [extra…] -- cmd…` (static storage,
 * valid until the next call). */
static char **brig_run_argv(const char *const *extra, const char *const *cmd)
{
	static char *v[64];
	static char label[96];
	int n = 0;
	snprintf(label, sizeof label, "%s", ru_label());
	v[n++] = "brig";
	v[n++] = "run";
	v[n++] = "--label";
	v[n++] = label;
	bool has_image = false;
	for (const char *const *e = extra; e && *e; e++) {
		has_image |= strcmp(*e, "--image") == 0 || strcmp(*e, "--no-image") == 0;
		if (strcmp(*e, "--no-image") != 0)
			v[n++] = (char *)*e;
	}
	if (!has_image) {
		v[n++] = "--image";
		v[n++] = (char *)brig_test_image();
	}
	v[n++] = "--";
	for (const char *const *c = cmd; *c; c++)
		v[n++] = (char *)*c;
	v[n] = NULL;
	return v;
}

typedef struct cli_res {
	int status;
	char *out, *err;
	int64_t ms;
} cli_res;

static void brig_run_cli(cli_res *r, const char *const *extra, const char *const *cmd, char *const *env)
{
	int64_t t0 = brig_now_ms();
	r->status = brig_test_spawn(brig_run_argv(extra, cmd), NULL, env, &r->out, &r->err);
	r->ms = brig_now_ms() - t0;
}

static void cli_res_free(cli_res *r)
{
	free(r->out);
	free(r->err);
}

static void test_cli_exit_code_and_streams(void **state)
{
	(void)state;
	const char *cmd[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
	cli_res r;
	brig_run_cli(&r, NULL, cmd, NULL);
	assert_int_equal(r.status, 3);
	assert_string_equal(r.out, "out\n");
	assert_string_equal(r.err, "err\n");
	cli_res_free(&r);
	ru_assert_nothing_left("brig run exiting 3");

	const char *ok[] = {"true", NULL};
	brig_run_cli(&r, NULL, ok, NULL);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "");
	cli_res_free(&r);
	ru_assert_nothing_left("brig run exiting 0");
}

static void test_cli_cannot_invoke(void **state)
{
	(void)state;
	/* brig-init starts the command (as PID 1 of a plain run, over its relay
	 * when the run copies outputs or takes stdin) and says what failed in
	 * its own words, the same on both paths; stdout stays the command's. */
	cleanup_free char *out = ru_tmpdir("cannot-invoke");
	const char *plain[] = {NULL};
	const char *with_out[] = {"--out", out, NULL};
	const char *with_stdin[] = {"-i", NULL};
	const char *const *shapes[] = {plain, with_out, with_stdin};
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
		const char *missing[] = {"/no/such/program", NULL};
		cli_res r;
		brig_run_cli(&r, shapes[i], missing, NULL);
		if (r.status != 127 || strcmp(r.err, "brig: /no/such/program: not found in the image\n") != 0 || *r.out)
			fail_msg("a missing program (shape %zu): exit %d, stdout: %s, stderr: %s", i, r.status, r.out,
				 r.err);
		cli_res_free(&r);
		const char *noexec[] = {"/etc/passwd", NULL};
		brig_run_cli(&r, shapes[i], noexec, NULL);
		if (r.status != 126 || !strcasestr(r.err, "brig: /etc/passwd: permission denied") || *r.out)
			fail_msg("a file that is not executable (shape %zu): exit %d, stdout: %s, stderr: %s", i,
				 r.status, r.out, r.err);
		cli_res_free(&r);
	}
	ru_assert_nothing_left("commands that cannot run");
	ru_rmrf(out);
}

static void test_cli_timeout(void **state)
{
	(void)state;
	const char *arg = ru_sleep_arg("cli-timeout");
	const char *extra[] = {"--timeout", "2", NULL};
	const char *cmd[] = {"sleep", arg, NULL};
	cli_res r;
	brig_run_cli(&r, extra, cmd, NULL);
	assert_int_equal(r.status, 124);
	assert_non_null(strstr(r.err, "brig: run timed out after 2s"));
	print_message("brig run --timeout 2 -- sleep: exited 124 after %lld ms\n", (long long)r.ms);
	assert_in_range(r.ms, 2000, 2000 + 4000);
	cli_res_free(&r);
	assert_int_equal(ru_host_procs_with_arg(arg), 0);
	ru_assert_nothing_left("brig run timing out");
}

static void test_cli_missing_image(void **state)
{
	(void)state;
	cleanup_free char *ref = xasprintf("brigtest-%s-absent:x", brig_test_run_id());
	const char *extra[] = {"--image", ref, NULL};
	const char *cmd[] = {"true", NULL};
	cli_res r;
	brig_run_cli(&r, extra, cmd, NULL);
	assert_int_equal(r.status, 125);
	assert_string_equal(r.out, "");
	if (!strstr(r.err, ref) || !strstr(r.err, "build") || strncmp(r.err, "brig: ", 6) != 0)
		fail_msg("unhelpful message: %s", r.err);
	cli_res_free(&r);
	ru_assert_nothing_left("a missing image");
}

static void test_cli_image_by_id_and_env(void **state)
{
	(void)state;
	cleanup_json json_t *img = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_image_inspect(E, &img, brig_test_image(), &err), err);
	const char *id = json_string_value(json_object_get(img, "Id"));
	const char *extra[] = {"--image", id, "--json", NULL};
	const char *cmd[] = {"true", NULL};
	cli_res r;
	brig_run_cli(&r, extra, cmd, NULL);
	assert_int_equal(r.status, 0);
	cleanup_json json_t *j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "image_id")), id);
	cli_res_free(&r);

	/* No --image: BRIG_IMAGE names it. */
	cleanup_free char *env_image = xasprintf("BRIG_IMAGE=%s", brig_test_image());
	char *env[] = {env_image, NULL};
	const char *noimg[] = {"--no-image", NULL};
	const char *echo[] = {"echo", "from-env", NULL};
	brig_run_cli(&r, noimg, echo, env);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "from-env\n");
	cli_res_free(&r);
	ru_assert_nothing_left("runs by id and from BRIG_IMAGE");
}

static void test_cli_json(void **state)
{
	(void)state;
	cleanup_free char *out = ru_tmpdir("cli-json");
	cleanup_free char *dir = xasprintf("%s/results", out);
	const char *extra[] = {"--json", "--out", dir, NULL};
	/* 3 000 000 bytes of stdout: more than the 1 MiB captured per stream. */
	const char *cmd[] = {"sh", "-c",
			     "head -c 3000000 /dev/zero | tr '\\0' x; echo problem >&2; echo r > /outbox/r.txt; exit 5",
			     NULL};
	cli_res r;
	brig_run_cli(&r, extra, cmd, NULL);
	assert_int_equal(r.status, 5);
	/* stdout is exactly one JSON object (the command's stdout is inside it). */
	json_error_t je;
	cleanup_json json_t *j = json_loads(r.out, 0, &je);
	if (!j)
		fail_msg("stdout is not one JSON object (%s): %.300s", je.text, r.out);
	assert_true(json_is_object(j));
	assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 5);
	assert_true(json_is_false(json_object_get(j, "timed_out")));
	json_t *d = json_object_get(j, "durations_ms");
	const char *keys[] = {"create", "copy_in", "run", "copy_out", "total"};
	for (size_t i = 0; i < 5; i++)
		assert_true(json_is_integer(json_object_get(d, keys[i])));
	assert_true(json_integer_value(json_object_get(d, "total")) >= json_integer_value(json_object_get(d, "run")));
	json_t *so = json_object_get(j, "stdout"), *se = json_object_get(j, "stderr");
	assert_int_equal(json_integer_value(json_object_get(so, "bytes")), 3000000);
	json_int_t dropped = json_integer_value(json_object_get(so, "dropped"));
	assert_true(dropped > 0);
	assert_int_equal((json_int_t)strlen(json_string_value(json_object_get(so, "text"))), 3000000 - dropped);
	assert_int_equal(json_integer_value(json_object_get(se, "bytes")), 8);
	assert_int_equal(json_integer_value(json_object_get(se, "dropped")), 0);
	assert_string_equal(json_string_value(json_object_get(se, "text")), "problem\n");
	assert_true(strncmp(json_string_value(json_object_get(j, "image_id")), "sha256:", 7) == 0);
	json_t *outs = json_object_get(j, "outputs");
	assert_int_equal(json_array_size(outs), 1);
	assert_string_equal(json_string_value(json_array_get(outs, 0)), "r.txt");
	assert_int_equal(json_integer_value(json_object_get(j, "output_bytes")), 2);
	/* stderr still streamed live. */
	assert_non_null(strstr(r.err, "problem\n"));
	cli_res_free(&r);
	ru_assert_nothing_left("brig run --json");
	ru_rmrf(out);
}

static void test_cli_in_out(void **state)
{
	(void)state;
	cleanup_free char *host = ru_tmpdir("cli-io");
	cleanup_free char *in = xasprintf("%s/données.txt", host);
	ru_write_file(in, "bonjour\n");
	cleanup_free char *dir = xasprintf("%s/out", host);
	const char *extra[] = {"--in", in, "--out", dir, NULL};
	const char *cmd[] = {"sh", "-c", "tr a-z A-Z < /inbox/données.txt > '/outbox/résultat 1.txt'", NULL};
	cli_res r;
	brig_run_cli(&r, extra, cmd, NULL);
	assert_int_equal(r.status, 0);
	cleanup_free char *res = xasprintf("%s/résultat 1.txt", dir);
	cleanup_free char *got = ru_read_file(res, NULL);
	assert_non_null(got);
	assert_string_equal(got, "BONJOUR\n");
	cli_res_free(&r);
	ru_assert_nothing_left("brig run --in --out");
	ru_rmrf(host);
}

/* Ctrl-C: SIGINT to brig while the command runs → 130, the container and
 * its processes gone. */
static void test_cli_ctrl_c(void **state)
{
	(void)state;
	const char *arg = ru_sleep_arg("ctrl-c");
	cleanup_free char *script = xasprintf("echo started; sleep %s", arg);
	const char *cmd[] = {"sh", "-c", script, NULL};
	ru_proc p;
	ru_proc_start(&p, brig_run_argv(NULL, cmd));
	ru_proc_wait_for(&p, "started\n", 30000);
	assert_int_equal(ru_host_procs_wait(arg, 1, 5000), 1);
	int64_t t0 = brig_now_ms();
	assert_int_equal(kill(p.pid, SIGINT), 0);
	int st = ru_proc_wait(&p, 30000);
	int64_t ms = brig_now_ms() - t0;
	print_message("Ctrl-C: brig exited %d %lld ms after SIGINT\n", st, (long long)ms);
	assert_int_equal(st, 130);
	assert_non_null(strstr(brig_buf_cstr(&p.err), "interrupted"));
	assert_true(ms < 5000);
	ru_proc_free(&p);
	assert_int_equal(ru_host_procs_with_arg(arg), 0);
	ru_assert_nothing_left("Ctrl-C");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_exit_code_and_streams),
		cmocka_unit_test(test_cli_cannot_invoke),
		cmocka_unit_test(test_cli_timeout),
		cmocka_unit_test(test_cli_missing_image),
		cmocka_unit_test(test_cli_image_by_id_and_env),
		cmocka_unit_test(test_cli_json),
		cmocka_unit_test(test_cli_in_out),
		cmocka_unit_test(test_cli_ctrl_c),
	};
	return cmocka_run_group_tests(tests, ru_setup, ru_teardown);
}
