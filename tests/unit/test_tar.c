/* test_tar.c — src/tar without Docker: hostile tars the extractor and the
 * copier must refuse, positive extractions, builder round trips, checkpoint digests. */
#include "testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tar/tar.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

/* ---- a writer of arbitrary (hostile) tars in memory ---- */

typedef struct tw {
	struct archive *a;
	struct archive_entry *e;
	char *buf;
	size_t len, alloc;
} tw;

static la_ssize_t tw_write(struct archive *a, void *p, const void *buf, size_t n)
{
	(void)a;
	tw *t = p;
	if (t->len + n > t->alloc) {
		t->alloc = (t->len + n) * 2;
		t->buf = realloc(t->buf, t->alloc);
		assert_non_null(t->buf);
	}
	memcpy(t->buf + t->len, buf, n);
	t->len += n;
	return (la_ssize_t)n;
}

static tw *tw_new(void)
{
	tw *t = calloc(1, sizeof *t);
	t->a = archive_write_new();
	t->e = archive_entry_new();
	archive_write_set_format_pax_restricted(t->a);
	archive_write_set_bytes_per_block(t->a, 0);
	assert_int_equal(archive_write_open(t->a, t, NULL, tw_write, NULL), ARCHIVE_OK);
	return t;
}

static void tw_entry(tw *t, const char *name, unsigned type, unsigned mode, const void *data, size_t len,
		     const char *link, bool hard)
{
	archive_entry_clear(t->e);
	archive_entry_copy_pathname(t->e, name);
	archive_entry_set_filetype(t->e, type);
	archive_entry_set_perm(t->e, mode);
	archive_entry_set_size(t->e, (la_int64_t)len);
	archive_entry_set_mtime(t->e, 1600000000, 5);
	archive_entry_set_uid(t->e, 4242);
	archive_entry_set_gid(t->e, 4343);
	if (type == AE_IFCHR || type == AE_IFBLK)
		archive_entry_set_rdev(t->e, makedev(1, 3));
	if (link && hard)
		archive_entry_copy_hardlink(t->e, link);
	else if (link)
		archive_entry_copy_symlink(t->e, link);
	int r = archive_write_header(t->a, t->e);
	if (r < ARCHIVE_WARN)
		fail_msg("tw: %s", archive_error_string(t->a));
	if (len)
		assert_int_equal(archive_write_data(t->a, data, len), (la_ssize_t)len);
}

static void tw_file(tw *t, const char *name, const char *s)
{
	tw_entry(t, name, AE_IFREG, 0644, s, strlen(s), NULL, false);
}
static void tw_dir(tw *t, const char *name)
{
	tw_entry(t, name, AE_IFDIR, 0755, NULL, 0, NULL, false);
}
static void tw_symlink(tw *t, const char *name, const char *target)
{
	tw_entry(t, name, AE_IFLNK, 0777, NULL, 0, target, false);
}
static void tw_hardlink(tw *t, const char *name, const char *target)
{
	tw_entry(t, name, AE_IFREG, 0644, NULL, 0, target, true);
}

static char *tw_done(tw *t, size_t *len)
{
	assert_int_equal(archive_write_close(t->a), ARCHIVE_OK);
	archive_write_free(t->a);
	archive_entry_free(t->e);
	char *b = t->buf;
	*len = t->len;
	free(t);
	return b;
}

/* ---- file system helpers ---- */

static void rm_at(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		fchmodat(dfd, name, 0700, 0);
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			DIR *d = fdopendir(fd);
			bool again = true;
			while (d && again) {
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
		}
		unlinkat(dfd, name, AT_REMOVEDIR);
	} else {
		unlinkat(dfd, name, 0);
	}
}

static void rm_rf(const char *path)
{
	rm_at(AT_FDCWD, path);
}

static int count_entries(const char *path)
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

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t alloc = 4096, n = 0;
	char *b = malloc(alloc);
	size_t k;
	while ((k = fread(b + n, 1, alloc - n, f)) > 0) {
		n += k;
		if (n == alloc)
			b = realloc(b, alloc *= 2);
	}
	fclose(f);
	*len = n;
	return b;
}

static void spit(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	fchmod(fd, mode);
	close(fd);
}

/* ---- fixture: base/{a/b/dest, sibling}; dest sits deep so that "../../x"
 * and friends would land somewhere we can see ---- */

typedef struct fx {
	char base[64];
	char dest[128];
	char sibling[128];
	char p[512]; /* scratch path */
} fx;

static int setup(void **state)
{
	fx *f = calloc(1, sizeof *f);
	strcpy(f->base, "/tmp/brig-tar-test-XXXXXX");
	if (!mkdtemp(f->base))
		return -1;
	snprintf(f->p, sizeof f->p, "%s/a", f->base);
	mkdir(f->p, 0755);
	snprintf(f->p, sizeof f->p, "%s/a/b", f->base);
	mkdir(f->p, 0755);
	snprintf(f->dest, sizeof f->dest, "%s/a/b/dest", f->base);
	mkdir(f->dest, 0755);
	snprintf(f->sibling, sizeof f->sibling, "%s/sibling", f->base);
	mkdir(f->sibling, 0755);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	rm_rf(f->base);
	free(f);
	return 0;
}

static const char *P(fx *f, const char *rel)
{
	snprintf(f->p, sizeof f->p, "%s/%s", f->dest, rel);
	return f->p;
}

static void clear_dest(fx *f)
{
	rm_rf(f->dest);
	mkdir(f->dest, 0755);
}

/* Nothing may appear anywhere in base but under dest. */
static void assert_outside_untouched(fx *f)
{
	char p[256];
	assert_int_equal(count_entries(f->sibling), 0);
	assert_int_equal(count_entries(f->base), 2); /* a, sibling */
	snprintf(p, sizeof p, "%s/a", f->base);
	assert_int_equal(count_entries(p), 1);
	snprintf(p, sizeof p, "%s/a/b", f->base);
	assert_int_equal(count_entries(p), 1);
	assert_int_equal(access("/etc/x", F_OK), -1);
}

/* ---- running the extractor ---- */

typedef struct mem_reader {
	const char *p;
	size_t len, off, chunk;
} mem_reader;

static ssize_t mem_read(char *buf, size_t len, void *payload, brig_error **err)
{
	(void)err;
	mem_reader *m = payload;
	size_t n = m->len - m->off;
	if (n > len)
		n = len;
	if (m->chunk && n > m->chunk)
		n = m->chunk;
	memcpy(buf, m->p + m->off, n);
	m->off += n;
	return (ssize_t)n;
}

/* chunk 0: pull mode; else push mode in chunks of that size. */
static int extract_mem(const char *dest, const void *tar, size_t len, const brig_tar_extract_opts *o, size_t chunk,
		       brig_tar_stats *stats, brig_error **err)
{
	brig_tar_extract *x = NULL;
	int r = brig_tar_extract_new(&x, AT_FDCWD, dest, o, err);
	if (r)
		return r;
	if (chunk == 0) {
		mem_reader m = {tar, len, 0, 1000};
		r = brig_tar_extract_from_reader(x, mem_read, &m, err);
	} else {
		const char *p = tar;
		for (size_t off = 0; !r && off < len; off += chunk)
			r = brig_tar_extract_feed(x, p + off, len - off < chunk ? len - off : chunk, err);
		if (!r)
			r = brig_tar_extract_finish(x, err);
	}
	if (stats)
		*stats = *brig_tar_extract_stats(x);
	brig_tar_extract_free(x);
	return r;
}

/* Extracts in pull mode and in push mode (odd chunks) into a clean dest;
 * both must fail with code and a message containing needle, and nothing may
 * appear outside dest. */
static void expect_refused(fx *f, const char *tar, size_t len, const brig_tar_extract_opts *o, int code,
			   const char *needle)
{
	size_t chunks[] = {0, 7, 65536};
	for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
		clear_dest(f);
		brig_error *err = NULL;
		int r = extract_mem(f->dest, tar, len, o, chunks[i], NULL, &err);
		if (r != code)
			fail_msg("chunk %zu: expected %s, got %s: %s", chunks[i], brig_error_name(code),
				 brig_error_name(r), brig_error_message(err));
		if (needle)
			ASSERT_CONTAINS(brig_error_message(err), needle);
		brig_error_free(err);
		assert_outside_untouched(f);
	}
}

static brig_tar_extract_opts opts_links(void)
{
	brig_tar_extract_opts o = {
		.version = BRIG_TAR_EXTRACT_OPTS_VERSION, .allow_symlinks = true, .allow_hardlinks = true};
	return o;
}

/* ==== hostile streams ==== */

static void test_dotdot_names(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	const char *names[] = {"../../x", "a/../../x", "ok/../x", "..", "./../sibling/x"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		tw *t = tw_new();
		tw_file(t, "fine.txt", "fine");
		tw_file(t, names[i], "evil");
		size_t len;
		char *tar = tw_done(t, &len);
		expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "\"..\"");
		free(tar);
	}
}

static void test_absolute_names(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	char abs[256];
	snprintf(abs, sizeof abs, "%s/x", f->sibling);
	const char *names[] = {"/etc/x", abs, "//x"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		tw *t = tw_new();
		tw_file(t, names[i], "evil");
		size_t len;
		char *tar = tw_done(t, &len);
		expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "absolute name");
		free(tar);
	}
}

static void test_symlink_to_etc_passwd(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	/* symlink out, then a write through it */
	tw *t = tw_new();
	tw_symlink(t, "p", "/etc/passwd");
	tw_file(t, "p", "root::0:0::/:/bin/sh\n");
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "absolute path \"/etc/passwd\"");
	/* with symlinks off it is refused for being a symlink at all */
	brig_tar_extract_opts strict = BRIG_TAR_EXTRACT_OPTS_INIT;
	expect_refused(f, tar, len, &strict, BRIG_EUNSAFE, "symlinks are not allowed");
	free(tar);

	/* a symlink already in the destination is replaced, not written through */
	clear_dest(f);
	char target[256];
	snprintf(target, sizeof target, "%s/victim", f->sibling);
	spit(target, "keep", 4, 0644);
	assert_int_equal(symlink(target, P(f, "p")), 0);
	t = tw_new();
	tw_file(t, "p", "evil");
	tar = tw_done(t, &len);
	brig_error *err = NULL;
	ASSERT_OK(extract_mem(f->dest, tar, len, &strict, 3, NULL, &err), err);
	size_t n;
	char *s = slurp(target, &n);
	assert_int_equal(n, 4);
	assert_memory_equal(s, "keep", 4);
	free(s);
	struct stat st;
	assert_int_equal(lstat(P(f, "p"), &st), 0);
	assert_true(S_ISREG(st.st_mode));
	free(tar);
	unlink(target);
}

static void test_symlink_dotdot_dir(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	tw *t = tw_new();
	tw_symlink(t, "d", "..");
	tw_file(t, "d/x", "evil");
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "points outside the destination");
	free(tar);

	/* deeper: a/l -> ../../sibling climbs two levels from depth 1 */
	t = tw_new();
	tw_dir(t, "a");
	tw_symlink(t, "a/l", "../../sibling");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "points outside the destination");
	free(tar);

	/* ".." after a name could climb through another link: refused */
	t = tw_new();
	tw_dir(t, "s");
	tw_symlink(t, "s/x", "..");
	tw_symlink(t, "c", "s/x/../..");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "after a name");
	free(tar);
}

static void test_symlink_dir_swap(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	char abs[256];
	snprintf(abs, sizeof abs, "%s", f->sibling);

	/* d -> /somewhere, then d/f */
	tw *t = tw_new();
	tw_symlink(t, "d", abs);
	tw_file(t, "d/f", "evil");
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "absolute path");
	free(tar);

	/* an inside link is fine on its own, but nothing may go through it */
	t = tw_new();
	tw_dir(t, "real");
	tw_symlink(t, "d", "real");
	tw_file(t, "d/f", "evil");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "goes through a symlink");
	free(tar);

	/* a directory first, then the same name as a symlink, then through it */
	t = tw_new();
	tw_dir(t, "d");
	tw_symlink(t, "d", "real");
	tw_file(t, "d/f", "evil");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "would replace a directory");
	free(tar);

	/* a symlink swapped into the destination before the stream: the
	 * file-system walk refuses to follow it */
	t = tw_new();
	tw_file(t, "d/f", "evil");
	tar = tw_done(t, &len);
	size_t chunks[] = {0, 5};
	for (size_t i = 0; i < 2; i++) {
		clear_dest(f);
		assert_int_equal(symlink(f->sibling, P(f, "d")), 0);
		brig_error *err = NULL;
		int r = extract_mem(f->dest, tar, len, &o, chunks[i], NULL, &err);
		if (r != BRIG_EUNSAFE)
			fail_msg("got %s: %s", brig_error_name(r), brig_error_message(err));
		ASSERT_CONTAINS(brig_error_message(err), "symlink or not a directory");
		brig_error_free(err);
		assert_int_equal(count_entries(f->sibling), 0);
	}
	free(tar);
}

static void test_hardlinks_out(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	struct {
		const char *target, *needle;
	} cases[] = {
		{"/etc/passwd", "absolute path"},
		{"../../sibling/x", "\"..\""},
		{"not-in-tree", "not a regular file earlier"},
		{"dir", "not a regular file earlier"},
		{"later", "not a regular file earlier"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tw *t = tw_new();
		tw_dir(t, "dir");
		tw_hardlink(t, "h", cases[i].target);
		tw_file(t, "later", "x");
		size_t len;
		char *tar = tw_done(t, &len);
		expect_refused(f, tar, len, &o, BRIG_EUNSAFE, cases[i].needle);
		free(tar);
	}
	/* off by policy */
	tw *t = tw_new();
	tw_file(t, "f", "x");
	tw_hardlink(t, "h", "f");
	tw_hardlink(t, "sub/h2", "h"); /* a link to a link */
	size_t len;
	char *tar = tw_done(t, &len);
	brig_tar_extract_opts strict = BRIG_TAR_EXTRACT_OPTS_INIT;
	expect_refused(f, tar, len, &strict, BRIG_EUNSAFE, "hard links are not allowed");

	/* allowed: both names share the inode */
	clear_dest(f);
	brig_error *err = NULL;
	ASSERT_OK(extract_mem(f->dest, tar, len, &o, 0, NULL, &err), err);
	struct stat a, b;
	assert_int_equal(stat(P(f, "f"), &a), 0);
	assert_int_equal(stat(P(f, "h"), &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(stat(P(f, "sub/h2"), &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	free(tar);

	/* a target component over 255 bytes (but under max_name_len) is refused
	 * before any lookup: it once overflowed the tree's hash buffer */
	char longtarget[3001];
	memset(longtarget, 'A', 3000);
	longtarget[3000] = '\0';
	t = tw_new();
	tw_file(t, "f", "x");
	tw_hardlink(t, "h", longtarget);
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "component longer than 255 bytes");
	free(tar);

	/* a file that was in the destination before is not "in the stream" */
	clear_dest(f);
	spit(P(f, "pre"), "x", 1, 0644);
	t = tw_new();
	tw_hardlink(t, "h", "pre");
	tar = tw_done(t, &len);
	assert_int_equal(extract_mem(f->dest, tar, len, &o, 0, NULL, &err), BRIG_EUNSAFE);
	brig_error_free(err);
	err = NULL;
	free(tar);
}

static void test_special_files(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	struct {
		unsigned type;
		const char *needle;
	} cases[] = {
		{AE_IFIFO, "FIFO"}, {AE_IFCHR, "character device"}, {AE_IFBLK, "block device"},
		/* tar has no socket type: nothing to test for AE_IFSOCK */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tw *t = tw_new();
		tw_entry(t, "dev", cases[i].type, 0666, NULL, 0, NULL, false);
		size_t len;
		char *tar = tw_done(t, &len);
		expect_refused(f, tar, len, &o, BRIG_EUNSAFE, cases[i].needle);
		assert_int_equal(count_entries(f->dest), 0);
		free(tar);
	}
}

static void test_sparse_bomb(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	o.limits.max_total_bytes = 1 << 20;
	tw *t = tw_new();
	archive_entry_clear(t->e);
	archive_entry_copy_pathname(t->e, "sparse");
	archive_entry_set_filetype(t->e, AE_IFREG);
	archive_entry_set_perm(t->e, 0644);
	archive_entry_set_size(t->e, (la_int64_t)10 << 30);
	archive_entry_sparse_add_entry(t->e, 0, 4096);
	assert_true(archive_write_header(t->a, t->e) >= ARCHIVE_WARN);
	char block[4096];
	memset(block, 'A', sizeof block);
	assert_int_equal(archive_write_data(t->a, block, sizeof block), 4096);
	size_t len;
	char *tar = tw_done(t, &len);
	assert_true(len < 16384); /* a small stream… */
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "sparse entries are not accepted");
	assert_int_equal(count_entries(f->dest), 0); /* …refused before a byte hit the disk */
	free(tar);

	/* small and within every cap, sparse is still refused: libarchive's
	 * map costs memory per region, outside the caps */
	t = tw_new();
	archive_entry_clear(t->e);
	archive_entry_copy_pathname(t->e, "small");
	archive_entry_set_filetype(t->e, AE_IFREG);
	archive_entry_set_perm(t->e, 0644);
	archive_entry_set_size(t->e, 8192);
	archive_entry_sparse_add_entry(t->e, 0, 10);
	archive_entry_sparse_add_entry(t->e, 4096, 10);
	assert_true(archive_write_header(t->a, t->e) >= ARCHIVE_WARN);
	char logical[8192] = {0};
	assert_int_equal(archive_write_data(t->a, logical, sizeof logical), (la_ssize_t)sizeof logical);
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "sparse entries are not accepted");
	assert_int_equal(count_entries(f->dest), 0);
	free(tar);
}

/* Generates n ustar entries on the fly (no 50 MB buffer): empty files
 * "f%07u", or with same_dir the directory "d/" over and over. */
typedef struct gen {
	unsigned n, i;
	int trailer;
	bool same_dir;
} gen;

static void ustar(char h[512], const char *name, char type, uint64_t size)
{
	memset(h, 0, 512);
	snprintf(h, 100, "%s", name);
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf(h + 136, 12, "%011o", 0);
	h[156] = type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
}

static ssize_t gen_read(char *buf, size_t len, void *payload, brig_error **err)
{
	(void)err;
	gen *g = payload;
	size_t off = 0;
	while (len - off >= 512) {
		if (g->i < g->n) {
			char name[32];
			snprintf(name, sizeof name, "f%07u", g->i++);
			if (g->same_dir)
				ustar(buf + off, "d/", '5', 0);
			else
				ustar(buf + off, name, '0', 0);
		} else if (g->trailer < 2) {
			memset(buf + off, 0, 512);
			g->trailer++;
		} else {
			break;
		}
		off += 512;
	}
	return (ssize_t)off;
}

static void test_entry_cap(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	o.limits.max_entries = 50000;
	brig_tar_extract *x = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_extract_new(&x, AT_FDCWD, f->dest, &o, &err), err);
	/* One directory named 100 000 times: the cap counts entries, not
	 * inodes, and the test stays fast (the copier test below uses 100 000
	 * distinct names). */
	gen g = {.n = 100000, .same_dir = true};
	assert_int_equal(brig_tar_extract_from_reader(x, gen_read, &g, &err), BRIG_ETOOBIG);
	ASSERT_CONTAINS(brig_error_message(err), "more than 50000 entries");
	assert_true(g.i <= 50001 + 1000); /* stopped at the cap, not at the end */
	brig_error_free(err);
	brig_tar_extract_free(x);
	assert_outside_untouched(f);
	clear_dest(f);

	/* implied parent directories count too */
	o.limits.max_entries = 3;
	tw *t = tw_new();
	tw_file(t, "a/b/c/d", "x");
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "more than 3 entries");
	free(tar);
}

static void test_long_names(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	char *name = malloc(5001);
	for (int i = 0; i < 5000; i++)
		name[i] = (i % 100 == 99) ? '/' : 'n';
	name[5000] = '\0';
	tw *t = tw_new();
	tw_file(t, name, "x");
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "name is 5000 bytes, over the cap of 4096");
	free(tar);

	/* too deep */
	for (int i = 0; i < 400; i++)
		name[i] = (i % 2) ? '/' : 'd';
	name[400] = '\0';
	t = tw_new();
	tw_file(t, name, "x");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "components deep");
	free(tar);

	/* a component over 255 bytes */
	memset(name, 'c', 300);
	name[300] = '\0';
	t = tw_new();
	tw_file(t, name, "x");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "longer than 255");
	free(tar);
	free(name);
}

static void test_total_size_cap(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	o.limits.max_total_bytes = 1 << 20;
	size_t big = 600 * 1024;
	char *data = malloc(big);
	memset(data, 'z', big);
	tw *t = tw_new();
	tw_entry(t, "one", AE_IFREG, 0644, data, big, NULL, false);
	tw_entry(t, "two", AE_IFREG, 0644, data, big, NULL, false);
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "\"two\": 614400 bytes would pass the cap of 1048576");
	free(tar);
	free(data);

	/* the raw stream is capped too */
	t = tw_new();
	tw_file(t, "a", "x");
	tar = tw_done(t, &len);
	o.limits.max_stream_bytes = 600;
	expect_refused(f, tar, len, &o, BRIG_ETOOBIG, "longer than 600 bytes");
	free(tar);
}

static void test_duplicates_and_shapes(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	tw *t = tw_new();
	tw_file(t, "f", "one");
	tw_symlink(t, "f", "elsewhere");
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "appears twice");
	free(tar);

	t = tw_new();
	tw_file(t, "f", "one");
	tw_file(t, "f/g", "two");
	tar = tw_done(t, &len);
	expect_refused(f, tar, len, &o, BRIG_EUNSAFE, "goes through a file");
	free(tar);

	/* a directory in the destination is never replaced by a file */
	clear_dest(f);
	mkdir(P(f, "d"), 0755);
	t = tw_new();
	tw_file(t, "d", "x");
	tar = tw_done(t, &len);
	brig_error *err = NULL;
	assert_int_equal(extract_mem(f->dest, tar, len, &o, 0, NULL, &err), BRIG_EUNSAFE);
	ASSERT_CONTAINS(brig_error_message(err), "already exists");
	brig_error_free(err);
	free(tar);
}

static void test_malformed(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	char junk[2048];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (char)(i * 7 + 3);
	expect_refused(f, junk, sizeof junk, &o, BRIG_EPROTO, "malformed tar stream");

	/* cut in the middle of a file's data */
	size_t big = 100000;
	char *data = calloc(1, big);
	tw *t = tw_new();
	tw_entry(t, "big", AE_IFREG, 0644, data, big, NULL, false);
	size_t len;
	char *tar = tw_done(t, &len);
	expect_refused(f, tar, 50000, &o, BRIG_EPROTO, NULL);
	/* the failing entry's partial file is removed */
	assert_int_equal(access(P(f, "big"), F_OK), -1);
	free(tar);
	free(data);

	/* an empty stream is an empty archive */
	clear_dest(f);
	brig_error *err = NULL;
	ASSERT_OK(extract_mem(f->dest, "", 0, &o, 0, NULL, &err), err);
	ASSERT_OK(extract_mem(f->dest, "", 0, &o, 1, NULL, &err), err);
}

static void test_names_in_messages_are_escaped(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	tw *t = tw_new();
	tw_file(t, "../\x1b[31mred\n\"q\"", "x");
	size_t len;
	char *tar = tw_done(t, &len);
	brig_error *err = NULL;
	assert_int_equal(extract_mem(f->dest, tar, len, &o, 0, NULL, &err), BRIG_EUNSAFE);
	ASSERT_CONTAINS(brig_error_message(err), "\"../\\x1b[31mred\\x0a\\\"q\\\"\"");
	brig_error_free(err);
	free(tar);
}

/* ==== push-mode mechanics ==== */

static void test_feed_after_error_and_abandon(void **state)
{
	fx *f = *state;
	tw *t = tw_new();
	tw_file(t, "../x", "evil");
	size_t len;
	char *tar = tw_done(t, &len);
	brig_tar_extract *x = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_extract_new(&x, AT_FDCWD, f->dest, NULL, &err), err);
	int r = 0;
	for (size_t off = 0; !r && off < len; off++)
		r = brig_tar_extract_feed(x, tar + off, 1, &err);
	if (!r)
		r = brig_tar_extract_finish(x, &err);
	assert_int_equal(r, BRIG_EUNSAFE);
	brig_error_free(err);
	err = NULL;
	/* every later call repeats the failure */
	assert_int_equal(brig_tar_extract_feed(x, "x", 1, &err), BRIG_EUNSAFE);
	ASSERT_CONTAINS(brig_error_message(err), "\"..\"");
	brig_error_free(err);
	err = NULL;
	brig_tar_extract_free(x);

	/* abandoned mid-stream: free stops the worker (no hang, no leak) */
	t = tw_new();
	char *data = calloc(1, 300000);
	tw_entry(t, "big", AE_IFREG, 0644, data, 300000, NULL, false);
	free(data);
	free(tar);
	tar = tw_done(t, &len);
	ASSERT_OK(brig_tar_extract_new(&x, AT_FDCWD, f->dest, NULL, &err), err);
	ASSERT_OK(brig_tar_extract_feed(x, tar, 200000, &err), err);
	brig_tar_extract_free(x);

	/* the engine-shaped adapter keeps the message for finish */
	clear_dest(f);
	free(tar);
	t = tw_new();
	tw_file(t, "/abs", "evil");
	tar = tw_done(t, &len);
	ASSERT_OK(brig_tar_extract_new(&x, AT_FDCWD, f->dest, NULL, &err), err);
	r = 0;
	for (size_t off = 0; !r && off < len; off += 100)
		r = brig_tar_extract_data_cb(tar + off, len - off < 100 ? len - off : 100, x);
	assert_int_equal(brig_tar_extract_finish(x, &err), BRIG_EUNSAFE);
	ASSERT_CONTAINS(brig_error_message(err), "absolute name");
	brig_error_free(err);
	brig_tar_extract_free(x);
	free(tar);
	assert_outside_untouched(f);
}

/* ==== positive extraction ==== */

static char *binary_blob(size_t n)
{
	char *b = malloc(n);
	uint32_t s = 12345;
	for (size_t i = 0; i < n; i++) {
		s = s * 1103515245 + 12345;
		b[i] = (char)(i < 256 ? i : (s >> 16));
	}
	return b;
}

static void test_extract_good_tree(void **state)
{
	fx *f = *state;
	size_t blen = 300000;
	char *bin = binary_blob(blen);
	tw *t = tw_new();
	tw_dir(t, "outbox/");
	tw_dir(t, "outbox/nested/");
	tw_dir(t, "outbox/nested/deeper/");
	tw_dir(t, "outbox/empty-dir/");
	tw_entry(t, "outbox/nested/deeper/bin.dat", AE_IFREG, 0644, bin, blen, NULL, false);
	tw_entry(t, "outbox/empty.txt", AE_IFREG, 0644, NULL, 0, NULL, false);
	tw_file(t, "outbox/name with spaces.txt", "spaces");
	tw_file(t, "outbox/h\xc3\xa9llo w\xc3\xb6rld \xe6\x97\xa5\xe6\x9c\xac.txt", "utf8");
	tw_entry(t, "outbox/secret", AE_IFREG, 04700, "s", 1, NULL, false); /* setuid bit must go */
	tw_symlink(t, "outbox/nested/up", "../empty.txt");
	tw_symlink(t, "outbox/here", "nested/deeper/bin.dat");
	tw_entry(t, "outbox/ro-dir", AE_IFDIR, 0555, NULL, 0, NULL, false);
	tw_file(t, "outbox/ro-dir/inside", "written before the dir went read-only");
	size_t len;
	char *tar = tw_done(t, &len);

	size_t chunks[] = {1, 0, 4096};
	for (size_t c = 0; c < 3; c++) {
		clear_dest(f);
		brig_tar_extract_opts o = opts_links();
		o.strip_components = 1;
		brig_tar_stats st = {0};
		brig_error *err = NULL;
		ASSERT_OK(extract_mem(f->dest, tar, len, &o, chunks[c], &st, &err), err);
		assert_int_equal(st.entries, 13);
		assert_int_equal(st.skipped, 1);
		assert_int_equal(st.files, 6);
		assert_int_equal(st.symlinks, 2);
		assert_int_equal(st.dirs, 4);

		size_t n;
		char *s = slurp(P(f, "nested/deeper/bin.dat"), &n);
		assert_int_equal(n, blen);
		assert_memory_equal(s, bin, blen);
		free(s);
		s = slurp(P(f, "empty.txt"), &n);
		assert_int_equal(n, 0);
		free(s);
		s = slurp(P(f, "name with spaces.txt"), &n);
		assert_int_equal(n, 6);
		free(s);
		s = slurp(P(f, "h\xc3\xa9llo w\xc3\xb6rld \xe6\x97\xa5\xe6\x9c\xac.txt"), &n);
		assert_non_null(s);
		assert_memory_equal(s, "utf8", 4);
		free(s);
		struct stat sb;
		assert_int_equal(stat(P(f, "secret"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0700);
		assert_int_equal(sb.st_mtim.tv_sec, 1600000000);
		assert_int_equal(stat(P(f, "empty-dir"), &sb), 0);
		assert_true(S_ISDIR(sb.st_mode));
		assert_int_equal(count_entries(P(f, "empty-dir")), 0);
		assert_int_equal(stat(P(f, "ro-dir"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0555);
		assert_int_equal(sb.st_mtim.tv_sec, 1600000000);
		assert_int_equal(access(P(f, "ro-dir/inside"), F_OK), 0);
		char lt[64] = {0};
		assert_true(readlink(P(f, "nested/up"), lt, sizeof lt - 1) > 0);
		assert_string_equal(lt, "../empty.txt");
		s = slurp(P(f, "here"), &n); /* follows inside the tree */
		assert_int_equal(n, blen);
		free(s);
		/* owners are not applied unless asked */
		assert_int_equal(lstat(P(f, "secret"), &sb), 0);
		assert_int_equal(sb.st_uid, getuid());
		assert_outside_untouched(f);
	}
	free(tar);
	free(bin);
}

static mode_t saved_umask;

static int setup_umask(void **state)
{
	saved_umask = umask(027);
	return setup(state);
}

static int teardown_umask(void **state)
{
	umask(saved_umask);
	return teardown(state);
}

/* Modes from the stream lose the umask's bits, as the user's own tools
 * would; a directory that was already in the destination is merged into
 * and keeps its mode and mtime (the entry's mtime is not applied: writing
 * "in" moves it to now). */
static void test_extract_umask_and_existing_dirs(void **state)
{
	fx *f = *state;
	tw *t = tw_new();
	tw_entry(t, "pub", AE_IFDIR, 0777, NULL, 0, NULL, false);
	tw_entry(t, "pub/w", AE_IFREG, 0666, "w", 1, NULL, false);
	tw_entry(t, "x", AE_IFREG, 0777, "x", 1, NULL, false);
	tw_entry(t, "existing", AE_IFDIR, 0777, NULL, 0, NULL, false);
	tw_entry(t, "existing/in", AE_IFREG, 0644, "i", 1, NULL, false);
	tw_entry(t, "imp/f", AE_IFREG, 0644, "f", 1, NULL, false);
	tw_entry(t, "imp", AE_IFDIR, 0711, NULL, 0, NULL, false); /* named after it was implied */
	size_t len;
	char *tar = tw_done(t, &len);

	size_t chunks[] = {0, 100};
	for (size_t c = 0; c < 2; c++) {
		clear_dest(f);
		assert_int_equal(mkdir(P(f, "existing"), 0700), 0);
		assert_int_equal(chmod(P(f, "existing"), 0700), 0);
		struct timespec ts[2] = {{.tv_sec = 1500000000}, {.tv_sec = 1500000000}};
		assert_int_equal(utimensat(AT_FDCWD, P(f, "existing"), ts, 0), 0);
		brig_tar_extract_opts o = BRIG_TAR_EXTRACT_OPTS_INIT;
		brig_error *err = NULL;
		int r = extract_mem(f->dest, tar, len, &o, chunks[c], NULL, &err);
		umask(027); /* nothing else may have changed it */
		ASSERT_OK(r, err);
		struct stat sb;
		assert_int_equal(stat(P(f, "pub"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0750);
		assert_int_equal(sb.st_mtim.tv_sec, 1600000000);
		assert_int_equal(stat(P(f, "pub/w"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0640);
		assert_int_equal(stat(P(f, "x"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0750);
		assert_int_equal(stat(P(f, "imp"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0710);
		assert_int_equal(stat(P(f, "existing"), &sb), 0);
		assert_int_equal(sb.st_mode & 07777, 0700);
		assert_int_not_equal(sb.st_mtim.tv_sec, 1600000000);
		assert_int_equal(access(P(f, "existing/in"), F_OK), 0);
	}
	free(tar);
}

/* Directory modes are applied deepest first through the parents' cached
 * fds: every level of interleaved read-only chains gets its own mode. */
static void test_extract_deep_dir_modes(void **state)
{
	fx *f = *state;
	tw *t = tw_new();
	char a[256] = "a", b[256] = "b";
	for (int d = 0; d < 30; d++) {
		tw_entry(t, a, AE_IFDIR, d % 2 ? 0500 : 0550, NULL, 0, NULL, false);
		tw_entry(t, b, AE_IFDIR, d % 2 ? 0550 : 0500, NULL, 0, NULL, false);
		strcat(a, "/x");
		strcat(b, "/y");
	}
	size_t len;
	char *tar = tw_done(t, &len);
	brig_tar_extract_opts o = BRIG_TAR_EXTRACT_OPTS_INIT;
	brig_error *err = NULL;
	ASSERT_OK(extract_mem(f->dest, tar, len, &o, 0, NULL, &err), err);
	strcpy(a, "a");
	strcpy(b, "b");
	for (int d = 0; d < 30; d++) {
		struct stat sa, sb;
		assert_int_equal(stat(P(f, a), &sa), 0);
		assert_int_equal(sa.st_mode & 0777, d % 2 ? 0500 : 0550);
		assert_int_equal(sa.st_mtim.tv_sec, 1600000000);
		assert_int_equal(stat(P(f, b), &sb), 0);
		assert_int_equal(sb.st_mode & 0777, d % 2 ? 0550 : 0500);
		strcat(a, "/x");
		strcat(b, "/y");
	}
	free(tar);
}

static void test_extract_into_fd_and_owners(void **state)
{
	fx *f = *state;
	tw *t = tw_new();
	tw_file(t, "./a.txt", "A");
	tw_file(t, "b//c.txt", "C");
	size_t len;
	char *tar = tw_done(t, &len);
	int dfd = open(f->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	brig_tar_extract_opts o = BRIG_TAR_EXTRACT_OPTS_INIT;
	o.keep_owners = geteuid() == 0;
	brig_tar_extract *x = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_extract_new(&x, dfd, NULL, &o, &err), err);
	close(dfd); /* the extractor has its own */
	ASSERT_OK(brig_tar_extract_feed(x, tar, len, &err), err);
	ASSERT_OK(brig_tar_extract_finish(x, &err), err);
	assert_int_equal(brig_tar_extract_finish(x, &err), BRIG_EINVAL);
	brig_error_free(err);
	brig_tar_extract_free(x);
	struct stat sb;
	assert_int_equal(stat(P(f, "b/c.txt"), &sb), 0);
	if (geteuid() == 0) {
		assert_int_equal(sb.st_uid, 4242);
		assert_int_equal(sb.st_gid, 4343);
	}
	free(tar);
}

/* ==== builder ==== */

static ssize_t read_all(brig_tar_reader rd, void *payload, char **out, size_t *outlen, size_t chunk, brig_error **err)
{
	size_t alloc = 65536, n = 0;
	char *b = malloc(alloc);
	for (;;) {
		if (alloc - n < chunk)
			b = realloc(b, alloc *= 2);
		ssize_t k = rd(b + n, chunk, payload, err);
		if (k < 0) {
			free(b);
			return k;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	*out = b;
	*outlen = n;
	return 0;
}

/* Compares two host trees: types, modes, contents, link targets. */
static void compare_trees(const char *a, const char *b)
{
	struct stat sa, sb;
	assert_int_equal(lstat(a, &sa), 0);
	if (lstat(b, &sb) != 0)
		fail_msg("missing in copy: %s", b);
	assert_int_equal(sa.st_mode & S_IFMT, sb.st_mode & S_IFMT);
	if (S_ISLNK(sa.st_mode)) {
		char la[512] = {0}, lb[512] = {0};
		assert_true(readlink(a, la, sizeof la - 1) > 0);
		assert_true(readlink(b, lb, sizeof lb - 1) > 0);
		assert_string_equal(la, lb);
		return;
	}
	assert_int_equal(sa.st_mode & 0777, sb.st_mode & 0777);
	if (S_ISREG(sa.st_mode)) {
		size_t na, nb;
		char *da = slurp(a, &na), *db = slurp(b, &nb);
		assert_int_equal(na, nb);
		if (na)
			assert_memory_equal(da, db, na);
		assert_int_equal(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
		free(da);
		free(db);
		return;
	}
	assert_int_equal(count_entries(a), count_entries(b));
	DIR *d = opendir(a);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char pa[1024], pb[1024];
		snprintf(pa, sizeof pa, "%s/%s", a, de->d_name);
		snprintf(pb, sizeof pb, "%s/%s", b, de->d_name);
		compare_trees(pa, pb);
	}
	closedir(d);
}

static void make_host_tree(const char *root)
{
	char p[512];
	mkdir(root, 0755);
	snprintf(p, sizeof p, "%s/sub", root);
	mkdir(p, 0750);
	snprintf(p, sizeof p, "%s/sub/deeper", root);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/empty-dir", root);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/empty", root);
	spit(p, "", 0, 0644);
	snprintf(p, sizeof p, "%s/private", root);
	spit(p, "mine", 4, 0700);
	size_t blen = 200001;
	char *bin = binary_blob(blen);
	snprintf(p, sizeof p, "%s/sub/deeper/bin.dat", root);
	spit(p, bin, blen, 0644);
	free(bin);
	snprintf(p, sizeof p, "%s/sp ace \xc3\xa9t\xc3\xa9", root);
	spit(p, "utf", 3, 0644);
	snprintf(p, sizeof p, "%s/sub/link", root);
	assert_int_equal(symlink("deeper/bin.dat", p), 0);
}

static void test_builder_round_trip(void **state)
{
	fx *f = *state;
	char host[256];
	snprintf(host, sizeof host, "%s/host", f->sibling);
	make_host_tree(host);

	brig_tar_build_opts bo = {.version = BRIG_TAR_BUILD_OPTS_VERSION, .uid = 1000, .gid = 1000};
	brig_tar_builder *b = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_builder_new(&b, &bo, &err), err);
	ASSERT_OK(brig_tar_builder_add_path(b, host, "inbox/data", &err), err);
	ASSERT_OK(brig_tar_builder_add_file(b, "inbox/note.txt", "hello", 5, 0640, &err), err);
	char *tar = NULL;
	size_t len = 0;
	ASSERT_OK((int)read_all(brig_tar_builder_reader, b, &tar, &len, 777, &err), err);
	assert_int_equal(brig_tar_builder_read(b, (char[8]){0}, 8, &err), 0); /* stays at the end */
	assert_int_equal(brig_tar_builder_add_dir(b, "late", 0755, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	const brig_tar_stats *bs = brig_tar_builder_stats(b);
	assert_int_equal(bs->files, 5);
	assert_int_equal(bs->symlinks, 1);
	assert_int_equal(bs->dirs, 4);
	brig_tar_builder_free(b);

	/* every header carries 1000:1000 */
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, tar, len), ARCHIVE_OK);
	struct archive_entry *ae;
	int n = 0, r;
	while ((r = archive_read_next_header(a, &ae)) != ARCHIVE_EOF) {
		assert_true(r >= ARCHIVE_WARN);
		assert_int_equal(archive_entry_uid(ae), 1000);
		assert_int_equal(archive_entry_gid(ae), 1000);
		assert_true(strncmp(archive_entry_pathname(ae), "inbox/", 6) == 0);
		n++;
	}
	archive_read_free(a);
	assert_int_equal(n, 10);

	/* extract and compare with the host tree */
	brig_tar_extract_opts o = opts_links();
	o.strip_components = 1;
	ASSERT_OK(extract_mem(f->dest, tar, len, &o, 1000, NULL, &err), err);
	compare_trees(host, P(f, "data"));
	size_t nn;
	char *s = slurp(P(f, "note.txt"), &nn);
	assert_int_equal(nn, 5);
	free(s);
	free(tar);
	rm_rf(host);
}

/* A host file that grows, or changes in place, while the builder streams
 * it fails the read (BRIG_EIO) instead of ending up cut in the tar. */
static void test_builder_file_changes(void **state)
{
	fx *f = *state;
	char host[256];
	snprintf(host, sizeof host, "%s/changing", f->sibling);
	size_t blen = 200000;
	char *bin = binary_blob(blen);
	for (int in_place = 0; in_place < 2; in_place++) {
		spit(host, bin, blen, 0644);
		struct timespec ts[2] = {{.tv_sec = 1500000000}, {.tv_sec = 1500000000}};
		assert_int_equal(utimensat(AT_FDCWD, host, ts, 0), 0);
		brig_tar_builder *b = NULL;
		brig_error *err = NULL;
		ASSERT_OK(brig_tar_builder_new(&b, NULL, &err), err);
		ASSERT_OK(brig_tar_builder_add_path(b, host, "changing", &err), err);
		char buf[1024];
		assert_int_equal(brig_tar_builder_read(b, buf, sizeof buf, &err), (ssize_t)sizeof buf);
		int fd = open(host, O_WRONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		if (in_place) {
			/* same size, new bytes at the end, a new mtime */
			assert_int_equal(pwrite(fd, "changed", 7, (off_t)blen - 7), 7);
			struct timespec later[2] = {{.tv_sec = 1500000001}, {.tv_sec = 1500000001}};
			assert_int_equal(futimens(fd, later), 0);
		} else {
			assert_int_equal(pwrite(fd, "grown", 5, (off_t)blen), 5);
		}
		close(fd);
		ssize_t n;
		while ((n = brig_tar_builder_read(b, buf, sizeof buf, &err)) > 0)
			;
		if (n != BRIG_EIO)
			fail_msg("in_place %d: expected EIO, got %zd: %s", in_place, n, brig_error_message(err));
		ASSERT_CONTAINS(brig_error_message(err), "changed while it was being read");
		brig_error_free(err);
		brig_tar_builder_free(b);
	}
	free(bin);
}

static void test_builder_options(void **state)
{
	fx *f = *state;
	char host[256], p[512];
	snprintf(host, sizeof host, "%s/host", f->sibling);
	make_host_tree(host);

	/* read-only inputs: 0:0 and no write bits */
	brig_tar_build_opts bo = BRIG_TAR_BUILD_OPTS_INIT;
	bo.mode_mask = 0555;
	brig_tar_builder *b = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_builder_new(&b, &bo, &err), err);
	ASSERT_OK(brig_tar_builder_add_path(b, host, "inbox", &err), err);
	char *tar = NULL;
	size_t len = 0;
	ASSERT_OK((int)read_all(brig_tar_builder_reader, b, &tar, &len, 65536, &err), err);
	brig_tar_builder_free(b);
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	archive_read_open_memory(a, tar, len);
	struct archive_entry *ae;
	int r;
	while ((r = archive_read_next_header(a, &ae)) != ARCHIVE_EOF) {
		assert_int_equal(archive_entry_uid(ae), 0);
		if (archive_entry_filetype(ae) != AE_IFLNK)
			assert_int_equal(archive_entry_perm(ae) & 0222, 0);
	}
	archive_read_free(a);
	free(tar);

	/* a FIFO on the host: refused, or skipped when asked */
	snprintf(p, sizeof p, "%s/fifo", host);
	assert_int_equal(mkfifo(p, 0644), 0);
	ASSERT_OK(brig_tar_builder_new(&b, NULL, &err), err);
	ASSERT_OK(brig_tar_builder_add_path(b, host, "in", &err), err);
	assert_int_equal(read_all(brig_tar_builder_reader, b, &tar, &len, 65536, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "a FIFO");
	brig_error_free(err);
	err = NULL;
	brig_tar_builder_free(b);
	bo = (brig_tar_build_opts){.version = BRIG_TAR_BUILD_OPTS_VERSION, .skip_special = true};
	ASSERT_OK(brig_tar_builder_new(&b, &bo, &err), err);
	ASSERT_OK(brig_tar_builder_add_path(b, host, "in", &err), err);
	ASSERT_OK((int)read_all(brig_tar_builder_reader, b, &tar, &len, 65536, &err), err);
	assert_int_equal(brig_tar_builder_stats(b)->files, 4);
	brig_tar_builder_free(b);
	free(tar);

	/* caps */
	bo = (brig_tar_build_opts){
		.version = BRIG_TAR_BUILD_OPTS_VERSION, .max_total_bytes = 1000, .skip_special = true};
	ASSERT_OK(brig_tar_builder_new(&b, &bo, &err), err);
	ASSERT_OK(brig_tar_builder_add_path(b, host, "in", &err), err);
	assert_int_equal(read_all(brig_tar_builder_reader, b, &tar, &len, 65536, &err), BRIG_ETOOBIG);
	brig_error_free(err);
	err = NULL;
	brig_tar_builder_free(b);

	/* bad archive names and missing host paths */
	ASSERT_OK(brig_tar_builder_new(&b, NULL, &err), err);
	const char *bad[] = {"/abs", "a/../b", "", ".", "./"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_int_equal(brig_tar_builder_add_dir(b, bad[i], 0755, &err), BRIG_EINVAL);
		brig_error_free(err);
		err = NULL;
	}
	assert_int_equal(brig_tar_builder_add_path(b, "/nonexistent/brig", "x", &err), BRIG_EIO);
	brig_error_free(err);
	err = NULL;
	/* in-memory entries only */
	ASSERT_OK(brig_tar_builder_add_dir(b, "d", 0700, &err), err);
	ASSERT_OK(brig_tar_builder_add_symlink(b, "d/l", "../f", &err), err);
	ASSERT_OK(brig_tar_builder_add_file(b, "f", "", 0, 0600, &err), err);
	ASSERT_OK((int)read_all(brig_tar_builder_reader, b, &tar, &len, 1, &err), err);
	brig_tar_builder_free(b);
	brig_tar_extract_opts o = opts_links();
	ASSERT_OK(extract_mem(f->dest, tar, len, &o, 0, NULL, &err), err);
	struct stat sb;
	assert_int_equal(stat(P(f, "d"), &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	assert_int_equal(stat(P(f, "d/l"), &sb), 0); /* resolves to f */
	free(tar);
	rm_rf(host);
}

/* ==== copier and restore ==== */

typedef struct membuf {
	char *p;
	size_t len, alloc;
	size_t fail_after; /* 0: never */
} membuf;

static int mem_write(const void *data, size_t len, void *payload, brig_error **err)
{
	membuf *m = payload;
	(void)err;
	if (m->fail_after && m->len + len > m->fail_after)
		return BRIG_EIO; /* like ENOSPC; the copier supplies a message */
	if (m->len + len > m->alloc) {
		m->alloc = (m->len + len) * 2;
		m->p = realloc(m->p, m->alloc);
	}
	memcpy(m->p + m->len, data, len);
	m->len += len;
	return 0;
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
	unsigned char d[32];
	unsigned int dl = 0;
	EVP_Digest(p, n, d, &dl, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static char *checkpoint_input(size_t *len)
{
	tw *t = tw_new();
	tw_dir(t, "workspace/");
	tw_entry(t, "workspace/run.sh", AE_IFREG, 04755, "#!/bin/sh\n", 10, NULL, false);
	tw_entry(t, "workspace/private", AE_IFREG, 0700, "p", 1, NULL, false);
	tw_dir(t, "workspace/empty/");
	tw_symlink(t, "workspace/cur", "run.sh");
	tw_hardlink(t, "workspace/again", "workspace/run.sh");
	char *bin = binary_blob(150000);
	tw_entry(t, "workspace/bin", AE_IFREG, 0644, bin, 150000, NULL, false);
	free(bin);
	return tw_done(t, len);
}

static brig_tar_copy_opts copy_opts(int compression)
{
	brig_tar_copy_opts co = {.version = BRIG_TAR_COPY_OPTS_VERSION,
				 .allow_symlinks = true,
				 .allow_hardlinks = true,
				 .rewrite_owner = true,
				 .uid = 1000,
				 .gid = 1000,
				 .compression = compression};
	return co;
}

/* Copies tar[0, len) as one input, pushed in chunks of 700 or pulled. */
static int copy_mem(const char *tar, size_t len, bool push, brig_error **err)
{
	brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	membuf out = {0};
	brig_tar_copy *c = NULL;
	int r = brig_tar_copy_new(&c, &co, mem_write, &out, err);
	if (!r && push) {
		for (size_t off = 0; !r && off < len; off += 700)
			r = brig_tar_copy_feed(c, tar + off, len - off < 700 ? len - off : 700, err);
		if (!r)
			r = brig_tar_copy_end_input(c, err);
	} else if (!r) {
		mem_reader m = {tar, len, 0, 1000};
		r = brig_tar_copy_from_reader(c, mem_read, &m, err);
	}
	if (!r)
		r = brig_tar_copy_finish(c, NULL, err);
	brig_tar_copy_free(c);
	free(out.p);
	return r;
}

/* A stream that stops at a block boundary before its two zero blocks —
 * between entries or inside data — is cut short, not complete: a
 * checkpoint cut there must not be stored as whole. */
static void test_cut_at_entry_boundary(void **state)
{
	fx *f = *state;
	brig_tar_extract_opts o = opts_links();
	tw *t = tw_new();
	tw_dir(t, "d/");
	tw_entry(t, "d/one", AE_IFREG, 0644, "1", 1, NULL, false);
	char block[1000];
	memset(block, 'b', sizeof block);
	tw_entry(t, "d/block", AE_IFREG, 0644, block, 512, NULL, false);
	tw_entry(t, "d/two-blocks", AE_IFREG, 0644, block, sizeof block, NULL, false);
	tw_symlink(t, "d/cur", "one");
	tw_hardlink(t, "d/again", "d/one");
	tw_entry(t, "d/empty", AE_IFREG, 0644, NULL, 0, NULL, false);
	size_t len;
	char *tar = tw_done(t, &len);
	assert_true(len % 512 == 0 && len > 1024);
	for (size_t i = 0; i < 1024; i++)
		assert_int_equal(tar[len - 1024 + i], 0);
	for (size_t cut = 512; cut <= len - 1024; cut += 512) {
		/* the extractor, push and pull */
		expect_refused(f, tar, cut, &o, BRIG_EPROTO, NULL);
		/* the copier, push and pull */
		for (int push = 0; push < 2; push++) {
			brig_error *err = NULL;
			int r = copy_mem(tar, cut, push, &err);
			if (r != BRIG_EPROTO)
				fail_msg("copy cut at %zu (push %d): expected EPROTO, got %s: %s", cut, push,
					 brig_error_name(r), brig_error_message(err));
			brig_error_free(err);
		}
	}
	/* the end marker at an entry boundary names the cause */
	brig_error *err = NULL;
	clear_dest(f);
	assert_int_equal(extract_mem(f->dest, tar, len - 1024, &o, 0, NULL, &err), BRIG_EPROTO);
	ASSERT_CONTAINS(brig_error_message(err), "without its end marker");
	brig_error_free(err);
	err = NULL;

	/* whole, with one zero block (some writers stop there), empty, and
	 * nothing but the end marker: all complete */
	size_t ok_lens[] = {len, len - 512};
	for (size_t i = 0; i < 2; i++) {
		clear_dest(f);
		ASSERT_OK(extract_mem(f->dest, tar, ok_lens[i], &o, 0, NULL, &err), err);
		clear_dest(f);
		ASSERT_OK(extract_mem(f->dest, tar, ok_lens[i], &o, 333, NULL, &err), err);
		ASSERT_OK(copy_mem(tar, ok_lens[i], false, &err), err);
		ASSERT_OK(copy_mem(tar, ok_lens[i], true, &err), err);
	}
	const char *only_marker = tar + len - 1024;
	ASSERT_OK(extract_mem(f->dest, only_marker, 1024, &o, 0, NULL, &err), err);
	ASSERT_OK(copy_mem(only_marker, 1024, true, &err), err);
	ASSERT_OK(copy_mem("", 0, true, &err), err);
	ASSERT_OK(copy_mem("", 0, false, &err), err);
	free(tar);
}

static void test_copy_reowns_and_restores(void **state)
{
	fx *f = *state;
	size_t inlen;
	char *in = checkpoint_input(&inlen);
	for (int mode = 0; mode < 2; mode++) {
		brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_ZSTD);
		membuf out = {0};
		brig_tar_copy *c = NULL;
		brig_error *err = NULL;
		ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
		if (mode == 0) {
			mem_reader m = {in, inlen, 0, 333};
			ASSERT_OK(brig_tar_copy_from_reader(c, mem_read, &m, &err), err);
		} else {
			for (size_t off = 0; off < inlen; off++)
				ASSERT_OK(brig_tar_copy_feed(c, in + off, 1, &err), err);
			ASSERT_OK(brig_tar_copy_end_input(c, &err), err);
		}
		/* a second input stream lands in the same output */
		tw *t = tw_new();
		tw_dir(t, "runtime/");
		tw_file(t, "runtime/.bashrc", "export A=1\n");
		size_t l2;
		char *in2 = tw_done(t, &l2);
		mem_reader m2 = {in2, l2, 0, 0};
		ASSERT_OK(brig_tar_copy_from_reader(c, mem_read, &m2, &err), err);
		free(in2);
		brig_tar_copy_result res;
		ASSERT_OK(brig_tar_copy_finish(c, &res, &err), err);
		brig_tar_copy_free(c);

		char want[65];
		sha256_hex(out.p, out.len, want);
		assert_string_equal(res.sha256, want);
		assert_int_equal(res.out_bytes, out.len);
		assert_true(res.tar_bytes > out.len); /* it was compressed */
		assert_int_equal(res.stats.files, 4);
		assert_int_equal(res.stats.hardlinks, 1);
		assert_int_equal(out.p[0], (char)0x28); /* zstd magic 28 b5 2f fd */

		/* store it, restore it with the digest, read it back */
		char blob[256];
		snprintf(blob, sizeof blob, "%s/blob.tar.zst", f->sibling);
		spit(blob, out.p, out.len, 0600);
		brig_tar_restore *rs = NULL;
		ASSERT_OK(brig_tar_restore_open(&rs, AT_FDCWD, blob, res.sha256, &err), err);
		char *plain = NULL;
		size_t plen = 0;
		ASSERT_OK((int)read_all(brig_tar_restore_reader, rs, &plain, &plen, 1000, &err), err);
		brig_tar_restore_free(rs);
		assert_int_equal(plen, res.tar_bytes);

		struct archive *a = archive_read_new();
		archive_read_support_format_tar(a);
		archive_read_open_memory(a, plain, plen);
		struct archive_entry *ae;
		int n = 0, r;
		while ((r = archive_read_next_header(a, &ae)) != ARCHIVE_EOF) {
			assert_true(r >= ARCHIVE_WARN);
			assert_int_equal(archive_entry_uid(ae), 1000);
			assert_int_equal(archive_entry_gid(ae), 1000);
			assert_int_equal(archive_entry_perm(ae) & 07000, 0);
			const char *nm = archive_entry_pathname(ae);
			if (!strcmp(nm, "workspace/cur"))
				assert_string_equal(archive_entry_symlink(ae), "run.sh");
			if (!strcmp(nm, "workspace/again"))
				assert_string_equal(archive_entry_hardlink(ae), "workspace/run.sh");
			if (!strcmp(nm, "workspace/private"))
				assert_int_equal(archive_entry_perm(ae), 0700);
			n++;
		}
		archive_read_free(a);
		assert_int_equal(n, 9);

		/* the restored tar extracts to the same files */
		clear_dest(f);
		brig_tar_extract_opts o = opts_links();
		ASSERT_OK(extract_mem(f->dest, plain, plen, &o, 0, NULL, &err), err);
		size_t bl;
		char *bin = slurp(P(f, "workspace/bin"), &bl), *ref = binary_blob(150000);
		assert_int_equal(bl, 150000);
		assert_memory_equal(bin, ref, bl);
		free(bin);
		free(ref);
		free(plain);
		unlink(blob);
		free(out.p);
	}
	free(in);
}

static void test_restore_refuses_corrupt(void **state)
{
	fx *f = *state;
	size_t inlen;
	char *in = checkpoint_input(&inlen);
	brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_ZSTD);
	membuf out = {0};
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	ASSERT_OK(brig_tar_copy_feed(c, in, inlen, &err), err);
	brig_tar_copy_result res;
	ASSERT_OK(brig_tar_copy_finish(c, &res, &err), err);
	brig_tar_copy_free(c);

	char blob[256];
	snprintf(blob, sizeof blob, "%s/blob", f->sibling);
	brig_tar_restore *rs = NULL;

	/* one flipped byte */
	out.p[out.len / 2] ^= 0x01;
	spit(blob, out.p, out.len, 0600);
	assert_int_equal(brig_tar_restore_open(&rs, AT_FDCWD, blob, res.sha256, &err), BRIG_ECORRUPT);
	assert_null(rs);
	ASSERT_CONTAINS(brig_error_message(err), "corrupt");
	brig_error_free(err);
	err = NULL;
	out.p[out.len / 2] ^= 0x01;

	/* truncated */
	spit(blob, out.p, out.len - 1, 0600);
	assert_int_equal(brig_tar_restore_open(&rs, AT_FDCWD, blob, res.sha256, &err), BRIG_ECORRUPT);
	brig_error_free(err);
	err = NULL;

	/* extended */
	char *longer = malloc(out.len + 1);
	memcpy(longer, out.p, out.len);
	longer[out.len] = 0;
	spit(blob, longer, out.len + 1, 0600);
	free(longer);
	assert_int_equal(brig_tar_restore_open(&rs, AT_FDCWD, blob, res.sha256, &err), BRIG_ECORRUPT);
	brig_error_free(err);
	err = NULL;

	/* intact, upper-case digest accepted; malformed digest refused */
	spit(blob, out.p, out.len, 0600);
	char upper[65];
	for (int i = 0; i < 65; i++)
		upper[i] = (char)((res.sha256[i] >= 'a' && res.sha256[i] <= 'f') ? res.sha256[i] - 32 : res.sha256[i]);
	ASSERT_OK(brig_tar_restore_open(&rs, AT_FDCWD, blob, upper, &err), err);
	brig_tar_restore_free(rs);
	rs = NULL;
	assert_int_equal(brig_tar_restore_open(&rs, AT_FDCWD, blob, "abc", &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_tar_restore_open(&rs, AT_FDCWD, "/nonexistent/blob", res.sha256, &err), BRIG_EIO);
	brig_error_free(err);
	err = NULL;

	/* altered after verification (an uncompressed blob, so only the
	 * second digest can notice): caught at the end of the stream */
	free(out.p);
	out = (membuf){0};
	co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	ASSERT_OK(brig_tar_copy_feed(c, in, inlen, &err), err);
	ASSERT_OK(brig_tar_copy_finish(c, &res, &err), err);
	brig_tar_copy_free(c);
	spit(blob, out.p, out.len, 0600);
	ASSERT_OK(brig_tar_restore_open(&rs, AT_FDCWD, blob, res.sha256, &err), err);
	int wfd = open(blob, O_WRONLY | O_CLOEXEC);
	assert_int_equal(pwrite(wfd, "X", 1, (off_t)out.len - 100), 1);
	close(wfd);
	char *plain = NULL;
	size_t plen;
	assert_int_equal(read_all(brig_tar_restore_reader, rs, &plain, &plen, 4096, &err), BRIG_ECORRUPT);
	ASSERT_CONTAINS(brig_error_message(err), "changed");
	brig_error_free(err);
	brig_tar_restore_free(rs);

	unlink(blob);
	free(out.p);
	free(in);
}

/* exclude leaves an entry and everything under it out of the copy (brig's
 * started marker in /runtime/.brig), and nothing that merely shares a
 * prefix with it. */
static void test_copy_excludes(void **state)
{
	(void)state;
	tw *t = tw_new();
	tw_dir(t, "runtime/");
	tw_dir(t, "runtime/.brig/");
	tw_file(t, "runtime/.brig/started-x", "");
	tw_file(t, "runtime/.brigx", "kept");
	tw_file(t, "runtime/.bashrc", "export A=1\n");
	size_t len;
	char *in = tw_done(t, &len);
	static const char *const exclude[] = {"runtime/.brig", NULL};
	brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	co.exclude = exclude;
	membuf out = {0};
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	mem_reader m = {in, len, 0, 100};
	ASSERT_OK(brig_tar_copy_from_reader(c, mem_read, &m, &err), err);
	brig_tar_copy_result res;
	ASSERT_OK(brig_tar_copy_finish(c, &res, &err), err);
	brig_tar_copy_free(c);
	/* ustar names sit at the start of each header block */
	bool marker = false, brigx = false, bashrc = false;
	for (size_t off = 0; off + 512 <= out.len; off += 512) {
		const char *name = out.p + off;
		if (strncmp(name, "runtime/.brig/", 14) == 0 || strcmp(name, "runtime/.brig") == 0)
			marker = true;
		if (strcmp(name, "runtime/.brigx") == 0)
			brigx = true;
		if (strcmp(name, "runtime/.bashrc") == 0)
			bashrc = true;
	}
	assert_false(marker);
	assert_true(brigx);
	assert_true(bashrc);
	free(out.p);
	free(in);
}

static void test_copy_refuses_hostile(void **state)
{
	(void)state;
	struct {
		const char *name, *link;
		unsigned type;
		bool hard;
		int code;
		const char *needle;
	} cases[] = {
		{"workspace/../../x", NULL, AE_IFREG, false, BRIG_EUNSAFE, "\"..\""},
		{"/workspace/x", NULL, AE_IFREG, false, BRIG_EUNSAFE, "absolute name"},
		{"workspace/p", "/etc/passwd", AE_IFLNK, false, BRIG_EUNSAFE, "absolute path"},
		{"workspace/p", "../../etc", AE_IFLNK, false, BRIG_EUNSAFE, "outside"},
		{"workspace/h", "/etc/passwd", AE_IFREG, true, BRIG_EUNSAFE, "absolute path"},
		{"workspace/h", "workspace/nope", AE_IFREG, true, BRIG_EUNSAFE, "not a regular file earlier"},
		{"workspace/dev", NULL, AE_IFCHR, false, BRIG_EUNSAFE, "character device"},
		{"workspace/fifo", NULL, AE_IFIFO, false, BRIG_EUNSAFE, "FIFO"},
		{"workspace/lnk/x", NULL, AE_IFREG, false, BRIG_EUNSAFE, "goes through a symlink"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tw *t = tw_new();
		tw_dir(t, "workspace/");
		tw_symlink(t, "workspace/lnk", ".");
		tw_entry(t, cases[i].name, cases[i].type, 0644, NULL, 0, cases[i].link, cases[i].hard);
		size_t len;
		char *tar = tw_done(t, &len);
		for (int mode = 0; mode < 2; mode++) {
			brig_tar_copy_opts co = copy_opts(mode ? BRIG_TAR_COMPRESS_ZSTD : BRIG_TAR_COMPRESS_NONE);
			membuf out = {0};
			brig_tar_copy *c = NULL;
			brig_error *err = NULL;
			ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
			int r;
			if (mode == 0) {
				mem_reader m = {tar, len, 0, 0};
				r = brig_tar_copy_from_reader(c, mem_read, &m, &err);
			} else {
				r = brig_tar_copy_feed(c, tar, len, &err);
				if (!r)
					r = brig_tar_copy_end_input(c, &err);
			}
			if (r != cases[i].code)
				fail_msg("case %zu: expected %s, got %s: %s", i, brig_error_name(cases[i].code),
					 brig_error_name(r), brig_error_message(err));
			ASSERT_CONTAINS(brig_error_message(err), cases[i].needle);
			brig_error_free(err);
			err = NULL;
			/* finish repeats the failure: no digest for a refused copy */
			brig_tar_copy_result res;
			assert_int_equal(brig_tar_copy_finish(c, &res, &err), cases[i].code);
			brig_error_free(err);
			brig_tar_copy_free(c);
			free(out.p);
		}
		free(tar);
	}

	/* absolute links are kept when the caller says the output only goes
	 * back into a container */
	tw *t = tw_new();
	tw_symlink(t, "venv/bin/python", "/usr/bin/python3");
	size_t len;
	char *tar = tw_done(t, &len);
	brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	co.allow_absolute_symlinks = true;
	membuf out = {0};
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	mem_reader m = {tar, len, 0, 0};
	ASSERT_OK(brig_tar_copy_from_reader(c, mem_read, &m, &err), err);
	ASSERT_OK(brig_tar_copy_finish(c, NULL, &err), err);
	brig_tar_copy_free(c);
	free(out.p);
	free(tar);
}

static void test_copy_caps_sparse_and_writer_failure(void **state)
{
	(void)state;
	/* a sparse file is refused, even within budget */
	tw *t = tw_new();
	archive_entry_clear(t->e);
	archive_entry_copy_pathname(t->e, "s");
	archive_entry_set_filetype(t->e, AE_IFREG);
	archive_entry_set_perm(t->e, 0644);
	archive_entry_set_size(t->e, 100000);
	archive_entry_sparse_add_entry(t->e, 50000, 10);
	assert_true(archive_write_header(t->a, t->e) >= ARCHIVE_WARN);
	/* libarchive takes the logical content and drops the holes */
	char *logical = calloc(1, 100000);
	memcpy(logical + 50000, "0123456789", 10);
	assert_int_equal(archive_write_data(t->a, logical, 100000), 100000);
	free(logical);
	size_t len;
	char *tar = tw_done(t, &len);
	brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	membuf out = {0};
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	mem_reader m = {tar, len, 0, 0};
	assert_int_equal(brig_tar_copy_from_reader(c, mem_read, &m, &err), BRIG_EUNSAFE);
	ASSERT_CONTAINS(brig_error_message(err), "sparse entries are not accepted");
	brig_error_free(err);
	err = NULL;
	brig_tar_copy_free(c);
	assert_int_equal(out.len, 0);
	free(out.p);

	/* the same file over a 64 KiB budget */
	co.limits.max_total_bytes = 65536;
	out = (membuf){0};
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	m = (mem_reader){tar, len, 0, 0};
	assert_int_equal(brig_tar_copy_from_reader(c, mem_read, &m, &err), BRIG_EUNSAFE);
	ASSERT_CONTAINS(brig_error_message(err), "sparse entries are not accepted");
	brig_error_free(err);
	err = NULL;
	brig_tar_copy_free(c);
	free(out.p);
	free(tar);

	/* 100 000 entries against a cap of 50 000 */
	co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	co.limits.max_entries = 50000;
	out = (membuf){0};
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	gen g = {.n = 100000};
	assert_int_equal(brig_tar_copy_from_reader(c, gen_read, &g, &err), BRIG_ETOOBIG);
	brig_error_free(err);
	err = NULL;
	brig_tar_copy_free(c);
	free(out.p);

	/* a writer that fails (disk full) fails the copy with its code */
	size_t inlen;
	char *in = checkpoint_input(&inlen);
	co = copy_opts(BRIG_TAR_COMPRESS_NONE);
	out = (membuf){.fail_after = 4096};
	ASSERT_OK(brig_tar_copy_new(&c, &co, mem_write, &out, &err), err);
	int r = brig_tar_copy_feed(c, in, inlen, &err);
	if (!r)
		r = brig_tar_copy_finish(c, NULL, &err);
	assert_int_equal(r, BRIG_EIO);
	brig_error_free(err);
	brig_tar_copy_free(c);
	free(out.p);
	free(in);
}

static void test_write_fd_and_sha256_fd(void **state)
{
	fx *f = *state;
	char path[256];
	snprintf(path, sizeof path, "%s/out", f->sibling);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	brig_tar_copy_opts co = copy_opts(BRIG_TAR_COMPRESS_ZSTD);
	co.zstd_level = 19;
	ASSERT_OK(brig_tar_copy_new(&c, &co, brig_tar_write_fd, &fd, &err), err);
	brig_tar_copy_result res;
	ASSERT_OK(brig_tar_copy_finish(c, &res, &err), err); /* no input: an empty archive */
	brig_tar_copy_free(c);
	lseek(fd, 0, SEEK_SET);
	char hex[65];
	uint64_t size;
	ASSERT_OK(brig_tar_sha256_fd(fd, hex, &size, &err), err);
	assert_string_equal(hex, res.sha256);
	assert_int_equal(size, res.out_bytes);
	close(fd);

	brig_tar_restore *rs = NULL;
	ASSERT_OK(brig_tar_restore_open(&rs, AT_FDCWD, path, hex, &err), err);
	char *plain = NULL;
	size_t plen = 0;
	ASSERT_OK((int)read_all(brig_tar_restore_reader, rs, &plain, &plen, 512, &err), err);
	assert_int_equal(plen, res.tar_bytes);
	brig_tar_restore_free(rs);
	free(plain);
	unlink(path);

	co.zstd_level = 40;
	assert_int_equal(brig_tar_copy_new(&c, &co, brig_tar_write_fd, &fd, &err), BRIG_EINVAL);
	brig_error_free(err);
}

/* Options versions: 1..current accepted; 0 and current+1 refused, naming the struct. */
static void expect_version_refused(int r, brig_error *err, const char *what)
{
	assert_int_equal(r, BRIG_EINVAL);
	assert_non_null(err);
	assert_non_null(strstr(err->message, what));
	brig_error_free(err);
}

/* i = 0: version 1 (accepted); 1: version 0; 2: current + 1 (both refused). */
static unsigned pick_version(int i, unsigned current)
{
	return i == 0 ? 1 : i == 1 ? 0 : current + 1;
}

static void test_opts_versions(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++) {
		brig_error *err = NULL;
		brig_tar_extract_opts xo = BRIG_TAR_EXTRACT_OPTS_INIT;
		xo.version = pick_version(i, BRIG_TAR_EXTRACT_OPTS_VERSION);
		brig_tar_extract *x = NULL;
		int r = brig_tar_extract_new(&x, AT_FDCWD, "/tmp", &xo, &err);
		if (i == 0) {
			ASSERT_OK(r, err);
			brig_tar_extract_free(x);
		} else {
			expect_version_refused(r, err, "tar extract options");
		}

		err = NULL;
		brig_tar_build_opts bo = BRIG_TAR_BUILD_OPTS_INIT;
		bo.version = pick_version(i, BRIG_TAR_BUILD_OPTS_VERSION);
		brig_tar_builder *b = NULL;
		r = brig_tar_builder_new(&b, &bo, &err);
		if (i == 0) {
			ASSERT_OK(r, err);
			brig_tar_builder_free(b);
		} else {
			expect_version_refused(r, err, "tar build options");
		}

		err = NULL;
		brig_tar_copy_opts co = BRIG_TAR_COPY_OPTS_INIT;
		co.version = pick_version(i, BRIG_TAR_COPY_OPTS_VERSION);
		brig_tar_copy *c = NULL;
		int fd = -1;
		r = brig_tar_copy_new(&c, &co, brig_tar_write_fd, &fd, &err);
		if (i == 0) {
			ASSERT_OK(r, err);
			brig_tar_copy_free(c);
		} else {
			expect_version_refused(r, err, "tar copy options");
		}
	}
}

/* The splitter takes 1..BRIG_TAR_SPLIT_MAX outputs (its happy path runs in
 * integration/test_checkpoint's restores). */
static void test_split_refuses_bad_count(void **state)
{
	(void)state;
	brig_tar_split *sp = NULL;
	brig_error *err = NULL;
	assert_int_equal(brig_tar_split_start(&sp, NULL, NULL, NULL, 0, &err), BRIG_EINVAL);
	assert_null(sp);
	assert_non_null(strstr(brig_error_message(err), "tar split"));
	brig_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dotdot_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_absolute_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_to_etc_passwd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_dotdot_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_dir_swap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hardlinks_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_special_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sparse_bomb, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_total_size_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicates_and_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_in_messages_are_escaped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed_after_error_and_abandon, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extract_good_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extract_umask_and_existing_dirs, setup_umask, teardown_umask),
		cmocka_unit_test_setup_teardown(test_extract_deep_dir_modes, setup_umask, teardown_umask),
		cmocka_unit_test_setup_teardown(test_extract_into_fd_and_owners, setup, teardown),
		cmocka_unit_test_setup_teardown(test_builder_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_builder_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_builder_file_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_reowns_and_restores, setup, teardown),
		cmocka_unit_test(test_copy_excludes),
		cmocka_unit_test_setup_teardown(test_restore_refuses_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_at_entry_boundary, setup, teardown),
		cmocka_unit_test(test_copy_refuses_hostile),
		cmocka_unit_test(test_copy_caps_sparse_and_writer_failure),
		cmocka_unit_test_setup_teardown(test_write_fd_and_sha256_fd, setup, teardown),
		cmocka_unit_test(test_opts_versions),
		cmocka_unit_test(test_split_refuses_bad_count),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
