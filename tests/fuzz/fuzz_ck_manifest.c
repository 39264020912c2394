/* fuzz_ck_manifest.c — libFuzzer target for the checkpoint manifest parser
 * (src/checkpoint/manifest.c): what parses must format back into text that
 * parses to the same entries, and every path must pass the path rules. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/cas.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ck_manifest m;
	brig_error *err = NULL;
	if (ck_manifest_parse(&m, (const char *)data, size, &err) != 0) {
		brig_error_free(err);
		return 0;
	}
	size_t len = 0;
	char *text = ck_manifest_format(&m, &len);
	ck_manifest again;
	if (ck_manifest_parse(&again, text, len, &err) != 0 || again.n != m.n)
		abort();
	for (size_t i = 0; i < m.n; i++) {
		const ck_entry *a = &m.e[i], *b = &again.e[i];
		if (!ck_path_ok(a->path, strlen(a->path)) || strcmp(a->path, b->path) != 0 || a->type != b->type ||
		    a->mode != b->mode || a->size != b->size || a->mtime_ns != b->mtime_ns ||
		    strcmp(a->digest, b->digest) != 0 || (a->type == 'l' && strcmp(a->link, b->link) != 0))
			abort();
	}
	free(text);
	ck_manifest_free(&again);
	ck_manifest_free(&m);
	return 0;
}
