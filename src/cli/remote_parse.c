/* remote_parse.c — see remote_parse.h. */
#include "cli/remote_parse.h"

#include <stdint.h>
#include <stdlib.h>
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

/* ---- the store's records ---- */

/* A string the printers need: "" when absent. */
static char *need_field(json_t *j, const char *key)
{
	char *s = dup_field(j, key);
	return s ? s : xstrdup("");
}

static int64_t int_field(json_t *j, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(j, key));
}

void cli_remote_session_parse(brig_store_session *out, json_t *j)
{
	memset(out, 0, sizeof *out);
	out->ns = need_field(j, "ns");
	out->agent = need_field(j, "agent");
	out->session = need_field(j, "session");
	out->generation = int_field(j, "generation");
	/* a state this brig does not know prints as "unknown" */
	out->state = (brig_store_state)-1;
	(void)brig_store_state_from_string(&out->state, json_string_value(json_object_get(j, "state")), NULL);
	out->container_name = dup_field(j, "container");
	out->container_id = dup_field(j, "container_id");
	out->revision = int_field(j, "revision");
	out->created_ms = int_field(j, "created_ms");
	out->updated_ms = int_field(j, "updated_ms");
}

void cli_remote_checkpoint_parse(brig_store_checkpoint *out, json_t *j, const char *ns, const char *agent,
				 const char *session)
{
	memset(out, 0, sizeof *out);
	out->id = int_field(j, "id");
	out->ns = xstrdup(ns);
	out->agent = xstrdup(agent);
	out->session = xstrdup(session);
	out->generation = int_field(j, "generation");
	out->digest = need_field(j, "digest");
	out->blob = dup_field(j, "blob");
	out->bytes_raw = int_field(j, "bytes_raw");
	out->bytes_stored = int_field(j, "bytes_stored");
	out->created_ms = int_field(j, "created_ms");
	out->blob_refs = -1;
	out->count = -1;
}

void cli_remote_forgotten_parse(brig_store_checkpoint *out, json_t *j)
{
	memset(out, 0, sizeof *out);
	out->id = int_field(j, "latest_checkpoint");
	out->ns = need_field(j, "ns");
	out->agent = need_field(j, "agent");
	out->session = need_field(j, "session");
	out->generation = int_field(j, "generation");
	out->digest = xstrdup("");
	out->created_ms = int_field(j, "updated_ms");
	out->blob_refs = -1;
	out->count = int_field(j, "checkpoints");
}

void cli_remote_audit_parse(brig_store_audit *out, json_t *j, const char *ns, const char *agent, const char *session)
{
	memset(out, 0, sizeof *out);
	out->id = int_field(j, "id");
	out->ns = xstrdup(ns);
	out->agent = xstrdup(agent);
	out->session = xstrdup(session);
	out->generation = int_field(j, "generation");
	json_t *argv = json_object_get(j, "argv");
	out->argv_json = json_is_array(argv) ? json_dumps(argv, JSON_COMPACT) : NULL;
	if (!out->argv_json)
		out->argv_json = xstrdup("[]");
	json_int_t code = json_integer_value(json_object_get(j, "exit_code"));
	out->exit_code = code >= INT32_MIN && code <= INT32_MAX ? (int)code : -1;
	out->timed_out = json_is_true(json_object_get(j, "timed_out"));
	out->outcome = dup_field(j, "outcome");
	if (out->outcome && !*out->outcome) { /* the server's "" for none */
		free(out->outcome);
		out->outcome = NULL;
	}
	out->duration_ms = int_field(j, "duration_ms");
	out->stdout_bytes = int_field(j, "stdout_bytes");
	out->stderr_bytes = int_field(j, "stderr_bytes");
	out->created_ms = int_field(j, "created_ms");
	out->actor = dup_field(j, "actor");
}
