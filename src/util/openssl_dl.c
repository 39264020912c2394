/* openssl_dl.c — opens libcrypto and libssl on first use and fills
 * brig__crypto and brig__ssl (see openssl_dl.h for why they are not linked). */
#define BRIG__OPENSSL_DL_IMPL
#include "util/openssl_dl.h"

#include "util/dl.h"
#include "util/util.h"

brig__crypto_api brig__crypto;
brig__ssl_api brig__ssl;

static const char *const crypto_names[] = {BRIG__CRYPTO_FUNCS(BRIG__DL_NAME)};
static const char *const ssl_names[] = {BRIG__SSL_FUNCS(BRIG__DL_NAME)};

BRIG__DL_DEFINE_FILL(crypto_fill, brig__crypto, BRIG__CRYPTO_FUNCS)

BRIG__DL_DEFINE_FILL(ssl_fill, brig__ssl, BRIG__SSL_FUNCS)

/* libcrypto first: libssl needs it (dlopen of libssl would bring it in
 * anyway, as the same object), and the ERR_ and X509_ functions the TLS code
 * calls are libcrypto's, resolved from libcrypto itself. */
static brig__dl crypto_lib = BRIG__DL_INIT(BRIG__CRYPTO_SONAME, BRIG__OPENSSL_PACKAGE, crypto_names, crypto_fill);
static brig__dl ssl_lib = BRIG__DL_INIT(BRIG__SSL_SONAME, BRIG__OPENSSL_PACKAGE, ssl_names, ssl_fill);

int brig__crypto_load(brig_error **err)
{
	return brig__dl_load(&crypto_lib, BRIG_EIO, err);
}

int brig__ssl_load(brig_error **err)
{
	int r = brig__dl_load(&crypto_lib, BRIG_ETLS, err);
	if (!r)
		r = brig__dl_load(&ssl_lib, BRIG_ETLS, err);
	return r ? brig__error_prefix(err, r, "TLS") : 0;
}
