/* spec_json.c — JSON built from a spec: the canonical form and hash, the
 * effective spec for output, labels, and the Docker create bodies. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/egress.h"
#include "spec/spec_internal.h"
#include "util/sha256.h"
#include "util/util.h"

#define LIFETIME_MAX (366LL * 24 * 3600)
#define CONTAINER_NAME_MAX 128

/* ---- helpers ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* {"k":"v",…} from "k=v" entries. */
static json_t *labels_object(char *const *v, size_t n)
{
	json_t *o = json_object();
	for (size_t i = 0; i < n; i++) {
		size_t klen = brig_spec__env_keylen(v[i]);
		char *k = xstrndup(v[i], klen);
		json_object_set_new(o, k, json_string(v[i][klen] ? v[i] + klen + 1 : ""));
		free(k);
	}
	return o;
}

static bool is_hash(const char *s)
{
	if (!s || strlen(s) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static int check_container_name(const char *name, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	size_t n = name ? strnlen(name, CONTAINER_NAME_MAX + 1) : 0;
	bool ok = n > 0 && n <= CONTAINER_NAME_MAX;
	for (size_t i = 0; ok && i < n; i++) {
		char c = name[i];
		ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		     (i > 0 && (c == '_' || c == '.' || c == '-'));
	}
	if (!ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "container name: must be 1-%d characters of A-Z a-z 0-9 _ . - starting with a "
				       "letter or digit, got '%s'",
				       CONTAINER_NAME_MAX, brig_spec__quote(q, name ? name : ""));
	return 0;
}

/* ---- canonical form and hash ---- */

/* HMAC-SHA256 (RFC 2104) of msg keyed with key, as hex into out. */
static void hmac_hex(char out[BRIG_HASH_SIZE], const char *key, const char *msg)
{
	unsigned char k[64] = {0}, pad[64], inner[BRIG_SHA256_SIZE], md[BRIG_SHA256_SIZE];
	size_t klen = strlen(key);
	if (klen > sizeof k)
		brig_sha256(k, key, klen);
	else
		memcpy(k, key, klen);
	brig_sha256_ctx c;
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	brig_sha256_init(&c);
	brig_sha256_update(&c, pad, 64);
	brig_sha256_update(&c, msg, strlen(msg));
	brig_sha256_final(&c, inner);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	brig_sha256_init(&c);
	brig_sha256_update(&c, pad, 64);
	brig_sha256_update(&c, inner, sizeof inner);
	brig_sha256_final(&c, md);
	brig_hex(out, md, BRIG_SHA256_SIZE);
	explicit_bzero(&c, sizeof c);
	explicit_bzero(inner, sizeof inner);
}

static bool salt_ok(const char *s)
{
	return s && strlen(s) == BRIG_ENV_SALT_SIZE - 1 && strspn(s, "0123456789abcdef") == BRIG_ENV_SALT_SIZE - 1;
}

/* Every setting that shapes the container, and nothing else. Numbers are
 * integers (cpus as NanoCpus) so the bytes never depend on float printing.
 * Env: keys, and with a salt each value's keyed digest — never a value. */
static json_t *canonical(const brig_spec *spec, const char *salt)
{
	json_t *o = json_object();
	json_object_set_new(o, "policy", json_integer(BRIG_SPEC_POLICY));
	json_object_set_new(o, "image", json_string(spec->image));
	json_object_set_new(o, "user", json_string(spec->user));
	json_object_set_new(o, "nano_cpus", json_integer((json_int_t)brig_spec__nano_cpus(spec->cpus)));
	json_object_set_new(o, "memory_mb", json_integer(spec->memory_mb));
	json_object_set_new(o, "pids", json_integer(spec->pids));
	json_object_set_new(o, "workspace_mb", json_integer(spec->workspace_mb));
	json_object_set_new(o, "runtime_mb", json_integer(spec->runtime_mb));
	json_object_set_new(o, "shm_mb", json_integer(spec->shm_mb));
	json_object_set_new(o, "workspace_inodes", json_integer(spec->workspace_inodes));
	json_object_set_new(o, "runtime_inodes", json_integer(spec->runtime_inodes));
	json_object_set_new(o, "nofile", json_integer(spec->nofile));
	json_object_set_new(o, "network", json_string(brig_network_name(spec->network)));
	/* The subnet only exists for the isolated bridge; with none it changes
	 * nothing about the container. */
	if (spec->network == BRIG_NET_ISOLATED)
		json_object_set_new(o, "subnet", json_string(spec->subnet));
	json_object_set_new(o, "harness", json_string(brig_harness_name(spec->harness)));
	json_object_set_new(o, "seccomp_profile",
			    spec->seccomp_profile ? json_string(spec->seccomp_profile) : json_null());
	/* Only when chosen, so computers on the daemon's default keep the hash
	 * they had before the field existed. */
	if (spec->runtime)
		json_object_set_new(o, "runtime", json_string(spec->runtime));

	/* Credentials are delivered per exec and must not change which
	 * container an identity adopts; keys are unique so order is noise. */
	char **env = xcalloc(spec->env_count + 1, sizeof(char *));
	size_t n = 0;
	for (size_t i = 0; i < spec->env_count; i++) {
		if (brig_env_is_credential(spec->env[i]))
			continue;
		size_t klen = brig_spec__env_keylen(spec->env[i]);
		if (salt) {
			char mac[BRIG_HASH_SIZE];
			hmac_hex(mac, salt, spec->env[i]);
			env[n++] = xasprintf("%.*s=%s", (int)klen, spec->env[i], mac);
		} else {
			env[n++] = xstrndup(spec->env[i], klen);
		}
	}
	qsort(env, n, sizeof(char *), cmp_str);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_string(env[i]));
		free(env[i]);
	}
	free(env);
	json_object_set_new(o, "env", arr);
	json_object_set_new(o, "labels", labels_object(spec->labels, spec->label_count));
	/* Absent when empty: computers made before ports existed keep their
	 * hash, and are adopted as they were. */
	if (spec->port_count)
		json_object_set_new(o, "publish", brig_spec__ports_json(spec, true));
	return o;
}

int brig_spec_hash(char out[BRIG_HASH_SIZE], const brig_spec *spec, brig_error **err)
{
	return brig_spec_hash_salted(out, spec, NULL, err);
}

int brig_spec_hash_salted(char out[BRIG_HASH_SIZE], const brig_spec *spec, const char *salt, brig_error **err)
{
	int r;
	out[0] = '\0';
	if ((r = brig_spec_validate(spec, NULL, err)) < 0)
		return r;
	if (salt && !salt_ok(salt))
		return brig__error_set(err, BRIG_EINVAL, 0, "env salt: must be %d lowercase hex digits",
				       BRIG_ENV_SALT_SIZE - 1);
	json_t *c = canonical(spec, salt);
	char *text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	json_decref(c);
	if (!text)
		abort(); /* only on allocation failure */
	brig_spec__sha256_hex(out, text, strlen(text));
	explicit_bzero(text, strlen(text));
	free(text);
	return 0;
}

/* ---- effective spec ---- */

json_t *brig_spec_to_json(const brig_spec *spec, unsigned flags)
{
	json_t *o = json_object();
	json_object_set_new(o, "version", json_integer(spec->version));
	json_object_set_new(o, "image", json_string(spec->image ? spec->image : ""));
	json_object_set_new(o, "user", json_string(spec->user ? spec->user : ""));
	json_object_set_new(o, "cpus", json_real(spec->cpus));
	json_object_set_new(o, "memory_mb", json_integer(spec->memory_mb));
	json_object_set_new(o, "pids", json_integer(spec->pids));
	json_object_set_new(o, "workspace_mb", json_integer(spec->workspace_mb));
	json_object_set_new(o, "runtime_mb", json_integer(spec->runtime_mb));
	json_object_set_new(o, "shm_mb", json_integer(spec->shm_mb));
	json_object_set_new(o, "workspace_inodes", json_integer(spec->workspace_inodes));
	json_object_set_new(o, "runtime_inodes", json_integer(spec->runtime_inodes));
	json_object_set_new(o, "nofile", json_integer(spec->nofile));
	json_object_set_new(o, "network", json_string(brig_network_name(spec->network)));
	json_object_set_new(o, "subnet", json_string(spec->subnet ? spec->subnet : ""));
	json_object_set_new(o, "harness", json_string(brig_harness_name(spec->harness)));
	/* brig's own profile is the default and is left out (it is long, and
	 * from_json fills it back in); "" stands for the daemon's default, as
	 * brig_spec_set() reads it. */
	if (!spec->seccomp_profile)
		json_object_set_new(o, "seccomp_profile", json_string(""));
	else if (strcmp(spec->seccomp_profile, brig_spec_seccomp_default()) != 0)
		json_object_set_new(o, "seccomp_profile", json_string(spec->seccomp_profile));
	json_object_set_new(o, "runtime", json_string(spec->runtime ? spec->runtime : ""));
	json_t *env = json_array();
	for (size_t i = 0; i < spec->env_count; i++) {
		const char *e = spec->env[i];
		if (brig_env_is_credential(e))
			continue;
		if (flags & BRIG_SPEC_JSON_ENV_VALUES)
			json_array_append_new(env, json_string(e));
		else
			json_array_append_new(env, json_stringn(e, brig_spec__env_keylen(e)));
	}
	json_object_set_new(o, "env", env);
	json_object_set_new(o, "labels", labels_object(spec->labels, spec->label_count));
	json_object_set_new(o, "publish", brig_spec__ports_json(spec, false));
	if (spec->network == BRIG_NET_EGRESS) {
		json_t *allow = json_array();
		for (size_t i = 0; i < spec->allow_count; i++)
			json_array_append_new(allow, json_string(spec->allow[i]));
		json_object_set_new(o, "allow", allow);
		if (spec->secret_count) {
			json_t *sec = json_array();
			for (size_t i = 0; i < spec->secret_count; i++)
				json_array_append_new(sec, json_string(spec->secrets[i]));
			json_object_set_new(o, "secrets", sec);
		}
	}
	return o;
}

int brig_spec_from_json(brig_spec *spec, const json_t *json, brig_error **err)
{
	static const char *const ints[] = {"memory_mb",        "pids",           "workspace_mb", "runtime_mb", "shm_mb",
					   "workspace_inodes", "runtime_inodes", "nofile",       NULL};
	static const char *const strs[] = {"image",           "user",    "network", "subnet", "harness",
					   "seccomp_profile", "runtime", NULL};
	char buf[64];
	int r;
	brig_spec tmp;
	brig_spec_init(spec);
	if (!json_is_object(json))
		return brig__error_set(err, BRIG_EPROTO, 0, "spec: not a JSON object");
	brig_spec_init(&tmp);
	json_t *v;
	for (int i = 0; ints[i]; i++) {
		if (!(v = json_object_get(json, ints[i])))
			continue;
		if (!json_is_integer(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: %s is not an integer", ints[i]);
			goto fail;
		}
		snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
		if ((r = brig_spec_set(&tmp, ints[i], buf, err)) < 0)
			goto fail;
	}
	if ((v = json_object_get(json, "cpus"))) {
		if (!json_is_number(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: cpus is not a number");
			goto fail;
		}
		snprintf(buf, sizeof buf, "%.9f", json_number_value(v));
		if ((r = brig_spec_set(&tmp, "cpus", buf, err)) < 0)
			goto fail;
	}
	for (int i = 0; strs[i]; i++) {
		if (!(v = json_object_get(json, strs[i])))
			continue;
		if (!json_is_string(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: %s is not a string", strs[i]);
			goto fail;
		}
		if ((r = brig_spec_set(&tmp, strs[i], json_string_value(v), err)) < 0)
			goto fail;
	}
	if ((v = json_object_get(json, "env"))) {
		size_t i;
		json_t *e;
		if (!json_is_array(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: env is not an array");
			goto fail;
		}
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e)) {
				r = brig__error_set(err, BRIG_EPROTO, 0, "spec: env entry %zu is not a string", i);
				goto fail;
			}
			/* Never read brig's environment for a stored spec. */
			if ((r = brig_spec__add_env(&tmp, json_string_value(e), false, err)) < 0)
				goto fail;
		}
	}
	if ((v = json_object_get(json, "allow"))) {
		size_t i;
		json_t *e;
		if (!json_is_array(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: allow is not an array");
			goto fail;
		}
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e)) {
				r = brig__error_set(err, BRIG_EPROTO, 0, "spec: allow entry %zu is not a string", i);
				goto fail;
			}
			if ((r = brig_spec_set(&tmp, "allow", json_string_value(e), err)) < 0)
				goto fail;
		}
	}
	if ((v = json_object_get(json, "secrets"))) {
		size_t i;
		json_t *e;
		if (!json_is_array(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: secrets is not an array");
			goto fail;
		}
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e)) {
				r = brig__error_set(err, BRIG_EPROTO, 0, "spec: secrets entry %zu is not a string", i);
				goto fail;
			}
			if ((r = brig_spec_set(&tmp, "secret", json_string_value(e), err)) < 0)
				goto fail;
		}
	}
	if ((v = json_object_get(json, "labels"))) {
		const char *k;
		json_t *e;
		if (!json_is_object(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: labels is not an object");
			goto fail;
		}
		json_object_foreach((json_t *)v, k, e)
		{
			if (!json_is_string(e)) {
				r = brig__error_set(err, BRIG_EPROTO, 0, "spec: a label value is not a string");
				goto fail;
			}
			char *entry = xasprintf("%s=%s", k, json_string_value(e));
			r = brig_spec_add_label(&tmp, entry, err);
			free(entry);
			if (r < 0)
				goto fail;
		}
	}
	if ((v = json_object_get(json, "publish"))) {
		size_t i;
		json_t *e;
		if (!json_is_array(v)) {
			r = brig__error_set(err, BRIG_EPROTO, 0, "spec: publish is not an array");
			goto fail;
		}
		json_array_foreach (v, i, e) {
			if (!json_is_string(e)) {
				r = brig__error_set(err, BRIG_EPROTO, 0, "spec: publish entry %zu is not a string", i);
				goto fail;
			}
			if ((r = brig_spec_add_publish(&tmp, json_string_value(e), err)) < 0)
				goto fail;
		}
	}
	if ((r = brig_spec_validate(&tmp, NULL, err)) < 0)
		goto fail;
	brig_spec_clear(spec);
	*spec = tmp;
	return 0;
fail:
	brig_spec_clear(&tmp);
	return r;
}

/* ---- labels ---- */

int brig_spec_labels(json_t **out, const brig_spec *spec, brig_kind kind, const brig_identity *id,
		     const char *spec_hash, brig_error **err)
{
	char hash[BRIG_HASH_SIZE], gen[16];
	int r;
	*out = NULL;
	if (kind != BRIG_KIND_COMPUTER && kind != BRIG_KIND_RUN)
		return brig__error_set(err, BRIG_EINVAL, 0, "kind: must be computer or run");
	if (kind == BRIG_KIND_COMPUTER && (r = brig_identity_validate(id, err)) < 0)
		return r;
	if (spec_hash && !is_hash(spec_hash))
		return brig__error_set(err, BRIG_EINVAL, 0, "spec hash: must be 64 lowercase hex digits");
	if (!spec_hash) {
		if ((r = brig_spec_hash(hash, spec, err)) < 0)
			return r;
		spec_hash = hash;
	} else if ((r = brig_spec_validate(spec, NULL, err)) < 0) {
		return r;
	}
	json_t *o = labels_object(spec->labels, spec->label_count);
	json_object_set_new(o, BRIG_LABEL_MANAGED, json_string("1"));
	json_object_set_new(o, BRIG_LABEL_KIND, json_string(brig_kind_name(kind)));
	json_object_set_new(o, BRIG_LABEL_VERSION, json_string(BRIG_VERSION));
	json_object_set_new(o, BRIG_LABEL_SPEC, json_string(spec_hash));
	json_object_set_new(o, BRIG_LABEL_HARNESS, json_string(brig_harness_name(spec->harness)));
	if (spec->secret_count) {
		char buf[BRIG_SPEC_SECRETS_MAX * 130] = "";
		size_t at = 0;
		for (size_t i = 0; i < spec->secret_count && at < sizeof buf; i++)
			at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%.*s", i ? "," : "",
					       (int)strcspn(spec->secrets[i], "@"), spec->secrets[i]);
		json_object_set_new(o, BRIG_LABEL_SECRETS, json_string(buf));
	}
	if (kind == BRIG_KIND_COMPUTER) {
		snprintf(gen, sizeof gen, "%u", (unsigned)id->generation);
		json_object_set_new(o, BRIG_LABEL_NS, json_string(id->ns));
		json_object_set_new(o, BRIG_LABEL_AGENT, json_string(id->agent));
		json_object_set_new(o, BRIG_LABEL_SESSION, json_string(id->session));
		json_object_set_new(o, BRIG_LABEL_GENERATION, json_string(gen));
	}
	*out = o;
	return 0;
}

/* ---- volumes ---- */

const char *brig_volume_name(brig_volume v)
{
	switch (v) {
	case BRIG_VOLUME_WORKSPACE: return "workspace";
	case BRIG_VOLUME_RUNTIME: return "runtime";
	case BRIG_VOLUME_INBOX: return "inbox";
	case BRIG_VOLUME_OUTBOX: return "outbox";
	default: return "?";
	}
}

const char *brig_volume_target(brig_volume v)
{
	switch (v) {
	case BRIG_VOLUME_WORKSPACE: return "/workspace";
	case BRIG_VOLUME_RUNTIME: return "/runtime";
	case BRIG_VOLUME_INBOX: return "/inbox";
	case BRIG_VOLUME_OUTBOX: return "/outbox";
	default: return "/";
	}
}

char *brig_spec_volume_name(const char *container, brig_volume which)
{
	return xasprintf("%s-%s", container ? container : "", brig_volume_name(which));
}

/* {"type":"tmpfs","device":"tmpfs","o":"size=…"}: the local driver mounts a
 * tmpfs with these options (nosuid/nodev become mount flags). The volume
 * stays executable: agents compile and run code in /workspace. */
static char *tmpfs_options(const brig_spec *spec, brig_volume which, int64_t size_mb, const brig_idshift *sh)
{
	uint32_t uid = 0, gid = 0;
	const char *mode = "0700";
	int64_t inodes = which == BRIG_VOLUME_RUNTIME ? spec->runtime_inodes : spec->workspace_inodes;
	if (which == BRIG_VOLUME_INBOX)
		mode = "0755"; /* root-owned: readable, never writable, by the user */
	else
		brig_spec__parse_user(spec->user, &uid, &gid, NULL);
	/* the local driver mounts on the host: a daemon with userns-remap needs
	 * the host ids the container's ids map to */
	if (sh) {
		uid += sh->uid;
		gid += sh->gid;
	}
	return xasprintf("size=%lldm,uid=%u,gid=%u,mode=%s,nr_inodes=%lld,nosuid,nodev", (long long)size_mb, uid,
			 gid, mode, (long long)inodes);
}

static json_t *tmpfs_opts(const brig_spec *spec, brig_volume which, int64_t size_mb, const brig_idshift *sh)
{
	json_t *o = json_object();
	json_object_set_new(o, "type", json_string("tmpfs"));
	json_object_set_new(o, "device", json_string("tmpfs"));
	cleanup_free char *opts = tmpfs_options(spec, which, size_mb, sh);
	json_object_set_new(o, "o", json_string(opts));
	return o;
}

static json_t *volume_labels(const json_t *labels, const char *container, brig_volume which)
{
	json_t *l = json_is_object(labels) ? json_deep_copy(labels) : json_object();
	if (!json_object_get(l, BRIG_LABEL_MANAGED))
		json_object_set_new(l, BRIG_LABEL_MANAGED, json_string("1"));
	if (!json_object_get(l, BRIG_LABEL_VERSION))
		json_object_set_new(l, BRIG_LABEL_VERSION, json_string(BRIG_VERSION));
	/* A volume is not a computer even when it carries the computer's
	 * identity labels (kept so gc can say whose it was). */
	json_object_set_new(l, BRIG_LABEL_KIND, json_string("volume"));
	if (container)
		json_object_set_new(l, BRIG_LABEL_CONTAINER, json_string(container));
	json_object_set_new(l, BRIG_LABEL_VOLUME, json_string(brig_volume_name(which)));
	return l;
}

static int64_t volume_mb(const brig_spec *spec, brig_volume which)
{
	return which == BRIG_VOLUME_RUNTIME ? spec->runtime_mb : spec->workspace_mb;
}

int brig_spec_volume_json(json_t **out, const brig_spec *spec, const char *container, brig_volume which,
			  const json_t *labels, brig_error **err)
{
	return brig_spec_volume_json_shifted(out, spec, container, which, labels, NULL, err);
}

int brig_spec_volume_json_shifted(json_t **out, const brig_spec *spec, const char *container, brig_volume which,
				  const json_t *labels, const brig_idshift *shift, brig_error **err)
{
	int r;
	*out = NULL;
	if ((r = brig_spec_validate(spec, NULL, err)) < 0 || (r = check_container_name(container, err)) < 0)
		return r;
	if (which != BRIG_VOLUME_WORKSPACE && which != BRIG_VOLUME_RUNTIME)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "volume: a computer has only workspace and runtime volumes");
	json_t *o = json_object();
	json_object_set_new(o, "Name", json_sprintf("%s-%s", container, brig_volume_name(which)));
	json_object_set_new(o, "Driver", json_string("local"));
	json_object_set_new(o, "DriverOpts", tmpfs_opts(spec, which, volume_mb(spec, which), shift));
	json_object_set_new(o, "Labels", volume_labels(labels, container, which));
	*out = o;
	return 0;
}

/* Docker's default masked paths (moby daemon/pkg/oci/defaults.go, 2026;
 * setting MaskedPaths replaces its list, so it is repeated here) and three
 * that tell an attacker about the host kernel: its build configuration,
 * its crash-dump layout and its symbol table. Left out: the per-CPU
 * thermal_throttle directories upstream adds when present (a list that
 * depends on the host would change the body from machine to machine). */
static json_t *masked_paths(void)
{
	static const char *const paths[] = {
		"/proc/acpi",	    "/proc/asound",	   "/proc/interrupts",	"/proc/kcore",
		"/proc/keys",	    "/proc/latency_stats", "/proc/sched_debug", "/proc/scsi",
		"/proc/timer_list", "/proc/timer_stats",   "/sys/firmware",	"/sys/devices/virtual/powercap",
		"/proc/config.gz",  "/proc/kallsyms",	   "/sys/kernel/vmcoreinfo",
	};
	json_t *a = json_array();
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
		json_array_append_new(a, json_string(paths[i]));
	return a;
}

/* One entry of HostConfig.Mounts. source NULL makes an anonymous volume,
 * which Docker removes with the container (AutoRemove / remove with v=1).
 * NoCopy keeps Docker from copying the image's directory — and its owner
 * and mode — over the tmpfs options. */
static json_t *volume_mount(const brig_spec *spec, brig_volume which, int64_t size_mb, const char *source,
			    const json_t *labels, const char *container, const brig_idshift *sh)
{
	json_t *m = json_object();
	json_object_set_new(m, "Type", json_string("volume"));
	if (source)
		json_object_set_new(m, "Source", json_string(source));
	json_object_set_new(m, "Target", json_string(brig_volume_target(which)));
	json_object_set_new(m, "ReadOnly", json_false());
	json_t *vo = json_object();
	json_object_set_new(vo, "NoCopy", json_true());
	json_object_set_new(vo, "Labels", volume_labels(labels, container, which));
	json_t *dc = json_object();
	json_object_set_new(dc, "Name", json_string("local"));
	json_object_set_new(dc, "Options", tmpfs_opts(spec, which, size_mb, sh));
	json_object_set_new(vo, "DriverConfig", dc);
	json_object_set_new(m, "VolumeOptions", vo);
	return m;
}

static json_t *ulimit(const char *name, int64_t v)
{
	return json_pack("{s:s, s:I, s:I}", "Name", name, "Soft", (json_int_t)v, "Hard", (json_int_t)v);
}

static json_t *strings(int n, ...)
{
	va_list ap;
	json_t *a = json_array();
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(va_arg(ap, const char *)));
	va_end(ap);
	return a;
}

static int check_opts(const brig_spec *spec, const brig_container_opts *opts, brig_error **err)
{
	int r;
	if (!opts)
		return brig__error_set(err, BRIG_EINVAL, 0, "container options: missing");
	if ((r = brig__opts_check(opts->version, BRIG_CONTAINER_OPTS_VERSION, "container options", err)) < 0 ||
	    (r = brig_spec_validate(spec, NULL, err)) < 0)
		return r;
	if (opts->spec_hash && !is_hash(opts->spec_hash))
		return brig__error_set(err, BRIG_EINVAL, 0, "spec hash: must be 64 lowercase hex digits");
	if (opts->init_hash && (strlen(opts->init_hash) != 16 || strspn(opts->init_hash, "0123456789abcdef") != 16))
		return brig__error_set(err, BRIG_EINVAL, 0, "init hash: must be 16 lowercase hex digits");
	if (opts->kind == BRIG_KIND_COMPUTER) {
		if ((r = brig_identity_validate(opts->id, err)) < 0 ||
		    (r = check_container_name(opts->name, err)) < 0)
			return r;
		return 0;
	}
	if (opts->kind != BRIG_KIND_RUN)
		return brig__error_set(err, BRIG_EINVAL, 0, "kind: must be computer or run");
	if (spec->port_count)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "publish: only computers publish ports; a run is gone when its command ends");
	if (opts->lifetime_s < 1 || opts->lifetime_s > LIFETIME_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "lifetime: must be from 1 to %lld seconds, got %lld",
				       LIFETIME_MAX, (long long)opts->lifetime_s);
	if (opts->inbox_mb < 0 || opts->inbox_mb > spec->memory_mb)
		return brig__error_set(err, BRIG_EINVAL, 0, "inbox: must be from 0 to %lld MB, got %lld",
				       (long long)spec->memory_mb, (long long)opts->inbox_mb);
	if (opts->outbox_mb < 0 || opts->outbox_mb > spec->memory_mb)
		return brig__error_set(err, BRIG_EINVAL, 0, "out-mb: must be from 0 to %lld MB, got %lld",
				       (long long)spec->memory_mb, (long long)opts->outbox_mb);
	if (opts->deadline_unix < 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "deadline: must not be negative");
	if (opts->name && (r = check_container_name(opts->name, err)) < 0)
		return r;
	if (opts->run_id && (r = brig_identity_check_name("run id", opts->run_id, err)) < 0)
		return r;
	if (opts->plain_tmpfs && (opts->inbox_mb || opts->outbox_mb))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "plain tmpfs: a run with /inbox or /outbox needs volumes (the archive endpoints "
				       "cannot reach a plain tmpfs)");
	if (opts->network_disabled && spec->network != BRIG_NET_NONE)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "network disabled: only for network none (the isolated bridge needs Docker's "
				       "network sandbox)");
	return brig_spec__check_tmpfs(spec, opts->inbox_mb, opts->outbox_mb, err);
}

/* The only way out of an egress sandbox, in every spelling clients read
 * (curl and Python read both cases; Node 22.21+/24 needs NODE_USE_ENV_PROXY).
 * The user's own entries win. */
static void add_proxy_env(json_t *env, const brig_spec *spec)
{
	static const char *const keys[] = {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", NULL};
	for (const char *const *k = keys; *k; k++)
		if (brig_spec__env_find(spec->env, spec->env_count, *k, strlen(*k)) < 0)
			json_array_append_new(
				env, json_sprintf("%s=http://%s:%d", *k, BRIG_EGRESS_GATEWAY, BRIG_EGRESS_PORT));
	static const char *const rest[] = {"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
					   "NODE_USE_ENV_PROXY=1", NULL};
	for (const char *const *r = rest; *r; r++)
		if (brig_spec__env_find(spec->env, spec->env_count, *r, strcspn(*r, "=")) < 0)
			json_array_append_new(env, json_string(*r));
	/* With secrets the proxy answers TLS for their hosts with brig's own
	 * authority: trusted beside the system's (a combined bundle), from
	 * files brig puts in root-owned /runtime/.brig at start. */
	static const char *const trust[] = {
		"SSL_CERT_FILE=" BRIG_EGRESS_CA_BUNDLE_PATH, "REQUESTS_CA_BUNDLE=" BRIG_EGRESS_CA_BUNDLE_PATH,
		"CURL_CA_BUNDLE=" BRIG_EGRESS_CA_BUNDLE_PATH, "NODE_EXTRA_CA_CERTS=" BRIG_EGRESS_CA_PATH, NULL};
	for (const char *const *t = trust; spec->secret_count && *t; t++)
		if (brig_spec__env_find(spec->env, spec->env_count, *t, strcspn(*t, "=")) < 0)
			json_array_append_new(env, json_string(*t));
}

int brig_spec_container_json(json_t **out, const brig_spec *spec, const brig_container_opts *opts,
			     brig_error **err)
{
	int r;
	json_t *labels = NULL;
	*out = NULL;
	if ((r = check_opts(spec, opts, err)) < 0)
		return r;
	bool run = opts->kind == BRIG_KIND_RUN;
	if ((r = brig_spec_labels(&labels, spec, opts->kind, run ? NULL : opts->id, opts->spec_hash, err)) < 0)
		return r;
	if (run && opts->run_id)
		json_object_set_new(labels, BRIG_LABEL_RUN, json_string(opts->run_id));
	if (run && opts->deadline_unix > 0)
		json_object_set_new(labels, BRIG_LABEL_DEADLINE, json_sprintf("%lld", (long long)opts->deadline_unix));

	/* HOME lives on the runtime volume: the root filesystem is read-only.
	 * Env values never enter Config.Env, which docker inspect shows anyone
	 * who may ask the daemon: credentials and a run's entries come with
	 * each exec (brig_spec_exec_env); a computer's brig-init reads its
	 * entries from BRIG_GP_ENV_FILE, which brig puts on /runtime. Only a
	 * computer without brig-init (init_hash NULL) keeps them here. */
	bool env_in_config = !run && !opts->init_hash;
	json_t *env = json_array();
	if (!env_in_config || brig_spec__env_find(spec->env, spec->env_count, "HOME", 4) < 0)
		json_array_append_new(env, json_string("HOME=/runtime"));
	for (size_t i = 0; env_in_config && i < spec->env_count; i++)
		if (!brig_env_is_credential(spec->env[i]))
			json_array_append_new(env, json_string(spec->env[i]));
	if (spec->network == BRIG_NET_EGRESS)
		add_proxy_env(env, spec);

	json_t *mounts = json_array();
	json_t *tmpfs = json_object();
	const brig_idshift *sh = opts->version >= 2 ? &opts->shift : NULL;
	if (!run) {
		for (brig_volume v = BRIG_VOLUME_WORKSPACE; v <= BRIG_VOLUME_RUNTIME; v++) {
			char *src = brig_spec_volume_name(opts->name, v);
			json_array_append_new(mounts, volume_mount(spec, v, volume_mb(spec, v), src, labels, opts->name, sh));
			free(src);
		}
	} else if (opts->plain_tmpfs) {
		/* Mounted by runc inside the container's own mount namespace: no
		 * volume to create, mount on the host, unmount and remove (~4 ms a
		 * run, measured). Docker adds noexec unless told otherwise. */
		for (brig_volume v = BRIG_VOLUME_WORKSPACE; v <= BRIG_VOLUME_RUNTIME; v++) {
			cleanup_free char *o = tmpfs_options(spec, v, volume_mb(spec, v), NULL);
			json_object_set_new(tmpfs, brig_volume_target(v), json_sprintf("exec,%s", o));
		}
	} else {
		/* Anonymous: no Source, so AutoRemove takes them with the container. */
		json_array_append_new(mounts, volume_mount(spec, BRIG_VOLUME_WORKSPACE, spec->workspace_mb, NULL,
							   labels, opts->name, sh));
		json_array_append_new(mounts, volume_mount(spec, BRIG_VOLUME_RUNTIME, spec->runtime_mb, NULL, labels,
							   opts->name, sh));
		if (opts->inbox_mb > 0)
			json_array_append_new(mounts, volume_mount(spec, BRIG_VOLUME_INBOX, opts->inbox_mb, NULL,
								   labels, opts->name, sh));
		if (opts->outbox_mb > 0)
			json_array_append_new(mounts, volume_mount(spec, BRIG_VOLUME_OUTBOX, opts->outbox_mb, NULL,
								   labels, opts->name, sh));
	}

	bool guest = opts->init_hash != NULL;
	if (guest) {
		json_array_append_new(mounts, json_pack("{s:s, s:s++, s:s, s:b}", "Type", "volume", "Source",
							"brig-init-", opts->init_hash, opts->gvisor ? "-r" : "",
							"Target", "/.brig", "ReadOnly", 1));
		json_object_set_new(labels, BRIG_LABEL_INIT, json_string(opts->init_hash));
	}

	json_t *secopt = strings(1, "no-new-privileges");
	if (spec->seccomp_profile)
		json_array_append_new(secopt, json_sprintf("seccomp=%s", spec->seccomp_profile));

	int64_t mem = spec->memory_mb * 1024 * 1024;
	json_t *hc = json_object();
	json_object_set_new(hc, "Binds", json_null());
	json_object_set_new(hc, "Mounts", mounts);
	if (json_object_size(tmpfs))
		json_object_set_new(hc, "Tmpfs", tmpfs);
	else
		json_decref(tmpfs);
	json_object_set_new(hc, "ReadonlyRootfs", json_true());
	json_object_set_new(hc, "CapDrop", strings(1, "ALL"));
	json_object_set_new(hc, "CapAdd", json_null());
	json_object_set_new(hc, "SecurityOpt", secopt);
	json_object_set_new(hc, "Privileged", json_false());
	if (spec->runtime)
		json_object_set_new(hc, "Runtime", json_string(spec->runtime));
	/* runsc cannot start in a user namespace of dockerd's remap ("cannot
	 * read client sync file"); its sandbox makes its own (see gvisor in
	 * brig_container_opts). */
	if (opts->gvisor)
		json_object_set_new(hc, "UsernsMode", json_string("host"));
	json_object_set_new(hc, "NetworkMode",
			    json_string(spec->network == BRIG_NET_ISOLATED ? BRIG_NETWORK_NAME
					: spec->network == BRIG_NET_EGRESS ? BRIG_EGRESS_NETWORK
									   : "none"));
	json_object_set_new(hc, "PublishAllPorts", json_false());
	json_object_set_new(hc, "Memory", json_integer(mem));
	json_object_set_new(hc, "MemorySwap", json_integer(mem)); /* equal: no swap */
	json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)brig_spec__nano_cpus(spec->cpus)));
	json_object_set_new(hc, "PidsLimit", json_integer(opts->gvisor ? BRIG_GVISOR_PIDS(spec->pids) : spec->pids));
	/* docker-init reaps zombies and forwards TERM; brig-init does both itself */
	json_object_set_new(hc, "Init", json_boolean(!guest));
	json_object_set_new(hc, "IpcMode", json_string("private"));
	json_object_set_new(hc, "ShmSize", json_integer(spec->shm_mb * 1024 * 1024));
	json_object_set_new(hc, "Ulimits", json_pack("[o, o]", ulimit("nofile", spec->nofile), ulimit("core", 0)));
	/* No daemon-side logger: output reaches brig through attach or exec,
	 * and json-file did per-line work on a flood nobody reads (145 dockerd
	 * CPU-seconds for 50 MB of newlines). */
	json_object_set_new(hc, "LogConfig", json_pack("{s:s, s:{}}", "Type", "none", "Config"));
	/* The container id stays out of /proc/self/cgroup. */
	json_object_set_new(hc, "CgroupnsMode", json_string("private"));
	json_object_set_new(hc, "MaskedPaths", masked_paths());
	json_object_set_new(hc, "RestartPolicy", json_pack("{s:s}", "Name", "no"));
	json_object_set_new(hc, "AutoRemove", json_boolean(run));
	if (opts->network_disabled)
		/* IPv6 off as Docker's sandbox for "none" leaves it (its set-ipv6):
		 * without, lo keeps ::1, localhost resolves to it first, and a
		 * client of a server on 127.0.0.1 by that name is refused. runc
		 * writes these in the new namespace: no re-exec. */
		json_object_set_new(hc, "Sysctls",
				    json_pack("{s:s, s:s, s:s}", "net.ipv6.conf.all.disable_ipv6", "1",
					      "net.ipv6.conf.default.disable_ipv6", "1", "net.ipv6.conf.lo.disable_ipv6",
					      "1"));

	json_t *c = json_object();
	json_object_set_new(c, "Image", json_string(spec->image));
	json_object_set_new(c, "User", json_string(spec->user));
	json_object_set_new(c, "Env", env);
	json_object_set_new(c, "WorkingDir", json_string("/workspace"));
	json_object_set_new(c, "Labels", labels);
	if (opts->network_disabled) /* HostConfig.NetworkMode stays "none" */
		json_object_set_new(c, "NetworkDisabled", json_true());
	/* PID 1 keeps the container alive and commands arrive by exec or over
	 * brig-init's relay. A run's lifetime is its PID 1's (brig-init's
	 * --lifetime, or sleep under docker-init): the container ends itself
	 * even if brig is gone. */
	json_t *ep;
	if (run && guest)
		ep = json_pack("[s, s, s, o]", "/.brig/brig-init", "init", "--lifetime",
			       json_sprintf("%lld", (long long)opts->lifetime_s));
	else if (run)
		ep = json_pack("[s, o]", "sleep", json_sprintf("%lld", (long long)opts->lifetime_s));
	else
		ep = guest ? strings(2, "/.brig/brig-init", "init") : strings(2, "sleep", "2147483647");
	json_object_set_new(c, "Entrypoint", ep);
	json_object_set_new(c, "Cmd", json_null());
	json_object_set_new(c, "AttachStdin", json_false());
	json_object_set_new(c, "AttachStdout", json_false());
	json_object_set_new(c, "AttachStderr", json_false());
	json_object_set_new(c, "Tty", json_false());
	json_object_set_new(c, "OpenStdin", json_false());
	json_object_set_new(c, "StdinOnce", json_false());
	json_object_set_new(c, "StopSignal", json_string("SIGTERM"));
	json_object_set_new(c, "StopTimeout", json_integer(2));
	brig_spec__port_bindings(spec, c, hc);
	json_object_set_new(c, "HostConfig", hc);
	*out = c;
	return 0;
}

/* ---- network ---- */

int brig_spec_network_json(json_t **out, const brig_spec *spec, brig_error **err)
{
	int r;
	*out = NULL;
	if (!spec)
		return brig__error_set(err, BRIG_EINVAL, 0, "spec: missing");
	if ((r = brig_subnet_validate(spec->subnet, err)) < 0)
		return r;
	/* A fixed bridge interface and subnet also settle a creation race: a
	 * second network with either would be refused by the daemon. Docker's
	 * own masquerading is off: with it, Docker makes traffic from the
	 * bridge skip its port DNAT and reach published ports through the
	 * userland proxy on the host's INPUT, which brig's firewall closes;
	 * firewall.c adds the MASQUERADE rule instead (see there). */
	*out = json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:{s:s, s:s, s:s},"
			 " s:{s:s, s:[{s:s}]}, s:{s:s, s:s, s:s}}",
			 "Name", BRIG_NETWORK_NAME, "Driver", "bridge", "CheckDuplicate", 1, "Internal", 0,
			 "Attachable", 0, "EnableIPv6", 0, "Options", "com.docker.network.bridge.enable_icc",
			 "false", "com.docker.network.bridge.name", BRIG_NETWORK_BRIDGE,
			 "com.docker.network.bridge.enable_ip_masquerade", "false", "IPAM", "Driver", "default",
			 "Config", "Subnet", spec->subnet, "Labels", BRIG_LABEL_MANAGED, "1", BRIG_LABEL_KIND,
			 "network", BRIG_LABEL_VERSION, BRIG_VERSION);
	return 0;
}
