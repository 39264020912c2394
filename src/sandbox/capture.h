/* capture.h — what computer execs and disposable runs share: the bounded
 * head+tail output capture and its tee to a user callback. Private. */
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

#endif
