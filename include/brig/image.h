/* brig/image.h — building brig's runtime images with no image registry: a
 * Debian root filesystem made by debootstrap from the machine's own apt
 * mirror, npm tarballs for the agent CLIs, all pinned by a lock file, sent
 * to Docker as a minimal build context and built with no network.
 *
 * The build runs in stages, each named in progress lines and errors:
 *   lock     read and check the lock file (image/brig-image.lock)
 *   rootfs   debootstrap (minbase) + the suite's updates into a tarball,
 *            cached by content hash; its package set is checked against
 *            the lock
 *   npm      `npm pack` of each pinned npm package (agents), checked
 *            against the lock's sha512 integrity, cached
 *   context  the Dockerfile, rootfs.tar and npm/<name>.tgz — nothing else
 *   build    Docker's build endpoint, network mode "none"
 *   verify   the tag is in the image store with the id the build gave
 *   record   <cache>/images.json: tag → id, profile, lock hash, time
 * A dry run stops after "context" and never contacts Docker.
 *
 * Host-side fetching (debootstrap, apt-get in the new root, npm pack) is
 * the only network use; the Docker build itself has none. Building a root
 * filesystem needs root (debootstrap, chroot); a cached one does not.
 */
#ifndef BRIG_IMAGE_H
#define BRIG_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "brig/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum brig_image_profile {
	BRIG_IMAGE_MINIMAL = 0, /* ca-certificates, git, python3, coreutils, tini */
	BRIG_IMAGE_AGENTS = 1,  /* minimal + Node.js + the Claude Code and Codex CLIs */
} brig_image_profile;

/* Default tags: the runtime image every computer uses by default
 * (BRIG_DEFAULT_IMAGE in brig/spec.h) and the agents image `brig agent` uses. */
#define BRIG_IMAGE_MINIMAL_TAG "brig-sandbox:local"
#define BRIG_IMAGE_AGENTS_TAG "brig-agents:local"

/* "minimal" / "agents" (static). */
BRIG_PUBLIC const char *brig_image_profile_name(brig_image_profile p);
/* Errors: BRIG_EINVAL naming the allowed profiles. */
BRIG_PUBLIC int brig_image_profile_parse(brig_image_profile *out, const char *s, brig_error **err);
/* BRIG_IMAGE_MINIMAL_TAG or BRIG_IMAGE_AGENTS_TAG (static). */
BRIG_PUBLIC const char *brig_image_default_tag(brig_image_profile p);

/* One progress line: stage is one of the stage names above (static), line
 * is a line of text without its newline (borrowed, valid during the call):
 * brig's own step descriptions, debootstrap/apt/npm output, Docker's build
 * step lines. Never contains a secret. */
typedef void (*brig_image_progress_cb)(const char *stage, const char *line, void *payload);

#define BRIG_IMAGE_BUILD_OPTS_VERSION 1
/* Initialises a brig_image_build_opts to its defaults (minimal profile). */
/* clang-format off */
#define BRIG_IMAGE_BUILD_OPTS_INIT {.version = BRIG_IMAGE_BUILD_OPTS_VERSION}
/* clang-format on */

typedef struct brig_image_build_opts {
	unsigned version; /* BRIG_IMAGE_BUILD_OPTS_VERSION */
	brig_image_profile profile;
	const char *tag;                 /* "repo:tag"; NULL: brig_image_default_tag(profile) */
	const char *cache_dir;           /* NULL: $XDG_CACHE_HOME/brig, else /var/cache/brig as
					    root, else ~/.cache/brig */
	const char *image_dir;           /* holds Dockerfile.<profile> and brig-image.lock;
					    NULL: $BRIG_IMAGE_DIR, else the source tree's image/ */
	const char *lock_path;           /* NULL: <image_dir>/brig-image.lock */
	const char *apt_dir;             /* where the apt sources are read; NULL: /etc/apt */
	bool dry_run;                    /* prepare and list the context; send nothing to Docker */
	bool offline;                    /* use only what is cached: never run debootstrap or npm */
	bool no_cache;                   /* rebuild the root filesystem even when it is cached */
	bool update_lock;                /* record the package set that was built into the lock
					    (and its npm entries' file names) instead of checking
					    it; implies a fresh root filesystem */
	int64_t step_timeout_ms;         /* cap on each host command; 0: 30 minutes */
	brig_image_progress_cb progress; /* may be NULL */
	void *payload;
} brig_image_build_opts;

/* One file of the build context. */
typedef struct brig_image_file {
	char *name;   /* name inside the context: "Dockerfile", "rootfs.tar", "npm/codex.tgz" */
	char *source; /* host path it is read from; NULL when generated in memory */
	uint64_t size;
	char *origin; /* what it is: "Dockerfile.minimal", "debian bookworm rootfs <key>",
			 "@openai/codex@0.171.0 sha512-…" */
} brig_image_file;

/* How long one stage took. */
typedef struct brig_image_stage {
	const char *name; /* static */
	int64_t ms;
	bool cached; /* served from the cache (rootfs, npm) */
} brig_image_stage;

#define BRIG_IMAGE_MAX_STAGES 8

typedef struct brig_image_result {
	char *tag;
	char *profile;  /* "minimal" | "agents" */
	char *image_id; /* "sha256:…"; NULL for a dry run */
	char *lock_path;
	char *lock_sha256; /* of the lock file as read (before any update) */
	char *rootfs_key;  /* content hash naming the cached root filesystem */
	bool rootfs_cached;
	bool lock_updated;      /* update_lock wrote a new lock */
	char *lock_changes;     /* update_lock: the package differences it recorded
				   ("python3.11 3.11.2-6 -> 3.11.2-6+deb12u6", one per
				   line), NULL when none */
	brig_image_file *files; /* the context, in the order it is sent */
	size_t file_count;
	uint64_t context_bytes;     /* sum of the files' sizes */
	uint64_t context_tar_bytes; /* the tar stream's length (headers and padding too) */
	brig_image_stage stages[BRIG_IMAGE_MAX_STAGES];
	size_t stage_count;
	int64_t total_ms;
} brig_image_result;

/* Frees what res owns and zeroes it; accepts NULL. */
BRIG_PUBLIC void brig_image_result_clear(brig_image_result *res);

/* {"tag","profile","image_id","lock_path","lock_sha256","rootfs_key",
 *  "rootfs_cached","lock_updated","lock_changes","context":{"files":[{"name",
 *  "size","source","origin"}],"bytes","tar_bytes"},"stages":[{"name","ms",
 *  "cached"}],"total_ms"}. New reference. */
BRIG_PUBLIC json_t *brig_image_result_to_json(const brig_image_result *res);

/* Builds the image of opts->profile and tags it (see the stages above).
 * opts NULL means BRIG_IMAGE_BUILD_OPTS_INIT (the minimal profile with every
 * default); its version must be 1..BRIG_IMAGE_BUILD_OPTS_VERSION.
 * e may be NULL for a dry run. *res is filled as far as the build got
 * (always initialised; clear it with brig_image_result_clear). Every error
 * message starts with its stage ("rootfs: debootstrap failed (exit 1): …").
 * Errors: BRIG_EINVAL (options version, profile, tag), BRIG_ENOTFOUND (no lock or
 * Dockerfile, no mirror for the suite in the apt sources, a tool missing,
 * offline and not cached), BRIG_ECORRUPT (a lock that does not parse, an
 * npm tarball whose integrity differs from the lock), BRIG_ECONFLICT (the
 * mirror's package set differs from the lock: the message lists the
 * differences and says how to accept them), BRIG_EDENIED (building a root
 * filesystem without root), BRIG_EIO (a host command or file failed),
 * BRIG_ETIMEDOUT (a host command ran past step_timeout_ms), and the
 * engine's codes for the build (a failed Dockerfile step is BRIG_EDAEMON
 * with Docker's message). */
BRIG_PUBLIC int brig_image_build(brig_engine *e, brig_image_result *res, const brig_image_build_opts *opts,
				 brig_error **err);

/* ---- the record of built images ---- */

/* The directory brig caches into when opts->cache_dir is NULL (see above).
 * Caller frees. */
BRIG_PUBLIC char *brig_image_default_cache_dir(void);

/* Reads <cache_dir>/images.json (cache_dir NULL: the default): an object
 * {"<tag>":{"id","profile","lock_sha256","rootfs_key","built_at"
 * (RFC 3339 UTC),"context_bytes"}}. An absent file gives {}. *out is a new
 * reference. Errors: BRIG_EIO, BRIG_ECORRUPT (not a JSON object). */
BRIG_PUBLIC int brig_image_records(json_t **out, const char *cache_dir, brig_error **err);

#ifdef __cplusplus
}
#endif
#endif
