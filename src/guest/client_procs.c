/* client_procs.c — commands over a brig-init relay: exec to completion,
 * detached starts, attach, ps, status, kill and signals. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "guest/client.h"

/* ---- processes ---- */

static void exit_from(brig_guest_exit *x, const gmsg *m)
{
	x->code = (int)brig_guest__geti(m, BRIG_GP_F_CODE, -1);
	if (x->code < -1 || x->code > 255)
		x->code = -1;
	int64_t sig = brig_guest__geti(m, BRIG_GP_F_SIGNAL, 0);
	x->signal = sig > 0 && sig < 128 ? (int)sig : 0;
	x->timed_out = brig_guest__geti(m, BRIG_GP_F_TIMED_OUT, 0) != 0;
	x->killed = brig_guest__geti(m, BRIG_GP_F_KILLED, 0) != 0;
	int64_t d = brig_guest__geti(m, BRIG_GP_F_DROPPED, 0);
	x->dropped = d > 0 ? (uint64_t)d : 0;
	int64_t p = brig_guest__geti(m, BRIG_GP_F_PROC, 0);
	if (p > 0)
		x->proc = p;
}

static void put_start(brig_gp_enc *e, const brig_guest_exec_opts *o, const char *tag, bool detached, bool flow)
{
	brig_gp_enc_begin(e);
	for (const char *const *a = o->argv; *a; a++)
		brig_gp_put_str(e, BRIG_GP_F_ARGV, *a);
	for (size_t i = 0; o->env && i < o->env_count; i++)
		brig_gp_put_str(e, BRIG_GP_F_ENV, o->env[i]);
	brig_gp_put_str(e, BRIG_GP_F_CWD, o->cwd);
	if (o->deadline_ms) {
		int64_t left = o->deadline_ms - brig_now_ms();
		brig_gp_put_int(e, BRIG_GP_F_TIMEOUT_MS, left > 0 ? left : 1);
	}
	brig_gp_put_int(e, BRIG_GP_F_DETACHED, detached);
	brig_gp_put_int(e, BRIG_GP_F_STDIN, o->stdin_fd >= 0 || o->stdin_data);
	brig_gp_put_str(e, BRIG_GP_F_TAG, tag);
	if (detached && o->keep)
		brig_gp_put_int(e, BRIG_GP_F_KEEP, (int64_t)o->keep);
	if (flow && !detached)
		brig_gp_put_int(e, BRIG_GP_F_WINDOW, BRIG_GUEST_WINDOW);
	if (o->rows > 0 && o->cols > 0) {
		brig_gp_put_int(e, BRIG_GP_F_ROWS, o->rows);
		brig_gp_put_int(e, BRIG_GP_F_COLS, o->cols);
	}
}

static void make_tag(brig_guest *g, char tag[65], const char *given)
{
	if (given && *given && strlen(given) <= 64) {
		strcpy(tag, given);
		return;
	}
	unsigned char r[12];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, r, sizeof r) : -1;
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof r) {
		pthread_mutex_lock(&g->mu);
		uint64_t s = ++g->tag_seq;
		pthread_mutex_unlock(&g->mu);
		uint64_t t = (uint64_t)brig_now_ms() ^ ((uint64_t)getpid() << 32);
		memcpy(r, &s, 8);
		memcpy(r + 8, &t, 4);
	}
	brig_hex(tag, r, sizeof r);
}

static int check_exec_opts(const brig_guest_exec_opts *o, brig_error **err)
{
	if (!o || o->version != BRIG_GUEST_EXEC_OPTS_VERSION)
		return brig__error_set(err, BRIG_EINVAL, 0, "guest exec options: version must be %d",
				       BRIG_GUEST_EXEC_OPTS_VERSION);
	if (!o->argv || !o->argv[0] || !*o->argv[0])
		return brig__error_set(err, BRIG_EINVAL, 0, "exec: a command is required (argv is empty)");
	/* brig-init's own caps (guest/server.c): a field over one would end
	 * the whole relay, and every command sharing it. */
	size_t total = 0;
	for (size_t i = 0; o->argv[i]; i++) {
		size_t n = strlen(o->argv[i]);
		if (n > BRIG_GP_MAX_STR)
			return brig__error_set(err, BRIG_EINVAL, 0, "exec: argument %zu is %zu bytes; at most %u", i, n,
					       BRIG_GP_MAX_STR);
		total += n + 5;
	}
	for (size_t i = 0; o->env && i < o->env_count; i++) {
		size_t n = o->env[i] ? strlen(o->env[i]) : 0;
		if (n > BRIG_GP_MAX_STR)
			return brig__error_set(err, BRIG_EINVAL, 0, "exec: environment entry %zu is %zu bytes; at most %u",
					       i, n, BRIG_GP_MAX_STR);
		total += n + 5;
	}
	if (total > BRIG_GP_MAX_PAYLOAD - 4096)
		return brig__error_set(err, BRIG_EINVAL, 0, "exec: arguments and environment take %zu bytes; at most %u",
				       total, BRIG_GP_MAX_PAYLOAD - 4096);
	if (o->cwd && strlen(o->cwd) > 4096)
		return brig__error_set(err, BRIG_EINVAL, 0, "exec: the working directory is longer than 4096 bytes");
	return 0;
}

/* Sends a START (or ATTACH) and waits for STARTED (OK): the waiter is then
 * bound to the proc. */
static int await_start(brig_guest *g, gwaiter *w, const char *op, int64_t deadline_ms, bool bind, brig_guest_exit *x,
		       brig_error **err)
{
	gframe *f = NULL;
	int rc = brig_guest__waiter_next(g, w, &f, brig_guest__grace(deadline_ms), -1, err);
	if (rc == BRIG_ETIMEDOUT)
		return brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
	if (rc)
		return rc;
	if (f->type == BRIG_GP_T_ERROR) {
		rc = brig_guest__error_from(g, f, op, err);
		if (rc == BRIG_ENOTFOUND)
			x->code = 127;
		else if (rc == BRIG_EDENIED)
			x->code = 126;
	} else if (f->type != BRIG_GP_T_STARTED && f->type != BRIG_GP_T_OK) {
		rc = brig_guest__unexpected(g, f, op, err);
	} else {
		gmsg m;
		rc = brig_guest__msg_parse(g, f, &m, false, err);
		if (!rc && brig_guest__geti(&m, BRIG_GP_F_PROC, 0) <= 0) {
			brig_guest__frame_free(f);
			pthread_mutex_lock(&g->mu);
			brig_guest__die_locked(g, BRIG_EPROTO, "brig-init answered %s without a proc id", op);
			rc = brig_guest__dead_error(g, err);
			pthread_mutex_unlock(&g->mu);
			return rc;
		}
		if (!rc)
			x->proc = brig_guest__geti(&m, BRIG_GP_F_PROC, 0);
		pthread_mutex_lock(&g->mu);
		bool bound = w->proc == x->proc;
		pthread_mutex_unlock(&g->mu);
		if (!rc && bind && !bound)
			rc = brig__error_set(err, BRIG_ECONFLICT, 0, "%s: proc %lld is already attached on this relay",
					     op, (long long)x->proc);
	}
	brig_guest__frame_free(f);
	return rc;
}

typedef struct pump {
	const brig_guest_exec_opts *o;
	const char *pend;
	size_t plen;
	bool stdin_open;
	bool have; /* stdin_fd: bytes read (or its end) not yet sent */
	char *inbuf;
} pump;

static bool cancel_ready(int fd)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	return fd >= 0 && poll(&pf, 1, 0) > 0;
}

/* True when a stdin chunk of n bytes may go now: the relay's queue has
 * room and (FLOW) the call's stdin window too. */
static bool stdin_room(brig_guest *g, gwaiter *w, size_t n)
{
	if (!brig_guest__out_room(g, n + 64))
		return false;
	pthread_mutex_lock(&g->mu);
	bool ok = !g->flow || g->dead || w->stdin_credit >= (int64_t)n;
	pthread_mutex_unlock(&g->mu);
	return ok;
}

/* Sends one STDIN chunk, or STDIN_CLOSE at the end. */
static int pump_stdin(brig_guest *g, gwaiter *w, pump *p, int64_t proc, int64_t deadline_ms, brig_error **err)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	if (!p->plen) {
		p->stdin_open = false;
		return brig_guest__send_frame(g, &e, BRIG_GP_T_STDIN_CLOSE, (uint32_t)proc, deadline_ms, err);
	}
	size_t k = p->plen < BRIG_GP_MAX_DATA ? p->plen : BRIG_GP_MAX_DATA;
	pthread_mutex_lock(&g->mu);
	w->stdin_credit -= (int64_t)k;
	pthread_mutex_unlock(&g->mu);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, p->pend, k);
	p->pend += k;
	p->plen -= k;
	return brig_guest__send_frame(g, &e, BRIG_GP_T_STDIN, (uint32_t)proc, deadline_ms, err);
}

static int send_kill(brig_guest *g, int64_t proc, uint32_t *req_out, gwaiter **wout, int64_t deadline_ms,
		     brig_error **err)
{
	gwaiter *w = brig_guest__waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, proc);
	int rc = brig_guest__send_frame(g, &e, BRIG_GP_T_KILL, w->req, deadline_ms, err);
	if (rc) {
		brig_guest__waiter_remove(g, w);
		return rc;
	}
	*wout = w;
	*req_out = w->req;
	return 0;
}

/* Streams a bound proc's output until EXIT; deadline (guest's own, plus
 * brig_guest__grace) and cancel end the tree with KILL when end_tree, or only the
 * attachment. */
static int drive(brig_guest *g, gwaiter *w, int64_t proc, const brig_guest_exec_opts *o, bool end_tree,
		 brig_guest_exit *x, brig_error **err)
{
	pump p = {.o = o,
		  .pend = o->stdin_fd < 0 ? o->stdin_data : NULL,
		  .plen = o->stdin_fd < 0 ? o->stdin_len : 0,
		  .stdin_open = o->stdin_fd >= 0 || o->stdin_data};
	int rc = 0;
	bool canceled = false, ours_timed_out = false, cb_failed = false, got_exit = false;
	int64_t taken = 0; /* FLOW: output consumed since the last CREDIT */
	int cb_rc = 0;
	gwaiter *kw = NULL;
	uint32_t kreq = 0;
	/* the guest's deadline, then ours; none without one */
	int64_t hard = o->deadline_ms ? o->deadline_ms + BRIG_GUEST_GRACE_MS : 0;
	int64_t kill_by = 0; /* once KILL is sent: its answer's deadline */
	char inbuf[BRIG_GP_MAX_DATA];
	for (;;) {
		/* stdin goes out chunk by chunk between frames, and only while the
		 * relay's queue has room: a command that does not read it must
		 * not keep this loop from its frames (an EXIT at the guest's
		 * deadline), our deadline or a cancel. */
		bool stdin_full = false;
		if (p.stdin_open && !kw && (o->stdin_fd < 0 || p.have)) {
			size_t k = p.plen < BRIG_GP_MAX_DATA ? p.plen : BRIG_GP_MAX_DATA;
			if (stdin_room(g, w, k)) {
				rc = pump_stdin(g, w, &p, proc, hard, err);
				if (rc)
					break;
				if (o->stdin_fd >= 0 && !p.plen)
					p.have = false;
				pthread_mutex_lock(&g->mu);
				bool busy = w->head != NULL;
				pthread_mutex_unlock(&g->mu);
				if (p.stdin_open && (o->stdin_fd < 0 || p.have) && !busy) {
					if (cancel_ready(o->cancel_fd)) {
						canceled = true;
						goto kill;
					}
					if (hard && brig_now_ms() >= hard) {
						ours_timed_out = true;
						goto kill;
					}
					continue;
				}
			} else {
				stdin_full = true;
			}
		}
		int extra = -1;
		if (!kw && o->cancel_fd >= 0)
			extra = o->cancel_fd;
		gframe *f = NULL;
		int wr;
		bool want_stdin = p.stdin_open && o->stdin_fd >= 0 && !p.have;
		bool want_resize = o->size_cb && o->resize_fd >= 0;
		if ((want_stdin || want_resize || stdin_full) && !kw) {
			/* wait for a frame, stdin, the cancel fd or a resize at once */
			struct pollfd pfd[4] = {{.fd = w->efd, .events = POLLIN},
						{.fd = want_stdin ? o->stdin_fd : -1, .events = POLLIN},
						{.fd = extra, .events = POLLIN},
						{.fd = want_resize ? o->resize_fd : -1, .events = POLLIN}};
			pthread_mutex_lock(&g->mu);
			bool ready = w->head || w->overflow || g->dead;
			pthread_mutex_unlock(&g->mu);
			if (!ready) {
				int tmo = brig_remaining_ms(hard);
				if (stdin_full && (tmo < 0 || tmo > 10))
					tmo = 10; /* look for room again soon */
				int pr = poll(pfd, 4, tmo);
				if (pr < 0 && errno == EINTR)
					continue;
				if (pr > 0 && pfd[2].revents && extra >= 0) {
					canceled = true;
					goto kill;
				}
				if (pr > 0 && pfd[3].revents) {
					char junk[64];
					ssize_t jr = read(o->resize_fd, junk, sizeof junk);
					(void)jr;
					int rows = 0, cols = 0;
					o->size_cb(&rows, &cols, o->size_payload);
					if (rows > 0 && rows <= 1000 && cols > 0 && cols <= 1000) {
						brig_gp_enc e = {0};
						brig_gp_enc_begin(&e);
						brig_gp_put_int(&e, BRIG_GP_F_ROWS, rows);
						brig_gp_put_int(&e, BRIG_GP_F_COLS, cols);
						rc = brig_guest__send_frame(g, &e, BRIG_GP_T_RESIZE, (uint32_t)proc,
									    hard, err);
						if (rc)
							break;
					}
					continue;
				}
				if (pr > 0 && pfd[1].revents) {
					ssize_t r = read(o->stdin_fd, inbuf, sizeof inbuf);
					if (r < 0 && errno == EINTR)
						continue;
					p.pend = inbuf;
					p.plen = r > 0 ? (size_t)r : 0;
					p.have = true; /* sent at the top, when there is room */
					continue;
				}
				if (pr == 0 && hard && brig_now_ms() >= hard) {
					ours_timed_out = true;
					goto kill;
				}
				if (pr == 0)
					continue;
				if (pr > 0 && pfd[0].revents)
					brig_guest__drain(w->efd);
				continue; /* look at the queue again */
			}
		}
		wr = brig_guest__waiter_next(g, w, &f, kw ? kill_by : hard, extra, err);
		if (wr == 1) {
			canceled = true;
			goto kill;
		}
		if (wr == BRIG_ETIMEDOUT && !kw) {
			brig__error_clear(err);
			ours_timed_out = true;
			goto kill;
		}
		if (wr) {
			rc = wr == BRIG_ETIMEDOUT
				     ? brig__error_set(err, BRIG_EUNCERTAIN, 0,
						       "%s: brig-init did not end the command in time", g->what)
				     : wr;
			break;
		}
		if (f->type == BRIG_GP_T_OUTPUT) {
			gmsg m;
			rc = brig_guest__msg_parse(g, f, &m, false, err);
			int64_t stream = brig_guest__geti(&m, BRIG_GP_F_STREAM, 0);
			if (!rc && stream != 1 && stream != 2)
				rc = brig_guest__unexpected(g, f, "output (stream)", err);
			if (!rc && o->on_output && m.data_len && !cb_failed) {
				int r = o->on_output((int)stream, (const char *)m.data, m.data_len, o->payload);
				if (r) {
					cb_failed = true;
					cb_rc = r;
					brig_guest__frame_free(f);
					if (!end_tree) {
						rc = brig__error_set(err, r, 0, "%s: the output callback gave up",
								     g->what);
						break;
					}
					goto kill;
				}
			}
			brig_guest__frame_free(f);
			if (rc)
				break;
			/* the window opens again only once the caller took the bytes:
			 * a slow reader slows the command, not the relay */
			taken += m.data_len;
			if (g->flow && taken >= (int64_t)BRIG_GUEST_WINDOW / 4) {
				rc = brig_guest__credit(g, proc, taken, hard, err);
				if (rc)
					break;
				taken = 0;
			}
			continue;
		}
		if (f->type == BRIG_GP_T_EXIT) {
			gmsg m;
			rc = brig_guest__msg_parse(g, f, &m, false, err);
			brig_guest__frame_free(f);
			if (rc)
				break;
			exit_from(x, &m);
			x->proc = proc;
			got_exit = true;
			break;
		}
		if (f->type == BRIG_GP_T_ERROR && f->id == (uint32_t)proc) {
			rc = brig_guest__error_from(g, f, "command", err);
			brig_guest__frame_free(f);
			break;
		}
		rc = brig_guest__unexpected(g, f, "a running command", err);
		brig_guest__frame_free(f);
		break;
kill:
		if (!end_tree) {
			rc = canceled ? brig__error_set(err, BRIG_ECANCELED, 0, "%s: attach cancelled", g->what)
				      : brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: attach deadline passed", g->what);
			break;
		}
		if (!kw) {
			kill_by = brig_guest__grace(brig_now_ms());
			rc = send_kill(g, proc, &kreq, &kw, kill_by, err);
			if (rc) {
				rc = BRIG_EUNCERTAIN;
				break;
			}
		}
	}
	if (kw)
		brig_guest__waiter_remove(g, kw); /* its OK, if any, is not needed: EXIT said it */
	if (g->flow && !got_exit) {
		/* nobody listens any more (an attach that gave up): a window
		 * left closed would stop the command for as long as the relay
		 * lives */
		brig_error *cerr = NULL;
		brig_guest__credit(g, proc, -1, brig_now_ms() + 1000, &cerr);
		brig_error_free(cerr);
	}
	if (!rc && cb_failed)
		rc = brig__error_set(err, cb_rc, 0, "%s: the output callback gave up; the command was ended", g->what);
	if (!rc && canceled) {
		x->canceled = true;
		x->code = 130;
	}
	if (!rc && ours_timed_out && !x->timed_out) {
		x->timed_out = true;
		x->code = 124;
	}
	if (!rc && x->timed_out)
		x->code = 124;
	return rc;
}

int brig_guest_exec(brig_guest *g, const brig_guest_exec_opts *o, brig_guest_exit *x, brig_error **err)
{
	memset(x, 0, sizeof *x);
	x->code = -1;
	int rc = check_exec_opts(o, err);
	if (rc)
		return rc;
	char tag[65];
	make_tag(g, tag, o->tag);
	gwaiter *w = brig_guest__waiter_add(g, true);
	brig_gp_enc e = {0};
	put_start(&e, o, tag, false, g->flow);
	rc = brig_guest__send_frame(g, &e, BRIG_GP_T_START, w->req, o->deadline_ms, err);
	if (!rc) {
		rc = await_start(g, w, "start", o->deadline_ms, true, x, err);
		if (!rc)
			rc = drive(g, w, x->proc, o, true, x, err);
		if (rc == BRIG_ENOTSENT) {
			/* START went out: a send that failed after it (stdin, a
			 * resize) cannot mean "nothing ran" — a caller would run
			 * the command a second time. */
			cleanup_free char *why = xstrdup(brig_error_message(err ? *err : NULL));
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: the relay broke after the command was sent (%s)",
					     g->what, why);
		}
	}
	brig_guest__waiter_remove(g, w);
	return rc;
}

int brig_guest_start(brig_guest *g, const brig_guest_exec_opts *o, int64_t *proc, brig_error **err)
{
	int rc = check_exec_opts(o, err);
	if (rc)
		return rc;
	char tag[65];
	make_tag(g, tag, o->tag);
	brig_guest_exec_opts oo = *o;
	oo.stdin_fd = -1;
	oo.stdin_data = NULL;
	gwaiter *w = brig_guest__waiter_add(g, false);
	brig_gp_enc e = {0};
	put_start(&e, &oo, tag, true, g->flow);
	brig_guest_exit x = {0};
	rc = brig_guest__send_frame(g, &e, BRIG_GP_T_START, w->req, 0, err);
	if (!rc)
		rc = await_start(g, w, "start", 0, false, &x, err);
	brig_guest__waiter_remove(g, w);
	if (!rc)
		*proc = x.proc;
	return rc;
}

int brig_guest_attach(brig_guest *g, int64_t proc, const brig_guest_exec_opts *o, brig_guest_exit *x, brig_error **err)
{
	memset(x, 0, sizeof *x);
	x->code = -1;
	if (!o || o->version != BRIG_GUEST_EXEC_OPTS_VERSION)
		return brig__error_set(err, BRIG_EINVAL, 0, "attach options: version must be %d",
				       BRIG_GUEST_EXEC_OPTS_VERSION);
	gwaiter *w = brig_guest__waiter_add(g, true);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, proc);
	brig_gp_put_int(&e, BRIG_GP_F_STDIN, o->stdin_fd >= 0 || o->stdin_data);
	if (g->flow)
		brig_gp_put_int(&e, BRIG_GP_F_WINDOW, BRIG_GUEST_WINDOW);
	int rc = brig_guest__send_frame(g, &e, BRIG_GP_T_ATTACH, w->req, o->deadline_ms, err);
	if (!rc)
		rc = await_start(g, w, "attach", o->deadline_ms, true, x, err);
	if (!rc)
		rc = drive(g, w, x->proc, o, false, x, err);
	brig_guest__waiter_remove(g, w);
	return rc;
}

static json_t *ps_entry_json(const gmsg *m)
{
	json_t *j = json_object();
	json_object_set_new(j, "id", json_integer(brig_guest__geti(m, BRIG_GP_F_PROC, 0)));
	json_object_set_new(j, "pid", json_integer(brig_guest__geti(m, BRIG_GP_F_PID, 0)));
	json_t *tag = brig_guest__gets_json(m, BRIG_GP_F_TAG);
	json_object_set_new(j, "tag", tag ? tag : json_null());
	json_t *st = brig_guest__gets_json(m, BRIG_GP_F_STATE);
	json_object_set_new(j, "state", st ? st : json_string("unknown"));
	json_object_set_new(j, "detached", json_boolean(brig_guest__geti(m, BRIG_GP_F_DETACHED, 0)));
	json_object_set_new(j, "started_ms", json_integer(brig_guest__geti(m, BRIG_GP_F_STARTED_MS, 0)));
	json_object_set_new(j, "ended_ms", json_integer(brig_guest__geti(m, BRIG_GP_F_ENDED_MS, 0)));
	if (st && json_is_string(st) && strcmp(json_string_value(st), "exited") == 0) {
		brig_guest_exit x = {0};
		exit_from(&x, m);
		json_object_set_new(j, "exit_code", json_integer(x.code));
		json_object_set_new(j, "signal", json_integer(x.signal));
		json_object_set_new(j, "timed_out", json_boolean(x.timed_out));
		json_object_set_new(j, "killed", json_boolean(x.killed));
	}
	return j;
}

int brig_guest_ps(brig_guest *g, json_t **out, int64_t deadline_ms, brig_error **err)
{
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 30000;
	gwaiter *w = brig_guest__waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	int rc = brig_guest__send_frame(g, &e, BRIG_GP_T_PS, w->req, deadline_ms, err);
	json_t *arr = json_array();
	while (!rc) {
		gframe *f = NULL;
		rc = brig_guest__waiter_next(g, w, &f, brig_guest__grace(deadline_ms), -1, err);
		if (rc == BRIG_ETIMEDOUT)
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "ps: brig-init did not answer in time");
		if (rc)
			break;
		gmsg m;
		if (f->type == BRIG_GP_T_PS_ENTRY) {
			rc = brig_guest__msg_parse(g, f, &m, true, err);
			if (!rc && json_array_size(arr) >= 100000) {
				json_decref(m.argv);
				rc = brig__error_set(err, BRIG_ETOOBIG, 0, "ps: more than 100000 entries");
			}
			if (!rc) {
				json_t *j = ps_entry_json(&m);
				json_object_set_new(j, "argv", m.argv);
				json_array_append_new(arr, j);
			}
		} else if (f->type == BRIG_GP_T_OK) {
			brig_guest__frame_free(f);
			break;
		} else if (f->type == BRIG_GP_T_ERROR) {
			rc = brig_guest__error_from(g, f, "ps", err);
		} else {
			rc = brig_guest__unexpected(g, f, "PS", err);
		}
		brig_guest__frame_free(f);
	}
	brig_guest__waiter_remove(g, w);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

static void put_ref(brig_gp_enc *e, int64_t proc, const char *tag)
{
	if (proc > 0)
		brig_gp_put_int(e, BRIG_GP_F_PROC, proc);
	else
		brig_gp_put_str(e, BRIG_GP_F_TAG, tag ? tag : "");
}

int brig_guest_status(brig_guest *g, json_t **out, int64_t proc, const char *tag, int64_t deadline_ms, brig_error **err)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	put_ref(&e, proc, tag);
	gmsg m;
	gframe *f = NULL;
	int rc = brig_guest__simple_call(g, &e, BRIG_GP_T_STATUS, "status", &m, &f, deadline_ms, err);
	if (rc)
		return rc;
	*out = ps_entry_json(&m);
	brig_guest__frame_free(f);
	return 0;
}

int brig_guest_kill(brig_guest *g, int64_t proc, brig_guest_exit *x, int64_t deadline_ms, brig_error **err)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	put_ref(&e, proc, NULL);
	gmsg m;
	int rc = brig_guest__simple_call(g, &e, BRIG_GP_T_KILL, "kill", &m, NULL, deadline_ms, err);
	if (!rc && x) {
		memset(x, 0, sizeof *x);
		exit_from(x, &m);
		x->proc = proc;
	}
	return rc;
}

int brig_guest_signal(brig_guest *g, int64_t proc, int signal, int64_t deadline_ms, brig_error **err)
{
	if (signal <= 0 || signal >= 65)
		return brig__error_set(err, BRIG_EINVAL, 0, "signal %d is not a signal", signal);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	put_ref(&e, proc, NULL);
	brig_gp_put_int(&e, BRIG_GP_F_SIGNAL, signal);
	gmsg m;
	return brig_guest__simple_call(g, &e, BRIG_GP_T_SIGNAL, "signal", &m, NULL, deadline_ms, err);
}
