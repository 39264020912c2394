/* test_http.c — the bounded HTTP response parser (every body kind split at
 * every byte boundary, 101 stream heads, caps, malformed input) and DOCKER_HOST parsing. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

#define BIG_CAP (16u << 20)

/* ---- a driver that feeds one response in pieces ---- */

typedef struct run {
	brig_http_response resp;
	brig_buf cb_body; /* what body_cb saw */
	int rc;           /* last feed/finish result */
	size_t consumed;  /* bytes of the input that belonged to the response */
	bool fed_all;     /* every piece went to the parser */
	brig_error *err;
} run;

static int collect_cb(const char *data, size_t len, void *payload)
{
	brig_buf *b = payload;
	assert_true(len > 0);
	assert_int_equal(brig_buf_add(b, data, len), 0);
	return 0;
}

/* Feeds data cut at cuts[0..ncuts) (ascending offsets), then finish() when
 * the parser still wants more and eof says the peer closed. */
static void run_cuts(run *r, const char *data, size_t len, const size_t *cuts, size_t ncuts, bool head, size_t cap,
		     bool use_cb, bool eof)
{
	memset(r, 0, sizeof *r);
	brig_buf_init(&r->cb_body, BIG_CAP);
	brig_http_parser *p = brig_http_parser_new(&r->resp, head, cap, use_cb ? collect_cb : NULL, &r->cb_body);
	assert_false(brig_http_parser_started(p));
	size_t off = 0;
	r->rc = 0;
	for (size_t k = 0; k <= ncuts; k++) {
		size_t end = k < ncuts ? cuts[k] : len;
		assert_true(end >= off && end <= len);
		size_t used = 0;
		r->rc = brig_http_parser_feed(p, data + off, end - off, &used, &r->err);
		if (r->rc != 0) {
			if (r->rc == 1) {
				assert_true(used <= end - off);
				r->consumed = off + used;
			}
			r->fed_all = end == len;
			break;
		}
		assert_int_equal(used, end - off);
		off = end;
	}
	if (r->rc == 0) {
		r->fed_all = true;
		r->consumed = len;
		if (eof)
			r->rc = brig_http_parser_finish(p, &r->err);
	}
	brig_http_parser_free(p);
}

static void run_clear(run *r)
{
	brig_http_response_clear(&r->resp);
	brig_buf_free(&r->cb_body);
	brig_error_free(r->err);
	r->err = NULL;
}

typedef struct expect {
	int status;
	const char *body;
	size_t body_len;
	bool keep_alive;
	bool needs_eof;          /* read-until-close: only finish() completes it */
	const char *const *hdrs; /* name, value pairs (names in odd case), NULL-terminated */
} expect;

static void check_run(run *r, const expect *x, bool use_cb, size_t msg_len, const char *how)
{
	if (r->rc != 1)
		fail_msg("%s: parser returned %d (%s)", how, r->rc, brig_error_message(r->err));
	assert_int_equal(r->resp.status, x->status);
	assert_int_equal(r->consumed, msg_len);
	assert_int_equal(r->resp.keep_alive, x->keep_alive);
	assert_false(r->resp.upgraded);
	assert_int_equal(r->resp.stream_head_len, 0);
	const brig_buf *got = use_cb ? &r->cb_body : &r->resp.body;
	if (got->len != x->body_len || (x->body_len && memcmp(got->data, x->body, x->body_len) != 0))
		fail_msg("%s: body differs (%zu bytes, want %zu)", how, got->len, x->body_len);
	if (use_cb)
		assert_int_equal(r->resp.body.len, 0);
	for (const char *const *h = x->hdrs; h && *h; h += 2) {
		const char *v = brig_http_response_header(&r->resp, h[0]);
		if (!v || strcmp(v, h[1]) != 0)
			fail_msg("%s: header %s is '%s', want '%s'", how, h[0], v ? v : "(none)", h[1]);
	}
	assert_null(brig_http_response_header(&r->resp, "X-Not-There"));
}

/* The response must parse identically whole, split in two at every offset,
 * and byte by byte; collected and through body_cb. `extra` follows the
 * message in the same read (keep-alive junk) and must not be consumed. */
static void check_every_split(const char *msg, size_t msg_len, const char *extra, size_t extra_len, bool head,
			      const expect *x)
{
	size_t len = msg_len + extra_len;
	char *data = xmalloc(len + 1);
	memcpy(data, msg, msg_len);
	if (extra_len)
		memcpy(data + msg_len, extra, extra_len);
	size_t *bytes = xmalloc((len + 1) * sizeof *bytes);
	for (size_t i = 0; i < len; i++)
		bytes[i] = i + 1;
	char how[96];
	for (int use_cb = 0; use_cb < 2; use_cb++) {
		run r;
		run_cuts(&r, data, len, NULL, 0, head, BIG_CAP, use_cb, true);
		snprintf(how, sizeof how, "whole%s", use_cb ? " (cb)" : "");
		check_run(&r, x, use_cb, msg_len, how);
		run_clear(&r);

		for (size_t i = 0; i <= len; i++) {
			size_t cut = i;
			run_cuts(&r, data, len, &cut, 1, head, BIG_CAP, use_cb, true);
			snprintf(how, sizeof how, "split at %zu of %zu%s", i, len, use_cb ? " (cb)" : "");
			check_run(&r, x, use_cb, msg_len, how);
			run_clear(&r);
		}

		run_cuts(&r, data, len, bytes, len ? len - 1 : 0, head, BIG_CAP, use_cb, true);
		snprintf(how, sizeof how, "byte by byte%s", use_cb ? " (cb)" : "");
		check_run(&r, x, use_cb, msg_len, how);
		run_clear(&r);

		if (x->needs_eof) {
			/* Without the peer's close the body is never complete. */
			run_cuts(&r, data, len, NULL, 0, head, BIG_CAP, use_cb, false);
			assert_int_equal(r.rc, 0);
			run_clear(&r);
		}
	}
	free(bytes);
	free(data);
}

/* ---- body kinds ---- */

static void test_content_length(void **state)
{
	const char body[] = "{\"Id\":\"4fa6e0f0c678\",\"Warnings\":[]}";
	char msg[512];
	int n = snprintf(msg, sizeof msg,
			 "HTTP/1.1 201 Created\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\n"
			 "Docker-Experimental: false\r\nServer: Docker/24.0.7 (linux)\r\nContent-Length: %zu\r\n\r\n%s",
			 strlen(body), body);
	static const char *const hdrs[] = {
		"content-type", "application/json", "API-VERSION", "1.41", "Content-Length", "35", NULL};
	expect x = {.status = 201, .body = body, .body_len = strlen(body), .keep_alive = true, .hdrs = hdrs};
	check_every_split(msg, (size_t)n, NULL, 0, false, &x);
	/* Bytes after the answer in the same read are not this response's. */
	check_every_split(msg, (size_t)n, "HTTP/1.1 200 OK\r\n", 17, false, &x);
}

static void test_binary_content_length(void **state)
{
	char body[300];
	for (size_t i = 0; i < sizeof body; i++)
		body[i] = (char)(i * 7);
	char msg[512];
	int n = snprintf(msg, sizeof msg,
			 "HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nContent-Length: %zu\r\n\r\n",
			 sizeof body);
	memcpy(msg + n, body, sizeof body);
	expect x = {.status = 200, .body = body, .body_len = sizeof body, .keep_alive = true};
	check_every_split(msg, (size_t)n + sizeof body, NULL, 0, false, &x);
}

static void test_chunked(void **state)
{
	/* Chunk extensions (plain and quoted) and a trailer, as a proxy may
	 * send; the events stream and build progress arrive this way. */
	static const char msg[] = "HTTP/1.1 200 OK\r\n"
				  "Api-Version: 1.41\r\n"
				  "Content-Type: application/json\r\n"
				  "Transfer-Encoding: chunked\r\n"
				  "\r\n"
				  "1b;ext=1\r\n"
				  "{\"status\":\"start\",\"id\":\"a\"}\r\n"
				  "1\r\n"
				  "\n\r\n"
				  "A;name=\"quoted value\";flag\r\n"
				  "{\"x\":\"\r\n\"}\r\n"
				  "0\r\n"
				  "X-Trailer: done\r\n"
				  "\r\n";
	static const char body[] = "{\"status\":\"start\",\"id\":\"a\"}\n{\"x\":\"\r\n\"}";
	static const char *const hdrs[] = {"transfer-encoding", "chunked", "Content-type", "application/json", NULL};
	expect x = {.status = 200, .body = body, .body_len = sizeof body - 1, .keep_alive = true, .hdrs = hdrs};
	check_every_split(msg, sizeof msg - 1, NULL, 0, false, &x);
	check_every_split(msg, sizeof msg - 1, "HTTP/1.1 204 No Content\r\n\r\n", 27, false, &x);
}

static void test_read_until_close(void **state)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
				   "Connection: close\r\n\r\n";
	char body[200];
	for (size_t i = 0; i < sizeof body; i++)
		body[i] = (char)(255 - i); /* NULs and high bytes included */
	char msg[sizeof head + sizeof body];
	memcpy(msg, head, sizeof head - 1);
	memcpy(msg + sizeof head - 1, body, sizeof body);
	static const char *const hdrs[] = {"connection", "close", NULL};
	expect x = {.status = 200,
		    .body = body,
		    .body_len = sizeof body,
		    .keep_alive = false,
		    .needs_eof = true,
		    .hdrs = hdrs};
	check_every_split(msg, sizeof head - 1 + sizeof body, NULL, 0, false, &x);

	/* HTTP/1.0 without a length: the same, and an empty body is fine. */
	static const char m10[] = "HTTP/1.0 200 OK\r\nServer: old\r\n\r\n";
	expect x10 = {.status = 200, .body = "", .body_len = 0, .keep_alive = false, .needs_eof = true};
	check_every_split(m10, sizeof m10 - 1, NULL, 0, false, &x10);
}

static void test_head_with_length(void **state)
{
	/* HEAD /containers/x/archive: a Content-Length but no body follows. */
	static const char msg[] = "HTTP/1.1 200 OK\r\n"
				  "Content-Length: 10240\r\n"
				  "Content-Type: application/x-tar\r\n"
				  "X-Docker-Container-Path-Stat: eyJuYW1lIjoiZXRjIn0=\r\n"
				  "\r\n";
	static const char *const hdrs[] = {"x-docker-container-path-stat", "eyJuYW1lIjoiZXRjIn0=", NULL};
	expect x = {.status = 200, .body = "", .body_len = 0, .keep_alive = true, .hdrs = hdrs};
	check_every_split(msg, sizeof msg - 1, NULL, 0, true, &x);
	check_every_split(msg, sizeof msg - 1, "HTTP/1.1 200 OK\r\n", 17, true, &x);
}

static void test_no_content(void **state)
{
	static const char msg[] = "HTTP/1.1 204 No Content\r\nApi-Version: 1.41\r\n"
				  "Date: Mon, 04 Dec 2023 10:00:00 GMT\r\n\r\n";
	static const char *const hdrs[] = {"date", "Mon, 04 Dec 2023 10:00:00 GMT", NULL};
	expect x = {.status = 204, .body = "", .body_len = 0, .keep_alive = true, .hdrs = hdrs};
	check_every_split(msg, sizeof msg - 1, NULL, 0, false, &x);
	check_every_split(msg, sizeof msg - 1, "HTTP/1.1 200 OK\r\n", 17, false, &x);

	static const char m304[] = "HTTP/1.1 304 Not Modified\r\nApi-Version: 1.41\r\n\r\n";
	expect x304 = {.status = 304, .body = "", .body_len = 0, .keep_alive = true};
	check_every_split(m304, sizeof m304 - 1, NULL, 0, false, &x304);
}

static void test_empty_header_value(void **state)
{
	static const char msg[] = "HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Spaces:   padded  \r\nContent-Length: 0\r\n\r\n";
	static const char *const hdrs[] = {"x-empty", "", "x-spaces", "padded", NULL};
	expect x = {.status = 200, .body = "", .body_len = 0, .keep_alive = true, .hdrs = hdrs};
	check_every_split(msg, sizeof msg - 1, NULL, 0, false, &x);
}

/* ---- 101: the rest of the read is the stream's ---- */

static void test_upgrade_stream_head(void **state)
{
	static const char head[] = "HTTP/1.1 101 UPGRADED\r\n"
				   "Content-Type: application/vnd.docker.raw-stream\r\n"
				   "Connection: Upgrade\r\n"
				   "Upgrade: tcp\r\n"
				   "\r\n";
	static const char stream[] = "\x01\0\0\0\0\0\0\x05hello\x02\0\0\0\0\0\0\x03"
				     "err"
				     "HTTP/1.1 200 OK\r\n\r\n"; /* looks like HTTP: still stream bytes */
	size_t hl = sizeof head - 1, sl = sizeof stream - 1, len = hl + sl;
	char data[sizeof head + sizeof stream];
	memcpy(data, head, hl);
	memcpy(data + hl, stream, sl);

	for (size_t i = 0; i <= len; i++) {
		for (int use_cb = 0; use_cb < 2; use_cb++) {
			run r;
			size_t cut = i;
			run_cuts(&r, data, len, &cut, i == 0 ? 0 : 1, false, BIG_CAP, use_cb, false);
			if (r.rc != 1)
				fail_msg("split at %zu: %d (%s)", i, r.rc, brig_error_message(r.err));
			assert_int_equal(r.resp.status, 101);
			assert_true(r.resp.upgraded);
			assert_false(r.resp.keep_alive);
			assert_string_equal(brig_http_response_header(&r.resp, "upgrade"), "tcp");
			assert_int_equal(r.resp.body.len, 0);
			assert_int_equal(r.cb_body.len, 0);
			/* The read that completed the headers ended at `end`; the stream
			 * bytes of that read are the stream head, exactly. */
			size_t end = i >= hl && i > 0 ? i : len;
			assert_int_equal(r.consumed, end);
			assert_int_equal(r.resp.stream_head_len, end - hl);
			if (end > hl)
				assert_memory_equal(r.resp.stream_head, stream, end - hl);
			assert_int_equal(r.fed_all, end == len);
			run_clear(&r);
		}
	}

	/* Byte by byte: the headers complete on the last header byte, with
	 * nothing left over. */
	size_t bytes[sizeof data];
	for (size_t i = 0; i < len; i++)
		bytes[i] = i + 1;
	run r;
	run_cuts(&r, data, len, bytes, len - 1, false, BIG_CAP, false, false);
	assert_int_equal(r.rc, 1);
	assert_true(r.resp.upgraded);
	assert_int_equal(r.consumed, hl);
	assert_int_equal(r.resp.stream_head_len, 0);
	assert_null(r.resp.stream_head);
	run_clear(&r);
}

/* ---- caps ---- */

static void expect_error(const char *data, size_t len, bool head, size_t cap, bool use_cb, int code)
{
	/* whole, and in 1000-byte pieces (byte by byte is too slow for 64 KiB) */
	size_t *cuts = xmalloc((len / 1000 + 1) * sizeof *cuts);
	size_t ncuts = 0;
	for (size_t i = 1000; i < len; i += 1000)
		cuts[ncuts++] = i;
	for (int mode = 0; mode < 2; mode++) {
		run r;
		run_cuts(&r, data, len, cuts, mode ? ncuts : 0, head, cap, use_cb, true);
		if (r.rc != code)
			fail_msg("want %s, got %s (%s)", brig_error_name(code), brig_error_name(r.rc),
				 brig_error_message(r.err));
		assert_non_null(r.err);
		assert_true(strlen(brig_error_message(r.err)) > 0);
		assert_int_equal(r.err->code, code);
		run_clear(&r);
	}
	free(cuts);
}

static void test_oversized_headers(void **state)
{
	/* One header value over 64 KiB. */
	size_t vlen = BRIG_HTTP_MAX_HEADERS_BYTES + 10;
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	brig_buf_puts(&b, "HTTP/1.1 200 OK\r\nX-Big: ");
	for (size_t i = 0; i < vlen; i++)
		brig_buf_put(&b, "a", 1);
	brig_buf_puts(&b, "\r\nContent-Length: 0\r\n\r\n");
	expect_error(b.data, b.len, false, BIG_CAP, false, BRIG_ETOOBIG);
	brig_buf_free(&b);

	/* Many moderate headers adding up to more than 64 KiB. */
	brig_buf_init(&b, 1 << 20);
	brig_buf_puts(&b, "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i < 90; i++) {
		brig_buf_putf(&b, "X-H%d: ", i);
		for (int k = 0; k < 800; k++)
			brig_buf_put(&b, "v", 1);
		brig_buf_puts(&b, "\r\n");
	}
	brig_buf_puts(&b, "Content-Length: 0\r\n\r\n");
	expect_error(b.data, b.len, false, BIG_CAP, true, BRIG_ETOOBIG);
	brig_buf_free(&b);

	/* Headers just under the cap are accepted. */
	brig_buf_init(&b, 1 << 20);
	brig_buf_puts(&b, "HTTP/1.1 200 OK\r\nX-Big: ");
	for (int i = 0; i < 60000; i++)
		brig_buf_put(&b, "b", 1);
	brig_buf_puts(&b, "\r\nContent-Length: 2\r\n\r\nok");
	run r;
	run_cuts(&r, b.data, b.len, NULL, 0, false, BIG_CAP, false, true);
	assert_int_equal(r.rc, 1);
	assert_int_equal(strlen(brig_http_response_header(&r.resp, "x-big")), 60000);
	assert_string_equal(brig_buf_cstr(&r.resp.body), "ok");
	run_clear(&r);
	brig_buf_free(&b);
}

static void test_too_many_headers(void **state)
{
	for (int count = 100; count <= 101; count++) {
		brig_buf b;
		brig_buf_init(&b, 1 << 20);
		brig_buf_puts(&b, "HTTP/1.1 200 OK\r\n");
		for (int i = 0; i < count - 1; i++)
			brig_buf_putf(&b, "X-H%d: %d\r\n", i, i);
		brig_buf_puts(&b, "Content-Length: 0\r\n\r\n");
		if (count > BRIG_HTTP_MAX_HEADER_COUNT) {
			expect_error(b.data, b.len, false, BIG_CAP, false, BRIG_ETOOBIG);
		} else {
			run r;
			run_cuts(&r, b.data, b.len, NULL, 0, false, BIG_CAP, false, true);
			assert_int_equal(r.rc, 1);
			assert_int_equal(r.resp.nheaders, count);
			assert_string_equal(brig_http_response_header(&r.resp, "x-h98"), "98");
			run_clear(&r);
		}
		brig_buf_free(&b);
	}
}

static void test_body_over_cap(void **state)
{
	static const char cl[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
				 "0123456789012345678901234567890123456789012345678901234567890123456789"
				 "012345678901234567890123456789";
	expect_error(cl, sizeof cl - 1, false, 99, false, BRIG_ETOOBIG);
	static const char ch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				 "20\r\n01234567890123456789012345678901\r\n"
				 "20\r\n01234567890123456789012345678901\r\n0\r\n\r\n";
	expect_error(ch, sizeof ch - 1, false, 63, false, BRIG_ETOOBIG);
	static const char eof[] = "HTTP/1.1 200 OK\r\n\r\n0123456789";
	expect_error(eof, sizeof eof - 1, false, 9, false, BRIG_ETOOBIG);

	/* Exactly at the cap is fine. */
	run r;
	run_cuts(&r, cl, sizeof cl - 1, NULL, 0, false, 100, false, true);
	assert_int_equal(r.rc, 1);
	assert_int_equal(r.resp.body.len, 100);
	run_clear(&r);
	/* The cap bounds a collected body only; a streamed body has none. */
	run_cuts(&r, cl, sizeof cl - 1, NULL, 0, false, 10, true, true);
	assert_int_equal(r.rc, 1);
	assert_int_equal(r.cb_body.len, 100);
	run_clear(&r);
}

static int stop_cb(const char *data, size_t len, void *payload)
{
	int *calls = payload;
	(*calls)++;
	return *calls == 2 ? BRIG_ECANCELED : 0;
}

static int positive_cb(const char *data, size_t len, void *payload)
{
	return 7;
}

static void test_body_cb_stops(void **state)
{
	static const char ch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				 "3\r\nabc\r\n3\r\ndef\r\n3\r\nghi\r\n0\r\n\r\n";
	brig_http_response resp;
	int calls = 0;
	size_t used;
	brig_error *err = NULL;
	brig_http_parser *p = brig_http_parser_new(&resp, false, BIG_CAP, stop_cb, &calls);
	assert_int_equal(brig_http_parser_feed(p, ch, sizeof ch - 1, &used, &err), BRIG_ECANCELED);
	assert_int_equal(calls, 2);
	brig_http_parser_free(p);
	brig_http_response_clear(&resp);
	brig_error_free(err);

	/* A positive "stop" still stops, as a BRIG_E code. */
	err = NULL;
	p = brig_http_parser_new(&resp, false, BIG_CAP, positive_cb, NULL);
	assert_int_equal(brig_http_parser_feed(p, ch, sizeof ch - 1, &used, &err), BRIG_ECANCELED);
	brig_http_parser_free(p);
	brig_http_response_clear(&resp);
	brig_error_free(err);
}

/* ---- malformed answers ---- */

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"HTPT/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 OK\r\n\r\n",
		"HTTP/9.9.9 200 OK\r\n\r\n",
		"hello world\r\n\r\n",
		"\x01\0\0\0\0\0\0\x05hello",
		"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"HTTP/1.1 200 OK\r\nX(A): 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-No-Colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		run r;
		run_cuts(&r, bad[i], strlen(bad[i]), NULL, 0, false, BIG_CAP, false, true);
		if (r.rc != BRIG_EPROTO)
			fail_msg("case %zu: want BRIG_EPROTO, got %s", i, brig_error_name(r.rc));
		ASSERT_CONTAINS(brig_error_message(r.err), "malformed HTTP response");
		run_clear(&r);
	}
}

static void test_finish_before_complete(void **state)
{
	static const char full[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
				   "{\"Id\":\"ab\"}";
	static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
	/* The peer closing anywhere before the end is an error, never a
	 * truncated success. */
	const char *const msgs[] = {full, chunked};
	for (size_t m = 0; m < 2; m++) {
		size_t len = strlen(msgs[m]);
		for (size_t i = 0; i < len; i++) {
			run r;
			run_cuts(&r, msgs[m], i, NULL, 0, false, BIG_CAP, false, true);
			if (r.rc != BRIG_EPROTO)
				fail_msg("msg %zu cut at %zu: want BRIG_EPROTO, got %s", m, i, brig_error_name(r.rc));
			if (i == 0)
				ASSERT_CONTAINS(brig_error_message(r.err), "without answering");
			else
				ASSERT_CONTAINS(brig_error_message(r.err), "in the middle");
			run_clear(&r);
		}
	}

	/* started() says whether any byte came. */
	brig_http_response resp;
	brig_error *err = NULL;
	size_t used;
	brig_http_parser *p = brig_http_parser_new(&resp, false, BIG_CAP, NULL, NULL);
	assert_false(brig_http_parser_started(p));
	assert_int_equal(brig_http_parser_feed(p, "H", 1, &used, &err), 0);
	assert_true(brig_http_parser_started(p));
	brig_http_parser_free(p);
	brig_http_response_clear(&resp);

	/* A complete answer stays complete: more feeding and finish() are no-ops. */
	p = brig_http_parser_new(&resp, false, BIG_CAP, NULL, NULL);
	assert_int_equal(brig_http_parser_feed(p, full, sizeof full - 1, &used, &err), 1);
	assert_int_equal(brig_http_parser_feed(p, "junk", 4, &used, &err), 1);
	assert_int_equal(used, 0);
	assert_int_equal(brig_http_parser_finish(p, &err), 1);
	assert_null(err);
	brig_http_parser_free(p);
	brig_http_response_clear(&resp);
}

/* ---- DOCKER_HOST ---- */

static void test_endpoint_unix(void **state)
{
	brig_http_endpoint ep;
	brig_error *err = NULL;

	ASSERT_OK(brig_http_endpoint_parse(&ep, "unix:///x", false, NULL, &err), err);
	assert_true(ep.is_unix);
	assert_string_equal(ep.path, "/x");
	assert_false(ep.tls);
	brig_http_endpoint_clear(&ep);

	ASSERT_OK(brig_http_endpoint_parse(&ep, "/run/user/1000/docker.sock", true, "/certs", &err), err);
	assert_true(ep.is_unix);
	assert_string_equal(ep.path, "/run/user/1000/docker.sock");
	assert_false(ep.tls); /* TLS settings do not apply to a unix socket */
	brig_http_endpoint_clear(&ep);

	ASSERT_OK(brig_http_endpoint_parse(&ep, NULL, false, NULL, &err), err);
	assert_string_equal(ep.path, "/var/run/docker.sock");
	brig_http_endpoint_clear(&ep);
	ASSERT_OK(brig_http_endpoint_parse(&ep, "", false, NULL, &err), err);
	assert_string_equal(ep.path, "/var/run/docker.sock");
	brig_http_endpoint_clear(&ep);

	assert_int_equal(brig_http_endpoint_parse(&ep, "unix://", false, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "DOCKER_HOST");
	char longp[200] = "unix:///";
	memset(longp + 8, 'p', 150);
	longp[158] = '\0';
	assert_int_equal(brig_http_endpoint_parse(&ep, longp, false, NULL, &err), BRIG_EINVAL);
	assert_int_equal(err->code, BRIG_EINVAL);
	brig_http_endpoint_clear(&ep);
	brig_error_free(err);
}

static void test_endpoint_tcp(void **state)
{
	brig_http_endpoint ep;
	brig_error *err = NULL;

	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://h:2375", false, NULL, &err), err);
	assert_false(ep.is_unix);
	assert_string_equal(ep.host, "h");
	assert_int_equal(ep.port, 2375);
	assert_false(ep.tls);
	assert_null(ep.ca_file);
	brig_http_endpoint_clear(&ep);

	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://[::1]:2376", true, "/etc/docker/certs", &err), err);
	assert_string_equal(ep.host, "::1");
	assert_int_equal(ep.port, 2376);
	assert_true(ep.tls);
	assert_true(ep.tls_verify);
	assert_string_equal(ep.ca_file, "/etc/docker/certs/ca.pem");
	assert_string_equal(ep.cert_file, "/etc/docker/certs/cert.pem");
	assert_string_equal(ep.key_file, "/etc/docker/certs/key.pem");
	brig_http_endpoint_clear(&ep);

	/* Default ports: 2375 plain, 2376 with TLS (the Docker CLI's). */
	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://docker.example", false, NULL, &err), err);
	assert_int_equal(ep.port, 2375);
	brig_http_endpoint_clear(&ep);
	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://[fe80::1]", false, "/c", &err), err);
	assert_string_equal(ep.host, "fe80::1");
	assert_int_equal(ep.port, 2376);
	assert_true(ep.tls); /* a cert path alone means TLS without verification */
	assert_false(ep.tls_verify);
	assert_string_equal(ep.cert_file, "/c/cert.pem");
	brig_http_endpoint_clear(&ep);
	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://10.0.0.2:2375/", false, NULL, &err), err);
	assert_string_equal(ep.host, "10.0.0.2");
	assert_int_equal(ep.port, 2375);
	brig_http_endpoint_clear(&ep);

	/* TLS without a cert path: ~/.docker, as the Docker CLI does. */
	const char *old_home = getenv("HOME");
	char *saved = old_home ? xstrdup(old_home) : NULL;
	setenv("HOME", "/home/tester", 1);
	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://h:2376", true, NULL, &err), err);
	assert_string_equal(ep.ca_file, "/home/tester/.docker/ca.pem");
	assert_string_equal(ep.key_file, "/home/tester/.docker/key.pem");
	brig_http_endpoint_clear(&ep);
	ASSERT_OK(brig_http_endpoint_parse(&ep, "tcp://h:2376", true, "", &err), err);
	assert_string_equal(ep.cert_file, "/home/tester/.docker/cert.pem");
	brig_http_endpoint_clear(&ep);
	if (saved)
		setenv("HOME", saved, 1);
	else
		unsetenv("HOME");
	free(saved);
	assert_null(err);
}

static void test_endpoint_bad(void **state)
{
	static const char *const bad[] = {
		"tcp://h:0",
		"tcp://h:65536",
		"tcp://h:abc",
		"tcp://h:",
		"tcp://h:23x5",
		"tcp://:2375",
		"tcp://",
		"tcp://[::1:2375",
		"ssh://me@host",
		"http://h:2375",
		"npipe:////./pipe/docker_engine",
		"fd://",
		"h:2375",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		brig_http_endpoint ep;
		brig_error *err = NULL;
		int r = brig_http_endpoint_parse(&ep, bad[i], false, NULL, &err);
		if (r != BRIG_EINVAL)
			fail_msg("'%s': want BRIG_EINVAL, got %s", bad[i], brig_error_name(r));
		ASSERT_CONTAINS(brig_error_message(err), "DOCKER_HOST");
		/* Nothing is left allocated, and clearing twice is safe. */
		assert_null(ep.host);
		assert_null(ep.path);
		brig_http_endpoint_clear(&ep);
		brig_error_free(err);
	}
	brig_http_endpoint ep;
	brig_error *err = NULL;
	assert_int_equal(brig_http_endpoint_parse(&ep, "ssh://me@host", false, NULL, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "unix:///path or tcp://host:port");
	brig_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_binary_content_length),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_read_until_close),
		cmocka_unit_test(test_head_with_length),
		cmocka_unit_test(test_no_content),
		cmocka_unit_test(test_empty_header_value),
		cmocka_unit_test(test_upgrade_stream_head),
		cmocka_unit_test(test_oversized_headers),
		cmocka_unit_test(test_too_many_headers),
		cmocka_unit_test(test_body_over_cap),
		cmocka_unit_test(test_body_cb_stops),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_finish_before_complete),
		cmocka_unit_test(test_endpoint_unix),
		cmocka_unit_test(test_endpoint_tcp),
		cmocka_unit_test(test_endpoint_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
