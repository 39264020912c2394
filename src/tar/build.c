/* build.c — the builder: host files, directories and in-memory entries
 * turned into a tar stream on demand, one bounded step per pull. */
#include "tar/tar_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SRC_PATH, SRC_FILE, SRC_DIR, SRC_SYMLINK };

typedef struct build_src {
	int kind;
	char *name; /* normalised archive name */
	char *host; /* SRC_PATH */
	char *data; /* SRC_FILE contents, SRC_SYMLINK target */
	size_t len;
	unsigned mode;
} build_src;

typedef struct build_frame {
	int dfd;
	char *name; /* archive name of this directory */
	char *host; /* host path, for messages */
	char **kids;
	size_t n, i;
} build_frame;

struct brig_tar_builder {
	brig_tar_build_opts opts;
	build_src *srcs;
	size_t nsrcs, next_src;
	build_frame *stack;
	size_t nstack, stack_alloc;
	/* the regular file being streamed: from fd, or from memory */
	int file_fd;
	const char *file_mem;
	uint64_t file_left;
	uint64_t file_size;         /* as written into the header */
	struct timespec file_mtime; /* likewise */
	char *file_host;
	struct archive *a;
	struct archive_entry *ae;
	char *out;
	size_t out_len, out_off, out_alloc;
	bool started, closed;
	int code;
	brig_error *err;
	char *iobuf;
	uint64_t entries, bytes;
	brig_tar_stats stats;
};

static la_ssize_t out_write(struct archive *a, void *payload, const void *buf, size_t n)
{
	brig_tar_builder *b = payload;
	if (b->out_off == b->out_len)
		b->out_off = b->out_len = 0;
	if (b->out_len + n > b->out_alloc) {
		size_t want = b->out_alloc ? b->out_alloc : 65536;
		while (want < b->out_len + n)
			want *= 2;
		b->out = xrealloc(b->out, want);
		b->out_alloc = want;
	}
	memcpy(b->out + b->out_len, buf, n);
	b->out_len += n;
	return (la_ssize_t)n;
}

/* Archive names given by the caller: relative, no "..", normalised. */
static int normalise_name(const char *name, char **out, brig_error **err)
{
	if (!name || !*name)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: empty archive name");
	cleanup_free char *q = brig_tar__quote(name);
	if (name[0] == '/')
		return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: archive name %s must be relative", q);
	brig_buf b;
	brig_buf_init(&b, SIZE_MAX / 2);
	for (const char *p = name; *p;) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			brig_buf_free(&b);
			return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: archive name %s has a \"..\"", q);
		}
		if (len > BRIG_TAR__NAME_MAX) {
			brig_buf_free(&b);
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "tar builder: archive name %s has a component over %d bytes", q,
					       BRIG_TAR__NAME_MAX);
		}
		if (len && !(len == 1 && p[0] == '.')) {
			/* Never longer than name; the cap is memory's. */
			int r = b.len ? brig_buf_add(&b, "/", 1) : 0;
			if (!r)
				r = brig_buf_add(&b, p, len);
			if (r) {
				brig_buf_free(&b);
				return brig__error_set(err, r, 0, "tar builder: archive name %s is too long", q);
			}
		}
		p += len;
		if (*p == '/')
			p++;
	}
	if (!b.len) {
		brig_buf_free(&b);
		return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: archive name %s names the root", q);
	}
	*out = brig_buf_steal(&b, NULL);
	return 0;
}

int brig_tar_builder_new(brig_tar_builder **out, const brig_tar_build_opts *opts, brig_error **err)
{
	*out = NULL;
	brig_tar_build_opts defaults = BRIG_TAR_BUILD_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int vr = brig__opts_check(opts->version, BRIG_TAR_BUILD_OPTS_VERSION, "tar build options", err);
	if (vr)
		return vr;
	int r = brig__archive_load(err);
	if (r)
		return r;
	brig_tar_builder *b = xcalloc(1, sizeof *b);
	b->opts = *opts;
	if (!b->opts.mode_mask)
		b->opts.mode_mask = 0777;
	b->file_fd = -1;
	*out = b;
	return 0;
}

static int add_src(brig_tar_builder *b, build_src *s, const char *name, brig_error **err)
{
	if (b->started)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: sources must be added before reading");
	int r = normalise_name(name, &s->name, err);
	if (r)
		return r;
	b->srcs = xrealloc(b->srcs, (b->nsrcs + 1) * sizeof *b->srcs);
	b->srcs[b->nsrcs++] = *s;
	return 0;
}

int brig_tar_builder_add_path(brig_tar_builder *b, const char *host_path, const char *name, brig_error **err)
{
	struct stat st;
	if (!host_path || !*host_path)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: empty host path");
	int sr = b->opts.deref_roots ? stat(host_path, &st) : lstat(host_path, &st);
	if (sr < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", host_path, strerror(errno));
	build_src s = {.kind = SRC_PATH, .host = xstrdup(host_path)};
	int r = add_src(b, &s, name, err);
	if (r)
		free(s.host);
	return r;
}

int brig_tar_builder_add_file(brig_tar_builder *b, const char *name, const void *data, size_t len, unsigned mode,
			      brig_error **err)
{
	build_src s = {.kind = SRC_FILE, .mode = mode, .len = len};
	s.data = xmalloc(len ? len : 1);
	if (len)
		memcpy(s.data, data, len);
	int r = add_src(b, &s, name, err);
	if (r)
		free(s.data);
	return r;
}

int brig_tar_builder_add_dir(brig_tar_builder *b, const char *name, unsigned mode, brig_error **err)
{
	build_src s = {.kind = SRC_DIR, .mode = mode};
	return add_src(b, &s, name, err);
}

int brig_tar_builder_add_symlink(brig_tar_builder *b, const char *name, const char *target, brig_error **err)
{
	if (!target || !*target)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar builder: empty symlink target");
	build_src s = {.kind = SRC_SYMLINK, .data = xstrdup(target)};
	int r = add_src(b, &s, name, err);
	if (r)
		free(s.data);
	return r;
}

static int write_error(brig_tar_builder *b, const char *what)
{
	const char *m = archive_error_string(b->a);
	return brig__error_set(&b->err, BRIG_EIO, archive_errno(b->a), "tar builder: %s: %s", what,
			       m ? m : "libarchive failed");
}

/* Writes one header; kind is AE_IF*. */
static int header(brig_tar_builder *b, const char *name, unsigned kind, unsigned mode, uint64_t size,
		  const struct timespec *mtime, const char *symlink)
{
	if (b->opts.max_entries && b->entries >= b->opts.max_entries)
		return brig__error_set(&b->err, BRIG_ETOOBIG, 0, "tar builder: more than %llu entries",
				       (unsigned long long)b->opts.max_entries);
	if (b->opts.max_total_bytes && size > b->opts.max_total_bytes - b->bytes) {
		cleanup_free char *q = brig_tar__quote(name);
		return brig__error_set(&b->err, BRIG_ETOOBIG, 0,
				       "tar builder: %s would bring the total past %llu bytes, the cap", q,
				       (unsigned long long)b->opts.max_total_bytes);
	}
	b->entries++;
	b->bytes += size;
	struct archive_entry *ae = b->ae;
	archive_entry_clear(ae);
	archive_entry_copy_pathname(ae, name);
	archive_entry_set_filetype(ae, kind);
	archive_entry_set_perm(ae, (mode & 0777) & b->opts.mode_mask);
	archive_entry_set_uid(ae, b->opts.uid);
	archive_entry_set_gid(ae, b->opts.gid);
	archive_entry_set_size(ae, (la_int64_t)size);
	if (mtime)
		archive_entry_set_mtime(ae, mtime->tv_sec, mtime->tv_nsec);
	if (symlink)
		archive_entry_copy_symlink(ae, symlink);
	/* ARCHIVE_WARN: a name that is not UTF-8 went out as raw bytes. */
	if (archive_write_header(b->a, ae) < ARCHIVE_WARN)
		return write_error(b, "writing a header");
	b->stats.entries++;
	switch (kind) {
	case AE_IFREG:
		b->stats.files++;
		b->stats.bytes += size;
		break;
	case AE_IFDIR: b->stats.dirs++; break;
	default: b->stats.symlinks++; break;
	}
	return 0;
}

static int cmp_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static int list_dir(brig_tar_builder *b, int dfd, const char *host, char ***out, size_t *n)
{
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return brig__error_set(&b->err, BRIG_EIO, e, "cannot list %s: %s", host, strerror(e));
	}
	char **kids = NULL;
	size_t cnt = 0, alloc = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (cnt == alloc) {
			alloc = alloc ? alloc * 2 : 16;
			kids = xrealloc(kids, alloc * sizeof *kids);
		}
		kids[cnt++] = xstrdup(de->d_name);
		errno = 0;
	}
	int e = errno;
	closedir(d);
	if (e) {
		for (size_t i = 0; i < cnt; i++)
			free(kids[i]);
		free(kids);
		return brig__error_set(&b->err, BRIG_EIO, e, "cannot list %s: %s", host, strerror(e));
	}
	if (cnt)
		qsort(kids, cnt, sizeof *kids, cmp_names);
	*out = kids;
	*n = cnt;
	return 0;
}

/* Once the size in the header is read: the file must end there and be as
 * it was when the header went out, or the tar would hold a cut or mixed
 * copy without a word. */
static int file_unchanged(brig_tar_builder *b, int fd, const char *host, uint64_t size, const struct timespec *mtime)
{
	char c;
	ssize_t n;
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return brig__error_set(&b->err, BRIG_EIO, errno, "cannot read %s: %s", host, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0)
		return brig__error_set(&b->err, BRIG_EIO, errno, "cannot read %s: %s", host, strerror(errno));
	if (n > 0 || (uint64_t)st.st_size != size || st.st_mtim.tv_sec != mtime->tv_sec ||
	    st.st_mtim.tv_nsec != mtime->tv_nsec)
		return brig__error_set(&b->err, BRIG_EIO, 0, "%s changed while it was being read; copy it again",
				       host);
	return 0;
}

/* Emits the host object `name` under directory dfd as archive name arc. */
static int emit_host(brig_tar_builder *b, int dfd, const char *name, const char *arc, const char *host, bool deref)
{
	struct stat st;
	if (fstatat(dfd, name, &st, deref ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return brig__error_set(&b->err, BRIG_EIO, errno, "cannot read %s: %s", host, strerror(errno));
	int nofollow = deref ? 0 : O_NOFOLLOW;
	if (S_ISREG(st.st_mode)) {
		/* O_NONBLOCK: a FIFO swapped in after the stat must not hang us. */
		int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | nofollow);
		if (fd < 0)
			return brig__error_set(&b->err, BRIG_EIO, errno, "cannot open %s: %s", host, strerror(errno));
		struct stat st2;
		if (fstat(fd, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino ||
		    st2.st_dev != st.st_dev) {
			close(fd);
			return brig__error_set(&b->err, BRIG_EIO, 0, "%s changed while it was being read", host);
		}
		int r = header(b, arc, AE_IFREG, st2.st_mode, (uint64_t)st2.st_size, &st2.st_mtim, NULL);
		if (r) {
			close(fd);
			return r;
		}
		if (st2.st_size == 0) {
			r = file_unchanged(b, fd, host, 0, &st2.st_mtim);
			close(fd);
			return r;
		}
		b->file_fd = fd;
		b->file_left = (uint64_t)st2.st_size;
		b->file_size = (uint64_t)st2.st_size;
		b->file_mtime = st2.st_mtim;
		free(b->file_host);
		b->file_host = xstrdup(host);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow);
		if (fd < 0)
			return brig__error_set(&b->err, BRIG_EIO, errno, "cannot open %s: %s", host, strerror(errno));
		char **kids = NULL;
		size_t n = 0;
		int r = header(b, arc, AE_IFDIR, st.st_mode, 0, &st.st_mtim, NULL);
		if (!r)
			r = list_dir(b, fd, host, &kids, &n);
		if (r) {
			close(fd);
			return r;
		}
		if (b->nstack == b->stack_alloc) {
			b->stack_alloc = b->stack_alloc ? b->stack_alloc * 2 : 8;
			b->stack = xrealloc(b->stack, b->stack_alloc * sizeof *b->stack);
		}
		b->stack[b->nstack++] =
			(build_frame){.dfd = fd, .name = xstrdup(arc), .host = xstrdup(host), .kids = kids, .n = n};
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX + 1];
		ssize_t n = readlinkat(dfd, name, target, sizeof target);
		if (n < 0 || (size_t)n >= sizeof target)
			return brig__error_set(&b->err, BRIG_EIO, n < 0 ? errno : ENAMETOOLONG,
					       "cannot read the symlink %s", host);
		target[n] = '\0';
		return header(b, arc, AE_IFLNK, 0777, 0, &st.st_mtim, target);
	}
	if (b->opts.skip_special)
		return 0;
	const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device node";
	return brig__error_set(&b->err, BRIG_EINVAL, 0,
			       "cannot copy %s: it is %s (only files, directories and symlinks are copied)", host,
			       what);
}

static int stream_chunk(brig_tar_builder *b)
{
	size_t want = b->file_left < BRIG_TAR__IOBUF ? (size_t)b->file_left : BRIG_TAR__IOBUF;
	const char *p;
	ssize_t n;
	if (b->file_mem) {
		p = b->file_mem;
		n = (ssize_t)want;
		b->file_mem += want;
	} else {
		if (!b->iobuf)
			b->iobuf = xmalloc(BRIG_TAR__IOBUF);
		do
			n = read(b->file_fd, b->iobuf, want);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return brig__error_set(&b->err, BRIG_EIO, errno, "cannot read %s: %s", b->file_host,
					       strerror(errno));
		if (n == 0)
			return brig__error_set(&b->err, BRIG_EIO, 0, "%s shrank while it was being read; copy it again",
					       b->file_host);
		p = b->iobuf;
	}
	if (archive_write_data(b->a, p, (size_t)n) != n)
		return write_error(b, "writing data");
	b->file_left -= (uint64_t)n;
	if (b->file_left == 0) {
		int r = 0;
		if (b->file_fd >= 0) {
			r = file_unchanged(b, b->file_fd, b->file_host, b->file_size, &b->file_mtime);
			close(b->file_fd);
		}
		b->file_fd = -1;
		b->file_mem = NULL;
		return r;
	}
	return 0;
}

static char *join_arc(const char *dir, const char *name)
{
	return xasprintf("%s/%s", dir, name);
}

/* One bounded step of generation. */
static int advance(brig_tar_builder *b)
{
	if (b->file_left)
		return stream_chunk(b);
	if (b->nstack) {
		build_frame *f = &b->stack[b->nstack - 1];
		if (f->i == f->n) {
			close(f->dfd);
			for (size_t i = 0; i < f->n; i++)
				free(f->kids[i]);
			free(f->kids);
			free(f->name);
			free(f->host);
			b->nstack--;
			return 0;
		}
		const char *kid = f->kids[f->i++];
		cleanup_free char *arc = join_arc(f->name, kid);
		cleanup_free char *host = join_arc(f->host, kid);
		return emit_host(b, f->dfd, kid, arc, host, false);
	}
	if (b->next_src < b->nsrcs) {
		build_src *s = &b->srcs[b->next_src++];
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		switch (s->kind) {
		case SRC_PATH: return emit_host(b, AT_FDCWD, s->host, s->name, s->host, b->opts.deref_roots);
		case SRC_DIR: return header(b, s->name, AE_IFDIR, s->mode, 0, &now, NULL);
		case SRC_SYMLINK: return header(b, s->name, AE_IFLNK, 0777, 0, &now, s->data);
		default: {
			int r = header(b, s->name, AE_IFREG, s->mode, s->len, &now, NULL);
			if (r)
				return r;
			b->file_mem = s->data;
			b->file_left = s->len;
			return 0;
		}
		}
	}
	if (archive_write_close(b->a) != ARCHIVE_OK)
		return write_error(b, "finishing the archive");
	b->closed = true;
	return 0;
}

static int start(brig_tar_builder *b)
{
	b->started = true;
	b->a = archive_write_new();
	b->ae = archive_entry_new();
	archive_write_set_format_pax_restricted(b->a);
	if (archive_write_open(b->a, b, NULL, out_write, NULL) != ARCHIVE_OK)
		return write_error(b, "starting the archive");
	return 0;
}

ssize_t brig_tar_builder_read(brig_tar_builder *b, char *buf, size_t len, brig_error **err)
{
	if (!b->code && !b->started)
		b->code = start(b);
	while (!b->code && b->out_len == b->out_off && !b->closed)
		b->code = advance(b);
	if (b->code)
		return brig_tar__error_copy(err, b->err, b->code);
	size_t n = b->out_len - b->out_off;
	if (n > len)
		n = len;
	memcpy(buf, b->out + b->out_off, n);
	b->out_off += n;
	return (ssize_t)n;
}

ssize_t brig_tar_builder_reader(char *buf, size_t len, void *payload, brig_error **err)
{
	return brig_tar_builder_read(payload, buf, len, err);
}

const brig_tar_stats *brig_tar_builder_stats(const brig_tar_builder *b)
{
	return &b->stats;
}

void brig_tar_builder_free(brig_tar_builder *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nsrcs; i++) {
		free(b->srcs[i].name);
		free(b->srcs[i].host);
		free(b->srcs[i].data);
	}
	free(b->srcs);
	while (b->nstack) {
		build_frame *f = &b->stack[--b->nstack];
		close(f->dfd);
		for (size_t i = 0; i < f->n; i++)
			free(f->kids[i]);
		free(f->kids);
		free(f->name);
		free(f->host);
	}
	free(b->stack);
	if (b->file_fd >= 0)
		close(b->file_fd);
	free(b->file_host);
	if (b->a)
		archive_write_free(b->a);
	if (b->ae)
		archive_entry_free(b->ae);
	free(b->out);
	free(b->iobuf);
	brig_error_free(b->err);
	free(b);
}
