/* digest.c — OpenSSL's digests of a file descriptor's contents, for what is
 * too large for the built-in SHA-256: checkpoint blobs, npm tarballs. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util/openssl_dl.h" /* libcrypto, dlopen-ed: EVP calls go through brig__crypto */
#include "util/util.h"

int brig__digest_fd(int fd, bool sha512, unsigned char md[64], uint64_t *size, brig_error **err)
{
	int bits = sha512 ? 512 : 256;
	int r = brig__crypto_load(err);
	if (r)
		return brig__error_prefix(err, r, "SHA-%d", bits);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, sha512 ? EVP_sha512() : EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return brig__error_set(err, BRIG_EIO, 0, "cannot set up SHA-%d", bits);
	}
	cleanup_free char *buf = xmalloc(1 << 20);
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 20);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			EVP_MD_CTX_free(ctx);
			return brig__error_set(err, BRIG_EIO, e, "reading for SHA-%d: %s", bits, strerror(e));
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		total += (uint64_t)n;
	}
	unsigned int len = 0;
	EVP_DigestFinal_ex(ctx, md, &len);
	EVP_MD_CTX_free(ctx);
	if (size)
		*size = total;
	return 0;
}
