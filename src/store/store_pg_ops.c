/* store_pg_ops.c — the PostgreSQL backend's operations: sessions (with
 * compare-and-swap on revision), checkpoints and audit rows, each write one
 * brig_store__pg_tx or one committing statement. */
#include "store/store_pg.h"

#include <stdlib.h>
#include <string.h>

/* ---- rows ---- */

static int row_session(struct pg_store *p, const PGresult *res, int i, brig_store_session *r, brig_error **err)
{
	r->ns = get_text(res, i, 0);
	r->agent = get_text(res, i, 1);
	r->session = get_text(res, i, 2);
	r->generation = get_i64(res, i, 3);
	r->container_name = get_text(res, i, 5);
	r->container_id = get_text(res, i, 6);
	r->spec_json = get_text(res, i, 7);
	r->revision = get_i64(res, i, 8);
	r->created_ms = get_i64(res, i, 9);
	r->updated_ms = get_i64(res, i, 10);
	/* A state this brig does not know is the store's fault, not the caller's. */
	const char *state = PQgetvalue(res, i, 4);
	if (brig_store_state_from_string(&r->state, state, NULL) < 0)
		return brig__error_set(err, BRIG_ESTORE, 0,
				       "store %s: session %s/%s/%s has an unknown state \"%.32s\" in the database "
				       "(written by a newer brig, or edited by hand); expected creating, running, "
				       "paused, failed, destroyed or stopped",
				       p->base.display_url, r->ns ? r->ns : "", r->agent ? r->agent : "",
				       r->session ? r->session : "", state);
	return 0;
}

static int rows_sessions(struct pg_store *p, const PGresult *res, brig_store_session **out, size_t *n, brig_error **err)
{
	int rows = PQntuples(res);
	if (rows == 0)
		return 0;
	*out = xcalloc((size_t)rows, sizeof **out);
	for (int i = 0; i < rows; i++) {
		*n = (size_t)i + 1;
		int r = row_session(p, res, i, &(*out)[i], err);
		if (r < 0) {
			brig_store_session_free_array(*out, *n);
			*out = NULL;
			*n = 0;
			return r;
		}
	}
	return 0;
}

static void rows_checkpoints(const PGresult *res, brig_store_checkpoint **out, size_t *n)
{
	int rows = PQntuples(res);
	*out = NULL;
	*n = 0;
	if (rows == 0)
		return;
	*out = xcalloc((size_t)rows, sizeof **out);
	for (int i = 0; i < rows; i++) {
		brig_store_checkpoint *r = &(*out)[i];
		r->id = get_i64(res, i, 0);
		r->ns = get_text(res, i, 1);
		r->agent = get_text(res, i, 2);
		r->session = get_text(res, i, 3);
		r->generation = get_i64(res, i, 4);
		r->digest = get_text(res, i, 5);
		r->blob = get_text(res, i, 6);
		r->bytes_raw = get_i64(res, i, 7);
		r->bytes_stored = get_i64(res, i, 8);
		r->created_ms = get_i64(res, i, 9);
		r->blob_refs = -1;
		r->count = -1;
	}
	*n = (size_t)rows;
}

static int pg_schema_version(brig_store *s, int *out, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res, "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL, false,
				     "reading the schema version", err)) < 0)
		return r;
	*out = atoi(PQgetvalue(res, 0, 0));
	return 0;
}

/* ---- sessions ---- */

static int not_found(struct pg_store *p, const brig_store_key *k, brig_error **err)
{
	return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", k->ns, k->agent,
			       k->session, p->base.display_url);
}

static int pg_session_get(brig_store *s, brig_store_session **out, const brig_store_key *k, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	const char *vals[] = {k->ns, k->agent, k->session};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res, "SELECT " SESSION_COLS " FROM sessions WHERE " KEY_WHERE, 3, vals, false,
				     "reading a session", err)) < 0)
		return r;
	if (PQntuples(res) == 0)
		return not_found(p, k, err);
	size_t n = 0;
	return rows_sessions(p, res, out, &n, err);
}

static int pg_session_create(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t now,
			     brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf gb, tb;
	const char *vals[] = {rec->ns,
			      rec->agent,
			      rec->session,
			      i64(&gb, rec->generation ? rec->generation : 1),
			      brig_store_state_to_string(rec->state),
			      rec->container_name,
			      rec->container_id,
			      rec->spec_json,
			      i64(&tb, now)};
	cleanup_result PGresult *res = NULL;
	/* ON CONFLICT DO NOTHING waits for a concurrent inserter of the same key
	 * and then reports no row: exactly one racing creator wins. */
	if ((r = brig_store__pg_exec(p, &res,
				     "INSERT INTO sessions (" SESSION_COLS
				     ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $9)"
				     " ON CONFLICT (ns, agent, session) DO NOTHING RETURNING " SESSION_COLS,
				     9, vals, true, "creating a session", err)) < 0)
		return r;
	if (PQntuples(res) == 0)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "session %s/%s/%s already exists in store %s", rec->ns,
				       rec->agent, rec->session, s->display_url);
	if (!out)
		return 0;
	size_t n = 0;
	return rows_sessions(p, res, out, &n, err);
}

/* Explains why a conditional change of a session matched no row. */
static int explain_miss(struct pg_store *p, const brig_store_key *k, int64_t expected, brig_error **err)
{
	const char *vals[] = {k->ns, k->agent, k->session};
	cleanup_result PGresult *res = NULL;
	int r = brig_store__pg_exec(p, &res, "SELECT revision FROM sessions WHERE " KEY_WHERE, 3, vals, false,
				    "reading a session", err);
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return not_found(p, k, err);
	return brig__error_set(err, BRIG_ECONFLICT, 0,
			       "session %s/%s/%s changed (revision %s, expected %lld); read it again and retry", k->ns,
			       k->agent, k->session, PQgetvalue(res, 0, 0), (long long)expected);
}

static int pg_session_cas(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t expected,
			  int64_t now, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf gb, tb, eb;
	const char *vals[] = {rec->ns,
			      rec->agent,
			      rec->session,
			      i64(&gb, rec->generation),
			      brig_store_state_to_string(rec->state),
			      rec->container_name,
			      rec->container_id,
			      rec->spec_json,
			      i64(&tb, now),
			      i64(&eb, expected)};
	cleanup_result PGresult *res = NULL;
	/* Under READ COMMITTED a concurrent update makes PostgreSQL re-check the
	 * WHERE clause against the newest row version, so a stale revision
	 * matches nothing: this single statement is the compare-and-swap. */
	if ((r = brig_store__pg_exec(
		     p, &res,
		     "UPDATE sessions SET generation = $4, state = $5, container_name = $6, container_id = $7,"
		     " spec_json = $8, revision = revision + 1, updated_ms = $9"
		     " WHERE " KEY_WHERE " AND revision = $10 RETURNING " SESSION_COLS,
		     10, vals, true, "updating a session", err)) < 0)
		return r;
	if (PQntuples(res) == 0) {
		brig_store_key k = {rec->ns, rec->agent, rec->session};
		return explain_miss(p, &k, expected, err);
	}
	if (!out)
		return 0;
	size_t n = 0;
	return rows_sessions(p, res, out, &n, err);
}

static int pg_session_list(brig_store *s, brig_store_session **out, size_t *n, const char *ns, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	const char *vals[] = {ns};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res,
				     "SELECT " SESSION_COLS " FROM sessions WHERE $1::text IS NULL OR ns = $1"
				     " ORDER BY ns COLLATE \"C\", agent COLLATE \"C\", session COLLATE \"C\"",
				     1, vals, false, "listing sessions", err)) < 0)
		return r;
	return rows_sessions(p, res, out, n, err);
}

/* Inside a transaction: sets blob_refs of each removed record. */
static int count_blob_refs(struct pg_store *p, brig_store_checkpoint *arr, size_t n, brig_error **err)
{
	for (size_t i = 0; i < n; i++) {
		const char *vals[] = {arr[i].blob};
		cleanup_result PGresult *res = NULL;
		int r = brig_store__pg_exec(p, &res, "SELECT count(*) FROM checkpoints WHERE blob = $1", 1, vals, false,
					    "counting checkpoint blob references", err);
		if (r < 0)
			return r;
		arr[i].blob_refs = get_i64(res, 0, 0);
	}
	return 0;
}

struct removal {
	const brig_store_key *k;
	int64_t expected; /* session delete */
	bool keep_checkpoints; /* session delete: the row only */
	size_t keep;      /* prune */
	int64_t id;       /* remove */
	brig_store_checkpoint *out;
	size_t n;
};

static void removal_reset(struct removal *c)
{
	brig_store_checkpoint_free_array(c->out, c->n);
	c->out = NULL;
	c->n = 0;
}

/* Runs a removing write (fn) and hands the records it removed to *out and
 * *n (may be NULL), or frees them when it fails. */
static int run_removal(brig_store *s, brig_store__pg_tx_fn fn, struct removal *c, brig_store_checkpoint **out,
		       size_t *n, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	if ((r = brig_store__pg_tx(p, fn, c, err)) < 0) {
		removal_reset(c);
		return r;
	}
	*out = c->out;
	if (n)
		*n = c->n;
	return 0;
}

static int tx_session_delete(struct pg_store *p, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	removal_reset(c); /* a retried attempt starts empty */
	const char *key[] = {c->k->ns, c->k->agent, c->k->session};
	int r;
	{
		/* The row lock makes concurrent checkpoint adds (which take a key
		 * share lock on the row) wait and then fail cleanly. */
		cleanup_result PGresult *res = NULL;
		if ((r = brig_store__pg_exec(p, &res, "SELECT revision FROM sessions WHERE " KEY_WHERE " FOR UPDATE", 3,
					     key, false, "locking a session", err)) < 0)
			return r;
		if (PQntuples(res) == 0)
			return not_found(p, c->k, err);
		int64_t rev = get_i64(res, 0, 0);
		if (c->expected != BRIG_STORE_ANY_REVISION && rev != c->expected)
			return brig__error_set(err, BRIG_ECONFLICT, 0,
					       "session %s/%s/%s changed (revision %lld, expected %lld); read it again "
					       "and retry",
					       c->k->ns, c->k->agent, c->k->session, (long long)rev,
					       (long long)c->expected);
	}
	if (!c->keep_checkpoints) {
		cleanup_result PGresult *res = NULL;
		if ((r = brig_store__pg_exec(p, &res,
					     "DELETE FROM checkpoints WHERE " KEY_WHERE " RETURNING " CKPT_COLS, 3, key,
					     false, "deleting checkpoints", err)) < 0)
			return r;
		rows_checkpoints(res, &c->out, &c->n);
		brig_store__checkpoint_sort(c->out, c->n);
	}
	if ((r = brig_store__pg_exec(p, NULL, "DELETE FROM sessions WHERE " KEY_WHERE, 3, key, false,
				     "deleting a session", err)) < 0 ||
	    (r = count_blob_refs(p, c->out, c->n, err)) < 0) {
		removal_reset(c);
		return r;
	}
	return 0;
}

static int pg_session_delete(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			     int64_t expected, bool keep_checkpoints, brig_error **err)
{
	struct removal c = {.k = k, .expected = expected, .keep_checkpoints = keep_checkpoints};
	return run_removal(s, tx_session_delete, &c, out, n, err);
}

/* ---- checkpoints ---- */

static int pg_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec, int64_t now,
			     brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf gb, rb, sb, tb;
	const char *vals[] = {rec->ns,
			      rec->agent,
			      rec->session,
			      i64(&gb, rec->generation),
			      rec->digest,
			      rec->blob,
			      i64(&rb, rec->bytes_raw),
			      i64(&sb, rec->bytes_stored),
			      i64(&tb, now)};
	cleanup_result PGresult *res = NULL;
	r = brig_store__pg_exec(
		p, &res,
		"INSERT INTO checkpoints (ns, agent, session, generation, digest, blob, bytes_raw, bytes_stored,"
		" created_ms) SELECT $1, $2, $3, $4::bigint, $5, $6, $7::bigint, $8::bigint, $9::bigint"
		" FROM sessions WHERE " KEY_WHERE " FOR KEY SHARE RETURNING " CKPT_COLS,
		9, vals, true, "adding a checkpoint", err);
	/* No row: no such session (checkpoints have no foreign key: they
	 * outlive a session record that brig sessions rm removed). */
	if (r == 0 && PQntuples(res) == 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", rec->ns,
				       rec->agent, rec->session, s->display_url);
	if (r < 0)
		return r;
	size_t n = 0;
	brig_store_checkpoint *arr = NULL;
	rows_checkpoints(res, &arr, &n);
	if (out)
		*out = arr;
	else
		brig_store_checkpoint_free_array(arr, n);
	return 0;
}

static int pg_checkpoint_get(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf ib;
	const char *vals[] = {i64(&ib, id)};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res, "SELECT " CKPT_COLS " FROM checkpoints WHERE id = $1", 1, vals, false,
				     "reading a checkpoint", err)) < 0)
		return r;
	size_t n = 0;
	rows_checkpoints(res, out, &n);
	if (n == 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "checkpoint %lld not found in store %s", (long long)id,
				       s->display_url);
	return 0;
}

static int pg_checkpoint_list(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			      size_t limit, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf lb;
	/* LIMIT NULL is no limit. */
	const char *vals[] = {k->ns, k->agent, k->session, limit ? i64(&lb, (int64_t)limit) : NULL};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res,
				     "SELECT " CKPT_COLS " FROM checkpoints WHERE " KEY_WHERE
				     " ORDER BY id DESC LIMIT $4::bigint",
				     4, vals, false, "listing checkpoints", err)) < 0)
		return r;
	rows_checkpoints(res, out, n);
	return 0;
}

static int pg_checkpoint_unowned(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
				 brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	const char *vals[] = {ns};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res,
				     "SELECT " CKPT_COLS ", (SELECT count(*) FROM checkpoints k WHERE k.ns = checkpoints.ns"
				     " AND k.agent = checkpoints.agent AND k.session = checkpoints.session)"
				     " FROM checkpoints WHERE ($1::text IS NULL OR ns = $1) AND id IN"
				     " (SELECT max(c.id) FROM checkpoints c WHERE NOT EXISTS (SELECT 1 FROM sessions s"
				     " WHERE s.ns = c.ns AND s.agent = c.agent AND s.session = c.session)"
				     " GROUP BY c.ns, c.agent, c.session)"
				     " ORDER BY ns COLLATE \"C\", agent COLLATE \"C\", session COLLATE \"C\"",
				     1, vals, false, "listing checkpoints without a session", err)) < 0)
		return r;
	rows_checkpoints(res, out, n);
	for (size_t i = 0; i < *n; i++)
		(*out)[i].count = get_i64(res, (int)i, 10);
	return 0;
}

static int tx_checkpoint_remove(struct pg_store *p, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	removal_reset(c); /* a retried attempt starts empty */
	numbuf ib;
	const char *vals[] = {i64(&ib, c->id)};
	cleanup_result PGresult *res = NULL;
	int r = brig_store__pg_exec(p, &res, "DELETE FROM checkpoints WHERE id = $1 RETURNING " CKPT_COLS, 1, vals,
				    false, "removing a checkpoint", err);
	if (r < 0)
		return r;
	rows_checkpoints(res, &c->out, &c->n);
	if (c->n == 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "checkpoint %lld not found in store %s",
				       (long long)c->id, p->base.display_url);
	if ((r = count_blob_refs(p, c->out, c->n, err)) < 0) {
		removal_reset(c);
		return r;
	}
	return 0;
}

static int pg_checkpoint_remove(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	struct removal c = {.id = id};
	return run_removal(s, tx_checkpoint_remove, &c, out, NULL, err);
}

static int tx_checkpoint_prune(struct pg_store *p, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	removal_reset(c); /* a retried attempt starts empty */
	numbuf kb;
	const char *vals[] = {c->k->ns, c->k->agent, c->k->session, i64(&kb, (int64_t)c->keep)};
	cleanup_result PGresult *res = NULL;
	/* A concurrent pruner blocks on the row locks and then skips the rows
	 * already gone, so each removed record is reported exactly once. */
	int r = brig_store__pg_exec(p, &res,
				    "DELETE FROM checkpoints WHERE id IN (SELECT id FROM checkpoints WHERE " KEY_WHERE
				    " ORDER BY id DESC OFFSET $4::bigint) RETURNING " CKPT_COLS,
				    4, vals, false, "pruning checkpoints", err);
	if (r < 0)
		return r;
	rows_checkpoints(res, &c->out, &c->n);
	brig_store__checkpoint_sort(c->out, c->n);
	if ((r = count_blob_refs(p, c->out, c->n, err)) < 0) {
		removal_reset(c);
		return r;
	}
	return 0;
}

static int pg_checkpoint_prune(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			       size_t keep, brig_error **err)
{
	struct removal c = {.k = k, .keep = keep};
	return run_removal(s, tx_checkpoint_prune, &c, out, n, err);
}

/* ---- audit ---- */

static int pg_audit_add(brig_store *s, int64_t *out_id, const brig_store_audit *rec, int64_t now, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf gb, eb, db, ob, sb, tb;
	const char *vals[] = {rec->ns,
			      rec->agent,
			      rec->session,
			      i64(&gb, rec->generation),
			      rec->container_name,
			      rec->argv_json,
			      rec->exit_code < 0 ? NULL : i64(&eb, rec->exit_code),
			      rec->timed_out ? "true" : "false",
			      rec->outcome,
			      i64(&db, rec->duration_ms),
			      i64(&ob, rec->stdout_bytes),
			      i64(&sb, rec->stderr_bytes),
			      i64(&tb, now),
			      rec->actor};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(
		     p, &res,
		     "INSERT INTO audit (ns, agent, session, generation, container_name, argv_json, exit_code,"
		     " timed_out, outcome, duration_ms, stdout_bytes, stderr_bytes, created_ms, actor)"
		     " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id",
		     14, vals, true, "adding an audit row", err)) < 0)
		return r;
	*out_id = get_i64(res, 0, 0);
	return 0;
}

static int pg_audit_list(brig_store *s, brig_store_audit **out, size_t *n, const brig_store_key *k, size_t limit,
			 brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf lb;
	const char *vals[] = {k->ns, k->agent, k->session, limit ? i64(&lb, (int64_t)limit) : NULL};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(
		     p, &res, "SELECT " AUDIT_COLS " FROM audit WHERE " KEY_WHERE " ORDER BY id DESC LIMIT $4::bigint",
		     4, vals, false, "listing audit rows", err)) < 0)
		return r;
	int rows = PQntuples(res);
	if (rows == 0)
		return 0;
	*out = xcalloc((size_t)rows, sizeof **out);
	for (int i = 0; i < rows; i++) {
		brig_store_audit *a = &(*out)[i];
		a->id = get_i64(res, i, 0);
		a->ns = get_text(res, i, 1);
		a->agent = get_text(res, i, 2);
		a->session = get_text(res, i, 3);
		a->generation = get_i64(res, i, 4);
		a->container_name = get_text(res, i, 5);
		a->argv_json = get_text(res, i, 6);
		a->exit_code = PQgetisnull(res, i, 7) ? -1 : (int)get_i64(res, i, 7);
		a->timed_out = PQgetvalue(res, i, 8)[0] == 't';
		a->outcome = get_text(res, i, 9);
		a->duration_ms = get_i64(res, i, 10);
		a->stdout_bytes = get_i64(res, i, 11);
		a->stderr_bytes = get_i64(res, i, 12);
		a->created_ms = get_i64(res, i, 13);
		a->actor = get_text(res, i, 14);
	}
	*n = (size_t)rows;
	return 0;
}

/* ---- egress ledger ---- */

#define EGRESS_COLS                                                                                           \
	"id, sandbox, ns, agent, session, host, port, decision, reason, bytes_up, bytes_down, start_ms, " \
	"duration_ms"

static int pg_egress_add(brig_store *s, int64_t *out_id, const brig_store_egress *rec, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf pb, ub, db, sb, tb;
	const char *vals[] = {rec->sandbox,	rec->ns,	rec->agent,
			      rec->session,	rec->host,	i64(&pb, rec->port),
			      rec->decision,	rec->reason,	i64(&ub, rec->bytes_up),
			      i64(&db, rec->bytes_down), i64(&sb, rec->start_ms), i64(&tb, rec->duration_ms)};
	cleanup_result PGresult *res = NULL;
	if ((r = brig_store__pg_exec(p, &res,
				     "INSERT INTO egress (sandbox, ns, agent, session, host, port, decision, reason,"
				     " bytes_up, bytes_down, start_ms, duration_ms)"
				     " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
				     12, vals, true, "adding an egress ledger row", err)) < 0)
		return r;
	*out_id = get_i64(res, 0, 0);
	return 0;
}

static int pg_egress_list(brig_store *s, brig_store_egress **out, size_t *n, const char *sandbox,
			  const brig_store_key *k, size_t limit, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = brig_store__pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf lb;
	const char *lim = limit ? i64(&lb, (int64_t)limit) : NULL;
	const char *by_sandbox[] = {sandbox, lim};
	const char *by_key[] = {k ? k->ns : NULL, k ? k->agent : NULL, k ? k->session : NULL, lim};
	cleanup_result PGresult *res = NULL;
	if (sandbox)
		r = brig_store__pg_exec(p, &res,
					"SELECT " EGRESS_COLS " FROM egress WHERE sandbox = $1 ORDER BY id DESC LIMIT "
					"$2::bigint",
					2, by_sandbox, false, "listing egress ledger rows", err);
	else
		r = brig_store__pg_exec(p, &res,
					"SELECT " EGRESS_COLS " FROM egress WHERE " KEY_WHERE
					" ORDER BY id DESC LIMIT $4::bigint",
					4, by_key, false, "listing egress ledger rows", err);
	if (r < 0)
		return r;
	int rows = PQntuples(res);
	if (rows == 0)
		return 0;
	*out = xcalloc((size_t)rows, sizeof **out);
	for (int i = 0; i < rows; i++) {
		brig_store_egress *e = &(*out)[i];
		e->id = get_i64(res, i, 0);
		e->sandbox = get_text(res, i, 1);
		e->ns = get_text(res, i, 2);
		e->agent = get_text(res, i, 3);
		e->session = get_text(res, i, 4);
		e->host = get_text(res, i, 5);
		e->port = (int)get_i64(res, i, 6);
		e->decision = get_text(res, i, 7);
		e->reason = get_text(res, i, 8);
		e->bytes_up = get_i64(res, i, 9);
		e->bytes_down = get_i64(res, i, 10);
		e->start_ms = get_i64(res, i, 11);
		e->duration_ms = get_i64(res, i, 12);
	}
	*n = (size_t)rows;
	return 0;
}

const struct brig_store_ops brig_store__pg_ops = {
	.name = "postgresql",
	.close = brig_store__pg_close,
	.schema_version = pg_schema_version,
	.session_get = pg_session_get,
	.session_create = pg_session_create,
	.session_cas = pg_session_cas,
	.session_list = pg_session_list,
	.session_delete = pg_session_delete,
	.checkpoint_add = pg_checkpoint_add,
	.checkpoint_get = pg_checkpoint_get,
	.checkpoint_list = pg_checkpoint_list,
	.checkpoint_unowned = pg_checkpoint_unowned,
	.checkpoint_remove = pg_checkpoint_remove,
	.checkpoint_prune = pg_checkpoint_prune,
	.audit_add = pg_audit_add,
	.egress_add = pg_egress_add,
	.egress_list = pg_egress_list,
	.audit_list = pg_audit_list,
};
