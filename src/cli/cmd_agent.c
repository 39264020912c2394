/* cmd_agent.c — `brig agent claude|codex`: brings up the session's computer
 * on the agents image and runs the harness CLI in /workspace, its model
 * credential delivered with the exec, never in argv or the container. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/image.h"
#include "brig/sandbox.h"
#include "cli/cli.h"

int cmd_agent(int argc, char **argv);

static const char usage[] =
	"Usage: brig agent claude|codex --ns NS --session S [OPTIONS] [-- ARG...]\n"
	"\n"
	"Bring up the session's computer (agent claude or codex, generation 1) on the agents\n"
	"image and run `claude ARG...` or `codex ARG...` in /workspace as uid 1000, streaming\n"
	"its output; brig exits with its exit code. The computer stays up for the next call.\n"
	"\n"
	"The model credential is forwarded from brig's environment with the exec, never in\n"
	"an argument list or the container's configuration: ANTHROPIC_API_KEY or\n"
	"CLAUDE_CODE_OAUTH_TOKEN for claude, OPENAI_API_KEY for codex. The agents keep their\n"
	"configuration in /runtime (CLAUDE_CONFIG_DIR=/runtime/.claude, CODEX_HOME=/runtime/.codex)\n"
	"and their temporary files in /runtime/tmp (TMPDIR): the root file system is read-only.\n"
	"\n"
	"Options:\n"
	"      --ns NS             Namespace\n"
	"      --session S         Session name\n"
	"      --image IMG         Image (default $BRIG_AGENTS_IMAGE, then " BRIG_IMAGE_AGENTS_TAG ";\n"
	"                          build it with `brig image build --profile agents`)\n"
	"      --network MODE      isolated (default: the brig-sandbox bridge, so the agent can\n"
	"                          reach its model) or none (only loopback: it cannot)\n"
	"      --subnet CIDR       Subnet of the isolated bridge (default " BRIG_DEFAULT_SUBNET ")\n"
	"  -e, --env KEY=VALUE     Environment entry of the computer; repeatable\n"
	"      --label KEY=VALUE   Extra label of the computer; repeatable\n"
	"  -i, --interactive       Pass brig's stdin to the agent\n"
	"      --timeout D         Deadline (30, 90s, 15m, 2h; default none); exit 124 when it passes\n"
	"  -h, --help              Print this help\n"
	"\n"
	"Exit codes: the agent's; 124 timed out; 125 brig failed; 126 cannot invoke;\n"
	"127 not found (the image lacks the CLI); 130 interrupted.\n";

enum { OPT_NS = 0x400, OPT_SESSION, OPT_IMAGE, OPT_NETWORK, OPT_SUBNET, OPT_TIMEOUT, OPT_LABEL };

int cmd_agent(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ns", required_argument, NULL, OPT_NS},
		{"session", required_argument, NULL, OPT_SESSION},
		{"image", required_argument, NULL, OPT_IMAGE},
		{"network", required_argument, NULL, OPT_NETWORK},
		{"subnet", required_argument, NULL, OPT_SUBNET},
		{"env", required_argument, NULL, 'e'},
		{"label", required_argument, NULL, OPT_LABEL},
		{"interactive", no_argument, NULL, 'i'},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return cli_help(usage);
	if (argc < 2 || argv[1][0] == '-')
		return cli_usage("agent", "the agent comes first: brig agent claude|codex --ns NS --session S");
	const char *agent = argv[1];
	brig_harness harness;
	const char *config_env;
	if (strcmp(agent, "claude") == 0) {
		harness = BRIG_HARNESS_CLAUDE;
		config_env = "CLAUDE_CONFIG_DIR=/runtime/.claude";
	} else if (strcmp(agent, "codex") == 0) {
		harness = BRIG_HARNESS_CODEX;
		config_env = "CODEX_HOME=/runtime/.codex";
	} else {
		return cli_usage("agent", "unknown agent '%.32s' (claude or codex)", agent);
	}

	brig_identity id = {.agent = agent, .generation = 1};
	const char *image = NULL, *network = "isolated";
	int64_t timeout_ms = 0;
	bool interactive = false, dashdash = false;
	brig_spec spec;
	brig_spec_init(&spec);
	brig_engine *e = NULL;
	brig_computer *c = NULL;
	brig_error *err = NULL;
	brig_exec_result res;
	memset(&res, 0, sizeof res);
	int rc = CLI_EXIT_FAIL, opt;
	char **args = NULL;

	optind = 0;
	while ((opt = cli_getopt("agent", argc - 1, argv + 1, "+:he:i", longopts, &dashdash)) != -1) {
		switch (opt) {
		case OPT_NS: id.ns = optarg; break;
		case OPT_SESSION: id.session = optarg; break;
		case OPT_IMAGE: image = optarg; break;
		case OPT_NETWORK: network = optarg; break;
		case OPT_SUBNET:
			if (cli_spec_set(&spec, "subnet", optarg) != 0)
				goto out;
			break;
		case 'e':
			if (cli_spec_set(&spec, "env", optarg) != 0)
				goto out;
			break;
		case OPT_LABEL:
			if (cli_spec_set(&spec, "label", optarg) != 0)
				goto out;
			break;
		case 'i': interactive = true; break;
		case OPT_TIMEOUT:
			if (cli_parse_duration_ms("--timeout", optarg, 0, 366LL * 86400 * 1000, &timeout_ms) != 0)
				goto out;
			break;
		case 'h': rc = cli_help(usage); goto out;
		default: goto out;
		}
	}
	if (!id.ns || !id.session) {
		cli_usage("agent", "--ns and --session are required");
		goto out;
	}
	if (brig_identity_validate(&id, &err) != 0) {
		cli_error(err, NULL); /* takes err */
		err = NULL;
		goto out;
	}
	if (!image) {
		const char *env_image = getenv("BRIG_AGENTS_IMAGE");
		image = env_image && *env_image ? env_image : BRIG_IMAGE_AGENTS_TAG;
	}
	if (cli_spec_set(&spec, "image", image) != 0 || cli_spec_set(&spec, "network", network) != 0 ||
	    cli_spec_set(&spec, "harness", agent) != 0 || cli_spec_set(&spec, "env", config_env) != 0 ||
	    cli_spec_set(&spec, "env", "TMPDIR=/runtime/tmp") != 0 || cli_spec_finish(&spec, true) != 0)
		goto out;

	/* The agent's argv: its CLI, then everything after the options. */
	int first = optind + 1; /* optind counts within argv + 1 */
	size_t nargs = argc > first ? (size_t)(argc - first) : 0;
	args = calloc(nargs + 2, sizeof *args);
	if (!args) {
		cli_fail("out of memory");
		goto out;
	}
	args[0] = (char *)agent;
	for (size_t i = 0; i < nargs; i++)
		args[i + 1] = argv[first + (int)i];
	(void)dashdash;

	if (spec.network == BRIG_NET_NONE)
		cli_note("--network none: the computer has only a loopback interface, so %s will NOT reach its "
			 "model (commands like --version still work); use --network isolated, the default, for a "
			 "working session",
			 agent);
	bool have_cred = false;
	for (const char *const *k = brig_env_credential_keys(harness); *k; k++) {
		const char *v = getenv(*k);
		if (v && *v)
			have_cred = true;
	}
	for (size_t i = 0; i < spec.env_count; i++)
		if (brig_env_is_credential(spec.env[i]))
			have_cred = true;
	if (!have_cred)
		cli_note("no %s in brig's environment: %s starts without a model credential",
			 harness == BRIG_HARNESS_CLAUDE ? "ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"
							: "OPENAI_API_KEY",
			 agent);

	if (cli_engine_open(&e) != 0)
		goto out;
	if (brig_computer_create(e, &c, &id, &spec, &err) != 0) {
		cli_error(err, NULL); /* takes err */
		err = NULL;
		goto out;
	}

	/* The agents' configuration directories and their temporary files
	 * live in /runtime, a fresh tmpfs whenever the computer starts (the
	 * root, /tmp included, is read-only); codex refuses a CODEX_HOME that
	 * does not exist. */
	static const char *const mkdir_argv[] = {"mkdir",           "-p",           "/runtime/.claude",
						 "/runtime/.codex", "/runtime/tmp", NULL};
	brig_exec_opts prep = {.version = BRIG_EXEC_OPTS_VERSION,
			       .argv = mkdir_argv,
			       .stdin_fd = -1,
			       .cancel_fd = -1,
			       .timeout_ms = 60 * 1000,
			       .capture_max = 4096};
	int r = brig_computer_exec(e, c->name, &prep, &res, &err);
	if (r != 0 || res.exit_code != 0) {
		if (r != 0)
			cli_error(err, "preparing /runtime");
		else
			cli_fail("preparing /runtime in %s failed (exit %d): %.200s", c->name, res.exit_code,
				 res.err.data ? res.err.data : "");
		err = NULL;
		goto out;
	}
	brig_exec_result_clear(&res);

	cli_output outp = {.stdout_live = true, .stderr_live = true};
	brig_exec_opts opts = {
		.version = BRIG_EXEC_OPTS_VERSION,
		.argv = (const char *const *)args,
		.workdir = "/workspace",
		.stdin_fd = interactive ? 0 : -1,
		.timeout_ms = timeout_ms,
		.cancel_fd = cli_cancel_install(),
		.on_output = cli_output_cb,
		.payload = &outp,
	};
	r = brig_computer_exec(e, c->name, &opts, &res, &err);
	char recover[512];
	snprintf(recover, sizeof recover, "brig recover --ns %s --agent %s --session %s", id.ns, id.agent, id.session);
	cli_exec_words w = {
		.label = agent, .noun = "the agent", .computer = c->name, .recover = recover, .timeout_ms = timeout_ms};
	rc = cli_exec_end(r, &res, err, &w);
	err = NULL;
	if (r == 0 && rc == CLI_EXIT_NOTFOUND)
		cli_note("exit 127: is %s in image %s? build it with `brig image build --profile agents`", agent,
			 spec.image);
out:
	free(args);
	brig_error_free(err);
	brig_exec_result_clear(&res);
	brig_computer_free(c);
	brig_engine_free(e);
	brig_spec_clear(&spec);
	return rc;
}
