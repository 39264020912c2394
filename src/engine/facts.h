/* facts.h — what a process learned about one daemon, kept with the handle
 * it learned it through: a process may hold handles to several daemons (a
 * library user, bench_runtime's second dockerd), and a fact of one is no
 * fact of another. */
#ifndef BRIG_ENGINE_FACTS_H
#define BRIG_ENGINE_FACTS_H

#include <pthread.h>
#include <stdbool.h>

#include "brig/engine.h"
#include "brig/spec.h"

typedef struct brig_engine_facts {
	pthread_mutex_t mu;
	bool init_ok[2];    /* guest/volume.c: brig-init's volume seen whole (execute-only, readable) */
	bool shift_known;   /* shift learned */
	brig_idshift shift; /* the daemon's userns-remap shift */
} brig_engine_facts;

/* e's facts; lock mu around every read and write. */
brig_engine_facts *brig_engine__facts(brig_engine *e);

#endif
