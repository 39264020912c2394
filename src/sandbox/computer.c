/* computer.c — the computer lifecycle: create-or-adopt under a deterministic
 * name, lookup and listing, pause/resume/stop/destroy, and exec with a
 * deadline where a timeout, cancel or uncertain result stops the container. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "brig/egress.h"
#include "brig/sandbox.h"
#include "egress/egress_internal.h"
#include "guest/host.h"
#include "sandbox/alive.h"
#include "sandbox/capture.h"
#include "sandbox/computer_guest.h"
#include "sandbox/exec.h"
#include "sandbox/internal.h"
#include "sandbox/pool.h"
#include "util/util.h"

/* ---- computer objects ---- */

void brig_computer_free(brig_computer *c)
{
	if (!c)
		return;
	free(c->name);
	free(c->id);
	free(c->ns);
	free(c->agent);
	free(c->session);
	free(c->state);
	free(c->image);
	free(c->image_id);
	free(c->spec_hash);
	free(c->harness);
	free(c->network);
	if (c->spec)
		json_decref(c->spec);
	free(c->ports);
	free(c);
}

void brig_computer_free_array(brig_computer **cs, size_t n)
{
	for (size_t i = 0; cs && i < n; i++)
		brig_computer_free(cs[i]);
	free(cs);
}

static char *opt_dup(const char *s) { return s ? xstrdup(s) : NULL; }

json_t *brig_computer_to_json(const brig_computer *c)
{
	json_t *j = json_object();
#define SETS(k, v) json_object_set_new(j, k, (v) ? json_string(v) : json_null())
	SETS("name", c->name);
	SETS("id", c->id);
	SETS("ns", c->ns);
	SETS("agent", c->agent);
	SETS("session", c->session);
	json_object_set_new(j, "generation", json_integer(c->generation));
	SETS("state", c->state);
	SETS("image", c->image);
	SETS("image_id", c->image_id);
	SETS("spec_hash", c->spec_hash);
	SETS("harness", c->harness);
	SETS("network", c->network);
#undef SETS
	json_object_set_new(j, "created", json_integer(c->created));
	json_object_set_new(j, "adopted", json_boolean(c->adopted));
	json_object_set(j, "spec", c->spec ? c->spec : json_null());
	json_t *ports = json_array();
	for (size_t i = 0; i < c->port_count; i++)
		json_array_append_new(ports, json_pack("{s:s, s:i, s:i, s:s}", "host_ip", c->ports[i].host_ip,
						       "host_port", (int)c->ports[i].host_port, "port",
						       (int)c->ports[i].port, "protocol", "tcp"));
	json_object_set_new(j, "ports", ports);
	return j;
}

/* Not part of the identity or the hash: informational only. */
#define LABEL_SPEC_JSON "brig.spec.json"

static json_t *spec_from_labels(json_t *labels)
{
	const char *t = json_string_value(json_object_get(labels, LABEL_SPEC_JSON));
	json_t *j = t ? json_loads(t, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

static const char *label(json_t *labels, const char *key) { return json_string_value(json_object_get(labels, key)); }

static bool is_computer_labels(json_t *labels)
{
	const char *m = label(labels, BRIG_LABEL_MANAGED);
	const char *k = label(labels, BRIG_LABEL_KIND);
	return m && strcmp(m, "1") == 0 && k && strcmp(k, "computer") == 0;
}

static uint32_t parse_gen(const char *s)
{
	if (!s)
		return 0;
	char *end = NULL;
	unsigned long v = strtoul(s, &end, 10);
	return end && !*end && v <= BRIG_GENERATION_MAX ? (uint32_t)v : 0;
}

/* NetworkMode holds the egress network's id: the spec label says egress. */
static void egress_mode(brig_computer *c)
{
	const char *sn = json_string_value(json_object_get(c->spec, "network"));
	if (sn && strcmp(sn, "egress") == 0) {
		free(c->network);
		c->network = xstrdup("egress");
	}
}

/* From a container inspect object (untrusted daemon data). */
static brig_computer *computer_from_inspect(json_t *j)
{
	json_t *cfg = json_object_get(j, "Config");
	json_t *labels = json_object_get(cfg, "Labels");
	brig_computer *c = xcalloc(1, sizeof *c);
	const char *name = json_string_value(json_object_get(j, "Name"));
	c->name = xstrdup(name && name[0] == '/' ? name + 1 : name ? name : "");
	c->id = opt_dup(json_string_value(json_object_get(j, "Id")));
	c->ns = opt_dup(label(labels, BRIG_LABEL_NS));
	c->agent = opt_dup(label(labels, BRIG_LABEL_AGENT));
	c->session = opt_dup(label(labels, BRIG_LABEL_SESSION));
	c->generation = parse_gen(label(labels, BRIG_LABEL_GENERATION));
	c->spec_hash = opt_dup(label(labels, BRIG_LABEL_SPEC));
	c->harness = opt_dup(label(labels, BRIG_LABEL_HARNESS));
	c->state = opt_dup(json_string_value(json_object_get(json_object_get(j, "State"), "Status")));
	c->image = opt_dup(json_string_value(json_object_get(cfg, "Image")));
	c->image_id = opt_dup(json_string_value(json_object_get(j, "Image")));
	const char *nm = json_string_value(json_object_get(json_object_get(j, "HostConfig"), "NetworkMode"));
	c->network = xstrdup(!nm || strcmp(nm, "none") == 0 ? "none" : "isolated");
	c->created = brig_sandbox__parse_time(json_string_value(json_object_get(j, "Created")));
	c->spec = spec_from_labels(labels);
	/* Bindings brig did not make are skipped: a computer is brig's only
	 * while its labels say so, and the labels are checked before this. */
	if (brig_spec_ports_from_bindings(&c->ports, &c->port_count,
					   json_object_get(json_object_get(j, "HostConfig"), "PortBindings"), NULL) != 0)
		c->port_count = 0;
	egress_mode(c);
	return c;
}

/* From a container list entry. */
static brig_computer *computer_from_list(json_t *j)
{
	json_t *labels = json_object_get(j, "Labels");
	brig_computer *c = xcalloc(1, sizeof *c);
	const char *name = json_string_value(json_array_get(json_object_get(j, "Names"), 0));
	c->name = xstrdup(name && name[0] == '/' ? name + 1 : name ? name : "");
	c->id = opt_dup(json_string_value(json_object_get(j, "Id")));
	c->ns = opt_dup(label(labels, BRIG_LABEL_NS));
	c->agent = opt_dup(label(labels, BRIG_LABEL_AGENT));
	c->session = opt_dup(label(labels, BRIG_LABEL_SESSION));
	c->generation = parse_gen(label(labels, BRIG_LABEL_GENERATION));
	c->spec_hash = opt_dup(label(labels, BRIG_LABEL_SPEC));
	c->harness = opt_dup(label(labels, BRIG_LABEL_HARNESS));
	c->state = opt_dup(json_string_value(json_object_get(j, "State")));
	c->image = opt_dup(json_string_value(json_object_get(j, "Image")));
	c->image_id = opt_dup(json_string_value(json_object_get(j, "ImageID")));
	const char *nm = json_string_value(json_object_get(json_object_get(j, "HostConfig"), "NetworkMode"));
	c->network = xstrdup(!nm || strcmp(nm, "none") == 0 ? "none" : "isolated");
	c->created = json_integer_value(json_object_get(j, "Created"));
	c->spec = spec_from_labels(labels);
	egress_mode(c);
	return c;
}

/* proof (may be NULL): the identity ref was derived from, which names a
 * claimed pool member's identity (sandbox/pool.h). */
static int inspect_computer_as(brig_engine *e, json_t **out, const char *ref, const brig_identity *proof,
			       brig_error **err)
{
	json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, ref, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "no computer named %s", ref);
	if (rc)
		return rc;
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	if (!is_computer_labels(labels)) {
		json_decref(j);
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s is not a brig computer", ref);
	}
	if (brig_sandbox__pool_fill(e, labels, json_string_value(json_object_get(j, "Id")),
				    json_string_value(json_object_get(j, "Name")), proof)) {
		json_decref(j);
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "%s is a warm pool member of a brig server, not a session's computer", ref);
	}
	*out = j;
	return 0;
}

static int inspect_computer(brig_engine *e, json_t **out, const char *ref, brig_error **err)
{
	return inspect_computer_as(e, out, ref, NULL, err);
}

int brig_computer_get(brig_engine *e, brig_computer **out, const char *ref, const brig_identity *id,
		      brig_error **err)
{
	char name[BRIG_NAME_SIZE];
	if (!ref) {
		if (!id)
			return brig__error_set(err, BRIG_EINVAL, 0, "computer: give a name or an identity");
		int rc = brig_identity_name(name, id, err);
		if (rc)
			return rc;
		ref = name;
	}
	cleanup_json json_t *j = NULL;
	int rc = inspect_computer_as(e, &j, ref, ref == name ? id : NULL, err);
	if (rc)
		return rc;
	*out = computer_from_inspect(j);
	return 0;
}

int brig_computer_list(brig_engine *e, brig_computer ***out, size_t *n, const char *ns, const char *extra_label,
		       brig_error **err)
{
	/* Claimed pool members carry no identity labels for Docker to filter
	 * by: ns and extra_label are matched here, after their identities are
	 * filled (one list either way: the daemon walks every container for a
	 * filtered list too). */
	cleanup_json json_t *filters =
		json_pack("{s:[s,s]}", "label", BRIG_LABEL_MANAGED "=1", BRIG_LABEL_KIND "=computer");
	cleanup_json json_t *list = NULL;
	int rc = brig_engine_container_list(e, &list, true, filters, err);
	if (rc)
		return brig__error_prefix(err, rc, "list computers");
	cleanup_free char *key = extra_label ? xstrndup(extra_label, strcspn(extra_label, "=")) : NULL;
	const char *want = extra_label && extra_label[strlen(key)] == '=' ? extra_label + strlen(key) + 1 : NULL;
	cleanup_json json_t *vols = NULL;
	size_t count = json_array_size(list);
	brig_computer **cs = xcalloc(count + 1, sizeof *cs);
	size_t k = 0, i;
	json_t *item;
	json_array_foreach(list, i, item)
	{
		json_t *labels = json_object_get(item, "Labels");
		if (!is_computer_labels(labels))
			continue;
		if (brig_sandbox__pool_fill_listed(e, labels, json_string_value(json_object_get(item, "Id")),
						   json_string_value(json_array_get(json_object_get(item, "Names"), 0)),
						   NULL, &vols))
			continue; /* an unclaimed pool member: nobody's computer */
		const char *have = label(labels, BRIG_LABEL_NS);
		if (ns && (!have || strcmp(have, ns) != 0))
			continue;
		const char *v = key ? label(labels, key) : NULL;
		if (key && (!v || (want && strcmp(v, want) != 0)))
			continue;
		cs[k++] = computer_from_list(item);
	}
	*out = cs;
	*n = k;
	return 0;
}

/* ---- create or adopt ---- */

static int create_volumes(brig_engine *e, const brig_spec *spec, const char *name, json_t *labels,
			  const brig_idshift *shift, brig_error **err)
{
	static const brig_volume which[] = {BRIG_VOLUME_WORKSPACE, BRIG_VOLUME_RUNTIME};
	for (size_t i = 0; i < 2; i++) {
		cleanup_json json_t *vj = NULL;
		cleanup_json json_t *got = NULL;
		int rc = brig_spec_volume_json_shifted(&vj, spec, name, which[i], labels, shift, err);
		if (rc == 0)
			rc = brig_engine_volume_create(e, &got, vj, err);
		if (rc)
			return rc;
		/* Docker answers a create of an existing name with the old volume and
		 * its old options: a leftover of another spec must not be reused. */
		const char *want = json_string_value(json_object_get(labels, BRIG_LABEL_SPEC));
		const char *have = json_string_value(json_object_get(json_object_get(got, "Labels"), BRIG_LABEL_SPEC));
		if (want && (!have || strcmp(want, have) != 0)) {
			const char *vname = json_string_value(json_object_get(vj, "Name"));
			if ((rc = brig_engine_volume_remove(e, vname, false, err)) != 0)
				return brig__error_prefix(err, rc, "volume %s is left from another spec", vname);
			json_decref(got);
			got = NULL;
			if ((rc = brig_engine_volume_create(e, NULL, vj, err)) != 0)
				return rc;
		}
	}
	return 0;
}

static void remove_volumes(brig_engine *e, const char *name)
{
	static const brig_volume which[] = {BRIG_VOLUME_WORKSPACE, BRIG_VOLUME_RUNTIME};
	for (size_t i = 0; i < 2; i++) {
		cleanup_free char *v = brig_spec_volume_name(name, which[i]);
		/* Removal can race the daemon's release of the mount: retry briefly. */
		for (int t = 0; t < 20; t++) {
			int rc = brig_engine_volume_remove(e, v, true, NULL);
			if (rc == 0 || rc == BRIG_ENOTFOUND)
				break;
			struct timespec ts = {0, 50 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}

/* Appends "; " (after the first) and one field's difference to out. */
static void diff_field(char *out, size_t n, const char *key, json_t *have, json_t *want)
{
	char *h = have ? json_dumps(have, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	char *w = want ? json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	size_t used = strlen(out);
	snprintf(out + used, n - used, "%s%s: container has %.120s, wanted %.120s", used ? "; " : "", key,
		 h ? h : "nothing", w ? w : "nothing");
	free(h);
	free(w);
}

/* The fields of the effective spec that differ between the container (its
 * brig.spec.json label) and spec, with both values; env is compared as
 * keys, the only form either side shows. NULL when the label is missing or
 * shows no difference (then only an env value differs). Caller frees. */
static char *spec_diff(json_t *labels, const brig_spec *spec)
{
	cleanup_json json_t *have = spec_from_labels(labels);
	if (!have)
		return NULL;
	cleanup_json json_t *want = brig_spec_to_json(spec, 0);
	char out[1024] = "";
	const char *key;
	json_t *v;
	json_object_foreach (want, key, v) {
		if (!json_equal(v, json_object_get(have, key)))
			diff_field(out, sizeof out, key, json_object_get(have, key), v);
	}
	json_object_foreach (have, key, v) {
		if (!json_object_get(want, key))
			diff_field(out, sizeof out, key, v, NULL);
	}
	return *out ? xstrdup(out) : NULL;
}

/* Looks at what holds our name. 0: it is ours (id in *out_id); ENOTFOUND:
 * nothing there; ECONFLICT: someone else's, with the difference (for a
 * spec, each differing field, when the container says what it has). */
static int adopt(brig_engine *e, char **out_id, const char *name, const brig_identity *id, const brig_spec *spec,
		 brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, name, err);
	if (rc)
		return rc;
	brig_error *why = NULL;
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	/* A claimed pool member: the name we looked up proves the identity. */
	brig_sandbox__pool_fill(e, labels, json_string_value(json_object_get(j, "Id")),
				json_string_value(json_object_get(j, "Name")), id);
	/* The env values count through the container's own salt; a salt that
	 * is not one (untrusted label) makes no hash, so no match. */
	char hash[BRIG_HASH_SIZE];
	const char *salt = json_string_value(json_object_get(labels, BRIG_LABEL_ENV_SALT));
	if (brig_spec_hash_salted(hash, spec, salt, NULL) != 0)
		memset(hash, '0', BRIG_HASH_SIZE - 1);
	rc = brig_labels_match(labels, id, hash, &why);
	if (rc) {
		const char *msg = brig_error_message(why);
		cleanup_free char *diff =
			msg && strncmp(msg, "spec hash differs", 17) == 0 ? spec_diff(labels, spec) : NULL;
		rc = brig__error_set(err, BRIG_ECONFLICT, 0,
				     "container %s already exists and is not this computer: %s%s; destroy it or "
				     "change the spec back",
				     name, diff ? "spec differs: " : msg, diff ? diff : "");
		brig_error_free(why);
		return rc;
	}
	*out_id = xstrdup(json_string_value(json_object_get(j, "Id")));
	return 0;
}

static int ensure_started(brig_engine *e, const char *id, brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, id, err);
	if (rc)
		return rc;
	json_t *st = json_object_get(j, "State");
	if (json_is_true(json_object_get(st, "Running")))
		return 0; /* running or paused: leave it as its owner left it */
	rc = brig_engine_container_start(e, id, err);
	if (rc == BRIG_EUNCERTAIN) {
		/* Look before answering: did the start land? */
		brig_error *e2 = NULL;
		json_t *j2 = NULL;
		if (brig_engine_container_inspect(e, &j2, id, &e2) == 0 &&
		    json_is_true(json_object_get(json_object_get(j2, "State"), "Running"))) {
			brig__error_clear(err);
			rc = 0;
		}
		if (j2)
			json_decref(j2);
		brig_error_free(e2);
	}
	return rc;
}

/* Makes and names the container (its volumes first); on a 409 or a lost
 * answer adopts what holds the name (*adopted). pool_labels (may be NULL):
 * a warm pool member, whose labels carry these instead of an identity. */
static int make_container(brig_engine *e, char **out_cid, bool *out_adopted, const char *name, const brig_identity *id,
			  const brig_spec *spec, const char *hash, const char *salt, json_t *pool_labels,
			  brig_error **err)
{
	int rc;
	cleanup_free char *cid = NULL;
	bool adopted = false;
	bool etc_hosts = false, gvisor = false;
	if ((rc = brig_sandbox__resolve_image(e, NULL, &etc_hosts, spec->image, err)) != 0 ||
	    (rc = brig_sandbox__check_runtime(e, spec->runtime, &gvisor, err)) != 0)
		return rc;
	cleanup_free char *net_id = NULL;
	if (spec->network == BRIG_NET_ISOLATED && (rc = brig_network_ensure(e, &net_id, spec, err)) != 0)
		return brig__error_prefix(err, rc, "create computer %s", name);
	if (spec->network == BRIG_NET_EGRESS && ((rc = brig_egress__secrets_check(spec, err)) != 0 ||
						 (rc = brig_egress_ensure(e, &net_id, err)) != 0))
		return brig__error_prefix(err, rc, "create computer %s", name);
	cleanup_json json_t *labels = NULL;
	if ((rc = brig_spec_labels(&labels, spec, BRIG_KIND_COMPUTER, id, hash, err)) != 0)
		return rc;

	/* brig-init as PID 1 when this build carries it. BRIG_GUEST=0 is a
	 * test-only knob (docs/guest-protocol.md): computers as before
	 * brig-init (docker-init, plain exec), for the tests of the path
	 * older computers still take. */
	char init_hash[17] = "";
	const char *vname = brig_guest__volume_name();
	const char *genv = getenv("BRIG_GUEST");
	if (vname && !(genv && strcmp(genv, "0") == 0)) {
		if ((rc = brig_guest__volume_ensure_mode(e, spec->image, gvisor, err)) != 0)
			return brig__error_prefix(err, rc, "create computer %s", name);
		snprintf(init_hash, sizeof init_hash, "%s", vname + strlen("brig-init-"));
	}
	brig_container_opts o = {.version = BRIG_CONTAINER_OPTS_VERSION,
				 .kind = BRIG_KIND_COMPUTER,
				 .id = id,
				 .name = name,
				 .spec_hash = hash,
				 .network_disabled = spec->network == BRIG_NET_NONE && etc_hosts,
				 .init_hash = init_hash[0] ? init_hash : NULL,
				 .gvisor = gvisor};
	/* the volumes' tmpfs are mounted on the host: on a daemon with
	 * userns-remap their owner is the host uid the sandbox user maps to */
	if ((rc = brig_guest__userns_shift(e, &o.shift, err)) != 0)
		return brig__error_prefix(err, rc, "create computer %s", name);
	brig_sandbox__note_shift(&o.shift);
	if (gvisor) /* the host's user namespace: ids are not shifted */
		o.shift = (brig_idshift){0, 0};
	cleanup_json json_t *body = NULL;
	if ((rc = brig_spec_container_json(&body, spec, &o, err)) != 0)
		return rc;
	if (salt[0])
		json_object_set_new(json_object_get(body, "Labels"), BRIG_LABEL_ENV_SALT, json_string(salt));
	/* A secret's placeholder is no secret: in the configuration, and
	 * read back from it by every later start (brig_egress__secrets_start). */
	if (spec->secret_count && (rc = brig_egress__placeholders_add(json_object_get(body, "Env"), spec, err)) != 0)
		return rc;
	{
		/* The effective spec (env keys only, never values or
		 * credentials) travels with the container for inspect/ls. */
		json_t *sj = brig_spec_to_json(spec, 0);
		char *text = json_dumps(sj, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(sj);
		if (text && strlen(text) < 2048) /* listings carry every label: keep it small */
			json_object_set_new(json_object_get(body, "Labels"), LABEL_SPEC_JSON, json_string(text));
		free(text);
	}
	if (net_id) /* the surviving bridge by id: its name may be ambiguous mid-race */
		json_object_set_new(json_object_get(body, "HostConfig"), "NetworkMode", json_string(net_id));
	if (pool_labels) {
		/* A pool member has no identity yet, and labels cannot change. */
		static const char *const idl[] = {BRIG_LABEL_NS, BRIG_LABEL_AGENT, BRIG_LABEL_SESSION,
						  BRIG_LABEL_GENERATION};
		json_t *bl = json_object_get(body, "Labels");
		for (size_t i = 0; i < 4; i++) {
			json_object_del(bl, idl[i]);
			json_object_del(labels, idl[i]);
		}
		json_object_update(bl, pool_labels);
		json_object_update(labels, pool_labels);
	}
	if ((rc = create_volumes(e, spec, name, labels, &o.shift, err)) != 0)
		return brig__error_prefix(err, rc, "create computer %s", name);
	int64_t settle_by = brig_now_ms() + 10000;
	for (int attempt = 0;; attempt++) {
		rc = brig_engine_container_create(e, &cid, name, body, err);
		if (rc == 0)
			break;
		if (rc == BRIG_EPROTO) {
			/* A malformed answer: it may have landed. It is handled
			 * as a lost one, so its error says EUNCERTAIN too. */
			brig_error *cause = err ? *err : NULL;
			if (err)
				*err = NULL;
			rc = brig__error_set_http(err, BRIG_EUNCERTAIN, cause ? cause->http_status : 0, "%s",
						  brig_error_message(cause));
			brig_error_free(cause);
		}
		if (rc != BRIG_ECONFLICT && rc != BRIG_EUNCERTAIN) {
			remove_volumes(e, name);
			return brig__error_prefix(err, rc, "create computer");
		}
		/* 409, or no answer: look the name up before answering. */
		int first = rc;
		brig_error *lookup = NULL;
		rc = adopt(e, &cid, name, id, spec, &lookup);
		if (rc == 0) {
			brig__error_clear(err);
			adopted = first == BRIG_ECONFLICT;
			break;
		}
		if (rc == BRIG_ENOTFOUND && first == BRIG_EUNCERTAIN && attempt == 0) {
			/* The lost create did not land; the name makes another safe. */
			brig_error_free(lookup);
			brig__error_clear(err);
			continue;
		}
		if (rc == BRIG_ENOTFOUND && first == BRIG_ECONFLICT && brig_now_ms() < settle_by) {
			/* 409 yet nothing to inspect: the daemon reserves the name
			 * before the racer's container is registered (measured with 16
			 * creators), or it was removed since. Asking again is safe. */
			brig_error_free(lookup);
			brig__error_clear(err);
			struct timespec ts = {0, 50 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		if (rc == BRIG_ECONFLICT) { /* the name holds something else: say what */
			brig__error_move(err, lookup);
			return rc;
		}
		/* Nothing to adopt after all: a lost create may still land (its
		 * volumes stay for it), and a 409 means someone holds the name. */
		brig_error_free(lookup);
		return brig__error_prefix(
			err, first,
			first == BRIG_EUNCERTAIN ? "create computer %s: no answer twice and nothing found under the "
						   "name yet; it may still appear: look again with brig ls"
						 : "create computer %s: the name is taken but nothing can be inspected "
						   "under it",
			name);
	}
	*out_cid = steal_pointer(&cid);
	*out_adopted = adopted;
	return 0;
}

int brig_computer_create(brig_engine *e, brig_computer **out, const brig_identity *id, const brig_spec *spec,
			 brig_error **err)
{
	int rc = brig_identity_validate(id, err);
	if (rc)
		return rc;
	brig_host_limits host;
	if ((rc = brig_sandbox__host_limits(e, &host, err)) != 0)
		return brig__error_prefix(err, rc, "create computer");
	if ((rc = brig_spec_validate(spec, &host, err)) != 0)
		return rc;
	/* A computer outlives this call and its container must not hold a
	 * credential: one given here would be silently lost. Say so instead. */
	for (size_t i = 0; i < spec->env_count; i++) {
		if (brig_env_is_credential(spec->env[i])) {
			size_t klen = strcspn(spec->env[i], "=");
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "env: %.*s is a model credential and is never stored with a computer; "
					       "keep it in brig's environment (forwarded with each exec for harness "
					       "%s) or pass it to each exec",
					       (int)klen, spec->env[i], brig_harness_name(spec->harness));
		}
	}
	/* A new computer's env values count in its spec hash keyed with a
	 * salt of its own (brig_spec_hash_salted), never as they are. */
	char name[BRIG_NAME_SIZE], hash[BRIG_HASH_SIZE], salt[BRIG_ENV_SALT_SIZE] = "";
	bool has_env = false;
	for (size_t i = 0; i < spec->env_count; i++)
		has_env = has_env || !brig_env_is_credential(spec->env[i]);
	if (has_env) {
		unsigned char rnd[(BRIG_ENV_SALT_SIZE - 1) / 2];
		if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
			return brig__error_set(err, BRIG_EIO, errno, "create computer: no random bytes for the env salt");
		brig_hex(salt, rnd, sizeof rnd);
	}
	if ((rc = brig_identity_name(name, id, err)) != 0 ||
	    (rc = brig_spec_hash_salted(hash, spec, salt[0] ? salt : NULL, err)) != 0)
		return rc;

	cleanup_free char *cid = NULL;
	bool adopted = false, claimed = false;
	/* Fast path: it already exists (a replica made it, or we did before). */
	rc = adopt(e, &cid, name, id, spec, err);
	if (rc == 0) {
		adopted = true;
	} else if (rc != BRIG_ENOTFOUND) {
		return rc;
	} else {
		brig__error_clear(err);
		/* A warm pool member of this very spec (no env: a salt would make
		 * its hash another) becomes this computer by a rename. Looked for
		 * only after the look above, so that adopting an existing
		 * computer never touches a pool; a racer that takes the name
		 * meanwhile makes the rename fail, and the create below adopts. */
		if (!salt[0] && brig_sandbox__pool_claim(e, &cid, name, id, hash, err) == 0)
			claimed = true;
		else if ((rc = make_container(e, &cid, &adopted, name, id, spec, hash, salt, NULL, err)) != 0)
			return rc;
	}
	/* A claimed member was started (and marked) by its pool: its state is
	 * read once, below. */
	if (!claimed && (rc = ensure_started(e, cid, err)) != 0) {
		/* One this call made and could not start is not left behind
		 * (the next up would adopt it and fail the same way): the
		 * container and its volumes go, the daemon's reason stays. An
		 * adopted one is the user's and stays as it was. */
		if (!adopted) {
			brig_error *rm = NULL;
			if (brig_computer_destroy(e, name, &rm) != 0)
				brig_error_free(rm);
		}
		return brig__error_prefix(err, rc, "start computer %s", name);
	}
	if (spec->network == BRIG_NET_EGRESS) {
		/* An adopted computer keeps the rules it has (they may have been
		 * changed while it ran); the proxy must be up for it either way. */
		char **have = NULL;
		size_t nhave = 0;
		bool write = !adopted;
		if (adopted && (rc = brig_egress_ensure(e, NULL, err)) != 0)
			return brig__error_prefix(err, rc, "adopt computer %s", name);
		if (adopted && brig_egress_rules_get(&have, &nhave, name, NULL) == 0 && nhave == 0)
			write = true;
		brig_egress_rules_free(have);
		if ((rc = brig_egress__sandbox_start(e, cid, name, (const char *const *)spec->allow, spec->allow_count,
						     write, err)) != 0 ||
		    (rc = brig_egress__secrets_start(e, cid, name, spec, err)) != 0)
			return brig__error_prefix(err, rc, "create computer %s", name);
	}
	/* Only a computer this call created and started is known to hold what
	 * brig gave it; one adopted stopped and started again holds nothing. */
	if (!adopted && !claimed && (rc = brig_computer__mark_started(e, cid, err)) != 0)
		return brig__error_prefix(err, rc, "create computer %s", name);
	/* Every create, adopting ones too: a computer started again has an
	 * empty /runtime, and its commands would miss their env. */
	if ((rc = brig_computer__put_env(e, cid, spec, err)) != 0)
		return brig__error_prefix(err, rc, "create computer %s", name);
	brig_computer *c = NULL;
	if ((rc = brig_computer_get(e, &c, cid, NULL, err)) != 0)
		return rc;
	if (claimed && (!c->state || strcmp(c->state, "running") != 0)) {
		/* It stopped while it waited: start it as a create would. */
		brig_computer_free(c);
		c = NULL;
		if ((rc = ensure_started(e, cid, err)) != 0 || (rc = brig_computer__mark_started(e, cid, err)) != 0 ||
		    (rc = brig_computer_get(e, &c, cid, NULL, err)) != 0)
			return brig__error_prefix(err, rc, "start computer %s", name);
	}
	c->adopted = adopted;
	if (!c->spec)
		c->spec = brig_spec_to_json(spec, 0);
	*out = c;
	return 0;
}

int brig_computer__pool_make(brig_engine *e, char **out_id, const brig_spec *spec, const char *name,
			     json_t *pool_labels, brig_error **err)
{
	brig_host_limits host;
	int rc = brig_sandbox__host_limits(e, &host, err);
	if (rc || (rc = brig_spec_validate(spec, &host, err)) != 0)
		return rc;
	if (spec->env_count)
		return brig__error_set(err, BRIG_EINVAL, 0, "pool: a pool's spec carries no env");
	/* Labels need an identity to be made; the member's are removed. */
	brig_identity placeholder = {"pool", "pool", "pool", 1};
	char hash[BRIG_HASH_SIZE];
	if ((rc = brig_spec_hash_salted(hash, spec, NULL, err)) != 0)
		return rc;
	cleanup_free char *cid = NULL;
	bool adopted = false;
	if ((rc = make_container(e, &cid, &adopted, name, &placeholder, spec, hash, "", pool_labels, err)) != 0)
		return rc;
	if ((rc = ensure_started(e, cid, err)) != 0 || (rc = brig_computer__mark_started(e, cid, err)) != 0) {
		brig_sandbox__pool_remove(e, cid);
		return brig__error_prefix(err, rc, "start pool member %s", name);
	}
	*out_id = steal_pointer(&cid);
	return 0;
}

/* ---- pause / resume / stop / destroy ---- */

static int state_of(brig_engine *e, const char *ref, char **state, brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = inspect_computer(e, &j, ref, err);
	if (rc)
		return rc;
	*state = opt_dup(json_string_value(json_object_get(json_object_get(j, "State"), "Status")));
	if (!*state)
		*state = xstrdup("unknown");
	return 0;
}

int brig_computer_pause(brig_engine *e, const char *ref, brig_error **err)
{
	cleanup_free char *state = NULL;
	int rc = state_of(e, ref, &state, err);
	if (rc)
		return rc;
	if (strcmp(state, "paused") == 0)
		return 0;
	if (strcmp(state, "running") != 0)
		return brig__error_set(err, BRIG_ESTATE, 0, "computer %s is %s, not running: nothing to pause", ref,
				       state);
	return brig_engine_container_pause(e, ref, err);
}

int brig_computer_resume(brig_engine *e, const char *ref, brig_error **err)
{
	cleanup_free char *state = NULL;
	int rc = state_of(e, ref, &state, err);
	if (rc)
		return rc;
	if (strcmp(state, "running") == 0)
		return 0;
	if (strcmp(state, "paused") != 0)
		return brig__error_set(err, BRIG_ESTATE, 0,
				       "computer %s is %s, not paused: start it again with `brig create` or "
				       "recover it",
				       ref, state);
	return brig_engine_container_unpause(e, ref, err);
}

int brig_computer_stop(brig_engine *e, const char *ref, brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = inspect_computer(e, &j, ref, err);
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(j, "Id"));
	return brig_engine_container_stop(e, id, 5, err);
}

int brig_computer_destroy(brig_engine *e, const char *ref, brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = inspect_computer(e, &j, ref, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		/* Idempotent, and it sweeps volumes a failed create left. */
		if (strncmp(ref, "brig-", 5) == 0 && strlen(ref) == BRIG_NAME_SIZE - 1)
			remove_volumes(e, ref);
		return 0;
	}
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(j, "Id"));
	const char *name = json_string_value(json_object_get(j, "Name"));
	cleanup_free char *n = xstrdup(name && name[0] == '/' ? name + 1 : name ? name : ref);
	/* A claimed pool member keeps the volumes it was made with, named
	 * after its pool name. */
	cleanup_free char *pool_name = NULL;
	size_t i;
	json_t *m;
	json_array_foreach (json_object_get(j, "Mounts"), i, m) {
		const char *v = json_string_value(json_object_get(m, "Name"));
		const char *dst = json_string_value(json_object_get(m, "Destination"));
		size_t pl = strlen(BRIG_POOL_NAME_PREFIX), vl = v ? strlen(v) : 0;
		if (!pool_name && v && dst && strcmp(dst, "/workspace") == 0 &&
		    strncmp(v, BRIG_POOL_NAME_PREFIX, pl) == 0 && vl > pl + 10 &&
		    strcmp(v + vl - 10, "-workspace") == 0)
			pool_name = xstrndup(v, vl - 10);
	}
	rc = brig_engine_container_remove(e, id, true, true, err);
	if (rc && rc != BRIG_ENOTFOUND)
		return brig__error_prefix(err, rc, "destroy computer %s", n);
	brig__error_clear(err);
	remove_volumes(e, n);
	if (pool_name)
		remove_volumes(e, pool_name);
	/* A claim's record, also one whose rename lost to this computer. */
	cleanup_free char *iv = brig_sandbox__pool_identity_volume(n);
	brig_engine_volume_remove(e, iv, true, NULL);
	brig_egress__rules_remove(n);
	return 0;
}

/* ---- exec ---- */

static const char *harness_of(json_t *labels)
{
	const char *h = label(labels, BRIG_LABEL_HARNESS);
	return h ? h : "none";
}

static int check_exec_opts(const brig_exec_opts *opts, brig_error **err)
{
	if (!opts) /* argv has no default: nothing to run */
		return brig__error_set(err, BRIG_EINVAL, 0, "exec options: missing (argv is required)");
	int vr = brig__opts_check(opts->version, BRIG_EXEC_OPTS_VERSION, "exec options", err);
	if (vr)
		return vr;
	if (!opts->argv || !opts->argv[0] || !*opts->argv[0])
		return brig__error_set(err, BRIG_EINVAL, 0, "exec: a command is required (argv is empty)");
	return 0;
}

static int exec_inspected(brig_engine *e, const char *ref, json_t *j, const brig_exec_opts *opts, int64_t start,
			  brig_exec_result *res, brig_error **err);

int brig_computer_exec(brig_engine *e, const char *ref, const brig_exec_opts *opts, brig_exec_result *res,
		       brig_error **err)
{
	memset(res, 0, sizeof *res);
	res->exit_code = -1;
	int rc = check_exec_opts(opts, err);
	if (rc)
		return rc;
	int64_t start = brig_now_ms();
	cleanup_json json_t *j = NULL;
	if ((rc = inspect_computer(e, &j, ref, err)) != 0)
		return rc;
	return exec_inspected(e, ref, j, opts, start, res, err);
}

int brig_computer__exec_get(brig_engine *e, brig_computer **out, const char *ref, const brig_exec_opts *opts,
			    brig_exec_result *res, brig_error **err)
{
	*out = NULL;
	memset(res, 0, sizeof *res);
	res->exit_code = -1;
	int64_t start = brig_now_ms();
	cleanup_json json_t *j = NULL;
	int rc = inspect_computer(e, &j, ref, err);
	if (rc)
		return rc;
	*out = computer_from_inspect(j);
	if ((rc = check_exec_opts(opts, err)) != 0)
		return rc;
	/* by id: the name now means the container just looked at */
	return exec_inspected(e, (*out)->name, j, opts, start, res, err);
}

/* The exec itself, on the computer's inspect j (its state, labels, id). */
static int exec_inspected(brig_engine *e, const char *ref, json_t *j, const brig_exec_opts *opts, int64_t start,
			  brig_exec_result *res, brig_error **err)
{
	int64_t deadline = opts->timeout_ms > 0 ? start + opts->timeout_ms : 0;
	int rc;
	const char *id = json_string_value(json_object_get(j, "Id"));
	const char *status = json_string_value(json_object_get(json_object_get(j, "State"), "Status"));
	if (status && strcmp(status, "paused") == 0)
		return brig__error_set(err, BRIG_ESTATE, 0,
				       "computer %s is paused: nothing was run; `brig resume %s` first", ref, ref);
	if (!status || strcmp(status, "running") != 0)
		return brig__error_set(err, BRIG_ESTATE, 0, "computer %s is %s, not running: nothing was run", ref,
				       status ? status : "in an unknown state");
	brig_harness harness = BRIG_HARNESS_NONE;
	brig_harness_parse(&harness, harness_of(json_object_get(json_object_get(j, "Config"), "Labels")), NULL);
	if (json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_SECRETS))
		harness = BRIG_HARNESS_NONE; /* placeholders stand in: nothing real is forwarded */

	json_t *env = NULL;
	if ((rc = brig_env_exec(&env, opts->env, opts->env_count, harness, err)) != 0)
		return rc;
	const char *init = json_string_value(
		json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), BRIG_LABEL_INIT));
	if (init && *init) {
		/* brig-init is PID 1: over its relay (computers created before it
		 * have no label and take the plain exec below) */
		brig_output_tee tee;
		brig_output_tee_init(&tee, opts->capture_max, opts->on_output, opts->payload);
		rc = brig_sandbox__guest_exec(e, ref, id, opts, env, deadline, NULL, &tee, res, err);
		json_decref(env);
		brig_output_tee_finish(&tee, res);
		res->duration_ms = brig_now_ms() - start;
		return rc;
	}
	json_t *cmd = json_array();
	for (const char *const *a = opts->argv; *a; a++)
		json_array_append_new(cmd, json_string(*a));
	bool has_stdin = opts->stdin_fd >= 0 || opts->stdin_data;
	cleanup_json json_t *cfg = json_pack("{s:o, s:o, s:s, s:b, s:b, s:b, s:b}", "Cmd", cmd, "Env", env,
					     "WorkingDir", opts->workdir ? opts->workdir : "/workspace",
					     "AttachStdin", has_stdin, "AttachStdout", 1, "AttachStderr", 1, "Tty", 0);
	cleanup_free char *xid = NULL;
	brig_sandbox__pad_secret_body(cfg);
	rc = brig_engine_exec_create(e, &xid, id, cfg, err);
	if (rc == BRIG_ECONFLICT) /* paused or stopped between the look and the exec */
		return brig__error_set(err, BRIG_ESTATE, 0, "computer %s is not running (%s): nothing was run", ref,
				       brig_error_message(err ? *err : NULL));
	if (rc)
		return brig__error_prefix(err, rc, "exec in %s", ref);

	brig_output_tee tee;
	brig_output_tee_init(&tee, opts->capture_max, opts->on_output, opts->payload);
	brig_engine_exec_io io = {.stdin_fd = opts->stdin_fd,
				  .stdin_data = opts->stdin_data,
				  .stdin_len = opts->stdin_len,
				  .on_output = brig_output_tee_cb,
				  .payload = &tee,
				  .deadline_ms = deadline,
				  .cancel_fd = opts->cancel_fd};
	rc = brig_engine_exec_start(e, xid, &io, err);
	if (rc == 0) {
		int64_t poll_by = brig_now_ms() + 10000;
		if (deadline && deadline < poll_by)
			poll_by = deadline;
		rc = brig_engine_exec_exit_code(e, xid, poll_by, &res->exit_code, err);
		if (rc == BRIG_ETIMEDOUT) {
			/* The output ended but the command runs on: the stream was cut
			 * (a clean EOF between frames looks like an ordinary end).
			 * Unless the deadline is what passed, that is uncertain. */
			brig__error_clear(err);
			rc = deadline && brig_now_ms() >= deadline ? BRIG_ETIMEDOUT : BRIG_EUNCERTAIN;
		} else if (rc) {
			/* The command ran and its stream ended, but its end cannot be
			 * read: the daemon went away (a restart ends every stream
			 * cleanly) or forgot the exec. Never "not sent": a caller
			 * would run it a second time. */
			brig__error_clear(err);
			rc = BRIG_EUNCERTAIN;
		}
	}
	/* Answers that come before the process starts leave nothing running;
	 * anything else after the start (a malformed or oversized frame, an
	 * output callback that gave up) leaves a command nobody can kill or
	 * see end: that is uncertain, and ends like one. */
	bool before_start = rc == BRIG_ENOTSENT || rc == BRIG_ENOTFOUND || rc == BRIG_ECONFLICT ||
			    rc == BRIG_EBADREQ || rc == BRIG_EDENIED;
	brig_error *cause = NULL;
	if (rc && !before_start && rc != BRIG_ETIMEDOUT && rc != BRIG_ECANCELED && rc != BRIG_EUNCERTAIN) {
		if (err) {
			cause = *err;
			*err = NULL;
		}
		rc = BRIG_EUNCERTAIN;
	}
	if (rc == BRIG_ETIMEDOUT || rc == BRIG_ECANCELED || rc == BRIG_EUNCERTAIN) {
		const char *what = rc == BRIG_ETIMEDOUT   ? "timed out"
				   : rc == BRIG_ECANCELED ? "it was cancelled"
				   : cause                ? brig_error_message(cause)
							  : "the connection to the daemon was lost";
		res->timed_out = rc == BRIG_ETIMEDOUT;
		res->canceled = rc == BRIG_ECANCELED;
		res->uncertain = rc == BRIG_EUNCERTAIN;
		res->exit_code = res->timed_out ? 124 : res->canceled ? 130 : -1;
		brig_error *stop_err = NULL;
		int src = brig_sandbox__stop_after(e, id, opts, &stop_err);
		res->container_stopped = src == 0;
		if (src) /* the command may run on: not the certain end brig-init gives */
			res->uncertain = true;
		if (res->timed_out)
			brig__error_set(err, rc, 0,
					"command in %s timed out after %lld ms; the computer was %s (Docker cannot kill an "
					"exec); it is not retried: recover the session from its checkpoint",
					ref, (long long)opts->timeout_ms, src == 0 ? "stopped" : "NOT stopped");
		else
			brig__error_set(err, rc, 0,
					"command in %s: %s; the computer was %s; it is not retried: recover the session "
					"from its checkpoint%s%s",
					ref, what, src == 0 ? "stopped" : "NOT stopped", src ? " — stop failed: " : "",
					src ? brig_error_message(stop_err) : "");
		brig_error_free(stop_err);
		brig_error_free(cause);
	} else if (rc) {
		brig__error_prefix(err, rc, "exec in %s", ref);
	}
	brig_output_tee_finish(&tee, res);
	brig_sandbox__fix_not_found(res);
	res->duration_ms = brig_now_ms() - start;
	return rc;
}
