/* pq_dl.c — opens libpq on first use and fills brig__pq (see
 * pq_dl.h for why it is not linked). */
#define BRIG__PQ_DL_IMPL
#include "store/pq_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

brig__pq_api brig__pq;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* empty: loaded */

static void load(void)
{
	/* RTLD_LOCAL: libpq's symbols stay out of the global namespace, so
	 * the process sees the same set as before it was opened. The handle is
	 * never closed: the table points into it until exit. */
	void *h = dlopen(BRIG__PQ_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(load_error, sizeof load_error, "cannot load %s (install the %s package): %s", BRIG__PQ_SONAME,
			 BRIG__PQ_PACKAGE, why ? why : "unknown error");
		return;
	}
	const char *missing = NULL;
#define BRIG__PQ_SYM(name)                                                             \
	if (!missing && !(brig__pq.name = (__typeof__(brig__pq.name))dlsym(h, #name))) \
		missing = #name;
	BRIG__PQ_FUNCS(BRIG__PQ_SYM)
#undef BRIG__PQ_SYM
	if (missing) {
		snprintf(load_error, sizeof load_error, "%s has no %s (too old? install the %s package)",
			 BRIG__PQ_SONAME, missing, BRIG__PQ_PACKAGE);
		memset(&brig__pq, 0, sizeof brig__pq);
		dlclose(h);
	}
}

int brig__pq_load(brig_error **err)
{
	pthread_once(&load_once, load);
	if (load_error[0])
		return brig__error_set(err, BRIG_ESTORE, 0, "%s", load_error);
	return 0;
}
