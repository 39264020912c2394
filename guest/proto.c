/* proto.c — the codec of guest/proto.h, compiled into both brig-init and
 * libbrig: frame headers, one-frame encoder, stream reader, field decoder.
 * Every length from the peer is checked before it is used or allocated. */
#include "guest/proto.h"

#include <stdlib.h>
#include <string.h>

static void put_u32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)(v >> 24);
	b[1] = (unsigned char)(v >> 16);
	b[2] = (unsigned char)(v >> 8);
	b[3] = (unsigned char)v;
}

static uint32_t get_u32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

int brig_gp_hdr_parse(brig_gp_hdr *out, const unsigned char b[BRIG_GP_HDR_SIZE])
{
	if (b[0] != 'b' || b[1] != 'g' || b[3] != 0)
		return BRIG_GP_EMAGIC;
	out->type = b[2];
	out->flags = b[3];
	out->id = get_u32(b + 4);
	out->len = get_u32(b + 8);
	if (out->len > BRIG_GP_MAX_PAYLOAD)
		return BRIG_GP_ETOOBIG;
	return BRIG_GP_OK;
}

void brig_gp_hdr_write(unsigned char b[BRIG_GP_HDR_SIZE], uint8_t type, uint32_t id, uint32_t len)
{
	b[0] = 'b';
	b[1] = 'g';
	b[2] = type;
	b[3] = 0;
	put_u32(b + 4, id);
	put_u32(b + 8, len);
}

/* ---- encoder ---- */

void brig_gp_enc_begin(brig_gp_enc *e)
{
	e->len = BRIG_GP_HDR_SIZE;
	e->failed = 0;
	if (e->alloc < BRIG_GP_HDR_SIZE) {
		unsigned char *nb = realloc(e->buf, 4096);
		if (!nb) {
			e->failed = BRIG_GP_ENOMEM;
			return;
		}
		e->buf = nb;
		e->alloc = 4096;
	}
}

static int reserve(brig_gp_enc *e, size_t more)
{
	if (e->failed)
		return -1;
	if (e->len < BRIG_GP_HDR_SIZE) { /* begin was not called or failed */
		e->failed = BRIG_GP_ENOMEM;
		return -1;
	}
	if (more > BRIG_GP_HDR_SIZE + BRIG_GP_MAX_PAYLOAD - e->len) {
		e->failed = BRIG_GP_ETOOBIG;
		return -1;
	}
	size_t need = e->len + more;
	if (need <= e->alloc)
		return 0;
	size_t a = e->alloc ? e->alloc : 4096;
	while (a < need)
		a *= 2;
	if (a > BRIG_GP_HDR_SIZE + BRIG_GP_MAX_PAYLOAD)
		a = BRIG_GP_HDR_SIZE + BRIG_GP_MAX_PAYLOAD;
	unsigned char *nb = realloc(e->buf, a);
	if (!nb) {
		e->failed = BRIG_GP_ENOMEM;
		return -1;
	}
	e->buf = nb;
	e->alloc = a;
	return 0;
}

void brig_gp_put_bytes(brig_gp_enc *e, uint8_t tag, const void *p, size_t n)
{
	if (n > BRIG_GP_MAX_PAYLOAD) {
		e->failed = BRIG_GP_ETOOBIG;
		return;
	}
	if (reserve(e, 5 + n) != 0)
		return;
	e->buf[e->len] = tag;
	put_u32(e->buf + e->len + 1, (uint32_t)n);
	if (n)
		memcpy(e->buf + e->len + 5, p, n);
	e->len += 5 + n;
}

void brig_gp_put_str(brig_gp_enc *e, uint8_t tag, const char *s)
{
	if (s)
		brig_gp_put_bytes(e, tag, s, strlen(s));
}

void brig_gp_put_int(brig_gp_enc *e, uint8_t tag, int64_t v)
{
	unsigned char b[8];
	uint64_t u = (uint64_t)v;
	for (int i = 7; i >= 0; i--) {
		b[i] = (unsigned char)u;
		u >>= 8;
	}
	brig_gp_put_bytes(e, tag, b, sizeof b);
}

long brig_gp_enc_finish(brig_gp_enc *e, uint8_t type, uint32_t id)
{
	if (e->failed)
		return e->failed;
	if (!e->buf || e->len < BRIG_GP_HDR_SIZE)
		return BRIG_GP_ENOMEM;
	brig_gp_hdr_write(e->buf, type, id, (uint32_t)(e->len - BRIG_GP_HDR_SIZE));
	return (long)e->len;
}

void brig_gp_enc_free(brig_gp_enc *e)
{
	free(e->buf);
	e->buf = NULL;
	e->len = e->alloc = 0;
}

/* ---- reader ---- */

void brig_gp_reader_init(brig_gp_reader *r) { memset(r, 0, sizeof *r); }

void brig_gp_reader_free(brig_gp_reader *r)
{
	free(r->payload);
	memset(r, 0, sizeof *r);
}

int brig_gp_reader_feed(brig_gp_reader *r, const unsigned char *data, size_t n, size_t *used)
{
	size_t k = 0;
	*used = 0;
	/* A frame handed out by the previous call is released now. */
	if (r->hdr_have == BRIG_GP_HDR_SIZE && r->payload_have == r->hdr.len) {
		free(r->payload);
		r->payload = NULL;
		r->hdr_have = 0;
		r->payload_have = 0;
	}
	if (r->hdr_have < BRIG_GP_HDR_SIZE) {
		size_t want = BRIG_GP_HDR_SIZE - r->hdr_have;
		size_t take = n < want ? n : want;
		memcpy(r->hdr_bytes + r->hdr_have, data, take);
		r->hdr_have += take;
		k += take;
		if (r->hdr_have < BRIG_GP_HDR_SIZE) {
			*used = k;
			return BRIG_GP_ENEED;
		}
		int rc = brig_gp_hdr_parse(&r->hdr, r->hdr_bytes);
		if (rc != BRIG_GP_OK) {
			*used = k;
			return rc;
		}
		r->payload_have = 0;
		/* One byte at least, so an empty payload is not a NULL pointer. */
		r->payload = malloc(r->hdr.len ? r->hdr.len : 1);
		if (!r->payload) {
			*used = k;
			return BRIG_GP_ENOMEM;
		}
	}
	size_t want = r->hdr.len - r->payload_have;
	size_t take = n - k < want ? n - k : want;
	if (take)
		memcpy(r->payload + r->payload_have, data + k, take);
	r->payload_have += take;
	k += take;
	*used = k;
	return r->payload_have == r->hdr.len ? BRIG_GP_OK : BRIG_GP_ENEED;
}

/* ---- fields ---- */

void brig_gp_dec_init(brig_gp_dec *d, const unsigned char *payload, size_t len)
{
	d->p = payload;
	d->left = len;
}

int brig_gp_dec_next(brig_gp_dec *d, brig_gp_field *f)
{
	if (d->left == 0)
		return BRIG_GP_ENEED;
	if (d->left < 5)
		return BRIG_GP_ETRUNC;
	uint32_t len = get_u32(d->p + 1);
	if (len > d->left - 5)
		return BRIG_GP_ETRUNC;
	f->tag = d->p[0];
	f->len = len;
	f->val = d->p + 5;
	d->p += 5 + (size_t)len;
	d->left -= 5 + (size_t)len;
	return BRIG_GP_OK;
}

int brig_gp_field_int(const brig_gp_field *f, int64_t *out)
{
	if (f->len != 8)
		return BRIG_GP_ESHAPE;
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u = u << 8 | f->val[i];
	*out = (int64_t)u;
	return BRIG_GP_OK;
}

int brig_gp_field_str(const brig_gp_field *f, size_t max)
{
	if (f->len > (max ? max : BRIG_GP_MAX_STR))
		return BRIG_GP_ETOOBIG;
	if (f->len && memchr(f->val, 0, f->len))
		return BRIG_GP_ESHAPE;
	return BRIG_GP_OK;
}

char *brig_gp_field_strdup(const brig_gp_field *f, size_t max)
{
	if (brig_gp_field_str(f, max) != BRIG_GP_OK)
		return NULL;
	char *s = malloc((size_t)f->len + 1);
	if (!s)
		return NULL;
	memcpy(s, f->val, f->len);
	s[f->len] = '\0';
	return s;
}

const char *brig_gp_type_name(uint8_t type)
{
	switch (type) {
	case BRIG_GP_T_HELLO: return "HELLO";
	case BRIG_GP_T_HELLO_OK: return "HELLO_OK";
	case BRIG_GP_T_ERROR: return "ERROR";
	case BRIG_GP_T_OK: return "OK";
	case BRIG_GP_T_START: return "START";
	case BRIG_GP_T_STARTED: return "STARTED";
	case BRIG_GP_T_STDIN: return "STDIN";
	case BRIG_GP_T_STDIN_CLOSE: return "STDIN_CLOSE";
	case BRIG_GP_T_SIGNAL: return "SIGNAL";
	case BRIG_GP_T_KILL: return "KILL";
	case BRIG_GP_T_RESIZE: return "RESIZE";
	case BRIG_GP_T_OUTPUT: return "OUTPUT";
	case BRIG_GP_T_EXIT: return "EXIT";
	case BRIG_GP_T_CREDIT: return "CREDIT";
	case BRIG_GP_T_PS: return "PS";
	case BRIG_GP_T_PS_ENTRY: return "PS_ENTRY";
	case BRIG_GP_T_ATTACH: return "ATTACH";
	case BRIG_GP_T_STATUS: return "STATUS";
	case BRIG_GP_T_STAT: return "STAT";
	case BRIG_GP_T_LIST: return "LIST";
	case BRIG_GP_T_LIST_ENTRY: return "LIST_ENTRY";
	case BRIG_GP_T_READ: return "READ";
	case BRIG_GP_T_DATA: return "DATA";
	case BRIG_GP_T_WRITE: return "WRITE";
	case BRIG_GP_T_WRITE_END: return "WRITE_END";
	case BRIG_GP_T_MKDIR: return "MKDIR";
	case BRIG_GP_T_REMOVE: return "REMOVE";
	case BRIG_GP_T_RENAME: return "RENAME";
	case BRIG_GP_T_SYMLINK: return "SYMLINK";
	default: return "?";
	}
}

size_t brig_gp_env_lines(char *buf, size_t len)
{
	size_t count = 0;
	for (size_t i = 0; i < len; i++)
		if (buf[i] == '\n') {
			buf[i] = '\0';
			count++;
		}
	buf[len] = '\0'; /* a last line without its newline still counts */
	return count + 1;
}

void brig_gp_env_put(char **env, size_t *k, char *entry)
{
	char *eq = strchr(entry, '=');
	if (!eq || eq == entry)
		return;
	size_t kl = (size_t)(eq - entry) + 1;
	size_t j = 0;
	for (; j < *k; j++)
		if (strncmp(env[j], entry, kl) == 0)
			break;
	env[j] = entry;
	if (j == *k)
		(*k)++;
}
