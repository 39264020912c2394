/* internal.h — the sandbox layer's private helpers around the daemon (host
 * limits, image resolution, secret padding, time, stop-now, not-found exit
 * codes), shared by computer.c, run.c and gc.c. Implemented in daemon.c. */
#ifndef BRIG_SANDBOX_INTERNAL_H
#define BRIG_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "tar/tar.h"
#include "util/util.h"

/* The tar of a run's --in paths as /inbox gets them: each under its base
 * name, 0:0, read-only (0555 masked), special files skipped; checked first
 * as brig_run checks them (BRIG_EINVAL naming the path). Shared by brig_run
 * and the CLI's run through a brig server. *out belongs to the caller
 * (brig_tar_builder_free). */
int brig_sandbox__inputs_tar(brig_tar_builder **out, const char *const *inputs, size_t n, brig_error **err);

/* The container-level part of ending a command that Docker cannot kill:
 * stop the container right away. Returns 0 or the stop's error. */
int brig_sandbox__stop_now(brig_engine *e, const char *id, brig_error **err);
/* stop_now, after opts->before_stop (version 2; may be NULL) had its say. */
int brig_sandbox__stop_after(brig_engine *e, const char *id, const brig_exec_opts *opts, brig_error **err);

/* Docker reports an exec whose program does not exist as 126; the shell
 * convention (and docker run's) is 127. Fixes res->exit_code from the
 * daemon's message in the captured stderr. */
void brig_sandbox__fix_not_found(brig_exec_result *res);

/* Memory and CPUs of the daemon's host: read from this kernel when the
 * daemon is local (no round trip: /info forks runc on every call), from
 * /info otherwise. */
int brig_sandbox__host_limits(brig_engine *e, brig_host_limits *out, brig_error **err);

/* A dockerd run with --debug logs JSON request bodies of up to 4 KiB,
 * masking only a few key names: an exec body that carries a credential is
 * padded past that size (the daemon ignores the unknown field). */
void brig_sandbox__pad_secret_body(json_t *exec_config);

/* Resolves an image reference to its id (out may be NULL: only check it
 * exists). *etc_hosts (may be NULL) says whether the image carries
 * BRIG_LABEL_ETC_HOSTS=optional, so a container with network none can do
 * without Docker's network sandbox. A missing image is BRIG_ENOTFOUND saying
 * how to build it: brig never pulls. */
int brig_sandbox__resolve_image(brig_engine *e, char **out, bool *etc_hosts, const char *image, brig_error **err);

/* Checks that the daemon registers runtime (GET /info Runtimes) before a
 * container asks for it; NULL (the daemon's default) is not looked up. An
 * unknown one is BRIG_EINVAL naming the fix (scripts/bootstrap, or
 * daemon.json and SIGHUP). *gvisor (may be NULL) says whether the runtime
 * is gVisor: its program is called runsc (or its runtimeType names it). */
int brig_sandbox__check_runtime(brig_engine *e, const char *runtime, bool *gvisor, brig_error **err);

/* Parses Docker's RFC 3339 timestamps to unix seconds (0 when unparsable). */
int64_t brig_sandbox__parse_time(const char *s);

/* Records that a sandbox was created on a daemon with shift sh: one with
 * none makes brig_userns_warning_due() true once. */
void brig_sandbox__note_shift(const brig_idshift *sh);

/* ---- brig's own networks (network.c): the isolated bridge and egress ---- */

/* Networks whose Name is exactly name (the daemon's filter matches
 * substrings). *out: a new array reference. Errors: the engine's. */
int brig_network__list_exact(brig_engine *e, json_t **out, const char *name, brig_error **err);
/* True when net carries brig's managed label. */
bool brig_network__is_brigs(json_t *net);
/* Creates network name from body when none exists, race-safe (a racer's
 * network shows in listings only once made: looks again, creating again,
 * for up to 10 s), then settles on the lowest id of brig's (the others
 * removed) and refuses one brig did not make. *keep gets the survivor (a
 * new reference). subnet and advice only word the error when it cannot be
 * made. Errors: BRIG_EDAEMON, BRIG_ECONFLICT, BRIG_EPROTO, the engine's. */
int brig_network__ensure_named(brig_engine *e, json_t **keep, const char *name, json_t *body, const char *subnet,
			       const char *advice, brig_error **err);

#endif
