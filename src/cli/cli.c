/* cli.c — helpers every command shares: printing library errors, opening
 * the engine, JSON and table output, spec flags, the cancel pipe and live
 * output streaming. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
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
	case 'e': return "env";
	default: return NULL;
	}
}

int cli_spec_set(brig_spec *spec, const char *key, const char *value)
{
	brig_error *err = NULL;
	int rc;
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

void cli_tty_forget(void) { tty_saved_set = 0; }

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
	if (cli_debug || !res->container_stopped || res->uncertain)
		cli_error(err, NULL);
	else
		brig_error_free(err);
	if (res->container_stopped)
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
