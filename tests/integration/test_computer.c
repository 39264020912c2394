/* test_computer.c — computers against the real dockerd, as a user sees them:
 * what `docker inspect` records, what a process inside can and cannot do,
 * credentials, pause/resume, destroy, gc and spec validation.
 * Every object carries brig.test=<run id> and is removed at exit. */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "util/sha256.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];

static int setup(void **state)
{
	(void)state;
	return brig_test_setup(&E, NS, sizeof NS, "t");
}

static int teardown(void **state)
{
	(void)state;
	return brig_test_teardown(&E);
}

static brig_identity ident(const char *session)
{
	return (brig_identity){.ns = NS, .agent = "agent", .session = session, .generation = 1};
}

static brig_computer *create(const char *session, const brig_spec *s)
{
	brig_identity id = ident(session);
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, s, &err), err);
	assert_non_null(c);
	return c;
}

static brig_computer *create_default(const char *session)
{
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_computer *c = create(session, &s);
	brig_spec_clear(&s);
	return c;
}

/* Runs `sh -c script` in ref; returns brig_computer_exec's code. */
static int sh(const char *ref, const char *script, brig_exec_result *res, brig_error **err)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {
		.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1, .timeout_ms = 60000};
	return brig_computer_exec(E, ref, &o, res, err);
}

/* Runs a script that must succeed; returns its stdout (caller frees). */
static char *sh_ok(const char *ref, const char *script)
{
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(sh(ref, script, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("`%s` exited %d: %s", script, r.exit_code, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

/* Label values: keys contain dots. */
static const char *lstr(json_t *labels, const char *key)
{
	return json_string_value(json_object_get(labels, key));
}

/* Like assert_string_equal, but a missing value fails instead of crashing. */
#define assert_str(got, want)                                                   \
	do {                                                                    \
		const char *g_ = (got);                                         \
		if (!g_)                                                        \
			fail_msg("%s is missing, expected '%s'", #got, (want)); \
		assert_string_equal(g_, (want));                                \
	} while (0)

static const char *jstr(json_t *o, const char *path)
{
	/* "A.B.C" */
	char buf[128];
	snprintf(buf, sizeof buf, "%s", path);
	json_t *cur = o;
	for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, k);
	return json_string_value(cur);
}

/* Reads one regular file out of a container through the archive endpoint
 * (works while paused). Returns its content, or NULL when absent. */
static int tar_cb(const char *data, size_t len, void *payload)
{
	return brig_buf_add(payload, data, len);
}

static char *archive_read(const char *id, const char *path)
{
	brig_buf b;
	brig_buf_init(&b, 1u << 20);
	brig_error *err = NULL;
	int rc = brig_engine_archive_get(E, id, path, NULL, tar_cb, &b, &err);
	if (rc == BRIG_ENOTFOUND) {
		brig_error_free(err);
		brig_buf_free(&b);
		return NULL;
	}
	ASSERT_OK(rc, err);
	assert_true(b.len >= 512);
	char sz[13] = {0};
	memcpy(sz, b.data + 124, 12);
	size_t n = (size_t)strtoull(sz, NULL, 8);
	assert_true(512 + n <= b.len);
	char *out = xstrndup(b.data + 512, n);
	brig_buf_free(&b);
	return out;
}

/* ---- 1. docker inspect of a default computer ---- */

static bool has_token(const char *opts, const char *tok)
{
	size_t n = strlen(tok);
	for (const char *p = opts; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && strncmp(p, tok, n) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

static void check_volume(const char *container, json_t *mounts, const char *target, const char *size_tok)
{
	json_t *m = NULL, *it;
	size_t i;
	json_array_foreach (mounts, i, it) {
		const char *d = json_string_value(json_object_get(it, "Destination"));
		if (d && strcmp(d, target) == 0)
			m = it;
	}
	if (!m)
		fail_msg("no mount at %s", target);
	assert_string_equal(json_string_value(json_object_get(m, "Type")), "volume");
	assert_true(json_is_true(json_object_get(m, "RW")));
	const char *vname = json_string_value(json_object_get(m, "Name"));
	cleanup_free char *want = xasprintf("%s-%s", container, target + 1);
	assert_string_equal(vname, want);

	cleanup_json json_t *v = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_volume_inspect(E, &v, vname, &err), err);
	assert_str(jstr(v, "Driver"), "local");
	json_t *o = json_object_get(v, "Options"); /* the DriverOpts it was created with */
	assert_str(jstr(o, "type"), "tmpfs");
	assert_str(jstr(o, "device"), "tmpfs");
	const char *mo = jstr(o, "o");
	/* the local driver mounts on the host: with userns-remap the owner is
	 * the host id the sandbox user maps to */
	char uid[32], gid[32];
	snprintf(uid, sizeof uid, "uid=%u", 1000 + brig_test_userns_shift());
	snprintf(gid, sizeof gid, "gid=%u", 1000 + brig_test_userns_shift());
	if (!has_token(mo, size_tok) || !has_token(mo, uid) || !has_token(mo, gid))
		fail_msg("volume %s options '%s' lack %s/%s/%s", vname, mo, size_tok, uid, gid);
	json_t *labels = json_object_get(v, "Labels");
	assert_str(lstr(labels, BRIG_LABEL_CONTAINER), container);
	assert_str(lstr(labels, BRIG_TEST_LABEL), brig_test_run_id());
}

static void test_inspect_default_computer(void **state)
{
	(void)state;
	brig_computer *c = create_default("inspect");
	assert_string_equal(c->state, "running");
	assert_false(c->adopted);
	assert_int_equal(strlen(c->name), BRIG_NAME_SIZE - 1);

	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	json_t *hc = json_object_get(j, "HostConfig");
	assert_str(jstr(j, "Config.User"), "1000:1000");
	assert_true(json_is_true(json_object_get(hc, "ReadonlyRootfs")));
	json_t *capdrop = json_object_get(hc, "CapDrop");
	assert_int_equal(json_array_size(capdrop), 1);
	assert_string_equal(json_string_value(json_array_get(capdrop, 0)), "ALL");
	assert_true(json_is_null(json_object_get(hc, "CapAdd")));
	json_t *secopt = json_object_get(hc, "SecurityOpt");
	assert_int_equal(json_array_size(secopt), 2); /* no-new-privileges, brig's seccomp profile */
	assert_string_equal(json_string_value(json_array_get(secopt, 0)), "no-new-privileges");
	assert_true(strncmp(json_string_value(json_array_get(secopt, 1)), "seccomp={", 9) == 0);
	assert_str(jstr(hc, "NetworkMode"), "none");
	/* The test image is labelled brig.etc-hosts=optional: no Docker network sandbox. */
	assert_true(json_is_true(json_object_get(json_object_get(j, "Config"), "NetworkDisabled")));
	assert_int_equal(json_integer_value(json_object_get(hc, "Memory")), 2147483648LL);
	assert_int_equal(json_integer_value(json_object_get(hc, "MemorySwap")), 2147483648LL);
	assert_int_equal(json_integer_value(json_object_get(hc, "NanoCpus")), 2000000000LL);
	assert_int_equal(json_integer_value(json_object_get(hc, "PidsLimit")), 256);
	assert_true(json_is_null(json_object_get(hc, "Binds")));
	assert_true(json_is_false(json_object_get(hc, "Privileged")));
	/* brig-init is PID 1 when this build carries it: no docker-init then */
	bool guest = json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_INIT) != NULL;
	assert_true(json_is_boolean(json_object_get(hc, "Init")) &&
		    json_is_true(json_object_get(hc, "Init")) == !guest);
	json_t *tmpfs = json_object_get(hc, "Tmpfs");
	assert_true(!tmpfs || json_is_null(tmpfs) || json_object_size(tmpfs) == 0);
	assert_int_equal(json_object_size(json_object_get(hc, "PortBindings")), 0);

	/* Exactly the two tmpfs volumes (and brig-init's, read-only): nothing
	 * from the host, no socket. */
	json_t *mounts = json_object_get(j, "Mounts");
	assert_int_equal(json_array_size(mounts), guest ? 3 : 2);
	if (guest) {
		size_t mi;
		json_t *m;
		bool found = false;
		json_array_foreach (mounts, mi, m)
			if (strcmp(jstr(m, "Destination"), "/.brig") == 0) {
				found = true;
				assert_true(json_is_false(json_object_get(m, "RW")));
				assert_true(strncmp(jstr(m, "Name"), "brig-init-", 10) == 0);
			}
		assert_true(found);
	}
	check_volume(c->name, mounts, "/workspace", "size=512m");
	check_volume(c->name, mounts, "/runtime", "size=256m");

	/* The identity is on the labels; env carries HOME and nothing secret. */
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	assert_str(lstr(labels, BRIG_LABEL_NS), NS);
	assert_str(lstr(labels, BRIG_LABEL_SESSION), "inspect");
	assert_str(lstr(labels, BRIG_LABEL_MANAGED), "1");
	assert_str(lstr(labels, BRIG_LABEL_SPEC), c->spec_hash);
	brig_computer_free(c);
	brig_test_cleanup(E);
}

/* ---- 2. inside the default computer ---- */

static void test_inside_default_computer(void **state)
{
	(void)state;
	brig_computer *c = create_default("inside");
	const char *n = c->name;
	brig_error *err = NULL;
	brig_exec_result r;

	char *out = sh_ok(n, "id");
	if (!strstr(out, "uid=1000(sandbox)") || !strstr(out, "gid=1000(sandbox)"))
		fail_msg("id: %s", out);
	free(out);

	out = sh_ok(n, "echo $HOME; pwd");
	if (strncmp(out, "/runtime", 8) != 0 || !strstr(out, "\n/workspace\n"))
		fail_msg("HOME/pwd: %s", out);
	free(out);

	ASSERT_OK(sh(n, "touch /usr/local/probe", &r, &err), err);
	assert_int_not_equal(r.exit_code, 0);
	if (!strstr(r.err.data, "Read-only file system"))
		fail_msg("touch /usr/local/probe: %s", r.err.data);
	brig_exec_result_clear(&r);

	out = sh_ok(n, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status");
	if (!strstr(out, "CapEff:\t0000000000000000\n") || !strstr(out, "CapPrm:\t0000000000000000\n") ||
	    !strstr(out, "CapBnd:\t0000000000000000\n") || !strstr(out, "NoNewPrivs:\t1\n"))
		fail_msg("capabilities: %s", out);
	free(out);

	/* No network: a namespace of its own with only lo, no routes. */
	out = sh_ok(n, "readlink /proc/self/ns/net");
	brig_test_assert_own_netns(out);
	free(out);
	out = sh_ok(n, "cat /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/lo/disable_ipv6");
	assert_string_equal(out, "1\n1\n");
	free(out);
	out = sh_ok(n, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
	assert_string_equal(out, "lo\n");
	free(out);
	out = sh_ok(n, "ip -o link | cut -d: -f2 | tr -d ' '");
	assert_string_equal(out, "lo\n");
	free(out);
	out = sh_ok(n, "tail -n +2 /proc/net/route | wc -l; tail -n +2 /proc/net/ipv6_route 2>/dev/null | grep -v ' "
		       "lo$' | wc -l");
	assert_string_equal(out, "0\n0\n");
	free(out);

	out = sh_ok(n, "ls -l /var/run/docker.sock /run/docker.sock 2>&1; true");
	if (strstr(out, "docker.sock ") || !strstr(out, "No such file or directory"))
		fail_msg("docker socket visible: %s", out);
	free(out);

	/* The workspace is bounded at 512 MB and the computer survives filling it. */
	ASSERT_OK(sh(n, "dd if=/dev/zero of=/workspace/big bs=1M count=600", &r, &err), err);
	assert_int_not_equal(r.exit_code, 0);
	if (!strstr(r.err.data, "No space left on device"))
		fail_msg("dd: %s", r.err.data);
	brig_exec_result_clear(&r);
	out = sh_ok(n, "stat -c %s /workspace/big");
	long long sz = atoll(out);
	free(out);
	if (sz < 500LL * 1024 * 1024 || sz > 512LL * 1024 * 1024)
		fail_msg("/workspace/big is %lld bytes, expected about 512 MiB", sz);
	out = sh_ok(n, "rm /workspace/big; echo ok > /workspace/after; cat /workspace/after");
	assert_string_equal(out, "ok\n");
	free(out);

	brig_computer_free(c);
	brig_test_cleanup(E);
}

/* ---- 5. a credential forwarded from brig's environment ---- */

typedef struct bg_exec {
	const char *ref;
	int rc;
	brig_exec_result res;
	brig_error *err;
} bg_exec;

static void *bg_sleep(void *arg)
{
	bg_exec *b = arg;
	const char *argv[] = {"sleep", "2", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1};
	b->rc = brig_computer_exec(E, b->ref, &o, &b->res, &b->err);
	return NULL;
}

static void assert_absent(const char *what, const char *hay, const char *secret)
{
	if (hay && strstr(hay, secret))
		fail_msg("the credential is present in %s", what); /* never print it */
	print_message("credential absent from %s\n", what);
}

static void test_credential_forwarded_not_stored(void **state)
{
	(void)state;
	unsigned char rnd[12];
	FILE *f = fopen("/dev/urandom", "rb");
	assert_non_null(f);
	assert_int_equal(fread(rnd, 1, sizeof rnd, f), sizeof rnd);
	fclose(f);
	char hex[25];
	brig_hex(hex, rnd, sizeof rnd);
	char secret[64];
	snprintf(secret, sizeof secret, "sk-test-%s", hex);
	setenv("ANTHROPIC_API_KEY", secret, 1);

	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(&s, "harness", "claude", &err), err);
	ASSERT_OK(brig_spec_add_env(&s, "PLAIN=visible", &err), err);

	/* A credential put into a computer's spec would be lost (a computer
	 * never stores one): refused, naming the key and never the value. */
	brig_spec with_cred;
	brig_spec_copy(&with_cred, &s);
	ASSERT_OK(brig_spec_add_env(&with_cred, "ANTHROPIC_API_KEY", &err), err); /* copied from brig's env */
	brig_identity rid = {NS, "agent", "cred-refused", 1};
	brig_computer *refused = NULL;
	assert_int_equal(brig_computer_create(E, &refused, &rid, &with_cred, &err), BRIG_EINVAL);
	assert_non_null(strstr(brig_error_message(err), "ANTHROPIC_API_KEY"));
	assert_absent("the refusal", brig_error_message(err), secret);
	brig_error_free(err);
	err = NULL;
	brig_spec_clear(&with_cred);

	/* The harness forwards it from brig's own environment with each exec. */
	brig_computer *c = create("cred", &s);

	/* A command inside sees it. */
	brig_exec_result r;
	ASSERT_OK(sh(c->name, "echo $ANTHROPIC_API_KEY; echo $PLAIN", &r, &err), err);
	assert_int_equal(r.exit_code, 0);
	char want[128];
	snprintf(want, sizeof want, "%s\nvisible\n", secret);
	if (strcmp(r.out.data, want) != 0)
		fail_msg("the command inside did not see the credential (output %zu bytes)", r.out.len);
	print_message("credential present inside the computer\n");
	brig_exec_result_clear(&r);

	/* docker inspect does not hold it. */
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	cleanup_free char *dump = json_dumps(j, JSON_COMPACT);
	assert_absent("docker inspect", dump, secret);
	json_t *env = json_object_get(json_object_get(j, "Config"), "Env");
	size_t i;
	json_t *v;
	bool plain = false;
	json_array_foreach (env, i, v) {
		if (strncmp(json_string_value(v), "ANTHROPIC_API_KEY", 17) == 0)
			fail_msg("Config.Env has an ANTHROPIC_API_KEY entry");
		plain |= strcmp(json_string_value(v), "PLAIN=visible") == 0;
	}
	/* Nor any other entry's value when brig-init gives commands their env
	 * (issue 20); a computer made without it keeps them there. */
	bool guest = json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_INIT) != NULL;
	assert_true(plain != guest);

	/* brig's own outputs: the computer's JSON, the spec's JSON. */
	cleanup_json json_t *cj = brig_computer_to_json(c);
	cleanup_free char *cdump = json_dumps(cj, JSON_COMPACT);
	assert_absent("the computer's JSON", cdump, secret);
	cleanup_json json_t *sj = brig_spec_to_json(&s, BRIG_SPEC_JSON_ENV_VALUES);
	cleanup_free char *sdump = json_dumps(sj, JSON_COMPACT);
	assert_absent("the spec's JSON", sdump, secret);

	/* The host's process list, while a command runs inside. */
	static bg_exec b; /* static: its thread outlives a failing test */
	b = (bg_exec){.ref = c->name};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, bg_sleep, &b), 0);
	brig_test_sleep_ms(800);
	FILE *ps = popen("ps -eo args", "r");
	assert_non_null(ps);
	brig_buf pb;
	brig_buf_init(&pb, 16u << 20);
	char line[4096];
	size_t got;
	while ((got = fread(line, 1, sizeof line, ps)) > 0)
		brig_buf_put(&pb, line, got);
	pclose(ps);
	pthread_join(t, NULL);
	ASSERT_OK(b.rc, b.err);
	assert_int_equal(b.res.exit_code, 0);
	brig_exec_result_clear(&b.res);
	const char *psout = brig_buf_cstr(&pb);
	if (!strstr(psout, "sleep 2"))
		fail_msg("ps did not show the command running inside (test cannot conclude)");
	assert_absent("the host's ps output", psout, secret);
	brig_buf_free(&pb);

	/* Errors never carry it: a bad entry names only its key, and a timed-out
	 * command's message is about the command. */
	char bad[128];
	snprintf(bad, sizeof bad, "ANTHROPIC_API_KEY=%s\r", secret);
	const char *benv[] = {bad};
	const char *argv[] = {"true", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .env = benv,
			    .env_count = 1,
			    .stdin_fd = -1,
			    .cancel_fd = -1};
	int rc = brig_computer_exec(E, c->name, &o, &r, &err);
	assert_int_equal(rc, BRIG_EINVAL);
	if (!strstr(brig_error_message(err), "ANTHROPIC_API_KEY"))
		fail_msg("invalid env error does not name the key: %s", brig_error_message(err));
	assert_absent("an invalid-env error", brig_error_message(err), secret);
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);

	const char *slow[] = {"sleep", "10", NULL};
	o = (brig_exec_opts){
		.version = BRIG_EXEC_OPTS_VERSION, .argv = slow, .stdin_fd = -1, .cancel_fd = -1, .timeout_ms = 300};
	rc = brig_computer_exec(E, c->name, &o, &r, &err);
	assert_int_equal(rc, BRIG_ETIMEDOUT);
	assert_absent("a timeout error", brig_error_message(err), secret);
	cleanup_json json_t *rj = brig_exec_result_to_json(&r);
	cleanup_free char *rdump = json_dumps(rj, JSON_COMPACT);
	assert_absent("the exec result", rdump, secret);
	brig_error_free(err);
	brig_exec_result_clear(&r);

	unsetenv("ANTHROPIC_API_KEY");
	memset(secret, 0, sizeof secret);
	memset(want, 0, sizeof want);
	memset(bad, 0, sizeof bad);
	brig_computer_free(c);
	brig_spec_clear(&s);
	brig_test_cleanup(E);
}

/* ---- 7. pause freezes processes and keeps files ---- */

static long counter(const char *id)
{
	for (int i = 0; i < 20; i++) {
		cleanup_free char *s = archive_read(id, "/workspace/c");
		if (s && *s)
			return atol(s);
		brig_test_sleep_ms(50);
	}
	fail_msg("/workspace/c never appeared");
	return -1;
}

static void test_pause_resume(void **state)
{
	(void)state;
	brig_computer *c = create_default("pause");
	brig_error *err = NULL;
	/* Renamed into place so a reader never sees a half-written number. */
	free(sh_ok(c->name, "echo kept > /workspace/keep; "
			    "i=0; while true; do i=$((i+1)); echo $i > /workspace/c.t; mv /workspace/c.t /workspace/c; "
			    "sleep 0.1; done </dev/null >/dev/null 2>&1 &"));
	long a = counter(c->id);
	brig_test_sleep_ms(600);
	long b = counter(c->id);
	if (b <= a)
		fail_msg("the counter does not advance while running: %ld then %ld", a, b);

	ASSERT_OK(brig_computer_pause(E, c->name, &err), err);
	ASSERT_OK(brig_computer_pause(E, c->name, &err), err); /* already paused: fine */
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, c->id, &err), err);
	assert_str(jstr(j, "State.Status"), "paused");
	long p1 = counter(c->id);
	brig_test_sleep_ms(1000);
	long p2 = counter(c->id);
	if (p1 != p2)
		fail_msg("the counter advanced while paused: %ld then %ld", p1, p2);
	cleanup_free char *kept = archive_read(c->id, "/workspace/keep");
	assert_non_null(kept);
	assert_string_equal(kept, "kept\n");

	brig_exec_result r;
	int rc = sh(c->name, "echo should-not-run >> /workspace/keep", &r, &err);
	assert_int_equal(rc, BRIG_ESTATE);
	if (!strstr(brig_error_message(err), "paused") || !strstr(brig_error_message(err), "resume"))
		fail_msg("exec into a paused computer: %s", brig_error_message(err));
	brig_error_free(err);
	err = NULL;
	brig_exec_result_clear(&r);

	ASSERT_OK(brig_computer_resume(E, c->name, &err), err);
	ASSERT_OK(brig_computer_resume(E, c->name, &err), err); /* already running: fine */
	brig_test_sleep_ms(600);
	long r1 = counter(c->id);
	if (r1 <= p2)
		fail_msg("the counter did not go on after resume: %ld then %ld", p2, r1);
	char *out = sh_ok(c->name, "cat /workspace/keep");
	assert_string_equal(out, "kept\n"); /* and the refused exec never ran */
	free(out);
	brig_computer_free(c);
	brig_test_cleanup(E);
}

/* ---- 8. destroy and gc ---- */

static void assert_volume_gone(const char *container, brig_volume which)
{
	cleanup_free char *v = brig_spec_volume_name(container, which);
	json_t *j = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_volume_inspect(E, &j, v, &err);
	if (rc != BRIG_ENOTFOUND)
		fail_msg("volume %s: expected gone, got %s", v, brig_error_name(rc));
	brig_error_free(err);
	json_decref(j);
}

static void assert_volume_there(const char *container, brig_volume which)
{
	cleanup_free char *v = brig_spec_volume_name(container, which);
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_volume_inspect(E, &j, v, &err), err);
}

static bool container_exists(const char *ref)
{
	json_t *j = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_container_inspect(E, &j, ref, &err);
	json_decref(j);
	brig_error_free(err);
	if (rc != 0 && rc != BRIG_ENOTFOUND)
		fail_msg("inspect %s: %s", ref, brig_error_name(rc));
	return rc == 0;
}

static void test_destroy_removes_volumes(void **state)
{
	(void)state;
	brig_computer *c = create_default("destroy");
	brig_error *err = NULL;
	assert_volume_there(c->name, BRIG_VOLUME_WORKSPACE);
	assert_volume_there(c->name, BRIG_VOLUME_RUNTIME);
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	assert_false(container_exists(c->name));
	assert_volume_gone(c->name, BRIG_VOLUME_WORKSPACE);
	assert_volume_gone(c->name, BRIG_VOLUME_RUNTIME);
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err); /* again: success */
	brig_computer *g = NULL;
	assert_int_equal(brig_computer_get(E, &g, c->name, NULL, &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	brig_computer_free(c);
	brig_test_cleanup(E);
}

typedef struct reports {
	char lines[16][160];
	int n;
} reports;

static void on_report(const char *kind, const char *name, const char *why, void *payload)
{
	reports *r = payload;
	if (r->n < 16)
		snprintf(r->lines[r->n++], sizeof r->lines[0], "%s %s: %s", kind, name, why);
}

static bool reported(const reports *r, const char *kind, const char *name)
{
	char pre[128];
	snprintf(pre, sizeof pre, "%s %s:", kind, name);
	for (int i = 0; i < r->n; i++)
		if (strncmp(r->lines[i], pre, strlen(pre)) == 0)
			return true;
	return false;
}

static void on_report_mine(const char *kind, const char *name, const char *why, void *payload)
{
	(void)why;
	if (strcmp(kind, "volume") == 0 && strncmp(name, brig_guest__volume_name(), 26) == 0)
		*(bool *)payload = true;
}

/* brig-init volumes of other brig builds go once no container mounts them;
 * one still mounted stays, and this build's own is never a candidate. */
static void test_gc_init_volumes(void **state)
{
	(void)state;
	if (!brig_guest__volume_name())
		skip();
	brig_error *err = NULL;
	char tl[96];
	snprintf(tl, sizeof tl, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	/* two volumes shaped like other builds' brig-init volumes (names from
	 * this test run's id, so no real build's) */
	char names[3][32];
	for (int i = 0; i < 3; i++) {
		cleanup_free char *seed = xasprintf("%s-%d", brig_test_run_id(), i);
		unsigned char d[BRIG_SHA256_SIZE];
		char h[2 * BRIG_SHA256_SIZE + 1];
		brig_sha256(d, seed, strlen(seed));
		brig_hex(h, d, sizeof d);
		snprintf(names[i], sizeof names[i], "brig-init-%.16s%s", i == 2 ? h + 16 : h, i == 2 ? "-ok" : "");
		cleanup_json json_t *labels = brig_test_labels();
		json_object_set_new(labels, BRIG_LABEL_MANAGED, json_string("1"));
		json_object_set_new(labels, BRIG_LABEL_KIND, json_string("init"));
		json_object_set_new(labels, BRIG_LABEL_INIT, json_string("00000000000000000000000000000000"));
		cleanup_json json_t *vj =
			json_pack("{s:s, s:s, s:O}", "Name", names[i], "Driver", "local", "Labels", labels);
		ASSERT_OK(brig_engine_volume_create(E, NULL, vj, &err), err);
	}
	/* the second is mounted by a (test) container */
	cleanup_json json_t *mount = json_pack("{s:{s:[{s:s, s:s, s:s, s:b}]}}", "HostConfig", "Mounts", "Type",
					       "volume", "Source", names[1], "Target", "/.brig", "ReadOnly", 1);
	cleanup_free char *user = brig_test_container(E, "gc-init-user", mount);

	reports rep = {0};
	brig_gc_opts o = {.version = BRIG_GC_OPTS_VERSION,
			  .retention_s = -1,
			  .extra_label = tl,
			  .report = on_report,
			  .payload = &rep};
	/* young: left alone (a creator is about to mount it) */
	ASSERT_OK(brig_gc(E, &o, NULL, &err), err);
	assert_false(reported(&rep, "volume", names[0]));
	cleanup_json json_t *v = NULL;
	ASSERT_OK(brig_engine_volume_inspect(E, &v, names[0], &err), err);

	brig_test_sleep_ms(11500);
	memset(&rep, 0, sizeof rep);
	ASSERT_OK(brig_gc(E, &o, NULL, &err), err);
	for (int i = 0; i < rep.n; i++)
		print_message("gc: %s\n", rep.lines[i]);
	assert_true(reported(&rep, "volume", names[0]));
	assert_false(reported(&rep, "volume", names[1]));
	assert_true(reported(&rep, "volume", names[2])); /* another build's marker */
	json_decref(v);
	v = NULL;
	assert_int_equal(brig_engine_volume_inspect(E, &v, names[0], &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;
	ASSERT_OK(brig_engine_volume_inspect(E, &v, names[1], &err), err);

	/* this build's own volume: never reported, even by a gc of everything
	 * (a dry run: it removes nothing of anyone's) */
	ASSERT_OK(brig_guest__volume_ensure(E, brig_test_image(), &err), err);
	bool mine = false;
	brig_gc_opts all = {.version = BRIG_GC_OPTS_VERSION,
			    .dry_run = true,
			    .retention_s = -1,
			    .report = on_report_mine,
			    .payload = &mine};
	ASSERT_OK(brig_gc(E, &all, NULL, &err), err);
	assert_false(mine);

	ASSERT_OK(brig_engine_container_remove(E, user, true, false, &err), err);
	ASSERT_OK(brig_engine_volume_remove(E, names[1], false, &err), err);
}

static void test_gc(void **state)
{
	(void)state;
	brig_error *err = NULL;
	char tl[96];
	snprintf(tl, sizeof tl, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	brig_computer *stopped = create_default("gc-stopped");
	brig_computer *live = create_default("gc-live");
	ASSERT_OK(brig_computer_stop(E, stopped->name, &err), err);

	/* A young orphan volume: brig's labels, a container that never existed. */
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_identity oid = ident("gc-orphan");
	char oname[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(oname, &oid, &err), err);
	cleanup_json json_t *labels = NULL;
	ASSERT_OK(brig_spec_labels(&labels, &s, BRIG_KIND_COMPUTER, &oid, NULL, &err), err);
	cleanup_json json_t *vj = NULL;
	ASSERT_OK(brig_spec_volume_json(&vj, &s, oname, BRIG_VOLUME_WORKSPACE, labels, &err), err);
	ASSERT_OK(brig_engine_volume_create(E, NULL, vj, &err), err);
	brig_spec_clear(&s);

	brig_test_sleep_ms(2100);
	/* Dry run: reports the stopped computer, removes nothing. */
	reports rep = {0};
	brig_gc_opts o = {.version = BRIG_GC_OPTS_VERSION,
			  .dry_run = true,
			  .retention_s = 1,
			  .extra_label = tl,
			  .report = on_report,
			  .payload = &rep};
	size_t removed = 99;
	ASSERT_OK(brig_gc(E, &o, &removed, &err), err);
	for (int i = 0; i < rep.n; i++)
		print_message("gc dry run: %s\n", rep.lines[i]);
	assert_true(reported(&rep, "container", stopped->name));
	assert_false(reported(&rep, "container", live->name));
	assert_int_equal(removed, (size_t)rep.n);
	assert_true(container_exists(stopped->name));
	assert_volume_there(stopped->name, BRIG_VOLUME_WORKSPACE);
	assert_volume_there(stopped->name, BRIG_VOLUME_RUNTIME);

	/* For real: the stopped computer and its volumes go; the running one and
	 * the young orphan (its creator may be about to make the container) stay. */
	memset(&rep, 0, sizeof rep);
	o.dry_run = false;
	ASSERT_OK(brig_gc(E, &o, &removed, &err), err);
	for (int i = 0; i < rep.n; i++)
		print_message("gc: %s\n", rep.lines[i]);
	assert_true(reported(&rep, "container", stopped->name));
	assert_false(container_exists(stopped->name));
	assert_volume_gone(stopped->name, BRIG_VOLUME_WORKSPACE);
	assert_volume_gone(stopped->name, BRIG_VOLUME_RUNTIME);
	assert_true(container_exists(live->name));
	assert_volume_there(live->name, BRIG_VOLUME_WORKSPACE);
	assert_false(reported(&rep, "volume", oname));
	assert_volume_there(oname, BRIG_VOLUME_WORKSPACE);
	/* gc never looks outside its label: nothing else was reported. */
	assert_int_equal(rep.n, 1);

	/* destroy of a computer that never came to be sweeps what it left. */
	ASSERT_OK(brig_computer_destroy(E, oname, &err), err);
	assert_volume_gone(oname, BRIG_VOLUME_WORKSPACE);

	brig_computer_free(stopped);
	brig_computer_free(live);
	brig_test_cleanup(E);
}

/* ---- 9. validation before anything reaches Docker ---- */

static size_t count_test_objects(void)
{
	cleanup_json json_t *f = brig_test_filters();
	cleanup_json json_t *cl = NULL, *vl = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &cl, true, f, &err), err);
	ASSERT_OK(brig_engine_volume_list(E, &vl, f, &err), err);
	return json_array_size(cl) + json_array_size(json_object_get(vl, "Volumes"));
}

static void test_validation(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	assert_int_equal(count_test_objects(), 0);
	brig_spec s;
	brig_test_spec(&s, NULL);
	brig_error *err = NULL;
	static const char *const refused[] = {"host", "container:x", "container:brig-abc", "bridge"};
	for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
		assert_int_equal(brig_spec_set(&s, "network", refused[i], &err), BRIG_EINVAL);
		if (!strstr(brig_error_message(err), "network"))
			fail_msg("network %s: message does not name the field: %s", refused[i],
				 brig_error_message(err));
		brig_error_free(err);
		err = NULL;
		assert_int_equal(s.network, BRIG_NET_NONE); /* unchanged */
	}

	cleanup_json json_t *info = NULL;
	ASSERT_OK(brig_engine_info(E, &info, &err), err);
	long long host_mb = json_integer_value(json_object_get(info, "MemTotal")) / (1024 * 1024);
	assert_true(host_mb > 0);
	char mb[32];
	snprintf(mb, sizeof mb, "%lld", host_mb + 1024);
	ASSERT_OK(brig_spec_set(&s, "memory-mb", mb, &err), err);
	brig_identity id = ident("too-big");
	brig_computer *c = NULL;
	int rc = brig_computer_create(E, &c, &id, &s, &err);
	assert_int_equal(rc, BRIG_EINVAL);
	assert_null(c);
	if (!strstr(brig_error_message(err), "memory-mb"))
		fail_msg("memory over the host: message does not name the field: %s", brig_error_message(err));
	print_message("refused: %s\n", brig_error_message(err));
	brig_error_free(err);
	err = NULL;

	/* A bad name is refused naming its field. */
	brig_spec_clear(&s);
	brig_test_spec(&s, NULL);
	id.session = "no spaces";
	assert_int_equal(brig_computer_create(E, &c, &id, &s, &err), BRIG_EINVAL);
	if (!strstr(brig_error_message(err), "session"))
		fail_msg("bad session: %s", brig_error_message(err));
	brig_error_free(err);
	err = NULL;
	brig_spec_clear(&s);

	assert_int_equal(count_test_objects(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inspect_default_computer),
		cmocka_unit_test(test_inside_default_computer),
		cmocka_unit_test(test_credential_forwarded_not_stored),
		cmocka_unit_test(test_pause_resume),
		cmocka_unit_test(test_destroy_removes_volumes),
		cmocka_unit_test(test_gc),
		cmocka_unit_test(test_gc_init_volumes),
		cmocka_unit_test(test_validation),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
