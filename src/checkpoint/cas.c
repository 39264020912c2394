/* cas.c — incremental checkpoints on disk: the blob store, taking one
 * through brig-init, restore, retention of blobs, export and import
 * (cas.h says the layout and the formats). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "brig/guest.h"
#include "checkpoint/cas.h"
#include "tar/tar.h"
#include "util/openssl_dl.h"
#include "util/sha256.h"

bool ck_is_manifest_blob(const char *blob)
{
	size_t n = strlen(blob);
	return n == 64 + 9 && strcmp(blob + 64, ".manifest") == 0;
}

/* ---- hashing ---- */

typedef struct hasher {
	EVP_MD_CTX *ctx;
} hasher;

static int hasher_init(hasher *h, brig_error **err)
{
	int rc = brig__crypto_load(err);
	if (rc)
		return rc;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
		return brig__error_set(err, BRIG_EIO, 0, "cannot set up SHA-256");
	return 0;
}

static void hasher_final(hasher *h, char hex[65])
{
	unsigned char md[64];
	unsigned int len = 0;
	EVP_DigestFinal_ex(h->ctx, md, &len);
	brig_hex(hex, md, 32);
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

static void hasher_free(hasher *h)
{
	if (h->ctx)
		EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

/* ---- the blob store ---- */

static char *blob_path(const char *dir, const char *digest)
{
	return xasprintf("%s/blobs/%.2s/%s", dir, digest, digest);
}

static bool blob_exists(const char *dir, const char *digest, uint64_t size)
{
	cleanup_free char *p = blob_path(dir, digest);
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
}

/* A blob being written: an anonymous file in DIR/blobs, linked under its
 * digest only when complete. */
typedef struct blob_w {
	const char *dir;
	int fd;
	hasher h;
	uint64_t size, cap;
	char buf[1 << 16];
	size_t fill;
} blob_w;

static int blob_begin(blob_w *b, const char *dir, uint64_t cap, brig_error **err)
{
	*b = (blob_w){.dir = dir, .fd = -1, .cap = cap};
	cleanup_free char *bd = xasprintf("%s/blobs", dir);
	if (mkdir(bd, 0700) < 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot create %s: %s", bd, strerror(errno));
	b->fd = open(bd, O_TMPFILE | O_RDWR | O_CLOEXEC, 0400);
	if (b->fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot create a file in %s: %s", bd,
				       strerror(errno));
	return hasher_init(&b->h, err);
}

static int blob_flush(blob_w *b, brig_error **err)
{
	if (b->fill && brig_write_all(b->fd, b->buf, b->fill) != 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: writing into %s: %s", b->dir,
				       strerror(errno));
	b->fill = 0;
	return 0;
}

static int blob_data(blob_w *b, const void *data, size_t len, brig_error **err)
{
	if (b->size + len > b->cap)
		return brig__error_set(err, BRIG_ETOOBIG, 0, "checkpoint: more bytes than announced for a file");
	EVP_DigestUpdate(b->h.ctx, data, len);
	b->size += len;
	if (len >= sizeof b->buf) {
		int rc = blob_flush(b, err);
		if (!rc && brig_write_all(b->fd, data, len) != 0)
			rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint: writing into %s: %s", b->dir,
					     strerror(errno));
		return rc;
	}
	if (b->fill + len > sizeof b->buf) {
		int rc = blob_flush(b, err);
		if (rc)
			return rc;
	}
	memcpy(b->buf + b->fill, data, len);
	b->fill += len;
	return 0;
}

/* Links the blob under its digest (an existing one holds the same bytes);
 * want, when given, must be that digest. */
static int blob_end(blob_w *b, const char *want, char out[65], brig_error **err)
{
	int rc = blob_flush(b, err);
	if (rc)
		return rc;
	/* start the write-out now; the manifest's fsync later makes it durable
	 * (git's batch mode: one flush for many files, not one each) */
	sync_file_range(b->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	hasher_final(&b->h, out);
	if (want && strcmp(want, out) != 0)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "blob %.12s… does not match its digest", want);
	cleanup_free char *sub = xasprintf("%s/blobs/%.2s", b->dir, out);
	if (mkdir(sub, 0700) < 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot create %s: %s", sub, strerror(errno));
	cleanup_free char *final = blob_path(b->dir, out);
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", b->fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, final, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: link %s into place: %s", final,
				       strerror(errno));
	return 0;
}

static void blob_free(blob_w *b)
{
	hasher_free(&b->h);
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

/* ---- the lock between checkpoints (shared) and retention (exclusive) ---- */

static int lock_open(const char *dir, int how)
{
	cleanup_free char *p = xasprintf("%s/.gc.lock", dir);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	while (flock(fd, how) < 0) {
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* ---- manifests on disk ---- */

static int read_file(const char *path, uint64_t cap, char **out, size_t *len, brig_error **err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return brig__error_set(err, errno == ENOENT ? BRIG_ECORRUPT : BRIG_EIO, errno, "%s: %s", path,
				       strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > cap)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "%s: not a file of at most %" PRIu64 " bytes", path, cap);
	char *b = xmalloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(b);
			return brig__error_set(err, BRIG_EIO, errno, "reading %s: %s", path,
					       n ? strerror(errno) : "short read");
		}
		got += (size_t)n;
	}
	b[got] = '\0';
	*out = b;
	*len = got;
	return 0;
}

/* Reads and checks manifest `name` in dir against digest (NULL: the name's). */
static int manifest_load(ck_manifest *m, const char *dir, const char *name, const char *digest, brig_error **err)
{
	cleanup_free char *path = xasprintf("%s/%s", dir, name);
	cleanup_free char *buf = NULL;
	size_t len = 0;
	int rc = read_file(path, CK_MAX_MANIFEST, &buf, &len, err);
	if (rc)
		return rc;
	unsigned char d[32];
	char hex[65];
	brig_sha256(d, buf, len);
	brig_hex(hex, d, 32);
	if (strcmp(hex, digest ? digest : "") != 0 && !(digest == NULL && strncmp(name, hex, 64) == 0))
		return brig__error_set(err, BRIG_ECORRUPT, 0, "manifest %s does not match its digest", path);
	return ck_manifest_parse(m, buf, len, err);
}

/* Writes manifest m as DIR/<sha>.manifest (kept when it exists: same bytes). */
static int manifest_store(const ck_manifest *m, const char *dir, char digest[65], char **name, brig_error **err)
{
	size_t len = 0;
	cleanup_free char *text = ck_manifest_format(m, &len);
	unsigned char d[32];
	brig_sha256(d, text, len);
	brig_hex(digest, d, 32);
	*name = xasprintf("%s.manifest", digest);
	cleanup_free char *final = xasprintf("%s/%s", dir, *name);
	cleanup_close int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0400);
	if (fd < 0 || brig_write_all(fd, text, len) != 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: writing the manifest into %s: %s", dir,
				       strerror(errno));
	/* the blobs (written out as they were linked) and the manifest reach
	 * the disk before the record names them: the journal commit of this
	 * fsync carries the earlier writes with it */
	if (fsync(fd) < 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: sync %s: %s", dir, strerror(errno));
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, final, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: link %s into place: %s", final,
				       strerror(errno));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* ---- taking a checkpoint through brig-init ---- */

/* What brig-init could not do (it went away, a file it may not read, a
 * name it should not have sent, a tree past its listing cap) is no error
 * of the checkpoint: 1 sends it to the full copy through the daemon. */
#define GUEST_FAILED 1

static int guest_failed(brig_error **err)
{
	if (err) {
		brig_error_free(*err);
		*err = NULL;
	}
	return GUEST_FAILED;
}

typedef struct listing {
	ck_manifest m; /* digests empty; sorted */
	bool too_deep;
} listing;

#define LIST_DEPTH 64

/* Both volumes' trees with stat data (untrusted: every name checked). */
static int list_tree(brig_guest *g, listing *out, brig_error **err)
{
	*out = (listing){0};
	static const char *const roots[] = {"workspace", "runtime"};
	for (size_t r = 0; r < 2; r++) {
		cleanup_free char *root = xasprintf("/%s", roots[r]);
		json_t *arr = NULL;
		if (brig_guest_list(g, &arr, root, LIST_DEPTH, 0, err) != 0) {
			ck_manifest_free(&out->m);
			return guest_failed(err);
		}
		size_t i;
		json_t *x;
		json_array_foreach (arr, i, x) {
			json_t *jn = json_object_get(x, "name");
			const char *name = json_string_value(jn);
			const char *type = json_string_value(json_object_get(x, "type"));
			if (!name || !type)
				continue;
			size_t nl = json_string_length(jn);
			/* brig's own started marker belongs to the container, not the session */
			if (r == 1 && (strcmp(name, ".brig") == 0 || strncmp(name, ".brig/", 6) == 0))
				continue;
			cleanup_free char *path = xasprintf("%s/%s", roots[r], name);
			if (nl != strlen(name) || !ck_path_ok(path, strlen(path))) {
				json_decref(arr);
				ck_manifest_free(&out->m);
				return brig__error_set(err, BRIG_EUNSAFE, 0, "brig-init listed an unsafe name in %s",
						       root);
			}
			unsigned mode = (unsigned)json_integer_value(json_object_get(x, "mode")) & 07777;
			int64_t mt = json_integer_value(json_object_get(x, "mtime_ns"));
			json_int_t sz = json_integer_value(json_object_get(x, "size"));
			if (strcmp(type, "file") == 0) {
				ck_manifest_add(&out->m, path, 'f', mode, sz > 0 ? (uint64_t)sz : 0, mt, NULL, NULL);
			} else if (strcmp(type, "dir") == 0) {
				size_t depth = 1;
				for (const char *c = name; *c; c++)
					depth += *c == '/';
				if (depth >= LIST_DEPTH)
					out->too_deep = true;
				ck_manifest_add(&out->m, path, 'd', mode, 0, mt, NULL, NULL);
			} else if (strcmp(type, "symlink") == 0) {
				json_t *jl = json_object_get(x, "link");
				const char *link = json_string_value(jl);
				if (!link || !*link || json_string_length(jl) != strlen(link) ||
				    strlen(link) > CK_MAX_NAME)
					continue; /* unreadable link: as the full copy, which would fail it */
				ck_manifest_add(&out->m, path, 'l', mode, 0, mt, NULL, link);
			}
			/* FIFOs, sockets and devices are not kept (the full copy refuses devices) */
		}
		json_decref(arr);
	}
	ck_manifest_sort(&out->m);
	for (size_t i = 1; i < out->m.n; i++)
		if (strcmp(out->m.e[i - 1].path, out->m.e[i].path) == 0) {
			ck_manifest_free(&out->m);
			return GUEST_FAILED; /* a name twice */
		}
	return 0;
}

/* A file's bytes are taken as unchanged when its size and mtime are (as
 * rsync and make do); its mode is metadata, always from the new listing,
 * so a chmod reads nothing. */
static bool same_content(const ck_entry *a, const ck_entry *b)
{
	return a->type == 'f' && b->type == 'f' && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

/* A listing claiming more than the volumes hold goes to the full copy,
 * which enforces the cap on what it reads itself. */
static bool listing_fits(const listing *l, uint64_t cap)
{
	uint64_t total = 0;
	for (size_t i = 0; i < l->m.n; i++)
		if ((total += l->m.e[i].size) > cap)
			return false;
	return true;
}

static bool same_stat(const ck_entry *a, const ck_entry *b)
{
	return a->type == b->type && a->mode == b->mode && a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       (a->type != 'l' || strcmp(a->link, b->link) == 0);
}

typedef struct fetch_ctx {
	blob_w *b;
	brig_error *werr;
	int wrc;
} fetch_ctx;

static int fetch_cb(const char *data, size_t len, void *payload)
{
	fetch_ctx *f = payload;
	f->wrc = blob_data(f->b, data, len, &f->werr);
	return f->wrc ? BRIG_EIO : 0;
}

/* Reads one file through brig-init into the blob store. */
static int fetch_file(brig_guest *g, const char *dir, ck_entry *x, int64_t *stored, brig_error **err)
{
	blob_w b;
	int rc = blob_begin(&b, dir, x->size, err);
	if (rc) {
		blob_free(&b);
		return rc;
	}
	cleanup_free char *abs = xasprintf("/%s", x->path);
	fetch_ctx f = {.b = &b};
	/* at most the listed size: a file that grew is read again after the
	 * second listing shows it moved */
	rc = brig_guest_read(g, abs, 0, (int64_t)x->size, fetch_cb, &f, 0, err);
	if (f.wrc) {
		rc = f.wrc;
		brig__error_move(err, steal_pointer(&f.werr));
	} else if (rc) {
		rc = guest_failed(err);
	}
	brig_error_free(f.werr);
	if (!rc)
		rc = blob_end(&b, NULL, x->digest, err);
	if (!rc) {
		x->size = b.size; /* what was read; a later listing says whether it moved on */
		*stored += (int64_t)b.size;
	}
	blob_free(&b);
	return rc;
}

/* Many small files: several READs in flight over the one relay hide its
 * round trip (the handle is made for concurrent requests). */
#define FETCH_THREADS 8
/* Up to this many files read, each is stat'ed again instead of listing
 * the whole tree again. */
#define RESTAT_MAX 64

typedef struct fetch_pool {
	brig_guest *g;
	const char *dir;
	ck_manifest *m;
	const size_t *todo;
	size_t n, next;
	int64_t stored;
	int rc;
	brig_error *err;
	pthread_mutex_t mu;
} fetch_pool;

static void *fetch_worker(void *p)
{
	fetch_pool *fp = p;
	for (;;) {
		pthread_mutex_lock(&fp->mu);
		size_t k = fp->rc ? fp->n : fp->next++;
		pthread_mutex_unlock(&fp->mu);
		if (k >= fp->n)
			return NULL;
		int64_t stored = 0;
		brig_error *err = NULL;
		int rc = fetch_file(fp->g, fp->dir, &fp->m->e[fp->todo[k]], &stored, &err);
		pthread_mutex_lock(&fp->mu);
		fp->stored += stored;
		if (rc && !fp->rc) {
			fp->rc = rc;
			fp->err = steal_pointer(&err);
		}
		pthread_mutex_unlock(&fp->mu);
		brig_error_free(err);
	}
}

static int fetch_all(brig_guest *g, const char *dir, ck_manifest *m, const size_t *todo, size_t n, int64_t *stored,
		     brig_error **err)
{
	fetch_pool fp = {.g = g, .dir = dir, .m = m, .todo = todo, .n = n};
	pthread_mutex_init(&fp.mu, NULL);
	pthread_t th[FETCH_THREADS];
	size_t nth = 0;
	/* one file (or a few) needs no threads */
	for (size_t i = 0; n > 4 && i < FETCH_THREADS && i < n; i++)
		if (pthread_create(&th[nth], NULL, fetch_worker, &fp) == 0)
			nth++;
	fetch_worker(&fp);
	for (size_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&fp.mu);
	*stored += fp.stored;
	if (fp.rc == GUEST_FAILED)
		brig_error_free(fp.err);
	else if (fp.rc)
		brig__error_move(err, fp.err);
	return fp.rc;
}

/* ---- many files: one paused archive copy instead of a read each ---- */

/* Above this many files to read, one archive GET of both volumes (paused,
 * like the full copy) beats a relay round trip per file. */
#define BULK_MIN 256

static void rm_tree_at(int dfd, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
		return;
	int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = sub >= 0 ? fdopendir(sub) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			rm_tree_at(dirfd(d), de->d_name);
	if (d)
		closedir(d);
	else if (sub >= 0)
		close(sub);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Hashes the staged file and links it in as its blob. */
static int stage_to_blob(int stage_fd, const char *dir, ck_entry *x, int64_t *stored, brig_error **err)
{
	/* the archive is the container's: no symlink on the way is followed */
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, stage_fd, x->path, &how, sizeof how);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		/* gone or replaced since the listing: never taken as it was
		 * listed; the next listing differs and the copy goes round again */
		x->size = UINT64_MAX;
		return 0;
	}
	hasher h;
	int rc = hasher_init(&h, err);
	char buf[1 << 16];
	uint64_t size = 0;
	for (ssize_t n; rc == 0 && (n = read(fd, buf, sizeof buf)) != 0;) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint: reading a staged file: %s",
					     strerror(errno));
			break;
		}
		EVP_DigestUpdate(h.ctx, buf, (size_t)n);
		size += (uint64_t)n;
	}
	if (rc) {
		hasher_free(&h);
		close(fd);
		return rc;
	}
	hasher_final(&h, x->digest);
	x->size = size;
	fchmod(fd, 0400);
	sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	cleanup_free char *sub = xasprintf("%s/blobs/%.2s", dir, x->digest);
	cleanup_free char *bd = xasprintf("%s/blobs", dir);
	mkdir(bd, 0700);
	mkdir(sub, 0700);
	cleanup_free char *final = blob_path(dir, x->digest);
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, final, AT_SYMLINK_FOLLOW) == 0)
		*stored += (int64_t)size;
	else if (errno != EEXIST)
		rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint: link %s into place: %s", final,
				     strerror(errno));
	close(fd);
	return rc;
}

static int bulk_fetch(brig_engine *e, const brig_computer *c, const char *dir, ck_manifest *m, const size_t *todo,
		      size_t n, uint64_t cap, int64_t *stored, brig_error **err)
{
	cleanup_free char *stage = xasprintf("%s/.stage-XXXXXX", dir);
	if (!mkdtemp(stage))
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot create a directory in %s: %s", dir,
				       strerror(errno));
	/* the same marker as the full copy's: a checkpoint that finds the
	 * computer paused by a process that died thaws it */
	cleanup_free char *marker = xasprintf("%s/.paused-%s", dir, c->id);
	int mfd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (mfd >= 0) {
		char pid[32];
		int pl = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
		brig_write_all(mfd, pid, (size_t)pl);
		close(mfd);
	}
	int rc = brig_engine_container_pause(e, c->id, NULL);
	if (rc) {
		unlink(marker);
		rmdir(stage);
		return GUEST_FAILED;
	}
	static const char *const roots[] = {"/workspace", "/runtime"};
	for (size_t r = 0; r < 2 && rc == 0; r++) {
		brig_tar_extract_opts xo = BRIG_TAR_EXTRACT_OPTS_INIT;
		xo.allow_symlinks = true;
		xo.allow_hardlinks = true;
		xo.limits.max_total_bytes = cap;
		xo.limits.max_entries = 2000000;
		brig_tar_extract *x = NULL;
		brig_error *xerr = NULL;
		if (brig_tar_extract_new(&x, AT_FDCWD, stage, &xo, &xerr) == 0) {
			rc = brig_engine_archive_get(e, c->id, roots[r], NULL, brig_tar_extract_data_cb, x, NULL);
			if (brig_tar_extract_finish(x, &xerr) != 0 && rc == 0)
				rc = GUEST_FAILED;
		} else {
			rc = GUEST_FAILED;
		}
		brig_tar_extract_free(x);
		brig_error_free(xerr);
		if (rc)
			rc = GUEST_FAILED; /* what the archive could not do, the full copy says */
	}
	brig_error *uerr = NULL;
	if (brig_engine_container_unpause(e, c->id, &uerr) == 0) {
		unlink(marker);
	} else {
		/* frozen it stays, and says so: as the full copy would */
		rm_tree_at(AT_FDCWD, stage);
		brig__error_move(err, uerr);
		return BRIG_EIO;
	}
	int sfd = rc ? -1 : open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t k = 0; rc == 0 && k < n; k++)
		rc = stage_to_blob(sfd, dir, &m->e[todo[k]], stored, err);
	if (sfd >= 0)
		close(sfd);
	rm_tree_at(AT_FDCWD, stage);
	return rc;
}

/* A file at least this big is read with one archive GET of its own path
 * (dockerd reads it straight from the volume, as docker cp does: about
 * twice the relay's rate), not through brig-init. */
#define BIG_FILE ((uint64_t)8 << 20)

/* Reads file x with an archive GET of its path into a stage of its own
 * and links it in as its blob (x->size: what was read). Running, not
 * paused: what the checkpoint's stat check after the reads sees decides,
 * as for a read through brig-init. 0, or GUEST_FAILED when the archive
 * could not do it (x is then read through brig-init), or a host error. */
static int fetch_big(brig_engine *e, const brig_computer *c, const char *dir, ck_entry *x, uint64_t cap,
		     int64_t *stored, brig_error **err)
{
	cleanup_free char *stage = xasprintf("%s/.stage-XXXXXX", dir);
	if (!mkdtemp(stage))
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot create a directory in %s: %s", dir,
				       strerror(errno));
	brig_tar_extract_opts xo = BRIG_TAR_EXTRACT_OPTS_INIT;
	xo.limits.max_total_bytes = cap;
	xo.limits.max_entries = 1;
	brig_tar_extract *tx = NULL;
	brig_error *xerr = NULL;
	cleanup_free char *abs = xasprintf("/%s", x->path);
	int rc = GUEST_FAILED;
	if (brig_tar_extract_new(&tx, AT_FDCWD, stage, &xo, &xerr) == 0 &&
	    brig_engine_archive_get(e, c->id, abs, NULL, brig_tar_extract_data_cb, tx, NULL) == 0 &&
	    brig_tar_extract_finish(tx, &xerr) == 0)
		rc = 0;
	brig_tar_extract_free(tx);
	brig_error_free(xerr);
	if (rc == 0) {
		/* Docker names the one entry by the path's last component */
		const char *base = strrchr(x->path, '/');
		ck_entry one = *x;
		one.path = (char *)(base ? base + 1 : x->path);
		int sfd = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = sfd < 0 ? brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot open %s: %s", stage,
					       strerror(errno))
			     : stage_to_blob(sfd, dir, &one, stored, err);
		if (sfd >= 0)
			close(sfd);
		if (rc == 0 && one.size == UINT64_MAX)
			rc = GUEST_FAILED; /* not a regular file in the archive */
		if (rc == 0) {
			memcpy(x->digest, one.digest, sizeof x->digest);
			x->size = one.size;
		}
	}
	rm_tree_at(AT_FDCWD, stage);
	return rc;
}

int ck_cas_create(brig_engine *e, brig_store *s, const brig_computer *c, const char *dir, char **manifest_name,
		  char digest[65], int64_t *raw, int64_t *stored, brig_error **err)
{
	if (getenv("BRIG_CHECKPOINT_FULL") && *getenv("BRIG_CHECKPOINT_FULL") == '1')
		return 1;
	cleanup_json json_t *inspect = NULL;
	if (brig_engine_container_inspect(e, &inspect, c->id, NULL) != 0)
		return 1;
	json_t *state = json_object_get(inspect, "State");
	/* a frozen brig-init cannot answer: the full copy handles that */
	if (!json_is_true(json_object_get(state, "Running")) || json_is_true(json_object_get(state, "Paused")))
		return 1;
	brig_guest *g = NULL;
	if (brig_computer_guest(e, &g, c->id, NULL) != 0)
		return 1;
	int lock = lock_open(dir, LOCK_SH);
	if (lock < 0) {
		brig_guest_free(g);
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot lock %s: %s", dir, strerror(errno));
	}
	/* The previous checkpoint's manifest: its digests are reused for files
	 * whose size and mtime did not change. Under the shared
	 * lock, retention cannot remove the blobs this decides to reuse. */
	ck_manifest prev = {0};
	brig_store_checkpoint *last = NULL;
	if (brig_store_checkpoint_latest(s, &last, c->ns, c->agent, c->session, NULL) == 0 &&
	    ck_is_manifest_blob(last->blob))
		if (manifest_load(&prev, dir, last->blob, last->digest, NULL) != 0)
			prev = (ck_manifest){0}; /* unreadable: every file is read again */
	brig_store_checkpoint_free(last);

	ck_manifest fetched = {0}; /* what this run read: path, stat, digest */
	listing cur = {0};
	int rc = 0, result = 1;
	uint64_t cap = brig_checkpoint__volume_cap(e, inspect);
	*stored = 0;
	/* Without freezing (a frozen brig-init cannot read), a consistent copy
	 * is one whose listing did not move while the changed files were read:
	 * list, fetch, list again; equal listings end it. */
	if ((rc = list_tree(g, &cur, err)) != 0)
		goto out;
	for (int attempt = 0; attempt < 3 && rc == 0; attempt++) {
		if (cur.too_deep || !listing_fits(&cur, cap))
			break;
		size_t *todo = xcalloc(cur.m.n ? cur.m.n : 1, sizeof *todo);
		uint64_t *listed = xcalloc(cur.m.n ? cur.m.n : 1, sizeof *listed);
		size_t nt = 0;
		for (size_t i = 0; i < cur.m.n; i++) {
			ck_entry *x = &cur.m.e[i];
			if (x->type != 'f')
				continue;
			const ck_entry *p = ck_manifest_find(&fetched, x->path);
			if (!p || !same_content(p, x))
				p = ck_manifest_find(&prev, x->path);
			if (p && same_content(p, x) && blob_exists(dir, p->digest, p->size)) {
				memcpy(x->digest, p->digest, 65);
				continue;
			}
			listed[nt] = x->size;
			todo[nt++] = i;
		}
		if (nt >= BULK_MIN) {
			rc = bulk_fetch(e, c, dir, &cur.m, todo, nt, cap, stored, err);
		} else {
			/* big files each by an archive GET of their own (here:
			 * the engine stays on this thread), the rest through
			 * brig-init, several at once */
			size_t *small = xcalloc(nt ? nt : 1, sizeof *small);
			size_t ns = 0;
			for (size_t k = 0; k < nt && rc == 0; k++) {
				ck_entry *x = &cur.m.e[todo[k]];
				int br = x->size >= BIG_FILE ? fetch_big(e, c, dir, x, cap, stored, err) : GUEST_FAILED;
				if (br == GUEST_FAILED)
					small[ns++] = todo[k];
				else
					rc = br;
			}
			if (rc == 0)
				rc = fetch_all(g, dir, &cur.m, small, ns, stored, err);
			free(small);
		}
		for (size_t k = 0; k < nt && rc == 0; k++) {
			const ck_entry *x = &cur.m.e[todo[k]];
			ck_entry *f =
				ck_manifest_add(&fetched, x->path, 'f', x->mode, x->size, x->mtime_ns, x->digest, NULL);
			if (listed[k] != x->size)
				f->mtime_ns = INT64_MIN; /* grew or shrank while read: never reused */
		}
		ck_manifest_sort(&fetched);
		for (size_t k = 1; k < fetched.n; k++) {
			/* a path read in two attempts: the later one stands */
			if (strcmp(fetched.e[k - 1].path, fetched.e[k].path) == 0)
				fetched.e[k - 1].mtime_ns = INT64_MIN;
		}
		/* Nothing read: the listing alone is the snapshot. A few files
		 * read: each still has the stat it was listed with, so what was
		 * read is what the listing saw, and the manifest is the tree as
		 * listed — no second listing needed. */
		bool settled = rc == 0 && nt <= RESTAT_MAX;
		for (size_t k = 0; settled && k < nt; k++) {
			const ck_entry *x = &cur.m.e[todo[k]];
			cleanup_free char *abs = xasprintf("/%s", x->path);
			json_t *st = NULL;
			if (brig_guest_stat(g, &st, abs, true, 0, err) != 0) {
				rc = guest_failed(err);
				break;
			}
			const char *type = json_string_value(json_object_get(st, "type"));
			settled = type && strcmp(type, "file") == 0 && x->size == listed[k] &&
				  (uint64_t)json_integer_value(json_object_get(st, "size")) == listed[k] &&
				  json_integer_value(json_object_get(st, "mtime_ns")) == x->mtime_ns &&
				  ((unsigned)json_integer_value(json_object_get(st, "mode")) & 07777) == x->mode;
			json_decref(st);
		}
		free(todo);
		free(listed);
		if (rc)
			break;
		if (settled) {
			result = 0;
			break;
		}
		listing again = {0};
		if ((rc = list_tree(g, &again, err)) != 0)
			break;
		bool same = again.m.n == cur.m.n;
		for (size_t i = 0; same && i < cur.m.n; i++)
			same = strcmp(again.m.e[i].path, cur.m.e[i].path) == 0 && same_stat(&again.m.e[i], &cur.m.e[i]);
		if (same) {
			ck_manifest_free(&again.m);
			result = 0;
			break;
		}
		ck_manifest_free(&cur.m);
		cur = again;
	}
	if (rc == 0 && result == 0) {
		uint64_t total = 0;
		for (size_t i = 0; i < cur.m.n; i++)
			total += cur.m.e[i].size;
		*raw = (int64_t)total;
		rc = manifest_store(&cur.m, dir, digest, manifest_name, err);
		if (rc == 0) {
			struct stat st;
			cleanup_free char *mp = xasprintf("%s/%s", dir, *manifest_name);
			if (stat(mp, &st) == 0)
				*stored += st.st_size;
		}
	}
out:
	ck_manifest_free(&cur.m);
	ck_manifest_free(&fetched);
	ck_manifest_free(&prev);
	close(lock);
	brig_guest_free(g);
	return rc ? rc : result;
}

/* ---- restore ---- */

typedef struct tar_out {
	const ck_manifest *m;
	const char *dir;
	const char *prefix; /* "workspace/" or "runtime/" */
	size_t plen;
	size_t i; /* next entry */
	int fd;   /* the file being sent, -1 */
	uint64_t left, pad;
	char *buf;
	size_t have, off;
	bool ended;
} tar_out;

static ssize_t tar_reader(char *out, size_t len, void *payload, brig_error **err)
{
	tar_out *t = payload;
	for (;;) {
		if (t->off < t->have) {
			size_t k = t->have - t->off;
			if (k > len)
				k = len;
			memcpy(out, t->buf + t->off, k);
			t->off += k;
			return (ssize_t)k;
		}
		t->off = t->have = 0;
		if (t->fd >= 0 && t->left) {
			size_t want = t->left < (1 << 20) ? (size_t)t->left : (1 << 20);
			if (want > len)
				want = len;
			ssize_t n = read(t->fd, out, want);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return brig__error_set(err, BRIG_ECORRUPT, n ? errno : 0,
						       "a checkpoint blob became shorter while restored");
			t->left -= (uint64_t)n;
			return n;
		}
		if (t->fd >= 0) {
			close(t->fd);
			t->fd = -1;
			memset(t->buf, 0, (size_t)t->pad);
			t->have = (size_t)t->pad;
			continue;
		}
		if (t->ended)
			return 0;
		while (t->i < t->m->n && strncmp(t->m->e[t->i].path, t->prefix, t->plen) != 0)
			t->i++;
		if (t->i >= t->m->n) {
			memset(t->buf, 0, 1024);
			t->have = 1024;
			t->ended = true;
			continue;
		}
		const ck_entry *x = &t->m->e[t->i++];
		const char *name = x->path + t->plen;
		if (x->type == 'f') {
			cleanup_free char *p = blob_path(t->dir, x->digest);
			t->fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (t->fd < 0)
				return brig__error_set(err, BRIG_ECORRUPT, errno, "checkpoint blob %s: %s", p,
						       strerror(errno));
			t->left = x->size;
			t->pad = (512 - x->size % 512) % 512;
			t->have = ck_tar_header(t->buf, name, '0', x->mode, x->size, x->mtime_ns, NULL);
		} else if (x->type == 'd') {
			cleanup_free char *dn = xasprintf("%s/", name);
			t->have = ck_tar_header(t->buf, dn, '5', x->mode, 0, x->mtime_ns, NULL);
		} else {
			t->have = ck_tar_header(t->buf, name, '2', 0777, 0, x->mtime_ns, x->link);
		}
	}
}

/* Every blob the manifest names is there and holds what its name says. */
static int verify_blobs(const ck_manifest *m, const char *dir, brig_error **err)
{
	cleanup_free char *buf = xmalloc(1 << 18);
	const char *last = NULL;
	for (size_t i = 0; i < m->n; i++) {
		const ck_entry *x = &m->e[i];
		if (x->type != 'f' || (last && strcmp(last, x->digest) == 0))
			continue;
		cleanup_free char *p = blob_path(dir, x->digest);
		cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return brig__error_set(err, BRIG_ECORRUPT, errno, "checkpoint blob %s is missing: %s", p,
					       strerror(errno));
		hasher h;
		int rc = hasher_init(&h, err);
		if (rc) {
			hasher_free(&h);
			return rc;
		}
		uint64_t size = 0;
		for (;;) {
			ssize_t n = read(fd, buf, 1 << 18);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				hasher_free(&h);
				return brig__error_set(err, BRIG_EIO, errno, "reading %s: %s", p, strerror(errno));
			}
			if (n == 0)
				break;
			EVP_DigestUpdate(h.ctx, buf, (size_t)n);
			size += (uint64_t)n;
		}
		char hex[65];
		hasher_final(&h, hex);
		if (strcmp(hex, x->digest) != 0 || size != x->size)
			return brig__error_set(
				err, BRIG_ECORRUPT, 0,
				"checkpoint blob %s does not match its digest (damaged): nothing was restored", p);
		last = x->digest;
	}
	return 0;
}

int ck_cas_restore(brig_engine *e, const char *dir, const brig_store_checkpoint *cp, const char *ref, brig_error **err)
{
	ck_manifest m = {0};
	int rc = manifest_load(&m, dir, cp->blob, cp->digest, err);
	if (rc)
		return brig__error_prefix(err, rc, "checkpoint %lld", (long long)cp->id);
	/* Every digest before the first byte lands: a damaged checkpoint changes nothing. */
	if ((rc = verify_blobs(&m, dir, err)) != 0) {
		ck_manifest_free(&m);
		return brig__error_prefix(err, rc, "checkpoint %lld", (long long)cp->id);
	}
	static const char *const prefixes[] = {"workspace/", "runtime/"};
	static const char *const targets[] = {"/workspace", "/runtime"};
	char *buf = xmalloc(CK_TAR_HDR_MAX + 1024);
	for (size_t r = 0; r < 2 && rc == 0; r++) {
		tar_out t = {
			.m = &m, .dir = dir, .prefix = prefixes[r], .plen = strlen(prefixes[r]), .fd = -1, .buf = buf};
		rc = brig_engine_archive_put(e, ref, targets[r], tar_reader, &t, err);
		if (t.fd >= 0)
			close(t.fd);
	}
	free(buf);
	ck_manifest_free(&m);
	return rc ? brig__error_prefix(err, rc, "restore checkpoint %lld into %s", (long long)cp->id, ref) : 0;
}

/* ---- retention ---- */

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void ck_cas_collect(const char *dir)
{
	cleanup_free char *lp = xasprintf("%s/.gc.lock", dir);
	int lock = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0)
		return;
	/* A checkpoint holds the lock shared from choosing what it reuses until
	 * its manifest is in place: then the blobs are left for the next time. */
	if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
		close(lock);
		return;
	}
	char **keep = NULL;
	size_t nkeep = 0, cap = 0;
	bool unsure = false;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!ck_is_manifest_blob(de->d_name))
			continue;
		ck_manifest m = {0};
		if (manifest_load(&m, dir, de->d_name, NULL, NULL) != 0) {
			unsure = true; /* never remove what a damaged manifest might name */
			break;
		}
		for (size_t i = 0; i < m.n; i++) {
			if (m.e[i].type != 'f')
				continue;
			if (nkeep == cap) {
				cap = cap ? cap * 2 : 1024;
				keep = xrealloc(keep, cap * sizeof *keep);
			}
			keep[nkeep++] = xstrdup(m.e[i].digest);
		}
		ck_manifest_free(&m);
	}
	if (d)
		closedir(d);
	if (nkeep)
		qsort(keep, nkeep, sizeof *keep, str_cmp);
	cleanup_free char *bd = xasprintf("%s/blobs", dir);
	DIR *top = unsure ? NULL : opendir(bd);
	while (top && (de = readdir(top))) {
		if (strlen(de->d_name) != 2 || de->d_name[0] == '.')
			continue;
		cleanup_free char *sub = xasprintf("%s/%s", bd, de->d_name);
		DIR *sd = opendir(sub);
		struct dirent *be;
		while (sd && (be = readdir(sd))) {
			if (strlen(be->d_name) != 64)
				continue;
			char *key = be->d_name;
			if (nkeep && bsearch(&key, keep, nkeep, sizeof *keep, str_cmp))
				continue;
			unlinkat(dirfd(sd), be->d_name, 0);
		}
		if (sd)
			closedir(sd);
	}
	if (top)
		closedir(top);
	for (size_t i = 0; i < nkeep; i++)
		free(keep[i]);
	free(keep);
	close(lock);
}

/* ---- export ---- */

static int write_entry(int fd, const char *name, const void *data, uint64_t size, brig_error **err)
{
	char h[CK_TAR_HDR_MAX];
	size_t hl = ck_tar_header(h, name, '0', 0600, size, 0, NULL);
	static const char zeros[512];
	if (brig_write_all(fd, h, hl) != 0 || (data && brig_write_all(fd, data, (size_t)size) != 0) ||
	    (data && size % 512 && brig_write_all(fd, zeros, 512 - size % 512) != 0))
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint export: writing: %s", strerror(errno));
	return 0;
}

int ck_cas_export(brig_store *s, const char *dir, const brig_store_checkpoint *cp, int fd, brig_error **err)
{
	ck_manifest m = {0};
	cleanup_free char *buf = NULL;
	int rc = manifest_load(&m, dir, cp->blob, cp->digest, err);
	if (!rc)
		rc = verify_blobs(&m, dir, err);
	if (rc) {
		ck_manifest_free(&m);
		return rc;
	}
	brig_store_session *sess = NULL;
	json_t *meta = json_pack("{s:i, s:s, s:s, s:s, s:I}", "format", 1, "ns", cp->ns, "agent", cp->agent, "session",
				 cp->session, "generation", (json_int_t)cp->generation);
	if (brig_store_session_get(s, &sess, cp->ns, cp->agent, cp->session, NULL) == 0 && sess->spec_json)
		json_object_set_new(meta, "spec", json_string(sess->spec_json));
	brig_store_session_free(sess);
	cleanup_free char *mj = json_dumps(meta, JSON_COMPACT);
	json_decref(meta);
	size_t mlen = 0;
	cleanup_free char *text = ck_manifest_format(&m, &mlen);
	if ((rc = write_entry(fd, "brig-checkpoint/session.json", mj, strlen(mj), err)) != 0 ||
	    (rc = write_entry(fd, "brig-checkpoint/manifest", text, mlen, err)) != 0)
		goto out;
	/* each distinct blob once */
	char **ds = xcalloc(m.n ? m.n : 1, sizeof *ds);
	size_t nd = 0;
	for (size_t i = 0; i < m.n; i++)
		if (m.e[i].type == 'f')
			ds[nd++] = m.e[i].digest;
	if (nd)
		qsort(ds, nd, sizeof *ds, str_cmp);
	buf = xmalloc(1 << 20);
	for (size_t i = 0; i < nd && rc == 0; i++) {
		if (i && strcmp(ds[i - 1], ds[i]) == 0)
			continue;
		cleanup_free char *p = blob_path(dir, ds[i]);
		cleanup_close int bfd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (bfd < 0 || fstat(bfd, &st) < 0) {
			rc = brig__error_set(err, BRIG_ECORRUPT, errno, "checkpoint blob %s: %s", p, strerror(errno));
			break;
		}
		cleanup_free char *name = xasprintf("brig-checkpoint/blobs/%s", ds[i]);
		if ((rc = write_entry(fd, name, NULL, (uint64_t)st.st_size, err)) != 0)
			break;
		uint64_t left = (uint64_t)st.st_size;
		while (left && rc == 0) {
			ssize_t n = read(bfd, buf, left < (1 << 20) ? (size_t)left : (1 << 20));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint export: reading %s", p);
			else if (brig_write_all(fd, buf, (size_t)n) != 0)
				rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint export: writing: %s",
						     strerror(errno));
			else
				left -= (uint64_t)n;
		}
		static const char zeros[512];
		if (rc == 0 && st.st_size % 512 && brig_write_all(fd, zeros, 512 - (size_t)(st.st_size % 512)) != 0)
			rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint export: writing: %s", strerror(errno));
	}
	free(ds);
	if (rc == 0) {
		static const char end[1024];
		if (brig_write_all(fd, end, sizeof end) != 0)
			rc = brig__error_set(err, BRIG_EIO, errno, "checkpoint export: writing: %s", strerror(errno));
	}
out:
	ck_manifest_free(&m);
	return rc;
}

/* ---- import ---- */

typedef struct imp {
	brig_store *s;
	const char *ns, *agent, *session; /* the caller's, or NULL */
	const char *dir;
	json_t *meta;
	blob_w b;
	bool open;
	char digest[65];
	char mdigest[65];
	int64_t stored;
} imp;

static int imp_meta(json_t *meta, void *payload, brig_error **err)
{
	imp *im = payload;
	if (json_integer_value(json_object_get(meta, "format")) != 1 || !json_is_string(json_object_get(meta, "ns")) ||
	    !json_is_string(json_object_get(meta, "agent")) || !json_is_string(json_object_get(meta, "session")))
		return brig__error_set(err, BRIG_EPROTO, 0,
				       "checkpoint archive: session.json lacks format 1, ns, agent or session");
	json_t *spec = json_object_get(meta, "spec");
	if (spec && !json_is_string(spec))
		return brig__error_set(err, BRIG_EPROTO, 0, "checkpoint archive: spec is not a string");
	if (spec) {
		/* the spec a new session would be recorded with passes brig's own
		 * rules now, not first at recover */
		json_t *j = json_loads(json_string_value(spec), JSON_REJECT_DUPLICATES, NULL);
		int rc = BRIG_EPROTO;
		if (j) {
			brig_spec sp;
			rc = brig_spec_from_json(&sp, j, err);
			brig_spec_clear(&sp); /* set up by from_json, also when it fails */
			json_decref(j);
		} else {
			brig__error_set(err, rc, 0, "checkpoint archive: spec is not JSON");
		}
		if (rc)
			return brig__error_prefix(err, rc, "checkpoint archive: its spec");
	}
	if (im->ns) {
		/* into a session the caller names: it exists, as for a blob; found
		 * out before any blob is written */
		brig_store_session *r = NULL;
		int rc = brig_store_session_get(im->s, &r, im->ns, im->agent, im->session, err);
		brig_store_session_free(r);
		if (rc == BRIG_ENOTFOUND)
			return brig__error_set(err, BRIG_ENOTFOUND, 0,
					       "no session %s/%s/%s in the store: start it with brig up, or import "
					       "without naming a session to take the archive's own",
					       im->ns, im->agent, im->session);
		if (rc)
			return rc;
	}
	im->meta = json_incref(meta);
	return 0;
}

static int imp_manifest(const ck_manifest *m, const char *digest, void *payload, brig_error **err)
{
	(void)m, (void)err;
	imp *im = payload;
	memcpy(im->mdigest, digest, 65);
	return 0;
}

static int imp_begin(const char *digest, uint64_t size, void *payload, brig_error **err)
{
	imp *im = payload;
	memcpy(im->digest, digest, 65);
	im->open = true;
	return blob_begin(&im->b, im->dir, size, err);
}

static int imp_data(const void *data, size_t len, void *payload, brig_error **err)
{
	imp *im = payload;
	return blob_data(&im->b, data, len, err);
}

static int imp_end(void *payload, brig_error **err)
{
	imp *im = payload;
	char got[65];
	int rc = blob_end(&im->b, im->digest, got, err);
	im->stored += (int64_t)im->b.size;
	blob_free(&im->b);
	im->open = false;
	return rc;
}

static ssize_t fd_reader(char *buf, size_t len, void *payload, brig_error **err)
{
	int fd = *(int *)payload;
	for (;;) {
		ssize_t n = read(fd, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return brig__error_set(err, BRIG_EIO, errno, "checkpoint import: reading: %s", strerror(errno));
	}
}

int ck_cas_import(brig_store *s, const char *dir, brig_store_checkpoint **out, const char *ns, const char *agent,
		  const char *session, const char *pre, size_t pre_len, int fd, brig_error **err)
{
	imp im = {.s = s, .ns = ns, .agent = agent, .session = session, .dir = dir};
	ck_archive_sink sink = {.meta = imp_meta,
				.manifest = imp_manifest,
				.blob_begin = imp_begin,
				.blob_data = imp_data,
				.blob_end = imp_end,
				.payload = &im};
	ck_manifest m = {0};
	brig_store_session *sess = NULL;
	cleanup_free char *name = NULL;
	char digest[65];
	/* blobs go in under the shared lock, then the manifest: retention
	 * never sees a blob this import wrote without the manifest naming it */
	int lock = lock_open(dir, LOCK_SH);
	if (lock < 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint import: cannot lock %s: %s", dir,
				       strerror(errno));
	int rc = ck_archive_read(&m, pre, pre_len, fd_reader, &fd, &sink, err);
	if (im.open)
		blob_free(&im.b);
	if (rc)
		goto out;
	/* every blob it names is here now (from the archive, or already stored) */
	for (size_t i = 0; i < m.n && rc == 0; i++)
		if (m.e[i].type == 'f' && !blob_exists(dir, m.e[i].digest, m.e[i].size))
			rc = brig__error_set(
				err, BRIG_ECORRUPT, 0,
				"checkpoint archive: blob %.12s… is neither in the archive nor stored here",
				m.e[i].digest);
	if (rc || (rc = manifest_store(&m, dir, digest, &name, err)) != 0)
		goto out;
	if (strcmp(digest, im.mdigest) != 0) {
		rc = brig__error_set(err, BRIG_ECORRUPT, 0, "checkpoint archive: the manifest does not read back");
		goto out;
	}
	const char *ins = ns ? ns : json_string_value(json_object_get(im.meta, "ns"));
	const char *iag = agent ? agent : json_string_value(json_object_get(im.meta, "agent"));
	const char *ise = session ? session : json_string_value(json_object_get(im.meta, "session"));
	int64_t gen = json_integer_value(json_object_get(im.meta, "generation"));
	rc = brig_store_session_get(s, &sess, ins, iag, ise, err);
	if (rc == BRIG_ENOTFOUND && !ns) {
		/* a new store: the session comes with its spec, with no computer;
		 * brig recover (or up) restores the checkpoint into a new generation */
		if (err) {
			brig_error_free(*err);
			*err = NULL;
		}
		brig_store_session rec = {.ns = (char *)ins,
					  .agent = (char *)iag,
					  .session = (char *)ise,
					  .generation = gen > 0 ? gen : 1,
					  .state = BRIG_STORE_DESTROYED,
					  .spec_json = (char *)json_string_value(json_object_get(im.meta, "spec"))};
		rc = brig_store_session_create(s, &sess, &rec, err);
	}
	if (rc)
		goto out;
	uint64_t total = 0;
	for (size_t i = 0; i < m.n; i++)
		total += m.e[i].size;
	brig_store_checkpoint rec = {.ns = sess->ns,
				     .agent = sess->agent,
				     .session = sess->session,
				     .generation = sess->generation,
				     .digest = digest,
				     .blob = name,
				     .bytes_raw = (int64_t)total,
				     .bytes_stored = im.stored};
	rc = brig_store_checkpoint_add(s, out, &rec, err);
out:
	close(lock);
	brig_store_session_free(sess);
	json_decref(im.meta);
	ck_manifest_free(&m);
	return rc;
}
