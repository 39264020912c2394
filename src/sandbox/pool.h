/* pool.h — the sandbox side of warm pools (brig serve --pool): started
 * computers of a default spec made before anyone asks, and how one becomes
 * a session's computer (a claim). Implemented in pool.c; the pools
 * themselves (sizes, refill, age) live in src/serve/pool.c.
 *
 * A member is a computer whose labels carry no identity: Docker labels
 * cannot change after a create, so a member is labelled BRIG_LABEL_POOL
 * (its server's id), BRIG_LABEL_POOL_IMAGE and BRIG_LABEL_POOL_MAX_AGE,
 * named BRIG_POOL_NAME_PREFIX…, and keeps those labels for life.
 *
 * A claim: the identity is recorded in the labels of an empty volume
 * "<name>-identity" (never mounted; out of the sandbox's reach), then the
 * member is renamed to the session's deterministic name. The rename is the race arbiter: Docker gives a name
 * to one container only, so racing claims and plain creates of one
 * identity end with one computer (a loser adopts the winner; a losing
 * member goes back to its pool untouched but for the file).
 *
 * Readers (list, inspect, adopt) fill a claimed member's identity labels
 * in memory: from the identity the caller asked for when the container's
 * name is that identity's name (the name is a hash of the identity, so it
 * proves it), else from the identity volume, believed only when its name
 * hash equals the container's name. An unclaimed member is nobody's computer: lists skip it. */
#ifndef BRIG_SANDBOX_POOL_H
#define BRIG_SANDBOX_POOL_H

#include <jansson.h>
#include <stdbool.h>

#include "brig/sandbox.h"

#define BRIG_LABEL_POOL "brig.pool"                 /* the server's id (12 hex) */
#define BRIG_LABEL_POOL_IMAGE "brig.pool.image"     /* the image the pool was asked for */
#define BRIG_LABEL_POOL_MAX_AGE "brig.pool.max-age" /* seconds a member may wait */
#define BRIG_LABEL_POOL_HOST "brig.pool.host"       /* the server's host name */
#define BRIG_POOL_NAME_PREFIX "brig-pool-"

/* What a server lends brig_computer_create. take: a started member of spec
 * hash `hash` (0, *out_id malloc'd) or BRIG_ENOTFOUND; give_back: a member
 * taken but not used; claimed: a member is a session's computer now (the
 * pool refills). Called from any thread. */
typedef struct brig_pool_hooks {
	int (*take)(void *payload, char **out_id, const char *hash);
	void (*give_back)(void *payload, const char *id, const char *hash);
	void (*claimed)(void *payload, const char *id, const char *hash);
	void *payload;
} brig_pool_hooks;

/* Installs hooks (NULL: none) for every brig_computer_create of this
 * process. The server installs them before it serves, removes them after. */
void brig_sandbox__pool_hooks_set(const brig_pool_hooks *h);

/* Turns a member of hash into the computer `name` of identity id: 0 with
 * *out_id (malloc'd); BRIG_ENOTFOUND when there is no member to claim or
 * another container got the name first (the caller creates or adopts as
 * without a pool). */
int brig_sandbox__pool_claim(brig_engine *e, char **out_id, const char *name, const brig_identity *id, const char *hash,
			     brig_error **err);

/* Fills labels (a container's, mutable) with the identity of a claimed
 * member, as the file comment says; proof (may be NULL) is the identity
 * the caller looked the container up by. Returns true when the container
 * is an unclaimed member (nobody's computer). */
bool brig_sandbox__pool_fill(brig_engine *e, json_t *labels, const char *cid, const char *name,
			     const brig_identity *proof);

/* The same for one of many containers: *vols (NULL at first, the
 * caller's to free) holds the identity volumes, listed once on first need. */
bool brig_sandbox__pool_fill_listed(brig_engine *e, json_t *labels, const char *cid, const char *name,
				    const brig_identity *proof, json_t **vols);

/* Whether labels are a pool member's (claimed or not). */
bool brig_sandbox__pool_labels(json_t *labels);

/* Makes a started member named name (BRIG_POOL_NAME_PREFIX…) of spec with
 * the extra labels pool_labels (borrowed); *out_id malloc'd. The spec may
 * not carry env. Implemented in computer.c (it is a create). */
int brig_computer__pool_make(brig_engine *e, char **out_id, const brig_spec *spec, const char *name,
			     json_t *pool_labels, brig_error **err);

/* "<name>-identity" (malloc'd): the volume recording a claimed member's identity. */
char *brig_sandbox__pool_identity_volume(const char *name);

/* Removes a member with its volumes (no identity: destroy refuses it). */
void brig_sandbox__pool_remove(brig_engine *e, const char *id);

/* Whether the server of id that made members on this host is gone: 1 when
 * its lock file (brig_sandbox__pool_lock_path) exists and nobody holds it
 * (stopped, or killed), 0 while it is held, -1 when there is no such file
 * here (another BRIG_RUN_DIR: the caller judges by age instead). */
int brig_sandbox__pool_server_gone(const char *server_id);

/* The lock file a server of id holds while it lives (malloc'd):
 * $BRIG_RUN_DIR (default /run/brig) /pools/ID.lock. */
char *brig_sandbox__pool_lock_path(const char *server_id);

#endif
