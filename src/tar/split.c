/* split.c — one verified blob (a brig_tar_restore) → one plain tar per
 * top-level prefix, each written into its own fd by a worker thread, e.g. a
 * checkpoint's "workspace/" and "runtime/" for one PUT per volume. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "tar/tar_internal.h"

struct brig_tar_split {
	brig_tar_restore *r; /* borrowed: the caller keeps it until join */
	const char *prefix[BRIG_TAR_SPLIT_MAX];
	int wfd[BRIG_TAR_SPLIT_MAX]; /* owned until written and closed */
	bool done[BRIG_TAR_SPLIT_MAX];
	size_t n;
	pthread_t thread;
	int rc;
	brig_error *err;
};

static la_ssize_t split_read(struct archive *a, void *payload, const void **buf)
{
	static _Thread_local char block[65536];
	brig_tar_restore *r = payload;
	ssize_t n = brig_tar_restore_read(r, block, sizeof block, NULL);
	if (n < 0) {
		archive_set_error(a, EIO, "checkpoint blob failed its check while being read");
		return -1;
	}
	*buf = block;
	return n;
}

static la_ssize_t split_write(struct archive *a, void *payload, const void *buf, size_t len)
{
	int fd = *(int *)payload;
	if (brig_write_all(fd, buf, len) < 0) {
		archive_set_error(a, errno, "pipe");
		return -1;
	}
	return (la_ssize_t)len;
}

static struct archive *split_writer(int *fd)
{
	struct archive *w = archive_write_new();
	archive_write_set_format_pax_restricted(w);
	archive_write_set_bytes_in_last_block(w, 1);
	if (archive_write_open(w, fd, NULL, split_write, NULL) != ARCHIVE_OK) {
		archive_write_free(w);
		return NULL;
	}
	return w;
}

/* Ends output k: an empty tar when it never got an entry, then closed. */
static void close_output(brig_tar_split *s, size_t k, bool empty_tar)
{
	if (empty_tar) {
		struct archive *e = split_writer(&s->wfd[k]);
		if (e) {
			archive_write_close(e);
			archive_write_free(e);
		}
	}
	if (s->wfd[k] >= 0)
		close(s->wfd[k]);
	s->wfd[k] = -1;
	s->done[k] = true;
}

static int prefix_of(const brig_tar_split *s, const char *name)
{
	for (size_t i = 0; i < s->n && name; i++) {
		size_t pl = strlen(s->prefix[i]);
		if (strncmp(name, s->prefix[i], pl) == 0 && name[pl])
			return (int)i;
	}
	return -1;
}

/* Copies the current entry (already renamed) and its data into w. */
static int copy_entry(brig_tar_split *s, struct archive *in, struct archive *w, struct archive_entry *ent)
{
	char buf[65536];
	if (archive_write_header(w, ent) != ARCHIVE_OK)
		return brig__error_set(&s->err, BRIG_EIO, 0, "restore: %s", archive_error_string(w));
	la_ssize_t n;
	while ((n = archive_read_data(in, buf, sizeof buf)) > 0)
		if (archive_write_data(w, buf, (size_t)n) != n)
			return brig__error_set(&s->err, BRIG_EIO, 0, "restore: %s", archive_error_string(w));
	if (n < 0)
		return brig__error_set(&s->err, BRIG_ECORRUPT, 0, "restore: %s", archive_error_string(in));
	return 0;
}

/* One pass over the blob: the entries under the first prefix (the copier
 * wrote them first) into the first fd, and so on, each as a tar of its own
 * with the prefix removed; an output without entries gets an empty tar. */
static void *split_worker(void *arg)
{
	brig_tar_split *s = arg;
	struct archive *in = archive_read_new(), *w = NULL;
	int cur = -1;
	archive_read_support_format_tar(in);
	archive_read_support_filter_none(in);
	if (archive_read_open(in, s->r, NULL, split_read, NULL) != ARCHIVE_OK) {
		s->rc = brig__error_set(&s->err, BRIG_EIO, 0, "restore: %s", archive_error_string(in));
		goto out;
	}
	struct archive_entry *ent;
	int ar;
	while ((ar = archive_read_next_header(in, &ent)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(ent);
		int idx = prefix_of(s, name);
		if (idx < 0)
			continue; /* a prefix's own root entry */
		if (idx != cur) {
			if (idx < cur || s->done[idx]) {
				s->rc = brig__error_set(&s->err, BRIG_ECORRUPT, 0,
							"restore: the blob's volumes are interleaved");
				goto out;
			}
			if (w && archive_write_close(w) != ARCHIVE_OK) {
				s->rc = brig__error_set(&s->err, BRIG_EIO, 0, "restore: %s", archive_error_string(w));
				goto out;
			}
			if (w)
				archive_write_free(w);
			w = NULL;
			if (cur >= 0)
				close_output(s, (size_t)cur, false);
			for (int k = cur + 1; k < idx; k++) /* skipped prefix: empty tar */
				close_output(s, (size_t)k, true);
			cur = idx;
			if (!(w = split_writer(&s->wfd[cur]))) {
				s->rc = brig__error_set(&s->err, BRIG_EIO, 0, "restore: cannot start a tar writer");
				goto out;
			}
		}
		size_t plen = strlen(s->prefix[cur]);
		cleanup_free char *stripped = xstrdup(name + plen);
		archive_entry_set_pathname(ent, stripped);
		const char *hl = archive_entry_hardlink(ent);
		cleanup_free char *hls = NULL;
		if (hl) {
			if (strncmp(hl, s->prefix[cur], plen) != 0)
				continue;
			hls = xstrdup(hl + plen);
			archive_entry_set_hardlink(ent, hls);
		}
		if ((s->rc = copy_entry(s, in, w, ent)) != 0)
			goto out;
	}
	if (ar != ARCHIVE_EOF) {
		s->rc = brig__error_set(&s->err, BRIG_ECORRUPT, 0, "restore: %s", archive_error_string(in));
		goto out;
	}
	if (w && archive_write_close(w) != ARCHIVE_OK)
		s->rc = brig__error_set(&s->err, BRIG_EIO, 0, "restore: %s", archive_error_string(w));
	for (size_t k = 0; k < s->n && s->rc == 0; k++)
		if (!s->done[k] && (int)k != cur)
			close_output(s, k, true);
out:
	if (w)
		archive_write_free(w);
	archive_read_free(in);
	for (size_t k = 0; k < s->n; k++)
		if (s->wfd[k] >= 0) {
			close(s->wfd[k]);
			s->wfd[k] = -1;
		}
	return NULL;
}

int brig_tar_split_start(brig_tar_split **out, brig_tar_restore *r, const char *const *prefixes, const int *fds,
			 size_t n, brig_error **err)
{
	*out = NULL;
	int rc = 0;
	if (n == 0 || n > BRIG_TAR_SPLIT_MAX)
		rc = brig__error_set(err, BRIG_EINVAL, 0, "tar split: 1 to %d outputs, not %zu", BRIG_TAR_SPLIT_MAX, n);
	if (rc == 0)
		rc = brig__archive_load(err);
	if (rc) {
		for (size_t k = 0; k < n; k++)
			close(fds[k]);
		return rc;
	}
	brig_tar_split *s = xcalloc(1, sizeof *s);
	s->r = r;
	s->n = n;
	for (size_t k = 0; k < n; k++) {
		s->prefix[k] = prefixes[k];
		s->wfd[k] = fds[k];
	}
	if (pthread_create(&s->thread, NULL, split_worker, s) != 0) {
		for (size_t k = 0; k < n; k++)
			close(fds[k]);
		free(s);
		return brig__error_set(err, BRIG_EIO, 0, "restore: cannot start a thread");
	}
	*out = s;
	return 0;
}

int brig_tar_split_join(brig_tar_split *s, brig_error **err)
{
	pthread_join(s->thread, NULL);
	int rc = s->rc;
	if (rc)
		brig__error_move(err, steal_pointer(&s->err));
	brig_error_free(s->err);
	free(s);
	return rc;
}
