/* test_capture.c — the bounded output capture: what fits is kept whole,
 * past the limit the head and the tail are kept and the middle counted. */
#include "testutil.h"

#include <string.h>

#include "sandbox/capture.h"

static brig_capture run(size_t max, const char *const *pieces)
{
	brig_capturer c;
	brig_capturer_init(&c, max);
	for (const char *const *p = pieces; *p; p++)
		brig_capturer_add(&c, *p, strlen(*p));
	brig_capture out;
	brig_capturer_finish(&c, &out);
	return out;
}

static void expect(size_t max, const char *const *pieces, const char *want, uint64_t total)
{
	brig_capture out = run(max, pieces);
	assert_non_null(out.data);
	assert_int_equal(out.len, strlen(want));
	assert_string_equal(out.data, want);
	assert_int_equal(out.total, total);
	assert_int_equal(out.dropped, total - strlen(want));
	free(out.data);
}

static void test_capture(void **state)
{
	(void)state;
	expect(8, (const char *const[]){NULL}, "", 0);
	expect(8, (const char *const[]){"ab", NULL}, "ab", 2);
	expect(8, (const char *const[]){"abcdef", NULL}, "abcdef", 6);     /* head full, ring partly */
	expect(8, (const char *const[]){"abcdefgh", NULL}, "abcdefgh", 8); /* exactly the limit */
	expect(8, (const char *const[]){"abcdefghij", NULL}, "abcdghij", 10);
	/* The ring wraps: its oldest byte is in the middle. */
	expect(8, (const char *const[]){"abcd", "ef", "gh", "ij", "k", NULL}, "abcdhijk", 11);
	expect(8, (const char *const[]){"a", "bcdefghijklmnopqrstuvwxyz", NULL}, "abcdwxyz", 26);
	/* Binary-safe: NULs are kept (checked through len). */
	brig_capturer c;
	brig_capturer_init(&c, 4);
	brig_capturer_add(&c, "a\0b\0c\0", 6);
	brig_capture out;
	brig_capturer_finish(&c, &out);
	assert_int_equal(out.len, 4);
	assert_memory_equal(out.data, "a\0c\0", 5); /* the head "a\0", the tail "c\0" */
	assert_int_equal(out.dropped, 2);
	free(out.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
