/* containers.c — container calls of the Engine API: create, inspect, list,
 * start, stop, kill, wait, remove, pause, unpause, rename. */
#include <string.h>

#include "engine/internal.h"

static char *enc(const char *s) { return brig_urlencode(s ? s : ""); }

static char *filters_query(json_t *filters)
{
	if (!filters)
		return xstrdup("");
	cleanup_free char *f = json_dumps(filters, JSON_COMPACT);
	cleanup_free char *fe = enc(f ? f : "{}");
	return xasprintf("filters=%s", fe);
}

int brig_engine_container_create(brig_engine *e, char **out_id, const char *name, json_t *config,
				 brig_error **err)
{
	cleanup_free char *n = name ? enc(name) : NULL;
	cleanup_free char *path = name ? brig_engine__path(e, "/containers/create?name=%s", n)
				       : brig_engine__path(e, "/containers/create");
	cleanup_free char *what = xasprintf("create container %s", name ? name : "(unnamed)");
	brig_engine_call call = {.method = "POST", .path = path, .body = config, .what = what};
	cleanup_json json_t *resp = NULL;
	int rc = brig_engine__call(e, &call, &resp, NULL, NULL, err);
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(resp, "Id"));
	if (!id || !*id)
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: the daemon's answer has no Id", what);
	if (out_id)
		*out_id = xstrdup(id);
	return 0;
}

int brig_engine_container_inspect(brig_engine *e, json_t **out, const char *id, brig_error **err)
{
	cleanup_free char *i = enc(id);
	cleanup_free char *path = brig_engine__path(e, "/containers/%s/json", i);
	cleanup_free char *what = xasprintf("inspect container %s", id);
	brig_engine_call call = {.method = "GET", .path = path, .what = what};
	int rc = brig_engine__call(e, &call, out, NULL, NULL, err);
	if (rc == 0 && !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: answer is not an object", what);
	}
	return rc;
}

int brig_engine_container_list(brig_engine *e, json_t **out, bool all, json_t *filters, brig_error **err)
{
	cleanup_free char *fq = filters_query(filters);
	cleanup_free char *path = brig_engine__path(e, "/containers/json?all=%d%s%s", all ? 1 : 0, *fq ? "&" : "", fq);
	brig_engine_call call = {.method = "GET", .path = path, .what = "list containers"};
	int rc = brig_engine__call(e, &call, out, NULL, NULL, err);
	if (rc == 0 && !json_is_array(*out)) {
		json_decref(*out);
		*out = NULL;
		return brig__error_set(err, BRIG_EPROTO, 0, "list containers: answer is not an array");
	}
	return rc;
}

static int simple_post(brig_engine *e, const char *id, const char *verb, const char *query, const char *what_verb,
		       int64_t deadline_ms, int *status, brig_error **err)
{
	cleanup_free char *i = enc(id);
	cleanup_free char *path = brig_engine__path(e, "/containers/%s/%s%s", i, verb, query ? query : "");
	cleanup_free char *what = xasprintf("%s container %s", what_verb, id);
	brig_engine_call call = {.method = "POST", .path = path, .what = what, .deadline_ms = deadline_ms};
	return brig_engine__call(e, &call, NULL, status, NULL, err);
}

/* 304 from start or stop: already in the state the caller asked for. */
static int not_modified_ok(int rc, int status, brig_error **err)
{
	if (rc == BRIG_EPROTO && status == 304) {
		brig__error_clear(err);
		return 0;
	}
	return rc;
}

int brig_engine_container_start(brig_engine *e, const char *id, brig_error **err)
{
	int status = 0;
	int rc = simple_post(e, id, "start", NULL, "start", 0, &status, err);
	/* runc's words for a --user the daemon's userns-remap range does not
	 * cover; say which setting it is and what is allowed */
	if (rc && err && *err && (*err)->message && strstr((*err)->message, "unmapped user in user namespace")) {
		cleanup_free char *m = strdup((*err)->message);
		int hs = (*err)->http_status;
		return brig__error_set_http(err, rc, hs,
					    "%s (the user is outside the ids the daemon's userns-remap maps: "
					    "a default remap maps 0-65535; pick a user below that or widen "
					    "the range in /etc/subuid and /etc/subgid)",
					    m ? m : "start failed");
	}
	return not_modified_ok(rc, status, err);
}

int brig_engine_container_stop(brig_engine *e, const char *id, int timeout_s, brig_error **err)
{
	cleanup_free char *q = timeout_s >= 0 ? xasprintf("?t=%d", timeout_s) : NULL;
	int64_t deadline = brig_now_ms() + e->timeout_ms + (timeout_s > 0 ? (int64_t)timeout_s * 1000 : 10000);
	int status = 0;
	int rc = simple_post(e, id, "stop", q, "stop", deadline, &status, err);
	return not_modified_ok(rc, status, err);
}

int brig_engine_container_kill(brig_engine *e, const char *id, const char *signal, brig_error **err)
{
	cleanup_free char *s = signal ? enc(signal) : NULL;
	cleanup_free char *q = s ? xasprintf("?signal=%s", s) : NULL;
	return simple_post(e, id, "kill", q, "kill", 0, NULL, err);
}

struct brig_engine_waiter {
	brig_engine *e;
	brig_http_conn *c;
	char *path, *what;
	brig_http_response resp;
	brig_http_exchange x;
};

void brig_engine_waiter_free(brig_engine_waiter *w)
{
	if (!w)
		return;
	brig_http_exchange_end(&w->x);
	if (w->c)
		brig_engine__conn_put(w->e, w->c); /* reused only after a complete answer */
	brig_http_response_clear(&w->resp);
	free(w->path);
	free(w->what);
	free(w);
}

/* A non-2xx answer, once complete, becomes the daemon's error. */
static int waiter_status(brig_engine_waiter *w, brig_error **err)
{
	if (w->resp.status >= 200 && w->resp.status < 300)
		return 0;
	brig_error *rerr = NULL;
	if (!w->x.complete && brig_http_exchange_read(&w->x, false, brig_now_ms() + w->e->timeout_ms, &rerr) != 0) {
		brig_error_free(rerr);
		w->resp.body.len = 0; /* the status alone says enough */
	}
	return brig_engine__status_error(w->resp.status, w->resp.body.data, w->resp.body.len, w->what, err);
}

int brig_engine_container_wait_begin(brig_engine *e, brig_engine_waiter **out, const char *id,
				     const char *condition, brig_error **err)
{
	*out = NULL;
	cleanup_free char *i = enc(id);
	cleanup_free char *c = condition ? enc(condition) : NULL;
	brig_engine_waiter *w = xcalloc(1, sizeof *w);
	w->e = e;
	w->path = c ? brig_engine__path(e, "/containers/%s/wait?condition=%s", i, c)
		    : brig_engine__path(e, "/containers/%s/wait", i);
	w->what = xasprintf("wait for container %s", id);
	/* The daemon registers the wait before it sends the answer's headers:
	 * once they are read, no later exit can be missed. */
	int64_t deadline = brig_now_ms() + e->timeout_ms;
	brig_http_request req = {.method = "POST", .target = w->path, .deadline_ms = deadline};
	int rc = brig_engine__conn_get(e, &w->c, deadline, err);
	if (rc == 0)
		rc = brig_http_exchange_send(&w->x, w->c, &req, &w->resp, e->max_json, NULL, NULL, err);
	if (rc == 0)
		rc = brig_http_exchange_read(&w->x, true, deadline, err);
	if (rc == 0)
		rc = waiter_status(w, err);
	else
		brig__error_prefix(err, rc, "%s", w->what);
	if (rc) {
		brig_engine_waiter_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int brig_engine_waiter_finish(brig_engine_waiter *w, int64_t deadline_ms, int64_t *exit_code, brig_error **err)
{
	if (!w->x.p)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: this wait has already ended", w->what);
	int rc = brig_http_exchange_read(&w->x, false, deadline_ms ? deadline_ms : brig_now_ms() + 24LL * 3600 * 1000,
					 err);
	brig_http_exchange_end(&w->x);
	if (rc == BRIG_EUNCERTAIN && deadline_ms && brig_now_ms() >= deadline_ms)
		return brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: deadline passed", w->what);
	if (rc)
		return brig__error_prefix(err, rc, "%s", w->what);
	json_error_t jerr;
	cleanup_json json_t *resp = json_loadb(w->resp.body.data, w->resp.body.len, 0, &jerr);
	if (!resp)
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: the daemon's answer is not JSON: %s", w->what,
				       jerr.text);
	json_t *sc = json_object_get(resp, "StatusCode");
	if (!json_is_integer(sc))
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: answer has no StatusCode", w->what);
	if (exit_code)
		*exit_code = json_integer_value(sc);
	return 0;
}

int brig_engine_container_wait(brig_engine *e, const char *id, const char *condition, int64_t deadline_ms,
			       int64_t *exit_code, brig_error **err)
{
	brig_engine_waiter *w = NULL;
	int rc = brig_engine_container_wait_begin(e, &w, id, condition, err);
	if (rc == 0)
		rc = brig_engine_waiter_finish(w, deadline_ms, exit_code, err);
	brig_engine_waiter_free(w);
	return rc;
}

int brig_engine_container_remove(brig_engine *e, const char *id, bool force, bool volumes, brig_error **err)
{
	cleanup_free char *i = enc(id);
	cleanup_free char *path =
		brig_engine__path(e, "/containers/%s?force=%d&v=%d", i, force ? 1 : 0, volumes ? 1 : 0);
	cleanup_free char *what = xasprintf("remove container %s", id);
	brig_engine_call call = {.method = "DELETE", .path = path, .what = what};
	return brig_engine__call(e, &call, NULL, NULL, NULL, err);
}

int brig_engine_container_pause(brig_engine *e, const char *id, brig_error **err)
{
	return simple_post(e, id, "pause", NULL, "pause", 0, NULL, err);
}

int brig_engine_container_unpause(brig_engine *e, const char *id, brig_error **err)
{
	return simple_post(e, id, "unpause", NULL, "unpause", 0, NULL, err);
}

int brig_engine_container_rename(brig_engine *e, const char *id, const char *new_name, brig_error **err)
{
	cleanup_free char *n = enc(new_name);
	cleanup_free char *q = xasprintf("?name=%s", n);
	return simple_post(e, id, "rename", q, "rename", 0, NULL, err);
}
