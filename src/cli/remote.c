/* remote.c — the CLI as a client of `brig serve`: BRIG_HOST (or -H
 * brig+…) names the server, BRIG_TOKEN goes along as a bearer token (never
 * printed), and requests travel on brig's own HTTP client (src/http). */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brig/common.h"
#include "cli/cli.h"
#include "cli/remote_parse.h"
#include "http/http.h"
#include "serve/serve.h"
#include "util/util.h"

/* Answers of the server are JSON and small, but ls of many computers is
 * not tiny: a generous cap. */
#define REMOTE_BODY_CAP (16 * 1024 * 1024)

struct cli_remote {
	brig_http_endpoint ep;
	brig_http_conn *c;
	char *auth; /* "Authorization: Bearer …" or NULL */
};

const char *cli_remote_host(void)
{
	const char *h = getenv("BRIG_HOST");
	return h && *h ? h : NULL;
}

/* The endpoint of url; on error a message (without the token, which is not
 * part of url) is printed. */
static int remote_endpoint(brig_http_endpoint *ep, const char *url)
{
	brig_error *err = NULL;
	if (strncmp(url, "brig+unix://", 12) == 0) {
		if (url[12] != '/')
			return cli_fail("BRIG_HOST: give brig+unix:///PATH (an absolute socket path)");
		if (brig_http_endpoint_parse(ep, url + 5, false, NULL, &err) != 0) {
			brig_error_free(err);
			return cli_fail("BRIG_HOST: the socket path is empty or longer than 107 bytes");
		}
		return 0;
	}
	if (strncmp(url, "brig+https://", 13) == 0) {
		const char *dir = getenv("BRIG_CERT_PATH");
		if (!dir || !*dir)
			return cli_fail("BRIG_HOST: brig+https needs BRIG_CERT_PATH, a directory holding ca.pem (the "
					"server's CA; cert.pem and key.pem too when the server asks for a client "
					"certificate)");
		cleanup_free char *tcp = xasprintf("tcp://%s", url + 13);
		size_t n = strlen(tcp);
		if (n > 6 && tcp[n - 1] == '/')
			tcp[n - 1] = '\0';
		if (brig_http_endpoint_parse(ep, tcp, true, dir, &err) != 0) {
			const char *m = brig_error_message(err);
			const char *why = strncmp(m, "DOCKER_HOST: ", 13) == 0 ? m + 13 : m;
			int rc = cli_fail("BRIG_HOST: %s (give brig+https://HOST:PORT)", why);
			brig_error_free(err);
			return rc;
		}
		return 0;
	}
	return cli_fail("BRIG_HOST: '%.64s' is not a brig server; give brig+unix:///PATH or brig+https://HOST:PORT "
			"(unset BRIG_HOST to talk to Docker directly)",
			url);
}

int cli_remote_check(void)
{
	const char *url = cli_remote_host();
	if (!url)
		return 0;
	brig_http_endpoint ep;
	int rc = remote_endpoint(&ep, url);
	if (rc == 0)
		brig_http_endpoint_clear(&ep);
	return rc;
}

int cli_remote_open(cli_remote **out)
{
	*out = NULL;
	const char *url = cli_remote_host();
	if (!url)
		return cli_fail("BRIG_HOST is not set");
	cli_remote *r = xcalloc(1, sizeof *r);
	if (remote_endpoint(&r->ep, url) != 0) {
		free(r);
		return CLI_EXIT_FAIL;
	}
	const char *tok = getenv("BRIG_TOKEN");
	if (tok && *tok) {
		if (strpbrk(tok, "\r\n")) {
			cli_remote_free(r);
			return cli_fail("BRIG_TOKEN holds a line break: give the token alone");
		}
		r->auth = xasprintf("Authorization: Bearer %s", tok);
	}
	brig_error *err = NULL;
	if (brig_http_connect(&r->c, &r->ep, brig_now_ms() + 30000, &err) != 0) {
		cli_remote_free(r);
		return cli_error(err, "cannot reach the brig server named by BRIG_HOST");
	}
	*out = r;
	return 0;
}

void cli_remote_free(cli_remote *r)
{
	if (!r)
		return;
	brig_http_conn_free(r->c);
	brig_http_endpoint_clear(&r->ep);
	if (r->auth) {
		explicit_bzero(r->auth, strlen(r->auth));
		free(r->auth);
	}
	free(r);
}

/* ---- requests ---- */

/* The server's error answer as a brig_error: its message, and the code its
 * status means. */
static int remote_err(brig_error **err, int status, const char *body, size_t len)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));
	int code = status == 400 ? BRIG_EINVAL
		   : status == 401 || status == 403 ? BRIG_EDENIED
		   : status == 404 ? BRIG_ENOTFOUND
		   : status == 409 ? BRIG_ESTATE
		   : status == 413 ? BRIG_ETOOBIG
		   : status == 429 ? BRIG_EBUSY
				   : BRIG_EDAEMON;
	int rc = status == 401 ? brig__error_set_http(err, code, status,
						      "the brig server refused the request: %s (set BRIG_TOKEN to a "
						      "token it accepts)",
						      m ? m : "no valid token")
		 : m ? brig__error_set_http(err, code, status, "%s", m)
		     : brig__error_set_http(err, code, status, "the brig server answered HTTP %d", status);
	json_decref(j);
	return rc;
}

/* Prints the server's error answer {"code","message"} (or what the status
 * says; with --debug, the server's code and the status too) and returns
 * CLI_EXIT_FAIL. */
int cli_remote__error(int status, const char *body, size_t len)
{
	brig_error *e = NULL;
	remote_err(&e, status, body, len);
	int rc;
	if (cli_debug) {
		json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
		const char *code = json_string_value(json_object_get(j, "code"));
		rc = cli_fail("%s [%s, HTTP %d]", brig_error_message(e), code ? code : "?", status);
		json_decref(j);
	} else {
		rc = cli_fail("%s", brig_error_message(e));
	}
	brig_error_free(e);
	return rc;
}

static int remote_send(cli_remote *r, const char *method, const char *target, json_t *body, brig_http_response *resp,
		       size_t cap, brig_http_body_cb cb, void *payload)
{
	cleanup_free char *data = body ? json_dumps(body, JSON_COMPACT) : NULL;
	const char *hdrs[2] = {r->auth, NULL};
	brig_http_request req = {
		.method = method,
		.target = target,
		.content_type = data ? "application/json" : NULL,
		.extra_headers = hdrs,
		.body = data,
		.body_len = data ? strlen(data) : 0,
	};
	brig_error *err = NULL;
	int rc = brig_http_roundtrip(r->c, &req, resp, cap, cb, payload, &err);
	if (rc != 0) {
		brig_error_free(err);
		return rc;
	}
	return 0;
}

int cli_remote_call(cli_remote *r, const char *method, const char *target, json_t *body, json_t **out)
{
	return cli_remote_request(r, method, target, body, NULL, out);
}

int cli_remote_request(cli_remote *r, const char *method, const char *target, json_t *body, int *status, json_t **out)
{
	*out = NULL;
	brig_http_response resp;
	memset(&resp, 0, sizeof resp);
	int rc = remote_send(r, method, target, body, &resp, REMOTE_BODY_CAP, NULL, NULL);
	if (rc != 0) {
		brig_http_response_clear(&resp);
		return cli_fail("the brig server's connection broke before its answer was complete");
	}
	if (status)
		*status = resp.status;
	if (status && resp.status == 404) { /* the caller words it */
		brig_http_response_clear(&resp);
		return 0;
	}
	if (resp.status < 200 || resp.status > 299) {
		rc = cli_remote__error(resp.status, resp.body.data, resp.body.len);
		brig_http_response_clear(&resp);
		return rc;
	}
	*out = resp.body.len ? json_loadb(resp.body.data, resp.body.len, 0, NULL) : json_object();
	brig_http_response_clear(&resp);
	if (!*out)
		return cli_fail("the brig server's answer is not JSON");
	return 0;
}

/* Ctrl-C while a stream is read: a thread waits on the cancel pipe and
 * shuts the connection, which the server takes as the client leaving (it
 * cancels the command); the read then ends. */
typedef struct cancel_watch {
	int cancel_fd, conn_fd;
	int stop[2];
	bool fired;
	pthread_t th;
	bool started;
} cancel_watch;

static void *watch_cancel(void *arg)
{
	cancel_watch *w = arg;
	struct pollfd p[2] = {{.fd = w->cancel_fd, .events = POLLIN}, {.fd = w->stop[0], .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0)
			continue; /* EINTR */
		if (p[1].revents)
			return NULL;
		if (p[0].revents) {
			w->fired = true;
			shutdown(w->conn_fd, SHUT_RDWR);
			return NULL;
		}
	}
}

static void watch_start(cancel_watch *w, int cancel_fd, int conn_fd)
{
	*w = (cancel_watch){.cancel_fd = cancel_fd, .conn_fd = conn_fd, .stop = {-1, -1}};
	if (cancel_fd < 0 || pipe2(w->stop, O_CLOEXEC) != 0)
		return;
	w->started = pthread_create(&w->th, NULL, watch_cancel, w) == 0;
}

/* Returns whether the watch fired. */
static bool watch_stop(cancel_watch *w)
{
	if (w->started) {
		(void)!write(w->stop[1], "x", 1);
		pthread_join(w->th, NULL);
	}
	if (w->stop[0] >= 0) {
		close(w->stop[0]);
		close(w->stop[1]);
	}
	return w->fired;
}

/* The body of the stream: NDJSON lines on a 2xx, else an error answer
 * collected whole. The status is known before the first body byte (the
 * parser has the headers), which may come in the read that ends them. */
typedef struct stream_body {
	cli_ndjson lr;
	const brig_http_response *resp;
	bool decided;
} stream_body;

static int stream_body_cb(const char *data, size_t len, void *payload)
{
	stream_body *b = payload;
	if (!b->decided) {
		b->lr.lines = b->resp->status >= 200 && b->resp->status <= 299;
		b->decided = true;
	}
	return cli_ndjson_feed(data, len, &b->lr);
}

int cli_remote_stream(cli_remote *r, const char *method, const char *target, json_t *body, int cancel_fd,
		      cli_remote_line_cb cb, void *payload)
{
	/* The status comes before the body: an error answer is collected and
	 * printed, a 200 is read line by line. */
	brig_http_response resp;
	memset(&resp, 0, sizeof resp);
	stream_body sb = {.resp = &resp};
	cli_ndjson_init(&sb.lr, cb, payload);
	cli_ndjson *lr = &sb.lr;
	brig_http_exchange x;
	brig_error *err = NULL;
	cleanup_free char *data = body ? json_dumps(body, JSON_COMPACT) : NULL;
	const char *hdrs[2] = {r->auth, NULL};
	brig_http_request req = {
		.method = method,
		.target = target,
		.content_type = data ? "application/json" : NULL,
		.extra_headers = hdrs,
		.body = data,
		.body_len = data ? strlen(data) : 0,
	};
	cancel_watch w;
	watch_start(&w, cancel_fd, brig_http_conn_fd(r->c));
	int rc = brig_http_exchange_send(&x, r->c, &req, &resp, REMOTE_BODY_CAP, stream_body_cb, &sb, &err);
	if (rc == 0)
		rc = brig_http_exchange_read(&x, false, 0, &err);
	brig_http_exchange_end(&x);
	brig_error_free(err);
	if (watch_stop(&w))
		rc = CLI_EXIT_CANCELED; /* the caller words it */
	else if (lr->stop)
		rc = lr->stop;
	else if (rc == 0 && (resp.status < 200 || resp.status > 299))
		/* the error answer was collected whole in the line buffer */
		rc = cli_remote__error(resp.status, lr->line.data, lr->line.len);
	else if (lr->too_long)
		rc = cli_fail("the brig server sent a line longer than %d bytes", CLI_NDJSON_LINE_CAP);
	else if (rc != 0)
		rc = cli_fail("the brig server's connection broke before the command's end was known");
	else
		rc = 0;
	cli_ndjson_clear(lr);
	brig_http_response_clear(&resp);
	return rc;
}

/* ---- raw bodies (brig cp, brig fs) ---- */

/* A native route's error answer as the brig_error brig-init's gave the
 * server: its code, its errno and its message; what the server refused on
 * its own (a token, a namespace, a bad request) keeps remote_err's story,
 * never a code that would read as brig-init's. */
static int fs_err(brig_error **err, int status, const char *body, size_t len)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	int code = serve__code_of(json_string_value(json_object_get(j, "code")));
	const char *m = json_string_value(json_object_get(j, "message"));
	json_int_t en = json_integer_value(json_object_get(j, "errno"));
	int rc;
	if (code && m) {
		rc = brig__error_set(err, code, en > 0 && en < 4096 ? (int)en : 0, "%s", m);
	} else {
		rc = remote_err(err, status, body, len);
		if (rc == BRIG_EDENIED) /* "forbidden": the token's, not a file's */
			rc = BRIG_EDAEMON;
		if (err && *err)
			(*err)->code = rc;
	}
	json_decref(j);
	return rc;
}

typedef struct raw_body {
	const brig_http_response *resp;
	brig_http_body_cb cb;
	void *payload;
	brig_buf errbody; /* an error answer, collected */
	int cb_rc;
} raw_body;

static int raw_body_cb(const char *data, size_t len, void *payload)
{
	raw_body *b = payload;
	if (b->resp->status < 200 || b->resp->status > 299) {
		int full = brig_buf_add(&b->errbody, data, len);
		(void)full; /* capped: past it the rest of the answer is dropped */
		return 0;
	}
	return b->cb_rc = b->cb(data, len, b->payload);
}

/* One request with a raw body each way: the body from memory (data, len)
 * or streamed (reader), the 2xx answer's body to cb. */
typedef struct raw_req {
	const char *method, *target, *type;
	const void *data;
	size_t len;
	brig_http_body_reader reader;
	void *rpayload;
	brig_http_body_cb cb;
	void *payload;
	bool fs;          /* a native route: errors by fs_err */
	const char *what; /* what broke off ("the file operation"); NULL: "the copy" */
} raw_req;

static int raw_exchange(cli_remote *r, const raw_req *q, brig_error **err)
{
	brig_http_response resp;
	memset(&resp, 0, sizeof resp);
	raw_body b = {.resp = &resp, .cb = q->cb, .payload = q->payload};
	brig_buf_init(&b.errbody, 1 << 16);
	const char *hdrs[2] = {r->auth, NULL};
	brig_http_request req = {
		.method = q->method,
		.target = q->target,
		.content_type = q->type,
		.extra_headers = hdrs,
		.body = q->data,
		.body_len = q->len,
		.body_reader = q->reader,
		.body_payload = q->rpayload,
	};
	const char *what = q->what ? q->what : "the copy";
	brig_error *herr = NULL;
	int rc = brig_http_roundtrip(r->c, &req, &resp, REMOTE_BODY_CAP, raw_body_cb, &b, &herr);
	if (b.cb_rc) { /* the receiver refused the bytes: its story (the caller has it) */
		brig_error_free(herr);
		rc = brig__error_set(err, b.cb_rc, 0, "%s was refused", what);
	} else if (rc) {
		if (err && herr && herr->code != BRIG_EUNCERTAIN && herr->code != BRIG_ENOTSENT) {
			*err = herr; /* e.g. the reader's own error */
			herr = NULL;
		} else {
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0,
					     "the brig server's connection broke before %s was complete", what);
		}
		brig_error_free(herr);
	} else if (resp.status < 200 || resp.status > 299) {
		/* the parser collects an error answer itself (resp.body) */
		const brig_buf *eb = b.errbody.len ? &b.errbody : &resp.body;
		rc = (q->fs ? fs_err : remote_err)(err, resp.status, eb->data, eb->len);
	}
	brig_buf_free(&b.errbody);
	brig_http_response_clear(&resp);
	return rc;
}

static int discard_cb(const char *data, size_t len, void *payload)
{
	(void)data;
	(void)len;
	(void)payload;
	return 0;
}

int cli_remote_get_raw(cli_remote *r, const char *target, brig_engine_data_cb cb, void *payload, brig_error **err)
{
	raw_req q = {.method = "GET", .target = target, .cb = cb, .payload = payload};
	return raw_exchange(r, &q, err);
}

int cli_remote_put_raw(cli_remote *r, const char *target, brig_engine_reader reader, void *payload,
		       brig_error **err)
{
	raw_req q = {.method = "PUT",
		     .target = target,
		     .type = "application/x-tar",
		     .reader = reader,
		     .rpayload = payload,
		     .cb = discard_cb};
	return raw_exchange(r, &q, err);
}

int cli_remote_fs(cli_remote *r, const char *method, const char *target, const char *type, const void *body, size_t len,
		  brig_engine_data_cb cb, void *payload, brig_error **err)
{
	raw_req q = {.method = method,
		     .target = target,
		     .type = body ? type : NULL,
		     .data = body,
		     .len = body ? len : 0,
		     .cb = cb ? cb : discard_cb,
		     .payload = payload,
		     .fs = true,
		     .what = "the file operation"};
	return raw_exchange(r, &q, err);
}

/* A native route's answer, collected up to REMOTE_BODY_CAP. */
typedef struct native_body {
	brig_buf b;
	bool full;
} native_body;

static int native_body_cb(const char *data, size_t len, void *payload)
{
	native_body *nb = payload;
	if (brig_buf_add(&nb->b, data, len) == 0)
		return 0;
	nb->full = true;
	return BRIG_ETOOBIG;
}

/* q, its 2xx answer's JSON into *out (may be NULL: not wanted). */
static int json_exchange(cli_remote *r, raw_req *q, json_t **out, brig_error **err)
{
	if (out)
		*out = NULL;
	native_body nb = {.full = false};
	brig_buf_init(&nb.b, REMOTE_BODY_CAP);
	q->cb = native_body_cb;
	q->payload = &nb;
	brig_error *e = NULL;
	int rc = raw_exchange(r, q, &e);
	if (nb.full) {
		brig_error_free(e);
		rc = brig__error_set(err, BRIG_ETOOBIG, 0, "the brig server's answer is larger than %d bytes",
				     REMOTE_BODY_CAP);
	} else if (rc) {
		brig__error_move(err, e);
	} else if (out && !(*out = json_loadb(nb.b.data ? nb.b.data : "", nb.b.len, 0, NULL))) {
		rc = brig__error_set(err, BRIG_EPROTO, 0, "the brig server's answer is not JSON");
	}
	brig_buf_free(&nb.b);
	return rc;
}

int cli_remote_native(cli_remote *r, const char *method, const char *target, json_t *body, json_t **out,
		      brig_error **err)
{
	cleanup_free char *data = body ? json_dumps(body, JSON_COMPACT) : NULL;
	raw_req q = {.method = method,
		     .target = target,
		     .type = data ? "application/json" : NULL,
		     .data = data,
		     .len = data ? strlen(data) : 0,
		     .fs = true,
		     .what = "its answer"};
	return json_exchange(r, &q, out, err);
}

int cli_remote_upload(cli_remote *r, const char *target, brig_engine_reader reader, void *payload, json_t **out,
		      brig_error **err)
{
	raw_req q = {.method = "POST",
		     .target = target,
		     .type = "application/octet-stream",
		     .reader = reader,
		     .rpayload = payload,
		     .what = "the upload"};
	return json_exchange(r, &q, out, err);
}

int cli_remote_get_json(cli_remote *r, const char *target, json_t **out, brig_error **err)
{
	*out = NULL;
	brig_http_response resp;
	memset(&resp, 0, sizeof resp);
	int rc = remote_send(r, "GET", target, NULL, &resp, REMOTE_BODY_CAP, NULL, NULL);
	if (rc)
		rc = brig__error_set(err, BRIG_EUNCERTAIN, 0,
				     "the brig server's connection broke before its answer was complete");
	else if (resp.status < 200 || resp.status > 299)
		rc = remote_err(err, resp.status, resp.body.data, resp.body.len);
	else if (!(*out = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, NULL)))
		rc = brig__error_set(err, BRIG_EPROTO, 0, "the brig server's answer is not JSON");
	brig_http_response_clear(&resp);
	return rc;
}

/* ---- naming a computer ---- */

/* 0 found, 1 not on the list (nothing printed), CLI_EXIT_FAIL (printed). */
static int find_name(cli_remote *r, const char *name, char **ns, char **agent, char **session)
{
	json_t *j = NULL;
	if (cli_remote_call(r, "GET", "/v1/computers", NULL, &j) != 0)
		return CLI_EXIT_FAIL;
	json_t *arr = json_object_get(j, "computers");
	size_t i;
	json_t *c;
	json_array_foreach (arr, i, c) {
		/* a name, or a container id as Docker takes it (12 or more of
		 * its first hex digits) */
		const char *n = json_string_value(json_object_get(c, "name"));
		const char *cid = json_string_value(json_object_get(c, "id"));
		size_t len = strlen(name);
		if (!(n && strcmp(n, name) == 0) && !(cid && len >= 12 && strncmp(cid, name, len) == 0))
			continue;
		const char *a = json_string_value(json_object_get(c, "ns"));
		const char *b = json_string_value(json_object_get(c, "agent"));
		const char *s = json_string_value(json_object_get(c, "session"));
		if (!a || !b || !s)
			break;
		*ns = xstrdup(a);
		*agent = xstrdup(b);
		*session = xstrdup(s);
		json_decref(j);
		return 0;
	}
	json_decref(j);
	return 1;
}

int cli_remote_identity(cli_remote *r, const char *name, char **ns, char **agent, char **session)
{
	int rc = find_name(r, name, ns, agent, session);
	if (rc == 1)
		return cli_fail("no computer named %s on the brig server (or not one of a session it may touch)", name);
	return rc;
}

char *cli_remote_path(const char *ns, const char *agent, const char *session, const char *tail)
{
	/* identity names are 1-63 of A-Z a-z 0-9 _ . - (checked before): no
	 * escaping needed. */
	return xasprintf("/v1/computers/%s/%s/%s%s", ns, agent, session, tail ? tail : "");
}

int cli_remote_unsupported(const char *cmd)
{
	return cli_fail("brig %s does not go through a brig server yet; unset BRIG_HOST to talk to Docker directly",
			cmd);
}

/* ---- computers ---- */

int cli_remote_target(cli_remote *r, const char *cmd, const cli_target *t, const char *name, char **path)
{
	*path = NULL;
	/* the usage checks of cli_target_name, in its words */
	if (name && t->id_given)
		return cli_usage(cmd, "give either NAME or --ns/--agent/--session, not both");
	if (!name && !t->id_given)
		return cli_usage(cmd, "NAME (or --ns/--agent/--session) is required");
	if (!name && (!t->id.ns || !t->id.agent || !t->id.session))
		return cli_usage(cmd, "--ns, --agent and --session go together");
	if (!name && cli_target_check(cmd, t) != 0)
		return CLI_EXIT_FAIL;
	if (t->store)
		return cli_fail("--store names a local store; through a brig server its own store is used");
	if (t->id.generation)
		return cli_fail("--gen does not go through a brig server: it acts on the current generation");
	if (t->id_given) {
		*path = cli_remote_path(t->id.ns, t->id.agent, t->id.session, NULL);
		return 0;
	}
	cleanup_free char *ns = NULL, *agent = NULL, *session = NULL;
	int rc = find_name(r, name, &ns, &agent, &session);
	if (rc == 0)
		*path = cli_remote_path(ns, agent, session, NULL);
	return rc;
}

/* ---- the session store ---- */

int cli_remote_checkpoints(cli_remote *r, const char *ns, const char *agent, const char *session,
			   brig_store_checkpoint **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	cleanup_free char *target = cli_remote_path(ns, agent, session, "/checkpoints");
	json_t *j = NULL;
	if (cli_remote_call(r, "GET", target, NULL, &j) != 0)
		return CLI_EXIT_FAIL;
	json_t *arr = json_object_get(j, "checkpoints");
	size_t k = json_array_size(arr);
	*out = k ? xcalloc(k, sizeof **out) : NULL;
	for (size_t i = 0; i < k; i++)
		cli_remote_checkpoint_parse(&(*out)[i], json_array_get(arr, i), ns, agent, session);
	*n = k;
	json_decref(j);
	return 0;
}

/* The server gives up to 10000 commands a request, or all (limit=0): a
 * larger limit asks for all and keeps the newest limit here. */
#define REMOTE_HISTORY_MAX 10000

int cli_remote_history(cli_remote *r, const char *ns, const char *agent, const char *session, size_t limit,
		       brig_store_audit **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	char tail[48];
	snprintf(tail, sizeof tail, "/history?limit=%zu", limit > REMOTE_HISTORY_MAX ? 0 : limit);
	cleanup_free char *target = cli_remote_path(ns, agent, session, tail);
	json_t *j = NULL;
	if (cli_remote_call(r, "GET", target, NULL, &j) != 0)
		return CLI_EXIT_FAIL;
	json_t *arr = json_object_get(j, "history");
	size_t k = json_array_size(arr);
	if (limit && k > limit)
		k = limit; /* newest first: the oldest go */
	*out = k ? xcalloc(k, sizeof **out) : NULL;
	for (size_t i = 0; i < k; i++)
		cli_remote_audit_parse(&(*out)[i], json_array_get(arr, i), ns, agent, session);
	*n = k;
	json_decref(j);
	return 0;
}

int cli_remote_session(cli_remote *r, const char *ns, const char *agent, const char *session, brig_store_session **out)
{
	*out = NULL;
	/* ns is checked (A-Z a-z 0-9 _ . -): no escaping needed */
	cleanup_free char *target = xasprintf("/v1/sessions?ns=%s", ns);
	json_t *j = NULL;
	if (cli_remote_call(r, "GET", target, NULL, &j) != 0)
		return CLI_EXIT_FAIL;
	size_t i;
	json_t *s;
	json_array_foreach (json_object_get(j, "sessions"), i, s) {
		const char *a = json_string_value(json_object_get(s, "agent"));
		const char *b = json_string_value(json_object_get(s, "session"));
		if (a && b && strcmp(a, agent) == 0 && strcmp(b, session) == 0) {
			*out = xcalloc(1, sizeof **out);
			cli_remote_session_parse(*out, s);
			break;
		}
	}
	json_decref(j);
	return 0;
}

/* ---- secrets ---- */

void cli_remote_secret_add(json_t *values, const char *secret)
{
	char key[130];
	snprintf(key, sizeof key, "%.*s", (int)strcspn(secret, "@"), secret);
	const char *v = getenv(key);
	if (v && *v)
		json_object_set_new(values, key, json_string(v));
}

/* ---- for remote_attach.c ---- */

struct brig_http_conn *cli_remote__conn(cli_remote *r)
{
	return r->c;
}

const char *cli_remote__auth(const cli_remote *r)
{
	return r->auth;
}
