/* spec.c — the hardened container spec: the seed's defaults, setters from
 * command-line strings, validation with clear errors and the tmpfs budget. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/egress.h"
#include "spec/spec_internal.h"
#include "util/util.h"

/* ---- ranges (inclusive) ---- */
#define MEMORY_MB_MAX (4LL << 20) /* 4 TiB: keeps bytes far from overflow */
#define PIDS_MIN 16
#define PIDS_MAX 1048576
#define NOFILE_MIN 64
#define NOFILE_MAX 1048576 /* the kernel's default fs.nr_open */
#define INODES_MIN 128
#define INODES_MAX (16LL << 20)
#define NANO_CPUS_MIN 10000000LL /* 0.01 CPU, Docker's own minimum */
#define CPUS_MAX 4096
#define IMAGE_MAX 512
#define SECCOMP_MAX (256 * 1024)
#define RUNTIME_MAX 63

/* ---- enums ---- */

const char *brig_network_name(brig_network n)
{
	return n == BRIG_NET_ISOLATED ? "isolated" : n == BRIG_NET_EGRESS ? "egress" : "none";
}

const char *brig_harness_name(brig_harness h)
{
	switch (h) {
	case BRIG_HARNESS_CLAUDE: return "claude";
	case BRIG_HARNESS_CODEX: return "codex";
	default: return "none";
	}
}

const char *brig_kind_name(brig_kind k) { return k == BRIG_KIND_RUN ? "run" : "computer"; }

int brig_network_parse(brig_network *out, const char *s, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	if (!s)
		s = "";
	if (strcmp(s, "none") == 0) {
		*out = BRIG_NET_NONE;
		return 0;
	}
	if (strcmp(s, "isolated") == 0) {
		*out = BRIG_NET_ISOLATED;
		return 0;
	}
	if (strcmp(s, "egress") == 0) {
		*out = BRIG_NET_EGRESS;
		return 0;
	}
	if (strcmp(s, "host") == 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "network: 'host' is refused: it would share the host's network stack; "
				       "use none or isolated");
	if (strncmp(s, "container:", 10) == 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "network: 'container:...' is refused: it would join another container's "
				       "network namespace; use none or isolated");
	if (strcmp(s, "bridge") == 0 || strcmp(s, "default") == 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "network: '%s' is refused: Docker's default bridge lets containers reach "
				       "each other; use none, or isolated (brig's own bridge, inter-container "
				       "traffic off)",
				       s);
	return brig__error_set(err, BRIG_EINVAL, 0, "network: must be none, isolated or egress, got '%s'",
			       brig_spec__quote(q, s));
}

int brig_harness_parse(brig_harness *out, const char *s, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	if (!s)
		s = "";
	if (strcmp(s, "none") == 0)
		*out = BRIG_HARNESS_NONE;
	else if (strcmp(s, "claude") == 0)
		*out = BRIG_HARNESS_CLAUDE;
	else if (strcmp(s, "codex") == 0)
		*out = BRIG_HARNESS_CODEX;
	else
		return brig__error_set(err, BRIG_EINVAL, 0, "harness: must be claude, codex or none, got '%s'",
				       brig_spec__quote(q, s));
	return 0;
}

/* ---- lifetime ---- */

void brig_spec_init(brig_spec *spec)
{
	memset(spec, 0, sizeof *spec);
	spec->version = BRIG_SPEC_VERSION;
	spec->image = xstrdup(BRIG_DEFAULT_IMAGE);
	spec->user = xstrdup(BRIG_DEFAULT_USER);
	spec->cpus = 2.0;
	spec->memory_mb = 2048;
	spec->pids = 256;
	spec->workspace_mb = 512;
	spec->runtime_mb = 256;
	spec->shm_mb = 64;
	spec->workspace_inodes = 65536;
	spec->runtime_inodes = 32768;
	spec->nofile = 1024;
	spec->network = BRIG_NET_NONE;
	spec->subnet = xstrdup(BRIG_DEFAULT_SUBNET);
	spec->harness = BRIG_HARNESS_NONE;
	spec->seccomp_profile = xstrdup(brig_spec_seccomp_default());
}

static void free_entry(char *e)
{
	if (!e)
		return;
	/* env entries may hold credentials: wipe before handing memory back. */
	explicit_bzero(e, strlen(e));
	free(e);
}

void brig_spec_clear(brig_spec *spec)
{
	if (!spec)
		return;
	free(spec->image);
	free(spec->user);
	free(spec->subnet);
	free(spec->seccomp_profile);
	free(spec->runtime);
	for (size_t i = 0; i < spec->env_count; i++)
		free_entry(spec->env[i]);
	free(spec->env);
	for (size_t i = 0; i < spec->label_count; i++)
		free(spec->labels[i]);
	free(spec->labels);
	free(spec->ports);
	for (size_t i = 0; i < spec->allow_count; i++)
		free(spec->allow[i]);
	free(spec->allow);
	for (size_t i = 0; i < spec->secret_count; i++)
		free(spec->secrets[i]);
	free(spec->secrets);
	memset(spec, 0, sizeof *spec);
}

static char **copy_list(char *const *v, size_t n)
{
	if (!v || !n)
		return NULL;
	char **r = xcalloc(n, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		r[i] = xstrdup(v[i]);
	return r;
}

void brig_spec_copy(brig_spec *dst, const brig_spec *src)
{
	*dst = *src;
	dst->image = src->image ? xstrdup(src->image) : NULL;
	dst->user = src->user ? xstrdup(src->user) : NULL;
	dst->subnet = src->subnet ? xstrdup(src->subnet) : NULL;
	dst->seccomp_profile = src->seccomp_profile ? xstrdup(src->seccomp_profile) : NULL;
	dst->runtime = src->runtime ? xstrdup(src->runtime) : NULL;
	dst->env = copy_list(src->env, src->env_count);
	dst->env_count = dst->env ? src->env_count : 0;
	dst->labels = copy_list(src->labels, src->label_count);
	dst->label_count = dst->labels ? src->label_count : 0;
	dst->ports = NULL;
	dst->port_count = 0;
	if (src->ports && src->port_count) {
		dst->ports = xcalloc(src->port_count, sizeof *dst->ports);
		memcpy(dst->ports, src->ports, src->port_count * sizeof *dst->ports);
		dst->port_count = src->port_count;
	}
	dst->allow = copy_list(src->allow, src->allow_count);
	dst->allow_count = dst->allow ? src->allow_count : 0;
	dst->secrets = copy_list(src->secrets, src->secret_count);
	dst->secret_count = dst->secrets ? src->secret_count : 0;
}

/* ---- single-field checks, shared by the setters and validate ---- */

static int check_image(const char *image, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	size_t n = image ? strnlen(image, IMAGE_MAX + 1) : 0;
	bool ok = n > 0 && n <= IMAGE_MAX && image[0] != '-';
	for (size_t i = 0; ok && i < n; i++) {
		unsigned char c = (unsigned char)image[i];
		if (c <= 0x20 || c >= 0x7f)
			ok = false;
	}
	if (!ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "image: must be an image reference of 1-%d printable characters without "
				       "spaces (a tag such as %s, or an id sha256:...), got '%s'",
				       IMAGE_MAX, BRIG_DEFAULT_IMAGE, brig_spec__quote(q, image ? image : ""));
	return 0;
}

static bool ascii_alnum(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

int brig_runtime_validate(const char *name, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	size_t n = name ? strnlen(name, RUNTIME_MAX + 1) : 0;
	bool ok = n > 0 && n <= RUNTIME_MAX && ascii_alnum((unsigned char)name[0]);
	for (size_t i = 0; ok && i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		ok = ascii_alnum(c) || c == '_' || c == '.' || c == '-';
	}
	if (!ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "runtime: must be a runtime name the daemon registers (1-%d characters of "
				       "A-Z a-z 0-9 _ . - such as runsc), got '%s'",
				       RUNTIME_MAX, brig_spec__quote(q, name ? name : ""));
	return 0;
}

static int check_range(const char *field, int64_t v, int64_t min, int64_t max, const char *unit, brig_error **err)
{
	if (v < min || v > max)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: must be from %lld to %lld%s, got %lld", field,
				       (long long)min, (long long)max, unit, (long long)v);
	return 0;
}

static int check_cpus(double cpus, brig_error **err)
{
	if (brig_spec__nano_cpus(cpus) < NANO_CPUS_MIN || cpus > CPUS_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "cpus: must be from 0.01 to %d CPUs, got %g", CPUS_MAX,
				       cpus);
	return 0;
}

static int check_seccomp(const char *text, brig_error **err)
{
	if (!text)
		return 0;
	if (strlen(text) > SECCOMP_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "seccomp-profile: longer than %d bytes", SECCOMP_MAX);
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	bool ok = json_is_object(j);
	json_decref(j);
	if (!ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "seccomp-profile: must be a JSON object (a Docker seccomp profile)%s%s",
				       j ? "" : ": ", j ? "" : jerr.text);
	return 0;
}

static bool label_key_ok(const char *k, size_t n)
{
	if (n == 0 || n > BRIG_SPEC__LABEL_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '-' || c == '_' || c == '/'))
			return false;
	}
	return true;
}

static int check_label(const char *entry, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	const char *eq = entry ? strchr(entry, '=') : NULL;
	if (!eq || !label_key_ok(entry, (size_t)(eq - entry)))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "label: must be key=value with a key of 1-%d characters of A-Z a-z 0-9 . - "
				       "_ /, got '%s'",
				       BRIG_SPEC__LABEL_KEY_MAX, brig_spec__quote(q, entry ? entry : ""));
	size_t klen = (size_t)(eq - entry);
	char *key = xstrndup(entry, klen);
	bool reserved = brig_spec__label_reserved(key);
	free(key);
	if (reserved)
		return brig__error_set(err, BRIG_EINVAL, 0, "label: '%s' is brig's own label and cannot be set",
				       brig_spec__quoten(q, entry, klen));
	const char *v = eq + 1;
	bool ok = strlen(v) <= BRIG_SPEC__LABEL_VALUE_MAX;
	for (const char *p = v; ok && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			ok = false;
	if (ok) {
		json_t *s = json_string(v); /* rejects malformed UTF-8 */
		ok = s != NULL;
		json_decref(s);
	}
	if (!ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "label: the value of '%s' must be at most %d bytes of UTF-8 without control "
				       "characters",
				       brig_spec__quoten(q, entry, klen), BRIG_SPEC__LABEL_VALUE_MAX);
	return 0;
}

/* ---- subnet ---- */

static bool parse_octet(const char **p, uint32_t *out)
{
	const char *s = *p;
	uint32_t v = 0;
	int digits = 0;
	while (*s >= '0' && *s <= '9' && digits < 4) {
		v = v * 10 + (uint32_t)(*s - '0');
		s++;
		digits++;
	}
	if (digits == 0 || digits > 3 || v > 255 || (digits > 1 && **p == '0'))
		return false;
	*out = v;
	*p = s;
	return true;
}

static bool in_net(uint32_t addr, int prefix, uint32_t net, int net_prefix)
{
	uint32_t mask = net_prefix ? ~0u << (32 - net_prefix) : 0;
	return prefix >= net_prefix && (addr & mask) == net;
}

int brig_subnet_validate(const char *cidr, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	const char *p = cidr ? cidr : "";
	uint32_t addr = 0, o, prefix = 0;
	bool ok = true;
	for (int i = 0; ok && i < 4; i++) {
		ok = parse_octet(&p, &o) && *p == (i < 3 ? '.' : '/');
		addr = addr << 8 | o;
		p++;
	}
	ok = ok && parse_octet(&p, &prefix) && *p == '\0';
	if (!ok || prefix < 8 || prefix > 28)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "subnet: must be an IPv4 network a.b.c.d/p with p from 8 to 28 such as %s, "
				       "got '%s'",
				       BRIG_DEFAULT_SUBNET, brig_spec__quote(q, cidr ? cidr : ""));
	uint32_t mask = ~0u << (32 - prefix);
	if (addr & ~mask) {
		uint32_t n = addr & mask;
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "subnet: '%s' has host bits set; did you mean %u.%u.%u.%u/%u?",
				       brig_spec__quote(q, cidr), n >> 24, (n >> 16) & 255, (n >> 8) & 255, n & 255,
				       prefix);
	}
	if (!in_net(addr, (int)prefix, 0x0a000000u, 8) && !in_net(addr, (int)prefix, 0xac100000u, 12) &&
	    !in_net(addr, (int)prefix, 0xc0a80000u, 16) && !in_net(addr, (int)prefix, 0x64400000u, 10))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "subnet: '%s' is not inside a private range; use part of 10.0.0.0/8, "
				       "172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10 (a public range would "
				       "hide real internet addresses from the sandboxes)",
				       brig_spec__quote(q, cidr));
	return 0;
}

/* ---- tmpfs budget ---- */

int brig_spec__check_tmpfs(const brig_spec *spec, int64_t inbox_mb, int64_t outbox_mb, brig_error **err)
{
	int64_t sum = spec->workspace_mb + spec->runtime_mb + spec->shm_mb + inbox_mb + outbox_mb;
	if (spec->memory_mb - sum >= BRIG_MIN_FREE_MB)
		return 0;
	char extra[96] = "";
	if (inbox_mb || outbox_mb)
		snprintf(extra, sizeof extra, " + inbox (%lld) + outbox (%lld)", (long long)inbox_mb,
			 (long long)outbox_mb);
	return brig__error_set(err, BRIG_EINVAL, 0,
			       "workspace-mb (%lld) + runtime-mb (%lld) + shm-mb (%lld)%s = %lld MB of tmpfs "
			       "is charged to memory-mb (%lld), leaving %lld MB; at least %d MB must stay "
			       "free for processes: lower the tmpfs sizes or raise memory-mb to %lld or more",
			       (long long)spec->workspace_mb, (long long)spec->runtime_mb, (long long)spec->shm_mb,
			       extra, (long long)sum, (long long)spec->memory_mb, (long long)(spec->memory_mb - sum),
			       BRIG_MIN_FREE_MB, (long long)(sum + BRIG_MIN_FREE_MB));
}

/* ---- validate ---- */

static int check_env_list(const brig_spec *spec, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	int r;
	size_t total = 0;
	if (spec->env_count > BRIG_SPEC__ENV_MAX || (spec->env_count && !spec->env))
		return brig__error_set(err, BRIG_EINVAL, 0, "env: more than %d entries", BRIG_SPEC__ENV_MAX);
	for (size_t i = 0; i < spec->env_count; i++) {
		if ((r = brig_env_validate(spec->env[i], err)) < 0)
			return r;
		total += strlen(spec->env[i]);
		if (total > BRIG_SPEC__ENV_TOTAL_MAX)
			return brig__error_set(err, BRIG_EINVAL, 0, "env: larger than %d bytes in total",
					       BRIG_SPEC__ENV_TOTAL_MAX);
		size_t klen = brig_spec__env_keylen(spec->env[i]);
		if (brig_spec__env_find(spec->env, i, spec->env[i], klen) >= 0)
			return brig__error_set(err, BRIG_EINVAL, 0, "env: key '%s' is given twice",
					       brig_spec__quoten(q, spec->env[i], klen));
	}
	return 0;
}

static int check_label_list(const brig_spec *spec, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	int r;
	if (spec->label_count > BRIG_SPEC__LABEL_MAX || (spec->label_count && !spec->labels))
		return brig__error_set(err, BRIG_EINVAL, 0, "label: more than %d labels", BRIG_SPEC__LABEL_MAX);
	for (size_t i = 0; i < spec->label_count; i++) {
		if ((r = check_label(spec->labels[i], err)) < 0)
			return r;
		size_t klen = brig_spec__env_keylen(spec->labels[i]);
		if (brig_spec__env_find(spec->labels, i, spec->labels[i], klen) >= 0)
			return brig__error_set(err, BRIG_EINVAL, 0, "label: '%s' is given twice",
					       brig_spec__quoten(q, spec->labels[i], klen));
	}
	return 0;
}

/* Egress rules: canonical, unique, bounded, and only with network egress. */
static int check_allow(const brig_spec *spec, brig_error **err)
{
	if (spec->allow_count == 0)
		return 0;
	if (!spec->allow || spec->allow_count > BRIG_EGRESS_RULES_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "allow: at most %d rules", BRIG_EGRESS_RULES_MAX);
	if (spec->network != BRIG_NET_EGRESS)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "allow: egress rules need --network egress (network %s does not filter by "
				       "host)",
				       brig_network_name(spec->network));
	for (size_t i = 0; i < spec->allow_count; i++) {
		char canon[BRIG_EGRESS_RULE_SIZE];
		int r = brig_egress_rule_parse(canon, spec->allow[i], err);
		if (r < 0)
			return r;
		if (strcmp(canon, spec->allow[i]) != 0)
			return brig__error_set(err, BRIG_EINVAL, 0, "allow: rule %zu is not in canonical form", i);
	}
	return 0;
}

/* "a.com,*.b.org:8443": each rule parsed; all or nothing. */
static int add_allow(brig_spec *spec, const char *value, brig_error **err)
{
	if (!value || !*value)
		return brig__error_set(
			err, BRIG_EINVAL, 0,
			"allow: give one or more rules, comma-separated (api.example.com,*.example.org:8443)");
	cleanup_free char *copy = xstrdup(value);
	char **add = xcalloc(strlen(value) / 2 + 2, sizeof *add);
	size_t n = 0;
	int r = 0;
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char canon[BRIG_EGRESS_RULE_SIZE];
		if ((r = brig_egress_rule_parse(canon, t, err)) < 0)
			goto out;
		bool dup = false;
		for (size_t i = 0; i < spec->allow_count && !dup; i++)
			dup = strcmp(spec->allow[i], canon) == 0;
		for (size_t i = 0; i < n && !dup; i++)
			dup = strcmp(add[i], canon) == 0;
		if (!dup)
			add[n++] = xstrdup(canon);
	}
	if (spec->allow_count + n > BRIG_EGRESS_RULES_MAX) {
		r = brig__error_set(err, BRIG_EINVAL, 0, "allow: at most %d rules", BRIG_EGRESS_RULES_MAX);
		goto out;
	}
	spec->allow = xrealloc(spec->allow, (spec->allow_count + n + 1) * sizeof *spec->allow);
	for (size_t i = 0; i < n; i++) {
		spec->allow[spec->allow_count++] = add[i];
		add[i] = NULL;
	}
	spec->allow[spec->allow_count] = NULL;
out:
	for (size_t i = 0; i < n; i++)
		free(add[i]);
	free(add);
	return r;
}

/* "NAME@a.com,b.org" → canonical into out (lowercase hosts); NAME an env
 * key, hosts exact names (no wildcard, no port: the proxy answers TLS on
 * 443 for them). Errors: BRIG_EINVAL saying why, never a value. */
static int secret_canon(char **out, const char *value, brig_error **err)
{
	const char *at = value ? strchr(value, '@') : NULL;
	if (!at || at == value || !at[1])
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "secret: give NAME@HOST[,HOST...] (the value is read from brig's environment)");
	size_t kn = (size_t)(at - value);
	bool key_ok = kn <= 128 && !(value[0] >= '0' && value[0] <= '9');
	for (size_t i = 0; i < kn && key_ok; i++) {
		char c = value[i];
		key_ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
	}
	if (!key_ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "secret: the name must be an environment variable name (letters, digits, _)");
	if (strchr(at + 1, '@') || strchr(at + 1, '='))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "secret: give NAME@HOST[,HOST...]; a value is never given here, only in "
				       "brig's environment");
	brig_buf b;
	brig_buf_init(&b, 4096);
	brig_buf_put(&b, value, kn + 1);
	cleanup_free char *copy = xstrdup(at + 1);
	char *save = NULL;
	int n = 0, r = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
		char canon[BRIG_EGRESS_RULE_SIZE];
		if (t[0] == '*' || strchr(t, ':')) {
			r = brig__error_set(err, BRIG_EINVAL, 0,
					    "secret: hosts are exact names (no wildcard, no port), got '%.64s'", t);
			break;
		}
		if ((r = brig_egress_rule_parse(canon, t, err)) < 0)
			break;
		if (n >= 16) {
			r = brig__error_set(err, BRIG_EINVAL, 0, "secret: at most 16 hosts per secret");
			break;
		}
		if ((n && brig_buf_addstr(&b, ",")) || brig_buf_addstr(&b, canon)) {
			r = brig__error_set(err, BRIG_EINVAL, 0, "secret: too long");
			break;
		}
	}
	if (r == 0 && n == 0)
		r = brig__error_set(err, BRIG_EINVAL, 0, "secret: give at least one host after '@'");
	if (r < 0) {
		brig_buf_free(&b);
		return r;
	}
	*out = xstrndup(b.data, b.len);
	brig_buf_free(&b);
	return 0;
}

static int check_secrets(const brig_spec *spec, brig_error **err)
{
	if (spec->secret_count == 0)
		return 0;
	if (!spec->secrets || spec->secret_count > BRIG_SPEC_SECRETS_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "secret: at most %d secrets", BRIG_SPEC_SECRETS_MAX);
	if (spec->network != BRIG_NET_EGRESS)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "secret: needs --network egress (only brig's egress proxy can put a secret "
				       "into requests; network %s has none)",
				       brig_network_name(spec->network));
	for (size_t i = 0; i < spec->secret_count; i++) {
		cleanup_free char *canon = NULL;
		int r = secret_canon(&canon, spec->secrets[i], err);
		if (r < 0)
			return r;
		if (strcmp(canon, spec->secrets[i]) != 0)
			return brig__error_set(err, BRIG_EINVAL, 0, "secret: entry %zu is not in canonical form", i);
		size_t kn = strcspn(canon, "@");
		for (size_t j = 0; j < i; j++)
			if (strncmp(spec->secrets[j], canon, kn + 1) == 0)
				return brig__error_set(err, BRIG_EINVAL, 0, "secret: %.*s given twice", (int)kn, canon);
		if (brig_spec__env_find(spec->env, spec->env_count, canon, kn) >= 0)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret: %.*s is also given with -e; a secret's name holds its "
					       "placeholder inside",
					       (int)kn, canon);
	}
	return 0;
}

/* Adds (or replaces, by NAME) a secret and allows its hosts. */
static int add_secret(brig_spec *spec, const char *value, brig_error **err)
{
	cleanup_free char *canon = NULL;
	int r = secret_canon(&canon, value, err);
	if (r < 0)
		return r;
	size_t kn = strcspn(canon, "@");
	cleanup_free char *hosts = xstrdup(canon + kn + 1);
	if ((r = add_allow(spec, hosts, err)) < 0)
		return r;
	for (size_t i = 0; i < spec->secret_count; i++)
		if (strncmp(spec->secrets[i], canon, kn + 1) == 0) {
			free(spec->secrets[i]);
			spec->secrets[i] = steal_pointer(&canon);
			return 0;
		}
	if (spec->secret_count >= BRIG_SPEC_SECRETS_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "secret: at most %d secrets", BRIG_SPEC_SECRETS_MAX);
	spec->secrets = xrealloc(spec->secrets, (spec->secret_count + 2) * sizeof *spec->secrets);
	spec->secrets[spec->secret_count++] = steal_pointer(&canon);
	spec->secrets[spec->secret_count] = NULL;
	return 0;
}

int brig_spec_validate(const brig_spec *spec, const brig_host_limits *host, brig_error **err)
{
	uint32_t uid, gid;
	int r;
	if (!spec)
		return brig__error_set(err, BRIG_EINVAL, 0, "spec: missing");
	if ((r = brig__opts_check(spec->version, BRIG_SPEC_VERSION, "spec", err)) < 0 ||
	    (r = check_image(spec->image, err)) < 0 || (r = brig_spec__parse_user(spec->user, &uid, &gid, err)) < 0)
		return r;
	if ((r = check_cpus(spec->cpus, err)) < 0 ||
	    (r = check_range("memory-mb", spec->memory_mb, 1, MEMORY_MB_MAX, " MB", err)) < 0 ||
	    (r = check_range("pids", spec->pids, PIDS_MIN, PIDS_MAX, "", err)) < 0 ||
	    (r = check_range("workspace-mb", spec->workspace_mb, 1, MEMORY_MB_MAX, " MB", err)) < 0 ||
	    (r = check_range("runtime-mb", spec->runtime_mb, 1, MEMORY_MB_MAX, " MB", err)) < 0 ||
	    (r = check_range("shm-mb", spec->shm_mb, 1, MEMORY_MB_MAX, " MB", err)) < 0 ||
	    (r = check_range("workspace-inodes", spec->workspace_inodes, INODES_MIN, INODES_MAX, "", err)) < 0 ||
	    (r = check_range("runtime-inodes", spec->runtime_inodes, INODES_MIN, INODES_MAX, "", err)) < 0 ||
	    (r = check_range("nofile", spec->nofile, NOFILE_MIN, NOFILE_MAX, "", err)) < 0)
		return r;
	if (spec->network != BRIG_NET_NONE && spec->network != BRIG_NET_ISOLATED && spec->network != BRIG_NET_EGRESS)
		return brig__error_set(err, BRIG_EINVAL, 0, "network: must be none, isolated or egress");
	if ((r = check_allow(spec, err)) < 0 || (r = check_secrets(spec, err)) < 0)
		return r;
	if ((r = brig_subnet_validate(spec->subnet, err)) < 0)
		return r;
	if (spec->harness != BRIG_HARNESS_NONE && spec->harness != BRIG_HARNESS_CLAUDE &&
	    spec->harness != BRIG_HARNESS_CODEX)
		return brig__error_set(err, BRIG_EINVAL, 0, "harness: must be claude, codex or none");
	if (spec->runtime && (r = brig_runtime_validate(spec->runtime, err)) < 0)
		return r;
	if ((r = check_seccomp(spec->seccomp_profile, err)) < 0 || (r = check_env_list(spec, err)) < 0 ||
	    (r = check_label_list(spec, err)) < 0 || (r = brig_spec__check_ports(spec, err)) < 0)
		return r;
	if ((r = brig_spec__check_tmpfs(spec, 0, 0, err)) < 0)
		return r;
	if (host && host->mem_bytes > 0 && spec->memory_mb > host->mem_bytes / (1024 * 1024))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "memory-mb: %lld MB is more than the host's %lld MB; choose at most %lld",
				       (long long)spec->memory_mb, (long long)(host->mem_bytes / (1024 * 1024)),
				       (long long)(host->mem_bytes / (1024 * 1024)));
	if (host && host->ncpu > 0 && spec->cpus > host->ncpu)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "cpus: %g is more than the host's %d CPUs; choose at most %d", spec->cpus,
				       host->ncpu, host->ncpu);
	return 0;
}

/* ---- setters ---- */

static void replace_str(char **slot, const char *v)
{
	free(*slot);
	*slot = v ? xstrdup(v) : NULL;
}

static int parse_i64(const char *field, const char *s, int64_t min, int64_t max, const char *unit, int64_t *out,
		     brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	int64_t v = 0;
	size_t n = s ? strlen(s) : 0;
	bool ok = n > 0 && n <= 18;
	for (size_t i = 0; ok && i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			ok = false;
		else
			v = v * 10 + (s[i] - '0');
	}
	if (!ok || v < min || v > max)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: must be a whole number from %lld to %lld%s, got '%s'",
				       field, (long long)min, (long long)max, unit, brig_spec__quote(q, s ? s : ""));
	*out = v;
	return 0;
}

/* Decimal CPUs with up to 9 fraction digits, exactly (no locale, no float
 * parsing surprises): "2", "1.5", "0.25". */
static int parse_cpus(const char *s, double *out, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	int64_t whole = 0, frac = 0;
	int wd = 0, fd = 0;
	const char *p = s ? s : "";
	while (*p >= '0' && *p <= '9' && wd < 5)
		whole = whole * 10 + (*p++ - '0'), wd++;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9' && fd < 9)
			frac = frac * 10 + (*p++ - '0'), fd++;
		if (fd == 0)
			wd = 0; /* "2." is not a number */
	}
	for (int i = fd; i < 9; i++)
		frac *= 10;
	int64_t nano = whole * 1000000000LL + frac;
	if (wd == 0 || *p != '\0' || nano < NANO_CPUS_MIN || nano > (int64_t)CPUS_MAX * 1000000000LL)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "cpus: must be a number of CPUs from 0.01 to %d such as 2 or 1.5, got '%s'",
				       CPUS_MAX, brig_spec__quote(q, s ? s : ""));
	*out = (double)nano / 1e9;
	return 0;
}

static void list_put(char ***list, size_t *n, char *entry, bool wipe)
{
	size_t klen = brig_spec__env_keylen(entry);
	ptrdiff_t at = brig_spec__env_find(*list, *n, entry, klen);
	if (at >= 0) {
		if (wipe)
			free_entry((*list)[at]);
		else
			free((*list)[at]);
		(*list)[at] = entry;
		return;
	}
	*list = xrealloc(*list, (*n + 1) * sizeof(char *));
	(*list)[(*n)++] = entry;
}

int brig_spec__add_env(brig_spec *spec, const char *entry, bool lookup, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	char *owned;
	int r;
	if (!entry)
		return brig__error_set(err, BRIG_EINVAL, 0, "env: missing entry; write KEY=VALUE");
	if (!strchr(entry, '=')) {
		if (!lookup)
			return brig_env_validate(entry, err);
		char *probe = xasprintf("%s=", entry);
		r = brig_env_validate(probe, err); /* checks the key alone */
		free(probe);
		if (r < 0)
			return r;
		const char *v = getenv(entry);
		if (!v)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "env: '%s' has no '=' and is not set in brig's environment; write "
					       "KEY=VALUE",
					       brig_spec__quote(q, entry));
		owned = xasprintf("%s=%s", entry, v);
	} else {
		owned = xstrdup(entry);
	}
	if ((r = brig_env_validate(owned, err)) < 0) {
		free_entry(owned);
		return r;
	}
	size_t klen = brig_spec__env_keylen(owned);
	ptrdiff_t at = brig_spec__env_find(spec->env, spec->env_count, owned, klen);
	if (spec->env_count >= BRIG_SPEC__ENV_MAX && at < 0) {
		free_entry(owned);
		return brig__error_set(err, BRIG_EINVAL, 0, "env: more than %d entries", BRIG_SPEC__ENV_MAX);
	}
	size_t total = strlen(owned);
	for (size_t i = 0; i < spec->env_count; i++)
		if ((ptrdiff_t)i != at)
			total += strlen(spec->env[i]);
	if (total > BRIG_SPEC__ENV_TOTAL_MAX) {
		r = brig__error_set(err, BRIG_EINVAL, 0, "env: adding '%s' would make the env larger than %d bytes",
				    brig_spec__quoten(q, owned, klen), BRIG_SPEC__ENV_TOTAL_MAX);
		free_entry(owned);
		return r;
	}
	list_put(&spec->env, &spec->env_count, owned, true);
	return 0;
}

int brig_spec_add_env(brig_spec *spec, const char *entry, brig_error **err)
{
	return brig_spec__add_env(spec, entry, true, err);
}

int brig_spec_add_label(brig_spec *spec, const char *entry, brig_error **err)
{
	int r;
	if ((r = check_label(entry, err)) < 0)
		return r;
	size_t klen = brig_spec__env_keylen(entry);
	if (spec->label_count >= BRIG_SPEC__LABEL_MAX &&
	    brig_spec__env_find(spec->labels, spec->label_count, entry, klen) < 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "label: more than %d labels", BRIG_SPEC__LABEL_MAX);
	list_put(&spec->labels, &spec->label_count, xstrdup(entry), false);
	return 0;
}

int brig_spec_set(brig_spec *spec, const char *key, const char *value, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	char k[32];
	uint32_t uid, gid;
	int r;
	size_t n = key ? strlen(key) : 0;
	if (n == 0 || n >= sizeof k)
		goto unknown;
	for (size_t i = 0; i <= n; i++)
		k[i] = key[i] == '_' ? '-' : key[i];

	if (strcmp(k, "image") == 0) {
		if ((r = check_image(value, err)) < 0)
			return r;
		replace_str(&spec->image, value);
	} else if (strcmp(k, "user") == 0) {
		if ((r = brig_spec__parse_user(value, &uid, &gid, err)) < 0)
			return r;
		replace_str(&spec->user, value);
	} else if (strcmp(k, "cpus") == 0) {
		return parse_cpus(value, &spec->cpus, err);
	} else if (strcmp(k, "memory-mb") == 0) {
		return parse_i64("memory-mb", value, 1, MEMORY_MB_MAX, " MB", &spec->memory_mb, err);
	} else if (strcmp(k, "pids") == 0) {
		return parse_i64("pids", value, PIDS_MIN, PIDS_MAX, "", &spec->pids, err);
	} else if (strcmp(k, "workspace-mb") == 0) {
		return parse_i64("workspace-mb", value, 1, MEMORY_MB_MAX, " MB", &spec->workspace_mb, err);
	} else if (strcmp(k, "runtime-mb") == 0) {
		return parse_i64("runtime-mb", value, 1, MEMORY_MB_MAX, " MB", &spec->runtime_mb, err);
	} else if (strcmp(k, "shm-mb") == 0) {
		return parse_i64("shm-mb", value, 1, MEMORY_MB_MAX, " MB", &spec->shm_mb, err);
	} else if (strcmp(k, "workspace-inodes") == 0) {
		return parse_i64("workspace-inodes", value, INODES_MIN, INODES_MAX, "", &spec->workspace_inodes, err);
	} else if (strcmp(k, "runtime-inodes") == 0) {
		return parse_i64("runtime-inodes", value, INODES_MIN, INODES_MAX, "", &spec->runtime_inodes, err);
	} else if (strcmp(k, "nofile") == 0) {
		return parse_i64("nofile", value, NOFILE_MIN, NOFILE_MAX, "", &spec->nofile, err);
	} else if (strcmp(k, "network") == 0) {
		return brig_network_parse(&spec->network, value, err);
	} else if (strcmp(k, "subnet") == 0) {
		if ((r = brig_subnet_validate(value, err)) < 0)
			return r;
		replace_str(&spec->subnet, value);
	} else if (strcmp(k, "harness") == 0) {
		return brig_harness_parse(&spec->harness, value, err);
	} else if (strcmp(k, "seccomp-profile") == 0) {
		if (value && !*value)
			value = NULL; /* back to the daemon's default profile */
		if ((r = check_seccomp(value, err)) < 0)
			return r;
		replace_str(&spec->seccomp_profile, value);
	} else if (strcmp(k, "runtime") == 0) {
		if (value && !*value)
			value = NULL; /* back to the daemon's default runtime */
		if (value && (r = brig_runtime_validate(value, err)) < 0)
			return r;
		replace_str(&spec->runtime, value);
	} else if (strcmp(k, "env") == 0) {
		return brig_spec_add_env(spec, value, err);
	} else if (strcmp(k, "label") == 0) {
		return brig_spec_add_label(spec, value, err);
	} else if (strcmp(k, "publish") == 0) {
		return brig_spec_add_publish(spec, value, err);
	} else if (strcmp(k, "allow") == 0) {
		return add_allow(spec, value, err);
	} else if (strcmp(k, "secret") == 0) {
		return add_secret(spec, value, err);
	} else {
		goto unknown;
	}
	return 0;
unknown:
	return brig__error_set(err, BRIG_EINVAL, 0,
			       "spec: unknown setting '%s'; known: image, user, cpus, memory-mb, pids, "
			       "workspace-mb, runtime-mb, shm-mb, workspace-inodes, runtime-inodes, nofile, "
			       "network, subnet, harness, seccomp-profile, runtime, env, label, publish, allow, "
			       "secret",
			       brig_spec__quote(q, key ? key : ""));
}
