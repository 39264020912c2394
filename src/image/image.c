/* image.c — brig_image_build: lock → rootfs → npm → context → build →
 * verify → record, each stage timed and named in its errors; and the
 * record of built images (<cache>/images.json). */
#include "image/image_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define MAX_DOCKERFILE_BYTES (256u << 10)
#define MAX_STATUS_BYTES (32u << 20)

/* The script run inside the new root after debootstrap: the suite's
 * updates (security fixes), then everything a container never needs —
 * package caches and lists, logs, documentation (copyright files stay),
 * manual pages, translations — and setuid/setgid bits, which can do
 * nothing under no-new-privileges but would matter if the image were ever
 * run without it. Names are looked up in /etc/hosts, then by
 * libnss-myhostname (localhost, the container's own hostname), then DNS: a
 * container with network none runs without Docker's network sandbox, and so
 * without the /etc/hosts Docker would write (the Dockerfiles' brig.etc-hosts
 * label says the image can). Fixed text: nothing is interpolated into it. */
static const char rootfs_script[] =
	"set -eu\n"
	"export DEBIAN_FRONTEND=noninteractive\n"
	"if [ \"$1\" = upgrade ]; then\n"
	"  apt-get -q -o Acquire::Retries=3 -o Acquire::Languages=none update\n"
	"  apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold upgrade\n"
	"fi\n"
	"apt-get clean\n"
	"rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/lib/dpkg/*-old\n"
	"rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian/* /usr/share/linda/*\n"
	"find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete\n"
	"find /usr/share/doc -mindepth 1 -depth -type d -empty -delete\n"
	"find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +\n"
	"find /var/log -type f -delete\n"
	"find / -xdev -type f -perm /6000 -exec chmod ug-s {} +\n"
	": > /etc/resolv.conf\n"
	": > /etc/hostname\n"
	"sed -i 's/^hosts:.*/hosts:          files myhostname dns/' /etc/nsswitch.conf\n"
	"grep -qx 'hosts: *files myhostname dns' /etc/nsswitch.conf\n"
	"getent -s hosts:myhostname hosts localhost >/dev/null\n"
	"rm -f /etc/machine-id /var/lib/dbus/machine-id\n";

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

static void progress(const brig_image_build_opts *o, const char *stage, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void progress(const brig_image_build_opts *o, const char *stage, const char *fmt, ...)
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

static char *rfc3339_now(void)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	char buf[32];
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return xstrdup(buf);
}

/* mkdir -p with mode for the directories brig creates. */
static int mkdirs(const char *path, mode_t mode, brig_error **err)
{
	cleanup_free char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, mode) != 0 && errno != EEXIST)
			return brig__error_set(err, BRIG_EIO, errno, "cannot create %s: %s", p, strerror(errno));
		*s = '/';
	}
	if (mkdir(p, mode) != 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "cannot create %s: %s", p, strerror(errno));
	return 0;
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

static int read_file(const char *path, size_t cap, char **out, size_t *len, brig_error **err)
{
	*out = NULL;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return brig__error_set(err, errno == ENOENT ? BRIG_ENOTFOUND : BRIG_EIO, errno, "cannot read %s: %s",
				       path, strerror(errno));
	brig_buf b;
	brig_buf_init(&b, cap);
	char *buf = xmalloc(1 << 16);
	int rc = 0;
	for (;;) {
		ssize_t r = read(fd, buf, 1 << 16);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		if (brig_buf_add(&b, buf, (size_t)r) != 0) {
			rc = brig__error_set(err, BRIG_ETOOBIG, 0, "%s is larger than %zu bytes", path, cap);
			break;
		}
	}
	free(buf);
	if (rc) {
		brig_buf_free(&b);
		return rc;
	}
	*out = brig_buf_steal(&b, len);
	return 0;
}

static int write_file_atomic(const char *path, const char *text, brig_error **err)
{
	cleanup_free char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot write %s: %s", tmp, strerror(errno));
	if (brig_write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return brig__error_set(err, BRIG_EIO, e, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

static bool regular_file(const char *path, uint64_t *size)
{
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	if (size)
		*size = (uint64_t)st.st_size;
	return true;
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

typedef struct build_ctx {
	const brig_image_build_opts *o;
	brig_image_result *res;
	brig_image_profile profile;
	const char *pname;
	char *cache_dir;
	char *image_dir;
	char *lock_path;
	json_t *lock;     /* checked lock */
	json_t *lprofile; /* borrowed from lock */
	const char *suite;
	const char *variant;
	const char *arch;
	json_t *sources;   /* the apt sources used: [{"uri","suite","components"}] */
	char *keyring;     /* Signed-By of the suite's source, for debootstrap */
	char *work;        /* temporary directory under the cache */
	char *previous_id; /* the image the tag named before the build */
	int64_t timeout_ms;
} build_ctx;

static void ctx_free(build_ctx *c)
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

static void remove_stale_work(build_ctx *c);

/* Stage "lock": options, directories, the lock and the Dockerfile. */
static int stage_lock(build_ctx *c, brig_error **err)
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
	rc = read_file(df, MAX_DOCKERFILE_BYTES, &text, &len, err);
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
		if ((rc = mkdirs(d, mode, err)) != 0 || (rc = check_private_dir(d, err)) != 0)
			return rc;
	}
	remove_stale_work(c);
	return 0;
}

/* Work directories of builds that died (an interrupted debootstrap leaves a
 * few hundred MB) are removed once they are a day old; a running build's
 * directory is younger than that. */
static void remove_stale_work(build_ctx *c)
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
		progress(c->o, "lock", "removing %s, left by a build that did not finish", p);
		brig_image__remove_tree(p);
	}
	closedir(d);
}

/* A mirror URI carrying a login would put it into debootstrap's argv (ps),
 * the progress lines, the cached root filesystem's record and the image's
 * sources.list: refused, without echoing it. */
static int refuse_userinfo(const brig_apt_source *s, const char *dir, brig_error **err)
{
	cleanup_free char *shown = brig_image__apt_uri_without_userinfo(s->uri);
	if (!shown)
		return 0;
	return brig__error_set(
		err, BRIG_EINVAL, 0,
		"the apt source %s for suite '%s' (in %s) carries credentials in its URI, which would "
		"end up in the process list, the build cache and the image: list the mirror without "
		"them and keep the login in apt's auth.conf (%s/auth.conf.d/*.conf, see apt_auth.conf(5))",
		shown, s->suite, dir, dir);
}

/* The suite's source and its update suites, from the machine's apt. */
static int find_sources(build_ctx *c, brig_error **err)
{
	brig_apt_sources apt;
	int rc = brig_image__apt_read(&apt, c->o->apt_dir, err);
	if (rc) {
		brig_image__apt_free(&apt);
		return rc;
	}
	const char *dir = c->o->apt_dir ? c->o->apt_dir : "/etc/apt";
	const brig_apt_source *main_src = brig_image__apt_find(&apt, c->suite);
	if (!main_src) {
		brig_image__apt_free(&apt);
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "no apt source for suite '%s' in %s/sources.list or %s/sources.list.d: the "
				       "root filesystem comes from this machine's own Debian mirror, so add one "
				       "(a 'deb URI %s main' line) or pass --apt-dir",
				       c->suite, dir, dir, c->suite);
	}
	if ((rc = refuse_userinfo(main_src, dir, err)) != 0) {
		brig_image__apt_free(&apt);
		return rc;
	}
	c->sources = json_array();
	json_array_append_new(c->sources, json_pack("{s:s, s:s, s:s}", "uri", main_src->uri, "suite", main_src->suite,
						    "components", main_src->components));
	if (main_src->signed_by)
		c->keyring = xstrdup(main_src->signed_by);
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(json_object_get(c->lock, "debian"), "updates"), i, v) {
		const brig_apt_source *s = brig_image__apt_find(&apt, json_string_value(v));
		if (!s) {
			progress(c->o, "rootfs", "%s is not in this machine's apt sources: its updates are skipped",
				 json_string_value(v));
			continue;
		}
		if ((rc = refuse_userinfo(s, dir, err)) != 0) {
			brig_image__apt_free(&apt);
			return rc;
		}
		json_array_append_new(c->sources, json_pack("{s:s, s:s, s:s}", "uri", s->uri, "suite", s->suite,
							    "components", s->components));
	}
	brig_image__apt_free(&apt);
	return 0;
}

static int make_work_dir(build_ctx *c, brig_error **err)
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

static char *join_json_strings(json_t *arr, const char *sep)
{
	brig_buf b;
	brig_buf_init(&b, 1u << 20);
	size_t i;
	json_t *v;
	json_array_foreach (arr, i, v) {
		if (i)
			brig_buf_addstr(&b, sep);
		brig_buf_addstr(&b, json_string_value(v));
	}
	return brig_buf_steal(&b, NULL);
}

static char *components_csv(const char *components)
{
	char *r = xstrdup(components);
	for (char *p = r; *p; p++)
		if (*p == ' ')
			*p = ',';
	return r;
}

/* debootstrap, the chroot script, the package set, the tarball. *packages
 * gets the installed set; *tar_path the tarball in the work directory. */
static int build_rootfs(build_ctx *c, json_t **packages, char **tar_path, brig_error **err)
{
	const brig_image_build_opts *o = c->o;
	*packages = NULL;
	*tar_path = NULL;
	if (geteuid() != 0)
		return brig__error_set(err, BRIG_EDENIED, EPERM,
				       "building a root filesystem needs root (debootstrap and chroot): run "
				       "`brig image build` as root, or on a machine whose cache already holds it");
	int rc = make_work_dir(c, err);
	if (rc)
		return rc;
	cleanup_free char *root = xasprintf("%s/root", c->work);
	json_t *main_src = json_array_get(c->sources, 0);
	const char *uri = json_string_value(json_object_get(main_src, "uri"));
	cleanup_free char *inc = join_json_strings(json_object_get(c->lprofile, "include"), ",");
	cleanup_free char *comps = components_csv(json_string_value(json_object_get(main_src, "components")));
	cleanup_free char *a_variant = xasprintf("--variant=%s", c->variant);
	cleanup_free char *a_arch = xasprintf("--arch=%s", c->arch);
	cleanup_free char *a_inc = xasprintf("--include=%s", inc);
	cleanup_free char *a_comp = xasprintf("--components=%s", comps);
	cleanup_free char *a_key = c->keyring ? xasprintf("--keyring=%s", c->keyring) : NULL;
	const char *argv[12];
	size_t n = 0;
	argv[n++] = "debootstrap";
	argv[n++] = a_variant;
	argv[n++] = a_arch;
	argv[n++] = a_comp;
	argv[n++] = a_inc;
	if (a_key)
		argv[n++] = a_key;
	argv[n++] = c->suite;
	argv[n++] = root;
	argv[n++] = uri;
	argv[n] = NULL;
	progress(o, "rootfs", "debootstrap %s %s (%s, %s) from %s with %s", a_variant + 10, c->suite, c->arch, comps,
		 uri, inc);
	brig_image_cmd cmd = {.stage = "rootfs",
			      .what = "debootstrap",
			      .argv = argv,
			      .timeout_ms = c->timeout_ms,
			      .progress = o->progress,
			      .payload = o->payload};
	if ((rc = brig_image__run(&cmd, NULL, err)) != 0)
		return rc;

	/* apt inside the new root sees the same mirrors the machine uses. */
	brig_buf sl;
	brig_buf_init(&sl, 1u << 20);
	brig_buf_addstr(&sl, "# Written by brig image build from the build machine's apt sources.\n");
	size_t i;
	json_t *v;
	json_array_foreach (c->sources, i, v) {
		brig_buf_printf(&sl, "deb %s %s %s\n", json_string_value(json_object_get(v, "uri")),
				json_string_value(json_object_get(v, "suite")),
				json_string_value(json_object_get(v, "components")));
	}
	cleanup_free char *sl_path = xasprintf("%s/etc/apt/sources.list", root);
	rc = write_file_atomic(sl_path, brig_buf_cstr(&sl), err);
	brig_buf_free(&sl);
	if (rc)
		return rc;
	bool upgrade = json_array_size(c->sources) > 1;
	progress(o, "rootfs", "%s, then cleaning caches, documentation and setuid bits",
		 upgrade ? "applying the suite's updates" : "no update suites");
	const char *cargv[] = {"chroot",
			       root,
			       "/usr/bin/env",
			       "-i",
			       "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			       "LC_ALL=C",
			       "HOME=/root",
			       "/bin/sh",
			       "-c",
			       rootfs_script,
			       "brig-rootfs",
			       upgrade ? "upgrade" : "no-upgrade",
			       NULL};
	brig_image_cmd chr = {.stage = "rootfs",
			      .what = "apt-get in the new root",
			      .argv = cargv,
			      .timeout_ms = c->timeout_ms,
			      .progress = o->progress,
			      .payload = o->payload};
	if ((rc = brig_image__run(&chr, NULL, err)) != 0)
		return rc;

	cleanup_free char *status_path = xasprintf("%s/var/lib/dpkg/status", root);
	cleanup_free char *status = NULL;
	size_t slen = 0;
	if ((rc = read_file(status_path, MAX_STATUS_BYTES, &status, &slen, err)) != 0)
		return rc;
	json_t *pk = brig_image__dpkg_status_parse(status);
	if (json_object_size(pk) == 0) {
		json_decref(pk);
		return brig__error_set(err, BRIG_EIO, 0, "%s lists no installed package", status_path);
	}

	char *tarp = xasprintf("%s/rootfs.tar", c->work);
	const char *targv[] = {"tar",
			       "--numeric-owner",
			       "--sort=name",
			       "--one-file-system",
			       "-C",
			       root,
			       "--exclude=./dev/*",
			       "--exclude=./proc/*",
			       "--exclude=./sys/*",
			       "--exclude=./run/*",
			       "--exclude=./tmp/*",
			       "-cf",
			       tarp,
			       ".",
			       NULL};
	progress(o, "rootfs", "packing %zu packages into rootfs.tar", json_object_size(pk));
	brig_image_cmd tc = {.stage = "rootfs",
			     .what = "tar",
			     .argv = targv,
			     .timeout_ms = c->timeout_ms,
			     .progress = o->progress,
			     .payload = o->payload};
	if ((rc = brig_image__run(&tc, NULL, err)) != 0) {
		free(tarp);
		json_decref(pk);
		return rc;
	}
	*packages = pk;
	*tar_path = tarp;
	return 0;
}

static int sha256_file(const char *path, char out[65], uint64_t *size, brig_error **err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
	return brig_tar_sha256_fd(fd, out, size, err);
}

/* Stage "rootfs": the cached tarball for the lock's package set, or a new
 * one checked against it (or recorded into it with update_lock). */
static int stage_rootfs(build_ctx *c, bool *cached, brig_error **err)
{
	const brig_image_build_opts *o = c->o;
	brig_image_result *res = c->res;
	*cached = false;
	int rc = find_sources(c, err);
	if (rc)
		return rc;
	json_t *include = json_object_get(c->lprofile, "include");
	json_t *locked = json_object_get(c->lprofile, "packages");
	char key[65];
	brig_image__rootfs_key(key, rootfs_script, c->suite, c->variant, c->arch, c->sources, include, locked);
	res->rootfs_key = xstrdup(key);
	cleanup_free char *tar_final = xasprintf("%s/rootfs/%s.tar", c->cache_dir, key);
	cleanup_free char *meta_final = xasprintf("%s/rootfs/%s.json", c->cache_dir, key);
	cleanup_free char *origin = xasprintf("debian %s %s rootfs %.16s", c->suite, c->arch, key);

	if (!o->update_lock && !o->no_cache && regular_file(tar_final, NULL) && regular_file(meta_final, NULL)) {
		/* A cached tarball is used only whole and unchanged. */
		cleanup_free char *mtext = NULL;
		size_t mlen = 0;
		rc = read_file(meta_final, 64u << 20, &mtext, &mlen, err);
		cleanup_json json_t *meta = rc == 0 ? json_loadb(mtext, mlen, 0, NULL) : NULL;
		const char *want_sha = json_string_value(json_object_get(meta, "sha256"));
		char got_sha[65];
		uint64_t size = 0;
		if (rc == 0 && want_sha && sha256_file(tar_final, got_sha, &size, err) == 0 &&
		    strcmp(want_sha, got_sha) == 0 && json_equal(json_object_get(meta, "packages"), locked)) {
			progress(o, "rootfs", "cached: %s (%llu bytes, %zu packages)", tar_final,
				 (unsigned long long)size, json_object_size(locked));
			brig_image__context_add(res, "rootfs.tar", tar_final, size, origin);
			res->rootfs_cached = *cached = true;
			return 0;
		}
		brig__error_clear(err);
		progress(o, "rootfs", "cached %s does not match its record: building it again", tar_final);
	}
	if (o->offline)
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "the root filesystem for this lock is not cached (%s) and --offline was given: "
				       "build once without --offline",
				       tar_final);

	cleanup_json json_t *built = NULL;
	cleanup_free char *tar_tmp = NULL;
	if ((rc = build_rootfs(c, &built, &tar_tmp, err)) != 0)
		return rc;

	size_t ndiff = 0;
	cleanup_free char *diff = brig_image__packages_diff(locked, built, &ndiff);
	if (o->update_lock) {
		if (diff) {
			res->lock_changes = xstrdup(diff);
			progress(o, "rootfs", "recording %zu package change(s) into %s", ndiff, c->lock_path);
		} else {
			progress(o, "rootfs", "the package set matches %s", c->lock_path);
		}
		json_object_set(c->lprofile, "packages", built);
		cleanup_free char *now = rfc3339_now();
		json_object_set_new(c->lprofile, "recorded_at", json_string(now));
		json_object_set_new(c->lprofile, "recorded_arch", json_string(c->arch));
		if ((rc = brig_image__lock_write(c->lock_path, c->lock, err)) != 0)
			return rc;
		res->lock_updated = true;
		locked = built;
		brig_image__rootfs_key(key, rootfs_script, c->suite, c->variant, c->arch, c->sources, include, locked);
		free(res->rootfs_key);
		res->rootfs_key = xstrdup(key);
		free(tar_final);
		free(meta_final);
		tar_final = xasprintf("%s/rootfs/%s.tar", c->cache_dir, key);
		meta_final = xasprintf("%s/rootfs/%s.json", c->cache_dir, key);
	} else if (diff) {
		/* Cut long lists: the head says enough, the count says the rest. */
		size_t cut = strlen(diff) > 3000 ? 3000 : strlen(diff);
		while (cut > 0 && cut < strlen(diff) && diff[cut - 1] != '\n')
			cut--;
		return brig__error_set(err, BRIG_ECONFLICT, 0,
				       "the mirror's packages differ from %s in %zu place(s) (- locked only, + "
				       "mirror only, ~ locked -> mirror):\n%.*s%sThe mirror has moved on since the "
				       "lock was recorded: accept the new set with scripts/update-image-lock (and "
				       "commit the lock), or point apt at a snapshot that matches it",
				       c->lock_path, ndiff, (int)cut, diff, cut < strlen(diff) ? "…\n" : "");
	}

	char sha[65];
	uint64_t size = 0;
	if ((rc = sha256_file(tar_tmp, sha, &size, err)) != 0)
		return rc;
	cleanup_free char *now = rfc3339_now();
	cleanup_json json_t *meta = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:O, s:O, s:O, s:s, s:i}", "key", key,
					      "sha256", sha, "size", (json_int_t)size, "suite", c->suite, "variant",
					      c->variant, "arch", c->arch, "sources", c->sources, "include", include,
					      "packages", locked, "built_at", now, "recipe", BRIG_IMAGE_ROOTFS_RECIPE);
	cleanup_free char *mtext = json_dumps(meta, JSON_INDENT(2) | JSON_SORT_KEYS);
	/* The tarball first, its record second: a record never names a
	 * tarball that is not all there. */
	if (rename(tar_tmp, tar_final) != 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot move the root filesystem into %s: %s", tar_final,
				       strerror(errno));
	if ((rc = write_file_atomic(meta_final, mtext, err)) != 0)
		return rc;
	progress(o, "rootfs", "cached %s (%llu bytes, %zu packages)", tar_final, (unsigned long long)size,
		 json_object_size(locked));
	brig_image__context_add(res, "rootfs.tar", tar_final, size, origin);
	return 0;
}

/* Stage "npm": each pinned package's tarball, verified against the lock. */
static int stage_npm(build_ctx *c, bool *all_cached, brig_error **err)
{
	const brig_image_build_opts *o = c->o;
	*all_cached = true;
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(c->lprofile, "npm"), i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *version = json_string_value(json_object_get(v, "version"));
		const char *integrity = json_string_value(json_object_get(v, "integrity"));
		const char *file = json_string_value(json_object_get(v, "file"));
		const char *arch = json_string_value(json_object_get(v, "arch"));
		if (arch && strcmp(arch, c->arch) != 0)
			continue; /* another architecture's native package */
		/* npm's own file naming: "@scope/name" → "scope-name". */
		cleanup_free char *flat = xstrdup(name[0] == '@' ? name + 1 : name);
		for (char *p = flat; *p; p++)
			if (*p == '/')
				*p = '-';
		cleanup_free char *cached_path = xasprintf("%s/npm/%s-%s.tgz", c->cache_dir, flat, version);
		cleanup_free char *origin = xasprintf("%s@%s %s", name, version, integrity);
		int rc;
		if (regular_file(cached_path, NULL)) {
			cleanup_free char *sri = NULL;
			if ((rc = brig_image__sri_sha512(&sri, cached_path, err)) != 0)
				return rc;
			if (strcmp(sri, integrity) == 0) {
				uint64_t size = 0;
				regular_file(cached_path, &size);
				progress(o, "npm", "cached: %s@%s (%llu bytes, integrity matches the lock)", name,
					 version, (unsigned long long)size);
				brig_image__context_add(c->res, file, cached_path, size, origin);
				continue;
			}
			progress(o, "npm", "cached %s does not match the lock's integrity: fetching it again",
				 cached_path);
			unlink(cached_path);
		}
		*all_cached = false;
		if (o->offline)
			return brig__error_set(err, BRIG_ENOTFOUND, 0,
					       "%s@%s is not cached (%s) and --offline was given: build once without "
					       "--offline",
					       name, version, cached_path);
		if ((rc = make_work_dir(c, err)) != 0)
			return rc;
		cleanup_free char *dest = xasprintf("%s/npm-%zu", c->work, i);
		if (mkdir(dest, 0700) != 0 && errno != EEXIST)
			return brig__error_set(err, BRIG_EIO, errno, "cannot create %s: %s", dest, strerror(errno));
		cleanup_free char *spec = xasprintf("%s@%s", name, version);
		const char *argv[] = {"npm",
				      "pack",
				      spec,
				      "--pack-destination",
				      dest,
				      "--json",
				      "--ignore-scripts",
				      "--no-audit",
				      "--no-fund",
				      "--loglevel=warn",
				      NULL};
		progress(o, "npm", "npm pack %s", spec);
		brig_image_cmd cmd = {.stage = "npm",
				      .what = "npm pack",
				      .argv = argv,
				      .capture_stdout = true,
				      .timeout_ms = c->timeout_ms,
				      .progress = o->progress,
				      .payload = o->payload};
		cleanup_free char *out = NULL;
		if ((rc = brig_image__run(&cmd, &out, err)) != 0)
			return brig__error_prefix(err, rc, "%s", spec);
		cleanup_json json_t *j = json_loads(out, 0, NULL);
		const char *fname = json_string_value(json_object_get(json_array_get(j, 0), "filename"));
		if (!fname || strchr(fname, '/') || fname[0] == '.' || !*fname)
			return brig__error_set(err, BRIG_EPROTO, 0, "npm pack %s did not name the file it wrote", spec);
		cleanup_free char *got = xasprintf("%s/%s", dest, fname);
		cleanup_free char *sri = NULL;
		if ((rc = brig_image__sri_sha512(&sri, got, err)) != 0)
			return rc;
		if (strcmp(sri, integrity) != 0)
			return brig__error_set(err, BRIG_ECORRUPT, 0,
					       "%s: the registry's tarball has integrity %s but the lock %s pins %s: "
					       "nothing was used; if the change is expected, update the lock with "
					       "scripts/update-image-lock",
					       spec, sri, c->lock_path, integrity);
		if (rename(got, cached_path) != 0)
			return brig__error_set(err, BRIG_EIO, errno, "cannot move %s into %s: %s", fname, cached_path,
					       strerror(errno));
		uint64_t size = 0;
		regular_file(cached_path, &size);
		progress(o, "npm", "%s: %llu bytes, integrity matches the lock", spec, (unsigned long long)size);
		brig_image__context_add(c->res, file, cached_path, size, origin);
	}
	/* Every file the Dockerfile expects must be there for this arch. */
	json_array_foreach (json_object_get(c->lprofile, "npm"), i, v) {
		const char *file = json_string_value(json_object_get(v, "file"));
		bool found = false;
		for (size_t k = 0; k < c->res->file_count; k++)
			if (strcmp(c->res->files[k].name, file) == 0)
				found = true;
		if (!found)
			return brig__error_set(err, BRIG_ENOTFOUND, 0,
					       "the lock %s pins no %s for architecture %s: add one with "
					       "scripts/update-image-lock",
					       c->lock_path, file, c->arch);
	}
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

static int stage_build(brig_engine *e, build_ctx *c, brig_error **err)
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
	progress(c->o, "build", "sending %zu files (%llu bytes) to Docker; the build has no network", res->file_count,
		 (unsigned long long)res->context_bytes);
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
static int stage_verify(brig_engine *e, build_ctx *c, brig_error **err)
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
	progress(c->o, "verify", "%s is in the image store: %s", res->tag, id);
	return 0;
}

static int records_path_lock(const char *cache_dir, char **json_path, int *lock_fd, brig_error **err)
{
	*json_path = xasprintf("%s/images.json", cache_dir);
	cleanup_free char *lp = xasprintf("%s/images.json.lock", cache_dir);
	int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot open %s: %s", lp, strerror(errno));
	while (flock(fd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			return brig__error_set(err, BRIG_EIO, e, "cannot lock %s: %s", lp, strerror(e));
		}
	}
	*lock_fd = fd;
	return 0;
}

static int load_records(json_t **out, const char *path, brig_error **err)
{
	*out = NULL;
	cleanup_free char *text = NULL;
	size_t len = 0;
	int rc = read_file(path, 16u << 20, &text, &len, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		*out = json_object();
		return 0;
	}
	if (rc)
		return rc;
	json_t *j = json_loadb(text, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return brig__error_set(err, BRIG_ECORRUPT, 0,
				       "%s is not a JSON object: remove it (it is only a "
				       "record; images stay in Docker's store)",
				       path);
	}
	*out = j;
	return 0;
}

int brig_image_records(json_t **out, const char *cache_dir, brig_error **err)
{
	cleanup_free char *dir = cache_dir ? xstrdup(cache_dir) : brig_image_default_cache_dir();
	cleanup_free char *path = xasprintf("%s/images.json", dir);
	return load_records(out, path, err);
}

/* Stage "record": <cache>/images.json, and the image this tag named before
 * the build is removed when nothing else holds it (another tag, a
 * container: Docker refuses then, and it is kept): each agents rebuild
 * would otherwise leave a gigabyte behind. */
static int stage_record(brig_engine *e, build_ctx *c, brig_error **err)
{
	brig_image_result *res = c->res;
	cleanup_free char *path = NULL;
	int fd = -1;
	int rc = records_path_lock(c->cache_dir, &path, &fd, err);
	if (rc)
		return rc;
	json_t *rec = NULL;
	rc = load_records(&rec, path, err);
	if (rc == 0) {
		cleanup_free char *now = rfc3339_now();
		json_object_set_new(rec, res->tag,
				    json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", res->image_id, "profile",
					      res->profile, "lock_sha256", res->lock_sha256, "rootfs_key",
					      res->rootfs_key, "built_at", now, "context_bytes",
					      (json_int_t)res->context_bytes));
		cleanup_free char *text = json_dumps(rec, JSON_INDENT(2) | JSON_SORT_KEYS);
		rc = write_file_atomic(path, text, err);
		json_decref(rec);
	}
	/* Only once the record names the new image: if it cannot be written, the
	 * old image may still be what the record (and its users) point at. */
	const char *old = c->previous_id;
	if (rc == 0 && old && strncmp(old, "sha256:", 7) == 0 && strcmp(old, res->image_id) != 0) {
		brig_error *rerr = NULL;
		if (brig_engine_image_remove(e, old, false, &rerr) == 0)
			progress(c->o, "record", "removed %s, the image %s named before", old, res->tag);
		else if (rerr && rerr->code != BRIG_ENOTFOUND)
			progress(c->o, "record", "kept %s, the image %s named before: %s", old, res->tag,
				 brig_error_message(rerr));
		brig_error_free(rerr);
	}
	close(fd);
	return rc;
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

	build_ctx c = {.o = &o,
		       .res = res,
		       .profile = o.profile,
		       .pname = res->profile,
		       .timeout_ms = o.step_timeout_ms > 0 ? o.step_timeout_ms : 30LL * 60 * 1000};
	bool rootfs_cached = false, npm_cached = true;

	progress(&o, "lock", "profile %s, tag %s", c.pname, tag);
	RUN_STAGE("lock", false, stage_lock(&c, err));
	/* `cached` is read after the stage ran. */
	RUN_STAGE("rootfs", rootfs_cached, stage_rootfs(&c, &rootfs_cached, err));
	if (json_array_size(json_object_get(c.lprofile, "npm")) > 0)
		RUN_STAGE("npm", npm_cached, stage_npm(&c, &npm_cached, err));
	if (o.dry_run) {
		RUN_STAGE("context", false, count_context(res, err));
		goto out;
	}
	RUN_STAGE("build", false, stage_build(e, &c, err));
	RUN_STAGE("verify", false, stage_verify(e, &c, err));
	RUN_STAGE("record", false, stage_record(e, &c, err));
out:
	res->total_ms = brig_now_ms() - t_start;
	ctx_free(&c);
	return rc;
}
