/* manifest.c — the checkpoint manifest's text form (parse, format), the
 * ustar headers restore and export write, and the export archive reader.
 * Pure: no file or network I/O, so the fuzz targets drive it whole. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/cas.h"
#include "util/sha256.h"

void ck_manifest_free(ck_manifest *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].path);
		free(m->e[i].link);
	}
	free(m->e);
	*m = (ck_manifest){0};
}

ck_entry *ck_manifest_add(ck_manifest *m, const char *path, char type, unsigned mode, uint64_t size, int64_t mtime_ns,
			  const char *digest, const char *link)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 256;
		m->e = xrealloc(m->e, m->cap * sizeof *m->e);
	}
	ck_entry *x = &m->e[m->n++];
	*x = (ck_entry){.path = xstrdup(path),
			.link = link ? xstrdup(link) : NULL,
			.type = type,
			.mode = mode & 07777,
			.size = size,
			.mtime_ns = mtime_ns};
	if (digest)
		snprintf(x->digest, sizeof x->digest, "%s", digest);
	return x;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const ck_entry *)a)->path, ((const ck_entry *)b)->path);
}

void ck_manifest_sort(ck_manifest *m)
{
	if (m->n)
		qsort(m->e, m->n, sizeof *m->e, entry_cmp);
}

const ck_entry *ck_manifest_find(const ck_manifest *m, const char *path)
{
	ck_entry key = {.path = (char *)path};
	return m->n ? bsearch(&key, m->e, m->n, sizeof *m->e, entry_cmp) : NULL;
}

bool ck_path_ok(const char *p, size_t len)
{
	if (len == 0 || len > CK_MAX_NAME || memchr(p, '\0', len))
		return false;
	bool ws = len > 10 && strncmp(p, "workspace/", 10) == 0;
	bool rt = len > 8 && strncmp(p, "runtime/", 8) == 0;
	if (!ws && !rt)
		return false;
	size_t i = 0;
	while (i <= len) {
		size_t j = i;
		while (j < len && p[j] != '/')
			j++;
		size_t k = j - i;
		if (k == 0 || (k == 1 && p[i] == '.') || (k == 2 && p[i] == '.' && p[i + 1] == '.'))
			return false;
		i = j + 1;
	}
	return true;
}

/* ---- text form ---- */

static bool plain(unsigned char c)
{
	return c > 0x20 && c != '%' && c != 0x7f;
}

static void put_escaped(char **o, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (plain(*p)) {
			*(*o)++ = (char)*p;
		} else {
			*(*o)++ = '%';
			*(*o)++ = hex[*p >> 4];
			*(*o)++ = hex[*p & 15];
		}
	}
}

char *ck_manifest_format(const ck_manifest *m, size_t *len)
{
	size_t cap = sizeof CK_MANIFEST_MAGIC;
	for (size_t i = 0; i < m->n; i++)
		cap += 3 * (strlen(m->e[i].path) + (m->e[i].link ? strlen(m->e[i].link) : 0)) + 128;
	char *buf = xmalloc(cap);
	char *o = buf;
	memcpy(o, CK_MANIFEST_MAGIC, sizeof CK_MANIFEST_MAGIC - 1);
	o += sizeof CK_MANIFEST_MAGIC - 1;
	for (size_t i = 0; i < m->n; i++) {
		const ck_entry *x = &m->e[i];
		o += sprintf(o, "%c %04o %" PRIu64 " %" PRId64 " %s ", x->type, x->mode & 07777,
			     x->type == 'f' ? x->size : 0, x->mtime_ns, x->type == 'f' ? x->digest : "-");
		put_escaped(&o, x->path);
		if (x->type == 'l') {
			*o++ = ' ';
			put_escaped(&o, x->link);
		}
		*o++ = '\n';
	}
	*len = (size_t)(o - buf);
	return buf;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* One escaped field [s, e) into a new string; NULL when malformed. */
static char *unescape(const char *s, const char *e)
{
	if (e <= s || (size_t)(e - s) > 3 * CK_MAX_NAME)
		return NULL;
	char *out = xmalloc((size_t)(e - s) + 1);
	size_t n = 0;
	for (const char *p = s; p < e; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '%') {
			int h = e - p > 2 ? hexval(p[1]) : -1, l = e - p > 2 ? hexval(p[2]) : -1;
			if (h < 0 || l < 0) {
				free(out);
				return NULL;
			}
			c = (unsigned char)(h << 4 | l);
			p += 2;
		} else if (!plain(c)) {
			free(out);
			return NULL;
		}
		out[n++] = (char)c;
	}
	out[n] = '\0';
	if (n > CK_MAX_NAME || strlen(out) != n) {
		free(out);
		return NULL;
	}
	return out;
}

static bool is_hex64(const char *s, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* A decimal field; neg allows a leading '-'. */
static bool parse_num(const char *s, const char *e, bool neg, int64_t *out)
{
	bool minus = neg && s < e && *s == '-';
	if (minus)
		s++;
	if (s >= e || e - s > 19)
		return false;
	uint64_t v = 0;
	for (const char *p = s; p < e; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > INT64_MAX)
		return false;
	*out = minus ? -(int64_t)v : (int64_t)v;
	return true;
}

static int parse_line(ck_manifest *m, const char *s, const char *e)
{
	const char *f[7];
	const char *fe[7];
	size_t nf = 0;
	const char *p = s;
	while (p < e && nf < 7) {
		const char *q = memchr(p, ' ', (size_t)(e - p));
		if (!q)
			q = e;
		f[nf] = p;
		fe[nf++] = q;
		p = q + 1;
	}
	if (p < e || nf < 6)
		return -1;
	if (fe[0] - f[0] != 1 || !strchr("fdl", *f[0]))
		return -1;
	char type = *f[0];
	if (nf != (type == 'l' ? 7u : 6u))
		return -1;
	if (fe[1] - f[1] != 4)
		return -1;
	unsigned mode = 0;
	for (const char *c = f[1]; c < fe[1]; c++) {
		if (*c < '0' || *c > '7')
			return -1;
		mode = mode * 8 + (unsigned)(*c - '0');
	}
	int64_t size, mtime;
	if (!parse_num(f[2], fe[2], false, &size) || !parse_num(f[3], fe[3], true, &mtime))
		return -1;
	if (type != 'f' && size != 0)
		return -1;
	char digest[65] = "";
	if (type == 'f') {
		if (!is_hex64(f[4], (size_t)(fe[4] - f[4])))
			return -1;
		memcpy(digest, f[4], 64);
	} else if (fe[4] - f[4] != 1 || *f[4] != '-') {
		return -1;
	}
	cleanup_free char *path = unescape(f[5], fe[5]);
	if (!path || !ck_path_ok(path, strlen(path)))
		return -1;
	cleanup_free char *link = NULL;
	if (type == 'l' && !(link = unescape(f[6], fe[6])))
		return -1;
	ck_manifest_add(m, path, type, mode, (uint64_t)size, mtime, digest, link);
	return 0;
}

int ck_manifest_parse(ck_manifest *m, const char *buf, size_t len, brig_error **err)
{
	*m = (ck_manifest){0};
	size_t ml = sizeof CK_MANIFEST_MAGIC - 1;
	if (len < ml || memcmp(buf, CK_MANIFEST_MAGIC, ml) != 0)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "manifest: not a brig checkpoint manifest (version 1)");
	if (len > CK_MAX_MANIFEST)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "manifest: larger than %" PRIu64 " bytes",
				       (uint64_t)CK_MAX_MANIFEST);
	const char *p = buf + ml, *end = buf + len;
	size_t line = 1;
	uint64_t total = 0;
	int rc = 0;
	while (p < end) {
		line++;
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl || m->n >= CK_MAX_ENTRIES || parse_line(m, p, nl) != 0) {
			rc = -1;
			break;
		}
		const ck_entry *x = &m->e[m->n - 1];
		/* sorted and unique: restore writes parents first, and lookups bsearch */
		if (m->n > 1 && strcmp(m->e[m->n - 2].path, x->path) >= 0) {
			rc = -1;
			break;
		}
		total += x->size;
		if (total > CK_MAX_TOTAL) {
			rc = -1;
			break;
		}
		p = nl + 1;
	}
	/* an ancestor listed in the manifest is a directory: nothing lands
	 * through a symlink or under a file */
	for (size_t i = 0; rc == 0 && i < m->n; i++) {
		/* a copy: the entry's own name must not change under bsearch */
		cleanup_free char *path = xstrdup(m->e[i].path);
		for (char *s = strchr(strchr(path, '/') + 1, '/'); s && rc == 0; s = strchr(s + 1, '/')) {
			*s = '\0';
			const ck_entry *a = ck_manifest_find(m, path);
			if (a && a->type != 'd') {
				line = i + 2;
				rc = -1;
			}
			*s = '/';
		}
	}
	if (rc) {
		ck_manifest_free(m);
		return brig__error_set(err, BRIG_ECORRUPT, 0, "manifest: line %zu is malformed or breaks a rule", line);
	}
	return 0;
}

/* ---- ustar ---- */

static void octal(char *f, size_t w, uint64_t v)
{
	/* w-1 digits and a NUL */
	f[w - 1] = '\0';
	for (size_t i = w - 1; i-- > 0;) {
		f[i] = (char)('0' + (v & 7));
		v >>= 3;
	}
}

static size_t pax_record(char *o, const char *key, const char *val)
{
	size_t body = strlen(key) + strlen(val) + 3; /* ' ' '=' '\n' */
	size_t n = body + 1;
	while (snprintf(NULL, 0, "%zu", n) + body != n)
		n++;
	return (size_t)sprintf(o, "%zu %s=%s\n", n, key, val);
}

static void ustar(char *h, const char *name, char kind, unsigned mode, uint64_t size, int64_t mtime_s, const char *link)
{
	memset(h, 0, 512);
	snprintf(h, 100, "%s", name);
	octal(h + 100, 8, mode & 07777);
	octal(h + 108, 8, 1000);
	octal(h + 116, 8, 1000);
	octal(h + 124, 12, size);
	octal(h + 136, 12, mtime_s > 0 ? (uint64_t)mtime_s : 0);
	h[156] = kind;
	if (link)
		snprintf(h + 157, 100, "%s", link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

size_t ck_tar_header(char *buf, const char *name, char kind, unsigned mode, uint64_t size, int64_t mtime_ns,
		     const char *link)
{
	char pax[3 * 4200];
	size_t pl = 0;
	if (strlen(name) >= 100)
		pl += pax_record(pax + pl, "path", name);
	if (link && strlen(link) >= 100)
		pl += pax_record(pax + pl, "linkpath", link);
	int64_t sec = mtime_ns / 1000000000, ns = mtime_ns % 1000000000;
	if (ns < 0) {
		sec--;
		ns += 1000000000;
	}
	if (ns) {
		char v[48];
		snprintf(v, sizeof v, "%" PRId64 ".%09" PRId64, sec, ns);
		pl += pax_record(pax + pl, "mtime", v);
	}
	size_t o = 0;
	if (pl) {
		ustar(buf, "PaxHeader", 'x', 0644, pl, sec, NULL);
		memcpy(buf + 512, pax, pl);
		size_t padded = (pl + 511) & ~(size_t)511;
		memset(buf + 512 + pl, 0, padded - pl);
		o = 512 + padded;
	}
	ustar(buf + o, name, kind, mode, size, sec, link);
	return o + 512;
}

/* ---- the export archive reader ---- */

typedef struct arc_in {
	const char *pre;
	size_t pre_len, pre_off;
	ck_reader reader;
	void *payload;
} arc_in;

/* Exactly len bytes, or BRIG_EPROTO at a short stream. */
static int read_full(arc_in *in, char *buf, size_t len, brig_error **err)
{
	size_t got = 0;
	while (got < len) {
		if (in->pre_off < in->pre_len) {
			size_t k = in->pre_len - in->pre_off;
			if (k > len - got)
				k = len - got;
			memcpy(buf + got, in->pre + in->pre_off, k);
			in->pre_off += k;
			got += k;
			continue;
		}
		ssize_t n = in->reader(buf + got, len - got, in->payload, err);
		if (n < 0)
			return (int)n;
		if (n == 0)
			return brig__error_set(err, BRIG_EPROTO, 0, "checkpoint archive: it ends early (truncated?)");
		got += (size_t)n;
	}
	return 0;
}

static bool header_ok(const char *h, char name[101], uint64_t *size)
{
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)h[i];
	char chk[9] = {0};
	memcpy(chk, h + 148, 8);
	char *end = NULL;
	unsigned long want = strtoul(chk, &end, 8);
	if (end == chk || want != sum)
		return false;
	if (memcmp(h + 257, "ustar", 5) != 0 || (h[156] != '0' && h[156] != '\0'))
		return false;
	memcpy(name, h, 100);
	name[100] = '\0';
	uint64_t v = 0;
	size_t i = 124;
	while (i < 135 && h[i] == ' ')
		i++;
	size_t digits = 0;
	for (; i < 136 && h[i] >= '0' && h[i] <= '7'; i++, digits++)
		v = v * 8 + (uint64_t)(h[i] - '0');
	if (!digits || (i < 136 && h[i] != '\0' && h[i] != ' '))
		return false;
	*size = v;
	return true;
}

static int skip_pad(arc_in *in, uint64_t size, brig_error **err)
{
	char pad[512];
	size_t k = (size_t)((512 - size % 512) % 512);
	return k ? read_full(in, pad, k, err) : 0;
}

static int read_small(arc_in *in, uint64_t size, uint64_t cap, const char *what, char **out, brig_error **err)
{
	if (size > cap)
		return brig__error_set(err, BRIG_ETOOBIG, 0, "checkpoint archive: %s is larger than %" PRIu64 " bytes",
				       what, cap);
	char *b = xmalloc((size_t)size + 1);
	int rc = read_full(in, b, (size_t)size, err);
	if (!rc)
		rc = skip_pad(in, size, err);
	if (rc) {
		free(b);
		return rc;
	}
	b[size] = '\0';
	*out = b;
	return 0;
}

typedef struct need {
	char digest[65];
	uint64_t size;
	bool seen;
} need;

static int need_cmp(const void *a, const void *b)
{
	return strcmp(((const need *)a)->digest, ((const need *)b)->digest);
}

int ck_archive_read(ck_manifest *m, const char *pre, size_t pre_len, ck_reader reader, void *rpayload,
		    const ck_archive_sink *sink, brig_error **err)
{
	*m = (ck_manifest){0};
	arc_in in = {.pre = pre, .pre_len = pre_len, .reader = reader, .payload = rpayload};
	char h[512], name[101];
	uint64_t size = 0;
	int stage = 0; /* 0: session.json next, 1: manifest next, 2: blobs */
	need *needs = NULL;
	size_t nneeds = 0;
	cleanup_free char *buf = NULL;
	int rc = 0;
	for (;;) {
		if ((rc = read_full(&in, h, 512, err)) != 0)
			break;
		bool zero = true;
		for (size_t i = 0; i < 512 && zero; i++)
			zero = h[i] == 0;
		if (zero) {
			/* the second end block, then nothing else matters */
			if ((rc = read_full(&in, h, 512, err)) != 0)
				break;
			for (size_t i = 0; i < 512 && zero; i++)
				zero = h[i] == 0;
			if (!zero || stage != 2)
				rc = brig__error_set(err, BRIG_EPROTO, 0, "checkpoint archive: it ends early");
			break;
		}
		if (!header_ok(h, name, &size)) {
			rc = brig__error_set(
				err, BRIG_EPROTO, 0,
				"checkpoint archive: a header is malformed (not a brig checkpoint export)");
			break;
		}
		if (stage == 0) {
			if (strcmp(name, "brig-checkpoint/session.json") != 0) {
				rc = brig__error_set(
					err, BRIG_EPROTO, 0,
					"checkpoint archive: it does not start with brig-checkpoint/session.json");
				break;
			}
			if ((rc = read_small(&in, size, CK_MAX_META, "session.json", &buf, err)) != 0)
				break;
			json_error_t je;
			json_t *meta = json_loads(buf, JSON_REJECT_DUPLICATES, &je);
			free(steal_pointer(&buf));
			if (!json_is_object(meta)) {
				json_decref(meta);
				rc = brig__error_set(err, BRIG_EPROTO, 0,
						     "checkpoint archive: session.json is not a JSON object");
				break;
			}
			rc = sink->meta ? sink->meta(meta, sink->payload, err) : 0;
			json_decref(meta);
			if (rc)
				break;
			stage = 1;
		} else if (stage == 1) {
			if (strcmp(name, "brig-checkpoint/manifest") != 0) {
				rc = brig__error_set(err, BRIG_EPROTO, 0,
						     "checkpoint archive: brig-checkpoint/manifest must come second");
				break;
			}
			if ((rc = read_small(&in, size, CK_MAX_MANIFEST, "the manifest", &buf, err)) != 0 ||
			    (rc = ck_manifest_parse(m, buf, (size_t)size, err)) != 0)
				break;
			unsigned char d[32];
			char hex[65];
			brig_sha256(d, buf, (size_t)size);
			brig_hex(hex, d, 32);
			free(steal_pointer(&buf));
			/* the distinct blobs it needs, with their sizes */
			needs = xcalloc(m->n ? m->n : 1, sizeof *needs);
			for (size_t i = 0; i < m->n; i++) {
				if (m->e[i].type != 'f')
					continue;
				memcpy(needs[nneeds].digest, m->e[i].digest, 65);
				needs[nneeds++].size = m->e[i].size;
			}
			if (nneeds)
				qsort(needs, nneeds, sizeof *needs, need_cmp);
			size_t u = 0;
			for (size_t i = 0; i < nneeds && rc == 0; i++) {
				if (u && strcmp(needs[u - 1].digest, needs[i].digest) == 0) {
					if (needs[u - 1].size != needs[i].size)
						rc = brig__error_set(
							err, BRIG_ECORRUPT, 0,
							"checkpoint archive: the manifest gives one digest two sizes");
					continue;
				}
				needs[u++] = needs[i];
			}
			nneeds = u;
			if (rc)
				break;
			if (sink->manifest && (rc = sink->manifest(m, hex, sink->payload, err)) != 0)
				break;
			stage = 2;
		} else {
			need key = {0};
			if (strncmp(name, "brig-checkpoint/blobs/", 22) != 0 || strlen(name) != 22 + 64) {
				rc = brig__error_set(err, BRIG_EPROTO, 0, "checkpoint archive: an unexpected entry");
				break;
			}
			memcpy(key.digest, name + 22, 65);
			need *nd = nneeds ? bsearch(&key, needs, nneeds, sizeof *needs, need_cmp) : NULL;
			if (!nd || nd->seen || nd->size != size) {
				rc = brig__error_set(
					err, BRIG_ECORRUPT, 0,
					"checkpoint archive: a blob the manifest does not name, of another size, "
					"or a second time");
				break;
			}
			nd->seen = true;
			if (sink->blob_begin && (rc = sink->blob_begin(nd->digest, size, sink->payload, err)) != 0)
				break;
			brig_sha256_ctx sc;
			brig_sha256_init(&sc);
			char chunk[65536];
			uint64_t left = size;
			while (left && rc == 0) {
				size_t k = left < sizeof chunk ? (size_t)left : sizeof chunk;
				if ((rc = read_full(&in, chunk, k, err)) != 0)
					break;
				brig_sha256_update(&sc, chunk, k);
				if (sink->blob_data)
					rc = sink->blob_data(chunk, k, sink->payload, err);
				left -= k;
			}
			if (rc)
				break;
			unsigned char d[32];
			char hex[65];
			brig_sha256_final(&sc, d);
			brig_hex(hex, d, 32);
			if (strcmp(hex, nd->digest) != 0) {
				rc = brig__error_set(err, BRIG_ECORRUPT, 0,
						     "checkpoint archive: blob %.12s… does not match its digest",
						     nd->digest);
				break;
			}
			if ((rc = skip_pad(&in, size, err)) != 0)
				break;
			if (sink->blob_end && (rc = sink->blob_end(sink->payload, err)) != 0)
				break;
		}
	}
	free(needs);
	if (rc)
		ck_manifest_free(m);
	return rc;
}
