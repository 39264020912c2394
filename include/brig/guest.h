/* brig/guest.h — a handle on brig-init inside one computer: one relay (one
 * Engine API exec of `/.brig/brig-init relay`) held for the life of the
 * handle, and every command, signal and file operation over it as frames
 * (docs/guest-protocol.md). Thread-safe: any number of threads may run
 * calls on one handle at once; a reader thread hands each frame to the call
 * waiting for it.
 *
 * Everything brig-init says is untrusted (anything in the sandbox could
 * pretend to be it): frames are checked against their caps before anything
 * is allocated, fields against their shapes; a malformed frame ends the
 * handle with BRIG_EPROTO, and no call waits past its deadline (plus
 * BRIG_GUEST_GRACE_MS) for a guest that says nothing.
 *
 * The transport contract, per call:
 *   BRIG_ENOTSENT   the request never left brig (the handle was already
 *                   broken, or the relay could not be started): nothing ran.
 *   BRIG_EUNCERTAIN the request was sent and no complete answer came (the
 *                   relay broke, the guest fell silent past the deadline and
 *                   its grace, or said garbage: then the message says
 *                   BRIG_EPROTO's story). It may have taken effect.
 * Answers from brig-init map to: ENOENT BRIG_ENOTFOUND, EACCES/EPERM/EROFS
 * BRIG_EDENIED, EEXIST/ENOTEMPTY BRIG_ECONFLICT, ESRCH BRIG_ESTATE, other
 * errnos BRIG_EIO; its message (sanitized) is in the error.
 * A handle that broke stays broken: every later call returns BRIG_ENOTSENT;
 * open a new one (brig_guest_alive says which).
 */
#ifndef BRIG_GUEST_H
#define BRIG_GUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "brig/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How long past a caller's deadline brig still waits for the guest's own
 * answer (its deadline fires first; this covers ending the tree). */
#define BRIG_GUEST_GRACE_MS 3000

typedef struct brig_guest brig_guest;

/* Starts the relay in running container id (an exec of `/.brig/brig-init
 * relay` as uid 1000) and exchanges HELLO, all before deadline_ms
 * (monotonic; 0: 30 s). e is borrowed and must outlive the handle.
 * Errors: the engine's (BRIG_ENOTFOUND, BRIG_ECONFLICT: not running),
 * BRIG_ETIMEDOUT (no HELLO_OK in time), BRIG_EPROTO (garbage, or a version
 * brig does not speak), BRIG_EUNCERTAIN (the relay ended). */
BRIG_PUBLIC int brig_guest_open(brig_guest **out, brig_engine *e, const char *id, int64_t deadline_ms,
				brig_error **err);
/* Ends the relay (brig-init then ends every non-detached command started
 * over it) and frees the handle. Accepts NULL. */
BRIG_PUBLIC void brig_guest_free(brig_guest *g);
/* False once the relay broke or the guest said something malformed. */
BRIG_PUBLIC bool brig_guest_alive(brig_guest *g);
/* brig-init's BOOT_ID (new at every start of the container). Borrowed. */
BRIG_PUBLIC const char *brig_guest_boot_id(const brig_guest *g);

#define BRIG_GUEST_EXEC_OPTS_VERSION 1

typedef struct brig_guest_exec_opts {
	unsigned version;        /* BRIG_GUEST_EXEC_OPTS_VERSION */
	const char *const *argv; /* NULL-terminated; no shell */
	const char *const *env;  /* "KEY=VALUE", added to the container's; may be NULL */
	size_t env_count;
	const char *cwd; /* NULL: /workspace */
	int stdin_fd;    /* -1: none (then stdin_data, else /dev/null) */
	const char *stdin_data;
	size_t stdin_len;
	int64_t deadline_ms;             /* monotonic; 0: none. The guest's deadline: exit 124 */
	int cancel_fd;                   /* -1: none; readable → the tree is killed: exit 130 */
	brig_engine_output_cb on_output; /* stdout/stderr as they come; may be NULL */
	void *payload;
	bool detached;   /* brig_guest_start: outlives the handle */
	size_t keep;     /* detached: output bytes kept in the guest; 0: 1 MiB */
	const char *tag; /* NULL: a random one; names the proc before it has an id */
	/* A pseudo-terminal of rows x cols (1..1000 each; 0: none): stdin,
	 * stdout and stderr are the terminal, output comes as stdout. */
	int rows, cols;
	/* With size_cb: resize_fd readable (bytes are read and dropped, e.g. a
	 * SIGWINCH self-pipe) → size_cb gives the new size, sent as RESIZE. */
	int resize_fd;
	void (*size_cb)(int *rows, int *cols, void *size_payload);
	void *size_payload;
} brig_guest_exec_opts;

/* How a command ended, as brig-init saw it (certain). */
typedef struct brig_guest_exit {
	int code;       /* exit code; 128+n for signal n; 124 timed out; 130 cancelled */
	int signal;     /* the signal that ended it, 0: none */
	bool timed_out; /* the deadline ended the tree */
	bool canceled;  /* cancel_fd ended the tree */
	bool killed;    /* ended by KILL, its connection, or brig-init stopping */
	int64_t proc;   /* brig-init's id of the command */
	uint64_t dropped;
} brig_guest_exit;

/* Runs a command to its end: streams its output to on_output, feeds stdin,
 * and on the deadline or a cancel has brig-init end the command's whole
 * tree (setsid'd and double-forked descendants too) and waits for that
 * (certain). stdin goes out only while the relay has room for it (and,
 * with a brig-init that does flow control, within the call's stdin window),
 * so a command that reads none of it still meets its deadline and a cancel.
 * With such a brig-init, output is credited back as on_output returns: a
 * slow on_output slows the command (it blocks in write), other calls on the
 * handle go on, and brig holds about one window (4 MiB) for the call.
 * Returns 0 with *out filled when the guest said how it ended —
 * timed out and cancelled included. Errors: BRIG_EINVAL, BRIG_ENOTFOUND /
 * BRIG_EDENIED (the program cannot be found / executed: nothing ran; 127 /
 * 126 in out->code), BRIG_ENOTSENT, BRIG_EUNCERTAIN (see above: the command
 * may run on), on_output's non-zero code (the tree is killed first). */
BRIG_PUBLIC int brig_guest_exec(brig_guest *g, const brig_guest_exec_opts *opts, brig_guest_exit *out,
				brig_error **err);
/* Starts a detached command (opts->detached is implied; output kept in the
 * guest, see ATTACH) and returns its proc id. Errors as brig_guest_exec's
 * start. */
BRIG_PUBLIC int brig_guest_start(brig_guest *g, const brig_guest_exec_opts *opts, int64_t *proc, brig_error **err);
/* Lists brig-init's commands, running and recently ended, as a JSON array of
 * {"id","pid","tag","argv","state","detached","started_ms","ended_ms",
 *  "exit_code","signal","timed_out","killed"}. Caller owns *out. */
BRIG_PUBLIC int brig_guest_ps(brig_guest *g, json_t **out, int64_t deadline_ms, brig_error **err);
/* One command's state: {"id","state"} plus the exit fields once exited.
 * proc 0: look it up by tag. BRIG_ENOTFOUND: never known or forgotten. */
BRIG_PUBLIC int brig_guest_status(brig_guest *g, json_t **out, int64_t proc, const char *tag, int64_t deadline_ms,
				  brig_error **err);
/* Ends the command's whole tree and returns once it is gone (certain);
 * *out (may be NULL) gets its exit. An ended command: its exit. */
BRIG_PUBLIC int brig_guest_kill(brig_guest *g, int64_t proc, brig_guest_exit *out, int64_t deadline_ms,
				brig_error **err);
/* Sends one signal to the command's process group. BRIG_ESTATE: it ended. */
BRIG_PUBLIC int brig_guest_signal(brig_guest *g, int64_t proc, int signal, int64_t deadline_ms, brig_error **err);
/* Re-attaches to a command: its kept output, then live output to
 * opts->on_output (stdin from opts->stdin_fd / stdin_data when given) until
 * it ends; deadline and cancel end only the attachment, not the command
 * (then BRIG_ETIMEDOUT / BRIG_ECANCELED). opts->argv is ignored. */
BRIG_PUBLIC int brig_guest_attach(brig_guest *g, int64_t proc, const brig_guest_exec_opts *opts, brig_guest_exit *out,
				  brig_error **err);

/* ---- files: absolute paths, brig-init's permissions (uid 1000) ---- */

/* {"type","mode","size","mtime_ns","uid","gid"[,"link"]}; nofollow: the link itself. */
BRIG_PUBLIC int brig_guest_stat(brig_guest *g, json_t **out, const char *path, bool nofollow, int64_t deadline_ms,
				brig_error **err);
/* An array of {"name", …stat fields}; depth 1: the directory's entries. At
 * most 100 000 entries (BRIG_ETOOBIG past that). */
BRIG_PUBLIC int brig_guest_list(brig_guest *g, json_t **out, const char *path, int depth, int64_t deadline_ms,
				brig_error **err);
/* Reads length bytes (-1: to the end) from offset into cb, chunk by chunk;
 * at most max bytes are accepted from the guest (BRIG_ETOOBIG). */
BRIG_PUBLIC int brig_guest_read(brig_guest *g, const char *path, int64_t offset, int64_t length, brig_engine_data_cb cb,
				void *payload, int64_t deadline_ms, brig_error **err);
/* Writes a file from fd (until EOF; -1: data/len instead), mode & 07777,
 * parents: make missing directories. Readers never see half a file. */
BRIG_PUBLIC int brig_guest_write(brig_guest *g, const char *path, int fd, const void *data, size_t len, unsigned mode,
				 bool parents, int64_t deadline_ms, brig_error **err);
BRIG_PUBLIC int brig_guest_mkdir(brig_guest *g, const char *path, unsigned mode, bool parents, int64_t deadline_ms,
				 brig_error **err);
BRIG_PUBLIC int brig_guest_remove(brig_guest *g, const char *path, bool recursive, int64_t deadline_ms,
				  brig_error **err);
BRIG_PUBLIC int brig_guest_rename(brig_guest *g, const char *from, const char *to, int64_t deadline_ms,
				  brig_error **err);
/* Makes path a symlink to target (1..4095 bytes, stored as given, never
 * resolved by brig-init), with brig-init's own permissions (uid 1000).
 * Errors: BRIG_EINVAL, BRIG_EDENIED, BRIG_ENOTFOUND (no parent),
 * BRIG_ECONFLICT (path exists), BRIG_EIO (e.g. ENOSYS: a brig-init older
 * than this call), and the relay's (BRIG_EUNCERTAIN…). */
BRIG_PUBLIC int brig_guest_symlink(brig_guest *g, const char *path, const char *target, int64_t deadline_ms,
				   brig_error **err);

#ifdef __cplusplus
}
#endif

#endif
