/* alive.h — the started marker of computers (alive.c): brig writes it when it
 * starts a computer it created; brig_computer_check_files() (brig/sandbox.h)
 * reads it. Private to libbrig. */
#ifndef BRIG_SANDBOX_ALIVE_H
#define BRIG_SANDBOX_ALIVE_H

#include "brig/sandbox.h"

/* Puts /runtime/.brig/started-<State.StartedAt> (root-owned, in a root-owned
 * directory) into the running computer ref. */
int brig_computer__mark_started(brig_engine *e, const char *ref, brig_error **err);

#endif
