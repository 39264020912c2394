/* sqlite_dl.h — libsqlite3, opened with dlopen when a SQLite session store is
 * first opened, so that the brig processes that never open a store (brig run,
 * brig exec, brig --version...) do not pay for mapping it at start.
 *
 * The real header gives the types and prototypes; this header then turns
 * each SQLite call of store_sqlite.c into a call through brig__sqlite, a table
 * that brig__sqlite_load fills. brig_store__sqlite_open calls brig__sqlite_load
 * before anything else; every other SQLite call goes through a handle it
 * opened. sqlite3.h's macros are constants (SQLITE_TRANSIENT is a pointer
 * value), none of them a call.
 *
 * Private to src/store/store_sqlite.c and sqlite_dl.c: code outside libbrig
 * (tests) that uses SQLite links it and calls it directly. */
#ifndef BRIG_STORE_SQLITE_DL_H
#define BRIG_STORE_SQLITE_DL_H

#include <sqlite3.h>

#include "brig/error.h"
#include "util/dl.h"

#define BRIG__SQLITE_SONAME "libsqlite3.so.0"
#define BRIG__SQLITE_PACKAGE "libsqlite3-0" /* Debian's */

/* Every SQLite function libbrig calls. A new call site needs its name here
 * and a redirect below (else libbrig.so and the brig binary fail to link). */
#define BRIG__SQLITE_FUNCS(X)            \
	X(sqlite3_bind_int)              \
	X(sqlite3_bind_int64)            \
	X(sqlite3_bind_null)             \
	X(sqlite3_bind_text)             \
	X(sqlite3_busy_timeout)          \
	X(sqlite3_changes)               \
	X(sqlite3_close_v2)              \
	X(sqlite3_column_int)            \
	X(sqlite3_column_int64)          \
	X(sqlite3_column_text)           \
	X(sqlite3_column_type)           \
	X(sqlite3_errmsg)                \
	X(sqlite3_errstr)                \
	X(sqlite3_exec)                  \
	X(sqlite3_extended_result_codes) \
	X(sqlite3_finalize)              \
	X(sqlite3_get_autocommit)        \
	X(sqlite3_last_insert_rowid)     \
	X(sqlite3_open_v2)               \
	X(sqlite3_prepare_v2)            \
	X(sqlite3_reset)                 \
	X(sqlite3_step)                  \
	X(sqlite3_threadsafe)

typedef struct brig__sqlite_api {
	BRIG__SQLITE_FUNCS(BRIG__DL_SLOT)
} brig__sqlite_api;

/* Filled once by brig__sqlite_load; read-only afterwards. */
extern brig__sqlite_api brig__sqlite __attribute__((visibility("hidden")));

/* Opens libsqlite3 and resolves every function above, once per process (the
 * handle is kept until exit); later calls return the first call's result.
 * Thread-safe. Errors: BRIG_ESTORE (the library or one of its functions is
 * missing; the message names the Debian package). */
int brig__sqlite_load(brig_error **err) __attribute__((visibility("hidden")));

/* The redirects: call sites keep SQLite's own names. sqlite_dl.c, which needs
 * the real names for dlsym, defines BRIG__SQLITE_DL_IMPL. */
#ifndef BRIG__SQLITE_DL_IMPL
#define sqlite3_bind_int (brig__sqlite.sqlite3_bind_int)
#define sqlite3_bind_int64 (brig__sqlite.sqlite3_bind_int64)
#define sqlite3_bind_null (brig__sqlite.sqlite3_bind_null)
#define sqlite3_bind_text (brig__sqlite.sqlite3_bind_text)
#define sqlite3_busy_timeout (brig__sqlite.sqlite3_busy_timeout)
#define sqlite3_changes (brig__sqlite.sqlite3_changes)
#define sqlite3_close_v2 (brig__sqlite.sqlite3_close_v2)
#define sqlite3_column_int (brig__sqlite.sqlite3_column_int)
#define sqlite3_column_int64 (brig__sqlite.sqlite3_column_int64)
#define sqlite3_column_text (brig__sqlite.sqlite3_column_text)
#define sqlite3_column_type (brig__sqlite.sqlite3_column_type)
#define sqlite3_errmsg (brig__sqlite.sqlite3_errmsg)
#define sqlite3_errstr (brig__sqlite.sqlite3_errstr)
#define sqlite3_exec (brig__sqlite.sqlite3_exec)
#define sqlite3_extended_result_codes (brig__sqlite.sqlite3_extended_result_codes)
#define sqlite3_finalize (brig__sqlite.sqlite3_finalize)
#define sqlite3_get_autocommit (brig__sqlite.sqlite3_get_autocommit)
#define sqlite3_last_insert_rowid (brig__sqlite.sqlite3_last_insert_rowid)
#define sqlite3_open_v2 (brig__sqlite.sqlite3_open_v2)
#define sqlite3_prepare_v2 (brig__sqlite.sqlite3_prepare_v2)
#define sqlite3_reset (brig__sqlite.sqlite3_reset)
#define sqlite3_step (brig__sqlite.sqlite3_step)
#define sqlite3_threadsafe (brig__sqlite.sqlite3_threadsafe)
#endif

#endif
