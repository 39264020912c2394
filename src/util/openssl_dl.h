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
#include <openssl/pem.h>
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
#define BRIG__CRYPTO_FUNCS(X)              \
	X(ASN1_INTEGER_set_int64)          \
	X(ERR_clear_error)                 \
	X(ERR_error_string_n)              \
	X(ERR_get_error)                   \
	X(EVP_DigestFinal_ex)              \
	X(EVP_DigestInit_ex)               \
	X(EVP_DigestUpdate)                \
	X(EVP_EncodeBlock)                 \
	X(EVP_MD_CTX_free)                 \
	X(EVP_MD_CTX_new)                  \
	X(EVP_PKEY_Q_keygen)               \
	X(EVP_PKEY_free)                   \
	X(EVP_sha256)                      \
	X(EVP_sha512)                      \
	X(PEM_read_PrivateKey)             \
	X(PEM_read_X509)                   \
	X(PEM_write_PrivateKey)            \
	X(PEM_write_X509)                  \
	X(X509V3_EXT_conf_nid)             \
	X(X509V3_set_ctx)                  \
	X(X509_EXTENSION_free)             \
	X(X509_NAME_add_entry_by_txt)      \
	X(X509_VERIFY_PARAM_set1_host)     \
	X(X509_VERIFY_PARAM_set1_ip_asc)   \
	X(X509_VERIFY_PARAM_set_hostflags) \
	X(X509_add_ext)                    \
	X(X509_check_private_key)         \
	X(X509_free)                       \
	X(X509_get_serialNumber)           \
	X(X509_get_subject_name)           \
	X(X509_getm_notAfter)              \
	X(X509_getm_notBefore)             \
	X(X509_gmtime_adj)                 \
	X(X509_new)                        \
	X(X509_set_issuer_name)            \
	X(X509_set_pubkey)                 \
	X(X509_set_version)                \
	X(X509_sign)

#define BRIG__SSL_FUNCS(X)                    \
	X(SSL_CTX_ctrl)                       \
	X(SSL_CTX_free)                       \
	X(SSL_CTX_load_verify_locations)      \
	X(SSL_CTX_new)                        \
	X(SSL_CTX_set_default_verify_paths)   \
	X(SSL_CTX_set_verify)                 \
	X(SSL_CTX_up_ref)                     \
	X(SSL_CTX_use_PrivateKey)             \
	X(SSL_CTX_use_PrivateKey_file)        \
	X(SSL_CTX_use_certificate)            \
	X(SSL_CTX_use_certificate_chain_file) \
	X(SSL_accept)                         \
	X(SSL_connect)                        \
	X(SSL_ctrl)                           \
	X(SSL_free)                           \
	X(SSL_get0_param)                     \
	X(SSL_get_error)                      \
	X(SSL_get_servername)                 \
	X(SSL_get_verify_result)              \
	X(SSL_new)                            \
	X(SSL_pending)                        \
	X(SSL_read)                           \
	X(SSL_set_fd)                         \
	X(SSL_shutdown)                       \
	X(SSL_write)                          \
	X(TLS_client_method)                  \
	X(TLS_server_method)

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
#define ASN1_INTEGER_set_int64 (brig__crypto.ASN1_INTEGER_set_int64)
#define ERR_clear_error (brig__crypto.ERR_clear_error)
#define ERR_error_string_n (brig__crypto.ERR_error_string_n)
#define ERR_get_error (brig__crypto.ERR_get_error)
#define EVP_DigestFinal_ex (brig__crypto.EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (brig__crypto.EVP_DigestInit_ex)
#define EVP_DigestUpdate (brig__crypto.EVP_DigestUpdate)
#define EVP_EncodeBlock (brig__crypto.EVP_EncodeBlock)
#define EVP_MD_CTX_free (brig__crypto.EVP_MD_CTX_free)
#define EVP_MD_CTX_new (brig__crypto.EVP_MD_CTX_new)
#define EVP_PKEY_Q_keygen (brig__crypto.EVP_PKEY_Q_keygen)
#define EVP_PKEY_free (brig__crypto.EVP_PKEY_free)
#define EVP_sha256 (brig__crypto.EVP_sha256)
#define EVP_sha512 (brig__crypto.EVP_sha512)
#define PEM_read_PrivateKey (brig__crypto.PEM_read_PrivateKey)
#define PEM_read_X509 (brig__crypto.PEM_read_X509)
#define PEM_write_PrivateKey (brig__crypto.PEM_write_PrivateKey)
#define PEM_write_X509 (brig__crypto.PEM_write_X509)
#define X509V3_EXT_conf_nid (brig__crypto.X509V3_EXT_conf_nid)
#define X509V3_set_ctx (brig__crypto.X509V3_set_ctx)
#define X509_EXTENSION_free (brig__crypto.X509_EXTENSION_free)
#define X509_NAME_add_entry_by_txt (brig__crypto.X509_NAME_add_entry_by_txt)
#define X509_VERIFY_PARAM_set1_host (brig__crypto.X509_VERIFY_PARAM_set1_host)
#define X509_VERIFY_PARAM_set1_ip_asc (brig__crypto.X509_VERIFY_PARAM_set1_ip_asc)
#define X509_VERIFY_PARAM_set_hostflags (brig__crypto.X509_VERIFY_PARAM_set_hostflags)
#define X509_add_ext (brig__crypto.X509_add_ext)
#define X509_check_private_key (brig__crypto.X509_check_private_key)
#define X509_free (brig__crypto.X509_free)
#define X509_get_serialNumber (brig__crypto.X509_get_serialNumber)
#define X509_get_subject_name (brig__crypto.X509_get_subject_name)
#define X509_getm_notAfter (brig__crypto.X509_getm_notAfter)
#define X509_getm_notBefore (brig__crypto.X509_getm_notBefore)
#define X509_gmtime_adj (brig__crypto.X509_gmtime_adj)
#define X509_new (brig__crypto.X509_new)
#define X509_set_issuer_name (brig__crypto.X509_set_issuer_name)
#define X509_set_pubkey (brig__crypto.X509_set_pubkey)
#define X509_set_version (brig__crypto.X509_set_version)
#define X509_sign (brig__crypto.X509_sign)
#define SSL_CTX_ctrl (brig__ssl.SSL_CTX_ctrl)
#define SSL_CTX_free (brig__ssl.SSL_CTX_free)
#define SSL_CTX_load_verify_locations (brig__ssl.SSL_CTX_load_verify_locations)
#define SSL_CTX_new (brig__ssl.SSL_CTX_new)
#define SSL_CTX_set_default_verify_paths (brig__ssl.SSL_CTX_set_default_verify_paths)
#define SSL_CTX_set_verify (brig__ssl.SSL_CTX_set_verify)
#define SSL_CTX_up_ref (brig__ssl.SSL_CTX_up_ref)
#define SSL_CTX_use_PrivateKey (brig__ssl.SSL_CTX_use_PrivateKey)
#define SSL_CTX_use_PrivateKey_file (brig__ssl.SSL_CTX_use_PrivateKey_file)
#define SSL_CTX_use_certificate (brig__ssl.SSL_CTX_use_certificate)
#define SSL_CTX_use_certificate_chain_file (brig__ssl.SSL_CTX_use_certificate_chain_file)
#define SSL_accept (brig__ssl.SSL_accept)
#define SSL_connect (brig__ssl.SSL_connect)
#define SSL_ctrl (brig__ssl.SSL_ctrl)
#define SSL_free (brig__ssl.SSL_free)
#define SSL_get0_param (brig__ssl.SSL_get0_param)
#define SSL_get_error (brig__ssl.SSL_get_error)
#define SSL_get_servername (brig__ssl.SSL_get_servername)
#define SSL_get_verify_result (brig__ssl.SSL_get_verify_result)
#define SSL_new (brig__ssl.SSL_new)
#define SSL_pending (brig__ssl.SSL_pending)
#define SSL_read (brig__ssl.SSL_read)
#define SSL_set_fd (brig__ssl.SSL_set_fd)
#define SSL_shutdown (brig__ssl.SSL_shutdown)
#define SSL_write (brig__ssl.SSL_write)
#define TLS_client_method (brig__ssl.TLS_client_method)
#define TLS_server_method (brig__ssl.TLS_server_method)
#endif

#endif
