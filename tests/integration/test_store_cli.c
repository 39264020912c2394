/* test_store_cli.c — one session model, as a user meets it: `brig agent`
 * sessions live in the store (checkpoint, recover, then agent again uses the
 * recovered generation), on a SQLite store and, with $BRIG_TEST_PG, on
 * PostgreSQL (a schema of its own, dropped afterwards). */
#include "testutil.h"
#include "helpers/pg_schema.h"

#include <sqlite3.h>
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
static char *STORES[3]; /* SQLite, then PostgreSQL when $BRIG_TEST_PG is set */
static char PG_SCHEMA[64];
static char *ENV[6];
static char LABEL[96];

static int setup(void **state)
{
	(void)state;
	brig_test_setup(&E, NS, sizeof NS, "q");
	if (brig_test_tmpdir(TMP, sizeof TMP, "brig-store-cli") != 0)
		return -1;
	STORES[0] = xasprintf("sqlite://%s/store.db", TMP);
	STORES[1] = pg_schema_url(PG_SCHEMA, sizeof PG_SCHEMA, "brig_q_");
	if (!STORES[1])
		print_message("[  SKIP    ] set BRIG_TEST_PG to run these on PostgreSQL too\n");
	ENV[0] = xasprintf("BRIG_CHECKPOINT_DIR=%s/ck", TMP);
	ENV[1] = xasprintf("BRIG_IMAGE=%s", brig_test_image());
	ENV[2] = xasprintf("BRIG_AGENTS_IMAGE=%s", brig_test_image());
	/* a timeout stops the computer (the plain exec path), failing the session */
	ENV[3] = xstrdup("BRIG_GUEST=0");
	ENV[4] = xstrdup("ANTHROPIC_API_KEY=");
	ENV[5] = NULL;
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_teardown(&E);
	if (STORES[1])
		pg_schema_drop(PG_SCHEMA);
	brig_test_rmdir(TMP);
	for (int i = 0; STORES[i]; i++)
		free(STORES[i]);
	for (int i = 0; ENV[i]; i++)
		free(ENV[i]);
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

/* Runs brig with args (NULL-terminated, without "brig") and fails the test
 * unless it exits with want and, when msg is not NULL, its stderr has msg. */
static run_out brig_expect(int want, const char *msg, const char *const *args)
{
	char *argv[48] = {"brig"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	run_out r = {0};
	r.code = brig_test_spawn(argv, NULL, ENV, &r.out, &r.err);
	if (r.code != want || (msg && !strstr(r.err, msg))) {
		brig_buf b;
		brig_buf_init(&b, 1u << 16);
		for (const char *const *a = args; *a; a++)
			brig_buf_putf(&b, " %s", *a);
		fail_msg("brig%s exited %d (want %d), stderr lacks '%s'\nstdout: %s\nstderr: %s", brig_buf_cstr(&b),
			 r.code, want, msg ? msg : "", r.out, r.err);
	}
	return r;
}

/* brig_expect with env instead of ENV. */
static run_out brig_expect_env(char **env, int want, const char *msg, const char *const *args)
{
	char *argv[48] = {"brig"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	run_out r = {0};
	r.code = brig_test_spawn(argv, NULL, env, &r.out, &r.err);
	if (r.code != want || (msg && !strstr(r.err, msg)))
		fail_msg("brig %s … exited %d (want %d), stderr lacks '%s'\nstdout: %s\nstderr: %s", args[0], r.code,
			 want, msg ? msg : "", r.out, r.err);
	return r;
}

static void expect(int want, const char *msg, const char *const *args)
{
	run_out r = brig_expect(want, msg, args);
	run_free(&r);
}

/* The store's record of NS/agent/session; NULL when it has none. */
static brig_store_session *store_session(const char *url, const char *agent, const char *session)
{
	brig_store *s = NULL;
	brig_store_session *rec = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	int rc = brig_store_session_get(s, &rec, NS, agent, session, &err);
	if (rc != 0 && rc != BRIG_ENOTFOUND)
		fail_msg("session_get: %s", brig_error_message(err));
	brig_error_free(err);
	brig_store_close(s);
	return rec;
}

static char *gen_name(const char *agent, const char *session, uint32_t gen)
{
	brig_identity id = {NS, agent, session, gen};
	char name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	return xstrdup(name);
}

static bool exists(const char *name)
{
	json_t *j = NULL;
	int rc = brig_engine_container_inspect(E, &j, name, NULL);
	json_decref(j);
	return rc == 0;
}

/* brig agent: the session is the store's; checkpoint, a timeout, recover,
 * and agent again runs in the recovered generation with its files. */
static void agent_session(const char *url, const char *S)
{
	cleanup_free char *g1 = gen_name("claude", S, 1);
	cleanup_free char *g2 = gen_name("claude", S, 2);
	cleanup_free char *g3 = gen_name("claude", S, 3);
#define AGENT "agent", "claude", "--ns", NS, "--session", S, "--store", url, "--label", LABEL, "--network", "isolated"
#define ID "--ns", NS, "--agent", "claude", "--session", S, "--store", url
	/* The test image has no claude: 127, after the computer came up; the
	 * run is checkpointed when it ends. */
	expect(127, "checkpoint 1 of", (const char *[]){AGENT, NULL});
	brig_store_session *rec = store_session(url, "claude", S);
	assert_non_null(rec);
	assert_int_equal(rec->generation, 1);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	assert_string_equal(rec->container_name, g1);
	brig_store_session_free(rec);

	expect(0, NULL, (const char *[]){"exec", ID, "--", "sh", "-c", "echo kept > /workspace/f", NULL});
	expect(0, "checkpoint 2", (const char *[]){"checkpoint", ID, NULL});
	/* The agent's timeout advice is true now: recover knows the session. */
	expect(124, "after checkpoint 3 kept",
	       (const char *[]){"exec", ID, "--timeout", "1", "--", "sleep", "60", NULL});
	rec = store_session(url, "claude", S);
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	brig_store_session_free(rec);
	expect(125, "brig recover", (const char *[]){AGENT, NULL});
	expect(0, "into generation 2 from checkpoint 3", (const char *[]){"recover", ID, NULL});

	/* agent uses generation 2 (no new generation 1 beside it). */
	expect(127, "checkpoint 4 of", (const char *[]){AGENT, NULL});
	assert_false(exists(g1));
	assert_true(exists(g2));
	run_out r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "kept\n");
	run_free(&r);

	/* A stopped computer is restored from the checkpoint by agent, which says so. */
	expect(0, NULL, (const char *[]){"stop", ID, NULL});
	expect(127, "restored checkpoint 4", (const char *[]){AGENT, NULL});
	assert_true(exists(g3));
	r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "kept\n");
	run_free(&r);

	/* --no-checkpoint takes none. */
	r = brig_expect(127, NULL, (const char *[]){AGENT, "--no-checkpoint", NULL});
	assert_null(strstr(r.err, "checkpoint 6"));
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"checkpoints", ID, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 0), "id")), 5);
	json_decref(j);
	run_free(&r);

	/* A checkpoint that fails is said loudly; the agent's exit code stays. */
	cleanup_free char *notdir = xasprintf("%s/notadir-%s", TMP, S);
	FILE *f = fopen(notdir, "w");
	assert_non_null(f);
	fclose(f);
	cleanup_free char *ckenv = xasprintf("BRIG_CHECKPOINT_DIR=%s", notdir);
	char *env[] = {ckenv, ENV[1], ENV[2], ENV[3], ENV[4], NULL};
	const char *argv[] = {"brig", AGENT, NULL};
	char *out = NULL, *errs = NULL;
	int code = brig_test_spawn((char *const *)argv, NULL, env, &out, &errs);
	if (code != 127 || !strstr(errs, "the agent's work was NOT checkpointed"))
		fail_msg("agent with a bad checkpoint dir exited %d\nstderr: %s", code, errs);
	free(out);
	free(errs);
#undef AGENT
#undef ID
}

static void test_agent_session(void **state)
{
	(void)state;
	agent_session(STORES[0], "sq");
	if (STORES[1])
		agent_session(STORES[1], "pg");
}

/* An agent that cannot start leaves no session behind. */
static void test_agent_nothing_half_created(void **state)
{
	(void)state;
	for (int i = 0; STORES[i]; i++) {
		expect(125, "nosuch",
		       (const char *[]){"agent", "claude", "--ns", NS, "--session", "noimg", "--store", STORES[i],
					"--image", "brig-nosuch-image:tag", "--label", LABEL, NULL});
		assert_null(store_session(STORES[i], "claude", "noimg"));
	}
}

/* destroy (by identity or by name) records the generation as destroyed,
 * stop as stopped; up then restores the latest checkpoint into a new one. */
static void destroy_then_up(const char *url, const char *S)
{
	cleanup_free char *g1 = gen_name("agent", S, 1);
	cleanup_free char *g2 = gen_name("agent", S, 2);
	cleanup_free char *g3 = gen_name("agent", S, 3);
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	expect(0, NULL, (const char *[]){"exec", ID, "--", "sh", "-c", "echo one > /workspace/f", NULL});
	expect(0, NULL, (const char *[]){"checkpoint", ID, NULL});
	run_out r = brig_expect(0, NULL, (const char *[]){"destroy", ID, NULL});
	assert_non_null(strstr(r.out, g1));
	run_free(&r);
	brig_store_session *rec = store_session(url, "agent", S);
	assert_int_equal(rec->state, BRIG_STORE_DESTROYED);
	brig_store_session_free(rec);
	expect(0, "restored checkpoint", (const char *[]){"up", ID, NULL});
	r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "one\n");
	run_free(&r);

	/* By name, with --store; and pause/resume keep the store in step. */
	expect(0, NULL, (const char *[]){"pause", g2, "--store", url, NULL});
	rec = store_session(url, "agent", S);
	assert_int_equal(rec->state, BRIG_STORE_PAUSED);
	brig_store_session_free(rec);
	expect(0, NULL, (const char *[]){"resume", g2, "--store", url, NULL});
	rec = store_session(url, "agent", S);
	assert_int_equal(rec->state, BRIG_STORE_RUNNING);
	brig_store_session_free(rec);
	expect(0, NULL, (const char *[]){"stop", g2, "--store", url, NULL});
	rec = store_session(url, "agent", S);
	assert_int_equal(rec->state, BRIG_STORE_STOPPED);
	assert_int_equal(rec->generation, 2);
	brig_store_session_free(rec);
	expect(0, "was stopped by brig", (const char *[]){"up", ID, NULL});
	assert_true(exists(g3));
	assert_false(exists(g2));

	/* A store that cannot be opened: the computer still goes, and brig
	 * says the store could not be told (exit 125). */
	cleanup_free char *junk = xasprintf("%s/junk.db", TMP);
	FILE *f = fopen(junk, "w");
	assert_non_null(f);
	fputs("this is not a database, not even close to one; SQLite wants its header here\n", f);
	fclose(f);
	expect(125, "the session store still has", (const char *[]){"destroy", g3, "--store", junk, NULL});
	assert_false(exists(g3));
	/* Destroying what is not there is still exit 1. */
	expect(1, "no such computer", (const char *[]){"destroy", g2, "--store", url, NULL});
#undef ID
}

static void test_destroy_updates_store(void **state)
{
	(void)state;
	destroy_then_up(STORES[0], "dsq");
	if (STORES[1])
		destroy_then_up(STORES[1], "dpg");
}

/* up with another store never makes a second computer for the session: it
 * records and adopts the newest generation in Docker, or refuses (creating
 * nothing) when that computer lost its files. */
static void test_other_store_adopts(void **state)
{
	(void)state;
	const char *S = "two";
	cleanup_free char *g1 = gen_name("agent", S, 1);
	cleanup_free char *g2 = gen_name("agent", S, 2);
	cleanup_free char *b = xasprintf("sqlite://%s/b.db", TMP);
	cleanup_free char *c = xasprintf("sqlite://%s/c.db", TMP);
	const char *a = STORES[1] ? STORES[1] : STORES[0];
#define IDS(u) "--ns", NS, "--agent", "agent", "--session", S, "--store", u
	expect(0, NULL, (const char *[]){"up", IDS(a), "--label", LABEL, NULL});
	expect(0, NULL, (const char *[]){"exec", IDS(a), "--", "sh", "-c", "echo a > /workspace/f", NULL});
	expect(0, NULL, (const char *[]){"checkpoint", IDS(a), NULL});
	expect(0, NULL, (const char *[]){"stop", IDS(a), NULL});
	expect(0, NULL, (const char *[]){"up", IDS(a), NULL}); /* generation 2 */

	run_out r =
		brig_expect(0, "was not in this session store", (const char *[]){"up", IDS(b), "--label", LABEL, NULL});
	assert_non_null(strstr(r.out, g2));
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"up", IDS(b), "--label", LABEL, NULL});
	assert_non_null(strstr(r.out, g2));
	run_free(&r);
	assert_false(exists(g1));
	brig_store_session *rec = store_session(b, "agent", S);
	assert_int_equal(rec->generation, 2);
	brig_store_session_free(rec);
	r = brig_expect(0, NULL, (const char *[]){"exec", IDS(b), "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "a\n");
	run_free(&r);

	/* Its computer lost its files and store c has no checkpoint: refused,
	 * and c keeps no record of the session. */
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_kill(E, g2, "KILL", &err), err);
	expect(125, "no checkpoint", (const char *[]){"up", IDS(c), "--label", LABEL, NULL});
	assert_null(store_session(c, "agent", S));
#undef IDS
}

/* sessions ls and history show the store (and Docker's word on each
 * computer, fixing the store when they disagree); sessions rm refuses while
 * a computer or a checkpoint would go unasked, and removes blobs with
 * --checkpoints. */
static void sessions_cmds(const char *url, const char *S)
{
	cleanup_free char *g1 = gen_name("agent", S, 1);
	cleanup_free char *ckdir = xasprintf("%s/ck", TMP);
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	expect(0, NULL, (const char *[]){"exec", ID, "--", "sh", "-c", "echo hist-marker > /workspace/f", NULL});
	run_out r = brig_expect(0, NULL, (const char *[]){"checkpoint", ID, "--json", NULL});
	json_t *cj = json_loads(r.out, 0, NULL);
	cleanup_free char *blob = xasprintf("%s/%s", ckdir, json_string_value(json_object_get(cj, "blob")));
	json_decref(cj);
	run_free(&r);

	r = brig_expect(0, NULL, (const char *[]){"sessions", "ls", "--ns", NS, "--store", url, NULL});
	assert_non_null(strstr(r.out, "COMPUTER"));
	assert_non_null(strstr(r.out, S));
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"sessions", "ls", "--ns", NS, "--store", url, "--json", NULL});
	json_t *arr = json_loads(r.out, 0, NULL);
	json_t *mine = NULL;
	size_t i;
	json_t *v;
	json_array_foreach (arr, i, v)
		if (strcmp(json_string_value(json_object_get(v, "session")), S) == 0)
			mine = v;
	assert_non_null(mine);
	assert_string_equal(json_string_value(json_object_get(mine, "state")), "running");
	assert_string_equal(json_string_value(json_object_get(mine, "computer_state")), "running");
	assert_string_equal(json_string_value(json_object_get(mine, "container_name")), g1);
	assert_null(json_object_get(mine, "spec_json")); /* env values stay in the store */
	json_decref(arr);
	run_free(&r);

	/* history: the command and the checkpoint, oldest first. */
	r = brig_expect(0, NULL, (const char *[]){"history", ID, NULL});
	char *ex = strstr(r.out, "hist-marker"), *ck = strstr(r.out, "checkpoint");
	assert_non_null(ex);
	assert_non_null(ck);
	assert_true(ex < ck);
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"history", ID, "--json", "--limit", "1", NULL});
	json_t *h = json_loads(r.out, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(h, "commands")), 1);
	assert_int_equal(json_array_size(json_object_get(h, "checkpoints")), 1);
	assert_string_equal(json_string_value(json_array_get(
				    json_object_get(json_array_get(json_object_get(h, "commands"), 0), "argv"), 2)),
			    "echo hist-marker > /workspace/f");
	/* who: this process's OS user */
	cleanup_free char *uid = xasprintf("(uid %u)", (unsigned)geteuid());
	const char *who =
		json_string_value(json_object_get(json_array_get(json_object_get(h, "commands"), 0), "actor"));
	assert_non_null(who);
	assert_non_null(strstr(who, uid));
	json_decref(h);
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"history", ID, NULL});
	assert_non_null(strstr(r.out, uid));
	run_free(&r);

	/* Docker and the store disagree: ls says so and fixes the store (an
	 * exited computer is stopped: its container stays). */
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_kill(E, g1, "KILL", &err), err);
	expect(0, "recorded as stopped", (const char *[]){"sessions", "ls", "--ns", NS, "--store", url, NULL});
	brig_store_session *rec = store_session(url, "agent", S);
	assert_int_equal(rec->state, BRIG_STORE_STOPPED);
	brig_store_session_free(rec);

	/* rm refuses while the computer exists; it keeps the checkpoints. */
	expect(125, "still has computer", (const char *[]){"sessions", "rm", ID, "--checkpoints", NULL});
	assert_true(exists(g1)); /* refused before anything went */
	r = brig_expect(0, "kept 1 checkpoint", (const char *[]){"sessions", "rm", ID, "--force", NULL});
	assert_non_null(strstr(r.out, S));
	run_free(&r);
	assert_false(exists(g1));
	assert_null(store_session(url, "agent", S));
	assert_int_equal(access(blob, F_OK), 0);
	r = brig_expect(0, NULL, (const char *[]){"checkpoints", ID, NULL});
	assert_non_null(strstr(r.out, "1 "));
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"history", ID, NULL});
	assert_non_null(strstr(r.out, "kept checkpoints remain"));
	run_free(&r);
	/* ls still lists it, as forgotten, with its latest checkpoint. */
	r = brig_expect(0, "forgotten: the session's record was removed",
			(const char *[]){"sessions", "ls", "--ns", NS, "--store", url, NULL});
	assert_non_null(strstr(r.out, "forgotten"));
	assert_non_null(strstr(r.out, S));
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"sessions", "ls", "--ns", NS, "--store", url, "--json", NULL});
	{
		json_t *ls = json_loads(r.out, 0, NULL);
		assert_non_null(ls);
		json_t *row = NULL, *it;
		size_t k;
		json_array_foreach (ls, k, it)
			if (strcmp(json_string_value(json_object_get(it, "session")), S) == 0)
				row = it;
		assert_non_null(row);
		assert_string_equal(json_string_value(json_object_get(row, "state")), "forgotten");
		assert_int_equal(json_integer_value(json_object_get(row, "checkpoints")), 1);
		assert_true(json_integer_value(json_object_get(row, "latest_checkpoint")) > 0);
		assert_true(json_is_null(json_object_get(row, "container_name")));
		json_decref(ls);
	}
	run_free(&r);
	/* The next up restores the latest kept checkpoint into a new generation. */
	expect(0, "restored checkpoint", (const char *[]){"up", ID, NULL});
	r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "hist-marker\n");
	run_free(&r);
	rec = store_session(url, "agent", S);
	assert_int_equal(rec->generation, 2);
	brig_store_session_free(rec);
	/* --checkpoints removes them and their blobs. */
	r = brig_expect(0, "removed 1 checkpoint",
			(const char *[]){"sessions", "rm", ID, "--force", "--checkpoints", NULL});
	run_free(&r);
	assert_null(store_session(url, "agent", S));
	assert_int_equal(access(blob, F_OK), -1);
	expect(125, "not found", (const char *[]){"sessions", "rm", ID, NULL});
	r = brig_expect(0, NULL, (const char *[]){"sessions", "ls", "--ns", NS, "--store", url, NULL});
	assert_null(strstr(r.out, "forgotten")); /* nothing of it is left to list */
	run_free(&r);

	/* The commands outlive the session. */
	expect(0, NULL, (const char *[]){"history", ID, NULL});
#undef ID
}

static void test_sessions_commands(void **state)
{
	(void)state;
	sessions_cmds(STORES[0], "hsq");
	if (STORES[1])
		sessions_cmds(STORES[1], "hpg");
}

/* Every refusal of sessions and history. */
static void test_sessions_errors(void **state)
{
	(void)state;
	const char *url = STORES[0];
	expect(125, "a subcommand is required", (const char *[]){"sessions", NULL});
	expect(125, "unknown subcommand 'frob'", (const char *[]){"sessions", "frob", NULL});
	expect(125, "--bogus", (const char *[]){"sessions", "ls", "--bogus", NULL});
	expect(125, "unexpected argument", (const char *[]){"sessions", "ls", "extra", "--store", url, NULL});
	expect(125, "ns: must be", (const char *[]){"sessions", "ls", "--ns", "bad name", "--store", url, NULL});
	expect(125, "--ns, --agent and --session",
	       (const char *[]){"sessions", "rm", "--ns", NS, "--store", url, NULL});
	expect(125, "unexpected argument",
	       (const char *[]){"sessions", "rm", "x", "--ns", NS, "--agent", "a", "--session", "s", NULL});
	expect(125, "--bogus", (const char *[]){"sessions", "rm", "--bogus", NULL});
	expect(125, "not found",
	       (const char *[]){"sessions", "rm", "--ns", NS, "--agent", "a", "--session", "none", "--store", url,
				NULL});
	expect(125, "--ns, --agent and --session", (const char *[]){"history", "--ns", NS, NULL});
	expect(125, "--limit",
	       (const char *[]){"history", "--ns", NS, "--agent", "a", "--session", "s", "--limit", "0", NULL});
	expect(125, "unexpected argument", (const char *[]){"history", "x", NULL});
	expect(125, "--bogus", (const char *[]){"history", "--bogus", NULL});
	expect(125, "no command recorded",
	       (const char *[]){"history", "--ns", NS, "--agent", "a", "--session", "none", "--store", url, NULL});
	cleanup_free char *missing = xasprintf("%s/nodir/x.db", TMP);
	expect(125, "does not exist", (const char *[]){"sessions", "ls", "--store", missing, NULL});
	expect(125, "does not exist",
	       (const char *[]){"history", "--ns", NS, "--agent", "a", "--session", "s", "--store", missing, NULL});
	expect(125, "does not exist",
	       (const char *[]){"sessions", "rm", "--ns", NS, "--agent", "a", "--session", "s", "--store", missing,
				NULL});
	run_out r = brig_expect(0, NULL, (const char *[]){"sessions", "--help", NULL});
	assert_non_null(strstr(r.out, "Usage: brig sessions ls"));
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"history", "--help", NULL});
	assert_non_null(strstr(r.out, "Usage: brig history"));
	run_free(&r);
}

/* Without a usable daemon, ls still shows the store (COMPUTER unknown). */
static void test_sessions_ls_without_docker(void **state)
{
	(void)state;
	const char *url = STORES[0];
	expect(0, NULL,
	       (const char *[]){"up", "--ns", NS, "--agent", "agent", "--session", "nod", "--store", url, "--label",
				LABEL, NULL});
	char *argv[] = {"brig", "sessions", "ls", "--ns", NS, "--store", (char *)url, NULL};
	char *env[] = {"DOCKER_HOST=bogus://nowhere", NULL};
	char *out = NULL, *errs = NULL;
	int code = brig_test_spawn(argv, NULL, env, &out, &errs);
	if (code != 0 || !strstr(errs, "cannot ask Docker") || !strstr(out, "unknown"))
		fail_msg("sessions ls without Docker exited %d\nstdout: %s\nstderr: %s", code, out, errs);
	free(out);
	free(errs);
	/* No daemon: sessions rm removes nothing, exec --session (which looks
	 * at the computer's files first) runs nothing. */
	cleanup_free char *nosock = xasprintf("DOCKER_HOST=unix://%s/no-daemon.sock", TMP);
	env[0] = nosock;
	char *rm[] = {"brig",      "sessions", "rm",      "--ns",    NS,          "--agent", "agent",
		      "--session", "nod",      "--force", "--store", (char *)url, NULL};
	code = brig_test_spawn(rm, NULL, env, &out, &errs);
	if (code != 125 || !strstr(errs, "cannot connect to the Docker daemon"))
		fail_msg("sessions rm without Docker exited %d\nstderr: %s", code, errs);
	free(out);
	free(errs);
	brig_store_session *rec = store_session(url, "agent", "nod");
	assert_non_null(rec);
	brig_store_session_free(rec);
	char *ex[] = {"brig", "exec",    "--ns",      NS,   "--agent", "agent", "--session",
		      "nod",  "--store", (char *)url, "--", "true",    NULL};
	code = brig_test_spawn(ex, NULL, env, &out, &errs);
	if (code != 125 || !strstr(errs, "cannot connect to the Docker daemon"))
		fail_msg("exec --session without Docker exited %d\nstderr: %s", code, errs);
	free(out);
	free(errs);
	expect(0, NULL,
	       (const char *[]){"sessions", "rm", "--ns", NS, "--agent", "agent", "--session", "nod", "--force",
				"--store", url, NULL});
}

/* The library's own refusals of brig_session_remove (the CLI checks first). */
static void test_session_remove_lib(void **state)
{
	(void)state;
	for (int k = 0; STORES[k]; k++) {
		brig_store *s = NULL;
		brig_error *err = NULL;
		ASSERT_OK(brig_store_open(&s, STORES[k], &err), err);
		brig_store_session rec = {
			.ns = NS, .agent = "lib", .session = "rm", .generation = 1, .state = BRIG_STORE_DESTROYED};
		ASSERT_OK(brig_store_session_create(s, NULL, &rec, &err), err);
		/* A blob that cannot be unlinked: a directory by its name. */
		cleanup_free char *dir = xasprintf("%s/libck%d", TMP, k);
		cleanup_free char *blobdir = xasprintf("%s/blob.tar.zst", dir);
		cleanup_free char *inner = xasprintf("%s/x", blobdir);
		assert_int_equal(mkdir(dir, 0700), 0);
		assert_int_equal(mkdir(blobdir, 0700), 0);
		assert_int_equal(mkdir(inner, 0700), 0);
		brig_store_checkpoint cp = {.ns = NS,
					    .agent = "lib",
					    .session = "rm",
					    .generation = 1,
					    .digest =
						    "0000000000000000000000000000000000000000000000000000000000000000",
					    .blob = "blob.tar.zst"};
		ASSERT_OK(brig_store_checkpoint_add(s, NULL, &cp, &err), err);
		/* Without checkpoints=true they stay, listed under the identity. */
		size_t removed = 99;
		ASSERT_OK(brig_session_remove(s, dir, NS, "lib", "rm", false, &removed, &err), err);
		assert_int_equal(removed, 0);
		brig_store_checkpoint *cps = NULL;
		size_t ncp = 0;
		ASSERT_OK(brig_store_checkpoint_list(s, &cps, &ncp, NS, "lib", "rm", &err), err);
		assert_int_equal(ncp, 1);
		brig_store_checkpoint_free_array(cps, ncp);
		/* No session record to add to: refused as before. */
		assert_int_equal(brig_store_checkpoint_add(s, NULL, &cp, &err), BRIG_ENOTFOUND);
		brig_error_free(err);
		err = NULL;
		ASSERT_OK(brig_store_session_create(s, NULL, &rec, &err), err);
		assert_int_equal(brig_session_remove(s, dir, NS, "lib", "rm", true, &removed, &err), BRIG_EIO);
		assert_non_null(strstr(brig_error_message(err), "not its checkpoint blob"));
		brig_error_free(err);
		err = NULL;
		assert_int_equal(removed, 1);
		assert_int_equal(brig_session_remove(s, dir, NS, "lib", "rm", true, NULL, &err), BRIG_ENOTFOUND);
		brig_error_free(err);
		brig_store_close(s);
	}
}

/* Takes a checkpoint of ID through the CLI; returns its id, *blob its path. */
static long long take_checkpoint(const char *const *id, char **blob)
{
	const char *args[20];
	int n = 0;
	args[n++] = "checkpoint";
	for (; *id; id++)
		args[n++] = *id;
	args[n++] = "--json";
	args[n] = NULL;
	run_out r = brig_expect(0, NULL, args);
	json_t *j = json_loads(r.out, 0, NULL);
	long long cid = json_integer_value(json_object_get(j, "id"));
	if (blob)
		*blob = xasprintf("%s/ck/%s", TMP, json_string_value(json_object_get(j, "blob")));
	json_decref(j);
	run_free(&r);
	return cid;
}

/* recover --checkpoint ID goes back to an older checkpoint, and refuses
 * (changing nothing) a running session, an unknown id, another session's
 * checkpoint and a corrupt one. */
static void recover_older(const char *url, const char *S)
{
	const char *T = "other";
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	expect(0, NULL, (const char *[]){"exec", ID, "--", "sh", "-c", "echo v1 > /workspace/f", NULL});
	char buf[32], buf2[32], buft[32];
	snprintf(buf, sizeof buf, "%lld", take_checkpoint((const char *[]){ID, NULL}, NULL));
	expect(0, NULL, (const char *[]){"exec", ID, "--", "sh", "-c", "echo v2 > /workspace/f", NULL});
	cleanup_free char *blob2 = NULL;
	snprintf(buf2, sizeof buf2, "%lld", take_checkpoint((const char *[]){ID, NULL}, &blob2));

	expect(125, "take one of what it has now", (const char *[]){"recover", ID, "--checkpoint", buf, NULL});
	expect(0, NULL, (const char *[]){"stop", ID, NULL});
	expect(125, "no checkpoint 999999", (const char *[]){"recover", ID, "--checkpoint", "999999", NULL});
	expect(125, "--checkpoint", (const char *[]){"recover", ID, "--checkpoint", "abc", NULL});
	expect(0, NULL,
	       (const char *[]){"up", "--ns", NS, "--agent", "agent", "--session", T, "--store", url, "--label", LABEL,
				NULL});
	snprintf(buft, sizeof buft, "%lld",
		 take_checkpoint((const char *[]){"--ns", NS, "--agent", "agent", "--session", T, "--store", url, NULL},
				 NULL));
	expect(125, "belongs to session", (const char *[]){"recover", ID, "--checkpoint", buft, NULL});
	/* The newest blob goes bad: asking for it is refused, nothing changes. */
	chmod(blob2, 0600);
	FILE *f = fopen(blob2, "r+");
	assert_non_null(f);
	fputs("garbage", f);
	fclose(f);
	expect(125, "is unusable; nothing was changed", (const char *[]){"recover", ID, "--checkpoint", buf2, NULL});
	brig_store_session *rec = store_session(url, "agent", S);
	assert_int_equal(rec->generation, 1);
	brig_store_session_free(rec);

	char want[64];
	snprintf(want, sizeof want, "from checkpoint %s", buf);
	expect(0, want, (const char *[]){"recover", ID, "--checkpoint", buf, NULL});
	run_out r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "v1\n");
	run_free(&r);
#undef ID
}

static void test_recover_older_checkpoint(void **state)
{
	(void)state;
	recover_older(STORES[0], "osq");
	if (STORES[1])
		recover_older(STORES[1], "opg");
	/* The library refuses a negative id before looking. */
	brig_store *s = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, STORES[0], &err), err);
	brig_recover_result r;
	assert_int_equal(brig_session_recover_at(E, s, &r, NS, "agent", "osq", NULL, -1, &err), BRIG_EINVAL);
	brig_error_free(err);
	brig_store_close(s);
}

/* exec --ns/--agent/--session on a computer that lost its files restores
 * the latest checkpoint first (saying so); with none it refuses loudly. */
static void exec_restores(const char *url, const char *S)
{
	char E2[32];
	snprintf(E2, sizeof E2, "%s-empty", S); /* one per store: they share Docker */
	cleanup_free char *g1 = gen_name("agent", S, 1);
	cleanup_free char *g2 = gen_name("agent", S, 2);
	cleanup_free char *g3 = gen_name("agent", S, 3);
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	expect(0, NULL, (const char *[]){"exec", ID, "--", "sh", "-c", "echo saved > /workspace/f", NULL});
	take_checkpoint((const char *[]){ID, NULL}, NULL);
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_kill(E, g1, "KILL", &err), err);
	run_out r =
		brig_expect(0, "restored checkpoint", (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "saved\n");
	run_free(&r);
	assert_true(exists(g2));
	/* After brig stop (recorded as stopped), the same. */
	expect(0, NULL, (const char *[]){"stop", ID, NULL});
	brig_store_session *rec = store_session(url, "agent", S);
	assert_int_equal(rec->state, BRIG_STORE_STOPPED);
	brig_store_session_free(rec);
	r = brig_expect(0, "restored checkpoint", (const char *[]){"exec", ID, "--", "cat", "/workspace/f", NULL});
	assert_string_equal(r.out, "saved\n");
	run_free(&r);
	assert_true(exists(g3));
	/* A healthy computer: nothing said, nothing made. */
	r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "true", NULL});
	assert_string_equal(r.err, "");
	run_free(&r);

	/* No checkpoint: refused, the command never runs. */
	cleanup_free char *e1 = gen_name("agent", E2, 1);
	expect(0, NULL,
	       (const char *[]){"up", "--ns", NS, "--agent", "agent", "--session", E2, "--store", url, "--label", LABEL,
				NULL});
	ASSERT_OK(brig_engine_container_kill(E, e1, "KILL", &err), err);
	expect(125, "no checkpoint",
	       (const char *[]){"exec", "--ns", NS, "--agent", "agent", "--session", E2, "--store", url, "--", "echo",
				"ran", NULL});
#undef ID
}

static void test_exec_restores_lost(void **state)
{
	(void)state;
	exec_restores(STORES[0], "xsq");
	if (STORES[1])
		exec_restores(STORES[1], "xpg");
}

/* When only a stop can end a command, brig checkpoints first; when that
 * fails, the message says the work since the last checkpoint is lost. */
static void test_checkpoint_before_stop(void **state)
{
	(void)state;
	const char *url = STORES[0];
	const char *S = "stopck";
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	expect(124, "after checkpoint",
	       (const char *[]){"exec", ID, "--timeout", "1", "--", "sh", "-c", "echo w > /workspace/w; sleep 60",
				NULL});
	expect(0, "from checkpoint", (const char *[]){"recover", ID, NULL});
	run_out r = brig_expect(0, NULL, (const char *[]){"exec", ID, "--", "cat", "/workspace/w", NULL});
	assert_string_equal(r.out, "w\n");
	run_free(&r);

	cleanup_free char *notdir = xasprintf("%s/notadir-stop", TMP);
	FILE *f = fopen(notdir, "w");
	assert_non_null(f);
	fclose(f);
	cleanup_free char *ckenv = xasprintf("BRIG_CHECKPOINT_DIR=%s", notdir);
	char *env[] = {ckenv, ENV[1], ENV[2], ENV[3], ENV[4], NULL};
	const char *argv[] = {"brig", "exec", ID, "--timeout", "1", "--", "sleep", "60", NULL};
	char *out = NULL, *errs = NULL;
	int code = brig_test_spawn((char *const *)argv, NULL, env, &out, &errs);
	if (code != 124 || !strstr(errs, "no checkpoint could be taken before the stop"))
		fail_msg("exec with a bad checkpoint dir exited %d\nstderr: %s", code, errs);
	free(out);
	free(errs);
#undef ID
}

/* --checkpoint-every: checkpoints while the command runs; a failing one is
 * said and the command goes on; refusals of the flag. */
static void test_checkpoint_every(void **state)
{
	(void)state;
	const char *url = STORES[1] ? STORES[1] : STORES[0];
	const char *S = "every";
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	run_out r = brig_expect(0, "(--checkpoint-every)",
				(const char *[]){"exec", ID, "--checkpoint-every", "1s", "--", "sh", "-c",
						 "echo a > /workspace/a; sleep 3; echo done", NULL});
	assert_string_equal(r.out, "done\n");
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"checkpoints", ID, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	assert_true(json_array_size(j) >= 1);
	json_decref(j);
	run_free(&r);

	expect(125, "--checkpoint-every",
	       (const char *[]){"exec", ID, "--checkpoint-every", "0.5s", "--", "true", NULL});
	expect(125, "--checkpoint-every",
	       (const char *[]){"exec", ID, "--checkpoint-every", "soon", "--", "true", NULL});
	expect(125, "not -d", (const char *[]){"exec", ID, "-d", "--checkpoint-every", "5s", "--", "true", NULL});
	expect(125, "--checkpoint-every",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", S, "--checkpoint-every", "x", NULL});

	cleanup_free char *notdir = xasprintf("%s/notadir-every", TMP);
	FILE *f = fopen(notdir, "w");
	assert_non_null(f);
	fclose(f);
	cleanup_free char *ckenv = xasprintf("BRIG_CHECKPOINT_DIR=%s", notdir);
	char *env[] = {ckenv, ENV[1], ENV[2], ENV[3], ENV[4], NULL};
	const char *argv[] = {"brig", "exec", ID,   "--checkpoint-every", "1s",
			      "--",   "sh",   "-c", "sleep 2; echo ok",   NULL};
	char *out = NULL, *errs = NULL;
	int code = brig_test_spawn((char *const *)argv, NULL, env, &out, &errs);
	if (code != 0 || strcmp(out, "ok\n") != 0 || !strstr(errs, "periodic checkpoint (--checkpoint-every) failed"))
		fail_msg("exec --checkpoint-every with a bad checkpoint dir exited %d\nstdout: %s\nstderr: %s", code,
			 out, errs);
	free(out);
	free(errs);
#undef ID
}

/* ps, kill and attach name the computer by its session too. */
static void test_guest_commands_by_session(void **state)
{
	(void)state;
	const char *url = STORES[0];
	const char *S = "guest";
	/* computers with brig-init: ENV without BRIG_GUEST=0 */
	char *genv[] = {ENV[0], ENV[1], ENV[2], ENV[4], NULL};
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", url
	run_out r = brig_expect_env(genv, 0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	run_free(&r);
	r = brig_expect_env(genv, 0, NULL, (const char *[]){"exec", "-d", ID, "--", "sleep", "300", NULL});
	char sleep_id[32];
	snprintf(sleep_id, sizeof sleep_id, "%lld", atoll(r.out));
	run_free(&r);
	r = brig_expect_env(genv, 0, NULL, (const char *[]){"exec", "-d", ID, "--", "echo", "attached", NULL});
	char echo_id[32];
	snprintf(echo_id, sizeof echo_id, "%lld", atoll(r.out));
	run_free(&r);
	r = brig_expect_env(genv, 0, NULL, (const char *[]){"ps", ID, NULL});
	assert_non_null(strstr(r.out, "sleep 300"));
	run_free(&r);
	r = brig_expect_env(genv, 0, NULL, (const char *[]){"attach", ID, echo_id, NULL});
	assert_string_equal(r.out, "attached\n");
	run_free(&r);
	r = brig_expect_env(genv, 0, NULL, (const char *[]){"kill", ID, sleep_id, NULL});
	run_free(&r);
	r = brig_expect_env(genv, 0, NULL, (const char *[]){"ps", ID, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	size_t i;
	json_t *p;
	json_array_foreach (j, i, p)
		if (json_integer_value(json_object_get(p, "id")) == atoll(sleep_id))
			assert_string_not_equal(json_string_value(json_object_get(p, "state")), "running");
	json_decref(j);
	run_free(&r);

	expect(125, "ID is required", (const char *[]){"kill", ID, NULL});
	expect(125, "ID is required", (const char *[]){"attach", ID, "1", "2", NULL});
	expect(125, "no operand", (const char *[]){"ps", ID, "extra", NULL});
	expect(125, "--ns, --agent and --session go together", (const char *[]){"ps", "--ns", NS, NULL});
	expect(125, "--gen", (const char *[]){"kill", ID, "--gen", "0", "1", NULL});
	expect(125, "--gen", (const char *[]){"attach", ID, "--gen", "x", "1", NULL});
	expect(125, "--gen", (const char *[]){"ps", ID, "--gen", "-1", NULL});
	expect(125, "ID", (const char *[]){"kill", ID, "notanumber", NULL});
#undef ID
}

/* Runs sql on the SQLite store at path (a test's way to break a store). */
static void sql(const char *path, const char *stmt)
{
	sqlite3 *db = NULL;
	char *msg = NULL;
	if (sqlite3_open(path, &db) != SQLITE_OK || sqlite3_exec(db, stmt, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", stmt, msg ? msg : sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* A computer is named by its NAME or a unique prefix of it (looked up only
 * when the exact name is not found), or by --ns/--agent/--session — cp
 * too; an ambiguous prefix is refused, naming the computers it matches,
 * and destroy acts on nothing then. */
static void test_name_prefix(void **state)
{
	(void)state;
	const char *url = STORES[0];
	cleanup_free char *ga = gen_name("agent", "pfa", 1);
	cleanup_free char *gb = gen_name("agent", "pfb", 1);
#define IDA "--ns", NS, "--agent", "agent", "--session", "pfa", "--store", url
	expect(0, NULL, (const char *[]){"up", IDA, "--label", LABEL, NULL});
	expect(0, NULL,
	       (const char *[]){"up", "--ns", NS, "--agent", "agent", "--session", "pfb", "--store", url, "--label",
				LABEL, NULL});
	/* "brig-" and 15 digits of the hash: unique on any daemon. */
	char pa[24], pb[24];
	snprintf(pa, sizeof pa, "%.20s", ga);
	snprintf(pb, sizeof pb, "%.20s", gb);

	run_out r = brig_expect(0, NULL, (const char *[]){"exec", pa, "--", "sh", "-c", "echo hi > f; cat f", NULL});
	assert_string_equal(r.out, "hi\n");
	run_free(&r);
	/* -d too (BRIG_GUEST=0 here: refused, about the computer in full). */
	r = brig_expect(125, ga, (const char *[]){"exec", "-d", pa, "--", "true", NULL});
	run_free(&r);
	r = brig_expect(0, NULL, (const char *[]){"inspect", pa, "--json", NULL});
	json_t *j = json_loads(r.out, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(j, "name")), ga);
	json_decref(j);
	run_free(&r);
	r = brig_expect(125, ga, (const char *[]){"fs", "cat", pa, "f", NULL}); /* no brig-init here either */
	run_free(&r);
	expect(0, NULL, (const char *[]){"port", pa, NULL});
	expect(0, "checkpoint", (const char *[]){"checkpoint", pa, "--store", url, NULL});
	expect(125, "is a prefix of", (const char *[]){"checkpoint", "brig-", "--store", url, NULL});
	r = brig_expect(125, NULL, (const char *[]){"ps", pa, NULL}); /* no brig-init: refused about ga */
	assert_null(strstr(r.err, "no such container"));
	run_free(&r);
	expect(125, "is a prefix of", (const char *[]){"ps", "brig-", NULL});
	expect(125, "is a prefix of", (const char *[]){"port", "brig-", NULL});

	/* cp: by prefix, and by session with :PATH on the computer's side. */
	cleanup_free char *host = xasprintf("%s/pf-out", TMP);
	cleanup_free char *src = xasprintf("%s:/workspace/f", pa);
	expect(0, NULL, (const char *[]){"cp", src, host, NULL});
	char text[16] = "";
	FILE *hf = fopen(host, "r");
	assert_non_null(hf);
	assert_non_null(fgets(text, sizeof text, hf));
	fclose(hf);
	assert_string_equal(text, "hi\n");
	cleanup_free char *host2 = xasprintf("%s/pf-out2", TMP);
	expect(0, NULL, (const char *[]){"cp", IDA, ":f", host2, NULL});
	assert_int_equal(access(host2, F_OK), 0);
	expect(0, NULL, (const char *[]){"cp", IDA, host2, ":g", NULL});
	r = brig_expect(0, NULL, (const char *[]){"exec", IDA, "--", "cat", "g", NULL});
	assert_string_equal(r.out, "hi\n");
	run_free(&r);
	expect(125, "give either NAME or --ns", (const char *[]){"cp", IDA, src, host2, NULL});
	expect(125, "one of SRC and DEST", (const char *[]){"cp", ":f", host2, NULL});
	expect(125, "no computer named brig-nosuchprefix",
	       (const char *[]){"cp", "brig-nosuchprefix:/workspace/f", host2, NULL});
	expect(125, "no computer named", (const char *[]){"fs", "cat", "brig-nosuchprefix", "f", NULL});

	/* pause/resume by prefix keep the store in step. */
	r = brig_expect(0, NULL, (const char *[]){"pause", pa, "--store", url, NULL});
	cleanup_free char *line = xasprintf("%s\n", ga);
	assert_string_equal(r.out, line); /* the full name, alone */
	run_free(&r);
	brig_store_session *rec = store_session(url, "agent", "pfa");
	assert_int_equal(rec->state, BRIG_STORE_PAUSED);
	brig_store_session_free(rec);
	expect(0, NULL, (const char *[]){"resume", pa, "--store", url, NULL});

	/* Ambiguous: "brig-" starts both (and every computer). Refused first
	 * where it is harmless, then by destroy, which leaves both. */
	expect(125, "is a prefix of", (const char *[]){"exec", "brig-", "--", "true", NULL});
	expect(125, "is a prefix of", (const char *[]){"inspect", "brig-", NULL});
	expect(125, "is a prefix of", (const char *[]){"pause", "brig-", NULL});
	r = brig_expect(1, "is a prefix of", (const char *[]){"destroy", "brig-", "--store", url, NULL});
	assert_string_equal(r.out, "");
	run_free(&r);
	assert_true(exists(ga));
	assert_true(exists(gb));
	/* --force takes only full names: a prefix names nothing then. */
	expect(0, NULL, (const char *[]){"destroy", "-f", pb, "--store", url, NULL});
	assert_true(exists(gb));
	expect(1, "no such computer", (const char *[]){"destroy", "brig-nosuchprefix", "--store", url, NULL});
	r = brig_expect(0, NULL, (const char *[]){"destroy", pb, "--store", url, NULL});
	assert_non_null(strstr(r.out, gb));
	run_free(&r);
	assert_false(exists(gb));
	rec = store_session(url, "agent", "pfb");
	assert_int_equal(rec->state, BRIG_STORE_DESTROYED);
	brig_store_session_free(rec);
	expect(0, NULL, (const char *[]){"destroy", IDA, NULL});
#undef IDA
}

/* A store that fails part-way: each command reports it (exit 125) and says
 * what became of the computer. */
static void test_broken_store(void **state)
{
	(void)state;
	const char *S = "broken";
	cleanup_free char *path = xasprintf("%s/broken.db", TMP);
	cleanup_free char *g1 = gen_name("agent", S, 1);
#define ID "--ns", NS, "--agent", "agent", "--session", S, "--store", path
	expect(0, NULL, (const char *[]){"up", ID, "--label", LABEL, NULL});
	/* A store that refuses every change of a session. */
	sql(path, "CREATE TRIGGER no_update BEFORE UPDATE ON sessions BEGIN SELECT RAISE(FAIL, 'no updates'); END");
	expect(125, "the session store still has", (const char *[]){"destroy", ID, NULL});
	assert_false(exists(g1));
	/* ls finds it gone but cannot record that. */
	expect(125, "no updates", (const char *[]){"sessions", "ls", "--ns", NS, "--store", path, NULL});
	sql(path, "DROP TRIGGER no_update");
	sql(path, "ALTER TABLE checkpoints RENAME TO checkpoints_gone");
	expect(125, "checkpoints", (const char *[]){"sessions", "rm", ID, NULL});
	sql(path, "ALTER TABLE audit RENAME TO audit_gone");
	expect(125, "audit", (const char *[]){"history", ID, NULL});
	sql(path, "ALTER TABLE sessions RENAME TO sessions_gone");
	expect(125, "sessions", (const char *[]){"history", ID, NULL});
	expect(125, "sessions", (const char *[]){"sessions", "ls", "--store", path, NULL});
#undef ID
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_session),
		cmocka_unit_test(test_agent_nothing_half_created),
		cmocka_unit_test(test_destroy_updates_store),
		cmocka_unit_test(test_other_store_adopts),
		cmocka_unit_test(test_sessions_commands),
		cmocka_unit_test(test_sessions_errors),
		cmocka_unit_test(test_sessions_ls_without_docker),
		cmocka_unit_test(test_session_remove_lib),
		cmocka_unit_test(test_broken_store),
		cmocka_unit_test(test_recover_older_checkpoint),
		cmocka_unit_test(test_exec_restores_lost),
		cmocka_unit_test(test_checkpoint_before_stop),
		cmocka_unit_test(test_checkpoint_every),
		cmocka_unit_test(test_guest_commands_by_session),
		cmocka_unit_test(test_name_prefix),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
