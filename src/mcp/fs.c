/* fs.c — the MCP file tools over exec: one fixed sh script per operation,
 * with paths and numbers as positional parameters ("$1"), content through
 * stdin. Replaced by brig-init's native file API when it lands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/fs.h"
#include "util/util.h"

/* Each operation ends inside the computer after FS_DEADLINE seconds
 * (timeout(1)), well before brig's own deadline, which would stop the
 * computer. */
#define FS_DEADLINE "60"
#define FS_TIMEOUT_MS 90000

char *mcp_fs_path(const char *path, brig_error **err)
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
static int fs_run(mcp_call *c, const char *what, const char *script, const char *const *args, const char *in,
		  size_t in_len, size_t cap, brig_exec_result *res, brig_error **err)
{
	const char *argv[16] = {"timeout", "-k", "5", FS_DEADLINE, "sh", "-c", script, "sh"};
	size_t n = 8;
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int rc = mcp__exec(c, argv, in, in_len, cap, FS_TIMEOUT_MS, res, err);
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

int mcp_fs_read(mcp_call *c, const char *path, uint64_t offset, size_t length, char **data, size_t *len, uint64_t *size,
		brig_error **err)
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

int mcp_fs_write(mcp_call *c, const char *path, const char *data, size_t len, bool append, brig_error **err)
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

/* Parses "type|size|mode|mtime[|owner|group]" into o. */
static json_t *parse_meta(const char *meta, size_t len)
{
	cleanup_free char *m = xstrndup(meta, len);
	char *f[6] = {0};
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(m, "|", &save); t && n < 6; t = strtok_r(NULL, "|", &save))
		f[n++] = t;
	if (n < 4)
		return NULL;
	json_t *o = json_pack("{s:s,s:I,s:s,s:I}", "type", type_name(f[0]), "size", (json_int_t)strtoll(f[1], NULL, 10),
			      "mode", f[2], "mtime", (json_int_t)strtoll(f[3], NULL, 10));
	if (n >= 6) {
		json_object_set_new(o, "owner", mcp__string(f[4], strlen(f[4])));
		json_object_set_new(o, "group", mcp__string(f[5], strlen(f[5])));
	}
	return o;
}

int mcp_fs_list(mcp_call *c, const char *path, int depth, json_t **out, bool *truncated, brig_error **err)
{
	/* Per entry: the metadata line, then the name ended by NUL (names may
	 * hold newlines). */
	static const char script[] =
		"[ -e \"$1\" ] || { echo \"$1: No such file or directory\" >&2; exit 2; }\n"
		"[ -d \"$1\" ] || { echo \"$1: not a directory (stat describes files)\" >&2; exit 20; }\n"
		"find \"$1\" -mindepth 1 -maxdepth \"$2\" -exec sh -c "
		"'for f; do stat -c \"%F|%s|%a|%Y\" -- \"$f\" && printf \"%s\\0\" \"$f\"; done' sh {} +\n";
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
			json_object_set_new(o, "name", mcp__string(name, nlen));
			if (json_array_size(arr) < MCP_FS_MAX_ENTRIES)
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

int mcp_fs_stat(mcp_call *c, const char *path, json_t **out, brig_error **err)
{
	static const char script[] = "stat -c '%F|%s|%a|%Y|%U|%G' -- \"$1\"\n";
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

int mcp_fs_move(mcp_call *c, const char *src, const char *dst, bool overwrite, brig_error **err)
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

int mcp_fs_remove(mcp_call *c, const char *path, bool recursive, brig_error **err)
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

int mcp_fs_mkdir(mcp_call *c, const char *path, brig_error **err)
{
	static const char script[] = "mkdir -p -- \"$1\"\n";
	const char *args[] = {path, NULL};
	brig_exec_result res = {0};
	int rc = fs_run(c, path, script, args, NULL, 0, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}
