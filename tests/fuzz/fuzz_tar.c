/* fuzz_tar.c — libFuzzer target for src/tar: each input goes through the extractor (fresh temporary
 * directory) and the copier; aborts if anything lands beside the directory or the two disagree. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tar/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void rm_at(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlinkat(dfd, name, 0);
		return;
	}
	fchmodat(dfd, name, 0700, 0); /* extracted directories may be 0000 */
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		DIR *d = fdopendir(fd);
		for (bool again = true; d && again;) {
			again = false;
			rewinddir(d);
			struct dirent *de;
			while ((de = readdir(d))) {
				if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
					continue;
				rm_at(fd, de->d_name);
				again = true;
			}
		}
		if (d)
			closedir(d);
		else
			close(fd);
	}
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static int entries_in(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Hands the input out in uneven pieces, so libarchive sees every split. */
typedef struct input {
	const uint8_t *p;
	size_t len, off;
	unsigned step;
} input;

static ssize_t input_read(char *buf, size_t len, void *payload, brig_error **err)
{
	(void)err;
	input *in = payload;
	size_t n = in->len - in->off;
	in->step = in->step * 1103515245u + 12345u;
	size_t piece = 1 + (in->step >> 8) % 3000;
	if (n > piece)
		n = piece;
	if (n > len)
		n = len;
	memcpy(buf, in->p + in->off, n);
	in->off += n;
	return (ssize_t)n;
}

static int discard(const void *data, size_t len, void *payload, brig_error **err)
{
	(void)data;
	(void)len;
	(void)payload;
	(void)err;
	return 0;
}

static const brig_tar_limits limits = {
	.max_total_bytes = 4u << 20,
	.max_entries = 2000,
	.max_name_len = 4096,
	.max_depth = 64,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[] = "/tmp/brig-fuzz-tar-XXXXXX";
	if (!mkdtemp(dir))
		abort();
	char dest[64];
	snprintf(dest, sizeof dest, "%s/dest", dir);
	if (mkdir(dest, 0700) < 0)
		abort();

	/* The most permissive policy an owner may choose: the most surface. */
	brig_tar_extract_opts xo = {
		.version = BRIG_TAR_EXTRACT_OPTS_VERSION,
		.limits = limits,
		.allow_symlinks = true,
		.allow_hardlinks = true,
		.strip_components = size % 3 == 0 ? 1 : 0,
	};
	brig_tar_extract *x = NULL;
	brig_error *err = NULL;
	if (brig_tar_extract_new(&x, AT_FDCWD, dest, &xo, &err) != 0)
		abort();
	input in = {data, size, 0, (unsigned)size};
	int xr = brig_tar_extract_from_reader(x, input_read, &in, &err);
	char xmsg[256];
	snprintf(xmsg, sizeof xmsg, "%s", err && err->message ? err->message : "");
	brig_error_free(err);
	err = NULL;
	brig_tar_extract_free(x);
	/* The one property that must never break: nothing beside dest. */
	if (entries_in(dir) != 1) {
		fprintf(stderr, "fuzz_tar: an entry escaped the destination into %s\n", dir);
		abort();
	}
	rm_at(AT_FDCWD, dir);

	/* The copier, pushed in small pieces through its worker thread. */
	brig_tar_copy_opts co = {
		.version = BRIG_TAR_COPY_OPTS_VERSION,
		.limits = limits,
		.allow_symlinks = true,
		.allow_hardlinks = true,
		.rewrite_owner = true,
		.uid = 1000,
		.gid = 1000,
		.strip_components = xo.strip_components,
	};
	brig_tar_copy *c = NULL;
	if (brig_tar_copy_new(&c, &co, discard, NULL, &err) != 0)
		abort();
	int r = 0;
	for (size_t off = 0; !r && off < size; off += 509)
		r = brig_tar_copy_feed(c, data + off, size - off < 509 ? size - off : 509, &err);
	brig_tar_copy_result res;
	if (!r)
		r = brig_tar_copy_finish(c, &res, &err);
	/* They share one checker, so they must agree on every stream; local
	 * file-system failures are the extractor's alone. */
	if (xr != r && xr != BRIG_EIO && xr != BRIG_EDENIED) {
		fprintf(stderr, "fuzz_tar: extractor %s (%s) but copier %s (%s)\n", brig_error_name(xr), xmsg,
			brig_error_name(r), brig_error_message(err));
		abort();
	}
	brig_error_free(err);
	brig_tar_copy_free(c);
	return 0;
}
