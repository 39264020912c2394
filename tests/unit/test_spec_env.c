/* test_spec_env.c — env values out of the container body (issue 20): a
 * run's and a brig-init computer's Config.Env is HOME=/runtime alone, the
 * labels hold no value, and only a computer without brig-init keeps them. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "brig/spec.h"

#define VALUE "v4lue-n0t-in-the-body"

static char *body(const brig_spec *s, brig_kind kind, const char *init_hash)
{
	brig_identity id = {"acme", "coder", "sess-1", 1};
	char name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	brig_container_opts o = BRIG_CONTAINER_OPTS_INIT;
	o.kind = kind;
	o.id = &id;
	o.name = name;
	o.init_hash = init_hash;
	o.lifetime_s = 60;
	json_t *c = NULL;
	ASSERT_OK(brig_spec_container_json(&c, s, &o, &err), err);
	char *env = json_dumps(json_object_get(c, "Env"), JSON_COMPACT);
	char *all = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	if (strcmp(env, "[\"HOME=/runtime\"]") == 0 && strstr(all, VALUE))
		fail_msg("the value is elsewhere in the body: %s", all);
	free(all);
	return env;
}

static void test_env_out_of_body(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_add_env(&s, "SECRET_K=" VALUE, &err), err);
	ASSERT_OK(brig_spec_add_env(&s, "HOME=/workspace", &err), err);
	char *e = body(&s, BRIG_KIND_RUN, NULL);
	assert_string_equal(e, "[\"HOME=/runtime\"]");
	free(e);
	e = body(&s, BRIG_KIND_COMPUTER, "0123456789abcdef");
	assert_string_equal(e, "[\"HOME=/runtime\"]");
	free(e);
	e = body(&s, BRIG_KIND_COMPUTER, NULL); /* docker-init and exec, as before brig-init */
	assert_string_equal(e, "[\"SECRET_K=" VALUE "\",\"HOME=/workspace\"]");
	free(e);

	/* Neither hash is the value's: unsalted they are equal whatever it is. */
	char h1[BRIG_HASH_SIZE], h2[BRIG_HASH_SIZE];
	ASSERT_OK(brig_spec_hash(h1, &s, &err), err);
	ASSERT_OK(brig_spec_add_env(&s, "SECRET_K=other", &err), err);
	ASSERT_OK(brig_spec_hash(h2, &s, &err), err);
	assert_string_equal(h1, h2);
	brig_spec_clear(&s);

	/* brig.env-salt is brig's own label. */
	brig_spec_init(&s);
	assert_int_equal(brig_spec_add_label(&s, BRIG_LABEL_ENV_SALT "=00", &err), BRIG_EINVAL);
	brig_error_free(err);
	brig_spec_clear(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_out_of_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
