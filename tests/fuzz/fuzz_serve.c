/* fuzz_serve.c — libFuzzer target for what a client sends brig serve and
 * what its tokens file holds: request bodies (JSON objects), exec and
 * process requests, file paths from the query, and the tokens file with a
 * bearer header matched against it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	brig_error *err = NULL;

	/* 1. A body, then the exec request in it. */
	json_t *body = NULL;
	if (serve_body_parse(&body, in, size, &err) == 0) {
		if (!json_is_object(body))
			abort();
		serve_exec_req req;
		if (serve_exec_req_parse(&req, body, &err) == 0) {
			if (!req.argv || !req.argv[0])
				abort();
			for (size_t i = 0; req.argv[i]; i++)
				(void)strlen(req.argv[i]);
			for (size_t i = 0; i < req.env_count; i++)
				if (!strchr(req.env[i], '='))
					abort();
			serve_exec_req_clear(&req);
		} else if (!err || !err->message) {
			abort();
		}
		json_decref(body);
	} else if (!err || !err->message || body) {
		abort();
	}
	brig_error_free(err);
	err = NULL;

	/* 2. A path as a query would give it (its decoded length). */
	char *path = xstrndup(in, size);
	if (serve_path_check(path, size, &err) == 0 && (memchr(in, 0, size) || strstr(path, "/../")))
		abort();
	free(path);
	brig_error_free(err);
	err = NULL;

	/* 3. A tokens file, and its first line as the Authorization header. */
	serve_tokens *t = NULL;
	if (serve_tokens_parse(&t, in, size, &err) == 0) {
		const char *nl = memchr(in, '\n', size);
		char *h = xstrndup(in, nl ? (size_t)(nl - in) : size);
		const void *e = serve_tokens_match(t, h);
		(void)serve_tokens_allows(e, "ns");
		free(h);
		serve_tokens_free(t);
	}
	brig_error_free(err);
	return 0;
}
