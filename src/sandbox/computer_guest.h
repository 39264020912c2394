/* computer_guest.h — a computer's commands through its brig-init (one relay
 * per container and process, cached), for computer.c. */
#ifndef BRIG_SANDBOX_COMPUTER_GUEST_H
#define BRIG_SANDBOX_COMPUTER_GUEST_H

#include <jansson.h>

#include "brig/guest.h"
#include "brig/sandbox.h"
#include "sandbox/capture.h"

/* Runs opts->argv in container id over brig-init, env the finished exec
 * environment (array of "K=V"). A deadline or cancel ends the command's tree
 * inside the guest and leaves the computer running (BRIG_ETIMEDOUT /
 * BRIG_ECANCELED, exit 124 / 130, certain). A relay that breaks mid-command
 * is reopened once and brig-init asked what became of it (BRIG_EIO when it
 * answers: certain, output cut short). Only an unreachable brig-init stops
 * the container (BRIG_EUNCERTAIN). tty (may be NULL): its rows, cols,
 * resize_fd and size_cb give the command a terminal. Fills res. */
int brig_sandbox__guest_exec(brig_engine *e, const char *ref, const char *id, const brig_exec_opts *opts, json_t *env,
			     int64_t deadline, const brig_guest_exec_opts *tty, brig_output_tee *tee,
			     brig_exec_result *res, brig_error **err);

/* Opens (and caches) the relay into container id, for a warm pool member
 * whose first command should not pay for it. */
int brig_sandbox__guest_warm(brig_engine *e, const char *id, brig_error **err);

/* The relay cache, for tests: how many relays it holds, and its cap (0:
 * the default, 64); lowering the cap prunes at once. */
size_t brig_sandbox__guest_cache_size(void);
void brig_sandbox__guest_cache_cap(size_t cap);
/* Ends idle relays until at most keep are held (0: every idle one). */
void brig_sandbox__guest_cache_prune(size_t keep);

#endif
