/* firewall.c — iptables rules installed and removed with the isolated
 * bridge, so a sandbox reaches the internet and the ports Docker publishes,
 * and never the host's own services or the link-local metadata range.
 *
 * Why these rules (measured on Docker 20.10, iptables 1.8 nft backend):
 *  - A container on a bridge reaches every service listening on the host
 *    through the gateway address (or any host address): those packets are
 *    for a local address, so they take the INPUT chain, which Docker leaves
 *    open. brig drops everything from brig0 on INPUT except replies.
 *  - Docker's embedded DNS (127.0.0.11) answers inside each container's
 *    network namespace, and forwards from there or from the host's own
 *    namespace, so it never crosses the host's INPUT from brig0.
 *  - Published ports: with the daemon's default userland proxy, a bridge
 *    created with masquerading on gets "-t nat -A DOCKER -i brig0 -j
 *    RETURN", which skips Docker's DNAT for traffic from the bridge and
 *    sends it to docker-proxy through INPUT — indistinguishable there from
 *    any other host service. brig therefore creates its bridge with
 *    enable_ip_masquerade=false (no RETURN rule) and adds the MASQUERADE
 *    rule itself; published ports are then DNATed to their container and
 *    cross FORWARD, where DOCKER-USER accepts exactly the DNATed
 *    connections ahead of Docker's inter-network isolation, which would
 *    drop them. A port published only on 127.0.0.1 is not DNATed for the
 *    bridge and stays unreachable.
 *  - A computer's own published port: Docker accepts, in its DOCKER chain,
 *    every forwarded connection to the container's address and port from
 *    any other interface, DNATed or not, so a machine on the LAN that
 *    routes the bridge's subnet through this host would reach a port
 *    published on 127.0.0.1 directly. DOCKER-USER drops new connections
 *    into the bridge that no published binding DNATed (replies to the
 *    sandboxes' own connections are not new; the host's own connections
 *    leave through OUTPUT, not FORWARD).
 *  - Containers on a bridge without IPv6 get disable_ipv6=1 in their own
 *    namespace and cannot change it (/proc/sys is read-only), so there is
 *    no IPv6 path to the host's link-local address.
 * The rules live on the machine of the iptables brig runs: a daemon on
 * another machine cannot be protected from here (install refuses). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/spec.h"
#include "sandbox/firewall.h"
#include "util/util.h"

#define LOCK_PATH "/run/brig-firewall.lock"
#define LIST_MAX (8u << 20) /* iptables -S of one chain */
#define MAX_ARGS 32

typedef struct fw_rule {
	const char *table;
	const char *chain;
	const char *args[MAX_ARGS]; /* NULL-terminated match and target */
} fw_rule;

const char *brig_firewall__iptables(void)
{
	static const char *const candidates[] = {"/usr/sbin/iptables", "/sbin/iptables", "/usr/bin/iptables",
						 "/bin/iptables", NULL};
	/* Fixed places, not PATH: this runs as root. BRIG_IPTABLES is for
	 * tests and unusual installs. */
	const char *env = getenv("BRIG_IPTABLES");
	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (const char *const *c = candidates; *c; c++)
		if (access(*c, X_OK) == 0)
			return *c;
	return NULL;
}

static bool firewall_off(void)
{
	const char *v = getenv(BRIG_FIREWALL_ENV);
	return v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

/* Runs iptables with args (NULL-terminated, without the program name).
 * stdout goes to out (may be NULL), stderr's first line to errbuf.
 * Returns the exit status, or -1 when it could not be run. */
static int run_iptables(const char *ipt, const char *const *args, brig_buf *out, char *errbuf, size_t errlen)
{
	const char *argv[MAX_ARGS + 8];
	size_t n = 0;
	argv[n++] = ipt;
	for (size_t i = 0; args[i] && n < MAX_ARGS + 6; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	errbuf[0] = '\0';

	int po[2];
	if (pipe2(po, O_CLOEXEC) != 0) {
		snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	int efd = memfd_create("brig-iptables-stderr", MFD_CLOEXEC);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(errbuf, errlen, "fork: %s", strerror(errno));
		close(po[0]);
		close(po[1]);
		if (efd >= 0)
			close(efd);
		return -1;
	}
	if (pid == 0) {
		/* Only async-signal-safe calls: the caller may have threads. */
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(devnull, 0);
		dup2(po[1], 1);
		dup2(efd >= 0 ? efd : devnull, 2);
		static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
		execve(argv[0], (char *const *)argv, envp);
		_exit(127);
	}
	close(po[1]);
	char buf[65536];
	for (;;) {
		ssize_t r = read(po[0], buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		/* Past the cap the listing is cut (the pipe is still drained);
		 * nothing later is appended, so no line is spliced. */
		if (out && brig_buf_add(out, buf, (size_t)r) < 0)
			out = NULL;
	}
	close(po[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (efd >= 0) {
		ssize_t r = pread(efd, errbuf, errlen - 1, 0);
		errbuf[r > 0 ? r : 0] = '\0';
		errbuf[strcspn(errbuf, "\n")] = '\0';
		close(efd);
	}
	if (!WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* "-t TABLE --wait VERB CHAIN [pos] args…" */
static int rule_cmd(const char *ipt, const char *verb, const fw_rule *r, const char *pos, char *errbuf, size_t errlen)
{
	const char *a[MAX_ARGS + 8];
	size_t n = 0;
	a[n++] = "-t";
	a[n++] = r->table;
	a[n++] = "--wait";
	a[n++] = verb;
	a[n++] = r->chain;
	if (pos)
		a[n++] = pos;
	for (size_t i = 0; r->args[i] && n < MAX_ARGS + 6; i++)
		a[n++] = r->args[i];
	a[n] = NULL;
	return run_iptables(ipt, a, NULL, errbuf, errlen);
}

static int fail(brig_error **err, const char *what, const fw_rule *r, const char *why)
{
	return brig__error_set(err, BRIG_EDENIED, 0,
			       "firewall for the %s bridge: iptables could not %s a rule in %s %s: %s; brig needs "
			       "root (CAP_NET_ADMIN) on the daemon's machine to keep sandboxes off the host's "
			       "services (or set %s=off to accept that they can reach them)",
			       BRIG_NETWORK_NAME, what, r->table, r->chain, why && *why ? why : "failed",
			       BRIG_FIREWALL_ENV);
}

/* One group of rules that must sit at the top of its chain, in order. All
 * present: nothing to do. Otherwise the present ones are deleted and the
 * group is inserted afresh (a half-installed group can be in the wrong
 * order, such as DROP above the ACCEPT of replies). */
static int ensure_group(const char *ipt, const fw_rule *g, size_t n, brig_error **err)
{
	char e[512];
	bool present[8] = {false};
	bool all = true;
	for (size_t i = 0; i < n; i++) {
		int rc = rule_cmd(ipt, "-C", &g[i], NULL, e, sizeof e);
		present[i] = rc == 0;
		if (rc != 0 && rc != 1)
			return fail(err, "check", &g[i], e);
		all = all && present[i];
	}
	if (all)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (present[i] && rule_cmd(ipt, "-D", &g[i], NULL, e, sizeof e) != 0)
			return fail(err, "delete", &g[i], e);
	for (size_t i = n; i-- > 0;)
		if (rule_cmd(ipt, "-I", &g[i], "1", e, sizeof e) != 0)
			return fail(err, "insert", &g[i], e);
	return 0;
}

static int lock_open(void)
{
	int fd = open(LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1; /* not root: iptables will say so */
	while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
		;
	return fd;
}

static void lock_close(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

static bool bridge_name_ok(const char *b)
{
	size_t n = b ? strlen(b) : 0;
	if (n == 0 || n > 15)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-' || c == '.'))
			return false;
	}
	return true;
}

#define C "-m", "comment", "--comment", BRIG_FIREWALL_COMMENT

int brig_firewall__install(const char *bridge, const char *subnet, brig_error **err)
{
	if (firewall_off())
		return 0;
	if (!bridge_name_ok(bridge))
		return brig__error_set(err, BRIG_EINVAL, 0, "firewall: bad bridge interface name");
	int rc = brig_subnet_validate(subnet, err);
	if (rc)
		return rc;
	const char *ipt = brig_firewall__iptables();
	const char *env_ipt = getenv("BRIG_IPTABLES");
	if (!ipt)
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "network isolated needs the iptables program (apt-get install iptables) to "
				       "keep sandboxes on the %s bridge off the host's own services; %s%s%s (or set "
				       "%s=off to accept that they can reach them)",
				       BRIG_NETWORK_NAME,
				       env_ipt && *env_ipt ? "BRIG_IPTABLES=" : "none found in /usr/sbin, /sbin, /usr/bin or /bin",
				       env_ipt && *env_ipt ? env_ipt : "", env_ipt && *env_ipt ? " is not executable" : "",
				       BRIG_FIREWALL_ENV);
	char sys[64];
	snprintf(sys, sizeof sys, "/sys/class/net/%s", bridge);
	if (access(sys, F_OK) != 0)
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "the %s bridge's interface %s is not on this machine: the Docker daemon runs "
				       "elsewhere (DOCKER_HOST), where brig cannot install the firewall that keeps "
				       "sandboxes off that host's services; run brig on the daemon's machine, or "
				       "set %s=off to accept the exposure",
				       BRIG_NETWORK_NAME, bridge, BRIG_FIREWALL_ENV);

	const fw_rule input[] = {
		{"filter", "INPUT", {"-i", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", C, "-j", "ACCEPT"}},
		{"filter", "INPUT", {"-i", bridge, C, "-j", "DROP"}},
	};
	const fw_rule forward[] = {
		{"filter", "DOCKER-USER", {"-i", bridge, "-d", "169.254.0.0/16", C, "-j", "DROP"}},
		{"filter",
		 "DOCKER-USER",
		 {"-i", bridge, "!", "-o", bridge, "-m", "conntrack", "--ctstate", "DNAT", "--ctdir", "ORIGINAL", C, "-j",
		  "ACCEPT"}},
		{"filter",
		 "DOCKER-USER",
		 {"-o", bridge, "!", "-i", bridge, "-m", "conntrack", "--ctstate", "DNAT", "--ctdir", "REPLY", C, "-j",
		  "ACCEPT"}},
		{"filter",
		 "DOCKER-USER",
		 {"-o", bridge, "!", "-i", bridge, "-m", "conntrack", "--ctstate", "NEW", "-m", "conntrack", "!",
		  "--ctstate", "DNAT", C, "-j", "DROP"}},
	};
	const fw_rule masq = {"nat", "POSTROUTING", {"-s", subnet, "!", "-o", bridge, C, "-j", "MASQUERADE"}};

	char e[512];
	const char *list_user[] = {"-t", "filter", "--wait", "-S", "DOCKER-USER", NULL};
	if (run_iptables(ipt, list_user, NULL, e, sizeof e) != 0)
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "firewall for the %s bridge: no DOCKER-USER chain (%s); brig needs root, and "
				       "a daemon that manages iptables (not --iptables=false), to keep sandboxes off "
				       "the host (or set %s=off to accept that they can reach it)",
				       BRIG_NETWORK_NAME, *e ? e : "iptables failed", BRIG_FIREWALL_ENV);

	int lk = lock_open();
	rc = ensure_group(ipt, input, sizeof input / sizeof input[0], err);
	if (rc == 0)
		rc = ensure_group(ipt, forward, sizeof forward / sizeof forward[0], err);
	if (rc == 0) {
		int c = rule_cmd(ipt, "-C", &masq, NULL, e, sizeof e);
		if (c == 1 && rule_cmd(ipt, "-A", &masq, NULL, e, sizeof e) != 0)
			rc = fail(err, "append", &masq, e);
		else if (c != 0 && c != 1)
			rc = fail(err, "check", &masq, e);
	}
	lock_close(lk);
	return rc;
}

#undef C

/* True when an `iptables -S` line carries exactly the comment. */
static bool is_ours(const char *line, const char *comment)
{
	char tag[64];
	snprintf(tag, sizeof tag, "--comment %s", comment);
	const char *p = strstr(line, tag);
	if (!p || strchr(line, '"'))
		return false;
	char after = p[strlen(tag)];
	return after == ' ' || after == '\0';
}

/* Deletes brig's rules from one chain; returns 0 or BRIG_EDENIED. */
static int sweep_chain(const char *ipt, const char *table, const char *chain, const char *comment, brig_error **err)
{
	char e[512];
	for (int round = 0; round < 64; round++) {
		brig_buf out;
		brig_buf_init(&out, LIST_MAX);
		const char *list[] = {"-t", table, "--wait", "-S", chain, NULL};
		int rc = run_iptables(ipt, list, &out, e, sizeof e);
		if (rc != 0) {
			brig_buf_free(&out);
			return 0; /* no such chain: nothing of ours there */
		}
		char *text = brig_buf_steal(&out, NULL);
		bool deleted = false;
		char *save = NULL;
		for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			if (strncmp(line, "-A ", 3) != 0 || !is_ours(line, comment))
				continue;
			const char *a[MAX_ARGS + 8];
			size_t n = 0;
			a[n++] = "-t";
			a[n++] = table;
			a[n++] = "--wait";
			char *tsave = NULL;
			for (char *t = strtok_r(line, " ", &tsave); t && n < MAX_ARGS + 6; t = strtok_r(NULL, " ", &tsave)) {
				a[n] = n == 3 && strcmp(t, "-A") == 0 ? "-D" : t;
				n++;
			}
			a[n] = NULL;
			if (run_iptables(ipt, a, NULL, e, sizeof e) != 0) {
				free(text);
				return brig__error_set(err, BRIG_EDENIED, 0,
						       "firewall: iptables could not delete brig's rule from %s %s: %s",
						       table, chain, *e ? e : "failed");
			}
			deleted = true;
		}
		free(text);
		if (!deleted)
			return 0;
		/* Listed again: duplicates left by a racing install go too. */
	}
	return 0;
}

int brig_firewall__remove(bool (*still_needed)(void *payload), void *payload, brig_error **err)
{
	if (firewall_off())
		return 0;
	const char *ipt = brig_firewall__iptables();
	if (!ipt)
		return 0;
	int lk = lock_open();
	int rc = 0;
	if (!still_needed || !still_needed(payload)) {
		rc = sweep_chain(ipt, "filter", "INPUT", BRIG_FIREWALL_COMMENT, err);
		if (rc == 0)
			rc = sweep_chain(ipt, "filter", "DOCKER-USER", BRIG_FIREWALL_COMMENT, err);
		if (rc == 0)
			rc = sweep_chain(ipt, "nat", "POSTROUTING", BRIG_FIREWALL_COMMENT, err);
	}
	lock_close(lk);
	return rc;
}

/* ---- the egress network's rules ---- */

#define E "-m", "comment", "--comment", BRIG_FIREWALL_EGRESS_COMMENT

int brig_firewall__install_egress(const char *bridge, const char *gateway, const char *port, brig_error **err)
{
	if (firewall_off())
		return 0;
	if (!bridge_name_ok(bridge))
		return brig__error_set(err, BRIG_EINVAL, 0, "firewall: bad bridge interface name");
	const char *ipt = brig_firewall__iptables();
	if (!ipt)
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "network egress needs the iptables program (apt-get install iptables) to keep "
				       "sandboxes on the %s network off the host's own services (or set %s=off to "
				       "accept that they can reach them)",
				       bridge, BRIG_FIREWALL_ENV);
	char sys[64];
	snprintf(sys, sizeof sys, "/sys/class/net/%s", bridge);
	if (access(sys, F_OK) != 0)
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "the egress network's interface %s is not on this machine: the Docker daemon "
				       "runs elsewhere (DOCKER_HOST), where brig can neither run its egress proxy nor "
				       "install the firewall; run brig on the daemon's machine",
				       bridge);
	/* Only the proxy's port on the host; nothing forwarded anywhere (Docker
	 * already drops it for an internal network: this holds if it did not). */
	const fw_rule input[] = {
		{"filter",
		 "INPUT",
		 {"-i", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", E, "-j", "ACCEPT"}},
		{"filter", "INPUT", {"-i", bridge, "-p", "tcp", "-d", gateway, "--dport", port, E, "-j", "ACCEPT"}},
		{"filter", "INPUT", {"-i", bridge, E, "-j", "DROP"}},
		/* The proxy's port for nobody else but brig on this host (its
		 * is-it-up probe): not for containers on other bridges. */
		{"filter", "INPUT", {"-i", "lo", "-p", "tcp", "-d", gateway, "--dport", port, E, "-j", "ACCEPT"}},
		{"filter", "INPUT", {"-p", "tcp", "-d", gateway, "--dport", port, E, "-j", "DROP"}},
	};
	const fw_rule forward[] = {
		{"filter", "DOCKER-USER", {"-i", bridge, E, "-j", "DROP"}},
		{"filter", "DOCKER-USER", {"-o", bridge, E, "-j", "DROP"}},
	};
	int lk = lock_open();
	int rc = ensure_group(ipt, input, sizeof input / sizeof input[0], err);
	if (rc == 0)
		rc = ensure_group(ipt, forward, sizeof forward / sizeof forward[0], err);
	lock_close(lk);
	return rc;
}

#undef E

int brig_firewall__remove_egress(brig_error **err)
{
	if (firewall_off())
		return 0;
	const char *ipt = brig_firewall__iptables();
	if (!ipt)
		return 0;
	int lk = lock_open();
	int rc = sweep_chain(ipt, "filter", "INPUT", BRIG_FIREWALL_EGRESS_COMMENT, err);
	if (rc == 0)
		rc = sweep_chain(ipt, "filter", "DOCKER-USER", BRIG_FIREWALL_EGRESS_COMMENT, err);
	lock_close(lk);
	return rc;
}
