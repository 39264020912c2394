/* util.c — allocation, bounded buffers, error objects and clocks.
 * Everything here is layer-neutral and has no knowledge of Docker. */
#include "util.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

static void oom(void)
{
	static const char msg[] = "brig: out of memory\n";
	ssize_t r = write(2, msg, sizeof msg - 1);
	(void)r;
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *r = realloc(p, n ? n : 1);
	if (!r)
		oom();
	return r;
}

char *xstrdup(const char *s)
{
	char *r = strdup(s ? s : "");
	if (!r)
		oom();
	return r;
}

char *xstrndup(const char *s, size_t n)
{
	char *r = strndup(s, n);
	if (!r)
		oom();
	return r;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *r = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&r, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	return r;
}

void brig__json_decrefp(void *p)
{
	json_t **j = p;
	if (*j)
		json_decref(*j);
}

/* ---- buffers ---- */

void brig_buf_init(brig_buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap;
}

int brig_buf_add(brig_buf *b, const void *p, size_t n)
{
	if (n > b->cap || b->len > b->cap - n)
		return BRIG_ETOOBIG;
	if (b->len + n >= b->alloc) {
		size_t want = b->alloc ? b->alloc : 256;
		while (want <= b->len + n && want < SIZE_MAX / 2)
			want *= 2;
		if (want <= b->len + n)
			want = b->len + n + 1;
		size_t limit = b->cap < SIZE_MAX ? b->cap + 1 : SIZE_MAX;
		if (want > limit)
			want = limit;
		b->data = xrealloc(b->data, want);
		b->alloc = want;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int brig_buf_addstr(brig_buf *b, const char *s) { return brig_buf_add(b, s, strlen(s)); }

int brig_buf_printf(brig_buf *b, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	int r = brig_buf_add(b, s, (size_t)n);
	free(s);
	return r;
}

static void buf_overflow(const brig_buf *b, size_t n)
{
	char msg[128];
	int m = snprintf(msg, sizeof msg, "brig: internal buffer cap exceeded (len %zu + %zu > cap %zu)\n", b->len, n,
			 b->cap);
	if (m > 0) {
		ssize_t r = write(2, msg, (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1);
		(void)r;
	}
	abort();
}

void brig_buf_put(brig_buf *b, const void *p, size_t n)
{
	if (brig_buf_add(b, p, n) < 0)
		buf_overflow(b, n);
}

void brig_buf_puts(brig_buf *b, const char *s)
{
	brig_buf_put(b, s, strlen(s));
}

void brig_buf_putf(brig_buf *b, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	brig_buf_put(b, s, (size_t)n);
	free(s);
}

const char *brig_buf_cstr(brig_buf *b) { return b->data ? b->data : ""; }

void brig_buf_reset(brig_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void brig_buf_free(brig_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->alloc = 0;
}

char *brig_buf_steal(brig_buf *b, size_t *len)
{
	char *r = b->data ? b->data : xstrdup("");
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->alloc = 0;
	return r;
}

/* ---- errors ---- */

void brig_error_free(brig_error *err)
{
	if (!err)
		return;
	free(err->message);
	free(err);
}

const char *brig_error_message(const brig_error *err) { return err && err->message ? err->message : ""; }

const char *brig_error_name(int code)
{
	switch (code) {
	case BRIG_OK: return "BRIG_OK";
	case BRIG_EINVAL: return "BRIG_EINVAL";
	case BRIG_ENOTSENT: return "BRIG_ENOTSENT";
	case BRIG_EUNCERTAIN: return "BRIG_EUNCERTAIN";
	case BRIG_ETIMEDOUT: return "BRIG_ETIMEDOUT";
	case BRIG_ENOTFOUND: return "BRIG_ENOTFOUND";
	case BRIG_ECONFLICT: return "BRIG_ECONFLICT";
	case BRIG_EPROTO: return "BRIG_EPROTO";
	case BRIG_EDAEMON: return "BRIG_EDAEMON";
	case BRIG_ETOOBIG: return "BRIG_ETOOBIG";
	case BRIG_EIO: return "BRIG_EIO";
	case BRIG_ECANCELED: return "BRIG_ECANCELED";
	case BRIG_ESTATE: return "BRIG_ESTATE";
	case BRIG_EUNSAFE: return "BRIG_EUNSAFE";
	case BRIG_EBADREQ: return "BRIG_EBADREQ";
	case BRIG_EDENIED: return "BRIG_EDENIED";
	case BRIG_ETLS: return "BRIG_ETLS";
	case BRIG_EBUSY: return "BRIG_EBUSY";
	case BRIG_ESTORE: return "BRIG_ESTORE";
	case BRIG_ECORRUPT: return "BRIG_ECORRUPT";
	default: return "BRIG_E?";
	}
}

__attribute__((format(printf, 5, 0))) static int error_vset(brig_error **err, int code, int errnum, int status,
								const char *fmt, va_list ap)
{
	if (!err)
		return code;
	brig_error *e = xcalloc(1, sizeof *e);
	e->code = code;
	e->sys_errno = errnum;
	e->http_status = status;
	if (vasprintf(&e->message, fmt, ap) < 0)
		oom();
	brig_error_free(*err);
	*err = e;
	return code;
}

int brig__error_set(brig_error **err, int code, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, errnum, 0, fmt, ap);
	va_end(ap);
	return r;
}

int brig__error_set_http(brig_error **err, int code, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_vset(err, code, 0, status, fmt, ap);
	va_end(ap);
	return r;
}

int brig__error_prefix(brig_error **err, int code, const char *fmt, ...)
{
	if (!err || !*err)
		return code;
	va_list ap;
	char *pre = NULL;
	va_start(ap, fmt);
	if (vasprintf(&pre, fmt, ap) < 0)
		oom();
	va_end(ap);
	char *m = xasprintf("%s: %s", pre, (*err)->message ? (*err)->message : "");
	free(pre);
	free((*err)->message);
	(*err)->message = m;
	/* The error's own code, not the argument: callers pass the rc they got
	 * and rely on the two agreeing; a different code needs brig__error_set. */
	return (*err)->code;
}

void brig__error_clear(brig_error **err)
{
	if (err && *err) {
		brig_error_free(*err);
		*err = NULL;
	}
}

int brig__error_move(brig_error **dst, brig_error *src)
{
	int code = src ? src->code : 0;
	if (dst) {
		brig_error_free(*dst);
		*dst = src;
	} else {
		brig_error_free(src);
	}
	return code;
}

int brig__opts_check(unsigned version, unsigned current, const char *what, brig_error **err)
{
	if (version >= 1 && version <= current)
		return 0;
	return brig__error_set(err, BRIG_EINVAL, 0, "%s: version %u is not supported (this brig takes 1..%u)", what,
			       version, current);
}

/* ---- time ---- */

int64_t brig_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t brig_wall_s(void) { return (int64_t)time(NULL); }

int64_t brig_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int brig_remaining_ms(int64_t deadline_ms)
{
	if (deadline_ms <= 0)
		return -1;
	int64_t left = deadline_ms - brig_now_ms();
	if (left <= 0)
		return 0;
	if (left > 0x7fffffff)
		return 0x7fffffff;
	return (int)left;
}

/* ---- misc ---- */

char *brig_urlencode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *r = xmalloc(n * 3 + 1), *o = r;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' || *p == '.' || *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return r;
}

int brig_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int brig_send_all(int fd, const void *buf, size_t n, int timeout_ms)
{
	const char *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			int r;
			while ((r = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
				;
			if (r <= 0 || (pf.revents & (POLLERR | POLLHUP)))
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

void brig_hex(char *out, const unsigned char *in, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int brig_mkdir_p(const char *path, mode_t mode, const char *what, brig_error **err)
{
	cleanup_free char *p = xstrdup(path);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, mode) != 0 && errno != EEXIST)
			return brig__error_set(err, BRIG_EIO, errno, "cannot create %s%s%s: %s", what ? what : "",
					       what ? " " : "", p, strerror(errno));
		*s = c;
		if (!c)
			break;
	}
	/* mkdir's EEXIST says nothing of what exists: the end must be a folder */
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return brig__error_set(err, BRIG_EIO, ENOTDIR, "cannot create %s%s%s: %s", what ? what : "",
				       what ? " " : "", path, "it exists and is not a folder");
	return 0;
}
