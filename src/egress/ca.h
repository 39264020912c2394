/* ca.h — the egress proxy's side of brig's certificate authority: leaf
 * certificates for the hosts of a sandbox's secrets (src/egress/ca.c).
 * Include after other OpenSSL headers, as util/openssl_dl.h asks. */
#ifndef BRIG_EGRESS_CA_H
#define BRIG_EGRESS_CA_H

#include "util/openssl_dl.h"

typedef struct brig_egress_ca brig_egress_ca;

/* The authority (made when missing) and a fresh leaf key. Loads libssl.
 * Errors: BRIG_EIO. */
int brig_egress__ca_load(brig_egress_ca **out, brig_error **err);
void brig_egress__ca_free(brig_egress_ca *ca);

/* A server context presenting a leaf for host (made once, cached; the
 * caller owns one reference: SSL_CTX_free it). NULL with *err on failure. */
SSL_CTX *brig_egress__leaf_ctx(brig_egress_ca *ca, const char *host, brig_error **err);

#endif
