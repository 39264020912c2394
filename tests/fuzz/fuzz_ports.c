/* fuzz_ports.c — libFuzzer target for published ports: the -p spelling
 * (user input, and a stored spec's) and the daemon's PortBindings read back.
 * Whatever either accepts must format and parse back to itself. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brig/spec.h"
#include "util/util.h"

static void round_trip(const brig_port *p)
{
	char s[BRIG_PORT_STR_SIZE];
	brig_port q;
	if (p->host_port == 0 || p->port == 0)
		abort();
	brig_port_format(s, p);
	if (strlen(s) >= BRIG_PORT_STR_SIZE - 1 || brig_port_parse(&q, s, NULL) != 0)
		abort();
	if (q.host_port != p->host_port || q.port != p->port || strcmp(q.host_ip, p->host_ip) != 0)
		abort();
}

/* First byte: 0 the -p spelling (the rest up to a NUL, or several
 * NUL-separated into one spec), 1 PortBindings JSON. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *text = xstrndup((const char *)data + 1, size - 1);
	size_t n = size - 1;
	if (data[0] & 1) {
		json_t *j = json_loadb(text, n, JSON_DECODE_ANY, NULL);
		brig_port *ports = NULL;
		size_t count = 0;
		brig_error *err = NULL;
		if (brig_spec_ports_from_bindings(&ports, &count, j, &err) == 0) {
			if (count > BRIG_PORTS_MAX || (count && !ports))
				abort();
			for (size_t i = 0; i < count; i++)
				round_trip(&ports[i]);
		} else if (!err || !err->message) {
			abort();
		}
		free(ports);
		brig_error_free(err);
		json_decref(j);
	} else {
		brig_spec spec;
		brig_spec_init(&spec);
		brig_spec_set(&spec, "network", "isolated", NULL);
		/* The pieces between NULs, each a -p value. */
		const char *p = (const char *)data + 1, *end = (const char *)data + size;
		while (p < end) {
			size_t len = strnlen(p, (size_t)(end - p));
			char *one = xstrndup(p, len);
			brig_port port;
			brig_error *err = NULL;
			if (brig_port_parse(&port, one, &err) == 0)
				round_trip(&port);
			else if (!err || strncmp(brig_error_message(err), "publish: ", 9) != 0)
				abort();
			brig_error_free(err);
			brig_spec_add_publish(&spec, one, NULL);
			free(one);
			p += len + 1;
		}
		/* What add accepted, validate accepts too. */
		if (brig_spec_validate(&spec, NULL, NULL) != 0)
			abort();
		brig_spec_clear(&spec);
	}
	free(text);
	return 0;
}
