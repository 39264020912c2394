/* proxy.c — the egress proxy (`brig egress-proxy`): a host process on the
 * egress network's gateway that forwards CONNECT (TLS whose SNI is the
 * CONNECT host) and plain HTTP (absolute URI whose host is the Host
 * header) to what the sandbox's rules allow, resolving names itself.
 *
 * Why a host process and not a container: the proxy must know which
 * sandbox speaks (the daemon's view of the egress network), read rules
 * that change while the sandbox runs, and write a ledger into brig's
 * store; from a container each of those would need a channel back to the
 * host. Started by root, what a sandbox's bytes reach runs as a uid of its
 * own (the worker; see "privilege separation" below); everything a sandbox sends
 * goes through the bounded parsers of parse.c (fuzzed). */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "egress/egress_internal.h"
#include "util/util.h"

#define CONN_MAX 256
_Static_assert(CONN_MAX <= BRIG_EGRESS_PEER_SLOTS, "every connection's address has a slot");
#define HEAD_TIMEOUT_MS 30000
#define CONNECT_TIMEOUT_MS 10000
#define IDLE_TIMEOUT_MS (5 * 60 * 1000)
#define IDLE_EXIT_MS 60000

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static brig_engine *engine;
static brig_store *ledger; /* NULL when brig's store could not be opened */
static atomic_int active;
static brig_egress_peers peers = {.lock = PTHREAD_MUTEX_INITIALIZER};

typedef struct conn {
	int fd;
	uint64_t mon_id; /* the monitor's number for it; 0: one process */
	uint32_t addr; /* the peer's, network order */
	char peer[INET_ADDRSTRLEN];
	/* what the log line says */
	char sandbox[160];
	char ns[80], agent[80], session[80]; /* the computer's identity; "" for a run */
	char host[256];
	int port;
	bool bump_port;       /* TLS to host:port may be terminated (443, or a port a rule names) */
	const char *decision; /* "allowed" | "denied" | "error" */
	char reason[400];
	uint64_t up, down;
	int64_t start_ms, t0;
} conn;

/* ---- the log line (the ledger's source) ---- */

/* {"key":"what","why":"…"}: store messages quoted by jansson (no secret
 * reaches them: brig's store redacts its URL's password). */
static void log_note(const char *key, const char *what, const char *why)
{
	json_t *o = json_pack("{s:s, s:s}", key, what, "why", why ? why : "");
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text)
		fprintf(stderr, "%s\n", text);
	fflush(stderr);
	free(text);
}

static void ledger_add(const conn *c, const brig_store_egress *rec);

static void log_conn(conn *c)
{
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:I}", "start_ms", (json_int_t)c->start_ms,
			      "sandbox", c->sandbox, "address", c->peer, "host", c->host, "port", c->port, "decision",
			      c->decision ? c->decision : "error", "reason", c->reason, "bytes_up", (json_int_t)c->up,
			      "bytes_down", (json_int_t)c->down, "duration_ms", (json_int_t)(brig_now_ms() - c->t0));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	bool id = c->ns[0] && c->agent[0] && c->session[0];
	brig_store_egress rec = {.sandbox = c->sandbox[0] ? c->sandbox : c->peer,
				 .ns = id ? c->ns : NULL,
				 .agent = id ? c->agent : NULL,
				 .session = id ? c->session : NULL,
				 .host = c->host,
				 .port = c->port,
				 .decision = (char *)(c->decision ? c->decision : "error"),
				 .reason = c->reason,
				 .bytes_up = (int64_t)c->up,
				 .bytes_down = (int64_t)c->down,
				 .start_ms = c->start_ms,
				 .duration_ms = brig_now_ms() - c->t0};
	ledger_add(c, &rec);
	if (text) {
		fprintf(stderr, "%s\n", text);
		fflush(stderr);
	}
	free(text);
}

/* ---- small socket helpers ---- */

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;
	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return r;
}

/* The proxy's writes: a peer that takes nothing for IDLE_TIMEOUT_MS is gone. */
static int send_all(int fd, const void *buf, size_t n)
{
	return brig_send_all(fd, buf, n, IDLE_TIMEOUT_MS);
}

/* The proxy's own answer: plain text, the connection closes after it. */
static void answer(conn *c, int status, const char *reason_phrase, const char *decision, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void answer(conn *c, int status, const char *reason_phrase, const char *decision, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof c->reason, fmt, ap);
	va_end(ap);
	c->decision = decision;
	char body[512];
	int bn = snprintf(body, sizeof body, "brig egress: %s\n", c->reason);
	char head[512];
	int hn = snprintf(head, sizeof head,
			  "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Brig-Egress: %s\r\nConnection: "
			  "close\r\nContent-Length: %d\r\n\r\n",
			  status, reason_phrase, decision, bn);
	send_all(c->fd, head, (size_t)hn);
	send_all(c->fd, body, (size_t)bn);
}

/* ---- which sandbox speaks ---- */

/* A container name is derived from its session identity, so the identity
 * of a name never changes: kept here (by name, never by address, which
 * Docker reuses) to spare an inspect per connection. */
#define IDENT_CACHE 64
static struct {
	char name[160], ns[80], agent[80], session[80];
} ident_cache[IDENT_CACHE];
static unsigned ident_next;

static bool ident_cached(conn *c, const char *name)
{
	for (unsigned i = 0; i < IDENT_CACHE; i++)
		if (strcmp(ident_cache[i].name, name) == 0) {
			memcpy(c->ns, ident_cache[i].ns, sizeof c->ns);
			memcpy(c->agent, ident_cache[i].agent, sizeof c->agent);
			memcpy(c->session, ident_cache[i].session, sizeof c->session);
			return true;
		}
	return false;
}

static void ident_remember(const conn *c, const char *name)
{
	unsigned i = ident_next++ % IDENT_CACHE;
	snprintf(ident_cache[i].name, sizeof ident_cache[i].name, "%s", name);
	memcpy(ident_cache[i].ns, c->ns, sizeof c->ns);
	memcpy(ident_cache[i].agent, c->agent, sizeof c->agent);
	memcpy(ident_cache[i].session, c->session, sizeof c->session);
}

static void copy_label(char *out, size_t outlen, json_t *labels, const char *key)
{
	const char *v = json_string_value(json_object_get(labels, key));
	snprintf(out, outlen, "%s", v && strlen(v) < outlen ? v : "");
}

static bool who_direct(conn *c, char *out, size_t outlen, const char *ip)
{
	bool found = false;
	pthread_mutex_lock(&engine_lock);
	cleanup_json json_t *net = NULL;
	if (engine && brig_engine_network_inspect(engine, &net, BRIG_EGRESS_NETWORK, NULL) == 0) {
		const char *k;
		json_t *v;
		size_t n = strlen(ip);
		json_object_foreach (json_object_get(net, "Containers"), k, v) {
			const char *a = json_string_value(json_object_get(v, "IPv4Address"));
			const char *name = json_string_value(json_object_get(v, "Name"));
			if (a && name && strncmp(a, ip, n) == 0 && a[n] == '/') {
				snprintf(out, outlen, "%s", name);
				found = true;
				break;
			}
		}
		cleanup_json json_t *ci = NULL;
		if (found && !ident_cached(c, out) && brig_engine_container_inspect(engine, &ci, out, NULL) == 0) {
			json_t *labels = json_object_get(json_object_get(ci, "Config"), "Labels");
			copy_label(c->ns, sizeof c->ns, labels, BRIG_LABEL_NS);
			copy_label(c->agent, sizeof c->agent, labels, BRIG_LABEL_AGENT);
			copy_label(c->session, sizeof c->session, labels, BRIG_LABEL_SESSION);
			ident_remember(c, out);
		}
	}
	pthread_mutex_unlock(&engine_lock);
	return found;
}

/* ---- privilege separation ----
 *
 * Started by root, the proxy is two processes. The worker — everything a
 * sandbox's bytes touch: the parsers, TLS, the relays — runs as a uid of
 * its own (brig-egress's, else BRIG_EGRESS_WORKER_ID), with no
 * capability, no supplementary group, and no open descriptor but
 * its listener, its end of a socket pair, and its log. The monitor keeps
 * brig's uid for what needs it — the daemon's view of which sandbox
 * speaks, the rules and secrets files, the ledger, the idle check — and
 * answers the worker's requests over that pair (a u32 length and JSON,
 * each bounded; the monitor trusts nothing in them). The monitor also
 * holds the listener: it accepts each connection, numbers it, and hands
 * the worker the socket and its number over a second pair. The worker
 * names a connection only by that number, never by a sandbox: who speaks,
 * its rules, its secrets and the ledger row's identity are the monitor's
 * from the address it accepted (looked up once, within seconds of the
 * accept: an address can be another sandbox's later). A worker someone
 * took over can therefore get the secrets only of a sandbox that connected
 * to it, never write a file of the host's, forge whose a ledger row is, or
 * reach the daemon. Started by another user, the proxy is one process
 * with that user's rights, as before. */

#define MON_MAX (1u << 20) /* one request or answer */

static int mon_fd = -1; /* the worker's end; -1: one process */
static int acc_fd = -1; /* the worker's end of the accepted sockets' pair */
static pthread_mutex_t mon_lock = PTHREAD_MUTEX_INITIALIZER;

static int frame_send(int fd, json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);
	if (!text)
		return -1;
	size_t n = strlen(text);
	uint32_t len = (uint32_t)n;
	int rc = n <= MON_MAX && brig_write_all(fd, &len, sizeof len) == 0 && brig_write_all(fd, text, n) == 0
			 ? 0
			 : -1;
	explicit_bzero(text, n); /* answers carry secrets' values */
	free(text);
	return rc;
}

static int read_full(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* One frame, an object; NULL on EOF, error or anything malformed. */
static json_t *frame_recv(int fd)
{
	uint32_t len = 0;
	if (read_full(fd, &len, sizeof len) != 0 || len == 0 || len > MON_MAX)
		return NULL;
	char *buf = xmalloc(len);
	json_t *j = NULL;
	if (read_full(fd, buf, len) == 0)
		j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	explicit_bzero(buf, len);
	free(buf);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

/* The worker's request to the monitor (req is consumed); its answer, or
 * NULL when the monitor is gone (the worker then ends). */
static json_t *mon_call(json_t *req)
{
	pthread_mutex_lock(&mon_lock);
	json_t *resp = frame_send(mon_fd, req) == 0 ? frame_recv(mon_fd) : NULL;
	pthread_mutex_unlock(&mon_lock);
	json_decref(req);
	return resp;
}

/* Tells the monitor the worker is done with connection id (it never
 * served it). */
static void mon_done(uint64_t id)
{
	json_decref(mon_call(json_pack("{s:s, s:I}", "op", "done", "conn", (json_int_t)id)));
}

static void copy_str(char *out, size_t outlen, json_t *v)
{
	const char *s = json_string_value(v);
	snprintf(out, outlen, "%s", s && strlen(s) < outlen ? s : "");
}

static bool sandbox_of(conn *c, char *out, size_t outlen, const char *ip)
{
	if (mon_fd < 0)
		return who_direct(c, out, outlen, ip);
	cleanup_json json_t *r = mon_call(json_pack("{s:s, s:I}", "op", "who", "conn", (json_int_t)c->mon_id));
	const char *name = json_string_value(json_object_get(r, "sandbox"));
	if (!name || !*name || strlen(name) >= outlen)
		return false;
	snprintf(out, outlen, "%s", name);
	copy_str(c->ns, sizeof c->ns, json_object_get(r, "ns"));
	copy_str(c->agent, sizeof c->agent, json_object_get(r, "agent"));
	copy_str(c->session, sizeof c->session, json_object_get(r, "session"));
	return true;
}

/* The monitor's answer to op for c's sandbox: its array under the op's
 * name, of at most max entries (a reference of the caller's), or NULL. */
static json_t *mon_list(const char *op, const conn *c, size_t max)
{
	cleanup_json json_t *r = mon_call(json_pack("{s:s, s:I}", "op", op, "conn", (json_int_t)c->mon_id));
	json_t *arr = json_object_get(r, op);
	return json_is_array(arr) && json_array_size(arr) <= max ? json_incref(arr) : NULL;
}

static int rules_of(char ***rules, size_t *n, const conn *c)
{
	if (mon_fd < 0)
		return brig_egress_rules_get(rules, n, c->sandbox, NULL);
	*rules = NULL;
	*n = 0;
	cleanup_json json_t *arr = mon_list("rules", c, BRIG_EGRESS_RULES_MAX);
	if (!arr)
		return -1;
	char **v = xcalloc(json_array_size(arr) + 1, sizeof *v);
	size_t i;
	json_t *x;
	json_array_foreach (arr, i, x) {
		const char *t = json_string_value(x);
		v[i] = xstrdup(t ? t : "");
	}
	*rules = v;
	*n = json_array_size(arr);
	return 0;
}

static int secrets_of(brig_egress_secret **out, size_t *n, const conn *c)
{
	if (mon_fd < 0)
		return brig_egress__secrets_read(out, n, c->sandbox, NULL);
	*out = NULL;
	*n = 0;
	cleanup_json json_t *arr = mon_list("secrets", c, BRIG_SPEC_SECRETS_MAX);
	if (!arr)
		return -1;
	brig_egress_secret *sec = xcalloc(BRIG_SPEC_SECRETS_MAX, sizeof *sec);
	size_t i;
	json_t *x;
	json_array_foreach (arr, i, x) {
		const char *hosts = json_string_value(json_object_get(x, "hosts"));
		const char *value = json_string_value(json_object_get(x, "value"));
		copy_str(sec[i].name, sizeof sec[i].name, json_object_get(x, "name"));
		copy_str(sec[i].placeholder, sizeof sec[i].placeholder, json_object_get(x, "placeholder"));
		sec[i].hosts = xstrdup(hosts ? hosts : "");
		sec[i].value = xstrdup(value ? value : "");
	}
	*out = sec;
	*n = json_array_size(arr);
	return 0;
}

/* The store a sandbox's rows go to: its NAME.store (written by the brig
 * that made it), malloc'd; NULL when it has none (made by an older brig,
 * or one without a default store: the proxy's own store then) or the mark
 * cannot be read (logged; "" then: the row is kept from every store). */
static char *store_of(const char *sandbox)
{
	cleanup_free char *path = NULL;
	char *url = NULL;
	size_t len = 0;
	brig_error *err = NULL;
	if (brig_egress__sandbox_path(&path, sandbox, ".store", NULL) != 0)
		return NULL;
	if (brig_egress__file_read(path, 4096, &url, &len, &err) != 0) {
		log_note("ledger", "cannot read the sandbox's store", brig_error_message(err));
		brig_error_free(err);
		return xstrdup("");
	}
	if (url && (!len || memchr(url, '\0', len))) {
		free(url);
		return xstrdup("");
	}
	return url;
}

/* Rows are written by one thread of their own, from a queue: the monitor
 * answers every worker request on one thread, and must never wait for a
 * database (an unreachable one takes its connect timeout). The writer
 * keeps the stores sandboxes' rows go to (other than the proxy's own)
 * open, up to LEDGERS_MAX, the oldest closed when a new one needs the
 * room; one that cannot be opened is tried again only after
 * LEDGER_RETRY_MS, its rows dropped meanwhile (logged). A full queue drops
 * the row (logged) rather than stall the proxy. */
#define LEDGERS_MAX 8
#define LEDGER_RETRY_MS 30000
#define LEDGER_QUEUE_MAX 4096
static struct {
	char *url;
	brig_store *s;     /* NULL: could not be opened at failed_ms */
	int64_t failed_ms; /* -1: not tried */
} ledgers[LEDGERS_MAX];
static size_t ledgers_next;

typedef struct lrow {
	brig_store_egress rec; /* its strings owned */
	char *store;           /* NULL: the proxy's; "": none may have it */
	struct lrow *next;
} lrow;
static pthread_mutex_t lq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lq_cond = PTHREAD_COND_INITIALIZER;
static lrow *lq_head, **lq_tail = &lq_head;
static size_t lq_n;
static bool lq_started, lq_busy;

static void lrow_free(lrow *q)
{
	free(q->rec.sandbox);
	free(q->rec.ns);
	free(q->rec.agent);
	free(q->rec.session);
	free(q->rec.host);
	free(q->rec.decision);
	free(q->rec.reason);
	free(q->store);
	free(q);
}

/* The writer's store for url (NULL: the proxy's). */
static brig_store *ledger_store(const char *url)
{
	if (!url)
		return ledger;
	size_t i = 0;
	while (i < LEDGERS_MAX && !(ledgers[i].url && strcmp(ledgers[i].url, url) == 0))
		i++;
	if (i == LEDGERS_MAX) {
		i = ledgers_next;
		ledgers_next = (ledgers_next + 1) % LEDGERS_MAX;
		brig_store_close(ledgers[i].s);
		free(ledgers[i].url);
		ledgers[i].url = xstrdup(url);
		ledgers[i].s = NULL;
		ledgers[i].failed_ms = -1;
	}
	int64_t now = brig_now_ms();
	brig_error *err = NULL;
	if (!ledgers[i].s && (ledgers[i].failed_ms < 0 || now - ledgers[i].failed_ms >= LEDGER_RETRY_MS) &&
	    brig_store_open(&ledgers[i].s, ledgers[i].url, &err) != 0) {
		ledgers[i].failed_ms = now;
		log_note("ledger", "the sandbox's store is unavailable", brig_error_message(err));
		brig_error_free(err);
	}
	return ledgers[i].s;
}

static void *ledger_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lq_lock);
	for (;;) {
		while (!lq_head)
			pthread_cond_wait(&lq_cond, &lq_lock);
		lrow *q = lq_head;
		lq_head = q->next;
		if (!lq_head)
			lq_tail = &lq_head;
		lq_n--;
		lq_busy = true;
		pthread_mutex_unlock(&lq_lock);
		brig_store *s = q->store && !*q->store ? NULL : ledger_store(q->store);
		brig_error *err = NULL;
		if (!s || brig_store_egress_add(s, NULL, &q->rec, &err) != 0)
			log_note("ledger", "not written", s ? brig_error_message(err) : "no store to write it to");
		brig_error_free(err);
		lrow_free(q);
		pthread_mutex_lock(&lq_lock);
		lq_busy = false;
		pthread_cond_broadcast(&lq_cond);
	}
	return NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

/* Queues rec for the store at store (NULL: the proxy's; "": none). */
static void ledger_write(const brig_store_egress *rec, const char *store)
{
	lrow *q = xcalloc(1, sizeof *q);
	q->rec = *rec;
	q->rec.sandbox = dup_or_null(rec->sandbox);
	q->rec.ns = dup_or_null(rec->ns);
	q->rec.agent = dup_or_null(rec->agent);
	q->rec.session = dup_or_null(rec->session);
	q->rec.host = dup_or_null(rec->host);
	q->rec.decision = dup_or_null(rec->decision);
	q->rec.reason = dup_or_null(rec->reason);
	q->store = dup_or_null(store);
	pthread_mutex_lock(&lq_lock);
	if (!lq_started) {
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		lq_started = pthread_create(&t, &at, ledger_thread, NULL) == 0;
		pthread_attr_destroy(&at);
	}
	bool room = lq_started && lq_n < LEDGER_QUEUE_MAX;
	if (room) {
		*lq_tail = q;
		lq_tail = &q->next;
		lq_n++;
		pthread_cond_broadcast(&lq_cond);
	}
	pthread_mutex_unlock(&lq_lock);
	if (!room) {
		log_note("ledger", "not written", lq_started ? "the ledger's queue is full" : "no writer thread");
		lrow_free(q);
	}
}

/* Before the proxy exits: what is queued written, for up to 10 s. */
static void ledger_flush(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&lq_lock);
	while (lq_started && (lq_head || lq_busy))
		if (pthread_cond_timedwait(&lq_cond, &lq_lock, &until) != 0)
			break;
	pthread_mutex_unlock(&lq_lock);
}

/* The row of c's connection (whose it is: the monitor's to say, for a
 * worker), which ends the monitor's record of it. */
static void ledger_add(const conn *c, const brig_store_egress *rec)
{
	if (mon_fd >= 0) {
		json_decref(mon_call(json_pack("{s:s, s:I, s:s, s:i, s:s, s:s, s:I, s:I, s:I, s:I}", "op", "ledger",
					       "conn", (json_int_t)c->mon_id, "host", rec->host, "port", rec->port,
					       "decision", rec->decision, "reason", rec->reason, "bytes_up",
					       (json_int_t)rec->bytes_up, "bytes_down", (json_int_t)rec->bytes_down,
					       "start_ms", (json_int_t)rec->start_ms, "duration_ms",
					       (json_int_t)rec->duration_ms)));
		return;
	}
	cleanup_free char *store = c->sandbox[0] ? store_of(c->sandbox) : NULL;
	ledger_write(rec, store);
}

/* ---- names ---- */

/* Addresses a sandbox must never reach through the proxy, whatever a name
 * resolves to: the host itself (loopback and every address of its own
 * interfaces), link-local (cloud metadata), the egress network, unspecified
 * and multicast, and every private range — RFC 1918 (every Docker bridge,
 * so other sandboxes, and the LAN), shared address space 100.64/10 and the
 * benchmarking 198.18/15: an allowed name someone controls must not become
 * a way into the host's networks. */
static bool forbidden_v4(uint32_t a)
{
	uint32_t egress_net = 0, gw = 0;
	inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &gw);
	egress_net = ntohl(gw) & 0xffffff00u;
	return (a >> 24) == 127 || (a >> 24) == 0 || (a & 0xffff0000u) == 0xa9fe0000u || (a >> 28) >= 14 ||
	       (a & 0xffffff00u) == egress_net || (a >> 24) == 10 || (a & 0xfff00000u) == 0xac100000u ||
	       (a & 0xffff0000u) == 0xc0a80000u || (a & 0xffc00000u) == 0x64400000u || (a & 0xfffe0000u) == 0xc6120000u;
}

/* An address of one of this host's own interfaces (the host's services). */
static bool is_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) != 0)
		return true; /* cannot tell: refuse */
	bool local = false;
	for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
			local = ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
				((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		else if (sa->sa_family == AF_INET6)
			local = memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
				       &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
				       sizeof(struct in6_addr)) == 0;
	}
	freeifaddrs(ifs);
	return local;
}

bool brig_egress__forbidden(const struct sockaddr *sa)
{
	if (is_local(sa))
		return true;
	if (sa->sa_family == AF_INET)
		return forbidden_v4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		/* IPv4 inside IPv6 (mapped ::ffff:0:0/96, compatible ::/96, NAT64
		 * 64:ff9b::/96) would dodge the IPv4 checks and the host-address
		 * look-up, which compares within one family: refused whole. So are
		 * unique-local fc00::/7 and the old site-local fec0::/10. */
		static const unsigned char nat64[12] = {0x00, 0x64, 0xff, 0x9b};
		if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a) || memcmp(a->s6_addr, nat64, 12) == 0)
			return true;
		return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_UNSPECIFIED(a) ||
		       IN6_IS_ADDR_MULTICAST(a) || IN6_IS_ADDR_SITELOCAL(a) || (a->s6_addr[0] & 0xfe) == 0xfc;
	}
	return true;
}

/* The test-only resolver override: $BRIG_EGRESS_HOSTS names a file of
 * "name address" lines (IPv4), read when the proxy starts. Its answers may
 * be local addresses and skip brig_egress__forbidden: that is what tests
 * need, and why the proxy's log warns when it is set. It reaches the proxy
 * through the environment of the brig that starts it (proxy_env_kept in
 * network.c); nothing but brig's tests may set it. */
static char *hosts_text; /* the file, read once at start (a worker could not open it) */

static void hosts_preload(void)
{
	const char *path = getenv("BRIG_EGRESS_HOSTS");
	if (!path || !*path)
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	brig_buf b;
	brig_buf_init(&b, 1 << 16);
	char chunk[4096];
	ssize_t r;
	while ((r = read(fd, chunk, sizeof chunk)) > 0)
		if (brig_buf_add(&b, chunk, (size_t)r))
			break;
	close(fd);
	if (brig_buf_add(&b, "", 1) != 0) /* full: its last byte gives way to the end */
		b.data[b.len - 1] = '\0';
	hosts_text = brig_buf_steal(&b, NULL);
}

static int resolve_override(struct sockaddr_in *out, const char *host)
{
	if (!hosts_text)
		return 1;
	FILE *f = fmemopen(hosts_text, strlen(hosts_text), "r");
	if (!f)
		return 1;
	char line[512];
	int rc = 1;
	while (rc == 1 && fgets(line, sizeof line, f)) {
		char name[300], addr[64];
		if (sscanf(line, "%299s %63s", name, addr) != 2 || strcasecmp(name, host) != 0)
			continue;
		memset(out, 0, sizeof *out);
		out->sin_family = AF_INET;
		rc = inet_pton(AF_INET, addr, &out->sin_addr) == 1 ? 0 : -1;
	}
	fclose(f);
	return rc;
}

static int connect_to(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, sa, len) != 0) {
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		if (errno != EINPROGRESS || wait_fd(fd, POLLOUT, CONNECT_TIMEOUT_MS) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
			close(fd);
			return -1;
		}
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* Connects upstream; on failure answers the sandbox and returns -1. */
static int upstream(conn *c)
{
	struct sockaddr_in o;
	int ov = resolve_override(&o, c->host);
	if (ov == 0) {
		o.sin_port = htons((uint16_t)c->port);
		int fd = connect_to((struct sockaddr *)&o, sizeof o);
		if (fd < 0)
			answer(c, 502, "Bad Gateway", "error", "cannot connect to %s:%d", c->host, c->port);
		return fd;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	char port[8];
	snprintf(port, sizeof port, "%d", c->port);
	/* fully qualified: the host's resolver search list never applies */
	char fq[300];
	if (snprintf(fq, sizeof fq, "%s.", c->host) >= (int)sizeof fq || getaddrinfo(fq, port, &hints, &res) != 0 ||
	    !res) {
		answer(c, 502, "Bad Gateway", "error", "cannot resolve %s", c->host);
		return -1;
	}
	int fd = -1;
	bool refused_local = false;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		if (brig_egress__forbidden(a->ai_addr)) {
			refused_local = true;
			continue;
		}
		fd = connect_to(a->ai_addr, a->ai_addrlen);
	}
	freeaddrinfo(res);
	if (fd < 0) {
		if (refused_local)
			answer(c, 403, "Forbidden", "denied", "%s resolves to a local, private or link-local address",
			       c->host);
		else
			answer(c, 502, "Bad Gateway", "error", "cannot connect to %s:%d", c->host, c->port);
	}
	return fd;
}

/* ---- relaying ---- */

/* Copies both ways until both sides are done or nothing moves for the
 * idle timeout. With one_way, only upstream → sandbox (a plain request
 * whose body was sent already). */
static void relay(conn *c, int up, bool one_way)
{
	char buf[64 * 1024];
	bool c_open = !one_way, u_open = true;
	while (c_open || u_open) {
		/* a side that is done leaves the set: a reset peer's POLLHUP
		 * would otherwise come back at once, forever */
		struct pollfd p[2] = {{.fd = c_open ? c->fd : -1, .events = POLLIN},
				      {.fd = u_open ? up : -1, .events = POLLIN}};
		int r = poll(p, 2, IDLE_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		if (c_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(c->fd, buf, sizeof buf, 0);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				c_open = false;
				shutdown(up, SHUT_WR);
			} else {
				if (send_all(up, buf, (size_t)n) != 0)
					return;
				c->up += (uint64_t)n;
			}
		}
		if (u_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(up, buf, sizeof buf, 0);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n <= 0) {
				u_open = false;
				shutdown(c->fd, SHUT_WR);
				if (one_way)
					return;
			} else {
				if (send_all(c->fd, buf, (size_t)n) != 0)
					return;
				c->down += (uint64_t)n;
			}
		}
	}
}

/* Reads more of the sandbox's bytes into buf (at most cap). 0, or -1 on
 * EOF, error or the deadline. */
static int read_more(int fd, char *buf, size_t *len, size_t cap, int64_t deadline)
{
	if (*len >= cap)
		return -1;
	int left = brig_remaining_ms(deadline);
	if (left <= 0 || wait_fd(fd, POLLIN, left) != 1)
		return -1;
	ssize_t n;
	while ((n = recv(fd, buf + *len, cap - *len, 0)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return -1;
	*len += (size_t)n;
	return 0;
}

/* A CONNECT to a host of the sandbox's secrets: TLS ends here (bump.c). */
static void do_bump(conn *c, int up, size_t have, const brig_egress_secret *sec, size_t nsec)
{
	if (have) {
		c->decision = "denied";
		snprintf(c->reason, sizeof c->reason, "bytes sent before the proxy's answer to CONNECT");
		return;
	}
	bool denied = false;
	unsigned replaced = 0;
	char why[300] = "";
	if (brig_egress__bump(c->fd, up, c->host, c->port, sec, nsec, &c->up, &c->down, &replaced, &denied, why,
			      sizeof why) != 0) {
		c->decision = denied ? "denied" : "error";
		snprintf(c->reason, sizeof c->reason, "TLS terminated for a secret: %s", why);
		return;
	}
	c->decision = "allowed";
	snprintf(c->reason, sizeof c->reason, "TLS terminated for a secret; %u placeholder(s) replaced", replaced);
}

static void do_connect(conn *c, char *buf, size_t len, const brig_egress_req *req)
{
	brig_egress_secret *sec = NULL;
	size_t nsec = 0;
	bool bump = false;
	if (secrets_of(&sec, &nsec, c) != 0) {
		answer(c, 500, "Internal Server Error", "error", "cannot read this sandbox's secrets");
		return;
	}
	for (size_t i = 0; i < nsec && !bump && c->bump_port; i++)
		bump = brig_egress__secret_covers(&sec[i], c->host);
	int up = upstream(c);
	if (up < 0) {
		brig_egress__secrets_free(sec, nsec);
		return;
	}
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	if (send_all(c->fd, ok, sizeof ok - 1) != 0) {
		brig_egress__secrets_free(sec, nsec);
		close(up);
		return;
	}
	if (bump) {
		do_bump(c, up, len - req->head_len, sec, nsec);
		brig_egress__secrets_free(sec, nsec);
		close(up);
		return;
	}
	brig_egress__secrets_free(sec, nsec);
	/* The ClientHello: whatever followed the head, then more. */
	size_t have = len - req->head_len;
	memmove(buf, buf + req->head_len, have);
	char sni[256];
	int64_t deadline = brig_now_ms() + HEAD_TIMEOUT_MS;
	int s;
	while ((s = brig_egress__sni(sni, sizeof sni, (unsigned char *)buf, have)) == 1)
		if (read_more(c->fd, buf, &have, BRIG_EGRESS_HELLO_MAX, deadline) != 0)
			break;
	if (s != 0 || strcmp(sni, c->host) != 0) {
		c->decision = "denied";
		snprintf(c->reason, sizeof c->reason, "%s",
			 s == 1    ? "no complete TLS ClientHello"
			 : s == -1 ? "not a TLS ClientHello (only TLS is forwarded through CONNECT)"
			 : s == -2 ? "TLS ClientHello without a server name"
			 : s == -3 ? "encrypted ClientHello refused (its server name cannot be checked)"
				   : "TLS server name differs from the CONNECT host");
		close(up);
		return;
	}
	c->decision = "allowed";
	if (send_all(up, buf, have) == 0) {
		c->up += have;
		relay(c, up, false);
	}
	close(up);
}

static bool hop_header(const char *l, size_t n)
{
	static const char *const drop[] = {
		"proxy-connection:", "proxy-authorization:", "connection:", "keep-alive:", "te:", "upgrade:", NULL};
	for (const char *const *d = drop; *d; d++)
		if (n >= strlen(*d) && strncasecmp(l, *d, strlen(*d)) == 0)
			return true;
	return false;
}

static void do_plain(conn *c, char *buf, size_t len, const brig_egress_req *req)
{
	if (req->chunked) {
		answer(c, 411, "Length Required", "denied",
		       "chunked request bodies are not forwarded; send Content-Length");
		return;
	}
	int up = upstream(c);
	if (up < 0)
		return;
	c->decision = "allowed";
	/* Origin form, our own Connection: close (one request per connection:
	 * a second one could name another host), no proxy headers. */
	brig_buf h;
	brig_buf_init(&h, BRIG_EGRESS_HEAD_MAX + 256);
	int bad = brig_buf_printf(&h, "%s ", req->method);
	bad |= req->target_len ? brig_buf_add(&h, buf + req->target_off, req->target_len) : brig_buf_addstr(&h, "/");
	bad |= brig_buf_addstr(&h, " HTTP/1.1\r\n");
	for (size_t off = req->headers_off; off + 2 <= req->head_len - 2;) {
		const char *l = buf + off;
		const char *e = memmem(l, req->head_len - off, "\r\n", 2);
		size_t n = (size_t)(e - l);
		if (!hop_header(l, n)) {
			bad |= brig_buf_add(&h, l, n + 2);
		}
		off += n + 2;
	}
	bad |= brig_buf_addstr(&h, "Connection: close\r\n\r\n");
	if (bad || send_all(up, h.data, h.len) != 0) {
		brig_buf_free(&h);
		close(up);
		return;
	}
	c->up += h.len;
	brig_buf_free(&h);
	/* The body: exactly Content-Length bytes, nothing after it. */
	uint64_t body = req->content_length > 0 ? (uint64_t)req->content_length : 0;
	size_t have = len - req->head_len;
	if (have > body)
		have = (size_t)body;
	if (have && send_all(up, buf + req->head_len, have) != 0) {
		close(up);
		return;
	}
	c->up += have;
	body -= have;
	char chunk[64 * 1024];
	while (body > 0) {
		if (wait_fd(c->fd, POLLIN, IDLE_TIMEOUT_MS) != 1)
			break;
		ssize_t n = recv(c->fd, chunk, body < sizeof chunk ? (size_t)body : sizeof chunk, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || send_all(up, chunk, (size_t)n) != 0)
			break;
		c->up += (uint64_t)n;
		body -= (uint64_t)n;
	}
	if (body == 0)
		relay(c, up, true);
	close(up);
}

static void *serve_conn(void *arg)
{
	conn *c = arg;
	c->t0 = brig_now_ms();
	c->start_ms = brig_wall_ms();
	char *buf = xmalloc(BRIG_EGRESS_HEAD_MAX + BRIG_EGRESS_HELLO_MAX);
	size_t len = 0;
	brig_egress_req req;
	const char *why = NULL;
	if (!sandbox_of(c, c->sandbox, sizeof c->sandbox, c->peer)) {
		answer(c, 403, "Forbidden", "denied", "%s is not a brig egress sandbox", c->peer);
		goto out;
	}
	int64_t deadline = brig_now_ms() + HEAD_TIMEOUT_MS;
	int p;
	while ((p = brig_egress__parse_head(&req, buf, len, &why)) == 1)
		if (read_more(c->fd, buf, &len, BRIG_EGRESS_HEAD_MAX, deadline) != 0)
			break;
	if (p == 1) {
		c->decision = "error";
		snprintf(c->reason, sizeof c->reason, "no complete request head");
		goto out;
	}
	if (p < 0) {
		answer(c, 400, "Bad Request", "denied", "%s", why);
		goto out;
	}
	snprintf(c->host, sizeof c->host, "%s", req.host);
	c->port = req.port;
	char **rules = NULL;
	size_t n = 0;
	if (rules_of(&rules, &n, c) != 0) {
		answer(c, 500, "Internal Server Error", "error", "cannot read this sandbox's rules");
		goto out;
	}
	bool ok = brig_egress_allowed((const char *const *)rules, n, req.host, req.port);
	c->bump_port = brig_egress__bump_port((const char *const *)rules, n, req.host, req.port);
	brig_egress_rules_free(rules);
	if (!ok) {
		answer(c, 403, "Forbidden", "denied", "%s:%d is not allowed for this sandbox (brig egress allow %s %s)",
		       req.host, req.port, c->sandbox, req.host);
		goto out;
	}
	if (req.connect)
		do_connect(c, buf, len, &req);
	else
		do_plain(c, buf, len, &req);
out:
	log_conn(c);
	free(buf);
	close(c->fd);
	brig_egress__peer_drop(&peers, c->addr);
	free(c);
	atomic_fetch_sub(&active, 1);
	return NULL;
}

/* ---- the listener ---- */

/* Binds the gateway's port, and listens unless later (a worker listens
 * once its monitor is ready, so that the port answers only then). */
static int listen_gateway(bool now, brig_error **err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress proxy: socket: %s", strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(BRIG_EGRESS_PORT)};
	inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &a.sin_addr);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || (now && listen(fd, 128) != 0)) {
		int e = errno;
		close(fd);
		return brig__error_set(err, BRIG_EIO, e, "egress proxy: cannot listen on %s:%d: %s",
				       BRIG_EGRESS_GATEWAY, BRIG_EGRESS_PORT, strerror(e));
	}
	return fd;
}

/* The capability bounding set, emptied for good (while root may). */
static int bset_drop(void)
{
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL && errno != EPERM)
			return -1;
	return 0;
}

/* Once bound, nothing a proxy process does needs a capability: the
 * monitor's daemon socket, egress folder, store and authority key are its
 * own uid's (an owner needs none to open them), and the worker has none
 * of those. So each gives up every capability for good (bounding set too,
 * no new privileges) and may not be traced or dumped (they hold secrets).
 * Before any thread: a thread's capabilities are its own. 0, or -1. */
static int drop_privileges(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return -1;
	if (bset_drop() != 0)
		return -1;
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	return (int)syscall(SYS_capset, &h, d);
}

/* The worker's system calls, beyond what a uid without capabilities may
 * do anyway: no program run (execve), no process made (fork; threads
 * only), no other process read or traced, no namespace, mount, key ring,
 * BPF, perf, io_uring or module, and sockets of the families it uses only
 * (IPv4 and IPv6 upstreams; unix and netlink for the resolver and the
 * interface list). Refused with EPERM (EAFNOSUPPORT for a family), so a
 * worker someone took over gets errors, not a shell. Another architecture
 * than the one built for is killed. 0, or -1 (errno). */
#if defined(__x86_64__)
#define WORKER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WORKER_ARCH AUDIT_ARCH_AARCH64
#endif
#define SC_DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
#define SC_ARG0 (offsetof(struct seccomp_data, args[0]) + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 4 : 0))
int brig_egress__worker_seccomp(void)
{
#ifdef WORKER_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WORKER_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
		/* the x32 numbers of the same calls */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		SC_DENY(__NR_fork),
		SC_DENY(__NR_vfork),
#endif
		SC_DENY(__NR_execve),
		SC_DENY(__NR_execveat),
		SC_DENY(__NR_ptrace),
		SC_DENY(__NR_process_vm_readv),
		SC_DENY(__NR_process_vm_writev),
		SC_DENY(__NR_mount),
		SC_DENY(__NR_umount2),
		SC_DENY(__NR_pivot_root),
		SC_DENY(__NR_chroot),
		SC_DENY(__NR_setns),
		SC_DENY(__NR_unshare),
		SC_DENY(__NR_bpf),
		SC_DENY(__NR_perf_event_open),
		SC_DENY(__NR_keyctl),
		SC_DENY(__NR_add_key),
		SC_DENY(__NR_request_key),
		SC_DENY(__NR_init_module),
		SC_DENY(__NR_finit_module),
		SC_DENY(__NR_delete_module),
		SC_DENY(__NR_kexec_load),
		SC_DENY(__NR_reboot),
		SC_DENY(__NR_userfaultfd),
		SC_DENY(__NR_open_by_handle_at),
		SC_DENY(__NR_io_uring_setup),
		/* clone3 hides its flags in memory: ENOSYS, and glibc makes its
		 * threads with clone, whose flags say whether it is one */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SC_ARG0),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 7),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SC_ARG0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* a family it uses */
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* any other call */
	};
	struct sock_fprog prog = {.len = (unsigned short)(sizeof f / sizeof f[0]), .filter = f};
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* How many sandboxes the egress network has; -1 when it is gone. */
static int attached_direct(void)
{
	pthread_mutex_lock(&engine_lock);
	cleanup_json json_t *net = NULL;
	brig_error *err = NULL;
	int rc = engine ? brig_engine_network_inspect(engine, &net, BRIG_EGRESS_NETWORK, &err) : BRIG_EIO;
	pthread_mutex_unlock(&engine_lock);
	brig_error_free(err);
	if (rc == BRIG_ENOTFOUND)
		return -1;
	if (rc)
		return 1; /* cannot tell: stay */
	return (int)json_object_size(json_object_get(net, "Containers"));
}

static int attached(void)
{
	if (mon_fd < 0)
		return attached_direct();
	cleanup_json json_t *r = mon_call(json_pack("{s:s}", "op", "attached"));
	json_t *n = json_object_get(r, "n");
	return json_is_integer(n) ? (int)json_integer_value(n) : -1; /* no monitor: end */
}

/* ---- the monitor's side ---- */

static const char *str_max(json_t *o, const char *key, size_t max)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v && strlen(v) <= max ? v : NULL;
}

/* The connections the monitor accepted and the worker has not ended
 * (its ledger row or "done"): more than the worker keeps at once, so that
 * only ones a worker lost track of are ever taken for new ones. */
#define MON_CONNS (CONN_MAX * 4)
static struct mon_conn {
	uint64_t id; /* 0: free */
	uint32_t addr;
	int64_t accepted_ms;
	bool looked, known; /* who speaks was looked up; and found: the rest is its answer */
	char sandbox[160], ns[80], agent[80], session[80];
	char *store; /* its sandbox's store (store_of), read once it is known */
} mon_conns[MON_CONNS];

static void mon_conn_clear(struct mon_conn *m)
{
	free(m->store);
	memset(m, 0, sizeof *m);
}
static uint64_t mon_last_id;

/* A slot for a connection from addr (the oldest's when none is free). */
static struct mon_conn *mon_conn_new(uint32_t addr)
{
	struct mon_conn *m = &mon_conns[0];
	for (size_t i = 0; i < MON_CONNS && m->id; i++)
		if (!mon_conns[i].id || mon_conns[i].id < m->id)
			m = &mon_conns[i];
	mon_conn_clear(m);
	m->id = ++mon_last_id;
	m->addr = addr;
	m->accepted_ms = brig_now_ms();
	return m;
}

/* m's address as text, into ip. */
static void mon_conn_ip(const struct mon_conn *m, char ip[INET_ADDRSTRLEN])
{
	struct in_addr a = {.s_addr = m->addr};
	inet_ntop(AF_INET, &a, ip, INET_ADDRSTRLEN);
}

/* The connection req names ("conn"), or NULL. */
static struct mon_conn *mon_conn_of(json_t *req)
{
	json_t *v = json_object_get(req, "conn");
	if (!json_is_integer(v) || json_integer_value(v) <= 0)
		return NULL;
	uint64_t id = (uint64_t)json_integer_value(v);
	for (size_t i = 0; i < MON_CONNS; i++)
		if (mon_conns[i].id == id)
			return &mon_conns[i];
	return NULL;
}

/* Who speaks on m, looked up once — when the worker first asks, after its
 * limits (a flood costs the daemon nothing), and only within the time a
 * request head may take: false when no sandbox of the egress network had
 * its address then. */
static bool mon_conn_who(struct mon_conn *m)
{
	if (!m->looked) {
		m->looked = true;
		if (brig_now_ms() - m->accepted_ms > HEAD_TIMEOUT_MS)
			return false;
		char ip[INET_ADDRSTRLEN];
		conn c = {0};
		mon_conn_ip(m, ip);
		if (!who_direct(&c, m->sandbox, sizeof m->sandbox, ip))
			return false;
		memcpy(m->ns, c.ns, sizeof m->ns);
		memcpy(m->agent, c.agent, sizeof m->agent);
		memcpy(m->session, c.session, sizeof m->session);
		m->store = store_of(m->sandbox); /* now: the mark goes with the sandbox */
		m->known = true;
	}
	return m->known;
}

static json_t *mon_answer(json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	if (!op)
		return json_object();
	if (strcmp(op, "attached") == 0)
		return json_pack("{s:i}", "n", attached_direct());
	struct mon_conn *m = mon_conn_of(req);
	if (!m)
		return json_object();
	if (strcmp(op, "done") == 0) {
		mon_conn_clear(m);
		return json_object();
	}
	if (strcmp(op, "ledger") == 0) {
		const char *host = str_max(req, "host", 255);
		const char *dec = str_max(req, "decision", 16), *why = str_max(req, "reason", 399);
		char ip[INET_ADDRSTRLEN];
		mon_conn_ip(m, ip);
		bool id = m->known && m->ns[0] && m->agent[0] && m->session[0];
		brig_store_egress rec = {.sandbox = m->known ? m->sandbox : ip,
					 .ns = id ? m->ns : NULL,
					 .agent = id ? m->agent : NULL,
					 .session = id ? m->session : NULL,
					 .host = (char *)host,
					 .port = (int)json_integer_value(json_object_get(req, "port")),
					 .decision = (char *)dec,
					 .reason = (char *)why,
					 .bytes_up = json_integer_value(json_object_get(req, "bytes_up")),
					 .bytes_down = json_integer_value(json_object_get(req, "bytes_down")),
					 .start_ms = json_integer_value(json_object_get(req, "start_ms")),
					 .duration_ms = json_integer_value(json_object_get(req, "duration_ms"))};
		if (host && dec && why &&
		    (strcmp(dec, "allowed") == 0 || strcmp(dec, "denied") == 0 || strcmp(dec, "error") == 0))
			ledger_write(&rec, m->known ? m->store : NULL);
		mon_conn_clear(m); /* the connection's last word */
		return json_object();
	}
	if (!mon_conn_who(m))
		return json_object();
	if (strcmp(op, "who") == 0)
		return json_pack("{s:s, s:s, s:s, s:s}", "sandbox", m->sandbox, "ns", m->ns, "agent", m->agent,
				 "session", m->session);
	if (strcmp(op, "rules") == 0) {
		char **rules = NULL;
		size_t n = 0;
		if (brig_egress_rules_get(&rules, &n, m->sandbox, NULL) != 0)
			return json_object();
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, json_string(rules[i]));
		brig_egress_rules_free(rules);
		return json_pack("{s:o}", "rules", arr);
	}
	if (strcmp(op, "secrets") == 0) {
		brig_egress_secret *sec = NULL;
		size_t n = 0;
		if (brig_egress__secrets_read(&sec, &n, m->sandbox, NULL) != 0)
			return json_object();
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s}", "name", sec[i].name, "placeholder",
							     sec[i].placeholder, "hosts", sec[i].hosts, "value",
							     sec[i].value));
		brig_egress__secrets_free(sec, n);
		return json_pack("{s:o}", "secrets", arr);
	}
	return json_object();
}

json_t *brig_egress__mon_answer(json_t *req)
{
	json_t *r = mon_answer(req);
	return r ? r : json_object();
}

uint64_t brig_egress__mon_accepted(uint32_t addr)
{
	return mon_conn_new(addr)->id;
}

/* Hands the worker a socket the monitor accepted, with its number, over
 * acc (never blocking: a worker that does not take them loses them). */
static void mon_hand(int acc, int fd, struct mon_conn *m)
{
	uint64_t id = m->id;
	char ctl[CMSG_SPACE(sizeof(int))];
	memset(ctl, 0, sizeof ctl);
	struct iovec iov = {.iov_base = &id, .iov_len = sizeof id};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	ssize_t r;
	while ((r = sendmsg(acc, &mh, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (r != (ssize_t)sizeof id)
		mon_conn_clear(m);
}

/* The worker's next accepted socket and its number from acc: 0, 1 when
 * nothing was there (or a message that was not one socket and its number:
 * whatever descriptors it carried are closed), -1 when the monitor is gone. */
static int worker_take(int acc, int *fd, uint64_t *id)
{
	/* room for more than one: descriptors that fit are installed and must
	 * be closed, and the kernel rounds the space up anyway */
	char ctl[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = {.iov_base = id, .iov_len = sizeof *id};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	ssize_t r;
	while ((r = recvmsg(acc, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -1;
	if (r < 0)
		return errno == EAGAIN ? 1 : -1;
	*fd = -1;
	bool bad = r != (ssize_t)sizeof *id || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int got;
			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof got);
			if (*fd < 0 && !bad)
				*fd = got;
			else {
				close(got);
				bad = true;
			}
		}
	}
	if (bad || *fd < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return 1;
	}
	return 0;
}

int brig_egress__worker_take(int acc, int *fd, uint64_t *id)
{
	return worker_take(acc, fd, id);
}

/* Answers the worker until it ends (its end closes), and accepts on lfd
 * for it meanwhile. */
static void monitor(int fd, int lfd, int acc)
{
	for (;;) {
		struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
		int r = poll(pf, 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (pf[1].revents & POLLIN) {
			struct sockaddr_in peer;
			socklen_t pl = sizeof peer;
			int cfd = accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
			if (cfd >= 0) {
				uint32_t gw = 0;
				inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &gw);
				/* brig's own is-it-up probe ends here */
				if (pl == sizeof peer && peer.sin_family == AF_INET && peer.sin_addr.s_addr != gw)
					mon_hand(acc, cfd, mon_conn_new(peer.sin_addr.s_addr));
				close(cfd);
			}
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		json_t *req = frame_recv(fd);
		if (!req)
			break;
		json_t *resp = mon_answer(req);
		if (!resp) /* a name jansson would not take: no answer, not no monitor */
			resp = json_object();
		json_decref(req);
		int rc = frame_send(fd, resp);
		json_decref(resp);
		if (rc != 0)
			break;
	}
}

/* The worker's uid and gid when the host has no brig-egress user: one no
 * other process has (not nobody's, which host daemons, a brig serve or
 * another container may run as, and whose /proc a worker could then read,
 * or whose processes it could signal), above the ranges user namespaces
 * and systemd hand out, and not (uid_t)-1 or -2. */
#define BRIG_EGRESS_WORKER_ID 2147483646u

/* The worker's rights: its own uid and group, no other group, ended with
 * the monitor. 0, or -1 (errno). */
static int become_worker(pid_t monitor_pid, uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
		return -1;
	/* after the uid change, which clears it */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != monitor_pid)
		return -1;
	return 0;
}

/* The daemon's client and the ledger (the monitor's, or the one process's). */
static int open_monitored(brig_error **err)
{
	brig_engine_opts eo = {.version = BRIG_ENGINE_OPTS_VERSION, .tls_verify = -1};
	int rc = brig_engine_open(&engine, &eo, err);
	if (rc)
		return rc;
	/* The ledger first: once the port answers, where rows go is settled. */
	brig_error *serr = NULL;
	if (brig_store_open(&ledger, NULL, &serr) != 0) {
		log_note("ledger", "unavailable", brig_error_message(serr));
		brig_error_free(serr);
		ledger = NULL;
	}
	return 0;
}

/* What open_monitored opened, closed (a start that failed). */
static void close_monitored(void)
{
	brig_store_close(ledger);
	ledger = NULL;
	brig_engine_free(engine);
	engine = NULL;
}

int brig_egress__test_overrides_check(brig_error **err)
{
	const char *test = getenv("BRIG_EGRESS_TEST");
	if (test && strcmp(test, "1") == 0)
		return 0;
	static const char *const names[] = {"BRIG_EGRESS_HOSTS", "BRIG_EGRESS_UPSTREAM_CA"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (getenv(names[i]))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "egress proxy: %s is set; it is for brig's tests only (they also set "
					       "BRIG_EGRESS_TEST=1): unset it",
					       names[i]);
	return 0;
}

/* Accepts on lfd (one process), or takes what the monitor accepted (a
 * worker), until the network is gone or idle a minute (the monitor gone,
 * for a worker). */
static void serve_loop(int lfd)
{
	int64_t empty_since = 0;
	int in = mon_fd >= 0 ? acc_fd : lfd;
	for (;;) {
		/* A worker whose monitor is gone ends at once: the monitor,
		 * without capabilities, cannot send the worker's uid its death signal. A
		 * reply (POLLIN) is a thread's to read, never this loop's. */
		struct pollfd pf[2] = {{.fd = in, .events = POLLIN}, {.fd = mon_fd, .events = POLLRDHUP}};
		int r;
		while ((r = poll(pf, mon_fd >= 0 ? 2 : 1, 2000)) < 0 && errno == EINTR)
			;
		if (mon_fd >= 0 && (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			break;
		if (r > 0 && !(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (r == 0 || r < 0) {
			int n = attached();
			if (n < 0)
				break; /* the network is gone */
			if (n > 0 || atomic_load(&active) > 0)
				empty_since = 0;
			else if (!empty_since)
				empty_since = brig_now_ms();
			else if (brig_now_ms() - empty_since > IDLE_EXIT_MS)
				break;
			continue;
		}
		if (r < 0)
			continue;
		struct sockaddr_in peer;
		socklen_t pl = sizeof peer;
		int fd = -1;
		uint64_t id = 0;
		if (mon_fd >= 0) {
			int t = worker_take(in, &fd, &id);
			if (t < 0)
				break; /* the monitor is gone */
			if (t > 0)
				continue;
			if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || pl != sizeof peer ||
			    peer.sin_family != AF_INET) {
				close(fd);
				mon_done(id);
				continue;
			}
		} else if ((fd = accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC)) < 0) {
			continue;
		}
		empty_since = 0;
		uint32_t gw = 0;
		inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &gw);
		/* brig's own is-it-up probe, too many at once, or too many from
		 * this address: closed before any daemon look-up or ledger row,
		 * so a flood costs neither dockerd nor the store */
		if (peer.sin_addr.s_addr == gw || atomic_load(&active) >= CONN_MAX ||
		    !brig_egress__peer_take(&peers, peer.sin_addr.s_addr, BRIG_EGRESS_PEER_MAX)) {
			close(fd);
			if (id)
				mon_done(id);
			continue;
		}
		conn *c = xcalloc(1, sizeof *c);
		c->fd = fd;
		c->mon_id = id;
		c->addr = peer.sin_addr.s_addr;
		c->port = 0;
		inet_ntop(AF_INET, &peer.sin_addr, c->peer, sizeof c->peer);
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		/* a sandbox that stops reading must not hold this thread in
		 * send() forever: a blocked send gives up after a minute */
		struct timeval sndto = {.tv_sec = 60};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sndto, sizeof sndto);
		atomic_fetch_add(&active, 1);
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 512 * 1024);
		pthread_t t;
		if (pthread_create(&t, &at, serve_conn, c) != 0) {
			if (id)
				mon_done(id);
			brig_egress__peer_drop(&peers, c->addr);
			atomic_fetch_sub(&active, 1);
			close(fd);
			free(c);
		}
		pthread_attr_destroy(&at);
	}
}

int brig_egress_proxy_serve(brig_error **err)
{
	/* Overrides that skip the address checks or trust another authority:
	 * never from an environment that merely leaked them. */
	int rc = brig_egress__test_overrides_check(err);
	if (rc)
		return rc;
	cleanup_free char *dir = NULL;
	rc = brig_egress_dir(&dir, err);
	if (rc)
		return rc;
	if ((rc = brig_mkdir_p(dir, 0700, "the egress folder", err)) != 0)
		return rc;
	cleanup_free char *lock = xasprintf("%s/proxy.lock", dir);
	cleanup_close int lk = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lk < 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress proxy: cannot open %s: %s", lock, strerror(errno));
	if (flock(lk, LOCK_EX | LOCK_NB) != 0)
		return 0; /* another proxy serves */
	/* Started by root: a worker and its monitor (see "privilege
	 * separation"), forked before the daemon's client or the store exist,
	 * so that no credential of theirs is in the worker's memory. */
	bool split = geteuid() == 0;
	if (!split && (rc = open_monitored(err)) != 0)
		return rc;
	cleanup_free char *pidpath = xasprintf("%s/proxy.pid", dir);
	FILE *pf = fopen(pidpath, "we");
	if (pf) {
		fprintf(pf, "%ld\n", (long)getpid());
		fclose(pf);
	}
	int lfd = listen_gateway(!split, err);
	if (lfd < 0) {
		unlink(pidpath);
		close_monitored();
		return lfd;
	}
	signal(SIGPIPE, SIG_IGN);
	/* What the worker could not open once it is its own uid: the authority
	 * (made now when missing) and the test-only overrides' files. */
	brig_egress__bump_preload();
	hosts_preload();
	pid_t worker = -1;
	int sv[2] = {-1, -1}, ac[2] = {-1, -1};
	bool hosts_set = getenv("BRIG_EGRESS_HOSTS") != NULL, ca_set = getenv("BRIG_EGRESS_UPSTREAM_CA") != NULL;
	if (split) {
		const struct passwd *pw = getpwnam("brig-egress");
		if (pw && (pw->pw_uid == 0 || pw->pw_gid == 0))
			pw = NULL; /* a brig-egress of root's: never the worker's */
		uid_t wuid = pw ? pw->pw_uid : BRIG_EGRESS_WORKER_ID;
		gid_t wgid = pw ? pw->pw_gid : BRIG_EGRESS_WORKER_ID;
		pid_t me = getpid();
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
		    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ac) != 0 || (worker = fork()) < 0) {
			int e = errno;
			for (int i = 0; i < 2; i++) {
				if (sv[i] >= 0)
					close(sv[i]);
				if (ac[i] >= 0)
					close(ac[i]);
			}
			close(lfd);
			unlink(pidpath);
			return brig__error_set(err, BRIG_EIO, e, "egress proxy: cannot start its worker: %s",
					       strerror(e));
		}
		if (worker == 0) {
			/* nothing of the monitor's: not the daemon's socket, not the
			 * store, not the listener (the monitor accepts) */
			for (int fd = 3; fd < 65536; fd++)
				if (fd != sv[1] && fd != ac[1])
					close(fd);
			lk = -1;
			lfd = -1;
			/* nor its environment (a store URL, PG*, DOCKER_*): what
			 * the worker needed of it is loaded */
			for (char **e = environ; e && *e; e++)
				explicit_bzero(*e, strlen(*e)); /* the strings stay in memory */
			clearenv();
			/* the bounding set while root may still change it */
			if (bset_drop() != 0 || become_worker(me, wuid, wgid) != 0 || drop_privileges() != 0) {
				log_note("error", "the worker cannot give up root", strerror(errno));
				_exit(1);
			}
			/* before any thread: each inherits it */
			if (brig_egress__worker_seccomp() != 0) {
				log_note("error", "the worker cannot limit its system calls", strerror(errno));
				_exit(1);
			}
			mon_fd = sv[1];
			acc_fd = ac[1];
			json_t *ready = frame_recv(mon_fd);
			if (!ready)
				_exit(1);
			json_decref(ready);
		} else {
			close(sv[1]);
			close(ac[1]);
			/* the port answers once the monitor can say who speaks */
			if ((rc = open_monitored(err)) == 0 && listen(lfd, 128) != 0) {
				rc = brig__error_set(err, BRIG_EIO, errno, "egress proxy: cannot listen on %s:%d: %s",
						     BRIG_EGRESS_GATEWAY, BRIG_EGRESS_PORT, strerror(errno));
				close_monitored();
			}
			if (rc != 0) {
				close(sv[0]); /* the worker ends */
				close(ac[0]);
				close(lfd);
				while (waitpid(worker, NULL, 0) < 0 && errno == EINTR)
					;
				unlink(pidpath);
				return rc;
			}
			if (drop_privileges() != 0)
				log_note("warning", "the monitor kept its capabilities", strerror(errno));
			json_t *ready = json_pack("{s:b}", "ready", 1);
			frame_send(sv[0], ready);
			json_decref(ready);
		}
	} else if (drop_privileges() != 0) {
		log_note("warning", "capabilities kept", strerror(errno));
	}
	if (worker > 0) {
		monitor(sv[0], lfd, ac[0]);
		ledger_flush();
		close(lfd); /* the port answers no more */
		close(ac[0]);
		close(sv[0]);
		int ws;
		while (waitpid(worker, &ws, 0) < 0 && errno == EINTR)
			;
		unlink(pidpath);
		return 0;
	}
	fprintf(stderr, "{\"proxy\":\"listening\",\"address\":\"%s:%d\",\"pid\":%ld,\"uid\":%ld}\n",
		BRIG_EGRESS_GATEWAY, BRIG_EGRESS_PORT, (long)(mon_fd >= 0 ? getppid() : getpid()), (long)getuid());
	fflush(stderr);
	if (hosts_set)
		log_note("warning", "BRIG_EGRESS_HOSTS is set",
			 "a test-only resolver override: the names it lists resolve to its addresses, local ones too, "
			 "without the proxy's address checks; never set it outside brig's tests");
	if (ca_set)
		log_note("warning", "BRIG_EGRESS_UPSTREAM_CA is set",
			 "a test-only trust override: upstreams of TLS the proxy terminates are verified against it "
			 "instead of the system's trust store; never set it outside brig's tests");
	serve_loop(lfd);
	if (lfd >= 0)
		close(lfd);
	/* Threads still relaying may log: the store stays open until exit. */
	if (mon_fd < 0)
		ledger_flush();
	fprintf(stderr, "{\"proxy\":\"exiting\"}\n");
	fflush(stderr);
	if (mon_fd >= 0)
		_exit(0); /* the worker: none of the monitor's exit work */
	unlink(pidpath);
	return 0;
}
