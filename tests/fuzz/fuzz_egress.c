/* fuzz_egress.c — libFuzzer target for the egress proxy's parsers of
 * sandbox bytes: the request head and the TLS ClientHello's server name,
 * each fed the whole input and every shorter prefix (as the proxy reads). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *in = data + 1;
	size_t len = size - 1;
	if (data[0] & 1) {
		char name[256];
		int last = 1;
		for (size_t n = len > 64 ? len - 64 : 0; n <= len; n++) {
			int rc = brig_egress__sni(name, sizeof name, in, n);
			if (rc < -3 || rc > 1)
				abort();
			if (rc == 0 && (strlen(name) == 0 || strlen(name) > 253))
				abort();
			last = rc;
		}
		(void)last;
	} else {
		brig_egress_req req;
		const char *why = NULL;
		for (size_t n = len > 64 ? len - 64 : 0; n <= len; n++) {
			int rc = brig_egress__parse_head(&req, (const char *)in, n, &why);
			if (rc < -1 || rc > 1)
				abort();
			if (rc == -1 && !why)
				abort();
			if (rc == 0) {
				if (req.head_len > n || req.port < 1 || req.port > 65535 || !req.host[0])
					abort();
				if (req.target_off + req.target_len > req.head_len || req.headers_off > req.head_len)
					abort();
			}
		}
	}
	return 0;
}
