/* test_run_unsafe.c — a hostile command's /outbox against brig_run's copy-out,
 * for every case a container can really produce (links out, links up, a link
 * where a directory was, hard links, FIFOs, long names, too many entries, a
 * sparse file bigger than the volume). Each must fail closed — or keep the
 * link inside — with nothing written outside the --out directory: a sibling
 * directory and the parent are compared before and after. The tar-level
 * cases a container cannot produce (absolute names, "..") are unit tests. */
#include "helpers/run_util.h"

/* One hostile run: parent P holding out/ (the --out DIR) and sibling/. */
typedef struct hostile {
	char *parent, *out, *sibling;
	char *outside_before; /* P's tree without out/ */
	ru_run r;
} hostile;

/* P's tree minus out/: what must never change. */
static char *outside_tree(const char *parent)
{
	cleanup_free char *all = ru_tree(parent);
	brig_buf b;
	brig_buf_init(&b, 256u << 20);
	for (char *line = all; *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
		if (strncmp(line, "out/", 4) != 0)
			brig_buf_put(&b, line, len);
		line += len;
	}
	brig_buf_puts(&b, "");
	return brig_buf_steal(&b, NULL);
}

static void hostile_prepare(hostile *h, const char *tag)
{
	memset(h, 0, sizeof *h);
	h->parent = ru_tmpdir(tag);
	h->out = xasprintf("%s/out", h->parent);
	h->sibling = xasprintf("%s/sibling", h->parent);
	assert_int_equal(mkdir(h->out, 0755), 0);
	assert_int_equal(mkdir(h->sibling, 0755), 0);
	cleanup_free char *keep = xasprintf("%s/keep.txt", h->sibling);
	ru_write_file(keep, "keep me\n");
	cleanup_free char *top = xasprintf("%s/top.txt", h->parent);
	ru_write_file(top, "top\n");
}

static void hostile_run(hostile *h, const brig_spec *spec, const char *script)
{
	free(h->outside_before);
	h->outside_before = outside_tree(h->parent);
	ru_args args = {.spec = spec, .out_dir = h->out};
	ru_run_sh(&h->r, &args, script);
}

/* Nothing outside out/ changed and the run left nothing in the daemon. */
static void hostile_check_outside(hostile *h)
{
	cleanup_free char *after = outside_tree(h->parent);
	if (strcmp(h->outside_before, after) != 0)
		fail_msg("something outside the --out directory changed.\nbefore:\n%s\nafter:\n%s", h->outside_before,
			 after);
	ru_assert_nothing_left("a hostile copy-out");
}

/* The run must have failed with code, its message naming every needle. */
static void hostile_expect_error(hostile *h, int code, const char *const *needles)
{
	if (h->r.rc != code)
		fail_msg("brig_run -> %s (%s), expected %s", brig_error_name(h->r.rc), brig_error_message(h->r.err),
			 brig_error_name(code));
	const char *msg = brig_error_message(h->r.err);
	for (; *needles; needles++)
		if (!strstr(msg, *needles))
			fail_msg("the message does not say '%s': %s", *needles, msg);
	print_message("refused: %s\n", msg);
}

static void hostile_free(hostile *h)
{
	ru_run_free(&h->r);
	ru_rmrf(h->parent);
	free(h->parent);
	free(h->out);
	free(h->sibling);
	free(h->outside_before);
}

static bool exists(const char *dir, const char *name)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, name);
	struct stat st;
	return lstat(p, &st) == 0;
}

/* ---- symlinks ---- */

static void test_symlink_to_etc_passwd(void **state)
{
	(void)state;
	struct stat pw0, pw1;
	assert_int_equal(stat("/etc/passwd", &pw0), 0);
	hostile h;
	hostile_prepare(&h, "pw");
	hostile_run(&h, NULL, "ln -s /etc/passwd /outbox/pw && echo x > /outbox/zz.txt");
	const char *n[] = {"outbox/pw", "/etc/passwd", "outside", NULL};
	hostile_expect_error(&h, BRIG_EUNSAFE, n);
	assert_false(exists(h.out, "pw"));
	hostile_check_outside(&h);
	assert_int_equal(stat("/etc/passwd", &pw1), 0);
	assert_true(pw0.st_mtim.tv_sec == pw1.st_mtim.tv_sec && pw0.st_size == pw1.st_size);
	hostile_free(&h);
}

static void test_symlink_up_the_tree(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "up");
	hostile_run(&h, NULL, "ln -s ../../.. /outbox/up && mkdir /outbox/d && ln -s ../../sibling /outbox/d/sib");
	const char *n[] = {"outside the destination", NULL};
	hostile_expect_error(&h, BRIG_EUNSAFE, n);
	assert_false(exists(h.out, "up"));
	assert_false(exists(h.out, "d/sib"));
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* `ln -s /tmp d`: a directory-looking symlink out of the tree. Docker's
 * archive never lists entries under a symlink (it does not follow it), so
 * the link itself is what must be refused. */
static void test_symlink_dir_out_refused(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "dlink");
	hostile_run(&h, NULL, "ln -s /tmp /outbox/d && ls /outbox/d/ >/dev/null");
	const char *n[] = {"outbox/d", "/tmp", NULL};
	hostile_expect_error(&h, BRIG_EUNSAFE, n);
	assert_false(exists(h.out, "d"));
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* Links that stay inside the tree are kept — as links, pointing inside. */
static void test_symlink_inside_kept(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "inlink");
	hostile_run(&h, NULL,
		    "mkdir /outbox/real && echo hi > /outbox/real/f && ln -s real /outbox/d && "
		    "ln -s real/f /outbox/fl && mkdir /outbox/x && ln -s ../real/f /outbox/x/up1");
	ru_assert_exit(&h.r, 0);
	struct {
		const char *name, *target;
	} links[] = {{"d", "real"}, {"fl", "real/f"}, {"x/up1", "../real/f"}};
	for (size_t i = 0; i < 3; i++) {
		cleanup_free char *p = xasprintf("%s/%s", h.out, links[i].name);
		char t[256];
		ssize_t n = readlink(p, t, sizeof t - 1);
		if (n < 0)
			fail_msg("%s is not a symlink: %s", links[i].name, strerror(errno));
		t[n] = '\0';
		assert_string_equal(t, links[i].target);
		/* It resolves inside out/. */
		char *rp = realpath(p, NULL);
		assert_non_null(rp);
		assert_true(strncmp(rp, h.out, strlen(h.out)) == 0);
		free(rp);
	}
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* A symlink already in DIR where the command has a directory or a file (the
 * host-side form of "a symlink swapped in for a directory"): it is replaced
 * by the real thing, never followed. */
static void test_existing_symlink_in_dir_not_followed(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "swap");
	cleanup_free char *sub = xasprintf("%s/sub", h.out);
	cleanup_free char *name = xasprintf("%s/name", h.out);
	assert_int_equal(symlink("../sibling", sub), 0);
	assert_int_equal(symlink("../sibling/keep.txt", name), 0);
	hostile_run(&h, NULL, "mkdir /outbox/sub && echo evil > /outbox/sub/evil.txt && echo new > /outbox/name");
	ru_assert_exit(&h.r, 0);
	struct stat st;
	assert_int_equal(lstat(sub, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_true(exists(h.out, "sub/evil.txt"));
	assert_false(exists(h.sibling, "evil.txt"));
	assert_int_equal(lstat(name, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	cleanup_free char *got = ru_read_file(name, NULL);
	assert_string_equal(got, "new\n");
	hostile_check_outside(&h); /* sibling/keep.txt still says "keep me" */
	hostile_free(&h);
}

/* ---- hard links ---- */

/* /outbox is its own volume: a hard link to a file outside it cannot be
 * made (EXDEV). Hard links inside /outbox arrive as hard links inside DIR. */
static void test_hardlinks(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "hl");
	hostile_run(&h, NULL,
		    "echo secret > /workspace/x; ln /workspace/x /outbox/hl; echo \"ln-out=$?\"; "
		    "ln /etc/passwd /outbox/pw 2>/dev/null; echo \"ln-etc=$?\"; "
		    "echo a > /outbox/a && ln /outbox/a /outbox/b && mkdir /outbox/d && ln /outbox/a /outbox/d/c");
	ru_assert_exit(&h.r, 0);
	assert_non_null(strstr(h.r.res.exec.out.data, "ln-out=1\n"));
	assert_non_null(strstr(h.r.res.exec.out.data, "ln-etc=1\n"));
	assert_non_null(strstr(h.r.res.exec.err.data, "Invalid cross-device link"));
	assert_false(exists(h.out, "hl"));
	assert_false(exists(h.out, "pw"));
	struct stat a, b, c;
	cleanup_free char *pa = xasprintf("%s/a", h.out);
	cleanup_free char *pb = xasprintf("%s/b", h.out);
	cleanup_free char *pc = xasprintf("%s/d/c", h.out);
	assert_int_equal(lstat(pa, &a), 0);
	assert_int_equal(lstat(pb, &b), 0);
	assert_int_equal(lstat(pc, &c), 0);
	assert_true(a.st_ino == b.st_ino && a.st_ino == c.st_ino);
	assert_int_equal(a.st_nlink, 3);
	cleanup_free char *got = ru_read_file(pc, NULL);
	assert_string_equal(got, "a\n");
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* ---- special files ---- */

static void test_fifo_refused(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "fifo");
	hostile_run(&h, NULL, "mkfifo /outbox/f && echo ok > /outbox/ok.txt");
	const char *n[] = {"outbox/f", "FIFO", NULL};
	hostile_expect_error(&h, BRIG_EUNSAFE, n);
	assert_false(exists(h.out, "f"));
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* ---- sizes ---- */

/* A chain of `levels` directories with 250-byte names under /outbox/top,
 * and a file "f" at the bottom. */
static char *deep_script(int levels)
{
	return xasprintf("d=$(printf 'n%%.0s' $(seq 250)); cd /outbox && mkdir top && cd top && "
			 "for i in $(seq %d); do mkdir $d && cd $d || exit 9; done; echo bottom > f",
			 levels);
}

static void test_long_names(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "long");
	/* "top/" + 15 × 251 + "f" = 3770 bytes below /outbox: copied intact. */
	cleanup_free char *ok = deep_script(15);
	hostile_run(&h, NULL, ok);
	ru_assert_exit(&h.r, 0);
	char comp[251];
	memset(comp, 'n', 250);
	comp[250] = '\0';
	int fd = open(h.out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = openat(fd, "top", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	for (int i = 0; i < 15 && fd >= 0; i++) {
		int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	assert_true(fd >= 0);
	int ffd = openat(fd, "f", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	assert_true(ffd >= 0);
	char buf[16] = {0};
	assert_int_equal(read(ffd, buf, sizeof buf), 7);
	assert_string_equal(buf, "bottom\n");
	close(ffd);
	close(fd);
	size_t longest = 0;
	for (size_t i = 0; i < h.r.res.output_count; i++)
		if (strlen(h.r.res.outputs[i]) > longest)
			longest = strlen(h.r.res.outputs[i]);
	assert_int_equal(longest, 4 + 15 * 251 + 1);
	hostile_check_outside(&h);
	hostile_free(&h);

	/* Deeper than PATH_MAX: two 10-level chains, one moved into the other
	 * (no shell can cd that deep). Docker's archive silently leaves out
	 * what it cannot stat past PATH_MAX, so brig never sees those names;
	 * whatever arrives must land inside DIR. */
	hostile_prepare(&h, "deeper");
	hostile_run(&h, NULL,
		    "d=$(printf 'n%.0s' $(seq 250)); "
		    "mk() { (cd /outbox && mkdir $1 && cd $1 && for i in $(seq 10); do mkdir $d && cd $d || exit 9; "
		    "done; echo bottom > f) }; mk p1 && mk p2 || exit 8; "
		    "p=/outbox/p1; for i in $(seq 10); do p=$p/$d; done; mv /outbox/p2 $p/ && echo moved");
	if (h.r.rc == 0) {
		ru_assert_exit(&h.r, 0);
		longest = 0;
		for (size_t i = 0; i < h.r.res.output_count; i++)
			if (strlen(h.r.res.outputs[i]) > longest)
				longest = strlen(h.r.res.outputs[i]);
		print_message("5 KB deep tree: copied %zu entries, the longest name %zu bytes (Docker left out the "
			      "rest)\n",
			      h.r.res.output_count, longest);
		assert_true(longest <= 4096);
	} else {
		print_message("5 KB deep tree: %s: %s\n", brig_error_name(h.r.rc), brig_error_message(h.r.err));
		assert_true(h.r.rc == BRIG_EUNSAFE || h.r.rc == BRIG_ETOOBIG);
	}
	hostile_check_outside(&h);
	hostile_free(&h);
}

static void test_too_many_entries(void **state)
{
	(void)state;
	brig_spec s;
	ru_spec(&s);
	brig_error *err = NULL;
	/* /outbox's inode limit must allow more files than the copy-out cap. */
	ASSERT_OK(brig_spec_set(&s, "workspace-inodes", "131072", &err), err);
	hostile h;
	hostile_prepare(&h, "many");
	hostile_run(&h, &s, "cd /outbox && seq 1 100050 | xargs touch && ls | wc -l");
	brig_spec_clear(&s);
	const char *n[] = {"100000", NULL};
	hostile_expect_error(&h, BRIG_ETOOBIG, n);
	print_message("100 050 entries: refused after %lld ms (copy-out %lld ms)\n", (long long)h.r.wall_ms,
		      (long long)h.r.res.copy_out_ms);
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* `truncate -s 10G` on the 256 MB /outbox succeeds (sparse). Its apparent
 * size is refused before any data is written. */
static void test_sparse_file_bigger_than_outbox(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "sparse");
	hostile_run(&h, NULL, "truncate -s 10G /outbox/sparse && echo small > /outbox/a.txt && ls -ls /outbox/sparse");
	const char *n[] = {"outbox/sparse", "10737418240", "cap", NULL};
	hostile_expect_error(&h, BRIG_ETOOBIG, n);
	print_message("10 GB sparse file: refused after %lld ms\n", (long long)h.r.wall_ms);
	uint64_t used = ru_du(h.out);
	assert_true(used < 1u << 20);
	assert_false(exists(h.out, "sparse"));
	hostile_check_outside(&h);
	hostile_free(&h);
}

/* ---- all or nothing ---- */

/* A good file, then an unsafe entry (the archive lists names in order): the
 * refused copy leaves --out exactly as it was, files already there included,
 * and leaves no temporary directory beside it. */
static void test_refused_copy_leaves_out_unchanged(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "atomic");
	cleanup_free char *old = xasprintf("%s/old.txt", h.out);
	ru_write_file(old, "old\n");
	cleanup_free char *sub = xasprintf("%s/a_dir", h.out);
	assert_int_equal(mkdir(sub, 0755), 0);
	cleanup_free char *before = ru_tree(h.out);
	hostile_run(&h, NULL,
		    "echo good > /outbox/a_good.txt && mkdir /outbox/a_dir && echo more > /outbox/a_dir/more.txt && "
		    "echo new > /outbox/old.txt && ln -s /etc/passwd /outbox/zz");
	const char *n[] = {"outbox/zz", "/etc/passwd", NULL};
	hostile_expect_error(&h, BRIG_EUNSAFE, n);
	cleanup_free char *after = ru_tree(h.out);
	if (strcmp(before, after) != 0)
		fail_msg("a refused copy changed --out.\nbefore:\n%s\nafter:\n%s", before, after);
	hostile_check_outside(&h); /* no temporary directory left beside out/ */
	hostile_free(&h);
}

/* A copy that passes is merged into an existing --out, as before: files
 * already there stay, directories are merged into, same names replaced. */
static void test_good_copy_merges_into_existing_out(void **state)
{
	(void)state;
	hostile h;
	hostile_prepare(&h, "merge");
	cleanup_free char *old = xasprintf("%s/old.txt", h.out);
	ru_write_file(old, "old\n");
	cleanup_free char *same = xasprintf("%s/same.txt", h.out);
	ru_write_file(same, "before\n");
	cleanup_free char *sub = xasprintf("%s/d", h.out);
	assert_int_equal(mkdir(sub, 0755), 0);
	cleanup_free char *kept = xasprintf("%s/d/kept.txt", h.out);
	ru_write_file(kept, "kept\n");
	hostile_run(&h, NULL, "mkdir /outbox/d && echo new > /outbox/d/new.txt && echo after > /outbox/same.txt");
	ru_assert_exit(&h.r, 0);
	cleanup_free char *got = ru_read_file(old, NULL);
	assert_string_equal(got, "old\n");
	cleanup_free char *got2 = ru_read_file(kept, NULL);
	assert_string_equal(got2, "kept\n");
	cleanup_free char *got3 = ru_read_file(same, NULL);
	assert_string_equal(got3, "after\n");
	assert_true(exists(h.out, "d/new.txt"));
	hostile_check_outside(&h);
	hostile_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symlink_to_etc_passwd),
		cmocka_unit_test(test_symlink_up_the_tree),
		cmocka_unit_test(test_symlink_dir_out_refused),
		cmocka_unit_test(test_symlink_inside_kept),
		cmocka_unit_test(test_existing_symlink_in_dir_not_followed),
		cmocka_unit_test(test_hardlinks),
		cmocka_unit_test(test_fifo_refused),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_too_many_entries),
		cmocka_unit_test(test_sparse_file_bigger_than_outbox),
		cmocka_unit_test(test_refused_copy_leaves_out_unchanged),
		cmocka_unit_test(test_good_copy_merges_into_existing_out),
	};
	return cmocka_run_group_tests(tests, ru_setup, ru_teardown);
}
