/* guest/procs.c — commands: the per-command shepherd (a subreaper that ends
 * the whole tree), pipes and ptys, EXIT, detached output, PS/ATTACH/STATUS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "guest/init.h"

extern char **environ;

gi_proc *gi_procs;
static uint32_t next_proc_id = 1;

/* Shepherd → brig-init records on the status pipe. */
enum { ST_STARTED = 'S', ST_EXECFAIL = 'E', ST_EXITED = 'X' };
typedef struct st_rec {
	int32_t kind, a, b;
} st_rec;

enum { W_OUT = 1, W_ERR = 2, W_IN = 3, W_ST = 4 };

static gi_proc *find_proc(int has_proc, int64_t id, const char *tag)
{
	for (gi_proc *p = gi_procs; p; p = p->next) {
		if (p->exit_sent == -1 || (p->state == GI_STARTING && !p->shep_alive))
			continue;
		if (has_proc && p->id == (uint64_t)id)
			return p;
		if (!has_proc && tag && p->tag && strcmp(p->tag, tag) == 0)
			return p;
	}
	return NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- the shepherd (a forked copy of brig-init, one per command) ---- */

static void st_send(int fd, int kind, int a, int b)
{
	st_rec r = {kind, a, b};
	ssize_t w;
	do
		w = write(fd, &r, sizeof r);
	while (w < 0 && errno == EINTR);
}

/* SIGKILLs every child of ours (but those spare() keeps); how many. */
static int kill_children(int (*spare)(pid_t))
{
	pid_t self = getpid();
	int killed = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		int f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			continue;
		ssize_t n = read(f, buf, sizeof buf - 1);
		close(f);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');
		char state;
		int ppid;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self &&
		    !(spare && spare((pid_t)pid)) && kill((pid_t)pid, SIGKILL) == 0)
			killed++;
	}
	closedir(d);
	return killed;
}

/* SIGKILLs every child, reaps, and repeats until none is left: what a dead
 * child leaves behind is reparented to us (the subreaper) and killed in turn. */
static void shep_kill_tree(pid_t main_pid, int stfd, int *main_done)
{
	for (;;) {
		kill_children(NULL);
		int st;
		pid_t w = waitpid(-1, &st, 0);
		if (w < 0 && errno == ECHILD)
			return;
		if (w == main_pid && !*main_done) {
			*main_done = 1;
			st_send(stfd, ST_EXITED, st, 0);
		}
	}
}

typedef struct spawn {
	char **argv, **envp;
	const char *cwd;
	int pty;
	int in, out, err; /* the command's ends (for a pty: the slave in all three) */
	int rows, cols;
} spawn;

static void child_exec(spawn *s, int errfd)
{
	sigset_t all;
	sigfillset(&all);
	for (int i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	int stage = 3;
	if (s->pty) {
		if (setsid() < 0 || ioctl(s->in, TIOCSCTTY, 0) < 0)
			goto fail;
	} else {
		setpgid(0, 0);
	}
	if (dup2(s->in, 0) < 0 || dup2(s->out, 1) < 0 || dup2(s->err, 2) < 0)
		goto fail;
	if (s->in > 2)
		close(s->in);
	if (s->out > 2 && s->out != s->in)
		close(s->out);
	if (s->err > 2 && s->err != s->in && s->err != s->out)
		close(s->err);
	stage = 1;
	if (chdir(s->cwd) < 0)
		goto fail;
	stage = 2;
	environ = s->envp;
	execvp(s->argv[0], s->argv);
fail:;
	int rec[2] = {stage, errno};
	if (write(errfd, rec, sizeof rec) < 0)
		_exit(127);
	_exit(127);
}

static void shepherd(spawn *s, int stfd, int ctlfd)
{
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	int keep[5] = {stfd, ctlfd, s->in, s->out, s->err};
	gi_close_fds_except(keep, 5);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	int ep[2];
	if (sfd < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		st_send(stfd, ST_EXECFAIL, 3, errno);
		_exit(0);
	}
	pid_t pid = fork();
	if (pid < 0) {
		st_send(stfd, ST_EXECFAIL, 3, errno);
		_exit(0);
	}
	if (pid == 0) {
		close(ep[0]);
		close(stfd);
		close(ctlfd);
		close(sfd);
		child_exec(s, ep[1]);
	}
	close(ep[1]);
	close(s->in);
	if (s->out != s->in)
		close(s->out);
	if (s->err != s->in && s->err != s->out)
		close(s->err);
	int rec[2];
	ssize_t r;
	do
		r = read(ep[0], rec, sizeof rec);
	while (r < 0 && errno == EINTR);
	close(ep[0]);
	if (r == (ssize_t)sizeof rec) {
		waitpid(pid, NULL, 0);
		st_send(stfd, ST_EXECFAIL, rec[0], rec[1]);
		_exit(0);
	}
	st_send(stfd, ST_STARTED, pid, 0);
	int main_done = 0;
	for (;;) {
		struct pollfd pf[2] = {{.fd = ctlfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			_exit(1);
		if (pf[0].revents) {
			char k = 0;
			ssize_t n = read(ctlfd, &k, 1);
			if (n <= 0 || k == 'K') {
				shep_kill_tree(pid, stfd, &main_done);
				_exit(0);
			}
		}
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0)
				;
		}
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			if (w == pid && !main_done) {
				main_done = 1;
				st_send(stfd, ST_EXITED, st, 0);
			}
		if (w < 0 && errno == ECHILD && main_done)
			_exit(0); /* the command and everything it left behind are gone */
	}
}

/* ---- starting ---- */

/* The env file's entries, NUL-separated in one buffer (*out, caller frees;
 * NULL with no file): read at each START, so what brig wrote last counts.
 * The sandbox can write the file too; it only ever changes the sandbox's
 * own commands' environment. */
static size_t read_env_file(char **out)
{
	*out = NULL;
	int fd = open(BRIG_GP_ENV_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	char *buf = malloc(BRIG_GP_ENV_FILE_MAX + 1);
	size_t len = 0;
	while (buf && len < BRIG_GP_ENV_FILE_MAX) {
		ssize_t r = read(fd, buf + len, BRIG_GP_ENV_FILE_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (!buf)
		return 0;
	*out = buf;
	return brig_gp_env_lines(buf, len);
}

/* The container's environment, then the env file's entries, then START's
 * ENV. *file holds the file's bytes the result points into (caller frees,
 * after the result). */
static char **build_env(char **add, size_t nadd, char **file)
{
	size_t n = 0;
	while (environ[n])
		n++;
	size_t nfile = read_env_file(file);
	char **e = calloc(n + nfile + nadd + 1, sizeof *e);
	if (!e) {
		free(*file);
		*file = NULL;
		return NULL;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		e[k++] = environ[i];
	char *p = *file;
	for (size_t i = 0; i < nfile; i++) {
		brig_gp_env_put(e, &k, p);
		p += strlen(p) + 1;
	}
	for (size_t i = 0; i < nadd; i++)
		brig_gp_env_put(e, &k, add[i]);
	e[k] = NULL;
	return e;
}

static void proc_free(gi_proc *p)
{
	free(p->tag);
	if (p->argv)
		for (char **a = p->argv; *a; a++)
			free(*a);
	free(p->argv);
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->st_fd);
	close_fd(&p->ctl_fd);
	gi_buf_free(&p->stdin_buf);
	gi_buf_free(&p->head);
	gi_buf_free(&p->tail);
	while (p->killw) {
		gi_waiter *w = p->killw;
		p->killw = w->next;
		free(w);
	}
	free(p);
}

void gi_proc_start(gi_conn *c, uint32_t req, gi_req *r)
{
	if (r->nargv == 0 || r->argv[0][0] == '\0') {
		gi_send_error(c, req, EINVAL, "START needs a program to run (ARGV)");
		return;
	}
	int pty = r->rows || r->cols;
	if (pty && (r->rows < 1 || r->rows > 1000 || r->cols < 1 || r->cols > 1000)) {
		gi_send_error(c, req, EINVAL, "a terminal's ROWS and COLS must be 1..1000");
		return;
	}
	if (r->timeout_ms < 0 || r->keep < 0 || r->keep > 64ll * 1024 * 1024 || r->window < 0) {
		gi_send_error(c, req, EINVAL, "TIMEOUT_MS, KEEP or WINDOW out of range");
		return;
	}
	if (r->tag && find_proc(0, 0, r->tag)) {
		gi_send_error(c, req, EEXIST, "a process tagged %s exists already", r->tag);
		return;
	}
	const char *cwd = r->cwd ? r->cwd : "/workspace";
	gi_proc *p = calloc(1, sizeof *p);
	if (!p) {
		gi_send_error(c, req, ENOMEM, "out of memory");
		return;
	}
	p->in_fd = p->out_fd = p->err_fd = p->st_fd = p->ctl_fd = -1;
	int cin = -1, cout = -1, cerr = -1, stp[2] = {-1, -1}, ctp[2] = {-1, -1};
	int err = 0;
	if (pty) {
		int m, s;
		struct winsize ws = {.ws_row = (unsigned short)r->rows, .ws_col = (unsigned short)r->cols};
		if (openpty(&m, &s, NULL, NULL, &ws) < 0) {
			err = errno;
			goto fail;
		}
		fcntl(m, F_SETFD, FD_CLOEXEC);
		fcntl(s, F_SETFD, FD_CLOEXEC);
		p->out_fd = m;
		p->in_fd = fcntl(m, F_DUPFD_CLOEXEC, 3);
		cin = cout = cerr = s;
	} else {
		int a[2], b[2];
		if (pipe2(a, O_CLOEXEC) < 0) {
			err = errno;
			goto fail;
		}
		p->out_fd = a[0], cout = a[1];
		if (pipe2(b, O_CLOEXEC) < 0) {
			err = errno;
			goto fail;
		}
		p->err_fd = b[0], cerr = b[1];
		if (r->stdin_on) {
			int d[2];
			if (pipe2(d, O_CLOEXEC) < 0) {
				err = errno;
				goto fail;
			}
			cin = d[0], p->in_fd = d[1];
		} else {
			cin = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (cin < 0) {
				err = errno;
				goto fail;
			}
		}
	}
	if (pty && !r->stdin_on)
		close_fd(&p->in_fd);
	if (pipe2(stp, O_CLOEXEC) < 0 || pipe2(ctp, O_CLOEXEC) < 0) {
		err = errno;
		goto fail;
	}
	char *env_file = NULL;
	char **envp = build_env(r->env, r->nenv, &env_file);
	if (!envp) {
		err = ENOMEM;
		goto fail;
	}
	spawn sp = {.argv = r->argv, .envp = envp, .cwd = cwd, .pty = pty, .in = cin, .out = cout, .err = cerr};
	pid_t shep = fork();
	if (shep < 0) {
		err = errno;
		free(envp);
		free(env_file);
		goto fail;
	}
	if (shep == 0) {
		close(stp[0]);
		close(ctp[1]);
		shepherd(&sp, stp[1], ctp[0]);
		_exit(0);
	}
	free(envp);
	free(env_file);
	close(cin);
	if (cout != cin)
		close(cout);
	if (cerr != cin && cerr != cout)
		close(cerr);
	close(stp[1]);
	close(ctp[0]);
	p->st_fd = stp[0];
	p->ctl_fd = ctp[1];
	p->shep = shep;
	p->shep_alive = 1;
	p->id = next_proc_id++;
	p->pty = pty;
	p->stdin_on = r->stdin_on ? 1 : 0;
	p->detached = r->detached ? 1 : 0;
	p->tag = r->tag;
	r->tag = NULL;
	p->argv = r->argv;
	r->argv = NULL;
	r->nargv = 0;
	p->started_ms = gi_wall_ms();
	p->deadline = r->timeout_ms > 0 ? gi_now_ms() + r->timeout_ms : 0;
	p->keep = r->keep ? (size_t)r->keep : 1024 * 1024;
	if (p->keep > BRIG_GP_KEEP_MAX)
		p->keep = BRIG_GP_KEEP_MAX;
	p->starter = c;
	p->start_req = req;
	/* On a FLOW connection a detached command's output is only kept: its
	 * starter does not listen, and an unread window would stop it. */
	if (!(c->flow && p->detached)) {
		p->credit[p->nsinks] = c->flow && r->window > 0 ? r->window : GI_NO_LIMIT;
		p->sinks[p->nsinks++] = c;
	}
	p->state = GI_STARTING;
	for (int *fd = &p->in_fd; fd <= &p->ctl_fd; fd++)
		if (*fd >= 0)
			gi_set_nonblock(*fd);
	p->next = gi_procs;
	gi_procs = p;
	return;
fail:
	if (cin >= 0)
		close(cin);
	if (cout >= 0 && cout != cin)
		close(cout);
	if (cerr >= 0 && cerr != cin && cerr != cout)
		close(cerr);
	for (int i = 0; i < 2; i++) {
		if (stp[i] >= 0)
			close(stp[i]);
		if (ctp[i] >= 0)
			close(ctp[i]);
	}
	proc_free(p);
	gi_send_error(c, req, err, "cannot start %s: %s", r->argv[0], strerror(err));
}

/* ---- output ---- */

/* True while a connection has GI_OUT_CAP queued, or a FLOW sink's window
 * is used up: the command's pipes are then not read, so it blocks. */
static int sinks_full(gi_proc *p)
{
	for (int i = 0; i < p->nsinks; i++)
		if (gi_buf_pending(&p->sinks[i]->out) >= GI_OUT_CAP || p->credit[i] <= 0)
			return 1;
	return 0;
}

static void credit_use(int64_t *credit, size_t n)
{
	if (*credit != GI_NO_LIMIT)
		*credit -= (int64_t)n;
}

/* Tells the connection that sent a proc's stdin how much of it is gone
 * (written to the command, or dropped), so it may send that much more. */
static void stdin_ack(gi_proc *p, int force)
{
	if (!p->stdin_conn || p->stdin_ack <= 0 || (!force && p->stdin_ack < 65536))
		return;
	brig_gp_enc *e = gi_enc();
	brig_gp_put_int(e, BRIG_GP_F_CREDIT, p->stdin_ack);
	gi_send(p->stdin_conn, BRIG_GP_T_CREDIT, p->id);
	p->stdin_ack = 0;
}

static void rec_hdr(unsigned char *h, int stream, size_t n)
{
	h[0] = (unsigned char)stream;
	h[1] = (unsigned char)(n >> 24), h[2] = (unsigned char)(n >> 16);
	h[3] = (unsigned char)(n >> 8), h[4] = (unsigned char)n;
}

/* Keeps a detached proc's output: the first KEEP/2 bytes in head, the last
 * KEEP/2 in tail (bytes leave its front, DROPPED counts them). Both hold
 * records: stream (1 byte), length (4), data. */
static void keep_add(gi_proc *p, int stream, const unsigned char *d, size_t n)
{
	size_t half = p->keep / 2 ? p->keep / 2 : 1;
	unsigned char h[5];
	if (p->head_data < half) {
		size_t take = n < half - p->head_data ? n : half - p->head_data;
		rec_hdr(h, stream, take);
		if (gi_buf_add(&p->head, h, 5) < 0 || gi_buf_add(&p->head, d, take) < 0)
			return;
		p->head_data += take;
		d += take, n -= take;
	}
	if (!n)
		return;
	if (n > half) { /* only the last half of this chunk can stay */
		p->dropped += (int64_t)(n - half);
		d += n - half, n = half;
	}
	rec_hdr(h, stream, n);
	if (gi_buf_add(&p->tail, h, 5) < 0 || gi_buf_add(&p->tail, d, n) < 0)
		return;
	p->tail_data += n;
	while (p->tail_data > half) {
		unsigned char *q = p->tail.p + p->tail.off;
		size_t l = (size_t)q[1] << 24 | (size_t)q[2] << 16 | (size_t)q[3] << 8 | q[4];
		size_t excess = p->tail_data - half;
		if (excess >= l) { /* the whole oldest record goes */
			p->tail.off += 5 + l;
			p->tail_data -= l;
			p->dropped += (int64_t)l;
			continue;
		}
		/* its first bytes go: the header moves forward over them */
		int st = q[0];
		p->tail.off += excess;
		rec_hdr(p->tail.p + p->tail.off, st, l - excess);
		p->tail_data -= excess;
		p->dropped += (int64_t)excess;
	}
}

static void emit_output(gi_proc *p, int stream, const unsigned char *d, size_t n)
{
	if (p->detached)
		keep_add(p, stream, d, n);
	for (int i = 0; i < p->nsinks; i++) {
		brig_gp_enc *e = gi_enc();
		brig_gp_put_int(e, BRIG_GP_F_STREAM, stream);
		brig_gp_put_bytes(e, BRIG_GP_F_DATA, d, n);
		gi_send(p->sinks[i], BRIG_GP_T_OUTPUT, p->id);
		credit_use(&p->credit[i], n);
	}
}

/* Reads what one of the proc's output fds holds; -1 at EOF. */
static int read_out(gi_proc *p, int *fd, int stream, int drain)
{
	unsigned char buf[BRIG_GP_MAX_DATA];
	/* Draining stops after 4 MiB: a process left behind may write forever. */
	for (int rounds = 0; rounds < (drain ? 64 : 4); rounds++) {
		if (*fd < 0)
			return -1;
		ssize_t n = read(*fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* A terminal hands output to its master a moment after the
			 * write: when draining, wait a little for the rest. */
			struct pollfd pf = {.fd = *fd, .events = POLLIN};
			if (drain && p->pty && poll(&pf, 1, 20) > 0)
				continue;
			return 0;
		}
		if (n <= 0) { /* EOF, or EIO from a pty whose last slave closed */
			close_fd(fd);
			if (p->pty)
				close_fd(&p->in_fd);
			return -1;
		}
		emit_output(p, stream, buf, (size_t)n);
		if (!drain && sinks_full(p))
			return 0;
	}
	return 0;
}

static void put_exit_fields(brig_gp_enc *e, gi_proc *p)
{
	brig_gp_put_int(e, BRIG_GP_F_CODE, p->code);
	brig_gp_put_int(e, BRIG_GP_F_SIGNAL, p->sig);
	brig_gp_put_int(e, BRIG_GP_F_TIMED_OUT, p->timed_out);
	brig_gp_put_int(e, BRIG_GP_F_KILLED, p->killed);
	brig_gp_put_int(e, BRIG_GP_F_DROPPED, p->dropped);
}

static void answer_killers(gi_proc *p)
{
	while (p->killw) {
		gi_waiter *w = p->killw;
		p->killw = w->next;
		brig_gp_enc *e = gi_enc();
		brig_gp_put_int(e, BRIG_GP_F_PROC, p->id);
		put_exit_fields(e, p);
		gi_send(w->c, BRIG_GP_T_OK, w->req);
		free(w);
	}
}

/* The command's own process ended: send what the pipes hold, then EXIT. */
static void proc_exited(gi_proc *p, int st)
{
	if (p->state == GI_EXITED)
		return;
	read_out(p, &p->out_fd, 1, 1);
	read_out(p, &p->err_fd, 2, 1);
	if (WIFSIGNALED(st)) {
		p->sig = WTERMSIG(st);
		p->code = 128 + p->sig;
	} else {
		p->code = WEXITSTATUS(st);
	}
	if (p->timed_out)
		p->code = 124;
	p->state = GI_EXITED;
	p->ended_ms = gi_wall_ms();
	/* What it keeps now stays as it is: give back the slack. */
	if (p->tail.off) {
		memmove(p->tail.p, p->tail.p + p->tail.off, p->tail.len - p->tail.off);
		p->tail.len -= p->tail.off;
		p->tail.off = 0;
		unsigned char *np = realloc(p->tail.p, p->tail.len + 1);
		if (np)
			p->tail.p = np;
	}
	/* Processes it left behind keep running; their output goes nowhere. */
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->in_fd);
	gi_buf_free(&p->stdin_buf);
	for (int i = 0; i < p->nsinks; i++) {
		brig_gp_enc *e = gi_enc();
		put_exit_fields(e, p);
		gi_send(p->sinks[i], BRIG_GP_T_EXIT, p->id);
		if (p->sinks[i]->blocked_on == p)
			p->sinks[i]->blocked_on = NULL;
	}
	p->nsinks = 0;
	p->exit_sent = 1;
	for (gi_conn *c = gi_conns; c; c = c->next)
		if (c->blocked_on == p)
			c->blocked_on = NULL;
}

static void ask_kill(gi_proc *p)
{
	/* the sandbox (same uid) may have stopped the shepherd: wake it */
	if (p->shep_alive)
		kill(p->shep, SIGCONT);
	if (p->ctl_fd >= 0) {
		char k = 'K';
		if (write(p->ctl_fd, &k, 1) < 0)
			close_fd(&p->ctl_fd); /* the shepherd reads EOF as K too */
	}
}

static void st_read(gi_proc *p)
{
	st_rec r;
	for (;;) {
		ssize_t n = read(p->st_fd, &r, sizeof r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof r) {
			if (n == 0 || (n < 0 && errno != EAGAIN))
				close_fd(&p->st_fd);
			return;
		}
		if (r.kind == ST_STARTED && p->state == GI_STARTING) {
			p->pid = r.a;
			p->state = GI_RUNNING;
			brig_gp_enc *e = gi_enc();
			brig_gp_put_int(e, BRIG_GP_F_PROC, p->id);
			brig_gp_put_int(e, BRIG_GP_F_PID, p->pid);
			gi_send(p->starter, BRIG_GP_T_STARTED, p->start_req);
			if (p->killed) /* killed (connection gone) before it started */
				ask_kill(p);
		} else if (r.kind == ST_EXECFAIL && p->state == GI_STARTING) {
			const char *name = p->argv[0];
			if (r.a == 2 && r.b == ENOENT)
				gi_send_error(p->starter, p->start_req, ENOENT, "%s: not found in the image", name);
			else if (r.a == 1)
				gi_send_error(p->starter, p->start_req, r.b,
					      "cannot change to the working directory: %s", strerror(r.b));
			else
				gi_send_error(p->starter, p->start_req, r.b, "%s: %s", name, strerror(r.b));
			p->state = GI_EXITED;
			p->exit_sent = -1; /* never announced: forgotten */
			p->nsinks = 0;
		} else if (r.kind == ST_EXITED && p->state == GI_RUNNING) {
			proc_exited(p, r.a);
		}
	}
}

int gi_proc_pollfds(struct pollfd *pf, gi_proc **who, int *what, int max)
{
	int n = 0;
	for (gi_proc *p = gi_procs; p && n + 4 <= max; p = p->next) {
		if (p->st_fd >= 0) {
			pf[n] = (struct pollfd){.fd = p->st_fd, .events = POLLIN};
			who[n] = p, what[n++] = W_ST;
		}
		if (p->state != GI_RUNNING)
			continue;
		int full = sinks_full(p);
		if (p->out_fd >= 0 && !full) {
			pf[n] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
			who[n] = p, what[n++] = W_OUT;
		}
		if (p->err_fd >= 0 && !full) {
			pf[n] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
			who[n] = p, what[n++] = W_ERR;
		}
		if (p->in_fd >= 0 && (gi_buf_pending(&p->stdin_buf) || p->stdin_close)) {
			pf[n] = (struct pollfd){.fd = p->in_fd, .events = POLLOUT};
			who[n] = p, what[n++] = W_IN;
		}
	}
	return n;
}

static void stdin_flush(gi_proc *p)
{
	while (p->in_fd >= 0 && gi_buf_pending(&p->stdin_buf)) {
		ssize_t w = write(p->in_fd, p->stdin_buf.p + p->stdin_buf.off, gi_buf_pending(&p->stdin_buf));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w <= 0) { /* the command closed its stdin: the rest is dropped */
			p->stdin_ack += (int64_t)gi_buf_pending(&p->stdin_buf);
			gi_buf_free(&p->stdin_buf);
			if (!p->pty)
				close_fd(&p->in_fd);
			break;
		}
		p->stdin_buf.off += (size_t)w;
		p->stdin_ack += w;
	}
	stdin_ack(p, !gi_buf_pending(&p->stdin_buf));
	if (!gi_buf_pending(&p->stdin_buf) && p->stdin_close && p->in_fd >= 0) {
		if (p->pty) {
			char eof = 4; /* ^D: the terminal's end of input */
			if (write(p->in_fd, &eof, 1) == 1)
				p->stdin_close = 0;
		} else {
			close_fd(&p->in_fd);
			p->stdin_close = 0;
		}
	}
	if (gi_buf_pending(&p->stdin_buf) < GI_STDIN_CAP)
		for (gi_conn *c = gi_conns; c; c = c->next)
			if (c->blocked_on == p)
				c->blocked_on = NULL;
}

void gi_proc_event(gi_proc *p, int what, short rev)
{
	switch (what) {
	case W_ST: st_read(p); break;
	case W_OUT:
		if (p->state == GI_RUNNING)
			read_out(p, &p->out_fd, 1, 0);
		break;
	case W_ERR:
		if (p->state == GI_RUNNING)
			read_out(p, &p->err_fd, 2, 0);
		break;
	case W_IN: stdin_flush(p); break;
	}
}

/* ---- a shepherd stopped or killed from inside ----
 * The sandbox runs as our uid, so it can SIGSTOP or SIGKILL the shepherd of
 * its own command (the only two signals a shepherd does not block). A
 * stopped shepherd is continued at once. A killed one leaves the command's
 * tree to us: its children are reparented to brig-init, where no user
 * process ever is otherwise (every command is under a live shepherd, relays
 * are children of Docker), so every child of brig-init that is not a
 * shepherd is one that escaped, and is killed — and what it leaves behind
 * comes to us in turn. */
static int64_t sweep_until; /* monotonic ms; 0: no escape seen lately */

static int is_shepherd(pid_t pid)
{
	for (gi_proc *p = gi_procs; p; p = p->next)
		if (p->shep_alive && p->shep == pid)
			return 1;
	return 0;
}

static void sweep(void)
{
	if (sweep_until && gi_now_ms() < sweep_until)
		kill_children(is_shepherd);
	else
		sweep_until = 0;
}

void gi_proc_child_exited(pid_t pid, int status)
{
	if (WIFSTOPPED(status)) {
		if (is_shepherd(pid))
			kill(pid, SIGCONT);
		return;
	}
	for (gi_proc *p = gi_procs; p; p = p->next) {
		if (p->shep != pid || !p->shep_alive)
			continue;
		p->shep_alive = 0;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			/* not the shepherd's own end (that comes once its tree
			 * is gone): the tree may be loose */
			sweep_until = gi_now_ms() + 5000;
			sweep();
		}
		if (p->st_fd >= 0)
			st_read(p); /* its last words */
		close_fd(&p->st_fd);
		close_fd(&p->ctl_fd);
		if (p->state == GI_STARTING) {
			/* died before it said anything */
			gi_send_error(p->starter, p->start_req, EIO, "cannot start %s: its shepherd ended", p->argv[0]);
			p->state = GI_EXITED;
			p->exit_sent = -1;
		} else if (p->state == GI_RUNNING) {
			/* killed from inside: its command is ours now, end it */
			if (p->pid > 0)
				kill(-p->pid, SIGKILL), kill(p->pid, SIGKILL);
			p->killed = 1;
			proc_exited(p, SIGKILL);
		}
		answer_killers(p);
		return;
	}
	/* an orphan reparented to us: reaped; after an escape, its children
	 * are ours now too */
	sweep();
}

int64_t gi_proc_tick(int64_t now)
{
	int64_t next = -1;
	if (sweep_until) {
		sweep(); /* a backstop: the reaps above do most of it */
		if (sweep_until)
			next = 100;
	}
	for (gi_proc *p = gi_procs; p; p = p->next) {
		if (p->state != GI_RUNNING || !p->deadline || p->timed_out)
			continue;
		if (now >= p->deadline) {
			p->timed_out = 1;
			ask_kill(p);
		} else if (next < 0 || p->deadline - now < next) {
			next = p->deadline - now;
		}
	}
	return next;
}

void gi_proc_gc(void)
{
	int ended = 0;
	size_t kept = 0;
	for (gi_proc **pp = &gi_procs; *pp;) {
		gi_proc *p = *pp;
		if (p->exit_sent == -1 && !p->shep_alive) {
			*pp = p->next;
			proc_free(p);
			continue;
		}
		if (p->state == GI_EXITED && !p->shep_alive && ++ended > GI_KEEP_ENDED) {
			*pp = p->next; /* the list is newest first: these are the oldest */
			proc_free(p);
			continue;
		}
		if (p->state == GI_EXITED && (p->head.len || p->tail.len)) {
			size_t n = p->head.len + p->tail.len;
			if (kept + n > GI_KEEP_ENDED_BYTES) { /* older ones lose their output */
				p->dropped += (int64_t)(p->head_data + p->tail_data);
				p->head_data = p->tail_data = 0;
				gi_buf_free(&p->head);
				gi_buf_free(&p->tail);
			} else {
				kept += n;
			}
		}
		pp = &p->next;
	}
}

void gi_proc_kill_all_now(void)
{
	for (gi_proc *p = gi_procs; p; p = p->next)
		if (p->shep_alive)
			ask_kill(p);
}

/* ---- requests ---- */

static gi_proc *lookup(gi_conn *c, uint32_t req, gi_req *r)
{
	gi_proc *p = find_proc(r->has_proc, r->proc, r->tag);
	if (!p && c)
		gi_send_error(c, req, ENOENT, "no such process");
	return p;
}

void gi_proc_stdin(gi_conn *c, uint32_t id, gi_req *r, int close_it)
{
	gi_proc *p = find_proc(1, id, NULL);
	uint32_t n = r->has_data ? r->data_len : 0;
	if (!p || p->state == GI_EXITED || p->in_fd < 0 ||
	    (!close_it && n && gi_buf_add(&p->stdin_buf, r->data, n) < 0)) {
		/* dropped (the proc has ended, or no memory): still acknowledged */
		if (c->flow && n && !close_it) {
			brig_gp_enc *e = gi_enc();
			brig_gp_put_int(e, BRIG_GP_F_CREDIT, n);
			gi_send(c, BRIG_GP_T_CREDIT, id);
		}
		return;
	}
	if (c->flow)
		p->stdin_conn = c;
	if (close_it)
		p->stdin_close = 1;
	else if (gi_buf_pending(&p->stdin_buf) > GI_STDIN_CAP)
		c->blocked_on = p; /* this connection waits until the command reads */
	stdin_flush(p);
}

void gi_proc_signal(gi_conn *c, uint32_t req, gi_req *r)
{
	gi_proc *p = lookup(c, req, r);
	if (!p)
		return;
	if (r->sig <= 0 || r->sig >= 65) {
		gi_send_error(c, req, EINVAL, "no such signal: %lld", (long long)r->sig);
		return;
	}
	if (p->state != GI_RUNNING) {
		gi_send_error(c, req, ESRCH, "the process has ended");
		return;
	}
	if (kill(-p->pid, (int)r->sig) < 0 && kill(p->pid, (int)r->sig) < 0) {
		gi_send_error(c, req, errno, "cannot signal the process: %s", strerror(errno));
		return;
	}
	gi_send_ok(c, req);
}

void gi_proc_kill(gi_conn *c, uint32_t req, gi_req *r)
{
	gi_proc *p = lookup(c, req, r);
	if (!p)
		return;
	if (!p->shep_alive) {
		brig_gp_enc *e = gi_enc();
		brig_gp_put_int(e, BRIG_GP_F_PROC, p->id);
		put_exit_fields(e, p);
		gi_send(c, BRIG_GP_T_OK, req);
		return;
	}
	gi_waiter *w = calloc(1, sizeof *w);
	if (!w) {
		gi_send_error(c, req, ENOMEM, "out of memory");
		return;
	}
	w->c = c, w->req = req, w->next = p->killw;
	p->killw = w;
	if (p->state != GI_EXITED)
		p->killed = 1;
	ask_kill(p);
}

void gi_proc_resize(uint32_t id, gi_req *r)
{
	gi_proc *p = find_proc(1, id, NULL);
	if (!p || !p->pty || p->out_fd < 0 || r->rows < 1 || r->rows > 1000 || r->cols < 1 || r->cols > 1000)
		return;
	struct winsize ws = {.ws_row = (unsigned short)r->rows, .ws_col = (unsigned short)r->cols};
	ioctl(p->out_fd, TIOCSWINSZ, &ws); /* the kernel sends SIGWINCH to the terminal's group */
}

static void put_state(brig_gp_enc *e, gi_proc *p)
{
	brig_gp_put_int(e, BRIG_GP_F_PROC, p->id);
	brig_gp_put_str(e, BRIG_GP_F_STATE, p->state == GI_EXITED ? "exited" : "running");
	if (p->state == GI_EXITED)
		put_exit_fields(e, p);
}

void gi_proc_ps(gi_conn *c, uint32_t req)
{
	int64_t count = 0;
	for (gi_proc *p = gi_procs; p; p = p->next) {
		if (p->state == GI_STARTING || p->exit_sent == -1)
			continue;
		brig_gp_enc *e = gi_enc();
		brig_gp_put_int(e, BRIG_GP_F_PROC, p->id);
		brig_gp_put_int(e, BRIG_GP_F_PID, p->pid);
		brig_gp_put_str(e, BRIG_GP_F_TAG, p->tag);
		for (char **a = p->argv; a && *a; a++) {
			if (e->len > 64 * 1024) /* a long argv is cut in a listing */
				break;
			brig_gp_put_str(e, BRIG_GP_F_ARGV, *a);
		}
		brig_gp_put_str(e, BRIG_GP_F_STATE, p->state == GI_EXITED ? "exited" : "running");
		brig_gp_put_int(e, BRIG_GP_F_DETACHED, p->detached);
		brig_gp_put_int(e, BRIG_GP_F_STARTED_MS, p->started_ms);
		brig_gp_put_int(e, BRIG_GP_F_ENDED_MS, p->ended_ms);
		brig_gp_put_int(e, BRIG_GP_F_CODE, p->code);
		brig_gp_put_int(e, BRIG_GP_F_SIGNAL, p->sig);
		brig_gp_put_int(e, BRIG_GP_F_TIMED_OUT, p->timed_out);
		brig_gp_put_int(e, BRIG_GP_F_KILLED, p->killed);
		gi_send(c, BRIG_GP_T_PS_ENTRY, req);
		count++;
	}
	brig_gp_enc *e = gi_enc();
	brig_gp_put_int(e, BRIG_GP_F_COUNT, count);
	gi_send(c, BRIG_GP_T_OK, req);
}

static void replay(gi_conn *c, gi_proc *p, gi_buf *b)
{
	size_t off = b->off;
	while (off + 5 <= b->len) {
		const unsigned char *q = b->p + off;
		size_t l = (size_t)q[1] << 24 | (size_t)q[2] << 16 | (size_t)q[3] << 8 | q[4];
		if (off + 5 + l > b->len)
			break;
		for (size_t k = 0; k < l; k += BRIG_GP_MAX_DATA) {
			size_t m = l - k < BRIG_GP_MAX_DATA ? l - k : BRIG_GP_MAX_DATA;
			brig_gp_enc *e = gi_enc();
			brig_gp_put_int(e, BRIG_GP_F_STREAM, q[0]);
			brig_gp_put_bytes(e, BRIG_GP_F_DATA, q + 5 + k, m);
			gi_send(c, BRIG_GP_T_OUTPUT, p->id);
		}
		off += 5 + l;
	}
}

void gi_proc_attach(gi_conn *c, uint32_t req, gi_req *r)
{
	gi_proc *p = lookup(c, req, r);
	if (!p)
		return;
	brig_gp_enc *e = gi_enc();
	brig_gp_put_int(e, BRIG_GP_F_PROC, p->id);
	brig_gp_put_str(e, BRIG_GP_F_STATE, p->state == GI_EXITED ? "exited" : "running");
	brig_gp_put_int(e, BRIG_GP_F_DROPPED, p->dropped);
	gi_send(c, BRIG_GP_T_OK, req);
	replay(c, p, &p->head);
	size_t marker = 0;
	if (p->dropped > 0) {
		/* where the gap is, for whoever reads the replay */
		char m[96];
		int n = snprintf(m, sizeof m, "\n[%lld bytes dropped]\n", (long long)p->dropped);
		marker = (size_t)n;
		e = gi_enc();
		brig_gp_put_int(e, BRIG_GP_F_STREAM, 2);
		brig_gp_put_bytes(e, BRIG_GP_F_DATA, m, marker);
		gi_send(c, BRIG_GP_T_OUTPUT, p->id);
	}
	replay(c, p, &p->tail);
	if (p->state == GI_EXITED) {
		e = gi_enc();
		put_exit_fields(e, p);
		gi_send(c, BRIG_GP_T_EXIT, p->id);
		return;
	}
	for (int i = 0; i < p->nsinks; i++)
		if (p->sinks[i] == c)
			return;
	if (p->nsinks < GI_MAX_SINKS) {
		/* the replayed bytes count against the window */
		int64_t w = c->flow && r->window > 0 ? r->window : GI_NO_LIMIT;
		if (w != GI_NO_LIMIT)
			w -= (int64_t)(p->head_data + p->tail_data + marker);
		p->credit[p->nsinks] = w;
		p->sinks[p->nsinks++] = c;
	}
}

void gi_proc_credit(gi_conn *c, uint32_t id, gi_req *r)
{
	gi_proc *p = find_proc(1, id, NULL);
	if (!p)
		return;
	for (int i = 0; i < p->nsinks; i++) {
		if (p->sinks[i] != c || p->credit[i] == GI_NO_LIMIT)
			continue;
		if (r->credit == -1)
			p->credit[i] = GI_NO_LIMIT;
		else if (r->credit > 0 && r->credit <= (1ll << 40) && p->credit[i] < (1ll << 50))
			p->credit[i] += r->credit;
	}
}

void gi_proc_status(gi_conn *c, uint32_t req, gi_req *r)
{
	gi_proc *p = lookup(c, req, r);
	if (!p)
		return;
	brig_gp_enc *e = gi_enc();
	put_state(e, p);
	gi_send(c, BRIG_GP_T_OK, req);
}

/* A connection closed: its non-detached procs end (KILLED), and it stops
 * being anyone's sink or kill waiter. */
void gi_proc_conn_gone(gi_conn *c)
{
	for (gi_proc *p = gi_procs; p; p = p->next) {
		for (int i = 0; i < p->nsinks; i++)
			if (p->sinks[i] == c) {
				p->nsinks--;
				p->sinks[i] = p->sinks[p->nsinks];
				p->credit[i] = p->credit[p->nsinks];
				i--;
			}
		if (p->stdin_conn == c)
			p->stdin_conn = NULL;
		if (p->starter == c) {
			p->starter = NULL;
			if (!p->detached && p->state != GI_EXITED) {
				p->killed = 1;
				if (p->state == GI_RUNNING)
					ask_kill(p);
				/* GI_STARTING: killed as soon as it says it started */
			}
		}
		for (gi_waiter **wp = &p->killw; *wp;) {
			if ((*wp)->c == c) {
				gi_waiter *w = *wp;
				*wp = w->next;
				free(w);
			} else {
				wp = &(*wp)->next;
			}
		}
	}
}
