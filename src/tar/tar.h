/* tar.h — brig's safe tar layer: extracting untrusted tar streams into a host
 * directory, building tar streams from host files, and re-owning copies. Private to src/.
 *
 * Four tools, all stream-oriented (a 100 MB file never sits in memory):
 *
 *   extractor  untrusted tar bytes (e.g. a container's archive GET of
 *              /outbox) → files under a host directory, enforcing the safety
 *              rules below, failing closed with BRIG_EUNSAFE.
 *   builder    host files/directories (or in-memory entries) → tar bytes
 *              through a pull reader, for the archive PUT endpoint.
 *   copier     untrusted tar bytes → a validated, re-owned, optionally
 *              zstd-compressed tar (checkpoints), with its SHA-256; and the
 *              restore reader that verifies a stored blob's digest before it
 *              streams a single byte.
 *   splitter   a restored blob → one tar per top-level prefix (a checkpoint's
 *              volumes), each into its own fd, on a worker thread.
 *
 * Two ways to hand untrusted bytes to the extractor and the copier:
 *   - push (`_feed` + `_finish`, or `_data_cb`): bytes in any chunks, as the
 *     engine's archive GET delivers them. libarchive can only pull, so push mode
 *     runs libarchive on a worker thread (all signals blocked) that pulls from a
 *     64 KiB double buffer; `_feed` copies and returns as soon as its bytes are
 *     buffered, so errors found by the worker surface on a later `_feed` or at
 *     `_finish`. Callbacks given in the options (on_entry, the copier's writer)
 *     then run on that worker thread, one at a time.
 *   - pull (`_from_reader`): the caller's thread runs libarchive on a
 *     brig_tar_reader; no thread.
 *
 * The rules (extractor and copier apply the same checker):
 *   - names: no absolute name, no ".." component, at most max_name_len bytes,
 *     at most max_depth components (after strip_components), each ≤ 255 bytes.
 *     "." and empty components are dropped; an entry that names the root of the
 *     tree (after stripping) is skipped. Names are bytes: UTF-8, spaces and
 *     control characters pass (a NUL cannot: tar names end at it); messages
 *     quote names with non-printable bytes escaped, cut to 120 bytes.
 *   - types: regular files, directories; symlinks only with allow_symlinks and
 *     a target that stays inside the tree: not absolute (copier: unless
 *     allow_absolute_symlinks), ".." components only as a leading run no longer
 *     than the link's own depth (so "../x" from "a/l" is fine, "a/../b" and
 *     "../../x" from "a/l" are refused — a ".." after a name could climb out
 *     through another link); hardlinks only with allow_hardlinks and only to
 *     a regular file that appeared earlier in the same stream. Device nodes,
 *     FIFOs, sockets, unknown types and sparse entries (Docker writes none;
 *     libarchive's sparse maps cost memory outside every cap) are refused.
 *   - tree: no entry may go through an earlier symlink or regular file of
 *     the stream; a non-directory path may appear only once and a directory
 *     is never replaced by anything else (directories may repeat).
 *   - caps (BRIG_ETOOBIG): entries (implied parent directories count), the sum
 *     of entry sizes (checked before any data is written), the raw stream
 *     length.
 *   - modes: & 0777 — setuid, setgid and sticky bits never survive; the
 *     extractor also removes the umask's bits.
 *
 * libarchive is opened (dlopen) by the first extractor, builder, copier or
 * restore created, not when the program starts (archive_dl.h); libcrypto, for
 * the SHA-256, by the first copier, restore or brig_tar_sha256_fd
 * (util/openssl_dl.h).
 *
 * Every function taking brig_error **err accepts NULL there. Returned objects
 * belong to the caller and are freed by their own _free (which accepts NULL).
 */
#ifndef BRIG_TAR_H
#define BRIG_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "brig/error.h"

/* Produces bytes: returns how many were written to buf (≤ len), 0 at the end,
 * or a negative BRIG_E code (with *err set) to abort. Same signature as
 * brig_engine_reader, so either can be passed where the other is expected. */
typedef ssize_t (*brig_tar_reader)(char *buf, size_t len, void *payload, brig_error **err);

/* Consumes bytes: returns 0, or a negative BRIG_E code (with *err set) to
 * abort the producer. */
typedef int (*brig_tar_writer)(const void *data, size_t len, void *payload, brig_error **err);

/* Entry kinds, as reported to callbacks and in stats. */
enum { BRIG_TAR_FILE = 1, BRIG_TAR_DIR = 2, BRIG_TAR_SYMLINK = 3, BRIG_TAR_HARDLINK = 4 };

/* Called once per entry that was materialised (extractor) or written
 * (copier): path is the normalised name after strip_components (borrowed,
 * valid during the call), size the entry's apparent size. Runs on the worker
 * thread in push mode. */
typedef void (*brig_tar_entry_cb)(const char *path, int type, uint64_t size, void *payload);

/* Caps on one untrusted stream; 0 in any field means its default. */
typedef struct brig_tar_limits {
	uint64_t max_total_bytes;  /* sum of entry sizes; 0: 1 GiB */
	uint64_t max_entries;      /* entries, implied parent dirs included; 0: 50 000 */
	size_t max_name_len;       /* bytes of a name or link target; 0: 4096 */
	unsigned max_depth;        /* components of a name; 0: 128; at most 2048 */
	uint64_t max_stream_bytes; /* raw tar bytes read; 0: max_total_bytes + 2 KiB
				      per allowed entry + 1 MiB (headers, padding) */
} brig_tar_limits;

#define BRIG_TAR_DEFAULT_MAX_TOTAL_BYTES (UINT64_C(1) << 30)
#define BRIG_TAR_DEFAULT_MAX_ENTRIES 50000
#define BRIG_TAR_DEFAULT_MAX_NAME_LEN 4096
#define BRIG_TAR_DEFAULT_MAX_DEPTH 128

/* What one stream contained. */
typedef struct brig_tar_stats {
	uint64_t entries; /* headers read (skipped ones included) */
	uint64_t files;   /* regular files */
	uint64_t dirs;    /* directory entries (implied parents not counted) */
	uint64_t symlinks;
	uint64_t hardlinks;
	uint64_t skipped; /* entries removed by strip_components or naming the root */
	uint64_t bytes;   /* sum of regular files' apparent sizes */
} brig_tar_stats;

/* ======================================================================
 * Extractor: untrusted tar stream → host directory
 * ====================================================================== */

#define BRIG_TAR_EXTRACT_OPTS_VERSION 1
#define BRIG_TAR_EXTRACT_OPTS_INIT {.version = BRIG_TAR_EXTRACT_OPTS_VERSION}

typedef struct brig_tar_extract_opts {
	unsigned version; /* BRIG_TAR_EXTRACT_OPTS_VERSION (1..current) */
	brig_tar_limits limits;
	unsigned strip_components;  /* leading components removed from every name
				       (1 for a Docker archive GET of a directory:
				       "outbox/a.txt" → "a.txt"); hardlink targets too */
	bool allow_symlinks;        /* else any symlink entry is BRIG_EUNSAFE */
	bool allow_hardlinks;       /* else any hardlink entry is BRIG_EUNSAFE */
	bool keep_owners;           /* chown to the header uid/gid (needs CAP_CHOWN);
				       default: files belong to the extracting user */
	brig_tar_entry_cb on_entry; /* may be NULL */
	void *payload;              /* for on_entry */
} brig_tar_extract_opts;

typedef struct brig_tar_extract brig_tar_extract;

/* Prepares to extract into the directory `path` opened relative to `dirfd`
 * (openat rules: AT_FDCWD, or an absolute path; path NULL: dirfd itself,
 * which is duplicated — the caller keeps its own). The destination itself is
 * trusted and resolved normally; everything below it is walked component by
 * component with O_NOFOLLOW, so a symlink inside it — one that was already
 * there or one the stream made — is never followed; an entry that would pass
 * through one fails with BRIG_EUNSAFE.
 *
 * Existing non-directories at an entry's path are replaced (unlinked, then
 * created with O_EXCL: never written through); existing directories are
 * merged into, never replaced, and keep their own mode, owner and times.
 * Regular files get mode & 0777 & ~umask (the process umask when the
 * extractor was made: the stream cannot hand the user world-writable files
 * the user's own tools would not make) and the entry's mtime; directories
 * this extraction created get theirs the same way at the end (so a
 * read-only directory can still be filled); symlinks get their mtime. Times
 * are best effort (one the file system refuses is skipped); modes and data
 * are not.
 *
 * On failure nothing has been created or written outside the destination.
 * What was extracted before the failing entry stays (the failing entry's own
 * partial file is removed); directories are then left 0700. Callers that need
 * all-or-nothing extract into a fresh directory and rename it.
 *
 * opts may be NULL (defaults: no symlinks, no hardlinks, no strip).
 * *out belongs to the caller (brig_tar_extract_free).
 * Errors: BRIG_EINVAL (bad options), BRIG_EIO (cannot open the destination,
 * or libarchive cannot be loaded). */
int brig_tar_extract_new(brig_tar_extract **out, int dirfd, const char *path, const brig_tar_extract_opts *opts,
			 brig_error **err);

/* Push mode: hands the next len bytes of the stream (any chunking, len 0 is
 * fine). Starts the worker thread on the first call. Returns once the bytes
 * are buffered; an error the worker met earlier is returned here. Bytes after
 * the end-of-archive marker are ignored.
 * Errors: BRIG_EUNSAFE, BRIG_ETOOBIG, BRIG_EPROTO (malformed tar), BRIG_EIO
 * (local file system, e.g. ENOSPC), BRIG_EDENIED (EACCES/EPERM locally, e.g.
 * chown refused with keep_owners), BRIG_EINVAL (called after _finish or
 * _from_reader). Once an error is returned, every later call returns the
 * same code and message. */
int brig_tar_extract_feed(brig_tar_extract *x, const void *data, size_t len, brig_error **err);

/* brig_engine_data_cb-shaped adapter for brig_engine_archive_get: payload is
 * the extractor. Returns 0 or a negative BRIG_E code; the error message is
 * kept and returned by brig_tar_extract_finish. */
int brig_tar_extract_data_cb(const char *data, size_t len, void *payload);

/* Ends push mode: the stream is complete; waits for the worker, then applies
 * directory modes and mtimes. A stream cut short is BRIG_EPROTO. Calling it
 * without any feed extracts an empty stream.
 * Errors: those of brig_tar_extract_feed. */
int brig_tar_extract_finish(brig_tar_extract *x, brig_error **err);

/* Pull mode, instead of feed/finish: reads the whole stream from reader in
 * the calling thread and extracts it. A reader error aborts with its code and
 * message. Errors: those of brig_tar_extract_feed and the reader's. */
int brig_tar_extract_from_reader(brig_tar_extract *x, brig_tar_reader reader, void *payload, brig_error **err);

/* Counts so far (complete after finish). Borrowed; valid until _free. Do not
 * read while a worker is running (between the first feed and finish). */
const brig_tar_stats *brig_tar_extract_stats(const brig_tar_extract *x);

/* Stops a running worker (the stream is abandoned), closes the destination
 * and frees x. Accepts NULL. */
void brig_tar_extract_free(brig_tar_extract *x);

/* ======================================================================
 * Builder: host paths / in-memory entries → tar stream (pull)
 * ====================================================================== */

#define BRIG_TAR_BUILD_OPTS_VERSION 1
#define BRIG_TAR_BUILD_OPTS_INIT {.version = BRIG_TAR_BUILD_OPTS_VERSION}

typedef struct brig_tar_build_opts {
	unsigned version;         /* BRIG_TAR_BUILD_OPTS_VERSION (1..current) */
	unsigned uid, gid;        /* written into every header (zeroed options: 0:0) */
	unsigned mode_mask;       /* AND-ed into every mode after & 0777; 0: 0777
				     (e.g. 0555 strips write bits for read-only inputs) */
	bool skip_special;        /* skip device nodes, FIFOs and sockets met on the
				     host; default: BRIG_EINVAL naming the file */
	bool deref_roots;         /* follow a symlink given to add_path itself (cp -H);
				     symlinks below a root are always stored as links */
	uint64_t max_total_bytes; /* sum of file sizes; 0: no cap */
	uint64_t max_entries;     /* 0: no cap */
} brig_tar_build_opts;

typedef struct brig_tar_builder brig_tar_builder;

/* Creates a builder. Sources are added with the _add functions, then the tar
 * is produced by brig_tar_builder_read. Generation is streaming: the host tree
 * is walked lazily (directory listings sorted by name, so output is
 * deterministic for a given tree) and files are read in 64 KiB pieces while
 * the caller reads; there is no temporary file. Output is POSIX pax
 * (plain ustar headers unless a name, size or id needs pax).
 * opts may be NULL (0:0, 0777, refuse special files, no caps).
 * *out belongs to the caller (brig_tar_builder_free). Errors: BRIG_EINVAL,
 * BRIG_EIO (libarchive cannot be loaded). */
int brig_tar_builder_new(brig_tar_builder **out, const brig_tar_build_opts *opts, brig_error **err);

/* Queues a host file, directory (recursively) or symlink under the archive
 * name `name` (e.g. host "./data" as "inbox/data"). The host path is only
 * checked to exist now (lstat, or stat with deref_roots); it is read during
 * brig_tar_builder_read. Host symlinks are stored as symlinks, never
 * followed (except the root with deref_roots); files that change size while
 * being read fail with BRIG_EIO; hard-linked files are stored as separate
 * copies. Both strings are copied.
 * Errors: BRIG_EINVAL (name absolute, empty, with a ".." component, or
 * called after reading began), BRIG_EIO (host path missing/unreadable). */
int brig_tar_builder_add_path(brig_tar_builder *b, const char *host_path, const char *name, brig_error **err);

/* Queues a regular file with the given contents (copied) and mode (& 0777,
 * then the mask). Caps are applied when it is read. Errors: BRIG_EINVAL (as
 * add_path). */
int brig_tar_builder_add_file(brig_tar_builder *b, const char *name, const void *data, size_t len, unsigned mode,
			      brig_error **err);

/* Queues a directory entry. Errors: BRIG_EINVAL (as add_path). */
int brig_tar_builder_add_dir(brig_tar_builder *b, const char *name, unsigned mode, brig_error **err);

/* Queues a symlink name → target (target copied verbatim, not checked: the
 * builder's inputs are trusted). Errors: BRIG_EINVAL (as add_path, or an
 * empty target). */
int brig_tar_builder_add_symlink(brig_tar_builder *b, const char *name, const char *target, brig_error **err);

/* Produces up to len bytes of the tar stream into buf: returns the count, 0
 * at the end (after the end-of-archive blocks), or a negative code. After an
 * error every later call returns the same code.
 * Errors: BRIG_EIO (host file unreadable, changed while read), BRIG_EINVAL
 * (special file without skip_special, a name too long for its component),
 * BRIG_ETOOBIG (caps). */
ssize_t brig_tar_builder_read(brig_tar_builder *b, char *buf, size_t len, brig_error **err);

/* brig_tar_reader / brig_engine_reader-shaped adapter: payload is the builder. */
ssize_t brig_tar_builder_reader(char *buf, size_t len, void *payload, brig_error **err);

/* Counts of what has been produced so far. Borrowed; valid until _free. */
const brig_tar_stats *brig_tar_builder_stats(const brig_tar_builder *b);

/* Frees b and closes any host file it holds. Accepts NULL. */
void brig_tar_builder_free(brig_tar_builder *b);

/* ======================================================================
 * Copier: untrusted tar stream(s) → validated, re-owned tar (+ SHA-256)
 * ====================================================================== */

#define BRIG_TAR_COPY_OPTS_VERSION 1
#define BRIG_TAR_COPY_OPTS_INIT {.version = BRIG_TAR_COPY_OPTS_VERSION}

enum { BRIG_TAR_COMPRESS_NONE = 0, BRIG_TAR_COMPRESS_ZSTD = 1 };

typedef struct brig_tar_copy_opts {
	unsigned version;          /* BRIG_TAR_COPY_OPTS_VERSION (1..current) */
	brig_tar_limits limits;    /* entries and bytes across all input streams
				      together; max_stream_bytes per input */
	unsigned strip_components; /* as for the extractor */
	bool allow_symlinks;
	bool allow_absolute_symlinks; /* keep "/usr/bin/python3"-style targets: safe
					 only because the output goes back into a
					 container, never onto the host */
	bool allow_hardlinks;
	bool rewrite_owner; /* write uid/gid below into every header, e.g.
			       1000:1000; default: keep the input's ids */
	unsigned uid, gid;
	int compression;            /* BRIG_TAR_COMPRESS_NONE or _ZSTD */
	int zstd_level;             /* 1..19; 0: 3 */
	brig_tar_entry_cb on_entry; /* may be NULL */
	void *payload;              /* for on_entry */
	/* Entry paths (as written: after stripping, no leading or trailing
	 * '/') left out of the copy together with everything under them,
	 * NULL-terminated; may be NULL. Still checked, never written. */
	const char *const *exclude;
} brig_tar_copy_opts;

/* What a finished copy produced. */
typedef struct brig_tar_copy_result {
	char sha256[65];    /* lowercase hex SHA-256 of every byte given to the writer */
	uint64_t out_bytes; /* bytes given to the writer (compressed size) */
	uint64_t tar_bytes; /* size of the tar before compression */
	brig_tar_stats stats;
} brig_tar_copy_result;

typedef struct brig_tar_copy brig_tar_copy;

/* Creates a copier writing to `write` (payload passed through). Each input
 * stream (push: feed… then end_input; pull: from_reader) is parsed,
 * every entry checked by the rules at the top of this file without touching
 * any file system, and re-written with only: normalised name, type, mode &
 * 0777, size, mtime, uid/gid (rewritten or kept), link target. Extended
 * attributes, ACLs and user/group names are dropped; sparse entries are
 * refused, as by the extractor. Entries of several
 * inputs land in one output, e.g. /workspace and /runtime in one blob.
 * The writer is called with output as it is produced (on the worker thread
 * in push mode); it is never called after it returned an error.
 * opts may be NULL (no symlinks, no hardlinks, no compression).
 * *out belongs to the caller (brig_tar_copy_free).
 * Errors: BRIG_EINVAL (bad options), BRIG_EIO (compressor set-up, or
 * libarchive or libcrypto cannot be loaded). */
int brig_tar_copy_new(brig_tar_copy **out, const brig_tar_copy_opts *opts, brig_tar_writer write, void *payload,
		      brig_error **err);

/* Push mode: next bytes of the current input stream (a new one starts with
 * the first feed after new/end_input). Errors: BRIG_EUNSAFE, BRIG_ETOOBIG,
 * BRIG_EPROTO, BRIG_EINVAL (after finish or an earlier error), or the
 * writer's code. Once an error is returned, every later call fails. */
int brig_tar_copy_feed(brig_tar_copy *c, const void *data, size_t len, brig_error **err);

/* brig_engine_data_cb-shaped adapter: payload is the copier; the message of a
 * failure is kept and returned by the next end_input/finish. */
int brig_tar_copy_data_cb(const char *data, size_t len, void *payload);

/* Ends the current push-mode input stream: waits until every entry is
 * checked and written. A stream cut short is BRIG_EPROTO. Without any feed
 * since the last end it copies an empty stream. Errors: as feed. */
int brig_tar_copy_end_input(brig_tar_copy *c, brig_error **err);

/* Pull mode: copies one whole input stream read from reader, in the calling
 * thread. Errors: as feed, plus the reader's. */
int brig_tar_copy_from_reader(brig_tar_copy *c, brig_tar_reader reader, void *payload, brig_error **err);

/* Ends any open input, writes the end-of-archive blocks, flushes the
 * compressor and fills *out (may be NULL). The copy is only complete and its
 * digest only meaningful when this returns 0. Errors: as feed. */
int brig_tar_copy_finish(brig_tar_copy *c, brig_tar_copy_result *out, brig_error **err);

/* Frees c, abandoning any running input. Accepts NULL. */
void brig_tar_copy_free(brig_tar_copy *c);

/* brig_tar_writer that appends to a file descriptor: payload points to an
 * int holding the fd. Errors: BRIG_EIO (with errno, e.g. ENOSPC). */
int brig_tar_write_fd(const void *data, size_t len, void *payload, brig_error **err);

/* ======================================================================
 * Restore: stored blob (zstd or plain tar) → plain tar stream (pull)
 * ====================================================================== */

typedef struct brig_tar_restore brig_tar_restore;

/* Opens the blob `path` (openat rules as brig_tar_extract_new; path NULL:
 * dirfd itself, duplicated) and computes the SHA-256 of the whole file
 * BEFORE returning: a digest that differs from sha256_hex (64 hex digits,
 * any case) — a truncated, extended or altered blob — is BRIG_ECORRUPT and
 * nothing can be read. The blob is then decompressed (zstd, or passed
 * through when it is not compressed) as it is read; the file is hashed again
 * on the way and a change since the first pass also ends in BRIG_ECORRUPT
 * (at the end of the stream, as it cannot be known earlier).
 * The content is not re-validated as tar: the digest proves it is what
 * brig_tar_copy wrote. *out belongs to the caller (brig_tar_restore_free).
 * Errors: BRIG_EINVAL (malformed digest), BRIG_EIO (cannot open or read, or
 * libarchive or libcrypto cannot be loaded), BRIG_ECORRUPT. */
int brig_tar_restore_open(brig_tar_restore **out, int dirfd, const char *path, const char *sha256_hex,
			  brig_error **err);

/* Produces up to len bytes of the plain tar into buf: count, 0 at the end,
 * or a negative code. Errors: BRIG_EIO, BRIG_ECORRUPT (undecodable data or
 * the file changed after it was verified). */
ssize_t brig_tar_restore_read(brig_tar_restore *r, char *buf, size_t len, brig_error **err);

/* brig_tar_reader / brig_engine_reader-shaped adapter: payload is the restore. */
ssize_t brig_tar_restore_reader(char *buf, size_t len, void *payload, brig_error **err);

/* Closes the blob and frees r. Accepts NULL. */
void brig_tar_restore_free(brig_tar_restore *r);

/* ======================================================================
 * Splitter: restored blob → one plain tar per top-level prefix
 * ====================================================================== */

#define BRIG_TAR_SPLIT_MAX 4

typedef struct brig_tar_split brig_tar_split;

/* Starts a worker thread that reads r (a verified restore, borrowed: keep
 * it until brig_tar_split_join returns) in one pass and writes the entries
 * whose names start with prefixes[k] ("workspace/") into fds[k] as a tar of
 * their own, the prefix removed from names and hard-link targets (a hard
 * link to another prefix is dropped); the prefix's own root entry and names
 * under no prefix are skipped. The entries must come grouped in the order
 * of prefixes (as brig_tar_copy wrote them, one input after the other):
 * interleaved groups are BRIG_ECORRUPT. An output without entries gets an
 * empty tar. The entries are not re-validated: the digest proves they are
 * what brig_tar_copy wrote. The fds (n of them, 1..BRIG_TAR_SPLIT_MAX,
 * typically pipes' write ends) are taken in every case and each closed as
 * soon as its tar is complete, so a reader sees its end without waiting for
 * the others; a reader that stops early should close its end so the worker
 * is not blocked. *out belongs to the caller until brig_tar_split_join.
 * Errors: BRIG_EINVAL (n), BRIG_EIO (libarchive cannot be loaded, no
 * thread). */
int brig_tar_split_start(brig_tar_split **out, brig_tar_restore *r, const char *const *prefixes, const int *fds,
			 size_t n, brig_error **err);

/* Waits for the worker and frees s; returns its result. Errors: BRIG_EIO
 * (a write failed, e.g. the reader closed its end), BRIG_ECORRUPT (the blob
 * failed its check while being read, or is not a tar grouped as said). */
int brig_tar_split_join(brig_tar_split *s, brig_error **err);

/* Lowercase hex SHA-256 of everything readable from fd (read from its
 * current offset to the end) into out (65 bytes); *size (may be NULL) gets
 * the byte count. Errors: BRIG_EIO (also when libcrypto cannot be loaded). */
int brig_tar_sha256_fd(int fd, char out[65], uint64_t *size, brig_error **err);

#endif
