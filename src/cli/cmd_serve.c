/* cmd_serve.c — `brig serve`: brig's HTTP API (src/serve/) in the
 * foreground, logs on stderr; SIGTERM or SIGINT drains and exits. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "brig/store.h"
#include "cli/cli.h"
#include "serve/serve.h"
#include "util/util.h"

static const char serve_usage[] =
	"Usage: brig serve [OPTIONS]\n"
	"\n"
	"Serve brig's HTTP API (/v1/…, JSON; the OpenAPI document is at /v1/openapi.json)\n"
	"in the foreground, one log line per request on stderr. SIGTERM drains: no new\n"
	"connections, calls in flight finish (up to --drain), then the server exits.\n"
	"\n"
	"      --listen ADDR       unix:///PATH (default unix://" SERVE_DEFAULT_SOCKET ", mode 0660 group\n"
	"                          brig when that group exists, else 0600) or tcp://HOST:PORT\n"
	"                          (needs --tls-cert, --tls-key and --tokens)\n"
	"      --tls-cert FILE, --tls-key FILE\n"
	"                          PEM certificate and key for tcp://\n"
	"      --tokens FILE       One \"TOKEN NS[,NS…]\" a line (* for every namespace); the\n"
	"                          file must be mode 0600. Clients send Authorization: Bearer\n"
	"      --image IMG         Image of new computers whose spec names none\n"
	"                          (default $BRIG_IMAGE, then the spec's default)\n"
	"      --store URL         Session store (default $BRIG_STORE, then brig's data dir)\n"
	"      --body-max BYTES    Largest request body held in memory (default 16 MiB)\n"
	"      --upload-max BYTES  Largest tar in or checkpoint import, kept in a file under\n"
	"                          $TMPDIR, else /var/tmp (default 4 GiB)\n"
	"      --header-timeout S  Idle seconds before a connection is dropped (default 30)\n"
	"      --drain S           Seconds calls in flight get on stop (default 60); execs and\n"
	"                          runs still going then are cancelled and answered\n"
	"      --allow-runtime NAME  A runtime clients' specs may name (repeatable; default:\n"
	"                          none, the daemon's default only)\n"
	"      --allow-custom-seccomp  Clients' specs may replace brig's seccomp profile\n"
	"      --allow-publish-address ADDR  A host address besides loopback clients may\n"
	"                          publish ports on (repeatable)\n"
	"      --max-transfers N   Tar in/out and runs of one token at once (default 4;\n"
	"                          more are answered 429)\n"
	"      --max-streams N     Attach streams one token has open at once (default 32;\n"
	"                          more are answered 429)\n"
	"      --pool IMAGE=N      Keep N started computers of IMAGE's default spec warm\n"
	"                          (repeatable; N 1..64): a create of that spec claims one\n"
	"      --pool-max-age S    Replace pool members older than S seconds (default 1800)\n"
	"      --routes            Print the route table and exit\n"
	"  -h, --help              Print this help\n";

enum {
	OPT_LISTEN = 1000,
	OPT_CERT,
	OPT_KEY,
	OPT_TOKENS,
	OPT_IMAGE,
	OPT_STORE,
	OPT_BODY,
	OPT_UPLOAD,
	OPT_HTO,
	OPT_DRAIN,
	OPT_ROUTES,
	OPT_ALLOW_RUNTIME,
	OPT_ALLOW_SECCOMP,
	OPT_ALLOW_PUBLISH,
	OPT_MAX_TRANSFERS,
	OPT_MAX_STREAMS,
	OPT_POOL,
	OPT_POOL_AGE
};

/* IMAGE=N of --pool into c (IMAGE borrowed from arg). */
static int parse_pool(serve_pool_conf *c, char *arg)
{
	char *eq = strrchr(arg, '=');
	if (!eq || eq == arg || !eq[1])
		return cli_usage("serve", "--pool %s: give IMAGE=N (e.g. --pool brig-sandbox:local=4)", arg);
	*eq = '\0';
	int64_t n;
	if (cli_parse_i64("--pool N", eq + 1, 1, SERVE_POOL_MAX, &n) != 0)
		return CLI_EXIT_FAIL;
	c->image = arg;
	c->size = (unsigned)n;
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"listen", required_argument, NULL, OPT_LISTEN},
		{"tls-cert", required_argument, NULL, OPT_CERT},
		{"tls-key", required_argument, NULL, OPT_KEY},
		{"tokens", required_argument, NULL, OPT_TOKENS},
		{"image", required_argument, NULL, OPT_IMAGE},
		{"store", required_argument, NULL, OPT_STORE},
		{"body-max", required_argument, NULL, OPT_BODY},
		{"upload-max", required_argument, NULL, OPT_UPLOAD},
		{"header-timeout", required_argument, NULL, OPT_HTO},
		{"drain", required_argument, NULL, OPT_DRAIN},
		{"routes", no_argument, NULL, OPT_ROUTES},
		{"allow-runtime", required_argument, NULL, OPT_ALLOW_RUNTIME},
		{"allow-custom-seccomp", no_argument, NULL, OPT_ALLOW_SECCOMP},
		{"allow-publish-address", required_argument, NULL, OPT_ALLOW_PUBLISH},
		{"max-transfers", required_argument, NULL, OPT_MAX_TRANSFERS},
		{"max-streams", required_argument, NULL, OPT_MAX_STREAMS},
		{"pool", required_argument, NULL, OPT_POOL},
		{"pool-max-age", required_argument, NULL, OPT_POOL_AGE},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	serve_config cfg = {.stop_fd = -1};
	serve_pool_conf pools[16];
	const char *store = NULL;
	const char *runtimes[64], *publish[64];
	static char canon[64][INET6_ADDRSTRLEN];
	brig_port port;
	int64_t v;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("serve", argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_LISTEN: cfg.listen = optarg; break;
		case OPT_CERT: cfg.tls_cert = optarg; break;
		case OPT_KEY: cfg.tls_key = optarg; break;
		case OPT_TOKENS: cfg.tokens = optarg; break;
		case OPT_IMAGE: cfg.image = optarg; break;
		case OPT_STORE: store = optarg; break;
		case OPT_BODY:
			if (cli_parse_i64("--body-max", optarg, 1024, (int64_t)1 << 32, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.body_max = (size_t)v;
			break;
		case OPT_UPLOAD:
			if (cli_parse_i64("--upload-max", optarg, 1024, (int64_t)1 << 40, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.upload_max = (size_t)v;
			break;
		case OPT_HTO:
			if (cli_parse_i64("--header-timeout", optarg, 1, 3600, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.header_timeout_s = (unsigned)v;
			break;
		case OPT_DRAIN:
			if (cli_parse_i64("--drain", optarg, 1, 86400, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.drain_s = (unsigned)v;
			break;
		case OPT_ALLOW_RUNTIME:
			if (cfg.allow_runtime_count == 64)
				return cli_usage("serve", "at most 64 --allow-runtime");
			runtimes[cfg.allow_runtime_count++] = optarg;
			cfg.allow_runtimes = runtimes;
			break;
		case OPT_ALLOW_SECCOMP: cfg.allow_custom_seccomp = true; break;
		case OPT_ALLOW_PUBLISH: {
			/* spelled as brig_port_parse keeps a host address */
			cleanup_free char *probe = xasprintf(strchr(optarg, ':') ? "[%s]:1:1" : "%s:1:1", optarg);
			brig_error *perr = NULL;
			if (cfg.allow_publish_count == 64)
				return cli_usage("serve", "at most 64 --allow-publish-address");
			if (brig_port_parse(&port, probe, &perr) != 0) {
				brig_error_free(perr);
				return cli_usage("serve",
						 "--allow-publish-address %s: give a numeric IPv4 or IPv6 address",
						 optarg);
			}
			snprintf(canon[cfg.allow_publish_count], sizeof canon[0], "%s", port.host_ip);
			publish[cfg.allow_publish_count] = canon[cfg.allow_publish_count];
			cfg.allow_publish_count++;
			cfg.allow_publish = publish;
			break;
		}
		case OPT_MAX_TRANSFERS:
			if (cli_parse_i64("--max-transfers", optarg, 1, 4096, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.heavy_max = (unsigned)v;
			break;
		case OPT_MAX_STREAMS:
			if (cli_parse_i64("--max-streams", optarg, 1, 4096, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.streams_max = (unsigned)v;
			break;
		case OPT_POOL:
			if (cfg.n_pools == sizeof pools / sizeof pools[0])
				return cli_usage("serve", "--pool: at most %zu pools", sizeof pools / sizeof pools[0]);
			if (parse_pool(&pools[cfg.n_pools], optarg) != 0)
				return CLI_EXIT_FAIL;
			cfg.pools = pools;
			cfg.n_pools++;
			break;
		case OPT_POOL_AGE:
			if (cli_parse_i64("--pool-max-age", optarg, 1, 7 * 86400, &v) != 0)
				return CLI_EXIT_FAIL;
			cfg.pool_max_age_s = (unsigned)v;
			break;
		case OPT_ROUTES: serve_routes_write(stdout); return 0;
		case 'h': return cli_help(serve_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("serve", "unexpected argument '%s'", argv[optind]);
	if (!cfg.image) {
		const char *img = getenv("BRIG_IMAGE");
		cfg.image = img && *img ? img : NULL;
	}
	brig_store *s = NULL;
	brig_engine *e = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_store_open(&s, store) != 0 || cli_engine_open(&e) != 0)
		goto out;
	/* Audit rows are written off the command's path (issue 16: ~1 ms of a
	 * tool call); closing the store writes what is queued. */
	brig_error *aerr = NULL;
	if (brig_store_audit_background(s, &aerr) != 0)
		fprintf(stderr, "brig: %s: audit rows are written inline\n", brig_error_message(aerr));
	brig_error_free(aerr);
	cfg.engine = e;
	cfg.store = s;
	/* A client that left must not kill the server mid-answer. */
	signal(SIGPIPE, SIG_IGN);
	cfg.stop_fd = cli_cancel_install();
	brig_error *err = NULL;
	rc = serve_run(&cfg, &err) == 0 ? 0 : cli_error(err, "serve");
out:
	brig_store_close(s);
	brig_engine_free(e);
	return rc;
}
