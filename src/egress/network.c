/* network.c — the egress network (internal, inter-container traffic off),
 * its firewall, the proxy's start, and what each egress sandbox needs at
 * start: no default route, and its rules file. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/sandbox.h"
#include "brig/spec.h"
#include "brig/store.h"
#include "egress/egress_internal.h"
#include "sandbox/firewall.h"
#include "sandbox/internal.h"
#include "util/util.h"

extern char **environ;

#define STR2(x) #x
#define STR(x) STR2(x)

static int network_ensure(brig_engine *e, char **out_id, brig_error **err)
{
	/* Internal: Docker neither forwards nor masquerades for it. A fixed
	 * interface name and subnet settle a creation race. */
	cleanup_json json_t *body =
		json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:{s:s, s:s}, s:{s:s, s:[{s:s, s:s}]}, s:{s:s, s:s, s:s}}",
			  "Name", BRIG_EGRESS_NETWORK, "Driver", "bridge", "CheckDuplicate", 1, "Internal", 1,
			  "Attachable", 0, "EnableIPv6", 0, "Options", "com.docker.network.bridge.enable_icc", "false",
			  "com.docker.network.bridge.name", BRIG_EGRESS_BRIDGE, "IPAM", "Driver", "default", "Config",
			  "Subnet", BRIG_EGRESS_SUBNET, "Gateway", BRIG_EGRESS_GATEWAY, "Labels", BRIG_LABEL_MANAGED,
			  "1", BRIG_LABEL_KIND, "network", BRIG_LABEL_VERSION, BRIG_VERSION);
	cleanup_json json_t *keep = NULL;
	int rc = brig_network__ensure_named(e, &keep, BRIG_EGRESS_NETWORK, body, BRIG_EGRESS_SUBNET, "", err);
	if (rc)
		return rc;
	if (!json_is_true(json_object_get(keep, "Internal")))
		return brig__error_set(err, BRIG_ECONFLICT, 0,
				       "the %s network is not internal; `brig network rm --egress` it once no computer "
				       "is attached",
				       BRIG_EGRESS_NETWORK);
	if (out_id)
		*out_id = xstrdup(json_string_value(json_object_get(keep, "Id")));
	return 0;
}

/* Connects to the proxy: true when something listens there. */
static bool proxy_listening(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(BRIG_EGRESS_PORT)};
	inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &a.sin_addr);
	bool ok = false;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
		ok = true;
	} else if (errno == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		ok = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0;
	}
	close(fd);
	return ok;
}

/* The brig program to run as the proxy. NULL when unknown. */
static char *proxy_program(void)
{
	const char *env = getenv("BRIG_BIN");
	if (env && env[0] == '/' && access(env, X_OK) == 0)
		return xstrdup(env);
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	const char *base = strrchr(self, '/');
	if (base && strcmp(base + 1, "brig") == 0)
		return xstrdup(self);
	return NULL;
}

/* What the proxy's environment keeps of its starter's: where the store,
 * the egress folder and the daemon are (and the store's own libpq
 * settings, PG*), PATH and HOME, the sanitizers' options, and the
 * test-only resolver override. Nothing else: the brig that starts the
 * proxy may hold credentials (API keys, tokens) the proxy has no use for,
 * and it lives on, serving sandboxes, after that brig has gone. */
static bool proxy_env_kept(const char *entry)
{
	static const char *const names[] = {
		"PATH",
		"HOME",
		"TMPDIR",
		"LD_LIBRARY_PATH",
		"XDG_DATA_HOME",
		"BRIG_STORE",
		"BRIG_EGRESS_DIR",
		"BRIG_EGRESS_HOSTS",
		"BRIG_EGRESS_UPSTREAM_CA",
		"BRIG_EGRESS_TEST",
		"DOCKER_HOST",
		"DOCKER_TLS_VERIFY",
		"DOCKER_CERT_PATH",
		"ASAN_OPTIONS",
		"UBSAN_OPTIONS",
		"LSAN_OPTIONS",
	};
	const char *eq = strchr(entry, '=');
	if (!eq)
		return false;
	size_t n = (size_t)(eq - entry);
	if (n > 2 && strncmp(entry, "PG", 2) == 0)
		return true;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strlen(names[i]) == n && strncmp(entry, names[i], n) == 0)
			return true;
	return false;
}

size_t brig_egress__proxy_env(char **out, size_t max, char *const *env)
{
	size_t n = 0;
	for (; env && *env && n + 1 < max; env++)
		if (proxy_env_kept(*env))
			out[n++] = *env;
	out[n] = NULL;
	return n;
}

static char *store_used; /* brig_egress__use_store's */

void brig_egress__use_store(const char *url)
{
	free(store_used);
	store_used = url && *url ? xstrdup(url) : NULL;
}

static int proxy_start(brig_error **err)
{
	if (proxy_listening())
		return 0;
	cleanup_free char *prog = proxy_program();
	if (!prog)
		return brig__error_set(err, BRIG_EIO, 0,
				       "network egress needs the egress proxy, which is the brig program: set BRIG_BIN "
				       "to its path");
	cleanup_free char *dir = NULL;
	int rc = brig_egress_dir(&dir, err);
	if (rc)
		return rc;
	if ((rc = brig_mkdir_p(dir, 0700, "the egress folder", err)) != 0)
		return rc;
	cleanup_free char *log = xasprintf("%s/proxy.log", dir);
	char *const argv[] = {"brig", "egress-proxy", NULL};
	char *envp[64];
	size_t ne = brig_egress__proxy_env(envp, sizeof envp / sizeof *envp - 1, environ);
	/* the store this brig uses, when named: the proxy's own (rows of a
	 * sandbox without a mark) */
	cleanup_free char *store_env = store_used ? xasprintf("BRIG_STORE=%s", store_used) : NULL;
	if (store_env) {
		size_t k = 0;
		for (size_t i = 0; i < ne; i++)
			if (strncmp(envp[i], "BRIG_STORE=", 11) != 0)
				envp[k++] = envp[i];
		envp[k++] = store_env;
		envp[k] = NULL;
	}
	/* Everything the child needs is ready before fork: between fork and
	 * exec only async-signal-safe calls (the caller may have threads). */
	int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress proxy: cannot open %s: %s", log, strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		close(logfd);
		return brig__error_set(err, BRIG_EIO, errno, "egress proxy: fork: %s", strerror(errno));
	}
	if (pid == 0) {
		if (setsid() < 0)
			_exit(1);
		pid_t g = fork();
		if (g != 0)
			_exit(g < 0 ? 1 : 0);
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(devnull, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		syscall(SYS_close_range, 3, ~0u, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve(prog, argv, envp);
		_exit(127);
	}
	close(logfd);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	for (int64_t until = brig_now_ms() + 5000; brig_now_ms() < until;) {
		if (proxy_listening())
			return 0;
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return brig__error_set(err, BRIG_EIO, 0, "the egress proxy (%s egress-proxy) did not come up; see %s", prog,
			       log);
}

int brig_egress_ensure(brig_engine *e, char **out_id, brig_error **err)
{
	cleanup_free char *id = NULL;
	int rc = network_ensure(e, &id, err);
	if (rc == 0)
		rc = brig_firewall__install_egress(BRIG_EGRESS_BRIDGE, BRIG_EGRESS_GATEWAY, STR(BRIG_EGRESS_PORT), err);
	if (rc == 0)
		rc = proxy_start(err);
	if (rc)
		return brig__error_prefix(err, rc, "network egress");
	if (out_id)
		*out_id = steal_pointer(&id);
	return 0;
}

int brig_egress_remove(brig_engine *e, brig_error **err)
{
	cleanup_json json_t *nets = NULL;
	int rc = brig_network__list_exact(e, &nets, BRIG_EGRESS_NETWORK, err);
	if (rc)
		return rc;
	size_t i;
	json_t *n;
	json_array_foreach (nets, i, n) {
		if (!brig_network__is_brigs(n))
			return brig__error_set(err, BRIG_ECONFLICT, 0, "network %s is not brig's; not removing it",
					       BRIG_EGRESS_NETWORK);
		const char *id = json_string_value(json_object_get(n, "Id"));
		cleanup_json json_t *full = NULL;
		if ((rc = brig_engine_network_inspect(e, &full, id, err)) != 0) {
			if (rc == BRIG_ENOTFOUND) {
				brig__error_clear(err);
				continue;
			}
			return rc;
		}
		size_t k = json_object_size(json_object_get(full, "Containers"));
		if (k > 0)
			return brig__error_set(err, BRIG_EBUSY, 0,
					       "network %s still has %zu attached container(s); destroy them first",
					       BRIG_EGRESS_NETWORK, k);
		rc = brig_engine_network_remove(e, id, err);
		if (rc == BRIG_ENOTFOUND) {
			brig__error_clear(err);
			rc = 0;
		}
		if (rc)
			return rc;
	}
	return brig_firewall__remove_egress(err);
}

/* Fixed places, not PATH: this may run as root. */
static const char *ip_program(void)
{
	static const char *const c[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip", NULL};
	for (const char *const *p = c; *p; p++)
		if (access(*p, X_OK) == 0)
			return *p;
	return NULL;
}

/* NAME.store: the store the proxy writes the sandbox's ledger rows to:
 * brig_egress__use_store's (brig's CLI: its --store), else the one
 * brig_store_open(NULL) opens here ($BRIG_STORE, then the default), made
 * absolute: the proxy is one per
 * host, started by whichever brig came first, and may run on after it with
 * another store and another working directory. Written for a new sandbox
 * (fresh: true) and for one that has none; an adopted one keeps its own.
 * Without a default store (no $HOME) there is none, and rows go to the
 * proxy's store. */
static int store_mark(const char *name, bool fresh, brig_error **err)
{
	cleanup_free char *path = NULL, *url = NULL;
	int rc = brig_egress__sandbox_path(&path, name, ".store", err);
	if (rc)
		return rc;
	struct stat sb;
	if (!fresh && lstat(path, &sb) == 0)
		return 0;
	if (store_used)
		url = xstrdup(store_used);
	else if (brig_store_default_url(&url, NULL) != 0)
		return 0;
	const char *file = url;
	size_t scheme = strncmp(url, "sqlite://", 9) == 0 ? 9 : strncmp(url, "sqlite:", 7) == 0 ? 7 : 0;
	bool pg = strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
	file += scheme;
	cleanup_free char *abs = NULL;
	char cwd[4096];
	if (!pg && file[0] != '/') {
		if (!getcwd(cwd, sizeof cwd))
			return 0; /* nowhere to say it is: the proxy's store */
		abs = xasprintf("sqlite://%s/%s", cwd, file);
	}
	const char *mark = abs ? abs : url;
	return brig_egress__file_write(path, mark, strlen(mark), err);
}

int brig_egress__sandbox_start(brig_engine *e, const char *cid, const char *name, const char *const *rules,
			       size_t count, bool write_rules, brig_error **err)
{
	int rc;
	if (write_rules && (rc = brig_egress_rules_set(name, rules, count, err)) != 0)
		return rc;
	if ((rc = store_mark(name, write_rules, err)) != 0)
		return rc;
	/* Docker gives an internal network's containers a default route via
	 * the host (where nothing is forwarded). brig takes it away, so a
	 * sandbox sees that only its own subnet exists. Needs root on the
	 * daemon's machine, as the firewall does; without, the route stays
	 * and leads nowhere. */
	cleanup_json json_t *j = NULL;
	if ((rc = brig_engine_container_inspect(e, &j, cid, err)) != 0)
		return rc;
	json_int_t pid = json_integer_value(json_object_get(json_object_get(j, "State"), "Pid"));
	const char *ip = ip_program();
	if (pid <= 0 || !ip || geteuid() != 0)
		return 0;
	char ns[64];
	snprintf(ns, sizeof ns, "/proc/%lld/ns/net", (long long)pid);
	int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		return 0;
	char *const argv[] = {(char *)ip, "route", "del", "default", NULL};
	static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	pid_t child = fork();
	if (child == 0) {
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		if (setns(nsfd, CLONE_NEWNET) != 0)
			_exit(126);
		execve(ip, argv, envp);
		_exit(127);
	}
	close(nsfd);
	if (child < 0)
		return 0;
	int st;
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

int brig_egress_update(brig_engine *e, const char *name, const char *rule, bool allow, brig_error **err)
{
	char canon[BRIG_EGRESS_RULE_SIZE];
	int rc = brig_egress_rule_parse(canon, rule, err);
	if (rc)
		return rc;
	brig_computer *c = NULL;
	if ((rc = brig_computer_get(e, &c, name, NULL, err)) != 0)
		return brig__error_prefix(err, rc, "egress %s", name);
	bool egress = c->network && strcmp(c->network, "egress") == 0;
	cleanup_free char *cname = xstrdup(c->name);
	brig_computer_free(c);
	if (!egress)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "egress %s: the computer is not of network egress; its network cannot be "
				       "filtered by host (create it with --network egress)",
				       name);
	/* One writer at a time: two updates must not lose each other. */
	cleanup_free char *dir = NULL;
	if ((rc = brig_egress_dir(&dir, err)) != 0)
		return rc;
	if ((rc = brig_mkdir_p(dir, 0700, "the egress folder", err)) != 0)
		return rc;
	cleanup_free char *lockp = xasprintf("%s/rules.lock", dir);
	cleanup_close int lk = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lk < 0 || flock(lk, LOCK_EX) != 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot lock %s: %s", lockp, strerror(errno));
	char **rules = NULL;
	size_t n = 0;
	if ((rc = brig_egress_rules_get(&rules, &n, cname, err)) != 0)
		return rc;
	const char *next[BRIG_EGRESS_RULES_MAX + 1];
	size_t m = 0;
	bool present = false;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(rules[i], canon) == 0) {
			present = true;
			if (!allow)
				continue;
		}
		next[m++] = rules[i];
	}
	if (allow && !present) {
		if (m >= BRIG_EGRESS_RULES_MAX) {
			brig_egress_rules_free(rules);
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "egress %s: already %d rules, the most there can be", name,
					       BRIG_EGRESS_RULES_MAX);
		}
		next[m++] = canon;
	}
	rc = 0;
	if (allow != present)
		rc = brig_egress_rules_set(cname, next, m, err);
	brig_egress_rules_free(rules);
	return rc;
}
