/* sessions.h — a session of the store as `brig sessions ls` and GET
 * /v1/sessions?computers=true show it: what Docker says of its current
 * computer, and the store put right when it says the session runs but the
 * computer lost its files. Private to src/; one home so both surfaces say
 * and record the same thing.
 */
#ifndef BRIG_OPS_SESSIONS_H
#define BRIG_OPS_SESSIONS_H

#include <stdbool.h>

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

#endif
