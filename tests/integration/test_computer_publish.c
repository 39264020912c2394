/* test_computer_publish.c — published ports against the real dockerd, from
 * the command line: a server in the computer reached from the host on
 * 127.0.0.1, the binding Docker holds, `brig port`, ports with network none
 * and bad ports refused, and the firewall still keeping other sandboxes off
 * a port published on the bridge's own gateway address. Traffic never
 * leaves this machine: the only listeners are busybox httpd in the test's
 * computers and one the test holds on 127.0.0.1. Every object carries
 * brig.test=<run id>; the isolated bridge is removed when this test made
 * it and nothing else uses it. */
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "util/util.h"

#define MARK "hello-from-a-published-port"

static brig_engine *E;
static char TMP[64];
static char *ENV[2];
static char NS[64];
static char LABEL[96];
static bool OWN_BRIDGE;

static bool bridge_exists(void)
{
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_network_inspect(E, &j, BRIG_NETWORK_NAME, &err);
	brig_error_free(err);
	return rc == 0;
}

static int setup(void **state)
{
	(void)state;
	brig_test_setup(&E, NS, sizeof NS, "p");
	snprintf(TMP, sizeof TMP, "/tmp/brig-publish-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	ENV[0] = xasprintf("BRIG_STORE=sqlite://%s/store.db", TMP);
	snprintf(LABEL, sizeof LABEL, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	OWN_BRIDGE = !bridge_exists();
	return 0;
}

static void netns_remove(void);

static int teardown(void **state)
{
	(void)state;
	netns_remove();
	brig_test_cleanup(E);
	if (OWN_BRIDGE) {
		brig_error *err = NULL;
		if (brig_network_remove(E, &err) != 0 && (!err || err->code != BRIG_EBUSY))
			fprintf(stderr, "test: could not remove %s: %s\n", BRIG_NETWORK_NAME, brig_error_message(err));
		brig_error_free(err);
	}
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

/* brig with up to 15 arguments (NULL-terminated). */
static out brigv(const char *const *args)
{
	char *argv[20] = {"brig"};
	size_t n = 1;
	for (; args[n - 1] && n < 19; n++)
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

/* A TCP port nothing listens on now (the kernel's pick). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* GET / from ip:port, retried for up to 10 s while the server starts.
 * Returns the answer (caller frees) or NULL. */
static char *http_get(const char *ip, int port)
{
	for (int attempt = 0; attempt < 50; attempt++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
		struct timeval tv = {3, 0};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
			static const char req[] = "GET /index.html HTTP/1.0\r\n\r\n";
			char buf[4096];
			size_t got = 0;
			if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
				ssize_t r;
				while (got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
					got += (size_t)r;
			}
			close(fd);
			buf[got] = '\0';
			if (strstr(buf, MARK))
				return xstrdup(buf);
		} else {
			close(fd);
		}
		brig_test_sleep_ms(200);
	}
	return NULL;
}

static char *create(const char *session, const char *p1, const char *p2)
{
	out o = BRIG("create", "--ns", NS, "--agent", "a", "--session", session, "--image", brig_test_image(),
		     "--network", "isolated", "--label", LABEL, p1, p2);
	if (o.code != 0)
		fail_msg("brig create: exit %d: %s", o.code, o.err);
	char *name = xstrndup(o.out, strcspn(o.out, "\n"));
	out_free(&o);
	return name;
}

/* busybox httpd serving MARK on port in computer name, in the background. */
static void serve(const char *name, const char *port)
{
	out o = BRIG("exec", name, "--", "sh", "-c",
		     "mkdir -p /workspace/www && echo " MARK " > /workspace/www/index.html");
	if (o.code != 0)
		fail_msg("exec: %d %s", o.code, o.err);
	out_free(&o);
	o = BRIG("exec", "-d", name, "--", "httpd", "-f", "-p", port, "-h", "/workspace/www");
	if (o.code != 0)
		fail_msg("exec -d httpd: %d %s", o.code, o.err);
	out_free(&o);
}

static json_t *inspect(const char *name)
{
	json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, name, &err), err);
	return j;
}

static bool have_guest(void)
{
	if (brig_guest__volume_name())
		return true;
	print_message("skipped: this build carries no brig-init (the test serves with brig exec -d)\n");
	return false;
}

static void test_reached_from_host(void **state)
{
	(void)state;
	if (!have_guest())
		return;
	int port = free_port();
	char pub[32], want[64];
	snprintf(pub, sizeof pub, "%d:8000", port);
	cleanup_free char *name = create("web", "-p", pub);

	/* What docker inspect shows: bound to 127.0.0.1, and only that. */
	cleanup_json json_t *j = inspect(name);
	cleanup_free char *pb = json_dumps(json_object_get(json_object_get(j, "HostConfig"), "PortBindings"),
					   JSON_COMPACT | JSON_SORT_KEYS);
	snprintf(want, sizeof want, "{\"8000/tcp\":[{\"HostIp\":\"127.0.0.1\",\"HostPort\":\"%d\"}]}", port);
	assert_string_equal(pb, want);
	assert_true(json_is_false(json_object_get(json_object_get(j, "HostConfig"), "PublishAllPorts")));

	serve(name, "8000");
	cleanup_free char *answer = http_get("127.0.0.1", port);
	if (!answer)
		fail_msg("no answer from the computer's server on 127.0.0.1:%d", port);
	assert_non_null(strstr(answer, "200 OK"));

	/* brig port, human and --json; inspect's spec. */
	out o = BRIG("port", name);
	assert_int_equal(o.code, 0);
	snprintf(want, sizeof want, "8000/tcp -> 127.0.0.1:%d\n", port);
	assert_string_equal(o.out, want);
	out_free(&o);
	o = BRIG("port", "--json", "--ns", NS, "--agent", "a", "--session", "web");
	assert_int_equal(o.code, 0);
	cleanup_json json_t *arr = json_loads(o.out, 0, NULL);
	out_free(&o);
	assert_int_equal(json_array_size(arr), 1);
	json_t *p0 = json_array_get(arr, 0);
	assert_string_equal(json_string_value(json_object_get(p0, "host_ip")), "127.0.0.1");
	assert_int_equal(json_integer_value(json_object_get(p0, "host_port")), port);
	assert_int_equal(json_integer_value(json_object_get(p0, "port")), 8000);
	assert_string_equal(json_string_value(json_object_get(p0, "protocol")), "tcp");
	o = BRIG("inspect", "--json", name);
	assert_int_equal(o.code, 0);
	cleanup_json json_t *ins = json_loads(o.out, 0, NULL);
	out_free(&o);
	snprintf(want, sizeof want, "127.0.0.1:%d:8000", port);
	assert_string_equal(
		json_string_value(json_array_get(json_object_get(json_object_get(ins, "spec"), "publish"), 0)), want);

	/* The same spec, spelled out, adopts it; other ports are another spec. */
	snprintf(pub, sizeof pub, "127.0.0.1:%d:8000", port);
	cleanup_free char *again = create("web", "--publish", pub);
	assert_string_equal(again, name);
	snprintf(pub, sizeof pub, "%d:8001", port);
	o = BRIG("create", "--ns", NS, "--agent", "a", "--session", "web", "--image", brig_test_image(), "--network",
		 "isolated", "--label", LABEL, "-p", pub);
	assert_int_equal(o.code, 125);
	if (!strstr(o.err, "spec differs: publish: container has"))
		fail_msg("stderr: %s", o.err);
	out_free(&o);

	/* Mistakes say what is wrong. */
	o = BRIG("port", "brig-nosuch-computer");
	assert_int_equal(o.code, 125);
	assert_non_null(strstr(o.err, "no computer named brig-nosuch-computer"));
	out_free(&o);
	o = BRIG("port", name, name);
	assert_int_equal(o.code, 125);
	assert_non_null(strstr(o.err, "one NAME at a time"));
	out_free(&o);

	/* A computer without ports lists none. */
	cleanup_free char *plain = create("plain", "--label", LABEL);
	o = BRIG("port", plain);
	assert_int_equal(o.code, 0);
	assert_string_equal(o.out, "");
	out_free(&o);
}

static void test_up_keeps_ports(void **state)
{
	(void)state;
	char pub[32], want[64];
	int port = free_port();
	snprintf(pub, sizeof pub, "%d:8000", port);
	out o = BRIG("up", "--ns", NS, "--agent", "a", "--session", "up", "--image", brig_test_image(), "--network",
		     "isolated", "--label", LABEL, "-p", pub);
	if (o.code != 0)
		fail_msg("brig up: %d %s", o.code, o.err);
	out_free(&o);
	/* Again without spec flags: the recorded spec, ports included. */
	o = BRIG("up", "--ns", NS, "--agent", "a", "--session", "up");
	if (o.code != 0)
		fail_msg("brig up again: %d %s", o.code, o.err);
	out_free(&o);
	o = BRIG("port", "--ns", NS, "--agent", "a", "--session", "up", "--gen", "1");
	assert_int_equal(o.code, 0);
	snprintf(want, sizeof want, "8000/tcp -> 127.0.0.1:%d\n", port);
	assert_string_equal(o.out, want);
	out_free(&o);
}

/* Each bad --publish: exit 125, the message, and nothing created. */
static void refused(const char *network, const char *p1, const char *p2, const char *must)
{
	const char *extra1 = p2 ? "-p" : "--label", *extra2 = p2 ? p2 : LABEL;
	out o = BRIG("create", "--ns", NS, "--agent", "a", "--session", "bad", "--image", brig_test_image(),
		     "--network", network, "--label", LABEL, "-p", p1, extra1, extra2);
	if (o.code != 125 || !strstr(o.err, must))
		fail_msg("-p %s -p %s on %s: exit %d, stderr '%s', wanted 125 and '%s'", p1, p2 ? p2 : "-", network,
			 o.code, o.err, must);
	assert_string_equal(o.out, "");
	out_free(&o);
}

static void test_refused(void **state)
{
	(void)state;
	refused("none", "8080:80", NULL,
		"publish: needs --network isolated; with network none the computer has only lo, so there is nothing "
		"to publish to");
	refused("isolated", "0:80", NULL, "publish: '0:80': the host port must be a whole number from 1 to 65535");
	refused("isolated", "8080:0", NULL, "the computer's port must be a whole number from 1 to 65535");
	refused("isolated", "65536:80", NULL, "the host port must be a whole number from 1 to 65535");
	refused("isolated", "8080:70000", NULL, "the computer's port must be a whole number from 1 to 65535");
	refused("isolated", "300.0.0.1:8080:80", NULL, "the host address must be a numeric IPv4 address");
	refused("isolated", "example.com:8080:80", NULL, "the host address must be a numeric IPv4 address");
	refused("isolated", "8080:80/udp", NULL, "only TCP ports are published");
	refused("isolated", "8080:80", "127.0.0.1:8080:81", "publish: host port 127.0.0.1:8080 is given twice");
	refused("isolated", "0.0.0.0:8080:80", "8080:81", "overlaps");
	/* And `up` says the same (no session is recorded). */
	out o = BRIG("up", "--ns", NS, "--agent", "a", "--session", "bad", "-p", "8080:80");
	assert_int_equal(o.code, 125);
	assert_non_null(strstr(o.err, "publish: needs --network isolated"));
	out_free(&o);

	brig_computer **cs = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_list(E, &cs, &n, NS, NULL, &err), err);
	for (size_t i = 0; i < n; i++)
		if (cs[i]->session && strcmp(cs[i]->session, "bad") == 0)
			fail_msg("a refused create left computer %s", cs[i]->name);
	brig_computer_free_array(cs, n);
}

/* The firewall still keeps sandboxes off the host's services, a port
 * published on the bridge's gateway included: the host reaches it, another
 * computer on the bridge does not. */
static void test_firewall(void **state)
{
	(void)state;
	if (!have_guest())
		return;
	cleanup_free char *a = create("fw-a", "--label", LABEL);
	cleanup_json json_t *ja = inspect(a);
	json_t *net =
		json_object_get(json_object_get(json_object_get(ja, "NetworkSettings"), "Networks"), BRIG_NETWORK_NAME);
	const char *gw = json_string_value(json_object_get(net, "Gateway"));
	assert_non_null(gw);
	int port = free_port();
	char pub[64];
	snprintf(pub, sizeof pub, "%s:%d:8001", gw, port);
	cleanup_free char *b = create("fw-b", "-p", pub);
	serve(b, "8001");
	cleanup_free char *answer = http_get(gw, port);
	if (!answer)
		fail_msg("the host got no answer on %s", pub);

	char script[256];
	snprintf(script, sizeof script,
		 "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 3 %s %d; echo; echo nc-done", gw, port);
	out o = BRIG("exec", a, "--", "sh", "-c", script);
	assert_int_equal(o.code, 0);
	assert_non_null(strstr(o.out, "nc-done"));
	if (strstr(o.out, MARK))
		fail_msg("computer %s reached %s published on the gateway: %s", a, pub, o.out);
	out_free(&o);
}

/* Another machine's view, made on this one: a network namespace joined to
 * the host by a veth pair, routing the bridge's subnet through the host as
 * a LAN neighbour could. A port published on 127.0.0.1 must not be reached
 * at the computer's own address (Docker's DOCKER chain accepts that; brig's
 * DOCKER-USER rule drops it). The namespace, its link and route go at the
 * end, and with the test's teardown should it fail. */
static char NETNS[32];

static int sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	if (vasprintf(&cmd, fmt, ap) < 0)
		abort();
	va_end(ap);
	int rc = system(cmd);
	free(cmd);
	return rc;
}

static void netns_remove(void)
{
	if (NETNS[0])
		sh("ip netns del %s 2>/dev/null", NETNS); /* takes both ends of the veth */
	NETNS[0] = '\0';
}

static void test_lan_route(void **state)
{
	(void)state;
	if (!have_guest())
		return;
	if (geteuid() != 0 || sh("command -v ip >/dev/null && command -v curl >/dev/null") != 0) {
		print_message("skipped: needs root, ip and curl\n");
		return;
	}
	int port = free_port();
	char pub[32];
	snprintf(pub, sizeof pub, "%d:8000", port);
	cleanup_free char *name = create("lan", "-p", pub);
	cleanup_json json_t *j = inspect(name);
	json_t *net =
		json_object_get(json_object_get(json_object_get(j, "NetworkSettings"), "Networks"), BRIG_NETWORK_NAME);
	const char *ip = json_string_value(json_object_get(net, "IPAddress"));
	assert_non_null(ip);
	serve(name, "8000");
	cleanup_free char *answer = http_get("127.0.0.1", port);
	assert_non_null(answer); /* served, and published where asked */

	unsigned id = (unsigned)getpid() % 100000, third = 16 + (unsigned)getpid() % 200;
	snprintf(NETNS, sizeof NETNS, "brigtest-lan%u", id);
	char host_if[16], ns_if[16];
	snprintf(host_if, sizeof host_if, "btl%uh", id);
	snprintf(ns_if, sizeof ns_if, "btl%un", id);
	int rc = sh("set -e; ip netns add %s; ip link add %s type veth peer name %s; ip link set %s netns %s;"
		    " ip addr add 100.127.%u.1/30 dev %s; ip link set %s up;"
		    " ip -n %s addr add 100.127.%u.2/30 dev %s; ip -n %s link set %s up; ip -n %s link set lo up;"
		    " ip -n %s route add %s via 100.127.%u.1",
		    NETNS, host_if, ns_if, ns_if, NETNS, third, host_if, host_if, NETNS, third, ns_if, NETNS, ns_if,
		    NETNS, NETNS, BRIG_DEFAULT_SUBNET, third);
	if (rc != 0) {
		netns_remove();
		fail_msg("could not make the test's network namespace (exit %d)", rc);
	}
	/* The neighbour reaches the host itself (the path works)… */
	char cmd[512];
	snprintf(cmd, sizeof cmd, "ip netns exec %s ping -c 1 -W 2 100.127.%u.1 >/dev/null 2>&1", NETNS, third);
	bool path = system(cmd) == 0;
	/* …but not the computer's port, published on 127.0.0.1 only. */
	snprintf(cmd, sizeof cmd, "ip netns exec %s curl -s -m 3 http://%s:8000/index.html", NETNS, ip);
	cleanup_free char *got = NULL;
	char *argv[] = {"sh", "-c", cmd, NULL};
	brig_test_spawn(argv, NULL, NULL, &got, NULL);
	netns_remove();
	if (!path)
		print_message("note: the namespace could not reach the host; the check below proves less\n");
	if (got && strstr(got, MARK))
		fail_msg("a LAN neighbour routing %s through this host reached %s:8000, published on 127.0.0.1 only",
			 BRIG_DEFAULT_SUBNET, ip);
}

/* A host port already taken: the daemon's refusal reaches the user. */
static void test_port_taken(void **state)
{
	(void)state;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	char pub[32];
	snprintf(pub, sizeof pub, "%d:8000", ntohs(sa.sin_port));
	out o = BRIG("create", "--ns", NS, "--agent", "a", "--session", "taken", "--image", brig_test_image(),
		     "--network", "isolated", "--label", LABEL, "-p", pub);
	close(fd);
	assert_int_equal(o.code, 125);
	if (!strstr(o.err, "address already in use") && !strstr(o.err, "port is already allocated"))
		fail_msg("stderr does not say the port is taken: %s", o.err);
	out_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),        cmocka_unit_test(test_reached_from_host),
		cmocka_unit_test(test_up_keeps_ports), cmocka_unit_test(test_firewall),
		cmocka_unit_test(test_lan_route),      cmocka_unit_test(test_port_taken),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
