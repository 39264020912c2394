/* brig/store.h — the session store: session records with compare-and-swap
 * revisions, checkpoint records and the command audit log, on SQLite or PostgreSQL.
 *
 * A store is opened from a URL:
 *   NULL                         $BRIG_STORE, else the default SQLite file
 *                                (see brig_store_default_url);
 *   sqlite:///abs/path.db        a SQLite file (also "sqlite:path" and a plain path);
 *   postgresql://… postgres://…  a PostgreSQL database (libpq URL). An extra query
 *                                parameter schema=NAME ([A-Za-z_][A-Za-z0-9_]*, at
 *                                most 63 bytes) keeps brig's tables in that schema,
 *                                created when missing.
 * Opening applies any pending schema migration; concurrent openers never apply one
 * twice (BEGIN IMMEDIATE on SQLite, a transaction-scoped advisory lock on PostgreSQL).
 *
 * Concurrency. A brig_store handle may be shared by any number of threads: it owns
 * one database connection and a mutex serialises the calls on it. Separate handles
 * (in one process or in several, on one machine or, with PostgreSQL, several hosts)
 * coordinate through the database: every change to a session is a compare-and-swap
 * on its revision, and creation relies on the primary key, so two writers can never
 * both advance a session. SQLite runs in WAL mode with a 10 s busy timeout and takes
 * the write lock up front (BEGIN IMMEDIATE) for every write.
 *
 * Errors, common to every call below: BRIG_EINVAL (a bad argument; the message names
 * it), BRIG_ESTORE (the database failed or is locked for longer than the busy
 * timeout), BRIG_EUNCERTAIN (PostgreSQL: the connection broke after a write was sent,
 * so it may have been applied — re-read before acting again). A lost PostgreSQL
 * connection is re-established by the next call, and a read is retried once on the
 * new connection. Additional codes are listed per call. Messages never contain a
 * database password.
 *
 * Ownership. Records returned through `out` belong to the caller and are freed with
 * the matching brig_store_*_free / *_free_array, which accept NULL. Records passed
 * in are borrowed. Strings inside records are NUL-terminated and owned by the record.
 * Timestamps are wall-clock milliseconds since the epoch, taken by the writer.
 */
#ifndef BRIG_STORE_H
#define BRIG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brig_store brig_store;

/* Caps enforced on input (BRIG_EINVAL beyond them). */
#define BRIG_STORE_MAX_NAME 255           /* ns, agent, session, container name/id, outcome */
#define BRIG_STORE_MAX_BLOB 4096          /* checkpoint blob name or path */
#define BRIG_STORE_MAX_JSON (1024 * 1024) /* spec_json, argv_json */

/* expected_revision for brig_store_session_delete that matches any revision. */
#define BRIG_STORE_ANY_REVISION 0

/* State of a session's current generation. */
typedef enum brig_store_state {
	BRIG_STORE_CREATING = 0,
	BRIG_STORE_RUNNING = 1,
	BRIG_STORE_PAUSED = 2,
	BRIG_STORE_FAILED = 3,
	BRIG_STORE_DESTROYED = 4,
	/* brig stop: the container exists but its tmpfs volumes are empty, so
	 * the session is restored from a checkpoint as for a destroyed one. */
	BRIG_STORE_STOPPED = 5
} brig_store_state;

/* "creating", "running", "paused", "failed", "destroyed", "stopped"; "unknown" for a value
 * outside the enum. Static string. */
BRIG_PUBLIC const char *brig_store_state_to_string(brig_store_state state);

/* Parses one of the names above (exact, lowercase) into *out.
 * Errors: BRIG_EINVAL (NULL or unknown name; *out untouched). */
BRIG_PUBLIC int brig_store_state_from_string(brig_store_state *out, const char *name, brig_error **err);

/* One session: (ns, agent, session) identifies it. */
typedef struct brig_store_session {
	char *ns;
	char *agent;
	char *session;
	int64_t generation;     /* current generation, >= 1 (0 on create means 1) */
	brig_store_state state; /* state of the current generation */
	char *container_name;   /* current generation's container; may be NULL */
	char *container_id;     /* may be NULL */
	char *spec_json;        /* the spec, opaque to the store; may be NULL */
	int64_t revision;       /* set by the store: 1 on create, +1 on every change */
	int64_t created_ms;     /* set by the store */
	int64_t updated_ms;     /* set by the store */
} brig_store_session;

/* One stored checkpoint. The blob is content-addressed: digest is its SHA-256. */
typedef struct brig_store_checkpoint {
	int64_t id; /* set by the store; grows with every add, never reused */
	char *ns;
	char *agent;
	char *session;
	int64_t generation;   /* generation the checkpoint was taken from, >= 1 */
	char *digest;         /* SHA-256 as 64 lowercase hex digits */
	char *blob;           /* blob name or path, as given by the writer (non-empty) */
	int64_t bytes_raw;    /* archive size before compression, >= 0 */
	int64_t bytes_stored; /* size of the blob as stored, >= 0 */
	int64_t created_ms;   /* set by the store */
	/* Only in records returned by _remove, _prune and session_delete: how many
	 * checkpoint rows (of any session) still name the same blob after the removal.
	 * The caller deletes the blob only when this is 0. Otherwise -1. */
	int64_t blob_refs;
	/* Only in records returned by _unowned: how many checkpoints the
	 * identity has (this one its newest). Otherwise -1. */
	int64_t count;
} brig_store_checkpoint;

/* One command run in a session. */
typedef struct brig_store_audit {
	int64_t id; /* set by the store; grows with every add */
	char *ns;
	char *agent;
	char *session;
	int64_t generation;
	char *container_name; /* may be NULL */
	char *argv_json;      /* JSON array of strings: the argv, WITHOUT environment values */
	int exit_code;        /* the command's exit code, or -1 when there is none */
	bool timed_out;
	char *outcome;        /* "ok", "timeout", "cancel", "uncertain", "error"
			       * (any [a-z_]+ up to BRIG_STORE_MAX_NAME is accepted) */
	int64_t duration_ms;  /* >= 0 */
	int64_t stdout_bytes; /* >= 0 */
	int64_t stderr_bytes; /* >= 0 */
	int64_t created_ms;   /* set by the store */
	/* Who ran it: a token's name for brig serve, "mcp" for brig mcp; NULL
	 * when adding means this process's OS user, stored as "NAME (uid N)".
	 * NULL when listing a row written before the store had the column. */
	char *actor;
} brig_store_audit;

/* One connection an egress sandbox made, or tried, through brig's proxy. */
typedef struct brig_store_egress {
	int64_t id;       /* set by the store; grows with every add */
	char *sandbox;    /* container name */
	char *ns;         /* the computer's session identity; NULL for a run */
	char *agent;
	char *session;
	char *host;       /* what the sandbox asked for; "" when not understood */
	int port;         /* 0 when not understood */
	char *decision;   /* "allowed", "denied" or "error" */
	char *reason;     /* why denied or failed; "" when allowed */
	int64_t bytes_up; /* sandbox → upstream */
	int64_t bytes_down;
	int64_t start_ms; /* wall clock */
	int64_t duration_ms;
} brig_store_egress;

/* ---- opening ---- */

/* The URL used when brig_store_open gets NULL: $BRIG_STORE when set and
 * non-empty, else "sqlite://" + the default file: /var/lib/brig/brig.db when
 * running as root, else $XDG_DATA_HOME/brig/brig.db (when absolute), else
 * $HOME/.local/share/brig/brig.db. *out is freed with free().
 * Errors: BRIG_EINVAL (no usable $HOME). */
BRIG_PUBLIC int brig_store_default_url(char **out, brig_error **err);

/* Opens (creating when needed) the store at url (see the top of this file;
 * NULL for the default), and migrates its schema. For SQLite the file's
 * directory is created (mode 0700) and the file is created with mode 0600.
 * *out is closed with brig_store_close.
 * Errors: BRIG_EINVAL (unknown scheme, bad schema name, unparsable URL),
 * BRIG_EIO (cannot create the directory), BRIG_ESTORE (cannot open the file or
 * connect, or the schema is newer than this brig understands; also when the
 * database library — libsqlite3 or libpq, opened on first use — cannot be
 * loaded). */
BRIG_PUBLIC int brig_store_open(brig_store **out, const char *url, brig_error **err);

/* Closes the connection and frees s; accepts NULL. No call may be running on s. */
BRIG_PUBLIC void brig_store_close(brig_store *s);

/* "sqlite" or "postgresql". Static string. */
BRIG_PUBLIC const char *brig_store_backend_name(const brig_store *s);

/* The store's URL with any password replaced by "***" — safe to print.
 * Borrowed; valid until brig_store_close. */
BRIG_PUBLIC const char *brig_store_display_url(const brig_store *s);

/* SQLite: the absolute path of the database file; PostgreSQL: NULL. Borrowed.
 * Checkpoint blobs of a SQLite store are kept beside this file. */
BRIG_PUBLIC const char *brig_store_path(const brig_store *s);

/* Copy of url with the password of a "scheme://user:password@…" URL and any
 * "password=" query value replaced by "***". Freed with free(); NULL for NULL. */
BRIG_PUBLIC char *brig_store_redact_url(const char *url);

/* *out receives the schema version in use (the highest applied migration). */
BRIG_PUBLIC int brig_store_schema_version(brig_store *s, int *out, brig_error **err);

/* ---- sessions ---- */

/* Reads one session into *out.
 * Errors: BRIG_ENOTFOUND (no such session). */
BRIG_PUBLIC int brig_store_session_get(brig_store *s, brig_store_session **out, const char *ns, const char *agent,
				       const char *session, brig_error **err);

/* Creates a session from rec (identity, generation — 0 means 1 —, state,
 * container name/id, spec). The store sets revision 1 and the timestamps.
 * *out (out may be NULL) receives the stored record.
 * Errors: BRIG_ECONFLICT (the session exists: racing creators all call this, the
 * losers then _get the winner's record). */
BRIG_PUBLIC int brig_store_session_create(brig_store *s, brig_store_session **out, const brig_store_session *rec,
					  brig_error **err);

/* Compare-and-swap: replaces generation, state, container name/id and spec of
 * the session named by rec's identity with rec's values, only if its stored
 * revision is still expected_revision; the revision is then bumped by one and
 * updated_ms set. rec->revision is ignored. *out (out may be NULL) receives the
 * new record. Usual loop: get → modify → cas, and on BRIG_ECONFLICT get again.
 * Errors: BRIG_ECONFLICT (the revision moved on: someone else changed the
 * session), BRIG_ENOTFOUND (no such session). */
BRIG_PUBLIC int brig_store_session_cas(brig_store *s, brig_store_session **out, const brig_store_session *rec,
				       int64_t expected_revision, brig_error **err);

/* Lists sessions, of namespace ns only when ns is not NULL, ordered by (ns,
 * agent, session). *out receives an array of *n records (NULL when *n is 0),
 * freed with brig_store_session_free_array. */
BRIG_PUBLIC int brig_store_session_list(brig_store *s, brig_store_session **out, size_t *n, const char *ns,
					brig_error **err);

/* Deletes a session and its checkpoint records (audit rows are kept), only if
 * its revision is expected_revision (BRIG_STORE_ANY_REVISION: any). The removed
 * checkpoint records (with blob_refs set) go to *out_removed / *n_removed so the
 * caller can delete blobs; both may be NULL together.
 * Errors: BRIG_ENOTFOUND, BRIG_ECONFLICT (revision moved on). */
BRIG_PUBLIC int brig_store_session_delete(brig_store *s, brig_store_checkpoint **out_removed, size_t *n_removed,
					  const char *ns, const char *agent, const char *session,
					  int64_t expected_revision, brig_error **err);

/* Deletes a session's record only, if its revision is expected_revision
 * (BRIG_STORE_ANY_REVISION: any): its checkpoint and audit rows stay, still
 * listed by brig_store_checkpoint_list under the same identity (and owned
 * again by a session created later with it).
 * Errors: BRIG_ENOTFOUND, BRIG_ECONFLICT (revision moved on). */
BRIG_PUBLIC int brig_store_session_forget(brig_store *s, const char *ns, const char *agent, const char *session,
					  int64_t expected_revision, brig_error **err);

/* Frees one record returned through a `brig_store_session **out`; accepts NULL. */
BRIG_PUBLIC void brig_store_session_free(brig_store_session *rec);
/* Frees an array of n records from brig_store_session_list; accepts NULL. */
BRIG_PUBLIC void brig_store_session_free_array(brig_store_session *arr, size_t n);

/* ---- checkpoints ---- */

/* Records a checkpoint from rec (identity, generation, digest, blob, sizes);
 * the store sets id and created_ms. *out (may be NULL) receives the stored record.
 * Errors: BRIG_ENOTFOUND (no such session). */
BRIG_PUBLIC int brig_store_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec,
					  brig_error **err);

/* Reads checkpoint id. Errors: BRIG_ENOTFOUND. */
BRIG_PUBLIC int brig_store_checkpoint_get(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err);

/* Lists a session's checkpoints, newest first, into an array of *n records
 * (NULL when none), freed with brig_store_checkpoint_free_array. A session
 * without checkpoints (or without a record) gives *n == 0. */
BRIG_PUBLIC int brig_store_checkpoint_list(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
					   const char *agent, const char *session, brig_error **err);

/* Checkpoints that outlived their session's record (brig_store_session_forget,
 * `brig sessions rm` without --checkpoints): the newest checkpoint of each
 * such identity, of namespace ns only when ns is not NULL, ordered by (ns,
 * agent, session), each with its identity's count; an array of *n records
 * (NULL when none), freed with brig_store_checkpoint_free_array. */
BRIG_PUBLIC int brig_store_checkpoint_unowned(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
					      brig_error **err);

/* Reads the newest checkpoint of a session. Errors: BRIG_ENOTFOUND (none). */
BRIG_PUBLIC int brig_store_checkpoint_latest(brig_store *s, brig_store_checkpoint **out, const char *ns,
					     const char *agent, const char *session, brig_error **err);

/* Removes checkpoint id; *out (may be NULL) receives the removed record with
 * blob_refs set. Errors: BRIG_ENOTFOUND. */
BRIG_PUBLIC int brig_store_checkpoint_remove(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err);

/* Keeps the keep_n newest checkpoints of a session and removes the rest; the
 * removed records (newest first, blob_refs set) go to *out / *n (both may be
 * NULL together; *n == 0 when nothing was removed). keep_n may be 0. */
BRIG_PUBLIC int brig_store_checkpoint_prune(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
					    const char *agent, const char *session, size_t keep_n, brig_error **err);

/* Frees one checkpoint record; accepts NULL. */
BRIG_PUBLIC void brig_store_checkpoint_free(brig_store_checkpoint *rec);
/* Frees an array of n checkpoint records; accepts NULL. */
BRIG_PUBLIC void brig_store_checkpoint_free_array(brig_store_checkpoint *arr, size_t n);

/* ---- audit ---- */

/* Appends an audit row from rec (everything but id and created_ms). The session
 * need not exist (rows outlive their session). argv_json must be a JSON array
 * of strings. *out_id (may be NULL) receives the row id. */
BRIG_PUBLIC int brig_store_audit_add(brig_store *s, int64_t *out_id, const brig_store_audit *rec, brig_error **err);

/* From now on, brig_store_audit_add with out_id NULL queues a copy of the row
 * and returns at once: a writer thread of s writes the rows in order, so a
 * command's caller does not wait for the database (~1 ms on SQLite). At most
 * BRIG_STORE_AUDIT_QUEUE rows wait; a caller finding the queue full waits
 * for room (a row is never dropped to keep up). brig_store_audit_list and
 * brig_store_close first wait until every queued row is written. A row the
 * writer cannot write (database restarting, disk full) is tried again with
 * a growing pause for up to 30 s (only once more while s is being closed),
 * then reported on stderr with its session and argv: never lost silently.
 * Idempotent. Errors: BRIG_EIO (no thread). */
#define BRIG_STORE_AUDIT_QUEUE 1024
BRIG_PUBLIC int brig_store_audit_background(brig_store *s, brig_error **err);

/* Lists a session's audit rows, newest first, at most limit (0: all), into an
 * array of *n records (NULL when none), freed with brig_store_audit_free_array. */
BRIG_PUBLIC int brig_store_audit_list(brig_store *s, brig_store_audit **out, size_t *n, const char *ns,
				      const char *agent, const char *session, size_t limit, brig_error **err);

/* Frees an array of n audit records; accepts NULL. */
BRIG_PUBLIC void brig_store_audit_free_array(brig_store_audit *arr, size_t n);

/* ---- egress ledger ---- */

/* Appends a ledger row from rec (everything but id). sandbox, host,
 * decision and reason are required ("" allowed for host and reason); ns,
 * agent and session are all given or all NULL. Errors: BRIG_EINVAL. */
BRIG_PUBLIC int brig_store_egress_add(brig_store *s, int64_t *out_id, const brig_store_egress *rec,
				      brig_error **err);

/* Lists ledger rows, newest first, at most limit (0: all): those of the
 * sandbox (container name) when sandbox is given, else those of the
 * session ns/agent/session. Freed with brig_store_egress_free_array.
 * Errors: BRIG_EINVAL (neither or both given). */
BRIG_PUBLIC int brig_store_egress_list(brig_store *s, brig_store_egress **out, size_t *n, const char *sandbox,
				       const char *ns, const char *agent, const char *session, size_t limit,
				       brig_error **err);

/* Frees an array of n ledger rows; accepts NULL. */
BRIG_PUBLIC void brig_store_egress_free_array(brig_store_egress *arr, size_t n);

#ifdef __cplusplus
}
#endif
#endif
