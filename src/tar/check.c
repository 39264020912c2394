/* check.c — the safety rules for untrusted tar entries, shared by the
 * extractor and the copier: name normalisation, link checks, caps, path tree. */
#include "tar/tar_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- messages ---- */

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

char *brig_tar__quote(const char *name)
{
	enum { SHOWN = 120 };
	const unsigned char *p = (const unsigned char *)(name ? name : "");
	size_t n = strlen((const char *)p);
	/* Worst case: every byte becomes \xNN. */
	char *out = xmalloc(SHOWN * 4 + 8), *o = out;
	size_t used = 0, i = 0;
	*o++ = '"';
	while (i < n && used < SHOWN) {
		unsigned char c = p[i];
		if (c >= 0x80) {
			size_t l = utf8_seq(p + i, n - i);
			if (l) {
				memcpy(o, p + i, l);
				o += l;
				i += l;
				used += l;
				continue;
			}
		}
		if (c < 0x20 || c >= 0x7f) {
			o += sprintf(o, "\\x%02x", c);
		} else if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else {
			*o++ = (char)c;
		}
		i++;
		used++;
	}
	*o++ = '"';
	if (i < n) {
		memcpy(o, "...", 3);
		o += 3;
	}
	*o = '\0';
	return out;
}

/* ---- SipHash-2-4 (Aumasson & Bernstein), for the tree's hash table ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t siphash24(const unsigned char *in, size_t len, const uint64_t key[2])
{
	uint64_t v0 = UINT64_C(0x736f6d6570736575) ^ key[0];
	uint64_t v1 = UINT64_C(0x646f72616e646f6d) ^ key[1];
	uint64_t v2 = UINT64_C(0x6c7967656e657261) ^ key[0];
	uint64_t v3 = UINT64_C(0x7465646279746573) ^ key[1];
	uint64_t b = (uint64_t)len << 56;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t m = 0;
		for (int k = 0; k < 8; k++)
			m |= (uint64_t)in[i + k] << (8 * k);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (int k = 0; i < len; i++, k++)
		b |= (uint64_t)in[i] << (8 * k);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- path tree ---- */

static uint64_t node_hash(const brig_tar__tree *t, uint32_t parent, const char *name, size_t len)
{
	unsigned char buf[4 + BRIG_TAR__NAME_MAX];
	buf[0] = (unsigned char)parent;
	buf[1] = (unsigned char)(parent >> 8);
	buf[2] = (unsigned char)(parent >> 16);
	buf[3] = (unsigned char)(parent >> 24);
	memcpy(buf + 4, name, len);
	return siphash24(buf, 4 + len, t->key);
}

void brig_tar__tree_init(brig_tar__tree *t)
{
	memset(t, 0, sizeof *t);
	if (getrandom(t->key, sizeof t->key, GRND_NONBLOCK) != (ssize_t)sizeof t->key) {
		/* No entropy yet (early boot): a weaker key only costs speed. */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t->key[0] = (uint64_t)ts.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)(uintptr_t)t;
		t->key[1] = (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 32;
	}
	t->alloc = 64;
	t->nodes = xcalloc(t->alloc, sizeof *t->nodes);
	t->n = 1; /* the root: its own parent, empty name */
	t->nodes[0].name = xstrdup("");
	t->nodes[0].kind = BRIG_TAR__N_ROOT;
	t->nslots = 128;
	t->slots = xmalloc(t->nslots * sizeof *t->slots);
	memset(t->slots, 0xff, t->nslots * sizeof *t->slots);
}

void brig_tar__tree_free(brig_tar__tree *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->nodes[i].name);
	free(t->nodes);
	free(t->slots);
	memset(t, 0, sizeof *t);
}

uint32_t brig_tar__tree_find(const brig_tar__tree *t, uint32_t parent, const char *name, size_t len)
{
	/* No node has a longer name, and node_hash has no room for one. */
	if (len > BRIG_TAR__NAME_MAX)
		return BRIG_TAR__NONE;
	uint32_t mask = t->nslots - 1;
	for (uint32_t i = (uint32_t)node_hash(t, parent, name, len) & mask;; i = (i + 1) & mask) {
		uint32_t k = t->slots[i];
		if (k == BRIG_TAR__NONE)
			return BRIG_TAR__NONE;
		const brig_tar__node *nd = &t->nodes[k];
		if (nd->parent == parent && nd->namelen == len && memcmp(nd->name, name, len) == 0)
			return k;
	}
}

static void tree_insert_slot(brig_tar__tree *t, uint32_t idx)
{
	const brig_tar__node *nd = &t->nodes[idx];
	uint32_t mask = t->nslots - 1;
	uint32_t i = (uint32_t)node_hash(t, nd->parent, nd->name, nd->namelen) & mask;
	while (t->slots[i] != BRIG_TAR__NONE)
		i = (i + 1) & mask;
	t->slots[i] = idx;
}

uint32_t brig_tar__tree_add(brig_tar__tree *t, uint32_t parent, const char *name, size_t len, int kind)
{
	if (t->n == t->alloc) {
		t->alloc *= 2;
		t->nodes = xrealloc(t->nodes, t->alloc * sizeof *t->nodes);
	}
	uint32_t idx = t->n++;
	brig_tar__node *nd = &t->nodes[idx];
	memset(nd, 0, sizeof *nd);
	nd->name = xstrndup(name, len);
	nd->namelen = (uint16_t)len;
	nd->parent = parent;
	nd->kind = (uint8_t)kind;
	nd->depth = (uint16_t)(t->nodes[parent].depth + 1);
	if ((uint64_t)t->n * 2 > t->nslots) {
		free(t->slots);
		t->nslots *= 2;
		t->slots = xmalloc(t->nslots * sizeof *t->slots);
		memset(t->slots, 0xff, t->nslots * sizeof *t->slots);
		for (uint32_t i = 1; i < t->n; i++)
			tree_insert_slot(t, i);
	} else {
		tree_insert_slot(t, idx);
	}
	return idx;
}

size_t brig_tar__tree_chain(const brig_tar__tree *t, uint32_t node, uint32_t *out)
{
	size_t depth = t->nodes[node].depth;
	for (size_t i = depth; i > 0; i--) {
		out[i - 1] = node;
		node = t->nodes[node].parent;
	}
	return depth;
}

/* ---- policy ---- */

int brig_tar__policy_init(brig_tar__policy *pol, const brig_tar_limits *limits, brig_error **err)
{
	memset(pol, 0, sizeof *pol);
	if (limits)
		pol->limits = *limits;
	brig_tar_limits *l = &pol->limits;
	if (!l->max_total_bytes)
		l->max_total_bytes = BRIG_TAR_DEFAULT_MAX_TOTAL_BYTES;
	if (!l->max_entries)
		l->max_entries = BRIG_TAR_DEFAULT_MAX_ENTRIES;
	if (!l->max_name_len)
		l->max_name_len = BRIG_TAR_DEFAULT_MAX_NAME_LEN;
	if (!l->max_depth)
		l->max_depth = BRIG_TAR_DEFAULT_MAX_DEPTH;
	if (l->max_depth > 2048)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar limits: max_depth %u is over 2048", l->max_depth);
	if (l->max_entries > UINT32_MAX / 4)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar limits: max_entries %llu is over %u",
				       (unsigned long long)l->max_entries, UINT32_MAX / 4);
	if (l->max_name_len > (1u << 20))
		return brig__error_set(err, BRIG_EINVAL, 0, "tar limits: max_name_len %zu is over 1 MiB",
				       l->max_name_len);
	if (!l->max_stream_bytes) {
		uint64_t s = l->max_total_bytes, extra = l->max_entries * 2048 + (1u << 20);
		l->max_stream_bytes = s > UINT64_MAX - extra ? UINT64_MAX : s + extra;
	}
	return 0;
}

/* ---- checker ---- */

void brig_tar__checker_init(brig_tar__checker *ck, const brig_tar__policy *pol)
{
	memset(ck, 0, sizeof *ck);
	ck->pol = *pol;
	brig_tar__tree_init(&ck->tree);
}

static void split_free(brig_tar__split *s)
{
	free(s->comp);
	free(s->clen);
}

void brig_tar__checker_free(brig_tar__checker *ck)
{
	brig_tar__tree_free(&ck->tree);
	free(ck->norm);
	free(ck->tnorm);
	split_free(&ck->name_split);
	split_free(&ck->link_split);
	memset(ck, 0, sizeof *ck);
}

enum { SPLIT_OK = 0, SPLIT_DOTDOT = 1, SPLIT_LONG = 2 };

/* Cuts s at '/', dropping empty and "." components. */
static int split(brig_tar__split *sp, const char *s)
{
	size_t want = strlen(s) / 2 + 2;
	if (want > sp->alloc) {
		sp->alloc = want;
		sp->comp = xrealloc(sp->comp, want * sizeof *sp->comp);
		sp->clen = xrealloc(sp->clen, want * sizeof *sp->clen);
	}
	sp->n = 0;
	int r = SPLIT_OK;
	const char *p = s;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == 0 || (len == 1 && p[0] == '.')) {
			/* nothing */
		} else if (len == 2 && p[0] == '.' && p[1] == '.') {
			return SPLIT_DOTDOT;
		} else {
			if (len > BRIG_TAR__NAME_MAX)
				r = SPLIT_LONG;
			sp->comp[sp->n] = p;
			sp->clen[sp->n] = len;
			sp->n++;
		}
		p += len;
		if (*p == '/')
			p++;
	}
	return r;
}

/* Joins components [from, n) of sp with '/' into *buf. */
static char *join(char **buf, size_t *alloc, const brig_tar__split *sp, size_t from)
{
	size_t need = 1;
	for (size_t i = from; i < sp->n; i++)
		need += sp->clen[i] + 1;
	if (need > *alloc) {
		*alloc = need;
		*buf = xrealloc(*buf, need);
	}
	char *o = *buf;
	for (size_t i = from; i < sp->n; i++) {
		if (i > from)
			*o++ = '/';
		memcpy(o, sp->comp[i], sp->clen[i]);
		o += sp->clen[i];
	}
	*o = '\0';
	return *buf;
}

__attribute__((format(printf, 5, 6))) static int entry_error(brig_error **err, int code, const char *raw,
							     const char *tail, const char *fmt, ...)
{
	cleanup_free char *q = brig_tar__quote(raw);
	cleanup_free char *msg = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	return brig__error_set(err, code, 0, "tar entry %s: %s%s", q, msg ? msg : "?", tail ? tail : "");
}

static const char *type_name(int type)
{
	switch (type) {
	case BRIG_TAR_FILE: return "file";
	case BRIG_TAR_DIR: return "directory";
	case BRIG_TAR_SYMLINK: return "symlink";
	default: return "hard link";
	}
}

/* The lexical rule for a relative symlink target: ".." only as a leading
 * run, no more of them than the link's parent depth. */
static int check_symlink_target(brig_tar__checker *ck, const char *raw, const char *target, size_t link_depth,
				brig_error **err)
{
	const brig_tar__policy *pol = &ck->pol;
	size_t tlen = strlen(target);
	if (tlen == 0)
		return entry_error(err, BRIG_EPROTO, raw, NULL, "symlink with an empty target");
	if (tlen > pol->limits.max_name_len)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL, "symlink target is %zu bytes, over the cap of %zu",
				   tlen, pol->limits.max_name_len);
	cleanup_free char *qt = brig_tar__quote(target);
	if (target[0] == '/') {
		if (pol->allow_absolute_symlinks)
			return 0;
		return entry_error(err, BRIG_EUNSAFE, raw, NULL,
				   "symlink to the absolute path %s would point outside the destination", qt);
	}
	size_t ups = 0;
	bool named = false;
	for (const char *p = target; *p;) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			if (named)
				return entry_error(err, BRIG_EUNSAFE, raw, NULL,
						   "symlink target %s has \"..\" after a name, which could climb "
						   "out of the destination through another link",
						   qt);
			if (++ups > link_depth - 1)
				return entry_error(err, BRIG_EUNSAFE, raw, NULL,
						   "symlink target %s points outside the destination", qt);
		} else if (len > 0 && !(len == 1 && p[0] == '.')) {
			named = true;
		}
		p += len;
		if (*p == '/')
			p++;
	}
	return 0;
}

/* The entry's type, and whether the policy takes it: device nodes, FIFOs,
 * sockets and sparse entries never; links only when allowed. */
static int entry_type(const brig_tar__policy *pol, struct archive_entry *ae, const char *raw, bool hardlink,
		      int *out, brig_error **err)
{
	int type;
	if (hardlink) {
		type = BRIG_TAR_HARDLINK;
	} else {
		switch (archive_entry_filetype(ae)) {
		case AE_IFREG: type = BRIG_TAR_FILE; break;
		case AE_IFDIR: type = BRIG_TAR_DIR; break;
		case AE_IFLNK: type = BRIG_TAR_SYMLINK; break;
		case AE_IFCHR: return entry_error(err, BRIG_EUNSAFE, raw, NULL, "character device nodes are refused");
		case AE_IFBLK: return entry_error(err, BRIG_EUNSAFE, raw, NULL, "block device nodes are refused");
		case AE_IFIFO: return entry_error(err, BRIG_EUNSAFE, raw, NULL, "FIFOs are refused");
		case AE_IFSOCK: return entry_error(err, BRIG_EUNSAFE, raw, NULL, "sockets are refused");
		default:
			return entry_error(err, BRIG_EUNSAFE, raw, NULL, "unsupported entry type 0%o",
					   (unsigned)archive_entry_filetype(ae));
		}
	}
	if (type == BRIG_TAR_SYMLINK && !pol->allow_symlinks)
		return entry_error(err, BRIG_EUNSAFE, raw, NULL, "symlinks are not allowed here");
	if (type == BRIG_TAR_HARDLINK && !pol->allow_hardlinks)
		return entry_error(err, BRIG_EUNSAFE, raw, NULL, "hard links are not allowed here");
	/* libarchive keeps a sparse map as one allocation per region, outside
	 * every cap, and Docker never writes sparse entries. */
	if (archive_entry_sparse_count(ae) > 0)
		return entry_error(err, BRIG_EUNSAFE, raw, NULL, "sparse entries are not accepted");
	*out = type;
	return 0;
}

/* The entry's parents in the tree (name_split, after strip): implied ones
 * are created and counted; none may be a link or a file named earlier.
 * *cur gets the parent's node. */
static int walk_parents(brig_tar__checker *ck, const char *raw, uint32_t *out, brig_error **err)
{
	const brig_tar__split *ns = &ck->name_split;
	const brig_tar_limits *lim = &ck->pol.limits;
	brig_tar__tree *t = &ck->tree;
	uint32_t cur = 0;
	for (size_t i = ck->pol.strip; i + 1 < ns->n; i++) {
		uint32_t child = brig_tar__tree_find(t, cur, ns->comp[i], ns->clen[i]);
		if (child == BRIG_TAR__NONE) {
			if (++ck->nodes_counted > lim->max_entries)
				return brig__error_set(
					err, BRIG_ETOOBIG, 0,
					"tar stream has more than %llu entries (implied directories included), the cap",
					(unsigned long long)lim->max_entries);
			child = brig_tar__tree_add(t, cur, ns->comp[i], ns->clen[i], BRIG_TAR__N_IMPLIED);
		} else if (t->nodes[child].kind == BRIG_TAR__N_LNK) {
			return entry_error(err, BRIG_EUNSAFE, raw, NULL,
					   "path goes through a symlink the stream made earlier");
		} else if (t->nodes[child].kind == BRIG_TAR__N_REG) {
			return entry_error(err, BRIG_EUNSAFE, raw, NULL,
					   "path goes through a file the stream made earlier");
		}
		cur = child;
	}
	*out = cur;
	return 0;
}

/* A hard link's target: inside the destination, no "..", and a regular
 * file earlier in the stream (it->link_node, it->link). */
static int check_hardlink(brig_tar__checker *ck, const char *raw, const char *hardlink, brig_tar__item *it,
			  brig_error **err)
{
	const brig_tar__policy *pol = &ck->pol;
	const brig_tar_limits *lim = &pol->limits;
	brig_tar__tree *t = &ck->tree;
	size_t hlen = strlen(hardlink);
	cleanup_free char *qt = brig_tar__quote(hardlink);
	if (hlen > lim->max_name_len)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL, "hard link target is %zu bytes, over the cap",
				   hlen);
	if (hardlink[0] == '/')
		return entry_error(err, BRIG_EUNSAFE, raw, NULL,
				   "hard link to the absolute path %s would leave the destination", qt);
	brig_tar__split *ls = &ck->link_split;
	int lr = split(ls, hardlink);
	if (lr == SPLIT_DOTDOT)
		return entry_error(err, BRIG_EUNSAFE, raw, NULL, "hard link target %s has a \"..\" component",
				   qt);
	if (lr == SPLIT_LONG)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL,
				   "hard link target %s has a component longer than %d bytes", qt,
				   BRIG_TAR__NAME_MAX);
	uint32_t n = ls->n > pol->strip ? 0 : BRIG_TAR__NONE;
	for (size_t i = pol->strip; n != BRIG_TAR__NONE && i < ls->n; i++)
		n = brig_tar__tree_find(t, n, ls->comp[i], ls->clen[i]);
	if (n == BRIG_TAR__NONE || t->nodes[n].kind != BRIG_TAR__N_REG)
		return entry_error(err, BRIG_EUNSAFE, raw, NULL,
				   "hard link to %s, which is not a regular file earlier in the stream", qt);
	it->link_node = n;
	it->link = join(&ck->tnorm, &ck->tnorm_alloc, ls, pol->strip);
	return 0;
}

/* The checked entry's normalised fields, and the stream's counts. */
static void fill_item(brig_tar__checker *ck, struct archive_entry *ae, brig_tar__item *it, uint32_t parent, int type,
		      size_t leaflen, uint64_t size)
{
	it->parent = parent;
	it->type = type;
	it->path = join(&ck->norm, &ck->norm_alloc, &ck->name_split, ck->pol.strip);
	it->leaf = it->path + (strlen(it->path) - leaflen);
	it->size = type == BRIG_TAR_FILE ? size : 0;
	it->mode = (unsigned)archive_entry_perm(ae) & 0777;
	if (archive_entry_mtime_is_set(ae)) {
		it->has_mtime = true;
		it->mtime.tv_sec = (time_t)archive_entry_mtime(ae);
		long ns_ = archive_entry_mtime_nsec(ae);
		it->mtime.tv_nsec = ns_ >= 0 && ns_ < 1000000000L ? ns_ : 0;
	}
	it->uid = archive_entry_uid(ae);
	it->gid = archive_entry_gid(ae);

	switch (type) {
	case BRIG_TAR_FILE:
		ck->stats.files++;
		ck->stats.bytes += it->size;
		break;
	case BRIG_TAR_DIR: ck->stats.dirs++; break;
	case BRIG_TAR_SYMLINK: ck->stats.symlinks++; break;
	default: ck->stats.hardlinks++; break;
	}
}

int brig_tar__check(brig_tar__checker *ck, struct archive_entry *ae, brig_tar__item *it, brig_error **err)
{
	const brig_tar__policy *pol = &ck->pol;
	const brig_tar_limits *lim = &pol->limits;
	memset(it, 0, sizeof *it);
	it->link_node = BRIG_TAR__NONE;
	ck->stats.entries++;

	if (++ck->nodes_counted > lim->max_entries)
		return brig__error_set(err, BRIG_ETOOBIG, 0,
				       "tar stream has more than %llu entries (implied directories included), the cap",
				       (unsigned long long)lim->max_entries);

	const char *raw = archive_entry_pathname(ae);
	if (!raw)
		raw = archive_entry_pathname_utf8(ae);
	if (!raw || !*raw)
		return brig__error_set(err, BRIG_EPROTO, 0, "tar entry %llu has no name",
				       (unsigned long long)ck->stats.entries);
	it->raw = raw;
	size_t rawlen = strlen(raw);
	if (rawlen > lim->max_name_len)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL, "name is %zu bytes, over the cap of %zu", rawlen,
				   lim->max_name_len);
	if (raw[0] == '/')
		return entry_error(err, BRIG_EUNSAFE, raw, NULL,
				   "absolute name; every name must stay inside the destination");
	brig_tar__split *ns = &ck->name_split;
	int sr = split(ns, raw);
	if (sr == SPLIT_DOTDOT)
		return entry_error(err, BRIG_EUNSAFE, raw, NULL, "name has a \"..\" component");

	/* Type and policy before anything else, stripped entries included: a
	 * device node is refused wherever it sits. */
	const char *hardlink = archive_entry_hardlink(ae);
	if (!hardlink)
		hardlink = archive_entry_hardlink_utf8(ae);
	int type = 0;
	int r = entry_type(pol, ae, raw, hardlink != NULL, &type, err);
	if (r)
		return r;
	if (sr == SPLIT_LONG)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL, "a component is longer than %d bytes",
				   BRIG_TAR__NAME_MAX);

	/* Every entry's size counts, whatever its type, so data the reader must
	 * skip is bounded too. */
	int64_t sz = archive_entry_size_is_set(ae) ? archive_entry_size(ae) : 0;
	if (sz < 0)
		return entry_error(err, BRIG_EPROTO, raw, NULL, "negative size");
	if ((uint64_t)sz > lim->max_total_bytes - ck->bytes)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL,
				   "%llu bytes would pass the cap of %llu bytes (%llu already used)", (unsigned long long)sz, (unsigned long long)lim->max_total_bytes,
				   (unsigned long long)ck->bytes);
	ck->bytes += (uint64_t)sz;

	if (ns->n <= pol->strip) {
		it->skip = true;
		ck->stats.skipped++;
		return 0;
	}
	size_t depth = ns->n - pol->strip;
	if (depth > lim->max_depth)
		return entry_error(err, BRIG_ETOOBIG, raw, NULL, "%zu components deep, over the cap of %u", depth,
				   lim->max_depth);

	/* Parents: implied ones are created (and counted); none may be a link
	 * or a file named earlier. */
	brig_tar__tree *t = &ck->tree;
	uint32_t cur = 0;
	if ((r = walk_parents(ck, raw, &cur, err)) != 0)
		return r;
	const char *leaf = ns->comp[ns->n - 1];
	size_t leaflen = ns->clen[ns->n - 1];
	uint32_t existing = brig_tar__tree_find(t, cur, leaf, leaflen);
	if (existing != BRIG_TAR__NONE) {
		int ek = t->nodes[existing].kind;
		bool edir = ek == BRIG_TAR__N_DIR || ek == BRIG_TAR__N_IMPLIED;
		if (edir && type != BRIG_TAR_DIR)
			return entry_error(err, BRIG_EUNSAFE, raw, NULL, "a %s would replace a directory",
					   type_name(type));
		if (!edir)
			return entry_error(err, BRIG_EUNSAFE, raw, NULL,
					   "appears twice in the stream (a second entry could swap a file for a link)");
	}

	if (type == BRIG_TAR_SYMLINK) {
		const char *target = archive_entry_symlink(ae);
		if (!target)
			target = archive_entry_symlink_utf8(ae);
		if (!target)
			return entry_error(err, BRIG_EPROTO, raw, NULL, "symlink without a target");
		if ((r = check_symlink_target(ck, raw, target, depth, err)) != 0)
			return r;
		it->link = target;
	} else if (type == BRIG_TAR_HARDLINK) {
		if ((r = check_hardlink(ck, raw, hardlink, it, err)) != 0)
			return r;
	}

	if (existing != BRIG_TAR__NONE) {
		it->node = existing;
		t->nodes[existing].kind = BRIG_TAR__N_DIR;
	} else {
		int kind = type == BRIG_TAR_DIR       ? BRIG_TAR__N_DIR
			   : type == BRIG_TAR_SYMLINK ? BRIG_TAR__N_LNK
						      : BRIG_TAR__N_REG;
		it->node = brig_tar__tree_add(t, cur, leaf, leaflen, kind);
	}
	fill_item(ck, ae, it, cur, type, leaflen, (uint64_t)sz);
	return 0;
}
