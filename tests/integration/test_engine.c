/* test_engine.c — the Engine API client against the real dockerd: exec
 * streams, stdin, large binary output, archives into tmpfs volumes, pause,
 * events, exec inspect, image import and list. Every object carries this
 * run's label and is removed at exit (the imported image by its test). */
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

static brig_engine *E;

static int setup(void **state)
{
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	return 0;
}

static int teardown(void **state)
{
	brig_test_cleanup(E);
	brig_engine_free(E);
	return 0;
}

static void test_version_negotiated(void **state)
{
	json_t *v = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_version(E, &v, &err), err);
	assert_non_null(json_string_value(json_object_get(v, "ApiVersion")));
	assert_non_null(brig_engine_api_version(E));
	ASSERT_OK(brig_engine_ping(E, &err), err);
	json_decref(v);
}

static void test_exec_streams_and_exit_code(void **state)
{
	cleanup_free char *id = brig_test_container(E, "exec", NULL);
	brig_test_output o = {0};
	const char *argv[] = {"sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 7", NULL};
	assert_int_equal(brig_test_exec(E, id, argv, &o), 7);
	assert_string_equal(o.out, "out1\nout2\n");
	assert_string_equal(o.err, "err1\n");
	brig_test_output_free(&o);

	const char *missing[] = {"/no/such/program", NULL};
	int code = brig_test_exec(E, id, missing, &o);
	assert_true(code == 126 || code == 127);
	brig_test_output_free(&o);
}

static void test_exec_stdin_through_cat(void **state)
{
	cleanup_free char *id = brig_test_container(E, "stdin", NULL);
	json_t *cfg = json_pack("{s:[s], s:b, s:b, s:b}", "Cmd", "cat", "AttachStdin", 1, "AttachStdout", 1,
				"AttachStderr", 1);
	char *xid = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_exec_create(E, &xid, id, cfg, &err), err);
	static const char text[] = "hello through stdin\nsecond line\n";
	brig_test_output o = {0};
	brig_engine_exec_io io = {.stdin_fd = -1,
				  .stdin_data = text,
				  .stdin_len = sizeof text - 1,
				  .cancel_fd = -1,
				  .on_output = brig_test_output_cb,
				  .payload = &o,
				  .deadline_ms = brig_now_ms() + 20000};
	ASSERT_OK(brig_engine_exec_start(E, xid, &io, &err), err);
	assert_string_equal(o.out, text);
	int code = -1;
	ASSERT_OK(brig_engine_exec_exit_code(E, xid, 0, &code, &err), err);
	assert_int_equal(code, 0);

	/* stdin from a pipe fd, several writes */
	free(xid);
	ASSERT_OK(brig_engine_exec_create(E, &xid, id, cfg, &err), err);
	int p[2];
	assert_int_equal(pipe(p), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(brig_write_all(p[1], "0123456789", 10), 0);
	close(p[1]);
	brig_test_output_free(&o);
	io.stdin_data = NULL;
	io.stdin_fd = p[0];
	ASSERT_OK(brig_engine_exec_start(E, xid, &io, &err), err);
	close(p[0]);
	assert_int_equal(o.out_len, 1000);
	brig_test_output_free(&o);
	json_decref(cfg);
	free(xid);

	/* A command that writes 8 MB before it reads 8 MB of stdin: brig must
	 * read the output while stdin waits (a blocking write deadlocked here
	 * until the deadline). */
	brig_test_exec_write_before_read(E, id, 8u << 20, false);
	brig_test_exec_write_before_read(E, id, 8u << 20, true);
}

static void test_exec_10mb_binary_output(void **state)
{
	/* 10 MB of random bytes inside; the container's md5 must match the
	 * host's md5 of what came through the exec stream. */
	const char *mk[] = {"sh", "-c",
			    "head -c 10485760 /dev/urandom > /workspace/blob 2>/dev/null || "
			    "dd if=/dev/urandom of=/workspace/blob bs=1048576 count=10 2>/dev/null",
			    NULL};
	json_t *extra = json_pack("{s:s, s:{s:[{s:s, s:s}]}}", "User", "0:0", "HostConfig", "Mounts", "Type",
				  "tmpfs", "Target", "/workspace");
	cleanup_free char *id = brig_test_container(E, "big", extra);
	json_decref(extra);
	brig_test_output o = {0};
	int mkcode = brig_test_exec(E, id, mk, &o);
	if (mkcode)
		fail_msg("mk: %d %s", mkcode, o.err);
	brig_test_output_free(&o);

	const char *md[] = {"md5sum", "/workspace/blob", NULL};
	assert_int_equal(brig_test_exec(E, id, md, &o), 0);
	char want[33] = {0};
	memcpy(want, o.out, 32);
	brig_test_output_free(&o);

	char *xid = NULL;
	brig_error *err = NULL;
	int fd;
	brig_engine_exec_io io = {.stdin_fd = -1, .cancel_fd = -1};
	/* Stream it through the exec; md5sum on the host checks every byte. */
	json_t *cfg = json_pack("{s:[s,s], s:b, s:b}", "Cmd", "cat", "/workspace/blob", "AttachStdout", 1, "AttachStderr", 1);
	ASSERT_OK(brig_engine_exec_create(E, &xid, id, cfg, &err), err);
	brig_test_output all = {0};
	io.on_output = brig_test_output_cb;
	io.payload = &all;
	ASSERT_OK(brig_engine_exec_start(E, xid, &io, &err), err);
	assert_int_equal(all.out_len, 10485760);
	char path[] = "/tmp/brigtest-blob2-XXXXXX";
	fd = mkstemp(path);
	assert_int_equal(brig_write_all(fd, all.out, all.out_len), 0);
	close(fd);
	cleanup_free char *cmd = xasprintf("md5sum < %s", path);
	FILE *pp = popen(cmd, "r");
	char got[64] = {0};
	assert_non_null(fgets(got, sizeof got, pp));
	pclose(pp);
	unlink(path);
	assert_memory_equal(got, want, 32);
	brig_test_output_free(&all);
	free(xid);
	json_decref(cfg);
}

typedef struct tarbuf {
	brig_buf b;
} tarbuf;

static int tar_cb(const char *data, size_t len, void *payload)
{
	return brig_buf_add(&((tarbuf *)payload)->b, data, len);
}

/* A one-file ustar archive, uid/gid 1000. */
static size_t make_tar(char *out, const char *name, const char *content)
{
	memset(out, 0, 2048);
	char *h = out;
	snprintf(h, 100, "%s", name);
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 108, 8, "%07o", 1000);
	snprintf(h + 116, 8, "%07o", 1000);
	snprintf(h + 124, 12, "%011o", (unsigned)strlen(content));
	snprintf(h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	memcpy(out + 512, content, strlen(content));
	return 2048; /* header + one data block + two zero blocks */
}

static void test_archive_roundtrip_tmpfs_volume(void **state)
{
	cleanup_free char *vol = brig_test_name("ws");
	/* mounted on the host: owned by the host uid the container's 1000 is */
	unsigned host = 1000 + brig_test_userns_shift();
	cleanup_free char *opts = xasprintf("size=16m,uid=%u,gid=%u,mode=0700", host, host);
	json_t *vspec = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:o}", "Name", vol, "Driver", "local", "DriverOpts",
				  "type", "tmpfs", "device", "tmpfs", "o", opts, "Labels", brig_test_labels());
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_volume_create(E, NULL, vspec, &err), err);
	json_decref(vspec);
	json_t *extra = json_pack("{s:s, s:{s:b, s:[{s:s, s:s, s:s}]}}", "User", "1000:1000", "HostConfig",
				  "ReadonlyRootfs", 1, "Mounts", "Type", "volume", "Source", vol, "Target",
				  "/workspace");
	cleanup_free char *id = brig_test_container(E, "arch", extra);
	json_decref(extra);

	char tar[2048];
	size_t n = make_tar(tar, "hello.txt", "archive round trip\n");
	ASSERT_OK(brig_engine_archive_put_buf(E, id, "/workspace", tar, n, &err), err);

	brig_test_output o = {0};
	const char *cat[] = {"sh", "-c", "cat /workspace/hello.txt; stat -c %u:%g /workspace/hello.txt", NULL};
	assert_int_equal(brig_test_exec(E, id, cat, &o), 0);
	assert_string_equal(o.out, "archive round trip\n1000:1000\n");
	brig_test_output_free(&o);

	/* Works while paused, too (DESIGN.md). */
	ASSERT_OK(brig_engine_container_pause(E, id, &err), err);
	tarbuf tb;
	brig_buf_init(&tb.b, 1 << 20);
	json_t *stat = NULL;
	ASSERT_OK(brig_engine_archive_get(E, id, "/workspace/hello.txt", &stat, tar_cb, &tb, &err), err);
	ASSERT_OK(brig_engine_container_unpause(E, id, &err), err);
	assert_string_equal(json_string_value(json_object_get(stat, "name")), "hello.txt");
	assert_int_equal(json_integer_value(json_object_get(stat, "size")), 19);
	assert_true(tb.b.len >= 1024);
	assert_non_null(memmem(tb.b.data, tb.b.len, "archive round trip\n", 19));
	json_decref(stat);
	brig_buf_free(&tb.b);

	json_t *st = NULL;
	ASSERT_OK(brig_engine_archive_stat(E, &st, id, "/workspace", &err), err);
	assert_string_equal(json_string_value(json_object_get(st, "name")), "workspace");
	json_decref(st);
	assert_int_equal(brig_engine_archive_stat(E, &st, id, "/workspace/nope", &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;

	/* The read-only root refuses a PUT outside the volume. */
	assert_true(brig_engine_archive_put_buf(E, id, "/etc", tar, n, &err) < 0);
	brig_error_free(err);
}

static void test_pause_unpause_and_errors(void **state)
{
	cleanup_free char *id = brig_test_container(E, "pause", NULL);
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_pause(E, id, &err), err);
	json_t *j = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, id, &err), err);
	assert_true(json_is_true(json_object_get(json_object_get(j, "State"), "Paused")));
	json_decref(j);
	ASSERT_OK(brig_engine_container_unpause(E, id, &err), err);
	ASSERT_OK(brig_engine_container_inspect(E, &j, id, &err), err);
	assert_false(json_is_true(json_object_get(json_object_get(j, "State"), "Paused")));
	json_decref(j);

	/* 404 and 409 map to their codes with the daemon's message kept. */
	assert_int_equal(brig_engine_container_inspect(E, &j, "brigtest-does-not-exist", &err), BRIG_ENOTFOUND);
	assert_int_equal(err->http_status, 404);
	assert_non_null(strstr(err->message, "brigtest-does-not-exist"));
	brig_error_free(err);
	err = NULL;
	cleanup_free char *name = brig_test_name("pause");
	json_t *cfg = json_pack("{s:s, s:o}", "Image", brig_test_image(), "Labels", brig_test_labels());
	char *dup = NULL;
	assert_int_equal(brig_engine_container_create(E, &dup, name, cfg, &err), BRIG_ECONFLICT);
	assert_non_null(strstr(err->message, "already in use"));
	brig_error_free(err);
	err = NULL;
	json_decref(cfg);

	/* stop, wait, rename, remove */
	ASSERT_OK(brig_engine_container_stop(E, id, 1, &err), err);
	int64_t code = -1;
	ASSERT_OK(brig_engine_container_wait(E, id, "not-running", brig_now_ms() + 10000, &code, &err), err);
	cleanup_free char *nn = brig_test_name("pause-renamed");
	ASSERT_OK(brig_engine_container_rename(E, id, nn, &err), err);
	ASSERT_OK(brig_engine_container_remove(E, nn, true, true, &err), err);
	assert_int_equal(brig_engine_container_inspect(E, &j, id, &err), BRIG_ENOTFOUND);
	brig_error_free(err);
}

/* A wait begun before the start cannot miss the exit; with "removed" the
 * exit code of an AutoRemove container outlives the container. */
static void test_wait_begun_before_start(void **state)
{
	brig_error *err = NULL;
	cleanup_free char *name = brig_test_name("waiter");
	json_t *cfg = json_pack("{s:s, s:[s, s, s], s:o, s:{s:b, s:s}}", "Image", brig_test_image(), "Cmd", "sh",
				"-c", "exit 7", "Labels", brig_test_labels(), "HostConfig", "AutoRemove", 1,
				"NetworkMode", "none");
	cleanup_free char *id = NULL;
	ASSERT_OK(brig_engine_container_create(E, &id, name, cfg, &err), err);
	json_decref(cfg);
	brig_engine_waiter *w = NULL;
	ASSERT_OK(brig_engine_container_wait_begin(E, &w, id, "removed", &err), err);
	ASSERT_OK(brig_engine_container_start(E, id, &err), err);
	int64_t code = -1;
	ASSERT_OK(brig_engine_waiter_finish(w, brig_now_ms() + 30000, &code, &err), err);
	assert_int_equal(code, 7);
	/* Spent: a second read says so instead of blocking. */
	assert_int_equal(brig_engine_waiter_finish(w, brig_now_ms() + 1000, &code, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	brig_engine_waiter_free(w);
	json_t *j = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &j, id, &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;

	/* No such container: the daemon's 404 at once, not at the first read. */
	w = NULL;
	assert_int_equal(brig_engine_container_wait_begin(E, &w, "brigtest-no-such-container", "removed", &err),
			 BRIG_ENOTFOUND);
	assert_null(w);
	assert_non_null(strstr(err->message, "brigtest-no-such-container"));
	brig_error_free(err);
	err = NULL;

	/* A deadline that passes while the container still runs. */
	cleanup_free char *id2 = brig_test_container(E, "waiter-deadline", NULL);
	ASSERT_OK(brig_engine_container_wait_begin(E, &w, id2, "not-running", &err), err);
	int64_t t0 = brig_now_ms();
	assert_int_equal(brig_engine_waiter_finish(w, brig_now_ms() + 300, &code, &err), BRIG_ETIMEDOUT);
	assert_true(brig_now_ms() - t0 < 5000);
	brig_error_free(err);
	brig_engine_waiter_free(w);
}

typedef struct seen {
	const char *id;
	int create, start, destroy;
} seen;

static int event_cb(json_t *ev, void *payload)
{
	seen *s = payload;
	const char *id = json_string_value(json_object_get(ev, "id"));
	const char *action = json_string_value(json_object_get(ev, "Action"));
	if (!id || !action || strcmp(id, s->id) != 0)
		return 0;
	if (strcmp(action, "create") == 0)
		s->create++;
	else if (strcmp(action, "start") == 0)
		s->start++;
	else if (strcmp(action, "destroy") == 0)
		s->destroy++;
	return 0;
}

static void test_events_for_what_we_did(void **state)
{
	int64_t since = brig_wall_s() - 1;
	cleanup_free char *id = brig_test_container(E, "events", NULL);
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_remove(E, id, true, true, &err), err);
	/* dockerd may publish "destroy" a moment after the remove answers (seen under ASan on a loaded machine):
	   read the window again, a little later, before calling it missing */
	seen s = {.id = id};
	for (int attempt = 0; attempt < 5 && s.destroy == 0; attempt++) {
		if (attempt > 0)
			usleep(500 * 1000);
		s = (seen){.id = id};
		int64_t until = brig_wall_s() + 1;
		json_t *f = json_pack("{s:[s]}", "type", "container");
		ASSERT_OK(brig_engine_events(E, since, until, f, brig_now_ms() + 10000, event_cb, &s, &err), err);
		json_decref(f);
	}
	assert_int_equal(s.create, 1);
	assert_int_equal(s.start, 1);
	assert_int_equal(s.destroy, 1);
}

static void test_volume_network_image_calls(void **state)
{
	brig_error *err = NULL;
	cleanup_free char *net = brig_test_name("net");
	json_t *spec = json_pack("{s:s, s:s, s:b, s:o, s:{s:s}}", "Name", net, "Driver", "bridge", "CheckDuplicate", 1,
				 "Labels", brig_test_labels(), "Options", "com.docker.network.bridge.enable_icc",
				 "false");
	char *nid = NULL;
	ASSERT_OK(brig_engine_network_create(E, &nid, spec, &err), err);
	json_decref(spec);
	json_t *j = NULL;
	ASSERT_OK(brig_engine_network_inspect(E, &j, nid, &err), err);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "Options"), "com.docker.network.bridge.enable_icc")),
		"false");
	json_decref(j);
	json_t *on_net = json_pack("{s:{s:s}}", "HostConfig", "NetworkMode", net);
	cleanup_free char *cid = brig_test_container(E, "netc", on_net);
	json_decref(on_net);
	ASSERT_OK(brig_engine_network_disconnect(E, nid, cid, true, &err), err);
	ASSERT_OK(brig_engine_network_connect(E, nid, cid, &err), err);
	/* attached: removal is refused */
	assert_true(brig_engine_network_remove(E, nid, &err) < 0);
	brig_error_free(err);
	err = NULL;
	ASSERT_OK(brig_engine_network_disconnect(E, nid, cid, true, &err), err);
	json_t *f = brig_test_filters();
	ASSERT_OK(brig_engine_network_list(E, &j, f, &err), err);
	assert_int_equal(json_array_size(j), 1);
	json_decref(j);
	ASSERT_OK(brig_engine_network_remove(E, nid, &err), err);
	free(nid);

	ASSERT_OK(brig_engine_image_inspect(E, &j, brig_test_image(), &err), err);
	assert_non_null(json_string_value(json_object_get(j, "Id")));
	json_decref(j);
	assert_int_equal(brig_engine_image_inspect(E, &j, "brigtest-no-such-image:none", &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;
	cleanup_free char *repo = brig_test_name("tag");
	ASSERT_OK(brig_engine_image_tag(E, brig_test_image(), repo, "x", &err), err);
	cleanup_free char *ref = xasprintf("%s:x", repo);
	ASSERT_OK(brig_engine_image_remove(E, ref, false, &err), err);

	ASSERT_OK(brig_engine_volume_list(E, &j, f, &err), err);
	json_decref(j);
	json_decref(f);
}

static void test_exec_inspect_after_exit(void **state)
{
	cleanup_free char *id = brig_test_container(E, "xinspect", NULL);
	json_t *cfg = json_pack("{s:[s,s,s], s:b}", "Cmd", "sh", "-c", "exit 3", "AttachStdout", 1);
	cleanup_free char *xid = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_exec_create(E, &xid, id, cfg, &err), err);
	json_decref(cfg);
	json_t *j = NULL;
	ASSERT_OK(brig_engine_exec_inspect(E, &j, xid, &err), err);
	assert_false(json_is_true(json_object_get(j, "Running"))); /* created, not started */
	json_decref(j);
	brig_engine_exec_io io = {.stdin_fd = -1, .cancel_fd = -1, .deadline_ms = brig_now_ms() + 20000};
	ASSERT_OK(brig_engine_exec_start(E, xid, &io, &err), err);
	int code = -1;
	ASSERT_OK(brig_engine_exec_exit_code(E, xid, 0, &code, &err), err);
	assert_int_equal(code, 3);
	/* What exit_code polled, as the daemon reports it. */
	ASSERT_OK(brig_engine_exec_inspect(E, &j, xid, &err), err);
	assert_false(json_is_true(json_object_get(j, "Running")));
	assert_int_equal(json_integer_value(json_object_get(j, "ExitCode")), 3);
	assert_string_equal(json_string_value(json_object_get(j, "ContainerID")), id);
	json_decref(j);
	assert_int_equal(brig_engine_exec_inspect(
				 E, &j, "0000000000000000000000000000000000000000000000000000000000000000", &err),
			 BRIG_ENOTFOUND);
	assert_non_null(strstr(brig_error_message(err), "inspect exec"));
	brig_error_free(err);
}

/* ---- image import and list ---- */

/* A one-file ustar archive in memory: "hello.txt" holding "brig\n". */
typedef struct mem_tar {
	unsigned char data[3 * 512];
	size_t off;
} mem_tar;

static void mem_tar_init(mem_tar *t)
{
	memset(t, 0, sizeof *t);
	unsigned char *h = t->data;
	static const char body[] = "brig\n";
	snprintf((char *)h, 100, "hello.txt");
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)(sizeof body - 1));
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	memcpy(t->data + 512, body, sizeof body - 1);
	/* the last 512 bytes stay zero: with the zeros the reader adds below,
	 * two end-of-archive blocks */
}

static ssize_t mem_tar_read(char *buf, size_t len, void *payload, brig_error **err)
{
	mem_tar *t = payload;
	size_t total = sizeof t->data + 512; /* one more zero block */
	size_t n = total - t->off < len ? total - t->off : len;
	for (size_t i = 0; i < n; i++)
		buf[i] = t->off + i < sizeof t->data ? (char)t->data[t->off + i] : 0;
	t->off += n;
	return (ssize_t)n;
}

static ssize_t garbage_read(char *buf, size_t len, void *payload, brig_error **err)
{
	int *left = payload;
	size_t n = len < (size_t)*left ? len : (size_t)*left;
	memset(buf, 'x', n);
	*left -= (int)n;
	return (ssize_t)n;
}

static char *import_ref(void)
{
	cleanup_free char *repo = brig_test_name("import");
	return xasprintf("%s:v1", repo);
}

static int remove_imported(void **state)
{
	cleanup_free char *ref = import_ref();
	brig_engine_image_remove(E, ref, true, NULL);
	return 0;
}

static void test_image_import_and_list(void **state)
{
	brig_error *err = NULL;
	cleanup_free char *repo = brig_test_name("import");
	cleanup_free char *ref = import_ref();
	cleanup_free char *label = xasprintf("LABEL %s=%s", BRIG_TEST_LABEL, brig_test_run_id());
	const char *changes[] = {"USER 1000", "WORKDIR /work", label, NULL};
	mem_tar t;
	mem_tar_init(&t);
	ASSERT_OK(brig_engine_image_import(E, repo, "v1", changes, mem_tar_read, &t, &err), err);

	json_t *j = NULL;
	ASSERT_OK(brig_engine_image_inspect(E, &j, ref, &err), err);
	json_t *config = json_object_get(j, "Config");
	assert_string_equal(json_string_value(json_object_get(config, "User")), "1000");
	assert_string_equal(json_string_value(json_object_get(config, "WorkingDir")), "/work");
	assert_string_equal(json_string_value(json_object_get(json_object_get(config, "Labels"), BRIG_TEST_LABEL)),
			    brig_test_run_id());
	assert_int_equal(json_integer_value(json_object_get(j, "Size")), 5);
	json_decref(j);

	/* Listed by our label, and by nothing else of ours. */
	json_t *f = brig_test_filters();
	ASSERT_OK(brig_engine_image_list(E, &j, f, &err), err);
	json_decref(f);
	assert_int_equal(json_array_size(j), 1);
	json_t *tags = json_object_get(json_array_get(j, 0), "RepoTags");
	assert_int_equal(json_array_size(tags), 1);
	assert_string_equal(json_string_value(json_array_get(tags, 0)), ref);
	json_decref(j);
	/* And a list without filters holds it too. */
	ASSERT_OK(brig_engine_image_list(E, &j, NULL, &err), err);
	bool listed = false;
	size_t i;
	json_t *img;
	json_array_foreach (j, i, img) {
		json_t *rt = json_object_get(img, "RepoTags");
		for (size_t k = 0; k < json_array_size(rt); k++)
			listed |= strcmp(json_string_value(json_array_get(rt, k)), ref) == 0;
	}
	assert_true(listed);
	json_decref(j);

	/* Not a tar: the daemon's complaint comes back, nothing is tagged. */
	cleanup_free char *bad_repo = brig_test_name("import-bad");
	int left = 4096;
	int rc = brig_engine_image_import(E, bad_repo, "v1", NULL, garbage_read, &left, &err);
	if (rc >= 0)
		fail_msg("importing garbage succeeded");
	assert_non_null(strstr(brig_error_message(err), "import image"));
	brig_error_free(err);
	err = NULL;
	cleanup_free char *bad_ref = xasprintf("%s:v1", bad_repo);
	if (brig_engine_image_inspect(E, &j, bad_ref, &err) == 0) {
		brig_engine_image_remove(E, bad_ref, true, NULL);
		json_decref(j);
		fail_msg("garbage was imported as %s", bad_ref);
	}
	brig_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_negotiated),
		cmocka_unit_test(test_exec_streams_and_exit_code),
		cmocka_unit_test(test_exec_stdin_through_cat),
		cmocka_unit_test(test_exec_10mb_binary_output),
		cmocka_unit_test(test_archive_roundtrip_tmpfs_volume),
		cmocka_unit_test(test_pause_unpause_and_errors),
		cmocka_unit_test(test_wait_begun_before_start),
		cmocka_unit_test(test_events_for_what_we_did),
		cmocka_unit_test(test_volume_network_image_calls),
		cmocka_unit_test(test_exec_inspect_after_exit),
		cmocka_unit_test_teardown(test_image_import_and_list, remove_imported),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
