/* test_computer_net.c — the isolated bridge against the real dockerd: icc
 * off between computers, the host reachable only on published ports (brig's
 * firewall), race-safe creation, and removal refused while computers are
 * attached. Traffic never leaves this machine: the only listeners are one in
 * a test computer, one the test opens on the bridge's gateway address and
 * one in a test container whose port Docker publishes.
 * The bridge's name is fixed ("brig-sandbox"), so this test must own it: it
 * skips when one already exists, and removes the one it made. */
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

#define SUBNET BRIG_DEFAULT_SUBNET
#define HOST_HELLO "hello-from-the-host-gateway"

static brig_engine *E;
static char NS[64];
static bool OWN_BRIDGE; /* we created brig-sandbox: remove it at the end */

/* Networks named exactly brig-sandbox. */
static size_t bridges(json_t **out)
{
	cleanup_json json_t *f = json_pack("{s:[s]}", "name", BRIG_NETWORK_NAME);
	cleanup_json json_t *all = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_network_list(E, &all, f, &err), err);
	json_t *exact = json_array();
	size_t i;
	json_t *n;
	json_array_foreach(all, i, n)
	{
		if (strcmp(json_string_value(json_object_get(n, "Name")), BRIG_NETWORK_NAME) == 0)
			json_array_append(exact, n);
	}
	size_t count = json_array_size(exact);
	if (out)
		*out = exact;
	else
		json_decref(exact);
	return count;
}

static void remove_own_bridge(void)
{
	if (!OWN_BRIDGE)
		return;
	brig_test_cleanup(E); /* our computers first */
	brig_error *err = NULL;
	if (brig_network_remove(E, &err) != 0)
		fprintf(stderr, "test: could not remove %s: %s\n", BRIG_NETWORK_NAME, brig_error_message(err));
	brig_error_free(err);
	OWN_BRIDGE = false;
}

static int setup(void **state)
{
	(void)state;
	return brig_test_setup(&E, NS, sizeof NS, "t");
}

static int teardown(void **state)
{
	(void)state;
	remove_own_bridge();
	return brig_test_teardown(&E);
}

static void isolated_spec(brig_spec *s)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "image", brig_test_image(), &err), err);
	ASSERT_OK(brig_spec_set(s, "network", "isolated", &err), err);
	ASSERT_OK(brig_spec_set(s, "subnet", SUBNET, &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(s, l, &err), err);
	/* integration/test_computer_net_runsc: the same under gVisor */
	const char *rt = getenv("BRIG_TEST_RUNTIME");
	if (rt && *rt)
		ASSERT_OK(brig_spec_set(s, "runtime", rt, &err), err);
}

static brig_computer *create(const char *session, const brig_spec *s)
{
	brig_identity id = {.ns = NS, .agent = "agent", .session = session, .generation = 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, s, &err), err);
	return c;
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

/* The computer's address on the bridge, and its gateway (*gw, caller frees). */
static char *ip_of(const char *id, char **gw)
{
	cleanup_json json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, id, &err), err);
	json_t *nets = json_object_get(json_object_get(j, "NetworkSettings"), "Networks");
	assert_int_equal(json_object_size(nets), 1);
	const char *k;
	json_t *v;
	json_object_foreach(nets, k, v)
	{
		assert_string_equal(k, BRIG_NETWORK_NAME);
		const char *ip = json_string_value(json_object_get(v, "IPAddress"));
		const char *g = json_string_value(json_object_get(v, "Gateway"));
		assert_non_null(ip);
		assert_non_null(g);
		*gw = xstrdup(g);
		return xstrdup(ip);
	}
	return NULL;
}

/* A listener on the gateway: answers each connection with HOST_HELLO. */
typedef struct host_listener {
	int fd;
	int port;
	atomic_int stop;
	atomic_int accepted;
	pthread_t thr;
} host_listener;

static void *listener_main(void *arg)
{
	host_listener *l = arg;
	while (!atomic_load(&l->stop)) {
		struct pollfd pf = {.fd = l->fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		atomic_fetch_add(&l->accepted, 1);
		if (write(c, HOST_HELLO "\n", sizeof HOST_HELLO) < 0) {
			/* the client may be gone already */
		}
		close(c);
	}
	return NULL;
}

static void listener_start(host_listener *l, const char *gateway)
{
	memset(l, 0, sizeof *l);
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l->fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
	assert_int_equal(inet_pton(AF_INET, gateway, &sa.sin_addr), 1);
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		fail_msg("bind %s: %s", gateway, strerror(errno));
	assert_int_equal(listen(l->fd, 16), 0);
	socklen_t len = sizeof sa;
	assert_int_equal(getsockname(l->fd, (struct sockaddr *)&sa, &len), 0);
	l->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&l->thr, NULL, listener_main, l), 0);
}

static void listener_stop(host_listener *l)
{
	atomic_store(&l->stop, 1);
	pthread_join(l->thr, NULL);
	close(l->fd);
}

typedef struct ensurer {
	pthread_barrier_t *go;
	int rc;
	char id[80];
	char msg[256];
} ensurer;

static void *ensure_main(void *arg)
{
	ensurer *x = arg;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	pthread_barrier_wait(x->go);
	x->rc = brig_engine_open(&e, NULL, &err);
	if (x->rc == 0) {
		brig_spec s;
		brig_spec_init(&s);
		brig_spec_set(&s, "network", "isolated", NULL);
		brig_spec_set(&s, "subnet", SUBNET, NULL);
		char *id = NULL;
		x->rc = brig_network_ensure(e, &id, &s, &err);
		if (id)
			snprintf(x->id, sizeof x->id, "%s", id);
		free(id);
		brig_spec_clear(&s);
		brig_engine_free(e);
	}
	snprintf(x->msg, sizeof x->msg, "%s", brig_error_message(err));
	brig_error_free(err);
	return NULL;
}

static void test_isolated_bridge(void **state)
{
	(void)state;
	brig_error *err = NULL;
	if (bridges(NULL) > 0) {
		print_message("SKIP: a network named %s already exists and this test must own it; remove it "
			      "(`docker network rm %s`) once nothing uses it to run this test\n",
			      BRIG_NETWORK_NAME, BRIG_NETWORK_NAME);
		skip();
	}
	OWN_BRIDGE = true;

	/* Eight processes' worth of racers (threads with their own engines)
	 * create the bridge at once: one survives and all agree on it. */
	enum { RACERS = 8 };
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, RACERS);
	ensurer xs[RACERS];
	pthread_t t[RACERS];
	for (int i = 0; i < RACERS; i++) {
		xs[i] = (ensurer){.go = &go};
		assert_int_equal(pthread_create(&t[i], NULL, ensure_main, &xs[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACERS; i++) {
		if (xs[i].rc != 0)
			fail_msg("ensure %d: %s: %s", i, brig_error_name(xs[i].rc), xs[i].msg);
		assert_string_equal(xs[i].id, xs[0].id);
	}
	cleanup_json json_t *list = NULL;
	assert_int_equal(bridges(&list), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "Id")), xs[0].id);

	/* What docker network inspect shows. */
	cleanup_json json_t *net = NULL;
	ASSERT_OK(brig_engine_network_inspect(E, &net, BRIG_NETWORK_NAME, &err), err);
	assert_string_equal(json_string_value(json_object_get(net, "Driver")), "bridge");
	json_t *opts = json_object_get(net, "Options");
	const char *icc = json_string_value(json_object_get(opts, "com.docker.network.bridge.enable_icc"));
	if (!icc || strcmp(icc, "false") != 0)
		fail_msg("enable_icc is %s, want \"false\"", icc ? icc : "unset");
	json_t *ipam = json_array_get(json_object_get(json_object_get(net, "IPAM"), "Config"), 0);
	assert_string_equal(json_string_value(json_object_get(ipam, "Subnet")), SUBNET);
	/* Docker 20.10 leaves IPAM.Config[0].Gateway out when it picked it; the
	 * computers' network settings carry it. */
	const char *gw = json_string_value(json_object_get(ipam, "Gateway"));
	assert_string_equal(json_string_value(json_object_get(json_object_get(net, "Labels"), BRIG_LABEL_MANAGED)), "1");

	/* Two computers on it. */
	brig_spec s;
	isolated_spec(&s);
	brig_computer *a = create("net-a", &s);
	brig_computer *b = create("net-b", &s);
	brig_spec_clear(&s);
	assert_string_equal(a->network, "isolated");
	cleanup_free char *gw_a = NULL, *gw_b = NULL;
	cleanup_free char *ip_a = ip_of(a->id, &gw_a);
	cleanup_free char *ip_b = ip_of(b->id, &gw_b);
	assert_string_equal(gw_a, gw_b);
	if (gw && *gw)
		assert_string_equal(gw, gw_a);
	const char *gateway = gw_a;
	/* All three inside the subnet (a /22: the first two octets and the top
	 * six bits of the third match). */
	const char *addrs[] = {gateway, ip_a, ip_b};
	for (int i = 0; i < 3; i++) {
		struct in_addr in, base;
		assert_int_equal(inet_pton(AF_INET, addrs[i], &in), 1);
		assert_int_equal(inet_pton(AF_INET, "172.30.0.0", &base), 1);
		if ((ntohl(in.s_addr) & 0xfffffc00u) != ntohl(base.s_addr))
			fail_msg("%s is not in %s", addrs[i], SUBNET);
	}
	print_message("bridge %s gateway %s, a %s, b %s\n", SUBNET, gateway, ip_a, ip_b);

	/* A listener in a; it answers a itself (so the listener works)… */
	brig_exec_result r;
	assert_int_equal(sh(a->name, "nc -ll -p 8080 -e echo hi </dev/null >/dev/null 2>&1 & sleep 0.3", &r), 0);
	brig_exec_result_clear(&r);
	cleanup_free char *self = xasprintf("nc -w 2 %s 8080", ip_a);
	sh(a->name, self, &r);
	if (strcmp(r.out.data, "hi\n") != 0)
		fail_msg("the listener in a does not answer a itself: exit %d, '%s' '%s'", r.exit_code, r.out.data,
			 r.err.data);
	brig_exec_result_clear(&r);

	/* …but b cannot reach it: inter-container traffic is off. */
	cleanup_free char *cross = xasprintf("nc -w 2 %s 8080", ip_a);
	int code = sh(b->name, cross, &r);
	print_message("b -> a:8080: exit %d, stdout '%s', stderr '%s'\n", code, r.out.data, r.err.data);
	if (strstr(r.out.data, "hi") || code == 0)
		fail_msg("b reached a listener in a: inter-container traffic is not blocked");
	brig_exec_result_clear(&r);
	/* Nor the other way, to a listener b starts. */
	assert_int_equal(sh(b->name, "nc -ll -p 8081 -e echo hi </dev/null >/dev/null 2>&1 & sleep 0.3", &r), 0);
	brig_exec_result_clear(&r);
	cleanup_free char *back = xasprintf("nc -w 2 %s 8081", ip_b);
	code = sh(a->name, back, &r);
	if (strstr(r.out.data, "hi") || code == 0)
		fail_msg("a reached a listener in b: inter-container traffic is not blocked");
	brig_exec_result_clear(&r);

	/* brig's firewall (src/sandbox/firewall.c): neither reaches a
	 * listener the test opened on the gateway on an unpublished port… */
	static host_listener hl; /* static: its thread outlives a failing test */
	listener_start(&hl, gateway);
	cleanup_free char *to_host = xasprintf("nc -w 2 %s %d", gateway, hl.port);
	brig_computer *both[] = {a, b};
	for (int i = 0; i < 2; i++) {
		code = sh(both[i]->name, to_host, &r);
		if (strstr(r.out.data, HOST_HELLO) || code == 0)
			fail_msg("computer %c reached a host service on the gateway (unpublished port %d)", 'a' + i,
				 hl.port);
		brig_exec_result_clear(&r);
	}
	listener_stop(&hl);
	assert_int_equal(atomic_load(&hl.accepted), 0);

	/* …but both reach a port Docker publishes, of a container on another
	 * network, through the gateway. */
	cleanup_free char *pub_net = brig_test_network(E, "pubnet");
	cleanup_json json_t *pub_cfg =
		json_pack("{s:[s,s,s,s,s,s,s], s:{s:{}}, s:{s:s, s:{s:[{s:s, s:s}]}}}", "Cmd", "nc", "-ll", "-p", "8080",
			  "-e", "echo", "published-hello", "ExposedPorts", "8080/tcp", "HostConfig", "NetworkMode",
			  pub_net, "PortBindings", "8080/tcp", "HostIp", "0.0.0.0", "HostPort", "");
	cleanup_free char *pub = brig_test_container(E, "pub", pub_cfg);
	cleanup_json json_t *pj = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &pj, pub, &err), err);
	const char *port = json_string_value(json_object_get(
		json_array_get(json_object_get(json_object_get(json_object_get(pj, "NetworkSettings"), "Ports"), "8080/tcp"),
			       0),
		"HostPort"));
	assert_non_null(port);
	cleanup_free char *to_pub = xasprintf("nc -w 3 %s %s", gateway, port);
	for (int i = 0; i < 2; i++) {
		code = sh(both[i]->name, to_pub, &r);
		if (!strstr(r.out.data, "published-hello"))
			fail_msg("computer %c did not reach the published port %s: exit %d, '%s' '%s'", 'a' + i, port,
				 code, r.out.data, r.err.data);
		brig_exec_result_clear(&r);
	}

	/* Removal is refused while computers are attached, naming them. */
	int rc = brig_network_remove(E, &err);
	assert_int_equal(rc, BRIG_EBUSY);
	if (!strstr(brig_error_message(err), a->name) || !strstr(brig_error_message(err), b->name))
		fail_msg("EBUSY message does not name the attached computers: %s", brig_error_message(err));
	brig_error_free(err);
	err = NULL;
	cleanup_json json_t *still = NULL;
	ASSERT_OK(brig_engine_network_inspect(E, &still, BRIG_NETWORK_NAME, &err), err);

	/* Once they are gone it goes, and removing again is fine. */
	ASSERT_OK(brig_computer_destroy(E, a->name, &err), err);
	ASSERT_OK(brig_computer_destroy(E, b->name, &err), err);
	ASSERT_OK(brig_network_remove(E, &err), err);
	json_t *gone = NULL;
	rc = brig_engine_network_inspect(E, &gone, BRIG_NETWORK_NAME, &err);
	assert_int_equal(rc, BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;
	OWN_BRIDGE = false;
	ASSERT_OK(brig_network_remove(E, &err), err);
	assert_int_equal(bridges(NULL), 0);

	brig_computer_free(a);
	brig_computer_free(b);
	brig_test_cleanup(E);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_isolated_bridge),
	};
	const char *rt = getenv("BRIG_TEST_RUNTIME");
	if (rt && *rt) {
		brig_engine *e = brig_test_engine();
		json_t *info = NULL;
		bool known = brig_engine_info(e, &info, NULL) == 0 &&
			     json_object_get(json_object_get(info, "Runtimes"), rt) != NULL;
		json_decref(info);
		brig_engine_free(e);
		if (!known) {
			printf("runtime %s is not registered with the Docker daemon (scripts/bootstrap registers "
			       "runsc): skipped\n",
			       rt);
			return 77;
		}
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
