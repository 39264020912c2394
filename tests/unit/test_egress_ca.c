/* test_egress_ca.c — brig's egress certificate authority (src/egress/ca.c)
 * on its failure paths: a damaged authority is refused by name and never
 * replaced, a folder that cannot be made is named, and the proxy's leaves
 * chain to the authority, name their host, and survive the cache turning
 * over. This file calls OpenSSL itself (linked), so it declares the few
 * brig functions it needs instead of including egress/ca.h, whose
 * redirects are for libbrig's own files. */
#include "testutil.h"
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/egress_internal.h"
#include "util/util.h"

#define ASSERT_CONTAINS(hay, needle)                                        \
	do {                                                                \
		if (!strstr((hay), (needle)))                               \
			fail_msg("expected '%s' in '%s'", (needle), (hay)); \
	} while (0)

typedef struct brig_egress_ca brig_egress_ca;
int brig_egress__ca_load(brig_egress_ca **out, brig_error **err);
void brig_egress__ca_free(brig_egress_ca *ca);
SSL_CTX *brig_egress__leaf_ctx(brig_egress_ca *ca, const char *host, brig_error **err);

static char *dir;

static int setup(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/brig-unit-ca-XXXXXX";
	if (!mkdtemp(tmpl))
		return -1;
	dir = xstrdup(tmpl);
	setenv("BRIG_EGRESS_DIR", dir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cleanup_free char *rm = xasprintf("rm -rf '%s'", dir);
	int rc = system(rm);
	free(dir);
	unsetenv("BRIG_EGRESS_DIR");
	return rc == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = xcalloc(1, 65537);
	size_t n = fread(buf, 1, 65536, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* ca_ensure and ca_load both refuse, with `what` in the message, and the
 * files stay exactly as they were. */
static void assert_refused(const char *what)
{
	cleanup_free char *keyp = xasprintf("%s/ca/ca.key", dir), *certp = xasprintf("%s/ca/ca.pem", dir);
	cleanup_free char *key0 = slurp(keyp), *cert0 = slurp(certp);
	brig_error *err = NULL;
	char *pem = (char *)"untouched";
	assert_int_equal(brig_egress__ca_ensure(&pem, &err), BRIG_EIO);
	assert_null(pem);
	ASSERT_CONTAINS(brig_error_message(err), "is damaged");
	ASSERT_CONTAINS(brig_error_message(err), what);
	ASSERT_CONTAINS(brig_error_message(err), dir);
	brig__error_clear(&err);
	brig_egress_ca *ca = NULL;
	assert_int_equal(brig_egress__ca_load(&ca, &err), BRIG_EIO);
	assert_null(ca);
	ASSERT_CONTAINS(brig_error_message(err), what);
	brig__error_clear(&err);
	cleanup_free char *key1 = slurp(keyp), *cert1 = slurp(certp);
	if (key0 || key1)
		assert_string_equal(key0, key1);
	assert_string_equal(cert0, cert1);
}

static void test_damaged_authority_refused(void **state)
{
	(void)state;
	brig_error *err = NULL;
	cleanup_free char *pem = NULL;
	ASSERT_OK(brig_egress__ca_ensure(&pem, &err), err);
	cleanup_free char *keyp = xasprintf("%s/ca/ca.key", dir), *certp = xasprintf("%s/ca/ca.pem", dir);
	cleanup_free char *key = slurp(keyp), *cert = slurp(certp);
	assert_string_equal(pem, cert);

	/* another authority's key: the pair does not belong together */
	cleanup_free char *other = xasprintf("%s/other", dir);
	assert_int_equal(mkdir(other, 0700), 0);
	setenv("BRIG_EGRESS_DIR", other, 1);
	cleanup_free char *pem2 = NULL;
	ASSERT_OK(brig_egress__ca_ensure(&pem2, &err), err);
	setenv("BRIG_EGRESS_DIR", dir, 1);
	cleanup_free char *okey = xasprintf("%s/ca/ca.key", other);
	cleanup_free char *other_key = slurp(okey);
	put(keyp, other_key);
	assert_refused("ca.key is not the key of ca.pem");

	/* a key that is not PEM */
	put(keyp, "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n");
	assert_refused("ca.key is not a PEM private key");

	/* a certificate that is not PEM (the key restored) */
	put(keyp, key);
	put(certp, "garbage, not a certificate\n");
	assert_refused("ca.pem is not a PEM certificate");

	/* an empty certificate file: refused, never made again over it */
	put(certp, "");
	assert_refused("cannot be read (it is empty)");

	/* a certificate without its key is never given to a sandbox */
	put(certp, cert);
	assert_int_equal(unlink(keyp), 0);
	assert_refused("ca.key cannot be read");

	/* put back whole: accepted, the same certificate as before */
	put(keyp, key);
	assert_int_equal(chmod(keyp, 0600), 0);
	cleanup_free char *pem3 = NULL;
	ASSERT_OK(brig_egress__ca_ensure(&pem3, &err), err);
	assert_string_equal(pem3, cert);
}

static void test_folder_that_cannot_be(void **state)
{
	(void)state;
	/* the egress folder's authority folder is a file */
	cleanup_free char *sub = xasprintf("%s/blocked", dir), *file = xasprintf("%s/blocked/ca", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	put(file, "x");
	setenv("BRIG_EGRESS_DIR", sub, 1);
	brig_error *err = NULL;
	char *pem = NULL;
	assert_true(brig_egress__ca_ensure(&pem, &err) < 0);
	assert_null(pem);
	ASSERT_CONTAINS(brig_error_message(err), "authority");
	ASSERT_CONTAINS(brig_error_message(err), sub);
	brig__error_clear(&err);
	brig_egress_ca *ca = NULL;
	assert_true(brig_egress__ca_load(&ca, &err) < 0);
	assert_null(ca);
	brig__error_clear(&err);
	setenv("BRIG_EGRESS_DIR", dir, 1);
}

/* The leaf's certificate verifies against the authority and names host. */
static void assert_leaf(SSL_CTX *ctx, X509 *authority, const char *host)
{
	X509 *leaf = SSL_CTX_get0_certificate(ctx);
	assert_non_null(leaf);
	X509_STORE *store = X509_STORE_new();
	assert_int_equal(X509_STORE_add_cert(store, authority), 1);
	X509_STORE_CTX *vc = X509_STORE_CTX_new();
	assert_int_equal(X509_STORE_CTX_init(vc, store, leaf, NULL), 1);
	X509_VERIFY_PARAM *vp = X509_STORE_CTX_get0_param(vc);
	assert_int_equal(X509_VERIFY_PARAM_set1_host(vp, host, 0), 1);
	X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER);
	int ok = X509_verify_cert(vc);
	if (ok != 1)
		print_error("leaf for %s: %s\n", host, X509_verify_cert_error_string(X509_STORE_CTX_get_error(vc)));
	assert_int_equal(ok, 1);
	assert_int_equal(X509_check_host(leaf, "other.example.com", 0, 0, NULL), 0);
	X509_STORE_CTX_free(vc);
	X509_STORE_free(store);
}

static void test_leaves_chain_and_turn_over(void **state)
{
	(void)state;
	brig_error *err = NULL;
	brig_egress_ca *ca = NULL;
	ASSERT_OK(brig_egress__ca_load(&ca, &err), err);
	cleanup_free char *certp = xasprintf("%s/ca/ca.pem", dir);
	FILE *f = fopen(certp, "re");
	assert_non_null(f);
	X509 *authority = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(authority);

	SSL_CTX *first = brig_egress__leaf_ctx(ca, "api.example.com", &err);
	assert_non_null(first);
	assert_leaf(first, authority, "api.example.com");
	/* cached: the same context, whatever the case of the name */
	SSL_CTX *again = brig_egress__leaf_ctx(ca, "API.Example.com", &err);
	assert_ptr_equal(again, first);
	SSL_CTX_free(again);
	/* more hosts than the cache holds: each still right, and the first
	 * (held here while it is evicted) stays usable */
	for (int i = 0; i < 70; i++) {
		char host[64];
		snprintf(host, sizeof host, "h%d.example.com", i);
		SSL_CTX *c = brig_egress__leaf_ctx(ca, host, &err);
		assert_non_null(c);
		if (i % 23 == 0)
			assert_leaf(c, authority, host);
		SSL_CTX_free(c);
	}
	assert_leaf(first, authority, "api.example.com");
	SSL_CTX *fresh = brig_egress__leaf_ctx(ca, "api.example.com", &err);
	assert_non_null(fresh);
	assert_ptr_not_equal(fresh, first);
	assert_leaf(fresh, authority, "api.example.com");
	SSL_CTX_free(fresh);
	SSL_CTX_free(first);
	X509_free(authority);
	brig_egress__ca_free(ca);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_damaged_authority_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_folder_that_cannot_be, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leaves_chain_and_turn_over, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
