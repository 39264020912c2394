/* test_fs_cli.c — `brig fs` as a user runs it: every verb, the --json
 * shapes, a 5 MB binary round trip, writes outside the writable mounts
 * refused with a clear message, a symlink to /etc/passwd read inside the
 * computer (never the host's), a computer without brig-init, and the usage
 * errors. Runs when this build carries brig-init. Every object carries
 * brig.test=<run id> and is removed at exit, failed or not. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "util/util.h"

#define FAIL 125 /* brig itself failed */

static brig_engine *E;
static char TMP[64];
static char NS[64];
static char *ENV[2];
static char *NAME; /* the computer the tests share */

static char *computer(const char *session)
{
	brig_error *err = NULL;
	brig_spec s;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "image", brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(&s, l, &err), err);
	brig_identity id = {.ns = NS, .agent = "agent", .session = session, .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	brig_spec_clear(&s);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	return name;
}

static bool have_init(void)
{
	if (brig_guest__volume_name())
		return true;
	print_message("skipped: this build carries no brig-init\n");
	return false;
}

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "f%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brig-fs-cli-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	ENV[0] = xasprintf("BRIG_STORE=sqlite://%s/store.db", TMP);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	char *rm = xasprintf("rm -rf %s", TMP);
	(void)!system(rm);
	free(rm);
	free(ENV[0]);
	free(NAME);
	return 0;
}

static const char *shared(void)
{
	if (!NAME)
		NAME = computer("fs");
	return NAME;
}

typedef struct out {
	int code;
	char *out, *err;
} out;

static void out_free(out *o)
{
	free(o->out);
	free(o->err);
}

/* brig with args (NULL-terminated, without "brig") and stdin text. */
static out brig_in(const char *stdin_text, const char *const *args)
{
	char *argv[32] = {"brig"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	out o = {0};
	o.code = brig_test_spawn(argv, stdin_text, ENV, &o.out, &o.err);
	return o;
}

/* brig, failing the test unless it exits with want. */
static out expect(int want, const char *stdin_text, const char *const *args)
{
	out o = brig_in(stdin_text, args);
	if (o.code != want) {
		brig_buf b;
		brig_buf_init(&b, 1u << 16);
		for (const char *const *a = args; *a; a++)
			brig_buf_putf(&b, " %s", *a);
		fail_msg("brig%s exited %d, expected %d\nstdout: %s\nstderr: %s", brig_buf_cstr(&b), o.code, want,
			 o.out, o.err);
	}
	return o;
}
#define RUN(want, ...) expect(want, NULL, (const char *[]){__VA_ARGS__, NULL})
#define RUN_IN(want, in, ...) expect(want, in, (const char *[]){__VA_ARGS__, NULL})

static void contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("expected \"%s\" in:\n%s", needle, hay);
}

static void test_verbs(void **state)
{
	(void)state;
	if (!have_init())
		return;
	const char *n = shared();
	out o = RUN_IN(0, "hello\n", "fs", "write", n, "/workspace/a.txt");
	out_free(&o);
	o = RUN(0, "fs", "cat", n, "/workspace/a.txt");
	assert_string_equal(o.out, "hello\n");
	out_free(&o);
	/* relative paths are /workspace's */
	o = RUN(0, "fs", "cat", n, "a.txt");
	assert_string_equal(o.out, "hello\n");
	out_free(&o);

	/* stat: human and JSON; files land as 1000:1000 with --mode */
	o = RUN_IN(0, "#!/bin/sh\n", "fs", "write", "--mode", "0750", n, "/workspace/run.sh");
	out_free(&o);
	o = RUN(0, "fs", "stat", n, "/workspace/run.sh");
	contains(o.out, "type:  file");
	contains(o.out, "mode:  0750 (-rwxr-x---)");
	contains(o.out, "owner: 1000:1000");
	out_free(&o);
	o = RUN(0, "fs", "stat", "--json", n, "/workspace/a.txt");
	json_t *j = json_loads(o.out, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "type")), "file");
	assert_string_equal(json_string_value(json_object_get(j, "path")), "/workspace/a.txt");
	assert_int_equal(json_integer_value(json_object_get(j, "size")), 6);
	assert_int_equal(json_integer_value(json_object_get(j, "mode")), 0644);
	assert_int_equal(json_integer_value(json_object_get(j, "uid")), 1000);
	assert_int_equal(json_integer_value(json_object_get(j, "gid")), 1000);
	assert_true(json_integer_value(json_object_get(j, "mtime_ns")) > 0);
	json_decref(j);
	out_free(&o);

	/* mkdir -p, write -p, mv, ls at depths */
	o = RUN(0, "fs", "mkdir", "-p", n, "/workspace/d/e");
	out_free(&o);
	o = RUN(0, "fs", "mkdir", "-p", n, "/workspace/d/e"); /* exists: fine with -p */
	out_free(&o);
	o = RUN(FAIL, "fs", "mkdir", n, "/workspace/d");
	out_free(&o);
	o = RUN_IN(0, "deep", "fs", "write", "-p", n, "/workspace/p/q/r.txt");
	out_free(&o);
	o = RUN(0, "fs", "mv", n, "/workspace/a.txt", "/workspace/d/e/b.txt");
	out_free(&o);
	o = RUN(0, "fs", "ls", n, "/workspace");
	contains(o.out, " d\n");
	contains(o.out, " run.sh\n");
	assert_null(strstr(o.out, "a.txt"));
	assert_true(o.out[0] == 'd' || o.out[0] == '-');
	out_free(&o);
	o = RUN(0, "fs", "ls", "--json", n, "/workspace/d");
	j = json_loads(o.out, 0, NULL);
	assert_true(json_is_array(j));
	assert_int_equal(json_array_size(j), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "name")), "e");
	assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "type")), "dir");
	json_decref(j);
	out_free(&o);
	o = RUN(0, "fs", "ls", "-r", "--json", n, "/workspace/d");
	j = json_loads(o.out, 0, NULL);
	assert_int_equal(json_array_size(j), 2);
	bool found = false;
	size_t i;
	json_t *it;
	json_array_foreach (j, i, it)
		if (strcmp(json_string_value(json_object_get(it, "name")), "e/b.txt") == 0) {
			found = true;
			assert_int_equal(json_integer_value(json_object_get(it, "size")), 6);
		}
	assert_true(found);
	json_decref(j);
	out_free(&o);
	o = RUN(0, "fs", "ls", "--depth", "1", n, "/workspace/d");
	assert_null(strstr(o.out, "b.txt"));
	out_free(&o);
	/* ls of one file shows that file */
	o = RUN(0, "fs", "ls", n, "/workspace/d/e/b.txt");
	contains(o.out, " b.txt\n");
	out_free(&o);

	/* by session: --gen names the generation without the store */
	o = RUN(0, "fs", "cat", "--ns", NS, "--agent", "agent", "--session", "fs", "--gen", "1",
		"/workspace/d/e/b.txt");
	assert_string_equal(o.out, "hello\n");
	out_free(&o);

	/* cat of several files, in order */
	o = RUN(0, "fs", "cat", n, "/workspace/d/e/b.txt", "/workspace/p/q/r.txt");
	assert_string_equal(o.out, "hello\ndeep");
	out_free(&o);

	/* rm: a directory needs -r, and the message says so */
	o = RUN(FAIL, "fs", "rm", n, "/workspace/d");
	contains(o.err, "rm -r");
	out_free(&o);
	o = RUN(0, "fs", "rm", "-r", n, "/workspace/d", "/workspace/p");
	out_free(&o);
	o = RUN(0, "fs", "rm", n, "/workspace/run.sh");
	out_free(&o);
	o = RUN(0, "fs", "ls", "--json", n, "/workspace");
	j = json_loads(o.out, 0, NULL);
	json_array_foreach (j, i, it) {
		const char *nm = json_string_value(json_object_get(it, "name"));
		assert_true(strcmp(nm, "d") != 0 && strcmp(nm, "p") != 0 && strcmp(nm, "run.sh") != 0);
	}
	json_decref(j);
	out_free(&o);

	/* missing files */
	o = RUN(FAIL, "fs", "cat", n, "/workspace/nothing");
	contains(o.err, "No such file");
	out_free(&o);
	o = RUN(FAIL, "fs", "stat", n, "/workspace/nothing");
	out_free(&o);
}

/* 5 MB of random bytes in through fs write and out through fs cat. */
static void test_binary_round_trip(void **state)
{
	(void)state;
	if (!have_init())
		return;
	const char *n = shared();
	char *cmd = xasprintf("head -c 5242880 /dev/urandom > %s/in && '%s' fs write %s /runtime/blob < %s/in && "
			      "'%s' fs cat %s /runtime/blob > %s/out && cmp %s/in %s/out",
			      TMP, brig_test_brig_bin(), n, TMP, brig_test_brig_bin(), n, TMP, TMP, TMP);
	int rc = system(cmd);
	free(cmd);
	assert_int_equal(rc, 0);
	out o = RUN(0, "fs", "stat", "--json", n, "/runtime/blob");
	json_t *j = json_loads(o.out, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(j, "size")), 5242880);
	json_decref(j);
	out_free(&o);
}

static void test_refused(void **state)
{
	(void)state;
	if (!have_init())
		return;
	const char *n = shared();
	out o = RUN_IN(FAIL, "x", "fs", "write", n, "/etc/evil");
	contains(o.err, "only /workspace and /runtime are writable");
	out_free(&o);
	o = RUN(FAIL, "fs", "mkdir", n, "/usr/evil");
	contains(o.err, "only /workspace and /runtime are writable");
	out_free(&o);
	o = RUN(FAIL, "fs", "rm", n, "/etc/passwd");
	contains(o.err, "only /workspace and /runtime are writable");
	out_free(&o);
	o = RUN(FAIL, "fs", "mv", n, "/etc/passwd", "/etc/passwd2");
	contains(o.err, "only /workspace and /runtime are writable");
	out_free(&o);
	/* a rename across mounts says what to do instead */
	o = RUN_IN(0, "m", "fs", "write", n, "/workspace/m");
	out_free(&o);
	o = RUN(FAIL, "fs", "mv", n, "/workspace/m", "/runtime/m");
	contains(o.err, "different mounts");
	out_free(&o);
	/* nothing was written */
	o = RUN(FAIL, "fs", "stat", n, "/etc/evil");
	out_free(&o);
}

/* A symlink the sandbox made, pointing at /etc/passwd: fs reads the
 * computer's /etc/passwd (its own business), never the host's. */
static void test_symlink(void **state)
{
	(void)state;
	if (!have_init())
		return;
	const char *n = shared();
	out o = RUN(0, "exec", n, "--", "sh", "-c",
		    "ln -sf /etc/passwd /workspace/pw && ln -sf ../../../../../../etc/passwd /workspace/up && "
		    "echo guest-only > /workspace/mark");
	out_free(&o);
	out inside = RUN(0, "exec", n, "--", "cat", "/etc/passwd");
	o = RUN(0, "fs", "cat", n, "/workspace/pw");
	assert_string_equal(o.out, inside.out);
	out_free(&o);
	o = RUN(0, "fs", "cat", n, "/workspace/up");
	assert_string_equal(o.out, inside.out);
	out_free(&o);
	out_free(&inside);
	/* stat and ls show the link itself */
	o = RUN(0, "fs", "stat", "--json", n, "/workspace/pw");
	json_t *j = json_loads(o.out, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "type")), "symlink");
	assert_string_equal(json_string_value(json_object_get(j, "link")), "/etc/passwd");
	json_decref(j);
	out_free(&o);
	o = RUN(0, "fs", "ls", n, "/workspace/pw");
	contains(o.out, "pw -> /etc/passwd");
	assert_int_equal(o.out[0], 'l');
	out_free(&o);
	/* a write never goes through the link: the link is replaced by the
	 * new file, /etc/passwd stays as it was */
	o = RUN_IN(0, "x\n", "fs", "write", n, "/workspace/pw");
	out_free(&o);
	o = RUN(0, "fs", "stat", "--json", n, "/workspace/pw");
	j = json_loads(o.out, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "type")), "file");
	json_decref(j);
	out_free(&o);
	o = RUN(0, "exec", n, "--", "cat", "/etc/passwd");
	assert_int_equal(strncmp(o.out, "root:", 5), 0);
	out_free(&o);

	/* a FIFO the sandbox made is refused at once, never waited on; so is
	 * a directory */
	o = RUN(0, "exec", n, "--", "mkfifo", "/workspace/ff");
	out_free(&o);
	int64_t t0 = brig_now_ms();
	o = RUN(FAIL, "fs", "cat", n, "/workspace/ff");
	assert_true(brig_now_ms() - t0 < 30000);
	out_free(&o);
	o = RUN(FAIL, "fs", "cat", n, "/workspace");
	out_free(&o);
	o = RUN(0, "fs", "rm", n, "/workspace/ff");
	out_free(&o);
}

/* sh -c cmd in TMP, with $B the brig binary and $N the computer; returns
 * its exit status. */
static int sh(const char *n, const char *cmd)
{
	char *full = xasprintf("cd %s && B='%s' N='%s' BRIG_STORE=sqlite://%s/store.db sh -c '%s'", TMP,
			       brig_test_brig_bin(), n, TMP, cmd);
	int rc = system(full);
	free(full);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void test_cp(void **state)
{
	(void)state;
	if (!have_init())
		return;
	const char *n = shared();
	/* a host tree in, under a new name, owned by 1000:1000 */
	assert_int_equal(sh(n, "rm -rf src && mkdir -p src/sub && echo one > src/sub/a && echo two > src/b && "
			       "ln -s sub/a src/rel && $B cp src $N:/workspace/tree"),
			 0);
	out o = RUN(0, "fs", "ls", "-r", "--json", n, "/workspace/tree");
	json_t *j = json_loads(o.out, 0, NULL);
	assert_int_equal(json_array_size(j), 4);
	size_t i;
	json_t *it;
	json_array_foreach (j, i, it) {
		assert_int_equal(json_integer_value(json_object_get(it, "uid")), 1000);
		assert_int_equal(json_integer_value(json_object_get(it, "gid")), 1000);
	}
	json_decref(j);
	out_free(&o);
	o = RUN(0, "fs", "cat", n, "/workspace/tree/rel");
	assert_string_equal(o.out, "one\n");
	out_free(&o);
	/* a file into an existing directory keeps its name */
	assert_int_equal(sh(n, "$B cp src/b $N:/workspace/"), 0);
	o = RUN(0, "fs", "cat", n, "/workspace/b");
	assert_string_equal(o.out, "two\n");
	out_free(&o);
	/* and out again: a new directory, identical */
	assert_int_equal(sh(n, "rm -rf back && $B cp $N:/workspace/tree back && diff -r src back && "
			       "[ \"$(readlink back/rel)\" = sub/a ]"),
			 0);
	/* a file into an existing host directory, relative container path */
	assert_int_equal(sh(n, "rm -rf into && mkdir into && $B cp $N:b into && [ \"$(cat into/b)\" = two ]"), 0);
	/* over an existing file: replaced */
	assert_int_equal(sh(n, "echo old > f && $B cp $N:/workspace/b f && [ \"$(cat f)\" = two ]"), 0);
	/* an existing directory is not merged into, and is left as it was */
	assert_int_equal(sh(n, "rm -rf keep && mkdir -p keep/tree && echo mine > keep/tree/m && "
			       "$B cp $N:/workspace/tree keep 2>err; [ $? = 125 ] && grep -q \"does not merge\" err && "
			       "[ \"$(ls -A keep/tree)\" = m ] && [ \"$(ls -A keep)\" = tree ]"),
			 0);
	/* tar streams both ways */
	assert_int_equal(sh(n, "$B cp $N:/workspace/tree - > t.tar && tar -tf t.tar | grep -qx tree/sub/a"), 0);
	assert_int_equal(sh(n, "tar -cf - -C src . | $B cp - $N:/runtime"), 0);
	o = RUN(0, "fs", "stat", "--json", n, "/runtime/sub/a");
	j = json_loads(o.out, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(j, "uid")), 1000);
	json_decref(j);
	out_free(&o);
	/* 5 MB both ways, identical */
	assert_int_equal(sh(n, "head -c 5242880 /dev/urandom > big && $B cp big $N:/workspace/big && "
			       "rm -f big2 && $B cp $N:/workspace/big big2 && cmp big big2"),
			 0);
	/* outside the writable mounts */
	assert_int_equal(sh(n, "$B cp src/b $N:/etc/ 2>err; [ $? = 125 ] && "
			       "grep -q \"only /workspace and /runtime are writable\" err"),
			 0);
	/* a missing directory in the computer; a missing host file */
	assert_int_equal(
		sh(n, "$B cp src/b $N:/workspace/no/such 2>err; [ $? = 125 ] && grep -q \"no such directory\" err"), 0);
	assert_int_equal(sh(n, "$B cp nothing-here $N:/workspace/ 2>/dev/null; [ $? = 125 ]"), 0);
	assert_int_equal(sh(n, "$B cp $N:/workspace/nothing-here x 2>/dev/null; [ $? = 125 ] && [ ! -e x ]"), 0);
	/* a directory onto a file */
	assert_int_equal(sh(n, "$B cp src $N:/workspace/b 2>err; [ $? = 125 ] && grep -q \"onto file\" err"), 0);
	/* a garbage tar on stdin */
	assert_int_equal(sh(n, "echo not-a-tar | $B cp - $N:/workspace 2>/dev/null; [ $? = 125 ]"), 0);
}

/* What the sandbox can plant — a symlink out (absolute or by ".."), a
 * FIFO, a symlink as the thing copied — refuses the copy, and the host
 * destination is exactly as it was: no file, no staging directory. */
static void test_cp_unsafe(void **state)
{
	(void)state;
	if (!have_init())
		return;
	const char *n = shared();
	out o = RUN(0, "exec", n, "--", "sh", "-c",
		    "cd /workspace && mkdir -p u1 u2/a/b u3 && echo ok > u1/ok && ln -s /etc/passwd u1/pw && "
		    "echo ok > u2/ok && ln -s ../../../../../etc u2/a/b/up && echo ok > u3/ok && mkfifo u3/fifo && "
		    "ln -s /etc/passwd top && ln -s ../../../etc/shadow top2 && ln -s u1/ok top3");
	out_free(&o);
	const char *srcs[] = {"/workspace/u1",  "/workspace/u2",   "/workspace/u3",
			      "/workspace/top", "/workspace/top2", "/workspace/top3"};
	assert_int_equal(sh(n, "rm -rf dst && mkdir dst && echo mine > dst/m && find dst | sort > before"), 0);
	for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
		char *cmd =
			xasprintf("$B cp $N:%s dst 2>err; [ $? = 125 ] || exit 1; "
				  "$B cp $N:%s dst/new 2>>err; [ $? = 125 ] || exit 2; "
				  "$B cp $N:%s - > stream 2>>err; [ $? = 125 ] || exit 3; [ ! -s stream ] || exit 4; "
				  "find dst | sort > after; cmp before after || exit 5; "
				  "[ \"$(cat dst/m)\" = mine ] || exit 6; ls -A | grep -q brig-cp && exit 7; "
				  "grep -Eq \"tar entry|symlink in the computer\" err || exit 8",
				  srcs[k], srcs[k], srcs[k]);
		int rc = sh(n, cmd);
		free(cmd);
		if (rc != 0)
			fail_msg("cp of %s: step %d failed", srcs[k], rc);
	}
	/* the host's own files were never read into the copy either */
	assert_int_equal(sh(n, "! grep -rq root: dst"), 0);
}

static void test_no_init(void **state)
{
	(void)state;
	setenv("BRIG_GUEST", "0", 1);
	cleanup_free char *old = computer("old");
	unsetenv("BRIG_GUEST");
	/* brig fs and brig ps say it in one message: what it lacks, how to get it */
	out o = RUN(FAIL, "fs", "ls", old, "/workspace");
	contains(o.err, "has no brig-init");
	contains(o.err, "brig recover its session");
	contains(o.err, "brig cp");
	out fs = o;
	o = RUN(FAIL, "ps", old);
	assert_string_equal(o.err, fs.err);
	out_free(&fs);
	out_free(&o);
	if (!brig_guest__volume_name())
		return;
	/* a stopped computer: brig-init is not running */
	cleanup_free char *stopped = computer("stopped");
	o = RUN(0, "stop", stopped);
	out_free(&o);
	o = RUN(FAIL, "fs", "ls", stopped, "/workspace");
	contains(o.err, "not running");
	out_free(&o);
}

static void test_usage(void **state)
{
	(void)state;
	out o = RUN(FAIL, "fs");
	contains(o.err, "a command is required");
	out_free(&o);
	o = RUN(0, "fs", "--help");
	contains(o.out, "Usage: brig fs");
	out_free(&o);
	o = RUN(FAIL, "fs", "chmod", "x", "/workspace");
	contains(o.err, "unknown command chmod");
	out_free(&o);
	o = RUN(FAIL, "fs", "ls");
	contains(o.err, "NAME is required");
	out_free(&o);
	o = RUN(FAIL, "fs", "ls", "x");
	contains(o.err, "exactly one PATH");
	out_free(&o);
	o = RUN(FAIL, "fs", "cat", "x");
	contains(o.err, "PATH is required");
	out_free(&o);
	o = RUN(FAIL, "fs", "mv", "x", "/a");
	contains(o.err, "SRC and DST");
	out_free(&o);
	o = RUN(FAIL, "fs", "cat", "--json", "x", "/a");
	contains(o.err, "--json applies to ls and stat");
	out_free(&o);
	o = RUN(FAIL, "fs", "cat", "-r", "x", "/a");
	contains(o.err, "-r applies");
	out_free(&o);
	o = RUN(FAIL, "fs", "cat", "--depth", "2", "x", "/a");
	contains(o.err, "--depth applies");
	out_free(&o);
	o = RUN(FAIL, "fs", "ls", "--depth", "65", "x", "/a");
	contains(o.err, "--depth");
	out_free(&o);
	o = RUN(FAIL, "fs", "rm", "-p", "x", "/a");
	contains(o.err, "-p applies");
	out_free(&o);
	o = RUN(FAIL, "fs", "rm", "--mode", "644", "x", "/a");
	contains(o.err, "--mode applies");
	out_free(&o);
	o = RUN(FAIL, "fs", "write", "--mode", "9", "x", "/a");
	contains(o.err, "not an octal mode");
	out_free(&o);
	o = RUN(FAIL, "fs", "ls", "--bogus", "x", "/a");
	out_free(&o);
	o = RUN(FAIL, "fs", "ls", "--ns", "a", "/a");
	contains(o.err, "go together");
	out_free(&o);
	o = RUN(FAIL, "fs", "ls", "brig-fs-no-such-computer", "/workspace");
	contains(o.err, "no computer named brig-fs-no-such-computer");
	out_free(&o);
	o = RUN(0, "cp", "--help");
	contains(o.out, "Usage: brig cp");
	out_free(&o);
	o = RUN(FAIL, "cp", "a");
	contains(o.err, "SRC and DEST are required");
	out_free(&o);
	o = RUN(FAIL, "cp", "a", "b");
	contains(o.err, "one of SRC and DEST must be NAME:PATH");
	out_free(&o);
	o = RUN(FAIL, "cp", "x:/a", "y:/b");
	contains(o.err, "between computers");
	out_free(&o);
	o = RUN(FAIL, "cp", "--bogus", "x:/a", "b");
	out_free(&o);
	o = RUN(FAIL, "cp", "brig-fs-no-such-computer:/a", "b");
	contains(o.err, "no computer named brig-fs-no-such-computer");
	out_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_verbs),
		cmocka_unit_test(test_binary_round_trip),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_cp),
		cmocka_unit_test(test_cp_unsafe),
		cmocka_unit_test(test_no_init),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
