/* oom.h — whether the kernel's OOM killer struck inside a container, from
 * the daemon's own event log. Private to src/sandbox. */
#ifndef BRIG_SANDBOX_OOM_H
#define BRIG_SANDBOX_OOM_H

#include <stdbool.h>
#include <stdint.h>

#include "brig/engine.h"

/* True when the daemon logged an "oom" event for container id at or after
 * since_unix (unix seconds). State.OOMKilled only covers PID 1: a command
 * run by exec that the OOM killer ends shows up only as this event (and
 * exit code 137). Waits at most ~2 s for an event still in flight; any
 * failure to ask answers false. */
bool brig_sandbox__oom_since(brig_engine *e, const char *id, int64_t since_unix);

#endif
