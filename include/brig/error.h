/* brig/error.h — error codes and the error object every fallible call fills.
 * One allocated brig_error travels up through an explicit out-parameter. */
#ifndef BRIG_ERROR_H
#define BRIG_ERROR_H

#include "brig/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every fallible function returns 0 or one of these (negative). */
enum {
	BRIG_OK = 0,
	BRIG_EINVAL = -1,     /* bad input from the caller; message names the field */
	BRIG_ENOTSENT = -2,   /* nothing reached the daemon: safe to retry */
	BRIG_EUNCERTAIN = -3, /* request written, answer incomplete: may have taken effect */
	BRIG_ETIMEDOUT = -4,  /* a deadline passed */
	BRIG_ENOTFOUND = -5,  /* daemon answered 404, or the object does not exist */
	BRIG_ECONFLICT = -6,  /* daemon answered 409, or an object exists and differs */
	BRIG_EPROTO = -7,     /* the peer sent something malformed */
	BRIG_EDAEMON = -8,    /* daemon answered 5xx */
	BRIG_ETOOBIG = -9,    /* a peer exceeded a size cap */
	BRIG_EIO = -10,       /* local I/O failed (files, pipes) */
	BRIG_ECANCELED = -11, /* the caller cancelled */
	BRIG_ESTATE = -12,    /* object is in the wrong state (paused, not running) */
	BRIG_EUNSAFE = -13,   /* untrusted data broke a safety rule (tar entry, path) */
	BRIG_EBADREQ = -14,   /* daemon answered 400 */
	BRIG_EDENIED = -15,   /* daemon answered 401/403, or permission denied locally */
	BRIG_ETLS = -16,      /* TLS set-up or handshake failed */
	BRIG_EBUSY = -17,     /* object is in use (network with endpoints attached) */
	BRIG_ESTORE = -18,    /* the session store failed */
	BRIG_ECORRUPT = -19,  /* stored data failed its integrity check */
};

typedef struct brig_error {
	int code;        /* one of BRIG_E* */
	int sys_errno;   /* errno at the failure, or 0 */
	int http_status; /* daemon's HTTP status, or 0 */
	char *message;   /* what failed, on what, and what to do; never a secret */
} brig_error;

/* Frees an error; accepts NULL. */
BRIG_PUBLIC void brig_error_free(brig_error *err);

/* Message of err, or "" when err is NULL. Borrowed. */
BRIG_PUBLIC const char *brig_error_message(const brig_error *err);

/* Short constant name of a code ("BRIG_ENOTFOUND"). */
BRIG_PUBLIC const char *brig_error_name(int code);

#ifdef __cplusplus
}
#endif
#endif
