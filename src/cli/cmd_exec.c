/* cmd_exec.c — `brig exec`: runs argv in a computer, streaming its output
 * live and exiting with its code; a timeout, a cancel or a broken daemon
 * connection has stopped the computer, and the message says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "util/util.h"

static const char usage[] =
	"Usage: brig exec [OPTIONS] NAME [--] CMD [ARG...]\n"
	"       brig exec [OPTIONS] --ns NS --agent A --session S [--gen N] [--] CMD [ARG...]\n"
	"\n"
	"NAME may be a unique prefix of a computer's name.\n"
	"Run CMD with its arguments (no shell: write sh -c '...' for one) in a computer,\n"
	"as its user (uid 1000). stdout and stderr stream live and apart; brig exits with\n"
	"the command's exit code. Options may come before or after NAME; the command\n"
	"starts at '--' or at the first argument after NAME that is not an option.\n"
	"\n"
	"A timeout, an interrupt (SIGINT/SIGTERM) or a broken daemon connection stops the\n"
	"computer (Docker cannot kill an exec): recover the session with `brig recover`.\n"
	"Named by --ns/--agent/--session, a session whose computer lost its files (stopped,\n"
	"killed, removed, restarted) is first restored from its latest checkpoint into a\n"
	"new generation, as `brig up` does, and brig says so on stderr.\n"
	"\n"
	"Options:\n"
	"      --timeout D         Deadline (30, 90s, 15m, 2h; default none); exit 124 when it passes\n" CLI_HELP_ENV
	"  -w, --workdir DIR       Working directory (default /workspace)\n"
	"  -i, --interactive       Pass brig's stdin to the command\n"
	"  -d, --detach            Start it in the background and print its id (brig ps, attach, kill)\n"
	"  -t, --tty               Give the command a terminal (with -i: yours, in raw mode)\n"
	"      --json              Capture stdout and print the result as JSON at the end\n"
	"                          (stderr still streams live)\n" CLI_HELP_EVERY CLI_HELP_TARGET
	"                          A session the store does not know names its generation 1; the\n"
	"                          command is audited in the store and a timeout marks the session failed\n"
	"  -h, --help              Print this help\n"
	"\n"
	"Exit codes: the command's; 124 timed out; 125 brig failed; 126 cannot invoke;\n"
	"127 not found; 130 interrupted.\n";

enum { OPT_TIMEOUT = CLI_OPT_TARGET_END, OPT_JSON, OPT_EVERY };

static const struct option longopts[] = {
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"env", required_argument, NULL, 'e'},
	{"env-file", required_argument, NULL, CLI_OPT_ENV_FILE},
	{"workdir", required_argument, NULL, 'w'},
	{"interactive", no_argument, NULL, 'i'},
	{"detach", no_argument, NULL, 'd'},
	{"tty", no_argument, NULL, 't'},
	{"json", no_argument, NULL, OPT_JSON},
	{"checkpoint-every", required_argument, NULL, OPT_EVERY},
	CLI_TARGET_LONGOPTS,
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

typedef struct exec_args {
	int64_t timeout_ms;
	int64_t every_ms;
	cli_strv env;
	cli_strv env_file; /* owns the --env-file entries env borrows */
	const char *workdir;
	bool interactive, json, help, detach, tty;
	cli_target t;
} exec_args;

/* One pass of option parsing; exec runs two (before and after NAME).
 * Returns 0, or CLI_EXIT_FAIL after a usage message. */
static int parse_pass(exec_args *a, int argc, char **argv, bool *dashdash)
{
	int opt, rc = 0;
	optind = 0;
	*dashdash = false;
	while ((opt = cli_getopt("exec", argc, argv, "+:he:w:idt", longopts, dashdash)) != -1) {
		if (cli_target_opt(&a->t, opt, optarg, &rc)) {
			if (rc)
				return rc;
			continue;
		}
		switch (opt) {
		case OPT_TIMEOUT:
			if (cli_parse_duration_ms("--timeout", optarg, 0, 366LL * 86400 * 1000, &a->timeout_ms) != 0)
				return CLI_EXIT_FAIL;
			break;
		case 'e': cli_strv_add(&a->env, optarg); break;
		case CLI_OPT_ENV_FILE: {
			size_t from = a->env_file.count;
			if (cli_env_file_read(&a->env_file, optarg) != 0)
				return CLI_EXIT_FAIL;
			for (size_t i = from; i < a->env_file.count; i++)
				cli_strv_add(&a->env, a->env_file.v[i]);
			break;
		}
		case OPT_EVERY:
			if (cli_parse_duration_ms("--checkpoint-every", optarg, 1000, 366LL * 86400 * 1000,
						  &a->every_ms) != 0)
				return CLI_EXIT_FAIL;
			break;
		case 'w': a->workdir = optarg; break;
		case 'i': a->interactive = true; break;
		case 'd': a->detach = true; break;
		case 't': a->tty = true; break;
		case OPT_JSON: a->json = true; break;
		case 'h': a->help = true; return 0;
		default: return CLI_EXIT_FAIL;
		}
	}
	return 0;
}

/* After *ref was not found (*err says so): the computer a unique prefix
 * names replaces *ref and *err is cleared (0); 1 leaves both; CLI_EXIT_FAIL
 * when ambiguous (printed; *err freed). */
static int retry_prefix(brig_engine *e, char **ref, brig_error **err)
{
	char *full = NULL;
	int p = cli_name_prefix(e, *ref, &full);
	if (p == 1)
		return 1;
	brig_error_free(*err);
	*err = NULL;
	if (p == 0) {
		free(*ref);
		*ref = full;
	}
	return p;
}

/* A session named by identity whose computer lost its files is restored
 * (as brig up does) before the command runs in it: *ref then names the new
 * generation. Returns 0 or CLI_EXIT_FAIL (message printed). */
static int restore_if_lost(brig_engine *e, brig_store *s, const brig_identity *id, char **ref)
{
	brig_store_session *r = NULL;
	brig_error *err = NULL;
	int g = brig_store_session_get(s, &r, id->ns, id->agent, id->session, &err);
	if (g == BRIG_ENOTFOUND) { /* not the store's: named as before */
		brig_error_free(err);
		return 0;
	}
	if (g)
		return cli_error(err, NULL);
	/* failed: brig_session_open says so, with the recover to run */
	bool lost = r->state == BRIG_STORE_DESTROYED || r->state == BRIG_STORE_STOPPED ||
		    r->state == BRIG_STORE_FAILED;
	if (!lost && (r->state == BRIG_STORE_RUNNING || r->state == BRIG_STORE_PAUSED) && r->container_name) {
		cleanup_free char *why = NULL;
		if (brig_computer_check_files(e, r->container_name, &lost, &why, &err) != 0) {
			brig_store_session_free(r);
			return cli_error(err, NULL);
		}
	}
	brig_store_session_free(r);
	if (!lost)
		return 0;
	brig_identity base = {id->ns, id->agent, id->session, 1};
	brig_up_result ur;
	if (brig_session_open(e, s, &ur, &base, NULL, NULL, &err) != 0)
		return cli_error(err, NULL);
	cli_up_report(&ur);
	free(*ref);
	*ref = xstrdup(ur.computer->name);
	brig_up_result_clear(&ur);
	return 0;
}

/* ---- through a brig server (BRIG_HOST) ---- */

typedef struct remote_exec {
	cli_output out;
	json_t *result; /* the "exit" line */
	json_t *error;  /* the "error" line */
} remote_exec;

static int remote_line(json_t *l, void *payload)
{
	remote_exec *x = payload;
	const char *type = json_string_value(json_object_get(l, "type"));
	if (!type)
		return 0;
	json_t *d = json_object_get(l, "data");
	if (strcmp(type, "stdout") == 0 && json_is_string(d))
		cli_output_cb(BRIG_STREAM_STDOUT, json_string_value(d), json_string_length(d), &x->out);
	else if (strcmp(type, "stderr") == 0 && json_is_string(d))
		cli_output_cb(BRIG_STREAM_STDERR, json_string_value(d), json_string_length(d), &x->out);
	else if (strcmp(type, "exit") == 0 && !x->result)
		x->result = json_incref(l);
	else if (strcmp(type, "error") == 0 && !x->error)
		x->error = json_incref(l);
	return 0;
}

/* The library's code of an API error code, for the words of cli_exec_end. */
static int remote_code(const char *code)
{
	if (!code)
		return BRIG_EIO;
	if (strcmp(code, "timed_out") == 0)
		return BRIG_ETIMEDOUT;
	if (strcmp(code, "canceled") == 0)
		return BRIG_ECANCELED;
	if (strcmp(code, "uncertain") == 0)
		return BRIG_EUNCERTAIN;
	if (strcmp(code, "not_found") == 0)
		return BRIG_ENOTFOUND;
	if (strcmp(code, "state") == 0)
		return BRIG_ESTATE;
	return BRIG_EIO;
}

static int exec_remote(const exec_args *a, const char *name, char **cmd_argv)
{
	if (a->every_ms)
		return cli_remote_unsupported("exec --checkpoint-every");
	if (a->t.store)
		return cli_usage("exec", "--store names a local store; through a brig server its own store is used");
	if (a->t.id.generation)
		return cli_usage("exec", "--gen does not go through a brig server: it runs in the current generation");
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	int rc = CLI_EXIT_FAIL;
	cleanup_free char *ns = NULL, *agent = NULL, *session = NULL, *path = NULL, *computer = NULL;
	remote_exec x = {.out = {.stdout_live = !a->json, .stderr_live = true}};
	brig_exec_result res;
	memset(&res, 0, sizeof res);
	if (a->t.id_given) {
		ns = xstrdup(a->t.id.ns);
		agent = xstrdup(a->t.id.agent);
		session = xstrdup(a->t.id.session);
	} else if (cli_remote_identity(r, name, &ns, &agent, &session) != 0)
		goto out;
	json_t *argv = json_array();
	for (char **p = cmd_argv; *p; p++)
		json_array_append_new(argv, json_string(*p));
	json_t *env = json_array();
	for (size_t i = 0; i < a->env.count; i++) {
		/* checked here as the direct path checks them: the same words */
		brig_error *verr = NULL;
		if (brig_env_validate(a->env.v[i], &verr) != 0) {
			json_decref(argv);
			json_decref(env);
			rc = cli_error(verr, NULL);
			goto out;
		}
		json_array_append_new(env, json_string(a->env.v[i]));
	}
	json_t *body = json_pack("{s:o, s:o}", "argv", argv, "env", env);
	if (a->workdir)
		json_object_set_new(body, "workdir", json_string(a->workdir));
	if (a->timeout_ms && !a->detach) /* as direct: -d has no deadline */
		json_object_set_new(body, "timeout_ms", json_integer(a->timeout_ms));
	if (a->detach) {
		/* brig-init's own background command, its integer id (native) */
		json_t *j = NULL;
		brig_error *err = NULL;
		path = cli_remote_path(ns, agent, session, "/processes?native=true");
		rc = cli_remote_native(r, "POST", path, body, &j, &err);
		json_decref(body);
		if (!rc && !json_is_integer(json_object_get(j, "id")))
			rc = brig__error_set(&err, BRIG_EPROTO, 0, "the brig server's answer has no command id");
		if (rc) {
			rc = cli_error(err, NULL);
		} else {
			printf("%lld\n", (long long)json_integer_value(json_object_get(j, "id")));
			rc = fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
		}
		json_decref(j);
		goto out;
	}
	if (a->interactive || a->tty) {
		/* stdin and terminals: the upgraded stream; its end frame is the
		 * stream's last line */
		json_t *end = NULL;
		path = cli_remote_path(ns, agent, session, "/exec/attach");
		rc = cli_remote_attach(r, path, body, a->interactive, a->tty, cli_cancel_install(), cli_output_cb,
				       &x.out, &end);
		if (end)
			remote_line(end, &x);
		json_decref(end);
	} else {
		path = cli_remote_path(ns, agent, session, "/exec?stream=true");
		rc = cli_remote_stream(r, "POST", path, body, cli_cancel_install(), remote_line, &x);
	}
	json_decref(body);
	if (rc == CLI_EXIT_CANCELED) {
		cli_note("exec interrupted; the brig server was told to end the command (brig-init ends it and "
			 "everything it started; without brig-init the server stops the computer)");
		goto out;
	}
	if (rc != 0)
		goto out;
	int code = 0;
	brig_error *err = NULL;
	if (x.result) {
		res.exit_code = (int)json_integer_value(json_object_get(x.result, "exit_code"));
		res.timed_out = json_is_true(json_object_get(x.result, "timed_out"));
		res.canceled = json_is_true(json_object_get(x.result, "canceled"));
		res.uncertain = json_is_true(json_object_get(x.result, "uncertain"));
		res.container_stopped = json_is_true(json_object_get(x.result, "container_stopped"));
		code = res.timed_out ? BRIG_ETIMEDOUT : res.canceled ? BRIG_ECANCELED : 0;
	} else if (x.error) {
		code = remote_code(json_string_value(json_object_get(x.error, "code")));
		const char *m = json_string_value(json_object_get(x.error, "message"));
		brig__error_set(&err, code, 0, "%s", m ? m : "the brig server gave no message");
		/* Only a stopped computer makes these an error rather than a result. */
		res.container_stopped = code == BRIG_ETIMEDOUT || code == BRIG_ECANCELED;
		res.uncertain = code == BRIG_EUNCERTAIN;
	} else {
		rc = cli_fail("the brig server's answer ended before the command's end was known");
		goto out;
	}
	if (code == BRIG_ETIMEDOUT || code == BRIG_ECANCELED || code == BRIG_EUNCERTAIN) {
		/* the notes name the computer as the direct path does */
		json_t *c = NULL;
		cleanup_free char *cp = cli_remote_path(ns, agent, session, NULL);
		if (!a->t.id_given)
			computer = xstrdup(name);
		else if (cli_remote_call(r, "GET", cp, NULL, &c) == 0 && json_string_value(json_object_get(c, "name")))
			computer = xstrdup(json_string_value(json_object_get(c, "name")));
		json_decref(c);
	}
	char recover[512];
	if (a->t.id_given)
		snprintf(recover, sizeof recover, "brig recover --ns %s --agent %s --session %s", ns, agent, session);
	else
		snprintf(recover, sizeof recover, "brig recover");
	cli_exec_words w = {.label = "exec",
			    .noun = "the command",
			    .computer = computer ? computer
					: name   ? name
						 : session,
			    .recover = recover,
			    .timeout_ms = a->timeout_ms};
	rc = cli_exec_end(code, &res, err, &w);
	if (a->json && x.result) {
		json_object_del(x.result, "type");
		int jr = cli_print_json(json_incref(x.result));
		if (jr != 0 && rc == 0)
			rc = jr;
	}
out:
	json_decref(x.result);
	json_decref(x.error);
	cli_remote_free(r);
	return rc;
}

int cmd_exec(int argc, char **argv)
{
	exec_args a = {0};
	bool dashdash = false;
	const char *ref = NULL;
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
	if (!a.help && !dashdash && !a.t.id_given && next < argc) {
		/* argv[next] is NAME; options may follow it, before the command. */
		ref = argv[next];
		char **rest = argv + next;
		int rest_argc = argc - next;
		bool had_id = a.t.id_given;
		if (parse_pass(&a, rest_argc, rest, &dashdash) != 0)
			goto out;
		if (a.t.id_given && !had_id) {
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
	if (!ref && !a.t.id_given) {
		cli_usage("exec", "NAME (or --ns/--agent/--session) is required");
		goto out;
	}
	if (next >= argc) {
		cli_usage("exec", "a command is required (brig exec NAME -- CMD [ARG...])");
		goto out;
	}
	if (a.every_ms && a.detach) {
		cli_usage("exec", "--checkpoint-every needs the command in the foreground (not -d)");
		goto out;
	}
	if (cli_remote_host()) {
		rc = exec_remote(&a, ref, cmd_argv);
		goto out;
	}
	if (cli_target_name(&resolved, "exec", &a.t, ref, NULL, true) != 0)
		goto out;
	ref = resolved;
	if (cli_store_open(&store, a.t.store) != 0)
		goto out;

	if (cli_engine_open(&e) != 0)
		goto out;
	if (a.t.id_given && !a.t.id.generation && restore_if_lost(e, store, &a.t.id, &resolved) != 0)
		goto out;
	ref = resolved;

	if (a.detach) {
		brig_exec_opts dopts = {.version = BRIG_EXEC_OPTS_VERSION,
					.argv = (const char *const *)cmd_argv,
					.env = a.env.v,
					.env_count = a.env.count,
					.workdir = a.workdir,
					.stdin_fd = -1,
					.cancel_fd = -1};
		int64_t proc = 0;
		int sr = brig_computer_start(e, ref, &dopts, &proc, &err);
		if (sr == BRIG_ENOTFOUND && !a.t.id_given) {
			int p = retry_prefix(e, &resolved, &err);
			if (p == CLI_EXIT_FAIL) {
				rc = p;
				goto out;
			}
			if (p == 0) {
				ref = resolved;
				sr = brig_computer_start(e, ref, &dopts, &proc, &err);
			}
		}
		if (sr != 0) {
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
	int r;
	for (int attempt = 0;; attempt++) {
		cli_every *every = cli_every_start(e, store, ref, a.every_ms);
		/* Audited in the store; a timeout, cancel or uncertain end marks
		 * the session failed there. */
		r = a.tty ? cli_exec_tty(e, store, ref, &opts, &res, &err)
			  : brig_session_exec_keep(e, store, ref, &opts, NULL, &res, &err);
		cli_every_stop(every);
		/* Not found (nothing ran): NAME may be a prefix of one computer's. */
		if (r != BRIG_ENOTFOUND || attempt || a.t.id_given)
			break;
		int p = retry_prefix(e, &resolved, &err);
		if (p == CLI_EXIT_FAIL) {
			rc = p;
			goto out;
		}
		if (p != 0)
			break;
		ref = resolved;
		brig_exec_result_clear(&res);
	}
	bool started = r == 0 || r == BRIG_ETIMEDOUT || r == BRIG_ECANCELED || r == BRIG_EUNCERTAIN;
	char recover[512];
	if (a.t.id_given)
		snprintf(recover, sizeof recover, "brig recover --ns %s --agent %s --session %s", a.t.id.ns,
			 a.t.id.agent, a.t.id.session);
	else
		snprintf(recover, sizeof recover, "brig recover");
	cli_exec_words w = {.label = "exec",
			    .noun = "the command",
			    .computer = ref,
			    .recover = recover,
			    .timeout_ms = a.timeout_ms};
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
	cli_strv_free_all(&a.env_file);
	return rc;
}
