/* fuzz_egress_monitor.c — libFuzzer target for the egress proxy's monitor:
 * what a worker (everything a sandbox's bytes touch, so maybe taken over)
 * asks of it. Each input line is a request frame's JSON, or "+XXXXXXXX"
 * for a connection the monitor accepted from that address (hex, network
 * order). No daemon and no store behind it: every answer must still be an
 * object, and a request must never name a connection it was not given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (n == 9 && p[0] == '+') {
			char hex[9];
			memcpy(hex, p + 1, 8);
			hex[8] = 0;
			uint32_t addr = (uint32_t)strtoul(hex, NULL, 16);
			if (brig_egress__mon_accepted(addr) == 0)
				abort();
		} else {
			json_t *req = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
			if (json_is_object(req)) {
				json_t *resp = brig_egress__mon_answer(req);
				if (!json_is_object(resp))
					abort();
				/* no daemon: nobody is known, so no rules and no secrets */
				if (json_object_get(resp, "secrets") || json_object_get(resp, "rules") ||
				    json_object_get(resp, "sandbox"))
					abort();
				json_decref(resp);
			}
			json_decref(req);
		}
		p += n + 1;
	}
	return 0;
}
