/* fuzz_attach.c — libFuzzer target for the exec attach stream's frame
 * decoder (src/serve/frames.c), as the server reads a client's frames and the
 * CLI reads the server's: fed in pieces, it must see what it sees fed whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/frames.h"
#include "util/util.h"

/* The first input byte picks the piece size (bits 0-3) and the side
 * (bit 4: the server's mask, else the client's). */
static const size_t piece_sizes[16] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 64, 100, 255, 4096};

typedef struct seen {
	brig_buf log; /* what was seen: piece-independent (see on_frame) */
	int last;     /* the data type logged last (-1: a control frame) */
	int stop_after;
	int calls;
} seen;

static int on_frame(unsigned type, const char *data, size_t len, void *payload)
{
	seen *s = payload;
	bool is_data = type == SERVE_FRAME_STDIN || type == SERVE_FRAME_STDOUT || type == SERVE_FRAME_STDERR ||
		       type == SERVE_FRAME_TAR;
	if (type > SERVE_FRAME_TAR_END)
		abort();
	if (is_data && (len == 0 || len > SERVE_FRAME_DATA_MAX))
		abort(); /* an empty piece, or a frame longer than its cap trusted */
	if ((type == SERVE_FRAME_EOF || type == SERVE_FRAME_TAR_END) && len != 0)
		abort();
	if (type == SERVE_FRAME_RESIZE) {
		int rows, cols;
		if (len != 4)
			abort();
		serve_frame_resize_get(data, &rows, &cols);
		if (rows < 1 || cols < 1 || rows > SERVE_FRAME_TTY_MAX || cols > SERVE_FRAME_TTY_MAX)
			abort();
	}
	if (!is_data && data[len] != 0)
		abort(); /* control frames come NUL-terminated */
	unsigned char t = (unsigned char)type;
	if (is_data) {
		/* pieces of data depend on the feeding: a marker only when the
		 * type changes, then the bytes */
		if (s->last != (int)type)
			brig_buf_put(&s->log, &t, 1);
		s->last = (int)type;
		brig_buf_put(&s->log, data, len);
		return 0;
	}
	uint32_t n = (uint32_t)len;
	t |= 0x80;
	brig_buf_put(&s->log, &t, 1);
	brig_buf_put(&s->log, &n, sizeof n);
	brig_buf_put(&s->log, data, len);
	s->last = -1;
	return ++s->calls == s->stop_after ? 7 : 0;
}

static int run(const char *in, size_t len, size_t piece, unsigned mask, seen *s, bool *clean)
{
	serve_frame_dec d;
	serve_frame_dec_init(&d, mask);
	brig_buf_init(&s->log, 64u << 20);
	s->last = -1;
	brig_error *err = NULL;
	int rc = 0;
	for (size_t off = 0; off < len && rc == 0; off += piece) {
		size_t n = len - off < piece ? len - off : piece;
		rc = serve_frame_feed(&d, in + off, n, on_frame, s, &err);
	}
	if (rc != 0 && rc != 7 && rc != BRIG_EPROTO && rc != BRIG_ETOOBIG)
		abort();
	if ((rc == BRIG_EPROTO || rc == BRIG_ETOOBIG) && (!err || err->code != rc))
		abort();
	*clean = serve_frame_dec_clean(&d);
	brig_error_free(err);
	serve_frame_dec_clear(&d);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = piece_sizes[data[0] & 15];
	/* with a run's tar frames (6, and 7 from the client) */
	unsigned mask = (data[0] & 16) ? (1u << SERVE_FRAME_STDOUT | 1u << SERVE_FRAME_STDERR | 1u << SERVE_FRAME_END |
					  1u << SERVE_FRAME_TAR)
				       : (1u << SERVE_FRAME_STDIN | 1u << SERVE_FRAME_EOF | 1u << SERVE_FRAME_RESIZE |
					  1u << SERVE_FRAME_TAR | 1u << SERVE_FRAME_TAR_END);
	int stop_after = (data[0] >> 5) & 7; /* 0: never stop */
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	seen whole = {.stop_after = stop_after}, parts = {.stop_after = stop_after};
	bool c1, c2;
	int r1 = run(in, len, len ? len : 1, mask, &whole, &c1);
	int r2 = run(in, len, piece, mask, &parts, &c2);
	if (r1 != r2 || whole.log.len != parts.log.len ||
	    (whole.log.len && memcmp(whole.log.data, parts.log.data, whole.log.len) != 0))
		abort();
	if (r1 == 0 && c1 != c2)
		abort();
	brig_buf_free(&whole.log);
	brig_buf_free(&parts.log);
	return 0;
}
