/* archive_dl.h — libarchive, opened with dlopen the first time a tar is built,
 * read or copied, so that the many brig processes that never touch a tar do not
 * pay for mapping it (and libxml2, ICU, libstdc++ and the compressors it
 * pulls in: ~1.3 ms per process start).
 *
 * The real headers give the types and prototypes; this header then turns each
 * libarchive call used in src/ into a call through brig__archive, a table that
 * brig__archive_load fills. Every public constructor that reaches libarchive
 * (brig_tar_builder_new, brig_tar_extract_new, brig_tar_copy_new,
 * brig_tar_restore_open, brig_tar_split_start) calls brig__archive_load first;
 * nothing else may call through the table before one of them succeeded.
 *
 * Private to libbrig's own .c files in src/tar: code outside
 * libbrig (tests) that uses libarchive links it and calls it directly. */
#ifndef BRIG_TAR_ARCHIVE_DL_H
#define BRIG_TAR_ARCHIVE_DL_H

#include <archive.h>
#include <archive_entry.h>

#include "brig/error.h"
#include "util/dl.h"

#define BRIG__ARCHIVE_SONAME "libarchive.so.13"
#define BRIG__ARCHIVE_PACKAGE "libarchive13" /* Debian's */

/* Every libarchive function libbrig calls. A new call site needs its name
 * here and a redirect below (else the brig binary fails to link). */
#define BRIG__ARCHIVE_FUNCS(X)                   \
	X(archive_entry_clear)                   \
	X(archive_entry_copy_hardlink)           \
	X(archive_entry_copy_pathname)           \
	X(archive_entry_copy_symlink)            \
	X(archive_entry_filetype)                \
	X(archive_entry_free)                    \
	X(archive_entry_gid)                     \
	X(archive_entry_hardlink)                \
	X(archive_entry_hardlink_utf8)           \
	X(archive_entry_mtime)                   \
	X(archive_entry_mtime_is_set)            \
	X(archive_entry_mtime_nsec)              \
	X(archive_entry_new)                     \
	X(archive_entry_pathname)                \
	X(archive_entry_pathname_utf8)           \
	X(archive_entry_perm)                    \
	X(archive_entry_set_filetype)            \
	X(archive_entry_set_gid)                 \
	X(archive_entry_set_hardlink)            \
	X(archive_entry_set_mtime)               \
	X(archive_entry_set_pathname)            \
	X(archive_entry_set_perm)                \
	X(archive_entry_set_size)                \
	X(archive_entry_set_uid)                 \
	X(archive_entry_size)                    \
	X(archive_entry_size_is_set)             \
	X(archive_entry_sparse_count)            \
	X(archive_entry_symlink)                 \
	X(archive_entry_symlink_utf8)            \
	X(archive_entry_uid)                     \
	X(archive_errno)                         \
	X(archive_error_string)                  \
	X(archive_filter_bytes)                  \
	X(archive_read_data)                     \
	X(archive_read_data_block)               \
	X(archive_read_data_skip)                \
	X(archive_read_free)                     \
	X(archive_read_new)                      \
	X(archive_read_next_header)              \
	X(archive_read_open)                     \
	X(archive_read_support_filter_none)      \
	X(archive_read_support_filter_zstd)      \
	X(archive_read_support_format_empty)     \
	X(archive_read_support_format_raw)       \
	X(archive_read_support_format_tar)       \
	X(archive_set_error)                     \
	X(archive_write_add_filter_zstd)         \
	X(archive_write_close)                   \
	X(archive_write_data)                    \
	X(archive_write_finish_entry)            \
	X(archive_write_free)                    \
	X(archive_write_header)                  \
	X(archive_write_new)                     \
	X(archive_write_open)                    \
	X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_filter_option)       \
	X(archive_write_set_format_pax_restricted)

typedef struct brig__archive_api {
	BRIG__ARCHIVE_FUNCS(BRIG__DL_SLOT)
} brig__archive_api;

/* Filled once by brig__archive_load; read-only afterwards. */
extern brig__archive_api brig__archive __attribute__((visibility("hidden")));

/* Opens libarchive and resolves every function above, once per process (the
 * handle is kept until exit); later calls return the first call's result.
 * Thread-safe. Errors: BRIG_EIO (the library or one of its functions is
 * missing; the message names the Debian package). */
int brig__archive_load(brig_error **err) __attribute__((visibility("hidden")));

/* The redirects: call sites keep libarchive's own names. archive_dl.c, which
 * needs the real names for dlsym, defines BRIG__ARCHIVE_DL_IMPL. */
#ifndef BRIG__ARCHIVE_DL_IMPL
#define archive_entry_clear (brig__archive.archive_entry_clear)
#define archive_entry_copy_hardlink (brig__archive.archive_entry_copy_hardlink)
#define archive_entry_copy_pathname (brig__archive.archive_entry_copy_pathname)
#define archive_entry_copy_symlink (brig__archive.archive_entry_copy_symlink)
#define archive_entry_filetype (brig__archive.archive_entry_filetype)
#define archive_entry_free (brig__archive.archive_entry_free)
#define archive_entry_gid (brig__archive.archive_entry_gid)
#define archive_entry_hardlink (brig__archive.archive_entry_hardlink)
#define archive_entry_hardlink_utf8 (brig__archive.archive_entry_hardlink_utf8)
#define archive_entry_mtime (brig__archive.archive_entry_mtime)
#define archive_entry_mtime_is_set (brig__archive.archive_entry_mtime_is_set)
#define archive_entry_mtime_nsec (brig__archive.archive_entry_mtime_nsec)
#define archive_entry_new (brig__archive.archive_entry_new)
#define archive_entry_pathname (brig__archive.archive_entry_pathname)
#define archive_entry_pathname_utf8 (brig__archive.archive_entry_pathname_utf8)
#define archive_entry_perm (brig__archive.archive_entry_perm)
#define archive_entry_set_filetype (brig__archive.archive_entry_set_filetype)
#define archive_entry_set_gid (brig__archive.archive_entry_set_gid)
#define archive_entry_set_hardlink (brig__archive.archive_entry_set_hardlink)
#define archive_entry_set_mtime (brig__archive.archive_entry_set_mtime)
#define archive_entry_set_pathname (brig__archive.archive_entry_set_pathname)
#define archive_entry_set_perm (brig__archive.archive_entry_set_perm)
#define archive_entry_set_size (brig__archive.archive_entry_set_size)
#define archive_entry_set_uid (brig__archive.archive_entry_set_uid)
#define archive_entry_size (brig__archive.archive_entry_size)
#define archive_entry_size_is_set (brig__archive.archive_entry_size_is_set)
#define archive_entry_sparse_count (brig__archive.archive_entry_sparse_count)
#define archive_entry_symlink (brig__archive.archive_entry_symlink)
#define archive_entry_symlink_utf8 (brig__archive.archive_entry_symlink_utf8)
#define archive_entry_uid (brig__archive.archive_entry_uid)
#define archive_errno (brig__archive.archive_errno)
#define archive_error_string (brig__archive.archive_error_string)
#define archive_filter_bytes (brig__archive.archive_filter_bytes)
#define archive_read_data (brig__archive.archive_read_data)
#define archive_read_data_block (brig__archive.archive_read_data_block)
#define archive_read_data_skip (brig__archive.archive_read_data_skip)
#define archive_read_free (brig__archive.archive_read_free)
#define archive_read_new (brig__archive.archive_read_new)
#define archive_read_next_header (brig__archive.archive_read_next_header)
#define archive_read_open (brig__archive.archive_read_open)
#define archive_read_support_filter_none (brig__archive.archive_read_support_filter_none)
#define archive_read_support_filter_zstd (brig__archive.archive_read_support_filter_zstd)
#define archive_read_support_format_empty (brig__archive.archive_read_support_format_empty)
#define archive_read_support_format_raw (brig__archive.archive_read_support_format_raw)
#define archive_read_support_format_tar (brig__archive.archive_read_support_format_tar)
#define archive_set_error (brig__archive.archive_set_error)
#define archive_write_add_filter_zstd (brig__archive.archive_write_add_filter_zstd)
#define archive_write_close (brig__archive.archive_write_close)
#define archive_write_data (brig__archive.archive_write_data)
#define archive_write_finish_entry (brig__archive.archive_write_finish_entry)
#define archive_write_free (brig__archive.archive_write_free)
#define archive_write_header (brig__archive.archive_write_header)
#define archive_write_new (brig__archive.archive_write_new)
#define archive_write_open (brig__archive.archive_write_open)
#define archive_write_set_bytes_in_last_block (brig__archive.archive_write_set_bytes_in_last_block)
#define archive_write_set_filter_option (brig__archive.archive_write_set_filter_option)
#define archive_write_set_format_pax_restricted (brig__archive.archive_write_set_format_pax_restricted)
#endif

#endif
