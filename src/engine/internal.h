/* internal.h — what the engine's files share: the client struct, the
 * connection pool, the JSON call helper and the JSON-lines splitter. */
#ifndef BRIG_ENGINE_INTERNAL_H
#define BRIG_ENGINE_INTERNAL_H

#include <pthread.h>

#include "brig/engine.h"
#include "engine/facts.h"
#include "http/http.h"

#define BRIG_ENGINE_POOL 8
/* Deadline for transfers (archives, builds, imports) that may be large. */
#define BRIG_ENGINE_TRANSFER_MS (30 * 60 * 1000)

struct brig_engine {
	brig_http_endpoint ep;
	char api[16];
	unsigned timeout_ms;
	size_t max_json;
	pthread_mutex_t lock;
	brig_http_conn *idle[BRIG_ENGINE_POOL];
	int nidle;
	brig_engine_facts facts;
};

/* A connection from the pool or a new one. Errors: BRIG_ENOTSENT. */
int brig_engine__conn_get(brig_engine *e, brig_http_conn **out, int64_t deadline_ms, brig_error **err);
/* Returns c to the pool when reusable, else frees it. */
void brig_engine__conn_put(brig_engine *e, brig_http_conn *c);

/* "/v1.41" + formatted path. */
char *brig_engine__path(brig_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct brig_engine_call {
	const char *method;
	const char *path;   /* from brig_engine__path */
	json_t *body;       /* JSON body, borrowed; may be NULL */
	const char *what;   /* "create container x" for messages */
	int64_t deadline_ms; /* 0: the client's default */
	bool head;
	/* streaming */
	brig_http_body_reader reader;
	void *reader_payload;
	const char *content_type;
	brig_http_body_cb body_cb;
	void *body_payload;
	const char *const *extra_headers;
} brig_engine_call;

/* Runs a call. A 2xx answer with a JSON body goes to *out when out != NULL.
 * status (may be NULL) receives the HTTP status. Non-2xx answers become
 * errors via brig_engine__status_error. *resp_out (may be NULL) receives the
 * response headers (caller clears). */
int brig_engine__call(brig_engine *e, const brig_engine_call *call, json_t **out, int *status,
		      brig_http_response *resp_out, brig_error **err);

/* Maps a non-2xx status and the daemon's body {"message": …} to an error. */
int brig_engine__status_error(int status, const char *body, size_t len, const char *what, brig_error **err);

/* JSON-lines splitter for events and build/import progress: bounded line
 * buffer, each complete line parsed and handed to cb (borrowed). */
typedef int (*brig_jsonl_cb)(json_t *obj, void *payload);
typedef struct brig_jsonl {
	brig_buf line;
	brig_jsonl_cb cb;
	void *payload;
	int err_code;
	brig_error **err;
} brig_jsonl;

void brig_jsonl_init(brig_jsonl *j, size_t max_line, brig_jsonl_cb cb, void *payload, brig_error **err);
/* Feeds bytes; returns 0 or the error (BRIG_ETOOBIG line too long,
 * BRIG_EPROTO not JSON, or cb's non-zero return). */
int brig_jsonl_feed(brig_jsonl *j, const char *data, size_t len);
int brig_jsonl_finish(brig_jsonl *j);
void brig_jsonl_free(brig_jsonl *j);

/* Decodes a base64 string into a new NUL-terminated buffer, or NULL. */
char *brig_engine__b64decode(const char *in, size_t *out_len);

#endif
