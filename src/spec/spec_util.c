/* spec_util.c — small helpers of the policy layer: escaping what messages
 * echo, SHA-256 to hex, the reserved label set and the user field parser. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec_internal.h"
#include "util/sha256.h"
#include "util/util.h"

char *brig_spec__quoten(char out[BRIG_SPEC__QUOTE_SIZE], const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char *o = out;
	size_t i;
	if (!s) {
		strcpy(out, "(null)");
		return out;
	}
	for (i = 0; i < n && i < BRIG_SPEC__ECHO_MAX; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
			*o++ = (char)c;
		} else {
			*o++ = '\\';
			*o++ = 'x';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	if (i < n) {
		memcpy(o, "...", 3);
		o += 3;
	}
	*o = '\0';
	return out;
}

char *brig_spec__quote(char out[BRIG_SPEC__QUOTE_SIZE], const char *s)
{
	return brig_spec__quoten(out, s, s ? strnlen(s, BRIG_SPEC__ECHO_MAX + 1) : 0);
}

void brig_spec__sha256_hex(char out[BRIG_HASH_SIZE], const void *data, size_t n)
{
	/* Built in (src/util/sha256.c), not OpenSSL: loading and initialising
	 * libcrypto was 0.6 ms of every brig process that names a computer or
	 * labels a run, for a few hundred bytes of input. */
	unsigned char md[BRIG_SHA256_SIZE];
	brig_sha256(md, data, n);
	brig_hex(out, md, 32);
}

int64_t brig_spec__nano_cpus(double cpus)
{
	/* NaN fails both comparisons. */
	if (!(cpus > 0 && cpus < 1e9))
		return 0;
	return (int64_t)(cpus * 1e9 + 0.5);
}

bool brig_spec__label_reserved(const char *key)
{
	static const char *const reserved[] = {
		BRIG_LABEL_MANAGED, BRIG_LABEL_KIND,    BRIG_LABEL_NS,       BRIG_LABEL_AGENT,
		BRIG_LABEL_SESSION, BRIG_LABEL_GENERATION, BRIG_LABEL_VERSION, BRIG_LABEL_SPEC,
		BRIG_LABEL_HARNESS, BRIG_LABEL_RUN,     BRIG_LABEL_DEADLINE, BRIG_LABEL_CONTAINER,
		BRIG_LABEL_VOLUME, BRIG_LABEL_ENV_SALT, BRIG_LABEL_SECRETS,
	};
	for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
		if (strcmp(key, reserved[i]) == 0)
			return true;
	return false;
}

static bool parse_id(const char *s, size_t n, uint32_t *out)
{
	uint64_t v = 0;
	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > 2147483647u)
		return false;
	*out = (uint32_t)v;
	return true;
}

int brig_spec__parse_user(const char *user, uint32_t *uid, uint32_t *gid, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	const char *colon = user ? strchr(user, ':') : NULL;
	if (!user || !colon || !parse_id(user, (size_t)(colon - user), uid) ||
	    !parse_id(colon + 1, strlen(colon + 1), gid))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "user: must be a numeric uid:gid such as 1000:1000 (names are not "
				       "accepted: brig owns the volumes by number), got '%s'",
				       brig_spec__quote(q, user ? user : ""));
	if (*uid == 0 || *gid == 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "user: '%s' is refused: the sandbox never runs as root (uid 0) or "
				       "group root (gid 0); use an unprivileged uid:gid such as 1000:1000",
				       brig_spec__quote(q, user));
	return 0;
}

size_t brig_spec__env_keylen(const char *entry)
{
	const char *eq = strchr(entry, '=');
	return eq ? (size_t)(eq - entry) : strlen(entry);
}

ptrdiff_t brig_spec__env_find(char *const *list, size_t n, const char *key, size_t klen)
{
	for (size_t i = 0; i < n; i++)
		if (strncmp(list[i], key, klen) == 0 && (list[i][klen] == '=' || list[i][klen] == '\0'))
			return (ptrdiff_t)i;
	return -1;
}
