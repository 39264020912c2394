/* routes_archive.c — tar in and out of a computer through brig-init, so as
 * the computer's own user (uid 1000), never as root through Docker's archive
 * API; every tar passes brig's checker (no "..", no absolute names, no links
 * leaving the tree, no devices, size caps). Tar out is streamed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/internal.h"
#include "tar/tar.h"
#include "util/util.h"

#define CHUNK ((size_t)1 << 20)           /* bytes of one READ: what a request holds in memory */
#define GUEST_MS 120000                   /* one brig-init call */
#define ARCHIVE_DEPTH 64                  /* levels below the path a tar out walks (brig-init's LIST) */
#define OUT_MAX_BYTES (UINT64_C(1) << 30) /* sum of file sizes of one tar out */

/* The computer's brig-init, lent; NULL with *out answered when it has none. */
static brig_guest *lend_guest(serve_req *r, serve_reply *out, const char *name)
{
	brig_guest *g = NULL;
	brig_error *err = NULL;
	if (serve__guest(r->srv, name, &g, &err) != 0) {
		serve__reply_error(out, err);
		return NULL;
	}
	if (!g)
		serve__reply_fail(out, 409, "state",
				  "computer %s was created before brig-init: tar in and out go through brig-init; "
				  "make a new generation (recover, or create with fresh)",
				  name);
	return g;
}

/* ---- tar out: brig-init lists (links never followed) and reads as uid
 * 1000; a tar is written of what it sends, through the copier, into a pipe
 * the reply reads ---- */

typedef struct tar_out {
	serve_server *srv;
	brig_guest *g; /* lent */
	char *root;    /* absolute path in the computer */
	char *base;    /* its name in the tar */
	json_t *root_st, *entries;
	int pipe[2];
	int client;
	int stop; /* the server's cancel fd */
	pthread_t th;
	bool started;
	volatile bool failed; /* the reply is cut instead of ended */
	brig_tar_copy *c;
	brig_buf chunk;
} tar_out;

/* width-1 octal digits and a NUL, as ustar's numeric fields (values here fit). */
static void octal(char *field, size_t width, uint64_t v)
{
	field[width - 1] = '\0';
	for (size_t i = width - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

static int feed(tar_out *x, const void *p, size_t n, brig_error **err)
{
	return brig_tar_copy_feed(x->c, p, n, err);
}

static int pad(tar_out *x, uint64_t size, brig_error **err)
{
	static const char zeros[512];
	size_t k = (size_t)((512 - size % 512) % 512);
	return k ? feed(x, zeros, k, err) : 0;
}

static int header(tar_out *x, const char *name, char type, uint64_t size, unsigned mode, int64_t mtime,
		  const char *link, brig_error **err)
{
	char h[512];
	int rc;
	if (strlen(name) > 99 || (link && strlen(link) > 99)) {
		/* pax records for what ustar's fields cannot hold */
		brig_buf px;
		brig_buf_init(&px, 3 * 4096 + 64);
		const char *keys[2] = {"path", "linkpath"}, *vals[2] = {name, link};
		for (int i = 0; i < 2; i++) {
			if (!vals[i])
				continue;
			size_t body = strlen(keys[i]) + strlen(vals[i]) + 3; /* " k=v\n" without the length */
			size_t len = body + 1;
			while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
				len = body + (size_t)snprintf(NULL, 0, "%zu", len);
			brig_buf_putf(&px, "%zu %s=%s\n", len, keys[i], vals[i]);
		}
		size_t n;
		cleanup_free char *data = brig_buf_steal(&px, &n);
		if ((rc = header(x, "././@PaxHeader", 'x', n, 0644, mtime, NULL, err)) ||
		    (rc = feed(x, data, n, err)) || (rc = pad(x, n, err)))
			return rc;
	}
	memset(h, 0, sizeof h);
	snprintf(h, 100, "%.99s", name);
	octal(h + 100, 8, mode & 0777);
	octal(h + 108, 8, 1000);
	octal(h + 116, 8, 1000);
	octal(h + 124, 12, size);
	octal(h + 136, 12, mtime > 0 ? (uint64_t)mtime : 0);
	h[156] = type;
	if (link)
		snprintf(h + 157, 100, "%.99s", link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < sizeof h; i++)
		sum += (unsigned char)h[i];
	octal(h + 148, 7, sum); /* six digits, NUL, and the space left from above */
	return feed(x, h, sizeof h, err);
}

static int chunk_cb(const char *data, size_t len, void *payload)
{
	return brig_buf_add(payload, data, len) ? BRIG_ETOOBIG : 0;
}

/* One READ of up to CHUNK bytes at off into x->chunk. */
static int read_chunk(tar_out *x, const char *path, uint64_t off, uint64_t want, brig_error **err)
{
	brig_buf_free(&x->chunk);
	brig_buf_init(&x->chunk, CHUNK);
	return brig_guest_read(x->g, path, (int64_t)off, (int64_t)(want < CHUNK ? want : CHUNK), chunk_cb, &x->chunk,
			       brig_now_ms() + GUEST_MS, err);
}

/* One entry (st: brig-init's stat of it). Files brig-init cannot read as
 * uid 1000 (root's own), and fifos, sockets and devices, are left out. */
static int emit(tar_out *x, const char *name, const char *path, json_t *st, brig_error **err)
{
	const char *type = json_string_value(json_object_get(st, "type"));
	unsigned mode = (unsigned)json_integer_value(json_object_get(st, "mode"));
	int64_t mtime = json_integer_value(json_object_get(st, "mtime_ns")) / 1000000000;
	if (!type)
		return 0;
	if (strcmp(type, "dir") == 0)
		return header(x, name, '5', 0, mode, mtime, NULL, err);
	if (strcmp(type, "symlink") == 0) {
		const char *link = json_string_value(json_object_get(st, "link"));
		return link && *link ? header(x, name, '2', 0, mode, mtime, link, err) : 0;
	}
	if (strcmp(type, "file") != 0)
		return 0;
	json_int_t sz = json_integer_value(json_object_get(st, "size"));
	uint64_t size = sz > 0 ? (uint64_t)sz : 0, got = 0;
	int rc = 0;
	if (size) {
		brig_error *e = NULL;
		rc = read_chunk(x, path, 0, size, &e);
		if (rc == BRIG_EDENIED || rc == BRIG_ENOTFOUND || rc == BRIG_EINVAL) {
			brig_error_free(e); /* not readable as uid 1000, gone, or no longer a file */
			return 0;
		}
		if (rc) {
			*err = e;
			return rc;
		}
	}
	if ((rc = header(x, name, '0', size, mode, mtime, NULL, err)))
		return rc;
	while (got < size) {
		if (got && (rc = read_chunk(x, path, got, size - got, err)))
			return rc;
		size_t n = x->chunk.len;
		if (!n)
			break; /* the file shrank: zeros below */
		if ((rc = feed(x, x->chunk.data, n, err)))
			return rc;
		got += n;
	}
	static const char zeros[4096];
	while (got < size) {
		size_t k = size - got < sizeof zeros ? (size_t)(size - got) : sizeof zeros;
		if ((rc = feed(x, zeros, k, err)))
			return rc;
		got += k;
	}
	return pad(x, size, err);
}

static void *tar_out_thread(void *arg)
{
	tar_out *x = arg;
	brig_tar_copy_opts o = BRIG_TAR_COPY_OPTS_INIT;
	o.allow_symlinks = true;
	o.allow_absolute_symlinks = true; /* the tar goes to the client, never onto this host */
	o.limits.max_total_bytes = OUT_MAX_BYTES;
	brig_error *err = NULL;
	int rc = brig_tar_copy_new(&x->c, &o, brig_tar_write_fd, &x->pipe[1], &err);
	if (!rc)
		rc = emit(x, x->base, x->root, x->root_st, &err);
	size_t i;
	json_t *e;
	json_array_foreach (x->entries, i, e) {
		if (rc)
			break;
		const char *rel = json_string_value(json_object_get(e, "name"));
		if (!rel)
			continue;
		cleanup_free char *name = xasprintf("%s/%s", x->base, rel);
		cleanup_free char *path = xasprintf("%s/%s", x->root, rel);
		rc = emit(x, name, path, e, &err);
	}
	static const char end[1024];
	if (!rc)
		rc = feed(x, end, sizeof end, &err);
	if (!rc)
		rc = brig_tar_copy_finish(x->c, NULL, &err);
	if (rc) {
		x->failed = true;
		fprintf(stderr, "brig: serve: tar out of %s cut short: %s\n", x->root, brig_error_message(err));
	}
	brig_error_free(err);
	brig_tar_copy_free(x->c);
	x->c = NULL;
	close(x->pipe[1]);
	x->pipe[1] = -1;
	return NULL;
}

static ssize_t tar_out_read(void *payload, char *buf, size_t max)
{
	tar_out *x = payload;
	ssize_t n = serve__pipe_read(x->pipe[0], x->client, x->stop, buf, max);
	if (n == -2)
		return -1;                   /* the drain period is over: cut */
	return n == 0 && x->failed ? -1 : n; /* a cut tar must not look whole */
}

static void tar_out_free(tar_out *x)
{
	if (x->pipe[0] >= 0)
		close(x->pipe[0]); /* the copier's writes now fail: the thread ends */
	if (x->started)
		pthread_join(x->th, NULL);
	if (x->pipe[1] >= 0)
		close(x->pipe[1]);
	serve__guest_release(x->srv, x->g);
	brig_buf_free(&x->chunk);
	json_decref(x->root_st);
	json_decref(x->entries);
	free(x->root);
	free(x->base);
	free(x);
}

static void tar_out_done(void *payload)
{
	tar_out_free(payload);
}

void serve__h_archive_get(serve_req *r, serve_reply *out)
{
	cleanup_free char *name = NULL, *path = NULL;
	if (!serve__path_computer(r, out, &name) || !(path = serve__query_path(r, out, "path")))
		return;
	size_t pl = strlen(path);
	while (pl > 1 && path[pl - 1] == '/')
		path[--pl] = '\0';
	const char *base = strrchr(path, '/') + 1;
	if (!*base || strcmp(base, ".") == 0) {
		serve__reply_fail(out, 400, "invalid", "path: give a file or directory below /");
		return;
	}
	brig_guest *g = lend_guest(r, out, name);
	if (!g)
		return;
	tar_out *x = xcalloc(1, sizeof *x);
	x->srv = r->srv;
	x->g = g;
	x->root = steal_pointer(&path);
	x->base = xstrdup(base);
	x->client = serve__client_fd(r);
	x->stop = serve__cancel_fd(r);
	x->pipe[0] = x->pipe[1] = -1;
	brig_buf_init(&x->chunk, CHUNK);
	brig_error *err = NULL;
	/* Looked at before the answer starts, so a missing path is a 404;
	 * the path itself is not followed either (a link is sent as a link). */
	int rc = brig_guest_stat(g, &x->root_st, x->root, true, brig_now_ms() + GUEST_MS, &err);
	const char *type = rc ? NULL : json_string_value(json_object_get(x->root_st, "type"));
	if (!rc && type && strcmp(type, "dir") == 0)
		rc = brig_guest_list(g, &x->entries, x->root, ARCHIVE_DEPTH, brig_now_ms() + GUEST_MS, &err);
	if (!rc && pipe2(x->pipe, O_CLOEXEC) != 0)
		rc = brig__error_set(&err, BRIG_EIO, errno, "pipe: %s", strerror(errno));
	if (rc) {
		tar_out_free(x);
		serve__reply_error(out, err);
		return;
	}
	x->started = pthread_create(&x->th, NULL, tar_out_thread, x) == 0;
	if (!x->started) {
		x->failed = true;
		close(x->pipe[1]);
		x->pipe[1] = -1;
	}
	out->status = 200;
	out->type = "application/x-tar";
	out->read = tar_out_read;
	out->done = tar_out_done;
	out->payload = x;
}

/* ---- tar in: checked and unpacked into a private directory on this
 * host (no links, no devices), then written file by file through
 * brig-init as uid 1000 ---- */

typedef struct tar_in {
	brig_guest *g;
	const char *dest; /* directory in the computer */
	const char *tmp;  /* the unpacked tree here */
	json_t *modes;    /* name below tmp → the mode the tar gave, where unlock_tree changed it */
	brig_error *err;
	int rc;
} tar_in;

#define STAGE_DEPTH 2048 /* levels of the unpacked tree (a name is at most 4096 bytes) */

/* The unpacked tree is this process's own, but the extractor gave it the
 * tar's modes: a directory of mode 0000 could be neither walked nor emptied
 * when serve is not root. Directories get u+rwx and files u+r here; the
 * modes the tar gave are kept in modes (NULL: not kept) for the computer.
 * dfd is taken. */
static int unlock_tree(int dfd, const char *rel, json_t *modes, unsigned depth, brig_error **err)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return brig__error_set(err, BRIG_EIO, e, "tar in: staging %s: %s", *rel ? rel : "/", strerror(e));
	}
	int rc = 0;
	struct dirent *e;
	while (!rc && (errno = 0, e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		cleanup_free char *sub = xasprintf("%s/%s", rel, e->d_name);
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			rc = brig__error_set(err, BRIG_EIO, errno, "tar in: staging %s: %s", sub, strerror(errno));
			break;
		}
		mode_t want = S_ISDIR(st.st_mode) ? 0700 : S_ISREG(st.st_mode) ? 0400 : 0;
		if ((st.st_mode & want) != want) {
			if (modes)
				json_object_set_new(modes, sub, json_integer(st.st_mode & 0777));
			if (fchmodat(dirfd(d), e->d_name, (st.st_mode & 07777) | want, 0) != 0) {
				rc = brig__error_set(err, BRIG_EIO, errno, "tar in: staging %s: %s", sub,
						     strerror(errno));
				break;
			}
		}
		if (!S_ISDIR(st.st_mode))
			continue;
		if (depth >= STAGE_DEPTH) {
			rc = brig__error_set(err, BRIG_ETOOBIG, 0, "tar in: more than %d levels of directories",
					     STAGE_DEPTH);
			break;
		}
		int sfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0)
			rc = brig__error_set(err, BRIG_EIO, errno, "tar in: staging %s: %s", sub, strerror(errno));
		else
			rc = unlock_tree(sfd, sub, modes, depth + 1, err);
	}
	if (!rc && errno)
		rc = brig__error_set(err, BRIG_EIO, errno, "tar in: staging %s: %s", *rel ? rel : "/", strerror(errno));
	closedir(d);
	return rc;
}

static __thread tar_in *tin; /* nftw has no payload */

static int put_one(const char *hpath, const struct stat *st, int flag, struct FTW *ftw)
{
	tar_in *t = tin;
	if (flag == FTW_DNR || flag == FTW_NS) {
		/* never skipped: what was not written must not be answered 204 */
		t->rc = brig__error_set(&t->err, BRIG_EIO, 0, "tar in: cannot %s the unpacked %s",
					flag == FTW_DNR ? "read" : "stat", hpath + strlen(t->tmp));
		return 1;
	}
	if (ftw->level == 0)
		return 0;
	cleanup_free char *gpath = xasprintf("%s%s", t->dest, hpath + strlen(t->tmp));
	json_t *given = json_object_get(t->modes, hpath + strlen(t->tmp));
	unsigned mode = given ? (unsigned)json_integer_value(given) : (unsigned)st->st_mode & 0777;
	int64_t deadline = brig_now_ms() + GUEST_MS;
	if (S_ISDIR(st->st_mode)) {
		/* brig-init cannot change a mode later (the extractor sets a
		 * directory's at the end): the owner keeps rwx, so it can be filled */
		t->rc = brig_guest_mkdir(t->g, gpath, mode | 0700, true, deadline, &t->err);
	} else if (S_ISREG(st->st_mode)) {
		int fd = open(hpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			t->rc = brig__error_set(&t->err, BRIG_EIO, errno, "tar in: %s: %s", hpath, strerror(errno));
		else
			t->rc = brig_guest_write(t->g, gpath, fd, NULL, 0, mode, false, deadline, &t->err);
		if (fd >= 0)
			close(fd);
	} else if (S_ISLNK(st->st_mode)) {
		/* the extractor kept only links that stay inside the tree; an
		 * existing entry is replaced, as Docker's archive PUT does */
		char link[4096];
		ssize_t n = readlink(hpath, link, sizeof link - 1);
		if (n <= 0) {
			t->rc = brig__error_set(&t->err, BRIG_EIO, errno, "tar in: %s: %s", hpath, strerror(errno));
		} else {
			link[n] = '\0';
			brig_error *rerr = NULL;
			if (brig_guest_remove(t->g, gpath, false, deadline, &rerr) == BRIG_EUNCERTAIN)
				t->rc = BRIG_EUNCERTAIN, t->err = rerr;
			else
				brig_error_free(rerr);
			if (!t->rc)
				t->rc = brig_guest_symlink(t->g, gpath, link, deadline, &t->err);
		}
	}
	return t->rc ? 1 : 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	if (remove(path) != 0)
		fprintf(stderr, "brig: serve: tar in: removing the staged %s: %s\n", path, strerror(errno));
	return 0;
}

/* The unpacked tree removed, whatever modes the tar gave it. */
static void stage_remove(const char *dir)
{
	brig_error *err = NULL;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && unlock_tree(fd, "", NULL, 0, &err) != 0) {
		fprintf(stderr, "brig: serve: %s\n", brig_error_message(err));
		brig_error_free(err);
	}
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The spooled body (ROUTE_SPOOL), read from its start. */
static ssize_t body_read(char *buf, size_t len, void *payload, brig_error **err)
{
	ssize_t n;
	while ((n = read(*(int *)payload, buf, len)) < 0 && errno == EINTR)
		;
	if (n < 0)
		brig__error_set(err, BRIG_EIO, errno, "tar in: reading the body back: %s", strerror(errno));
	return n;
}

void serve__h_archive_put(serve_req *r, serve_reply *out)
{
	cleanup_free char *name = NULL, *path = NULL;
	if (!serve__path_computer(r, out, &name) || !(path = serve__query_path(r, out, "path")))
		return;
	brig_guest *g = lend_guest(r, out, name);
	if (!g)
		return;
	brig_error *err = NULL;
	json_t *st = NULL;
	int rc = brig_guest_stat(g, &st, path, false, brig_now_ms() + GUEST_MS, &err);
	const char *type = rc ? NULL : json_string_value(json_object_get(st, "type"));
	if (!rc && (!type || strcmp(type, "dir") != 0))
		rc = brig__error_set(&err, BRIG_EINVAL, 0, "tar in: %s is not a directory", path);
	json_decref(st);
	const char *tmpdir = getenv("TMPDIR");
	cleanup_free char *tmpl = xasprintf("%s/brig-serve-tar-XXXXXX", tmpdir && *tmpdir == '/' ? tmpdir : "/tmp");
	char *dir = rc ? NULL : mkdtemp(tmpl);
	if (!rc && !dir)
		rc = brig__error_set(&err, BRIG_EIO, errno, "mkdtemp: %s", strerror(errno));
	if (!rc) {
		/* Symlinks only when they stay inside the tree (the extractor's
		 * rule); hardlinks and devices are refused. */
		brig_tar_extract_opts o = BRIG_TAR_EXTRACT_OPTS_INIT;
		o.allow_symlinks = true;
		brig_tar_extract *x = NULL;
		int bfd = serve__body_fd(r);
		rc = bfd < 0 ? brig__error_set(&err, BRIG_EIO, errno, "tar in: reading the body back: %s", strerror(errno))
			     : brig_tar_extract_new(&x, AT_FDCWD, dir, &o, &err);
		if (!rc)
			rc = brig_tar_extract_from_reader(x, body_read, &bfd, &err);
		brig_tar_extract_free(x);
		if (rc == BRIG_EUNSAFE)
			brig__error_prefix(
				&err, rc,
				"tar in (hardlinks, devices, absolute or '..' names and links leaving the tree "
				"are refused)");
		if (rc == BRIG_EPROTO) {
			/* the client's bytes, not a peer's: a bad request */
			serve__reply_fail(out, 400, "invalid", "tar in: %s", brig_error_message(err));
			brig_error_free(err);
			stage_remove(dir);
			serve__guest_release(r->srv, g);
			return;
		}
	}
	json_t *modes = json_object();
	if (!rc) {
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		rc = fd < 0 ? brig__error_set(&err, BRIG_EIO, errno, "tar in: staging: %s", strerror(errno))
			    : unlock_tree(fd, "", modes, 0, &err);
	}
	if (!rc) {
		tar_in t = {.g = g, .dest = strcmp(path, "/") ? path : "", .tmp = dir, .modes = modes};
		tin = &t;
		if (nftw(dir, put_one, 16, FTW_PHYS) != 0 && !t.rc)
			t.rc = brig__error_set(&t.err, BRIG_EIO, errno, "tar in: walking the unpacked tar: %s",
					       strerror(errno));
		tin = NULL;
		rc = t.rc;
		err = t.err;
	}
	json_decref(modes);
	if (dir)
		stage_remove(dir);
	serve__guest_release(r->srv, g);
	if (rc) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}
