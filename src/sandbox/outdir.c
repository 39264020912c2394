/* outdir.c — all-or-nothing copy-out: a fresh directory beside --out, then a
 * rename (or a merge of renames) into place, so a refused copy leaves --out
 * as it was. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "sandbox/outdir.h"

int brig_sandbox__outdir_begin(char **tmp, const char *out_dir, brig_error **err)
{
	*tmp = NULL;
	cleanup_free char *d = xstrdup(out_dir);
	size_t n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		d[--n] = '\0';
	cleanup_free char *b = xstrdup(d);
	const char *parent = dirname(d), *base = basename(b);
	for (int tries = 0; tries < 8; tries++) {
		unsigned char r[6];
		if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
			int64_t t = brig_now_ms() ^ ((int64_t)getpid() << 20) ^ tries;
			memcpy(r, &t, sizeof r);
		}
		char hex[13];
		brig_hex(hex, r, sizeof r);
		char *p = xasprintf("%s/.%s.brig-out-%s", parent, base, hex);
		if (mkdir(p, 0755) == 0) {
			*tmp = p;
			return 0;
		}
		int e = errno;
		free(p);
		if (e != EEXIST)
			return brig__error_set(err, BRIG_EIO, e, "--out %s: cannot make a directory beside it: %s",
					       out_dir, strerror(e));
	}
	return brig__error_set(err, BRIG_EIO, EEXIST, "--out %s: cannot make a directory beside it", out_dir);
}

static void remove_below(int dfd)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			continue;
		int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		fchmod(sub, 0700); /* a read-only directory the command made */
		remove_below(sub);
		unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

void brig_sandbox__outdir_abandon(const char *tmp)
{
	if (!tmp)
		return;
	int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		fchmod(fd, 0700);
		remove_below(fd);
	}
	rmdir(tmp);
}

/* A name the container chose, fit for a message: bytes outside printable
 * ASCII, quotes and backslashes as '?'. New string. */
static char *printable(const char *name)
{
	char *p = xstrdup(name);
	for (char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e || *c == '"' || *c == '\\')
			*c = '?';
	return p;
}

/* Walks src (what the copy produced) against dst (what --out holds). With
 * move false it only looks for a conflict; with move true it renames each
 * entry into place. path is for messages. */
static int merge(int sfd, int dfd, const char *path, bool move, brig_error **err)
{
	int dup_fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* own offset: a dup shares it */
	DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		cleanup_free char *leaf = printable(de->d_name);
		cleanup_free char *sub = *path ? xasprintf("%s/%s", path, leaf) : xstrdup(leaf);
		struct stat ss, ds;
		if (fstatat(sfd, de->d_name, &ss, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = brig__error_set(err, BRIG_EIO, errno, "cannot inspect %s: %s", sub, strerror(errno));
			break;
		}
		bool have = fstatat(dfd, de->d_name, &ds, AT_SYMLINK_NOFOLLOW) == 0;
		if (have && S_ISDIR(ds.st_mode) && S_ISDIR(ss.st_mode)) {
			int s2 = openat(sfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int d2 = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s2 < 0 || d2 < 0)
				rc = brig__error_set(err, BRIG_EIO, errno, "cannot open %s: %s", sub, strerror(errno));
			else
				rc = merge(s2, d2, sub, move, err);
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
			continue;
		}
		if (have && S_ISDIR(ds.st_mode)) {
			rc = brig__error_set(
				err, BRIG_EUNSAFE, 0,
				"tar entry \"%s\": a directory of that name already exists in the destination", sub);
			break;
		}
		if (!move)
			continue;
		/* A directory replaces a file or link; rename replaces the rest. */
		if (have && S_ISDIR(ss.st_mode) && unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT) {
			rc = brig__error_set(err, BRIG_EIO, errno, "cannot replace %s: %s", sub, strerror(errno));
			break;
		}
		if (renameat(sfd, de->d_name, dfd, de->d_name) < 0)
			rc = brig__error_set(err, BRIG_EIO, errno, "cannot move %s into place: %s", sub,
					     strerror(errno));
	}
	closedir(d);
	return rc;
}

int brig_sandbox__outdir_commit(const char *tmp, const char *out_dir, brig_error **err)
{
	struct stat st;
	if (lstat(out_dir, &st) < 0 && errno == ENOENT) {
		if (rename(tmp, out_dir) == 0)
			return 0;
		int e = errno;
		brig_sandbox__outdir_abandon(tmp);
		return brig__error_set(err, BRIG_EIO, e, "--out %s: %s", out_dir, strerror(e));
	}
	/* An existing --out (an empty one too) keeps its own mode and owner. */
	int sfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int dfd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;
	if (sfd < 0 || dfd < 0)
		rc = brig__error_set(err, BRIG_EIO, errno, "--out %s: %s", out_dir, strerror(errno));
	if (rc == 0)
		rc = merge(sfd, dfd, "", false, err);
	if (rc == 0)
		rc = merge(sfd, dfd, "", true, err);
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	brig_sandbox__outdir_abandon(tmp);
	return rc;
}
