/* sessions.h — a session of the store as `brig sessions ls` and GET
 * /v1/sessions?computers=true show it: what Docker says of its current
 * computer, and the store put right when it says the session runs but the
 * computer lost its files; and a session removed as `brig sessions rm` and
 * DELETE /v1/sessions/{ns}/{agent}/{session} remove it. Private to src/;
 * one home so both surfaces say and record the same thing.
 */
#ifndef BRIG_OPS_SESSIONS_H
#define BRIG_OPS_SESSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "brig/engine.h"
#include "brig/error.h"
#include "brig/store.h"

typedef struct ops_session_seen {
	/* Docker's State.Status of the current computer ("running", "paused",
	 * "exited"…), "gone" (no such container, or the record names none), or
	 * "unknown" (no daemon to ask, or it did not say). */
	char computer[32];
	/* The store said running or paused but the computer is exited, dead
	 * or gone: was is what it said, now what was recorded (destroyed when
	 * gone, else stopped; `brig up` then restores the latest checkpoint). */
	bool fixed;
	brig_store_state was, now;
} ops_session_seen;

/* Asks Docker (e; NULL: none to ask, computer is "unknown" and nothing is
 * fixed) about r's current computer into *out and, when the store said it
 * runs but it lost its files, records r's generation as out->now in s and
 * sets r->state to it. Returns 0, or the store's error (out->fixed set,
 * r->state unchanged): BRIG_ESTORE, BRIG_EUNCERTAIN. */
int ops_session_observe(brig_engine *e, brig_store *s, brig_store_session *r, ops_session_seen *out, brig_error **err);

/* What ops_session_remove did. */
typedef struct ops_session_removed {
	size_t removed; /* checkpoints removed (checkpoints: true) */
	size_t kept;    /* checkpoints that stay (checkpoints: false) */
} ops_session_removed;

/* Called after each computer of the session was destroyed (name
 * borrowed). */
typedef void (*ops_session_destroyed_cb)(const char *name, uint32_t generation, void *payload);

/* Removes session r (a record of s; the caller has looked it up, and words
 * its absence) from s: refuses while any computer of the session exists
 * unless force, which destroys each first (destroyed is told of each; may
 * be NULL). Its checkpoints and their blobs go only with checkpoints;
 * its command history stays. *out is filled on success. Errors:
 * BRIG_ECONFLICT (a computer exists and not force, named with its
 * generation and state: nothing was removed), those of
 * brig_store_checkpoint_list, brig_computer_list, brig_computer_destroy
 * (prefixed "sessions rm: the session stays in the store": computers
 * destroyed before it stay destroyed) and brig_session_remove. */
int ops_session_remove(brig_engine *e, brig_store *s, const brig_store_session *r, bool force, bool checkpoints,
		       ops_session_destroyed_cb destroyed, void *payload, ops_session_removed *out, brig_error **err);

#endif
