/* cmd_run.c — `brig run`: one command in one fresh hardened container with
 * a deadline, inputs copied in read-only, outputs copied out, and nothing
 * left behind. */
#include <stdio.h>
#include <string.h>

#include "brig/run.h"
#include "cli/cli.h"

static const char usage[] =
	"Usage: brig run [OPTIONS] [--] CMD [ARG...]\n"
	"\n"
	"Run CMD (no shell: write sh -c '...' for one) in a fresh container with the\n"
	"hardened defaults, under a deadline, and remove it afterwards. stdout and stderr\n"
	"stream live and apart; brig exits with the command's exit code.\n"
	"\n"
	"Options:\n"
	"      --image IMG         Image tag or sha256:id, resolved once and pinned\n"
	"                          (default $BRIG_IMAGE, then " BRIG_DEFAULT_IMAGE "); never pulled\n"
	"      --timeout D         Deadline (30, 90s, 15m, 2h; default 600s); exit 124 when it passes\n"
	"      --cpus C            CPUs (default 2.0)\n"
	"      --memory-mb M       Memory in MB, no swap (default 2048)\n"
	"      --pids P            Process limit (default 256)\n"
	"      --workspace-mb W    Size of /workspace (default 512)\n"
	"      --runtime-mb R      Size of /runtime, which holds HOME (default 256)\n"
	"      --network MODE      none (default), isolated (the brig-sandbox bridge) or egress\n"
	"                          (only the hosts --allow names, through brig's proxy)\n"
	"      --allow RULE[,RULE] egress: host, *.domain, optionally :PORT (default 443 and 80)\n"
	"      --secret NAME@HOST[,HOST]  egress: NAME holds a placeholder inside; brig's proxy puts\n"
	"                          NAME's value (from brig's environment) into requests to HOST\n"
	"      --subnet CIDR       Subnet of the isolated bridge (default " BRIG_DEFAULT_SUBNET ")\n"
	"      --harness H         claude, codex or none (default): which model credential\n"
	"                          is forwarded from brig's environment\n"
	"      --in PATH           Copy a file or directory under /inbox, read-only; repeatable\n"
	"      --out DIR           Copy what the command leaves in /outbox into DIR\n"
	"      --out-mb N          Size of /outbox (default 256)\n" CLI_HELP_ENV
	"  -w, --workdir DIR       Working directory (default /workspace)\n"
	"  -i, --interactive       Pass brig's stdin to the command\n"
	"      --label KEY=VALUE   Extra label on the container; repeatable\n" CLI_HELP_RUNTIME
	"      --json              Capture stdout and print the result as JSON at the end\n"
	"                          (stderr still streams live)\n"
	"  -h, --help              Print this help\n"
	"\n"
	"Exit codes: the command's; 124 timed out; 125 brig failed; 126 cannot invoke;\n"
	"127 not found; 130 interrupted.\n";

int cmd_run(int argc, char **argv)
{
	enum { OPT_TIMEOUT = CLI_OPT_SPEC_END, OPT_IN, OPT_OUT, OPT_OUT_MB, OPT_JSON };
	static const struct option longopts[] = {
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"in", required_argument, NULL, OPT_IN},
		{"out", required_argument, NULL, OPT_OUT},
		{"out-mb", required_argument, NULL, OPT_OUT_MB},
		{"workdir", required_argument, NULL, 'w'},
		{"interactive", no_argument, NULL, 'i'},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		CLI_SPEC_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	brig_spec spec;
	brig_spec_init(&spec);
	cli_strv inputs = {0};
	brig_run_opts opts = {.version = BRIG_RUN_OPTS_VERSION, .stdin_fd = -1, .cancel_fd = -1};
	bool json = false, image_given = false;
	int64_t timeout_ms = (int64_t)BRIG_RUN_DEFAULT_TIMEOUT_S * 1000;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	brig_run_result res;
	memset(&res, 0, sizeof res);
	int rc = CLI_EXIT_FAIL, opt;

	while ((opt = cli_getopt("run", argc, argv, "+:he:w:i", longopts, NULL)) != -1) {
		const char *key = cli_spec_key(opt);
		if (key) {
			if (opt == CLI_OPT_IMAGE)
				image_given = true;
			if (cli_spec_set(&spec, key, optarg) != 0)
				goto out;
			continue;
		}
		switch (opt) {
		case OPT_TIMEOUT:
			/* Whole seconds: the container's own lifetime is set in seconds. */
			if (cli_parse_duration_ms("--timeout", optarg, 1000, 31536000LL * 1000, &timeout_ms) != 0)
				goto out;
			timeout_ms = (timeout_ms + 999) / 1000 * 1000;
			break;
		case OPT_IN: cli_strv_add(&inputs, optarg); break;
		case OPT_OUT: opts.out_dir = optarg; break;
		case OPT_OUT_MB:
			if (cli_parse_i64("--out-mb", optarg, 1, 1 << 20, &opts.out_mb) != 0)
				goto out;
			break;
		case 'w': opts.workdir = optarg; break;
		case 'i': opts.stdin_fd = 0; break;
		case OPT_JSON: json = true; break;
		case 'h': rc = cli_help(usage); goto out;
		default: goto out;
		}
	}
	if (optind >= argc) {
		cli_usage("run", "a command is required (brig run [OPTIONS] -- CMD [ARG...])");
		goto out;
	}
	if (cli_spec_finish(&spec, image_given) != 0)
		goto out;
	if (cli_engine_open(&e) != 0)
		goto out;

	cli_output live = {.stdout_live = !json, .stderr_live = true};
	opts.spec = &spec;
	opts.argv = (const char *const *)(argv + optind);
	opts.inputs = inputs.v;
	opts.input_count = inputs.count;
	opts.timeout_s = timeout_ms / 1000;
	opts.cancel_fd = cli_cancel_install();
	opts.on_output = cli_output_cb;
	opts.payload = &live;

	int r = brig_run(e, &opts, &res, &err);
	bool have_result = r == 0 || r == BRIG_ECANCELED || r == BRIG_EUNCERTAIN || r == BRIG_EUNSAFE;
	if (r == 0 && res.exec.timed_out) {
		char secs[32];
		cli_format_secs(secs, sizeof secs, timeout_ms);
		cli_note("run timed out after %s; its processes were ended", secs);
		rc = CLI_EXIT_TIMEOUT;
	} else if (r == BRIG_ECANCELED || (r != 0 && cli_canceled())) {
		if (cli_debug)
			cli_error(err, NULL);
		else
			brig_error_free(err);
		err = NULL;
		cli_note("run interrupted; its container was removed");
		rc = CLI_EXIT_CANCELED;
	} else if (r != 0) {
		rc = cli_error(err, NULL);
		err = NULL;
	} else if (res.exec.exit_code < 0 || res.exec.exit_code > 255) {
		rc = cli_fail("the command ended but its exit code is unknown");
	} else {
		rc = res.exec.exit_code;
	}
	if (have_result && res.oom_killed)
		cli_note("the command ran out of memory and was killed (memory limit %lld MB; raise it with "
			 "--memory-mb)",
			 (long long)spec.memory_mb);
	if (json && have_result) {
		int jr = cli_print_json(brig_run_result_to_json(&res));
		if (jr != 0 && rc == 0)
			rc = jr;
	}
out:
	brig_error_free(err);
	brig_run_result_clear(&res);
	brig_engine_free(e);
	cli_strv_free(&inputs);
	brig_spec_clear(&spec);
	return rc;
}
