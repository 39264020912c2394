/* fuzz_json.c — libFuzzer target for the JSON the engine reads from the daemon:
 * inspect, exec inspect, create/wait answers, error bodies and the base64 path stat. */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

/* Reads a container inspect as the sandbox layer does: State.Running,
 * State.Paused, State.Status, ExitCode, Pid, Config.Labels. */
static void walk_container(json_t *j)
{
	if (!json_is_object(j)) /* brig_engine_container_inspect rejects these */
		return;
	(void)json_string_value(json_object_get(j, "Id"));
	(void)json_string_value(json_object_get(j, "Name"));
	json_t *st = json_object_get(j, "State");
	bool running = json_is_true(json_object_get(st, "Running"));
	bool paused = json_is_true(json_object_get(st, "Paused"));
	const char *status = json_string_value(json_object_get(st, "Status"));
	json_t *code = json_object_get(st, "ExitCode");
	int64_t exit_code = json_is_integer(code) ? json_integer_value(code) : -1;
	json_t *pid = json_object_get(st, "Pid");
	int64_t p = json_is_integer(pid) ? json_integer_value(pid) : 0;
	(void)running, (void)paused, (void)status, (void)exit_code, (void)p;
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	const char *key;
	json_t *v;
	if (json_is_object(labels))
		json_object_foreach (labels, key, v)
			(void)json_string_value(v);
	json_t *mounts = json_object_get(j, "Mounts");
	size_t i;
	if (json_is_array(mounts))
		json_array_foreach (mounts, i, v) {
			(void)json_string_value(json_object_get(v, "Name"));
			(void)json_string_value(json_object_get(v, "Destination"));
		}
}

/* brig_engine_exec_exit_code: done when Running is not true and ExitCode
 * is an integer. */
static void walk_exec(json_t *j)
{
	json_t *running = json_object_get(j, "Running");
	json_t *code = json_object_get(j, "ExitCode");
	if (!json_is_true(running) && json_is_integer(code)) {
		int exit_code = (int)json_integer_value(code);
		(void)exit_code;
	}
}

/* create / exec create ("Id"), wait ("StatusCode"), lists (arrays). */
static void walk_answers(json_t *j)
{
	const char *id = json_string_value(json_object_get(j, "Id"));
	if (id && *id) {
		char *copy = xstrdup(id);
		free(copy);
	}
	json_t *sc = json_object_get(j, "StatusCode");
	if (json_is_integer(sc))
		(void)json_integer_value(sc);
	size_t i;
	json_t *v;
	if (json_is_array(j))
		json_array_foreach (j, i, v)
			walk_container(v);
}

/* archive decode_stat: base64 → JSON object with name/size/mode/mtime/linkTarget. */
static void walk_stat(const char *raw, size_t n)
{
	json_error_t jerr;
	json_t *st = json_loadb(raw, n, 0, &jerr);
	if (json_is_object(st)) {
		(void)json_string_value(json_object_get(st, "name"));
		json_t *size = json_object_get(st, "size");
		json_t *mode = json_object_get(st, "mode");
		if (json_is_integer(size) && json_is_integer(mode))
			(void)(json_integer_value(size) + json_integer_value(mode));
		(void)json_string_value(json_object_get(st, "mtime"));
		(void)json_string_value(json_object_get(st, "linkTarget"));
	}
	json_decref(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;

	/* 1. A 2xx body, parsed as brig_engine__call does. */
	json_error_t jerr;
	json_t *j = json_loadb(in, size, 0, &jerr);
	if (j) {
		walk_container(j);
		walk_exec(j);
		walk_answers(j);
		json_decref(j);
	}

	/* 2. The same bytes as a non-2xx body: a code, the status and a
	 * bounded message, whatever the body is. */
	brig_error *err = NULL;
	if (brig_engine__status_error(409, in, size, "create container x", &err) != BRIG_ECONFLICT || !err ||
	    err->code != BRIG_ECONFLICT || err->http_status != 409 || !err->message)
		abort();
	brig_error_free(err);

	/* 3. The path-stat header: the bytes as a header value (a C string). */
	char *hdr = xstrndup(in, size);
	size_t n = 0;
	char *raw = brig_engine__b64decode(hdr, &n);
	if (raw) {
		if (n > strlen(hdr) / 4 * 3 + 3 || raw[n] != '\0')
			abort();
		walk_stat(raw, n);
		free(raw);
	}
	free(hdr);

	/* 4. Any bytes as Docker encodes them (padded, and unpadded as some
	 * peers send) must decode back exactly. */
	if (size <= 4096) {
		unsigned char *enc = xmalloc(4 * ((size + 2) / 3) + 1);
		int el = EVP_EncodeBlock(enc, data, (int)size);
		for (int strip = 0; strip < 2; strip++) {
			size_t elen = (size_t)el;
			while (strip && elen && enc[elen - 1] == '=')
				enc[--elen] = '\0';
			raw = brig_engine__b64decode((const char *)enc, &n);
			if (!raw || n != size || (size && memcmp(raw, data, size) != 0))
				abort();
			walk_stat(raw, n);
			free(raw);
		}
		free(enc);
	}
	return 0;
}
