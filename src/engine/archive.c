/* archive.c — file transfer through the archive endpoints: GET as a tar
 * stream, PUT from a stream, HEAD for the path stat. */
#include <string.h>

#include "engine/internal.h"

static int decode_stat(const brig_http_response *resp, json_t **out, const char *what, brig_error **err)
{
	const char *h = brig_http_response_header(resp, "X-Docker-Container-Path-Stat");
	if (!h)
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: answer has no path stat header", what);
	size_t n = 0;
	cleanup_free char *raw = brig_engine__b64decode(h, &n);
	if (!raw)
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: path stat header is not base64", what);
	json_error_t jerr;
	*out = json_loadb(raw, n, 0, &jerr);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return brig__error_set(err, BRIG_EPROTO, 0, "%s: path stat is not a JSON object", what);
	}
	return 0;
}

int brig_engine_archive_get(brig_engine *e, const char *id, const char *path, json_t **stat_out,
			    brig_engine_data_cb cb, void *payload, brig_error **err)
{
	cleanup_free char *i = brig_urlencode(id);
	cleanup_free char *p = brig_urlencode(path);
	cleanup_free char *url = brig_engine__path(e, "/containers/%s/archive?path=%s", i, p);
	cleanup_free char *what = xasprintf("copy %s out of container %s", path, id);
	brig_engine_call call = {.method = "GET",
				 .path = url,
				 .what = what,
				 .deadline_ms = brig_now_ms() + BRIG_ENGINE_TRANSFER_MS,
				 .body_cb = cb,
				 .body_payload = payload};
	brig_http_response resp;
	int rc = brig_engine__call(e, &call, NULL, NULL, &resp, err);
	if (rc)
		return rc;
	if (stat_out)
		rc = decode_stat(&resp, stat_out, what, err);
	brig_http_response_clear(&resp);
	return rc;
}

int brig_engine_archive_put(brig_engine *e, const char *id, const char *path, brig_engine_reader reader,
			    void *payload, brig_error **err)
{
	cleanup_free char *i = brig_urlencode(id);
	cleanup_free char *p = brig_urlencode(path);
	cleanup_free char *url =
		brig_engine__path(e, "/containers/%s/archive?path=%s&noOverwriteDirNonDir=true", i, p);
	cleanup_free char *what = xasprintf("copy files into %s of container %s", path, id);
	brig_engine_call call = {.method = "PUT",
				 .path = url,
				 .what = what,
				 .deadline_ms = brig_now_ms() + BRIG_ENGINE_TRANSFER_MS,
				 .reader = reader,
				 .reader_payload = payload,
				 .content_type = "application/x-tar"};
	return brig_engine__call(e, &call, NULL, NULL, NULL, err);
}

typedef struct mem_reader {
	const char *p;
	size_t left;
} mem_reader;

static ssize_t read_mem(char *buf, size_t len, void *payload, brig_error **err)
{
	mem_reader *m = payload;
	size_t k = m->left < len ? m->left : len;
	memcpy(buf, m->p, k);
	m->p += k;
	m->left -= k;
	return (ssize_t)k;
}

int brig_engine_archive_put_buf(brig_engine *e, const char *id, const char *path, const void *tar, size_t len,
				brig_error **err)
{
	mem_reader m = {.p = tar, .left = len};
	return brig_engine_archive_put(e, id, path, read_mem, &m, err);
}

int brig_engine_archive_stat(brig_engine *e, json_t **out, const char *id, const char *path, brig_error **err)
{
	cleanup_free char *i = brig_urlencode(id);
	cleanup_free char *p = brig_urlencode(path);
	cleanup_free char *url = brig_engine__path(e, "/containers/%s/archive?path=%s", i, p);
	cleanup_free char *what = xasprintf("stat %s in container %s", path, id);
	brig_engine_call call = {.method = "HEAD", .path = url, .what = what, .head = true};
	brig_http_response resp;
	int rc = brig_engine__call(e, &call, NULL, NULL, &resp, err);
	if (rc)
		return rc;
	rc = decode_stat(&resp, out, what, err);
	brig_http_response_clear(&resp);
	return rc;
}
