/* cmd_image.c — `brig image build` (the runtime images, from a lock, with no
 * registry and no network in the build) and `brig image ls` (what was built). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brig/image.h"
#include "cli/cli.h"
#include "util/util.h"

static const char usage[] =
	"Usage: brig image build [OPTIONS]\n"
	"       brig image ls [--json]\n"
	"\n"
	"build: builds a runtime image with no image registry. A Debian root filesystem is\n"
	"made with debootstrap (minbase) from the mirror this machine's apt sources name,\n"
	"cached by content hash; the agents profile adds the Claude Code and Codex CLIs\n"
	"fetched with `npm pack`. Versions come from the lock (image/brig-image.lock): the\n"
	"Debian package set is checked against it, npm tarballs against its sha512\n"
	"integrity. Docker receives only the Dockerfile, rootfs.tar and the npm tarballs,\n"
	"and builds with no network. Prints the image id; progress goes to stderr.\n"
	"Building a root filesystem needs root; a cached one does not.\n"
	"\n"
	"ls: the images brig built, from the record in the cache directory, and whether\n"
	"each tag still names that image in Docker's store.\n"
	"\n"
	"Options (build):\n"
	"      --profile P         minimal (default; tag " BRIG_IMAGE_MINIMAL_TAG ") or agents (adds\n"
	"                          Node.js, Claude Code and Codex; tag " BRIG_IMAGE_AGENTS_TAG ")\n"
	"  -t, --tag T             Tag the image T instead\n"
	"      --dry-run           Prepare the context (fetching what the cache lacks) and print\n"
	"                          its files and size; send nothing to Docker\n"
	"      --offline           Use only what is cached: never run debootstrap or npm\n"
	"      --no-cache          Build the root filesystem again even when it is cached\n"
	"      --update-lock       Record the package set that was built into the lock instead of\n"
	"                          checking it (scripts/update-image-lock does this)\n"
	"      --lock FILE         The lock (default: brig-image.lock in the image directory)\n"
	"      --image-dir DIR     Dockerfiles and lock (default $BRIG_IMAGE_DIR, then the\n"
	"                          source tree's image/)\n"
	"      --cache-dir DIR     Cache (default $XDG_CACHE_HOME/brig, /var/cache/brig as root,\n"
	"                          else ~/.cache/brig)\n"
	"      --apt-dir DIR       Where the apt sources are read (default /etc/apt)\n"
	"  -q, --quiet             No progress lines or summary on stderr (errors only)\n"
	"      --json              Print the result as JSON (files, sizes, stage timings)\n"
	"  -h, --help              Print this help\n";

enum {
	OPT_PROFILE = 0x300,
	OPT_DRY_RUN,
	OPT_OFFLINE,
	OPT_NO_CACHE,
	OPT_UPDATE_LOCK,
	OPT_LOCK,
	OPT_IMAGE_DIR,
	OPT_CACHE_DIR,
	OPT_APT_DIR,
	OPT_JSON,
};

static void human_size(char *out, size_t n, uint64_t b)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, n, "%llu B", (unsigned long long)b);
	else
		snprintf(out, n, "%.1f %s", v, units[u]);
}

static void print_progress(const char *stage, const char *line, void *payload)
{
	(void)payload;
	cli_note("%s: %s", stage, line);
}

static void print_stages(const brig_image_result *res, const char *what)
{
	char buf[1024];
	size_t off = 0;
	for (size_t i = 0; i < res->stage_count && off < sizeof buf; i++) {
		char secs[32];
		cli_format_secs(secs, sizeof secs, res->stages[i].ms);
		off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s %s%s", i ? ", " : "", res->stages[i].name,
					secs, res->stages[i].cached ? " (cached)" : "");
	}
	char total[32];
	cli_format_secs(total, sizeof total, res->total_ms);
	cli_note("%s in %s: %s", what, total, off ? buf : "no stage ran");
}

static void print_context(const brig_image_result *res)
{
	char total[32], tar[32];
	human_size(total, sizeof total, res->context_bytes);
	human_size(tar, sizeof tar, res->context_tar_bytes);
	printf("Build context of %s (profile %s): %zu files, %llu bytes (%s); tar stream %llu bytes (%s).\n", res->tag,
	       res->profile, res->file_count, (unsigned long long)res->context_bytes, total,
	       (unsigned long long)res->context_tar_bytes, tar);
	printf("Nothing was sent to Docker.\n\n");
	printf("%14s  %-28s  %s\n", "SIZE", "NAME", "FROM");
	for (size_t i = 0; i < res->file_count; i++) {
		const brig_image_file *f = &res->files[i];
		printf("%14llu  ", (unsigned long long)f->size);
		cli_put_safe(f->name);
		printf("%*s  ", (int)(strlen(f->name) < 28 ? 28 - strlen(f->name) : 0), "");
		cli_put_safe(f->origin ? f->origin : "");
		if (f->source) {
			printf(" (");
			cli_put_safe(f->source);
			printf(")");
		}
		printf("\n");
	}
}

static int image_build(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"profile", required_argument, NULL, OPT_PROFILE},
		{"tag", required_argument, NULL, 't'},
		{"dry-run", no_argument, NULL, OPT_DRY_RUN},
		{"offline", no_argument, NULL, OPT_OFFLINE},
		{"no-cache", no_argument, NULL, OPT_NO_CACHE},
		{"update-lock", no_argument, NULL, OPT_UPDATE_LOCK},
		{"lock", required_argument, NULL, OPT_LOCK},
		{"image-dir", required_argument, NULL, OPT_IMAGE_DIR},
		{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
		{"apt-dir", required_argument, NULL, OPT_APT_DIR},
		{"quiet", no_argument, NULL, 'q'},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	brig_image_build_opts o = {.version = BRIG_IMAGE_BUILD_OPTS_VERSION, .progress = print_progress};
	bool json = false, quiet = false;
	int opt;
	brig_error *err = NULL;
	optind = 0;
	while ((opt = cli_getopt("image build", argc, argv, "+:ht:q", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_PROFILE:
			if (brig_image_profile_parse(&o.profile, optarg, &err) != 0)
				return cli_error(err, "--profile");
			break;
		case 't': o.tag = optarg; break;
		case OPT_DRY_RUN: o.dry_run = true; break;
		case OPT_OFFLINE: o.offline = true; break;
		case OPT_NO_CACHE: o.no_cache = true; break;
		case OPT_UPDATE_LOCK: o.update_lock = true; break;
		case OPT_LOCK: o.lock_path = optarg; break;
		case OPT_IMAGE_DIR: o.image_dir = optarg; break;
		case OPT_CACHE_DIR: o.cache_dir = optarg; break;
		case OPT_APT_DIR: o.apt_dir = optarg; break;
		case 'q':
			o.progress = NULL;
			quiet = true;
			break;
		case OPT_JSON: json = true; break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("image build", "unexpected argument '%s'", argv[optind]);

	brig_engine *e = NULL;
	if (!o.dry_run && cli_engine_open(&e) != 0)
		return CLI_EXIT_FAIL;
	brig_image_result res;
	int r = brig_image_build(e, &res, &o, &err);
	int rc = 0;
	if (r != 0) {
		cli_error(err, NULL);
		rc = CLI_EXIT_FAIL;
	} else {
		if (res.lock_updated)
			cli_note("lock %s updated%s%s", res.lock_path,
				 res.lock_changes ? ":\n" : " (no package changed)",
				 res.lock_changes ? res.lock_changes : "");
		if (!quiet)
			print_stages(&res, o.dry_run ? "context ready" : "built");
		if (json)
			rc = cli_print_json(brig_image_result_to_json(&res));
		else if (o.dry_run)
			print_context(&res);
		else
			printf("%s\n", res.image_id);
		if (!o.dry_run && !json && !quiet) {
			char total[32];
			human_size(total, sizeof total, res.context_tar_bytes);
			cli_note("%s is in the image store (%zu files, %s sent to Docker)", res.tag, res.file_count,
				 total);
		}
	}
	brig_image_result_clear(&res);
	brig_engine_free(e);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* `image ls --json`: an array of records sorted by tag, each carrying the
 * record fields the library documents (brig_image_records) plus tag and
 * state, like every other listing; anything else in the file stays out. */
static int print_records_json(json_t *rec)
{
	static const char *const fields[] = {"id",       "profile",       "lock_sha256", "rootfs_key",
					     "built_at", "context_bytes", "state"};
	size_t n = json_object_size(rec), k = 0;
	const char **tags = xcalloc(n ? n : 1, sizeof *tags);
	const char *tag;
	json_t *v;
	json_object_foreach (rec, tag, v)
		tags[k++] = tag;
	qsort(tags, k, sizeof *tags, cmp_str);
	json_t *arr = json_array();
	for (size_t i = 0; i < k; i++) {
		v = json_object_get(rec, tags[i]);
		json_t *o = json_pack("{s:s}", "tag", tags[i]);
		for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
			json_t *fv = json_object_get(v, fields[f]);
			json_object_set(o, fields[f], fv ? fv : json_null());
		}
		json_array_append_new(arr, o);
	}
	free(tags);
	json_decref(rec);
	return cli_print_json(arr);
}

static int image_ls(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool json = false;
	const char *cache_dir = NULL;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("image ls", argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_JSON: json = true; break;
		case OPT_CACHE_DIR: cache_dir = optarg; break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("image ls", "unexpected argument '%s'", argv[optind]);
	brig_error *err = NULL;
	json_t *rec = NULL;
	if (brig_image_records(&rec, cache_dir, &err) != 0)
		return cli_error(err, NULL);
	brig_engine *e = NULL;
	if (cli_engine_open(&e) != 0) {
		json_decref(rec);
		return CLI_EXIT_FAIL;
	}
	/* Whether each tag still names the image brig recorded. */
	const char *tag;
	json_t *v;
	json_object_foreach (rec, tag, v) {
		json_t *img = NULL;
		const char *state = "missing";
		if (brig_engine_image_inspect(e, &img, tag, &err) == 0) {
			const char *id = json_string_value(json_object_get(img, "Id"));
			const char *want = json_string_value(json_object_get(v, "id"));
			state = id && want && strcmp(id, want) == 0 ? "present" : "replaced";
		}
		brig_error_free(err);
		err = NULL;
		json_decref(img);
		if (json_is_object(v))
			json_object_set_new(v, "state", json_string(state));
	}
	brig_engine_free(e);
	if (json)
		return print_records_json(rec);
	printf("%-28s  %-8s  %-19s  %-20s  %s\n", "TAG", "PROFILE", "IMAGE ID", "BUILT", "STATE");
	json_object_foreach (rec, tag, v) {
		const char *id = json_string_value(json_object_get(v, "id"));
		char shortid[20] = "-";
		if (id)
			snprintf(shortid, sizeof shortid, "%.19s", id);
		const char *profile = json_string_value(json_object_get(v, "profile"));
		const char *built = json_string_value(json_object_get(v, "built_at"));
		/* The record is a file anyone with access to the cache could
		 * edit: its strings are shown through cli_put_safe. */
		char line[512];
		snprintf(line, sizeof line, "%-28.28s  %-8.8s  %-19s  %-20.20s  %s", tag, profile ? profile : "-",
			 shortid, built ? built : "-", json_string_value(json_object_get(v, "state")));
		cli_put_safe(line);
		printf("\n");
	}
	json_decref(rec);
	return 0;
}

int cmd_image(int argc, char **argv)
{
	if (argc < 2)
		return cli_usage("image", "a subcommand is required: build or ls");
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		return cli_help(usage);
	if (strcmp(argv[1], "build") == 0)
		return image_build(argc - 1, argv + 1);
	if (strcmp(argv[1], "ls") == 0)
		return image_ls(argc - 1, argv + 1);
	return cli_usage("image", "unknown subcommand '%s' (build or ls)", argv[1]);
}
