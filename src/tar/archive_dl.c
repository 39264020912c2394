/* archive_dl.c — opens libarchive on first use and fills brig__archive (see
 * archive_dl.h for why it is not linked). */
#define BRIG__ARCHIVE_DL_IMPL
#include "tar/archive_dl.h"

#include "util/dl.h"
#include "util/util.h"

brig__archive_api brig__archive;

static const char *const names[] = {BRIG__ARCHIVE_FUNCS(BRIG__DL_NAME)};

BRIG__DL_DEFINE_FILL(fill, brig__archive, BRIG__ARCHIVE_FUNCS)

static brig__dl lib = BRIG__DL_INIT(BRIG__ARCHIVE_SONAME, BRIG__ARCHIVE_PACKAGE, names, fill);

int brig__archive_load(brig_error **err)
{
	int r = brig__dl_load(&lib, BRIG_EIO, err);
	return r ? brig__error_prefix(err, r, "tar") : 0;
}
