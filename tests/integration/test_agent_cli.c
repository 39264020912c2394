/* test_agent_cli.c — every way `brig agent` can refuse, as a user meets it:
 * exit 125 and the message, and never a crash (the suite also runs this
 * under ASan, which turns a double free into a non-125 exit). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static brig_engine *E;
static char NS[64];
static char LABEL[96];
static char *ENV[3];

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "a%s", brig_test_run_id());
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	/* No credential from the caller's environment reaches the agent. */
	ENV[0] = xstrdup("ANTHROPIC_API_KEY=");
	ENV[1] = xstrdup("CLAUDE_CODE_OAUTH_TOKEN=");
	ENV[2] = NULL;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	for (int i = 0; ENV[i]; i++)
		free(ENV[i]);
	return 0;
}

/* Runs brig with args (NULL-terminated, without "brig") and fails the test
 * unless it exits with want and its stderr contains msg. */
static void expect(int want, const char *msg, const char *const *args)
{
	char *argv[40] = {"brig"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	char *out = NULL, *err = NULL;
	int code = brig_test_spawn(argv, NULL, ENV, &out, &err);
	if (code != want || !strstr(err, msg)) {
		brig_buf b;
		brig_buf_init(&b, 1u << 16);
		for (const char *const *a = args; *a; a++)
			brig_buf_putf(&b, " %s", *a);
		fail_msg("brig%s exited %d (want %d), stderr lacks '%s'\nstdout: %s\nstderr: %s", brig_buf_cstr(&b),
			 code, want, msg, out, err);
	}
	free(out);
	free(err);
}

/* Runs brig and fails the test when its stderr contains secret. */
static void expect_lacks(const char *secret, const char *const *args)
{
	char *argv[40] = {"brig"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	char *out = NULL, *err = NULL;
	brig_test_spawn(argv, NULL, ENV, &out, &err);
	if (strstr(err, secret) || strstr(out, secret))
		fail_msg("brig showed a value it must not show\nstderr: %s", err);
	free(out);
	free(err);
}

/* Every refusal before Docker is contacted. */
static void test_agent_usage_errors(void **state)
{
	(void)state;
	const int F = 125;
	expect(F, "the agent comes first", (const char *[]){"agent", NULL});
	expect(F, "the agent comes first", (const char *[]){"agent", "--ns", NS, NULL});
	expect(F, "unknown agent 'gemini'", (const char *[]){"agent", "gemini", "--ns", NS, "--session", "s", NULL});
	expect(F, "--ns and --session are required", (const char *[]){"agent", "claude", "--session", "s", NULL});
	expect(F, "--ns and --session are required", (const char *[]){"agent", "codex", "--ns", NS, NULL});
	expect(F, "ns: must be", (const char *[]){"agent", "claude", "--ns", "bad name", "--session", "s", NULL});
	expect(F, "session", (const char *[]){"agent", "claude", "--ns", NS, "--session", "", NULL});
	expect(F, "--bogus", (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--bogus", NULL});
	expect(F, "--session", (const char *[]){"agent", "claude", "--ns", NS, "--session", NULL});
	expect(F, "--timeout",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--timeout", "soon", NULL});
	expect(F, "--timeout",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--timeout", "-1", NULL});
	expect(F, "env", (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "-e", "=1", NULL});
	expect(F, "env", (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "-e", "A\nB=1", NULL});
	expect(F, "key 'A B' contains a space",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "-e", "A B=1", NULL});
	expect(F, "label",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--label", "nolabel", NULL});
	expect(F, "network",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--network", "host", NULL});
	expect(F, "subnet",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--subnet", "10.0.0.0/99", NULL});
	/* A credential given with -e would be stored in the container. */
	expect(F, "ANTHROPIC_API_KEY is a model credential",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "s", "--image", brig_test_image(),
				"--label", LABEL, "-e", "ANTHROPIC_API_KEY=sk-not-shown", NULL});
	/* The same refusal at exec level (brig exec shared the double free). */
	expect(F, "ns: must be",
	       (const char *[]){"exec", "--ns", "bad name", "--agent", "a", "--session", "s", "--gen", "2", "--",
				"true", NULL});
}

/* Refusals that come from Docker: an image that does not exist, and a
 * computer of the same session with another spec. */
static void test_agent_docker_errors(void **state)
{
	(void)state;
	expect(125, "nosuch",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "img", "--image", "brig-nosuch-image:tag",
				"--label", LABEL, NULL});

	/* `brig create` makes the session's computer without the agent's spec. */
	char *argv[] = {"brig",    "create",    "--ns", NS,        "--agent",
			"claude",  "--session", "mm",   "--image", (char *)brig_test_image(),
			"--label", LABEL,       NULL};
	char *out = NULL, *err = NULL;
	int code = brig_test_spawn(argv, NULL, ENV, &out, &err);
	if (code != 0)
		fail_msg("brig create exited %d\nstderr: %s", code, err);
	free(out);
	free(err);
	/* The mismatch names each differing field with both values; env as
	 * keys only, never a value. */
	expect(125,
	       "spec differs: network: container has \"none\", wanted \"egress\"; harness: container has "
	       "\"none\", wanted \"claude\"; env: container has [], wanted [\"FOO\",",
	       (const char *[]){"agent", "claude", "--ns", NS, "--session", "mm", "--image", brig_test_image(),
				"--label", LABEL, "-e", "FOO=not-shown-value", "--", "--version", NULL});
	expect_lacks("not-shown-value",
		     (const char *[]){"agent", "claude", "--ns", NS, "--session", "mm", "--image", brig_test_image(),
				      "--label", LABEL, "-e", "FOO=not-shown-value", "--", "--version", NULL});
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_usage_errors),
		cmocka_unit_test(test_agent_docker_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
