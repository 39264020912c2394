/* util.h — allocation, cleanup helpers, bounded buffers, errors and clocks
 * shared by every layer of libbrig. Private to src/. */
#ifndef BRIG_UTIL_H
#define BRIG_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "brig/error.h"

/* ---- allocation: failure aborts (crun, redis) ---- */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- cleanup attributes ---- */
static inline void brig__freep(void *p) { free(*(void **)p); }
static inline void brig__closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
#define cleanup_free __attribute__((cleanup(brig__freep)))
#define cleanup_close __attribute__((cleanup(brig__closep)))
#define cleanup_json __attribute__((cleanup(brig__json_decrefp)))
struct json_t;
void brig__json_decrefp(void *p);

static inline void *brig__steal(void *pp)
{
	void **p = (void **)pp;
	void *r = *p;
	*p = NULL;
	return r;
}
#define steal_pointer(pp) brig__steal((pp))

static inline int steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

/* ---- bounded growable buffer (curl DYNBUF): cap fixed at init ---- */
typedef struct brig_buf {
	char *data;
	size_t len;
	size_t alloc;
	size_t cap; /* hard maximum of len */
} brig_buf;

void brig_buf_init(brig_buf *b, size_t cap);
/* Appends; returns BRIG_ETOOBIG (and leaves b unchanged) past the cap.
 * For buffers that grow from peer data: the result must be checked. */
int brig_buf_add(brig_buf *b, const void *p, size_t n) __attribute__((warn_unused_result));
int brig_buf_addstr(brig_buf *b, const char *s) __attribute__((warn_unused_result));
int brig_buf_printf(brig_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3), warn_unused_result));
/* Infallible appends, only for text brig composes itself (URLs, request
 * heads, messages, scripts) into a buffer whose cap that text cannot reach.
 * Hitting the cap is a programming error, not peer data: it aborts with a
 * message, like allocation failure. Never use these for peer bytes. */
void brig_buf_put(brig_buf *b, const void *p, size_t n);
void brig_buf_puts(brig_buf *b, const char *s);
void brig_buf_putf(brig_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminated view (data may contain NULs). Never NULL. */
const char *brig_buf_cstr(brig_buf *b);
void brig_buf_reset(brig_buf *b);
void brig_buf_free(brig_buf *b);
/* Hands out the data (NUL-terminated) and resets b. */
char *brig_buf_steal(brig_buf *b, size_t *len);

/* ---- errors ---- */
/* Replaces *err (when err != NULL) with a new error; returns code. */
int brig__error_set(brig_error **err, int code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Same, with the daemon's HTTP status recorded. */
int brig__error_set_http(brig_error **err, int code, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Prefixes context ("exec in X: ") to an existing error. Returns the code the
 * error already carries, NOT the code argument, whenever *err exists; code is
 * returned only when err or *err is NULL (nothing to prefix). It never changes
 * an error's code: to report a different code, use brig__error_set. */
int brig__error_prefix(brig_error **err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void brig__error_clear(brig_error **err);
/* Hands src (consumed, may be NULL) to the caller's err: *dst's old error is
 * freed and replaced by src; with dst NULL, src is freed. Returns src's code
 * (0 when src is NULL). The one way to keep a deeper or earlier error in
 * place of the current one. */
int brig__error_move(brig_error **dst, brig_error *src);

/* ---- versioned options ---- */
/* The one rule for a public options struct's version field: 1..current is
 * accepted (a caller built against an older header keeps working after the
 * struct grows), anything else is BRIG_EINVAL naming the struct
 * ("exec options: version 7 is not supported (1..1)"). what is the struct's
 * name in messages. */
int brig__opts_check(unsigned version, unsigned current, const char *what, brig_error **err);

/* ---- time ---- */
/* Monotonic milliseconds. */
int64_t brig_now_ms(void);
/* Wall-clock seconds since the epoch. */
int64_t brig_wall_s(void);
/* Wall-clock milliseconds since the epoch (what records store). */
int64_t brig_wall_ms(void);
/* Remaining ms to a monotonic deadline (0 deadline = none → -1, infinite). */
int brig_remaining_ms(int64_t deadline_ms);

/* ---- misc ---- */
/* Percent-encodes s for a URL query value. */
char *brig_urlencode(const char *s);
/* Writes all of buf to fd, retrying on EINTR/partial writes. */
int brig_write_all(int fd, const void *buf, size_t n);
/* Sends all of buf on the nonblocking socket fd (no SIGPIPE), waiting
 * while it is full: at most timeout_ms each time (-1: no limit). -1 when
 * the peer is gone, on an error, or when a wait times out. */
int brig_send_all(int fd, const void *buf, size_t n, int timeout_ms);
/* Lowercase hex of n bytes into out (2n+1). */
void brig_hex(char *out, const unsigned char *in, size_t n);
/* mkdir -p: creates path and every missing parent with mode (existing ones
 * are left as they are). On failure BRIG_EIO "cannot create [what ]<the
 * directory that failed>: <strerror>"; what may be NULL. */
int brig_mkdir_p(const char *path, mode_t mode, const char *what, brig_error **err);

#endif
