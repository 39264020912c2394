/* test_egress.c — network egress against the real dockerd: a computer on
 * the internal brig-egress network reaches exactly what its rules allow,
 * through brig's proxy, and nothing else; rules change while it runs.
 * Traffic never leaves this machine: the upstreams are HTTPS and HTTP
 * servers this test starts on 127.0.0.1 (helpers/egress_upstream.py, its
 * own CA), the proxy is told to resolve the test's names to them
 * (BRIG_EGRESS_HOSTS), and the "must fail" probes aim at listeners the
 * test opened itself on the host.
 * The egress network and its proxy are one per host: this test skips when
 * a proxy already serves, and removes the network and its proxy after. */
#include "testutil.h"

#include "egress_testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "egress/egress_internal.h"
#include "util/util.h"

static brig_engine *E;
static egress_test ET = EGRESS_TEST_INIT;
static char NS[64];

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

static char *slurp(const char *path)
{
	return egress_test_slurp(path, 1 << 24);
}

static int setup(void **state)
{
	(void)state;
	if (brig_test_setup(&E, NS, sizeof NS, "eg") != 0)
		return -1;
	if (egress_test_prepare(
		    &ET, "test_egress", "brig-egress-test",
		    "allowed.brig.test 127.0.0.1\ndenied.brig.test 127.0.0.1\nlater.brig.test 127.0.0.1\n") != 0)
		return -1;
	if (ET.skip)
		return 0;
	/* A credential of the brig that starts the proxy: the proxy must not
	 * inherit it (test_egress_computer looks). */
	setenv("BRIG_EGRESS_TEST_CREDENTIAL", "not-for-the-proxy", 1);
	return egress_test_upstreams(&ET, "test_egress");
}

static int teardown(void **state)
{
	(void)state;
	return egress_test_teardown(&ET, &E, "test_egress");
}

/* Listeners on every host address (the gateway's included): TCP and UDP. */
static int listen_any(int type, int *port)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 8), 0);
	socklen_t len = sizeof sa;
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Runs the probe in the computer; its stdout (caller frees). */
static char *probe(const char *ref, const char *mode, int direct, int udp)
{
	cleanup_free char *script = slurp(BRIG_SOURCE_DIR "/tests/integration/helpers/egress_probe.py");
	assert_non_null(script);
	char hp[16], pp[16], dp[16], up[16];
	snprintf(hp, sizeof hp, "%d", ET.https_port);
	snprintf(pp, sizeof pp, "%d", ET.http_port);
	snprintf(dp, sizeof dp, "%d", direct);
	snprintf(up, sizeof up, "%d", udp);
	const char *argv[] = {"python3", "-c", script, mode, ET.ca, BRIG_EGRESS_GATEWAY, hp, pp, dp, up, NULL};
	brig_exec_opts o = {
		.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1, .timeout_ms = 120000};
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, ref, &o, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("probe exited %d: %s", r.exit_code, r.err.data ? r.err.data : "");
	char *out = xstrdup(r.out.data ? r.out.data : "");
	brig_exec_result_clear(&r);
	return out;
}

/* Runs the brig program with argv (after "brig"); its exit code, stdout
 * and stderr together in *out (caller frees). */
static int cli(char **out, const char *const *args)
{
	return egress_test_cli(out, args, 1 << 20);
}

/* The value of KEY= in the probe's output (static buffer). */
static const char *val(const char *out, const char *key)
{
	static char v[1024];
	char k[64];
	snprintf(k, sizeof k, "\n%s=", key);
	cleanup_free char *text = xasprintf("\n%s", out);
	const char *p = strstr(text, k);
	if (!p)
		fail_msg("no %s in probe output: %s", key, out);
	p += strlen(k);
	size_t n = strcspn(p, "\n");
	snprintf(v, sizeof v, "%.*s", (int)(n < sizeof v - 1 ? n : sizeof v - 1), p);
	return v;
}

static void test_egress_computer(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	brig_spec s;
	brig_error *err = NULL;
	brig_test_spec(&s, BRIG_DEFAULT_IMAGE); /* python3 with ssl */
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	cleanup_free char *rules = xasprintf("allowed.brig.test:%d,allowed.brig.test:%d,localhost:%d", ET.https_port,
					     ET.http_port, ET.https_port);
	ASSERT_OK(brig_spec_set(&s, "allow", rules, &err), err);
	brig_identity id = {.ns = NS, .agent = "agent", .session = "s1", .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	assert_string_equal(c->network, "egress");
	cleanup_free char *name = xstrdup(c->name);
	brig_computer_free(c);
	brig_spec_clear(&s);

	/* What docker inspect shows: the internal network, the proxy variables. */
	cleanup_json json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	json_t *nets = json_object_get(json_object_get(j, "NetworkSettings"), "Networks");
	assert_int_equal(json_object_size(nets), 1);
	assert_non_null(json_object_get(nets, BRIG_EGRESS_NETWORK));
	cleanup_free char *env = json_dumps(json_object_get(json_object_get(j, "Config"), "Env"), 0);
	ASSERT_CONTAINS(env, "HTTPS_PROXY=http://" BRIG_EGRESS_GATEWAY ":3128");
	ASSERT_CONTAINS(env, "NODE_USE_ENV_PROXY=1");
	cleanup_json json_t *net = NULL;
	ASSERT_OK(brig_engine_network_inspect(E, &net, BRIG_EGRESS_NETWORK, &err), err);
	assert_true(json_is_true(json_object_get(net, "Internal")));

	int dport, uport;
	int tcp = listen_any(SOCK_STREAM, &dport);
	int udp = listen_any(SOCK_DGRAM, &uport);
	cleanup_free char *out = probe(name, "all", dport, uport);
	/* Allowed: through the proxy, by name, verified against the test CA. */
	ASSERT_CONTAINS(val(out, "HTTPS"), "hello from allowed.brig.test");
	ASSERT_CONTAINS(val(out, "HTTP"), "hello from allowed.brig.test");
	/* Denied, with the proxy's own answer. */
	ASSERT_CONTAINS(val(out, "DENIED"), "403 Forbidden");
	ASSERT_CONTAINS(val(out, "DENIED"), "brig egress: denied.brig.test");
	ASSERT_CONTAINS(val(out, "DENIED"), "is not allowed for this sandbox");
	/* A rule cannot open the host's own services: names are resolved fully
	 * qualified ("localhost.", which /etc/hosts does not answer) and checked
	 * after resolution (a resolver that answers it gives 127.0.0.1, refused). */
	const char *local = val(out, "LOCAL");
	if (!strstr(local, "403 Forbidden") && !strstr(local, "502 Bad Gateway"))
		fail_msg("LOCAL: wanted the proxy's refusal, got '%s'", local);
	if (!strstr(local, "resolves to a local, private or link-local address") &&
	    !strstr(local, "cannot resolve localhost"))
		fail_msg("LOCAL: wanted why, got '%s'", local);
	/* Domain fronting: an allowed CONNECT, another name in the ClientHello. */
	ASSERT_CONTAINS(val(out, "SNI"), "200 Connection established|tls-fail");
	ASSERT_CONTAINS(val(out, "SNI_OK"), "tls-ok|HTTP/1.0 200");
	ASSERT_CONTAINS(val(out, "HOSTHDR"), "400 Bad Request");
	ASSERT_CONTAINS(val(out, "HOSTHDR"), "Host header differs");
	/* Without the proxy nothing is reachable: no name service, no route. */
	ASSERT_CONTAINS(val(out, "NOPROXY"), "fail:");
	assert_string_equal(val(out, "DNS"), "fail");
	ASSERT_CONTAINS(val(out, "DIRECT"), "fail:");
	assert_string_equal(val(out, "DEFAULT_ROUTE"), "no");
	assert_string_equal(val(out, "ROUTES"), "1"); /* its own subnet only */
	assert_string_equal(val(out, "IPV6_GLOBAL"), "0");
	/* Docker's embedded resolver only (it knows no outside names here). */
	const char *ns = val(out, "NAMESERVERS");
	assert_true(strcmp(ns, "") == 0 || strcmp(ns, "127.0.0.11") == 0);
	/* The host's listeners saw nothing. */
	int got = accept(tcp, NULL, NULL);
	assert_int_equal(got, -1);
	char b[8];
	assert_int_equal(recv(udp, b, sizeof b, 0), -1);
	close(tcp);
	close(udp);

	/* The proxy's port is for egress sandboxes only: a container of this
	 * test on Docker's default bridge cannot open it (172.30.4.1 is this
	 * host's own address while the egress network exists). */
	if (access("/sys/class/net/docker0", F_OK) == 0) {
		cleanup_free char *cmd =
			xasprintf("docker run --rm --label " BRIG_TEST_LABEL "=%s --network bridge %s sh -c "
				  "'nc -w 3 %s %d </dev/null >/dev/null 2>&1 && echo REACHED || echo BLOCKED' 2>&1",
				  brig_test_run_id(), brig_test_image(), BRIG_EGRESS_GATEWAY, BRIG_EGRESS_PORT);
		FILE *f = popen(cmd, "r");
		assert_non_null(f);
		char line[256] = "";
		if (!fgets(line, sizeof line, f))
			line[0] = '\0';
		pclose(f);
		ASSERT_CONTAINS(line, "BLOCKED");
	}

	/* Rules change on the running computer, for new connections. */
	cleanup_free char *rule = xasprintf("allowed.brig.test:%d", ET.https_port);
	ASSERT_OK(brig_egress_update(E, name, rule, false, &err), err);
	cleanup_free char *o2 = probe(name, "get", 1, 1);
	ASSERT_CONTAINS(val(o2, "HTTPS"), "403");
	cleanup_free char *wild = xasprintf("*.brig.test:%d", ET.https_port);
	ASSERT_OK(brig_egress_update(E, name, wild, true, &err), err);
	cleanup_free char *o3 = probe(name, "get", 1, 1);
	ASSERT_CONTAINS(val(o3, "HTTPS"), "hello from allowed.brig.test");
	char **now = NULL;
	size_t n = 0;
	ASSERT_OK(brig_egress_rules_get(&now, &n, name, &err), err);
	assert_int_equal(n, 3);
	brig_egress_rules_free(now);
	/* Errors a user can make. */
	assert_int_equal(brig_egress_update(E, name, "10.0.0.1", true, &err), BRIG_EINVAL);
	brig__error_clear(&err);
	assert_int_equal(brig_egress_update(E, "brig-no-such-computer", "a.example.com", true, &err), BRIG_ENOTFOUND);
	brig__error_clear(&err);

	/* The proxy's log holds a line for each decision. */
	char logp[400];
	snprintf(logp, sizeof logp, "%s/proxy.log", ET.egress_dir);
	cleanup_free char *log = slurp(logp);
	assert_non_null(log);
	ASSERT_CONTAINS(log, "\"decision\":\"allowed\"");
	ASSERT_CONTAINS(log, "TLS server name differs from the CONNECT host");
	ASSERT_CONTAINS(log, "Host header differs");
	ASSERT_CONTAINS(log, "\"host\":\"denied.brig.test\"");
	/* The test-only resolver override is set: the log says so, loudly. */
	ASSERT_CONTAINS(log, "\"warning\":\"BRIG_EGRESS_HOSTS is set\"");
	/* The proxy's environment: what it needs, not its starter's all. */
	char pidp[400];
	snprintf(pidp, sizeof pidp, "%s/proxy.pid", ET.egress_dir);
	cleanup_free char *pid = slurp(pidp);
	assert_non_null(pid);
	char envp[64];
	snprintf(envp, sizeof envp, "/proc/%d/environ", atoi(pid));
	FILE *ef = fopen(envp, "re");
	assert_non_null(ef);
	char ent[4096];
	size_t el = 0;
	bool hosts = false;
	for (int ch; (ch = fgetc(ef)) != EOF;) {
		if (ch != '\0' && el + 1 < sizeof ent) {
			ent[el++] = (char)ch;
			continue;
		}
		ent[el] = '\0';
		el = 0;
		if (strncmp(ent, "BRIG_EGRESS_TEST_CREDENTIAL=", 28) == 0)
			fail_msg("the proxy inherited BRIG_EGRESS_TEST_CREDENTIAL");
		hosts = hosts || strncmp(ent, "BRIG_EGRESS_HOSTS=", 18) == 0;
	}
	fclose(ef);
	assert_true(hosts);
	/* Root started it: what a sandbox's bytes reach (the worker, the
	 * monitor's one child) is a uid of its own (never nobody's, which
	 * other processes have), in no other group, without any
	 * capability or a way to gain one, and holds nothing of the monitor's
	 * (no store, no file but its log). The monitor keeps no capability. */
	char chp[96];
	snprintf(chp, sizeof chp, "/proc/%d/task/%d/children", atoi(pid), atoi(pid));
	cleanup_free char *children = slurp(chp);
	assert_non_null(children);
	int worker = atoi(children);
	assert_true(worker > 1);
	char stp[64];
	snprintf(stp, sizeof stp, "/proc/%d/status", worker);
	cleanup_free char *wst = slurp(stp);
	assert_non_null(wst);
	const struct passwd *pw = getpwnam("brig-egress");
	unsigned wid = pw ? (unsigned)pw->pw_uid : 2147483646u, wgid = pw ? (unsigned)pw->pw_gid : 2147483646u;
	char want[96];
	snprintf(want, sizeof want, "\nUid:\t%u\t%u\t%u\t%u\n", wid, wid, wid, wid);
	ASSERT_CONTAINS(wst, want);
	snprintf(want, sizeof want, "\nGid:\t%u\t%u\t%u\t%u\n", wgid, wgid, wgid, wgid);
	ASSERT_CONTAINS(wst, want);
	ASSERT_CONTAINS(wst, "\nGroups:\t \n");
	ASSERT_CONTAINS(wst, "\nCapPrm:\t0000000000000000\n");
	ASSERT_CONTAINS(wst, "\nCapEff:\t0000000000000000\n");
	ASSERT_CONTAINS(wst, "\nCapBnd:\t0000000000000000\n");
	ASSERT_CONTAINS(wst, "\nNoNewPrivs:\t1\n");
	ASSERT_CONTAINS(wst, "\nSeccomp:\t2\n"); /* a filter of its system calls */
	snprintf(stp, sizeof stp, "/proc/%d/status", atoi(pid));
	cleanup_free char *mst = slurp(stp);
	assert_non_null(mst);
	ASSERT_CONTAINS(mst, "\nCapEff:\t0000000000000000\n");
	ASSERT_CONTAINS(mst, "\nCapBnd:\t0000000000000000\n");
	/* nor the environment it was started with (a store URL, PG*, DOCKER_*) */
	snprintf(stp, sizeof stp, "/proc/%d/environ", worker);
	FILE *wf = fopen(stp, "re");
	assert_non_null(wf);
	char wenv[65536];
	size_t wn = fread(wenv, 1, sizeof wenv, wf);
	fclose(wf);
	assert_null(memmem(wenv, wn, "BRIG_STORE=", 11));
	assert_null(memmem(wenv, wn, "BRIG_EGRESS_HOSTS=", 18));
	char fdd[64];
	snprintf(fdd, sizeof fdd, "/proc/%d/fd", worker);
	DIR *fdir = opendir(fdd);
	assert_non_null(fdir);
	for (struct dirent *de; (de = readdir(fdir));) {
		if (de->d_name[0] == '.')
			continue;
		char lp[384], target[512];
		snprintf(lp, sizeof lp, "%s/%s", fdd, de->d_name);
		ssize_t tl = readlink(lp, target, sizeof target - 1);
		if (tl < 0)
			continue; /* closed meanwhile */
		target[tl] = '\0';
		if (strncmp(target, "socket:", 7) != 0 && strncmp(target, "pipe:", 5) != 0 &&
		    strcmp(target, "/dev/null") != 0 && !strstr(target, "/proxy.log"))
			fail_msg("the proxy's worker holds %s", target);
	}
	closedir(fdir);
	/* Under the sanitizer build the proxy is instrumented too. */
	assert_null(strstr(log, "Sanitizer"));
	assert_null(strstr(log, "runtime error:"));

	/* The ledger: a row for each of those connections, in brig's store. */
	brig_store *st = NULL;
	ASSERT_OK(brig_store_open(&st, NULL, &err), err);
	brig_store_egress *rows = NULL;
	size_t nrows = 0;
	bool want_all = false;
	for (int i = 0; i < 50 && !want_all; i++) {
		brig_store_egress_free_array(rows, nrows);
		ASSERT_OK(brig_store_egress_list(st, &rows, &nrows, name, NULL, NULL, NULL, 0, &err), err);
		int allowed = 0, denied_host = 0, sni = 0, hosthdr = 0;
		for (size_t k = 0; k < nrows; k++) {
			if (strcmp(rows[k].decision, "allowed") == 0 && rows[k].port == ET.https_port &&
			    rows[k].bytes_down > 0)
				allowed++;
			if (strcmp(rows[k].host, "denied.brig.test") == 0 && strcmp(rows[k].decision, "denied") == 0)
				denied_host++;
			if (strstr(rows[k].reason, "TLS server name differs"))
				sni++;
			if (strstr(rows[k].reason, "Host header differs"))
				hosthdr++;
		}
		want_all = allowed && denied_host && sni && hosthdr;
		if (!want_all)
			brig_test_sleep_ms(100);
	}
	assert_true(want_all);
	assert_string_equal(rows[0].ns, NS);
	assert_string_equal(rows[0].session, "s1");
	brig_store_egress_free_array(rows, nrows);
	ASSERT_OK(brig_store_egress_list(st, &rows, &nrows, NULL, NS, "agent", "s1", 2, &err), err);
	assert_int_equal(nrows, 2);
	brig_store_egress_free_array(rows, nrows);
	brig_store_close(st);

	/* The same through the command line. */
	cleanup_free char *later = xasprintf("later.brig.test:%d", ET.https_port);
	char *o = NULL;
	assert_int_equal(cli(&o, (const char *[]){"egress", "allow", name, later, NULL}), 0);
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "deny", name, wild, NULL}), 0);
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "ls", name, NULL}), 0);
	ASSERT_CONTAINS(o, later);
	assert_null(strstr(o, wild));
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "allow", name, "http://x.example.com", NULL}), 125);
	ASSERT_CONTAINS(o, "not a URL");
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "ls", NULL}), 125);
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "log", name, NULL}), 0);
	ASSERT_CONTAINS(o, "denied   denied.brig.test:");
	ASSERT_CONTAINS(o, "allowed  allowed.brig.test:");
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "log", "--ns", NS, "--agent", "agent", "--session", "s1",
						  "--json", NULL}),
			 0);
	ASSERT_CONTAINS(o, "\"decision\": \"denied\"");
	ASSERT_CONTAINS(o, "TLS server name differs");
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"egress", "log", "--ns", NS, NULL}), 125);
	free(o);

	/* One sandbox cannot take every proxy slot: past BRIG_EGRESS_PEER_MAX
	 * idle connections of its own, the next is closed at once while the
	 * others stay open. */
	static const char flood[] = "import socket, sys\n"
				    "def state(s, t):\n"
				    "    s.settimeout(t)\n"
				    "    try:\n"
				    "        return 'closed' if s.recv(1) == b'' else 'data'\n"
				    "    except socket.timeout:\n"
				    "        return 'open'\n"
				    "    except OSError:\n"
				    "        return 'closed'\n"
				    "held = [socket.create_connection((sys.argv[1], 3128), timeout=10)\n"
				    "        for _ in range(int(sys.argv[2]))]\n"
				    "over = socket.create_connection((sys.argv[1], 3128), timeout=10)\n"
				    "print('OVER=' + state(over, 10))\n"
				    "print('HELD=' + state(held[0], 1))\n";
	char cap[16];
	snprintf(cap, sizeof cap, "%d", BRIG_EGRESS_PEER_MAX);
	const char *fargv[] = {"python3", "-c", flood, BRIG_EGRESS_GATEWAY, cap, NULL};
	brig_exec_opts fo = {
		.version = BRIG_EXEC_OPTS_VERSION, .argv = fargv, .stdin_fd = -1, .cancel_fd = -1, .timeout_ms = 60000};
	brig_exec_result fr;
	ASSERT_OK(brig_computer_exec(E, name, &fo, &fr, &err), err);
	if (fr.exit_code != 0)
		fail_msg("flood exited %d: %s", fr.exit_code, fr.err.data ? fr.err.data : "");
	ASSERT_CONTAINS(fr.out.data ? fr.out.data : "", "OVER=closed");
	ASSERT_CONTAINS(fr.out.data ? fr.out.data : "", "HELD=open");
	brig_exec_result_clear(&fr);

	ASSERT_OK(brig_computer_destroy(E, name, &err), err);
	ASSERT_OK(brig_egress_rules_get(&now, &n, name, &err), err);
	assert_int_equal(n, 0); /* its rules went with it */
	brig_egress_rules_free(now);
}

/* `brig run --network egress`: the command starts with its rules in place. */
static void test_egress_run(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	char label[96];
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	cleanup_free char *allow = xasprintf("allowed.brig.test:%d", ET.https_port);
#define RUN_SCRIPT(host)                              \
	"import ssl, sys, urllib.request\n"           \
	"ctx = ssl._create_unverified_context()\n"    \
	"print(urllib.request.urlopen('https://" host \
	".brig.test:%d/run', context=ctx, timeout=15).read().decode())\n"
	cleanup_free char *ok = xasprintf(RUN_SCRIPT("allowed"), ET.https_port);
	cleanup_free char *no = xasprintf(RUN_SCRIPT("denied"), ET.https_port);
#undef RUN_SCRIPT
	char *o = NULL;
	assert_int_equal(cli(&o, (const char *[]){"run", "--image", BRIG_DEFAULT_IMAGE, "--label", label, "--network",
						  "egress", "--allow", allow, "--", "python3", "-c", ok, NULL}),
			 0);
	ASSERT_CONTAINS(o, "hello from allowed.brig.test");
	free(o);
	assert_int_equal(cli(&o, (const char *[]){"run", "--image", BRIG_DEFAULT_IMAGE, "--label", label, "--network",
						  "egress", "--allow", allow, "--", "python3", "-c", no, NULL}),
			 1);
	ASSERT_CONTAINS(o, "403");
	free(o);
	/* Rules without the egress network: a clear refusal. */
	assert_int_equal(cli(&o, (const char *[]){"run", "--image", BRIG_DEFAULT_IMAGE, "--label", label, "--allow",
						  allow, "--", "true", NULL}),
			 125);
	ASSERT_CONTAINS(o, "need --network egress");
	free(o);
}

/* Without the brig program brig cannot start its proxy, and says how to
 * fix it; a second proxy steps aside for the one that serves. Runs first,
 * before any proxy serves. */
static void test_proxy_start(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	/* Before the network exists the proxy has no address to listen on. */
	if (access("/sys/class/net/" BRIG_EGRESS_BRIDGE, F_OK) != 0) {
		char *o = NULL;
		assert_int_equal(cli(&o, (const char *[]){"egress-proxy", NULL}), 125);
		ASSERT_CONTAINS(o, "cannot listen on " BRIG_EGRESS_GATEWAY);
		free(o);
	}
	cleanup_free char *bin = xstrdup(getenv("BRIG_BIN"));
	setenv("BRIG_BIN", "/nonexistent/brig", 1);
	brig_error *err = NULL;
	assert_int_equal(brig_egress_ensure(E, NULL, &err), BRIG_EIO);
	ASSERT_CONTAINS(brig_error_message(err), "set BRIG_BIN");
	brig__error_clear(&err);
	setenv("BRIG_BIN", bin, 1);

	/* A store the proxy cannot open: it serves anyway and says so in its
	 * log. Then that proxy (ours, by its pid file) goes. */
	cleanup_free char *store = xstrdup(getenv("BRIG_STORE"));
	setenv("BRIG_STORE", "postgresql://brig@127.0.0.1:1/none?connect_timeout=2", 1);
	ASSERT_OK(brig_egress_ensure(E, NULL, &err), err);
	setenv("BRIG_STORE", store, 1);
	char path[400];
	snprintf(path, sizeof path, "%s/proxy.log", ET.egress_dir);
	cleanup_free char *log = slurp(path);
	assert_non_null(log);
	ASSERT_CONTAINS(log, "{\"ledger\":\"unavailable\"");
	snprintf(path, sizeof path, "%s/proxy.pid", ET.egress_dir);
	cleanup_free char *pid = slurp(path);
	assert_non_null(pid);
	assert_true(atoi(pid) > 1);
	assert_int_equal(kill(atoi(pid), SIGKILL), 0);
	for (int i = 0; i < 100 && egress_test_proxy_listening(); i++)
		brig_test_sleep_ms(50);
	assert_false(egress_test_proxy_listening());

	ASSERT_OK(brig_egress_ensure(E, NULL, &err), err);
	assert_true(egress_test_proxy_listening());
	char *o = NULL;
	assert_int_equal(cli(&o, (const char *[]){"egress-proxy", NULL}), 0);
	free(o);
	assert_true(egress_test_proxy_listening());
}

/* A computer of network egress whose brig uses store (BRIG_STORE) made in
 * the test's directory (relative URLs are resolved there), asked to reach
 * denied.brig.test through the proxy once: its name (caller frees). */
static char *denied_once(const char *session, const char *store)
{
	brig_spec s;
	brig_error *err = NULL;
	brig_test_spec(&s, NULL); /* busybox: nc */
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_set(&s, "allow", "allowed.brig.test:1", &err), err);
	brig_identity id = {.ns = NS, .agent = "agent", .session = session, .generation = 1};
	cleanup_free char *was = xstrdup(getenv("BRIG_STORE"));
	char cwd[512];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(ET.dir), 0);
	setenv("BRIG_STORE", store, 1);
	brig_computer *c = NULL;
	int rc = brig_computer_create(E, &c, &id, &s, &err);
	setenv("BRIG_STORE", was, 1);
	assert_int_equal(chdir(cwd), 0);
	ASSERT_OK(rc, err);
	brig_spec_clear(&s);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	const char *argv[] = {"sh", "-c",
			      "printf 'CONNECT denied.brig.test:443 HTTP/1.1\r\nHost: denied.brig.test:443\r\n\r\n' | "
			      "nc -w 5 " BRIG_EGRESS_GATEWAY " 3128",
			      NULL};
	brig_exec_opts o = {
		.version = BRIG_EXEC_OPTS_VERSION, .argv = argv, .stdin_fd = -1, .cancel_fd = -1, .timeout_ms = 60000};
	brig_exec_result r;
	ASSERT_OK(brig_computer_exec(E, name, &o, &r, &err), err);
	ASSERT_CONTAINS(r.out.data ? r.out.data : "", "403 Forbidden");
	brig_exec_result_clear(&r);
	return name;
}

/* The ledger rows of sandbox name in the store at url, waiting up to 10 s
 * for want of them (0: just what is there now). */
static size_t ledger_rows(const char *url, const char *name, size_t want, brig_store_egress **rows)
{
	brig_store *st = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&st, url, &err), err);
	size_t n = 0;
	for (int i = 0; i < 100; i++) {
		ASSERT_OK(brig_store_egress_list(st, rows, &n, name, NULL, NULL, NULL, 0, &err), err);
		if (n >= want)
			break;
		brig_store_egress_free_array(*rows, n);
		*rows = NULL;
		brig_test_sleep_ms(100);
	}
	brig_store_close(st);
	return n;
}

/* One proxy serves every store of the host: a sandbox's ledger rows go to
 * the store of the brig that made it (NAME.store), not to that of the brig
 * that started the proxy. A store the proxy cannot open gets no row, and
 * no other store gets it instead. */
static void test_ledger_store(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	brig_error *err = NULL;
	ASSERT_OK(brig_egress_ensure(E, NULL, &err), err); /* the proxy: the test's store */
	const char *mine = getenv("BRIG_STORE");
	cleanup_free char *other = xasprintf("sqlite://%s/other.db", ET.dir);
	cleanup_free char *name = denied_once("ledger", "sqlite:other.db");
	brig_store_egress *rows = NULL;
	size_t n = ledger_rows(other, name, 1, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].decision, "denied");
	assert_string_equal(rows[0].host, "denied.brig.test");
	assert_string_equal(rows[0].ns, NS);
	assert_string_equal(rows[0].session, "ledger");
	brig_store_egress_free_array(rows, n);
	assert_int_equal(ledger_rows(mine, name, 0, &rows), 0);
	cleanup_free char *mark = NULL;
	{
		char path[600];
		snprintf(path, sizeof path, "%s/%s.store", ET.egress_dir, name);
		mark = slurp(path);
		assert_non_null(mark);
		assert_string_equal(mark, other); /* made absolute */
		ASSERT_OK(brig_computer_destroy(E, name, &err), err);
		assert_int_equal(access(path, F_OK), -1); /* gone with the sandbox */
	}

	cleanup_free char *lost = denied_once("ledger2", "postgresql://brig@127.0.0.1:1/none?connect_timeout=2");
	char path[400];
	snprintf(path, sizeof path, "%s/proxy.log", ET.egress_dir);
	bool said = false;
	for (int i = 0; i < 100 && !said; i++) {
		cleanup_free char *log = slurp(path);
		said = log && strstr(log, "{\"ledger\":\"the sandbox's store is unavailable\"");
		if (!said)
			brig_test_sleep_ms(100);
	}
	assert_true(said);
	assert_int_equal(ledger_rows(mine, lost, 0, &rows), 0);
	assert_int_equal(ledger_rows(other, lost, 0, &rows), 0);
	ASSERT_OK(brig_computer_destroy(E, lost, &err), err);
}

/* A computer of another network is refused egress rules. */
static void test_not_egress(void **state)
{
	(void)state;
	if (ET.skip)
		skip();
	brig_spec s;
	brig_error *err = NULL;
	brig_test_spec(&s, NULL);
	brig_identity id = {.ns = NS, .agent = "agent", .session = "none", .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	assert_int_equal(brig_egress_update(E, c->name, "a.example.com", true, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "not of network egress");
	brig__error_clear(&err);
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	brig_computer_free(c);
	brig_spec_clear(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proxy_start),
		cmocka_unit_test(test_egress_computer),
		cmocka_unit_test(test_egress_run),
		cmocka_unit_test(test_not_egress),
		cmocka_unit_test(test_ledger_store),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
