/* mhd_dl.h — GNU libmicrohttpd, opened with dlopen when `brig serve` starts,
 * so that every other brig process (and libbrig's users) does not map it and
 * the GnuTLS stack behind it at start (see CMakeLists.txt and
 * tests' unit/startup_libraries).
 *
 * As src/store/sqlite_dl.h: microhttpd.h gives the types, the X-macro list
 * below every function serve/ calls, and the redirects keep MHD's names at
 * the call sites. Private to src/serve/. */
#ifndef BRIG_SERVE_MHD_DL_H
#define BRIG_SERVE_MHD_DL_H

#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "brig/error.h"
#include "util/dl.h"

#define BRIG__MHD_SONAME "libmicrohttpd.so.12"
#define BRIG__MHD_PACKAGE "libmicrohttpd12" /* Debian's */

#define BRIG__MHD_FUNCS(X)                   \
	X(MHD_add_response_header)           \
	X(MHD_create_response_from_buffer)   \
	X(MHD_create_response_from_callback) \
	X(MHD_create_response_from_fd)       \
	X(MHD_create_response_for_upgrade)   \
	X(MHD_destroy_response)              \
	X(MHD_get_connection_info)           \
	X(MHD_get_connection_values)         \
	X(MHD_http_unescape)                 \
	X(MHD_is_feature_supported)          \
	X(MHD_lookup_connection_value)       \
	X(MHD_lookup_connection_value_n)     \
	X(MHD_queue_response)                \
	X(MHD_quiesce_daemon)                \
	X(MHD_start_daemon)                  \
	X(MHD_stop_daemon)                   \
	X(MHD_upgrade_action)

typedef struct brig__mhd_api {
	BRIG__MHD_FUNCS(BRIG__DL_SLOT)
} brig__mhd_api;

extern brig__mhd_api brig__mhd __attribute__((visibility("hidden")));

/* Opens libmicrohttpd once per process. Errors: BRIG_EINVAL (the library
 * or one of its functions is missing; the message names the package). */
int brig__mhd_load(brig_error **err) __attribute__((visibility("hidden")));

#ifndef BRIG__MHD_DL_IMPL
#define MHD_add_response_header (brig__mhd.MHD_add_response_header)
#define MHD_create_response_from_buffer (brig__mhd.MHD_create_response_from_buffer)
#define MHD_create_response_from_callback (brig__mhd.MHD_create_response_from_callback)
#define MHD_create_response_from_fd (brig__mhd.MHD_create_response_from_fd)
#define MHD_create_response_for_upgrade (brig__mhd.MHD_create_response_for_upgrade)
#define MHD_destroy_response (brig__mhd.MHD_destroy_response)
#define MHD_get_connection_info (brig__mhd.MHD_get_connection_info)
#define MHD_get_connection_values (brig__mhd.MHD_get_connection_values)
#define MHD_http_unescape (brig__mhd.MHD_http_unescape)
#define MHD_is_feature_supported (brig__mhd.MHD_is_feature_supported)
#define MHD_lookup_connection_value (brig__mhd.MHD_lookup_connection_value)
#define MHD_lookup_connection_value_n (brig__mhd.MHD_lookup_connection_value_n)
#define MHD_queue_response (brig__mhd.MHD_queue_response)
#define MHD_quiesce_daemon (brig__mhd.MHD_quiesce_daemon)
#define MHD_start_daemon (brig__mhd.MHD_start_daemon)
#define MHD_stop_daemon (brig__mhd.MHD_stop_daemon)
#define MHD_upgrade_action (brig__mhd.MHD_upgrade_action)
#endif

#endif
