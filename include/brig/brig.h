/* brig/brig.h — the whole public API of libbrig in one include: errors, the
 * Engine API client, the spec, computers, runs, sessions, the store, images. */
#ifndef BRIG_BRIG_H
#define BRIG_BRIG_H

#include "brig/common.h"
#include "brig/egress.h"
#include "brig/engine.h"
#include "brig/error.h"
#include "brig/guest.h"
#include "brig/image.h"
#include "brig/run.h"
#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/spec.h"
#include "brig/store.h"

#endif
