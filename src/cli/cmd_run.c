/* cmd_run.c — `brig run`: one command in one fresh hardened container with
 * a deadline, inputs copied in read-only, outputs copied out, and nothing
 * left behind. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "brig/run.h"
#include "cli/cli.h"
#include "egress/egress_internal.h"
#include "sandbox/internal.h"
#include "sandbox/outdir.h"
#include "serve/serve.h"
#include "tar/tar.h"

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
	"      --ns NS             Through a brig server (BRIG_HOST): the namespace the run\n"
	"                          belongs to (required there; the token must cover it); direct\n"
	"                          to Docker it is accepted and unused, so one script runs both ways\n"
	"  -h, --help              Print this help\n"
	"\n"
	"Exit codes: the command's; 124 timed out; 125 brig failed; 126 cannot invoke;\n"
	"127 not found; 130 interrupted.\n";

/* What a run came to, direct or through a brig server, said the same way:
 * the notes, the exit code, and with --json the result (taken; NULL: none). */
typedef struct run_end {
	int r;           /* brig_run's answer (or the server's, as a code) */
	brig_error *err; /* taken */
	bool have_result, timed_out, oom_killed;
	int exit_code;
	json_t *result;
} run_end;

static int run_finish(run_end *x, bool json, int64_t timeout_ms, int64_t memory_mb)
{
	int rc;
	if (x->r == 0 && x->timed_out) {
		char secs[32];
		cli_format_secs(secs, sizeof secs, timeout_ms);
		cli_note("run timed out after %s; its processes were ended", secs);
		rc = CLI_EXIT_TIMEOUT;
	} else if (x->r == BRIG_ECANCELED || (x->r != 0 && cli_canceled())) {
		if (cli_debug && x->err)
			cli_error(x->err, NULL);
		else
			brig_error_free(x->err);
		x->err = NULL;
		cli_note("run interrupted; its container was removed");
		rc = CLI_EXIT_CANCELED;
	} else if (x->r != 0) {
		rc = cli_error(x->err, NULL);
		x->err = NULL;
	} else if (x->exit_code < 0 || x->exit_code > 255) {
		rc = cli_fail("the command ended but its exit code is unknown");
	} else {
		rc = x->exit_code;
	}
	if (x->have_result && x->oom_killed)
		cli_note("the command ran out of memory and was killed (memory limit %lld MB; raise it with "
			 "--memory-mb)",
			 (long long)memory_mb);
	if (json && x->have_result && x->result) {
		int jr = cli_print_json(x->result);
		x->result = NULL;
		if (jr != 0 && rc == 0)
			rc = jr;
	}
	json_decref(x->result);
	brig_error_free(x->err);
	return rc;
}

/* The outputs tar from the server, extracted as brig_run extracts /outbox:
 * into a fresh directory beside --out, committed only when whole. */
typedef struct run_outputs {
	char *tmp;
	brig_tar_extract *x;
} run_outputs;

/* brig run through a brig server: POST /v1/runs/attach, the inputs tar
 * first, the outputs tar at the end, and the same notes and exit code. */
static int run_remote(const char *ns, const brig_spec *spec, bool image_given, const brig_run_opts *o,
		      const cli_strv *inputs, bool json, int64_t timeout_ms)
{
	if (!ns)
		return cli_usage("run", "--ns NS is required through a brig server: the namespace the run belongs "
					"to (the token must cover it)");
	run_end x = {.exit_code = -1};
	brig_error *err = NULL;
	/* the inputs checked and a secret's value read here, before anything
	 * is sent, as a direct run does before anything is made */
	brig_tar_builder *in = NULL;
	if (inputs->count && brig_sandbox__inputs_tar(&in, (const char *const *)inputs->v, inputs->count, &err) != 0)
		return cli_error(err, NULL);
	if (spec->secret_count && brig_egress__secrets_check(spec, &err) != 0) {
		brig_tar_builder_free(in);
		return cli_error(err, NULL);
	}
	json_t *argv = json_array();
	for (const char *const *a = o->argv; *a; a++)
		json_array_append_new(argv, json_string(*a));
	json_t *body = json_pack("{s:s,s:o,s:o,s:I,s:b,s:b}", "ns", ns, "spec",
				 brig_spec_to_json(spec, BRIG_SPEC_JSON_ENV_VALUES), "argv", argv, "timeout_s",
				 (json_int_t)o->timeout_s, "outputs", o->out_dir != NULL, "stdin", o->stdin_fd >= 0);
	const char *env_image = getenv("BRIG_IMAGE");
	if (!image_given && !(env_image && *env_image)) /* the server's default (brig serve --image), as up's */
		json_object_del(json_object_get(body, "spec"), "image");
	if (o->out_mb)
		json_object_set_new(body, "out_mb", json_integer(o->out_mb));
	if (o->workdir)
		json_object_set_new(body, "workdir", json_string(o->workdir));
	json_t *values = json_object();
	for (size_t i = 0; i < spec->secret_count; i++)
		cli_remote_secret_add(values, spec->secrets[i]);
	if (json_object_size(values))
		json_object_set(body, "secret_values", values);
	json_decref(values);

	run_outputs ro = {0};
	int rc = 0;
	if (o->out_dir) {
		brig_tar_extract_opts xo = BRIG_TAR_EXTRACT_OPTS_INIT;
		xo.allow_symlinks = true;
		xo.allow_hardlinks = true;
		xo.limits.max_total_bytes = (uint64_t)(o->out_mb ? o->out_mb : BRIG_DEFAULT_OUT_MB) << 20;
		xo.limits.max_entries = 100000;
		if (brig_sandbox__outdir_begin(&ro.tmp, o->out_dir, &err) != 0 ||
		    brig_tar_extract_new(&ro.x, AT_FDCWD, ro.tmp, &xo, &err) != 0) {
			brig__error_prefix(&err, err->code, "copy outputs to %s", o->out_dir);
			rc = cli_error(err, NULL);
			goto out;
		}
	}
	cli_remote *r = NULL;
	if ((rc = cli_remote_open(&r)) != 0)
		goto out;
	json_t *end = NULL;
	rc = cli_remote_run(r, body, o->stdin_fd >= 0, o->cancel_fd, in ? brig_tar_builder_reader : NULL, in,
			    ro.x ? brig_tar_extract_data_cb : NULL, ro.x, o->on_output, o->payload, &end);
	cli_remote_free(r);
	if (rc == CLI_EXIT_CANCELED) {
		x.r = BRIG_ECANCELED;
		rc = run_finish(&x, json, timeout_ms, spec->memory_mb);
		goto out;
	}
	if (rc)
		goto out;
	const char *type = json_string_value(json_object_get(end, "type"));
	if (type && strcmp(type, "exit") == 0) {
		x.result = end;
		x.have_result = true;
		json_object_del(end, "type");
	} else {
		const char *m = json_string_value(json_object_get(end, "message"));
		int code = serve__code_of(json_string_value(json_object_get(end, "code")));
		/* the server's copy-out names its own directory: the user's is --out */
		static const char co[] = "copy outputs to ";
		const char *rest = m && o->out_dir && strncmp(m, co, sizeof co - 1) == 0 ? strstr(m, ": ") : NULL;
		if (rest)
			x.r = brig__error_set(&x.err, code ? code : BRIG_EDAEMON, 0, "%s%s%s", co, o->out_dir, rest);
		else
			x.r = brig__error_set(&x.err, code ? code : BRIG_EDAEMON, 0, "%s",
					      m ? m : "the brig server's run failed without saying why");
		x.result = json_incref(json_object_get(end, "result"));
		x.have_result = x.result != NULL;
		json_decref(end);
	}
	x.timed_out = json_is_true(json_object_get(x.result, "timed_out"));
	x.oom_killed = json_is_true(json_object_get(x.result, "oom_killed"));
	json_t *ec = json_object_get(x.result, "exit_code");
	x.exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
	if (ro.x && x.r == 0) {
		/* the server's tar checked here as brig_run checks /outbox */
		int frc = brig_tar_extract_finish(ro.x, &err);
		if (frc == 0)
			frc = brig_sandbox__outdir_commit(ro.tmp, o->out_dir, &err);
		if (frc) {
			x.r = brig__error_prefix(&err, frc, "copy outputs to %s", o->out_dir);
			x.err = err;
			err = NULL;
		}
		free(ro.tmp);
		ro.tmp = NULL;
	}
	rc = run_finish(&x, json, timeout_ms, spec->memory_mb);
out:
	if (ro.tmp)
		brig_sandbox__outdir_abandon(ro.tmp);
	free(ro.tmp);
	brig_tar_extract_free(ro.x);
	brig_tar_builder_free(in);
	json_decref(body); /* env and secret values: jansson frees (and wipes) them; never printed */
	return rc;
}

int cmd_run(int argc, char **argv)
{
	enum { OPT_TIMEOUT = CLI_OPT_SPEC_END, OPT_IN, OPT_OUT, OPT_OUT_MB, OPT_JSON, OPT_NS };
	static const struct option longopts[] = {
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"in", required_argument, NULL, OPT_IN},
		{"out", required_argument, NULL, OPT_OUT},
		{"out-mb", required_argument, NULL, OPT_OUT_MB},
		{"workdir", required_argument, NULL, 'w'},
		{"interactive", no_argument, NULL, 'i'},
		{"json", no_argument, NULL, OPT_JSON},
		{"ns", required_argument, NULL, OPT_NS},
		{"help", no_argument, NULL, 'h'},
		CLI_SPEC_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	brig_spec spec;
	brig_spec_init(&spec);
	cli_strv inputs = {0};
	brig_run_opts opts = {.version = BRIG_RUN_OPTS_VERSION, .stdin_fd = -1, .cancel_fd = -1};
	bool json = false, image_given = false;
	const char *ns = NULL;
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
		case OPT_NS: ns = optarg; break;
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
	bool remote = cli_remote_host() != NULL;
	if (!remote && cli_engine_open(&e) != 0)
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
	if (remote) {
		rc = run_remote(ns, &spec, image_given, &opts, &inputs, json, timeout_ms);
		goto out;
	}

	int r = brig_run(e, &opts, &res, &err);
	run_end x = {.r = r,
		     .err = err,
		     .have_result = r == 0 || r == BRIG_ECANCELED || r == BRIG_EUNCERTAIN || r == BRIG_EUNSAFE,
		     .timed_out = res.exec.timed_out,
		     .oom_killed = res.oom_killed,
		     .exit_code = res.exec.exit_code};
	err = NULL;
	if (json && x.have_result)
		x.result = brig_run_result_to_json(&res);
	rc = run_finish(&x, json, timeout_ms, spec.memory_mb);
out:
	brig_error_free(err);
	brig_run_result_clear(&res);
	brig_engine_free(e);
	cli_strv_free(&inputs);
	brig_spec_clear(&spec);
	return rc;
}
