/* checkpoint.c — freeze → copy /workspace and /runtime out → thaw, into a
 * verified content-addressed zstd blob; and restore of a blob into a new
 * computer's volumes, digest checked before the first byte is copied. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/session.h"
#include "checkpoint/cas.h"
#include "tar/tar.h"
#include "util/util.h"

int brig_checkpoint_dir(char **out, const brig_store *s, brig_error **err)
{
	cleanup_free char *dir = NULL;
	const char *env = getenv("BRIG_CHECKPOINT_DIR");
	const char *sp = s ? brig_store_path(s) : NULL;
	if (env && *env) {
		dir = xstrdup(env);
	} else if (sp && *sp) {
		cleanup_free char *copy = xstrdup(sp);
		dir = xasprintf("%s/checkpoints", dirname(copy));
	} else {
		const char *xdg = getenv("XDG_DATA_HOME");
		const char *home = getenv("HOME");
		if (xdg && *xdg)
			dir = xasprintf("%s/brig/checkpoints", xdg);
		else if (geteuid() == 0)
			dir = xstrdup("/var/lib/brig/checkpoints");
		else
			dir = xasprintf("%s/.local/share/brig/checkpoints", home ? home : ".");
	}
	int rc = brig_mkdir_p(dir, 0700, "checkpoint directory", err);
	if (rc)
		return rc;
	*out = steal_pointer(&dir);
	return 0;
}

/* ---- create ---- */

/* The copy is capped by what the volumes can hold: their tmpfs sizes. */
uint64_t brig_checkpoint__volume_cap(brig_engine *e, json_t *inspect)
{
	uint64_t total = 0;
	size_t i;
	json_t *m;
	json_array_foreach (json_object_get(inspect, "Mounts"), i, m) {
		const char *name = json_string_value(json_object_get(m, "Name"));
		const char *dst = json_string_value(json_object_get(m, "Destination"));
		if (!name || !dst || (strcmp(dst, "/workspace") != 0 && strcmp(dst, "/runtime") != 0))
			continue;
		cleanup_json json_t *v = NULL;
		if (brig_engine_volume_inspect(e, &v, name, NULL) != 0)
			continue;
		const char *o = json_string_value(json_object_get(json_object_get(v, "Options"), "o"));
		const char *sz = o ? strstr(o, "size=") : NULL;
		if (!sz)
			continue;
		char *end = NULL;
		unsigned long long n = strtoull(sz + 5, &end, 10);
		uint64_t mult = 1;
		if (end && (*end == 'm' || *end == 'M'))
			mult = 1u << 20;
		else if (end && (*end == 'g' || *end == 'G'))
			mult = 1u << 30;
		else if (end && (*end == 'k' || *end == 'K'))
			mult = 1u << 10;
		total += n * mult;
	}
	return total ? total : (uint64_t)(512 + 256) << 20;
}

/* The pause marker names the process that froze a computer for a copy, so
 * a later checkpoint can thaw one that a killed process left frozen. */
static void write_marker(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return;
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
	brig_write_all(fd, buf, (size_t)n);
	close(fd);
}

static bool pauser_is_dead(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	char buf[32] = {0};
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
	return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* One checkpoint in flight: what its three steps hand each other. */
typedef struct ck_job {
	brig_computer *c;
	const char *ref;
	char *dir;
	int fd;    /* the blob being written */
	char *tmp; /* its name when O_TMPFILE is not available; unlinked on failure */
	char *final;
	brig_tar_copy_result result;
} ck_job;

/* Opens the blob's file: an anonymous one, linked in only when complete and
 * verified, so a process killed mid-copy leaves nothing behind. */
static int open_blob(ck_job *j, brig_error **err)
{
	j->fd = open(j->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (j->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		j->tmp = xasprintf("%s/.tmp-%s-%d-XXXXXX", j->dir, j->c->name, (int)getpid());
		j->fd = mkostemp(j->tmp, O_CLOEXEC);
	}
	if (j->fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: cannot create a file in %s: %s", j->dir,
				       strerror(errno));
	return 0;
}

/* Step 1, freeze and copy: pause the computer (unless its user did), copy
 * /workspace and /runtime through the copier into the blob, thaw whatever
 * happens, and finish the copy (j->result). */
static int freeze_and_copy(brig_engine *e, ck_job *j, int zstd_level, brig_error **err)
{
	cleanup_json json_t *inspect = NULL;
	int rc = brig_engine_container_inspect(e, &inspect, j->c->id, err);
	if (rc)
		return rc;
	json_t *state = json_object_get(inspect, "State");
	bool was_paused = json_is_true(json_object_get(state, "Paused"));
	cleanup_free char *marker = xasprintf("%s/.paused-%s", j->dir, j->c->id);
	if (was_paused && pauser_is_dead(marker)) {
		/* A checkpoint that was killed mid-copy froze it, not its user. */
		if ((rc = brig_engine_container_unpause(e, j->c->id, err)) != 0)
			return rc;
		unlink(marker);
		was_paused = false;
	}
	if (!json_is_true(json_object_get(state, "Running")))
		return brig__error_set(err, BRIG_ESTATE, 0,
				       "computer %s is not running: its tmpfs volumes are empty, nothing to checkpoint",
				       j->ref);
	if ((rc = open_blob(j, err)) != 0)
		return rc;
	brig_tar_copy_opts co = BRIG_TAR_COPY_OPTS_INIT;
	co.allow_symlinks = true;
	co.allow_absolute_symlinks = true;
	co.allow_hardlinks = true;
	co.rewrite_owner = true;
	co.uid = 1000;
	co.gid = 1000;
	co.compression = BRIG_TAR_COMPRESS_ZSTD;
	co.zstd_level = zstd_level;
	co.limits.max_total_bytes = brig_checkpoint__volume_cap(e, inspect);
	co.limits.max_entries = 2000000;
	/* brig's own started marker (src/sandbox/alive.c) belongs to the
	 * container it was written in, not to the session's files. */
	static const char *const exclude[] = {"runtime/.brig", NULL};
	co.exclude = exclude;
	brig_tar_copy *cp = NULL;
	if ((rc = brig_tar_copy_new(&cp, &co, brig_tar_write_fd, &j->fd, err)) != 0)
		return rc;

	/* Freeze so the copy is consistent, and thaw whatever happens. */
	bool paused = false;
	if (!was_paused) {
		write_marker(marker);
		if ((rc = brig_engine_container_pause(e, j->c->id, err)) != 0) {
			unlink(marker);
			brig_tar_copy_free(cp);
			return rc;
		}
		paused = true;
	}
	static const char *const paths[] = {"/workspace", "/runtime"};
	for (size_t i = 0; i < 2 && rc == 0; i++) {
		rc = brig_engine_archive_get(e, j->c->id, paths[i], NULL, brig_tar_copy_data_cb, cp, err);
		brig_error *cerr = NULL;
		int erc = brig_tar_copy_end_input(cp, &cerr);
		if (erc && (rc == 0 || rc == erc)) {
			/* The copier's reason (unsafe entry, cap) is the real one. */
			rc = erc;
			brig__error_move(err, steal_pointer(&cerr));
		}
		brig_error_free(cerr);
	}
	if (paused) {
		brig_error *uerr = NULL;
		int urc = brig_engine_container_unpause(e, j->c->id, &uerr);
		if (urc == 0)
			unlink(marker);
		if (urc && rc == 0) {
			rc = urc;
			brig__error_move(err, steal_pointer(&uerr));
		}
		brig_error_free(uerr);
	}
	if (rc == 0)
		rc = brig_tar_copy_finish(cp, &j->result, err);
	brig_tar_copy_free(cp);
	return rc;
}

/* Step 2, verify and link: the blob on disk reads back as written, then it
 * gets its content address <sha256>.tar.zst (an existing one of that name
 * is the same content). */
static int verify_and_link(ck_job *j, brig_error **err)
{
	if (fsync(j->fd) < 0)
		return brig__error_set(err, BRIG_EIO, errno, "checkpoint: writing into %s: %s", j->dir,
				       strerror(errno));
	/* Verify what is on disk, not what we meant to write. */
	char ondisk[65];
	uint64_t size = 0;
	int rc = 0;
	if (lseek(j->fd, 0, SEEK_SET) < 0 || (rc = brig_tar_sha256_fd(j->fd, ondisk, &size, err)) != 0)
		return rc ? rc
			  : brig__error_set(err, BRIG_EIO, errno, "checkpoint: rereading the new blob in %s", j->dir);
	if (strcmp(ondisk, j->result.sha256) != 0 || size != j->result.out_bytes)
		return brig__error_set(err, BRIG_ECORRUPT, 0,
				       "checkpoint: the new blob in %s does not read back as written", j->dir);
	j->final = xasprintf("%s/%s.tar.zst", j->dir, j->result.sha256);
	if (j->tmp) {
		if (rename(j->tmp, j->final) < 0)
			return brig__error_set(err, BRIG_EIO, errno, "checkpoint: rename into place: %s",
					       strerror(errno));
	} else {
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", j->fd);
		/* EEXIST: the same content is already stored under its digest. */
		if (linkat(AT_FDCWD, proc, AT_FDCWD, j->final, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
			return brig__error_set(err, BRIG_EIO, errno, "checkpoint: link into place: %s",
					       strerror(errno));
	}
	free(j->tmp);
	j->tmp = NULL;
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* Step 3, record and prune: the store learns of the blob (or manifest);
 * with keep, the session's older checkpoints past the newest keep go, and
 * their blobs when no other record names them, then file blobs no manifest
 * names (best effort: the new record stands). */
static int record_and_prune(brig_store *s, const brig_computer *c, const char *dir, const char *digest,
			    const char *blob, int64_t raw, int64_t stored, size_t keep, brig_store_checkpoint **out,
			    brig_error **err)
{
	brig_store_checkpoint rec = {.ns = c->ns,
				     .agent = c->agent,
				     .session = c->session,
				     .generation = c->generation,
				     .digest = (char *)digest,
				     .blob = (char *)blob,
				     .bytes_raw = raw,
				     .bytes_stored = stored};
	brig_store_checkpoint *added = NULL;
	int rc = brig_store_checkpoint_add(s, &added, &rec, err);
	if (rc)
		return rc;
	if (keep) {
		brig_store_checkpoint *gone = NULL;
		size_t n = 0;
		if (brig_store_checkpoint_prune(s, &gone, &n, c->ns, c->agent, c->session, keep, NULL) == 0) {
			for (size_t i = 0; i < n; i++) {
				if (gone[i].blob_refs == 0 && !strchr(gone[i].blob, '/')) {
					cleanup_free char *p = xasprintf("%s/%s", dir, gone[i].blob);
					unlink(p);
				}
			}
			brig_store_checkpoint_free_array(gone, n);
			ck_cas_collect(dir);
		}
	}
	if (out)
		*out = added;
	else
		brig_store_checkpoint_free(added);
	return 0;
}

static int record_job(brig_store *s, ck_job *j, size_t keep, brig_store_checkpoint **out, brig_error **err)
{
	return record_and_prune(s, j->c, j->dir, j->result.sha256, j->final + strlen(j->dir) + 1,
				(int64_t)j->result.tar_bytes, (int64_t)j->result.out_bytes, keep, out, err);
}

/* The record needs the session: find out before copying anything, or a
 * computer made by `brig create` is copied in full and its blob left behind
 * without a record. */
static int check_session(brig_store *s, const brig_computer *c, const char *ref, brig_error **err)
{
	if (!c->ns || !c->agent || !c->session || !c->generation)
		return brig__error_set(err, BRIG_EPROTO, 0, "computer %s has no identity labels", ref);
	brig_store_session *sess = NULL;
	int rc = brig_store_session_get(s, &sess, c->ns, c->agent, c->session, err);
	brig_store_session_free(sess);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "computer %s is not a session in the store %s (made with brig create?): "
				       "start sessions with brig up",
				       ref, brig_store_display_url(s));
	return rc;
}

int brig_checkpoint_create(brig_engine *e, brig_store *s, brig_store_checkpoint **out, const char *ref,
			   const brig_checkpoint_opts *opts, brig_error **err)
{
	brig_checkpoint_opts defaults = BRIG_CHECKPOINT_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int rc = brig__opts_check(opts->version, BRIG_CHECKPOINT_OPTS_VERSION, "checkpoint options", err);
	if (rc)
		return rc;
	ck_job j = {.ref = ref, .fd = -1};
	char digest[65];
	char *manifest = NULL;
	int64_t raw = 0, stored = 0;
	if ((rc = brig_computer_get(e, &j.c, ref, NULL, err)) != 0)
		return rc;
	if ((rc = check_session(s, j.c, ref, err)) != 0)
		goto out;
	if (opts->dir)
		j.dir = xstrdup(opts->dir);
	else if ((rc = brig_checkpoint_dir(&j.dir, s, err)) != 0)
		goto out;
	/* Incremental through brig-init when it can (1: it cannot), else the
	 * full copy through the daemon. */
	if ((rc = ck_cas_create(e, s, j.c, j.dir, &manifest, digest, &raw, &stored, err)) == 0) {
		rc = record_and_prune(s, j.c, j.dir, digest, manifest, raw, stored, opts->keep, out, err);
		goto out;
	}
	if (rc != 1)
		goto out;
	if ((rc = freeze_and_copy(e, &j, opts->zstd_level, err)) == 0 && (rc = verify_and_link(&j, err)) == 0)
		rc = record_job(s, &j, opts->keep, out, err);
out:
	if (j.fd >= 0)
		close(j.fd);
	if (j.tmp)
		unlink(j.tmp); /* a failed copy never replaces a good blob */
	free(j.tmp);
	free(j.final);
	free(j.dir);
	free(manifest);
	brig_computer_free(j.c);
	return rc ? brig__error_prefix(err, rc, "checkpoint %s", ref) : 0;
}

/* An imported blob holds a session's files: "workspace" and "runtime"
 * and what is under them, nothing else (restore puts nothing else
 * anywhere). */
static void import_entry(const char *path, int type, uint64_t size, void *payload)
{
	(void)type, (void)size;
	bool *stray = payload;
	size_t n = strcspn(path, "/");
	if (!((n == 9 && strncmp(path, "workspace", 9) == 0) || (n == 7 && strncmp(path, "runtime", 7) == 0)))
		*stray = true;
}

static int import_legacy(brig_store *s, brig_store_checkpoint **out, const char *ns, const char *agent,
			 const char *session, int fd, const brig_checkpoint_opts *opts, brig_error **err)
{
	int rc;
	brig_store_session *sess = NULL;
	if ((rc = brig_store_session_get(s, &sess, ns, agent, session, err)) != 0)
		return rc == BRIG_ENOTFOUND ? brig__error_set(err, BRIG_ENOTFOUND, 0,
							      "no session %s/%s/%s in the store: start it with brig up",
							      ns, agent, session)
					    : rc;
	brig_computer c = {.ns = sess->ns,
			   .agent = sess->agent,
			   .session = sess->session,
			   .name = (char *)"import",
			   .generation = (uint32_t)sess->generation};
	ck_job j = {.c = &c, .ref = "import", .fd = -1};
	brig_tar_restore *r = NULL;
	brig_tar_copy *cp = NULL;
	bool stray = false;
	char sha[65];
	uint64_t size = 0;
	if (lseek(fd, 0, SEEK_SET) < 0) {
		rc = brig__error_set(err, BRIG_EIO, errno, "cannot read the blob: %s", strerror(errno));
		goto out;
	}
	if ((rc = brig_tar_sha256_fd(fd, sha, &size, err)) != 0 ||
	    (rc = brig_tar_restore_open(&r, fd, NULL, sha, err)) != 0)
		goto out;
	if (opts->dir)
		j.dir = xstrdup(opts->dir);
	else if ((rc = brig_checkpoint_dir(&j.dir, s, err)) != 0)
		goto out;
	if ((rc = open_blob(&j, err)) != 0)
		goto out;
	/* The same copier as a checkpoint of a computer: every entry checked
	 * and re-written, owned by 1000:1000. */
	brig_tar_copy_opts co = BRIG_TAR_COPY_OPTS_INIT;
	co.allow_symlinks = true;
	co.allow_absolute_symlinks = true;
	co.allow_hardlinks = true;
	co.rewrite_owner = true;
	co.uid = 1000;
	co.gid = 1000;
	co.compression = BRIG_TAR_COMPRESS_ZSTD;
	co.zstd_level = opts->zstd_level;
	co.limits.max_entries = 2000000;
	co.on_entry = import_entry;
	co.payload = &stray;
	static const char *const exclude[] = {"runtime/.brig", NULL};
	co.exclude = exclude;
	if ((rc = brig_tar_copy_new(&cp, &co, brig_tar_write_fd, &j.fd, err)) != 0 ||
	    (rc = brig_tar_copy_from_reader(cp, brig_tar_restore_reader, r, err)) != 0 ||
	    (rc = brig_tar_copy_finish(cp, &j.result, err)) != 0)
		goto out;
	if (stray) {
		rc = brig__error_set(err, BRIG_EUNSAFE, 0,
				     "the blob holds entries outside workspace/ and runtime/: not a brig checkpoint");
		goto out;
	}
	if ((rc = verify_and_link(&j, err)) == 0)
		rc = record_job(s, &j, opts->keep, out, err);
out:
	brig_tar_copy_free(cp);
	brig_tar_restore_free(r);
	if (j.fd >= 0)
		close(j.fd);
	if (j.tmp)
		unlink(j.tmp);
	free(j.tmp);
	free(j.final);
	free(j.dir);
	brig_store_session_free(sess);
	return rc ? brig__error_prefix(err, rc, "checkpoint import into %s/%s/%s", ns, agent, session) : 0;
}

/* A stream that cannot seek (stdin) is spooled into an anonymous file. */
static int spool(int *out, const char *dir, const char *pre, size_t pre_len, int fd, brig_error **err)
{
	int t = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (t < 0 || brig_write_all(t, pre, pre_len) != 0) {
		int e = errno;
		if (t >= 0)
			close(t);
		return brig__error_set(err, BRIG_EIO, e, "checkpoint import: cannot spool into %s: %s", dir,
				       strerror(e));
	}
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			break;
		if (n < 0 || brig_write_all(t, buf, (size_t)n) != 0) {
			int e = errno;
			close(t);
			return brig__error_set(err, BRIG_EIO, e, "checkpoint import: reading: %s", strerror(e));
		}
	}
	*out = t;
	return 0;
}

int brig_checkpoint_import(brig_store *s, brig_store_checkpoint **out, const char *ns, const char *agent,
			   const char *session, int fd, const brig_checkpoint_opts *opts, brig_error **err)
{
	brig_checkpoint_opts defaults = BRIG_CHECKPOINT_OPTS_INIT;
	if (!opts)
		opts = &defaults;
	int rc = brig__opts_check(opts->version, BRIG_CHECKPOINT_OPTS_VERSION, "checkpoint options", err);
	if (rc)
		return rc;
	if ((ns || agent || session) && !(ns && agent && session))
		return brig__error_set(err, BRIG_EINVAL, 0, "checkpoint import: give ns, agent and session, or none");
	cleanup_free char *dir = NULL;
	if (opts->dir)
		dir = xstrdup(opts->dir);
	else if ((rc = brig_checkpoint_dir(&dir, s, err)) != 0)
		return rc;
	/* An export archive starts with its session.json entry; anything else
	 * is a checkpoint blob of the full-copy format. */
	char pre[512];
	size_t got = 0;
	bool seekable = lseek(fd, 0, SEEK_CUR) >= 0;
	while (got < sizeof pre) {
		ssize_t n = read(fd, pre + got, sizeof pre - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return brig__error_set(err, BRIG_EIO, errno, "checkpoint import: reading: %s", strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got == sizeof pre && strncmp(pre, "brig-checkpoint/", 16) == 0) {
		rc = ck_cas_import(s, dir, out, ns, agent, session, pre, got, fd, err);
		return rc ? brig__error_prefix(err, rc, "checkpoint import") : 0;
	}
	if (!ns)
		return brig__error_set(
			err, BRIG_EINVAL, 0,
			"checkpoint import: not an export archive (brig checkpoint export); a checkpoint "
			"blob needs --ns, --agent and --session");
	int lfd = fd;
	if (!seekable && (rc = spool(&lfd, dir, pre, got, fd, err)) != 0)
		return rc;
	rc = import_legacy(s, out, ns, agent, session, lfd, opts, err);
	if (lfd != fd)
		close(lfd);
	return rc;
}

static ssize_t fd_read(char *buf, size_t len, void *payload, brig_error **err)
{
	ssize_t n;
	while ((n = read(*(int *)payload, buf, len)) < 0 && errno == EINTR)
		;
	if (n < 0)
		brig__error_set(err, BRIG_EIO, errno, "reading: %s", strerror(errno));
	return n;
}

typedef struct who {
	char *ns, *agent, *session;
} who;

static int who_meta(json_t *meta, void *payload, brig_error **err)
{
	who *w = payload;
	const char *ns = json_string_value(json_object_get(meta, "ns"));
	const char *agent = json_string_value(json_object_get(meta, "agent"));
	const char *session = json_string_value(json_object_get(meta, "session"));
	if (json_integer_value(json_object_get(meta, "format")) != 1 || !ns || !agent || !session)
		return brig__error_set(err, BRIG_EPROTO, 0,
				       "checkpoint archive: session.json lacks format 1, ns, agent or session");
	w->ns = xstrdup(ns);
	w->agent = xstrdup(agent);
	w->session = xstrdup(session);
	return BRIG_ECANCELED; /* all that was wanted */
}

int brig_checkpoint__archive_session(int fd, char **ns, char **agent, char **session, brig_error **err)
{
	*ns = *agent = *session = NULL;
	char pre[512];
	size_t got = 0;
	for (ssize_t n = 1; got < sizeof pre && n > 0; got += n > 0 ? (size_t)n : 0)
		if ((n = fd_read(pre + got, sizeof pre - got, &fd, err)) < 0)
			return BRIG_EIO;
	if (got < sizeof pre || strncmp(pre, "brig-checkpoint/", 16) != 0)
		return 0; /* a checkpoint blob: it names no session */
	who w = {0};
	ck_archive_sink sink = {.meta = who_meta, .payload = &w};
	ck_manifest m;
	int rc = ck_archive_read(&m, pre, got, fd_read, &fd, &sink, err);
	ck_manifest_free(&m);
	if (rc == BRIG_ECANCELED && w.ns) {
		brig__error_clear(err);
		*ns = w.ns;
		*agent = w.agent;
		*session = w.session;
		return 0;
	}
	free(w.ns);
	free(w.agent);
	free(w.session);
	return rc ? brig__error_prefix(err, rc, "checkpoint import")
		  : brig__error_set(err, BRIG_EPROTO, 0, "checkpoint import: the archive has no session.json");
}

int brig_checkpoint_export(brig_store *s, const char *dir, int64_t id, int fd, brig_error **err)
{
	cleanup_free char *d = NULL;
	int rc = dir ? (d = xstrdup(dir), 0) : brig_checkpoint_dir(&d, s, err);
	if (rc)
		return rc;
	brig_store_checkpoint *cp = NULL;
	if ((rc = brig_store_checkpoint_get(s, &cp, id, err)) != 0)
		return brig__error_prefix(err, rc, "checkpoint %lld", (long long)id);
	if (ck_is_manifest_blob(cp->blob)) {
		rc = ck_cas_export(s, d, cp, fd, err);
	} else {
		/* the full-copy format travels as its blob, checked on the way */
		brig_tar_restore *r = NULL;
		cleanup_free char *path = xasprintf("%s/%s", d, cp->blob);
		if ((rc = brig_tar_restore_open(&r, AT_FDCWD, path, cp->digest, err)) == 0) {
			cleanup_close int bfd = open(path, O_RDONLY | O_CLOEXEC);
			char buf[65536];
			ssize_t n = 0;
			while (bfd >= 0 && (n = read(bfd, buf, sizeof buf)) > 0 && rc == 0)
				if (brig_write_all(fd, buf, (size_t)n) != 0)
					rc = brig__error_set(err, BRIG_EIO, errno, "writing: %s", strerror(errno));
			if (rc == 0 && (bfd < 0 || n < 0))
				rc = brig__error_set(err, BRIG_EIO, errno, "reading %s: %s", path, strerror(errno));
		}
		brig_tar_restore_free(r);
	}
	brig_store_checkpoint_free(cp);
	return rc ? brig__error_prefix(err, rc, "checkpoint export %lld", (long long)id) : 0;
}

int brig_checkpoint_remove(brig_store *s, const char *dir, int64_t id, brig_error **err)
{
	cleanup_free char *d = NULL;
	if (dir)
		d = xstrdup(dir);
	else {
		int rc = brig_checkpoint_dir(&d, s, err);
		if (rc)
			return rc;
	}
	brig_store_checkpoint *gone = NULL;
	int rc = brig_store_checkpoint_remove(s, &gone, id, err);
	if (rc)
		return rc;
	if (gone->blob_refs == 0 && !strchr(gone->blob, '/')) {
		cleanup_free char *p = xasprintf("%s/%s", d, gone->blob);
		if (unlink(p) < 0 && errno != ENOENT)
			rc = brig__error_set(err, BRIG_EIO, errno, "remove checkpoint blob %s: %s", p, strerror(errno));
		else
			ck_cas_collect(d);
	}
	brig_store_checkpoint_free(gone);
	return rc;
}

int brig_session_remove(brig_store *s, const char *dir, const char *ns, const char *agent, const char *session,
			bool checkpoints, size_t *removed, brig_error **err)
{
	if (removed)
		*removed = 0;
	cleanup_free char *d = NULL;
	int rc = dir ? (d = xstrdup(dir), 0) : brig_checkpoint_dir(&d, s, err);
	if (rc)
		return rc;
	brig_store_session *r = NULL;
	if ((rc = brig_store_session_get(s, &r, ns, agent, session, err)) != 0) {
		if (rc == BRIG_ENOTFOUND)
			brig__error_prefix(err, rc, "session %s/%s/%s", ns, agent, session);
		return rc;
	}
	int64_t rev = r->revision;
	brig_store_session_free(r);
	brig_store_checkpoint *gone = NULL;
	size_t ngone = 0;
	rc = checkpoints ? brig_store_session_delete(s, &gone, &ngone, ns, agent, session, rev, err)
			 : brig_store_session_forget(s, ns, agent, session, rev, err);
	if (rc != 0) {
		if (rc == BRIG_ECONFLICT)
			brig__error_prefix(err, rc, "session %s/%s/%s changed while being removed; nothing was removed",
					   ns, agent, session);
		return rc;
	}
	for (size_t i = 0; i < ngone; i++) {
		if (gone[i].blob_refs != 0 || strchr(gone[i].blob, '/'))
			continue;
		cleanup_free char *p = xasprintf("%s/%s", d, gone[i].blob);
		if (unlink(p) < 0 && errno != ENOENT && rc == 0)
			rc = brig__error_set(err, BRIG_EIO, errno,
					     "session %s/%s/%s removed, but not its checkpoint blob %s: %s", ns, agent,
					     session, p, strerror(errno));
	}
	brig_store_checkpoint_free_array(gone, ngone);
	ck_cas_collect(d);
	if (removed)
		*removed = ngone;
	return rc;
}

/* ---- restore ----
 * The blob holds "workspace/…" and "runtime/…" entries; each volume gets its
 * own PUT (a read-only root refuses a PUT at "/"). brig_tar_split filters
 * the verified blob into a pipe per volume; each PUT body reads its pipe. */

typedef struct pipe_reader {
	int fd;
} pipe_reader;

static ssize_t read_pipe(char *buf, size_t len, void *payload, brig_error **err)
{
	pipe_reader *p = payload;
	for (;;) {
		ssize_t n = read(p->fd, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return brig__error_set(err, BRIG_EIO, errno, "restore pipe: %s", strerror(errno));
	}
}

int brig_checkpoint_restore(brig_engine *e, const char *dir, const brig_store_checkpoint *cp, const char *ref,
			    brig_error **err)
{
	if (ck_is_manifest_blob(cp->blob))
		return ck_cas_restore(e, dir, cp, ref, err);
	/* Verify before anything is copied: a bad blob changes nothing. The
	 * same open stream is then read once, hashed again on the way. */
	cleanup_free char *path = xasprintf("%s/%s", dir, cp->blob);
	brig_tar_restore *r = NULL;
	int rc = brig_tar_restore_open(&r, AT_FDCWD, path, cp->digest, err);
	if (rc)
		return brig__error_prefix(err, rc, "checkpoint %lld", (long long)cp->id);
	int pa[2] = {-1, -1}, pb[2] = {-1, -1};
	if (pipe2(pa, O_CLOEXEC) < 0 || pipe2(pb, O_CLOEXEC) < 0) {
		rc = brig__error_set(err, BRIG_EIO, errno, "pipe: %s", strerror(errno));
		for (int k = 0; k < 2; k++) {
			if (pa[k] >= 0)
				close(pa[k]);
			if (pb[k] >= 0)
				close(pb[k]);
		}
		brig_tar_restore_free(r);
		return rc;
	}
	static const char *const prefixes[] = {"workspace/", "runtime/"};
	const int wfd[2] = {pa[1], pb[1]};
	brig_tar_split *sp = NULL;
	if ((rc = brig_tar_split_start(&sp, r, prefixes, wfd, 2, err)) != 0) {
		close(pa[0]);
		close(pb[0]);
		brig_tar_restore_free(r);
		return brig__error_prefix(err, rc, "restore checkpoint %lld into %s", (long long)cp->id, ref);
	}
	static const char *const targets[] = {"/workspace", "/runtime"};
	int rfd[2] = {pa[0], pb[0]};
	for (size_t i = 0; i < 2; i++) {
		pipe_reader pr = {.fd = rfd[i]};
		if (rc == 0)
			rc = brig_engine_archive_put(e, ref, targets[i], read_pipe, &pr, err);
		close(rfd[i]); /* unblocks the worker if a PUT stopped early */
	}
	brig_error *serr = NULL;
	int src = brig_tar_split_join(sp, &serr);
	brig_tar_restore_free(r);
	if (src && (rc == 0 || rc == BRIG_EIO || rc == BRIG_EUNCERTAIN)) {
		rc = src; /* the worker's reason (a corrupt blob) comes first */
		brig__error_move(err, serr);
	} else {
		brig_error_free(serr);
	}
	if (rc)
		return brig__error_prefix(err, rc, "restore checkpoint %lld into %s", (long long)cp->id, ref);
	return 0;
}
