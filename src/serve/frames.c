/* frames.c — the exec attach stream's frames (frames.h): the header writer
 * and the decoder both sides run over their peer's bytes. */
#include <stdlib.h>
#include <string.h>

#include "serve/frames.h"
#include "util/util.h"

void serve_frame_header(unsigned char hdr[SERVE_FRAME_HDR], unsigned type, uint32_t len)
{
	hdr[0] = (unsigned char)type;
	hdr[1] = hdr[2] = hdr[3] = 0;
	hdr[4] = (unsigned char)(len >> 24);
	hdr[5] = (unsigned char)(len >> 16);
	hdr[6] = (unsigned char)(len >> 8);
	hdr[7] = (unsigned char)len;
}

void serve_frame_dec_init(serve_frame_dec *d, unsigned allowed)
{
	memset(d, 0, sizeof *d);
	d->allowed = allowed;
}

void serve_frame_dec_clear(serve_frame_dec *d)
{
	free(d->ctl);
	d->ctl = NULL;
}

bool serve_frame_dec_clean(const serve_frame_dec *d)
{
	return d->hdr_len == 0 && !d->in_frame;
}

void serve_frame_resize_get(const char *data, int *rows, int *cols)
{
	const unsigned char *u = (const unsigned char *)data;
	*rows = (u[0] << 8) | u[1];
	*cols = (u[2] << 8) | u[3];
}

void serve_frame_resize_put(char data[4], int rows, int cols)
{
	data[0] = (char)((rows >> 8) & 0xff);
	data[1] = (char)(rows & 0xff);
	data[2] = (char)((cols >> 8) & 0xff);
	data[3] = (char)(cols & 0xff);
}

static bool is_control(unsigned type)
{
	return type == SERVE_FRAME_END || type == SERVE_FRAME_EOF || type == SERVE_FRAME_RESIZE ||
	       type == SERVE_FRAME_TAR_END;
}

/* The header just completed: checked before its length is trusted. */
static int header_check(serve_frame_dec *d, brig_error **err)
{
	unsigned type = d->hdr[0];
	uint32_t n = ((uint32_t)d->hdr[4] << 24) | ((uint32_t)d->hdr[5] << 16) | ((uint32_t)d->hdr[6] << 8) |
		     (uint32_t)d->hdr[7];
	if (type > SERVE_FRAME_TAR_END || !(d->allowed & (1u << type)) || d->hdr[1] || d->hdr[2] || d->hdr[3])
		return brig__error_set(err, BRIG_EPROTO, 0, "attach stream: a malformed frame header (type %u)", type);
	uint32_t cap = type == SERVE_FRAME_END ? SERVE_FRAME_END_MAX : SERVE_FRAME_DATA_MAX;
	if (n > cap)
		return brig__error_set(err, BRIG_ETOOBIG, 0, "attach stream: a frame of %u bytes (the cap is %u)", n,
				       cap);
	if ((type == SERVE_FRAME_EOF || type == SERVE_FRAME_TAR_END) && n != 0)
		return brig__error_set(err, BRIG_EPROTO, 0, "attach stream: an EOF frame carries no bytes");
	if (type == SERVE_FRAME_RESIZE && n != 4)
		return brig__error_set(err, BRIG_EPROTO, 0, "attach stream: a resize frame is 4 bytes");
	if (type == SERVE_FRAME_STDIN && d->eof_seen)
		return brig__error_set(err, BRIG_EPROTO, 0, "attach stream: stdin after its EOF frame");
	d->type = type;
	d->remaining = n;
	d->in_frame = true;
	if (is_control(type)) {
		free(d->ctl);
		d->ctl = xmalloc(n + 1);
		d->ctl_len = 0;
	}
	return 0;
}

/* The current control frame is whole: checked, then handed over. */
static int control_done(serve_frame_dec *d, serve_frame_cb cb, void *payload, brig_error **err)
{
	d->in_frame = false;
	d->ctl[d->ctl_len] = 0;
	if (d->type == SERVE_FRAME_RESIZE) {
		int rows, cols;
		serve_frame_resize_get(d->ctl, &rows, &cols);
		if (rows < 1 || cols < 1 || rows > SERVE_FRAME_TTY_MAX || cols > SERVE_FRAME_TTY_MAX)
			return brig__error_set(err, BRIG_EPROTO, 0,
					       "attach stream: a resize to %dx%d (rows and cols are 1..%d)", rows, cols,
					       SERVE_FRAME_TTY_MAX);
	}
	if (d->type == SERVE_FRAME_EOF)
		d->eof_seen = true;
	int r = cb ? cb(d->type, d->ctl, d->ctl_len, payload) : 0;
	free(d->ctl);
	d->ctl = NULL;
	d->ctl_len = 0;
	return r;
}

int serve_frame_feed(serve_frame_dec *d, const char *data, size_t len, serve_frame_cb cb, void *payload,
		     brig_error **err)
{
	for (;;) {
		if (d->in_frame && d->remaining == 0 && is_control(d->type)) {
			int r = control_done(d, cb, payload, err);
			if (r)
				return r;
			continue;
		}
		if (d->in_frame && d->remaining == 0) {
			d->in_frame = false; /* an empty data frame */
			continue;
		}
		if (!len)
			return 0;
		if (!d->in_frame) {
			size_t take = SERVE_FRAME_HDR - d->hdr_len;
			if (take > len)
				take = len;
			memcpy(d->hdr + d->hdr_len, data, take);
			d->hdr_len += take;
			data += take;
			len -= take;
			if (d->hdr_len < SERVE_FRAME_HDR)
				return 0;
			d->hdr_len = 0;
			int r = header_check(d, err);
			if (r)
				return r;
			continue;
		}
		size_t take = d->remaining < len ? d->remaining : len;
		if (is_control(d->type)) {
			memcpy(d->ctl + d->ctl_len, data, take);
			d->ctl_len += take;
		} else if (cb) {
			int r = cb(d->type, data, take, payload);
			if (r) {
				d->remaining -= (uint32_t)take;
				return r;
			}
		}
		d->remaining -= (uint32_t)take;
		data += take;
		len -= take;
	}
}
