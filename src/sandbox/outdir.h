/* outdir.h — a run's copy-out lands all or nothing: it is extracted into a
 * fresh directory beside --out and moved into place only once it is whole.
 * Private to src/sandbox. */
#ifndef BRIG_SANDBOX_OUTDIR_H
#define BRIG_SANDBOX_OUTDIR_H

#include "util/util.h"

/* Makes an empty directory beside out_dir (same parent, so the moves are
 * renames on one file system), mode 0755 & ~umask as mkdir gives --out
 * itself. *tmp (new string) is its path. Errors: BRIG_EIO. */
int brig_sandbox__outdir_begin(char **tmp, const char *out_dir, brig_error **err);

/* Moves what tmp holds into out_dir and removes tmp. out_dir missing: tmp is
 * renamed to it. out_dir present: merged as the extractor merges into an
 * existing directory (directories merged into, keeping their own mode;
 * files and links replaced). A file landing where out_dir has a directory is
 * BRIG_EUNSAFE, found before anything moves: out_dir is left as it was.
 * Errors: BRIG_EUNSAFE, BRIG_EIO. */
int brig_sandbox__outdir_commit(const char *tmp, const char *out_dir, brig_error **err);

/* Removes tmp and everything below it (read-only directories included). */
void brig_sandbox__outdir_abandon(const char *tmp);

#endif
