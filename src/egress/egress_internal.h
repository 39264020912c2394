/* egress_internal.h — what the egress proxy's files share: the parsers of
 * a client's request head and TLS ClientHello (untrusted bytes: bounded,
 * fuzzed by tests/fuzz/fuzz_egress.c), host-name checks and rules files. */
#ifndef BRIG_EGRESS_INTERNAL_H
#define BRIG_EGRESS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/engine.h"
#include "brig/error.h"

/* Longest request head the proxy reads from a sandbox. */
#define BRIG_EGRESS_HEAD_MAX (16 * 1024)
/* Most ClientHello bytes (records included) read before deciding. */
#define BRIG_EGRESS_HELLO_MAX (16 * 1024 + 5 * 4)

/* Lowercases s[0..n) into out (NUL-terminated) when it is a host name
 * (letters, digits, '-', '.'; labels 1..63; 253 at most). Returns 0 for a
 * name, 1 for an all-numeric one (an IPv4 literal), -1 otherwise. */
int brig_egress__host_check(char *out, size_t outlen, const char *s, size_t n);

/* What an egress sandbox needs once its container runs: its rules file
 * (when write_rules: a new sandbox; an adopted one keeps the rules it has)
 * and no default route (taken away inside its network namespace; needs
 * root, as the firewall does). Errors: from the rules file or inspect. */
int brig_egress__sandbox_start(brig_engine *e, const char *cid, const char *name, const char *const *rules,
			       size_t count, bool write_rules, brig_error **err);

/* Deletes NAME.rules (when the sandbox goes). 0, or -1. */
int brig_egress__rules_remove(const char *name);

typedef struct brig_egress_req {
	bool connect; /* CONNECT host:port */
	char method[16];
	char host[256];    /* lowercase target host */
	int port;          /* target port (CONNECT's, or the URI's, default 80) */
	size_t target_off; /* plain HTTP: the origin-form path in the head */
	size_t target_len;
	size_t headers_off;     /* first header line */
	size_t head_len;        /* through the blank line */
	int64_t content_length; /* -1 when absent */
	bool chunked;           /* Transfer-Encoding present */
} brig_egress_req;

/* Parses the head of a proxy request in buf[0..len). Returns 0 when the
 * head is complete and acceptable (req filled), 1 when more bytes are
 * needed, -1 when it is refused, with a short reason (static) in *why:
 * not HTTP/1.x, a method or target brig does not forward, a Host header
 * missing or different from the URI's host, more than one Host or
 * Content-Length header, userinfo or an IP literal. */
int brig_egress__parse_head(brig_egress_req *req, const char *buf, size_t len, const char **why);

/* Finds the server name in a TLS ClientHello in buf[0..len) (records of
 * type handshake, reassembled). Returns 0 with the lowercase name in out,
 * 1 when more bytes are needed, -1 when the bytes are not a ClientHello or
 * are malformed, -2 when it carries no server name, -3 when it asks for
 * encrypted client hello (whose inner name the proxy cannot check). */
int brig_egress__sni(char *out, size_t outlen, const unsigned char *buf, size_t len);

/* True for an address the proxy never connects to, whatever name it was
 * resolved from: this host's own, loopback, link-local, unspecified,
 * multicast, private (RFC 1918, 100.64/10, 198.18/15, fc00::/7, fec0::/10),
 * the egress network, and IPv4 inside IPv6 (mapped, compatible, NAT64). */
struct sockaddr;
bool brig_egress__forbidden(const struct sockaddr *sa);

/* Connections one sandbox address may hold at the proxy at once (the
 * proxy's whole cap is shared by all sandboxes). */
#define BRIG_EGRESS_PEER_MAX 32
/* Addresses counted at once; the proxy's cap on connections (256) keeps
 * the distinct addresses below it. */
#define BRIG_EGRESS_PEER_SLOTS 256

/* Connections per peer IPv4 address (network order). Zero-initialize and
 * set lock to PTHREAD_MUTEX_INITIALIZER. */
typedef struct brig_egress_peers {
	pthread_mutex_t lock;
	struct {
		uint32_t addr;
		int count; /* 0: a free slot */
	} slot[BRIG_EGRESS_PEER_SLOTS];
} brig_egress_peers;

/* Counts one more connection of addr. False (nothing counted) when addr
 * already holds cap, or when every slot is another address's. */
bool brig_egress__peer_take(brig_egress_peers *p, uint32_t addr, int cap);
/* Counts one connection of addr less (one that peer_take counted). */
void brig_egress__peer_drop(brig_egress_peers *p, uint32_t addr);

/* Fills out[0..max) (NULL-terminated; max >= 1) with the entries of env
 * the egress proxy is started with (pointers into env). Returns how many. */
size_t brig_egress__proxy_env(char **out, size_t max, char *const *env);

#endif
