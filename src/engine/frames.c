/* frames.c — the demultiplexer of Docker's 8-byte framed stdout/stderr
 * stream. Frame lengths come from the container: checked before trusted. */
#include <string.h>

#include "engine/internal.h"

void brig_frame_demux_init(brig_frame_demux *d, size_t max_frame)
{
	memset(d, 0, sizeof *d);
	d->max_frame = max_frame ? max_frame : (1u << 20);
}

bool brig_frame_demux_clean(const brig_frame_demux *d) { return d->hdr_len == 0 && d->remaining == 0; }

int brig_frame_demux_feed(brig_frame_demux *d, const char *data, size_t len, brig_engine_output_cb cb,
			  void *payload, brig_error **err)
{
	while (len) {
		if (d->remaining == 0) {
			size_t take = 8 - d->hdr_len;
			if (take > len)
				take = len;
			memcpy(d->hdr + d->hdr_len, data, take);
			d->hdr_len += take;
			data += take;
			len -= take;
			if (d->hdr_len < 8)
				return 0;
			d->hdr_len = 0;
			unsigned stream = d->hdr[0];
			if (stream > 2 || d->hdr[1] || d->hdr[2] || d->hdr[3])
				return brig__error_set(err, BRIG_EPROTO, 0,
						       "output stream has a malformed frame header (stream byte %u)",
						       stream);
			size_t n = ((size_t)d->hdr[4] << 24) | ((size_t)d->hdr[5] << 16) | ((size_t)d->hdr[6] << 8) |
				   (size_t)d->hdr[7];
			if (n > d->max_frame)
				return brig__error_set(err, BRIG_ETOOBIG, 0,
						       "output frame of %zu bytes exceeds the %zu-byte cap", n,
						       d->max_frame);
			/* Stdin-tagged frames carry output too (Docker's stdcopy). */
			d->stream = stream == 2 ? BRIG_STREAM_STDERR : BRIG_STREAM_STDOUT;
			d->remaining = n;
			continue;
		}
		size_t take = d->remaining < len ? d->remaining : len;
		if (cb) {
			int r = cb(d->stream, data, take, payload);
			if (r)
				return r;
		}
		d->remaining -= take;
		data += take;
		len -= take;
	}
	return 0;
}
