/* http.h — one HTTP/1.1 client connection to the Docker daemon over a unix
 * socket or TCP(+TLS): requests, bounded response parsing, hijacked streams.
 *
 * Failure classification (the contract the sandbox layer builds on):
 *   BRIG_ENOTSENT   no byte of the request reached the daemon (socket missing,
 *                   connection refused, TLS handshake failed). Safe to retry.
 *   BRIG_EUNCERTAIN the request was (at least partly) written, then the
 *                   connection broke or the deadline passed before a complete
 *                   response. The request may have taken effect.
 *   BRIG_ETIMEDOUT  a deadline passed before anything was written (connect).
 *   BRIG_EPROTO     the daemon's response was malformed; like EUNCERTAIN, the
 *                   request may have taken effect: never retry on it.
 *   BRIG_ETOOBIG    headers (64 KiB) or a collected body exceeded their cap.
 *   BRIG_ETLS       TLS configuration could not be loaded.
 */
#ifndef BRIG_HTTP_H
#define BRIG_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define BRIG_HTTP_MAX_HEADERS_BYTES (64 * 1024)
#define BRIG_HTTP_MAX_HEADER_COUNT 100

/* Where the daemon is. Parsed from DOCKER_HOST conventions. */
typedef struct brig_http_endpoint {
	bool is_unix;
	char *path; /* unix socket path */
	char *host; /* tcp host */
	int port;
	bool tls;
	bool tls_verify;
	char *ca_file, *cert_file, *key_file;
} brig_http_endpoint;

/* Parses "unix:///path", "/path", "tcp://host:port" into ep; tls settings
 * come from tls_verify and cert_path (DOCKER_TLS_VERIFY / DOCKER_CERT_PATH). */
int brig_http_endpoint_parse(brig_http_endpoint *ep, const char *host, bool tls_verify, const char *cert_path,
			     brig_error **err);
void brig_http_endpoint_clear(brig_http_endpoint *ep);

typedef struct brig_http_conn brig_http_conn;

/* Opens a connection. Errors: BRIG_ENOTSENT, BRIG_ETIMEDOUT, BRIG_ETLS. */
int brig_http_connect(brig_http_conn **out, const brig_http_endpoint *ep, int64_t deadline_ms, brig_error **err);
void brig_http_conn_free(brig_http_conn *c);
/* True when the connection may carry another request (keep-alive, no pending
 * bytes, peer not closed). */
bool brig_http_conn_reusable(brig_http_conn *c);
int brig_http_conn_fd(const brig_http_conn *c);

/* Streams a request body. Returns bytes written into buf (0 = end), or <0 to
 * abort with that BRIG_E code (its message in *err). */
typedef ssize_t (*brig_http_body_reader)(char *buf, size_t len, void *payload, brig_error **err);

/* Receives response body bytes; non-zero return aborts the request with that
 * code. */
typedef int (*brig_http_body_cb)(const char *data, size_t len, void *payload);

typedef struct brig_http_header {
	char *name;
	char *value;
} brig_http_header;

typedef struct brig_http_request {
	const char *method;
	const char *target; /* path and query, already encoded */
	const char *content_type;
	const char *const *extra_headers; /* "Name: value" strings, NULL-terminated */
	const void *body;
	size_t body_len;
	brig_http_body_reader body_reader; /* chunked upload when set */
	void *body_payload;
	bool upgrade;        /* ask for Connection: Upgrade / Upgrade: tcp */
	bool head;           /* a HEAD request: no body follows the headers */
	int64_t deadline_ms; /* monotonic; 0 = none */
} brig_http_request;

typedef struct brig_http_response {
	int status;
	brig_http_header *headers;
	size_t nheaders;
	brig_buf body; /* collected body when no body_cb was given */
	bool keep_alive;
	bool upgraded; /* 101: the connection is now a raw stream */
	/* bytes read past the headers of a 101 response: start of the stream */
	char *stream_head;
	size_t stream_head_len;
} brig_http_response;

void brig_http_response_clear(brig_http_response *r);
/* Case-insensitive lookup; borrowed. */
const char *brig_http_response_header(const brig_http_response *r, const char *name);

/* Sends req and reads the response. The body goes to body_cb when given,
 * otherwise into resp->body capped at body_cap. */
int brig_http_roundtrip(brig_http_conn *c, const brig_http_request *req, brig_http_response *resp,
			size_t body_cap, brig_http_body_cb body_cb, void *payload, brig_error **err);

/* The same in two steps, for an answer that comes later (a container wait
 * registered before the start it waits for): send now, read once or in two
 * parts (until the headers, then the rest). method and target are borrowed
 * until brig_http_exchange_end; errors as brig_http_roundtrip. */
typedef struct brig_http_parser brig_http_parser;
typedef struct brig_http_exchange {
	brig_http_conn *c;
	const char *method, *target;
	brig_http_response *resp;
	brig_http_parser *p;
	bool streamed; /* the body goes to a callback */
	bool complete;
} brig_http_exchange;

int brig_http_exchange_send(brig_http_exchange *x, brig_http_conn *c, const brig_http_request *req,
			    brig_http_response *resp, size_t body_cap, brig_http_body_cb body_cb, void *payload,
			    brig_error **err);
/* until_headers: stop once the status and headers are in (resp->status set). */
int brig_http_exchange_read(brig_http_exchange *x, bool until_headers, int64_t deadline_ms, brig_error **err);
void brig_http_exchange_end(brig_http_exchange *x);

/* ---- raw stream after 101 (or a read-until-close body) ---- */
/* Reads up to n bytes; returns bytes, 0 at EOF, BRIG_ETIMEDOUT when the
 * deadline passes, BRIG_EUNCERTAIN on a broken connection. Stream-head bytes
 * from the response are returned first. */
ssize_t brig_http_stream_read(brig_http_conn *c, brig_http_response *resp, char *buf, size_t n, int64_t deadline_ms,
			      brig_error **err);
/* Writes what the connection takes now, never waiting: *written is 0 when
 * it takes nothing (poll for POLLOUT and POLLIN, then call again — over TLS
 * with the same buf and n until something is written). A writer that waited
 * here would stop reading the other way: a command that writes before it
 * reads would fill both directions and neither side would move. Errors:
 * BRIG_EUNCERTAIN on a broken connection (the peer closed it). */
int brig_http_stream_write_some(brig_http_conn *c, const void *buf, size_t n, size_t *written, brig_error **err);
/* Half-close: no more writes, reading goes on. */
int brig_http_stream_close_write(brig_http_conn *c, brig_error **err);
/* Data already buffered (TLS) so poll() on the fd would miss it. */
bool brig_http_stream_pending(brig_http_conn *c, const brig_http_response *resp);

/* ---- response parser (pure; fed bytes, used by the connection and fuzzed) */

brig_http_parser *brig_http_parser_new(brig_http_response *resp, bool head_request, size_t body_cap,
				       brig_http_body_cb body_cb, void *payload);
void brig_http_parser_free(brig_http_parser *p);
/* Feeds bytes. Returns 0 (need more), 1 (message complete), or a BRIG_E
 * code. On 1 *consumed says how many bytes belonged to this response; on an
 * upgrade the rest are the stream head (copied into resp). */
int brig_http_parser_feed(brig_http_parser *p, const char *data, size_t len, size_t *consumed, brig_error **err);
/* Tells the parser the peer closed. Returns 1 when that completes a
 * read-until-close body, otherwise BRIG_EUNCERTAIN-worthy BRIG_EPROTO. */
int brig_http_parser_finish(brig_http_parser *p, brig_error **err);
/* True once any response byte was seen. */
bool brig_http_parser_started(const brig_http_parser *p);
/* True once the status line and all headers were parsed. */
bool brig_http_parser_headers_done(const brig_http_parser *p);

#endif
