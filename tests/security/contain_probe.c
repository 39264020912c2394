/* contain_probe.c — brig-contain-probe, issue 20's cases from inside a
 * sandbox. Not baked into the test image (probe.c is, and changing it
 * rebuilds brig-test:local): the harness pipes this static binary into a
 * computer's /workspace and runs it there.
 *
 * `contain` prints one line per case, as brig-probe does:
 *     case <TAB> expected <TAB> observed <TAB> PASS|FAIL
 * `mq` runs the mq_open case alone; `inotify-hold MAX FILE` (the hostile
 * computer) holds up to MAX inotify instances, writes how many to FILE and
 * lingers; `inotify-one` opens one and says whether it could. Sockets are
 * only created, never connected. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __NR_mq_open
#define __NR_mq_open 240
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

static int failed;

static void row(const char *name, const char *expected, int ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void row(const char *name, const char *expected, int ok, const char *fmt, ...)
{
	char obs[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(obs, sizeof obs, fmt, ap);
	va_end(ap);
	printf("%s\t%s\t%s\t%s\n", name, expected, obs, ok ? "PASS" : "FAIL");
	fflush(stdout);
	failed += !ok;
}

static const char *errname(int e)
{
	switch (e) {
	case 0: return "succeeded";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOSYS: return "ENOSYS";
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case ESOCKTNOSUPPORT: return "ESOCKTNOSUPPORT";
	case EMFILE: return "EMFILE";
	case ENFILE: return "ENFILE";
	case ENOSPC: return "ENOSPC";
	case ENOMEM: return "ENOMEM";
	default: return strerror(e);
	}
}

/* Creates (never connects) a socket of a family the profile refuses. */
static void socket_refused(const char *name, int family, int type)
{
	errno = 0;
	int fd = socket(family, type | SOCK_CLOEXEC, 0);
	int e = errno;
	if (fd >= 0)
		close(fd);
	row(name, "refused (EPERM)", fd < 0 && e == EPERM, "%s", fd < 0 ? errname(e) : "succeeded");
}

static void socket_allowed(const char *name, int family, int type)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0);
	int e = errno;
	if (fd >= 0)
		close(fd);
	row(name, "created", fd >= 0, "%s", fd >= 0 ? "created" : errname(e));
}

/* socketcall(SYS_SOCKET, args) through the 32-bit entry, in a child. The
 * args pointer is a 64-bit stack address cut to 32 bits, so a kernel that
 * got the call answers EFAULT; seccomp refuses it first with EPERM, or
 * kills the caller (SIGSYS) when the profile has no 32-bit x86 at all; a
 * kernel without the 32-bit entry raises SIGSEGV, which refuses it too. */
static void socketcall_refused(void)
{
#if defined(__x86_64__)
	pid_t p = fork();
	int fork_errno = errno;
	if (p == 0) {
		unsigned long args[3] = {AF_VSOCK, SOCK_STREAM, 0};
		long r;
		__asm__ volatile("int $0x80" : "=a"(r) : "a"(102L), "b"(1L), "c"((unsigned long)args) : "memory");
		_exit(r < 0 ? (int)(-r & 0xff) : 0);
	}
	int st = 0;
	while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	bool killed = p > 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS;
	int e = p > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (p < 0)
		row("socketcall_refused", "refused (EPERM or SIGSYS) by seccomp", 0, "fork: %s", errname(fork_errno));
	else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
		/* int 0x80 raised #GP: this kernel has no 32-bit entry at all
		 * (ia32_emulation off; seen on 6.18 firecracker guests, where the
		 * host answers the same outside any sandbox), so socketcall is
		 * unreachable before seccomp is asked */
		row("socketcall_refused", "refused (EPERM or SIGSYS) by seccomp", 1,
		    "no 32-bit entry in this kernel (SIGSEGV)");
	else if (!killed && WIFSIGNALED(st))
		row("socketcall_refused", "refused (EPERM or SIGSYS) by seccomp", 0, "child killed by signal %d",
		    WTERMSIG(st));
	else
		row("socketcall_refused", "refused (EPERM or SIGSYS) by seccomp", killed || e == EPERM, "%s",
		    killed ? "killed by SIGSYS" : errname(e));
#else
	row("socketcall_refused", "refused (EPERM) by seccomp", 1, "not x86_64: skipped");
#endif
}

static void mq_open_refused(void)
{
	struct {
		long flags, maxmsg, msgsize, curmsgs, pad[4];
	} attr = {0, 1, 64, 0, {0}};
	errno = 0;
	long r = syscall(__NR_mq_open, "brig-contain-probe", O_CREAT | O_RDWR | O_CLOEXEC, 0600, &attr);
	int e = errno;
	if (r >= 0)
		close((int)r);
	row("mq_open_refused", "refused (EPERM)", r < 0 && e == EPERM, "%s", r < 0 ? errname(e) : "succeeded");
}

/* brig-init (PID 1) ends the container only on Docker's own stop, a kill(2)
 * from outside (SI_USER, pid 0): a sandboxed process can forge pid 0 with
 * rt_sigqueueinfo, never SI_USER. If PID 1 took the bait, this probe dies
 * with the container and its table never arrives. */
static void pid1_ignores_forged_sigterm(void)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = SIGTERM;
	si.si_code = SI_QUEUE;
	si.si_pid = 0;
	si.si_uid = 0;
	errno = 0;
	long r = syscall(SYS_rt_sigqueueinfo, 1, SIGTERM, &si);
	int e = errno;
	struct timespec ts = {0, 500 * 1000 * 1000};
	nanosleep(&ts, NULL);
	bool alive = kill(1, 0) == 0;
	row("pid1_ignores_forged_sigterm", "PID 1 runs on after a forged SIGTERM", alive, "queue %s, PID 1 %s",
	    r == 0 ? "accepted" : errname(e), alive ? "alive" : "gone");
}

static __attribute__((noreturn)) void inotify_hold(int max, const char *file)
{
	int n = 0, e = 0;
	while (n < max && inotify_init1(IN_CLOEXEC) >= 0)
		n++;
	if (n < max)
		e = errno;
	FILE *f = fopen(file, "w");
	if (f) {
		fprintf(f, "%d %s\n", n, e ? errname(e) : "max");
		fclose(f);
	}
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	setsid();
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	if (strcmp(m, "contain") == 0) {
		socket_refused("socket_af_vsock", AF_VSOCK, SOCK_STREAM);
		socket_refused("socket_af_alg", AF_ALG, SOCK_SEQPACKET);
		socket_refused("socket_af_packet", AF_PACKET, SOCK_DGRAM);
		socket_refused("socket_af_bluetooth", 31 /* AF_BLUETOOTH */, SOCK_STREAM);
		socket_refused("socket_af_key", 15 /* AF_KEY */, SOCK_RAW);
		socket_refused("socket_af_tipc", 30 /* AF_TIPC */, SOCK_RDM);
		socket_refused("socket_af_rds", 21 /* AF_RDS */, SOCK_SEQPACKET);
		socket_allowed("socket_af_unix", AF_UNIX, SOCK_STREAM);
		socket_allowed("socket_af_inet", AF_INET, SOCK_STREAM);
		socket_allowed("socket_af_inet6", AF_INET6, SOCK_DGRAM);
		socket_allowed("socket_af_netlink", AF_NETLINK, SOCK_RAW);
		socketcall_refused();
		mq_open_refused();
		pid1_ignores_forged_sigterm();
		return failed ? 1 : 0;
	}
	if (strcmp(m, "mq") == 0) {
		mq_open_refused();
		return failed ? 1 : 0;
	}
	if (strcmp(m, "inotify-hold") == 0 && argc > 3)
		inotify_hold(atoi(argv[2]), argv[3]);
	if (strcmp(m, "inotify-one") == 0) {
		int fd = inotify_init1(IN_CLOEXEC);
		printf("inotify_init1: %s\n", fd >= 0 ? "ok" : errname(errno));
		return fd >= 0 ? 0 : 1;
	}
	fprintf(stderr, "usage: brig-contain-probe contain | mq | inotify-hold MAX FILE | inotify-one\n");
	return 2;
}
