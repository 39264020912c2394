/* naming.c — who a computer is: validation of user-given names, the
 * deterministic container name and session key, and reading labels back. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "spec/spec_internal.h"
#include "util/util.h"

/* Domain tags keep a container name, a session key and any later use of the
 * same encoding from ever sharing a digest. Never change them: every
 * existing computer's name depends on them. */
#define NAME_TAG "brig/computer-name/v1"
#define SESSION_TAG "brig/session-key/v1"

static bool name_char(char c, bool first)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return true;
	return !first && (c == '_' || c == '.' || c == '-');
}

static bool name_ok(const char *s)
{
	size_t n = strnlen(s, BRIG_IDENT_MAX + 1);
	if (n == 0 || n > BRIG_IDENT_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i], i == 0))
			return false;
	return true;
}

int brig_identity_check_name(const char *field, const char *value, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	if (!field)
		field = "name";
	if (!value)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "%s: missing; must be 1-%d characters of A-Z a-z 0-9 _ . - starting "
				       "with a letter or digit",
				       field, BRIG_IDENT_MAX);
	if (!name_ok(value))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "%s: must be 1-%d characters of A-Z a-z 0-9 _ . - starting with a "
				       "letter or digit, got '%s'",
				       field, BRIG_IDENT_MAX, brig_spec__quote(q, value));
	return 0;
}

int brig_identity_validate(const brig_identity *id, brig_error **err)
{
	int r;
	if (!id)
		return brig__error_set(err, BRIG_EINVAL, 0, "identity: missing");
	if ((r = brig_identity_check_name("ns", id->ns, err)) < 0 ||
	    (r = brig_identity_check_name("agent", id->agent, err)) < 0 ||
	    (r = brig_identity_check_name("session", id->session, err)) < 0)
		return r;
	if (id->generation < 1 || id->generation > BRIG_GENERATION_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "generation: must be from 1 to %u, got %u",
				       BRIG_GENERATION_MAX, (unsigned)id->generation);
	return 0;
}

/* Longest encoding: tag + three names, each with a 4-byte length, + gen. */
#define ENC_MAX (4 + 64 + 3 * (4 + BRIG_IDENT_MAX) + 4)

static size_t put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
	return 4;
}

static size_t put_field(unsigned char *p, const char *s)
{
	size_t n = strlen(s);
	size_t o = put_u32(p, (uint32_t)n);
	memcpy(p + o, s, n);
	return o + n;
}

static size_t encode(unsigned char buf[ENC_MAX], const char *tag, const brig_identity *id, bool with_gen)
{
	size_t n = 0;
	n += put_field(buf + n, tag);
	n += put_field(buf + n, id->ns);
	n += put_field(buf + n, id->agent);
	n += put_field(buf + n, id->session);
	if (with_gen)
		n += put_u32(buf + n, id->generation);
	return n;
}

int brig_identity_name(char out[BRIG_NAME_SIZE], const brig_identity *id, brig_error **err)
{
	unsigned char buf[ENC_MAX];
	int r;
	out[0] = '\0';
	if ((r = brig_identity_validate(id, err)) < 0)
		return r;
	memcpy(out, "brig-", 5);
	brig_spec__sha256_hex(out + 5, buf, encode(buf, NAME_TAG, id, true));
	return 0;
}

int brig_identity_session_key(char out[BRIG_HASH_SIZE], const brig_identity *id, brig_error **err)
{
	unsigned char buf[ENC_MAX];
	int r;
	out[0] = '\0';
	if ((r = brig_identity_validate(id, err)) < 0)
		return r;
	brig_spec__sha256_hex(out, buf, encode(buf, SESSION_TAG, id, false));
	return 0;
}

/* Borrowed string value of key in labels, or NULL (absent or not a string). */
static const char *label(const json_t *labels, const char *key)
{
	if (!json_is_object(labels))
		return NULL;
	return json_string_value(json_object_get(labels, key));
}

/* Strict decimal 1..BRIG_GENERATION_MAX without sign, spaces or leading 0. */
static bool parse_generation(const char *s, uint32_t *out)
{
	uint32_t v = 0;
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 7 || s[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint32_t)(s[i] - '0');
	}
	if (v < 1 || v > BRIG_GENERATION_MAX)
		return false;
	*out = v;
	return true;
}

int brig_identity_from_labels(brig_identity **out, const json_t *labels, brig_error **err)
{
	char q[BRIG_SPEC__QUOTE_SIZE];
	const char *managed = label(labels, BRIG_LABEL_MANAGED), *kind = label(labels, BRIG_LABEL_KIND);
	const char *fields[3] = {label(labels, BRIG_LABEL_NS), label(labels, BRIG_LABEL_AGENT),
				 label(labels, BRIG_LABEL_SESSION)};
	static const char *const keys[3] = {BRIG_LABEL_NS, BRIG_LABEL_AGENT, BRIG_LABEL_SESSION};
	const char *gen = label(labels, BRIG_LABEL_GENERATION);
	uint32_t g = 0;

	*out = NULL;
	if (!managed || strcmp(managed, "1") != 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "not a brig container (no label %s=1)",
				       BRIG_LABEL_MANAGED);
	if (!kind || strcmp(kind, "computer") != 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "not a brig computer (%s is '%s')", BRIG_LABEL_KIND,
				       brig_spec__quote(q, kind ? kind : ""));
	for (int i = 0; i < 3; i++)
		if (!fields[i] || !name_ok(fields[i]))
			return brig__error_set(err, BRIG_EPROTO, 0, "brig computer has a missing or invalid label %s ('%s')",
					       keys[i], brig_spec__quote(q, fields[i] ? fields[i] : ""));
	if (!parse_generation(gen, &g))
		return brig__error_set(err, BRIG_EPROTO, 0, "brig computer has a missing or invalid label %s ('%s')",
				       BRIG_LABEL_GENERATION, brig_spec__quote(q, gen ? gen : ""));

	size_t len[3], total = sizeof(brig_identity);
	for (int i = 0; i < 3; i++) {
		len[i] = strlen(fields[i]);
		total += len[i] + 1;
	}
	brig_identity *id = xcalloc(1, total);
	char *p = (char *)(id + 1);
	const char **dst[3] = {&id->ns, &id->agent, &id->session};
	for (int i = 0; i < 3; i++) {
		memcpy(p, fields[i], len[i] + 1);
		*dst[i] = p;
		p += len[i] + 1;
	}
	id->generation = g;
	*out = id;
	return 0;
}

void brig_identity_free(brig_identity *id) { free(id); }

static int differs(brig_error **err, const char *what, const char *have, const char *want)
{
	char q1[BRIG_SPEC__QUOTE_SIZE], q2[BRIG_SPEC__QUOTE_SIZE];
	if (!have)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "%s differs: container has none, wanted '%s'", what,
				       brig_spec__quote(q2, want));
	return brig__error_set(err, BRIG_ECONFLICT, 0, "%s differs: container has '%s', wanted '%s'", what,
			       brig_spec__quote(q1, have), brig_spec__quote(q2, want));
}

int brig_labels_match(const json_t *labels, const brig_identity *id, const char *spec_hash, brig_error **err)
{
	char q1[BRIG_SPEC__QUOTE_SIZE], q2[BRIG_SPEC__QUOTE_SIZE];
	char gen[16];
	int r;
	if ((r = brig_identity_validate(id, err)) < 0)
		return r;
	if (!spec_hash)
		return brig__error_set(err, BRIG_EINVAL, 0, "spec hash: missing");

	const char *managed = label(labels, BRIG_LABEL_MANAGED), *kind = label(labels, BRIG_LABEL_KIND);
	if (!managed || strcmp(managed, "1") != 0)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "not a brig container");
	if (!kind || strcmp(kind, "computer") != 0)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "not a brig computer (%s is '%s')", BRIG_LABEL_KIND,
				       brig_spec__quote(q1, kind ? kind : ""));

	const char *have;
	if (!(have = label(labels, BRIG_LABEL_NS)) || strcmp(have, id->ns) != 0)
		return differs(err, "ns", have, id->ns);
	if (!(have = label(labels, BRIG_LABEL_AGENT)) || strcmp(have, id->agent) != 0)
		return differs(err, "agent", have, id->agent);
	if (!(have = label(labels, BRIG_LABEL_SESSION)) || strcmp(have, id->session) != 0)
		return differs(err, "session", have, id->session);
	snprintf(gen, sizeof gen, "%u", (unsigned)id->generation);
	if (!(have = label(labels, BRIG_LABEL_GENERATION)) || strcmp(have, gen) != 0)
		return differs(err, "generation", have, gen);
	if (!(have = label(labels, BRIG_LABEL_SPEC)) || strcmp(have, spec_hash) != 0) {
		if (!have)
			return brig__error_set(err, BRIG_ECONFLICT, 0, "spec hash differs: container has none, wanted %s",
					       brig_spec__quote(q2, spec_hash));
		return brig__error_set(err, BRIG_ECONFLICT, 0, "spec hash differs: container has %s, wanted %s",
				       brig_spec__quote(q1, have), brig_spec__quote(q2, spec_hash));
	}
	return 0;
}
