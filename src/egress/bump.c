/* bump.c — the egress proxy's TLS termination for hosts that have a
 * sandbox's secrets (issue 19.3): TLS with the sandbox under a leaf of
 * brig's authority, TLS upstream verifying the real certificate, and the
 * request stream through rewrite.c (placeholders → values). Every other
 * host stays spliced (proxy.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "brig/egress.h"
#include "brig/spec.h"
#include "egress/ca.h"
#include "egress/egress_internal.h"
#include "util/util.h"

/* Zeroes what b holds (it may hold a secret); b may hold nothing yet. */
static void wipe(brig_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->len);
}

#define HANDSHAKE_TIMEOUT_S 30
#define IDLE_TIMEOUT_S (5 * 60)

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static brig_egress_ca *ca;
static SSL_CTX *up_ctx;

static char preload_failed[400]; /* why the preload could not: said at each use */

/* The authority and the upstream context, once per proxy. */
static int bump_init(char *reason, size_t reason_len)
{
	pthread_mutex_lock(&init_lock);
	int rc = 0;
	if (preload_failed[0]) {
		snprintf(reason, reason_len, "%s", preload_failed);
		rc = -1;
	} else if (!ca) {
		brig_error *err = NULL;
		if (brig_egress__ca_load(&ca, &err) != 0) {
			snprintf(reason, reason_len, "%s", brig_error_message(err));
			brig_error_free(err);
			rc = -1;
		}
	}
	if (rc == 0 && !up_ctx) {
		SSL_CTX *c = SSL_CTX_new(TLS_client_method());
		/* Test-only: upstreams the tests start carry a test authority's
		 * certificate; the proxy's log warns when this is set. */
		const char *test_ca = getenv("BRIG_EGRESS_UPSTREAM_CA");
		bool ok = c && SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) == 1 &&
			  (test_ca && *test_ca ? SSL_CTX_load_verify_locations(c, test_ca, NULL) == 1
					       : SSL_CTX_set_default_verify_paths(c) == 1);
		if (!ok) {
			if (c)
				SSL_CTX_free(c);
			snprintf(reason, reason_len, "cannot set up TLS to upstreams (trust store)");
			rc = -1;
		} else {
			SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
			up_ctx = c;
		}
	}
	pthread_mutex_unlock(&init_lock);
	return rc;
}

void brig_egress__bump_preload(void)
{
	char why[sizeof preload_failed];
	if (bump_init(why, sizeof why) != 0) {
		pthread_mutex_lock(&init_lock);
		snprintf(preload_failed, sizeof preload_failed, "%s", why);
		pthread_mutex_unlock(&init_lock);
	}
}

static void set_timeouts(int fd, int s)
{
	struct timeval tv = {.tv_sec = s};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

static bool write_all(SSL *s, const char *p, size_t n)
{
	while (n > 0) {
		int w = SSL_write(s, p, n > (1 << 30) ? 1 << 30 : (int)n);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* True when a read that returned n should simply be tried again later. */
static bool retry(SSL *s, int n)
{
	int e = SSL_get_error(s, n);
	return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

int brig_egress__bump(int cfd, int ufd, const char *host, int port, const brig_egress_secret *sec, size_t nsec,
		      uint64_t *up, uint64_t *down, unsigned *replaced, bool *denied, char *reason, size_t reason_len)
{
	*denied = false;
	*replaced = 0;
	if (bump_init(reason, reason_len) != 0)
		return -1;
	brig_error *err = NULL;
	SSL_CTX *leaf = brig_egress__leaf_ctx(ca, host, &err);
	if (!leaf) {
		snprintf(reason, reason_len, "%s", brig_error_message(err));
		brig_error_free(err);
		return -1;
	}
	set_blocking(cfd);
	set_blocking(ufd);
	set_timeouts(cfd, HANDSHAKE_TIMEOUT_S);
	set_timeouts(ufd, HANDSHAKE_TIMEOUT_S);
	SSL *c = SSL_new(leaf);
	SSL_CTX_free(leaf); /* c holds its own reference */
	SSL *u = SSL_new(up_ctx);
	int rc = -1;
	const char *from[BRIG_SPEC_SECRETS_MAX], *to[BRIG_SPEC_SECRETS_MAX], *all[BRIG_SPEC_SECRETS_MAX];
	size_t pairs = 0, nall = 0;
	brig_egress_rw *rw = NULL;
	brig_egress_scan scan = {0};
	char *buf = NULL;
	/* A read that finds only TLS's own records (TLS 1.3 session tickets,
	 * key updates) must come back, not wait for data: the peer may be
	 * waiting for what the other side sent meanwhile. */
	if (c) {
		SSL_clear_mode(c, SSL_MODE_AUTO_RETRY);
		SSL_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
	}
	if (u) {
		SSL_clear_mode(u, SSL_MODE_AUTO_RETRY);
		SSL_set_mode(u, SSL_MODE_RELEASE_BUFFERS);
	}
	if (!c || !u || SSL_set_fd(c, cfd) != 1 || SSL_set_fd(u, ufd) != 1) {
		snprintf(reason, reason_len, "cannot set up TLS");
		goto out;
	}
	if (SSL_accept(c) != 1) {
		*denied = true;
		snprintf(reason, reason_len, "TLS with the sandbox failed (does it trust brig's authority? %s)",
			 BRIG_EGRESS_CA_BUNDLE_PATH);
		goto out;
	}
	const char *sni = SSL_get_servername(c, TLSEXT_NAMETYPE_host_name);
	if (!sni || strcasecmp(sni, host) != 0) {
		*denied = true;
		snprintf(reason, reason_len, "TLS server name differs from the CONNECT host");
		goto out;
	}
	SSL_set_tlsext_host_name(u, host);
	X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(u), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (X509_VERIFY_PARAM_set1_host(SSL_get0_param(u), host, 0) != 1 || SSL_connect(u) != 1) {
		long v = SSL_get_verify_result(u);
		snprintf(reason, reason_len, "TLS to %s failed%s", host,
			 v != X509_V_OK ? ": its certificate is not trusted or not for this name" : "");
		goto out;
	}
	ERR_clear_error();
	for (size_t i = 0; i < nsec && pairs < BRIG_SPEC_SECRETS_MAX; i++)
		if (brig_egress__secret_covers(&sec[i], host)) {
			from[pairs] = sec[i].placeholder;
			to[pairs++] = sec[i].value;
		}
	/* every value the sandbox has a placeholder for, whatever its host */
	for (size_t i = 0; i < nsec && nall < BRIG_SPEC_SECRETS_MAX; i++)
		all[nall++] = sec[i].value;
	brig_egress__scan_init(&scan, all, nall);
	rw = xmalloc(sizeof *rw);
	brig_egress__rw_init(rw, host, port, from, to, pairs);
	set_timeouts(cfd, IDLE_TIMEOUT_S);
	set_timeouts(ufd, IDLE_TIMEOUT_S);
	enum { BUF = 64 * 1024 };
	buf = xmalloc(BUF);
	brig_buf out, down_out;
	brig_egress__buf_whole(&out, BUF + BRIG_EGRESS_OUT_HEAD_MAX);
	brig_egress__buf_whole(&down_out, BUF + BRIG_EGRESS_SECRET_MAX);
	bool c_open = true;
	rc = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = c_open ? cfd : -1, .events = POLLIN}, {.fd = ufd, .events = POLLIN}};
		bool pend = (c_open && SSL_pending(c) > 0) || SSL_pending(u) > 0;
		int r = poll(p, 2, pend ? 0 : IDLE_TIMEOUT_S * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r == 0 && !pend))
			break;
		if (c_open && (SSL_pending(c) > 0 || (p[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
			int n = SSL_read(c, buf, BUF);
			if (n <= 0 && retry(c, n))
				continue;
			if (n <= 0) {
				c_open = false;
				SSL_shutdown(u);
			} else {
				const char *why = NULL;
				brig_buf_reset(&out);
				if (brig_egress__rw_feed(rw, buf, (size_t)n, &out, &why) != 0) {
					*denied = true;
					rc = -1;
					snprintf(reason, reason_len, "%s", why);
					wipe(&out);
					break;
				}
				bool ok = write_all(u, out.data, out.len);
				*up += out.len;
				wipe(&out);
				if (!ok)
					break;
			}
		}
		if (SSL_pending(u) > 0 || (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			int n = SSL_read(u, buf, BUF);
			if (n <= 0 && retry(u, n))
				continue;
			brig_buf_reset(&down_out);
			if (n <= 0) {
				if (brig_egress__scan_flush(&scan, &down_out) == 0 && down_out.len &&
				    write_all(c, down_out.data, down_out.len))
					*down += down_out.len;
				wipe(&down_out);
				break;
			}
			if (brig_egress__scan_feed(&scan, buf, (size_t)n, &down_out) != 0) {
				/* the upstream sent a value back (an echo of the request) */
				*denied = true;
				rc = -1;
				snprintf(reason, reason_len, "secret reflected by the upstream; the tunnel was cut");
				wipe(&down_out);
				break;
			}
			bool ok = write_all(c, down_out.data, down_out.len);
			*down += down_out.len;
			wipe(&down_out);
			if (!ok)
				break;
		}
	}
	if (rc == 0)
		SSL_shutdown(c);
	*replaced = rw->replaced;
	explicit_bzero(rw, sizeof *rw);
	brig_buf_free(&out);
	brig_buf_free(&down_out);
	explicit_bzero(buf, BUF);
out:
	brig_egress__scan_free(&scan);
	free(rw);
	free(buf);
	if (c)
		SSL_free(c);
	if (u)
		SSL_free(u);
	ERR_clear_error();
	return rc;
}
