/* brig/run.h — disposable runs: one command in one fresh hardened container
 * with a deadline, inputs copied in read-only, outputs copied out, and
 * nothing left behind (the container ends itself at its deadline even when
 * brig is gone, and Docker removes it with its volumes). */
#ifndef BRIG_RUN_H
#define BRIG_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "brig/error.h"
#include "brig/sandbox.h"
#include "brig/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRIG_RUN_OPTS_VERSION 1
/* Starts a brig_run_opts with no stdin and no cancel fd; the caller still
 * sets spec and argv. */
#define BRIG_RUN_OPTS_INIT {.version = BRIG_RUN_OPTS_VERSION, .stdin_fd = -1, .cancel_fd = -1}
#define BRIG_RUN_DEFAULT_TIMEOUT_S 600

typedef struct brig_run_opts {
	unsigned version;          /* BRIG_RUN_OPTS_VERSION; 1..current accepted */
	const brig_spec *spec;     /* limits, image, network, env, labels (borrowed) */
	const char *const *argv;   /* NULL-terminated; no shell unless argv says sh -c */
	const char *const *inputs; /* host paths copied under /inbox, read-only; may be NULL */
	size_t input_count;
	const char *out_dir;       /* host directory that receives /outbox; NULL: no outputs.
				      Created when missing; an existing one is merged into
				      (its other files stay; same names are replaced) */
	int64_t out_mb;            /* size of /outbox; 0: BRIG_DEFAULT_OUT_MB */
	const char *workdir;       /* NULL: /workspace */
	int64_t timeout_s;         /* 0: BRIG_RUN_DEFAULT_TIMEOUT_S */
	int stdin_fd;              /* -1: none */
	int cancel_fd;             /* -1: none; readable → cancel (the run is removed) */
	brig_engine_output_cb on_output; /* live output (may be NULL) */
	void *payload;
	size_t capture_max;        /* per stream; 0: 1 MiB */
} brig_run_opts;

typedef struct brig_run_result {
	brig_exec_result exec;     /* exit code, timed_out, captured output */
	char *image_id;            /* the pinned image id the run used */
	char *container;           /* the run's container name */
	int64_t create_ms, copy_in_ms, run_ms, copy_out_ms, total_ms;
	char **outputs;            /* relative paths copied into out_dir */
	size_t output_count;
	uint64_t output_bytes;
	bool oom_killed;
} brig_run_result;

BRIG_PUBLIC void brig_run_result_clear(brig_run_result *r);
/* {"exit_code","timed_out","image_id","durations":{…},"stdout":…,
 *  "stderr":…,"outputs":[…],"output_bytes","oom_killed"} */
BRIG_PUBLIC json_t *brig_run_result_to_json(const brig_run_result *r);

/* Runs one command. The image tag is resolved to its id once, first; a
 * missing image is BRIG_ENOTFOUND with a message that says how to build it
 * (nothing is pulled). Returns 0 when the command ran to its end or timed
 * out (res->exec.timed_out, exit code 124); outputs are copied in both
 * cases. opts is required (NULL is BRIG_EINVAL: a run has no default spec
 * or command). Errors: BRIG_EINVAL (options; nothing created), BRIG_ENOTFOUND,
 * BRIG_ECANCELED, BRIG_EUNSAFE (an output broke a copy-out rule), BRIG_EUNCERTAIN.
 * The copy-out is all or nothing: /outbox is extracted into a temporary
 * directory beside out_dir and moved into place only when every entry
 * passed, so a refused or failed copy leaves out_dir exactly as it was and
 * writes nothing outside it. The container is removed
 * before this returns, whatever happened.
 * PID 1 is brig-init (when this build carries it; BRIG_GUEST=0 in the
 * environment: docker-init as before): the command is its child, a missing
 * program reads "brig: NAME: not found in the image" on stderr (127), and
 * the deadline is brig-init's, so the container ends itself even when brig
 * is gone. timed_out is set when the command was ended at its deadline; a
 * command that exits 124 by itself earlier is not timed out. */
BRIG_PUBLIC int brig_run(brig_engine *e, const brig_run_opts *opts, brig_run_result *res, brig_error **err);

#ifdef __cplusplus
}
#endif
#endif
