/* fuzz_http.c — libFuzzer target for the HTTP response parser: the daemon's
 * bytes fed in pieces, collected or streamed, as a GET or a HEAD answer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

/* The first input byte picks how the rest is fed:
 *   bits 0-3  piece size (1 byte … the whole input)
 *   bit 4     answer to a HEAD request
 *   bit 5     body to a callback instead of collected
 *   bit 6     small body cap (64 bytes) — or, with bit 5, the callback
 *             stops after 64 bytes
 *   bit 7     tell the parser the peer closed once all bytes are fed */
static const size_t piece_sizes[16] = {1, 2, 3, 5, 7, 8, 13, 16, 31, 64, 100, 127, 256, 1000, 4096, SIZE_MAX};

typedef struct sink {
	size_t got;
	size_t stop_after; /* 0: never */
} sink;

static int body_cb(const char *data, size_t len, void *payload)
{
	sink *s = payload;
	if (len == 0)
		abort(); /* the parser never hands out empty pieces */
	s->got += len;
	if (s->stop_after && s->got > s->stop_after)
		return BRIG_ECANCELED;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	size_t piece = piece_sizes[ctl & 0x0f];
	bool head = ctl & 0x10;
	bool use_cb = ctl & 0x20;
	bool small = ctl & 0x40;
	bool eof = ctl & 0x80;
	size_t cap = small && !use_cb ? 64 : 1u << 20;
	sink s = {.stop_after = small && use_cb ? 64 : 0};

	brig_http_response resp;
	brig_error *err = NULL;
	brig_http_parser *p = brig_http_parser_new(&resp, head, cap, use_cb ? body_cb : NULL, &s);
	int rc = 0;
	size_t off = 0, consumed = 0;
	while (off < len) {
		size_t n = len - off < piece ? len - off : piece;
		size_t used = 0;
		rc = brig_http_parser_feed(p, in + off, n, &used, &err);
		if (used > n)
			abort();
		if (rc == 1) {
			consumed = off + used;
			break;
		}
		if (rc != 0)
			break;
		if (used != n)
			abort(); /* "need more" consumed everything */
		off += n;
	}
	if (rc == 0 && eof)
		rc = brig_http_parser_finish(p, &err);

	if (rc == 1) {
		/* What the connection relies on after a complete answer. */
		if (consumed > len || resp.status < 0 || resp.status > 999)
			abort();
		if (resp.nheaders > BRIG_HTTP_MAX_HEADER_COUNT)
			abort();
		if (resp.upgraded && (resp.keep_alive || resp.status != 101))
			abort();
		if (!resp.upgraded && resp.stream_head_len)
			abort();
		if (resp.stream_head_len > len)
			abort();
		/* Only a 2xx body streams to the callback; an error answer's body
		 * is collected (capped) for the error message. */
		bool streamed = use_cb && resp.status >= 200 && resp.status < 300;
		if (streamed ? resp.body.len != 0 : resp.body.len > cap)
			abort();
		if (head && (resp.body.len || s.got))
			abort(); /* a HEAD answer has no body, whatever it claims */
		for (size_t i = 0; i < resp.nheaders; i++)
			if (!resp.headers[i].name || !resp.headers[i].value)
				abort();
		brig_http_response_header(&resp, "Content-Type");
		brig_http_response_header(&resp, "X-Docker-Container-Path-Stat");
	} else if (rc < 0) {
		if (rc != BRIG_EPROTO && rc != BRIG_ETOOBIG && rc != BRIG_ECANCELED)
			abort();
		if (rc != BRIG_ECANCELED && !err)
			abort(); /* the parser's own errors carry a message */
	}
	brig_http_parser_free(p);
	brig_http_response_clear(&resp);
	brig_error_free(err);
	return 0;
}
