/* server.c — the MCP server's JSON-RPC side: reading and answering lines,
 * the lifecycle (initialize, ping, logging/setLevel), the calls in flight
 * with their cancel pipes and progress, and the session's computer. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "brig/common.h"
#include "brig/guest.h"
#include "brig/session.h"
#include "mcp/mcp.h"
#include "ops/procs.h"
#include "util/util.h"

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
					     "2024-11-05", "2024-10-07", NULL};

/* JSON-RPC 2.0 error codes. */
enum {
	RPC_PARSE = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_NO_METHOD = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL = -32603,
};

static const char *const levels[] = {"debug",    "info",  "notice",    "warning", "error",
				     "critical", "alert", "emergency", NULL};

struct mcp_call {
	mcp_server *srv;
	json_t *id;    /* the request's id */
	json_t *token; /* progressToken, or NULL */
	char *name;    /* tool */
	json_t *args;
	int cancel[2]; /* pipe: a byte in cancel[1] cancels */
	bool canceled; /* notifications/cancelled came: no answer */
	int64_t started_ms;
	int64_t progress;  /* last progress value sent */
	ops_target target; /* what ops/ sees of this call */
	size_t output;     /* bytes of output seen */
	mcp_call *next;
};

struct mcp_server {
	mcp_config cfg;
	pthread_mutex_t out_lock; /* one line at a time on stdout */
	pthread_mutex_t lock;     /* everything below */
	pthread_cond_t cond;      /* a call ended / shutting down */
	mcp_call *calls;
	size_t active;
	int log_level; /* index in levels[] */
	bool closing;
	bool dead;       /* the write side failed */
	bool background; /* start_process ran */
	pthread_t ticker;
	bool ticker_started;
	pthread_mutex_t computer_lock;
	char *computer;    /* container name once known */
	brig_guest *guest; /* brig-init of computer, opened on first use */
	bool no_guest;     /* computer predates brig-init: exec it is */
	brig_guest **old;  /* handles of earlier computers, freed with the server */
	size_t old_count;
};

/* ---- output ---- */

static int write_stdout(const char *line, size_t len, void *payload)
{
	(void)payload;
	if (brig_write_all(1, line, len) != 0 || brig_write_all(1, "\n", 1) != 0)
		return -1;
	return 0;
}

/* Sends msg (consumed). */
static void send_msg(mcp_server *s, json_t *msg)
{
	if (!msg)
		return;
	json_object_set_new(msg, "jsonrpc", json_string("2.0"));
	char *line = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!line)
		return;
	pthread_mutex_lock(&s->out_lock);
	if (!s->dead && s->cfg.write(line, strlen(line), s->cfg.payload) != 0)
		s->dead = true;
	pthread_mutex_unlock(&s->out_lock);
	free(line);
}

static void send_result(mcp_server *s, json_t *id, json_t *result)
{
	send_msg(s, json_pack("{s:O,s:o}", "id", id, "result", result));
}

static void send_error(mcp_server *s, json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void send_error(mcp_server *s, json_t *id, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *m = NULL;
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	send_msg(s, json_pack("{s:O,s:{s:i,s:o}}", "id", id ? id : json_null(), "error", "code", code, "message",
			      ops_string(m ? m : "error", m ? strlen(m) : 5)));
	free(m);
}

static void vlog(mcp_server *s, const char *level, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

static void vlog(mcp_server *s, const char *level, const char *fmt, va_list ap)
{
	char *m = NULL;
	if (vasprintf(&m, fmt, ap) < 0)
		return;
	int li = 0;
	while (levels[li] && strcmp(levels[li], level) != 0)
		li++;
	if (li >= 1) /* info and above */
		fprintf(stderr, "brig: mcp: %s\n", m);
	pthread_mutex_lock(&s->lock);
	bool wanted = levels[li] && li >= s->log_level;
	pthread_mutex_unlock(&s->lock);
	if (wanted)
		send_msg(s, json_pack("{s:s,s:{s:s,s:s,s:o}}", "method", "notifications/message", "params", "level",
				      level, "logger", "brig", "data", ops_string(m, strlen(m))));
	free(m);
}

void mcp__log(mcp_call *c, const char *level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(c->srv, level, fmt, ap);
	va_end(ap);
}

/* ---- what tools ask of the server ---- */

brig_engine *mcp__engine(mcp_call *c)
{
	return c->srv->cfg.engine;
}

brig_store *mcp__store(mcp_call *c)
{
	return c->srv->cfg.store;
}

const mcp_config *mcp__config(mcp_call *c)
{
	return &c->srv->cfg;
}

const char *mcp__actor(mcp_call *c)
{
	return c->srv->cfg.actor ? c->srv->cfg.actor : "mcp";
}

void mcp__identity(mcp_call *c, const char **ns, const char **agent, const char **session)
{
	*ns = c->srv->cfg.ns;
	*agent = c->srv->cfg.agent;
	*session = c->srv->cfg.session;
}

static int target_guest(ops_target *t, brig_guest **out, brig_error **err)
{
	return mcp__guest(t->payload, out, err);
}

static int target_exec(ops_target *t, const char *const *argv, const char *const *env, size_t env_count,
		       const char *workdir, const char *stdin_data, size_t stdin_len, size_t capture_max,
		       int64_t timeout_ms, brig_exec_result *res, brig_error **err)
{
	return mcp__exec_env(t->payload, argv, env, env_count, workdir, stdin_data, stdin_len, capture_max, timeout_ms,
			     res, err);
}

ops_target *mcp__target(mcp_call *c)
{
	c->target = (ops_target){.guest = target_guest, .exec = target_exec, .payload = c};
	return &c->target;
}

int mcp__cancel_fd(mcp_call *c)
{
	return c->cancel[0];
}

void mcp__note_background(mcp_call *c)
{
	pthread_mutex_lock(&c->srv->lock);
	c->srv->background = true;
	pthread_mutex_unlock(&c->srv->lock);
}

void mcp__output_seen(mcp_call *c, size_t n)
{
	pthread_mutex_lock(&c->srv->lock);
	c->output += n;
	pthread_mutex_unlock(&c->srv->lock);
}

int mcp__computer(mcp_call *c, char **out, brig_error **err)
{
	mcp_server *s = c->srv;
	const mcp_config *cfg = &s->cfg;
	if (!cfg->engine || !cfg->store)
		return brig__error_set(err, BRIG_EINVAL, 0, "this server has no Docker engine or session store");
	pthread_mutex_lock(&s->computer_lock);
	if (s->computer) {
		*out = xstrdup(s->computer);
		pthread_mutex_unlock(&s->computer_lock);
		return 0;
	}
	/* As brig up: an existing session keeps its recorded spec unless the
	 * server was given spec flags. */
	const brig_spec *spec = cfg->spec;
	brig_spec def;
	brig_spec_init(&def);
	brig_store_session *rec = NULL;
	if (!spec) {
		int grc = brig_store_session_get(cfg->store, &rec, cfg->ns, cfg->agent, cfg->session, NULL);
		if (!(grc == 0 && rec->spec_json))
			spec = &def;
		int src = spec == &def && cfg->image ? brig_spec_set(&def, "image", cfg->image, err)
			  : spec != &def && cfg->recorded_policy ? cfg->recorded_policy(cfg, err)
								 : 0;
		if (src) {
			pthread_mutex_unlock(&s->computer_lock);
			brig_store_session_free(rec);
			brig_spec_clear(&def);
			return src;
		}
	}
	brig_identity id = {cfg->ns, cfg->agent, cfg->session, 1};
	brig_computer *comp = NULL;
	int rc = brig_session_up(cfg->engine, cfg->store, &comp, &id, spec, err);
	if (rc == 0) {
		s->computer = xstrdup(comp->name);
		*out = xstrdup(comp->name);
	}
	pthread_mutex_unlock(&s->computer_lock);
	if (rc == 0)
		mcp__log(c, "info", "%s generation %u of %s/%s/%s (%s)", comp->adopted ? "adopted" : "created",
			 comp->generation, cfg->ns, cfg->agent, cfg->session, comp->name);
	brig_computer_free(comp);
	brig_store_session_free(rec);
	brig_spec_clear(&def);
	return rc;
}

/* Sets the handle aside: another call may still be using it. Locked. */
static void guest_retire_locked(mcp_server *s)
{
	if (s->guest) {
		s->old = xrealloc(s->old, (s->old_count + 1) * sizeof *s->old);
		s->old[s->old_count++] = s->guest;
		s->guest = NULL;
	}
	s->no_guest = false;
}

void mcp__computer_forget(mcp_call *c)
{
	pthread_mutex_lock(&c->srv->computer_lock);
	free(c->srv->computer);
	c->srv->computer = NULL;
	guest_retire_locked(c->srv);
	pthread_mutex_unlock(&c->srv->computer_lock);
}

int mcp__guest(mcp_call *c, brig_guest **out, brig_error **err)
{
	*out = NULL;
	cleanup_free char *ref = NULL;
	int rc = mcp__computer(c, &ref, err);
	if (rc)
		return rc;
	mcp_server *s = c->srv;
	pthread_mutex_lock(&s->computer_lock);
	if (s->guest && !brig_guest_alive(s->guest))
		guest_retire_locked(s);
	if (!s->guest && !s->no_guest && s->computer && strcmp(s->computer, ref) == 0) {
		brig_error *gerr = NULL;
		int grc = brig_computer_guest(s->cfg.engine, &s->guest, ref, &gerr);
		if (grc) {
			s->guest = NULL;
			/* Only a computer without brig-init falls back for good;
			 * anything else is tried again next call. */
			if (grc == BRIG_ESTATE)
				s->no_guest = true;
			fprintf(stderr, "brig: mcp: no brig-init handle for %s, using exec: %s\n", ref,
				brig_error_message(gerr));
			brig_error_free(gerr);
		}
	}
	*out = s->guest;
	pthread_mutex_unlock(&s->computer_lock);
	return 0;
}

/* ---- calls in flight ---- */

static void call_free(mcp_call *c)
{
	if (!c)
		return;
	json_decref(c->id);
	json_decref(c->token);
	json_decref(c->args);
	free(c->name);
	if (c->cancel[0] >= 0)
		close(c->cancel[0]);
	if (c->cancel[1] >= 0)
		close(c->cancel[1]);
	free(c);
}

static void call_run(mcp_call *c)
{
	json_t *result = mcp__tool_call(c, c->name, c->args);
	mcp_server *s = c->srv;
	pthread_mutex_lock(&s->lock);
	bool canceled = c->canceled;
	/* Unlinked before the answer goes out, so no progress follows it. */
	for (mcp_call **p = &s->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	if (canceled)
		json_decref(result); /* the client no longer waits for it */
	else
		send_result(s, c->id, result);
}

static void *call_thread(void *arg)
{
	mcp_call *c = arg;
	mcp_server *s = c->srv;
	call_run(c);
	call_free(c);
	pthread_mutex_lock(&s->lock);
	s->active--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Sends notifications/progress for calls with a token, every second. */
static void *ticker_thread(void *arg)
{
	mcp_server *s = arg;
	pthread_mutex_lock(&s->lock);
	while (!s->closing) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
		if (s->closing)
			break;
		/* Sent under the lock: call_run unlinks a call under it before
		 * answering, so no progress follows an answer. */
		int64_t now = brig_now_ms();
		for (mcp_call *c = s->calls; c; c = c->next) {
			int64_t secs = (now - c->started_ms) / 1000;
			if (!c->token || c->canceled || secs <= c->progress)
				continue;
			c->progress = secs;
			char msg[96];
			snprintf(msg, sizeof msg, "running for %llds, %zu bytes of output", (long long)secs, c->output);
			send_msg(s, json_pack("{s:s,s:{s:O,s:I,s:s}}", "method", "notifications/progress", "params",
					      "progressToken", c->token, "progress", (json_int_t)secs, "message", msg));
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void start_call(mcp_server *s, json_t *id, json_t *params)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	if (!json_is_string(name))
		return send_error(s, id, RPC_INVALID_PARAMS, "tools/call: params.name must be a string");
	if (args && !json_is_object(args) && !json_is_null(args))
		return send_error(s, id, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object");
	if (!mcp__tool_exists(json_string_value(name)))
		return send_error(s, id, RPC_INVALID_PARAMS, "Unknown tool: %s (tools/list names them)",
				  json_string_value(name));
	json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
	if (token && !json_is_string(token) && !json_is_integer(token))
		token = NULL;

	mcp_call *c = xcalloc(1, sizeof *c);
	c->srv = s;
	c->id = json_incref(id);
	c->token = token ? json_incref(token) : NULL;
	c->name = xstrdup(json_string_value(name));
	c->args = json_is_object(args) ? json_incref(args) : json_object();
	c->started_ms = brig_now_ms();
	if (pipe2(c->cancel, O_CLOEXEC | O_NONBLOCK) != 0) {
		call_free(c);
		return send_error(s, id, RPC_INTERNAL, "cannot make a cancel pipe: %s", strerror(errno));
	}
	pthread_mutex_lock(&s->lock);
	if (s->closing || s->active >= MCP_MAX_CALLS) {
		size_t active = s->active;
		pthread_mutex_unlock(&s->lock);
		call_free(c);
		return send_error(s, id, RPC_INTERNAL, "%zu tool calls are already running: wait for one to end",
				  active);
	}
	c->next = s->calls;
	s->calls = c;
	s->active++;
	pthread_mutex_unlock(&s->lock);

	if (s->cfg.inline_calls) {
		call_thread(c);
		return;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int e = pthread_create(&t, &attr, call_thread, c);
	pthread_attr_destroy(&attr);
	if (e != 0) {
		pthread_mutex_lock(&s->lock);
		for (mcp_call **p = &s->calls; *p; p = &(*p)->next)
			if (*p == c) {
				*p = c->next;
				break;
			}
		s->active--;
		pthread_mutex_unlock(&s->lock);
		call_free(c);
		send_error(s, id, RPC_INTERNAL, "cannot start a thread for the call: %s", strerror(e));
	}
}

/* Cancels calls whose id equals id (NULL: all). Called with s->lock held. */
static void cancel_locked(mcp_server *s, json_t *id)
{
	for (mcp_call *c = s->calls; c; c = c->next) {
		if (id && !json_equal(c->id, id))
			continue;
		if (!c->canceled) {
			c->canceled = true;
			ssize_t w = write(c->cancel[1], "x", 1);
			(void)w;
		}
	}
}

/* ---- methods ---- */

static bool is_id(json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

static void do_initialize(mcp_server *s, json_t *id, json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	if (!want)
		return send_error(s, id, RPC_INVALID_PARAMS, "initialize: params.protocolVersion must be a string");
	/* The client's version when spoken here, else the newest: the client
	 * then decides whether it can go on. */
	const char *version = mcp_protocol_versions[0];
	for (size_t i = 0; mcp_protocol_versions[i]; i++)
		if (strcmp(want, mcp_protocol_versions[i]) == 0)
			version = mcp_protocol_versions[i];
	char *instructions = xasprintf(
		"Tools run in brig computer %s/%s/%s: a locked-down Linux container whose files live in /workspace "
		"(the working directory; relative paths start there). Commands run as an unprivileged user. A "
		"command that times out or is cancelled is ended inside the computer, which keeps its files; when "
		"a tool says the computer stopped, call `recover`. Take a `checkpoint` before risky changes.",
		s->cfg.ns, s->cfg.agent, s->cfg.session);
	json_t *r = json_pack("{s:s,s:{s:{s:b},s:{}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", version, "capabilities",
			      "tools", "listChanged", 0, "logging", "serverInfo", "name", "brig", "title",
			      "brig sandbox", "version", BRIG_VERSION, "instructions", instructions);
	free(instructions);
	send_result(s, id, r);
}

static void do_set_level(mcp_server *s, json_t *id, json_t *params)
{
	const char *level = json_string_value(json_object_get(params, "level"));
	int li = 0;
	while (level && levels[li] && strcmp(levels[li], level) != 0)
		li++;
	if (!level || !levels[li])
		return send_error(s, id, RPC_INVALID_PARAMS,
				  "logging/setLevel: params.level must be one of debug, info, notice, warning, "
				  "error, critical, alert, emergency");
	pthread_mutex_lock(&s->lock);
	s->log_level = li;
	pthread_mutex_unlock(&s->lock);
	send_result(s, id, json_object());
}

static void do_notification(mcp_server *s, const char *method, json_t *params)
{
	if (strcmp(method, "notifications/cancelled") == 0) {
		json_t *rid = json_object_get(params, "requestId");
		if (!is_id(rid))
			return;
		pthread_mutex_lock(&s->lock);
		cancel_locked(s, rid);
		pthread_mutex_unlock(&s->lock);
	}
	/* notifications/initialized and the others need nothing. */
}

void mcp_server_handle(mcp_server *s, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg)
		return send_error(s, NULL, RPC_PARSE, "Parse error: %s (line %d, column %d)", jerr.text, jerr.line,
				  jerr.column);
	if (json_is_array(msg)) {
		json_decref(msg);
		return send_error(s, NULL, RPC_INVALID_REQUEST, "Invalid Request: batches are not supported");
	}
	json_t *id = json_object_get(msg, "id");
	json_t *method = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	bool has_id = id != NULL;
	if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0) {
		send_error(s, is_id(id) ? id : NULL, RPC_INVALID_REQUEST,
			   "Invalid Request: not a JSON-RPC 2.0 object (\"jsonrpc\": \"2.0\")");
		goto out;
	}
	if (!method) {
		/* A response to something we asked: we ask nothing. */
		if (!json_object_get(msg, "result") && !json_object_get(msg, "error"))
			send_error(s, is_id(id) ? id : NULL, RPC_INVALID_REQUEST, "Invalid Request: no method");
		goto out;
	}
	if (!json_is_string(method) || (has_id && !is_id(id))) {
		send_error(s, is_id(id) ? id : NULL, RPC_INVALID_REQUEST,
			   "Invalid Request: method must be a string and id a string or an integer");
		goto out;
	}
	if (params && !json_is_object(params)) {
		if (has_id)
			send_error(s, id, RPC_INVALID_PARAMS, "Invalid params: params must be an object");
		goto out;
	}
	const char *m = json_string_value(method);
	if (!has_id) {
		do_notification(s, m, params);
		goto out;
	}
	if (strcmp(m, "initialize") == 0)
		do_initialize(s, id, params);
	else if (strcmp(m, "ping") == 0)
		send_result(s, id, json_object());
	else if (strcmp(m, "tools/list") == 0)
		send_result(s, id, json_pack("{s:o}", "tools", mcp__tools_list()));
	else if (strcmp(m, "tools/call") == 0)
		start_call(s, id, params);
	else if (strcmp(m, "logging/setLevel") == 0)
		do_set_level(s, id, params);
	else
		send_error(s, id, RPC_NO_METHOD, "Method not found: %s", m);
out:
	json_decref(msg);
}

/* ---- the read loop ---- */

int mcp_server_serve(mcp_server *s, int fd, int stop_fd)
{
	brig_buf line;
	brig_buf_init(&line, MCP_MAX_LINE);
	bool skipping = false; /* inside a line past the cap */
	char chunk[65536];
	int rc = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
		if (poll(p, stop_fd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			rc = -1;
			break;
		}
		if (stop_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP)))
			break;
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			rc = n < 0 ? -1 : 0;
			break; /* a last line without a newline is incomplete: dropped */
		}
		const char *at = chunk, *end = chunk + n;
		while (at < end) {
			const char *nl = memchr(at, '\n', (size_t)(end - at));
			size_t take = nl ? (size_t)(nl - at) : (size_t)(end - at);
			if (!skipping && brig_buf_add(&line, at, take) != 0) {
				skipping = true;
				brig_buf_reset(&line);
			}
			at += take;
			if (!nl)
				break;
			at++;
			if (skipping) {
				send_error(s, NULL, RPC_INVALID_REQUEST,
					   "Invalid Request: a message is limited to %zu MiB", MCP_MAX_LINE >> 20);
				skipping = false;
			} else {
				size_t l = line.len;
				while (l && (line.data[l - 1] == '\r' || line.data[l - 1] == ' ' ||
					     line.data[l - 1] == '\t'))
					l--;
				if (l)
					mcp_server_handle(s, line.data, l);
			}
			brig_buf_reset(&line);
		}
		if (s->dead)
			break;
	}
	brig_buf_free(&line);
	mcp_server_shutdown(s);
	return rc;
}

/* ---- life ---- */

mcp_server *mcp_server_new(const mcp_config *cfg)
{
	mcp_server *s = xcalloc(1, sizeof *s);
	s->cfg = *cfg;
	if (!s->cfg.write)
		s->cfg.write = write_stdout;
	s->log_level = 1; /* info, until the client says otherwise */
	pthread_mutex_init(&s->out_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->computer_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!cfg->inline_calls && pthread_create(&s->ticker, NULL, ticker_thread, s) == 0)
		s->ticker_started = true;
	return s;
}

void mcp_server_shutdown(mcp_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->closing = true;
	if (s->active)
		fprintf(stderr, "brig: mcp: input closed: ending %zu running call(s)\n", s->active);
	cancel_locked(s, NULL);
	pthread_cond_broadcast(&s->cond);
	while (s->active)
		pthread_cond_wait(&s->cond, &s->lock);
	bool background = s->background;
	s->background = false;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&s->computer_lock);
	bool known = s->computer != NULL;
	pthread_mutex_unlock(&s->computer_lock);
	if (background && known) {
		/* The background processes go with the client that started
		 * them (a computer that stopped meanwhile took them along). */
		mcp_call c = {.srv = s, .cancel = {-1, -1}};
		brig_error *err = NULL;
		if (ops_proc_kill(mcp__target(&c), NULL, "TERM", &err) != 0)
			fprintf(stderr, "brig: mcp: cannot end the background processes: %s\n",
				brig_error_message(err));
		brig_error_free(err);
	}
	if (s->ticker_started) {
		pthread_join(s->ticker, NULL);
		s->ticker_started = false;
	}
}

void mcp_server_free(mcp_server *s)
{
	if (!s)
		return;
	mcp_server_shutdown(s);
	pthread_mutex_destroy(&s->out_lock);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->computer_lock);
	pthread_cond_destroy(&s->cond);
	free(s->computer);
	brig_guest_free(s->guest);
	for (size_t i = 0; i < s->old_count; i++)
		brig_guest_free(s->old[i]);
	free(s->old);
	free(s);
}
