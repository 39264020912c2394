/* lock.c — image/brig-image.lock: reading and checking it (its values end up
 * in debootstrap's and npm's argv), writing it back, comparing package sets,
 * and the content hash that names a cached root filesystem. */
#include "image/image_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/openssl_dl.h" /* libcrypto, dlopen-ed: EVP calls go through brig__crypto */
#include "util/sha256.h"
#include "util/util.h"

#define MAX_LOCK_BYTES (4u << 20)

static bool all_chars(const char *s, const char *allowed)
{
	return s && *s && strspn(s, allowed) == strlen(s);
}

#define LOWER_DIGITS "abcdefghijklmnopqrstuvwxyz0123456789"

/* Debian package and suite names (policy §5.6.1, plus ':arch'). */
static bool debian_name_ok(const char *s)
{
	return all_chars(s, LOWER_DIGITS "+-.:") && s[0] != '-' && s[0] != '.' && strlen(s) <= 128;
}

static bool debian_version_ok(const char *s)
{
	return all_chars(s, LOWER_DIGITS "ABCDEFGHIJKLMNOPQRSTUVWXYZ.+-~:") && s[0] != '-' && strlen(s) <= 128;
}

/* An npm package name: [@scope/]name, lower case, no leading dot or dash. */
static bool npm_name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 214)
		return false;
	const char *p = s;
	if (*p == '@') {
		const char *slash = strchr(p, '/');
		if (!slash || slash == p + 1)
			return false;
		cleanup_free char *scope = xstrndup(p + 1, (size_t)(slash - p - 1));
		if (!all_chars(scope, LOWER_DIGITS "-._~") || scope[0] == '.' || scope[0] == '-')
			return false;
		p = slash + 1;
	}
	return all_chars(p, LOWER_DIGITS "-._~") && p[0] != '.' && p[0] != '-' && p[0] != '_';
}

static bool npm_version_ok(const char *s)
{
	return all_chars(s, LOWER_DIGITS "ABCDEFGHIJKLMNOPQRSTUVWXYZ.+-") && s[0] >= '0' && s[0] <= '9' &&
	       strlen(s) <= 64;
}

static bool integrity_ok(const char *s)
{
	return s && strncmp(s, "sha512-", 7) == 0 && strlen(s) == 7 + 88 &&
	       all_chars(s + 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=");
}

/* "npm/<name>.tgz" with a plain file name. */
static bool npm_file_ok(const char *s)
{
	if (!s || strncmp(s, "npm/", 4) != 0 || strlen(s) > 100)
		return false;
	const char *f = s + 4;
	size_t n = strlen(f);
	return n > 4 && strcmp(f + n - 4, ".tgz") == 0 && all_chars(f, LOWER_DIGITS "-._") && f[0] != '.';
}

static int bad(brig_error **err, const char *path, const char *fmt, const char *field)
{
	return brig__error_set(err, BRIG_ECORRUPT, 0,
			       "%s: %s %s; fix it or regenerate it with "
			       "scripts/update-image-lock",
			       path, field, fmt);
}

static int check_profile(const char *path, const char *name, json_t *p, brig_error **err)
{
	char field[160];
	if (!json_is_object(p)) {
		snprintf(field, sizeof field, "profiles.%s", name);
		return bad(err, path, "is not an object", field);
	}
	json_t *inc = json_object_get(p, "include");
	snprintf(field, sizeof field, "profiles.%s.include", name);
	if (!json_is_array(inc) || json_array_size(inc) == 0 || json_array_size(inc) > 256)
		return bad(err, path, "must be a list of 1 to 256 Debian package names", field);
	size_t i;
	json_t *v;
	json_array_foreach (inc, i, v) {
		if (!debian_name_ok(json_string_value(v)))
			return bad(err, path, "holds something that is not a Debian package name", field);
	}
	json_t *pk = json_object_get(p, "packages");
	snprintf(field, sizeof field, "profiles.%s.packages", name);
	if (pk && !json_is_object(pk))
		return bad(err, path, "must be an object of package name to version", field);
	const char *k;
	json_object_foreach (pk, k, v) {
		if (!debian_name_ok(k) || !debian_version_ok(json_string_value(v)))
			return bad(err, path, "holds an entry that is not a package name and a version", field);
	}
	json_t *npm = json_object_get(p, "npm");
	snprintf(field, sizeof field, "profiles.%s.npm", name);
	if (npm && (!json_is_array(npm) || json_array_size(npm) > 64))
		return bad(err, path, "must be a list of at most 64 packages", field);
	json_array_foreach (npm, i, v) {
		snprintf(field, sizeof field, "profiles.%s.npm[%zu]", name, i);
		if (!json_is_object(v))
			return bad(err, path, "is not an object", field);
		if (!npm_name_ok(json_string_value(json_object_get(v, "name"))))
			return bad(err, path, "has no valid \"name\" (an npm package name)", field);
		if (!npm_version_ok(json_string_value(json_object_get(v, "version"))))
			return bad(err, path, "has no valid \"version\" (an exact version, not a range or tag)", field);
		if (!integrity_ok(json_string_value(json_object_get(v, "integrity"))))
			return bad(err, path,
				   "has no valid \"integrity\" (sha512-<base64>, as npm reports dist.integrity)",
				   field);
		if (!npm_file_ok(json_string_value(json_object_get(v, "file"))))
			return bad(err, path, "has no valid \"file\" (npm/<name>.tgz, the name in the build context)",
				   field);
		const char *arch = json_string_value(json_object_get(v, "arch"));
		if (json_object_get(v, "arch") && !debian_name_ok(arch))
			return bad(err, path, "has an \"arch\" that is not a Debian architecture name", field);
		/* One file may be given once per architecture (the native
		 * packages), or once for all. */
		for (size_t j = 0; j < i; j++) {
			json_t *w = json_array_get(npm, j);
			const char *warch = json_string_value(json_object_get(w, "arch"));
			if (strcmp(json_string_value(json_object_get(w, "file")),
				   json_string_value(json_object_get(v, "file"))) == 0 &&
			    (!arch || !warch || strcmp(arch, warch) == 0))
				return bad(err, path, "repeats the \"file\" of an earlier entry for the same arch",
					   field);
		}
	}
	return 0;
}

int brig_image__lock_load(json_t **out, char sha[65], const char *path, brig_error **err)
{
	*out = NULL;
	sha[0] = 0;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return brig__error_set(err, BRIG_ENOTFOUND, errno,
					       "%s does not exist: pass the image directory of a brig source tree "
					       "(--image-dir or $BRIG_IMAGE_DIR), or make one with "
					       "scripts/update-image-lock",
					       path);
		return brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
	}
	brig_buf b;
	brig_buf_init(&b, MAX_LOCK_BYTES);
	char buf[16384];
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			brig_buf_free(&b);
			return brig__error_set(err, BRIG_EIO, e, "cannot read %s: %s", path, strerror(e));
		}
		if (r == 0)
			break;
		if (brig_buf_add(&b, buf, (size_t)r) != 0) {
			brig_buf_free(&b);
			return brig__error_set(err, BRIG_ECORRUPT, 0, "%s is larger than 4 MiB", path);
		}
	}
	/* The built-in SHA-256, not OpenSSL's: a lock is a few KiB, and reading
	 * one should not load libcrypto (util/sha256.h). */
	unsigned char md[BRIG_SHA256_SIZE];
	brig_sha256(md, b.data ? b.data : "", b.len);
	brig_hex(sha, md, sizeof md);
	json_error_t je;
	json_t *lock = json_loadb(b.data ? b.data : "", b.len, JSON_REJECT_DUPLICATES, &je);
	brig_buf_free(&b);
	if (!lock)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "%s is not valid JSON (line %d: %s)", path, je.line,
				       je.text);
	int rc = 0;
	json_t *fmt = json_object_get(lock, "format");
	json_t *deb = json_object_get(lock, "debian");
	json_t *profiles = json_object_get(lock, "profiles");
	if (!json_is_object(lock) || !json_is_integer(fmt)) {
		rc = bad(err, path, "is missing (an integer)", "\"format\"");
	} else if (json_integer_value(fmt) != BRIG_IMAGE_LOCK_FORMAT) {
		rc = brig__error_set(err, BRIG_ECORRUPT, 0, "%s has format %lld; this brig reads format %d", path,
				     (long long)json_integer_value(fmt), BRIG_IMAGE_LOCK_FORMAT);
	} else if (!json_is_object(deb) || !debian_name_ok(json_string_value(json_object_get(deb, "suite")))) {
		rc = bad(err, path, "is missing or not a suite name", "debian.suite");
	} else if (json_object_get(deb, "variant") &&
		   !debian_name_ok(json_string_value(json_object_get(deb, "variant")))) {
		rc = bad(err, path, "is not a debootstrap variant name", "debian.variant");
	} else if (!json_is_object(profiles)) {
		rc = bad(err, path, "is missing (an object of profiles)", "\"profiles\"");
	}
	json_t *upd = rc == 0 ? json_object_get(deb, "updates") : NULL;
	if (rc == 0 && upd && !json_is_array(upd))
		rc = bad(err, path, "must be a list of suite names", "debian.updates");
	size_t i;
	json_t *v;
	json_array_foreach (upd, i, v) {
		if (rc == 0 && !debian_name_ok(json_string_value(v)))
			rc = bad(err, path, "holds something that is not a suite name", "debian.updates");
	}
	const char *k;
	json_object_foreach (rc == 0 ? profiles : NULL, k, v) {
		if (rc == 0)
			rc = check_profile(path, k, v, err);
	}
	if (rc != 0) {
		json_decref(lock);
		return rc;
	}
	*out = lock;
	return 0;
}

json_t *brig_image__lock_profile(json_t *lock, const char *profile)
{
	json_t *p = json_object_get(json_object_get(lock, "profiles"), profile);
	return json_is_object(p) ? p : NULL;
}

int brig_image__lock_write(const char *path, const json_t *lock, brig_error **err)
{
	cleanup_free char *text = json_dumps(lock, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text)
		return brig__error_set(err, BRIG_EIO, 0, "cannot encode lock %s", path);
	cleanup_free char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot write lock %s: %s", tmp, strerror(errno));
	int r = brig_write_all(fd, text, strlen(text));
	if (r == 0)
		r = brig_write_all(fd, "\n", 1);
	if (r != 0 || fsync(fd) != 0) {
		int e = errno;
		unlink(tmp);
		return brig__error_set(err, BRIG_EIO, e, "cannot write lock %s: %s", tmp, strerror(e));
	}
	if (rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return brig__error_set(err, BRIG_EIO, e, "cannot replace lock %s: %s", path, strerror(e));
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *brig_image__packages_diff(const json_t *want, const json_t *got, size_t *count)
{
	/* Every key of both, sorted, once. */
	size_t n = json_object_size(want) + json_object_size(got);
	const char **keys = xcalloc(n + 1, sizeof *keys);
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)want, key, v)
		keys[k++] = key;
	json_object_foreach ((json_t *)got, key, v) {
		if (!json_object_get(want, key))
			keys[k++] = key;
	}
	qsort(keys, k, sizeof *keys, cmp_str);
	brig_buf b;
	brig_buf_init(&b, 16u << 20);
	size_t diffs = 0;
	bool full = false; /* got comes from the built image: past the cap, lines are dropped */
	for (size_t i = 0; i < k; i++) {
		const char *a = json_string_value(json_object_get(want, keys[i]));
		const char *g = json_string_value(json_object_get(got, keys[i]));
		if (a && g && strcmp(a, g) == 0)
			continue;
		diffs++;
		if (full)
			continue;
		if (a && g)
			full = brig_buf_printf(&b, "~ %s %s -> %s\n", keys[i], a, g) < 0;
		else if (a)
			full = brig_buf_printf(&b, "- %s %s\n", keys[i], a) < 0;
		else
			full = brig_buf_printf(&b, "+ %s %s\n", keys[i], g) < 0;
	}
	free(keys);
	if (count)
		*count = diffs;
	if (!diffs) {
		brig_buf_free(&b);
		return NULL;
	}
	return brig_buf_steal(&b, NULL);
}

void brig_image__rootfs_key(char out[65], const char *recipe, const char *suite, const char *variant, const char *arch,
			    const json_t *sources, const json_t *include, const json_t *packages)
{
	cleanup_json json_t *j =
		json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:O, s:O, s:O}", "kind", "brig-rootfs", "recipe",
			  BRIG_IMAGE_ROOTFS_RECIPE, "script", recipe, "suite", suite, "variant", variant, "arch", arch,
			  "sources", (json_t *)sources, "include", (json_t *)include, "packages",
			  packages ? (json_t *)packages : json_object());
	cleanup_free char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	unsigned char md[BRIG_SHA256_SIZE]; /* built in, as for the lock */
	brig_sha256(md, text, strlen(text));
	brig_hex(out, md, sizeof md);
}

int brig_image__sri_sha512(char **out, const char *path, brig_error **err)
{
	*out = NULL;
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
	/* npm tarballs are large: OpenSSL's accelerated SHA-512. */
	unsigned char md[64];
	int rc = brig__digest_fd(fd, true, md, NULL, err);
	if (rc)
		return brig__error_prefix(err, rc, "cannot hash %s", path);
	unsigned char b64[4 * ((64 + 2) / 3) + 1];
	EVP_EncodeBlock(b64, md, 64);
	*out = xasprintf("sha512-%s", (char *)b64);
	return 0;
}
