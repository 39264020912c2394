/* alive.h — the started marker of computers (alive.c): brig writes it when it
 * starts a computer it created; brig_computer_check_files() (brig/sandbox.h)
 * reads it. Private to libbrig. */
#ifndef BRIG_SANDBOX_ALIVE_H
#define BRIG_SANDBOX_ALIVE_H

#include "brig/sandbox.h"

/* Puts /runtime/.brig/started-<State.StartedAt> (root-owned, in a root-owned
 * directory) into the running computer ref. */
int brig_computer__mark_started(brig_engine *e, const char *ref, brig_error **err);

/* Puts the spec's env entries (credentials left out) into computer ref's
 * BRIG_GP_ENV_FILE (guest/proto.h) — the user's, 0400, in the root-owned
 * /runtime/.brig — where brig-init reads them for every command: their
 * values stay out of the container's configuration. Nothing for a computer
 * without brig-init (its entries are in Config.Env) or without entries.
 * The values never appear in a message. */
int brig_computer__put_env(brig_engine *e, const char *ref, const brig_spec *spec, brig_error **err);

/* Puts brig's certificate authority (ca) and the bundle that adds it to
 * the system's (bundle) into container id's /runtime/.brig as ca.pem and
 * ca-bundle.pem, root-owned 0444 (brig/egress.h names the paths). */
int brig_computer__put_trust(brig_engine *e, const char *id, const char *ca, size_t ca_len, const char *bundle,
			     size_t bundle_len, brig_error **err);

#endif
