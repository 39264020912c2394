/* remote_parse.c — see remote_parse.h. */
#include "cli/remote_parse.h"

#include <stdint.h>
#include <string.h>

#include "brig/error.h"

void cli_ndjson_init(cli_ndjson *s, int (*cb)(json_t *line, void *payload), void *payload)
{
	memset(s, 0, sizeof *s);
	brig_buf_init(&s->line, CLI_NDJSON_LINE_CAP);
	s->cb = cb;
	s->payload = payload;
}

void cli_ndjson_clear(cli_ndjson *s)
{
	brig_buf_free(&s->line);
}

int cli_ndjson_feed(const char *data, size_t len, void *payload)
{
	cli_ndjson *s = payload;
	while (len) {
		const char *nl = s->lines ? memchr(data, '\n', len) : NULL;
		size_t n = nl ? (size_t)(nl - data) : len;
		if (brig_buf_add(&s->line, data, n) != 0) {
			s->too_long = true;
			return BRIG_ETOOBIG;
		}
		data += n;
		len -= n;
		if (!nl)
			break;
		data++; /* the newline */
		len--;
		json_t *j = json_loadb(s->line.data ? s->line.data : "", s->line.len, 0, NULL);
		s->line.len = 0;
		if (!j)
			return BRIG_EPROTO;
		int rc = s->cb(j, s->payload);
		json_decref(j);
		if (rc) {
			s->stop = rc;
			return BRIG_ECANCELED;
		}
	}
	return 0;
}

static char *dup_field(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? xstrdup(s) : NULL;
}

brig_computer *cli_remote_computer(json_t *j)
{
	brig_computer *c = xcalloc(1, sizeof *c);
	c->name = dup_field(j, "name");
	c->id = dup_field(j, "id");
	c->ns = dup_field(j, "ns");
	c->agent = dup_field(j, "agent");
	c->session = dup_field(j, "session");
	json_int_t g = json_integer_value(json_object_get(j, "generation"));
	c->generation = g > 0 && g <= UINT32_MAX ? (uint32_t)g : 0;
	c->state = dup_field(j, "state");
	c->image = dup_field(j, "image");
	c->image_id = dup_field(j, "image_id");
	c->spec_hash = dup_field(j, "spec_hash");
	c->harness = dup_field(j, "harness");
	c->network = dup_field(j, "network");
	c->created = json_integer_value(json_object_get(j, "created"));
	c->adopted = json_is_true(json_object_get(j, "adopted"));
	json_t *spec = json_object_get(j, "spec");
	c->spec = json_is_object(spec) ? json_incref(spec) : NULL;
	json_t *ports = json_object_get(j, "ports");
	size_t n = json_array_size(ports);
	if (n) {
		c->ports = xcalloc(n, sizeof *c->ports);
		size_t i;
		json_t *p;
		json_array_foreach (ports, i, p) {
			const char *ip = json_string_value(json_object_get(p, "host_ip"));
			json_int_t hp = json_integer_value(json_object_get(p, "host_port"));
			json_int_t cp = json_integer_value(json_object_get(p, "port"));
			if (!ip || strlen(ip) >= sizeof c->ports[0].host_ip || hp < 1 || hp > 65535 || cp < 1 ||
			    cp > 65535)
				continue;
			brig_port *d = &c->ports[c->port_count++];
			memcpy(d->host_ip, ip, strlen(ip) + 1);
			d->host_port = (uint16_t)hp;
			d->port = (uint16_t)cp;
		}
	}
	return c;
}
