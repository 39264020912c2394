/* cmd_lifecycle.c — the commands that act on computers by name: pause,
 * resume, stop, destroy, inspect and ls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brig/sandbox.h"
#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "util/util.h"

typedef int (*verb_fn)(brig_engine *e, const char *ref, brig_error **err);

/* Whether ref names a container. 0 yes, BRIG_ENOTFOUND no; otherwise the
 * engine's error, printed (CLI_EXIT_FAIL). */
static int exists(brig_engine *e, const char *ref)
{
	json_t *j = NULL;
	brig_error *err = NULL;
	int r = brig_engine_container_inspect(e, &j, ref, &err);
	json_decref(j);
	if (r == 0 || r == BRIG_ENOTFOUND) {
		brig_error_free(err);
		return r;
	}
	return cli_error(err, NULL);
}

/* pause, resume, stop and destroy: each takes one or more NAMEs (name or
 * container id) or one session (its current generation, or --gen), acts on
 * each in turn, prints the names it handled and exits 125 when any failed.
 * destroy looks first, as `docker rm` does: a computer that does not exist
 * is an error (exit 1) unless --force; the library call stays idempotent. */
/* Tells the session store what a verb did to a session's computer (c, as
 * it was before). Returns 0 or CLI_EXIT_FAIL (message printed: the
 * computer changed, the store did not). */
static int mark_store(const cli_target *t, const brig_computer *c, brig_store_state state)
{
	if (!c || !c->ns || !c->agent || !c->session || !c->generation)
		return 0;
	brig_store *s = NULL;
	int rc = cli_store_open_existing(&s, t->store);
	if (rc == 0 && !s)
		return 0;
	brig_error *err = NULL;
	if (rc == 0 && brig_session_mark(s, c->ns, c->agent, c->session, c->generation, state, &err) != 0)
		rc = cli_error(err, NULL);
	if (rc)
		cli_note("%s: the session store still has %s/%s/%s as it was; the next brig up finds out", c->name,
			 c->ns, c->agent, c->session);
	brig_store_close(s);
	return rc;
}

/* name_verb through a brig server: the same output and exit codes. */
static int remote_verb(int argc, char **argv, const char *verb, const cli_target *t, bool force, bool must_exist)
{
	int n = t->id_given ? 1 : argc - optind;
	if (t->id_given && optind < argc)
		return cli_usage(verb, "give either NAME or --ns/--agent/--session, not both");
	cli_remote *r = NULL;
	cleanup_free char *first = NULL;
	if (n <= 0) /* the usage message */
		return cli_remote_target(NULL, verb, t, NULL, &first);
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	int rc = 0;
	bool missing = false;
	for (int i = 0; i < n; i++) {
		const char *name = t->id_given ? NULL : argv[optind + i];
		cleanup_free char *path = NULL, *action = NULL, *shown = NULL;
		int x = cli_remote_target(r, verb, t, name, &path);
		if (x == CLI_EXIT_FAIL) {
			rc = x;
			continue;
		}
		/* what the direct path prints: NAME as given, or the session's
		 * container name */
		json_t *j = NULL;
		int status = 404;
		if (x == 0 && (must_exist || t->id_given) &&
		    cli_remote_request(r, "GET", path, NULL, &status, &j) != 0) {
			rc = CLI_EXIT_FAIL;
			continue;
		}
		if (status != 404)
			shown = xstrdup(json_string_value(json_object_get(j, "name"))
						? json_string_value(json_object_get(j, "name"))
						: "?");
		json_decref(j);
		if (!shown && name)
			shown = xstrdup(name);
		if (!shown) {
			char buf[BRIG_NAME_SIZE];
			brig_identity id = {t->id.ns, t->id.agent, t->id.session, 1};
			shown = xstrdup(brig_identity_name(buf, &id, NULL) == 0 ? buf : t->id.session);
		}
		if (must_exist && (x == 1 || status == 404)) {
			if (!force) {
				cli_note("no such computer: %s (with --force, destroy removes whatever it left and "
					 "succeeds)",
					 shown);
				missing = true;
				continue;
			}
			if (x == 1) { /* nothing the server can name */
				printf("%s\n", shown);
				fflush(stdout);
				continue;
			}
		}
		if (x == 1) {
			rc = cli_fail("no computer named %s", name);
			continue;
		}
		if (strcmp(verb, "destroy") == 0)
			x = cli_remote_call(r, "DELETE", path, NULL, &j);
		else {
			action = xasprintf("%s/%s", path, verb);
			x = cli_remote_call(r, "POST", action, NULL, &j);
		}
		json_decref(j);
		if (x != 0) {
			rc = x;
			continue;
		}
		printf("%s\n", shown);
		fflush(stdout);
	}
	cli_remote_free(r);
	return rc ? rc : missing ? 1 : 0;
}

static int name_verb(int argc, char **argv, const char *verb, verb_fn fn, const char *usage, bool must_exist,
		     brig_store_state mark)
{
	static const struct option longopts[] = {
		{"force", no_argument, NULL, 'f'},
		CLI_TARGET_LONGOPTS,
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	cli_target t = {0};
	bool force = false;
	int opt, rc = 0;
	while ((opt = cli_getopt(verb, argc, argv, must_exist ? ":hf" : ":h", must_exist ? longopts : longopts + 1,
				 NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &rc)) {
			if (rc)
				return rc;
			continue;
		}
		if (opt == 'h')
			return cli_help(usage);
		if (opt == 'f') {
			force = true;
			continue;
		}
		return CLI_EXIT_FAIL;
	}
	if (cli_remote_host())
		return remote_verb(argc, argv, verb, &t, force, must_exist);
	char *resolved = NULL;
	if (t.id_given || optind >= argc) {
		if (cli_target_name(&resolved, verb, &t, optind < argc ? argv[optind] : NULL, NULL, true) != 0)
			return CLI_EXIT_FAIL;
	}
	brig_engine *e = NULL;
	if (cli_engine_open(&e) != 0) {
		free(resolved);
		return CLI_EXIT_FAIL;
	}
	int n = resolved ? 1 : argc - optind;
	bool missing = false;
	for (int i = 0; i < n; i++) {
		const char *ref = resolved ? resolved : argv[optind + i];
		cleanup_free char *expanded = NULL; /* the computer a NAME prefix names */
		brig_error *err = NULL;
		if (must_exist && !force) {
			int x = exists(e, ref);
			if (x == BRIG_ENOTFOUND && !resolved) {
				int p = cli_name_prefix(e, ref, &expanded);
				if (p == 0) {
					ref = expanded;
					x = 0;
				} else if (p != 1) { /* ambiguous: refused, named */
					missing = true;
					continue;
				}
			}
			if (x == BRIG_ENOTFOUND) {
				cli_note("no such computer: %s (with --force, destroy removes whatever it left and "
					 "succeeds)",
					 ref);
				missing = true;
				continue;
			}
			if (x != 0) {
				rc = x;
				continue;
			}
		}
		/* Who it was, before destroy makes that unknowable. */
		brig_computer *before = NULL;
		if (brig_computer_get(e, &before, ref, NULL, NULL) == BRIG_ENOTFOUND && !resolved && !expanded &&
		    !must_exist) {
			int p = cli_name_prefix(e, ref, &expanded);
			if (p == 0) {
				ref = expanded;
				brig_computer_get(e, &before, ref, NULL, NULL);
			} else if (p != 1) {
				rc = p;
				continue;
			}
		}
		if (fn(e, ref, &err) != 0) {
			rc = cli_error(err, NULL);
			brig_computer_free(before);
			continue;
		}
		int mrc = mark_store(&t, before, mark);
		brig_computer_free(before);
		if (mrc)
			rc = mrc;
		printf("%s\n", ref);
		fflush(stdout);
	}
	brig_engine_free(e);
	free(resolved);
	return rc ? rc : missing ? 1 : 0;
}

/* Usage lines and options every name verb shares. */
#define VERB_USAGE(verb)                        \
	"Usage: brig " verb " NAME [NAME...]\n" \
	"       brig " verb " --ns NS --agent A --session S [--gen N] [--store URL]\n\n"
#define VERB_OPTIONS                                                              \
	"NAME may be a unique prefix of a computer's name (an ambiguous one is\n" \
	"refused, naming the computers it matches).\n"                            \
	"\n"                                                                      \
	"Options:\n" CLI_HELP_TARGET "  -h, --help              Print this help\n"

int cmd_pause(int argc, char **argv)
{
	return name_verb(
		argc, argv, "pause", brig_computer_pause,
		VERB_USAGE("pause") "Freeze computers with the cgroup freezer: memory, processes and files are kept,\n"
				    "nothing runs until `brig resume`. Exec into a paused computer is refused.\n"
				    "Pausing a paused computer succeeds.\n" VERB_OPTIONS,
		false, BRIG_STORE_PAUSED);
}

int cmd_resume(int argc, char **argv)
{
	return name_verb(argc, argv, "resume", brig_computer_resume,
			 VERB_USAGE("resume") "Thaw paused computers; their processes go on where they stopped.\n"
					      "Resuming a running computer succeeds.\n" VERB_OPTIONS,
			 false, BRIG_STORE_RUNNING);
}

int cmd_stop(int argc, char **argv)
{
	return name_verb(
		argc, argv, "stop", brig_computer_stop,
		VERB_USAGE("stop") "Stop computers. Their processes end and their /workspace and /runtime volumes\n"
				   "lose their contents (checkpoint first to keep them). Stopping a stopped computer\n"
				   "succeeds.\n"
				   "A session's computer is recorded as stopped in the session store: the next\n"
				   "`brig up`, `brig agent` or `brig exec --session` restores the session's latest\n"
				   "checkpoint into a new generation.\n" VERB_OPTIONS,
		false, BRIG_STORE_STOPPED);
}

int cmd_destroy(int argc, char **argv)
{
	return name_verb(argc, argv, "destroy", brig_computer_destroy,
			 "Usage: brig destroy [-f] NAME [NAME...]\n"
			 "       brig destroy [-f] --ns NS --agent A --session S [--gen N] [--store URL]\n"
			 "\n"
			 "Remove computers: the container and its volumes. A computer that does not exist\n"
			 "is an error (exit 1, as `docker rm`) unless --force. NAME may be a unique\n"
			 "prefix of a computer's name; an ambiguous one is refused (exit 1) naming the\n"
			 "computers it matches, and --force takes only full names. A session's computer is\n"
			 "recorded as destroyed in the session store (--store, $BRIG_STORE or the default):\n"
			 "the next `brig up` restores the session's latest checkpoint into a new generation.\n"
			 "\n"
			 "Options:\n" CLI_HELP_TARGET
			 "  -f, --force             Succeed for computers that do not exist (their volumes still go)\n"
			 "  -h, --help              Print this help\n",
			 true, BRIG_STORE_DESTROYED);
}

/* ---- inspect ---- */

static void put_time(int64_t unix_s)
{
	if (unix_s <= 0) {
		fputs("-", stdout);
		return;
	}
	time_t t = (time_t)unix_s;
	struct tm tm;
	char buf[64];
	gmtime_r(&t, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	fputs(buf, stdout);
}

static void put_field(const char *key, const char *value)
{
	printf("%-16s ", key);
	cli_put_safe(value && *value ? value : "-");
	putchar('\n');
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Flattens the effective spec into "spec.key: value" lines; arrays are
 * joined with commas, objects (labels) become spec.labels.KEY lines. */
static void put_json_fields(const char *prefix, json_t *j)
{
	const char *key;
	json_t *v;
	/* Sorted, so the human output is as stable as --json. */
	size_t n = json_object_size(j);
	const char **keys = xcalloc(n ? n : 1, sizeof *keys);
	size_t k = 0;
	json_object_foreach (j, key, v)
		keys[k++] = key;
	qsort(keys, k, sizeof *keys, cmp_str);
	for (size_t i = 0; i < k; i++) {
		v = json_object_get(j, keys[i]);
		char *full = xasprintf("%s.%s", prefix, keys[i]);
		if (json_is_object(v)) {
			if (json_object_size(v) == 0)
				put_field(full, "-");
			else
				put_json_fields(full, v);
		} else if (json_is_array(v)) {
			printf("%-16s ", full);
			size_t idx;
			json_t *el;
			if (json_array_size(v) == 0)
				fputs("-", stdout);
			json_array_foreach (v, idx, el) {
				if (idx)
					fputs(", ", stdout);
				if (json_is_string(el))
					cli_put_safe(json_string_value(el));
			}
			putchar('\n');
		} else if (json_is_string(v)) {
			put_field(full, json_string_value(v));
		} else if (json_is_integer(v)) {
			printf("%-16s %lld\n", full, (long long)json_integer_value(v));
		} else if (json_is_real(v)) {
			printf("%-16s %g\n", full, json_real_value(v));
		} else if (json_is_boolean(v)) {
			printf("%-16s %s\n", full, json_is_true(v) ? "true" : "false");
		} else {
			put_field(full, "-");
		}
		free(full);
	}
	free(keys);
}

/* The computer through a brig server. Returns 0 or CLI_EXIT_FAIL (printed). */
static int remote_get(brig_computer **out, const char *cmd, const cli_target *t, const char *name)
{
	*out = NULL;
	cli_remote *r = NULL;
	cleanup_free char *path = NULL;
	json_t *j = NULL;
	int rc = cli_remote_open(&r);
	if (rc == 0)
		rc = cli_remote_target(r, cmd, t, name, &path);
	if (rc == 1)
		rc = cli_fail("no computer named %s", name);
	if (rc == 0)
		rc = cli_remote_call(r, "GET", path, NULL, &j);
	if (rc == 0)
		*out = cli_remote_computer(j);
	json_decref(j);
	cli_remote_free(r);
	return rc;
}

int cmd_inspect(int argc, char **argv)
{
	static const char usage[] =
		"Usage: brig inspect [--json] NAME\n"
		"       brig inspect [--json] --ns NS --agent A --session S [--gen N] [--store URL]\n"
		"\n"
		"Show a computer (by name, a unique prefix of it, or container id): identity,\n"
		"state, image and the effective spec, as `key value` lines or, with --json,\n"
		"one object.\n"
		"\n"
		"Options:\n" CLI_HELP_TARGET "      --json              Print JSON\n"
		"  -h, --help              Print this help\n";
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
	while ((opt = cli_getopt("inspect", argc, argv, ":h", longopts, NULL)) != -1) {
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
		return cli_usage("inspect", "one NAME at a time");
	brig_engine *e = NULL;
	brig_computer *c = NULL;
	char *ref = NULL;
	int rc = CLI_EXIT_FAIL;
	if (cli_remote_host()) {
		if (remote_get(&c, "inspect", &t, optind < argc ? argv[optind] : NULL) != 0)
			goto out;
	} else {
		if (cli_target_name(&ref, "inspect", &t, optind < argc ? argv[optind] : NULL, NULL, true) != 0)
			goto out;
		if (cli_engine_open(&e) != 0)
			goto out;
		if (cli_computer_get(e, &c, &ref, !t.id_given) != 0)
			goto out;
	}
	if (json) {
		rc = cli_print_json(brig_computer_to_json(c));
		goto out;
	}
	char gen[16];
	snprintf(gen, sizeof gen, "%u", c->generation);
	put_field("name", c->name);
	put_field("id", c->id);
	put_field("ns", c->ns);
	put_field("agent", c->agent);
	put_field("session", c->session);
	put_field("generation", gen);
	put_field("state", c->state);
	put_field("image", c->image);
	put_field("image_id", c->image_id);
	put_field("harness", c->harness);
	put_field("network", c->network);
	put_field("spec_hash", c->spec_hash);
	printf("%-16s ", "created");
	put_time(c->created);
	putchar('\n');
	if (json_is_object(c->spec))
		put_json_fields("spec", c->spec);
	rc = 0;
out:
	free(ref);
	brig_computer_free(c);
	brig_engine_free(e);
	return rc;
}

/* ---- ls ---- */

static int cmp_computer(const void *pa, const void *pb)
{
	const brig_computer *a = *(brig_computer *const *)pa, *b = *(brig_computer *const *)pb;
	int r;
	if ((r = strcmp(a->ns ? a->ns : "", b->ns ? b->ns : "")) != 0)
		return r;
	if ((r = strcmp(a->agent ? a->agent : "", b->agent ? b->agent : "")) != 0)
		return r;
	if ((r = strcmp(a->session ? a->session : "", b->session ? b->session : "")) != 0)
		return r;
	if (a->generation != b->generation)
		return a->generation < b->generation ? -1 : 1;
	return strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

static size_t width(const char *s)
{
	return s ? strlen(s) : 1;
}

static void put_cell(const char *s, size_t w, bool last)
{
	const char *v = s && *s ? s : "-";
	cli_put_safe(v);
	if (!last)
		for (size_t i = strlen(v); i < w + 3; i++)
			putchar(' ');
}

/* GET /v1/computers?ns=&label= as brig_computer_list's answer. */
static int remote_list(brig_computer ***out, size_t *n, const char *ns, const char *label)
{
	*out = NULL;
	*n = 0;
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	brig_buf q; /* room for the escaped label, whatever its length */
	brig_buf_init(&q, 256 + (label ? 3 * strlen(label) : 0));
	brig_buf_puts(&q, "/v1/computers");
	char sep = '?';
	/* ns is checked (A-Z a-z 0-9 _ . -); the label is escaped */
	if (ns) {
		brig_buf_putf(&q, "%cns=%s", sep, ns);
		sep = '&';
	}
	if (label) {
		cleanup_free char *l = brig_urlencode(label);
		brig_buf_putf(&q, "%clabel=%s", sep, l);
	}
	json_t *j = NULL;
	int rc = cli_remote_call(r, "GET", brig_buf_cstr(&q), NULL, &j);
	brig_buf_free(&q);
	cli_remote_free(r);
	if (rc)
		return rc;
	json_t *arr = json_object_get(j, "computers");
	size_t count = json_array_size(arr);
	*out = xcalloc(count ? count : 1, sizeof **out);
	for (size_t i = 0; i < count; i++)
		(*out)[i] = cli_remote_computer(json_array_get(arr, i));
	*n = count;
	json_decref(j);
	return 0;
}

int cmd_ls(int argc, char **argv)
{
	static const char usage[] = "Usage: brig ls [--ns NS] [--label KEY=VALUE] [--json] [-q]\n"
				    "\n"
				    "List computers, sorted by namespace, agent, session and generation.\n"
				    "\n"
				    "      --ns NS              Only this namespace\n"
				    "      --label KEY=VALUE    Only computers that also carry this label\n"
				    "      --json               Print a JSON array\n"
				    "  -q, --quiet              Print names only\n"
				    "  -h, --help               Print this help\n";
	enum { OPT_JSON = CLI_OPT_SPEC_END, OPT_NS, OPT_LABEL };
	static const struct option longopts[] = {
		{"ns", required_argument, NULL, OPT_NS}, {"label", required_argument, NULL, OPT_LABEL},
		{"json", no_argument, NULL, OPT_JSON},   {"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
	};
	bool json = false, quiet = false;
	const char *ns = NULL, *label = NULL;
	int opt;
	while ((opt = cli_getopt("ls", argc, argv, ":hq", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_NS: ns = optarg; break;
		case OPT_LABEL: label = optarg; break;
		case OPT_JSON: json = true; break;
		case 'q': quiet = true; break;
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("ls", "unexpected argument '%s'", argv[optind]);
	brig_error *err = NULL;
	if (ns && brig_identity_check_name("ns", ns, &err) != 0)
		return cli_error(err, NULL);
	if (label && !strchr(label, '='))
		return cli_usage("ls", "--label takes KEY=VALUE");

	brig_engine *e = NULL;
	brig_computer **cs = NULL;
	size_t n = 0;
	int rc = CLI_EXIT_FAIL;
	if (cli_remote_host()) {
		if (remote_list(&cs, &n, ns, label) != 0)
			goto out;
	} else {
		if (cli_engine_open(&e) != 0)
			goto out;
		if (brig_computer_list(e, &cs, &n, ns, label, &err) != 0) {
			cli_error(err, NULL);
			goto out;
		}
	}
	if (n > 1)
		qsort(cs, n, sizeof *cs, cmp_computer);
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, brig_computer_to_json(cs[i]));
		rc = cli_print_json(arr);
		goto out;
	}
	if (quiet) {
		for (size_t i = 0; i < n; i++) {
			cli_put_safe(cs[i]->name);
			putchar('\n');
		}
		rc = 0;
		goto out;
	}
	enum { NCOL = 7 };
	static const char *const head[NCOL] = {"NAME", "NS", "AGENT", "SESSION", "GEN", "STATE", "CREATED"};
	size_t w[NCOL];
	for (int k = 0; k < NCOL; k++)
		w[k] = strlen(head[k]);
	char(*gens)[16] = xcalloc(n ? n : 1, sizeof *gens);
	char(*ages)[48] = xcalloc(n ? n : 1, sizeof *ages);
	for (size_t i = 0; i < n; i++) {
		snprintf(gens[i], sizeof gens[i], "%u", cs[i]->generation);
		cli_format_age(ages[i], sizeof ages[i], cs[i]->created);
		const char *cells[NCOL] = {cs[i]->name, cs[i]->ns,    cs[i]->agent, cs[i]->session,
					   gens[i],     cs[i]->state, ages[i]};
		for (int k = 0; k < NCOL; k++)
			if (width(cells[k]) > w[k])
				w[k] = width(cells[k]);
	}
	for (int k = 0; k < NCOL; k++)
		put_cell(head[k], w[k], k == NCOL - 1);
	putchar('\n');
	for (size_t i = 0; i < n; i++) {
		const char *cells[NCOL] = {cs[i]->name, cs[i]->ns,    cs[i]->agent, cs[i]->session,
					   gens[i],     cs[i]->state, ages[i]};
		for (int k = 0; k < NCOL; k++)
			put_cell(cells[k], w[k], k == NCOL - 1);
		putchar('\n');
	}
	free(gens);
	free(ages);
	rc = 0;
out:
	brig_computer_free_array(cs, n);
	brig_engine_free(e);
	return rc;
}
