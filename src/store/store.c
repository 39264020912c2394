/* store.c — the front end of the session store: URL selection and defaults,
 * argument validation, the per-handle lock, record freeing, URL redaction. */
#include "store/store_internal.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- states ---- */

static const char *const state_names[] = {
	[BRIG_STORE_CREATING] = "creating", [BRIG_STORE_RUNNING] = "running",     [BRIG_STORE_PAUSED] = "paused",
	[BRIG_STORE_FAILED] = "failed",     [BRIG_STORE_DESTROYED] = "destroyed",
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
		"unknown session state \"%.32s\" (expected creating, running, paused, failed or destroyed)",
		name ? name : "(null)");
}

/* ---- small shared helpers ---- */

int64_t brig_store__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
		brig_buf_add(&b, p, (size_t)(hit - p));
		brig_buf_addstr(&b, "***");
		p = hit + sl;
	}
	brig_buf_addstr(&b, p);
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
	brig_buf_init(&b, strlen(url) + 64); /* "***" replaces short values */
	const char *p = url;
	size_t off, len;
	bool ambiguous;
	if (brig_store__url_password(url, &off, &len, &ambiguous)) {
		brig_buf_add(&b, url, off);
		brig_buf_addstr(&b, "***");
		p = url + off + len;
	}
	const char *query = strchr(p, '?');
	if (!query) {
		brig_buf_addstr(&b, p);
		return brig_buf_steal(&b, NULL);
	}
	brig_buf_add(&b, p, (size_t)(query + 1 - p));
	const char *q = query + 1;
	while (*q) {
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		if (eq && brig_store__secret_key(q, (size_t)(eq - q))) {
			brig_buf_add(&b, q, (size_t)(eq + 1 - q));
			brig_buf_addstr(&b, "***");
		} else {
			brig_buf_add(&b, q, n);
		}
		q += n;
		if (*q == '&') {
			brig_buf_addstr(&b, "&");
			q++;
		}
	}
	return brig_buf_steal(&b, NULL);
}

/* ---- defaults and opening ---- */

int brig_store_default_url(char **out, brig_error **err)
{
	*out = NULL;
	const char *env = getenv("BRIG_STORE");
	if (env && *env) {
		*out = xstrdup(env);
		return 0;
	}
	if (geteuid() == 0) {
		*out = xstrdup("sqlite:///var/lib/brig/brig.db");
		return 0;
	}
	const char *xdg = getenv("XDG_DATA_HOME");
	if (xdg && xdg[0] == '/') {
		*out = xasprintf("sqlite://%s/brig/brig.db", xdg);
		return 0;
	}
	const char *home = getenv("HOME");
	if (home && home[0] == '/') {
		*out = xasprintf("sqlite://%s/.local/share/brig/brig.db", home);
		return 0;
	}
	return brig__error_set(err, BRIG_EINVAL, 0,
			       "no default store location: neither $XDG_DATA_HOME nor $HOME is an absolute path; "
			       "set BRIG_STORE or pass --store");
}

static bool has_prefix(const char *s, const char *pre)
{
	return strncmp(s, pre, strlen(pre)) == 0;
}

/* Turns a sqlite URL or plain path into an absolute path. */
static int sqlite_path(char **out, const char *url, brig_error **err)
{
	const char *p = url;
	if (has_prefix(p, "sqlite://"))
		p += strlen("sqlite://");
	else if (has_prefix(p, "sqlite:"))
		p += strlen("sqlite:");
	if (!*p)
		return brig__error_set(err, BRIG_EINVAL, 0, "store URL \"%s\" names no file", url);
	if (p[strlen(p) - 1] == '/')
		return brig__error_set(err, BRIG_EINVAL, 0, "store path \"%s\" is a directory, not a file", p);
	if (p[0] == '/') {
		*out = xstrdup(p);
		return 0;
	}
	char *cwd = getcwd(NULL, 0);
	if (!cwd)
		return brig__error_set(err, BRIG_EIO, errno,
				       "store path \"%s\": cannot resolve the current directory: %s", p,
				       strerror(errno));
	*out = xasprintf("%s/%s", cwd, p);
	free(cwd);
	return 0;
}

int brig_store_open(brig_store **out, const char *url, brig_error **err)
{
	*out = NULL;
	cleanup_free char *dflt = NULL;
	if (!url) {
		int r = brig_store_default_url(&dflt, err);
		if (r < 0)
			return r;
		url = dflt;
	}
	if (!*url)
		return brig__error_set(err, BRIG_EINVAL, 0, "empty store URL");

	cleanup_free char *display = brig_store_redact_url(url);
	brig_store *s = NULL;
	int r;
	if (has_prefix(url, "postgresql://") || has_prefix(url, "postgres://")) {
		r = brig_store__pg_open(&s, url, display, err);
	} else {
		const char *colon = strchr(url, ':');
		const char *slash = strchr(url, '/');
		if (colon && (!slash || colon < slash) && !has_prefix(url, "sqlite:"))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "store URL \"%s\": unknown scheme (use sqlite:///PATH, a path, or "
					       "postgresql://…)",
					       display);
		cleanup_free char *path = NULL;
		r = sqlite_path(&path, url, err);
		if (r < 0)
			return r;
		free(display);
		display = xasprintf("sqlite://%s", path);
		r = brig_store__sqlite_open(&s, path, display, err);
	}
	if (r < 0)
		return r;
	if (!s->display_url) /* a backend may hand back a better one */
		s->display_url = steal_pointer(&display);
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void brig_store_close(brig_store *s)
{
	if (!s)
		return;
	char *display = s->display_url;
	pthread_mutex_destroy(&s->lock);
	s->ops->close(s); /* frees s and s->path */
	free(display);
}

const char *brig_store_backend_name(const brig_store *s)
{
	return s ? s->ops->name : "";
}

const char *brig_store_display_url(const brig_store *s)
{
	return s ? s->display_url : "";
}

const char *brig_store_path(const brig_store *s)
{
	return s ? s->path : NULL;
}

/* ---- validation ---- */

static int check_name(const char *field, const char *v, bool optional, size_t cap, brig_error **err)
{
	if (!v) {
		if (optional)
			return 0;
		return brig__error_set(err, BRIG_EINVAL, 0, "%s is required", field);
	}
	size_t n = strlen(v);
	if (n == 0 && !optional)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s is empty", field);
	if (n > cap)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s is %zu bytes long (at most %zu)", field, n, cap);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return brig__error_set(err, BRIG_EINVAL, 0, "%s contains a control character", field);
	return 0;
}

static int check_key(brig_store_key *k, const char *ns, const char *agent, const char *session, brig_error **err)
{
	int r;
	if ((r = check_name("namespace", ns, false, BRIG_STORE_MAX_NAME, err)) < 0 ||
	    (r = check_name("agent", agent, false, BRIG_STORE_MAX_NAME, err)) < 0 ||
	    (r = check_name("session", session, false, BRIG_STORE_MAX_NAME, err)) < 0)
		return r;
	k->ns = ns;
	k->agent = agent;
	k->session = session;
	return 0;
}

static int check_json_len(const char *field, const char *v, brig_error **err)
{
	if (v && strlen(v) > BRIG_STORE_MAX_JSON)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s is longer than %d bytes", field, BRIG_STORE_MAX_JSON);
	return 0;
}

static int check_session(const brig_store_session *rec, bool creating, brig_error **err)
{
	brig_store_key k;
	int r;
	if (!rec)
		return brig__error_set(err, BRIG_EINVAL, 0, "session record is required");
	if ((r = check_key(&k, rec->ns, rec->agent, rec->session, err)) < 0)
		return r;
	if (rec->generation < (creating ? 0 : 1))
		return brig__error_set(err, BRIG_EINVAL, 0, "generation %lld is invalid (must be at least 1)",
				       (long long)rec->generation);
	if ((unsigned)rec->state >= N_STATES)
		return brig__error_set(err, BRIG_EINVAL, 0, "session state %d is invalid", (int)rec->state);
	if ((r = check_name("container name", rec->container_name, true, BRIG_STORE_MAX_NAME, err)) < 0 ||
	    (r = check_name("container id", rec->container_id, true, BRIG_STORE_MAX_NAME, err)) < 0 ||
	    (r = check_json_len("spec", rec->spec_json, err)) < 0)
		return r;
	return 0;
}

static int check_checkpoint(const brig_store_checkpoint *rec, brig_error **err)
{
	brig_store_key k;
	int r;
	if (!rec)
		return brig__error_set(err, BRIG_EINVAL, 0, "checkpoint record is required");
	if ((r = check_key(&k, rec->ns, rec->agent, rec->session, err)) < 0)
		return r;
	if (rec->generation < 1)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "checkpoint generation %lld is invalid (must be at least 1)",
				       (long long)rec->generation);
	bool hex = rec->digest && strlen(rec->digest) == 64;
	for (size_t i = 0; hex && i < 64; i++)
		hex = (rec->digest[i] >= '0' && rec->digest[i] <= '9') ||
		      (rec->digest[i] >= 'a' && rec->digest[i] <= 'f');
	if (!hex)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "checkpoint digest must be a SHA-256 as 64 lowercase hex digits");
	if ((r = check_name("checkpoint blob", rec->blob, false, BRIG_STORE_MAX_BLOB, err)) < 0)
		return r;
	if (rec->bytes_raw < 0 || rec->bytes_stored < 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "checkpoint sizes must not be negative");
	return 0;
}

static int check_argv_json(const char *v, brig_error **err)
{
	if (!v)
		return brig__error_set(err, BRIG_EINVAL, 0, "audit argv is required");
	int r = check_json_len("audit argv", v, err);
	if (r < 0)
		return r;
	json_error_t jerr;
	cleanup_json json_t *j = json_loads(v, JSON_REJECT_DUPLICATES, &jerr);
	if (!j || !json_is_array(j))
		return brig__error_set(err, BRIG_EINVAL, 0, "audit argv must be a JSON array of strings");
	size_t i;
	json_t *e;
	json_array_foreach (j, i, e)
		if (!json_is_string(e))
			return brig__error_set(err, BRIG_EINVAL, 0, "audit argv element %zu is not a string", i);
	return 0;
}

static int check_audit(const brig_store_audit *rec, brig_error **err)
{
	brig_store_key k;
	int r;
	if (!rec)
		return brig__error_set(err, BRIG_EINVAL, 0, "audit record is required");
	if ((r = check_key(&k, rec->ns, rec->agent, rec->session, err)) < 0)
		return r;
	if (rec->generation < 1)
		return brig__error_set(err, BRIG_EINVAL, 0, "audit generation %lld is invalid (must be at least 1)",
				       (long long)rec->generation);
	if ((r = check_name("audit container name", rec->container_name, true, BRIG_STORE_MAX_NAME, err)) < 0 ||
	    (r = check_argv_json(rec->argv_json, err)) < 0)
		return r;
	if (!rec->outcome || !*rec->outcome || strlen(rec->outcome) > BRIG_STORE_MAX_NAME ||
	    strspn(rec->outcome, "abcdefghijklmnopqrstuvwxyz_") != strlen(rec->outcome))
		return brig__error_set(
			err, BRIG_EINVAL, 0,
			"audit outcome must be a lowercase word (ok, timeout, cancel, uncertain, error)");
	if (rec->exit_code < -1)
		return brig__error_set(err, BRIG_EINVAL, 0, "audit exit code %d is invalid (-1 means none)",
				       rec->exit_code);
	if (rec->duration_ms < 0 || rec->stdout_bytes < 0 || rec->stderr_bytes < 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "audit duration and byte counts must not be negative");
	return 0;
}

static int check_store(brig_store *s, brig_error **err)
{
	if (!s)
		return brig__error_set(err, BRIG_EINVAL, 0, "store handle is NULL");
	return 0;
}

/* ---- dispatch: validate, lock, call the backend ---- */

#define LOCKED(s, call)                           \
	({                                        \
		pthread_mutex_lock(&(s)->lock);   \
		int locked_r_ = (call);           \
		pthread_mutex_unlock(&(s)->lock); \
		locked_r_;                        \
	})

int brig_store_schema_version(brig_store *s, int *out, brig_error **err)
{
	int r = check_store(s, err);
	if (r < 0)
		return r;
	*out = 0;
	return LOCKED(s, s->ops->schema_version(s, out, err));
}

int brig_store_session_get(brig_store *s, brig_store_session **out, const char *ns, const char *agent,
			   const char *session, brig_error **err)
{
	*out = NULL;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	return LOCKED(s, s->ops->session_get(s, out, &k, err));
}

int brig_store_session_create(brig_store *s, brig_store_session **out, const brig_store_session *rec, brig_error **err)
{
	if (out)
		*out = NULL;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_session(rec, true, err)) < 0)
		return r;
	int64_t now = brig_store__now_ms();
	return LOCKED(s, s->ops->session_create(s, out, rec, now, err));
}

int brig_store_session_cas(brig_store *s, brig_store_session **out, const brig_store_session *rec,
			   int64_t expected_revision, brig_error **err)
{
	if (out)
		*out = NULL;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_session(rec, false, err)) < 0)
		return r;
	if (expected_revision < 1)
		return brig__error_set(err, BRIG_EINVAL, 0, "expected revision %lld is invalid (revisions start at 1)",
				       (long long)expected_revision);
	int64_t now = brig_store__now_ms();
	return LOCKED(s, s->ops->session_cas(s, out, rec, expected_revision, now, err));
}

int brig_store_session_list(brig_store *s, brig_store_session **out, size_t *n, const char *ns, brig_error **err)
{
	*out = NULL;
	*n = 0;
	int r;
	if ((r = check_store(s, err)) < 0 ||
	    (ns && (r = check_name("namespace", ns, false, BRIG_STORE_MAX_NAME, err)) < 0))
		return r;
	return LOCKED(s, s->ops->session_list(s, out, n, ns, err));
}

int brig_store_session_delete(brig_store *s, brig_store_checkpoint **out_removed, size_t *n_removed, const char *ns,
			      const char *agent, const char *session, int64_t expected_revision, brig_error **err)
{
	if (out_removed)
		*out_removed = NULL;
	if (n_removed)
		*n_removed = 0;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	if (!out_removed != !n_removed)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "out_removed and n_removed must both be given or both NULL");
	if (expected_revision < 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "expected revision %lld is invalid",
				       (long long)expected_revision);
	brig_store_checkpoint *removed = NULL;
	size_t nr = 0;
	r = LOCKED(s, s->ops->session_delete(s, &removed, &nr, &k, expected_revision, err));
	if (r < 0)
		return r;
	if (out_removed) {
		*out_removed = removed;
		*n_removed = nr;
	} else {
		brig_store_checkpoint_free_array(removed, nr);
	}
	return 0;
}

int brig_store_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec,
			      brig_error **err)
{
	if (out)
		*out = NULL;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_checkpoint(rec, err)) < 0)
		return r;
	int64_t now = brig_store__now_ms();
	return LOCKED(s, s->ops->checkpoint_add(s, out, rec, now, err));
}

int brig_store_checkpoint_get(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	*out = NULL;
	int r;
	if ((r = check_store(s, err)) < 0)
		return r;
	return LOCKED(s, s->ops->checkpoint_get(s, out, id, err));
}

int brig_store_checkpoint_list(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns, const char *agent,
			       const char *session, brig_error **err)
{
	*out = NULL;
	*n = 0;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	return LOCKED(s, s->ops->checkpoint_list(s, out, n, &k, 0, err));
}

int brig_store_checkpoint_latest(brig_store *s, brig_store_checkpoint **out, const char *ns, const char *agent,
				 const char *session, brig_error **err)
{
	*out = NULL;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	brig_store_checkpoint *arr = NULL;
	size_t n = 0;
	r = LOCKED(s, s->ops->checkpoint_list(s, &arr, &n, &k, 1, err));
	if (r < 0)
		return r;
	if (n == 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "session %s/%s/%s has no checkpoint", ns, agent,
				       session);
	/* The array holds exactly one record: hand it out as a single one. */
	*out = arr;
	return 0;
}

int brig_store_checkpoint_remove(brig_store *s, brig_store_checkpoint **out, int64_t id, brig_error **err)
{
	if (out)
		*out = NULL;
	int r;
	if ((r = check_store(s, err)) < 0)
		return r;
	brig_store_checkpoint *rec = NULL;
	r = LOCKED(s, s->ops->checkpoint_remove(s, &rec, id, err));
	if (r < 0)
		return r;
	if (out)
		*out = rec;
	else
		brig_store_checkpoint_free(rec);
	return 0;
}

int brig_store_checkpoint_prune(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
				const char *agent, const char *session, size_t keep_n, brig_error **err)
{
	if (out)
		*out = NULL;
	if (n)
		*n = 0;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	if (!out != !n)
		return brig__error_set(err, BRIG_EINVAL, 0, "out and n must both be given or both NULL");
	if (keep_n > (size_t)INT64_MAX)
		keep_n = (size_t)INT64_MAX;
	brig_store_checkpoint *removed = NULL;
	size_t nr = 0;
	r = LOCKED(s, s->ops->checkpoint_prune(s, &removed, &nr, &k, keep_n, err));
	if (r < 0)
		return r;
	if (out) {
		*out = removed;
		*n = nr;
	} else {
		brig_store_checkpoint_free_array(removed, nr);
	}
	return 0;
}

int brig_store_audit_add(brig_store *s, int64_t *out_id, const brig_store_audit *rec, brig_error **err)
{
	int64_t id = 0;
	if (out_id)
		*out_id = 0;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_audit(rec, err)) < 0)
		return r;
	int64_t now = brig_store__now_ms();
	r = LOCKED(s, s->ops->audit_add(s, &id, rec, now, err));
	if (r == 0 && out_id)
		*out_id = id;
	return r;
}

int brig_store_audit_list(brig_store *s, brig_store_audit **out, size_t *n, const char *ns, const char *agent,
			  const char *session, size_t limit, brig_error **err)
{
	*out = NULL;
	*n = 0;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	if (limit > (size_t)INT64_MAX)
		limit = 0;
	return LOCKED(s, s->ops->audit_list(s, out, n, &k, limit, err));
}
