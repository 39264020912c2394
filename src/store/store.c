/* store.c — the front end of the session store: URL selection and defaults,
 * argument validation and the per-handle lock. */
#include "store/store_internal.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

static void audit_writer_stop(brig_store *s);

void brig_store_close(brig_store *s)
{
	if (!s)
		return;
	audit_writer_stop(s);
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
	if ((unsigned)rec->state > BRIG_STORE_STOPPED)
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
	    (r = check_name("audit actor", rec->actor, true, BRIG_STORE_MAX_NAME, err)) < 0 ||
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
	int64_t now = brig_wall_ms();
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
	int64_t now = brig_wall_ms();
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

int brig_store_checkpoint_unowned(brig_store *s, brig_store_checkpoint **out, size_t *n, const char *ns,
				  brig_error **err)
{
	*out = NULL;
	*n = 0;
	int r;
	if ((r = check_store(s, err)) < 0 ||
	    (ns && (r = check_name("namespace", ns, false, BRIG_STORE_MAX_NAME, err)) < 0))
		return r;
	return LOCKED(s, s->ops->checkpoint_unowned(s, out, n, ns, err));
}

static int session_delete(brig_store *s, brig_store_checkpoint **out_removed, size_t *n_removed, const char *ns,
			  const char *agent, const char *session, int64_t expected_revision, bool keep,
			  brig_error **err)
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
	r = LOCKED(s, s->ops->session_delete(s, &removed, &nr, &k, expected_revision, keep, err));
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

int brig_store_session_delete(brig_store *s, brig_store_checkpoint **out_removed, size_t *n_removed, const char *ns,
			      const char *agent, const char *session, int64_t expected_revision, brig_error **err)
{
	return session_delete(s, out_removed, n_removed, ns, agent, session, expected_revision, false, err);
}

int brig_store_session_forget(brig_store *s, const char *ns, const char *agent, const char *session,
			      int64_t expected_revision, brig_error **err)
{
	return session_delete(s, NULL, NULL, ns, agent, session, expected_revision, true, err);
}

int brig_store_checkpoint_add(brig_store *s, brig_store_checkpoint **out, const brig_store_checkpoint *rec,
			      brig_error **err)
{
	if (out)
		*out = NULL;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_checkpoint(rec, err)) < 0)
		return r;
	int64_t now = brig_wall_ms();
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

/* ---- the audit writer (brig_store_audit_background) ---- */

typedef struct audit_item {
	brig_store_audit rec;
	int64_t now;
} audit_item;

struct audit_writer {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a row queued or written, or stopping */
	audit_item q[BRIG_STORE_AUDIT_QUEUE];
	size_t head, len;
	bool busy; /* the writer holds a row outside q */
	bool stop;
	pthread_t th;
};

/* How long the writer waits for a store that refuses a row (PostgreSQL
 * restarting, SQLite locked) before it reports the row lost. */
#define AUDIT_RETRY_MS 30000

/* Writes one row, waiting for a store that refuses it: backing off up to
 * 2 s between tries for AUDIT_RETRY_MS (callers meanwhile wait for room in
 * the queue), or only once more when the store is being closed. A row still
 * refused is reported on stderr, never dropped silently. */
static void audit_write_one(brig_store *s, audit_item *it)
{
	struct audit_writer *w = s->aw;
	brig_error *err = NULL;
	int64_t id = 0;
	int64_t give_up = brig_now_ms() + AUDIT_RETRY_MS, wait_ms = 100;
	for (int attempt = 0;; attempt++) {
		brig__error_clear(&err);
		if (LOCKED(s, s->ops->audit_add(s, &id, &it->rec, it->now, &err)) == 0)
			break;
		pthread_mutex_lock(&w->lock);
		bool retry = brig_now_ms() + wait_ms < give_up && (!w->stop || attempt == 0);
		if (retry) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(wait_ms / 1000);
			ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			/* woken early by a queued row or by close: tried again then */
			pthread_cond_timedwait(&w->cond, &w->lock, &ts);
		}
		pthread_mutex_unlock(&w->lock);
		if (retry) {
			wait_ms = wait_ms * 2 > 2000 ? 2000 : wait_ms * 2;
			continue;
		}
		/* argv_json holds no environment values (check_audit's contract). */
		fprintf(stderr, "brig: the audit row of %s/%s/%s %s (%s) could not be written to %s: %s\n", it->rec.ns,
			it->rec.agent, it->rec.session, it->rec.argv_json, it->rec.outcome,
			s->display_url ? s->display_url : "the store", brig_error_message(err));
		break;
	}
	brig_error_free(err);
}

static void *audit_writer_main(void *arg)
{
	brig_store *s = arg;
	struct audit_writer *w = s->aw;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->len && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->len)
			break; /* stopping, nothing left */
		audit_item it = w->q[w->head];
		w->head = (w->head + 1) % BRIG_STORE_AUDIT_QUEUE;
		w->len--;
		w->busy = true;
		pthread_mutex_unlock(&w->lock);
		audit_write_one(s, &it);
		brig_store__audit_clear(&it.rec);
		pthread_mutex_lock(&w->lock);
		w->busy = false;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static char *dup_or_null(const char *v)
{
	return v ? xstrdup(v) : NULL;
}

static int audit_queue(brig_store *s, const brig_store_audit *rec, int64_t now)
{
	struct audit_writer *w = s->aw;
	audit_item it = {.rec = *rec, .now = now};
	it.rec.ns = dup_or_null(rec->ns);
	it.rec.agent = dup_or_null(rec->agent);
	it.rec.session = dup_or_null(rec->session);
	it.rec.container_name = dup_or_null(rec->container_name);
	it.rec.argv_json = dup_or_null(rec->argv_json);
	it.rec.outcome = dup_or_null(rec->outcome);
	it.rec.actor = dup_or_null(rec->actor);
	pthread_mutex_lock(&w->lock);
	while (w->len == BRIG_STORE_AUDIT_QUEUE)
		pthread_cond_wait(&w->cond, &w->lock);
	w->q[(w->head + w->len) % BRIG_STORE_AUDIT_QUEUE] = it;
	w->len++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* Waits until every queued row is written. */
static void audit_flush(brig_store *s)
{
	struct audit_writer *w = s->aw;
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	while (w->len || w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void audit_writer_stop(brig_store *s)
{
	struct audit_writer *w = s->aw;
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->th, NULL); /* it writes what is queued first */
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
	s->aw = NULL;
}

int brig_store_audit_background(brig_store *s, brig_error **err)
{
	int r;
	if ((r = check_store(s, err)) < 0)
		return r;
	if (s->aw)
		return 0;
	struct audit_writer *w = xcalloc(1, sizeof *w);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	s->aw = w;
	int e = pthread_create(&w->th, NULL, audit_writer_main, s);
	if (e) {
		s->aw = NULL;
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		free(w);
		return brig__error_set(err, BRIG_EIO, e, "cannot start the audit writer: %s", strerror(e));
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
	int64_t now = brig_wall_ms();
	brig_store_audit w = *rec;
	cleanup_free char *me = NULL;
	if (!w.actor) {
		uid_t uid = geteuid();
		struct passwd pw, *pwp = NULL;
		char buf[1024];
		if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp && pwp->pw_name &&
		    check_name("user", pwp->pw_name, false, 64, NULL) == 0)
			me = xasprintf("%s (uid %u)", pwp->pw_name, (unsigned)uid);
		else
			me = xasprintf("uid %u", (unsigned)uid);
		w.actor = me;
	}
	if (!out_id && s->aw)
		return audit_queue(s, &w, now);
	r = LOCKED(s, s->ops->audit_add(s, &id, &w, now, err));
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
	audit_flush(s); /* a caller reads the rows of its own commands */
	return LOCKED(s, s->ops->audit_list(s, out, n, &k, limit, err));
}

/* ---- egress ledger ---- */

static int check_egress(const brig_store_egress *rec, brig_error **err)
{
	brig_store_key k;
	int r;
	if (!rec)
		return brig__error_set(err, BRIG_EINVAL, 0, "egress record is required");
	if ((r = check_name("egress sandbox", rec->sandbox, false, BRIG_STORE_MAX_NAME, err)) < 0)
		return r;
	if ((rec->ns || rec->agent || rec->session) && (r = check_key(&k, rec->ns, rec->agent, rec->session, err)) < 0)
		return r;
	if (!rec->host || strlen(rec->host) > 253 || !rec->reason || strlen(rec->reason) > 1024)
		return brig__error_set(err, BRIG_EINVAL, 0, "egress host (at most 253) and reason (at most 1024) are "
							    "required");
	if (!rec->decision || (strcmp(rec->decision, "allowed") != 0 && strcmp(rec->decision, "denied") != 0 &&
			       strcmp(rec->decision, "error") != 0))
		return brig__error_set(err, BRIG_EINVAL, 0, "egress decision must be allowed, denied or error");
	if (rec->port < 0 || rec->port > 65535 || rec->bytes_up < 0 || rec->bytes_down < 0 || rec->duration_ms < 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "egress port, byte counts and duration are out of range");
	return 0;
}

int brig_store_egress_add(brig_store *s, int64_t *out_id, const brig_store_egress *rec, brig_error **err)
{
	int64_t id = 0;
	if (out_id)
		*out_id = 0;
	int r;
	if ((r = check_store(s, err)) < 0 || (r = check_egress(rec, err)) < 0)
		return r;
	r = LOCKED(s, s->ops->egress_add(s, &id, rec, err));
	if (r == 0 && out_id)
		*out_id = id;
	return r;
}

int brig_store_egress_list(brig_store *s, brig_store_egress **out, size_t *n, const char *sandbox, const char *ns,
			   const char *agent, const char *session, size_t limit, brig_error **err)
{
	*out = NULL;
	*n = 0;
	brig_store_key k;
	int r;
	if ((r = check_store(s, err)) < 0)
		return r;
	bool by_key = ns || agent || session;
	if (!!sandbox == by_key)
		return brig__error_set(err, BRIG_EINVAL, 0, "egress ledger: give a sandbox or a session, not %s",
				       sandbox ? "both" : "neither");
	if (sandbox && (r = check_name("egress sandbox", sandbox, false, BRIG_STORE_MAX_NAME, err)) < 0)
		return r;
	if (by_key && (r = check_key(&k, ns, agent, session, err)) < 0)
		return r;
	if (limit > (size_t)INT64_MAX)
		limit = 0;
	return LOCKED(s, s->ops->egress_list(s, out, n, sandbox, by_key ? &k : NULL, limit, err));
}
