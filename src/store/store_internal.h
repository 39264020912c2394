/* store_internal.h — the backend vtable behind brig/store.h and helpers the
 * SQLite and PostgreSQL backends share. Private to src/store/. */
#ifndef BRIG_STORE_INTERNAL_H
#define BRIG_STORE_INTERNAL_H

#include <pthread.h>

#include "brig/store.h"
#include "util/util.h"

/* SQLite busy timeout; also bounds the retry of switching to WAL mode. */
#define BRIG_STORE_BUSY_MS 10000

/* A session identity; borrowed strings, already validated. */
typedef struct brig_store_key {
	const char *ns;
	const char *agent;
	const char *session;
} brig_store_key;

/* Backend operations. The front end (store.c) validates every argument,
 * clears the out-parameters and holds s->lock around each call, so a backend
 * owns its connection exclusively for the duration of an operation. */
struct brig_store_ops {
	const char *name;
	void (*close)(brig_store *s);
	int (*schema_version)(brig_store *s, int *out, brig_error **err);
	int (*session_get)(brig_store *s, brig_store_session **out, const brig_store_key *k, brig_error **err);
	int (*session_create)(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t now_ms,
			      brig_error **err);
	int (*session_cas)(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t expected,
			   int64_t now_ms, brig_error **err);
	int (*session_list)(brig_store *s, brig_store_session **out, size_t *n, const char *ns, brig_error **err);
	/* keep_checkpoints: only the session row goes (*n stays 0). */
	int (*session_delete)(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			      int64_t expected, bool keep_checkpoints, brig_error **err);
	int (*checkpoint_add)(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec,
			      int64_t now_ms, brig_error **err);
	int (*checkpoint_get)(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err);
	/* Newest first; limit 0 = all. */
	int (*checkpoint_list)(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			       size_t limit, brig_error **err);
	int (*checkpoint_remove)(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err);
	/* The newest checkpoint of each identity without a session record,
	 * of namespace ns when not NULL, ordered by identity. */
	int (*checkpoint_unowned)(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
				  brig_error **err);
	int (*checkpoint_prune)(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
				size_t keep, brig_error **err);
	int (*audit_add)(brig_store *s, int64_t *out_id, const brig_store_audit *rec, int64_t now_ms, brig_error **err);
	int (*audit_list)(brig_store *s, brig_store_audit **out, size_t *n, const brig_store_key *k, size_t limit,
			  brig_error **err);
	int (*egress_add)(brig_store *s, int64_t *out_id, const brig_store_egress *rec, brig_error **err);
	/* sandbox or k (exactly one non-NULL) */
	int (*egress_list)(brig_store *s, brig_store_egress **out, size_t *n, const char *sandbox,
			   const brig_store_key *k, size_t limit, brig_error **err);
};

/* Common head of every backend's handle (each embeds it first). */
struct brig_store {
	const struct brig_store_ops *ops;
	pthread_mutex_t lock;
	char *display_url;       /* password redacted */
	char *path;              /* SQLite file, or NULL */
	struct audit_writer *aw; /* brig_store_audit_background; NULL: rows written by the caller */
};

/* Backend constructors. display is the redacted URL for messages. They set
 * ops (and path); the front end owns display_url and the lock. */
int brig_store__sqlite_open(brig_store **out, const char *path, const char *display, brig_error **err);
int brig_store__pg_open(brig_store **out, const char *url, const char *display, brig_error **err);

/* ---- record.c: shared by the front end and both backends (which never
 * call back into store.c) ---- */

/* Grows *arr (of elements of size el) so that index n fits; *alloc tracks capacity. */
void brig_store__grow(void *arr, size_t *alloc, size_t n, size_t el);

/* Frees the strings inside a record (not the record). Accept NULL. */
void brig_store__session_clear(brig_store_session *r);
void brig_store__checkpoint_clear(brig_store_checkpoint *r);
void brig_store__audit_clear(brig_store_audit *r);
void brig_store__egress_clear(brig_store_egress *r);

/* Replaces every occurrence of secret (when non-empty) in *msg by "***". */
void brig_store__scrub(char **msg, const char *secret);

/* Where the password of a "scheme://user:password@host…" URL lies: *off and
 * *len (bytes into url) cover everything after the first ':' of the user info
 * up to the last '@' before the first '/' (libpq stops the user info at the
 * first '/'; '?' and '#' may be inside). With no such '@', an '@' after the
 * first '/' (before any '?') still ends a password ("u:pa/ss@h"). *ambiguous:
 * libpq reads it differently from the user's evident intent (an unencoded '@'
 * or '/' in the password), so the URL must be refused. False: no password. */
bool brig_store__url_password(const char *url, size_t *off, size_t *len, bool *ambiguous);

/* Percent-decodes s[0..n); NULL when an escape is malformed or is %00. Freed with free(). */
char *brig_store__pct_decode(const char *s, size_t n);

/* Whether a URL query key (as written, n bytes) names a secret: password or sslpassword. */
bool brig_store__secret_key(const char *key, size_t n);

/* Sorts checkpoint records newest (highest id) first. */
void brig_store__checkpoint_sort(brig_store_checkpoint *arr, size_t n);

#endif
