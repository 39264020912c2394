/* records.c — the record of built images (<cache>/images.json, under a
 * file lock) and stage "record", which writes it and drops the old image. */
#include "image/image_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/util.h"

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
	int rc = brig_image__read_file(path, 16u << 20, &text, &len, err);
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
int brig_image__stage_record(brig_engine *e, brig_image_build_ctx *c, brig_error **err)
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
		cleanup_free char *now = brig_image__rfc3339_now();
		json_object_set_new(rec, res->tag,
				    json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", res->image_id, "profile",
					      res->profile, "lock_sha256", res->lock_sha256, "rootfs_key",
					      res->rootfs_key, "built_at", now, "context_bytes",
					      (json_int_t)res->context_bytes));
		cleanup_free char *text = json_dumps(rec, JSON_INDENT(2) | JSON_SORT_KEYS);
		rc = brig_image__write_file_atomic(path, text, err);
		json_decref(rec);
	}
	/* Only once the record names the new image: if it cannot be written, the
	 * old image may still be what the record (and its users) point at. */
	const char *old = c->previous_id;
	if (rc == 0 && old && strncmp(old, "sha256:", 7) == 0 && strcmp(old, res->image_id) != 0) {
		brig_error *rerr = NULL;
		if (brig_engine_image_remove(e, old, false, &rerr) == 0)
			brig_image__progress(c->o, "record", "removed %s, the image %s named before", old, res->tag);
		else if (rerr && rerr->code != BRIG_ENOTFOUND)
			brig_image__progress(c->o, "record", "kept %s, the image %s named before: %s", old, res->tag,
					     brig_error_message(rerr));
		brig_error_free(rerr);
	}
	close(fd);
	return rc;
}
