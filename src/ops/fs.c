/* fs.c — file operations (MCP tools, HTTP API). With brig-init (ops_guest gives a handle)
 * they use its native file API (stat, list, read, write, mkdir, remove,
 * rename). Computers created before brig-init run one fixed sh script per
 * operation through exec, with paths and numbers as positional parameters
 * ("$1"), content through stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/guest.h"
#include "ops/fs.h"
#include "util/util.h"

/* Each operation ends inside the computer after FS_DEADLINE seconds
 * (timeout(1)), well before brig's own deadline, which would stop the
 * computer. */
#define FS_DEADLINE "60"
#define FS_TIMEOUT_MS 90000

char *ops_fs_path(const char *path, brig_error **err)
{
	if (!path || !*path) {
		brig__error_set(err, BRIG_EINVAL, 0,
				"path is empty: give an absolute path or one relative to /workspace");
		return NULL;
	}
	if (path[0] == '/')
		return xstrdup(path);
	/* Relative paths start in /workspace; absolute ones also never begin
	 * with '-', so no command takes one for an option. */
	return xasprintf("/workspace/%s", path);
}

/* The last non-empty line of a command's stderr, for messages. */
static char *last_line(const brig_capture *cap)
{
	size_t end = cap->len;
	while (end && (cap->data[end - 1] == '\n' || cap->data[end - 1] == '\r'))
		end--;
	size_t start = end;
	while (start && cap->data[start - 1] != '\n')
		start--;
	char *s = xstrndup(cap->data + start, end - start);
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = '?';
	return s;
}

/* Runs script with args; a non-zero exit becomes an error named after what
 * stderr says. */
static int fs_run(ops_target *c, const char *what, const char *script, const char *const *args, const char *in,
		  size_t in_len, size_t cap, brig_exec_result *res, brig_error **err)
{
	const char *argv[16] = {"timeout", "-k", "5", FS_DEADLINE, "sh", "-c", script, "sh"};
	size_t n = 8;
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int rc = ops_exec(c, argv, in, in_len, cap, FS_TIMEOUT_MS, res, err);
	if (rc != 0)
		return brig__error_prefix(err, rc, "%s", what);
	if (res->exit_code == 0)
		return 0;
	cleanup_free char *why = last_line(&res->err);
	if ((res->exit_code == 124 || res->exit_code == 128 + 15 || res->exit_code == 128 + 9) && !*why)
		return brig__error_set(err, BRIG_ETIMEDOUT, 0,
				       "%s: took longer than " FS_DEADLINE "s and was stopped (ask for less: a smaller "
				       "depth, a shorter length)",
				       what);
	if (strstr(why, "No such file") || strstr(why, "can't stat") || strstr(why, "cannot stat"))
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s: %s", what, why);
	if (strstr(why, "Permission denied") || strstr(why, "Read-only file system"))
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "%s: %s (the computer's writable places are /workspace and /runtime)", what,
				       why);
	if (strstr(why, "File exists") || res->exit_code == 17)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "%s: %s", what, why);
	if (strstr(why, "No space left") || strstr(why, "Disk quota"))
		return brig__error_set(err, BRIG_ETOOBIG, 0, "%s: %s (the volume is full: remove files first)", what,
				       why);
	return brig__error_set(err, BRIG_EINVAL, 0, "%s: %s", what,
			       *why ? why : "the command failed without saying why");
}

static int exec_read(ops_target *c, const char *path, uint64_t offset, size_t length, char **data, size_t *len,
		     uint64_t *size, brig_error **err)
{
	/* The size on the first line, then the bytes. */
	static const char script[] = "[ -e \"$1\" ] || { echo \"$1: No such file or directory\" >&2; exit 2; }\n"
				     "[ -f \"$1\" ] || { echo \"$1: not a regular file (list_directory reads "
				     "directories)\" >&2; exit 21; }\n"
				     "s=$(stat -L -c %s -- \"$1\") || exit 1\n"
				     "printf '%s\\n' \"$s\"\n"
				     "tail -c +\"$2\" -- \"$1\" | head -c \"$3\"\n";
	char from[32], count[32];
	snprintf(from, sizeof from, "%llu", (unsigned long long)offset + 1);
	snprintf(count, sizeof count, "%zu", length);
	const char *args[] = {path, from, count, NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, NULL, 0, length + 64, &res, err);
	if (rc == 0) {
		char *nl = memchr(res.out.data, '\n', res.out.len);
		if (!nl || res.out.dropped) {
			rc = brig__error_set(err, BRIG_EPROTO, 0, "%s: the computer's answer was not understood", path);
		} else {
			*size = strtoull(res.out.data, NULL, 10);
			size_t head = (size_t)(nl + 1 - res.out.data);
			*len = res.out.len - head;
			*data = xmalloc(*len + 1);
			memcpy(*data, nl + 1, *len);
			(*data)[*len] = 0;
		}
	}
	brig_exec_result_clear(&res);
	return rc;
}

static int exec_write(ops_target *c, const char *path, const char *data, size_t len, bool append, brig_error **err)
{
	static const char script[] = "mkdir -p -- \"$(dirname -- \"$1\")\" || exit 1\n"
				     "[ -d \"$1\" ] && { echo \"$1: is a directory\" >&2; exit 21; }\n"
				     "if [ \"$2\" = 1 ]; then cat >> \"$1\"; else cat > \"$1\"; fi\n";
	const char *args[] = {path, append ? "1" : "0", NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, data ? data : "", len, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}

static int entry_cmp(const void *a, const void *b)
{
	json_t *const *x = a, *const *y = b;
	return strcmp(json_string_value(json_object_get(*x, "name")), json_string_value(json_object_get(*y, "name")));
}

/* "regular file" → "file", as the schemas name types. */
static const char *type_name(const char *t)
{
	if (strcmp(t, "regular file") == 0 || strcmp(t, "regular empty file") == 0)
		return "file";
	if (strcmp(t, "directory") == 0)
		return "directory";
	if (strcmp(t, "symbolic link") == 0)
		return "symlink";
	return "other";
}

/* stat -c's fields: type|size|mode|mtime|uid|gid|date[|owner|group]. The
 * nanoseconds come from the date ("2026-12-07 06:11:02.123456789 +0000"):
 * busybox's stat ignores a precision on %Y, GNU's and busybox's %y agree. */
#define STAT_FMT "%F|%s|%a|%Y|%u|%g|%y"

static int64_t date_nanos(const char *date)
{
	const char *dot = strchr(date, '.');
	int64_t ns = 0;
	int digits = 0;
	for (const char *p = dot ? dot + 1 : ""; digits < 9 && *p >= '0' && *p <= '9'; p++, digits++)
		ns = ns * 10 + (*p - '0');
	for (; digits < 9; digits++)
		ns *= 10;
	return ns;
}

static json_t *parse_meta(const char *meta, size_t len)
{
	cleanup_free char *m = xstrndup(meta, len);
	char *f[9] = {0};
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(m, "|", &save); t && n < 9; t = strtok_r(NULL, "|", &save))
		f[n++] = t;
	if (n < 7)
		return NULL;
	long long sec = strtoll(f[3], NULL, 10);
	json_t *o = json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:I}", "type", type_name(f[0]), "size",
			      (json_int_t)strtoll(f[1], NULL, 10), "mode", f[2], "mtime", (json_int_t)sec, "mtime_ns",
			      (json_int_t)(sec * 1000000000LL + date_nanos(f[6])), "uid",
			      (json_int_t)strtoll(f[4], NULL, 10), "gid", (json_int_t)strtoll(f[5], NULL, 10));
	if (n >= 9) {
		json_object_set_new(o, "owner", ops_string(f[7], strlen(f[7])));
		json_object_set_new(o, "group", ops_string(f[8], strlen(f[8])));
	}
	return o;
}

static int exec_list(ops_target *c, const char *path, int depth, json_t **out, bool *truncated, brig_error **err)
{
	/* Per entry: the metadata line, then the name ended by NUL (names may
	 * hold newlines). */
	static const char script[] =
		"[ -e \"$1\" ] || { echo \"$1: No such file or directory\" >&2; exit 2; }\n"
		"[ -d \"$1\" ] || { echo \"$1: not a directory (stat describes files)\" >&2; exit 20; }\n"
		"find \"$1\" -mindepth 1 -maxdepth \"$2\" -exec sh -c "
		"'for f; do stat -c \"" STAT_FMT "\" -- \"$f\" && printf \"%s\\0\" \"$f\"; done' sh {} +\n";
	char d[16];
	snprintf(d, sizeof d, "%d", depth);
	const char *args[] = {path, d, NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, NULL, 0, (size_t)8 << 20, &res, err);
	if (rc != 0) {
		brig_exec_result_clear(&res);
		return rc;
	}
	/* With output dropped, only the head is whole. */
	size_t avail = res.out.dropped ? res.out.len / 2 : res.out.len;
	*truncated = res.out.dropped > 0;
	size_t plen = strlen(path);
	while (plen > 1 && path[plen - 1] == '/')
		plen--;
	json_t *arr = json_array();
	const char *p = res.out.data, *end = res.out.data + avail;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		const char *nul = memchr(nl + 1, '\0', (size_t)(end - nl - 1));
		if (!nul)
			break;
		json_t *o = parse_meta(p, (size_t)(nl - p));
		const char *name = nl + 1;
		size_t nlen = (size_t)(nul - name);
		if (nlen > plen && memcmp(name, path, plen) == 0) {
			name += plen;
			nlen -= plen;
			while (nlen && *name == '/')
				name++, nlen--;
		}
		if (o) {
			json_object_set_new(o, "name", ops_string(name, nlen));
			if (json_array_size(arr) < OPS_FS_MAX_ENTRIES)
				json_array_append_new(arr, o);
			else {
				json_decref(o);
				*truncated = true;
			}
		}
		p = nul + 1;
	}
	brig_exec_result_clear(&res);
	/* Sorted by name; json arrays have no sort, so through a vector. */
	size_t n = json_array_size(arr);
	json_t **v = xcalloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(arr, i));
	qsort(v, n, sizeof *v, entry_cmp);
	json_array_clear(arr);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, v[i]);
	free(v);
	*out = arr;
	return 0;
}

static int exec_stat(ops_target *c, const char *path, json_t **out, brig_error **err)
{
	static const char script[] = "stat -c '" STAT_FMT "|%U|%G' -- \"$1\"\n";
	const char *args[] = {path, NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, NULL, 0, 4096, &res, err);
	if (rc == 0) {
		size_t l = res.out.len;
		while (l && res.out.data[l - 1] == '\n')
			l--;
		*out = parse_meta(res.out.data, l);
		if (!*out)
			rc = brig__error_set(err, BRIG_EPROTO, 0, "%s: the computer's answer was not understood", path);
	}
	brig_exec_result_clear(&res);
	return rc;
}

static int exec_move(ops_target *c, const char *src, const char *dst, bool overwrite, brig_error **err)
{
	static const char script[] =
		"[ -e \"$1\" ] || [ -L \"$1\" ] || { echo \"$1: No such file or directory\" >&2; exit 2; }\n"
		"if [ \"$3\" != 1 ] && { [ -e \"$2\" ] || [ -L \"$2\" ]; }; then\n"
		"  echo \"$2: File exists (set overwrite to replace it)\" >&2; exit 17; fi\n"
		"mkdir -p -- \"$(dirname -- \"$2\")\" && mv -f -- \"$1\" \"$2\"\n";
	const char *args[] = {src, dst, overwrite ? "1" : "0", NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, src, script, args, NULL, 0, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}

static int exec_remove(ops_target *c, const char *path, bool recursive, brig_error **err)
{
	static const char script[] =
		"[ -e \"$1\" ] || [ -L \"$1\" ] || { echo \"$1: No such file or directory\" >&2; exit 2; }\n"
		"if [ -d \"$1\" ] && [ ! -L \"$1\" ]; then\n"
		"  if [ \"$2\" = 1 ]; then rm -rf -- \"$1\"; else\n"
		"    rmdir -- \"$1\" 2>/dev/null || { echo \"$1: directory not empty (set recursive to remove "
		"it with its contents)\" >&2; exit 39; }; fi\n"
		"else rm -f -- \"$1\"; fi\n";
	const char *args[] = {path, recursive ? "1" : "0", NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, NULL, 0, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}

static int exec_mkdir(ops_target *c, const char *path, brig_error **err)
{
	static const char script[] = "mkdir -p -- \"$1\"\n";
	const char *args[] = {path, NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, NULL, 0, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}

/* ---- over brig-init ---- */

static int64_t fs_deadline(void)
{
	return brig_now_ms() + 60000;
}

/* The guest's error, told as the exec scripts told it: what, then why, and
 * what the model can do. */
static int guest_err(int rc, const char *what, brig_error **err)
{
	if (!err || !*err)
		return rc;
	cleanup_free char *why = xstrdup(brig_error_message(*err));
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, rc, 0, "%s: No such file or directory", what);
	if (rc == BRIG_EDENIED)
		return brig__error_set(
			err, rc, 0, "%s: %s (the computer's writable places are /workspace and /runtime)", what, why);
	if (rc == BRIG_ECONFLICT)
		return brig__error_set(err, rc, 0, "%s: %s", what, why);
	if (strstr(why, "No space left") || strstr(why, "Disk quota"))
		return brig__error_set(err, BRIG_ETOOBIG, 0, "%s: %s (the volume is full: remove files first)", what,
				       why);
	if (rc == BRIG_EIO)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: %s", what, why);
	return rc;
}

/* stat; *st NULL (and 0) when absent. */
static int guest_stat_opt(brig_guest *g, const char *path, bool nofollow, json_t **st, brig_error **err)
{
	*st = NULL;
	brig_error *serr = NULL;
	int rc = brig_guest_stat(g, st, path, nofollow, fs_deadline(), &serr);
	if (rc == BRIG_ENOTFOUND) {
		brig_error_free(serr);
		*st = NULL;
		return 0;
	}
	if (rc) {
		if (err)
			*err = serr;
		else
			brig_error_free(serr);
		return guest_err(rc, path, err);
	}
	return 0;
}

static const char *gtype(json_t *st)
{
	return json_string_value(json_object_get(st, "type")) ?: "";
}

/* The guest's stat as the tools' {"type","size","mode","mtime","mtime_ns","uid","gid"}. */
static json_t *meta_json(json_t *st)
{
	const char *t = gtype(st);
	const char *type = strcmp(t, "file") == 0      ? "file"
			   : strcmp(t, "dir") == 0     ? "directory"
			   : strcmp(t, "symlink") == 0 ? "symlink"
						       : "other";
	char mode[16];
	snprintf(mode, sizeof mode, "%o", (unsigned)(json_integer_value(json_object_get(st, "mode")) & 07777));
	json_int_t ns = json_integer_value(json_object_get(st, "mtime_ns"));
	return json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:I}", "type", type, "size",
			 json_integer_value(json_object_get(st, "size")), "mode", mode, "mtime",
			 (json_int_t)(ns >= 0 ? ns / 1000000000 : -((-ns + 999999999) / 1000000000)), "mtime_ns", ns,
			 "uid", json_integer_value(json_object_get(st, "uid")), "gid",
			 json_integer_value(json_object_get(st, "gid")));
}

static int buf_cb(const char *data, size_t len, void *payload)
{
	brig_buf *b = payload;
	/* The guest sends what was asked (length ≤ the buffer's cap); more is
	 * a lying guest, and the read stops. */
	return brig_buf_add(b, data, len) == 0 ? 0 : BRIG_ETOOBIG;
}

/* Runs a script through the guest (what writes need beyond the file API). */
struct gcap {
	brig_buf err;
};

static int gcap_cb(int stream, const char *data, size_t len, void *payload)
{
	struct gcap *g = payload;
	if (stream == BRIG_STREAM_STDERR && g->err.len < 4096)
		brig_buf_put(&g->err, data,
			     len < 4096 - g->err.len ? len : 4096 - g->err.len); /* clamped to the room */
	return 0;
}

static int guest_script(brig_guest *g, const char *what, const char *const *argv, const char *in, size_t in_len,
			brig_error **err)
{
	struct gcap cap;
	brig_buf_init(&cap.err, (size_t)-1);
	brig_guest_exec_opts o = {
		.version = BRIG_GUEST_EXEC_OPTS_VERSION,
		.argv = argv,
		.stdin_fd = -1,
		.stdin_data = in ? in : "",
		.stdin_len = in_len,
		.deadline_ms = fs_deadline(),
		.cancel_fd = -1,
		.on_output = gcap_cb,
		.payload = &cap,
		.resize_fd = -1,
	};
	brig_guest_exit ex = {0};
	int rc = brig_guest_exec(g, &o, &ex, err);
	if (!rc && ex.timed_out)
		rc = brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s: took longer than 60s and was stopped", what);
	else if (!rc && ex.code != 0) {
		brig_capture c = {.data = cap.err.data ? cap.err.data : "", .len = cap.err.len};
		cleanup_free char *why = last_line(&c);
		if (strstr(why, "Permission denied") || strstr(why, "Read-only file system"))
			rc = brig__error_set(err, BRIG_EDENIED, 0,
					     "%s: %s (the computer's writable places are /workspace and /runtime)",
					     what, why);
		else if (strstr(why, "No space left") || strstr(why, "Disk quota"))
			rc = brig__error_set(err, BRIG_ETOOBIG, 0, "%s: %s (the volume is full: remove files first)",
					     what, why);
		else
			rc = brig__error_set(err, BRIG_EINVAL, 0, "%s: %s", what,
					     *why ? why : "the command failed without saying why");
	}
	brig_buf_free(&cap.err);
	return rc;
}

static int guest_read(brig_guest *g, const char *path, uint64_t offset, size_t length, char **data, size_t *len,
		      uint64_t *size, brig_error **err)
{
	json_t *st = NULL;
	int rc = guest_stat_opt(g, path, false, &st, err);
	if (rc)
		return rc;
	if (!st)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s: No such file or directory", path);
	bool file = strcmp(gtype(st), "file") == 0;
	*size = (uint64_t)json_integer_value(json_object_get(st, "size"));
	json_decref(st);
	if (!file)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: not a regular file (list_directory reads directories)",
				       path);
	brig_buf b;
	brig_buf_init(&b, length + 1);
	if (offset < *size && length > 0) {
		rc = brig_guest_read(g, path, (int64_t)offset, (int64_t)length, buf_cb, &b, fs_deadline(), err);
		if (rc) {
			brig_buf_free(&b);
			return guest_err(rc, path, err);
		}
	}
	*len = b.len < length ? b.len : length;
	*data = xmalloc(*len + 1);
	if (*len)
		memcpy(*data, b.data, *len);
	(*data)[*len] = 0;
	brig_buf_free(&b);
	return 0;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

static int guest_write(brig_guest *g, const char *path, const char *data, size_t len, bool append, brig_error **err)
{
	json_t *st = NULL;
	int rc = guest_stat_opt(g, path, false, &st, err);
	if (rc)
		return rc;
	bool dir = st && strcmp(gtype(st), "dir") == 0;
	unsigned mode = st ? (unsigned)(json_integer_value(json_object_get(st, "mode")) & 07777) : 0644;
	json_decref(st);
	if (dir)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: is a directory", path);
	cleanup_free char *parent = dir_of(path);
	rc = brig_guest_mkdir(g, parent, 0755, true, fs_deadline(), err);
	if (rc)
		return guest_err(rc, parent, err);
	if (append) {
		/* WRITE replaces the file whole; appending is the shell's. */
		const char *argv[] = {"sh", "-c", "cat >> \"$1\"", "sh", path, NULL};
		return guest_script(g, path, argv, data, len, err);
	}
	rc = brig_guest_write(g, path, -1, data ? data : "", len, mode, false, fs_deadline(), err);
	return rc ? guest_err(rc, path, err) : 0;
}

static int guest_list(brig_guest *g, const char *path, int depth, json_t **out, bool *truncated, brig_error **err)
{
	json_t *st = NULL;
	int rc = guest_stat_opt(g, path, false, &st, err);
	if (rc)
		return rc;
	if (!st)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s: No such file or directory", path);
	bool dir = strcmp(gtype(st), "dir") == 0;
	json_decref(st);
	if (!dir)
		return brig__error_set(err, BRIG_EINVAL, 0, "%s: not a directory (stat describes files)", path);
	json_t *list = NULL;
	rc = brig_guest_list(g, &list, path, depth, fs_deadline(), err);
	if (rc == BRIG_ETOOBIG)
		return brig__error_set(err, BRIG_ETOOBIG, 0, "%s: more than 100000 entries (ask for a smaller depth)",
				       path);
	if (rc)
		return guest_err(rc, path, err);
	size_t n = json_array_size(list);
	json_t **v = xcalloc(n ? n : 1, sizeof *v);
	size_t i;
	json_t *e;
	json_array_foreach (list, i, e) {
		const char *name = json_string_value(json_object_get(e, "name")) ?: "";
		v[i] = meta_json(e);
		json_object_set_new(v[i], "name", ops_string(name, strlen(name)));
	}
	json_decref(list);
	qsort(v, n, sizeof *v, entry_cmp);
	*truncated = n > OPS_FS_MAX_ENTRIES;
	json_t *arr = json_array();
	for (i = 0; i < n; i++) {
		if (i < OPS_FS_MAX_ENTRIES)
			json_array_append_new(arr, v[i]);
		else
			json_decref(v[i]);
	}
	free(v);
	*out = arr;
	return 0;
}

/* The name of id in /etc/passwd or /etc/group (field 3), else the number. */
static json_t *id_name(brig_guest *g, const char *file, json_int_t id)
{
	brig_buf b;
	brig_buf_init(&b, (size_t)1 << 20);
	char num[24];
	snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, id);
	json_t *name = NULL;
	if (brig_guest_read(g, file, 0, 1 << 20, buf_cb, &b, fs_deadline(), NULL) == 0 && b.data) {
		char *save = NULL;
		for (char *line = strtok_r((char *)brig_buf_cstr(&b), "\n", &save); line && !name;
		     line = strtok_r(NULL, "\n", &save)) {
			char *f[4] = {0};
			size_t k = 0;
			for (char *p = line; k < 4; k++) {
				f[k] = p;
				char *colon = strchr(p, ':');
				if (!colon)
					break;
				*colon = 0;
				p = colon + 1;
			}
			if (k >= 3 && f[2] && strcmp(f[2], num) == 0 && *f[0])
				name = ops_string(f[0], strlen(f[0]));
		}
	}
	brig_buf_free(&b);
	return name ? name : json_string(num);
}

static int guest_stat(brig_guest *g, const char *path, json_t **out, brig_error **err)
{
	json_t *st = NULL;
	int rc = guest_stat_opt(g, path, true, &st, err);
	if (rc)
		return rc;
	if (!st)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s: No such file or directory", path);
	json_t *o = meta_json(st);
	json_object_set_new(o, "owner", id_name(g, "/etc/passwd", json_integer_value(json_object_get(st, "uid"))));
	json_object_set_new(o, "group", id_name(g, "/etc/group", json_integer_value(json_object_get(st, "gid"))));
	json_decref(st);
	*out = o;
	return 0;
}

static int guest_move(brig_guest *g, const char *src, const char *dst, bool overwrite, brig_error **err)
{
	json_t *st = NULL;
	int rc = guest_stat_opt(g, src, true, &st, err);
	if (rc)
		return rc;
	if (!st)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s: No such file or directory", src);
	json_decref(st);
	rc = guest_stat_opt(g, dst, true, &st, err);
	if (rc)
		return rc;
	bool exists = st != NULL;
	json_decref(st);
	if (exists && !overwrite)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "%s: File exists (set overwrite to replace it)", dst);
	cleanup_free char *parent = dir_of(dst);
	rc = brig_guest_mkdir(g, parent, 0755, true, fs_deadline(), err);
	if (rc)
		return guest_err(rc, parent, err);
	brig_error *rerr = NULL;
	rc = brig_guest_rename(g, src, dst, fs_deadline(), &rerr);
	if (rc == BRIG_EIO || rc == BRIG_ECONFLICT) {
		/* Across mounts, or onto a directory: as mv does it. */
		brig_error_free(rerr);
		const char *argv[] = {"sh", "-c", "mv -f -- \"$1\" \"$2\"", "sh", src, dst, NULL};
		return guest_script(g, src, argv, NULL, 0, err);
	}
	if (rc) {
		if (err)
			*err = rerr;
		else
			brig_error_free(rerr);
		return guest_err(rc, src, err);
	}
	return 0;
}

static int guest_remove(brig_guest *g, const char *path, bool recursive, brig_error **err)
{
	json_t *st = NULL;
	int rc = guest_stat_opt(g, path, true, &st, err);
	if (rc)
		return rc;
	if (!st)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s: No such file or directory", path);
	json_decref(st);
	brig_error *rerr = NULL;
	rc = brig_guest_remove(g, path, recursive, fs_deadline(), &rerr);
	if (rc == BRIG_ECONFLICT && !recursive) {
		brig_error_free(rerr);
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "%s: directory not empty (set recursive to remove it with its contents)", path);
	}
	if (rc) {
		if (err)
			*err = rerr;
		else
			brig_error_free(rerr);
		return guest_err(rc, path, err);
	}
	return 0;
}

static int guest_mkdir(brig_guest *g, const char *path, brig_error **err)
{
	int rc = brig_guest_mkdir(g, path, 0755, true, fs_deadline(), err);
	return rc ? guest_err(rc, path, err) : 0;
}

/* ---- the interface: brig-init when the computer has it, else exec ---- */

#define DISPATCH(guest_call, exec_call)                                 \
	do {                                                            \
		brig_guest *g = NULL;                                   \
		int rc = ops_guest(c, &g, err);                         \
		if (rc)                                                 \
			return brig__error_prefix(err, rc, "%s", path); \
		return g ? guest_call : exec_call;                      \
	} while (0)

int ops_fs_read(ops_target *c, const char *path, uint64_t offset, size_t length, char **data, size_t *len,
		uint64_t *size, brig_error **err)
{
	DISPATCH(guest_read(g, path, offset, length, data, len, size, err),
		 exec_read(c, path, offset, length, data, len, size, err));
}

int ops_fs_write(ops_target *c, const char *path, const char *data, size_t len, bool append, brig_error **err)
{
	DISPATCH(guest_write(g, path, data, len, append, err), exec_write(c, path, data, len, append, err));
}

int ops_fs_list(ops_target *c, const char *path, int depth, json_t **out, bool *truncated, brig_error **err)
{
	DISPATCH(guest_list(g, path, depth, out, truncated, err), exec_list(c, path, depth, out, truncated, err));
}

int ops_fs_stat(ops_target *c, const char *path, json_t **out, brig_error **err)
{
	DISPATCH(guest_stat(g, path, out, err), exec_stat(c, path, out, err));
}

int ops_fs_move(ops_target *c, const char *src, const char *dst, bool overwrite, brig_error **err)
{
	const char *path = src;
	DISPATCH(guest_move(g, src, dst, overwrite, err), exec_move(c, src, dst, overwrite, err));
}

int ops_fs_remove(ops_target *c, const char *path, bool recursive, brig_error **err)
{
	DISPATCH(guest_remove(g, path, recursive, err), exec_remove(c, path, recursive, err));
}

int ops_fs_mkdir(ops_target *c, const char *path, brig_error **err)
{
	DISPATCH(guest_mkdir(g, path, err), exec_mkdir(c, path, err));
}
