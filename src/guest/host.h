/* host.h — the host side of brig-init's protocol (include/brig/guest.h):
 * the client over one relay, and the volume that carries brig-init into
 * every computer. Private to src/.
 *
 * The client (client.c):
 *   - one I/O thread per handle owns the relay: it alone reads and writes it
 *     (so a TLS connection is never used by two threads at once), polling the
 *     relay's fd and an eventfd that callers ring when they queue a frame;
 *   - callers encode whole frames (guest/proto.h) and queue them; the queue
 *     holds at most BRIG_GUEST_OUT_CAP bytes, a caller waits (bounded by its
 *     deadline) for room;
 *   - the I/O thread parses frames with the shared codec (header and length
 *     cap checked before the payload is allocated) and hands each to the
 *     waiter registered for its id: request ids are brig's (from 2^31 up, so
 *     they never meet brig-init's proc ids, 1 up), proc ids are bound to the
 *     waiter whose START or ATTACH answered with them. A waiter's queue is
 *     capped (BRIG_GUEST_WAITER_CAP): past it that call fails with
 *     BRIG_ETOOBIG and the rest is dropped, so no caller can make brig hold
 *     unbounded output. Frames for nobody (a call that gave up) are dropped;
 *   - the waiter parses the payload (fields checked for shape and caps) on
 *     its own thread; a malformed field breaks the whole handle (BRIG_EPROTO).
 *
 * The volume (volume.c): `brig-init-<16 hex of sha256>` holds the brig-init
 * embedded in libbrig at build time (brig_guest__binary); filled once through
 * the archive API by a never-started container of the computer's image.
 */
#ifndef BRIG_GUEST_HOST_H
#define BRIG_GUEST_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/guest.h"
#include "brig/spec.h"
#include "util/util.h"

#define BRIG_GUEST_OUT_CAP (4u << 20)
#define BRIG_GUEST_WAITER_CAP (32u << 20)
/* A command's output window on a FLOW relay: what brig-init may send ahead
 * of the caller's consumption (so what one call can make brig hold). */
#define BRIG_GUEST_WINDOW (4u << 20)
/* Bytes of the relay's own stderr kept for messages. */
#define BRIG_GUEST_RELAY_ERR_CAP 512

/* What the I/O thread reads and writes: the relay's hijacked exec stream,
 * or (tests, a local socket) a plain fd. */
typedef struct brig_guest_transport {
	void *impl;
	int (*fd)(void *impl);
	bool (*pending)(void *impl);
	/* feeds the relay's stdout bytes to cb; > 0 bytes read, 0 end, < 0 error */
	ssize_t (*read)(void *impl, brig_engine_output_cb cb, void *payload, brig_error **err);
	int (*write_some)(void *impl, const void *buf, size_t n, size_t *written, brig_error **err);
	void (*close)(void *impl);
} brig_guest_transport;

/* Opens a handle over an already connected byte stream (takes fd, closes it
 * at free). For tests and for a brig that is inside the container. */
int brig_guest__open_fd(brig_guest **out, int fd, int64_t deadline_ms, brig_error **err);
/* Takes the transport (closed on failure too). */
int brig_guest__open_transport(brig_guest **out, brig_guest_transport t, const char *what, int64_t deadline_ms,
			       brig_error **err);

/* The brig-init program embedded in libbrig, and its volume's name
 * ("brig-init-" + 16 hex). len 0 when this build has none. */
void brig_guest__binary(const unsigned char **data, size_t *len);
const char *brig_guest__volume_name(void);
/* The embedded brig-init's SHA-256 (64 hex), NULL when none. */
const char *brig_guest__init_hash(void);
/* Makes sure the volume exists and holds the embedded binary, filling it
 * through a created (never started) container of image. Errors: the
 * engine's; BRIG_ENOTFOUND when this build has no brig-init. */
int brig_guest__volume_ensure(brig_engine *e, const char *image, brig_error **err);
/* For runs: 0 at once when the marker volume "<volume>-ok" says this
 * build's copy was seen whole, or when the volume exists with this brig's
 * brig.init label (then *check: the caller checks the copy through the
 * run's own container with brig_guest__volume_check); else
 * brig_guest__volume_ensure. */
int brig_guest__volume_quick(brig_engine *e, const char *image, bool *check, brig_error **err);
/* 0 when container cid (created or running, mounting the volume) has
 * /.brig/brig-init byte for byte the embedded program, mode 0511, owned by
 * the container's root (one archive GET of ~100 KB);
 * BRIG_ECORRUPT when not, BRIG_ENOTFOUND when absent, the engine's errors.
 * A copy seen whole counts as ensured for the rest of e's life and makes
 * the marker. */
int brig_guest__volume_check(brig_engine *e, const char *cid, brig_error **err);
/* Makes the marker volume (labelled like the volume, and with the daemon's
 * userns shift when known; errors ignored: the next run looks again). */
void brig_guest__volume_mark(brig_engine *e);
/* The daemon's userns-remap shift (brig_engine_userns_root; zero without
 * remapping) for the tmpfs volumes brig creates: learned once per engine
 * handle (brig_engine_facts) —
 * from the marker volume's label when an ensure or a quick check read it,
 * else from /info. */
int brig_guest__userns_shift(brig_engine *e, brig_idshift *out, brig_error **err);
/* The shift when learned through e (no call); false when not. */
bool brig_guest__userns_shift_known(brig_engine *e, brig_idshift *out);
/* A run's container would not start: trust nothing until seen again
 * (forget, and remove the marker). */
void brig_guest__volume_distrust(brig_engine *e);
/* Makes the next brig_guest__volume_ensure check (and repair) the copy again. */
void brig_guest__volume_forget(brig_engine *e);
/* The same for the volume of mode 0555 ("brig-init-" + 16 hex + "-r") when
 * readable: what gVisor needs (brig_container_opts.init_readable). */
int brig_guest__volume_ensure_mode(brig_engine *e, const char *image, bool readable, brig_error **err);
const char *brig_guest__volume_name_readable(void);

#endif
