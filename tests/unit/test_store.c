/* test_store.c — the session-store suite: one set of tests run against a SQLite
 * file in a fresh temporary directory and against PostgreSQL ($BRIG_TEST_PG). */
#include "testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/store.h"

/* One backend under test. */
typedef struct backend {
	const char *name;
	char *url;        /* store URL of this run */
	char *dir;        /* temporary directory (SQLite) */
	char *pg_base;    /* $BRIG_TEST_PG */
	char *schemas[4]; /* PostgreSQL schemas created by this run, dropped at the end */
	size_t n_schemas;
	bool skip;     /* PostgreSQL without $BRIG_TEST_PG */
	brig_store *s; /* handle shared by the tests */
} backend;

static backend sqlite_b = {.name = "sqlite"};
static backend pg_b = {.name = "postgresql"};

#define THREADS 16
#define INCREMENTS 20 /* per thread */
#define PROCS 2
#define PROC_THREADS 8
#define PROC_INCREMENTS 10 /* per thread */

/* ---- helpers ---- */

static backend *use(void **state)
{
	backend *b = *state;
	if (b->skip)
		skip();
	return b;
}

static char *rand_tag(void)
{
	unsigned v = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
		v = (unsigned)time(NULL) ^ (unsigned)getpid();
	if (fd >= 0)
		close(fd);
	char *t = NULL;
	assert_true(asprintf(&t, "%d_%08x", (int)getpid(), v) > 0);
	return t;
}

/* A URL for this backend's database: the run's own, or (PostgreSQL) one with
 * a further schema that teardown drops, or (SQLite) another file. */
static char *extra_url(backend *b, const char *tag)
{
	char *u = NULL;
	if (b == &sqlite_b) {
		assert_true(asprintf(&u, "sqlite://%s/%s.db", b->dir, tag) > 0);
		return u;
	}
	assert_true(b->n_schemas < sizeof b->schemas / sizeof b->schemas[0]);
	char *schema = NULL;
	assert_true(asprintf(&schema, "%s_%s", b->schemas[0], tag) > 0);
	b->schemas[b->n_schemas++] = schema;
	assert_true(asprintf(&u, "%s%sschema=%s", b->pg_base, strchr(b->pg_base, '?') ? "&" : "?", schema) > 0);
	return u;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void hexdigest(char out[65], char c)
{
	memset(out, c, 64);
	out[64] = '\0';
}

static brig_store_session session_rec(const char *ns, const char *agent, const char *session)
{
	brig_store_session r = {0};
	r.ns = (char *)ns;
	r.agent = (char *)agent;
	r.session = (char *)session;
	r.state = BRIG_STORE_CREATING;
	return r;
}

static void expect_code(int got, int want, brig_error **err, const char *what)
{
	if (got != want)
		fail_msg("%s: got %s (%s), want %s", what, brig_error_name(got), brig_error_message(*err),
			 brig_error_name(want));
	brig_error_free(*err);
	*err = NULL;
}

/* Counts rows of schema_version through the database's own client. */
static long schema_rows(backend *b, const char *url)
{
	long n = -1;
	if (b == &sqlite_b) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open_v2(url + strlen("sqlite://"), &db, SQLITE_OPEN_READONLY, NULL),
				 SQLITE_OK);
		sqlite3_stmt *st = NULL;
		assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM schema_version", -1, &st, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		n = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
		sqlite3_close(db);
		return n;
	}
	const char *schema = strstr(url, "schema=") + strlen("schema=");
	PGconn *c = PQconnectdb(b->pg_base);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	char *q = PQescapeIdentifier(c, schema, strlen(schema));
	char *sql = NULL;
	assert_true(asprintf(&sql, "SELECT count(*) FROM %s.schema_version", q) > 0);
	PGresult *r = PQexec(c, sql);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	n = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	free(sql);
	PQfreemem(q);
	PQfinish(c);
	return n;
}

/* ---- group set-up ---- */

static int setup_sqlite(void **state)
{
	backend *b = &sqlite_b;
	char tmpl[] = "/tmp/brig-test-store-XXXXXX";
	if (!mkdtemp(tmpl))
		return -1;
	b->dir = strdup(tmpl);
	if (asprintf(&b->url, "sqlite://%s/brig.db", b->dir) < 0)
		return -1;
	brig_error *err = NULL;
	if (brig_store_open(&b->s, b->url, &err) < 0) {
		print_error("opening %s: %s\n", b->url, brig_error_message(err));
		brig_error_free(err);
		return -1;
	}
	return 0;
}

static int teardown_sqlite(void **state)
{
	backend *b = &sqlite_b;
	brig_store_close(b->s);
	if (b->dir)
		nftw(b->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(b->dir);
	free(b->url);
	return 0;
}

static int setup_pg(void **state)
{
	backend *b = &pg_b;
	const char *base = getenv("BRIG_TEST_PG");
	if (!base || !*base) {
		b->skip = true;
		print_message("[  SKIP    ] store/postgresql: set BRIG_TEST_PG to a PostgreSQL URL, e.g. "
			      "postgresql://brig:brig@127.0.0.1:5432/brig_test, to run the PostgreSQL half\n");
		return 0;
	}
	b->pg_base = strdup(base);
	char *tag = rand_tag();
	if (asprintf(&b->schemas[0], "brig_t_%s", tag) < 0)
		return -1;
	free(tag);
	b->n_schemas = 1;
	if (asprintf(&b->url, "%s%sschema=%s", base, strchr(base, '?') ? "&" : "?", b->schemas[0]) < 0)
		return -1;
	brig_error *err = NULL;
	if (brig_store_open(&b->s, b->url, &err) < 0) {
		print_error("opening %s: %s\n", brig_store_redact_url(b->url), brig_error_message(err));
		brig_error_free(err);
		return -1;
	}
	return 0;
}

static void quiet(void *arg, const char *message)
{
}

static int teardown_pg(void **state)
{
	backend *b = &pg_b;
	brig_store_close(b->s);
	if (b->pg_base && b->n_schemas) {
		PGconn *c = PQconnectdb(b->pg_base);
		PQsetNoticeProcessor(c, quiet, NULL); /* "drop cascades to …" */
		for (size_t i = 0; PQstatus(c) == CONNECTION_OK && i < b->n_schemas; i++) {
			char *q = PQescapeIdentifier(c, b->schemas[i], strlen(b->schemas[i]));
			char *sql = NULL;
			if (q && asprintf(&sql, "DROP SCHEMA IF EXISTS %s CASCADE", q) > 0) {
				PGresult *r = PQexec(c, sql);
				if (PQresultStatus(r) != PGRES_COMMAND_OK)
					print_error("dropping schema %s: %s", b->schemas[i], PQresultErrorMessage(r));
				PQclear(r);
			}
			free(sql);
			PQfreemem(q);
		}
		PQfinish(c);
	}
	for (size_t i = 0; i < b->n_schemas; i++)
		free(b->schemas[i]);
	free(b->pg_base);
	free(b->url);
	return 0;
}

/* ---- the suite, run per backend ---- */

static void test_roundtrip(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_session in = session_rec("rt", "agent-1", "s1");
	in.state = BRIG_STORE_RUNNING;
	in.container_name = "brig-rt-agent-1-s1-g1";
	in.container_id = "0123abcd";
	in.spec_json =
		"{\"image\":\"brig-test:local\",\"q\":\"it's \\\"quoted\\\" ✓\",\"sql\":\"'; DROP TABLE sessions;--\"}";

	brig_store_session *made = NULL;
	ASSERT_OK(brig_store_session_create(b->s, &made, &in, &err), err);
	assert_int_equal(made->generation, 1);
	assert_int_equal(made->revision, 1);
	assert_int_equal(made->state, BRIG_STORE_RUNNING);
	assert_true(made->created_ms > 1600000000000LL);
	assert_int_equal(made->created_ms, made->updated_ms);

	brig_store_session *got = NULL;
	ASSERT_OK(brig_store_session_get(b->s, &got, "rt", "agent-1", "s1", &err), err);
	assert_string_equal(got->ns, "rt");
	assert_string_equal(got->agent, "agent-1");
	assert_string_equal(got->session, "s1");
	assert_int_equal(got->generation, 1);
	assert_int_equal(got->state, BRIG_STORE_RUNNING);
	assert_string_equal(got->container_name, in.container_name);
	assert_string_equal(got->container_id, in.container_id);
	assert_string_equal(got->spec_json, in.spec_json);
	assert_int_equal(got->revision, 1);
	assert_int_equal(got->created_ms, made->created_ms);
	assert_int_equal(got->updated_ms, made->updated_ms);
	brig_store_session_free(got);
	brig_store_session_free(made);

	/* Optional fields stay NULL; an explicit generation is kept. */
	brig_store_session in2 = session_rec("rt", "agent-1", "s0");
	in2.generation = 7;
	ASSERT_OK(brig_store_session_create(b->s, NULL, &in2, &err), err);
	ASSERT_OK(brig_store_session_get(b->s, &got, "rt", "agent-1", "s0", &err), err);
	assert_null(got->container_name);
	assert_null(got->container_id);
	assert_null(got->spec_json);
	assert_int_equal(got->generation, 7);
	assert_int_equal(got->state, BRIG_STORE_CREATING);
	brig_store_session_free(got);

	got = (brig_store_session *)&in; /* must be reset on failure */
	expect_code(brig_store_session_get(b->s, &got, "rt", "agent-1", "absent", &err), BRIG_ENOTFOUND, &err,
		    "get of an absent session");
	assert_null(got);

	/* Listing: filtered by namespace, ordered by (ns, agent, session). */
	ASSERT_OK(brig_store_session_create(b->s, NULL,
					    &(brig_store_session){.ns = "rt2", .agent = "a", .session = "z"}, &err),
		  err);
	brig_store_session *arr = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_session_list(b->s, &arr, &n, "rt", &err), err);
	assert_int_equal(n, 2);
	assert_string_equal(arr[0].session, "s0");
	assert_string_equal(arr[1].session, "s1");
	brig_store_session_free_array(arr, n);
	ASSERT_OK(brig_store_session_list(b->s, &arr, &n, NULL, &err), err);
	assert_true(n >= 3);
	for (size_t i = 1; i < n; i++)
		assert_true(strcmp(arr[i - 1].ns, arr[i].ns) <= 0);
	brig_store_session_free_array(arr, n);
	ASSERT_OK(brig_store_session_list(b->s, &arr, &n, "no-such-ns", &err), err);
	assert_int_equal(n, 0);
	assert_null(arr);
}

static void test_create_conflict(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_session in = session_rec("cc", "a", "s");
	in.container_name = "first";
	ASSERT_OK(brig_store_session_create(b->s, NULL, &in, &err), err);
	in.container_name = "second";
	brig_store_session *out = NULL;
	int r = brig_store_session_create(b->s, &out, &in, &err);
	assert_int_equal(r, BRIG_ECONFLICT);
	assert_null(out);
	assert_non_null(strstr(brig_error_message(err), "already exists"));
	brig_error_free(err);
	err = NULL;
	ASSERT_OK(brig_store_session_get(b->s, &out, "cc", "a", "s", &err), err);
	assert_string_equal(out->container_name, "first");
	assert_int_equal(out->revision, 1);
	brig_store_session_free(out);
}

static void test_cas(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_session in = session_rec("cas", "a", "s");
	ASSERT_OK(brig_store_session_create(b->s, NULL, &in, &err), err);
	brig_store_session *cur = NULL;
	ASSERT_OK(brig_store_session_get(b->s, &cur, "cas", "a", "s", &err), err);
	assert_int_equal(cur->revision, 1);

	cur->generation = 2;
	cur->state = BRIG_STORE_PAUSED;
	free(cur->container_name);
	cur->container_name = strdup("brig-cas-g2");
	brig_store_session *next = NULL;
	ASSERT_OK(brig_store_session_cas(b->s, &next, cur, 1, &err), err);
	assert_int_equal(next->revision, 2);
	assert_int_equal(next->generation, 2);
	assert_int_equal(next->state, BRIG_STORE_PAUSED);
	assert_string_equal(next->container_name, "brig-cas-g2");
	assert_true(next->updated_ms >= next->created_ms);

	/* A writer still holding revision 1 loses. */
	cur->generation = 3;
	brig_store_session *stale = NULL;
	int r = brig_store_session_cas(b->s, &stale, cur, 1, &err);
	assert_int_equal(r, BRIG_ECONFLICT);
	assert_null(stale);
	assert_non_null(strstr(brig_error_message(err), "revision 2"));
	brig_error_free(err);
	err = NULL;
	brig_store_session *again = NULL;
	ASSERT_OK(brig_store_session_get(b->s, &again, "cas", "a", "s", &err), err);
	assert_int_equal(again->revision, 2);
	assert_int_equal(again->generation, 2);
	brig_store_session_free(again);

	/* Without out, and then the right revision wins again. */
	ASSERT_OK(brig_store_session_cas(b->s, NULL, cur, 2, &err), err);
	brig_store_session *missing = NULL;
	brig_store_session miss = session_rec("cas", "a", "nope");
	miss.generation = 1;
	expect_code(brig_store_session_cas(b->s, &missing, &miss, 1, &err), BRIG_ENOTFOUND, &err, "cas of absent");
	expect_code(brig_store_session_cas(b->s, NULL, cur, 0, &err), BRIG_EINVAL, &err, "cas with revision 0");

	/* Delete is a compare-and-swap too. */
	expect_code(brig_store_session_delete(b->s, NULL, NULL, "cas", "a", "s", 2, &err), BRIG_ECONFLICT, &err,
		    "delete at a stale revision");
	ASSERT_OK(brig_store_session_delete(b->s, NULL, NULL, "cas", "a", "s", 3, &err), err);
	expect_code(brig_store_session_get(b->s, &again, "cas", "a", "s", &err), BRIG_ENOTFOUND, &err,
		    "get after delete");
	expect_code(brig_store_session_delete(b->s, NULL, NULL, "cas", "a", "s", BRIG_STORE_ANY_REVISION, &err),
		    BRIG_ENOTFOUND, &err, "second delete");
	brig_store_session_free(cur);
	brig_store_session_free(next);
}

/* ---- concurrency ---- */

typedef struct worker {
	const char *url;
	brig_store *shared; /* NULL: open an own handle */
	const char *session;
	int increments;
	pthread_barrier_t *barrier;
	bool create; /* race to create instead of incrementing */
	int successes;
	int conflicts;
	int failed; /* a BRIG_E code other than a conflict */
	char why[256];
} worker;

static void worker_fail(worker *w, int code, brig_error **err)
{
	w->failed = code;
	snprintf(w->why, sizeof w->why, "%s: %s", brig_error_name(code), brig_error_message(*err));
	brig_error_free(*err);
	*err = NULL;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	brig_error *err = NULL;
	brig_store *s = w->shared;
	int r;
	if (!s && (r = brig_store_open(&s, w->url, &err)) < 0) {
		worker_fail(w, r, &err);
		if (w->barrier)
			pthread_barrier_wait(w->barrier);
		return NULL;
	}
	if (w->barrier)
		pthread_barrier_wait(w->barrier);
	if (w->create) {
		brig_store_session in = session_rec("conc", "a", w->session);
		in.container_name = "winner";
		r = brig_store_session_create(s, NULL, &in, &err);
		if (r == 0)
			w->successes++;
		else if (r == BRIG_ECONFLICT)
			w->conflicts++, brig_error_free(err), err = NULL;
		else
			worker_fail(w, r, &err);
		/* Losers adopt the winner's record. */
		brig_store_session *rec = NULL;
		if (!w->failed && (r = brig_store_session_get(s, &rec, "conc", "a", w->session, &err)) < 0)
			worker_fail(w, r, &err);
		brig_store_session_free(rec);
	}
	while (!w->create && !w->failed && w->successes < w->increments) {
		brig_store_session *rec = NULL;
		if ((r = brig_store_session_get(s, &rec, "conc", "a", w->session, &err)) < 0) {
			worker_fail(w, r, &err);
			break;
		}
		int64_t rev = rec->revision;
		rec->generation++;
		rec->state = BRIG_STORE_RUNNING;
		r = brig_store_session_cas(s, NULL, rec, rev, &err);
		brig_store_session_free(rec);
		if (r == 0) {
			w->successes++;
		} else if (r == BRIG_ECONFLICT) {
			w->conflicts++;
			brig_error_free(err);
			err = NULL;
		} else {
			worker_fail(w, r, &err);
		}
	}
	if (s != w->shared)
		brig_store_close(s);
	return NULL;
}

/* Runs n workers: even ones share `shared`, odd ones open their own handle,
 * so both the handle lock and cross-connection locking are exercised. */
static void run_workers(worker *ws, int n, const char *url, brig_store *shared, const char *session, bool create,
			int increments)
{
	pthread_barrier_t barrier;
	pthread_barrier_init(&barrier, NULL, (unsigned)n);
	pthread_t tid[THREADS];
	for (int i = 0; i < n; i++) {
		ws[i] = (worker){.url = url,
				 .shared = i % 2 == 0 ? shared : NULL,
				 .session = session,
				 .increments = increments,
				 .barrier = &barrier,
				 .create = create};
		pthread_create(&tid[i], NULL, worker_main, &ws[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&barrier);
}

static void test_concurrent_cas(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_session in = session_rec("conc", "a", "cas16");
	ASSERT_OK(brig_store_session_create(b->s, NULL, &in, &err), err);

	worker ws[THREADS];
	run_workers(ws, THREADS, b->url, b->s, "cas16", false, INCREMENTS);
	int total = 0, conflicts = 0;
	for (int i = 0; i < THREADS; i++) {
		if (ws[i].failed)
			fail_msg("worker %d: %s", i, ws[i].why);
		total += ws[i].successes;
		conflicts += ws[i].conflicts;
	}
	assert_int_equal(total, THREADS * INCREMENTS);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(b->s, &rec, "conc", "a", "cas16", &err), err);
	/* No lost update: every successful swap is in the final generation. */
	assert_int_equal(rec->generation, 1 + total);
	assert_int_equal(rec->revision, 1 + total);
	print_message("[  INFO    ] %s: %d threads, %d increments, %d conflicts retried\n", b->name, THREADS, total,
		      conflicts);
	brig_store_session_free(rec);
}

static void test_concurrent_create(void **state)
{
	backend *b = use(state);
	worker ws[THREADS];
	run_workers(ws, THREADS, b->url, b->s, "create16", true, 0);
	int wins = 0, losses = 0;
	for (int i = 0; i < THREADS; i++) {
		if (ws[i].failed)
			fail_msg("worker %d: %s", i, ws[i].why);
		wins += ws[i].successes;
		losses += ws[i].conflicts;
	}
	assert_int_equal(wins, 1);
	assert_int_equal(losses, THREADS - 1);
}

static const char *argv0;

/* A child process, started by exec'ing this binary with BRIG_TEST_STORE_CHILD
 * set to the store URL, so it inherits no handle or socket of the parent.
 * PROC_THREADS threads race to create session "procrace", then all increment
 * session "proc". It writes the number of creations it won to the fd in
 * BRIG_TEST_STORE_RESULT and exits 0, or exits 100+ on a failure. */
static int child_main(const char *url)
{
	const char *fdenv = getenv("BRIG_TEST_STORE_GATE");
	int gate = fdenv ? atoi(fdenv) : -1;
	char c;
	while (gate >= 0 && read(gate, &c, 1) > 0) /* wait until the parent closes it */
		;
	brig_error *err = NULL;
	brig_store *s = NULL;
	if (brig_store_open(&s, url, &err) < 0) {
		fprintf(stderr, "child %d: %s\n", (int)getpid(), brig_error_message(err));
		brig_error_free(err);
		return 100;
	}
	worker ws[PROC_THREADS];
	run_workers(ws, PROC_THREADS, url, s, "procrace", true, 0);
	int wins = 0, rc = 0;
	for (int i = 0; i < PROC_THREADS; i++) {
		if (ws[i].failed) {
			fprintf(stderr, "child %d worker %d: %s\n", (int)getpid(), i, ws[i].why);
			rc = 101;
		}
		wins += ws[i].successes;
	}
	run_workers(ws, PROC_THREADS, url, s, "proc", false, PROC_INCREMENTS);
	for (int i = 0; i < PROC_THREADS; i++) {
		if (ws[i].failed || ws[i].successes != PROC_INCREMENTS) {
			fprintf(stderr, "child %d worker %d: %s\n", (int)getpid(), i, ws[i].why);
			rc = 102;
		}
	}
	brig_store_close(s);
	if (rc)
		return rc;
	const char *resenv = getenv("BRIG_TEST_STORE_RESULT");
	char line[16];
	int len = snprintf(line, sizeof line, "%d\n", wins);
	if (!resenv || write(atoi(resenv), line, (size_t)len) != len)
		return 103;
	return 0;
}

static void test_two_processes(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_session in = session_rec("conc", "a", "proc");
	ASSERT_OK(brig_store_session_create(b->s, NULL, &in, &err), err);
	int gate[2], result[PROCS][2];
	assert_int_equal(pipe(gate), 0);
	pid_t pids[PROCS];
	for (int i = 0; i < PROCS; i++) {
		assert_int_equal(pipe(result[i]), 0);
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			close(gate[1]);
			close(result[i][0]);
			char fdbuf[16];
			snprintf(fdbuf, sizeof fdbuf, "%d", gate[0]);
			setenv("BRIG_TEST_STORE_GATE", fdbuf, 1);
			snprintf(fdbuf, sizeof fdbuf, "%d", result[i][1]);
			setenv("BRIG_TEST_STORE_RESULT", fdbuf, 1);
			setenv("BRIG_TEST_STORE_CHILD", b->url, 1);
			execlp(argv0, argv0, (char *)NULL);
			_exit(127);
		}
		close(result[i][1]);
	}
	close(gate[0]);
	close(gate[1]); /* go */
	int wins = 0;
	for (int i = 0; i < PROCS; i++) {
		char line[16] = {0};
		ssize_t got = read(result[i][0], line, sizeof line - 1);
		close(result[i][0]);
		int st = 0;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got <= 0)
			fail_msg("child %d failed (status %#x)", i, st);
		wins += atoi(line);
	}
	assert_int_equal(wins, 1);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(b->s, &rec, "conc", "a", "proc", &err), err);
	assert_int_equal(rec->generation, 1 + PROCS * PROC_THREADS * PROC_INCREMENTS);
	assert_int_equal(rec->revision, 1 + PROCS * PROC_THREADS * PROC_INCREMENTS);
	brig_store_session_free(rec);
	ASSERT_OK(brig_store_session_get(b->s, &rec, "conc", "a", "procrace", &err), err);
	assert_int_equal(rec->revision, 1);
	brig_store_session_free(rec);
}

/* ---- checkpoints and audit ---- */

static int64_t add_ckpt(backend *b, const char *session, int64_t gen, char digit, int64_t raw)
{
	brig_error *err = NULL;
	char dg[65];
	hexdigest(dg, digit);
	char blob[128];
	snprintf(blob, sizeof blob, "blobs/%s.tar.zst", dg);
	brig_store_checkpoint in = {.ns = "ck",
				    .agent = "a",
				    .session = (char *)session,
				    .generation = gen,
				    .digest = dg,
				    .blob = blob,
				    .bytes_raw = raw,
				    .bytes_stored = raw / 3};
	brig_store_checkpoint *out = NULL;
	ASSERT_OK(brig_store_checkpoint_add(b->s, &out, &in, &err), err);
	assert_string_equal(out->digest, dg);
	assert_string_equal(out->blob, blob);
	assert_int_equal(out->generation, gen);
	assert_int_equal(out->bytes_raw, raw);
	assert_int_equal(out->bytes_stored, raw / 3);
	assert_true(out->created_ms > 0);
	int64_t id = out->id;
	brig_store_checkpoint_free(out);
	return id;
}

/* Checkpoints of forgotten sessions: the newest of each, with the count of
 * its identity in the same query (`brig sessions ls --json` shows it);
 * other listings say -1. */
static void test_unowned_counts(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	const char *names[] = {"many", "one", "kept"};
	const int counts[] = {3, 1, 2};
	int64_t newest[3] = {0};
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(brig_store_session_create(
				  b->s, NULL,
				  &(brig_store_session){.ns = "uo", .agent = "a", .session = (char *)names[i]}, &err),
			  err);
		for (int k = 0; k < counts[i]; k++) {
			char dg[65];
			hexdigest(dg, (char)('a' + k));
			brig_store_checkpoint in = {.ns = "uo",
						    .agent = "a",
						    .session = (char *)names[i],
						    .generation = 1,
						    .digest = dg,
						    .blob = "x.tar.zst"};
			brig_store_checkpoint *out = NULL;
			ASSERT_OK(brig_store_checkpoint_add(b->s, &out, &in, &err), err);
			assert_int_equal(out->count, -1);
			newest[i] = out->id;
			brig_store_checkpoint_free(out);
		}
	}
	for (int i = 0; i < 2; i++)
		ASSERT_OK(brig_store_session_forget(b->s, "uo", "a", names[i], BRIG_STORE_ANY_REVISION, &err), err);
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_checkpoint_unowned(b->s, &cps, &n, "uo", &err), err);
	assert_int_equal(n, 2);
	assert_string_equal(cps[0].session, "many");
	assert_int_equal(cps[0].id, newest[0]);
	assert_int_equal(cps[0].count, 3);
	assert_string_equal(cps[1].session, "one");
	assert_int_equal(cps[1].id, newest[1]);
	assert_int_equal(cps[1].count, 1);
	brig_store_checkpoint_free_array(cps, n);
	ASSERT_OK(brig_store_checkpoint_list(b->s, &cps, &n, "uo", "a", "kept", &err), err);
	assert_int_equal(n, 2);
	assert_int_equal(cps[0].count, -1);
	brig_store_checkpoint_free_array(cps, n);
	for (int i = 0; i < 2; i++) {
		brig_store_checkpoint *gone = NULL;
		ASSERT_OK(brig_store_checkpoint_prune(b->s, &gone, &n, "uo", "a", names[i], 0, &err), err);
		brig_store_checkpoint_free_array(gone, n);
	}
}

static void test_checkpoints(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	ASSERT_OK(brig_store_session_create(b->s, NULL, &(brig_store_session){.ns = "ck", .agent = "a", .session = "s"},
					    &err),
		  err);
	ASSERT_OK(brig_store_session_create(b->s, NULL,
					    &(brig_store_session){.ns = "ck", .agent = "a", .session = "s2"}, &err),
		  err);
	int64_t ids[4];
	ids[0] = add_ckpt(b, "s", 1, '0', 1000);
	ids[1] = add_ckpt(b, "s", 1, '1', 2000);
	ids[2] = add_ckpt(b, "s", 2, '2', 3000);
	ids[3] = add_ckpt(b, "s", 2, '3', 4000);
	for (int i = 1; i < 4; i++)
		assert_true(ids[i] > ids[i - 1]);
	/* Another session holds the same content as the oldest one. */
	int64_t shared = add_ckpt(b, "s2", 1, '0', 1000);

	brig_store_checkpoint *arr = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_checkpoint_list(b->s, &arr, &n, "ck", "a", "s", &err), err);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(arr[i].id, ids[3 - i]);
	assert_int_equal(arr[0].generation, 2);
	assert_int_equal(arr[3].generation, 1);
	assert_string_equal(arr[0].session, "s");
	brig_store_checkpoint_free_array(arr, n);

	brig_store_checkpoint *one = NULL;
	ASSERT_OK(brig_store_checkpoint_latest(b->s, &one, "ck", "a", "s", &err), err);
	assert_int_equal(one->id, ids[3]);
	assert_int_equal(one->bytes_raw, 4000);
	brig_store_checkpoint_free(one);
	ASSERT_OK(brig_store_checkpoint_get(b->s, &one, ids[1], &err), err);
	assert_int_equal(one->bytes_raw, 2000);
	assert_int_equal(one->blob_refs, -1);
	brig_store_checkpoint_free(one);

	/* Keep the newest two: the two oldest come back, newest first, with the
	 * number of rows still naming their blob. */
	ASSERT_OK(brig_store_checkpoint_prune(b->s, &arr, &n, "ck", "a", "s", 2, &err), err);
	assert_int_equal(n, 2);
	assert_int_equal(arr[0].id, ids[1]);
	assert_int_equal(arr[0].blob_refs, 0);
	assert_int_equal(arr[1].id, ids[0]);
	assert_int_equal(arr[1].blob_refs, 1); /* still used by s2 */
	brig_store_checkpoint_free_array(arr, n);
	ASSERT_OK(brig_store_checkpoint_list(b->s, &arr, &n, "ck", "a", "s", &err), err);
	assert_int_equal(n, 2);
	assert_int_equal(arr[0].id, ids[3]);
	assert_int_equal(arr[1].id, ids[2]);
	brig_store_checkpoint_free_array(arr, n);
	ASSERT_OK(brig_store_checkpoint_prune(b->s, &arr, &n, "ck", "a", "s", 2, &err), err);
	assert_int_equal(n, 0);
	assert_null(arr);

	/* Remove one by id. */
	ASSERT_OK(brig_store_checkpoint_remove(b->s, &one, ids[3], &err), err);
	assert_int_equal(one->id, ids[3]);
	assert_int_equal(one->blob_refs, 0);
	brig_store_checkpoint_free(one);
	expect_code(brig_store_checkpoint_remove(b->s, NULL, ids[3], &err), BRIG_ENOTFOUND, &err, "second remove");
	expect_code(brig_store_checkpoint_get(b->s, &one, ids[3], &err), BRIG_ENOTFOUND, &err, "get removed");
	ASSERT_OK(brig_store_checkpoint_latest(b->s, &one, "ck", "a", "s", &err), err);
	assert_int_equal(one->id, ids[2]);
	brig_store_checkpoint_free(one);

	/* Refusals. */
	char dg[65];
	hexdigest(dg, 'a');
	brig_store_checkpoint bad = {
		.ns = "ck", .agent = "a", .session = "absent", .generation = 1, .digest = dg, .blob = "x"};
	expect_code(brig_store_checkpoint_add(b->s, NULL, &bad, &err), BRIG_ENOTFOUND, &err, "add to absent session");
	bad.session = "s";
	bad.digest = "ABCDEF";
	expect_code(brig_store_checkpoint_add(b->s, NULL, &bad, &err), BRIG_EINVAL, &err, "short digest");
	hexdigest(dg, 'A');
	bad.digest = dg;
	expect_code(brig_store_checkpoint_add(b->s, NULL, &bad, &err), BRIG_EINVAL, &err, "uppercase digest");
	hexdigest(dg, 'a');
	bad.generation = 0;
	expect_code(brig_store_checkpoint_add(b->s, NULL, &bad, &err), BRIG_EINVAL, &err, "generation 0");

	/* Deleting the session hands back its checkpoints. */
	brig_store_checkpoint *removed = NULL;
	size_t nr = 0;
	ASSERT_OK(brig_store_session_delete(b->s, &removed, &nr, "ck", "a", "s", BRIG_STORE_ANY_REVISION, &err), err);
	assert_int_equal(nr, 1);
	assert_int_equal(removed[0].id, ids[2]);
	assert_int_equal(removed[0].blob_refs, 0);
	brig_store_checkpoint_free_array(removed, nr);
	ASSERT_OK(brig_store_checkpoint_list(b->s, &arr, &n, "ck", "a", "s", &err), err);
	assert_int_equal(n, 0);
	expect_code(brig_store_checkpoint_latest(b->s, &one, "ck", "a", "s", &err), BRIG_ENOTFOUND, &err,
		    "latest of none");
	assert_null(one);

	/* keep 0 empties a session. */
	ASSERT_OK(brig_store_checkpoint_prune(b->s, &arr, &n, "ck", "a", "s2", 0, &err), err);
	assert_int_equal(n, 1);
	assert_int_equal(arr[0].id, shared);
	assert_int_equal(arr[0].blob_refs, 0);
	brig_store_checkpoint_free_array(arr, n);
}

static void test_egress_ledger(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	char sandbox[64];
	snprintf(sandbox, sizeof sandbox, "brig-eg-%ld", (long)getpid());
	brig_store_egress rows[3] = {
		{.sandbox = sandbox,
		 .ns = "eg",
		 .agent = "a",
		 .session = "s",
		 .host = "api.example.com",
		 .port = 443,
		 .decision = "allowed",
		 .reason = "",
		 .bytes_up = 700,
		 .bytes_down = 4096,
		 .start_ms = 1000,
		 .duration_ms = 25},
		{.sandbox = sandbox,
		 .ns = "eg",
		 .agent = "a",
		 .session = "s",
		 .host = "evil.example.com",
		 .port = 443,
		 .decision = "denied",
		 .reason = "not allowed",
		 .start_ms = 2000},
		{.sandbox = "brig-run-x", .host = "", .decision = "error", .reason = "no complete request head"},
	};
	int64_t ids[3];
	for (int i = 0; i < 3; i++)
		ASSERT_OK(brig_store_egress_add(b->s, &ids[i], &rows[i], &err), err);
	assert_true(ids[1] > ids[0]);
	brig_store_egress *out = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_egress_list(b->s, &out, &n, sandbox, NULL, NULL, NULL, 0, &err), err);
	assert_int_equal(n, 2);
	assert_string_equal(out[0].host, "evil.example.com"); /* newest first */
	assert_string_equal(out[0].decision, "denied");
	assert_string_equal(out[1].reason, "");
	assert_int_equal(out[1].bytes_down, 4096);
	assert_int_equal(out[1].port, 443);
	assert_string_equal(out[1].session, "s");
	brig_store_egress_free_array(out, n);
	ASSERT_OK(brig_store_egress_list(b->s, &out, &n, NULL, "eg", "a", "s", 1, &err), err);
	assert_int_equal(n, 1);
	brig_store_egress_free_array(out, n);
	ASSERT_OK(brig_store_egress_list(b->s, &out, &n, "brig-run-x", NULL, NULL, NULL, 0, &err), err);
	assert_true(n >= 1);
	assert_null(out[0].ns);
	brig_store_egress_free_array(out, n);
	/* Errors. */
	assert_int_equal(brig_store_egress_list(b->s, &out, &n, NULL, NULL, NULL, NULL, 0, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_store_egress_list(b->s, &out, &n, sandbox, "eg", "a", "s", 0, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	brig_store_egress bad = rows[0];
	bad.decision = "maybe";
	assert_int_equal(brig_store_egress_add(b->s, NULL, &bad, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	bad = rows[0];
	bad.port = 70000;
	assert_int_equal(brig_store_egress_add(b->s, NULL, &bad, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	bad = rows[0];
	bad.agent = NULL;
	assert_int_equal(brig_store_egress_add(b->s, NULL, &bad, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	bad = rows[0];
	bad.sandbox = NULL;
	assert_int_equal(brig_store_egress_add(b->s, NULL, &bad, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_store_egress_add(b->s, NULL, NULL, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
}

static void test_audit(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_audit rows[3] = {
		{.ns = "au",
		 .agent = "a",
		 .session = "s",
		 .generation = 1,
		 .container_name = "c1",
		 .argv_json = "[\"sh\",\"-c\",\"echo hi\"]",
		 .exit_code = 0,
		 .outcome = "ok",
		 .duration_ms = 12,
		 .stdout_bytes = 3,
		 .stderr_bytes = 0},
		{.ns = "au",
		 .agent = "a",
		 .session = "s",
		 .generation = 1,
		 .container_name = "c1",
		 .argv_json = "[\"sleep\",\"100\"]",
		 .exit_code = -1,
		 .timed_out = true,
		 .outcome = "timeout",
		 .duration_ms = 5000},
		{.ns = "au",
		 .agent = "a",
		 .session = "s",
		 .generation = 2,
		 .container_name = NULL,
		 .argv_json = "[]",
		 .exit_code = 2,
		 .outcome = "error",
		 .duration_ms = 1,
		 .stdout_bytes = 1 << 20,
		 .stderr_bytes = 42},
	};
	int64_t ids[3];
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(brig_store_audit_add(b->s, &ids[i], &rows[i], &err), err);
		if (i)
			assert_true(ids[i] > ids[i - 1]);
	}
	brig_store_audit *arr = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_audit_list(b->s, &arr, &n, "au", "a", "s", 0, &err), err);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++) {
		const brig_store_audit *got = &arr[2 - i], *want = &rows[i];
		assert_int_equal(got->id, ids[i]);
		assert_int_equal(got->generation, want->generation);
		if (want->container_name)
			assert_string_equal(got->container_name, want->container_name);
		else
			assert_null(got->container_name);
		assert_string_equal(got->argv_json, want->argv_json);
		assert_int_equal(got->exit_code, want->exit_code);
		assert_int_equal(got->timed_out, want->timed_out);
		assert_string_equal(got->outcome, want->outcome);
		assert_int_equal(got->duration_ms, want->duration_ms);
		assert_int_equal(got->stdout_bytes, want->stdout_bytes);
		assert_int_equal(got->stderr_bytes, want->stderr_bytes);
		assert_true(got->created_ms > 0);
	}
	brig_store_audit_free_array(arr, n);
	ASSERT_OK(brig_store_audit_list(b->s, &arr, &n, "au", "a", "s", 2, &err), err);
	assert_int_equal(n, 2);
	assert_int_equal(arr[0].id, ids[2]);
	assert_int_equal(arr[1].id, ids[1]);
	brig_store_audit_free_array(arr, n);
	ASSERT_OK(brig_store_audit_list(b->s, &arr, &n, "au", "a", "other", 0, &err), err);
	assert_int_equal(n, 0);
	assert_null(arr);

	brig_store_audit bad = rows[0];
	const char *bad_argv[] = {"{\"a\":1}", "[\"x\",1]", "[\"unterminated", ""};
	for (size_t i = 0; i < sizeof bad_argv / sizeof bad_argv[0]; i++) {
		bad.argv_json = (char *)bad_argv[i];
		expect_code(brig_store_audit_add(b->s, NULL, &bad, &err), BRIG_EINVAL, &err, bad_argv[i]);
	}
	bad = rows[0];
	bad.outcome = "OK!";
	expect_code(brig_store_audit_add(b->s, NULL, &bad, &err), BRIG_EINVAL, &err, "bad outcome");
	bad = rows[0];
	bad.exit_code = -2;
	expect_code(brig_store_audit_add(b->s, NULL, &bad, &err), BRIG_EINVAL, &err, "bad exit code");
}

static void *open_close(void *arg)
{
	const char *url = arg;
	brig_error *err = NULL;
	brig_store *s = NULL;
	int r = brig_store_open(&s, url, &err);
	if (r < 0)
		fprintf(stderr, "open %s: %s\n", url, brig_error_message(err));
	brig_error_free(err);
	brig_store_close(s);
	return (void *)(intptr_t)r;
}

static void test_migrations(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	int v1 = 0, v2 = 0;
	ASSERT_OK(brig_store_schema_version(b->s, &v1, &err), err);
	assert_true(v1 >= 1);
	long rows = schema_rows(b, b->url);
	assert_int_equal(rows, v1);

	/* Opening again applies nothing. */
	brig_store *again = NULL;
	ASSERT_OK(brig_store_open(&again, b->url, &err), err);
	ASSERT_OK(brig_store_schema_version(again, &v2, &err), err);
	assert_int_equal(v2, v1);
	brig_store_close(again);
	assert_int_equal(schema_rows(b, b->url), rows);

	/* Eight first openers of an empty database at once: each migration is
	 * applied exactly once. */
	char *url = extra_url(b, "mig");
	pthread_t tid[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&tid[i], NULL, open_close, url);
	for (int i = 0; i < 8; i++) {
		void *r = NULL;
		pthread_join(tid[i], &r);
		assert_int_equal((intptr_t)r, 0);
	}
	assert_int_equal(schema_rows(b, url), v1);
	free(url);
}

static void test_backend_info(void **state)
{
	backend *b = use(state);
	assert_string_equal(brig_store_backend_name(b->s), b->name);
	const char *disp = brig_store_display_url(b->s);
	if (b == &sqlite_b) {
		assert_string_equal(disp, b->url);
		assert_string_equal(brig_store_path(b->s), b->url + strlen("sqlite://"));
	} else {
		assert_null(brig_store_path(b->s));
		char *red = brig_store_redact_url(b->url);
		char *perr = NULL;
		PQconninfoOption *opts = PQconninfoParse(b->pg_base, &perr);
		assert_non_null(opts);
		const char *pw = NULL;
		for (PQconninfoOption *o = opts; o->keyword; o++)
			if (strcmp(o->keyword, "password") == 0)
				pw = o->val;
		if (pw && *pw && strstr(red, pw)) {
			/* The password also spells the user or database name: the
			 * display URL is scrubbed of it wherever it appears. */
			if (strstr(disp, pw))
				fail_msg("display URL holds the password: %s", disp);
		} else {
			assert_string_equal(disp, red);
		}
		PQconninfoFree(opts);
		free(red);
	}
}

/* Terminates the server backends of application_name app and waits until
 * they are gone; returns how many there were. */
static long kill_backends(backend *b, const char *app)
{
	PGconn *c = PQconnectdb(b->pg_base);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	const char *v[] = {app};
	PGresult *r = PQexecParams(c,
				   "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
				   " WHERE application_name = $1 AND pid <> pg_backend_pid()",
				   1, NULL, v, NULL, NULL, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	long n = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	for (int i = 0; i < 500; i++) {
		r = PQexecParams(c, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", 1, NULL, v,
				 NULL, NULL, 0);
		long left = atol(PQgetvalue(r, 0, 0));
		PQclear(r);
		if (left == 0)
			break;
		usleep(10 * 1000);
	}
	PQfinish(c);
	return n;
}

/* PostgreSQL only: a lost connection (server restart, proxy timeout) is
 * re-established; a read is retried, a write reports BRIG_EUNCERTAIN. */
static void test_pg_reconnect(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	char *tag = rand_tag(), *app = NULL, *url = NULL;
	assert_true(asprintf(&app, "brig_t_%s_rc", tag) > 0);
	assert_true(asprintf(&url, "%s&application_name=%s", b->url, app) > 0);
	brig_store *s = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	brig_store_session in = session_rec("rc", "a", "s");
	ASSERT_OK(brig_store_session_create(s, NULL, &in, &err), err);

	assert_int_equal(kill_backends(b, app), 1);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(s, &rec, "rc", "a", "s", &err), err);
	assert_int_equal(rec->revision, 1);

	assert_int_equal(kill_backends(b, app), 1);
	rec->generation = 2;
	int r = brig_store_session_cas(s, NULL, rec, 1, &err);
	assert_int_equal(r, BRIG_EUNCERTAIN);
	assert_non_null(strstr(brig_error_message(err), "may or may not"));
	brig_error_free(err);
	err = NULL;
	/* The next call reconnects; the cut write was not applied here. */
	brig_store_session *now = NULL;
	ASSERT_OK(brig_store_session_get(s, &now, "rc", "a", "s", &err), err);
	assert_int_equal(now->revision, 1);
	ASSERT_OK(brig_store_session_cas(s, NULL, rec, 1, &err), err);
	brig_store_session_free(now);
	brig_store_session_free(rec);
	brig_store_close(s);
	free(url);
	free(app);
	free(tag);
}

/* ---- backend-independent ---- */

static void test_redact(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"postgresql://brig:s3cret@db:5432/brig", "postgresql://brig:***@db:5432/brig"},
		{"postgres://u:p%40ss@h/d?sslmode=require", "postgres://u:***@h/d?sslmode=require"},
		{"postgresql://u@h/d", "postgresql://u@h/d"},
		{"postgresql://h/d?user=u&password=pw&schema=x", "postgresql://h/d?user=u&password=***&schema=x"},
		{"postgresql://u:a@b@h/d", "postgresql://u:***@h/d"},
		/* libpq reads the user info up to the first '/', so '#' and '?' are inside it. */
		{"postgresql://u:pa#ss@h:1/d", "postgresql://u:***@h:1/d"},
		{"postgresql://u:pa?ss@h/d?sslmode=require", "postgresql://u:***@h/d?sslmode=require"},
		{"postgresql://u:pa/ss@h/d", "postgresql://u:***@h/d"},
		{"postgresql://h/d?sslpassword=k&Password=p&pass%77ord=q",
		 "postgresql://h/d?sslpassword=***&Password=***&pass%77ord=***"},
		{"postgresql://h/d?password=a#b&x=1", "postgresql://h/d?password=***&x=1"},
		{"sqlite:///var/lib/brig/brig.db", "sqlite:///var/lib/brig/brig.db"},
		{"/plain/path.db", "/plain/path.db"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *r = brig_store_redact_url(cases[i].in);
		assert_string_equal(r, cases[i].out);
		free(r);
	}
	assert_null(brig_store_redact_url(NULL));

	/* Empty secret values grow the text ("***" for nothing): 40 of them
	 * are redacted whole, past what a fixed margin over the length holds. */
	char in[1024] = "postgresql://u:@h/d?", want[1024] = "postgresql://u:***@h/d?";
	for (int i = 0; i < 40; i++) {
		strcat(in, i ? "&password=" : "password=");
		strcat(want, i ? "&password=***" : "password=***");
	}
	char *r = brig_store_redact_url(in);
	assert_string_equal(r, want);
	free(r);
}

static void test_pg_error_redacted(void **state)
{
	/* Port 1 on loopback: nothing listens, the connection is refused. */
	static const char *const urls[] = {
		"postgresql://brig:Sup3r-S3cret-pw@127.0.0.1:1/brig_test?connect_timeout=3",
		"postgres://127.0.0.1:1/brig_test?user=brig&password=Sup3r-S3cret-pw&connect_timeout=3",
		"postgresql://brig:Sup3r%2DS3cret-pw@127.0.0.1:1/brig_test?connect_timeout=3",
	};
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		brig_error *err = NULL;
		brig_store *s = NULL;
		int r = brig_store_open(&s, urls[i], &err);
		assert_int_equal(r, BRIG_ESTORE);
		assert_null(s);
		const char *m = brig_error_message(err);
		if (strstr(m, "S3cret") || strstr(m, "%2DS3"))
			fail_msg("password leaked: %s", m);
		assert_non_null(strstr(m, "127.0.0.1"));
		assert_non_null(strstr(m, "***"));
		if (i == 0)
			print_message("[  INFO    ] %s\n", m);
		brig_error_free(err);
	}
}

/* Every way of writing a password that libpq or the redactor once echoed:
 * the message must hold neither half of it, whatever the failure. */
static void test_pg_error_secrets(void **state)
{
	static const char *const urls[] = {
		"postgresql://u:Xq7#Zk9@127.0.0.1:1/brig_test?connect_timeout=3",
		"postgresql://u:Xq7?Zk9@127.0.0.1:1/brig_test?connect_timeout=3",
		"postgresql://u:Xq7/Zk9@127.0.0.1:1/brig_test?connect_timeout=3",
		"postgresql://u:Xq7@Zk9@127.0.0.1:1/brig_test?connect_timeout=3",
		"postgresql://127.0.0.1:1/brig_test?password=Xq7%ZZk9",
		"postgresql://127.0.0.1:1/brig_test?pass%77ord=Xq7%ZZk9",
		"postgresql://127.0.0.1:1/brig_test?sslpassword=Xq7%ZZk9",
		"postgresql://127.0.0.1:1/brig_test?sslpassword=Xq7Zk9&connect_timeout=3",
		"postgresql://u:Xq7%41Zk9@127.0.0.1:1/brig_test?connect_timeout=3&bogus=1",
	};
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		brig_error *err = NULL;
		brig_store *s = NULL;
		int r = brig_store_open(&s, urls[i], &err);
		assert_true(r == BRIG_ESTORE || r == BRIG_EINVAL);
		assert_null(s);
		const char *m = brig_error_message(err);
		if (strstr(m, "Xq7") || strstr(m, "Zk9"))
			fail_msg("password leaked (case %zu): %s", i, m);
		assert_non_null(strstr(m, "127.0.0.1"));
		brig_error_free(err);
	}
}

static void test_open_errors(void **state)
{
	brig_error *err = NULL;
	brig_store *s = NULL;
	expect_code(brig_store_open(&s, "mysql://u:p@h/d", &err), BRIG_EINVAL, &err, "unknown scheme");
	expect_code(brig_store_open(&s, "", &err), BRIG_EINVAL, &err, "empty URL");
	expect_code(brig_store_open(&s, "sqlite://", &err), BRIG_EINVAL, &err, "no path");
	expect_code(brig_store_open(&s, "postgresql://u@127.0.0.1:1/d?schema=bad-name", &err), BRIG_EINVAL, &err,
		    "bad schema");
	expect_code(brig_store_open(&s, "postgresql://u@127.0.0.1:1/d?schema=1abc", &err), BRIG_EINVAL, &err,
		    "schema starting with a digit");
	assert_null(s);
}

static void test_default_url(void **state)
{
	char *saved_store = getenv("BRIG_STORE") ? strdup(getenv("BRIG_STORE")) : NULL;
	char *saved_xdg = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;
	brig_error *err = NULL;
	char *u = NULL;

	setenv("BRIG_STORE", "postgresql://x/y", 1);
	ASSERT_OK(brig_store_default_url(&u, &err), err);
	assert_string_equal(u, "postgresql://x/y");
	free(u);

	unsetenv("BRIG_STORE");
	setenv("XDG_DATA_HOME", "/xdg/data", 1);
	ASSERT_OK(brig_store_default_url(&u, &err), err);
	if (geteuid() == 0)
		assert_string_equal(u, "sqlite:///var/lib/brig/brig.db");
	else
		assert_string_equal(u, "sqlite:///xdg/data/brig/brig.db");
	free(u);

	if (saved_store)
		setenv("BRIG_STORE", saved_store, 1);
	if (saved_xdg)
		setenv("XDG_DATA_HOME", saved_xdg, 1);
	else
		unsetenv("XDG_DATA_HOME");
	free(saved_store);
	free(saved_xdg);
}

static void test_sqlite_files(void **state)
{
	char tmpl[] = "/tmp/brig-test-store-XXXXXX";
	assert_non_null(mkdtemp(tmpl));
	char *path = NULL;
	assert_true(asprintf(&path, "%s/a/b/brig.db", tmpl) > 0);
	brig_error *err = NULL;
	brig_store *s = NULL;
	mode_t old = umask(022);
	ASSERT_OK(brig_store_open(&s, path, &err), err); /* a plain path */
	umask(old);
	assert_string_equal(brig_store_path(s), path);
	struct stat sb;
	char *dir = NULL;
	assert_true(asprintf(&dir, "%s/a", tmpl) > 0);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	free(dir);
	assert_true(asprintf(&dir, "%s/a/b", tmpl) > 0);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	free(dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);

	/* WAL mode is persistent in the file. */
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);

	/* Front-end validation, common to both backends. */
	brig_store_session in = session_rec("", "a", "s");
	expect_code(brig_store_session_create(s, NULL, &in, &err), BRIG_EINVAL, &err, "empty namespace");
	in = session_rec("n", "a\nb", "s");
	expect_code(brig_store_session_create(s, NULL, &in, &err), BRIG_EINVAL, &err, "newline in agent");
	char longname[BRIG_STORE_MAX_NAME + 2];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	in = session_rec("n", "a", longname);
	expect_code(brig_store_session_create(s, NULL, &in, &err), BRIG_EINVAL, &err, "long session");
	in = session_rec("n", "a", "s");
	in.state = (brig_store_state)42;
	expect_code(brig_store_session_create(s, NULL, &in, &err), BRIG_EINVAL, &err, "bad state");
	in.state = BRIG_STORE_RUNNING;
	in.generation = -1;
	expect_code(brig_store_session_create(s, NULL, &in, &err), BRIG_EINVAL, &err, "negative generation");
	brig_store_session *out = NULL;
	expect_code(brig_store_session_get(s, &out, "n", NULL, "s", &err), BRIG_EINVAL, &err, "NULL agent");

	/* State names. */
	for (int i = BRIG_STORE_CREATING; i <= BRIG_STORE_DESTROYED; i++) {
		brig_store_state back;
		ASSERT_OK(brig_store_state_from_string(&back, brig_store_state_to_string((brig_store_state)i), &err),
			  err);
		assert_int_equal(back, i);
	}
	assert_string_equal(brig_store_state_to_string(BRIG_STORE_FAILED), "failed");
	assert_string_equal(brig_store_state_to_string((brig_store_state)99), "unknown");
	brig_store_state st_out = BRIG_STORE_PAUSED;
	expect_code(brig_store_state_from_string(&st_out, "Running", &err), BRIG_EINVAL, &err, "capitalised state");
	assert_int_equal(st_out, BRIG_STORE_PAUSED);

	brig_store_close(s);
	brig_store_close(NULL);

	/* A parent that cannot be made (a file stands in its way) is named. */
	char *blocked = NULL;
	assert_true(asprintf(&blocked, "%s/a/b/brig.db/sub/brig.db", tmpl) > 0);
	s = NULL;
	assert_int_equal(brig_store_open(&s, blocked, &err), BRIG_EIO);
	assert_null(s);
	assert_non_null(strstr(brig_error_message(err), "cannot create store directory "));
	assert_non_null(strstr(brig_error_message(err), "/a/b/brig.db/sub"));
	brig_error_free(err);
	err = NULL;
	free(blocked);
	nftw(tmpl, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(path);
}

/* A state this brig does not know, written into the database behind its back,
 * is the store's failure (BRIG_ESTORE), not an invalid argument. */
static void test_bad_state_in_db(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	brig_store_session in = session_rec("bad", "agent", "st");
	ASSERT_OK(brig_store_session_create(b->s, NULL, &in, &err), err);
	if (b == &sqlite_b) {
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(b->url + strlen("sqlite://"), &db), SQLITE_OK);
		sqlite3_busy_timeout(db, 5000);
		char *msg = NULL;
		int r = sqlite3_exec(db,
				     "PRAGMA ignore_check_constraints = ON;"
				     "UPDATE sessions SET state = 'hibernating' WHERE ns = 'bad' AND session = 'st';",
				     NULL, NULL, &msg);
		if (r != SQLITE_OK)
			fail_msg("corrupting the state: %s", msg);
		sqlite3_close(db);
	} else {
		PGconn *c = PQconnectdb(b->pg_base);
		assert_int_equal(PQstatus(c), CONNECTION_OK);
		char *q = PQescapeIdentifier(c, b->schemas[0], strlen(b->schemas[0]));
		char *sql = NULL;
		assert_true(asprintf(&sql,
				     "ALTER TABLE %s.sessions DROP CONSTRAINT IF EXISTS sessions_state_check;"
				     "UPDATE %s.sessions SET state = 'hibernating' WHERE ns = 'bad' AND session = 'st'",
				     q, q) > 0);
		PGresult *r = PQexec(c, sql);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			fail_msg("corrupting the state: %s", PQresultErrorMessage(r));
		PQclear(r);
		free(sql);
		PQfreemem(q);
		PQfinish(c);
	}
	brig_store_session *got = NULL;
	int r = brig_store_session_get(b->s, &got, "bad", "agent", "st", &err);
	assert_int_equal(r, BRIG_ESTORE);
	assert_null(got);
	assert_non_null(err);
	assert_int_equal(err->code, BRIG_ESTORE);
	assert_non_null(strstr(brig_error_message(err), "hibernating"));
	brig_error_free(err);
	err = NULL;
	/* Without an error out-parameter the code is the same. */
	assert_int_equal(brig_store_session_get(b->s, &got, "bad", "agent", "st", NULL), BRIG_ESTORE);
	ASSERT_OK(brig_store_session_delete(b->s, NULL, NULL, "bad", "agent", "st", BRIG_STORE_ANY_REVISION, &err),
		  err);
}

/* ---- a store written by a brig of schema version 2 ---- */

/* Migrations 1 and 2 exactly as released (the SQLite edit of migration 3
 * matches this text). */
static const char *const v2_sqlite[] = {
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
};

static const char *const v2_pg[] = {
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
};

/* Makes a version-2 store at url (a fresh file or schema) holding one
 * destroyed session with one checkpoint and one audit row. */
static void make_v2_store(backend *b, const char *url)
{
	const char *rows =
		"INSERT INTO schema_version VALUES (1, 0), (2, 0);"
		"INSERT INTO sessions VALUES ('old', 'agent', 's', 2, 'destroyed', NULL, NULL, NULL, 3, 0, 0);"
		"INSERT INTO checkpoints (ns, agent, session, generation, digest, blob, bytes_raw,"
		" bytes_stored, created_ms) VALUES ('old', 'agent', 's', 2,"
		" 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'b.tar.zst', 1, 1, 0);"
		"INSERT INTO audit (ns, agent, session, generation, argv_json, timed_out, outcome,"
		" duration_ms, stdout_bytes, stderr_bytes, created_ms)"
		" VALUES ('old', 'agent', 's', 2, '[\"true\"]', false, 'ok', 1, 0, 0, 0);";
	char *sql = NULL;
	if (b == &sqlite_b) {
		assert_true(asprintf(&sql,
				     "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_ms INTEGER "
				     "NOT NULL);%s%s%s",
				     v2_sqlite[0], v2_sqlite[1], rows) > 0);
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(url + strlen("sqlite://"), &db), SQLITE_OK);
		char *msg = NULL;
		if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
			fail_msg("making a version-2 store: %s", msg);
		sqlite3_close(db);
		free(sql);
		return;
	}
	const char *schema = strstr(url, "schema=") + strlen("schema=");
	PGconn *c = PQconnectdb(b->pg_base);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	char *q = PQescapeIdentifier(c, schema, strlen(schema));
	assert_true(asprintf(&sql,
			     "CREATE SCHEMA %s; SET search_path TO %s;"
			     "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL);"
			     "%s%s%s",
			     q, q, v2_pg[0], v2_pg[1], rows) > 0);
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail_msg("making a version-2 store: %s", PQresultErrorMessage(r));
	PQclear(r);
	free(sql);
	PQfreemem(q);
	PQfinish(c);
}

/* An old store migrates: its rows stay, a session can be stopped, a
 * checkpoint outlives its session's removal (forget) or goes with it
 * (delete), and the old audit row has no actor while a new one has this
 * process's user. */
static void test_v2_store_migrates(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	char *url = extra_url(b, "v2");
	make_v2_store(b, url);
	brig_store *s = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	int v = 0;
	ASSERT_OK(brig_store_schema_version(s, &v, &err), err);
	assert_true(v >= 3);
	brig_store_session *r = NULL;
	ASSERT_OK(brig_store_session_get(s, &r, "old", "agent", "s", &err), err);
	assert_int_equal(r->state, BRIG_STORE_DESTROYED);
	assert_int_equal(r->generation, 2);
	r->state = BRIG_STORE_STOPPED;
	brig_store_session *w = NULL;
	ASSERT_OK(brig_store_session_cas(s, &w, r, r->revision, &err), err);
	assert_int_equal(w->state, BRIG_STORE_STOPPED);
	assert_string_equal(brig_store_state_to_string(w->state), "stopped");
	brig_store_session_free(w);
	w = NULL;
	ASSERT_OK(brig_store_session_get(s, &w, "old", "agent", "s", &err), err);
	assert_int_equal(w->state, BRIG_STORE_STOPPED);
	brig_store_session_free(w);

	/* forget: the session goes, its checkpoint stays. */
	expect_code(brig_store_session_forget(s, "old", "agent", "s", 1, &err), BRIG_ECONFLICT, &err, "forget");
	ASSERT_OK(brig_store_session_forget(s, "old", "agent", "s", BRIG_STORE_ANY_REVISION, &err), err);
	expect_code(brig_store_session_forget(s, "old", "agent", "s", 0, &err), BRIG_ENOTFOUND, &err, "forget");
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_checkpoint_list(s, &cps, &n, "old", "agent", "s", &err), err);
	assert_int_equal(n, 1);
	int64_t kept = cps[0].id;
	brig_store_checkpoint_free_array(cps, n);
	/* ... and is listed as unowned (its namespace or all; not another). */
	ASSERT_OK(brig_store_checkpoint_unowned(s, &cps, &n, "old", &err), err);
	assert_int_equal(n, 1);
	assert_int_equal(cps[0].id, kept);
	assert_string_equal(cps[0].session, "s");
	brig_store_checkpoint_free_array(cps, n);
	ASSERT_OK(brig_store_checkpoint_unowned(s, &cps, &n, NULL, &err), err);
	assert_int_equal(n, 1);
	brig_store_checkpoint_free_array(cps, n);
	ASSERT_OK(brig_store_checkpoint_unowned(s, &cps, &n, "other", &err), err);
	assert_int_equal(n, 0);
	assert_null(cps);
	char d[65];
	hexdigest(d, 'b');
	brig_store_checkpoint cp = {
		.ns = "old", .agent = "agent", .session = "s", .generation = 2, .digest = d, .blob = "c.tar.zst"};
	expect_code(brig_store_checkpoint_add(s, NULL, &cp, &err), BRIG_ENOTFOUND, &err, "add without session");
	/* A session made again owns the kept checkpoint; delete takes it. */
	r->revision = 0;
	ASSERT_OK(brig_store_session_create(s, NULL, r, &err), err);
	ASSERT_OK(brig_store_checkpoint_unowned(s, &cps, &n, NULL, &err), err);
	assert_int_equal(n, 0);
	ASSERT_OK(brig_store_checkpoint_add(s, NULL, &cp, &err), err);
	brig_store_checkpoint *gone = NULL;
	ASSERT_OK(brig_store_session_delete(s, &gone, &n, "old", "agent", "s", 0, &err), err);
	assert_int_equal(n, 2);
	assert_true(gone[0].id > gone[1].id);
	assert_string_equal(gone[0].blob, "c.tar.zst");
	assert_int_equal(gone[0].blob_refs, 0);
	brig_store_checkpoint_free_array(gone, n);
	ASSERT_OK(brig_store_checkpoint_list(s, &cps, &n, "old", "agent", "s", &err), err);
	assert_int_equal(n, 0);
	ASSERT_OK(brig_store_checkpoint_unowned(s, &cps, &n, NULL, &err), err);
	assert_int_equal(n, 0);
	brig_store_session_free(r);

	/* who: none for the old row; this process's user, or what is given. */
	brig_store_audit a = {.ns = "old",
			      .agent = "agent",
			      .session = "s",
			      .generation = 2,
			      .argv_json = "[\"ls\"]",
			      .exit_code = 0,
			      .outcome = "ok"};
	ASSERT_OK(brig_store_audit_add(s, NULL, &a, &err), err);
	a.actor = "mcp";
	ASSERT_OK(brig_store_audit_add(s, NULL, &a, &err), err);
	a.actor = "bad\nactor";
	expect_code(brig_store_audit_add(s, NULL, &a, &err), BRIG_EINVAL, &err, "actor with a newline");
	brig_store_audit *au = NULL;
	ASSERT_OK(brig_store_audit_list(s, &au, &n, "old", "agent", "s", 0, &err), err);
	assert_int_equal(n, 3);
	assert_string_equal(au[0].actor, "mcp");
	char *uid = NULL;
	assert_true(asprintf(&uid, "uid %u", (unsigned)geteuid()) > 0);
	assert_non_null(strstr(au[1].actor, uid));
	assert_null(au[2].actor);
	free(uid);
	brig_store_audit_free_array(au, n);
	brig_store_close(s);
	free(url);
}

/* ---- audit rows written by the store's writer thread ---- */

typedef struct bg_writer {
	brig_store *s;
	const char *session;
	int n;
} bg_writer;

static void *bg_add(void *arg)
{
	bg_writer *w = arg;
	for (int i = 0; i < w->n; i++) {
		brig_store_audit r = {.ns = "bg",
				      .agent = "a",
				      .session = (char *)w->session,
				      .generation = 1,
				      .argv_json = "[\"true\"]",
				      .outcome = "ok",
				      .duration_ms = i};
		brig_error *err = NULL;
		if (brig_store_audit_add(w->s, NULL, &r, &err) != 0)
			return (void *)1;
	}
	return NULL;
}

static size_t bg_count(brig_store *s, const char *session)
{
	brig_store_audit *arr = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_audit_list(s, &arr, &n, "bg", "a", session, 0, &err), err);
	/* in order: newest first, the durations count down */
	for (size_t i = 1; i < n; i++)
		assert_true(arr[i - 1].id > arr[i].id && arr[i - 1].duration_ms == arr[i].duration_ms + 1);
	brig_store_audit_free_array(arr, n);
	return n;
}

static void test_audit_background(void **state)
{
	backend *b = use(state);
	brig_error *err = NULL;
	char *url = extra_url(b, "bg");
	brig_store *s = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	ASSERT_OK(brig_store_audit_background(s, &err), err);
	ASSERT_OK(brig_store_audit_background(s, &err), err); /* idempotent */
	/* Two writers, more rows than the queue holds: callers wait for room,
	 * nothing is dropped, and a list sees every row queued before it. */
	bg_writer w[2] = {{s, "one", BRIG_STORE_AUDIT_QUEUE + 200}, {s, "two", 300}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, bg_add, &w[i]), 0);
	for (int i = 0; i < 2; i++) {
		void *ret = NULL;
		pthread_join(th[i], &ret);
		assert_null(ret);
	}
	assert_int_equal(bg_count(s, "one"), BRIG_STORE_AUDIT_QUEUE + 200);
	assert_int_equal(bg_count(s, "two"), 300);
	/* Closing writes what is still queued. */
	bg_writer last = {s, "three", 50};
	assert_null(bg_add(&last));
	brig_store_close(s);
	s = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	assert_int_equal(bg_count(s, "three"), 50);

	if (b == &sqlite_b) {
		/* A row the writer cannot write is reported on stderr, not lost
		 * silently. */
		ASSERT_OK(brig_store_audit_background(s, &err), err);
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(url + strlen("sqlite://"), &db), SQLITE_OK);
		sqlite3_busy_timeout(db, 5000);
		/* A store that refuses rows for a while (a database restarting):
		 * the writer waits for it, and the row lands once it is back. */
		assert_int_equal(sqlite3_exec(db, "ALTER TABLE audit RENAME TO audit_away", NULL, NULL, NULL),
				 SQLITE_OK);
		brig_store_audit back = {.ns = "bg",
					 .agent = "a",
					 .session = "back",
					 .generation = 1,
					 .argv_json = "[\"true\"]",
					 .outcome = "ok"};
		ASSERT_OK(brig_store_audit_add(s, NULL, &back, &err), err);
		usleep(600 * 1000);
		assert_int_equal(sqlite3_exec(db, "ALTER TABLE audit_away RENAME TO audit", NULL, NULL, NULL),
				 SQLITE_OK);
		assert_int_equal(bg_count(s, "back"), 1); /* the list waits for the queue */
		ASSERT_OK(brig_store_audit_background(s, &err), err);
		assert_int_equal(sqlite3_exec(db, "ALTER TABLE audit RENAME TO audit_gone", NULL, NULL, NULL),
				 SQLITE_OK);
		sqlite3_close(db);
		char logpath[] = "/tmp/brig-test-store-log-XXXXXX";
		int logfd = mkstemp(logpath);
		assert_true(logfd >= 0);
		fflush(stderr);
		int saved = dup(2);
		dup2(logfd, 2);
		brig_store_audit r = {.ns = "bg",
				      .agent = "a",
				      .session = "lost",
				      .generation = 1,
				      .argv_json = "[\"echo\",\"marker\"]",
				      .outcome = "ok"};
		ASSERT_OK(brig_store_audit_add(s, NULL, &r, &err), err);
		brig_store_close(s); /* waits for the writer */
		s = NULL;
		fflush(stderr);
		dup2(saved, 2);
		close(saved);
		char buf[4096] = {0};
		assert_true(pread(logfd, buf, sizeof buf - 1, 0) > 0);
		close(logfd);
		unlink(logpath);
		assert_non_null(
			strstr(buf, "the audit row of bg/a/lost [\"echo\",\"marker\"] (ok) could not be written"));
	}
	brig_store_close(s);
	free(url);
}

#define STORE_SUITE(b)                                                                                            \
	cmocka_unit_test_prestate(test_backend_info, b), cmocka_unit_test_prestate(test_roundtrip, b),            \
		cmocka_unit_test_prestate(test_create_conflict, b), cmocka_unit_test_prestate(test_cas, b),       \
		cmocka_unit_test_prestate(test_concurrent_cas, b),                                                \
		cmocka_unit_test_prestate(test_concurrent_create, b),                                             \
		cmocka_unit_test_prestate(test_two_processes, b), cmocka_unit_test_prestate(test_checkpoints, b), \
		cmocka_unit_test_prestate(test_unowned_counts, b), cmocka_unit_test_prestate(test_audit, b),      \
		cmocka_unit_test_prestate(test_migrations, b), cmocka_unit_test_prestate(test_egress_ledger, b),  \
		cmocka_unit_test_prestate(test_bad_state_in_db, b),                                               \
		cmocka_unit_test_prestate(test_v2_store_migrates, b),                                             \
		cmocka_unit_test_prestate(test_audit_background, b)

int main(int argc, char **argv)
{
	argv0 = argv[0];
	const char *child = getenv("BRIG_TEST_STORE_CHILD");
	if (child)
		return child_main(child);
	const struct CMUnitTest common[] = {
		cmocka_unit_test(test_redact),           cmocka_unit_test(test_pg_error_redacted),
		cmocka_unit_test(test_pg_error_secrets), cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_default_url),      cmocka_unit_test(test_sqlite_files),
	};
	const struct CMUnitTest sqlite_suite[] = {STORE_SUITE(&sqlite_b)};
	const struct CMUnitTest pg_suite[] = {STORE_SUITE(&pg_b), cmocka_unit_test_prestate(test_pg_reconnect, &pg_b)};
	int fails = 0;
	fails += cmocka_run_group_tests_name("store/common", common, NULL, NULL);
	fails += cmocka_run_group_tests_name("store/sqlite", sqlite_suite, setup_sqlite, teardown_sqlite);
	fails += cmocka_run_group_tests_name("store/postgresql", pg_suite, setup_pg, teardown_pg);
	return fails;
}
