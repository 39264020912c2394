/* test_spec.c — the spec: seed defaults, setters and their errors, the tmpfs
 * budget, the spec hash, env/credential rules and the Docker bodies. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "brig/spec.h"

#define ASSERT_CONTAINS(hay, needle)                                                                                   \
	do {                                                                                                           \
		if (!strstr((hay), (needle)))                                                                          \
			fail_msg("expected '%s' in '%s'", (needle), (hay));                                            \
	} while (0)
#define ASSERT_LACKS(hay, needle)                                                                                      \
	do {                                                                                                           \
		if (strstr((hay), (needle)))                                                                           \
			fail_msg("'%s' must not appear in '%s'", (needle), (hay));                                     \
	} while (0)

/* Expects code from expr and returns the message (caller frees err). */
#define EXPECT_ERR(expr, code, errp)                                                                                   \
	do {                                                                                                           \
		int r_ = (expr);                                                                                       \
		if (r_ != (code))                                                                                      \
			fail_msg("%s -> %s (%s), wanted %s", #expr, brig_error_name(r_),                               \
				 brig_error_message(*(errp)), brig_error_name(code));                                  \
	} while (0)

static const char *const CRED_KEYS[] = {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY"};

static int setup(void **state)
{
	for (size_t i = 0; i < 3; i++)
		unsetenv(CRED_KEYS[i]);
	return 0;
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS); }

static void set_ok(brig_spec *s, const char *k, const char *v)
{
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(s, k, v, &err), err);
}

/* Sets k=v, expects BRIG_EINVAL with a message containing each of must. */
static void set_bad(const char *k, const char *v, const char *must1, const char *must2)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	char before[BRIG_HASH_SIZE], after[BRIG_HASH_SIZE];
	ASSERT_OK(brig_spec_hash(before, &s, &err), err);
	EXPECT_ERR(brig_spec_set(&s, k, v, &err), BRIG_EINVAL, &err);
	if (must1)
		ASSERT_CONTAINS(err->message, must1);
	if (must2)
		ASSERT_CONTAINS(err->message, must2);
	brig_error_free(err);
	err = NULL;
	ASSERT_OK(brig_spec_hash(after, &s, &err), err);
	assert_string_equal(before, after); /* a failed set changes nothing */
	brig_spec_clear(&s);
}

/* ---- defaults ---- */

static void test_defaults(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	assert_int_equal(s.version, BRIG_SPEC_VERSION);
	assert_string_equal(s.image, "brig-sandbox:local");
	assert_string_equal(s.user, "1000:1000");
	assert_true(s.cpus == 2.0);
	assert_int_equal(s.memory_mb, 2048);
	assert_int_equal(s.pids, 256);
	assert_int_equal(s.workspace_mb, 512);
	assert_int_equal(s.runtime_mb, 256);
	assert_int_equal(s.shm_mb, 64);
	assert_int_equal(s.workspace_inodes, 65536);
	assert_int_equal(s.runtime_inodes, 32768);
	assert_int_equal(s.nofile, 1024);
	assert_int_equal(s.network, BRIG_NET_NONE);
	assert_string_equal(s.subnet, "172.30.0.0/22");
	assert_int_equal(s.harness, BRIG_HARNESS_NONE);
	assert_string_equal(s.seccomp_profile, brig_spec_seccomp_default()); /* brig's own profile */
	assert_int_equal(s.env_count, 0);
	assert_int_equal(s.label_count, 0);
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);
	brig_host_limits host = {.mem_bytes = 4LL << 30, .ncpu = 2};
	ASSERT_OK(brig_spec_validate(&s, &host, &err), err);
	brig_spec_clear(&s);
	brig_spec_clear(&s); /* cleared twice is fine */
	brig_spec_clear(NULL);
}

/* ---- setters ---- */

static void test_setters(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	set_ok(&s, "image", "sha256:7ee741e68ddc");
	set_ok(&s, "user", "1001:1002");
	set_ok(&s, "cpus", "1.5");
	set_ok(&s, "memory-mb", "4096");
	set_ok(&s, "memory_mb", "4096");
	set_ok(&s, "pids", "512");
	set_ok(&s, "workspace-mb", "1024");
	set_ok(&s, "runtime-mb", "128");
	set_ok(&s, "shm-mb", "32");
	set_ok(&s, "workspace-inodes", "1000");
	set_ok(&s, "runtime-inodes", "2000");
	set_ok(&s, "nofile", "4096");
	set_ok(&s, "network", "isolated");
	set_ok(&s, "subnet", "10.99.0.0/24");
	set_ok(&s, "harness", "claude");
	set_ok(&s, "env", "FOO=bar");
	set_ok(&s, "env", "FOO=baz"); /* replaces */
	set_ok(&s, "env", "EMPTY=");
	set_ok(&s, "label", "brig.test=abc");
	set_ok(&s, "seccomp-profile", "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}");
	assert_string_equal(s.image, "sha256:7ee741e68ddc");
	assert_string_equal(s.user, "1001:1002");
	assert_true(s.cpus == 1.5);
	assert_int_equal(s.memory_mb, 4096);
	assert_int_equal(s.pids, 512);
	assert_int_equal(s.workspace_mb, 1024);
	assert_int_equal(s.runtime_mb, 128);
	assert_int_equal(s.shm_mb, 32);
	assert_int_equal(s.workspace_inodes, 1000);
	assert_int_equal(s.runtime_inodes, 2000);
	assert_int_equal(s.nofile, 4096);
	assert_int_equal(s.network, BRIG_NET_ISOLATED);
	assert_string_equal(s.subnet, "10.99.0.0/24");
	assert_int_equal(s.harness, BRIG_HARNESS_CLAUDE);
	assert_int_equal(s.env_count, 2);
	assert_string_equal(s.env[0], "FOO=baz");
	assert_string_equal(s.env[1], "EMPTY=");
	assert_int_equal(s.label_count, 1);
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);
	set_ok(&s, "seccomp-profile", "");
	assert_null(s.seccomp_profile);
	set_ok(&s, "cpus", "0.01");
	set_ok(&s, "cpus", "2");

	/* -e KEY copies brig's environment, like docker -e KEY. */
	setenv("BRIG_TEST_PASSTHRU", "from-env", 1);
	set_ok(&s, "env", "BRIG_TEST_PASSTHRU");
	assert_string_equal(s.env[2], "BRIG_TEST_PASSTHRU=from-env");
	unsetenv("BRIG_TEST_PASSTHRU");
	EXPECT_ERR(brig_spec_set(&s, "env", "BRIG_TEST_PASSTHRU", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "not set in brig's environment");

	brig_spec copy;
	brig_spec_copy(&copy, &s);
	char h1[BRIG_HASH_SIZE], h2[BRIG_HASH_SIZE];
	ASSERT_OK(brig_spec_hash(h1, &s, &err), err);
	brig_spec_clear(&s);
	ASSERT_OK(brig_spec_hash(h2, &copy, &err), err);
	assert_string_equal(h1, h2);
	brig_spec_clear(&copy);
	brig_error_free(err);
}

static void test_setter_errors(void **state)
{
	set_bad("cpus", "0", "cpus: ", "0.01");
	set_bad("cpus", "-1", "cpus: ", "got '-1'");
	set_bad("cpus", "nan", "cpus: ", NULL);
	set_bad("cpus", "1e3", "cpus: ", NULL);
	set_bad("cpus", "2.", "cpus: ", NULL);
	set_bad("cpus", "99999", "cpus: ", NULL);
	set_bad("memory-mb", "0", "memory-mb: ", "from 1 to");
	set_bad("memory-mb", "12abc", "memory-mb: ", "got '12abc'");
	set_bad("memory-mb", "-5", "memory-mb: ", NULL);
	set_bad("memory-mb", "99999999999999999999", "memory-mb: ", NULL);
	set_bad("pids", "15", "pids: ", "from 16 to 1048576");
	set_bad("pids", "1048577", "pids: ", NULL);
	set_bad("workspace-mb", "0", "workspace-mb: ", NULL);
	set_bad("runtime-mb", "", "runtime-mb: ", NULL);
	set_bad("shm-mb", " 1", "shm-mb: ", NULL);
	set_bad("nofile", "10", "nofile: ", NULL);
	set_bad("workspace-inodes", "0", "workspace-inodes: ", NULL);
	set_bad("image", "", "image: ", NULL);
	set_bad("image", "a b", "image: ", NULL);
	set_bad("image", "-rm", "image: ", NULL);
	set_bad("user", "root", "user: ", "numeric uid:gid");
	set_bad("user", "0:0", "user: ", "root");
	set_bad("user", "1000:0", "user: ", "root");
	set_bad("user", "1000", "user: ", NULL);
	set_bad("harness", "gpt", "harness: ", "claude, codex or none");
	set_bad("seccomp-profile", "{not json", "seccomp-profile: ", NULL);
	set_bad("seccomp-profile", "[]", "seccomp-profile: ", NULL);
	set_bad("label", "brig.spec=x", "label: ", "brig's own");
	set_bad("label", "brig.managed=0", "label: ", NULL);
	set_bad("label", "noequals", "label: ", NULL);
	set_bad("label", "k=a\nb", "label: ", NULL);
	set_bad("colour", "blue", "unknown setting 'colour'", "memory-mb");
	set_bad(NULL, "x", "unknown setting", NULL);
}

static void test_network(void **state)
{
	set_bad("network", "host", "network: 'host' is refused: it would share the host's network stack; use none or isolated",
		NULL);
	set_bad("network", "container:abc", "network: 'container:...' is refused", "use none or isolated");
	set_bad("network", "bridge", "network: 'bridge' is refused", NULL);
	set_bad("network", "default", "network: ", NULL);
	set_bad("network", "overlay", "network: must be none, isolated or egress, got 'overlay'", NULL);
	set_bad("network", "", "network: ", NULL);
	brig_network n = BRIG_NET_ISOLATED;
	assert_int_equal(brig_network_parse(&n, "none", NULL), 0);
	assert_int_equal(n, BRIG_NET_NONE);
	assert_string_equal(brig_network_name(BRIG_NET_ISOLATED), "isolated");
	assert_string_equal(brig_harness_name(BRIG_HARNESS_CODEX), "codex");
	assert_string_equal(brig_kind_name(BRIG_KIND_RUN), "run");
}

static void test_subnet(void **state)
{
	static const char *const good[] = {"172.30.0.0/22", "10.0.0.0/8", "192.168.5.0/24", "100.64.0.0/16",
					   "172.16.0.0/12", "10.1.2.16/28"};
	static const char *const bad[] = {"172.30.0.1/22", "8.8.8.0/24", "169.254.0.0/16", "127.0.0.0/8",
					  "172.30.0.0",    "172.30.0.0/29", "172.30.0.0/7", "1.2.3/24",
					  "256.0.0.0/8",   "10.0.0.00/8",  "10.0.0.0/08", "10.0.0.0/24 ",
					  "",              "::1/128",      "172.32.0.0/16", "0.0.0.0/8"};
	brig_error *err = NULL;
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		ASSERT_OK(brig_subnet_validate(good[i], &err), err);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (brig_subnet_validate(bad[i], &err) != BRIG_EINVAL)
			fail_msg("subnet '%s' accepted", bad[i]);
		ASSERT_CONTAINS(err->message, "subnet: ");
	}
	assert_int_equal(brig_subnet_validate("172.30.0.1/22", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(err->message, "did you mean 172.30.0.0/22?");
	brig_error_free(err);
}

/* ---- validate ---- */

static void test_tmpfs_budget(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	s.memory_mb = 1024; /* 1024 - (512 + 256 + 64) = 192 < 256 */
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "workspace-mb (512)");
	ASSERT_CONTAINS(err->message, "runtime-mb (256)");
	ASSERT_CONTAINS(err->message, "shm-mb (64)");
	ASSERT_CONTAINS(err->message, "= 832 MB");
	ASSERT_CONTAINS(err->message, "memory-mb (1024)");
	ASSERT_CONTAINS(err->message, "leaving 192 MB");
	ASSERT_CONTAINS(err->message, "at least 256 MB");
	ASSERT_CONTAINS(err->message, "1088");
	s.memory_mb = 1088; /* exactly 256 left */
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);
	s.workspace_mb = 513;
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	/* Setting a field alone is fine; validate sees the sum. */
	s.workspace_mb = 512;
	set_ok(&s, "workspace-mb", "4000");
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	char h[BRIG_HASH_SIZE] = "x";
	EXPECT_ERR(brig_spec_hash(h, &s, &err), BRIG_EINVAL, &err);
	assert_string_equal(h, "");
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_host_limits(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	brig_host_limits small = {.mem_bytes = 1024LL * 1024 * 1024, .ncpu = 1};
	EXPECT_ERR(brig_spec_validate(&s, &small, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "memory-mb: 2048 MB is more than the host's 1024 MB");
	small.mem_bytes = 0; /* unknown: not checked */
	EXPECT_ERR(brig_spec_validate(&s, &small, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "cpus: 2 is more than the host's 1 CPUs");
	small.ncpu = 0;
	ASSERT_OK(brig_spec_validate(&s, &small, &err), err);
	s.pids = 0;
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "pids: must be from 16 to 1048576");
	s.pids = 256;
	s.cpus = 0.0;
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "cpus: ");
	s.cpus = 2.0;
	s.network = (brig_network)7;
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "network: ");
	s.network = BRIG_NET_NONE;
	s.version = 99;
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	s.version = BRIG_SPEC_VERSION;
	free(s.image);
	s.image = NULL;
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "image: ");
	brig_error_free(err);
	brig_spec_clear(&s);
}

/* ---- env ---- */

static void test_env_validation(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	EXPECT_ERR(brig_spec_add_env(&s, "SECRET=hunter2\n", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "SECRET");
	ASSERT_LACKS(err->message, "hunter2");
	EXPECT_ERR(brig_spec_add_env(&s, "SECRET=hun\rter2", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "SECRET");
	ASSERT_LACKS(err->message, "hun");
	EXPECT_ERR(brig_spec_set(&s, "env", "TOKEN=abc\xff\xfe", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "TOKEN");
	ASSERT_LACKS(err->message, "abc");
	EXPECT_ERR(brig_spec_add_env(&s, "=hunter2", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "empty key");
	ASSERT_LACKS(err->message, "hunter2");
	EXPECT_ERR(brig_spec_add_env(&s, "BAD\nKEY=hunter2", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "BAD\\x0aKEY");
	ASSERT_LACKS(err->message, "hunter2");
	/* `-e 'A B=1'`: a key no shell could export, named, value not shown. */
	EXPECT_ERR(brig_spec_add_env(&s, "A B=hunter2", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "key 'A B' contains a space");
	ASSERT_LACKS(err->message, "hunter2");
	EXPECT_ERR(brig_spec_add_env(&s, "A\tB=hunter2", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "control character");
	ASSERT_LACKS(err->message, "hunter2");
	EXPECT_ERR(brig_env_validate(" LEAD=hunter2", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "' LEAD'");
	ASSERT_LACKS(err->message, "hunter2");
	/* -e KEY (copied from brig's environment) gets the same key rule. */
	EXPECT_ERR(brig_spec_add_env(&s, "NO SUCH", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "contains a space");
	EXPECT_ERR(brig_env_validate("NOVALUE", &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "NOVALUE");
	assert_int_equal(s.env_count, 0);
	ASSERT_OK(brig_env_validate("K=tab\there = and spaces", &err), err);

	/* A value over the cap is refused without being echoed. */
	size_t big = 200 * 1024;
	char *e = malloc(big + 8);
	memcpy(e, "BIG=", 4);
	memset(e + 4, 'v', big);
	e[big + 4] = '\0';
	EXPECT_ERR(brig_spec_add_env(&s, e, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "BIG");
	ASSERT_LACKS(err->message, "vvvv");
	free(e);

	/* Many large entries stop at the total cap; replacing one does not
	 * count it twice. */
	size_t part = 100 * 1024;
	e = malloc(part + 16);
	int i;
	for (i = 0; i < 20; i++) {
		snprintf(e, 16, "K%02d=", i);
		memset(e + 4, 'v', part);
		e[part + 4] = '\0';
		if (brig_spec_add_env(&s, e, &err) != 0)
			break;
	}
	assert_int_equal(i, 10);
	ASSERT_CONTAINS(err->message, "larger than 1048576 bytes");
	ASSERT_LACKS(err->message, "vvvv");
	snprintf(e, 16, "K%02d=", 3);
	memset(e + 4, 'w', part);
	e[part + 4] = '\0';
	ASSERT_OK(brig_spec_add_env(&s, e, &err), err);
	assert_int_equal(s.env_count, 10);
	free(e);
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_env_credentials(void **state)
{
	assert_true(brig_env_is_credential("ANTHROPIC_API_KEY"));
	assert_true(brig_env_is_credential("CLAUDE_CODE_OAUTH_TOKEN"));
	assert_true(brig_env_is_credential("OPENAI_API_KEY=sk"));
	assert_false(brig_env_is_credential("OPENAI_API_KEY_X"));
	assert_false(brig_env_is_credential("ANTHROPIC_API"));
	assert_false(brig_env_is_credential(""));
	assert_false(brig_env_is_credential(NULL));
	const char *const *k = brig_env_credential_keys(BRIG_HARNESS_CLAUDE);
	assert_string_equal(k[0], "ANTHROPIC_API_KEY");
	assert_string_equal(k[1], "CLAUDE_CODE_OAUTH_TOKEN");
	assert_null(k[2]);
	k = brig_env_credential_keys(BRIG_HARNESS_CODEX);
	assert_string_equal(k[0], "OPENAI_API_KEY");
	assert_null(k[1]);
	assert_null(brig_env_credential_keys(BRIG_HARNESS_NONE)[0]);
}

/* Value of key in a JSON env array, or NULL. */
static const char *env_get(const json_t *arr, const char *key)
{
	size_t i, kl = strlen(key);
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		const char *s = json_string_value(v);
		if (strncmp(s, key, kl) == 0 && s[kl] == '=')
			return s + kl + 1;
	}
	return NULL;
}

static void test_exec_env(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	json_t *env = NULL;
	brig_spec_init(&s);
	set_ok(&s, "env", "FOO=bar");
	setenv("ANTHROPIC_API_KEY", "sk-ant-from-host", 1);
	setenv("OPENAI_API_KEY", "sk-oai-from-host", 1);

	/* harness none forwards nothing */
	ASSERT_OK(brig_spec_exec_env(&env, &s, NULL, 0, &err), err);
	assert_string_equal(env_get(env, "FOO"), "bar");
	assert_null(env_get(env, "ANTHROPIC_API_KEY"));
	assert_null(env_get(env, "OPENAI_API_KEY"));
	json_decref(env);

	/* claude forwards ANTHROPIC_API_KEY only */
	set_ok(&s, "harness", "claude");
	ASSERT_OK(brig_spec_exec_env(&env, &s, NULL, 0, &err), err);
	assert_string_equal(env_get(env, "ANTHROPIC_API_KEY"), "sk-ant-from-host");
	assert_null(env_get(env, "OPENAI_API_KEY"));
	assert_null(env_get(env, "CLAUDE_CODE_OAUTH_TOKEN")); /* unset on the host */
	json_decref(env);

	/* with a secret its placeholder stands in: nothing is forwarded */
	brig_spec sec;
	brig_spec_copy(&sec, &s);
	set_ok(&sec, "network", "egress");
	set_ok(&sec, "secret", "ANTHROPIC_API_KEY@api.anthropic.com");
	ASSERT_OK(brig_spec_exec_env(&env, &sec, NULL, 0, &err), err);
	assert_null(env_get(env, "ANTHROPIC_API_KEY"));
	assert_string_equal(env_get(env, "FOO"), "bar");
	json_decref(env);
	brig_spec_clear(&sec);

	/* codex forwards OPENAI_API_KEY only */
	set_ok(&s, "harness", "codex");
	ASSERT_OK(brig_spec_exec_env(&env, &s, NULL, 0, &err), err);
	assert_string_equal(env_get(env, "OPENAI_API_KEY"), "sk-oai-from-host");
	assert_null(env_get(env, "ANTHROPIC_API_KEY"));
	json_decref(env);

	/* The caller's own credential wins; nothing else is forwarded beside it. */
	set_ok(&s, "harness", "claude");
	set_ok(&s, "env", "CLAUDE_CODE_OAUTH_TOKEN=oauth-from-caller");
	ASSERT_OK(brig_spec_exec_env(&env, &s, NULL, 0, &err), err);
	assert_string_equal(env_get(env, "CLAUDE_CODE_OAUTH_TOKEN"), "oauth-from-caller");
	assert_null(env_get(env, "ANTHROPIC_API_KEY"));
	json_decref(env);

	/* The exec's own env is added and overrides the spec's. */
	const char *extra[] = {"FOO=exec", "BAR=1"};
	ASSERT_OK(brig_spec_exec_env(&env, &s, extra, 2, &err), err);
	assert_string_equal(env_get(env, "FOO"), "exec");
	assert_string_equal(env_get(env, "BAR"), "1");
	assert_int_equal(json_array_size(env), 3);
	json_decref(env);

	/* An empty host value is not forwarded; a bad one is refused unseen. */
	const char *none[] = {"X=1"};
	setenv("ANTHROPIC_API_KEY", "", 1);
	ASSERT_OK(brig_env_exec(&env, none, 1, BRIG_HARNESS_CLAUDE, &err), err);
	assert_null(env_get(env, "ANTHROPIC_API_KEY"));
	json_decref(env);
	setenv("ANTHROPIC_API_KEY", "sk-line1\nline2", 1);
	EXPECT_ERR(brig_env_exec(&env, none, 1, BRIG_HARNESS_CLAUDE, &err), BRIG_EINVAL, &err);
	assert_null(env);
	ASSERT_CONTAINS(err->message, "ANTHROPIC_API_KEY");
	ASSERT_LACKS(err->message, "sk-line1");
	const char *bad[] = {"S=hunter2\n"};
	EXPECT_ERR(brig_env_exec(&env, bad, 1, BRIG_HARNESS_NONE, &err), BRIG_EINVAL, &err);
	ASSERT_LACKS(err->message, "hunter2");

	unsetenv("ANTHROPIC_API_KEY");
	unsetenv("OPENAI_API_KEY");
	brig_error_free(err);
	brig_spec_clear(&s);
}

/* ---- hash ---- */

static void hash_of(char out[BRIG_HASH_SIZE], const brig_spec *s)
{
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_hash(out, s, &err), err);
}

/* The default seccomp profile: socket only for the four families (every
 * other family meets the default, EPERM); socketcall and the mq_* calls not
 * allowed. */
static void test_seccomp_profile(void **state)
{
	(void)state;
	json_error_t jerr;
	json_t *p = json_loads(brig_spec_seccomp_default(), 0, &jerr);
	assert_non_null(p);
	size_t i, k;
	json_t *r, *n;
	int allowed_families = 0;
	json_array_foreach(json_object_get(p, "syscalls"), i, r)
	{
		const char *action = json_string_value(json_object_get(r, "action"));
		json_t *args = json_object_get(r, "args");
		json_array_foreach(json_object_get(r, "names"), k, n)
		{
			const char *name = json_string_value(n);
			if (strcmp(action, "SCMP_ACT_ALLOW") == 0) {
				assert_true(strcmp(name, "socketcall") != 0);
				assert_true(strncmp(name, "mq_", 3) != 0);
			}
			if (strcmp(name, "socket") != 0)
				continue;
			assert_int_equal(json_array_size(args), 1); /* never unconditional */
			json_int_t af = json_integer_value(json_object_get(json_array_get(args, 0), "value"));
			assert_string_equal(action, "SCMP_ACT_ALLOW");
			assert_true(af == 1 || af == 2 || af == 10 || af == 16);
			allowed_families++;
		}
	}
	assert_int_equal(allowed_families, 4);
	/* No 32-bit x86 entry: socketcall would carry any family through it. */
	assert_null(strstr(brig_spec_seccomp_default(), "\"SCMP_ARCH_X86\""));
	json_decref(p);
}

static void test_hash(void **state)
{
	brig_spec s;
	char base[BRIG_HASH_SIZE], h[BRIG_HASH_SIZE];
	brig_spec_init(&s);
	hash_of(base, &s);
	/* Pinned (checked independently with Python json+hashlib over the
	 * canonical form): the default spec's hash may only change together with
	 * BRIG_SPEC_POLICY (or a new spec field), since computers are adopted
	 * by it. */
	assert_string_equal(base, "e775ffc5538ce9d05c6c200de5539bd43183442ca9128b19a82cc0d680456d34");
	hash_of(h, &s);
	assert_string_equal(base, h);

	/* Each field changes the hash. */
	static const char *const changes[][2] = {
		{"image", "other:tag"},     {"user", "1000:1001"},     {"cpus", "1.5"},
		{"memory-mb", "4096"},      {"pids", "512"},           {"workspace-mb", "256"},
		{"runtime-mb", "128"},      {"shm-mb", "32"},          {"workspace-inodes", "1000"},
		{"runtime-inodes", "1000"}, {"nofile", "2048"},        {"network", "isolated"},
		{"harness", "claude"},      {"harness", "codex"},      {"env", "FOO=bar"},
		{"label", "brig.test=1"},   {"seccomp-profile", "{}"}, {"runtime", "runsc"},
		{"runtime", "runc"},
	};
	for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
		brig_spec t;
		brig_spec_init(&t);
		set_ok(&t, changes[i][0], changes[i][1]);
		hash_of(h, &t);
		if (strcmp(h, base) == 0)
			fail_msg("setting %s=%s did not change the spec hash", changes[i][0], changes[i][1]);
		brig_spec_clear(&t);
	}
	/* An env value change counts through a salt (keyed digests), never
	 * as the value itself: unsalted, only the keys count. */
	brig_spec t;
	char h2[BRIG_HASH_SIZE], h3[BRIG_HASH_SIZE];
	static const char salt[] = "00112233445566778899aabbccddeeff";
	brig_error *herr = NULL;
	brig_spec_init(&t);
	set_ok(&t, "env", "FOO=1");
	hash_of(h, &t);
	ASSERT_OK(brig_spec_hash_salted(h2, &t, salt, &herr), herr);
	set_ok(&t, "env", "FOO=2");
	hash_of(h3, &t);
	assert_string_equal(h, h3);
	ASSERT_OK(brig_spec_hash_salted(h3, &t, salt, &herr), herr);
	assert_string_not_equal(h2, h3);
	ASSERT_OK(brig_spec_hash_salted(h, &t, "ffeeddccbbaa99887766554433221100", &herr), herr);
	assert_string_not_equal(h, h3); /* another salt, other digests */
	assert_int_equal(brig_spec_hash_salted(h, &t, "short", &herr), BRIG_EINVAL);
	assert_string_equal(h, "");
	brig_error_free(herr);
	herr = NULL;
	assert_int_equal(brig_spec_hash_salted(h, &t, "00112233445566778899AABBCCDDEEFF", &herr), BRIG_EINVAL);
	brig_error_free(herr);
	brig_spec_clear(&t);
	/* Without env the salt changes nothing. */
	brig_spec_init(&t);
	ASSERT_OK(brig_spec_hash_salted(h, &t, salt, NULL), NULL);
	assert_string_equal(h, base);
	brig_spec_clear(&t);

	/* Credentials never count. */
	for (size_t i = 0; i < 3; i++) {
		brig_spec_init(&t);
		char *e = NULL;
		assert_true(asprintf(&e, "%s=secret-%zu", CRED_KEYS[i], i) > 0);
		set_ok(&t, "env", e);
		free(e);
		hash_of(h, &t);
		assert_string_equal(h, base);
		brig_spec_clear(&t);
	}

	/* Env order does not count; the subnet counts only when isolated. */
	brig_spec_init(&t);
	set_ok(&t, "env", "A=1");
	set_ok(&t, "env", "B=2");
	hash_of(h, &t);
	brig_spec_clear(&t);
	brig_spec_init(&t);
	set_ok(&t, "env", "B=2");
	set_ok(&t, "env", "A=1");
	hash_of(h2, &t);
	assert_string_equal(h, h2);
	brig_spec_clear(&t);

	brig_spec_init(&t);
	set_ok(&t, "subnet", "10.9.0.0/24");
	hash_of(h, &t);
	assert_string_equal(h, base);
	set_ok(&t, "network", "isolated");
	hash_of(h, &t);
	set_ok(&t, "subnet", "172.30.0.0/22");
	hash_of(h2, &t);
	assert_string_not_equal(h, h2);
	brig_spec_clear(&t);
	brig_spec_clear(&s);
}

static void test_to_from_json(void **state)
{
	brig_spec s, back;
	brig_error *err = NULL;
	char h1[BRIG_HASH_SIZE], h2[BRIG_HASH_SIZE];
	brig_spec_init(&s);
	set_ok(&s, "cpus", "1.25");
	set_ok(&s, "network", "isolated");
	set_ok(&s, "subnet", "10.1.0.0/24");
	set_ok(&s, "harness", "codex");
	set_ok(&s, "env", "VISIBLE=value1");
	set_ok(&s, "env", "OPENAI_API_KEY=sk-very-secret");
	set_ok(&s, "label", "brig.test=t1");
	set_ok(&s, "runtime", "runsc");

	json_t *pub = brig_spec_to_json(&s, 0);
	char *text = dump(pub);
	ASSERT_CONTAINS(text, "\"env\":[\"VISIBLE\"]");
	ASSERT_LACKS(text, "value1");
	ASSERT_LACKS(text, "OPENAI");
	ASSERT_LACKS(text, "sk-very-secret");
	ASSERT_CONTAINS(text, "\"cpus\":1.25");
	ASSERT_CONTAINS(text, "\"memory_mb\":2048");
	ASSERT_CONTAINS(text, "\"network\":\"isolated\"");
	free(text);
	json_decref(pub);

	json_t *priv = brig_spec_to_json(&s, BRIG_SPEC_JSON_ENV_VALUES);
	text = dump(priv);
	ASSERT_CONTAINS(text, "VISIBLE=value1");
	ASSERT_LACKS(text, "sk-very-secret");
	free(text);
	ASSERT_OK(brig_spec_from_json(&back, priv, &err), err);
	hash_of(h1, &s);
	hash_of(h2, &back);
	assert_string_equal(h1, h2);
	assert_true(back.cpus == 1.25);
	assert_string_equal(back.runtime, "runsc");
	brig_spec_clear(&back);

	/* A stored bare key is never looked up in brig's environment. */
	setenv("VISIBLE", "leak", 1);
	json_t *keys_only = brig_spec_to_json(&s, 0);
	EXPECT_ERR(brig_spec_from_json(&back, keys_only, &err), BRIG_EINVAL, &err);
	unsetenv("VISIBLE");
	assert_string_equal(back.image, BRIG_DEFAULT_IMAGE); /* left at defaults */
	brig_spec_clear(&back);
	json_decref(keys_only);

	json_object_set_new(priv, "pids", json_string("many"));
	EXPECT_ERR(brig_spec_from_json(&back, priv, &err), BRIG_EPROTO, &err);
	brig_spec_clear(&back);
	json_object_set_new(priv, "pids", json_integer(1));
	EXPECT_ERR(brig_spec_from_json(&back, priv, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "pids: ");
	brig_spec_clear(&back);
	json_decref(priv);
	brig_error_free(err);
	brig_spec_clear(&s);
}

/* ---- Docker bodies ---- */

static json_t *computer_body(brig_spec *s)
{
	brig_error *err = NULL;
	brig_identity id = {"acme", "coder", "sess-1", 1};
	char name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	brig_container_opts o = {.version = BRIG_CONTAINER_OPTS_VERSION, .kind = BRIG_KIND_COMPUTER, .id = &id, .name = name};
	json_t *body = NULL;
	ASSERT_OK(brig_spec_container_json(&body, s, &o, &err), err);
	return body;
}

#define GET(obj, key) json_object_get((obj), (key))

/* With brig-init: PID 1 from its read-only volume, no docker-init. */
static void test_container_computer_init(void **state)
{
	brig_spec s;
	brig_spec_init(&s);
	brig_error *err = NULL;
	brig_identity id = {"acme", "coder", "sess-1", 1};
	char name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	brig_container_opts o = {.version = BRIG_CONTAINER_OPTS_VERSION,
				 .kind = BRIG_KIND_COMPUTER,
				 .id = &id,
				 .name = name,
				 .init_hash = "0123456789abcdef"};
	json_t *c = NULL;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	json_t *hc = GET(c, "HostConfig");
	assert_true(json_is_false(GET(hc, "Init")));
	char *t = dump(GET(c, "Entrypoint"));
	assert_string_equal(t, "[\"/.brig/brig-init\",\"init\"]");
	free(t);
	assert_string_equal(json_string_value(GET(GET(c, "Labels"), BRIG_LABEL_INIT)), "0123456789abcdef");
	json_t *mounts = GET(hc, "Mounts");
	json_t *m = json_array_get(mounts, json_array_size(mounts) - 1);
	assert_string_equal(json_string_value(GET(m, "Source")), "brig-init-0123456789abcdef");
	assert_string_equal(json_string_value(GET(m, "Target")), "/.brig");
	assert_true(json_is_true(GET(m, "ReadOnly")));
	json_decref(c);

	/* gVisor's copy: readable, same label */
	o.gvisor = true;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	mounts = GET(GET(c, "HostConfig"), "Mounts");
	m = json_array_get(mounts, json_array_size(mounts) - 1);
	assert_string_equal(json_string_value(GET(m, "Source")), "brig-init-0123456789abcdef-r");
	assert_string_equal(json_string_value(GET(GET(c, "Labels"), BRIG_LABEL_INIT)), "0123456789abcdef");
	assert_int_equal(json_integer_value(GET(GET(c, "HostConfig"), "PidsLimit")), 256 * 10 + 128);
	/* runsc cannot start in the daemon's remapped user namespace */
	assert_string_equal(json_string_value(GET(GET(c, "HostConfig"), "UsernsMode")), "host");
	json_decref(c);
	o.gvisor = false;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_null(json_object_get(GET(c, "HostConfig"), "UsernsMode"));
	json_decref(c);

	o.init_hash = "../../etc";
	assert_int_equal(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL);
	brig_error_free(err);
	brig_spec_clear(&s);
}

/* A run with brig-init: PID 1 holds the run's lifetime (it ends the
 * container itself), from the same read-only volume, no docker-init. */
static void test_container_run_init(void **state)
{
	brig_spec s;
	brig_spec_init(&s);
	brig_error *err = NULL;
	brig_container_opts o = {.version = BRIG_CONTAINER_OPTS_VERSION,
				 .kind = BRIG_KIND_RUN,
				 .name = "brig-run-0123456789abcdef01234567",
				 .lifetime_s = 70,
				 .outbox_mb = 16,
				 .init_hash = "0123456789abcdef"};
	json_t *c = NULL;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	json_t *hc = GET(c, "HostConfig");
	assert_true(json_is_false(GET(hc, "Init")));
	assert_true(json_is_true(GET(hc, "AutoRemove")));
	char *t = dump(GET(c, "Entrypoint"));
	assert_string_equal(t, "[\"/.brig/brig-init\",\"init\",\"--lifetime\",\"70\"]");
	free(t);
	assert_string_equal(json_string_value(GET(GET(c, "Labels"), BRIG_LABEL_INIT)), "0123456789abcdef");
	json_t *mounts = GET(hc, "Mounts");
	json_t *m = json_array_get(mounts, json_array_size(mounts) - 1);
	assert_string_equal(json_string_value(GET(m, "Source")), "brig-init-0123456789abcdef");
	assert_true(json_is_true(GET(m, "ReadOnly")));
	json_decref(c);

	/* without: docker-init and sleep, as before */
	o.init_hash = NULL;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_true(json_is_true(GET(GET(c, "HostConfig"), "Init")));
	t = dump(GET(c, "Entrypoint"));
	assert_string_equal(t, "[\"sleep\",\"70\"]");
	free(t);
	assert_null(GET(GET(c, "Labels"), BRIG_LABEL_INIT));
	json_decref(c);

	o.init_hash = "0123456789ABCDEF";
	assert_int_equal(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL);
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_container_computer(void **state)
{
	brig_spec s;
	brig_spec_init(&s);
	set_ok(&s, "env", "FOO=bar");
	set_ok(&s, "env", "ANTHROPIC_API_KEY=sk-ant-secret");
	set_ok(&s, "env", "OPENAI_API_KEY=sk-oai-secret");
	set_ok(&s, "harness", "claude");
	json_t *c = computer_body(&s);
	json_t *hc = GET(c, "HostConfig");

	/* The seed's figures, exactly. */
	assert_string_equal(json_string_value(GET(c, "User")), "1000:1000");
	assert_string_equal(json_string_value(GET(c, "Image")), "brig-sandbox:local");
	assert_true(json_is_true(GET(hc, "ReadonlyRootfs")));
	char *t = dump(GET(hc, "CapDrop"));
	assert_string_equal(t, "[\"ALL\"]");
	free(t);
	/* no-new-privileges, then brig's own seccomp profile. */
	json_t *so = GET(hc, "SecurityOpt");
	assert_int_equal(json_array_size(so), 2);
	assert_string_equal(json_string_value(json_array_get(so, 0)), "no-new-privileges");
	t = malloc(strlen(brig_spec_seccomp_default()) + 16);
	sprintf(t, "seccomp=%s", brig_spec_seccomp_default());
	assert_string_equal(json_string_value(json_array_get(so, 1)), t);
	free(t);
	assert_string_equal(json_string_value(GET(hc, "NetworkMode")), "none");
	assert_int_equal(json_integer_value(GET(hc, "Memory")), 2147483648LL);
	assert_int_equal(json_integer_value(GET(hc, "MemorySwap")), 2147483648LL);
	assert_int_equal(json_integer_value(GET(hc, "NanoCpus")), 2000000000LL);
	assert_int_equal(json_integer_value(GET(hc, "PidsLimit")), 256);
	assert_true(json_is_false(GET(hc, "Privileged")));
	assert_true(json_is_null(GET(hc, "Binds")));
	assert_true(json_is_null(GET(hc, "CapAdd")));
	assert_null(GET(hc, "Tmpfs"));
	assert_null(GET(hc, "PortBindings"));
	assert_true(json_is_true(GET(hc, "Init")));
	assert_true(json_is_false(GET(hc, "AutoRemove")));
	assert_int_equal(json_integer_value(GET(hc, "ShmSize")), 64LL * 1024 * 1024);
	assert_string_equal(json_string_value(GET(hc, "IpcMode")), "private");
	t = dump(GET(hc, "Ulimits"));
	assert_string_equal(t, "[{\"Hard\":1024,\"Name\":\"nofile\",\"Soft\":1024},{\"Hard\":0,\"Name\":\"core\",\"Soft\":0}]");
	free(t);
	t = dump(GET(hc, "LogConfig"));
	assert_string_equal(t, "{\"Config\":{},\"Type\":\"none\"}"); /* no dockerd-side logging */
	free(t);
	assert_string_equal(json_string_value(GET(hc, "CgroupnsMode")), "private");
	t = dump(GET(hc, "MaskedPaths"));
	/* Docker's defaults kept, the kernel's build, crash and symbol tables added. */
	assert_non_null(strstr(t, "\"/proc/kcore\""));
	assert_non_null(strstr(t, "\"/proc/keys\""));
	assert_non_null(strstr(t, "\"/sys/firmware\""));
	assert_non_null(strstr(t, "\"/proc/interrupts\""));
	assert_non_null(strstr(t, "\"/proc/config.gz\""));
	assert_non_null(strstr(t, "\"/proc/kallsyms\""));
	assert_non_null(strstr(t, "\"/sys/kernel/vmcoreinfo\""));
	free(t);
	t = dump(GET(c, "Entrypoint"));
	assert_string_equal(t, "[\"sleep\",\"2147483647\"]");
	free(t);
	assert_true(json_is_null(GET(c, "Cmd")));
	assert_string_equal(json_string_value(GET(c, "WorkingDir")), "/workspace");
	assert_true(json_is_false(GET(c, "Tty")));
	assert_true(json_is_false(GET(c, "OpenStdin")));
	assert_true(json_is_false(GET(c, "AttachStdout")));

	/* Env: HOME on the runtime volume, the caller's env, no credential. */
	t = dump(GET(c, "Env"));
	assert_string_equal(t, "[\"HOME=/runtime\",\"FOO=bar\"]");
	free(t);
	t = dump(c);
	ASSERT_LACKS(t, "sk-ant-secret");
	ASSERT_LACKS(t, "sk-oai-secret");
	ASSERT_LACKS(t, "ANTHROPIC_API_KEY");
	ASSERT_LACKS(t, "OPENAI_API_KEY");
	free(t);

	/* Labels carry the identity, harness and spec hash. */
	json_t *l = GET(c, "Labels");
	char hash[BRIG_HASH_SIZE];
	hash_of(hash, &s);
	assert_string_equal(json_string_value(GET(l, "brig.spec")), hash);
	assert_string_equal(json_string_value(GET(l, "brig.harness")), "claude");
	assert_string_equal(json_string_value(GET(l, "brig.kind")), "computer");
	brig_identity id = {"acme", "coder", "sess-1", 1};
	brig_error *err = NULL;
	ASSERT_OK(brig_labels_match(l, &id, hash, &err), err);

	/* Two named tmpfs volumes after the container. */
	json_t *m = GET(hc, "Mounts");
	assert_int_equal(json_array_size(m), 2);
	char name[BRIG_NAME_SIZE], want[128];
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	static const char *const tgt[] = {"/workspace", "/runtime"};
	static const char *const o[] = {
		"size=512m,uid=1000,gid=1000,mode=0700,nr_inodes=65536,nosuid,nodev",
		"size=256m,uid=1000,gid=1000,mode=0700,nr_inodes=32768,nosuid,nodev",
	};
	for (size_t i = 0; i < 2; i++) {
		json_t *e = json_array_get(m, i);
		assert_string_equal(json_string_value(GET(e, "Type")), "volume");
		snprintf(want, sizeof want, "%s-%s", name, i ? "runtime" : "workspace");
		assert_string_equal(json_string_value(GET(e, "Source")), want);
		assert_string_equal(json_string_value(GET(e, "Target")), tgt[i]);
		json_t *vo = GET(e, "VolumeOptions");
		assert_true(json_is_true(GET(vo, "NoCopy")));
		json_t *dc = GET(vo, "DriverConfig");
		assert_string_equal(json_string_value(GET(dc, "Name")), "local");
		assert_string_equal(json_string_value(GET(GET(dc, "Options"), "o")), o[i]);
		assert_string_equal(json_string_value(GET(GET(dc, "Options"), "type")), "tmpfs");
		assert_string_equal(json_string_value(GET(GET(vo, "Labels"), "brig.container")), name);
		assert_string_equal(json_string_value(GET(GET(vo, "Labels"), "brig.kind")), "volume");
	}
	json_decref(c);

	/* Isolated networking and a seccomp profile. */
	set_ok(&s, "network", "isolated");
	set_ok(&s, "seccomp-profile", "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}");
	set_ok(&s, "env", "HOME=/workspace");
	c = computer_body(&s);
	hc = GET(c, "HostConfig");
	assert_string_equal(json_string_value(GET(hc, "NetworkMode")), "brig-sandbox");
	t = dump(GET(hc, "SecurityOpt"));
	assert_string_equal(t, "[\"no-new-privileges\",\"seccomp={\\\"defaultAction\\\":\\\"SCMP_ACT_ALLOW\\\"}\"]");
	free(t);
	t = dump(GET(c, "Env"));
	assert_string_equal(t, "[\"FOO=bar\",\"HOME=/workspace\"]");
	free(t);
	json_decref(c);
	brig_spec_clear(&s);
}

/* The runtime: a daemon's name or NULL for its default; in the hash only
 * when chosen, in the body as HostConfig.Runtime. */
static void test_runtime(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	char base[BRIG_HASH_SIZE], h[BRIG_HASH_SIZE];
	brig_spec_init(&s);
	assert_null(s.runtime);
	hash_of(base, &s);
	json_t *body = computer_body(&s);
	assert_null(json_object_get(json_object_get(body, "HostConfig"), "Runtime"));
	json_decref(body);

	set_ok(&s, "runtime", "runsc-host.v2_x");
	assert_string_equal(s.runtime, "runsc-host.v2_x");
	body = computer_body(&s);
	assert_string_equal(json_string_value(json_object_get(json_object_get(body, "HostConfig"), "Runtime")),
			    "runsc-host.v2_x");
	json_decref(body);
	brig_spec copy;
	brig_spec_copy(&copy, &s);
	assert_string_equal(copy.runtime, "runsc-host.v2_x");
	brig_spec_clear(&copy);
	json_t *j = brig_spec_to_json(&s, 0);
	assert_string_equal(json_string_value(json_object_get(j, "runtime")), "runsc-host.v2_x");
	json_decref(j);

	set_ok(&s, "runtime", ""); /* back to the daemon's default */
	assert_null(s.runtime);
	hash_of(h, &s);
	assert_string_equal(h, base);
	j = brig_spec_to_json(&s, 0);
	assert_string_equal(json_string_value(json_object_get(j, "runtime")), "");
	brig_spec back;
	ASSERT_OK(brig_spec_from_json(&back, j, &err), err);
	assert_null(back.runtime);
	brig_spec_clear(&back);
	json_decref(j);

	set_bad("runtime", "-runsc", "runtime: ", "such as runsc");
	set_bad("runtime", "run sc", "runtime: ", NULL);
	set_bad("runtime", "runsc;rm", "runtime: ", NULL);
	set_bad("runtime",
		"a\x01"
		"b",
		"runtime: ", "\\x01");
	char longname[70];
	memset(longname, 'a', 64);
	longname[64] = '\0';
	set_bad("runtime", longname, "runtime: ", "1-63");
	longname[63] = '\0';
	set_ok(&s, "runtime", longname);

	/* validate catches a bad name assigned directly */
	free(s.runtime);
	s.runtime = strdup("bad name");
	EXPECT_ERR(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "runtime: ");
	brig_error_free(err);
	assert_int_equal(brig_runtime_validate(NULL, NULL), BRIG_EINVAL);
	brig_spec_clear(&s);
}

static void test_container_run(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	json_t *c = NULL;
	brig_spec_init(&s);
	brig_container_opts o = {.version = BRIG_CONTAINER_OPTS_VERSION,
				 .kind = BRIG_KIND_RUN,
				 .lifetime_s = 600,
				 .inbox_mb = 64,
				 .outbox_mb = BRIG_DEFAULT_OUT_MB,
				 .run_id = "r-1234",
				 .deadline_unix = 1800000000};
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	json_t *hc = GET(c, "HostConfig");
	assert_true(json_is_true(GET(hc, "AutoRemove")));
	char *t = dump(GET(c, "Entrypoint"));
	assert_string_equal(t, "[\"sleep\",\"600\"]");
	free(t);
	json_t *l = GET(c, "Labels");
	assert_string_equal(json_string_value(GET(l, "brig.kind")), "run");
	assert_string_equal(json_string_value(GET(l, "brig.run")), "r-1234");
	assert_string_equal(json_string_value(GET(l, "brig.deadline")), "1800000000");
	assert_null(GET(l, "brig.ns"));
	json_t *m = GET(hc, "Mounts");
	assert_int_equal(json_array_size(m), 4);
	static const char *const tgt[] = {"/workspace", "/runtime", "/inbox", "/outbox"};
	static const char *const opt[] = {
		"size=512m,uid=1000,gid=1000,mode=0700,nr_inodes=65536,nosuid,nodev",
		"size=256m,uid=1000,gid=1000,mode=0700,nr_inodes=32768,nosuid,nodev",
		"size=64m,uid=0,gid=0,mode=0755,nr_inodes=65536,nosuid,nodev",
		"size=256m,uid=1000,gid=1000,mode=0700,nr_inodes=65536,nosuid,nodev",
	};
	for (size_t i = 0; i < 4; i++) {
		json_t *e = json_array_get(m, i);
		assert_null(GET(e, "Source")); /* anonymous: removed with the container */
		assert_string_equal(json_string_value(GET(e, "Target")), tgt[i]);
		assert_string_equal(
			json_string_value(GET(GET(GET(GET(e, "VolumeOptions"), "DriverConfig"), "Options"), "o")), opt[i]);
	}
	json_decref(c);

	/* A daemon with userns-remap: the local driver mounts on the host, so
	 * the owners are the host ids the container's map to; plain tmpfs
	 * (mounted inside the user namespace) keeps the container's. Version 1
	 * opts have no shift. */
	o.shift = (brig_idshift){100000, 200000};
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	static const char *const shifted[] = {
		"size=512m,uid=101000,gid=201000,mode=0700,nr_inodes=65536,nosuid,nodev",
		"size=256m,uid=101000,gid=201000,mode=0700,nr_inodes=32768,nosuid,nodev",
		"size=64m,uid=100000,gid=200000,mode=0755,nr_inodes=65536,nosuid,nodev",
	};
	m = GET(GET(c, "HostConfig"), "Mounts");
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(json_string_value(GET(GET(GET(GET(json_array_get(m, i), "VolumeOptions"),
								  "DriverConfig"),
							      "Options"),
						      "o")),
				    shifted[i]);
	json_decref(c);
	o.plain_tmpfs = true;
	o.inbox_mb = o.outbox_mb = 0;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	ASSERT_CONTAINS(json_string_value(GET(GET(GET(c, "HostConfig"), "Tmpfs"), "/workspace")), "uid=1000,gid=1000");
	json_decref(c);
	o.plain_tmpfs = false;
	o.inbox_mb = 64;
	o.outbox_mb = BRIG_DEFAULT_OUT_MB;
	o.version = 1;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_string_equal(json_string_value(GET(GET(GET(GET(json_array_get(GET(GET(c, "HostConfig"), "Mounts"), 0),
								 "VolumeOptions"),
							     "DriverConfig"),
						     "Options"),
					     "o")),
			    opt[0]);
	json_decref(c);
	o.version = BRIG_CONTAINER_OPTS_VERSION;
	o.shift = (brig_idshift){0, 0};
	json_t *vj = NULL;
	brig_idshift sh = {100000, 100000};
	ASSERT_OK(brig_spec_volume_json_shifted(&vj, &s, "brig-x", BRIG_VOLUME_WORKSPACE, NULL, &sh, &err), err);
	ASSERT_CONTAINS(json_string_value(GET(GET(vj, "DriverOpts"), "o")), "uid=101000,gid=101000");
	json_decref(vj);

	/* The run's inbox and outbox count against memory too. */
	o.inbox_mb = 700;
	o.outbox_mb = 300;
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	assert_null(c);
	ASSERT_CONTAINS(err->message, "inbox (700)");
	ASSERT_CONTAINS(err->message, "outbox (300)");
	o.inbox_mb = 0;
	o.outbox_mb = 0;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_int_equal(json_array_size(GET(GET(c, "HostConfig"), "Mounts")), 2);
	assert_null(GET(GET(c, "HostConfig"), "Tmpfs"));
	json_decref(c);

	/* plain_tmpfs: the same options as HostConfig.Tmpfs, executable, no volumes. */
	o.plain_tmpfs = true;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	hc = GET(c, "HostConfig");
	assert_int_equal(json_array_size(GET(hc, "Mounts")), 0);
	json_t *tmpfs = GET(hc, "Tmpfs");
	assert_int_equal(json_object_size(tmpfs), 2);
	assert_string_equal(json_string_value(GET(tmpfs, "/workspace")),
			    "exec,size=512m,uid=1000,gid=1000,mode=0700,nr_inodes=65536,nosuid,nodev");
	assert_string_equal(json_string_value(GET(tmpfs, "/runtime")),
			    "exec,size=256m,uid=1000,gid=1000,mode=0700,nr_inodes=32768,nosuid,nodev");
	json_decref(c);
	/* ...and never with an inbox or outbox: the archive endpoints cannot reach it. */
	o.outbox_mb = 16;
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	assert_null(c);
	ASSERT_CONTAINS(err->message, "archive endpoints");
	o.outbox_mb = 0;
	o.inbox_mb = 16;
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	o.inbox_mb = 0;
	o.plain_tmpfs = false;
	/* network_disabled: Config.NetworkDisabled, the recorded mode still none... */
	o.network_disabled = true;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_true(json_is_true(GET(c, "NetworkDisabled")));
	assert_string_equal(json_string_value(GET(GET(c, "HostConfig"), "NetworkMode")), "none");
	json_t *sysctls = GET(GET(c, "HostConfig"), "Sysctls");
	assert_int_equal(json_object_size(sysctls), 3);
	assert_string_equal(json_string_value(GET(sysctls, "net.ipv6.conf.all.disable_ipv6")), "1");
	assert_string_equal(json_string_value(GET(sysctls, "net.ipv6.conf.default.disable_ipv6")), "1");
	assert_string_equal(json_string_value(GET(sysctls, "net.ipv6.conf.lo.disable_ipv6")), "1");
	json_decref(c);
	/* ...and never on the isolated bridge, which is Docker's network sandbox. */
	s.network = BRIG_NET_ISOLATED;
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	assert_null(c);
	ASSERT_CONTAINS(err->message, "network disabled: only for network none");
	o.network_disabled = false;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_null(GET(c, "NetworkDisabled"));
	assert_null(GET(GET(c, "HostConfig"), "Sysctls"));
	json_decref(c);
	s.network = BRIG_NET_NONE;
	o.lifetime_s = 0;
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	ASSERT_CONTAINS(err->message, "lifetime: ");
	o.lifetime_s = 10;
	o.run_id = "bad id";
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	o.run_id = NULL;
	o.version = 0;
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	o.version = BRIG_CONTAINER_OPTS_VERSION;
	o.kind = BRIG_KIND_COMPUTER; /* no identity */
	EXPECT_ERR(brig_spec_container_json(&c, &s, &o, &err), BRIG_EINVAL, &err);
	EXPECT_ERR(brig_spec_container_json(&c, &s, NULL, &err), BRIG_EINVAL, &err);
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_volume_json(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	json_t *v = NULL;
	brig_spec_init(&s);
	json_t *labels = json_pack("{s:s}", "brig.test", "t1");
	ASSERT_OK(brig_spec_volume_json(&v, &s, "brig-abc", BRIG_VOLUME_WORKSPACE, labels, &err), err);
	char *t = dump(v);
	assert_string_equal(t, "{\"Driver\":\"local\",\"DriverOpts\":{\"device\":\"tmpfs\",\"o\":\"size=512m,uid=1000,"
			       "gid=1000,mode=0700,nr_inodes=65536,nosuid,nodev\",\"type\":\"tmpfs\"},\"Labels\":{"
			       "\"brig.container\":\"brig-abc\",\"brig.kind\":\"volume\",\"brig.managed\":\"1\","
			       "\"brig.test\":\"t1\",\"brig.version\":\"" BRIG_VERSION "\",\"brig.volume\":\"workspace\"},\"Name\":\"brig-abc-"
			       "workspace\"}");
	free(t);
	json_decref(v);
	assert_int_equal(json_object_size(labels), 1); /* borrowed, untouched */
	ASSERT_OK(brig_spec_volume_json(&v, &s, "brig-abc", BRIG_VOLUME_RUNTIME, NULL, &err), err);
	assert_string_equal(json_string_value(GET(v, "Name")), "brig-abc-runtime");
	assert_string_equal(json_string_value(GET(GET(v, "DriverOpts"), "o")),
			    "size=256m,uid=1000,gid=1000,mode=0700,nr_inodes=32768,nosuid,nodev");
	json_decref(v);
	EXPECT_ERR(brig_spec_volume_json(&v, &s, "brig-abc", BRIG_VOLUME_INBOX, NULL, &err), BRIG_EINVAL, &err);
	EXPECT_ERR(brig_spec_volume_json(&v, &s, "", BRIG_VOLUME_WORKSPACE, NULL, &err), BRIG_EINVAL, &err);
	EXPECT_ERR(brig_spec_volume_json(&v, &s, "../x", BRIG_VOLUME_WORKSPACE, NULL, &err), BRIG_EINVAL, &err);
	char *vn = brig_spec_volume_name("brig-abc", BRIG_VOLUME_RUNTIME);
	assert_string_equal(vn, "brig-abc-runtime");
	free(vn);
	json_decref(labels);
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_network_json(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	json_t *n = NULL;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_network_json(&n, &s, &err), err);
	char *t = dump(n);
	assert_string_equal(t, "{\"Attachable\":false,\"CheckDuplicate\":true,\"Driver\":\"bridge\",\"EnableIPv6\":false,"
			       "\"IPAM\":{\"Config\":[{\"Subnet\":\"172.30.0.0/22\"}],\"Driver\":\"default\"},"
			       "\"Internal\":false,\"Labels\":{\"brig.kind\":\"network\",\"brig.managed\":\"1\","
			       "\"brig.version\":\"" BRIG_VERSION "\"},\"Name\":\"brig-sandbox\",\"Options\":{"
			       "\"com.docker.network.bridge.enable_icc\":\"false\",\"com.docker.network.bridge."
			       "enable_ip_masquerade\":\"false\",\"com.docker.network.bridge.name\":\"brig0\"}}");
	free(t);
	json_decref(n);
	free(s.subnet);
	s.subnet = strdup("8.8.8.0/24");
	EXPECT_ERR(brig_spec_network_json(&n, &s, &err), BRIG_EINVAL, &err);
	assert_null(n);
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void test_labels_json(void **state)
{
	brig_spec s;
	brig_error *err = NULL;
	json_t *l = NULL;
	brig_spec_init(&s);
	set_ok(&s, "label", "brig.test=x");
	ASSERT_OK(brig_spec_labels(&l, &s, BRIG_KIND_RUN, NULL, NULL, &err), err);
	assert_string_equal(json_string_value(GET(l, "brig.test")), "x");
	assert_string_equal(json_string_value(GET(l, "brig.kind")), "run");
	json_decref(l);
	EXPECT_ERR(brig_spec_labels(&l, &s, BRIG_KIND_COMPUTER, NULL, NULL, &err), BRIG_EINVAL, &err);
	EXPECT_ERR(brig_spec_labels(&l, &s, BRIG_KIND_RUN, NULL, "nothex", &err), BRIG_EINVAL, &err);
	brig_error_free(err);
	brig_spec_clear(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, setup),
		cmocka_unit_test_setup(test_setters, setup),
		cmocka_unit_test_setup(test_setter_errors, setup),
		cmocka_unit_test_setup(test_network, setup),
		cmocka_unit_test_setup(test_subnet, setup),
		cmocka_unit_test_setup(test_tmpfs_budget, setup),
		cmocka_unit_test_setup(test_host_limits, setup),
		cmocka_unit_test_setup(test_env_validation, setup),
		cmocka_unit_test_setup(test_env_credentials, setup),
		cmocka_unit_test_setup(test_exec_env, setup),
		cmocka_unit_test_setup(test_hash, setup),
		cmocka_unit_test(test_seccomp_profile),
		cmocka_unit_test_setup(test_runtime, setup),
		cmocka_unit_test_setup(test_to_from_json, setup),
		cmocka_unit_test_setup(test_container_computer, setup),
		cmocka_unit_test_setup(test_container_computer_init, setup),
		cmocka_unit_test_setup(test_container_run_init, setup),
		cmocka_unit_test_setup(test_container_run, setup),
		cmocka_unit_test_setup(test_volume_json, setup),
		cmocka_unit_test_setup(test_network_json, setup),
		cmocka_unit_test_setup(test_labels_json, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
