/* probe.c — brig-probe, the one static program baked into the test image
 * (/usr/local/bin/brig-probe, and a setuid-root copy brig-probe-suid) that
 * attempts each escape from inside a sandbox and reports what happened.
 *
 * `brig-probe` runs every case and prints one line per case:
 *     case <TAB> expected <TAB> observed <TAB> PASS|FAIL
 * and exits 0 when every case passed, 1 otherwise. Other modes are the
 * host-side cases' workloads: euid, forkbomb, eat-memory, zombies,
 * inode-flood DIR, ignore-term. Raw syscall(2) numbers are used where the
 * libc has no wrapper, so the attempt reaches the kernel (or seccomp). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif

#define SUID_COPY "/usr/local/bin/brig-probe-suid"
#define SANDBOX_UID 1000

static int passed, failed;

/* One row. ok decides PASS/FAIL; observed is printf-formatted. */
static void row(const char *name, const char *expected, int ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void row(const char *name, const char *expected, int ok, const char *fmt, ...)
{
	char obs[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(obs, sizeof obs, fmt, ap);
	va_end(ap);
	for (char *p = obs; *p; p++)
		if (*p == '\t' || *p == '\n')
			*p = ' ';
	printf("%s\t%s\t%s\t%s\n", name, expected, obs, ok ? "PASS" : "FAIL");
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

static const char *errname(int e)
{
	switch (e) {
	case 0: return "succeeded";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EROFS: return "EROFS";
	case ENOENT: return "ENOENT";
	case ENOSYS: return "ENOSYS";
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case EBADF: return "EBADF";
	case ENETUNREACH: return "ENETUNREACH";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EAGAIN: return "EAGAIN";
	case ENOSPC: return "ENOSPC";
	case EEXIST: return "EEXIST";
	case ENOTDIR: return "ENOTDIR";
	case EBUSY: return "EBUSY";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	default: {
		static char buf[32];
		snprintf(buf, sizeof buf, "errno %d", e);
		return buf;
	}
	}
}

/* A refused attempt: r < 0. want (0: any errno) names the expected errno. */
static void refused(const char *name, long r, int e, int want)
{
	char expected[48];
	snprintf(expected, sizeof expected, "refused (%s)", want ? errname(want) : "any error");
	int ok = r < 0 && (!want || e == want);
	row(name, expected, ok, "%s", r < 0 ? errname(e) : "succeeded");
}

/* Runs fn in a child so a call that succeeds (a namespace entered, a
 * mount made) cannot change the probe itself; the child's exit status
 * carries the errno (0: the call succeeded). */
static int in_child(long (*fn)(void *), void *arg)
{
	pid_t p = fork();
	if (p < 0)
		return errno;
	if (p == 0) {
		long r = fn(arg);
		_exit(r < 0 ? (errno & 0xff) : 0);
	}
	int st = 0;
	while (waitpid(p, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static long do_unshare(void *flags) { return unshare((int)(intptr_t)flags); }

static void case_unshare(const char *name, int flag)
{
	int e = in_child(do_unshare, (void *)(intptr_t)flag);
	refused(name, e ? -1 : 0, e, EPERM);
}

static long do_clone_ns(void *unused __attribute__((unused)))
{
	long r = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD), 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return r;
}

struct mnt {
	const char *src, *target, *type, *data;
};
static long do_mount(void *arg)
{
	struct mnt *m = arg;
	return mount(m->src, m->target, m->type, 0, m->data);
}

static void case_mount(const char *name, const char *src, const char *target, const char *type, const char *data)
{
	struct mnt m = {src, target, type, data};
	int e = in_child(do_mount, &m);
	refused(name, e ? -1 : 0, e, EPERM);
}

/* Opening for write must fail (EROFS or EACCES), or the path must be
 * absent when absent_ok. */
static void case_write(const char *name, const char *path, int flags)
{
	errno = 0;
	int fd = open(path, flags | O_CLOEXEC, 0644);
	int e = errno;
	if (fd >= 0) {
		/* Some pseudo-files open but refuse the write itself. */
		ssize_t n = write(fd, "1\n", 2);
		e = errno;
		close(fd);
		if (flags & O_CREAT)
			unlink(path);
		row(name, "refused (EROFS/EACCES)", n < 0, "%s%s", n < 0 ? "open ok, write " : "written",
		    n < 0 ? errname(e) : "");
		return;
	}
	row(name, "refused (EROFS/EACCES)", e == EROFS || e == EACCES || e == EPERM, "%s", errname(e));
}

/* The mount options of the mount at exactly target, from mountinfo:
 * 1 read-only, 0 read-write, -1 no such mount point. */
static int mount_ro(const char *target)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024], mp[512], opts[256];
	int ro = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%*s %*s %*s %*s %511s %255s", mp, opts) == 2 && strcmp(mp, target) == 0)
			ro = strncmp(opts, "ro", 2) == 0 && (opts[2] == ',' || opts[2] == '\0'); /* last wins */
	if (f)
		fclose(f);
	return ro;
}

static void case_mount_ro(const char *name, const char *target)
{
	int ro = mount_ro(target);
	row(name, "read-only mount", ro == 1, "%s", ro == 1 ? "ro" : ro == 0 ? "rw" : "not a mount point");
}

static const char *first_existing(const char *const *paths)
{
	for (; *paths; paths++)
		if (access(*paths, F_OK) == 0)
			return *paths;
	return NULL;
}

static void case_setuid_binary(void)
{
	/* Setuid to the owner of the image's files: root (0), or under gVisor
	 * on a daemon with userns-remap (UsernsMode host) the remapped root the
	 * image store holds them as (100000 here). */
	struct stat st, usr;
	if (stat(SUID_COPY, &st) != 0 || stat("/usr", &usr) != 0 || st.st_uid != usr.st_uid ||
	    !(st.st_mode & S_ISUID)) {
		row("setuid_root_binary", "euid 1000", 0, "%s is not a setuid-root file (rebuild the test image)",
		    SUID_COPY);
		return;
	}
	int p[2];
	if (pipe(p) != 0) {
		row("setuid_root_binary", "euid 1000", 0, "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl(SUID_COPY, SUID_COPY, "euid", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[64] = "";
	ssize_t n = read(p[0], buf, sizeof buf - 1);
	close(p[0]);
	waitpid(pid, NULL, 0);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	row("setuid_root_binary", "euid 1000", strcmp(buf, "1000") == 0, "euid %s", buf[0] ? buf : "?");
}

static void case_caps(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	char eff[32] = "?", bnd[32] = "?", prm[32] = "?", amb[32] = "?", nnp[8] = "?";
	while (f && fgets(line, sizeof line, f)) {
		sscanf(line, "CapEff:\t%31s", eff);
		sscanf(line, "CapBnd:\t%31s", bnd);
		sscanf(line, "CapPrm:\t%31s", prm);
		sscanf(line, "CapAmb:\t%31s", amb);
		sscanf(line, "NoNewPrivs:\t%7s", nnp);
	}
	if (f)
		fclose(f);
	const char *zero = "0000000000000000";
	row("cap_eff_zero", "CapEff 0", strcmp(eff, zero) == 0, "CapEff %s", eff);
	row("cap_bnd_zero", "CapBnd 0", strcmp(bnd, zero) == 0, "CapBnd %s", bnd);
	row("cap_prm_amb_zero", "CapPrm/CapAmb 0", strcmp(prm, zero) == 0 && strcmp(amb, zero) == 0,
	    "CapPrm %s CapAmb %s", prm, amb);
	row("no_new_privs", "NoNewPrivs 1", strcmp(nnp, "1") == 0, "NoNewPrivs %s", nnp);
}

/* The gateway of the default route, or docker0's usual host address when
 * there is no route at all (network none): either way an address of this
 * machine, never one outside it. */
static in_addr_t gateway(int *have_route)
{
	FILE *f = fopen("/proc/net/route", "r");
	char line[256];
	unsigned dest, gw, flags;
	*have_route = 0;
	while (f && fgets(line, sizeof line, f)) {
		if (sscanf(line, "%*s %x %x %x", &dest, &gw, &flags) == 3 && dest == 0 && gw) {
			*have_route = 1;
			fclose(f);
			return (in_addr_t)gw;
		}
	}
	if (f)
		fclose(f);
	return inet_addr("172.17.0.1");
}

/* Non-blocking connect bounded to ms. Returns 0 when connected, else errno. */
static int try_connect(in_addr_t addr, int port, int ms)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = addr};
	int r = connect(s, (struct sockaddr *)&sa, sizeof sa), e = 0;
	if (r < 0 && errno != EINPROGRESS) {
		e = errno;
	} else if (r < 0) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		if (poll(&p, 1, ms) <= 0) {
			e = ETIMEDOUT;
		} else {
			socklen_t l = sizeof e;
			getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
		}
	}
	close(s);
	return e;
}

static void case_daemon_port(int port)
{
	int have_route;
	in_addr_t gw = gateway(&have_route);
	char name[32], addr[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &gw, addr, sizeof addr);
	snprintf(name, sizeof name, "daemon_port_%d", port);
	int e = try_connect(gw, port, 2000);
	row(name, "connect fails", e != 0, "%s:%d %s", addr, port, e ? errname(e) : "CONNECTED");
}

static void case_interfaces(void)
{
	FILE *f = fopen("/proc/net/dev", "r");
	char line[256], names[128] = "";
	int n = 0, only_lo = 1;
	while (f && fgets(line, sizeof line, f)) {
		if (++n <= 2)
			continue;
		char *c = strchr(line, ':');
		if (!c)
			continue;
		*c = '\0';
		char *nm = line + strspn(line, " ");
		if (strcmp(nm, "lo") != 0)
			only_lo = 0;
		if (strlen(names) + strlen(nm) + 2 < sizeof names)
			strcat(strcat(names, names[0] ? "," : ""), nm);
	}
	if (f)
		fclose(f);
	row("interfaces_only_lo", "lo", only_lo && strcmp(names, "lo") == 0, "%s", names[0] ? names : "(none)");
	int have_route;
	gateway(&have_route);
	row("no_default_route", "no route", !have_route, "%s", have_route ? "default route present" : "no route");
}

static long do_ptrace_child(void *unused __attribute__((unused)))
{
	pid_t c = fork();
	if (c == 0) {
		pause();
		_exit(0);
	}
	long r = ptrace(PTRACE_ATTACH, c, 0, 0);
	int e = errno;
	if (r == 0) {
		waitpid(c, NULL, 0);
		ptrace(PTRACE_DETACH, c, 0, 0);
	}
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	errno = e;
	return r;
}

static void run_all(void)
{
	long r;
	int fd;
	char buf[512];

	/* Namespaces: every way in. */
	case_unshare("unshare_user_ns", CLONE_NEWUSER);
	case_unshare("unshare_mount_ns", CLONE_NEWNS);
	case_unshare("unshare_net_ns", CLONE_NEWNET);
	int e = in_child(do_clone_ns, NULL);
	refused("clone_with_ns_flags", e ? -1 : 0, e, EPERM);
	fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	r = syscall(SYS_setns, fd, 0);
	refused("setns", r, errno, EPERM);
	if (fd >= 0)
		close(fd);

	/* Mounts. */
	case_mount("mount_tmpfs", "tmpfs", "/tmp", "tmpfs", "size=1m");
	case_mount("mount_proc", "proc", "/proc", "proc", NULL);
	case_mount("mount_cgroup", "cgroup", "/sys/fs/cgroup", "cgroup", "memory");
	r = umount2("/proc", MNT_DETACH);
	refused("umount_proc", r, errno, EPERM);
	r = chroot("/tmp");
	refused("chroot", r, errno, EPERM);

	/* Writes to the image and the kernel's files. */
	case_write("write_root", "/brig-probe-was-here", O_WRONLY | O_CREAT | O_TRUNC);
	case_write("write_etc", "/etc/passwd", O_WRONLY | O_APPEND);
	case_write("write_proc_sys", "/proc/sys/kernel/hostname", O_WRONLY);
	if (access("/proc/sysrq-trigger", F_OK) == 0)
		case_write("write_proc_sysrq", "/proc/sysrq-trigger", O_WRONLY);
	else
		row("write_proc_sysrq", "refused (EROFS/EACCES)", 1, "absent (kernel without magic SysRq)");
	case_mount_ro("proc_sys_mount_ro", "/proc/sys");
	case_mount_ro("sys_mount_ro", "/sys");
	case_mount_ro("rootfs_mount_ro", "/");
	static const char *const sys_files[] = {"/sys/class/net/lo/mtu", "/sys/kernel/mm/transparent_hugepage/enabled",
						"/sys/kernel/uevent_helper", NULL};
	const char *sf = first_existing(sys_files);
	case_write("write_sys", sf ? sf : "/sys/brig-probe-was-here", sf ? O_WRONLY : O_WRONLY | O_CREAT);
	static const char *const cg_files[] = {"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
					       "/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/memory.max", NULL};
	const char *cf = first_existing(cg_files);
	if (cf)
		case_write("write_cgroup", cf, O_WRONLY);
	else
		row("write_cgroup", "refused (EROFS/EACCES)", 1, "no cgroup limit file visible");
	r = sethostname("pwned", 5);
	refused("sethostname", r, errno, EPERM);

	/* Privilege. */
	case_setuid_binary();
	r = setuid(0);
	refused("setuid_0", r, errno, EPERM);
	case_caps();
	r = mknod("/workspace/brig-probe-null", S_IFCHR | 0666, makedev(1, 3));
	e = errno;
	if (r == 0)
		unlink("/workspace/brig-probe-null");
	refused("mknod_char_device", r, e, EPERM);
	r = personality(ADDR_NO_RANDOMIZE);
	refused("personality_no_aslr", r, errno, EPERM);

	/* Sockets below IP. */
	fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	refused("raw_socket", fd, errno, EPERM);
	if (fd >= 0)
		close(fd);
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	refused("packet_socket", fd, errno, EPERM);
	if (fd >= 0)
		close(fd);

	/* Kernel attack surface, each blocked by the seccomp profile (EPERM). */
	r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
	refused("keyctl", r, errno, EPERM);
	r = syscall(SYS_add_key, "user", "brig", "x", 1, -3);
	refused("add_key", r, errno, EPERM);
	memset(buf, 0, sizeof buf);
	r = syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, buf, 128);
	refused("bpf", r, errno, EPERM);
	memset(buf, 0, sizeof buf);
	buf[4] = 112; /* perf_event_attr.size */
	r = syscall(SYS_perf_event_open, buf, 0, -1, -1, 0);
	refused("perf_event_open", r, errno, EPERM);
	r = syscall(SYS_userfaultfd, O_CLOEXEC);
	refused("userfaultfd", r, errno, EPERM);
	r = syscall(SYS_init_module, buf, 0, "");
	refused("init_module", r, errno, EPERM);
	r = syscall(SYS_finit_module, 0, "", 0);
	refused("finit_module", r, errno, EPERM);
	r = syscall(SYS_kexec_load, 0, 0, NULL, 0);
	refused("kexec_load", r, errno, EPERM);
	memset(buf, 0, sizeof buf);
	buf[0] = 8; /* handle_bytes */
	r = syscall(SYS_open_by_handle_at, AT_FDCWD, buf, O_RDONLY);
	refused("open_by_handle_at", r, errno, EPERM);
	memset(buf, 0, sizeof buf);
	r = syscall(__NR_io_uring_setup, 8, buf);
	refused("io_uring_setup", r, errno, EPERM);
	r = syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf);
	refused("syslog_read", r, errno, EPERM);
	r = iopl(3);
	refused("iopl", r, errno, EPERM);
	r = syscall(SYS_reboot, 0xfee1dead, 672274793, 0 /* LINUX_REBOOT_CMD_CAD_OFF */, NULL);
	refused("reboot", r, errno, EPERM);

	/* What must keep working under the profile. */
	r = syscall(__NR_clone3, NULL, 0);
	e = errno;
	row("clone3_enosys", "ENOSYS (libc falls back to clone)", r < 0 && e == ENOSYS, "%s",
	    r < 0 ? errname(e) : "succeeded");
	pid_t pid = fork();
	if (pid == 0)
		_exit(7);
	int st = 0;
	waitpid(pid, &st, 0);
	row("fork_works", "child exits 7", pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 7, "%s",
	    pid > 0 ? "child exited" : errname(errno));
	e = in_child(do_ptrace_child, NULL);
	row("ptrace_own_child", "allowed", e == 0, "%s", e ? errname(e) : "attached");
	r = mkfifo("/workspace/brig-probe-fifo", 0600);
	e = errno;
	unlink("/workspace/brig-probe-fifo");
	row("mkfifo_works", "allowed", r == 0, "%s", r == 0 ? "created" : errname(e));

	/* Limits. */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	row("ulimit_nofile", "1024", rl.rlim_cur == 1024 && rl.rlim_max == 1024, "%llu/%llu",
	    (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	getrlimit(RLIMIT_CORE, &rl);
	row("ulimit_core", "0", rl.rlim_cur == 0 && rl.rlim_max == 0, "%llu/%llu", (unsigned long long)rl.rlim_cur,
	    (unsigned long long)rl.rlim_max);

	/* The daemon. */
	static const char *const socks[] = {"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
					    "/var/run/docker/containerd/containerd.sock", NULL};
	const char *sock = first_existing(socks);
	row("docker_socket_absent", "absent", sock == NULL, "%s", sock ? sock : "absent");
	case_daemon_port(2375);
	case_daemon_port(2376);
	case_interfaces();
}

/* ---- workloads for the host-side cases ---- */

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

/* Every process forks until the pids limit refuses, then waits: a real,
 * exponential bomb. Prints how many forks the first process made. */
static int forkbomb(void)
{
	long mine = 0;
	int e = 0;
	for (;;) {
		pid_t p = fork();
		if (p < 0) {
			e = errno;
			break;
		}
		if (p == 0) {
			detach_stdio();
			for (int i = 0; i < 64; i++)
				if (fork() < 0)
					break;
			pause();
			_exit(0);
		}
		mine++;
	}
	printf("forkbomb: %ld forks, then %s\n", mine, errname(e));
	fflush(stdout);
	return 0;
}

static int eat_memory(void)
{
	size_t total = 0;
	for (;;) {
		size_t n = 32u << 20;
		char *p = malloc(n);
		if (!p) {
			printf("eat-memory: malloc failed after %zu MiB\n", total >> 20);
			return 1;
		}
		memset(p, 0xa5, n);
		total += n;
	}
}

/* A parent that exits leaving children that exit later: orphans reparent
 * to PID 1, which must reap them. */
static int zombies(int n)
{
	pid_t mid = fork();
	if (mid == 0) {
		for (int i = 0; i < n; i++)
			if (fork() == 0) {
				detach_stdio();
				struct timespec ts = {0, 200 * 1000 * 1000};
				nanosleep(&ts, NULL);
				_exit(0);
			}
		_exit(0); /* without waiting */
	}
	waitpid(mid, NULL, 0);
	printf("zombies: %d orphans left to PID 1\n", n);
	return 0;
}

static int inode_flood(const char *dir)
{
	char path[4096];
	long n = 0;
	int e = 0;
	for (;; n++) {
		snprintf(path, sizeof path, "%s/f%ld", dir, n);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			e = errno;
			break;
		}
		close(fd);
	}
	printf("inode-flood: %ld files, then %s (%s)\n", n, errname(e), strerror(e));
	return e == ENOSPC ? 0 : 1;
}

/* Ignores SIGTERM and lingers, detached from the exec's streams. */
static int ignore_term(void)
{
	signal(SIGTERM, SIG_IGN);
	pid_t p = fork();
	if (p == 0) {
		detach_stdio();
		setsid();
		for (;;)
			pause();
	}
	printf("ignore-term: pid %d ignores SIGTERM\n", (int)p);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		const char *m = argv[1];
		if (strcmp(m, "euid") == 0) {
			printf("%d\n", (int)geteuid());
			return 0;
		}
		if (strcmp(m, "forkbomb") == 0)
			return forkbomb();
		if (strcmp(m, "eat-memory") == 0)
			return eat_memory();
		if (strcmp(m, "zombies") == 0)
			return zombies(argc > 2 ? atoi(argv[2]) : 20);
		if (strcmp(m, "inode-flood") == 0 && argc > 2)
			return inode_flood(argv[2]);
		if (strcmp(m, "ignore-term") == 0)
			return ignore_term();
		fprintf(stderr,
			"usage: brig-probe [euid | forkbomb | eat-memory | zombies [N] | inode-flood DIR | ignore-term]\n");
		return 2;
	}
	if (getuid() != SANDBOX_UID)
		row("runs_as_sandbox_user", "uid 1000", 0, "uid %d", (int)getuid());
	run_all();
	fprintf(stderr, "brig-probe: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
