/* brig/egress.h — egress by allowlist: sandboxes of network mode "egress"
 * sit on an internal Docker network whose only reachable address is brig's
 * egress proxy (a host process, `brig egress-proxy`), which forwards HTTP
 * CONNECT (TLS only, SNI must equal the CONNECT host) and plain HTTP (the
 * absolute URI's host must equal the Host header) to the hosts the
 * sandbox's rules allow. Rules change on a running computer.
 * Objects returned through `**out` belong to the caller. */
#ifndef BRIG_EGRESS_H
#define BRIG_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "brig/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRIG_EGRESS_NETWORK "brig-egress" /* internal Docker network */
#define BRIG_EGRESS_BRIDGE "brig-egress"  /* its Linux interface */
#define BRIG_EGRESS_SUBNET "172.30.4.0/24"
#define BRIG_EGRESS_GATEWAY "172.30.4.1" /* the host's address on it: the proxy listens here */
#define BRIG_EGRESS_PORT 3128
/* Longest canonical rule: "*." + a 253-byte name + ":65535", NUL. */
#define BRIG_EGRESS_RULE_SIZE 264
/* Inside a sandbox with secrets: brig's certificate authority, and the
 * system's bundle with it appended (root-owned, read-only to the sandbox). */
#define BRIG_EGRESS_CA_PATH "/runtime/.brig/ca.pem"
#define BRIG_EGRESS_CA_BUNDLE_PATH "/runtime/.brig/ca-bundle.pem"
/* What NAME holds inside: this prefix and 32 random hex digits. */
#define BRIG_EGRESS_PLACEHOLDER_PREFIX "brig-placeholder-"
/* Most rules one sandbox may hold. */
#define BRIG_EGRESS_RULES_MAX 256

/* Parses one rule: a host name ("api.anthropic.com"), or a wildcard for
 * its subdomains ("*.npmjs.org", which does not match "npmjs.org"
 * itself), optionally ":PORT" (1..65535; without it ports 443 and 80).
 * Names are letters, digits, '-' and '.', labels of 1..63, 253 at most;
 * IP addresses are refused (the proxy resolves names itself). Writes the
 * canonical (lowercase) spelling to out. Errors: BRIG_EINVAL saying why. */
BRIG_PUBLIC int brig_egress_rule_parse(char out[BRIG_EGRESS_RULE_SIZE], const char *rule, brig_error **err);

/* True when one of rules (canonical, as brig_egress_rule_parse writes)
 * allows host:port. host is compared case-insensitively. */
BRIG_PUBLIC bool brig_egress_allowed(const char *const *rules, size_t n, const char *host, int port);

/* The folder holding each egress sandbox's rules (NAME.rules) and the
 * proxy's pid, lock and log: $BRIG_EGRESS_DIR, else /var/lib/brig/egress
 * for root, else $XDG_DATA_HOME/brig/egress or ~/.local/share/brig/egress.
 * Errors: BRIG_EINVAL (no absolute home). */
BRIG_PUBLIC int brig_egress_dir(char **out, brig_error **err);

/* The rules of the sandbox whose container is named name: a NULL-terminated
 * array of canonical rules (free each, then the array, or use
 * brig_egress_rules_free). A sandbox without a rules file has none.
 * Errors: BRIG_EINVAL (bad name), BRIG_EIO. */
BRIG_PUBLIC int brig_egress_rules_get(char ***out, size_t *count, const char *name, brig_error **err);
BRIG_PUBLIC void brig_egress_rules_free(char **rules);

/* Replaces the rules of sandbox name (atomically: a connection reads the
 * old or the new set). Errors: BRIG_EINVAL (bad name or rule, too many),
 * BRIG_EIO. */
BRIG_PUBLIC int brig_egress_rules_set(const char *name, const char *const *rules, size_t count, brig_error **err);

/* Adds (allow) or removes (!allow) one rule of the running egress computer
 * name; new connections see it at once. Removing a rule it does not hold
 * is not an error. Errors: BRIG_ENOTFOUND (no such computer), BRIG_EINVAL
 * (not of network egress, bad rule), BRIG_EIO. */
BRIG_PUBLIC int brig_egress_update(brig_engine *e, const char *name, const char *rule, bool allow, brig_error **err);

/* Makes sure the egress network (internal, inter-container traffic off),
 * the host firewall that lets its sandboxes reach only the proxy, and the
 * proxy itself are there: creates or adopts each, race-safe. The proxy is
 * started as a detached `brig egress-proxy` (the brig program: $BRIG_BIN,
 * else this process when it is brig). out_id (may be NULL) gets the
 * network's id. Errors: BRIG_EDAEMON, BRIG_EDENIED (firewall), BRIG_EIO
 * (the proxy did not come up: its log's path is in the message). */
BRIG_PUBLIC int brig_egress_ensure(brig_engine *e, char **out_id, brig_error **err);

/* Removes the egress network and its firewall rules (the proxy ends by
 * itself once the network is gone). Errors: BRIG_EBUSY (containers still
 * attached), BRIG_ECONFLICT (a network of that name is not brig's),
 * BRIG_EDENIED (iptables). */
BRIG_PUBLIC int brig_egress_remove(brig_engine *e, brig_error **err);

/* Serves as the egress proxy on BRIG_EGRESS_GATEWAY:BRIG_EGRESS_PORT until
 * no sandbox has been attached to the egress network for a minute, or the
 * network is gone. One proxy per host (a lock in brig_egress_dir); a second
 * returns 0 at once. Errors: BRIG_EIO (cannot listen), BRIG_EDAEMON,
 * BRIG_EINVAL ($BRIG_EGRESS_HOSTS or $BRIG_EGRESS_UPSTREAM_CA without
 * BRIG_EGRESS_TEST=1: test-only). */
BRIG_PUBLIC int brig_egress_proxy_serve(brig_error **err);

#ifdef __cplusplus
}
#endif

#endif
