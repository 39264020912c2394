/* peers.c — how many connections each sandbox address holds at the proxy.
 *
 * Why: the proxy's connection cap is shared by every sandbox, and a
 * connection that sends nothing holds its slot until the head time-out;
 * one sandbox could take every slot, and each accepted connection costs a
 * daemon look-up and a ledger row. So each address gets a share. */
#include <string.h>

#include "egress/egress_internal.h"

bool brig_egress__peer_take(brig_egress_peers *p, uint32_t addr, int cap)
{
	bool ok = false;
	pthread_mutex_lock(&p->lock);
	size_t free_slot = BRIG_EGRESS_PEER_SLOTS;
	size_t i;
	for (i = 0; i < BRIG_EGRESS_PEER_SLOTS; i++) {
		if (p->slot[i].count > 0 && p->slot[i].addr == addr)
			break;
		if (p->slot[i].count == 0 && free_slot == BRIG_EGRESS_PEER_SLOTS)
			free_slot = i;
	}
	if (i == BRIG_EGRESS_PEER_SLOTS && free_slot < BRIG_EGRESS_PEER_SLOTS) {
		i = free_slot;
		p->slot[i].addr = addr;
	}
	/* no slot left (as many addresses as slots): refused too */
	if (i < BRIG_EGRESS_PEER_SLOTS && p->slot[i].count < cap) {
		p->slot[i].count++;
		ok = true;
	}
	pthread_mutex_unlock(&p->lock);
	return ok;
}

void brig_egress__peer_drop(brig_egress_peers *p, uint32_t addr)
{
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < BRIG_EGRESS_PEER_SLOTS; i++)
		if (p->slot[i].count > 0 && p->slot[i].addr == addr) {
			p->slot[i].count--;
			break;
		}
	pthread_mutex_unlock(&p->lock);
}
