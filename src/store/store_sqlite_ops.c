/* store_sqlite_ops.c — the SQLite backend's operations: sessions (with
 * compare-and-swap on revision), checkpoints and audit rows. Every write is
 * one brig_store__sq_tx; reads run outside a transaction. */
#include "store/store_sqlite.h"

#include <string.h>

/* ---- rows ---- */

static int row_session(struct sq_store *q, sqlite3_stmt *st, brig_store_session *r, brig_error **err)
{
	r->ns = col_text(st, 0);
	r->agent = col_text(st, 1);
	r->session = col_text(st, 2);
	r->generation = sqlite3_column_int64(st, 3);
	const char *state = (const char *)sqlite3_column_text(st, 4);
	r->container_name = col_text(st, 5);
	r->container_id = col_text(st, 6);
	r->spec_json = col_text(st, 7);
	r->revision = sqlite3_column_int64(st, 8);
	r->created_ms = sqlite3_column_int64(st, 9);
	r->updated_ms = sqlite3_column_int64(st, 10);
	/* A state this brig does not know is the store's fault, not the caller's. */
	if (brig_store_state_from_string(&r->state, state, NULL) < 0)
		return brig__error_set(err, BRIG_ESTORE, 0,
				       "store %s: session %s/%s/%s has an unknown state \"%.32s\" in the database "
				       "(written by a newer brig, or edited by hand); expected creating, running, "
				       "paused, failed, destroyed or stopped",
				       q->base.display_url, r->ns ? r->ns : "", r->agent ? r->agent : "",
				       r->session ? r->session : "", state ? state : "(null)");
	return 0;
}

static void row_checkpoint(sqlite3_stmt *st, brig_store_checkpoint *r)
{
	r->id = sqlite3_column_int64(st, 0);
	r->ns = col_text(st, 1);
	r->agent = col_text(st, 2);
	r->session = col_text(st, 3);
	r->generation = sqlite3_column_int64(st, 4);
	r->digest = col_text(st, 5);
	r->blob = col_text(st, 6);
	r->bytes_raw = sqlite3_column_int64(st, 7);
	r->bytes_stored = sqlite3_column_int64(st, 8);
	r->created_ms = sqlite3_column_int64(st, 9);
	r->blob_refs = -1;
	r->count = -1;
}

static void row_audit(sqlite3_stmt *st, brig_store_audit *r)
{
	r->id = sqlite3_column_int64(st, 0);
	r->ns = col_text(st, 1);
	r->agent = col_text(st, 2);
	r->session = col_text(st, 3);
	r->generation = sqlite3_column_int64(st, 4);
	r->container_name = col_text(st, 5);
	r->argv_json = col_text(st, 6);
	r->exit_code = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 7);
	r->timed_out = sqlite3_column_int(st, 8) != 0;
	r->outcome = col_text(st, 9);
	r->duration_ms = sqlite3_column_int64(st, 10);
	r->stdout_bytes = sqlite3_column_int64(st, 11);
	r->stderr_bytes = sqlite3_column_int64(st, 12);
	r->created_ms = sqlite3_column_int64(st, 13);
	r->actor = col_text(st, 14);
}

/* Steps a prepared checkpoint query, collecting every row. */
/* count_col: the column of each row's count (_unowned), or -1 */
static int collect_counted(struct sq_store *q, sqlite3_stmt *st, brig_store_checkpoint **out, size_t *n,
			   int count_col, brig_error **err)
{
	size_t alloc = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		brig_store__grow(out, &alloc, *n, sizeof **out);
		row_checkpoint(st, &(*out)[*n]);
		if (count_col >= 0)
			(*out)[*n].count = sqlite3_column_int64(st, count_col);
		(*n)++;
	}
	if (rc != SQLITE_DONE) {
		brig_store_checkpoint_free_array(*out, *n);
		*out = NULL;
		*n = 0;
		return brig_store__sq_fail(q, rc, "reading checkpoints", err);
	}
	return 0;
}

static int collect_checkpoints(struct sq_store *q, sqlite3_stmt *st, brig_store_checkpoint **out, size_t *n,
			       brig_error **err)
{
	return collect_counted(q, st, out, n, -1, err);
}

/* Reads the one row a RETURNING statement produced (rc: its first step)
 * and finishes the statement: RETURNING rows come out before it completes. */
static int returned_session(struct sq_store *q, sqlite3_stmt *st, int rc, brig_store_session **out, const char *what,
			    brig_error **err)
{
	if (rc != SQLITE_ROW)
		return brig_store__sq_fail(q, rc, what, err);
	brig_store_session *res = xcalloc(1, sizeof *res);
	int r = row_session(q, st, res, err);
	if (r == 0 && (rc = sqlite3_step(st)) != SQLITE_DONE)
		r = brig_store__sq_fail(q, rc, what, err);
	if (r < 0) {
		brig_store_session_free(res);
		return r;
	}
	*out = res;
	return 0;
}

/* Hands a written session to *out (may be NULL), or frees it on failure. */
static int hand_session(brig_store_session **out, brig_store_session *res, int r)
{
	if (r == 0 && out)
		*out = res;
	else
		brig_store_session_free(res);
	return r;
}

/* ---- sessions ---- */

static int sq_session_get(brig_store *s, brig_store_session **out, const brig_store_key *k, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(
		q, &st, "SELECT " SESSION_COLS " FROM sessions WHERE ns = ? AND agent = ? AND session = ?", err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", k->ns,
				       k->agent, k->session, s->display_url);
	if (rc != SQLITE_ROW)
		return brig_store__sq_fail(q, rc, "reading a session", err);
	brig_store_session *rec = xcalloc(1, sizeof *rec);
	if ((r = row_session(q, st, rec, err)) < 0) {
		brig_store_session_free(rec);
		return r;
	}
	*out = rec;
	return 0;
}

struct session_write {
	const brig_store_session *rec;
	int64_t expected;
	int64_t now;
	brig_store_session *res;
};

static int tx_session_create(struct sq_store *q, void *ctx, brig_error **err)
{
	struct session_write *c = ctx;
	const brig_store_session *rec = c->rec;
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       "INSERT INTO sessions (" SESSION_COLS
				       ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)"
				       " ON CONFLICT (ns, agent, session) DO NOTHING RETURNING " SESSION_COLS,
				       err);
	if (r < 0)
		return r;
	bind_text(st, 1, rec->ns);
	bind_text(st, 2, rec->agent);
	bind_text(st, 3, rec->session);
	sqlite3_bind_int64(st, 4, rec->generation ? rec->generation : 1);
	bind_text(st, 5, brig_store_state_to_string(rec->state));
	bind_text(st, 6, rec->container_name);
	bind_text(st, 7, rec->container_id);
	bind_text(st, 8, rec->spec_json);
	sqlite3_bind_int64(st, 9, c->now);
	sqlite3_bind_int64(st, 10, c->now);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "session %s/%s/%s already exists in store %s", rec->ns,
				       rec->agent, rec->session, q->base.display_url);
	return returned_session(q, st, rc, &c->res, "creating a session", err);
}

static int sq_session_create(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t now,
			     brig_error **err)
{
	struct session_write c = {.rec = rec, .now = now};
	return hand_session(out, c.res, brig_store__sq_tx(SQ(s), tx_session_create, &c, err));
}

/* Inside a write: explains why a conditional change of a session found no row. */
static int explain_miss(struct sq_store *q, const brig_store_key *k, int64_t expected, brig_error **err)
{
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       "SELECT revision FROM sessions WHERE ns = ? AND agent = ? AND session = ?", err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", k->ns,
				       k->agent, k->session, q->base.display_url);
	if (rc != SQLITE_ROW)
		return brig_store__sq_fail(q, rc, "reading a session", err);
	return brig__error_set(err, BRIG_ECONFLICT, 0,
			       "session %s/%s/%s changed (revision %lld, expected %lld); read it again and retry",
			       k->ns, k->agent, k->session, (long long)sqlite3_column_int64(st, 0),
			       (long long)expected);
}

static int tx_session_cas(struct sq_store *q, void *ctx, brig_error **err)
{
	struct session_write *c = ctx;
	const brig_store_session *rec = c->rec;
	brig_store_key k = {rec->ns, rec->agent, rec->session};
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(
		q, &st,
		"UPDATE sessions SET generation = ?, state = ?, container_name = ?, container_id = ?,"
		" spec_json = ?, revision = revision + 1, updated_ms = ?"
		" WHERE ns = ? AND agent = ? AND session = ? AND revision = ?"
		" RETURNING " SESSION_COLS,
		err);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, rec->generation);
	bind_text(st, 2, brig_store_state_to_string(rec->state));
	bind_text(st, 3, rec->container_name);
	bind_text(st, 4, rec->container_id);
	bind_text(st, 5, rec->spec_json);
	sqlite3_bind_int64(st, 6, c->now);
	bind_key(st, 7, &k);
	sqlite3_bind_int64(st, 10, c->expected);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return explain_miss(q, &k, c->expected, err);
	return returned_session(q, st, rc, &c->res, "updating a session", err);
}

static int sq_session_cas(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t expected,
			  int64_t now, brig_error **err)
{
	struct session_write c = {.rec = rec, .expected = expected, .now = now};
	return hand_session(out, c.res, brig_store__sq_tx(SQ(s), tx_session_cas, &c, err));
}

static int sq_session_list(brig_store *s, brig_store_session **out, size_t *n, const char *ns, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(
		q, &st, "SELECT " SESSION_COLS " FROM sessions WHERE ?1 IS NULL OR ns = ?1 ORDER BY ns, agent, session",
		err);
	if (r < 0)
		return r;
	bind_text(st, 1, ns);
	size_t alloc = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		brig_store__grow(out, &alloc, *n, sizeof **out);
		(*n)++;
		if ((r = row_session(q, st, &(*out)[*n - 1], err)) < 0)
			goto fail;
	}
	if (rc != SQLITE_DONE) {
		r = brig_store__sq_fail(q, rc, "listing sessions", err);
		goto fail;
	}
	return 0;
fail:
	brig_store_session_free_array(*out, *n);
	*out = NULL;
	*n = 0;
	return r;
}

/* Inside a write: sets blob_refs of each removed record. */
static int count_blob_refs(struct sq_store *q, brig_store_checkpoint *arr, size_t n, brig_error **err)
{
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st, "SELECT count(*) FROM checkpoints WHERE blob = ?", err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		sqlite3_reset(st);
		bind_text(st, 1, arr[i].blob);
		int rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			return brig_store__sq_fail(q, rc, "counting checkpoint blob references", err);
		arr[i].blob_refs = sqlite3_column_int64(st, 0);
	}
	return 0;
}

/* What a removing write returns: the checkpoint records it took away. */
struct removal {
	const brig_store_key *k;
	int64_t expected; /* session_delete: the revision, 0 = any */
	bool keep_checkpoints; /* session_delete: the row only */
	int64_t id;       /* checkpoint_remove */
	size_t keep;      /* checkpoint_prune */
	brig_store_checkpoint *out;
	size_t n;
};

/* Hands the removed records to the caller, or frees them on failure. */
static int hand_removed(brig_store_checkpoint **out, size_t *n, struct removal *c, int r)
{
	if (r < 0) {
		brig_store_checkpoint_free_array(c->out, c->n);
		return r;
	}
	*out = c->out;
	if (n)
		*n = c->n;
	return 0;
}

static int tx_session_delete(struct sq_store *q, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	int r;
	cleanup_stmt sqlite3_stmt *del = NULL;
	if ((r = brig_store__sq_prepare(q, &del,
					"DELETE FROM sessions WHERE ns = ? AND agent = ? AND session = ?"
					" AND (?4 = 0 OR revision = ?4)",
					err)) < 0)
		return r;
	bind_key(del, 1, c->k);
	sqlite3_bind_int64(del, 4, c->expected);
	int rc = sqlite3_step(del);
	if (rc != SQLITE_DONE)
		return brig_store__sq_fail(q, rc, "deleting a session", err);
	if (sqlite3_changes(q->db) == 0)
		return explain_miss(q, c->k, c->expected, err);
	if (c->keep_checkpoints)
		return 0;
	cleanup_stmt sqlite3_stmt *sel = NULL;
	if ((r = brig_store__sq_prepare(q, &sel,
					"DELETE FROM checkpoints WHERE ns = ? AND agent = ? AND session = ?"
					" RETURNING " CKPT_COLS,
					err)) < 0)
		return r;
	bind_key(sel, 1, c->k);
	if ((r = collect_checkpoints(q, sel, &c->out, &c->n, err)) < 0)
		return r;
	brig_store__checkpoint_sort(c->out, c->n);
	return count_blob_refs(q, c->out, c->n, err);
}

static int sq_session_delete(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			     int64_t expected, bool keep_checkpoints, brig_error **err)
{
	struct removal c = {.k = k, .expected = expected, .keep_checkpoints = keep_checkpoints};
	return hand_removed(out, n, &c, brig_store__sq_tx(SQ(s), tx_session_delete, &c, err));
}

/* ---- checkpoints ---- */

static int sq_checkpoint_get(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st, "SELECT " CKPT_COLS " FROM checkpoints WHERE id = ?", err);
	if (r < 0)
		return r;
	sqlite3_bind_int64(st, 1, id);
	size_t n = 0;
	if ((r = collect_checkpoints(q, st, out, &n, err)) < 0)
		return r;
	if (n == 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "checkpoint %lld not found in store %s", (long long)id,
				       s->display_url);
	return 0;
}

struct checkpoint_write {
	const brig_store_checkpoint *rec;
	int64_t now;
	brig_store_checkpoint *res;
};

static int tx_checkpoint_add(struct sq_store *q, void *ctx, brig_error **err)
{
	struct checkpoint_write *c = ctx;
	const brig_store_checkpoint *rec = c->rec;
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(
		q, &st,
		"INSERT INTO checkpoints (ns, agent, session, generation, digest, blob, bytes_raw,"
		" bytes_stored, created_ms) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE EXISTS"
		" (SELECT 1 FROM sessions WHERE ns = ?1 AND agent = ?2 AND session = ?3) RETURNING " CKPT_COLS,
		err);
	if (r < 0)
		return r;
	bind_text(st, 1, rec->ns);
	bind_text(st, 2, rec->agent);
	bind_text(st, 3, rec->session);
	sqlite3_bind_int64(st, 4, rec->generation);
	bind_text(st, 5, rec->digest);
	bind_text(st, 6, rec->blob);
	sqlite3_bind_int64(st, 7, rec->bytes_raw);
	sqlite3_bind_int64(st, 8, rec->bytes_stored);
	sqlite3_bind_int64(st, 9, c->now);
	/* No row: no such session (checkpoints have no foreign key: they
	 * outlive a session record that brig sessions rm removed). */
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		c->res = xcalloc(1, sizeof *c->res);
		row_checkpoint(st, c->res);
		if ((rc = sqlite3_step(st)) == SQLITE_DONE)
			return 0;
	}
	if (rc == SQLITE_DONE)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", rec->ns,
				       rec->agent, rec->session, q->base.display_url);
	return brig_store__sq_fail(q, rc, "adding a checkpoint", err);
}

static int sq_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec, int64_t now,
			     brig_error **err)
{
	struct checkpoint_write c = {.rec = rec, .now = now};
	int r = brig_store__sq_tx(SQ(s), tx_checkpoint_add, &c, err);
	if (r == 0 && out)
		*out = c.res;
	else
		brig_store_checkpoint_free(c.res);
	return r;
}

static int sq_checkpoint_list(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			      size_t limit, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       "SELECT " CKPT_COLS
				       " FROM checkpoints WHERE ns = ? AND agent = ? AND session = ?"
				       " ORDER BY id DESC LIMIT ?",
				       err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	sqlite3_bind_int64(st, 4, limit ? (int64_t)limit : -1);
	return collect_checkpoints(q, st, out, n, err);
}

static int sq_checkpoint_unowned(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
				 brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       "SELECT " CKPT_COLS ", (SELECT count(*) FROM checkpoints k WHERE k.ns = checkpoints.ns"
				       " AND k.agent = checkpoints.agent AND k.session = checkpoints.session)"
				       " FROM checkpoints WHERE (?1 IS NULL OR ns = ?1) AND id IN"
				       " (SELECT max(c.id) FROM checkpoints c WHERE NOT EXISTS (SELECT 1 FROM sessions s"
				       " WHERE s.ns = c.ns AND s.agent = c.agent AND s.session = c.session)"
				       " GROUP BY c.ns, c.agent, c.session)"
				       " ORDER BY ns, agent, session",
				       err);
	if (r < 0)
		return r;
	bind_text(st, 1, ns);
	return collect_counted(q, st, out, n, 10, err);
}

static int tx_checkpoint_remove(struct sq_store *q, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	int r = sq_checkpoint_get(&q->base, &c->out, c->id, err);
	if (r < 0)
		return r;
	c->n = 1;
	cleanup_stmt sqlite3_stmt *st = NULL;
	if ((r = brig_store__sq_prepare(q, &st, "DELETE FROM checkpoints WHERE id = ?", err)) < 0)
		return r;
	sqlite3_bind_int64(st, 1, c->id);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return brig_store__sq_fail(q, rc, "removing a checkpoint", err);
	return count_blob_refs(q, c->out, 1, err);
}

static int sq_checkpoint_remove(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	struct removal c = {.id = id};
	return hand_removed(out, NULL, &c, brig_store__sq_tx(SQ(s), tx_checkpoint_remove, &c, err));
}

static int tx_checkpoint_prune(struct sq_store *q, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	cleanup_stmt sqlite3_stmt *sel = NULL;
	int r = brig_store__sq_prepare(q, &sel,
				       "SELECT " CKPT_COLS
				       " FROM checkpoints WHERE ns = ? AND agent = ? AND session = ?"
				       " ORDER BY id DESC LIMIT -1 OFFSET ?",
				       err);
	if (r < 0)
		return r;
	bind_key(sel, 1, c->k);
	sqlite3_bind_int64(sel, 4, (int64_t)c->keep);
	if ((r = collect_checkpoints(q, sel, &c->out, &c->n, err)) < 0)
		return r;
	cleanup_stmt sqlite3_stmt *del = NULL;
	if ((r = brig_store__sq_prepare(q, &del, "DELETE FROM checkpoints WHERE id = ?", err)) < 0)
		return r;
	for (size_t i = 0; i < c->n; i++) {
		sqlite3_reset(del);
		sqlite3_bind_int64(del, 1, c->out[i].id);
		int rc = sqlite3_step(del);
		if (rc != SQLITE_DONE)
			return brig_store__sq_fail(q, rc, "pruning checkpoints", err);
	}
	return count_blob_refs(q, c->out, c->n, err);
}

static int sq_checkpoint_prune(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			       size_t keep, brig_error **err)
{
	struct removal c = {.k = k, .keep = keep};
	return hand_removed(out, n, &c, brig_store__sq_tx(SQ(s), tx_checkpoint_prune, &c, err));
}

/* ---- audit ---- */

struct audit_write {
	const brig_store_audit *rec;
	int64_t now;
	int64_t id;
};

static int tx_audit_add(struct sq_store *q, void *ctx, brig_error **err)
{
	struct audit_write *c = ctx;
	const brig_store_audit *rec = c->rec;
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(
		q, &st,
		"INSERT INTO audit (ns, agent, session, generation, container_name, argv_json,"
		" exit_code, timed_out, outcome, duration_ms, stdout_bytes, stderr_bytes, created_ms, actor)"
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		err);
	if (r < 0)
		return r;
	bind_text(st, 1, rec->ns);
	bind_text(st, 2, rec->agent);
	bind_text(st, 3, rec->session);
	sqlite3_bind_int64(st, 4, rec->generation);
	bind_text(st, 5, rec->container_name);
	bind_text(st, 6, rec->argv_json);
	if (rec->exit_code < 0)
		sqlite3_bind_null(st, 7);
	else
		sqlite3_bind_int(st, 7, rec->exit_code);
	sqlite3_bind_int(st, 8, rec->timed_out ? 1 : 0);
	bind_text(st, 9, rec->outcome);
	sqlite3_bind_int64(st, 10, rec->duration_ms);
	sqlite3_bind_int64(st, 11, rec->stdout_bytes);
	sqlite3_bind_int64(st, 12, rec->stderr_bytes);
	sqlite3_bind_int64(st, 13, c->now);
	bind_text(st, 14, rec->actor);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return brig_store__sq_fail(q, rc, "adding an audit row", err);
	c->id = sqlite3_last_insert_rowid(q->db);
	return 0;
}

static int sq_audit_add(brig_store *s, int64_t *out_id, const brig_store_audit *rec, int64_t now, brig_error **err)
{
	struct audit_write c = {.rec = rec, .now = now};
	int r = brig_store__sq_tx(SQ(s), tx_audit_add, &c, err);
	if (r == 0)
		*out_id = c.id;
	return r;
}

static int sq_audit_list(brig_store *s, brig_store_audit **out, size_t *n, const brig_store_key *k, size_t limit,
			 brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       "SELECT " AUDIT_COLS " FROM audit WHERE ns = ? AND agent = ? AND session = ?"
				       " ORDER BY id DESC LIMIT ?",
				       err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	sqlite3_bind_int64(st, 4, limit ? (int64_t)limit : -1);
	size_t alloc = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		brig_store__grow(out, &alloc, *n, sizeof **out);
		row_audit(st, &(*out)[*n]);
		(*n)++;
	}
	if (rc != SQLITE_DONE) {
		brig_store_audit_free_array(*out, *n);
		*out = NULL;
		*n = 0;
		return brig_store__sq_fail(q, rc, "listing audit rows", err);
	}
	return 0;
}

/* ---- egress ledger ---- */

#define EGRESS_COLS                                                                                           \
	"id, sandbox, ns, agent, session, host, port, decision, reason, bytes_up, bytes_down, start_ms, " \
	"duration_ms"

struct egress_write {
	const brig_store_egress *rec;
	int64_t id;
};

static int tx_egress_add(struct sq_store *q, void *ctx, brig_error **err)
{
	struct egress_write *c = ctx;
	const brig_store_egress *rec = c->rec;
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       "INSERT INTO egress (sandbox, ns, agent, session, host, port, decision, reason,"
				       " bytes_up, bytes_down, start_ms, duration_ms)"
				       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
				       err);
	if (r < 0)
		return r;
	bind_text(st, 1, rec->sandbox);
	bind_text(st, 2, rec->ns);
	bind_text(st, 3, rec->agent);
	bind_text(st, 4, rec->session);
	bind_text(st, 5, rec->host);
	sqlite3_bind_int(st, 6, rec->port);
	bind_text(st, 7, rec->decision);
	bind_text(st, 8, rec->reason);
	sqlite3_bind_int64(st, 9, rec->bytes_up);
	sqlite3_bind_int64(st, 10, rec->bytes_down);
	sqlite3_bind_int64(st, 11, rec->start_ms);
	sqlite3_bind_int64(st, 12, rec->duration_ms);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		return brig_store__sq_fail(q, rc, "adding an egress ledger row", err);
	c->id = sqlite3_last_insert_rowid(q->db);
	return 0;
}

static int sq_egress_add(brig_store *s, int64_t *out_id, const brig_store_egress *rec, brig_error **err)
{
	struct egress_write c = {.rec = rec};
	int r = brig_store__sq_tx(SQ(s), tx_egress_add, &c, err);
	if (r == 0)
		*out_id = c.id;
	return r;
}

static int sq_egress_list(brig_store *s, brig_store_egress **out, size_t *n, const char *sandbox,
			  const brig_store_key *k, size_t limit, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st,
				       sandbox ? "SELECT " EGRESS_COLS " FROM egress WHERE sandbox = ? ORDER BY id DESC LIMIT ?"
					       : "SELECT " EGRESS_COLS " FROM egress WHERE ns = ? AND agent = ? AND "
						 "session = ? ORDER BY id DESC LIMIT ?",
				       err);
	if (r < 0)
		return r;
	if (sandbox) {
		bind_text(st, 1, sandbox);
		sqlite3_bind_int64(st, 2, limit ? (int64_t)limit : -1);
	} else {
		bind_key(st, 1, k);
		sqlite3_bind_int64(st, 4, limit ? (int64_t)limit : -1);
	}
	size_t alloc = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		brig_store__grow(out, &alloc, *n, sizeof **out);
		brig_store_egress *e = &(*out)[*n];
		memset(e, 0, sizeof *e);
		e->id = sqlite3_column_int64(st, 0);
		e->sandbox = col_text(st, 1);
		e->ns = col_text(st, 2);
		e->agent = col_text(st, 3);
		e->session = col_text(st, 4);
		e->host = col_text(st, 5);
		e->port = sqlite3_column_int(st, 6);
		e->decision = col_text(st, 7);
		e->reason = col_text(st, 8);
		e->bytes_up = sqlite3_column_int64(st, 9);
		e->bytes_down = sqlite3_column_int64(st, 10);
		e->start_ms = sqlite3_column_int64(st, 11);
		e->duration_ms = sqlite3_column_int64(st, 12);
		(*n)++;
	}
	if (rc != SQLITE_DONE) {
		brig_store_egress_free_array(*out, *n);
		*out = NULL;
		*n = 0;
		return brig_store__sq_fail(q, rc, "listing egress ledger rows", err);
	}
	return 0;
}

const struct brig_store_ops brig_store__sqlite_ops = {
	.name = "sqlite",
	.close = brig_store__sq_close,
	.schema_version = brig_store__sq_schema_version,
	.session_get = sq_session_get,
	.session_create = sq_session_create,
	.session_cas = sq_session_cas,
	.session_list = sq_session_list,
	.session_delete = sq_session_delete,
	.checkpoint_add = sq_checkpoint_add,
	.checkpoint_get = sq_checkpoint_get,
	.checkpoint_list = sq_checkpoint_list,
	.checkpoint_unowned = sq_checkpoint_unowned,
	.checkpoint_remove = sq_checkpoint_remove,
	.checkpoint_prune = sq_checkpoint_prune,
	.audit_add = sq_audit_add,
	.audit_list = sq_audit_list,
	.egress_add = sq_egress_add,
	.egress_list = sq_egress_list,
};
