/* mhd_dl.c — opens libmicrohttpd on first use and fills brig__mhd (see
 * mhd_dl.h for why it is not linked). */
#define BRIG__MHD_DL_IMPL
#include "serve/mhd_dl.h"

brig__mhd_api brig__mhd;

static const char *const names[] = {BRIG__MHD_FUNCS(BRIG__DL_NAME)};

BRIG__DL_DEFINE_FILL(fill, brig__mhd, BRIG__MHD_FUNCS)

static brig__dl lib = BRIG__DL_INIT(BRIG__MHD_SONAME, BRIG__MHD_PACKAGE, names, fill);

int brig__mhd_load(brig_error **err)
{
	return brig__dl_load(&lib, BRIG_EINVAL, err);
}
