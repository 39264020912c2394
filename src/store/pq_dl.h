/* pq_dl.h — libpq, opened with dlopen when a postgresql:// store is first
 * opened, so that every other brig process does not pay for mapping it (and
 * the Kerberos, LDAP, SASL and GnuTLS libraries behind it: ~1.2 ms per
 * process start).
 *
 * The real header gives the types and prototypes; this header then turns
 * each libpq call of store_pg.c into a call through brig__pq, a table that
 * brig__pq_load fills. brig_store__pg_open calls brig__pq_load before
 * anything else; every other libpq call goes through a store it opened.
 *
 * Private to src/store/store_pg.c and pq_dl.c: code outside libbrig (tests)
 * that uses libpq links it and calls it directly. */
#ifndef BRIG_STORE_PQ_DL_H
#define BRIG_STORE_PQ_DL_H

#include <libpq-fe.h>

#include "brig/error.h"
#include "util/dl.h"

#define BRIG__PQ_SONAME "libpq.so.5"
#define BRIG__PQ_PACKAGE "libpq5" /* Debian's */

/* Every libpq function libbrig calls. A new call site needs its name here
 * and a redirect below (else the brig binary fails to link). */
#define BRIG__PQ_FUNCS(X)       \
	X(PQclear)              \
	X(PQconnectdbParams)    \
	X(PQconninfoFree)       \
	X(PQconninfoParse)      \
	X(PQerrorMessage)       \
	X(PQescapeIdentifier)   \
	X(PQexec)               \
	X(PQexecParams)         \
	X(PQfinish)             \
	X(PQfreemem)            \
	X(PQgetisnull)          \
	X(PQgetvalue)           \
	X(PQntuples)            \
	X(PQreset)              \
	X(PQresultErrorField)   \
	X(PQresultErrorMessage) \
	X(PQresultStatus)       \
	X(PQsetNoticeProcessor) \
	X(PQstatus)             \
	X(PQtransactionStatus)

typedef struct brig__pq_api {
	BRIG__PQ_FUNCS(BRIG__DL_SLOT)
} brig__pq_api;

/* Filled once by brig__pq_load; read-only afterwards. */
extern brig__pq_api brig__pq __attribute__((visibility("hidden")));

/* Opens libpq and resolves every function above, once per process (the
 * handle is kept until exit); later calls return the first call's result.
 * Thread-safe. Errors: BRIG_ESTORE (the library or one of its functions is
 * missing; the message names the Debian package). */
int brig__pq_load(brig_error **err) __attribute__((visibility("hidden")));

/* The redirects: call sites keep libpq's own names. pq_dl.c, which needs the
 * real names for dlsym, defines BRIG__PQ_DL_IMPL. */
#ifndef BRIG__PQ_DL_IMPL
#define PQclear (brig__pq.PQclear)
#define PQconnectdbParams (brig__pq.PQconnectdbParams)
#define PQconninfoFree (brig__pq.PQconninfoFree)
#define PQconninfoParse (brig__pq.PQconninfoParse)
#define PQerrorMessage (brig__pq.PQerrorMessage)
#define PQescapeIdentifier (brig__pq.PQescapeIdentifier)
#define PQexec (brig__pq.PQexec)
#define PQexecParams (brig__pq.PQexecParams)
#define PQfinish (brig__pq.PQfinish)
#define PQfreemem (brig__pq.PQfreemem)
#define PQgetisnull (brig__pq.PQgetisnull)
#define PQgetvalue (brig__pq.PQgetvalue)
#define PQntuples (brig__pq.PQntuples)
#define PQreset (brig__pq.PQreset)
#define PQresultErrorField (brig__pq.PQresultErrorField)
#define PQresultErrorMessage (brig__pq.PQresultErrorMessage)
#define PQresultStatus (brig__pq.PQresultStatus)
#define PQsetNoticeProcessor (brig__pq.PQsetNoticeProcessor)
#define PQstatus (brig__pq.PQstatus)
#define PQtransactionStatus (brig__pq.PQtransactionStatus)
#endif

#endif
