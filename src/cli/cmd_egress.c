/* cmd_egress.c — `brig egress allow|deny|ls NAME` (a running computer's
 * egress rules) and `brig egress-proxy` (the proxy brig starts itself). */
#include <stdio.h>
#include <string.h>

#include "brig/egress.h"
#include "cli/cli.h"

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
			    "  rm                Remove the egress network and its firewall rules (refused\n"
			    "                    while a computer is attached; the proxy then ends)\n"
			    "\n"
			    "  -h, --help        Print this help\n";

int cmd_egress(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		if (argc < 2)
			return cli_usage("egress", "missing command (allow, deny or ls)");
		return cli_help(usage);
	}
	const char *cmd = argv[1];
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
		return cli_usage("egress", "unknown command '%s' (allow, deny, ls or rm)", cmd);
	if (n != (is_ls ? 1u : 2u))
		return cli_usage("egress", is_ls ? "ls takes NAME" : "%s takes NAME RULE", cmd);
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
