/* tar_internal.h — what the files of src/tar share: the entry checker and its
 * path tree, the push→pull pump (worker thread), libarchive glue. Private. */
#ifndef BRIG_TAR_INTERNAL_H
#define BRIG_TAR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "tar/archive_dl.h" /* libarchive, dlopen-ed: its calls go through brig__archive */
#include "tar/tar.h"
#include "util/util.h"

#define BRIG_TAR__IOBUF (64 * 1024)
#define BRIG_TAR__NAME_MAX 255
#define BRIG_TAR__NONE UINT32_MAX

/* ---- messages ---- */

/* A name from a tar stream, fit for a message: non-printable bytes as \xNN,
 * quotes and backslashes escaped, cut to 120 bytes with "...", in double
 * quotes. New string. */
char *brig_tar__quote(const char *name);

/* ---- path tree: every path a stream named, as nodes (parent, component) ---- */

enum {
	BRIG_TAR__N_ROOT = 0,
	BRIG_TAR__N_IMPLIED, /* a parent directory no entry named (yet) */
	BRIG_TAR__N_DIR,
	BRIG_TAR__N_REG,
	BRIG_TAR__N_LNK,
};

typedef struct brig_tar__node {
	char *name;      /* one component, NUL-terminated */
	uint32_t parent; /* node index; the root (0) is its own parent */
	uint16_t namelen;
	uint16_t depth; /* components from the root (root: 0); capped by max_depth */
	uint8_t kind;
	/* extractor bookkeeping */
	bool made; /* directories: this extraction created it (else it was there) */
	unsigned mode;
	bool has_mtime;
	struct timespec mtime;
	int64_t uid, gid;
	uint64_t dev, ino; /* regular files: the inode created, for hardlinks */
} brig_tar__node;

typedef struct brig_tar__tree {
	brig_tar__node *nodes;
	uint32_t n, alloc;
	uint32_t *slots; /* open addressing, node index or NONE */
	uint32_t nslots; /* power of two */
	uint64_t key[2]; /* SipHash key: colliding names cost an attacker nothing */
} brig_tar__tree;

void brig_tar__tree_init(brig_tar__tree *t);
void brig_tar__tree_free(brig_tar__tree *t);
uint32_t brig_tar__tree_find(const brig_tar__tree *t, uint32_t parent, const char *name, size_t len);
uint32_t brig_tar__tree_add(brig_tar__tree *t, uint32_t parent, const char *name, size_t len, int kind);
/* Node indices from the first component down to node (root excluded) into
 * out (room for the node's depth); returns that depth. */
size_t brig_tar__tree_chain(const brig_tar__tree *t, uint32_t node, uint32_t *out);

/* ---- checker: the rules of tar.h applied to one entry at a time ---- */

typedef struct brig_tar__policy {
	brig_tar_limits limits; /* defaults filled in */
	unsigned strip;
	bool allow_symlinks;
	bool allow_absolute_symlinks;
	bool allow_hardlinks;
} brig_tar__policy;

/* A name cut into components ("." and empty ones dropped). */
typedef struct brig_tar__split {
	const char **comp;
	size_t *clen;
	size_t n, alloc;
} brig_tar__split;

typedef struct brig_tar__checker {
	brig_tar__policy pol;
	brig_tar__tree tree;
	uint64_t nodes_counted; /* entries + implied dirs, against max_entries */
	uint64_t bytes;         /* sizes accepted, against max_total_bytes */
	brig_tar_stats stats;
	char *norm; /* normalised path of the current entry */
	size_t norm_alloc;
	char *tnorm; /* normalised hardlink target */
	size_t tnorm_alloc;
	brig_tar__split name_split, link_split;
} brig_tar__checker;

/* One accepted entry; strings are borrowed from the checker or the
 * archive_entry and valid until the next check. */
typedef struct brig_tar__item {
	int type;           /* BRIG_TAR_FILE/DIR/SYMLINK/HARDLINK */
	bool skip;          /* stripped away or names the root: do nothing */
	const char *raw;    /* name as in the stream */
	const char *path;   /* normalised, after strip */
	const char *leaf;   /* last component, inside path */
	uint32_t node;      /* the entry's tree node */
	uint32_t parent;    /* its parent's node */
	uint32_t link_node; /* hardlink: the target's node */
	const char *link;   /* symlink: target as given; hardlink: normalised target */
	uint64_t size;      /* apparent size (0 unless a regular file) */
	unsigned mode;      /* & 0777 */
	bool has_mtime;
	struct timespec mtime;
	int64_t uid, gid;
} brig_tar__item;

/* Fills pol from limits and defaults; BRIG_EINVAL on nonsense values. */
int brig_tar__policy_init(brig_tar__policy *pol, const brig_tar_limits *limits, brig_error **err);
void brig_tar__checker_init(brig_tar__checker *ck, const brig_tar__policy *pol);
void brig_tar__checker_free(brig_tar__checker *ck);
/* Applies every rule to ae and records it in the tree. Errors: BRIG_EUNSAFE,
 * BRIG_ETOOBIG, BRIG_EPROTO, each naming the entry. */
int brig_tar__check(brig_tar__checker *ck, struct archive_entry *ae, brig_tar__item *it, brig_error **err);

/* ---- byte sources for libarchive's read side ---- */

typedef struct brig_tar__pump brig_tar__pump;

typedef struct brig_tar__source {
	brig_tar__pump *pump;   /* push mode, or */
	brig_tar_reader reader; /* pull mode */
	void *payload;
	char *buf; /* pull mode buffer */
	uint64_t bytes, max_bytes;
	int code; /* set when the source itself failed */
	brig_error *err;
} brig_tar__source;

/* Reads a tar (or an empty input) from src and hands each entry that ck's
 * rules let through and do not skip to each, with a (the reader) and src
 * for the entry's data. Stops at the end, at the first error or at each's first
 * non-zero return. Errors: a libarchive read error (as
 * brig_tar__archive_error), BRIG_EPROTO when the input stops at a block
 * boundary without the end-of-archive blocks after at least one header (an
 * empty input is a fine empty archive), brig_tar__check's, each's. */
typedef int (*brig_tar__each)(void *ctx, struct archive *a, brig_tar__source *src, const brig_tar__item *it,
			      brig_error **err);
int brig_tar__walk(brig_tar__source *src, brig_tar__checker *ck, brig_tar__each each, void *ctx, brig_error **err);
/* Turns a failed libarchive read call into an error: the source's own error
 * when it caused it, else BRIG_EPROTO with libarchive's text after `what`. */
int brig_tar__archive_error(struct archive *a, brig_tar__source *src, brig_error **err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void brig_tar__source_clear(brig_tar__source *src);

/* ---- pump: push bytes in, a worker thread pulls them through libarchive ---- */

typedef int (*brig_tar__body)(void *ctx, brig_tar__source *src, brig_error **err);

struct brig_tar__pump {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *in; /* filled by feed */
	size_t in_len;
	char *out;  /* last buffer handed to libarchive */
	bool eof;   /* producer is done */
	bool abort; /* consumer must stop */
	bool done;  /* body returned */
	bool started, joined;
	pthread_t thread;
	brig_tar__body body;
	void *ctx;
	brig_tar__source src;
	int code;        /* body's result */
	brig_error *err; /* body's error, kept to repeat */
};

void brig_tar__pump_init(brig_tar__pump *p, brig_tar__body body, void *ctx, uint64_t max_bytes);
int brig_tar__pump_feed(brig_tar__pump *p, const void *data, size_t len, brig_error **err);
int brig_tar__pump_finish(brig_tar__pump *p, brig_error **err);
/* Stops a running body and frees the pump's resources. */
void brig_tar__pump_destroy(brig_tar__pump *p);
/* Runs body in the calling thread over reader. */
int brig_tar__run_pull(brig_tar__body body, void *ctx, uint64_t max_bytes, brig_tar_reader reader, void *payload,
		       brig_error **err);

/* Copies err's code and message into *dst (for repeating a stored error). */
int brig_tar__error_copy(brig_error **dst, const brig_error *src, int code);
/* Keeps a stream's first failure: when r is an error and *code is still 0,
 * stores r in *code and a copy of *err in *kept, so every later call can
 * repeat it (brig_tar__error_copy). Returns r. */
int brig_tar__sticky(int *code, brig_error **kept, int r, brig_error **err);

#endif
