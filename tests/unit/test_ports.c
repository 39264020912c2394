/* test_ports.c — published ports in the spec: docker's -p spelling and its
 * errors, overlaps, the isolated-only rule, the hash, JSON and the body. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "brig/spec.h"
#include "spec/spec_internal.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

static void isolated(brig_spec *s)
{
	brig_error *err = NULL;
	brig_spec_init(s);
	ASSERT_OK(brig_spec_set(s, "network", "isolated", &err), err);
}

static void publish_ok(brig_spec *s, const char *p)
{
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_set(s, "publish", p, &err), err);
}

/* Expects p refused by the parser with a message holding must. */
static void parse_bad(const char *p, const char *must)
{
	brig_port out;
	brig_error *err = NULL;
	int r = brig_port_parse(&out, p, &err);
	if (r != BRIG_EINVAL)
		fail_msg("'%s' -> %s, wanted EINVAL", p ? p : "(null)", brig_error_name(r));
	ASSERT_CONTAINS(brig_error_message(err), "publish: ");
	if (must)
		ASSERT_CONTAINS(brig_error_message(err), must);
	brig_error_free(err);
}

static void test_parse(void **state)
{
	(void)state;
	static const char *const good[][2] = {
		{"8080:80", "127.0.0.1:8080:80"},       {"127.0.0.1:8080:80", "127.0.0.1:8080:80"},
		{"0.0.0.0:1:65535", "0.0.0.0:1:65535"}, {"10.1.2.3:65535:1/tcp", "10.1.2.3:65535:1"},
		{"[::1]:8080:80", "[::1]:8080:80"},     {"[0:0::1]:8080:80", "[::1]:8080:80"},
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		brig_port p;
		char s[BRIG_PORT_STR_SIZE];
		brig_error *err = NULL;
		ASSERT_OK(brig_port_parse(&p, good[i][0], &err), err);
		assert_string_equal(brig_port_format(s, &p), good[i][1]);
	}
	parse_bad("", "empty");
	parse_bad(NULL, "empty");
	parse_bad("80", "names one port");
	parse_bad("0:80", "host port must be a whole number from 1 to 65535");
	parse_bad("8080:0", "computer's port must be a whole number from 1 to 65535");
	parse_bad("65536:80", "host port");
	parse_bad("8080:65536", "computer's port");
	parse_bad("08080:80", "host port");
	parse_bad("+80:80", "host port");
	parse_bad(" 80:80", "host port");
	parse_bad("8080:", "computer's port");
	parse_bad("8080:80/udp", "only TCP");
	parse_bad("999.1.1.1:8080:80", "numeric IPv4 address");
	parse_bad("1.2.3:8080:80", "numeric IPv4 address");
	parse_bad("localhost:8080:80", "numeric IPv4 address");
	parse_bad("::1:8080:80", "in brackets");
	parse_bad("[::1:8080:80", "in brackets");
	parse_bad("[127.0.0.1]:8080:80", "in brackets");
	parse_bad(":8080:80", "host address");
	parse_bad("1.2.3.4:5:6:7", "host address");
	char long_one[200];
	memset(long_one, '1', sizeof long_one - 1);
	long_one[sizeof long_one - 1] = '\0';
	parse_bad(long_one, "too long");
	/* A message echoes input escaped and cut, never raw controls. */
	brig_port p;
	brig_error *err = NULL;
	assert_int_equal(brig_port_parse(&p, "\x1b[2J:80:80", &err), BRIG_EINVAL);
	assert_null(strchr(brig_error_message(err), '\x1b'));
	brig_error_free(err);
}

static void test_spec_rules(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;

	/* Network none: nothing to publish to; said whichever flag came first. */
	brig_spec_init(&s);
	publish_ok(&s, "8080:80");
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "publish: needs --network isolated");
	ASSERT_CONTAINS(brig_error_message(err), "network none");
	brig_error_free(err);
	err = NULL;
	ASSERT_OK(brig_spec_set(&s, "network", "isolated", &err), err);
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);
	brig_spec_clear(&s);

	/* Duplicates and overlaps. */
	isolated(&s);
	publish_ok(&s, "8080:80");
	assert_int_equal(brig_spec_set(&s, "publish", "127.0.0.1:8080:81", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "given twice");
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_spec_add_publish(&s, "0.0.0.0:8080:82", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "overlaps");
	brig_error_free(err);
	err = NULL;
	publish_ok(&s, "127.0.0.2:8080:80"); /* another address: fine */
	publish_ok(&s, "8081:80");           /* the same inner port twice: fine */
	assert_int_equal(s.port_count, 3);
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);

	/* A struct filled by hand is checked too. */
	s.ports[1] = s.ports[0];
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "given twice");
	brig_error_free(err);
	err = NULL;
	s.ports[1].host_port = 0;
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "from 1 to 65535");
	brig_error_free(err);
	err = NULL;
	s.ports[1].host_port = 9000;
	strcpy(s.ports[1].host_ip, "not-an-ip");
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "numeric IPv4 or IPv6");
	brig_error_free(err);
	err = NULL;
	brig_spec_clear(&s);

	/* The cap. */
	isolated(&s);
	for (int i = 0; i < BRIG_PORTS_MAX; i++) {
		char p[32];
		snprintf(p, sizeof p, "%d:80", 10000 + i);
		publish_ok(&s, p);
	}
	assert_int_equal(brig_spec_add_publish(&s, "20000:80", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "more than");
	brig_error_free(err);
	brig_spec_clear(&s);
}

static void hash(char out[BRIG_HASH_SIZE], const brig_spec *s)
{
	brig_error *err = NULL;
	ASSERT_OK(brig_spec_hash(out, s, &err), err);
}

static void test_hash_and_json(void **state)
{
	(void)state;
	brig_spec a, b, c;
	char ha[BRIG_HASH_SIZE], hb[BRIG_HASH_SIZE], hc[BRIG_HASH_SIZE];
	brig_error *err = NULL;
	isolated(&a);
	hash(ha, &a);
	publish_ok(&a, "8080:80");
	publish_ok(&a, "0.0.0.0:9090:90");
	hash(hb, &a);
	assert_string_not_equal(ha, hb); /* ports shape the container */

	isolated(&b); /* another order, the default address spelled out */
	publish_ok(&b, "0.0.0.0:9090:90");
	publish_ok(&b, "127.0.0.1:8080:80");
	hash(hc, &b);
	assert_string_equal(hb, hc);
	brig_spec_clear(&b);

	/* JSON round trip, and a copy owns its ports. */
	json_t *j = brig_spec_to_json(&a, BRIG_SPEC_JSON_ENV_VALUES);
	char *t = json_dumps(json_object_get(j, "publish"), JSON_COMPACT);
	assert_string_equal(t, "[\"127.0.0.1:8080:80\",\"0.0.0.0:9090:90\"]");
	free(t);
	ASSERT_OK(brig_spec_from_json(&b, j, &err), err);
	hash(hc, &b);
	assert_string_equal(hb, hc);
	brig_spec_clear(&b);
	brig_spec_copy(&c, &a);
	brig_spec_clear(&a);
	hash(hc, &c);
	assert_string_equal(hb, hc);
	brig_spec_clear(&c);

	/* Wrong types and bad entries in a stored spec. */
	json_object_set_new(j, "publish", json_string("8080:80"));
	assert_int_equal(brig_spec_from_json(&b, j, &err), BRIG_EPROTO);
	brig_spec_clear(&b);
	brig_error_free(err);
	err = NULL;
	json_object_set_new(j, "publish", json_pack("[i]", 8080));
	assert_int_equal(brig_spec_from_json(&b, j, &err), BRIG_EPROTO);
	brig_spec_clear(&b);
	brig_error_free(err);
	err = NULL;
	json_object_set_new(j, "publish", json_pack("[s]", "0:80"));
	assert_int_equal(brig_spec_from_json(&b, j, &err), BRIG_EINVAL);
	brig_spec_clear(&b);
	brig_error_free(err);
	err = NULL;
	json_object_set_new(j, "network", json_string("none"));
	json_object_set_new(j, "publish", json_pack("[s]", "8080:80"));
	assert_int_equal(brig_spec_from_json(&b, j, &err), BRIG_EINVAL);
	brig_spec_clear(&b);
	brig_error_free(err);
	json_decref(j);
}

static void test_bodies(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	isolated(&s);
	publish_ok(&s, "8080:80");
	publish_ok(&s, "127.0.0.2:8081:80");
	publish_ok(&s, "[::1]:9090:90");
	brig_identity id = {"acme", "coder", "sess-1", 1};
	char name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(name, &id, &err), err);
	brig_container_opts o = BRIG_CONTAINER_OPTS_INIT;
	o.id = &id;
	o.name = name;
	json_t *c = NULL;
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	json_t *hc = json_object_get(c, "HostConfig");
	char *t = json_dumps(json_object_get(hc, "PortBindings"), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t, "{\"80/tcp\":[{\"HostIp\":\"127.0.0.1\",\"HostPort\":\"8080\"},"
			       "{\"HostIp\":\"127.0.0.2\",\"HostPort\":\"8081\"}],"
			       "\"90/tcp\":[{\"HostIp\":\"::1\",\"HostPort\":\"9090\"}]}");
	free(t);
	t = json_dumps(json_object_get(c, "ExposedPorts"), JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(t, "{\"80/tcp\":{},\"90/tcp\":{}}");
	free(t);
	assert_true(json_is_false(json_object_get(hc, "PublishAllPorts")));

	/* And read back as the daemon reports them, with what brig never
	 * publishes (udp, garbage) skipped. */
	json_t *pb = json_deep_copy(json_object_get(hc, "PortBindings"));
	json_object_set_new(pb, "53/udp", json_pack("[{s:s, s:s}]", "HostIp", "", "HostPort", "53"));
	json_object_set_new(pb, "x/tcp", json_pack("[{s:s, s:s}]", "HostIp", "", "HostPort", "1"));
	json_object_set_new(pb, "7/tcp",
			    json_pack("[{s:s, s:s}, {s:i}, s, {s:s, s:s}]", "HostIp", "", "HostPort", "7", "HostPort",
				      7, "junk", "HostIp", "bad", "HostPort", "8"));
	brig_port *ports = NULL;
	size_t n = 0;
	ASSERT_OK(brig_spec_ports_from_bindings(&ports, &n, pb, &err), err);
	assert_int_equal(n, 4);
	size_t seen = 0;
	for (size_t i = 0; i < n; i++) {
		char f[BRIG_PORT_STR_SIZE];
		brig_port_format(f, &ports[i]);
		if (strcmp(f, "0.0.0.0:7:7") == 0 || strcmp(f, "127.0.0.1:8080:80") == 0 ||
		    strcmp(f, "127.0.0.2:8081:80") == 0 || strcmp(f, "[::1]:9090:90") == 0)
			seen++;
	}
	assert_int_equal(seen, 4);
	free(ports);
	json_decref(pb);
	ASSERT_OK(brig_spec_ports_from_bindings(&ports, &n, NULL, &err), err);
	assert_int_equal(n, 0);
	pb = json_string("x");
	assert_int_equal(brig_spec_ports_from_bindings(&ports, &n, pb, &err), BRIG_EPROTO);
	brig_error_free(err);
	err = NULL;
	json_decref(pb);
	json_decref(c);

	/* A run never publishes. */
	brig_container_opts r = BRIG_CONTAINER_OPTS_INIT;
	r.kind = BRIG_KIND_RUN;
	r.lifetime_s = 60;
	assert_int_equal(brig_spec_container_json(&c, &s, &r, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "only computers publish ports");
	brig_error_free(err);
	brig_spec_clear(&s);

	/* Without ports the body has neither field. */
	isolated(&s);
	ASSERT_OK(brig_spec_container_json(&c, &s, &o, &err), err);
	assert_null(json_object_get(c, "ExposedPorts"));
	assert_null(json_object_get(json_object_get(c, "HostConfig"), "PortBindings"));
	json_decref(c);
	brig_spec_clear(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_spec_rules),
		cmocka_unit_test(test_hash_and_json),
		cmocka_unit_test(test_bodies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
