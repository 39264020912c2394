/* cmd_gc.c — `brig gc`: removes brig's leftovers and lists each object as
 * it goes (stdout), the count on stderr. Nothing that is not brig's is
 * touched: the library only looks at brig.managed=1 objects. */
#include <stdio.h>
#include <string.h>

#include "brig/sandbox.h"
#include "cli/cli.h"

static const char usage[] = "Usage: brig gc [--dry-run] [--retention D] [--label KEY=VALUE] [--json]\n"
			    "\n"
			    "Remove brig's leftovers: runs past their deadline (their brig died), stopped\n"
			    "computers older than the retention age, containers stuck in 'created' (a creator\n"
			    "died), brig volumes whose container is gone, and brig-init volumes of other\n"
			    "brig builds that no container uses. Prints each object as `KIND NAME (why)`;\n"
			    "the count goes to stderr.\n"
			    "\n"
			    "      --dry-run            Only list what would be removed\n"
			    "      --retention D        Age after which stopped computers go (24h default;\n"
			    "                           3600s, 90m, 7d; 'never' keeps them)\n"
			    "      --label KEY=VALUE    Only objects that also carry this label\n"
			    "      --json               Print a JSON array of {kind, name, why}\n"
			    "  -h, --help               Print this help\n";

typedef struct gc_report {
	bool json;
	json_t *items;
} gc_report;

static void on_report(const char *kind, const char *name, const char *why, void *payload)
{
	gc_report *r = payload;
	if (r->json) {
		json_array_append_new(r->items, json_pack("{s:s, s:s, s:s}", "kind", kind ? kind : "", "name",
							  name ? name : "", "why", why ? why : ""));
		return;
	}
	cli_put_safe(kind);
	putchar(' ');
	cli_put_safe(name);
	fputs(" (", stdout);
	cli_put_safe(why);
	fputs(")\n", stdout);
	fflush(stdout);
}

int cmd_gc(int argc, char **argv)
{
	enum { OPT_DRY_RUN = CLI_OPT_SPEC_END, OPT_RETENTION, OPT_LABEL, OPT_JSON };
	static const struct option longopts[] = {
		{"dry-run", no_argument, NULL, OPT_DRY_RUN},
		{"retention", required_argument, NULL, OPT_RETENTION},
		{"label", required_argument, NULL, OPT_LABEL},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	gc_report rep = {0};
	brig_gc_opts opts = {.version = BRIG_GC_OPTS_VERSION, .report = on_report, .payload = &rep};
	int opt;
	while ((opt = cli_getopt("gc", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_DRY_RUN: opts.dry_run = true; break;
		case OPT_RETENTION:
			if (strcmp(optarg, "never") == 0) {
				opts.retention_s = -1;
			} else {
				int64_t ms;
				if (cli_parse_duration_ms("--retention", optarg, 1000, 3650LL * 86400 * 1000, &ms) != 0)
					return CLI_EXIT_FAIL;
				opts.retention_s = (ms + 999) / 1000;
			}
			break;
		case OPT_LABEL:
			if (!strchr(optarg, '='))
				return cli_usage("gc", "--label takes KEY=VALUE");
			opts.extra_label = optarg;
			break;
		case OPT_JSON: rep.json = true; break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("gc", "unexpected argument '%s'", argv[optind]);

	brig_engine *e = NULL;
	if (cli_engine_open(&e) != 0)
		return CLI_EXIT_FAIL;
	if (rep.json)
		rep.items = json_array();
	size_t removed = 0;
	brig_error *err = NULL;
	int rc = 0;
	if (brig_gc(e, &opts, &removed, &err) != 0)
		rc = cli_error(err, NULL);
	/* What was removed before a failure is still reported. */
	if (rep.json) {
		int jr = cli_print_json(rep.items);
		if (rc == 0)
			rc = jr;
	}
	if (opts.dry_run)
		cli_note("dry run: %zu object%s would be removed", removed, removed == 1 ? "" : "s");
	else
		cli_note("removed %zu object%s", removed, removed == 1 ? "" : "s");
	brig_engine_free(e);
	return rc;
}
