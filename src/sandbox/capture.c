/* capture.c — bounded capture of command output (keeps the head and the
 * tail, counts what was dropped) and the result objects' JSON forms. */
#include <string.h>

#include "sandbox/capture.h"

void brig_capturer_init(brig_capturer *c, size_t max)
{
	memset(c, 0, sizeof *c);
	if (!max)
		max = 1u << 20;
	c->half = max / 2 ? max / 2 : 1;
	brig_buf_init(&c->head, c->half);
}

void brig_capturer_add(brig_capturer *c, const char *data, size_t len)
{
	c->total += len;
	size_t room = c->half - c->head.len;
	if (room) {
		size_t k = len < room ? len : room;
		/* k is at most the room under the head's cap, so this cannot
		 * fail; if it did, the bytes would go to the tail instead. */
		if (brig_buf_add(&c->head, data, k) < 0)
			k = 0;
		data += k;
		len -= k;
	}
	if (!len)
		return;
	if (!c->ring)
		c->ring = xmalloc(c->half);
	if (len >= c->half) { /* only the last `half` bytes can survive */
		data += len - c->half;
		len = c->half;
	}
	while (len) {
		size_t k = c->half - c->ring_pos;
		if (k > len)
			k = len;
		memcpy(c->ring + c->ring_pos, data, k);
		c->ring_pos = (c->ring_pos + k) % c->half;
		c->ring_len = c->ring_len + k > c->half ? c->half : c->ring_len + k;
		data += k;
		len -= k;
	}
}

void brig_capturer_finish(brig_capturer *c, brig_capture *out)
{
	/* The size is known exactly: one allocation, head then the ring in order. */
	size_t len = c->head.len + c->ring_len;
	char *all = xmalloc(len + 1), *o = all;
	if (c->head.len)
		memcpy(o, c->head.data, c->head.len);
	o += c->head.len;
	if (c->ring_len) {
		size_t start = c->ring_len < c->half ? 0 : c->ring_pos;
		size_t first = c->ring_len < c->half ? c->ring_len : c->half - start;
		memcpy(o, c->ring + start, first);
		o += first;
		if (c->ring_len == c->half && start) {
			memcpy(o, c->ring, start);
			o += start;
		}
	}
	*o = '\0';
	out->total = c->total;
	out->data = all;
	out->len = (size_t)(o - all);
	out->dropped = c->total - out->len;
	brig_capturer_free(c);
}

void brig_capturer_free(brig_capturer *c)
{
	brig_buf_free(&c->head);
	free(c->ring);
	c->ring = NULL;
}

void brig_output_tee_init(brig_output_tee *t, size_t max, brig_engine_output_cb user, void *payload)
{
	brig_capturer_init(&t->out, max);
	brig_capturer_init(&t->err, max);
	t->user = user;
	t->user_payload = payload;
}

int brig_output_tee_cb(int stream, const char *data, size_t len, void *payload)
{
	brig_output_tee *t = payload;
	brig_capturer_add(stream == BRIG_STREAM_STDERR ? &t->err : &t->out, data, len);
	return t->user ? t->user(stream, data, len, t->user_payload) : 0;
}

void brig_output_tee_finish(brig_output_tee *t, brig_exec_result *res)
{
	brig_capturer_finish(&t->out, &res->out);
	brig_capturer_finish(&t->err, &res->err);
}

void brig_exec_result_clear(brig_exec_result *r)
{
	if (!r)
		return;
	free(r->out.data);
	free(r->err.data);
	memset(r, 0, sizeof *r);
}

static json_t *capture_json(const brig_capture *c)
{
	/* Output is arbitrary bytes: invalid UTF-8 is replaced so the JSON stays
	 * valid (jansson refuses invalid strings). */
	json_t *text = json_stringn(c->data ? c->data : "", c->len);
	if (!text) {
		char *copy = xmalloc(c->len + 1);
		for (size_t i = 0; i < c->len; i++)
			copy[i] = (unsigned char)c->data[i] < 0x80 ? c->data[i] : '?';
		text = json_stringn(copy, c->len);
		free(copy);
	}
	return json_pack("{s:o, s:I, s:I}", "text", text, "bytes", (json_int_t)c->total, "dropped",
			 (json_int_t)c->dropped);
}

json_t *brig_exec_result_to_json(const brig_exec_result *r)
{
	return json_pack("{s:i, s:b, s:b, s:b, s:b, s:I, s:o, s:o}", "exit_code", r->exit_code, "timed_out",
			 r->timed_out, "canceled", r->canceled, "uncertain", r->uncertain, "container_stopped",
			 r->container_stopped, "duration_ms", (json_int_t)r->duration_ms, "stdout",
			 capture_json(&r->out), "stderr", capture_json(&r->err));
}
