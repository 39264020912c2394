/* image.c — brig_image_build: lock → rootfs → npm → context → build →
 * verify → record, each stage timed and named in its errors. The stages
 * "lock", "context", "build" and "verify" live here; rootfs.c, npm.c and
 * records.c hold the others. */
#include "image/image_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define MAX_DOCKERFILE_BYTES (256u << 10)

/* ---- small helpers ---- */

const char *brig_image_profile_name(brig_image_profile p)
{
	return p == BRIG_IMAGE_AGENTS ? "agents" : "minimal";
}

const char *brig_image_default_tag(brig_image_profile p)
{
	return p == BRIG_IMAGE_AGENTS ? BRIG_IMAGE_AGENTS_TAG : BRIG_IMAGE_MINIMAL_TAG;
}

int brig_image_profile_parse(brig_image_profile *out, const char *s, brig_error **err)
{
	if (s && strcmp(s, "minimal") == 0)
		*out = BRIG_IMAGE_MINIMAL;
	else if (s && strcmp(s, "agents") == 0)
		*out = BRIG_IMAGE_AGENTS;
	else
		return brig__error_set(err, BRIG_EINVAL, 0, "profile: '%.32s' is not a profile (minimal or agents)",
				       s ? s : "");
	return 0;
}

void brig_image__progress(const brig_image_build_opts *o, const char *stage, const char *fmt, ...)
{
	if (!o->progress)
		return;
	va_list ap;
	char *line = NULL;
	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (line)
		o->progress(stage, line, o->payload);
	free(line);
}

static void stage_done(brig_image_result *res, const char *name, int64_t start_ms, bool cached)
{
	if (res->stage_count >= BRIG_IMAGE_MAX_STAGES)
		return;
	brig_image_stage *s = &res->stages[res->stage_count++];
	s->name = name;
	s->ms = brig_now_ms() - start_ms;
	s->cached = cached;
}

/* A cache directory must be ours and not writable by anyone else: a
 * tarball swapped there would become the image. */
static int check_private_dir(const char *path, brig_error **err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot use cache directory %s: %s", path,
				       strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return brig__error_set(err, BRIG_EIO, ENOTDIR, "cache %s is not a directory", path);
	if (st.st_uid != geteuid() || (st.st_mode & 022))
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "cache directory %s belongs to uid %u with mode %03o: it must belong to uid %u "
				       "and be writable by no one else (a tarball swapped there would become the "
				       "image); fix it with chown/chmod or pass another --cache-dir",
				       path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777), (unsigned)geteuid());
	return 0;
}

char *brig_image_default_cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	if (xdg && xdg[0] == '/')
		return xasprintf("%s/brig", xdg);
	if (geteuid() == 0)
		return xstrdup("/var/cache/brig");
	const char *home = getenv("HOME");
	if (home && home[0] == '/')
		return xasprintf("%s/.cache/brig", home);
	return xasprintf("/tmp/brig-cache-%u", (unsigned)geteuid());
}

static char *default_image_dir(void)
{
	const char *env = getenv("BRIG_IMAGE_DIR");
	if (env && *env)
		return xstrdup(env);
#ifdef BRIG_SOURCE_DIR
	return xstrdup(BRIG_SOURCE_DIR "/image");
#else
	return xstrdup("image");
#endif
}

/* Docker's reference grammar, narrowed: lower-case repository path
 * components, an optional tag; no digests, no registry ports. */
static int check_tag(const char *tag, brig_error **err)
{
	const char *colon = tag ? strrchr(tag, ':') : NULL;
	size_t rl = colon ? (size_t)(colon - tag) : (tag ? strlen(tag) : 0);
	bool ok = tag && rl > 0 && rl <= 200;
	for (size_t i = 0; ok && i < rl; i++) {
		char c = tag[i];
		bool sep = c == '.' || c == '_' || c == '-' || c == '/';
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || sep))
			ok = false;
		if (sep && (i == 0 || i + 1 == rl))
			ok = false;
	}
	if (ok && colon) {
		const char *t = colon + 1;
		size_t tl = strlen(t);
		ok = tl > 0 && tl <= 128 && t[0] != '.' && t[0] != '-';
		for (size_t i = 0; ok && i < tl; i++) {
			char c = t[i];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
			      c == '.' || c == '-'))
				ok = false;
		}
	}
	if (!ok)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "tag: '%.80s' is not an image name (lower-case repository, optional :tag, e.g. "
				       "brig-sandbox:local)",
				       tag ? tag : "");
	return 0;
}

static const char *host_arch(void)
{
	struct utsname u;
	if (uname(&u) != 0)
		return "amd64";
	if (strcmp(u.machine, "x86_64") == 0)
		return "amd64";
	if (strcmp(u.machine, "aarch64") == 0)
		return "arm64";
	if (strncmp(u.machine, "armv7", 5) == 0)
		return "armhf";
	if (strcmp(u.machine, "i686") == 0 || strcmp(u.machine, "i386") == 0)
		return "i386";
	if (strcmp(u.machine, "ppc64le") == 0)
		return "ppc64el";
	if (strcmp(u.machine, "s390x") == 0)
		return "s390x";
	return "amd64";
}

/* ---- result ---- */

void brig_image_result_clear(brig_image_result *res)
{
	if (!res)
		return;
	free(res->tag);
	free(res->profile);
	free(res->image_id);
	free(res->lock_path);
	free(res->lock_sha256);
	free(res->rootfs_key);
	free(res->lock_changes);
	for (size_t i = 0; i < res->file_count; i++) {
		free(res->files[i].name);
		free(res->files[i].source);
		free(res->files[i].origin);
	}
	free(res->files);
	memset(res, 0, sizeof *res);
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *brig_image_result_to_json(const brig_image_result *res)
{
	json_t *files = json_array();
	for (size_t i = 0; i < res->file_count; i++) {
		const brig_image_file *f = &res->files[i];
		json_array_append_new(files,
				      json_pack("{s:s, s:I, s:o, s:o}", "name", f->name, "size", (json_int_t)f->size,
						"source", str_or_null(f->source), "origin", str_or_null(f->origin)));
	}
	json_t *stages = json_array();
	for (size_t i = 0; i < res->stage_count; i++)
		json_array_append_new(stages,
				      json_pack("{s:s, s:I, s:b}", "name", res->stages[i].name, "ms",
						(json_int_t)res->stages[i].ms, "cached", res->stages[i].cached));
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:b, s:o, s:{s:o, s:I, s:I}, s:o, s:I}", "tag",
			 str_or_null(res->tag), "profile", str_or_null(res->profile), "image_id",
			 str_or_null(res->image_id), "lock_path", str_or_null(res->lock_path), "lock_sha256",
			 str_or_null(res->lock_sha256), "rootfs_key", str_or_null(res->rootfs_key), "rootfs_cached",
			 res->rootfs_cached, "lock_updated", res->lock_updated, "lock_changes",
			 str_or_null(res->lock_changes), "context", "files", files, "bytes",
			 (json_int_t)res->context_bytes, "tar_bytes", (json_int_t)res->context_tar_bytes, "stages",
			 stages, "total_ms", (json_int_t)res->total_ms);
}

/* ---- the build ---- */

static void ctx_free(brig_image_build_ctx *c)
{
	if (c->work)
		brig_image__remove_tree(c->work);
	free(c->work);
	free(c->cache_dir);
	free(c->image_dir);
	free(c->lock_path);
	free(c->keyring);
	free(c->previous_id);
	json_decref(c->lock);
	json_decref(c->sources);
}

static void remove_stale_work(brig_image_build_ctx *c);

/* Stage "lock": options, directories, the lock and the Dockerfile. */
static int stage_lock(brig_image_build_ctx *c, brig_error **err)
{
	const brig_image_build_opts *o = c->o;
	brig_image_result *res = c->res;
	c->image_dir = o->image_dir ? xstrdup(o->image_dir) : default_image_dir();
	c->lock_path = o->lock_path ? xstrdup(o->lock_path) : xasprintf("%s/brig-image.lock", c->image_dir);
	res->lock_path = xstrdup(c->lock_path);
	char sha[65];
	int rc = brig_image__lock_load(&c->lock, sha, c->lock_path, err);
	if (rc)
		return rc;
	res->lock_sha256 = xstrdup(sha);
	c->lprofile = brig_image__lock_profile(c->lock, c->pname);
	if (!c->lprofile)
		return brig__error_set(err, BRIG_ECORRUPT, 0,
				       "%s has no profile '%s': add it with scripts/update-image-lock", c->lock_path,
				       c->pname);
	json_t *deb = json_object_get(c->lock, "debian");
	c->suite = json_string_value(json_object_get(deb, "suite"));
	c->variant = json_string_value(json_object_get(deb, "variant"));
	if (!c->variant)
		c->variant = "minbase";
	c->arch = host_arch();
	if (!o->update_lock && json_object_size(json_object_get(c->lprofile, "packages")) == 0)
		return brig__error_set(err, BRIG_ECORRUPT, 0,
				       "%s has no package set for profile '%s': record one with "
				       "scripts/update-image-lock",
				       c->lock_path, c->pname);

	/* The Dockerfile goes first in the context, verbatim. */
	cleanup_free char *df = xasprintf("%s/Dockerfile.%s", c->image_dir, c->pname);
	cleanup_free char *text = NULL;
	size_t len = 0;
	rc = brig_image__read_file(df, MAX_DOCKERFILE_BYTES, &text, &len, err);
	if (rc)
		return rc;
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(c->lprofile, "npm"), i, v) {
		const char *f = json_string_value(json_object_get(v, "file"));
		if (!strstr(text, f))
			return brig__error_set(err, BRIG_ECORRUPT, 0,
					       "%s lists %s for profile '%s' but %s never uses it: the lock and "
					       "the Dockerfile disagree",
					       c->lock_path, f, c->pname, df);
	}
	cleanup_free char *origin = xasprintf("Dockerfile.%s", c->pname);
	brig_image__context_add(res, "Dockerfile", df, len, origin);

	/* The cache. */
	c->cache_dir = o->cache_dir ? xstrdup(o->cache_dir) : brig_image_default_cache_dir();
	mode_t mode = geteuid() == 0 ? 0755 : 0700;
	static const char *const subs[] = {"", "/rootfs", "/npm", "/tmp"};
	for (size_t k = 0; k < sizeof subs / sizeof *subs; k++) {
		cleanup_free char *d = xasprintf("%s%s", c->cache_dir, subs[k]);
		if ((rc = brig_mkdir_p(d, mode, NULL, err)) != 0 || (rc = check_private_dir(d, err)) != 0)
			return rc;
	}
	remove_stale_work(c);
	return 0;
}

/* Work directories of builds that died (an interrupted debootstrap leaves a
 * few hundred MB) are removed once they are a day old; a running build's
 * directory is younger than that. */
static void remove_stale_work(brig_image_build_ctx *c)
{
	cleanup_free char *tmp = xasprintf("%s/tmp", c->cache_dir);
	DIR *d = opendir(tmp);
	if (!d)
		return;
	time_t limit = time(NULL) - 24 * 3600;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "build-", 6) != 0)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
		    st.st_mtime > limit)
			continue;
		cleanup_free char *p = xasprintf("%s/%s", tmp, de->d_name);
		brig_image__progress(c->o, "lock", "removing %s, left by a build that did not finish", p);
		brig_image__remove_tree(p);
	}
	closedir(d);
}

int brig_image__make_work_dir(brig_image_build_ctx *c, brig_error **err)
{
	if (c->work)
		return 0;
	char *t = xasprintf("%s/tmp/build-XXXXXX", c->cache_dir);
	if (!mkdtemp(t)) {
		int e = errno;
		free(t);
		return brig__error_set(err, BRIG_EIO, e, "cannot make a work directory under %s/tmp: %s", c->cache_dir,
				       strerror(e));
	}
	c->work = t;
	return 0;
}

/* Stage "context" for a dry run: the exact stream, counted, sent nowhere. */
static int count_context(brig_image_result *res, brig_error **err)
{
	brig_tar_builder *b = NULL;
	int rc = brig_image__context_open(&b, res, err);
	if (rc)
		return rc;
	char *buf = xmalloc(1 << 18);
	uint64_t total = 0;
	for (;;) {
		ssize_t r = brig_tar_builder_read(b, buf, 1 << 18, err);
		if (r < 0) {
			rc = (int)r;
			break;
		}
		if (r == 0)
			break;
		total += (uint64_t)r;
	}
	free(buf);
	brig_tar_builder_free(b);
	if (rc == 0)
		res->context_tar_bytes = total;
	return rc;
}

typedef struct send_ctx {
	brig_tar_builder *b;
	uint64_t sent;
} send_ctx;

static ssize_t send_reader(char *buf, size_t len, void *payload, brig_error **err)
{
	send_ctx *s = payload;
	ssize_t r = brig_tar_builder_read(s->b, buf, len, err);
	if (r > 0)
		s->sent += (uint64_t)r;
	return r;
}

typedef struct build_progress {
	const brig_image_build_opts *o;
} build_progress;

/* Docker's stream messages hold one or more lines; each becomes one. */
static void docker_line(const char *text, void *payload)
{
	build_progress *bp = payload;
	if (!bp->o->progress)
		return;
	const char *p = text;
	while (*p) {
		size_t l = strcspn(p, "\n");
		if (l) {
			char *line = xstrndup(p, l > 2000 ? 2000 : l);
			for (char *q = line; *q; q++)
				if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
					*q = '?';
			/* Docker's "\r" progress redraws, trimmed. */
			bool blank = strspn(line, " ?\t") == strlen(line);
			if (!blank)
				bp->o->progress("build", line, bp->o->payload);
			free(line);
		}
		p += l;
		if (*p == '\n')
			p++;
	}
}

static int stage_build(brig_engine *e, brig_image_build_ctx *c, brig_error **err)
{
	brig_image_result *res = c->res;
	brig_tar_builder *b = NULL;
	int rc = brig_image__context_open(&b, res, err);
	if (rc)
		return rc;
	send_ctx s = {.b = b};
	build_progress bp = {.o = c->o};
	json_t *prev = NULL;
	if (brig_engine_image_inspect(e, &prev, res->tag, NULL) == 0 && json_string_value(json_object_get(prev, "Id")))
		c->previous_id = xstrdup(json_string_value(json_object_get(prev, "Id")));
	json_decref(prev);
	cleanup_json json_t *args = json_pack("{s:s, s:s, s:s}", "BRIG_PROFILE", c->pname, "BRIG_LOCK_SHA256",
					      res->lock_sha256, "BRIG_ROOTFS_KEY", res->rootfs_key);
	brig_image__progress(c->o, "build", "sending %zu files (%llu bytes) to Docker; the build has no network",
			     res->file_count, (unsigned long long)res->context_bytes);
	char *id = NULL;
	rc = brig_engine_image_build(e, &id, res->tag, "none", args, send_reader, &s, docker_line, &bp, err);
	brig_tar_builder_free(b);
	res->context_tar_bytes = s.sent;
	if (rc)
		return rc;
	res->image_id = id;
	return 0;
}

/* Stage "verify": the tag names an image made from this lock and this root
 * filesystem. The labels decide, not the id the build stream announced: a
 * multi-stage build announces one id per stage. */
static int stage_verify(brig_engine *e, brig_image_build_ctx *c, brig_error **err)
{
	brig_image_result *res = c->res;
	cleanup_json json_t *img = NULL;
	int rc = brig_engine_image_inspect(e, &img, res->tag, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "%s is not in the image store after the build",
				       res->tag);
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(img, "Id"));
	json_t *cfg = json_object_get(img, "Config");
	json_t *labels = json_object_get(cfg, "Labels");
	const char *lock = json_string_value(json_object_get(labels, "brig.image.lock"));
	const char *rootfs = json_string_value(json_object_get(labels, "brig.image.rootfs"));
	const char *profile = json_string_value(json_object_get(labels, "brig.image.profile"));
	const char *user = json_string_value(json_object_get(cfg, "User"));
	if (!id)
		return brig__error_set(err, BRIG_EPROTO, 0, "inspect of %s gave no Id", res->tag);
	if (!lock || strcmp(lock, res->lock_sha256) != 0 || !rootfs || strcmp(rootfs, res->rootfs_key) != 0 ||
	    !profile || strcmp(profile, res->profile) != 0)
		return brig__error_set(err, BRIG_ECONFLICT, 0,
				       "%s (%s) is not the image this build made: its labels say profile %s, lock "
				       "%s, rootfs %s; wanted %s, %s, %s (the Dockerfile must keep its LABEL lines)",
				       res->tag, id, profile ? profile : "(none)", lock ? lock : "(none)",
				       rootfs ? rootfs : "(none)", res->profile, res->lock_sha256, res->rootfs_key);
	if (!user || strcmp(user, "sandbox") != 0)
		return brig__error_set(err, BRIG_ECONFLICT, 0, "%s runs as user '%s', not sandbox", res->tag,
				       user ? user : "");
	free(res->image_id);
	res->image_id = xstrdup(id);
	brig_image__progress(c->o, "verify", "%s is in the image store: %s", res->tag, id);
	return 0;
}

#define RUN_STAGE(name, cached, call)                            \
	do {                                                     \
		int64_t t0_ = brig_now_ms();                     \
		rc = (call);                                     \
		if (rc) {                                        \
			brig__error_prefix(err, rc, "%s", name); \
			goto out;                                \
		}                                                \
		stage_done(res, name, t0_, cached);              \
	} while (0)

int brig_image_build(brig_engine *e, brig_image_result *res, const brig_image_build_opts *opts, brig_error **err)
{
	memset(res, 0, sizeof *res);
	int64_t t_start = brig_now_ms();
	brig_image_build_opts o = BRIG_IMAGE_BUILD_OPTS_INIT;
	if (opts)
		o = *opts;
	int rc = brig__opts_check(o.version, BRIG_IMAGE_BUILD_OPTS_VERSION, "image build options", err);
	if (rc)
		return rc;
	if (o.profile != BRIG_IMAGE_MINIMAL && o.profile != BRIG_IMAGE_AGENTS)
		return brig__error_set(err, BRIG_EINVAL, 0, "profile: unknown profile %d", (int)o.profile);
	const char *tag = o.tag ? o.tag : brig_image_default_tag(o.profile);
	rc = check_tag(tag, err);
	if (rc)
		return rc;
	if (!o.dry_run && !e)
		return brig__error_set(err, BRIG_EINVAL, 0, "image build: no engine (only a dry run needs none)");
	if (o.update_lock && o.offline)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "--update-lock records a fresh build: it cannot be "
				       "--offline");
	res->tag = xstrdup(tag);
	res->profile = xstrdup(brig_image_profile_name(o.profile));

	brig_image_build_ctx c = {.o = &o,
				  .res = res,
				  .profile = o.profile,
				  .pname = res->profile,
				  .timeout_ms = o.step_timeout_ms > 0 ? o.step_timeout_ms : 30LL * 60 * 1000};
	bool rootfs_cached = false, npm_cached = true;

	brig_image__progress(&o, "lock", "profile %s, tag %s", c.pname, tag);
	RUN_STAGE("lock", false, stage_lock(&c, err));
	/* `cached` is read after the stage ran. */
	RUN_STAGE("rootfs", rootfs_cached, brig_image__stage_rootfs(&c, &rootfs_cached, err));
	if (json_array_size(json_object_get(c.lprofile, "npm")) > 0)
		RUN_STAGE("npm", npm_cached, brig_image__stage_npm(&c, &npm_cached, err));
	if (o.dry_run) {
		RUN_STAGE("context", false, count_context(res, err));
		goto out;
	}
	RUN_STAGE("build", false, stage_build(e, &c, err));
	RUN_STAGE("verify", false, stage_verify(e, &c, err));
	RUN_STAGE("record", false, brig_image__stage_record(e, &c, err));
out:
	res->total_ms = brig_now_ms() - t_start;
	ctx_free(&c);
	return rc;
}
