/* routes_files.c — the endpoints that work inside a computer through ops/
 * (background processes, files) or, with ?native=true, brig-init's own
 * calls, and through brig's tar copier (tar in and out, disposable runs
 * with their inputs and outputs). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/run.h"
#include "brig/session.h"
#include "brig/spec.h"
#include "ops/fs.h"
#include "ops/procs.h"
#include "sandbox/outdir.h"
#include "egress/egress_internal.h"
#include "serve/internal.h"
#include "tar/tar.h"
#include "util/util.h"

/* ---- the target ops/ works on: one computer, reached through the kept
 * brig-init handle, commands audited like brig exec ---- */

typedef struct target {
	ops_target t;
	serve_req *r;     /* NULL: not set up */
	char *name;       /* the container's, owned */
	brig_guest *held; /* lent by serve__guest until the target goes */
	brig_guest *own;  /* opened for one native call (native_guest), owned */
} target;

static int target_guest(ops_target *t, brig_guest **out, brig_error **err)
{
	target *tg = t->payload;
	serve__guest_release(tg->r->srv, tg->held);
	tg->held = NULL;
	int rc = serve__guest(tg->r->srv, tg->name, &tg->held, err);
	*out = tg->held;
	return rc;
}

static int target_exec(ops_target *t, const char *const *argv, const char *const *env, size_t env_count,
		       const char *workdir, const char *stdin_data, size_t stdin_len, size_t capture_max,
		       int64_t timeout_ms, brig_exec_result *res, brig_error **err)
{
	target *tg = t->payload;
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	o.argv = argv;
	o.env = env;
	o.env_count = env_count;
	o.workdir = workdir;
	o.stdin_data = stdin_data;
	o.stdin_len = stdin_len;
	o.capture_max = capture_max;
	o.timeout_ms = timeout_ms;
	return brig_session_exec(serve__engine(tg->r), serve__store(tg->r), tg->name, &o, res, err);
}

/* Gives the handle back and frees the name when the handler's target goes
 * out of scope. */
static void target_done(target *tg)
{
	if (!tg->r)
		return;
	serve__guest_release(tg->r->srv, tg->held);
	brig_guest_free(tg->own);
	free(tg->name);
}

/* A target released at the end of its scope: declare it = {0}, then set it
 * up with computer_target or file_target. */
#define cleanup_target __attribute__((cleanup(target_done)))

/* Every route's prologue: the path's computer as the target. False with
 * *out answered. */
static bool computer_target(serve_req *r, serve_reply *out, target *tg)
{
	char *name = NULL;
	if (!serve__path_computer(r, out, &name))
		return false;
	*tg = (target){.t = {.guest = target_guest, .exec = target_exec, .payload = tg}, .r = r, .name = name};
	return true;
}

/* The file routes' prologue: the target and ?path= (checked, absolute). */
static bool file_target(serve_req *r, serve_reply *out, target *tg, char **path)
{
	return computer_target(r, out, tg) && (*path = serve__query_path(r, out, "path")) != NULL;
}

/* err (consumed) as the answer, with the errno brig-init gave. */
static void native_error(serve_reply *out, brig_error *err)
{
	int en = err ? err->sys_errno : 0;
	serve__reply_error(out, err);
	if (en && out->json)
		json_object_set_new(out->json, "errno", json_integer(en));
}

/* ---- background processes ---- */

/* ?native=true: brig-init's own background commands, as `brig exec -d`,
 * `brig ps` and `brig kill` reach them directly — integer ids, brig-init's
 * listing as it comes, its errors with their errno — so the CLI through a
 * server shows the same. ops/procs' "p…" processes (their own output
 * files, for MCP) are another layer and never meet these. */

/* The computer's brig-init for a native process or file call: the kept
 * handle, else (the server keeps "none" for a computer that was stopped, or
 * made before brig-init) one opened now into tg->own (it runs again),
 * failing in brig_computer_guest's words (no such computer, not running, no
 * brig-init) as the direct path (brig ps, brig fs) does. False with *out
 * answered. */
static bool native_guest(serve_req *r, serve_reply *out, target *tg, brig_guest **g)
{
	brig_error *err = NULL;
	if (target_guest(&tg->t, g, &err) != 0) {
		native_error(out, err);
		return false;
	}
	if (*g)
		return true;
	if (brig_computer_guest(serve__engine(r), &tg->own, tg->name, &err) != 0) {
		native_error(out, err);
		return false;
	}
	*g = tg->own;
	return true;
}

/* brig exec -d: argv, env and workdir as given (brig-init resolves the
 * workdir); the command has no stdin and no deadline. */
static void native_start(serve_req *r, serve_reply *out, target *tg, const serve_exec_req *req)
{
	if (req->stdin_data || req->timeout_ms) {
		serve__reply_fail(out, 400, "invalid",
				  "stdin and timeout_ms do not go with native=true (a background command has neither)");
		return;
	}
	brig_exec_opts o = BRIG_EXEC_OPTS_INIT;
	o.argv = req->argv;
	o.env = req->env;
	o.env_count = req->env_count;
	o.workdir = req->workdir;
	o.capture_max = req->capture_max;
	o.stdin_fd = -1;
	o.cancel_fd = -1;
	int64_t proc = 0;
	brig_error *err = NULL;
	if (brig_computer_start(serve__engine(r), tg->name, &o, &proc, &err) != 0) {
		native_error(out, err);
		return;
	}
	serve__reply_json(out, 201, json_pack("{s:I}", "id", (json_int_t)proc));
}

void serve__h_procs_start(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	if (!computer_target(r, out, &tg))
		return;
	serve_exec_req req;
	if (!serve__exec_req(r, out, &req))
		return;
	brig_error *err = NULL;
	if (serve__query_bool(r, "native")) {
		native_start(r, out, &tg, &req);
		serve_exec_req_clear(&req);
		return;
	}
	char *id = NULL;
	cleanup_free char *wd = NULL;
	int rc = 0;
	if (req.workdir && !(wd = ops_fs_path(req.workdir, &err)))
		rc = BRIG_EINVAL;
	if (!rc)
		rc = ops_proc_start(&tg.t, req.argv, wd, req.env, req.env_count, &id, &err);
	serve_exec_req_clear(&req);
	if (rc) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 201, json_pack("{s:s}", "id", id));
	free(id);
}

void serve__h_procs_list(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	if (!computer_target(r, out, &tg))
		return;
	json_t *arr = NULL;
	brig_error *err = NULL;
	if (serve__query_bool(r, "native")) {
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_ps(g, &arr, 0, &err) != 0)
			native_error(out, err);
		else
			serve__reply_json(out, 200, json_pack("{s:o}", "processes", arr));
		return;
	}
	if (ops_proc_list(&tg.t, &arr, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 200, json_pack("{s:o}", "processes", arr));
}

void serve__h_procs_get(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	if (!computer_target(r, out, &tg))
		return;
	int64_t so = 0, eo = 0, max = 65536;
	if (!serve__query_i64(r, out, "stdout_offset", 0, INT64_MAX, &so) ||
	    !serve__query_i64(r, out, "stderr_offset", 0, INT64_MAX, &eo) ||
	    !serve__query_i64(r, out, "max_bytes", 1, 1 << 20, &max))
		return;
	json_t *st = NULL;
	brig_error *err = NULL;
	if (ops_proc_read(&tg.t, serve__param(r, "id"), (uint64_t)so, (uint64_t)eo, (size_t)max, &st, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 200, st);
}

void serve__h_procs_input(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	if (!computer_target(r, out, &tg))
		return;
	json_t *data = json_object_get(r->json, "data"), *close_in = json_object_get(r->json, "close");
	if ((data && !json_is_string(data)) || (close_in && !json_is_boolean(close_in))) {
		serve__reply_fail(out, 400, "invalid", "give {\"data\": string, \"close\": boolean}");
		return;
	}
	brig_error *err = NULL;
	if (ops_proc_input(&tg.t, serve__param(r, "id"), data ? json_string_value(data) : "",
			   data ? json_string_length(data) : 0, json_is_true(close_in), &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

/* The path's {id} as brig-init's command id. */
static bool native_id(serve_req *r, serve_reply *out, int64_t *id)
{
	return serve__path_id(r, out, "id: with native=true, give brig-init's command id (from 1)", id);
}

/* brig kill: {"signal": 1..64} sends that one signal to the command's
 * process group; without it the whole tree is ended (and gone when the
 * answer comes). */
static void native_kill(serve_req *r, serve_reply *out, target *tg)
{
	int64_t id = 0;
	if (!native_id(r, out, &id))
		return;
	json_t *sig = json_object_get(r->json, "signal");
	if (sig && (!json_is_integer(sig) || json_integer_value(sig) < 1 || json_integer_value(sig) > 64)) {
		serve__reply_fail(out, 400, "invalid", "signal: with native=true, give a signal number from 1 to 64");
		return;
	}
	brig_guest *g = NULL;
	if (!native_guest(r, out, tg, &g))
		return;
	brig_error *err = NULL;
	int rc = sig ? brig_guest_signal(g, id, (int)json_integer_value(sig), 0, &err)
		     : brig_guest_kill(g, id, NULL, 0, &err);
	if (rc)
		native_error(out, err);
	else
		out->status = 204;
}

void serve__h_procs_kill(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	if (!computer_target(r, out, &tg))
		return;
	if (serve__query_bool(r, "native")) {
		native_kill(r, out, &tg);
		return;
	}
	json_t *sig = json_object_get(r->json, "signal");
	if (sig && !json_is_string(sig)) {
		serve__reply_fail(out, 400, "invalid", "signal: give TERM, KILL, INT or HUP");
		return;
	}
	brig_error *err = NULL;
	if (ops_proc_kill(&tg.t, serve__param(r, "id"), sig ? json_string_value(sig) : "TERM", &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

/* brig attach: brig-init's command id (native=true only: ops/procs'
 * processes keep their output in files, read with GET …/processes/{id}),
 * then the upgraded stream of routes_attach.c with the handle this
 * target found. */
void serve__h_procs_attach(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	if (!serve__upgrade_ok(r, out) || !computer_target(r, out, &tg))
		return;
	if (!serve__query_bool(r, "native")) {
		serve__reply_fail(out, 400, "invalid",
				  "native: attach reaches brig-init's own commands only; pass native=true with its id");
		return;
	}
	int64_t id = 0;
	brig_guest *g = NULL;
	if (!native_id(r, out, &id) || !native_guest(r, out, &tg, &g))
		return;
	/* the stream takes the handle (lent or owned) with it */
	if (serve__proc_attach(r, out, tg.name, tg.held, tg.own, id, serve__query_bool(r, "stdin"))) {
		tg.held = NULL;
		tg.own = NULL;
	}
}

/* ---- files as brig-init does them (?native=true): what `brig fs` does
 * directly, so the CLI through a server shows the same. Nothing is checked
 * or made first (no stat, no parents unless asked); stats and entries are
 * brig-init's own ({"type": "dir"…, "mode": an integer, "link"}), in its
 * order; an error is brig-init's message with its errno ("errno"). ---- */

#define NATIVE_DEPTH 64 /* levels of a native listing (brig-init's LIST) */

/* An octal mode (0..7777), as brig fs --mode takes it. */
static bool parse_mode(const char *s, unsigned *mode)
{
	char *end = NULL;
	errno = 0;
	long m = s ? strtol(s, &end, 8) : -1;
	if (!s || !*s || *end || errno || m < 0 || m > 07777)
		return false;
	*mode = (unsigned)m;
	return true;
}

/* mode and parents, which only native calls take: ?mode=&parents= (write)
 * or the body's "mode" and "parents" (mkdir). False with *out answered. */
static bool native_opts(serve_req *r, serve_reply *out, bool native, bool body, unsigned *mode, bool *parents)
{
	json_t *jm = NULL, *jp = NULL;
	const char *m;
	bool given;
	if (body) {
		jm = json_object_get(r->json, "mode");
		jp = json_object_get(r->json, "parents");
		m = json_string_value(jm);
		given = jm || jp;
	} else {
		m = serve__query(r, "mode", NULL);
		given = m || serve__query(r, "parents", NULL);
	}
	if (given && !native) {
		serve__reply_fail(out, 400, "invalid", "mode and parents go with native=true");
		return false;
	}
	if ((jm || m) && !parse_mode(m, mode)) {
		serve__reply_fail(out, 400, "invalid", "mode: give an octal mode (0..7777) as a string");
		return false;
	}
	if (jp && !json_is_boolean(jp)) {
		serve__reply_fail(out, 400, "invalid", "parents: give a boolean");
		return false;
	}
	*parents = body ? json_is_true(jp) : serve__query_bool(r, "parents");
	return true;
}

static int native_buf_cb(const char *data, size_t len, void *payload)
{
	/* brig-init sends at most what was asked (the client checks), which
	 * is the buffer's cap */
	return brig_buf_add(payload, data, len) == 0 ? 0 : BRIG_ETOOBIG;
}

static void native_read(serve_req *r, serve_reply *out, target *tg, const char *path, int64_t off, int64_t len)
{
	brig_guest *g = NULL;
	if (!native_guest(r, out, tg, &g))
		return;
	brig_buf b;
	brig_buf_init(&b, (size_t)len);
	brig_error *err = NULL;
	if (brig_guest_read(g, path, off, len, native_buf_cb, &b, 0, &err) != 0) {
		brig_buf_free(&b);
		native_error(out, err);
		return;
	}
	out->status = 200;
	out->data = brig_buf_steal(&b, &out->len);
	out->type = "application/octet-stream";
}

/* ---- files ---- */

void serve__h_file_read(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *path = NULL;
	if (!file_target(r, out, &tg, &path))
		return;
	int64_t off = 0, len = (int64_t)OPS_FS_MAX;
	if (!serve__query_i64(r, out, "offset", 0, INT64_MAX, &off) ||
	    !serve__query_i64(r, out, "length", 0, (int64_t)OPS_FS_MAX, &len))
		return;
	if (serve__query_bool(r, "native")) {
		native_read(r, out, &tg, path, off, len);
		return;
	}
	char *data = NULL;
	size_t n = 0;
	uint64_t size = 0;
	brig_error *err = NULL;
	if (ops_fs_read(&tg.t, path, (uint64_t)off, (size_t)len, &data, &n, &size, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	static __thread char sizebuf[24];
	snprintf(sizebuf, sizeof sizebuf, "%" PRIu64, size);
	out->status = 200;
	out->data = data;
	out->len = n;
	out->type = "application/octet-stream";
	out->extra_header = "X-Brig-File-Size";
	out->extra_value = sizebuf;
}

void serve__h_file_write(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *path = NULL;
	if (!file_target(r, out, &tg, &path))
		return;
	if (r->body_len > OPS_FS_MAX) {
		serve__reply_fail(out, 413, "too_big", "a file written at once is at most %zu bytes", OPS_FS_MAX);
		return;
	}
	bool native = serve__query_bool(r, "native"), parents = false;
	unsigned mode = 0644;
	if (!native_opts(r, out, native, false, &mode, &parents))
		return;
	if (native && serve__query_bool(r, "append")) {
		serve__reply_fail(out, 400, "invalid",
				  "append does not go with native=true (brig-init writes files whole)");
		return;
	}
	brig_error *err = NULL;
	if (native) {
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_write(g, path, -1, r->body ? r->body : "", r->body_len, mode, parents, 0, &err) != 0)
			native_error(out, err);
		else
			out->status = 204;
		return;
	}
	if (ops_fs_write(&tg.t, path, r->body ? r->body : "", r->body_len, serve__query_bool(r, "append"), &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

void serve__h_file_remove(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *path = NULL;
	if (!file_target(r, out, &tg, &path))
		return;
	brig_error *err = NULL;
	if (serve__query_bool(r, "native")) {
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_remove(g, path, serve__query_bool(r, "recursive"), 0, &err) != 0)
			native_error(out, err);
		else
			out->status = 204;
		return;
	}
	if (ops_fs_remove(&tg.t, path, serve__query_bool(r, "recursive"), &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

void serve__h_file_list(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *path = NULL;
	if (!file_target(r, out, &tg, &path))
		return;
	bool native = serve__query_bool(r, "native");
	int64_t depth = 1;
	if (!serve__query_i64(r, out, "depth", 1, native ? NATIVE_DEPTH : 10, &depth))
		return;
	json_t *entries = NULL;
	bool truncated = false;
	brig_error *err = NULL;
	if (native) {
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_list(g, &entries, path, (int)depth, 0, &err) != 0)
			native_error(out, err);
		else
			serve__reply_json(out, 200, json_pack("{s:o,s:b}", "entries", entries, "truncated", false));
		return;
	}
	if (ops_fs_list(&tg.t, path, (int)depth, &entries, &truncated, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 200, json_pack("{s:o,s:b}", "entries", entries, "truncated", truncated));
}

void serve__h_file_stat(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *path = NULL;
	if (!file_target(r, out, &tg, &path))
		return;
	json_t *st = NULL;
	brig_error *err = NULL;
	if (serve__query_bool(r, "native")) {
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_stat(g, &st, path, !serve__query_bool(r, "follow"), 0, &err) != 0)
			native_error(out, err);
		else
			serve__reply_json(out, 200, st);
		return;
	}
	if (ops_fs_stat(&tg.t, path, &st, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	serve__reply_json(out, 200, st);
}

void serve__h_file_move(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *from = NULL, *to = NULL;
	if (!computer_target(r, out, &tg) || !(from = serve__body_path(r, out, "from")) ||
	    !(to = serve__body_path(r, out, "to")))
		return;
	json_t *ow = json_object_get(r->json, "overwrite");
	brig_error *err = NULL;
	if (serve__query_bool(r, "native")) {
		/* rename(2): an existing file at to is replaced, as brig fs mv does */
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_rename(g, from, to, 0, &err) != 0)
			native_error(out, err);
		else
			out->status = 204;
		return;
	}
	if (ops_fs_move(&tg.t, from, to, json_is_true(ow), &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

void serve__h_file_mkdir(serve_req *r, serve_reply *out)
{
	cleanup_target target tg = {0};
	cleanup_free char *path = NULL;
	if (!computer_target(r, out, &tg) || !(path = serve__body_path(r, out, "path")))
		return;
	bool native = serve__query_bool(r, "native"), parents = false;
	unsigned mode = 0755;
	if (!native_opts(r, out, native, true, &mode, &parents))
		return;
	brig_error *err = NULL;
	if (native) {
		brig_guest *g = NULL;
		if (!native_guest(r, out, &tg, &g))
			return;
		if (brig_guest_mkdir(g, path, mode, parents, 0, &err) != 0)
			native_error(out, err);
		else
			out->status = 204;
		return;
	}
	if (ops_fs_mkdir(&tg.t, path, &err) != 0) {
		serve__reply_error(out, err);
		return;
	}
	out->status = 204;
}

#define ARCHIVE_MAX ((size_t)256 << 20) /* bytes of a run's outputs sent back */

/* ---- disposable runs ---- */

/* Unpacks base64 tar b64 into dir (entries checked; no links out). */
static int unpack_inputs(const char *dir, json_t *b64, brig_error **err)
{
	size_t n = 0;
	unsigned char *tar = ops_b64decode(json_string_value(b64), json_string_length(b64), &n);
	if (!tar)
		return brig__error_set(err, BRIG_EINVAL, 0, "inputs_tar: not valid base64");
	brig_tar_extract_opts o = BRIG_TAR_EXTRACT_OPTS_INIT;
	o.allow_symlinks = true;
	brig_tar_extract *x = NULL;
	int rc = brig_tar_extract_new(&x, AT_FDCWD, dir, &o, err);
	if (!rc)
		rc = brig_tar_extract_feed(x, tar, n, err);
	if (!rc)
		rc = brig_tar_extract_finish(x, err);
	brig_tar_extract_free(x);
	free(tar);
	return rc;
}

/* A builder of dir's contents (names relative to dir). */
static int outputs_builder(brig_tar_builder **out, const char *dir, brig_error **err)
{
	brig_tar_builder *b = NULL;
	int rc = brig_tar_builder_new(&b, NULL, err);
	struct stat st;
	DIR *d = rc || stat(dir, &st) != 0 ? NULL : opendir(dir);
	struct dirent *de;
	while (d && !rc && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		cleanup_free char *p = xasprintf("%s/%s", dir, de->d_name);
		rc = brig_tar_builder_add_path(b, p, de->d_name, err);
	}
	if (d)
		closedir(d);
	if (rc)
		brig_tar_builder_free(b);
	else
		*out = b;
	return rc;
}

/* The tar of dir's contents, base64. */
static int pack_outputs(char **out, const char *dir, brig_error **err)
{
	brig_tar_builder *b = NULL;
	brig_buf buf;
	brig_buf_init(&buf, ARCHIVE_MAX);
	int rc = outputs_builder(&b, dir, err);
	char chunk[65536];
	ssize_t n;
	while (!rc && (n = brig_tar_builder_read(b, chunk, sizeof chunk, err)) != 0) {
		if (n < 0)
			rc = (int)n;
		else if (brig_buf_add(&buf, chunk, (size_t)n) != 0)
			rc = brig__error_set(err, BRIG_ETOOBIG, 0, "the outputs are larger than %zu bytes",
					     ARCHIVE_MAX);
	}
	brig_tar_builder_free(b);
	if (!rc)
		*out = ops_b64encode((const unsigned char *)(buf.data ? buf.data : ""), buf.len);
	brig_buf_free(&buf);
	return rc;
}

void serve_run_clear(serve_run_req *run)
{
	if (run->dir) /* inputs come read-only (0555): removed as a refused --out is */
		brig_sandbox__outdir_abandon(run->dir);
	free(run->dir);
	free(run->indir);
	free(run->outdir);
	brig_spec_clear(&run->spec);
	serve_exec_req_clear(&run->req);
	json_decref(run->ej);
	json_decref(run->body);
	memset(run, 0, sizeof *run);
}

bool serve__run_prep(serve_req *r, serve_reply *out, serve_run_req *run, bool attach)
{
	memset(run, 0, sizeof *run); /* spec: filled by brig_spec_from_json below */
	json_t *b = r->json;
	const char *key;
	json_t *v;
	json_object_foreach (b, key, v) {
		bool known = !strcmp(key, "ns") || !strcmp(key, "spec") || !strcmp(key, "argv") ||
			     !strcmp(key, "timeout_s") || !strcmp(key, "outputs") || !strcmp(key, "capture_max") ||
			     !strcmp(key, "secret_values");
		if (attach)
			known = known || !strcmp(key, "stdin") || !strcmp(key, "workdir") || !strcmp(key, "out_mb");
		else
			known = known || !strcmp(key, "inputs_tar");
		if (!known) {
			serve__reply_fail(out, 400, "invalid", "unknown field '%.64s'%s", key,
					  attach && !strcmp(key, "inputs_tar")
						  ? " (the inputs come over the stream, frames of type 6)"
						  : "");
			return false;
		}
	}
	/* A run belongs to a namespace like a computer: its token must cover it. */
	const char *ns = json_string_value(json_object_get(b, "ns"));
	brig_identity nid = {ns, "run", "run", 1};
	brig_error *nerr = NULL;
	if (!ns) {
		serve__reply_fail(out, 400, "invalid", "ns: the run's namespace is a required string");
		return false;
	}
	if (brig_identity_validate(&nid, &nerr) != 0) {
		serve__reply_error(out, nerr);
		return false;
	}
	if (!serve__allowed(r, ns)) {
		serve__reply_fail(out, 403, "forbidden", "the token does not cover this namespace");
		return false;
	}
	json_t *js = json_object_get(b, "spec"), *to = json_object_get(b, "timeout_s");
	json_t *in = json_object_get(b, "inputs_tar"), *outs = json_object_get(b, "outputs");
	json_t *sin = json_object_get(b, "stdin"), *wd = json_object_get(b, "workdir");
	json_t *omb = json_object_get(b, "out_mb");
	if ((js && !json_is_object(js)) ||
	    (to && (!json_is_integer(to) || json_integer_value(to) < 1 || json_integer_value(to) > 86400)) ||
	    (in && !json_is_string(in)) || (outs && !json_is_boolean(outs))) {
		serve__reply_fail(
			out, 400, "invalid",
			"spec: an object; timeout_s: 1..86400; inputs_tar: base64 of a tar; outputs: a boolean");
		return false;
	}
	if ((sin && !json_is_boolean(sin)) || (wd && (!json_is_string(wd) || json_string_value(wd)[0] != '/')) ||
	    (omb && (!json_is_integer(omb) || json_integer_value(omb) < 1 || json_integer_value(omb) > 1 << 20))) {
		serve__reply_fail(out, 400, "invalid",
				  "stdin: a boolean; workdir: an absolute path; out_mb: 1..1048576");
		return false;
	}
	/* argv and capture_max as an exec's. */
	run->ej = json_pack("{s:O*,s:O*}", "argv", json_object_get(b, "argv"), "capture_max",
			    json_object_get(b, "capture_max"));
	brig_error *err = NULL;
	int rc = serve_exec_req_parse(&run->req, run->ej, &err);
	if (rc) {
		json_decref(run->ej);
		run->ej = NULL;
		serve__reply_error(out, err);
		return false;
	}
	run->body = json_incref(b);
	run->outputs = json_is_true(outs);
	run->with_stdin = json_is_true(sin);
	run->timeout_s = to ? json_integer_value(to) : 0;
	run->out_mb = omb ? json_integer_value(omb) : 0;
	run->workdir = json_string_value(wd);
	json_t *copy = js ? json_deep_copy(js) : json_object();
	if (!json_object_get(copy, "image") && serve__config(r)->image)
		json_object_set_new(copy, "image", json_string(serve__config(r)->image));
	rc = brig_spec_from_json(&run->spec, copy, &err);
	json_decref(copy);
	if (!rc && serve_spec_policy(&run->spec, serve__config(r), &err) != 0) {
		serve__reply_fail(out, 403, "policy", "%s", brig_error_message(err));
		brig_error_free(err);
		serve_run_clear(run);
		return false;
	}
	if (!rc)
		rc = serve_secret_values_check(json_object_get(b, "secret_values"), &run->spec, &err);
	if (!rc) {
		cleanup_free char *lbl = xasprintf("brig.serve.ns=%s", ns);
		rc = brig_spec_add_label(&run->spec, lbl, &err);
	}
	char tmpl[] = "/tmp/brig-serve-run-XXXXXX";
	if (!rc && mkdtemp(tmpl))
		run->dir = xstrdup(tmpl);
	else if (!rc)
		rc = brig__error_set(&err, BRIG_EIO, errno, "mkdtemp: %s", strerror(errno));
	if (!rc) {
		run->indir = xasprintf("%s/in", run->dir);
		run->outdir = xasprintf("%s/out", run->dir);
		if (mkdir(run->indir, 0700) != 0)
			rc = brig__error_set(&err, BRIG_EIO, errno, "mkdir: %s", strerror(errno));
	}
	if (rc) {
		serve__reply_error(out, err);
		serve_run_clear(run);
		return false;
	}
	return true;
}

int serve__run_go(serve_run_req *run, brig_engine *e, brig_run_opts *o, brig_run_result *res, brig_error **err)
{
	char **inputs = NULL;
	size_t n_in = 0;
	DIR *d = opendir(run->indir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		inputs = xrealloc(inputs, (n_in + 1) * sizeof *inputs);
		inputs[n_in++] = xasprintf("%s/%s", run->indir, de->d_name);
	}
	if (d)
		closedir(d);
	o->spec = &run->spec;
	o->argv = run->req.argv;
	o->inputs = (const char *const *)inputs;
	o->input_count = n_in;
	o->out_dir = run->outputs ? run->outdir : NULL;
	o->out_mb = run->out_mb;
	o->workdir = run->workdir;
	o->timeout_s = run->timeout_s;
	o->capture_max = run->req.capture_max;
	brig_egress__secrets_given(json_object_get(run->body, "secret_values"));
	int rc = brig_run(e, o, res, err);
	brig_egress__secrets_given(NULL);
	for (size_t i = 0; i < n_in; i++)
		free(inputs[i]);
	free(inputs);
	return rc;
}

int serve__run_outputs(serve_run_req *run, brig_tar_builder **out, brig_error **err)
{
	return outputs_builder(out, run->outdir, err);
}

void serve__h_runs(serve_req *r, serve_reply *out)
{
	serve_run_req run;
	if (!serve__run_prep(r, out, &run, false))
		return;
	brig_error *err = NULL;
	json_t *in = json_object_get(run.body, "inputs_tar");
	int rc = in ? unpack_inputs(run.indir, in, &err) : 0;
	brig_run_result res = {0};
	if (!rc) {
		brig_run_opts o = BRIG_RUN_OPTS_INIT;
		o.cancel_fd = serve__cancel_fd(r); /* the drain period is over: the run is removed */
		rc = serve__run_go(&run, serve__engine(r), &o, &res, &err);
		if (!rc)
			serve__exec_observe(r->srv, res.run_ms);
	}
	char *tar64 = NULL;
	if (!rc && run.outputs) {
		struct stat st;
		if (stat(run.outdir, &st) == 0)
			rc = pack_outputs(&tar64, run.outdir, &err);
		else
			tar64 = xstrdup("");
	}
	if (rc) {
		serve__reply_error(out, err);
	} else {
		json_t *j = brig_run_result_to_json(&res);
		if (tar64)
			json_object_set_new(j, "outputs_tar", json_string(tar64));
		serve__reply_json(out, 200, j);
	}
	free(tar64);
	brig_run_result_clear(&res);
	serve_run_clear(&run);
}
