/* procs.h — background processes of the computer for the MCP tools and the HTTP API: started
 * by one call, they outlive it; the others list, read, feed and kill them.
 * Errors as fs.h's (BRIG_ENOTFOUND: no such process). */
#ifndef BRIG_OPS_PROCS_H
#define BRIG_OPS_PROCS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/error.h"
#include "ops/ops.h"

/* Starts argv in workdir (NULL: /workspace) with env; *id (malloc'd) names it. */
int ops_proc_start(ops_target *c, const char *const *argv, const char *workdir, const char *const *env,
		   size_t env_count, char **id, brig_error **err);
/* [{"id","running","exit_code" (null while running),"command"}]. */
int ops_proc_list(ops_target *c, json_t **out, brig_error **err);
/* State plus up to max bytes of stdout and stderr from the offsets, with
 * the offsets to read on from. */
int ops_proc_read(ops_target *c, const char *id, uint64_t out_off, uint64_t err_off, size_t max, json_t **out,
		  brig_error **err);
/* Writes data to the process's stdin; close_input then closes it (EOF). */
int ops_proc_input(ops_target *c, const char *id, const char *data, size_t len, bool close_input, brig_error **err);
/* Sends sig ("TERM", "KILL", "INT", "HUP") to the process's group; id NULL:
 * to every background process of the computer. */
int ops_proc_kill(ops_target *c, const char *id, const char *sig, brig_error **err);

#endif
