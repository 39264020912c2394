/* parse.c — what `brig serve` reads from its clients and its tokens file:
 * request bodies, exec requests, file paths, bearer tokens; and the one
 * mapping of brig's error codes to HTTP statuses. No I/O (fuzzed). */
#include <stdio.h>
#include <string.h>

#include "serve/serve.h"
#include "util/sha256.h"
#include "util/util.h"

static const struct {
	int code, status;
	const char *name;
} code_map[] = {
		{BRIG_EINVAL, 400, "invalid"},       {BRIG_ENOTSENT, 503, "not_sent"},
		{BRIG_EUNCERTAIN, 502, "uncertain"}, {BRIG_ETIMEDOUT, 504, "timed_out"},
		{BRIG_ENOTFOUND, 404, "not_found"},  {BRIG_ECONFLICT, 409, "conflict"},
		{BRIG_EPROTO, 502, "protocol"},      {BRIG_EDAEMON, 502, "daemon"},
		{BRIG_ETOOBIG, 413, "too_big"},      {BRIG_EIO, 500, "io"},
		{BRIG_ECANCELED, 409, "canceled"},   {BRIG_ESTATE, 409, "state"},
		{BRIG_EUNSAFE, 400, "unsafe"},       {BRIG_EBADREQ, 400, "bad_request"},
		{BRIG_EDENIED, 403, "denied"},       {BRIG_ETLS, 502, "tls"},
		{BRIG_EBUSY, 409, "busy"},           {BRIG_ESTORE, 503, "store"},
		{BRIG_ECORRUPT, 500, "corrupt"},
};

int serve__status(int code, const char **api_code)
{
	for (size_t i = 0; i < sizeof code_map / sizeof code_map[0]; i++)
		if (code_map[i].code == code) {
			*api_code = code_map[i].name;
			return code_map[i].status;
		}
	*api_code = "internal";
	return 500;
}

int serve__code_of(const char *api_code)
{
	for (size_t i = 0; api_code && i < sizeof code_map / sizeof code_map[0]; i++)
		if (strcmp(code_map[i].name, api_code) == 0)
			return code_map[i].code;
	return 0;
}

int serve_body_parse(json_t **out, const char *data, size_t len, brig_error **err)
{
	*out = NULL;
	size_t i = 0;
	while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'))
		i++;
	if (i == len) {
		*out = json_object();
		return 0;
	}
	json_error_t je;
	json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return brig__error_set(err, BRIG_EINVAL, 0, "malformed JSON at line %d column %d: %s", je.line,
				       je.column, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return brig__error_set(err, BRIG_EINVAL, 0, "the body must be a JSON object");
	}
	*out = j;
	return 0;
}

void serve_exec_req_clear(serve_exec_req *r)
{
	free(r->argv);
	for (size_t i = 0; i < r->env_count; i++)
		free((char *)r->env[i]);
	free(r->env);
	memset(r, 0, sizeof *r);
}

/* A JSON string without NUL bytes, else NULL. */
static const char *text_of(const json_t *v, size_t *len)
{
	if (!json_is_string(v))
		return NULL;
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (memchr(s, 0, n))
		return NULL;
	if (len)
		*len = n;
	return s;
}

static int env_add(serve_exec_req *r, const char *key, const char *val, brig_error **err)
{
	if (r->env_count >= SERVE_MAX_ARGS)
		return brig__error_set(err, BRIG_EINVAL, 0, "env: more than %d entries", SERVE_MAX_ARGS);
	if (val && (!*key || strchr(key, '=')))
		return brig__error_set(err, BRIG_EINVAL, 0, "env: a key is empty or holds '='");
	r->env = xrealloc(r->env, (r->env_count + 1) * sizeof *r->env);
	r->env[r->env_count++] = val ? xasprintf("%s=%s", key, val) : xstrdup(key);
	return 0;
}

int serve_exec_req_parse(serve_exec_req *out, const json_t *body, brig_error **err)
{
	memset(out, 0, sizeof *out);
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)body, key, v) {
		if (strcmp(key, "argv") && strcmp(key, "env") && strcmp(key, "workdir") && strcmp(key, "stdin") &&
		    strcmp(key, "timeout_ms") && strcmp(key, "capture_max")) {
			brig__error_set(err, BRIG_EINVAL, 0, "unknown field '%.64s'", key);
			goto fail;
		}
	}
	json_t *argv = json_object_get(body, "argv");
	size_t n = json_array_size(argv);
	if (!json_is_array(argv) || n == 0 || n > SERVE_MAX_ARGS) {
		brig__error_set(err, BRIG_EINVAL, 0, "argv: give an array of 1 to %d strings", SERVE_MAX_ARGS);
		goto fail;
	}
	out->argv = xcalloc(n + 1, sizeof *out->argv);
	for (size_t i = 0; i < n; i++)
		if (!(out->argv[i] = text_of(json_array_get(argv, i), NULL))) {
			brig__error_set(err, BRIG_EINVAL, 0, "argv[%zu]: not a string, or holds a NUL byte", i);
			goto fail;
		}
	json_t *env = json_object_get(body, "env");
	if (json_is_object(env)) {
		json_object_foreach (env, key, v) {
			const char *s = text_of(v, NULL);
			if (!s) {
				brig__error_set(err, BRIG_EINVAL, 0, "env: the value of a key is not a string");
				goto fail;
			}
			if (env_add(out, key, s, err))
				goto fail;
		}
	} else if (json_is_array(env)) {
		size_t i;
		json_array_foreach (env, i, v) {
			const char *s = text_of(v, NULL);
			if (!s || !strchr(s, '=') || s[0] == '=') {
				brig__error_set(err, BRIG_EINVAL, 0, "env[%zu]: give KEY=VALUE", i);
				goto fail;
			}
			if (env_add(out, s, NULL, err))
				goto fail;
		}
	} else if (env && !json_is_null(env)) {
		brig__error_set(err, BRIG_EINVAL, 0, "env: give an object of strings or an array of KEY=VALUE");
		goto fail;
	}
	v = json_object_get(body, "workdir");
	if (v && !json_is_null(v) && !(out->workdir = text_of(v, NULL))) {
		brig__error_set(err, BRIG_EINVAL, 0, "workdir: not a string");
		goto fail;
	}
	v = json_object_get(body, "stdin");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v)) {
			brig__error_set(err, BRIG_EINVAL, 0, "stdin: not a string");
			goto fail;
		}
		out->stdin_data = json_string_value(v);
		out->stdin_len = json_string_length(v);
	}
	v = json_object_get(body, "timeout_ms");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 86400000) {
			brig__error_set(err, BRIG_EINVAL, 0, "timeout_ms: give an integer from 0 to 86400000");
			goto fail;
		}
		out->timeout_ms = json_integer_value(v);
	}
	v = json_object_get(body, "capture_max");
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (16 << 20)) {
			brig__error_set(err, BRIG_EINVAL, 0, "capture_max: give an integer from 0 to 16777216");
			goto fail;
		}
		out->capture_max = (size_t)json_integer_value(v);
	}
	return 0;
fail:
	serve_exec_req_clear(out);
	return (*err)->code;
}

int serve_path_check(const char *path, size_t len, brig_error **err)
{
	if (!path || !len)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "path is missing: give ?path=… (absolute, or relative to /workspace)");
	if (strlen(path) != len)
		return brig__error_set(err, BRIG_EINVAL, 0, "path holds a NUL byte");
	for (const char *p = path; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return brig__error_set(err, BRIG_EINVAL, 0, "path holds a '..' component");
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

/* ---- tokens ---- */

typedef struct token_entry {
	unsigned char digest[BRIG_SHA256_SIZE];
	bool all;
	char **ns;
	size_t n_ns;
	char name[48]; /* who, in the audit log: where the token is, never what */
} token_entry;

struct serve_tokens {
	token_entry *v;
	size_t n;
};

void serve_tokens_free(serve_tokens *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		for (size_t k = 0; k < t->v[i].n_ns; k++)
			free(t->v[i].ns[k]);
		free(t->v[i].ns);
	}
	if (t->v)
		explicit_bzero(t->v, t->n * sizeof *t->v);
	free(t->v);
	free(t);
}

static bool is_ns_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == '-';
}

int serve_tokens_parse(serve_tokens **out, const char *text, size_t len, brig_error **err)
{
	*out = NULL;
	if (len > SERVE_TOKENS_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "tokens file: larger than %zu bytes", SERVE_TOKENS_MAX);
	serve_tokens *t = xcalloc(1, sizeof *t);
	size_t lineno = 0;
	for (size_t i = 0; i < len;) {
		const char *line = text + i;
		const char *nl = memchr(line, '\n', len - i);
		size_t ll = nl ? (size_t)(nl - line) : len - i;
		i += ll + (nl ? 1 : 0);
		lineno++;
		while (ll && (line[ll - 1] == '\r' || line[ll - 1] == ' ' || line[ll - 1] == '\t'))
			ll--;
		size_t p = 0;
		while (p < ll && (line[p] == ' ' || line[p] == '\t'))
			p++;
		if (p == ll || line[p] == '#')
			continue;
		size_t ts = p;
		while (p < ll && line[p] != ' ' && line[p] != '\t')
			p++;
		size_t tl = p - ts;
		bool ok = tl >= 16 && tl <= 256;
		for (size_t k = ts; ok && k < p; k++)
			ok = line[k] > 0x20 && line[k] < 0x7f;
		if (!ok) {
			brig__error_set(
				err, BRIG_EINVAL, 0,
				"tokens file line %zu: a token is 16 to 256 printable characters without spaces",
				lineno);
			goto fail;
		}
		while (p < ll && (line[p] == ' ' || line[p] == '\t'))
			p++;
		if (p == ll) {
			brig__error_set(err, BRIG_EINVAL, 0,
					"tokens file line %zu: name the token's namespaces after it (NS,NS… or *)",
					lineno);
			goto fail;
		}
		t->v = xrealloc(t->v, (t->n + 1) * sizeof *t->v);
		token_entry *e = &t->v[t->n++];
		memset(e, 0, sizeof *e);
		brig_sha256(e->digest, line + ts, tl);
		snprintf(e->name, sizeof e->name, "serve token, line %zu", lineno);
		while (p < ll) {
			size_t ns = p;
			while (p < ll && line[p] != ',' && line[p] != ' ' && line[p] != '\t')
				p++;
			size_t nl2 = p - ns;
			if (nl2 == 1 && line[ns] == '*') {
				e->all = true;
			} else {
				bool good = nl2 >= 1 && nl2 <= 63;
				for (size_t k = ns; good && k < p; k++)
					good = is_ns_char(line[k]);
				if (!good) {
					brig__error_set(
						err, BRIG_EINVAL, 0,
						"tokens file line %zu: a namespace is 1-63 of A-Z a-z 0-9 _ . -",
						lineno);
					goto fail;
				}
				e->ns = xrealloc(e->ns, (e->n_ns + 1) * sizeof *e->ns);
				e->ns[e->n_ns++] = xstrndup(line + ns, nl2);
			}
			while (p < ll && (line[p] == ',' || line[p] == ' ' || line[p] == '\t'))
				p++;
		}
	}
	if (!t->n) {
		brig__error_set(err, BRIG_EINVAL, 0, "tokens file: no token in it");
		goto fail;
	}
	*out = t;
	return 0;
fail:
	serve_tokens_free(t);
	return BRIG_EINVAL;
}

const void *serve_tokens_match(const serve_tokens *t, const char *h)
{
	if (!t || !h)
		return NULL;
	if (strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	while (*h == ' ')
		h++;
	unsigned char d[BRIG_SHA256_SIZE];
	brig_sha256(d, h, strlen(h));
	const token_entry *found = NULL;
	/* Every entry is compared in full: the time does not depend on which
	 * entry (if any) matches, nor on how much of a digest does. */
	for (size_t i = 0; i < t->n; i++) {
		unsigned char diff = 0;
		for (size_t k = 0; k < BRIG_SHA256_SIZE; k++)
			diff |= (unsigned char)(d[k] ^ t->v[i].digest[k]);
		volatile unsigned char same = (unsigned char)(diff == 0);
		if (same && !found)
			found = &t->v[i];
	}
	explicit_bzero(d, sizeof d);
	return found;
}

bool serve_tokens_allows(const void *entry, const char *ns)
{
	const token_entry *e = entry;
	if (!e || e->all)
		return true;
	if (!ns)
		return false;
	for (size_t i = 0; i < e->n_ns; i++)
		if (strcmp(e->ns[i], ns) == 0)
			return true;
	return false;
}

const char *serve_tokens_name(const void *entry)
{
	const token_entry *e = entry;
	return e ? e->name : "serve";
}

bool serve_tokens_all(const void *entry)
{
	const token_entry *e = entry;
	return !e || e->all;
}
