/* client.c — one relay into brig-init, shared by every thread of a process:
 * the I/O thread, the waiters, and the message parser (guest/host.h, guest/client.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest/client.h"

/* ---- small helpers ---- */

static void ring(int efd)
{
	uint64_t one = 1;
	ssize_t r = write(efd, &one, sizeof one);
	(void)r;
}

void brig_guest__drain(int efd)
{
	uint64_t v;
	ssize_t r = read(efd, &v, sizeof v);
	(void)r;
}

void brig_guest__frame_free(gframe *f)
{
	if (f) {
		free(f->payload);
		free(f);
	}
}

/* Caller holds mu. First reason wins. */
void brig_guest__die_locked(brig_guest *g, int code, const char *fmt, ...)
{
	if (g->dead)
		return;
	g->dead = true;
	g->dead_code = code;
	va_list ap;
	va_start(ap, fmt);
	char *m = NULL;
	if (vasprintf(&m, fmt, ap) < 0)
		m = NULL;
	va_end(ap);
	g->dead_msg = m;
	for (gwaiter *w = g->waiters; w; w = w->next)
		ring(w->efd);
	pthread_cond_broadcast(&g->room);
}

int brig_guest__dead_error(brig_guest *g, brig_error **err)
{
	/* caller holds mu */
	const char *m = g->dead_msg ? g->dead_msg : "the relay is closed";
	if (g->relay_err_len)
		return brig__error_set(err, g->dead_code, 0, "%s: %s (the relay said: %s)", g->what, m, g->relay_err);
	return brig__error_set(err, g->dead_code, 0, "%s: %s", g->what, m);
}

/* ---- the I/O thread ---- */

static gwaiter *find_req(brig_guest *g, uint32_t id)
{
	for (gwaiter *w = g->waiters; w; w = w->next)
		if (w->req == id)
			return w;
	return NULL;
}

static gwaiter *find_proc(brig_guest *g, int64_t proc)
{
	for (gwaiter *w = g->waiters; w; w = w->next)
		if (w->proc && w->proc == proc)
			return w;
	return NULL;
}

/* Peeks at a PROC field without trusting anything else (the waiter checks
 * the whole payload). 0 when absent or malformed. */
static int64_t peek_proc(const unsigned char *p, size_t n)
{
	brig_gp_dec d;
	brig_gp_field f;
	int64_t v = 0;
	brig_gp_dec_init(&d, p, n);
	while (brig_gp_dec_next(&d, &f) == BRIG_GP_OK)
		if (f.tag == BRIG_GP_F_PROC && brig_gp_field_int(&f, &v) != BRIG_GP_OK)
			return 0;
	return v > 0 ? v : 0;
}

/* Hands one whole frame to its waiter. Caller holds mu. */
static void dispatch_locked(brig_guest *g, const brig_gp_hdr *h, unsigned char *payload)
{
	gwaiter *w = NULL;
	switch (h->type) {
	case BRIG_GP_T_OUTPUT:
	case BRIG_GP_T_EXIT: w = find_proc(g, h->id); break;
	case BRIG_GP_T_ERROR:
		w = find_req(g, h->id);
		if (!w)
			w = find_proc(g, h->id);
		break;
	case BRIG_GP_T_HELLO_OK:
	case BRIG_GP_T_OK:
	case BRIG_GP_T_STARTED:
	case BRIG_GP_T_PS_ENTRY:
	case BRIG_GP_T_LIST_ENTRY:
	case BRIG_GP_T_DATA: w = find_req(g, h->id); break;
	case BRIG_GP_T_CREDIT: {
		/* stdin the command took: handled here, never queued */
		int64_t v = 0;
		brig_gp_dec d;
		brig_gp_field f;
		bool bad = !g->flow;
		brig_gp_dec_init(&d, payload, h->len);
		int rc = BRIG_GP_ENEED;
		while (!bad && (rc = brig_gp_dec_next(&d, &f)) == BRIG_GP_OK)
			if (f.tag == BRIG_GP_F_CREDIT && (brig_gp_field_int(&f, &v) != BRIG_GP_OK || v < 0))
				bad = true;
		free(payload);
		if (bad || rc != BRIG_GP_ENEED) {
			brig_guest__die_locked(g, BRIG_EPROTO, "brig-init sent a malformed CREDIT");
			return;
		}
		w = find_proc(g, h->id);
		if (w && v > 0) {
			/* a lying guest gains at most one window of stdin more */
			w->stdin_credit += v;
			if (w->stdin_credit > (int64_t)BRIG_GP_STDIN_WINDOW)
				w->stdin_credit = BRIG_GP_STDIN_WINDOW;
			ring(w->efd);
		}
		return;
	}
	default:
		brig_guest__die_locked(g, BRIG_EPROTO, "brig-init sent a frame of unknown type %u", h->type);
		free(payload);
		return;
	}
	if (!w || w->overflow) {
		free(payload);
		return;
	}
	if (w->binds_proc && !w->proc && (h->type == BRIG_GP_T_STARTED || h->type == BRIG_GP_T_OK)) {
		int64_t p = peek_proc(payload, h->len);
		if (p && !find_proc(g, p))
			w->proc = p;
	}
	if (w->queued + h->len > BRIG_GUEST_WAITER_CAP) {
		w->overflow = true;
		free(payload);
		ring(w->efd);
		return;
	}
	gframe *f = xcalloc(1, sizeof *f);
	f->type = h->type;
	f->id = h->id;
	f->len = h->len;
	f->payload = payload;
	if (w->tail)
		w->tail->next = f;
	else
		w->head = f;
	w->tail = f;
	w->queued += h->len;
	ring(w->efd);
}

static int on_relay_bytes(int stream, const char *data, size_t len, void *payload)
{
	brig_guest *g = payload;
	if (stream == BRIG_STREAM_STDERR) {
		/* the relay's own complaints, kept for the message (sanitized) */
		pthread_mutex_lock(&g->mu);
		for (size_t i = 0; i < len && g->relay_err_len < BRIG_GUEST_RELAY_ERR_CAP; i++) {
			unsigned char c = (unsigned char)data[i];
			g->relay_err[g->relay_err_len++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
		}
		g->relay_err[g->relay_err_len] = '\0';
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	const unsigned char *p = (const unsigned char *)data;
	while (len) {
		size_t used = 0;
		int rc = brig_gp_reader_feed(&g->rd, p, len, &used);
		p += used;
		len -= used;
		if (rc == BRIG_GP_ENEED)
			continue;
		pthread_mutex_lock(&g->mu);
		if (rc != BRIG_GP_OK) {
			brig_guest__die_locked(g, BRIG_EPROTO,
					       rc == BRIG_GP_ETOOBIG
						       ? "brig-init announced a frame over the %u-byte cap"
						       : "brig-init sent a malformed frame header (cap %u)",
					       BRIG_GP_MAX_PAYLOAD);
			pthread_mutex_unlock(&g->mu);
			return BRIG_EPROTO;
		}
		unsigned char *pl = g->rd.payload;
		g->rd.payload = NULL; /* the waiter owns it now */
		g->rd.payload_have = g->rd.hdr.len;
		brig_gp_hdr h = g->rd.hdr;
		dispatch_locked(g, &h, pl);
		bool dead = g->dead;
		pthread_mutex_unlock(&g->mu);
		if (dead)
			return BRIG_EPROTO;
	}
	return 0;
}

static void *io_main(void *arg)
{
	brig_guest *g = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	bool stalled = false;
	for (;;) {
		pthread_mutex_lock(&g->mu);
		bool want_out = g->oq_head != NULL;
		bool stop = g->closing || g->dead;
		pthread_mutex_unlock(&g->mu);
		if (stop)
			break;
		bool readable = g->t.pending(g->t.impl);
		if (!readable) {
			struct pollfd pfd[2] = {
				{.fd = g->t.fd(g->t.impl), .events = POLLIN | (want_out && !stalled ? POLLOUT : 0)},
				{.fd = g->wake, .events = POLLIN},
			};
			int pr = poll(pfd, 2, stalled ? 50 : -1);
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr < 0) {
				pthread_mutex_lock(&g->mu);
				brig_guest__die_locked(g, BRIG_EUNCERTAIN, "poll failed: %s", strerror(errno));
				pthread_mutex_unlock(&g->mu);
				break;
			}
			if (pfd[1].revents)
				brig_guest__drain(g->wake);
			stalled = false;
			readable = pfd[0].revents & (POLLIN | POLLHUP | POLLERR);
		}
		if (readable) {
			brig_error *e = NULL;
			ssize_t r = g->t.read(g->t.impl, on_relay_bytes, g, &e);
			if (r <= 0) {
				pthread_mutex_lock(&g->mu);
				if (r == 0)
					brig_guest__die_locked(g, BRIG_EUNCERTAIN, "the relay ended");
				else
					brig_guest__die_locked(g,
							       r == BRIG_EPROTO || r == BRIG_ETOOBIG ? BRIG_EPROTO
												     : BRIG_EUNCERTAIN,
							       "the relay broke: %s", brig_error_message(e));
				pthread_mutex_unlock(&g->mu);
				brig_error_free(e);
				break;
			}
		}
		/* write what the relay takes now */
		pthread_mutex_lock(&g->mu);
		while (g->oq_head && !g->dead) {
			outframe *o = g->oq_head;
			size_t w = 0;
			brig_error *e = NULL;
			if (g->t.write_some(g->t.impl, o->buf + o->off, o->len - o->off, &w, &e) != 0) {
				brig_guest__die_locked(g, BRIG_EUNCERTAIN, "writing to the relay failed: %s",
						       brig_error_message(e));
				brig_error_free(e);
				break;
			}
			if (w == 0) {
				stalled = true;
				break;
			}
			o->off += w;
			g->oq_bytes -= w;
			if (o->off == o->len) {
				g->oq_head = o->next;
				if (!g->oq_head)
					g->oq_tail = NULL;
				free(o->buf);
				free(o);
			}
			pthread_cond_broadcast(&g->room);
		}
		pthread_mutex_unlock(&g->mu);
	}
	return NULL;
}

/* ---- transports ---- */

static int fd_fd(void *impl)
{
	return (int)(intptr_t)impl;
}
static bool fd_pending(void *impl)
{
	return false;
}
static ssize_t fd_read(void *impl, brig_engine_output_cb cb, void *payload, brig_error **err)
{
	char buf[65536];
	ssize_t r;
	do
		r = read((int)(intptr_t)impl, buf, sizeof buf);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return brig__error_set(err, BRIG_EUNCERTAIN, errno, "read: %s", strerror(errno));
	if (r > 0) {
		int rc = cb(BRIG_STREAM_STDOUT, buf, (size_t)r, payload);
		if (rc)
			return brig__error_set(err, rc, 0, "malformed frame");
	}
	return r;
}
static int fd_write_some(void *impl, const void *buf, size_t n, size_t *written, brig_error **err)
{
	ssize_t r = send((int)(intptr_t)impl, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (r < 0 && errno == ENOTSOCK)
		r = write((int)(intptr_t)impl, buf, n);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		r = 0;
	if (r < 0)
		return brig__error_set(err, BRIG_EUNCERTAIN, errno, "write: %s", strerror(errno));
	*written = (size_t)r;
	return 0;
}
static void fd_close(void *impl)
{
	close((int)(intptr_t)impl);
}

static int st_fd(void *impl)
{
	return brig_engine_stream_fd(impl);
}
static bool st_pending(void *impl)
{
	return brig_engine_stream_pending(impl);
}
static ssize_t st_read(void *impl, brig_engine_output_cb cb, void *payload, brig_error **err)
{
	return brig_engine_stream_read(impl, cb, payload, 0, err);
}
static int st_write_some(void *impl, const void *buf, size_t n, size_t *written, brig_error **err)
{
	return brig_engine_stream_write_some(impl, buf, n, written, err);
}
static void st_close(void *impl)
{
	brig_engine_stream_free(impl);
}

/* ---- queueing and waiting ---- */

gwaiter *brig_guest__waiter_add(brig_guest *g, bool binds_proc)
{
	gwaiter *w = xcalloc(1, sizeof *w);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		abort(); /* like an allocation failure */
	w->binds_proc = binds_proc;
	w->stdin_credit = BRIG_GP_STDIN_WINDOW;
	pthread_mutex_lock(&g->mu);
	w->req = g->next_req++;
	if (g->next_req < 0x80000000u)
		g->next_req = 0x80000000u;
	w->next = g->waiters;
	g->waiters = w;
	pthread_mutex_unlock(&g->mu);
	return w;
}

void brig_guest__waiter_remove(brig_guest *g, gwaiter *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&g->mu);
	for (gwaiter **pp = &g->waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	pthread_mutex_unlock(&g->mu);
	for (gframe *f = w->head, *n; f; f = n) {
		n = f->next;
		brig_guest__frame_free(f);
	}
	close(w->efd);
	free(w);
}

/* Queues one encoded frame, waiting (until deadline_ms; 0: none) for room.
 * Errors: BRIG_ENOTSENT (dead handle, or no room in time: nothing of this
 * frame was sent), BRIG_EINVAL (too big to encode). */
bool brig_guest__out_room(brig_guest *g, size_t n)
{
	pthread_mutex_lock(&g->mu);
	bool ok = g->dead || !g->oq_bytes || g->oq_bytes + n <= BRIG_GUEST_OUT_CAP;
	pthread_mutex_unlock(&g->mu);
	return ok;
}

int brig_guest__send_frame(brig_guest *g, brig_gp_enc *e, uint8_t type, uint32_t id, int64_t deadline_ms,
			   brig_error **err)
{
	long n = brig_gp_enc_finish(e, type, id);
	if (n < 0) {
		brig_gp_enc_free(e);
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: the %s request does not fit in one frame", g->what,
				       brig_gp_type_name(type));
	}
	outframe *o = xcalloc(1, sizeof *o);
	o->buf = steal_pointer(&e->buf);
	o->len = (size_t)n;
	e->len = e->alloc = 0;
	pthread_mutex_lock(&g->mu);
	while (!g->dead && g->oq_bytes && g->oq_bytes + o->len > BRIG_GUEST_OUT_CAP) {
		if (!deadline_ms) {
			pthread_cond_wait(&g->room, &g->mu);
			continue;
		}
		int left = brig_remaining_ms(deadline_ms);
		if (left == 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += left / 1000;
		ts.tv_nsec += (long)(left % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->room, &g->mu, &ts);
	}
	int rc = 0;
	if (g->dead) {
		rc = brig__error_set(err, BRIG_ENOTSENT, 0, "%s: %s (nothing was sent)", g->what,
				     g->dead_msg ? g->dead_msg : "the relay is closed");
	} else if (g->oq_bytes && g->oq_bytes + o->len > BRIG_GUEST_OUT_CAP) {
		rc = brig__error_set(err, BRIG_ENOTSENT, 0,
				     "%s: brig-init takes no more input and the deadline passed (nothing was sent)",
				     g->what);
	} else {
		if (g->oq_tail)
			g->oq_tail->next = o;
		else
			g->oq_head = o;
		g->oq_tail = o;
		g->oq_bytes += o->len;
		o = NULL;
		ring(g->wake);
	}
	pthread_mutex_unlock(&g->mu);
	if (o) {
		free(o->buf);
		free(o);
	}
	return rc;
}

/* Waits for the waiter's next frame until deadline_ms (0: none), or until
 * extra_fd (-1: none) is readable (then returns 1 with *out NULL).
 * Returns 0 with *out (caller frees), or BRIG_ETIMEDOUT, or the dead
 * handle's code, or BRIG_ETOOBIG (the waiter overflowed). */
int brig_guest__waiter_next(brig_guest *g, gwaiter *w, gframe **out, int64_t deadline_ms, int extra_fd,
			    brig_error **err)
{
	*out = NULL;
	for (;;) {
		pthread_mutex_lock(&g->mu);
		gframe *f = w->head;
		if (f) {
			w->head = f->next;
			if (!w->head)
				w->tail = NULL;
			w->queued -= f->len;
			pthread_mutex_unlock(&g->mu);
			f->next = NULL;
			*out = f;
			return 0;
		}
		if (w->overflow) {
			pthread_mutex_unlock(&g->mu);
			return brig__error_set(err, BRIG_ETOOBIG, 0,
					       "%s: brig-init sent more than %u bytes for one call", g->what,
					       BRIG_GUEST_WAITER_CAP);
		}
		if (g->dead) {
			int rc = brig_guest__dead_error(g, err);
			pthread_mutex_unlock(&g->mu);
			return rc;
		}
		pthread_mutex_unlock(&g->mu);
		struct pollfd pfd[2] = {{.fd = w->efd, .events = POLLIN}, {.fd = extra_fd, .events = POLLIN}};
		int left = deadline_ms ? brig_remaining_ms(deadline_ms) : -1;
		if (left == 0)
			return brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: brig-init did not answer in time", g->what);
		int pr = poll(pfd, extra_fd >= 0 ? 2 : 1, left);
		if (pr < 0 && errno != EINTR)
			return brig__error_set(err, BRIG_EIO, errno, "poll: %s", strerror(errno));
		if (pr > 0 && pfd[0].revents)
			brig_guest__drain(w->efd);
		if (pr > 0 && extra_fd >= 0 && pfd[1].revents)
			return 1;
	}
}

/* ---- messages ---- */

static bool tag_is_int(uint8_t t)
{
	switch (t) {
	case BRIG_GP_F_VERSION:
	case BRIG_GP_F_PID:
	case BRIG_GP_F_ERRNO:
	case BRIG_GP_F_ROWS:
	case BRIG_GP_F_COLS:
	case BRIG_GP_F_TIMEOUT_MS:
	case BRIG_GP_F_DETACHED:
	case BRIG_GP_F_STDIN:
	case BRIG_GP_F_KEEP:
	case BRIG_GP_F_PROC:
	case BRIG_GP_F_STREAM:
	case BRIG_GP_F_CODE:
	case BRIG_GP_F_SIGNAL:
	case BRIG_GP_F_TIMED_OUT:
	case BRIG_GP_F_KILLED:
	case BRIG_GP_F_STARTED_MS:
	case BRIG_GP_F_DROPPED:
	case BRIG_GP_F_ENDED_MS:
	case BRIG_GP_F_MODE:
	case BRIG_GP_F_SIZE:
	case BRIG_GP_F_MTIME_NS:
	case BRIG_GP_F_UID:
	case BRIG_GP_F_GID:
	case BRIG_GP_F_DEPTH:
	case BRIG_GP_F_OFFSET:
	case BRIG_GP_F_LENGTH:
	case BRIG_GP_F_PARENTS:
	case BRIG_GP_F_RECURSIVE:
	case BRIG_GP_F_COUNT:
	case BRIG_GP_F_NOFOLLOW:
	case BRIG_GP_F_FLOW:
	case BRIG_GP_F_WINDOW:
	case BRIG_GP_F_CREDIT:
	case BRIG_GP_F_APPEND: return true;
	default: return false;
	}
}

static size_t str_cap(uint8_t t)
{
	switch (t) {
	case BRIG_GP_F_BOOT_ID: return 64;
	case BRIG_GP_F_MESSAGE: return 4096;
	case BRIG_GP_F_TAG: return 64;
	case BRIG_GP_F_STATE:
	case BRIG_GP_F_TYPE: return 16;
	case BRIG_GP_F_ARGV:
	case BRIG_GP_F_ENV:
	case BRIG_GP_F_CWD:
	case BRIG_GP_F_PATH:
	case BRIG_GP_F_PATH2:
	case BRIG_GP_F_LINK:
	case BRIG_GP_F_NAME: return BRIG_GP_MAX_STR;
	default: return 0;
	}
}

/* Parses f's payload into m. Errors: BRIG_EPROTO (and the handle dies). */
int brig_guest__msg_parse(brig_guest *g, const gframe *f, gmsg *m, bool want_argv, brig_error **err)
{
	memset(m, 0, sizeof *m);
	if (want_argv)
		m->argv = json_array();
	brig_gp_dec d;
	brig_gp_field fl;
	brig_gp_dec_init(&d, f->payload, f->len);
	int rc;
	const char *bad = NULL;
	while ((rc = brig_gp_dec_next(&d, &fl)) == BRIG_GP_OK) {
		uint8_t t = fl.tag;
		if (t >= 64)
			continue; /* a newer peer's field */
		if (tag_is_int(t)) {
			if (brig_gp_field_int(&fl, &m->iv[t]) != BRIG_GP_OK) {
				bad = "an integer field that is not 8 bytes";
				break;
			}
			m->ihas |= 1ull << t;
		} else if (t == BRIG_GP_F_DATA) {
			if (fl.len > BRIG_GP_MAX_DATA) {
				bad = "a data chunk over its cap";
				break;
			}
			m->data = fl.val;
			m->data_len = fl.len;
		} else if (str_cap(t)) {
			if (brig_gp_field_str(&fl, str_cap(t)) != BRIG_GP_OK) {
				bad = "a string over its cap or holding NUL";
				break;
			}
			m->sv[t] = fl.val;
			m->slen[t] = fl.len;
			m->shas |= 1ull << t;
			if (t == BRIG_GP_F_ARGV && m->argv) {
				if (json_array_size(m->argv) >= 4096) {
					bad = "more than 4096 argv entries";
					break;
				}
				/* Untrusted bytes: a name that is not UTF-8 would make the
				 * whole answer unprintable as JSON (brig ps --json, MCP). */
				json_t *a = json_stringn((const char *)fl.val, fl.len);
				if (!a) {
					char *c = xstrndup((const char *)fl.val, fl.len);
					for (char *q = c; *q; q++)
						if ((unsigned char)*q >= 0x80)
							*q = '?';
					a = json_string(c);
					free(c);
				}
				json_array_append_new(m->argv, a);
			}
		}
	}
	if (!bad && rc != BRIG_GP_ENEED)
		bad = "a field running past the frame";
	if (bad) {
		json_decref(m->argv);
		m->argv = NULL;
		pthread_mutex_lock(&g->mu);
		brig_guest__die_locked(g, BRIG_EPROTO, "brig-init sent a %s frame with %s", brig_gp_type_name(f->type),
				       bad);
		rc = brig_guest__dead_error(g, err);
		pthread_mutex_unlock(&g->mu);
		return rc;
	}
	return 0;
}

bool brig_guest__has_i(const gmsg *m, uint8_t t)
{
	return m->ihas >> t & 1;
}
int64_t brig_guest__geti(const gmsg *m, uint8_t t, int64_t dflt)
{
	return brig_guest__has_i(m, t) ? m->iv[t] : dflt;
}

/* A string field as a JSON string (UTF-8 checked by jansson; other bytes
 * are replaced), or NULL when absent. */
json_t *brig_guest__gets_json(const gmsg *m, uint8_t t)
{
	if (!(m->shas >> t & 1))
		return NULL;
	json_t *s = json_stringn((const char *)m->sv[t], m->slen[t]);
	if (s)
		return s;
	char *c = xstrndup((const char *)m->sv[t], m->slen[t]);
	for (char *p = c; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	s = json_string(c);
	free(c);
	return s;
}

/* An ERROR frame as a brig error: errno mapped, message sanitized. */
int brig_guest__error_from(brig_guest *g, const gframe *f, const char *op, brig_error **err)
{
	gmsg m;
	int rc = brig_guest__msg_parse(g, f, &m, false, err);
	if (rc)
		return rc;
	int64_t en = brig_guest__geti(&m, BRIG_GP_F_ERRNO, 0);
	int code = en == ENOENT                                        ? BRIG_ENOTFOUND
		   : en == EACCES || en == EPERM || en == EROFS        ? BRIG_EDENIED
		   : en == EEXIST || en == ENOTEMPTY                   ? BRIG_ECONFLICT
		   : en == ESRCH                                       ? BRIG_ESTATE
		   : en == EINVAL || en == E2BIG || en == ENAMETOOLONG ? BRIG_EINVAL
								       : BRIG_EIO;
	char msg[256];
	size_t n = 0;
	if (m.shas >> BRIG_GP_F_MESSAGE & 1)
		for (uint32_t i = 0; i < m.slen[BRIG_GP_F_MESSAGE] && n < sizeof msg - 1; i++) {
			unsigned char c = m.sv[BRIG_GP_F_MESSAGE][i];
			msg[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
		}
	msg[n] = '\0';
	return brig__error_set(err, code, en > 0 && en < 4096 ? (int)en : 0, "%s: %s", op,
			       n ? msg : "brig-init refused it");
}

/* A frame of a type the call does not expect: the guest is lying. */
int brig_guest__unexpected(brig_guest *g, const gframe *f, const char *op, brig_error **err)
{
	pthread_mutex_lock(&g->mu);
	brig_guest__die_locked(g, BRIG_EPROTO, "brig-init answered %s with an brig_guest__unexpected %s", op,
			       brig_gp_type_name(f->type));
	int rc = brig_guest__dead_error(g, err);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

int64_t brig_guest__grace(int64_t deadline_ms)
{
	return deadline_ms ? deadline_ms + BRIG_GUEST_GRACE_MS : brig_now_ms() + 60000;
}

int brig_guest__credit(brig_guest *g, int64_t proc, int64_t n, int64_t deadline_ms, brig_error **err)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_CREDIT, n);
	return brig_guest__send_frame(g, &e, BRIG_GP_T_CREDIT, (uint32_t)proc, deadline_ms, err);
}

/* A simple request: sends e as type, waits for OK (parsed into *m, frame in
 * *keep for the strings) or ERROR. deadline_ms 0: 60 s. */
int brig_guest__simple_call(brig_guest *g, brig_gp_enc *e, uint8_t type, const char *op, gmsg *m, gframe **keep,
			    int64_t deadline_ms, brig_error **err)
{
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 60000;
	gwaiter *w = brig_guest__waiter_add(g, false);
	int rc = brig_guest__send_frame(g, e, type, w->req, deadline_ms, err);
	gframe *f = NULL;
	if (!rc)
		rc = brig_guest__waiter_next(g, w, &f, deadline_ms + BRIG_GUEST_GRACE_MS, -1, err);
	if (rc == BRIG_ETIMEDOUT)
		rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
	if (!rc && f->type == BRIG_GP_T_ERROR)
		rc = brig_guest__error_from(g, f, op, err);
	else if (!rc && f->type != BRIG_GP_T_OK)
		rc = brig_guest__unexpected(g, f, op, err);
	else if (!rc)
		rc = brig_guest__msg_parse(g, f, m, false, err);
	brig_guest__waiter_remove(g, w);
	if (!rc && keep)
		*keep = f;
	else
		brig_guest__frame_free(f);
	return rc;
}

/* ---- open / free ---- */

int brig_guest__open_transport(brig_guest **out, brig_guest_transport t, const char *what, int64_t deadline_ms,
			       brig_error **err)
{
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 30000;
	brig_guest *g = xcalloc(1, sizeof *g);
	pthread_mutex_init(&g->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->room, &ca);
	pthread_condattr_destroy(&ca);
	g->t = t;
	g->what = xstrdup(what);
	g->next_req = 0x80000000u;
	brig_gp_reader_init(&g->rd);
	g->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->wake < 0) {
		int rc = brig__error_set(err, BRIG_EIO, errno, "%s: eventfd: %s", what, strerror(errno));
		brig_guest_free(g);
		return rc;
	}
	if (pthread_create(&g->th, NULL, io_main, g) != 0) {
		int rc = brig__error_set(err, BRIG_EIO, errno, "%s: cannot start the reader thread", what);
		brig_guest_free(g);
		return rc;
	}
	g->th_started = true;

	/* HELLO: id 0 is not a request id, so its waiter is bound by hand */
	gwaiter *w = brig_guest__waiter_add(g, false);
	pthread_mutex_lock(&g->mu);
	w->req = 0;
	pthread_mutex_unlock(&g->mu);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_VERSION, BRIG_GP_VERSION);
	brig_gp_put_int(&e, BRIG_GP_F_FLOW, 1);
	int rc = brig_guest__send_frame(g, &e, BRIG_GP_T_HELLO, 0, deadline_ms, err);
	gframe *f = NULL;
	if (!rc)
		rc = brig_guest__waiter_next(g, w, &f, deadline_ms, -1, err);
	if (rc == BRIG_ETIMEDOUT)
		rc = brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: brig-init did not say hello in time", what);
	gmsg m;
	if (!rc && f->type == BRIG_GP_T_ERROR)
		rc = brig__error_prefix(err, brig_guest__error_from(g, f, "hello", err) ? BRIG_EPROTO : BRIG_EPROTO,
					"%s: brig-init refused protocol version %d", what, BRIG_GP_VERSION);
	else if (!rc && f->type != BRIG_GP_T_HELLO_OK)
		rc = brig_guest__unexpected(g, f, "HELLO", err);
	else if (!rc && (rc = brig_guest__msg_parse(g, f, &m, false, err)) == 0) {
		if (brig_guest__geti(&m, BRIG_GP_F_VERSION, -1) != BRIG_GP_VERSION)
			rc = brig__error_set(err, BRIG_EPROTO, 0, "%s: brig-init speaks protocol version %lld, brig %d",
					     what, (long long)brig_guest__geti(&m, BRIG_GP_F_VERSION, -1),
					     BRIG_GP_VERSION);
		else if (m.shas >> BRIG_GP_F_BOOT_ID & 1) {
			for (uint32_t i = 0; i < m.slen[BRIG_GP_F_BOOT_ID]; i++) {
				unsigned char c = m.sv[BRIG_GP_F_BOOT_ID][i];
				g->boot_id[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
			}
		}
		/* an older brig-init does not say FLOW: no windows, as before */
		pthread_mutex_lock(&g->mu);
		g->flow = brig_guest__geti(&m, BRIG_GP_F_FLOW, 0) == 1;
		pthread_mutex_unlock(&g->mu);
	}
	brig_guest__frame_free(f);
	brig_guest__waiter_remove(g, w);
	if (rc) {
		brig_guest_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

int brig_guest__open_fd(brig_guest **out, int fd, int64_t deadline_ms, brig_error **err)
{
	brig_guest_transport t = {.impl = (void *)(intptr_t)fd,
				  .fd = fd_fd,
				  .pending = fd_pending,
				  .read = fd_read,
				  .write_some = fd_write_some,
				  .close = fd_close};
	return brig_guest__open_transport(out, t, "brig-init", deadline_ms, err);
}

int brig_guest_open(brig_guest **out, brig_engine *e, const char *id, int64_t deadline_ms, brig_error **err)
{
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 30000;
	cleanup_free char *what = xasprintf("brig-init in %.12s", id);
	json_t *cmd = json_pack("[s,s]", BRIG_GP_INIT_PATH, "relay");
	cleanup_json json_t *cfg = json_pack("{s:o, s:s, s:b, s:b, s:b, s:b}", "Cmd", cmd, "User", "1000:1000",
					     "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 1, "Tty", 0);
	cleanup_free char *xid = NULL;
	int rc = brig_engine_exec_create(e, &xid, id, cfg, err);
	if (rc)
		return brig__error_prefix(err, rc, "%s: start the relay", what);
	brig_engine_stream *s = NULL;
	rc = brig_engine_exec_attach(e, &s, xid, deadline_ms, err);
	if (rc)
		return brig__error_prefix(err, rc, "%s: start the relay", what);
	brig_guest_transport t = {.impl = s,
				  .fd = st_fd,
				  .pending = st_pending,
				  .read = st_read,
				  .write_some = st_write_some,
				  .close = st_close};
	return brig_guest__open_transport(out, t, what, deadline_ms, err);
}

void brig_guest_free(brig_guest *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->closing = true;
	pthread_mutex_unlock(&g->mu);
	if (g->wake >= 0)
		ring(g->wake);
	if (g->th_started)
		pthread_join(g->th, NULL);
	if (g->t.close)
		g->t.close(g->t.impl);
	for (outframe *o = g->oq_head, *n; o; o = n) {
		n = o->next;
		free(o->buf);
		free(o);
	}
	/* waiters belong to calls, which must have returned */
	if (g->wake >= 0)
		close(g->wake);
	brig_gp_reader_free(&g->rd);
	pthread_cond_destroy(&g->room);
	pthread_mutex_destroy(&g->mu);
	free(g->dead_msg);
	free(g->what);
	free(g);
}

bool brig_guest_alive(brig_guest *g)
{
	pthread_mutex_lock(&g->mu);
	bool alive = !g->dead && !g->closing;
	pthread_mutex_unlock(&g->mu);
	return alive;
}

const char *brig_guest_boot_id(const brig_guest *g)
{
	return g->boot_id;
}
