/* mcp_http.c — brig mcp's server over MCP's Streamable HTTP transport at
 * /v1/mcp/{ns}/{agent}/{session}: the sessions (Mcp-Session-Id), and the
 * routing of the shared JSON-RPC dispatcher's (src/mcp/) answers to the
 * POST that asked, as JSON or as an SSE stream. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "mcp/mcp.h"
#include "serve/internal.h"
#include "util/util.h"

#define MH_MAX_SESSIONS 1024              /* of the server */
#define MH_MAX_TOKEN_SESSIONS 32          /* of one token: past it, only its own are ended */
#define MH_PENDING_MAX ((size_t)64 << 20) /* SSE bytes queued for one POST */

typedef struct mh_session mh_session;

/* One POST that waits for the answer to its request. */
typedef struct mh_waiter {
	struct mh_waiter *next;
	mh_session *sess;
	json_t *id;    /* the request's id; NULL: a notification or response */
	json_t *token; /* its progressToken, or NULL */
	brig_buf sse;  /* events; those from sse_off on are not yet sent */
	size_t sse_off;
	char *response;
	size_t notes; /* notifications queued before the response */
	bool done;    /* answered, cancelled, the session ended, or too much queued */
	int wake[2];  /* a byte in wake[1]: sse grew or done */
	int client;
} mh_waiter;

struct mh_session {
	mh_session *next;
	char id[33];
	char *ns, *agent, *session;
	const void *token; /* the token that opened it: the only one it answers */
	mcp_server *mcp;
	serve_mcp *table;
	size_t refs;   /* the table's, and each POST's */
	bool closed;   /* DELETE, evicted, or the server stops */
	uint64_t used; /* the table's tick at its last request, for eviction */
	pthread_mutex_t lock;
	mh_waiter *waiters;
};

struct serve_mcp {
	pthread_mutex_t lock;
	mh_session *sessions;
	size_t n;
	uint64_t tick; /* counts requests: milliseconds would tie */
};

/* The waiter of the request being dispatched on this thread: a parse
 * error's answer (id null) goes to it. */
static __thread mh_waiter *current;

static void wake(mh_waiter *w)
{
	(void)!write(w->wake[1], "x", 1);
}

/* Queues line on w as an SSE event. Locked. */
static void deliver_locked(mh_waiter *w, const char *line, size_t len, bool response)
{
	if (w->done)
		return;
	/* What was sent goes once it is half the buffer or in the way: a
	 * byte moves at most once per event it waits behind, never per read. */
	if (w->sse_off && (w->sse_off >= w->sse.len / 2 || w->sse.cap - w->sse.len < len + 23)) {
		memmove(w->sse.data, w->sse.data + w->sse_off, w->sse.len - w->sse_off);
		w->sse.len -= w->sse_off;
		w->sse_off = 0;
	}
	/* The answer always goes: the dispatcher bounds it (MCP_ANSWER_MAX),
	 * and the stream ends with it. What the cap bounds is notifications
	 * piling up unread. */
	if (response && w->sse.cap - w->sse.len < len + 23)
		w->sse.cap = w->sse.len + len + 23;
	if (w->sse.cap - w->sse.len < len + 23) {
		/* A client that does not read its stream: end it (between
		 * events, so what it got is whole). */
		w->done = true;
		wake(w);
		return;
	}
	brig_buf_put(&w->sse, "event: message\ndata: ", 21);
	brig_buf_put(&w->sse, line, len);
	brig_buf_put(&w->sse, "\n\n", 2);
	if (response) {
		w->response = xstrndup(line, len);
		w->done = true;
	} else {
		w->notes++;
	}
	wake(w);
}

/* The dispatcher's write callback: each message goes to the POST it
 * answers (by id), a progress notification to the POST of its token, any
 * other notification to the POST being dispatched or else to every open
 * one. A message nobody waits for is dropped (its client left). */
static int mh_write(const char *line, size_t len, void *payload)
{
	mh_session *ss = payload;
	json_t *m = json_loadb(line, len, 0, NULL);
	json_t *id = json_object_get(m, "id");
	bool response = json_object_get(m, "result") || json_object_get(m, "error");
	json_t *token = json_object_get(json_object_get(m, "params"), "progressToken");
	pthread_mutex_lock(&ss->lock);
	if (response) {
		mh_waiter *to = NULL;
		for (mh_waiter *w = ss->waiters; w && !to && id && !json_is_null(id); w = w->next)
			if (w->id && !w->done && json_equal(w->id, id))
				to = w;
		if (!to) /* a parse error, or an error answering a non-request */
			to = current;
		if (to)
			deliver_locked(to, line, len, true);
	} else if (token) {
		for (mh_waiter *w = ss->waiters; w; w = w->next)
			if (w->token && json_equal(w->token, token))
				deliver_locked(w, line, len, false);
	} else if (current && current->id) {
		deliver_locked(current, line, len, false);
	} else {
		for (mh_waiter *w = ss->waiters; w; w = w->next)
			if (w->id)
				deliver_locked(w, line, len, false);
	}
	pthread_mutex_unlock(&ss->lock);
	json_decref(m);
	return 0;
}

/* ---- sessions ---- */

static void session_unref(serve_mcp *t, mh_session *ss)
{
	pthread_mutex_lock(&t->lock);
	bool last = --ss->refs == 0;
	pthread_mutex_unlock(&t->lock);
	if (!last)
		return;
	mcp_server_free(ss->mcp);
	pthread_mutex_destroy(&ss->lock);
	free(ss->ns);
	free(ss->agent);
	free(ss->session);
	free(ss);
}

/* Ends ss (already out of the table): its calls are cancelled, its
 * background processes ended, its open streams closed. */
static void session_close(serve_mcp *t, mh_session *ss)
{
	pthread_mutex_lock(&ss->lock);
	ss->closed = true;
	pthread_mutex_unlock(&ss->lock);
	mcp_server_shutdown(ss->mcp);
	pthread_mutex_lock(&ss->lock);
	for (mh_waiter *w = ss->waiters; w; w = w->next) {
		w->done = true;
		wake(w);
	}
	pthread_mutex_unlock(&ss->lock);
	session_unref(t, ss);
}

serve_mcp *serve__mcp_new(void)
{
	serve_mcp *t = xcalloc(1, sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void serve__mcp_free(serve_mcp *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	mh_session *all = t->sessions;
	t->sessions = NULL;
	t->n = 0;
	pthread_mutex_unlock(&t->lock);
	while (all) {
		mh_session *next = all->next;
		session_close(t, all);
		all = next;
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* The session named by the request's Mcp-Session-Id, with a reference;
 * NULL with *out the answer otherwise. */
static mh_session *session_find(serve_req *r, serve_reply *out, const char *sid)
{
	serve_mcp *t = serve__mcp(r);
	mh_session *found = NULL;
	pthread_mutex_lock(&t->lock);
	for (mh_session *ss = t->sessions; ss && !found; ss = ss->next)
		if (strcmp(ss->id, sid) == 0 && ss->token == r->token && strcmp(ss->ns, serve__param(r, "ns")) == 0 &&
		    strcmp(ss->agent, serve__param(r, "agent")) == 0 &&
		    strcmp(ss->session, serve__param(r, "session")) == 0)
			found = ss;
	if (found) {
		found->refs++;
		found->used = ++t->tick;
	}
	pthread_mutex_unlock(&t->lock);
	if (!found)
		serve__reply_json(out, 404,
				  json_pack("{s:s,s:n,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", "error", "code", -32001,
					    "message",
					    "no such MCP session here (ended, or opened for another path or token): "
					    "send initialize without Mcp-Session-Id"));
	return found;
}

/* A computer made from the session's recorded spec holds to the server's
 * policy, as POST /v1/computers without a spec does. */
static int mh_policy(const mcp_config *cfg, brig_error **err)
{
	brig_identity id = {cfg->ns, cfg->agent, cfg->session, 1};
	return serve_session_policy(cfg->store, cfg->policy_payload, &id, err);
}

static mh_session *session_open(serve_req *r, serve_reply *out)
{
	brig_identity id;
	if (!serve__path_identity(r, out, &id))
		return NULL;
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
		serve__reply_fail(out, 500, "internal", "getrandom: %s", strerror(errno));
		return NULL;
	}
	serve_mcp *t = serve__mcp(r);
	mh_session *evict = NULL;
	pthread_mutex_lock(&t->lock);
	size_t own = 0;
	for (mh_session *p = t->sessions; p; p = p->next)
		own += p->token == r->token;
	if (own >= MH_MAX_TOKEN_SESSIONS || t->n >= MH_MAX_SESSIONS) {
		/* The token's own least recently used session that no POST
		 * holds goes: one token never ends another's. */
		mh_session **victim = NULL;
		for (mh_session **p = &t->sessions; *p; p = &(*p)->next)
			if ((*p)->token == r->token && (*p)->refs == 1 && (!victim || (*p)->used < (*victim)->used))
				victim = p;
		if (victim) {
			evict = *victim;
			*victim = evict->next;
			t->n--;
			own--;
		}
	}
	if (own >= MH_MAX_TOKEN_SESSIONS) {
		pthread_mutex_unlock(&t->lock);
		serve__reply_fail(out, 429, "too_many",
				  "this token's %d MCP sessions are all busy: end one (DELETE) or retry later",
				  MH_MAX_TOKEN_SESSIONS);
		return NULL;
	}
	if (t->n >= MH_MAX_SESSIONS) {
		pthread_mutex_unlock(&t->lock);
		serve__reply_fail(out, 503, "busy", "%d MCP sessions are in use: end one (DELETE) or retry later",
				  MH_MAX_SESSIONS);
		return NULL;
	}
	mh_session *ss = xcalloc(1, sizeof *ss);
	for (size_t i = 0; i < sizeof rnd; i++)
		snprintf(ss->id + 2 * i, 3, "%02x", rnd[i]);
	ss->ns = xstrdup(id.ns);
	ss->agent = xstrdup(id.agent);
	ss->session = xstrdup(id.session);
	ss->token = r->token;
	ss->table = t;
	ss->refs = 2; /* the table's and this POST's */
	ss->used = ++t->tick;
	pthread_mutex_init(&ss->lock, NULL);
	mcp_config cfg = {.engine = serve__engine(r),
			  .store = serve__store(r),
			  .ns = ss->ns,
			  .agent = ss->agent,
			  .session = ss->session,
			  .image = serve__config(r)->image,
			  .actor = serve_tokens_name(r->token),
			  .write = mh_write,
			  .payload = ss,
			  .recorded_policy = mh_policy,
			  .policy_payload = serve__config(r)};
	ss->mcp = mcp_server_new(&cfg);
	ss->next = t->sessions;
	t->sessions = ss;
	t->n++;
	pthread_mutex_unlock(&t->lock);
	if (evict) {
		fprintf(stderr, "brig: serve: mcp: ending the token's least recently used session (at the limit)\n");
		session_close(t, evict);
	}
	return ss;
}

/* ---- waiters ---- */

static void waiter_free(mh_waiter *w)
{
	mh_session *ss = w->sess;
	pthread_mutex_lock(&ss->lock);
	for (mh_waiter **p = &ss->waiters; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	pthread_mutex_unlock(&ss->lock);
	json_decref(w->id);
	json_decref(w->token);
	brig_buf_free(&w->sse);
	free(w->response);
	close(w->wake[0]);
	close(w->wake[1]);
	free(w);
}

static ssize_t mh_stream_read(void *payload, char *buf, size_t max)
{
	mh_waiter *w = payload;
	for (;;) {
		pthread_mutex_lock(&w->sess->lock);
		size_t left = w->sse.len - w->sse_off, n = left < max ? left : max;
		if (n) {
			memcpy(buf, w->sse.data + w->sse_off, n);
			w->sse_off += n;
			if (w->sse_off == w->sse.len)
				w->sse_off = w->sse.len = 0;
		}
		bool end = !n && w->done;
		pthread_mutex_unlock(&w->sess->lock);
		if (n)
			return (ssize_t)n;
		if (end)
			return 0;
		/* A client that leaves mid-call is noticed by its socket's
		 * hang-up: done then cancels the call. */
		struct pollfd p[2] = {{.fd = w->wake[0], .events = POLLIN}, {.fd = w->client, .events = POLLRDHUP}};
		int pr = poll(p, w->client >= 0 ? 2 : 1, -1);
		if (pr < 0 && errno != EINTR)
			return -1;
		if (pr > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return -1;
		char drain[64];
		while (read(w->wake[0], drain, sizeof drain) > 0)
			;
	}
}

/* Cancels the call id of ss through the dispatcher, as the client's
 * notifications/cancelled would. */
static void cancel_call(mh_session *ss, json_t *id)
{
	json_t *n = json_pack("{s:s,s:s,s:{s:O,s:s}}", "jsonrpc", "2.0", "method", "notifications/cancelled", "params",
			      "requestId", id, "reason", "the HTTP client left");
	char *text = json_dumps(n, JSON_COMPACT);
	json_decref(n);
	if (text)
		mcp_server_handle(ss->mcp, text, strlen(text));
	free(text);
}

static void mh_stream_done(void *payload)
{
	mh_waiter *w = payload;
	mh_session *ss = w->sess;
	pthread_mutex_lock(&ss->lock);
	bool left = !w->done && !ss->closed;
	pthread_mutex_unlock(&ss->lock);
	if (left)
		cancel_call(ss, w->id);
	waiter_free(w);
	session_unref(ss->table, ss);
}

/* ---- the endpoints ---- */

static bool version_known(const char *v)
{
	for (size_t i = 0; mcp_protocol_versions[i]; i++)
		if (strcmp(v, mcp_protocol_versions[i]) == 0)
			return true;
	return false;
}

static void reply_rpc_error(serve_reply *out, int status, int code, const char *msg)
{
	serve__reply_json(
		out, status,
		json_pack("{s:s,s:n,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", "error", "code", code, "message", msg));
}

/* Checks shared by POST and DELETE; false with *out the refusal. */
static bool mh_headers_ok(serve_req *r, serve_reply *out)
{
	/* A web page must not reach a sandbox (DNS rebinding): brig serves
	 * no browser. */
	if (serve__header(r, "Origin")) {
		reply_rpc_error(out, 403, -32000, "requests from web pages (an Origin header) are refused");
		return false;
	}
	const char *pv = serve__header(r, "MCP-Protocol-Version");
	if (pv && !version_known(pv)) {
		reply_rpc_error(out, 400, -32000,
				"unsupported MCP-Protocol-Version (this server speaks 2024-10-07 "
				"to 2025-11-25)");
		return false;
	}
	return true;
}

void serve__h_mcp_post(serve_req *r, serve_reply *out)
{
	if (!mh_headers_ok(r, out))
		return;
	json_t *msg = json_loadb(r->body ? r->body : "", r->body_len, 0, NULL);
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	bool request = method && (json_is_string(id) || json_is_integer(id));
	const char *sid = serve__header(r, "Mcp-Session-Id");
	mh_session *ss = NULL;
	if (!sid && !(request && strcmp(method, "initialize") == 0))
		reply_rpc_error(out, 400, -32000,
				"no Mcp-Session-Id: send initialize first, then its Mcp-Session-Id "
				"with every request");
	else
		ss = sid ? session_find(r, out, sid) : session_open(r, out);
	if (!ss) {
		json_decref(msg);
		return;
	}
	mh_waiter *w = xcalloc(1, sizeof *w);
	w->sess = ss;
	w->id = request ? json_incref(id) : NULL;
	json_t *token = json_object_get(json_object_get(json_object_get(msg, "params"), "_meta"), "progressToken");
	w->token = request && token ? json_incref(token) : NULL;
	w->client = serve__client_fd(r);
	brig_buf_init(&w->sse, MH_PENDING_MAX);
	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		serve__reply_fail(out, 500, "internal", "pipe: %s", strerror(errno));
		w->wake[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		w->wake[1] = dup(w->wake[0]);
		goto free;
	}
	pthread_mutex_lock(&ss->lock);
	w->next = ss->waiters;
	ss->waiters = w;
	pthread_mutex_unlock(&ss->lock);

	current = w;
	mcp_server_handle(ss->mcp, r->body ? r->body : "", r->body_len);
	current = NULL;
	if (method && !id && strcmp(method, "notifications/cancelled") == 0) {
		/* The dispatcher suppresses a cancelled call's answer: its
		 * stream ends here instead. */
		json_t *rid = json_object_get(json_object_get(msg, "params"), "requestId");
		pthread_mutex_lock(&ss->lock);
		for (mh_waiter *o = ss->waiters; o && rid; o = o->next)
			if (o->id && json_equal(o->id, rid)) {
				o->done = true;
				wake(o);
			}
		pthread_mutex_unlock(&ss->lock);
	}
	if (!sid) {
		/* Read by the server on this thread once the handler returns:
		 * the session itself may be evicted by then. */
		static __thread char sid_out[sizeof ss->id];
		memcpy(sid_out, ss->id, sizeof sid_out);
		out->extra_header = "Mcp-Session-Id";
		out->extra_value = sid_out;
	}
	pthread_mutex_lock(&ss->lock);
	bool done = w->done;
	pthread_mutex_unlock(&ss->lock);
	if (!done && w->id) {
		out->status = 200;
		out->type = "text/event-stream";
		out->read = mh_stream_read;
		out->done = mh_stream_done;
		out->payload = w;
		json_decref(msg);
		return;
	}
	if (!done) {
		out->status = 202; /* a notification or a response */
	} else if (w->notes == 0 && w->response) {
		out->status = w->id ? 200 : 400;
		out->data = steal_pointer(&w->response);
		out->len = strlen(out->data);
		out->type = "application/json";
	} else {
		out->status = 200;
		out->data = brig_buf_steal(&w->sse, &out->len);
		out->type = "text/event-stream";
	}
free:
	json_decref(msg);
	waiter_free(w);
	session_unref(ss->table, ss);
}

void serve__h_mcp_delete(serve_req *r, serve_reply *out)
{
	if (!mh_headers_ok(r, out))
		return;
	const char *sid = serve__header(r, "Mcp-Session-Id");
	if (!sid)
		return reply_rpc_error(out, 400, -32000, "DELETE needs the Mcp-Session-Id of the session to end");
	mh_session *ss = session_find(r, out, sid);
	if (!ss)
		return;
	serve_mcp *t = ss->table;
	bool unlinked = false;
	pthread_mutex_lock(&t->lock);
	for (mh_session **p = &t->sessions; *p; p = &(*p)->next)
		if (*p == ss) {
			*p = ss->next;
			t->n--;
			unlinked = true;
			break;
		}
	pthread_mutex_unlock(&t->lock);
	if (unlinked)
		session_close(t, ss); /* the table's reference */
	session_unref(t, ss);
	out->status = 204;
}
