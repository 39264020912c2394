/* engine.c — the Engine API client: opening and version negotiation, the
 * connection pool, the JSON call helper, error mapping and system calls. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/internal.h"

static int64_t deadline_for(brig_engine *e, int64_t deadline_ms)
{
	return deadline_ms ? deadline_ms : brig_now_ms() + e->timeout_ms;
}

int brig_engine__conn_get(brig_engine *e, brig_http_conn **out, int64_t deadline_ms, brig_error **err)
{
	for (;;) {
		brig_http_conn *c = NULL;
		pthread_mutex_lock(&e->lock);
		if (e->nidle > 0)
			c = e->idle[--e->nidle];
		pthread_mutex_unlock(&e->lock);
		if (!c)
			break;
		if (brig_http_conn_reusable(c)) {
			*out = c;
			return 0;
		}
		brig_http_conn_free(c);
	}
	return brig_http_connect(out, &e->ep, deadline_ms, err);
}

void brig_engine__conn_put(brig_engine *e, brig_http_conn *c)
{
	if (!c)
		return;
	if (brig_http_conn_reusable(c)) {
		pthread_mutex_lock(&e->lock);
		if (e->nidle < BRIG_ENGINE_POOL) {
			e->idle[e->nidle++] = c;
			c = NULL;
		}
		pthread_mutex_unlock(&e->lock);
	}
	brig_http_conn_free(c);
}

char *brig_engine__path(brig_engine *e, const char *fmt, ...)
{
	va_list ap;
	char *rest = NULL;
	va_start(ap, fmt);
	if (vasprintf(&rest, fmt, ap) < 0)
		abort();
	va_end(ap);
	char *r = xasprintf("/v%s%s", e->api, rest);
	free(rest);
	return r;
}

int brig_engine__status_error(int status, const char *body, size_t len, const char *what, brig_error **err)
{
	int code;
	if (status == 400)
		code = BRIG_EBADREQ;
	else if (status == 401 || status == 403)
		code = BRIG_EDENIED;
	else if (status == 404)
		code = BRIG_ENOTFOUND;
	else if (status == 409)
		code = BRIG_ECONFLICT;
	else if (status >= 500)
		code = BRIG_EDAEMON;
	else
		code = BRIG_EPROTO;
	const char *msg = NULL;
	json_t *j = NULL;
	if (body && len) {
		j = json_loadb(body, len, 0, NULL);
		if (j)
			msg = json_string_value(json_object_get(j, "message"));
	}
	int r;
	if (msg)
		r = brig__error_set_http(err, code, status, "%s: %s", what, msg);
	else if (body && len)
		r = brig__error_set_http(err, code, status, "%s: daemon answered %d: %.*s", what, status,
					 (int)(len > 200 ? 200 : len), body);
	else
		r = brig__error_set_http(err, code, status, "%s: daemon answered %d", what, status);
	if (j)
		json_decref(j);
	return r;
}

int brig_engine__call(brig_engine *e, const brig_engine_call *call, json_t **out, int *status,
		      brig_http_response *resp_out, brig_error **err)
{
	int64_t deadline = deadline_for(e, call->deadline_ms);
	brig_http_conn *c = NULL;
	int rc = brig_engine__conn_get(e, &c, deadline, err);
	if (rc)
		return brig__error_prefix(err, rc, "%s", call->what);

	cleanup_free char *body = NULL;
	size_t body_len = 0;
	if (call->body) {
		body = json_dumps(call->body, JSON_COMPACT);
		if (!body) {
			brig_http_conn_free(c);
			return brig__error_set(err, BRIG_EINVAL, 0, "%s: request body is not serialisable", call->what);
		}
		body_len = strlen(body);
	}
	brig_http_request req = {
		.method = call->method,
		.target = call->path,
		.content_type = call->body ? "application/json" : call->content_type,
		.extra_headers = call->extra_headers,
		.body = body,
		.body_len = body_len,
		.body_reader = call->reader,
		.body_payload = call->reader_payload,
		.head = call->head,
		.deadline_ms = deadline,
	};
	brig_http_response resp;
	rc = brig_http_roundtrip(c, &req, &resp, e->max_json, call->body_cb, call->body_payload, err);
	brig_engine__conn_put(e, c);
	if (body) /* it may carry a credential (an exec's Env) */
		explicit_bzero(body, body_len);
	if (rc) {
		brig_http_response_clear(&resp);
		return brig__error_prefix(err, rc, "%s", call->what);
	}
	if (status)
		*status = resp.status;
	if (resp.status < 200 || resp.status >= 300) {
		rc = brig_engine__status_error(resp.status, resp.body.data, resp.body.len, call->what, err);
		goto out;
	}
	if (out) {
		*out = NULL;
		if (resp.body.len) {
			json_error_t jerr;
			*out = json_loadb(resp.body.data, resp.body.len, 0, &jerr);
			if (!*out) {
				rc = brig__error_set(err, BRIG_EPROTO, 0, "%s: the daemon's answer is not JSON: %s",
						     call->what, jerr.text);
				goto out;
			}
		}
	}
out:
	if (resp_out && rc == 0)
		*resp_out = resp;
	else
		brig_http_response_clear(&resp);
	return rc;
}

static int parse_api(const char *s, int *maj, int *min)
{
	char *e1 = NULL, *e2 = NULL;
	long a = strtol(s, &e1, 10);
	if (e1 == s || *e1 != '.')
		return -1;
	long b = strtol(e1 + 1, &e2, 10);
	if (e2 == e1 + 1 || *e2 || a < 1 || a > 99 || b < 0 || b > 999)
		return -1;
	*maj = (int)a;
	*min = (int)b;
	return 0;
}

int brig_engine_ping(brig_engine *e, brig_error **err)
{
	brig_engine_call call = {.method = "GET", .path = "/_ping", .what = "ping the Docker daemon"};
	return brig_engine__call(e, &call, NULL, NULL, NULL, err);
}

static int negotiate(brig_engine *e, brig_error **err)
{
	brig_engine_call call = {.method = "GET", .path = "/_ping", .what = "ping the Docker daemon"};
	brig_http_response resp;
	int rc = brig_engine__call(e, &call, NULL, NULL, &resp, err);
	if (rc)
		return rc;
	const char *v = brig_http_response_header(&resp, "Api-Version");
	int dmaj, dmin, maj, min;
	if (v && parse_api(v, &dmaj, &dmin) == 0 && parse_api(BRIG_ENGINE_API_VERSION, &maj, &min) == 0) {
		if (dmaj < maj || (dmaj == maj && dmin < min)) {
			if (dmaj == 1 && dmin < 25) {
				/* v lives in resp: format the message before clearing it */
				rc = brig__error_set(err, BRIG_EPROTO, 0,
						     "the Docker daemon speaks API %s; brig needs 1.25 or later", v);
				brig_http_response_clear(&resp);
				return rc;
			}
			snprintf(e->api, sizeof e->api, "%d.%d", dmaj, dmin);
		}
	}
	brig_http_response_clear(&resp);
	return 0;
}

int brig_engine_open(brig_engine **out, const brig_engine_opts *opts, brig_error **err)
{
	brig_engine_opts defaults = BRIG_ENGINE_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int rc = brig__opts_check(opts->version, BRIG_ENGINE_OPTS_VERSION, "engine options", err);
	if (rc)
		return rc;
	const char *host = opts->host ? opts->host : getenv("DOCKER_HOST");
	int tls_verify = opts->tls_verify;
	if (tls_verify < 0) {
		const char *t = getenv("DOCKER_TLS_VERIFY");
		tls_verify = t && *t && strcmp(t, "0") != 0;
	}
	const char *cert_path = opts->cert_path ? opts->cert_path : getenv("DOCKER_CERT_PATH");

	brig_engine *e = xcalloc(1, sizeof *e);
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->facts.mu, NULL);
	snprintf(e->api, sizeof e->api, "%s", BRIG_ENGINE_API_VERSION);
	e->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 60000;
	e->max_json = opts->max_json_bytes ? opts->max_json_bytes : 8u << 20;
	rc = brig_http_endpoint_parse(&e->ep, host, tls_verify, cert_path, err);
	if (rc == 0 && !opts->skip_negotiation)
		rc = negotiate(e, err);
	if (rc) {
		brig_engine_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

void brig_engine_free(brig_engine *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->nidle; i++)
		brig_http_conn_free(e->idle[i]);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->facts.mu);
	brig_http_endpoint_clear(&e->ep);
	free(e);
}

brig_engine_facts *brig_engine__facts(brig_engine *e) { return &e->facts; }

const char *brig_engine_api_version(const brig_engine *e) { return e->api; }

bool brig_engine_is_local(const brig_engine *e) { return e->ep.is_unix; }

int brig_engine_version(brig_engine *e, json_t **out, brig_error **err)
{
	cleanup_free char *path = brig_engine__path(e, "/version");
	brig_engine_call call = {.method = "GET", .path = path, .what = "read the daemon's version"};
	return brig_engine__call(e, &call, out, NULL, NULL, err);
}

int brig_engine_info(brig_engine *e, json_t **out, brig_error **err)
{
	cleanup_free char *path = brig_engine__path(e, "/info");
	brig_engine_call call = {.method = "GET", .path = path, .what = "read the daemon's info"};
	return brig_engine__call(e, &call, out, NULL, NULL, err);
}

static bool has_userns(const json_t *info)
{
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(info, "SecurityOptions"), i, v) {
		const char *o = json_string_value(v);
		if (o && (strcmp(o, "name=userns") == 0 || strncmp(o, "name=userns,", 12) == 0))
			return true;
	}
	return false;
}

int brig_engine_userns_root(brig_engine *e, uint32_t *uid, uint32_t *gid, brig_error **err)
{
	*uid = *gid = 0;
	cleanup_json json_t *info = NULL;
	int rc = brig_engine_info(e, &info, err);
	if (rc)
		return rc;
	if (!has_userns(info))
		return 0;
	/* DockerRootDir is /var/lib/docker/100000.100000 on a remapped daemon */
	const char *dir = json_string_value(json_object_get(info, "DockerRootDir"));
	const char *base = dir ? strrchr(dir, '/') : NULL;
	unsigned long u, g;
	char end;
	if (!base || sscanf(base + 1, "%lu.%lu%c", &u, &g, &end) != 2 || u == 0 || u > UINT32_MAX ||
	    g > UINT32_MAX)
		return brig__error_set(err, BRIG_EPROTO, 0,
				       "the daemon remaps user namespaces but its root directory does not name the "
				       "remapped root (expected DockerRootDir ending in /UID.GID)");
	*uid = (uint32_t)u;
	*gid = (uint32_t)g;
	return 0;
}

/* ---- JSON lines ---- */

void brig_jsonl_init(brig_jsonl *j, size_t max_line, brig_jsonl_cb cb, void *payload, brig_error **err)
{
	brig_buf_init(&j->line, max_line);
	j->cb = cb;
	j->payload = payload;
	j->err_code = 0;
	j->err = err;
}

static int jsonl_line(brig_jsonl *j, const char *s, size_t n)
{
	while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	while (n && (*s == ' ' || *s == '\t' || *s == '\r')) {
		s++;
		n--;
	}
	if (!n)
		return 0;
	json_error_t jerr;
	json_t *obj = json_loadb(s, n, 0, &jerr);
	if (!obj)
		return brig__error_set(j->err, BRIG_EPROTO, 0, "daemon sent a line that is not JSON: %s", jerr.text);
	int r = j->cb(obj, j->payload);
	json_decref(obj);
	return r;
}

int brig_jsonl_feed(brig_jsonl *j, const char *data, size_t len)
{
	if (j->err_code)
		return j->err_code;
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;
		int r;
		/* A whole line in one read skips the buffer, but not the cap:
		 * how the bytes were split must not change the outcome. */
		if (nl && j->line.len == 0 && take <= j->line.cap) {
			r = jsonl_line(j, data, take);
		} else {
			if (brig_buf_add(&j->line, data, take) < 0)
				return j->err_code = brig__error_set(j->err, BRIG_ETOOBIG, 0,
								     "daemon sent a JSON line over %zu bytes",
								     j->line.cap);
			r = 0;
			if (nl) {
				r = jsonl_line(j, j->line.data, j->line.len);
				brig_buf_reset(&j->line);
			}
		}
		if (r)
			return j->err_code = r;
		if (!nl)
			break;
		data = nl + 1;
		len -= take + 1;
	}
	return 0;
}

int brig_jsonl_finish(brig_jsonl *j)
{
	if (j->err_code)
		return j->err_code;
	int r = 0;
	if (j->line.len)
		r = jsonl_line(j, j->line.data, j->line.len);
	brig_buf_reset(&j->line);
	return j->err_code = r;
}

void brig_jsonl_free(brig_jsonl *j) { brig_buf_free(&j->line); }

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 (RFC 4648 §4), decoded here rather than with OpenSSL's
 * EVP_DecodeBlock: a path stat header is not worth loading libcrypto for. */
char *brig_engine__b64decode(const char *in, size_t *out_len)
{
	size_t n = strlen(in);
	if (n > (1u << 20) || n % 4 == 1)
		return NULL;
	/* Docker pads; tolerate a peer that does not. With the padding it
	 * leaves out, at most two '=' end the text, and only there. */
	size_t data = n, missing = (4 - n % 4) % 4;
	while (data && in[data - 1] == '=' && n - data + missing < 3)
		data--;
	if (n - data + missing > 2)
		return NULL;
	unsigned char *out = xmalloc(data / 4 * 3 + 3);
	size_t len = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < data; i++) {
		int v = b64_value((unsigned char)in[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (unsigned char)(acc >> bits);
		}
	}
	out[len] = '\0';
	if (out_len)
		*out_len = len;
	return (char *)out;
}
