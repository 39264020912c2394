/* parser.c — the bounded HTTP/1.1 response parser around llhttp: headers
 * capped at 64 KiB, bodies collected under a cap or streamed to a callback. */
#include <llhttp.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"

struct brig_http_parser {
	llhttp_t ll;
	llhttp_settings_t settings;
	brig_http_response *resp;
	brig_buf field, value;
	size_t header_bytes;
	size_t body_cap;
	brig_http_body_cb body_cb;
	void *payload;
	int cb_err;          /* BRIG_E code raised inside a callback */
	const char *cb_what; /* what that error was about */
	bool head_request;
	bool started;
	bool complete;
	bool headers_done;
};

static brig_http_parser *P(llhttp_t *ll) { return (brig_http_parser *)ll->data; }

static int fail(brig_http_parser *p, int code, const char *what)
{
	p->cb_err = code;
	p->cb_what = what;
	return HPE_USER;
}

static int count_header_bytes(brig_http_parser *p, size_t n)
{
	p->started = true;
	if (n > BRIG_HTTP_MAX_HEADERS_BYTES || p->header_bytes > BRIG_HTTP_MAX_HEADERS_BYTES - n)
		return fail(p, BRIG_ETOOBIG, "response headers exceed 64 KiB");
	p->header_bytes += n;
	return 0;
}

static int on_message_begin(llhttp_t *ll)
{
	P(ll)->started = true;
	return 0;
}

static int on_status(llhttp_t *ll, const char *at, size_t n) { return count_header_bytes(P(ll), n); }

static int on_header_field(llhttp_t *ll, const char *at, size_t n)
{
	brig_http_parser *p = P(ll);
	int r = count_header_bytes(p, n);
	if (r)
		return r;
	/* count_header_bytes already held every header to the cap this buffer
	 * has, so this cannot fail; checked all the same, as the same error. */
	if ((r = brig_buf_add(&p->field, at, n)) < 0)
		return fail(p, r, "response headers exceed 64 KiB");
	return 0;
}

static int on_header_value(llhttp_t *ll, const char *at, size_t n)
{
	brig_http_parser *p = P(ll);
	int r = count_header_bytes(p, n);
	if (r)
		return r;
	if ((r = brig_buf_add(&p->value, at, n)) < 0) /* as for the field */
		return fail(p, r, "response headers exceed 64 KiB");
	return 0;
}

static int on_header_value_complete(llhttp_t *ll)
{
	brig_http_parser *p = P(ll);
	brig_http_response *resp = p->resp;
	if (resp->nheaders >= BRIG_HTTP_MAX_HEADER_COUNT)
		return fail(p, BRIG_ETOOBIG, "response has more than 100 headers");
	/* A field value excludes trailing whitespace (RFC 9110 5.5); llhttp
	 * leaves it in, and "Api-Version: 1.41 " must still read as 1.41. */
	while (p->value.len && (p->value.data[p->value.len - 1] == ' ' || p->value.data[p->value.len - 1] == '\t'))
		p->value.data[--p->value.len] = '\0';
	resp->headers = xrealloc(resp->headers, (resp->nheaders + 1) * sizeof *resp->headers);
	resp->headers[resp->nheaders].name = brig_buf_steal(&p->field, NULL);
	resp->headers[resp->nheaders].value = brig_buf_steal(&p->value, NULL);
	resp->nheaders++;
	brig_buf_init(&p->field, BRIG_HTTP_MAX_HEADERS_BYTES);
	brig_buf_init(&p->value, BRIG_HTTP_MAX_HEADERS_BYTES);
	return 0;
}

static int on_headers_complete(llhttp_t *ll)
{
	brig_http_parser *p = P(ll);
	p->resp->status = ll->status_code;
	p->headers_done = true;
	/* A HEAD answer carries Content-Length but no body. */
	return p->head_request ? 1 : 0;
}

static int on_body(llhttp_t *ll, const char *at, size_t n)
{
	brig_http_parser *p = P(ll);
	/* Only a successful answer is the stream the caller asked for; an error
	 * answer's body is the daemon's message, kept for the error. */
	if (p->body_cb && p->resp->status >= 200 && p->resp->status < 300) {
		int r = p->body_cb(at, n, p->payload);
		if (r) /* codes are negative; anything else still means stop */
			return fail(p, r < 0 ? r : BRIG_ECANCELED, NULL);
		return 0;
	}
	if (brig_buf_add(&p->resp->body, at, n) < 0)
		return fail(p, BRIG_ETOOBIG, "response body exceeds its cap");
	return 0;
}

static int on_message_complete(llhttp_t *ll)
{
	brig_http_parser *p = P(ll);
	p->complete = true;
	p->resp->keep_alive = llhttp_should_keep_alive(ll) && ll->status_code != 101;
	p->resp->upgraded = ll->status_code == 101;
	return HPE_PAUSED; /* stop here: later bytes are not ours */
}

brig_http_parser *brig_http_parser_new(brig_http_response *resp, bool head_request, size_t body_cap,
				       brig_http_body_cb body_cb, void *payload)
{
	brig_http_parser *p = xcalloc(1, sizeof *p);
	memset(resp, 0, sizeof *resp);
	brig_buf_init(&resp->body, body_cap);
	p->resp = resp;
	p->head_request = head_request;
	p->body_cap = body_cap;
	p->body_cb = body_cb;
	p->payload = payload;
	brig_buf_init(&p->field, BRIG_HTTP_MAX_HEADERS_BYTES);
	brig_buf_init(&p->value, BRIG_HTTP_MAX_HEADERS_BYTES);
	llhttp_settings_init(&p->settings);
	p->settings.on_message_begin = on_message_begin;
	p->settings.on_status = on_status;
	p->settings.on_header_field = on_header_field;
	p->settings.on_header_value = on_header_value;
	p->settings.on_header_value_complete = on_header_value_complete;
	p->settings.on_headers_complete = on_headers_complete;
	p->settings.on_body = on_body;
	p->settings.on_message_complete = on_message_complete;
	llhttp_init(&p->ll, HTTP_RESPONSE, &p->settings);
	p->ll.data = p;
	return p;
}

void brig_http_parser_free(brig_http_parser *p)
{
	if (!p)
		return;
	brig_buf_free(&p->field);
	brig_buf_free(&p->value);
	free(p);
}

bool brig_http_parser_started(const brig_http_parser *p) { return p->started; }
bool brig_http_parser_headers_done(const brig_http_parser *p) { return p->headers_done; }

static int parse_error(brig_http_parser *p, brig_error **err)
{
	if (p->cb_err) {
		if (p->cb_what)
			return brig__error_set(err, p->cb_err, 0, "%s", p->cb_what);
		return p->cb_err; /* the body callback set its own error */
	}
	return brig__error_set(err, BRIG_EPROTO, 0, "malformed HTTP response from the daemon: %s",
			       llhttp_errno_name(llhttp_get_errno(&p->ll)));
}

int brig_http_parser_feed(brig_http_parser *p, const char *data, size_t len, size_t *consumed, brig_error **err)
{
	*consumed = 0;
	if (p->complete)
		return 1;
	if (len == 0)
		return 0;
	llhttp_errno_t rc = llhttp_execute(&p->ll, data, len);
	if (rc == HPE_OK) {
		*consumed = len;
		return 0;
	}
	if (rc == HPE_PAUSED && p->complete) {
		const char *pos = llhttp_get_error_pos(&p->ll);
		size_t used = pos && pos >= data && pos <= data + len ? (size_t)(pos - data) : len;
		*consumed = used;
		if (p->resp->upgraded && used < len) {
			p->resp->stream_head = xmalloc(len - used);
			memcpy(p->resp->stream_head, data + used, len - used);
			p->resp->stream_head_len = len - used;
			*consumed = len;
		}
		return 1;
	}
	return parse_error(p, err);
}

int brig_http_parser_finish(brig_http_parser *p, brig_error **err)
{
	if (p->complete)
		return 1;
	if (!p->started)
		return brig__error_set(err, BRIG_EPROTO, 0, "the daemon closed the connection without answering");
	llhttp_errno_t rc = llhttp_finish(&p->ll);
	if ((rc == HPE_OK || rc == HPE_PAUSED) && p->complete)
		return 1;
	if (rc != HPE_OK && rc != HPE_PAUSED && p->cb_err)
		return parse_error(p, err);
	return brig__error_set(err, BRIG_EPROTO, 0, "the daemon closed the connection in the middle of its answer");
}

void brig_http_response_clear(brig_http_response *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	brig_buf_free(&r->body);
	free(r->stream_head);
	memset(r, 0, sizeof *r);
}

const char *brig_http_response_header(const brig_http_response *r, const char *name)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}
