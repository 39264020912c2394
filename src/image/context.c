/* context.c — the build context: exactly the files listed in the result
 * (the Dockerfile, rootfs.tar, npm/<name>.tgz), nothing from the project tree,
 * the home directory or the environment. */
#include "image/image_internal.h"

#include <string.h>

#include "util/util.h"

void brig_image__context_add(brig_image_result *res, const char *name, const char *source, uint64_t size,
			     const char *origin)
{
	res->files = xrealloc(res->files, (res->file_count + 1) * sizeof *res->files);
	brig_image_file *f = &res->files[res->file_count++];
	f->name = xstrdup(name);
	f->source = source ? xstrdup(source) : NULL;
	f->size = size;
	f->origin = origin ? xstrdup(origin) : NULL;
	res->context_bytes += size;
}

int brig_image__context_open(brig_tar_builder **out, const brig_image_result *res, brig_error **err)
{
	*out = NULL;
	/* Files are read as root-owned 0644/0755 whatever their owner on the
	 * host; a symlinked source (an image directory linked elsewhere) is
	 * followed, never sent as a link. */
	brig_tar_build_opts o = {
		.version = BRIG_TAR_BUILD_OPTS_VERSION, .uid = 0, .gid = 0, .mode_mask = 0755, .deref_roots = true};
	brig_tar_builder *b = NULL;
	int rc = brig_tar_builder_new(&b, &o, err);
	bool npm_dir = false;
	for (size_t i = 0; rc == 0 && i < res->file_count; i++) {
		const brig_image_file *f = &res->files[i];
		if (!f->source) {
			rc = brig__error_set(err, BRIG_EINVAL, 0, "context: %s has no source file", f->name);
			break;
		}
		if (!npm_dir && strncmp(f->name, "npm/", 4) == 0) {
			rc = brig_tar_builder_add_dir(b, "npm", 0755, err);
			npm_dir = true;
			if (rc)
				break;
		}
		rc = brig_tar_builder_add_path(b, f->source, f->name, err);
	}
	if (rc) {
		brig_tar_builder_free(b);
		return rc;
	}
	*out = b;
	return 0;
}
