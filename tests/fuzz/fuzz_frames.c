/* fuzz_frames.c — libFuzzer target for the container output demultiplexer and
 * the JSON-lines splitter: each fed in pieces must match the same input fed whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

/* The first input byte picks the piece size (bits 0-3), the frame cap
 * (bits 4-5) and the JSON line cap (bits 6-7). */
static const size_t piece_sizes[16] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 64, 100, 255, 4096};
static const size_t frame_caps[4] = {1, 16, 100, 4096};
static const size_t line_caps[4] = {8, 64, 300, 4096};

/* ---- frames ---- */

typedef struct out {
	brig_buf bytes[3]; /* by stream */
	size_t max_frame;
} out;

static int on_output(int stream, const char *data, size_t len, void *payload)
{
	out *o = payload;
	if (len == 0 || (stream != BRIG_STREAM_STDOUT && stream != BRIG_STREAM_STDERR))
		abort();
	if (len > o->max_frame)
		abort(); /* a frame longer than the cap was trusted */
	if (brig_buf_add(&o->bytes[stream], data, len) < 0)
		abort();
	return 0;
}

static int demux(const char *in, size_t len, size_t piece, size_t max_frame, out *o, bool *clean)
{
	brig_frame_demux d;
	brig_frame_demux_init(&d, max_frame);
	brig_error *err = NULL;
	o->max_frame = max_frame;
	for (int i = 0; i < 3; i++)
		brig_buf_init(&o->bytes[i], 1u << 20);
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		rc = brig_frame_demux_feed(&d, in + off, n, on_output, o, &err);
	}
	if (rc && (!err || err->code != rc))
		abort();
	*clean = brig_frame_demux_clean(&d);
	brig_error_free(err);
	return rc;
}

static void out_free(out *o)
{
	for (int i = 0; i < 3; i++)
		brig_buf_free(&o->bytes[i]);
}

static bool same(const brig_buf *a, const brig_buf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* ---- JSON lines, walked the way events and build progress are ---- */

typedef struct walk {
	brig_buf log; /* what was seen, to compare the two feedings */
	int n;
} walk;

static int on_object(json_t *obj, void *payload)
{
	walk *w = payload;
	w->n++;
	/* events */
	const char *type = json_string_value(json_object_get(obj, "Type"));
	const char *action = json_string_value(json_object_get(obj, "Action"));
	json_t *attrs = json_object_get(json_object_get(obj, "Actor"), "Attributes");
	const char *key;
	json_t *v;
	if (json_is_object(attrs))
		json_object_foreach (attrs, key, v)
			(void)json_string_value(v);
	/* build / import progress */
	const char *error = json_string_value(json_object_get(obj, "error"));
	const char *id = json_string_value(json_object_get(json_object_get(obj, "aux"), "ID"));
	const char *line = json_string_value(json_object_get(obj, "stream"));
	if (!line)
		line = json_string_value(json_object_get(obj, "status"));
	char *dump = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	/* An input is far smaller than the log's cap: hitting it is a bug here. */
	brig_buf_putf(&w->log, "%d|%s|%s|%s|%s|%s|%s\n", w->n, type ? type : "", action ? action : "",
		      error ? error : "", id ? id : "", line ? line : "", dump ? dump : "");
	free(dump);
	/* a consumer that stops the stream: the value must come back */
	if (json_object_get(obj, "stop"))
		return 42;
	return 0;
}

static int jsonl(const char *in, size_t len, size_t piece, size_t max_line, walk *w)
{
	brig_error *err = NULL;
	brig_jsonl j;
	brig_buf_init(&w->log, 64u << 20);
	w->n = 0;
	brig_jsonl_init(&j, max_line, on_object, w, &err);
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		rc = brig_jsonl_feed(&j, in + off, n);
	}
	if (rc == 0)
		rc = brig_jsonl_finish(&j);
	else if (brig_jsonl_feed(&j, "{}\n", 3) != rc)
		abort(); /* errors are sticky */
	if (rc != 0 && rc != 42 && rc != BRIG_ETOOBIG && rc != BRIG_EPROTO)
		abort();
	if ((rc == BRIG_ETOOBIG || rc == BRIG_EPROTO) && (!err || err->code != rc))
		abort();
	brig_jsonl_free(&j);
	brig_error_free(err);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	size_t piece = piece_sizes[ctl & 0x0f];
	size_t max_frame = frame_caps[(ctl >> 4) & 3];
	size_t max_line = line_caps[(ctl >> 6) & 3];

	/* However the stream is split, the same bytes come out on the same
	 * streams, and the same error (at the same place) stops it. */
	out a, b;
	bool clean_a, clean_b;
	int ra = demux(in, len, piece, max_frame, &a, &clean_a);
	int rb = demux(in, len, len ? len : 1, max_frame, &b, &clean_b);
	if (ra != rb || (ra == 0 && clean_a != clean_b))
		abort();
	if (!same(&a.bytes[1], &b.bytes[1]) || !same(&a.bytes[2], &b.bytes[2]) || a.bytes[0].len)
		abort();
	out_free(&a);
	out_free(&b);

	walk wa, wb;
	ra = jsonl(in, len, piece, max_line, &wa);
	rb = jsonl(in, len, len ? len : 1, max_line, &wb);
	if (ra != rb || !same(&wa.log, &wb.log))
		abort();
	brig_buf_free(&wa.log);
	brig_buf_free(&wb.log);
	return 0;
}
