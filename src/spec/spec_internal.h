/* spec_internal.h — helpers shared by naming.c, env.c, spec.c and
 * spec_json.c: safe echoing of input in messages, hashing, label rules. */
#ifndef BRIG_SPEC_INTERNAL_H
#define BRIG_SPEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/spec.h"

/* Longest piece of user input echoed in a message. */
#define BRIG_SPEC__ECHO_MAX 64
/* Caps on lists and entries: a spec is user input too. */
#define BRIG_SPEC__ENV_MAX 4096
#define BRIG_SPEC__ENTRY_MAX (128 * 1024) /* Linux MAX_ARG_STRLEN */
#define BRIG_SPEC__ENV_TOTAL_MAX (1024 * 1024) /* all entries together */
#define BRIG_SPEC__LABEL_MAX 256
#define BRIG_SPEC__LABEL_KEY_MAX 128
#define BRIG_SPEC__LABEL_VALUE_MAX 1024

/* Writes s into out (size >= BRIG_SPEC__ECHO_MAX * 4 + 4) with bytes outside
 * printable ASCII, quotes and backslashes as \xNN, cut after
 * BRIG_SPEC__ECHO_MAX input bytes with "...". Returns out. Only for keys,
 * names and numbers — never for env values. */
#define BRIG_SPEC__QUOTE_SIZE (BRIG_SPEC__ECHO_MAX * 4 + 4)
char *brig_spec__quote(char out[BRIG_SPEC__QUOTE_SIZE], const char *s);
/* Same for the first n bytes of s. */
char *brig_spec__quoten(char out[BRIG_SPEC__QUOTE_SIZE], const char *s, size_t n);

/* SHA-256 of n bytes, as 64 hex digits into out. */
void brig_spec__sha256_hex(char out[BRIG_HASH_SIZE], const void *data, size_t n);

/* cpus as NanoCpus, rounded to nearest (no libm: the library does not link
 * it). Only meaningful for finite cpus in range; others give 0. */
int64_t brig_spec__nano_cpus(double cpus);

/* True when key is one brig writes itself (brig.managed, brig.spec, …). */
bool brig_spec__label_reserved(const char *key);

/* Parses spec->user ("uid:gid", both 1..2147483647). Errors: BRIG_EINVAL. */
int brig_spec__parse_user(const char *user, uint32_t *uid, uint32_t *gid, brig_error **err);

/* The tmpfs budget: workspace + runtime + shm (+ a run's inbox and outbox)
 * must leave BRIG_MIN_FREE_MB of memory. Errors: BRIG_EINVAL naming all. */
int brig_spec__check_tmpfs(const brig_spec *spec, int64_t inbox_mb, int64_t outbox_mb, brig_error **err);

/* brig_spec_add_env(); lookup false refuses a bare KEY instead of reading
 * brig's environment (for specs read back from a store). */
int brig_spec__add_env(brig_spec *spec, const char *entry, bool lookup, brig_error **err);

/* Index of key (length klen) in a list of "KEY=VALUE" entries, or -1. */
ptrdiff_t brig_spec__env_find(char *const *list, size_t n, const char *key, size_t klen);

/* Length of the key of an entry ("KEY=…" or "KEY"). */
size_t brig_spec__env_keylen(const char *entry);

/* Published ports (ports.c). check_ports: each valid, none overlapping,
 * network isolated when there are any. Errors: BRIG_EINVAL. */
int brig_spec__check_ports(const brig_spec *spec, brig_error **err);
/* The ports' canonical spellings as a new JSON array (sorted: for the hash). */
json_t *brig_spec__ports_json(const brig_spec *spec, bool sorted);
/* Sets Config.ExposedPorts and HostConfig.PortBindings when there are ports. */
void brig_spec__port_bindings(const brig_spec *spec, json_t *config, json_t *host_config);

#endif
