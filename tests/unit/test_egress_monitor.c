/* test_egress_monitor.c — the egress proxy's privilege separation. The
 * monitor answers a worker by the connections it accepted, never by a name
 * the worker gives: a worker that was taken over cannot ask for another
 * sandbox's secrets or rules, though they are on disk and the monitor
 * would read them (no daemon here, so no address is anyone's: what is
 * checked is what the requests may name). And the worker's seccomp filter
 * refuses what it must while its threads, sockets and files still work;
 * the worker takes only well-formed hand-overs, leaking no descriptor; and
 * a start whose port is taken fails clearly, leaving nothing behind. */
#include "testutil.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/egress.h"
#include "egress/egress_internal.h"
#include "util/util.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define VICTIM "brig-unit-mon-victim"

static char dir[128];

static int setup(void **state)
{
	(void)state;
	if (brig_test_tmpdir(dir, sizeof dir, "brig-unit-mon") != 0)
		return -1;
	setenv("BRIG_EGRESS_DIR", dir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_rmdir(dir);
	unsetenv("BRIG_EGRESS_DIR");
	return 0;
}

/* The answer to the request text; fails unless it is an object. */
static json_t *ask(const char *text)
{
	json_t *req = json_loads(text, 0, NULL);
	assert_non_null(req);
	json_t *resp = brig_egress__mon_answer(req);
	json_decref(req);
	assert_true(json_is_object(resp));
	return resp;
}

static void assert_empty(const char *text)
{
	json_t *r = ask(text);
	if (json_object_size(r) != 0) {
		char *dump = json_dumps(r, JSON_COMPACT);
		fail_msg("%s answered %s", text, dump);
	}
	json_decref(r);
}

static void test_names_are_not_asked_by(void **state)
{
	(void)state;
	brig_error *err = NULL;
	/* what the victim's computer has on disk: a secret and a rule */
	cleanup_free char *path = NULL;
	ASSERT_OK(brig_egress__sandbox_path(&path, VICTIM, ".secrets", &err), err);
	static const char line[] = "API_KEY brig-placeholder-0123 api.example.com 7365637265742d76616c7565\n";
	ASSERT_OK(brig_egress__file_write(path, line, strlen(line), &err), err);
	const char *rule = "api.example.com";
	ASSERT_OK(brig_egress_rules_set(VICTIM, &rule, 1, &err), err);
	brig_egress_secret *sec = NULL;
	size_t n = 0;
	ASSERT_OK(brig_egress__secrets_read(&sec, &n, VICTIM, &err), err);
	assert_int_equal(n, 1); /* it is there to be had */
	brig_egress__secrets_free(sec, n);

	/* by name, by address, by a connection never accepted: nothing */
	assert_empty("{\"op\":\"secrets\",\"sandbox\":\"" VICTIM "\"}");
	assert_empty("{\"op\":\"rules\",\"sandbox\":\"" VICTIM "\"}");
	assert_empty("{\"op\":\"who\",\"ip\":\"172.30.0.2\"}");
	assert_empty("{\"op\":\"secrets\",\"conn\":987654321}");
	assert_empty("{\"op\":\"secrets\",\"conn\":\"1\"}");
	assert_empty("{\"op\":\"secrets\",\"conn\":-1}");
	assert_empty("{\"op\":\"secrets\"}");

	/* an accepted connection from an address no sandbox has: nothing,
	 * and once ended (its ledger row), the number names nothing more */
	uint64_t id = brig_egress__mon_accepted(0x0200a8c0u);
	assert_true(id > 0);
	cleanup_free char *who = xasprintf("{\"op\":\"who\",\"conn\":%llu}", (unsigned long long)id);
	cleanup_free char *secrets = xasprintf("{\"op\":\"secrets\",\"sandbox\":\"" VICTIM "\",\"conn\":%llu}",
					       (unsigned long long)id);
	assert_empty(who);
	assert_empty(secrets);
	cleanup_free char *row = xasprintf("{\"op\":\"ledger\",\"conn\":%llu,\"sandbox\":\"" VICTIM
					   "\",\"host\":\"api.example.com\",\"port\":443,\"decision\":\"denied\","
					   "\"reason\":\"x\"}",
					   (unsigned long long)id);
	assert_empty(row);
	assert_true(brig_egress__mon_accepted(0x0300a8c0u) > id); /* numbers are never reused */
}

static void test_many_accepts(void **state)
{
	(void)state;
	/* more connections than the monitor keeps: the oldest go, the
	 * numbers keep rising, nothing breaks */
	uint64_t last = 0;
	for (int i = 0; i < 5000; i++) {
		uint64_t id = brig_egress__mon_accepted(0x0400a8c0u + ((uint32_t)i << 24));
		assert_true(id > last);
		last = id;
	}
	json_t *r = ask("{\"op\":\"attached\"}");
	json_decref(r);
}

static void *thread_fn(void *arg)
{
	return arg;
}

/* In a child under the filter: each check's failure is its exit code. */
static int filtered_child(void)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || brig_egress__worker_seccomp() != 0)
		return 1;
	/* what the worker does: threads, sockets of its families, files */
	pthread_t t;
	void *r = NULL;
	if (pthread_create(&t, NULL, thread_fn, (void *)"x") != 0 || pthread_join(t, &r) != 0 || !r)
		return 2;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return 3;
	close(fd);
	if ((fd = socket(AF_INET6, SOCK_DGRAM, 0)) >= 0)
		close(fd);
	else if (errno != EAFNOSUPPORT)
		return 4; /* a host without IPv6 may say EAFNOSUPPORT itself */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 5;
	close(sv[0]);
	close(sv[1]);
	if ((fd = socket(AF_NETLINK, SOCK_RAW, 0)) < 0)
		return 6;
	close(fd);
	if ((fd = open("/etc/hosts", O_RDONLY)) < 0)
		return 7;
	close(fd);
	/* what it must not */
	/* valgrind cannot go on after a refused execve: there, not tried */
	const char *pre = getenv("LD_PRELOAD");
	char *const argv[] = {(char *)"/bin/false", NULL}; /* run, it would fail the test */
	if ((!pre || !strstr(pre, "vgpreload")) && (execve("/bin/false", argv, NULL) == 0 || errno != EPERM))
		return 10;
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p >= 0 || errno != EPERM)
		return 11;
	if (socket(AF_PACKET, SOCK_RAW, 0) >= 0 || errno != EAFNOSUPPORT)
		return 12;
	if (socket(AF_VSOCK, SOCK_STREAM, 0) >= 0 || errno != EAFNOSUPPORT)
		return 13;
	if (syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0) == 0 || errno != EPERM)
		return 14;
	if (unshare(0) == 0 || errno != EPERM)
		return 15;
	char attr[128] = {0};
	if (syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof attr) >= 0 || errno != EPERM)
		return 16;
	return 0;
}

static void test_worker_seccomp(void **state)
{
	(void)state;
	fflush(NULL);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0)
		_exit(filtered_child());
	int ws = 0;
	assert_int_equal(waitpid(p, &ws, 0), p);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		fail_msg("under the worker's filter, check %d failed (status %#x)", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1,
			 ws);
}

/* How many descriptors this process has open. */
static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* Sends len bytes of id and nfds copies of fd, as the monitor would. */
static void hand(int s, const void *data, size_t len, int fd, int nfds)
{
	char ctl[CMSG_SPACE(4 * sizeof(int))];
	memset(ctl, 0, sizeof ctl);
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		for (int i = 0; i < nfds; i++)
			memcpy(CMSG_DATA(cm) + i * sizeof(int), &fd, sizeof fd);
	}
	assert_int_equal(sendmsg(s, &mh, MSG_NOSIGNAL), (ssize_t)len);
}

static void test_worker_take(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	int given = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(given >= 0);
	int before = fd_count();
	uint64_t id = 42, got_id = 0;
	unsigned char longer[16] = {0};
	int fd = -7;

	/* nothing there */
	assert_int_equal(brig_egress__worker_take(sv[1], &fd, &got_id), 1);
	/* the real thing: the socket (a new descriptor) and its number */
	hand(sv[0], &id, sizeof id, given, 1);
	assert_int_equal(brig_egress__worker_take(sv[1], &fd, &got_id), 0);
	assert_true(fd >= 0 && fd != given);
	assert_int_equal(got_id, 42);
	assert_int_equal(fd_count(), before + 1);
	close(fd);

	/* malformed: each is 1, with no descriptor left behind */
	struct {
		const char *what;
		const void *data;
		size_t len;
		int nfds;
	} bad[] = {
		{"a short number", &id, 4, 1},
		{"a longer message (truncated)", longer, sizeof longer, 1},
		{"no descriptor", &id, sizeof id, 0},
		{"two descriptors", &id, sizeof id, 2},
		{"more descriptors than the control has room for", &id, sizeof id, 4},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		hand(sv[0], bad[i].data, bad[i].len, given, bad[i].nfds);
		fd = -7;
		int t = brig_egress__worker_take(sv[1], &fd, &got_id);
		if (t != 1 || fd != -1 || fd_count() != before)
			fail_msg("%s: worker_take %d, fd %d, %d descriptors open (%d before)", bad[i].what, t, fd,
				 fd_count(), before);
	}
	/* a good one after them still comes through */
	hand(sv[0], &id, sizeof id, given, 1);
	assert_int_equal(brig_egress__worker_take(sv[1], &fd, &got_id), 0);
	close(fd);

	/* the monitor gone, with and without a message still queued */
	hand(sv[0], &id, sizeof id, given, 1);
	close(sv[0]);
	assert_int_equal(brig_egress__worker_take(sv[1], &fd, &got_id), 0);
	close(fd);
	assert_int_equal(brig_egress__worker_take(sv[1], &fd, &got_id), -1);
	assert_int_equal(fd_count(), before - 1);
	close(sv[1]);
	close(given);
}

/* ---- the proxy's start failing on its port ---- */

/* A network namespace of this process's own with the gateway's address on
 * its loopback: the proxy's fixed port there is no other proxy's, and the
 * test may take it first. 0, or -1 (no privilege to make one). */
static int own_gateway(void)
{
	if (unshare(CLONE_NEWNET) != 0)
		return -1;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		return -1;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo:1");
	struct sockaddr_in *a = (struct sockaddr_in *)&ifr.ifr_addr;
	a->sin_family = AF_INET;
	inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &a->sin_addr);
	int rc = ioctl(s, SIOCSIFADDR, &ifr);
	close(s);
	return rc;
}

/* A socket bound to the gateway's port (SO_REUSEADDR, as the proxy's),
 * listening when listening. */
static int take_port(bool listening)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(BRIG_EGRESS_PORT)};
	inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &a.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || (listening && listen(fd, 8) != 0))
		return -1;
	return fd;
}

/* The daemon's ping, answered once the test's socket on the port listens:
 * so the proxy (bound, not yet listening, asking the daemon first) finds
 * its port taken between its bind and its listen. */
struct fake_daemon {
	int ufd, port_fd;
	bool pinged;
};

static void *fake_daemon_fn(void *arg)
{
	struct fake_daemon *d = arg;
	int c = accept4(d->ufd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return NULL;
	if (listen(d->port_fd, 8) == 0) {
		char buf[4096];
		size_t have = 0;
		ssize_t r;
		while (have < sizeof buf - 1 && (r = read(c, buf + have, sizeof buf - 1 - have)) > 0) {
			have += (size_t)r;
			buf[have] = 0;
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		static const char ok[] = "HTTP/1.1 200 OK\r\nApi-Version: 1.45\r\nContent-Length: 2\r\n\r\nOK";
		d->pinged = write(c, ok, sizeof ok - 1) == (ssize_t)(sizeof ok - 1);
	}
	close(c);
	return NULL;
}

/* In a child of its own network: the proxy's start fails on its port
 * (taken before its bind, or between its bind and its listen) with the
 * message a user would read, and leaves no process, descriptor or pid
 * file. Each check's failure is its exit code; 77 when it cannot run. */
static int port_taken_child(bool before_bind)
{
	if (own_gateway() != 0)
		return 77;
	int port_fd = take_port(before_bind);
	if (port_fd < 0)
		return 2;
	struct fake_daemon d = {.ufd = -1, .port_fd = port_fd};
	pthread_t t;
	if (!before_bind) {
		if (geteuid() != 0)
			return 77; /* only root's proxy binds, then listens later */
		struct sockaddr_un ua = {.sun_family = AF_UNIX};
		if ((size_t)snprintf(ua.sun_path, sizeof ua.sun_path, "%.80s/docker.sock", dir) >= sizeof ua.sun_path)
			return 3;
		d.ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (d.ufd < 0 || bind(d.ufd, (struct sockaddr *)&ua, sizeof ua) != 0 || listen(d.ufd, 4) != 0)
			return 3;
		cleanup_free char *host = xasprintf("unix://%s", ua.sun_path);
		setenv("DOCKER_HOST", host, 1);
		cleanup_free char *store = xasprintf("%s/store.db", dir);
		setenv("BRIG_STORE", store, 1);
		if (pthread_create(&t, NULL, fake_daemon_fn, &d) != 0)
			return 4;
	}
	int before = fd_count();
	brig_error *err = NULL;
	int rc = brig_egress_proxy_serve(&err);
	if (!before_bind)
		pthread_join(t, NULL);
	int ret = 0;
	const char *msg = brig_error_message(err);
	if (rc != BRIG_EIO || !msg || !strstr(msg, "cannot listen on " BRIG_EGRESS_GATEWAY ":3128") ||
	    !strstr(msg, strerror(EADDRINUSE))) {
		fprintf(stderr, "proxy start: %d, %s\n", rc, msg ? msg : "no message");
		ret = 10;
	} else if (!before_bind && !d.pinged) {
		ret = 11; /* it failed elsewhere than at its listen */
	} else if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD) {
		ret = 12; /* its worker left behind */
	} else if (fd_count() != before) {
		fprintf(stderr, "%d descriptors open, %d before\n", fd_count(), before);
		ret = 13;
	} else {
		cleanup_free char *pid = xasprintf("%s/proxy.pid", dir);
		if (access(pid, F_OK) == 0)
			ret = 14;
	}
	brig_error_free(err);
	if (d.ufd >= 0)
		close(d.ufd);
	close(port_fd);
	return ret;
}

static void port_taken(bool before_bind)
{
	fflush(NULL);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int rc = port_taken_child(before_bind);
#ifdef __SANITIZE_ADDRESS__
		/* _exit skips the leak check at exit: what the failed start
		 * allocated must be freed by now */
		if (rc == 0 && __lsan_do_recoverable_leak_check() != 0)
			rc = 15;
#endif
		_exit(rc);
	}
	int ws = 0;
	assert_int_equal(waitpid(p, &ws, 0), p);
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 77)
		skip(); /* no network namespace of its own (not root) */
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		fail_msg("port taken %s: check %d failed (status %#x)", before_bind ? "before bind" : "before listen",
			 WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, ws);
}

static void test_port_taken_before_bind(void **state)
{
	(void)state;
	port_taken(true);
}

static void test_port_taken_before_listen(void **state)
{
	(void)state;
	port_taken(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names_are_not_asked_by, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_accepts, setup, teardown),
		cmocka_unit_test(test_worker_seccomp),
		cmocka_unit_test(test_worker_take),
		cmocka_unit_test_setup_teardown(test_port_taken_before_bind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_port_taken_before_listen, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
