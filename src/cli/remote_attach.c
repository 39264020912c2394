/* remote_attach.c — `brig exec -i/-t` through a brig server: the request
 * upgraded to the framed two-way stream of serve/frames.h, pumped between
 * the caller's stdin/stdout/stderr (and terminal) and the server. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"
#include "http/http.h"
#include "serve/frames.h"
#include "util/util.h"

#define STDIN_CHUNK 65536

typedef struct pump {
	brig_engine_output_cb on_output;
	void *payload;
	json_t *end;
	bool bad_end; /* the end frame is not a JSON object */
} pump;

static int on_frame(unsigned type, const char *data, size_t len, void *payload)
{
	pump *p = payload;
	if (type == SERVE_FRAME_STDOUT || type == SERVE_FRAME_STDERR) {
		if (p->on_output)
			p->on_output(type == SERVE_FRAME_STDERR ? BRIG_STREAM_STDERR : BRIG_STREAM_STDOUT, data, len,
				     p->payload);
		return 0;
	}
	/* the end: nothing follows it */
	json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, NULL); /* output with NULs: "\u0000" */
	if (!json_is_object(j)) {
		json_decref(j);
		p->bad_end = true;
		return 1;
	}
	p->end = j;
	return 1;
}

static void put_frame(brig_buf *b, unsigned type, const void *data, size_t len)
{
	unsigned char hdr[SERVE_FRAME_HDR];
	serve_frame_header(hdr, type, (uint32_t)len);
	brig_buf_put(b, hdr, sizeof hdr);
	if (len)
		brig_buf_put(b, data, len);
}

int cli_remote_attach(cli_remote *r, const char *target, json_t *body, bool interactive, bool tty, int cancel_fd,
		      brig_engine_output_cb on_output, void *payload, json_t **end)
{
	*end = NULL;
	brig_http_conn *c = cli_remote__conn(r);
	int rows = 24, cols = 80, winch = -1;
	if (tty)
		cli_tty_begin(interactive, &rows, &cols, &winch);
	cleanup_free char *t = tty ? xasprintf("%s?tty=true&rows=%d&cols=%d", target, rows, cols) : xstrdup(target);
	cleanup_free char *data = json_dumps(body, JSON_COMPACT);
	const char *hdrs[2] = {cli_remote__auth(r), NULL};
	brig_http_request req = {
		.method = "POST",
		.target = t,
		.content_type = "application/json",
		.extra_headers = hdrs,
		.body = data,
		.body_len = data ? strlen(data) : 0,
		.upgrade = true,
	};
	brig_http_response resp;
	memset(&resp, 0, sizeof resp);
	brig_error *err = NULL;
	int rc = brig_http_roundtrip(c, &req, &resp, 1 << 20, NULL, NULL, &err);
	brig_error_free(err);
	err = NULL;
	if (rc != 0) {
		cli_tty_end();
		brig_http_response_clear(&resp);
		return cli_fail("the brig server's connection broke before its answer was complete");
	}
	if (resp.status != 101) {
		cli_tty_end();
		rc = resp.status >= 200 && resp.status <= 299
			     ? cli_fail("the brig server did not switch to a stream (HTTP %d)", resp.status)
			     : cli_remote__error(resp.status, resp.body.data, resp.body.len);
		brig_http_response_clear(&resp);
		return rc;
	}

	pump p = {.on_output = on_output, .payload = payload};
	serve_frame_dec dec;
	serve_frame_dec_init(&dec, 1u << SERVE_FRAME_STDOUT | 1u << SERVE_FRAME_STDERR | 1u << SERVE_FRAME_END);
	brig_buf out;                 /* frames not yet taken by the connection */
	brig_buf_init(&out, 1 << 20); /* one stdin chunk, an EOF, a resize: stdin waits while out is not empty */
	/* Without -i the command's stdin stays open and empty, as direct (a
	 * terminal nobody types on); -t alone is the only way here without -i. */
	bool stdin_open = interactive;
	size_t sent = 0; /* bytes of out already written */
	bool stalled = false;
	bool resize = false; /* a resize to send once out is empty (a stalled write is retried as it was) */
	char *inbuf = xmalloc(STDIN_CHUNK);
	char buf[65536];
	int fd = brig_http_conn_fd(c);
	rc = 0;
	for (;;) {
		bool pending = sent < out.len;
		if (!brig_http_stream_pending(c, &resp)) {
			struct pollfd pf[4] = {
				{.fd = fd, .events = POLLIN | (pending && !stalled ? POLLOUT : 0)},
				{.fd = stdin_open && !pending ? 0 : -1, .events = POLLIN},
				{.fd = cancel_fd, .events = POLLIN},
				{.fd = winch, .events = POLLIN},
			};
			int pr = poll(pf, 4, stalled ? 50 : -1);
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr < 0) {
				rc = cli_fail("poll: %s", strerror(errno));
				break;
			}
			stalled = false;
			if (pf[2].revents) {
				/* the hang-up the server takes as a cancel */
				shutdown(fd, SHUT_RDWR);
				rc = CLI_EXIT_CANCELED;
				break;
			}
			if (pf[3].revents) {
				char drop[64];
				while (read(winch, drop, sizeof drop) > 0)
					;
				resize = true;
			}
			if (resize && !pending) {
				char sz[4];
				cli_tty_size(&rows, &cols);
				serve_frame_resize_put(sz, rows, cols);
				put_frame(&out, SERVE_FRAME_RESIZE, sz, sizeof sz);
				resize = false;
			}
			if (pf[1].revents) {
				ssize_t n = read(0, inbuf, STDIN_CHUNK);
				if (n < 0 && errno == EINTR)
					continue;
				if (n > 0) {
					put_frame(&out, SERVE_FRAME_STDIN, inbuf, (size_t)n);
				} else {
					put_frame(&out, SERVE_FRAME_EOF, NULL, 0);
					stdin_open = false;
				}
			}
			if (sent < out.len) {
				size_t w = 0;
				if (brig_http_stream_write_some(c, out.data + sent, out.len - sent, &w, &err) != 0) {
					/* the server closed: what it sent says the rest */
					brig_error_free(err);
					err = NULL;
					stdin_open = false;
					sent = out.len;
				}
				sent += w;
				stalled = w == 0 && sent < out.len;
				if (sent == out.len) {
					brig_buf_reset(&out);
					sent = 0;
				}
			}
			if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
		}
		ssize_t n = brig_http_stream_read(c, &resp, buf, sizeof buf, 0, &err);
		brig_error_free(err);
		err = NULL;
		if (n <= 0)
			break; /* the end frame, or not: said below */
		if (serve_frame_feed(&dec, buf, (size_t)n, on_frame, &p, &err) != 0)
			break;
	}
	cli_tty_end();
	if (rc == 0 && p.end) {
		*end = p.end;
	} else if (rc == 0) {
		const char *why = err ? brig_error_message(err) : p.bad_end ? "its end frame is not JSON" : NULL;
		rc = why ? cli_fail("the brig server's stream is broken: %s", why)
			 : cli_fail("the brig server's connection broke before the command's end was known");
		json_decref(p.end);
	}
	brig_error_free(err);
	free(inbuf);
	brig_buf_free(&out);
	serve_frame_dec_clear(&dec);
	brig_http_response_clear(&resp);
	return rc;
}
