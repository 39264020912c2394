/* internal.h — between the server (server.c: connections, auth, replies,
 * logs, metrics, the computers' brig-init handles) and the routes
 * (routes.c: the table and each endpoint). Private to src/serve/. */
#ifndef BRIG_SERVE_INTERNAL_H
#define BRIG_SERVE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/guest.h"
#include "brig/run.h"
#include "brig/sandbox.h"
#include "ops/ops.h"
#include "serve/serve.h"
#include "tar/tar.h"

#define SERVE_MAX_PARAMS 6

typedef struct serve_server serve_server;
typedef struct serve_req serve_req;
typedef struct serve_upgraded serve_upgraded;

/* What a handler answers. Exactly one of json, data or stream is used. */
typedef struct serve_reply {
	int status;
	json_t *json; /* consumed */
	char *data;   /* malloc'd, consumed */
	size_t len;
	const char *type; /* content type of data */
	/* Streaming (chunked): read is called on the connection's thread
	 * until it returns 0 (end) or -1 (abort); done once after. */
	ssize_t (*read)(void *payload, char *buf, size_t max);
	void (*done)(void *payload);
	void *payload;
	const char *extra_header, *extra_value; /* one more header, or NULL */
	/* A file: has_fd, fd (consumed, closed by the server) of fd_size bytes. */
	bool has_fd;
	int fd;
	uint64_t fd_size;
	/* An HTTP Upgrade (status 101, "Upgrade: tcp"): once the 101 is out,
	 * upgrade gets payload, the raw stream (give it back with
	 * serve__upgraded_close) and the bytes the client sent past the
	 * request; done(payload) instead when the 101 never went out. */
	void (*upgrade)(void *payload, serve_upgraded *u, const char *extra, size_t extra_len);
} serve_reply;

typedef void (*serve_handler)(serve_req *r, serve_reply *out);

enum {
	ROUTE_PUBLIC = 1,   /* no token needed (health) */
	ROUTE_RAW_BODY = 2, /* the body is bytes, not JSON */
	ROUTE_ALL_NS = 4,   /* needs a token of every namespace (metrics) */
	ROUTE_HEAVY = 8,    /* tar in/out, runs: at most heavy_max in flight per token (429) */
	ROUTE_STREAM = 16,  /* exec attach: at most streams_max open per token (429) */
	ROUTE_SPOOL = 32,   /* raw body spooled to an unnamed file (serve__body_fd), up to upload_max */
};

typedef struct serve_route {
	const char *method;
	const char *path; /* template: {name} matches one segment */
	serve_handler fn;
	unsigned flags;
} serve_route;

extern const serve_route serve__routes[];
extern const size_t serve__route_count;

struct serve_req {
	serve_server *srv;
	void *conn; /* struct MHD_Connection */
	char *method, *url;
	const serve_route *route; /* NULL: none matched */
	bool method_mismatch;     /* the path matched another method */
	const char *param_name[SERVE_MAX_PARAMS];
	char *param[SERVE_MAX_PARAMS];
	size_t n_params;
	const void *token; /* serve_tokens entry; NULL: all namespaces */
	char *body;
	size_t body_len, body_cap;
	int spool_fd;   /* ROUTE_SPOOL: the body so far (-1: none yet) */
	int spool_errno; /* ROUTE_SPOOL: it could not be written */
	json_t *json; /* the parsed body (JSON routes) */
	bool over, answered;
	int refused;        /* status of a refusal answered once the body is in */
	size_t refused_len; /* body bytes of a refused request, dropped unread (capped too) */
	const char *refused_code, *refused_msg;
	bool refused_close;
	bool heavy;  /* holds one of its token's heavy slots */
	bool stream; /* holds one of its token's stream slots (until the upgrade takes it) */
	int status;
	int64_t started_us; /* monotonic, for the log line */
	bool http10;        /* an HTTP/1.0 request (no upgrade possible) */
	/* an upgrade answer queued, not yet taken by its handler */
	void (*upgrade_fn)(void *payload, serve_upgraded *u, const char *extra, size_t extra_len);
	void (*upgrade_free)(void *payload);
	void *upgrade_payload;
};

/* ---- from server.c, for the routes ---- */

brig_engine *serve__engine(serve_req *r);
brig_store *serve__store(serve_req *r);
const serve_config *serve__config(serve_req *r);
/* A path parameter by name, or NULL. */
const char *serve__param(serve_req *r, const char *name);
/* A query parameter; *len its decoded length (NUL bytes count). NULL when absent. */
const char *serve__query(serve_req *r, const char *name, size_t *len);
/* The connection's socket (to notice the client leaving), or -1. */
int serve__client_fd(serve_req *r);
/* A ROUTE_SPOOL request's body, at its start (the server closes it; an
 * empty one when none came). -1 (errno) when it could not be kept. */
int serve__body_fd(serve_req *r);
/* Whether the request's token may touch namespace ns. */
bool serve__allowed(serve_req *r, const char *ns);
bool serve__all_ns(serve_req *r);
/* Readable once the drain period is over: an exec's or run's cancel_fd. */
int serve__cancel_fd(serve_req *r);
/* Readable once the drain begins. */
int serve__drain_fd(serve_req *r);
/* A streamed reply's read from pipe_fd: waits for bytes; -1 when the client
 * hangs up (client_fd; -1: not watched) first, -2 when stop_fd (-1: none)
 * is readable first; 0 at the pipe's end. */
ssize_t serve__pipe_read(int pipe_fd, int client_fd, int stop_fd, char *buf, size_t max);

void serve__reply_json(serve_reply *out, int status, json_t *j);
/* An error answer {"code","message"} from err (consumed), context may be NULL. */
void serve__reply_error(serve_reply *out, brig_error *err);
void serve__reply_fail(serve_reply *out, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The brig-init handle of container name, opened once and kept; *out NULL
 * when the computer has none. A non-NULL *out is lent: give it back with
 * serve__guest_release once the operation is over. */
int serve__guest(serve_server *s, const char *name, brig_guest **out, brig_error **err);
/* Gives back a handle serve__guest lent (NULL: nothing); a retired one is
 * freed when its last borrower gives it back. */
void serve__guest_release(serve_server *s, brig_guest *g);
/* Forgets the handle of name (its computer stopped, was recovered…). */
void serve__guest_forget(serve_server *s, const char *name);

/* The socket of an upgraded connection (nonblocking; over TLS one end of
 * libmicrohttpd's socketpair). Read and write it; shutdown is allowed,
 * close is not. */
int serve__upgraded_fd(const serve_upgraded *u);
/* Closes an upgraded connection and frees u: the end of its request for
 * the drain. */
void serve__upgraded_close(serve_upgraded *u);

/* docs/openapi.json as built in (borrowed). */
void serve__openapi(const char **data, size_t *len);
/* Notes one exec's latency (metrics). */
void serve__exec_observe(serve_server *s, int64_t ms);
/* Prometheus text of the server's counters (appended to b). */
void serve__metrics_write(serve_server *s, void *b);

/* ---- routes.c's steps, for routes_files.c and routes_attach.c ---- */

/* The identity in the path, validated (else *out is the 400). */
bool serve__path_identity(serve_req *r, serve_reply *out, brig_identity *id);
/* The container name of the path's session: its current generation, else
 * (not a session of the store) its first. *name is malloc'd. */
bool serve__path_computer(serve_req *r, serve_reply *out, char **name);
/* A boolean query parameter ("true"/"1"). */
bool serve__query_bool(serve_req *r, const char *name);
/* An integer query parameter in min..max into *v (absent: *v kept). */
bool serve__query_i64(serve_req *r, serve_reply *out, const char *name, int64_t min, int64_t max, int64_t *v);
/* Sets o's command fields (argv, env, workdir, stdin_data, timeout,
 * capture) from req; the caller sets stdin_fd, cancel and output. */
void serve__exec_opts(brig_exec_opts *o, const serve_exec_req *req);
/* The last event of a streamed exec: {"type":"exit",…} for a result (a
 * timeout or cancel brig-init ended, the computer running on, is one),
 * else {"type":"error","code","message"}. New reference. */
/* The path's {id} as a positive decimal integer; false with *out answered
 * (400 saying why). */
bool serve__path_id(serve_req *r, serve_reply *out, const char *why, int64_t *id);
/* The body of r as an exec request; false with *out answered (400). */
bool serve__exec_req(serve_req *r, serve_reply *out, serve_exec_req *req);
json_t *serve__exec_end_event(int rc, const brig_exec_result *res, const brig_error *err);
/* {"type": "error", "code", "message"} of err, as that last line says an error. */
json_t *serve__error_event(int rc, const brig_error *err);
/* ?name=…, checked (no '..', no NUL) and made absolute, malloc'd; NULL with *out the 400. */
char *serve__query_path(serve_req *r, serve_reply *out, const char *name);
/* The same for a string field of the JSON body. */
char *serve__body_path(serve_req *r, serve_reply *out, const char *name);

/* ---- routes_files.c's endpoints, for the table ---- */

void serve__h_procs_start(serve_req *r, serve_reply *out);
void serve__h_procs_list(serve_req *r, serve_reply *out);
void serve__h_procs_get(serve_req *r, serve_reply *out);
void serve__h_procs_input(serve_req *r, serve_reply *out);
void serve__h_procs_kill(serve_req *r, serve_reply *out);
void serve__h_file_read(serve_req *r, serve_reply *out);
void serve__h_file_write(serve_req *r, serve_reply *out);
void serve__h_file_remove(serve_req *r, serve_reply *out);
void serve__h_file_list(serve_req *r, serve_reply *out);
void serve__h_file_stat(serve_req *r, serve_reply *out);
void serve__h_file_move(serve_req *r, serve_reply *out);
void serve__h_file_mkdir(serve_req *r, serve_reply *out);
void serve__h_archive_get(serve_req *r, serve_reply *out);
void serve__h_archive_put(serve_req *r, serve_reply *out);
void serve__h_runs(serve_req *r, serve_reply *out);

/* A disposable run's request (POST /v1/runs and /v1/runs/attach), checked:
 * its namespace covered by the token, its spec within the policy, its
 * secret values for its secrets, and a private directory on the server for
 * its inputs (in) and outputs (out). */
typedef struct serve_run_req {
	json_t *body;   /* the request's (owned ref): req's strings and secret_values */
	json_t *ej;     /* argv and capture_max, as an exec's */
	serve_exec_req req;
	brig_spec spec;
	char *dir, *indir, *outdir;
	bool outputs;   /* /outbox is copied back */
	bool with_stdin; /* attach: stdin frames go to the command */
	int64_t timeout_s, out_mb;
	const char *workdir; /* in body, or NULL */
} serve_run_req;

/* Parses and checks r's body into run (the attach variant: no inputs_tar;
 * stdin, workdir and out_mb taken). false: *out is answered and run holds
 * nothing. */
bool serve__run_prep(serve_req *r, serve_reply *out, serve_run_req *run, bool attach);
/* Runs it: its inputs are what run->indir holds; o carries the caller's
 * stdin_fd, cancel_fd, on_output and payload (the rest is set here).
 * brig_run's answer. */
int serve__run_go(serve_run_req *run, brig_engine *e, brig_run_opts *o, brig_run_result *res, brig_error **err);
/* A tar builder of what the run left in run->outdir (nothing: an empty
 * tar). */
int serve__run_outputs(serve_run_req *run, brig_tar_builder **out, brig_error **err);
/* Frees what run holds and removes its directory. */
void serve_run_clear(serve_run_req *run);

/* ---- routes_attach.c ---- */

void serve__h_exec_attach(serve_req *r, serve_reply *out);
void serve__h_runs_attach(serve_req *r, serve_reply *out);
void serve__h_procs_attach(serve_req *r, serve_reply *out);
/* Whether r asks for the upgrade (Connection: Upgrade, Upgrade: tcp, over
 * HTTP/1.1). False with *out answered (426 or 400). */
bool serve__upgrade_ok(serve_req *r, serve_reply *out);
/* brig attach's stream (routes_attach.c): brig-init's command proc of
 * computer name through g held (lent by serve__guest) or own (owned), with
 * the client's stdin when in. True: *out is the 101 and the stream owns
 * held and own; false with *out answered (they stay the caller's). */
bool serve__proc_attach(serve_req *r, serve_reply *out, const char *name, brig_guest *held, brig_guest *own,
			int64_t proc, bool in);

/* ---- mcp_http.c: MCP over Streamable HTTP ---- */

typedef struct serve_mcp serve_mcp;
serve_mcp *serve__mcp_new(void);
/* Ends every MCP session (their calls and background processes). */
void serve__mcp_free(serve_mcp *t);
/* The server's MCP sessions. */
serve_mcp *serve__mcp(serve_req *r);
/* A request header, or NULL. */
const char *serve__header(serve_req *r, const char *name);
void serve__h_mcp_post(serve_req *r, serve_reply *out);
void serve__h_mcp_delete(serve_req *r, serve_reply *out);

#endif
