/* capture.h — what computer execs and disposable runs share: the bounded
 * head+tail output capture and the small sandbox helpers both call. Private. */
#ifndef BRIG_SANDBOX_CAPTURE_H
#define BRIG_SANDBOX_CAPTURE_H

#include "brig/sandbox.h"
#include "util/util.h"

typedef struct brig_capturer {
	size_t half;  /* bytes kept at the head, and at the tail */
	brig_buf head;
	char *ring;   /* tail ring of `half` bytes */
	size_t ring_pos, ring_len;
	uint64_t total;
} brig_capturer;

void brig_capturer_init(brig_capturer *c, size_t max);
void brig_capturer_add(brig_capturer *c, const char *data, size_t len);
/* Moves the result into out and frees c. */
void brig_capturer_finish(brig_capturer *c, brig_capture *out);
void brig_capturer_free(brig_capturer *c);

/* Output sink that captures both streams and forwards to a user callback. */
typedef struct brig_output_tee {
	brig_capturer out, err;
	brig_engine_output_cb user;
	void *user_payload;
} brig_output_tee;

void brig_output_tee_init(brig_output_tee *t, size_t max, brig_engine_output_cb user, void *payload);
int brig_output_tee_cb(int stream, const char *data, size_t len, void *payload);
void brig_output_tee_finish(brig_output_tee *t, brig_exec_result *res);

/* The container-level part of ending a command that Docker cannot kill:
 * stop the container right away. Returns 0 or the stop's error. */
int brig_sandbox__stop_now(brig_engine *e, const char *id, brig_error **err);

/* Docker reports an exec whose program does not exist as 126; the shell
 * convention (and docker run's) is 127. Fixes res->exit_code from the
 * daemon's message in the captured stderr. */
void brig_sandbox__fix_not_found(brig_exec_result *res);

/* Memory and CPUs of the daemon's host: read from this kernel when the
 * daemon is local (no round trip: /info forks runc on every call), from
 * /info otherwise. */
int brig_sandbox__host_limits(brig_engine *e, brig_host_limits *out, brig_error **err);

/* A dockerd run with --debug logs JSON request bodies of up to 4 KiB,
 * masking only a few key names: an exec body that carries a credential is
 * padded past that size (the daemon ignores the unknown field). */
void brig_sandbox__pad_secret_body(json_t *exec_config);

/* Resolves an image reference to its id (out may be NULL: only check it
 * exists). *etc_hosts (may be NULL) says whether the image carries
 * BRIG_LABEL_ETC_HOSTS=optional, so a container with network none can do
 * without Docker's network sandbox. A missing image is BRIG_ENOTFOUND saying
 * how to build it: brig never pulls. */
int brig_sandbox__resolve_image(brig_engine *e, char **out, bool *etc_hosts, const char *image, brig_error **err);

/* Parses Docker's RFC 3339 timestamps to unix seconds (0 when unparsable). */
int64_t brig_sandbox__parse_time(const char *s);

#endif
