/* text.c — bytes from a computer as JSON text, for every surface that sends
 * command output or file names on (ops.h). */
#include <stdint.h>
#include <string.h>

#include "ops/ops.h"
#include "util/util.h"

static size_t utf8_seq(const unsigned char *p, size_t n)
{
	if (p[0] < 0x80)
		return p[0] ? 1 : 0;
	size_t len;
	uint32_t cp;
	if ((p[0] & 0xe0) == 0xc0)
		len = 2, cp = p[0] & 0x1f;
	else if ((p[0] & 0xf0) == 0xe0)
		len = 3, cp = p[0] & 0x0f;
	else if ((p[0] & 0xf8) == 0xf0)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool ops_is_text(const char *data, size_t len)
{
	const unsigned char *p = (const unsigned char *)data;
	for (size_t i = 0; i < len;) {
		size_t l = utf8_seq(p + i, len - i);
		if (!l)
			return false;
		i += l;
	}
	return true;
}

/* The JSON bytes of one byte of a valid sequence. */
static size_t json_byte(unsigned char c)
{
	if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
		return 2;
	return c < 0x20 ? 6 : 1;
}

/* The cost of data's longest prefix within budget, and its length in *fit
 * (may be NULL). */
static size_t json_fit_cost(const char *data, size_t len, size_t budget, size_t *fit)
{
	const unsigned char *p = (const unsigned char *)data;
	size_t i = 0, cost = 0;
	while (i < len) {
		size_t l = utf8_seq(p + i, len - i), c = l ? 0 : 3; /* an invalid byte: U+FFFD */
		for (size_t k = 0; k < l; k++)
			c += json_byte(p[i + k]);
		if (cost + c > budget)
			break;
		cost += c;
		i += l ? l : 1;
	}
	if (fit)
		*fit = i;
	return cost;
}

size_t ops_json_size(const char *data, size_t len)
{
	return json_fit_cost(data, len, SIZE_MAX, NULL);
}

size_t ops_json_fit(const char *data, size_t len, size_t budget)
{
	size_t fit = 0;
	json_fit_cost(data, len, budget, &fit);
	return fit;
}

json_t *ops_string(const char *data, size_t len)
{
	if (ops_is_text(data, len))
		return json_stringn(data, len);
	brig_buf b;
	brig_buf_init(&b, len * 3 + 1);
	const unsigned char *p = (const unsigned char *)data;
	for (size_t i = 0; i < len;) {
		size_t l = utf8_seq(p + i, len - i);
		if (l) {
			brig_buf_put(&b, p + i, l);
			i += l;
		} else {
			brig_buf_put(&b, "\xef\xbf\xbd", 3);
			i++;
		}
	}
	json_t *s = json_stringn(b.data ? b.data : "", b.len);
	brig_buf_free(&b);
	return s;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *ops_b64encode(const unsigned char *in, size_t len)
{
	char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i = 0;
	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*o++ = b64[v >> 18], *o++ = b64[(v >> 12) & 63], *o++ = b64[(v >> 6) & 63], *o++ = b64[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
		*o++ = b64[v >> 18], *o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = 0;
	return out;
}

static int b64val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

unsigned char *ops_b64decode(const char *in, size_t len, size_t *out_len)
{
	if (len % 4)
		return NULL;
	unsigned char *out = xmalloc(len / 4 * 3 + 1);
	size_t o = 0;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		for (int k = 0; k < 4; k++)
			v[k] = in[i + k] == '=' && i + 4 == len && k >= 2 ? -2 : b64val(in[i + k]);
		if (v[0] < 0 || v[1] < 0 || v[2] == -1 || v[3] == -1 || (v[2] == -2 && v[3] != -2)) {
			free(out);
			return NULL;
		}
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (v[2] >= 0)
			out[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		if (v[3] >= 0)
			out[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
	}
	out[o] = 0;
	*out_len = o;
	return out;
}
