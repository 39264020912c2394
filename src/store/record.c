/* record.c — what the store's front end and both backends share: session
 * state names, record clearing and freeing, array growth, secret
 * scrubbing and URL redaction. Calls no backend. */
#include "store/store_internal.h"

#include <string.h>
#include <strings.h>

/* ---- states ---- */

static const char *const state_names[] = {
	[BRIG_STORE_CREATING] = "creating", [BRIG_STORE_RUNNING] = "running",     [BRIG_STORE_PAUSED] = "paused",
	[BRIG_STORE_FAILED] = "failed",     [BRIG_STORE_DESTROYED] = "destroyed", [BRIG_STORE_STOPPED] = "stopped",
};
#define N_STATES (sizeof state_names / sizeof state_names[0])

const char *brig_store_state_to_string(brig_store_state state)
{
	if ((unsigned)state < N_STATES)
		return state_names[state];
	return "unknown";
}

int brig_store_state_from_string(brig_store_state *out, const char *name, brig_error **err)
{
	for (size_t i = 0; name && i < N_STATES; i++) {
		if (strcmp(name, state_names[i]) == 0) {
			*out = (brig_store_state)i;
			return 0;
		}
	}
	return brig__error_set(
		err, BRIG_EINVAL, 0,
		"unknown session state \"%.32s\" (expected creating, running, paused, failed, destroyed or stopped)",
		name ? name : "(null)");
}

/* ---- small shared helpers ---- */

void brig_store__grow(void *arr, size_t *alloc, size_t n, size_t el)
{
	void **p = arr;
	if (n < *alloc)
		return;
	size_t na = *alloc ? *alloc * 2 : 8;
	while (na <= n)
		na *= 2;
	*p = xrealloc(*p, na * el);
	memset((char *)*p + *alloc * el, 0, (na - *alloc) * el);
	*alloc = na;
}

void brig_store__session_clear(brig_store_session *r)
{
	if (!r)
		return;
	free(r->ns);
	free(r->agent);
	free(r->session);
	free(r->container_name);
	free(r->container_id);
	free(r->spec_json);
	memset(r, 0, sizeof *r);
}

void brig_store__checkpoint_clear(brig_store_checkpoint *r)
{
	if (!r)
		return;
	free(r->ns);
	free(r->agent);
	free(r->session);
	free(r->digest);
	free(r->blob);
	memset(r, 0, sizeof *r);
}

void brig_store__audit_clear(brig_store_audit *r)
{
	if (!r)
		return;
	free(r->ns);
	free(r->agent);
	free(r->session);
	free(r->container_name);
	free(r->argv_json);
	free(r->outcome);
	free(r->actor);
	memset(r, 0, sizeof *r);
}

void brig_store_session_free(brig_store_session *rec)
{
	brig_store__session_clear(rec);
	free(rec);
}

void brig_store_session_free_array(brig_store_session *arr, size_t n)
{
	for (size_t i = 0; arr && i < n; i++)
		brig_store__session_clear(&arr[i]);
	free(arr);
}

void brig_store_checkpoint_free(brig_store_checkpoint *rec)
{
	brig_store__checkpoint_clear(rec);
	free(rec);
}

void brig_store_checkpoint_free_array(brig_store_checkpoint *arr, size_t n)
{
	for (size_t i = 0; arr && i < n; i++)
		brig_store__checkpoint_clear(&arr[i]);
	free(arr);
}

void brig_store_audit_free_array(brig_store_audit *arr, size_t n)
{
	for (size_t i = 0; arr && i < n; i++)
		brig_store__audit_clear(&arr[i]);
	free(arr);
}

void brig_store__egress_clear(brig_store_egress *r)
{
	if (!r)
		return;
	free(r->sandbox);
	free(r->ns);
	free(r->agent);
	free(r->session);
	free(r->host);
	free(r->decision);
	free(r->reason);
	memset(r, 0, sizeof *r);
}

void brig_store_egress_free_array(brig_store_egress *arr, size_t n)
{
	for (size_t i = 0; arr && i < n; i++)
		brig_store__egress_clear(&arr[i]);
	free(arr);
}

void brig_store__scrub(char **msg, const char *secret)
{
	if (!msg || !*msg || !secret || !*secret)
		return;
	size_t sl = strlen(secret);
	if (!strstr(*msg, secret))
		return;
	brig_buf b;
	brig_buf_init(&b, strlen(*msg) * 3 + 16); /* "***" may be longer than a short secret */
	const char *p = *msg;
	const char *hit;
	while ((hit = strstr(p, secret))) {
		brig_buf_put(&b, p, (size_t)(hit - p));
		brig_buf_puts(&b, "***");
		p = hit + sl;
	}
	brig_buf_puts(&b, p);
	free(*msg);
	*msg = brig_buf_steal(&b, NULL);
}

static int cmp_ckpt_newest_first(const void *a, const void *b)
{
	const brig_store_checkpoint *x = a, *y = b;
	return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

void brig_store__checkpoint_sort(brig_store_checkpoint *arr, size_t n)
{
	if (n > 1)
		qsort(arr, n, sizeof *arr, cmp_ckpt_newest_first);
}

/* ---- URL redaction ---- */

bool brig_store__url_password(const char *url, size_t *off, size_t *len, bool *ambiguous)
{
	*off = *len = 0;
	*ambiguous = false;
	const char *sep = url ? strstr(url, "://") : NULL;
	if (!sep)
		return false;
	const char *auth = sep + 3;
	/* libpq looks for the user info up to the first '/' only ('?' and '#' may
	 * be inside a password). */
	const char *slash = auth + strcspn(auth, "/");
	const char *at = NULL;
	for (const char *c = auth; c < slash; c++)
		if (*c == '@')
			at = c;
	if (!at) {
		/* "u:pa/ss@h": libpq reads host "u", port "pa"; the user meant a
		 * password. Cover it up to the last '@' before the query. */
		const char *qm = slash + strcspn(slash, "?");
		for (const char *c = slash; c < qm; c++)
			if (*c == '@')
				at = c;
		if (!at || !memchr(auth, ':', (size_t)(slash - auth)))
			return false;
		*ambiguous = true;
	}
	const char *colon = memchr(auth, ':', (size_t)(at - auth));
	if (!colon)
		return false;
	/* libpq ends the user info at the first '@'; a second one means the
	 * password holds an unencoded '@' and the rest becomes the host name. */
	if (memchr(auth, '@', (size_t)(at - auth)))
		*ambiguous = true;
	*off = (size_t)(colon + 1 - url);
	*len = (size_t)(at - colon - 1);
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *brig_store__pct_decode(const char *s, size_t n)
{
	char *out = xmalloc(n + 1);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			out[o++] = s[i];
			continue;
		}
		int h = i + 2 < n ? hexval(s[i + 1]) : -1, l = i + 2 < n ? hexval(s[i + 2]) : -1;
		if (h < 0 || l < 0 || (h == 0 && l == 0)) {
			free(out);
			return NULL;
		}
		out[o++] = (char)(h * 16 + l);
		i += 2;
	}
	out[o] = '\0';
	return out;
}

bool brig_store__secret_key(const char *key, size_t n)
{
	/* libpq decodes keys too ("pass%77ord"); undecodable ones compare as written. */
	cleanup_free char *k = brig_store__pct_decode(key, n);
	if (!k)
		k = xstrndup(key, n);
	return strcasecmp(k, "password") == 0 || strcasecmp(k, "sslpassword") == 0;
}

char *brig_store_redact_url(const char *url)
{
	if (!url)
		return NULL;
	brig_buf b;
	/* "***" replaces each secret value, which may be empty: a key ("password=")
	 * is at least 9 bytes, so the text at most doubles. */
	brig_buf_init(&b, strlen(url) * 2 + 64);
	const char *p = url;
	size_t off, len;
	bool ambiguous;
	if (brig_store__url_password(url, &off, &len, &ambiguous)) {
		brig_buf_put(&b, url, off);
		brig_buf_puts(&b, "***");
		p = url + off + len;
	}
	const char *query = strchr(p, '?');
	if (!query) {
		brig_buf_puts(&b, p);
		return brig_buf_steal(&b, NULL);
	}
	brig_buf_put(&b, p, (size_t)(query + 1 - p));
	const char *q = query + 1;
	while (*q) {
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		if (eq && brig_store__secret_key(q, (size_t)(eq - q))) {
			brig_buf_put(&b, q, (size_t)(eq + 1 - q));
			brig_buf_puts(&b, "***");
		} else {
			brig_buf_put(&b, q, n);
		}
		q += n;
		if (*q == '&') {
			brig_buf_puts(&b, "&");
			q++;
		}
	}
	return brig_buf_steal(&b, NULL);
}
