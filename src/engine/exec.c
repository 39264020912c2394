/* exec.c — exec create/start/inspect. Start always hijacks the connection
 * (101) so stdin, deadlines and cancellation share one poll loop. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "engine/internal.h"

int brig_engine_exec_create(brig_engine *e, char **out_id, const char *id, json_t *config, brig_error **err)
{
	cleanup_free char *i = brig_urlencode(id);
	cleanup_free char *path = brig_engine__path(e, "/containers/%s/exec", i);
	cleanup_free char *what = xasprintf("create exec in container %s", id);
	brig_engine_call call = {.method = "POST", .path = path, .body = config, .what = what};
	cleanup_json json_t *resp = NULL;
	int rc = brig_engine__call(e, &call, &resp, NULL, NULL, err);
	if (rc)
		return rc;
	const char *xid = json_string_value(json_object_get(resp, "Id"));
	if (!xid || !*xid)
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: answer has no Id", what);
	*out_id = xstrdup(xid);
	return 0;
}

int brig_engine_exec_inspect(brig_engine *e, json_t **out, const char *exec_id, brig_error **err)
{
	cleanup_free char *i = brig_urlencode(exec_id);
	cleanup_free char *path = brig_engine__path(e, "/exec/%s/json", i);
	cleanup_free char *what = xasprintf("inspect exec %.12s", exec_id);
	brig_engine_call call = {.method = "GET", .path = path, .what = what};
	return brig_engine__call(e, &call, out, NULL, NULL, err);
}

int brig_engine_exec_exit_code(brig_engine *e, const char *exec_id, int64_t deadline_ms, int *exit_code,
			       brig_error **err)
{
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 10000;
	long sleep_us = 1000;
	for (;;) {
		cleanup_json json_t *j = NULL;
		int rc = brig_engine_exec_inspect(e, &j, exec_id, err);
		if (rc)
			return rc;
		json_t *running = json_object_get(j, "Running");
		json_t *code = json_object_get(j, "ExitCode");
		/* ExitCode stays null until the daemon has reaped the process. */
		if (!json_is_true(running) && json_is_integer(code)) {
			*exit_code = (int)json_integer_value(code);
			return 0;
		}
		if (brig_now_ms() >= deadline_ms)
			return brig__error_set(err, BRIG_ETIMEDOUT, 0,
					       "exec %.12s: output ended but the daemon reports it still running",
					       exec_id);
		struct timespec ts = {.tv_sec = 0, .tv_nsec = sleep_us * 1000};
		nanosleep(&ts, NULL);
		if (sleep_us < 50000)
			sleep_us *= 2;
	}
}

/* Output handling: frames normally; raw error text when the daemon reports
 * a failed start inside the stream (first byte is not a stream id). */
typedef struct exec_out {
	brig_frame_demux demux;
	const brig_engine_exec_io *io;
	int mode; /* 0 unknown, 1 framed, 2 raw error text */
	brig_buf raw;
} exec_out;

static int exec_out_feed(exec_out *o, const char *data, size_t len, brig_error **err)
{
	if (!len)
		return 0;
	if (o->mode == 0)
		o->mode = (unsigned char)data[0] <= 2 ? 1 : 2;
	if (o->mode == 2) {
		/* The daemon's error text is kept up to the cap and the rest
		 * dropped: clamped to the room left, the add cannot fail. */
		size_t room = o->raw.cap - o->raw.len;
		if (brig_buf_add(&o->raw, data, len < room ? len : room) < 0)
			return 0; /* past the cap: dropped, as above */
		return 0;
	}
	return brig_frame_demux_feed(&o->demux, data, len, o->io->on_output, o->io->payload, err);
}

struct brig_engine_stream {
	brig_http_conn *c;
	brig_http_response resp;
	char *what;
	bool has_stdin;
	/* brig_engine_stream_read's demultiplexer, kept across reads */
	exec_out out;
	brig_engine_exec_io out_io;
	bool out_ready;
};

void brig_engine_stream_free(brig_engine_stream *s)
{
	if (!s)
		return;
	brig_http_response_clear(&s->resp);
	brig_http_conn_free(s->c); /* a hijacked connection is never reused */
	if (s->out_ready)
		brig_buf_free(&s->out.raw);
	free(s->what);
	free(s);
}

/* Sends a request that hijacks the connection (101) and returns the stream. */
static int stream_open(brig_engine *e, brig_engine_stream **out, const char *path, const char *body, bool has_stdin,
		       int64_t deadline_ms, const char *what, brig_error **err)
{
	int64_t head_deadline = brig_now_ms() + e->timeout_ms;
	if (deadline_ms && deadline_ms < head_deadline)
		head_deadline = deadline_ms;
	brig_engine_stream *s = xcalloc(1, sizeof *s);
	s->what = xstrdup(what);
	s->has_stdin = has_stdin;
	int rc = brig_engine__conn_get(e, &s->c, head_deadline, err);
	if (rc) {
		brig_engine_stream_free(s);
		return brig__error_prefix(err, rc, "%s", what);
	}
	brig_http_request req = {.method = "POST",
				 .target = path,
				 .content_type = body ? "application/json" : NULL,
				 .body = body,
				 .body_len = body ? strlen(body) : 0,
				 .upgrade = true,
				 .deadline_ms = head_deadline};
	rc = brig_http_roundtrip(s->c, &req, &s->resp, 64 * 1024, NULL, NULL, err);
	if (rc) {
		if (rc == BRIG_EUNCERTAIN && deadline_ms && brig_now_ms() >= deadline_ms)
			rc = brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: deadline passed before it started", what);
		else
			brig__error_prefix(err, rc, "%s", what);
		brig_engine_stream_free(s);
		return rc;
	}
	if (s->resp.status != 101 && s->resp.status != 200) {
		rc = brig_engine__status_error(s->resp.status, s->resp.body.data, s->resp.body.len, what, err);
		brig_engine_stream_free(s);
		return rc;
	}
	if (s->resp.status == 200 && s->resp.body.len) {
		/* The daemon ignored the upgrade and sent the stream as a body. */
		free(s->resp.stream_head);
		s->resp.stream_head = brig_buf_steal(&s->resp.body, &s->resp.stream_head_len);
	}
	*out = s;
	return 0;
}

/* Writes as much pending stdin as the connection takes now. A command may
 * exit without reading all its stdin: the daemon then closes the stream and
 * the write fails. That is the end of stdin, not an uncertain result; the
 * output and the exit code say what happened. */
static void stdin_push(brig_http_conn *c, const char **pend, size_t *plen, bool *stdin_open, bool *peer_closed,
		       bool *stalled)
{
	size_t w = 0;
	brig_error *werr = NULL;
	if (brig_http_stream_write_some(c, *pend, *plen, &w, &werr) != 0) {
		brig_error_free(werr);
		*stdin_open = false;
		*peer_closed = true;
		*plen = 0;
		return;
	}
	*stalled = w == 0;
	*pend += w;
	*plen -= w;
}

/* One loop for the output, stdin, the deadline and cancellation. stdin goes
 * out only as far as the connection takes it between reads of the output:
 * a command that writes much before it reads its input must not find brig
 * stuck in a write while its own output fills up. */
int brig_engine_stream_pump(brig_engine_stream *s, const brig_engine_exec_io *io, brig_error **err)
{
	brig_http_conn *c = s->c;
	const char *what = s->what;
	int rc = 0;
	exec_out out = {.io = io};
	brig_frame_demux_init(&out.demux, io->max_frame);
	brig_buf_init(&out.raw, 4096);
	bool has_stdin = s->has_stdin && (io->stdin_fd >= 0 || io->stdin_data);
	bool stdin_open = has_stdin;
	bool peer_closed = false; /* a stdin write found the stream closed */
	bool stalled = false;     /* the last write took nothing: wait for output before the next */
	/* stdin not yet written: the caller's data, or what was last read from
	 * its fd into inbuf. */
	const char *pend = io->stdin_fd < 0 ? io->stdin_data : NULL;
	size_t plen = io->stdin_fd < 0 ? io->stdin_len : 0;
	char *inbuf = has_stdin && io->stdin_fd >= 0 ? xmalloc(65536) : NULL;
	char buf[65536];
	for (;;) {
		if (stdin_open && !plen && io->stdin_fd < 0) {
			/* all of the caller's data is out */
			stdin_open = false;
			brig_http_stream_close_write(c, NULL);
		}
		if (!brig_http_stream_pending(c, &s->resp)) {
			struct pollfd pfd[3];
			int n = 0;
			pfd[n++] = (struct pollfd){.fd = brig_http_conn_fd(c),
						   .events = POLLIN | (stdin_open && plen && !stalled ? POLLOUT : 0)};
			int stdin_idx = -1, cancel_idx = -1;
			if (stdin_open && !plen && io->stdin_fd >= 0) {
				stdin_idx = n;
				pfd[n++] = (struct pollfd){.fd = io->stdin_fd, .events = POLLIN};
			}
			if (io->cancel_fd >= 0) {
				cancel_idx = n;
				pfd[n++] = (struct pollfd){.fd = io->cancel_fd, .events = POLLIN};
			}
			int left = brig_remaining_ms(io->deadline_ms);
			int pr = poll(pfd, (nfds_t)n, stalled && (left < 0 || left > 50) ? 50 : left);
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr == 0 && stalled && left != 0) {
				stalled = false; /* try the write again */
				continue;
			}
			if (pr == 0) {
				rc = brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: deadline passed", what);
				goto out;
			}
			if (cancel_idx >= 0 && pfd[cancel_idx].revents) {
				rc = brig__error_set(err, BRIG_ECANCELED, 0, "%s: cancelled", what);
				goto out;
			}
			bool fresh = false;
			if (stdin_idx >= 0 && pfd[stdin_idx].revents) {
				ssize_t r = read(io->stdin_fd, inbuf, 65536);
				if (r < 0 && errno == EINTR)
					continue;
				if (r > 0) {
					pend = inbuf;
					plen = (size_t)r;
					fresh = true;
				} else {
					stdin_open = false;
					brig_http_stream_close_write(c, NULL);
				}
			}
			if (stdin_open && plen && (fresh || pfd[0].revents & POLLOUT))
				stdin_push(c, &pend, &plen, &stdin_open, &peer_closed, &stalled);
			if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
		}
		stalled = false; /* over TLS a write may wait for a read */
		ssize_t r = brig_http_stream_read(c, &s->resp, buf, sizeof buf, io->deadline_ms, err);
		if (r == BRIG_ETIMEDOUT) {
			rc = brig__error_prefix(err, r, "%s", what);
			goto out;
		}
		if (r < 0 && peer_closed) {
			/* The daemon closed the stream (and reset it, stdin unread):
			 * the output ends here; the exit code, read next, says how the
			 * command ended — or that the daemon is gone. */
			brig__error_clear(err);
			break;
		}
		if (r < 0) {
			rc = brig__error_prefix(err, BRIG_EUNCERTAIN, "%s", what);
			goto out;
		}
		if (r == 0)
			break;
		rc = exec_out_feed(&out, buf, (size_t)r, err);
		if (rc) {
			brig__error_prefix(err, rc, "%s", what);
			goto out;
		}
	}
	if (rc == 0 && out.mode == 1 && !brig_frame_demux_clean(&out.demux))
		rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: the output stream ended inside a frame", what);
	if (rc == 0 && out.mode == 2 && io->on_output && out.raw.len)
		io->on_output(BRIG_STREAM_STDERR, out.raw.data, out.raw.len, io->payload);
out:
	free(inbuf);
	brig_buf_free(&out.raw);
	return rc;
}

int brig_engine_exec_start(brig_engine *e, const char *exec_id, const brig_engine_exec_io *io, brig_error **err)
{
	cleanup_free char *i = brig_urlencode(exec_id);
	cleanup_free char *path = brig_engine__path(e, "/exec/%s/start", i);
	cleanup_free char *what = xasprintf("start exec %.12s", exec_id);
	bool has_stdin = io->stdin_fd >= 0 || io->stdin_data;
	brig_engine_stream *s = NULL;
	int rc = stream_open(e, &s, path, "{\"Detach\":false,\"Tty\":false}", has_stdin, io->deadline_ms, what, err);
	if (rc)
		return rc;
	rc = brig_engine_stream_pump(s, io, err);
	brig_engine_stream_free(s);
	return rc;
}

int brig_engine_container_attach(brig_engine *e, brig_engine_stream **out, const char *id, bool with_stdin,
				 brig_error **err)
{
	cleanup_free char *i = brig_urlencode(id);
	cleanup_free char *path = brig_engine__path(e, "/containers/%s/attach?stream=1&stdout=1&stderr=1%s", i,
						    with_stdin ? "&stdin=1" : "");
	cleanup_free char *what = xasprintf("attach to container %s", id);
	return stream_open(e, out, path, NULL, with_stdin, 0, what, err);
}

int brig_engine_exec_attach(brig_engine *e, brig_engine_stream **out, const char *exec_id, int64_t deadline_ms,
			    brig_error **err)
{
	cleanup_free char *i = brig_urlencode(exec_id);
	cleanup_free char *path = brig_engine__path(e, "/exec/%s/start", i);
	cleanup_free char *what = xasprintf("start exec %.12s", exec_id);
	return stream_open(e, out, path, "{\"Detach\":false,\"Tty\":false}", true, deadline_ms, what, err);
}

int brig_engine_stream_fd(const brig_engine_stream *s) { return brig_http_conn_fd(s->c); }

bool brig_engine_stream_pending(const brig_engine_stream *s) { return brig_http_stream_pending(s->c, &s->resp); }

ssize_t brig_engine_stream_read(brig_engine_stream *s, brig_engine_output_cb cb, void *payload, int64_t deadline_ms,
				brig_error **err)
{
	if (!s->out_ready) {
		s->out_io = (brig_engine_exec_io){.stdin_fd = -1, .cancel_fd = -1};
		s->out.io = &s->out_io;
		brig_frame_demux_init(&s->out.demux, 0);
		brig_buf_init(&s->out.raw, 4096);
		s->out_ready = true;
	}
	s->out_io.on_output = cb;
	s->out_io.payload = payload;
	char buf[65536];
	ssize_t r = brig_http_stream_read(s->c, &s->resp, buf, sizeof buf, deadline_ms, err);
	if (r < 0)
		return brig__error_prefix(err, (int)r, "%s", s->what);
	if (r == 0) {
		if (s->out.mode == 1 && !brig_frame_demux_clean(&s->out.demux))
			return brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: the output stream ended inside a frame",
					       s->what);
		if (s->out.mode == 2 && cb && s->out.raw.len) {
			/* the daemon's own words about a start that failed */
			cb(BRIG_STREAM_STDERR, s->out.raw.data, s->out.raw.len, payload);
			s->out.raw.len = 0;
		}
		return 0;
	}
	int rc = exec_out_feed(&s->out, buf, (size_t)r, err);
	if (rc)
		return brig__error_prefix(err, rc, "%s", s->what);
	return r;
}

int brig_engine_stream_write_some(brig_engine_stream *s, const void *buf, size_t n, size_t *written,
				  brig_error **err)
{
	int rc = brig_http_stream_write_some(s->c, buf, n, written, err);
	return rc ? brig__error_prefix(err, rc, "%s", s->what) : 0;
}

int brig_engine_stream_close_write(brig_engine_stream *s, brig_error **err)
{
	int rc = brig_http_stream_close_write(s->c, err);
	return rc ? brig__error_prefix(err, rc, "%s", s->what) : 0;
}
