/* cmd_port.c — `brig port`: a computer's published ports, as the daemon
 * holds them (docker port's lines, or JSON). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "cli/cli.h"

static const char usage[] = "Usage: brig port [--json] NAME\n"
			    "       brig port [--json] --ns NS --agent A --session S [--gen N] [--store URL]\n"
			    "\n"
			    "List the ports a computer publishes (brig create/up --publish), one\n"
			    "`PORT/tcp -> HOST_IP:HOST_PORT` line each, or with --json an array of\n"
			    "{\"host_ip\",\"host_port\",\"port\",\"protocol\"}. Prints nothing when there are none.\n"
			    "\n"
			    "Options:\n" CLI_HELP_TARGET "      --json              Print JSON\n"
			    "  -h, --help              Print this help\n";

int cmd_port(int argc, char **argv)
{
	enum { OPT_JSON = CLI_OPT_TARGET_END };
	static const struct option longopts[] = {
		CLI_TARGET_LONGOPTS,
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool json = false;
	cli_target t = {0};
	int opt, trc = 0;
	while ((opt = cli_getopt("port", argc, argv, ":h", longopts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc)) {
			if (trc)
				return trc;
			continue;
		}
		switch (opt) {
		case OPT_JSON: json = true; break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (argc - optind > 1)
		return cli_usage("port", "one NAME at a time");
	brig_engine *e = NULL;
	brig_computer *c = NULL;
	char *ref = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_target_name(&ref, "port", &t, optind < argc ? argv[optind] : NULL, NULL, true) != 0)
		goto out;
	if (cli_engine_open(&e) != 0)
		goto out;
	if (cli_computer_get(e, &c, &ref, !t.id_given) != 0)
		goto out;
	if (json) {
		json_t *all = brig_computer_to_json(c);
		json_t *ports = json_incref(json_object_get(all, "ports"));
		json_decref(all);
		rc = cli_print_json(ports);
		goto out;
	}
	for (size_t i = 0; i < c->port_count; i++) {
		const brig_port *p = &c->ports[i];
		bool v6 = strchr(p->host_ip, ':') != NULL;
		printf("%u/tcp -> %s%s%s:%u\n", p->port, v6 ? "[" : "", p->host_ip, v6 ? "]" : "", p->host_port);
	}
	rc = fflush(stdout) == 0 ? 0 : CLI_EXIT_FAIL;
out:
	brig_computer_free(c);
	brig_engine_free(e);
	free(ref);
	return rc;
}
