/* cmd_sessions.c — the session store as a user sees it: `brig sessions ls`
 * (with what Docker says of each computer), `brig sessions rm` and `brig
 * history` (the commands and checkpoints the store recorded). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "cli/remote_parse.h"
#include "ops/sessions.h"
#include "util/util.h"

enum { OPT_JSON = CLI_OPT_TARGET_END, OPT_FORCE, OPT_CHECKPOINTS, OPT_LIMIT };

/* A session record without its spec: the spec holds env values. */
static json_t *session_json(const brig_store_session *r, const char *computer_state)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:s,s:I,s:I,s:I}", "ns", r->ns, "agent", r->agent, "session",
			      r->session, "generation", (json_int_t)r->generation, "state",
			      brig_store_state_to_string(r->state), "revision", (json_int_t)r->revision, "created_ms",
			      (json_int_t)r->created_ms, "updated_ms", (json_int_t)r->updated_ms);
	json_object_set_new(j, "container_name", r->container_name ? json_string(r->container_name) : json_null());
	json_object_set_new(j, "container_id", r->container_id ? json_string(r->container_id) : json_null());
	if (computer_state)
		json_object_set_new(j, "computer_state", json_string(computer_state));
	return j;
}

static void format_ms(char *out, size_t n, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (ms <= 0 || !localtime_r(&t, &tm) || strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(out, n, "-");
}

/* One row of `sessions ls`: names padded to 16 (printed safely). */
static void put_row(const char *ns, const char *agent, const char *session, int64_t gen, const char *state,
		    const char *computer, int64_t ms)
{
	char when[32];
	format_ms(when, sizeof when, ms);
	const char *names[] = {ns, agent, session};
	for (size_t i = 0; i < 3; i++) {
		cli_put_safe(names[i]);
		printf("%*s ", (int)(strlen(names[i]) < 16 ? 16 - strlen(names[i]) : 0), "");
	}
	printf("%-4" PRId64 " %-10s %-10s %s\n", gen, state, computer, when);
}

/* ---- brig sessions ls ---- */

static const char sessions_usage[] =
	"Usage: brig sessions ls [--ns NS] [--store URL] [--json]\n"
	"       brig sessions rm [--force] [--checkpoints] --ns NS --agent A --session S [--store URL]\n"
	"\n"
	"ls lists the sessions of the session store with what Docker says of each current\n"
	"computer (COMPUTER: running, paused, exited, gone). When the store says running but\n"
	"the computer is exited or gone, brig says so and records it as stopped or destroyed;\n"
	"the next `brig up` restores the session's latest checkpoint. A session removed with\n"
	"`sessions rm` whose checkpoints stay is listed as forgotten (GEN and UPDATED: its\n"
	"latest checkpoint's).\n"
	"\n"
	"rm removes a session from the store. It refuses while any computer of the session\n"
	"exists (--force destroys them first). Its checkpoints stay (`brig checkpoints`\n"
	"lists them, and the next `brig up` or `brig agent` of the session restores the\n"
	"latest) unless --checkpoints, which removes them and their blobs too. Its command\n"
	"history stays.\n"
	"\n"
	"Options:\n"
	"      --ns NS             ls: only this namespace; rm: the session, with --agent, --session\n" CLI_HELP_STORE
	"      --json              ls: print a JSON array\n"
	"  -f, --force             rm: destroy the session's computers first\n"
	"      --checkpoints       rm: remove the session's checkpoints too\n"
	"  -h, --help              Print this help\n";

/* The listing, printed as it comes (a table, or one JSON array at the
 * end) from the store and Docker or from a brig server. */
typedef struct ls_out {
	bool json;
	json_t *arr;
} ls_out;

static void ls_begin(ls_out *o, bool json)
{
	o->json = json;
	o->arr = json ? json_array() : NULL;
	if (!json)
		printf("%-16s %-16s %-16s %-4s %-10s %-10s %s\n", "NS", "AGENT", "SESSION", "GEN", "STATE", "COMPUTER",
		       "UPDATED");
}

/* What the store said of r (state was) and what was recorded (now), when
 * its computer lost its files. */
static void ls_fixed(const brig_store_session *r, const char *computer, const char *was, const char *now)
{
	cli_note("%s/%s/%s: the store said %s, but its computer %s is %s (its files are gone): recorded as %s; "
		 "`brig up` restores its latest checkpoint",
		 r->ns, r->agent, r->session, was, r->container_name ? r->container_name : "-", computer, now);
}

static void ls_session(ls_out *o, const brig_store_session *r, const char *computer)
{
	if (o->json)
		json_array_append_new(o->arr, session_json(r, computer));
	else
		put_row(r->ns, r->agent, r->session, r->generation, brig_store_state_to_string(r->state), computer,
			r->updated_ms);
}

/* Sessions whose record was removed and whose checkpoints stay: the next
 * up or agent of the identity restores the latest. */
static void ls_forgotten(ls_out *o, const brig_store_checkpoint *ck, size_t nk)
{
	for (size_t i = 0; i < nk; i++) {
		const brig_store_checkpoint *c = &ck[i];
		if (o->json) {
			json_array_append_new(o->arr,
					      json_pack("{s:s,s:s,s:s,s:I,s:s,s:n,s:n,s:I,s:I,s:I}", "ns", c->ns,
							"agent", c->agent, "session", c->session, "generation",
							(json_int_t)c->generation, "state", "forgotten",
							"container_name", "container_id", "checkpoints",
							(json_int_t)c->count, "latest_checkpoint", (json_int_t)c->id,
							"updated_ms", (json_int_t)c->created_ms));
			continue;
		}
		put_row(c->ns, c->agent, c->session, c->generation, "forgotten", "-", c->created_ms);
	}
	if (nk && !o->json)
		cli_note("forgotten: the session's record was removed (`brig sessions rm`), its checkpoints stay "
			 "(`brig checkpoints --ns NS --agent A --session S` lists them); the next `brig up` or "
			 "`brig agent` of it restores the latest");
}

/* Prints the JSON array; returns rc, or the print's failure. */
static int ls_end(ls_out *o, int rc)
{
	if (o->json) {
		int prc = cli_print_json(o->arr);
		o->arr = NULL;
		if (prc)
			rc = prc;
	}
	return rc;
}

/* A word of the server's shown as it is (a state, a name): 1-255 of
 * A-Z a-z 0-9 _ . - — nothing that could drive a terminal. */
static bool plain(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n > 0 && n <= 255 && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* sessions ls through a brig server: it asks Docker and puts its store
 * right (computers=true), and says what it put right for the same note. */
static int sessions_ls_remote(const char *ns, bool json)
{
	cli_remote *r = NULL;
	json_t *j = NULL;
	/* ns is checked (A-Z a-z 0-9 _ . -): no escaping needed */
	cleanup_free char *target =
		ns ? xasprintf("/v1/sessions?computers=true&ns=%s", ns) : xstrdup("/v1/sessions?computers=true");
	int rc = cli_remote_open(&r);
	if (rc == 0)
		rc = cli_remote_call(r, "GET", target, NULL, &j);
	cli_remote_free(r);
	if (rc)
		return rc;
	json_t *sv = json_object_get(j, "sessions"), *fv = json_object_get(j, "forgotten");
	size_t n = json_array_size(sv), nk = json_array_size(fv);
	brig_store_session *rs = n ? xcalloc(n, sizeof *rs) : NULL;
	brig_store_checkpoint *ck = nk ? xcalloc(nk, sizeof *ck) : NULL;
	ls_out o;
	ls_begin(&o, json);
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(sv, i);
		cli_remote_session_parse(&rs[i], x);
		const char *computer = json_string_value(json_object_get(x, "computer_state"));
		json_t *fixed = json_object_get(x, "fixed");
		const char *was = json_string_value(json_object_get(fixed, "was"));
		const char *now = json_string_value(json_object_get(fixed, "now"));
		const char *why = json_string_value(json_object_get(fixed, "error"));
		if (!plain(computer))
			computer = "unknown";
		if (plain(was) && plain(now) && plain(rs[i].ns) && plain(rs[i].agent) && plain(rs[i].session) &&
		    (!rs[i].container_name || plain(rs[i].container_name)))
			ls_fixed(&rs[i], computer, was, now);
		if (why)
			rc = cli_fail("%s", why);
		ls_session(&o, &rs[i], computer);
	}
	for (size_t i = 0; i < nk; i++)
		cli_remote_forgotten_parse(&ck[i], json_array_get(fv, i));
	ls_forgotten(&o, ck, nk);
	rc = ls_end(&o, rc);
	brig_store_checkpoint_free_array(ck, nk);
	brig_store_session_free_array(rs, n);
	json_decref(j);
	return rc;
}

static int sessions_ls(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"ns", required_argument, NULL, CLI_OPT_NS},
		{"store", required_argument, NULL, CLI_OPT_STORE},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *ns = NULL, *store = NULL;
	bool json = false;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("sessions ls", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case CLI_OPT_NS: ns = optarg; break;
		case CLI_OPT_STORE: store = optarg; break;
		case OPT_JSON: json = true; break;
		case 'h': return cli_help(sessions_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("sessions ls", "unexpected argument '%s'", argv[optind]);
	brig_error *err = NULL;
	if (ns && brig_identity_check_name("ns", ns, &err) != 0)
		return cli_error(err, NULL);
	if (cli_remote_host()) {
		if (store)
			return cli_fail("--store names a local store; through a brig server its own store is used");
		return sessions_ls_remote(ns, json);
	}
	brig_store *s = NULL;
	if (cli_store_open(&s, store) != 0)
		return CLI_EXIT_FAIL;
	brig_store_session *rs = NULL;
	brig_store_checkpoint *ck = NULL;
	size_t n = 0, nk = 0;
	int rc = CLI_EXIT_FAIL;
	brig_engine *e = NULL;
	if (brig_store_session_list(s, &rs, &n, ns, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	/* Without a daemon the listing still shows what the store has. */
	if (n && brig_engine_open(&e, NULL, &err) != 0) {
		cli_error(err, "cannot ask Docker about the computers (COMPUTER shows unknown)");
		err = NULL;
		e = NULL;
	}
	ls_out o;
	ls_begin(&o, json);
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		brig_store_session *r = &rs[i];
		ops_session_seen seen;
		int orc = ops_session_observe(e, s, r, &seen, &err);
		if (seen.fixed)
			ls_fixed(r, seen.computer, brig_store_state_to_string(seen.was),
				 brig_store_state_to_string(seen.now));
		if (orc) {
			rc = cli_error(err, NULL);
			err = NULL;
		}
		ls_session(&o, r, seen.computer);
	}
	if (brig_store_checkpoint_unowned(s, &ck, &nk, ns, &err) != 0) {
		rc = cli_error(err, NULL);
		err = NULL;
	}
	ls_forgotten(&o, ck, nk);
	rc = ls_end(&o, rc);
out:
	brig_engine_free(e);
	brig_store_checkpoint_free_array(ck, nk);
	brig_store_session_free_array(rs, n);
	brig_store_close(s);
	return rc;
}

/* ---- brig sessions rm ---- */

static void rm_destroyed(const char *name, uint32_t generation, void *payload)
{
	(void)payload;
	cli_note("destroyed %s (generation %" PRIu32 ")", name, generation);
}

/* The notes and the line of a removed session, direct or remote. */
static int rm_done(const char *ns, const char *agent, const char *session, const ops_session_removed *d)
{
	if (d->removed)
		cli_note("removed %zu checkpoint%s of %s/%s/%s", d->removed, d->removed == 1 ? "" : "s", ns, agent,
			 session);
	if (d->kept)
		cli_note("kept %zu checkpoint%s of %s/%s/%s (`brig checkpoints` lists them; the next `brig up` "
			 "restores the latest; `brig sessions rm --checkpoints` removes them)",
			 d->kept, d->kept == 1 ? "" : "s", ns, agent, session);
	printf("%s/%s/%s\n", ns, agent, session);
	return 0;
}

/* sessions rm through a brig server: it refuses, destroys and removes as
 * direct does (ops_session_remove) and says what it did for the notes. */
static int sessions_rm_remote(const char *ns, const char *agent, const char *session, bool force, bool checkpoints)
{
	cli_remote *r = NULL;
	json_t *j = NULL;
	int status = 0;
	/* names are checked (A-Z a-z 0-9 _ . -): no escaping needed */
	cleanup_free char *target = xasprintf("/v1/sessions/%s/%s/%s?force=%s&checkpoints=%s", ns, agent, session,
					      force ? "true" : "false", checkpoints ? "true" : "false");
	int rc = cli_remote_open(&r);
	if (rc == 0)
		rc = cli_remote_request(r, "DELETE", target, NULL, &status, &j);
	cli_remote_free(r);
	if (rc)
		return rc;
	if (status == 404)
		return cli_fail("sessions rm: session %s/%s/%s not found in the brig server's store", ns, agent,
				session);
	size_t i;
	json_t *x;
	json_array_foreach (json_object_get(j, "destroyed"), i, x) {
		const char *name = json_string_value(json_object_get(x, "name"));
		json_int_t gen = json_integer_value(json_object_get(x, "generation"));
		rm_destroyed(plain(name) ? name : "?", gen > 0 && gen <= UINT32_MAX ? (uint32_t)gen : 0, NULL);
	}
	json_int_t removed = json_integer_value(json_object_get(j, "checkpoints_removed"));
	json_int_t kept = json_integer_value(json_object_get(j, "checkpoints_kept"));
	ops_session_removed d = {.removed = removed > 0 ? (size_t)removed : 0, .kept = kept > 0 ? (size_t)kept : 0};
	json_decref(j);
	return rm_done(ns, agent, session, &d);
}

static int sessions_rm(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_SESSION_LONGOPTS,
		{"force", no_argument, NULL, 'f'},
		{"checkpoints", no_argument, NULL, OPT_CHECKPOINTS},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	cli_target t = {0};
	bool force = false, checkpoints = false;
	int opt, trc = 0;
	optind = 0;
	while ((opt = cli_getopt("sessions rm", argc, argv, ":hf", longopts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc))
			continue;
		switch (opt) {
		case 'f': force = true; break;
		case OPT_CHECKPOINTS: checkpoints = true; break;
		case 'h': return cli_help(sessions_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("sessions rm", "unexpected argument '%s'", argv[optind]);
	if (cli_target_check("sessions rm", &t) != 0)
		return CLI_EXIT_FAIL;
	const char *ns = t.id.ns, *agent = t.id.agent, *session = t.id.session;
	if (cli_remote_host()) {
		if (t.store)
			return cli_fail("--store names a local store; through a brig server its own store is used");
		return sessions_rm_remote(ns, agent, session, force, checkpoints);
	}
	brig_store *s = NULL;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	brig_store_session *r = NULL;
	ops_session_removed d;
	int rc = CLI_EXIT_FAIL;
	if (cli_store_open(&s, t.store) != 0)
		goto out;
	if (brig_store_session_get(s, &r, ns, agent, session, &err) != 0) {
		cli_error(err, "sessions rm");
		goto out;
	}
	if (cli_engine_open(&e) != 0)
		goto out;
	if (ops_session_remove(e, s, r, force, checkpoints, rm_destroyed, NULL, &d, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	rc = rm_done(ns, agent, session, &d);
out:
	brig_store_session_free(r);
	brig_engine_free(e);
	brig_store_close(s);
	return rc;
}

int cmd_sessions(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "ls") == 0)
		return sessions_ls(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "rm") == 0)
		return sessions_rm(argc - 1, argv + 1);
	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return cli_help(sessions_usage);
	if (argc > 1)
		return cli_usage("sessions", "unknown subcommand '%.32s' (ls or rm)", argv[1]);
	return cli_usage("sessions", "a subcommand is required: ls or rm");
}

/* ---- brig history ---- */

static const char history_usage[] =
	"Usage: brig history --ns NS --agent A --session S [--store URL] [--limit N] [--json]\n"
	"\n"
	"Show what the session store recorded of a session, oldest first: each command run\n"
	"through brig exec or brig agent (time, generation, exit code, outcome, duration,\n"
	"who ran it — the OS user, or the token's name for brig serve, \"mcp\" for brig mcp —\n"
	"and argv, never environment values) and each checkpoint. Commands outlive the\n"
	"session: the history of a removed session is still shown.\n"
	"\n" CLI_HELP_SESSION "      --limit N           Only the newest N commands (default all)\n"
	"      --json              Print {session, commands, checkpoints}\n"
	"  -h, --help              Print this help\n";

/* argv_json as words separated by spaces, for a terminal. */
static void put_argv(const char *argv_json)
{
	json_t *a = json_loads(argv_json ? argv_json : "[]", 0, NULL);
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		if (i)
			putchar(' ');
		cli_put_safe(json_string_value(v) ? json_string_value(v) : "?");
	}
	json_decref(a);
}

int cmd_history(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_SESSION_LONGOPTS,
		{"limit", required_argument, NULL, OPT_LIMIT},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	cli_target t = {0};
	bool json = false;
	int64_t limit = 0;
	int opt, trc = 0;
	optind = 0;
	while ((opt = cli_getopt("history", argc, argv, ":h", longopts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc))
			continue;
		switch (opt) {
		case OPT_LIMIT:
			if (cli_parse_i64("--limit", optarg, 1, 1000000, &limit) != 0)
				return CLI_EXIT_FAIL;
			break;
		case OPT_JSON: json = true; break;
		case 'h': return cli_help(history_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("history", "unexpected argument '%s'", argv[optind]);
	if (cli_target_check("history", &t) != 0)
		return CLI_EXIT_FAIL;
	const char *ns = t.id.ns, *agent = t.id.agent, *session = t.id.session;
	brig_store *s = NULL;
	cli_remote *remote = NULL;
	brig_store_session *r = NULL;
	brig_store_audit *au = NULL;
	brig_store_checkpoint *cps = NULL;
	size_t nau = 0, ncp = 0;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_remote_host()) {
		if (t.store)
			return cli_fail("--store names a local store; through a brig server its own store is used");
		if (cli_remote_open(&remote) != 0 || cli_remote_session(remote, ns, agent, session, &r) != 0 ||
		    cli_remote_history(remote, ns, agent, session, (size_t)limit, &au, &nau) != 0 ||
		    cli_remote_checkpoints(remote, ns, agent, session, &cps, &ncp) != 0)
			goto out;
	} else {
		if (cli_store_open(&s, t.store) != 0)
			goto out;
		int g = brig_store_session_get(s, &r, ns, agent, session, &err);
		if (g != 0 && g != BRIG_ENOTFOUND) {
			cli_error(err, NULL);
			goto out;
		}
		brig_error_free(err);
		err = NULL;
		if (brig_store_audit_list(s, &au, &nau, ns, agent, session, (size_t)limit, &err) != 0 ||
		    brig_store_checkpoint_list(s, &cps, &ncp, ns, agent, session, &err) != 0) {
			cli_error(err, NULL);
			goto out;
		}
	}
	if (!r && nau == 0 && ncp == 0) {
		if (s)
			cli_fail("no session %s/%s/%s in the store (%s) and no command recorded for it", ns, agent,
				 session, brig_store_display_url(s));
		else
			cli_fail("no session %s/%s/%s in the brig server's store and no command recorded for it", ns,
				 agent, session);
		goto out;
	}
	if (json) {
		json_t *cmds = json_array(), *cks = json_array();
		for (size_t i = nau; i-- > 0;) {
			const brig_store_audit *a = &au[i];
			json_t *argvj = json_loads(a->argv_json ? a->argv_json : "[]", 0, NULL);
			json_t *o = json_pack("{s:I,s:I,s:o,s:i,s:b,s:s,s:I,s:I,s:I,s:I,s:s?}", "id", (json_int_t)a->id,
					      "generation", (json_int_t)a->generation, "argv",
					      argvj ? argvj : json_array(), "exit_code", a->exit_code, "timed_out",
					      a->timed_out, "outcome", a->outcome ? a->outcome : "", "duration_ms",
					      (json_int_t)a->duration_ms, "stdout_bytes", (json_int_t)a->stdout_bytes,
					      "stderr_bytes", (json_int_t)a->stderr_bytes, "created_ms",
					      (json_int_t)a->created_ms, "actor", a->actor);
			json_array_append_new(cmds, o);
		}
		for (size_t i = ncp; i-- > 0;)
			json_array_append_new(cks, json_pack("{s:I,s:I,s:s,s:I,s:I,s:I}", "id", (json_int_t)cps[i].id,
							     "generation", (json_int_t)cps[i].generation, "digest",
							     cps[i].digest, "bytes_raw", (json_int_t)cps[i].bytes_raw,
							     "bytes_stored", (json_int_t)cps[i].bytes_stored,
							     "created_ms", (json_int_t)cps[i].created_ms));
		json_t *o = json_pack("{s:o,s:o,s:o}", "session", r ? session_json(r, NULL) : json_null(), "commands",
				      cmds, "checkpoints", cks);
		rc = cli_print_json(o);
		goto out;
	}
	if (r)
		printf("# %s/%s/%s: generation %" PRId64 ", %s\n", ns, agent, session, r->generation,
		       brig_store_state_to_string(r->state));
	else
		printf("# %s/%s/%s: removed from the store; its commands and kept checkpoints remain\n", ns, agent,
		       session);
	printf("%-19s %-4s %-10s %s\n", "TIME", "GEN", "EVENT", "DETAIL");
	/* Both lists are newest first: merge them oldest first. */
	size_t ia = nau, ic = ncp;
	while (ia > 0 || ic > 0) {
		bool take_cp = ic > 0 && (ia == 0 || cps[ic - 1].created_ms < au[ia - 1].created_ms);
		char when[32];
		if (take_cp) {
			const brig_store_checkpoint *c = &cps[--ic];
			format_ms(when, sizeof when, c->created_ms);
			printf("%-19s %-4" PRId64 " %-10s %" PRId64 " (%" PRId64 " bytes archived, %.12s)\n", when,
			       c->generation, "checkpoint", c->id, c->bytes_raw, c->digest);
			continue;
		}
		const brig_store_audit *a = &au[--ia];
		format_ms(when, sizeof when, a->created_ms);
		printf("%-19s %-4" PRId64 " %-10s exit %d, %s, %" PRId64 " ms, by ", when, a->generation, "exec",
		       a->exit_code, a->outcome ? a->outcome : "-", a->duration_ms);
		cli_put_safe(a->actor ? a->actor : "?");
		fputs(": ", stdout);
		put_argv(a->argv_json);
		putchar('\n');
	}
	rc = 0;
out:
	brig_store_checkpoint_free_array(cps, ncp);
	brig_store_audit_free_array(au, nau);
	brig_store_session_free(r);
	cli_remote_free(remote);
	brig_store_close(s);
	return rc;
}
