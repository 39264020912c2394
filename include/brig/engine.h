/* brig/engine.h — a Docker Engine API (v1.41, negotiated down) client:
 * containers, exec, archive, volumes, networks, images and events.
 *
 * Every call takes an explicit brig_error **err (may be NULL). Transport
 * failures are classified exactly:
 *   BRIG_ENOTSENT   nothing reached the daemon — safe to retry;
 *   BRIG_EUNCERTAIN the request was written but no complete answer came — it
 *                   may have taken effect; look before acting again.
 * Daemon answers map to: 400 BRIG_EBADREQ, 401/403 BRIG_EDENIED,
 * 404 BRIG_ENOTFOUND, 409 BRIG_ECONFLICT, 5xx BRIG_EDAEMON; a malformed answer
 * is BRIG_EPROTO (the request may have taken effect, as with EUNCERTAIN),
 * an oversized one BRIG_ETOOBIG. Every call below can return
 * those; additional codes are listed per call.
 *
 * JSON objects returned through `json_t **out` belong to the caller
 * (json_decref). Strings through `char **out` are freed with free().
 */
#ifndef BRIG_ENGINE_H
#define BRIG_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "brig/common.h"
#include "brig/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRIG_ENGINE_API_VERSION "1.41"
#define BRIG_ENGINE_OPTS_VERSION 1

typedef struct brig_engine brig_engine;

/* How to reach the daemon. Start from BRIG_ENGINE_OPTS_INIT; a NULL opts
 * means all defaults. version: 1..BRIG_ENGINE_OPTS_VERSION. */
typedef struct brig_engine_opts {
	unsigned version;       /* BRIG_ENGINE_OPTS_VERSION */
	const char *host;       /* DOCKER_HOST form; NULL: $DOCKER_HOST, then unix:///var/run/docker.sock */
	int tls_verify;         /* -1: from $DOCKER_TLS_VERIFY */
	const char *cert_path;  /* NULL: $DOCKER_CERT_PATH, then ~/.docker */
	unsigned timeout_ms;    /* per-call deadline for ordinary calls; 0: 60000 */
	size_t max_json_bytes;  /* cap on a JSON answer; 0: 8 MiB */
	bool skip_negotiation;  /* do not ping at open; use 1.41 */
} brig_engine_opts;

#define BRIG_ENGINE_OPTS_INIT                                         \
	{                                                             \
		.version = BRIG_ENGINE_OPTS_VERSION, .tls_verify = -1 \
	}

/* Opens a client and negotiates the API version with /_ping (the lower of
 * 1.41 and the daemon's Api-Version). Thread-safe: connections are pooled.
 * opts is borrowed; NULL: BRIG_ENGINE_OPTS_INIT.
 * Errors: BRIG_EINVAL (bad host, opts->version unknown), BRIG_ENOTSENT (no
 * daemon; the message says how to start one), BRIG_ETLS. */
BRIG_PUBLIC int brig_engine_open(brig_engine **out, const brig_engine_opts *opts, brig_error **err);
BRIG_PUBLIC void brig_engine_free(brig_engine *e);
/* The negotiated API version ("1.41"). Borrowed. */
BRIG_PUBLIC const char *brig_engine_api_version(const brig_engine *e);

/* True when the daemon is reached through a unix socket, i.e. it runs on
 * this machine's kernel. */
BRIG_PUBLIC bool brig_engine_is_local(const brig_engine *e);

/* ---- system ---- */
BRIG_PUBLIC int brig_engine_ping(brig_engine *e, brig_error **err);
BRIG_PUBLIC int brig_engine_version(brig_engine *e, json_t **out, brig_error **err);
BRIG_PUBLIC int brig_engine_info(brig_engine *e, json_t **out, brig_error **err);
/* The host uid and gid that uid 0 inside a container is on a daemon run with
 * userns-remap (read from /info: SecurityOptions name=userns and the
 * "/UID.GID" suffix of DockerRootDir); 0 and 0 when the daemon does not remap.
 * The daemon's archive API reports owners as host ids on a remapped daemon.
 * Errors: those of brig_engine_info, BRIG_EPROTO when the answer is not
 * understood. */
BRIG_PUBLIC int brig_engine_userns_root(brig_engine *e, uint32_t *uid, uint32_t *gid, brig_error **err);

/* Streams daemon events. filters is a Docker filters object (may be NULL);
 * since/until are unix seconds (0 = unset). cb gets each event (borrowed);
 * returning non-zero stops the stream and that value is returned. Without
 * `until` the stream ends at deadline_ms with 0 (monotonic ms, 0 = none). */
typedef int (*brig_engine_event_cb)(json_t *event, void *payload);
BRIG_PUBLIC int brig_engine_events(brig_engine *e, int64_t since, int64_t until, json_t *filters,
				   int64_t deadline_ms, brig_engine_event_cb cb, void *payload, brig_error **err);

/* ---- containers ---- */
/* Creates a container named name (may be NULL) from config (the Docker create
 * body, borrowed). *out_id receives the id. 409 name in use: BRIG_ECONFLICT
 * (the error message is the daemon's). */
BRIG_PUBLIC int brig_engine_container_create(brig_engine *e, char **out_id, const char *name, json_t *config,
					     brig_error **err);
BRIG_PUBLIC int brig_engine_container_inspect(brig_engine *e, json_t **out, const char *id, brig_error **err);
/* filters: Docker filters object, e.g. {"label":["brig.test=1"]}; may be NULL. */
BRIG_PUBLIC int brig_engine_container_list(brig_engine *e, json_t **out, bool all, json_t *filters,
					   brig_error **err);
BRIG_PUBLIC int brig_engine_container_start(brig_engine *e, const char *id, brig_error **err);
/* timeout_s < 0: daemon default. Already stopped is success. */
BRIG_PUBLIC int brig_engine_container_stop(brig_engine *e, const char *id, int timeout_s, brig_error **err);
BRIG_PUBLIC int brig_engine_container_kill(brig_engine *e, const char *id, const char *signal, brig_error **err);
/* Waits for condition ("not-running", "next-exit", "removed"; NULL = default)
 * until deadline_ms; *exit_code gets StatusCode. Errors: BRIG_ETIMEDOUT. */
BRIG_PUBLIC int brig_engine_container_wait(brig_engine *e, const char *id, const char *condition,
					   int64_t deadline_ms, int64_t *exit_code, brig_error **err);
/* The same wait in two steps. _begin sends it and returns once the daemon
 * has registered it (its answer's headers are read), so begun before a start
 * it cannot miss the exit, and with "removed" an AutoRemove container's exit
 * code outlives the container. Errors: as any call (BRIG_ENOTFOUND: no such
 * container). *out is freed with brig_engine_waiter_free. */
typedef struct brig_engine_waiter brig_engine_waiter;
BRIG_PUBLIC int brig_engine_container_wait_begin(brig_engine *e, brig_engine_waiter **out, const char *id,
						 const char *condition, brig_error **err);
/* Reads the answer until deadline_ms (monotonic; 0: a day); *exit_code gets
 * StatusCode. Once only: after any return the waiter is spent. Errors:
 * BRIG_ETIMEDOUT, BRIG_EUNCERTAIN (the connection broke), BRIG_EPROTO. */
BRIG_PUBLIC int brig_engine_waiter_finish(brig_engine_waiter *w, int64_t deadline_ms, int64_t *exit_code,
					  brig_error **err);
BRIG_PUBLIC void brig_engine_waiter_free(brig_engine_waiter *w);
BRIG_PUBLIC int brig_engine_container_remove(brig_engine *e, const char *id, bool force, bool volumes,
					     brig_error **err);
BRIG_PUBLIC int brig_engine_container_pause(brig_engine *e, const char *id, brig_error **err);
BRIG_PUBLIC int brig_engine_container_unpause(brig_engine *e, const char *id, brig_error **err);
BRIG_PUBLIC int brig_engine_container_rename(brig_engine *e, const char *id, const char *new_name,
					     brig_error **err);

/* ---- exec ---- */
enum { BRIG_STREAM_STDIN = 0, BRIG_STREAM_STDOUT = 1, BRIG_STREAM_STDERR = 2 };

/* Output of an exec or attach: stream is BRIG_STREAM_STDOUT/STDERR, data is
 * binary (not NUL-terminated). Non-zero return aborts with that code. */
typedef int (*brig_engine_output_cb)(int stream, const char *data, size_t len, void *payload);

/* Creates an exec in container id. config is the Docker exec body (Cmd, User,
 * Env, WorkingDir, AttachStdout…), borrowed. */
BRIG_PUBLIC int brig_engine_exec_create(brig_engine *e, char **out_id, const char *id, json_t *config,
					brig_error **err);

typedef struct brig_engine_exec_io {
	int stdin_fd;     /* -1: no stdin; else read until EOF and half-close */
	const char *stdin_data; /* alternative to stdin_fd: fixed bytes */
	size_t stdin_len;
	brig_engine_output_cb on_output;
	void *payload;
	int64_t deadline_ms; /* monotonic; 0 = none → BRIG_ETIMEDOUT when passed */
	int cancel_fd;       /* -1: none; readable → BRIG_ECANCELED */
	size_t max_frame;    /* cap on one frame's length; 0: 1 MiB */
} brig_engine_exec_io;

/* Starts the exec and streams its output until it ends. Uses the hijacked
 * (101) stream when stdin is given. Errors: BRIG_ETIMEDOUT, BRIG_ECANCELED
 * (the process keeps running inside: Docker cannot kill an exec — stop the
 * container), BRIG_EUNCERTAIN (stream broke), BRIG_ETOOBIG (lying frame). */
BRIG_PUBLIC int brig_engine_exec_start(brig_engine *e, const char *exec_id, const brig_engine_exec_io *io,
				       brig_error **err);
/* A hijacked output stream opened ahead of time (attach before start, so no
 * output is missed). Pump it with the same io as an exec. */
typedef struct brig_engine_stream brig_engine_stream;

/* Attaches to container id's stdout/stderr (and stdin when with_stdin). Call
 * before starting the container. *out is freed with brig_engine_stream_free. */
BRIG_PUBLIC int brig_engine_container_attach(brig_engine *e, brig_engine_stream **out, const char *id,
					     bool with_stdin, brig_error **err);
/* Streams until the peer ends the stream; errors as brig_engine_exec_start. */
BRIG_PUBLIC int brig_engine_stream_pump(brig_engine_stream *s, const brig_engine_exec_io *io, brig_error **err);
BRIG_PUBLIC void brig_engine_stream_free(brig_engine_stream *s);

/* Starts exec_id (created with AttachStdin/AttachStdout) hijacked and hands
 * the stream to the caller to drive: write the process's stdin, read its
 * demultiplexed output, poll its fd. deadline_ms bounds only the start.
 * Errors: as brig_engine_exec_start's start (BRIG_ENOTSENT: nothing ran;
 * BRIG_EUNCERTAIN: the start was sent, the process may run); BRIG_ETIMEDOUT.
 * *out is freed with brig_engine_stream_free, which closes both ways. */
BRIG_PUBLIC int brig_engine_exec_attach(brig_engine *e, brig_engine_stream **out, const char *exec_id,
					int64_t deadline_ms, brig_error **err);
/* The connection's fd, to poll for POLLIN (and POLLOUT after a write that
 * took nothing). Check brig_engine_stream_pending first: over TLS bytes may
 * be buffered where poll cannot see them. */
BRIG_PUBLIC int brig_engine_stream_fd(const brig_engine_stream *s);
BRIG_PUBLIC bool brig_engine_stream_pending(const brig_engine_stream *s);
/* Reads once (waiting until deadline_ms, monotonic, 0: none) and hands the
 * demultiplexed output to cb (a daemon's raw error text goes to stderr at
 * the end). Returns the raw bytes read (> 0), 0 at the end of the stream,
 * or BRIG_ETIMEDOUT, BRIG_EUNCERTAIN (broken, or ended inside a frame),
 * BRIG_EPROTO / BRIG_ETOOBIG (a malformed or oversized frame), or cb's
 * non-zero code. Everything read is from the process: untrusted. */
BRIG_PUBLIC ssize_t brig_engine_stream_read(brig_engine_stream *s, brig_engine_output_cb cb, void *payload,
					    int64_t deadline_ms, brig_error **err);
/* Writes to the process's stdin what the connection takes now, never
 * waiting (*written 0: poll for POLLOUT and POLLIN, then call again with the
 * same bytes). Errors: BRIG_EUNCERTAIN (the peer closed: how much of what was
 * written earlier arrived is unknown). Not thread-safe against a concurrent
 * read on a TLS connection: drive one stream from one thread. */
BRIG_PUBLIC int brig_engine_stream_write_some(brig_engine_stream *s, const void *buf, size_t n, size_t *written,
					      brig_error **err);
/* Half-close: the process sees the end of its stdin; reading goes on. */
BRIG_PUBLIC int brig_engine_stream_close_write(brig_engine_stream *s, brig_error **err);

BRIG_PUBLIC int brig_engine_exec_inspect(brig_engine *e, json_t **out, const char *exec_id, brig_error **err);
/* Polls exec inspect until Running is false (bounded by deadline_ms) and gives
 * ExitCode. Errors: BRIG_ETIMEDOUT. */
BRIG_PUBLIC int brig_engine_exec_exit_code(brig_engine *e, const char *exec_id, int64_t deadline_ms, int *exit_code,
					   brig_error **err);

/* ---- archive ---- */
/* Receives a tar stream (binary). Non-zero return aborts with that code. */
typedef int (*brig_engine_data_cb)(const char *data, size_t len, void *payload);
/* Produces a tar stream: returns bytes written to buf, 0 at the end, or a
 * negative BRIG_E code to abort. */
typedef ssize_t (*brig_engine_reader)(char *buf, size_t len, void *payload, brig_error **err);

/* GET a path out of a container as tar. *stat_out (may be NULL) receives the
 * decoded X-Docker-Container-Path-Stat. */
BRIG_PUBLIC int brig_engine_archive_get(brig_engine *e, const char *id, const char *path, json_t **stat_out,
					brig_engine_data_cb cb, void *payload, brig_error **err);
/* PUT a tar stream into directory path of a container. */
BRIG_PUBLIC int brig_engine_archive_put(brig_engine *e, const char *id, const char *path, brig_engine_reader reader,
					void *payload, brig_error **err);
/* PUT a tar held in memory. */
BRIG_PUBLIC int brig_engine_archive_put_buf(brig_engine *e, const char *id, const char *path, const void *tar,
					    size_t len, brig_error **err);
/* HEAD: stat of path. */
BRIG_PUBLIC int brig_engine_archive_stat(brig_engine *e, json_t **out, const char *id, const char *path,
					 brig_error **err);

/* ---- volumes ---- */
/* spec: {"Name":…,"Driver":…,"DriverOpts":{…},"Labels":{…}} borrowed. */
BRIG_PUBLIC int brig_engine_volume_create(brig_engine *e, json_t **out, json_t *spec, brig_error **err);
BRIG_PUBLIC int brig_engine_volume_inspect(brig_engine *e, json_t **out, const char *name, brig_error **err);
BRIG_PUBLIC int brig_engine_volume_list(brig_engine *e, json_t **out, json_t *filters, brig_error **err);
/* In use: BRIG_ECONFLICT. */
BRIG_PUBLIC int brig_engine_volume_remove(brig_engine *e, const char *name, bool force, brig_error **err);

/* ---- networks ---- */
BRIG_PUBLIC int brig_engine_network_create(brig_engine *e, char **out_id, json_t *spec, brig_error **err);
BRIG_PUBLIC int brig_engine_network_inspect(brig_engine *e, json_t **out, const char *id, brig_error **err);
BRIG_PUBLIC int brig_engine_network_list(brig_engine *e, json_t **out, json_t *filters, brig_error **err);
BRIG_PUBLIC int brig_engine_network_connect(brig_engine *e, const char *net, const char *container,
					    brig_error **err);
BRIG_PUBLIC int brig_engine_network_disconnect(brig_engine *e, const char *net, const char *container, bool force,
					       brig_error **err);
/* Endpoints attached: BRIG_EDAEMON/BRIG_ECONFLICT from the daemon. */
BRIG_PUBLIC int brig_engine_network_remove(brig_engine *e, const char *id, brig_error **err);

/* ---- images ---- */
BRIG_PUBLIC int brig_engine_image_inspect(brig_engine *e, json_t **out, const char *ref, brig_error **err);
BRIG_PUBLIC int brig_engine_image_list(brig_engine *e, json_t **out, json_t *filters, brig_error **err);
/* Imports a rootfs tarball as repo:tag (POST /images/create?fromSrc=-).
 * changes: Dockerfile lines ("USER sandbox"), NULL-terminated, may be NULL. */
BRIG_PUBLIC int brig_engine_image_import(brig_engine *e, const char *repo, const char *tag,
					 const char *const *changes, brig_engine_reader reader, void *payload,
					 brig_error **err);
/* Progress line of a build (the "stream" field), NUL-terminated. */
typedef void (*brig_engine_progress_cb)(const char *line, void *payload);
/* Builds from a context tar; tag is "repo:tag"; buildargs may be NULL.
 * network_mode NULL = daemon default ("none" for an offline build).
 * *out_id (may be NULL) receives the built image id. A failed step is
 * BRIG_EDAEMON with the daemon's error text. */
BRIG_PUBLIC int brig_engine_image_build(brig_engine *e, char **out_id, const char *tag, const char *network_mode,
					json_t *buildargs, brig_engine_reader context, void *payload,
					brig_engine_progress_cb progress, void *progress_payload, brig_error **err);
BRIG_PUBLIC int brig_engine_image_tag(brig_engine *e, const char *ref, const char *repo, const char *tag,
				      brig_error **err);
BRIG_PUBLIC int brig_engine_image_remove(brig_engine *e, const char *ref, bool force, brig_error **err);

/* ---- frame demultiplexer (the 8-byte stdout/stderr header) ----
 * Exposed for callers that read attach streams themselves. */
typedef struct brig_frame_demux {
	unsigned char hdr[8];
	size_t hdr_len;
	int stream;
	size_t remaining; /* payload bytes left in the current frame */
	size_t max_frame;
} brig_frame_demux;

BRIG_PUBLIC void brig_frame_demux_init(brig_frame_demux *d, size_t max_frame);
/* Feeds bytes split anywhere; calls cb per payload piece. Errors: BRIG_EPROTO
 * (unknown stream id), BRIG_ETOOBIG (frame length over max_frame), or cb's
 * non-zero return. */
BRIG_PUBLIC int brig_frame_demux_feed(brig_frame_demux *d, const char *data, size_t len, brig_engine_output_cb cb,
				      void *payload, brig_error **err);
/* True when the stream ended between frames. */
BRIG_PUBLIC bool brig_frame_demux_clean(const brig_frame_demux *d);

#ifdef __cplusplus
}
#endif
#endif
