/* test_egress.c — egress rules (parsing, matching, files), the spec's
 * egress fields, and the proxy's parsers of request heads and ClientHellos. */
#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/spec.h"
#include "egress/egress_internal.h"
#include "util/util.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

static void refused(const char *rule, const char *why)
{
	char out[BRIG_EGRESS_RULE_SIZE];
	brig_error *err = NULL;
	assert_int_equal(brig_egress_rule_parse(out, rule, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), why);
	brig_error_free(err);
}

static void test_rule_parse(void **state)
{
	(void)state;
	char out[BRIG_EGRESS_RULE_SIZE];
	brig_error *err = NULL;
	ASSERT_OK(brig_egress_rule_parse(out, "API.Anthropic.com", &err), err);
	assert_string_equal(out, "api.anthropic.com");
	ASSERT_OK(brig_egress_rule_parse(out, "*.npmjs.org:8443", &err), err);
	assert_string_equal(out, "*.npmjs.org:8443");
	refused("", "must be a host name");
	refused("a..b", "must be a host name");
	refused("-a.com", "must be a host name");
	refused("a.com:0", "port must be");
	refused("a.com:65536", "port must be");
	refused("a.com:", "port must be");
	refused("a.com:1x", "port must be");
	refused("*.com", "two labels");
	refused("a.*.com", "must be a host name");
	refused("10.0.0.1", "IP addresses are refused");
	refused("http://a.com", "not a URL");
	char big[300];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	refused(big, "must be a host name");
}

static void test_rule_match(void **state)
{
	(void)state;
	const char *rules[] = {"api.example.com", "*.npmjs.org", "git.example.org:2222"};
	assert_true(brig_egress_allowed(rules, 3, "api.example.com", 443));
	assert_true(brig_egress_allowed(rules, 3, "API.example.com", 80));
	assert_false(brig_egress_allowed(rules, 3, "api.example.com", 8443));
	assert_false(brig_egress_allowed(rules, 3, "x.api.example.com", 443));
	assert_true(brig_egress_allowed(rules, 3, "registry.npmjs.org", 443));
	assert_true(brig_egress_allowed(rules, 3, "a.b.npmjs.org", 443));
	assert_false(brig_egress_allowed(rules, 3, "npmjs.org", 443));
	assert_false(brig_egress_allowed(rules, 3, "evilnpmjs.org", 443));
	assert_true(brig_egress_allowed(rules, 3, "git.example.org", 2222));
	assert_false(brig_egress_allowed(rules, 3, "git.example.org", 443));
	assert_false(brig_egress_allowed(rules, 3, "", 443));
	assert_false(brig_egress_allowed(rules, 0, "api.example.com", 443));
}

static void test_spec_allow(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_set(&s, "allow", "a.example.com,*.B.example.org:8443,a.example.com", &err), err);
	assert_int_equal(s.allow_count, 2);
	assert_string_equal(s.allow[1], "*.b.example.org:8443");
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);
	/* Rules change on a running computer: not part of its identity. */
	char h1[BRIG_HASH_SIZE], h2[BRIG_HASH_SIZE];
	ASSERT_OK(brig_spec_hash(h1, &s, &err), err);
	json_t *j = brig_spec_to_json(&s, 0);
	assert_string_equal(json_string_value(json_object_get(j, "network")), "egress");
	assert_int_equal(json_array_size(json_object_get(j, "allow")), 2);
	brig_spec back;
	ASSERT_OK(brig_spec_from_json(&back, j, &err), err);
	json_decref(j);
	assert_int_equal(back.allow_count, 2);
	brig_spec copy;
	brig_spec_copy(&copy, &back);
	assert_string_equal(copy.allow[0], "a.example.com");
	ASSERT_OK(brig_spec_set(&copy, "allow", "c.example.com", &err), err);
	ASSERT_OK(brig_spec_hash(h2, &copy, &err), err);
	assert_string_equal(h1, h2);
	brig_spec_clear(&copy);
	brig_spec_clear(&back);

	assert_int_equal(brig_spec_set(&s, "allow", "", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "comma-separated");
	brig__error_clear(&err);
	assert_int_equal(brig_spec_set(&s, "allow", "ok.example.com,1.2.3.4", &err), BRIG_EINVAL);
	brig__error_clear(&err);
	assert_int_equal(s.allow_count, 2); /* all or nothing */

	/* Container: the proxy in every spelling, on the egress network. */
	brig_container_opts o = {.version = BRIG_CONTAINER_OPTS_VERSION,
				 .kind = BRIG_KIND_COMPUTER,
				 .id = NULL,
				 .name = "brig-x",
				 .spec_hash = h1};
	brig_identity id = {"ns", "a", "s", 1};
	o.id = &id;
	json_t *body = NULL;
	ASSERT_OK(brig_spec_container_json(&body, &s, &o, &err), err);
	assert_string_equal(json_string_value(json_object_get(json_object_get(body, "HostConfig"), "NetworkMode")),
			    BRIG_EGRESS_NETWORK);
	char *text = json_dumps(
		json_object_get(json_object_get(body, "Config") ? json_object_get(body, "Config") : body, "Env"), 0);
	if (!text)
		text = json_dumps(json_object_get(body, "Env"), 0);
	ASSERT_CONTAINS(text, "HTTPS_PROXY=http://" BRIG_EGRESS_GATEWAY ":3128");
	ASSERT_CONTAINS(text, "NODE_USE_ENV_PROXY=1");
	free(text);
	json_decref(body);

	ASSERT_OK(brig_spec_set(&s, "network", "isolated", &err), err);
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "need --network egress");
	brig__error_clear(&err);
	assert_int_equal(brig_spec_set(&s, "network", "egres", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "none, isolated or egress");
	brig__error_clear(&err);
	brig_spec_clear(&s);
}

static void test_spec_allow_errors(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	json_t *j = json_pack("{s:s, s:s}", "network", "egress", "allow", "a.example.com");
	assert_int_equal(brig_spec_from_json(&s, j, &err), BRIG_EPROTO);
	ASSERT_CONTAINS(brig_error_message(err), "allow is not an array");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	json_decref(j);
	j = json_pack("{s:s, s:[i]}", "network", "egress", "allow", 7);
	assert_int_equal(brig_spec_from_json(&s, j, &err), BRIG_EPROTO);
	ASSERT_CONTAINS(brig_error_message(err), "allow entry 0 is not a string");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	json_decref(j);
	j = json_pack("{s:s, s:[s]}", "network", "egress", "allow", "1.2.3.4");
	assert_int_equal(brig_spec_from_json(&s, j, &err), BRIG_EINVAL);
	brig__error_clear(&err);
	brig_spec_clear(&s);
	json_decref(j);
	/* Rules without egress, through JSON too. */
	j = json_pack("{s:s, s:[s]}", "network", "none", "allow", "a.example.com");
	assert_int_equal(brig_spec_from_json(&s, j, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "need --network egress");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	json_decref(j);

	/* A rule set by hand must be canonical; at most BRIG_EGRESS_RULES_MAX. */
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_set(&s, "allow", "a.example.com", &err), err);
	free(s.allow[0]);
	s.allow[0] = xstrdup("A.example.com");
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "canonical");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	for (int i = 0; i < BRIG_EGRESS_RULES_MAX; i++) {
		char r[64];
		snprintf(r, sizeof r, "h%d.example.com", i);
		ASSERT_OK(brig_spec_set(&s, "allow", r, &err), err);
	}
	assert_int_equal(brig_spec_set(&s, "allow", "one-more.example.com", &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "at most");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	/* Too many rules for a rules file. */
	const char *many[BRIG_EGRESS_RULES_MAX + 1];
	for (int i = 0; i <= BRIG_EGRESS_RULES_MAX; i++)
		many[i] = "a.example.com";
	assert_int_equal(brig_egress_rules_set("brig-x", many, BRIG_EGRESS_RULES_MAX + 1, &err), BRIG_EINVAL);
	brig__error_clear(&err);
}

static void test_rules_files(void **state)
{
	(void)state;
	char dir[] = "/tmp/brig-egress-unit-XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("BRIG_EGRESS_DIR", dir, 1);
	brig_error *err = NULL;
	char **rules = NULL;
	size_t n = 9;
	ASSERT_OK(brig_egress_rules_get(&rules, &n, "brig-none", &err), err);
	assert_int_equal(n, 0);
	assert_null(rules[0]);
	brig_egress_rules_free(rules);
	const char *set[] = {"A.example.com", "*.example.org:8443"};
	ASSERT_OK(brig_egress_rules_set("brig-one", set, 2, &err), err);
	ASSERT_OK(brig_egress_rules_get(&rules, &n, "brig-one", &err), err);
	assert_int_equal(n, 2);
	assert_string_equal(rules[0], "a.example.com");
	brig_egress_rules_free(rules);
	assert_int_equal(brig_egress_rules_get(&rules, &n, "../etc", &err), BRIG_EINVAL);
	brig__error_clear(&err);
	assert_int_equal(brig_egress_rules_set("brig-one", (const char *[]){"1.2.3.4"}, 1, &err), BRIG_EINVAL);
	brig__error_clear(&err);
	assert_int_equal(brig_egress__rules_remove("brig-one"), 0);
	assert_int_equal(brig_egress__rules_remove("brig-one"), 0);
	rmdir(dir);
	unsetenv("BRIG_EGRESS_DIR");
}

static int head(const char *text, brig_egress_req *r, const char **why)
{
	return brig_egress__parse_head(r, text, strlen(text), why);
}

static void test_parse_head(void **state)
{
	(void)state;
	brig_egress_req r;
	const char *why = NULL;
	assert_int_equal(head("CONNECT Api.Example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", &r, &why),
			 0);
	assert_true(r.connect);
	assert_string_equal(r.host, "api.example.com");
	assert_int_equal(r.port, 443);
	assert_int_equal(head("CONNECT api.example.com:443 HTTP/1.1\r\n", &r, &why), 1);
	const char *get = "GET http://www.example.com:8080/a?b HTTP/1.1\r\nHost: WWW.example.com:8080\r\n"
			  "Content-Length: 5\r\n\r\nhello";
	assert_int_equal(head(get, &r, &why), 0);
	assert_false(r.connect);
	assert_int_equal(r.port, 8080);
	assert_int_equal(r.content_length, 5);
	assert_int_equal(r.target_len, 4);
	assert_memory_equal(get + r.target_off, "/a?b", 4);
	assert_int_equal(r.head_len, strlen(get) - 5);
	static const struct {
		const char *head, *why;
	} bad[] = {
		{"GET http://a.example.com/ HTTP/1.1\r\nHost: b.example.com\r\n\r\n", "Host header differs"},
		{"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com:81\r\n\r\n", "Host header differs"},
		{"GET http://a.example.com/ HTTP/1.1\r\n\r\n", "needs a Host"},
		{"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\nHost: a.example.com\r\n\r\n",
		 "repeated"},
		{"GET /x HTTP/1.1\r\nHost: a.example.com\r\n\r\n", "absolute http://"},
		{"GET https://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\n\r\n", "absolute http://"},
		{"GET http://u@a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\n\r\n", "authority"},
		{"GET http://10.1.2.3/ HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n", "IP addresses"},
		{"CONNECT a.example.com HTTP/1.1\r\n\r\n", "host:port"},
		{"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", "not host:port"},
		{"BREW http://a.example.com/ HTTP/1.1\r\n\r\n", "method"},
		{"GET http://a.example.com/ HTTP/2.0\r\n\r\n", "HTTP/1.x"},
		{"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\n folded\r\n\r\n", "malformed header"},
		{"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\nContent-Length: x\r\n\r\n",
		 "Content-Length"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		if (head(bad[i].head, &r, &why) != -1)
			fail_msg("accepted: %s", bad[i].head);
		ASSERT_CONTAINS(why, bad[i].why);
	}
	char *huge = xcalloc(BRIG_EGRESS_HEAD_MAX + 10, 1);
	memset(huge, 'a', BRIG_EGRESS_HEAD_MAX + 9);
	assert_int_equal(head(huge, &r, &why), -1);
	ASSERT_CONTAINS(why, "too long");
	free(huge);
}

/* A ClientHello by hand: record, handshake, and extensions given. */
static size_t hello(unsigned char *out, const unsigned char *ext, size_t extlen)
{
	unsigned char body[1024];
	size_t n = 0;
	body[n++] = 3;
	body[n++] = 3;
	memset(body + n, 7, 32);
	n += 32;
	body[n++] = 0;                /* session id */
	body[n++] = 0, body[n++] = 2; /* cipher suites */
	body[n++] = 0x13, body[n++] = 0x01;
	body[n++] = 1, body[n++] = 0; /* compression */
	body[n++] = (unsigned char)(extlen >> 8), body[n++] = (unsigned char)extlen;
	memcpy(body + n, ext, extlen);
	n += extlen;
	size_t m = 0;
	out[m++] = 0x16, out[m++] = 3, out[m++] = 1;
	out[m++] = (unsigned char)((n + 4) >> 8), out[m++] = (unsigned char)(n + 4);
	out[m++] = 1, out[m++] = 0, out[m++] = (unsigned char)(n >> 8), out[m++] = (unsigned char)n;
	memcpy(out + m, body, n);
	return m + n;
}

static size_t sni_ext(unsigned char *e, const char *name)
{
	size_t l = strlen(name), n = 0;
	e[n++] = 0, e[n++] = 0;
	e[n++] = (unsigned char)((l + 5) >> 8), e[n++] = (unsigned char)(l + 5);
	e[n++] = (unsigned char)((l + 3) >> 8), e[n++] = (unsigned char)(l + 3);
	e[n++] = 0;
	e[n++] = (unsigned char)(l >> 8), e[n++] = (unsigned char)l;
	memcpy(e + n, name, l);
	return n + l;
}

static void test_sni(void **state)
{
	(void)state;
	unsigned char ext[512], buf[2048];
	char name[256];
	size_t el = sni_ext(ext, "Api.Example.com");
	size_t n = hello(buf, ext, el);
	assert_int_equal(brig_egress__sni(name, sizeof name, buf, n), 0);
	assert_string_equal(name, "api.example.com");
	for (size_t k = 0; k < n; k++)
		assert_int_equal(brig_egress__sni(name, sizeof name, buf, k), 1);
	/* Split across two records. */
	unsigned char two[2100];
	size_t first = 20, rest = n - 5 - first;
	memcpy(two, buf, 5 + first);
	two[3] = 0, two[4] = (unsigned char)first;
	two[5 + first] = 0x16, two[6 + first] = 3, two[7 + first] = 1;
	two[8 + first] = (unsigned char)(rest >> 8), two[9 + first] = (unsigned char)rest;
	memcpy(two + 10 + first, buf + 5 + first, rest);
	assert_int_equal(brig_egress__sni(name, sizeof name, two, n + 5), 0);
	assert_string_equal(name, "api.example.com");
	/* No SNI, ECH, two names, not TLS, a bad name. */
	n = hello(buf, (const unsigned char *)"\x00\x0a\x00\x00", 4);
	assert_int_equal(brig_egress__sni(name, sizeof name, buf, n), -2);
	el = sni_ext(ext, "a.example.com");
	memcpy(ext + el, "\xfe\x0d\x00\x00", 4);
	n = hello(buf, ext, el + 4);
	assert_int_equal(brig_egress__sni(name, sizeof name, buf, n), -3);
	el = sni_ext(ext, "a.example.com");
	el += sni_ext(ext + el, "b.example.com");
	n = hello(buf, ext, el);
	assert_int_equal(brig_egress__sni(name, sizeof name, buf, n), -1);
	assert_int_equal(brig_egress__sni(name, sizeof name, (const unsigned char *)"GET / HTTP/1.1\r\n", 16), -1);
	el = sni_ext(ext, "a b.com");
	n = hello(buf, ext, el);
	assert_int_equal(brig_egress__sni(name, sizeof name, buf, n), -1);
}

static bool forbidden4(const char *a)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	assert_int_equal(inet_pton(AF_INET, a, &sa.sin_addr), 1);
	return brig_egress__forbidden((const struct sockaddr *)&sa);
}

static bool forbidden6(const char *a)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
	assert_int_equal(inet_pton(AF_INET6, a, &sa.sin6_addr), 1);
	return brig_egress__forbidden((const struct sockaddr *)&sa);
}

/* What no allowed name may resolve to (a review found IPv4-mapped IPv6
 * going around the host-address check, and private ranges open). */
static void test_forbidden_addresses(void **state)
{
	(void)state;
	static const char *const bad4[] = {"127.0.0.1",  "0.0.0.0",        "169.254.169.254", "10.1.2.3",
					   "172.17.0.1", "172.31.255.255", "192.168.1.1",     "100.64.0.1",
					   "198.18.0.1", "224.0.0.1",      "255.255.255.255", "172.30.4.1"};
	for (size_t i = 0; i < sizeof bad4 / sizeof *bad4; i++)
		if (!forbidden4(bad4[i]))
			fail_msg("%s allowed", bad4[i]);
	static const char *const bad6[] = {"::1",
					   "::",
					   "fe80::1",
					   "ff02::1",
					   "fc00::1",
					   "fd12:3456::1",
					   "fec0::1",
					   "::ffff:8.8.8.8",
					   "::ffff:172.17.0.1",
					   "::8.8.8.8",
					   "64:ff9b::808:808"};
	for (size_t i = 0; i < sizeof bad6 / sizeof *bad6; i++)
		if (!forbidden6(bad6[i]))
			fail_msg("%s allowed", bad6[i]);
	/* public addresses pass (documentation ranges stand for them here) */
	assert_false(forbidden4("203.0.113.7"));
	assert_false(forbidden4("172.32.0.1"));
	assert_false(forbidden4("11.0.0.1"));
	assert_false(forbidden6("2001:db8::1"));
}

/* The proxy's per-address share: one address cannot take every slot. */
static void test_peer_cap(void **state)
{
	(void)state;
	static brig_egress_peers p = {.lock = PTHREAD_MUTEX_INITIALIZER};
	uint32_t a = htonl(0x0a000002), b = htonl(0x0a000003);
	for (int i = 0; i < BRIG_EGRESS_PEER_MAX; i++)
		assert_true(brig_egress__peer_take(&p, a, BRIG_EGRESS_PEER_MAX));
	assert_false(brig_egress__peer_take(&p, a, BRIG_EGRESS_PEER_MAX));
	/* another sandbox is not held back by the first one's flood */
	assert_true(brig_egress__peer_take(&p, b, BRIG_EGRESS_PEER_MAX));
	/* a connection that ends gives its slot back */
	brig_egress__peer_drop(&p, a);
	assert_true(brig_egress__peer_take(&p, a, BRIG_EGRESS_PEER_MAX));
	assert_false(brig_egress__peer_take(&p, a, BRIG_EGRESS_PEER_MAX));
	for (int i = 0; i < BRIG_EGRESS_PEER_MAX; i++)
		brig_egress__peer_drop(&p, a);
	brig_egress__peer_drop(&p, b);
	/* dropping an address not counted changes nothing */
	brig_egress__peer_drop(&p, b);
	for (size_t i = 0; i < BRIG_EGRESS_PEER_SLOTS; i++)
		assert_int_equal(p.slot[i].count, 0);
	/* as many addresses as slots: one more address is refused, until
	 * one of them ends */
	for (uint32_t i = 0; i < BRIG_EGRESS_PEER_SLOTS; i++)
		assert_true(brig_egress__peer_take(&p, htonl(0x0a010000 + i), 1));
	assert_false(brig_egress__peer_take(&p, a, 1));
	brig_egress__peer_drop(&p, htonl(0x0a010007));
	assert_true(brig_egress__peer_take(&p, a, 1));
}

/* ---- secrets (issue 19.3) ---- */

static void secret_refused(brig_spec *s, const char *value, const char *why)
{
	brig_error *err = NULL;
	assert_int_equal(brig_spec_set(s, "secret", value, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), why);
	brig__error_clear(&err);
}

static void test_spec_secret(void **state)
{
	(void)state;
	brig_spec s;
	brig_error *err = NULL;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_set(&s, "secret", "API_KEY@API.Example.com,b.example.org", &err), err);
	assert_int_equal(s.secret_count, 1);
	assert_string_equal(s.secrets[0], "API_KEY@api.example.com,b.example.org");
	/* its hosts are allowed too */
	assert_int_equal(s.allow_count, 2);
	assert_string_equal(s.allow[0], "api.example.com");
	/* the same name again replaces */
	ASSERT_OK(brig_spec_set(&s, "secret", "API_KEY@c.example.com", &err), err);
	assert_int_equal(s.secret_count, 1);
	assert_string_equal(s.secrets[0], "API_KEY@c.example.com");
	ASSERT_OK(brig_spec_validate(&s, NULL, &err), err);
	/* through JSON and back; the spec's JSON has names and hosts only */
	json_t *j = brig_spec_to_json(&s, 0);
	brig_spec t;
	ASSERT_OK(brig_spec_from_json(&t, j, &err), err);
	assert_int_equal(t.secret_count, 1);
	assert_string_equal(t.secrets[0], "API_KEY@c.example.com");
	brig_spec u;
	brig_spec_copy(&u, &t);
	assert_string_equal(u.secrets[0], "API_KEY@c.example.com");
	brig_spec_clear(&u);
	brig_spec_clear(&t);
	json_decref(j);
	/* labels carry the names */
	json_t *labels = NULL;
	brig_identity id = {.ns = "n", .agent = "a", .session = "s", .generation = 1};
	ASSERT_OK(brig_spec_labels(&labels, &s, BRIG_KIND_COMPUTER, &id, NULL, &err), err);
	assert_string_equal(json_string_value(json_object_get(labels, BRIG_LABEL_SECRETS)), "API_KEY");
	json_decref(labels);

	secret_refused(&s, "API_KEY", "NAME@HOST");
	secret_refused(&s, "@a.example.com", "NAME@HOST");
	secret_refused(&s, "API_KEY@", "NAME@HOST");
	secret_refused(&s, "API_KEY=sk-live@a.example.com", "environment variable name");
	secret_refused(&s, "API_KEY@a.example.com=x", "never given here");
	secret_refused(&s, "API_KEY@*.example.com", "exact names");
	secret_refused(&s, "API_KEY@a.example.com:8443", "exact names");
	secret_refused(&s, "API_KEY@1.2.3.4", "IP");
	secret_refused(&s, "1KEY@a.example.com", "environment variable name");
	secret_refused(&s, "API_KEY@,", "at least one host");
	secret_refused(&s,
		       "K@h1.example.com,h2.example.com,h3.example.com,h4.example.com,h5.example.com,h6.example.com,"
		       "h7.example.com,h8.example.com,h9.example.com,h10.example.com,h11.example.com,h12.example.com,"
		       "h13.example.com,h14.example.com,h15.example.com,h16.example.com,h17.example.com",
		       "at most 16 hosts");
	for (int i = 1; i < BRIG_SPEC_SECRETS_MAX; i++) {
		char v[64];
		snprintf(v, sizeof v, "K%d@a.example.com", i);
		ASSERT_OK(brig_spec_set(&s, "secret", v, &err), err);
	}
	secret_refused(&s, "ONE_MORE@a.example.com", "at most");
	brig_spec_clear(&s);

	/* Only with network egress; never also an -e entry; canonical. */
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "secret", "API_KEY@a.example.com", &err), err);
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	/* the allow rule it added complains first, naming egress */
	ASSERT_CONTAINS(brig_error_message(err), "egress");
	brig__error_clear(&err);
	s.allow_count = 0;
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "secret: needs --network egress");
	brig__error_clear(&err);
	s.allow_count = 1;
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_add_env(&s, "API_KEY=x", &err), err);
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "also given with -e");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_set(&s, "secret", "API_KEY@a.example.com", &err), err);
	free(s.secrets[0]);
	s.secrets[0] = xstrdup("API_KEY@A.example.com");
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "canonical");
	brig__error_clear(&err);
	free(s.secrets[0]);
	s.secrets[0] = xstrdup("API_KEY@a.example.com");
	ASSERT_OK(brig_spec_set(&s, "secret", "B@a.example.com", &err), err);
	free(s.secrets[1]);
	s.secrets[1] = xstrdup("API_KEY@a.example.com");
	assert_int_equal(brig_spec_validate(&s, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "given twice");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	/* JSON of the wrong shape */
	j = json_pack("{s:s, s:s}", "network", "egress", "secrets", "K@a.example.com");
	assert_int_equal(brig_spec_from_json(&s, j, &err), BRIG_EPROTO);
	ASSERT_CONTAINS(brig_error_message(err), "secrets is not an array");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	json_decref(j);
	j = json_pack("{s:s, s:[i]}", "network", "egress", "secrets", 1);
	assert_int_equal(brig_spec_from_json(&s, j, &err), BRIG_EPROTO);
	ASSERT_CONTAINS(brig_error_message(err), "secrets entry 0");
	brig__error_clear(&err);
	brig_spec_clear(&s);
	json_decref(j);
}

/* Feeds text to a rewriter in pieces of step bytes; the upstream's bytes
 * (caller frees), or NULL with *why when refused. */
static char *rewrite(const char *text, size_t step, const char **why, unsigned *replaced)
{
	static const char *const from[] = {"brig-placeholder-0123456789abcdef0123456789abcdef"};
	static const char *const to[] = {"sk-real-value"};
	brig_egress_rw *rw = xmalloc(sizeof *rw);
	brig_egress__rw_init(rw, "api.example.com", 443, from, to, 1);
	brig_buf out;
	brig_buf_init(&out, 1 << 20);
	size_t n = strlen(text);
	int rc = 0;
	for (size_t off = 0; off < n && rc == 0; off += step)
		rc = brig_egress__rw_feed(rw, text + off, n - off < step ? n - off : step, &out, why);
	if (replaced)
		*replaced = rw->replaced;
	free(rw);
	if (rc) {
		brig_buf_free(&out);
		return NULL;
	}
	return brig_buf_steal(&out, NULL);
}

#define PH "brig-placeholder-0123456789abcdef0123456789abcdef"

static void test_rewrite(void **state)
{
	(void)state;
	const char *why = NULL;
	unsigned rep = 0;
	static const char two[] = "POST /v1/messages HTTP/1.1\r\nHost: api.example.com\r\nx-api-key:  " PH
				  "  \r\nAuthorization: Bearer " PH "\r\nContent-Length: 49\r\n\r\n" PH
				  "GET /x HTTP/1.1\r\nHost: API.example.com:443\r\nX-Name-" PH ": a\r\n"
				  "Transfer-Encoding: chunked\r\n\r\n31;ext\r\n" PH "\r\n0\r\nT: 1\r\n\r\n";
	for (size_t step = 1; step <= sizeof two; step += step < 8 ? 1 : 97) {
		cleanup_free char *out = rewrite(two, step, &why, &rep);
		if (!out)
			fail_msg("refused at step %zu: %s", step, why);
		/* header values only: not the body, not a header's name */
		ASSERT_CONTAINS(out, "x-api-key: sk-real-value\r\n");
		ASSERT_CONTAINS(out, "Authorization: Bearer sk-real-value\r\n");
		ASSERT_CONTAINS(out, "Content-Length: 49\r\n\r\n" PH "GET /x HTTP/1.1");
		ASSERT_CONTAINS(out, "X-Name-" PH ": a\r\n");
		ASSERT_CONTAINS(out, "\r\n\r\n31;ext\r\n" PH "\r\n0\r\nT: 1\r\n\r\n");
		assert_int_equal(rep, 2);
	}
	/* Only headers a secret is bound to, only the whole value or after a
	 * scheme: an echoed header (X-Echo) would hand the value back. */
	static const char bound[] = "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Echo: " PH "\r\n"
				    "X-Goog-Api-Key: " PH "\r\napi-key: Token " PH "\r\n"
				    "Proxy-Authorization: Bearer " PH "\r\nAuthorization: Bearer " PH "," PH "\r\n"
				    "Authorization: x" PH "\r\nAuthorization: Bea(rer " PH "\r\n"
				    "Authorization: Bearer  " PH "\r\nCookie: a=" PH "\r\n\r\n";
	cleanup_free char *bo = rewrite(bound, 3, &why, &rep);
	assert_non_null(bo);
	assert_int_equal(rep, 2);
	ASSERT_CONTAINS(bo, "X-Echo: " PH "\r\n");
	ASSERT_CONTAINS(bo, "X-Goog-Api-Key: sk-real-value\r\n");
	ASSERT_CONTAINS(bo, "api-key: Token sk-real-value\r\n");
	ASSERT_CONTAINS(bo, "Proxy-Authorization: Bearer " PH "\r\n");
	ASSERT_CONTAINS(bo, "Authorization: Bearer " PH "," PH "\r\n");
	ASSERT_CONTAINS(bo, "Authorization: x" PH "\r\n");
	ASSERT_CONTAINS(bo, "Authorization: Bea(rer " PH "\r\n");
	ASSERT_CONTAINS(bo, "Authorization: Bearer  " PH "\r\n");
	ASSERT_CONTAINS(bo, "Cookie: a=" PH "\r\n");
	static const char body_ok[] = "POST / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 3\r\n\r\nabc"
				      "GET / HTTP/1.0\r\nhost: api.example.com\r\n\r\n";
	cleanup_free char *ok = rewrite(body_ok, 4, &why, &rep);
	assert_non_null(ok);
	assert_int_equal(rep, 0);
	static const char upgrade[] = "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: websocket\r\n\r\n"
				      "\x81\x05hello anything at all " PH;
	cleanup_free char *up = rewrite(upgrade, 7, &why, &rep);
	assert_non_null(up);
	ASSERT_CONTAINS(up, "anything at all " PH);

	static const struct {
		const char *text, *why;
	} bad[] = {
		{"GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n", "Host in the TLS tunnel differs"},
		{"TRACE / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n",
		 "TRACE and TRACK are refused"},
		{"TRACK / HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "TRACE and TRACK are refused"},
		{"GET / HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n", "Host in the TLS tunnel differs"},
		{"GET / HTTP/1.1\r\nHost: api.example.com\r\nHost: api.example.com\r\n\r\n", "differs"},
		{"GET / HTTP/1.1\r\nX: y\r\n\r\n", "no Host header"},
		{"GET / HTTP/2.0\r\nHost: api.example.com\r\n\r\n", "not an HTTP/1.x"},
		{"GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "not origin-form"},
		{"G(T / HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "malformed request"},
		{"GET / HTTP/1.1\r\nHost: api.example.com\r\n folded\r\n\r\n", "malformed request header"},
		{"GET / HTTP/1.1\r\nBad Name: x\r\nHost: api.example.com\r\n\r\n", "malformed request header"},
		{"GET / HTTP/1.1\r\nHost: api.example.com\r\nX: a\x01"
		 "b\r\n\r\n",
		 "malformed request header"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		 "malformed request header"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 1x\r\n\r\n", "malformed request header"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		 "other than chunked"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		 "both Content-Length and Transfer-Encoding"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		 "malformed chunk size"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
		 "malformed chunked body"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\n",
		 "malformed chunked trailer"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
		 "1111111111111111\r\n",
		 "malformed chunk size"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\na\r\n0\r\n\r\n",
		 "malformed chunk size"},
		{"POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n1\t;x\r\na\r\n",
		 "malformed chunk size"},
		{"POST / HTTP/1.0\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n",
		 "Transfer-Encoding or Upgrade on HTTP/1.0"},
		{"GET / HTTP/1.0\r\nHost: api.example.com\r\nUpgrade: websocket\r\n\r\n",
		 "Transfer-Encoding or Upgrade on HTTP/1.0"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		why = NULL;
		char *out = rewrite(bad[i].text, 5, &why, NULL);
		if (out)
			fail_msg("case %zu was accepted", i);
		assert_non_null(why);
		ASSERT_CONTAINS(why, bad[i].why);
	}
	/* A head that never ends, a chunk line that never ends */
	char *big = xmalloc(BRIG_EGRESS_HEAD_MAX + 64);
	memset(big, 'a', BRIG_EGRESS_HEAD_MAX + 63);
	big[BRIG_EGRESS_HEAD_MAX + 63] = '\0';
	assert_null(rewrite(big, 4096, &why, NULL));
	ASSERT_CONTAINS(why, "too long");
	char *chunky = xasprintf("POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n1;%s",
				 big + BRIG_EGRESS_HEAD_MAX - 2000);
	assert_null(rewrite(chunky, 999, &why, NULL));
	ASSERT_CONTAINS(why, "line too long");
	free(chunky);
	free(big);
	/* Values that would push a head past its cap once in */
	static const char *const from[] = {PH};
	char *huge = xmalloc(BRIG_EGRESS_SECRET_MAX + 1);
	memset(huge, 'v', BRIG_EGRESS_SECRET_MAX);
	huge[BRIG_EGRESS_SECRET_MAX] = '\0';
	const char *to[] = {huge};
	brig_egress_rw *rw = xmalloc(sizeof *rw);
	brig_egress__rw_init(rw, "api.example.com", 443, from, to, 1);
	brig_buf h, out;
	brig_buf_init(&h, 1 << 20);
	brig_buf_puts(&h, "GET / HTTP/1.1\r\nHost: api.example.com\r\n");
	for (int i = 0; i < 40; i++)
		brig_buf_puts(&h, "Authorization: Bearer " PH "\r\n");
	brig_buf_puts(&h, "\r\n");
	brig_buf_init(&out, 1 << 20);
	assert_int_equal(brig_egress__rw_feed(rw, h.data, h.len, &out, &why), -1);
	ASSERT_CONTAINS(why, "too long once secrets are in");
	brig_buf_free(&h);
	brig_buf_free(&out);
	free(rw);
	free(huge);
}

/* Feeds text to a scanner in pieces of step bytes; what reached the
 * sandbox (caller frees), with *cut when a value was seen. */
static char *scan(const char *text, size_t step, bool *cut)
{
	static const char *const values[] = {"sk-real-value", "other-secret"};
	brig_egress_scan s;
	brig_egress__scan_init(&s, values, 2);
	brig_buf out;
	brig_buf_init(&out, 1 << 20);
	size_t n = strlen(text);
	*cut = false;
	for (size_t off = 0; off < n && !*cut; off += step)
		*cut = brig_egress__scan_feed(&s, text + off, n - off < step ? n - off : step, &out) != 0;
	if (!*cut)
		assert_int_equal(brig_egress__scan_flush(&s, &out), 0);
	brig_egress__scan_free(&s);
	return brig_buf_steal(&out, NULL);
}

static void test_scan(void **state)
{
	(void)state;
	static const char echo[] = "HTTP/1.1 200 OK\r\n\r\n{\"headers\":{\"Authorization\":\"Bearer sk-real-value\"}}";
	for (size_t step = 1; step <= sizeof echo; step++) {
		bool cut;
		cleanup_free char *out = scan(echo, step, &cut);
		if (!cut)
			fail_msg("a reflected value passed at step %zu", step);
		/* not even a part of it before the cut */
		assert_null(strstr(out ? out : "", "sk-"));
	}
	bool cut;
	cleanup_free char *o2 = scan("x other-secre", 4, &cut);
	assert_false(cut);
	assert_string_equal(o2, "x other-secre"); /* a prefix at the end: flushed */
	cleanup_free char *o3 = scan("sk-real-valu sk-sk-real-valuX other-secret", 5, &cut);
	assert_true(cut);
	cleanup_free char *o4 = scan("sk-real-valu sk-sk-real-valuX other-secreT", 3, &cut);
	assert_false(cut);
	assert_string_equal(o4, "sk-real-valu sk-sk-real-valuX other-secreT");
}

/* Buffers that hold a value never move (a realloc leaves a copy behind). */
static void test_buf_whole(void **state)
{
	(void)state;
	brig_buf b;
	brig_egress__buf_whole(&b, 100000);
	const char *at = b.data;
	char chunk[1000];
	memset(chunk, 'v', sizeof chunk);
	for (int i = 0; i < 100; i++)
		assert_int_equal(brig_buf_add(&b, chunk, sizeof chunk), 0);
	assert_ptr_equal(b.data, at);
	assert_int_not_equal(brig_buf_add(&b, chunk, 1), 0);
	brig_buf_free(&b);
}

static void test_bump_port(void **state)
{
	(void)state;
	const char *rules[] = {"api.example.com", "*.example.org:8443", "api.example.com:80"};
	assert_true(brig_egress__bump_port(rules, 3, "api.example.com", 443));
	assert_false(brig_egress__bump_port(rules, 3, "api.example.com", 8443));
	assert_true(brig_egress__bump_port(rules, 3, "a.example.org", 8443));
	assert_false(brig_egress__bump_port(rules, 3, "api.example.com", 22));
	assert_true(brig_egress__bump_port(rules, 3, "api.example.com", 80)); /* named */
	assert_false(brig_egress__bump_port(rules, 1, "api.example.com", 80));
}

static void test_secrets_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/brig-egress-unit-XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("BRIG_EGRESS_DIR", dir, 1);
	brig_error *err = NULL;
	brig_egress_secret *sec = NULL;
	size_t n = 9;
	ASSERT_OK(brig_egress__secrets_read(&sec, &n, "brig-none", &err), err);
	assert_int_equal(n, 0);
	cleanup_free char *path = NULL;
	ASSERT_OK(brig_egress__sandbox_path(&path, "brig-one", ".secrets", &err), err);
	/* "sk-x" in hex */
	static const char good[] = "K " PH " a.example.com,b.example.com 736b2d78\nL " PH " c.example.com 61\n";
	ASSERT_OK(brig_egress__file_write(path, good, strlen(good), &err), err);
	ASSERT_OK(brig_egress__secrets_read(&sec, &n, "brig-one", &err), err);
	assert_int_equal(n, 2);
	assert_string_equal(sec[0].value, "sk-x");
	assert_true(brig_egress__secret_covers(&sec[0], "B.example.com"));
	assert_false(brig_egress__secret_covers(&sec[0], "c.example.com"));
	assert_false(brig_egress__secret_covers(&sec[0], "example.com"));
	assert_true(brig_egress__secret_covers(&sec[1], "c.example.com"));
	brig_egress__secrets_free(sec, n);
	static const char *const bad[] = {"K " PH " a.example.com\n", "K " PH " a.example.com 7\n",
					  "K " PH " a.example.com zz\n", "K " PH " a.example.com 0a\n"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		ASSERT_OK(brig_egress__file_write(path, bad[i], strlen(bad[i]), &err), err);
		assert_int_equal(brig_egress__secrets_read(&sec, &n, "brig-one", &err), BRIG_EINVAL);
		ASSERT_CONTAINS(brig_error_message(err), "malformed");
		brig__error_clear(&err);
	}
	assert_int_equal(brig_egress__secrets_read(&sec, &n, "../x", &err), BRIG_EINVAL);
	brig__error_clear(&err);
	/* removed with the rules */
	assert_int_equal(brig_egress__rules_remove("brig-one"), 0);
	assert_int_not_equal(access(path, F_OK), 0);
	/* a folder that cannot be: its parent is a file */
	cleanup_free char *under_file = xasprintf("%s/brig-one.rules.d/x", dir);
	cleanup_free char *file = xasprintf("%s/brig-one.rules.d", dir);
	ASSERT_OK(brig_egress__file_write(file, "a", 1, &err), err);
	assert_true(brig_egress__file_write(under_file, "a", 1, &err) < 0);
	brig__error_clear(&err);
	unlink(file);

	/* The authority: made once, key 0600, the same certificate after. */
	cleanup_free char *pem = NULL, *pem2 = NULL;
	ASSERT_OK(brig_egress__ca_ensure(&pem, &err), err);
	ASSERT_CONTAINS(pem, "BEGIN CERTIFICATE");
	ASSERT_OK(brig_egress__ca_ensure(&pem2, &err), err);
	assert_string_equal(pem, pem2);
	cleanup_free char *key = xasprintf("%s/ca/ca.key", dir);
	struct stat st;
	assert_int_equal(stat(key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* Placeholders: one per secret, the recognisable format, random. */
	brig_spec s;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "network", "egress", &err), err);
	ASSERT_OK(brig_spec_set(&s, "secret", "BRIG_UNIT_SECRET@a.example.com", &err), err);
	json_t *env = json_array();
	ASSERT_OK(brig_egress__placeholders_add(env, &s, &err), err);
	ASSERT_OK(brig_egress__placeholders_add(env, &s, &err), err);
	assert_int_equal(json_array_size(env), 2);
	const char *p0 = json_string_value(json_array_get(env, 0));
	assert_int_equal(strlen(p0), strlen("BRIG_UNIT_SECRET=" BRIG_EGRESS_PLACEHOLDER_PREFIX) + 32);
	assert_int_equal(strncmp(p0, "BRIG_UNIT_SECRET=brig-placeholder-", 34), 0);
	assert_string_not_equal(p0, json_string_value(json_array_get(env, 1)));
	json_decref(env);
	/* The value must be in brig's environment, printable, bounded. */
	unsetenv("BRIG_UNIT_SECRET");
	assert_int_equal(brig_egress__secrets_check(&s, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "not set in brig's environment");
	brig__error_clear(&err);
	setenv("BRIG_UNIT_SECRET", "line\nbreak-sk-do-not-print", 1);
	assert_int_equal(brig_egress__secrets_check(&s, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "printable");
	assert_null(strstr(brig_error_message(err), "do-not-print"));
	brig__error_clear(&err);
	setenv("BRIG_UNIT_SECRET", "sk-fine", 1);
	ASSERT_OK(brig_egress__secrets_check(&s, &err), err);
	unsetenv("BRIG_UNIT_SECRET");
	brig_spec_clear(&s);
	cleanup_free char *rm = xasprintf("rm -rf '%s'", dir);
	assert_int_equal(system(rm), 0);
	unsetenv("BRIG_EGRESS_DIR");
}

/* The proxy is started with what it needs of its starter's environment,
 * and nothing else: no credentials. */
static void test_proxy_env(void **state)
{
	(void)state;
	char *env[] = {"ANTHROPIC_API_KEY=sk-test-not-a-key",
		       "PATH=/usr/bin:/bin",
		       "BRIG_STORE=sqlite:///tmp/x.db",
		       "BRIG_TOKEN=t",
		       "BRIG_EGRESS_DIR=/tmp/e",
		       "BRIG_EGRESS_HOSTS=/tmp/h",
		       "BRIG_EGRESS_HOSTSX=/tmp/h",
		       "BRIG_EGRESS_TEST=1",
		       "DOCKER_HOST=unix:///var/run/docker.sock",
		       "PGPASSFILE=/tmp/pgpass",
		       "PG=x",
		       "PATHX=y",
		       "HOME",
		       "GITHUB_TOKEN=t",
		       NULL};
	char *out[16];
	assert_int_equal(brig_egress__proxy_env(out, 16, env), 7);
	assert_string_equal(out[0], "PATH=/usr/bin:/bin");
	assert_string_equal(out[1], "BRIG_STORE=sqlite:///tmp/x.db");
	assert_string_equal(out[2], "BRIG_EGRESS_DIR=/tmp/e");
	assert_string_equal(out[3], "BRIG_EGRESS_HOSTS=/tmp/h");
	assert_string_equal(out[4], "BRIG_EGRESS_TEST=1");
	assert_string_equal(out[5], "DOCKER_HOST=unix:///var/run/docker.sock");
	assert_string_equal(out[6], "PGPASSFILE=/tmp/pgpass");
	assert_null(out[7]);
	/* a short array: what fits, still NULL-terminated */
	assert_int_equal(brig_egress__proxy_env(out, 3, env), 2);
	assert_null(out[2]);
	assert_int_equal(brig_egress__proxy_env(out, 1, env), 0);
	assert_null(out[0]);
}

/* The test-only overrides only with BRIG_EGRESS_TEST=1: the proxy refuses
 * to start on an environment that merely leaked them. */
static void test_proxy_test_overrides(void **state)
{
	(void)state;
	brig_error *err = NULL;
	unsetenv("BRIG_EGRESS_TEST");
	setenv("BRIG_EGRESS_HOSTS", "/nonexistent/hosts", 1);
	assert_int_equal(brig_egress_proxy_serve(&err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "BRIG_EGRESS_HOSTS is set; it is for brig's tests only");
	brig__error_clear(&err);
	unsetenv("BRIG_EGRESS_HOSTS");
	setenv("BRIG_EGRESS_UPSTREAM_CA", "/nonexistent/ca.pem", 1);
	assert_int_equal(brig_egress_proxy_serve(&err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "BRIG_EGRESS_UPSTREAM_CA is set");
	brig__error_clear(&err);
	setenv("BRIG_EGRESS_TEST", "yes", 1);
	assert_int_equal(brig_egress__test_overrides_check(&err), BRIG_EINVAL);
	brig__error_clear(&err);
	setenv("BRIG_EGRESS_TEST", "1", 1);
	assert_int_equal(brig_egress__test_overrides_check(&err), 0);
	unsetenv("BRIG_EGRESS_UPSTREAM_CA");
	unsetenv("BRIG_EGRESS_TEST");
	assert_int_equal(brig_egress__test_overrides_check(&err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_parse),
		cmocka_unit_test(test_peer_cap),
		cmocka_unit_test(test_forbidden_addresses),
		cmocka_unit_test(test_rule_match),
		cmocka_unit_test(test_spec_allow),
		cmocka_unit_test(test_spec_allow_errors),
		cmocka_unit_test(test_rules_files),
		cmocka_unit_test(test_parse_head),
		cmocka_unit_test(test_sni),
		cmocka_unit_test(test_proxy_env),
		cmocka_unit_test(test_proxy_test_overrides),
		cmocka_unit_test(test_spec_secret),
		cmocka_unit_test(test_rewrite),
		cmocka_unit_test(test_scan),
		cmocka_unit_test(test_bump_port),
		cmocka_unit_test(test_buf_whole),
		cmocka_unit_test(test_secrets_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
