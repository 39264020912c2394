/* test_naming.c — identities: validation messages, deterministic names and
 * session keys (pinned known answers), and reading labels back. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "brig/spec.h"

#define ASSERT_CONTAINS(hay, needle)                                                                                   \
	do {                                                                                                           \
		if (!strstr((hay), (needle)))                                                                          \
			fail_msg("expected '%s' in '%s'", (needle), (hay));                                            \
	} while (0)

static brig_identity ident(const char *ns, const char *agent, const char *session, uint32_t gen)
{
	brig_identity id = {ns, agent, session, gen};
	return id;
}

static void name_of(char out[BRIG_NAME_SIZE], brig_identity id)
{
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(out, &id, &err), err);
}

static void test_known_answer(void **state)
{
	char name[BRIG_NAME_SIZE], key[BRIG_HASH_SIZE];
	brig_error *err = NULL;
	brig_identity id = ident("acme", "coder", "sess-1", 1);
	/* Computed independently (Python hashlib) from the documented encoding:
	 * for tag, ns, agent, session a 4-byte big-endian length then the
	 * bytes; then the generation as 4-byte big-endian. Changing these
	 * renames every existing computer: never do it. */
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	assert_string_equal(name, "brig-dbcd0e17345d0339fbbb1359302c0eee6c5fd29d75bb83e7a08e57d1cc1396af");
	ASSERT_OK(brig_identity_session_key(key, &id, &err), err);
	assert_string_equal(key, "b5180fe56d28134afff2436b85f8ae475f960b0c389cb93ee168833a21913221");
}

static void test_deterministic_and_distinct(void **state)
{
	char a[BRIG_NAME_SIZE], b[BRIG_NAME_SIZE];
	name_of(a, ident("ns", "agent", "s", 7));
	name_of(b, ident("ns", "agent", "s", 7));
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), 69);
	assert_memory_equal(a, "brig-", 5);
	for (int i = 5; i < 69; i++)
		assert_true((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));

	/* Length prefixes keep field boundaries: ("ab","c") != ("a","bc"). */
	name_of(a, ident("ab", "c", "s", 1));
	name_of(b, ident("a", "bc", "s", 1));
	assert_string_not_equal(a, b);
	name_of(a, ident("n", "ab", "c", 1));
	name_of(b, ident("n", "a", "bc", 1));
	assert_string_not_equal(a, b);

	/* Each field and the generation change the name. */
	char base[BRIG_NAME_SIZE];
	name_of(base, ident("n", "a", "s", 1));
	name_of(a, ident("n2", "a", "s", 1));
	assert_string_not_equal(base, a);
	name_of(a, ident("n", "a2", "s", 1));
	assert_string_not_equal(base, a);
	name_of(a, ident("n", "a", "s2", 1));
	assert_string_not_equal(base, a);
	name_of(a, ident("n", "a", "s", 2));
	assert_string_not_equal(base, a);
}

static void test_session_key(void **state)
{
	char k1[BRIG_HASH_SIZE], k2[BRIG_HASH_SIZE], name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	brig_identity g1 = ident("n", "a", "s", 1), g2 = ident("n", "a", "s", 2), o = ident("n", "a", "t", 1);
	ASSERT_OK(brig_identity_session_key(k1, &g1, &err), err);
	ASSERT_OK(brig_identity_session_key(k2, &g2, &err), err);
	assert_string_equal(k1, k2); /* every generation shares the key */
	ASSERT_OK(brig_identity_session_key(k2, &o, &err), err);
	assert_string_not_equal(k1, k2);
	name_of(name, g1);
	assert_string_not_equal(k1, name + 5);
}

static void expect_bad(brig_identity id, const char *field, const char *must, const char *must_not)
{
	char out[BRIG_NAME_SIZE] = "x";
	brig_error *err = NULL;
	assert_int_equal(brig_identity_name(out, &id, &err), BRIG_EINVAL);
	assert_string_equal(out, "");
	assert_non_null(err);
	assert_int_equal(err->code, BRIG_EINVAL);
	char prefix[32];
	snprintf(prefix, sizeof prefix, "%s: ", field);
	if (strncmp(err->message, prefix, strlen(prefix)) != 0)
		fail_msg("message '%s' does not start with '%s'", err->message, prefix);
	if (must)
		ASSERT_CONTAINS(err->message, must);
	if (must_not && strstr(err->message, must_not))
		fail_msg("'%s' must not appear in '%s'", must_not, err->message);
	brig_error_free(err);
}

static void test_validation(void **state)
{
	expect_bad(ident("x y", "a", "s", 1), "ns", "got 'x y'", NULL);
	expect_bad(ident("n", "", "s", 1), "agent", "1-63 characters of A-Z a-z 0-9 _ . - starting with a letter or digit",
		   NULL);
	expect_bad(ident("n", "a", "x y", 1), "session",
		   "session: must be 1-63 characters of A-Z a-z 0-9 _ . - starting with a letter or digit, got 'x y'",
		   NULL);
	expect_bad(ident("n", "a", "-s", 1), "session", NULL, NULL);
	expect_bad(ident("n", "a", ".s", 1), "session", NULL, NULL);
	expect_bad(ident("n", "a", "a/b", 1), "session", NULL, NULL);
	expect_bad(ident("n", "a", "caf\xc3\xa9", 1), "session", "\\xc3\\xa9", "\xc3");
	expect_bad(ident("n", "a", "a\nb", 1), "session", "a\\x0ab", "\n");
	expect_bad(ident("n", "a", "it's", 1), "session", "it\\x27s", NULL);
	expect_bad(ident(NULL, "a", "s", 1), "ns", "missing", NULL);
	expect_bad(ident("n", "a", "s", 0), "generation", "from 1 to 1000000, got 0", NULL);
	expect_bad(ident("n", "a", "s", 1000001), "generation", NULL, NULL);

	/* 63 is fine, 64 is not; a long value is cut in the message. */
	char s63[64], s300[301];
	memset(s63, 'a', 63);
	s63[63] = '\0';
	memset(s300, 'b', 300);
	s300[300] = '\0';
	char out[BRIG_NAME_SIZE];
	name_of(out, ident("n", "a", s63, 1000000));
	expect_bad(ident("n", "a", s300, 1), "session", "...", NULL);
	brig_error *err = NULL;
	brig_identity id = ident("n", "a", s300, 1);
	assert_int_equal(brig_identity_validate(&id, &err), BRIG_EINVAL);
	assert_true(strlen(err->message) < 250);
	brig_error_free(err);

	/* Allowed characters. */
	name_of(out, ident("A.b-c_9", "0agent", "S.1-_", 1));
}

static json_t *computer_labels(const brig_identity *id, char hash[BRIG_HASH_SIZE])
{
	brig_spec spec;
	brig_error *err = NULL;
	json_t *labels = NULL;
	brig_spec_init(&spec);
	ASSERT_OK(brig_spec_hash(hash, &spec, &err), err);
	ASSERT_OK(brig_spec_labels(&labels, &spec, BRIG_KIND_COMPUTER, id, NULL, &err), err);
	brig_spec_clear(&spec);
	return labels;
}

static void test_labels_roundtrip(void **state)
{
	char hash[BRIG_HASH_SIZE];
	brig_error *err = NULL;
	brig_identity id = ident("acme", "coder", "sess-1", 42);
	json_t *labels = computer_labels(&id, hash);

	assert_string_equal(json_string_value(json_object_get(labels, "brig.managed")), "1");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.kind")), "computer");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.ns")), "acme");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.agent")), "coder");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.session")), "sess-1");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.generation")), "42");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.version")), BRIG_VERSION);
	assert_string_equal(json_string_value(json_object_get(labels, "brig.spec")), hash);
	assert_string_equal(json_string_value(json_object_get(labels, "brig.harness")), "none");

	brig_identity *back = NULL;
	ASSERT_OK(brig_identity_from_labels(&back, labels, &err), err);
	assert_string_equal(back->ns, "acme");
	assert_string_equal(back->agent, "coder");
	assert_string_equal(back->session, "sess-1");
	assert_int_equal(back->generation, 42);
	char n1[BRIG_NAME_SIZE], n2[BRIG_NAME_SIZE];
	name_of(n1, id);
	name_of(n2, *back);
	assert_string_equal(n1, n2);
	brig_identity_free(back);
	brig_identity_free(NULL);

	ASSERT_OK(brig_labels_match(labels, &id, hash, &err), err);
	json_decref(labels);
}

static void expect_mismatch(json_t *labels, const brig_identity *id, const char *hash, const char *msg)
{
	brig_error *err = NULL;
	assert_int_equal(brig_labels_match(labels, id, hash, &err), BRIG_ECONFLICT);
	assert_non_null(err);
	assert_string_equal(err->message, msg);
	brig_error_free(err);
}

static void test_labels_mismatch(void **state)
{
	char hash[BRIG_HASH_SIZE];
	brig_identity id = ident("acme", "coder", "sess-1", 1);
	json_t *labels = computer_labels(&id, hash);
	const char *other = "0000000000000000000000000000000000000000000000000000000000000000";

	expect_mismatch(NULL, &id, hash, "not a brig container");
	json_t *empty = json_object();
	expect_mismatch(empty, &id, hash, "not a brig container");
	json_decref(empty);

	char want[256];
	snprintf(want, sizeof want, "spec hash differs: container has %s, wanted %s", hash, other);
	expect_mismatch(labels, &id, other, want);

	brig_identity g2 = ident("acme", "coder", "sess-1", 2);
	expect_mismatch(labels, &g2, hash, "generation differs: container has '1', wanted '2'");
	brig_identity s2 = ident("acme", "coder", "sess-2", 1);
	expect_mismatch(labels, &s2, hash, "session differs: container has 'sess-1', wanted 'sess-2'");
	brig_identity n2 = ident("other", "coder", "sess-1", 1);
	expect_mismatch(labels, &n2, hash, "ns differs: container has 'acme', wanted 'other'");

	json_t *l2 = json_deep_copy(labels);
	json_object_set_new(l2, "brig.kind", json_string("run"));
	expect_mismatch(l2, &id, hash, "not a brig computer (brig.kind is 'run')");
	json_object_set_new(l2, "brig.kind", json_string("computer"));
	json_object_del(l2, "brig.agent");
	expect_mismatch(l2, &id, hash, "agent differs: container has none, wanted 'coder'");
	/* Hostile label values are escaped and cut in the message. */
	json_object_set_new(l2, "brig.agent", json_string("evil\n\x1b[31mred"));
	expect_mismatch(l2, &id, hash, "agent differs: container has 'evil\\x0a\\x1b[31mred', wanted 'coder'");
	json_decref(l2);
	json_decref(labels);
}

static void test_from_labels_errors(void **state)
{
	char hash[BRIG_HASH_SIZE];
	brig_error *err = NULL;
	brig_identity *out = (brig_identity *)1;
	brig_identity id = ident("acme", "coder", "sess-1", 1);
	json_t *labels = computer_labels(&id, hash);

	json_t *foreign = json_pack("{s:s}", "com.example", "x");
	assert_int_equal(brig_identity_from_labels(&out, foreign, &err), BRIG_ENOTFOUND);
	assert_null(out);
	ASSERT_CONTAINS(err->message, "not a brig container");
	json_decref(foreign);
	assert_int_equal(brig_identity_from_labels(&out, NULL, &err), BRIG_ENOTFOUND);

	static const char *const bad_gen[] = {"0", "01", "-1", "1000001", "1x", "", " 1"};
	for (size_t i = 0; i < sizeof bad_gen / sizeof bad_gen[0]; i++) {
		json_t *l = json_deep_copy(labels);
		json_object_set_new(l, "brig.generation", json_string(bad_gen[i]));
		assert_int_equal(brig_identity_from_labels(&out, l, &err), BRIG_EPROTO);
		ASSERT_CONTAINS(err->message, "brig.generation");
		json_decref(l);
	}
	json_t *l = json_deep_copy(labels);
	json_object_set_new(l, "brig.session", json_string("../../etc"));
	assert_int_equal(brig_identity_from_labels(&out, l, &err), BRIG_EPROTO);
	ASSERT_CONTAINS(err->message, "brig.session");
	json_object_set_new(l, "brig.session", json_integer(5));
	assert_int_equal(brig_identity_from_labels(&out, l, &err), BRIG_EPROTO);
	json_object_set_new(l, "brig.kind", json_string("run"));
	assert_int_equal(brig_identity_from_labels(&out, l, &err), BRIG_ENOTFOUND);
	json_decref(l);
	brig_error_free(err);
	json_decref(labels);
}

static void test_check_name(void **state)
{
	brig_error *err = NULL;
	assert_int_equal(brig_identity_check_name("ns", "ok-1", &err), 0);
	assert_null(err);
	assert_int_equal(brig_identity_check_name("ns", "not ok", NULL), BRIG_EINVAL); /* err may be NULL */
	assert_int_equal(brig_identity_check_name("agent", "", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(err->message, "agent: ");
	brig_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answer),     cmocka_unit_test(test_deterministic_and_distinct),
		cmocka_unit_test(test_session_key),      cmocka_unit_test(test_validation),
		cmocka_unit_test(test_labels_roundtrip), cmocka_unit_test(test_labels_mismatch),
		cmocka_unit_test(test_from_labels_errors), cmocka_unit_test(test_check_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
