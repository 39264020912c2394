/* ca.c — brig's certificate authority for the egress proxy (issue 19.3):
 * made once per host (EC P-256, ten years) under brig_egress_dir()/ca,
 * its key 0600 and never inside a container; the proxy signs a leaf per
 * secret host with it (kept in memory while the proxy lives). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "brig/egress.h"
#include "egress/ca.h"
#include "egress/egress_internal.h"
#include "util/openssl_dl.h"
#include "util/util.h"

#define CA_DAYS 3650
#define LEAF_DAYS 30
#define LEAF_CACHE 64

static int ssl_fail(brig_error **err, const char *what)
{
	char buf[256] = "";
	unsigned long e = ERR_get_error();
	if (e)
		ERR_error_string_n(e, buf, sizeof buf);
	ERR_clear_error();
	return brig__error_set(err, BRIG_EIO, 0, "egress certificate authority: %s%s%s", what, e ? ": " : "", buf);
}

static bool add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	if (!ext)
		return false;
	bool ok = X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* A certificate for key: self-signed (issuer NULL: the authority) or a
 * leaf for host signed by issuer/issuer_key. NULL on failure. */
static X509 *make_cert(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, const char *host)
{
	X509 *x = X509_new();
	if (!x)
		return NULL;
	uint64_t serial = 0;
	if (getrandom(&serial, sizeof serial, 0) != (ssize_t)sizeof serial)
		goto fail;
	bool ok = X509_set_version(x, 2) == 1 &&
		  ASN1_INTEGER_set_int64(X509_get_serialNumber(x), (int64_t)(serial >> 1) | 1) == 1 &&
		  X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
		  X509_gmtime_adj(X509_getm_notAfter(x), (long)(issuer ? LEAF_DAYS : CA_DAYS) * 86400) &&
		  X509_set_pubkey(x, key) == 1;
	if (!ok)
		goto fail;
	X509_NAME *name = X509_get_subject_name(x);
	char cn[300];
	if (issuer) {
		snprintf(cn, sizeof cn, "%s", host);
	} else {
		char hn[128] = "";
		gethostname(hn, sizeof hn - 1);
		snprintf(cn, sizeof cn, "brig egress authority (%.100s)", hn);
	}
	if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"brig", -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) != 1 ||
	    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) != 1)
		goto fail;
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	if (issuer) {
		char san[300];
		snprintf(san, sizeof san, "DNS:%s", host);
		ok = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
		     add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") &&
		     add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") && add_ext(x, &ctx, NID_subject_alt_name, san) &&
		     add_ext(x, &ctx, NID_authority_key_identifier, "keyid");
	} else {
		ok = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
		     add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") &&
		     add_ext(x, &ctx, NID_subject_key_identifier, "hash");
	}
	if (!ok || X509_sign(x, issuer ? issuer_key : key, EVP_sha256()) <= 0)
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

static int ca_paths(char **dir, char **key, char **cert, brig_error **err)
{
	cleanup_free char *base = NULL;
	int rc = brig_egress_dir(&base, err);
	if (rc)
		return rc;
	*dir = xasprintf("%s/ca", base);
	*key = xasprintf("%s/ca.key", *dir);
	*cert = xasprintf("%s/ca.pem", *dir);
	return 0;
}

/* The file, or NULL with errno (ENOENT: there is none; an empty file is
 * EINVAL). */
static char *read_small(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	char *buf = xcalloc(1, 65537);
	ssize_t n = read(fd, buf, 65536);
	int e = n < 0 ? errno : EINVAL;
	close(fd);
	if (n <= 0) {
		free(buf);
		errno = e;
		return NULL;
	}
	return buf;
}

/* Writes a PEM through fp-taking writer into path (mode), atomically. */
static int write_pem(const char *path, mode_t mode, EVP_PKEY *key, X509 *cert, brig_error **err)
{
	cleanup_free char *tmp = xasprintf("%s.%ld.tmp", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot write %s: %s", tmp, strerror(errno));
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot write %s", tmp);
	}
	bool ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1 : PEM_write_X509(f, cert) == 1;
	ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return ssl_fail(err, "cannot write the authority");
	}
	return 0;
}

/* Reads the authority's key and certificate, which must parse and belong
 * together. A pair that does not is refused, never replaced: sandboxes
 * already made trust that certificate, and a new authority would break
 * every one of them without a word. BRIG_EIO naming the folder. */
static int pair_read(const char *dir, const char *keyp, const char *certp, EVP_PKEY **key, X509 **cert,
		     brig_error **err)
{
	*key = NULL;
	*cert = NULL;
	int rc = brig__crypto_load(err);
	if (rc)
		return rc;
	const char *what = NULL;
	FILE *f = fopen(certp, "re");
	if (f) {
		*cert = PEM_read_X509(f, NULL, NULL, NULL);
		fclose(f);
	}
	if (!*cert)
		what = "ca.pem is not a PEM certificate";
	else if (!(f = fopen(keyp, "re")))
		what = "ca.key cannot be read";
	else {
		*key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
		fclose(f);
		if (!*key)
			what = "ca.key is not a PEM private key";
		else if (X509_check_private_key(*cert, *key) != 1)
			what = "ca.key is not the key of ca.pem";
	}
	ERR_clear_error();
	if (!what)
		return 0;
	EVP_PKEY_free(*key);
	X509_free(*cert);
	*key = NULL;
	*cert = NULL;
	return brig__error_set(err, BRIG_EIO, 0,
			       "egress certificate authority in %s is damaged: %s; move that folder aside to make a "
			       "new one (sandboxes with secrets made before then must be made again)",
			       dir, what);
}

/* Only a certificate that is not there is made: one that cannot be read
 * (or an empty file) is refused like a damaged one, never replaced. */
static int unreadable(const char *dir, const char *certp, brig_error **err)
{
	int e = errno;
	return brig__error_set(err, BRIG_EIO, e,
			       "egress certificate authority in %s is damaged: %s cannot be read (%s); move that "
			       "folder aside to make a new one (sandboxes with secrets made before then must be made "
			       "again)",
			       dir, certp, e == EINVAL ? "it is empty" : strerror(e));
}

/* The certificate in *pem is published: its pair must be whole. On
 * failure *pem is freed and NULL. */
static int pair_ok(const char *dir, const char *keyp, const char *certp, char **pem, brig_error **err)
{
	EVP_PKEY *key;
	X509 *cert;
	int rc = pair_read(dir, keyp, certp, &key, &cert, err);
	EVP_PKEY_free(key);
	X509_free(cert);
	if (rc) {
		free(*pem);
		*pem = NULL;
	}
	return rc;
}

int brig_egress__ca_ensure(char **pem, brig_error **err)
{
	cleanup_free char *dir = NULL, *keyp = NULL, *certp = NULL;
	int rc = ca_paths(&dir, &keyp, &certp, err);
	if (rc || (rc = brig_mkdir_p(dir, 0700, "the egress authority's folder", err)) != 0)
		return rc;
	if ((rc = brig__crypto_load(err)) != 0)
		return rc;
	if ((*pem = read_small(certp)))
		return pair_ok(dir, keyp, certp, pem, err);
	if (errno != ENOENT)
		return unreadable(dir, certp, err);
	cleanup_free char *lockp = xasprintf("%s/ca.lock", dir);
	cleanup_close int lk = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lk < 0 || flock(lk, LOCK_EX) != 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot lock %s: %s", lockp, strerror(errno));
	if ((*pem = read_small(certp)))
		return pair_ok(dir, keyp, certp, pem, err); /* another brig made it meanwhile */
	if (errno != ENOENT)
		return unreadable(dir, certp, err);
	EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!key)
		return ssl_fail(err, "cannot make a key");
	X509 *cert = make_cert(key, NULL, NULL, NULL);
	rc = cert ? 0 : ssl_fail(err, "cannot make the certificate");
	/* the key first: a certificate without its key is never published */
	if (rc == 0)
		rc = write_pem(keyp, 0600, key, NULL, err);
	if (rc == 0)
		rc = write_pem(certp, 0644, NULL, cert, err);
	X509_free(cert);
	EVP_PKEY_free(key);
	if (rc)
		return rc;
	if (!(*pem = read_small(certp)))
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot read %s", certp);
	return 0;
}

/* ---- the proxy's side: leaves ---- */

struct brig_egress_ca {
	EVP_PKEY *key;      /* the authority's */
	X509 *cert;         /* the authority's */
	EVP_PKEY *leaf_key; /* one key for every leaf of this process */
	pthread_mutex_t lock;
	struct {
		char host[256];
		SSL_CTX *ctx;
	} cache[LEAF_CACHE];
	unsigned next;
};

int brig_egress__ca_load(brig_egress_ca **out, brig_error **err)
{
	cleanup_free char *pem = NULL;
	int rc = brig_egress__ca_ensure(&pem, err);
	if (rc || (rc = brig__ssl_load(err)) != 0)
		return rc;
	cleanup_free char *dir = NULL, *keyp = NULL, *certp = NULL;
	if ((rc = ca_paths(&dir, &keyp, &certp, err)) != 0)
		return rc;
	brig_egress_ca *ca = xcalloc(1, sizeof *ca);
	pthread_mutex_init(&ca->lock, NULL);
	if ((rc = pair_read(dir, keyp, certp, &ca->key, &ca->cert, err)) != 0) {
		brig_egress__ca_free(ca);
		return rc;
	}
	ca->leaf_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!ca->key || !ca->cert || !ca->leaf_key) {
		brig_egress__ca_free(ca);
		return ssl_fail(err, "cannot load the authority");
	}
	*out = ca;
	return 0;
}

void brig_egress__ca_free(brig_egress_ca *ca)
{
	if (!ca)
		return;
	for (unsigned i = 0; i < LEAF_CACHE; i++)
		if (ca->cache[i].ctx)
			SSL_CTX_free(ca->cache[i].ctx);
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	EVP_PKEY_free(ca->leaf_key);
	pthread_mutex_destroy(&ca->lock);
	free(ca);
}

SSL_CTX *brig_egress__leaf_ctx(brig_egress_ca *ca, const char *host, brig_error **err)
{
	pthread_mutex_lock(&ca->lock);
	for (unsigned i = 0; i < LEAF_CACHE; i++)
		if (ca->cache[i].ctx && strcasecmp(ca->cache[i].host, host) == 0) {
			SSL_CTX *c = ca->cache[i].ctx;
			SSL_CTX_up_ref(c);
			pthread_mutex_unlock(&ca->lock);
			return c;
		}
	X509 *leaf = make_cert(ca->leaf_key, ca->cert, ca->key, host);
	SSL_CTX *ctx = leaf ? SSL_CTX_new(TLS_server_method()) : NULL;
	bool ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
		  SSL_CTX_use_certificate(ctx, leaf) == 1 && SSL_CTX_use_PrivateKey(ctx, ca->leaf_key) == 1;
	X509_free(leaf);
	if (!ok) {
		if (ctx)
			SSL_CTX_free(ctx);
		pthread_mutex_unlock(&ca->lock);
		ssl_fail(err, "cannot make a certificate for the sandbox's side");
		return NULL;
	}
	unsigned slot = ca->next++ % LEAF_CACHE;
	if (ca->cache[slot].ctx)
		SSL_CTX_free(ca->cache[slot].ctx);
	snprintf(ca->cache[slot].host, sizeof ca->cache[slot].host, "%s", host);
	ca->cache[slot].ctx = ctx;
	SSL_CTX_up_ref(ctx);
	pthread_mutex_unlock(&ca->lock);
	return ctx;
}
