/* pq_dl.c — opens libpq on first use and fills brig__pq (see
 * pq_dl.h for why it is not linked). */
#define BRIG__PQ_DL_IMPL
#include "store/pq_dl.h"

#include "util/dl.h"

brig__pq_api brig__pq;

static const char *const names[] = {BRIG__PQ_FUNCS(BRIG__DL_NAME)};

BRIG__DL_DEFINE_FILL(fill, brig__pq, BRIG__PQ_FUNCS)

static brig__dl lib = BRIG__DL_INIT(BRIG__PQ_SONAME, BRIG__PQ_PACKAGE, names, fill);

int brig__pq_load(brig_error **err)
{
	return brig__dl_load(&lib, BRIG_ESTORE, err);
}
