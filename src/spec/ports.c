/* ports.c — published ports: parsing docker's -p spelling, the overlap and
 * network rules, the PortBindings body, and reading bindings back. */
#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec_internal.h"
#include "util/util.h"

#define PUBLISH_HELP "write [HOST_IP:]HOST_PORT:PORT such as 8080:80 or 127.0.0.1:8080:80"

/* Strict decimal 1..65535: no sign, no spaces, no leading zero. */
static bool parse_port(const char *s, size_t n, uint16_t *out)
{
	unsigned v = 0;
	if (n == 0 || n > 5 || s[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

/* A numeric address, rewritten in its canonical spelling into out. */
static bool parse_ip(const char *s, size_t n, bool v6, char out[BRIG_IP_SIZE])
{
	char buf[BRIG_IP_SIZE];
	unsigned char bin[16];
	if (n == 0 || n >= sizeof buf)
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	int af = v6 ? AF_INET6 : AF_INET;
	return inet_pton(af, buf, bin) == 1 && inet_ntop(af, bin, out, BRIG_IP_SIZE) != NULL;
}

static bool is_v6(const char *ip)
{
	return strchr(ip, ':') != NULL;
}

static bool is_wildcard(const char *ip)
{
	return strcmp(ip, "0.0.0.0") == 0 || strcmp(ip, "::") == 0;
}

int brig_port_parse(brig_port *out, const char *s, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	brig_port p = {.host_ip = "127.0.0.1"};
	const char *in = s ? s : "";
	size_t n = strnlen(in, BRIG_PORT_STR_SIZE);
	if (n == 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "publish: empty; " PUBLISH_HELP);
	if (n >= BRIG_PORT_STR_SIZE)
		return brig__error_set(err, BRIG_EINVAL, 0, "publish: '%s' is too long; " PUBLISH_HELP,
				       brig_spec__quote(q, in));
	const char *slash = memchr(in, '/', n);
	if (slash) {
		if (strcmp(slash, "/tcp") != 0)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "publish: '%s': only TCP ports are published (a /tcp suffix, or none)",
					       brig_spec__quote(q, in));
		n = (size_t)(slash - in);
	}
	/* The container port follows the last ':', the host port the one
	 * before; anything before that is the address. */
	const char *end = in + n;
	const char *c2 = NULL, *c1 = NULL;
	for (const char *x = end; x > in; x--)
		if (x[-1] == ':') {
			c2 = x - 1;
			break;
		}
	for (const char *x = c2; c2 && x > in; x--)
		if (x[-1] == ':') {
			c1 = x - 1;
			break;
		}
	if (!c2)
		return brig__error_set(
			err, BRIG_EINVAL, 0,
			"publish: '%s' names one port; give the host's and the computer's: " PUBLISH_HELP,
			brig_spec__quote(q, in));
	const char *hp = c1 ? c1 + 1 : in;
	bool bracketed = c1 && in[0] == '[';
	if (c1 && bracketed && (c1 == in || c1[-1] != ']'))
		c1 = NULL; /* "[::1" without its ']', or a ':' inside the brackets */
	if (c1) {
		const char *ip = bracketed ? in + 1 : in;
		size_t iplen = (size_t)(c1 - in) - (bracketed ? 2 : 0);
		if (!parse_ip(ip, iplen, bracketed, p.host_ip))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "publish: '%s': the host address must be a numeric IPv4 address such as "
					       "127.0.0.1, or an IPv6 one in brackets such as [::1]",
					       brig_spec__quote(q, in));
	} else if (hp != in) {
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "publish: '%s': the host address must be a numeric IPv4 address such as "
				       "127.0.0.1, or an IPv6 one in brackets such as [::1]",
				       brig_spec__quote(q, in));
	}
	if (!parse_port(hp, (size_t)(c2 - hp), &p.host_port))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "publish: '%s': the host port must be a whole number from 1 to 65535",
				       brig_spec__quote(q, in));
	if (!parse_port(c2 + 1, (size_t)(end - c2 - 1), &p.port))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "publish: '%s': the computer's port must be a whole number from 1 to 65535",
				       brig_spec__quote(q, in));
	*out = p;
	return 0;
}

char *brig_port_format(char out[BRIG_PORT_STR_SIZE], const brig_port *p)
{
	if (is_v6(p->host_ip))
		snprintf(out, BRIG_PORT_STR_SIZE, "[%.*s]:%u:%u", BRIG_IP_SIZE - 1, p->host_ip, p->host_port, p->port);
	else
		snprintf(out, BRIG_PORT_STR_SIZE, "%.*s:%u:%u", BRIG_IP_SIZE - 1, p->host_ip, p->host_port, p->port);
	return out;
}

/* Whether two host bindings can be told apart by the kernel: the same port
 * on the same address, or on a wildcard and anything, cannot. */
static bool overlaps(const brig_port *a, const brig_port *b)
{
	if (a->host_port != b->host_port)
		return false;
	return strcmp(a->host_ip, b->host_ip) == 0 || is_wildcard(a->host_ip) || is_wildcard(b->host_ip);
}

static int overlap_error(const brig_port *a, const brig_port *b, brig_error **err)
{
	char sa[BRIG_PORT_STR_SIZE], sb[BRIG_PORT_STR_SIZE];
	brig_port_format(sa, a);
	brig_port_format(sb, b);
	if (strcmp(a->host_ip, b->host_ip) == 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "publish: host port %s:%u is given twice (%s and %s); each host address and "
				       "port can be published once",
				       a->host_ip, a->host_port, sb, sa);
	return brig__error_set(err, BRIG_EINVAL, 0,
			       "publish: %s overlaps %s: a wildcard address (0.0.0.0 or ::) takes the port on every "
			       "address; use another host port",
			       sa, sb);
}

/* A brig_port as it may come from a caller that filled the struct. */
static int check_port(const brig_port *p, brig_error **err)
{
	char ip[BRIG_IP_SIZE];
	size_t n = strnlen(p->host_ip, BRIG_IP_SIZE);
	if (n == BRIG_IP_SIZE || !parse_ip(p->host_ip, n, is_v6(p->host_ip), ip) || strcmp(ip, p->host_ip) != 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "publish: host address must be a numeric IPv4 or IPv6 address in canonical form "
				       "such as 127.0.0.1 or ::1");
	if (p->host_port == 0 || p->port == 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "publish: ports must be from 1 to 65535, got %u:%u",
				       p->host_port, p->port);
	return 0;
}

int brig_spec__check_ports(const brig_spec *spec, brig_error **err)
{
	int r;
	if (spec->port_count == 0)
		return 0;
	if (spec->port_count > BRIG_PORTS_MAX || !spec->ports)
		return brig__error_set(err, BRIG_EINVAL, 0, "publish: more than %d ports", BRIG_PORTS_MAX);
	if (spec->network != BRIG_NET_ISOLATED)
		return brig__error_set(
			err, BRIG_EINVAL, 0,
			"publish: needs --network isolated; with network %s the computer has only lo, so "
			"there is nothing to publish to",
			brig_network_name(spec->network));
	for (size_t i = 0; i < spec->port_count; i++) {
		if ((r = check_port(&spec->ports[i], err)) < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if (overlaps(&spec->ports[j], &spec->ports[i]))
				return overlap_error(&spec->ports[i], &spec->ports[j], err);
	}
	return 0;
}

int brig_spec_add_publish(brig_spec *spec, const char *publish, brig_error **err)
{
	brig_port p;
	int r;
	if ((r = brig_port_parse(&p, publish, err)) < 0)
		return r;
	for (size_t i = 0; i < spec->port_count; i++)
		if (overlaps(&spec->ports[i], &p))
			return overlap_error(&p, &spec->ports[i], err);
	if (spec->port_count >= BRIG_PORTS_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "publish: more than %d ports", BRIG_PORTS_MAX);
	spec->ports = xrealloc(spec->ports, (spec->port_count + 1) * sizeof *spec->ports);
	spec->ports[spec->port_count++] = p;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

json_t *brig_spec__ports_json(const brig_spec *spec, bool sorted)
{
	char **v = xcalloc(spec->port_count + 1, sizeof(char *));
	for (size_t i = 0; i < spec->port_count; i++) {
		v[i] = xmalloc(BRIG_PORT_STR_SIZE);
		brig_port_format(v[i], &spec->ports[i]);
	}
	if (sorted)
		qsort(v, spec->port_count, sizeof(char *), cmp_str);
	json_t *a = json_array();
	for (size_t i = 0; i < spec->port_count; i++) {
		json_array_append_new(a, json_string(v[i]));
		free(v[i]);
	}
	free(v);
	return a;
}

void brig_spec__port_bindings(const brig_spec *spec, json_t *config, json_t *host_config)
{
	if (spec->port_count == 0)
		return;
	json_t *exposed = json_object();
	json_t *bindings = json_object();
	for (size_t i = 0; i < spec->port_count; i++) {
		const brig_port *p = &spec->ports[i];
		char key[16], hport[8];
		snprintf(key, sizeof key, "%u/tcp", p->port);
		snprintf(hport, sizeof hport, "%u", p->host_port);
		json_object_set_new(exposed, key, json_object());
		json_t *list = json_object_get(bindings, key);
		if (!list) {
			list = json_array();
			json_object_set_new(bindings, key, list);
		}
		json_array_append_new(list, json_pack("{s:s, s:s}", "HostIp", p->host_ip, "HostPort", hport));
	}
	json_object_set_new(config, "ExposedPorts", exposed);
	json_object_set_new(host_config, "PortBindings", bindings);
}

/* "8000/tcp" → 8000; anything else (udp, garbage) → 0. */
static uint16_t key_port(const char *k)
{
	const char *slash = strchr(k, '/');
	uint16_t v = 0;
	if (!slash || strcmp(slash, "/tcp") != 0 || !parse_port(k, (size_t)(slash - k), &v))
		return 0;
	return v;
}

int brig_spec_ports_from_bindings(brig_port **out, size_t *n, const json_t *bindings, brig_error **err)
{
	*out = NULL;
	*n = 0;
	if (bindings == NULL || json_is_null(bindings))
		return 0;
	if (!json_is_object(bindings))
		return brig__error_set(err, BRIG_EPROTO, 0, "the daemon's PortBindings is not an object");
	brig_port *v = NULL;
	size_t count = 0;
	const char *k;
	json_t *list;
	json_object_foreach ((json_t *)bindings, k, list) {
		uint16_t port = key_port(k);
		size_t i;
		json_t *b;
		if (!port || !json_is_array(list))
			continue; /* not one brig publishes */
		json_array_foreach (list, i, b) {
			const char *ip = json_string_value(json_object_get(b, "HostIp"));
			const char *hp = json_string_value(json_object_get(b, "HostPort"));
			brig_port p = {.port = port};
			if (!hp || !parse_port(hp, strlen(hp), &p.host_port))
				continue;
			if (!ip || !*ip)
				ip = "0.0.0.0"; /* Docker's spelling of every address */
			if (!parse_ip(ip, strlen(ip), is_v6(ip), p.host_ip))
				continue;
			if (count >= BRIG_PORTS_MAX) {
				free(v);
				return brig__error_set(
					err, BRIG_EPROTO, 0,
					"the container publishes more than %d ports; brig made none such",
					BRIG_PORTS_MAX);
			}
			v = xrealloc(v, (count + 1) * sizeof *v);
			v[count++] = p;
		}
	}
	*out = v;
	*n = count;
	return 0;
}
