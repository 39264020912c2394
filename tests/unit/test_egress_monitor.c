/* test_egress_monitor.c — the egress proxy's privilege separation. The
 * monitor answers a worker by the connections it accepted, never by a name
 * the worker gives: a worker that was taken over cannot ask for another
 * sandbox's secrets or rules, though they are on disk and the monitor
 * would read them (no daemon here, so no address is anyone's: what is
 * checked is what the requests may name). And the worker's seccomp filter
 * refuses what it must while its threads, sockets and files still work. */
#include "testutil.h"
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/egress.h"
#include "egress/egress_internal.h"
#include "util/util.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names_are_not_asked_by, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_accepts, setup, teardown),
		cmocka_unit_test(test_worker_seccomp),
		cmocka_unit_test(test_worker_take),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
