/* tools.c — the MCP tools brig offers a model: their descriptions and JSON
 * Schemas (input and output), argument checking, and each tool's work on the
 * session's computer (commands, files through fs.h, checkpoints, recovery,
 * information). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "brig/session.h"
#include "mcp/mcp.h"
#include "ops/fs.h"
#include "ops/ops.h"
#include "ops/procs.h"
#include "util/util.h"

#define RUN_TIMEOUT_DEFAULT_S 120
#define RUN_TIMEOUT_MAX_S 3600
#define RUN_OUTPUT_DEFAULT 65536
#define RUN_OUTPUT_MAX ((size_t)1 << 20)
#define READ_DEFAULT ((size_t)1 << 20)

/* ---- arguments ---- */

/* Checks that args has only the keys in allowed (NULL-terminated). */
static int args_known(json_t *args, const char *const *allowed, brig_error **err)
{
	const char *key;
	json_t *v;
	json_object_foreach (args, key, v) {
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			ok = ok || strcmp(key, allowed[i]) == 0;
		if (!ok) {
			brig_buf b;
			brig_buf_init(&b, 4096);
			for (size_t i = 0; allowed[i]; i++)
				brig_buf_putf(&b, "%s%s", i ? ", " : "", allowed[i]);
			int rc =
				brig__error_set(err, BRIG_EINVAL, 0, "unknown argument \"%.64s\" (this tool takes: %s)",
						key, b.len ? b.data : "no arguments");
			brig_buf_free(&b);
			return rc;
		}
	}
	return 0;
}

static int arg_str(json_t *args, const char *key, bool required, const char **out, brig_error **err)
{
	json_t *v = json_object_get(args, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return required ? brig__error_set(err, BRIG_EINVAL, 0, "argument \"%s\" is required", key) : 0;
	if (!json_is_string(v))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"%s\" must be a string", key);
	*out = json_string_value(v);
	return 0;
}

static int arg_int(json_t *args, const char *key, int64_t def, int64_t min, int64_t max, int64_t *out, brig_error **err)
{
	json_t *v = json_object_get(args, key);
	*out = def;
	if (!v || json_is_null(v))
		return 0;
	double d = json_number_value(v);
	/* the range first: a double past int64's cannot be converted to one */
	bool in_range = d >= (double)min && d <= (double)max && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
	if (!json_is_number(v) || (in_range && d != (double)(int64_t)d) || d != d)
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"%s\" must be a whole number", key);
	if (!in_range)
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"%s\" must be within %" PRId64 "..%" PRId64, key,
				       min, max);
	*out = (int64_t)d;
	return 0;
}

static int arg_bool(json_t *args, const char *key, bool *out, brig_error **err)
{
	json_t *v = json_object_get(args, key);
	*out = false;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"%s\" must be true or false", key);
	*out = json_is_true(v);
	return 0;
}

/* An absolute path argument (relative ones start in /workspace). */
static int arg_path(json_t *args, const char *key, bool required, char **out, brig_error **err)
{
	const char *p;
	*out = NULL;
	if (arg_str(args, key, required, &p, err) != 0)
		return BRIG_EINVAL;
	if (!p)
		return 0;
	*out = ops_fs_path(p, err);
	return *out ? 0 : BRIG_EINVAL;
}

/* ---- exec ---- */

/* The computer is stopped, failed or gone: say what the model can do. */
static int recover_hint(int rc, brig_error **err)
{
	if (rc != BRIG_ESTATE && rc != BRIG_ETIMEDOUT && rc != BRIG_ECANCELED && rc != BRIG_EUNCERTAIN &&
	    rc != BRIG_ENOTFOUND)
		return rc;
	if (!err || !*err)
		return rc;
	cleanup_free char *m = xstrdup(brig_error_message(*err));
	return brig__error_set(err, rc, 0,
			       "%s (call the recover tool: it replaces the computer from its latest checkpoint)", m);
}

static int on_output(int stream, const char *data, size_t len, void *payload)
{
	(void)stream, (void)data;
	mcp__output_seen(payload, len);
	return 0;
}

int mcp__exec(mcp_call *c, const char *const *argv, const char *stdin_data, size_t stdin_len, size_t capture_max,
	      int64_t timeout_ms, brig_exec_result *res, brig_error **err)
{
	return mcp__exec_env(c, argv, NULL, 0, NULL, stdin_data, stdin_len, capture_max, timeout_ms, res, err);
}

int mcp__exec_env(mcp_call *c, const char *const *argv, const char *const *env, size_t env_count, const char *workdir,
		  const char *stdin_data, size_t stdin_len, size_t capture_max, int64_t timeout_ms,
		  brig_exec_result *res, brig_error **err)
{
	memset(res, 0, sizeof *res);
	cleanup_free char *ref = NULL;
	int rc = mcp__computer(c, &ref, err);
	if (rc != 0)
		return recover_hint(rc, err);
	brig_exec_opts o = {
		.version = BRIG_EXEC_OPTS_VERSION,
		.argv = argv,
		.env = env,
		.env_count = env_count,
		.workdir = workdir,
		.stdin_fd = -1,
		.stdin_data = stdin_data,
		.stdin_len = stdin_len,
		.timeout_ms = timeout_ms,
		.cancel_fd = mcp__cancel_fd(c),
		.on_output = on_output,
		.payload = c,
		.capture_max = capture_max,
	};
	rc = brig_session_exec_by(mcp__engine(c), mcp__store(c), ref, &o, NULL, mcp__actor(c), res, err);
	if ((rc == BRIG_ETIMEDOUT || rc == BRIG_ECANCELED) && !res->container_stopped)
		/* brig-init ended the command inside the computer (certain):
		 * the computer keeps running with its files. */
		return rc;
	if (rc == BRIG_ETIMEDOUT || rc == BRIG_ECANCELED || rc == BRIG_EUNCERTAIN || rc == BRIG_ESTATE ||
	    rc == BRIG_ENOTFOUND || res->container_stopped) {
		/* The computer is stopped or gone: the next call looks again
		 * (brig_session_up says what to do). */
		mcp__computer_forget(c);
		mcp__log(c, "warning", "the computer %s stopped: %s", ref, err && *err ? brig_error_message(*err) : "");
		if (rc != 0)
			return recover_hint(rc, err);
	}
	return rc;
}

/* ---- the tools ---- */

typedef int (*tool_fn)(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err);

/* One stream of run's output with "[N bytes omitted]" where the middle was
 * dropped. */
static json_t *capture_text(const brig_capture *cap)
{
	if (!cap->dropped)
		return ops_string(cap->data ? cap->data : "", cap->len);
	size_t half = cap->len / 2;
	brig_buf b;
	brig_buf_init(&b, cap->len + 64);
	brig_buf_put(&b, cap->data, half);
	brig_buf_putf(&b, "\n[%" PRIu64 " bytes omitted]\n", cap->dropped);
	brig_buf_put(&b, cap->data + half, cap->len - half);
	json_t *s = ops_string(b.data, b.len);
	brig_buf_free(&b);
	return s;
}

static int tool_run(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"command", "argv",  "timeout_seconds",  "workdir",
					   "env",     "stdin", "max_output_bytes", NULL};
	const char *command, *workdir, *in;
	int64_t timeout_s, max_out;
	if (args_known(args, keys, err) || arg_str(args, "command", false, &command, err) ||
	    arg_str(args, "workdir", false, &workdir, err) || arg_str(args, "stdin", false, &in, err) ||
	    arg_int(args, "timeout_seconds", RUN_TIMEOUT_DEFAULT_S, 1, RUN_TIMEOUT_MAX_S, &timeout_s, err) ||
	    arg_int(args, "max_output_bytes", RUN_OUTPUT_DEFAULT, 1024, (int64_t)RUN_OUTPUT_MAX, &max_out, err))
		return BRIG_EINVAL;
	json_t *av = json_object_get(args, "argv");
	if (json_is_null(av))
		av = NULL;
	if (!command == !av)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "give either \"command\" (a shell command line) or \"argv\" (a program and "
				       "its arguments), not both");
	if (av && (!json_is_array(av) || json_array_size(av) == 0 || json_array_size(av) > 4096))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"argv\" must be a non-empty array of strings");
	json_t *envo = json_object_get(args, "env");
	if (envo && !json_is_null(envo) && !json_is_object(envo))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"env\" must be an object of strings");
	cleanup_free char *wd = NULL;
	if (workdir && !(wd = ops_fs_path(workdir, err)))
		return BRIG_EINVAL;

	/* With brig-init the deadline is its own (certain: the tree ends, the
	 * computer keeps running). Without, it is kept inside the computer by
	 * timeout(1), so a slow command ends alone; brig's own deadline (which
	 * stops such a computer) is only the safety net. */
	char secs[24];
	snprintf(secs, sizeof secs, "%" PRId64, timeout_s);
	size_t n = av ? json_array_size(av) : 3;
	const char **argv = xcalloc(n + 8, sizeof *argv);
	size_t k = 0;
	argv[k++] = "timeout", argv[k++] = "-k", argv[k++] = "5", argv[k++] = secs;
	if (av) {
		size_t i;
		json_t *v;
		json_array_foreach (av, i, v) {
			if (!json_is_string(v) || (i == 0 && json_string_value(v)[0] == '-') ||
			    (i == 0 && !json_string_value(v)[0])) {
				free(argv);
				return brig__error_set(err, BRIG_EINVAL, 0,
						       "argument \"argv\": entry %zu must be a string (the first a "
						       "program name, not an option)",
						       i);
			}
			argv[k++] = json_string_value(v);
		}
	} else {
		argv[k++] = "sh", argv[k++] = "-c", argv[k++] = command;
	}
	argv[k] = NULL;
	size_t env_count = envo ? json_object_size(envo) : 0;
	char **env = xcalloc(env_count + 1, sizeof *env);
	size_t ei = 0;
	int rc = 0;
	if (env_count) {
		const char *key;
		json_t *v;
		json_object_foreach (envo, key, v) {
			if (!json_is_string(v) || !*key || strchr(key, '=')) {
				rc = brig__error_set(
					err, BRIG_EINVAL, 0,
					"argument \"env\": entry \"%.64s\" must be NAME: \"value\" (a string)", key);
				break;
			}
			env[ei++] = xasprintf("%s=%s", key, json_string_value(v));
		}
	}
	brig_guest *g = NULL;
	if (rc == 0)
		rc = mcp__guest(c, &g, err);
	brig_exec_result res = {0};
	if (rc == 0)
		rc = mcp__exec_env(c, g ? argv + 4 : argv, (const char *const *)env, ei, wd, in, in ? strlen(in) : 0,
				   (size_t)max_out, g ? timeout_s * 1000 : (timeout_s + 30) * 1000, &res, err);
	for (size_t i = 0; i < ei; i++)
		free(env[i]);
	free(env);
	free(argv);
	/* brig-init's deadline: the same answer as timeout(1)'s below. */
	bool guest_timeout = rc == BRIG_ETIMEDOUT && g && res.timed_out && !res.container_stopped;
	if (guest_timeout)
		brig__error_clear(err);
	if (rc != 0 && !guest_timeout) {
		brig_exec_result_clear(&res);
		return rc;
	}
	json_t *so = capture_text(&res.out), *se = capture_text(&res.err);
	/* GNU timeout exits 124; BusyBox's passes on the signal's status. */
	bool timed_out = guest_timeout ||
			 (!g && (res.exit_code == 124 || ((res.exit_code == 128 + 15 || res.exit_code == 128 + 9) &&
							  res.duration_ms >= timeout_s * 1000 - 100)));
	if (timed_out) {
		rc = brig__error_set(err, BRIG_ETIMEDOUT, 0,
				     "the command timed out after %" PRId64 "s and was killed (raise timeout_seconds, "
				     "up to %d, or run it in the background with `nohup … &`).\n"
				     "stdout:\n%s\nstderr:\n%s",
				     timeout_s, RUN_TIMEOUT_MAX_S, json_string_value(so), json_string_value(se));
		json_decref(so), json_decref(se);
		brig_exec_result_clear(&res);
		return rc;
	}
	*out = json_pack("{s:i,s:o,s:o,s:I,s:I,s:I,s:I,s:I}", "exit_code", res.exit_code, "stdout", so, "stderr", se,
			 "stdout_bytes", (json_int_t)res.out.total, "stderr_bytes", (json_int_t)res.err.total,
			 "stdout_omitted", (json_int_t)res.out.dropped, "stderr_omitted", (json_int_t)res.err.dropped,
			 "duration_ms", (json_int_t)res.duration_ms);
	brig_buf b;
	brig_buf_init(&b, (size_t)-1);
	brig_buf_putf(&b, "exit code %d (%" PRId64 " ms)\n", res.exit_code, res.duration_ms);
	const char *sv = json_string_value(json_object_get(*out, "stdout"));
	const char *ev = json_string_value(json_object_get(*out, "stderr"));
	if (*sv)
		brig_buf_putf(&b, "--- stdout ---\n%s%s", sv, sv[strlen(sv) - 1] == '\n' ? "" : "\n");
	if (*ev)
		brig_buf_putf(&b, "--- stderr ---\n%s%s", ev, ev[strlen(ev) - 1] == '\n' ? "" : "\n");
	*text = brig_buf_steal(&b, NULL);
	brig_exec_result_clear(&res);
	return 0;
}

static int tool_read_file(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", "offset", "length", "encoding", NULL};
	cleanup_free char *path = NULL;
	const char *enc;
	int64_t offset, length;
	if (args_known(args, keys, err) || arg_path(args, "path", true, &path, err) ||
	    arg_int(args, "offset", 0, 0, INT64_MAX / 2, &offset, err) ||
	    arg_int(args, "length", (int64_t)READ_DEFAULT, 0, (int64_t)OPS_FS_MAX, &length, err) ||
	    arg_str(args, "encoding", false, &enc, err))
		return BRIG_EINVAL;
	if (enc && strcmp(enc, "auto") && strcmp(enc, "text") && strcmp(enc, "base64"))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"encoding\" must be auto, text or base64");
	cleanup_free char *data = NULL;
	size_t len = 0;
	uint64_t size = 0;
	int rc = ops_fs_read(mcp__target(c), path, (uint64_t)offset, (size_t)length, &data, &len, &size, err);
	if (rc != 0)
		return rc;
	bool as_b64 = enc ? strcmp(enc, "base64") == 0 : false;
	/* Text that JSON would escape to more than base64's size (mostly
	 * control characters: six bytes each, twice in the answer) goes as
	 * base64. */
	if (!enc || strcmp(enc, "auto") == 0)
		as_b64 = !ops_is_text(data, len) || ops_json_size(data, len) > len + len / 2;
	/* Both copies of the content (structuredContent and the text) fit one
	 * answer: a longer read comes back shorter, and says so (bytes, eof). */
	size_t budget = (MCP_ANSWER_MAX - ((size_t)64 << 10)) / 2;
	if (as_b64 && len > budget / 4 * 3)
		len = budget / 4 * 3;
	else if (!as_b64)
		len = ops_json_fit(data, len, budget);
	json_t *content;
	if (as_b64) {
		char *e = ops_b64encode((const unsigned char *)data, len);
		content = json_string(e);
		free(e);
	} else {
		content = ops_string(data, len);
	}
	bool eof = (uint64_t)offset + len >= size;
	*out = json_pack("{s:s,s:s,s:o,s:I,s:I,s:I,s:b}", "path", path, "encoding", as_b64 ? "base64" : "text",
			 "content", content, "offset", (json_int_t)offset, "bytes", (json_int_t)len, "size",
			 (json_int_t)size, "eof", eof);
	if (!as_b64 && eof && offset == 0)
		*text = xstrdup(json_string_value(content));
	else
		*text = xasprintf("%s bytes %" PRId64 "..%" PRId64 " of %" PRIu64 "%s (%s):\n%s", path, offset,
				  offset + (int64_t)len, size, eof ? "" : "; more remains: read on from offset",
				  as_b64 ? "base64" : "text", json_string_value(content));
	return 0;
}

static int tool_write_file(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", "content", "encoding", "append", NULL};
	cleanup_free char *path = NULL;
	const char *content, *enc;
	bool append;
	if (args_known(args, keys, err) || arg_path(args, "path", true, &path, err) ||
	    arg_str(args, "content", true, &content, err) || arg_str(args, "encoding", false, &enc, err) ||
	    arg_bool(args, "append", &append, err))
		return BRIG_EINVAL;
	if (enc && strcmp(enc, "text") && strcmp(enc, "base64"))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"encoding\" must be text or base64");
	size_t clen = json_string_length(json_object_get(args, "content"));
	cleanup_free unsigned char *bytes = NULL;
	const char *data = content;
	size_t len = clen;
	if (enc && strcmp(enc, "base64") == 0) {
		if (!(bytes = ops_b64decode(content, clen, &len)))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "argument \"content\" is not valid base64 (standard alphabet, padded)");
		data = (const char *)bytes;
	}
	if (len > OPS_FS_MAX)
		return brig__error_set(err, BRIG_ETOOBIG, 0,
				       "content is %zu bytes; one write takes at most %zu (append "
				       "the rest with append: true)",
				       len, OPS_FS_MAX);
	int rc = ops_fs_write(mcp__target(c), path, data, len, append, err);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s,s:I,s:b}", "path", path, "bytes_written", (json_int_t)len, "appended", append);
	*text = xasprintf("%s %zu bytes to %s", append ? "appended" : "wrote", len, path);
	return 0;
}

static int tool_edit_file(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", "old_string", "new_string", "replace_all", NULL};
	cleanup_free char *path = NULL;
	const char *olds, *news;
	bool all;
	if (args_known(args, keys, err) || arg_path(args, "path", true, &path, err) ||
	    arg_str(args, "old_string", true, &olds, err) || arg_str(args, "new_string", true, &news, err) ||
	    arg_bool(args, "replace_all", &all, err))
		return BRIG_EINVAL;
	size_t ol = json_string_length(json_object_get(args, "old_string"));
	size_t nl = json_string_length(json_object_get(args, "new_string"));
	if (ol == 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "old_string is empty: to create a file use write_file");
	if (ol == nl && memcmp(olds, news, ol) == 0)
		return brig__error_set(err, BRIG_EINVAL, 0, "old_string and new_string are the same: nothing to do");
	cleanup_free char *data = NULL;
	size_t len = 0;
	uint64_t size = 0;
	int rc = ops_fs_read(mcp__target(c), path, 0, OPS_FS_MAX + 1, &data, &len, &size, err);
	if (rc != 0)
		return rc;
	if (size > OPS_FS_MAX)
		return brig__error_set(err, BRIG_ETOOBIG, 0,
				       "%s is %" PRIu64 " bytes; edit_file handles up to %zu "
				       "(use run with sed, or write_file)",
				       path, size, OPS_FS_MAX);
	size_t count = 0;
	for (const char *p = data; (p = memmem(p, len - (size_t)(p - data), olds, ol)); p += ol)
		count++;
	if (count == 0)
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "old_string was not found in %s: it must match exactly, whitespace and "
				       "indentation included (read_file it and copy the text)",
				       path);
	if (count > 1 && !all)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "old_string occurs %zu times in %s: add surrounding lines to make it unique, "
				       "or set replace_all to replace every one",
				       count, path);
	brig_buf b;
	brig_buf_init(&b, (size_t)-1);
	const char *p = data, *end = data + len;
	for (const char *m; (m = memmem(p, (size_t)(end - p), olds, ol)); p = m + ol) {
		brig_buf_put(&b, p, (size_t)(m - p));
		brig_buf_put(&b, news, nl);
	}
	brig_buf_put(&b, p, (size_t)(end - p));
	if (b.len > OPS_FS_MAX)
		rc = brig__error_set(err, BRIG_ETOOBIG, 0, "the edited file would be %zu bytes; at most %zu", b.len,
				     OPS_FS_MAX);
	else
		rc = ops_fs_write(mcp__target(c), path, b.data ? b.data : "", b.len, false, err);
	size_t newlen = b.len;
	brig_buf_free(&b);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s,s:I,s:I}", "path", path, "replacements", (json_int_t)count, "bytes", (json_int_t)newlen);
	*text = xasprintf("replaced %zu occurrence%s in %s (now %zu bytes)", count, count == 1 ? "" : "s", path,
			  newlen);
	return 0;
}

static int tool_list_directory(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", "depth", NULL};
	cleanup_free char *path = NULL;
	int64_t depth;
	if (args_known(args, keys, err) || arg_path(args, "path", false, &path, err) ||
	    arg_int(args, "depth", 1, 1, 10, &depth, err))
		return BRIG_EINVAL;
	if (!path)
		path = xstrdup("/workspace");
	json_t *entries = NULL;
	bool truncated = false;
	int rc = ops_fs_list(mcp__target(c), path, (int)depth, &entries, &truncated, err);
	if (rc != 0)
		return rc;
	brig_buf b;
	brig_buf_init(&b, (size_t)-1);
	brig_buf_putf(&b, "%s (%zu entries%s)\n", path, json_array_size(entries), truncated ? ", truncated" : "");
	size_t i;
	json_t *e;
	json_array_foreach (entries, i, e) {
		const char *t = json_string_value(json_object_get(e, "type"));
		brig_buf_putf(&b, "%s%s %" JSON_INTEGER_FORMAT "\n", json_string_value(json_object_get(e, "name")),
			      strcmp(t, "directory") == 0 ? "/"
			      : strcmp(t, "symlink") == 0 ? "@"
							  : "",
			      json_integer_value(json_object_get(e, "size")));
	}
	*text = brig_buf_steal(&b, NULL);
	*out = json_pack("{s:s,s:o,s:b}", "path", path, "entries", entries, "truncated", truncated);
	return 0;
}

static int tool_stat(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", NULL};
	cleanup_free char *path = NULL;
	if (args_known(args, keys, err) || arg_path(args, "path", true, &path, err))
		return BRIG_EINVAL;
	json_t *st = NULL;
	int rc = ops_fs_stat(mcp__target(c), path, &st, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		*out = json_pack("{s:s,s:b}", "path", path, "exists", 0);
		*text = xasprintf("%s does not exist", path);
		return 0;
	}
	if (rc != 0)
		return rc;
	json_object_set_new(st, "path", json_string(path));
	json_object_set_new(st, "exists", json_true());
	*out = st;
	*text = xasprintf(
		"%s: %s, %" JSON_INTEGER_FORMAT " bytes, mode %s, owner %s", path,
		json_string_value(json_object_get(st, "type")), json_integer_value(json_object_get(st, "size")),
		json_string_value(json_object_get(st, "mode")), json_string_value(json_object_get(st, "owner")));
	return 0;
}

static int tool_move(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"source", "destination", "overwrite", NULL};
	cleanup_free char *src = NULL, *dst = NULL;
	bool ow;
	if (args_known(args, keys, err) || arg_path(args, "source", true, &src, err) ||
	    arg_path(args, "destination", true, &dst, err) || arg_bool(args, "overwrite", &ow, err))
		return BRIG_EINVAL;
	int rc = ops_fs_move(mcp__target(c), src, dst, ow, err);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s,s:s}", "source", src, "destination", dst);
	*text = xasprintf("moved %s to %s", src, dst);
	return 0;
}

static int tool_remove(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", "recursive", NULL};
	cleanup_free char *path = NULL;
	bool rec;
	if (args_known(args, keys, err) || arg_path(args, "path", true, &path, err) ||
	    arg_bool(args, "recursive", &rec, err))
		return BRIG_EINVAL;
	int rc = ops_fs_remove(mcp__target(c), path, rec, err);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s,s:b}", "path", path, "removed", 1);
	*text = xasprintf("removed %s", path);
	return 0;
}

static int tool_make_directory(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"path", NULL};
	cleanup_free char *path = NULL;
	if (args_known(args, keys, err) || arg_path(args, "path", true, &path, err))
		return BRIG_EINVAL;
	int rc = ops_fs_mkdir(mcp__target(c), path, err);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s}", "path", path);
	*text = xasprintf("made %s", path);
	return 0;
}

static json_t *checkpoint_json(const brig_store_checkpoint *cp)
{
	return json_pack("{s:I,s:I,s:s,s:I,s:I,s:I}", "id", (json_int_t)cp->id, "generation",
			 (json_int_t)cp->generation, "digest", cp->digest, "bytes_raw", (json_int_t)cp->bytes_raw,
			 "bytes_stored", (json_int_t)cp->bytes_stored, "created_ms", (json_int_t)cp->created_ms);
}

static int tool_checkpoint(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"keep", NULL};
	int64_t keep;
	if (args_known(args, keys, err) || arg_int(args, "keep", 0, 0, 1000000, &keep, err))
		return BRIG_EINVAL;
	cleanup_free char *ref = NULL;
	int rc = mcp__computer(c, &ref, err);
	if (rc != 0)
		return recover_hint(rc, err);
	brig_checkpoint_opts o = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .keep = (size_t)keep};
	brig_store_checkpoint *cp = NULL;
	rc = brig_checkpoint_create(mcp__engine(c), mcp__store(c), &cp, ref, &o, err);
	if (rc != 0)
		return rc;
	*out = checkpoint_json(cp);
	*text = xasprintf("checkpoint %" PRId64 " of generation %" PRId64 ": %" PRId64 " bytes archived, %" PRId64
			  " stored (sha256 %s)",
			  cp->id, cp->generation, cp->bytes_raw, cp->bytes_stored, cp->digest);
	brig_store_checkpoint_free(cp);
	return 0;
}

static int tool_list_checkpoints(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {NULL};
	if (args_known(args, keys, err))
		return BRIG_EINVAL;
	const char *ns, *agent, *session;
	mcp__identity(c, &ns, &agent, &session);
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	int rc = mcp__store(c) ? brig_store_checkpoint_list(mcp__store(c), &cps, &n, ns, agent, session, err)
			       : brig__error_set(err, BRIG_EINVAL, 0, "this server has no session store");
	if (rc != 0)
		return rc;
	json_t *arr = json_array();
	brig_buf b;
	brig_buf_init(&b, (size_t)-1);
	brig_buf_putf(&b, "%zu checkpoint%s, newest first\n", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, checkpoint_json(&cps[i]));
		brig_buf_putf(&b, "%" PRId64 " generation %" PRId64 " %" PRId64 " bytes %.12s\n", cps[i].id,
			      cps[i].generation, cps[i].bytes_raw, cps[i].digest);
	}
	brig_store_checkpoint_free_array(cps, n);
	*out = json_pack("{s:o}", "checkpoints", arr);
	*text = brig_buf_steal(&b, NULL);
	return 0;
}

static int tool_recover(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {NULL};
	if (args_known(args, keys, err))
		return BRIG_EINVAL;
	if (!mcp__engine(c) || !mcp__store(c))
		return brig__error_set(err, BRIG_EINVAL, 0, "this server has no Docker engine or session store");
	const char *ns, *agent, *session;
	mcp__identity(c, &ns, &agent, &session);
	const mcp_config *cfg = mcp__config(c);
	int rc = cfg->recorded_policy ? cfg->recorded_policy(cfg, err) : 0;
	if (rc)
		return rc;
	brig_recover_result r;
	memset(&r, 0, sizeof r);
	rc = brig_session_recover(mcp__engine(c), mcp__store(c), &r, ns, agent, session, NULL, err);
	mcp__computer_forget(c);
	if (rc != 0) {
		if (rc == BRIG_ESTATE)
			brig__error_prefix(err, rc, "nothing to recover (the computer is running: go on using it)");
		return rc;
	}
	*out = json_pack("{s:s,s:I,s:I,s:I,s:b}", "name", r.computer->name, "old_generation",
			 (json_int_t)r.old_generation, "new_generation", (json_int_t)r.new_generation, "checkpoint_id",
			 (json_int_t)r.checkpoint_id, "restored", r.checkpoint_id != 0);
	*text = r.checkpoint_id
			? xasprintf("recovered into generation %" PRId64 " from checkpoint %" PRId64
				    ": /workspace and /runtime are as they were then",
				    r.new_generation, r.checkpoint_id)
			: xasprintf("recovered into generation %" PRId64 ": no checkpoint existed, the computer "
				    "starts empty",
				    r.new_generation);
	brig_recover_result_clear(&r);
	return 0;
}

static int tool_computer_info(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {NULL};
	if (args_known(args, keys, err))
		return BRIG_EINVAL;
	cleanup_free char *ref = NULL;
	int rc = mcp__computer(c, &ref, err);
	if (rc != 0)
		return recover_hint(rc, err);
	brig_computer *comp = NULL;
	rc = brig_computer_get(mcp__engine(c), &comp, ref, NULL, err);
	if (rc != 0) {
		if (rc == BRIG_ENOTFOUND)
			mcp__computer_forget(c);
		return rc;
	}
	json_t *limits = json_object();
	static const char *const lk[] = {"cpus", "memory_mb", "pids", "workspace_mb", "runtime_mb", NULL};
	for (size_t i = 0; lk[i]; i++) {
		json_t *v = json_object_get(comp->spec, lk[i]);
		if (json_is_number(v))
			json_object_set(limits, lk[i], v);
	}
	*out = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:I,s:o}", "name", comp->name, "ns",
			 comp->ns ? comp->ns : "", "agent", comp->agent ? comp->agent : "", "session",
			 comp->session ? comp->session : "", "state", comp->state ? comp->state : "unknown", "image",
			 comp->image ? comp->image : "", "network", comp->network ? comp->network : "none",
			 "generation", (json_int_t)comp->generation, "harness", comp->harness ? comp->harness : "none",
			 "image_id", comp->image_id ? comp->image_id : "", "created", (json_int_t)comp->created,
			 "limits", limits);
	*text = json_dumps(*out, JSON_INDENT(2) | JSON_SORT_KEYS);
	brig_computer_free(comp);
	return 0;
}

/* ---- background processes ---- */

static void free_env(char **env, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	free(env);
}

static int tool_start_process(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"command", "argv", "workdir", "env", NULL};
	const char *command, *workdir;
	if (args_known(args, keys, err) || arg_str(args, "command", false, &command, err) ||
	    arg_str(args, "workdir", false, &workdir, err))
		return BRIG_EINVAL;
	json_t *av = json_object_get(args, "argv");
	if (json_is_null(av))
		av = NULL;
	if (!command == !av)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "give either \"command\" (a shell command line) or \"argv\" (a program and "
				       "its arguments), not both");
	if (av && (!json_is_array(av) || json_array_size(av) == 0 || json_array_size(av) > 4000))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"argv\" must be a non-empty array of strings");
	json_t *envo = json_object_get(args, "env");
	if (envo && !json_is_null(envo) && !json_is_object(envo))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"env\" must be an object of strings");
	cleanup_free char *wd = NULL;
	if (workdir && !(wd = ops_fs_path(workdir, err)))
		return BRIG_EINVAL;
	size_t n = av ? json_array_size(av) : 3;
	cleanup_free const char **argv = xcalloc(n + 1, sizeof *argv);
	if (av) {
		size_t i;
		json_t *v;
		json_array_foreach (av, i, v) {
			if (!json_is_string(v) || !json_string_value(v)[0])
				return brig__error_set(err, BRIG_EINVAL, 0,
						       "argument \"argv\": entry %zu must be a non-empty string", i);
			argv[i] = json_string_value(v);
		}
	} else {
		argv[0] = "sh", argv[1] = "-c", argv[2] = command;
	}
	size_t env_count = envo && json_is_object(envo) ? json_object_size(envo) : 0, ei = 0;
	char **env = xcalloc(env_count + 1, sizeof *env);
	if (env_count) {
		const char *key;
		json_t *v;
		json_object_foreach (envo, key, v) {
			if (!json_is_string(v) || !*key || strchr(key, '=')) {
				free_env(env, ei);
				return brig__error_set(err, BRIG_EINVAL, 0,
						       "argument \"env\": entry \"%.64s\" must be NAME: \"value\"",
						       key);
			}
			env[ei++] = xasprintf("%s=%s", key, json_string_value(v));
		}
	}
	char *id = NULL;
	mcp__note_background(c);
	int rc = ops_proc_start(mcp__target(c), argv, wd, (const char *const *)env, ei, &id, err);
	free_env(env, ei);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s}", "id", id);
	*text = xasprintf("started background process %s: read_process_output shows its output, send_input feeds "
			  "it, kill_process ends it",
			  id);
	free(id);
	return 0;
}

static int tool_list_processes(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {NULL};
	if (args_known(args, keys, err))
		return BRIG_EINVAL;
	json_t *arr = NULL;
	int rc = ops_proc_list(mcp__target(c), &arr, err);
	if (rc != 0)
		return rc;
	brig_buf b;
	brig_buf_init(&b, (size_t)-1);
	brig_buf_putf(&b, "%zu background process%s\n", json_array_size(arr), json_array_size(arr) == 1 ? "" : "es");
	size_t i;
	json_t *p;
	json_array_foreach (arr, i, p) {
		json_t *code = json_object_get(p, "exit_code");
		if (json_is_true(json_object_get(p, "running")))
			brig_buf_putf(&b, "%s running  %s\n", json_string_value(json_object_get(p, "id")),
				      json_string_value(json_object_get(p, "command")));
		else
			brig_buf_putf(&b, "%s exited %" JSON_INTEGER_FORMAT "  %s\n",
				      json_string_value(json_object_get(p, "id")),
				      json_is_integer(code) ? json_integer_value(code) : (json_int_t)-1,
				      json_string_value(json_object_get(p, "command")));
	}
	*text = brig_buf_steal(&b, NULL);
	*out = json_pack("{s:o}", "processes", arr);
	return 0;
}

static int tool_read_process_output(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"id", "stdout_offset", "stderr_offset", "max_bytes", NULL};
	const char *id;
	int64_t oo, eo, max;
	if (args_known(args, keys, err) || arg_str(args, "id", true, &id, err) ||
	    arg_int(args, "stdout_offset", 0, 0, INT64_MAX / 2, &oo, err) ||
	    arg_int(args, "stderr_offset", 0, 0, INT64_MAX / 2, &eo, err) ||
	    arg_int(args, "max_bytes", 65536, 1, (int64_t)1 << 20, &max, err))
		return BRIG_EINVAL;
	json_t *st = NULL;
	int rc = ops_proc_read(mcp__target(c), id, (uint64_t)oo, (uint64_t)eo, (size_t)max, &st, err);
	if (rc != 0)
		return rc;
	json_t *code = json_object_get(st, "exit_code");
	const char *so = json_string_value(json_object_get(st, "stdout"));
	const char *se = json_string_value(json_object_get(st, "stderr"));
	char state[64];
	if (json_is_true(json_object_get(st, "running")))
		snprintf(state, sizeof state, "running");
	else
		snprintf(state, sizeof state, "exited with %" JSON_INTEGER_FORMAT,
			 json_is_integer(code) ? json_integer_value(code) : (json_int_t)-1);
	*text = xasprintf("%s %s; next offsets stdout %" JSON_INTEGER_FORMAT " stderr %" JSON_INTEGER_FORMAT
			  "\n--- stdout ---\n%s\n--- stderr ---\n%s",
			  id, state, json_integer_value(json_object_get(st, "stdout_next_offset")),
			  json_integer_value(json_object_get(st, "stderr_next_offset")), so, se);
	*out = st;
	return 0;
}

static int tool_send_input(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"id", "text", "close", NULL};
	const char *id, *in;
	bool close_input;
	if (args_known(args, keys, err) || arg_str(args, "id", true, &id, err) ||
	    arg_str(args, "text", false, &in, err) || arg_bool(args, "close", &close_input, err))
		return BRIG_EINVAL;
	size_t len = in ? json_string_length(json_object_get(args, "text")) : 0;
	int rc = ops_proc_input(mcp__target(c), id, in ? in : "", len, close_input, err);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s,s:I,s:b}", "id", id, "bytes", (json_int_t)len, "closed", close_input);
	*text = xasprintf("sent %zu bytes to %s%s", len, id, close_input ? " and closed its input" : "");
	return 0;
}

static int tool_kill_process(mcp_call *c, json_t *args, json_t **out, char **text, brig_error **err)
{
	static const char *const keys[] = {"id", "signal", NULL};
	const char *id, *sig;
	if (args_known(args, keys, err) || arg_str(args, "id", true, &id, err) ||
	    arg_str(args, "signal", false, &sig, err))
		return BRIG_EINVAL;
	if (!sig)
		sig = "TERM";
	if (strcmp(sig, "TERM") && strcmp(sig, "KILL") && strcmp(sig, "INT") && strcmp(sig, "HUP"))
		return brig__error_set(err, BRIG_EINVAL, 0, "argument \"signal\" must be TERM, KILL, INT or HUP");
	int rc = ops_proc_kill(mcp__target(c), id, sig, err);
	if (rc != 0)
		return rc;
	*out = json_pack("{s:s,s:s}", "id", id, "signal", sig);
	*text = xasprintf("sent SIG%s to %s", sig, id);
	return 0;
}

/* ---- the table ---- */

#define S_PATH(what) "{\"type\":\"string\",\"description\":\"" what " (absolute, or relative to /workspace)\"}"
#define CP_PROPS                                                                                                \
	"\"id\":{\"type\":\"integer\"},\"generation\":{\"type\":\"integer\"},\"digest\":{\"type\":\"string\"}," \
	"\"bytes_raw\":{\"type\":\"integer\"},\"bytes_stored\":{\"type\":\"integer\"},"                         \
	"\"created_ms\":{\"type\":\"integer\"}"

typedef struct tool {
	const char *name;
	const char *title;
	const char *description;
	const char *input;  /* JSON Schema */
	const char *output; /* JSON Schema of structuredContent */
	bool read_only, destructive, idempotent;
	tool_fn fn;
} tool;

static const tool tools[] = {
	{"run", "Run a command",
	 "Run a command in the sandboxed Linux computer and wait for it to end. Give `command` (a shell command "
	 "line, run with sh -c) or `argv` (a program and its arguments, no shell). Runs as an unprivileged user "
	 "in /workspace unless `workdir` says otherwise. Returns the exit code, stdout and stderr; long output "
	 "keeps its beginning and end with \"[N bytes omitted]\" between. A command that passes "
	 "`timeout_seconds` (default 120) is killed and reported as an error.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"command\":{\"type\":\"string\",\"description\":\"Shell command line, run with sh -c\"},"
	 "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
	 "\"description\":\"Program and arguments, run without a shell (instead of command)\"},"
	 "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,\"default\":120},"
	 "\"workdir\":" S_PATH(
		 "Working directory") ","
				      "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
				      "\"description\":\"Extra environment variables\"},"
				      "\"stdin\":{\"type\":\"string\",\"description\":\"Text given to the command's "
				      "standard input\"},"
				      "\"max_output_bytes\":{\"type\":\"integer\",\"minimum\":1024,\"maximum\":1048576,"
				      "\"default\":65536,"
				      "\"description\":\"Bytes of stdout (and of stderr) kept: half from the start, "
				      "half from the end\"}},"
				      "\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"exit_code\":{\"type\":\"integer\"},\"stdout\":{\"type\":\"string\"},"
	 "\"stderr\":{\"type\":\"string\"},\"stdout_bytes\":{\"type\":\"integer\"},"
	 "\"stderr_bytes\":{\"type\":\"integer\"},\"stdout_omitted\":{\"type\":\"integer\"},"
	 "\"stderr_omitted\":{\"type\":\"integer\"},\"duration_ms\":{\"type\":\"integer\"}},"
	 "\"required\":[\"exit_code\",\"stdout\",\"stderr\",\"stdout_bytes\",\"stderr_bytes\",\"stdout_omitted\","
	 "\"stderr_omitted\",\"duration_ms\"]}",
	 false, true, false, tool_run},
	{"read_file", "Read a file",
	 "Read a file of the computer. Text comes back as text; binary content, text that is mostly control "
	 "characters, or encoding \"base64\" as base64. "
	 "Large files: read them in pieces with `offset` and `length` (default 1 MiB, at most 8 MiB); one answer "
	 "holds at most about 4 MiB (less for text that JSON escapes), so `bytes` says how much came and `eof` "
	 "whether the end was reached: read on from offset + bytes.",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "File") ","
			 "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
			 "\"length\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":8388608,\"default\":1048576},"
			 "\"encoding\":{\"type\":\"string\",\"enum\":[\"auto\",\"text\",\"base64\"],\"default\":"
			 "\"auto\"}},"
			 "\"required\":[\"path\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
	 "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"]},\"content\":{\"type\":\"string\"},"
	 "\"offset\":{\"type\":\"integer\"},\"bytes\":{\"type\":\"integer\"},\"size\":{\"type\":\"integer\"},"
	 "\"eof\":{\"type\":\"boolean\"}},"
	 "\"required\":[\"path\",\"encoding\",\"content\",\"offset\",\"bytes\",\"size\",\"eof\"]}",
	 true, false, true, tool_read_file},
	{"write_file", "Write a file",
	 "Write a file of the computer (replacing it, or appending with `append`), creating missing parent "
	 "directories. `content` is text, or base64 with encoding \"base64\" for binary files. At most 8 MiB per "
	 "call.",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "File") ","
			 "\"content\":{\"type\":\"string\"},"
			 "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"],\"default\":\"text\"},"
			 "\"append\":{\"type\":\"boolean\",\"default\":false}},"
			 "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"bytes_written\":{\"type\":\"integer\"},"
	 "\"appended\":{\"type\":\"boolean\"}},\"required\":[\"path\",\"bytes_written\",\"appended\"]}",
	 false, true, false, tool_write_file},
	{"edit_file", "Edit a file",
	 "Replace exact text in a file: `old_string` must occur exactly once (copy it from read_file, whitespace "
	 "and indentation included) unless `replace_all` is set; it becomes `new_string`.",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "File") ","
			 "\"old_string\":{\"type\":\"string\",\"minLength\":1},\"new_string\":{\"type\":\"string\"},"
			 "\"replace_all\":{\"type\":\"boolean\",\"default\":false}},"
			 "\"required\":[\"path\",\"old_string\",\"new_string\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"replacements\":{\"type\":\"integer\"},"
	 "\"bytes\":{\"type\":\"integer\"}},\"required\":[\"path\",\"replacements\",\"bytes\"]}",
	 false, true, false, tool_edit_file},
	{"list_directory", "List a directory",
	 "List a directory of the computer (default /workspace): names relative to it, with type (file, "
	 "directory, symlink, other), size, mode and mtime. `depth` > 1 descends into subdirectories.",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "Directory") ","
			      "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10,\"default\":1}},"
			      "\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"truncated\":{\"type\":\"boolean\"},"
	 "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
	 "\"name\":{\"type\":\"string\"},\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\",\"symlink\","
	 "\"other\"]},\"size\":{\"type\":\"integer\"},\"mode\":{\"type\":\"string\"},\"mtime\":{\"type\":\"integer\"},"
	 "\"mtime_ns\":{\"type\":\"integer\"},\"uid\":{\"type\":\"integer\"},\"gid\":{\"type\":\"integer\"}},"
	 "\"required\":[\"name\",\"type\",\"size\",\"mode\",\"mtime\"]}}},"
	 "\"required\":[\"path\",\"entries\",\"truncated\"]}",
	 true, false, true, tool_list_directory},
	{"stat", "Describe a path",
	 "Tell whether a path exists and, if so, its type, size, octal mode, mtime (unix seconds), owner and group "
	 "(a symlink is described itself, not its target).",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "Path") "},"
			 "\"required\":[\"path\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"exists\":{\"type\":\"boolean\"},"
	 "\"type\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},\"mode\":{\"type\":\"string\"},"
	 "\"mtime\":{\"type\":\"integer\"},\"mtime_ns\":{\"type\":\"integer\"},\"uid\":{\"type\":\"integer\"},"
	 "\"gid\":{\"type\":\"integer\"},\"owner\":{\"type\":\"string\"},\"group\":{\"type\":\"string\"}},"
	 "\"required\":[\"path\",\"exists\"]}",
	 true, false, true, tool_stat},
	{"move", "Move or rename",
	 "Move or rename a file or directory. An existing destination is an error unless `overwrite` is set.",
	 "{\"type\":\"object\",\"properties\":{\"source\":" S_PATH(
		 "What to move") ","
				 "\"destination\":" S_PATH(
					 "New path") ",\"overwrite\":{\"type\":\"boolean\",\"default\":false}},"
						     "\"required\":[\"source\",\"destination\"],"
						     "\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"source\":{\"type\":\"string\"},\"destination\":{\"type\":\"string\"}},"
	 "\"required\":[\"source\",\"destination\"]}",
	 false, true, false, tool_move},
	{"remove", "Remove a file or directory",
	 "Remove a file, a symlink or an empty directory; with `recursive`, a directory and everything in it.",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "Path") ","
			 "\"recursive\":{\"type\":\"boolean\",\"default\":false}},"
			 "\"required\":[\"path\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"removed\":{\"type\":\"boolean\"}},"
	 "\"required\":[\"path\",\"removed\"]}",
	 false, true, false, tool_remove},
	{"make_directory", "Make a directory",
	 "Make a directory and any missing parents (an existing directory is fine).",
	 "{\"type\":\"object\",\"properties\":{\"path\":" S_PATH(
		 "Directory") "},"
			      "\"required\":[\"path\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}", false, false,
	 true, tool_make_directory},
	{"checkpoint", "Checkpoint the computer",
	 "Save /workspace and /runtime of the computer as a verified checkpoint (it is paused for the copy). "
	 "`recover` goes back to the latest one. `keep` then keeps only the newest N checkpoints.",
	 "{\"type\":\"object\",\"properties\":{\"keep\":{\"type\":\"integer\",\"minimum\":0,\"default\":0,"
	 "\"description\":\"Keep only the newest N checkpoints (0: all)\"}},\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{" CP_PROPS "},"
	 "\"required\":[\"id\",\"generation\",\"digest\",\"bytes_raw\",\"bytes_stored\",\"created_ms\"]}",
	 false, false, false, tool_checkpoint},
	{"list_checkpoints", "List checkpoints", "List this session's checkpoints, newest first.",
	 "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"checkpoints\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
	 "\"properties\":{" CP_PROPS "},\"required\":[\"id\",\"generation\",\"digest\"]}}},"
	 "\"required\":[\"checkpoints\"]}",
	 true, false, true, tool_list_checkpoints},
	{"recover", "Recover the computer",
	 "Replace a computer that stopped (after a timeout, a cancelled command or a crash) with a new one "
	 "restored from the latest checkpoint: files written since that checkpoint are lost. Use it when a tool "
	 "says the computer is stopped or failed.",
	 "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"old_generation\":{\"type\":\"integer\"}"
	 ","
	 "\"new_generation\":{\"type\":\"integer\"},\"checkpoint_id\":{\"type\":\"integer\"},"
	 "\"restored\":{\"type\":\"boolean\"}},"
	 "\"required\":[\"name\",\"old_generation\",\"new_generation\",\"checkpoint_id\",\"restored\"]}",
	 false, true, false, tool_recover},
	{"computer_info", "Describe the computer",
	 "Describe the computer: its state, generation, image, network (none or isolated) and limits (cpus, "
	 "memory_mb, pids, workspace_mb, runtime_mb).",
	 "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"ns\":{\"type\":\"string\"},"
	 "\"agent\":{\"type\":\"string\"},\"session\":{\"type\":\"string\"},\"state\":{\"type\":\"string\"},"
	 "\"image\":{\"type\":\"string\"},\"image_id\":{\"type\":\"string\"},\"network\":{\"type\":\"string\"},"
	 "\"harness\":{\"type\":\"string\"},\"generation\":{\"type\":\"integer\"},\"created\":{\"type\":\"integer\"},"
	 "\"limits\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}},"
	 "\"required\":[\"name\",\"state\",\"generation\",\"image\",\"network\",\"limits\"]}",
	 true, false, true, tool_computer_info},
	{"start_process", "Start a background process",
	 "Start a command that keeps running after this call returns (a server, a watcher, a long build). Give "
	 "`command` (sh -c) or `argv`. Returns its id: read_process_output shows what it printed, send_input writes "
	 "to its stdin, kill_process ends it, list_processes lists them all. Background processes end when the MCP "
	 "client disconnects.",
	 "{\"type\":\"object\",\"properties\":{"
	 "\"command\":{\"type\":\"string\",\"description\":\"Shell command line, run with sh -c\"},"
	 "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},"
	 "\"workdir\":" S_PATH(
		 "Working directory") ","
				      "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}},"
				      "\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}},\"required\":[\"id\"]}", false, false,
	 false, tool_start_process},
	{"list_processes", "List background processes",
	 "List the background processes started with start_process: id, whether each still runs, its exit code "
	 "once it ended, and its command.",
	 "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"processes\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
	 "\"properties\":{\"id\":{\"type\":\"string\"},\"running\":{\"type\":\"boolean\"},"
	 "\"exit_code\":{\"type\":[\"integer\",\"null\"]},\"command\":{\"type\":\"string\"}},"
	 "\"required\":[\"id\",\"running\",\"exit_code\",\"command\"]}}},\"required\":[\"processes\"]}",
	 true, false, true, tool_list_processes},
	{"read_process_output", "Read a background process's output",
	 "Read what a background process wrote to stdout and stderr, from the given offsets (0: the beginning). "
	 "Pass back stdout_next_offset and stderr_next_offset to read only what is new. Also says whether it still "
	 "runs and its exit code.",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"
	 "\"stdout_offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
	 "\"stderr_offset\":{\"type\":\"integer\",\"minimum\":0,\"default\":0},"
	 "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"default\":65536}},"
	 "\"required\":[\"id\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"running\":{\"type\":\"boolean\"},"
	 "\"exit_code\":{\"type\":[\"integer\",\"null\"]},\"command\":{\"type\":\"string\"},"
	 "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
	 "\"stdout_next_offset\":{\"type\":\"integer\"},\"stderr_next_offset\":{\"type\":\"integer\"},"
	 "\"stdout_size\":{\"type\":\"integer\"},\"stderr_size\":{\"type\":\"integer\"}},"
	 "\"required\":[\"id\",\"running\",\"exit_code\",\"stdout\",\"stderr\",\"stdout_next_offset\","
	 "\"stderr_next_offset\"]}",
	 true, false, true, tool_read_process_output},
	{"send_input", "Send input to a background process",
	 "Write text to a background process's stdin (include the newline a line-reading program waits for); "
	 "with `close`, close its stdin afterwards so it reads end-of-file.",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"},"
	 "\"close\":{\"type\":\"boolean\",\"default\":false}},\"required\":[\"id\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"bytes\":{\"type\":\"integer\"},"
	 "\"closed\":{\"type\":\"boolean\"}},\"required\":[\"id\",\"bytes\",\"closed\"]}",
	 false, false, false, tool_send_input},
	{"kill_process", "Kill a background process",
	 "Send a signal (TERM by default; KILL, INT, HUP) to a background process and everything it started.",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"
	 "\"signal\":{\"type\":\"string\",\"enum\":[\"TERM\",\"KILL\",\"INT\",\"HUP\"],\"default\":\"TERM\"}},"
	 "\"required\":[\"id\"],\"additionalProperties\":false}",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"signal\":{\"type\":\"string\"}},"
	 "\"required\":[\"id\",\"signal\"]}",
	 false, true, true, tool_kill_process},
};

#define N_TOOLS (sizeof tools / sizeof tools[0])

static const tool *find_tool(const char *name)
{
	for (size_t i = 0; i < N_TOOLS; i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

bool mcp__tool_exists(const char *name)
{
	return find_tool(name) != NULL;
}

json_t *mcp__tools_list(void)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < N_TOOLS; i++) {
		const tool *t = &tools[i];
		json_t *in = json_loads(t->input, 0, NULL), *out = json_loads(t->output, 0, NULL);
		if (!in || !out)
			abort(); /* a schema literal above is broken: the unit test catches it */
		json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:o,s:o,s:{s:s,s:b,s:b,s:b,s:b}}", "name", t->name,
						     "title", t->title, "description", t->description, "inputSchema",
						     in, "outputSchema", out, "annotations", "title", t->title,
						     "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
						     "idempotentHint", t->idempotent, "openWorldHint", 0));
	}
	return arr;
}

static json_t *text_content(const char *s)
{
	return json_pack("[{s:s,s:o}]", "type", "text", "text", ops_string(s, strlen(s)));
}

json_t *mcp__tool_call(mcp_call *c, const char *name, json_t *args)
{
	const tool *t = find_tool(name);
	brig_error *err = NULL;
	json_t *out = NULL;
	char *text = NULL;
	int rc = t ? t->fn(c, args, &out, &text, &err) : brig__error_set(&err, BRIG_EINVAL, 0, "unknown tool %s", name);
	json_t *result;
	if (rc == 0 && out) {
		if (!text)
			text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
		/* An answer an MCP client takes: without its text copy when both
		 * would not fit, an error (saying how to ask for less) when the
		 * structured part alone would not. */
		size_t osize = json_dumpb(out, NULL, 0, JSON_COMPACT);
		size_t tsize = text ? ops_json_size(text, strlen(text)) : 0;
		if (osize + ((size_t)64 << 10) > MCP_ANSWER_MAX) {
			json_decref(out);
			free(text);
			text = NULL;
			char *msg = xasprintf("%s: the answer would be %zu bytes, more than the %zu MiB an MCP client "
					      "takes in one message: ask for less (read_file: a smaller length; run: a "
					      "smaller max_output_bytes, or send the output to a file and read it in "
					      "pieces; list_directory: a smaller depth)",
					      name, osize, MCP_ANSWER_MAX >> 20);
			result = json_pack("{s:o,s:b}", "content", text_content(msg), "isError", 1);
			free(msg);
			brig_error_free(err);
			return result;
		}
		if (osize + tsize + ((size_t)64 << 10) > MCP_ANSWER_MAX) {
			free(text);
			text = xasprintf("%s: the answer's text copy (%zu bytes) is left out to keep the answer within "
					 "what an MCP client takes in one message: the whole answer is in "
					 "structuredContent",
					 name, tsize);
		}
		result = json_pack("{s:o,s:o,s:b}", "content", text_content(text ? text : ""), "structuredContent", out,
				   "isError", 0);
	} else {
		json_decref(out);
		const char *m = err ? brig_error_message(err) : "the tool failed without saying why";
		char *msg = xasprintf("%s: %s", name, m);
		result = json_pack("{s:o,s:b}", "content", text_content(msg), "isError", 1);
		free(msg);
	}
	free(text);
	brig_error_free(err);
	return result;
}
