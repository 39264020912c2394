/* store_sqlite.c — the embedded session-store backend: one SQLite connection
 * per handle, WAL mode, BEGIN IMMEDIATE for every write, and schema migrations. */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store/sqlite_dl.h" /* libsqlite3, dlopen-ed: its calls go through brig__sqlite */

struct sq_store {
	brig_store base;
	sqlite3 *db;
};

/* Migrations, applied in order; version N is migrations[N - 1]. Never edit a
 * released entry: append a new one. */
static const char *const migrations[] = {
	/* 1: sessions, checkpoints, audit */
	"CREATE TABLE sessions ("
	" ns TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,"
	" generation INTEGER NOT NULL CHECK (generation >= 1),"
	" state TEXT NOT NULL CHECK (state IN ('creating','running','paused','failed','destroyed')),"
	" container_name TEXT, container_id TEXT, spec_json TEXT,"
	" revision INTEGER NOT NULL CHECK (revision >= 1),"
	" created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"
	" PRIMARY KEY (ns, agent, session));"
	"CREATE TABLE checkpoints ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" ns TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,"
	" generation INTEGER NOT NULL CHECK (generation >= 1),"
	" digest TEXT NOT NULL CHECK (length(digest) = 64),"
	" blob TEXT NOT NULL,"
	" bytes_raw INTEGER NOT NULL CHECK (bytes_raw >= 0),"
	" bytes_stored INTEGER NOT NULL CHECK (bytes_stored >= 0),"
	" created_ms INTEGER NOT NULL,"
	" FOREIGN KEY (ns, agent, session) REFERENCES sessions (ns, agent, session) ON DELETE CASCADE);"
	"CREATE INDEX checkpoints_by_session ON checkpoints (ns, agent, session, id);"
	"CREATE INDEX checkpoints_by_blob ON checkpoints (blob);"
	"CREATE TABLE audit ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" ns TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,"
	" generation INTEGER NOT NULL,"
	" container_name TEXT,"
	" argv_json TEXT NOT NULL,"
	" exit_code INTEGER,"
	" timed_out INTEGER NOT NULL,"
	" outcome TEXT NOT NULL,"
	" duration_ms INTEGER NOT NULL,"
	" stdout_bytes INTEGER NOT NULL, stderr_bytes INTEGER NOT NULL,"
	" created_ms INTEGER NOT NULL);"
	"CREATE INDEX audit_by_session ON audit (ns, agent, session, id);",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

#define SESSION_COLS                                                                                             \
	"ns, agent, session, generation, state, container_name, container_id, spec_json, revision, created_ms, " \
	"updated_ms"
#define CKPT_COLS "id, ns, agent, session, generation, digest, blob, bytes_raw, bytes_stored, created_ms"
#define AUDIT_COLS                                                                                                    \
	"id, ns, agent, session, generation, container_name, argv_json, exit_code, timed_out, outcome, duration_ms, " \
	"stdout_bytes, stderr_bytes, created_ms"

static struct sq_store *SQ(brig_store *s)
{
	return (struct sq_store *)s;
}

/* ---- errors ---- */

/* Sets a BRIG_ESTORE error for the last failure on db; returns BRIG_ESTORE. */
static int sq_fail(struct sq_store *q, int rc, const char *what, brig_error **err)
{
	const char *hint = "";
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
		hint = " (another process held the database for longer than the 10 s busy timeout; retry)";
	else if ((rc & 0xff) == SQLITE_READONLY || (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_PERM)
		hint = " (check the permissions of the file and its directory)";
	return brig__error_set(err, BRIG_ESTORE, 0, "store %s: %s: %s%s",
			       q->base.display_url ? q->base.display_url : "", what,
			       q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc), hint);
}

/* ---- statements ---- */

static int sq_prepare(struct sq_store *q, sqlite3_stmt **st, const char *sql, brig_error **err)
{
	int rc = sqlite3_prepare_v2(q->db, sql, -1, st, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(q, rc, "preparing a statement", err);
	return 0;
}

static void sq_finalizep(sqlite3_stmt **st)
{
	if (*st)
		sqlite3_finalize(*st);
}
#define cleanup_stmt __attribute__((cleanup(sq_finalizep)))

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static void bind_key(sqlite3_stmt *st, int first, const brig_store_key *k)
{
	bind_text(st, first, k->ns);
	bind_text(st, first + 1, k->agent);
	bind_text(st, first + 2, k->session);
}

static char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? xstrdup((const char *)t) : NULL;
}

/* Runs SQL without results (several statements allowed). */
static int sq_exec(struct sq_store *q, const char *sql, const char *what, brig_error **err)
{
	int rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(q, rc, what, err);
	return 0;
}

/* Takes the write lock now, so a transaction never has to upgrade a stale
 * read snapshot (which would fail with SQLITE_BUSY_SNAPSHOT instead of waiting). */
static int sq_begin(struct sq_store *q, brig_error **err)
{
	return sq_exec(q, "BEGIN IMMEDIATE", "starting a write", err);
}

static int sq_commit(struct sq_store *q, brig_error **err)
{
	return sq_exec(q, "COMMIT", "committing", err);
}

static void sq_rollback(struct sq_store *q)
{
	if (!sqlite3_get_autocommit(q->db))
		sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
}

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
				       "paused, failed or destroyed",
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
}

/* Steps a prepared checkpoint query, collecting every row. */
static int collect_checkpoints(struct sq_store *q, sqlite3_stmt *st, brig_store_checkpoint **out, size_t *n,
			       brig_error **err)
{
	size_t alloc = 0;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		brig_store__grow(out, &alloc, *n, sizeof **out);
		row_checkpoint(st, &(*out)[*n]);
		(*n)++;
	}
	if (rc != SQLITE_DONE) {
		brig_store_checkpoint_free_array(*out, *n);
		*out = NULL;
		*n = 0;
		return sq_fail(q, rc, "reading checkpoints", err);
	}
	return 0;
}

/* ---- schema ---- */

static int sq_read_version(struct sq_store *q, int *out, brig_error **err)
{
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(q, &st, "SELECT coalesce(max(version), 0) FROM schema_version", err);
	if (r < 0)
		return r;
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return sq_fail(q, rc, "reading the schema version", err);
	*out = sqlite3_column_int(st, 0);
	return 0;
}

static int sq_migrate(struct sq_store *q, brig_error **err)
{
	int r = sq_begin(q, err);
	if (r < 0)
		return brig__error_prefix(err, r, "migrating");
	int cur = 0;
	if ((r = sq_exec(q,
			 "CREATE TABLE IF NOT EXISTS schema_version ("
			 " version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL)",
			 "creating schema_version", err)) < 0 ||
	    (r = sq_read_version(q, &cur, err)) < 0)
		goto fail;
	if (cur > N_MIGRATIONS) {
		r = brig__error_set(err, BRIG_ESTORE, 0,
				    "store %s has schema version %d, newer than this brig understands (%d); "
				    "upgrade brig",
				    q->base.display_url, cur, N_MIGRATIONS);
		goto fail;
	}
	for (int v = cur + 1; v <= N_MIGRATIONS; v++) {
		char what[64];
		snprintf(what, sizeof what, "applying schema migration %d", v);
		if ((r = sq_exec(q, migrations[v - 1], what, err)) < 0)
			goto fail;
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(q, &st, "INSERT INTO schema_version (version, applied_ms) VALUES (?, ?)", err)) < 0)
			goto fail;
		sqlite3_bind_int(st, 1, v);
		sqlite3_bind_int64(st, 2, brig_wall_ms());
		int rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(q, rc, what, err);
			goto fail;
		}
	}
	if ((r = sq_commit(q, err)) < 0)
		goto fail;
	return 0;
fail:
	sq_rollback(q);
	return r;
}

static int sq_schema_version(brig_store *s, int *out, brig_error **err)
{
	return sq_read_version(SQ(s), out, err);
}

/* ---- opening ---- */

/* mkdir -p of path's parent; directories it creates get mode 0700. */
static int make_parent(const char *path, brig_error **err)
{
	cleanup_free char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	struct stat sb;
	if (stat(dir, &sb) == 0) {
		if (!S_ISDIR(sb.st_mode))
			return brig__error_set(err, BRIG_EIO, ENOTDIR, "store directory %s is not a directory", dir);
		return 0;
	}
	return brig_mkdir_p(dir, 0700, "store directory", err);
}

static void sq_close(brig_store *s)
{
	struct sq_store *q = SQ(s);
	if (q->db)
		sqlite3_close_v2(q->db);
	free(q->base.path);
	free(q);
}

static const struct brig_store_ops sq_ops;

int brig_store__sqlite_open(brig_store **out, const char *path, const char *display, brig_error **err)
{
	*out = NULL;
	/* libsqlite3 is opened here, before its first use; every other call of
	 * it goes through the handle opened below. */
	int r = brig__sqlite_load(err);
	if (r)
		return brig__error_prefix(err, r, "store %s", display);
	if (!sqlite3_threadsafe())
		return brig__error_set(err, BRIG_ESTORE, 0,
				       "store %s: the SQLite library was built without thread support", display);
	r = make_parent(path, err);
	if (r < 0)
		return r;
	/* Never open() and close() the file ourselves: closing any descriptor of
	 * it drops every POSIX lock this process holds on it, including those of
	 * other connections, and that corrupts the database. */
	struct stat sb;
	bool created = stat(path, &sb) < 0 && errno == ENOENT;

	struct sq_store *q = xcalloc(1, sizeof *q);
	q->base.ops = &sq_ops;
	q->base.path = xstrdup(path);
	q->base.display_url = (char *)display; /* borrowed until the front end takes over */
	int rc = sqlite3_open_v2(
		path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
		NULL);
	if (rc != SQLITE_OK) {
		r = sq_fail(q, rc, "opening", err);
		goto fail;
	}
	/* A new file is made private before the -wal and -shm files, which copy
	 * its mode, exist; its directory is 0700 when brig created it anyway. */
	if (created && chmod(path, 0600) < 0 && errno != ENOENT) {
		r = brig__error_set(err, BRIG_EIO, errno, "cannot make store file %s private: %s", path,
				    strerror(errno));
		goto fail;
	}
	sqlite3_extended_result_codes(q->db, 1);
	sqlite3_busy_timeout(q->db, BRIG_STORE_BUSY_MS);

	/* Switching to WAL needs an exclusive lock that the busy handler does not
	 * always wait for when another opener is doing the same: retry. */
	int64_t deadline = brig_now_ms() + BRIG_STORE_BUSY_MS;
	for (;;) {
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(q, &st, "PRAGMA journal_mode=WAL", err)) < 0)
			goto fail;
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const char *mode = (const char *)sqlite3_column_text(st, 0);
			if (mode && strcmp(mode, "wal") == 0)
				break;
		} else if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) {
			r = sq_fail(q, rc, "switching to WAL mode", err);
			goto fail;
		}
		if (brig_now_ms() > deadline) {
			r = brig__error_set(err, BRIG_ESTORE, 0,
					    "store %s: cannot switch to WAL mode (the file system may not support "
					    "it, or another process holds the database)",
					    display);
			goto fail;
		}
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	/* FULL makes each commit durable across power loss, which a compare-and-
	 * swap store needs: a lost commit could let a replica redo a transition. */
	if ((r = sq_exec(q, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON", "configuring", err)) < 0)
		goto fail;
	if ((r = sq_migrate(q, err)) < 0)
		goto fail;
	q->base.display_url = NULL;
	*out = &q->base;
	return 0;
fail:
	q->base.display_url = NULL;
	sq_close(&q->base);
	return r;
}

/* ---- sessions ---- */

static int sq_session_get(brig_store *s, brig_store_session **out, const brig_store_key *k, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(q, &st, "SELECT " SESSION_COLS " FROM sessions WHERE ns = ? AND agent = ? AND session = ?",
			   err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", k->ns,
				       k->agent, k->session, s->display_url);
	if (rc != SQLITE_ROW)
		return sq_fail(q, rc, "reading a session", err);
	brig_store_session *rec = xcalloc(1, sizeof *rec);
	if ((r = row_session(q, st, rec, err)) < 0) {
		brig_store_session_free(rec);
		return r;
	}
	*out = rec;
	return 0;
}

static int sq_session_create(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t now,
			     brig_error **err)
{
	struct sq_store *q = SQ(s);
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	{
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(q, &st,
				    "INSERT INTO sessions (" SESSION_COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)"
				    " ON CONFLICT (ns, agent, session) DO NOTHING RETURNING " SESSION_COLS,
				    err)) < 0)
			goto fail;
		bind_text(st, 1, rec->ns);
		bind_text(st, 2, rec->agent);
		bind_text(st, 3, rec->session);
		sqlite3_bind_int64(st, 4, rec->generation ? rec->generation : 1);
		bind_text(st, 5, brig_store_state_to_string(rec->state));
		bind_text(st, 6, rec->container_name);
		bind_text(st, 7, rec->container_id);
		bind_text(st, 8, rec->spec_json);
		sqlite3_bind_int64(st, 9, now);
		sqlite3_bind_int64(st, 10, now);
		int rc = sqlite3_step(st);
		if (rc == SQLITE_DONE) {
			r = brig__error_set(err, BRIG_ECONFLICT, 0, "session %s/%s/%s already exists in store %s",
					    rec->ns, rec->agent, rec->session, s->display_url);
			goto fail;
		}
		if (rc != SQLITE_ROW) {
			r = sq_fail(q, rc, "creating a session", err);
			goto fail;
		}
		brig_store_session *res = xcalloc(1, sizeof *res);
		if ((r = row_session(q, st, res, err)) < 0) {
			brig_store_session_free(res);
			goto fail;
		}
		/* RETURNING rows come out before the statement completes: finish it. */
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			brig_store_session_free(res);
			r = sq_fail(q, rc, "creating a session", err);
			goto fail;
		}
		if ((r = sq_commit(q, err)) < 0) {
			brig_store_session_free(res);
			goto fail;
		}
		if (out)
			*out = res;
		else
			brig_store_session_free(res);
		return 0;
	}
fail:
	sq_rollback(q);
	return r;
}

/* Inside a write: explains why a conditional change of a session found no row. */
static int explain_miss(struct sq_store *q, const brig_store_key *k, int64_t expected, brig_error **err)
{
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(q, &st, "SELECT revision FROM sessions WHERE ns = ? AND agent = ? AND session = ?", err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", k->ns,
				       k->agent, k->session, q->base.display_url);
	if (rc != SQLITE_ROW)
		return sq_fail(q, rc, "reading a session", err);
	return brig__error_set(err, BRIG_ECONFLICT, 0,
			       "session %s/%s/%s changed (revision %lld, expected %lld); read it again and retry",
			       k->ns, k->agent, k->session, (long long)sqlite3_column_int64(st, 0),
			       (long long)expected);
}

static int sq_session_cas(brig_store *s, brig_store_session **out, const brig_store_session *rec, int64_t expected,
			  int64_t now, brig_error **err)
{
	struct sq_store *q = SQ(s);
	brig_store_key k = {rec->ns, rec->agent, rec->session};
	brig_store_session *res = NULL;
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	{
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(
			     q, &st,
			     "UPDATE sessions SET generation = ?, state = ?, container_name = ?, container_id = ?,"
			     " spec_json = ?, revision = revision + 1, updated_ms = ?"
			     " WHERE ns = ? AND agent = ? AND session = ? AND revision = ?"
			     " RETURNING " SESSION_COLS,
			     err)) < 0)
			goto fail;
		sqlite3_bind_int64(st, 1, rec->generation);
		bind_text(st, 2, brig_store_state_to_string(rec->state));
		bind_text(st, 3, rec->container_name);
		bind_text(st, 4, rec->container_id);
		bind_text(st, 5, rec->spec_json);
		sqlite3_bind_int64(st, 6, now);
		bind_key(st, 7, &k);
		sqlite3_bind_int64(st, 10, expected);
		int rc = sqlite3_step(st);
		if (rc == SQLITE_DONE) {
			r = explain_miss(q, &k, expected, err);
			goto fail;
		}
		if (rc != SQLITE_ROW) {
			r = sq_fail(q, rc, "updating a session", err);
			goto fail;
		}
		res = xcalloc(1, sizeof *res);
		if ((r = row_session(q, st, res, err)) < 0)
			goto fail;
		rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(q, rc, "updating a session", err);
			goto fail;
		}
	}
	if ((r = sq_commit(q, err)) < 0)
		goto fail;
	if (out)
		*out = res;
	else
		brig_store_session_free(res);
	return 0;
fail:
	brig_store_session_free(res);
	sq_rollback(q);
	return r;
}

static int sq_session_list(brig_store *s, brig_store_session **out, size_t *n, const char *ns, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(
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
		r = sq_fail(q, rc, "listing sessions", err);
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
	int r = sq_prepare(q, &st, "SELECT count(*) FROM checkpoints WHERE blob = ?", err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		sqlite3_reset(st);
		bind_text(st, 1, arr[i].blob);
		int rc = sqlite3_step(st);
		if (rc != SQLITE_ROW)
			return sq_fail(q, rc, "counting checkpoint blob references", err);
		arr[i].blob_refs = sqlite3_column_int64(st, 0);
	}
	return 0;
}

static int sq_session_delete(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			     int64_t expected, brig_error **err)
{
	struct sq_store *q = SQ(s);
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	{
		cleanup_stmt sqlite3_stmt *sel = NULL;
		if ((r = sq_prepare(q, &sel,
				    "SELECT " CKPT_COLS " FROM checkpoints WHERE ns = ? AND agent = ? AND session = ?"
				    " ORDER BY id DESC",
				    err)) < 0)
			goto fail;
		bind_key(sel, 1, k);
		if ((r = collect_checkpoints(q, sel, out, n, err)) < 0)
			goto fail;

		cleanup_stmt sqlite3_stmt *del = NULL;
		if ((r = sq_prepare(q, &del,
				    "DELETE FROM sessions WHERE ns = ? AND agent = ? AND session = ?"
				    " AND (?4 = 0 OR revision = ?4)",
				    err)) < 0)
			goto fail;
		bind_key(del, 1, k);
		sqlite3_bind_int64(del, 4, expected);
		int rc = sqlite3_step(del);
		if (rc != SQLITE_DONE) {
			r = sq_fail(q, rc, "deleting a session", err);
			goto fail;
		}
		if (sqlite3_changes(q->db) == 0) {
			r = explain_miss(q, k, expected, err);
			goto fail;
		}
		/* checkpoints went with the session (ON DELETE CASCADE). */
		if ((r = count_blob_refs(q, *out, *n, err)) < 0)
			goto fail;
	}
	if ((r = sq_commit(q, err)) < 0)
		goto fail;
	return 0;
fail:
	brig_store_checkpoint_free_array(*out, *n);
	*out = NULL;
	*n = 0;
	sq_rollback(q);
	return r;
}

/* ---- checkpoints ---- */

static int sq_checkpoint_get(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(q, &st, "SELECT " CKPT_COLS " FROM checkpoints WHERE id = ?", err);
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

static int sq_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec, int64_t now,
			     brig_error **err)
{
	struct sq_store *q = SQ(s);
	brig_store_checkpoint *res = NULL;
	size_t n = 0;
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	{
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(
			     q, &st,
			     "INSERT INTO checkpoints (ns, agent, session, generation, digest, blob, bytes_raw,"
			     " bytes_stored, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING " CKPT_COLS,
			     err)) < 0)
			goto fail;
		bind_text(st, 1, rec->ns);
		bind_text(st, 2, rec->agent);
		bind_text(st, 3, rec->session);
		sqlite3_bind_int64(st, 4, rec->generation);
		bind_text(st, 5, rec->digest);
		bind_text(st, 6, rec->blob);
		sqlite3_bind_int64(st, 7, rec->bytes_raw);
		sqlite3_bind_int64(st, 8, rec->bytes_stored);
		sqlite3_bind_int64(st, 9, now);
		int rc = sqlite3_step(st);
		if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
			r = brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", rec->ns,
					    rec->agent, rec->session, s->display_url);
			goto fail;
		}
		if (rc != SQLITE_ROW) {
			r = sq_fail(q, rc, "adding a checkpoint", err);
			goto fail;
		}
		res = xcalloc(1, sizeof *res);
		row_checkpoint(st, res);
		n = 1;
		rc = sqlite3_step(st);
		if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
			r = brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s not found in store %s", rec->ns,
					    rec->agent, rec->session, s->display_url);
			goto fail;
		}
		if (rc != SQLITE_DONE) {
			r = sq_fail(q, rc, "adding a checkpoint", err);
			goto fail;
		}
	}
	if ((r = sq_commit(q, err)) < 0)
		goto fail;
	if (out)
		*out = res;
	else
		brig_store_checkpoint_free(res);
	return 0;
fail:
	brig_store_checkpoint_free_array(res, n);
	sq_rollback(q);
	return r;
}

static int sq_checkpoint_list(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			      size_t limit, brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(q, &st,
			   "SELECT " CKPT_COLS " FROM checkpoints WHERE ns = ? AND agent = ? AND session = ?"
			   " ORDER BY id DESC LIMIT ?",
			   err);
	if (r < 0)
		return r;
	bind_key(st, 1, k);
	sqlite3_bind_int64(st, 4, limit ? (int64_t)limit : -1);
	return collect_checkpoints(q, st, out, n, err);
}

static int sq_checkpoint_remove(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	struct sq_store *q = SQ(s);
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	if ((r = sq_checkpoint_get(s, out, id, err)) < 0)
		goto fail;
	{
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(q, &st, "DELETE FROM checkpoints WHERE id = ?", err)) < 0)
			goto fail;
		sqlite3_bind_int64(st, 1, id);
		int rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(q, rc, "removing a checkpoint", err);
			goto fail;
		}
	}
	if ((r = count_blob_refs(q, *out, 1, err)) < 0 || (r = sq_commit(q, err)) < 0)
		goto fail;
	return 0;
fail:
	brig_store_checkpoint_free(*out);
	*out = NULL;
	sq_rollback(q);
	return r;
}

static int sq_checkpoint_prune(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			       size_t keep, brig_error **err)
{
	struct sq_store *q = SQ(s);
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	{
		cleanup_stmt sqlite3_stmt *sel = NULL;
		if ((r = sq_prepare(q, &sel,
				    "SELECT " CKPT_COLS " FROM checkpoints WHERE ns = ? AND agent = ? AND session = ?"
				    " ORDER BY id DESC LIMIT -1 OFFSET ?",
				    err)) < 0)
			goto fail;
		bind_key(sel, 1, k);
		sqlite3_bind_int64(sel, 4, (int64_t)keep);
		if ((r = collect_checkpoints(q, sel, out, n, err)) < 0)
			goto fail;
		cleanup_stmt sqlite3_stmt *del = NULL;
		if ((r = sq_prepare(q, &del, "DELETE FROM checkpoints WHERE id = ?", err)) < 0)
			goto fail;
		for (size_t i = 0; i < *n; i++) {
			sqlite3_reset(del);
			sqlite3_bind_int64(del, 1, (*out)[i].id);
			int rc = sqlite3_step(del);
			if (rc != SQLITE_DONE) {
				r = sq_fail(q, rc, "pruning checkpoints", err);
				goto fail;
			}
		}
	}
	if ((r = count_blob_refs(q, *out, *n, err)) < 0 || (r = sq_commit(q, err)) < 0)
		goto fail;
	return 0;
fail:
	brig_store_checkpoint_free_array(*out, *n);
	*out = NULL;
	*n = 0;
	sq_rollback(q);
	return r;
}

/* ---- audit ---- */

static int sq_audit_add(brig_store *s, int64_t *out_id, const brig_store_audit *rec, int64_t now, brig_error **err)
{
	struct sq_store *q = SQ(s);
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	{
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = sq_prepare(
			     q, &st,
			     "INSERT INTO audit (ns, agent, session, generation, container_name, argv_json,"
			     " exit_code, timed_out, outcome, duration_ms, stdout_bytes, stderr_bytes, created_ms)"
			     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			     err)) < 0)
			goto fail;
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
		sqlite3_bind_int64(st, 13, now);
		int rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			r = sq_fail(q, rc, "adding an audit row", err);
			goto fail;
		}
		*out_id = sqlite3_last_insert_rowid(q->db);
	}
	if ((r = sq_commit(q, err)) < 0)
		goto fail;
	return 0;
fail:
	sq_rollback(q);
	return r;
}

static int sq_audit_list(brig_store *s, brig_store_audit **out, size_t *n, const brig_store_key *k, size_t limit,
			 brig_error **err)
{
	struct sq_store *q = SQ(s);
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = sq_prepare(q, &st,
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
		return sq_fail(q, rc, "listing audit rows", err);
	}
	return 0;
}

static const struct brig_store_ops sq_ops = {
	.name = "sqlite",
	.close = sq_close,
	.schema_version = sq_schema_version,
	.session_get = sq_session_get,
	.session_create = sq_session_create,
	.session_cas = sq_session_cas,
	.session_list = sq_session_list,
	.session_delete = sq_session_delete,
	.checkpoint_add = sq_checkpoint_add,
	.checkpoint_get = sq_checkpoint_get,
	.checkpoint_list = sq_checkpoint_list,
	.checkpoint_remove = sq_checkpoint_remove,
	.checkpoint_prune = sq_checkpoint_prune,
	.audit_add = sq_audit_add,
	.audit_list = sq_audit_list,
};
