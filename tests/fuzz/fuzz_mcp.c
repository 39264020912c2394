/* fuzz_mcp.c — libFuzzer target for what an MCP client sends brig mcp: every
 * line goes through the server's request handling (JSON-RPC envelope,
 * methods, params, tool arguments) with no engine behind it, and every line
 * the server writes must be one JSON-RPC object. Also the base64 and UTF-8
 * helpers the file tools rest on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"
#include "util/util.h"

/* Each answer must be a JSON object with "jsonrpc":"2.0" and no newline. */
static int check_line(const char *line, size_t len, void *payload)
{
	(void)payload;
	if (memchr(line, '\n', len))
		abort();
	json_t *j = json_loadb(line, len, 0, NULL);
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "jsonrpc")))
		abort();
	json_decref(j);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mcp_server *srv;
	if (!srv) {
		mcp_config cfg = {
			.ns = "fuzz", .agent = "a", .session = "s", .write = check_line, .inline_calls = true};
		srv = mcp_server_new(&cfg);
	}
	const char *in = (const char *)data;

	/* 1. The whole input as one message, then line by line. */
	mcp_server_handle(srv, in, size);
	const char *p = in, *end = in + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (l)
			mcp_server_handle(srv, p, l);
		p += l + 1;
	}

	/* 2. Strings for JSON: always valid UTF-8 out. */
	json_t *s = ops_string(in, size);
	if (!s)
		abort();
	json_decref(s);

	/* 3. base64: what is encoded decodes back exactly; decoding anything
	 * never overruns. */
	char *enc = ops_b64encode(data, size);
	size_t n = 0;
	unsigned char *dec = ops_b64decode(enc, strlen(enc), &n);
	if (!dec || n != size || (size && memcmp(dec, data, size) != 0))
		abort();
	free(dec);
	free(enc);
	dec = ops_b64decode(in, size, &n);
	if (dec && n > size / 4 * 3)
		abort();
	free(dec);
	return 0;
}
