/* copy.c — the re-owning copier (untrusted tar → checked, re-owned,
 * optionally zstd tar with its SHA-256) and the digest-first restore reader. */
#include "tar/tar_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/openssl_dl.h" /* libcrypto, dlopen-ed: EVP calls go through brig__crypto */

static const char zeros[BRIG_TAR__IOBUF];

/* ======================================================================
 * Copier
 * ====================================================================== */

struct brig_tar_copy {
	brig_tar__checker ck;
	bool rewrite_owner;
	unsigned uid, gid;
	brig_tar_entry_cb on_entry;
	void *payload;
	const char *const *exclude;
	brig_tar_writer write;
	void *wpayload;
	struct archive *w;
	struct archive_entry *oe;
	EVP_MD_CTX *md;
	uint64_t out_bytes;
	int wcode; /* the writer failed: never call it again */
	brig_error *werr;
	brig_tar__pump pump;
	bool pump_open; /* a push-mode input is in progress */
	bool finished;
	int code; /* sticky failure */
	brig_error *err;
	int cb_code; /* data_cb adapter */
	brig_error *cb_err;
};

static la_ssize_t copy_out(struct archive *a, void *payload, const void *buf, size_t n)
{
	brig_tar_copy *c = payload;
	if (c->wcode)
		return -1;
	int r = c->write(buf, n, c->wpayload, &c->werr);
	if (r) {
		c->wcode = r < 0 ? r : BRIG_EIO;
		if (!c->werr)
			brig__error_set(&c->werr, c->wcode, 0, "writing the copy failed (%s)", brig_error_name(r));
		archive_set_error(a, EIO, "writer failed");
		return -1;
	}
	EVP_DigestUpdate(c->md, buf, n);
	c->out_bytes += n;
	return (la_ssize_t)n;
}

/* A failed libarchive write call: the writer's own error, else libarchive's. */
static int write_failed(brig_tar_copy *c, brig_error **err, const char *what)
{
	if (c->wcode)
		return brig_tar__error_copy(err, c->werr, c->wcode);
	const char *m = archive_error_string(c->w);
	return brig__error_set(err, BRIG_EIO, archive_errno(c->w), "tar copy: %s: %s", what,
			       m ? m : "libarchive failed");
}

static int copy_data(brig_tar_copy *c, struct archive *a, brig_tar__source *src, const brig_tar__item *it,
		     brig_error **err)
{
	uint64_t done = 0; /* bytes of the output entry written so far */
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int ar = archive_read_data_block(a, &buf, &n, &off);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK)
			return brig_tar__archive_error(a, src, err, "reading the data of %s", it->path);
		if (off < 0 || (uint64_t)off < done || (uint64_t)off > it->size || n > it->size - (uint64_t)off) {
			cleanup_free char *q = brig_tar__quote(it->raw);
			return brig__error_set(err, BRIG_EPROTO, 0,
					       "tar entry %s: data lies out of order or beyond its declared size", q);
		}
		/* A hole of a sparse file becomes zeros. */
		while (done < (uint64_t)off) {
			size_t z = (uint64_t)off - done < sizeof zeros ? (size_t)((uint64_t)off - done) : sizeof zeros;
			if (archive_write_data(c->w, zeros, z) != (la_ssize_t)z)
				return write_failed(c, err, "writing data");
			done += z;
		}
		if (n && archive_write_data(c->w, buf, n) != (la_ssize_t)n)
			return write_failed(c, err, "writing data");
		done += n;
	}
	while (done < it->size) {
		size_t z = it->size - done < sizeof zeros ? (size_t)(it->size - done) : sizeof zeros;
		if (archive_write_data(c->w, zeros, z) != (la_ssize_t)z)
			return write_failed(c, err, "writing data");
		done += z;
	}
	return 0;
}

static bool excluded(const brig_tar_copy *c, const char *path)
{
	for (const char *const *x = c->exclude; x && *x; x++) {
		size_t n = strlen(*x);
		if (strncmp(path, *x, n) == 0 && (path[n] == '\0' || path[n] == '/'))
			return true;
	}
	return false;
}

/* One entry through: its header rewritten from what the checker made of
 * it, then its data. */
static int copy_entry(void *ctx, struct archive *a, brig_tar__source *src, const brig_tar__item *it,
		      brig_error **err)
{
	brig_tar_copy *c = ctx;
	if (excluded(c, it->path))
		return 0; /* its data is skipped with the next header */
	struct archive_entry *oe = c->oe;
	archive_entry_clear(oe);
	archive_entry_copy_pathname(oe, it->path);
	switch (it->type) {
	case BRIG_TAR_FILE: archive_entry_set_filetype(oe, AE_IFREG); break;
	case BRIG_TAR_DIR: archive_entry_set_filetype(oe, AE_IFDIR); break;
	case BRIG_TAR_SYMLINK:
		archive_entry_set_filetype(oe, AE_IFLNK);
		archive_entry_copy_symlink(oe, it->link);
		break;
	default:
		archive_entry_set_filetype(oe, AE_IFREG);
		archive_entry_copy_hardlink(oe, it->link);
		break;
	}
	archive_entry_set_perm(oe, it->type == BRIG_TAR_SYMLINK ? 0777 : it->mode);
	archive_entry_set_size(oe, (la_int64_t)it->size);
	if (it->has_mtime)
		archive_entry_set_mtime(oe, it->mtime.tv_sec, it->mtime.tv_nsec);
	archive_entry_set_uid(oe, c->rewrite_owner ? (la_int64_t)c->uid : it->uid);
	archive_entry_set_gid(oe, c->rewrite_owner ? (la_int64_t)c->gid : it->gid);
	/* ARCHIVE_WARN: a name that is not UTF-8 went out as raw bytes. */
	if (archive_write_header(c->w, oe) < ARCHIVE_WARN)
		return write_failed(c, err, "writing a header");
	if (it->type == BRIG_TAR_FILE) {
		int r = copy_data(c, a, src, it, err);
		if (r)
			return r;
	}
	if (archive_write_finish_entry(c->w) < ARCHIVE_WARN)
		return write_failed(c, err, "finishing an entry");
	if (c->on_entry)
		c->on_entry(it->path, it->type, it->size, c->payload);
	return 0;
}

static int copy_body(void *ctx, brig_tar__source *src, brig_error **err)
{
	brig_tar_copy *c = ctx;
	return brig_tar__walk(src, &c->ck, copy_entry, c, err);
}

int brig_tar_copy_new(brig_tar_copy **out, const brig_tar_copy_opts *opts, brig_tar_writer write, void *payload,
		      brig_error **err)
{
	*out = NULL;
	brig_tar_copy_opts defaults = BRIG_TAR_COPY_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int vr = brig__opts_check(opts->version, BRIG_TAR_COPY_OPTS_VERSION, "tar copy options", err);
	if (vr)
		return vr;
	if (!write)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar copy: no writer");
	if (opts->compression != BRIG_TAR_COMPRESS_NONE && opts->compression != BRIG_TAR_COMPRESS_ZSTD)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar copy: unknown compression %d", opts->compression);
	int level = opts->zstd_level ? opts->zstd_level : 3;
	if (level < 1 || level > 19)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar copy: zstd level %d is not in 1..19", level);
	brig_tar__policy pol;
	int r = brig_tar__policy_init(&pol, &opts->limits, err);
	if (r || (r = brig__archive_load(err)))
		return r;
	if ((r = brig__crypto_load(err)) != 0) /* the SHA-256 of the output */
		return brig__error_prefix(err, r, "tar copy");
	pol.strip = opts->strip_components;
	pol.allow_symlinks = opts->allow_symlinks;
	pol.allow_absolute_symlinks = opts->allow_absolute_symlinks;
	pol.allow_hardlinks = opts->allow_hardlinks;

	brig_tar_copy *c = xcalloc(1, sizeof *c);
	brig_tar__checker_init(&c->ck, &pol);
	c->rewrite_owner = opts->rewrite_owner;
	c->uid = opts->uid;
	c->gid = opts->gid;
	c->on_entry = opts->on_entry;
	c->payload = opts->payload;
	c->exclude = opts->exclude;
	c->write = write;
	c->wpayload = payload;
	c->md = EVP_MD_CTX_new();
	if (!c->md || EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) {
		brig_tar_copy_free(c);
		return brig__error_set(err, BRIG_EIO, 0, "tar copy: cannot set up SHA-256");
	}
	c->w = archive_write_new();
	c->oe = archive_entry_new();
	archive_write_set_format_pax_restricted(c->w);
	if (opts->compression == BRIG_TAR_COMPRESS_ZSTD) {
		char lv[16];
		snprintf(lv, sizeof lv, "%d", level);
		if (archive_write_add_filter_zstd(c->w) != ARCHIVE_OK ||
		    archive_write_set_filter_option(c->w, "zstd", "compression-level", lv) != ARCHIVE_OK) {
			r = brig__error_set(err, BRIG_EIO, 0, "tar copy: cannot set up zstd: %s",
					    archive_error_string(c->w) ? archive_error_string(c->w) : "?");
			brig_tar_copy_free(c);
			return r;
		}
		/* No zero padding after the compressed frame. */
		archive_write_set_bytes_in_last_block(c->w, 1);
	}
	if (archive_write_open(c->w, c, NULL, copy_out, NULL) != ARCHIVE_OK) {
		r = write_failed(c, err, "starting the archive");
		brig_tar_copy_free(c);
		return r;
	}
	*out = c;
	return 0;
}

static int sticky(brig_tar_copy *c, int r, brig_error **err)
{
	return brig_tar__sticky(&c->code, &c->err, r, err);
}

static int check_usable(brig_tar_copy *c, brig_error **err)
{
	if (c->code)
		return brig_tar__error_copy(err, c->err, c->code);
	if (c->finished)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar copy: already finished");
	return 0;
}

int brig_tar_copy_feed(brig_tar_copy *c, const void *data, size_t len, brig_error **err)
{
	int r = check_usable(c, err);
	if (r)
		return r;
	if (!c->pump_open) {
		uint64_t left = c->ck.pol.limits.max_stream_bytes; /* per input stream */
		brig_tar__pump_init(&c->pump, copy_body, c, left);
		c->pump_open = true;
	}
	return sticky(c, brig_tar__pump_feed(&c->pump, data, len, err), err);
}

int brig_tar_copy_data_cb(const char *data, size_t len, void *payload)
{
	brig_tar_copy *c = payload;
	if (c->cb_code)
		return c->cb_code;
	c->cb_code = brig_tar_copy_feed(c, data, len, &c->cb_err);
	return c->cb_code;
}

int brig_tar_copy_end_input(brig_tar_copy *c, brig_error **err)
{
	if (c->cb_code)
		return brig_tar__error_copy(err, c->cb_err, c->cb_code);
	int r = check_usable(c, err);
	if (r)
		return r;
	if (!c->pump_open) {
		brig_tar__pump_init(&c->pump, copy_body, c, c->ck.pol.limits.max_stream_bytes);
		c->pump_open = true;
	}
	r = brig_tar__pump_finish(&c->pump, err);
	brig_tar__pump_destroy(&c->pump);
	c->pump_open = false;
	return sticky(c, r, err);
}

int brig_tar_copy_from_reader(brig_tar_copy *c, brig_tar_reader reader, void *payload, brig_error **err)
{
	int r = check_usable(c, err);
	if (r)
		return r;
	if (c->pump_open)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar copy: a pushed input is still open; end it first");
	r = brig_tar__run_pull(copy_body, c, c->ck.pol.limits.max_stream_bytes, reader, payload, err);
	return sticky(c, r, err);
}

int brig_tar_copy_finish(brig_tar_copy *c, brig_tar_copy_result *out, brig_error **err)
{
	int r;
	if (c->pump_open || c->cb_code) {
		r = brig_tar_copy_end_input(c, err);
		if (r)
			return r;
	}
	r = check_usable(c, err);
	if (r)
		return r;
	c->finished = true;
	if (archive_write_close(c->w) != ARCHIVE_OK) {
		r = write_failed(c, err, "finishing the archive");
		c->code = r;
		return r;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_DigestFinal_ex(c->md, md, &mdlen);
	if (out) {
		memset(out, 0, sizeof *out);
		brig_hex(out->sha256, md, mdlen);
		out->out_bytes = c->out_bytes;
		out->tar_bytes = (uint64_t)archive_filter_bytes(c->w, 0);
		out->stats = c->ck.stats;
	}
	return 0;
}

void brig_tar_copy_free(brig_tar_copy *c)
{
	if (!c)
		return;
	if (c->pump_open)
		brig_tar__pump_destroy(&c->pump);
	if (c->w) {
		/* Not finished: the output is incomplete anyway; keep the writer
		 * from being called again. */
		if (!c->finished)
			c->wcode = c->wcode ? c->wcode : BRIG_ECANCELED;
		archive_write_free(c->w);
	}
	if (c->oe)
		archive_entry_free(c->oe);
	EVP_MD_CTX_free(c->md);
	brig_tar__checker_free(&c->ck);
	brig_error_free(c->werr);
	brig_error_free(c->err);
	brig_error_free(c->cb_err);
	free(c);
}

int brig_tar_write_fd(const void *data, size_t len, void *payload, brig_error **err)
{
	int fd = *(int *)payload;
	if (brig_write_all(fd, data, len) < 0)
		return brig__error_set(err, BRIG_EIO, errno, "writing the tar stream: %s", strerror(errno));
	return 0;
}

/* ======================================================================
 * Restore
 * ====================================================================== */

struct brig_tar_restore {
	int fd;
	char want[65];
	EVP_MD_CTX *md;
	struct archive *a;
	char *buf;
	bool at_end;
	int code;
	brig_error *err;
};

int brig_tar_sha256_fd(int fd, char out[65], uint64_t *size, brig_error **err)
{
	unsigned char d[64];
	int r = brig__digest_fd(fd, false, d, size, err);
	if (r == 0)
		brig_hex(out, d, 32);
	return r;
}

static la_ssize_t restore_in(struct archive *a, void *payload, const void **out)
{
	brig_tar_restore *r = payload;
	for (;;) {
		ssize_t n = read(r->fd, r->buf, BRIG_TAR__IOBUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			archive_set_error(a, errno, "reading the blob: %s", strerror(errno));
			return -1;
		}
		EVP_DigestUpdate(r->md, r->buf, (size_t)n);
		*out = r->buf;
		return n;
	}
}

int brig_tar_restore_open(brig_tar_restore **out, int dirfd, const char *path, const char *sha256_hex, brig_error **err)
{
	*out = NULL;
	char want[65];
	if (!sha256_hex || strlen(sha256_hex) != 64)
		return brig__error_set(err, BRIG_EINVAL, 0, "restore: the expected SHA-256 must be 64 hex digits");
	for (int i = 0; i < 64; i++) {
		char ch = sha256_hex[i];
		if (ch >= 'A' && ch <= 'F')
			ch = (char)(ch - 'A' + 'a');
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "restore: the expected SHA-256 must be 64 hex digits");
		want[i] = ch;
	}
	want[64] = '\0';
	int r = brig__archive_load(err);
	if (r)
		return r;
	if ((r = brig__crypto_load(err)) != 0)
		return brig__error_prefix(err, r, "restore");
	const char *shown = path ? path : "(fd)";
	int fd = path ? openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot open the checkpoint blob %s: %s", shown,
				       strerror(errno));
	if (lseek(fd, 0, SEEK_SET) < 0) {
		int e = errno;
		close(fd);
		return brig__error_set(err, BRIG_EIO, e, "checkpoint blob %s is not seekable: %s", shown, strerror(e));
	}
	char got[65];
	uint64_t size = 0;
	r = brig_tar_sha256_fd(fd, got, &size, err);
	if (r) {
		close(fd);
		return brig__error_prefix(err, r, "checkpoint blob %s", shown);
	}
	if (strcmp(got, want) != 0) {
		close(fd);
		return brig__error_set(
			err, BRIG_ECORRUPT, 0,
			"checkpoint blob %s is corrupt: its SHA-256 is %s (%llu bytes), not the recorded "
			"%s; it was truncated or altered, so it was not restored",
			shown, got, (unsigned long long)size, want);
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		int e = errno;
		close(fd);
		return brig__error_set(err, BRIG_EIO, e, "rewinding %s: %s", shown, strerror(e));
	}
	brig_tar_restore *rs = xcalloc(1, sizeof *rs);
	rs->fd = fd;
	memcpy(rs->want, want, sizeof want);
	rs->buf = xmalloc(BRIG_TAR__IOBUF);
	rs->md = EVP_MD_CTX_new();
	if (!rs->md || EVP_DigestInit_ex(rs->md, EVP_sha256(), NULL) != 1) {
		brig_tar_restore_free(rs);
		return brig__error_set(err, BRIG_EIO, 0, "cannot set up SHA-256");
	}
	/* Raw: the decompressed bytes as they are; zstd, or nothing. */
	rs->a = archive_read_new();
	archive_read_support_filter_zstd(rs->a);
	archive_read_support_format_raw(rs->a);
	struct archive_entry *ae;
	if (archive_read_open(rs->a, rs, NULL, restore_in, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(rs->a, &ae) != ARCHIVE_OK) {
		const char *m = archive_error_string(rs->a);
		r = brig__error_set(err, BRIG_ECORRUPT, 0, "checkpoint blob %s cannot be decoded: %s", shown,
				    m ? m : "empty");
		brig_tar_restore_free(rs);
		return r;
	}
	*out = rs;
	return 0;
}

ssize_t brig_tar_restore_read(brig_tar_restore *r, char *buf, size_t len, brig_error **err)
{
	if (r->code)
		return brig_tar__error_copy(err, r->err, r->code);
	if (r->at_end || len == 0)
		return 0;
	la_ssize_t n = archive_read_data(r->a, buf, len);
	if (n < 0) {
		const char *m = archive_error_string(r->a);
		r->code = brig__error_set(&r->err, BRIG_ECORRUPT, 0, "checkpoint blob cannot be decoded: %s",
					  m ? m : "?");
		return brig_tar__error_copy(err, r->err, r->code);
	}
	if (n > 0)
		return n;
	/* The end: hash whatever the decoder left unread, then compare. */
	for (;;) {
		ssize_t k = read(r->fd, r->buf, BRIG_TAR__IOBUF);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r->code = brig__error_set(&r->err, BRIG_EIO, errno, "reading the checkpoint blob: %s",
						  strerror(errno));
			return brig_tar__error_copy(err, r->err, r->code);
		}
		if (k == 0)
			break;
		EVP_DigestUpdate(r->md, r->buf, (size_t)k);
	}
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	char got[65];
	EVP_DigestFinal_ex(r->md, d, &dlen);
	brig_hex(got, d, dlen);
	if (strcmp(got, r->want) != 0) {
		r->code = brig__error_set(&r->err, BRIG_ECORRUPT, 0,
					  "checkpoint blob changed while it was being restored (SHA-256 %s, not %s)",
					  got, r->want);
		return brig_tar__error_copy(err, r->err, r->code);
	}
	r->at_end = true;
	return 0;
}

ssize_t brig_tar_restore_reader(char *buf, size_t len, void *payload, brig_error **err)
{
	return brig_tar_restore_read(payload, buf, len, err);
}

void brig_tar_restore_free(brig_tar_restore *r)
{
	if (!r)
		return;
	if (r->a)
		archive_read_free(r->a);
	if (r->fd >= 0)
		close(r->fd);
	EVP_MD_CTX_free(r->md);
	free(r->buf);
	brig_error_free(r->err);
	free(r);
}
