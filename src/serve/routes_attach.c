/* routes_attach.c — POST …/exec/attach: a command with stdin, and a
 * terminal if asked, over an HTTP Upgrade to a raw two-way stream (frames:
 * serve/frames.h); POST …/processes/{id}/attach: the same stream to one of
 * brig-init's running commands (brig attach); POST /v1/runs/attach: a
 * disposable run (brig run) with its inputs and outputs as tar frames. One
 * thread reads the client's frames (inputs, stdin, EOF, resize, the
 * hang-up); another runs the command (or attaches to it) and writes its
 * output. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brig/session.h"
#include "serve/frames.h"
#include "serve/internal.h"
#include "serve/mhd_dl.h"
#include "util/util.h"

#define ATTACH_READ 65536

typedef struct attach {
	bool ended; /* its end frame was sent */
	serve_server *srv;
	brig_engine *e;
	brig_store *s;
	char *name;
	const char *actor; /* the token's name (the server's tokens outlive the stream) */
	json_t *body; /* keeps the strings of req alive */
	serve_exec_req req;
	bool tty;
	serve_upgraded *u;
	int sock;
	char *head; /* bytes the client sent before the 101 */
	size_t head_len;
	int in[2];     /* the command's stdin: [1] written here (nonblocking) */
	int cancel[2]; /* readable → the command is cancelled */
	int resize[2]; /* a byte per resize (tty) */
	int done[2];   /* readable → the command ended, its end frame is out */
	pthread_mutex_t lock;
	pthread_mutex_t wlock; /* one frame at a time on the socket */
	int rows, cols;
	bool gone; /* the client hung up: output is dropped */
	pthread_t th;
	/* brig attach: brig-init's command (from 1; 0: exec attach), through
	 * held (lent by serve__guest) or own (owned), the client's stdin
	 * passed on when proc_in */
	int64_t proc;
	brig_guest *held, *own;
	bool proc_in;
	/* brig run: the run (NULL: not one), started once its inputs are in;
	 * a hang-up cancels it but its end frame is still written (the client
	 * that half-closed waits for the container's removal) */
	serve_run_req *run;
	bool broken; /* a write failed: nothing more is written */
} attach;

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0) {
			close(p[i]);
			p[i] = -1;
		}
}

static void attach_free(void *payload)
{
	attach *a = payload;
	close_pair(a->in);
	close_pair(a->cancel);
	close_pair(a->resize);
	close_pair(a->done);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->wlock);
	serve_exec_req_clear(&a->req);
	if (a->run) {
		serve_run_clear(a->run);
		free(a->run);
	}
	if (a->held)
		serve__guest_release(a->srv, a->held);
	brig_guest_free(a->own);
	json_decref(a->body);
	free(a->head);
	free(a->name);
	free(a);
}

static void hang_up(attach *a)
{
	pthread_mutex_lock(&a->lock);
	bool first = !a->gone;
	a->gone = true;
	pthread_mutex_unlock(&a->lock);
	if (first)
		(void)!write(a->cancel[1], "x", 1);
}

/* The socket refused a write: the client is gone for good. */
static void broken(attach *a)
{
	pthread_mutex_lock(&a->lock);
	a->broken = true;
	pthread_mutex_unlock(&a->lock);
	hang_up(a);
}

static int send_frame(attach *a, unsigned type, const char *data, size_t len)
{
	pthread_mutex_lock(&a->lock);
	bool gone = a->run ? a->broken : a->gone;
	pthread_mutex_unlock(&a->lock);
	if (gone)
		return -1;
	while (len || type == SERVE_FRAME_END) {
		size_t n = len > SERVE_FRAME_DATA_MAX && type != SERVE_FRAME_END ? SERVE_FRAME_DATA_MAX : len;
		unsigned char hdr[SERVE_FRAME_HDR];
		serve_frame_header(hdr, type, (uint32_t)n);
		pthread_mutex_lock(&a->wlock);
		int w = brig_send_all(a->sock, hdr, sizeof hdr, -1) != 0 || brig_send_all(a->sock, data, n, -1) != 0;
		pthread_mutex_unlock(&a->wlock);
		if (w) {
			broken(a);
			return -1;
		}
		data += n;
		len -= n;
		if (type == SERVE_FRAME_END)
			break;
	}
	return 0;
}

static int on_output(int stream, const char *data, size_t len, void *payload)
{
	/* A client gone is not the command's failure: its output is dropped
	 * while the cancel ends it. */
	(void)send_frame(payload, stream == BRIG_STREAM_STDERR ? SERVE_FRAME_STDERR : SERVE_FRAME_STDOUT, data, len);
	return 0;
}

static void size_of(int *rows, int *cols, void *payload)
{
	attach *a = payload;
	pthread_mutex_lock(&a->lock);
	*rows = a->rows;
	*cols = a->cols;
	pthread_mutex_unlock(&a->lock);
}

/* The end frame: ev (taken) as one JSON object. */
static void send_end(attach *a, json_t *ev)
{
	a->ended = true;
	char *text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	if (text)
		(void)send_frame(a, SERVE_FRAME_END, text, strlen(text));
	free(text);
}

/* brig attach: the command's output until it ends, or until the client
 * hangs up (the cancel ends the attachment, never the command). */
static void proc_attach(attach *a)
{
	brig_guest_exec_opts o = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				  .stdin_fd = a->proc_in ? a->in[0] : -1,
				  .cancel_fd = a->cancel[0],
				  .on_output = on_output,
				  .payload = a};
	brig_guest_exit x;
	brig_error *err = NULL;
	int rc = brig_guest_attach(a->held ? a->held : a->own, a->proc, &o, &x, &err);
	/* cancel and deadline end only the attachment: as any error */
	send_end(a, rc ? serve__error_event(rc, err)
		       : json_pack("{s:s,s:i,s:i,s:b}", "type", "exit", "exit_code", x.code, "signal", x.signal,
				   "killed", x.killed));
	brig_error_free(err);
}

/* brig run: the run, its outputs as tar frames, then its end frame (the
 * run's result; an error with the result when the run has one: a cancel,
 * an unsafe output). */
static void run_command(attach *a)
{
	brig_run_opts o = BRIG_RUN_OPTS_INIT;
	o.stdin_fd = a->run->with_stdin ? a->in[0] : -1;
	o.cancel_fd = a->cancel[0];
	o.on_output = on_output;
	o.payload = a;
	brig_run_result res = {0};
	brig_error *err = NULL;
	int rc = serve__run_go(a->run, a->e, &o, &res, &err);
	if (!rc)
		serve__exec_observe(a->srv, res.run_ms);
	if (!rc && a->run->outputs) {
		brig_tar_builder *b = NULL;
		rc = serve__run_outputs(a->run, &b, &err);
		char *chunk = rc ? NULL : xmalloc(SERVE_FRAME_DATA_MAX);
		ssize_t n;
		while (!rc && (n = brig_tar_builder_read(b, chunk, SERVE_FRAME_DATA_MAX, &err)) != 0) {
			if (n < 0)
				rc = (int)n;
			else if (send_frame(a, SERVE_FRAME_TAR, chunk, (size_t)n) != 0)
				break; /* the client is gone: nothing to say to it */
		}
		free(chunk);
		brig_tar_builder_free(b);
		if (rc)
			brig__error_prefix(&err, rc, "send the outputs");
	}
	json_t *ev;
	if (rc) {
		ev = serve__error_event(rc, err);
		if (rc == BRIG_ECANCELED || rc == BRIG_EUNCERTAIN || rc == BRIG_EUNSAFE)
			json_object_set_new(ev, "result", brig_run_result_to_json(&res));
	} else {
		ev = brig_run_result_to_json(&res);
		json_object_set_new(ev, "type", json_string("exit"));
	}
	send_end(a, ev);
	brig_error_free(err);
	brig_run_result_clear(&res);
}

static void *command_thread(void *arg)
{
	attach *a = arg;
	if (a->run) {
		run_command(a);
		(void)!write(a->done[1], "x", 1);
		return NULL;
	}
	if (a->proc) {
		proc_attach(a);
		(void)!write(a->done[1], "x", 1);
		return NULL;
	}
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	serve__exec_opts(&o, &a->req); /* no stdin_data: the route refuses "stdin" */
	o.stdin_fd = a->in[0];
	o.cancel_fd = a->cancel[0];
	o.on_output = on_output;
	o.payload = a;
	brig_exec_result res = {0};
	brig_error *err = NULL;
	int64_t t0 = brig_now_ms();
	int rc;
	if (a->tty) {
		int rows, cols;
		size_of(&rows, &cols, a);
		rc = brig_session_exec_tty(a->e, a->s, a->name, &o, a->actor, rows, cols, a->resize[0], size_of, a, &res,
					   &err);
	} else {
		rc = brig_session_exec_by(a->e, a->s, a->name, &o, NULL, a->actor, &res, &err);
	}
	serve__exec_observe(a->srv, brig_now_ms() - t0);
	/* As ?stream=true's last line. */
	json_t *ev = serve__exec_end_event(rc, &res, err);
	if (res.container_stopped)
		serve__guest_forget(a->srv, a->name);
	send_end(a, ev);
	brig_error_free(err);
	brig_exec_result_clear(&res);
	(void)!write(a->done[1], "x", 1);
	return NULL;
}

/* ---- the client's frames ---- */

typedef struct reader {
	attach *a;
	brig_buf pend; /* stdin not yet taken by the command */
	bool eof;      /* the EOF frame came: close stdin once pend is out */
	pthread_t th; /* the command's */
	bool started;
	/* brig run: its inputs, extracted into its directory as they come;
	 * the run starts at TAR_END */
	serve_frame_dec *dec;
	brig_tar_extract *inx;
	brig_error *in_err; /* the inputs failed: said in the end frame */
} reader;

/* The command's thread; false (its end frame sent) when it cannot start. */
static bool command_start(reader *rd)
{
	attach *a = rd->a;
	rd->started = pthread_create(&rd->th, NULL, command_thread, a) == 0;
	if (!rd->started) {
		const char *end = "{\"type\":\"error\",\"code\":\"internal\",\"message\":\"cannot start a thread\"}";
		(void)send_frame(a, SERVE_FRAME_END, end, strlen(end));
		(void)!write(a->done[1], "x", 1);
	}
	return rd->started;
}

static int on_frame(unsigned type, const char *data, size_t len, void *payload)
{
	reader *rd = payload;
	attach *a = rd->a;
	if (type == SERVE_FRAME_TAR) {
		/* the extractor's checks (names, links, sizes) are the inputs' */
		int rc = brig_tar_extract_feed(rd->inx, data, len, &rd->in_err);
		if (rc)
			return rc;
	} else if (type == SERVE_FRAME_TAR_END) {
		int rc = brig_tar_extract_finish(rd->inx, &rd->in_err);
		brig_tar_extract_free(rd->inx);
		rd->inx = NULL;
		if (rc)
			return rc;
		rd->dec->allowed = 1u << SERVE_FRAME_STDIN | 1u << SERVE_FRAME_EOF;
		if (!command_start(rd))
			return BRIG_ECANCELED;
	} else if (type == SERVE_FRAME_STDIN) {
		if (a->in[1] >= 0)
			brig_buf_put(&rd->pend, data, len);
	} else if (type == SERVE_FRAME_EOF) {
		rd->eof = true;
	} else if (type == SERVE_FRAME_RESIZE) {
		int rows, cols;
		serve_frame_resize_get(data, &rows, &cols);
		pthread_mutex_lock(&a->lock);
		a->rows = rows;
		a->cols = cols;
		pthread_mutex_unlock(&a->lock);
		if (a->resize[1] >= 0)
			(void)!write(a->resize[1], "r", 1);
	}
	return 0;
}

/* Moves pending stdin into the command's pipe as far as it takes it now. */
static void stdin_push(reader *rd)
{
	attach *a = rd->a;
	while (rd->pend.len && a->in[1] >= 0) {
		ssize_t w = write(a->in[1], rd->pend.data, rd->pend.len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w <= 0) { /* the command closed its stdin: the rest is dropped */
			close(a->in[1]);
			a->in[1] = -1;
			rd->pend.len = 0;
			return;
		}
		memmove(rd->pend.data, rd->pend.data + w, rd->pend.len - (size_t)w);
		rd->pend.len -= (size_t)w;
	}
	if (rd->eof && !rd->pend.len && a->in[1] >= 0) {
		close(a->in[1]);
		a->in[1] = -1;
	}
}

/* Returns false when the client is gone or broke the protocol (the
 * command is then cancelled). */
static bool feed(reader *rd, serve_frame_dec *dec, const char *data, size_t len)
{
	brig_error *err = NULL;
	int rc = serve_frame_feed(dec, data, len, on_frame, rd, &err);
	if (rc != 0 && rd->in_err) { /* the run's inputs: said to the client, as direct says it */
		brig__error_prefix(&rd->in_err, rd->in_err->code, "copy inputs in");
		send_end(rd->a, serve__error_event(rd->in_err->code, rd->in_err));
		brig_error_free(rd->in_err);
		rd->in_err = NULL;
		brig_error_free(err);
		(void)!write(rd->a->done[1], "x", 1);
		return false;
	}
	if (rc != 0) {
		fprintf(stderr, "brig: serve: %s on %s: %s; the command is cancelled\n",
			rd->a->run ? "run attach" : "exec attach", rd->a->name,
			err ? brig_error_message(err) : "the stream broke off");
		brig_error_free(err);
		return false;
	}
	stdin_push(rd);
	return true;
}

static void *attach_thread(void *arg)
{
	attach *a = arg;
	serve_frame_dec dec;
	reader rd = {.a = a, .dec = &dec};
	bool open = true;
	if (a->run) {
		/* the inputs first, checked as the existing POST /v1/runs checks
		 * inputs_tar; the run starts at TAR_END (on_frame) */
		serve_frame_dec_init(&dec, 1u << SERVE_FRAME_TAR | 1u << SERVE_FRAME_TAR_END);
		brig_tar_extract_opts xo = BRIG_TAR_EXTRACT_OPTS_INIT;
		xo.allow_symlinks = true;
		brig_error *err = NULL;
		if (brig_tar_extract_new(&rd.inx, AT_FDCWD, a->run->indir, &xo, &err) != 0) {
			send_end(a, serve__error_event(err->code, err));
			brig_error_free(err);
			open = false;
		}
	} else {
		serve_frame_dec_init(&dec, 1u << SERVE_FRAME_STDIN | 1u << SERVE_FRAME_EOF | 1u << SERVE_FRAME_RESIZE);
		command_start(&rd);
	}
	brig_buf_init(&rd.pend, ATTACH_READ + a->head_len); /* what one read can add */
	open = open && (a->head_len == 0 || feed(&rd, &dec, a->head, a->head_len));
	if (!open)
		hang_up(a);
	char *buf = xmalloc(ATTACH_READ);
	for (;;) {
		if (!open && !rd.started) {
			/* a run gone before its inputs were in: nothing runs, and a
			 * client that only half-closed (Ctrl-C) hears so */
			if (a->run && !a->ended) {
				brig_error *e = NULL;
				brig__error_set(&e, BRIG_ECANCELED, 0, "run canceled before its inputs were in: nothing ran");
				send_end(a, serve__error_event(BRIG_ECANCELED, e));
				brig_error_free(e);
			}
			break;
		}
		/* The client is read only when its stdin so far is out: a
		 * command that does not read stdin holds the client back (TCP's
		 * window), not the server's memory. Its hang-up is seen anyway. */
		struct pollfd p[3] = {
			{.fd = a->done[0], .events = POLLIN},
			{.fd = open ? a->sock : -1, .events = POLLRDHUP | (rd.pend.len ? 0 : POLLIN)},
			{.fd = rd.pend.len && a->in[1] >= 0 ? a->in[1] : -1, .events = POLLOUT},
		};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		if (p[2].revents)
			stdin_push(&rd);
		if (!p[1].revents)
			continue;
		if (p[1].revents & POLLIN) {
			ssize_t n = recv(a->sock, buf, ATTACH_READ, 0);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n > 0 && feed(&rd, &dec, buf, (size_t)n))
				continue;
		} else if (!(p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			continue;
		}
		/* EOF, an error, a hang-up, a broken frame: the client is gone. */
		open = false;
		hang_up(a);
	}
	free(buf);
	brig_buf_free(&rd.pend);
	serve_frame_dec_clear(&dec);
	if (rd.started)
		pthread_join(rd.th, NULL);
	brig_tar_extract_free(rd.inx);
	brig_error_free(rd.in_err);
	serve__upgraded_close(a->u);
	attach_free(a);
	return NULL;
}

static void attach_start(void *payload, serve_upgraded *u, const char *extra, size_t extra_len)
{
	attach *a = payload;
	a->u = u;
	a->sock = serve__upgraded_fd(u);
	if (extra_len) {
		a->head = xmalloc(extra_len);
		memcpy(a->head, extra, extra_len);
		a->head_len = extra_len;
	}
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&a->th, &at, attach_thread, a) != 0) {
		fprintf(stderr, "brig: serve: exec attach on %s: cannot start a thread\n", a->name);
		serve__upgraded_close(u);
		attach_free(a);
	}
	pthread_attr_destroy(&at);
}

/* Whether header h holds token t (comma-separated, any case). */
static bool header_has(serve_req *r, const char *h, const char *t)
{
	const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, h);
	size_t tl = strlen(t);
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t n = strcspn(v, ",");
		size_t m = n;
		while (m && (v[m - 1] == ' ' || v[m - 1] == '\t'))
			m--;
		if (m == tl && strncasecmp(v, t, tl) == 0)
			return true;
		v += n;
	}
	return false;
}

bool serve__upgrade_ok(serve_req *r, serve_reply *out)
{
	if (!header_has(r, "Connection", "upgrade") || !header_has(r, "Upgrade", "tcp")) {
		serve__reply_fail(
			out, 426, "upgrade_required",
			"this route switches to a raw stream: send \"Connection: Upgrade\" and \"Upgrade: tcp\"");
		out->extra_header = "Upgrade";
		out->extra_value = "tcp";
		return false;
	}
	if (r->http10) {
		serve__reply_fail(out, 400, "invalid", "an upgrade to a stream needs HTTP/1.1");
		return false;
	}
	return true;
}

/* A stream for computer name (taken), its pipes made; NULL with *out
 * answered. */
static attach *attach_new(serve_req *r, serve_reply *out, char *name)
{
	attach *a = xcalloc(1, sizeof *a);
	a->srv = r->srv;
	a->e = serve__engine(r);
	a->s = serve__store(r);
	a->actor = serve_tokens_name(r->token);
	a->name = name;
	a->body = json_incref(r->json);
	a->sock = -1;
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->wlock, NULL);
	int *pairs[] = {a->in, a->cancel, a->resize, a->done};
	for (size_t i = 0; i < 4; i++)
		pairs[i][0] = pairs[i][1] = -1;
	for (size_t i = 0; i < 4; i++)
		if (pipe2(pairs[i], O_CLOEXEC) != 0) {
			serve__reply_fail(out, 500, "io", "pipe: %s", strerror(errno));
			attach_free(a);
			return NULL;
		}
	/* The command's stdin is fed without ever blocking the reader (which
	 * must keep seeing the hang-up); the resize pipe never blocks either. */
	fcntl(a->in[1], F_SETFL, O_NONBLOCK);
	fcntl(a->resize[1], F_SETFL, O_NONBLOCK);
	out->status = 101;
	out->upgrade = attach_start;
	out->done = attach_free;
	out->payload = a;
	return a;
}

void serve__h_exec_attach(serve_req *r, serve_reply *out)
{
	if (!serve__upgrade_ok(r, out))
		return;
	if (json_object_get(r->json, "stdin")) {
		serve__reply_fail(out, 400, "invalid", "stdin: it comes over the stream (frames of type 0)");
		return;
	}
	cleanup_free char *name = NULL;
	if (!serve__path_computer(r, out, &name))
		return;
	int64_t rows = 24, cols = 80;
	if (!serve__query_i64(r, out, "rows", 1, SERVE_FRAME_TTY_MAX, &rows) ||
	    !serve__query_i64(r, out, "cols", 1, SERVE_FRAME_TTY_MAX, &cols))
		return;
	serve_exec_req req;
	if (!serve__exec_req(r, out, &req))
		return;
	attach *a = attach_new(r, out, steal_pointer(&name));
	if (!a) {
		serve_exec_req_clear(&req);
		return;
	}
	a->req = req;
	a->tty = serve__query_bool(r, "tty");
	a->rows = (int)rows;
	a->cols = (int)cols;
}

bool serve__proc_attach(serve_req *r, serve_reply *out, const char *name, brig_guest *held, brig_guest *own,
			int64_t proc, bool in)
{
	attach *a = attach_new(r, out, xstrdup(name));
	if (!a)
		return false;
	a->proc = proc;
	a->held = held;
	a->own = own;
	a->proc_in = in;
	return true;
}

void serve__h_runs_attach(serve_req *r, serve_reply *out)
{
	if (!serve__upgrade_ok(r, out))
		return;
	serve_run_req *run = xmalloc(sizeof *run);
	if (!serve__run_prep(r, out, run, true)) {
		free(run);
		return;
	}
	attach *a = attach_new(r, out, xstrdup("a run"));
	if (!a) {
		serve_run_clear(run);
		free(run);
		return;
	}
	a->run = run;
	if (!run->with_stdin) { /* stdin frames are dropped; the command has none */
		close(a->in[1]);
		a->in[1] = -1;
	}
}
