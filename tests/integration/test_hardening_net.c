/* test_hardening_net.c — brig's firewall for the isolated bridge, against
 * the real dockerd and this machine's iptables: a sandbox cannot reach a
 * host service on an unpublished port, can reach a port Docker publishes,
 * still resolves names through Docker's embedded DNS; the rules are tagged,
 * installed once however often the bridge is ensured, removed with it, and
 * a missing iptables fails closed. Traffic never leaves this machine: the
 * listeners are the test's own (one on the gateway address, one in a test
 * container), and 169.254.169.254 is never tried — its DROP rule is read
 * back from iptables instead. */
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "util/util.h"

#define HELLO "host-service-must-stay-private"

static brig_engine *E;
static char NS[64];
static bool OWN_BRIDGE;

static int setup(void **state)
{
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "n%s", brig_test_run_id());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	if (OWN_BRIDGE) {
		brig_error *err = NULL;
		if (brig_network_remove(E, &err) != 0)
			fprintf(stderr, "test: could not remove %s: %s\n", BRIG_NETWORK_NAME, brig_error_message(err));
		brig_error_free(err);
	}
	brig_engine_free(E);
	return 0;
}

static bool bridge_exists(void)
{
	json_t *j = NULL;
	int rc = brig_engine_network_inspect(E, &j, BRIG_NETWORK_NAME, NULL);
	if (j)
		json_decref(j);
	return rc == 0;
}

static void isolated_spec(brig_spec *s)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", brig_test_image(), &err), err);
	ASSERT_OK(brig_spec_set(s, "network", "isolated", &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(s, l, &err), err);
}

static int sh(const char *ref, const char *script, brig_exec_result *r)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = 30000};
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, ref, &o, r, &err), err);
	return r->exit_code;
}

/* `iptables -S` (or -t nat) output; caller frees. */
static char *iptables_list(const char *table, const char *chain)
{
	char *argv[] = {"iptables", "-t", (char *)table, "-S", (char *)chain, NULL};
	char *out = NULL, *errout = NULL;
	int code = brig_test_spawn(argv, NULL, NULL, &out, &errout);
	if (code != 0)
		fail_msg("iptables -t %s -S %s exited %d: %s", table, chain, code, errout);
	free(errout);
	return out;
}

/* Lines of brig's rules (tagged brig-sandbox) in all three chains. */
static int brig_rule_count(char **all)
{
	static const char *const chains[][2] = {{"filter", "INPUT"}, {"filter", "DOCKER-USER"}, {"nat", "POSTROUTING"}};
	brig_buf b;
	brig_buf_init(&b, 1u << 20);
	int n = 0;
	for (size_t i = 0; i < 3; i++) {
		cleanup_free char *t = iptables_list(chains[i][0], chains[i][1]);
		char *save = NULL;
		for (char *l = strtok_r(t, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			if (!strstr(l, "--comment brig-sandbox"))
				continue;
			n++;
			brig_buf_putf(&b, "%s %s\n", chains[i][0], l);
		}
	}
	if (all)
		*all = brig_buf_steal(&b, NULL);
	else
		brig_buf_free(&b);
	return n;
}

/* A listener the test opens on the gateway: answers HELLO, counts. */
typedef struct listener {
	int fd, port;
	atomic_int stop, accepted;
	pthread_t thr;
} listener;

static void *listener_main(void *arg)
{
	listener *l = arg;
	while (!atomic_load(&l->stop)) {
		struct pollfd p = {.fd = l->fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		atomic_fetch_add(&l->accepted, 1);
		if (write(c, HELLO "\n", sizeof HELLO) < 0) {
			/* the peer may be gone */
		}
		close(c);
	}
	return NULL;
}

static void listener_start(listener *l, const char *addr)
{
	memset(l, 0, sizeof *l);
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l->fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	assert_int_equal(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		fail_msg("bind %s: %s", addr, strerror(errno));
	assert_int_equal(listen(l->fd, 16), 0);
	socklen_t len = sizeof sa;
	assert_int_equal(getsockname(l->fd, (struct sockaddr *)&sa, &len), 0);
	l->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&l->thr, NULL, listener_main, l), 0);
}

static void listener_stop(listener *l)
{
	atomic_store(&l->stop, 1);
	pthread_join(l->thr, NULL);
	close(l->fd);
}

/* The computer's gateway on the bridge (caller frees). */
static char *gateway_of(const char *id)
{
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, id, &err), err);
	json_t *n = json_object_get(json_object_get(json_object_get(j, "NetworkSettings"), "Networks"), BRIG_NETWORK_NAME);
	const char *gw = json_string_value(json_object_get(n, "Gateway"));
	assert_non_null(gw);
	return xstrdup(gw);
}

static void test_firewall(void **state)
{
	(void)state;
	brig_error *err = NULL;
	OWN_BRIDGE = !bridge_exists();
	if (!OWN_BRIDGE)
		print_message("note: %s already exists (another user); its removal is not tested here\n",
			      BRIG_NETWORK_NAME);

	/* A computer on the isolated bridge: ensure installs the rules. */
	brig_spec s;
	isolated_spec(&s);
	brig_identity id = {.ns = NS, .agent = "fw", .session = "a", .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	cleanup_free char *gw = gateway_of(c->id);

	/* The rules, tagged; the link-local DROP is read back, never tried. */
	cleanup_free char *input = iptables_list("filter", "INPUT");
	cleanup_free char *user = iptables_list("filter", "DOCKER-USER");
	cleanup_free char *nat = iptables_list("nat", "POSTROUTING");
	print_message("INPUT:\n%sDOCKER-USER:\n%s", input, user);
	const char *want_input[] = {
		"-A INPUT -i " BRIG_NETWORK_BRIDGE
		" -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment brig-sandbox -j ACCEPT\n"
		"-A INPUT -i " BRIG_NETWORK_BRIDGE " -m comment --comment brig-sandbox -j DROP\n",
	};
	if (!strstr(input, want_input[0]))
		fail_msg("INPUT lacks brig's ACCEPT-replies-then-DROP pair, in that order:\n%s", input);
	if (!strstr(user, "-A DOCKER-USER -d 169.254.0.0/16 -i " BRIG_NETWORK_BRIDGE
			  " -m comment --comment brig-sandbox -j DROP"))
		fail_msg("DOCKER-USER lacks the link-local DROP:\n%s", user);
	if (!strstr(user, "--ctstate DNAT --ctdir ORIGINAL -m comment --comment brig-sandbox -j ACCEPT"))
		fail_msg("DOCKER-USER lacks the published-port ACCEPT:\n%s", user);
	if (!strstr(user, "! -i " BRIG_NETWORK_BRIDGE " -o " BRIG_NETWORK_BRIDGE
			  " -m conntrack --ctstate NEW -m conntrack ! --ctstate DNAT -m comment --comment brig-sandbox "
			  "-j DROP"))
		fail_msg("DOCKER-USER lacks the DROP of new connections into the bridge that no binding DNATed:\n%s",
			 user);
	cleanup_free char *masq = xasprintf("-A POSTROUTING -s %s ! -o " BRIG_NETWORK_BRIDGE
					    " -m comment --comment brig-sandbox -j MASQUERADE",
					    BRIG_DEFAULT_SUBNET);
	if (!strstr(nat, masq))
		fail_msg("nat POSTROUTING lacks brig's MASQUERADE:\n%s", nat);

	/* Idempotent: ensuring again (and again) adds nothing. */
	int n0 = brig_rule_count(NULL);
	ASSERT_OK(brig_network_ensure(E, NULL, &s, &err), err);
	ASSERT_OK(brig_network_ensure(E, NULL, &s, &err), err);
	cleanup_free char *rules = NULL;
	int n1 = brig_rule_count(&rules);
	print_message("brig's rules (%d):\n%s", n1, rules);
	assert_int_equal(n0, 7);
	assert_int_equal(n1, 7);

	/* A host service on the gateway, on a port nobody published: a
	 * connection from the sandbox fails within its 2 s bound. */
	listener l;
	listener_start(&l, gw);
	brig_exec_result r;
	cleanup_free char *to_host = xasprintf("nc -w 2 %s %d; echo \"exit=$?\"", gw, l.port);
	int64_t t0 = brig_now_ms();
	sh(c->name, to_host, &r);
	int64_t ms = brig_now_ms() - t0;
	print_message("sandbox -> %s:%d (unpublished): '%s' '%s' after %lld ms\n", gw, l.port, r.out.data, r.err.data,
		      (long long)ms);
	if (strstr(r.out.data, HELLO) || strstr(r.out.data, "exit=0"))
		fail_msg("the sandbox reached a host service on an unpublished port");
	assert_true(ms < 10000);
	brig_exec_result_clear(&r);
	listener_stop(&l);
	assert_int_equal(atomic_load(&l.accepted), 0);

	/* A port Docker publishes (a test container on a network of the
	 * test's own): reachable through the gateway. */
	cleanup_free char *pub_net = brig_test_network(E, "fw-pubnet");
	cleanup_json json_t *pub_cfg =
		json_pack("{s:[s,s,s,s,s,s,s], s:{s:{}}, s:{s:s, s:{s:[{s:s, s:s}]}}}", "Cmd", "nc", "-ll", "-p", "8080",
			  "-e", "echo", "published-hello", "ExposedPorts", "8080/tcp", "HostConfig", "NetworkMode",
			  pub_net, "PortBindings", "8080/tcp", "HostIp", "0.0.0.0", "HostPort", "");
	cleanup_free char *pub = brig_test_container(E, "fw-pub", pub_cfg);
	cleanup_json json_t *pj = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &pj, pub, &err), err);
	json_t *ports = json_object_get(json_object_get(pj, "NetworkSettings"), "Ports");
	const char *port = json_string_value(json_object_get(json_array_get(json_object_get(ports, "8080/tcp"), 0), "HostPort"));
	assert_non_null(port);
	cleanup_free char *to_pub = xasprintf("nc -w 3 %s %s", gw, port);
	sh(c->name, to_pub, &r);
	print_message("sandbox -> %s:%s (published): '%s'\n", gw, port, r.out.data);
	if (!strstr(r.out.data, "published-hello"))
		fail_msg("the sandbox did not reach the published port %s: '%s' '%s'", port, r.out.data, r.err.data);
	brig_exec_result_clear(&r);

	/* Docker's embedded DNS answers behind the INPUT drop: it lives in the
	 * container's own network namespace. */
	/* By its short id, an alias Docker gives every container on a user
	 * network (brig's names are 69 characters, over DNS's 63-byte label). */
	cleanup_free char *dns = xasprintf("nslookup %.12s 127.0.0.11", c->id);
	int code = sh(c->name, dns, &r);
	print_message("embedded DNS: exit %d\n%s", code, r.out.data);
	if (code != 0 || !strstr(r.out.data, "Address") || !strstr(r.out.data, "172.30."))
		fail_msg("the embedded DNS did not answer: exit %d '%s' '%s'", code, r.out.data, r.err.data);
	brig_exec_result_clear(&r);

	/* No iptables: isolated networking fails closed, with a message. */
	setenv("BRIG_IPTABLES", "/nonexistent/iptables", 1);
	int rc = brig_network_ensure(E, NULL, &s, &err);
	unsetenv("BRIG_IPTABLES");
	assert_int_equal(rc, BRIG_EDENIED);
	print_message("without iptables: %s\n", brig_error_message(err));
	if (!strstr(brig_error_message(err), "iptables") || !strstr(brig_error_message(err), "BRIG_FIREWALL=off"))
		fail_msg("unclear message: %s", brig_error_message(err));
	brig_error_free(err);
	err = NULL;
	brig_identity id2 = {.ns = NS, .agent = "fw", .session = "no-iptables", .generation = 1};
	brig_computer *c2 = NULL;
	setenv("BRIG_IPTABLES", "/nonexistent/iptables", 1);
	rc = brig_computer_create(E, &c2, &id2, &s, &err);
	unsetenv("BRIG_IPTABLES");
	assert_int_equal(rc, BRIG_EDENIED);
	assert_null(c2);
	char name2[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name2, &id2, &err), err);
	json_t *none = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &none, name2, NULL), BRIG_ENOTFOUND); /* nothing created */
	brig_error_free(err);
	err = NULL;
	brig_spec_clear(&s);

	/* Removal with the bridge deletes exactly brig's rules. */
	ASSERT_OK(brig_computer_destroy(E, c->name, &err), err);
	brig_computer_free(c);
	if (OWN_BRIDGE) {
		ASSERT_OK(brig_network_remove(E, &err), err);
		OWN_BRIDGE = false;
		cleanup_free char *left = NULL;
		int n2 = brig_rule_count(&left);
		if (n2 != 0)
			fail_msg("%d brig rules left after the bridge was removed:\n%s", n2, left);
		/* Docker's own rules are still there. */
		cleanup_free char *fwd = iptables_list("filter", "DOCKER-USER");
		assert_non_null(strstr(fwd, "-A DOCKER-USER -j RETURN"));
	}
	brig_test_cleanup(E);
}

int main(void)
{
	if (getuid() != 0) {
		fprintf(stderr, "test_hardening_net: needs root (iptables)\n");
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_firewall),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
