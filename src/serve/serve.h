/* serve.h — `brig serve`: brig's HTTP/1.1 API (/v1/…, JSON) on GNU
 * libmicrohttpd, over a unix socket or TCP with TLS and bearer tokens.
 * Private to src/ (brig serve uses it); the API itself is specified in
 * docs/openapi.json, which the route table below must match (a test checks).
 *
 * Transport contract (stated as include/brig/engine.h states its own):
 *  - One thread per connection (keep-alive: a client holding a connection
 *    pays no connect per call). The guest relays stay open in the server,
 *    cached per computer, so a command costs milliseconds after the first.
 *  - Every answer that is not a success is {"code","message"} with a
 *    fitting status (serve__status maps brig's codes in one place). A
 *    message never holds a token or an env value.
 *  - A request body over body_max is answered 413 (from Content-Length
 *    before anything is read, else once the cap is passed); a connection
 *    that has not completed a request's headers header_timeout_s after it
 *    opened or its last request ended (idle, dribbling bytes, a slow TLS
 *    handshake) is cut.
 *  - Tokens (--tokens FILE): "Authorization: Bearer T" only; each token is
 *    limited to a list of namespaces ("*": all); compared as SHA-256
 *    digests in constant time, never logged. A token-like query parameter
 *    is refused (401) whatever it holds. Without a tokens file (unix socket
 *    only) the socket's mode is the access control.
 *  - The stop fd readable → drain: the listening socket is closed, calls in
 *    flight finish (up to drain_s), new requests on open connections get
 *    503 shutting_down. At drain_s the execs and runs still going are
 *    cancelled (brig-init ends their trees; a run's container is removed)
 *    and get SERVE_CANCEL_GRACE_S to answer; then connections are closed.
 *  - Tar in/out and runs are "heavy": one token has at most heavy_max of
 *    them in flight (more: 429 too_many, before any body is read). Tar
 *    goes through brig-init as the computer's user, never Docker's archive
 *    API (root in the computer); tar out is streamed.
 *  - Commands never retry on their own; an exec answer is as certain as
 *    brig_computer_exec's (uncertain: 502 with code "uncertain").
 */
#ifndef BRIG_SERVE_H
#define BRIG_SERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "brig/engine.h"
#include "brig/error.h"
#include "brig/spec.h"
#include "brig/store.h"

#define SERVE_DEFAULT_SOCKET "/run/brig/brig.sock"
#define SERVE_BODY_MAX ((size_t)16 << 20)   /* default request body cap, bytes */
#define SERVE_UPLOAD_MAX ((size_t)4 << 30)  /* default cap of a spooled body (tar in, checkpoint import) */
#define SERVE_HEADER_TIMEOUT_S 30           /* default inactivity limit */
#define SERVE_DRAIN_S 60                    /* default drain limit on stop */
#define SERVE_MAX_CONNECTIONS 512           /* threads, one per connection */
#define SERVE_HEADER_MAX ((size_t)64 << 10) /* request line + headers */
#define SERVE_MAX_ARGS 4096                 /* argv and env entries of one exec */
#define SERVE_TOKENS_MAX ((size_t)1 << 20)  /* the tokens file */
#define SERVE_HEAVY_MAX 4                   /* default: tar in/out and runs of one token at once */
#define SERVE_STREAMS_MAX 32                /* default: attach streams one token has open */
#define SERVE_CANCEL_GRACE_S 10             /* after the drain: for cancelled calls to answer */
/* TLS 1.2 and 1.3 only; AEAD ciphers with forward-secret key exchange. */
#define SERVE_TLS_PRIORITY                                                                                     \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+CHACHA20-POLY1305:+AES-256-GCM:+AES-128-GCM:" \
	"-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:%SERVER_PRECEDENCE"

/* One --pool IMAGE=N. */
typedef struct serve_pool_conf {
	const char *image;
	unsigned size; /* 1..SERVE_POOL_MAX */
} serve_pool_conf;
#define SERVE_POOL_MAX 64              /* members of one pool */
#define SERVE_POOL_MAX_AGE_S (30 * 60) /* default --pool-max-age */

typedef struct serve_config {
	brig_engine *engine;            /* borrowed; shared by every connection */
	brig_store *store;              /* borrowed */
	const char *listen;             /* "unix:///PATH" or "tcp://HOST:PORT"; NULL: unix://SERVE_DEFAULT_SOCKET */
	const char *tls_cert, *tls_key; /* PEM files; required with tcp:// */
	const char *tokens;             /* tokens file; required with tcp:// */
	const char *image;              /* image of a new computer whose spec names none; NULL: the spec's default */
	size_t body_max;                /* 0: SERVE_BODY_MAX */
	size_t upload_max;              /* 0: SERVE_UPLOAD_MAX; bodies spooled to a file, not memory */
	unsigned header_timeout_s;      /* 0: SERVE_HEADER_TIMEOUT_S */
	unsigned drain_s;               /* 0: SERVE_DRAIN_S */
	int stop_fd;                    /* readable → drain and return */
	/* What a token's spec may ask for beyond the defaults (serve_spec_policy). */
	const char *const *allow_runtimes; /* runtime names a spec may name */
	size_t allow_runtime_count;
	bool allow_custom_seccomp;        /* a seccomp_profile other than brig's own */
	const char *const *allow_publish; /* host addresses besides loopback a port may be published on */
	size_t allow_publish_count;
	unsigned heavy_max;           /* tar in/out and runs of one token at once (more: 429); 0: SERVE_HEAVY_MAX */
	unsigned streams_max;         /* attach streams of one token open at once (more: 429); 0: SERVE_STREAMS_MAX */
	const serve_pool_conf *pools; /* warm pools (src/serve/pool.c), n_pools of them */
	size_t n_pools;
	unsigned pool_max_age_s; /* 0: SERVE_POOL_MAX_AGE_S */
} serve_config;

/* Whether a spec sent by a client stays within what the server allows: a
 * runtime only from allow_runtimes, brig's own seccomp profile unless
 * allow_custom_seccomp, published ports on loopback (127.0.0.0/8, ::1) or
 * an address of allow_publish. Errors: BRIG_EDENIED naming the field and
 * what is allowed. */
int serve_spec_policy(const brig_spec *spec, const serve_config *cfg, brig_error **err);
/* serve_spec_policy of the spec id's session has in s, when it has one:
 * what a computer made from it (up without a spec, recover) would get,
 * whoever recorded it (a checkpoint archive imported with its session, a
 * brig using the store directly). BRIG_EDENIED names the session. */
int serve_session_policy(brig_store *s, const serve_config *cfg, const brig_identity *id, brig_error **err);

/* A request's secret_values (NULL: none): an object of at most
 * BRIG_SPEC_SECRETS_MAX printable strings, each named for one of spec's
 * secrets (any name when spec is NULL: the recorded spec decides). A
 * value is never quoted. Errors: BRIG_EINVAL naming the field. */
int serve_secret_values_check(const json_t *values, const brig_spec *spec, brig_error **err);

/* Serves until stop_fd is readable, then drains. Sets SIGPIPE to be
 * ignored (a client that leaves must not end the process). Errors: BRIG_EINVAL
 * (listen address, TLS files, tokens file; libmicrohttpd missing),
 * BRIG_EIO (cannot bind: the message names the address). */
int serve_run(const serve_config *cfg, brig_error **err);

/* Writes the route table ("METHOD PATH-TEMPLATE" a line), the one the
 * server dispatches from. */
void serve_routes_write(FILE *f);

/* ---- parsers of untrusted input (tests/fuzz/fuzz_serve.c) ---- */

/* A request body: one JSON object (an empty body is {}). *out is a new
 * reference. Errors: BRIG_EINVAL ("malformed JSON at line L column C: …",
 * or not an object). */
int serve_body_parse(json_t **out, const char *data, size_t len, brig_error **err);

/* The body of POST …/exec and …/processes. Strings are borrowed from the
 * body, arrays malloc'd (serve_exec_req_clear frees them). */
typedef struct serve_exec_req {
	const char **argv; /* NULL-terminated */
	const char **env;  /* "KEY=VALUE" */
	size_t env_count;
	const char *workdir;
	const char *stdin_data;
	size_t stdin_len;
	int64_t timeout_ms;
	size_t capture_max;
} serve_exec_req;

/* {"argv":[…] (1..SERVE_MAX_ARGS strings, no NUL), "env":{"K":"V"} or
 * ["K=V"], "workdir", "stdin", "timeout_ms" (0..86400000),
 * "capture_max" (0..16 MiB)}; unknown fields are refused.
 * Errors: BRIG_EINVAL naming the field (never an env value). */
int serve_exec_req_parse(serve_exec_req *out, const json_t *body, brig_error **err);
void serve_exec_req_clear(serve_exec_req *r);

/* A file path from a query: not empty, no NUL (len is the decoded length),
 * no ".." component. Errors: BRIG_EINVAL. */
int serve_path_check(const char *path, size_t len, brig_error **err);

typedef struct serve_tokens serve_tokens;
/* The tokens file: one "TOKEN NS[,NS…]" a line ("*": every namespace);
 * blank lines and # comments skipped; tokens of 16..256 printable
 * characters. Errors: BRIG_EINVAL naming the line (never the token). */
int serve_tokens_parse(serve_tokens **out, const char *text, size_t len, brig_error **err);
void serve_tokens_free(serve_tokens *t);
/* The token's entry for "Authorization" header value h (NULL: no match).
 * Every entry is compared, in constant time. */
const void *serve_tokens_match(const serve_tokens *t, const char *h);
/* Whether entry (from serve_tokens_match; NULL: no tokens configured, all
 * allowed) may touch namespace ns. */
bool serve_tokens_allows(const void *entry, const char *ns);
/* Who entry is, for the audit log: "serve token, line N" (of the tokens
 * file; never the token), or "serve" for NULL (no tokens configured). */
const char *serve_tokens_name(const void *entry);
/* Whether entry holds every namespace ("*"). */
bool serve_tokens_all(const void *entry);

/* HTTP status and API code ("not_found"…) of a brig error code. */
int serve__status(int code, const char **api_code);
/* The brig code of an API error code ("not_found"…); 0 for another (the
 * CLI as a client reads the server's answers with it). */
int serve__code_of(const char *api_code);

#endif
