/* sha256.h — SHA-256 (FIPS 180-4) of small in-memory inputs: brig's names
 * and spec hashes. Built in so that a brig process that only names a
 * computer or labels a run need not load OpenSSL (0.6 ms of every start,
 * measured); large streams (checkpoints) keep OpenSSL's accelerated code. */
#ifndef BRIG_UTIL_SHA256_H
#define BRIG_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define BRIG_SHA256_SIZE 32

typedef struct brig_sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes so far */
	unsigned char block[64];
	size_t fill;
} brig_sha256_ctx;

void brig_sha256_init(brig_sha256_ctx *s);
void brig_sha256_update(brig_sha256_ctx *s, const void *data, size_t n);
void brig_sha256_final(brig_sha256_ctx *s, unsigned char out[BRIG_SHA256_SIZE]);
/* One shot. */
void brig_sha256(unsigned char out[BRIG_SHA256_SIZE], const void *data, size_t n);

#endif
