/* rootfs.c — stage "rootfs": the Debian root filesystem from this machine's
 * own mirror (debootstrap, the clean-up script, the package set checked
 * against the lock), cached under its content key. */
#include "image/image_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

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
static int find_sources(brig_image_build_ctx *c, brig_error **err)
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
			brig_image__progress(c->o, "rootfs",
					     "%s is not in this machine's apt sources: its updates are skipped",
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

static char *join_json_strings(json_t *arr, const char *sep)
{
	brig_buf b;
	brig_buf_init(&b, SIZE_MAX / 2); /* the recipe's own strings: memory is the bound */
	size_t i;
	json_t *v;
	json_array_foreach (arr, i, v) {
		if (i)
			brig_buf_puts(&b, sep);
		brig_buf_puts(&b, json_string_value(v));
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
static int build_rootfs(brig_image_build_ctx *c, json_t **packages, char **tar_path, brig_error **err)
{
	const brig_image_build_opts *o = c->o;
	*packages = NULL;
	*tar_path = NULL;
	if (geteuid() != 0)
		return brig__error_set(err, BRIG_EDENIED, EPERM,
				       "building a root filesystem needs root (debootstrap and chroot): run "
				       "`brig image build` as root, or on a machine whose cache already holds it");
	int rc = brig_image__make_work_dir(c, err);
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
	brig_image__progress(o, "rootfs", "debootstrap %s %s (%s, %s) from %s with %s", a_variant + 10, c->suite,
			     c->arch, comps, uri, inc);
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
	brig_buf_init(&sl, SIZE_MAX / 2); /* the build machine's own sources: memory is the bound */
	brig_buf_puts(&sl, "# Written by brig image build from the build machine's apt sources.\n");
	size_t i;
	json_t *v;
	json_array_foreach (c->sources, i, v) {
		brig_buf_putf(&sl, "deb %s %s %s\n", json_string_value(json_object_get(v, "uri")),
			      json_string_value(json_object_get(v, "suite")),
			      json_string_value(json_object_get(v, "components")));
	}
	cleanup_free char *sl_path = xasprintf("%s/etc/apt/sources.list", root);
	rc = brig_image__write_file_atomic(sl_path, brig_buf_cstr(&sl), err);
	brig_buf_free(&sl);
	if (rc)
		return rc;
	bool upgrade = json_array_size(c->sources) > 1;
	brig_image__progress(o, "rootfs", "%s, then cleaning caches, documentation and setuid bits",
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
	if ((rc = brig_image__read_file(status_path, MAX_STATUS_BYTES, &status, &slen, err)) != 0)
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
	brig_image__progress(o, "rootfs", "packing %zu packages into rootfs.tar", json_object_size(pk));
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
int brig_image__stage_rootfs(brig_image_build_ctx *c, bool *cached, brig_error **err)
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

	if (!o->update_lock && !o->no_cache && brig_image__regular_file(tar_final, NULL) &&
	    brig_image__regular_file(meta_final, NULL)) {
		/* A cached tarball is used only whole and unchanged. */
		cleanup_free char *mtext = NULL;
		size_t mlen = 0;
		rc = brig_image__read_file(meta_final, 64u << 20, &mtext, &mlen, err);
		cleanup_json json_t *meta = rc == 0 ? json_loadb(mtext, mlen, 0, NULL) : NULL;
		const char *want_sha = json_string_value(json_object_get(meta, "sha256"));
		char got_sha[65];
		uint64_t size = 0;
		if (rc == 0 && want_sha && sha256_file(tar_final, got_sha, &size, err) == 0 &&
		    strcmp(want_sha, got_sha) == 0 && json_equal(json_object_get(meta, "packages"), locked)) {
			brig_image__progress(o, "rootfs", "cached: %s (%llu bytes, %zu packages)", tar_final,
					     (unsigned long long)size, json_object_size(locked));
			brig_image__context_add(res, "rootfs.tar", tar_final, size, origin);
			res->rootfs_cached = *cached = true;
			return 0;
		}
		brig__error_clear(err);
		brig_image__progress(o, "rootfs", "cached %s does not match its record: building it again", tar_final);
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
			brig_image__progress(o, "rootfs", "recording %zu package change(s) into %s", ndiff,
					     c->lock_path);
		} else {
			brig_image__progress(o, "rootfs", "the package set matches %s", c->lock_path);
		}
		json_object_set(c->lprofile, "packages", built);
		cleanup_free char *now = brig_image__rfc3339_now();
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
	cleanup_free char *now = brig_image__rfc3339_now();
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
	if ((rc = brig_image__write_file_atomic(meta_final, mtext, err)) != 0)
		return rc;
	brig_image__progress(o, "rootfs", "cached %s (%llu bytes, %zu packages)", tar_final, (unsigned long long)size,
			     json_object_size(locked));
	brig_image__context_add(res, "rootfs.tar", tar_final, size, origin);
	return 0;
}
