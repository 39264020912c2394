/* guest/main.c — brig-init's entry: the three modes (init, run, relay), the
 * PID 1 setup every mode shares, and small helpers (clocks, fds). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/init.h"

int64_t gi_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t gi_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gi_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Without close_range (kernels before 5.9, gVisor before 2023): the fds
 * /proc/self/fd lists. Closing every number up to 65536 instead cost 2 s a
 * command under gVisor, where each close is a trip through its kernel. */
static bool close_listed(unsigned a, unsigned b)
{
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false;
	int fds[256];
	int n = 0;
	bool more = true;
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		long got = syscall(SYS_getdents64, dfd, buf, sizeof buf);
		if (got <= 0) {
			more = got < 0;
			break;
		}
		for (long off = 0; off < got;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *de = (void *)(buf + off);
			char *end;
			unsigned long fd = strtoul(de->name, &end, 10);
			if (*end == '\0' && de->name[0] >= '0' && de->name[0] <= '9' && (int)fd != dfd && fd >= a &&
			    fd <= b && n < (int)(sizeof fds / sizeof fds[0]))
				fds[n++] = (int)fd;
			off += de->reclen;
		}
		if (n == (int)(sizeof fds / sizeof fds[0]))
			break; /* close these, then list again */
	}
	close(dfd);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	if (n == (int)(sizeof fds / sizeof fds[0]))
		return close_listed(a, b);
	return !more;
}

static void close_range_(unsigned a, unsigned b)
{
	if (a > b)
		return;
#ifdef SYS_close_range
	if (syscall(SYS_close_range, a, b, 0) == 0)
		return;
#endif
	if (close_listed(a, b))
		return;
	for (unsigned fd = a; fd <= b && fd < 65536; fd++)
		close((int)fd);
}

/* Closes every fd from 3 up except those in keep (a forked child must not
 * hold brig-init's sockets or other commands' pipes). */
void gi_close_fds_except(const int *keep, int n)
{
	int k[16];
	int m = 0;
	for (int i = 0; i < n && m < 16; i++)
		if (keep[i] >= 3)
			k[m++] = keep[i];
	for (int i = 1; i < m; i++) /* insertion sort */
		for (int j = i; j > 0 && k[j - 1] > k[j]; j--) {
			int t = k[j];
			k[j] = k[j - 1];
			k[j - 1] = t;
		}
	unsigned from = 3;
	for (int i = 0; i < m; i++) {
		if ((unsigned)k[i] > from)
			close_range_(from, (unsigned)k[i] - 1);
		if ((unsigned)k[i] + 1 > from)
			from = (unsigned)k[i] + 1;
	}
	close_range_(from, ~0u);
}

static void usage(void)
{
	fprintf(stderr, "usage: brig-init init [--lifetime SECONDS]\n"
			"       brig-init run --timeout-ms MS -- ARGV...\n"
			"       brig-init relay\n");
}

/* ---- relay ---- */

/* Copies stdin to the socket and the socket to stdout. The end of stdin is
 * passed on as a half-close; the relay exits when brig-init closes. */
static int relay(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path + 1, BRIG_GP_SOCKET_NAME, strlen(BRIG_GP_SOCKET_NAME));
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(BRIG_GP_SOCKET_NAME));
	if (s < 0 || connect(s, (struct sockaddr *)&a, alen) < 0) {
		fprintf(stderr, "brig-init relay: cannot reach brig-init: %s\n", strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	static unsigned char buf[2][65536];
	size_t have[2] = {0, 0}, off[2] = {0, 0};
	int in[2] = {0, s}, out[2] = {s, 1};
	int eof[2] = {0, 0};
	for (;;) {
		struct pollfd pf[4];
		int n = 0, idx[4], kind[4];
		for (int d = 0; d < 2; d++) {
			if (have[d] == off[d] && !eof[d]) {
				pf[n] = (struct pollfd){.fd = in[d], .events = POLLIN};
				idx[n] = d, kind[n++] = 0;
			} else if (have[d] > off[d]) {
				pf[n] = (struct pollfd){.fd = out[d], .events = POLLOUT};
				idx[n] = d, kind[n++] = 1;
			}
		}
		if (n == 0)
			return 0;
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (int i = 0; i < n; i++) {
			int d = idx[i];
			if (!pf[i].revents)
				continue;
			if (kind[i] == 0) {
				ssize_t r = read(in[d], buf[d], sizeof buf[d]);
				if (r < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (r == 0 && d == 0) {
					/* brig closed our stdin: brig-init sees the connection
					 * end and sends what it still has; copy that out */
					shutdown(s, SHUT_WR);
					eof[0] = 1;
					continue;
				}
				if (r <= 0)
					return 0; /* brig-init closed: done */
				have[d] = (size_t)r, off[d] = 0;
			} else {
				ssize_t w = write(out[d], buf[d] + off[d], have[d] - off[d]);
				if (w < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (w <= 0)
					return 0;
				off[d] += (size_t)w;
				if (off[d] == have[d])
					have[d] = off[d] = 0;
			}
		}
	}
}

/* ---- run ---- */

/* Ends every process in the container: SIGTERM, 2 s, SIGKILL. */
static void end_everything(int grace)
{
	if (grace) {
		kill(-1, SIGTERM);
		int64_t until = gi_now_ms() + 2000;
		while (gi_now_ms() < until) {
			pid_t w = waitpid(-1, NULL, WNOHANG);
			if (w < 0 && errno == ECHILD)
				return;
			if (w <= 0)
				usleep(20000);
		}
	}
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
}

static int run_mode(int64_t timeout_ms, char **argv)
{
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		return 125;
	sigset_t all;
	sigfillset(&all);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "brig: cannot start %s: %s\n", argv[0], strerror(errno));
		return 125;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL); /* an ignored signal would stay ignored across exec */
		sigprocmask(SIG_UNBLOCK, &all, NULL);
		close(ep[0]);
		execvp(argv[0], argv);
		int e = errno;
		if (write(ep[1], &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	close(ep[1]);
	int e = 0;
	ssize_t r;
	do
		r = read(ep[0], &e, sizeof e);
	while (r < 0 && errno == EINTR);
	close(ep[0]);
	if (r == (ssize_t)sizeof e) {
		waitpid(pid, NULL, 0);
		if (e == ENOENT) {
			fprintf(stderr, "brig: %s: not found in the image\n", argv[0]);
			return 127;
		}
		fprintf(stderr, "brig: %s: %s\n", argv[0], strerror(e));
		return 126;
	}
	int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
	int64_t deadline = timeout_ms > 0 ? gi_now_ms() + timeout_ms : 0;
	for (;;) {
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			if (w == pid) {
				/* The command ended: whatever it left behind ends with us. */
				return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			}
		int wait_ms = -1;
		if (deadline) {
			int64_t left = deadline - gi_now_ms();
			if (left <= 0) {
				end_everything(0);
				return 124;
			}
			wait_ms = left > 1000000 ? 1000000 : (int)left;
		}
		struct pollfd pf = {.fd = sfd, .events = POLLIN};
		if (poll(&pf, 1, wait_ms) > 0) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				/* Docker's stop is a kill(2) from outside our PID namespace:
				 * SI_USER with pid 0. rt_sigqueueinfo lets the sandbox
				 * forge pid 0, never SI_USER. */
				if (si.ssi_signo == SIGCHLD || si.ssi_pid != 0 || si.ssi_code != SI_USER)
					continue; /* from inside the container: ignored */
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP) {
					end_everything(1);
					return 128 + (int)si.ssi_signo;
				}
			}
		}
	}
}

int main(int argc, char **argv)
{
	/* First thing: nobody with our uid may ptrace us or read our memory. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (argc < 2) {
		usage();
		return 2;
	}
	if (strcmp(argv[1], "relay") == 0)
		return relay();

	/* init and run are PID 1: every signal goes through a signalfd so its
	 * sender can be checked (children unblock them before exec). */
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (strcmp(argv[1], "init") == 0) {
		int64_t lifetime_ms = 0;
		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "--lifetime") == 0 && i + 1 < argc) {
				char *end;
				long long v = strtoll(argv[++i], &end, 10);
				if (*end || v < 0) {
					usage();
					return 2;
				}
				lifetime_ms = (int64_t)v * 1000;
			} else {
				usage();
				return 2;
			}
		}
		return gi_serve(lifetime_ms);
	}
	if (strcmp(argv[1], "run") == 0) {
		int64_t timeout_ms = 0;
		int i = 2;
		for (; i < argc; i++) {
			if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
				char *end;
				long long v = strtoll(argv[++i], &end, 10);
				if (*end || v < 0) {
					usage();
					return 2;
				}
				timeout_ms = v;
			} else if (strcmp(argv[i], "--") == 0) {
				i++;
				break;
			} else {
				usage();
				return 2;
			}
		}
		if (i >= argc) {
			usage();
			return 2;
		}
		return run_mode(timeout_ms, argv + i);
	}
	usage();
	return 2;
}
