/* guest/init.h — what brig-init's files share: connections, procs, the
 * output buffer, and the calls between server loop, processes and files. */
#ifndef BRIG_GUEST_INIT_H
#define BRIG_GUEST_INIT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "guest/proto.h"

/* A connection stops being read, and its procs' pipes stop being read,
 * while this much waits to go out to it. */
#define GI_OUT_CAP (1024u * 1024u)
/* Bytes of stdin held for a proc that does not read them. */
#define GI_STDIN_CAP (1024u * 1024u)
/* While a proc's stdin is full, its connection's STDIN frames wait here (in
 * order) and other requests (KILL, SIGNAL…) still run; past this much the
 * connection is not read. */
#define GI_DEFER_CAP (4u * 1024u * 1024u)
/* Ended procs remembered for STATUS, and the output all of them keep
 * together (past it the oldest ones' kept output goes, DROPPED says so). */
#define GI_KEEP_ENDED 256
#define GI_KEEP_ENDED_BYTES (32u * 1024u * 1024u)
#define GI_MAX_SINKS 8
#define GI_TAG_MAX 64
#define GI_NO_LIMIT INT64_MAX

typedef struct gi_buf {
	unsigned char *p;
	size_t len, off; /* bytes [off, len) are pending */
} gi_buf;

struct gi_conn;

typedef struct gi_waiter {
	struct gi_conn *c;
	uint32_t req;
	struct gi_waiter *next;
} gi_waiter;

enum { GI_STARTING, GI_RUNNING, GI_EXITED };

typedef struct gi_proc {
	uint32_t id;
	pid_t pid, shep;
	char *tag;
	char **argv;
	int detached, pty, stdin_on, state, shep_alive, exit_sent;
	int64_t started_ms, ended_ms, deadline; /* deadline: monotonic ms, 0 none */
	int code, sig, timed_out, killed;
	int64_t dropped;
	int in_fd, out_fd, err_fd, st_fd, ctl_fd;
	gi_buf stdin_buf;
	int stdin_close; /* close stdin once stdin_buf is written */
	struct gi_conn *sinks[GI_MAX_SINKS];
	int64_t credit[GI_MAX_SINKS]; /* output each sink may still be sent (FLOW); GI_NO_LIMIT: none */
	int nsinks;
	struct gi_conn *stdin_conn; /* FLOW: who is owed CREDIT for stdin taken */
	int64_t stdin_ack;          /* stdin bytes taken, not yet acknowledged */
	struct gi_conn *starter;
	uint32_t start_req;
	size_t keep;
	gi_buf head, tail;           /* detached: records (stream u8, len u32, data) */
	size_t head_data, tail_data; /* data bytes in them */
	gi_waiter *killw;
	struct gi_proc *next;
} gi_proc;

typedef struct gi_rjob { /* a READ in progress */
	uint32_t req;
	int fd;
	int64_t left, sent, size;
	struct gi_rjob *next;
} gi_rjob;

typedef struct gi_wjob { /* a WRITE in progress (or failed: fd -1, its DATA discarded) */
	uint32_t req;
	int fd, append, failed;
	int mode;
	int64_t size;
	char *path, *tmp;
	struct gi_wjob *next;
} gi_wjob;

typedef struct gi_conn {
	int fd;
	int hello, dead;
	int flow; /* HELLO said FLOW 1: windows per call (guest/proto.h) */
	brig_gp_reader rd;
	gi_buf out;
	gi_rjob *reads;
	gi_wjob *writes;
	gi_proc *blocked_on; /* this proc's stdin is full: STDIN frames wait in deferred */
	gi_buf deferred;     /* whole STDIN / STDIN_CLOSE frames, in arrival order */
	struct gi_conn *next;
} gi_conn;

/* A decoded request: the fields brig-init understands, repeated ones kept. */
typedef struct gi_req {
	char **argv, **env;
	size_t nargv, nenv;
	char *cwd, *tag, *path, *path2;
	const unsigned char *data;
	uint32_t data_len;
	int has_data;
	int64_t version, rows, cols, timeout_ms, detached, stdin_on, keep, proc, sig, nofollow, depth, offset, length,
		mode, parents, recursive, append, stream, flow, window, credit;
	int has_proc, has_mode, has_length, has_depth;
} gi_req;

/* main.c */
extern gi_proc *gi_procs;
extern gi_conn *gi_conns;
int64_t gi_now_ms(void);  /* monotonic */
int64_t gi_wall_ms(void); /* wall clock */
void gi_set_nonblock(int fd);
void gi_close_fds_except(const int *keep, int n);

/* server.c */
int gi_serve(int64_t lifetime_ms);
brig_gp_enc *gi_enc(void);
void gi_send(gi_conn *c, uint8_t type, uint32_t id); /* finishes gi_enc() and queues it */
void gi_send_error(gi_conn *c, uint32_t id, int err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void gi_send_ok(gi_conn *c, uint32_t id);
int gi_buf_add(gi_buf *b, const void *p, size_t n);
void gi_buf_free(gi_buf *b);
size_t gi_buf_pending(const gi_buf *b);

/* procs.c */
void gi_proc_start(gi_conn *c, uint32_t req, gi_req *r);
void gi_proc_stdin(gi_conn *c, uint32_t id, gi_req *r, int close_it);
void gi_proc_signal(gi_conn *c, uint32_t req, gi_req *r);
void gi_proc_kill(gi_conn *c, uint32_t req, gi_req *r);
void gi_proc_resize(uint32_t id, gi_req *r);
void gi_proc_ps(gi_conn *c, uint32_t req);
void gi_proc_attach(gi_conn *c, uint32_t req, gi_req *r);
void gi_proc_status(gi_conn *c, uint32_t req, gi_req *r);
void gi_proc_conn_gone(gi_conn *c);
void gi_proc_credit(gi_conn *c, uint32_t id, gi_req *r);
/* poll bookkeeping: adds a proc's fds, handles their events, deadlines */
int gi_proc_pollfds(struct pollfd *pf, gi_proc **who, int *what, int max);
void gi_proc_event(gi_proc *p, int what, short rev);
void gi_proc_child_exited(pid_t pid, int status);
int64_t gi_proc_tick(int64_t now); /* fires deadlines; returns ms to the next one, -1 none */
void gi_proc_gc(void);
void gi_proc_kill_all_now(void);

/* files.c */
void gi_file_op(gi_conn *c, uint8_t type, uint32_t req, gi_req *r);
void gi_file_data(gi_conn *c, uint32_t req, gi_req *r, int end);
void gi_file_pump(gi_conn *c); /* READ jobs, while the connection has room */
void gi_file_conn_gone(gi_conn *c);

#endif
