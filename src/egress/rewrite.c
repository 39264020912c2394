/* rewrite.c — the request stream of a TLS-terminated egress connection:
 * HTTP/1.1 heads parsed and checked, placeholders in header values
 * replaced by their secrets, bodies framed and passed. Sandbox bytes:
 * bounded, fuzzed by tests/fuzz/fuzz_egress_bump.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress_internal.h"
#include "util/util.h"

enum { RW_HEAD, RW_BODY, RW_CHUNK_LINE, RW_CHUNK_DATA, RW_CHUNK_CRLF, RW_TRAILER, RW_RAW };

void brig_egress__rw_init(brig_egress_rw *rw, const char *host, int port, const char *const *from,
			  const char *const *to, size_t pairs)
{
	memset(rw, 0, sizeof *rw);
	rw->host = host;
	snprintf(rw->port, sizeof rw->port, ":%d", port);
	rw->from = from;
	rw->to = to;
	rw->pairs = pairs;
	rw->state = RW_HEAD;
}

void brig_egress__buf_whole(brig_buf *b, size_t cap)
{
	brig_buf_init(b, cap);
	b->data = xmalloc(cap + 1);
	b->alloc = cap + 1;
	b->data[0] = '\0';
}

/* Frees b after zeroing what it held (values swapped in). */
static void wipe_free(brig_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->len);
	brig_buf_free(b);
}

/* RFC 9110 tchar */
static bool tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool name_is(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* Header names a secret is bound to: only there does a placeholder become
 * its value (anywhere else it stays itself, so a header the upstream
 * echoes back cannot carry the value to the sandbox). */
static bool bound_name(const char *p, size_t n)
{
	return name_is(p, n, "authorization") || name_is(p, n, "x-api-key") || name_is(p, n, "api-key") ||
	       name_is(p, n, "x-goog-api-key");
}

/* Appends value v[0..n): a placeholder's value when v is exactly a
 * placeholder or "<scheme> <placeholder>" (scheme a token), else v. */
static int put_value(brig_egress_rw *rw, brig_buf *out, const char *v, size_t n)
{
	size_t at = 0;
	const char *sp = memchr(v, ' ', n);
	if (sp) {
		at = (size_t)(sp - v) + 1;
		for (const char *p = v; p < sp; p++)
			if (!tchar((unsigned char)*p))
				return brig_buf_add(out, v, n);
	}
	for (size_t k = 0; k < rw->pairs; k++) {
		size_t fl = strlen(rw->from[k]);
		if (fl && n - at == fl && memcmp(v + at, rw->from[k], fl) == 0) {
			rw->replaced++;
			return brig_buf_add(out, v, at) | brig_buf_addstr(out, rw->to[k]);
		}
	}
	return brig_buf_add(out, v, n);
}

/* The head in rw->head[0..head_len) (through its blank line). */
static int do_head(brig_egress_rw *rw, brig_buf *out, const char **why)
{
	const char *h = rw->head, *end = rw->head + rw->head_len - 2; /* the last CRLF */
	*why = "malformed request in the TLS tunnel";
	const char *le = memmem(h, rw->head_len, "\r\n", 2);
	const char *sp1 = memchr(h, ' ', (size_t)(le - h));
	if (!sp1 || sp1 == h || sp1 - h > 20)
		return -1;
	for (const char *p = h; p < sp1; p++)
		if (!tchar((unsigned char)*p))
			return -1;
	const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1)
		return -1;
	if (le - sp2 - 1 != 8 || (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0)) {
		*why = "not an HTTP/1.x request in the TLS tunnel";
		return -1;
	}
	if (!(sp1[1] == '/' || (sp2 - sp1 == 2 && sp1[1] == '*'))) {
		*why = "request target in the TLS tunnel is not origin-form";
		return -1;
	}
	for (const char *p = sp1 + 1; p < sp2; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return -1;
	if (name_is(h, (size_t)(sp1 - h), "TRACE") || name_is(h, (size_t)(sp1 - h), "TRACK")) {
		/* they echo the request, values and all */
		*why = "TRACE and TRACK are refused in the TLS tunnel";
		return -1;
	}
	brig_buf head;
	brig_egress__buf_whole(&head, BRIG_EGRESS_OUT_HEAD_MAX);
	int bad = brig_buf_add(&head, h, (size_t)(le - h) + 2);
	int hosts = 0, lengths = 0;
	bool chunked = false, upgrade = false;
	uint64_t length = 0;
	for (const char *l = le + 2; l < end;) {
		const char *e = memmem(l, (size_t)(end - l) + 2, "\r\n", 2);
		const char *colon = memchr(l, ':', (size_t)(e - l));
		if (!colon || colon == l)
			goto refuse; /* also a folded line (it starts with a space) */
		for (const char *p = l; p < colon; p++)
			if (!tchar((unsigned char)*p))
				goto refuse;
		const char *v = colon + 1, *ve = e;
		for (const char *p = v; p < ve; p++)
			if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
				goto refuse;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		size_t nn = (size_t)(colon - l), vn = (size_t)(ve - v);
		if (name_is(l, nn, "host")) {
			/* the tunnel's host, alone or with the tunnel's port */
			size_t hl = strlen(rw->host), pl = strlen(rw->port);
			bool same = (vn == hl || (vn == hl + pl && memcmp(v + hl, rw->port, pl) == 0)) &&
				    strncasecmp(v, rw->host, hl) == 0;
			if (!same || ++hosts > 1) {
				*why = "Host in the TLS tunnel differs from the tunnel's host";
				goto refuse_why;
			}
		} else if (name_is(l, nn, "content-length")) {
			if (vn == 0 || vn > 18 || ++lengths > 1)
				goto refuse;
			length = 0;
			for (size_t i = 0; i < vn; i++) {
				if (v[i] < '0' || v[i] > '9')
					goto refuse;
				length = length * 10 + (uint64_t)(v[i] - '0');
			}
		} else if (name_is(l, nn, "transfer-encoding")) {
			if (chunked || !(vn == 7 && strncasecmp(v, "chunked", 7) == 0)) {
				*why = "Transfer-Encoding other than chunked in the TLS tunnel";
				goto refuse_why;
			}
			chunked = true;
		} else if (name_is(l, nn, "upgrade")) {
			upgrade = true;
		}
		bad |= brig_buf_add(&head, l, (size_t)(colon - l) + 1);
		bad |= brig_buf_addstr(&head, " ");
		bad |= bound_name(l, nn) ? put_value(rw, &head, v, vn) : brig_buf_add(&head, v, vn);
		bad |= brig_buf_addstr(&head, "\r\n");
		l = e + 2;
	}
	if (hosts != 1) {
		*why = "no Host header in the TLS tunnel";
		goto refuse_why;
	}
	if ((chunked || upgrade) && memcmp(sp2 + 1, "HTTP/1.0", 8) == 0) {
		/* HTTP/1.0 has neither: an upstream may frame the body otherwise */
		*why = "Transfer-Encoding or Upgrade on HTTP/1.0 in the TLS tunnel";
		goto refuse_why;
	}
	if (chunked && lengths) {
		*why = "both Content-Length and Transfer-Encoding in the TLS tunnel";
		goto refuse_why;
	}
	bad |= brig_buf_addstr(&head, "\r\n");
	if (bad) {
		*why = "request head too long once secrets are in";
		goto refuse_why;
	}
	if (brig_buf_add(out, head.data, head.len)) {
		*why = "request too long once secrets are in";
		goto refuse_why;
	}
	wipe_free(&head);
	rw->requests++;
	rw->head_len = 0;
	rw->line_len = 0;
	rw->left = length;
	rw->state = upgrade ? RW_RAW : chunked ? RW_CHUNK_LINE : length ? RW_BODY : RW_HEAD;
	return 0;
refuse:
	*why = "malformed request header in the TLS tunnel";
refuse_why:
	wipe_free(&head);
	return -1;
}

/* Collects one CRLF-ended line into rw->line; returns bytes used, with
 * *done when the line is whole. -1 when it is too long. */
static ssize_t take_line(brig_egress_rw *rw, const char *in, size_t n, bool *done)
{
	*done = false;
	size_t i = 0;
	while (i < n) {
		if (rw->line_len >= sizeof rw->line)
			return -1;
		char c = in[i++];
		rw->line[rw->line_len++] = c;
		if (c == '\n') {
			*done = true;
			break;
		}
	}
	return (ssize_t)i;
}

/* chunk-size [ ";" ext ] CRLF → size; -1 when malformed. */
static int chunk_size(const brig_egress_rw *rw, uint64_t *size)
{
	size_t n = rw->line_len;
	if (n < 3 || rw->line[n - 2] != '\r')
		return -1;
	*size = 0;
	size_t i = 0;
	for (; i < n - 2; i++) {
		char c = rw->line[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			break;
		if (i >= 15)
			return -1;
		*size = *size * 16 + (uint64_t)d;
	}
	/* hex digits, then ";ext" or nothing: no whitespace an upstream may
	 * read differently */
	if (i == 0 || (i < n - 2 && rw->line[i] != ';'))
		return -1;
	for (size_t k = i; k < n - 2; k++)
		if ((unsigned char)rw->line[k] < 0x20 && rw->line[k] != '\t')
			return -1;
	return 0;
}

int brig_egress__rw_feed(brig_egress_rw *rw, const char *in, size_t n, brig_buf *out, const char **why)
{
	while (n > 0) {
		switch (rw->state) {
		case RW_RAW:
			if (brig_buf_add(out, in, n)) {
				*why = "output full";
				return -1;
			}
			return 0;
		case RW_HEAD: {
			size_t old = rw->head_len;
			size_t take = sizeof rw->head - old;
			if (take > n)
				take = n;
			memcpy(rw->head + old, in, take);
			rw->head_len += take;
			const char *from = rw->head + (old >= 3 ? old - 3 : 0);
			const char *hit = memmem(from, (size_t)(rw->head + rw->head_len - from), "\r\n\r\n", 4);
			if (!hit) {
				if (rw->head_len >= sizeof rw->head) {
					*why = "request head in the TLS tunnel too long";
					return -1;
				}
				return 0;
			}
			size_t head_end = (size_t)(hit - rw->head) + 4;
			size_t used = head_end - old;
			rw->head_len = head_end;
			if (do_head(rw, out, why) != 0)
				return -1;
			in += used;
			n -= used;
			break;
		}
		case RW_BODY:
		case RW_CHUNK_DATA: {
			size_t k = rw->left < n ? (size_t)rw->left : n;
			if (brig_buf_add(out, in, k)) {
				*why = "output full";
				return -1;
			}
			in += k;
			n -= k;
			rw->left -= k;
			if (rw->left == 0) {
				rw->state = rw->state == RW_BODY ? RW_HEAD : RW_CHUNK_CRLF;
				rw->line_len = 0;
			}
			break;
		}
		case RW_CHUNK_LINE:
		case RW_CHUNK_CRLF:
		case RW_TRAILER: {
			bool done;
			ssize_t k = take_line(rw, in, n, &done);
			if (k < 0) {
				*why = "chunked body line too long in the TLS tunnel";
				return -1;
			}
			if (brig_buf_add(out, in, (size_t)k)) {
				*why = "output full";
				return -1;
			}
			in += k;
			n -= (size_t)k;
			if (!done)
				break;
			bool crlf_only = rw->line_len == 2 && rw->line[0] == '\r';
			if (rw->state == RW_CHUNK_CRLF) {
				if (!crlf_only) {
					*why = "malformed chunked body in the TLS tunnel";
					return -1;
				}
				rw->state = RW_CHUNK_LINE;
			} else if (rw->state == RW_TRAILER) {
				if (crlf_only)
					rw->state = RW_HEAD;
				else if (rw->line_len < 2 || rw->line[rw->line_len - 2] != '\r') {
					*why = "malformed chunked trailer in the TLS tunnel";
					return -1;
				}
			} else {
				uint64_t size;
				if (chunk_size(rw, &size) != 0) {
					*why = "malformed chunk size in the TLS tunnel";
					return -1;
				}
				rw->left = size;
				rw->state = size ? RW_CHUNK_DATA : RW_TRAILER;
			}
			rw->line_len = 0;
			break;
		}
		default: *why = "bad state"; return -1;
		}
	}
	return 0;
}

void brig_egress__scan_init(brig_egress_scan *s, const char *const *values, size_t count)
{
	memset(s, 0, sizeof *s);
	s->values = values;
	s->count = count;
	size_t max = 0;
	for (size_t i = 0; i < count; i++)
		if (strlen(values[i]) > max)
			max = strlen(values[i]);
	s->hold = xmalloc(max + 1);
}

void brig_egress__scan_free(brig_egress_scan *s)
{
	if (s->hold)
		explicit_bzero(s->hold, s->hold_len);
	free(s->hold);
	s->hold = NULL;
	s->hold_len = 0;
}

int brig_egress__scan_flush(brig_egress_scan *s, brig_buf *out)
{
	int bad = brig_buf_add(out, s->hold, s->hold_len);
	explicit_bzero(s->hold, s->hold_len);
	s->hold_len = 0;
	return bad;
}

int brig_egress__scan_feed(brig_egress_scan *s, const char *in, size_t n, brig_buf *out)
{
	size_t start = out->len;
	if (brig_buf_add(out, s->hold, s->hold_len) || brig_buf_add(out, in, n)) {
		explicit_bzero(out->data + start, out->len - start);
		out->len = start;
		return 1; /* cannot look: say no */
	}
	const char *w = out->data + start;
	size_t wn = out->len - start, keep = 0;
	for (size_t i = 0; i < s->count; i++) {
		size_t vl = strlen(s->values[i]);
		if (!vl)
			continue;
		if (memmem(w, wn, s->values[i], vl)) {
			explicit_bzero(out->data + start, wn);
			out->len = start;
			return 1;
		}
		/* the longest tail of w that begins this value */
		for (size_t k = (vl - 1 < wn ? vl - 1 : wn); k > keep; k--)
			if (memcmp(w + wn - k, s->values[i], k) == 0) {
				keep = k;
				break;
			}
	}
	explicit_bzero(s->hold, s->hold_len);
	memcpy(s->hold, w + wn - keep, keep);
	s->hold_len = keep;
	explicit_bzero(out->data + start + wn - keep, keep);
	out->len = start + wn - keep;
	return 0;
}
