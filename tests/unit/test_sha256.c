/* test_sha256.c — the built-in SHA-256 (src/util/sha256.c): FIPS 180-4's
 * examples, every way of splitting an input across updates, and agreement
 * with OpenSSL on inputs of every length around the block boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "util/sha256.h"
#include "util/util.h"

static void hex_of(char out[65], const void *data, size_t n)
{
	unsigned char md[BRIG_SHA256_SIZE];
	brig_sha256(md, data, n);
	brig_hex(out, md, sizeof md);
}

static void test_fips_examples(void **state)
{
	(void)state;
	char h[65];
	hex_of(h, "", 0);
	assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	hex_of(h, "abc", 3);
	assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	hex_of(h, two, strlen(two));
	assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnop"
			   "qrsmnopqrstnopqrstu";
	hex_of(h, four, strlen(four));
	assert_string_equal(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

	/* One million 'a', fed in uneven pieces. */
	brig_sha256_ctx s;
	brig_sha256_init(&s);
	char a[997];
	memset(a, 'a', sizeof a);
	size_t left = 1000000;
	while (left) {
		size_t k = left < sizeof a ? left : sizeof a;
		brig_sha256_update(&s, a, k);
		left -= k;
	}
	unsigned char md[BRIG_SHA256_SIZE];
	brig_sha256_final(&s, md);
	brig_hex(h, md, sizeof md);
	assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void openssl_hex(char out[65], const void *data, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	assert_int_equal(EVP_Digest(data, n, md, &len, EVP_sha256(), NULL), 1);
	assert_int_equal(len, 32);
	brig_hex(out, md, 32);
}

/* Every length from 0 to 300 (all paddings, one to five blocks), each also
 * split at every point into two updates. */
static void test_matches_openssl(void **state)
{
	(void)state;
	unsigned char buf[300];
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < sizeof buf; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (unsigned char)x;
	}
	for (size_t n = 0; n <= sizeof buf; n++) {
		char want[65], got[65];
		openssl_hex(want, buf, n);
		hex_of(got, buf, n);
		if (strcmp(want, got) != 0)
			fail_msg("length %zu: %s, OpenSSL says %s", n, got, want);
		for (size_t cut = 0; cut <= n; cut++) {
			brig_sha256_ctx s;
			brig_sha256_init(&s);
			brig_sha256_update(&s, buf, cut);
			brig_sha256_update(&s, buf + cut, n - cut);
			unsigned char md[BRIG_SHA256_SIZE];
			brig_sha256_final(&s, md);
			brig_hex(got, md, sizeof md);
			if (strcmp(want, got) != 0)
				fail_msg("length %zu split at %zu: %s, OpenSSL says %s", n, cut, got, want);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fips_examples),
		cmocka_unit_test(test_matches_openssl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
