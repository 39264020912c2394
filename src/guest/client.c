/* client.c — one relay into brig-init, shared by every thread of a process:
 * the I/O thread, the waiters, and the message parser (guest/guest.h). */
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

#include "guest/host.h"
#include "guest/proto.h"

typedef struct gframe {
	struct gframe *next;
	uint8_t type;
	uint32_t id;
	uint32_t len;
	unsigned char *payload;
} gframe;

typedef struct gwaiter {
	struct gwaiter *next;
	uint32_t req;
	int64_t proc;    /* bound proc id, 0: none */
	bool binds_proc; /* STARTED or OK carries the proc this waiter then gets */
	int efd;
	gframe *head, *tail;
	size_t queued;
	bool overflow;
} gwaiter;

typedef struct outframe {
	struct outframe *next;
	unsigned char *buf;
	size_t len, off;
} outframe;

struct brig_guest {
	pthread_mutex_t mu;
	pthread_cond_t room; /* the out queue has room, or the handle died */
	pthread_t th;
	bool th_started;
	int wake; /* eventfd: rung when a frame is queued or at free */
	brig_guest_transport t;
	char *what;
	gwaiter *waiters;
	outframe *oq_head, *oq_tail;
	size_t oq_bytes;
	bool closing;
	bool dead;
	int dead_code;
	char *dead_msg;
	uint32_t next_req;
	uint64_t tag_seq;
	char boot_id[65];
	char relay_err[BRIG_GUEST_RELAY_ERR_CAP + 1];
	size_t relay_err_len;
	brig_gp_reader rd;
};

/* ---- small helpers ---- */

static void ring(int efd)
{
	uint64_t one = 1;
	ssize_t r = write(efd, &one, sizeof one);
	(void)r;
}

static void drain(int efd)
{
	uint64_t v;
	ssize_t r = read(efd, &v, sizeof v);
	(void)r;
}

static void frame_free(gframe *f)
{
	if (f) {
		free(f->payload);
		free(f);
	}
}

/* Caller holds mu. First reason wins. */
static void die_locked(brig_guest *g, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void die_locked(brig_guest *g, int code, const char *fmt, ...)
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

static int dead_error(brig_guest *g, brig_error **err)
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
	default:
		die_locked(g, BRIG_EPROTO, "brig-init sent a frame of unknown type %u", h->type);
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
			die_locked(g, BRIG_EPROTO,
				   rc == BRIG_GP_ETOOBIG ? "brig-init announced a frame over the %u-byte cap"
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
				die_locked(g, BRIG_EUNCERTAIN, "poll failed: %s", strerror(errno));
				pthread_mutex_unlock(&g->mu);
				break;
			}
			if (pfd[1].revents)
				drain(g->wake);
			stalled = false;
			readable = pfd[0].revents & (POLLIN | POLLHUP | POLLERR);
		}
		if (readable) {
			brig_error *e = NULL;
			ssize_t r = g->t.read(g->t.impl, on_relay_bytes, g, &e);
			if (r <= 0) {
				pthread_mutex_lock(&g->mu);
				if (r == 0)
					die_locked(g, BRIG_EUNCERTAIN, "the relay ended");
				else
					die_locked(g,
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
				die_locked(g, BRIG_EUNCERTAIN, "writing to the relay failed: %s",
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

static gwaiter *waiter_add(brig_guest *g, bool binds_proc)
{
	gwaiter *w = xcalloc(1, sizeof *w);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		abort(); /* like an allocation failure */
	w->binds_proc = binds_proc;
	pthread_mutex_lock(&g->mu);
	w->req = g->next_req++;
	if (g->next_req < 0x80000000u)
		g->next_req = 0x80000000u;
	w->next = g->waiters;
	g->waiters = w;
	pthread_mutex_unlock(&g->mu);
	return w;
}

static void waiter_remove(brig_guest *g, gwaiter *w)
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
		frame_free(f);
	}
	close(w->efd);
	free(w);
}

/* Queues one encoded frame, waiting (until deadline_ms; 0: none) for room.
 * Errors: BRIG_ENOTSENT (dead handle, or no room in time: nothing of this
 * frame was sent), BRIG_EINVAL (too big to encode). */
static int send_frame(brig_guest *g, brig_gp_enc *e, uint8_t type, uint32_t id, int64_t deadline_ms, brig_error **err)
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
static int waiter_next(brig_guest *g, gwaiter *w, gframe **out, int64_t deadline_ms, int extra_fd, brig_error **err)
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
			int rc = dead_error(g, err);
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
			drain(w->efd);
		if (pr > 0 && extra_fd >= 0 && pfd[1].revents)
			return 1;
	}
}

/* ---- messages ---- */

/* One received message's fields, checked for shape and caps; strings
 * point into the frame's payload. */
typedef struct gmsg {
	uint64_t ihas, shas;
	int64_t iv[64];
	const unsigned char *sv[64];
	uint32_t slen[64];
	const unsigned char *data;
	uint32_t data_len;
	json_t *argv; /* collected when asked */
} gmsg;

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
static int msg_parse(brig_guest *g, const gframe *f, gmsg *m, bool want_argv, brig_error **err)
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
				json_array_append_new(m->argv, json_stringn_nocheck((const char *)fl.val, fl.len));
			}
		}
	}
	if (!bad && rc != BRIG_GP_ENEED)
		bad = "a field running past the frame";
	if (bad) {
		json_decref(m->argv);
		m->argv = NULL;
		pthread_mutex_lock(&g->mu);
		die_locked(g, BRIG_EPROTO, "brig-init sent a %s frame with %s", brig_gp_type_name(f->type), bad);
		rc = dead_error(g, err);
		pthread_mutex_unlock(&g->mu);
		return rc;
	}
	return 0;
}

static bool has_i(const gmsg *m, uint8_t t)
{
	return m->ihas >> t & 1;
}
static int64_t geti(const gmsg *m, uint8_t t, int64_t dflt)
{
	return has_i(m, t) ? m->iv[t] : dflt;
}

/* A string field as a JSON string (UTF-8 checked by jansson; other bytes
 * are replaced), or NULL when absent. */
static json_t *gets_json(const gmsg *m, uint8_t t)
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
static int error_from(brig_guest *g, const gframe *f, const char *op, brig_error **err)
{
	gmsg m;
	int rc = msg_parse(g, f, &m, false, err);
	if (rc)
		return rc;
	int64_t en = geti(&m, BRIG_GP_F_ERRNO, 0);
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
static int unexpected(brig_guest *g, const gframe *f, const char *op, brig_error **err)
{
	pthread_mutex_lock(&g->mu);
	die_locked(g, BRIG_EPROTO, "brig-init answered %s with an unexpected %s", op, brig_gp_type_name(f->type));
	int rc = dead_error(g, err);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static int64_t grace(int64_t deadline_ms)
{
	return deadline_ms ? deadline_ms + BRIG_GUEST_GRACE_MS : brig_now_ms() + 60000;
}

/* A simple request: sends e as type, waits for OK (parsed into *m, frame in
 * *keep for the strings) or ERROR. deadline_ms 0: 60 s. */
static int simple_call(brig_guest *g, brig_gp_enc *e, uint8_t type, const char *op, gmsg *m, gframe **keep,
		       int64_t deadline_ms, brig_error **err)
{
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 60000;
	gwaiter *w = waiter_add(g, false);
	int rc = send_frame(g, e, type, w->req, deadline_ms, err);
	gframe *f = NULL;
	if (!rc)
		rc = waiter_next(g, w, &f, deadline_ms + BRIG_GUEST_GRACE_MS, -1, err);
	if (rc == BRIG_ETIMEDOUT)
		rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
	if (!rc && f->type == BRIG_GP_T_ERROR)
		rc = error_from(g, f, op, err);
	else if (!rc && f->type != BRIG_GP_T_OK)
		rc = unexpected(g, f, op, err);
	else if (!rc)
		rc = msg_parse(g, f, m, false, err);
	waiter_remove(g, w);
	if (!rc && keep)
		*keep = f;
	else
		frame_free(f);
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
	gwaiter *w = waiter_add(g, false);
	pthread_mutex_lock(&g->mu);
	w->req = 0;
	pthread_mutex_unlock(&g->mu);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_VERSION, BRIG_GP_VERSION);
	int rc = send_frame(g, &e, BRIG_GP_T_HELLO, 0, deadline_ms, err);
	gframe *f = NULL;
	if (!rc)
		rc = waiter_next(g, w, &f, deadline_ms, -1, err);
	if (rc == BRIG_ETIMEDOUT)
		rc = brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: brig-init did not say hello in time", what);
	gmsg m;
	if (!rc && f->type == BRIG_GP_T_ERROR)
		rc = brig__error_prefix(err, error_from(g, f, "hello", err) ? BRIG_EPROTO : BRIG_EPROTO,
					"%s: brig-init refused protocol version %d", what, BRIG_GP_VERSION);
	else if (!rc && f->type != BRIG_GP_T_HELLO_OK)
		rc = unexpected(g, f, "HELLO", err);
	else if (!rc && (rc = msg_parse(g, f, &m, false, err)) == 0) {
		if (geti(&m, BRIG_GP_F_VERSION, -1) != BRIG_GP_VERSION)
			rc = brig__error_set(err, BRIG_EPROTO, 0, "%s: brig-init speaks protocol version %lld, brig %d",
					     what, (long long)geti(&m, BRIG_GP_F_VERSION, -1), BRIG_GP_VERSION);
		else if (m.shas >> BRIG_GP_F_BOOT_ID & 1) {
			for (uint32_t i = 0; i < m.slen[BRIG_GP_F_BOOT_ID]; i++) {
				unsigned char c = m.sv[BRIG_GP_F_BOOT_ID][i];
				g->boot_id[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
			}
		}
	}
	frame_free(f);
	waiter_remove(g, w);
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

/* ---- processes ---- */

static void exit_from(brig_guest_exit *x, const gmsg *m)
{
	x->code = (int)geti(m, BRIG_GP_F_CODE, -1);
	if (x->code < -1 || x->code > 255)
		x->code = -1;
	int64_t sig = geti(m, BRIG_GP_F_SIGNAL, 0);
	x->signal = sig > 0 && sig < 128 ? (int)sig : 0;
	x->timed_out = geti(m, BRIG_GP_F_TIMED_OUT, 0) != 0;
	x->killed = geti(m, BRIG_GP_F_KILLED, 0) != 0;
	int64_t d = geti(m, BRIG_GP_F_DROPPED, 0);
	x->dropped = d > 0 ? (uint64_t)d : 0;
	int64_t p = geti(m, BRIG_GP_F_PROC, 0);
	if (p > 0)
		x->proc = p;
}

static void put_start(brig_gp_enc *e, const brig_guest_exec_opts *o, const char *tag, bool detached)
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
	return 0;
}

/* Sends a START (or ATTACH) and waits for STARTED (OK): the waiter is then
 * bound to the proc. */
static int await_start(brig_guest *g, gwaiter *w, const char *op, int64_t deadline_ms, bool bind, brig_guest_exit *x,
		       brig_error **err)
{
	gframe *f = NULL;
	int rc = waiter_next(g, w, &f, grace(deadline_ms), -1, err);
	if (rc == BRIG_ETIMEDOUT)
		return brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
	if (rc)
		return rc;
	if (f->type == BRIG_GP_T_ERROR) {
		rc = error_from(g, f, op, err);
		if (rc == BRIG_ENOTFOUND)
			x->code = 127;
		else if (rc == BRIG_EDENIED)
			x->code = 126;
	} else if (f->type != BRIG_GP_T_STARTED && f->type != BRIG_GP_T_OK) {
		rc = unexpected(g, f, op, err);
	} else {
		gmsg m;
		rc = msg_parse(g, f, &m, false, err);
		if (!rc && geti(&m, BRIG_GP_F_PROC, 0) <= 0) {
			frame_free(f);
			pthread_mutex_lock(&g->mu);
			die_locked(g, BRIG_EPROTO, "brig-init answered %s without a proc id", op);
			rc = dead_error(g, err);
			pthread_mutex_unlock(&g->mu);
			return rc;
		}
		if (!rc)
			x->proc = geti(&m, BRIG_GP_F_PROC, 0);
		pthread_mutex_lock(&g->mu);
		bool bound = w->proc == x->proc;
		pthread_mutex_unlock(&g->mu);
		if (!rc && bind && !bound)
			rc = brig__error_set(err, BRIG_ECONFLICT, 0, "%s: proc %lld is already attached on this relay",
					     op, (long long)x->proc);
	}
	frame_free(f);
	return rc;
}

typedef struct pump {
	const brig_guest_exec_opts *o;
	const char *pend;
	size_t plen;
	bool stdin_open;
	char *inbuf;
} pump;

/* Sends one STDIN chunk, or STDIN_CLOSE at the end. */
static int pump_stdin(brig_guest *g, pump *p, int64_t proc, int64_t deadline_ms, brig_error **err)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	if (!p->plen) {
		p->stdin_open = false;
		return send_frame(g, &e, BRIG_GP_T_STDIN_CLOSE, (uint32_t)proc, deadline_ms, err);
	}
	size_t k = p->plen < BRIG_GP_MAX_DATA ? p->plen : BRIG_GP_MAX_DATA;
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, p->pend, k);
	p->pend += k;
	p->plen -= k;
	return send_frame(g, &e, BRIG_GP_T_STDIN, (uint32_t)proc, deadline_ms, err);
}

static int send_kill(brig_guest *g, int64_t proc, uint32_t *req_out, gwaiter **wout, int64_t deadline_ms,
		     brig_error **err)
{
	gwaiter *w = waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, proc);
	int rc = send_frame(g, &e, BRIG_GP_T_KILL, w->req, deadline_ms, err);
	if (rc) {
		waiter_remove(g, w);
		return rc;
	}
	*wout = w;
	*req_out = w->req;
	return 0;
}

/* Streams a bound proc's output until EXIT; deadline (guest's own, plus
 * grace) and cancel end the tree with KILL when end_tree, or only the
 * attachment. */
static int drive(brig_guest *g, gwaiter *w, int64_t proc, const brig_guest_exec_opts *o, bool end_tree,
		 brig_guest_exit *x, brig_error **err)
{
	pump p = {.o = o,
		  .pend = o->stdin_fd < 0 ? o->stdin_data : NULL,
		  .plen = o->stdin_fd < 0 ? o->stdin_len : 0,
		  .stdin_open = o->stdin_fd >= 0 || o->stdin_data};
	int rc = 0;
	bool canceled = false, ours_timed_out = false, cb_failed = false;
	int cb_rc = 0;
	gwaiter *kw = NULL;
	uint32_t kreq = 0;
	/* the guest's deadline, then ours; none without one */
	int64_t hard = o->deadline_ms ? o->deadline_ms + BRIG_GUEST_GRACE_MS : 0;
	int64_t kill_by = 0; /* once KILL is sent: its answer's deadline */
	char inbuf[BRIG_GP_MAX_DATA];
	for (;;) {
		/* stdin: fixed bytes go out chunk by chunk between frames */
		if (p.stdin_open && o->stdin_fd < 0 && !kw) {
			rc = pump_stdin(g, &p, proc, hard, err);
			if (rc)
				break;
			pthread_mutex_lock(&g->mu);
			bool busy = w->head != NULL;
			pthread_mutex_unlock(&g->mu);
			if (p.stdin_open && !busy)
				continue;
		}
		int extra = -1;
		if (!kw && o->cancel_fd >= 0)
			extra = o->cancel_fd;
		gframe *f = NULL;
		int wr;
		bool want_stdin = p.stdin_open && o->stdin_fd >= 0;
		bool want_resize = o->size_cb && o->resize_fd >= 0;
		if ((want_stdin || want_resize) && !kw) {
			/* wait for a frame, stdin, the cancel fd or a resize at once */
			struct pollfd pfd[4] = {{.fd = w->efd, .events = POLLIN},
						{.fd = want_stdin ? o->stdin_fd : -1, .events = POLLIN},
						{.fd = extra, .events = POLLIN},
						{.fd = want_resize ? o->resize_fd : -1, .events = POLLIN}};
			pthread_mutex_lock(&g->mu);
			bool ready = w->head || w->overflow || g->dead;
			pthread_mutex_unlock(&g->mu);
			if (!ready) {
				int pr = poll(pfd, 4, brig_remaining_ms(hard));
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
						rc = send_frame(g, &e, BRIG_GP_T_RESIZE, (uint32_t)proc, hard, err);
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
					rc = pump_stdin(g, &p, proc, hard, err);
					if (rc)
						break;
					continue;
				}
				if (pr == 0) {
					ours_timed_out = true;
					goto kill;
				}
				if (pr > 0 && pfd[0].revents)
					drain(w->efd);
				continue; /* look at the queue again */
			}
		}
		wr = waiter_next(g, w, &f, kw ? kill_by : hard, extra, err);
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
			rc = msg_parse(g, f, &m, false, err);
			int64_t stream = geti(&m, BRIG_GP_F_STREAM, 0);
			if (!rc && stream != 1 && stream != 2)
				rc = unexpected(g, f, "output (stream)", err);
			if (!rc && o->on_output && m.data_len && !cb_failed) {
				int r = o->on_output((int)stream, (const char *)m.data, m.data_len, o->payload);
				if (r) {
					cb_failed = true;
					cb_rc = r;
					frame_free(f);
					if (!end_tree) {
						rc = brig__error_set(err, r, 0, "%s: the output callback gave up",
								     g->what);
						break;
					}
					goto kill;
				}
			}
			frame_free(f);
			if (rc)
				break;
			continue;
		}
		if (f->type == BRIG_GP_T_EXIT) {
			gmsg m;
			rc = msg_parse(g, f, &m, false, err);
			frame_free(f);
			if (rc)
				break;
			exit_from(x, &m);
			x->proc = proc;
			break;
		}
		if (f->type == BRIG_GP_T_ERROR && f->id == (uint32_t)proc) {
			rc = error_from(g, f, "command", err);
			frame_free(f);
			break;
		}
		rc = unexpected(g, f, "a running command", err);
		frame_free(f);
		break;
kill:
		if (!end_tree) {
			rc = canceled ? brig__error_set(err, BRIG_ECANCELED, 0, "%s: attach cancelled", g->what)
				      : brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: attach deadline passed", g->what);
			break;
		}
		if (!kw) {
			kill_by = grace(brig_now_ms());
			rc = send_kill(g, proc, &kreq, &kw, kill_by, err);
			if (rc) {
				rc = BRIG_EUNCERTAIN;
				break;
			}
		}
	}
	if (kw)
		waiter_remove(g, kw); /* its OK, if any, is not needed: EXIT said it */
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
	gwaiter *w = waiter_add(g, true);
	brig_gp_enc e = {0};
	put_start(&e, o, tag, false);
	rc = send_frame(g, &e, BRIG_GP_T_START, w->req, o->deadline_ms, err);
	if (!rc)
		rc = await_start(g, w, "start", o->deadline_ms, true, x, err);
	if (!rc)
		rc = drive(g, w, x->proc, o, true, x, err);
	waiter_remove(g, w);
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
	gwaiter *w = waiter_add(g, false);
	brig_gp_enc e = {0};
	put_start(&e, &oo, tag, true);
	brig_guest_exit x = {0};
	rc = send_frame(g, &e, BRIG_GP_T_START, w->req, 0, err);
	if (!rc)
		rc = await_start(g, w, "start", 0, false, &x, err);
	waiter_remove(g, w);
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
	gwaiter *w = waiter_add(g, true);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, proc);
	brig_gp_put_int(&e, BRIG_GP_F_STDIN, o->stdin_fd >= 0 || o->stdin_data);
	int rc = send_frame(g, &e, BRIG_GP_T_ATTACH, w->req, o->deadline_ms, err);
	if (!rc)
		rc = await_start(g, w, "attach", o->deadline_ms, true, x, err);
	if (!rc)
		rc = drive(g, w, x->proc, o, false, x, err);
	waiter_remove(g, w);
	return rc;
}

static json_t *ps_entry_json(const gmsg *m)
{
	json_t *j = json_object();
	json_object_set_new(j, "id", json_integer(geti(m, BRIG_GP_F_PROC, 0)));
	json_object_set_new(j, "pid", json_integer(geti(m, BRIG_GP_F_PID, 0)));
	json_t *tag = gets_json(m, BRIG_GP_F_TAG);
	json_object_set_new(j, "tag", tag ? tag : json_null());
	json_t *st = gets_json(m, BRIG_GP_F_STATE);
	json_object_set_new(j, "state", st ? st : json_string("unknown"));
	json_object_set_new(j, "detached", json_boolean(geti(m, BRIG_GP_F_DETACHED, 0)));
	json_object_set_new(j, "started_ms", json_integer(geti(m, BRIG_GP_F_STARTED_MS, 0)));
	json_object_set_new(j, "ended_ms", json_integer(geti(m, BRIG_GP_F_ENDED_MS, 0)));
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
	gwaiter *w = waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	int rc = send_frame(g, &e, BRIG_GP_T_PS, w->req, deadline_ms, err);
	json_t *arr = json_array();
	while (!rc) {
		gframe *f = NULL;
		rc = waiter_next(g, w, &f, grace(deadline_ms), -1, err);
		if (rc == BRIG_ETIMEDOUT)
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "ps: brig-init did not answer in time");
		if (rc)
			break;
		gmsg m;
		if (f->type == BRIG_GP_T_PS_ENTRY) {
			rc = msg_parse(g, f, &m, true, err);
			if (!rc && json_array_size(arr) >= 100000)
				rc = brig__error_set(err, BRIG_ETOOBIG, 0, "ps: more than 100000 entries");
			if (!rc) {
				json_t *j = ps_entry_json(&m);
				json_object_set_new(j, "argv", m.argv);
				json_array_append_new(arr, j);
			}
		} else if (f->type == BRIG_GP_T_OK) {
			frame_free(f);
			break;
		} else if (f->type == BRIG_GP_T_ERROR) {
			rc = error_from(g, f, "ps", err);
		} else {
			rc = unexpected(g, f, "PS", err);
		}
		frame_free(f);
	}
	waiter_remove(g, w);
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
	int rc = simple_call(g, &e, BRIG_GP_T_STATUS, "status", &m, &f, deadline_ms, err);
	if (rc)
		return rc;
	*out = ps_entry_json(&m);
	frame_free(f);
	return 0;
}

int brig_guest_kill(brig_guest *g, int64_t proc, brig_guest_exit *x, int64_t deadline_ms, brig_error **err)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	put_ref(&e, proc, NULL);
	gmsg m;
	int rc = simple_call(g, &e, BRIG_GP_T_KILL, "kill", &m, NULL, deadline_ms, err);
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
	return simple_call(g, &e, BRIG_GP_T_SIGNAL, "signal", &m, NULL, deadline_ms, err);
}

/* ---- files ---- */

static int check_path(const char *path, brig_error **err)
{
	if (!path || path[0] != '/' || strlen(path) > 4096)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "a path in the computer must be absolute (and under 4 KiB)");
	return 0;
}

static json_t *stat_json(const gmsg *m)
{
	json_t *j = json_object();
	json_t *t = gets_json(m, BRIG_GP_F_TYPE);
	json_object_set_new(j, "type", t ? t : json_string("unknown"));
	json_object_set_new(j, "mode", json_integer(geti(m, BRIG_GP_F_MODE, 0) & 07777));
	json_object_set_new(j, "size", json_integer(geti(m, BRIG_GP_F_SIZE, 0)));
	json_object_set_new(j, "mtime_ns", json_integer(geti(m, BRIG_GP_F_MTIME_NS, 0)));
	json_object_set_new(j, "uid", json_integer(geti(m, BRIG_GP_F_UID, -1)));
	json_object_set_new(j, "gid", json_integer(geti(m, BRIG_GP_F_GID, -1)));
	json_t *l = gets_json(m, BRIG_GP_F_LINK);
	if (l)
		json_object_set_new(j, "link", l);
	return j;
}

int brig_guest_stat(brig_guest *g, json_t **out, const char *path, bool nofollow, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_NOFOLLOW, nofollow);
	gmsg m;
	gframe *f = NULL;
	cleanup_free char *op = xasprintf("stat %s", path);
	rc = simple_call(g, &e, BRIG_GP_T_STAT, op, &m, &f, deadline_ms, err);
	if (rc)
		return rc;
	*out = stat_json(&m);
	frame_free(f);
	return 0;
}

int brig_guest_list(brig_guest *g, json_t **out, const char *path, int depth, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (depth < 1 || depth > 64)
		return brig__error_set(err, BRIG_EINVAL, 0, "list depth must be 1..64");
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 60000;
	cleanup_free char *op = xasprintf("list %s", path);
	gwaiter *w = waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_DEPTH, depth);
	rc = send_frame(g, &e, BRIG_GP_T_LIST, w->req, deadline_ms, err);
	json_t *arr = json_array();
	while (!rc) {
		gframe *f = NULL;
		rc = waiter_next(g, w, &f, grace(deadline_ms), -1, err);
		if (rc == BRIG_ETIMEDOUT)
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
		if (rc)
			break;
		gmsg m;
		if (f->type == BRIG_GP_T_LIST_ENTRY) {
			rc = msg_parse(g, f, &m, false, err);
			if (!rc && !(m.shas >> BRIG_GP_F_NAME & 1))
				rc = unexpected(g, f, "LIST (an entry without a name)", err);
			if (!rc && json_array_size(arr) >= 100000)
				rc = brig__error_set(err, BRIG_ETOOBIG, 0, "%s: more than 100000 entries", op);
			if (!rc) {
				json_t *j = stat_json(&m);
				json_object_set_new(j, "name", gets_json(&m, BRIG_GP_F_NAME));
				json_array_append_new(arr, j);
			}
		} else if (f->type == BRIG_GP_T_OK) {
			frame_free(f);
			break;
		} else if (f->type == BRIG_GP_T_ERROR) {
			rc = error_from(g, f, op, err);
		} else {
			rc = unexpected(g, f, "LIST", err);
		}
		frame_free(f);
	}
	waiter_remove(g, w);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

int brig_guest_read(brig_guest *g, const char *path, int64_t offset, int64_t length, brig_engine_data_cb cb,
		    void *payload, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (offset < 0 || length < -1)
		return brig__error_set(err, BRIG_EINVAL, 0, "read: offset and length must not be negative");
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 600000;
	cleanup_free char *op = xasprintf("read %s", path);
	gwaiter *w = waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_OFFSET, offset);
	brig_gp_put_int(&e, BRIG_GP_F_LENGTH, length);
	rc = send_frame(g, &e, BRIG_GP_T_READ, w->req, deadline_ms, err);
	uint64_t got = 0;
	while (!rc) {
		gframe *f = NULL;
		rc = waiter_next(g, w, &f, grace(deadline_ms), -1, err);
		if (rc == BRIG_ETIMEDOUT)
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
		if (rc)
			break;
		gmsg m;
		if (f->type == BRIG_GP_T_DATA) {
			rc = msg_parse(g, f, &m, false, err);
			got += m.data_len;
			if (!rc && length >= 0 && got > (uint64_t)length)
				rc = unexpected(g, f, "READ (more bytes than asked for)", err);
			if (!rc && m.data_len && cb) {
				int r = cb((const char *)m.data, m.data_len, payload);
				if (r)
					rc = brig__error_set(err, r, 0, "%s: the receiver gave up", op);
			}
		} else if (f->type == BRIG_GP_T_OK) {
			rc = msg_parse(g, f, &m, false, err);
			if (!rc && has_i(&m, BRIG_GP_F_COUNT) && (uint64_t)geti(&m, BRIG_GP_F_COUNT, 0) != got)
				rc = unexpected(g, f, "READ (a count that is not what was sent)", err);
			frame_free(f);
			break;
		} else if (f->type == BRIG_GP_T_ERROR) {
			rc = error_from(g, f, op, err);
		} else {
			rc = unexpected(g, f, "READ", err);
		}
		frame_free(f);
	}
	waiter_remove(g, w);
	return rc;
}

int brig_guest_write(brig_guest *g, const char *path, int fd, const void *data, size_t len, unsigned mode, bool parents,
		     int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 600000;
	cleanup_free char *op = xasprintf("write %s", path);
	gwaiter *w = waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_MODE, mode & 07777);
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, parents);
	rc = send_frame(g, &e, BRIG_GP_T_WRITE, w->req, deadline_ms, err);
	char buf[BRIG_GP_MAX_DATA];
	const char *p = data;
	size_t left = fd >= 0 ? 0 : len;
	gframe *f = NULL;
	while (!rc) {
		/* an early ERROR ends the upload */
		pthread_mutex_lock(&g->mu);
		bool answered = w->head != NULL;
		pthread_mutex_unlock(&g->mu);
		if (answered)
			break;
		size_t k;
		const char *chunk;
		if (fd >= 0) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				rc = brig__error_set(err, BRIG_EIO, errno, "%s: reading the source: %s", op,
						     strerror(errno));
				break; /* no WRITE_END: the guest keeps a temporary file, never the target */
			}
			k = (size_t)r;
			chunk = buf;
		} else {
			k = left < BRIG_GP_MAX_DATA ? left : BRIG_GP_MAX_DATA;
			chunk = p;
			p += k;
			left -= k;
		}
		brig_gp_enc_begin(&e);
		if (!k) {
			rc = send_frame(g, &e, BRIG_GP_T_WRITE_END, w->req, deadline_ms, err);
			break;
		}
		brig_gp_put_bytes(&e, BRIG_GP_F_DATA, chunk, k);
		rc = send_frame(g, &e, BRIG_GP_T_DATA, w->req, deadline_ms, err);
	}
	brig_gp_enc_free(&e);
	if (rc == BRIG_ENOTSENT)
		rc = BRIG_EUNCERTAIN; /* the WRITE itself went out */
	if (!rc)
		rc = waiter_next(g, w, &f, grace(deadline_ms), -1, err);
	if (rc == BRIG_ETIMEDOUT)
		rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
	if (!rc && f->type == BRIG_GP_T_ERROR)
		rc = error_from(g, f, op, err);
	else if (!rc && f->type != BRIG_GP_T_OK)
		rc = unexpected(g, f, "WRITE", err);
	frame_free(f);
	waiter_remove(g, w);
	return rc;
}

int brig_guest_mkdir(brig_guest *g, const char *path, unsigned mode, bool parents, int64_t deadline_ms,
		     brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_MODE, mode & 07777);
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, parents);
	gmsg m;
	cleanup_free char *op = xasprintf("mkdir %s", path);
	return simple_call(g, &e, BRIG_GP_T_MKDIR, op, &m, NULL, deadline_ms, err);
}

int brig_guest_remove(brig_guest *g, const char *path, bool recursive, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_RECURSIVE, recursive);
	gmsg m;
	cleanup_free char *op = xasprintf("remove %s", path);
	return simple_call(g, &e, BRIG_GP_T_REMOVE, op, &m, NULL, deadline_ms, err);
}

int brig_guest_rename(brig_guest *g, const char *from, const char *to, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(from, err);
	if (!rc)
		rc = check_path(to, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, from);
	brig_gp_put_str(&e, BRIG_GP_F_PATH2, to);
	gmsg m;
	cleanup_free char *op = xasprintf("rename %s", from);
	return simple_call(g, &e, BRIG_GP_T_RENAME, op, &m, NULL, deadline_ms, err);
}
