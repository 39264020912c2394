/* capture.c — bounded capture of command output (keeps the head and the
 * tail, counts what was dropped) and the result objects' JSON forms. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/capture.h"

void brig_capturer_init(brig_capturer *c, size_t max)
{
	memset(c, 0, sizeof *c);
	if (!max)
		max = 1u << 20;
	c->half = max / 2 ? max / 2 : 1;
	brig_buf_init(&c->head, c->half);
}

void brig_capturer_add(brig_capturer *c, const char *data, size_t len)
{
	c->total += len;
	size_t room = c->half - c->head.len;
	if (room) {
		size_t k = len < room ? len : room;
		brig_buf_add(&c->head, data, k);
		data += k;
		len -= k;
	}
	if (!len)
		return;
	if (!c->ring)
		c->ring = xmalloc(c->half);
	if (len >= c->half) { /* only the last `half` bytes can survive */
		data += len - c->half;
		len = c->half;
	}
	while (len) {
		size_t k = c->half - c->ring_pos;
		if (k > len)
			k = len;
		memcpy(c->ring + c->ring_pos, data, k);
		c->ring_pos = (c->ring_pos + k) % c->half;
		c->ring_len = c->ring_len + k > c->half ? c->half : c->ring_len + k;
		data += k;
		len -= k;
	}
}

void brig_capturer_finish(brig_capturer *c, brig_capture *out)
{
	brig_buf all;
	brig_buf_init(&all, c->head.len + c->ring_len + 1);
	brig_buf_add(&all, c->head.data ? c->head.data : "", c->head.len);
	if (c->ring_len) {
		size_t start = c->ring_len < c->half ? 0 : c->ring_pos;
		size_t first = c->ring_len < c->half ? c->ring_len : c->half - start;
		brig_buf_add(&all, c->ring + start, first);
		if (c->ring_len == c->half && start)
			brig_buf_add(&all, c->ring, start);
	}
	out->total = c->total;
	out->data = brig_buf_steal(&all, &out->len);
	out->dropped = c->total - out->len;
	brig_capturer_free(c);
}

void brig_capturer_free(brig_capturer *c)
{
	brig_buf_free(&c->head);
	free(c->ring);
	c->ring = NULL;
}

void brig_output_tee_init(brig_output_tee *t, size_t max, brig_engine_output_cb user, void *payload)
{
	brig_capturer_init(&t->out, max);
	brig_capturer_init(&t->err, max);
	t->user = user;
	t->user_payload = payload;
}

int brig_output_tee_cb(int stream, const char *data, size_t len, void *payload)
{
	brig_output_tee *t = payload;
	brig_capturer_add(stream == BRIG_STREAM_STDERR ? &t->err : &t->out, data, len);
	return t->user ? t->user(stream, data, len, t->user_payload) : 0;
}

void brig_output_tee_finish(brig_output_tee *t, brig_exec_result *res)
{
	brig_capturer_finish(&t->out, &res->out);
	brig_capturer_finish(&t->err, &res->err);
}

void brig_exec_result_clear(brig_exec_result *r)
{
	if (!r)
		return;
	free(r->out.data);
	free(r->err.data);
	memset(r, 0, sizeof *r);
}

static json_t *capture_json(const brig_capture *c)
{
	/* Output is arbitrary bytes: invalid UTF-8 is replaced so the JSON stays
	 * valid (jansson refuses invalid strings). */
	json_t *text = json_stringn(c->data ? c->data : "", c->len);
	if (!text) {
		char *copy = xmalloc(c->len + 1);
		for (size_t i = 0; i < c->len; i++)
			copy[i] = (unsigned char)c->data[i] < 0x80 ? c->data[i] : '?';
		text = json_stringn(copy, c->len);
		free(copy);
	}
	return json_pack("{s:o, s:I, s:I}", "text", text, "bytes", (json_int_t)c->total, "dropped",
			 (json_int_t)c->dropped);
}

json_t *brig_exec_result_to_json(const brig_exec_result *r)
{
	return json_pack("{s:i, s:b, s:b, s:b, s:b, s:I, s:o, s:o}", "exit_code", r->exit_code, "timed_out",
			 r->timed_out, "canceled", r->canceled, "uncertain", r->uncertain, "container_stopped",
			 r->container_stopped, "duration_ms", (json_int_t)r->duration_ms, "stdout",
			 capture_json(&r->out), "stderr", capture_json(&r->err));
}

int brig_sandbox__stop_now(brig_engine *e, const char *id, brig_error **err)
{
	/* No grace: the point is to end a process that nothing else can end. */
	int rc = brig_engine_container_stop(e, id, 0, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		return 0;
	}
	return rc;
}

int64_t brig_sandbox__parse_time(const char *s)
{
	if (!s)
		return 0;
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	return (int64_t)timegm(&tm);
}

static bool daemon_not_found(const brig_capture *c)
{
	/* runc's start failure, which the daemon writes into the stream (framed
	 * as stdout on 20.10): "OCI runtime exec failed: … executable file not
	 * found …" or "… no such file or directory …". */
	if (!c->data || c->len > 4096 || strncmp(c->data, "OCI runtime exec failed", 23) != 0)
		return false;
	return strstr(c->data, "executable file not found") || strstr(c->data, "no such file or directory");
}

void brig_sandbox__fix_not_found(brig_exec_result *res)
{
	if (res->exit_code == 126 && (daemon_not_found(&res->out) || daemon_not_found(&res->err)))
		res->exit_code = 127;
}

int brig_sandbox__host_limits(brig_engine *e, brig_host_limits *out, brig_error **err)
{
	memset(out, 0, sizeof *out);
	if (brig_engine_is_local(e)) {
		long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		if (pages > 0 && psize > 0 && ncpu > 0) {
			out->mem_bytes = (int64_t)pages * psize;
			out->ncpu = (int)ncpu;
			return 0;
		}
	}
	json_t *info = NULL;
	int rc = brig_engine_info(e, &info, err);
	if (rc)
		return rc;
	out->mem_bytes = json_integer_value(json_object_get(info, "MemTotal"));
	out->ncpu = (int)json_integer_value(json_object_get(info, "NCPU"));
	json_decref(info);
	return 0;
}

void brig_sandbox__pad_secret_body(json_t *cfg)
{
	size_t i;
	json_t *v;
	bool secret = false;
	json_array_foreach(json_object_get(cfg, "Env"), i, v)
	{
		if (brig_env_is_credential(json_string_value(v)))
			secret = true;
	}
	if (!secret)
		return;
	char pad[4200];
	memset(pad, ' ', sizeof pad - 1);
	pad[sizeof pad - 1] = '\0';
	json_object_set_new(cfg, "BrigPadding", json_string(pad));
}

int brig_sandbox__resolve_image(brig_engine *e, char **out, bool *etc_hosts, const char *image, brig_error **err)
{
	if (etc_hosts)
		*etc_hosts = false;
	json_t *img = NULL;
	int rc = brig_engine_image_inspect(e, &img, image, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "image %s is not in the local image store and brig never pulls: build it "
				       "with `brig image build` (or scripts/build-test-image for brig-test:local), "
				       "or pass --image",
				       image);
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(img, "Id"));
	if (!id)
		rc = brig__error_set(err, BRIG_EPROTO, 0, "inspect image %s: no Id", image);
	else if (out)
		*out = xstrdup(id);
	if (!rc && etc_hosts) {
		const char *v = json_string_value(
			json_object_get(json_object_get(json_object_get(img, "Config"), "Labels"), BRIG_LABEL_ETC_HOSTS));
		*etc_hosts = v && strcmp(v, BRIG_ETC_HOSTS_OPTIONAL) == 0;
	}
	json_decref(img);
	return rc;
}
