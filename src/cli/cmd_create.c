/* cmd_create.c — `brig create`: builds a spec from flags (every rule and
 * message comes from the library) and creates or adopts the computer. */
#include <stdio.h>
#include <string.h>

#include "brig/sandbox.h"
#include "cli/cli.h"

static const char usage[] =
	"Usage: brig create --ns NS --agent A --session S [OPTIONS]\n"
	"\n"
	"Create and start the computer of a session, or adopt the one that already\n"
	"exists under its name (same identity and spec). Prints its name. The computer\n"
	"is not recorded in the session store: `brig up` makes a session of it.\n"
	"Through a brig server (BRIG_HOST) it is the server's, and in no store either.\n"
	"\n"
	"Identity:\n"
	"      --ns NS             Namespace (1-63 of A-Z a-z 0-9 _ . -)\n"
	"      --agent A           Agent name\n"
	"      --session S         Session name\n"
	"      --gen N             Generation (default 1)\n"
	"\n"
	"Spec (defaults are the hardened ones):\n"
	"      --image IMG         Image tag or sha256:id (default $BRIG_IMAGE, then " BRIG_DEFAULT_IMAGE ")\n"
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
	"                          is forwarded from brig's environment with each exec\n" CLI_HELP_ENV CLI_HELP_PUBLISH
	"      --label KEY=VALUE   Extra label; repeatable\n" CLI_HELP_RUNTIME "\n"
	"Output:\n"
	"      --json              Print the computer as JSON (name, id, identity, effective spec)\n"
	"  -h, --help              Print this help\n";

/* brig create through a brig server: POST /v1/computers with record
 * false (in no store, any generation); the same note and output. */
static int create_remote(const brig_identity *id, const brig_spec *spec, bool image_given, bool json)
{
	json_t *body = json_pack("{s:s, s:s, s:s, s:I, s:b}", "ns", id->ns, "agent", id->agent, "session",
				 id->session, "generation", (json_int_t)id->generation, "record", false);
	if (cli_remote_spec_put(body, spec, image_given, id) != 0) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	cli_remote *r = NULL;
	json_t *j = NULL;
	int rc = cli_remote_open(&r);
	if (rc == 0)
		rc = cli_remote_call(r, "POST", "/v1/computers", body, &j);
	json_decref(body); /* env and secret values: jansson frees them; they were never printed */
	cli_remote_free(r);
	if (rc)
		return rc;
	brig_computer *c = cli_remote_computer(j);
	if (!c->name) {
		brig_computer_free(c);
		json_decref(j);
		return cli_fail("create: the brig server's answer lacks the computer's name");
	}
	if (c->adopted)
		cli_note("adopted existing computer %s (%s)", c->name, c->state ? c->state : "state unknown");
	if (json)
		rc = cli_print_json(json_incref(j));
	else
		printf("%s\n", c->name);
	brig_computer_free(c);
	json_decref(j);
	return rc;
}

int cmd_create(int argc, char **argv)
{
	enum { OPT_JSON = CLI_OPT_TARGET_END };
	static const struct option longopts[] = {
		CLI_IDENTITY_LONGOPTS,
		{"gen", required_argument, NULL, CLI_OPT_GEN},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		CLI_SPEC_LONGOPTS,
		CLI_PUBLISH_LONGOPT,
		{NULL, 0, NULL, 0},
	};
	cli_target t = {0};
	bool json = false, image_given = false;
	brig_spec spec;
	brig_spec_init(&spec);
	brig_engine *e = NULL;
	brig_computer *c = NULL;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL, opt, trc = 0;

	while ((opt = cli_getopt("create", argc, argv, "+:he:p:", longopts, NULL)) != -1) {
		const char *key = cli_spec_key(opt);
		if (key) {
			if (opt == CLI_OPT_IMAGE)
				image_given = true;
			if (cli_spec_set(&spec, key, optarg) != 0)
				goto out;
			continue;
		}
		if (cli_target_opt(&t, opt, optarg, &trc)) {
			if (trc)
				goto out;
			continue;
		}
		switch (opt) {
		case OPT_JSON: json = true; break;
		case 'h': rc = cli_help(usage); goto out;
		default: goto out;
		}
	}
	if (optind < argc) {
		cli_usage("create", "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	brig_identity id = t.id;
	if (!id.generation)
		id.generation = 1;
	if (!id.ns || !id.agent || !id.session) {
		cli_usage("create", "--ns, --agent and --session are required");
		goto out;
	}
	if (brig_identity_validate(&id, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	if (cli_spec_finish(&spec, image_given) != 0)
		goto out;
	if (cli_remote_host()) {
		rc = create_remote(&id, &spec, image_given, json);
		goto out;
	}
	if (cli_engine_open(&e) != 0)
		goto out;
	if (brig_computer_create(e, &c, &id, &spec, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	if (c->adopted)
		cli_note("adopted existing computer %s (%s)", c->name, c->state ? c->state : "state unknown");
	if (json) {
		rc = cli_print_json(brig_computer_to_json(c));
	} else {
		printf("%s\n", c->name);
		rc = 0;
	}
out:
	brig_computer_free(c);
	brig_engine_free(e);
	brig_spec_clear(&spec);
	return rc;
}
