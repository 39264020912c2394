/* test_serve.c — brig serve's parsers without a daemon: request bodies,
 * exec requests and each refusal, file paths, the tokens file and bearer
 * matching, and the mapping of brig's codes to HTTP statuses. */
#include "testutil.h"

#include <string.h>

#include "serve/frames.h"
#include "serve/serve.h"
#include "util/util.h"

static int parse_exec(const char *text, serve_exec_req *req, brig_error **err)
{
	json_t *body = NULL;
	int rc = serve_body_parse(&body, text, strlen(text), err);
	if (rc)
		return rc;
	rc = serve_exec_req_parse(req, body, err);
	if (rc == 0) {
		/* The strings are borrowed from the body: keep it for the test. */
		static json_t *keep[16];
		static size_t k;
		json_decref(keep[k % 16]);
		keep[k++ % 16] = body;
	} else {
		json_decref(body);
	}
	return rc;
}

static void test_body(void **state)
{
	(void)state;
	json_t *j = NULL;
	brig_error *err = NULL;
	assert_int_equal(serve_body_parse(&j, " \n", 2, &err), 0);
	assert_true(json_is_object(j));
	json_decref(j);
	assert_int_equal(serve_body_parse(&j, "{\"a\":", 5, &err), BRIG_EINVAL);
	assert_non_null(strstr(err->message, "malformed JSON"));
	assert_null(j);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(serve_body_parse(&j, "[1]", 3, &err), BRIG_EINVAL);
	assert_non_null(strstr(err->message, "object"));
	brig_error_free(err);
	err = NULL;
	assert_int_equal(serve_body_parse(&j, "{\"a\":1,\"a\":2}", 13, &err), BRIG_EINVAL);
	brig_error_free(err);
}

static void test_exec_req(void **state)
{
	(void)state;
	serve_exec_req r;
	brig_error *err = NULL;
	assert_int_equal(parse_exec("{\"argv\":[\"sh\",\"-c\",\"x\"],\"env\":{\"A\":\"1\"},\"workdir\":\"w\","
				    "\"stdin\":\"in\",\"timeout_ms\":5,\"capture_max\":7}",
				    &r, &err),
			 0);
	assert_string_equal(r.argv[2], "x");
	assert_null(r.argv[3]);
	assert_int_equal(r.env_count, 1);
	assert_string_equal(r.env[0], "A=1");
	assert_string_equal(r.workdir, "w");
	assert_int_equal(r.stdin_len, 2);
	assert_int_equal(r.timeout_ms, 5);
	assert_int_equal(r.capture_max, 7);
	serve_exec_req_clear(&r);
	assert_int_equal(parse_exec("{\"argv\":[\"true\"],\"env\":[\"A=1\",\"B=\"]}", &r, &err), 0);
	assert_int_equal(r.env_count, 2);
	serve_exec_req_clear(&r);

	static const char *const bad[][2] = {
		{"{}", "argv"},
		{"{\"argv\":[]}", "argv"},
		{"{\"argv\":\"x\"}", "argv"},
		{"{\"argv\":[1]}", "argv[0]"},
		{"{\"argv\":[\"x\"],\"nope\":1}", "unknown field"},
		{"{\"argv\":[\"x\"],\"env\":{\"A\":1}}", "env"},
		{"{\"argv\":[\"x\"],\"env\":{\"A=B\":\"1\"}}", "env"},
		{"{\"argv\":[\"x\"],\"env\":[\"NOEQUALS\"]}", "env[0]"},
		{"{\"argv\":[\"x\"],\"env\":[\"=v\"]}", "env[0]"},
		{"{\"argv\":[\"x\"],\"env\":3}", "env"},
		{"{\"argv\":[\"x\"],\"workdir\":1}", "workdir"},
		{"{\"argv\":[\"x\"],\"stdin\":1}", "stdin"},
		{"{\"argv\":[\"x\"],\"timeout_ms\":-1}", "timeout_ms"},
		{"{\"argv\":[\"x\"],\"timeout_ms\":\"1\"}", "timeout_ms"},
		{"{\"argv\":[\"x\"],\"capture_max\":99999999}", "capture_max"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err = NULL;
		assert_int_equal(parse_exec(bad[i][0], &r, &err), BRIG_EINVAL);
		assert_non_null(strstr(err->message, bad[i][1]));
		brig_error_free(err);
	}
	/* An env value never appears in a message. */
	err = NULL;
	assert_int_equal(parse_exec("{\"argv\":[\"x\"],\"env\":[\"SECRETVALUE\"]}", &r, &err), BRIG_EINVAL);
	assert_null(strstr(err->message, "SECRETVALUE"));
	brig_error_free(err);
}

static void test_paths(void **state)
{
	(void)state;
	brig_error *err = NULL;
	assert_int_equal(serve_path_check("/workspace/a..b/c", 17, &err), 0);
	assert_int_equal(serve_path_check("a/.hidden", 9, &err), 0);
	static const char *const bad[] = {"..", "../x", "a/..", "/workspace/../etc", "a//../b"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(serve_path_check(bad[i], strlen(bad[i]), &err), BRIG_EINVAL);
		assert_non_null(strstr(err->message, ".."));
		brig_error_free(err);
		err = NULL;
	}
	assert_int_equal(serve_path_check("a\0b", 3, &err), BRIG_EINVAL);
	assert_non_null(strstr(err->message, "NUL"));
	brig_error_free(err);
	err = NULL;
	assert_int_equal(serve_path_check(NULL, 0, &err), BRIG_EINVAL);
	brig_error_free(err);
}

static void test_tokens(void **state)
{
	(void)state;
	const char *text = "# comment\n\n  tokenAAAAAAAAAAAAAAAA  nsa\r\ntokenBBBBBBBBBBBBBBBB nsb,nsc\n"
			   "tokenCCCCCCCCCCCCCCCC *\n";
	serve_tokens *t = NULL;
	brig_error *err = NULL;
	assert_int_equal(serve_tokens_parse(&t, text, strlen(text), &err), 0);
	const void *a = serve_tokens_match(t, "Bearer tokenAAAAAAAAAAAAAAAA");
	assert_non_null(a);
	assert_true(serve_tokens_allows(a, "nsa"));
	assert_false(serve_tokens_allows(a, "nsb"));
	assert_false(serve_tokens_allows(a, NULL));
	assert_false(serve_tokens_all(a));
	const void *b = serve_tokens_match(t, "bearer tokenBBBBBBBBBBBBBBBB");
	assert_true(serve_tokens_allows(b, "nsc"));
	const void *c = serve_tokens_match(t, "Bearer tokenCCCCCCCCCCCCCCCC");
	assert_true(serve_tokens_all(c));
	assert_true(serve_tokens_allows(c, "anything"));
	assert_null(serve_tokens_match(t, "Bearer tokenAAAAAAAAAAAAAAAB"));
	assert_null(serve_tokens_match(t, "Basic tokenAAAAAAAAAAAAAAAA"));
	assert_null(serve_tokens_match(t, NULL));
	assert_true(serve_tokens_allows(NULL, "x")); /* no tokens configured */
	/* who, in the audit log: where the token is, never what */
	assert_string_equal(serve_tokens_name(a), "serve token, line 3");
	assert_string_equal(serve_tokens_name(b), "serve token, line 4");
	assert_string_equal(serve_tokens_name(NULL), "serve");
	serve_tokens_free(t);

	static const char *const bad[][2] = {
		{"short nsa\n", "line 1"},
		{"# c\ntokenAAAAAAAAAAAAAAAA\n", "line 2"},
		{"tokenAAAAAAAAAAAAAAAA bad/ns\n", "namespace"},
		{"# only a comment\n", "no token"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err = NULL;
		assert_int_equal(serve_tokens_parse(&t, bad[i][0], strlen(bad[i][0]), &err), BRIG_EINVAL);
		assert_null(t);
		assert_non_null(strstr(err->message, bad[i][1]));
		assert_null(strstr(err->message, "tokenAAAA"));
		assert_null(strstr(err->message, "short"));
		brig_error_free(err);
	}
}

static void test_status(void **state)
{
	(void)state;
	const char *code;
	assert_int_equal(serve__status(BRIG_ENOTFOUND, &code), 404);
	assert_string_equal(code, "not_found");
	assert_int_equal(serve__status(BRIG_EINVAL, &code), 400);
	assert_int_equal(serve__status(BRIG_ECONFLICT, &code), 409);
	assert_int_equal(serve__status(BRIG_ESTATE, &code), 409);
	assert_int_equal(serve__status(BRIG_EUNCERTAIN, &code), 502);
	assert_string_equal(code, "uncertain");
	assert_int_equal(serve__status(BRIG_ETOOBIG, &code), 413);
	assert_int_equal(serve__status(12345, &code), 500);
	assert_string_equal(code, "internal");
}

/* A run's error end frame names its code; brig run through a server reads
 * it back as the code direct would have had (its exit code and notes). */
static void test_run_codes(void **state)
{
	(void)state;
	const int codes[] = {BRIG_ECANCELED, BRIG_EUNSAFE, BRIG_ENOTFOUND, BRIG_EINVAL, BRIG_EUNCERTAIN};
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		const char *code;
		serve__status(codes[i], &code);
		assert_int_equal(serve__code_of(code), codes[i]);
	}
}

/* A run's client frames: tar bytes, then TAR_END (on which the server
 * switches to stdin), then stdin; stdin before TAR_END is refused. */
typedef struct run_seen {
	serve_frame_dec *d;
	brig_buf tar, in;
	int ends;
} run_seen;

static int on_run_frame(unsigned type, const char *data, size_t len, void *payload)
{
	run_seen *s = payload;
	if (type == SERVE_FRAME_TAR)
		brig_buf_put(&s->tar, data, len);
	else if (type == SERVE_FRAME_STDIN)
		brig_buf_put(&s->in, data, len);
	else if (type == SERVE_FRAME_TAR_END) {
		assert_int_equal(len, 0);
		s->ends++;
		s->d->allowed = 1u << SERVE_FRAME_STDIN | 1u << SERVE_FRAME_EOF;
	}
	return 0;
}

static void put(brig_buf *b, unsigned type, const char *data, size_t len)
{
	unsigned char h[SERVE_FRAME_HDR];
	serve_frame_header(h, type, (uint32_t)len);
	brig_buf_put(b, h, sizeof h);
	if (len)
		brig_buf_put(b, data, len);
}

static void test_run_frames(void **state)
{
	(void)state;
	brig_buf w;
	brig_buf_init(&w, 1 << 20);
	put(&w, SERVE_FRAME_TAR, "tar-1", 5);
	put(&w, SERVE_FRAME_TAR, "tar-2", 5);
	put(&w, SERVE_FRAME_TAR_END, NULL, 0);
	put(&w, SERVE_FRAME_STDIN, "typed", 5);
	put(&w, SERVE_FRAME_EOF, NULL, 0);
	/* whole and a byte at a time: the same */
	const size_t pieces[] = {w.len, 1};
	for (size_t k = 0; k < 2; k++) {
		size_t piece = pieces[k];
		serve_frame_dec d;
		serve_frame_dec_init(&d, 1u << SERVE_FRAME_TAR | 1u << SERVE_FRAME_TAR_END);
		run_seen s = {.d = &d};
		brig_buf_init(&s.tar, 1 << 20);
		brig_buf_init(&s.in, 1 << 20);
		brig_error *err = NULL;
		for (size_t off = 0; off < w.len; off += piece)
			assert_int_equal(serve_frame_feed(&d, w.data + off, piece, on_run_frame, &s, &err), 0);
		assert_int_equal(s.ends, 1);
		assert_int_equal(s.tar.len, 10);
		assert_memory_equal(s.tar.data, "tar-1tar-2", 10);
		assert_int_equal(s.in.len, 5);
		assert_true(serve_frame_dec_clean(&d));
		brig_buf_free(&s.tar);
		brig_buf_free(&s.in);
		serve_frame_dec_clear(&d);
	}
	/* stdin before the inputs ended; a TAR_END with bytes */
	const unsigned bad_types[] = {SERVE_FRAME_STDIN, SERVE_FRAME_TAR_END};
	for (size_t i = 0; i < 2; i++) {
		brig_buf_reset(&w);
		put(&w, bad_types[i], "x", 1);
		serve_frame_dec d;
		serve_frame_dec_init(&d, 1u << SERVE_FRAME_TAR | 1u << SERVE_FRAME_TAR_END);
		brig_error *err = NULL;
		assert_int_equal(serve_frame_feed(&d, w.data, w.len, NULL, NULL, &err), BRIG_EPROTO);
		brig_error_free(err);
		serve_frame_dec_clear(&d);
	}
	brig_buf_free(&w);
}

/* What a client's spec may ask for (serve_spec_policy). */
static void test_policy(void **state)
{
	(void)state;
	serve_config cfg = {0};
	brig_spec sp;
	brig_spec_init(&sp);
	brig_error *err = NULL;
	assert_int_equal(serve_spec_policy(&sp, &cfg, &err), 0); /* the defaults */
	assert_int_equal(brig_spec_set(&sp, "runtime", "runsc", NULL), 0);
	assert_int_equal(serve_spec_policy(&sp, &cfg, &err), BRIG_EDENIED);
	assert_non_null(strstr(brig_error_message(err), "--allow-runtime"));
	brig_error_free(err);
	err = NULL;
	const char *rts[] = {"kata", "runsc"};
	cfg.allow_runtimes = rts;
	cfg.allow_runtime_count = 2;
	assert_int_equal(serve_spec_policy(&sp, &cfg, NULL), 0);
	assert_int_equal(brig_spec_set(&sp, "seccomp-profile", "", NULL), 0);
	assert_int_equal(serve_spec_policy(&sp, &cfg, &err), BRIG_EDENIED);
	assert_non_null(strstr(brig_error_message(err), "seccomp_profile"));
	brig_error_free(err);
	err = NULL;
	cfg.allow_custom_seccomp = true;
	assert_int_equal(serve_spec_policy(&sp, &cfg, NULL), 0);
	assert_int_equal(brig_spec_set(&sp, "network", "isolated", NULL), 0);
	static const struct {
		const char *publish;
		bool ok;
	} ports[] = {
		{"8080:80", true},           {"127.0.0.2:8081:80", true},  {"[::1]:8082:80", true},
		{"0.0.0.0:8083:80", false},  {"[::]:8084:80", false},      {"10.0.0.1:8085:80", false},
		{"192.0.2.7:8086:80", true}, {"128.0.0.1:8087:80", false},
	};
	const char *pubs[] = {"192.0.2.7"};
	cfg.allow_publish = pubs;
	cfg.allow_publish_count = 1;
	for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) {
		brig_spec one;
		brig_spec_init(&one);
		assert_int_equal(brig_spec_add_publish(&one, ports[i].publish, NULL), 0);
		int rc = serve_spec_policy(&one, &cfg, &err);
		assert_int_equal(rc, ports[i].ok ? 0 : BRIG_EDENIED);
		if (rc)
			assert_non_null(strstr(brig_error_message(err), "--allow-publish-address"));
		brig_error_free(err);
		err = NULL;
		brig_spec_clear(&one);
	}
	brig_spec_clear(&sp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body),   cmocka_unit_test(test_exec_req), cmocka_unit_test(test_paths),
		cmocka_unit_test(test_tokens), cmocka_unit_test(test_status),   cmocka_unit_test(test_policy),
		cmocka_unit_test(test_run_codes), cmocka_unit_test(test_run_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
