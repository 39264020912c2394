/* seccomp.c — brig's own seccomp profile: an allowlist, in Docker's JSON
 * format, of the system calls ordinary programs need, and nothing else.
 *
 * Why brig has its own: the daemon's default profile in Docker 20.10 still
 * allows io_uring_setup/io_uring_enter/io_uring_register, a kernel attack
 * surface with a long record of privilege escalations, and it grants calls
 * by capability (a container given CAP_SYS_ADMIN gets mount, setns…). brig
 * drops every capability, so this list grants nothing by capability at all.
 *
 * How it was written: from the x86_64 and i386 syscall tables
 * (asm/unistd_64.h, asm/unistd_32.h), one call at a time, keeping what a
 * shell, a compiler, git, python and node use and leaving out what changes
 * the machine rather than the process. Everything not listed fails with
 * EPERM (defaultErrnoRet 1). runc skips names its libseccomp does not know,
 * and answers ENOSYS for calls newer than its libseccomp, so libc's
 * fallbacks for new calls keep working.
 *
 * Deliberately NOT allowed (each fails with EPERM), grouped by why:
 *  - kernel attack surface without a use inside a sandbox: io_uring_setup,
 *    io_uring_enter, io_uring_register, bpf, perf_event_open, userfaultfd,
 *    keyctl, add_key, request_key (the keyring is not namespaced),
 *    modify_ldt, lookup_dcookie, process_madvise, process_mrelease,
 *    memfd_secret, vm86, vm86old, uselib, ustat, sysfs, _sysctl;
 *  - namespaces and mounts (escape routes): unshare, setns, mount, umount,
 *    umount2, pivot_root, chroot, open_tree, move_mount, fsopen, fsconfig,
 *    fsmount, fspick, mount_setattr, open_by_handle_at, name_to_handle_at
 *    (the "shocker" escape), fanotify_init, fanotify_mark, quotactl,
 *    quotactl_fd, nfsservctl;
 *  - the machine, not the process: reboot, kexec_load, kexec_file_load,
 *    init_module, finit_module, delete_module, create_module, query_module,
 *    get_kernel_syms, swapon, swapoff, acct, syslog, vhangup, iopl, ioperm,
 *    settimeofday, stime, clock_settime(64), clock_adjtime(64), adjtimex,
 *    sethostname, setdomainname;
 *  - memory placement of other processes: migrate_pages, move_pages,
 *    mbind, set_mempolicy, set_mempolicy_home_node (Docker grants these
 *    only with CAP_SYS_NICE);
 *  - socketcall, and with it the whole 32-bit x86 entry (int 0x80): the
 *    multiplexer hides the socket family behind a pointer seccomp cannot
 *    read, and libseccomp writes every socket rule for 32-bit x86 as an
 *    unconditional socketcall(SYS_SOCKET) rule, so the family allowlist
 *    would not hold there (the security suite's socketcall case got a
 *    socket through it). The profile therefore has no SCMP_ARCH_X86: a
 *    32-bit x86 program is killed (SIGSYS) at its first call. x32 and
 *    32-bit arm have direct socket calls and keep their rules;
 *  - mq_open and the other mq_* calls: POSIX message-queue bytes are a
 *    per-user quota (RLIMIT_MSGQUEUE, fs.mqueue) that one sandbox could
 *    exhaust for every other with the same host uid; agents have no use;
 *  - clone3: its flags sit behind a pointer seccomp cannot read, so it
 *    answers ENOSYS and libc falls back to clone, whose flags are checked.
 *
 * Allowed on purpose although sensitive: ptrace, process_vm_readv/writev,
 * kcmp and pidfd_getfd — agents debug their own programs; the kernel
 * confines them to processes of the same uid in the same pid namespace
 * (ptrace_may_access), and brig runs nothing inside that the agent may not
 * see. mknod/mknodat: mkfifo needs them; device nodes still need
 * CAP_MKNOD, which is dropped. socket: only the families in
 * socket_families. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "brig/spec.h"
#include "util/util.h"

/* Calls allowed with any arguments, on every architecture of the profile
 * (x86_64 and its x32 ABI, and arm64/arm when the daemon runs
 * there; a name an architecture lacks is skipped by runc). */
static const char *const allow_any[] = {
	/* files and descriptors */
	"read", "write", "open", "openat", "openat2", "close", "close_range", "creat", "lseek", "pread64",
	"pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "dup", "dup2", "dup3", "pipe",
	"pipe2", "fcntl", "flock", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "truncate",
	"ftruncate", "fallocate", "fadvise64", "readahead", "sendfile", "splice", "tee", "vmsplice",
	"copy_file_range", "ioctl",
	/* metadata and directories */
	"stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
	"getdents", "getdents64", "getcwd", "chdir", "fchdir", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
	"rmdir", "link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod",
	"fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "umask", "utime", "utimes", "utimensat",
	"futimesat", "mknod", "mknodat", "setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
	/* waiting on descriptors */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
	"epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create",
	"timerfd_settime", "timerfd_gettime", "inotify_init", "inotify_init1", "inotify_add_watch",
	"inotify_rm_watch",
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "msync", "mincore", "madvise", "mlock", "mlock2", "munlock",
	"mlockall", "munlockall", "remap_file_pages", "memfd_create", "membarrier", "get_mempolicy",
	"pkey_mprotect", "pkey_alloc", "pkey_free",
	/* processes and threads (clone: see clone_rule) */
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
	"getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "set_tid_address",
	"set_robust_list", "get_robust_list", "futex", "futex_waitv", "rseq", "arch_prctl", "set_thread_area",
	"get_thread_area", "prctl", "seccomp", "restart_syscall", "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	/* credentials (without capabilities these can only drop or keep) */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid",
	"setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups", "capget", "capset",
	/* signals */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo",
	"rt_tgsigqueueinfo", "rt_sigsuspend", "sigaltstack", "pause",
	/* time (reading it, sleeping, timers) */
	"time", "gettimeofday", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "alarm",
	"getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
	"timer_delete", "times",
	/* scheduling and limits (the cgroup bounds what these can take) */
	"sched_yield", "sched_setparam", "sched_getparam", "sched_setscheduler", "sched_getscheduler",
	"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "sched_setaffinity",
	"sched_getaffinity", "sched_setattr", "sched_getattr", "getpriority", "setpriority", "ioprio_get",
	"ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage", "getcpu",
	/* system information */
	"uname", "sysinfo", "getrandom",
	/* sockets (socket itself: see socket_families) */
	"socketpair", "connect", "accept", "accept4", "bind", "listen", "shutdown", "getsockname",
	"getpeername", "setsockopt", "getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
	"recvmmsg",
	/* System V IPC (the container has a private IPC namespace) */
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
	"msgrcv", "msgctl",
	/* classic AIO (not io_uring) */
	"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
	/* self-sandboxing: a program may restrict itself further */
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
};

/* 32-bit x86 (and arm) spellings of the calls above: 64-bit offsets and
 * ids, time64 variants, the socketcall and ipc multiplexers. */
static const char *const allow_compat[] = {
	"_llseek", "_newselect", "fadvise64_64", "fcntl64", "fstat64", "fstatat64", "fstatfs64", "ftruncate64",
	"lstat64", "mmap2", "sendfile64", "stat64", "statfs64", "truncate64", "ugetrlimit", "waitpid", "nice",
	"sigaction", "sigprocmask", "sigreturn", "sigsuspend", "sigpending", "signal", "ipc", "send",
	"recv", "chown32", "fchown32", "lchown32", "getuid32", "getgid32", "geteuid32", "getegid32", "setuid32",
	"setgid32", "setreuid32", "setregid32", "setresuid32", "getresuid32", "setresgid32", "getresgid32",
	"getgroups32", "setgroups32", "setfsuid32", "setfsgid32", "arm_fadvise64_64", "arm_sync_file_range",
	"sync_file_range2", "breakpoint", "cacheflush", "set_tls", "clock_gettime64", "clock_getres_time64",
	"clock_nanosleep_time64", "timer_gettime64", "timer_settime64", "timerfd_gettime64", "timerfd_settime64",
	"utimensat_time64", "pselect6_time64", "ppoll_time64", "io_pgetevents_time64", "recvmmsg_time64",
	"semtimedop_time64", "rt_sigtimedwait_time64",
	"futex_time64", "sched_rr_get_interval_time64",
};

/* socket(2) families allowed: AF_UNIX (1), AF_INET (2), AF_INET6 (10) and
 * AF_NETLINK (16, which glibc's getaddrinfo and `ip` use to read the
 * interfaces). Every other family fails with EPERM, the default: AF_VSOCK is not
 * network-namespaced (a --network none sandbox could reach the
 * hypervisor), AF_ALG, AF_BLUETOOTH, AF_KEY, AF_TIPC, AF_RDS… are kernel
 * attack surface with no use in a sandbox. AF_PACKET needs CAP_NET_RAW
 * anyway. Upstream Docker (moby/profiles, 2026) only refuses AF_ALG (38)
 * and AF_VSOCK (40).
 *
 * Why EPERM and not EAFNOSUPPORT: ERRNO rules for socket beside the ALLOW
 * ones collide in libseccomp's socketcall translation and runc refuses the
 * whole profile ("error adding seccomp rule for syscall socket: file
 * exists"); EPERM is the default, which needs no rule. */
static const json_int_t socket_families[] = {1, 2, 10, 16};

/* personality(2) values a program may set: PER_LINUX (0), PER_LINUX32
 * (0x8), UNAME26 (0x20000), both (0x20008), and 0xffffffff, which only
 * queries. Not ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC: turning off ASLR or
 * NX inside the sandbox only helps an exploit. */
static const json_int_t personalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

/* clone(2) is allowed only when its flags ask for no new namespace, so an
 * unshare through clone fails like unshare itself. The flags are argument
 * 0 on x86 and arm (s390 swaps them; brig does not map s390). */
#define CLONE_NS_FLAGS                                                                                                 \
	(0x00020000 /* NEWNS */ | 0x02000000 /* NEWCGROUP */ | 0x04000000 /* NEWUTS */ | 0x08000000 /* NEWIPC */ |    \
	 0x10000000 /* NEWUSER */ | 0x20000000 /* NEWPID */ | 0x40000000 /* NEWNET */)

#define ERRNO_EPERM 1
#define ERRNO_ENOSYS 38

static json_t *names_array(const char *const *a, size_t n)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_string(a[i]));
	return arr;
}

static json_t *rule(json_t *names, const char *action, json_t *args)
{
	json_t *r = json_object();
	json_object_set_new(r, "names", names);
	json_object_set_new(r, "action", json_string(action));
	json_object_set_new(r, "args", args ? args : json_array());
	return r;
}

static json_t *arg(unsigned index, json_int_t value, json_int_t value_two, const char *op)
{
	return json_pack("{s:i, s:I, s:I, s:s}", "index", (int)index, "value", value, "valueTwo", value_two, "op", op);
}

static json_t *build_profile(void)
{
	json_t *p = json_object();
	json_object_set_new(p, "defaultAction", json_string("SCMP_ACT_ERRNO"));
	json_object_set_new(p, "defaultErrnoRet", json_integer(ERRNO_EPERM));
	/* Docker picks the entry for its own architecture and adds the
	 * sub-architectures, so a 32-bit arm binary gets the same rules. Not
	 * SCMP_ARCH_X86: see socketcall above. */
	json_object_set_new(p, "archMap",
			    json_pack("[{s:s, s:[s]}, {s:s, s:[s]}]", "architecture", "SCMP_ARCH_X86_64",
				      "subArchitectures", "SCMP_ARCH_X32", "architecture",
				      "SCMP_ARCH_AARCH64", "subArchitectures", "SCMP_ARCH_ARM"));
	json_t *calls = json_array();
	json_t *any = names_array(allow_any, sizeof allow_any / sizeof allow_any[0]);
	json_t *compat = names_array(allow_compat, sizeof allow_compat / sizeof allow_compat[0]);
	json_array_extend(any, compat); /* copies: compat is still ours */
	json_decref(compat);
	json_array_append_new(calls, rule(any, "SCMP_ACT_ALLOW", NULL));
	/* One rule per value: seccomp ORs rules, ANDs the args of one rule. */
	for (size_t i = 0; i < sizeof personalities / sizeof personalities[0]; i++)
		json_array_append_new(calls, rule(json_pack("[s]", "personality"), "SCMP_ACT_ALLOW",
						  json_pack("[o]", arg(0, personalities[i], 0, "SCMP_CMP_EQ"))));
	for (size_t i = 0; i < sizeof socket_families / sizeof socket_families[0]; i++)
		json_array_append_new(calls, rule(json_pack("[s]", "socket"), "SCMP_ACT_ALLOW",
						  json_pack("[o]", arg(0, socket_families[i], 0, "SCMP_CMP_EQ"))));
	/* (flags & CLONE_NS_FLAGS) == 0 */
	json_array_append_new(calls, rule(json_pack("[s]", "clone"), "SCMP_ACT_ALLOW",
					  json_pack("[o]", arg(0, CLONE_NS_FLAGS, 0, "SCMP_CMP_MASKED_EQ"))));
	json_t *clone3 = rule(json_pack("[s]", "clone3"), "SCMP_ACT_ERRNO", NULL);
	json_object_set_new(clone3, "errnoRet", json_integer(ERRNO_ENOSYS));
	json_array_append_new(calls, clone3);
	json_object_set_new(p, "syscalls", calls);
	return p;
}

static char *profile_text;
static pthread_once_t profile_once = PTHREAD_ONCE_INIT;

static void make_profile_text(void)
{
	json_t *p = build_profile();
	/* Insertion order and compact form: the same bytes on every build, so
	 * the spec hash of the default spec is stable. */
	profile_text = json_dumps(p, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(p);
	if (!profile_text)
		abort(); /* only on allocation failure */
}

const char *brig_spec_seccomp_default(void)
{
	pthread_once(&profile_once, make_profile_text);
	return profile_text;
}
