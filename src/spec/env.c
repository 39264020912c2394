/* env.c — env entries and model credentials: validation that never echoes a
 * value, and the per-exec env that keeps credentials out of Config.Env. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec_internal.h"
#include "util/util.h"

static const char *const claude_keys[] = {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", NULL};
static const char *const codex_keys[] = {"OPENAI_API_KEY", NULL};
static const char *const no_keys[] = {NULL};

const char *const *brig_env_credential_keys(brig_harness harness)
{
	switch (harness) {
	case BRIG_HARNESS_CLAUDE: return claude_keys;
	case BRIG_HARNESS_CODEX: return codex_keys;
	default: return no_keys;
	}
}

static bool key_in(const char *const *keys, const char *key, size_t klen)
{
	for (; *keys; keys++)
		if (strlen(*keys) == klen && memcmp(*keys, key, klen) == 0)
			return true;
	return false;
}

bool brig_env_is_credential(const char *key)
{
	if (!key)
		return false;
	size_t klen = brig_spec__env_keylen(key);
	return key_in(claude_keys, key, klen) || key_in(codex_keys, key, klen);
}

/* Checks UTF-8 well-formedness (the Docker API speaks JSON). */
static bool utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

int brig_env_validate(const char *entry, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	if (!entry)
		return brig__error_set(err, BRIG_EINVAL, 0, "env: missing entry; write KEY=VALUE");
	const char *eq = strchr(entry, '=');
	size_t klen = eq ? (size_t)(eq - entry) : strlen(entry);
	if (!eq)
		return brig__error_set(err, BRIG_EINVAL, 0, "env: '%s' has no '=': write KEY=VALUE",
				       brig_spec__quoten(q, entry, klen));
	if (klen == 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "env: an entry has an empty key (it starts with '='); write KEY=VALUE");
	for (size_t i = 0; i < klen; i++) {
		unsigned char c = (unsigned char)entry[i];
		if (c < 0x20 || c == 0x7f)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "env: key '%s' contains a control character; keys may not contain "
					       "'=', NUL, CR, LF or other control characters",
					       brig_spec__quoten(q, entry, klen));
		if (c == ' ')
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "env: key '%s' contains a space; keys may not contain whitespace, '=' "
					       "or control characters",
					       brig_spec__quoten(q, entry, klen));
	}
	if (!utf8_ok((const unsigned char *)entry, klen))
		return brig__error_set(err, BRIG_EINVAL, 0, "env: key '%s' is not valid UTF-8",
				       brig_spec__quoten(q, entry, klen));
	const char *v = eq + 1;
	size_t vlen = strlen(v);
	if (klen + 1 + vlen > BRIG_SPEC__ENTRY_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "env: the entry for '%s' is longer than %d bytes",
				       brig_spec__quoten(q, entry, klen), BRIG_SPEC__ENTRY_MAX);
	if (strpbrk(v, "\r\n"))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "env: the value of '%s' contains a CR or LF (not shown); values may not "
				       "contain CR, LF or NUL",
				       brig_spec__quoten(q, entry, klen));
	if (!utf8_ok((const unsigned char *)v, vlen))
		return brig__error_set(err, BRIG_EINVAL, 0, "env: the value of '%s' is not valid UTF-8 (not shown)",
				       brig_spec__quoten(q, entry, klen));
	return 0;
}

/* Collects borrowed entries, a later key replacing an earlier one in place. */
typedef struct envlist {
	const char **v;
	size_t n;
} envlist;

static void envlist_put(envlist *l, const char *entry)
{
	size_t klen = brig_spec__env_keylen(entry);
	ptrdiff_t at = brig_spec__env_find((char *const *)l->v, l->n, entry, klen);
	if (at >= 0) {
		l->v[at] = entry;
		return;
	}
	l->v[l->n++] = entry;
}

static int exec_env(json_t **out, const char *const *a, size_t na, const char *const *b, size_t nb,
		    brig_harness harness, brig_error **err)
{
	const char *const *keys = brig_env_credential_keys(harness);
	size_t nkeys = 0;
	int r;
	*out = NULL;
	while (keys[nkeys])
		nkeys++;
	if (na > BRIG_SPEC__ENV_MAX || nb > BRIG_SPEC__ENV_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "env: more than %d entries", BRIG_SPEC__ENV_MAX);
	if ((a == NULL && na) || (b == NULL && nb))
		return brig__error_set(err, BRIG_EINVAL, 0, "env: missing list");

	envlist l = {xcalloc(na + nb + nkeys + 1, sizeof(char *)), 0};
	char **forwarded = xcalloc(nkeys + 1, sizeof(char *));
	size_t nfwd = 0;

	for (size_t i = 0; i < na + nb; i++) {
		const char *e = i < na ? a[i] : b[i - na];
		if ((r = brig_env_validate(e, err)) < 0)
			goto out;
		envlist_put(&l, e);
	}

	/* The caller's own credential wins over anything in brig's environment:
	 * mixing an explicit OAuth token with a forwarded API key would let the
	 * forwarded one take over. */
	bool caller_has = false;
	for (size_t i = 0; i < l.n; i++)
		if (key_in(keys, l.v[i], brig_spec__env_keylen(l.v[i])))
			caller_has = true;
	if (!caller_has) {
		for (size_t k = 0; k < nkeys; k++) {
			const char *v = getenv(keys[k]);
			if (!v || !*v)
				continue;
			char *e = xasprintf("%s=%s", keys[k], v);
			forwarded[nfwd++] = e;
			if ((r = brig_env_validate(e, err)) < 0) {
				brig__error_prefix(err, r, "credential forwarded from brig's environment");
				goto out;
			}
			envlist_put(&l, e);
		}
	}

	json_t *arr = json_array();
	for (size_t i = 0; i < l.n; i++)
		json_array_append_new(arr, json_string(l.v[i]));
	*out = arr;
	r = 0;
out:
	for (size_t i = 0; i < nfwd; i++) {
		/* Do not leave a copy of a credential lying in freed heap. */
		explicit_bzero(forwarded[i], strlen(forwarded[i]));
		free(forwarded[i]);
	}
	free(forwarded);
	free(l.v);
	return r;
}

int brig_env_exec(json_t **out, const char *const *env, size_t n, brig_harness harness, brig_error **err)
{
	return exec_env(out, env, n, NULL, 0, harness, err);
}

int brig_spec_exec_env(json_t **out, const brig_spec *spec, const char *const *extra, size_t n_extra,
		       brig_error **err)
{
	if (!spec) {
		*out = NULL;
		return brig__error_set(err, BRIG_EINVAL, 0, "spec: missing");
	}
	/* With secrets their placeholders stand in: no credential of the
	 * harness is forwarded from brig's environment. */
	return exec_env(out, (const char *const *)spec->env, spec->env_count, extra, n_extra,
			spec->secret_count ? BRIG_HARNESS_NONE : spec->harness, err);
}
