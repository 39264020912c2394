/* procs.c — the background-process tools: start a command that outlives the
 * call, list them, read their output, send input, kill them. Each lives in
 * /runtime/.brig-mcp/p…/ of the computer (pid, cmd, in: a file a `tail -f`
 * holder feeds to the command, out, err, exit), driven by fixed scripts with "$1"
 * parameters like fs.c; brig-init's process API replaces this file. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/fs.h"
#include "mcp/procs.h"
#include "util/util.h"

#define PROC_TIMEOUT_MS 30000
#define PROC_READ_DEFAULT 65536
#define PROC_READ_MAX ((int64_t)1 << 20)

/* The script, then "sh" ($0), then its arguments. */
static int proc_run(mcp_call *c, const char *script, const char *const *args, const char *in, size_t in_len, size_t cap,
		    brig_exec_result *res, brig_error **err)
{
	const char *argv[4100] = {"sh", "-c", script, "sh"};
	size_t n = 4;
	for (size_t i = 0; args[i] && n < 4099; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int rc = mcp__exec(c, argv, in, in_len, cap, PROC_TIMEOUT_MS, res, err);
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

int mcp_proc_start(mcp_call *c, const char *const *argv, const char *workdir, const char *const *env, size_t env_count,
		   char **id, brig_error **err)
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
	int rc = mcp__exec_env(c, full, env, env_count, NULL, NULL, 0, 4096, PROC_TIMEOUT_MS, &res, err);
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
			      mcp__string(bar2 + 1, strlen(bar2 + 1)));
	if (!running && *(bar1 + 1))
		json_object_set_new(o, "exit_code", json_integer(strtol(bar1 + 1, NULL, 10)));
	else
		json_object_set_new(o, "exit_code", json_null());
	return o;
}

#define STATE_SH                                                                               \
	"st() { r=0; [ -f \"$1/exit\" ] || { kill -0 $(cat \"$1/pid\") 2>/dev/null && r=1; };" \
	" printf '%s|%s|%s\\n' $r \"$(cat \"$1/exit\" 2>/dev/null)\" \"$(head -n1 \"$1/cmd\")\"; }\n"

int mcp_proc_list(mcp_call *c, json_t **out, brig_error **err)
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

int mcp_proc_read(mcp_call *c, const char *id, uint64_t out_off, uint64_t err_off, size_t max, json_t **out,
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
	json_object_set_new(st, "stdout", mcp__string(po, ol));
	json_object_set_new(st, "stderr", mcp__string(pe, el));
	json_object_set_new(st, "stdout_next_offset", json_integer((json_int_t)(out_off + ol)));
	json_object_set_new(st, "stderr_next_offset", json_integer((json_int_t)(err_off + el)));
	json_object_set_new(st, "stdout_size", json_integer((json_int_t)os));
	json_object_set_new(st, "stderr_size", json_integer((json_int_t)es));
	*out = st;
	brig_exec_result_clear(&res);
	return 0;
}

int mcp_proc_input(mcp_call *c, const char *id, const char *data, size_t len, bool close_input, brig_error **err)
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

int mcp_proc_kill(mcp_call *c, const char *id, const char *sig, brig_error **err)
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
