/* openssl_dl.h — libcrypto and libssl (OpenSSL 3), opened with dlopen when
 * first needed, so that the brig processes that neither digest a large
 * stream nor talk TLS (brig run, brig exec, brig --version...) do not pay for
 * mapping them at start.
 *
 * libcrypto is opened by what digests a stream or file: a tar copier or
 * restore, and brig__digest_fd (src/util/digest.c: brig_tar_sha256_fd, npm's
 * SHA-512 in src/image/lock.c); libssl, and libcrypto before it, by the set-up of a TLS
 * connection (src/http/conn.c). Small digests (names, spec hashes, the image
 * lock) use the built-in SHA-256 of src/util/sha256.c instead.
 *
 * The real headers give the types and prototypes; this header then turns
 * each call into a call through brig__crypto or brig__ssl, tables that
 * brig__crypto_load and brig__ssl_load fill. Each table holds the symbols its
 * library exports, under their exported names: several documented "functions"
 * are macros over others (SSL_CTX_set_min_proto_version and
 * SSL_set_tlsext_host_name over SSL_CTX_ctrl and SSL_ctrl, for instance), and
 * the redirects apply after those macros expand. Include this header after
 * every other OpenSSL header (it includes those libbrig uses): a declaration
 * read after the redirects would not compile.
 *
 * Private to libbrig's own .c files: code outside libbrig (tests) that uses
 * OpenSSL links it and calls it directly. */
#ifndef BRIG_UTIL_OPENSSL_DL_H
#define BRIG_UTIL_OPENSSL_DL_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "brig/error.h"
#include "util/dl.h"

#define BRIG__CRYPTO_SONAME "libcrypto.so.3"
#define BRIG__SSL_SONAME "libssl.so.3"
#define BRIG__OPENSSL_PACKAGE "libssl3" /* Debian's, for both */

/* Every libcrypto and libssl function libbrig calls, by the library that
 * exports it (nm -D). A new call site needs its name here and a redirect
 * below (else libbrig.so and the brig binary fail to link). */
#define BRIG__CRYPTO_FUNCS(X)            \
	X(ERR_clear_error)               \
	X(ERR_error_string_n)            \
	X(ERR_get_error)                 \
	X(EVP_DigestFinal_ex)            \
	X(EVP_DigestInit_ex)             \
	X(EVP_DigestUpdate)              \
	X(EVP_EncodeBlock)               \
	X(EVP_MD_CTX_free)               \
	X(EVP_MD_CTX_new)                \
	X(EVP_sha256)                    \
	X(EVP_sha512)                    \
	X(X509_VERIFY_PARAM_set1_host)   \
	X(X509_VERIFY_PARAM_set1_ip_asc) \
	X(X509_VERIFY_PARAM_set_hostflags)

#define BRIG__SSL_FUNCS(X)                    \
	X(SSL_CTX_ctrl)                       \
	X(SSL_CTX_free)                       \
	X(SSL_CTX_load_verify_locations)      \
	X(SSL_CTX_new)                        \
	X(SSL_CTX_set_verify)                 \
	X(SSL_CTX_use_PrivateKey_file)        \
	X(SSL_CTX_use_certificate_chain_file) \
	X(SSL_connect)                        \
	X(SSL_ctrl)                           \
	X(SSL_free)                           \
	X(SSL_get0_param)                     \
	X(SSL_get_error)                      \
	X(SSL_new)                            \
	X(SSL_pending)                        \
	X(SSL_read)                           \
	X(SSL_set_fd)                         \
	X(SSL_shutdown)                       \
	X(SSL_write)                          \
	X(TLS_client_method)

typedef struct brig__crypto_api {
	BRIG__CRYPTO_FUNCS(BRIG__DL_SLOT)
} brig__crypto_api;

typedef struct brig__ssl_api {
	BRIG__SSL_FUNCS(BRIG__DL_SLOT)
} brig__ssl_api;

/* Filled once by the loaders below; read-only afterwards. */
extern brig__crypto_api brig__crypto __attribute__((visibility("hidden")));
extern brig__ssl_api brig__ssl __attribute__((visibility("hidden")));

/* Opens libcrypto and resolves every function of BRIG__CRYPTO_FUNCS, once per
 * process (the handle is kept until exit); later calls return the first
 * call's result. Thread-safe. Errors: BRIG_EIO (the library or one of its
 * functions is missing; the message names the Debian package). */
int brig__crypto_load(brig_error **err) __attribute__((visibility("hidden")));

/* The same for libssl, after libcrypto (whose table it also needs: ERR_*,
 * X509_VERIFY_PARAM_*). Errors: BRIG_ETLS (as above). */
int brig__ssl_load(brig_error **err) __attribute__((visibility("hidden")));

/* Digests what is left to read of fd with OpenSSL's SHA-256 (sha512 false)
 * or SHA-512, loading libcrypto first: md gets 32 or 64 bytes, *size (may be
 * NULL) the bytes read. Errors: brig__crypto_load's, BRIG_EIO (the digest
 * cannot be set up, or reading fd failed). */
int brig__digest_fd(int fd, bool sha512, unsigned char md[64], uint64_t *size, brig_error **err)
	__attribute__((visibility("hidden")));

/* The redirects: call sites keep OpenSSL's own names. openssl_dl.c, which
 * needs the real names for dlsym, defines BRIG__OPENSSL_DL_IMPL. */
#ifndef BRIG__OPENSSL_DL_IMPL
#define ERR_clear_error (brig__crypto.ERR_clear_error)
#define ERR_error_string_n (brig__crypto.ERR_error_string_n)
#define ERR_get_error (brig__crypto.ERR_get_error)
#define EVP_DigestFinal_ex (brig__crypto.EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (brig__crypto.EVP_DigestInit_ex)
#define EVP_DigestUpdate (brig__crypto.EVP_DigestUpdate)
#define EVP_EncodeBlock (brig__crypto.EVP_EncodeBlock)
#define EVP_MD_CTX_free (brig__crypto.EVP_MD_CTX_free)
#define EVP_MD_CTX_new (brig__crypto.EVP_MD_CTX_new)
#define EVP_sha256 (brig__crypto.EVP_sha256)
#define EVP_sha512 (brig__crypto.EVP_sha512)
#define X509_VERIFY_PARAM_set1_host (brig__crypto.X509_VERIFY_PARAM_set1_host)
#define X509_VERIFY_PARAM_set1_ip_asc (brig__crypto.X509_VERIFY_PARAM_set1_ip_asc)
#define X509_VERIFY_PARAM_set_hostflags (brig__crypto.X509_VERIFY_PARAM_set_hostflags)
#define SSL_CTX_ctrl (brig__ssl.SSL_CTX_ctrl)
#define SSL_CTX_free (brig__ssl.SSL_CTX_free)
#define SSL_CTX_load_verify_locations (brig__ssl.SSL_CTX_load_verify_locations)
#define SSL_CTX_new (brig__ssl.SSL_CTX_new)
#define SSL_CTX_set_verify (brig__ssl.SSL_CTX_set_verify)
#define SSL_CTX_use_PrivateKey_file (brig__ssl.SSL_CTX_use_PrivateKey_file)
#define SSL_CTX_use_certificate_chain_file (brig__ssl.SSL_CTX_use_certificate_chain_file)
#define SSL_connect (brig__ssl.SSL_connect)
#define SSL_ctrl (brig__ssl.SSL_ctrl)
#define SSL_free (brig__ssl.SSL_free)
#define SSL_get0_param (brig__ssl.SSL_get0_param)
#define SSL_get_error (brig__ssl.SSL_get_error)
#define SSL_new (brig__ssl.SSL_new)
#define SSL_pending (brig__ssl.SSL_pending)
#define SSL_read (brig__ssl.SSL_read)
#define SSL_set_fd (brig__ssl.SSL_set_fd)
#define SSL_shutdown (brig__ssl.SSL_shutdown)
#define SSL_write (brig__ssl.SSL_write)
#define TLS_client_method (brig__ssl.TLS_client_method)
#endif

#endif
