/* brig/sandbox.h — computers: the long-lived, locked-down container of one
 * agent session (create-or-adopt, exec with a deadline, pause/resume, stop,
 * destroy), the isolated bridge, and garbage collection of brig's leftovers.
 *
 * Rules every call here keeps:
 *  - Creation is idempotent: the container name is derived from the identity
 *    (brig/spec.h), so racing creators and lost answers land on one container.
 *  - Commands never retry on their own. In a computer whose PID 1 is
 *    brig-init (label brig.init; every computer this brig creates when it
 *    carries brig-init), a timeout or a cancel ends the command's whole tree
 *    inside the guest and the call returns BRIG_ETIMEDOUT or BRIG_ECANCELED
 *    (exit 124 / 130): certain, and the computer keeps running with its
 *    files. A relay that breaks mid-command is reopened once and brig-init
 *    asked what became of it (BRIG_EIO: it ended, output may be cut short).
 *    Only when brig-init cannot be reached (no relay, garbage, or silence
 *    past the deadline and its grace) is the container stopped and
 *    BRIG_EUNCERTAIN returned. Computers created before brig-init keep the
 *    old rule: a timeout, a cancel or an uncertain transport result stops
 *    the container (Docker cannot kill an exec). Either way the message
 *    says when recovery goes through a checkpoint.
 *  - Credentials are delivered with each exec, never stored in the
 *    container's configuration.
 * Objects returned through `**out` belong to the caller and are freed with
 * their brig_*_free() (which accepts NULL). Every call can also return the
 * engine's transport and daemon codes (brig/engine.h).
 */
#ifndef BRIG_SANDBOX_H
#define BRIG_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "brig/error.h"
#include "brig/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A computer as Docker reports it. */
typedef struct brig_computer {
	char *name;         /* "brig-<64 hex>" */
	char *id;           /* container id */
	char *ns, *agent, *session;
	uint32_t generation;
	char *state;        /* Docker's State.Status: running, paused, exited, created… */
	char *image;        /* image reference the container was created from */
	char *image_id;     /* sha256:… */
	char *spec_hash;
	char *harness;      /* claude | codex | none */
	char *network;      /* none | isolated */
	int64_t created;    /* unix seconds */
	bool adopted;       /* create found it already there */
	json_t *spec;       /* effective spec (brig_spec_to_json) when known, else NULL */
	/* Published ports as the daemon holds them (HostConfig.PortBindings):
	 * filled by brig_computer_get and _create; empty in a listing, whose
	 * spec's "publish" says what was asked. */
	brig_port *ports;
	size_t port_count;
} brig_computer;

/* True once per process, after this process created a computer or a run on
 * a Docker daemon that does not remap user namespaces (as far as brig
 * learned it without an extra call): sandbox uid 1000 is then host uid 1000,
 * and the host account with that uid can read and trace sandboxed
 * processes. brig's CLI warns then; `brig doctor` says how to fix it. */
BRIG_PUBLIC bool brig_userns_warning_due(void);

BRIG_PUBLIC void brig_computer_free(brig_computer *c);
BRIG_PUBLIC void brig_computer_free_array(brig_computer **cs, size_t n);
/* {"name","id","ns","agent","session","generation","state","image",
 *  "image_id","spec_hash","harness","network","created","adopted","spec",
 *  "ports":[{"host_ip":"127.0.0.1","host_port":8080,"port":80,
 *            "protocol":"tcp"},…]} */
BRIG_PUBLIC json_t *brig_computer_to_json(const brig_computer *c);

/* Creates and starts the computer of id with spec, or adopts the one that
 * already exists under its name when its labels carry the same identity and
 * spec hash (starting it when it is stopped). The spec is validated against
 * the daemon's memory and CPUs first. With isolated networking the bridge is
 * ensured first. Errors: BRIG_EINVAL (identity or spec; nothing created),
 * BRIG_ECONFLICT (a container of that name is not this computer: the
 * message names the difference), BRIG_ENOTFOUND (image missing: the message
 * says how to build it). */
BRIG_PUBLIC int brig_computer_create(brig_engine *e, brig_computer **out, const brig_identity *id,
				     const brig_spec *spec, brig_error **err);

/* Finds a computer by container name or id, or by identity when ref is NULL
 * and id is given. Errors: BRIG_ENOTFOUND (absent, or not a brig computer). */
BRIG_PUBLIC int brig_computer_get(brig_engine *e, brig_computer **out, const char *ref, const brig_identity *id,
				  brig_error **err);

/* Lists brig computers; ns may be NULL for all. extra_label ("k=v", may be
 * NULL) narrows further. */
BRIG_PUBLIC int brig_computer_list(brig_engine *e, brig_computer ***out, size_t *n, const char *ns,
				   const char *extra_label, brig_error **err);

/* Freezes (cgroup freezer) / thaws a computer. Memory, processes and files
 * are kept. Pausing a paused computer and resuming a running one succeed.
 * Errors: BRIG_ENOTFOUND, BRIG_ESTATE (not running). */
BRIG_PUBLIC int brig_computer_pause(brig_engine *e, const char *ref, brig_error **err);
BRIG_PUBLIC int brig_computer_resume(brig_engine *e, const char *ref, brig_error **err);

/* Stops a computer (its tmpfs volumes lose their contents: checkpoint first).
 * Stopping a stopped computer succeeds. */
BRIG_PUBLIC int brig_computer_stop(brig_engine *e, const char *ref, brig_error **err);

/* Removes the container and its volumes. Idempotent: an absent computer is
 * success. */
BRIG_PUBLIC int brig_computer_destroy(brig_engine *e, const char *ref, brig_error **err);

/* Whether computer ref still holds the files brig gave it. *lost is false
 * when the container runs (or is paused) since brig created and started it;
 * true when it is gone, stopped, or was started again since (its tmpfs
 * volumes were emptied): *why (malloc'd, else NULL) then says which
 * ("was removed", "was stopped (it is exited)", "was restarted …"). brig
 * knows a start of its own by a root-owned marker it puts into /runtime
 * when it starts a computer it created: a computer created by a brig older
 * than this one counts as restarted. Errors: the engine's. */
BRIG_PUBLIC int brig_computer_check_files(brig_engine *e, const char *ref, bool *lost, char **why, brig_error **err);

/* ---- exec ---- */

#define BRIG_EXEC_OPTS_VERSION 2

/* What to run and how. Start from BRIG_EXEC_OPTS_INIT (no stdin, no
 * cancel fd) and set argv. There is no default command, so a NULL opts is
 * refused. version: 1..BRIG_EXEC_OPTS_VERSION. */
typedef struct brig_exec_opts {
	unsigned version;          /* BRIG_EXEC_OPTS_VERSION */
	const char *const *argv;   /* NULL-terminated; run without a shell */
	const char *const *env;    /* "KEY=VALUE" entries, may be NULL */
	size_t env_count;
	const char *workdir;       /* NULL: /workspace */
	int stdin_fd;              /* -1: none */
	const char *stdin_data;    /* alternative to stdin_fd */
	size_t stdin_len;
	int64_t timeout_ms;        /* 0: no deadline */
	int cancel_fd;             /* -1: none; readable → cancel */
	brig_engine_output_cb on_output; /* live output (may be NULL) */
	void *payload;
	size_t capture_max; /* bytes kept per stream (head + tail); 0: 1 MiB */
	/* Version 2. Called just before brig stops the computer because only a
	 * stop can end the command (its end is uncertain, or it timed out or
	 * was cancelled where brig-init could not end it), with the container's
	 * id; the daemon may not answer. It must not stop the computer itself
	 * (brig_session_exec takes a checkpoint here). NULL: none. */
	void (*before_stop)(brig_engine *e, const char *container_id, void *stop_payload);
	void *stop_payload;
} brig_exec_opts;

#define BRIG_EXEC_OPTS_INIT                                                        \
	{                                                                          \
		.version = BRIG_EXEC_OPTS_VERSION, .stdin_fd = -1, .cancel_fd = -1 \
	}

/* Captured output of one stream: the first and the last capture_max/2 bytes
 * when the output was larger, joined; dropped says how many bytes in
 * between are missing. */
typedef struct brig_capture {
	char *data; /* NUL-terminated (binary-safe via len) */
	size_t len;
	uint64_t total;
	uint64_t dropped;
} brig_capture;

typedef struct brig_exec_result {
	int exit_code;      /* the command's; 124 timed out; 126 cannot invoke; 127 not found; -1 unknown */
	bool timed_out;
	bool canceled;
	bool uncertain;
	bool container_stopped; /* brig stopped the computer to end the command */
	int64_t duration_ms;
	brig_capture out, err;
	/* brig_session_exec_keep, when it had to stop the computer: the checkpoint
	 * it took just before (0: none), and whether it tried and failed. */
	int64_t stop_checkpoint_id;
	bool stop_checkpoint_failed;
} brig_exec_result;

BRIG_PUBLIC void brig_exec_result_clear(brig_exec_result *r);
/* {"exit_code","timed_out","canceled","uncertain","container_stopped",
 *  "duration_ms","stdout":{"text","bytes","dropped"},"stderr":{…}} */
BRIG_PUBLIC json_t *brig_exec_result_to_json(const brig_exec_result *r);

/* Runs argv in the computer ref as its user (uid 1000), with HOME, the
 * computer's env, opts->env and the harness's credentials forwarded from
 * brig's environment when opts->env leaves them out. Fills *res (always,
 * even on error). Returns 0 when the command ran to its end (whatever its
 * exit code). Errors: BRIG_ESTATE (computer paused or not running: brig's
 * own message, nothing run), BRIG_ETIMEDOUT / BRIG_ECANCELED (with
 * brig-init: the command's tree was ended, the computer runs on; without:
 * the container was stopped), BRIG_EUNCERTAIN (the container was stopped;
 * recover from a checkpoint), BRIG_EIO (brig-init only: the relay broke,
 * brig-init says the command ended),
 * BRIG_EINVAL (opts NULL or of an unknown version, argv empty, env invalid —
 * the message names the key only). */
BRIG_PUBLIC int brig_computer_exec(brig_engine *e, const char *ref, const brig_exec_opts *opts,
				   brig_exec_result *res, brig_error **err);

/* ---- brig-init: background processes and the handle ---- */

typedef struct brig_guest brig_guest; /* brig/guest.h */

/* Starts argv detached in computer ref (which runs brig-init): it outlives
 * this process; its output is kept in the guest (opts->capture_max bytes,
 * head and tail; 0: 1 MiB) for brig_guest_attach. stdin, timeout and cancel
 * are ignored. *proc gets brig-init's id of it. Errors: BRIG_ESTATE (not
 * running, or created before brig-init), BRIG_EINVAL, BRIG_ENOTFOUND (no
 * such computer, or the program is not in the image), brig/guest.h's. */
BRIG_PUBLIC int brig_computer_start(brig_engine *e, const char *ref, const brig_exec_opts *opts, int64_t *proc,
				    brig_error **err);
/* brig_computer_exec with a pseudo-terminal of rows x cols (1..1000) for
 * the command (stdin, stdout and stderr are the terminal; output comes as
 * stdout): computers with brig-init only (BRIG_ESTATE otherwise). With
 * size_cb, resize_fd readable (e.g. a SIGWINCH self-pipe; its bytes are
 * read and dropped) → size_cb gives the new size, sent to the terminal.
 * Not audited in the session store (brig_session_exec_tty is). Errors: as
 * brig_computer_exec. */
BRIG_PUBLIC int brig_computer_exec_tty(brig_engine *e, const char *ref, const brig_exec_opts *opts, int rows,
				       int cols, int resize_fd, void (*size_cb)(int *rows, int *cols, void *payload),
				       void *size_payload, brig_exec_result *res, brig_error **err);
/* Opens a handle on computer ref's brig-init (brig/guest.h), freed with
 * brig_guest_free. Errors: as brig_computer_start's, brig_guest_open's. */
BRIG_PUBLIC int brig_computer_guest(brig_engine *e, brig_guest **out, const char *ref, brig_error **err);

/* ---- the isolated bridge ---- */

/* Ensures the one "brig-sandbox" bridge exists (icc off, subnet from spec,
 * brig's labels); safe when several processes race: when Docker ends up with
 * two networks of that name, the one with the lowest id survives and the
 * others are removed. *out_id (may be NULL) gets the surviving id.
 * It also installs (idempotently, on every call) the host firewall rules of
 * the bridge, tagged with the comment "brig-sandbox": from brig0 the host
 * accepts only replies on INPUT, FORWARD drops 169.254.0.0/16 and lets
 * through connections Docker DNATs to published ports, and the subnet is
 * masqueraded to the internet. This needs root and iptables on the
 * daemon's machine; BRIG_FIREWALL=off in the environment skips it (the
 * sandboxes can then reach the host's services).
 * Errors: BRIG_ECONFLICT (a network of that name exists that is not brig's,
 * or has another subnet), BRIG_EDENIED (the firewall could not be
 * installed: no iptables, not root, or a daemon on another machine). */
BRIG_PUBLIC int brig_network_ensure(brig_engine *e, char **out_id, const brig_spec *spec, brig_error **err);

/* Removes the bridge once nothing is attached (absent: success), then its
 * firewall rules (those tagged "brig-sandbox"), unless another brig has
 * created the bridge again meanwhile.
 * Errors: BRIG_EBUSY naming the attached containers, BRIG_EDENIED
 * (iptables refused to delete a rule). */
BRIG_PUBLIC int brig_network_remove(brig_engine *e, brig_error **err);

/* ---- garbage collection ---- */

#define BRIG_GC_OPTS_VERSION 1

/* Start from BRIG_GC_OPTS_INIT; a NULL opts means all defaults.
 * version: 1..BRIG_GC_OPTS_VERSION. */
typedef struct brig_gc_opts {
	unsigned version;       /* BRIG_GC_OPTS_VERSION */
	bool dry_run;           /* report, remove nothing */
	int64_t retention_s;    /* stopped computers older than this go; 0: 24 h; <0: never */
	const char *extra_label; /* only objects that also carry this "k=v" (tests) */
	/* Called per object removed (or that would be, with dry_run):
	 * kind is "container", "volume"; why says which rule. */
	void (*report)(const char *kind, const char *name, const char *why, void *payload);
	void *payload;
} brig_gc_opts;

#define BRIG_GC_OPTS_INIT                       \
	{                                       \
		.version = BRIG_GC_OPTS_VERSION \
	}

/* Removes brig's leftovers: runs past their deadline (their brig died),
 * stopped computers past the retention age, containers in "created" state
 * older than a minute (a creator died), volumes labelled as brig's
 * whose container is gone, and brig-init volumes (brig.kind=init, named
 * brig-init-<16 hex>, and their "-ok" markers) of other brig builds that no
 * container mounts, 10 s
 * after their creation (this build's own volume always stays). Nothing
 * without brig.managed=1 is touched.
 * *removed (may be NULL) gets the count. Errors: BRIG_EINVAL (opts of an
 * unknown version). */
BRIG_PUBLIC int brig_gc(brig_engine *e, const brig_gc_opts *opts, size_t *removed, brig_error **err);

#ifdef __cplusplus
}
#endif
#endif
