/* routes.c — the API's one route table (what the server dispatches from,
 * what `brig serve --routes` prints, what docs/openapi.json must match), the
 * steps the endpoints share, and the endpoints of computers, exec,
 * checkpoints, recover, sessions (listed and removed), history, egress
 * rules and the ledger, health, metrics and the OpenAPI document (processes, files, tar
 * and runs: routes_files.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/session.h"
#include "brig/version.h"
#include "ops/fs.h"
#include "ops/ledger.h"
#include "ops/sessions.h"
#include "checkpoint/cas.h"
#include "sandbox/pool.h"
#include "tar/tar.h"
#include "egress/egress_internal.h"
#include "serve/internal.h"
#include "util/util.h"

/* ---- shared steps ---- */

/* The identity in the path, validated. */
bool serve__path_identity(serve_req *r, serve_reply *out, brig_identity *id)
{
	*id = (brig_identity){serve__param(r, "ns"), serve__param(r, "agent"), serve__param(r, "session"), 1};
	brig_error *err = NULL;
	if (brig_identity_validate(id, &err) != 0) {
		serve__reply_error(out, err);
		return false;
	}
	return true;
}

/* The container name of the path's session: its current generation, else
 * (not a session of the store) its first. *name is malloc'd. */
bool serve__path_computer(serve_req *r, serve_reply *out, char **name)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return false;
	brig_error *err = NULL;
	int rc = brig_session_resolve(serve__store(r), name, id.ns, id.agent, id.session, &err);
	if (rc == 0)
		return true;
	if (rc != BRIG_ENOTFOUND) {
		serve__reply_error(out, err);
		return false;
	}
	brig_error_free(err);
	err = NULL;
	char n[BRIG_NAME_SIZE];
	if (brig_identity_name(n, &id, &err) != 0) {
		serve__reply_error(out, err);
		return false;
	}
	*name = xstrdup(n);
	return true;
}

/* A boolean query parameter ("true"/"1"). */
bool serve__query_bool(serve_req *r, const char *name)
{
	const char *v = serve__query(r, name, NULL);
	return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

bool serve__query_i64(serve_req *r, serve_reply *out, const char *name, int64_t min, int64_t max, int64_t *v)
{
	const char *s = serve__query(r, name, NULL);
	if (!s)
		return true;
	char *end;
	long long x = strtoll(s, &end, 10);
	if (!*s || *end || x < min || x > max) {
		serve__reply_fail(out, 400, "invalid", "%s: give an integer from %" PRId64 " to %" PRId64, name, min,
				  max);
		return false;
	}
	*v = x;
	return true;
}

/* ?path=…, checked and made absolute (relative: under /workspace). */
char *serve__query_path(serve_req *r, serve_reply *out, const char *name)
{
	size_t len = 0;
	const char *p = serve__query(r, name, &len);
	brig_error *err = NULL;
	char *abs = NULL;
	if (serve_path_check(p, p ? len : 0, &err) != 0 || !(abs = ops_fs_path(p, &err))) {
		serve__reply_error(out, err);
		return NULL;
	}
	return abs;
}

char *serve__body_path(serve_req *r, serve_reply *out, const char *name)
{
	json_t *v = json_object_get(r->json, name);
	brig_error *err = NULL;
	char *abs = NULL;
	if (!json_is_string(v)) {
		serve__reply_fail(out, 400, "invalid", "%s: give a path", name);
		return NULL;
	}
	if (serve_path_check(json_string_value(v), json_string_length(v), &err) != 0 ||
	    !(abs = ops_fs_path(json_string_value(v), &err))) {
		serve__reply_error(out, err);
		return NULL;
	}
	return abs;
}

/* ---- health, metrics, the document ---- */

static void h_health(serve_req *r, serve_reply *out)
{
	(void)r;
	serve__reply_json(out, 200, json_pack("{s:s,s:s}", "status", "ok", "version", BRIG_VERSION));
}

static void h_openapi(serve_req *r, serve_reply *out)
{
	(void)r;
	const char *doc;
	size_t len;
	serve__openapi(&doc, &len);
	out->status = 200;
	out->type = "application/json";
	out->data = xstrndup(doc, len);
	out->len = len;
}

static void h_metrics(serve_req *r, serve_reply *out)
{
	brig_buf b;
	brig_buf_init(&b, 1 << 20);
	serve__metrics_write(r->srv, &b);
	brig_computer **cs = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	if (brig_computer_list(serve__engine(r), &cs, &n, NULL, NULL, &err) == 0) {
		static const char *const states[] = {"running",    "paused", "exited", "created",
						     "restarting", "dead",   NULL};
		brig_buf_puts(&b, "# HELP brig_computers Computers Docker reports, by state.\n"
				  "# TYPE brig_computers gauge\n");
		for (size_t k = 0; states[k]; k++) {
			size_t c = 0;
			for (size_t i = 0; i < n; i++)
				c += cs[i]->state && strcmp(cs[i]->state, states[k]) == 0;
			brig_buf_putf(&b, "brig_computers{state=\"%s\"} %zu\n", states[k], c);
		}
		brig_computer_free_array(cs, n);
	}
	brig_error_free(err);
	out->status = 200;
	out->type = "text/plain; version=0.0.4";
	out->data = brig_buf_steal(&b, &out->len);
}

/* ---- computers ---- */

static void h_computers_list(serve_req *r, serve_reply *out)
{
	const char *ns = serve__query(r, "ns", NULL);
	const char *label = serve__query(r, "label", NULL);
	if (ns && !serve__allowed(r, ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover this namespace");
		return;
	}
	brig_computer **cs = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	if (brig_computer_list(serve__engine(r), &cs, &n, ns, label, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		if (serve__allowed(r, cs[i]->ns))
			json_array_append_new(arr, brig_computer_to_json(cs[i]));
	brig_computer_free_array(cs, n);
	serve__reply_json(out, 200, json_pack("{s:o}", "computers", arr));
}

/* The session's recorded spec, which a computer made now would get, holds
 * to the server's policy (403 policy otherwise). */
static bool policy_recorded(serve_req *r, serve_reply *out, const brig_identity *id)
{
	brig_error *err = NULL;
	int rc = serve_session_policy(serve__store(r), serve__config(r), id, &err);
	if (rc == 0)
		return true;
	if (rc == BRIG_EDENIED) {
		serve__reply_fail(out, 403, "policy", "%s", brig_error_message(err));
		brig_error_free(err);
	} else {
		serve__reply_error(out, err);
	}
	return false;
}

/* brig create's computer: created or adopted by its name, recorded in no
 * store; 201, or 200 when adopted. */
static void computer_create_free(serve_req *r, serve_reply *out, const brig_identity *id, const brig_spec *spec,
				 json_t *secret_values)
{
	brig_computer *c = NULL;
	brig_error *err = NULL;
	brig_egress__secrets_given(secret_values);
	int rc = brig_computer_create(serve__engine(r), &c, id, spec, &err);
	brig_egress__secrets_given(NULL);
	if (rc) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, c->adopted ? 200 : 201, brig_computer_to_json(c));
	brig_computer_free(c);
}

static void h_computers_create(serve_req *r, serve_reply *out)
{
	json_t *b = r->json;
	const char *key;
	json_t *v;
	json_object_foreach (b, key, v) {
		if (strcmp(key, "ns") && strcmp(key, "agent") && strcmp(key, "session") && strcmp(key, "spec") &&
		    strcmp(key, "fresh") && strcmp(key, "secret_values") && strcmp(key, "record") &&
		    strcmp(key, "generation")) {
			serve__reply_fail(out, 400, "invalid", "unknown field '%.64s'", key);
			return;
		}
	}
	brig_identity id = {json_string_value(json_object_get(b, "ns")), json_string_value(json_object_get(b, "agent")),
			    json_string_value(json_object_get(b, "session")), 1};
	brig_error *err = NULL;
	if (!id.ns || !id.agent || !id.session) {
		serve__reply_fail(out, 400, "invalid", "ns, agent and session are required strings");
		return;
	}
	if (brig_identity_validate(&id, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	if (!serve__allowed(r, id.ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover this namespace");
		return;
	}
	json_t *fresh = json_object_get(b, "fresh");
	json_t *js = json_object_get(b, "spec");
	if ((fresh && !json_is_boolean(fresh)) || (js && !json_is_object(js) && !json_is_null(js))) {
		serve__reply_fail(out, 400, "invalid", "spec must be an object and fresh a boolean");
		return;
	}
	/* record false: brig create's computer, outside the store (any
	 * generation, nothing restored); a session of the store picks its own
	 * generation and may be fresh. */
	json_t *record = json_object_get(b, "record"), *gen = json_object_get(b, "generation");
	bool store_free = json_is_false(record);
	if (record && !json_is_boolean(record)) {
		serve__reply_fail(out, 400, "invalid", "record must be a boolean");
		return;
	}
	if (gen && !store_free) {
		serve__reply_fail(out, 400, "invalid", "generation: only with record false (a session of the store "
						       "picks its own generation)");
		return;
	}
	if (fresh && store_free) {
		serve__reply_fail(out, 400, "invalid", "fresh: only for a session of the store (record true)");
		return;
	}
	if (gen && (!json_is_integer(gen) || json_integer_value(gen) < 1 || json_integer_value(gen) > UINT32_MAX)) {
		serve__reply_fail(out, 400, "invalid", "generation must be a whole number from 1 to %u", UINT32_MAX);
		return;
	}
	if (gen)
		id.generation = (uint32_t)json_integer_value(gen);
	brig_spec spec;
	brig_spec_init(&spec);
	bool use_spec = true;
	const serve_config *cfg = serve__config(r);
	if (json_is_object(js)) {
		json_t *copy = json_deep_copy(js);
		if (!json_object_get(copy, "image") && cfg->image)
			json_object_set_new(copy, "image", json_string(cfg->image));
		brig_spec_clear(&spec); /* from_json overwrites without freeing */
		int rc = brig_spec_from_json(&spec, copy, &err);
		json_decref(copy);
		if (rc == 0 && serve_spec_policy(&spec, cfg, &err) != 0) {
			brig_spec_clear(&spec);
			serve__reply_fail(out, 403, "policy", "%s", brig_error_message(err));
			brig_error_free(err);
			return;
		}
		if (rc) {
			brig_spec_clear(&spec);
			serve__reply_error(out, err);
			return;
		}
	} else {
		/* As brig up without spec flags: an existing session keeps its
		 * recorded spec; a new one gets the defaults. */
		brig_store_session *rec = NULL;
		if (!store_free && brig_store_session_get(serve__store(r), &rec, id.ns, id.agent, id.session, NULL) == 0 &&
		    rec->spec_json)
			use_spec = false;
		brig_store_session_free(rec);
		if (!use_spec && !policy_recorded(r, out, &id)) {
			brig_spec_clear(&spec);
			return;
		}
		if (use_spec && cfg->image && brig_spec_set(&spec, "image", cfg->image, &err) != 0) {
			brig_spec_clear(&spec);
			serve__reply_error(out, err);
			return;
		}
	}
	/* A secret's value comes with the request: the server's own
	 * environment is never read for one (serve_run turns that off), or a
	 * token holder could send it to a host of its choosing. */
	json_t *values = json_object_get(b, "secret_values");
	if (serve_secret_values_check(values, use_spec ? &spec : NULL, &err) != 0) {
		brig_spec_clear(&spec);
		serve__reply_error(out, err);
		return;
	}
	if (store_free) {
		computer_create_free(r, out, &id, &spec, values);
		brig_spec_clear(&spec);
		return;
	}
	brig_up_opts o = BRIG_UP_OPTS_INIT;
	o.fresh = json_is_true(fresh);
	brig_up_result res = {0};
	brig_egress__secrets_given(values);
	int rc = brig_session_open(serve__engine(r), serve__store(r), &res, &id, use_spec ? &spec : NULL, &o, &err);
	brig_egress__secrets_given(NULL);
	brig_spec_clear(&spec);
	if (rc) {
		brig_up_result_clear(&res);
		serve__reply_error(out, err);
		return;
	}
	json_t *j = brig_computer_to_json(res.computer);
	if (res.lost)
		json_object_set_new(j, "lost",
				    json_pack("{s:s,s:I,s:I,s:I}", "why", res.lost, "old_generation",
					      (json_int_t)res.old_generation, "checkpoint_id",
					      (json_int_t)res.checkpoint_id, "checkpoint_created_ms",
					      (json_int_t)res.checkpoint_created_ms));
	if (res.recorded) /* found in Docker, not in the store: recorded and adopted */
		json_object_set_new(j, "recorded", json_true());
	serve__reply_json(out, res.computer->adopted ? 200 : 201, j);
	brig_up_result_clear(&res);
}

static void h_computer_get(serve_req *r, serve_reply *out)
{
	cleanup_free char *name = NULL;
	if (!serve__path_computer(r, out, &name))
		return;
	brig_computer *c = NULL;
	brig_error *err = NULL;
	if (brig_computer_get(serve__engine(r), &c, name, NULL, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 200, brig_computer_to_json(c));
	brig_computer_free(c);
}

/* Tells the store what a lifecycle route did to the session's computer
 * (c: as it was before), as the CLI's verbs do; a store that cannot take
 * it is said in the log (the next create finds out). */
static void mark_store(serve_req *r, const brig_computer *c, brig_store_state state)
{
	if (!c || !c->ns || !c->agent || !c->session || !c->generation)
		return;
	brig_error *err = NULL;
	if (brig_session_mark(serve__store(r), c->ns, c->agent, c->session, c->generation, state, &err) != 0)
		fprintf(stderr, "brig: serve: %s: the session store still has it as it was: %s\n", c->name,
			brig_error_message(err));
	brig_error_free(err);
}

static void lifecycle(serve_req *r, serve_reply *out, int (*fn)(brig_engine *, const char *, brig_error **),
		      brig_store_state state)
{
	cleanup_free char *name = NULL;
	if (!serve__path_computer(r, out, &name))
		return;
	brig_error *err = NULL;
	brig_computer *before = NULL;
	if (brig_computer_get(serve__engine(r), &before, name, NULL, &err) != 0) {
		brig_error_free(err);
		err = NULL;
	}
	bool destroy = fn == brig_computer_destroy;
	if (fn(serve__engine(r), name, &err) != 0) {
		brig_computer_free(before);
		serve__reply_error(out, err);
		return;
	}
	mark_store(r, before, state);
	brig_computer_free(before);
	if (state == BRIG_STORE_DESTROYED)
		serve__guest_forget(r->srv, name);
	if (destroy) {
		out->status = 204;
		return;
	}
	brig_computer *c = NULL;
	if (brig_computer_get(serve__engine(r), &c, name, NULL, &err) != 0) {
		brig_error_free(err);
		serve__reply_json(out, 200, json_pack("{s:s}", "name", name));
		return;
	}
	serve__reply_json(out, 200, brig_computer_to_json(c));
	brig_computer_free(c);
}

static void h_pause(serve_req *r, serve_reply *out)
{
	lifecycle(r, out, brig_computer_pause, BRIG_STORE_PAUSED);
}

static void h_resume(serve_req *r, serve_reply *out)
{
	lifecycle(r, out, brig_computer_resume, BRIG_STORE_RUNNING);
}

static void h_stop(serve_req *r, serve_reply *out)
{
	lifecycle(r, out, brig_computer_stop, BRIG_STORE_DESTROYED);
}

static void h_destroy(serve_req *r, serve_reply *out)
{
	lifecycle(r, out, brig_computer_destroy, BRIG_STORE_DESTROYED);
}

/* ---- exec ---- */

/* The answer of a finished command: a timeout or cancel that brig-init
 * ended (certain, the computer runs on) is a result, not an error. */
static bool exec_result_ok(int rc, const brig_exec_result *res)
{
	return rc == 0 || ((rc == BRIG_ETIMEDOUT || rc == BRIG_ECANCELED) && !res->container_stopped);
}

void serve__exec_opts(brig_exec_opts *o, const serve_exec_req *req)
{
	o->argv = req->argv;
	o->env = req->env;
	o->env_count = req->env_count;
	o->workdir = req->workdir;
	o->stdin_data = req->stdin_data;
	o->stdin_len = req->stdin_len;
	o->timeout_ms = req->timeout_ms;
	o->capture_max = req->capture_max;
}

json_t *serve__error_event(int rc, const brig_error *err)
{
	const char *code;
	serve__status(rc, &code);
	const char *m = brig_error_message(err);
	return json_pack("{s:s,s:s,s:o}", "type", "error", "code", code, "message", ops_string(m, strlen(m)));
}

json_t *serve__exec_end_event(int rc, const brig_exec_result *res, const brig_error *err)
{
	if (!exec_result_ok(rc, res))
		return serve__error_event(rc, err);
	json_t *ev = brig_exec_result_to_json(res);
	json_object_set_new(ev, "type", json_string("exit"));
	return ev;
}

typedef struct exec_stream {
	serve_server *srv;
	brig_engine *e;
	brig_store *s;
	char *name;
	json_t *body; /* keeps the strings of req alive */
	serve_exec_req req;
	int cancel[2];
	int pipe[2]; /* NDJSON lines: the thread writes, the reader reads */
	int client;  /* the connection's socket (polled for the client leaving), or -1 */
	int stop;    /* the server's cancel fd (the drain period is over), until used */
	pthread_t th;
	bool started;
	const char *actor; /* the token's name (the server's tokens outlive the stream) */
} exec_stream;

static int stream_output(int stream, const char *data, size_t len, void *payload)
{
	exec_stream *x = payload;
	json_t *ev = json_pack("{s:s,s:o}", "type", stream == 2 ? "stderr" : "stdout", "data", ops_string(data, len));
	char *line = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	int rc = 0;
	if (line) {
		size_t n = strlen(line);
		line[n] = '\n';
		rc = brig_write_all(x->pipe[1], line, n + 1) ? -1 : 0;
		free(line);
	}
	return rc;
}

static void *exec_thread(void *arg)
{
	exec_stream *x = arg;
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	serve__exec_opts(&o, &x->req);
	o.cancel_fd = x->cancel[0];
	o.on_output = stream_output;
	o.payload = x;
	brig_exec_result res = {0};
	brig_error *err = NULL;
	int64_t t0 = brig_now_ms();
	int rc = brig_session_exec_by(x->e, x->s, x->name, &o, NULL, x->actor, &res, &err);
	serve__exec_observe(x->srv, brig_now_ms() - t0);
	json_t *ev = serve__exec_end_event(rc, &res, err);
	char *line = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	if (line) {
		size_t n = strlen(line);
		line[n] = '\n';
		(void)brig_write_all(x->pipe[1], line, n + 1);
		free(line);
	}
	brig_error_free(err);
	brig_exec_result_clear(&res);
	close(x->pipe[1]);
	x->pipe[1] = -1;
	return NULL;
}

ssize_t serve__pipe_read(int pipe_fd, int client_fd, int stop_fd, char *buf, size_t max)
{
	/* A client that leaves while the pipe is silent is noticed by its
	 * socket's hang-up: the stream ends and its done callback cleans up. */
	struct pollfd p[3] = {{.fd = pipe_fd, .events = POLLIN},
			      {.fd = client_fd, .events = POLLRDHUP},
			      {.fd = stop_fd, .events = POLLIN}};
	for (;;) {
		int n = poll(p, 3, -1); /* negative fds are skipped */
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (p[0].revents)
			break;
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
			return -1;
		if (p[2].revents)
			return -2;
	}
	for (;;) {
		ssize_t n = read(pipe_fd, buf, max);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -1;
	}
}

static ssize_t exec_stream_read(void *payload, char *buf, size_t max)
{
	exec_stream *x = payload;
	ssize_t n = serve__pipe_read(x->pipe[0], x->client, x->stop, buf, max);
	if (n == -2) {
		/* The drain period is over: cancel, and send what the command
		 * ends with (its exit event) before the stream ends. */
		(void)!write(x->cancel[1], "x", 1);
		x->stop = -1;
		n = serve__pipe_read(x->pipe[0], x->client, -1, buf, max);
	}
	return n;
}

static void exec_stream_done(void *payload)
{
	exec_stream *x = payload;
	/* The client may have left mid-command: cancel ends its tree. */
	(void)!write(x->cancel[1], "x", 1);
	close(x->pipe[0]); /* the thread's writes now fail: it stops reading output */
	if (x->started)
		pthread_join(x->th, NULL);
	if (x->pipe[1] >= 0)
		close(x->pipe[1]);
	close(x->cancel[0]);
	close(x->cancel[1]);
	serve_exec_req_clear(&x->req);
	json_decref(x->body);
	free(x->name);
	free(x);
}

bool serve__path_id(serve_req *r, serve_reply *out, const char *why, int64_t *id)
{
	const char *ids = serve__param(r, "id");
	char *end = NULL;
	errno = 0;
	long long v = ids && *ids >= '1' && *ids <= '9' ? strtoll(ids, &end, 10) : 0;
	if (!end || *end || errno) {
		serve__reply_fail(out, 400, "invalid", "%s", why);
		return false;
	}
	*id = v;
	return true;
}

bool serve__exec_req(serve_req *r, serve_reply *out, serve_exec_req *req)
{
	brig_error *err = NULL;
	if (serve_exec_req_parse(req, r->json, &err) == 0)
		return true;
	serve__reply_error(out, err);
	return false;
}

static void h_exec(serve_req *r, serve_reply *out)
{
	cleanup_free char *name = NULL;
	if (!serve__path_computer(r, out, &name))
		return;
	serve_exec_req req;
	if (!serve__exec_req(r, out, &req))
		return;
	brig_error *err = NULL;
	if (serve__query_bool(r, "stream")) {
		exec_stream *x = xcalloc(1, sizeof *x);
		x->srv = r->srv;
		x->e = serve__engine(r);
		x->s = serve__store(r);
		x->name = steal_pointer(&name);
		x->body = json_incref(r->json);
		x->req = req;
		x->pipe[1] = -1;
		x->client = serve__client_fd(r);
		x->stop = serve__cancel_fd(r);
		x->actor = serve_tokens_name(r->token);
		x->cancel[0] = x->cancel[1] = -1;
		if (pipe2(x->cancel, O_CLOEXEC) != 0 || pipe2(x->pipe, O_CLOEXEC) != 0) {
			serve__reply_fail(out, 500, "io", "pipe: %s", strerror(errno));
			if (x->cancel[0] >= 0) {
				close(x->cancel[0]);
				close(x->cancel[1]);
			}
			serve_exec_req_clear(&x->req);
			json_decref(x->body);
			free(x->name);
			free(x);
			return;
		}
		x->started = pthread_create(&x->th, NULL, exec_thread, x) == 0;
		if (!x->started) {
			close(x->pipe[1]);
			x->pipe[1] = -1;
		}
		out->status = 200;
		out->read = exec_stream_read;
		out->done = exec_stream_done;
		out->payload = x;
		return;
	}
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	serve__exec_opts(&o, &req);
	o.cancel_fd = serve__cancel_fd(r); /* the drain period is over */
	brig_exec_result res = {0};
	int64_t t0 = brig_now_ms();
	int rc = brig_session_exec_by(serve__engine(r), serve__store(r), name, &o, NULL, serve_tokens_name(r->token),
				      &res, &err);
	serve__exec_observe(r->srv, brig_now_ms() - t0);
	serve_exec_req_clear(&req);
	if (exec_result_ok(rc, &res)) {
		brig_error_free(err);
		serve__reply_json(out, 200, brig_exec_result_to_json(&res));
	} else {
		if (res.container_stopped)
			serve__guest_forget(r->srv, name);
		serve__reply_error(out, err);
	}
	brig_exec_result_clear(&res);
}

/* ---- checkpoints, recover ---- */

/* The blob goes by its name in the server's checkpoint directory (its
 * digest and a suffix, as `brig checkpoints --json` shows it); one a
 * writer recorded as a path is left out: the server's files stay its own. */
static json_t *checkpoint_json(const brig_store_checkpoint *c)
{
	const char *blob = c->blob && *c->blob && !strchr(c->blob, '/') ? c->blob : NULL;
	json_t *j =
		json_pack("{s:I,s:I,s:s,s:I,s:I,s:I}", "id", (json_int_t)c->id, "generation", (json_int_t)c->generation,
			  "digest", c->digest ? c->digest : "", "bytes_raw", (json_int_t)c->bytes_raw, "bytes_stored",
			  (json_int_t)c->bytes_stored, "created_ms", (json_int_t)c->created_ms);
	if (blob)
		json_object_set_new(j, "blob", json_string(blob));
	return j;
}

static void h_checkpoint_create(serve_req *r, serve_reply *out)
{
	cleanup_free char *name = NULL;
	if (!serve__path_computer(r, out, &name))
		return;
	/* {"keep": N}: then only the session's newest N checkpoints stay (brig checkpoint --keep) */
	json_t *keep = json_object_get(r->json, "keep");
	if (keep && (!json_is_integer(keep) || json_integer_value(keep) < 1 || json_integer_value(keep) > 1000000)) {
		serve__reply_fail(out, 400, "invalid",
				  "keep: give how many of the session's newest checkpoints stay, 1 to 1000000");
		return;
	}
	brig_checkpoint_opts opts = {.version = BRIG_CHECKPOINT_OPTS_VERSION,
				     .keep = keep ? (size_t)json_integer_value(keep) : 0};
	brig_store_checkpoint *cp = NULL;
	brig_error *err = NULL;
	if (brig_checkpoint_create(serve__engine(r), serve__store(r), &cp, name, &opts, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 201, checkpoint_json(cp));
	brig_store_checkpoint_free(cp);
}

/* The checkpoint of the path's {id} (brig checkpoint rm and export name
 * one by its id alone) into *cp, when of a namespace the token covers;
 * else answered: 400, or 404 as one that does not exist (another's, and
 * without the store's own words, which would name its URL). */
static bool checkpoint_of_path(serve_req *r, serve_reply *out, brig_store_checkpoint **cp)
{
	*cp = NULL;
	int64_t cid = 0;
	if (!serve__path_id(r, out, "id: give a checkpoint id (from 1)", &cid))
		return false;
	brig_error *err = NULL;
	int rc = brig_store_checkpoint_get(serve__store(r), cp, cid, &err);
	if (rc == 0 && serve_tokens_allows(r->token, (*cp)->ns))
		return true;
	brig_store_checkpoint_free(*cp);
	*cp = NULL;
	if (rc == 0 || rc == BRIG_ENOTFOUND)
		brig__error_set(&err, BRIG_ENOTFOUND, 0, "checkpoint %lld not found in the brig server's store",
				(long long)cid);
	serve__reply_error(out, err);
	return false;
}

static void h_checkpoint_remove(serve_req *r, serve_reply *out)
{
	brig_store_checkpoint *cp = NULL;
	if (!checkpoint_of_path(r, out, &cp))
		return;
	brig_error *err = NULL;
	int rc = brig_checkpoint_remove(serve__store(r), NULL, cp->id, &err);
	if (rc == BRIG_ENOTFOUND) /* removed since */
		brig__error_set(&err, rc, 0, "checkpoint %lld not found in the brig server's store", (long long)cp->id);
	brig_store_checkpoint_free(cp);
	if (rc) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

static void h_checkpoint_list(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return;
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	if (brig_store_checkpoint_list(serve__store(r), &cps, &n, id.ns, id.agent, id.session, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, checkpoint_json(&cps[i]));
	brig_store_checkpoint_free_array(cps, n);
	serve__reply_json(out, 200, json_pack("{s:o}", "checkpoints", arr));
}

/* The checkpoint's blob (zstd-compressed tar, as brig stores it), with its
 * SHA-256 in X-Brig-Digest. Only a checkpoint of the path's session. */
/* Checkpoint cid as brig checkpoint export writes it (an archive of an
 * incremental checkpoint's session, manifest and file blobs; a full-copy
 * one as its blob), every digest checked first, spooled to an unnamed file
 * beside the checkpoints so its length and SHA-256 (X-Brig-Digest) go
 * before it. cp: its record, found to be the caller's. */
static void checkpoint_export_reply(serve_req *r, serve_reply *out, const brig_store_checkpoint *cp)
{
	brig_error *err = NULL;
	cleanup_free char *dir = NULL;
	long long cid = (long long)cp->id;
	int rc = strchr(cp->blob, '/') /* a record naming a file elsewhere is not read */
			 ? brig__error_set(&err, BRIG_ECORRUPT, 0, "checkpoint %lld: its record names no blob", cid)
			 : brig_checkpoint_dir(&dir, serve__store(r), &err);
	int fd = -1;
	if (rc == 0 && (fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
		rc = brig__error_set(&err, BRIG_EIO, errno, "checkpoint %lld: cannot spool its export in %s: %s", cid,
				     dir, strerror(errno));
	if (rc == 0)
		rc = brig_checkpoint_export(serve__store(r), dir, cp->id, fd, &err);
	static __thread char digest[80];
	char hex[65];
	uint64_t size = 0;
	if (rc == 0 && lseek(fd, 0, SEEK_SET) == 0 && (rc = brig_tar_sha256_fd(fd, hex, &size, &err)) == 0 &&
	    lseek(fd, 0, SEEK_SET) != 0)
		rc = brig__error_set(&err, BRIG_EIO, errno, "checkpoint %lld: %s", cid, strerror(errno));
	if (rc) {
		if (fd >= 0)
			close(fd);
		serve__reply_error(out, err);
		return;
	}
	snprintf(digest, sizeof digest, "sha256:%s", hex);
	out->status = 200;
	out->has_fd = true;
	out->fd = fd;
	out->fd_size = size;
	out->type = "application/octet-stream";
	out->extra_header = "X-Brig-Digest";
	out->extra_value = digest;
}

static void h_checkpoint_export(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return;
	int64_t cid = 0;
	if (!serve__path_id(r, out, "a checkpoint id is a positive integer", &cid))
		return;
	brig_store_checkpoint *cp = NULL;
	brig_error *err = NULL;
	int rc = brig_store_checkpoint_get(serve__store(r), &cp, cid, &err);
	if (rc == 0 && (strcmp(cp->ns, id.ns) || strcmp(cp->agent, id.agent) || strcmp(cp->session, id.session)))
		/* Another session's: as absent, so nothing is learnt of it. */
		rc = brig__error_set(&err, BRIG_ENOTFOUND, 0, "no checkpoint %lld in this session", (long long)cid);
	if (rc)
		serve__reply_error(out, err);
	else
		checkpoint_export_reply(r, out, cp);
	brig_store_checkpoint_free(cp);
}

/* GET /v1/checkpoints/{id}/export: by id alone, as brig checkpoint export
 * names it. */
static void h_checkpoint_export_id(serve_req *r, serve_reply *out)
{
	brig_store_checkpoint *cp = NULL;
	if (checkpoint_of_path(r, out, &cp))
		checkpoint_export_reply(r, out, cp);
	brig_store_checkpoint_free(cp);
}

/* The body (an export archive, or a checkpoint blob) imported into the
 * session ns/agent/session, or for an archive with ns NULL into its own. */
static void checkpoint_import_body(serve_req *r, serve_reply *out, const char *ns, const char *agent,
				   const char *session)
{
	brig_error *err = NULL;
	int fd = serve__body_fd(r); /* the server's: it closes it */
	if (fd < 0) {
		serve__reply_fail(out, 500, "io", "cannot read the body back: %s", strerror(errno));
		return;
	}
	brig_store_checkpoint *cp = NULL;
	int rc = brig_checkpoint_import(serve__store(r), &cp, ns, agent, session, fd, NULL, &err);
	if (rc == BRIG_EPROTO || rc == BRIG_EINVAL) {
		/* The client's bytes, not a peer's: a bad request. */
		serve__reply_fail(out, 400, "invalid", "%s", brig_error_message(err));
		brig_error_free(err);
		return;
	}
	if (rc) {
		serve__reply_error(out, err);
		return;
	}
	json_t *j = checkpoint_json(cp);
	/* whose: an archive may have named its own session */
	json_object_set_new(j, "ns", json_string(cp->ns));
	json_object_set_new(j, "agent", json_string(cp->agent));
	json_object_set_new(j, "session", json_string(cp->session));
	serve__reply_json(out, 201, j);
	brig_store_checkpoint_free(cp);
}

/* A blob or archive (as export sends them) in the body becomes the
 * session's newest checkpoint; recover then restores it. */
static void h_checkpoint_import(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (serve__path_identity(r, out, &id))
		checkpoint_import_body(r, out, id.ns, id.agent, id.session);
}

/* POST /v1/checkpoints/import[?ns&agent&session], as brig checkpoint
 * import takes it: without a session, an archive joins its own, whose
 * namespace the token must cover, known before anything is imported. */
static void h_checkpoint_import_any(serve_req *r, serve_reply *out)
{
	brig_identity id = {serve__query(r, "ns", NULL), serve__query(r, "agent", NULL),
			    serve__query(r, "session", NULL), 1};
	brig_error *err = NULL;
	cleanup_free char *ans = NULL, *aagent = NULL, *asession = NULL;
	if (id.ns || id.agent || id.session) {
		if (brig_identity_validate(&id, &err) != 0) {
			serve__reply_error(out, err);
			return;
		}
	} else {
		int fd = serve__body_fd(r);
		int rc = fd < 0 ? brig__error_set(&err, BRIG_EIO, errno, "cannot read the body back: %s", strerror(errno))
				: brig_checkpoint__archive_session(fd, &ans, &aagent, &asession, &err);
		if (rc || !ans) {
			serve__reply_fail(out, 400, "invalid", "%s",
					  rc ? brig_error_message(err)
					     : "checkpoint import: not an export archive (brig checkpoint export); a "
					       "checkpoint blob needs ns, agent and session");
			brig_error_free(err);
			return;
		}
		id.ns = ans;
	}
	if (!serve__allowed(r, id.ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover namespace %.63s", id.ns);
		return;
	}
	if (ans)
		checkpoint_import_body(r, out, NULL, NULL, NULL);
	else
		checkpoint_import_body(r, out, id.ns, id.agent, id.session);
}

static void h_recover(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return;
	cleanup_free char *old = NULL;
	brig_error *err = NULL;
	if (brig_session_resolve(serve__store(r), &old, id.ns, id.agent, id.session, &err) != 0) {
		brig_error_free(err);
		err = NULL;
	}
	const char *key;
	json_t *v;
	json_object_foreach (r->json, key, v)
		if (strcmp(key, "secret_values") && strcmp(key, "checkpoint_id")) {
			serve__reply_fail(out, 400, "invalid", "unknown field '%.64s'", key);
			return;
		}
	/* {"checkpoint_id": N}: that checkpoint of the session rather than the
	 * latest (brig recover --checkpoint) */
	json_t *cpv = json_object_get(r->json, "checkpoint_id");
	if (cpv && (!json_is_integer(cpv) || json_integer_value(cpv) < 1)) {
		serve__reply_fail(out, 400, "invalid", "checkpoint_id: give one of the session's checkpoint ids (from 1)");
		return;
	}
	/* Another namespace's checkpoint is one this token never sees: the
	 * library's refusal would name its session. */
	brig_store_checkpoint *cp = NULL;
	if (cpv && brig_store_checkpoint_get(serve__store(r), &cp, json_integer_value(cpv), NULL) == 0 &&
	    !serve_tokens_allows(r->token, cp->ns)) {
		brig_store_checkpoint_free(cp);
		serve__reply_fail(out, 404, "not_found",
				  "recover %s/%s/%s: no checkpoint %lld in the store (brig checkpoints lists the "
				  "session's); nothing was changed",
				  id.ns, id.agent, id.session, (long long)json_integer_value(cpv));
		return;
	}
	brig_store_checkpoint_free(cp);
	if (!policy_recorded(r, out, &id))
		return;
	/* the recorded spec's secrets need their values again (as create) */
	json_t *values = json_object_get(r->json, "secret_values");
	if (serve_secret_values_check(values, NULL, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	brig_recover_result res = {0};
	brig_egress__secrets_given(values);
	int rc = brig_session_recover_at(serve__engine(r), serve__store(r), &res, id.ns, id.agent, id.session, NULL,
					 cpv ? (int64_t)json_integer_value(cpv) : 0, &err);
	brig_egress__secrets_given(NULL);
	if (rc != 0) {
		serve__reply_error(out, err);
		return;
	}
	if (old)
		serve__guest_forget(r->srv, old);
	serve__reply_json(out, 200,
			  json_pack("{s:o,s:I,s:I,s:I,s:b}", "computer", brig_computer_to_json(res.computer),
				    "old_generation", (json_int_t)res.old_generation, "new_generation",
				    (json_int_t)res.new_generation, "checkpoint_id", (json_int_t)res.checkpoint_id,
				    "won", res.won));
	brig_recover_result_clear(&res);
}

/* ---- sessions and history (the store) ---- */

static json_t *session_json(const brig_store_session *x)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:s,s:s?,s:s?,s:I,s:I,s:I}", "ns", x->ns, "agent", x->agent, "session",
			      x->session, "generation", (json_int_t)x->generation, "state",
			      brig_store_state_to_string(x->state), "container", x->container_name, "container_id",
			      x->container_id, "revision", (json_int_t)x->revision, "created_ms",
			      (json_int_t)x->created_ms, "updated_ms", (json_int_t)x->updated_ms);
	json_error_t je;
	json_t *spec = x->spec_json ? json_loads(x->spec_json, 0, &je) : NULL;
	if (json_is_object(spec)) {
		/* Env values stay in the store: keys only, as brig_spec_to_json. */
		json_t *env = json_object_get(spec, "env"), *keys = json_array();
		size_t i;
		json_t *e;
		json_array_foreach (env, i, e) {
			const char *t = json_string_value(e);
			const char *eq = t ? strchr(t, '=') : NULL;
			if (t)
				json_array_append_new(keys, json_stringn(t, eq ? (size_t)(eq - t) : strlen(t)));
		}
		json_object_set_new(spec, "env", keys);
		json_object_set_new(j, "spec", spec);
	} else {
		json_decref(spec);
	}
	return j;
}

/* ?computers=true: as `brig sessions ls`, each session with what Docker
 * says of its computer (computer_state) and the store put right when it
 * lost its files (fixed: was, now, and error when the store refused), so
 * the CLI through a server prints the same rows and notes. Sessions of
 * other namespaces are neither shown nor touched. Always: forgotten, the
 * identities whose record was removed and whose checkpoints stay. */
static void h_sessions(serve_req *r, serve_reply *out)
{
	const char *ns = serve__query(r, "ns", NULL);
	if (ns && !serve__allowed(r, ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover this namespace");
		return;
	}
	bool computers = serve__query_bool(r, "computers");
	brig_store_session *v = NULL;
	brig_store_checkpoint *ck = NULL;
	size_t n = 0, nk = 0;
	brig_error *err = NULL;
	if (brig_store_session_list(serve__store(r), &v, &n, ns, &err) != 0 ||
	    brig_store_checkpoint_unowned(serve__store(r), &ck, &nk, ns, &err) != 0) {
		brig_store_session_free_array(v, n);
		serve__reply_error(out, err);
		return;
	}
	json_t *arr = json_array(), *gone = json_array();
	for (size_t i = 0; i < n; i++) {
		if (!serve__allowed(r, v[i].ns))
			continue;
		if (!computers) {
			json_array_append_new(arr, session_json(&v[i]));
			continue;
		}
		ops_session_seen seen;
		int rc = ops_session_observe(serve__engine(r), serve__store(r), &v[i], &seen, &err);
		json_t *j = session_json(&v[i]);
		json_object_set_new(j, "computer_state", json_string(seen.computer));
		if (seen.fixed) {
			json_t *f = json_pack("{s:s,s:s}", "was", brig_store_state_to_string(seen.was), "now",
					      brig_store_state_to_string(seen.now));
			if (rc)
				json_object_set_new(f, "error", json_string(brig_error_message(err)));
			json_object_set_new(j, "fixed", f);
		}
		brig_error_free(err);
		err = NULL;
		json_array_append_new(arr, j);
	}
	for (size_t i = 0; i < nk; i++)
		if (serve__allowed(r, ck[i].ns))
			json_array_append_new(
				gone, json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "ns", ck[i].ns, "agent", ck[i].agent,
						"session", ck[i].session, "generation", (json_int_t)ck[i].generation,
						"checkpoints", (json_int_t)ck[i].count, "latest_checkpoint",
						(json_int_t)ck[i].id, "updated_ms", (json_int_t)ck[i].created_ms));
	brig_store_checkpoint_free_array(ck, nk);
	brig_store_session_free_array(v, n);
	serve__reply_json(out, 200, json_pack("{s:o,s:o}", "sessions", arr, "forgotten", gone));
}

typedef struct session_rm {
	serve_req *r;
	json_t *destroyed;
} session_rm;

static void session_rm_destroyed(const char *name, uint32_t generation, void *payload)
{
	session_rm *x = payload;
	serve__guest_forget(x->r->srv, name);
	json_array_append_new(x->destroyed, json_pack("{s:s,s:I}", "name", name, "generation", (json_int_t)generation));
}

/* As `brig sessions rm` (ops_session_remove): 409 while the session has a
 * computer, unless ?force=true destroys them first; ?checkpoints=true
 * removes its checkpoints too. The answer says what was done, so the CLI
 * through a server prints the same notes. */
static void h_session_remove(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return;
	brig_store_session *rec = NULL;
	brig_error *err = NULL;
	int rc = brig_store_session_get(serve__store(r), &rec, id.ns, id.agent, id.session, &err);
	if (rc == BRIG_ENOTFOUND) /* the store's words name its URL: not the client's business */
		brig__error_set(&err, rc, 0, "session %s/%s/%s not found in the brig server's store", id.ns, id.agent,
				id.session);
	if (rc != 0) {
		serve__reply_error(out, err);
		return;
	}
	session_rm x = {r, json_array()};
	ops_session_removed d;
	rc = ops_session_remove(serve__engine(r), serve__store(r), rec, serve__query_bool(r, "force"),
				serve__query_bool(r, "checkpoints"), session_rm_destroyed, &x, &d, &err);
	brig_store_session_free(rec);
	if (rc != 0) {
		json_decref(x.destroyed);
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 200,
			  json_pack("{s:s,s:s,s:s,s:o,s:I,s:I}", "ns", id.ns, "agent", id.agent, "session", id.session,
				    "destroyed", x.destroyed, "checkpoints_removed", (json_int_t)d.removed,
				    "checkpoints_kept", (json_int_t)d.kept));
}

static void h_history(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return;
	int64_t limit = 100; /* 0: all, as `brig history` without --limit */
	if (!serve__query_i64(r, out, "limit", 0, 10000, &limit))
		return;
	brig_store_audit *v = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	if (brig_store_audit_list(serve__store(r), &v, &n, id.ns, id.agent, id.session, (size_t)limit, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_error_t je;
		json_t *argv = v[i].argv_json ? json_loads(v[i].argv_json, 0, &je) : NULL;
		json_array_append_new(
			arr, json_pack("{s:I,s:I,s:o,s:i,s:b,s:s,s:I,s:I,s:I,s:I,s:s?}", "id", (json_int_t)v[i].id,
				       "generation", (json_int_t)v[i].generation, "argv", argv ? argv : json_array(),
				       "exit_code", v[i].exit_code, "timed_out", v[i].timed_out, "outcome",
				       v[i].outcome ? v[i].outcome : "", "duration_ms", (json_int_t)v[i].duration_ms,
				       "stdout_bytes", (json_int_t)v[i].stdout_bytes, "stderr_bytes",
				       (json_int_t)v[i].stderr_bytes, "created_ms", (json_int_t)v[i].created_ms,
				       "actor", v[i].actor));
	}
	brig_store_audit_free_array(v, n);
	serve__reply_json(out, 200, json_pack("{s:o}", "history", arr));
}

/* ---- the event stream ---- */

typedef struct event_stream {
	brig_engine *e;
	const void *token; /* the request's tokens entry (the server's: outlives the stream) */
	char *ns;          /* ?ns=, or NULL */
	int pipe[2];
	int client;
	int drain; /* the server's drain fd */
	pthread_t th;
	bool started;
	volatile int stop; /* set by done: the thread ends within a second */
	int64_t since_ms;  /* ?since_ms=: events from then (0: from now) */
	int64_t last_nano; /* the newest event sent (re-subscribing overlaps by a second) */
} event_stream;

static int event_cb(json_t *ev, void *payload)
{
	event_stream *x = payload;
	if (x->stop)
		return 1;
	json_int_t nano = json_integer_value(json_object_get(ev, "timeNano"));
	if (nano && (nano <= x->last_nano || nano / 1000000 < x->since_ms))
		return 0;
	x->last_nano = nano;
	json_t *attrs = json_object_get(json_object_get(ev, "Actor"), "Attributes");
	/* A warm pool member: nobody's until claimed, then its identity is
	 * filled as list and inspect fill it (sandbox/pool.h). */
	if (brig_sandbox__pool_fill(x->e, attrs, json_string_value(json_object_get(json_object_get(ev, "Actor"), "ID")),
				    json_string_value(json_object_get(attrs, "name")), NULL))
		return 0;
	const char *ns = json_string_value(json_object_get(attrs, BRIG_LABEL_NS));
	if (!ns || !serve_tokens_allows(x->token, ns) || (x->ns && strcmp(x->ns, ns) != 0))
		return 0;
	const char *action = json_string_value(json_object_get(ev, "Action"));
	const char *gen = json_string_value(json_object_get(attrs, BRIG_LABEL_GENERATION));
	json_t *o = json_pack("{s:s,s:s,s:s?,s:s,s:s?,s:s?,s:I,s:I}", "type", "computer", "action",
			      action ? action : "", "name", json_string_value(json_object_get(attrs, "name")), "ns", ns,
			      "agent", json_string_value(json_object_get(attrs, BRIG_LABEL_AGENT)), "session",
			      json_string_value(json_object_get(attrs, BRIG_LABEL_SESSION)), "generation",
			      (json_int_t)(gen ? strtoll(gen, NULL, 10) : 0), "time_ms", (json_int_t)(nano / 1000000));
	char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	int rc = 0;
	if (line) {
		size_t n = strlen(line);
		line[n] = '\n';
		rc = brig_write_all(x->pipe[1], line, n + 1) ? 1 : 0;
		free(line);
	}
	return rc;
}

static void *event_thread(void *arg)
{
	event_stream *x = arg;
	/* Lifecycle changes only: not exec_*, not archive copies. */
	json_t *filters = json_pack("{s:[s],s:[s,s],s:[s,s,s,s,s,s,s,s,s,s,s]}", "type", "container", "label",
				    BRIG_LABEL_MANAGED "=1", BRIG_LABEL_KIND "=computer", "event", "create", "start",
				    "pause", "unpause", "stop", "kill", "die", "destroy", "restart", "oom",
				    "rename" /* a warm pool member claimed */);
	int64_t since = brig_wall_s();
	if (x->since_ms && x->since_ms / 1000 < since)
		since = x->since_ms / 1000; /* a later one (a client's clock ahead) is the filter's */
	while (!x->stop) {
		/* One second at a time, so a client that left is noticed. */
		brig_error *err = NULL;
		int64_t started = brig_wall_s();
		int rc = brig_engine_events(x->e, since, 0, filters, brig_now_ms() + 1000, event_cb, x, &err);
		brig_error_free(err);
		if (rc > 0)
			break; /* the reader is gone */
		if (rc < 0) {
			const char *code;
			serve__status(rc, &code);
			char *line = xasprintf("{\"type\":\"error\",\"code\":\"%s\"}\n", code);
			(void)brig_write_all(x->pipe[1], line, strlen(line));
			free(line);
			break;
		}
		since = started;
	}
	json_decref(filters);
	close(x->pipe[1]);
	x->pipe[1] = -1;
	return NULL;
}

static ssize_t event_stream_read(void *payload, char *buf, size_t max)
{
	event_stream *x = payload;
	ssize_t n = serve__pipe_read(x->pipe[0], x->client, x->drain, buf, max);
	return n == -2 ? 0 : n; /* the server drains: the stream ends whole */
}

static void event_stream_done(void *payload)
{
	event_stream *x = payload;
	x->stop = 1;
	close(x->pipe[0]);
	if (x->started)
		pthread_join(x->th, NULL);
	if (x->pipe[1] >= 0)
		close(x->pipe[1]);
	free(x->ns);
	free(x);
}

static void h_events(serve_req *r, serve_reply *out)
{
	const char *ns = serve__query(r, "ns", NULL);
	if (ns && !serve__allowed(r, ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover this namespace");
		return;
	}
	/* A client that reconnects, or one that must not miss what it does
	 * right after asking, says from when (the daemon keeps its recent
	 * events; from a day back at most, to five minutes ahead for a
	 * client whose clock runs ahead). */
	int64_t now_ms = brig_wall_ms(), since_ms = 0;
	if (!serve__query_i64(r, out, "since_ms", now_ms - 86400000, now_ms + 300000, &since_ms))
		return;
	event_stream *x = xcalloc(1, sizeof *x);
	x->since_ms = since_ms;
	x->e = serve__engine(r);
	x->token = r->token;
	x->ns = ns ? xstrdup(ns) : NULL;
	x->client = serve__client_fd(r);
	x->drain = serve__drain_fd(r);
	if (pipe2(x->pipe, O_CLOEXEC) != 0) {
		serve__reply_fail(out, 500, "io", "pipe: %s", strerror(errno));
		free(x->ns);
		free(x);
		return;
	}
	x->started = pthread_create(&x->th, NULL, event_thread, x) == 0;
	if (!x->started) {
		close(x->pipe[1]);
		x->pipe[1] = -1;
	}
	out->status = 200;
	out->read = event_stream_read;
	out->done = event_stream_done;
	out->payload = x;
}

/* ---- egress rules ---- */

/* The container name of the path's computer, which must be of network
 * egress (verb: "egress" or "egress ls", as the CLI words it). */
static bool egress_computer(serve_req *r, serve_reply *out, const char *verb, char **name)
{
	if (!serve__path_computer(r, out, name))
		return false;
	brig_computer *c = NULL;
	brig_error *err = NULL;
	if (brig_computer_get(serve__engine(r), &c, *name, NULL, &err) != 0) {
		serve__reply_error(out, err);
		return false;
	}
	bool egress = c->network && strcmp(c->network, "egress") == 0;
	brig_computer_free(c);
	if (egress)
		return true;
	bool ls = strcmp(verb, "egress ls") == 0;
	brig__error_set(&err, BRIG_ECONFLICT, 0, "%s %s: the computer is not of network egress%s", verb, *name,
			ls ? "" : "; its network cannot be filtered by host (create it with --network egress)");
	serve__reply_error(out, err);
	return false;
}

static void egress_reply(serve_reply *out, const char *name)
{
	char **rules = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	if (brig_egress_rules_get(&rules, &n, name, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(rules[i]));
	brig_egress_rules_free(rules);
	serve__reply_json(out, 200, json_pack("{s:s, s:o}", "name", name, "allow", a));
}

static void h_egress_get(serve_req *r, serve_reply *out)
{
	cleanup_free char *name = NULL;
	if (egress_computer(r, out, "egress ls", &name))
		egress_reply(out, name);
}

/* allow/deny {"rule": "host[:port]"}: the rule is checked by the parser
 * brig_egress_update uses, so a bad one names the field. */
static void egress_change(serve_req *r, serve_reply *out, bool allow)
{
	json_t *v = json_object_get(r->json, "rule");
	brig_error *err = NULL;
	char canon[BRIG_EGRESS_RULE_SIZE];
	if (!json_is_string(v)) {
		serve__reply_fail(out, 400, "invalid",
				  "rule: give a host (api.example.com) or *.domain, optionally :PORT");
		return;
	}
	int rc = brig_egress_rule_parse(canon, json_string_value(v), &err);
	if (rc != 0) {
		brig__error_prefix(&err, rc, "rule");
		serve__reply_error(out, err);
		return;
	}
	cleanup_free char *name = NULL;
	if (!egress_computer(r, out, "egress", &name))
		return;
	if (brig_egress_update(serve__engine(r), name, canon, allow, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	egress_reply(out, name);
}

static void h_egress_allow(serve_req *r, serve_reply *out)
{
	egress_change(r, out, true);
}

static void h_egress_deny(serve_req *r, serve_reply *out)
{
	egress_change(r, out, false);
}

/* ---- the egress ledger ---- */

/* ?name=CONTAINER (a computer, gone or not), or ?ns&agent&session (every
 * generation of the session), as `brig egress log` takes them; newest
 * first, at most ?limit (0: all, up to 10000 as at most). By name, only rows of sessions the token
 * covers: a run's rows (no session) only for a token of every namespace. */
static void h_egress_log(serve_req *r, serve_reply *out)
{
	const char *name = serve__query(r, "name", NULL);
	brig_identity id = {serve__query(r, "ns", NULL), serve__query(r, "agent", NULL),
			    serve__query(r, "session", NULL), 1};
	bool by_session = id.ns || id.agent || id.session;
	if (!!name == by_session) {
		serve__reply_fail(out, 400, "invalid",
				  "give name (a computer's container name), or ns, agent and session");
		return;
	}
	brig_error *err = NULL;
	if (by_session && brig_identity_validate(&id, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	if (name && (!*name || strlen(name) >= BRIG_NAME_SIZE)) {
		serve__reply_fail(out, 400, "invalid", "name: a computer's container name, 1-%d bytes",
				  BRIG_NAME_SIZE - 1);
		return;
	}
	if (by_session && !serve__allowed(r, id.ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover this namespace");
		return;
	}
	int64_t limit = 100;
	if (!serve__query_i64(r, out, "limit", 0, 10000, &limit))
		return;
	if (limit == 0)
		limit = 10000; /* "all", within what one answer carries */
	brig_store_egress *rows = NULL;
	size_t n = 0;
	if (brig_store_egress_list(serve__store(r), &rows, &n, name, id.ns, id.agent, id.session, (size_t)limit,
				   &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		if (rows[i].ns ? serve__allowed(r, rows[i].ns) : serve__all_ns(r))
			json_array_append_new(a, ops_ledger_row_json(&rows[i]));
	brig_store_egress_free_array(rows, n);
	serve__reply_json(out, 200, json_pack("{s:o}", "ledger", a));
}

/* ---- the table ---- */

#define C "/v1/computers/{ns}/{agent}/{session}"

const serve_route serve__routes[] = {
	{"GET", "/v1/health", h_health, ROUTE_PUBLIC},
	{"GET", "/v1/openapi.json", h_openapi, ROUTE_PUBLIC},
	{"GET", "/metrics", h_metrics, ROUTE_ALL_NS},
	{"GET", "/v1/computers", h_computers_list, 0},
	{"POST", "/v1/computers", h_computers_create, 0},
	{"POST", "/v1/runs", serve__h_runs, ROUTE_HEAVY},
	{"POST", "/v1/runs/attach", serve__h_runs_attach, ROUTE_STREAM},
	{"GET", "/v1/sessions", h_sessions, 0},
	{"DELETE", "/v1/checkpoints/{id}", h_checkpoint_remove, 0},
	{"GET", "/v1/checkpoints/{id}/export", h_checkpoint_export_id, 0},
	{"POST", "/v1/checkpoints/import", h_checkpoint_import_any, ROUTE_RAW_BODY | ROUTE_SPOOL},
	{"DELETE", "/v1/sessions/{ns}/{agent}/{session}", h_session_remove, 0},
	{"GET", "/v1/events", h_events, 0},
	{"GET", "/v1/egress/log", h_egress_log, 0},
	{"GET", C, h_computer_get, 0},
	{"DELETE", C, h_destroy, 0},
	{"POST", C "/pause", h_pause, 0},
	{"POST", C "/resume", h_resume, 0},
	{"POST", C "/stop", h_stop, 0},
	{"POST", C "/exec", h_exec, 0},
	{"POST", C "/processes", serve__h_procs_start, 0},
	{"GET", C "/processes", serve__h_procs_list, 0},
	{"GET", C "/processes/{id}", serve__h_procs_get, 0},
	{"POST", C "/processes/{id}/input", serve__h_procs_input, 0},
	{"POST", C "/processes/{id}/kill", serve__h_procs_kill, 0},
	{"POST", C "/processes/{id}/attach", serve__h_procs_attach, ROUTE_STREAM},
	{"GET", C "/files", serve__h_file_read, 0},
	{"PUT", C "/files", serve__h_file_write, ROUTE_RAW_BODY},
	{"DELETE", C "/files", serve__h_file_remove, 0},
	{"GET", C "/files/list", serve__h_file_list, 0},
	{"GET", C "/files/stat", serve__h_file_stat, 0},
	{"POST", C "/files/move", serve__h_file_move, 0},
	{"POST", C "/files/mkdir", serve__h_file_mkdir, 0},
	{"GET", C "/archive", serve__h_archive_get, ROUTE_HEAVY},
	{"PUT", C "/archive", serve__h_archive_put, ROUTE_RAW_BODY | ROUTE_HEAVY | ROUTE_SPOOL},
	{"POST", C "/checkpoints", h_checkpoint_create, 0},
	{"GET", C "/checkpoints", h_checkpoint_list, 0},
	{"GET", C "/checkpoints/{id}/export", h_checkpoint_export, 0},
	{"POST", C "/checkpoints/import", h_checkpoint_import, ROUTE_RAW_BODY | ROUTE_SPOOL},
	{"POST", C "/recover", h_recover, 0},
	{"GET", C "/history", h_history, 0},
	{"POST", C "/exec/attach", serve__h_exec_attach, ROUTE_STREAM},
	{"GET", C "/egress", h_egress_get, 0},
	{"POST", C "/egress/allow", h_egress_allow, 0},
	{"POST", C "/egress/deny", h_egress_deny, 0},
	{"POST", "/v1/mcp/{ns}/{agent}/{session}", serve__h_mcp_post, ROUTE_RAW_BODY},
	{"DELETE", "/v1/mcp/{ns}/{agent}/{session}", serve__h_mcp_delete, ROUTE_RAW_BODY},
};

const size_t serve__route_count = sizeof serve__routes / sizeof serve__routes[0];
