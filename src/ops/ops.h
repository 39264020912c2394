/* ops.h — operations on one computer that more than one surface offers
 * (brig mcp, brig serve): files (fs.h) and background processes (procs.h),
 * through brig-init when the computer has it, else through exec. Private
 * to src/.
 *
 * A surface hands these an ops_target: how to reach its computer (the
 * brig-init handle it keeps open, and exec with its own cancel and audit
 * rules). The target's callbacks are called on the caller's thread.
 */
#ifndef BRIG_OPS_H
#define BRIG_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/error.h"
#include "brig/sandbox.h"

typedef struct ops_target ops_target;

struct ops_target {
	/* The computer's brig-init handle (borrowed: valid while the target
	 * lives), creating or adopting the computer first when the surface
	 * does that; *out NULL (and 0 returned) when the computer has none or
	 * it cannot be reached now: exec is used then. */
	int (*guest)(ops_target *t, brig_guest **out, brig_error **err);
	/* Runs argv in the computer with env ("KEY=VALUE"), workdir (NULL:
	 * /workspace) and stdin data; res is filled. As brig_computer_exec. */
	int (*exec)(ops_target *t, const char *const *argv, const char *const *env, size_t env_count,
		    const char *workdir, const char *stdin_data, size_t stdin_len, size_t capture_max,
		    int64_t timeout_ms, brig_exec_result *res, brig_error **err);
	void *payload; /* the surface's */
};

static inline int ops_guest(ops_target *t, brig_guest **out, brig_error **err)
{
	return t->guest(t, out, err);
}

static inline int ops_exec_env(ops_target *t, const char *const *argv, const char *const *env, size_t env_count,
			       const char *workdir, const char *stdin_data, size_t stdin_len, size_t capture_max,
			       int64_t timeout_ms, brig_exec_result *res, brig_error **err)
{
	return t->exec(t, argv, env, env_count, workdir, stdin_data, stdin_len, capture_max, timeout_ms, res, err);
}

static inline int ops_exec(ops_target *t, const char *const *argv, const char *stdin_data, size_t stdin_len,
			   size_t capture_max, int64_t timeout_ms, brig_exec_result *res, brig_error **err)
{
	return t->exec(t, argv, NULL, 0, NULL, stdin_data, stdin_len, capture_max, timeout_ms, res, err);
}

/* Text as a JSON string: invalid UTF-8 becomes U+FFFD (output of commands
 * is arbitrary bytes). New reference. */
json_t *ops_string(const char *data, size_t len);
/* True when data is valid UTF-8 without NUL bytes. */
bool ops_is_text(const char *data, size_t len);
/* The bytes ops_string(data, len) takes inside a JSON string as jansson
 * writes it: 2 for a quote, a backslash, \b \f \n \r \t; 6 for any other
 * control character; 3 for an invalid byte or a NUL (its U+FFFD); 1 for
 * every other byte. */
size_t ops_json_size(const char *data, size_t len);
/* The longest prefix of data, ending between characters, whose
 * ops_json_size is at most budget. */
size_t ops_json_fit(const char *data, size_t len, size_t budget);

/* Standard base64 (RFC 4648 §4), malloc'd. */
char *ops_b64encode(const unsigned char *in, size_t len);
/* Strict decoding (padding required, no whitespace); NULL when invalid. */
unsigned char *ops_b64decode(const char *in, size_t len, size_t *out_len);

#endif
