/* cmd_agent.c — `brig agent claude|codex`: brings up the session's computer
 * on the agents image and runs the harness CLI in /workspace, its model
 * credential delivered with the exec, never in argv or the container. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brig/image.h"
#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "util/util.h"

static const char usage[] =
	"Usage: brig agent claude|codex --ns NS --session S [OPTIONS] [-- ARG...]\n"
	"\n"
	"Bring up the session's computer (agent claude or codex) on the agents image, as\n"
	"`brig up` does, and run `claude ARG...` or `codex ARG...` in /workspace as uid 1000,\n"
	"streaming its output; brig exits with its exit code. With no ARG and brig on a\n"
	"terminal, the agent gets one (as with -it): its interactive TUI. The computer stays up for the\n"
	"next call. The session lives in the session store like any other: `brig checkpoint`,\n"
	"`brig recover` and `brig history` work on it, and after a recover brig agent uses the\n"
	"recovered generation. A computer that lost its files (stopped, killed, removed) is\n"
	"restored from the latest checkpoint into a new generation; with none, brig agent\n"
	"refuses unless --fresh.\n"
	"\n"
	"The computer is on network egress: it reaches only its model's API (claude:\n"
	"api.anthropic.com; codex: api.openai.com; add hosts with --allow) through brig's proxy,\n"
	"and its model credential never enters it: ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN\n"
	"(claude), OPENAI_API_KEY (codex) hold a placeholder inside, and the proxy puts the value\n"
	"from brig's environment into the requests to that API (--secret). With\n"
	"--forward-credential the credential is forwarded with each exec instead (the network\n"
	"then defaults to isolated, the whole internet). The agents keep their\n"
	"configuration in /runtime (CLAUDE_CONFIG_DIR=/runtime/.claude, CODEX_HOME=/runtime/.codex)\n"
	"and their temporary files in /runtime/tmp (TMPDIR): the root file system is read-only.\n"
	"\n"
	"Options:\n"
	"      --ns NS             Namespace\n"
	"      --session S         Session name\n"
	"      --image IMG         Image (default $BRIG_AGENTS_IMAGE, then " BRIG_IMAGE_AGENTS_TAG ";\n"
	"                          build it with `brig image build --profile agents`)\n"
	"      --network MODE      egress (default: only the model's API and --allow's hosts),\n"
	"                          isolated (the brig-sandbox bridge: the whole internet) or none\n"
	"      --allow RULE[,RULE] egress: more hosts the agent may reach (host, *.domain, :PORT)\n"
	"      --forward-credential  Forward the real credential into the computer with each exec\n"
	"                          (the seed's behaviour) instead of a placeholder\n"
	"      --subnet CIDR       Subnet of the isolated bridge (default " BRIG_DEFAULT_SUBNET ")\n"
	"  -e, --env KEY=VALUE     Environment entry of the computer; repeatable\n"
	"      --label KEY=VALUE   Extra label of the computer; repeatable\n" CLI_HELP_RUNTIME
	"  -i, --interactive       Pass brig's stdin to the agent\n"
	"  -t, --tty               Give the agent a terminal (with -i: yours, in raw mode)\n"
	"      --fresh             When the computer lost its files and there is no checkpoint,\n"
	"                          go on in a new, empty generation\n"
	"      --no-checkpoint     Do not checkpoint /workspace and /runtime when the agent ends\n"
	"                          (by default each run that leaves the computer running is\n"
	"                          checkpointed: `brig checkpoints` lists them)\n" CLI_HELP_EVERY CLI_HELP_STORE
	"      --timeout D         Deadline (30, 90s, 15m, 2h; default none); exit 124 when it passes\n"
	"  -h, --help              Print this help\n"
	"\n"
	"Exit codes: the agent's; 124 timed out; 125 brig failed; 126 cannot invoke;\n"
	"127 not found (the image lacks the CLI); 130 interrupted.\n";

enum {
	OPT_IMAGE = CLI_OPT_TARGET_END,
	OPT_NETWORK,
	OPT_SUBNET,
	OPT_TIMEOUT,
	OPT_LABEL,
	OPT_FRESH,
	OPT_NO_CHECKPOINT,
	OPT_EVERY,
	OPT_RUNTIME,
	OPT_ALLOW,
	OPT_FORWARD
};

typedef struct agent_args {
	const char *agent; /* "claude" or "codex" */
	brig_harness harness;
	const char *config_env; /* where the agent keeps its configuration */
	cli_target t;           /* --ns and --session; the agent names itself */
	const char *image, *network;
	int64_t timeout_ms;
	bool interactive, tty;
	bool fresh;
	bool no_checkpoint;
	bool forward; /* --forward-credential */
	int64_t every_ms;
	brig_spec spec;
	char **args; /* the agent's argv: its CLI, then what follows the options */
} agent_args;

/* What each harness needs to reach its model, and nothing more: Claude
 * Code's API (its telemetry, statsig and sentry, is optional and turned
 * off with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC); Codex's API with an
 * API key (ChatGPT sign-in would need chatgpt.com too: --allow it). */
static const char *const claude_hosts = "api.anthropic.com";
static const char *const codex_hosts = "api.openai.com";

/* Network egress for the agent: its model's hosts (and allow's), and each
 * model credential set in brig's environment as a secret for them. */
static int agent_egress(agent_args *a, const char *allow)
{
	const char *hosts = a->harness == BRIG_HARNESS_CLAUDE ? claude_hosts : codex_hosts;
	if (cli_spec_set(&a->spec, "network", "egress") != 0 || cli_spec_set(&a->spec, "allow", hosts) != 0 ||
	    (allow && cli_spec_set(&a->spec, "allow", allow) != 0))
		return CLI_EXIT_FAIL;
	if (a->harness == BRIG_HARNESS_CLAUDE &&
	    cli_spec_set(&a->spec, "env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") != 0)
		return CLI_EXIT_FAIL;
	if (a->forward)
		return 0;
	for (const char *const *k = brig_env_credential_keys(a->harness); *k; k++) {
		const char *v = getenv(*k);
		if (!v || !*v)
			continue;
		char *sec = xasprintf("%s@%s", *k, hosts);
		int rc = cli_spec_set(&a->spec, "secret", sec);
		free(sec);
		if (rc)
			return rc;
	}
	return 0;
}

/* The agent, the options and the spec. Sets *done when the command ends
 * here (--help, or a refusal with its message printed) and returns brig's
 * exit code for it; otherwise returns 0 with *done false. */
static int parse_agent(agent_args *a, int argc, char **argv, bool *done)
{
	static const struct option longopts[] = {
		{"ns", required_argument, NULL, CLI_OPT_NS},
		{"session", required_argument, NULL, CLI_OPT_SESSION},
		{"store", required_argument, NULL, CLI_OPT_STORE},
		{"fresh", no_argument, NULL, OPT_FRESH},
		{"no-checkpoint", no_argument, NULL, OPT_NO_CHECKPOINT},
		{"checkpoint-every", required_argument, NULL, OPT_EVERY},
		{"image", required_argument, NULL, OPT_IMAGE},
		{"network", required_argument, NULL, OPT_NETWORK},
		{"subnet", required_argument, NULL, OPT_SUBNET},
		{"env", required_argument, NULL, 'e'},
		{"label", required_argument, NULL, OPT_LABEL},
		{"runtime", required_argument, NULL, OPT_RUNTIME},
		{"allow", required_argument, NULL, OPT_ALLOW},
		{"forward-credential", no_argument, NULL, OPT_FORWARD},
		{"interactive", no_argument, NULL, 'i'},
		{"tty", no_argument, NULL, 't'},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	*done = true;
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return cli_help(usage);
	if (argc < 2 || argv[1][0] == '-')
		return cli_usage("agent", "the agent comes first: brig agent claude|codex --ns NS --session S");
	a->agent = argv[1];
	if (strcmp(a->agent, "claude") == 0) {
		a->harness = BRIG_HARNESS_CLAUDE;
		a->config_env = "CLAUDE_CONFIG_DIR=/runtime/.claude";
	} else if (strcmp(a->agent, "codex") == 0) {
		a->harness = BRIG_HARNESS_CODEX;
		a->config_env = "CODEX_HOME=/runtime/.codex";
	} else {
		return cli_usage("agent", "unknown agent '%.32s' (claude or codex)", a->agent);
	}
	a->network = NULL;
	const char *allow = NULL;
	int opt, rc = 0;
	optind = 0;
	while ((opt = cli_getopt("agent", argc - 1, argv + 1, "+:he:it", longopts, NULL)) != -1) {
		if (cli_target_opt(&a->t, opt, optarg, &rc))
			continue;
		switch (opt) {
		case OPT_IMAGE: a->image = optarg; break;
		case OPT_NETWORK: a->network = optarg; break;
		case OPT_SUBNET: rc = cli_spec_set(&a->spec, "subnet", optarg); break;
		case 'e': rc = cli_spec_set(&a->spec, "env", optarg); break;
		case OPT_LABEL: rc = cli_spec_set(&a->spec, "label", optarg); break;
		case OPT_RUNTIME: rc = cli_spec_set(&a->spec, "runtime", optarg); break;
		case OPT_ALLOW: allow = optarg; break;
		case OPT_FORWARD: a->forward = true; break;
		case 'i': a->interactive = true; break;
		case 't': a->tty = true; break;
		case OPT_FRESH: a->fresh = true; break;
		case OPT_NO_CHECKPOINT: a->no_checkpoint = true; break;
		case OPT_EVERY:
			rc = cli_parse_duration_ms("--checkpoint-every", optarg, 1000, 366LL * 86400 * 1000,
						   &a->every_ms);
			break;
		case OPT_TIMEOUT:
			rc = cli_parse_duration_ms("--timeout", optarg, 0, 366LL * 86400 * 1000, &a->timeout_ms);
			break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
		if (rc)
			return rc;
	}
	a->t.id.agent = a->agent;
	a->t.id.generation = 1;
	if (!a->t.id.ns || !a->t.id.session)
		return cli_usage("agent", "--ns and --session are required");
	brig_error *err = NULL;
	if (brig_identity_validate(&a->t.id, &err) != 0)
		return cli_error(err, NULL);
	if (!a->image) {
		const char *env_image = getenv("BRIG_AGENTS_IMAGE");
		a->image = env_image && *env_image ? env_image : BRIG_IMAGE_AGENTS_TAG;
	}
	if (!a->network)
		a->network = a->forward ? "isolated" : "egress";
	if (strcmp(a->network, "egress") == 0 && agent_egress(a, allow) != 0)
		return CLI_EXIT_FAIL;
	if (allow && strcmp(a->network, "egress") != 0)
		return cli_usage("agent", "--allow needs --network egress");
	if (cli_spec_set(&a->spec, "image", a->image) != 0 || cli_spec_set(&a->spec, "network", a->network) != 0 ||
	    cli_spec_set(&a->spec, "harness", a->agent) != 0 || cli_spec_set(&a->spec, "env", a->config_env) != 0 ||
	    cli_spec_set(&a->spec, "env", "TMPDIR=/runtime/tmp") != 0 || cli_spec_finish(&a->spec, true) != 0)
		return CLI_EXIT_FAIL;

	int first = optind + 1; /* optind counts within argv + 1 */
	size_t nargs = argc > first ? (size_t)(argc - first) : 0;
	a->args = xcalloc(nargs + 2, sizeof *a->args);
	a->args[0] = (char *)a->agent;
	for (size_t i = 0; i < nargs; i++)
		a->args[i + 1] = argv[first + (int)i];
	/* No prompt, on a terminal: the agent's interactive TUI, which needs one */
	if (nargs == 0 && !a->tty && isatty(0) && isatty(1))
		a->tty = a->interactive = true;
	*done = false;
	return 0;
}

/* What the user should know before the agent starts without its model. */
static void agent_notes(const agent_args *a)
{
	if (a->spec.network == BRIG_NET_NONE)
		cli_note("--network none: the computer has only a loopback interface, so %s will NOT reach its "
			 "model (commands like --version still work); use --network isolated, the default, for a "
			 "working session",
			 a->agent);
	bool have_cred = false;
	for (const char *const *k = brig_env_credential_keys(a->harness); *k; k++) {
		const char *v = getenv(*k);
		if (v && *v)
			have_cred = true;
	}
	for (size_t i = 0; i < a->spec.env_count; i++)
		if (brig_env_is_credential(a->spec.env[i]))
			have_cred = true;
	if (!have_cred)
		cli_note("no %s in brig's environment: %s starts without a model credential",
			 a->harness == BRIG_HARNESS_CLAUDE ? "ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"
							   : "OPENAI_API_KEY",
			 a->agent);
}

/* The agents' configuration directories and their temporary files live in
 * /runtime, a fresh tmpfs whenever the computer starts (the root, /tmp
 * included, is read-only); codex refuses a CODEX_HOME that does not exist.
 * Returns 0 or CLI_EXIT_FAIL (message printed). */
static int prepare_runtime(brig_engine *e, const char *name)
{
	static const char *const mkdir_argv[] = {"mkdir",           "-p",           "/runtime/.claude",
						 "/runtime/.codex", "/runtime/tmp", NULL};
	brig_exec_opts prep = {.version = BRIG_EXEC_OPTS_VERSION,
			       .argv = mkdir_argv,
			       .stdin_fd = -1,
			       .cancel_fd = -1,
			       .timeout_ms = 60 * 1000,
			       .capture_max = 4096};
	brig_exec_result res;
	memset(&res, 0, sizeof res);
	brig_error *err = NULL;
	int rc = 0;
	int r = brig_computer_exec(e, name, &prep, &res, &err);
	if (r != 0)
		rc = cli_error(err, "preparing /runtime");
	else if (res.exit_code != 0)
		rc = cli_fail("preparing /runtime in %s failed (exit %d): %.200s", name, res.exit_code,
			      res.err.data ? res.err.data : "");
	brig_exec_result_clear(&res);
	return rc;
}

/* Runs the agent, streaming its output, through the session (an audit row;
 * a stopped computer marks the session failed); returns brig's exit code.
 * *keep_going is set when the computer still runs with the agent's work. */
static int run_agent(brig_engine *e, brig_store *s, const char *name, const agent_args *a, bool *keep_going)
{
	cli_output outp = {.stdout_live = true, .stderr_live = true};
	brig_exec_opts opts = {
		.version = BRIG_EXEC_OPTS_VERSION,
		.argv = (const char *const *)a->args,
		.workdir = "/workspace",
		.stdin_fd = a->interactive ? 0 : -1,
		.timeout_ms = a->timeout_ms,
		.cancel_fd = cli_cancel_install(),
		.on_output = cli_output_cb,
		.payload = &outp,
	};
	brig_exec_result res;
	memset(&res, 0, sizeof res);
	brig_error *err = NULL;
	cli_every *every = cli_every_start(e, s, name, a->every_ms);
	/* audited either way; a terminal has no checkpoint-before-stop hook */
	int r = a->tty ? cli_exec_tty(e, s, name, &opts, &res, &err)
		       : brig_session_exec_keep(e, s, name, &opts, NULL, &res, &err);
	cli_every_stop(every);
	char recover[1024];
	/* The store as shown (a password redacted): the user's own --store. */
	snprintf(recover, sizeof recover, "brig recover --ns %s --agent %s --session %s%s%s", a->t.id.ns, a->agent,
		 a->t.id.session, a->t.store ? " --store " : "", a->t.store ? brig_store_display_url(s) : "");
	cli_exec_words w = {.label = a->agent,
			    .noun = "the agent",
			    .computer = name,
			    .recover = recover,
			    .timeout_ms = a->timeout_ms};
	*keep_going = (r == 0 || res.timed_out || res.canceled) && !res.container_stopped && !res.uncertain;
	int rc = cli_exec_end(r, &res, err, &w); /* takes err */
	if (r == 0 && rc == CLI_EXIT_NOTFOUND)
		cli_note("exit 127: is %s in image %s? build it with `brig image build --profile agents`", a->agent,
			 a->spec.image);
	brig_exec_result_clear(&res);
	return rc;
}

/* The agent's work, kept when it ends (its exit code stays brig's: a
 * failed checkpoint is said, loudly, but does not hide how the agent
 * ended). */
static void checkpoint_after(brig_engine *e, brig_store *s, const char *name)
{
	brig_store_checkpoint *cp = NULL;
	brig_error *err = NULL;
	if (brig_checkpoint_create(e, s, &cp, name, NULL, &err) != 0) {
		cli_error(err, "the agent's work was NOT checkpointed");
		return;
	}
	cli_note("checkpoint %lld of %s/%s/%s generation %lld (brig recover --checkpoint %lld goes back to it)",
		 (long long)cp->id, cp->ns, cp->agent, cp->session, (long long)cp->generation, (long long)cp->id);
	brig_store_checkpoint_free(cp);
}

int cmd_agent(int argc, char **argv)
{
	agent_args a = {0};
	brig_spec_init(&a.spec);
	brig_engine *e = NULL;
	brig_store *s = NULL;
	brig_error *err = NULL;
	brig_up_result ur;
	memset(&ur, 0, sizeof ur);
	bool done;
	int rc = parse_agent(&a, argc, argv, &done);
	if (done)
		goto out;
	agent_notes(&a);
	rc = CLI_EXIT_FAIL;
	if (cli_store_open(&s, a.t.store) != 0 || cli_engine_open(&e) != 0)
		goto out;
	brig_up_opts uo = BRIG_UP_OPTS_INIT;
	uo.fresh = a.fresh;
	if (brig_session_open(e, s, &ur, &a.t.id, &a.spec, &uo, &err) != 0) {
		cli_error(err, NULL); /* takes err */
		goto out;
	}
	cli_up_report(&ur);
	if (prepare_runtime(e, ur.computer->name) != 0)
		goto out;
	bool keep_going = false;
	rc = run_agent(e, s, ur.computer->name, &a, &keep_going);
	if (keep_going && !a.no_checkpoint)
		checkpoint_after(e, s, ur.computer->name);
out:
	free(a.args);
	brig_up_result_clear(&ur);
	brig_engine_free(e);
	brig_store_close(s);
	brig_spec_clear(&a.spec);
	return rc;
}
