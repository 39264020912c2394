/* test_outdir.c — a run's copy-out lands all or nothing: the directory
 * beside --out, the rename into a missing --out, the merge into an existing
 * one, and a conflict found before anything moves. */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sandbox/outdir.h"

static char base[] = "/tmp/brig-outdir-XXXXXX";

static void put(const char *dir, const char *rel, const char *text)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void mk(const char *dir, const char *rel, mode_t mode)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, rel);
	assert_int_equal(mkdir(p, mode), 0);
}

static char *get(const char *dir, const char *rel)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, rel);
	FILE *f = fopen(p, "r");
	if (!f)
		return NULL;
	char buf[256] = {0};
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return xstrdup(buf);
}

/* Entries of base other than out: temporary directories left behind. */
static int strays(void)
{
	DIR *d = opendir(base);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "out"))
			n++;
	closedir(d);
	return n;
}

static int setup(void **state)
{
	(void)state;
	strcpy(base, "/tmp/brig-outdir-XXXXXX");
	return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	cleanup_free char *out = xasprintf("%s/out", base);
	brig_sandbox__outdir_abandon(out);
	rmdir(base);
	return 0;
}

static void test_missing_out_is_renamed(void **state)
{
	(void)state;
	cleanup_free char *out = xasprintf("%s/out/", base); /* a trailing slash too */
	cleanup_free char *tmp = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_sandbox__outdir_begin(&tmp, out, &err), err);
	assert_non_null(strstr(tmp, "/.out.brig-out-"));
	mk(tmp, "d", 0555); /* a read-only directory the command made */
	put(tmp, "a.txt", "a\n");
	ASSERT_OK(brig_sandbox__outdir_commit(tmp, out, &err), err);
	cleanup_free char *a = get(out, "a.txt");
	assert_string_equal(a, "a\n");
	assert_int_equal(strays(), 0);
}

static void test_existing_out_is_merged(void **state)
{
	(void)state;
	cleanup_free char *out = xasprintf("%s/out", base);
	mk(base, "out", 0700);
	put(out, "old.txt", "old\n");
	put(out, "same.txt", "before\n");
	mk(out, "d", 0755);
	put(out, "d/kept.txt", "kept\n");
	put(out, "was_file", "x\n");
	cleanup_free char *tmp = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_sandbox__outdir_begin(&tmp, out, &err), err);
	put(tmp, "same.txt", "after\n");
	mk(tmp, "d", 0755);
	put(tmp, "d/new.txt", "new\n");
	mk(tmp, "was_file", 0755); /* a directory replaces a file */
	put(tmp, "was_file/in.txt", "in\n");
	ASSERT_OK(brig_sandbox__outdir_commit(tmp, out, &err), err);
	cleanup_free char *o = get(out, "old.txt"), *s = get(out, "same.txt"), *k = get(out, "d/kept.txt"),
			  *n = get(out, "d/new.txt"), *w = get(out, "was_file/in.txt");
	assert_string_equal(o, "old\n");
	assert_string_equal(s, "after\n");
	assert_string_equal(k, "kept\n");
	assert_string_equal(n, "new\n");
	assert_string_equal(w, "in\n");
	struct stat st;
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700); /* an existing --out keeps its mode */
	assert_int_equal(strays(), 0);
}

/* A file where --out has a directory: refused before anything moves. */
static void test_conflict_moves_nothing(void **state)
{
	(void)state;
	cleanup_free char *out = xasprintf("%s/out", base);
	mk(base, "out", 0755);
	mk(out, "z", 0755);
	put(out, "a.txt", "old\n");
	cleanup_free char *tmp = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_sandbox__outdir_begin(&tmp, out, &err), err);
	put(tmp, "a.txt", "new\n"); /* would move first */
	put(tmp, "z", "a file\n");
	assert_int_equal(brig_sandbox__outdir_commit(tmp, out, &err), BRIG_EUNSAFE);
	assert_non_null(strstr(brig_error_message(err), "a directory of that name already exists"));
	brig_error_free(err);
	cleanup_free char *a = get(out, "a.txt");
	assert_string_equal(a, "old\n");
	assert_int_equal(strays(), 0);
}

static void test_abandon_and_unwritable_parent(void **state)
{
	(void)state;
	cleanup_free char *out = xasprintf("%s/out", base);
	cleanup_free char *tmp = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_sandbox__outdir_begin(&tmp, out, &err), err);
	mk(tmp, "ro", 0755);
	put(tmp, "ro/f", "f\n");
	cleanup_free char *ro = xasprintf("%s/ro", tmp);
	assert_int_equal(chmod(ro, 0555), 0);
	brig_sandbox__outdir_abandon(tmp);
	assert_int_equal(strays(), 0);
	free(tmp);
	tmp = NULL;
	/* No parent to make the directory in: BRIG_EIO, nothing made. */
	assert_int_equal(brig_sandbox__outdir_begin(&tmp, "/nonexistent-brig-dir/out", &err), BRIG_EIO);
	assert_null(tmp);
	brig_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_missing_out_is_renamed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_existing_out_is_merged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_conflict_moves_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abandon_and_unwritable_parent, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
