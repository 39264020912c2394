/* test_lazy_load.c — libbrig opens libarchive, libpq, SQLite and OpenSSL only
 * when a tar, a store, a digest or a TLS connection first needs them
 * (src/tar/archive_dl.c, src/store/pq_dl.c, src/store/sqlite_dl.c,
 * src/util/openssl_dl.c), and libmicrohttpd only when brig serve starts
 * (src/serve/mhd_dl.c). This program links none of them, so what
 * /proc/self/maps shows is libbrig's doing. The tests run in order: each one
 * relies on what the earlier ones loaded. */
#include "testutil.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/store.h"
#include "http/http.h"
#include "serve/mhd_dl.h"
#include "tar/tar.h"
#include "util/dl.h"
#include "util/util.h"

/* What loading libarchive (libxml2, ICU) or libpq (Kerberos, LDAP, GnuTLS)
 * maps; none of it may be there before the first tar or PostgreSQL store.
 * Nor SQLite before the first SQLite store, libcrypto before the first digest
 * of a stream, libssl before the first TLS connection. */
static const char *const archive_libs[] = {"/libarchive.so", "/libxml2.so", "/libicuuc.so"};
static const char *const pq_libs[] = {"/libpq.so", "/libkrb5.so", "/libldap", "/libgnutls.so"};
static const char *const sqlite_libs[] = {"/libsqlite3.so"};
static const char *const crypto_libs[] = {"/libcrypto.so"};
static const char *const ssl_libs[] = {"/libssl.so"};
static const char *const mhd_libs[] = {"/libmicrohttpd.so"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static char tmp[] = "/tmp/brig-lazy-XXXXXX";

/* Whether a file whose path contains needle is mapped into this process. */
static bool mapped(const char *needle)
{
	FILE *f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void assert_mapped(const char *const *libs, size_t n, bool want)
{
	for (size_t i = 0; i < n; i++)
		if (mapped(libs[i]) != want)
			fail_msg("%s is %smapped", libs[i], want ? "not " : "");
}

/* ---- nothing at start ---- */

static void test_nothing_loaded_at_start(void **state)
{
	assert_mapped(archive_libs, N(archive_libs), false);
	assert_mapped(pq_libs, N(pq_libs), false);
	assert_mapped(sqlite_libs, N(sqlite_libs), false);
	assert_mapped(crypto_libs, N(crypto_libs), false);
	assert_mapped(ssl_libs, N(ssl_libs), false);
	assert_mapped(mhd_libs, N(mhd_libs), false);
	/* The check itself works: something this program does link is seen. */
	assert_true(mapped("/libjansson.so"));
}

/* ---- a SQLite store loads SQLite, and only that ---- */

static void test_sqlite_store_loads_sqlite(void **state)
{
	cleanup_free char *url = NULL;
	assert_true(asprintf(&url, "sqlite://%s/brig.db", tmp) > 0);
	brig_store *s = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	int v = 0;
	ASSERT_OK(brig_store_schema_version(s, &v, &err), err);
	assert_true(v > 0);
	brig_store_close(s);
	assert_mapped(sqlite_libs, N(sqlite_libs), true);
	assert_mapped(archive_libs, N(archive_libs), false);
	assert_mapped(pq_libs, N(pq_libs), false);
	assert_mapped(crypto_libs, N(crypto_libs), false);
	assert_mapped(ssl_libs, N(ssl_libs), false);
}

/* ---- a tar round trip through every constructor ---- */

static void read_all(brig_tar_reader rd, void *payload, char **out, size_t *len)
{
	size_t alloc = 1 << 16, n = 0;
	char *buf = malloc(alloc);
	assert_non_null(buf);
	brig_error *err = NULL;
	for (;;) {
		if (alloc - n < 4096) {
			alloc *= 2;
			buf = realloc(buf, alloc);
			assert_non_null(buf);
		}
		ssize_t r = rd(buf + n, alloc - n, payload, &err);
		if (r < 0)
			fail_msg("reading: %s", brig_error_message(err));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		fail_msg("open %s: %s", path, strerror(errno));
	char *buf = calloc(1, 256);
	assert_non_null(buf);
	size_t n = fread(buf, 1, 255, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* builder → copier (zstd) → blob → restore → extractor, all through the
 * public functions: each constructor must have opened libarchive, and the
 * copier libcrypto for the digest of what it writes. */
static void test_tar_round_trip_loads_libarchive_and_libcrypto(void **state)
{
	brig_error *err = NULL;

	brig_tar_builder *b = NULL;
	ASSERT_OK(brig_tar_builder_new(&b, NULL, &err), err);
	ASSERT_OK(brig_tar_builder_add_dir(b, "d", 0755, &err), err);
	ASSERT_OK(brig_tar_builder_add_file(b, "d/hello.txt", "hello, lazy\n", 12, 0644, &err), err);
	cleanup_free char *tar = NULL;
	size_t tar_len = 0;
	read_all(brig_tar_builder_reader, b, &tar, &tar_len);
	brig_tar_builder_free(b);
	assert_true(tar_len >= 1024);
	assert_mapped(archive_libs, N(archive_libs), true);
	assert_mapped(crypto_libs, N(crypto_libs), false); /* a builder hashes nothing */

	cleanup_free char *blob = NULL;
	assert_true(asprintf(&blob, "%s/blob.tar.zst", tmp) > 0);
	int fd = open(blob, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	brig_tar_copy_opts co = {.version = BRIG_TAR_COPY_OPTS_VERSION, .compression = BRIG_TAR_COMPRESS_ZSTD};
	brig_tar_copy *c = NULL;
	ASSERT_OK(brig_tar_copy_new(&c, &co, brig_tar_write_fd, &fd, &err), err);
	ASSERT_OK(brig_tar_copy_feed(c, tar, tar_len, &err), err);
	brig_tar_copy_result res;
	ASSERT_OK(brig_tar_copy_finish(c, &res, &err), err);
	brig_tar_copy_free(c);
	close(fd);
	assert_int_equal(res.stats.files, 1);
	assert_mapped(crypto_libs, N(crypto_libs), true);

	brig_tar_restore *r = NULL;
	ASSERT_OK(brig_tar_restore_open(&r, AT_FDCWD, blob, res.sha256, &err), err);
	cleanup_free char *plain = NULL;
	size_t plain_len = 0;
	read_all(brig_tar_restore_reader, r, &plain, &plain_len);
	brig_tar_restore_free(r);
	assert_int_equal(plain_len, res.tar_bytes);

	cleanup_free char *dest = NULL;
	assert_true(asprintf(&dest, "%s/out", tmp) > 0);
	assert_int_equal(mkdir(dest, 0700), 0);
	brig_tar_extract *x = NULL;
	ASSERT_OK(brig_tar_extract_new(&x, AT_FDCWD, dest, NULL, &err), err);
	ASSERT_OK(brig_tar_extract_feed(x, plain, plain_len, &err), err);
	ASSERT_OK(brig_tar_extract_finish(x, &err), err);
	brig_tar_extract_free(x);

	cleanup_free char *path = NULL;
	assert_true(asprintf(&path, "%s/d/hello.txt", dest) > 0);
	cleanup_free char *got = slurp(path);
	assert_string_equal(got, "hello, lazy\n");
	/* A tar never needs libpq, nor TLS. */
	assert_mapped(pq_libs, N(pq_libs), false);
	assert_mapped(ssl_libs, N(ssl_libs), false);
}

/* ---- a TLS connection ---- */

/* A TLS endpoint whose peer accepts the TCP connection (the listen backlog
 * does) and never answers the ClientHello: the handshake goes through the
 * libssl and libcrypto tables (context, SSL object, SSL_connect, the error
 * queue) and ends at its deadline. */
static void test_tls_connect_loads_libssl(void **state)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(l, 4), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	cleanup_free char *host = NULL;
	assert_true(asprintf(&host, "tcp://127.0.0.1:%d", ntohs(sa.sin_port)) > 0);

	/* A cert path without files: TLS, no CA to verify with, no client key. */
	brig_http_endpoint ep;
	brig_error *err = NULL;
	ASSERT_OK(brig_http_endpoint_parse(&ep, host, false, tmp, &err), err);
	assert_true(ep.tls);
	assert_mapped(ssl_libs, N(ssl_libs), false);
	brig_http_conn *c = NULL;
	int rc = brig_http_connect(&c, &ep, brig_now_ms() + 300, &err);
	brig_http_endpoint_clear(&ep);
	close(l);
	assert_null(c);
	assert_int_equal(rc, BRIG_ENOTSENT);
	const char *msg = brig_error_message(err);
	if (!strstr(msg, "TLS handshake with 127.0.0.1") || !strstr(msg, "timed out"))
		fail_msg("not the handshake's end: %s", msg);
	brig_error_free(err);
	assert_mapped(ssl_libs, N(ssl_libs), true);
	assert_mapped(crypto_libs, N(crypto_libs), true);
	assert_mapped(pq_libs, N(pq_libs), false);
}

/* ---- a PostgreSQL store ---- */

/* Drops a schema with the libpq that libbrig opened (this program does not
 * link it). */
static void pg_drop_schema(const char *base, const char *schema)
{
	void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(h);
	void *(*connectdb)(const char *) = (void *(*)(const char *))dlsym(h, "PQconnectdb");
	void *(*exec)(void *, const char *) = (void *(*)(void *, const char *))dlsym(h, "PQexec");
	void (*clear)(void *) = (void (*)(void *))dlsym(h, "PQclear");
	void (*finish)(void *) = (void (*)(void *))dlsym(h, "PQfinish");
	assert_true(connectdb && exec && clear && finish);
	void *conn = connectdb(base);
	cleanup_free char *sql = NULL;
	assert_true(asprintf(&sql, "SET client_min_messages TO warning; DROP SCHEMA IF EXISTS %s CASCADE", schema) > 0);
	clear(exec(conn, sql));
	finish(conn);
	dlclose(h);
}

static void test_pg_store_loads_libpq(void **state)
{
	/* A refused connection: libpq was opened and ran (the reason is its
	 * text), with or without a server. */
	brig_store *s = NULL;
	brig_error *err = NULL;
	assert_int_equal(brig_store_open(&s, "postgresql://brig@127.0.0.1:1/none?connect_timeout=5", &err),
			 BRIG_ESTORE);
	assert_null(s);
	const char *msg = brig_error_message(err);
	if (!strstr(msg, "127.0.0.1") || !strstr(msg, "refused"))
		fail_msg("not libpq's reason: %s", msg);
	brig_error_free(err);
	err = NULL;
	assert_mapped(pq_libs, N(pq_libs), true);

	const char *base = getenv("BRIG_TEST_PG");
	if (!base || !*base) {
		print_message("[  SKIP    ] lazy_load/postgresql: set BRIG_TEST_PG to open a real store\n");
		return;
	}
	cleanup_free char *schema = NULL, *url = NULL;
	assert_true(asprintf(&schema, "brig_t_lazy_%d", (int)getpid()) > 0);
	assert_true(asprintf(&url, "%s%sschema=%s", base, strchr(base, '?') ? "&" : "?", schema) > 0);
	int rc = brig_store_open(&s, url, &err);
	int v = 0;
	if (rc == 0)
		rc = brig_store_schema_version(s, &v, &err);
	cleanup_free char *why = rc ? strdup(brig_error_message(err)) : NULL;
	brig_error_free(err);
	brig_store_close(s);
	pg_drop_schema(base, schema);
	if (rc)
		fail_msg("PostgreSQL store %s: %s", schema, why);
	assert_true(v > 0);
}

/* ---- what a missing library or function says ---- */

static int filled;
static void fill_count(void *const *fns)
{
	filled++;
}

static void expect_load_error(brig__dl *d, const char *want1, const char *want2)
{
	/* Twice: the second call reports the first one's result. */
	for (int i = 0; i < 2; i++) {
		brig_error *err = NULL;
		assert_int_equal(brig__dl_load(d, BRIG_EIO, &err), BRIG_EIO);
		const char *msg = brig_error_message(err);
		if (!strstr(msg, want1) || !strstr(msg, want2))
			fail_msg("unclear: %s", msg);
		brig_error_free(err);
	}
	assert_int_equal(filled, 0);
}

/* ---- brig serve loads libmicrohttpd ---- */

static void test_serve_loads_microhttpd(void **state)
{
	assert_mapped(mhd_libs, N(mhd_libs), false);
	brig_error *err = NULL;
	ASSERT_OK(brig__mhd_load(&err), err);
	assert_mapped(mhd_libs, N(mhd_libs), true);
	assert_int_equal(MHD_is_feature_supported(MHD_FEATURE_TLS), MHD_YES); /* Debian builds it with GnuTLS */
}

static void test_load_errors_name_library_and_package(void **state)
{
	static const char *const names[] = {"strlen", "brig_no_such_function"};
	static brig__dl missing_lib = BRIG__DL_INIT("libbrig-no-such.so.7", "libbrig-no-such7", names, fill_count);
	expect_load_error(&missing_lib, "cannot load libbrig-no-such.so.7 (install the libbrig-no-such7 package)",
			  "libbrig-no-such.so.7");
	static brig__dl missing_fn = BRIG__DL_INIT("libc.so.6", "libc6", names, fill_count);
	expect_load_error(&missing_fn, "libc.so.6 has no brig_no_such_function", "install the libc6 package");

	static const char *const found[] = {"strlen"};
	static brig__dl ok = BRIG__DL_INIT("libc.so.6", "libc6", found, fill_count);
	brig_error *err = NULL;
	for (int i = 0; i < 2; i++)
		ASSERT_OK(brig__dl_load(&ok, BRIG_EIO, &err), err);
	assert_int_equal(filled, 1); /* once */
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	return nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_loaded_at_start),
		cmocka_unit_test(test_sqlite_store_loads_sqlite),
		cmocka_unit_test(test_tar_round_trip_loads_libarchive_and_libcrypto),
		cmocka_unit_test(test_tls_connect_loads_libssl),
		cmocka_unit_test(test_pg_store_loads_libpq),
		cmocka_unit_test(test_serve_loads_microhttpd),
		cmocka_unit_test(test_load_errors_name_library_and_package),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
