/* test_egress_secret.c — credentials that never enter (issue 19.3),
 * against the real dockerd: a computer made with --secret holds only a
 * placeholder; brig's proxy terminates TLS for the secret's host and the
 * upstream sees the real value there; another allowed host sees the
 * placeholder; the value is in none of the sandbox's environment, files
 * or /proc, docker inspect, brig's output, the daemon's log, the proxy's
 * log or the ledger. Traffic never leaves this machine: the upstreams are
 * servers this test starts on 127.0.0.1 with its own CA
 * (helpers/egress_upstream.py), the proxy resolves the test's names to
 * them (BRIG_EGRESS_HOSTS) and trusts the test CA for them
 * (BRIG_EGRESS_UPSTREAM_CA), both test-only. One egress proxy per host:
 * the test skips when one already serves. */
#include "testutil.h"

#include "egress_testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "util/util.h"

static brig_engine *E;
static egress_test ET = EGRESS_TEST_INIT;
static char NS[64];
static char VALUE[64];
static long DLOG_OFF; /* the daemon's log before this test */
#define DLOG "/var/log/dockerd.log"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)
/* Never prints the haystack: it may hold the value. */
#define ASSERT_NO_VALUE(hay, what)                                     \
	do {                                                           \
		if ((hay) && strstr((hay), VALUE))                     \
			fail_msg("the secret's value is in %s", what); \
	} while (0)

static char *slurp(const char *path)
{
	return egress_test_slurp(path, 1 << 26);
}

static int setup(void **state)
{
	(void)state;
	if (brig_test_setup(&E, NS, sizeof NS, "es") != 0)
		return -1;
	struct stat dst;
	DLOG_OFF = stat(DLOG, &dst) == 0 ? (long)dst.st_size : 0;
	if (egress_test_prepare(&ET, "test_egress_secret", "brig-egress-secret-test",
				"secret.brig.test 127.0.0.1\nother.brig.test 127.0.0.1\nnosan.brig.test 127.0.0.1\n") !=
	    0)
		return -1;
	if (ET.skip)
		return 0;
	char path[320];
	snprintf(path, sizeof path, "%s/ca.pem", ET.dir);
	setenv("BRIG_EGRESS_UPSTREAM_CA", path, 1);
	unsigned char rnd[12];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return -1;
	memcpy(VALUE, "sk-brig-test-", 13);
	brig_hex(VALUE + 13, rnd, sizeof rnd);
	setenv("BRIG_TEST_SECRET", VALUE, 1);
	return egress_test_upstreams(&ET, "test_egress_secret");
}

static pid_t SERVE_PID = -1; /* test_secret_serve's server, stopped here even when it failed */

static int teardown(void **state)
{
	(void)state;
	if (SERVE_PID > 0) {
		kill(SERVE_PID, SIGKILL);
		waitpid(SERVE_PID, NULL, 0);
	}
	return egress_test_teardown(&ET, &E, "test_egress_secret");
}

/* Runs brig with args; exit code, stdout and stderr together in *out. */
static int cli(char **out, const char *const *args)
{
	return egress_test_cli(out, args, 1 << 22);
}

static char *exec_out(const char *name, const char *const *argv)
{
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = 120000,
			    .capture_max = 32 << 20};
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, name, &o, &r, &err), err);
	brig_buf b;
	brig_buf_init(&b, 64 << 20);
	if (r.out.data)
		brig_buf_put(&b, r.out.data, r.out.len);
	if (r.err.data)
		brig_buf_put(&b, r.err.data, r.err.len);
	brig_exec_result_clear(&r);
	size_t n = 0;
	char *text = brig_buf_steal(&b, &n);
	for (size_t i = 0; i < n; i++) /* /proc's environ and cmdline hold NULs */
		if (text[i] == '\0')
			text[i] = '\n';
	return text;
}

/* The value of KEY= in the probe's output (static buffer). */
static const char *val(const char *out, const char *key)
{
	static char v[2048];
	char k[64];
	snprintf(k, sizeof k, "\n%s=", key);
	cleanup_free char *text = xasprintf("\n%s", out);
	const char *p = strstr(text, k);
	if (!p)
		fail_msg("no %s in probe output", key);
	p += strlen(k);
	size_t n = strcspn(p, "\n");
	snprintf(v, sizeof v, "%.*s", (int)(n < sizeof v - 1 ? n : sizeof v - 1), p);
	return v;
}

static void test_secret_computer(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	char allow[192], label[128];
	snprintf(allow, sizeof allow, "secret.brig.test:%d,other.brig.test:%d,nosan.brig.test:%d", ET.https_port,
		 ET.https_port, ET.https_port);
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	const char *create[] = {"create",    "--ns",     NS,
				"--agent",   "agent",    "--session",
				"s1",        "--image",  BRIG_DEFAULT_IMAGE,
				"--network", "egress",   "--allow",
				allow,       "--secret", "BRIG_TEST_SECRET@secret.brig.test,nosan.brig.test",
				"--label",   label,      NULL};
	cleanup_free char *out = NULL;
	int rc = cli(&out, create);
	ASSERT_NO_VALUE(out, "brig create's output");
	if (rc != 0)
		fail_msg("brig create exited %d: %s", rc, out);
	char name[160];
	snprintf(name, sizeof name, "%.*s", (int)strcspn(out, "\n"), out);

	/* Inside: a placeholder, brig's authority trusted beside the system's. */
	cleanup_free char *script = slurp(BRIG_SOURCE_DIR "/tests/integration/helpers/egress_secret_probe.py");
	assert_non_null(script);
	char port[16];
	snprintf(port, sizeof port, "%d", ET.https_port);
	const char *probe[] = {"python3", "-c", script, port, ET.ca, NULL};
	int64_t t0 = brig_now_ms();
	cleanup_free char *p = exec_out(name, probe);
	fprintf(stderr, "test_egress_secret: the probe took %lld ms\n", (long long)(brig_now_ms() - t0));
	ASSERT_NO_VALUE(p, "the probe's output");
	char ph[128];
	snprintf(ph, sizeof ph, "%s", val(p, "PH"));
	assert_int_equal(strlen(ph), strlen(BRIG_EGRESS_PLACEHOLDER_PREFIX) + 32);
	assert_int_equal(strncmp(ph, BRIG_EGRESS_PLACEHOLDER_PREFIX, strlen(BRIG_EGRESS_PLACEHOLDER_PREFIX)), 0);
	assert_string_equal(val(p, "SSL_CERT_FILE"), BRIG_EGRESS_CA_BUNDLE_PATH);
	assert_string_equal(val(p, "SECRET"), "recorded");
	assert_string_equal(val(p, "SECRET_POST"), "recorded");
	assert_string_equal(val(p, "OTHER"), "recorded");
	/* brig's authority vouches for no other host. */
	ASSERT_CONTAINS(val(p, "OTHER_DEFAULT"), "fail");
	/* A client that does not trust brig's authority fails its handshake;
	 * an upstream whose certificate does not name the host is refused. */
	ASSERT_CONTAINS(val(p, "UNTRUSTING"), "fail");
	ASSERT_CONTAINS(val(p, "NOSAN"), "fail");
	/* Inside the tunnel a request must name the tunnel's host. */
	ASSERT_CONTAINS(val(p, "HOSTMISMATCH"), "fail");
	/* An upstream echoing the request never hands the value back: the
	 * tunnel is cut when it does, TRACE is refused; a placeholder in a
	 * header no secret is bound to stays the placeholder. */
	ASSERT_CONTAINS(val(p, "ECHO"), "fail");
	ASSERT_CONTAINS(val(p, "TRACE"), "fail");
	ASSERT_CONTAINS(val(p, "ECHO_UNBOUND"), "X-Echo: brig-placeholder-");

	/* What the upstreams saw (recorded on this host). */
	char seenp[320];
	snprintf(seenp, sizeof seenp, "%s/seen", ET.dir);
	cleanup_free char *seen = slurp(seenp);
	assert_non_null(seen);
	cleanup_free char *auth_real = xasprintf("Authorization: Bearer %s\n", VALUE);
	cleanup_free char *twice_ph = xasprintf("X-Twice: %s,%s\n", ph, ph);
	cleanup_free char *auth_ph = xasprintf("Authorization: Bearer %s\n", ph);
	cleanup_free char *body_ph = xasprintf("body=%s\n", ph);
	int secret_seen = 0, other_seen = 0;
	for (char *rec = seen, *next; rec && *rec; rec = next) {
		next = strstr(rec, "--\n");
		if (next) {
			*next = '\0';
			next += 3;
		}
		if (strstr(rec, "Host: secret.brig.test")) {
			secret_seen++;
			if (!strstr(rec, auth_real) || !strstr(rec, twice_ph) || strstr(rec, "Bearer brig-placeholder"))
				fail_msg("the secret's upstream did not see the value (Authorization only)");
			if (strncmp(rec, "POST", 4) == 0 && !strstr(rec, body_ph))
				fail_msg("a body must pass unchanged (the placeholder)");
		} else if (strstr(rec, "Host: other.brig.test")) {
			other_seen++;
			ASSERT_NO_VALUE(rec, "what another allowed host saw");
			ASSERT_CONTAINS(rec, auth_ph);
		}
	}
	assert_int_equal(secret_seen, 2); /* the Host mismatch never reached it */
	assert_int_equal(other_seen, 1);

	/* The sandbox's environment, files and /proc: as its user, and as root
	 * inside (every process's environ and command line). */
	const char *look[] = {"sh", "-c",
			      "env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat $f; done 2>/dev/null; "
			      "python3 -c \"import os\nfor d in ('/runtime', '/workspace', '/tmp'):\n for r, _, fs in "
			      "os.walk(d):\n  for f in fs:\n   try: print(open(os.path.join(r, f), errors='replace')"
			      ".read())\n   except OSError: pass\"; true",
			      NULL};
	cleanup_free char *inside = exec_out(name, look);
	ASSERT_CONTAINS(inside, ph);
	ASSERT_CONTAINS(inside, "BEGIN CERTIFICATE");
	ASSERT_NO_VALUE(inside, "the sandbox (environment, files, /proc)");
	assert_null(strstr(inside, "PRIVATE KEY"));
	cleanup_free char *rootcmd =
		xasprintf("docker exec -u 0 %s sh -c 'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline' 2>&1", name);
	FILE *f = popen(rootcmd, "r");
	assert_non_null(f);
	brig_buf rb;
	brig_buf_init(&rb, 1 << 24);
	char tmp[4096];
	size_t k;
	while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
		if (brig_buf_add(&rb, tmp, k))
			break;
	pclose(f);
	size_t rn = 0;
	cleanup_free char *root_view = brig_buf_steal(&rb, &rn);
	for (size_t i = 0; i < rn; i++)
		if (root_view[i] == '\0')
			root_view[i] = '\n';
	ASSERT_NO_VALUE(root_view, "/proc as root inside the sandbox");
	ASSERT_CONTAINS(root_view, "brig-init");
	/* brig's authority: root's, read-only to the sandbox */
	const char *ls[] = {"ls", "-ln", "/runtime/.brig/ca.pem", "/runtime/.brig/ca-bundle.pem", NULL};
	cleanup_free char *lsout = exec_out(name, ls);
	ASSERT_CONTAINS(lsout, "-r--r--r-- 1 0 0");

	/* docker inspect: the placeholder and the names, never the value. */
	brig_error *err = NULL;
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	cleanup_free char *ins = json_dumps(j, 0);
	ASSERT_NO_VALUE(ins, "docker inspect");
	ASSERT_CONTAINS(ins, ph);
	ASSERT_CONTAINS(ins, "\"" BRIG_LABEL_SECRETS "\": \"BRIG_TEST_SECRET\"");
	ASSERT_CONTAINS(ins, "NODE_EXTRA_CA_CERTS=" BRIG_EGRESS_CA_PATH);

	/* brig's own output: inspect, and up again without the value in its
	 * environment (the proxy keeps the value it has). */
	const char *inspect[] = {"inspect", name, "--json", NULL};
	cleanup_free char *io = NULL;
	assert_int_equal(cli(&io, inspect), 0);
	ASSERT_NO_VALUE(io, "brig inspect's output");
	ASSERT_CONTAINS(io, "BRIG_TEST_SECRET@secret.brig.test,nosan.brig.test");
	unsetenv("BRIG_TEST_SECRET");
	cleanup_free char *again = NULL;
	rc = cli(&again, create);
	setenv("BRIG_TEST_SECRET", VALUE, 1);
	if (rc != 0)
		fail_msg("brig create (adopt) exited %d: %s", rc, again);
	ASSERT_CONTAINS(again, "adopted");
	cleanup_free char *p2 = exec_out(name, probe);
	assert_string_equal(val(p2, "SECRET"), "recorded");
	assert_string_equal(val(p2, "PH"), ph);

	/* The proxy's log and the ledger: each decision, never the value. */
	char path[600];
	snprintf(path, sizeof path, "%s/proxy.log", ET.egress_dir);
	cleanup_free char *log = slurp(path);
	assert_non_null(log);
	ASSERT_NO_VALUE(log, "the proxy's log");
	ASSERT_CONTAINS(log, "TLS terminated for a secret; 1 placeholder(s) replaced");
	ASSERT_CONTAINS(log, "secret reflected by the upstream; the tunnel was cut");
	ASSERT_CONTAINS(log, "TRACE and TRACK are refused in the TLS tunnel");
	ASSERT_CONTAINS(log, "Host in the TLS tunnel differs from the tunnel's host");
	ASSERT_CONTAINS(log, "TLS with the sandbox failed (does it trust brig's authority?");
	ASSERT_CONTAINS(log, "bytes sent before the proxy's answer to CONNECT");
	ASSERT_CONTAINS(log, "TLS to nosan.brig.test failed: its certificate is not trusted or not for this name");
	assert_null(strstr(log, "Sanitizer"));
	assert_null(strstr(log, "runtime error:"));
	const char *ledger[] = {"egress", "log", name, "--json", NULL};
	cleanup_free char *lo = NULL;
	assert_int_equal(cli(&lo, ledger), 0);
	ASSERT_NO_VALUE(lo, "the ledger");
	ASSERT_CONTAINS(lo, "\"host\": \"secret.brig.test\"");
	ASSERT_CONTAINS(lo, "\"host\": \"other.brig.test\"");
	ASSERT_CONTAINS(lo, "placeholder(s) replaced");
	ASSERT_CONTAINS(lo, "\"decision\": \"denied\"");
	ASSERT_CONTAINS(lo, "secret reflected");
	/* The daemon's log (where this machine's bootstrap writes it). */
	cleanup_free char *dlog = NULL;
	FILE *df = fopen(DLOG, "re");
	if (df && fseek(df, DLOG_OFF, SEEK_SET) == 0) {
		brig_buf db;
		brig_buf_init(&db, 1 << 28);
		size_t got;
		while ((got = fread(tmp, 1, sizeof tmp, df)) > 0)
			if (brig_buf_add(&db, tmp, got))
				break;
		dlog = brig_buf_steal(&db, NULL);
	}
	if (df)
		fclose(df);
	ASSERT_NO_VALUE(dlog, "the daemon's log");

	/* On the host: the value only in NAME.secrets, 0600; the authority's
	 * key 0600; the proxy holds no capability. */
	snprintf(path, sizeof path, "%s/%s.secrets", ET.egress_dir, name);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof path, "%s/ca/ca.key", ET.egress_dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(path, sizeof path, "%s/proxy.pid", ET.egress_dir);
	cleanup_free char *pid = slurp(path);
	assert_non_null(pid);
	snprintf(path, sizeof path, "/proc/%d/status", atoi(pid));
	cleanup_free char *status = slurp(path);
	assert_non_null(status);
	ASSERT_CONTAINS(status, "CapEff:\t0000000000000000");
	ASSERT_CONTAINS(status, "CapBnd:\t0000000000000000");
	ASSERT_CONTAINS(status, "NoNewPrivs:\t1");

	/* Destroying the computer removes its secrets file. */
	const char *destroy[] = {"destroy", name, NULL};
	cleanup_free char *dout = NULL;
	assert_int_equal(cli(&dout, destroy), 0);
	snprintf(path, sizeof path, "%s/%s.secrets", ET.egress_dir, name);
	assert_int_not_equal(access(path, F_OK), 0);
}

/* brig-run-*.secrets files in the egress directory. */
static int run_secrets_files(void)
{
	DIR *d = opendir(ET.egress_dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, "brig-run-", 9) == 0 && l > 8 && strcmp(de->d_name + l - 8, ".secrets") == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* This test's run containers still there. */
static int64_t runs_left(void)
{
	char l1[96], l2[96];
	snprintf(l1, sizeof l1, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(l2, sizeof l2, BRIG_LABEL_KIND "=run");
	cleanup_json json_t *f = json_pack("{s:[s,s]}", "label", l1, l2);
	cleanup_json json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	return (int64_t)json_array_size(list);
}

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* brig run --secret: the same placeholder and proxy as a computer's, for a
 * disposable container; the harness's credential is not forwarded beside
 * it, and the run leaves no secrets file behind. */
static void test_secret_run(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	char allow[96], label[128], port[16];
	snprintf(allow, sizeof allow, "secret.brig.test:%d", ET.https_port);
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(port, sizeof port, "%d", ET.https_port);
	char seenp[320];
	snprintf(seenp, sizeof seenp, "%s/seen", ET.dir);
	cleanup_free char *auth_real = xasprintf("Authorization: Bearer %s\n", VALUE);
	cleanup_free char *before = slurp(seenp);
	const char *probe = "import os, ssl, sys, urllib.request\n"
			    "ph = os.environ['BRIG_TEST_SECRET']\n"
			    "print('PH=' + ph)\n"
			    "print('KEY=' + os.environ.get('ANTHROPIC_API_KEY', 'unset'))\n"
			    "req = urllib.request.Request('https://secret.brig.test:%s/headers' % sys.argv[1],\n"
			    "                             headers={'Authorization': 'Bearer ' + ph})\n"
			    "ctx = ssl.create_default_context()\n"
			    "print('SECRET=' + urllib.request.urlopen(req, timeout=90, context=ctx).read().decode())\n";
	/* The harness's own credential in brig's environment: with a secret it
	 * stays out (the placeholder stands in). */
	setenv("ANTHROPIC_API_KEY", VALUE, 1);
	const char *run[] = {"run",      "--image", BRIG_DEFAULT_IMAGE, "--network", "egress", "--allow",
			     allow,      "--secret", "BRIG_TEST_SECRET@secret.brig.test", "--harness", "claude",
			     "--label",  label,     "--",               "python3",   "-c",     probe,
			     port,       NULL};
	cleanup_free char *out = NULL;
	int rc = cli(&out, run);
	unsetenv("ANTHROPIC_API_KEY");
	ASSERT_NO_VALUE(out, "brig run's output");
	if (rc != 0)
		fail_msg("brig run exited %d: %s", rc, out);
	const char *ph = val(out, "PH");
	assert_int_equal(strlen(ph), strlen(BRIG_EGRESS_PLACEHOLDER_PREFIX) + 32);
	assert_string_equal(val(out, "KEY"), "unset");
	assert_string_equal(val(out, "SECRET"), "recorded");
	/* The upstream saw the value once more than before the run. */
	cleanup_free char *after = slurp(seenp);
	assert_non_null(after);
	assert_int_equal(count_of(after, auth_real), count_of(before, auth_real) + 1);
	/* Nothing of the run is left: no container, no secrets file. */
	assert_int_equal(runs_left(), 0);
	assert_int_equal(run_secrets_files(), 0);
}

/* brig create of session in NS on network, with --secret secret (NULL:
 * none) and this run's label: its exit code, its output in *out. */
static int create_in(char **out, const char *session, const char *network, const char *secret)
{
	char label[128];
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	const char *args[] = {"create",
			      "--ns",
			      NS,
			      "--agent",
			      "agent",
			      "--session",
			      session,
			      "--image",
			      BRIG_DEFAULT_IMAGE,
			      "--network",
			      network,
			      "--label",
			      label,
			      secret ? "--secret" : NULL,
			      secret,
			      NULL};
	return cli(out, args);
}

/* What a user can get wrong, said without the value. */
static void test_secret_refused(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	char label[128];
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	unsetenv("BRIG_TEST_UNSET_SECRET");
	cleanup_free char *out = NULL;
	assert_int_equal(create_in(&out, "s2", "egress", "BRIG_TEST_UNSET_SECRET@secret.brig.test"), 125);
	ASSERT_CONTAINS(out, "BRIG_TEST_UNSET_SECRET: not set in brig's environment");
	cleanup_free char *o2 = NULL;
	assert_int_equal(create_in(&o2, "s3", "isolated", "BRIG_TEST_SECRET@secret.brig.test"), 125);
	ASSERT_NO_VALUE(o2, "brig's refusal");
	ASSERT_CONTAINS(o2, "egress");
	/* A run whose secret has no value makes nothing. */
	const char *run[] = {"run",
			     "--image",
			     BRIG_DEFAULT_IMAGE,
			     "--network",
			     "egress",
			     "--secret",
			     "BRIG_TEST_UNSET_SECRET@secret.brig.test",
			     "--label",
			     label,
			     "--",
			     "true",
			     NULL};
	cleanup_free char *o3 = NULL;
	assert_int_equal(cli(&o3, run), 125);
	ASSERT_CONTAINS(o3, "BRIG_TEST_UNSET_SECRET: not set in brig's environment");
	assert_int_equal(run_secrets_files(), 0);
	assert_int_equal(runs_left(), 0);
	const char *value[] = {"create",
			       "--ns",
			       NS,
			       "--agent",
			       "agent",
			       "--session",
			       "s4",
			       "--network",
			       "egress",
			       "--secret",
			       "BRIG_TEST_SECRET=sk-on-the-command-line@secret.brig.test",
			       NULL};
	cleanup_free char *o4 = NULL;
	assert_int_equal(cli(&o4, value), 125);
	assert_null(strstr(o4, "sk-on-the-command-line"));
	/* A computer made without the secret cannot gain one by adoption. */
	cleanup_free char *o5 = NULL;
	assert_int_equal(create_in(&o5, "s5", "egress", NULL), 0);
	cleanup_free char *o6 = NULL;
	assert_int_equal(create_in(&o6, "s5", "egress", "BRIG_TEST_SECRET@secret.brig.test"), 125);
	ASSERT_NO_VALUE(o6, "brig's refusal");
	ASSERT_CONTAINS(o6, "holds no placeholder for it");
}

/* brig agent: network egress by default, its credential as a secret; with
 * --forward-credential the seed's behaviour (isolated, nothing of it in
 * the configuration either way). The test image has no claude: 127 once
 * the computer is up. */
static void test_agent_default(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	char label[128];
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	setenv("ANTHROPIC_API_KEY", VALUE, 1);
	const char *agent[] = {"agent",
			       "claude",
			       "--ns",
			       NS,
			       "--session",
			       "ag",
			       "--image",
			       brig_test_image(),
			       "--label",
			       label,
			       "--no-checkpoint",
			       "--",
			       "--version",
			       NULL};
	cleanup_free char *out = NULL;
	int rc = cli(&out, agent);
	ASSERT_NO_VALUE(out, "brig agent's output");
	if (rc != 127)
		fail_msg("brig agent exited %d: %s", rc, out);
	const char *fwd[] = {"agent",   "claude",          "--ns",    NS,    "--session",       "fw",
			     "--image", brig_test_image(), "--label", label, "--no-checkpoint", "--forward-credential",
			     "--",      "--version",       NULL};
	cleanup_free char *out2 = NULL;
	rc = cli(&out2, fwd);
	unsetenv("ANTHROPIC_API_KEY");
	ASSERT_NO_VALUE(out2, "brig agent's output");
	if (rc != 127)
		fail_msg("brig agent --forward-credential exited %d: %s", rc, out2);
	brig_error *err = NULL;
	brig_computer *c = NULL;
	brig_identity id = {.ns = NS, .agent = "claude", .session = "ag", .generation = 1};
	char name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	cleanup_free char *ins = json_dumps(j, 0);
	ASSERT_NO_VALUE(ins, "docker inspect of the agent's computer");
	ASSERT_CONTAINS(ins, "ANTHROPIC_API_KEY=" BRIG_EGRESS_PLACEHOLDER_PREFIX);
	ASSERT_CONTAINS(ins, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"); /* its key, in the spec label */
	ASSERT_OK(brig_computer_get(E, &c, name, NULL, &err), err);
	assert_string_equal(c->network, "egress");
	brig_computer_free(c);
	char **rules = NULL;
	size_t n = 0;
	ASSERT_OK(brig_egress_rules_get(&rules, &n, name, &err), err);
	assert_int_equal(n, 1);
	assert_string_equal(rules[0], "api.anthropic.com");
	brig_egress_rules_free(rules);
	id.session = "fw";
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	ASSERT_OK(brig_computer_get(E, &c, name, NULL, &err), err);
	assert_string_equal(c->network, "isolated");
	brig_computer_free(c);
	cleanup_json json_t *j2 = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j2, name, &err), err);
	cleanup_free char *ins2 = json_dumps(j2, 0);
	ASSERT_NO_VALUE(ins2, "docker inspect of a --forward-credential computer");
	assert_null(strstr(ins2, BRIG_LABEL_SECRETS));
}


/* ---- through brig serve: the value comes with the request ---- */

/* One request to the server at sock with curl (the body from a 0600 file,
 * never an argument: it may hold the value). The HTTP status; the answer
 * in *answer (caller frees). */
static int serve_call(char **answer, const char *sock, const char *method, const char *path, const char *body)
{
	char bodyp[320], outp[320];
	snprintf(bodyp, sizeof bodyp, "%s/serve-body.json", ET.dir);
	snprintf(outp, sizeof outp, "%s/serve-answer.json", ET.dir);
	int fd = open(bodyp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	close(fd);
	cleanup_free char *cmd = xasprintf("curl -s -o '%s' -w '%%{http_code}' --max-time 300 --unix-socket '%s' -X %s "
					   "-H 'Content-Type: application/json' --data-binary @'%s' 'http://brig%s'",
					   outp, sock, method, bodyp, path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char code[16] = "";
	if (!fgets(code, sizeof code, f))
		code[0] = '\0';
	assert_int_equal(pclose(f), 0);
	unlink(bodyp);
	*answer = slurp(outp);
	unlink(outp);
	return atoi(code);
}

/* The probe in computer name: the upstream of the secret's host sees
 * want (an Authorization line) in what it records after now, and the
 * decoy never. */
static void probe_sees(const char *name, const char *want, const char *decoy, const char *what)
{
	char seenp[320];
	snprintf(seenp, sizeof seenp, "%s/seen", ET.dir);
	struct stat st;
	size_t off = stat(seenp, &st) == 0 ? (size_t)st.st_size : 0;
	cleanup_free char *script = slurp(BRIG_SOURCE_DIR "/tests/integration/helpers/egress_secret_probe.py");
	assert_non_null(script);
	char port[16];
	snprintf(port, sizeof port, "%d", ET.https_port);
	const char *probe[] = {"python3", "-c", script, port, ET.ca, NULL};
	cleanup_free char *p = exec_out(name, probe);
	ASSERT_NO_VALUE(p, "the probe's output");
	assert_string_equal(val(p, "SECRET"), "recorded");
	cleanup_free char *seen = slurp(seenp);
	if (!seen || strlen(seen) <= off || !strstr(seen + off, want))
		fail_msg("%s: the upstream did not see the value", what);
	assert_null(strstr(seen, decoy));
}

static void test_secret_serve(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	/* The server's own environment holds a decoy under the secret's name:
	 * it must never be read for the value. */
	char decoy[64];
	unsigned char rnd[12];
	assert_int_equal(getrandom(rnd, sizeof rnd, 0), (ssize_t)sizeof rnd);
	memcpy(decoy, "sk-brig-decoy-", 14);
	brig_hex(decoy + 14, rnd, sizeof rnd);
	char sock[320], logp[320];
	snprintf(sock, sizeof sock, "%s/serve.sock", ET.dir);
	snprintf(logp, sizeof logp, "%s/serve.log", ET.dir);
	const char *brig = getenv("BRIG_BIN") ? getenv("BRIG_BIN") : BRIG_BINARY_DIR "/brig";
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int lf = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (lf >= 0) {
			dup2(lf, 1);
			dup2(lf, 2);
		}
		setenv("BRIG_TEST_SECRET", decoy, 1);
		setenv("BRIG_IMAGE", BRIG_DEFAULT_IMAGE, 1);
		cleanup_free char *listen = xasprintf("unix://%s", sock);
		execl(brig, brig, "serve", "--listen", listen, (char *)NULL);
		_exit(127);
	}
	SERVE_PID = pid;
	for (int i = 0; i < 400 && access(sock, F_OK) != 0; i++)
		usleep(25000);
	assert_int_equal(access(sock, F_OK), 0);

	char label[128];
	snprintf(label, sizeof label, "%s", brig_test_run_id());
	cleanup_free char *spec = xasprintf(
		"{\"network\": \"egress\", \"allow\": [\"secret.brig.test:%d\"], \"secrets\": "
		"[\"BRIG_TEST_SECRET@secret.brig.test\"], \"labels\": {\"" BRIG_TEST_LABEL "\": \"%s\"}}",
		ET.https_port, label);
	cleanup_free char *path = xasprintf("/v1/computers/%s/agent/srv", NS);
	cleanup_free char *a = NULL;
	/* No value: refused, naming where it goes, and nothing made. */
	cleanup_free char *b0 = xasprintf("{\"ns\": \"%s\", \"agent\": \"agent\", \"session\": \"srv\", \"spec\": %s}",
					  NS, spec);
	assert_int_equal(serve_call(&a, sock, "POST", "/v1/computers", b0), 400);
	ASSERT_CONTAINS(a, "secret_values.BRIG_TEST_SECRET: required");
	assert_null(strstr(a, decoy));
	free(a);
	a = NULL;
	assert_int_equal(serve_call(&a, sock, "GET", path, ""), 404);
	free(a);
	a = NULL;
	/* A value for a secret the spec does not have; one that is no string. */
	cleanup_free char *b1 = xasprintf("{\"ns\": \"%s\", \"agent\": \"agent\", \"session\": \"srv\", \"spec\": %s, "
					  "\"secret_values\": {\"BRIG_TEST_SECRET\": \"%s\", \"OTHER_KEY\": \"%s\"}}",
					  NS, spec, VALUE, VALUE);
	assert_int_equal(serve_call(&a, sock, "POST", "/v1/computers", b1), 400);
	ASSERT_CONTAINS(a, "secret_values.OTHER_KEY: the spec has no such secret");
	ASSERT_NO_VALUE(a, "a refusal");
	free(a);
	a = NULL;
	cleanup_free char *b2 = xasprintf("{\"ns\": \"%s\", \"agent\": \"agent\", \"session\": \"srv\", \"spec\": %s, "
					  "\"secret_values\": {\"BRIG_TEST_SECRET\": 7}}",
					  NS, spec);
	assert_int_equal(serve_call(&a, sock, "POST", "/v1/computers", b2), 400);
	ASSERT_CONTAINS(a, "secret_values.BRIG_TEST_SECRET: a string");
	free(a);
	a = NULL;

	/* With it: made, and the upstream sees the value, never the decoy. */
	cleanup_free char *b3 = xasprintf("{\"ns\": \"%s\", \"agent\": \"agent\", \"session\": \"srv\", \"spec\": %s, "
					  "\"secret_values\": {\"BRIG_TEST_SECRET\": \"%s\"}}",
					  NS, spec, VALUE);
	int st3 = serve_call(&a, sock, "POST", "/v1/computers", b3);
	ASSERT_NO_VALUE(a, "the server's answer");
	if (st3 != 201)
		fail_msg("create through brig serve: %d %s", st3, a);
	json_t *cj = json_loads(a, 0, NULL);
	assert_non_null(cj);
	char name[160];
	snprintf(name, sizeof name, "%s", json_string_value(json_object_get(cj, "name")));
	json_decref(cj);
	free(a);
	a = NULL;
	cleanup_free char *auth_real = xasprintf("Authorization: Bearer %s\n", VALUE);
	probe_sees(name, auth_real, decoy, "the value given with the request");

	/* Up again, running: adopted with or without the value (the proxy
	 * keeps the one it has; the server's environment is never read). */
	assert_int_equal(serve_call(&a, sock, "POST", "/v1/computers", b0), 200);
	cj = json_loads(a, 0, NULL);
	assert_true(json_is_true(json_object_get(cj, "adopted")));
	json_decref(cj);
	free(a);
	a = NULL;
	assert_int_equal(serve_call(&a, sock, "POST", "/v1/computers", b3), 200);
	free(a);
	a = NULL;
	/* The same secret for other hosts adopts the computer (the spec hash
	 * leaves secrets out) but never carries the kept value there: whoever
	 * gave it chose its hosts. */
	cleanup_free char *moved = xasprintf(
		"{\"ns\": \"%s\", \"agent\": \"agent\", \"session\": \"srv\", \"spec\": {\"network\": \"egress\", "
		"\"allow\": [\"secret.brig.test:%d\"], \"secrets\": [\"BRIG_TEST_SECRET@other.brig.test\"], "
		"\"labels\": {\"" BRIG_TEST_LABEL "\": \"%s\"}}}",
		NS, ET.https_port, label);
	int mst = serve_call(&a, sock, "POST", "/v1/computers", moved);
	if (mst != 400 || !strstr(a, "secret_values.BRIG_TEST_SECRET: required"))
		fail_msg("the kept value went to other hosts: %d %s", mst, a);
	free(a);
	a = NULL;
	/* A recover makes a new computer from the recorded spec: it needs the
	 * values again, in its body. */
	cleanup_free char *cpath = xasprintf("%s/checkpoints", path), *spath = xasprintf("%s/stop", path);
	int cst = serve_call(&a, sock, "POST", cpath, "");
	if (cst != 201)
		fail_msg("checkpoint: %d %s", cst, a);
	free(a);
	a = NULL;
	cst = serve_call(&a, sock, "POST", spath, "");
	if (cst != 200)
		fail_msg("stop: %d %s", cst, a);
	free(a);
	a = NULL;
	cleanup_free char *rpath = xasprintf("%s/recover", path);
	assert_int_equal(serve_call(&a, sock, "POST", rpath, "{\"bogus\": 1}"), 400);
	ASSERT_CONTAINS(a, "unknown field 'bogus'");
	free(a);
	a = NULL;
	int r0 = serve_call(&a, sock, "POST", rpath, "");
	if (r0 != 400)
		fail_msg("recover without the value: %d %s", r0, a);
	ASSERT_CONTAINS(a, "secret_values.BRIG_TEST_SECRET: required");
	free(a);
	a = NULL;
	cleanup_free char *rb = xasprintf("{\"secret_values\": {\"BRIG_TEST_SECRET\": \"%s\"}}", VALUE);
	int rst = serve_call(&a, sock, "POST", rpath, rb);
	ASSERT_NO_VALUE(a, "the recover answer");
	if (rst != 200)
		fail_msg("recover through brig serve: %d %s", rst, a);
	cj = json_loads(a, 0, NULL);
	snprintf(name, sizeof name, "%s",
		 json_string_value(json_object_get(json_object_get(cj, "computer"), "name")));
	json_decref(cj);
	free(a);
	a = NULL;
	probe_sees(name, auth_real, decoy, "after recover");

	/* brig up through the server sends the value from its own
	 * environment; without it there, it says so before asking. */
	cleanup_free char *host = xasprintf("brig+unix://%s", sock);
	char allow[96];
	snprintf(allow, sizeof allow, "secret.brig.test:%d", ET.https_port);
	cleanup_free char *lbl = xasprintf(BRIG_TEST_LABEL "=%s", brig_test_run_id());
	const char *up[] = {"up",	 "--ns",      NS,	 "--agent",  "agent",
			    "--session", "srvcli",    "--image", BRIG_DEFAULT_IMAGE, "--network",
			    "egress",	 "--allow",   allow,	 "--secret", "BRIG_TEST_SECRET@secret.brig.test",
			    "--label",	 lbl,	      NULL};
	setenv("BRIG_HOST", host, 1);
	unsetenv("BRIG_TEST_SECRET");
	cleanup_free char *u0 = NULL;
	int urc = cli(&u0, up);
	setenv("BRIG_TEST_SECRET", VALUE, 1);
	assert_int_not_equal(urc, 0);
	ASSERT_CONTAINS(u0, "not set in brig's environment");
	cleanup_free char *u1 = NULL;
	urc = cli(&u1, up);
	unsetenv("BRIG_HOST");
	ASSERT_NO_VALUE(u1, "brig up's output");
	if (urc != 0)
		fail_msg("brig up through the server exited %d: %s", urc, u1);
	char cname[160];
	snprintf(cname, sizeof cname, "%.*s", (int)strcspn(u1, "\n"), u1);
	probe_sees(cname, auth_real, decoy, "through brig up with BRIG_HOST");

	/* brig recover through the server sends the recorded secrets' values
	 * from its own environment too (the server asks for them again). */
	cleanup_free char *upath = xasprintf("/v1/computers/%s/agent/srvcli", NS);
	cleanup_free char *ucp = xasprintf("%s/checkpoints", upath), *ustop = xasprintf("%s/stop", upath);
	if ((cst = serve_call(&a, sock, "POST", ucp, "")) != 201)
		fail_msg("checkpoint srvcli: %d %s", cst, a);
	free(a);
	a = NULL;
	if ((cst = serve_call(&a, sock, "POST", ustop, "")) != 200)
		fail_msg("stop srvcli: %d %s", cst, a);
	free(a);
	a = NULL;
	const char *rec[] = {"recover", "--ns", NS, "--agent", "agent", "--session", "srvcli", NULL};
	setenv("BRIG_HOST", host, 1);
	cleanup_free char *r1 = NULL;
	urc = cli(&r1, rec);
	unsetenv("BRIG_HOST");
	ASSERT_NO_VALUE(r1, "brig recover's output");
	if (urc != 0)
		fail_msg("brig recover through the server exited %d: %s", urc, r1);
	/* its note on stderr first, then the computer's name */
	size_t rl = strlen(r1);
	while (rl && r1[rl - 1] == '\n')
		r1[--rl] = 0;
	const char *last = strrchr(r1, '\n');
	snprintf(cname, sizeof cname, "%s", last ? last + 1 : r1);
	ASSERT_CONTAINS(r1, "recovered ");
	probe_sees(cname, auth_real, decoy, "through brig recover with BRIG_HOST");
	assert_int_equal(serve_call(&a, sock, "DELETE", upath, ""), 204);
	free(a);
	a = NULL;

	assert_int_equal(serve_call(&a, sock, "DELETE", path, ""), 204);
	kill(pid, SIGTERM);
	int ws = 0;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	SERVE_PID = -1;
	cleanup_free char *log = slurp(logp);
	ASSERT_NO_VALUE(log, "the server's log");
	if (log && strstr(log, decoy))
		fail_msg("the decoy is in the server's log");
	assert_non_null(log);
	assert_null(strstr(log, "Sanitizer"));
	assert_null(strstr(log, "runtime error:"));
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_secret_computer),
		cmocka_unit_test(test_secret_refused),
		cmocka_unit_test(test_secret_run),
		cmocka_unit_test(test_agent_default),
		cmocka_unit_test(test_secret_serve),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
