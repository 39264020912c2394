/* cmd_mcp.c — `brig mcp`: the MCP server of one session on stdin/stdout
 * (src/mcp/). Flags name the session and, for a new one, its spec, as for
 * `brig up`; the computer is made on the first tool call that needs it. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "mcp/mcp.h"

static const char mcp_usage[] = "Usage: brig mcp --ns NS --agent A --session S [OPTIONS]\n"
				"\n"
				"Serve the Model Context Protocol on stdin/stdout (JSON-RPC 2.0, one message a\n"
				"line) for one session's computer, so any MCP client (Claude Code, Codex,\n"
				"Claude Desktop, Cursor…) can run commands and edit files in it. The computer\n"
				"is created or adopted on the first tool call that needs it. Logs go to stderr.\n"
				"Tools: run, read_file, write_file, edit_file, list_directory, stat, move,\n"
				"remove, make_directory, checkpoint, list_checkpoints, recover, computer_info,\n"
				"start_process, list_processes, read_process_output, send_input, kill_process.\n"
				"Background processes end when the client disconnects.\n"
				"\n"
				"Identity and store:\n"
				"      --ns NS, --agent A, --session S\n"
				"                          The session (1-63 of A-Z a-z 0-9 _ . -)\n"
				"      --store URL         Session store (default $BRIG_STORE, then brig's data dir)\n"
				"\n"
				"Spec (for a new session; without spec flags an existing session keeps its own):\n"
				"      --image IMG         Image (default $BRIG_IMAGE, then " BRIG_DEFAULT_IMAGE ")\n"
				"      --cpus C, --memory-mb M, --pids P, --workspace-mb W, --runtime-mb R\n"
				"      --network none|isolated, --subnet CIDR, --harness claude|codex|none\n"
				"  -e, --env KEY=VALUE     Environment entry; repeatable\n"
				"      --label KEY=VALUE   Extra label; repeatable\n" CLI_HELP_RUNTIME "\n"
				"  -h, --help              Print this help\n";

enum { OPT_NS = CLI_OPT_SPEC_END, OPT_AGENT, OPT_SESSION, OPT_STORE };

int cmd_mcp(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ns", required_argument, NULL, OPT_NS},
		{"agent", required_argument, NULL, OPT_AGENT},
		{"session", required_argument, NULL, OPT_SESSION},
		{"store", required_argument, NULL, OPT_STORE},
		{"help", no_argument, NULL, 'h'},
		CLI_SPEC_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	const char *ns = NULL, *agent = NULL, *session = NULL, *store = NULL;
	bool image_given = false, spec_given = false;
	brig_spec spec;
	brig_spec_init(&spec);
	brig_engine *e = NULL;
	brig_store *s = NULL;
	int rc = CLI_EXIT_FAIL, opt;

	optind = 0;
	while ((opt = cli_getopt("mcp", argc, argv, "+:he:", longopts, NULL)) != -1) {
		const char *key = cli_spec_key(opt);
		if (key) {
			spec_given = true;
			image_given = image_given || opt == CLI_OPT_IMAGE;
			if (cli_spec_set(&spec, key, optarg) != 0)
				goto out;
			continue;
		}
		switch (opt) {
		case OPT_NS: ns = optarg; break;
		case OPT_AGENT: agent = optarg; break;
		case OPT_SESSION: session = optarg; break;
		case OPT_STORE: store = optarg; break;
		case 'h': rc = cli_help(mcp_usage); goto out;
		default: goto out;
		}
	}
	if (optind < argc) {
		cli_usage("mcp", "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (!ns || !agent || !session) {
		cli_usage("mcp", "--ns, --agent and --session are required");
		goto out;
	}
	brig_identity id = {ns, agent, session, 1};
	brig_error *err = NULL;
	if (brig_identity_validate(&id, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	if (cli_spec_finish(&spec, image_given) != 0)
		goto out;
	/* $BRIG_IMAGE and $BRIG_RUNTIME count as spec flags, as --image would. */
	spec_given = spec_given || image_given || getenv("BRIG_IMAGE") || getenv("BRIG_RUNTIME");
	if (cli_store_open(&s, store) != 0 || cli_engine_open(&e) != 0)
		goto out;

	/* Audit rows are written off the command's path (issue 16: ~1 ms of a
	 * tool call); closing the store writes what is queued. */
	brig_error *aerr = NULL;
	if (brig_store_audit_background(s, &aerr) != 0)
		fprintf(stderr, "brig: %s: audit rows are written inline\n", brig_error_message(aerr));
	brig_error_free(aerr);

	/* A client that left must not kill brig mid-cleanup. */
	signal(SIGPIPE, SIG_IGN);
	int stop = cli_cancel_install();
	mcp_config cfg = {
		.engine = e,
		.store = s,
		.ns = ns,
		.agent = agent,
		.session = session,
		.spec = spec_given ? &spec : NULL,
	};
	mcp_server *srv = mcp_server_new(&cfg);
	rc = mcp_server_serve(srv, 0, stop) == 0 ? 0 : cli_fail("mcp: cannot read stdin");
	mcp_server_free(srv);
out:
	brig_store_close(s);
	brig_engine_free(e);
	brig_spec_clear(&spec);
	return rc;
}
