/* guest/files.c — file operations with brig-init's own permissions: STAT,
 * LIST, READ (paced by the connection), WRITE (temp + rename), MKDIR, REMOVE, RENAME,
 * SYMLINK. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/init.h"

static void fail(gi_conn *c, uint32_t req, const char *op, const char *path, int err)
{
	if (err == EROFS)
		gi_send_error(c, req, err,
			      "%s %s: read-only file system (only /workspace and other writable mounts can be written)",
			      op, path);
	else
		gi_send_error(c, req, err, "%s %s: %s", op, path, strerror(err));
}

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	if (S_ISFIFO(m))
		return "fifo";
	if (S_ISSOCK(m))
		return "socket";
	if (S_ISCHR(m))
		return "char";
	return "block";
}

static void put_stat(brig_gp_enc *e, const struct stat *st, int dirfd, const char *name)
{
	brig_gp_put_str(e, BRIG_GP_F_TYPE, type_name(st->st_mode));
	brig_gp_put_int(e, BRIG_GP_F_MODE, st->st_mode & 07777);
	brig_gp_put_int(e, BRIG_GP_F_SIZE, st->st_size);
	brig_gp_put_int(e, BRIG_GP_F_MTIME_NS, (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
	brig_gp_put_int(e, BRIG_GP_F_UID, st->st_uid);
	brig_gp_put_int(e, BRIG_GP_F_GID, st->st_gid);
	if (S_ISLNK(st->st_mode)) {
		char link[4096];
		ssize_t n = readlinkat(dirfd, name, link, sizeof link - 1);
		if (n >= 0) {
			link[n] = '\0';
			brig_gp_put_str(e, BRIG_GP_F_LINK, link);
		}
	}
}

/* ---- LIST: depth-first, links never followed ---- */

/* A listing stops here (it is built at once, not paced by the connection). */
#define LIST_MAX_ENTRIES 100000
#define LIST_MAX_BYTES (8u * 1024u * 1024u)
static size_t list_bytes; /* of the listing being built */

static int list_dir(gi_conn *c, uint32_t req, int dfd, const char *prefix, int depth, int64_t *count)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char rel[4096];
		int rl = snprintf(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", de->d_name);
		if (rl < 0 || (size_t)rl >= sizeof rel)
			continue;
		if (*count >= LIST_MAX_ENTRIES || list_bytes >= LIST_MAX_BYTES) {
			closedir(d);
			return -E2BIG;
		}
		brig_gp_enc *e = gi_enc();
		brig_gp_put_str(e, BRIG_GP_F_NAME, rel);
		put_stat(e, &st, dirfd(d), de->d_name);
		list_bytes += e->len;
		gi_send(c, BRIG_GP_T_LIST_ENTRY, req);
		(*count)++;
		if (S_ISDIR(st.st_mode) && depth > 1) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0 && list_dir(c, req, sub, rel, depth - 1, count) == -E2BIG) {
				closedir(d);
				return -E2BIG;
			}
		}
	}
	closedir(d);
	return 0;
}

/* ---- REMOVE ---- */

static int remove_at(int dfd, const char *name, int recursive)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (unlinkat(dfd, name, AT_REMOVEDIR) == 0)
		return 0;
	if (errno != ENOTEMPTY && errno != EEXIST)
		return -errno;
	if (!recursive)
		return -ENOTEMPTY;
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -errno;
	DIR *d = fdopendir(sub);
	if (!d) {
		close(sub);
		return -errno;
	}
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int r = remove_at(dirfd(d), de->d_name, 1);
		if (r < 0 && rc == 0)
			rc = r;
	}
	closedir(d);
	if (rc < 0)
		return rc;
	return unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : -errno;
}

/* ---- MKDIR ---- */

static int mkdirs(const char *path, mode_t mode, int parents)
{
	if (!parents)
		return mkdir(path, mode) == 0 ? 0 : -errno;
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(buf, mode) < 0) {
		struct stat st;
		if (errno == EEXIST && stat(buf, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return -errno;
	}
	return 0;
}

static int parent_of(const char *path, char *out, size_t n)
{
	snprintf(out, n, "%s", path);
	char *sl = strrchr(out, '/');
	if (!sl)
		return -1;
	if (sl == out)
		sl[1] = '\0';
	else
		*sl = '\0';
	return 0;
}

/* ---- WRITE ---- */

static gi_wjob *find_write(gi_conn *c, uint32_t req)
{
	for (gi_wjob *w = c->writes; w; w = w->next)
		if (w->req == req)
			return w;
	return NULL;
}

static void wjob_drop(gi_conn *c, gi_wjob *w, int unlink_tmp)
{
	for (gi_wjob **pp = &c->writes; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	if (w->fd >= 0)
		close(w->fd);
	if (unlink_tmp && w->tmp)
		unlink(w->tmp);
	free(w->path);
	free(w->tmp);
	free(w);
}

static void write_start(gi_conn *c, uint32_t req, gi_req *r)
{
	if (find_write(c, req)) {
		gi_send_error(c, req, EBUSY, "request %u is writing already", req);
		return;
	}
	gi_wjob *w = calloc(1, sizeof *w);
	if (!w) {
		gi_send_error(c, req, ENOMEM, "out of memory");
		return;
	}
	w->req = req;
	w->fd = -1;
	w->append = r->append ? 1 : 0;
	/* -1: APPEND without MODE leaves an existing file's mode alone */
	w->mode = r->has_mode ? (int)(r->mode & 07777) : w->append ? -1 : 0644;
	w->path = strdup(r->path);
	w->next = c->writes;
	c->writes = w;
	if (!w->path) {
		w->failed = 1;
		gi_send_error(c, req, ENOMEM, "out of memory");
		return;
	}
	if (r->parents) {
		char dir[4096];
		parent_of(r->path, dir, sizeof dir);
		int rc = mkdirs(dir, 0755, 1);
		if (rc < 0) {
			w->failed = 1;
			fail(c, req, "write", r->path, -rc);
			return;
		}
	}
	if (w->append) {
		/* O_NONBLOCK: a FIFO put at the path must not block PID 1;
		 * anything but a regular file is refused. */
		w->fd = open(r->path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
			     (mode_t)(w->mode < 0 ? 0644 : w->mode));
		struct stat ast;
		if (w->fd >= 0 && (fstat(w->fd, &ast) < 0 || !S_ISREG(ast.st_mode))) {
			close(w->fd);
			w->fd = -1;
			errno = EINVAL;
		} else if (w->fd >= 0) {
			fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) & ~O_NONBLOCK);
		}
	} else {
		char dir[4096];
		parent_of(r->path, dir, sizeof dir);
		const char *base = strrchr(r->path, '/') + 1;
		size_t tl = strlen(dir) + strlen(base) + 32;
		w->tmp = malloc(tl);
		for (int i = 0; w->tmp && i < 100; i++) {
			/* unpredictable: the sandbox must not be able to take
			 * the next names ahead of us */
			unsigned rnd = 0;
			if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
				rnd = (unsigned)rand() ^ (unsigned)i << 20;
			snprintf(w->tmp, tl, "%s%s.%.200s.brig-%08x", dir, strcmp(dir, "/") ? "/" : "", base, rnd);
			w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (w->fd >= 0 || errno != EEXIST)
				break;
		}
		if (w->fd < 0) {
			free(w->tmp);
			w->tmp = NULL;
		}
	}
	if (w->fd < 0) {
		w->failed = 1;
		fail(c, req, "write", r->path, errno);
	}
}

void gi_file_data(gi_conn *c, uint32_t req, gi_req *r, int end)
{
	gi_wjob *w = find_write(c, req);
	if (!w)
		return; /* not a write in progress: ignored */
	if (!end) {
		if (w->failed || !r->has_data)
			return;
		size_t off = 0;
		while (off < r->data_len) {
			ssize_t n = write(w->fd, r->data + off, r->data_len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				int e = n < 0 ? errno : EIO;
				w->failed = 1;
				close(w->fd);
				w->fd = -1;
				if (w->tmp)
					unlink(w->tmp);
				fail(c, req, "write", w->path, e);
				return;
			}
			off += (size_t)n;
		}
		w->size += r->data_len;
		return;
	}
	if (w->failed) {
		wjob_drop(c, w, 1);
		return;
	}
	int e = 0;
	if (w->mode >= 0 && fchmod(w->fd, (mode_t)w->mode) < 0)
		e = errno;
	if (!e && close(w->fd) < 0)
		e = errno;
	w->fd = -1;
	if (!e && w->tmp && rename(w->tmp, w->path) < 0)
		e = errno;
	if (e) {
		fail(c, req, "write", w->path, e);
		wjob_drop(c, w, 1);
		return;
	}
	brig_gp_enc *enc = gi_enc();
	brig_gp_put_int(enc, BRIG_GP_F_SIZE, w->size);
	gi_send(c, BRIG_GP_T_OK, req);
	wjob_drop(c, w, 0);
}

/* ---- READ ---- */

static void read_start(gi_conn *c, uint32_t req, gi_req *r)
{
	int fd = open(r->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block us */
	if (fd < 0) {
		fail(c, req, "read", r->path, errno);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = errno;
		close(fd);
		if (e == 0 || S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode))
			e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		fail(c, req, "read", r->path, e);
		return;
	}
	if (r->offset < 0 || (r->offset && lseek(fd, r->offset, SEEK_SET) < 0)) {
		close(fd);
		fail(c, req, "read", r->path, EINVAL);
		return;
	}
	gi_rjob *j = calloc(1, sizeof *j);
	if (!j) {
		close(fd);
		gi_send_error(c, req, ENOMEM, "out of memory");
		return;
	}
	j->req = req;
	j->fd = fd;
	j->left = r->has_length && r->length >= 0 ? r->length : INT64_MAX;
	j->size = st.st_size;
	j->next = NULL;
	gi_rjob **pp = &c->reads; /* in order of arrival */
	while (*pp)
		pp = &(*pp)->next;
	*pp = j;
}

void gi_file_pump(gi_conn *c)
{
	while (c->reads && !c->dead && gi_buf_pending(&c->out) < GI_OUT_CAP) {
		gi_rjob *j = c->reads;
		unsigned char buf[BRIG_GP_MAX_DATA];
		size_t want = j->left < (int64_t)sizeof buf ? (size_t)j->left : sizeof buf;
		ssize_t n = want ? read(j->fd, buf, want) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			brig_gp_enc *e = gi_enc();
			brig_gp_put_bytes(e, BRIG_GP_F_DATA, buf, (size_t)n);
			gi_send(c, BRIG_GP_T_DATA, j->req);
			j->sent += n;
			j->left -= n;
			continue;
		}
		if (n < 0)
			gi_send_error(c, j->req, errno, "read: %s", strerror(errno));
		else {
			brig_gp_enc *e = gi_enc();
			brig_gp_put_int(e, BRIG_GP_F_SIZE, j->size);
			brig_gp_put_int(e, BRIG_GP_F_COUNT, j->sent);
			gi_send(c, BRIG_GP_T_OK, j->req);
		}
		c->reads = j->next;
		close(j->fd);
		free(j);
	}
}

void gi_file_conn_gone(gi_conn *c)
{
	while (c->reads) {
		gi_rjob *j = c->reads;
		c->reads = j->next;
		close(j->fd);
		free(j);
	}
	while (c->writes)
		wjob_drop(c, c->writes, 1);
}

/* ---- dispatch ---- */

void gi_file_op(gi_conn *c, uint8_t type, uint32_t req, gi_req *r)
{
	if (!r->path || r->path[0] != '/') {
		gi_send_error(c, req, EINVAL, "%s needs an absolute PATH", brig_gp_type_name(type));
		return;
	}
	struct stat st;
	int rc;
	switch (type) {
	case BRIG_GP_T_STAT:
		if ((r->nofollow ? lstat(r->path, &st) : stat(r->path, &st)) < 0) {
			fail(c, req, "stat", r->path, errno);
			return;
		}
		brig_gp_enc *e = gi_enc();
		put_stat(e, &st, AT_FDCWD, r->path);
		gi_send(c, BRIG_GP_T_OK, req);
		return;
	case BRIG_GP_T_LIST: {
		int depth = r->has_depth ? (int)r->depth : 1;
		if (depth < 1 || depth > 64) {
			gi_send_error(c, req, EINVAL, "LIST DEPTH must be 1..64");
			return;
		}
		int dfd = open(r->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			fail(c, req, "list", r->path, errno);
			return;
		}
		int64_t count = 0;
		list_bytes = 0;
		rc = list_dir(c, req, dfd, "", depth, &count);
		if (rc == -E2BIG) {
			gi_send_error(c, req, E2BIG,
				      "list %s: more than %d entries or %u MiB of them: list a smaller tree or a "
				      "smaller DEPTH",
				      r->path, LIST_MAX_ENTRIES, LIST_MAX_BYTES >> 20);
			return;
		}
		if (rc < 0) {
			fail(c, req, "list", r->path, -rc);
			return;
		}
		e = gi_enc();
		brig_gp_put_int(e, BRIG_GP_F_COUNT, count);
		gi_send(c, BRIG_GP_T_OK, req);
		return;
	}
	case BRIG_GP_T_READ: read_start(c, req, r); return;
	case BRIG_GP_T_WRITE: write_start(c, req, r); return;
	case BRIG_GP_T_MKDIR:
		rc = mkdirs(r->path, r->has_mode ? (mode_t)(r->mode & 07777) : 0755, r->parents ? 1 : 0);
		if (rc < 0) {
			fail(c, req, "mkdir", r->path, -rc);
			return;
		}
		break;
	case BRIG_GP_T_REMOVE: {
		char dir[4096];
		parent_of(r->path, dir, sizeof dir);
		const char *base = strrchr(r->path, '/') + 1;
		if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
			gi_send_error(c, req, EINVAL, "remove %s: not a removable path", r->path);
			return;
		}
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = dfd < 0 ? -errno : remove_at(dfd, base, r->recursive ? 1 : 0);
		if (dfd >= 0)
			close(dfd);
		if (rc < 0) {
			fail(c, req, "remove", r->path, -rc);
			return;
		}
		break;
	}
	case BRIG_GP_T_RENAME:
		if (!r->path2 || r->path2[0] != '/') {
			gi_send_error(c, req, EINVAL, "RENAME needs an absolute PATH2");
			return;
		}
		if (rename(r->path, r->path2) < 0) {
			fail(c, req, "rename", r->path, errno);
			return;
		}
		break;
	case BRIG_GP_T_SYMLINK:
		if (!r->path2 || !*r->path2) {
			gi_send_error(c, req, EINVAL, "SYMLINK needs a target (PATH2)");
			return;
		}
		if (symlink(r->path2, r->path) < 0) {
			fail(c, req, "symlink", r->path, errno);
			return;
		}
		break;
	}
	gi_send_ok(c, req);
}
