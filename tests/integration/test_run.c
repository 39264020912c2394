/* test_run.c — brig_run against the real dockerd, as a user sees it: read-only
 * inputs, outputs copied out (also after a failure or a timeout), deadlines,
 * a fork bomb held by the pids limit, no network, pinned images, and nothing
 * left behind. Hostile outputs are in test_run_unsafe.c, the CLI in
 * test_run_cli.c, kill -9 of brig in test_run_kill.c. */
#include "helpers/run_util.h"

#include <pthread.h>

#include "guest/host.h"
#include "tar/tar.h"

/* ---- inputs ---- */

static void test_inputs_visible_and_read_only(void **state)
{
	(void)state;
	cleanup_free char *host = ru_tmpdir("in");
	cleanup_free char *file = xasprintf("%s/in.txt", host);
	cleanup_free char *dir = xasprintf("%s/indir", host);
	cleanup_free char *sub = xasprintf("%s/indir/sub", host);
	ru_write_file(file, "hello input\n");
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(mkdir(sub, 0755), 0);
	cleanup_free char *a = xasprintf("%s/a.txt", dir);
	cleanup_free char *b = xasprintf("%s/b.txt", sub);
	ru_write_file(a, "file a\n");
	ru_write_file(b, "file b\n");
	cleanup_free char *before = ru_tree(host);

	/* Each attempt prints "denied: …" or "ALLOWED: …". */
	static const char script[] =
		"cat /inbox/in.txt /inbox/indir/a.txt /inbox/indir/sub/b.txt\n"
		"sums() { sha256sum /inbox/in.txt /inbox/indir/a.txt /inbox/indir/sub/b.txt; find /inbox | sort; }\n"
		"sums > /workspace/before\n"
		"try() { if \"$@\" 2>/dev/null; then echo \"ALLOWED: $*\"; else echo \"denied: $*\"; fi; }\n"
		"try touch /inbox/in.txt\n"
		"try touch /inbox/new\n"
		"try touch /inbox/indir/new\n"
		"try sh -c 'echo x > /inbox/in.txt'\n"
		"try sh -c 'echo x >> /inbox/indir/a.txt'\n"
		"try sh -c 'echo x > /inbox/indir/sub/added'\n"
		"try rm -f /inbox/in.txt\n"
		"try rm -f /inbox/indir/sub/b.txt\n"
		"try rm -rf /inbox/indir\n"
		"try mkdir /inbox/d\n"
		"try mkdir /inbox/indir/d\n"
		"try chmod 666 /inbox/in.txt\n"
		"try chmod 777 /inbox/indir\n"
		"try mv /inbox/in.txt /inbox/moved\n"
		"try mv /inbox/indir/a.txt /inbox/indir/sub/a.txt\n"
		"try ln -s /etc /inbox/link\n"
		"try ln /inbox/in.txt /inbox/indir/hardlink\n"
		"try truncate -s 0 /inbox/indir/sub/b.txt\n"
		"sums > /workspace/after\n"
		"if cmp -s /workspace/before /workspace/after; then echo unchanged; else echo CHANGED; "
		"diff /workspace/before /workspace/after; fi\n"
		"stat -c '%n %u:%g %a' /inbox /inbox/in.txt /inbox/indir /inbox/indir/sub/b.txt\n";
	const char *inputs[] = {file, dir};
	ru_args args = {.inputs = inputs, .input_count = 2};
	ru_run r;
	ru_run_sh(&r, &args, script);
	ru_assert_exit(&r, 0);
	const char *out = r.res.exec.out.data;
	assert_non_null(strstr(out, "hello input\nfile a\nfile b\n"));
	if (strstr(out, "ALLOWED"))
		fail_msg("the command changed /inbox:\n%s", out);
	int denied = 0;
	for (const char *p = out; (p = strstr(p, "denied: ")); p++)
		denied++;
	assert_int_equal(denied, 18);
	assert_non_null(strstr(out, "\nunchanged\n"));
	/* Root-owned, no write bit for anyone. */
	if (!strstr(out,
		    "/inbox 0:0 755\n/inbox/in.txt 0:0 444\n/inbox/indir 0:0 555\n/inbox/indir/sub/b.txt 0:0 444\n"))
		fail_msg("owners and modes under /inbox:\n%s", out);
	ru_run_free(&r);

	/* The host's inputs were only read. */
	cleanup_free char *after = ru_tree(host);
	assert_string_equal(before, after);
	ru_assert_nothing_left("a run with inputs");
	ru_rmrf(host);
}

/* ---- outputs ---- */

static void test_outputs_copied(void **state)
{
	(void)state;
	cleanup_free char *out = ru_tmpdir("out");
	static const char script[] = "set -e\n"
				     "cd /outbox\n"
				     "mkdir -p a/b/c && echo deep > a/b/c/deep.txt\n"
				     "head -c 1048576 /dev/urandom > bin.dat\n"
				     "printf '\\000\\001\\377\\n' > nul.bin\n"
				     ": > empty.txt\n"
				     ": > a/b/empty\n"
				     "mkdir emptydir\n"
				     "echo spaces > 'with  space.txt'\n"
				     "echo naive > 'naïve file.txt'\n"
				     "mkdir 日本 && echo jp > 日本/ファイル.txt\n"
				     "sha256sum bin.dat nul.bin\n";
	ru_args args = {.out_dir = out};
	ru_run r;
	ru_run_sh(&r, &args, script);
	ru_assert_exit(&r, 0);

	/* Binary content: the host's digest is the one the command computed. */
	char sum[65];
	cleanup_free char *bin = xasprintf("%s/bin.dat", out);
	ru_sha256_file(bin, sum);
	cleanup_free char *want = xasprintf("%s  bin.dat\n", sum);
	if (!strstr(r.res.exec.out.data, want))
		fail_msg("bin.dat sha256 on the host %s; the command said:\n%s", sum, r.res.exec.out.data);
	cleanup_free char *nul = xasprintf("%s/nul.bin", out);
	ru_sha256_file(nul, sum);
	cleanup_free char *want2 = xasprintf("%s  nul.bin\n", sum);
	assert_non_null(strstr(r.res.exec.out.data, want2));

	struct {
		const char *path, *text;
	} files[] = {{"a/b/c/deep.txt", "deep\n"},
		     {"empty.txt", ""},
		     {"a/b/empty", ""},
		     {"with  space.txt", "spaces\n"},
		     {"naïve file.txt", "naive\n"},
		     {"日本/ファイル.txt", "jp\n"}};
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		cleanup_free char *p = xasprintf("%s/%s", out, files[i].path);
		size_t len = 0;
		cleanup_free char *got = ru_read_file(p, &len);
		if (!got)
			fail_msg("output %s was not copied: %s", files[i].path, strerror(errno));
		assert_int_equal(len, strlen(files[i].text));
		assert_string_equal(got, files[i].text);
	}
	struct stat st;
	cleanup_free char *ed = xasprintf("%s/emptydir", out);
	assert_int_equal(lstat(ed, &st), 0);
	assert_true(S_ISDIR(st.st_mode));

	/* The result lists what was copied. */
	bool seen_bin = false, seen_jp = false;
	for (size_t i = 0; i < r.res.output_count; i++) {
		seen_bin |= strcmp(r.res.outputs[i], "bin.dat") == 0;
		seen_jp |= strcmp(r.res.outputs[i], "日本/ファイル.txt") == 0;
	}
	assert_true(seen_bin && seen_jp);
	assert_int_equal(r.res.output_bytes, 1048576 + 4 + 5 + 7 + 6 + 3);
	ru_run_free(&r);
	ru_assert_nothing_left("a run with outputs");
	ru_rmrf(out);
}

static void test_output_100mb(void **state)
{
	(void)state;
	cleanup_free char *out = ru_tmpdir("big");
	ru_args args = {.out_dir = out};
	ru_run r;
	ru_run_sh(&r, &args, "head -c 104857600 /dev/urandom > /outbox/big && cd /outbox && sha256sum big");
	ru_assert_exit(&r, 0);
	cleanup_free char *big = xasprintf("%s/big", out);
	struct stat st;
	assert_int_equal(lstat(big, &st), 0);
	assert_int_equal(st.st_size, 104857600);
	char sum[65];
	ru_sha256_file(big, sum);
	cleanup_free char *want = xasprintf("%s  big\n", sum);
	assert_string_equal(r.res.exec.out.data, want);
	print_message("100 MB output: copy-out %lld ms, total %lld ms\n", (long long)r.res.copy_out_ms,
		      (long long)r.res.total_ms);
	ru_run_free(&r);
	ru_assert_nothing_left("a 100 MB output");
	ru_rmrf(out);
}

static void test_outputs_after_failure(void **state)
{
	(void)state;
	cleanup_free char *out = ru_tmpdir("fail");
	ru_args args = {.out_dir = out};
	ru_run r;
	ru_run_sh(&r, &args, "mkdir /outbox/logs && echo 'it broke' > /outbox/logs/error.txt; echo oops >&2; exit 3");
	ru_assert_exit(&r, 3);
	assert_string_equal(r.res.exec.err.data, "oops\n");
	cleanup_free char *p = xasprintf("%s/logs/error.txt", out);
	cleanup_free char *got = ru_read_file(p, NULL);
	assert_non_null(got);
	assert_string_equal(got, "it broke\n");
	ru_run_free(&r);
	ru_assert_nothing_left("a run that exited 3");
	ru_rmrf(out);
}

/* ---- deadlines ---- */

static void test_timeout_ends_everything(void **state)
{
	(void)state;
	const char *s1 = ru_sleep_arg("timeout-bg"), *s2 = ru_sleep_arg("timeout-fg");
	cleanup_free char *out = ru_tmpdir("timeout");
	/* A background process too: the deadline ends the whole run, not only
	 * the exec'd shell. */
	cleanup_free char *script = xasprintf("echo partial > /outbox/partial.txt; sleep %s >/dev/null 2>&1 & "
					      "echo started; sleep %s",
					      s1, s2);
	ru_args args = {.out_dir = out, .timeout_s = 2};
	ru_run r;
	ru_run_sh(&r, &args, script);
	ru_assert_exit(&r, 124);
	assert_true(r.res.exec.timed_out);
	assert_string_equal(r.res.exec.out.data, "started\n");
	/* Within the deadline plus a small grace: run_ms counts from the exec. */
	print_message("timeout 2 s: run %lld ms, whole call %lld ms (create %lld, copy-out %lld)\n",
		      (long long)r.res.run_ms, (long long)r.wall_ms, (long long)r.res.create_ms,
		      (long long)r.res.copy_out_ms);
	assert_in_range(r.res.run_ms, 2000, 2000 + 1000);
	assert_true(r.wall_ms <= r.res.create_ms + 2000 + 3000);
	/* Outputs as far as they exist. */
	cleanup_free char *p = xasprintf("%s/partial.txt", out);
	cleanup_free char *got = ru_read_file(p, NULL);
	assert_non_null(got);
	assert_string_equal(got, "partial\n");
	ru_run_free(&r);
	/* No process of the run survives on the host. */
	assert_int_equal(ru_host_procs_with_arg(s1), 0);
	assert_int_equal(ru_host_procs_with_arg(s2), 0);
	ru_assert_nothing_left("a timeout");
	ru_rmrf(out);
}

/* Closing stdout and stderr ends the output, not the command: the deadline
 * still holds it (the direct path waits for the exit, not for the stream). */
static void test_closed_output_still_timed(void **state)
{
	(void)state;
	const char *arg = ru_sleep_arg("closed-output");
	cleanup_free char *script = xasprintf("echo before; exec >&- 2>&-; sleep %s", arg);
	ru_args args = {.timeout_s = 2};
	ru_run r;
	ru_run_sh(&r, &args, script);
	ru_assert_exit(&r, 124);
	assert_true(r.res.exec.timed_out);
	assert_string_equal(r.res.exec.out.data, "before\n");
	assert_true(r.wall_ms <= r.res.create_ms + 2000 + 6000);
	ru_run_free(&r);
	assert_int_equal(ru_host_procs_with_arg(arg), 0);
	ru_assert_nothing_left("a command that closed its output");
}

/* A command's own exit 124 before its deadline is its own, not a timeout,
 * on both paths (brig-init's `run` exits 124 at the deadline too). */
static void test_own_124_not_timed_out(void **state)
{
	(void)state;
	cleanup_free char *out = ru_tmpdir("own124");
	for (int with_out = 0; with_out < 2; with_out++) {
		ru_args args = {.timeout_s = 30, .out_dir = with_out ? out : NULL};
		ru_run r;
		ru_run_sh(&r, &args, "echo mine; exit 124");
		ru_assert_exit(&r, 124);
		assert_false(r.res.exec.timed_out);
		assert_string_equal(r.res.exec.out.data, "mine\n");
		ru_run_free(&r);
	}
	ru_assert_nothing_left("a command exiting 124");
	ru_rmrf(out);
}

/* A run trusts the brig-init volume by its label and checks the copy its
 * own container would start (one HEAD) before starting it: the real one
 * passes; none, or a copy cut short, is told apart (the run then repairs
 * the volume through a filler). */
static void test_init_copy_checked(void **state)
{
	(void)state;
	if (!brig_guest__volume_name())
		skip();
	brig_error *err = NULL;
	ASSERT_OK(brig_guest__volume_ensure(E, brig_test_image(), &err), err);
	cleanup_json json_t *real =
		json_pack("{s:{s:[{s:s, s:s, s:s, s:b}]}}", "HostConfig", "Mounts", "Type", "volume", "Source",
			  brig_guest__volume_name(), "Target", "/.brig", "ReadOnly", 1);
	cleanup_free char *c1 = brig_test_container(E, "init-real", real);
	ASSERT_OK(brig_guest__volume_check(E, c1, &err), err);
	/* seen whole: the marker tells later processes (one volume inspect) */
	cleanup_free char *marker = xasprintf("%s-ok", brig_guest__volume_name());
	cleanup_json json_t *mv = NULL;
	ASSERT_OK(brig_engine_volume_inspect(E, &mv, marker, &err), err);
	json_decref(steal_pointer(&mv));
	/* a run that could not start distrusts it: gone, and the next run
	 * checks the copy again and makes it anew */
	brig_guest__volume_distrust(E);
	assert_int_equal(brig_engine_volume_inspect(E, &mv, marker, &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;
	ru_args args = {.timeout_s = 30};
	ru_run r;
	ru_run_sh(&r, &args, "exit 0");
	ru_assert_exit(&r, 0);
	ru_run_free(&r);
	ASSERT_OK(brig_engine_volume_inspect(E, &mv, marker, &err), err);

	cleanup_free char *c2 = brig_test_container(E, "init-none", NULL);
	assert_int_equal(brig_guest__volume_check(E, c2, &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;

	/* a volume of this test's own holding a short brig-init */
	cleanup_free char *vname = brig_test_name("init-short");
	cleanup_json json_t *fake =
		json_pack("{s:{s:[{s:s, s:s, s:s, s:b, s:{s:o}}]}}", "HostConfig", "Mounts", "Type", "volume", "Source",
			  vname, "Target", "/.brig", "ReadOnly", 0, "VolumeOptions", "Labels", brig_test_labels());
	cleanup_free char *c3 = brig_test_container(E, "init-short", fake);
	brig_tar_build_opts bo = {.version = BRIG_TAR_BUILD_OPTS_VERSION};
	brig_tar_builder *b = NULL;
	ASSERT_OK(brig_tar_builder_new(&b, &bo, &err), err);
	ASSERT_OK(brig_tar_builder_add_file(b, "brig-init", "\177ELF-cut", 8, 0511, &err), err);
	ASSERT_OK(brig_engine_archive_put(E, c3, "/.brig", brig_tar_builder_reader, b, &err), err);
	brig_tar_builder_free(b);
	assert_int_equal(brig_guest__volume_check(E, c3, &err), BRIG_ECORRUPT);
	assert_non_null(strstr(brig_error_message(err), "is not this brig's brig-init"));
	brig_error_free(err);
	const char *ids[] = {c1, c2, c3};
	for (int i = 0; i < 3; i++)
		brig_engine_container_remove(E, ids[i], true, true, NULL);
	brig_engine_volume_remove(E, vname, true, NULL);
	ru_assert_nothing_left("checking brig-init's copy");
}

/* Writes bytes as /.brig/brig-init of this build's real volume (0511),
 * through a test container mounting it writable. */
static void put_real_init(const void *data, size_t len)
{
	brig_error *err = NULL;
	cleanup_json json_t *rw =
		json_pack("{s:{s:[{s:s, s:s, s:s, s:b}]}}", "HostConfig", "Mounts", "Type", "volume", "Source",
			  brig_guest__volume_name(), "Target", "/.brig", "ReadOnly", 0);
	cleanup_free char *c = brig_test_container(E, "init-spoil", rw);
	brig_tar_build_opts bo = {.version = BRIG_TAR_BUILD_OPTS_VERSION};
	brig_tar_builder *b = NULL;
	ASSERT_OK(brig_tar_builder_new(&b, &bo, &err), err);
	ASSERT_OK(brig_tar_builder_add_file(b, "brig-init", data, len, 0511, &err), err);
	ASSERT_OK(brig_engine_archive_put(E, c, "/.brig", brig_tar_builder_reader, b, &err), err);
	brig_tar_builder_free(b);
	brig_engine_container_remove(E, c, true, true, NULL);
}

static bool marker_present(void)
{
	cleanup_free char *marker = xasprintf("%s-ok", brig_guest__volume_name());
	json_t *mv = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_volume_inspect(E, &mv, marker, &err);
	json_decref(mv);
	brig_error_free(err);
	return rc == 0;
}

/* Whatever a test below did to the volume, it leaves it whole: a fill
 * compares the copy byte for byte and puts it anew when it differs. */
static int init_ensure(brig_error **err)
{
	brig_guest__volume_forget(E);
	return brig_guest__volume_ensure(E, brig_test_image(), err);
}

static void init_restore(void)
{
	brig_error *err = NULL;
	ASSERT_OK(init_ensure(&err), err);
	assert_true(marker_present());
}

static int init_teardown(void **state)
{
	(void)state;
	if (brig_guest__volume_name()) {
		brig_error *err = NULL;
		if (init_ensure(&err) != 0) {
			print_error("restoring brig-init's volume: %s\n", brig_error_message(err));
			brig_error_free(err);
			return -1;
		}
	}
	return 0;
}

/* A run that finds no marker checks its own container's copy; one cut
 * short (or absent) is repaired through a filler and the run goes on: both
 * shapes (direct, and with an out dir), each from a spoiled volume. */
static void test_init_repaired_by_run(void **state)
{
	(void)state;
	if (!brig_guest__volume_name())
		skip();
	cleanup_free char *out = ru_tmpdir("repair");
	for (int with_out = 0; with_out < 2; with_out++) {
		init_restore();
		brig_guest__volume_distrust(E); /* the marker goes: the next run checks */
		assert_false(marker_present());
		put_real_init("\177ELF-cut", 8);
		ru_args args = {.timeout_s = 30, .out_dir = with_out ? out : NULL};
		ru_run r;
		ru_run_sh(&r, &args, "test -x /.brig/brig-init && echo repaired");
		ru_assert_exit(&r, 0);
		assert_string_equal(r.res.exec.out.data, "repaired\n");
		ru_run_free(&r);
		assert_true(marker_present()); /* seen whole again */
		/* and whole: a fresh look through a new handle's eyes */
		brig_guest__volume_forget(E);
		cleanup_json json_t *ro =
			json_pack("{s:{s:[{s:s, s:s, s:s, s:b}]}}", "HostConfig", "Mounts", "Type", "volume", "Source",
				  brig_guest__volume_name(), "Target", "/.brig", "ReadOnly", 1);
		cleanup_free char *c = brig_test_container(E, "init-look", ro);
		brig_error *err = NULL;
		ASSERT_OK(brig_guest__volume_check(E, c, &err), err);
		brig_engine_container_remove(E, c, true, true, NULL);
	}
	ru_assert_nothing_left("repairing brig-init's copy");
}

/* A copy of the right size and mode but other bytes, trusted through the
 * marker, cannot start: that run fails with an error naming brig-init
 * (before, direct runs reported runc's words as the command's exit 1, and
 * the marker stayed), it never retries, the marker goes, and the next run
 * checks the copy byte for byte, repairs it and runs. Both shapes. */
static void test_init_start_failure_distrusts(void **state)
{
	(void)state;
	if (!brig_guest__volume_name())
		skip();
	const unsigned char *d;
	size_t n;
	brig_guest__binary(&d, &n);
	cleanup_free char *junk = xmalloc(n);
	memset(junk, 'x', n);
	for (int with_out = 0; with_out < 2; with_out++) {
		cleanup_free char *out = with_out ? ru_tmpdir("distrust") : NULL;
		init_restore();
		put_real_init(junk, n);
		brig_guest__volume_forget(E); /* a new process: the marker is all it knows */
		ru_args args = {.timeout_s = 30, .out_dir = out};
		ru_run r;
		ru_run_sh(&r, &args, "echo never");
		/* an error, never an exit code: the command did not run */
		if (r.rc != BRIG_ECORRUPT || !strstr(brig_error_message(r.err), "brig-init could not start"))
			fail_msg("spoiled brig-init (%s): %s: %s; exit %d", with_out ? "out dir" : "direct",
				 brig_error_name(r.rc), brig_error_message(r.err), r.res.exec.exit_code);
		print_message("spoiled brig-init (%s): %s\n", with_out ? "out dir" : "direct",
			      brig_error_message(r.err));
		ru_run_free(&r);
		assert_false(marker_present());
		ru_run_sh(&r, &args, "echo ran");
		ru_assert_exit(&r, 0);
		assert_string_equal(r.res.exec.out.data, "ran\n");
		ru_run_free(&r);
		assert_true(marker_present());
	}
	ru_assert_nothing_left("distrusting brig-init's copy");
}

/* BRIG_GUEST=0 keeps runs as before brig-init (docker-init as PID 1, the
 * image's timeout or an exec), for both shapes; by default PID 1 is
 * brig-init. */
static void test_pid1_with_and_without_brig_init(void **state)
{
	(void)state;
	cleanup_free char *out = ru_tmpdir("pid1");
	for (int guest = 0; guest < 2; guest++) {
		if (guest && !brig_guest__volume_name())
			break;
		setenv("BRIG_GUEST", guest ? "1" : "0", 1);
		for (int with_out = 0; with_out < 2; with_out++) {
			ru_args args = {.timeout_s = 30, .out_dir = with_out ? out : NULL};
			ru_run r;
			ru_run_sh(&r, &args, "tr '\\0' ' ' < /proc/1/cmdline; echo; exit 3");
			ru_assert_exit(&r, 3);
			const char *want =
				guest ? (with_out ? "/.brig/brig-init init --lifetime " : "/.brig/brig-init run ")
				      : "/sbin/docker-init -- ";
			if (strncmp(r.res.exec.out.data, want, strlen(want)) != 0)
				fail_msg("BRIG_GUEST=%d, outputs %d: PID 1 is %s", guest, with_out,
					 r.res.exec.out.data);
			ru_run_free(&r);
		}
	}
	unsetenv("BRIG_GUEST");
	ru_assert_nothing_left("runs with and without brig-init");
	ru_rmrf(out);
}

/* A fork bomb is held by the pids limit; the run ends with the command's
 * own exit code and the host can still start processes. */
static void test_fork_bomb_contained(void **state)
{
	(void)state;
	brig_spec s;
	ru_spec(&s);
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(&s, "pids", "64", &err), err);
	const char *arg = ru_sleep_arg("bomb");
	/* Busybox sh: spawn until fork fails (the subshell then exits 2); the
	 * rest uses builtins only, since no process can be started any more. */
	cleanup_free char *script =
		xasprintf("( while :; do sleep %s >/dev/null 2>&1 & done ); echo \"bomb=$?\"; "
			  "read n < /sys/fs/cgroup/pids/pids.current; read m < /sys/fs/cgroup/pids/pids.max; "
			  "echo \"current=$n max=$m\"; exit 7",
			  arg);
	ru_args args = {.spec = &s, .timeout_s = 60};
	ru_run r;
	ru_run_sh(&r, &args, script);
	ru_assert_exit(&r, 7);
	assert_false(r.res.exec.timed_out);
	const char *out = r.res.exec.out.data;
	assert_non_null(strstr(out, "max=64\n"));
	const char *cur = strstr(out, "current=");
	assert_non_null(cur);
	long n = strtol(cur + 8, NULL, 10);
	print_message("fork bomb: %ld processes at the limit of 64; run %lld ms\n", n, (long long)r.res.run_ms);
	assert_in_range(n, 50, 64);
	assert_non_null(strstr(r.res.exec.err.data, "can't fork"));
	ru_run_free(&r);
	brig_spec_clear(&s);

	/* The host is unaffected and the bomb's processes are gone. */
	char *argv[] = {"/bin/true", NULL};
	assert_int_equal(brig_test_spawn(argv, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(ru_host_procs_with_arg(arg), 0);
	ru_assert_nothing_left("a fork bomb");
}

/* A run with nothing to copy has /workspace and /runtime as plain tmpfs
 * mounts (no volumes): the same bounds and flags as the volumes — size,
 * inodes, owner, nosuid, nodev — and still executable. The mode comes from
 * the image's directory (0700 in brig's images and the test image). */
static void test_direct_run_tmpfs(void **state)
{
	(void)state;
	brig_spec s;
	ru_spec(&s);
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(&s, "workspace-mb", "16", &err), err);
	ASSERT_OK(brig_spec_set(&s, "runtime-mb", "8", &err), err);
	ru_args args = {.spec = &s};
	ru_run r;
	ru_run_sh(&r, &args,
		  "grep -E ' /(workspace|runtime) ' /proc/mounts; echo ---; "
		  "for d in /workspace /runtime; do dd if=/dev/zero of=$d/fill bs=1M count=64 2>&1 | "
		  "grep -c 'No space left on device'; du -m $d/fill | cut -f1; rm $d/fill; done; "
		  "printf '#!/bin/sh\\necho ran-from-workspace\\n' > /workspace/s.sh && chmod +x /workspace/s.sh && "
		  "/workspace/s.sh; stat -c '%u:%g:%a' /workspace /runtime; echo HOME=$HOME");
	ru_assert_exit(&r, 0);
	const char *out = r.res.exec.out.data;
	const char *sep = strstr(out, "---\n");
	assert_non_null(sep);
	const char *targets[] = {" /workspace ", " /runtime "};
	const char *sizes[] = {"size=16384k", "size=8192k"};
	for (int i = 0; i < 2; i++) {
		const char *line = strstr(out, targets[i]);
		if (!line || line > sep)
			fail_msg("%s is not mounted: %s", targets[i], out);
		const char *bol = line;
		while (bol > out && bol[-1] != '\n')
			bol--;
		cleanup_free char *l = xstrndup(bol, (size_t)(strchr(line, '\n') - bol));
		assert_int_equal(strncmp(l, "tmpfs ", 6), 0);
		assert_non_null(strstr(l, "nosuid"));
		assert_non_null(strstr(l, "nodev"));
		assert_null(strstr(l, "noexec"));
		assert_non_null(strstr(l, sizes[i]));
		/* runc mounts it inside the user namespace; /proc/mounts shows
		 * the host id that is */
		cleanup_free char *uid = xasprintf("uid=%u", 1000 + brig_test_userns_shift());
		if (!strstr(l, uid))
			fail_msg("%s lacks %s", l, uid);
		assert_non_null(strstr(l, "nr_inodes="));
	}
	/* Each fill ran out of space at its size (1 error line, then du). */
	if (!strstr(sep, "---\n1\n16\n1\n8\nran-from-workspace\n1000:1000:700\n1000:1000:700\nHOME=/runtime\n"))
		fail_msg("fills, script, owner and mode not as expected:\n%s", sep);
	ru_run_free(&r);
	brig_spec_clear(&s);
	ru_assert_nothing_left("a direct run");
}

/* ---- network ---- */

static void test_no_network_by_default(void **state)
{
	(void)state;
	ru_run r;
	ru_run_sh(&r, NULL, "cat /proc/net/dev; echo ---; cat /proc/net/route");
	ru_assert_exit(&r, 0);
	const char *out = r.res.exec.out.data;
	const char *sep = strstr(out, "---\n");
	assert_non_null(sep);
	/* /proc/net/dev: two header lines, then one line per interface. */
	int lines = 0, lo = 0;
	for (const char *p = out; p < sep; p = strchr(p, '\n') + 1) {
		lines++;
		if (lines > 2) {
			while (*p == ' ')
				p++;
			if (strncmp(p, "lo:", 3) == 0)
				lo++;
			else
				fail_msg("an interface other than lo: %.*s", (int)(strchr(p, '\n') - p), p);
		}
	}
	assert_int_equal(lo, 1);
	/* /proc/net/route: the header line only. */
	const char *route = sep + 4;
	assert_non_null(strstr(route, "Iface"));
	assert_int_equal(strchr(route, '\n') - route + 1, (long)strlen(route));
	ru_run_free(&r);
	ru_assert_nothing_left("a network check");
}

/* ---- images ---- */

static char *image_id(const char *ref)
{
	cleanup_json json_t *img = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_image_inspect(E, &img, ref, &err), err);
	return xstrdup(json_string_value(json_object_get(img, "Id")));
}

typedef struct bg_run {
	const char *image;
	ru_run r;
} bg_run;

static void *bg_run_main(void *p)
{
	bg_run *b = p;
	brig_spec s;
	ru_spec(&s);
	brig_error *err = NULL;
	if (brig_spec_set(&s, "image", b->image, &err) != 0) {
		b->r.rc = BRIG_EINVAL;
		return NULL;
	}
	ru_args args = {.spec = &s};
	ru_run_sh(&b->r, &args, "sleep 2; echo done");
	brig_spec_clear(&s);
	return NULL;
}

/* Builds FROM base with the test's label and one more (KEY=VALUE): a second
 * image id for the same tag. */
static char *build_variant(const char *base, const char *tag, const char *label)
{
	brig_tar_builder *tb = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_builder_new(&tb, NULL, &err), err);
	cleanup_free char *df = xasprintf("FROM %s\nLABEL %s %s\n", base, ru_label(), label);
	ASSERT_OK(brig_tar_builder_add_file(tb, "Dockerfile", df, strlen(df), 0644, &err), err);
	char *id = NULL;
	int rc = brig_engine_image_build(E, &id, tag, "none", NULL, brig_tar_builder_reader, tb, NULL, NULL, &err);
	brig_tar_builder_free(tb);
	ASSERT_OK(rc, err);
	return id;
}

/* The tag is resolved once: moving it while the run is going does not
 * change what the run uses or reports. */
static void test_image_pinned(void **state)
{
	(void)state;
	brig_error *err = NULL;
	cleanup_free char *a = image_id(brig_test_image());
	cleanup_free char *repo = xasprintf("brigtest-%s-pin", brig_test_run_id());
	cleanup_free char *ref = xasprintf("%s:t", repo);
	ASSERT_OK(brig_engine_image_tag(E, a, repo, "t", &err), err);
	cleanup_free char *ref_b = xasprintf("%s:b", repo);
	cleanup_free char *b = build_variant(a, ref_b, "variant=b");
	assert_string_not_equal(a, b);

	bg_run bg = {.image = ref};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, bg_run_main, &bg), 0);
	/* Wait until the run's container exists, then move the tag. */
	cleanup_json json_t *f = brig_test_filters();
	json_array_append_new(json_object_get(f, "label"), json_string(BRIG_LABEL_KIND "=run"));
	const char *running_image = NULL;
	cleanup_json json_t *list = NULL;
	for (int i = 0; i < 200 && !running_image; i++) {
		json_decref(list);
		list = NULL;
		ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
		running_image = json_string_value(json_object_get(json_array_get(list, 0), "ImageID"));
		if (!running_image)
			ru_sleep_ms(50);
	}
	assert_non_null(running_image);
	ASSERT_OK(brig_engine_image_tag(E, b, repo, "t", &err), err);
	pthread_join(th, NULL);

	ru_assert_exit(&bg.r, 0);
	assert_string_equal(bg.r.res.exec.out.data, "done\n");
	assert_string_equal(bg.r.res.image_id, a);
	assert_string_equal(running_image, a);
	ru_run_free(&bg.r);

	/* The next run resolves the tag again. */
	bg_run next = {.image = ref};
	bg_run_main(&next);
	ru_assert_exit(&next.r, 0);
	assert_string_equal(next.r.res.image_id, b);
	ru_run_free(&next.r);

	ASSERT_OK(brig_engine_image_remove(E, ref, false, &err), err);   /* untags */
	ASSERT_OK(brig_engine_image_remove(E, ref_b, false, &err), err); /* deletes b */
	ru_assert_nothing_left("pinned runs");
}

static void test_image_by_id(void **state)
{
	(void)state;
	cleanup_free char *id = image_id(brig_test_image());
	assert_true(strncmp(id, "sha256:", 7) == 0);
	bg_run b = {.image = id};
	bg_run_main(&b);
	ru_assert_exit(&b.r, 0);
	assert_string_equal(b.r.res.image_id, id);
	ru_run_free(&b.r);
	ru_assert_nothing_left("a run by image id");
}

/* Network none from an image labelled brig.etc-hosts=optional (the test
 * image) skips Docker's network sandbox (Config.NetworkDisabled): still a
 * network namespace of the container's own, holding only lo, up and usable,
 * IPv6 off as in Docker's sandbox, but no /etc/hosts of Docker's. An image
 * without the label gets Docker's sandbox and its /etc/hosts naming
 * localhost. */
static void test_network_sandbox_only_when_needed(void **state)
{
	(void)state;
	static const char probe[] =
		"readlink /proc/self/ns/net; cat /sys/class/net/lo/flags; ls /sys/class/net; "
		"cat /proc/sys/net/ipv6/conf/lo/disable_ipv6; wc -l < /proc/net/if_inet6; "
		"grep -c ' /etc/hosts ' /proc/self/mountinfo; grep -c '^127.0.0.1[[:space:]]*localhost' /etc/hosts; "
		/* the listener's stdin never ends: busybox nc closes a connection
		 * it accepted once its stdin reached EOF, racing the client's bytes */
		"(sleep 120 | nc -l -p 5555 > /workspace/got &); "
		"for i in $(seq 300); do echo hi | nc 127.0.0.1 5555 2>/dev/null && break; sleep 0.1; done; "
		"for i in $(seq 300); do [ -s /workspace/got ] && break; sleep 0.1; done; cat /workspace/got";
	brig_error *err = NULL;
	cleanup_free char *base = image_id(brig_test_image());
	cleanup_free char *plain = xasprintf("brigtest-%s-hosts:t", brig_test_run_id());
	cleanup_free char *plain_id = build_variant(base, plain, BRIG_LABEL_ETC_HOSTS "=\"\"");
	const struct {
		const char *image, *want;
	} cases[] = {{brig_test_image(), "0x9\nlo\n1\n0\n0\n0\nhi\n"}, {plain, "0x9\nlo\n1\n0\n1\n1\nhi\n"}};
	for (size_t i = 0; i < 2; i++) {
		brig_spec s;
		ru_spec(&s);
		ASSERT_OK(brig_spec_set(&s, "image", cases[i].image, &err), err);
		ru_args args = {.spec = &s};
		ru_run r;
		ru_run_sh(&r, &args, probe);
		ru_assert_exit(&r, 0);
		const char *out = r.res.exec.out.data;
		const char *nl = strchr(out, '\n');
		assert_non_null(nl);
		brig_test_assert_own_netns(out);
		if (strcmp(nl + 1, cases[i].want) != 0)
			fail_msg("%s: lo flags, interfaces, IPv6 off and no IPv6 address, /etc/hosts mounts and "
				 "lines, loopback:\n%s\nwanted:\n%s",
				 cases[i].image, nl + 1, cases[i].want);
		ru_run_free(&r);
		brig_spec_clear(&s);
	}
	ASSERT_OK(brig_engine_image_remove(E, plain, false, &err), err);
	ru_assert_nothing_left("runs with and without Docker's network sandbox");
}

static int collect_event(json_t *ev, void *payload)
{
	json_array_append(payload, ev);
	return 0;
}

static void test_missing_image_not_pulled(void **state)
{
	(void)state;
	cleanup_free char *ref = xasprintf("brigtest-%s-missing:nope", brig_test_run_id());
	int64_t since = brig_wall_s() - 1;
	brig_spec s;
	ru_spec(&s);
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(&s, "image", ref, &err), err);
	ru_args args = {.spec = &s};
	ru_run r;
	ru_run_sh(&r, &args, "true");
	brig_spec_clear(&s);
	assert_int_equal(r.rc, BRIG_ENOTFOUND);
	const char *msg = brig_error_message(r.err);
	if (!strstr(msg, ref) || !strstr(msg, "build") || !strstr(msg, "never pulls"))
		fail_msg("the message does not say what is missing and how to build it: %s", msg);
	ru_run_free(&r);
	ru_assert_nothing_left("a missing image");

	/* The daemon saw no pull (of anything) while brig ran. */
	cleanup_json json_t *evs = json_array();
	cleanup_json json_t *filters = json_pack("{s:[s]}", "type", "image");
	ASSERT_OK(brig_engine_events(E, since, brig_wall_s() + 1, filters, 0, collect_event, evs, &err), err);
	size_t i;
	json_t *ev;
	json_array_foreach (evs, i, ev) {
		const char *action = json_string_value(json_object_get(ev, "Action"));
		if (action && strstr(action, "pull"))
			fail_msg("the daemon recorded a pull: %s", json_dumps(ev, 0));
	}
}

/* Images are not covered by brig_test_cleanup: the pin and hosts tests', by name. */
static int teardown(void **state)
{
	const char *refs[] = {"pin:t", "pin:b", "hosts:t"};
	for (size_t i = 0; i < 3; i++) {
		cleanup_free char *ref = xasprintf("brigtest-%s-%s", brig_test_run_id(), refs[i]);
		brig_engine_image_remove(E, ref, false, NULL);
	}
	return ru_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inputs_visible_and_read_only),
		cmocka_unit_test(test_outputs_copied),
		cmocka_unit_test(test_output_100mb),
		cmocka_unit_test(test_outputs_after_failure),
		cmocka_unit_test(test_timeout_ends_everything),
		cmocka_unit_test(test_closed_output_still_timed),
		cmocka_unit_test(test_own_124_not_timed_out),
		cmocka_unit_test(test_init_copy_checked),
		cmocka_unit_test_teardown(test_init_repaired_by_run, init_teardown),
		cmocka_unit_test_teardown(test_init_start_failure_distrusts, init_teardown),
		cmocka_unit_test(test_pid1_with_and_without_brig_init),
		cmocka_unit_test(test_fork_bomb_contained),
		cmocka_unit_test(test_direct_run_tmpfs),
		cmocka_unit_test(test_no_network_by_default),
		cmocka_unit_test(test_image_pinned),
		cmocka_unit_test(test_image_by_id),
		cmocka_unit_test(test_network_sandbox_only_when_needed),
		cmocka_unit_test(test_missing_image_not_pulled),
	};
	return cmocka_run_group_tests(tests, ru_setup, teardown);
}
