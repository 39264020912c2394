/* pump.c — how untrusted bytes reach libarchive: a pull source over a
 * caller's reader, or a worker thread fed through a double buffer (push). */
#include "tar/tar_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int brig_tar__error_copy(brig_error **dst, const brig_error *src, int code)
{
	if (!src)
		return brig__error_set(dst, code, 0, "tar stream failed earlier (%s)", brig_error_name(code));
	int r = brig__error_set(dst, src->code, src->sys_errno, "%s", src->message ? src->message : "");
	return r;
}

int brig_tar__sticky(int *code, brig_error **kept, int r, brig_error **err)
{
	if (r && !*code) {
		*code = r;
		if (err && *err)
			brig_tar__error_copy(kept, *err, r);
	}
	return r;
}

void brig_tar__source_clear(brig_tar__source *src)
{
	brig_error_free(src->err);
	src->err = NULL;
	free(src->buf);
	src->buf = NULL;
}

/* ---- the pump's consumer side ---- */

/* Blocks until bytes, the end, or an abort. Returns the count (the buffer
 * stays valid until the next call), 0 at the end, -1 on abort. */
static ssize_t pump_take(brig_tar__pump *p, const void **out)
{
	pthread_mutex_lock(&p->mu);
	while (p->in_len == 0 && !p->eof && !p->abort)
		pthread_cond_wait(&p->cv, &p->mu);
	ssize_t n;
	if (p->abort) {
		n = -1;
	} else if (p->in_len == 0) {
		n = 0;
	} else {
		/* Swap: libarchive keeps the previous buffer until it calls again,
		 * which is now, so it may be refilled. */
		char *t = p->out;
		p->out = p->in;
		p->in = t;
		n = (ssize_t)p->in_len;
		p->in_len = 0;
		*out = p->out;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return n;
}

static la_ssize_t source_read(struct archive *a, void *payload, const void **out)
{
	brig_tar__source *src = payload;
	if (src->code)
		return -1;
	ssize_t n;
	if (src->pump) {
		n = pump_take(src->pump, out);
		if (n < 0) {
			src->code = brig__error_set(&src->err, BRIG_ECANCELED, 0, "tar stream abandoned");
			archive_set_error(a, ECANCELED, "abandoned");
			return -1;
		}
	} else {
		if (!src->buf)
			src->buf = xmalloc(BRIG_TAR__IOBUF);
		n = src->reader(src->buf, BRIG_TAR__IOBUF, src->payload, &src->err);
		if (n < 0) {
			src->code = (int)n;
			if (!src->err)
				brig__error_set(&src->err, (int)n, 0, "reading the tar stream failed (%s)",
						brig_error_name((int)n));
			archive_set_error(a, EIO, "reader failed");
			return -1;
		}
		if ((size_t)n > BRIG_TAR__IOBUF) {
			src->code = brig__error_set(&src->err, BRIG_EINVAL, 0,
						    "tar reader returned %zd bytes for a %d-byte buffer", n,
						    BRIG_TAR__IOBUF);
			archive_set_error(a, EINVAL, "reader overran");
			return -1;
		}
		*out = src->buf;
	}
	if ((uint64_t)n > src->max_bytes - src->bytes) {
		src->code = brig__error_set(&src->err, BRIG_ETOOBIG, 0, "tar stream is longer than %llu bytes, the cap",
					    (unsigned long long)src->max_bytes);
		archive_set_error(a, EFBIG, "stream cap");
		return -1;
	}
	src->bytes += (uint64_t)n;
	return n;
}

int brig_tar__archive_error(struct archive *a, brig_tar__source *src, brig_error **err, const char *fmt, ...)
{
	if (src && src->code) {
		int code = src->code;
		if (!src->err)
			return brig__error_set(err, code, 0, "reading the tar stream failed earlier (%s)",
					       brig_error_name(code));
		brig__error_move(err, steal_pointer(&src->err));
		/* Keep src->code so later reads keep failing. */
		return code;
	}
	char *what = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) < 0)
		what = NULL;
	va_end(ap);
	const char *m = archive_error_string(a);
	int r = brig__error_set(err, BRIG_EPROTO, 0, "%s: malformed tar stream: %s", what ? what : "tar",
				m ? m : "unknown error");
	free(what);
	return r;
}

/* The next entry's header of a into *ae: 0, 1 at the end of the archive,
 * or an error: as brig_tar__archive_error, or BRIG_EPROTO when the input
 * stops at a block boundary without the end-of-archive blocks after at
 * least one header (an empty input is a fine empty archive). *seen counts
 * the headers read from a (start at 0); entries only goes into messages. */
static int next_header(struct archive *a, brig_tar__source *src, uint64_t *seen, uint64_t entries,
		       struct archive_entry **ae, brig_error **err)
{
	/* libarchive takes input that stops at a block boundary for the end of
	 * the archive. Only the end-of-archive blocks move the position at the
	 * end, so whatever is left of the last entry (data, padding) is
	 * consumed first and the position compared across the call. */
	if (*seen && archive_read_data_skip(a) != ARCHIVE_OK)
		return brig_tar__archive_error(a, src, err, "after %llu entries", (unsigned long long)entries);
	la_int64_t before = archive_filter_bytes(a, 0);
	int ar = archive_read_next_header(a, ae);
	if (ar == ARCHIVE_EOF) {
		if (*seen && archive_filter_bytes(a, 0) == before)
			return brig__error_set(err, BRIG_EPROTO, 0,
					       "tar stream cut short: the archive ends without its end marker after "
					       "%llu entries",
					       (unsigned long long)entries);
		return 1;
	}
	/* Warnings are about charset conversion or ignored pax records; the
	 * entry that results is checked in full either way. */
	if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN)
		return brig_tar__archive_error(a, src, err, "after %llu entries", (unsigned long long)entries);
	++*seen;
	return 0;
}

int brig_tar__walk(brig_tar__source *src, brig_tar__checker *ck, brig_tar__each each, void *ctx, brig_error **err)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	int r = 0;
	if (archive_read_open(a, src, NULL, source_read, NULL) != ARCHIVE_OK)
		r = brig_tar__archive_error(a, src, err, "opening the tar stream");
	uint64_t seen = 0;
	while (!r) {
		struct archive_entry *ae;
		r = next_header(a, src, &seen, ck->stats.entries, &ae, err);
		if (r == 1) {
			r = 0;
			break;
		}
		if (r)
			break;
		brig_tar__item it;
		r = brig_tar__check(ck, ae, &it, err);
		if (!r && !it.skip)
			r = each(ctx, a, src, &it, err);
	}
	archive_read_free(a);
	return r;
}

int brig_tar__run_pull(brig_tar__body body, void *ctx, uint64_t max_bytes, brig_tar_reader reader, void *payload,
		       brig_error **err)
{
	brig_tar__source src = {.reader = reader, .payload = payload, .max_bytes = max_bytes};
	int r = body(ctx, &src, err);
	brig_tar__source_clear(&src);
	return r;
}

/* ---- the pump's producer side ---- */

void brig_tar__pump_init(brig_tar__pump *p, brig_tar__body body, void *ctx, uint64_t max_bytes)
{
	memset(p, 0, sizeof *p);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->body = body;
	p->ctx = ctx;
	p->src.pump = p;
	p->src.max_bytes = max_bytes;
}

static void *pump_main(void *arg)
{
	brig_tar__pump *p = arg;
	brig_error *e = NULL;
	int r = p->body(p->ctx, &p->src, &e);
	pthread_mutex_lock(&p->mu);
	p->code = r;
	p->err = e;
	p->done = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static int pump_start(brig_tar__pump *p, brig_error **err)
{
	p->in = xmalloc(BRIG_TAR__IOBUF);
	p->out = xmalloc(BRIG_TAR__IOBUF);
	/* The worker must never take the process's signals (Ctrl-C handlers). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&p->thread, NULL, pump_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		p->done = true;
		p->code = brig__error_set(&p->err, BRIG_EIO, r, "cannot start the tar worker thread: %s", strerror(r));
		return brig_tar__error_copy(err, p->err, p->code);
	}
	p->started = true;
	return 0;
}

int brig_tar__pump_feed(brig_tar__pump *p, const void *data, size_t len, brig_error **err)
{
	if (!p->started && !p->done) {
		int r = pump_start(p, err);
		if (r)
			return r;
	}
	if (p->eof)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar stream fed after its end");
	const char *d = data;
	pthread_mutex_lock(&p->mu);
	while (len && !p->done) {
		if (p->in_len == BRIG_TAR__IOBUF) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		size_t n = BRIG_TAR__IOBUF - p->in_len;
		if (n > len)
			n = len;
		memcpy(p->in + p->in_len, d, n);
		p->in_len += n;
		d += n;
		len -= n;
		pthread_cond_broadcast(&p->cv);
	}
	int code = p->done ? p->code : 0;
	pthread_mutex_unlock(&p->mu);
	/* Finished cleanly before all bytes were used: what follows the
	 * end-of-archive marker is ignored. */
	if (code)
		return brig_tar__error_copy(err, p->err, code);
	return 0;
}

int brig_tar__pump_finish(brig_tar__pump *p, brig_error **err)
{
	if (!p->started && !p->done) {
		/* Nothing was fed: the stream is empty; no thread needed. */
		p->eof = true;
		brig_error *e = NULL;
		p->code = p->body(p->ctx, &p->src, &e);
		p->err = e;
		p->done = true;
	} else if (p->started && !p->joined) {
		pthread_mutex_lock(&p->mu);
		p->eof = true;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->thread, NULL);
		p->joined = true;
	}
	p->eof = true;
	if (p->code)
		return brig_tar__error_copy(err, p->err, p->code);
	return 0;
}

void brig_tar__pump_destroy(brig_tar__pump *p)
{
	if (p->started && !p->joined) {
		pthread_mutex_lock(&p->mu);
		p->abort = true;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->thread, NULL);
		p->joined = true;
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->in);
	free(p->out);
	p->in = p->out = NULL;
	brig_error_free(p->err);
	p->err = NULL;
	brig_tar__source_clear(&p->src);
}
