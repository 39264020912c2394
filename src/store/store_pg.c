/* store_pg.c — the PostgreSQL session-store backend (libpq): parameterised
 * statements only, compare-and-swap updates, advisory-locked migrations. */
#include "store/store_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store/pq_dl.h" /* libpq, dlopen-ed: its calls go through brig__pq */

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

/* Internal: a deadlock or serialization failure inside a transaction, which
 * pg_tx retries; never returned to a caller of the public API. */
#define PG_RETRY (-1000)
#define PG_ATTEMPTS 5
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
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

#define SESSION_COLS                                                                                             \
	"ns, agent, session, generation, state, container_name, container_id, spec_json, revision, created_ms, " \
	"updated_ms"
#define CKPT_COLS "id, ns, agent, session, generation, digest, blob, bytes_raw, bytes_stored, created_ms"
#define AUDIT_COLS                                                                                                    \
	"id, ns, agent, session, generation, container_name, argv_json, exit_code, timed_out, outcome, duration_ms, " \
	"stdout_bytes, stderr_bytes, created_ms"
#define KEY_WHERE "ns = $1 AND agent = $2 AND session = $3"

static struct pg_store *PG(brig_store *s)
{
	return (struct pg_store *)s;
}

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

static void pg_clearp(PGresult **r)
{
	if (*r)
		PQclear(*r);
}
#define cleanup_result __attribute__((cleanup(pg_clearp)))

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
static int pg_exec(struct pg_store *p, PGresult **res, const char *sql, int n, const char *const *vals, bool commits,
		   const char *what, brig_error **err)
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
	return pg_exec(p, NULL, "SELECT set_config('search_path', $1, false)", 1, vals, false, "setting search_path",
		       err);
}

/* Makes sure the connection is usable (reconnecting once after a loss) and no
 * failed transaction lingers. */
static int pg_ensure(struct pg_store *p, brig_error **err)
{
	if (PQstatus(p->conn) != CONNECTION_OK)
		return pg_reconnect(p, err);
	pg_rollback(p);
	return 0;
}

typedef int (*pg_tx_fn)(struct pg_store *p, void *ctx, brig_error **err);

/* Runs fn inside BEGIN … COMMIT, retrying the whole transaction after a
 * deadlock or serialization failure. fn leaves no output behind on failure. */
static int pg_tx(struct pg_store *p, pg_tx_fn fn, void *ctx, brig_error **err)
{
	for (int attempt = 1;; attempt++) {
		int r = pg_exec(p, NULL, "BEGIN", 0, NULL, false, "starting a transaction", err);
		if (r == 0)
			r = fn(p, ctx, err);
		if (r == 0)
			r = pg_exec(p, NULL, "COMMIT", 0, NULL, true, "committing", err);
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

/* ---- values ---- */

typedef struct {
	char s[24];
} numbuf;

static const char *i64(numbuf *b, int64_t v)
{
	snprintf(b->s, sizeof b->s, "%" PRId64, v);
	return b->s;
}

static char *get_text(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : xstrdup(PQgetvalue(r, row, col));
}

static int64_t get_i64(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

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
				       "paused, failed or destroyed",
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
	}
	*n = (size_t)rows;
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
	brig_buf_init(&b, strlen(url) + 1);
	brig_buf_add(&b, url, (size_t)(q - url));
	bool first = true;
	const char *p = q + 1;
	cleanup_free char *schema = NULL;
	while (*p) {
		size_t len = strcspn(p, "&");
		if (len > 7 && strncmp(p, "schema=", 7) == 0) {
			free(schema);
			schema = xstrndup(p + 7, len - 7);
		} else if (len) {
			brig_buf_addstr(&b, first ? "?" : "&");
			brig_buf_add(&b, p, len);
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
	int r = pg_exec(p, NULL, "BEGIN", 0, NULL, false, "starting the migration", err);
	if (r < 0)
		return r;
	{
		/* Every opener serialises here until the first one commits. */
		const char *lk[] = {lock_key};
		if ((r = pg_exec(p, NULL, "SELECT pg_advisory_xact_lock(hashtext($1))", 1, lk, false,
				 "locking for migration", err)) < 0)
			goto fail;
		if (p->schema) {
			const char *sv[] = {p->schema};
			cleanup_result PGresult *res = NULL;
			if ((r = pg_exec(p, &res, "SELECT 1 FROM pg_namespace WHERE nspname = $1", 1, sv, false,
					 "looking up the schema", err)) < 0)
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
				if ((r = pg_exec(p, NULL, sql, 0, NULL, false, "creating the schema", err)) < 0)
					goto fail;
			}
		}
		if ((r = pg_exec(p, NULL,
				 "CREATE TABLE IF NOT EXISTS schema_version ("
				 " version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)",
				 0, NULL, false, "creating schema_version", err)) < 0)
			goto fail;
		cleanup_result PGresult *vres = NULL;
		if ((r = pg_exec(p, &vres, "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL, false,
				 "reading the schema version", err)) < 0)
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
			if ((r = pg_exec(p, NULL, "INSERT INTO schema_version (version, applied_ms) VALUES ($1, $2)", 2,
					 vals, false, what, err)) < 0)
				goto fail;
		}
	}
	if ((r = pg_exec(p, NULL, "COMMIT", 0, NULL, true, "committing the migration", err)) < 0)
		goto fail;
	return 0;
fail:
	pg_rollback(p);
	return r;
}

static void pg_close(brig_store *s)
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

static const struct brig_store_ops pg_ops;

int brig_store__pg_open(brig_store **out, const char *url, const char *display, brig_error **err)
{
	*out = NULL;
	struct pg_store *p = xcalloc(1, sizeof *p);
	p->base.ops = &pg_ops;
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
	pg_close(&p->base);
	return r == PG_RETRY || r >= 0 ? BRIG_ESTORE : r;
}

static int pg_schema_version(brig_store *s, int *out, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res, "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL, false,
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
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	const char *vals[] = {k->ns, k->agent, k->session};
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res, "SELECT " SESSION_COLS " FROM sessions WHERE " KEY_WHERE, 3, vals, false,
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
	int r = pg_ensure(p, err);
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
	if ((r = pg_exec(p, &res,
			 "INSERT INTO sessions (" SESSION_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $9)"
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
	int r = pg_exec(p, &res, "SELECT revision FROM sessions WHERE " KEY_WHERE, 3, vals, false, "reading a session",
			err);
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
	int r = pg_ensure(p, err);
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
	if ((r = pg_exec(p, &res,
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
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	const char *vals[] = {ns};
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res,
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
		int r = pg_exec(p, &res, "SELECT count(*) FROM checkpoints WHERE blob = $1", 1, vals, false,
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

static int tx_session_delete(struct pg_store *p, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	removal_reset(c); /* a retried attempt starts empty */
	const char *key[] = {c->k->ns, c->k->agent, c->k->session};
	int r;
	{
		/* The row lock makes concurrent checkpoint adds (whose foreign-key
		 * check needs a share lock on the row) wait and then fail cleanly. */
		cleanup_result PGresult *res = NULL;
		if ((r = pg_exec(p, &res, "SELECT revision FROM sessions WHERE " KEY_WHERE " FOR UPDATE", 3, key, false,
				 "locking a session", err)) < 0)
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
	{
		cleanup_result PGresult *res = NULL;
		if ((r = pg_exec(p, &res, "DELETE FROM checkpoints WHERE " KEY_WHERE " RETURNING " CKPT_COLS, 3, key,
				 false, "deleting checkpoints", err)) < 0)
			return r;
		rows_checkpoints(res, &c->out, &c->n);
		brig_store__checkpoint_sort(c->out, c->n);
	}
	if ((r = pg_exec(p, NULL, "DELETE FROM sessions WHERE " KEY_WHERE, 3, key, false, "deleting a session", err)) <
		    0 ||
	    (r = count_blob_refs(p, c->out, c->n, err)) < 0) {
		removal_reset(c);
		return r;
	}
	return 0;
}

static int pg_session_delete(brig_store *s, brig_store_checkpoint **out, size_t *n, const brig_store_key *k,
			     int64_t expected, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	struct removal c = {.k = k, .expected = expected};
	r = pg_tx(p, tx_session_delete, &c, err);
	if (r < 0) {
		removal_reset(&c);
		return r;
	}
	*out = c.out;
	*n = c.n;
	return 0;
}

/* ---- checkpoints ---- */

static int pg_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec, int64_t now,
			     brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
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
	r = pg_exec(p, &res,
		    "INSERT INTO checkpoints (ns, agent, session, generation, digest, blob, bytes_raw, bytes_stored,"
		    " created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING " CKPT_COLS,
		    9, vals, true, "adding a checkpoint", err);
	if (r == BRIG_ENOTFOUND)
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
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf ib;
	const char *vals[] = {i64(&ib, id)};
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res, "SELECT " CKPT_COLS " FROM checkpoints WHERE id = $1", 1, vals, false,
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
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf lb;
	/* LIMIT NULL is no limit. */
	const char *vals[] = {k->ns, k->agent, k->session, limit ? i64(&lb, (int64_t)limit) : NULL};
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res,
			 "SELECT " CKPT_COLS " FROM checkpoints WHERE " KEY_WHERE " ORDER BY id DESC LIMIT $4::bigint",
			 4, vals, false, "listing checkpoints", err)) < 0)
		return r;
	rows_checkpoints(res, out, n);
	return 0;
}

static int tx_checkpoint_remove(struct pg_store *p, void *ctx, brig_error **err)
{
	struct removal *c = ctx;
	removal_reset(c); /* a retried attempt starts empty */
	numbuf ib;
	const char *vals[] = {i64(&ib, c->id)};
	cleanup_result PGresult *res = NULL;
	int r = pg_exec(p, &res, "DELETE FROM checkpoints WHERE id = $1 RETURNING " CKPT_COLS, 1, vals, false,
			"removing a checkpoint", err);
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
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	struct removal c = {.id = id};
	r = pg_tx(p, tx_checkpoint_remove, &c, err);
	if (r < 0) {
		removal_reset(&c);
		return r;
	}
	*out = c.out;
	return 0;
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
	int r = pg_exec(p, &res,
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
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	struct removal c = {.k = k, .keep = keep};
	r = pg_tx(p, tx_checkpoint_prune, &c, err);
	if (r < 0) {
		removal_reset(&c);
		return r;
	}
	*out = c.out;
	*n = c.n;
	return 0;
}

/* ---- audit ---- */

static int pg_audit_add(brig_store *s, int64_t *out_id, const brig_store_audit *rec, int64_t now, brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
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
			      i64(&tb, now)};
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res,
			 "INSERT INTO audit (ns, agent, session, generation, container_name, argv_json, exit_code,"
			 " timed_out, outcome, duration_ms, stdout_bytes, stderr_bytes, created_ms)"
			 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
			 13, vals, true, "adding an audit row", err)) < 0)
		return r;
	*out_id = get_i64(res, 0, 0);
	return 0;
}

static int pg_audit_list(brig_store *s, brig_store_audit **out, size_t *n, const brig_store_key *k, size_t limit,
			 brig_error **err)
{
	struct pg_store *p = PG(s);
	int r = pg_ensure(p, err);
	if (r < 0)
		return r;
	numbuf lb;
	const char *vals[] = {k->ns, k->agent, k->session, limit ? i64(&lb, (int64_t)limit) : NULL};
	cleanup_result PGresult *res = NULL;
	if ((r = pg_exec(p, &res,
			 "SELECT " AUDIT_COLS " FROM audit WHERE " KEY_WHERE " ORDER BY id DESC LIMIT $4::bigint", 4,
			 vals, false, "listing audit rows", err)) < 0)
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
	}
	*n = (size_t)rows;
	return 0;
}

static const struct brig_store_ops pg_ops = {
	.name = "postgresql",
	.close = pg_close,
	.schema_version = pg_schema_version,
	.session_get = pg_session_get,
	.session_create = pg_session_create,
	.session_cas = pg_session_cas,
	.session_list = pg_session_list,
	.session_delete = pg_session_delete,
	.checkpoint_add = pg_checkpoint_add,
	.checkpoint_get = pg_checkpoint_get,
	.checkpoint_list = pg_checkpoint_list,
	.checkpoint_remove = pg_checkpoint_remove,
	.checkpoint_prune = pg_checkpoint_prune,
	.audit_add = pg_audit_add,
	.audit_list = pg_audit_list,
};
