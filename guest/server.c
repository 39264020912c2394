/* guest/server.c — brig-init init's single-threaded poll() loop: the
 * @brig-init socket, who may connect, connections, frame decoding, dispatch. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/init.h"

gi_conn *gi_conns;
static char boot_id[33];
static brig_gp_enc enc;

brig_gp_enc *gi_enc(void)
{
	brig_gp_enc_begin(&enc);
	return &enc;
}

int gi_buf_add(gi_buf *b, const void *p, size_t n)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->off > 65536 && b->off > b->len / 2) { /* compact */
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	unsigned char *np = realloc(b->p, b->len + n + 1);
	if (!np)
		return -1;
	b->p = np;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void gi_buf_free(gi_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

size_t gi_buf_pending(const gi_buf *b)
{
	return b->len - b->off;
}

void gi_send(gi_conn *c, uint8_t type, uint32_t id)
{
	long n = brig_gp_enc_finish(&enc, type, id);
	if (n < 0 || !c || c->dead)
		return;
	if (gi_buf_add(&c->out, enc.buf, (size_t)n) < 0)
		c->dead = 1; /* out of memory: this connection ends */
}

void gi_send_error(gi_conn *c, uint32_t id, int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	brig_gp_enc *e = gi_enc();
	brig_gp_put_int(e, BRIG_GP_F_ERRNO, err);
	brig_gp_put_str(e, BRIG_GP_F_MESSAGE, msg);
	gi_send(c, BRIG_GP_T_ERROR, id);
}

void gi_send_ok(gi_conn *c, uint32_t id)
{
	gi_enc();
	gi_send(c, BRIG_GP_T_OK, id);
}

/* ---- requests ---- */

static void req_free(gi_req *r)
{
	for (size_t i = 0; i < r->nargv; i++)
		free(r->argv[i]);
	for (size_t i = 0; i < r->nenv; i++)
		free(r->env[i]);
	free(r->argv);
	free(r->env);
	free(r->cwd);
	free(r->tag);
	free(r->path);
	free(r->path2);
}

static int push_str(char ***v, size_t *n, const brig_gp_field *f)
{
	char *s = brig_gp_field_strdup(f, 0);
	if (!s)
		return -1;
	char **nv = realloc(*v, (*n + 2) * sizeof **v);
	if (!nv) {
		free(s);
		return -1;
	}
	*v = nv;
	nv[(*n)++] = s;
	nv[*n] = NULL;
	return 0;
}

static int set_str(char **dst, const brig_gp_field *f, size_t max)
{
	char *s = brig_gp_field_strdup(f, max);
	if (!s)
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

/* Decodes every field brig-init knows; unknown tags are skipped. -1 when a
 * known field has the wrong shape (the connection then ends). */
static int req_decode(gi_req *r, const unsigned char *p, size_t n)
{
	memset(r, 0, sizeof *r);
	brig_gp_dec d;
	brig_gp_field f;
	brig_gp_dec_init(&d, p, n);
	int rc;
	while ((rc = brig_gp_dec_next(&d, &f)) == BRIG_GP_OK) {
		int64_t *iv = NULL;
		switch (f.tag) {
		case BRIG_GP_F_ARGV:
			if (push_str(&r->argv, &r->nargv, &f) < 0)
				return -1;
			continue;
		case BRIG_GP_F_ENV:
			if (push_str(&r->env, &r->nenv, &f) < 0)
				return -1;
			continue;
		case BRIG_GP_F_CWD:
			if (set_str(&r->cwd, &f, 4096) < 0)
				return -1;
			continue;
		case BRIG_GP_F_TAG:
			if (set_str(&r->tag, &f, GI_TAG_MAX) < 0)
				return -1;
			continue;
		case BRIG_GP_F_PATH:
			if (set_str(&r->path, &f, 4095) < 0)
				return -1;
			continue;
		case BRIG_GP_F_PATH2:
			if (set_str(&r->path2, &f, 4095) < 0)
				return -1;
			continue;
		case BRIG_GP_F_DATA:
			if (f.len > BRIG_GP_MAX_DATA)
				return -1;
			r->data = f.val;
			r->data_len = f.len;
			r->has_data = 1;
			continue;
		case BRIG_GP_F_VERSION: iv = &r->version; break;
		case BRIG_GP_F_ROWS: iv = &r->rows; break;
		case BRIG_GP_F_COLS: iv = &r->cols; break;
		case BRIG_GP_F_TIMEOUT_MS: iv = &r->timeout_ms; break;
		case BRIG_GP_F_DETACHED: iv = &r->detached; break;
		case BRIG_GP_F_STDIN: iv = &r->stdin_on; break;
		case BRIG_GP_F_KEEP: iv = &r->keep; break;
		case BRIG_GP_F_PROC: iv = &r->proc, r->has_proc = 1; break;
		case BRIG_GP_F_SIGNAL: iv = &r->sig; break;
		case BRIG_GP_F_NOFOLLOW: iv = &r->nofollow; break;
		case BRIG_GP_F_DEPTH: iv = &r->depth, r->has_depth = 1; break;
		case BRIG_GP_F_OFFSET: iv = &r->offset; break;
		case BRIG_GP_F_LENGTH: iv = &r->length, r->has_length = 1; break;
		case BRIG_GP_F_MODE: iv = &r->mode, r->has_mode = 1; break;
		case BRIG_GP_F_PARENTS: iv = &r->parents; break;
		case BRIG_GP_F_RECURSIVE: iv = &r->recursive; break;
		case BRIG_GP_F_APPEND: iv = &r->append; break;
		case BRIG_GP_F_STREAM: iv = &r->stream; break;
		case BRIG_GP_F_FLOW: iv = &r->flow; break;
		case BRIG_GP_F_WINDOW: iv = &r->window; break;
		case BRIG_GP_F_CREDIT: iv = &r->credit; break;
		default: continue;
		}
		if (brig_gp_field_int(&f, iv) != BRIG_GP_OK)
			return -1;
	}
	return rc == BRIG_GP_ENEED ? 0 : -1;
}

static void on_frame(gi_conn *c, const brig_gp_hdr *h, const unsigned char *payload)
{
	gi_req r;
	if (req_decode(&r, payload, h->len) < 0) {
		req_free(&r);
		c->dead = 1;
		return;
	}
	if (!c->hello) {
		if (h->type != BRIG_GP_T_HELLO) {
			c->dead = 1;
		} else if (r.version != BRIG_GP_VERSION) {
			gi_send_error(c, 0, EPROTO, "brig-init speaks protocol version %d, not %lld", BRIG_GP_VERSION,
				      (long long)r.version);
			c->dead = 2; /* flush the error, then close */
		} else {
			c->hello = 1;
			c->flow = r.flow == 1;
			brig_gp_enc *e = gi_enc();
			brig_gp_put_int(e, BRIG_GP_F_VERSION, BRIG_GP_VERSION);
			if (c->flow)
				brig_gp_put_int(e, BRIG_GP_F_FLOW, 1);
			brig_gp_put_int(e, BRIG_GP_F_PID, getpid());
			brig_gp_put_str(e, BRIG_GP_F_BOOT_ID, boot_id);
			gi_send(c, BRIG_GP_T_HELLO_OK, 0);
		}
		req_free(&r);
		return;
	}
	if ((h->type == BRIG_GP_T_STDIN || h->type == BRIG_GP_T_STDIN_CLOSE) &&
	    (c->blocked_on || gi_buf_pending(&c->deferred))) {
		/* a command's stdin is full: stdin waits, in order, the rest goes on */
		unsigned char hb[BRIG_GP_HDR_SIZE];
		brig_gp_hdr_write(hb, h->type, h->id, h->len);
		if (gi_buf_add(&c->deferred, hb, sizeof hb) < 0 || gi_buf_add(&c->deferred, payload, h->len) < 0)
			c->dead = 1;
		req_free(&r);
		return;
	}
	switch (h->type) {
	case BRIG_GP_T_START: gi_proc_start(c, h->id, &r); break;
	case BRIG_GP_T_STDIN: gi_proc_stdin(c, h->id, &r, 0); break;
	case BRIG_GP_T_STDIN_CLOSE: gi_proc_stdin(c, h->id, &r, 1); break;
	case BRIG_GP_T_SIGNAL: gi_proc_signal(c, h->id, &r); break;
	case BRIG_GP_T_KILL: gi_proc_kill(c, h->id, &r); break;
	case BRIG_GP_T_RESIZE: gi_proc_resize(h->id, &r); break;
	case BRIG_GP_T_CREDIT: gi_proc_credit(c, h->id, &r); break;
	case BRIG_GP_T_PS: gi_proc_ps(c, h->id); break;
	case BRIG_GP_T_ATTACH: gi_proc_attach(c, h->id, &r); break;
	case BRIG_GP_T_STATUS: gi_proc_status(c, h->id, &r); break;
	case BRIG_GP_T_STAT:
	case BRIG_GP_T_LIST:
	case BRIG_GP_T_READ:
	case BRIG_GP_T_WRITE:
	case BRIG_GP_T_MKDIR:
	case BRIG_GP_T_REMOVE:
	case BRIG_GP_T_RENAME:
	case BRIG_GP_T_SYMLINK: gi_file_op(c, h->type, h->id, &r); break;
	case BRIG_GP_T_DATA: gi_file_data(c, h->id, &r, 0); break;
	case BRIG_GP_T_WRITE_END: gi_file_data(c, h->id, &r, 1); break;
	default: gi_send_error(c, h->id, ENOSYS, "brig-init does not know message type %u", h->type); break;
	}
	req_free(&r);
}

/* Hands a connection's waiting STDIN frames on while its commands take them. */
static void undefer(gi_conn *c)
{
	while (!c->dead && !c->blocked_on && gi_buf_pending(&c->deferred) >= BRIG_GP_HDR_SIZE) {
		brig_gp_hdr h;
		const unsigned char *q = c->deferred.p + c->deferred.off;
		if (brig_gp_hdr_parse(&h, q) != BRIG_GP_OK || gi_buf_pending(&c->deferred) < BRIG_GP_HDR_SIZE + h.len)
			abort(); /* we wrote these frames ourselves */
		gi_req r;
		if (req_decode(&r, q + BRIG_GP_HDR_SIZE, h.len) == 0)
			gi_proc_stdin(c, h.id, &r, h.type == BRIG_GP_T_STDIN_CLOSE);
		req_free(&r);
		c->deferred.off += BRIG_GP_HDR_SIZE + h.len;
	}
	if (!gi_buf_pending(&c->deferred))
		c->deferred.off = c->deferred.len = 0;
}

/* ---- who may connect ---- */

/* Only a process Docker started from outside the container: its parent is
 * outside our PID namespace, so /proc/PID/stat says ppid 0. */
static int peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || cr.pid <= 0)
		return 0;
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)cr.pid);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return 0;
	ssize_t n = read(f, buf, sizeof buf - 1);
	close(f);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	if (!rp)
		return 0;
	char state;
	int ppid;
	if (sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
		return 0;
	return ppid == 0;
}

static void conn_free(gi_conn *c)
{
	gi_proc_conn_gone(c);
	gi_file_conn_gone(c);
	close(c->fd);
	brig_gp_reader_free(&c->rd);
	gi_buf_free(&c->out);
	gi_buf_free(&c->deferred);
	free(c);
}

static void conn_read(gi_conn *c)
{
	unsigned char buf[65536];
	ssize_t n = read(c->fd, buf, sizeof buf);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n == 0) {
		/* The peer is gone (or half-closed): its commands end now, and
		 * what is queued still goes out before the connection closes. */
		gi_proc_conn_gone(c);
		gi_file_conn_gone(c);
		c->dead = 2;
		return;
	}
	if (n < 0) {
		c->dead = 1;
		return;
	}
	size_t off = 0;
	while (off < (size_t)n && !c->dead) {
		size_t used;
		int rc = brig_gp_reader_feed(&c->rd, buf + off, (size_t)n - off, &used);
		off += used;
		if (rc == BRIG_GP_OK)
			on_frame(c, &c->rd.hdr, c->rd.payload);
		else if (rc != BRIG_GP_ENEED)
			c->dead = 1; /* malformed or oversized: the connection ends */
	}
}

static void conn_write(gi_conn *c)
{
	while (gi_buf_pending(&c->out)) {
		ssize_t w = write(c->fd, c->out.p + c->out.off, gi_buf_pending(&c->out));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w <= 0) {
			c->dead = 1;
			return;
		}
		c->out.off += (size_t)w;
	}
	c->out.off = c->out.len = 0;
}

static int bind_socket(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path + 1, BRIG_GP_SOCKET_NAME, strlen(BRIG_GP_SOCKET_NAME));
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(BRIG_GP_SOCKET_NAME));
	if (bind(s, (struct sockaddr *)&a, alen) < 0 || listen(s, 64) < 0) {
		close(s);
		return -1;
	}
	return s;
}

static void stop_and_exit(int code)
{
	gi_proc_kill_all_now();
	kill(-1, SIGTERM);
	int64_t until = gi_now_ms() + 2000;
	while (gi_now_ms() < until) {
		pid_t w = waitpid(-1, NULL, WNOHANG);
		if (w < 0 && errno == ECHILD)
			break;
		if (w <= 0)
			usleep(20000);
	}
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	exit(code);
}

#define MAXPF 4096

int gi_serve(int64_t lifetime_ms)
{
	/* Bound before anything else runs: nothing in the sandbox can take the name. */
	int ls = bind_socket();
	if (ls < 0) {
		fprintf(stderr, "brig-init: cannot bind @%s: %s\n", BRIG_GP_SOCKET_NAME, strerror(errno));
		return 1;
	}
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
		uint64_t t = (uint64_t)gi_wall_ms() ^ ((uint64_t)getpid() << 32);
		memcpy(rnd, &t, sizeof t);
		memcpy(rnd + 8, &t, sizeof t);
	}
	for (int i = 0; i < 16; i++)
		snprintf(boot_id + 2 * i, 3, "%02x", rnd[i]);
	sigset_t all;
	sigfillset(&all);
	int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return 1;
	int64_t end_at = lifetime_ms > 0 ? gi_now_ms() + lifetime_ms : 0;

	static struct pollfd pf[MAXPF];
	static gi_proc *pwho[MAXPF];
	static int pwhat[MAXPF];
	static gi_conn *cwho[MAXPF];
	for (;;) {
		int64_t now = gi_now_ms();
		if (end_at && now >= end_at)
			stop_and_exit(0);
		int64_t next = gi_proc_tick(now);
		if (end_at && (next < 0 || end_at - now < next))
			next = end_at - now;
		/* drop dead connections (dead 2: once the last words are out) */
		for (gi_conn **pp = &gi_conns; *pp;) {
			gi_conn *c = *pp;
			if (c->dead == 1 || (c->dead == 2 && !gi_buf_pending(&c->out))) {
				*pp = c->next;
				conn_free(c);
			} else {
				pp = &c->next;
			}
		}
		for (gi_conn *c = gi_conns; c; c = c->next) {
			undefer(c);
			gi_file_pump(c);
		}
		gi_proc_gc();

		int n = 0;
		pf[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = ls, .events = POLLIN};
		int nfixed = n;
		for (gi_conn *c = gi_conns; c && n < MAXPF - 1; c = c->next) {
			short ev = 0;
			if (!c->dead && gi_buf_pending(&c->deferred) < GI_DEFER_CAP &&
			    gi_buf_pending(&c->out) < GI_OUT_CAP)
				ev |= POLLIN;
			if (gi_buf_pending(&c->out))
				ev |= POLLOUT;
			cwho[n] = c;
			pf[n++] = (struct pollfd){.fd = c->fd, .events = ev};
		}
		int nconn = n;
		n += gi_proc_pollfds(pf + n, pwho + n, pwhat + n, MAXPF - n);
		int timeout = next < 0 ? -1 : (next > 60000 ? 60000 : (int)next);
		if (poll(pf, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (pf[0].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo == SIGCHLD)
					continue;
				/* only a kill(2) from outside (SI_USER, pid 0): the
				 * sandbox can forge pid 0 with rt_sigqueueinfo, never
				 * SI_USER */
				if (si.ssi_pid != 0 || si.ssi_code != SI_USER)
					continue; /* from inside the container: ignored */
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
					stop_and_exit(0);
			}
			int st;
			pid_t w;
			/* WUNTRACED: a shepherd stopped from inside is continued */
			while ((w = waitpid(-1, &st, WNOHANG | WUNTRACED)) > 0)
				gi_proc_child_exited(w, st);
		}
		if (pf[1].revents & POLLIN) {
			int cfd;
			/* A bounded number per turn: a connect flood from the sandbox
			 * must not keep PID 1 from its deadlines and connections. */
			int taken = 0;
			while (taken++ < 16 && (cfd = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
				if (!peer_allowed(cfd)) {
					close(cfd); /* closed without a word */
					continue;
				}
				gi_conn *c = calloc(1, sizeof *c);
				if (!c) {
					close(cfd);
					continue;
				}
				c->fd = cfd;
				brig_gp_reader_init(&c->rd);
				c->next = gi_conns;
				gi_conns = c;
			}
		}
		for (int i = nfixed; i < nconn; i++) {
			gi_conn *c = cwho[i];
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR))
				if (!c->dead)
					conn_read(c);
			if ((pf[i].revents & POLLOUT) && c->dead != 1)
				conn_write(c);
			if ((pf[i].revents & (POLLHUP | POLLERR)) && !(pf[i].events & POLLIN))
				c->dead = 1;
		}
		for (int i = nconn; i < n; i++)
			if (pf[i].revents)
				gi_proc_event(pwho[i], pwhat[i], pf[i].revents);
		/* push out what the handlers queued, without waiting for a poll */
		for (gi_conn *c = gi_conns; c; c = c->next)
			if (gi_buf_pending(&c->out) && c->dead != 1)
				conn_write(c);
	}
}
