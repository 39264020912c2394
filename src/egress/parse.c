/* parse.c — the egress proxy's parsers of sandbox bytes: the request head
 * (CONNECT or an absolute-URI HTTP request) and the TLS ClientHello's
 * server name. Every length is checked before it is used. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "egress/egress_internal.h"

/* ---- request head ---- */

static const char *find_crlf(const char *p, const char *end)
{
	for (; p + 1 < end; p++)
		if (p[0] == '\r' && p[1] == '\n')
			return p;
	return NULL;
}

/* "host[:port]" → lowercase host and port (def when absent). 0, or -1. */
static int host_port(char *host, size_t hostlen, int *port, const char *s, size_t n, int def, bool *ip)
{
	const char *colon = memchr(s, ':', n);
	size_t hn = colon ? (size_t)(colon - s) : n;
	*port = def;
	if (colon) {
		size_t pn = n - hn - 1;
		if (pn == 0 || pn > 5)
			return -1;
		long v = 0;
		for (size_t i = 0; i < pn; i++) {
			char c = colon[1 + i];
			if (c < '0' || c > '9')
				return -1;
			v = v * 10 + (c - '0');
		}
		if (v < 1 || v > 65535)
			return -1;
		*port = (int)v;
	}
	int h = brig_egress__host_check(host, hostlen, s, hn);
	if (h < 0)
		return -1;
	*ip = h == 1;
	return 0;
}

static bool header_is(const char *line, size_t n, const char *name, const char **value, size_t *vlen)
{
	size_t k = strlen(name);
	if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0)
		return false;
	const char *v = line + k + 1;
	const char *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*value = v;
	*vlen = (size_t)(e - v);
	return true;
}

int brig_egress__parse_head(brig_egress_req *req, const char *buf, size_t len, const char **why)
{
	static const char *const methods[] = {"GET",     "HEAD",  "POST",    "PUT", "DELETE",
					      "OPTIONS", "PATCH", "CONNECT", NULL};
	memset(req, 0, sizeof *req);
	req->content_length = -1;
	*why = "malformed request";
	if (len > BRIG_EGRESS_HEAD_MAX)
		len = BRIG_EGRESS_HEAD_MAX;
	const char *end = buf + len;
	/* The whole head first: nothing is decided on a part of it. */
	const char *head_end = NULL;
	for (const char *p = buf; p + 3 < end; p++)
		if (p[0] == '\r' && p[1] == '\n' && p[2] == '\r' && p[3] == '\n') {
			head_end = p + 4;
			break;
		}
	if (!head_end) {
		if (len >= BRIG_EGRESS_HEAD_MAX) {
			*why = "request head too long";
			return -1;
		}
		return 1;
	}
	req->head_len = (size_t)(head_end - buf);
	const char *le = find_crlf(buf, head_end);
	const char *sp1 = memchr(buf, ' ', (size_t)(le - buf));
	if (!sp1 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof req->method)
		return -1;
	const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1)
		return -1;
	if ((size_t)(le - sp2 - 1) != 8 ||
	    (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0)) {
		*why = "not an HTTP/1.x request";
		return -1;
	}
	memcpy(req->method, buf, (size_t)(sp1 - buf));
	req->method[sp1 - buf] = '\0';
	bool known = false;
	for (const char *const *m = methods; *m; m++)
		known = known || strcmp(*m, req->method) == 0;
	if (!known) {
		*why = "method not forwarded";
		return -1;
	}
	req->connect = strcmp(req->method, "CONNECT") == 0;
	const char *t = sp1 + 1;
	size_t tn = (size_t)(sp2 - t);
	bool ip = false;
	char uri_host[256];
	int uri_port = 0;
	if (req->connect) {
		if (!memchr(t, ':', tn)) {
			*why = "CONNECT needs host:port";
			return -1;
		}
		if (host_port(req->host, sizeof req->host, &req->port, t, tn, 0, &ip) != 0) {
			*why = "CONNECT target is not host:port";
			return -1;
		}
	} else {
		if (tn < 8 || strncasecmp(t, "http://", 7) != 0) {
			*why = "plain HTTP needs an absolute http:// URI (https goes through CONNECT)";
			return -1;
		}
		const char *a = t + 7;
		const char *slash = memchr(a, '/', (size_t)(sp2 - a));
		const char *aend = slash ? slash : sp2;
		if (memchr(a, '@', (size_t)(aend - a)) || memchr(a, '?', (size_t)(aend - a)) ||
		    memchr(a, '#', (size_t)(aend - a))) {
			*why = "URI authority not a plain host[:port]";
			return -1;
		}
		if (host_port(uri_host, sizeof uri_host, &uri_port, a, (size_t)(aend - a), 80, &ip) != 0) {
			*why = "URI host is not a host name";
			return -1;
		}
		snprintf(req->host, sizeof req->host, "%s", uri_host);
		req->port = uri_port;
		if (slash) {
			req->target_off = (size_t)(slash - buf);
			req->target_len = (size_t)(sp2 - slash);
		} else {
			req->target_off = 0;
			req->target_len = 0; /* "/" */
		}
		for (size_t i = 0; i < req->target_len; i++) {
			unsigned char c = (unsigned char)slash[i];
			if (c <= 0x20 || c >= 0x7f) {
				*why = "bad byte in URI";
				return -1;
			}
		}
	}
	if (ip) {
		*why = "IP addresses are not forwarded; name the host";
		return -1;
	}
	req->headers_off = (size_t)(le + 2 - buf);
	int hosts = 0, lengths = 0;
	for (const char *l = le + 2; l < head_end - 2;) {
		const char *e = find_crlf(l, head_end);
		size_t n = (size_t)(e - l);
		if (n == 0 || l[0] == ' ' || l[0] == '\t' || !memchr(l, ':', n)) {
			*why = "malformed header line";
			return -1; /* no folding, no empty names */
		}
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)l[i] < 0x20 && l[i] != '\t') {
				*why = "control byte in a header";
				return -1;
			}
		const char *v;
		size_t vn;
		if (header_is(l, n, "Host", &v, &vn)) {
			hosts++;
			char hh[256];
			int hp = 0;
			bool hip = false;
			if (host_port(hh, sizeof hh, &hp, v, vn, req->connect ? req->port : 80, &hip) != 0 ||
			    strcmp(hh, req->host) != 0 || hp != req->port) {
				*why = "Host header differs from the request's host";
				return -1;
			}
		} else if (header_is(l, n, "Content-Length", &v, &vn)) {
			lengths++;
			if (vn == 0 || vn > 15) {
				*why = "bad Content-Length";
				return -1;
			}
			int64_t cl = 0;
			for (size_t i = 0; i < vn; i++) {
				if (v[i] < '0' || v[i] > '9') {
					*why = "bad Content-Length";
					return -1;
				}
				cl = cl * 10 + (v[i] - '0');
			}
			req->content_length = cl;
		} else if (header_is(l, n, "Transfer-Encoding", &v, &vn)) {
			req->chunked = true;
		}
		l = e + 2;
	}
	if (hosts > 1 || lengths > 1) {
		*why = "repeated Host or Content-Length header";
		return -1;
	}
	if (!req->connect && hosts == 0) {
		*why = "plain HTTP needs a Host header";
		return -1;
	}
	return 0;
}

/* ---- TLS ClientHello ---- */

static unsigned get16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

int brig_egress__sni(char *out, size_t outlen, const unsigned char *buf, size_t len)
{
	/* The handshake bytes of the leading handshake records, reassembled. */
	unsigned char hs[BRIG_EGRESS_HELLO_MAX];
	size_t hn = 0, off = 0;
	if (outlen)
		out[0] = '\0';
	if (len > BRIG_EGRESS_HELLO_MAX)
		len = BRIG_EGRESS_HELLO_MAX;
	for (;;) {
		if (hn >= 4) {
			size_t need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (hs[0] != 1)
				return -1;
			if (need > sizeof hs)
				return -1;
			if (hn >= need)
				break;
		}
		if (len - off < 5)
			return len >= BRIG_EGRESS_HELLO_MAX ? -1 : 1;
		const unsigned char *r = buf + off;
		if (r[0] != 0x16 || r[1] != 3 || r[2] > 4)
			return -1;
		size_t rl = get16(r + 3);
		if (rl == 0 || rl > 16384)
			return -1;
		if (len - off - 5 < rl)
			return len >= BRIG_EGRESS_HELLO_MAX ? -1 : 1;
		if (rl > sizeof hs - hn)
			return -1;
		memcpy(hs + hn, r + 5, rl);
		hn += rl;
		off += 5 + rl;
	}
	size_t body_len = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
	const unsigned char *p = hs + 4, *end = hs + 4 + body_len;
#define NEED(n)                                      \
	do {                                         \
		if ((size_t)(end - p) < (size_t)(n)) \
			return -1;                   \
	} while (0)
	NEED(2 + 32 + 1);
	p += 2 + 32;
	size_t sid = *p++;
	NEED(sid + 2);
	p += sid;
	size_t cs = get16(p);
	p += 2;
	NEED(cs + 1);
	p += cs;
	size_t comp = *p++;
	NEED(comp);
	p += comp;
	if (p == end)
		return -2; /* no extensions */
	NEED(2);
	size_t el = get16(p);
	p += 2;
	NEED(el);
	end = p + el;
	bool found = false;
	while (p < end) {
		NEED(4);
		unsigned type = get16(p), n = get16(p + 2);
		p += 4;
		NEED(n);
		if (type == 0xfe0d)
			return -3;
		if (type == 0) {
			if (found || n < 2)
				return -1;
			const unsigned char *q = p, *qe = p + n;
			size_t ll = get16(q);
			q += 2;
			if (ll != n - 2)
				return -1;
			while (q < qe) {
				if (qe - q < 3)
					return -1;
				unsigned nt = q[0];
				size_t nl = get16(q + 1);
				q += 3;
				if ((size_t)(qe - q) < nl)
					return -1;
				if (nt == 0) {
					if (found)
						return -1; /* two host names */
					if (brig_egress__host_check(out, outlen, (const char *)q, nl) != 0)
						return -1;
					found = true;
				}
				q += nl;
			}
			if (!found)
				return -2;
		}
		p += n;
	}
#undef NEED
	return found ? 0 : -2;
}
