/* cmd_checkpoint_io.c — brig checkpoint export / import: one checkpoint as a
 * single verified archive between machines and stores. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "cli/remote_parse.h"
#include "util/util.h"

int cmd_checkpoint_export(int argc, char **argv);
int cmd_checkpoint_import(int argc, char **argv);

static const char export_usage[] =
	"Usage: brig checkpoint export [--store URL] [-o FILE] ID\n"
	"\n"
	"Write checkpoint ID as one archive (its session, manifest and file blobs, every\n"
	"digest checked first) to FILE or stdout, for brig checkpoint import on another\n"
	"machine or store. A checkpoint of the full-copy format is written as its blob.\n"
	"\n"
	"Options:\n"
	"      --store URL         Session store (default: $BRIG_STORE, else brig's SQLite file)\n"
	"  -o, --output FILE       Write to FILE (created 0600) instead of stdout\n"
	"  -h, --help              Print this help\n";

typedef struct sink {
	int fd;
	int werr; /* the write's errno when it failed */
} sink;

static int write_cb(const char *data, size_t len, void *payload)
{
	sink *k = payload;
	if (brig_write_all(k->fd, data, len) == 0)
		return 0;
	k->werr = errno ? errno : EIO;
	return BRIG_EIO;
}

/* export through a brig server: GET /v1/checkpoints/ID/export, the same
 * archive to fd. */
static int export_remote(int64_t id, int fd)
{
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	char target[64];
	snprintf(target, sizeof target, "/v1/checkpoints/%" PRId64 "/export", id);
	brig_error *err = NULL;
	sink k = {fd, 0};
	int rc = cli_remote_get_raw(r, target, write_cb, &k, &err);
	cli_remote_free(r);
	if (rc && k.werr) {
		brig_error_free(err);
		return cli_fail("checkpoint export: writing: %s", strerror(k.werr));
	}
	return rc ? cli_error(err, NULL) : 0;
}

int cmd_checkpoint_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"store", required_argument, NULL, CLI_OPT_STORE},
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *store = NULL, *output = NULL;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("checkpoint export", argc, argv, ":ho:", longopts, NULL)) != -1) {
		switch (opt) {
		case CLI_OPT_STORE: store = optarg; break;
		case 'o': output = optarg; break;
		case 'h': return cli_help(export_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind + 1 != argc)
		return cli_usage("checkpoint export", "exactly one ID is required");
	int64_t id = 0;
	if (cli_parse_i64("ID", argv[optind], 1, INT64_MAX, &id) != 0)
		return CLI_EXIT_FAIL;
	if (!output && isatty(STDOUT_FILENO))
		return cli_fail("checkpoint export writes an archive: redirect stdout to a file, or use -o FILE");
	bool remote = cli_remote_host() != NULL;
	if (remote && store)
		return cli_fail("--store names a local store; through a brig server its own store is used");
	int fd = STDOUT_FILENO;
	if (output && (fd = open(output, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
		return cli_fail("cannot create %s: %s", output, strerror(errno));
	brig_store *s = NULL;
	int rc = CLI_EXIT_FAIL;
	if (remote) {
		rc = export_remote(id, fd);
	} else if (cli_store_open_existing(&s, store) == 0) {
		brig_error *err = NULL;
		if (brig_checkpoint_export(s, NULL, id, fd, &err) != 0)
			cli_error(err, NULL);
		else
			rc = 0;
		brig_store_close(s);
	}
	if (output) {
		if (close(fd) < 0 && rc == 0)
			rc = cli_fail("writing %s: %s", output, strerror(errno));
		if (rc)
			unlink(output); /* never leave half an archive under the name */
	}
	return rc;
}

static ssize_t fd_read(char *buf, size_t len, void *payload, brig_error **err)
{
	for (;;) {
		ssize_t n = read(*(int *)payload, buf, len);
		if (n >= 0 || errno != EINTR) {
			if (n < 0)
				brig__error_set(err, BRIG_EIO, errno, "checkpoint import: reading: %s", strerror(errno));
			return n;
		}
	}
}

/* import through a brig server: POST …/checkpoints/import (into the
 * session named) or /v1/checkpoints/import (an archive's own), streamed
 * from fd; *out as brig_checkpoint_import gives it. */
static int import_remote(brig_store_checkpoint **out, const char *ns, const char *agent, const char *session,
			 int fd, brig_error **err)
{
	cli_remote *r = NULL;
	if (cli_remote_open(&r) != 0)
		return CLI_EXIT_FAIL;
	cleanup_free char *a = ns ? brig_urlencode(ns) : NULL, *b = ns ? brig_urlencode(agent) : NULL,
			  *c = ns ? brig_urlencode(session) : NULL;
	cleanup_free char *target = ns ? xasprintf("/v1/checkpoints/import?ns=%s&agent=%s&session=%s", a, b, c)
				       : xstrdup("/v1/checkpoints/import");
	json_t *j = NULL;
	int rc = cli_remote_upload(r, target, fd_read, &fd, &j, err);
	cli_remote_free(r);
	if (rc)
		return rc;
	const char *jns = json_string_value(json_object_get(j, "ns"));
	const char *jagent = json_string_value(json_object_get(j, "agent"));
	const char *jsession = json_string_value(json_object_get(j, "session"));
	if (!jns || !jagent || !jsession || !json_is_integer(json_object_get(j, "id"))) {
		json_decref(j);
		return brig__error_set(err, BRIG_EPROTO, 0, "checkpoint import: the brig server's answer lacks the "
							   "checkpoint's id or session");
	}
	*out = xcalloc(1, sizeof **out);
	cli_remote_checkpoint_parse(*out, j, jns, jagent, jsession);
	json_decref(j);
	return 0;
}

static const char import_usage[] =
	"Usage: brig checkpoint import [--store URL] [--ns NS --agent A --session S] [FILE]\n"
	"\n"
	"Read a checkpoint written by brig checkpoint export from FILE (or stdin) into\n"
	"the store: every blob's digest is checked before the checkpoint is recorded.\n"
	"A session the store does not know is created from the archive (with no\n"
	"computer): brig recover then restores it. --ns/--agent/--session put it into\n"
	"another session (required for a bare checkpoint blob). Prints the new id.\n"
	"\n"
	"Options:\n"
	"      --store URL         Session store (default: $BRIG_STORE, else brig's SQLite file)\n"
	"      --ns NS, --agent A, --session S\n"
	"                          The session it joins (default: the archive's)\n"
	"      --json              Print the checkpoint record as JSON\n"
	"  -h, --help              Print this help\n";

int cmd_checkpoint_import(int argc, char **argv)
{
	enum { OPT_JSON = 1000 };
	static const struct option longopts[] = {
		{"store", required_argument, NULL, CLI_OPT_STORE},
		{"ns", required_argument, NULL, CLI_OPT_NS},
		{"agent", required_argument, NULL, CLI_OPT_AGENT},
		{"session", required_argument, NULL, CLI_OPT_SESSION},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *store = NULL, *ns = NULL, *agent = NULL, *session = NULL;
	bool json = false;
	int opt;
	optind = 0;
	while ((opt = cli_getopt("checkpoint import", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case CLI_OPT_STORE: store = optarg; break;
		case CLI_OPT_NS: ns = optarg; break;
		case CLI_OPT_AGENT: agent = optarg; break;
		case CLI_OPT_SESSION: session = optarg; break;
		case OPT_JSON: json = true; break;
		case 'h': return cli_help(import_usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind + 1 < argc)
		return cli_usage("checkpoint import", "unexpected argument '%s'", argv[optind + 1]);
	if ((ns || agent || session) && !(ns && agent && session))
		return cli_usage("checkpoint import", "--ns, --agent and --session go together");
	const char *file = optind < argc ? argv[optind] : NULL;
	int fd = STDIN_FILENO;
	if (file && strcmp(file, "-") != 0 && (fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return cli_fail("cannot open %s: %s", file, strerror(errno));
	if (fd == STDIN_FILENO && isatty(fd))
		return cli_fail("checkpoint import reads an archive: give FILE or redirect stdin");
	brig_store *s = NULL;
	int rc = CLI_EXIT_FAIL;
	bool remote = cli_remote_host() != NULL;
	if (remote && store) {
		rc = cli_fail("--store names a local store; through a brig server its own store is used");
	} else if (remote || cli_store_open(&s, store) == 0) {
		brig_error *err = NULL;
		brig_store_checkpoint *cp = NULL;
		int irc = remote ? import_remote(&cp, ns, agent, session, fd, &err)
				 : brig_checkpoint_import(s, &cp, ns, agent, session, fd, NULL, &err);
		if (irc == CLI_EXIT_FAIL) {
			/* said already */
		} else if (irc != 0) {
			cli_error(err, NULL);
		} else if (json) {
			rc = cli_print_json(json_pack("{s:I,s:s,s:s,s:s,s:I,s:s,s:s?,s:I,s:I}", "id", (json_int_t)cp->id,
						      "ns", cp->ns, "agent", cp->agent, "session", cp->session,
						      "generation", (json_int_t)cp->generation, "digest", cp->digest,
						      "blob", cp->blob, "bytes_raw", (json_int_t)cp->bytes_raw,
						      "bytes_stored", (json_int_t)cp->bytes_stored));
		} else {
			cli_note("imported checkpoint %" PRId64 " of %s/%s/%s generation %" PRId64
				 ": brig recover --ns %s --agent %s --session %s restores it",
				 cp->id, cp->ns, cp->agent, cp->session, cp->generation, cp->ns, cp->agent,
				 cp->session);
			printf("%" PRId64 " %s\n", cp->id, cp->digest);
			rc = 0;
		}
		brig_store_checkpoint_free(cp);
		brig_store_close(s);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	return rc;
}
