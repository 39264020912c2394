/* sqlite_dl.c — opens libsqlite3 on first use and fills brig__sqlite (see
 * sqlite_dl.h for why it is not linked). */
#define BRIG__SQLITE_DL_IMPL
#include "store/sqlite_dl.h"

#include "util/dl.h"

brig__sqlite_api brig__sqlite;

static const char *const names[] = {BRIG__SQLITE_FUNCS(BRIG__DL_NAME)};

BRIG__DL_DEFINE_FILL(fill, brig__sqlite, BRIG__SQLITE_FUNCS)

static brig__dl lib = BRIG__DL_INIT(BRIG__SQLITE_SONAME, BRIG__SQLITE_PACKAGE, names, fill);

int brig__sqlite_load(brig_error **err)
{
	return brig__dl_load(&lib, BRIG_ESTORE, err);
}
