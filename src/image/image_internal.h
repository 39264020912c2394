/* image_internal.h — the pieces of the image layer shared between its files
 * (and its unit tests): the build's state and stages, host commands, apt
 * sources, dpkg status, the lock file, and the build context. Private to
 * src/image. */
#ifndef BRIG_IMAGE_INTERNAL_H
#define BRIG_IMAGE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/engine.h"
#include "brig/image.h"
#include "tar/tar.h"

/* Bumped whenever the recipe that turns a lock into a root filesystem
 * changes (the debootstrap flags, the clean-up script): it is part of the
 * cache key, so an old tarball is never taken for a new one. */
#define BRIG_IMAGE_ROOTFS_RECIPE 1

#define BRIG_IMAGE_LOCK_FORMAT 1

/* ---- the build (image.c) and its stages (rootfs.c, npm.c, records.c) ---- */

/* One build's state, shared by its stages; freed by image.c. */
typedef struct brig_image_build_ctx {
	const brig_image_build_opts *o;
	brig_image_result *res;
	brig_image_profile profile;
	const char *pname;
	char *cache_dir;
	char *image_dir;
	char *lock_path;
	json_t *lock;     /* checked lock */
	json_t *lprofile; /* borrowed from lock */
	const char *suite;
	const char *variant;
	const char *arch;
	json_t *sources;   /* the apt sources used: [{"uri","suite","components"}] */
	char *keyring;     /* Signed-By of the suite's source, for debootstrap */
	char *work;        /* temporary directory under the cache */
	char *previous_id; /* the image the tag named before the build */
	int64_t timeout_ms;
} brig_image_build_ctx;

/* A progress line for stage (when o->progress is set). */
void brig_image__progress(const brig_image_build_opts *o, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Makes c->work (once): a fresh directory under <cache>/tmp. Errors: BRIG_EIO. */
int brig_image__make_work_dir(brig_image_build_ctx *c, brig_error **err);

/* Stage "rootfs" (rootfs.c): the cached tarball for the lock's package set,
 * or a new one checked against it (or recorded into it with update_lock). */
int brig_image__stage_rootfs(brig_image_build_ctx *c, bool *cached, brig_error **err);
/* Stage "npm" (npm.c): each pinned package's tarball, verified against the lock. */
int brig_image__stage_npm(brig_image_build_ctx *c, bool *all_cached, brig_error **err);
/* Stage "record" (records.c): <cache>/images.json, and the image the tag
 * named before, removed when nothing else holds it. */
int brig_image__stage_record(brig_engine *e, brig_image_build_ctx *c, brig_error **err);

/* ---- files (files.c) ---- */

/* Reads all of path, at most cap bytes, NUL-terminated. Errors:
 * BRIG_ENOTFOUND (missing), BRIG_EIO, BRIG_ETOOBIG (over cap). */
int brig_image__read_file(const char *path, size_t cap, char **out, size_t *len, brig_error **err);
/* Writes text to path through a temporary file renamed over it. Errors: BRIG_EIO. */
int brig_image__write_file_atomic(const char *path, const char *text, brig_error **err);
/* Whether path is a regular file; *size (may be NULL) gets its size. */
bool brig_image__regular_file(const char *path, uint64_t *size);
/* Now as "YYYY-MM-DDTHH:MM:SSZ". Caller frees. */
char *brig_image__rfc3339_now(void);

/* ---- host commands (host_cmd.c) ---- */

typedef struct brig_image_cmd {
	const char *stage;            /* for progress lines (static) */
	const char *what;             /* "debootstrap", for messages */
	const char *const *argv;      /* argv[0] found through PATH (+ the sbin directories) */
	const char *const *env_extra; /* "K=V" added to the child's env; may be NULL */
	bool capture_stdout;          /* stdout into *out instead of progress lines */
	size_t stdout_cap;            /* cap on captured stdout; 0: 4 MiB */
	int64_t timeout_ms;           /* 0: 30 minutes */
	brig_image_progress_cb progress;
	void *payload;
} brig_image_cmd;

/* Runs a host command with stdin from /dev/null, brig's environment minus
 * every model credential, and its output turned into progress lines. The
 * last lines of output are kept for the message of a failure:
 * "<what> failed (exit N): <last lines>". *out (may be NULL) gets captured
 * stdout (NUL-terminated). Errors: BRIG_ENOTFOUND (the program is not
 * installed), BRIG_EIO (it failed or could not start), BRIG_ETIMEDOUT
 * (killed at the deadline), BRIG_ETOOBIG (captured stdout over the cap). */
int brig_image__run(const brig_image_cmd *c, char **out, brig_error **err);

/* rm -rf --one-file-system of a directory brig made; never fails loudly. */
void brig_image__remove_tree(const char *path);

/* ---- apt sources (apt.c) ---- */

typedef struct brig_apt_source {
	char *uri;        /* "http://…/debian" without a trailing slash */
	char *suite;      /* "bookworm", "bookworm-security" */
	char *components; /* "main" or "main contrib", space separated */
	char *signed_by;  /* keyring file named by Signed-By / [signed-by=], or NULL */
} brig_apt_source;

typedef struct brig_apt_sources {
	brig_apt_source *v;
	size_t n;
} brig_apt_sources;

/* Adds the "deb" entries of a deb822 .sources file (every URI × suite of
 * each enabled stanza; deb-src, disabled stanzas and comments skipped). */
void brig_image__apt_parse_deb822(brig_apt_sources *s, const char *text);
/* Adds the "deb" lines of a one-line-style .list file. */
void brig_image__apt_parse_list(brig_apt_sources *s, const char *text);
/* Reads <apt_dir>/sources.list and <apt_dir>/sources.list.d/ *.list and
 * *.sources (in name order). An empty result is not an error here. */
int brig_image__apt_read(brig_apt_sources *s, const char *apt_dir, brig_error **err);
/* NULL when uri ("scheme://[user[:password]@]host/…") has no user info;
 * otherwise a copy with the user info replaced by "***", safe to print.
 * Freed with free(). */
char *brig_image__apt_uri_without_userinfo(const char *uri);
/* The first source for suite, or NULL. Borrowed. */
const brig_apt_source *brig_image__apt_find(const brig_apt_sources *s, const char *suite);
void brig_image__apt_free(brig_apt_sources *s);

/* Installed packages of a dpkg status file: {"name": "version"} for every
 * stanza whose Status is "install ok installed" (":arch" appended to the
 * name when a package is installed for two architectures). New reference. */
json_t *brig_image__dpkg_status_parse(const char *text);

/* ---- the lock (lock.c) ---- */

/* Reads and checks the lock at path; *sha gets the hex SHA-256 of the file.
 * Errors: BRIG_ENOTFOUND (missing: says how to make one), BRIG_ECORRUPT
 * (not JSON, or a field missing or of the wrong type: names it). */
int brig_image__lock_load(json_t **out, char sha[65], const char *path, brig_error **err);
/* The profile's object of a checked lock (borrowed), or NULL. */
json_t *brig_image__lock_profile(json_t *lock, const char *profile);
/* Writes lock to path atomically (a temporary file renamed over it),
 * indented with sorted keys. Errors: BRIG_EIO. */
int brig_image__lock_write(const char *path, const json_t *lock, brig_error **err);
/* Differences between two {"name":"version"} sets, one per line
 * ("+ name version", "- name version", "~ name old -> new"), or NULL when
 * they are equal. *count (may be NULL) gets their number. Caller frees. */
char *brig_image__packages_diff(const json_t *want, const json_t *got, size_t *count);

/* The content hash naming a cached root filesystem: SHA-256 over a
 * canonical JSON of the recipe (its version and the text of the script run
 * in the new root), suite, variant, architecture, the sources used (uri,
 * suite, components), the include list and the locked package set. */
void brig_image__rootfs_key(char out[65], const char *recipe, const char *suite, const char *variant, const char *arch,
			    const json_t *sources, const json_t *include, const json_t *packages);

/* npm's integrity string of a file: "sha512-" + base64 of its SHA-512.
 * Caller frees. Errors: BRIG_EIO (also when libcrypto cannot be loaded). */
int brig_image__sri_sha512(char **out, const char *path, brig_error **err);

/* ---- the context (context.c) ---- */

/* A tar builder over res->files (each read from its source, 0:0 owners,
 * the "npm" directory entry before the first npm/ file). Nothing else is
 * ever added: this is the whole of what Docker receives. */
int brig_image__context_open(brig_tar_builder **out, const brig_image_result *res, brig_error **err);
/* Appends a file to res->files (strings copied). */
void brig_image__context_add(brig_image_result *res, const char *name, const char *source, uint64_t size,
			     const char *origin);

#endif
