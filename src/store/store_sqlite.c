/* store_sqlite.c — the embedded session-store backend's connection: one
 * SQLite connection per handle, WAL mode, BEGIN IMMEDIATE for every write
 * (brig_store__sq_tx), and schema migrations. The operations are in
 * store_sqlite_ops.c. */
#include "store/store_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store/store_sqlite.h"

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
	/* 2: the egress ledger */
	"CREATE TABLE egress ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" sandbox TEXT NOT NULL, ns TEXT, agent TEXT, session TEXT,"
	" host TEXT NOT NULL, port INTEGER NOT NULL,"
	" decision TEXT NOT NULL, reason TEXT NOT NULL,"
	" bytes_up INTEGER NOT NULL, bytes_down INTEGER NOT NULL,"
	" start_ms INTEGER NOT NULL, duration_ms INTEGER NOT NULL);"
	"CREATE INDEX egress_by_sandbox ON egress (sandbox, id);"
	"CREATE INDEX egress_by_session ON egress (ns, agent, session, id);",
	/* 3: a 'stopped' state (brig stop: the container stays, its tmpfs
	 * volumes are empty) and no foreign key from checkpoints to sessions
	 * (brig sessions rm keeps them unless asked): both in schema_edits[2]
	 * (renumber the two together); and who ran each command. */
	"ALTER TABLE audit ADD COLUMN actor TEXT;",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* Run before migrations[N - 1] when set, with PRAGMA writable_schema on,
 * then the schema cookie is bumped: SQLite cannot ALTER a constraint, and
 * its documentation allows editing a stored table definition in place for
 * changes no existing row can violate (a CHECK loosened, a FOREIGN KEY
 * removed); every column stays, also any a later migration adds. */
static const char *const schema_edits[N_MIGRATIONS] = {
	[2] = "UPDATE sqlite_master SET sql = replace(sql, '''failed'',''destroyed'')',"
	      " '''failed'',''destroyed'',''stopped'')') WHERE type = 'table' AND name = 'sessions';"
	      "UPDATE sqlite_master SET sql = replace(sql, ', FOREIGN KEY (ns, agent, session) REFERENCES sessions"
	      " (ns, agent, session) ON DELETE CASCADE', '') WHERE type = 'table' AND name = 'checkpoints';",
};

/* ---- errors ---- */

/* Sets a BRIG_ESTORE error for the last failure on db; returns BRIG_ESTORE. */
int brig_store__sq_fail(struct sq_store *q, int rc, const char *what, brig_error **err)
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

int brig_store__sq_prepare(struct sq_store *q, sqlite3_stmt **st, const char *sql, brig_error **err)
{
	int rc = sqlite3_prepare_v2(q->db, sql, -1, st, NULL);
	if (rc != SQLITE_OK)
		return brig_store__sq_fail(q, rc, "preparing a statement", err);
	return 0;
}

/* Runs SQL without results (several statements allowed). */
static int sq_exec(struct sq_store *q, const char *sql, const char *what, brig_error **err)
{
	int rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return brig_store__sq_fail(q, rc, what, err);
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

int brig_store__sq_tx(struct sq_store *q, brig_store__sq_tx_fn fn, void *ctx, brig_error **err)
{
	int r = sq_begin(q, err);
	if (r < 0)
		return r;
	if ((r = fn(q, ctx, err)) == 0 && (r = sq_commit(q, err)) == 0)
		return 0;
	sq_rollback(q);
	return r;
}

/* ---- schema ---- */

static int sq_read_version(struct sq_store *q, int *out, brig_error **err)
{
	cleanup_stmt sqlite3_stmt *st = NULL;
	int r = brig_store__sq_prepare(q, &st, "SELECT coalesce(max(version), 0) FROM schema_version", err);
	if (r < 0)
		return r;
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		return brig_store__sq_fail(q, rc, "reading the schema version", err);
	*out = sqlite3_column_int(st, 0);
	return 0;
}

/* Applies migration v inside the migrating transaction. */
static int sq_apply(struct sq_store *q, int v, const char *what, brig_error **err)
{
	int r;
	if (schema_edits[v - 1]) {
		int cookie = 0;
		{
			cleanup_stmt sqlite3_stmt *st = NULL;
			if ((r = brig_store__sq_prepare(q, &st, "PRAGMA schema_version", err)) < 0)
				return r;
			int rc = sqlite3_step(st);
			if (rc != SQLITE_ROW)
				return brig_store__sq_fail(q, rc, what, err);
			cookie = sqlite3_column_int(st, 0);
		}
		char bump[96];
		snprintf(bump, sizeof bump, "PRAGMA schema_version = %d; PRAGMA writable_schema = OFF", cookie + 1);
		if ((r = sq_exec(q, "PRAGMA writable_schema = ON", what, err)) < 0)
			return r;
		if ((r = sq_exec(q, schema_edits[v - 1], what, err)) < 0 || (r = sq_exec(q, bump, what, err)) < 0) {
			sqlite3_exec(q->db, "PRAGMA writable_schema = OFF", NULL, NULL, NULL);
			return r;
		}
	}
	return sq_exec(q, migrations[v - 1], what, err);
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
		if ((r = sq_apply(q, v, what, err)) < 0)
			goto fail;
		cleanup_stmt sqlite3_stmt *st = NULL;
		if ((r = brig_store__sq_prepare(
			     q, &st, "INSERT INTO schema_version (version, applied_ms) VALUES (?, ?)", err)) < 0)
			goto fail;
		sqlite3_bind_int(st, 1, v);
		sqlite3_bind_int64(st, 2, brig_wall_ms());
		int rc = sqlite3_step(st);
		if (rc != SQLITE_DONE) {
			r = brig_store__sq_fail(q, rc, what, err);
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

int brig_store__sq_schema_version(brig_store *s, int *out, brig_error **err)
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

void brig_store__sq_close(brig_store *s)
{
	struct sq_store *q = SQ(s);
	if (q->db)
		sqlite3_close_v2(q->db);
	free(q->base.path);
	free(q);
}

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
	q->base.ops = &brig_store__sqlite_ops;
	q->base.path = xstrdup(path);
	q->base.display_url = (char *)display; /* borrowed until the front end takes over */
	int rc = sqlite3_open_v2(
		path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
		NULL);
	if (rc != SQLITE_OK) {
		r = brig_store__sq_fail(q, rc, "opening", err);
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
		if ((r = brig_store__sq_prepare(q, &st, "PRAGMA journal_mode=WAL", err)) < 0)
			goto fail;
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const char *mode = (const char *)sqlite3_column_text(st, 0);
			if (mode && strcmp(mode, "wal") == 0)
				break;
		} else if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) {
			r = brig_store__sq_fail(q, rc, "switching to WAL mode", err);
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
	brig_store__sq_close(&q->base);
	return r;
}
