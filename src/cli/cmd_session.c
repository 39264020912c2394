/* cmd_session.c — the session commands, which go through the session store:
 * `brig up`, `brig checkpoint` (and `checkpoint rm`), `brig checkpoints`
 * and `brig recover`; plus the store and session-name helpers that exec,
 * pause and resume share. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "egress/egress_internal.h"
#include "util/util.h"

/* The session flags come from cli.h; these are the session commands' own. */
enum {
	OPT_JSON = CLI_OPT_TARGET_END,
	OPT_KEEP,
	OPT_FRESH,
	OPT_CHECKPOINT,
};

#define SESSION_LONGOPTS                                             \
	CLI_SESSION_LONGOPTS, {"json", no_argument, NULL, OPT_JSON}, \
	{                                                            \
		"help", no_argument, NULL, 'h'                       \
	}

typedef struct session_args {
	cli_target t;
	bool json;
	int rc; /* CLI_EXIT_FAIL after a bad --gen */
} session_args;

/* Handles a session option; returns true when opt was one. */
static bool session_opt(session_args *a, int opt, const char *arg)
{
	if (opt == OPT_JSON) {
		a->json = true;
		return true;
	}
	return cli_target_opt(&a->t, opt, arg, &a->rc) != 0;
}

/* blob is NULL only in a record from a brig server that did not give it. */
static json_t *checkpoint_json(const brig_store_checkpoint *cp)
{
	return json_pack("{s:I,s:s,s:s,s:s,s:I,s:s,s:s?,s:I,s:I,s:I}", "id", (json_int_t)cp->id, "ns", cp->ns, "agent",
			 cp->agent, "session", cp->session, "generation", (json_int_t)cp->generation, "digest",
			 cp->digest, "blob", cp->blob, "bytes_raw", (json_int_t)cp->bytes_raw, "bytes_stored",
			 (json_int_t)cp->bytes_stored, "created_ms", (json_int_t)cp->created_ms);
}

static void format_bytes(char *out, size_t n, int64_t b)
{
	if (b >= (int64_t)1 << 30)
		snprintf(out, n, "%.1f GiB", (double)b / (1 << 30));
	else if (b >= (int64_t)1 << 20)
		snprintf(out, n, "%.1f MiB", (double)b / (1 << 20));
	else if (b >= 1024)
		snprintf(out, n, "%.1f KiB", (double)b / 1024);
	else
		snprintf(out, n, "%lld B", (long long)b);
}

/* ---- brig up ---- */

static const char up_usage[] =
	"Usage: brig up --ns NS --agent A --session S [OPTIONS]\n"
	"\n"
	"Create a session (generation 1) or adopt its current generation, make sure its\n"
	"computer exists and runs, and print the computer's name. The session is\n"
	"recorded in the store with its spec; later `brig up` calls without spec flags\n"
	"reuse the recorded spec. A failed session is refused: run `brig recover`.\n"
	"\n"
	"A computer that lost its files (removed, stopped by brig stop or docker kill, or\n"
	"restarted: each empties /workspace and /runtime) is never handed back as it is:\n"
	"the session moves to a new generation restored from its latest checkpoint, and\n"
	"brig says so on stderr. With no checkpoint, up refuses unless --fresh.\n"
	"\n"
	"Identity and store:\n" CLI_HELP_SESSION "\n"
	"Spec (for a new session; defaults are the hardened ones, as for `brig create`):\n"
	"      --image IMG         Image (default $BRIG_IMAGE, then " BRIG_DEFAULT_IMAGE ")\n"
	"      --cpus C, --memory-mb M, --pids P, --workspace-mb W, --runtime-mb R\n"
	"      --network none|isolated, --subnet CIDR, --harness claude|codex|none\n" CLI_HELP_ENV CLI_HELP_PUBLISH
	"      --label KEY=VALUE   Extra label; repeatable\n" CLI_HELP_RUNTIME "\n"
	"      --fresh             When the computer lost its files and there is no checkpoint,\n"
	"                          go on in a new, empty generation\n"
	"      --json              Print the computer as JSON\n"
	"  -h, --help              Print this help\n";

int cli_remote_spec_put(json_t *body, const brig_spec *spec, bool image_given, const brig_identity *id)
{
	json_t *js = brig_spec_to_json(spec, BRIG_SPEC_JSON_ENV_VALUES);
	const char *env_image = getenv("BRIG_IMAGE");
	if (!image_given && !(env_image && *env_image))
		json_object_del(js, "image"); /* the server's default (brig serve --image), as without flags */
	json_object_set_new(body, "spec", js);
	/* A secret's value goes from this brig's environment, as a local up
	 * reads it; the server never reads its own. */
	brig_error *err = NULL;
	char name[BRIG_NAME_SIZE] = "";
	if (spec->secret_count && brig_egress__secrets_check(spec, &err) != 0) {
		if (id && brig_identity_name(name, id, NULL) == 0)
			brig__error_prefix(&err, err->code, "create computer %s", name); /* as the library says it */
		return cli_error(err, NULL);
	}
	json_t *values = json_object();
	for (size_t i = 0; i < spec->secret_count; i++)
		cli_remote_secret_add(values, spec->secrets[i]); /* each is set: checked above */
	if (json_object_size(values))
		json_object_set(body, "secret_values", values);
	json_decref(values);
	return 0;
}

/* brig up through a brig server: POST /v1/computers, the same notes and
 * output. spec is NULL without spec flags (a known session keeps its
 * recorded spec). */
static int up_remote(const session_args *a, const brig_spec *spec, bool image_given, bool fresh)
{
	if (a->t.store)
		return cli_fail("--store names a local store; through a brig server its own store is used");
	json_t *body = json_pack("{s:s, s:s, s:s, s:b}", "ns", a->t.id.ns, "agent", a->t.id.agent, "session",
				 a->t.id.session, "fresh", fresh);
	if (spec && cli_remote_spec_put(body, spec, image_given, NULL) != 0) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	json_t *j = NULL;
	int rc = cli_remote_call(r, "POST", "/v1/computers", body, &j);
	json_decref(body); /* env and secret values: jansson frees them; they were never printed */
	cli_remote_free(r);
	if (rc)
		return rc;
	brig_up_result ur = {0};
	ur.computer = cli_remote_computer(j);
	json_t *lost = json_object_get(j, "lost");
	if (json_is_object(lost)) {
		const char *why = json_string_value(json_object_get(lost, "why"));
		ur.lost = xstrdup(why ? why : "was lost");
		ur.old_generation = json_integer_value(json_object_get(lost, "old_generation"));
		ur.checkpoint_id = json_integer_value(json_object_get(lost, "checkpoint_id"));
		ur.checkpoint_created_ms = json_integer_value(json_object_get(lost, "checkpoint_created_ms"));
	}
	ur.recorded = json_is_true(json_object_get(j, "recorded"));
	cli_up_report(&ur);
	brig_computer *c = ur.computer;
	if (!c->name) {
		json_decref(j);
		brig_up_result_clear(&ur);
		return cli_fail("up: the brig server's answer lacks the computer's name");
	}
	if (!ur.lost && c->adopted)
		cli_note("adopted generation %u of %s/%s/%s (%s)", c->generation, a->t.id.ns, a->t.id.agent,
			 a->t.id.session, c->state ? c->state : "state unknown");
	if (a->json) {
		json_object_del(j, "lost");
		json_object_del(j, "recorded");
		rc = cli_print_json(json_incref(j));
	} else {
		printf("%s\n", c->name);
	}
	json_decref(j);
	brig_up_result_clear(&ur);
	return rc;
}

int cmd_up(int argc, char **argv)
{
	static const struct option longopts[] = {SESSION_LONGOPTS,
						 CLI_SPEC_LONGOPTS,
						 CLI_PUBLISH_LONGOPT,
						 {"fresh", no_argument, NULL, OPT_FRESH},
						 {NULL, 0, NULL, 0}};
	session_args a = {0};
	bool image_given = false, spec_given = false, fresh = false;
	brig_spec spec;
	brig_spec_init(&spec);
	brig_engine *e = NULL;
	brig_store *s = NULL;
	brig_computer *c = NULL;
	brig_store_session *rec = NULL;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL, opt;

	optind = 0;
	while ((opt = cli_getopt("up", argc, argv, "+:he:p:", longopts, NULL)) != -1) {
		const char *key = cli_spec_key(opt);
		if (key) {
			spec_given = true;
			if (opt == CLI_OPT_IMAGE)
				image_given = true;
			if (cli_spec_set(&spec, key, optarg) != 0)
				goto out;
			continue;
		}
		if (session_opt(&a, opt, optarg))
			continue;
		if (opt == OPT_FRESH) {
			fresh = true;
			continue;
		}
		if (opt == 'h') {
			rc = cli_help(up_usage);
			goto out;
		}
		goto out;
	}
	if (optind < argc) {
		cli_usage("up", "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (cli_target_check("up", &a.t) != 0 || cli_spec_finish(&spec, image_given) != 0)
		goto out;
	if (cli_remote_host()) {
		rc = up_remote(&a, spec_given ? &spec : NULL, image_given, fresh);
		goto out;
	}
	if (cli_store_open(&s, a.t.store) != 0 || cli_engine_open(&e) != 0)
		goto out;
	/* An existing session keeps its recorded spec unless flags say otherwise. */
	int grc = brig_store_session_get(s, &rec, a.t.id.ns, a.t.id.agent, a.t.id.session, &err);
	if (grc != 0 && grc != BRIG_ENOTFOUND) {
		cli_error(err, NULL);
		goto out;
	}
	brig_error_free(err);
	err = NULL;
	bool use_recorded = grc == 0 && !spec_given && rec->spec_json;
	brig_identity id = {a.t.id.ns, a.t.id.agent, a.t.id.session, 1};
	brig_up_opts uo = BRIG_UP_OPTS_INIT;
	uo.fresh = fresh;
	brig_up_result ur;
	if (brig_session_open(e, s, &ur, &id, use_recorded ? NULL : &spec, &uo, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	cli_up_report(&ur);
	c = ur.computer;
	ur.computer = NULL;
	if (!ur.lost && c->adopted) {
		cli_note("adopted generation %u of %s/%s/%s (%s)", c->generation, a.t.id.ns, a.t.id.agent,
			 a.t.id.session, c->state ? c->state : "state unknown");
	}
	brig_up_result_clear(&ur);
	if (a.json) {
		rc = cli_print_json(brig_computer_to_json(c));
	} else {
		printf("%s\n", c->name);
		rc = 0;
	}
out:
	brig_store_session_free(rec);
	brig_computer_free(c);
	brig_store_close(s);
	brig_engine_free(e);
	brig_spec_clear(&spec);
	return rc;
}

/* ---- brig checkpoint / checkpoint rm ---- */

static const char checkpoint_usage[] =
	"Usage: brig checkpoint [OPTIONS] NAME\n"
	"       brig checkpoint [OPTIONS] --ns NS --agent A --session S [--gen N]\n"
	"       brig checkpoint rm [--store URL] ID [ID...]\n"
	"       brig checkpoint export [--store URL] [-o FILE] ID > FILE\n"
	"       brig checkpoint import [--store URL] [FILE]\n"
	"\n"
	"Take a checkpoint of a session's computer's /workspace and /runtime. With brig-init,\n"
	"incrementally: a manifest (path, type, mode, size, mtime, SHA-256) plus one blob per\n"
	"distinct file, shared by all checkpoints; only files changed since the session's\n"
	"previous checkpoint are copied. Without it (or paused), the full copy: freeze, copy\n"
	"through the Docker daemon, thaw (also when the copy fails), one zstd blob. Prints\n"
	"the checkpoint's id and SHA-256 digest. A failed or interrupted checkpoint never\n"
	"replaces a good one; restore checks every digest before the first byte lands.\n"
	"`rm` removes checkpoints by id, then blobs no checkpoint names any more.\n"
	"`export`/`import` move one checkpoint between machines and stores (see their --help).\n"
	"\n"
	"Blobs live in $BRIG_CHECKPOINT_DIR, else beside a SQLite store, else in brig's\n"
	"data directory.\n"
	"\n"
	"Options:\n" CLI_HELP_TARGET
	"      --keep N            Then keep only the newest N checkpoints of the session\n"
	"      --json              Print the checkpoint record as JSON\n"
	"  -h, --help              Print this help\n";

/* brig checkpoint rm through a brig server: DELETE /v1/checkpoints/ID for
 * each, as direct one after another (an error is said and the rest go on). */
static int checkpoint_rm_remote(const char *store, const int64_t *ids, size_t n)
{
	if (store)
		return cli_fail("--store names a local store; through a brig server its own store is used");
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		cleanup_free char *target = xasprintf("/v1/checkpoints/%" PRId64, ids[i]);
		json_t *j = NULL;
		int c = cli_remote_call(r, "DELETE", target, NULL, &j);
		json_decref(j);
		if (c) {
			rc = c;
			continue;
		}
		printf("%" PRId64 "\n", ids[i]);
		fflush(stdout);
	}
	cli_remote_free(r);
	return rc;
}

static int checkpoint_rm(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, CLI_OPT_STORE},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *store = NULL;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("checkpoint rm", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case CLI_OPT_STORE: store = optarg; break;
		case 'h': return cli_help(checkpoint_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind >= argc)
		return cli_usage("checkpoint rm", "ID is required");
	int64_t *ids = xcalloc((size_t)(argc - optind), sizeof *ids);
	for (int i = optind; i < argc; i++) {
		if (cli_parse_i64("ID", argv[i], 1, INT64_MAX, &ids[i - optind]) != 0) {
			free(ids);
			return CLI_EXIT_FAIL;
		}
	}
	if (cli_remote_host()) {
		int rc = checkpoint_rm_remote(store, ids, (size_t)(argc - optind));
		free(ids);
		return rc;
	}
	brig_store *s = NULL;
	if (cli_store_open(&s, store) != 0) {
		free(ids);
		return CLI_EXIT_FAIL;
	}
	int rc = 0;
	for (int i = optind; i < argc; i++) {
		brig_error *err = NULL;
		if (brig_checkpoint_remove(s, NULL, ids[i - optind], &err) != 0) {
			rc = cli_error(err, NULL);
			continue;
		}
		printf("%" PRId64 "\n", ids[i - optind]);
		fflush(stdout);
	}
	free(ids);
	brig_store_close(s);
	return rc;
}

/* brig checkpoint through a brig server: the server's record (its blob by
 * name, as a local one has it) with the session added. */
static int checkpoint_remote(const session_args *a, const char *name, int64_t keep)
{
	cli_remote *r = NULL;
	cleanup_free char *path = NULL, *target = NULL;
	json_t *j = NULL;
	int rc = cli_remote_open(&r);
	if (rc == 0)
		rc = cli_remote_target(r, "checkpoint", &a->t, name, &path);
	if (rc == 1)
		rc = cli_fail("no computer named %s", name);
	if (rc == 0) {
		target = xasprintf("%s/checkpoints", path);
		json_t *body = keep ? json_pack("{s:I}", "keep", (json_int_t)keep) : NULL;
		rc = cli_remote_call(r, "POST", target, body, &j);
		json_decref(body);
	}
	cli_remote_free(r);
	if (rc)
		return rc;
	/* the session, from the path the server answered on: /v1/computers/NS/AGENT/SESSION */
	char *ns = path + strlen("/v1/computers/");
	char *agent = strchr(ns, '/');
	*agent++ = '\0';
	char *session = strchr(agent, '/');
	*session++ = '\0';
	json_object_set_new(j, "ns", json_string(ns));
	json_object_set_new(j, "agent", json_string(agent));
	json_object_set_new(j, "session", json_string(session));
	if (a->json)
		return cli_print_json(j);
	char raw[32], stored[32];
	format_bytes(raw, sizeof raw, json_integer_value(json_object_get(j, "bytes_raw")));
	format_bytes(stored, sizeof stored, json_integer_value(json_object_get(j, "bytes_stored")));
	const char *digest = json_string_value(json_object_get(j, "digest"));
	int64_t id = json_integer_value(json_object_get(j, "id"));
	cli_note("checkpoint %" PRId64 " of %s/%s/%s generation %" PRId64 ": %s archived, %s stored", id, ns, agent,
		 session, (int64_t)json_integer_value(json_object_get(j, "generation")), raw, stored);
	printf("%" PRId64 " %s\n", id, digest ? digest : "");
	json_decref(j);
	return 0;
}

int cmd_checkpoint_export(int argc, char **argv); /* cmd_checkpoint_io.c */
int cmd_checkpoint_import(int argc, char **argv);

int cmd_checkpoint(int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "export") == 0 || strcmp(argv[1], "import") == 0)) {
		return argv[1][0] == 'e' ? cmd_checkpoint_export(argc - 1, argv + 1)
					 : cmd_checkpoint_import(argc - 1, argv + 1);
	}
	if (argc > 1 && strcmp(argv[1], "rm") == 0)
		return checkpoint_rm(argc - 1, argv + 1);
	static const struct option longopts[] = {
		SESSION_LONGOPTS,
		{"gen", required_argument, NULL, CLI_OPT_GEN},
		{"keep", required_argument, NULL, OPT_KEEP},
		{NULL, 0, NULL, 0},
	};
	session_args a = {0};
	int64_t keep = 0;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("checkpoint", argc, argv, ":h", longopts, NULL)) != -1) {
		if (session_opt(&a, opt, optarg))
			continue;
		switch (opt) {
		case OPT_KEEP:
			if (cli_parse_i64("--keep", optarg, 1, 1000000, &keep) != 0)
				return CLI_EXIT_FAIL;
			break;
		case 'h': return cli_help(checkpoint_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (a.rc)
		return a.rc;
	const char *name = optind < argc ? argv[optind] : NULL;
	if (optind + 1 < argc)
		return cli_usage("checkpoint", "unexpected argument '%s'", argv[optind + 1]);

	brig_store *s = NULL;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	brig_store_checkpoint *cp = NULL;
	char *ref = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_remote_host()) {
		rc = checkpoint_remote(&a, name, keep);
		goto out;
	}
	if (cli_target_name(&ref, "checkpoint", &a.t, name, NULL, false) != 0)
		goto out;
	if (cli_store_open(&s, a.t.store) != 0)
		goto out;
	if (cli_engine_open(&e) != 0)
		goto out;
	brig_checkpoint_opts opts = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .keep = (size_t)keep};
	int cr = brig_checkpoint_create(e, s, &cp, ref, &opts, &err);
	int p = cli_prefix_again(e, cr, name != NULL, &ref, &err); /* NAME may be a unique prefix */
	if (p == CLI_EXIT_FAIL)
		goto out;
	if (p == 1)
		cr = brig_checkpoint_create(e, s, &cp, ref, &opts, &err);
	if (cr != 0) {
		cli_error(err, NULL);
		goto out;
	}
	if (a.json) {
		rc = cli_print_json(checkpoint_json(cp));
	} else {
		char raw[32], stored[32];
		format_bytes(raw, sizeof raw, cp->bytes_raw);
		format_bytes(stored, sizeof stored, cp->bytes_stored);
		cli_note("checkpoint %" PRId64 " of %s/%s/%s generation %" PRId64 ": %s archived, %s stored", cp->id,
			 cp->ns, cp->agent, cp->session, cp->generation, raw, stored);
		printf("%" PRId64 " %s\n", cp->id, cp->digest);
		rc = 0;
	}
out:
	brig_store_checkpoint_free(cp);
	free(ref);
	brig_engine_free(e);
	brig_store_close(s);
	return rc;
}

/* ---- brig checkpoints ---- */

static const char checkpoints_usage[] =
	"Usage: brig checkpoints --ns NS --agent A --session S [--store URL] [--json]\n"
	"\n"
	"List a session's checkpoints, newest first.\n"
	"\n" CLI_HELP_SESSION "      --json              Print a JSON array of checkpoint records\n"
	"  -h, --help              Print this help\n";

int cmd_checkpoints(int argc, char **argv)
{
	static const struct option longopts[] = {SESSION_LONGOPTS, {NULL, 0, NULL, 0}};
	session_args a = {0};
	int opt;
	optind = 0;
	while ((opt = cli_getopt("checkpoints", argc, argv, ":h", longopts, NULL)) != -1) {
		if (session_opt(&a, opt, optarg))
			continue;
		if (opt == 'h')
			return cli_help(checkpoints_usage);
		return CLI_EXIT_FAIL;
	}
	if (optind < argc)
		return cli_usage("checkpoints", "unexpected argument '%s'", argv[optind]);
	if (cli_target_check("checkpoints", &a.t) != 0)
		return CLI_EXIT_FAIL;
	const char *ns = a.t.id.ns, *agent = a.t.id.agent, *session = a.t.id.session;
	brig_store *s = NULL;
	cli_remote *r = NULL;
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_remote_host()) {
		if (a.t.store)
			return cli_fail("--store names a local store; through a brig server its own store is used");
		if (cli_remote_open(&r) != 0 || cli_remote_checkpoints(r, ns, agent, session, &cps, &n) != 0)
			goto out;
	} else {
		if (cli_store_open(&s, a.t.store) != 0)
			goto out;
		if (brig_store_checkpoint_list(s, &cps, &n, ns, agent, session, &err) != 0) {
			cli_error(err, NULL);
			goto out;
		}
	}
	if (a.json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, checkpoint_json(&cps[i]));
		rc = cli_print_json(arr);
		goto out;
	}
	printf("%-8s %-5s %-14s %-10s %-10s %s\n", "ID", "GEN", "DIGEST", "ARCHIVED", "STORED", "CREATED");
	for (size_t i = 0; i < n; i++) {
		char raw[32], stored[32], age[48];
		format_bytes(raw, sizeof raw, cps[i].bytes_raw);
		format_bytes(stored, sizeof stored, cps[i].bytes_stored);
		cli_format_age(age, sizeof age, cps[i].created_ms / 1000);
		printf("%-8" PRId64 " %-5" PRId64 " %-14.12s %-10s %-10s %s\n", cps[i].id, cps[i].generation,
		       cps[i].digest, raw, stored, age);
	}
	rc = 0;
out:
	brig_store_checkpoint_free_array(cps, n);
	cli_remote_free(r);
	brig_store_close(s);
	return rc;
}

/* ---- brig recover ---- */

static const char recover_usage[] =
	"Usage: brig recover --ns NS --agent A --session S [--checkpoint ID] [--store URL] [--json]\n"
	"\n"
	"Recover a session whose current generation failed (a timeout, a cancel, an\n"
	"uncertain answer), stopped or is gone: verify the latest checkpoint, create\n"
	"generation + 1 under its own name, copy the checkpoint into it, remove the old\n"
	"container and its volumes, and print the new computer's name. Without a\n"
	"checkpoint the new generation starts empty (and brig says so). Several brig\n"
	"processes recovering one session at once make exactly one new generation.\n"
	"A corrupt checkpoint is refused and nothing changes.\n"
	"\n" CLI_HELP_SESSION
	"      --checkpoint ID     Restore this checkpoint of the session (see brig checkpoints)\n"
	"                          instead of the latest\n"
	"      --json              Print {name, old_generation, new_generation, checkpoint_id, won, computer}\n"
	"  -h, --help              Print this help\n";

/* The values, from this brig's environment, of the secrets the server's
 * store recorded for the session (as a local recover reads them): an
 * object for secret_values, or NULL when it names none or none is set
 * here (the server then uses a value it kept for the same hosts, or says
 * which is missing). */
static json_t *remote_secret_values(cli_remote *r, const session_args *a)
{
	/* ns is checked (A-Z a-z 0-9 _ . -) */
	cleanup_free char *target = xasprintf("/v1/sessions?ns=%s", a->t.id.ns);
	json_t *list = NULL;
	int status = 0;
	/* a list that failed (its error printed) or says nothing of sessions:
	 * not the recover's end, which then says what is missing */
	if (cli_remote_request(r, "GET", target, NULL, &status, &list) != 0 || !list ||
	    !json_is_array(json_object_get(list, "sessions"))) {
		json_decref(list);
		cli_note("cannot list %s's sessions on the brig server: recovering %s/%s/%s without secret values from "
			 "this environment (the server uses ones it kept, or says which is missing)",
			 a->t.id.ns, a->t.id.ns, a->t.id.agent, a->t.id.session);
		return NULL;
	}
	json_t *values = json_object();
	size_t i;
	json_t *s;
	json_array_foreach (json_object_get(list, "sessions"), i, s) {
		const char *agent = json_string_value(json_object_get(s, "agent"));
		const char *sess = json_string_value(json_object_get(s, "session"));
		if (!agent || !sess || strcmp(agent, a->t.id.agent) || strcmp(sess, a->t.id.session))
			continue;
		size_t k;
		json_t *sec;
		json_array_foreach (json_object_get(json_object_get(s, "spec"), "secrets"), k, sec)
			if (json_is_string(sec))
				cli_remote_secret_add(values, json_string_value(sec));
	}
	json_decref(list);
	if (!json_object_size(values)) {
		json_decref(values);
		return NULL;
	}
	return values;
}

/* brig recover through a brig server: the same notes and output. */
static int recover_remote(const session_args *a, int64_t checkpoint)
{
	if (a->t.store)
		return cli_fail("--store names a local store; through a brig server its own store is used");
	cli_remote *r = NULL;
	json_t *j = NULL;
	cleanup_free char *path = cli_remote_path(a->t.id.ns, a->t.id.agent, a->t.id.session, "/recover");
	int rc = cli_remote_open(&r);
	if (rc == 0) {
		json_t *values = remote_secret_values(r, a);
		json_t *body = values || checkpoint ? json_object() : NULL;
		if (values)
			json_object_set_new(body, "secret_values", values);
		if (checkpoint)
			json_object_set_new(body, "checkpoint_id", json_integer(checkpoint));
		rc = cli_remote_call(r, "POST", path, body, &j);
		json_decref(body); /* the values: jansson frees (and brig's allocator wipes) them */
	}
	cli_remote_free(r);
	if (rc)
		return rc;
	int64_t newg = json_integer_value(json_object_get(j, "new_generation"));
	int64_t cp = json_integer_value(json_object_get(j, "checkpoint_id"));
	if (!json_is_true(json_object_get(j, "won")))
		cli_note("another brig recovered %s/%s/%s at the same time: using its generation %" PRId64, a->t.id.ns,
			 a->t.id.agent, a->t.id.session, newg);
	else if (cp)
		cli_note("recovered %s/%s/%s into generation %" PRId64 " from checkpoint %" PRId64, a->t.id.ns,
			 a->t.id.agent, a->t.id.session, newg, cp);
	else
		cli_note("%s/%s/%s has no checkpoint: generation %" PRId64 " started empty", a->t.id.ns, a->t.id.agent,
			 a->t.id.session, newg);
	const char *name = json_string_value(json_object_get(json_object_get(j, "computer"), "name"));
	if (a->json) {
		json_object_set_new(j, "name", json_string(name ? name : ""));
		return cli_print_json(j);
	}
	printf("%s\n", name ? name : "");
	json_decref(j);
	return 0;
}

int cmd_recover(int argc, char **argv)
{
	static const struct option longopts[] = {
		SESSION_LONGOPTS, {"checkpoint", required_argument, NULL, OPT_CHECKPOINT}, {NULL, 0, NULL, 0}};
	session_args a = {0};
	int64_t checkpoint = 0;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("recover", argc, argv, ":h", longopts, NULL)) != -1) {
		if (session_opt(&a, opt, optarg))
			continue;
		if (opt == OPT_CHECKPOINT) {
			if (cli_parse_i64("--checkpoint", optarg, 1, INT64_MAX, &checkpoint) != 0)
				return CLI_EXIT_FAIL;
			continue;
		}
		if (opt == 'h')
			return cli_help(recover_usage);
		return CLI_EXIT_FAIL;
	}
	if (optind < argc)
		return cli_usage("recover", "unexpected argument '%s'", argv[optind]);
	if (cli_target_check("recover", &a.t) != 0)
		return CLI_EXIT_FAIL;
	if (cli_remote_host())
		return recover_remote(&a, checkpoint);
	brig_store *s = NULL;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	brig_recover_result r;
	memset(&r, 0, sizeof r);
	int rc = CLI_EXIT_FAIL;
	if (cli_store_open(&s, a.t.store) != 0 || cli_engine_open(&e) != 0)
		goto out;
	if (brig_session_recover_at(e, s, &r, a.t.id.ns, a.t.id.agent, a.t.id.session, NULL, checkpoint, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	if (!r.won)
		cli_note("another brig recovered %s/%s/%s at the same time: using its generation %" PRId64, a.t.id.ns,
			 a.t.id.agent, a.t.id.session, r.new_generation);
	else if (r.checkpoint_id)
		cli_note("recovered %s/%s/%s into generation %" PRId64 " from checkpoint %" PRId64, a.t.id.ns,
			 a.t.id.agent, a.t.id.session, r.new_generation, r.checkpoint_id);
	else
		cli_note("%s/%s/%s has no checkpoint: generation %" PRId64 " started empty", a.t.id.ns, a.t.id.agent,
			 a.t.id.session, r.new_generation);
	if (a.json) {
		json_t *j = json_pack("{s:s,s:I,s:I,s:I,s:b,s:o}", "name", r.computer->name, "old_generation",
				      (json_int_t)r.old_generation, "new_generation", (json_int_t)r.new_generation,
				      "checkpoint_id", (json_int_t)r.checkpoint_id, "won", r.won, "computer",
				      brig_computer_to_json(r.computer));
		rc = cli_print_json(j);
	} else {
		printf("%s\n", r.computer->name);
		rc = 0;
	}
out:
	brig_recover_result_clear(&r);
	brig_engine_free(e);
	brig_store_close(s);
	return rc;
}
