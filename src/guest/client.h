/* client.h — what the three files of the brig-init client share
 * (client.c: the relay, its I/O thread, waiters and the message parser;
 * client_procs.c: commands; client_files.c: files). Private to src/guest/. */
#ifndef BRIG_GUEST_CLIENT_H
#define BRIG_GUEST_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "guest/host.h"
#include "guest/proto.h"

typedef struct gframe {
	struct gframe *next;
	uint8_t type;
	uint32_t id;
	uint32_t len;
	unsigned char *payload;
} gframe;

typedef struct gwaiter {
	struct gwaiter *next;
	uint32_t req;
	int64_t proc;    /* bound proc id, 0: none */
	bool binds_proc; /* STARTED or OK carries the proc this waiter then gets */
	int efd;
	gframe *head, *tail;
	size_t queued;
	bool overflow;
	int64_t stdin_credit; /* FLOW: stdin bytes this call may still send */
} gwaiter;

typedef struct outframe {
	struct outframe *next;
	unsigned char *buf;
	size_t len, off;
} outframe;

struct brig_guest {
	pthread_mutex_t mu;
	pthread_cond_t room; /* the out queue has room, or the handle died */
	pthread_t th;
	bool th_started;
	int wake; /* eventfd: rung when a frame is queued or at free */
	brig_guest_transport t;
	char *what;
	gwaiter *waiters;
	outframe *oq_head, *oq_tail;
	size_t oq_bytes;
	bool closing;
	bool flow; /* brig-init said FLOW 1: windows per call (guest/proto.h) */
	bool dead;
	int dead_code;
	char *dead_msg;
	uint32_t next_req;
	uint64_t tag_seq;
	char boot_id[65];
	char relay_err[BRIG_GUEST_RELAY_ERR_CAP + 1];
	size_t relay_err_len;
	brig_gp_reader rd;
};

/* One received message's fields, checked for shape and caps; strings
 * point into the frame's payload. */
typedef struct gmsg {
	uint64_t ihas, shas;
	int64_t iv[64];
	const unsigned char *sv[64];
	uint32_t slen[64];
	const unsigned char *data;
	uint32_t data_len;
	json_t *argv; /* collected when asked */
} gmsg;

void brig_guest__drain(int efd);
void brig_guest__frame_free(gframe *f);
/* Ends the handle (first reason wins) and wakes every waiter; mu held. */
void brig_guest__die_locked(brig_guest *g, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The dead handle's error into *err; mu held. Returns its code. */
int brig_guest__dead_error(brig_guest *g, brig_error **err);
/* A waiter for the next request id (binds_proc: STARTED or OK gives it the proc). */
gwaiter *brig_guest__waiter_add(brig_guest *g, bool binds_proc);
void brig_guest__waiter_remove(brig_guest *g, gwaiter *w);
/* True when a frame of n bytes would be queued at once (or the handle is
 * dead: a send then fails at once). */
bool brig_guest__out_room(brig_guest *g, size_t n);
/* Queues one encoded frame (consumed), waiting until deadline_ms for room.
 * BRIG_ENOTSENT: dead, or no room in time; BRIG_EINVAL: too big. */
int brig_guest__send_frame(brig_guest *g, brig_gp_enc *e, uint8_t type, uint32_t id, int64_t deadline_ms,
			   brig_error **err);
/* The waiter's next frame (caller frees), 1 when extra_fd is readable,
 * BRIG_ETIMEDOUT, BRIG_ETOOBIG (overflowed) or the dead handle's code. */
int brig_guest__waiter_next(brig_guest *g, gwaiter *w, gframe **out, int64_t deadline_ms, int extra_fd,
			    brig_error **err);
/* Checks and splits f's payload into m; BRIG_EPROTO kills the handle. */
int brig_guest__msg_parse(brig_guest *g, const gframe *f, gmsg *m, bool want_argv, brig_error **err);
bool brig_guest__has_i(const gmsg *m, uint8_t t);
int64_t brig_guest__geti(const gmsg *m, uint8_t t, int64_t dflt);
json_t *brig_guest__gets_json(const gmsg *m, uint8_t t);
/* An ERROR frame as a brig error (errno mapped, message sanitized). */
int brig_guest__error_from(brig_guest *g, const gframe *f, const char *op, brig_error **err);
/* A frame the call did not expect: the handle dies with BRIG_EPROTO. */
int brig_guest__unexpected(brig_guest *g, const gframe *f, const char *op, brig_error **err);
int64_t brig_guest__grace(int64_t deadline_ms);
/* FLOW: sends CREDIT n (-1: no limit) for proc; errors are the send's. */
int brig_guest__credit(brig_guest *g, int64_t proc, int64_t n, int64_t deadline_ms, brig_error **err);
/* One request answered by OK (parsed into *m; with keep, the frame the
 * strings point into) or ERROR. deadline_ms 0: 60 s. */
int brig_guest__simple_call(brig_guest *g, brig_gp_enc *e, uint8_t type, const char *op, gmsg *m, gframe **keep,
			    int64_t deadline_ms, brig_error **err);

#endif
