/* store_pg.h — what the PostgreSQL backend's two files share: the handle,
 * statement execution and the retried transaction. Private to src/store/. */
#ifndef BRIG_STORE_PG_H
#define BRIG_STORE_PG_H

#include <inttypes.h>
#include <stdio.h>

#include "store/pq_dl.h" /* libpq, dlopen-ed: its calls go through brig__pq */
#include "store/store_internal.h"

struct pg_store {
	brig_store base;
	PGconn *conn;
	char *url;      /* the URL given to libpq (schema= removed) */
	char *schema;   /* NULL: the server's search_path */
	char **secrets; /* passwords, as written and decoded, scrubbed from every message */
	size_t nsecrets;
	char *display;     /* the redacted URL, scrubbed, until the front end takes it */
	bool reconnecting; /* no nested retry while re-running the set-up */
};

static inline struct pg_store *PG(brig_store *s)
{
	return (struct pg_store *)s;
}

/* Internal: a deadlock or serialization failure inside a transaction, which
 * pg_tx retries; never returned to a caller of the public API. */
#define PG_RETRY (-1000)
#define PG_ATTEMPTS 5
#define SESSION_COLS                                                                                             \
	"ns, agent, session, generation, state, container_name, container_id, spec_json, revision, created_ms, " \
	"updated_ms"
#define CKPT_COLS "id, ns, agent, session, generation, digest, blob, bytes_raw, bytes_stored, created_ms"
#define AUDIT_COLS                                                                                                    \
	"id, ns, agent, session, generation, container_name, argv_json, exit_code, timed_out, outcome, duration_ms, " \
	"stdout_bytes, stderr_bytes, created_ms, actor"
#define KEY_WHERE "ns = $1 AND agent = $2 AND session = $3"

static inline void pg_clearp(PGresult **r)
{
	if (*r)
		PQclear(*r);
}
#define cleanup_result __attribute__((cleanup(pg_clearp)))

/* Values travel as text. */
typedef struct {
	char s[24];
} numbuf;

static inline const char *i64(numbuf *b, int64_t v)
{
	snprintf(b->s, sizeof b->s, "%" PRId64, v);
	return b->s;
}

static inline char *get_text(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : xstrdup(PQgetvalue(r, row, col));
}

static inline int64_t get_i64(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* Runs one parameterised statement (values as text; NULL is SQL NULL). On
 * success *res (when res is not NULL) holds the result for the caller to
 * PQclear. commits: the statement commits a change, so a connection lost
 * under it leaves the outcome unknown (BRIG_EUNCERTAIN); any other statement
 * run outside a transaction is retried once on a new connection. Failures
 * map SQLSTATE 23505 to BRIG_ECONFLICT, 23503 to BRIG_ENOTFOUND, 40001/40P01
 * inside a transaction to PG_RETRY, anything else to BRIG_ESTORE. */
int brig_store__pg_exec(struct pg_store *p, PGresult **res, const char *sql, int n, const char *const *vals,
			bool commits, const char *what, brig_error **err);
/* Makes sure the connection is usable (reconnecting once after a loss) and no
 * failed transaction lingers. */
int brig_store__pg_ensure(struct pg_store *p, brig_error **err);

/* Runs fn inside BEGIN … COMMIT, retrying the whole transaction after a
 * deadlock or serialization failure. fn leaves no output behind on failure. */
typedef int (*brig_store__pg_tx_fn)(struct pg_store *p, void *ctx, brig_error **err);
int brig_store__pg_tx(struct pg_store *p, brig_store__pg_tx_fn fn, void *ctx, brig_error **err);

/* store_pg.c's part of the operations table (store_pg_ops.c). */
void brig_store__pg_close(brig_store *s);
extern const struct brig_store_ops brig_store__pg_ops;

#endif
