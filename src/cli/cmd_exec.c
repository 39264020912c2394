/* cmd_exec.c — `brig exec`: runs argv in a computer, streaming its output
 * live and exiting with its code; a timeout, a cancel or a broken daemon
 * connection has stopped the computer, and the message says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "brig/session.h"
#include "cli/cli.h"

static const char usage[] =
	"Usage: brig exec [OPTIONS] NAME [--] CMD [ARG...]\n"
	"       brig exec [OPTIONS] --ns NS --agent A --session S [--gen N] [--] CMD [ARG...]\n"
	"\n"
	"Run CMD with its arguments (no shell: write sh -c '...' for one) in a computer,\n"
	"as its user (uid 1000). stdout and stderr stream live and apart; brig exits with\n"
	"the command's exit code. Options may come before or after NAME; the command\n"
	"starts at '--' or at the first argument after NAME that is not an option.\n"
	"\n"
	"A timeout, an interrupt (SIGINT/SIGTERM) or a broken daemon connection stops the\n"
	"computer (Docker cannot kill an exec): recover the session with `brig recover`.\n"
	"\n"
	"Options:\n"
	"      --timeout D         Deadline (30, 90s, 15m, 2h; default none); exit 124 when it passes\n"
	"  -e, --env KEY=VALUE     Environment entry (KEY alone copies brig's own value); repeatable\n"
	"  -w, --workdir DIR       Working directory (default /workspace)\n"
	"  -i, --interactive       Pass brig's stdin to the command\n"
	"  -d, --detach            Start it in the background and print its id (brig ps, attach, kill)\n"
	"  -t, --tty               Give the command a terminal (with -i: yours, in raw mode)\n"
	"      --json              Capture stdout and print the result as JSON at the end\n"
	"                          (stderr still streams live)\n"
	"      --ns NS, --agent A, --session S, --gen N\n"
	"                          Name the computer by its session identity instead of NAME:\n"
	"                          the current generation from the session store (generation 1\n"
	"                          for a session the store does not know), or generation N\n"
	"      --store URL         Session store (default $BRIG_STORE, then brig's data dir); the\n"
	"                          command is audited there and a timeout marks the session failed\n"
	"  -h, --help              Print this help\n"
	"\n"
	"Exit codes: the command's; 124 timed out; 125 brig failed; 126 cannot invoke;\n"
	"127 not found; 130 interrupted.\n";

enum { OPT_TIMEOUT = CLI_OPT_SPEC_END, OPT_JSON, OPT_NS, OPT_AGENT, OPT_SESSION, OPT_GEN, OPT_STORE };

static const struct option longopts[] = {
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"env", required_argument, NULL, 'e'},
	{"workdir", required_argument, NULL, 'w'},
	{"interactive", no_argument, NULL, 'i'},
	{"detach", no_argument, NULL, 'd'},
	{"tty", no_argument, NULL, 't'},
	{"json", no_argument, NULL, OPT_JSON},
	{"ns", required_argument, NULL, OPT_NS},
	{"agent", required_argument, NULL, OPT_AGENT},
	{"session", required_argument, NULL, OPT_SESSION},
	{"gen", required_argument, NULL, OPT_GEN},
	{"store", required_argument, NULL, OPT_STORE},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

typedef struct exec_args {
	int64_t timeout_ms;
	cli_strv env;
	const char *workdir;
	bool interactive, json, help, detach, tty;
	brig_identity id;
	bool id_given, gen_given;
	const char *store;
} exec_args;

/* One pass of option parsing; exec runs two (before and after NAME).
 * Returns 0, or CLI_EXIT_FAIL after a usage message. */
static int parse_pass(exec_args *a, int argc, char **argv, bool *dashdash)
{
	int opt;
	optind = 0;
	*dashdash = false;
	while ((opt = cli_getopt("exec", argc, argv, "+:he:w:idt", longopts, dashdash)) != -1) {
		switch (opt) {
		case OPT_TIMEOUT:
			if (cli_parse_duration_ms("--timeout", optarg, 0, 366LL * 86400 * 1000, &a->timeout_ms) != 0)
				return CLI_EXIT_FAIL;
			break;
		case 'e': cli_strv_add(&a->env, optarg); break;
		case 'w': a->workdir = optarg; break;
		case 'i': a->interactive = true; break;
		case 'd': a->detach = true; break;
		case 't': a->tty = true; break;
		case OPT_JSON: a->json = true; break;
		case OPT_NS: a->id.ns = optarg, a->id_given = true; break;
		case OPT_AGENT: a->id.agent = optarg, a->id_given = true; break;
		case OPT_SESSION: a->id.session = optarg, a->id_given = true; break;
		case OPT_GEN: {
			int64_t g;
			if (cli_parse_i64("--gen", optarg, 1, BRIG_GENERATION_MAX, &g) != 0)
				return CLI_EXIT_FAIL;
			a->id.generation = (uint32_t)g;
			a->id_given = a->gen_given = true;
			break;
		}
		case OPT_STORE: a->store = optarg; break;
		case 'h': a->help = true; return 0;
		default: return CLI_EXIT_FAIL;
		}
	}
	return 0;
}

int cmd_exec(int argc, char **argv)
{
	exec_args a = {.id.generation = 1};
	bool dashdash = false;
	const char *ref = NULL;
	char name[BRIG_NAME_SIZE];
	char *resolved = NULL;
	brig_store *store = NULL;
	char **cmd_argv;
	int rc = CLI_EXIT_FAIL;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	brig_exec_result res;
	memset(&res, 0, sizeof res);

	if (parse_pass(&a, argc, argv, &dashdash) != 0)
		goto out;
	int next = optind;
	if (!a.help && !dashdash && !a.id_given && next < argc) {
		/* argv[next] is NAME; options may follow it, before the command. */
		ref = argv[next];
		char **rest = argv + next;
		int rest_argc = argc - next;
		bool had_id = a.id_given;
		if (parse_pass(&a, rest_argc, rest, &dashdash) != 0)
			goto out;
		if (a.id_given && !had_id) {
			cli_usage("exec", "give either NAME or --ns/--agent/--session, not both");
			goto out;
		}
		next += optind;
	}
	if (a.help) {
		rc = cli_help(usage);
		goto out;
	}
	cmd_argv = argv + next;
	if (!ref && !a.id_given) {
		cli_usage("exec", "NAME (or --ns/--agent/--session) is required");
		goto out;
	}
	if (next >= argc) {
		cli_usage("exec", "a command is required (brig exec NAME -- CMD [ARG...])");
		goto out;
	}
	if (a.id_given) {
		if (!a.id.ns || !a.id.agent || !a.id.session) {
			cli_usage("exec", "--ns, --agent and --session go together");
			goto out;
		}
		if (!a.gen_given) {
			/* The store knows the current generation. */
			if (cli_store_open(&store, a.store) != 0)
				goto out;
			if (cli_session_ref(&resolved, store, a.id.ns, a.id.agent, a.id.session, true) != 0)
				goto out;
			ref = resolved;
		} else if (brig_identity_name(name, &a.id, &err) != 0) {
			cli_error(err, NULL);
			goto out;
		} else {
			ref = name;
		}
	}
	if (!store && cli_store_open(&store, a.store) != 0)
		goto out;

	if (cli_engine_open(&e) != 0)
		goto out;

	if (a.detach) {
		brig_exec_opts dopts = {.version = BRIG_EXEC_OPTS_VERSION,
					.argv = (const char *const *)cmd_argv,
					.env = a.env.v,
					.env_count = a.env.count,
					.workdir = a.workdir,
					.stdin_fd = -1,
					.cancel_fd = -1};
		int64_t proc = 0;
		if (brig_computer_start(e, ref, &dopts, &proc, &err) != 0) {
			rc = cli_error(err, NULL);
			err = NULL;
			goto out;
		}
		printf("%lld\n", (long long)proc);
		rc = fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
		goto out;
	}

	cli_output out = {.stdout_live = !a.json, .stderr_live = true};
	brig_exec_opts opts = {
		.version = BRIG_EXEC_OPTS_VERSION,
		.argv = (const char *const *)cmd_argv,
		.env = a.env.v,
		.env_count = a.env.count,
		.workdir = a.workdir,
		.stdin_fd = a.interactive ? 0 : -1,
		.timeout_ms = a.timeout_ms,
		.cancel_fd = cli_cancel_install(),
		.on_output = cli_output_cb,
		.payload = &out,
	};
	/* Audited in the store; a timeout, cancel or uncertain end marks the
	 * session failed there. */
	int r = a.tty ? cli_exec_tty(e, ref, &opts, &res, &err) : brig_session_exec(e, store, ref, &opts, &res, &err);
	bool started = r == 0 || r == BRIG_ETIMEDOUT || r == BRIG_ECANCELED || r == BRIG_EUNCERTAIN;
	char recover[512];
	if (a.id_given && a.id.ns && a.id.agent && a.id.session)
		snprintf(recover, sizeof recover, "brig recover --ns %s --agent %s --session %s", a.id.ns, a.id.agent,
			 a.id.session);
	else
		snprintf(recover, sizeof recover, "brig recover");
	cli_exec_words w = {
		.label = "exec", .noun = "the command", .computer = ref, .recover = recover, .timeout_ms = a.timeout_ms};
	rc = cli_exec_end(r, &res, err, &w);
	err = NULL;
	if (a.json && started) {
		int jr = cli_print_json(brig_exec_result_to_json(&res));
		if (jr != 0 && rc == 0)
			rc = jr;
	}
out:
	brig_error_free(err);
	brig_exec_result_clear(&res);
	brig_engine_free(e);
	brig_store_close(store);
	free(resolved);
	cli_strv_free(&a.env);
	return rc;
}
