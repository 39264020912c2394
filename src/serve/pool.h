/* pool.h — brig serve's warm pools (--pool IMAGE=N): started computers of
 * the default spec for IMAGE, kept N at a time by one thread, claimed by
 * creates of that spec (src/sandbox/pool.h says how a claim works).
 * Private to src/serve/. */
#ifndef BRIG_SERVE_POOL_H
#define BRIG_SERVE_POOL_H

#include "serve/serve.h"
#include "util/util.h"

typedef struct serve_pools serve_pools;

/* Checks the pools of cfg (images exist, no image twice), takes the
 * server's lock (BRIG_RUN_DIR/pools/ID.lock; ID from the host name and
 * listen, so a restart has the same one), adopts the members a previous
 * run left, installs the claim hooks and starts the refill thread. *out
 * NULL when cfg has no pools. Errors: BRIG_EINVAL (naming --pool),
 * BRIG_ECONFLICT (another live server holds the lock), BRIG_EIO. */
int serve_pools_start(serve_pools **out, const serve_config *cfg, const char *listen, brig_error **err);
/* Stops the thread and removes the hooks; members stay for a restart
 * (brig gc removes them once this server is gone). NULL: nothing. */
void serve_pools_stop(serve_pools *p);
/* brig_pool_* metrics in Prometheus text. */
void serve_pools_metrics(serve_pools *p, brig_buf *b);

#endif
