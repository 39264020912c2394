/* test_checkpoint_manifest.c — the checkpoint manifest parser and the export
 * archive reader (src/checkpoint/manifest.c) on the fuzz corpus and on
 * hand-made breakage: what each refuses, and with which code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint/cas.h"
#include "util/util.h"

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/tests/fuzz/corpus/%s", BRIG_SOURCE_DIR, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	char *b = xmalloc(1 << 20);
	*len = fread(b, 1, 1 << 20, f);
	fclose(f);
	return b;
}

static int parse(const char *text, ck_manifest *m)
{
	brig_error *err = NULL;
	int rc = ck_manifest_parse(m, text, strlen(text), &err);
	brig_error_free(err);
	return rc;
}

static void test_manifest(void **state)
{
	(void)state;
	size_t len;
	cleanup_free char *tree = slurp("fuzz_ck_manifest/tree.manifest", &len);
	ck_manifest m;
	brig_error *err = NULL;
	assert_int_equal(ck_manifest_parse(&m, tree, len, &err), 0);
	assert_int_equal(m.n, 8);
	const ck_entry *sp = ck_manifest_find(&m, "workspace/sp ace");
	assert_non_null(sp);
	assert_int_equal(sp->size, 1);
	const ck_entry *l = ck_manifest_find(&m, "workspace/link");
	assert_string_equal(l->link, "d/f");
	size_t flen;
	cleanup_free char *again = ck_manifest_format(&m, &flen);
	assert_int_equal(flen, len);
	assert_memory_equal(again, tree, len);
	ck_manifest_free(&m);

	const char *H = CK_MANIFEST_MAGIC;
	const char *bad[] = {
		"brig-checkpoint-manifest 2\n",
		"f 0644 1 1 - workspace/a\n",                               /* no magic */
		"d 0755 0 1 - workspace/a",                                 /* no newline */
		"d 0755 0 1 - workspace/../a\n",                            /* .. */
		"d 0755 0 1 - workspace//a\n",                              /* empty component */
		"d 0755 0 1 - etc/passwd\n",                                /* outside the volumes */
		"d 0755 0 1 - workspace/a%00b\n",                           /* NUL */
		"d 0755 0 1 - workspace/a%zz\n",                            /* bad escape */
		"d 0755 0 1 - workspace/b\nd 0755 0 1 - workspace/a\n",     /* unsorted */
		"d 0755 0 1 - workspace/a\nd 0755 0 1 - workspace/a\n",     /* twice */
		"l 0777 0 1 - workspace/a\n",                               /* link without target */
		"d 0755 1 1 - workspace/a\n",                               /* a directory with a size */
		"f 0644 1 1 - workspace/a\n",                               /* a file without digest */
		"d 9755 0 1 - workspace/a\n",                               /* mode */
		"d 0755 0 99999999999999999999 - workspace/a\n",            /* mtime overflow */
		"x 0755 0 1 - workspace/a\n",                               /* type */
		"l 0777 0 1 - workspace/a b\nd 0755 0 1 - workspace/a/c\n", /* under a symlink */
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		cleanup_free char *t = i < 2 ? xstrdup(bad[i]) : xasprintf("%s%s", H, bad[i]);
		if (parse(t, &m) != BRIG_ECORRUPT)
			fail_msg("accepted: %s", bad[i]);
	}
	assert_true(ck_path_ok("runtime/.claude/x", 17));
	assert_false(ck_path_ok("runtime", 7));
	assert_false(ck_path_ok("workspace/.", 11));
}

typedef struct mem {
	const char *p;
	size_t left;
} mem;

static ssize_t mem_reader(char *buf, size_t len, void *payload, brig_error **err)
{
	(void)err;
	mem *s = payload;
	size_t k = len < s->left ? len : s->left;
	memcpy(buf, s->p, k);
	s->p += k;
	s->left -= k;
	return (ssize_t)k;
}

static int read_archive(const char *name, ck_manifest *m, size_t cut)
{
	size_t len;
	cleanup_free char *a = slurp(name, &len);
	if (cut)
		len = cut;
	mem in = {a + 512, len - 512};
	ck_archive_sink sink = {0};
	brig_error *err = NULL;
	int rc = ck_archive_read(m, a, 512, mem_reader, &in, &sink, &err);
	brig_error_free(err);
	return rc;
}

static void test_archive(void **state)
{
	(void)state;
	ck_manifest m;
	assert_int_equal(read_archive("fuzz_ck_archive/good.tar", &m, 0), 0);
	assert_int_equal(m.n, 8);
	ck_manifest_free(&m);
	/* a missing blob is the importer's to find (it may be stored already) */
	assert_int_equal(read_archive("fuzz_ck_archive/missing_blob.tar", &m, 0), 0);
	ck_manifest_free(&m);
	assert_int_equal(read_archive("fuzz_ck_archive/bad_digest.tar", &m, 0), BRIG_ECORRUPT);
	assert_int_equal(read_archive("fuzz_ck_archive/wrong_order.tar", &m, 0), BRIG_EPROTO);
	assert_int_equal(read_archive("fuzz_ck_archive/good.tar", &m, 3000), BRIG_EPROTO); /* truncated */
}

/* A header written by ck_tar_header reads back through the archive reader's
 * checks (checksum, ustar magic, octal size). */
static void test_tar_header(void **state)
{
	(void)state;
	char h[CK_TAR_HDR_MAX];
	size_t n = ck_tar_header(h, "brig-checkpoint/manifest", '0', 0600, 12345, 0, NULL);
	assert_int_equal(n, 512);
	assert_memory_equal(h + 257, "ustar", 5);
	char longname[300];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	n = ck_tar_header(h, longname, '0', 0644, 1, 1500000000123456789LL, NULL);
	assert_int_equal(n, 3 * 512); /* a pax header (path, mtime) first */
	assert_int_equal(h[156], 'x');
	assert_non_null(memmem(h + 512, 512, "mtime=1500000000.123456789\n", 27));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_archive),
		cmocka_unit_test(test_tar_header),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
