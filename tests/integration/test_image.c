/* test_image.c — the runtime images against the real dockerd: the minimal
 * profile built from scratch (BRIG_TEST_IMAGE_BUILD=1) and reused from the
 * cache, a default locked-down computer on it, the credential's path, and
 * the agents profile with Claude Code and Codex (BRIG_TEST_AGENTS_IMAGE=1).
 * Building fetches from the Debian mirror and the npm registry on the host
 * only; every container here has network "none": no test reaches a model
 * provider or any other outside address. */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brig/image.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "image/image_internal.h"
#include "util/util.h"

#define ASSERT_CONTAINS(hay, needle)                                                     \
	do {                                                                             \
		const char *h_ = (hay);                                                  \
		if (!h_ || !strstr(h_, (needle)))                                        \
			fail_msg("expected '%s' in '%s'", (needle), h_ ? h_ : "(null)"); \
	} while (0)

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

static bool env_on(const char *name)
{
	const char *v = getenv(name);
	return v && strcmp(v, "1") == 0;
}

static bool image_present(const char *tag)
{
	json_t *img = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_image_inspect(E, &img, tag, &err);
	json_decref(img);
	brig_error_free(err);
	return rc == 0;
}

/* Progress for the ctest log: the first line of each stage and Docker's
 * step lines, not every file debootstrap fetches. */
typedef struct quiet_progress {
	const char *last_stage;
} quiet_progress;

static void progress_cb(const char *stage, const char *line, void *payload)
{
	quiet_progress *q = payload;
	bool first = !q->last_stage || strcmp(q->last_stage, stage) != 0;
	q->last_stage = stage;
	if (first || strncmp(line, "Step ", 5) == 0 || strstr(line, "cached") || strstr(line, "Successfully"))
		fprintf(stderr, "  [%s] %s\n", stage, line);
}

static void print_result(const char *what, const brig_image_result *res)
{
	char stages[512];
	size_t off = 0;
	for (size_t i = 0; i < res->stage_count && off < sizeof stages; i++)
		off += (size_t)snprintf(stages + off, sizeof stages - off, "%s%s %.1fs%s", i ? ", " : "",
					res->stages[i].name, (double)res->stages[i].ms / 1000.0,
					res->stages[i].cached ? " (cached)" : "");
	print_message("%s: %s %s in %.1f s (%s); context %zu files, %llu bytes\n", what, res->tag,
		      res->image_id ? res->image_id : "(dry run)", (double)res->total_ms / 1000.0, stages,
		      res->file_count, (unsigned long long)res->context_bytes);
	for (size_t i = 0; i < res->file_count; i++)
		print_message("    %12llu  %s\n", (unsigned long long)res->files[i].size, res->files[i].name);
}

static void build(brig_image_profile profile, const char *cache_dir, brig_image_result *res)
{
	quiet_progress q = {0};
	brig_image_build_opts o = {.version = BRIG_IMAGE_BUILD_OPTS_VERSION,
				   .profile = profile,
				   .cache_dir = cache_dir,
				   .progress = progress_cb,
				   .payload = &q};
	brig_error *err = NULL;
	ASSERT_OK(brig_image_build(E, res, &o, &err), err);
	assert_non_null(res->image_id);
	assert_true(image_present(res->tag));
}

/* The tag's image carries brig's labels and user. */
static void check_image_config(const char *tag, const char *profile)
{
	json_t *img = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_image_inspect(E, &img, tag, &err), err);
	json_t *cfg = json_object_get(img, "Config");
	assert_string_equal(json_string_value(json_object_get(cfg, "User")), "sandbox");
	assert_string_equal(json_string_value(json_object_get(cfg, "WorkingDir")), "/workspace");
	json_t *labels = json_object_get(cfg, "Labels");
	assert_string_equal(json_string_value(json_object_get(labels, "brig.image.profile")), profile);
	assert_int_equal(strlen(json_string_value(json_object_get(labels, "brig.image.lock"))), 64);
	assert_string_equal(json_string_value(json_object_get(labels, BRIG_LABEL_ETC_HOSTS)), BRIG_ETC_HOSTS_OPTIONAL);
	bool home = false;
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(cfg, "Env"), i, v) {
		if (strcmp(json_string_value(v), "HOME=/runtime") == 0)
			home = true;
	}
	assert_true(home);
	json_decref(img);
}

/* ---- the minimal profile, from scratch and again from the cache ---- */

static void test_build_minimal_from_scratch(void **state)
{
	(void)state;
	if (!env_on("BRIG_TEST_IMAGE_BUILD")) {
		print_message("skipped: set BRIG_TEST_IMAGE_BUILD=1 to build brig-sandbox:local from scratch\n");
		skip();
	}
	if (geteuid() != 0) {
		print_message("skipped: building a root filesystem needs root\n");
		skip();
	}
	/* A private, empty cache: the root filesystem is made from scratch. */
	char cache[] = "/tmp/brig-test-image-cache-XXXXXX";
	assert_non_null(mkdtemp(cache));
	brig_image_result first, again;
	build(BRIG_IMAGE_MINIMAL, cache, &first);
	print_result("minimal from scratch", &first);
	assert_false(first.rootfs_cached);
	assert_string_equal(first.tag, BRIG_IMAGE_MINIMAL_TAG);
	assert_int_equal(first.file_count, 2);
	assert_string_equal(first.files[0].name, "Dockerfile");
	assert_string_equal(first.files[1].name, "rootfs.tar");
	assert_true(first.total_ms < 15 * 60 * 1000);
	check_image_config(BRIG_IMAGE_MINIMAL_TAG, "minimal");

	/* The same lock again: the cached tarball, Docker's layer cache, the
	 * same image. */
	build(BRIG_IMAGE_MINIMAL, cache, &again);
	print_result("minimal again (cached)", &again);
	assert_true(again.rootfs_cached);
	assert_string_equal(again.rootfs_key, first.rootfs_key);
	assert_string_equal(again.image_id, first.image_id);

	/* Recorded. */
	json_t *rec = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_image_records(&rec, cache, &err), err);
	json_t *r = json_object_get(rec, BRIG_IMAGE_MINIMAL_TAG);
	assert_string_equal(json_string_value(json_object_get(r, "id")), first.image_id);
	assert_string_equal(json_string_value(json_object_get(r, "profile")), "minimal");
	json_decref(rec);
	brig_image_result_clear(&first);
	brig_image_result_clear(&again);
	brig_image__remove_tree(cache);
}

/* ---- a default locked-down computer on brig-sandbox:local ---- */

static void labelled_spec(brig_spec *s, const char *image, const char *harness)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", image, &err), err);
	ASSERT_OK(brig_spec_set(s, "harness", harness, &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(s, l, &err), err);
}

static int run(const char *ref, const char *const *argv, brig_exec_result *res)
{
	brig_error *err = NULL;
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = 120 * 1000};
	memset(res, 0, sizeof *res);
	ASSERT_OK(brig_computer_exec(E, ref, &o, res, &err), err);
	return res->exit_code;
}

static bool proc_cmdlines_contain(const char *needle)
{
	DIR *d = opendir("/proc");
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	size_t nl = strlen(needle);
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char p[300];
		snprintf(p, sizeof p, "/proc/%s/cmdline", de->d_name);
		int fd = open(p, O_RDONLY);
		if (fd < 0)
			continue;
		char buf[65536];
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		for (ssize_t i = 0; n > 0 && i + (ssize_t)nl <= n; i++)
			if (memcmp(buf + i, needle, nl) == 0)
				found = true;
	}
	closedir(d);
	return found;
}

typedef struct slow_exec {
	const char *ref;
	brig_exec_result res;
	int rc;
} slow_exec;

static void *slow_exec_thread(void *p)
{
	slow_exec *s = p;
	static const char *const argv[] = {"sh", "-c", "sleep 2; printenv ANTHROPIC_API_KEY", NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = 60 * 1000};
	brig_error *err = NULL;
	s->rc = brig_computer_exec(E, s->ref, &o, &s->res, &err);
	brig_error_free(err);
	return NULL;
}

static void test_minimal_computer(void **state)
{
	(void)state;
	if (!image_present(BRIG_IMAGE_MINIMAL_TAG)) {
		print_message("skipped: %s is not built (brig image build, or BRIG_TEST_IMAGE_BUILD=1)\n",
			      BRIG_IMAGE_MINIMAL_TAG);
		skip();
	}
	/* A credential only this test knows, in brig's own environment. */
	char cred[96];
	snprintf(cred, sizeof cred, "sk-brig-test-%s-%ld", brig_test_run_id(), (long)time(NULL));
	setenv("ANTHROPIC_API_KEY", cred, 1);

	brig_spec s;
	labelled_spec(&s, BRIG_DEFAULT_IMAGE, "claude"); /* the default image is brig-sandbox:local */
	assert_string_equal(s.image, BRIG_IMAGE_MINIMAL_TAG);
	brig_identity id = {.ns = NS, .agent = "claude", .session = "minimal", .generation = 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);

	brig_exec_result r;
	static const char *const id_argv[] = {"id", NULL};
	assert_int_equal(run(c->name, id_argv, &r), 0);
	ASSERT_CONTAINS(r.out.data, "uid=1000(sandbox) gid=1000(sandbox)");
	brig_exec_result_clear(&r);
	static const char *const py[] = {"python3", "--version", NULL};
	assert_int_equal(run(c->name, py, &r), 0);
	ASSERT_CONTAINS(r.out.data, "Python 3.11");
	brig_exec_result_clear(&r);
	static const char *const git[] = {"git", "--version", NULL};
	assert_int_equal(run(c->name, git, &r), 0);
	ASSERT_CONTAINS(r.out.data, "git version 2.");
	brig_exec_result_clear(&r);
	static const char *const tini[] = {"tini", "--version", NULL};
	assert_int_equal(run(c->name, tini, &r), 0);
	brig_exec_result_clear(&r);
	/* Without Docker's network sandbox (the image's brig.etc-hosts label) and
	 * so without its /etc/hosts, localhost and the container's own name still
	 * resolve (libnss-myhostname), to 127.0.0.1 first (IPv6 is off, as in
	 * Docker's sandbox: a client that takes the first address, as Node 18
	 * does, reaches a server on 127.0.0.1 by the name). */
	json_t *cfg = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &cfg, c->name, &err), err);
	assert_true(json_is_true(json_object_get(json_object_get(cfg, "Config"), "NetworkDisabled")));
	json_decref(cfg);
	static const char *const lh[] = {
		"python3", "-c",
		"import socket\n"
		"s = socket.create_server(('127.0.0.1', 0))\n"
		"first = socket.getaddrinfo('localhost', s.getsockname()[1], type=socket.SOCK_STREAM)[0]\n"
		"c = socket.socket(first[0], first[1])\n"
		"c.connect(first[4])\n"
		"a, _ = s.accept()\n"
		"c.sendall(b'hi')\n"
		"print(a.recv(2).decode(), first[4][0], open('/etc/hosts').read() == '')\n"
		"socket.getaddrinfo(socket.gethostname(), None)\n",
		NULL};
	assert_int_equal(run(c->name, lh, &r), 0);
	assert_string_equal(r.out.data, "hi 127.0.0.1 True\n");
	brig_exec_result_clear(&r);
	/* Read-only root, writable volumes, HOME in /runtime. */
	static const char *const ro[] = {
		"sh", "-c", "touch /usr/local/probe 2>&1; touch /workspace/ok /runtime/ok && echo $HOME", NULL};
	run(c->name, ro, &r);
	ASSERT_CONTAINS(r.out.data, "Read-only file system");
	ASSERT_CONTAINS(r.out.data, "/runtime");
	brig_exec_result_clear(&r);
	/* No setuid program is left in the image. */
	static const char *const suid[] = {"sh", "-c", "find / -xdev -perm /6000 -type f 2>/dev/null | wc -l", NULL};
	assert_int_equal(run(c->name, suid, &r), 0);
	assert_string_equal(r.out.data, "0\n");
	brig_exec_result_clear(&r);

	/* The credential reaches the process, and nothing on the host's
	 * process list carries it while the command runs. */
	slow_exec se = {.ref = c->name};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, slow_exec_thread, &se), 0);
	bool seen = false;
	for (int i = 0; i < 15; i++) {
		if (proc_cmdlines_contain(cred))
			seen = true;
		usleep(100 * 1000);
	}
	pthread_join(th, NULL);
	assert_true(proc_cmdlines_contain("integration_test_image")); /* the scan sees processes */
	assert_int_equal(se.rc, 0);
	assert_int_equal(se.res.exit_code, 0);
	char want[128];
	snprintf(want, sizeof want, "%s\n", cred);
	assert_string_equal(se.res.out.data, want);
	brig_exec_result_clear(&se.res);
	assert_false(seen);

	/* Absent from what Docker recorded. */
	json_t *ins = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &ins, c->name, &err), err);
	char *dump = json_dumps(ins, 0);
	assert_null(strstr(dump, cred));
	free(dump);
	json_decref(ins);

	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	brig_computer_free(c);
	brig_spec_clear(&s);
	unsetenv("ANTHROPIC_API_KEY");
}

/* ---- the agents profile ---- */

static char *lock_version(const char *file)
{
	json_t *lock = NULL;
	char sha[65];
	brig_error *err = NULL;
	char path[512];
	snprintf(path, sizeof path, "%s/image/brig-image.lock", BRIG_SOURCE_DIR);
	ASSERT_OK(brig_image__lock_load(&lock, sha, path, &err), err);
	char *v = NULL;
	size_t i;
	json_t *e;
	json_array_foreach (json_object_get(brig_image__lock_profile(lock, "agents"), "npm"), i, e) {
		if (strcmp(json_string_value(json_object_get(e, "file")), file) == 0)
			v = xstrdup(json_string_value(json_object_get(e, "version")));
	}
	json_decref(lock);
	assert_non_null(v);
	return v;
}

static void check_locked_down(const char *name)
{
	json_t *ins = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &ins, name, &err), err);
	json_t *hc = json_object_get(ins, "HostConfig");
	assert_string_equal(json_string_value(json_object_get(json_object_get(ins, "Config"), "User")), "1000:1000");
	assert_true(json_is_true(json_object_get(hc, "ReadonlyRootfs")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(hc, "CapDrop"), 0)), "ALL");
	assert_string_equal(json_string_value(json_object_get(hc, "NetworkMode")), "none");
	json_decref(ins);
}

/* Runs `brig agent AGENT --network none -- --version` with a credential in
 * its environment; checks the output and that the credential is nowhere in
 * it nor in the container's inspect. */
static void agent_cli_version(const char *agent, const char *cred_key, const char *want_version)
{
	char cred[128], env_cred[200], label[96];
	snprintf(cred, sizeof cred, "sk-brig-test-%s-%s-%ld", agent, brig_test_run_id(), (long)time(NULL));
	snprintf(env_cred, sizeof env_cred, "%s=%s", cred_key, cred);
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	char *const argv[] = {"brig",      "agent", (char *)agent, "--ns", NS,   "--session", "cli",
			      "--network", "none",  "--label",     label,  "--", "--version", NULL};
	char *const env[] = {env_cred, NULL};
	char *out = NULL, *errout = NULL;
	int rc = brig_test_spawn(argv, NULL, env, &out, &errout);
	if (rc != 0)
		fail_msg("brig agent %s --version exited %d: %s %s", agent, rc, out, errout);
	print_message("brig agent %s -- --version: %s", agent, out);
	ASSERT_CONTAINS(out, want_version);
	ASSERT_CONTAINS(errout, "will NOT reach its model");
	assert_null(strstr(out, cred));
	assert_null(strstr(errout, cred));
	free(out);
	free(errout);

	brig_identity id = {.ns = NS, .agent = agent, .session = "cli", .generation = 1};
	char name[BRIG_NAME_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	check_locked_down(name);
	json_t *ins = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &ins, name, &err), err);
	char *dump = json_dumps(ins, 0);
	assert_null(strstr(dump, cred));
	ASSERT_CONTAINS(dump, strcmp(agent, "claude") == 0 ? "CLAUDE_CONFIG_DIR=/runtime/.claude"
							   : "CODEX_HOME=/runtime/.codex");
	free(dump);
	json_decref(ins);
	ASSERT_OK(brig_computer_destroy(E, name, &err), err);
}

static void test_agents_image(void **state)
{
	(void)state;
	if (!env_on("BRIG_TEST_AGENTS_IMAGE")) {
		print_message("skipped: set BRIG_TEST_AGENTS_IMAGE=1 to build brig-agents:local and run the CLIs\n");
		skip();
	}
	/* The default cache: the agents root filesystem and npm tarballs are
	 * large, and the lock pins them, so reuse is safe. */
	brig_image_result res;
	build(BRIG_IMAGE_AGENTS, NULL, &res);
	print_result("agents", &res);
	assert_int_equal(res.file_count, 6);
	check_image_config(BRIG_IMAGE_AGENTS_TAG, "agents");
	brig_image_result_clear(&res);

	char *claude_v = lock_version("npm/claude-code.tgz");
	char *codex_v = lock_version("npm/codex.tgz");

	/* A default locked-down computer (read-only root, uid 1000, no
	 * capabilities, network none) on the agents image. */
	brig_spec s;
	labelled_spec(&s, BRIG_IMAGE_AGENTS_TAG, "none");
	brig_identity id = {.ns = NS, .agent = "agents", .session = "versions", .generation = 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	check_locked_down(c->name);
	brig_exec_result r;
	static const char *const claude[] = {"claude", "--version", NULL};
	if (run(c->name, claude, &r) != 0)
		fail_msg("claude --version: exit %d: %s %s", r.exit_code, r.out.data, r.err.data);
	ASSERT_CONTAINS(r.out.data, claude_v);
	brig_exec_result_clear(&r);
	static const char *const codex[] = {"codex", "--version", NULL};
	if (run(c->name, codex, &r) != 0)
		fail_msg("codex --version: exit %d: %s %s", r.exit_code, r.out.data, r.err.data);
	ASSERT_CONTAINS(r.out.data, codex_v);
	brig_exec_result_clear(&r);
	static const char *const caps[] = {"sh", "-c", "id -u; grep CapEff /proc/self/status; node --version", NULL};
	assert_int_equal(run(c->name, caps, &r), 0);
	ASSERT_CONTAINS(r.out.data, "1000\nCapEff:\t0000000000000000\nv18.");
	brig_exec_result_clear(&r);
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	brig_computer_free(c);
	brig_spec_clear(&s);

	/* The command a user runs, with a credential in its environment. */
	agent_cli_version("claude", "ANTHROPIC_API_KEY", claude_v);
	agent_cli_version("codex", "OPENAI_API_KEY", codex_v);
	free(claude_v);
	free(codex_v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_minimal_from_scratch),
		cmocka_unit_test(test_minimal_computer),
		cmocka_unit_test(test_agents_image),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
