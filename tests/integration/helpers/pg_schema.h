/* pg_schema.h — a PostgreSQL schema of a test's own, for the integration
 * tests that run their store cases on SQLite and PostgreSQL (test_session,
 * test_store_cli, test_checkpoint_cas). Header-only: only those tests link
 * libpq. */
#ifndef BRIG_TEST_PG_SCHEMA_H
#define BRIG_TEST_PG_SCHEMA_H

#include "testutil.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define PGS_FN static __attribute__((unused))

/* The store URL of a schema named prefix + this run's id in the database
 * of $BRIG_TEST_PG (schema gets its name, n bytes); NULL without
 * BRIG_TEST_PG. Caller frees. */
PGS_FN char *pg_schema_url(char *schema, size_t n, const char *prefix)
{
	const char *pg = getenv("BRIG_TEST_PG");
	if (!pg || !*pg)
		return NULL;
	snprintf(schema, n, "%s%s", prefix, brig_test_run_id());
	for (char *p = schema; *p; p++)
		if (!isalnum((unsigned char)*p))
			*p = '_';
	return xasprintf("%s%sschema=%s", pg, strchr(pg, '?') ? "&" : "?", schema);
}

static void pg_schema_quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Drops schema (and everything in it) from the database of $BRIG_TEST_PG. */
PGS_FN void pg_schema_drop(const char *schema)
{
	const char *pg = getenv("BRIG_TEST_PG");
	if (!pg || !*pg)
		return;
	PGconn *c = PQconnectdb(pg);
	PQsetNoticeProcessor(c, pg_schema_quiet, NULL);
	if (PQstatus(c) == CONNECTION_OK) {
		char *q = PQescapeIdentifier(c, schema, strlen(schema));
		char *sql = xasprintf("DROP SCHEMA IF EXISTS %s CASCADE", q);
		PQclear(PQexec(c, sql));
		free(sql);
		PQfreemem(q);
	}
	PQfinish(c);
}

#endif
