/* cmd_version.c — `brig version`: brig's own version, the daemon's, and
 * the Engine API version the two negotiated. */
#include <stdio.h>
#include <string.h>

#include "brig/common.h"
#include "brig/engine.h"
#include "cli/cli.h"

static const char usage[] = "Usage: brig version [--json]\n"
			    "\n"
			    "Show brig's version, the Docker daemon's, and the Engine API version in use\n"
			    "(the lower of brig's " BRIG_ENGINE_API_VERSION " and the daemon's).\n"
			    "\n"
			    "      --json   Print JSON: {version, api_version, daemon: Docker's /version object}\n"
			    "  -h, --help   Print this help\n";

static void put_kv(const char *key, const char *value)
{
	printf(" %-14s ", key);
	cli_put_safe(value && *value ? value : "-");
	putchar('\n');
}

int cmd_version(int argc, char **argv)
{
	enum { OPT_JSON = CLI_OPT_SPEC_END };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool json = false;
	int opt;
	while ((opt = cli_getopt("version", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_JSON: json = true; break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("version", "unexpected argument '%s'", argv[optind]);

	if (!json) {
		printf("client:\n");
		put_kv("version", BRIG_VERSION);
		put_kv("api_version", BRIG_ENGINE_API_VERSION);
		fflush(stdout);
	}
	/* brig's own version is printed even when no daemon answers; the
	 * exit code still says the daemon part failed. */
	brig_engine *e = NULL;
	json_t *dv = NULL;
	brig_error *err = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_engine_open(&e) != 0)
		goto out;
	if (brig_engine_version(e, &dv, &err) != 0) {
		cli_error(err, NULL);
		goto out;
	}
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "version", json_string(BRIG_VERSION));
		json_object_set_new(o, "api_version", json_string(brig_engine_api_version(e)));
		json_object_set(o, "daemon", dv);
		rc = cli_print_json(o);
		goto out;
	}
	printf("daemon:\n");
	put_kv("version", json_string_value(json_object_get(dv, "Version")));
	put_kv("api_version", json_string_value(json_object_get(dv, "ApiVersion")));
	put_kv("min_api", json_string_value(json_object_get(dv, "MinAPIVersion")));
	const char *os = json_string_value(json_object_get(dv, "Os"));
	const char *arch = json_string_value(json_object_get(dv, "Arch"));
	char osarch[128];
	snprintf(osarch, sizeof osarch, "%s/%s", os ? os : "?", arch ? arch : "?");
	put_kv("os/arch", osarch);
	put_kv("kernel", json_string_value(json_object_get(dv, "KernelVersion")));
	printf("negotiated:\n");
	put_kv("api_version", brig_engine_api_version(e));
	rc = 0;
out:
	json_decref(dv);
	brig_engine_free(e);
	return rc;
}
