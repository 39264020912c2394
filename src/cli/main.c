/* main.c — the `brig` entry point: global options before the verb and the
 * one commands[] table that dispatches to a cmd_*.c file (crun's crun.c). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brig/common.h"
#include "brig/sandbox.h"
#include "cli/cli.h"

bool cli_debug;

static int cmd_help(int argc, char **argv);

static const cli_command commands[] = {
	{"create", cmd_create, "Create (or adopt) and start a session's computer"},
	{"up", cmd_up, "Create or adopt the current generation of a session (session store)"},
	{"exec", cmd_exec, "Run a command in a computer"},
	{"ps", cmd_ps, "List a computer's commands (running and recently ended)"},
	{"kill", cmd_kill, "End a background command and everything it started"},
	{"attach", cmd_attach, "Follow a background command's output until it ends"},
	{"fs", cmd_fs, "A computer's files: ls, cat, write, stat, rm, mkdir, mv"},
	{"cp", cmd_cp, "Copy files between a computer and the host (docker cp's syntax)"},
	{"ls", cmd_ls, "List computers"},
	{"inspect", cmd_inspect, "Show one computer"},
	{"port", cmd_port, "List a computer's published ports"},
	{"pause", cmd_pause, "Freeze a computer (memory, processes and files are kept)"},
	{"resume", cmd_resume, "Thaw a paused computer"},
	{"stop", cmd_stop, "Stop a computer (its /workspace and /runtime contents are lost)"},
	{"destroy", cmd_destroy, "Remove computers and their volumes"},
	{"checkpoint", cmd_checkpoint, "Checkpoint a computer's /workspace and /runtime (or rm one)"},
	{"checkpoints", cmd_checkpoints, "List a session's checkpoints"},
	{"recover", cmd_recover, "Recover a failed session into a new generation from its checkpoint"},
	{"sessions", cmd_sessions, "List the session store's sessions (ls) or remove one (rm)"},
	{"history", cmd_history, "Show a session's commands and checkpoints from the store"},
	{"run", cmd_run, "Run one command in a fresh disposable container"},
	{"gc", cmd_gc, "Remove brig's leftovers"},
	{"mcp", cmd_mcp, "Serve a session's computer to MCP clients on stdin/stdout"},
	{"serve", cmd_serve, "Serve brig's HTTP API on a unix socket or TCP with TLS"},
	{"network", cmd_network, "Manage the isolated bridge (brig-sandbox)"},
	{"egress", cmd_egress, "Egress by allowlist (--network egress): allow, deny, ls, log, rm"},
	{"egress-proxy", cmd_egress_proxy, "Serve as the egress proxy (started by brig itself)"},
	{"image", cmd_image, "Build the runtime images (brig image build) and list them"},
	{"agent", cmd_agent, "Run Claude Code or Codex in a session's computer"},
	{"version", cmd_version, "Show brig's and the daemon's versions"},
	{"doctor", cmd_doctor, "Check the daemon and host for what brig's containment relies on"},
	{"help", cmd_help, "Show this help, or a command's"},
	{NULL, NULL, NULL},
};

static const cli_command *find_command(const char *name)
{
	for (const cli_command *c = commands; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

static void print_usage(FILE *f)
{
	fprintf(f, "Usage: brig [OPTIONS] COMMAND [ARG...]\n"
		   "\n"
		   "Run AI agents and untrusted commands in locked-down Docker containers.\n"
		   "\n"
		   "Options:\n"
		   "  -H, --host HOST   Docker daemon to use (sets DOCKER_HOST: unix:///path, tcp://host:port),\n"
		   "                    or a brig server (sets BRIG_HOST: brig+unix:///path,\n"
		   "                    brig+https://host:port): commands then go through `brig serve`\n"
		   "      --debug       Show error codes and HTTP statuses with errors\n"
		   "  -v, --version     Print brig's version and exit\n"
		   "  -h, --help        Print this help and exit\n"
		   "\n"
		   "Commands:\n");
	for (const cli_command *c = commands; c->name; c++)
		fprintf(f, "  %-12s %s\n", c->name, c->summary);
	fprintf(f, "\n"
		   "Run 'brig COMMAND --help' for a command's options.\n"
		   "Environment: DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, BRIG_IMAGE, BRIG_RUNTIME;\n"
		   "BRIG_HOST, BRIG_TOKEN (a bearer token), BRIG_CERT_PATH (ca.pem for brig+https).\n"
		   "Exit codes: the command's own; 124 deadline; 125 brig failed; 126 cannot invoke;\n"
		   "127 not found; 130 interrupted.\n");
}

static int cmd_help(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		print_usage(stdout);
		return 0;
	}
	if (argc > 1) {
		const cli_command *c = find_command(argv[1]);
		if (!c)
			return cli_fail("help: unknown command '%s' (see 'brig help')", argv[1]);
		if (c->fn == cmd_help) {
			print_usage(stdout);
			return 0;
		}
		char *hargv[] = {argv[1], (char *)"--help", NULL};
		return c->fn(2, hargv);
	}
	print_usage(stdout);
	return 0;
}

/* jansson's frees zero what they free: secret values (brig up's, the
 * server's secret_values, the proxy monitor's answers) pass through JSON
 * strings, and must not stay in freed memory for a later bug to show. */
static void wiping_free(void *p)
{
	if (p)
		explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

/* With BRIG_HOST, whether the command goes through the server: the ones
 * that do, and any command's --help (which contacts nothing). */
static bool goes_remote(const cli_command *cmd, int argc, char **argv)
{
	if (cmd->fn == cmd_exec || cmd->fn == cmd_help || cmd->fn == cmd_ls || cmd->fn == cmd_inspect ||
	    cmd->fn == cmd_pause || cmd->fn == cmd_resume || cmd->fn == cmd_stop || cmd->fn == cmd_destroy ||
	    cmd->fn == cmd_up || cmd->fn == cmd_checkpoint || cmd->fn == cmd_checkpoints || cmd->fn == cmd_recover ||
	    cmd->fn == cmd_cp || cmd->fn == cmd_fs || cmd->fn == cmd_history || cmd->fn == cmd_ps ||
	    cmd->fn == cmd_kill || cmd->fn == cmd_attach || cmd->fn == cmd_sessions || cmd->fn == cmd_create ||
	    cmd->fn == cmd_run)
		return true;
	/* of egress, all but rm (the host's own network) */
	if (cmd->fn == cmd_egress && !(argc > 1 && strcmp(argv[1], "rm") == 0))
		return true;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	enum { OPT_DEBUG = 256 };
	static const struct option longopts[] = {
		{"host", required_argument, NULL, 'H'},
		{"debug", no_argument, NULL, OPT_DEBUG},
		{"version", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	json_set_alloc_funcs(malloc, wiping_free);
	/* '+': stop at the verb, whose options belong to it. */
	int c;
	optind = 0;
	while ((c = cli_getopt("", argc, argv, "+:H:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'H':
			if (!*optarg)
				return cli_fail("-H/--host needs a Docker host (unix:///path or tcp://host:port) or a "
						"brig server (brig+unix:///path, brig+https://host:port)");
			if (strncmp(optarg, "brig+", 5) == 0) {
				setenv("BRIG_HOST", optarg, 1);
			} else { /* a Docker host: talk to it directly */
				setenv("DOCKER_HOST", optarg, 1);
				unsetenv("BRIG_HOST");
			}
			break;
		case OPT_DEBUG: cli_debug = true; break;
		case 'v': printf("brig version %s\n", BRIG_VERSION); return 0;
		case 'h': print_usage(stdout); return 0;
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind >= argc) {
		print_usage(stdout);
		return 0;
	}
	const char *verb = argv[optind];
	const cli_command *cmd = find_command(verb);
	if (!cmd)
		return cli_fail("unknown command '%s' (see 'brig help')", verb);

	/* The command sees argv[0] = its name, and parses from scratch. */
	int first = optind;
	if (cli_remote_host()) {
		if (cli_remote_check() != 0)
			return CLI_EXIT_FAIL;
		if (!goes_remote(cmd, argc - first, argv + first))
			return cli_remote_unsupported(verb);
	}
	optind = 0;
	int rc = cmd->fn(argc - first, argv + first);
	/* said to a person, once: scripts and tests reading stderr get none */
	if (brig_userns_warning_due() && isatty(STDERR_FILENO))
		fprintf(stderr, "brig: warning: the Docker daemon does not remap user namespaces, so the sandbox "
				"user is host uid 1000 (see brig doctor)\n");

	/* stdout carries results: a failed write (disk full, closed pipe) must
	 * not look like success. A reader that left (`| head`) is not an error
	 * worth a message. */
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno != EPIPE)
			return cli_fail("cannot write to stdout: %s", errno ? strerror(errno) : "write error");
	}
	return rc;
}
