/* objects.c — volumes, networks and images of the Engine API, and the
 * events stream. */
#include <string.h>

#include "engine/internal.h"

static char *filters_suffix(json_t *filters, char sep)
{
	if (!filters)
		return xstrdup("");
	cleanup_free char *f = json_dumps(filters, JSON_COMPACT);
	cleanup_free char *fe = brig_urlencode(f ? f : "{}");
	return xasprintf("%cfilters=%s", sep, fe);
}

static int get_json(brig_engine *e, json_t **out, const char *path, const char *what, brig_error **err)
{
	brig_engine_call call = {.method = "GET", .path = path, .what = what};
	return brig_engine__call(e, &call, out, NULL, NULL, err);
}

static int delete_path(brig_engine *e, const char *path, const char *what, brig_error **err)
{
	brig_engine_call call = {.method = "DELETE", .path = path, .what = what};
	return brig_engine__call(e, &call, NULL, NULL, NULL, err);
}

/* ---- volumes ---- */

int brig_engine_volume_create(brig_engine *e, json_t **out, json_t *spec, brig_error **err)
{
	cleanup_free char *path = brig_engine__path(e, "/volumes/create");
	const char *name = json_string_value(json_object_get(spec, "Name"));
	cleanup_free char *what = xasprintf("create volume %s", name ? name : "(unnamed)");
	brig_engine_call call = {.method = "POST", .path = path, .body = spec, .what = what};
	json_t *tmp = NULL;
	int rc = brig_engine__call(e, &call, &tmp, NULL, NULL, err);
	if (out)
		*out = tmp;
	else if (tmp)
		json_decref(tmp);
	return rc;
}

int brig_engine_volume_inspect(brig_engine *e, json_t **out, const char *name, brig_error **err)
{
	cleanup_free char *n = brig_urlencode(name);
	cleanup_free char *path = brig_engine__path(e, "/volumes/%s", n);
	cleanup_free char *what = xasprintf("inspect volume %s", name);
	return get_json(e, out, path, what, err);
}

int brig_engine_volume_list(brig_engine *e, json_t **out, json_t *filters, brig_error **err)
{
	cleanup_free char *f = filters_suffix(filters, '?');
	cleanup_free char *path = brig_engine__path(e, "/volumes%s", f);
	return get_json(e, out, path, "list volumes", err);
}

int brig_engine_volume_remove(brig_engine *e, const char *name, bool force, brig_error **err)
{
	cleanup_free char *n = brig_urlencode(name);
	cleanup_free char *path = brig_engine__path(e, "/volumes/%s?force=%d", n, force ? 1 : 0);
	cleanup_free char *what = xasprintf("remove volume %s", name);
	return delete_path(e, path, what, err);
}

/* ---- networks ---- */

int brig_engine_network_create(brig_engine *e, char **out_id, json_t *spec, brig_error **err)
{
	cleanup_free char *path = brig_engine__path(e, "/networks/create");
	const char *name = json_string_value(json_object_get(spec, "Name"));
	cleanup_free char *what = xasprintf("create network %s", name ? name : "(unnamed)");
	brig_engine_call call = {.method = "POST", .path = path, .body = spec, .what = what};
	cleanup_json json_t *resp = NULL;
	int rc = brig_engine__call(e, &call, &resp, NULL, NULL, err);
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(resp, "Id"));
	if (!id)
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: answer has no Id", what);
	if (out_id)
		*out_id = xstrdup(id);
	return 0;
}

int brig_engine_network_inspect(brig_engine *e, json_t **out, const char *id, brig_error **err)
{
	cleanup_free char *n = brig_urlencode(id);
	cleanup_free char *path = brig_engine__path(e, "/networks/%s", n);
	cleanup_free char *what = xasprintf("inspect network %s", id);
	return get_json(e, out, path, what, err);
}

int brig_engine_network_list(brig_engine *e, json_t **out, json_t *filters, brig_error **err)
{
	cleanup_free char *f = filters_suffix(filters, '?');
	cleanup_free char *path = brig_engine__path(e, "/networks%s", f);
	return get_json(e, out, path, "list networks", err);
}

static int network_attach(brig_engine *e, const char *net, const char *container, const char *verb, bool force,
			  brig_error **err)
{
	cleanup_free char *n = brig_urlencode(net);
	cleanup_free char *path = brig_engine__path(e, "/networks/%s/%s", n, verb);
	cleanup_free char *what = xasprintf("%s container %s %s network %s", verb, container,
					    strcmp(verb, "connect") == 0 ? "to" : "from", net);
	cleanup_json json_t *body = json_pack("{s:s}", "Container", container);
	if (force)
		json_object_set_new(body, "Force", json_true());
	brig_engine_call call = {.method = "POST", .path = path, .body = body, .what = what};
	return brig_engine__call(e, &call, NULL, NULL, NULL, err);
}

int brig_engine_network_connect(brig_engine *e, const char *net, const char *container, brig_error **err)
{
	return network_attach(e, net, container, "connect", false, err);
}

int brig_engine_network_disconnect(brig_engine *e, const char *net, const char *container, bool force,
				   brig_error **err)
{
	return network_attach(e, net, container, "disconnect", force, err);
}

int brig_engine_network_remove(brig_engine *e, const char *id, brig_error **err)
{
	cleanup_free char *n = brig_urlencode(id);
	cleanup_free char *path = brig_engine__path(e, "/networks/%s", n);
	cleanup_free char *what = xasprintf("remove network %s", id);
	return delete_path(e, path, what, err);
}

/* ---- images ---- */

int brig_engine_image_inspect(brig_engine *e, json_t **out, const char *ref, brig_error **err)
{
	cleanup_free char *r = brig_urlencode(ref);
	cleanup_free char *path = brig_engine__path(e, "/images/%s/json", r);
	cleanup_free char *what = xasprintf("inspect image %s", ref);
	return get_json(e, out, path, what, err);
}

int brig_engine_image_list(brig_engine *e, json_t **out, json_t *filters, brig_error **err)
{
	cleanup_free char *f = filters_suffix(filters, '?');
	cleanup_free char *path = brig_engine__path(e, "/images/json%s", f);
	return get_json(e, out, path, "list images", err);
}

/* Progress messages of import/build: {"stream":…}, {"status":…},
 * {"aux":{"ID":…}}, or {"error":…} which ends the operation. */
typedef struct progress {
	brig_engine_progress_cb cb;
	void *payload;
	char *error;
	char *id;
	brig_jsonl jl;
} progress;

static int progress_obj(json_t *obj, void *payload)
{
	progress *p = payload;
	const char *errmsg = json_string_value(json_object_get(obj, "error"));
	if (errmsg) {
		if (!p->error)
			p->error = xstrndup(errmsg, 2000);
		return 0;
	}
	/* A multi-stage build reports each stage's image: the last one is the
	 * image the tag names. */
	const char *id = json_string_value(json_object_get(json_object_get(obj, "aux"), "ID"));
	if (id) {
		free(p->id);
		p->id = xstrdup(id);
	}
	const char *line = json_string_value(json_object_get(obj, "stream"));
	if (!line)
		line = json_string_value(json_object_get(obj, "status"));
	if (line && p->cb)
		p->cb(line, p->payload);
	return 0;
}

static int progress_body(const char *data, size_t len, void *payload)
{
	progress *p = payload;
	return brig_jsonl_feed(&p->jl, data, len);
}

static int run_progress(brig_engine *e, brig_engine_call *call, progress *p, brig_error **err)
{
	brig_jsonl_init(&p->jl, 1u << 20, progress_obj, p, err);
	call->body_cb = progress_body;
	call->body_payload = p;
	int rc = brig_engine__call(e, call, NULL, NULL, NULL, err);
	if (rc == 0)
		rc = brig_jsonl_finish(&p->jl);
	if (rc == 0 && p->error)
		rc = brig__error_set(err, BRIG_EDAEMON, 0, "%s: %s", call->what, p->error);
	brig_jsonl_free(&p->jl);
	return rc;
}

int brig_engine_image_import(brig_engine *e, const char *repo, const char *tag, const char *const *changes,
			     brig_engine_reader reader, void *payload, brig_error **err)
{
	brig_buf q;
	brig_buf_init(&q, SIZE_MAX / 2); /* the caller's own strings: memory is the bound */
	cleanup_free char *r = brig_urlencode(repo);
	cleanup_free char *t = brig_urlencode(tag ? tag : "latest");
	brig_buf_putf(&q, "/images/create?fromSrc=-&repo=%s&tag=%s", r, t);
	for (const char *const *c = changes; c && *c; c++) {
		cleanup_free char *ce = brig_urlencode(*c);
		brig_buf_putf(&q, "&changes=%s", ce);
	}
	cleanup_free char *path = brig_engine__path(e, "%s", brig_buf_cstr(&q));
	brig_buf_free(&q);
	cleanup_free char *what = xasprintf("import image %s:%s", repo, tag ? tag : "latest");
	brig_engine_call call = {.method = "POST",
				 .path = path,
				 .what = what,
				 .deadline_ms = brig_now_ms() + BRIG_ENGINE_TRANSFER_MS,
				 .reader = reader,
				 .reader_payload = payload,
				 .content_type = "application/x-tar"};
	progress p = {0};
	int rc = run_progress(e, &call, &p, err);
	free(p.error);
	free(p.id);
	return rc;
}

int brig_engine_image_build(brig_engine *e, char **out_id, const char *tag, const char *network_mode,
			    json_t *buildargs, brig_engine_reader context, void *payload,
			    brig_engine_progress_cb progress_cb, void *progress_payload, brig_error **err)
{
	brig_buf q;
	brig_buf_init(&q, SIZE_MAX / 2); /* the caller's own strings: memory is the bound */
	cleanup_free char *t = brig_urlencode(tag);
	brig_buf_putf(&q, "/build?t=%s&rm=1&forcerm=1", t);
	if (network_mode) {
		cleanup_free char *nm = brig_urlencode(network_mode);
		brig_buf_putf(&q, "&networkmode=%s", nm);
	}
	if (buildargs) {
		cleanup_free char *ba = json_dumps(buildargs, JSON_COMPACT);
		cleanup_free char *bae = brig_urlencode(ba ? ba : "{}");
		brig_buf_putf(&q, "&buildargs=%s", bae);
	}
	cleanup_free char *path = brig_engine__path(e, "%s", brig_buf_cstr(&q));
	brig_buf_free(&q);
	cleanup_free char *what = xasprintf("build image %s", tag);
	brig_engine_call call = {.method = "POST",
				 .path = path,
				 .what = what,
				 .deadline_ms = brig_now_ms() + BRIG_ENGINE_TRANSFER_MS,
				 .reader = context,
				 .reader_payload = payload,
				 .content_type = "application/x-tar"};
	progress p = {.cb = progress_cb, .payload = progress_payload};
	int rc = run_progress(e, &call, &p, err);
	if (rc == 0 && out_id) {
		if (p.id) {
			*out_id = steal_pointer(&p.id);
		} else {
			cleanup_json json_t *img = NULL;
			rc = brig_engine_image_inspect(e, &img, tag, err);
			if (rc == 0)
				*out_id = xstrdup(json_string_value(json_object_get(img, "Id")));
		}
	}
	free(p.error);
	free(p.id);
	return rc;
}

int brig_engine_image_tag(brig_engine *e, const char *ref, const char *repo, const char *tag, brig_error **err)
{
	cleanup_free char *r = brig_urlencode(ref);
	cleanup_free char *rp = brig_urlencode(repo);
	cleanup_free char *t = brig_urlencode(tag ? tag : "latest");
	cleanup_free char *path = brig_engine__path(e, "/images/%s/tag?repo=%s&tag=%s", r, rp, t);
	cleanup_free char *what = xasprintf("tag image %s as %s:%s", ref, repo, tag ? tag : "latest");
	brig_engine_call call = {.method = "POST", .path = path, .what = what};
	return brig_engine__call(e, &call, NULL, NULL, NULL, err);
}

int brig_engine_image_remove(brig_engine *e, const char *ref, bool force, brig_error **err)
{
	cleanup_free char *r = brig_urlencode(ref);
	cleanup_free char *path = brig_engine__path(e, "/images/%s?force=%d", r, force ? 1 : 0);
	cleanup_free char *what = xasprintf("remove image %s", ref);
	return delete_path(e, path, what, err);
}

/* ---- events ---- */

typedef struct events_ctx {
	brig_engine_event_cb cb;
	void *payload;
	brig_jsonl jl;
	int stopped; /* the caller's non-zero return, passed back unchanged */
} events_ctx;

static int events_body(const char *data, size_t len, void *payload)
{
	events_ctx *x = payload;
	return brig_jsonl_feed(&x->jl, data, len);
}

static int events_obj(json_t *obj, void *payload)
{
	events_ctx *x = payload;
	int r = x->cb(obj, x->payload);
	if (r) {
		x->stopped = r;
		return BRIG_ECANCELED; /* a negative code unwinds the parser */
	}
	return 0;
}

int brig_engine_events(brig_engine *e, int64_t since, int64_t until, json_t *filters, int64_t deadline_ms,
		       brig_engine_event_cb cb, void *payload, brig_error **err)
{
	brig_buf q;
	brig_buf_init(&q, SIZE_MAX / 2); /* the caller's own filters: memory is the bound */
	brig_buf_puts(&q, "/events?");
	if (since)
		brig_buf_putf(&q, "since=%lld&", (long long)since);
	if (until)
		brig_buf_putf(&q, "until=%lld&", (long long)until);
	cleanup_free char *f = filters_suffix(filters, ' ');
	if (*f)
		brig_buf_puts(&q, f + 1);
	cleanup_free char *path = brig_engine__path(e, "%s", brig_buf_cstr(&q));
	brig_buf_free(&q);
	events_ctx x = {.cb = cb, .payload = payload};
	brig_jsonl_init(&x.jl, 1u << 20, events_obj, &x, err);
	brig_engine_call call = {.method = "GET",
				 .path = path,
				 .what = "read daemon events",
				 .deadline_ms = deadline_ms ? deadline_ms : brig_now_ms() + 24LL * 3600 * 1000,
				 .body_cb = events_body,
				 .body_payload = &x};
	int rc = brig_engine__call(e, &call, NULL, NULL, NULL, err);
	if (x.stopped) {
		brig__error_clear(err);
		brig_jsonl_free(&x.jl);
		return x.stopped;
	}
	if (rc == BRIG_ETIMEDOUT && deadline_ms) {
		brig__error_clear(err);
		rc = 0; /* the stream ran until the caller's deadline */
	}
	if (rc == 0)
		rc = brig_jsonl_finish(&x.jl);
	brig_jsonl_free(&x.jl);
	return rc;
}
