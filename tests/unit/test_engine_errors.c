/* test_engine_errors.c — how the daemon's non-2xx answers become BRIG_E codes
 * and messages, and the names of every error code. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

static void test_status_codes(void **state)
{
	static const struct {
		int status;
		int code;
	} map[] = {
		{400, BRIG_EBADREQ},   {401, BRIG_EDENIED},   {403, BRIG_EDENIED},
		{404, BRIG_ENOTFOUND}, {409, BRIG_ECONFLICT}, {500, BRIG_EDAEMON},
		{502, BRIG_EDAEMON},   {503, BRIG_EDAEMON},   {418, BRIG_EPROTO}, /* an answer the API never gives */
	};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
		brig_error *err = NULL;
		char body[128];
		int n = snprintf(body, sizeof body, "{\"message\":\"daemon says %d\"}", map[i].status);
		int r = brig_engine__status_error(map[i].status, body, (size_t)n, "inspect container web-1", &err);
		if (r != map[i].code)
			fail_msg("%d: want %s, got %s", map[i].status, brig_error_name(map[i].code),
				 brig_error_name(r));
		assert_non_null(err);
		assert_int_equal(err->code, map[i].code);
		assert_int_equal(err->http_status, map[i].status);
		char want[160];
		snprintf(want, sizeof want, "inspect container web-1: daemon says %d", map[i].status);
		assert_string_equal(err->message, want);
		brig_error_free(err);
		/* A NULL err is allowed: the code alone comes back. */
		assert_int_equal(brig_engine__status_error(map[i].status, body, (size_t)n, "x", NULL), map[i].code);
	}
}

static void test_daemon_message_kept(void **state)
{
	/* Docker's own 409 on a name clash, escapes and all. */
	static const char body[] = "{\"message\":\"Conflict. The container name \\\"/web-1\\\" is already in use by "
				   "container \\\"4fa6e0f0c678\\\". You have to remove (or rename) that container to "
				   "be able to reuse that name.\"}\n";
	brig_error *err = NULL;
	assert_int_equal(brig_engine__status_error(409, body, sizeof body - 1, "create container web-1", &err),
			 BRIG_ECONFLICT);
	ASSERT_CONTAINS(err->message, "create container web-1: ");
	ASSERT_CONTAINS(err->message, "The container name \"/web-1\" is already in use by container \"4fa6e0f0c678\"");
	assert_int_equal(err->http_status, 409);
	brig_error_free(err);

	/* The body is not NUL-terminated: only len bytes count. */
	static const char padded[] = "{\"message\":\"No such container: abc\"}GARBAGE";
	err = NULL;
	assert_int_equal(brig_engine__status_error(404, padded, (size_t)(strstr(padded, "GARBAGE") - padded),
						   "start container abc", &err),
			 BRIG_ENOTFOUND);
	assert_string_equal(err->message, "start container abc: No such container: abc");
	brig_error_free(err);
}

static void test_non_json_body(void **state)
{
	brig_error *err = NULL;
	static const char text[] = "page not found\n";
	assert_int_equal(brig_engine__status_error(404, text, sizeof text - 1, "inspect exec 12ab", &err),
			 BRIG_ENOTFOUND);
	ASSERT_CONTAINS(err->message, "inspect exec 12ab");
	ASSERT_CONTAINS(err->message, "404");
	ASSERT_CONTAINS(err->message, "page not found");
	assert_int_equal(err->http_status, 404);
	brig_error_free(err);

	/* JSON without a string "message": the raw text, still bounded. */
	static const char *const odd[] = {"{\"error\":\"x\"}", "{\"message\":42}", "[\"message\"]", "null",
					  "{\"message\":\"unterminated"};
	for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
		err = NULL;
		assert_int_equal(brig_engine__status_error(500, odd[i], strlen(odd[i]), "ping", &err), BRIG_EDAEMON);
		ASSERT_CONTAINS(err->message, "ping: daemon answered 500: ");
		ASSERT_CONTAINS(err->message, odd[i]);
		brig_error_free(err);
	}

	/* A huge HTML error page is cut, not copied whole into the message. */
	size_t big = 100000;
	char *page = xmalloc(big);
	memset(page, 'h', big);
	err = NULL;
	assert_int_equal(brig_engine__status_error(502, page, big, "list containers", &err), BRIG_EDAEMON);
	assert_true(strlen(err->message) < 400);
	ASSERT_CONTAINS(err->message, "list containers: daemon answered 502: hhhh");
	brig_error_free(err);
	free(page);

	/* Binary junk with NULs does not break the message. */
	static const char junk[] = "\x01\0\0\0\0\0\0\x05hello";
	err = NULL;
	assert_int_equal(brig_engine__status_error(400, junk, sizeof junk - 1, "start exec 1", &err), BRIG_EBADREQ);
	ASSERT_CONTAINS(err->message, "start exec 1: daemon answered 400");
	brig_error_free(err);
}

static void test_empty_body(void **state)
{
	brig_error *err = NULL;
	assert_int_equal(brig_engine__status_error(404, "", 0, "remove volume v", &err), BRIG_ENOTFOUND);
	assert_string_equal(err->message, "remove volume v: daemon answered 404");
	assert_int_equal(err->http_status, 404);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_engine__status_error(503, NULL, 0, "ping", &err), BRIG_EDAEMON);
	assert_string_equal(err->message, "ping: daemon answered 503");
	brig_error_free(err);
	/* A previous error in *err is replaced, not leaked. */
	err = NULL;
	brig_engine__status_error(401, NULL, 0, "first", &err);
	brig_engine__status_error(403, NULL, 0, "second", &err);
	assert_int_equal(err->code, BRIG_EDENIED);
	assert_int_equal(err->http_status, 403);
	ASSERT_CONTAINS(err->message, "second");
	brig_error_free(err);
}

static void test_error_names(void **state)
{
#define NAME(c)       \
	{             \
		c, #c \
	}
	static const struct {
		int code;
		const char *name;
	} names[] = {
		NAME(BRIG_OK),        NAME(BRIG_EINVAL),    NAME(BRIG_ENOTSENT),  NAME(BRIG_EUNCERTAIN),
		NAME(BRIG_ETIMEDOUT), NAME(BRIG_ENOTFOUND), NAME(BRIG_ECONFLICT), NAME(BRIG_EPROTO),
		NAME(BRIG_EDAEMON),   NAME(BRIG_ETOOBIG),   NAME(BRIG_EIO),       NAME(BRIG_ECANCELED),
		NAME(BRIG_ESTATE),    NAME(BRIG_EUNSAFE),   NAME(BRIG_EBADREQ),   NAME(BRIG_EDENIED),
		NAME(BRIG_ETLS),      NAME(BRIG_EBUSY),     NAME(BRIG_ESTORE),    NAME(BRIG_ECORRUPT),
	};
#undef NAME
	/* Every code from 0 down to the last has a distinct name. */
	assert_int_equal(sizeof names / sizeof *names, 1 - BRIG_ECORRUPT);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		assert_int_equal(names[i].code, -(int)i);
		assert_string_equal(brig_error_name(names[i].code), names[i].name);
	}
	assert_string_equal(brig_error_name(BRIG_ECORRUPT - 1), "BRIG_E?");
	assert_string_equal(brig_error_name(1), "BRIG_E?");
	assert_string_equal(brig_error_message(NULL), "");
	brig_error_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_codes),  cmocka_unit_test(test_daemon_message_kept),
		cmocka_unit_test(test_non_json_body), cmocka_unit_test(test_empty_body),
		cmocka_unit_test(test_error_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
