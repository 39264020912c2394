/* test_hardening.c — the hardening brig adds on top of Docker's defaults,
 * as a user sees it: brig's own seccomp profile (io_uring refused, ordinary
 * tools fine), container logs that cannot fill the disk, tmpfs charged to
 * memory (full volumes and inode floods end in ENOSPC, not an OOM kill),
 * mount flags, and ulimits. Every object carries brig.test=<run id>. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "util/util.h"

#define PROBE "/usr/local/bin/brig-probe"
#define SANDBOX_IMAGE BRIG_DEFAULT_IMAGE /* brig-sandbox:local, built by another layer */

static brig_engine *E;
static char NS[64];

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "h%s", brig_test_run_id());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	return 0;
}

static void test_spec(brig_spec *s, const char *image)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", image ? image : brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(s, l, &err), err);
}

static brig_computer *create(const char *session, const brig_spec *s)
{
	brig_identity id = {.ns = NS, .agent = "hardening", .session = session, .generation = 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, s, &err), err);
	return c;
}

static int sh(const char *ref, const char *script, int64_t timeout_ms, brig_exec_result *r)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = timeout_ms};
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, ref, &o, r, &err), err);
	return r->exit_code;
}

/* Runs a script that must exit 0; returns its stdout (caller frees). */
static char *sh_ok(const char *ref, const char *script)
{
	brig_exec_result r;
	int code = sh(ref, script, 120000, &r);
	if (code != 0)
		fail_msg("`%s` exited %d: %s %s", script, code, r.out.data, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

/* oom_kill counter of the container's memory cgroup, read from inside
 * (cgroup v1 mounts the container's own cgroup at /sys/fs/cgroup/memory). */
static long oom_kills(const char *ref)
{
	cleanup_free char *out =
		sh_ok(ref, "sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null; true");
	return *out ? atol(out) : -1;
}

/* ---- 1. brig's own seccomp profile ---- */

static void test_seccomp_profile(void **state)
{
	(void)state;
	brig_spec s;
	test_spec(&s, NULL);
	brig_computer *c = create("seccomp", &s);
	brig_spec_clear(&s);

	/* What Docker recorded: brig's profile, not the daemon's. */
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	json_t *so = json_object_get(json_object_get(j, "HostConfig"), "SecurityOpt");
	assert_int_equal(json_array_size(so), 2);
	const char *prof = json_string_value(json_array_get(so, 1));
	assert_non_null(prof);
	assert_true(strncmp(prof, "seccomp=", 8) == 0);
	assert_string_equal(prof + 8, brig_spec_seccomp_default());
	if (strstr(prof, "io_uring") || strstr(prof, "\"keyctl\"") || strstr(prof, "\"bpf\""))
		fail_msg("brig's profile allows io_uring, keyctl or bpf");

	/* io_uring_setup fails with EPERM inside (the daemon's default lets it
	 * through to the kernel: EFAULT for the NULL params). */
	cleanup_free char *line = sh_ok(c->name, PROBE " | grep '^io_uring_setup'");
	if (!strstr(line, "\tEPERM\tPASS"))
		fail_msg("io_uring_setup: %s", line);

	/* Ordinary tools still work: the shell, pipes, busybox utilities,
	 * files in the workspace, a background job, threads via clone. */
	cleanup_free char *out = sh_ok(c->name, "echo hi | sed s/h/H/ | tr a-z A-Z; seq 1 3 | sort -r | head -n 1;"
						"printf 'a\\nb\\n' > f && wc -l < f && rm f; (sleep 0.1 &) ; wait;"
						"mkfifo p && rm p && echo fifo; date +%Y >/dev/null && echo date;"
						"awk 'BEGIN{print 6*7}'");
	assert_string_equal(out, "HI\n3\n2\nfifo\ndate\n42\n");

	brig_computer_free(c);
	brig_test_cleanup(E);
}

static void test_seccomp_runtime_image(void **state)
{
	(void)state;
	cleanup_json json_t *img = NULL;
	if (brig_engine_image_inspect(E, &img, SANDBOX_IMAGE, NULL) != 0) {
		print_message("SKIP: %s is not built here (brig image build); only the test image was checked\n",
			      SANDBOX_IMAGE);
		skip();
	}
	brig_spec s;
	test_spec(&s, SANDBOX_IMAGE);
	brig_computer *c = create("seccomp-rt", &s);
	brig_spec_clear(&s);

	cleanup_free char *git = sh_ok(c->name, "cd /workspace && git init -q r && cd r && git config user.email a@b &&"
						  " git config user.name a && echo x > f && git add f &&"
						  " git commit -qm one && git log --oneline | wc -l");
	assert_string_equal(git, "1\n");
	cleanup_free char *py = sh_ok(c->name, "python3 -c 'import subprocess; print(subprocess.run([\"true\"]).returncode)'");
	assert_string_equal(py, "0\n");
	cleanup_free char *thr = sh_ok(c->name, "python3 -c 'import threading, os; t = threading.Thread(target=print, "
						  "args=(\"thread\",)); t.start(); t.join(); print(os.cpu_count() > 0)'");
	assert_string_equal(thr, "thread\nTrue\n");
	/* A compiler and node only when the image has them. */
	cleanup_free char *cc = sh_ok(c->name, "for c in cc gcc clang; do command -v $c && break; done; true");
	if (*cc) {
		cleanup_free char *built = sh_ok(
			c->name, "cd /workspace && printf '#include <stdio.h>\\nint main(void){puts(\"compiled\");}\\n' > t.c"
				 " && cc -o t t.c && ./t");
		assert_string_equal(built, "compiled\n");
	} else {
		print_message("no C compiler in %s: compile check skipped\n", SANDBOX_IMAGE);
	}
	cleanup_free char *node = sh_ok(c->name, "command -v node; true");
	if (*node) {
		cleanup_free char *n = sh_ok(c->name, "node -e 'require(\"child_process\").execSync(\"true\"); console.log(\"node\")'");
		assert_string_equal(n, "node\n");
	} else {
		print_message("no node in %s: node check skipped\n", SANDBOX_IMAGE);
	}
	brig_computer_free(c);
	brig_test_cleanup(E);
}

/* ---- 2. container logs cannot fill the disk ---- */

static long long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* The json-file log and its rotations: sizes in bytes, -1 when absent. */
static void log_sizes(const char *log_path, long long *cur, long long *rot1, long long *rot2)
{
	char p[4200];
	*cur = file_size(log_path);
	snprintf(p, sizeof p, "%s.1", log_path);
	*rot1 = file_size(p);
	snprintf(p, sizeof p, "%s.2", log_path);
	*rot2 = file_size(p);
}

static void test_log_cannot_fill_disk(void **state)
{
	(void)state;
	brig_spec s;
	test_spec(&s, NULL);
	brig_computer *c = create("logs", &s);
	brig_spec_clear(&s);
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	json_t *lc = json_object_get(json_object_get(j, "HostConfig"), "LogConfig");
	assert_string_equal(json_string_value(json_object_get(lc, "Type")), "json-file");
	assert_string_equal(json_string_value(json_object_get(json_object_get(lc, "Config"), "max-size")), "1m");
	const char *log_path = json_string_value(json_object_get(j, "LogPath"));
	if (!log_path || !*log_path || access(log_path, F_OK) != 0) {
		print_message("SKIP: the log file %s is not on this machine (remote daemon?)\n", log_path ? log_path : "?");
		brig_computer_free(c);
		skip();
	}

	/* Exec output goes back to brig, never to the container's log. */
	brig_exec_result r;
	sh(c->name, "yes | head -c 5000000 | wc -c", 60000, &r);
	assert_string_equal(r.out.data, "5000000\n");
	brig_exec_result_clear(&r);
	long long cur, rot1, rot2;
	log_sizes(log_path, &cur, &rot1, &rot2);
	print_message("log after a 5 MB exec: %lld bytes\n", cur);
	assert_true(cur < 4096 && rot1 < 0);

	/* The log is PID 1's output. PID 1 (docker-init) runs as the same uid
	 * as every exec, so a command can write to its stdout directly: 3 s of
	 * `yes` there is the flood (222 MB uncapped on our machines). */
	cleanup_free char *who = sh_ok(c->name, "stat -c %u /proc/1; ls -l /proc/1/fd/1 | sed 's/.*-> //'");
	print_message("PID 1 uid and stdout: %s", who);
	int64_t t0 = brig_now_ms();
	int code = sh(c->name, "timeout 3 yes > /proc/1/fd/1; echo flooded", 60000, &r);
	int64_t ms = brig_now_ms() - t0;
	if (!strstr(r.out.data, "flooded"))
		fail_msg("the flood did not run: exit %d, %s %s", code, r.out.data, r.err.data);
	brig_exec_result_clear(&r);
	sleep(1); /* the daemon copies the pipe to the file asynchronously */
	log_sizes(log_path, &cur, &rot1, &rot2);
	long long total = (cur > 0 ? cur : 0) + (rot1 > 0 ? rot1 : 0) + (rot2 > 0 ? rot2 : 0);
	print_message("after %lld ms of flood: %s %lld bytes, .1 %lld, .2 %lld (total %lld)\n", (long long)ms,
		      log_path, cur, rot1, rot2, total);
	/* With brig-init as PID 1 (not dumpable) its stdout cannot even be
	 * opened by the sandboxed user: the log stays empty. */
	if (json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_INIT)) {
		if (total > 4096)
			fail_msg("brig-init is PID 1, yet a command wrote %lld bytes to its log", total);
		brig_computer_free(c);
		brig_test_cleanup(E);
		return;
	}
	/* The flood reached the log (so the cap is what held it)… */
	if (total < 512 * 1024)
		fail_msg("the flood wrote only %lld bytes to the log: it did not reach PID 1's stdout", total);
	/* …and the log stayed at its 1 MiB cap, plus at most one rotated file. */
	if (cur > 1100 * 1024 || rot1 > 1100 * 1024 || rot2 >= 0)
		fail_msg("log files exceed the cap: %lld, %lld, %lld bytes", cur, rot1, rot2);
	brig_computer_free(c);
	brig_test_cleanup(E);
}

/* ---- 3. tmpfs charged to memory ---- */

static void test_tmpfs_validation_names_fields(void **state)
{
	(void)state;
	brig_spec s;
	test_spec(&s, NULL);
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(&s, "memory-mb", "1024", &err), err);
	ASSERT_OK(brig_spec_set(&s, "workspace-mb", "700", &err), err);
	int rc = brig_spec_validate(&s, NULL, &err);
	assert_int_equal(rc, BRIG_EINVAL);
	const char *m = brig_error_message(err);
	print_message("refused: %s\n", m);
	const char *const fields[] = {"workspace-mb (700)", "runtime-mb (256)", "shm-mb (64)", "memory-mb (1024)",
				      "memory-mb to 1276"};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (!strstr(m, fields[i]))
			fail_msg("the message does not name %s: %s", fields[i], m);
	brig_error_free(err);
	err = NULL;
	/* Nothing is created from it either. */
	brig_identity id = {.ns = NS, .agent = "hardening", .session = "too-much-tmpfs", .generation = 1};
	brig_computer *c = NULL;
	assert_int_equal(brig_computer_create(E, &c, &id, &s, &err), BRIG_EINVAL);
	assert_null(c);
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_tmpfs_full_is_not_oom(void **state)
{
	(void)state;
	brig_spec s;
	test_spec(&s, NULL);
	brig_computer *c = create("tmpfs", &s);
	brig_spec_clear(&s);
	const char *n = c->name;

	/* nosuid,nodev on the three tmpfs mounts; /workspace stays executable. */
	cleanup_free char *mounts = sh_ok(n, "grep -E ' /(workspace|runtime|dev/shm) ' /proc/mounts");
	const char *targets[] = {" /workspace ", " /runtime ", " /dev/shm "};
	for (int i = 0; i < 3; i++) {
		const char *l = strstr(mounts, targets[i]);
		if (!l)
			fail_msg("no mount at%s: %s", targets[i], mounts);
		const char *eol = strchr(l, '\n');
		cleanup_free char *line = xstrndup(l, eol ? (size_t)(eol - l) : strlen(l));
		if (!strstr(line, "nosuid") || !strstr(line, "nodev"))
			fail_msg("mount%slacks nosuid,nodev: %s", targets[i], line);
		if (i == 0 && strstr(line, "noexec"))
			fail_msg("/workspace is noexec: agents could not run what they build: %s", line);
	}
	cleanup_free char *ran = sh_ok(n, "printf '#!/bin/sh\\necho ran-from-workspace\\n' > /workspace/s.sh &&"
					  " chmod +x /workspace/s.sh && /workspace/s.sh && rm /workspace/s.sh");
	assert_string_equal(ran, "ran-from-workspace\n");

	/* Fill all three: 512 + 256 + 64 MB charged to the 2048 MB limit. */
	brig_exec_result r;
	sh(n,
	   "for d in /workspace /runtime /dev/shm; do dd if=/dev/zero of=$d/fill bs=1M count=1024 2>&1 |"
	   " grep -c 'No space left on device'; done; du -sm /workspace/fill /runtime/fill /dev/shm/fill",
	   120000, &r);
	print_message("fill: %s", r.out.data);
	if (strncmp(r.out.data, "1\n1\n1\n", 6) != 0)
		fail_msg("each fill should end in ENOSPC: %s %s", r.out.data, r.err.data);
	brig_exec_result_clear(&r);
	/* The next commands still run, and nothing was OOM-killed. */
	cleanup_free char *ok = sh_ok(n, "echo ok");
	assert_string_equal(ok, "ok\n");
	cleanup_free char *more = sh_ok(n, "seq 1 100000 | sort -n | tail -n 1");
	assert_string_equal(more, "100000\n");
	assert_int_equal(oom_kills(n), 0);
	free(sh_ok(n, "rm -f /workspace/fill /runtime/fill /dev/shm/fill"));

	/* An inode flood ends in ENOSPC, not an OOM kill. */
	int64_t t0 = brig_now_ms();
	int code = sh(n, "for i in $(seq 1 100000); do : > /workspace/f$i; done", 300000, &r);
	print_message("inode flood: exit %d after %lld ms\n", code, (long long)(brig_now_ms() - t0));
	if (!strstr(r.err.data, "No space left on device"))
		fail_msg("the inode flood did not end in ENOSPC: exit %d, %.300s", code, r.err.data);
	assert_int_not_equal(code, 137);
	brig_exec_result_clear(&r);
	cleanup_free char *count = sh_ok(n, "ls /workspace | wc -l");
	long files = atol(count);
	print_message("%ld files in /workspace (workspace-inodes 65536)\n", files);
	assert_true(files > 60000 && files <= 65536);
	cleanup_free char *ok2 = sh_ok(n, "echo ok");
	assert_string_equal(ok2, "ok\n");
	assert_int_equal(oom_kills(n), 0);

	brig_computer_free(c);
	brig_test_cleanup(E);
}

/* ---- 4. ulimits ---- */

static void test_ulimits(void **state)
{
	(void)state;
	brig_spec s;
	test_spec(&s, NULL);
	brig_computer *c = create("ulimits", &s);
	brig_spec_clear(&s);
	cleanup_free char *out = sh_ok(c->name, "ulimit -n; ulimit -c; ulimit -Hn; ulimit -Hc");
	assert_string_equal(out, "1024\n0\n1024\n0\n");
	/* The hard limit holds: raising it is refused. */
	brig_exec_result r;
	int code = sh(c->name, "ulimit -n 4096", 30000, &r);
	assert_int_not_equal(code, 0);
	brig_exec_result_clear(&r);
	brig_computer_free(c);
	brig_test_cleanup(E);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seccomp_profile),
		cmocka_unit_test(test_seccomp_runtime_image),
		cmocka_unit_test(test_log_cannot_fill_disk),
		cmocka_unit_test(test_tmpfs_validation_names_fields),
		cmocka_unit_test(test_tmpfs_full_is_not_oom),
		cmocka_unit_test(test_ulimits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
