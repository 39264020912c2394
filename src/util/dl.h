/* dl.h — a library opened with dlopen the first time it is needed and a list
 * of its functions resolved into a table: the part that archive_dl, pq_dl,
 * sqlite_dl and openssl_dl share. Private to src/.
 *
 * Each of those headers keeps the library's own header for the types, an
 * X-macro list of the functions libbrig calls, a table of pointers typed with
 * __typeof__ and a redirect per function, so call sites keep the library's
 * names; its .c file holds one brig__dl and a fill() that copies the resolved
 * pointers into the typed table. */
#ifndef BRIG_UTIL_DL_H
#define BRIG_UTIL_DL_H

#include <pthread.h>
#include <stddef.h>

#include "brig/error.h"

typedef struct brig__dl {
	const char *soname;  /* what dlopen opens: "libsqlite3.so.0" */
	const char *package; /* Debian's package of it, named in the error */
	const char *const *names;
	size_t n;
	/* Stores fns[0..n) (in the order of names) into the typed table. */
	void (*fill)(void *const *fns);
	pthread_mutex_t lock;
	int state; /* 0: not tried yet; 1: loaded; -1: failed, error says why */
	char error[384];
} brig__dl;

/* A static brig__dl for the library soname (a Debian package), whose
 * functions are the array names. */
#define BRIG__DL_INIT(soname, package, names, fill)                                                                  \
	{                                                                                                            \
		(soname), (package), (names), sizeof(names) / sizeof((names)[0]), (fill), PTHREAD_MUTEX_INITIALIZER, \
			0, ""                                                                                        \
	}

/* For an X-macro list: a function's name as an element of names. */
#define BRIG__DL_NAME(name) #name,
/* For an X-macro list: a table slot typed by the function's own prototype. */
#define BRIG__DL_SLOT(name) __typeof__(&name) name;

/* Defines the fill callback fn, which stores fns[] into table in the order
 * of the X-macro list FUNCS. */
#define BRIG__DL_FILL_ONE(name) t_->name = (__typeof__(t_->name))fns[i_++];
#define BRIG__DL_DEFINE_FILL(fn, table, FUNCS)   \
	static void fn(void *const *fns)         \
	{                                        \
		__typeof__(table) *t_ = &(table); \
		size_t i_ = 0;                   \
		FUNCS(BRIG__DL_FILL_ONE)         \
	}

/* Opens d's library (RTLD_NOW | RTLD_LOCAL: its symbols stay out of the
 * global namespace) and resolves every name, the first time it is called for
 * d; later calls return the first one's result. The handle is kept until
 * exit, as the table points into it. Thread-safe; on success the table is
 * filled before this returns, in every thread.
 * Errors: code, with a message that names the library, the Debian package to
 * install and dlerror()'s reason (the library or one of its functions is
 * missing). */
int brig__dl_load(brig__dl *d, int code, brig_error **err) __attribute__((visibility("hidden")));

#endif
