/* test_frames.c — the stdout/stderr frame demultiplexer, the JSON-lines
 * splitter of events and build progress, and the base64 decoder of path stats. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

/* ---- frames ---- */

/* What the output callback saw: each stream's bytes, and the order of
 * stream switches ("12" = stdout then stderr). */
typedef struct seen {
	brig_buf out, err;
	char order[64];
	size_t norder;
	size_t calls;
	int stop_after; /* return BRIG_ECANCELED on this call (1-based); 0 never */
} seen;

static void seen_init(seen *s)
{
	memset(s, 0, sizeof *s);
	brig_buf_init(&s->out, 1 << 24);
	brig_buf_init(&s->err, 1 << 24);
}

static void seen_free(seen *s)
{
	brig_buf_free(&s->out);
	brig_buf_free(&s->err);
}

static int on_output(int stream, const char *data, size_t len, void *payload)
{
	seen *s = payload;
	assert_true(len > 0); /* zero-length frames produce no call */
	assert_true(stream == BRIG_STREAM_STDOUT || stream == BRIG_STREAM_STDERR);
	char c = (char)('0' + stream);
	if ((s->norder == 0 || s->order[s->norder - 1] != c) && s->norder < sizeof s->order - 1)
		s->order[s->norder++] = c;
	assert_int_equal(brig_buf_add(stream == BRIG_STREAM_STDOUT ? &s->out : &s->err, data, len), 0);
	s->calls++;
	if (s->stop_after && s->calls == (size_t)s->stop_after)
		return BRIG_ECANCELED;
	return 0;
}

static void add_frame(brig_buf *b, unsigned stream, const void *data, size_t len)
{
	unsigned char h[8] = {(unsigned char)stream,
			      0,
			      0,
			      0,
			      (unsigned char)(len >> 24),
			      (unsigned char)(len >> 16),
			      (unsigned char)(len >> 8),
			      (unsigned char)len};
	brig_buf_put(b, h, 8);
	brig_buf_put(b, data, len);
}

/* Feeds data cut at the given offsets; returns the first error or 0. */
static int demux_cuts(brig_frame_demux *d, const char *data, size_t len, const size_t *cuts, size_t ncuts, seen *s,
		      brig_error **err)
{
	size_t off = 0;
	for (size_t k = 0; k <= ncuts; k++) {
		size_t end = k < ncuts ? cuts[k] : len;
		int r = brig_frame_demux_feed(d, data + off, end - off, on_output, s, err);
		if (r)
			return r;
		off = end;
	}
	return 0;
}

static void check_stream(const brig_buf *stream, size_t max_frame, const char *want_out, size_t want_out_len,
			 const char *want_err, size_t want_err_len, const char *want_order)
{
	size_t len = stream->len;
	size_t *bytes = xmalloc((len + 1) * sizeof *bytes);
	for (size_t i = 0; i < len; i++)
		bytes[i] = i + 1;
	for (size_t i = 0; i <= len + 1; i++) {
		/* i <= len: split in two at i; i == len + 1: byte by byte */
		brig_frame_demux d;
		brig_frame_demux_init(&d, max_frame);
		seen s;
		seen_init(&s);
		brig_error *err = NULL;
		size_t cut = i;
		int r = i <= len ? demux_cuts(&d, stream->data, len, &cut, 1, &s, &err)
				 : demux_cuts(&d, stream->data, len, bytes, len - 1, &s, &err);
		if (r)
			fail_msg("split %zu: %s (%s)", i, brig_error_name(r), brig_error_message(err));
		assert_true(brig_frame_demux_clean(&d));
		assert_int_equal(s.out.len, want_out_len);
		assert_int_equal(s.err.len, want_err_len);
		if (want_out_len)
			assert_memory_equal(s.out.data, want_out, want_out_len);
		if (want_err_len)
			assert_memory_equal(s.err.data, want_err, want_err_len);
		s.order[s.norder] = '\0';
		assert_string_equal(s.order, want_order);
		seen_free(&s);
	}
	free(bytes);
}

static void test_frames_split_everywhere(void **state)
{
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	char bin[300];
	for (size_t i = 0; i < sizeof bin; i++)
		bin[i] = (char)i; /* NULs, 0x01/0x02 that look like headers */
	add_frame(&b, 1, "hello ", 6);
	add_frame(&b, 2, "oops\n", 5);
	add_frame(&b, 1, "world\n", 6);
	add_frame(&b, 1, bin, sizeof bin); /* length uses two bytes */
	add_frame(&b, 2, bin, 2);
	add_frame(&b, 0, "in", 2); /* stdin-tagged output goes to stdout (stdcopy) */

	char want_out[6 + 6 + sizeof bin + 2];
	memcpy(want_out, "hello world\n", 12);
	memcpy(want_out + 12, bin, sizeof bin);
	memcpy(want_out + 12 + sizeof bin, "in", 2);
	char want_err[7] = "oops\n";
	want_err[5] = 0;
	want_err[6] = 1;
	check_stream(&b, 0, want_out, sizeof want_out, want_err, 7, "12121");
	brig_buf_free(&b);
}

static void test_frames_zero_length(void **state)
{
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	add_frame(&b, 1, "", 0);
	add_frame(&b, 2, "", 0);
	check_stream(&b, 0, "", 0, "", 0, "");
	add_frame(&b, 1, "a", 1);
	add_frame(&b, 1, "", 0);
	add_frame(&b, 2, "b", 1);
	add_frame(&b, 2, "", 0);
	add_frame(&b, 1, "", 0);
	check_stream(&b, 0, "a", 1, "b", 1, "12");
	brig_buf_free(&b);
}

static void test_frames_large(void **state)
{
	/* A frame longer than 64 KiB (length in three bytes), at the cap. */
	size_t n = 70000;
	char *big = xmalloc(n);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)(i * 31);
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	add_frame(&b, 2, big, n);
	add_frame(&b, 1, "x", 1);
	brig_frame_demux d;
	brig_frame_demux_init(&d, n);
	seen s;
	seen_init(&s);
	brig_error *err = NULL;
	size_t cuts[] = {1, 8, 9, 4000, 65536, 70007, 70008, 70009};
	ASSERT_OK(demux_cuts(&d, b.data, b.len, cuts, sizeof cuts / sizeof *cuts, &s, &err), err);
	assert_true(brig_frame_demux_clean(&d));
	assert_int_equal(s.err.len, n);
	assert_memory_equal(s.err.data, big, n);
	assert_string_equal(brig_buf_cstr(&s.out), "x");
	seen_free(&s);
	brig_buf_free(&b);
	free(big);
}

static void test_frames_lying_length(void **state)
{
	const size_t max = 1024;
	unsigned char lies[][8] = {
		{1, 0, 0, 0, 0, 0, 4, 1},             /* max + 1 */
		{2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, /* 4 GiB */
		{1, 0, 0, 0, 0x80, 0, 0, 0},
	};
	for (size_t l = 0; l < sizeof lies / sizeof *lies; l++) {
		brig_buf b;
		brig_buf_init(&b, 1 << 20);
		add_frame(&b, 1, "before", 6);
		brig_buf_put(&b, lies[l], 8);
		for (int i = 0; i < 100; i++)
			brig_buf_put(&b, "PAYLOAD!", 8);
		for (size_t i = 0; i <= b.len; i++) {
			brig_frame_demux d;
			brig_frame_demux_init(&d, max);
			seen s;
			seen_init(&s);
			brig_error *err = NULL;
			size_t cut = i;
			int r = demux_cuts(&d, b.data, b.len, &cut, 1, &s, &err);
			assert_int_equal(r, BRIG_ETOOBIG);
			ASSERT_CONTAINS(brig_error_message(err), "exceeds");
			/* Not one byte of the lying frame was delivered. */
			assert_string_equal(brig_buf_cstr(&s.out), "before");
			assert_int_equal(s.err.len, 0);
			brig_error_free(err);
			seen_free(&s);
		}
		brig_buf_free(&b);
	}

	/* Exactly max is trusted. */
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	char *payload = xcalloc(1, max);
	add_frame(&b, 1, payload, max);
	check_stream(&b, max, payload, max, "", 0, "1");
	free(payload);
	brig_buf_free(&b);
}

static void test_frames_malformed_header(void **state)
{
	unsigned char bad[][8] = {
		{3, 0, 0, 0, 0, 0, 0, 1}, {0xff, 0, 0, 0, 0, 0, 0, 1}, {1, 1, 0, 0, 0, 0, 0, 1},
		{1, 0, 1, 0, 0, 0, 0, 1}, {2, 0, 0, 1, 0, 0, 0, 1},    {'H', 'T', 'T', 'P', '/', '1', '.', '1'},
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		brig_buf b;
		brig_buf_init(&b, 1 << 20);
		add_frame(&b, 2, "e", 1);
		brig_buf_put(&b, bad[k], 8);
		brig_buf_put(&b, "x", 1);
		for (size_t i = 0; i <= b.len; i++) {
			brig_frame_demux d;
			brig_frame_demux_init(&d, 0);
			seen s;
			seen_init(&s);
			brig_error *err = NULL;
			size_t cut = i;
			assert_int_equal(demux_cuts(&d, b.data, b.len, &cut, 1, &s, &err), BRIG_EPROTO);
			ASSERT_CONTAINS(brig_error_message(err), "malformed frame header");
			assert_string_equal(brig_buf_cstr(&s.err), "e");
			assert_int_equal(s.out.len, 0);
			brig_error_free(err);
			seen_free(&s);
		}
		brig_buf_free(&b);
	}
}

static void test_frames_clean(void **state)
{
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	add_frame(&b, 1, "abcdef", 6);
	for (size_t i = 0; i <= b.len; i++) {
		brig_frame_demux d;
		brig_frame_demux_init(&d, 0);
		seen s;
		seen_init(&s);
		brig_error *err = NULL;
		ASSERT_OK(brig_frame_demux_feed(&d, b.data, i, on_output, &s, &err), err);
		/* Clean only before the first header byte and after the last
		 * payload byte: a stream that ends elsewhere was cut. */
		assert_int_equal(brig_frame_demux_clean(&d), i == 0 || i == b.len);
		seen_free(&s);
	}
	brig_buf_free(&b);
}

static void test_frames_cb_stops(void **state)
{
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	add_frame(&b, 1, "one", 3);
	add_frame(&b, 2, "two", 3);
	add_frame(&b, 1, "three", 5);
	brig_frame_demux d;
	brig_frame_demux_init(&d, 0);
	seen s;
	seen_init(&s);
	s.stop_after = 2;
	brig_error *err = NULL;
	assert_int_equal(brig_frame_demux_feed(&d, b.data, b.len, on_output, &s, &err), BRIG_ECANCELED);
	assert_string_equal(brig_buf_cstr(&s.out), "one");
	assert_string_equal(brig_buf_cstr(&s.err), "two");
	/* A NULL callback just discards. */
	brig_frame_demux_init(&d, 0);
	ASSERT_OK(brig_frame_demux_feed(&d, b.data, b.len, NULL, NULL, &err), err);
	assert_true(brig_frame_demux_clean(&d));
	seen_free(&s);
	brig_buf_free(&b);
}

/* ---- JSON lines ---- */

typedef struct lines {
	brig_buf got; /* each object re-serialised, one per line */
	int count;
	int stop_at; /* return stop_value on this object (1-based) */
	int stop_value;
} lines;

static int on_line(json_t *obj, void *payload)
{
	lines *l = payload;
	char *s = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(s);
	brig_buf_puts(&l->got, s);
	brig_buf_puts(&l->got, "\n");
	free(s);
	l->count++;
	return l->count == l->stop_at ? l->stop_value : 0;
}

/* Feeds text cut at `cuts` then finishes; returns the first error. */
static int jsonl_cuts(const char *text, size_t len, const size_t *cuts, size_t ncuts, size_t max_line, lines *l,
		      brig_error **err)
{
	brig_jsonl j;
	brig_jsonl_init(&j, max_line, on_line, l, err);
	size_t off = 0;
	int r = 0;
	for (size_t k = 0; k <= ncuts && r == 0; k++) {
		size_t end = k < ncuts ? cuts[k] : len;
		r = brig_jsonl_feed(&j, text + off, end - off);
		off = end;
	}
	if (r == 0)
		r = brig_jsonl_finish(&j);
	else /* an error is sticky */
		assert_int_equal(brig_jsonl_feed(&j, "{}\n", 3), r);
	brig_jsonl_free(&j);
	return r;
}

/* Runs text whole, split in two at every offset, and byte by byte; each
 * must give `want` (re-serialised objects) and `want_rc`. */
static void check_jsonl(const char *text, size_t max_line, int stop_at, int stop_value, int want_rc, const char *want)
{
	size_t len = strlen(text);
	size_t *bytes = xmalloc((len + 1) * sizeof *bytes);
	for (size_t i = 0; i < len; i++)
		bytes[i] = i + 1;
	for (size_t i = 0; i <= len + 1; i++) {
		lines l = {.stop_at = stop_at, .stop_value = stop_value};
		brig_buf_init(&l.got, 1 << 20);
		brig_error *err = NULL;
		size_t cut = i;
		int r = i <= len ? jsonl_cuts(text, len, &cut, 1, max_line, &l, &err)
				 : jsonl_cuts(text, len, bytes, len ? len - 1 : 0, max_line, &l, &err);
		if (r != want_rc)
			fail_msg("split %zu: want %s, got %s (%s)", i, brig_error_name(want_rc), brig_error_name(r),
				 brig_error_message(err));
		if (strcmp(brig_buf_cstr(&l.got), want) != 0)
			fail_msg("split %zu: got objects\n%s\nwant\n%s", i, brig_buf_cstr(&l.got), want);
		if (want_rc == BRIG_ETOOBIG || want_rc == BRIG_EPROTO)
			assert_true(err && err->code == want_rc && strlen(err->message) > 0);
		brig_buf_free(&l.got);
		brig_error_free(err);
	}
	free(bytes);
}

static void test_jsonl_split_anywhere(void **state)
{
	/* As /events sends them, with CRLF, blank lines and spaces mixed in. */
	check_jsonl("{\"status\":\"start\",\"id\":\"abc\",\"Type\":\"container\",\"Action\":\"start\","
		    "\"Actor\":{\"ID\":\"abc\",\"Attributes\":{\"brig.test\":\"1\"}},\"time\":1700000000}\n"
		    "{\"Type\":\"container\",\"Action\":\"die\"}\r\n"
		    "\n"
		    "   \r\n"
		    "  {\"stream\":\"Step 1/2 : FROM scratch\\n\"}  \n"
		    "[1,2]\n"
		    "{\"aux\":{\"ID\":\"sha256:0123\"}}",
		    1 << 20, 0, 0, 0,
		    "{\"Action\":\"start\",\"Actor\":{\"Attributes\":{\"brig.test\":\"1\"},\"ID\":\"abc\"},"
		    "\"Type\":\"container\",\"id\":\"abc\",\"status\":\"start\",\"time\":1700000000}\n"
		    "{\"Action\":\"die\",\"Type\":\"container\"}\n"
		    "{\"stream\":\"Step 1/2 : FROM scratch\\n\"}\n"
		    "[1,2]\n"
		    "{\"aux\":{\"ID\":\"sha256:0123\"}}\n");
	check_jsonl("", 64, 0, 0, 0, "");
	check_jsonl("\n\r\n\n", 64, 0, 0, 0, "");
}

static void test_jsonl_too_long(void **state)
{
	/* max_line 40: a 41-byte line fails however it arrives — whole in one
	 * read or split — and the lines before it were delivered. */
	check_jsonl("{\"a\":1}\n{\"long\":\"012345678901234567890123456789\"}\n{\"b\":2}\n", 40, 0, 0, BRIG_ETOOBIG,
		    "{\"a\":1}\n");
	/* The last line, without a newline, too. */
	check_jsonl("{\"a\":1}\n{\"long\":\"012345678901234567890123456789\"}", 40, 0, 0, BRIG_ETOOBIG, "{\"a\":1}\n");
	/* 40 bytes is fine. */
	check_jsonl("{\"long\":\"01234567890123456789012345678\"}\n", 40, 0, 0, 0,
		    "{\"long\":\"01234567890123456789012345678\"}\n");
}

static void test_jsonl_not_json(void **state)
{
	check_jsonl("{\"a\":1}\nnot json\n{\"b\":2}\n", 64, 0, 0, BRIG_EPROTO, "{\"a\":1}\n");
	check_jsonl("{\"a\":1}\n{\"cut\":", 64, 0, 0, BRIG_EPROTO, "{\"a\":1}\n");
	check_jsonl("42\n", 64, 0, 0, BRIG_EPROTO, "");
	check_jsonl("{} {}\n", 64, 0, 0, BRIG_EPROTO, "");
}

static void test_jsonl_stop_value(void **state)
{
	/* The callback's value comes back unchanged; nothing after is parsed. */
	check_jsonl("{\"n\":1}\n{\"n\":2}\n{\"n\":3}\nnot json\n", 64, 2, 42, 42, "{\"n\":1}\n{\"n\":2}\n");
	check_jsonl("{\"n\":1}\n{\"n\":2}", 64, 2, BRIG_ECANCELED, BRIG_ECANCELED, "{\"n\":1}\n{\"n\":2}\n");
}

/* ---- base64 ---- */

static void expect_b64(const char *in, const char *want, size_t want_len)
{
	size_t n = 12345;
	char *out = brig_engine__b64decode(in, &n);
	if (!out)
		fail_msg("'%s' did not decode", in);
	assert_int_equal(n, want_len);
	assert_memory_equal(out, want, want_len);
	assert_int_equal(out[n], '\0');
	free(out);
}

static void test_b64decode(void **state)
{
	expect_b64("aGVsbG8=", "hello", 5);
	expect_b64("aGVsbG8", "hello", 5); /* unpadded */
	expect_b64("aGVsbA==", "hell", 4);
	expect_b64("aGVsbA", "hell", 4);
	expect_b64("aGVs", "hel", 3);
	expect_b64("", "", 0);
	expect_b64("AAEC/w==", "\0\1\2\377", 4);
	expect_b64("+/+/", "\373\377\277", 3);
	/* The X-Docker-Container-Path-Stat of /etc. */
	expect_b64("eyJuYW1lIjoiZXRjIiwic2l6ZSI6NDA5NiwibW9kZSI6MjE0NzQ4NDE0MSwibXRpbWUiOiIyMDIzLTExLTI0VDEw"
		   "OjAwOjAwWiIsImxpbmtUYXJnZXQiOiIifQ==",
		   "{\"name\":\"etc\",\"size\":4096,\"mode\":2147484141,\"mtime\":\"2023-11-24T10:00:00Z\","
		   "\"linkTarget\":\"\"}",
		   91);
	assert_null(brig_engine__b64decode("a", NULL));     /* one char cannot be base64 */
	assert_null(brig_engine__b64decode("aGVsb", NULL)); /* 5 chars: 4n+1 */
	assert_null(brig_engine__b64decode("!!!!", NULL));
	assert_null(brig_engine__b64decode("aGV*bG8=", NULL));
	char *out = brig_engine__b64decode("aGVsbG8=", NULL); /* out_len may be NULL */
	assert_string_equal(out, "hello");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames_split_everywhere),
		cmocka_unit_test(test_frames_zero_length),
		cmocka_unit_test(test_frames_large),
		cmocka_unit_test(test_frames_lying_length),
		cmocka_unit_test(test_frames_malformed_header),
		cmocka_unit_test(test_frames_clean),
		cmocka_unit_test(test_frames_cb_stops),
		cmocka_unit_test(test_jsonl_split_anywhere),
		cmocka_unit_test(test_jsonl_too_long),
		cmocka_unit_test(test_jsonl_not_json),
		cmocka_unit_test(test_jsonl_stop_value),
		cmocka_unit_test(test_b64decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
