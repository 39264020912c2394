/* exec.h — a computer's exec for callers that also want the computer it
 * ran in (the session layer's exec and audit): one inspect for both. */
#ifndef BRIG_SANDBOX_EXEC_H
#define BRIG_SANDBOX_EXEC_H

#include "brig/sandbox.h"

/* brig_computer_get and brig_computer_exec on one inspect: *out gets the
 * computer (the caller frees it with brig_computer_free) whenever ref named
 * one, even when the exec then failed; NULL otherwise. Errors as the two. */
int brig_computer__exec_get(brig_engine *e, brig_computer **out, const char *ref, const brig_exec_opts *opts,
			    brig_exec_result *res, brig_error **err);

#endif
