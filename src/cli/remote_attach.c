/* remote_attach.c — `brig exec -i/-t` and `brig run` through a brig
 * server: the request upgraded to the framed two-way stream of
 * serve/frames.h, pumped between the caller's stdin/stdout/stderr (and
 * terminal, and a run's inputs and outputs tars) and the server. */
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

/* How long a run's client waits, after Ctrl-C, for the server to say the
 * run's container is gone. */
#define CANCEL_WAIT_MS 60000

typedef struct stream_opts {
	const char *target;
	json_t *body;
	bool interactive, tty;
	int cancel_fd;
	brig_engine_output_cb on_output;
	void *payload;
	/* a run: its inputs tar, sent first (NULL: none, an empty one is sent),
	 * and its outputs tar's receiver; after Ctrl-C the end frame is
	 * waited for */
	bool run;
	brig_engine_reader inputs;
	void *inputs_payload;
	brig_engine_data_cb outputs;
	void *outputs_payload;
} stream_opts;

typedef struct pump {
	const stream_opts *so;
	json_t *end;
	bool bad_end; /* the end frame is not a JSON object */
	int out_rc;   /* the outputs' receiver refused: the rest of the tar is dropped */
} pump;

static int on_frame(unsigned type, const char *data, size_t len, void *payload)
{
	pump *p = payload;
	if (type == SERVE_FRAME_TAR) {
		if (!p->out_rc && p->so->outputs)
			p->out_rc = p->so->outputs(data, len, p->so->outputs_payload);
		return 0;
	}
	if (type == SERVE_FRAME_STDOUT || type == SERVE_FRAME_STDERR) {
		if (p->so->on_output)
			p->so->on_output(type == SERVE_FRAME_STDERR ? BRIG_STREAM_STDERR : BRIG_STREAM_STDOUT, data,
					 len, p->so->payload);
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

static int stream(cli_remote *r, const stream_opts *so, json_t **end)
{
	*end = NULL;
	brig_http_conn *c = cli_remote__conn(r);
	bool tty = so->tty, interactive = so->interactive;
	int cancel_fd = so->cancel_fd;
	int rows = 24, cols = 80, winch = -1;
	if (tty)
		cli_tty_begin(interactive, &rows, &cols, &winch);
	cleanup_free char *t =
		tty ? xasprintf("%s?tty=true&rows=%d&cols=%d", so->target, rows, cols) : xstrdup(so->target);
	cleanup_free char *data = json_dumps(so->body, JSON_COMPACT);
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

	pump p = {.so = so};
	serve_frame_dec dec;
	serve_frame_dec_init(&dec, 1u << SERVE_FRAME_STDOUT | 1u << SERVE_FRAME_STDERR | 1u << SERVE_FRAME_END |
					   (so->run ? 1u << SERVE_FRAME_TAR : 0));
	brig_buf out;                 /* frames not yet taken by the connection */
	brig_buf_init(&out, 1 << 20); /* one stdin chunk, an EOF, a resize: stdin waits while out is not empty */
	/* Without -i the command's stdin stays open and empty, as direct (a
	 * terminal nobody types on); -t alone is the only way here without -i. */
	bool stdin_open = interactive;
	bool inputs_open = so->run; /* a run's inputs go before its stdin */
	bool canceled = false;      /* a run after Ctrl-C: its end is waited for */
	int64_t cancel_by = 0;
	size_t sent = 0; /* bytes of out already written */
	bool stalled = false;
	bool resize = false; /* a resize to send once out is empty (a stalled write is retried as it was) */
	char *inbuf = xmalloc(STDIN_CHUNK);
	char buf[65536];
	int fd = brig_http_conn_fd(c);
	rc = 0;
	for (;;) {
		bool pending = sent < out.len;
		if (inputs_open && !pending) { /* the next piece of a run's inputs */
			ssize_t n = so->inputs ? so->inputs(inbuf, STDIN_CHUNK, so->inputs_payload, &err) : 0;
			if (n < 0) {
				rc = cli_error(err, "copy inputs in");
				err = NULL;
				break;
			}
			put_frame(&out, n > 0 ? SERVE_FRAME_TAR : SERVE_FRAME_TAR_END, inbuf, (size_t)n);
			inputs_open = n > 0;
			pending = true;
		}
		if (!brig_http_stream_pending(c, &resp)) {
			struct pollfd pf[4] = {
				{.fd = fd, .events = POLLIN | (pending && !stalled ? POLLOUT : 0)},
				{.fd = stdin_open && !inputs_open && !pending ? 0 : -1, .events = POLLIN},
				{.fd = canceled ? -1 : cancel_fd, .events = POLLIN},
				{.fd = winch, .events = POLLIN},
			};
			int wait = stalled ? 50 : -1;
			if (canceled) {
				int64_t left = cancel_by - brig_now_ms();
				if (left <= 0) {
					rc = cli_fail("the brig server did not confirm within %d s that the run's "
						      "container was removed",
						      CANCEL_WAIT_MS / 1000);
					break;
				}
				wait = (int)left;
			}
			int pr = poll(pf, 4, wait);
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr < 0) {
				rc = cli_fail("poll: %s", strerror(errno));
				break;
			}
			stalled = false;
			if (pf[2].revents && so->run) {
				/* the half-close the server takes as a cancel; its end
				 * frame says the run's container is gone */
				shutdown(fd, SHUT_WR);
				canceled = true;
				cancel_by = brig_now_ms() + CANCEL_WAIT_MS;
				stdin_open = inputs_open = false;
				sent = out.len;
				continue;
			}
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
			if (sent < out.len && !canceled) {
				size_t w = 0;
				if (brig_http_stream_write_some(c, out.data + sent, out.len - sent, &w, &err) != 0) {
					/* the server closed: what it sent says the rest */
					brig_error_free(err);
					err = NULL;
					stdin_open = inputs_open = false;
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
	if (rc == 0 && canceled && p.end) {
		json_decref(p.end);
		rc = CLI_EXIT_CANCELED;
	} else if (rc == 0 && canceled) {
		rc = cli_fail("the brig server's connection broke before it said the run's container was removed");
	} else if (rc == 0 && p.end) {
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

int cli_remote_attach(cli_remote *r, const char *target, json_t *body, bool interactive, bool tty, int cancel_fd,
		      brig_engine_output_cb on_output, void *payload, json_t **end)
{
	stream_opts so = {.target = target,
			  .body = body,
			  .interactive = interactive,
			  .tty = tty,
			  .cancel_fd = cancel_fd,
			  .on_output = on_output,
			  .payload = payload};
	return stream(r, &so, end);
}

int cli_remote_run(cli_remote *r, json_t *body, bool interactive, int cancel_fd, brig_engine_reader inputs,
		   void *inputs_payload, brig_engine_data_cb outputs, void *outputs_payload,
		   brig_engine_output_cb on_output, void *payload, json_t **end)
{
	stream_opts so = {.target = "/v1/runs/attach",
			  .body = body,
			  .interactive = interactive,
			  .cancel_fd = cancel_fd,
			  .on_output = on_output,
			  .payload = payload,
			  .run = true,
			  .inputs = inputs,
			  .inputs_payload = inputs_payload,
			  .outputs = outputs,
			  .outputs_payload = outputs_payload};
	return stream(r, &so, end);
}
