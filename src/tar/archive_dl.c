/* archive_dl.c — opens libarchive on first use and fills brig__archive (see
 * archive_dl.h for why it is not linked). */
#define BRIG__ARCHIVE_DL_IMPL
#include "tar/archive_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

brig__archive_api brig__archive;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* empty: loaded */

static void load(void)
{
	/* RTLD_LOCAL: libarchive's symbols stay out of the global namespace, so
	 * the process sees the same set as before it was opened. The handle is
	 * never closed: the table points into it until exit. */
	void *h = dlopen(BRIG__ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(load_error, sizeof load_error, "cannot load %s (install the %s package): %s",
			 BRIG__ARCHIVE_SONAME, BRIG__ARCHIVE_PACKAGE, why ? why : "unknown error");
		return;
	}
	const char *missing = NULL;
#define BRIG__ARCHIVE_SYM(name)                                                                  \
	if (!missing && !(brig__archive.name = (__typeof__(brig__archive.name))dlsym(h, #name))) \
		missing = #name;
	BRIG__ARCHIVE_FUNCS(BRIG__ARCHIVE_SYM)
#undef BRIG__ARCHIVE_SYM
	if (missing) {
		snprintf(load_error, sizeof load_error, "%s has no %s (too old? install the %s package)",
			 BRIG__ARCHIVE_SONAME, missing, BRIG__ARCHIVE_PACKAGE);
		memset(&brig__archive, 0, sizeof brig__archive);
		dlclose(h);
	}
}

int brig__archive_load(brig_error **err)
{
	pthread_once(&load_once, load);
	if (load_error[0])
		return brig__error_set(err, BRIG_EIO, 0, "tar: %s", load_error);
	return 0;
}
