/* host_cmd.c — host commands of an image build (debootstrap, chroot, tar, npm):
 * argv only, no shell, a scrubbed environment, output as progress lines. */
#include "image/image_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/spec.h"
#include "util/util.h"

extern char **environ;

#define LINE_MAX_BYTES 2048
#define TAIL_LINES 6
#define TAIL_LINE_BYTES 240
#define DEFAULT_TIMEOUT_MS (30LL * 60 * 1000)
/* Where debootstrap, chroot and friends live when brig runs with a PATH
 * that lacks them (sudo without secure_path, a user shell). */
static const char sbin_dirs[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

typedef struct line_buf {
	char data[LINE_MAX_BYTES];
	size_t len;
} line_buf;

typedef struct run_state {
	const brig_image_cmd *c;
	line_buf lines[2];
	char tail[TAIL_LINES][TAIL_LINE_BYTES];
	size_t tail_next, tail_count;
	brig_buf out;
	bool out_overflow;
} run_state;

static void emit_line(run_state *s, const char *line, size_t len)
{
	/* Terminal control bytes from a tool's output never reach our stderr. */
	char clean[LINE_MAX_BYTES + 1];
	size_t n = 0;
	for (size_t i = 0; i < len && n < LINE_MAX_BYTES; i++) {
		unsigned char ch = (unsigned char)line[i];
		if (ch == '\r')
			continue;
		clean[n++] = (ch < 0x20 && ch != '\t') || ch == 0x7f ? '?' : (char)ch;
	}
	clean[n] = 0;
	if (!n)
		return;
	size_t keep = n < TAIL_LINE_BYTES - 1 ? n : TAIL_LINE_BYTES - 1;
	memcpy(s->tail[s->tail_next], clean, keep);
	s->tail[s->tail_next][keep] = 0;
	s->tail_next = (s->tail_next + 1) % TAIL_LINES;
	if (s->tail_count < TAIL_LINES)
		s->tail_count++;
	if (s->c->progress)
		s->c->progress(s->c->stage, clean, s->c->payload);
}

static void feed_lines(run_state *s, int which, const char *data, size_t len, bool flush)
{
	line_buf *lb = &s->lines[which];
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n' || lb->len == sizeof lb->data) {
			emit_line(s, lb->data, lb->len);
			lb->len = 0;
			if (data[i] == '\n')
				continue;
		}
		lb->data[lb->len++] = data[i];
	}
	if (flush && lb->len) {
		emit_line(s, lb->data, lb->len);
		lb->len = 0;
	}
}

/* The last lines of output, joined with " | ", for an error message. */
static char *tail_text(const run_state *s)
{
	brig_buf b;
	brig_buf_init(&b, TAIL_LINES * (TAIL_LINE_BYTES + 4) + 1);
	size_t first = (s->tail_next + TAIL_LINES - s->tail_count) % TAIL_LINES;
	for (size_t i = 0; i < s->tail_count; i++) {
		/* Each tail line is under TAIL_LINE_BYTES: the cap holds them all. */
		if (i)
			brig_buf_puts(&b, " | ");
		brig_buf_puts(&b, s->tail[(first + i) % TAIL_LINES]);
	}
	if (!b.len)
		brig_buf_puts(&b, "(no output)");
	return brig_buf_steal(&b, NULL);
}

/* argv[0] looked up in $PATH and then the sbin directories. */
static char *find_program(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? xstrdup(name) : NULL;
	const char *path = getenv("PATH");
	cleanup_free char *all = xasprintf("%s:%s", path && *path ? path : "", sbin_dirs);
	char *save = NULL;
	for (char *dir = strtok_r(all, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		if (!*dir || dir[0] != '/')
			continue; /* a relative PATH entry would run whatever the cwd holds */
		char *p = xasprintf("%s/%s", dir, name);
		struct stat st;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

/* brig's environment without model credentials, PATH completed with the
 * sbin directories, then extra. */
static char **child_env(const char *const *extra)
{
	size_t n = 0, ne = 0;
	while (environ && environ[n])
		n++;
	while (extra && extra[ne])
		ne++;
	char **env = xcalloc(n + ne + 2, sizeof *env);
	size_t k = 0;
	bool have_path = false;
	for (size_t i = 0; i < n; i++) {
		if (brig_env_is_credential(environ[i]))
			continue;
		bool replaced = false;
		for (size_t j = 0; j < ne; j++) {
			const char *eq = strchr(extra[j], '=');
			size_t kl = eq ? (size_t)(eq - extra[j]) : strlen(extra[j]);
			if (strncmp(environ[i], extra[j], kl) == 0 && environ[i][kl] == '=')
				replaced = true;
		}
		if (replaced)
			continue;
		if (strncmp(environ[i], "PATH=", 5) == 0) {
			env[k++] = xasprintf("%s:%s", environ[i], sbin_dirs);
			have_path = true;
			continue;
		}
		env[k++] = xstrdup(environ[i]);
	}
	if (!have_path)
		env[k++] = xasprintf("PATH=%s", sbin_dirs);
	for (size_t j = 0; j < ne; j++)
		env[k++] = xstrdup(extra[j]);
	env[k] = NULL;
	return env;
}

/* The build's commands run in a process group of their own (so a timeout
 * or a cancel reaches debootstrap's and apt's children too); the terminal's
 * Ctrl-C then reaches brig only, which records it here and stops the group. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

/* Sends sig to the command's whole group (its pgid is its pid; the group
 * id is not reused while any member lives). */
static void kill_group(pid_t pid, int sig)
{
	kill(-pid, sig);
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

int brig_image__run(const brig_image_cmd *c, char **out, brig_error **err)
{
	if (out)
		*out = NULL;
	const char *what = c->what ? c->what : c->argv[0];
	cleanup_free char *prog = find_program(c->argv[0]);
	if (!prog)
		return brig__error_set(
			err, BRIG_ENOTFOUND, ENOENT,
			"%s is not installed (looked in PATH and %s): install it, e.g. apt-get install %s", c->argv[0],
			sbin_dirs, c->argv[0]);

	int po[2] = {-1, -1}, pe[2] = {-1, -1};
	if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
		int e = errno;
		for (int i = 0; i < 2; i++) {
			if (po[i] >= 0)
				close(po[i]);
			if (pe[i] >= 0)
				close(pe[i]);
		}
		return brig__error_set(err, BRIG_EIO, e, "%s: cannot make pipes: %s", what, strerror(e));
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&attr, &none);
	sigset_t dfl;
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
	/* No SA_RESTART: the signal interrupts poll() so the loop sees it. */
	struct sigaction stop_sa, old_int, old_term;
	memset(&stop_sa, 0, sizeof stop_sa);
	stop_sa.sa_handler = on_stop_signal;
	sigemptyset(&stop_sa.sa_mask);
	stop_signal = 0;
	sigaction(SIGINT, &stop_sa, &old_int);
	sigaction(SIGTERM, &stop_sa, &old_term);
	char **env = child_env(c->env_extra);
	pid_t pid;
	int se = posix_spawn(&pid, prog, &fa, &attr, (char *const *)c->argv, env);
	free_env(env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(po[1]);
	close(pe[1]);
	if (se != 0) {
		close(po[0]);
		close(pe[0]);
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		return brig__error_set(err, se == ENOENT ? BRIG_ENOTFOUND : BRIG_EIO, se, "%s: cannot start %s: %s",
				       what, prog, strerror(se));
	}

	run_state s = {.c = c};
	brig_buf_init(&s.out, c->stdout_cap ? c->stdout_cap : (4u << 20));
	int64_t timeout = c->timeout_ms > 0 ? c->timeout_ms : DEFAULT_TIMEOUT_MS;
	int64_t deadline = brig_now_ms() + timeout;
	bool timed_out = false, reaped = false;
	int status = 0;
	/* Once the command has exited, what is still readable is read for a
	 * moment only: a daemon it started may hold the pipes open for ever. */
	int64_t drain_deadline = -1;
	struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	int open_fds = 2;
	char buf[16384];
	while (open_fds > 0 && !stop_signal) {
		if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
			reaped = true;
			kill_group(pid, SIGKILL);
			drain_deadline = brig_now_ms() + 2000;
		}
		int left = brig_remaining_ms(reaped ? drain_deadline : deadline);
		if (left == 0) {
			timed_out = !reaped;
			break;
		}
		int pr = poll(fds, 2, left > 200 ? 200 : left);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = read(fds[i].fd, buf, sizeof buf);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0) {
				feed_lines(&s, i, "", 0, true);
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
				continue;
			}
			if (i == 0 && c->capture_stdout) {
				if (!s.out_overflow && brig_buf_add(&s.out, buf, (size_t)r) != 0)
					s.out_overflow = true;
			} else {
				feed_lines(&s, i, buf, (size_t)r, false);
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0) {
			feed_lines(&s, i, "", 0, true);
			close(fds[i].fd);
		}

	/* The pipes closed (or poll failed) with the command perhaps still
	 * running: it still gets until the deadline, and a signal stops it. */
	while (!reaped && !timed_out && !stop_signal) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR)) {
			reaped = w == pid;
			break;
		}
		if (brig_remaining_ms(deadline) == 0)
			timed_out = true;
		else
			usleep(50 * 1000);
	}
	int stopped_by = reaped ? 0 : stop_signal;
	if (!reaped && (timed_out || stopped_by)) {
		kill_group(pid, SIGTERM);
		for (int i = 0; i < 50 && !reaped; i++) {
			if (waitpid(pid, &status, WNOHANG) == pid)
				reaped = true;
			else
				usleep(100 * 1000);
		}
		if (!reaped)
			kill_group(pid, SIGKILL);
	}
	while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	kill_group(pid, SIGKILL); /* whatever it left behind */
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (!stopped_by)
		stopped_by = stop_signal;
	int rc = 0;
	if (stopped_by) {
		rc = brig__error_set(err, BRIG_ECANCELED, 0, "%s was stopped: brig received %s", what,
				     stopped_by == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM");
	} else if (timed_out) {
		char secs[32];
		snprintf(secs, sizeof secs, "%lld", (long long)(timeout / 1000));
		cleanup_free char *t = tail_text(&s);
		rc = brig__error_set(err, BRIG_ETIMEDOUT, 0, "%s did not finish within %s s and was stopped: %s", what,
				     secs, t);
	} else if (WIFSIGNALED(status)) {
		cleanup_free char *t = tail_text(&s);
		rc = brig__error_set(err, BRIG_EIO, 0, "%s failed (killed by signal %d): %s", what, WTERMSIG(status),
				     t);
	} else if (WEXITSTATUS(status) != 0) {
		cleanup_free char *t = tail_text(&s);
		rc = brig__error_set(err, BRIG_EIO, 0, "%s failed (exit %d): %s", what, WEXITSTATUS(status), t);
	} else if (s.out_overflow) {
		rc = brig__error_set(err, BRIG_ETOOBIG, 0, "%s: its output passed %zu bytes, the cap", what, s.out.cap);
	}
	if (rc == 0 && out)
		*out = brig_buf_steal(&s.out, NULL);
	brig_buf_free(&s.out);
	return rc;
}

void brig_image__remove_tree(const char *path)
{
	if (!path || !*path || strcmp(path, "/") == 0)
		return;
	const char *argv[] = {"rm", "-rf", "--one-file-system", "--", path, NULL};
	brig_image_cmd c = {.stage = "cleanup", .what = "rm", .argv = argv, .timeout_ms = 10 * 60 * 1000};
	brig_image__run(&c, NULL, NULL);
}
