/* firewall.h — the host firewall rules that keep sandboxes on the isolated
 * bridge away from the host: installed with the bridge, removed with it.
 * Private to src/sandbox (network.c calls it). */
#ifndef BRIG_SANDBOX_FIREWALL_H
#define BRIG_SANDBOX_FIREWALL_H

#include <stdbool.h>

#include "brig/error.h"

/* The comment every brig rule carries: removal deletes exactly these. */
#define BRIG_FIREWALL_COMMENT "brig-sandbox"

/* Environment variable that turns the firewall off ("off"): for a daemon
 * on another machine, where brig cannot reach the host's iptables. The
 * bridge then exposes that host's services to the sandboxes. */
#define BRIG_FIREWALL_ENV "BRIG_FIREWALL"

/* Installs, idempotently (each rule is checked with iptables -C first),
 * the rules for bridge interface `bridge` carrying `subnet`:
 *   filter INPUT (at the top):
 *     -i brig0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
 *     -i brig0 -j DROP            (no host service is reachable…)
 *   filter DOCKER-USER (FORWARD, at the top):
 *     -i brig0 -d 169.254.0.0/16 -j DROP     (link-local metadata)
 *     -i brig0 ! -o brig0 --ctstate DNAT --ctdir ORIGINAL -j ACCEPT
 *     -o brig0 ! -i brig0 --ctstate DNAT --ctdir REPLY -j ACCEPT
 *                                 (…except ports Docker publishes)
 *     -o brig0 ! -i brig0 --ctstate NEW ! --ctstate DNAT -j DROP
 *                                 (into the bridge only through a
 *                                  published binding, see firewall.c)
 *   nat POSTROUTING:
 *     -s subnet ! -o brig0 -j MASQUERADE    (the internet)
 * The bridge is created with Docker's own masquerading off, which is what
 * lets published ports take the DNAT (FORWARD) path instead of the
 * userland proxy's INPUT path (see firewall.c).
 * Errors: BRIG_EINVAL (bad bridge or subnet), BRIG_EDENIED (iptables is
 * missing, refuses, or the bridge is not on this machine — the message
 * says what to do). With BRIG_FIREWALL=off: 0, nothing done. */
int brig_firewall__install(const char *bridge, const char *subnet, brig_error **err);

/* Removes every rule carrying BRIG_FIREWALL_COMMENT, unless still_needed
 * (may be NULL) answers true; it is asked while brig's firewall lock is
 * held, so a bridge created meanwhile by another brig keeps its rules.
 * Missing iptables or BRIG_FIREWALL=off: 0, nothing done.
 * Errors: BRIG_EDENIED (iptables refused). */
int brig_firewall__remove(bool (*still_needed)(void *payload), void *payload, brig_error **err);

/* The comment on the egress network's rules (removed on their own). */
#define BRIG_FIREWALL_EGRESS_COMMENT "brig-egress"

/* Installs, idempotently, the rules of the egress network's bridge:
 *   filter INPUT (at the top):
 *     -i BRIDGE --ctstate RELATED,ESTABLISHED -j ACCEPT
 *     -i BRIDGE -p tcp -d GATEWAY --dport PORT -j ACCEPT   (the proxy)
 *     -i BRIDGE -j DROP                                      (nothing else on the host)
 *     -i lo -p tcp -d GATEWAY --dport PORT -j ACCEPT         (brig's own probe)
 *     -p tcp -d GATEWAY --dport PORT -j DROP                 (no other container)
 *   filter DOCKER-USER: -i BRIDGE -j DROP, -o BRIDGE -j DROP (no forwarding)
 * Errors as brig_firewall__install. With BRIG_FIREWALL=off: 0. */
int brig_firewall__install_egress(const char *bridge, const char *gateway, const char *port, brig_error **err);

/* Removes every rule carrying BRIG_FIREWALL_EGRESS_COMMENT. */
int brig_firewall__remove_egress(brig_error **err);

/* Path of the iptables program brig uses, or NULL when there is none. */
const char *brig_firewall__iptables(void);

#endif
