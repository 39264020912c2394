/* cmd_cp.c — `brig cp`, docker cp's syntax: NAME:PATH on one side, a host
 * path or `-` (a tar stream) on the other, through the Engine API archive
 * endpoints (a stopped computer works too).
 *
 * Copy-out is the dangerous way: the tar comes from the sandbox. It goes
 * through the tar layer's extractor (src/tar/tar.h: no absolute names, no
 * "..", symlinks only when they stay inside the copy, hard links only to an
 * earlier file of it, no FIFOs or devices) into a fresh directory beside the
 * destination, and is renamed into place only once whole: a refused copy
 * leaves the destination as it was; so does a lone symlink (it always points
 * outside the copy). A destination that already exists is
 * replaced when it is a file and refused when it is a directory (no merge:
 * that could not be all or nothing). `-` goes through the copier (the same
 * rules) into a temporary file first, so stdout gets a whole checked tar or
 * nothing.
 *
 * Copy-in writes every entry as 1000:1000 (the sandbox's user).
 *
 * With BRIG_HOST the same goes through the brig server's archive routes,
 * where brig-init reads and writes as the sandbox's user (not root), and
 * the server checks each tar as well. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/spec.h"
#include "cli/cli.h"
#include "tar/tar.h"
#include "util/util.h"

static const char cp_usage[] = "Usage: brig cp [OPTIONS] NAME:SRC_PATH DEST_PATH|-\n"
			       "       brig cp [OPTIONS] SRC_PATH|- NAME:DEST_PATH\n"
			       "       brig cp --ns NS --agent A --session S [--gen N] :SRC_PATH DEST_PATH|-\n"
			       "       brig cp --ns NS --agent A --session S [--gen N] SRC_PATH|- :DEST_PATH\n"
			       "\n"
			       "NAME may be a unique prefix of the computer's name; with the session\n"
			       "flags the computer's side is written :PATH.\n"
			       "\n"
			       "Copy files and directories (recursively) out of or into computer NAME, as\n"
			       "docker cp does. `-` is a tar stream on stdin or stdout. Container paths are\n"
			       "absolute or relative to /workspace; only /workspace and /runtime are writable.\n"
			       "\n"
			       "Out of a computer, whatever the sandbox made is untrusted: a symlink that\n"
			       "leads outside the copy, a FIFO, a device or a `..` name refuses the whole\n"
			       "copy, and the destination is left as it was. An existing file at the\n"
			       "destination is replaced; an existing directory is not merged into (the copy\n"
			       "would not be all or nothing): name a new one. Into a computer, files belong\n"
			       "to the sandbox's user (1000:1000). With BRIG_HOST the copy goes through the\n"
			       "brig server, where brig-init reads and writes as the sandbox's user.\n"
			       "\n"
			       "Options:\n"
			       "  -L, --follow-link   Copy-in: follow SRC_PATH when it is a symlink\n" CLI_HELP_TARGET
			       "  -h, --help          Print this help\n";

static const struct option cp_opts[] = {{"follow-link", no_argument, NULL, 'L'},
					{"help", no_argument, NULL, 'h'},
					CLI_TARGET_LONGOPTS,
					{NULL, 0, NULL, 0}};

/* "NAME:PATH" → NAME and PATH (absolute); a host path otherwise (docker's
 * rule: a path starting with / or . is local, or with no colon before a
 * slash). With the session flags (by_id), ":PATH" is the computer's side
 * (*name NULL). */
static bool split_remote(const char *arg, bool by_id, char **name, char **path)
{
	if (arg[0] == '/' || arg[0] == '.')
		return false;
	const char *colon = strchr(arg, ':');
	const char *slash = strchr(arg, '/');
	if (!colon || (slash && slash < colon) || (colon == arg && !by_id))
		return false;
	*name = colon == arg ? NULL : xstrndup(arg, (size_t)(colon - arg));
	const char *p = colon + 1;
	*path = p[0] == '/' ? xstrdup(p) : xasprintf("/workspace/%s", p);
	return true;
}

/* The computer's container id; refuses containers brig does not manage.
 * A NAME not found may be a unique prefix (prefix: look it up then). */
static int computer_id(brig_engine *e, char **out, const char *name, bool prefix)
{
	json_t *j = NULL;
	brig_error *err = NULL;
	int rc = brig_engine_container_inspect(e, &j, name, &err);
	if (rc == BRIG_ENOTFOUND) {
		brig_error_free(err);
		cleanup_free char *full = NULL;
		int p = prefix ? cli_name_prefix(e, name, &full) : 1;
		if (p == 0)
			return computer_id(e, out, full, false);
		return p == 1 ? cli_fail("no computer named %s", name) : p;
	}
	if (rc)
		return cli_error(err, NULL);
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	const char *k = json_string_value(json_object_get(labels, BRIG_LABEL_KIND));
	if (!json_string_value(json_object_get(labels, BRIG_LABEL_MANAGED)) || !k || strcmp(k, "computer") != 0) {
		json_decref(j);
		return cli_fail("%s is not a brig computer", name);
	}
	*out = xstrdup(json_string_value(json_object_get(j, "Id")));
	json_decref(j);
	return 0;
}

/* Go's os.ModeDir in the archive endpoints' path stat. */
static bool stat_is_dir(json_t *st)
{
	return (json_integer_value(json_object_get(st, "mode")) & (INT64_C(1) << 31)) != 0;
}

/* The computer's side of a copy: Docker's archive endpoints (root inside
 * the container, as docker cp), or with BRIG_HOST a brig server's archive
 * routes (brig-init as the sandbox's user). Both send and take the same
 * tar, named after the path's last component. */
typedef struct cp_side {
	brig_engine *e;
	const char *id;
	cli_remote *r;
	const char *base; /* /v1/computers/NS/AGENT/SESSION */
} cp_side;

static char *side_target(const cp_side *s, const char *route, const char *path)
{
	cleanup_free char *q = brig_urlencode(path);
	return xasprintf("%s/%s?path=%s", s->base, route, q);
}

/* Whether path is a directory (dir may be NULL), and its name (name may
 * be NULL); BRIG_ENOTFOUND when missing. */
static int side_stat(const cp_side *s, const char *path, bool *dir, char **name, brig_error **err)
{
	json_t *st = NULL;
	int rc;
	if (s->r) {
		cleanup_free char *t = side_target(s, "files/stat", path);
		if ((rc = cli_remote_get_json(s->r, t, &st, err)) != 0)
			return rc;
		if (dir)
			*dir = strcmp(json_string_value(json_object_get(st, "type")) ?: "", "directory") == 0;
		cleanup_free char *pc = xstrdup(path);
		size_t l = strlen(pc);
		while (l > 1 && pc[l - 1] == '/')
			pc[--l] = '\0';
		if (name)
			*name = xstrdup(strrchr(pc, '/') ? strrchr(pc, '/') + 1 : pc);
	} else {
		if ((rc = brig_engine_archive_stat(s->e, &st, s->id, path, err)) != 0)
			return rc;
		if (dir)
			*dir = stat_is_dir(st);
		if (name)
			*name = xstrdup(json_string_value(json_object_get(st, "name")) ?: "");
	}
	json_decref(st);
	return 0;
}

static int side_get(const cp_side *s, const char *path, brig_engine_data_cb cb, void *payload, brig_error **err)
{
	if (!s->r)
		return brig_engine_archive_get(s->e, s->id, path, NULL, cb, payload, err);
	cleanup_free char *t = side_target(s, "archive", path);
	return cli_remote_get_raw(s->r, t, cb, payload, err);
}

static int side_put(const cp_side *s, const char *dir, brig_engine_reader reader, void *payload,
		    brig_error **err)
{
	if (!s->r)
		return brig_engine_archive_put(s->e, s->id, dir, reader, payload, err);
	cleanup_free char *t = side_target(s, "archive", dir);
	return cli_remote_put_raw(s->r, t, reader, payload, err);
}

/* ---- removing a staging directory: never follows a link ---- */

static void remove_below(int dfd)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			continue;
		int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		(void)fchmod(sub, 0700); /* a read-only directory of the copy */
		remove_below(sub);
		unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

static void remove_stage(const char *stage)
{
	int fd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		(void)fchmod(fd, 0700);
		remove_below(fd);
	}
	rmdir(stage);
}

/* ---- out of the computer ---- */

static int tmp_fd(void)
{
	const char *d = getenv("TMPDIR");
	int fd = open(d && *d ? d : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		cli_fail("cannot make a temporary file: %s", strerror(errno));
	return fd;
}

/* A lone symlink always points outside the copy: refused. */
static int lone_link(const char *path)
{
	return cli_fail("copy %s: it is a symlink in the computer, which would point outside the copy; copy what "
			"it points to by its own path",
			path);
}

/* on_entry of the copier: a symlink at the top is the thing copied. */
static void note_root_link(const char *path, int type, uint64_t size, void *payload)
{
	(void)size;
	if (type == BRIG_TAR_SYMLINK && !strchr(path, '/'))
		*(bool *)payload = true;
}

/* The checked tar to stdout, whole or not at all. */
static int copy_out_stream(const cp_side *sd, const char *path)
{
	int fd = tmp_fd();
	if (fd < 0)
		return CLI_EXIT_FAIL;
	brig_tar_copy_opts o = BRIG_TAR_COPY_OPTS_INIT;
	o.allow_symlinks = true;
	o.allow_hardlinks = true;
	bool root_link = false;
	o.on_entry = note_root_link;
	o.payload = &root_link;
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	int rc = brig_tar_copy_new(&c, &o, brig_tar_write_fd, &fd, &err);
	if (!rc) {
		brig_error *gerr = NULL;
		rc = side_get(sd, path, brig_tar_copy_data_cb, c, &gerr);
		brig_error *ferr = NULL;
		int frc = brig_tar_copy_finish(c, NULL, &ferr);
		if (frc) { /* the copier's own story first: it refused the stream */
			brig_error_free(gerr);
			err = ferr;
			rc = frc;
		} else {
			brig_error_free(ferr);
			err = gerr;
		}
	}
	brig_tar_copy_free(c);
	if (rc) {
		close(fd);
		return cli_error(err, path);
	}
	if (root_link) {
		close(fd);
		return lone_link(path);
	}
	char buf[65536];
	ssize_t n;
	off_t off = 0;
	while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
		if (brig_write_all(1, buf, (size_t)n) != 0) {
			close(fd);
			return cli_fail("cannot write to stdout: %s", strerror(errno));
		}
		off += n;
	}
	close(fd);
	return n < 0 ? cli_fail("cannot read the temporary file: %s", strerror(errno)) : 0;
}

static int copy_out(const cp_side *sd, const char *path, const char *dst)
{
	if (strcmp(dst, "-") == 0)
		return copy_out_stream(sd, path);
	brig_error *err = NULL;
	cleanup_free char *name = NULL;
	if (side_stat(sd, path, NULL, &name, &err) != 0)
		return cli_error(err, sd->r ? NULL : path); /* the server's words name it */
	/* the name lands on the host and in messages: no separators, no
	 * terminal controls */
	bool bad = !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
	for (const char *c = name; *c && !bad; c++)
		bad = (unsigned char)*c < 0x20 || *c == 0x7f;
	if (bad)
		return cli_fail("copy %s: the computer named it unusably", path);

	/* where it lands: into an existing directory under its own name, else
	 * at dst itself */
	struct stat ds;
	cleanup_free char *target = NULL;
	if (stat(dst, &ds) == 0 && S_ISDIR(ds.st_mode))
		target = xasprintf("%s/%s", dst, name);
	else
		target = xstrdup(dst);
	size_t tl = strlen(target);
	while (tl > 1 && target[tl - 1] == '/')
		target[--tl] = '\0';
	struct stat ts;
	bool exists = lstat(target, &ts) == 0;
	if (exists && S_ISDIR(ts.st_mode))
		return cli_fail("%s already exists: brig cp does not merge into a directory (the copy lands whole or "
				"not at all); remove it or name a new one",
				target);

	cleanup_free char *tcopy = xstrdup(target);
	cleanup_free char *stage = xasprintf("%s/.brig-cp-XXXXXX", dirname(tcopy));
	if (!mkdtemp(stage))
		return cli_fail("cannot make a directory beside %s: %s", target, strerror(errno));
	brig_tar_extract_opts o = BRIG_TAR_EXTRACT_OPTS_INIT;
	o.allow_symlinks = true;
	o.allow_hardlinks = true;
	brig_tar_extract *x = NULL;
	int rc = brig_tar_extract_new(&x, AT_FDCWD, stage, &o, &err);
	if (!rc) {
		brig_error *gerr = NULL;
		rc = side_get(sd, path, brig_tar_extract_data_cb, x, &gerr);
		brig_error *ferr = NULL;
		int frc = brig_tar_extract_finish(x, &ferr);
		if (frc) {
			brig_error_free(gerr);
			err = ferr;
			rc = frc;
		} else {
			brig_error_free(ferr);
			err = gerr;
		}
	}
	brig_tar_extract_free(x);
	if (!rc) {
		cleanup_free char *staged = xasprintf("%s/%s", stage, name);
		struct stat ss;
		if (lstat(staged, &ss) != 0) {
			rc = CLI_EXIT_FAIL;
			cli_fail("copy %s: the computer sent no entry named %s", path, name);
		} else if (S_ISLNK(ss.st_mode)) {
			rc = lone_link(path);
		} else if (rename(staged, target) != 0) {
			rc = CLI_EXIT_FAIL;
			cli_fail("cannot move the copy into place at %s: %s", target, strerror(errno));
		}
	} else {
		rc = cli_error(err, path);
	}
	remove_stage(stage);
	return rc ? CLI_EXIT_FAIL : 0;
}

/* ---- into the computer ---- */

typedef struct fd_reader {
	int fd;
} fd_reader;

static ssize_t read_fd(char *buf, size_t len, void *payload, brig_error **err)
{
	fd_reader *r = payload;
	ssize_t n;
	do
		n = read(r->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return brig__error_set(err, BRIG_EIO, errno, "read: %s", strerror(errno));
	return n;
}

/* A PUT's refusal as the user should read it. */
static int put_error(brig_error *err, const char *dir)
{
	const char *m = brig_error_message(err);
	if (err && (err->code == BRIG_EDENIED || strstr(m, "read-only") || strstr(m, "read only"))) {
		brig_error_free(err);
		return cli_fail("copy into %s: refused: only /workspace and /runtime are writable in a computer", dir);
	}
	return cli_error(err, NULL);
}

/* stdin's tar, checked and re-owned 1000:1000 into a temporary file, then
 * into directory path. */
static int copy_in_stream(const cp_side *sd, const char *path)
{
	int fd = tmp_fd();
	if (fd < 0)
		return CLI_EXIT_FAIL;
	brig_tar_copy_opts o = BRIG_TAR_COPY_OPTS_INIT;
	o.allow_symlinks = true;
	o.allow_absolute_symlinks = true; /* they land in the computer, not here */
	o.allow_hardlinks = true;
	o.rewrite_owner = true;
	o.uid = o.gid = 1000;
	brig_tar_copy *c = NULL;
	brig_error *err = NULL;
	fd_reader in = {0};
	int rc = brig_tar_copy_new(&c, &o, brig_tar_write_fd, &fd, &err);
	if (!rc)
		rc = brig_tar_copy_from_reader(c, read_fd, &in, &err);
	if (!rc)
		rc = brig_tar_copy_finish(c, NULL, &err);
	brig_tar_copy_free(c);
	if (rc) {
		close(fd);
		return cli_error(err, "tar on stdin");
	}
	fd_reader r = {fd};
	if (lseek(fd, 0, SEEK_SET) < 0 || side_put(sd, path, read_fd, &r, &err) != 0) {
		close(fd);
		return err ? put_error(err, path) : cli_fail("cannot read the temporary file: %s", strerror(errno));
	}
	close(fd);
	return 0;
}

static int copy_in(const cp_side *sd, const char *src, const char *path, bool follow)
{
	if (strcmp(src, "-") == 0)
		return copy_in_stream(sd, path);
	struct stat ss;
	if ((follow ? stat(src, &ss) : lstat(src, &ss)) != 0)
		return cli_fail("%s: %s", src, strerror(errno));
	/* docker's rule: an existing directory takes SRC under its own name;
	 * otherwise SRC lands at PATH */
	brig_error *err = NULL;
	bool dst_dir = false;
	int r = side_stat(sd, path, &dst_dir, NULL, &err);
	if (r && r != BRIG_ENOTFOUND)
		return cli_error(err, sd->r ? NULL : path);
	brig_error_free(err);
	err = NULL;
	dst_dir = !r && dst_dir;
	if (!r && !dst_dir && S_ISDIR(ss.st_mode))
		return cli_fail("cannot copy directory %s onto file %s", src, path);
	cleanup_free char *scopy = xstrdup(src);
	cleanup_free char *pcopy = xstrdup(path);
	cleanup_free char *pcopy2 = xstrdup(path);
	const char *dir = dst_dir ? path : dirname(pcopy);
	const char *name = dst_dir ? basename(scopy) : basename(pcopy2);
	if (!*name || strcmp(name, "/") == 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return cli_fail("cannot tell what to name %s in the computer: give a file name", src);

	brig_tar_build_opts bo = BRIG_TAR_BUILD_OPTS_INIT;
	bo.uid = bo.gid = 1000;
	bo.deref_roots = follow;
	brig_tar_builder *b = NULL;
	int rc = brig_tar_builder_new(&b, &bo, &err);
	if (!rc)
		rc = brig_tar_builder_add_path(b, src, name, &err);
	if (rc) {
		brig_tar_builder_free(b);
		return cli_error(err, NULL);
	}
	rc = side_put(sd, dir, brig_tar_builder_reader, b, &err);
	brig_tar_builder_free(b);
	if (rc == BRIG_ENOTFOUND) {
		brig_error_free(err);
		return cli_fail("copy into %s: no such directory in the computer", dir);
	}
	return rc ? put_error(err, dir) : 0;
}

int cmd_cp(int argc, char **argv)
{
	bool follow = false;
	cli_target t = {0};
	int opt, trc = 0;
	optind = 0;
	while ((opt = cli_getopt("cp", argc, argv, ":hL", cp_opts, NULL)) != -1) {
		if (cli_target_opt(&t, opt, optarg, &trc)) {
			if (trc)
				return trc;
			continue;
		}
		if (opt == 'h')
			return cli_help(cp_usage);
		if (opt == 'L')
			follow = true;
		else
			return CLI_EXIT_FAIL;
	}
	if (argc - optind != 2)
		return cli_usage("cp", "SRC and DEST are required");
	const char *src = argv[optind], *dst = argv[optind + 1];
	char *sname = NULL, *spath = NULL, *dname = NULL, *dpath = NULL;
	bool out = split_remote(src, t.id_given, &sname, &spath);
	bool in = split_remote(dst, t.id_given, &dname, &dpath);
	int rc = 0;
	if (out == in)
		rc = cli_usage("cp", "%s",
			       out ? "copying between computers is not supported"
				   : "one of SRC and DEST must be NAME:PATH (or :PATH with --ns/--agent/--session)");
	brig_engine *e = NULL;
	cli_remote *r = NULL;
	cleanup_free char *id = NULL;
	cleanup_free char *ref = NULL;
	cleanup_free char *base = NULL;
	cp_side sd = {0};
	if (!rc && cli_remote_host()) {
		/* through a brig server: its archive routes */
		if (cli_remote_open(&r) != 0)
			rc = CLI_EXIT_FAIL;
		if (!rc && (rc = cli_remote_target(r, "cp", &t, out ? sname : dname, &base)) == 1)
			rc = cli_fail("no computer named %s on the brig server (or not one of a session it may touch)",
				      out ? sname : dname);
		sd.r = r;
		sd.base = base;
	} else if (!rc) {
		if (cli_target_name(&ref, "cp", &t, out ? sname : dname, NULL, true) != 0)
			rc = CLI_EXIT_FAIL;
		if (!rc && cli_engine_open(&e) != 0)
			rc = CLI_EXIT_FAIL;
		if (!rc)
			rc = computer_id(e, &id, ref, !t.id_given);
		sd.e = e;
		sd.id = id;
	}
	if (!rc)
		rc = out ? copy_out(&sd, spath, dst) : copy_in(&sd, src, dpath, follow);
	cli_remote_free(r);
	brig_engine_free(e);
	free(sname);
	free(spath);
	free(dname);
	free(dpath);
	return rc;
}
