/* fuzz_remote.c — libFuzzer target for what the CLI reads from a brig
 * server (src/cli/remote_parse.c): the NDJSON exec stream fed in pieces,
 * and every line read as a computer and written back, and as each of the
 * store's records the CLI prints; the input after its first byte as a
 * ledger row (ops/ledger.c). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote_parse.h"
#include "ops/ledger.h"

static int on_line(json_t *line, void *payload)
{
	size_t *count = payload;
	brig_computer *c = cli_remote_computer(line);
	if (c->port_count > json_array_size(json_object_get(line, "ports")))
		abort();
	json_decref(brig_computer_to_json(c));
	brig_computer_free(c);
	/* the printers take these strings as given: never NULL */
	brig_store_session *rs = calloc(1, sizeof *rs);
	brig_store_checkpoint *ck = calloc(2, sizeof *ck);
	brig_store_audit *au = calloc(1, sizeof *au);
	if (!rs || !ck || !au)
		abort();
	cli_remote_session_parse(rs, line);
	cli_remote_checkpoint_parse(&ck[0], line, "ns", "agent", "session");
	cli_remote_forgotten_parse(&ck[1], line);
	cli_remote_audit_parse(au, line, "ns", "agent", "session");
	if (!rs->ns || !rs->agent || !rs->session || !ck[0].digest || !ck[1].ns || !ck[1].digest || !au->argv_json)
		abort();
	json_t *argv = json_loads(au->argv_json, 0, NULL);
	if (!json_is_array(argv))
		abort();
	json_decref(argv);
	(void)brig_store_state_to_string(rs->state);
	brig_store_session_free_array(rs, 1);
	brig_store_checkpoint_free_array(ck, 2);
	brig_store_audit_free_array(au, 1);
	return ++*count > 1000; /* a callback may stop the stream */
}

/* First byte: the piece size the stream is fed in (1..256). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = (size_t)data[0] + 1, count = 0;
	cli_ndjson s;
	cli_ndjson_init(&s, on_line, &count);
	s.lines = true;
	const char *p = (const char *)data + 1;
	size_t left = size - 1;
	while (left) {
		size_t n = left < piece ? left : piece;
		int rc = cli_ndjson_feed(p, n, &s);
		if (rc == BRIG_ECANCELED && !s.stop)
			abort();
		if (rc)
			break;
		p += n;
		left -= n;
	}
	if (s.line.len > CLI_NDJSON_LINE_CAP)
		abort();
	cli_ndjson_clear(&s);
	/* the rest as a ledger row of GET /v1/egress/log */
	json_t *j = json_loadb((const char *)data + 1, size - 1, 0, NULL);
	brig_store_egress row;
	if (j && ops_ledger_row_parse(j, &row) &&
	    (row.port < 0 || row.port > 65535 || !row.sandbox || !row.host || !!row.ns != !!row.session))
		abort();
	json_decref(j);
	return 0;
}
