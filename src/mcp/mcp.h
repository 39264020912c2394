/* mcp.h — brig's Model Context Protocol server: the JSON-RPC 2.0
 * dispatcher, bound to one session, whose tools run commands and touch files
 * in that session's computer; its transports are newline-delimited stdio
 * (mcp_server_serve, brig mcp) and Streamable HTTP (src/serve/mcp_http.c,
 * which hands each POST's message to mcp_server_handle). Private to src/.
 *
 * Transport contract (stated as include/brig/engine.h states its own):
 *  - Every line read is one JSON-RPC message; a line longer than
 *    MCP_MAX_LINE is answered with -32600 and skipped, malformed JSON with
 *    -32700, a request that is not one with -32600, an unknown method with
 *    -32601, wrong params with -32602. Batches (JSON arrays) are refused with
 *    -32600: MCP dropped them in 2025-06-18.
 *  - Only JSON-RPC goes to the write callback (stdout); logs go to stderr
 *    and, at or above the client's logging/setLevel, as notifications/message.
 *  - tools/call runs on its own thread (at most MCP_MAX_CALLS at once);
 *    notifications/cancelled ends that call's command through the exec's
 *    cancel fd and suppresses its answer; a call with a progressToken gets
 *    notifications/progress every second while it runs.
 *  - Tool failures are results with isError true and a message a model can
 *    act on; a JSON-RPC error means the request itself was wrong.
 *  - The computer is created or adopted (brig_session_up) on the first call
 *    that needs it, never by initialize or tools/list.
 *  - mcp_server_shutdown (stdin closed) cancels every running call, waits
 *    for them, and ends the background processes it started: nothing is
 *    left running in the computer.
 */
#ifndef BRIG_MCP_H
#define BRIG_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "brig/engine.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "ops/ops.h"

#define MCP_MAX_LINE ((size_t)16 << 20) /* one request, bytes */
#define MCP_MAX_CALLS 64                /* tools/call in flight */
/* One answer, bytes: the official SDK's stdio client closes the connection
 * on a message over 10 MiB (STDIO_DEFAULT_MAX_BUFFER_SIZE), so brig's stay
 * under it with a margin. */
#define MCP_ANSWER_MAX ((size_t)9 << 20)

/* The protocol versions spoken, newest first (the official TypeScript SDK's
 * LATEST_PROTOCOL_VERSION and SUPPORTED_PROTOCOL_VERSIONS). */
extern const char *const mcp_protocol_versions[];

/* Writes one line (no newline in line; the callback adds it). Called under
 * the server's output lock. Non-zero: the client is gone. */
typedef int (*mcp_write_fn)(const char *line, size_t len, void *payload);

typedef struct mcp_config {
	brig_engine *engine; /* borrowed; NULL: every tool that needs the computer fails (the fuzzer) */
	brig_store *store;   /* borrowed */
	const char *ns, *agent, *session;
	const brig_spec *spec; /* borrowed; NULL: the session's recorded spec, else the default */
	const char *image;     /* with spec NULL: the image of a new session's computer (NULL: the default) */
	const char *actor;     /* who the audit rows name (NULL: "mcp"); brig serve: the token's name */
	mcp_write_fn write;    /* NULL: stdout */
	void *payload;
	bool inline_calls; /* run tools/call on the caller's thread (the fuzzer) */
	/* When set, asked before a computer is made from the session's
	 * recorded spec (spec NULL) or recovered: non-zero (err set) refuses.
	 * brig serve holds that spec to its policy. */
	int (*recorded_policy)(const struct mcp_config *cfg, brig_error **err);
	const void *policy_payload;
} mcp_config;

typedef struct mcp_server mcp_server;

/* The config's pointers are borrowed for the server's life. */
mcp_server *mcp_server_new(const mcp_config *cfg);
/* Handles one message (a line without its newline). Never fails: every
 * problem is answered on the wire. */
void mcp_server_handle(mcp_server *s, const char *line, size_t len);
/* Reads newline-delimited messages from fd until EOF or until stop_fd
 * (may be -1) is readable, then shuts down. Returns 0, or -1 when fd
 * failed. */
int mcp_server_serve(mcp_server *s, int fd, int stop_fd);
/* Cancels every running call and waits for them. Idempotent. */
void mcp_server_shutdown(mcp_server *s);
void mcp_server_free(mcp_server *s);

/* ---- between server.c and tools.c ---- */

typedef struct mcp_call mcp_call;

/* The tools' descriptions, with input and output schemas (new reference). */
json_t *mcp__tools_list(void);
/* True when name is a tool. */
bool mcp__tool_exists(const char *name);
/* Runs tool name with args (may be NULL) for call c; returns the
 * CallToolResult (new reference): structuredContent + text, or isError. */
json_t *mcp__tool_call(mcp_call *c, const char *name, json_t *args);

/* What a tool may ask of the server for its call. */
brig_engine *mcp__engine(mcp_call *c);
brig_store *mcp__store(mcp_call *c);
const mcp_config *mcp__config(mcp_call *c);
/* Who the call's audit rows name: mcp_config.actor, or "mcp". */
const char *mcp__actor(mcp_call *c);
void mcp__identity(mcp_call *c, const char **ns, const char **agent, const char **session);
/* The computer's container name, creating or adopting it first when needed.
 * *out is malloc'd. Errors: those of brig_session_up. */
int mcp__computer(mcp_call *c, char **out, brig_error **err);
/* The computer's brig-init handle (borrowed: valid until the server is
 * freed), creating or adopting the computer first; *out NULL (and 0
 * returned) when the computer has none (created before brig-init) or it
 * cannot be reached now: use exec then. Errors: those of mcp__computer. */
int mcp__guest(mcp_call *c, brig_guest **out, brig_error **err);
/* Forgets the known computer (after recover, or an exec that stopped it). */
void mcp__computer_forget(mcp_call *c);
/* The call as ops/ sees it (files, processes); borrowed, lives with c. */
ops_target *mcp__target(mcp_call *c);
/* Runs argv in the computer (created or adopted first), with stdin data,
 * cancel through the call, output counted for progress. res is filled. */
int mcp__exec(mcp_call *c, const char *const *argv, const char *stdin_data, size_t stdin_len, size_t capture_max,
	      int64_t timeout_ms, brig_exec_result *res, brig_error **err);
/* The same with env ("KEY=VALUE") and workdir (NULL: /workspace). */
int mcp__exec_env(mcp_call *c, const char *const *argv, const char *const *env, size_t env_count, const char *workdir,
		  const char *stdin_data, size_t stdin_len, size_t capture_max, int64_t timeout_ms,
		  brig_exec_result *res, brig_error **err);
/* The call's cancel fd (readable once the client cancelled), or -1. */
int mcp__cancel_fd(mcp_call *c);
/* Notes that a background process was started: shutdown ends them all. */
void mcp__note_background(mcp_call *c);
/* Counts output bytes for progress notifications. */
void mcp__output_seen(mcp_call *c, size_t n);
/* Sends notifications/message at level ("info", "warning"…) when the client
 * asked for that level; also logs to stderr. */
void mcp__log(mcp_call *c, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
