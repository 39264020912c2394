/* cmd_fs.c — `brig fs ls|cat|write|stat|rm|mkdir|mv`: a computer's files
 * through its brig-init (brig/guest.h), with brig-init's permissions (uid
 * 1000), directly or through a brig server's native file routes (the same
 * calls on the same brig-init). Everything the guest says (names, link
 * targets, types) is untrusted and shown safely; file contents go to stdout
 * as raw bytes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brig/guest.h"
#include "brig/sandbox.h"
#include "cli/cli.h"
#include "util/util.h"

static const char fs_usage[] =
	"Usage: brig fs COMMAND [OPTIONS] NAME PATH...\n"
	"\n"
	"A computer's files, through its brig-init (as uid 1000). PATHs are absolute\n"
	"or relative to /workspace; only /workspace and /runtime are writable. NAME\n"
	"may be a unique prefix of a computer's name, or give --ns/--agent/--session.\n"
	"With BRIG_HOST, through the brig server: NAME in full, no '..' in a PATH, and\n"
	"a write takes at most 8 MiB.\n"
	"\n"
	"Commands:\n"
	"  ls NAME PATH          List a directory (or show one file)\n"
	"  cat NAME PATH...      Write files' bytes to stdout\n"
	"  write NAME PATH       Write stdin to a file (readers never see half of it)\n"
	"  stat NAME PATH        Show a file's type, mode, size, owner and time\n"
	"  rm NAME PATH...       Remove files (with -r, directories and their contents)\n"
	"  mkdir NAME PATH...    Make directories\n"
	"  mv NAME SRC DST       Rename SRC to DST\n"
	"\n"
	"Options:\n"
	"      --json              ls, stat: print JSON\n"
	"  -r, --recursive         ls: list subdirectories too (up to 64 levels);\n"
	"                          rm: remove directories and their contents\n"
	"      --depth N           ls: list N levels (1..64; default 1)\n"
	"  -p, --parents           mkdir, write: make missing parent directories\n"
	"                          (mkdir: no error when the directory exists)\n"
	"  -m, --mode MODE         write, mkdir: octal mode (default 0644 / 0755)\n" CLI_HELP_TARGET
	"  -h, --help              Print this help\n";

enum { OPT_JSON = CLI_OPT_TARGET_END, OPT_DEPTH };

static const struct option fs_opts[] = {
	{"json", no_argument, NULL, OPT_JSON},
	{"recursive", no_argument, NULL, 'r'},
	{"depth", required_argument, NULL, OPT_DEPTH},
	{"parents", no_argument, NULL, 'p'},
	{"mode", required_argument, NULL, 'm'},
	CLI_TARGET_LONGOPTS,
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

typedef struct fs_args {
	const char *verb;
	char cmd[32]; /* "fs ls": for usage messages */
	bool json, recursive, parents;
	int depth; /* 0: not given */
	long mode; /* -1: not given */
	char *ref; /* the computer, malloc'd */
	char **paths;
	int npaths;
} fs_args;

/* Relative paths are taken from /workspace, the computers' working
 * directory, as `docker cp` takes them from the container's. */
static char *abs_path(const char *p)
{
	return p[0] == '/' ? xstrdup(p) : xasprintf("/workspace/%s", p);
}

/* ---- where the calls go ---- */

/* Through a brig server, a read moves FS_PAGE bytes at a time (the read
 * route's cap is 8 MiB), and a write what the write route takes at once. */
#define FS_PAGE ((int64_t)1 << 20)
#define FS_WRITE_MAX ((size_t)8 << 20)
#define FS_JSON_MAX ((size_t)32 << 20) /* a listing of brig-init's 100 000 entries */

/* The computer's brig-init (g), or the server (r) that makes the same calls
 * on it (base: its path of the computer): the verbs see the same answers
 * and errors either way. */
typedef struct fs_conn {
	brig_guest *g;
	cli_remote *r;
	const char *base;
} fs_conn;

/* A native file route's target: route ("files", "files/list"…) with path
 * (may be NULL: it travels in the body) and extra query (may be NULL). */
static char *fs_url(const fs_conn *c, const char *route, const char *path, const char *extra)
{
	cleanup_free char *q = path ? brig_urlencode(path) : NULL;
	return xasprintf("%s/%s?native=true%s%s%s", c->base, route, q ? "&path=" : "", q ? q : "", extra ? extra : "");
}

typedef struct capped {
	brig_buf b;
	bool full;
} capped;

static int capped_cb(const char *data, size_t len, void *payload)
{
	capped *cap = payload;
	if (brig_buf_add(&cap->b, data, len) == 0)
		return 0;
	cap->full = true;
	return BRIG_ETOOBIG;
}

/* A GET whose answer is JSON. */
static int remote_json(const fs_conn *c, const char *target, json_t **out, brig_error **err)
{
	capped a = {.full = false};
	brig_buf_init(&a.b, FS_JSON_MAX);
	int rc = cli_remote_fs(c->r, "GET", target, NULL, NULL, 0, capped_cb, &a, err);
	if (a.full)
		rc = brig__error_set(err, BRIG_ETOOBIG, 0, "the brig server's answer is larger than %zu bytes",
				     FS_JSON_MAX);
	else if (!rc && !(*out = json_loadb(a.b.data ? a.b.data : "", a.b.len, 0, NULL)))
		rc = brig__error_set(err, BRIG_EPROTO, 0, "the brig server's answer is not JSON");
	brig_buf_free(&a.b);
	return rc;
}

/* A POST of body (consumed) with no answer but its status. */
static int remote_post(const fs_conn *c, const char *route, json_t *body, brig_error **err)
{
	cleanup_free char *t = fs_url(c, route, NULL, NULL);
	cleanup_free char *data = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	return cli_remote_fs(c->r, "POST", t, "application/json", data, strlen(data), NULL, NULL, err);
}

static int fs_stat(const fs_conn *c, json_t **out, const char *path, bool nofollow, brig_error **err)
{
	if (c->g)
		return brig_guest_stat(c->g, out, path, nofollow, 0, err);
	cleanup_free char *t = fs_url(c, "files/stat", path, nofollow ? NULL : "&follow=true");
	return remote_json(c, t, out, err);
}

static int fs_list(const fs_conn *c, json_t **out, const char *path, int depth, brig_error **err)
{
	if (c->g)
		return brig_guest_list(c->g, out, path, depth, 0, err);
	char extra[32];
	snprintf(extra, sizeof extra, "&depth=%d", depth);
	cleanup_free char *t = fs_url(c, "files/list", path, extra);
	json_t *j = NULL;
	int rc = remote_json(c, t, &j, err);
	if (!rc && !json_is_array(json_object_get(j, "entries")))
		rc = brig__error_set(err, BRIG_EPROTO, 0, "the brig server's listing has no entries");
	if (!rc)
		*out = json_incref(json_object_get(j, "entries"));
	json_decref(j);
	return rc;
}

/* One page of a read through the server, passed on as it comes. */
typedef struct page {
	brig_engine_data_cb cb;
	void *payload;
	int64_t got;
	int cb_rc;
	bool over; /* more than asked for */
} page;

static int page_cb(const char *data, size_t len, void *payload)
{
	page *p = payload;
	if ((int64_t)len > FS_PAGE - p->got) {
		p->over = true;
		return BRIG_EPROTO;
	}
	p->got += (int64_t)len;
	return p->cb_rc = p->cb(data, len, p->payload);
}

/* The whole file into cb: page after page, until one comes back short. */
static int fs_read(const fs_conn *c, const char *path, brig_engine_data_cb cb, void *payload, brig_error **err)
{
	if (c->g)
		return brig_guest_read(c->g, path, 0, -1, cb, payload, 0, err);
	for (int64_t off = 0;; off += FS_PAGE) {
		char extra[64];
		snprintf(extra, sizeof extra, "&offset=%" PRId64 "&length=%" PRId64, off, FS_PAGE);
		cleanup_free char *t = fs_url(c, "files", path, extra);
		page p = {.cb = cb, .payload = payload};
		int rc = cli_remote_fs(c->r, "GET", t, NULL, NULL, 0, page_cb, &p, err);
		if (p.over)
			return brig__error_set(err, BRIG_EPROTO, 0, "read %s: the brig server sent more than asked for",
					       path);
		if (p.cb_rc) /* the direct path's words */
			return brig__error_set(err, p.cb_rc, 0, "read %s: the receiver gave up", path);
		if (rc || p.got < FS_PAGE)
			return rc;
	}
}

/* stdin into path. Through a server the file travels in one request, so
 * it is read whole first, up to what the write route takes. */
static int fs_write(const fs_conn *c, const char *path, unsigned mode, bool parents, brig_error **err)
{
	if (c->g)
		return brig_guest_write(c->g, path, 0, NULL, 0, mode, parents, 0, err);
	brig_buf in;
	brig_buf_init(&in, FS_WRITE_MAX);
	char chunk[65536];
	int rc = 0;
	for (;;) {
		ssize_t n = read(0, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = brig__error_set(err, BRIG_EIO, errno, "write %s: reading the source: %s", path,
					     strerror(errno));
			break;
		}
		if (n == 0)
			break;
		if (brig_buf_add(&in, chunk, (size_t)n) != 0) {
			rc = brig__error_set(err, BRIG_ETOOBIG, 0,
					     "fs write %s: stdin holds more than %zu bytes, the most a brig server "
					     "writes at once (unset BRIG_HOST to write it directly)",
					     path, FS_WRITE_MAX);
			break;
		}
	}
	if (!rc) {
		char extra[48];
		snprintf(extra, sizeof extra, "&mode=%o%s", mode, parents ? "&parents=true" : "");
		cleanup_free char *t = fs_url(c, "files", path, extra);
		rc = cli_remote_fs(c->r, "PUT", t, "application/octet-stream", in.data ? in.data : "", in.len, NULL,
				   NULL, err);
	}
	brig_buf_free(&in);
	return rc;
}

static int fs_mkdir(const fs_conn *c, const char *path, unsigned mode, bool parents, brig_error **err)
{
	if (c->g)
		return brig_guest_mkdir(c->g, path, mode, parents, 0, err);
	char m[16];
	snprintf(m, sizeof m, "%o", mode);
	return remote_post(c, "files/mkdir", json_pack("{s:s,s:s,s:b}", "path", path, "mode", m, "parents", parents),
			   err);
}

static int fs_remove(const fs_conn *c, const char *path, bool recursive, brig_error **err)
{
	if (c->g)
		return brig_guest_remove(c->g, path, recursive, 0, err);
	cleanup_free char *t = fs_url(c, "files", path, recursive ? "&recursive=true" : NULL);
	return cli_remote_fs(c->r, "DELETE", t, NULL, NULL, 0, NULL, NULL, err);
}

static int fs_rename(const fs_conn *c, const char *from, const char *to, brig_error **err)
{
	if (c->g)
		return brig_guest_rename(c->g, from, to, 0, err);
	return remote_post(c, "files/move", json_pack("{s:s,s:s}", "from", from, "to", to), err);
}

/* ---- the verbs ---- */

/* err (taken) as the user should read it: a refusal to write outside the
 * writable mounts says which ones are. */
static int fs_error(brig_error *err, const char *verb, const char *path)
{
	if (err && err->code == BRIG_EDENIED && strcmp(verb, "cat") != 0 && strcmp(verb, "ls") != 0 &&
	    strcmp(verb, "stat") != 0) {
		bool ro = err->sys_errno == EROFS;
		cli_fail("fs %s %s: %s: only /workspace and /runtime are writable in a computer (as uid 1000)", verb,
			 path, ro ? "read-only file system" : "permission denied");
		brig_error_free(err);
		return CLI_EXIT_FAIL;
	}
	if (err && strcmp(verb, "mv") == 0 && err->sys_errno == EXDEV) {
		cli_fail("fs mv %s: the source and the destination are on different mounts (/workspace, /runtime, "
			 "the image): mv renames within one; copy with fs cat and fs write, then fs rm",
			 path);
		brig_error_free(err);
		return CLI_EXIT_FAIL;
	}
	if (err && err->code == BRIG_ECONFLICT && strcmp(verb, "rm") == 0 && err->sys_errno == ENOTEMPTY) {
		cli_fail("fs rm %s: the directory is not empty (rm -r removes it and its contents)", path);
		brig_error_free(err);
		return CLI_EXIT_FAIL;
	}
	return cli_error(err, NULL);
}

static void put_mode(const char *type, long long mode)
{
	char s[11];
	s[0] = !type                          ? '?'
	       : strcmp(type, "dir") == 0     ? 'd'
	       : strcmp(type, "symlink") == 0 ? 'l'
	       : strcmp(type, "file") == 0    ? '-'
	       : strcmp(type, "fifo") == 0    ? 'p'
	       : strcmp(type, "socket") == 0  ? 's'
	       : strcmp(type, "char") == 0    ? 'c'
	       : strcmp(type, "block") == 0   ? 'b'
					      : '?';
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		s[1 + i] = mode & (0400 >> i) ? rwx[i] : '-';
	s[10] = '\0';
	fputs(s, stdout);
}

static void put_time(long long mtime_ns)
{
	time_t t = (time_t)(mtime_ns / 1000000000);
	struct tm tm;
	char buf[32] = "?";
	if (gmtime_r(&t, &tm))
		strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
	fputs(buf, stdout);
}

/* One line of `ls -l` for entry j under name. */
static void put_entry(json_t *j, const char *name)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	put_mode(type, json_integer_value(json_object_get(j, "mode")));
	printf(" %5lld %5lld %12lld ", (long long)json_integer_value(json_object_get(j, "uid")),
	       (long long)json_integer_value(json_object_get(j, "gid")),
	       (long long)json_integer_value(json_object_get(j, "size")));
	put_time(json_integer_value(json_object_get(j, "mtime_ns")));
	fputc(' ', stdout);
	cli_put_safe(name);
	const char *link = json_string_value(json_object_get(j, "link"));
	if (link) {
		fputs(" -> ", stdout);
		cli_put_safe(link);
	}
	fputc('\n', stdout);
}

static int do_ls(const fs_conn *c, const fs_args *a, const char *path)
{
	brig_error *err = NULL;
	json_t *st = NULL;
	if (fs_stat(c, &st, path, false, &err) != 0)
		return fs_error(err, a->verb, path);
	json_t *list = NULL;
	if (strcmp(json_string_value(json_object_get(st, "type")) ?: "", "dir") != 0) {
		/* one file: itself (a link as a link), as ls shows it */
		json_decref(st);
		st = NULL;
		if (fs_stat(c, &st, path, true, &err) != 0)
			return fs_error(err, a->verb, path);
		const char *base = strrchr(path, '/');
		json_object_set_new(st, "name", json_string(base && base[1] ? base + 1 : path));
		list = json_array();
		json_array_append(list, st);
	} else if (fs_list(c, &list, path, a->depth ? a->depth : a->recursive ? 64 : 1, &err) != 0) {
		json_decref(st);
		return fs_error(err, a->verb, path);
	}
	json_decref(st);
	if (a->json)
		return cli_print_json(list);
	size_t i;
	json_t *it;
	json_array_foreach (list, i, it)
		put_entry(it, json_string_value(json_object_get(it, "name")) ?: "?");
	json_decref(list);
	return 0;
}

static int do_stat(const fs_conn *c, const fs_args *a, const char *path)
{
	brig_error *err = NULL;
	json_t *st = NULL;
	if (fs_stat(c, &st, path, true, &err) != 0)
		return fs_error(err, a->verb, path);
	json_object_set_new(st, "path", json_string(path));
	if (a->json)
		return cli_print_json(st);
	fputs("path:  ", stdout);
	cli_put_safe(path);
	fputs("\ntype:  ", stdout);
	cli_put_safe(json_string_value(json_object_get(st, "type")) ?: "?");
	printf("\nmode:  %04llo (", (long long)json_integer_value(json_object_get(st, "mode")));
	put_mode(json_string_value(json_object_get(st, "type")), json_integer_value(json_object_get(st, "mode")));
	printf(")\nsize:  %lld\nowner: %lld:%lld\nmtime: ", (long long)json_integer_value(json_object_get(st, "size")),
	       (long long)json_integer_value(json_object_get(st, "uid")),
	       (long long)json_integer_value(json_object_get(st, "gid")));
	put_time(json_integer_value(json_object_get(st, "mtime_ns")));
	fputs(" UTC\n", stdout);
	const char *link = json_string_value(json_object_get(st, "link"));
	if (link) {
		fputs("link:  ", stdout);
		cli_put_safe(link);
		fputc('\n', stdout);
	}
	json_decref(st);
	return 0;
}

static int to_stdout(const char *data, size_t len, void *payload)
{
	(void)payload;
	return brig_write_all(1, data, len) == 0 ? 0 : BRIG_EIO;
}

static int fs_run(const fs_conn *c, const fs_args *a)
{
	brig_error *err = NULL;
	const char *v = a->verb;
	int rc = 0;
	if (strcmp(v, "ls") == 0)
		return do_ls(c, a, a->paths[0]);
	if (strcmp(v, "stat") == 0)
		return do_stat(c, a, a->paths[0]);
	if (strcmp(v, "mv") == 0)
		return fs_rename(c, a->paths[0], a->paths[1], &err) ? fs_error(err, v, a->paths[0]) : 0;
	if (strcmp(v, "write") == 0)
		return fs_write(c, a->paths[0], a->mode >= 0 ? (unsigned)a->mode : 0644, a->parents, &err)
			       ? fs_error(err, v, a->paths[0])
			       : 0;
	for (int i = 0; i < a->npaths && !rc; i++) {
		const char *p = a->paths[i];
		int r = 0;
		if (strcmp(v, "cat") == 0) {
			fflush(stdout);
			r = fs_read(c, p, to_stdout, NULL, &err);
		} else if (strcmp(v, "rm") == 0) {
			r = fs_remove(c, p, a->recursive, &err);
		} else if (strcmp(v, "mkdir") == 0) {
			r = fs_mkdir(c, p, a->mode >= 0 ? (unsigned)a->mode : 0755, a->parents, &err);
		}
		if (r)
			rc = fs_error(err, v, p);
	}
	return rc;
}

/* The verb's operands after NAME: how many PATHs it takes, and which
 * options make sense with it. Returns 0 or CLI_EXIT_FAIL. */
static int check_args(const fs_args *a)
{
	const char *v = a->verb;
	bool one = strcmp(v, "ls") == 0 || strcmp(v, "stat") == 0 || strcmp(v, "write") == 0;
	if (strcmp(v, "mv") == 0 && a->npaths != 2)
		return cli_usage(a->cmd, "SRC and DST are required");
	if (one && a->npaths != 1)
		return cli_usage(a->cmd, "exactly one PATH is required");
	if (a->npaths < 1)
		return cli_usage(a->cmd, "PATH is required");
	if (a->json && !(strcmp(v, "ls") == 0 || strcmp(v, "stat") == 0))
		return cli_usage(a->cmd, "--json applies to ls and stat");
	if (a->recursive && !(strcmp(v, "ls") == 0 || strcmp(v, "rm") == 0))
		return cli_usage(a->cmd, "-r applies to ls and rm");
	if (a->depth && strcmp(v, "ls") != 0)
		return cli_usage(a->cmd, "--depth applies to ls");
	if (a->parents && !(strcmp(v, "mkdir") == 0 || strcmp(v, "write") == 0))
		return cli_usage(a->cmd, "-p applies to mkdir and write");
	if (a->mode >= 0 && !(strcmp(v, "mkdir") == 0 || strcmp(v, "write") == 0))
		return cli_usage(a->cmd, "--mode applies to write and mkdir");
	return 0;
}

static int parse_mode(const char *s, long *out)
{
	char *end = NULL;
	errno = 0;
	long m = strtol(s, &end, 8);
	if (!*s || *end || errno || m < 0 || m > 07777)
		return cli_fail("--mode: %s is not an octal mode (0..7777)", s);
	*out = m;
	return 0;
}

int cmd_fs(int argc, char **argv)
{
	static const char *const verbs[] = {"ls", "cat", "write", "stat", "rm", "mkdir", "mv"};
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0)
		return argc < 2 ? cli_usage("fs", "a command is required (ls, cat, write, stat, rm, mkdir, mv)")
				: cli_help(fs_usage);
	fs_args a = {.verb = argv[1], .mode = -1};
	bool known = false;
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		known |= strcmp(a.verb, verbs[i]) == 0;
	if (!known)
		return cli_usage("fs", "unknown command %s (ls, cat, write, stat, rm, mkdir, mv)", a.verb);
	snprintf(a.cmd, sizeof a.cmd, "fs %s", a.verb);
	argc--;
	argv++;
	cli_target t = {0};
	int opt, rc = 0;
	optind = 0;
	while ((opt = cli_getopt(a.cmd, argc, argv, ":hrpm:", fs_opts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &rc)) {
			if (rc)
				return rc;
			continue;
		}
		int64_t d;
		switch (opt) {
		case 'h': return cli_help(fs_usage);
		case OPT_JSON: a.json = true; break;
		case 'r': a.recursive = true; break;
		case 'p': a.parents = true; break;
		case 'm':
			if (parse_mode(optarg, &a.mode) != 0)
				return CLI_EXIT_FAIL;
			break;
		case OPT_DEPTH:
			if (cli_parse_i64("--depth", optarg, 1, 64, &d) != 0)
				return CLI_EXIT_FAIL;
			a.depth = (int)d;
			break;
		default: return CLI_EXIT_FAIL;
		}
	}
	const char *name = NULL;
	if (!t.id_given) {
		if (optind >= argc)
			return cli_usage(a.cmd, "NAME is required (or --ns, --agent and --session)");
		name = argv[optind++];
	}
	a.npaths = argc - optind;
	if (check_args(&a) != 0)
		return CLI_EXIT_FAIL;
	fs_conn c = {0};
	cleanup_free char *base = NULL;
	if (cli_remote_host()) {
		/* through a brig server: its native file routes */
		if (cli_remote_open(&c.r) != 0)
			return CLI_EXIT_FAIL;
		if ((rc = cli_remote_target(c.r, a.cmd, &t, name, &base)) == 1)
			rc = cli_fail("no computer named %s on the brig server (or not one of a session it may touch)",
				      name);
		if (rc) {
			cli_remote_free(c.r);
			return rc;
		}
		c.base = base;
	} else if (cli_target_name(&a.ref, a.cmd, &t, name, NULL, true) != 0) {
		return CLI_EXIT_FAIL;
	}
	a.paths = xcalloc((size_t)a.npaths, sizeof *a.paths);
	for (int i = 0; i < a.npaths; i++)
		a.paths[i] = abs_path(argv[optind + i]);
	brig_engine *e = NULL;
	if (!c.r)
		rc = cli_computer_guest(&e, &c.g, &a.ref, !t.id_given);
	if (!rc)
		rc = fs_run(&c, &a);
	brig_guest_free(c.g);
	brig_engine_free(e);
	cli_remote_free(c.r);
	for (int i = 0; i < a.npaths; i++)
		free(a.paths[i]);
	free(a.paths);
	free(a.ref);
	return rc;
}
