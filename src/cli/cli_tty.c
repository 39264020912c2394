/* cli_tty.c — `brig exec -t`: the caller's terminal in raw mode for the
 * command's pseudo-terminal, resized on SIGWINCH, restored on every way out
 * (return, exit, a second interrupt). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "brig/session.h"
#include "cli/cli.h"

static struct termios saved;
static volatile sig_atomic_t raw_on;
static int winch_pipe[2] = {-1, -1};

static void restore(void)
{
	if (raw_on) {
		tcsetattr(0, TCSAFLUSH, &saved);
		raw_on = 0;
		cli_tty_forget();
	}
}

static void on_winch(int sig)
{
	int e = errno;
	(void)!write(winch_pipe[1], "w", 1);
	errno = e;
}

static void size_of(int *rows, int *cols, void *payload)
{
	struct winsize ws;
	for (int fd = 1; fd >= 0; fd--)
		if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
			*rows = ws.ws_row > 1000 ? 1000 : ws.ws_row;
			*cols = ws.ws_col > 1000 ? 1000 : ws.ws_col;
			return;
		}
}

void cli_tty_begin(bool raw, int *rows, int *cols, int *winch_fd)
{
	*rows = 24;
	*cols = 80;
	size_of(rows, cols, NULL);
	if (winch_pipe[0] < 0 && pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		winch_pipe[0] = winch_pipe[1] = -1;
	if (winch_pipe[0] >= 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_winch;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(SIGWINCH, &sa, NULL);
	}
	*winch_fd = winch_pipe[0];
	if (raw && isatty(0) && tcgetattr(0, &saved) == 0) {
		struct termios t = saved;
		cfmakeraw(&t);
		cli_tty_remember(&saved); /* a second interrupt exits at once: it restores too */
		atexit(restore);
		if (tcsetattr(0, TCSAFLUSH, &t) == 0)
			raw_on = 1;
		else
			cli_tty_forget();
	}
}

void cli_tty_size(int *rows, int *cols)
{
	size_of(rows, cols, NULL);
}

void cli_tty_end(void)
{
	restore();
}

int cli_exec_tty(brig_engine *e, struct brig_store *s, const char *ref, const brig_exec_opts *opts,
		 brig_exec_result *res, brig_error **err)
{
	int rows, cols, winch;
	cli_tty_begin(opts->stdin_fd == 0, &rows, &cols, &winch);
	int r = brig_session_exec_tty(e, s, ref, opts, NULL, rows, cols, winch, winch >= 0 ? size_of : NULL, NULL, res, err);
	restore();
	return r;
}
