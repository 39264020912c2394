/* cli.c — helpers every command shares: printing library errors, opening
 * the engine, JSON and table output, spec flags, the cancel pipe and live
 * output streaming. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "egress/egress_internal.h"
#include "util/util.h"

int cli_error(brig_error *err, const char *context)
{
	const char *msg = err && err->message && *err->message ? err->message : "failed (no detail)";
	char extra[96] = "";
	if (cli_debug && err) {
		if (err->http_status)
			snprintf(extra, sizeof extra, " [%s, HTTP %d]", brig_error_name(err->code), err->http_status);
		else if (err->sys_errno)
			snprintf(extra, sizeof extra, " [%s, %s]", brig_error_name(err->code),
				 strerror(err->sys_errno));
		else
			snprintf(extra, sizeof extra, " [%s]", brig_error_name(err->code));
	}
	if (context && *context)
		cli_note("%s: %s%s", context, msg, extra);
	else
		cli_note("%s%s", msg, extra);
	brig_error_free(err);
	return CLI_EXIT_FAIL;
}

int cli_engine_open(brig_engine **out)
{
	brig_error *err = NULL;
	int rc = brig_engine_open(out, NULL, &err);
	if (rc == 0)
		return 0;
	if (rc == BRIG_ENOTSENT) {
		/* The unix-socket message already says how to start dockerd;
		 * TCP and TLS failures do not. */
		bool hinted = err && err->message && strstr(err->message, "dockerd");
		cli_error(err, NULL);
		if (!hinted)
			cli_note("is the Docker daemon running there? start it with `dockerd &` as root, or point -H / "
				 "DOCKER_HOST at a running one");
		return CLI_EXIT_FAIL;
	}
	return cli_error(err, "cannot open the Docker engine");
}

/* ---- naming a computer ---- */

/* A store the user named (--store, $BRIG_STORE) in a directory that does
 * not exist is a typo far more often than a wish for a new database: the
 * library makes missing directories only for its own default. Returns 0 or
 * CLI_EXIT_FAIL (message printed). */
static int check_store_dir(const char *url)
{
	if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0)
		return 0;
	const char *p = url;
	if (strncmp(p, "sqlite://", 9) == 0)
		p += 9;
	else if (strncmp(p, "sqlite:", 7) == 0)
		p += 7;
	const char *slash = strrchr(p, '/');
	if (!slash || slash == p)
		return 0; /* the current directory, or / */
	char *dir = xstrndup(p, (size_t)(slash - p));
	struct stat sb;
	int rc = 0;
	if (stat(dir, &sb) != 0 && errno == ENOENT)
		rc = cli_fail("store %s: directory %s does not exist; create it first, or leave --store and "
			      "BRIG_STORE unset for brig's default store",
			      url, dir);
	free(dir);
	return rc;
}

int cli_store_open(brig_store **out, const char *url)
{
	if (!url || !*url) {
		const char *env = getenv("BRIG_STORE");
		url = env && *env ? env : NULL;
	}
	if (url && check_store_dir(url) != 0)
		return CLI_EXIT_FAIL;
	brig_error *err = NULL;
	if (brig_store_open(out, url, &err) != 0)
		return cli_error(err, "cannot open the session store (--store, BRIG_STORE)");
	/* A computer of network egress this brig makes has its ledger rows
	 * kept in the store this brig uses. */
	brig_egress__use_store(url);
	return 0;
}

int cli_store_open_existing(brig_store **out, const char *url)
{
	*out = NULL;
	cleanup_free char *dflt = NULL;
	if (!url || !*url) {
		const char *env = getenv("BRIG_STORE");
		url = env && *env ? env : NULL;
	}
	if (!url) {
		brig_error *err = NULL;
		if (brig_store_default_url(&dflt, &err) != 0) {
			brig_error_free(err);
			return 0; /* no default store (no $HOME): nothing to update */
		}
		url = dflt;
	}
	if (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0) {
		const char *path = url;
		if (strncmp(path, "sqlite://", 9) == 0)
			path += 9;
		else if (strncmp(path, "sqlite:", 7) == 0)
			path += 7;
		struct stat sb;
		if (stat(path, &sb) != 0 && errno == ENOENT)
			return 0;
	}
	return cli_store_open(out, url);
}

int cli_session_ref(char **out, brig_store *s, const char *ns, const char *agent, const char *session, bool fallback)
{
	brig_error *err = NULL;
	int rc = s ? brig_session_resolve(s, out, ns, agent, session, &err) : BRIG_ENOTFOUND;
	if (rc == 0)
		return 0;
	if (rc == BRIG_ENOTFOUND && fallback) {
		/* Not a session of the store (made by `brig create`): its
		 * first generation's name follows from the identity alone. */
		brig_error_free(err);
		err = NULL;
		brig_identity id = {ns, agent, session, 1};
		char name[BRIG_NAME_SIZE];
		if (brig_identity_name(name, &id, &err) != 0)
			return cli_error(err, NULL);
		*out = xstrdup(name);
		return 0;
	}
	return cli_error(err, NULL);
}

int cli_target_opt(cli_target *t, int opt, const char *arg, int *rc)
{
	switch (opt) {
	case CLI_OPT_NS: t->id.ns = arg; break;
	case CLI_OPT_AGENT: t->id.agent = arg; break;
	case CLI_OPT_SESSION: t->id.session = arg; break;
	case CLI_OPT_STORE: t->store = arg; return 1;
	case CLI_OPT_GEN: {
		int64_t g;
		if (cli_parse_i64("--gen", arg, 1, BRIG_GENERATION_MAX, &g) != 0) {
			*rc = CLI_EXIT_FAIL;
			return 1;
		}
		t->id.generation = (uint32_t)g;
		break;
	}
	default: return 0;
	}
	t->id_given = true;
	return 1;
}

int cli_target_check(const char *cmd, const cli_target *t)
{
	if (!t->id.ns || !t->id.agent || !t->id.session)
		return cli_usage(cmd, "--ns, --agent and --session are required together");
	brig_identity id = t->id;
	if (!id.generation)
		id.generation = 1;
	brig_error *err = NULL;
	if (brig_identity_validate(&id, &err) != 0)
		return cli_error(err, NULL);
	return 0;
}

int cli_target_name(char **out, const char *cmd, const cli_target *t, const char *name, brig_store *s, bool fallback)
{
	*out = NULL;
	if (name && t->id_given)
		return cli_usage(cmd, "give either NAME or --ns/--agent/--session, not both");
	if (!name && !t->id_given)
		return cli_usage(cmd, "NAME (or --ns/--agent/--session) is required");
	if (name) {
		*out = xstrdup(name);
		return 0;
	}
	if (!t->id.ns || !t->id.agent || !t->id.session)
		return cli_usage(cmd, "--ns, --agent and --session go together");
	if (cli_target_check(cmd, t) != 0)
		return CLI_EXIT_FAIL;
	if (t->id.generation) {
		char buf[BRIG_NAME_SIZE];
		brig_error *err = NULL;
		if (brig_identity_name(buf, &t->id, &err) != 0)
			return cli_error(err, NULL);
		*out = xstrdup(buf);
		return 0;
	}
	brig_store *own = NULL;
	if (!s) {
		if (cli_store_open(&own, t->store) != 0)
			return CLI_EXIT_FAIL;
		s = own;
	}
	int rc = cli_session_ref(out, s, t->id.ns, t->id.agent, t->id.session, fallback);
	brig_store_close(own);
	return rc;
}

void cli_up_report(const brig_up_result *ur)
{
	if (ur->recorded && ur->computer)
		cli_note("%s/%s/%s was not in this session store; its computer %s (generation %u) was, in Docker: "
			 "recorded it here and adopted it (checkpoints taken with another store stay in that store)",
			 ur->computer->ns, ur->computer->agent, ur->computer->session, ur->computer->name,
			 ur->computer->generation);
	if (!ur->lost || !ur->computer)
		return;
	if (ur->checkpoint_id) {
		char when[32] = "an unknown time";
		time_t t = (time_t)(ur->checkpoint_created_ms / 1000);
		struct tm tm;
		if (ur->checkpoint_created_ms > 0 && localtime_r(&t, &tm))
			strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
		cli_note("the computer of generation %lld %s: restored checkpoint %lld from %s into generation %u",
			 (long long)ur->old_generation, ur->lost, (long long)ur->checkpoint_id, when,
			 ur->computer->generation);
	} else {
		cli_note("the computer of generation %lld %s and there was no checkpoint: generation %u starts "
			 "EMPTY (--fresh)",
			 (long long)ur->old_generation, ur->lost, ur->computer->generation);
	}
}

int cli_print_json(json_t *j)
{
	if (!j)
		return cli_fail("internal error: no JSON to print");
	errno = 0;
	int r = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	bool failed = r != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0;
	int e = errno;
	json_decref(j);
	if (failed && e == EPIPE) {
		/* The reader left (`| head`): nothing more to say, and not brig's
		 * failure. The error flag is cleared so main's final check, which
		 * also treats EPIPE as harmless, does not report it as one. */
		clearerr(stdout);
		return 0;
	}
	if (failed)
		return cli_fail("cannot write to stdout: %s", e ? strerror(e) : "write error");
	return 0;
}

void cli_put_safe(const char *s)
{
	if (!s)
		return;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

const char *cli_spec_key(int opt)
{
	switch (opt) {
	case CLI_OPT_IMAGE: return "image";
	case CLI_OPT_CPUS: return "cpus";
	case CLI_OPT_MEMORY_MB: return "memory-mb";
	case CLI_OPT_PIDS: return "pids";
	case CLI_OPT_WORKSPACE_MB: return "workspace-mb";
	case CLI_OPT_RUNTIME_MB: return "runtime-mb";
	case CLI_OPT_NETWORK: return "network";
	case CLI_OPT_SUBNET: return "subnet";
	case CLI_OPT_HARNESS: return "harness";
	case CLI_OPT_LABEL: return "label";
	case CLI_OPT_ENV_FILE: return "env-file";
	case CLI_OPT_PUBLISH:
	case 'p': return "publish";
	case CLI_OPT_ALLOW: return "allow";
	case CLI_OPT_RUNTIME: return "runtime";
	case CLI_OPT_SECRET: return "secret";
	case 'e': return "env";
	default: return NULL;
	}
}

int cli_spec_set(brig_spec *spec, const char *key, const char *value)
{
	brig_error *err = NULL;
	int rc;
	if (strcmp(key, "env-file") == 0) {
		cli_strv entries = {0};
		rc = cli_env_file_read(&entries, value);
		for (size_t i = 0; rc == 0 && i < entries.count; i++)
			if (brig_spec_add_env(spec, entries.v[i], &err) != 0) {
				char *ctx = xasprintf("--env-file %s", value);
				rc = cli_error(err, ctx);
				free(ctx);
			}
		cli_strv_free_all(&entries);
		return rc;
	}
	if (strcmp(key, "env") == 0)
		rc = brig_spec_add_env(spec, value, &err);
	else if (strcmp(key, "label") == 0)
		rc = brig_spec_add_label(spec, value, &err);
	else
		rc = brig_spec_set(spec, key, value, &err);
	return rc ? cli_error(err, NULL) : 0;
}

int cli_spec_finish(brig_spec *spec, bool image_given)
{
	const char *img = getenv("BRIG_IMAGE");
	if (!image_given && img && *img) {
		brig_error *err = NULL;
		if (brig_spec_set(spec, "image", img, &err) != 0)
			return cli_error(err, "BRIG_IMAGE");
	}
	const char *rt = getenv("BRIG_RUNTIME");
	if (!spec->runtime && rt && *rt) {
		brig_error *err = NULL;
		if (brig_spec_set(spec, "runtime", rt, &err) != 0)
			return cli_error(err, "BRIG_RUNTIME");
	}
	brig_error *err = NULL;
	if (brig_spec_validate(spec, NULL, &err) != 0)
		return cli_error(err, NULL);
	return 0;
}

/* ---- cancellation ---- */

static int cancel_pipe[2] = {-1, -1};
static volatile sig_atomic_t cancel_hits;
static struct termios tty_saved;
static volatile sig_atomic_t tty_saved_set;

void cli_tty_remember(const struct termios *t)
{
	tty_saved = *t;
	tty_saved_set = 1;
}

void cli_tty_forget(void)
{
	tty_saved_set = 0;
}

static void on_cancel_signal(int sig)
{
	int saved = errno;
	cancel_hits++;
	if (cancel_hits == 1) {
		static const char msg[] = "brig: interrupted: stopping (interrupt again to exit at once)\n";
		(void)!write(cancel_pipe[1], "x", 1);
		(void)!write(2, msg, sizeof msg - 1);
	} else {
		static const char msg[] = "brig: interrupted again: exiting without waiting for cleanup; "
					  "`brig gc` removes what is left\n";
		if (tty_saved_set)
			tcsetattr(0, TCSAFLUSH, &tty_saved);
		(void)!write(2, msg, sizeof msg - 1);
		_exit(CLI_EXIT_CANCELED);
	}
	errno = saved;
}

int cli_cancel_install(void)
{
	if (cancel_pipe[0] >= 0)
		return cancel_pipe[0];
	if (pipe2(cancel_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		cli_note("cannot create the cancel pipe (%s): Ctrl-C will end brig without stopping the command",
			 strerror(errno));
		cancel_pipe[0] = cancel_pipe[1] = -1;
		return -1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_cancel_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return cancel_pipe[0];
}

bool cli_canceled(void)
{
	return cancel_hits > 0;
}

/* ---- live output ---- */

int cli_output_cb(int stream, const char *data, size_t len, void *payload)
{
	cli_output *o = payload;
	int fd;
	bool *dead;
	if (stream == BRIG_STREAM_STDOUT) {
		if (!o->stdout_live)
			return 0;
		fd = 1;
		dead = &o->stdout_dead;
	} else if (stream == BRIG_STREAM_STDERR) {
		if (!o->stderr_live)
			return 0;
		fd = 2;
		dead = &o->stderr_dead;
	} else {
		return 0;
	}
	/* A reader that went away (`| head`) must not end the command: the
	 * library would treat an aborted stream as uncertain and stop the
	 * computer. Keep draining, stop writing. */
	if (!*dead && brig_write_all(fd, data, len) != 0)
		*dead = true;
	return 0;
}

void cli_format_age(char *out, size_t n, int64_t created_unix)
{
	int64_t d = (int64_t)time(NULL) - created_unix;
	if (created_unix <= 0) {
		snprintf(out, n, "-");
		return;
	}
	if (d < 0)
		d = 0;
	static const struct {
		int64_t secs;
		const char *unit;
	} steps[] = {{86400 * 7, "week"}, {86400, "day"}, {3600, "hour"}, {60, "minute"}, {1, "second"}};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		if (d >= steps[i].secs || steps[i].secs == 1) {
			int64_t k = d / steps[i].secs;
			if (k == 0 && steps[i].secs == 1) {
				snprintf(out, n, "just now");
				return;
			}
			snprintf(out, n, "%lld %s%s ago", (long long)k, steps[i].unit, k == 1 ? "" : "s");
			return;
		}
	}
}

/* ---- the end of a command in a computer ---- */

/* A command that did not run to its end: what happened to the computer. */
static void explain_stop(const char *what, const brig_exec_result *res, brig_error *err, const cli_exec_words *w)
{
	if (!res->container_stopped && !res->uncertain && (res->timed_out || res->canceled)) {
		/* brig-init ended it inside the computer: a certain end */
		brig_error_free(err);
		cli_note("%s; brig-init ended %s and everything it started; computer %s keeps running with its files",
			 what, w->noun, w->computer);
		return;
	}
	if (cli_debug || !res->container_stopped || res->uncertain || res->stop_checkpoint_failed)
		cli_error(err, NULL);
	else
		brig_error_free(err);
	if (res->container_stopped && res->stop_checkpoint_id)
		cli_note("%s; computer %s was stopped to end %s (Docker cannot kill an exec), after checkpoint %lld "
			 "kept what it had in /workspace and /runtime: `%s` restores it into a new generation",
			 what, w->computer, w->noun, (long long)res->stop_checkpoint_id, w->recover);
	else if (res->container_stopped)
		cli_note("%s; computer %s was stopped to end %s (Docker cannot kill an exec), so its processes and "
			 "/workspace contents are gone: recover the session from its last checkpoint with `%s`",
			 what, w->computer, w->noun, w->recover);
	else
		cli_note("%s, and computer %s could not be confirmed stopped: %s may still be running; stop it with "
			 "`brig stop %s`, then recover the session with `%s`",
			 what, w->computer, w->noun, w->computer, w->recover);
}

int cli_exec_end(int r, const brig_exec_result *res, brig_error *err, const cli_exec_words *w)
{
	char what[160];
	if (r == BRIG_ETIMEDOUT || res->timed_out) {
		char secs[32];
		cli_format_secs(secs, sizeof secs, w->timeout_ms);
		snprintf(what, sizeof what, "%s timed out after %s", w->label, secs);
		explain_stop(what, res, err, w);
		return CLI_EXIT_TIMEOUT;
	}
	if (r == BRIG_ECANCELED || res->canceled) {
		snprintf(what, sizeof what, "%s interrupted", w->label);
		explain_stop(what, res, err, w);
		return CLI_EXIT_CANCELED;
	}
	if (r == BRIG_EUNCERTAIN || res->uncertain) {
		snprintf(what, sizeof what, "the daemon connection broke before %s's end was known", w->noun);
		explain_stop(what, res, err, w);
		return CLI_EXIT_FAIL;
	}
	if (r != 0)
		return cli_error(err, NULL);
	brig_error_free(err);
	if (res->exit_code < 0 || res->exit_code > 255)
		return cli_fail("%s in %s ended but its exit code is unknown", w->noun, w->computer);
	return res->exit_code;
}
