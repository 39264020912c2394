/* dl.c — opens a library on first use and resolves its functions (see dl.h;
 * the libraries and why each is not linked are in src/tar/archive_dl.h,
 * src/store/pq_dl.h, src/store/sqlite_dl.h and src/util/openssl_dl.h). */
#include "util/dl.h"

#include <dlfcn.h>
#include <stdio.h>

#include "util/util.h"

/* Returns 1 when every function resolved, else -1 with d->error set. */
static int open_lib(brig__dl *d)
{
	void *h = dlopen(d->soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(d->error, sizeof d->error, "cannot load %s (install the %s package): %s", d->soname,
			 d->package, why ? why : "unknown error");
		return -1;
	}
	void **fns = xcalloc(d->n, sizeof *fns);
	for (size_t i = 0; i < d->n; i++) {
		if (!(fns[i] = dlsym(h, d->names[i]))) {
			snprintf(d->error, sizeof d->error, "%s has no %s (too old? install the %s package)", d->soname,
				 d->names[i], d->package);
			free(fns);
			dlclose(h);
			return -1;
		}
	}
	d->fill(fns);
	free(fns);
	return 1;
}

int brig__dl_load(brig__dl *d, int code, brig_error **err)
{
	/* A mutex rather than pthread_once, which cannot say which library:
	 * this runs once per store, tar stream or TLS connection, not per
	 * call through the table. */
	pthread_mutex_lock(&d->lock);
	if (!d->state)
		d->state = open_lib(d);
	int state = d->state;
	pthread_mutex_unlock(&d->lock);
	if (state < 0)
		return brig__error_set(err, code, 0, "%s", d->error);
	return 0;
}
