/* cmd_egress.c — `brig egress allow|deny|ls NAME` (a running computer's
 * egress rules) and `brig egress-proxy` (the proxy brig starts itself). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brig/egress.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "ops/ledger.h"
#include "util/util.h"

static const char usage[] = "Usage: brig egress COMMAND NAME [RULE]\n"
			    "\n"
			    "The egress rules of a computer created with --network egress. A rule is a host\n"
			    "(api.example.com), a wildcard for its subdomains (*.example.com), optionally :PORT\n"
			    "(default 443 and 80). Changes apply to new connections at once.\n"
			    "\n"
			    "Commands:\n"
			    "  allow NAME RULE   Add a rule\n"
			    "  deny NAME RULE    Remove a rule\n"
			    "  ls NAME [--json]  List the rules\n"
			    "  log NAME | --ns NS --agent A --session S [--limit N] [--json] [--store URL]\n"
			    "                    The ledger: every connection the proxy saw (allowed or\n"
			    "                    denied), newest first, from brig's session store\n"
			    "  rm                Remove the egress network and its firewall rules (refused\n"
			    "                    while a computer is attached; the proxy then ends)\n"
			    "\n"
			    "  -h, --help        Print this help\n";

static void print_row(const brig_store_egress *r)
{
	time_t t = (time_t)(r->start_ms / 1000);
	struct tm tm;
	char when[32];
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	printf("%-20s  %-7s  ", when, r->decision);
	cli_put_safe(r->host[0] ? r->host : "-");
	printf(":%d  up %lld  down %lld  %lld ms", r->port, (long long)r->bytes_up, (long long)r->bytes_down,
	       (long long)r->duration_ms);
	if (r->reason[0]) {
		printf("  ");
		cli_put_safe(r->reason);
	}
	printf("\n");
}

/* egress log through a brig server (BRIG_HOST): its store's ledger,
 * printed as direct prints the local one. */
static int egress_log_remote(const char *name, const char *ns, const char *agent, const char *session, long limit,
			     bool json)
{
	/* the server answers at most 10000 rows (the newest) */
	if (limit > 10000)
		limit = 10000;
	/* the server checks each name, and says which is wrong */
	cleanup_free char *a = brig_urlencode(name ? name : ns), *b = name ? NULL : brig_urlencode(agent),
			  *c = name ? NULL : brig_urlencode(session);
	cleanup_free char *target = name ? xasprintf("/v1/egress/log?limit=%ld&name=%s", limit, a)
					 : xasprintf("/v1/egress/log?limit=%ld&ns=%s&agent=%s&session=%s", limit, a, b, c);
	cli_remote *r = NULL;
	json_t *j = NULL;
	int rc = cli_remote_open(&r);
	if (rc == 0)
		rc = cli_remote_call(r, "GET", target, NULL, &j);
	cli_remote_free(r);
	if (rc)
		return rc;
	json_t *rows = json_object_get(j, "ledger");
	brig_store_egress row;
	size_t i;
	json_t *v;
	json_array_foreach (rows, i, v) {
		if (!ops_ledger_row_parse(v, &row)) {
			json_decref(j);
			return cli_fail("egress log: the brig server answered a ledger row brig cannot read");
		}
	}
	if (json) {
		rc = cli_print_json(json_incref(rows ? rows : json_array()));
		json_decref(j);
		return rc;
	}
	json_array_foreach (rows, i, v) {
		ops_ledger_row_parse(v, &row);
		print_row(&row);
	}
	json_decref(j);
	return fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
}

static int egress_log(int argc, char **argv)
{
	const char *name = NULL, *ns = NULL, *agent = NULL, *session = NULL, *store = NULL, *limit_s = NULL;
	bool json = false;
	for (int i = 2; i < argc; i++) {
		const char **slot = strcmp(argv[i], "--ns") == 0        ? &ns
				    : strcmp(argv[i], "--agent") == 0   ? &agent
				    : strcmp(argv[i], "--session") == 0 ? &session
				    : strcmp(argv[i], "--store") == 0   ? &store
				    : strcmp(argv[i], "--limit") == 0   ? &limit_s
									: NULL;
		if (slot) {
			if (i + 1 >= argc)
				return cli_usage("egress", "%s needs a value", argv[i]);
			*slot = argv[++i];
		} else if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (argv[i][0] == '-') {
			return cli_usage("egress", "unknown option '%s'", argv[i]);
		} else if (!name) {
			name = argv[i];
		} else {
			return cli_usage("egress", "unexpected argument '%s'", argv[i]);
		}
	}
	bool by_session = ns || agent || session;
	if (!!name == by_session || (by_session && !(ns && agent && session)))
		return cli_usage("egress", "log takes NAME, or --ns, --agent and --session");
	long limit = 0;
	if (limit_s) {
		char *end = NULL;
		limit = strtol(limit_s, &end, 10);
		if (!*limit_s || *end || limit < 0)
			return cli_usage("egress", "--limit must be a whole number");
	}
	if (cli_remote_host()) {
		if (store)
			return cli_fail("--store names a local store; through a brig server its own store is used");
		return egress_log_remote(name, ns, agent, session, limit, json);
	}
	brig_store *s = NULL;
	int rc = cli_store_open(&s, store);
	if (rc)
		return rc;
	brig_store_egress *rows = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	rc = brig_store_egress_list(s, &rows, &n, name, ns, agent, session, (size_t)limit, &err);
	brig_store_close(s);
	if (rc)
		return cli_error(err, "egress log");
	if (json) {
		json_t *a = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(a, ops_ledger_row_json(&rows[i]));
		brig_store_egress_free_array(rows, n);
		return cli_print_json(a);
	}
	for (size_t i = 0; i < n; i++)
		print_row(&rows[i]);
	brig_store_egress_free_array(rows, n);
	return fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
}

/* allow, deny and ls through a brig server (BRIG_HOST): NAME as the
 * server's list names it; the same output as direct. */
static int egress_remote(const char *cmd, const char *name, const char *rule, bool json)
{
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	cleanup_free char *ns = NULL, *agent = NULL, *session = NULL;
	int rc = cli_remote_identity(r, name, &ns, &agent, &session);
	if (rc) {
		cli_remote_free(r);
		return rc;
	}
	bool is_ls = strcmp(cmd, "ls") == 0;
	cleanup_free char *path = cli_remote_path(ns, agent, session,
						  is_ls                       ? "/egress"
						  : strcmp(cmd, "allow") == 0 ? "/egress/allow"
									      : "/egress/deny");
	json_t *body = is_ls ? NULL : json_pack("{s:s}", "rule", rule);
	json_t *j = NULL;
	rc = cli_remote_call(r, is_ls ? "GET" : "POST", path, body, &j);
	json_decref(body);
	cli_remote_free(r);
	if (rc)
		return rc;
	if (!is_ls) {
		json_decref(j);
		return 0;
	}
	if (json)
		return cli_print_json(j);
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(j, "allow"), i, v)
		printf("%s\n", json_string_value(v) ? json_string_value(v) : "");
	json_decref(j);
	return fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
}

int cmd_egress(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		if (argc < 2)
			return cli_usage("egress", "missing command (allow, deny or ls)");
		return cli_help(usage);
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "log") == 0)
		return egress_log(argc, argv);
	bool json = false;
	const char *args[3] = {NULL, NULL, NULL};
	size_t n = 0;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 && strcmp(cmd, "ls") == 0)
			json = true;
		else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return cli_help(usage);
		else if (n < 3)
			args[n++] = argv[i];
		else
			return cli_usage("egress", "unexpected argument '%s'", argv[i]);
	}
	if (strcmp(cmd, "rm") == 0) {
		if (n != 0)
			return cli_usage("egress", "rm takes no argument");
		brig_engine *e = NULL;
		int rc = cli_engine_open(&e);
		if (rc)
			return rc;
		brig_error *err = NULL;
		rc = brig_egress_remove(e, &err);
		brig_engine_free(e);
		return rc ? cli_error(err, NULL) : 0;
	}
	bool is_ls = strcmp(cmd, "ls") == 0;
	if (!is_ls && strcmp(cmd, "allow") != 0 && strcmp(cmd, "deny") != 0)
		return cli_usage("egress", "unknown command '%s' (allow, deny, ls, log or rm)", cmd);
	if (n != (is_ls ? 1u : 2u))
		return cli_usage("egress", is_ls ? "ls takes NAME" : "%s takes NAME RULE", cmd);
	if (cli_remote_host())
		return egress_remote(cmd, args[0], args[1], json);
	brig_engine *e = NULL;
	int rc = cli_engine_open(&e);
	if (rc)
		return rc;
	brig_error *err = NULL;
	if (!is_ls) {
		rc = brig_egress_update(e, args[0], args[1], strcmp(cmd, "allow") == 0, &err);
		brig_engine_free(e);
		return rc ? cli_error(err, NULL) : 0;
	}
	brig_computer *c = NULL;
	if ((rc = brig_computer_get(e, &c, args[0], NULL, &err)) != 0) {
		brig_engine_free(e);
		return cli_error(err, NULL);
	}
	bool egress = c->network && strcmp(c->network, "egress") == 0;
	char name[256];
	snprintf(name, sizeof name, "%s", c->name);
	brig_computer_free(c);
	brig_engine_free(e);
	if (!egress)
		return cli_fail("egress ls %s: the computer is not of network egress", args[0]);
	char **rules = NULL;
	size_t count = 0;
	if (brig_egress_rules_get(&rules, &count, name, &err) != 0)
		return cli_error(err, NULL);
	if (json) {
		json_t *a = json_array();
		for (size_t i = 0; i < count; i++)
			json_array_append_new(a, json_string(rules[i]));
		brig_egress_rules_free(rules);
		return cli_print_json(json_pack("{s:s, s:o}", "name", name, "allow", a));
	}
	for (size_t i = 0; i < count; i++)
		printf("%s\n", rules[i]);
	brig_egress_rules_free(rules);
	return fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
}

int cmd_egress_proxy(int argc, char **argv)
{
	(void)argv;
	if (argc > 1)
		return cli_help("Usage: brig egress-proxy\n"
				"\n"
				"Serve as the egress proxy on " BRIG_EGRESS_GATEWAY ":3128 until no computer uses the\n"
				"egress network. brig starts it when a computer or run of --network egress needs it;\n"
				"its log (a JSON line per connection) is proxy.log in the egress folder.\n");
	brig_error *err = NULL;
	if (brig_egress_proxy_serve(&err) != 0)
		return cli_error(err, "egress-proxy");
	return 0;
}
