/* brig/session.h — sessions that survive failure: the current generation of a
 * session resolved through the store, commands audited and failures
 * recorded, checkpoints (freeze → copy out → thaw, content-addressed blobs)
 * and recovery into generation + 1 from the latest checkpoint.
 *
 * Every state change is a compare-and-swap on the session's revision, so two
 * replicas never both advance a session. Returned objects belong to the
 * caller and are freed with their own _free (which accepts NULL).
 */
#ifndef BRIG_SESSION_H
#define BRIG_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "brig/error.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "brig/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where checkpoint blobs live: $BRIG_CHECKPOINT_DIR, else "checkpoints"
 * beside a SQLite store's file, else $XDG_DATA_HOME/brig/checkpoints
 * (~/.local/share/brig/checkpoints; /var/lib/brig/checkpoints as root).
 * Created 0700. *out is malloc'd. Errors: BRIG_EIO. */
BRIG_PUBLIC int brig_checkpoint_dir(char **out, const brig_store *s, brig_error **err);

/* Creates the session (generation 1) or adopts its current generation and
 * makes sure that generation's computer exists and runs (brig up). spec is
 * used for a new session and recorded; for an existing one the recorded spec
 * is used when spec is NULL. A computer that lost its files is restored
 * from the latest checkpoint into a new generation, or refused, as
 * brig_session_open() with default options says (that call also reports
 * it). Errors: BRIG_ESTATE (the current generation is failed: the message
 * says to run brig recover; or its files are gone and there is no
 * checkpoint), those of brig_computer_create, BRIG_ESTORE. */
BRIG_PUBLIC int brig_session_up(brig_engine *e, brig_store *s, brig_computer **out, const brig_identity *id,
				const brig_spec *spec, brig_error **err);

#define BRIG_UP_OPTS_VERSION 1

typedef struct brig_up_opts {
	unsigned version;           /* BRIG_UP_OPTS_VERSION */
	/* A session whose computer was lost and that has no checkpoint is
	 * refused unless fresh: then it goes on in a new, empty generation. */
	bool fresh;
	const char *checkpoint_dir; /* NULL: brig_checkpoint_dir() */
} brig_up_opts;

#define BRIG_UP_OPTS_INIT                         \
	{                                         \
		BRIG_UP_OPTS_VERSION, false, NULL \
	}

typedef struct brig_up_result {
	brig_computer *computer;  /* the session's computer, running */
	/* Set when the current generation's computer had been lost (gone,
	 * stopped, or restarted with its volumes emptied) and was replaced by
	 * a new generation: */
	char *lost;               /* why, e.g. "was stopped (it is exited)"; NULL when nothing was lost */
	int64_t old_generation;
	int64_t checkpoint_id;    /* restored into the new generation; 0: it started empty (fresh) */
	int64_t checkpoint_created_ms;
	/* The session was not in this store, but its computer was in Docker
	 * (made with another store, or by brig create): its newest generation
	 * was recorded here and adopted, never a second computer made. That
	 * store's checkpoints stay there. */
	bool recorded;
} brig_up_result;

BRIG_PUBLIC void brig_up_result_clear(brig_up_result *r);

/* brig_session_up with options and a report: it never hands back a
 * computer that lost its files without saying so. When the store says the
 * current generation runs but its computer is gone, stopped or was
 * restarted (brig_computer_check_files), the session moves to generation
 * + 1 restored from its latest checkpoint (as brig_session_recover, so two
 * racers make one generation) and res->lost says why; with no checkpoint
 * that is BRIG_ESTATE ("… its files are gone …; nothing was created")
 * unless opts->fresh. The same when the store records the generation
 * stopped or destroyed by brig, and when the session is new to the store
 * but has checkpoints (brig_session_remove kept them): it goes on from the
 * latest. opts may be NULL (defaults). Errors: those of brig_session_up and
 * brig_session_recover. */
BRIG_PUBLIC int brig_session_open(brig_engine *e, brig_store *s, brig_up_result *res, const brig_identity *id,
				  const brig_spec *spec, const brig_up_opts *opts, brig_error **err);

/* Resolves the current generation's container name of (ns, agent,
 * session). *out is malloc'd. Errors: BRIG_ENOTFOUND (no such session). */
BRIG_PUBLIC int brig_session_resolve(brig_store *s, char **out, const char *ns, const char *agent,
				     const char *session, brig_error **err);

/* Runs a command in a computer (by container name) like
 * brig_computer_exec, records an audit row (argv only, never env values)
 * when the computer is a session's, and marks the session failed in the
 * store when the command timed out, was cancelled or got an uncertain
 * result (the container is already stopped then). Errors: as
 * brig_computer_exec. A store failure after the command ran is reported on
 * stderr-free terms through *err only when the command itself succeeded. */
BRIG_PUBLIC int brig_session_exec(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts,
				  brig_exec_result *res, brig_error **err);

/* brig_session_exec that never stops the computer with unsaved work when
 * it can help it: when only a stop can end the command (an uncertain end, or
 * a timeout or cancel brig-init could not carry out), it first takes a
 * checkpoint into checkpoint_dir (NULL: brig_checkpoint_dir(), where
 * brig recover looks by default) if the daemon still answers.
 * res->stop_checkpoint_id names it (stop_checkpoint_failed: it could not be
 * taken), and so does the error's message. Errors: as brig_session_exec. */
BRIG_PUBLIC int brig_session_exec_keep(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts,
				       const char *checkpoint_dir, brig_exec_result *res, brig_error **err);

/* brig_session_exec_keep whose audit row names actor (at most
 * BRIG_STORE_MAX_NAME bytes, no control characters) as who ran the command
 * — brig serve's token, "mcp" — instead of this process's OS user (NULL).
 * Errors: as brig_session_exec. */
BRIG_PUBLIC int brig_session_exec_by(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts,
				     const char *checkpoint_dir, const char *actor, brig_exec_result *res,
				     brig_error **err);

/* brig_computer_exec_tty (brig/sandbox.h) recorded like brig_session_exec:
 * an audit row when the computer is a session's (argv only) naming actor as
 * brig_session_exec_by does (NULL: this process's OS user), and the session
 * marked failed on an uncertain end or a stop. Errors: as
 * brig_computer_exec_tty; a store failure only when the command succeeded. */
BRIG_PUBLIC int brig_session_exec_tty(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts,
				      const char *actor, int rows, int cols, int resize_fd,
				      void (*size_cb)(int *rows, int *cols, void *payload), void *size_payload,
				      brig_exec_result *res, brig_error **err);

/* Marks generation `generation` of the session failed (no-op when the
 * session has moved on to another generation). Errors: BRIG_ESTORE. */
BRIG_PUBLIC int brig_session_mark_failed(brig_store *s, const char *ns, const char *agent, const char *session,
					 int64_t generation, brig_error **err);

/* Records that brig paused, resumed (running), stopped or destroyed
 * generation `generation`'s computer: BRIG_STORE_STOPPED or
 * BRIG_STORE_DESTROYED (either way its files are gone), which
 * brig_session_open then restores from the latest checkpoint as it does a
 * lost computer. No-op when the store has no such session or it moved on to
 * another generation, and for running/paused when the generation is failed,
 * destroyed or stopped.
 * Errors: BRIG_EINVAL (state creating), BRIG_ESTORE. */
BRIG_PUBLIC int brig_session_mark(brig_store *s, const char *ns, const char *agent, const char *session,
				  int64_t generation, brig_store_state state, brig_error **err);

#define BRIG_CHECKPOINT_OPTS_VERSION 1
#define BRIG_CHECKPOINT_OPTS_INIT                       \
	{                                               \
		.version = BRIG_CHECKPOINT_OPTS_VERSION \
	}

typedef struct brig_checkpoint_opts {
	unsigned version;   /* BRIG_CHECKPOINT_OPTS_VERSION; 1..current accepted */
	const char *dir;    /* NULL: brig_checkpoint_dir() */
	size_t keep;        /* retention: keep the newest N of the session; 0: keep all */
	int zstd_level;     /* 0: 3 */
} brig_checkpoint_opts;

/* Takes a checkpoint of computer ref. With brig-init running in it (and
 * not paused), incrementally: brig-init lists /workspace and /runtime with
 * stat data; a file whose size and mtime match the session's previous
 * checkpoint keeps its digest (a chmod alone reads nothing), every other
 * file is read and stored once under its SHA-256 (blobs/ab/abcd…, shared
 * by all checkpoints); the listing is taken again and the copy retried (up to 3
 * times) until it did not move; a manifest <sha256>.manifest names it all.
 * Otherwise (no brig-init, paused, a tree deeper than 64, files that kept
 * changing; or BRIG_CHECKPOINT_FULL=1): the full copy — pause (unless it
 * already is), copy both volumes through the archive endpoint into one
 * validated, re-owned (1000:1000), zstd-compressed tar, resume (always),
 * verify and rename it to <sha256>.tar.zst. Either way a failed or
 * interrupted checkpoint never replaces or removes a good one, and
 * restore reads both formats. *out (may be NULL) gets the record; opts may
 * be NULL (defaults). Errors: BRIG_ENOTFOUND, BRIG_ESTATE (not running),
 * BRIG_EUNSAFE / BRIG_ETOOBIG (the container's archive broke a rule or the
 * volume sizes), BRIG_EIO (disk full…), BRIG_ESTORE. */
BRIG_PUBLIC int brig_checkpoint_create(brig_engine *e, brig_store *s, brig_store_checkpoint **out, const char *ref,
				       const brig_checkpoint_opts *opts, brig_error **err);

/* Imports a checkpoint read from fd: either an export archive
 * (brig_checkpoint_export; read as a stream, untrusted: every digest and
 * cap checked before the record is written) or a checkpoint blob of the
 * full-copy format (a zstd-compressed, or plain, tar of workspace/ and
 * runtime/, as older brig_checkpoint_create wrote; a stream that cannot
 * seek is spooled first). ns/agent/session name the session it joins; for
 * an archive they may be NULL (the archive's own), and a session missing
 * from the store is created from the archive (its spec, no computer:
 * brig_session_recover restores it). A blob joins an existing session,
 * re-written (owned by 1000:1000) into a new content-addressed blob,
 * recorded as a checkpoint of its current generation; keep prunes as for
 * create (blobs only). *out (may be NULL) gets the record. Errors:
 * BRIG_ENOTFOUND (no such session, for a blob), BRIG_EINVAL, BRIG_EUNSAFE
 * (an entry broke a rule, or lies outside workspace/ and runtime/),
 * BRIG_ECORRUPT (a digest or the manifest), BRIG_ETOOBIG, BRIG_EPROTO (not
 * a tar / archive), BRIG_EIO, BRIG_ESTORE. */
BRIG_PUBLIC int brig_checkpoint_import(brig_store *s, brig_store_checkpoint **out, const char *ns, const char *agent,
				       const char *session, int fd, const brig_checkpoint_opts *opts,
				       brig_error **err);

/* Writes checkpoint id to fd as one archive another store can import
 * (brig_checkpoint_import): for an incremental checkpoint, its session
 * (identity, generation, spec), its manifest and each distinct file blob,
 * every digest checked before the first byte is written; a full-copy
 * checkpoint travels as its blob. dir NULL: brig_checkpoint_dir(). Errors:
 * BRIG_ENOTFOUND, BRIG_ECORRUPT (nothing written), BRIG_EIO, BRIG_ESTORE. */
BRIG_PUBLIC int brig_checkpoint_export(brig_store *s, const char *dir, int64_t id, int fd, brig_error **err);

/* Removes checkpoint id: its record, and its blob when no other record
 * names it. Errors: BRIG_ENOTFOUND, BRIG_ESTORE, BRIG_EIO. */
BRIG_PUBLIC int brig_checkpoint_remove(brig_store *s, const char *dir, int64_t id, brig_error **err);

/* Removes session (ns, agent, session) from the store: its record and,
 * only when checkpoints is true, its checkpoint records and each of their
 * blobs (in dir; NULL: brig_checkpoint_dir()) that no other record names.
 * Kept checkpoints stay listed under the identity, and brig_session_open
 * restores the latest of them when the session is opened again. The
 * command audit rows stay (brig history). The session's computers are the
 * caller's to remove first. *removed (may be NULL) gets the number of
 * checkpoints removed. Errors: BRIG_ENOTFOUND, BRIG_ECONFLICT (the session
 * changed meanwhile: nothing removed), BRIG_EIO (a blob could not be
 * removed; the records are gone), BRIG_ESTORE. */
BRIG_PUBLIC int brig_session_remove(brig_store *s, const char *dir, const char *ns, const char *agent,
				    const char *session, bool checkpoints, size_t *removed, brig_error **err);

/* Copies checkpoint cp into the volumes of running computer ref: the blob's
 * digest is checked before anything is copied (BRIG_ECORRUPT: nothing
 * changed). Files keep their modes and 1000:1000; symlinks stay links. */
BRIG_PUBLIC int brig_checkpoint_restore(brig_engine *e, const char *dir, const brig_store_checkpoint *cp,
					const char *ref, brig_error **err);

typedef struct brig_recover_result {
	brig_computer *computer;  /* the new generation's computer */
	int64_t old_generation;
	int64_t new_generation;
	int64_t checkpoint_id;    /* restored checkpoint, or 0 when none existed */
	bool won;                 /* this call advanced the session (false: a racer did) */
} brig_recover_result;

BRIG_PUBLIC void brig_recover_result_clear(brig_recover_result *r);

/* Recovers a session whose current generation is failed, stopped or gone:
 * verifies the latest checkpoint, advances the session to generation + 1
 * by compare-and-swap (exactly one racer wins; the others adopt its
 * generation), creates that computer under its own deterministic name,
 * restores the checkpoint into it (none: it starts empty), marks it running,
 * and removes the old container and its volumes. Errors: BRIG_ENOTFOUND (no
 * session), BRIG_ESTATE (the current generation is running fine),
 * BRIG_ECORRUPT (the latest checkpoint failed its digest: nothing changed),
 * those of brig_computer_create, BRIG_ESTORE. */
BRIG_PUBLIC int brig_session_recover(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns,
				     const char *agent, const char *session, const char *dir, brig_error **err);

/* brig_session_recover from checkpoint checkpoint_id of the session (0:
 * the latest) instead of the latest: an older one can be picked. The
 * current generation must be failed, stopped, destroyed or gone, as for
 * brig_session_recover. Errors: those of brig_session_recover, and
 * BRIG_ENOTFOUND (no such checkpoint), BRIG_EINVAL (it is another
 * session's, or checkpoint_id < 0); nothing changes on any of them. */
BRIG_PUBLIC int brig_session_recover_at(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns,
					const char *agent, const char *session, const char *dir, int64_t checkpoint_id,
					brig_error **err);

#ifdef __cplusplus
}
#endif
#endif
