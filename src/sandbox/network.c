/* network.c — the one isolated bridge per host ("brig-sandbox", icc off):
 * race-safe creation, removal once empty. */
#include <string.h>
#include <time.h>

#include "brig/sandbox.h"
#include "sandbox/firewall.h"
#include "sandbox/internal.h"
#include "util/util.h"

int brig_network__list_exact(brig_engine *e, json_t **out, const char *name, brig_error **err)
{
	cleanup_json json_t *filters = json_pack("{s:[s]}", "name", name);
	cleanup_json json_t *all = NULL;
	int rc = brig_engine_network_list(e, &all, filters, err);
	if (rc)
		return rc;
	json_t *exact = json_array();
	size_t i;
	json_t *n;
	json_array_foreach(all, i, n)
	{
		const char *nm = json_string_value(json_object_get(n, "Name"));
		if (nm && strcmp(nm, name) == 0)
			json_array_append(exact, n);
	}
	*out = exact;
	return 0;
}

bool brig_network__is_brigs(json_t *net)
{
	const char *m = json_string_value(json_object_get(json_object_get(net, "Labels"), BRIG_LABEL_MANAGED));
	return m && strcmp(m, "1") == 0;
}

int brig_network__ensure_named(brig_engine *e, json_t **keep_out, const char *name, json_t *body, const char *subnet,
			       const char *advice, brig_error **err)
{
	cleanup_json json_t *nets = NULL;
	int rc = brig_network__list_exact(e, &nets, name, err);
	if (rc)
		return rc;
	if (json_array_size(nets) == 0) {
		/* A racer may have won (409, or a pool-overlap 403/500 for the same
		 * subnet), or the answer was lost: the listing decides. A racer's
		 * network shows in the list only once the daemon has finished making
		 * it (bridge, iptables), well after our create was refused (measured
		 * with 8 racers: all but one saw an empty list), so look again for a
		 * while, creating again when it is still not there. */
		int64_t give_up = brig_now_ms() + 10000;
		cleanup_free char *why = NULL;
		for (;;) {
			brig_error *cerr = NULL;
			rc = brig_engine_network_create(e, NULL, body, &cerr);
			free(why);
			why = xstrdup(rc ? brig_error_message(cerr) : "");
			brig_error_free(cerr);
			json_decref(nets);
			nets = NULL;
			if ((rc = brig_network__list_exact(e, &nets, name, err)) != 0)
				return rc;
			if (json_array_size(nets) > 0)
				break;
			if (brig_now_ms() >= give_up)
				return brig__error_set(err, BRIG_EDAEMON, 0,
						       "could not create the %s network on %s%s%s; check that the subnet is "
						       "free (`docker network ls`)%s",
						       name, subnet, *why ? ": " : "", why, advice);
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	/* Everyone agrees on the lowest id; the rest are removed when unused. */
	json_t *keep = NULL;
	size_t i;
	json_t *n;
	json_array_foreach(nets, i, n)
	{
		if (!brig_network__is_brigs(n))
			return brig__error_set(err, BRIG_ECONFLICT, 0,
					       "a network named %s exists that brig did not create; remove it or "
					       "rename it",
					       name);
		const char *id = json_string_value(json_object_get(n, "Id"));
		if (id && (!keep || strcmp(id, json_string_value(json_object_get(keep, "Id"))) < 0))
			keep = n;
	}
	const char *keep_id = json_string_value(json_object_get(keep, "Id"));
	if (!keep_id || !*keep_id) /* "" would put sandboxes on Docker's default bridge */
		return brig__error_set(err, BRIG_EPROTO, 0, "the daemon lists the %s network without an id", name);
	json_array_foreach(nets, i, n)
	{
		const char *id = json_string_value(json_object_get(n, "Id"));
		if (id && strcmp(id, keep_id) != 0)
			brig_engine_network_remove(e, id, NULL);
	}
	*keep_out = json_incref(keep);
	return 0;
}

static const char *subnet_of(json_t *net)
{
	return json_string_value(
		json_object_get(json_array_get(json_object_get(json_object_get(net, "IPAM"), "Config"), 0), "Subnet"));
}

int brig_network_ensure(brig_engine *e, char **out_id, const brig_spec *spec, brig_error **err)
{
	int rc = brig_subnet_validate(spec->subnet, err);
	if (rc)
		return rc;
	cleanup_json json_t *body = NULL;
	if ((rc = brig_spec_network_json(&body, spec, err)) != 0)
		return rc;
	cleanup_json json_t *keep = NULL;
	if ((rc = brig_network__ensure_named(e, &keep, BRIG_NETWORK_NAME, body, spec->subnet,
					     " or pick another with --subnet", err)) != 0)
		return rc;
	const char *keep_id = json_string_value(json_object_get(keep, "Id"));
	const char *have = subnet_of(keep);
	if (have && strcmp(have, spec->subnet) != 0)
		return brig__error_set(err, BRIG_ECONFLICT, 0,
				       "the %s network exists on %s, not %s; `brig network rm` it (once no computer "
				       "is attached) to change the subnet",
				       BRIG_NETWORK_NAME, have, spec->subnet);
	/* The host's firewall comes with the bridge: a sandbox must not reach
	 * the host's own services. Checked on every ensure (a reboot drops the
	 * rules, the network stays); failing it fails closed. */
	if ((rc = brig_firewall__install(BRIG_NETWORK_BRIDGE, spec->subnet, err)) != 0)
		return rc;
	if (out_id)
		*out_id = xstrdup(keep_id);
	return 0;
}

/* Asked under the firewall lock: a bridge another brig created since our
 * removal keeps its rules. */
static bool bridge_exists(void *payload)
{
	cleanup_json json_t *nets = NULL;
	if (brig_network__list_exact(payload, &nets, BRIG_NETWORK_NAME, NULL) != 0)
		return true; /* cannot tell: keep the rules */
	return json_array_size(nets) > 0;
}

int brig_network_remove(brig_engine *e, brig_error **err)
{
	cleanup_json json_t *nets = NULL;
	int rc = brig_network__list_exact(e, &nets, BRIG_NETWORK_NAME, err);
	if (rc)
		return rc;
	size_t i;
	json_t *n;
	json_array_foreach(nets, i, n)
	{
		const char *id = json_string_value(json_object_get(n, "Id"));
		if (!brig_network__is_brigs(n))
			return brig__error_set(err, BRIG_ECONFLICT, 0, "network %s is not brig's; not removing it",
					       BRIG_NETWORK_NAME);
		/* The list omits endpoints: inspect for the attached containers. */
		cleanup_json json_t *full = NULL;
		if ((rc = brig_engine_network_inspect(e, &full, id, err)) != 0) {
			if (rc == BRIG_ENOTFOUND) {
				brig__error_clear(err);
				continue;
			}
			return rc;
		}
		json_t *cs = json_object_get(full, "Containers");
		if (json_object_size(cs) > 0) {
			brig_buf names;
			brig_buf_init(&names, 4096);
			const char *k;
			json_t *v;
			json_object_foreach(cs, k, v)
			{
				const char *nm = json_string_value(json_object_get(v, "Name"));
				/* The daemon's names: past 4 KiB the list is cut. */
				if (brig_buf_printf(&names, "%s%s", names.len ? ", " : "", nm ? nm : k) < 0)
					break;
			}
			rc = brig__error_set(err, BRIG_EBUSY, 0,
					     "network %s still has %zu attached container(s): %s; destroy them first",
					     BRIG_NETWORK_NAME, json_object_size(cs), brig_buf_cstr(&names));
			brig_buf_free(&names);
			return rc;
		}
		rc = brig_engine_network_remove(e, id, err);
		if (rc == BRIG_ENOTFOUND) {
			brig__error_clear(err);
			rc = 0;
		}
		if (rc)
			return rc;
	}
	return brig_firewall__remove(bridge_exists, e, err);
}
