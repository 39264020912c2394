/* npm.c — stage "npm": each npm package the lock pins, fetched with npm pack
 * into the cache and verified against the lock's integrity. */
#include "image/image_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* Stage "npm": each pinned package's tarball, verified against the lock. */
int brig_image__stage_npm(brig_image_build_ctx *c, bool *all_cached, brig_error **err)
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
		if (brig_image__regular_file(cached_path, NULL)) {
			cleanup_free char *sri = NULL;
			if ((rc = brig_image__sri_sha512(&sri, cached_path, err)) != 0)
				return rc;
			if (strcmp(sri, integrity) == 0) {
				uint64_t size = 0;
				brig_image__regular_file(cached_path, &size);
				brig_image__progress(o, "npm", "cached: %s@%s (%llu bytes, integrity matches the lock)",
						     name, version, (unsigned long long)size);
				brig_image__context_add(c->res, file, cached_path, size, origin);
				continue;
			}
			brig_image__progress(o, "npm",
					     "cached %s does not match the lock's integrity: fetching it again",
					     cached_path);
			unlink(cached_path);
		}
		*all_cached = false;
		if (o->offline)
			return brig__error_set(err, BRIG_ENOTFOUND, 0,
					       "%s@%s is not cached (%s) and --offline was given: build once without "
					       "--offline",
					       name, version, cached_path);
		if ((rc = brig_image__make_work_dir(c, err)) != 0)
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
		brig_image__progress(o, "npm", "npm pack %s", spec);
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
		brig_image__regular_file(cached_path, &size);
		brig_image__progress(o, "npm", "%s: %llu bytes, integrity matches the lock", spec,
				     (unsigned long long)size);
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
