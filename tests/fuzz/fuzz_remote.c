/* fuzz_remote.c — libFuzzer target for what the CLI reads from a brig
 * server (src/cli/remote_parse.c): the NDJSON exec stream fed in pieces,
 * and every line read as a computer and written back. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote_parse.h"

static int on_line(json_t *line, void *payload)
{
	size_t *count = payload;
	brig_computer *c = cli_remote_computer(line);
	if (c->port_count > json_array_size(json_object_get(line, "ports")))
		abort();
	json_decref(brig_computer_to_json(c));
	brig_computer_free(c);
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
	return 0;
}
