/* fuzz_egress_bump.c — libFuzzer target for the egress proxy's request
 * stream inside a TLS tunnel it terminates (src/egress/rewrite.c): the
 * input (after one byte choosing the piece size) is fed in pieces, as
 * TLS records arrive, and what goes upstream must stay bounded (a value
 * goes only into the headers secrets are bound to); the same bytes as an
 * upstream's answer through the value scanner (rewrite.c too). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_internal.h"
#include "util/util.h"

#define PH "brig-placeholder-0123456789abcdef0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)data[0] + 1;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	static const char *const from[] = {PH};
	static const char *const to[] = {"sk-value"};
	static brig_egress_rw rw;
	brig_egress__rw_init(&rw, "api.example.com", 443, from, to, 1);
	brig_buf out;
	brig_buf_init(&out, 1 << 20);
	const char *why = NULL;
	size_t fed = 0;
	for (size_t off = 0; off < len; off += step) {
		size_t n = len - off < step ? len - off : step;
		size_t before = out.len;
		if (brig_egress__rw_feed(&rw, in + off, n, &out, &why) != 0) {
			if (!why)
				abort();
			break;
		}
		fed += n;
		/* a piece grows by at most the replacements' growth plus a head */
		if (out.len - before > n + BRIG_EGRESS_OUT_HEAD_MAX)
			abort();
		brig_buf_reset(&out);
	}
	if (rw.head_len > sizeof rw.head || rw.line_len > sizeof rw.line || fed > len)
		abort();
	/* The same bytes as an upstream's answer: what reaches the sandbox is
	 * what came, in order, never holding a value. */
	static const char *const values[] = {"sk-value", "sksksk"};
	brig_egress_scan sc;
	brig_egress__scan_init(&sc, values, 2);
	brig_buf_reset(&out);
	bool cut = false;
	for (size_t off = 0; off < len && !cut; off += step)
		cut = brig_egress__scan_feed(&sc, in + off, len - off < step ? len - off : step, &out) != 0;
	if (!cut && brig_egress__scan_flush(&sc, &out) != 0)
		abort();
	if (out.len > len || (!cut && (out.len != len || memcmp(out.data, in, len) != 0)) ||
	    (out.len && (memmem(out.data, out.len, "sk-value", 8) || memmem(out.data, out.len, "sksksk", 6))))
		abort();
	brig_egress__scan_free(&sc);
	brig_buf_free(&out);
	return 0;
}
