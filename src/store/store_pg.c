/* store_pg.c — the PostgreSQL session-store backend's connection (libpq):
 * parameterised statements, reconnection, transactions retried after a
 * deadlock, scrubbed messages, advisory-locked migrations. The operations
 * are in store_pg_ops.c. */
#include "store/store_pg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define PG_CONNECT_TIMEOUT "10"

/* Migrations, applied in order; version N is migrations[N - 1]. Never edit a
 * released entry: append a new one. */
static const char *const migrations[] = {
	/* 1: sessions, checkpoints, audit */
	"CREATE TABLE sessions ("
	" ns TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,"
	" generation BIGINT NOT NULL CHECK (generation >= 1),"
	" state TEXT NOT NULL CHECK (state IN ('creating','running','paused','failed','destroyed')),"
	" container_name TEXT, container_id TEXT, spec_json TEXT,"
	" revision BIGINT NOT NULL CHECK (revision >= 1),"
	" created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,"
	" PRIMARY KEY (ns, agent, session));"
	"CREATE TABLE checkpoints ("
	" id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	" ns TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,"
	" generation BIGINT NOT NULL CHECK (generation >= 1),"
	" digest TEXT NOT NULL CHECK (length(digest) = 64),"
	" blob TEXT NOT NULL,"
	" bytes_raw BIGINT NOT NULL CHECK (bytes_raw >= 0),"
	" bytes_stored BIGINT NOT NULL CHECK (bytes_stored >= 0),"
	" created_ms BIGINT NOT NULL,"
	" FOREIGN KEY (ns, agent, session) REFERENCES sessions (ns, agent, session) ON DELETE CASCADE);"
	"CREATE INDEX checkpoints_by_session ON checkpoints (ns, agent, session, id);"
	"CREATE INDEX checkpoints_by_blob ON checkpoints (blob);"
	"CREATE TABLE audit ("
	" id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	" ns TEXT NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL,"
	" generation BIGINT NOT NULL,"
	" container_name TEXT,"
	" argv_json TEXT NOT NULL,"
	" exit_code INTEGER,"
	" timed_out BOOLEAN NOT NULL,"
	" outcome TEXT NOT NULL,"
	" duration_ms BIGINT NOT NULL,"
	" stdout_bytes BIGINT NOT NULL, stderr_bytes BIGINT NOT NULL,"
	" created_ms BIGINT NOT NULL);"
	"CREATE INDEX audit_by_session ON audit (ns, agent, session, id);",
	/* 2: the egress ledger */
	"CREATE TABLE egress ("
	" id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	" sandbox TEXT NOT NULL, ns TEXT, agent TEXT, session TEXT,"
	" host TEXT NOT NULL, port INTEGER NOT NULL,"
	" decision TEXT NOT NULL, reason TEXT NOT NULL,"
	" bytes_up BIGINT NOT NULL, bytes_down BIGINT NOT NULL,"
	" start_ms BIGINT NOT NULL, duration_ms BIGINT NOT NULL);"
	"CREATE INDEX egress_by_sandbox ON egress (sandbox, id);"
	"CREATE INDEX egress_by_session ON egress (ns, agent, session, id);",
	/* 3: a 'stopped' state (brig stop: the container stays, its tmpfs
	 * volumes are empty); checkpoints outlive their session record (brig
	 * sessions rm keeps them unless asked), so no foreign key; and who ran
	 * each command. The names are PostgreSQL's defaults for migration 1's
	 * constraints. */
	"ALTER TABLE sessions DROP CONSTRAINT sessions_state_check;"
	"ALTER TABLE sessions ADD CONSTRAINT sessions_state_check"
	" CHECK (state IN ('creating','running','paused','failed','destroyed','stopped'));"
	"ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_ns_agent_session_fkey;"
	"ALTER TABLE audit ADD COLUMN actor TEXT;",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* ---- errors ---- */

/* A server or libpq message, trimmed and with the password scrubbed. */
static char *pg_text(struct pg_store *p, const char *msg)
{
	char *m = xstrdup(msg ? msg : "");
	size_t n = strlen(m);
	while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
		m[--n] = '\0';
	/* One line: libpq ends lines with "\n\t" hints. */
	char *w = m;
	for (const char *c = m; *c; c++) {
		bool space = *c == '\n' || *c == '\t' || *c == ' ';
		if (space && w > m && w[-1] == ' ')
			continue;
		*w++ = space ? ' ' : *c;
	}
	*w = '\0';
	for (size_t i = 0; i < p->nsecrets; i++)
		brig_store__scrub(&m, p->secrets[i]);
	return m;
}

static int pg_fail(struct pg_store *p, int code, const char *what, const char *msg, brig_error **err)
{
	cleanup_free char *m = pg_text(p, msg);
	brig__error_set(err, code == PG_RETRY ? BRIG_ESTORE : code, 0, "store %s: %s: %s", p->base.display_url, what,
			m);
	return code;
}

/* ---- statements ---- */

static int pg_setup(struct pg_store *p, brig_error **err);

/* Reconnects after a lost connection. */
static int pg_reconnect(struct pg_store *p, brig_error **err)
{
	PQreset(p->conn);
	if (PQstatus(p->conn) != CONNECTION_OK)
		return pg_fail(p, BRIG_ESTORE, "reconnecting", PQerrorMessage(p->conn), err);
	p->reconnecting = true;
	int r = pg_setup(p, err);
	p->reconnecting = false;
	return r;
}

/* Runs one parameterised statement (values as text; NULL is SQL NULL). On
 * success *res (when res is not NULL) holds the result for the caller to
 * PQclear. commits: the statement commits a change, so a connection lost
 * under it leaves the outcome unknown (BRIG_EUNCERTAIN); any other statement
 * run outside a transaction is retried once on a new connection (a server
 * restart, an idle connection cut by a proxy). Failures map SQLSTATE 23505 to
 * BRIG_ECONFLICT, 23503 to BRIG_ENOTFOUND, 40001/40P01 inside a transaction
 * to PG_RETRY, anything else to BRIG_ESTORE. */
int brig_store__pg_exec(struct pg_store *p, PGresult **res, const char *sql, int n, const char *const *vals,
			bool commits, const char *what, brig_error **err)
{
	if (res)
		*res = NULL;
	bool idle = PQtransactionStatus(p->conn) == PQTRANS_IDLE;
	PGresult *r = PQexecParams(p->conn, sql, n, NULL, vals, NULL, NULL, 0);
	if (!commits && idle && !p->reconnecting && PQstatus(p->conn) == CONNECTION_BAD) {
		PQclear(r);
		int rr = pg_reconnect(p, err);
		if (rr < 0)
			return rr;
		r = PQexecParams(p->conn, sql, n, NULL, vals, NULL, NULL, 0);
	}
	ExecStatusType st = PQresultStatus(r);
	if (r && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
		if (res)
			*res = r;
		else
			PQclear(r);
		return 0;
	}
	int code = BRIG_ESTORE;
	const char *sqlstate = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	if (PQstatus(p->conn) == CONNECTION_BAD)
		code = commits ? BRIG_EUNCERTAIN : BRIG_ESTORE;
	else if (sqlstate && (strcmp(sqlstate, "40001") == 0 || strcmp(sqlstate, "40P01") == 0))
		code = PQtransactionStatus(p->conn) == PQTRANS_INERROR ? PG_RETRY : BRIG_ESTORE;
	else if (sqlstate && strcmp(sqlstate, "23505") == 0)
		code = BRIG_ECONFLICT;
	else if (sqlstate && strcmp(sqlstate, "23503") == 0)
		code = BRIG_ENOTFOUND;
	const char *msg = r ? PQresultErrorMessage(r) : "";
	if (!msg || !*msg)
		msg = PQerrorMessage(p->conn);
	cleanup_free char *ctx = NULL;
	if (code == BRIG_EUNCERTAIN)
		ctx = xasprintf(
			"%s (connection lost: the change may or may not have been applied; read before retrying)",
			what);
	pg_fail(p, code, ctx ? ctx : what, msg, err);
	PQclear(r);
	return code;
}

static void pg_rollback(struct pg_store *p)
{
	if (PQstatus(p->conn) == CONNECTION_OK && PQtransactionStatus(p->conn) != PQTRANS_IDLE)
		PQclear(PQexec(p->conn, "ROLLBACK"));
}

static void pg_quiet(void *arg, const char *message)
{
}

/* Per-connection settings; run after every (re)connect. */
static int pg_setup(struct pg_store *p, brig_error **err)
{
	PQsetNoticeProcessor(p->conn, pg_quiet, NULL);
	if (!p->schema)
		return 0;
	cleanup_free char *path = NULL;
	char *quoted = PQescapeIdentifier(p->conn, p->schema, strlen(p->schema));
	if (!quoted)
		return pg_fail(p, BRIG_ESTORE, "quoting the schema name", PQerrorMessage(p->conn), err);
	path = xstrdup(quoted);
	PQfreemem(quoted);
	const char *vals[] = {path};
	return brig_store__pg_exec(p, NULL, "SELECT set_config('search_path', $1, false)", 1, vals, false,
				   "setting search_path", err);
}

/* Makes sure the connection is usable (reconnecting once after a loss) and no
 * failed transaction lingers. */
int brig_store__pg_ensure(struct pg_store *p, brig_error **err)
{
	if (PQstatus(p->conn) != CONNECTION_OK)
		return pg_reconnect(p, err);
	pg_rollback(p);
	return 0;
}

/* Runs fn inside BEGIN … COMMIT, retrying the whole transaction after a
 * deadlock or serialization failure. fn leaves no output behind on failure. */
int brig_store__pg_tx(struct pg_store *p, brig_store__pg_tx_fn fn, void *ctx, brig_error **err)
{
	for (int attempt = 1;; attempt++) {
		int r = brig_store__pg_exec(p, NULL, "BEGIN", 0, NULL, false, "starting a transaction", err);
		if (r == 0)
			r = fn(p, ctx, err);
		if (r == 0)
			r = brig_store__pg_exec(p, NULL, "COMMIT", 0, NULL, true, "committing", err);
		if (r == 0)
			return 0;
		pg_rollback(p);
		if (r != PG_RETRY)
			return r;
		if (attempt == PG_ATTEMPTS)
			return BRIG_ESTORE; /* err already says why */
		struct timespec ts = {0, (long)(attempt * 5 + rand() % 10) * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

/* ---- opening ---- */

static bool valid_schema(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > 63 || (v[0] >= '0' && v[0] <= '9'))
		return false;
	return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

/* Removes the brig-only schema= query parameter (libpq would refuse it). */
static int split_schema(char **url_out, char **schema_out, const char *url, const char *display, brig_error **err)
{
	*url_out = NULL;
	*schema_out = NULL;
	size_t off, pwlen;
	bool ambiguous;
	const char *after_pw = brig_store__url_password(url, &off, &pwlen, &ambiguous) ? url + off + pwlen : url;
	const char *q = strchr(after_pw, '?'); /* a password may hold '?' */
	if (!q) {
		*url_out = xstrdup(url);
		return 0;
	}
	brig_buf b;
	brig_buf_init(&b, strlen(url) + 1); /* parameters are dropped, never added */
	brig_buf_put(&b, url, (size_t)(q - url));
	bool first = true;
	const char *p = q + 1;
	cleanup_free char *schema = NULL;
	while (*p) {
		size_t len = strcspn(p, "&");
		if (len > 7 && strncmp(p, "schema=", 7) == 0) {
			free(schema);
			schema = xstrndup(p + 7, len - 7);
		} else if (len) {
			brig_buf_puts(&b, first ? "?" : "&");
			brig_buf_put(&b, p, len);
			first = false;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	if (schema && !valid_schema(schema)) {
		brig_buf_free(&b);
		return brig__error_set(
			err, BRIG_EINVAL, 0,
			"store %s: schema must be 1-63 letters, digits or '_', not starting with a digit", display);
	}
	*url_out = brig_buf_steal(&b, NULL);
	*schema_out = steal_pointer(&schema);
	return 0;
}

static int cmp_longest_first(const void *a, const void *b)
{
	size_t x = strlen(*(char *const *)a), y = strlen(*(char *const *)b);
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Adds s[0..n) and, when it decodes, its percent-decoded form to the scrub list. */
static void add_secret(struct pg_store *p, const char *s, size_t n)
{
	if (n == 0)
		return;
	char *dec = brig_store__pct_decode(s, n);
	p->secrets = xrealloc(p->secrets, (p->nsecrets + 2) * sizeof *p->secrets);
	p->secrets[p->nsecrets++] = xstrndup(s, n);
	if (dec && *dec && strncmp(dec, s, n) != 0)
		p->secrets[p->nsecrets++] = dec;
	else
		free(dec);
}

/* Collects every password of the URL (user info, password= and sslpassword=,
 * raw and decoded) before libpq sees it, since libpq's own messages quote
 * them ("invalid percent-encoded token: …"). The longest go first so that a
 * secret holding a shorter one is replaced whole. */
static void collect_secrets(struct pg_store *p, const char *url)
{
	size_t off, len;
	bool ambiguous;
	const char *rest = url;
	if (brig_store__url_password(url, &off, &len, &ambiguous)) {
		add_secret(p, url + off, len);
		rest = url + off + len;
	}
	const char *q = strchr(rest, '?');
	while (q && *q) {
		q++;
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		if (eq && brig_store__secret_key(q, (size_t)(eq - q)))
			add_secret(p, eq + 1, (size_t)(q + n - eq - 1));
		q += n;
	}
	if (p->nsecrets > 1)
		qsort(p->secrets, p->nsecrets, sizeof *p->secrets, cmp_longest_first);
}

static int pg_migrate(struct pg_store *p, brig_error **err)
{
	cleanup_free char *lock_key = xasprintf("brig.store.migrate:%s", p->schema ? p->schema : "");
	int r = brig_store__pg_exec(p, NULL, "BEGIN", 0, NULL, false, "starting the migration", err);
	if (r < 0)
		return r;
	{
		/* Every opener serialises here until the first one commits. */
		const char *lk[] = {lock_key};
		if ((r = brig_store__pg_exec(p, NULL, "SELECT pg_advisory_xact_lock(hashtext($1))", 1, lk, false,
					     "locking for migration", err)) < 0)
			goto fail;
		if (p->schema) {
			const char *sv[] = {p->schema};
			cleanup_result PGresult *res = NULL;
			if ((r = brig_store__pg_exec(p, &res, "SELECT 1 FROM pg_namespace WHERE nspname = $1", 1, sv,
						     false, "looking up the schema", err)) < 0)
				goto fail;
			if (PQntuples(res) == 0) {
				char *quoted = PQescapeIdentifier(p->conn, p->schema, strlen(p->schema));
				if (!quoted) {
					r = pg_fail(p, BRIG_ESTORE, "quoting the schema name", PQerrorMessage(p->conn),
						    err);
					goto fail;
				}
				/* An identifier cannot be a parameter; it is validated and quoted. */
				cleanup_free char *sql = xasprintf("CREATE SCHEMA %s", quoted);
				PQfreemem(quoted);
				if ((r = brig_store__pg_exec(p, NULL, sql, 0, NULL, false, "creating the schema",
							     err)) < 0)
					goto fail;
			}
		}
		if ((r = brig_store__pg_exec(p, NULL,
					     "CREATE TABLE IF NOT EXISTS schema_version ("
					     " version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)",
					     0, NULL, false, "creating schema_version", err)) < 0)
			goto fail;
		cleanup_result PGresult *vres = NULL;
		if ((r = brig_store__pg_exec(p, &vres, "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL,
					     false, "reading the schema version", err)) < 0)
			goto fail;
		int cur = atoi(PQgetvalue(vres, 0, 0));
		if (cur > N_MIGRATIONS) {
			r = brig__error_set(err, BRIG_ESTORE, 0,
					    "store %s has schema version %d, newer than this brig understands (%d); "
					    "upgrade brig",
					    p->base.display_url, cur, N_MIGRATIONS);
			goto fail;
		}
		for (int v = cur + 1; v <= N_MIGRATIONS; v++) {
			char what[64];
			snprintf(what, sizeof what, "applying schema migration %d", v);
			/* Several statements: the simple-query protocol, no parameters. */
			PGresult *mr = PQexec(p->conn, migrations[v - 1]);
			if (PQresultStatus(mr) != PGRES_COMMAND_OK) {
				r = pg_fail(p, BRIG_ESTORE, what,
					    mr ? PQresultErrorMessage(mr) : PQerrorMessage(p->conn), err);
				PQclear(mr);
				goto fail;
			}
			PQclear(mr);
			numbuf vb, tb;
			const char *vals[] = {i64(&vb, v), i64(&tb, brig_wall_ms())};
			if ((r = brig_store__pg_exec(p, NULL,
						     "INSERT INTO schema_version (version, applied_ms) VALUES ($1, $2)",
						     2, vals, false, what, err)) < 0)
				goto fail;
		}
	}
	if ((r = brig_store__pg_exec(p, NULL, "COMMIT", 0, NULL, true, "committing the migration", err)) < 0)
		goto fail;
	return 0;
fail:
	pg_rollback(p);
	return r;
}

void brig_store__pg_close(brig_store *s)
{
	struct pg_store *p = PG(s);
	if (p->conn)
		PQfinish(p->conn);
	free(p->url);
	free(p->schema);
	for (size_t i = 0; i < p->nsecrets; i++)
		free(p->secrets[i]);
	free(p->secrets);
	free(p->display);
	free(p->base.path);
	free(p);
}

int brig_store__pg_open(brig_store **out, const char *url, const char *display, brig_error **err)
{
	*out = NULL;
	struct pg_store *p = xcalloc(1, sizeof *p);
	p->base.ops = &brig_store__pg_ops;
	collect_secrets(p, url);
	/* The redactor hides what it recognises; scrubbing catches the rest. */
	p->display = xstrdup(display);
	for (size_t i = 0; i < p->nsecrets; i++)
		brig_store__scrub(&p->display, p->secrets[i]);
	p->base.display_url = p->display;
	/* libpq is opened here, before its first use; every other call of it
	 * goes through the connection made below. */
	int r = brig__pq_load(err);
	if (r) {
		brig__error_prefix(err, r, "store %s", p->display);
		goto fail;
	}
	{
		size_t off, len;
		bool ambiguous;
		if (brig_store__url_password(url, &off, &len, &ambiguous) && ambiguous) {
			r = brig__error_set(err, BRIG_EINVAL, 0,
					    "store %s: the password holds an unencoded '@' or '/', which PostgreSQL "
					    "would read as part of the host; percent-encode them (%%40, %%2F)",
					    p->display);
			goto fail;
		}
	}
	r = split_schema(&p->url, &p->schema, url, p->display, err);
	if (r < 0)
		goto fail;
	char *perr = NULL;
	PQconninfoOption *opts = PQconninfoParse(p->url, &perr);
	if (!opts) {
		r = pg_fail(p, BRIG_EINVAL, "invalid URL", perr ? perr : "out of memory", err);
		PQfreemem(perr);
		goto fail;
	}
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if ((strcmp(o->keyword, "password") == 0 || strcmp(o->keyword, "sslpassword") == 0) && o->val &&
		    *o->val)
			add_secret(p, o->val, strlen(o->val));
	if (p->nsecrets > 1)
		qsort(p->secrets, p->nsecrets, sizeof *p->secrets, cmp_longest_first);
	PQconninfoFree(opts);

	/* URL values come after our defaults, so they win. */
	const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
	const char *const vals[] = {PG_CONNECT_TIMEOUT, "brig", p->url, NULL};
	p->conn = PQconnectdbParams(keys, vals, 1);
	if (!p->conn) {
		r = brig__error_set(err, BRIG_ESTORE, 0, "store %s: cannot connect: out of memory", p->display);
		goto fail;
	}
	if (PQstatus(p->conn) != CONNECTION_OK) {
		r = pg_fail(p, BRIG_ESTORE, "cannot connect", PQerrorMessage(p->conn), err);
		goto fail;
	}
	if ((r = pg_setup(p, err)) < 0 || (r = pg_migrate(p, err)) < 0)
		goto fail;
	p->base.display_url = steal_pointer(&p->display); /* the front end owns it now */
	*out = &p->base;
	return 0;
fail:
	p->base.display_url = NULL;
	brig_store__pg_close(&p->base);
	return r == PG_RETRY || r >= 0 ? BRIG_ESTORE : r;
}
