/* egress_testutil.h — what test_egress.c and test_egress_secret.c share:
 * the one-per-host egress proxy check, the test directory and environment
 * the proxy inherits, the local upstream servers
 * (helpers/egress_upstream.py) and the teardown of all of it. */
#ifndef BRIG_TESTS_EGRESS_TESTUTIL_H
#define BRIG_TESTS_EGRESS_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "brig/engine.h"

typedef struct egress_test {
	char dir[256];        /* the test's own directory */
	char egress_dir[300]; /* BRIG_EGRESS_DIR (the proxy's) */
	char *ca;             /* the upstreams' CA, PEM */
	int https_port, http_port;
	pid_t upstream;     /* helpers/egress_upstream.py, or -1 */
	int upstream_stdin; /* its stdin (it ends when this closes), or -1 */
	bool skip;          /* another egress proxy serves: the test skips */
} egress_test;

#define EGRESS_TEST_INIT                             \
	{                                            \
		.upstream = -1, .upstream_stdin = -1 \
	}

/* Whether an egress proxy answers on the gateway (asked only where the
 * egress bridge is this machine's). */
bool egress_test_proxy_listening(void);

/* The file at path (NUL-terminated, at most cap bytes), or NULL. */
char *egress_test_slurp(const char *path, size_t cap);

/* When an egress proxy already serves, sets t->skip (who says so) and
 * returns 0. Else makes t->dir (tmp_tag), sets BRIG_EGRESS_DIR, writes
 * hosts (the proxy's name → address lines) to BRIG_EGRESS_HOSTS and points
 * BRIG_STORE at a SQLite file there (the ledger's store, which the proxy
 * inherits). Returns 0, or -1. */
int egress_test_prepare(egress_test *t, const char *who, const char *tmp_tag, const char *hosts);

/* Starts the upstream servers in t->dir and reads their ports and CA.
 * Returns 0, or -1 (who says why). */
int egress_test_upstreams(egress_test *t, const char *who);

/* Unless t->skip: removes the test's computers, the egress network, our
 * proxy (by its pid) and the upstreams, and t->dir. Then the engine. */
int egress_test_teardown(egress_test *t, brig_engine **e, const char *who);

/* Runs the brig program with args (after "brig"; at most 38); its exit
 * code, stdout and stderr together in *out (at most cap bytes; caller
 * frees). */
int egress_test_cli(char **out, const char *const *args, size_t cap);

#endif
