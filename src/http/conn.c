/* conn.c — one client connection (unix socket or TCP, optionally TLS): the
 * request writer, the response reader and the hijacked stream after 101. */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "http/http.h"
#include "util/openssl_dl.h" /* libssl and libcrypto, dlopen-ed: calls go through brig__ssl, brig__crypto */

struct brig_http_conn {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	bool broken;     /* an I/O error or an unfinished exchange happened */
	bool keep_alive; /* the last response allows reuse */
	bool upgraded;   /* the connection is a raw stream now */
	bool write_closed;
};

/* ---- endpoint ---- */

void brig_http_endpoint_clear(brig_http_endpoint *ep)
{
	free(ep->path);
	free(ep->host);
	free(ep->ca_file);
	free(ep->cert_file);
	free(ep->key_file);
	memset(ep, 0, sizeof *ep);
}

int brig_http_endpoint_parse(brig_http_endpoint *ep, const char *host, bool tls_verify, const char *cert_path,
			     brig_error **err)
{
	memset(ep, 0, sizeof *ep);
	if (!host || !*host)
		host = "unix:///var/run/docker.sock";
	if (strncmp(host, "unix://", 7) == 0 || host[0] == '/') {
		const char *path = host[0] == '/' ? host : host + 7;
		if (!*path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "DOCKER_HOST: unix socket path is empty or longer than 107 bytes");
		ep->is_unix = true;
		ep->path = xstrdup(path);
		return 0;
	}
	if (strncmp(host, "tcp://", 6) != 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "DOCKER_HOST: '%.64s' is not supported; use unix:///path or tcp://host:port",
				       host);
	const char *hp = host + 6;
	const char *end = hp + strcspn(hp, "/");
	const char *colon = NULL;
	if (*hp == '[') { /* [v6]:port */
		const char *rb = memchr(hp, ']', (size_t)(end - hp));
		if (!rb)
			return brig__error_set(err, BRIG_EINVAL, 0, "DOCKER_HOST: unterminated IPv6 address");
		ep->host = xstrndup(hp + 1, (size_t)(rb - hp - 1));
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(hp, ':', (size_t)(end - hp));
		ep->host = xstrndup(hp, (size_t)((colon ? colon : end) - hp));
	}
	ep->tls = tls_verify || (cert_path && *cert_path);
	ep->tls_verify = tls_verify;
	ep->port = ep->tls ? 2376 : 2375;
	if (colon) {
		char *e = NULL;
		long port = strtol(colon + 1, &e, 10);
		if (e != end || port <= 0 || port > 65535) {
			brig_http_endpoint_clear(ep);
			return brig__error_set(err, BRIG_EINVAL, 0, "DOCKER_HOST: port must be 1-65535");
		}
		ep->port = (int)port;
	}
	if (!*ep->host) {
		brig_http_endpoint_clear(ep);
		return brig__error_set(err, BRIG_EINVAL, 0, "DOCKER_HOST: host is empty");
	}
	if (ep->tls) {
		const char *dir = cert_path && *cert_path ? cert_path : NULL;
		cleanup_free char *def = NULL;
		if (!dir) {
			const char *home = getenv("HOME");
			def = xasprintf("%s/.docker", home ? home : "");
			dir = def;
		}
		ep->ca_file = xasprintf("%s/ca.pem", dir);
		ep->cert_file = xasprintf("%s/cert.pem", dir);
		ep->key_file = xasprintf("%s/key.pem", dir);
	}
	return 0;
}

/* ---- connection set-up ---- */

static void ignore_sigpipe(void)
{
	/* Writes use MSG_NOSIGNAL; OpenSSL writes through write(2) on the fd,
	 * so SIGPIPE is also ignored process-wide once, the way curl does. */
	static int done;
	if (!__atomic_exchange_n(&done, 1, __ATOMIC_SEQ_CST)) {
		struct sigaction sa;
		if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
			sa.sa_handler = SIG_IGN;
			sigaction(SIGPIPE, &sa, NULL);
		}
	}
}

static int wait_fd(int fd, short events, int64_t deadline_ms)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	for (;;) {
		int r = poll(&pfd, 1, brig_remaining_ms(deadline_ms));
		if (r > 0)
			return 0;
		if (r == 0)
			return BRIG_ETIMEDOUT;
		if (errno != EINTR)
			return BRIG_EIO;
	}
}

static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline_ms)
{
	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EAGAIN)
		return -errno;
	int r = wait_fd(fd, POLLOUT, deadline_ms);
	if (r == BRIG_ETIMEDOUT)
		return -ETIMEDOUT;
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	return soerr ? -soerr : 0;
}

static int tls_setup(brig_http_conn *c, const brig_http_endpoint *ep, int64_t deadline_ms, brig_error **err)
{
	/* OpenSSL is opened here, by the first TLS connection. Every other call
	 * of it in this file goes through c->ssl or c->ctx, set only below. */
	int rc = brig__ssl_load(err);
	if (rc)
		return rc;
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ctx)
		return brig__error_set(err, BRIG_ETLS, 0, "TLS: cannot create a context");
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	if (ep->tls_verify) {
		if (SSL_CTX_load_verify_locations(c->ctx, ep->ca_file, NULL) != 1)
			return brig__error_set(err, BRIG_ETLS, 0,
					       "TLS: cannot load CA %s (DOCKER_CERT_PATH must hold ca.pem)",
					       ep->ca_file);
		SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	}
	if (access(ep->cert_file, R_OK) == 0) {
		if (SSL_CTX_use_certificate_chain_file(c->ctx, ep->cert_file) != 1 ||
		    SSL_CTX_use_PrivateKey_file(c->ctx, ep->key_file, SSL_FILETYPE_PEM) != 1)
			return brig__error_set(err, BRIG_ETLS, 0, "TLS: cannot load client certificate %s / key %s",
					       ep->cert_file, ep->key_file);
	}
	c->ssl = SSL_new(c->ctx);
	SSL_set_fd(c->ssl, c->fd);
	unsigned char addr[16];
	bool is_ip = inet_pton(AF_INET, ep->host, addr) == 1 || inet_pton(AF_INET6, ep->host, addr) == 1;
	if (!is_ip) /* SNI carries names only (RFC 6066) */
		SSL_set_tlsext_host_name(c->ssl, ep->host);
	if (ep->tls_verify) {
		X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
		X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		/* An address is checked against the certificate's IP SANs, a name
		 * against its DNS names: set1_host would never match an IP SAN. */
		if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(param, ep->host) : !X509_VERIFY_PARAM_set1_host(param, ep->host, 0))
			return brig__error_set(err, BRIG_ETLS, 0, "TLS: cannot set the expected peer name %s", ep->host);
	}
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		int e = SSL_get_error(c->ssl, r);
		short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev || wait_fd(c->fd, ev, deadline_ms) != 0) {
			char buf[256];
			ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
			return brig__error_set(err, BRIG_ENOTSENT, 0, "TLS handshake with %s:%d failed: %s", ep->host,
					       ep->port, ev ? "timed out" : buf);
		}
	}
}

int brig_http_connect(brig_http_conn **out, const brig_http_endpoint *ep, int64_t deadline_ms, brig_error **err)
{
	ignore_sigpipe();
	brig_http_conn *c = xcalloc(1, sizeof *c);
	c->fd = -1;
	int rc = 0;
	if (ep->is_unix) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		strncpy(sa.sun_path, ep->path, sizeof sa.sun_path - 1);
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (c->fd < 0) {
			rc = brig__error_set(err, BRIG_ENOTSENT, errno, "socket: %s", strerror(errno));
			goto out;
		}
		int r = connect_fd(c->fd, (struct sockaddr *)&sa, sizeof sa, deadline_ms);
		if (r < 0) {
			rc = brig__error_set(err, BRIG_ENOTSENT, -r,
					     "cannot connect to the Docker daemon at unix://%s: %s (is dockerd "
					     "running? start it with `dockerd &` as root, or set DOCKER_HOST)",
					     ep->path, strerror(-r));
			goto out;
		}
	} else {
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
		char port[16];
		snprintf(port, sizeof port, "%d", ep->port);
		int g = getaddrinfo(ep->host, port, &hints, &res);
		if (g != 0) {
			rc = brig__error_set(err, BRIG_ENOTSENT, 0, "cannot resolve Docker host %s: %s", ep->host,
					     gai_strerror(g));
			goto out;
		}
		int last = ECONNREFUSED;
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
			if (c->fd < 0) {
				last = errno;
				continue;
			}
			int r = connect_fd(c->fd, ai->ai_addr, ai->ai_addrlen, deadline_ms);
			if (r == 0)
				break;
			last = -r;
			close(c->fd);
			c->fd = -1;
		}
		freeaddrinfo(res);
		if (c->fd < 0) {
			rc = brig__error_set(err, BRIG_ENOTSENT, last,
					     "cannot connect to the Docker daemon at tcp://%s:%d: %s", ep->host,
					     ep->port, strerror(last));
			goto out;
		}
		int one = 1;
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (ep->tls && (rc = tls_setup(c, ep, deadline_ms, err)) != 0)
			goto out;
	}
	*out = c;
	return 0;
out:
	brig_http_conn_free(c);
	return rc;
}

void brig_http_conn_free(brig_http_conn *c)
{
	if (!c)
		return;
	if (c->ssl) {
		if (!c->broken)
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	if (c->ctx)
		SSL_CTX_free(c->ctx);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

int brig_http_conn_fd(const brig_http_conn *c) { return c->fd; }

bool brig_http_conn_reusable(brig_http_conn *c)
{
	if (c->broken || !c->keep_alive || c->upgraded)
		return false;
	if (c->ssl && SSL_pending(c->ssl) > 0)
		return false;
	/* A readable idle socket means the peer closed it (or sent junk). */
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	if (poll(&pfd, 1, 0) != 0)
		return false;
	return true;
}

/* ---- raw I/O ---- */

/* Returns bytes read, 0 at EOF, BRIG_ETIMEDOUT, or BRIG_EIO (errno kept). */
static ssize_t conn_read(brig_http_conn *c, char *buf, size_t n, int64_t deadline_ms)
{
	for (;;) {
		if (c->ssl) {
			ERR_clear_error();
			int r = SSL_read(c->ssl, buf, n > 0x40000000 ? 0x40000000 : (int)n);
			if (r > 0)
				return r;
			int e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_ZERO_RETURN)
				return 0;
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				int w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms);
				if (w)
					return w;
				continue;
			}
			if (e == SSL_ERROR_SYSCALL && r == 0)
				return 0; /* unclean EOF */
			errno = EPROTO;
			return BRIG_EIO;
		}
		ssize_t r = recv(c->fd, buf, n, 0);
		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = wait_fd(c->fd, POLLIN, deadline_ms);
			if (w)
				return w;
			continue;
		}
		return BRIG_EIO;
	}
}

/* Writes all; *written counts bytes the kernel accepted. */
static int conn_write(brig_http_conn *c, const char *buf, size_t n, int64_t deadline_ms, size_t *written)
{
	while (n) {
		ssize_t r;
		if (c->ssl) {
			ERR_clear_error();
			int w = SSL_write(c->ssl, buf, n > 0x40000000 ? 0x40000000 : (int)n);
			if (w <= 0) {
				int e = SSL_get_error(c->ssl, w);
				if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
					int x = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
							deadline_ms);
					if (x)
						return x;
					continue;
				}
				errno = EPIPE;
				return BRIG_EIO;
			}
			r = w;
		} else {
			r = send(c->fd, buf, n, MSG_NOSIGNAL);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EAGAIN || errno == EWOULDBLOCK) {
					int x = wait_fd(c->fd, POLLOUT, deadline_ms);
					if (x)
						return x;
					continue;
				}
				return BRIG_EIO;
			}
		}
		buf += r;
		n -= (size_t)r;
		if (written)
			*written += (size_t)r;
	}
	return 0;
}

/* ---- request/response ---- */

static char *build_head(const brig_http_request *req, bool chunked)
{
	brig_buf b;
	brig_buf_init(&b, SIZE_MAX / 2); /* brig's own request: memory is the bound */
	brig_buf_putf(&b, "%s %s HTTP/1.1\r\nHost: docker\r\nUser-Agent: brig/" BRIG_VERSION "\r\n", req->method,
		      req->target);
	if (req->content_type)
		brig_buf_putf(&b, "Content-Type: %s\r\n", req->content_type);
	if (chunked)
		brig_buf_puts(&b, "Transfer-Encoding: chunked\r\n");
	else if (req->body || strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0)
		brig_buf_putf(&b, "Content-Length: %zu\r\n", req->body ? req->body_len : 0);
	if (req->upgrade)
		brig_buf_puts(&b, "Connection: Upgrade\r\nUpgrade: tcp\r\n");
	for (const char *const *h = req->extra_headers; h && *h; h++)
		brig_buf_putf(&b, "%s\r\n", *h);
	brig_buf_puts(&b, "\r\n");
	return brig_buf_steal(&b, NULL);
}

static int send_chunked(brig_http_conn *c, const brig_http_request *req, size_t *written, brig_error **err)
{
	enum { CHUNK = 64 * 1024 };
	char *buf = xmalloc(CHUNK + 32);
	int rc = 0;
	for (;;) {
		/* Leave room for the "%zx\r\n" prefix written in front of the data. */
		ssize_t n = req->body_reader(buf + 16, CHUNK, req->body_payload, err);
		if (n < 0) {
			rc = (int)n;
			c->broken = true;
			break;
		}
		char pre[17];
		int pl = snprintf(pre, sizeof pre, "%zx\r\n", (size_t)n);
		memcpy(buf + 16 - pl, pre, (size_t)pl);
		memcpy(buf + 16 + n, "\r\n", 2);
		rc = conn_write(c, buf + 16 - pl, (size_t)pl + (size_t)n + 2, req->deadline_ms, written);
		if (rc) {
			rc = brig__error_set(err, BRIG_EUNCERTAIN, errno,
					     "the connection to the daemon broke while sending %s %s", req->method,
					     req->target);
			break;
		}
		if (n == 0)
			break;
	}
	free(buf);
	return rc;
}

int brig_http_exchange_send(brig_http_exchange *x, brig_http_conn *c, const brig_http_request *req,
			    brig_http_response *resp, size_t body_cap, brig_http_body_cb body_cb, void *payload,
			    brig_error **err)
{
	int rc = 0;
	size_t written = 0;
	bool chunked = req->body_reader != NULL;
	cleanup_free char *head = build_head(req, chunked);
	size_t head_len = strlen(head);
	*x = (brig_http_exchange){.c = c,
				  .method = req->method,
				  .target = req->target,
				  .resp = resp,
				  .streamed = body_cb != NULL,
				  .p = brig_http_parser_new(resp, req->head, body_cap, body_cb, payload)};

	c->keep_alive = false;
	rc = conn_write(c, head, head_len, req->deadline_ms, &written);
	if (rc == 0 && req->body && req->body_len)
		rc = conn_write(c, req->body, req->body_len, req->deadline_ms, &written);
	if (rc) {
		/* The daemon acts on nothing before the header block is complete. */
		int code = written < head_len ? BRIG_ENOTSENT : BRIG_EUNCERTAIN;
		c->broken = true;
		return brig__error_set(err, code, errno, "%s %s: %s while sending the request", req->method,
				       req->target, rc == BRIG_ETIMEDOUT ? "deadline passed" : strerror(errno));
	}
	if (chunked)
		return send_chunked(c, req, &written, err);
	return 0;
}

int brig_http_exchange_read(brig_http_exchange *x, bool until_headers, int64_t deadline_ms, brig_error **err)
{
	brig_http_conn *c = x->c;
	brig_http_response *resp = x->resp;
	char buf[16384];
	while (!x->complete && !(until_headers && brig_http_parser_headers_done(x->p))) {
		ssize_t n = conn_read(c, buf, sizeof buf, deadline_ms);
		if (n == BRIG_ETIMEDOUT) {
			c->broken = true;
			if (x->streamed && resp->status >= 200 && resp->status < 300) {
				/* Answered; only the streamed body ran past the deadline.
				 * A collected body cut short is no complete answer: uncertain. */
				return brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s %s: deadline passed while reading",
						       x->method, x->target);
			}
			return brig__error_set(err, BRIG_EUNCERTAIN, ETIMEDOUT,
					       "%s %s: no complete answer from the daemon before the deadline; "
					       "the request may have taken effect",
					       x->method, x->target);
		}
		if (n < 0) {
			c->broken = true;
			return brig__error_set(err, BRIG_EUNCERTAIN, errno,
					       "%s %s: the connection broke before a complete answer (%s); the "
					       "request may have taken effect",
					       x->method, x->target, strerror(errno));
		}
		if (n == 0) {
			brig_error *perr = NULL;
			int f = brig_http_parser_finish(x->p, &perr);
			c->broken = true; /* closed: not reusable */
			if (f == 1) {
				c->upgraded = resp->upgraded;
				x->complete = true;
				return 0;
			}
			int rc = f;
			if (f == BRIG_EPROTO) {
				rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s %s: %s; the request may have taken effect",
						     x->method, x->target, brig_error_message(perr));
				brig_error_free(perr);
			} else {
				brig__error_move(err, perr);
			}
			return rc;
		}
		size_t used = 0;
		int f = brig_http_parser_feed(x->p, buf, (size_t)n, &used, err);
		if (f < 0) {
			c->broken = true;
			return f;
		}
		if (f == 1) {
			if (!resp->upgraded && used < (size_t)n)
				c->broken = true; /* bytes after the answer: never reuse */
			c->keep_alive = resp->keep_alive;
			c->upgraded = resp->upgraded;
			x->complete = true;
		}
	}
	return 0;
}

void brig_http_exchange_end(brig_http_exchange *x)
{
	brig_http_parser_free(x->p);
	x->p = NULL;
}

int brig_http_roundtrip(brig_http_conn *c, const brig_http_request *req, brig_http_response *resp,
			size_t body_cap, brig_http_body_cb body_cb, void *payload, brig_error **err)
{
	brig_http_exchange x;
	int rc = brig_http_exchange_send(&x, c, req, resp, body_cap, body_cb, payload, err);
	if (rc == 0)
		rc = brig_http_exchange_read(&x, false, req->deadline_ms, err);
	brig_http_exchange_end(&x);
	return rc;
}

/* ---- hijacked stream ---- */

ssize_t brig_http_stream_read(brig_http_conn *c, brig_http_response *resp, char *buf, size_t n, int64_t deadline_ms,
			      brig_error **err)
{
	if (resp && resp->stream_head_len) {
		size_t k = resp->stream_head_len < n ? resp->stream_head_len : n;
		memcpy(buf, resp->stream_head, k);
		memmove(resp->stream_head, resp->stream_head + k, resp->stream_head_len - k);
		resp->stream_head_len -= k;
		return (ssize_t)k;
	}
	ssize_t r = conn_read(c, buf, n, deadline_ms);
	if (r == BRIG_ETIMEDOUT)
		return brig__error_set(err, BRIG_ETIMEDOUT, 0, "deadline passed while reading the stream");
	if (r < 0) {
		c->broken = true;
		return brig__error_set(err, BRIG_EUNCERTAIN, errno, "the stream from the daemon broke: %s",
				       strerror(errno));
	}
	return r;
}

int brig_http_stream_write_some(brig_http_conn *c, const void *buf, size_t n, size_t *written, brig_error **err)
{
	*written = 0;
	for (;;) {
		if (c->ssl) {
			ERR_clear_error();
			int w = SSL_write(c->ssl, buf, n > 0x40000000 ? 0x40000000 : (int)n);
			if (w > 0) {
				*written = (size_t)w;
				return 0;
			}
			int e = SSL_get_error(c->ssl, w);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			errno = EPIPE;
		} else {
			ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL);
			if (r >= 0) {
				*written = (size_t)r;
				return 0;
			}
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
		}
		c->broken = true;
		return brig__error_set(err, BRIG_EUNCERTAIN, errno, "writing to the stream failed: %s",
				       strerror(errno));
	}
}

int brig_http_stream_close_write(brig_http_conn *c, brig_error **err)
{
	if (c->write_closed)
		return 0;
	c->write_closed = true;
	if (c->ssl) {
		/* close_notify tells the daemon stdin ended; reading goes on. */
		SSL_shutdown(c->ssl);
		return 0;
	}
	if (shutdown(c->fd, SHUT_WR) < 0)
		return brig__error_set(err, BRIG_EUNCERTAIN, errno, "half-closing the stream failed: %s",
				       strerror(errno));
	return 0;
}

bool brig_http_stream_pending(brig_http_conn *c, const brig_http_response *resp)
{
	if (resp && resp->stream_head_len)
		return true;
	return c->ssl && SSL_pending(c->ssl) > 0;
}
