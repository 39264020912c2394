/* cmd_guest.c — `brig ps`, `brig kill` and `brig attach`: a computer's
 * background commands (brig exec -d), through its brig-init (through a
 * brig server too, on the same brig-init's calls). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "brig/guest.h"
#include "brig/sandbox.h"
#include "cli/cli.h"
#include "util/util.h"

static const char ps_usage[] =
	"Usage: brig ps [OPTIONS] NAME\n"
	"       brig ps [OPTIONS] --ns NS --agent A --session S [--gen N]\n"
	"\n"
	"List the commands brig-init runs in computer NAME, running and recently\n"
	"ended: id, pid, state, exit code, start time and argv.\n"
	"\n"
	"Options:\n"
	"      --json              Print a JSON array\n" CLI_HELP_TARGET "  -h, --help              Print this help\n";

static const char kill_usage[] =
	"Usage: brig kill [OPTIONS] NAME ID\n"
	"       brig kill [OPTIONS] --ns NS --agent A --session S [--gen N] ID\n"
	"\n"
	"End command ID in computer NAME and everything it started (setsid'd and\n"
	"double-forked processes too); returns once they are gone. With -s, send\n"
	"one signal to the command's process group instead.\n"
	"\n"
	"Options:\n"
	"  -s, --signal SIG        TERM, SIGTERM, 15… (default: end the whole tree)\n" CLI_HELP_TARGET
	"  -h, --help              Print this help\n";

static const char attach_usage[] = "Usage: brig attach [OPTIONS] NAME ID\n"
				   "       brig attach [OPTIONS] --ns NS --agent A --session S [--gen N] ID\n"
				   "\n"
				   "Print background command ID's kept output (its first and last bytes), then\n"
				   "follow it live until it ends; brig exits with its exit code. An interrupt\n"
				   "(SIGINT/SIGTERM) detaches and leaves the command running.\n"
				   "\n"
				   "Options:\n"
				   "  -i, --interactive       Pass brig's stdin to the command\n" CLI_HELP_TARGET
				   "  -h, --help              Print this help\n";

static const struct option ps_opts[] = {
	{"json", no_argument, NULL, 'j'}, CLI_TARGET_LONGOPTS, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
static const struct option kill_opts[] = {{"signal", required_argument, NULL, 's'},
					  CLI_TARGET_LONGOPTS,
					  {"help", no_argument, NULL, 'h'},
					  {NULL, 0, NULL, 0}};
static const struct option attach_opts[] = {{"interactive", no_argument, NULL, 'i'},
					    CLI_TARGET_LONGOPTS,
					    {"help", no_argument, NULL, 'h'},
					    {NULL, 0, NULL, 0}};

static int parse_signal(const char *s, int *out)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
		     {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
		     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH}};
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcasecmp(s, names[i].name) == 0) {
			*out = names[i].sig;
			return 0;
		}
	int64_t n;
	if (cli_parse_i64("--signal", s, 1, 64, &n) != 0)
		return CLI_EXIT_FAIL;
	*out = (int)n;
	return 0;
}

/* As many operands after the options as the command takes: NAME (unless
 * the session flags of t name the computer) and, when want_id, ID. Returns
 * 0 or CLI_EXIT_FAIL. */
static int operand_count(const char *cmd, int argc, const cli_target *t, bool want_id)
{
	int want = (t->id_given ? 0 : 1) + (want_id ? 1 : 0);
	if (argc - optind == want)
		return 0;
	if (t->id_given)
		return cli_usage(cmd, "%s",
				 want_id ? "ID is required, and nothing else after the options"
					 : "no operand with --ns/--agent/--session");
	return cli_usage(cmd, "%s", want_id ? "NAME and ID are required" : "NAME is required");
}

/* NAME (or the session flags of t) and, when want_id, ID after the
 * options. *name is malloc'd. Returns 0 or CLI_EXIT_FAIL. */
static int operands(const char *cmd, int argc, char **argv, const cli_target *t, bool want_id, char **name, int64_t *id)
{
	if (operand_count(cmd, argc, t, want_id) != 0)
		return CLI_EXIT_FAIL;
	if (cli_target_name(name, cmd, t, t->id_given ? NULL : argv[optind], NULL, true) != 0)
		return CLI_EXIT_FAIL;
	if (want_id && cli_parse_i64("ID", argv[argc - 1], 1, INT64_MAX, id) != 0) {
		free(*name);
		*name = NULL;
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* ---- through a brig server (BRIG_HOST): its native process routes make
 * the same brig-init calls, so ids, listings and errors are brig-init's ---- */

/* operands' checks in its words, then the server and its path of the
 * computer (*base, malloc'd). ID is checked before the server is asked
 * about NAME, as direct checks it before looking the computer up. Returns
 * 0 or CLI_EXIT_FAIL (printed; nothing left open). */
static int remote_operands(cli_remote **r, char **base, const char *cmd, int argc, char **argv, const cli_target *t,
			   bool want_id, int64_t *id)
{
	*r = NULL;
	*base = NULL;
	if (operand_count(cmd, argc, t, want_id) != 0)
		return CLI_EXIT_FAIL;
	const char *name = t->id_given ? NULL : argv[optind];
	if (want_id && !t->id_given && cli_parse_i64("ID", argv[argc - 1], 1, INT64_MAX, id) != 0)
		return CLI_EXIT_FAIL;
	if (cli_remote_open(r) != 0)
		return CLI_EXIT_FAIL;
	int rc = cli_remote_target(*r, cmd, t, name, base);
	if (rc == 1)
		rc = cli_fail("no computer named %s on the brig server (or not one of a session it may touch)", name);
	if (!rc && want_id && t->id_given && cli_parse_i64("ID", argv[argc - 1], 1, INT64_MAX, id) != 0)
		rc = CLI_EXIT_FAIL;
	if (rc) {
		cli_remote_free(*r);
		*r = NULL;
		free(*base);
		*base = NULL;
	}
	return rc;
}

/* brig-init's list (GET …/processes?native=true) into *out. Returns 0 or
 * CLI_EXIT_FAIL (printed). */
static int remote_ps(json_t **out, int argc, char **argv, const cli_target *t)
{
	cli_remote *r = NULL;
	cleanup_free char *base = NULL;
	if (remote_operands(&r, &base, "ps", argc, argv, t, false, NULL) != 0)
		return CLI_EXIT_FAIL;
	cleanup_free char *target = xasprintf("%s/processes?native=true", base);
	json_t *j = NULL;
	brig_error *err = NULL;
	int rc = cli_remote_native(r, "GET", target, NULL, &j, &err);
	if (!rc && !json_is_array(json_object_get(j, "processes")))
		rc = brig__error_set(&err, BRIG_EPROTO, 0, "the brig server's answer has no processes");
	if (!rc)
		*out = json_incref(json_object_get(j, "processes"));
	json_decref(j);
	cli_remote_free(r);
	return rc ? cli_error(err, NULL) : 0;
}

/* POST …/processes/ID/kill?native=true: {"signal": sig}, or without one
 * the whole tree. Returns 0 or CLI_EXIT_FAIL (printed). */
static int remote_kill(int argc, char **argv, const cli_target *t, int sig)
{
	cli_remote *r = NULL;
	cleanup_free char *base = NULL;
	int64_t id = 0;
	if (remote_operands(&r, &base, "kill", argc, argv, t, true, &id) != 0)
		return CLI_EXIT_FAIL;
	cleanup_free char *target = xasprintf("%s/processes/%lld/kill?native=true", base, (long long)id);
	json_t *body = sig ? json_pack("{s:i}", "signal", sig) : json_object();
	brig_error *err = NULL;
	int rc = cli_remote_native(r, "POST", target, body, NULL, &err);
	json_decref(body);
	cli_remote_free(r);
	return rc ? cli_error(err, NULL) : 0;
}

/* POST …/processes/ID/attach?native=true, upgraded to the framed stream:
 * the output until the command ends (its exit code), or a Ctrl-C that
 * hangs up, which detaches (the server's attachment ends, the command runs
 * on) as direct. */
static int remote_attach(int argc, char **argv, const cli_target *t, bool interactive)
{
	cli_remote *r = NULL;
	cleanup_free char *base = NULL;
	int64_t id = 0;
	if (remote_operands(&r, &base, "attach", argc, argv, t, true, &id) != 0)
		return CLI_EXIT_FAIL;
	cleanup_free char *target =
		xasprintf("%s/processes/%lld/attach?native=true%s", base, (long long)id, interactive ? "&stdin=true" : "");
	/* the detach note names the computer as direct does: a session's is
	 * asked for first (a hang-up ends the connection) */
	json_t *c = NULL;
	const char *name = t->id_given ? NULL : argv[optind];
	if (!name && cli_remote_call(r, "GET", base, NULL, &c) != 0) {
		cli_remote_free(r);
		return CLI_EXIT_FAIL;
	}
	if (!name)
		name = json_string_value(json_object_get(c, "name"));
	cli_output out = {.stdout_live = true, .stderr_live = true};
	json_t *body = json_object(), *end = NULL;
	int rc = cli_remote_attach(r, target, body, interactive, false, cli_cancel_install(), cli_output_cb, &out,
				   &end);
	json_decref(body);
	if (rc == CLI_EXIT_CANCELED) {
		cli_note("detached; command %lld keeps running (brig attach %s %lld)", (long long)id,
			 name ? name : "NAME", (long long)id);
	} else if (rc == 0) {
		const char *type = json_string_value(json_object_get(end, "type"));
		json_t *code = json_object_get(end, "exit_code");
		if (type && strcmp(type, "exit") == 0 && json_is_integer(code)) {
			rc = json_integer_value(code) >= 0 && json_integer_value(code) <= 255 ? (int)json_integer_value(code)
												: CLI_EXIT_FAIL;
		} else {
			const char *m = json_string_value(json_object_get(end, "message"));
			rc = cli_fail("%s", m ? m : "the brig server's stream ended without the command's end");
		}
	}
	json_decref(end);
	json_decref(c);
	cli_remote_free(r);
	return rc;
}

/* The listing (taken): --json as brig-init gave it, else a table. */
static int print_ps(json_t *list, bool json)
{
	if (json)
		return cli_print_json(list);
	printf("%-6s %-8s %-8s %-5s %-20s %s\n", "ID", "PID", "STATE", "EXIT", "STARTED", "COMMAND");
	size_t i;
	json_t *p;
	json_array_foreach (list, i, p) {
		char exit_s[16] = "";
		json_t *code = json_object_get(p, "exit_code");
		if (json_is_integer(code))
			snprintf(exit_s, sizeof exit_s, "%lld", (long long)json_integer_value(code));
		char age[64] = "";
		int64_t ms = json_integer_value(json_object_get(p, "started_ms"));
		if (ms > 0)
			cli_format_age(age, sizeof age, ms / 1000);
		/* state and argv came from the guest: shown safely */
		char state[17] = "";
		const char *st = json_string_value(json_object_get(p, "state"));
		for (size_t c = 0; st && st[c] && c < sizeof state - 1; c++)
			state[c] = st[c] > 0x20 && st[c] < 0x7f ? st[c] : '?';
		printf("%-6lld %-8lld %-8s %-5s %-20s ", (long long)json_integer_value(json_object_get(p, "id")),
		       (long long)json_integer_value(json_object_get(p, "pid")), state, exit_s, age);
		size_t k;
		json_t *a;
		json_array_foreach (json_object_get(p, "argv"), k, a) {
			if (k)
				fputc(' ', stdout);
			cli_put_safe(json_string_value(a));
		}
		fputc('\n', stdout);
	}
	json_decref(list);
	return 0;
}

int cmd_ps(int argc, char **argv)
{
	bool json = false;
	cli_target t = {0};
	int opt, trc = 0;
	optind = 0;
	while ((opt = cli_getopt("ps", argc, argv, ":h", ps_opts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc)) {
			if (trc)
				return trc;
			continue;
		}
		if (opt == 'h')
			return cli_help(ps_usage);
		if (opt == 'j')
			json = true;
		else
			return CLI_EXIT_FAIL;
	}
	json_t *list = NULL;
	if (cli_remote_host())
		return remote_ps(&list, argc, argv, &t) ? CLI_EXIT_FAIL : print_ps(list, json);
	char *name = NULL;
	if (operands("ps", argc, argv, &t, false, &name, NULL) != 0)
		return CLI_EXIT_FAIL;
	brig_engine *e = NULL;
	brig_guest *g = NULL;
	int rc = cli_computer_guest(&e, &g, &name, !t.id_given);
	brig_error *err = NULL;
	if (!rc && brig_guest_ps(g, &list, 0, &err) != 0)
		rc = cli_error(err, NULL);
	if (!rc)
		rc = print_ps(list, json);
	brig_guest_free(g);
	brig_engine_free(e);
	free(name);
	return rc;
}

int cmd_kill(int argc, char **argv)
{
	int sig = 0;
	cli_target t = {0};
	int opt, trc = 0;
	optind = 0;
	while ((opt = cli_getopt("kill", argc, argv, ":hs:", kill_opts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc)) {
			if (trc)
				return trc;
			continue;
		}
		if (opt == 'h')
			return cli_help(kill_usage);
		if (opt != 's' || parse_signal(optarg, &sig) != 0)
			return CLI_EXIT_FAIL;
	}
	if (cli_remote_host())
		return remote_kill(argc, argv, &t, sig);
	char *name = NULL;
	int64_t id = 0;
	if (operands("kill", argc, argv, &t, true, &name, &id) != 0)
		return CLI_EXIT_FAIL;
	brig_engine *e = NULL;
	brig_guest *g = NULL;
	int rc = cli_computer_guest(&e, &g, &name, !t.id_given);
	brig_error *err = NULL;
	if (!rc && sig && brig_guest_signal(g, id, sig, 0, &err) != 0)
		rc = cli_error(err, NULL);
	brig_guest_exit x;
	if (!rc && !sig && brig_guest_kill(g, id, &x, 0, &err) != 0)
		rc = cli_error(err, NULL);
	brig_guest_free(g);
	brig_engine_free(e);
	free(name);
	return rc;
}

int cmd_attach(int argc, char **argv)
{
	bool interactive = false;
	cli_target t = {0};
	int opt, trc = 0;
	optind = 0;
	while ((opt = cli_getopt("attach", argc, argv, ":hi", attach_opts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc)) {
			if (trc)
				return trc;
			continue;
		}
		if (opt == 'h')
			return cli_help(attach_usage);
		if (opt == 'i')
			interactive = true;
		else
			return CLI_EXIT_FAIL;
	}
	if (cli_remote_host())
		return remote_attach(argc, argv, &t, interactive);
	char *name = NULL;
	int64_t id = 0;
	if (operands("attach", argc, argv, &t, true, &name, &id) != 0)
		return CLI_EXIT_FAIL;
	brig_engine *e = NULL;
	brig_guest *g = NULL;
	int rc = cli_computer_guest(&e, &g, &name, !t.id_given);
	if (!rc) {
		cli_output out = {.stdout_live = true, .stderr_live = true};
		brig_guest_exec_opts o = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
					  .stdin_fd = interactive ? 0 : -1,
					  .cancel_fd = cli_cancel_install(),
					  .on_output = cli_output_cb,
					  .payload = &out};
		brig_guest_exit x;
		brig_error *err = NULL;
		int r = brig_guest_attach(g, id, &o, &x, &err);
		if (r == BRIG_ECANCELED) {
			brig_error_free(err);
			cli_note("detached; command %lld keeps running (brig attach %s %lld)", (long long)id, name,
				 (long long)id);
			rc = CLI_EXIT_CANCELED;
		} else if (r) {
			rc = cli_error(err, NULL);
		} else {
			rc = x.code >= 0 ? x.code : CLI_EXIT_FAIL;
		}
	}
	brig_guest_free(g);
	brig_engine_free(e);
	free(name);
	return rc;
}
