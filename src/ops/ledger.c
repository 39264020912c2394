/* ledger.c — the egress ledger as JSON (ledger.h). */
#include "ops/ledger.h"

#include <string.h>

json_t *ops_ledger_row_json(const brig_store_egress *r)
{
	json_t *o = json_pack("{s:I, s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:I, s:I}", "id", (json_int_t)r->id,
			      "sandbox", r->sandbox, "host", r->host, "port", r->port, "decision", r->decision,
			      "reason", r->reason, "bytes_up", (json_int_t)r->bytes_up, "bytes_down",
			      (json_int_t)r->bytes_down, "start_ms", (json_int_t)r->start_ms, "duration_ms",
			      (json_int_t)r->duration_ms);
	if (o && r->ns)
		json_object_set_new(o, "session",
				    json_pack("{s:s, s:s, s:s}", "ns", r->ns, "agent", r->agent ? r->agent : "",
					      "session", r->session ? r->session : ""));
	return o;
}

static bool str_of(const json_t *j, const char *key, char **out)
{
	const char *v = json_string_value(json_object_get(j, key));
	*out = (char *)v; /* borrowed from j; brig_store_egress has no const */
	return v != NULL;
}

static bool int_of(const json_t *j, const char *key, int64_t *out)
{
	json_t *v = json_object_get(j, key);
	*out = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
	return json_is_integer(v);
}

bool ops_ledger_row_parse(const json_t *j, brig_store_egress *r)
{
	memset(r, 0, sizeof *r);
	int64_t port = 0;
	if (!json_is_object(j) || !int_of(j, "id", &r->id) || !str_of(j, "sandbox", &r->sandbox) ||
	    !str_of(j, "host", &r->host) || !int_of(j, "port", &port) || port < 0 || port > 65535 ||
	    !str_of(j, "decision", &r->decision) || !str_of(j, "reason", &r->reason) ||
	    !int_of(j, "bytes_up", &r->bytes_up) || !int_of(j, "bytes_down", &r->bytes_down) ||
	    !int_of(j, "start_ms", &r->start_ms) || !int_of(j, "duration_ms", &r->duration_ms))
		return false;
	r->port = (int)port;
	const json_t *s = json_object_get(j, "session");
	if (!s)
		return true;
	if (!str_of(s, "ns", &r->ns) || !str_of(s, "agent", &r->agent) || !str_of(s, "session", &r->session))
		return false;
	return true;
}
