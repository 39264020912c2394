/* files.c — the small file operations of an image build: bounded reads,
 * atomic writes, regular-file checks and the RFC 3339 clock. */
#include "image/image_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

char *brig_image__rfc3339_now(void)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	char buf[32];
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xstrdup(buf);
}

int brig_image__read_file(const char *path, size_t cap, char **out, size_t *len, brig_error **err)
{
	*out = NULL;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return brig__error_set(err, errno == ENOENT ? BRIG_ENOTFOUND : BRIG_EIO, errno, "cannot read %s: %s",
				       path, strerror(errno));
	brig_buf b;
	brig_buf_init(&b, cap);
	char *buf = xmalloc(1 << 16);
	int rc = 0;
	for (;;) {
		ssize_t r = read(fd, buf, 1 << 16);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		if (brig_buf_add(&b, buf, (size_t)r) != 0) {
			rc = brig__error_set(err, BRIG_ETOOBIG, 0, "%s is larger than %zu bytes", path, cap);
			break;
		}
	}
	free(buf);
	if (rc) {
		brig_buf_free(&b);
		return rc;
	}
	*out = brig_buf_steal(&b, len);
	return 0;
}

int brig_image__write_file_atomic(const char *path, const char *text, brig_error **err)
{
	cleanup_free char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot write %s: %s", tmp, strerror(errno));
	if (brig_write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return brig__error_set(err, BRIG_EIO, e, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

bool brig_image__regular_file(const char *path, uint64_t *size)
{
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	if (size)
		*size = (uint64_t)st.st_size;
	return true;
}
