/* computer_guest.c — brig_computer_exec through brig-init: the per-process
 * cache of relays (one per container) and what each outcome means. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brig/guest.h"
#include "sandbox/computer_guest.h"
#include "util/util.h"

/* One relay per container for the life of the process. A handle that
 * broke leaves the cache at once but is freed only when its last user
 * returns it. */
typedef struct cached {
	struct cached *next;
	char *id;
	brig_guest *g;
	int refs;
	bool listed;
} cached;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cached *cache;

static void unlist_locked(cached *c)
{
	for (cached **pp = &cache; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->listed = false;
}

static void release(cached *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&cache_mu);
	bool last = --c->refs == 0 && !c->listed;
	pthread_mutex_unlock(&cache_mu);
	if (last) {
		brig_guest_free(c->g);
		free(c->id);
		free(c);
	}
}

/* A live relay into id: the cached one, or a new one (fresh: always new). */
static int acquire(brig_engine *e, cached **out, const char *id, bool fresh, int64_t deadline_ms, brig_error **err)
{
	pthread_mutex_lock(&cache_mu);
	for (cached *c = cache; c; c = c->next) {
		if (strcmp(c->id, id) != 0)
			continue;
		if (!fresh && brig_guest_alive(c->g)) {
			c->refs++;
			pthread_mutex_unlock(&cache_mu);
			*out = c;
			return 0;
		}
		unlist_locked(c);
		if (c->refs == 0) {
			brig_guest_free(c->g);
			free(c->id);
			free(c);
		}
		break;
	}
	pthread_mutex_unlock(&cache_mu);
	/* Opened outside the lock: two threads may both open one; the loser's
	 * stays unlisted and ends with its call. */
	brig_guest *g = NULL;
	int rc = brig_guest_open(&g, e, id, deadline_ms, err);
	if (rc)
		return rc;
	cached *c = xcalloc(1, sizeof *c);
	c->id = xstrdup(id);
	c->g = g;
	c->refs = 1;
	pthread_mutex_lock(&cache_mu);
	bool taken = false;
	for (cached *o = cache; o; o = o->next)
		taken |= strcmp(o->id, id) == 0;
	if (!taken) {
		c->listed = true;
		c->next = cache;
		cache = c;
	}
	pthread_mutex_unlock(&cache_mu);
	*out = c;
	return 0;
}

static void note_stderr(brig_output_tee *tee, const char *msg)
{
	char *line = xasprintf("brig: %s\n", msg);
	brig_output_tee_cb(BRIG_STREAM_STDERR, line, strlen(line), tee);
	free(line);
}

int brig_sandbox__guest_exec(brig_engine *e, const char *ref, const char *id, const brig_exec_opts *opts, json_t *env,
			     int64_t deadline, brig_output_tee *tee, brig_exec_result *res, brig_error **err)
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
				   .tag = tag};
	int64_t open_by = brig_now_ms() + 30000;
	if (deadline && deadline < open_by)
		open_by = deadline;
	brig_guest_exit x = {.code = -1};
	cached *c = NULL;
	int rc = 0;
	bool opened = false;
	/* Nothing was sent until a relay took the START: a handle found
	 * broken (ENOTSENT) is replaced once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		brig__error_clear(err);
		rc = acquire(e, &c, id, attempt > 0, open_by, err);
		if (rc)
			break;
		opened = true;
		rc = brig_guest_exec(c->g, &go, &x, err);
		if (rc != BRIG_ENOTSENT)
			break;
		release(c);
		c = NULL;
	}
	release(c);
	free(envv);

	if (rc == BRIG_ENOTFOUND || rc == BRIG_EDENIED) {
		/* brig-init's answer: the program cannot be run; nothing ran */
		note_stderr(tee, brig_error_message(err ? *err : NULL));
		brig__error_clear(err);
		res->exit_code = x.code;
		return 0;
	}
	if (rc == BRIG_EINVAL)
		return brig__error_prefix(err, rc, "exec in %s", ref);
	if (!opened && (rc == BRIG_ENOTSENT || rc == BRIG_ENOTFOUND || rc == BRIG_ECONFLICT))
		/* the daemon refused the relay's exec, or was not reached: nothing ran */
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
	int sr = brig_sandbox__stop_now(e, id, &stop_err);
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
