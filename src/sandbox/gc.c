/* gc.c — removes brig's leftovers: runs whose brig died, stale computers,
 * half-created containers and orphaned volumes. Only brig.managed=1 objects
 * are ever looked at. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "guest/host.h"
#include "sandbox/internal.h"
#include "sandbox/pool.h"
#include "util/util.h"

#define GC_GRACE_S 60
/* A brig-init volume is pinned by the filler or run container its creator
 * makes one or two calls after creating it: a short grace covers that. */
#define GC_INIT_GRACE_S 10

typedef struct gc_ctx {
	brig_engine *e;
	const brig_gc_opts *o;
	size_t removed;
} gc_ctx;

static void note(gc_ctx *g, const char *kind, const char *name, const char *why)
{
	if (g->o->report)
		g->o->report(kind, name, why, g->o->payload);
	g->removed++;
}

static json_t *managed_filters(const brig_gc_opts *o)
{
	json_t *f = json_pack("{s:[s]}", "label", BRIG_LABEL_MANAGED "=1");
	if (o->extra_label)
		json_array_append_new(json_object_get(f, "label"), json_string(o->extra_label));
	return f;
}

static const char *lbl(json_t *labels, const char *k) { return json_string_value(json_object_get(labels, k)); }

static void gc_containers(gc_ctx *g, json_t *list, int64_t now, int64_t retention)
{
	size_t i;
	json_t *c;
	json_array_foreach(list, i, c)
	{
		json_t *labels = json_object_get(c, "Labels");
		const char *kind = lbl(labels, BRIG_LABEL_KIND);
		const char *state = json_string_value(json_object_get(c, "State"));
		const char *id = json_string_value(json_object_get(c, "Id"));
		const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		int64_t created = json_integer_value(json_object_get(c, "Created"));
		if (!kind || !state || !id)
			continue;
		name = name && name[0] == '/' ? name + 1 : name ? name : id;
		const char *why = NULL;
		const char *sid = lbl(labels, BRIG_LABEL_POOL);
		bool member = sid && strncmp(name, BRIG_POOL_NAME_PREFIX, strlen(BRIG_POOL_NAME_PREFIX)) == 0;
		if (member) {
			/* Gone: on this host, its lock file is free; without one
			 * to look at (another host or BRIG_RUN_DIR), the member is
			 * past its max age, which a live server never lets pass. */
			char host[65] = "";
			gethostname(host, sizeof host - 1);
			const char *h = lbl(labels, BRIG_LABEL_POOL_HOST);
			const char *a = lbl(labels, BRIG_LABEL_POOL_MAX_AGE);
			int64_t max_age = a ? strtoll(a, NULL, 10) : 0;
			int gone = h && strcmp(h, host) == 0 ? brig_sandbox__pool_server_gone(sid) : -1;
			if (gone < 0) /* no lock to look at */
				gone = max_age > 0 && now - created > max_age + 5 * GC_GRACE_S;
			if (gone)
				why = "warm pool member of a brig serve that is gone";
		} else if (strcmp(state, "created") == 0 && now - created > GC_GRACE_S) {
			why = "created but never started: its creator died";
		} else if (strcmp(kind, "run") == 0) {
			const char *d = lbl(labels, BRIG_LABEL_DEADLINE);
			int64_t deadline = d ? strtoll(d, NULL, 10) : 0;
			bool ended = strcmp(state, "running") != 0 && strcmp(state, "paused") != 0;
			if (deadline && now > deadline + GC_GRACE_S)
				why = "disposable run past its deadline: its brig died";
			else if (ended && ((deadline && now >= deadline) || now - created > GC_GRACE_S))
				why = "disposable run that ended without being removed: its brig died";
		} else if (strcmp(kind, "computer") == 0 && retention >= 0 &&
			   (strcmp(state, "exited") == 0 || strcmp(state, "dead") == 0)) {
			cleanup_json json_t *full = NULL;
			if (brig_engine_container_inspect(g->e, &full, id, NULL) == 0) {
				int64_t fin = brig_sandbox__parse_time(json_string_value(
					json_object_get(json_object_get(full, "State"), "FinishedAt")));
				if (fin > 0 && now - fin > retention)
					why = "stopped computer past the retention age";
			}
		}
		if (!why)
			continue;
		note(g, "container", name, why);
		if (g->o->dry_run)
			continue;
		if (member)
			brig_sandbox__pool_remove(g->e, id);
		else if (strcmp(kind, "computer") == 0)
			brig_computer_destroy(g->e, id, NULL);
		else
			brig_engine_container_remove(g->e, id, true, true, NULL);
	}
}

/* True for "brig-init-" and 16 lowercase hex digits, for its marker (the
 * same and "-ok": made once the copy was seen whole) and for its readable
 * copy for gVisor (the same and "-r"). */
static bool init_volume_name(const char *n)
{
	return strncmp(n, "brig-init-", 10) == 0 && strspn(n + 10, "0123456789abcdef") == 16 &&
	       (strlen(n) == 26 || strcmp(n + 26, "-ok") == 0 || strcmp(n + 26, "-r") == 0);
}

/* A brig-init volume of another brig (an older or newer build) that no
 * container mounts any more, after its grace. This brig's own stays. Docker
 * refuses to remove a volume a container (of any label) mounts, so one
 * taken between the look and the remove stays too. */
static void gc_init_volume(gc_ctx *g, const char *vname, int64_t created, int64_t now)
{
	const char *mine = brig_guest__volume_name();
	if (!init_volume_name(vname) || (mine && strncmp(vname, mine, 26) == 0))
		return;
	if (created && now - created <= GC_INIT_GRACE_S)
		return;
	cleanup_json json_t *f = json_pack("{s:[s]}", "volume", vname);
	cleanup_json json_t *users = NULL;
	if (brig_engine_container_list(g->e, &users, true, f, NULL) != 0 || json_array_size(users) > 0)
		return;
	if (!g->o->dry_run && brig_engine_volume_remove(g->e, vname, false, NULL) != 0)
		return;
	note(g, "volume", vname, "brig-init of another brig build that no container uses");
}

static void gc_volumes(gc_ctx *g, json_t *vols, json_t *containers, int64_t now)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(vols, "Volumes"), i, v)
	{
		const char *vname = json_string_value(json_object_get(v, "Name"));
		const char *owner = lbl(json_object_get(v, "Labels"), BRIG_LABEL_CONTAINER);
		const char *kind = lbl(json_object_get(v, "Labels"), BRIG_LABEL_KIND);
		int64_t created = brig_sandbox__parse_time(json_string_value(json_object_get(v, "CreatedAt")));
		if (vname && kind && strcmp(kind, "init") == 0) {
			gc_init_volume(g, vname, created, now);
			continue;
		}
		if (!vname || !owner)
			continue;
		/* A creator makes the volumes just before the container: leave young ones. */
		if (created && now - created <= GC_GRACE_S)
			continue;
		bool alive = false;
		size_t k;
		json_t *c;
		json_array_foreach(containers, k, c)
		{
			/* A claimed pool member mounts volumes named after its pool name. */
			size_t mi;
			json_t *mt;
			json_array_foreach (json_object_get(c, "Mounts"), mi, mt) {
				const char *mn = json_string_value(json_object_get(mt, "Name"));
				if (mn && strcmp(mn, vname) == 0)
					alive = true;
			}
			size_t m;
			json_t *n;
			json_array_foreach(json_object_get(c, "Names"), m, n)
			{
				const char *s = json_string_value(n);
				if (s && s[0] == '/' && strcmp(s + 1, owner) == 0)
					alive = true;
			}
		}
		if (alive)
			continue;
		note(g, "volume", vname, "its container is gone");
		if (!g->o->dry_run)
			brig_engine_volume_remove(g->e, vname, true, NULL);
	}
}

int brig_gc(brig_engine *e, const brig_gc_opts *opts, size_t *removed, brig_error **err)
{
	brig_gc_opts defaults = BRIG_GC_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int rc = brig__opts_check(opts->version, BRIG_GC_OPTS_VERSION, "gc options", err);
	if (rc)
		return rc;
	int64_t retention = opts->retention_s == 0 ? 24 * 3600 : opts->retention_s;
	gc_ctx g = {.e = e, .o = opts};
	int64_t now = brig_wall_s();
	cleanup_json json_t *filters = managed_filters(opts);
	cleanup_json json_t *containers = NULL;
	rc = brig_engine_container_list(e, &containers, true, filters, err);
	if (rc)
		return brig__error_prefix(err, rc, "gc");
	gc_containers(&g, containers, now, retention);
	/* Volumes are judged against what exists after the container pass. */
	json_decref(containers);
	containers = NULL;
	cleanup_json json_t *all_filters = json_pack("{s:[s]}", "label", BRIG_LABEL_MANAGED "=1");
	if ((rc = brig_engine_container_list(e, &containers, true, all_filters, err)) != 0)
		return brig__error_prefix(err, rc, "gc");
	cleanup_json json_t *vols = NULL;
	if ((rc = brig_engine_volume_list(e, &vols, filters, err)) != 0)
		return brig__error_prefix(err, rc, "gc");
	gc_volumes(&g, vols, containers, now);
	if (removed)
		*removed = g.removed;
	return 0;
}
