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
 * (when write_rules: a new sandbox; an adopted one keeps the rules it has),
 * the store its ledger rows go to (NAME.store), and no default route (taken away inside its network namespace; needs
 * root, as the firewall does). Errors: from the rules file or inspect. */
int brig_egress__sandbox_start(brig_engine *e, const char *cid, const char *name, const char *const *rules,
			       size_t count, bool write_rules, brig_error **err);

/* The store this process uses (url; NULL: brig_store_open(NULL)'s): what
 * a sandbox it starts names as its ledger's (NAME.store), and the store of
 * a proxy it starts. Set before any thread, as brig's CLI opens its store. */
void brig_egress__use_store(const char *url);

/* Deletes NAME.rules, .secrets and .store (when the sandbox goes). 0, or -1. */
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

/* The proxy's test-only overrides ($BRIG_EGRESS_HOSTS,
 * $BRIG_EGRESS_UPSTREAM_CA) are refused unless $BRIG_EGRESS_TEST is "1".
 * Errors: BRIG_EINVAL naming the variable. */
int brig_egress__test_overrides_check(brig_error **err);

/* The proxy's monitor (privilege separation), for the fuzz target: the
 * answer to one request of a worker (never NULL), and a connection it
 * accepted from addr (network order), by the number a worker names it by. */
json_t *brig_egress__mon_answer(json_t *req);
uint64_t brig_egress__mon_accepted(uint32_t addr);
/* The worker's side of the monitor's hand-over (a SOCK_SEQPACKET socket):
 * the next socket it was given and its number. 0 with *fd the caller's; 1
 * when nothing was there or the message was not exactly one socket and
 * its 8-byte number (any descriptor it carried closed, *fd -1); -1 when
 * the monitor is gone (its end closed, or an error). */
int brig_egress__worker_take(int acc, int *fd, uint64_t *id);
/* Limits the calling process's system calls as the proxy's worker's
 * (needs no-new-privileges set; before any thread). 0, or -1 (errno). */
int brig_egress__worker_seccomp(void);

/* Fills out[0..max) (NULL-terminated; max >= 1) with the entries of env
 * the egress proxy is started with (pointers into env). Returns how many. */
size_t brig_egress__proxy_env(char **out, size_t max, char *const *env);

/* ---- secrets (issue 19.3) ---- */

/* DIR/NAME+suffix in brig_egress_dir (name checked). Errors: BRIG_EINVAL. */
int brig_egress__sandbox_path(char **out, const char *name, const char *suffix, brig_error **err);
/* Reads path (not followed when a link) into *text, NUL-terminated and
 * malloc'd, of *len bytes: *text NULL when there is no such file. Errors:
 * BRIG_EIO, BRIG_ETOOBIG (longer than max; nothing kept). */
int brig_egress__file_read(const char *path, size_t max, char **text, size_t *len, brig_error **err);
/* Writes data to path atomically, 0600 (its folder made 0700). */
int brig_egress__file_write(const char *path, const void *data, size_t len, brig_error **err);

/* Longest secret value; values are printable ASCII (0x20..0x7e). */
#define BRIG_EGRESS_SECRET_MAX 4096
/* "brig-placeholder-" and 32 hex digits. */
#define BRIG_EGRESS_PLACEHOLDER_SIZE 50

/* One secret of a sandbox, as the proxy reads NAME.secrets (0600 in
 * brig_egress_dir; one line "NAME PLACEHOLDER HOST,HOST HEXVALUE"). */
typedef struct brig_egress_secret {
	char name[129];
	char placeholder[BRIG_EGRESS_PLACEHOLDER_SIZE];
	char *hosts; /* "a.com,b.org" */
	char *value; /* wiped when freed */
} brig_egress_secret;

/* The secrets of sandbox name (none without a file). Errors: BRIG_EIO,
 * BRIG_EINVAL (a malformed file: its text never in the message). */
int brig_egress__secrets_read(brig_egress_secret **out, size_t *n, const char *name, brig_error **err);
void brig_egress__secrets_free(brig_egress_secret *s, size_t n);
/* True when host is one of s's hosts. */
bool brig_egress__secret_covers(const brig_egress_secret *s, const char *host);

/* Appends "NAME=brig-placeholder-<32 random hex>" to the JSON array env
 * for each of spec's secrets (a new container's Config.Env). */
struct brig_spec;
int brig_egress__placeholders_add(void *json_env, const struct brig_spec *spec, brig_error **err);
/* Where a secret's value comes from. brig serve calls secrets_env_off
 * once, first: its environment is then never read for one (a token holder
 * would choose where the value goes). A thread doing one request's work
 * gives that request's values (a JSON object NAME -> string, borrowed
 * until the thread gives NULL); they come before the environment. */
void brig_egress__secrets_env_off(void);
void brig_egress__secrets_given(const void *json_values);
/* Before a new computer is made: every secret's value is given or in
 * brig's environment, and acceptable. Errors: BRIG_EINVAL naming the
 * secret. */
int brig_egress__secrets_check(const struct brig_spec *spec, brig_error **err);
/* Once the container cid (named name) runs: writes name.secrets (each
 * placeholder from its Config.Env, each value from brig's environment; an
 * adopted computer keeps a value brig's environment no longer has) and
 * puts brig's certificate authority inside. Errors: BRIG_EINVAL, BRIG_EIO. */
int brig_egress__secrets_start(brig_engine *e, const char *cid, const char *name, const struct brig_spec *spec,
			       brig_error **err);

/* Loads brig's authority (made when missing) and the upstreams' trust
 * while the proxy may still read them (before its worker gives up root);
 * what fails is said again on every connection that needs them. */
void brig_egress__bump_preload(void);

/* brig's certificate authority, made once per host under
 * brig_egress_dir()/ca (ca.key 0600, ca.pem): *pem gets its certificate
 * (PEM). Errors: BRIG_EIO. */
int brig_egress__ca_ensure(char **pem, brig_error **err);

/* The request stream of a TLS-terminated connection (sandbox → upstream):
 * request heads are parsed (bounded), checked (origin-form target, token
 * header names, no folding, one Host naming the tunnel's host, one
 * Content-Length, Transfer-Encoding only "chunked" and never with
 * Content-Length; no TRACE or TRACK) and a placeholder is replaced by its
 * value only in the headers secrets are bound to (Authorization,
 * x-api-key, api-key, x-goog-api-key) and only when it is the whole value
 * or follows a scheme ("Bearer PH"); bodies (Content-Length or chunked)
 * pass unchanged. After an
 * Upgrade request everything passes unchanged. */
#define BRIG_EGRESS_OUT_HEAD_MAX (64 * 1024)
typedef struct brig_egress_rw {
	const char *host;        /* the tunnel's host */
	char port[8];            /* ":PORT", the tunnel's */
	const char *const *from; /* placeholders */
	const char *const *to;   /* their values */
	size_t pairs;
	int state;
	char head[BRIG_EGRESS_HEAD_MAX];
	size_t head_len;
	char line[1024];
	size_t line_len;
	uint64_t left;
	unsigned requests; /* heads forwarded */
	unsigned replaced; /* placeholders replaced */
} brig_egress_rw;

/* Inits b with all of cap allocated at once: a buffer that will hold a
 * secret never reallocates (which would leave a copy behind, unwiped). */
struct brig_buf;
void brig_egress__buf_whole(struct brig_buf *b, size_t cap);

void brig_egress__rw_init(brig_egress_rw *rw, const char *host, int port, const char *const *from,
			  const char *const *to, size_t pairs);
/* Feeds in[0..n) and appends what goes upstream to out (a brig_buf). 0, or
 * -1 with a short static reason in *why (the connection ends). */
struct brig_buf;
int brig_egress__rw_feed(brig_egress_rw *rw, const char *in, size_t n, struct brig_buf *out, const char **why);

/* The response stream of a TLS-terminated connection (upstream →
 * sandbox), watched for the secrets' values: bytes that could begin a
 * value are held back until what follows shows they do not, so no part of
 * a value split across reads reaches the sandbox either. */
typedef struct brig_egress_scan {
	const char *const *values;
	size_t count;
	char *hold; /* a proper prefix of some value (wiped) */
	size_t hold_len;
} brig_egress_scan;

void brig_egress__scan_init(brig_egress_scan *s, const char *const *values, size_t count);
/* Appends to out what of held bytes and in[0..n) may go to the sandbox.
 * 0, or 1 when a value is in the stream (nothing appended). */
int brig_egress__scan_feed(brig_egress_scan *s, const char *in, size_t n, struct brig_buf *out);
/* Appends the bytes still held (at the stream's end); 0, or -1 when out is full. */
int brig_egress__scan_flush(brig_egress_scan *s, struct brig_buf *out);
void brig_egress__scan_free(brig_egress_scan *s);

/* True when TLS to host:port may be terminated for a secret: port 443,
 * or a port one of the rules names for host (api.example.com:8443). */
bool brig_egress__bump_port(const char *const *rules, size_t n, const char *host, int port);

/* Serves one CONNECT whose host has secrets: TLS with the sandbox as host
 * (a leaf of brig's authority), TLS upstream on ufd verifying host's real
 * certificate (the system's trust store; $BRIG_EGRESS_UPSTREAM_CA instead,
 * test-only), then requests through brig_egress__rw. Counts bytes into
 * up and down; returns 0 when it relayed, -1 with reason (no secret in it)
 * and *denied (the sandbox's fault) when it did not. */
int brig_egress__bump(int cfd, int ufd, const char *host, int port, const brig_egress_secret *sec, size_t nsec,
		      uint64_t *up, uint64_t *down, unsigned *replaced, bool *denied, char *reason, size_t reason_len);

#endif
