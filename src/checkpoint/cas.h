/* cas.h — incremental, content-addressed checkpoints (private to src/checkpoint/).
 *
 * A checkpoint is a manifest plus file blobs named by their SHA-256:
 *
 *   DIR/<sha256>.manifest      the manifest; <sha256> is its own digest, and
 *                              the store record's digest; blob = that name
 *   DIR/blobs/ab/abcdef…       one file's bytes, shared by every checkpoint
 *                              (of any session) holding the same bytes
 *   DIR/.gc.lock               flock: shared while a checkpoint decides what it
 *                              reuses and writes, exclusive while retention
 *                              removes blobs
 *
 * Taking one: brig-init lists both volumes with stat data; a file whose
 * size and mtime match the session's previous manifest keeps its digest;
 * the others are read — through brig-init, 8 at a time, or, from 256 files
 * on, out of one paused archive GET extracted (checked) into DIR/.stage-*
 * — hashed once and linked in as blobs. Nothing read: the listing is the
 * snapshot; up to 64 read: each is stat'ed again; more: the tree is listed
 * again; a difference goes round again (3 times, then the full copy).
 *
 * The older format, one zstd tar per checkpoint (DIR/<sha256>.tar.zst),
 * still restores: the record's blob name says which format it is.
 *
 * Manifest (text, one entry a line, sorted by path bytewise, unique):
 *
 *   brig-checkpoint-manifest 1\n
 *   TYPE MODE SIZE MTIME_NS DIGEST PATH [TARGET]\n
 *
 * TYPE f (file), d (directory), l (symlink); MODE 4 octal digits (& 07777);
 * SIZE and MTIME_NS decimal; DIGEST 64 lowercase hex for f, "-" otherwise;
 * PATH "workspace/…" or "runtime/…", TARGET (l only) the link's target, both
 * with bytes <= 0x20, '%' and 0x7f written as %XX. Rules checked by the
 * parser (the file is trusted no more than the disk it sits on): no empty,
 * "." or ".." component, names and targets under 4 KiB, an ancestor that is
 * in the manifest is a directory, at most CK_MAX_ENTRIES entries, sizes
 * summing to at most CK_MAX_TOTAL.
 *
 * Export archive (one checkpoint between machines): a ustar stream of
 *   brig-checkpoint/session.json  {"format":1,"ns","agent","session","generation","spec"}
 *   brig-checkpoint/manifest      the manifest
 *   brig-checkpoint/blobs/<sha>   each distinct file blob once, any order
 * read by ck_archive_read with every cap and digest checked (untrusted). */
#ifndef BRIG_CHECKPOINT_CAS_H
#define BRIG_CHECKPOINT_CAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "brig/session.h"
#include "util/util.h"

#define CK_MAX_ENTRIES 2000000
#define CK_MAX_TOTAL (UINT64_C(1) << 40)
#define CK_MAX_NAME 4095
#define CK_MAX_MANIFEST (UINT64_C(256) << 20)
#define CK_MAX_META (UINT64_C(1) << 20)
#define CK_MANIFEST_MAGIC "brig-checkpoint-manifest 1\n"

typedef struct ck_entry {
	char *path;
	char *link;    /* symlinks only */
	char type;     /* 'f', 'd', 'l' */
	unsigned mode; /* & 07777 */
	uint64_t size; /* files */
	int64_t mtime_ns;
	char digest[65]; /* files: lowercase hex; else "" */
} ck_entry;

typedef struct ck_manifest {
	ck_entry *e;
	size_t n, cap;
} ck_manifest;

void ck_manifest_free(ck_manifest *m);
/* Appends a copy of path/link (unsorted: ck_manifest_sort then check). */
ck_entry *ck_manifest_add(ck_manifest *m, const char *path, char type, unsigned mode, uint64_t size, int64_t mtime_ns,
			  const char *digest, const char *link);
void ck_manifest_sort(ck_manifest *m);
/* The entry of path, or NULL (m sorted). */
const ck_entry *ck_manifest_find(const ck_manifest *m, const char *path);
/* Parses buf (untrusted) into *m. Errors: BRIG_ECORRUPT naming the line. */
int ck_manifest_parse(ck_manifest *m, const char *buf, size_t len, brig_error **err);
/* The manifest's text (malloc'd) and its length. */
char *ck_manifest_format(const ck_manifest *m, size_t *len);
/* A path as the manifest allows it (checked components, length). */
bool ck_path_ok(const char *p, size_t len);

/* ---- ustar writing: one header (and a pax header before it for long names
 * or the nanosecond mtime) into buf (at most CK_TAR_HDR_MAX bytes); returns
 * the bytes written. kind '0' file, '5' dir, '2' symlink. ---- */
#define CK_TAR_HDR_MAX (512 * 4 + 3 * 4200)
size_t ck_tar_header(char *buf, const char *name, char kind, unsigned mode, uint64_t size, int64_t mtime_ns,
		     const char *link);

/* ---- the export archive reader ---- */
typedef struct ck_archive_sink {
	/* session.json (parsed object, borrowed) */
	int (*meta)(json_t *meta, void *payload, brig_error **err);
	/* the manifest, parsed and checked */
	int (*manifest)(const ck_manifest *m, const char *digest, void *payload, brig_error **err);
	/* one blob: begin (size known), data, end (digest checked by the reader) */
	int (*blob_begin)(const char *digest, uint64_t size, void *payload, brig_error **err);
	int (*blob_data)(const void *data, size_t len, void *payload, brig_error **err);
	int (*blob_end)(void *payload, brig_error **err);
	void *payload;
} ck_archive_sink;

typedef ssize_t (*ck_reader)(char *buf, size_t len, void *payload, brig_error **err);

/* Reads an export archive from reader (untrusted): the three kinds of entry
 * in order, sizes and names checked, each blob's bytes hashed and compared
 * with its name (BRIG_ECORRUPT), a blob the manifest does not name or a
 * second copy refused, the end-of-archive blocks required. pre/pre_len:
 * bytes already read from the stream. Missing blobs are the caller's to
 * find (ck_archive_read leaves *m with the manifest: caller frees). */
int ck_archive_read(ck_manifest *m, const char *pre, size_t pre_len, ck_reader reader, void *rpayload,
		    const ck_archive_sink *sink, brig_error **err);

/* The session (ns, agent, session; malloc'd) an export archive read from
 * fd (from its offset on; it is read past) names in its session.json, read
 * by ck_archive_read (untrusted): all NULL for anything not starting as an
 * archive (a checkpoint blob). For brig serve, which must know whose
 * namespace an import joins before it imports. Errors: BRIG_EPROTO,
 * BRIG_EIO and the reader's (checkpoint.c). */
int brig_checkpoint__archive_session(int fd, char **ns, char **agent, char **session, brig_error **err);

/* ---- on disk (cas.c) ---- */

/* What /workspace and /runtime of the inspected container can hold
 * (checkpoint.c): the cap on what a checkpoint reads. */
uint64_t brig_checkpoint__volume_cap(brig_engine *e, json_t *inspect);
/* The record names a manifest (the new format). */
bool ck_is_manifest_blob(const char *blob);
/* Incremental checkpoint of computer c (ref) through brig-init: 0 with
 * manifest_name, digest, raw and stored set; 1 when it cannot be done this way
 * (no brig-init, a tree too deep, the files kept changing): the caller then
 * takes the full copy. */
int ck_cas_create(brig_engine *e, brig_store *s, const brig_computer *c, const char *dir, char **manifest_name,
		  char digest[65], int64_t *raw, int64_t *stored, brig_error **err);
int ck_cas_restore(brig_engine *e, const char *dir, const brig_store_checkpoint *cp, const char *ref, brig_error **err);
/* Removes blobs no manifest in dir names, unless a checkpoint is running
 * (then the next one does). Best effort. */
void ck_cas_collect(const char *dir);
int ck_cas_export(brig_store *s, const char *dir, const brig_store_checkpoint *cp, int fd, brig_error **err);
int ck_cas_import(brig_store *s, const char *dir, brig_store_checkpoint **out, const char *ns, const char *agent,
		  const char *session, const char *pre, size_t pre_len, int fd, brig_error **err);

#endif
