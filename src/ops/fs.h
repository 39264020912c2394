/* fs.h — the one interface the file operations (MCP tools, HTTP API) use to touch the computer's
 * files: brig-init's native file API when the computer has it, else small
 * fixed commands through exec (paths and values travel as argv entries,
 * file content through stdin: nothing is ever interpolated into shell
 * text).
 *
 * Paths: absolute, or relative to /workspace (ops_fs_path makes them
 * absolute). Every function returns 0 or a BRIG_E… code with a message a
 * model can act on in *err: BRIG_ENOTFOUND (no such file), BRIG_EDENIED
 * (permission, read-only place: the message names the writable ones),
 * BRIG_ECONFLICT (the destination exists), BRIG_EINVAL (wrong kind of file,
 * directory not empty), BRIG_ETOOBIG, or what exec returns (the computer is
 * stopped or gone: recover).
 */
#ifndef BRIG_OPS_FS_H
#define BRIG_OPS_FS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/error.h"
#include "ops/ops.h"

#define OPS_FS_MAX ((size_t)8 << 20) /* bytes one read, write or edit moves */
#define OPS_FS_MAX_ENTRIES 5000      /* entries one listing returns */

/* path made absolute (relative → under /workspace), malloc'd; NULL with
 * *err when path is empty. */
char *ops_fs_path(const char *path, brig_error **err);

/* Reads up to length bytes at offset of regular file path. *data (malloc'd,
 * NUL-terminated, may hold NULs) gets them, *size the file's size. */
int ops_fs_read(ops_target *c, const char *path, uint64_t offset, size_t length, char **data, size_t *len,
		uint64_t *size, brig_error **err);
/* Writes (or appends) data to path, making its parent directories. */
int ops_fs_write(ops_target *c, const char *path, const char *data, size_t len, bool append, brig_error **err);
/* Lists directory path to depth levels: *out gets an array of
 * {"name" (relative to path),"type","size","mode","mtime","mtime_ns","uid","gid"}
 * sorted by name (mtime: unix seconds, floored; mtime_ns: exact);
 * *truncated says entries were left out. */
int ops_fs_list(ops_target *c, const char *path, int depth, json_t **out, bool *truncated, brig_error **err);
/* {"type","size","mode","mtime","mtime_ns","uid","gid","owner","group"} of path (a link itself,
 * not its target). BRIG_ENOTFOUND when absent. */
int ops_fs_stat(ops_target *c, const char *path, json_t **out, brig_error **err);
/* Renames src to dst; without overwrite an existing dst is BRIG_ECONFLICT. */
int ops_fs_move(ops_target *c, const char *src, const char *dst, bool overwrite, brig_error **err);
/* Removes a file, a link, an empty directory, or with recursive a tree. */
int ops_fs_remove(ops_target *c, const char *path, bool recursive, brig_error **err);
/* Makes directory path and its parents (existing: success). */
int ops_fs_mkdir(ops_target *c, const char *path, brig_error **err);

#endif
