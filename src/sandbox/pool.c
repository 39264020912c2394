/* pool.c — the sandbox side of warm pools: the claim (identity file, then
 * the rename that arbitrates races), the identity of a claimed member for
 * readers, and a gone server's lock. See pool.h for the design. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "sandbox/pool.h"
#include "util/util.h"

static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static brig_pool_hooks hooks;
static bool have_hooks;

void brig_sandbox__pool_hooks_set(const brig_pool_hooks *h)
{
	pthread_mutex_lock(&hooks_lock);
	have_hooks = h != NULL;
	if (h)
		hooks = *h;
	pthread_mutex_unlock(&hooks_lock);
}

static bool get_hooks(brig_pool_hooks *out)
{
	pthread_mutex_lock(&hooks_lock);
	bool have = have_hooks;
	if (have)
		*out = hooks;
	pthread_mutex_unlock(&hooks_lock);
	return have;
}

/* ---- identities of claimed members, by container id ---- */

typedef struct known {
	char cid[72];
	char name[BRIG_NAME_SIZE];
	char ns[BRIG_IDENT_MAX + 1], agent[BRIG_IDENT_MAX + 1], session[BRIG_IDENT_MAX + 1];
	uint32_t gen;
} known;

#define KNOWN_MAX 256
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static known known_ids[KNOWN_MAX];
static size_t known_next;

static void remember(const char *cid, const char *name, const brig_identity *id)
{
	if (strlen(cid) >= sizeof known_ids[0].cid)
		return;
	pthread_mutex_lock(&known_lock);
	known *k = &known_ids[known_next++ % KNOWN_MAX];
	snprintf(k->cid, sizeof k->cid, "%s", cid);
	snprintf(k->name, sizeof k->name, "%s", name);
	snprintf(k->ns, sizeof k->ns, "%s", id->ns);
	snprintf(k->agent, sizeof k->agent, "%s", id->agent);
	snprintf(k->session, sizeof k->session, "%s", id->session);
	k->gen = id->generation;
	pthread_mutex_unlock(&known_lock);
}

static bool recall(known *out, const char *cid, const char *name)
{
	bool found = false;
	pthread_mutex_lock(&known_lock);
	for (size_t i = 0; i < KNOWN_MAX && !found; i++) {
		if (strcmp(known_ids[i].cid, cid) == 0 && strcmp(known_ids[i].name, name) == 0) {
			*out = known_ids[i];
			found = true;
		}
	}
	pthread_mutex_unlock(&known_lock);
	return found;
}

/* ---- the identity volume ---- */

/* "<name>-identity": an empty volume, never mounted, whose labels say whose
 * computer the container called name is. Made in a few ms (a file put into
 * the container through Docker's archive API costs 70–180 ms on a loaded
 * host), out of the sandbox's reach, and removed with the computer
 * (destroy) or after it (gc: its brig.container is gone). */
char *brig_sandbox__pool_identity_volume(const char *name)
{
	return xasprintf("%s-identity", name);
}

static int put_identity(brig_engine *e, const char *name, const brig_identity *id, brig_error **err)
{
	char gen[16];
	snprintf(gen, sizeof gen, "%u", (unsigned)id->generation);
	cleanup_free char *vname = brig_sandbox__pool_identity_volume(name);
	cleanup_json json_t *spec = json_pack(
		"{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}}", "Name", vname, "Labels", BRIG_LABEL_MANAGED, "1",
		BRIG_LABEL_KIND, "volume", BRIG_LABEL_VOLUME, "identity", BRIG_LABEL_CONTAINER, name, BRIG_LABEL_NS,
		id->ns, BRIG_LABEL_AGENT, id->agent, BRIG_LABEL_SESSION, id->session, BRIG_LABEL_GENERATION, gen);
	return brig_engine_volume_create(e, NULL, spec, err);
}

/* The identity in volume labels l, checked against name. */
static bool identity_of(known *k, json_t *l, const char *name)
{
	const char *ns = json_string_value(json_object_get(l, BRIG_LABEL_NS));
	const char *agent = json_string_value(json_object_get(l, BRIG_LABEL_AGENT));
	const char *session = json_string_value(json_object_get(l, BRIG_LABEL_SESSION));
	const char *g = json_string_value(json_object_get(l, BRIG_LABEL_GENERATION));
	if (!ns || !agent || !session || !g)
		return false;
	char *end = NULL;
	unsigned long gen = strtoul(g, &end, 10);
	if (!end || *end || gen < 1 || gen > BRIG_GENERATION_MAX)
		return false;
	brig_identity id = {ns, agent, session, (uint32_t)gen};
	char want[BRIG_NAME_SIZE];
	if (brig_identity_name(want, &id, NULL) != 0 || strcmp(want, name) != 0)
		return false; /* a record no name proves: not this container's */
	snprintf(k->ns, sizeof k->ns, "%s", ns);
	snprintf(k->agent, sizeof k->agent, "%s", agent);
	snprintf(k->session, sizeof k->session, "%s", session);
	k->gen = (uint32_t)gen;
	return true;
}

/* The identity recorded for name: from *vols (the identity volumes,
 * listed once per caller on its first need; vols NULL: inspect the one). */
static bool read_identity(brig_engine *e, known *k, const char *name, json_t **vols)
{
	cleanup_free char *vname = brig_sandbox__pool_identity_volume(name);
	if (vols) {
		if (!*vols) {
			cleanup_json json_t *f =
				json_pack("{s:[s,s]}", "label", BRIG_LABEL_MANAGED "=1", BRIG_LABEL_VOLUME "=identity");
			if (brig_engine_volume_list(e, vols, f, NULL) != 0 || !*vols)
				*vols = json_object();
		}
		size_t i;
		json_t *v;
		json_array_foreach (json_object_get(*vols, "Volumes"), i, v) {
			const char *n = json_string_value(json_object_get(v, "Name"));
			if (n && strcmp(n, vname) == 0)
				return identity_of(k, json_object_get(v, "Labels"), name);
		}
		return false;
	}
	cleanup_json json_t *v = NULL;
	if (brig_engine_volume_inspect(e, &v, vname, NULL) != 0)
		return false;
	return identity_of(k, json_object_get(v, "Labels"), name);
}

bool brig_sandbox__pool_labels(json_t *labels)
{
	return json_string_value(json_object_get(labels, BRIG_LABEL_POOL)) != NULL;
}

static void set_identity(json_t *labels, const char *ns, const char *agent, const char *session, uint32_t gen)
{
	char g[16];
	snprintf(g, sizeof g, "%u", (unsigned)gen);
	json_object_set_new(labels, BRIG_LABEL_NS, json_string(ns));
	json_object_set_new(labels, BRIG_LABEL_AGENT, json_string(agent));
	json_object_set_new(labels, BRIG_LABEL_SESSION, json_string(session));
	json_object_set_new(labels, BRIG_LABEL_GENERATION, json_string(g));
}

bool brig_sandbox__pool_fill(brig_engine *e, json_t *labels, const char *cid, const char *name,
			     const brig_identity *proof)
{
	return brig_sandbox__pool_fill_listed(e, labels, cid, name, proof, NULL);
}

bool brig_sandbox__pool_fill_listed(brig_engine *e, json_t *labels, const char *cid, const char *name,
				    const brig_identity *proof, json_t **vols)
{
	if (!brig_sandbox__pool_labels(labels) || !cid || !name)
		return false;
	if (name[0] == '/')
		name++;
	if (strncmp(name, BRIG_POOL_NAME_PREFIX, strlen(BRIG_POOL_NAME_PREFIX)) == 0)
		return true;
	/* Labels never carry a member's identity: whatever says so is not ours. */
	json_object_del(labels, BRIG_LABEL_NS);
	json_object_del(labels, BRIG_LABEL_AGENT);
	json_object_del(labels, BRIG_LABEL_SESSION);
	json_object_del(labels, BRIG_LABEL_GENERATION);
	char want[BRIG_NAME_SIZE];
	if (proof && brig_identity_name(want, proof, NULL) == 0 && strcmp(want, name) == 0) {
		set_identity(labels, proof->ns, proof->agent, proof->session, proof->generation);
		remember(cid, name, proof);
		return false;
	}
	known k;
	if (recall(&k, cid, name)) {
		set_identity(labels, k.ns, k.agent, k.session, k.gen);
		return false;
	}
	if (read_identity(e, &k, name, vols)) {
		set_identity(labels, k.ns, k.agent, k.session, k.gen);
		brig_identity id = {k.ns, k.agent, k.session, k.gen};
		remember(cid, name, &id);
	}
	return false;
}

/* ---- the claim ---- */

/* 1 when container cid is named name now, 0 when it is not, -1 when the
 * daemon did not say. */
static int named(brig_engine *e, const char *cid, const char *name)
{
	cleanup_json json_t *j = NULL;
	if (brig_engine_container_inspect(e, &j, cid, NULL) != 0)
		return -1;
	const char *n = json_string_value(json_object_get(j, "Name"));
	return n && n[0] == '/' && strcmp(n + 1, name) == 0;
}

typedef struct record {
	brig_engine *e;
	const char *name;
	const brig_identity *id;
	int rc;
} record;

static void *record_thread(void *arg)
{
	record *r = arg;
	r->rc = put_identity(r->e, r->name, r->id, NULL);
	return NULL;
}

int brig_sandbox__pool_claim(brig_engine *e, char **out_id, const char *name, const brig_identity *id, const char *hash,
			     brig_error **err)
{
	brig_pool_hooks h;
	if (!get_hooks(&h))
		return BRIG_ENOTFOUND;
	char *mid = NULL;
	if (h.take(h.payload, &mid, hash) != 0 || !mid)
		return BRIG_ENOTFOUND;
	/* The identity record and the rename go at once (the record costs a
	 * round trip of its own); the claim answers only once both are in, so
	 * no reader after it sees the computer nameless. Should the rename
	 * lose, the record names the identity whose computer won the name:
	 * still true. */
	record r = {.e = e, .name = name, .id = id, .rc = BRIG_EIO};
	/* Known to this process before the rename: its rename event may be
	 * read (brig serve's event stream) before the record is in. Safe
	 * should the rename lose: recall wants the container named name,
	 * and a member that lost keeps its pool name. */
	remember(mid, name, id);
	pthread_t t;
	bool threaded = pthread_create(&t, NULL, record_thread, &r) == 0;
	brig_error *why = NULL;
	int rc = brig_engine_container_rename(e, mid, name, &why);
	bool unknown = false; /* the rename may have landed: never lend it again */
	if (rc == BRIG_EUNCERTAIN || rc == BRIG_EPROTO) {
		int st = -1;
		for (int tries = 0; tries < 5 && st < 0; tries++) {
			if (tries)
				usleep(100 * 1000);
			st = named(e, mid, name);
		}
		if (st == 1)
			rc = 0;
		unknown = st < 0;
	}
	brig_error_free(why);
	if (threaded)
		pthread_join(t, NULL);
	if (rc == 0 && r.rc != 0 && (r.rc = put_identity(e, name, id, err)) != 0) {
		/* Renamed, so it is this computer: lookups by identity prove it
		 * by its name; only listings in other processes miss it. */
		brig__error_clear(err);
	}
	if (rc) {
		/* Someone holds the name (a racing claim or create: the caller
		 * adopts it), or the member is broken: give it back either way;
		 * a dead one is dropped by the pool's health check. One whose
		 * rename may have landed may be a session's computer now (the
		 * create below adopts it by name): out of the pool for good. */
		if (unknown)
			h.claimed(h.payload, mid, hash);
		else
			h.give_back(h.payload, mid, hash);
		free(mid);
		return BRIG_ENOTFOUND;
	}
	h.claimed(h.payload, mid, hash);
	*out_id = mid;
	return 0;
}

/* ---- removal and gone servers ---- */

void brig_sandbox__pool_remove(brig_engine *e, const char *id)
{
	cleanup_json json_t *j = NULL;
	if (brig_engine_container_inspect(e, &j, id, NULL) != 0)
		return;
	const char *n = json_string_value(json_object_get(j, "Name"));
	cleanup_free char *name = xstrdup(n && n[0] == '/' ? n + 1 : "");
	/* claimed since it was picked (renamed to a session's name): a
	 * session's computer, never removed as a member */
	if (strncmp(name, BRIG_POOL_NAME_PREFIX, strlen(BRIG_POOL_NAME_PREFIX)) != 0)
		return;
	if (brig_engine_container_remove(e, id, true, true, NULL) != 0)
		return;
	static const char *const kinds[] = {"workspace", "runtime"};
	for (size_t i = 0; i < 2; i++) {
		cleanup_free char *v = xasprintf("%s-%s", name, kinds[i]);
		for (int t = 0; t < 20; t++) {
			int rc = brig_engine_volume_remove(e, v, true, NULL);
			if (rc == 0 || rc == BRIG_ENOTFOUND)
				break;
			usleep(50 * 1000);
		}
	}
}

char *brig_sandbox__pool_lock_path(const char *server_id)
{
	const char *dir = getenv("BRIG_RUN_DIR");
	return xasprintf("%s/pools/%s.lock", dir && *dir ? dir : "/run/brig", server_id);
}

int brig_sandbox__pool_server_gone(const char *server_id)
{
	for (const char *p = server_id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0; /* not an id brig makes: leave it alone */
	cleanup_free char *path = brig_sandbox__pool_lock_path(server_id);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -1 : 0;
	int gone = flock(fd, LOCK_SH | LOCK_NB) == 0;
	close(fd);
	return gone;
}
