/* test_guest.c — brig-init against a real container: a hardened container of
 * the test image (which has no brig-init) gets it from a read-only volume at
 * /.brig as its PID 1, and this client speaks guest/proto.h to it through
 * `docker exec -i NAME /.brig/brig-init relay`. Set-up uses the docker CLI;
 * everything is labelled with the run's id and removed even on failure. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/proto.h"
#include "util/util.h"

static char *name;  /* the container */
static char *label; /* brig.test=<run id> */

/* ---- docker CLI ---- */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	if (vasprintf(&cmd, fmt, ap) < 0)
		abort();
	va_end(ap);
	int st = system(cmd);
	free(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* brig_buf with a 64 MiB cap set on first use */
static void badd(brig_buf *b, const void *p, size_t n)
{
	if (!b->cap)
		b->cap = 64u << 20;
	assert_int_equal(brig_buf_add(b, p, n), 0);
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define HARDENED                                                                                       \
	"--user 1000:1000 --read-only --cap-drop ALL --security-opt no-new-privileges --network none " \
	"--pids-limit 256"

/* The volume holding brig-init, filled the way docs/guest-protocol.md says
 * (a created, never started container mounts it; the file goes in by copy). */
static char *make_init_volume(void)
{
	char *vol = brig_test_name("gi-bin");
	char *filler = brig_test_name("gi-fill");
	assert_int_equal(sh("docker volume create --label %s %s >/dev/null", label, vol), 0);
	assert_int_equal(sh("docker container create --label %s --name %s -v %s:/.brig %s true >/dev/null", label,
			    filler, vol, brig_test_image()),
			 0);
	assert_int_equal(sh("docker cp %s/guest/brig-init %s:/.brig/brig-init", BRIG_BINARY_DIR, filler), 0);
	assert_int_equal(sh("docker rm %s >/dev/null", filler), 0);
	free(filler);
	return vol;
}

static char *init_vol;

static int group_setup(void **state)
{
	brig_test_cleanup_at_exit();
	label = xasprintf(BRIG_TEST_LABEL "=%s", brig_test_run_id());
	name = brig_test_name("gi");
	init_vol = make_init_volume();
	char *ws = brig_test_name("gi-ws");
	unsigned host = 1000 + brig_test_userns_shift(); /* mounted on the host */
	if (sh("docker volume create --label %s --driver local --opt type=tmpfs --opt device=tmpfs "
	       "--opt o=size=64m,uid=%u,gid=%u,mode=0700 %s >/dev/null",
	       label, host, host, ws) != 0)
		return -1;
	int rc = sh("docker run -d --label %s --name %s " HARDENED " -v %s:/workspace -v %s:/.brig:ro "
		    "--entrypoint /.brig/brig-init %s init >/dev/null",
		    label, name, ws, init_vol, brig_test_image());
	free(ws);
	return rc == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	brig_engine *e = brig_test_engine();
	brig_test_cleanup(e);
	brig_engine_free(e);
	return 0;
}

/* ---- the client ---- */

typedef struct frame {
	uint8_t type;
	uint32_t id;
	unsigned char *p;
	uint32_t len;
} frame;

typedef struct cli {
	pid_t pid;
	int to, from;
	brig_gp_reader rd;
	unsigned char buf[65536];
	size_t have, off;
	uint32_t next_req;
	char boot_id[64];
	int64_t init_pid;
} cli;

static uint8_t last_type; /* for a failure's message */

static void cli_send(cli *c, brig_gp_enc *e, uint8_t type, uint32_t id)
{
	last_type = type;
	long n = brig_gp_enc_finish(e, type, id);
	assert_true(n > 0);
	int64_t until = now_ms() + 30000; /* brig-init not reading fails the test, not hangs it */
	for (long off = 0; off < n;) {
		struct pollfd pf = {.fd = c->to, .events = POLLOUT};
		if (poll(&pf, 1, 1000) <= 0) {
			if (now_ms() > until)
				fail_msg("brig-init read nothing for 30 s");
			continue;
		}
		ssize_t w = write(c->to, e->buf + off, (size_t)(n - off));
		if (w < 0 && errno == EAGAIN)
			continue;
		assert_true(w > 0);
		off += w;
	}
}

/* Next frame within timeout_ms; 0, or -1 at EOF (the relay ended). */
static int cli_recv(cli *c, frame *f, int timeout_ms)
{
	int64_t until = now_ms() + timeout_ms;
	for (;;) {
		while (c->off < c->have) {
			size_t used;
			int rc = brig_gp_reader_feed(&c->rd, c->buf + c->off, c->have - c->off, &used);
			c->off += used;
			if (rc == BRIG_GP_OK) {
				f->type = c->rd.hdr.type;
				f->id = c->rd.hdr.id;
				f->len = c->rd.hdr.len;
				f->p = malloc(f->len + 1);
				memcpy(f->p, c->rd.payload, f->len);
				return 0;
			}
			assert_int_equal(rc, BRIG_GP_ENEED);
		}
		int left = (int)(until - now_ms());
		if (left <= 0)
			fail_msg("no frame from brig-init within %d ms (last request: %s)", timeout_ms,
				 brig_gp_type_name(last_type));
		struct pollfd pf = {.fd = c->from, .events = POLLIN};
		if (poll(&pf, 1, left) <= 0)
			continue;
		ssize_t n = read(c->from, c->buf, sizeof c->buf);
		if (n <= 0)
			return -1;
		c->have = (size_t)n, c->off = 0;
	}
}

static int field(const frame *f, uint8_t tag, brig_gp_field *out)
{
	brig_gp_dec d;
	brig_gp_dec_init(&d, f->p, f->len);
	while (brig_gp_dec_next(&d, out) == BRIG_GP_OK)
		if (out->tag == tag)
			return 1;
	return 0;
}

static int64_t fint(const frame *f, uint8_t tag)
{
	brig_gp_field fl;
	int64_t v = -999;
	if (field(f, tag, &fl))
		assert_int_equal(brig_gp_field_int(&fl, &v), 0);
	return v;
}

static char *fstr(const frame *f, uint8_t tag) /* malloc'd, "" when absent */
{
	brig_gp_field fl;
	if (!field(f, tag, &fl))
		return xstrdup("");
	char *s = brig_gp_field_strdup(&fl, 0);
	assert_non_null(s);
	return s;
}

static void cli_open_flow(cli *c, int flow)
{
	memset(c, 0, sizeof *c);
	int in[2], out[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execlp("docker", "docker", "exec", "-i", name, "/.brig/brig-init", "relay", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->to = in[1];
	fcntl(c->to, F_SETFL, O_NONBLOCK);
	c->from = out[0];
	c->next_req = 1;
	brig_gp_reader_init(&c->rd);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_VERSION, BRIG_GP_VERSION);
	if (flow)
		brig_gp_put_int(&e, BRIG_GP_F_FLOW, 1);
	cli_send(c, &e, BRIG_GP_T_HELLO, 0);
	brig_gp_enc_free(&e);
	frame f;
	assert_int_equal(cli_recv(c, &f, 30000), 0);
	assert_int_equal(f.type, BRIG_GP_T_HELLO_OK);
	assert_int_equal(fint(&f, BRIG_GP_F_VERSION), BRIG_GP_VERSION);
	assert_int_equal(fint(&f, BRIG_GP_F_FLOW), flow ? 1 : -999);
	c->init_pid = fint(&f, BRIG_GP_F_PID);
	char *b = fstr(&f, BRIG_GP_F_BOOT_ID);
	snprintf(c->boot_id, sizeof c->boot_id, "%s", b);
	free(b);
	free(f.p);
}

static void cli_open(cli *c)
{
	cli_open_flow(c, 0);
}

static void cli_close(cli *c)
{
	close(c->to);
	close(c->from);
	int st;
	waitpid(c->pid, &st, 0);
	brig_gp_reader_free(&c->rd);
}

/* ---- commands ---- */

typedef struct start_opts {
	int rows, cols, stdin_on, detached;
	int64_t timeout_ms, window;
	const char *tag;
	const char *env; /* one "KEY=VALUE" */
} start_opts;

typedef struct result {
	int64_t proc, code, sig, timed_out, killed;
	brig_buf out, err;
	char *error; /* the ERROR message when START failed */
	int64_t error_errno;
} result;

static void result_free(result *r)
{
	brig_buf_free(&r->out);
	brig_buf_free(&r->err);
	free(r->error);
}

/* Sends START; returns the request id. */
static uint32_t start(cli *c, const char *const argv[], const start_opts *o)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	for (int i = 0; argv[i]; i++)
		brig_gp_put_str(&e, BRIG_GP_F_ARGV, argv[i]);
	if (o && o->rows) {
		brig_gp_put_int(&e, BRIG_GP_F_ROWS, o->rows);
		brig_gp_put_int(&e, BRIG_GP_F_COLS, o->cols);
	}
	if (o && o->timeout_ms)
		brig_gp_put_int(&e, BRIG_GP_F_TIMEOUT_MS, o->timeout_ms);
	if (o && o->stdin_on)
		brig_gp_put_int(&e, BRIG_GP_F_STDIN, 1);
	if (o && o->detached)
		brig_gp_put_int(&e, BRIG_GP_F_DETACHED, 1);
	if (o && o->tag)
		brig_gp_put_str(&e, BRIG_GP_F_TAG, o->tag);
	if (o && o->env)
		brig_gp_put_str(&e, BRIG_GP_F_ENV, o->env);
	if (o && o->window)
		brig_gp_put_int(&e, BRIG_GP_F_WINDOW, o->window);
	uint32_t req = c->next_req++;
	cli_send(c, &e, BRIG_GP_T_START, req);
	brig_gp_enc_free(&e);
	return req;
}

/* Waits for STARTED (or ERROR) of req: the proc id, or 0 with r->error. */
static int64_t wait_started(cli *c, uint32_t req, result *r)
{
	for (;;) {
		frame f;
		assert_int_equal(cli_recv(c, &f, 30000), 0);
		if (f.id == req && f.type == BRIG_GP_T_STARTED) {
			r->proc = fint(&f, BRIG_GP_F_PROC);
			free(f.p);
			return r->proc;
		}
		if (f.id == req && f.type == BRIG_GP_T_ERROR) {
			r->error = fstr(&f, BRIG_GP_F_MESSAGE);
			r->error_errno = fint(&f, BRIG_GP_F_ERRNO);
			free(f.p);
			return 0;
		}
		free(f.p);
	}
}

/* Collects OUTPUT of proc until its EXIT. */
static void collect(cli *c, result *r, int timeout_ms)
{
	for (;;) {
		frame f;
		assert_int_equal(cli_recv(c, &f, timeout_ms), 0);
		if (f.id == (uint32_t)r->proc && f.type == BRIG_GP_T_OUTPUT) {
			brig_gp_field d;
			assert_true(field(&f, BRIG_GP_F_DATA, &d));
			badd(fint(&f, BRIG_GP_F_STREAM) == 2 ? &r->err : &r->out, (const char *)d.val, d.len);
		} else if (f.id == (uint32_t)r->proc && f.type == BRIG_GP_T_EXIT) {
			r->code = fint(&f, BRIG_GP_F_CODE);
			r->sig = fint(&f, BRIG_GP_F_SIGNAL);
			r->timed_out = fint(&f, BRIG_GP_F_TIMED_OUT);
			r->killed = fint(&f, BRIG_GP_F_KILLED);
			free(f.p);
			return;
		}
		free(f.p);
	}
}

static void run(cli *c, const char *const argv[], const start_opts *o, result *r)
{
	memset(r, 0, sizeof *r);
	uint32_t req = start(c, argv, o);
	if (wait_started(c, req, r))
		collect(c, r, 30000);
}

static char *out_str(result *r)
{
	badd(&r->out, "", 1);
	r->out.len--;
	return r->out.data;
}

/* `ps -o args` inside: does any process's command line contain needle? */
static int running_inside(cli *c, const char *needle)
{
	result r;
	run(c, (const char *const[]){"ps", "-o", "args", NULL}, NULL, &r);
	assert_null(r.error);
	int found = 0;
	char *s = out_str(&r);
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, needle) && !strstr(line, "ps -o"))
			found = 1;
	result_free(&r);
	return found;
}

static void simple_req(cli *c, uint8_t type, brig_gp_enc *e, frame *reply)
{
	uint32_t req = c->next_req++;
	cli_send(c, e, type, req);
	for (;;) {
		assert_int_equal(cli_recv(c, reply, 30000), 0);
		if (reply->id == req && (reply->type == BRIG_GP_T_OK || reply->type == BRIG_GP_T_ERROR))
			return;
		free(reply->p);
	}
}

/* ---- tests ---- */

static void test_hello(void **state)
{
	cli c;
	cli_open(&c);
	assert_int_equal(c.init_pid, 1);
	assert_int_equal(strlen(c.boot_id), 32);
	/* a version brig-init does not speak: ERROR, then the connection ends */
	cli d;
	memset(&d, 0, sizeof d);
	int in[2], out[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	d.pid = fork();
	if (d.pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execlp("docker", "docker", "exec", "-i", name, "/.brig/brig-init", "relay", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	d.to = in[1], d.from = out[0];
	brig_gp_reader_init(&d.rd);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_VERSION, 99);
	cli_send(&d, &e, BRIG_GP_T_HELLO, 0);
	frame f;
	assert_int_equal(cli_recv(&d, &f, 30000), 0);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	free(f.p);
	assert_int_equal(cli_recv(&d, &f, 30000), -1);
	cli_close(&d);
	/* a frame over the cap ends the connection before anything is read */
	cli_open(&d);
	unsigned char hdr[BRIG_GP_HDR_SIZE];
	brig_gp_hdr_write(hdr, BRIG_GP_T_STAT, 1, BRIG_GP_MAX_PAYLOAD);
	hdr[8] = 0x7f; /* len far over the cap */
	assert_int_equal(write(d.to, hdr, sizeof hdr), (ssize_t)sizeof hdr);
	assert_int_equal(cli_recv(&d, &f, 30000), -1);
	cli_close(&d);
	brig_gp_enc_free(&e);
	cli_close(&c);
}

static void test_exec_basics(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	run(&c, (const char *const[]){"echo", "hi", NULL}, NULL, &r);
	assert_null(r.error);
	assert_string_equal(out_str(&r), "hi\n");
	assert_int_equal(r.code, 0);
	result_free(&r);

	run(&c, (const char *const[]){"sh", "-c", "echo out; echo err >&2; exit 7", NULL}, NULL, &r);
	assert_string_equal(out_str(&r), "out\n");
	assert_int_equal(r.err.len, 4);
	assert_memory_equal(r.err.data, "err\n", 4);
	assert_int_equal(r.code, 7);
	result_free(&r);

	run(&c, (const char *const[]){"sh", "-c", "kill -9 $$", NULL}, NULL, &r);
	assert_int_equal(r.code, 137);
	assert_int_equal(r.sig, 9);
	result_free(&r);

	run(&c, (const char *const[]){"nosuchcmd", NULL}, NULL, &r);
	assert_non_null(r.error);
	assert_string_equal(r.error, "nosuchcmd: not found in the image");
	assert_int_equal(r.error_errno, ENOENT);
	result_free(&r);

	run(&c, (const char *const[]){"/workspace", NULL}, NULL, &r);
	assert_non_null(r.error);
	assert_int_equal(r.error_errno, EACCES);
	result_free(&r);

	/* it starts with no signal ignored or blocked (brig-init blocks them all) */
	run(&c, (const char *const[]){"grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status", NULL}, NULL, &r);
	assert_string_equal(out_str(&r), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
	result_free(&r);

	/* the command's environment: the container's plus ENV */
	run(&c, (const char *const[]){"pwd", NULL}, NULL, &r);
	assert_string_equal(out_str(&r), "/workspace\n");
	result_free(&r);
	run(&c, (const char *const[]){"sh", "-c", "echo $BRIG_X ${PATH:+has-path}", NULL},
	    &(start_opts){.env = "BRIG_X=y=z"}, &r);
	assert_string_equal(out_str(&r), "y=z has-path\n");
	result_free(&r);
	/* ENV's PATH is the one the program is looked up in */
	run(&c, (const char *const[]){"/bin/sh", "-c", "echo $PATH", NULL}, &(start_opts){.env = "PATH=/nowhere"}, &r);
	assert_string_equal(out_str(&r), "/nowhere\n");
	result_free(&r);
	run(&c, (const char *const[]){"sh", "-c", "true", NULL}, &(start_opts){.env = "PATH=/nowhere"}, &r);
	assert_int_equal(r.error_errno, ENOENT);
	result_free(&r);

	/* a command over a held relay costs a round trip, not a runc exec */
	int64_t times[200];
	for (int i = 0; i < 200; i++) {
		int64_t t0 = now_us();
		run(&c, (const char *const[]){"true", NULL}, NULL, &r);
		times[i] = now_us() - t0;
		assert_int_equal(r.code, 0);
		result_free(&r);
	}
	qsort(times, 200, sizeof *times, cmp_i64);
	fprintf(stderr, "test_guest: `true` over a held relay: p50 %.2f ms, p95 %.2f ms\n", times[100] / 1000.0,
		times[190] / 1000.0);
	assert_true(times[100] < 50000);

	/* a big output arrives whole and in order */
	run(&c, (const char *const[]){"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x", NULL}, NULL, &r);
	assert_int_equal(r.out.len, 3000000);
	assert_int_equal(r.code, 0);
	result_free(&r);
	cli_close(&c);
}

/* A client that does not read: brig-init stops reading the command's pipe
 * (its memory stays small), and nothing is lost once the client reads. */
static void test_backpressure(void **state)
{
	cli c;
	cli_open(&c);
	result r = {0};
	uint32_t req = start(&c, (const char *const[]){"head", "-c", "50000000", "/dev/zero", NULL}, NULL);
	assert_true(wait_started(&c, req, &r) > 0);
	sleep(2); /* not reading */
	cli q;
	cli_open(&q);
	result m;
	run(&q, (const char *const[]){"grep", "VmRSS", "/proc/1/status", NULL}, NULL, &m);
	long kb = 0;
	assert_int_equal(sscanf(out_str(&m), "VmRSS: %ld kB", &kb), 1);
	fprintf(stderr, "test_guest: brig-init's RSS with 50 MB unread: %ld kB\n", kb);
	assert_true(kb < 16 * 1024);
	result_free(&m);
	cli_close(&q);
	collect(&c, &r, 60000);
	assert_int_equal(r.out.len, 50000000);
	assert_int_equal(r.code, 0);
	result_free(&r);
	cli_close(&c);
}

static void send_credit(cli *c, int64_t proc, int64_t n)
{
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_CREDIT, n);
	cli_send(c, &e, BRIG_GP_T_CREDIT, (uint32_t)proc);
	brig_gp_enc_free(&e);
}

/* Reads proc's frames for ms: output bytes into *out_bytes, CREDIT into
 * *acked; 1 when its EXIT came (code in *code). */
static int flow_read(cli *c, int64_t proc, int ms, int64_t *out_bytes, int64_t *acked, int64_t *code)
{
	int64_t until = now_ms() + ms;
	for (;;) {
		struct pollfd pf = {.fd = c->from, .events = POLLIN};
		int left = (int)(until - now_ms());
		if (c->off >= c->have && (left <= 0 || poll(&pf, 1, left) <= 0))
			return 0;
		frame f;
		assert_int_equal(cli_recv(c, &f, 1000), 0);
		int exited = 0;
		if (f.id == (uint32_t)proc && f.type == BRIG_GP_T_OUTPUT) {
			brig_gp_field d;
			assert_true(field(&f, BRIG_GP_F_DATA, &d));
			*out_bytes += d.len;
		} else if (f.id == (uint32_t)proc && f.type == BRIG_GP_T_CREDIT) {
			*acked += fint(&f, BRIG_GP_F_CREDIT);
		} else if (f.id == (uint32_t)proc && f.type == BRIG_GP_T_EXIT) {
			*code = fint(&f, BRIG_GP_F_CODE);
			exited = 1;
		}
		free(f.p);
		if (exited)
			return 1;
	}
}

/* FLOW: a used-up output window stops the command (blocked in write, not
 * killed) until CREDIT comes; stdin is acknowledged as the command takes
 * it, and what a command does not read is never acknowledged, while a KILL
 * on the same connection is answered at once. */
static void test_flow(void **state)
{
	cli c;
	cli_open_flow(&c, 1);
	result r = {0};
	start_opts o = {.window = 300000};
	uint32_t req = start(&c, (const char *const[]){"head", "-c", "4000000", "/dev/zero", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	int64_t got = 0, acked = 0, code = -1;
	assert_int_equal(flow_read(&c, r.proc, 1500, &got, &acked, &code), 0);
	fprintf(stderr, "test_guest: window 300000: %lld bytes came, then nothing\n", (long long)got);
	assert_true(got >= 300000 - BRIG_GP_MAX_DATA && got <= 300000 + BRIG_GP_MAX_DATA);
	send_credit(&c, r.proc, 1000000);
	int64_t before = got;
	assert_int_equal(flow_read(&c, r.proc, 1500, &got, &acked, &code), 0);
	assert_true(got - before >= 1000000 - BRIG_GP_MAX_DATA && got - before <= 1000000 + BRIG_GP_MAX_DATA);
	/* CREDIT for no such proc, of nothing, below -1 or absurd: ignored */
	send_credit(&c, 999999, 1000);
	send_credit(&c, r.proc, 0);
	send_credit(&c, r.proc, -7);
	send_credit(&c, r.proc, INT64_MAX);
	before = got;
	assert_int_equal(flow_read(&c, r.proc, 700, &got, &acked, &code), 0);
	assert_true(got - before <= BRIG_GP_MAX_DATA);
	send_credit(&c, r.proc, -1); /* no limit */
	while (!flow_read(&c, r.proc, 30000, &got, &acked, &code))
		;
	assert_int_equal(got, 4000000);
	assert_int_equal(code, 0);

	/* stdin within its window, acknowledged as cat takes it */
	memset(&r, 0, sizeof r);
	o = (start_opts){.stdin_on = 1};
	req = start(&c, (const char *const[]){"cat", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	static char chunk[BRIG_GP_MAX_DATA];
	memset(chunk, 'y', sizeof chunk);
	brig_gp_enc e = {0};
	int64_t sent = 0, total = 4 * (int64_t)BRIG_GP_STDIN_WINDOW;
	got = acked = 0;
	code = -1;
	while (sent < total) {
		if (sent + (int64_t)sizeof chunk - acked > (int64_t)BRIG_GP_STDIN_WINDOW) {
			assert_int_equal(flow_read(&c, r.proc, 50, &got, &acked, &code), 0);
			continue;
		}
		brig_gp_enc_begin(&e);
		brig_gp_put_bytes(&e, BRIG_GP_F_DATA, chunk, sizeof chunk);
		cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
		sent += (int64_t)sizeof chunk;
	}
	brig_gp_enc_begin(&e);
	cli_send(&c, &e, BRIG_GP_T_STDIN_CLOSE, (uint32_t)r.proc);
	while (!flow_read(&c, r.proc, 30000, &got, &acked, &code))
		;
	assert_int_equal(got, total);
	assert_int_equal(acked, total);
	assert_int_equal(code, 0);

	/* a command that never reads: its window of stdin stays unacknowledged */
	memset(&r, 0, sizeof r);
	req = start(&c, (const char *const[]){"sleep", "1003", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	for (int i = 0; i < (int)(BRIG_GP_STDIN_WINDOW / sizeof chunk); i++) {
		brig_gp_enc_begin(&e);
		brig_gp_put_bytes(&e, BRIG_GP_F_DATA, chunk, sizeof chunk);
		cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
	}
	acked = 0;
	assert_int_equal(flow_read(&c, r.proc, 500, &got, &acked, &code), 0);
	assert_true(acked < 128 * 1024); /* the pipe's own buffer at most */
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	uint32_t kreq = c.next_req++;
	int64_t t0 = now_ms();
	cli_send(&c, &e, BRIG_GP_T_KILL, kreq);
	for (;;) {
		frame f;
		assert_int_equal(cli_recv(&c, &f, 10000), 0);
		int done = f.type == BRIG_GP_T_OK && f.id == kreq;
		free(f.p);
		if (done)
			break;
	}
	assert_true(now_ms() - t0 < 3000);
	/* stdin for an ended command is acknowledged as dropped */
	brig_gp_enc_begin(&e);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, chunk, 100);
	cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
	brig_gp_enc_free(&e);
	acked = 0;
	flow_read(&c, r.proc, 1000, &got, &acked, &code);
	assert_int_equal(acked, 100);
	cli_close(&c);
}

static void test_stdin(void **state)
{
	cli c;
	cli_open(&c);
	result r = {0};
	start_opts o = {.stdin_on = 1};
	uint32_t req = start(&c, (const char *const[]){"sh", "-c", "cat; echo done", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, "hello\n", 6);
	cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
	brig_gp_enc_begin(&e);
	cli_send(&c, &e, BRIG_GP_T_STDIN_CLOSE, (uint32_t)r.proc);
	brig_gp_enc_free(&e);
	collect(&c, &r, 30000);
	assert_string_equal(out_str(&r), "hello\ndone\n");
	assert_int_equal(r.code, 0);
	result_free(&r);
	cli_close(&c);
}

/* A command that never reads its stdin: the stdin waits, KILL still runs. */
static void test_stdin_full_kill(void **state)
{
	cli c;
	cli_open(&c);
	result r = {0};
	start_opts o = {.stdin_on = 1};
	uint32_t req = start(&c, (const char *const[]){"sleep", "1000", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	static char chunk[BRIG_GP_MAX_DATA];
	memset(chunk, 'z', sizeof chunk);
	brig_gp_enc e = {0};
	for (int i = 0; i < 48; i++) { /* 3 MiB, over what brig-init holds for a command */
		brig_gp_enc_begin(&e);
		brig_gp_put_bytes(&e, BRIG_GP_F_DATA, chunk, sizeof chunk);
		cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
	}
	brig_gp_enc_begin(&e);
	cli_send(&c, &e, BRIG_GP_T_STDIN_CLOSE, (uint32_t)r.proc);
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	uint32_t kreq = c.next_req++;
	cli_send(&c, &e, BRIG_GP_T_KILL, kreq);
	brig_gp_enc_free(&e);
	int64_t t0 = now_ms();
	for (;;) {
		frame f;
		assert_int_equal(cli_recv(&c, &f, 10000), 0);
		int done = f.type == BRIG_GP_T_OK && f.id == kreq;
		free(f.p);
		if (done)
			break;
	}
	assert_true(now_ms() - t0 < 10000);
	/* and the connection still works */
	result m;
	run(&c, (const char *const[]){"echo", "alive", NULL}, NULL, &m);
	assert_string_equal(out_str(&m), "alive\n");
	result_free(&m);
	result_free(&r);
	cli_close(&c);
}

static void test_timeout(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	start_opts o = {.timeout_ms = 300};
	int64_t t0 = now_ms();
	run(&c, (const char *const[]){"sh", "-c", "echo before; sleep 30", NULL}, &o, &r);
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(r.code, 124);
	assert_int_equal(r.timed_out, 1);
	assert_string_equal(out_str(&r), "before\n");
	result_free(&r);
	cli_close(&c);
}

#define TREE "(setsid sh -c '(sleep %d &); sleep %d' &); sleep %d & sleep %d; echo never"

static void test_kill_tree(void **state)
{
	cli c;
	cli_open(&c);
	char script[256];
	snprintf(script, sizeof script, TREE, 7771, 7771, 7771, 7771);
	result r = {0};
	uint32_t req = start(&c, (const char *const[]){"sh", "-c", script, NULL}, NULL);
	assert_true(wait_started(&c, req, &r) > 0);
	/* all four sleeps exist: two setsid'd, one double-forked */
	cli q;
	cli_open(&q);
	int64_t until = now_ms() + 10000;
	for (;;) {
		result p;
		run(&q, (const char *const[]){"sh", "-c", "ps -o args | grep -c '^sleep 7771'", NULL}, NULL, &p);
		int n = atoi(out_str(&p));
		result_free(&p);
		if (n == 4)
			break;
		assert_true(now_ms() < until);
		usleep(50000);
	}
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	uint32_t kreq = c.next_req++;
	cli_send(&c, &e, BRIG_GP_T_KILL, kreq);
	brig_gp_enc_free(&e);
	int got_exit = 0, got_ok = 0;
	while (!got_ok) {
		frame f;
		assert_int_equal(cli_recv(&c, &f, 30000), 0);
		if (f.type == BRIG_GP_T_EXIT && f.id == (uint32_t)r.proc) {
			assert_int_equal(fint(&f, BRIG_GP_F_KILLED), 1);
			got_exit = 1;
		}
		if (f.type == BRIG_GP_T_OK && f.id == kreq) {
			assert_true(got_exit); /* EXIT first, then the certain answer */
			assert_int_equal(fint(&f, BRIG_GP_F_KILLED), 1);
			got_ok = 1;
		}
		free(f.p);
	}
	/* KILL answers once all are gone: nothing is left */
	assert_false(running_inside(&q, "sleep 7771"));
	result_free(&r);
	cli_close(&q);
	cli_close(&c);
}

static void test_close_kills(void **state)
{
	cli c;
	cli_open(&c);
	char tag[64];
	snprintf(tag, sizeof tag, "close-%d", (int)getpid());
	char script[256];
	snprintf(script, sizeof script, TREE, 7772, 7772, 7772, 7772);
	start_opts o = {.tag = tag};
	result r = {0};
	uint32_t req = start(&c, (const char *const[]){"sh", "-c", script, NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	cli q;
	cli_open(&q);
	int64_t until = now_ms() + 10000;
	while (!running_inside(&q, "sleep 7772")) {
		assert_true(now_ms() < until);
		usleep(50000);
	}
	usleep(300000);
	cli_close(&c); /* the relay goes: its commands end */

	/* another connection gets a certain answer, by TAG */
	until = now_ms() + 10000;
	for (;;) {
		brig_gp_enc e = {0};
		brig_gp_enc_begin(&e);
		brig_gp_put_str(&e, BRIG_GP_F_TAG, tag);
		frame f;
		simple_req(&q, BRIG_GP_T_STATUS, &e, &f);
		brig_gp_enc_free(&e);
		assert_int_equal(f.type, BRIG_GP_T_OK);
		char *st = fstr(&f, BRIG_GP_F_STATE);
		int done = strcmp(st, "exited") == 0;
		if (done) {
			assert_int_equal(fint(&f, BRIG_GP_F_KILLED), 1);
			assert_int_equal(fint(&f, BRIG_GP_F_PROC), r.proc);
		}
		free(st);
		free(f.p);
		if (done)
			break;
		assert_true(now_ms() < until);
		usleep(50000);
	}
	until = now_ms() + 5000;
	while (running_inside(&q, "sleep 7772")) {
		assert_true(now_ms() < until);
		usleep(50000);
	}
	/* an id never given: ENOENT */
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, 999999);
	frame f;
	simple_req(&q, BRIG_GP_T_STATUS, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	assert_int_equal(fint(&f, BRIG_GP_F_ERRNO), ENOENT);
	free(f.p);
	brig_gp_enc_free(&e);
	result_free(&r);
	cli_close(&q);
}

static void test_detached(void **state)
{
	cli c;
	cli_open(&c);
	start_opts o = {.detached = 1};
	result r = {0};
	uint32_t req = start(
		&c, (const char *const[]){"sh", "-c", "echo first; sleep 1.5; echo second; sleep 1000", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	cli_close(&c); /* a detached proc outlives its connection */

	cli q;
	cli_open(&q);
	/* PS lists it */
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	uint32_t preq = q.next_req++;
	cli_send(&q, &e, BRIG_GP_T_PS, preq);
	int seen = 0;
	for (;;) {
		frame f;
		assert_int_equal(cli_recv(&q, &f, 30000), 0);
		if (f.id == preq && f.type == BRIG_GP_T_PS_ENTRY && fint(&f, BRIG_GP_F_PROC) == r.proc) {
			char *st = fstr(&f, BRIG_GP_F_STATE);
			assert_string_equal(st, "running");
			free(st);
			assert_int_equal(fint(&f, BRIG_GP_F_DETACHED), 1);
			char *a = fstr(&f, BRIG_GP_F_ARGV);
			assert_string_equal(a, "sh");
			free(a);
			seen = 1;
		}
		int done = f.id == preq && f.type == BRIG_GP_T_OK;
		free(f.p);
		if (done)
			break;
	}
	assert_true(seen);
	/* ATTACH replays what was kept, then streams the rest */
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	uint32_t areq = q.next_req++;
	cli_send(&q, &e, BRIG_GP_T_ATTACH, areq);
	brig_buf out = {0};
	int64_t until = now_ms() + 15000;
	while (!(out.len >= 13 && memmem(out.data, out.len, "second\n", 7))) {
		frame f;
		assert_int_equal(cli_recv(&q, &f, 15000), 0);
		if (f.id == (uint32_t)r.proc && f.type == BRIG_GP_T_OUTPUT) {
			brig_gp_field d;
			assert_true(field(&f, BRIG_GP_F_DATA, &d));
			badd(&out, (const char *)d.val, d.len);
		}
		free(f.p);
		assert_true(now_ms() < until);
	}
	assert_int_equal(out.len, 13);
	assert_memory_equal(out.data, "first\nsecond\n", 13);
	brig_buf_free(&out);
	/* and KILL ends it for good */
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	frame f;
	simple_req(&q, BRIG_GP_T_KILL, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	assert_int_equal(fint(&f, BRIG_GP_F_KILLED), 1);
	free(f.p);
	brig_gp_enc_free(&e);
	result_free(&r);
	cli_close(&q);
}

/* SIGNAL goes to the command's process group; an ended proc is ESRCH */
static void test_signal(void **state)
{
	cli c;
	cli_open(&c);
	result r = {0};
	uint32_t req = start(&c, (const char *const[]){"sleep", "1000", NULL}, NULL);
	assert_true(wait_started(&c, req, &r) > 0);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	brig_gp_put_int(&e, BRIG_GP_F_SIGNAL, SIGTERM);
	frame f;
	simple_req(&c, BRIG_GP_T_SIGNAL, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	collect(&c, &r, 10000);
	assert_int_equal(r.code, 128 + SIGTERM);
	assert_int_equal(r.sig, SIGTERM);
	assert_int_equal(r.killed, 0);
	simple_req(&c, BRIG_GP_T_SIGNAL, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	assert_int_equal(fint(&f, BRIG_GP_F_ERRNO), ESRCH);
	free(f.p);
	brig_gp_enc_free(&e);
	result_free(&r);
	cli_close(&c);
}

/* EXIT comes when the command's own process ends, even while what it left
 * behind holds its output open; KILL of the ended proc still ends those. */
static void test_leftovers(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	int64_t t0 = now_ms();
	run(&c, (const char *const[]){"sh", "-c", "(setsid sleep 7773 &); echo done", NULL}, NULL, &r);
	assert_true(now_ms() - t0 < 5000);
	assert_string_equal(out_str(&r), "done\n");
	assert_int_equal(r.code, 0);
	int64_t until = now_ms() + 5000; /* it may not have exec'd sleep yet */
	while (!running_inside(&c, "sleep 7773")) {
		assert_true(now_ms() < until);
		usleep(50000);
	}
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	frame f;
	simple_req(&c, BRIG_GP_T_KILL, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	assert_int_equal(fint(&f, BRIG_GP_F_CODE), 0); /* its exit stays what it was */
	free(f.p);
	assert_false(running_inside(&c, "sleep 7773"));
	/* and once its shepherd is gone, KILL answers at once */
	simple_req(&c, BRIG_GP_T_KILL, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	brig_gp_enc_free(&e);
	result_free(&r);
	cli_close(&c);
}

/* The sandbox runs as brig-init's uid, so it can SIGSTOP or SIGKILL the
 * shepherd of its own command: a stopped shepherd is continued at once, and
 * what a killed one leaves behind (reparented to brig-init) is ended too. */
static void test_shepherd_escape(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	start_opts o = {.timeout_ms = 1500};
	int64_t t0 = now_ms();
	run(&c,
	    (const char *const[]){"sh", "-c",
				  "(setsid sleep 7781 &); kill -STOP $PPID; sleep 0.3; grep State /proc/$PPID/status; "
				  "sleep 7782",
				  NULL},
	    &o, &r);
	fprintf(stderr, "test_guest: the shepherd after SIGSTOP: %s", out_str(&r));
	assert_true(now_ms() - t0 < 6000);
	assert_int_equal(r.code, 124);
	assert_non_null(strstr(out_str(&r), "State:"));
	assert_null(strstr(out_str(&r), "stopped"));
	assert_false(running_inside(&c, "sleep 7781"));
	assert_false(running_inside(&c, "sleep 7782"));
	result_free(&r);

	run(&c,
	    (const char *const[]){"sh", "-c", "(setsid sleep 7783 &); sleep 0.3; kill -KILL $PPID; sleep 7784", NULL},
	    NULL, &r);
	assert_int_equal(r.killed, 1);
	int64_t until = now_ms() + 5000;
	while (running_inside(&c, "sleep 7783") || running_inside(&c, "sleep 7784")) {
		assert_true(now_ms() < until);
		usleep(50000);
	}
	result_free(&r);
	/* and brig-init goes on as before */
	run(&c, (const char *const[]){"echo", "alive", NULL}, NULL, &r);
	assert_string_equal(out_str(&r), "alive\n");
	result_free(&r);
	cli_close(&c);
}

/* A detached proc keeps the first and the last KEEP/2 bytes. */
static void test_keep(void **state)
{
	cli c;
	cli_open(&c);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "sh");
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "-c");
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "echo HEAD; head -c 100000 /dev/zero | tr '\\0' y; echo; echo TAIL");
	brig_gp_put_int(&e, BRIG_GP_F_DETACHED, 1);
	brig_gp_put_int(&e, BRIG_GP_F_KEEP, 1000);
	uint32_t req = c.next_req++;
	cli_send(&c, &e, BRIG_GP_T_START, req);
	result r = {0};
	assert_true(wait_started(&c, req, &r) > 0);
	collect(&c, &r, 10000); /* the starter sees all of it */
	assert_int_equal(r.out.len, 100011);
	result_free(&r);
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	uint32_t areq = c.next_req++;
	cli_send(&c, &e, BRIG_GP_T_ATTACH, areq);
	brig_buf out = {0}, marker = {0};
	int64_t dropped = -1;
	for (;;) {
		frame f;
		assert_int_equal(cli_recv(&c, &f, 10000), 0);
		if (f.type == BRIG_GP_T_OK && f.id == areq)
			dropped = fint(&f, BRIG_GP_F_DROPPED);
		brig_gp_field d;
		if (f.type == BRIG_GP_T_OUTPUT && field(&f, BRIG_GP_F_DATA, &d))
			badd(fint(&f, BRIG_GP_F_STREAM) == 2 ? &marker : &out, d.val, d.len);
		int done = f.type == BRIG_GP_T_EXIT;
		if (done)
			assert_int_equal(fint(&f, BRIG_GP_F_DROPPED), dropped);
		free(f.p);
		if (done)
			break;
	}
	assert_true(out.len <= 1000 + 5);
	assert_true(out.len >= 900);
	assert_int_equal((int64_t)out.len + dropped, 100011);
	assert_memory_equal(out.data, "HEAD\nyyy", 8);
	assert_memory_equal(out.data + out.len - 9, "yyy\nTAIL\n", 9);
	/* the gap is marked where it is (on stderr) */
	char want[64];
	snprintf(want, sizeof want, "\n[%lld bytes dropped]\n", (long long)dropped);
	badd(&marker, "", 1);
	assert_string_equal(marker.data, want);
	brig_buf_free(&out);
	brig_buf_free(&marker);
	brig_gp_enc_free(&e);
	cli_close(&c);
}

/* What ended detached commands keep is bounded together: the oldest lose
 * their output first (DROPPED says how much), and one KEEP over 16 MiB is
 * taken as 16 MiB. */
static void test_keep_bounded(void **state)
{
	cli c;
	cli_open_flow(&c, 1);
	int64_t procs[5];
	for (int i = 0; i < 5; i++) {
		result r = {0};
		start_opts o = {.detached = 1};
		brig_gp_enc e = {0};
		brig_gp_enc_begin(&e);
		brig_gp_put_str(&e, BRIG_GP_F_ARGV, "head");
		brig_gp_put_str(&e, BRIG_GP_F_ARGV, "-c");
		brig_gp_put_str(&e, BRIG_GP_F_ARGV, "20000000");
		brig_gp_put_str(&e, BRIG_GP_F_ARGV, "/dev/zero");
		brig_gp_put_int(&e, BRIG_GP_F_DETACHED, o.detached);
		brig_gp_put_int(&e, BRIG_GP_F_KEEP, 64ll << 20);
		uint32_t req = c.next_req++;
		cli_send(&c, &e, BRIG_GP_T_START, req);
		brig_gp_enc_free(&e);
		procs[i] = wait_started(&c, req, &r);
		assert_true(procs[i] > 0);
		/* wait for its end: STATUS says exited */
		for (int64_t until = now_ms() + 20000;;) {
			assert_true(now_ms() < until);
			brig_gp_enc_begin(&e);
			brig_gp_put_int(&e, BRIG_GP_F_PROC, procs[i]);
			frame f;
			simple_req(&c, BRIG_GP_T_STATUS, &e, &f);
			brig_gp_enc_free(&e);
			char *st = fstr(&f, BRIG_GP_F_STATE);
			int done = strcmp(st, "exited") == 0;
			int64_t dropped = fint(&f, BRIG_GP_F_DROPPED);
			free(st);
			free(f.p);
			if (done) {
				assert_int_equal(dropped, 20000000 - (16 << 20));
				break;
			}
			usleep(50000);
		}
	}
	/* 5 x 16 MiB kept is over 32 MiB: the oldest lost all of it */
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, procs[0]);
	frame f;
	simple_req(&c, BRIG_GP_T_STATUS, &e, &f);
	assert_int_equal(fint(&f, BRIG_GP_F_DROPPED), 20000000);
	free(f.p);
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, procs[2]);
	simple_req(&c, BRIG_GP_T_STATUS, &e, &f);
	assert_int_equal(fint(&f, BRIG_GP_F_DROPPED), 20000000);
	free(f.p);
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, procs[4]);
	simple_req(&c, BRIG_GP_T_STATUS, &e, &f);
	assert_int_equal(fint(&f, BRIG_GP_F_DROPPED), 20000000 - (16 << 20));
	free(f.p);
	brig_gp_enc_free(&e);
	result m;
	run(&c, (const char *const[]){"grep", "VmRSS", "/proc/1/status", NULL}, NULL, &m);
	long kb = 0;
	assert_int_equal(sscanf(out_str(&m), "VmRSS: %ld kB", &kb), 1);
	fprintf(stderr, "test_guest: brig-init's RSS with 5 x 16 MiB kept: %ld kB\n", kb);
	assert_true(kb < 48 * 1024);
	result_free(&m);
	cli_close(&c);
}

/* A LIST is built at once: it stops at 8 MiB of entries with E2BIG. */
static void test_list_bounded(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	run(&c,
	    (const char *const[]){
		    "sh", "-c",
		    "mkdir -p /workspace/many && cd /workspace/many && seq 1 40000 | sed "
		    "'s/$/"
		    "-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/' | xargs touch",
		    NULL},
	    NULL, &r);
	assert_int_equal(r.code, 0);
	result_free(&r);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/many");
	frame f;
	simple_req(&c, BRIG_GP_T_LIST, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	assert_int_equal(fint(&f, BRIG_GP_F_ERRNO), E2BIG);
	char *msg = fstr(&f, BRIG_GP_F_MESSAGE);
	assert_non_null(strstr(msg, "8 MiB"));
	free(msg);
	free(f.p);
	brig_gp_enc_free(&e);
	run(&c, (const char *const[]){"rm", "-rf", "/workspace/many", NULL}, NULL, &r);
	result_free(&r);
	cli_close(&c);
}

static void test_pty(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	start_opts o = {.rows = 24, .cols = 80};
	run(&c, (const char *const[]){"tty", NULL}, &o, &r);
	assert_int_equal(r.code, 0);
	assert_non_null(strstr(out_str(&r), "/dev/pts/"));
	result_free(&r);
	run(&c, (const char *const[]){"stty", "size", NULL}, &o, &r);
	assert_string_equal(out_str(&r), "24 80\r\n");
	result_free(&r);

	/* an interactive shell: a RESIZE is seen by the next `stty size` */
	o.stdin_on = 1;
	memset(&r, 0, sizeof r);
	uint32_t req = start(&c, (const char *const[]){"sh", "-i", NULL}, &o);
	assert_true(wait_started(&c, req, &r) > 0);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, "stty size\n", 10);
	cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
	/* wait for the first answer before resizing */
	int64_t until = now_ms() + 10000;
	while (!(r.out.len && memmem(r.out.data, r.out.len, "24 80", 5))) {
		frame f;
		assert_int_equal(cli_recv(&c, &f, 10000), 0);
		brig_gp_field d;
		if (f.type == BRIG_GP_T_OUTPUT && field(&f, BRIG_GP_F_DATA, &d))
			badd(&r.out, (const char *)d.val, d.len);
		free(f.p);
		assert_true(now_ms() < until);
	}
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_ROWS, 30);
	brig_gp_put_int(&e, BRIG_GP_F_COLS, 100);
	cli_send(&c, &e, BRIG_GP_T_RESIZE, (uint32_t)r.proc);
	brig_gp_enc_begin(&e);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, "stty size; exit 5\n", 18);
	cli_send(&c, &e, BRIG_GP_T_STDIN, (uint32_t)r.proc);
	brig_gp_enc_free(&e);
	collect(&c, &r, 10000);
	assert_non_null(memmem(r.out.data, r.out.len, "30 100", 6));
	assert_int_equal(r.code, 5);
	result_free(&r);
	cli_close(&c);
}

static void write_file(cli *c, const char *path, const void *data, size_t n, frame *reply)
{
	uint32_t req = c->next_req++;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, 1);
	cli_send(c, &e, BRIG_GP_T_WRITE, req);
	for (size_t off = 0; off < n; off += BRIG_GP_MAX_DATA) {
		size_t k = n - off < BRIG_GP_MAX_DATA ? n - off : BRIG_GP_MAX_DATA;
		brig_gp_enc_begin(&e);
		brig_gp_put_bytes(&e, BRIG_GP_F_DATA, (const char *)data + off, k);
		cli_send(c, &e, BRIG_GP_T_DATA, req);
	}
	brig_gp_enc_begin(&e);
	cli_send(c, &e, BRIG_GP_T_WRITE_END, req);
	brig_gp_enc_free(&e);
	for (;;) {
		assert_int_equal(cli_recv(c, reply, 30000), 0);
		if (reply->id == req)
			return;
		free(reply->p);
	}
}

static void test_files(void **state)
{
	cli c;
	cli_open(&c);
	size_t n = 1024 * 1024 + 123;
	unsigned char *blob = malloc(n);
	srand(7);
	for (size_t i = 0; i < n; i++)
		blob[i] = (unsigned char)rand();
	frame f;
	write_file(&c, "/workspace/d/e/blob.bin", blob, n, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	assert_int_equal(fint(&f, BRIG_GP_F_SIZE), (int64_t)n);
	free(f.p);

	/* READ it back whole */
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/d/e/blob.bin");
	uint32_t req = c.next_req++;
	cli_send(&c, &e, BRIG_GP_T_READ, req);
	brig_buf back = {0};
	for (;;) {
		assert_int_equal(cli_recv(&c, &f, 30000), 0);
		assert_int_equal(f.id, req);
		if (f.type == BRIG_GP_T_DATA) {
			brig_gp_field d;
			assert_true(field(&f, BRIG_GP_F_DATA, &d));
			badd(&back, (const char *)d.val, d.len);
			free(f.p);
			continue;
		}
		assert_int_equal(f.type, BRIG_GP_T_OK);
		assert_int_equal(fint(&f, BRIG_GP_F_COUNT), (int64_t)n);
		free(f.p);
		break;
	}
	assert_int_equal(back.len, n);
	assert_memory_equal(back.data, blob, n);
	brig_buf_free(&back);

	/* STAT, LIST */
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/d/e/blob.bin");
	simple_req(&c, BRIG_GP_T_STAT, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	assert_int_equal(fint(&f, BRIG_GP_F_SIZE), (int64_t)n);
	assert_int_equal(fint(&f, BRIG_GP_F_UID), 1000);
	assert_int_equal(fint(&f, BRIG_GP_F_MODE), 0644);
	char *type = fstr(&f, BRIG_GP_F_TYPE);
	assert_string_equal(type, "file");
	free(type);
	free(f.p);

	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace");
	brig_gp_put_int(&e, BRIG_GP_F_DEPTH, 3);
	req = c.next_req++;
	cli_send(&c, &e, BRIG_GP_T_LIST, req);
	int found = 0;
	for (;;) {
		assert_int_equal(cli_recv(&c, &f, 30000), 0);
		if (f.type == BRIG_GP_T_LIST_ENTRY) {
			char *nm = fstr(&f, BRIG_GP_F_NAME);
			if (strcmp(nm, "d/e/blob.bin") == 0)
				found = 1;
			free(nm);
			free(f.p);
			continue;
		}
		assert_int_equal(f.type, BRIG_GP_T_OK);
		assert_int_equal(fint(&f, BRIG_GP_F_COUNT), 3);
		free(f.p);
		break;
	}
	assert_true(found);

	/* RENAME, MKDIR, REMOVE (recursive, not following a link) */
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/d/e/blob.bin");
	brig_gp_put_str(&e, BRIG_GP_F_PATH2, "/workspace/d/moved.bin");
	simple_req(&c, BRIG_GP_T_RENAME, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/keep");
	simple_req(&c, BRIG_GP_T_MKDIR, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	write_file(&c, "/workspace/keep/precious", "x", 1, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	result r;
	run(&c, (const char *const[]){"ln", "-s", "/workspace/keep", "/workspace/d/link", NULL}, NULL, &r);
	assert_int_equal(r.code, 0);
	result_free(&r);
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/d");
	simple_req(&c, BRIG_GP_T_REMOVE, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR); /* not empty, not recursive */
	free(f.p);
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/d");
	brig_gp_put_int(&e, BRIG_GP_F_RECURSIVE, 1);
	simple_req(&c, BRIG_GP_T_REMOVE, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	run(&c, (const char *const[]){"sh", "-c", "ls /workspace; cat /workspace/keep/precious", NULL}, NULL, &r);
	assert_string_equal(out_str(&r), "keep\nx");
	result_free(&r);

	/* outside the writable mounts: refused, said plainly */
	write_file(&c, "/etc/evil", "x", 1, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	assert_int_equal(fint(&f, BRIG_GP_F_ERRNO), EROFS);
	char *msg = fstr(&f, BRIG_GP_F_MESSAGE);
	assert_non_null(strstr(msg, "read-only file system"));
	free(msg);
	free(f.p);
	/* a listing too long to build at once is refused */
	run(&c,
	    (const char *const[]){"sh", "-c",
				  "mkdir /workspace/many && cd /workspace/many && seq 1 100001 | xargs touch", NULL},
	    NULL, &r);
	assert_int_equal(r.code, 0);
	result_free(&r);
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/many");
	simple_req(&c, BRIG_GP_T_LIST, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	assert_int_equal(fint(&f, BRIG_GP_F_ERRNO), E2BIG);
	free(f.p);
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/many");
	brig_gp_put_int(&e, BRIG_GP_F_RECURSIVE, 1);
	simple_req(&c, BRIG_GP_T_REMOVE, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_OK);
	free(f.p);
	/* a FIFO is refused, not waited on */
	run(&c, (const char *const[]){"mkfifo", "/workspace/fifo", NULL}, NULL, &r);
	result_free(&r);
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/fifo");
	simple_req(&c, BRIG_GP_T_READ, &e, &f);
	assert_int_equal(f.type, BRIG_GP_T_ERROR);
	free(f.p);
	brig_gp_enc_free(&e);
	free(blob);
	cli_close(&c);
}

static void test_sandbox_cannot_touch_init(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	/* a process brig-init started cannot use the socket (ppid rule): a
	 * HELLO through its own relay gets no answer, the connection just ends */
	run(&c,
	    (const char *const[]){"sh", "-c",
				  "printf 'bg\\001\\000\\000\\000\\000\\000\\000\\000\\000\\015"
				  "\\001\\000\\000\\000\\010\\000\\000\\000\\000\\000\\000\\000\\001' "
				  "| /.brig/brig-init relay | wc -c",
				  NULL},
	    NULL, &r);
	assert_int_equal(r.code, 0);
	assert_int_equal(atoi(out_str(&r)), 0);
	result_free(&r);
	/* while the same bytes through a relay Docker started get HELLO_OK */
	char *ctl = xasprintf("printf 'bg\\001\\000\\000\\000\\000\\000\\000\\000\\000\\015"
			      "\\001\\000\\000\\000\\010\\000\\000\\000\\000\\000\\000\\000\\001' "
			      "| docker exec -i %s /.brig/brig-init relay | head -c 3 | tail -c 1 | od -An -tu1",
			      name);
	char *argv_ctl[] = {"sh", "-c", ctl, NULL};
	char *ctl_out = NULL;
	assert_int_equal(brig_test_spawn(argv_ctl, NULL, NULL, &ctl_out, NULL), 0);
	assert_int_equal(atoi(ctl_out), BRIG_GP_T_HELLO_OK);
	free(ctl_out);
	free(ctl);
	/* nor bind its name */
	run(&c, (const char *const[]){"/.brig/brig-init", "init", NULL}, NULL, &r);
	assert_int_not_equal(r.code, 0);
	result_free(&r);
	/* signals from inside are ignored */
	run(&c,
	    (const char *const[]){"sh", "-c", "kill -TERM 1; kill -INT 1; kill -HUP 1; kill -KILL 1; sleep 0.3", NULL},
	    NULL, &r);
	result_free(&r);
	cli d;
	cli_open(&d);
	assert_string_equal(d.boot_id, c.boot_id); /* the same brig-init */
	cli_close(&d);
	/* not dumpable: its environment, memory and fds are closed to the user */
	run(&c, (const char *const[]){"cat", "/proc/1/environ", NULL}, NULL, &r);
	assert_int_not_equal(r.code, 0);
	assert_int_equal(r.out.len, 0);
	result_free(&r);
	run(&c, (const char *const[]){"sh", "-c", "head -c 1 /proc/1/mem || exit 3; ls /proc/1/fd", NULL}, NULL, &r);
	assert_int_equal(r.code, 3);
	result_free(&r);
	run(&c, (const char *const[]){"ls", "/proc/1/fd/", NULL}, NULL, &r);
	assert_int_not_equal(r.code, 0);
	result_free(&r);
	cli_close(&c);
	char *st = NULL;
	char *argv[] = {"docker", "inspect", "-f", "{{.State.Running}}", name, NULL};
	assert_int_equal(brig_test_spawn(argv, NULL, NULL, &st, NULL), 0);
	assert_string_equal(st, "true\n");
	free(st);
}

static int64_t req_errno(cli *c, uint8_t type, brig_gp_enc *e);

/* The last 256 ended procs are remembered; older ones are forgotten. */
static void test_forget(void **state)
{
	cli c;
	cli_open(&c);
	result r;
	run(&c, (const char *const[]){"true", NULL}, NULL, &r);
	int64_t first = r.proc;
	result_free(&r);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, first);
	assert_int_equal(req_errno(&c, BRIG_GP_T_STATUS, &e), 0);
	int64_t last = 0;
	for (int i = 0; i < 300; i++) {
		run(&c, (const char *const[]){"true", NULL}, NULL, &r);
		last = r.proc;
		result_free(&r);
	}
	brig_gp_put_int(&e, BRIG_GP_F_PROC, first);
	assert_int_equal(req_errno(&c, BRIG_GP_T_STATUS, &e), ENOENT);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, last);
	assert_int_equal(req_errno(&c, BRIG_GP_T_STATUS, &e), 0);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, last - 250);
	assert_int_equal(req_errno(&c, BRIG_GP_T_STATUS, &e), 0);
	brig_gp_enc_free(&e);
	cli_close(&c);
}

static int64_t req_errno(cli *c, uint8_t type, brig_gp_enc *e) /* 0 for OK */
{
	frame f;
	simple_req(c, type, e, &f);
	int64_t v = f.type == BRIG_GP_T_OK ? 0 : fint(&f, BRIG_GP_F_ERRNO);
	free(f.p);
	brig_gp_enc_begin(e);
	return v;
}

/* Requests brig-init refuses, each with its errno; the connection lives on. */
static void test_refusals(void **state)
{
	cli c;
	cli_open(&c);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	assert_int_equal(req_errno(&c, BRIG_GP_T_START, &e), EINVAL); /* no ARGV */
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "true");
	brig_gp_put_int(&e, BRIG_GP_F_ROWS, 5000);
	brig_gp_put_int(&e, BRIG_GP_F_COLS, 80);
	assert_int_equal(req_errno(&c, BRIG_GP_T_START, &e), EINVAL);
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "true");
	brig_gp_put_int(&e, BRIG_GP_F_KEEP, 1ll << 40);
	assert_int_equal(req_errno(&c, BRIG_GP_T_START, &e), EINVAL);
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "true");
	brig_gp_put_int(&e, BRIG_GP_F_WINDOW, -5);
	assert_int_equal(req_errno(&c, BRIG_GP_T_START, &e), EINVAL);
	result r;
	run(&c, (const char *const[]){"true", NULL}, &(start_opts){.tag = "dup"}, &r);
	assert_null(r.error);
	result_free(&r);
	run(&c, (const char *const[]){"true", NULL}, &(start_opts){.tag = "dup"}, &r);
	assert_int_equal(r.error_errno, EEXIST);
	result_free(&r);
	run(&c, (const char *const[]){"true", NULL}, NULL, &r);
	brig_gp_put_int(&e, BRIG_GP_F_PROC, r.proc);
	brig_gp_put_int(&e, BRIG_GP_F_SIGNAL, 99);
	assert_int_equal(req_errno(&c, BRIG_GP_T_SIGNAL, &e), EINVAL);
	result_free(&r);
	brig_gp_put_str(&e, BRIG_GP_F_TAG, "never-given");
	assert_int_equal(req_errno(&c, BRIG_GP_T_KILL, &e), ENOENT);
	brig_gp_put_str(&e, BRIG_GP_F_TAG, "never-given");
	assert_int_equal(req_errno(&c, BRIG_GP_T_ATTACH, &e), ENOENT);
	assert_int_equal(req_errno(&c, 99, &e), ENOSYS); /* a type brig-init does not know */
	/* cwd that does not exist: ERROR, nothing runs */
	brig_gp_put_str(&e, BRIG_GP_F_ARGV, "true");
	brig_gp_put_str(&e, BRIG_GP_F_CWD, "/nowhere");
	assert_int_equal(req_errno(&c, BRIG_GP_T_START, &e), ENOENT);
	/* files */
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "relative/path");
	assert_int_equal(req_errno(&c, BRIG_GP_T_STAT, &e), EINVAL);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/nowhere");
	assert_int_equal(req_errno(&c, BRIG_GP_T_STAT, &e), ENOENT);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace");
	assert_int_equal(req_errno(&c, BRIG_GP_T_READ, &e), EISDIR);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace");
	brig_gp_put_int(&e, BRIG_GP_F_DEPTH, 65);
	assert_int_equal(req_errno(&c, BRIG_GP_T_LIST, &e), EINVAL);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/nowhere");
	assert_int_equal(req_errno(&c, BRIG_GP_T_LIST, &e), ENOENT);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/");
	assert_int_equal(req_errno(&c, BRIG_GP_T_REMOVE, &e), EINVAL);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/nothing");
	assert_int_equal(req_errno(&c, BRIG_GP_T_REMOVE, &e), ENOENT);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/a");
	brig_gp_put_str(&e, BRIG_GP_F_PATH2, "b");
	assert_int_equal(req_errno(&c, BRIG_GP_T_RENAME, &e), EINVAL);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/nothing");
	brig_gp_put_str(&e, BRIG_GP_F_PATH2, "/workspace/b");
	assert_int_equal(req_errno(&c, BRIG_GP_T_RENAME, &e), ENOENT);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/etc/x");
	assert_int_equal(req_errno(&c, BRIG_GP_T_MKDIR, &e), EROFS);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/m/n");
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, 1);
	assert_int_equal(req_errno(&c, BRIG_GP_T_MKDIR, &e), 0);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/m/n");
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, 1);
	assert_int_equal(req_errno(&c, BRIG_GP_T_MKDIR, &e), 0); /* exists: fine with PARENTS */
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/m/n");
	assert_int_equal(req_errno(&c, BRIG_GP_T_MKDIR, &e), EEXIST);
	/* STAT of a link itself, and APPEND */
	run(&c, (const char *const[]){"ln", "-s", "/nowhere", "/workspace/m/l", NULL}, NULL, &r);
	result_free(&r);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/m/l");
	brig_gp_put_int(&e, BRIG_GP_F_NOFOLLOW, 1);
	frame f;
	simple_req(&c, BRIG_GP_T_STAT, &e, &f);
	char *t = fstr(&f, BRIG_GP_F_TYPE), *l = fstr(&f, BRIG_GP_F_LINK);
	assert_string_equal(t, "symlink");
	assert_string_equal(l, "/nowhere");
	free(t);
	free(l);
	free(f.p);
	uint32_t req = c.next_req++;
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/m/log");
	brig_gp_put_int(&e, BRIG_GP_F_APPEND, 1);
	cli_send(&c, &e, BRIG_GP_T_WRITE, req);
	brig_gp_enc_begin(&e);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, "one\n", 4);
	cli_send(&c, &e, BRIG_GP_T_DATA, req);
	brig_gp_enc_begin(&e);
	cli_send(&c, &e, BRIG_GP_T_WRITE_END, req);
	for (;;) {
		assert_int_equal(cli_recv(&c, &f, 10000), 0);
		int done = f.id == req;
		if (done)
			assert_int_equal(f.type, BRIG_GP_T_OK);
		free(f.p);
		if (done)
			break;
	}
	req = c.next_req++;
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, "/workspace/m/log");
	brig_gp_put_int(&e, BRIG_GP_F_APPEND, 1);
	cli_send(&c, &e, BRIG_GP_T_WRITE, req);
	brig_gp_enc_begin(&e);
	brig_gp_put_bytes(&e, BRIG_GP_F_DATA, "two\n", 4);
	cli_send(&c, &e, BRIG_GP_T_DATA, req);
	brig_gp_enc_begin(&e);
	cli_send(&c, &e, BRIG_GP_T_WRITE_END, req);
	for (;;) {
		assert_int_equal(cli_recv(&c, &f, 10000), 0);
		int done = f.id == req;
		if (done)
			assert_int_equal(f.type, BRIG_GP_T_OK);
		free(f.p);
		if (done)
			break;
	}
	run(&c, (const char *const[]){"cat", "/workspace/m/log", NULL}, NULL, &r);
	assert_string_equal(out_str(&r), "one\ntwo\n");
	result_free(&r);
	brig_gp_enc_free(&e);
	cli_close(&c);
}

/* run mode: the command is PID 1's child, the deadline PID 1's */
static void test_run_mode(void **state)
{
	char *rn = brig_test_name("gi-run");
	int64_t t0 = now_ms();
	int rc = sh("docker run --rm --label %s --name %s " HARDENED " -v %s:/.brig:ro --entrypoint /.brig/brig-init "
		    "%s run --timeout-ms 500 -- sleep 30 >/dev/null",
		    label, rn, init_vol, brig_test_image());
	assert_int_equal(rc, 124);
	assert_true(now_ms() - t0 < 20000);
	rc = sh("docker run --rm --label %s --name %s " HARDENED " -v %s:/.brig:ro --entrypoint /.brig/brig-init "
		"%s run --timeout-ms 5000 -- sh -c 'grep -q \"SigIgn:.0000000000000000\" /proc/self/status && exit 3'",
		label, rn, init_vol, brig_test_image());
	assert_int_equal(rc, 3);
	char *cmd = xasprintf("docker run --rm --label %s --name %s " HARDENED " -v %s:/.brig:ro "
			      "--entrypoint /.brig/brig-init %s run --timeout-ms 5000 -- nosuchcmd",
			      label, rn, init_vol, brig_test_image());
	char *argv[] = {"sh", "-c", cmd, NULL};
	char *err = NULL;
	assert_int_equal(brig_test_spawn(argv, NULL, NULL, NULL, &err), 127);
	assert_non_null(strstr(err, "brig: nosuchcmd: not found in the image"));
	free(err);
	free(cmd);
	/* arguments it does not understand */
	rc = sh("docker run --rm --label %s --name %s " HARDENED " -v %s:/.brig:ro --entrypoint /.brig/brig-init "
		"%s run --timeout-ms soon -- true 2>/dev/null",
		label, rn, init_vol, brig_test_image());
	assert_int_equal(rc, 2);
	/* init --lifetime: the container ends itself */
	t0 = now_ms();
	rc = sh("docker run --rm --label %s --name %s " HARDENED " -v %s:/.brig:ro --entrypoint /.brig/brig-init "
		"%s init --lifetime 1",
		label, rn, init_vol, brig_test_image());
	assert_int_equal(rc, 0);
	assert_true(now_ms() - t0 < 15000);
	free(rn);
}

/* Last: `docker stop` (SIGTERM from outside) ends brig-init promptly. */
static void test_stop(void **state)
{
	cli c;
	cli_open(&c);
	result r = {0};
	uint32_t req = start(&c, (const char *const[]){"sleep", "1000", NULL}, NULL);
	assert_true(wait_started(&c, req, &r) > 0);
	int64_t t0 = now_ms();
	assert_int_equal(sh("docker stop -t 20 %s >/dev/null", name), 0);
	assert_true(now_ms() - t0 < 8000);
	cli_close(&c);
	char *st = NULL;
	char *argv[] = {"docker", "inspect", "-f", "{{.State.ExitCode}}", name, NULL};
	assert_int_equal(brig_test_spawn(argv, NULL, NULL, &st, NULL), 0);
	assert_string_equal(st, "0\n");
	free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_exec_basics),
		cmocka_unit_test(test_backpressure),
		cmocka_unit_test(test_stdin),
		cmocka_unit_test(test_flow),
		cmocka_unit_test(test_stdin_full_kill),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_kill_tree),
		cmocka_unit_test(test_close_kills),
		cmocka_unit_test(test_detached),
		cmocka_unit_test(test_signal),
		cmocka_unit_test(test_leftovers),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_shepherd_escape),
		cmocka_unit_test(test_keep_bounded),
		cmocka_unit_test(test_list_bounded),
		cmocka_unit_test(test_pty),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_sandbox_cannot_touch_init),
		cmocka_unit_test(test_run_mode),
		cmocka_unit_test(test_stop),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
