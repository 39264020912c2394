/* fuzz_guest_proto.c — libFuzzer target for guest/proto.c, the codec both brig
 * and brig-init parse each other with: the stream reader fed in pieces, the
 * field decoder and its checks, and a re-encoding that must give the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest/proto.h"

/* The first input byte picks the piece size the stream is fed in. */
static const size_t piece_sizes[16] = {1, 2, 3, 5, 7, 11, 12, 13, 16, 31, 64, 100, 255, 1000, 4096, 65536};

/* Decodes one frame's fields, checks what the decoder promises, and
 * re-encodes them: a payload that decodes whole must encode back byte for byte. */
static void check_frame(const brig_gp_hdr *h, const unsigned char *payload)
{
	if (h->len > BRIG_GP_MAX_PAYLOAD || h->flags != 0)
		abort();
	brig_gp_dec d;
	brig_gp_field f;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_dec_init(&d, payload, h->len);
	size_t seen = 0;
	int rc;
	while ((rc = brig_gp_dec_next(&d, &f)) == BRIG_GP_OK) {
		if (f.len > h->len || f.val < payload || f.val + f.len > payload + h->len)
			abort(); /* a field outside its payload was trusted */
		seen += 5 + (size_t)f.len;
		int64_t v;
		if (brig_gp_field_int(&f, &v) == BRIG_GP_OK && f.len != 8)
			abort();
		int sr = brig_gp_field_str(&f, 64);
		char *s = brig_gp_field_strdup(&f, 64);
		if ((sr == BRIG_GP_OK) != (s != NULL) || (s && (strlen(s) != f.len || memcmp(s, f.val, f.len))))
			abort();
		free(s);
		brig_gp_put_bytes(&e, f.tag, f.val, f.len);
	}
	if (rc == BRIG_GP_ENEED) {
		if (seen != h->len)
			abort();
		long n = brig_gp_enc_finish(&e, h->type, h->id);
		if (n != (long)(BRIG_GP_HDR_SIZE + h->len) || memcmp(e.buf + BRIG_GP_HDR_SIZE, payload, h->len))
			abort();
		brig_gp_hdr back;
		if (brig_gp_hdr_parse(&back, e.buf) != BRIG_GP_OK || back.type != h->type || back.id != h->id ||
		    back.len != h->len)
			abort();
	} else if (rc != BRIG_GP_ETRUNC) {
		abort();
	}
	brig_gp_enc_free(&e);
	(void)brig_gp_type_name(h->type);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = piece_sizes[data[0] & 15];
	data++, size--;
	brig_gp_reader r;
	brig_gp_reader_init(&r);
	size_t off = 0;
	while (off < size) {
		size_t n = size - off < piece ? size - off : piece;
		size_t k = 0;
		while (k < n) {
			size_t used;
			int rc = brig_gp_reader_feed(&r, data + off + k, n - k, &used);
			if (used > n - k)
				abort();
			k += used;
			if (rc == BRIG_GP_OK) {
				if (r.payload_have != r.hdr.len)
					abort();
				check_frame(&r.hdr, r.payload);
			} else if (rc == BRIG_GP_ENEED) {
				if (k != n)
					abort(); /* needing more while bytes are left */
			} else {
				goto out; /* broken stream: the connection would end */
			}
		}
		off += n;
	}
out:
	brig_gp_reader_free(&r);
	return 0;
}
