/* procs.c — the background-process tools: start a command that outlives the
 * call, list them, read their output, send input, kill them. Each keeps its
 * files in /runtime/.brig-mcp/p…/ of the computer (in: a file a `tail -f`
 * holder feeds to the command, out, err, exit; the offsets of
 * read_process_output are offsets in out and err).
 *
 * With brig-init (ops_guest gives a handle) each is a detached guest proc
 * tagged "brig-mcp-<id>": started, listed and signalled through the guest,
 * its files read natively, and killed as a whole tree. Computers created
 * before brig-init run the same files through fixed exec scripts with "$1"
 * parameters like fs.c (pid, cmd, holder kept there too). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "brig/guest.h"
#include "ops/fs.h"
#include "ops/procs.h"
#include "util/util.h"

#define PROC_TIMEOUT_MS 30000
#define PROC_READ_DEFAULT 65536
#define PROC_READ_MAX ((int64_t)1 << 20)

/* The script, then "sh" ($0), then its arguments. */
static int proc_run(ops_target *c, const char *script, const char *const *args, const char *in, size_t in_len,
		    size_t cap, brig_exec_result *res, brig_error **err)
{
	const char *argv[4100] = {"sh", "-c", script, "sh"};
	size_t n = 4;
	for (size_t i = 0; args[i] && n < 4099; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int rc = ops_exec(c, argv, in, in_len, cap, PROC_TIMEOUT_MS, res, err);
	if (rc != 0)
		return rc;
	if (res->exit_code == 0)
		return 0;
	size_t end = res->err.len;
	while (end && res->err.data[end - 1] == '\n')
		end--;
	size_t start = end;
	while (start && res->err.data[start - 1] != '\n')
		start--;
	return brig__error_set(err, res->exit_code == 2 ? BRIG_ENOTFOUND : BRIG_EINVAL, 0, "%.*s", (int)(end - start),
			       res->err.data + start);
}

/* Ids are made by mktemp in the computer: "p" and six of [A-Za-z0-9]. */
static bool valid_id(const char *id)
{
	if (!id || id[0] != 'p' || strlen(id) != 7)
		return false;
	for (const char *p = id + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

static int exec_start(ops_target *c, const char *const *argv, const char *workdir, const char *const *env,
		      size_t env_count, char **id, brig_error **err)
{
	/* stdin is a regular file that `tail -f` follows (a FIFO would break
	 * checkpoints of /runtime); killing that tail (the holder) is the
	 * end of input. setsid makes the command a process group that
	 * kill_process ends whole. */
	static const char script[] =
		"mkdir -p /runtime/.brig-mcp && d=$(mktemp -d /runtime/.brig-mcp/pXXXXXX) && : > \"$d/in\" || exit 1\n"
		"cd \"$1\" || exit 1\n"
		"shift\n"
		"printf '%s\\n' \"$*\" | head -c 300 > \"$d/cmd\"\n"
		"setsid sh -c 'd=$1; shift; ( tail -n +1 -f \"$d/in\" & echo $! > \"$d/holder\"; wait ) |"
		" { \"$@\" > \"$d/out\" 2> \"$d/err\"; echo $? > \"$d/exit\"; kill $(cat \"$d/holder\") 2>/dev/null; }'"
		" sh \"$d\" \"$@\" < /dev/null > /dev/null 2>&1 &\n"
		"echo $! > \"$d/pid\"\n"
		"echo \"${d##*/}\"\n";
	size_t n = 0;
	while (argv[n])
		n++;
	if (n > 4000)
		return brig__error_set(err, BRIG_EINVAL, 0, "argv has more than 4000 entries");
	const char **args = xcalloc(n + 2, sizeof *args);
	args[0] = workdir ? workdir : "/workspace";
	for (size_t i = 0; i < n; i++)
		args[i + 1] = argv[i];
	brig_exec_result res = {0};
	/* env goes to the exec, and so to the command it starts. */
	const char *full[4104] = {"sh", "-c", script, "sh"};
	size_t k = 4;
	for (size_t i = 0; args[i]; i++)
		full[k++] = args[i];
	full[k] = NULL;
	int rc = ops_exec_env(c, full, env, env_count, NULL, NULL, 0, 4096, PROC_TIMEOUT_MS, &res, err);
	free(args);
	if (rc == 0 && res.exit_code != 0)
		rc = brig__error_set(err, BRIG_EINVAL, 0, "the process could not be started: %.200s",
				     res.err.data ? res.err.data : "");
	if (rc == 0) {
		size_t l = res.out.len;
		while (l && res.out.data[l - 1] == '\n')
			l--;
		*id = xstrndup(res.out.data, l);
		if (!valid_id(*id)) {
			free(*id);
			*id = NULL;
			rc = brig__error_set(err, BRIG_EPROTO, 0, "the computer's answer was not understood");
		}
	}
	brig_exec_result_clear(&res);
	return rc;
}

static json_t *parse_state(const char *id, const char *line, size_t len)
{
	/* "running|exit_code|cmd" (exit_code "" while running) */
	cleanup_free char *l = xstrndup(line, len);
	char *bar1 = strchr(l, '|');
	char *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
	if (!bar2)
		return NULL;
	*bar1 = *bar2 = 0;
	bool running = strcmp(l, "1") == 0;
	json_t *o = json_pack("{s:s,s:b,s:o}", "id", id, "running", running, "command",
			      ops_string(bar2 + 1, strlen(bar2 + 1)));
	if (!running && *(bar1 + 1))
		json_object_set_new(o, "exit_code", json_integer(strtol(bar1 + 1, NULL, 10)));
	else
		json_object_set_new(o, "exit_code", json_null());
	return o;
}

#define STATE_SH                                                                               \
	"st() { r=0; [ -f \"$1/exit\" ] || { kill -0 $(cat \"$1/pid\") 2>/dev/null && r=1; };" \
	" printf '%s|%s|%s\\n' $r \"$(cat \"$1/exit\" 2>/dev/null)\" \"$(head -n1 \"$1/cmd\")\"; }\n"

static int exec_list(ops_target *c, json_t **out, brig_error **err)
{
	static const char script[] = STATE_SH "for d in /runtime/.brig-mcp/p*; do [ -d \"$d\" ] || continue;"
					      " printf '%s|' \"${d##*/}\"; st \"$d\"; done\n";
	const char *args[] = {NULL};
	brig_exec_result res = {0};
	int rc = proc_run(c, script, args, NULL, 0, (size_t)1 << 20, &res, err);
	if (rc == 0) {
		json_t *arr = json_array();
		const char *p = res.out.data, *end = res.out.data + res.out.len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl)
				break;
			const char *bar = memchr(p, '|', (size_t)(nl - p));
			if (bar) {
				cleanup_free char *id = xstrndup(p, (size_t)(bar - p));
				json_t *o = valid_id(id) ? parse_state(id, bar + 1, (size_t)(nl - bar - 1)) : NULL;
				if (o)
					json_array_append_new(arr, o);
			}
			p = nl + 1;
		}
		*out = arr;
	}
	brig_exec_result_clear(&res);
	return rc;
}

static int exec_read(ops_target *c, const char *id, uint64_t out_off, uint64_t err_off, size_t max, json_t **out,
		     brig_error **err)
{
	if (!valid_id(id))
		return brig__error_set(err, BRIG_EINVAL, 0, "\"%.16s\" is not a process id (list_processes shows them)",
				       id);
	/* A header "state line", then "out_len err_len", then the two pieces:
	 * lengths from one snapshot of the sizes, so growth in between is
	 * read next time. */
	static const char script[] =
		STATE_SH "d=/runtime/.brig-mcp/$1\n"
			 "[ -d \"$d\" ] || { echo \"no process $1 (list_processes shows them)\" >&2; exit 2; }\n"
			 "st \"$d\"\n"
			 "os=$(stat -c %s \"$d/out\" 2>/dev/null || echo 0); es=$(stat -c %s \"$d/err\" 2>/dev/null || "
			 "echo 0)\n"
			 "ol=$((os - $2)); [ $ol -lt 0 ] && ol=0; [ $ol -gt $4 ] && ol=$4\n"
			 "el=$((es - $3)); [ $el -lt 0 ] && el=0; [ $el -gt $4 ] && el=$4\n"
			 "echo \"$ol $el $os $es\"\n"
			 "tail -c +$(($2 + 1)) \"$d/out\" 2>/dev/null | head -c $ol\n"
			 "tail -c +$(($3 + 1)) \"$d/err\" 2>/dev/null | head -c $el\n";
	char o1[24], o2[24], m[24];
	snprintf(o1, sizeof o1, "%" PRIu64, out_off);
	snprintf(o2, sizeof o2, "%" PRIu64, err_off);
	snprintf(m, sizeof m, "%zu", max);
	const char *args[] = {id, o1, o2, m, NULL};
	brig_exec_result res = {0};
	int rc = proc_run(c, script, args, NULL, 0, 2 * max + 4096, &res, err);
	if (rc != 0) {
		brig_exec_result_clear(&res);
		return rc;
	}
	const char *d = res.out.data, *end = d + res.out.len;
	const char *nl1 = memchr(d, '\n', res.out.len);
	const char *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
	unsigned long long ol = 0, el = 0, os = 0, es = 0;
	json_t *st = nl1 ? parse_state(id, d, (size_t)(nl1 - d)) : NULL;
	if (!st || !nl2 || sscanf(nl1 + 1, "%llu %llu %llu %llu", &ol, &el, &os, &es) != 4 ||
	    (size_t)(end - nl2 - 1) < ol + el) {
		json_decref(st);
		brig_exec_result_clear(&res);
		return brig__error_set(err, BRIG_EPROTO, 0, "the computer's answer was not understood");
	}
	const char *po = nl2 + 1, *pe = po + ol;
	json_object_set_new(st, "stdout", ops_string(po, ol));
	json_object_set_new(st, "stderr", ops_string(pe, el));
	json_object_set_new(st, "stdout_next_offset", json_integer((json_int_t)(out_off + ol)));
	json_object_set_new(st, "stderr_next_offset", json_integer((json_int_t)(err_off + el)));
	json_object_set_new(st, "stdout_size", json_integer((json_int_t)os));
	json_object_set_new(st, "stderr_size", json_integer((json_int_t)es));
	*out = st;
	brig_exec_result_clear(&res);
	return 0;
}

static int exec_input(ops_target *c, const char *id, const char *data, size_t len, bool close_input, brig_error **err)
{
	if (!valid_id(id))
		return brig__error_set(err, BRIG_EINVAL, 0, "\"%.16s\" is not a process id (list_processes shows them)",
				       id);
	static const char script[] =
		"d=/runtime/.brig-mcp/$1\n"
		"[ -d \"$d\" ] || { echo \"no process $1 (list_processes shows them)\" >&2; exit 2; }\n"
		"[ -f \"$d/exit\" ] && { echo \"process $1 has exited: it reads no more input\" >&2; exit 3; }\n"
		"cat >> \"$d/in\" || exit 1\n"
		"[ \"$2\" = 1 ] && kill $(cat \"$d/holder\") 2>/dev/null\n"
		"exit 0\n";
	const char *args[] = {id, close_input ? "1" : "0", NULL};
	brig_exec_result res = {0};
	int rc = proc_run(c, script, args, data, len, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}

static int exec_kill(ops_target *c, const char *id, const char *sig, brig_error **err)
{
	if (id && !valid_id(id))
		return brig__error_set(err, BRIG_EINVAL, 0, "\"%.16s\" is not a process id (list_processes shows them)",
				       id);
	/* id empty: every background process (the server is shutting down). */
	static const char script[] = "for d in /runtime/.brig-mcp/${1:-p*}; do\n"
				     "  [ -d \"$d\" ] || { [ -n \"$1\" ] && { echo \"no process $1\" >&2; exit 2; }; "
				     "continue; }\n"
				     "  [ -f \"$d/exit\" ] && continue\n"
				     "  kill -s \"$2\" -- -$(cat \"$d/pid\") 2>/dev/null\n"
				     "  kill $(cat \"$d/holder\") 2>/dev/null\n"
				     "done\n"
				     "exit 0\n";
	const char *args[] = {id ? id : "", sig, NULL};
	brig_exec_result res = {0};
	int rc = proc_run(c, script, args, NULL, 0, 4096, &res, err);
	brig_exec_result_clear(&res);
	return rc;
}

/* ---- over brig-init ---- */

#define TAG_PREFIX "brig-mcp-"
#define PROC_DIR "/runtime/.brig-mcp/"

/* The wrapper: $1 the directory, then the command. Output to files (their
 * offsets are the tool's), stdin from a file a `tail -f` holder follows; the
 * wrapper's exit code is the command's. */
static const char guest_wrapper[] =
	"d=$1; shift\n"
	"( tail -n +1 -f \"$d/in\" & echo $! > \"$d/holder\"; wait ) |"
	" { \"$@\" > \"$d/out\" 2> \"$d/err\"; c=$?; echo $c > \"$d/exit\"; i=0;"
	" while [ ! -s \"$d/holder\" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i + 1)); done;"
	" kill $(cat \"$d/holder\") 2>/dev/null; exit $c; }\n";

static int64_t deadline(void)
{
	return brig_now_ms() + PROC_TIMEOUT_MS;
}

/* The id of a guest proc of ours from its tag, or NULL. */
static const char *tag_id(json_t *p)
{
	const char *tag = json_string_value(json_object_get(p, "tag"));
	if (!tag || strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)) != 0)
		return NULL;
	const char *id = tag + strlen(TAG_PREFIX);
	return valid_id(id) ? id : NULL;
}

/* {"id","running","exit_code","command"} of ps entry p. */
static json_t *guest_state(const char *id, json_t *p)
{
	/* The command is argv after "sh -c wrapper sh dir", joined as
	 * `printf '%s\n' "$*" | head -c 300 | head -n1` did. */
	brig_buf b;
	brig_buf_init(&b, (size_t)-1);
	json_t *av = json_object_get(p, "argv");
	for (size_t i = 5; i < json_array_size(av); i++)
		brig_buf_putf(&b, "%s%s", i > 5 ? " " : "", json_string_value(json_array_get(av, i)) ?: "");
	size_t n = b.len < 300 ? b.len : 300;
	const char *nl = b.data ? memchr(b.data, '\n', n) : NULL;
	if (nl)
		n = (size_t)(nl - b.data);
	const char *state = json_string_value(json_object_get(p, "state"));
	bool running = !state || strcmp(state, "exited") != 0;
	json_t *code = json_object_get(p, "exit_code");
	json_t *o = json_pack("{s:s,s:b,s:o,s:O}", "id", id, "running", running, "command",
			      ops_string(b.data ? b.data : "", n), "exit_code",
			      !running && json_is_integer(code) ? code : json_null());
	brig_buf_free(&b);
	return o;
}

/* The ps entry of process id (borrowed from *ps, which the caller frees). */
static int guest_find(brig_guest *g, const char *id, json_t **ps, json_t **entry, brig_error **err)
{
	if (!valid_id(id))
		return brig__error_set(err, BRIG_EINVAL, 0, "\"%.16s\" is not a process id (list_processes shows them)",
				       id);
	int rc = brig_guest_ps(g, ps, deadline(), err);
	if (rc)
		return rc;
	size_t i;
	json_t *p;
	json_array_foreach (*ps, i, p) {
		const char *pid = tag_id(p);
		if (pid && strcmp(pid, id) == 0) {
			*entry = p;
			return 0;
		}
	}
	return brig__error_set(err, BRIG_ENOTFOUND, 0, "no process %s (list_processes shows them)", id);
}

static int guest_start(ops_target *c, brig_guest *g, const char *const *argv, const char *workdir,
		       const char *const *env, size_t env_count, char **id, brig_error **err)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char r[6];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return brig__error_set(err, BRIG_EIO, errno, "no random bytes for a process id");
	char name[8] = "p";
	for (size_t i = 0; i < 6; i++)
		name[i + 1] = alnum[r[i] % (sizeof alnum - 1)];
	size_t n = 0;
	while (argv[n])
		n++;
	if (n > 4000)
		return brig__error_set(err, BRIG_EINVAL, 0, "argv has more than 4000 entries");
	cleanup_free char *dir = xasprintf(PROC_DIR "%s", name);
	cleanup_free char *in = xasprintf("%s/in", dir);
	int rc = brig_guest_mkdir(g, dir, 0700, true, deadline(), err);
	if (!rc)
		rc = brig_guest_write(g, in, -1, "", 0, 0600, false, deadline(), err);
	if (rc)
		return brig__error_prefix(err, rc, "the process could not be started");
	cleanup_free const char **full = xcalloc(n + 6, sizeof *full);
	full[0] = "sh", full[1] = "-c", full[2] = guest_wrapper, full[3] = "sh", full[4] = dir;
	for (size_t i = 0; i < n; i++)
		full[5 + i] = argv[i];
	cleanup_free char *tag = xasprintf(TAG_PREFIX "%s", name);
	brig_guest_exec_opts o = {
		.version = BRIG_GUEST_EXEC_OPTS_VERSION,
		.argv = full,
		.env = env,
		.env_count = env_count,
		.cwd = workdir,
		.stdin_fd = -1,
		.deadline_ms = 0,
		.cancel_fd = -1,
		.detached = true,
		.keep = 4096,
		.tag = tag,
		.resize_fd = -1,
	};
	int64_t proc = 0;
	rc = brig_guest_start(g, &o, &proc, err);
	if (rc)
		return brig__error_prefix(err, rc, "the process could not be started");
	(void)c;
	*id = xstrdup(name);
	return 0;
}

static int guest_list(brig_guest *g, json_t **out, brig_error **err)
{
	json_t *ps = NULL;
	int rc = brig_guest_ps(g, &ps, deadline(), err);
	if (rc)
		return rc;
	json_t *arr = json_array();
	size_t i;
	json_t *p;
	json_array_foreach (ps, i, p) {
		const char *id = tag_id(p);
		if (id)
			json_array_append_new(arr, guest_state(id, p));
	}
	json_decref(ps);
	*out = arr;
	return 0;
}

/* Up to max bytes of file path from off; *size its size (0: absent). */
struct piece {
	brig_buf b;
	size_t max;
};

static int piece_cb(const char *data, size_t len, void *payload)
{
	struct piece *p = payload;
	size_t room = p->max - p->b.len;
	brig_buf_put(&p->b, data, len < room ? len : room); /* clamped to the room */
	return 0;
}

static int guest_piece(brig_guest *g, const char *path, uint64_t off, size_t max, brig_buf *out, uint64_t *size,
		       brig_error **err)
{
	json_t *st = NULL;
	brig_error *serr = NULL;
	int rc = brig_guest_stat(g, &st, path, false, deadline(), &serr);
	if (rc == BRIG_ENOTFOUND) {
		brig_error_free(serr);
		*size = 0;
		return 0;
	}
	if (rc) {
		if (err)
			*err = serr;
		else
			brig_error_free(serr);
		return rc;
	}
	*size = (uint64_t)json_integer_value(json_object_get(st, "size"));
	json_decref(st);
	if (off >= *size || max == 0)
		return 0;
	uint64_t want = *size - off < max ? *size - off : max;
	struct piece p = {.max = (size_t)want};
	brig_buf_init(&p.b, (size_t)-1);
	rc = brig_guest_read(g, path, (int64_t)off, (int64_t)want, piece_cb, &p, deadline(), err);
	if (rc) {
		brig_buf_free(&p.b);
		return rc;
	}
	*out = p.b;
	return 0;
}

static int guest_read(brig_guest *g, const char *id, uint64_t out_off, uint64_t err_off, size_t max, json_t **out,
		      brig_error **err)
{
	json_t *ps = NULL, *p = NULL;
	int rc = guest_find(g, id, &ps, &p, err);
	if (rc) {
		json_decref(ps);
		return rc;
	}
	json_t *st = guest_state(id, p);
	json_decref(ps);
	cleanup_free char *po = xasprintf(PROC_DIR "%s/out", id);
	cleanup_free char *pe = xasprintf(PROC_DIR "%s/err", id);
	brig_buf bo = {0}, be = {0};
	uint64_t os = 0, es = 0;
	rc = guest_piece(g, po, out_off, max, &bo, &os, err);
	if (!rc)
		rc = guest_piece(g, pe, err_off, max, &be, &es, err);
	if (!rc) {
		json_object_set_new(st, "stdout", ops_string(bo.data ? bo.data : "", bo.len));
		json_object_set_new(st, "stderr", ops_string(be.data ? be.data : "", be.len));
		json_object_set_new(st, "stdout_next_offset", json_integer((json_int_t)(out_off + bo.len)));
		json_object_set_new(st, "stderr_next_offset", json_integer((json_int_t)(err_off + be.len)));
		json_object_set_new(st, "stdout_size", json_integer((json_int_t)os));
		json_object_set_new(st, "stderr_size", json_integer((json_int_t)es));
		*out = st;
	} else {
		json_decref(st);
	}
	brig_buf_free(&bo);
	brig_buf_free(&be);
	return rc;
}

static int guest_input(brig_guest *g, const char *id, const char *data, size_t len, bool close_input, brig_error **err)
{
	json_t *ps = NULL, *p = NULL;
	int rc = guest_find(g, id, &ps, &p, err);
	if (!rc && strcmp(json_string_value(json_object_get(p, "state")) ?: "", "exited") == 0)
		rc = brig__error_set(err, BRIG_EINVAL, 0, "process %s has exited: it reads no more input", id);
	json_decref(ps);
	if (rc)
		return rc;
	/* Appended to the file the holder follows (the guest's own WRITE
	 * replaces files, which `tail -f` would not see). */
	static const char script[] = "cat >> \"$1/in\" || exit 1\n"
				     "[ \"$2\" = 1 ] && kill $(cat \"$1/holder\") 2>/dev/null\n"
				     "exit 0\n";
	cleanup_free char *dir = xasprintf(PROC_DIR "%s", id);
	const char *argv[] = {"sh", "-c", script, "sh", dir, close_input ? "1" : "0", NULL};
	brig_guest_exec_opts o = {
		.version = BRIG_GUEST_EXEC_OPTS_VERSION,
		.argv = argv,
		.stdin_fd = -1,
		.stdin_data = data,
		.stdin_len = len,
		.deadline_ms = deadline(),
		.cancel_fd = -1,
		.resize_fd = -1,
	};
	brig_guest_exit ex = {0};
	rc = brig_guest_exec(g, &o, &ex, err);
	if (!rc && ex.code != 0)
		rc = brig__error_set(err, BRIG_EINVAL, 0, "the input could not be written to process %s (exit %d)", id,
				     ex.code);
	return rc;
}

static int sig_number(const char *sig)
{
	if (strcmp(sig, "KILL") == 0)
		return SIGKILL;
	if (strcmp(sig, "INT") == 0)
		return SIGINT;
	if (strcmp(sig, "HUP") == 0)
		return SIGHUP;
	return SIGTERM;
}

static int guest_kill(brig_guest *g, const char *id, const char *sig, brig_error **err)
{
	json_t *ps = NULL;
	int rc;
	if (id) {
		json_t *p = NULL;
		rc = guest_find(g, id, &ps, &p, err);
		if (rc) {
			json_decref(ps);
			return rc;
		}
		int64_t proc = json_integer_value(json_object_get(p, "id"));
		bool ended = strcmp(json_string_value(json_object_get(p, "state")) ?: "", "exited") == 0;
		json_decref(ps);
		if (ended)
			return 0;
		/* KILL ends the whole tree (certain); the others are the
		 * signal to the process group, as asked. */
		if (strcmp(sig, "KILL") == 0)
			return brig_guest_kill(g, proc, NULL, deadline(), err);
		rc = brig_guest_signal(g, proc, sig_number(sig), deadline(), err);
		return rc == BRIG_ESTATE ? 0 : rc;
	}
	/* Every background process (the server is shutting down): whole trees. */
	rc = brig_guest_ps(g, &ps, deadline(), err);
	if (rc)
		return rc;
	size_t i;
	json_t *p;
	json_array_foreach (ps, i, p) {
		if (!tag_id(p) || strcmp(json_string_value(json_object_get(p, "state")) ?: "", "exited") == 0)
			continue;
		int krc = brig_guest_kill(g, json_integer_value(json_object_get(p, "id")), NULL, deadline(), err);
		if (krc && !rc)
			rc = krc;
	}
	json_decref(ps);
	return rc;
}

/* ---- the interface: brig-init when the computer has it, else exec ---- */

/* Before anything touches the computer. */
static int check_id(const char *id, brig_error **err)
{
	if (!valid_id(id))
		return brig__error_set(err, BRIG_EINVAL, 0, "\"%.16s\" is not a process id (list_processes shows them)",
				       id);
	return 0;
}

int ops_proc_start(ops_target *c, const char *const *argv, const char *workdir, const char *const *env,
		   size_t env_count, char **id, brig_error **err)
{
	brig_guest *g = NULL;
	int rc = ops_guest(c, &g, err);
	if (rc)
		return rc;
	return g ? guest_start(c, g, argv, workdir, env, env_count, id, err)
		 : exec_start(c, argv, workdir, env, env_count, id, err);
}

int ops_proc_list(ops_target *c, json_t **out, brig_error **err)
{
	brig_guest *g = NULL;
	int rc = ops_guest(c, &g, err);
	if (rc)
		return rc;
	return g ? guest_list(g, out, err) : exec_list(c, out, err);
}

int ops_proc_read(ops_target *c, const char *id, uint64_t out_off, uint64_t err_off, size_t max, json_t **out,
		  brig_error **err)
{
	if (check_id(id, err))
		return BRIG_EINVAL;
	brig_guest *g = NULL;
	int rc = ops_guest(c, &g, err);
	if (rc)
		return rc;
	return g ? guest_read(g, id, out_off, err_off, max, out, err)
		 : exec_read(c, id, out_off, err_off, max, out, err);
}

int ops_proc_input(ops_target *c, const char *id, const char *data, size_t len, bool close_input, brig_error **err)
{
	if (check_id(id, err))
		return BRIG_EINVAL;
	brig_guest *g = NULL;
	int rc = ops_guest(c, &g, err);
	if (rc)
		return rc;
	return g ? guest_input(g, id, data, len, close_input, err) : exec_input(c, id, data, len, close_input, err);
}

int ops_proc_kill(ops_target *c, const char *id, const char *sig, brig_error **err)
{
	if (id && check_id(id, err))
		return BRIG_EINVAL;
	brig_guest *g = NULL;
	int rc = ops_guest(c, &g, err);
	if (rc)
		return rc;
	return g ? guest_kill(g, id, sig, err) : exec_kill(c, id, sig, err);
}
