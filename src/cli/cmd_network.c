/* cmd_network.c — `brig network create|rm|inspect`: the one isolated
 * bridge (brig-sandbox) that computers and runs with --network isolated
 * share, inter-container traffic off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/sandbox.h"
#include "cli/cli.h"

static const char usage[] =
	"Usage: brig network COMMAND\n"
	"\n"
	"Manage the isolated bridge " BRIG_NETWORK_NAME " (inter-container traffic off). It is created on\n"
	"first use by --network isolated; these commands manage it by hand.\n"
	"\n"
	"Commands:\n"
	"  create [--subnet CIDR]   Ensure the bridge exists (default subnet " BRIG_DEFAULT_SUBNET "); prints its id\n"
	"  rm                       Remove it; refused while anything is attached\n"
	"  inspect [--json]         Show it\n"
	"\n"
	"  -h, --help               Print this help\n";

static int simple_opts(const char *cmd, int argc, char **argv, const char *help, bool *json)
{
	enum { OPT_JSON = CLI_OPT_SPEC_END };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static const struct option longopts_nojson[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt;
	while ((opt = cli_getopt(cmd, argc, argv, ":h", json ? longopts : longopts_nojson, NULL)) != -1) {
		switch (opt) {
		case OPT_JSON: *json = true; break;
		case 'h': cli_help(help); return 1;
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

static int net_create(int argc, char **argv)
{
	static const char help[] =
		"Usage: brig network create [--subnet CIDR]\n"
		"\n"
		"Ensure the isolated bridge " BRIG_NETWORK_NAME " exists, with inter-container traffic off, on\n"
		"CIDR (default " BRIG_DEFAULT_SUBNET "). Safe when several processes race. Prints its id.\n"
		"\n"
		"      --subnet CIDR   Private IPv4 range, /8../28\n"
		"  -h, --help          Print this help\n";
	enum { OPT_SUBNET = CLI_OPT_SPEC_END };
	static const struct option longopts[] = {
		{"subnet", required_argument, NULL, OPT_SUBNET},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	brig_spec spec;
	brig_spec_init(&spec);
	brig_engine *e = NULL;
	char *id = NULL;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL, opt;
	while ((opt = cli_getopt("network create", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_SUBNET:
			if (cli_spec_set(&spec, "subnet", optarg) != 0)
				goto out;
			break;
		case 'h': rc = cli_help(help); goto out;
		default: goto out;
		}
	}
	if (optind < argc) {
		cli_usage("network create", "unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (cli_spec_set(&spec, "network", "isolated") != 0)
		goto out;
	if (cli_engine_open(&e) != 0)
		goto out;
	if (brig_network_ensure(e, &id, &spec, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	printf("%s\n", id ? id : BRIG_NETWORK_NAME);
	rc = 0;
out:
	free(id);
	brig_engine_free(e);
	brig_spec_clear(&spec);
	return rc;
}

static int net_rm(int argc, char **argv)
{
	static const char help[] =
		"Usage: brig network rm\n"
		"\n"
		"Remove the isolated bridge " BRIG_NETWORK_NAME " once nothing is attached; refused (exit 125,\n"
		"naming what is attached) while something is. Absent counts as removed.\n"
		"\n"
		"  -h, --help   Print this help\n";
	int r = simple_opts("network rm", argc, argv, help, NULL);
	if (r != 0)
		return r == 1 ? 0 : r;
	brig_engine *e = NULL;
	if (cli_engine_open(&e) != 0)
		return CLI_EXIT_FAIL;
	brig_error *err = NULL;
	int rc = 0;
	if (brig_network_remove(e, &err) != 0)
		rc = cli_error(err, NULL);
	else
		printf("%s\n", BRIG_NETWORK_NAME);
	brig_engine_free(e);
	return rc;
}

static const char *str_at(json_t *j, const char *path0, const char *path1)
{
	json_t *v = json_object_get(j, path0);
	if (path1)
		v = json_object_get(v, path1);
	return json_string_value(v);
}

static void put_kv(const char *key, const char *value)
{
	printf("%-12s ", key);
	cli_put_safe(value && *value ? value : "-");
	putchar('\n');
}

/* `network inspect --json`: the fields the human form shows, named once,
 * not Docker's raw object (whose shape changes between API versions). */
static json_t *network_json(json_t *net, json_t *cfg0, const char *icc, const char *managed)
{
	json_t *attached = json_array();
	const char *cid;
	json_t *ep;
	json_object_foreach (json_object_get(net, "Containers"), cid, ep) {
		json_array_append_new(attached, json_pack("{s:s?,s:s?}", "name", str_at(ep, "Name", NULL), "address",
							  str_at(ep, "IPv4Address", NULL)));
	}
	return json_pack("{s:s?,s:s?,s:s?,s:s?,s:s?,s:b,s:b,s:o}", "name", str_at(net, "Name", NULL), "id",
			 str_at(net, "Id", NULL), "driver", str_at(net, "Driver", NULL), "subnet",
			 json_string_value(json_object_get(cfg0, "Subnet")), "gateway",
			 json_string_value(json_object_get(cfg0, "Gateway")), "icc",
			 !(icc && strcmp(icc, "false") == 0), "managed", managed && strcmp(managed, "1") == 0,
			 "attached", attached);
}

static int net_inspect(int argc, char **argv)
{
	static const char help[] =
		"Usage: brig network inspect [--json]\n"
		"\n"
		"Show the isolated bridge " BRIG_NETWORK_NAME ": id, subnet, gateway, whether inter-container\n"
		"traffic is on, and the containers attached. --json prints them as one object:\n"
		"{name, id, driver, subnet, gateway, icc, managed, attached: [{name, address}]}.\n"
		"\n"
		"      --json   Print JSON\n"
		"  -h, --help   Print this help\n";
	bool json = false;
	int r = simple_opts("network inspect", argc, argv, help, &json);
	if (r != 0)
		return r == 1 ? 0 : r;
	brig_engine *e = NULL;
	json_t *net = NULL;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_engine_open(&e) != 0)
		goto out;
	int ir = brig_engine_network_inspect(e, &net, BRIG_NETWORK_NAME, &err);
	if (ir == BRIG_ENOTFOUND) {
		brig_error_free(err);
		cli_fail("network %s does not exist (it is created on first use of --network isolated, or by "
			 "`brig network create`)",
			 BRIG_NETWORK_NAME);
		goto out;
	}
	if (ir != 0) {
		cli_error(err, NULL);
		goto out;
	}
	json_t *cfg0 = json_array_get(json_object_get(json_object_get(net, "IPAM"), "Config"), 0);
	const char *icc = str_at(net, "Options", "com.docker.network.bridge.enable_icc");
	const char *managed = str_at(net, "Labels", BRIG_LABEL_MANAGED);
	if (json) {
		rc = cli_print_json(network_json(net, cfg0, icc, managed));
		goto out;
	}
	put_kv("name", str_at(net, "Name", NULL));
	put_kv("id", str_at(net, "Id", NULL));
	put_kv("driver", str_at(net, "Driver", NULL));
	put_kv("subnet", json_string_value(json_object_get(cfg0, "Subnet")));
	put_kv("gateway", json_string_value(json_object_get(cfg0, "Gateway")));
	put_kv("icc", icc && strcmp(icc, "false") == 0 ? "off" : "on");
	put_kv("brig", managed && strcmp(managed, "1") == 0 ? "yes" : "no (not created by brig)");
	json_t *containers = json_object_get(net, "Containers");
	printf("%-12s %zu\n", "attached", json_object_size(containers));
	const char *cid;
	json_t *ep;
	json_object_foreach (containers, cid, ep) {
		fputs("  ", stdout);
		cli_put_safe(str_at(ep, "Name", NULL));
		putchar(' ');
		cli_put_safe(str_at(ep, "IPv4Address", NULL));
		putchar('\n');
	}
	rc = 0;
out:
	json_decref(net);
	brig_engine_free(e);
	return rc;
}

int cmd_network(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} subs[] = {{"create", net_create}, {"rm", net_rm}, {"remove", net_rm}, {"inspect", net_inspect}};
	if (argc < 2)
		return cli_help(usage);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		return cli_help(usage);
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		if (strcmp(argv[1], subs[i].name) == 0) {
			optind = 0;
			return subs[i].fn(argc - 1, argv + 1);
		}
	}
	return cli_usage("network", "unknown command '%s' (create, rm, inspect)", argv[1]);
}
