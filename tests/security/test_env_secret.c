/* test_env_secret.c — issue 20 item 5: a value given with -e to `brig create`
 * and `brig run` reaches the command's environment, and is in neither
 * docker inspect (Config.Env, Args, Labels, nor anywhere else in it) nor
 * brig's stderr — also after the computer is started again. Every object
 * carries brig.test=<run id> and is removed at exit. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "util/util.h"

static brig_engine *E;
static char TMP[64];
static char *ENV[2];
static char NS[64];
static char LABEL[96];
static char SECRET[64]; /* random per run: found only where it leaked */

static int setup(void **state)
{
	(void)state;
	brig_test_setup(&E, NS, sizeof NS, "s");
	snprintf(TMP, sizeof TMP, "/tmp/brig-envsecret-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	ENV[0] = xasprintf("BRIG_STORE=sqlite://%s/store.db", TMP);
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(SECRET, sizeof SECRET, "zz-%s-%08lx-%08lx-zz", brig_test_run_id(), (unsigned long)random(),
		 (unsigned long)getpid());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	char *rm = xasprintf("rm -rf %s", TMP);
	(void)!system(rm);
	free(rm);
	free(ENV[0]);
	return brig_test_teardown(&E);
}

typedef struct out {
	int code;
	char *out, *err;
} out;

static out brigv(const char *const *args)
{
	char *argv[24] = {"brig"};
	size_t n = 1;
	for (; args[n - 1] && n < 23; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	out o = {0};
	o.code = brig_test_spawn(argv, NULL, ENV, &o.out, &o.err);
	return o;
}
#define BRIG(...) brigv((const char *const[]){__VA_ARGS__, NULL})

static void out_free(out *o)
{
	free(o->out);
	free(o->err);
}

static void assert_absent(const char *where, const char *text)
{
	if (text && strstr(text, SECRET))
		fail_msg("the -e value is in %s", where);
}

/* The whole inspect, and the three places the issue names, one by one. */
static void inspect_lacks(const char *ref, bool computer)
{
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, ref, &err), err);
	json_t *cfg = json_object_get(j, "Config");
	static const char *const parts[] = {"Env", "Labels", "Entrypoint", "Cmd"};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		cleanup_free char *d = json_dumps(json_object_get(cfg, parts[i]), JSON_COMPACT | JSON_ENCODE_ANY);
		char where[64];
		snprintf(where, sizeof where, "docker inspect's Config.%s", parts[i]);
		assert_absent(where, d);
	}
	cleanup_free char *args = json_dumps(json_object_get(j, "Args"), JSON_COMPACT | JSON_ENCODE_ANY);
	assert_absent("docker inspect's Args", args);
	cleanup_free char *all = json_dumps(j, JSON_COMPACT);
	assert_absent("docker inspect", all);
	/* A computer's key is there to see, in the effective spec's label. */
	if (computer)
		assert_non_null(strstr(all, "SECRET_K"));
}

static void test_computer(void **state)
{
	(void)state;
	if (!brig_guest__volume_name()) {
		print_message("skipped: this build carries no brig-init\n");
		return;
	}
	char entry[128];
	snprintf(entry, sizeof entry, "SECRET_K=%s", SECRET);
	out o = BRIG("--debug", "create", "--ns", NS, "--agent", "a", "--session", "env", "--image", brig_test_image(),
		     "--label", LABEL, "-e", entry, "-e", "PLAIN_K=plain");
	if (o.code != 0)
		fail_msg("brig create: exit %d: %s", o.code, o.err);
	assert_absent("brig create's stderr", o.err);
	cleanup_free char *name = xstrndup(o.out, strcspn(o.out, "\n"));
	out_free(&o);

	o = BRIG("--debug", "exec", name, "--", "sh", "-c", "echo \"$SECRET_K\"; echo \"$PLAIN_K\"");
	assert_int_equal(o.code, 0);
	char want[160];
	snprintf(want, sizeof want, "%s\nplain\n", SECRET);
	assert_string_equal(o.out, want);
	assert_absent("brig exec's stderr", o.err);
	out_free(&o);
	inspect_lacks(name, true);

	/* Started again (an emptied /runtime): create adopts it and puts the
	 * env back; still nothing in inspect. */
	brig_error *err = NULL;
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	const char *id = json_string_value(json_object_get(j, "Id"));
	ASSERT_OK(brig_engine_container_stop(E, id, 2, &err), err);
	o = BRIG("create", "--ns", NS, "--agent", "a", "--session", "env", "--image", brig_test_image(), "--label",
		 LABEL, "-e", entry, "-e", "PLAIN_K=plain");
	if (o.code != 0)
		fail_msg("brig create (adopt): exit %d: %s", o.code, o.err);
	assert_absent("brig create's stderr", o.err);
	out_free(&o);
	/* The spec hash still covers the value (another one is another spec),
	 * keyed with the computer's own salt: the same spec elsewhere has
	 * another hash, so the label gives no test for a guessed value. */
	o = BRIG("create", "--ns", NS, "--agent", "a", "--session", "env", "--image", brig_test_image(), "--label",
		 LABEL, "-e", "SECRET_K=guess", "-e", "PLAIN_K=plain");
	assert_int_equal(o.code, 125);
	assert_non_null(strstr(o.err, "spec hash differs"));
	assert_absent("brig create's stderr", o.err);
	out_free(&o);
	o = BRIG("create", "--ns", NS, "--agent", "a", "--session", "env2", "--image", brig_test_image(), "--label",
		 LABEL, "-e", entry, "-e", "PLAIN_K=plain");
	assert_int_equal(o.code, 0);
	cleanup_free char *name2 = xstrndup(o.out, strcspn(o.out, "\n"));
	out_free(&o);
	cleanup_json json_t *j2 = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j2, name2, &err), err);
	json_t *l1 = json_object_get(json_object_get(j, "Config"), "Labels");
	json_t *l2 = json_object_get(json_object_get(j2, "Config"), "Labels");
	const char *s1 = json_string_value(json_object_get(l1, BRIG_LABEL_ENV_SALT));
	const char *s2 = json_string_value(json_object_get(l2, BRIG_LABEL_ENV_SALT));
	assert_non_null(s1);
	assert_non_null(s2);
	assert_int_equal(strlen(s1), BRIG_ENV_SALT_SIZE - 1);
	assert_string_not_equal(s1, s2);
	assert_string_not_equal(json_string_value(json_object_get(l1, BRIG_LABEL_SPEC)),
				json_string_value(json_object_get(l2, BRIG_LABEL_SPEC)));

	o = BRIG("exec", name, "--", "sh", "-c", "echo \"$SECRET_K\"");
	assert_int_equal(o.code, 0);
	snprintf(want, sizeof want, "%s\n", SECRET);
	assert_string_equal(o.out, want);
	out_free(&o);
	inspect_lacks(name, true);
}

/* A uid past the 7 octal digits of a tar header: the env file's owner goes
 * in base-256, and brig-init (that uid) still reads it. A daemon with the
 * default userns-remap maps only 0-65535, so there the uid is the largest
 * it maps (the base-256 case then runs in userns.sh, on its second daemon
 * without the remap, and in test_tar); a uid it does not map is refused
 * with the reason. */
static void test_big_uid(void **state)
{
	(void)state;
	if (!brig_guest__volume_name())
		return;
	brig_spec s;
	brig_error *err = NULL;
	bool remapped = brig_test_userns_shift() != 0;
	const char *uid = remapped ? "65534" : "3000000", *gid = remapped ? "65533" : "3000001";
	brig_identity id = {.ns = NS, .agent = "a", .session = "biguid", .generation = 1};
	brig_computer *c = NULL;
	if (remapped) {
		brig_test_spec(&s, NULL);
		ASSERT_OK(brig_spec_set(&s, "user", "3000000:3000001", &err), err);
		assert_int_not_equal(brig_computer_create(E, &c, &id, &s, &err), 0);
		assert_non_null(strstr(brig_error_message(err), "userns-remap"));
		brig_error_free(err);
		err = NULL;
		brig_spec_clear(&s);
		/* and nothing of it is left for the next up to adopt */
		char name[BRIG_NAME_SIZE];
		ASSERT_OK(brig_identity_name(name, &id, &err), err);
		json_t *j = NULL;
		assert_int_equal(brig_engine_container_inspect(E, &j, name, &err), BRIG_ENOTFOUND);
		brig_error_free(err);
		err = NULL;
	}
	char user[32];
	snprintf(user, sizeof user, "%s:%s", uid, gid);
	brig_test_spec(&s, NULL);
	ASSERT_OK(brig_spec_set(&s, "user", user, &err), err);
	char entry[128];
	snprintf(entry, sizeof entry, "SECRET_K=%s", SECRET);
	ASSERT_OK(brig_spec_add_env(&s, entry, &err), err);
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	brig_spec_clear(&s);
	out o = BRIG("exec", c->name, "--", "sh", "-c", "echo \"$SECRET_K\"; stat -c %u:%g:%a /runtime/.brig/env");
	char want[160];
	snprintf(want, sizeof want, "%s\n%s:%s:400\n", SECRET, uid, gid);
	assert_int_equal(o.code, 0);
	assert_string_equal(o.out, want);
	out_free(&o);
	inspect_lacks(c->name, true);
	brig_computer_free(c);
}

typedef struct bg_run {
	char entry[128];
	out o;
} bg_run;

static void *run_main(void *arg)
{
	bg_run *b = arg;
	b->o = BRIG("--debug", "run", "--image", brig_test_image(), "--label", LABEL, "-e", b->entry, "--", "sh", "-c",
		    "echo \"$SECRET_K\"; sleep 4");
	return NULL;
}

static void test_run(void **state)
{
	(void)state;
	static bg_run b; /* static: its thread outlives a failing test */
	memset(&b, 0, sizeof b);
	snprintf(b.entry, sizeof b.entry, "SECRET_K=%s", SECRET);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, run_main, &b), 0);
	/* While it runs: its container, as docker inspect shows it. */
	bool seen = false;
	for (int i = 0; i < 60 && !seen; i++) {
		brig_test_sleep_ms(100);
		cleanup_json json_t *f = json_pack("{s:[s, s]}", "label", LABEL, BRIG_LABEL_KIND "=run");
		cleanup_json json_t *list = NULL;
		brig_error *err = NULL;
		ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
		size_t k;
		json_t *c;
		json_array_foreach (list, k, c) {
			const char *id = json_string_value(json_object_get(c, "Id"));
			cleanup_json json_t *j = NULL;
			if (brig_engine_container_inspect(E, &j, id, &err) != 0) {
				brig_error_free(err); /* gone already */
				err = NULL;
				continue;
			}
			inspect_lacks(id, false);
			seen = true;
		}
	}
	pthread_join(t, NULL);
	assert_true(seen);
	assert_int_equal(b.o.code, 0);
	char want[128];
	snprintf(want, sizeof want, "%s\n", SECRET);
	assert_string_equal(b.o.out, want);
	assert_absent("brig run's stderr", b.o.err);
	out_free(&b.o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_computer),
		cmocka_unit_test(test_big_uid),
		cmocka_unit_test(test_run),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
