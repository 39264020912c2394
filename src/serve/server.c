/* server.c — `brig serve`'s connections on libmicrohttpd: the listening
 * socket, routing, tokens, body caps, one log line per request, metrics,
 * the kept brig-init handles, and the drain on stop. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "egress/egress_internal.h"
#include "serve/internal.h"
#include "serve/mhd_dl.h"
#include "serve/pool.h"
#include "util/util.h"

static const double exec_buckets_ms[] = {1, 2, 3, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
#define N_BUCKETS (sizeof exec_buckets_ms / sizeof exec_buckets_ms[0])
#define MAX_CODES 32

typedef struct kept_guest {
	char *name;
	brig_guest *g;
	size_t refs; /* operations holding g */
	bool none;   /* the computer has no brig-init */
} kept_guest;

/* A retired handle still lent to refs operations. */
typedef struct held_guest {
	brig_guest *g;
	size_t refs;
} held_guest;

/* A connection, watched so that one that takes longer than
 * header_timeout_s to finish a request's headers (dribbling bytes, which
 * libmicrohttpd's idle timeout does not catch; or a slow TLS handshake) is
 * cut. */
typedef struct conn_track {
	struct conn_track *next;
	int fd;
	int64_t phase_ms; /* connected, or the last request ended */
	bool in_headers;  /* between those and a request's headers */
	bool cut;
	bool nul;      /* the request's URL decoded to a NUL byte (%00) */
	bool upgraded; /* a raw stream now (exec attach): no header deadline */
} conn_track;

/* An upgraded connection, lent to its route until serve__upgraded_close. */
struct serve_upgraded {
	serve_upgraded *next;
	serve_server *srv;
	int fd;
	struct MHD_UpgradeResponseHandle *urh;
	const void *token; /* whose stream slot it holds (stream set) */
	bool stream;
};

struct serve_server {
	serve_config cfg;
	serve_tokens *tokens;
	struct MHD_Daemon *d;
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t cond;  /* inflight dropped */
	size_t inflight;
	bool draining;
	/* metrics */
	uint64_t *requests; /* per route, then one for "no route" */
	uint64_t exec_count, exec_bucket[N_BUCKETS];
	double exec_sum_s;
	char *err_codes[MAX_CODES];
	uint64_t err_counts[MAX_CODES];
	/* brig-init handles, by container name */
	kept_guest *guests;
	size_t n_guests;
	held_guest *old; /* retired, still lent: freed on their last release */
	size_t n_old;
	conn_track *conns;
	serve_upgraded *upgraded; /* open raw streams (counted in inflight too) */
	/* heavy calls (tar in/out, runs) in flight, and open attach streams,
	 * per token entry */
	struct heavy_slot {
		const void *token;
		unsigned n, streams;
	} * heavy;
	size_t n_heavy;
	int cancel[2]; /* readable once the drain period is over: execs and runs cancel */
	int drain[2];  /* readable once the drain begins: event streams end */
	pthread_t watchdog;
	bool watchdog_started, watchdog_stop;
	serve_mcp *mcp;     /* MCP over HTTP sessions (mcp_http.c) */
	serve_pools *pools; /* --pool (pool.c); NULL without */
};

static void track_phase(serve_server *s, struct MHD_Connection *conn, bool in_headers);
static conn_track *track_of(struct MHD_Connection *conn);
static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra, size_t extra_len,
		       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh);

/* ---- what routes ask ---- */

brig_engine *serve__engine(serve_req *r)
{
	return r->srv->cfg.engine;
}

brig_store *serve__store(serve_req *r)
{
	return r->srv->cfg.store;
}

const serve_config *serve__config(serve_req *r)
{
	return &r->srv->cfg;
}

const char *serve__param(serve_req *r, const char *name)
{
	for (size_t i = 0; i < r->n_params; i++)
		if (strcmp(r->param_name[i], name) == 0)
			return r->param[i];
	return NULL;
}

const char *serve__query(serve_req *r, const char *name, size_t *len)
{
	const char *v = NULL;
	size_t n = 0;
	if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name), &v, &n) != MHD_YES)
		return NULL;
	if (len)
		*len = n;
	return v ? v : "";
}

int serve__client_fd(serve_req *r)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? (int)ci->connect_fd : -1;
}

bool serve__allowed(serve_req *r, const char *ns)
{
	return serve_tokens_allows(r->token, ns);
}

serve_mcp *serve__mcp(serve_req *r)
{
	return r->srv->mcp;
}

const char *serve__header(serve_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool serve__all_ns(serve_req *r)
{
	return serve_tokens_all(r->token);
}

int serve__cancel_fd(serve_req *r)
{
	return r->srv->cancel[0];
}

int serve__drain_fd(serve_req *r)
{
	return r->srv->drain[0];
}

/* Takes one of the token's heavy slots (stream: one of its stream slots);
 * false when all are taken. */
static bool slot_enter(serve_server *s, const void *token, bool stream)
{
	pthread_mutex_lock(&s->lock);
	struct heavy_slot *h = NULL;
	for (size_t i = 0; i < s->n_heavy && !h; i++)
		if (s->heavy[i].token == token)
			h = &s->heavy[i];
	if (!h) {
		s->heavy = xrealloc(s->heavy, (s->n_heavy + 1) * sizeof *s->heavy);
		h = &s->heavy[s->n_heavy++];
		*h = (struct heavy_slot){.token = token};
	}
	unsigned *n = stream ? &h->streams : &h->n;
	bool ok = *n < (stream ? s->cfg.streams_max : s->cfg.heavy_max);
	if (ok)
		(*n)++;
	pthread_mutex_unlock(&s->lock);
	return ok;
}

static void slot_leave(serve_server *s, const void *token, bool stream)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_heavy; i++) {
		unsigned *n = stream ? &s->heavy[i].streams : &s->heavy[i].n;
		if (s->heavy[i].token == token && *n)
			(*n)--;
	}
	pthread_mutex_unlock(&s->lock);
}

void serve__reply_json(serve_reply *out, int status, json_t *j)
{
	out->status = status;
	json_decref(out->json);
	out->json = j;
}

static void reply_code(serve_reply *out, int status, const char *code, const char *msg)
{
	serve__reply_json(out, status, json_pack("{s:s,s:o}", "code", code, "message", ops_string(msg, strlen(msg))));
}

void serve__reply_fail(serve_reply *out, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *m = NULL;
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	reply_code(out, status, code, m ? m : code);
	free(m);
}

void serve__reply_error(serve_reply *out, brig_error *err)
{
	const char *code;
	int status = serve__status(err ? err->code : 0, &code);
	reply_code(out, status, code, err && err->message ? err->message : "internal error");
	brig_error_free(err);
}

/* ---- brig-init handles ----
 *
 * A kept handle is lent to each operation that uses it (serve__guest
 * takes a reference, serve__guest_release gives it back). One retired
 * while lent (its computer stopped, it died) waits in s->old for its last
 * borrower; one nobody holds, or a racer's second open, is freed at once,
 * so stop/create loops leave no reader threads, eventfds or exec sockets
 * behind. */

/* Takes g out of use under s->lock: freed now (returned for the caller to
 * free outside the lock) or, while borrowed, parked until released. */
static brig_guest *retire_locked(serve_server *s, brig_guest *g, size_t refs)
{
	if (!g || refs == 0)
		return g;
	s->old = xrealloc(s->old, (s->n_old + 1) * sizeof *s->old);
	s->old[s->n_old++] = (held_guest){.g = g, .refs = refs};
	return NULL;
}

static kept_guest *kept_locked(serve_server *s, const char *name)
{
	for (size_t i = 0; i < s->n_guests; i++)
		if (strcmp(s->guests[i].name, name) == 0)
			return &s->guests[i];
	return NULL;
}

int serve__guest(serve_server *s, const char *name, brig_guest **out, brig_error **err)
{
	*out = NULL;
	brig_guest *dead = NULL;
	pthread_mutex_lock(&s->lock);
	kept_guest *k = kept_locked(s, name);
	if (k && k->g && !brig_guest_alive(k->g)) {
		dead = retire_locked(s, k->g, k->refs);
		k->g = NULL;
		k->refs = 0;
	}
	if (k && (k->g || k->none)) {
		if (k->g)
			k->refs++;
		*out = k->g;
		pthread_mutex_unlock(&s->lock);
		brig_guest_free(dead);
		return 0;
	}
	pthread_mutex_unlock(&s->lock);
	brig_guest_free(dead);
	/* Opened outside the lock (an exec into the container); two racers
	 * may both open one: the second's is freed. */
	brig_guest *g = NULL;
	brig_error *gerr = NULL;
	int rc = brig_computer_guest(s->cfg.engine, &g, name, &gerr);
	if (rc && rc != BRIG_ESTATE) {
		brig__error_move(err, gerr);
		return rc;
	}
	brig_error_free(gerr);
	pthread_mutex_lock(&s->lock);
	k = kept_locked(s, name);
	if (!k) {
		s->guests = xrealloc(s->guests, (s->n_guests + 1) * sizeof *s->guests);
		k = &s->guests[s->n_guests++];
		*k = (kept_guest){.name = xstrdup(name)};
	}
	if (!k->g) {
		k->g = steal_pointer(&g);
		k->refs = 0;
	}
	k->none = !k->g;
	if (k->g)
		k->refs++;
	*out = k->g;
	pthread_mutex_unlock(&s->lock);
	brig_guest_free(g); /* the racer's second one, never lent */
	return 0;
}

void serve__guest_release(serve_server *s, brig_guest *g)
{
	if (!g)
		return;
	brig_guest *last = NULL;
	pthread_mutex_lock(&s->lock);
	bool found = false;
	for (size_t i = 0; i < s->n_guests && !found; i++)
		if (s->guests[i].g == g && s->guests[i].refs > 0) {
			s->guests[i].refs--;
			found = true;
		}
	for (size_t i = 0; i < s->n_old && !found; i++)
		if (s->old[i].g == g) {
			found = true;
			if (--s->old[i].refs == 0) {
				last = g;
				s->old[i] = s->old[--s->n_old];
			}
		}
	pthread_mutex_unlock(&s->lock);
	brig_guest_free(last);
}

void serve__guest_forget(serve_server *s, const char *name)
{
	brig_guest *unused = NULL;
	pthread_mutex_lock(&s->lock);
	kept_guest *k = kept_locked(s, name);
	if (k) {
		unused = retire_locked(s, k->g, k->refs);
		free(k->name);
		*k = s->guests[--s->n_guests];
	}
	pthread_mutex_unlock(&s->lock);
	brig_guest_free(unused);
}

/* ---- metrics ---- */

void serve__exec_observe(serve_server *s, int64_t ms)
{
	pthread_mutex_lock(&s->lock);
	s->exec_count++;
	s->exec_sum_s += (double)ms / 1000.0;
	for (size_t i = 0; i < N_BUCKETS; i++)
		if ((double)ms <= exec_buckets_ms[i])
			s->exec_bucket[i]++;
	pthread_mutex_unlock(&s->lock);
}

static void count_error(serve_server *s, const char *code)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < MAX_CODES; i++) {
		if (!s->err_codes[i])
			s->err_codes[i] = xstrdup(code); /* a fixed set: MAX_CODES bounds it */
		if (strcmp(s->err_codes[i], code) == 0) {
			s->err_counts[i]++;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* The code an error answer is counted under: the API's own "code", or for a
 * JSON-RPC error of the MCP route (whose "code" is a number inside "error")
 * "mcp_" and what its HTTP status says, so that refusals on /v1/mcp are not
 * counted as internal errors. */
static const char *error_code_of(json_t *body, int status)
{
	json_t *c = json_object_get(body, "code");
	if (json_is_string(c))
		return json_string_value(c);
	if (!json_object_get(body, "jsonrpc") || !json_is_object(json_object_get(body, "error")))
		return "internal";
	switch (status) {
	case 400: return "mcp_invalid";
	case 401: return "mcp_unauthorized";
	case 403: return "mcp_forbidden";
	case 404: return "mcp_not_found";
	case 405: return "mcp_method";
	case 413: return "mcp_too_big";
	case 429: return "mcp_too_many";
	case 503: return "mcp_busy";
	default: return status < 500 ? "mcp_refused" : "mcp_error";
	}
}

void serve__metrics_write(serve_server *s, void *buf)
{
	brig_buf *b = buf;
	pthread_mutex_lock(&s->lock);
	brig_buf_puts(b, "# HELP brig_serve_requests_total Requests answered, by route.\n"
			 "# TYPE brig_serve_requests_total counter\n");
	for (size_t i = 0; i <= serve__route_count; i++)
		if (s->requests[i])
			brig_buf_putf(b, "brig_serve_requests_total{method=\"%s\",route=\"%s\"} %" PRIu64 "\n",
				      i < serve__route_count ? serve__routes[i].method : "",
				      i < serve__route_count ? serve__routes[i].path : "none", s->requests[i]);
	brig_buf_puts(b, "# HELP brig_serve_errors_total Error answers, by API code.\n"
			 "# TYPE brig_serve_errors_total counter\n");
	for (size_t i = 0; i < MAX_CODES && s->err_codes[i]; i++)
		brig_buf_putf(b, "brig_serve_errors_total{code=\"%s\"} %" PRIu64 "\n", s->err_codes[i],
			      s->err_counts[i]);
	brig_buf_puts(b, "# HELP brig_serve_exec_seconds Commands run through the API, start to exit.\n"
			 "# TYPE brig_serve_exec_seconds histogram\n");
	for (size_t i = 0; i < N_BUCKETS; i++)
		brig_buf_putf(b, "brig_serve_exec_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", exec_buckets_ms[i] / 1000.0,
			      s->exec_bucket[i]);
	brig_buf_putf(b, "brig_serve_exec_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", s->exec_count);
	brig_buf_putf(b, "brig_serve_exec_seconds_sum %.6f\nbrig_serve_exec_seconds_count %" PRIu64 "\n", s->exec_sum_s,
		      s->exec_count);
	brig_buf_putf(b,
		      "# HELP brig_serve_requests_in_flight Requests being answered.\n"
		      "# TYPE brig_serve_requests_in_flight gauge\nbrig_serve_requests_in_flight %zu\n",
		      s->inflight);
	pthread_mutex_unlock(&s->lock);
	serve_pools_metrics(s->pools, b);
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- routing ---- */

/* Splits url into r's params when it matches template t. */
static bool route_match(serve_req *r, const char *t, const char *url)
{
	size_t n = 0;
	const char *names[SERVE_MAX_PARAMS];
	const char *vals[SERVE_MAX_PARAMS];
	size_t lens[SERVE_MAX_PARAMS];
	while (*t && *url) {
		if (*t != '/' || *url != '/')
			return false;
		t++, url++;
		const char *te = strchr(t, '/'), *ue = strchr(url, '/');
		size_t tl = te ? (size_t)(te - t) : strlen(t), ul = ue ? (size_t)(ue - url) : strlen(url);
		if (tl > 2 && t[0] == '{' && t[tl - 1] == '}') {
			if (ul == 0 || n >= SERVE_MAX_PARAMS)
				return false;
			names[n] = t;
			vals[n] = url;
			lens[n++] = ul;
		} else if (tl != ul || memcmp(t, url, tl) != 0) {
			return false;
		}
		t += tl, url += ul;
	}
	if (*t || *url)
		return false;
	for (size_t i = 0; i < n; i++) {
		/* names point into the template: "{ns}/…" → "ns" kept as a
		 * static copy per route would be nicer; a small intern. */
		const char *e = strchr(names[i], '}');
		static const char *const known[] = {"ns", "agent", "session", "id", NULL};
		r->param_name[i] = "";
		for (size_t k = 0; known[k]; k++)
			if (strlen(known[k]) == (size_t)(e - names[i] - 1) &&
			    memcmp(known[k], names[i] + 1, strlen(known[k])) == 0)
				r->param_name[i] = known[k];
		r->param[i] = xstrndup(vals[i], lens[i]);
	}
	r->n_params = n;
	return true;
}

static void route_find(serve_req *r)
{
	for (size_t i = 0; i < serve__route_count; i++) {
		serve_req probe = {0};
		if (!route_match(&probe, serve__routes[i].path, r->url))
			continue;
		bool same = strcmp(serve__routes[i].method, r->method) == 0 ||
			    (strcmp(r->method, "HEAD") == 0 && strcmp(serve__routes[i].method, "GET") == 0);
		if (!same) {
			for (size_t k = 0; k < probe.n_params; k++)
				free(probe.param[k]);
			r->method_mismatch = true;
			continue;
		}
		r->route = &serve__routes[i];
		r->n_params = probe.n_params;
		for (size_t k = 0; k < probe.n_params; k++) {
			r->param_name[k] = probe.param_name[k];
			r->param[k] = probe.param[k];
		}
		return;
	}
}

/* ---- answering ---- */

typedef struct stream_ctx {
	ssize_t (*read)(void *payload, char *buf, size_t max);
	void (*done)(void *payload);
	void *payload;
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	stream_ctx *c = cls;
	ssize_t n = c->read(c->payload, buf, max);
	if (n == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

static void stream_free(void *cls)
{
	stream_ctx *c = cls;
	if (c->done)
		c->done(c->payload);
	free(c);
}

static enum MHD_Result send_reply(serve_req *r, serve_reply *rep, bool close_after)
{
	struct MHD_Response *resp;
	if (rep->upgrade) {
		/* libmicrohttpd wants "Connection" as the first header */
		resp = MHD_create_response_for_upgrade(on_upgrade, r->srv);
		if (!resp) {
			if (rep->done)
				rep->done(rep->payload);
			return MHD_NO;
		}
		MHD_add_response_header(resp, "Connection", "Upgrade");
		MHD_add_response_header(resp, "Upgrade", "tcp");
		r->upgrade_fn = rep->upgrade;
		r->upgrade_free = rep->done;
		r->upgrade_payload = rep->payload;
	} else if (rep->read) {
		stream_ctx *c = xmalloc(sizeof *c);
		*c = (stream_ctx){rep->read, rep->done, rep->payload};
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, c, stream_free);
		if (!resp) {
			stream_free(c);
			return MHD_NO;
		}
		MHD_add_response_header(resp, "Content-Type", rep->type ? rep->type : "application/x-ndjson");
	} else if (rep->has_fd) {
		resp = MHD_create_response_from_fd(rep->fd_size, rep->fd); /* owns the fd now */
		if (!resp)
			close(rep->fd);
		else if (rep->type)
			MHD_add_response_header(resp, "Content-Type", rep->type);
	} else if (rep->json) {
		char *text = json_dumps(rep->json, JSON_COMPACT | JSON_ENCODE_ANY);
		size_t n = text ? strlen(text) : 0;
		char *body = xasprintf("%s\n", text ? text : "null");
		free(text);
		resp = MHD_create_response_from_buffer(n + 1, body, MHD_RESPMEM_MUST_FREE);
		MHD_add_response_header(resp, "Content-Type", "application/json");
		if (rep->status >= 400)
			count_error(r->srv, error_code_of(rep->json, rep->status));
	} else {
		if (rep->status >= 400 && rep->data && rep->type && strcmp(rep->type, "application/json") == 0) {
			/* an answer a route wrote out itself (the MCP dispatcher's) */
			json_t *body = json_loadb(rep->data, rep->len, 0, NULL);
			count_error(r->srv, error_code_of(body, rep->status));
			json_decref(body);
		}
		resp = MHD_create_response_from_buffer(rep->len, rep->data ? rep->data : (char *)"",
						       rep->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
		rep->data = NULL;
		if (rep->type)
			MHD_add_response_header(resp, "Content-Type", rep->type);
	}
	if (!resp)
		return MHD_NO;
	if (rep->extra_header)
		MHD_add_response_header(resp, rep->extra_header, rep->extra_value);
	if (close_after)
		MHD_add_response_header(resp, "Connection", "close");
	r->status = rep->status ? rep->status : 200;
	r->answered = true;
	enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	json_decref(rep->json);
	rep->json = NULL;
	return ok;
}

/* The 101 is out: the route's stream from here, counted in flight until
 * serve__upgraded_close so that the drain waits for it. */
static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra, size_t extra_len,
		       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	serve_server *s = cls;
	serve_req *r = con_cls;
	serve_upgraded *u = xcalloc(1, sizeof *u);
	*u = (serve_upgraded){.srv = s, .fd = (int)sock, .urh = urh, .token = r->token, .stream = r->stream};
	r->stream = false; /* the stream's now, until serve__upgraded_close */
	conn_track *t = track_of(conn);
	pthread_mutex_lock(&s->lock);
	if (t)
		t->upgraded = true;
	u->next = s->upgraded;
	s->upgraded = u;
	s->inflight++;
	pthread_mutex_unlock(&s->lock);
	void *payload = r->upgrade_payload;
	r->upgrade_payload = NULL;
	r->upgrade_fn(payload, u, extra, extra_len);
}

int serve__upgraded_fd(const serve_upgraded *u)
{
	return u->fd;
}

void serve__upgraded_close(serve_upgraded *u)
{
	serve_server *s = u->srv;
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	pthread_mutex_lock(&s->lock);
	for (serve_upgraded **pp = &s->upgraded; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	s->inflight--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (u->stream)
		slot_leave(s, u->token, true);
	free(u);
}

static enum MHD_Result answer_fail(serve_req *r, int status, const char *code, const char *msg, bool close)
{
	serve_reply rep = {0};
	reply_code(&rep, status, code, msg);
	return send_reply(r, &rep, close);
}

static enum MHD_Result query_token_it(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind, (void)value;
	bool *found = cls;
	if (key &&
	    (strcasecmp(key, "token") == 0 || strcasecmp(key, "access_token") == 0 || strcasecmp(key, "api_key") == 0 ||
	     strcasecmp(key, "apikey") == 0 || strcasecmp(key, "authorization") == 0 || strcasecmp(key, "auth") == 0)) {
		*found = true;
		return MHD_NO;
	}
	return MHD_YES;
}

/* A refusal decided before the body is read; answered once the body was
 * read (and dropped), so the client is not cut off mid-send and the
 * connection stays usable. */
static void refuse(serve_req *r, int status, const char *code, const char *msg, bool close)
{
	r->refused = status;
	r->refused_code = code;
	r->refused_msg = msg;
	r->refused_close = close;
}

static bool spooled(const serve_req *r)
{
	return r->route && (r->route->flags & ROUTE_SPOOL);
}

/* The largest body r may send: a spooled route's goes to a file. */
static size_t body_cap_of(const serve_req *r)
{
	return spooled(r) ? r->srv->cfg.upload_max : r->srv->cfg.body_max;
}

/* An unnamed file for a spooled body, where temporary files go. */
static int spool_open(void)
{
	const char *t = getenv("TMPDIR");
	int fd = open(t && *t == '/' ? t : "/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd >= 0 ? fd : open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

int serve__body_fd(serve_req *r)
{
	if (r->spool_errno) {
		errno = r->spool_errno;
		return -1;
	}
	if (r->spool_fd < 0 && (r->spool_fd = spool_open()) < 0)
		return -1;
	return lseek(r->spool_fd, 0, SEEK_SET) == 0 ? r->spool_fd : -1;
}

/* The checks made before any body is read. Returns true when it answered
 * at once (a body too large to read). */
static bool early_checks(serve_req *r, enum MHD_Result *ret)
{
	serve_server *s = r->srv;
	const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
	if (cl) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(cl, &end, 10);
		if (errno || *end || v > body_cap_of(r)) {
			char m[96];
			snprintf(m, sizeof m, "the body is larger than %zu bytes", body_cap_of(r));
			*ret = answer_fail(r, 413, "too_big", m, true);
			return true;
		}
	}
	conn_track *t = track_of(r->conn);
	pthread_mutex_lock(&s->lock);
	bool draining = s->draining, nul = t && t->nul;
	if (t)
		t->nul = false;
	pthread_mutex_unlock(&s->lock);
	if (nul) {
		refuse(r, 400, "invalid", "the URL holds a NUL byte (%00)", false);
		return false;
	}
	if (draining) {
		refuse(r, 503, "shutting_down", "the server is shutting down; retry on another", true);
		return false;
	}
	bool qtok = false;
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_token_it, &qtok);
	if (qtok) {
		refuse(r, 401, "unauthorized",
		       "a token in the query string is refused (it would end up in logs): send "
		       "\"Authorization: Bearer TOKEN\"",
		       false);
		return false;
	}
	if (s->tokens && !(r->route && (r->route->flags & ROUTE_PUBLIC))) {
		const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
		r->token = serve_tokens_match(s->tokens, h);
		if (!r->token) {
			refuse(r, 401, "unauthorized",
			       h ? "the token is not valid" : "send \"Authorization: Bearer TOKEN\"", false);
			return false;
		}
	}
	if (!r->route) {
		if (r->method_mismatch)
			refuse(r, 405, "method_not_allowed", "this path does not take that method", false);
		else
			refuse(r, 404, "no_route", "no such route (see /v1/openapi.json)", false);
		return false;
	}
	if ((r->route->flags & ROUTE_ALL_NS) && !serve_tokens_all(r->token)) {
		refuse(r, 403, "forbidden", "this route needs a token of every namespace (*)", false);
		return false;
	}
	const char *ns = serve__param(r, "ns");
	if (ns && !serve_tokens_allows(r->token, ns)) {
		refuse(r, 403, "forbidden", "the token does not cover this namespace", false);
		return false;
	}
	/* Taken before the body is read: an upload holds memory too. */
	if ((r->route->flags & ROUTE_STREAM) && !(r->stream = slot_enter(s, r->token, true))) {
		static __thread char m[160];
		snprintf(m, sizeof m,
			 "this token already has %u attach streams open (the server's limit): close one, or retry "
			 "later",
			 s->cfg.streams_max);
		refuse(r, 429, "too_many", m, false);
	}
	if ((r->route->flags & ROUTE_HEAVY) && !(r->heavy = slot_enter(s, r->token, false))) {
		static __thread char m[160];
		snprintf(m, sizeof m,
			 "this token already has %u tar or run calls in flight (the server's limit): retry when "
			 "one has ended",
			 s->cfg.heavy_max);
		refuse(r, 429, "too_many", m, false);
	}
	return false;
}

static void dispatch(serve_req *r, serve_reply *rep)
{
	if (!(r->route->flags & ROUTE_RAW_BODY)) {
		brig_error *err = NULL;
		if (serve_body_parse(&r->json, r->body ? r->body : "", r->body_len, &err) != 0) {
			reply_code(rep, 400, "malformed_json", brig_error_message(err));
			brig_error_free(err);
			return;
		}
	}
	r->route->fn(r, rep);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	serve_server *s = cls;
	serve_req *r = *con_cls;
	if (!r) {
		r = xcalloc(1, sizeof *r);
		r->spool_fd = -1;
		r->srv = s;
		r->conn = conn;
		r->method = xstrdup(method);
		r->url = xstrdup(url);
		r->http10 = version && strcmp(version, "HTTP/1.0") == 0;
		r->started_us = now_us();
		*con_cls = r;
		track_phase(s, conn, false);
		pthread_mutex_lock(&s->lock);
		s->inflight++;
		pthread_mutex_unlock(&s->lock);
		route_find(r);
		enum MHD_Result ret;
		if (early_checks(r, &ret))
			return ret;
		return MHD_YES;
	}
	if (r->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (r->refused) {
			/* dropped unread, but not forever: a refused client (no
			 * token, say) gets no more body than an accepted one */
			r->refused_len += n;
			return r->refused_len > s->cfg.body_max ? MHD_NO : MHD_YES;
		}
		if (r->over || r->body_len + n > body_cap_of(r)) {
			r->over = true;
			return MHD_YES;
		}
		if (spooled(r)) {
			if (!r->spool_errno && r->spool_fd < 0 && (r->spool_fd = spool_open()) < 0)
				r->spool_errno = errno;
			if (!r->spool_errno && brig_write_all(r->spool_fd, upload, n) != 0)
				r->spool_errno = errno ? errno : EIO;
			r->body_len += n;
			return MHD_YES;
		}
		if (r->body_len + n + 1 > r->body_cap) {
			r->body_cap = (r->body_len + n + 1) * 2;
			if (r->body_cap > s->cfg.body_max + 1)
				r->body_cap = s->cfg.body_max + 1;
			r->body = xrealloc(r->body, r->body_cap);
		}
		memcpy(r->body + r->body_len, upload, n);
		r->body_len += n;
		r->body[r->body_len] = 0;
		return MHD_YES;
	}
	if (r->refused)
		return answer_fail(r, r->refused, r->refused_code, r->refused_msg, r->refused_close);
	if (r->over) {
		char m[96];
		snprintf(m, sizeof m, "the body is larger than %zu bytes", body_cap_of(r));
		return answer_fail(r, 413, "too_big", m, true);
	}
	if (r->spool_errno) {
		char m[128];
		snprintf(m, sizeof m, "the body cannot be kept: %s", strerror(r->spool_errno));
		return answer_fail(r, 500, "io", m, true);
	}
	serve_reply rep = {0};
	dispatch(r, &rep);
	return send_reply(r, &rep, false);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	serve_server *s = cls;
	serve_req *r = *con_cls;
	track_phase(s, conn, true);
	if (!r)
		return;
	*con_cls = NULL;
	int64_t ms10 = (now_us() - r->started_us) / 100;
	fprintf(stderr, "brig: serve: %s %s %d %" PRId64 ".%" PRId64 "ms%s\n", r->method,
		r->route ? r->route->path : "-", r->answered ? r->status : 0, ms10 / 10, ms10 % 10,
		toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
	pthread_mutex_lock(&s->lock);
	s->requests[r->route ? (size_t)(r->route - serve__routes) : serve__route_count]++;
	s->inflight--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (r->upgrade_payload && r->upgrade_free) /* the 101 never went out */
		r->upgrade_free(r->upgrade_payload);
	if (r->heavy)
		slot_leave(s, r->token, false);
	if (r->stream) /* the 101 never went out */
		slot_leave(s, r->token, true);
	for (size_t i = 0; i < r->n_params; i++)
		free(r->param[i]);
	json_decref(r->json);
	free(r->body);
	if (r->spool_fd >= 0)
		close(r->spool_fd);
	free(r->method);
	free(r->url);
	free(r);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fputs("brig: serve: ", stderr);
	vfprintf(stderr, fmt, ap);
	size_t n = strlen(fmt);
	if (!n || fmt[n - 1] != '\n')
		fputc('\n', stderr);
}

/* ---- the header deadline ---- */

static conn_track *track_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static void track_phase(serve_server *s, struct MHD_Connection *conn, bool in_headers)
{
	conn_track *t = track_of(conn);
	if (!t)
		return;
	pthread_mutex_lock(&s->lock);
	t->in_headers = in_headers;
	t->phase_ms = brig_now_ms();
	pthread_mutex_unlock(&s->lock);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **ctx, enum MHD_ConnectionNotificationCode toe)
{
	serve_server *s = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		conn_track *t = xcalloc(1, sizeof *t);
		t->fd = ci ? (int)ci->connect_fd : -1;
		t->phase_ms = brig_now_ms();
		t->in_headers = true;
		pthread_mutex_lock(&s->lock);
		t->next = s->conns;
		s->conns = t;
		pthread_mutex_unlock(&s->lock);
		*ctx = t;
		return;
	}
	conn_track *t = *ctx;
	*ctx = NULL;
	pthread_mutex_lock(&s->lock);
	for (conn_track **pp = &s->conns; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	free(t);
}

/* libmicrohttpd's own decoding, noting a %00: the path the routes see is a
 * C string, so "/v1/x/s%00y" would act on "/v1/x/s". */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	serve_server *srv = cls;
	size_t n = MHD_http_unescape(s);
	conn_track *t = strlen(s) != n ? track_of(conn) : NULL;
	if (t) {
		pthread_mutex_lock(&srv->lock);
		t->nul = true;
		pthread_mutex_unlock(&srv->lock);
	}
	return n;
}

static void *watchdog_thread(void *arg)
{
	serve_server *s = arg;
	int64_t limit = (int64_t)s->cfg.header_timeout_s * 1000;
	pthread_mutex_lock(&s->lock);
	while (!s->watchdog_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
		int64_t now = brig_now_ms();
		for (conn_track *t = s->conns; t; t = t->next)
			if (t->in_headers && !t->cut && !t->upgraded && t->fd >= 0 && now - t->phase_ms > limit) {
				/* libmicrohttpd's thread sees the error and closes it. */
				shutdown(t->fd, SHUT_RDWR);
				t->cut = true;
				fprintf(stderr,
					"brig: serve: dropped a connection that sent no complete request in %us\n",
					s->cfg.header_timeout_s);
			}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- listening ---- */

static int listen_unix(const char *path, bool is_default, brig_error **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return brig__error_set(err, BRIG_EINVAL, 0, "--listen unix://%s: the path is too long", path);
	strcpy(sa.sun_path, path);
	if (is_default && mkdir("/run/brig", 0755) != 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "cannot make /run/brig: %s", strerror(errno));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "socket: %s", strerror(errno));
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return brig__error_set(err, BRIG_EINVAL, 0, "%s exists and is not a socket", path);
		}
		/* A socket nobody answers on is a dead server's: replace it. */
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
			close(fd);
			return brig__error_set(err, BRIG_EIO, EADDRINUSE, "another server listens on %s", path);
		}
		unlink(path);
	}
	struct group *grp = getgrnam("brig");
	mode_t mode = grp ? 0660 : 0600;
	mode_t old = umask(0177);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc != 0 || (grp && chown(path, (uid_t)-1, grp->gr_gid) != 0) || chmod(path, mode) != 0 ||
	    listen(fd, 128) != 0) {
		int e = errno;
		close(fd);
		return brig__error_set(err, BRIG_EIO, e, "cannot listen on %s: %s", path, strerror(e));
	}
	return fd;
}

static int listen_tcp(const char *hostport, brig_error **err)
{
	const char *colon = strrchr(hostport, ':');
	if (!colon || colon == hostport || !colon[1])
		return brig__error_set(err, BRIG_EINVAL, 0, "--listen tcp://HOST:PORT: give both");
	char *host = xstrndup(hostport, (size_t)(colon - hostport));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = 0;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
	int g = getaddrinfo(host, colon + 1, &hints, &ai);
	free(host);
	if (g)
		return brig__error_set(err, BRIG_EINVAL, 0, "--listen tcp://%s: %s", hostport, gai_strerror(g));
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return brig__error_set(err, BRIG_EIO, e, "cannot listen on tcp://%s: %s", hostport, strerror(e));
	}
	freeaddrinfo(ai);
	return fd;
}

static int read_file(char **out, const char *path, size_t max, const char *what, brig_error **err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return brig__error_set(err, BRIG_EINVAL, errno, "%s %s: %s", what, path, strerror(errno));
	brig_buf b;
	brig_buf_init(&b, max);
	char chunk[8192];
	ssize_t n;
	int rc = 0;
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		if (brig_buf_add(&b, chunk, (size_t)n) != 0) {
			rc = brig__error_set(err, BRIG_EINVAL, 0, "%s %s: larger than %zu bytes", what, path, max);
			break;
		}
	if (n < 0)
		rc = brig__error_set(err, BRIG_EINVAL, errno, "%s %s: %s", what, path, strerror(errno));
	close(fd);
	if (rc) {
		explicit_bzero(b.data, b.len);
		brig_buf_free(&b);
		return rc;
	}
	brig_buf_put(&b, "", 1);
	*out = brig_buf_steal(&b, NULL);
	return 0;
}

static void server_free(serve_server *s)
{
	serve__mcp_free(s->mcp);
	serve_tokens_free(s->tokens);
	for (size_t i = 0; i < s->n_guests; i++) {
		brig_guest_free(s->guests[i].g);
		free(s->guests[i].name);
	}
	for (size_t i = 0; i < s->n_old; i++)
		brig_guest_free(s->old[i].g);
	free(s->guests);
	free(s->old);
	free(s->heavy);
	for (int i = 0; i < 2; i++) {
		if (s->cancel[i] >= 0)
			close(s->cancel[i]);
		if (s->drain[i] >= 0)
			close(s->drain[i]);
	}
	free(s->requests);
	for (size_t i = 0; i < MAX_CODES; i++)
		free(s->err_codes[i]);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

int serve_run(const serve_config *cfg, brig_error **err)
{
	/* A secret's value only ever comes with a request (routes.c). */
	brig_egress__secrets_env_off();
	int rc = brig__mhd_load(err);
	if (rc)
		return rc;
	const char *listen = cfg->listen ? cfg->listen : "unix://" SERVE_DEFAULT_SOCKET;
	bool tcp = strncmp(listen, "tcp://", 6) == 0;
	if (!tcp && strncmp(listen, "unix://", 7) != 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "--listen %s: give unix:///PATH or tcp://HOST:PORT",
				       listen);
	if (tcp && (!cfg->tls_cert || !cfg->tls_key || !cfg->tokens))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "--listen tcp:// needs --tls-cert, --tls-key and --tokens: brig does not serve "
				       "plain or anonymous HTTP on a network");
	if (!tcp && (cfg->tls_cert || cfg->tls_key))
		return brig__error_set(err, BRIG_EINVAL, 0, "--tls-cert and --tls-key go with --listen tcp://");
	if (tcp && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return brig__error_set(err, BRIG_EINVAL, 0, "this libmicrohttpd was built without TLS");

	/* A client that left must not kill the server: writes to a gone
	 * stream's pipe fail with EPIPE instead. */
	signal(SIGPIPE, SIG_IGN);
	serve_server *s = xcalloc(1, sizeof *s);
	s->cfg = *cfg;
	if (!s->cfg.body_max)
		s->cfg.body_max = SERVE_BODY_MAX;
	if (!s->cfg.upload_max)
		s->cfg.upload_max = SERVE_UPLOAD_MAX;
	if (!s->cfg.header_timeout_s)
		s->cfg.header_timeout_s = SERVE_HEADER_TIMEOUT_S;
	if (!s->cfg.drain_s)
		s->cfg.drain_s = SERVE_DRAIN_S;
	if (!s->cfg.heavy_max)
		s->cfg.heavy_max = SERVE_HEAVY_MAX;
	if (!s->cfg.streams_max)
		s->cfg.streams_max = SERVE_STREAMS_MAX;
	s->cancel[0] = s->cancel[1] = s->drain[0] = s->drain[1] = -1;
	s->requests = xcalloc(serve__route_count + 1, sizeof *s->requests);
	s->mcp = serve__mcp_new();
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pipe2(s->cancel, O_CLOEXEC) != 0 || pipe2(s->drain, O_CLOEXEC) != 0) {
		rc = brig__error_set(err, BRIG_EIO, errno, "pipe: %s", strerror(errno));
		server_free(s);
		return rc;
	}

	char *cert = NULL, *key = NULL, *toks = NULL;
	int fd = -1;
	if (cfg->tokens) {
		struct stat st;
		if (lstat(cfg->tokens, &st) == 0 && !S_ISREG(st.st_mode)) {
			rc = brig__error_set(err, BRIG_EINVAL, 0, "tokens file %s: not a regular file (a symlink?)",
					     cfg->tokens);
			goto out;
		}
		if (stat(cfg->tokens, &st) == 0 && st.st_uid != geteuid()) {
			rc = brig__error_set(err, BRIG_EINVAL, 0,
					     "tokens file %s: owned by uid %u, not by this server's", cfg->tokens,
					     (unsigned)st.st_uid);
			goto out;
		}
		if (stat(cfg->tokens, &st) == 0 && (st.st_mode & 0077)) {
			rc = brig__error_set(err, BRIG_EINVAL, 0,
					     "tokens file %s: readable or writable by group or others; chmod 600 it",
					     cfg->tokens);
			goto out;
		}
		if ((rc = read_file(&toks, cfg->tokens, SERVE_TOKENS_MAX, "tokens file", err)) ||
		    (rc = serve_tokens_parse(&s->tokens, toks, strlen(toks), err)))
			goto out;
	}
	if (tcp && ((rc = read_file(&cert, cfg->tls_cert, 1 << 20, "--tls-cert", err)) ||
		    (rc = read_file(&key, cfg->tls_key, 1 << 20, "--tls-key", err))))
		goto out;
	fd = tcp ? listen_tcp(listen + 6, err) : listen_unix(listen + 7, !cfg->listen, err);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	struct MHD_OptionItem opts[] = {
		{MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL},
		{MHD_OPTION_LISTEN_SOCKET, fd, NULL},
		{MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
		{MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
		{MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)on_unescape, s},
		{MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)s->cfg.header_timeout_s, NULL},
		{MHD_OPTION_CONNECTION_LIMIT, SERVE_MAX_CONNECTIONS, NULL},
		{MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)SERVE_HEADER_MAX, NULL},
		{tcp ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
		{tcp ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
		{tcp ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END, 0, (void *)SERVE_TLS_PRIORITY},
		{MHD_OPTION_END, 0, NULL},
	};
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
			 MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE | (tcp ? MHD_USE_TLS : 0);
	if ((rc = serve_pools_start(&s->pools, cfg, listen, err)) != 0)
		goto out;
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!s->d) {
		rc = brig__error_set(err, BRIG_EIO, 0, "libmicrohttpd did not start on %s (see the lines above)",
				     listen);
		goto out;
	}
	s->watchdog_started = pthread_create(&s->watchdog, NULL, watchdog_thread, s) == 0;
	fprintf(stderr, "brig: serve: listening on %s%s\n", listen, s->tokens ? " (tokens required)" : "");

	struct pollfd p = {.fd = cfg->stop_fd, .events = POLLIN};
	while (cfg->stop_fd >= 0 && poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	if (cfg->stop_fd < 0)
		pause();

	/* Drain: no new connections; requests in flight finish. */
	pthread_mutex_lock(&s->lock);
	s->draining = true;
	size_t left = s->inflight;
	pthread_mutex_unlock(&s->lock);
	(void)!write(s->drain[1], "x", 1); /* event streams end: they never finish on their own */
	fprintf(stderr, "brig: serve: stopping: %zu request(s) in flight\n", left);
	MHD_socket lfd = MHD_quiesce_daemon(s->d);
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd);
	fd = -1;
	if (!tcp)
		unlink(listen + 7);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += s->cfg.drain_s;
	pthread_mutex_lock(&s->lock);
	while (s->inflight && pthread_cond_timedwait(&s->cond, &s->lock, &until) != ETIMEDOUT)
		;
	left = s->inflight;
	pthread_mutex_unlock(&s->lock);
	if (left) {
		/* Execs and runs still going are cancelled (brig-init ends their
		 * trees, a run's container is removed) and answered; then the
		 * connections are closed. */
		fprintf(stderr, "brig: serve: %zu request(s) still running after %us: cancelling them\n", left,
			s->cfg.drain_s);
		(void)!write(s->cancel[1], "x", 1);
		until.tv_sec += SERVE_CANCEL_GRACE_S;
		pthread_mutex_lock(&s->lock);
		/* raw streams are hung up now: that is their cancel */
		for (serve_upgraded *u = s->upgraded; u; u = u->next)
			shutdown(u->fd, SHUT_RDWR);
		while (s->inflight && pthread_cond_timedwait(&s->cond, &s->lock, &until) != ETIMEDOUT)
			;
		left = s->inflight;
		pthread_mutex_unlock(&s->lock);
		if (left)
			fprintf(stderr, "brig: serve: %zu request(s) still running: closing them\n", left);
	}
	/* Raw streams still open are hung up: their commands are cancelled
	 * and they close themselves (libmicrohttpd must not free them first). */
	pthread_mutex_lock(&s->lock);
	for (serve_upgraded *u = s->upgraded; u; u = u->next)
		shutdown(u->fd, SHUT_RDWR);
	while (s->upgraded)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->d);
	if (s->watchdog_started) {
		pthread_mutex_lock(&s->lock);
		s->watchdog_stop = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->watchdog, NULL);
	}
	serve_pools_stop(s->pools);
	s->pools = NULL;
	fprintf(stderr, "brig: serve: stopped\n");
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (key) {
		explicit_bzero(key, strlen(key));
		free(key);
	}
	if (toks) {
		explicit_bzero(toks, strlen(toks));
		free(toks);
	}
	free(cert);
	serve_pools_stop(s->pools);
	server_free(s);
	return rc;
}

void serve_routes_write(FILE *f)
{
	for (size_t i = 0; i < serve__route_count; i++)
		fprintf(f, "%s %s\n", serve__routes[i].method, serve__routes[i].path);
}
