/* store_sqlite.h — what the SQLite backend's two files share: the handle,
 * statement helpers and the write transaction. Private to src/store/. */
#ifndef BRIG_STORE_SQLITE_H
#define BRIG_STORE_SQLITE_H

#include "store/sqlite_dl.h" /* libsqlite3, dlopen-ed: its calls go through brig__sqlite */
#include "store/store_internal.h"

struct sq_store {
	brig_store base;
	sqlite3 *db;
};

static inline struct sq_store *SQ(brig_store *s)
{
	return (struct sq_store *)s;
}

#define SESSION_COLS                                                                                             \
	"ns, agent, session, generation, state, container_name, container_id, spec_json, revision, created_ms, " \
	"updated_ms"
#define CKPT_COLS "id, ns, agent, session, generation, digest, blob, bytes_raw, bytes_stored, created_ms"
#define AUDIT_COLS                                                                                                    \
	"id, ns, agent, session, generation, container_name, argv_json, exit_code, timed_out, outcome, duration_ms, " \
	"stdout_bytes, stderr_bytes, created_ms, actor"

static inline void sq_finalizep(sqlite3_stmt **st)
{
	if (*st)
		sqlite3_finalize(*st);
}
#define cleanup_stmt __attribute__((cleanup(sq_finalizep)))

static inline void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static inline void bind_key(sqlite3_stmt *st, int first, const brig_store_key *k)
{
	bind_text(st, first, k->ns);
	bind_text(st, first + 1, k->agent);
	bind_text(st, first + 2, k->session);
}

static inline char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? xstrdup((const char *)t) : NULL;
}

/* Sets a BRIG_ESTORE error for the last failure on db (rc: SQLite's code;
 * what: "creating a session"); returns BRIG_ESTORE. */
int brig_store__sq_fail(struct sq_store *q, int rc, const char *what, brig_error **err);
int brig_store__sq_prepare(struct sq_store *q, sqlite3_stmt **st, const char *sql, brig_error **err);

/* One write: fn runs between BEGIN IMMEDIATE (the write lock is taken at
 * once, so a stale read snapshot never has to be upgraded, which would fail
 * with SQLITE_BUSY_SNAPSHOT instead of waiting) and COMMIT; when fn or the
 * commit fails, the write is rolled back and its code returned. What fn
 * left in ctx then is the caller's to free. */
typedef int (*brig_store__sq_tx_fn)(struct sq_store *q, void *ctx, brig_error **err);
int brig_store__sq_tx(struct sq_store *q, brig_store__sq_tx_fn fn, void *ctx, brig_error **err);

/* store_sqlite.c's part of the operations table (store_sqlite_ops.c). */
void brig_store__sq_close(brig_store *s);
int brig_store__sq_schema_version(brig_store *s, int *out, brig_error **err);
extern const struct brig_store_ops brig_store__sqlite_ops;

#endif
