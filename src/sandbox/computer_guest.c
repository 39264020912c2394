/* computer_guest.c — brig_computer_exec through brig-init: the per-process
 * cache of relays (one per container) and what each outcome means. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brig/guest.h"
#include "sandbox/computer_guest.h"
#include "sandbox/internal.h"
#include "util/util.h"

/* One relay per container (and engine: another engine may reach it
 * another way). A handle that broke (its container stopped or was removed,
 * the relay ended) leaves the cache at the next acquire of any container,
 * and the cache holds at most cache_cap relays: past it the least recently
 * used one that no call holds goes. A handle that left the cache is freed
 * only when its last user returns it. */
typedef struct cached {
	struct cached *next;
	const brig_engine *e; /* compared, never used: the relay needs no engine */
	char *id;
	brig_guest *g;
	int refs;
	bool listed;
	uint64_t used; /* cache_tick at the last acquire */
} cached;

#define CACHE_CAP 64

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cached *cache;
static size_t cache_len, cache_cap = CACHE_CAP;
static uint64_t cache_tick;

static void unlist_locked(cached *c)
{
	for (cached **pp = &cache; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			cache_len--;
			break;
		}
	c->listed = false;
}

static void cached_free(cached *c)
{
	brig_guest_free(c->g);
	free(c->id);
	free(c);
}

/* Unlists broken handles, then the least recently used idle ones while
 * more than keep are listed; those no call holds go onto *dead, to be freed
 * outside the lock (ending a relay waits for its I/O thread). */
static void prune_locked(size_t keep, cached **dead)
{
	for (cached *c = cache, *next; c; c = next) {
		next = c->next;
		if (brig_guest_alive(c->g))
			continue;
		unlist_locked(c);
		if (c->refs == 0) {
			c->next = *dead;
			*dead = c;
		}
	}
	while (cache_len > keep) {
		cached *lru = NULL;
		for (cached *c = cache; c; c = c->next)
			if (c->refs == 0 && (!lru || c->used < lru->used))
				lru = c;
		if (!lru)
			break; /* every one is in use: over the cap until they return */
		unlist_locked(lru);
		lru->next = *dead;
		*dead = lru;
	}
}

static void free_dead(cached *dead)
{
	while (dead) {
		cached *next = dead->next;
		cached_free(dead);
		dead = next;
	}
}

static void release(cached *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&cache_mu);
	bool last = --c->refs == 0 && !c->listed;
	pthread_mutex_unlock(&cache_mu);
	if (last)
		cached_free(c);
}

size_t brig_sandbox__guest_cache_size(void)
{
	pthread_mutex_lock(&cache_mu);
	size_t n = cache_len;
	pthread_mutex_unlock(&cache_mu);
	return n;
}

void brig_sandbox__guest_cache_prune(size_t keep)
{
	pthread_mutex_lock(&cache_mu);
	cached *dead = NULL;
	prune_locked(keep, &dead);
	pthread_mutex_unlock(&cache_mu);
	free_dead(dead);
}

void brig_sandbox__guest_cache_cap(size_t cap)
{
	pthread_mutex_lock(&cache_mu);
	cache_cap = cap ? cap : CACHE_CAP;
	cached *dead = NULL;
	prune_locked(cache_cap, &dead);
	pthread_mutex_unlock(&cache_mu);
	free_dead(dead);
}

/* A live relay into id: the cached one, or a new one (fresh: always new). */
static int acquire(brig_engine *e, cached **out, const char *id, bool fresh, int64_t deadline_ms, brig_error **err)
{
	cached *dead = NULL;
	pthread_mutex_lock(&cache_mu);
	prune_locked(SIZE_MAX, &dead);
	for (cached *c = cache; c; c = c->next) {
		if (c->e != e || strcmp(c->id, id) != 0)
			continue;
		if (!fresh && brig_guest_alive(c->g)) {
			c->refs++;
			c->used = ++cache_tick;
			pthread_mutex_unlock(&cache_mu);
			free_dead(dead);
			*out = c;
			return 0;
		}
		unlist_locked(c);
		if (c->refs == 0) {
			c->next = dead;
			dead = c;
		}
		break;
	}
	pthread_mutex_unlock(&cache_mu);
	free_dead(dead);
	dead = NULL;
	/* Opened outside the lock: two threads may both open one; the loser's
	 * stays unlisted and ends with its call. */
	brig_guest *g = NULL;
	int rc = brig_guest_open(&g, e, id, deadline_ms, err);
	if (rc)
		return rc;
	cached *c = xcalloc(1, sizeof *c);
	c->e = e;
	c->id = xstrdup(id);
	c->g = g;
	c->refs = 1;
	pthread_mutex_lock(&cache_mu);
	bool taken = false;
	for (cached *o = cache; o; o = o->next)
		taken |= o->e == e && strcmp(o->id, id) == 0;
	if (!taken) {
		/* room for it first: the new one is in use, never the victim */
		prune_locked(cache_cap - 1, &dead);
		c->listed = true;
		c->used = ++cache_tick;
		c->next = cache;
		cache = c;
		cache_len++;
	}
	pthread_mutex_unlock(&cache_mu);
	free_dead(dead);
	*out = c;
	return 0;
}

int brig_sandbox__guest_warm(brig_engine *e, const char *id, brig_error **err)
{
	cached *c = NULL;
	int rc = acquire(e, &c, id, false, brig_now_ms() + 10000, err);
	if (rc == 0)
		release(c);
	return rc;
}

static void note_stderr(brig_output_tee *tee, const char *msg)
{
	char *line = xasprintf("brig: %s\n", msg);
	brig_output_tee_cb(BRIG_STREAM_STDERR, line, strlen(line), tee);
	free(line);
}

int brig_sandbox__guest_exec(brig_engine *e, const char *ref, const char *id, const brig_exec_opts *opts, json_t *env,
			     int64_t deadline, const brig_guest_exec_opts *tty, brig_output_tee *tee,
			     brig_exec_result *res, brig_error **err)
{
	size_t n = json_array_size(env);
	const char **envv = xcalloc(n + 1, sizeof *envv);
	for (size_t i = 0; i < n; i++)
		envv[i] = json_string_value(json_array_get(env, i));
	static unsigned long seq;
	char tag[64];
	snprintf(tag, sizeof tag, "x%lld-%d-%lu", (long long)brig_now_ms(), (int)getpid(),
		 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
	brig_guest_exec_opts go = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				   .argv = opts->argv,
				   .env = envv,
				   .env_count = n,
				   .cwd = opts->workdir,
				   .stdin_fd = opts->stdin_fd,
				   .stdin_data = opts->stdin_data,
				   .stdin_len = opts->stdin_len,
				   .deadline_ms = deadline,
				   .cancel_fd = opts->cancel_fd,
				   .on_output = brig_output_tee_cb,
				   .payload = tee,
				   .tag = tag,
				   .resize_fd = -1};
	if (tty) {
		go.rows = tty->rows;
		go.cols = tty->cols;
		go.resize_fd = tty->resize_fd;
		go.size_cb = tty->size_cb;
		go.size_payload = tty->size_payload;
	}
	int64_t open_by = brig_now_ms() + 30000;
	if (deadline && deadline < open_by)
		open_by = deadline;
	brig_guest_exit x = {.code = -1};
	cached *c = NULL;
	int rc = 0;
	bool sent = false;
	/* Nothing was sent until a relay took the START: a handle found
	 * broken (ENOTSENT) is replaced once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		brig__error_clear(err);
		rc = acquire(e, &c, id, attempt > 0, open_by, err);
		if (rc)
			break;
		rc = brig_guest_exec(c->g, &go, &x, err);
		if (rc != BRIG_ENOTSENT) {
			sent = true;
			break;
		}
		release(c);
		c = NULL;
	}
	release(c);
	free(envv);

	if (sent && (rc == BRIG_ENOTFOUND || rc == BRIG_EDENIED) && (x.code == 127 || x.code == 126)) {
		/* brig-init's answer: the program cannot be run; nothing ran.
		 * Said as a run says it ("brig: NAME: not found in the image"). */
		const char *m = brig_error_message(err ? *err : NULL);
		if (strncmp(m, "start: ", 7) == 0)
			m += 7;
		note_stderr(tee, m);
		brig__error_clear(err);
		res->exit_code = x.code;
		return 0;
	}
	if (rc == BRIG_EINVAL)
		return brig__error_prefix(err, rc, "exec in %s", ref);
	if (!sent && (rc == BRIG_ENOTSENT || rc == BRIG_ENOTFOUND || rc == BRIG_ECONFLICT))
		/* No relay took the START: the daemon refused the relay's exec, or
		 * was not reached. Nothing ran. (A brig-init that answered the
		 * relay with garbage or nothing is unreachable: that is uncertain,
		 * below, as the seed's rule says.) */
		return brig__error_prefix(err, rc == BRIG_ECONFLICT ? BRIG_ESTATE : rc, "exec in %s", ref);
	if (rc == 0) {
		res->exit_code = x.code;
		res->timed_out = x.timed_out;
		res->canceled = x.canceled;
		if (x.timed_out)
			return brig__error_set(
				err, BRIG_ETIMEDOUT, 0,
				"command in %s timed out after %lld ms; brig-init ended it and everything "
				"it started; the computer keeps running with its files",
				ref, (long long)opts->timeout_ms);
		if (x.canceled)
			return brig__error_set(err, BRIG_ECANCELED, 0,
					       "command in %s was cancelled; brig-init ended it and everything it "
					       "started; the computer keeps running with its files",
					       ref);
		return 0;
	}

	/* The relay broke, or brig-init said garbage or nothing. Ask once more
	 * over a new relay what became of the command (by its tag). */
	brig_error *cause = NULL;
	if (err) {
		cause = *err;
		*err = NULL;
	}
	cached *c2 = NULL;
	json_t *st = NULL;
	int code = -1;
	int64_t ask_by = brig_now_ms() + 10000;
	int src = acquire(e, &c2, id, true, ask_by, NULL);
	if (src == 0 && x.proc > 0) {
		brig_guest_exit kx;
		/* ends it if it still runs (it should not: brig-init ends the
		 * commands of a relay that closed) */
		src = brig_guest_kill(c2->g, x.proc, &kx, ask_by, NULL);
		code = kx.code;
	} else if (src == 0) {
		src = brig_guest_status(c2->g, &st, 0, tag, ask_by, NULL);
		if (src == BRIG_ENOTFOUND)
			src = 0; /* it never started */
		json_t *jc = json_object_get(st, "exit_code");
		code = json_is_integer(jc) ? (int)json_integer_value(jc) : -1;
		if (json_is_string(json_object_get(st, "state")) &&
		    strcmp(json_string_value(json_object_get(st, "state")), "running") == 0) {
			/* STATUS has no proc id for a tag-only start yet: end it by
			 * its id from the answer */
			brig_guest_exit kx;
			src = brig_guest_kill(c2->g, json_integer_value(json_object_get(st, "id")), &kx, ask_by, NULL);
			code = kx.code;
		}
	}
	release(c2);
	if (src == 0) {
		res->exit_code = code;
		json_decref(st);
		rc = brig__error_set(err, BRIG_EIO, 0,
				     "command in %s: %s; brig-init says it has ended (it is not retried; its output "
				     "may be incomplete); the computer keeps running",
				     ref, brig_error_message(cause));
		brig_error_free(cause);
		return rc;
	}
	json_decref(st);
	res->uncertain = true;
	res->exit_code = -1;
	brig_error *stop_err = NULL;
	int sr = brig_sandbox__stop_after(e, id, opts, &stop_err);
	res->container_stopped = sr == 0;
	rc = brig__error_set(err, BRIG_EUNCERTAIN, 0,
			     "command in %s: %s; brig-init cannot be reached; the computer was %s; it is not retried: "
			     "recover the session from its checkpoint%s%s",
			     ref, brig_error_message(cause), sr == 0 ? "stopped" : "NOT stopped",
			     sr ? " — stop failed: " : "", sr ? brig_error_message(stop_err) : "");
	brig_error_free(stop_err);
	brig_error_free(cause);
	return rc;
}

/* ---- the handle and detached commands, for callers (brig ps, kill…) ---- */

/* The running computer ref's container id, when it has brig-init. */
static int guest_computer(brig_engine *e, char **out_id, json_t **out_labels, const char *ref, brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, ref, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "no computer named %s", ref);
	if (rc)
		return rc;
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	const char *m = json_string_value(json_object_get(labels, BRIG_LABEL_MANAGED));
	const char *k = json_string_value(json_object_get(labels, BRIG_LABEL_KIND));
	if (!m || strcmp(m, "1") != 0 || !k || strcmp(k, "computer") != 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s is not a brig computer", ref);
	/* Said once for every caller (brig fs, ps, kill, exec -d and -t, the
	 * server's native routes, MCP, Python): what it lacks and how to get it. */
	if (!json_string_value(json_object_get(labels, BRIG_LABEL_INIT)))
		return brig__error_set(err, BRIG_ESTATE, 0,
				       "computer %s has no brig-init (an older brig created it, before brig ran "
				       "brig-init as PID 1): a new generation has it — brig checkpoint, brig stop and "
				       "brig recover its session, or remove and create it again; until then brig exec "
				       "(without -d or -t) and brig cp still work on it",
				       ref);
	const char *status = json_string_value(json_object_get(json_object_get(j, "State"), "Status"));
	if (!status || strcmp(status, "running") != 0)
		return brig__error_set(err, BRIG_ESTATE, 0, "computer %s is %s, not running", ref,
				       status ? status : "in an unknown state");
	*out_id = xstrdup(json_string_value(json_object_get(j, "Id")));
	if (out_labels)
		*out_labels = json_incref(labels);
	return 0;
}

int brig_computer_guest(brig_engine *e, brig_guest **out, const char *ref, brig_error **err)
{
	cleanup_free char *id = NULL;
	int rc = guest_computer(e, &id, NULL, ref, err);
	if (rc)
		return rc;
	rc = brig_guest_open(out, e, id, 0, err);
	return rc ? brig__error_prefix(err, rc, "computer %s", ref) : 0;
}

int brig_computer_start(brig_engine *e, const char *ref, const brig_exec_opts *opts, int64_t *proc, brig_error **err)
{
	if (!opts || opts->version < 1 || opts->version > BRIG_EXEC_OPTS_VERSION)
		return brig__error_set(err, BRIG_EINVAL, 0, "exec options: version must be 1..%d",
				       BRIG_EXEC_OPTS_VERSION);
	if (!opts->argv || !opts->argv[0] || !*opts->argv[0])
		return brig__error_set(err, BRIG_EINVAL, 0, "exec: a command is required (argv is empty)");
	cleanup_free char *id = NULL;
	cleanup_json json_t *labels = NULL;
	int rc = guest_computer(e, &id, &labels, ref, err);
	if (rc)
		return rc;
	brig_harness harness = BRIG_HARNESS_NONE;
	brig_harness_parse(&harness, json_string_value(json_object_get(labels, BRIG_LABEL_HARNESS)), NULL);
	if (json_object_get(labels, BRIG_LABEL_SECRETS)) /* placeholders stand in: nothing real is forwarded */
		harness = BRIG_HARNESS_NONE;
	cleanup_json json_t *env = NULL;
	if ((rc = brig_env_exec(&env, opts->env, opts->env_count, harness, err)) != 0)
		return rc;
	size_t n = json_array_size(env);
	const char **envv = xcalloc(n + 1, sizeof *envv);
	for (size_t i = 0; i < n; i++)
		envv[i] = json_string_value(json_array_get(env, i));
	brig_guest_exec_opts go = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				   .argv = opts->argv,
				   .env = envv,
				   .env_count = n,
				   .cwd = opts->workdir,
				   .stdin_fd = -1,
				   .cancel_fd = -1,
				   .detached = true,
				   .keep = opts->capture_max};
	cached *c = NULL;
	rc = acquire(e, &c, id, false, brig_now_ms() + 30000, err);
	if (!rc)
		rc = brig_guest_start(c->g, &go, proc, err);
	release(c);
	free(envv);
	return rc ? brig__error_prefix(err, rc, "start in %s", ref) : 0;
}

int brig_computer_exec_tty(brig_engine *e, const char *ref, const brig_exec_opts *opts, int rows, int cols,
			   int resize_fd, void (*size_cb)(int *rows, int *cols, void *payload), void *size_payload,
			   brig_exec_result *res, brig_error **err)
{
	memset(res, 0, sizeof *res);
	res->exit_code = -1;
	if (!opts || opts->version < 1 || opts->version > BRIG_EXEC_OPTS_VERSION)
		return brig__error_set(err, BRIG_EINVAL, 0, "exec options: version must be 1..%d",
				       BRIG_EXEC_OPTS_VERSION);
	if (!opts->argv || !opts->argv[0] || !*opts->argv[0])
		return brig__error_set(err, BRIG_EINVAL, 0, "exec: a command is required (argv is empty)");
	if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
		return brig__error_set(err, BRIG_EINVAL, 0, "a terminal's rows and columns must be 1..1000");
	int64_t start = brig_now_ms();
	int64_t deadline = opts->timeout_ms > 0 ? start + opts->timeout_ms : 0;
	cleanup_free char *id = NULL;
	cleanup_json json_t *labels = NULL;
	int rc = guest_computer(e, &id, &labels, ref, err);
	if (rc)
		return rc;
	brig_harness harness = BRIG_HARNESS_NONE;
	brig_harness_parse(&harness, json_string_value(json_object_get(labels, BRIG_LABEL_HARNESS)), NULL);
	if (json_object_get(labels, BRIG_LABEL_SECRETS)) /* placeholders stand in: nothing real is forwarded */
		harness = BRIG_HARNESS_NONE;
	cleanup_json json_t *env = NULL;
	if ((rc = brig_env_exec(&env, opts->env, opts->env_count, harness, err)) != 0)
		return rc;
	brig_guest_exec_opts tty = {.rows = rows,
				    .cols = cols,
				    .resize_fd = size_cb ? resize_fd : -1,
				    .size_cb = size_cb,
				    .size_payload = size_payload};
	brig_output_tee tee;
	brig_output_tee_init(&tee, opts->capture_max, opts->on_output, opts->payload);
	rc = brig_sandbox__guest_exec(e, ref, id, opts, env, deadline, &tty, &tee, res, err);
	brig_output_tee_finish(&tee, res);
	res->duration_ms = brig_now_ms() - start;
	return rc;
}
