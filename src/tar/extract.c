/* extract.c — the extractor: untrusted tar entries, once the checker passed
 * them, materialised under a directory fd without ever following a link. */
#include "tar/tar_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { X_IDLE, X_PUSH, X_DONE };

struct brig_tar_extract {
	brig_tar__checker ck;
	bool keep_owners;
	mode_t umask; /* the process's, taken when the extractor was made */
	brig_tar_entry_cb on_entry;
	void *payload;
	int root_fd;
	/* Open directories along the last entry's parent path: stack[i] is the
	 * directory of tree node node[i] (depth i+1). Directories are never
	 * removed or replaced, so a cached fd keeps naming the same place. */
	int *fd;
	uint32_t *node;
	size_t nstack, stack_alloc;
	uint32_t *chain; /* scratch for tree chains */
	size_t chain_alloc;
	int state;
	brig_tar__pump pump;
	bool pump_inited;
	brig_error *cb_err; /* the data_cb adapter's failure */
	int cb_code;
	int code; /* sticky failure, repeated by every later call */
	brig_error *err;
	brig_tar_stats stats;
};

static int sys_error(brig_error **err, int errnum, const char *what, const char *path)
{
	cleanup_free char *q = brig_tar__quote(path);
	int code = errnum == EPERM || errnum == EACCES ? BRIG_EDENIED : BRIG_EIO;
	return brig__error_set(err, code, errnum, "extracting %s: %s: %s", q, what, strerror(errnum));
}

static void stack_pop_to(brig_tar_extract *x, size_t keep)
{
	while (x->nstack > keep) {
		x->nstack--;
		close(x->fd[x->nstack]);
	}
}

static uint32_t *chain_of(brig_tar_extract *x, uint32_t node, size_t *depth)
{
	size_t d = x->ck.tree.nodes[node].depth;
	if (d + 1 > x->chain_alloc) {
		x->chain_alloc = d + 1;
		x->chain = xrealloc(x->chain, x->chain_alloc * sizeof *x->chain);
	}
	*depth = brig_tar__tree_chain(&x->ck.tree, node, x->chain);
	return x->chain;
}

/* Opens one existing or missing directory component below dfd without
 * following a link; a missing one is made (0755 less umask, as tar makes
 * implied parents) and *made (may be NULL) says so. */
static int open_component(int dfd, const char *name, bool create, const char *path, int *out, bool *made,
			  brig_error **err)
{
	bool created = false;
	for (int tries = 0;; tries++) {
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			*out = fd;
			if (made)
				*made = created;
			return 0;
		}
		if (errno == ELOOP || errno == ENOTDIR) {
			cleanup_free char *q = brig_tar__quote(path);
			cleanup_free char *qc = brig_tar__quote(name);
			return brig__error_set(err, BRIG_EUNSAFE, errno,
					       "tar entry %s: path goes through %s, which is a symlink or not a "
					       "directory in the destination",
					       q, qc);
		}
		if (errno != ENOENT || !create || tries)
			return sys_error(err, errno, "cannot open a parent directory", path);
		if (mkdirat(dfd, name, 0755) == 0)
			created = true;
		else if (errno != EEXIST)
			return sys_error(err, errno, "cannot create a parent directory", path);
	}
}

/* The directory of tree node `parent`, opened along the tree and cached on
 * the stack (missing ones made with create); borrowed fd. */
static int parent_fd(brig_tar_extract *x, uint32_t parent, const char *path, bool create, int *out,
		     brig_error **err)
{
	size_t depth;
	uint32_t *chain = chain_of(x, parent, &depth);
	size_t keep = 0;
	while (keep < x->nstack && keep < depth && x->node[keep] == chain[keep])
		keep++;
	stack_pop_to(x, keep);
	if (depth > x->stack_alloc) {
		x->stack_alloc = depth + 8;
		x->fd = xrealloc(x->fd, x->stack_alloc * sizeof *x->fd);
		x->node = xrealloc(x->node, x->stack_alloc * sizeof *x->node);
	}
	for (size_t i = x->nstack; i < depth; i++) {
		int dfd = i ? x->fd[i - 1] : x->root_fd;
		int fd = -1;
		bool made = false;
		int r = open_component(dfd, x->ck.tree.nodes[chain[i]].name, create, path, &fd, &made, err);
		if (r)
			return r;
		if (made)
			x->ck.tree.nodes[chain[i]].made = true;
		x->fd[i] = fd;
		x->node[i] = chain[i];
		x->nstack = i + 1;
	}
	*out = depth ? x->fd[depth - 1] : x->root_fd;
	return 0;
}

/* Makes room for a new non-directory named leaf: an existing file or link
 * (left by the caller, not by this stream: the checker refuses repeats) is
 * removed; an existing directory is never. */
static int clear_leaf(int pfd, const char *leaf, const char *path, brig_error **err)
{
	struct stat st;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : sys_error(err, errno, "cannot inspect the existing entry", path);
	if (S_ISDIR(st.st_mode)) {
		cleanup_free char *q = brig_tar__quote(path);
		return brig__error_set(err, BRIG_EUNSAFE, 0,
				       "tar entry %s: a directory of that name already exists in the destination", q);
	}
	if (unlinkat(pfd, leaf, 0) < 0 && errno != ENOENT)
		return sys_error(err, errno, "cannot replace the existing entry", path);
	return 0;
}

static int pwrite_all(int fd, const char *p, size_t n, off_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

static int write_file(brig_tar_extract *x, struct archive *a, brig_tar__source *src, const brig_tar__item *it, int pfd,
		      brig_error **err)
{
	int fd = -1;
	for (int tries = 0; fd < 0; tries++) {
		fd = openat(pfd, it->leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST || tries)
			return sys_error(err, errno, "cannot create the file", it->path);
		int r = clear_leaf(pfd, it->leaf, it->path, err);
		if (r)
			return r;
	}
	int r = 0;
	uint64_t done = 0; /* blocks must come in order, as the copier needs them */
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int ar = archive_read_data_block(a, &buf, &n, &off);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK) {
			r = brig_tar__archive_error(a, src, err, "reading the data of %s", it->path);
			goto fail;
		}
		if (off < 0 || (uint64_t)off < done || (uint64_t)off > it->size || n > it->size - (uint64_t)off) {
			cleanup_free char *q = brig_tar__quote(it->raw);
			r = brig__error_set(err, BRIG_EPROTO, 0,
					    "tar entry %s: data lies out of order or beyond its declared size", q);
			goto fail;
		}
		done = (uint64_t)off + n;
		if (n && pwrite_all(fd, buf, n, (off_t)off) < 0) {
			r = sys_error(err, errno, "cannot write", it->path);
			goto fail;
		}
	}
	/* A sparse file's trailing hole. */
	if (ftruncate(fd, (off_t)it->size) < 0) {
		r = sys_error(err, errno, "cannot set the size", it->path);
		goto fail;
	}
	if (x->keep_owners && fchown(fd, (uid_t)it->uid, (gid_t)it->gid) < 0) {
		r = sys_error(err, errno, "cannot set the owner", it->path);
		goto fail;
	}
	if (fchmod(fd, it->mode & ~x->umask) < 0) {
		r = sys_error(err, errno, "cannot set the mode", it->path);
		goto fail;
	}
	if (it->has_mtime) {
		struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, it->mtime};
		/* Best effort: a time the file system cannot hold is not worth
		 * failing a copy for. */
		(void)futimens(fd, ts);
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		r = sys_error(err, errno, "cannot inspect the new file", it->path);
		goto fail;
	}
	x->ck.tree.nodes[it->node].dev = st.st_dev;
	x->ck.tree.nodes[it->node].ino = st.st_ino;
	if (close(fd) < 0) {
		fd = -1;
		r = sys_error(err, errno, "cannot write", it->path);
		goto fail;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(pfd, it->leaf, 0);
	return r;
}

static int make_dir(brig_tar_extract *x, const brig_tar__item *it, int pfd, brig_error **err)
{
	brig_tar__node *nd = &x->ck.tree.nodes[it->node];
	/* Owner-writable until the end, when the entry's own mode is applied. */
	if (mkdirat(pfd, it->leaf, 0700) == 0) {
		nd->made = true;
	} else {
		if (errno != EEXIST)
			return sys_error(err, errno, "cannot create the directory", it->path);
		struct stat st;
		if (fstatat(pfd, it->leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return sys_error(err, errno, "cannot inspect the existing entry", it->path);
		if (!S_ISDIR(st.st_mode)) {
			/* A file or link the caller left there: replaced. */
			if (unlinkat(pfd, it->leaf, 0) < 0 || mkdirat(pfd, it->leaf, 0700) < 0)
				return sys_error(err, errno, "cannot replace the existing entry", it->path);
			nd->made = true;
		}
	}
	/* A directory that was already in the destination (not made by this
	 * stream, here or as an implied parent) keeps its own mode and times. */
	if (!nd->made)
		return 0;
	nd->mode = it->mode & ~x->umask;
	nd->has_mtime = it->has_mtime;
	nd->mtime = it->mtime;
	nd->uid = it->uid;
	nd->gid = it->gid;
	return 0;
}

static int make_symlink(brig_tar_extract *x, const brig_tar__item *it, int pfd, brig_error **err)
{
	for (int tries = 0;; tries++) {
		if (symlinkat(it->link, pfd, it->leaf) == 0)
			break;
		if (errno != EEXIST || tries)
			return sys_error(err, errno, "cannot create the symlink", it->path);
		int r = clear_leaf(pfd, it->leaf, it->path, err);
		if (r)
			return r;
	}
	if (x->keep_owners && fchownat(pfd, it->leaf, (uid_t)it->uid, (gid_t)it->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return sys_error(err, errno, "cannot set the owner", it->path);
	if (it->has_mtime) {
		struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, it->mtime};
		(void)utimensat(pfd, it->leaf, ts, AT_SYMLINK_NOFOLLOW); /* best effort */
	}
	return 0;
}

/* "a/b/c" for tree node `node` into *out (a new string). The names come
 * from the archive; the cap is memory's, so BRIG_ETOOBIG cannot happen in
 * practice, but it is reported rather than a path cut short. */
static int node_path(brig_tar_extract *x, uint32_t node, char **out, brig_error **err)
{
	size_t depth;
	uint32_t *chain = chain_of(x, node, &depth);
	brig_buf b;
	brig_buf_init(&b, SIZE_MAX / 2);
	*out = NULL;
	for (size_t i = 0; i < depth; i++) {
		int r = i ? brig_buf_add(&b, "/", 1) : 0;
		if (!r)
			r = brig_buf_addstr(&b, x->ck.tree.nodes[chain[i]].name);
		if (r) {
			brig_buf_free(&b);
			return brig__error_set(err, r, 0, "tar: a directory's path in the archive is too long");
		}
	}
	*out = brig_buf_steal(&b, NULL);
	return 0;
}

/* Opens the directory holding tree node `node` (or the node itself, a
 * directory, with include_self) along its chain, apart from the cached
 * stack. *out gets an fd the caller closes. */
static int open_dir_of(brig_tar_extract *x, uint32_t node, bool include_self, const char *path, int *out,
		       brig_error **err)
{
	size_t depth;
	uint32_t *chain = chain_of(x, node, &depth);
	if (!include_self)
		depth--;
	int cur = fcntl(x->root_fd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return sys_error(err, errno, "cannot duplicate the destination fd", path);
	for (size_t i = 0; i < depth; i++) {
		int fd = -1;
		int r = open_component(cur, x->ck.tree.nodes[chain[i]].name, false, path, &fd, NULL, err);
		close(cur);
		if (r)
			return r;
		cur = fd;
	}
	*out = cur;
	return 0;
}

static int make_hardlink(brig_tar_extract *x, const brig_tar__item *it, int pfd, brig_error **err)
{
	const brig_tar__node *target = &x->ck.tree.nodes[it->link_node];
	cleanup_close int tfd = -1;
	int r = open_dir_of(x, it->link_node, false, it->path, &tfd, err);
	if (r)
		return r;
	/* The target must still be the very file this stream created. */
	struct stat st;
	if (fstatat(tfd, target->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_dev != target->dev || st.st_ino != target->ino) {
		cleanup_free char *q = brig_tar__quote(it->raw);
		return brig__error_set(err, BRIG_EUNSAFE, 0,
				       "tar entry %s: hard link target is no longer the file the stream created", q);
	}
	for (int tries = 0;; tries++) {
		if (linkat(tfd, target->name, pfd, it->leaf, 0) == 0)
			break;
		if (errno != EEXIST || tries)
			return sys_error(err, errno, "cannot create the hard link", it->path);
		r = clear_leaf(pfd, it->leaf, it->path, err);
		if (r)
			return r;
	}
	/* The new name is the same file: later links may name it too. */
	brig_tar__node *nd = &x->ck.tree.nodes[it->node];
	nd->dev = st.st_dev;
	nd->ino = st.st_ino;
	return 0;
}

/* Directory modes and mtimes last, deepest first (nodes are numbered in
 * creation order, so children come after their parents, and no directory
 * is needed again once its mode is set). Each is opened from its parent's
 * fd on the stack: neighbours in that order share most of their path. */
static int apply_dirs(brig_tar_extract *x, brig_error **err)
{
	brig_tar__tree *t = &x->ck.tree;
	stack_pop_to(x, 0);
	for (uint32_t i = t->n; i-- > 1;) {
		const brig_tar__node *nd = &t->nodes[i];
		if (nd->kind != BRIG_TAR__N_DIR || !nd->made)
			continue;
		cleanup_free char *path = NULL;
		int pfd, fd = -1;
		int r = node_path(x, i, &path, err);
		if (!r)
			r = parent_fd(x, nd->parent, path, false, &pfd, err);
		if (!r)
			r = open_component(pfd, nd->name, false, path, &fd, NULL, err);
		if (r)
			return r;
		if (x->keep_owners && fchown(fd, (uid_t)nd->uid, (gid_t)nd->gid) < 0)
			r = sys_error(err, errno, "cannot set the owner of a directory", path);
		else if (fchmod(fd, nd->mode) < 0)
			r = sys_error(err, errno, "cannot set the mode of a directory", path);
		else if (nd->has_mtime) {
			struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, nd->mtime};
			(void)futimens(fd, ts); /* best effort */
		}
		close(fd);
		if (r)
			return r;
	}
	return 0;
}

/* One entry onto the disk, under the directory its parent resolved to. */
static int extract_entry(void *ctx, struct archive *a, brig_tar__source *src, const brig_tar__item *it,
			 brig_error **err)
{
	brig_tar_extract *x = ctx;
	int pfd;
	int r = parent_fd(x, it->parent, it->raw, true, &pfd, err);
	if (r)
		return r;
	switch (it->type) {
	case BRIG_TAR_FILE: r = write_file(x, a, src, it, pfd, err); break;
	case BRIG_TAR_DIR: r = make_dir(x, it, pfd, err); break;
	case BRIG_TAR_SYMLINK: r = make_symlink(x, it, pfd, err); break;
	default: r = make_hardlink(x, it, pfd, err); break;
	}
	if (!r && x->on_entry)
		x->on_entry(it->path, it->type, it->size, x->payload);
	return r;
}

static int extract_body(void *ctx, brig_tar__source *src, brig_error **err)
{
	brig_tar_extract *x = ctx;
	int r = brig_tar__walk(src, &x->ck, extract_entry, x, err);
	if (!r)
		r = apply_dirs(x, err);
	stack_pop_to(x, 0);
	x->stats = x->ck.stats;
	return r;
}

int brig_tar_extract_new(brig_tar_extract **out, int dirfd, const char *path, const brig_tar_extract_opts *opts,
			 brig_error **err)
{
	*out = NULL;
	brig_tar_extract_opts defaults = BRIG_TAR_EXTRACT_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int vr = brig__opts_check(opts->version, BRIG_TAR_EXTRACT_OPTS_VERSION, "tar extract options", err);
	if (vr)
		return vr;
	brig_tar__policy pol;
	int r = brig_tar__policy_init(&pol, &opts->limits, err);
	if (r || (r = brig__archive_load(err)))
		return r;
	pol.strip = opts->strip_components;
	pol.allow_symlinks = opts->allow_symlinks;
	pol.allow_hardlinks = opts->allow_hardlinks;

	int fd = path ? openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot open the destination directory %s: %s",
				       path ? path : "(fd)", strerror(errno));
	if (!path) {
		struct stat st;
		if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
			close(fd);
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "tar extract: the destination fd is not a directory");
		}
	}
	brig_tar_extract *x = xcalloc(1, sizeof *x);
	/* umask can only be read by setting it: done here, in the caller's
	 * thread, before any worker exists, and put straight back. */
	x->umask = umask(022);
	umask(x->umask);
	brig_tar__checker_init(&x->ck, &pol);
	x->keep_owners = opts->keep_owners;
	x->on_entry = opts->on_entry;
	x->payload = opts->payload;
	x->root_fd = fd;
	*out = x;
	return 0;
}

static int sticky(brig_tar_extract *x, int r, brig_error **err)
{
	return brig_tar__sticky(&x->code, &x->err, r, err);
}

int brig_tar_extract_feed(brig_tar_extract *x, const void *data, size_t len, brig_error **err)
{
	if (x->code)
		return brig_tar__error_copy(err, x->err, x->code);
	if (x->state == X_DONE)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar extract: fed after the stream was finished");
	if (x->state == X_IDLE) {
		brig_tar__pump_init(&x->pump, extract_body, x, x->ck.pol.limits.max_stream_bytes);
		x->pump_inited = true;
		x->state = X_PUSH;
	}
	return sticky(x, brig_tar__pump_feed(&x->pump, data, len, err), err);
}

int brig_tar_extract_data_cb(const char *data, size_t len, void *payload)
{
	brig_tar_extract *x = payload;
	if (x->cb_code)
		return x->cb_code;
	int r = brig_tar_extract_feed(x, data, len, &x->cb_err);
	x->cb_code = r;
	return r;
}

int brig_tar_extract_finish(brig_tar_extract *x, brig_error **err)
{
	if (x->cb_code)
		return brig_tar__error_copy(err, x->cb_err, x->cb_code);
	if (x->code)
		return brig_tar__error_copy(err, x->err, x->code);
	if (x->state == X_DONE)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar extract: finished twice");
	if (x->state == X_IDLE) {
		brig_tar__pump_init(&x->pump, extract_body, x, x->ck.pol.limits.max_stream_bytes);
		x->pump_inited = true;
	}
	x->state = X_DONE;
	return sticky(x, brig_tar__pump_finish(&x->pump, err), err);
}

int brig_tar_extract_from_reader(brig_tar_extract *x, brig_tar_reader reader, void *payload, brig_error **err)
{
	if (x->state != X_IDLE)
		return brig__error_set(err, BRIG_EINVAL, 0, "tar extract: the stream was already given");
	x->state = X_DONE;
	return sticky(x, brig_tar__run_pull(extract_body, x, x->ck.pol.limits.max_stream_bytes, reader, payload, err),
		      err);
}

const brig_tar_stats *brig_tar_extract_stats(const brig_tar_extract *x)
{
	return &x->stats;
}

void brig_tar_extract_free(brig_tar_extract *x)
{
	if (!x)
		return;
	if (x->pump_inited)
		brig_tar__pump_destroy(&x->pump);
	stack_pop_to(x, 0);
	if (x->root_fd >= 0)
		close(x->root_fd);
	brig_tar__checker_free(&x->ck);
	free(x->fd);
	free(x->node);
	free(x->chain);
	brig_error_free(x->cb_err);
	brig_error_free(x->err);
	free(x);
}
