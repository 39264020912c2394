/* test_session_cli.c — the session commands as a user runs them: brig up,
 * exec/pause/resume by session identity, checkpoint, checkpoints,
 * checkpoint rm and recover, against the real dockerd and a SQLite store
 * given through BRIG_STORE (and --store). */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/session.h"
#include "brig/store.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];
static char TMP[64];
static char *STORE;
static char *ENV[5];
static char LABEL[96];

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "l%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brig-session-cli-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	STORE = xasprintf("%s/store.db", TMP);
	ENV[0] = xasprintf("BRIG_STORE=%s", STORE);
	ENV[1] = xasprintf("BRIG_CHECKPOINT_DIR=%s/ck", TMP);
	ENV[2] = xasprintf("BRIG_IMAGE=%s", brig_test_image());
	/* the session flow through a timeout that stops the computer: the plain
	 * exec path (computers made before brig-init) */
	ENV[3] = xstrdup("BRIG_GUEST=0");
	ENV[4] = NULL;
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	cleanup_free char *cmd = xasprintf("rm -rf '%s'", TMP);
	if (system(cmd) != 0)
		print_error("could not remove %s\n", TMP);
	for (int i = 0; ENV[i]; i++)
		free(ENV[i]);
	free(STORE);
	return 0;
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

/* Runs brig with argv (NULL-terminated, without "brig"). */
static run_out brig(const char *const *args)
{
	char *argv[32] = {"brig"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	run_out r = {0};
	r.code = brig_test_spawn(argv, NULL, ENV, &r.out, &r.err);
	return r;
}

/* Runs brig and fails the test unless it exits with want. */
static run_out brig_expect(int want, const char *const *args)
{
	run_out r = brig(args);
	if (r.code != want) {
		brig_buf b;
		brig_buf_init(&b, 1u << 16);
		for (const char *const *a = args; *a; a++)
			brig_buf_putf(&b, " %s", *a);
		fail_msg("brig%s exited %d, expected %d\nstdout: %s\nstderr: %s", brig_buf_cstr(&b), r.code, want,
			 r.out, r.err);
	}
	return r;
}

static char *chomp(char *s)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == '\n')
		s[--n] = '\0';
	return s;
}

static brig_store_session *store_session(const char *session)
{
	brig_store *s = NULL;
	brig_store_session *rec = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, STORE, &err), err);
	ASSERT_OK(brig_store_session_get(s, &rec, NS, "agent", session, &err), err);
	brig_store_close(s);
	return rec;
}

static char *gen_name(const char *session, uint32_t gen)
{
	brig_identity id = {NS, "agent", session, gen};
	char name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	return xstrdup(name);
}

static void test_session_commands(void **state)
{
	(void)state;
	const char *S = "cli";
	cleanup_free char *g1 = gen_name(S, 1);
	cleanup_free char *g2 = gen_name(S, 2);
#define ID "--ns", NS, "--agent", "agent", "--session", S

	/* up creates generation 1, and adopts it the second time (without
	 * spec flags: the recorded spec is used). */
	run_out r = brig_expect(0, (const char *[]){"up", ID, "--label", LABEL, NULL});
	assert_string_equal(chomp(r.out), g1);
	run_free(&r);
	r = brig_expect(0, (const char *[]){"up", ID, NULL});
	assert_string_equal(chomp(r.out), g1);
	assert_non_null(strstr(r.err, "adopted generation 1"));
	run_free(&r);

	r = brig_expect(0, (const char *[]){"exec", ID, "--", "sh", "-c",
					    "echo v1 > /workspace/f; ln -s f /workspace/l; chmod 0700 /workspace/f",
					    NULL});
	run_free(&r);

	/* checkpoint by identity (--json) and by name (id and digest). */
	r = brig_expect(0, (const char *[]){"checkpoint", ID, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	json_int_t id1 = json_integer_value(json_object_get(j, "id"));
	assert_true(id1 > 0);
	assert_int_equal(strlen(json_string_value(json_object_get(j, "digest"))), 64);
	assert_int_equal(json_integer_value(json_object_get(j, "generation")), 1);
	json_decref(j);
	run_free(&r);
	r = brig_expect(0, (const char *[]){"exec", g1, "--", "sh", "-c", "echo v2 > /workspace/g", NULL});
	run_free(&r);
	r = brig_expect(0, (const char *[]){"checkpoint", g1, NULL});
	long long id2 = 0;
	char digest[80] = "";
	assert_int_equal(sscanf(r.out, "%lld %79s", &id2, digest), 2);
	assert_true(id2 > id1);
	assert_int_equal(strlen(digest), 64);
	run_free(&r);

	r = brig_expect(0, (const char *[]){"checkpoints", ID, "--json", NULL});
	j = json_loads(r.out, 0, NULL);
	assert_int_equal(json_array_size(j), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 0), "id")), id2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "digest")), digest);
	json_decref(j);
	run_free(&r);
	r = brig_expect(0, (const char *[]){"checkpoints", ID, NULL});
	assert_non_null(strstr(r.out, "ID"));
	run_free(&r);

	/* The newest goes. */
	char idbuf[32];
	snprintf(idbuf, sizeof idbuf, "%lld", id2);
	r = brig_expect(0, (const char *[]){"checkpoint", "rm", idbuf, NULL});
	assert_string_equal(chomp(r.out), idbuf);
	run_free(&r);
	r = brig_expect(125, (const char *[]){"checkpoint", "rm", idbuf, NULL});
	run_free(&r);

	/* pause and resume by identity. */
	r = brig_expect(0, (const char *[]){"pause", ID, NULL});
	assert_string_equal(chomp(r.out), g1);
	run_free(&r);
	r = brig_expect(125, (const char *[]){"exec", ID, "--", "true", NULL});
	assert_non_null(strstr(r.err, "paused"));
	run_free(&r);
	r = brig_expect(0, (const char *[]){"resume", ID, NULL});
	run_free(&r);

	/* A timeout stops the computer and fails the session in the store,
	 * after a checkpoint of what it had (g, written since checkpoint 1). */
	r = brig_expect(124, (const char *[]){"exec", ID, "--timeout", "1", "--", "sleep", "60", NULL});
	assert_non_null(strstr(r.err, "brig recover --ns"));
	long long id3 = 0;
	const char *after = strstr(r.err, "after checkpoint ");
	assert_non_null(after);
	assert_int_equal(sscanf(after, "after checkpoint %lld", &id3), 1);
	assert_true(id3 > id2);
	run_free(&r);
	brig_store_session *rec = store_session(S);
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	brig_store_session_free(rec);
	r = brig_expect(125, (const char *[]){"up", ID, NULL});
	assert_non_null(strstr(r.err, "brig recover"));
	run_free(&r);

	r = brig_expect(0, (const char *[]){"recover", ID, NULL});
	assert_string_equal(chomp(r.out), g2);
	char want[128];
	snprintf(want, sizeof want, "into generation 2 from checkpoint %lld", id3);
	if (!strstr(r.err, want))
		fail_msg("recover said: %s", r.err);
	run_free(&r);
	r = brig_expect(125, (const char *[]){"recover", ID, NULL});
	assert_non_null(strstr(r.err, "nothing to recover"));
	run_free(&r);

	/* exec by identity now reaches generation 2, with the files of the
	 * checkpoint taken before the stop. */
	r = brig_expect(0, (const char *[]){"exec", ID, "--", "sh", "-c",
					    "ls /workspace; cat /workspace/l; stat -c '%a %u:%g' /workspace/f", NULL});
	assert_string_equal(r.out, "f\ng\nl\nv1\n700 1000:1000\n");
	run_free(&r);
	r = brig_expect(0, (const char *[]){"up", ID, NULL});
	assert_string_equal(chomp(r.out), g2);
	run_free(&r);

	/* --keep 1 leaves one. */
	r = brig_expect(0, (const char *[]){"checkpoint", ID, "--keep", "1", NULL});
	run_free(&r);
	r = brig_expect(0, (const char *[]){"checkpoints", ID, "--json", NULL});
	j = json_loads(r.out, 0, NULL);
	assert_int_equal(json_array_size(j), 1);
	json_decref(j);
	run_free(&r);
#undef ID
}

static void test_recover_without_checkpoint(void **state)
{
	(void)state;
	const char *S = "empty";
	cleanup_free char *g1 = gen_name(S, 1);
	cleanup_free char *g2 = gen_name(S, 2);
	cleanup_free char *url = xasprintf("sqlite://%s/other.db", TMP);
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	run_out r = brig_expect(0, (const char *[]){"up", ID, "--label", LABEL, "--workspace-mb", "64", NULL});
	assert_string_equal(chomp(r.out), g1);
	run_free(&r);
	r = brig_expect(0, (const char *[]){"exec", ID, "--", "sh", "-c", "echo x > /workspace/x", NULL});
	run_free(&r);
	/* Stopped behind brig's back: the store still says running. */
	r = brig_expect(0, (const char *[]){"stop", g1, NULL});
	run_free(&r);
	r = brig_expect(0, (const char *[]){"recover", ID, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "name")), g2);
	assert_int_equal(json_integer_value(json_object_get(j, "new_generation")), 2);
	assert_int_equal(json_integer_value(json_object_get(j, "checkpoint_id")), 0);
	assert_true(json_is_true(json_object_get(j, "won")));
	json_decref(j);
	assert_non_null(strstr(r.err, "started empty"));
	run_free(&r);
	r = brig_expect(0, (const char *[]){"exec", ID, "--", "ls", "-A", "/workspace", NULL});
	assert_string_equal(r.out, "");
	run_free(&r);
	/* The recorded spec carried over: /workspace is still 64 MB. */
	r = brig_expect(0, (const char *[]){"exec", ID, "--", "sh", "-c", "df -m /workspace | tail -1", NULL});
	assert_non_null(strstr(r.out, " 64 "));
	run_free(&r);
#undef ID
}

/* A computer made by `brig create` is not a session: checkpoint refuses it
 * before copying anything, and no blob is left behind. */
static void test_checkpoint_not_a_session(void **state)
{
	(void)state;
	run_out r = brig_expect(0, (const char *[]){"create", "--ns", NS, "--agent", "agent", "--session", "plain",
						    "--label", LABEL, NULL});
	char *name = xstrdup(chomp(r.out));
	run_free(&r);
	cleanup_free char *cmd = xasprintf("ls -a %s/ck 2>/dev/null", TMP);
	char *ls[] = {"sh", "-c", cmd, NULL};
	char *before = NULL, *after = NULL;
	brig_test_spawn(ls, NULL, NULL, &before, NULL);
	r = brig_expect(125, (const char *[]){"checkpoint", name, NULL});
	assert_non_null(strstr(r.err, "not a session"));
	run_free(&r);
	brig_test_spawn(ls, NULL, NULL, &after, NULL);
	assert_string_equal(before, after);
	free(before);
	free(after);
	r = brig_expect(0, (const char *[]){"destroy", name, NULL});
	run_free(&r);
	free(name);
}

static void test_usage_errors(void **state)
{
	(void)state;
	run_out r = brig_expect(125, (const char *[]){"up", "--ns", NS, NULL});
	assert_non_null(strstr(r.err, "--session"));
	run_free(&r);
	r = brig_expect(125, (const char *[]){"checkpoint", NULL});
	run_free(&r);
	r = brig_expect(125, (const char *[]){"checkpoint", "rm", "abc", NULL});
	run_free(&r);
	r = brig_expect(125, (const char *[]){"recover", "--ns", NS, "--agent", "a", "--session", "nosuch", NULL});
	assert_non_null(strstr(r.err, "no session"));
	run_free(&r);
	r = brig_expect(0, (const char *[]){"checkpoint", "--help", NULL});
	assert_non_null(strstr(r.out, "Usage: brig checkpoint"));
	run_free(&r);
}

/* The rough edges of issue 15: names that do not exist, the session flags
 * on inspect/destroy, --env-file, env keys, a store in a missing directory,
 * the --json shapes of image ls and network inspect, help --help. */
static void test_rough_edges(void **state)
{
	(void)state;
	const char *S = "edges";
	cleanup_free char *g1 = gen_name(S, 1);
#define ID "--ns", NS, "--agent", "agent", "--session", S
	run_out r = brig_expect(0, (const char *[]){"help", "--help", NULL});
	assert_non_null(strstr(r.out, "Usage: brig"));
	run_free(&r);

	/* destroy of nothing: exit 1 as `docker rm`, 0 with --force. */
	r = brig_expect(1, (const char *[]){"destroy", "brig-nosuch-computer", NULL});
	assert_non_null(strstr(r.err, "no such computer: brig-nosuch-computer"));
	assert_string_equal(r.out, "");
	run_free(&r);
	r = brig_expect(0, (const char *[]){"destroy", "--force", "brig-nosuch-computer", NULL});
	run_free(&r);

	/* --env-file: values never typed on brig's command line. */
	r = brig_expect(0, (const char *[]){"up", ID, "--label", LABEL, NULL});
	run_free(&r);
	cleanup_free char *envf = xasprintf("%s/edges.env", TMP);
	FILE *f = fopen(envf, "w");
	assert_non_null(f);
	fputs("# the token\n\nTOKEN=s3cret value\r\nOTHER=2\n", f);
	fclose(f);
	r = brig_expect(
		0, (const char *[]){"exec", ID, "--env-file", envf, "--", "sh", "-c", "echo \"$TOKEN|$OTHER\"", NULL});
	assert_string_equal(r.out, "s3cret value|2\n");
	run_free(&r);
	r = brig_expect(125, (const char *[]){"exec", ID, "-e", "A B=hidden", "--", "true", NULL});
	assert_non_null(strstr(r.err, "key 'A B' contains a space"));
	assert_null(strstr(r.err, "hidden"));
	run_free(&r);

	/* inspect and destroy take the session flags. */
	r = brig_expect(0, (const char *[]){"inspect", ID, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "name")), g1);
	json_decref(j);
	run_free(&r);
	r = brig_expect(0, (const char *[]){"inspect", ID, "--gen", "1", NULL});
	assert_non_null(strstr(r.out, g1));
	run_free(&r);
	r = brig_expect(125, (const char *[]){"inspect", g1, "--ns", NS, NULL});
	assert_non_null(strstr(r.err, "not both"));
	run_free(&r);
	r = brig_expect(0, (const char *[]){"destroy", ID, NULL});
	assert_string_equal(chomp(r.out), g1);
	run_free(&r);
	r = brig_expect(1, (const char *[]){"destroy", ID, "--gen", "1", NULL});
	run_free(&r);

	/* A store in a directory that does not exist is refused, not made. */
	cleanup_free char *nodir = xasprintf("%s/nodir", TMP);
	cleanup_free char *nostore = xasprintf("%s/s.db", nodir);
	r = brig_expect(125, (const char *[]){"checkpoints", ID, "--store", nostore, NULL});
	assert_non_null(strstr(r.err, "does not exist"));
	run_free(&r);
	struct stat sb;
	assert_int_equal(stat(nodir, &sb), -1);

	/* image ls --json: an array of brig's records. */
	r = brig_expect(0, (const char *[]){"image", "ls", "--json", NULL});
	j = json_loads(r.out, 0, NULL);
	assert_true(json_is_array(j));
	size_t i;
	json_t *el;
	json_array_foreach (j, i, el) {
		assert_true(json_is_string(json_object_get(el, "tag")));
		assert_true(json_is_string(json_object_get(el, "state")));
		assert_null(json_object_get(el, "Id"));
	}
	json_decref(j);
	run_free(&r);

	/* network inspect --json: brig's fields when the bridge exists (it is
	 * shared with other tests, so this one neither makes nor removes it). */
	r = brig((const char *[]){"network", "inspect", "--json", NULL});
	if (r.code == 0) {
		j = json_loads(r.out, 0, NULL);
		assert_string_equal(json_string_value(json_object_get(j, "name")), "brig-sandbox");
		assert_true(json_is_boolean(json_object_get(j, "icc")));
		assert_true(json_is_boolean(json_object_get(j, "managed")));
		assert_true(json_is_array(json_object_get(j, "attached")));
		assert_null(json_object_get(j, "IPAM"));
		json_decref(j);
	} else {
		assert_int_equal(r.code, 125);
		assert_non_null(strstr(r.err, "does not exist"));
	}
	run_free(&r);
#undef ID
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_session_commands),
		cmocka_unit_test(test_recover_without_checkpoint),
		cmocka_unit_test(test_checkpoint_not_a_session),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_rough_edges),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
