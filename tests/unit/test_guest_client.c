/* test_guest_client.c — the host side of brig-init's protocol against a fake
 * guest over a socketpair: commands, stdin, deadlines and cancels, many
 * threads on one handle, and a guest that says garbage, huge frames or
 * nothing (brig neither crashes nor waits past its deadline). */
#include "testutil.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brig/guest.h"
#include "guest/host.h"
#include "guest/proto.h"
#include "util/util.h"

/* ---- the fake guest ---- */

enum {
	FAKE_OK,
	FAKE_GARBAGE,
	FAKE_HUGE,
	FAKE_SILENT,
	FAKE_MUTE_AFTER_START,
	FAKE_BAD_FIELD,
	FAKE_CLOSE_AFTER_START,
	FAKE_FLOW,
	FAKE_BAD_CREDIT,
	FAKE_UNASKED_CREDIT,
};

typedef struct fproc {
	int64_t id;
	uint32_t req;
	bool cat;       /* echoes stdin, exits at STDIN_CLOSE */
	int64_t due_ms; /* a timeout, 0: none */
	bool sleeping;  /* ends only on KILL or timeout */
	bool live;
} fproc;

typedef struct fake {
	int fd;
	int mode;
	pthread_t th;
	fproc procs[1024];
	int nprocs;
	int64_t next_proc;
	brig_gp_enc e;
	int kills;
	/* FAKE_FLOW: stdin acknowledged a window at a time; what the client
	 * had unacknowledged at most, and the output CREDIT it granted */
	int64_t unacked, max_unacked, credit_in, windows;
} fake;

/* The fake guest's writes: a client that already hung up (a deadline, a
 * cancel, garbage refused) is no failure of the fake's, and must not kill
 * the test with SIGPIPE (seen once on a loaded machine). */
static void fwrite_peer(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EPIPE || errno == ECONNRESET))
			return;
		assert_true(r > 0);
		p += r;
		len -= (size_t)r;
	}
}

static void fsend(fake *f, uint8_t type, uint32_t id)
{
	long n = brig_gp_enc_finish(&f->e, type, id);
	assert_true(n > 0);
	fwrite_peer(f->fd, f->e.buf, (size_t)n);
}

static void fack(fake *f, int64_t proc)
{
	brig_gp_enc_begin(&f->e);
	brig_gp_put_int(&f->e, BRIG_GP_F_CREDIT, f->unacked);
	fsend(f, BRIG_GP_T_CREDIT, (uint32_t)proc);
	f->unacked = 0;
}

static void fexit(fake *f, fproc *p, int code, bool timed_out, bool killed)
{
	brig_gp_enc_begin(&f->e);
	brig_gp_put_int(&f->e, BRIG_GP_F_CODE, code);
	brig_gp_put_int(&f->e, BRIG_GP_F_TIMED_OUT, timed_out);
	brig_gp_put_int(&f->e, BRIG_GP_F_KILLED, killed);
	fsend(f, BRIG_GP_T_EXIT, (uint32_t)p->id);
	p->live = false;
}

static void foutput(fake *f, int64_t proc, int stream, const void *d, size_t n)
{
	brig_gp_enc_begin(&f->e);
	brig_gp_put_int(&f->e, BRIG_GP_F_STREAM, stream);
	brig_gp_put_bytes(&f->e, BRIG_GP_F_DATA, d, n);
	fsend(f, BRIG_GP_T_OUTPUT, (uint32_t)proc);
}

static fproc *fproc_find(fake *f, int64_t id)
{
	for (int i = 0; i < f->nprocs; i++)
		if (f->procs[i].id == id)
			return &f->procs[i];
	return NULL;
}

static void fstart(fake *f, const brig_gp_hdr *h, const unsigned char *pl)
{
	brig_gp_dec d;
	brig_gp_field fl;
	char *argv[8] = {0};
	int argc = 0;
	int64_t timeout = 0;
	char *env = NULL;
	brig_gp_dec_init(&d, pl, h->len);
	while (brig_gp_dec_next(&d, &fl) == BRIG_GP_OK) {
		if (fl.tag == BRIG_GP_F_ARGV && argc < 7)
			argv[argc++] = brig_gp_field_strdup(&fl, 0);
		if (fl.tag == BRIG_GP_F_ENV && !env)
			env = brig_gp_field_strdup(&fl, 0);
		if (fl.tag == BRIG_GP_F_TIMEOUT_MS)
			brig_gp_field_int(&fl, &timeout);
		if (fl.tag == BRIG_GP_F_WINDOW)
			f->windows++;
	}
	if (strcmp(argv[0], "nosuch") == 0) {
		brig_gp_enc_begin(&f->e);
		brig_gp_put_int(&f->e, BRIG_GP_F_ERRNO, ENOENT);
		brig_gp_put_str(&f->e, BRIG_GP_F_MESSAGE, "nosuch: not found in the image");
		fsend(f, BRIG_GP_T_ERROR, h->id);
		goto out;
	}
	assert_true(f->nprocs < 1024);
	fproc *p = &f->procs[f->nprocs++];
	*p = (fproc){.id = ++f->next_proc, .req = h->id, .live = true};
	brig_gp_enc_begin(&f->e);
	brig_gp_put_int(&f->e, BRIG_GP_F_PROC, p->id);
	brig_gp_put_int(&f->e, BRIG_GP_F_PID, 100 + p->id);
	fsend(f, BRIG_GP_T_STARTED, h->id);
	if (f->mode == FAKE_BAD_CREDIT || f->mode == FAKE_UNASKED_CREDIT) {
		brig_gp_enc_begin(&f->e);
		if (f->mode == FAKE_BAD_CREDIT)
			brig_gp_put_str(&f->e, BRIG_GP_F_CREDIT, "lots");
		else
			brig_gp_put_int(&f->e, BRIG_GP_F_CREDIT, 100);
		fsend(f, BRIG_GP_T_CREDIT, (uint32_t)p->id);
		goto out;
	}
	if (f->mode == FAKE_MUTE_AFTER_START)
		goto out;
	if (f->mode == FAKE_CLOSE_AFTER_START) {
		shutdown(f->fd, SHUT_RDWR); /* the relay dies under a running command */
		goto out;
	}
	if (timeout)
		p->due_ms = brig_now_ms() + timeout;
	if (strcmp(argv[0], "echo") == 0) {
		for (int i = 1; i < argc; i++)
			foutput(f, p->id, 1, argv[i], strlen(argv[i]));
		fexit(f, p, 0, false, false);
	} else if (strcmp(argv[0], "err") == 0) {
		foutput(f, p->id, 2, "oops", 4);
		fexit(f, p, 3, false, false);
	} else if (strcmp(argv[0], "env") == 0) {
		foutput(f, p->id, 1, env ? env : "", env ? strlen(env) : 0);
		fexit(f, p, 0, false, false);
	} else if (strcmp(argv[0], "cat") == 0) {
		p->cat = true;
	} else if (strcmp(argv[0], "badstream") == 0) {
		foutput(f, p->id, 7, "x", 1);
	} else {
		p->sleeping = true;
	}
out:
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	free(env);
}

static int64_t field_proc(const brig_gp_hdr *h, const unsigned char *pl)
{
	brig_gp_dec d;
	brig_gp_field fl;
	int64_t v = 0;
	brig_gp_dec_init(&d, pl, h->len);
	while (brig_gp_dec_next(&d, &fl) == BRIG_GP_OK)
		if (fl.tag == BRIG_GP_F_PROC)
			brig_gp_field_int(&fl, &v);
	return v;
}

static void fhandle(fake *f, const brig_gp_hdr *h, const unsigned char *pl)
{
	switch (h->type) {
	case BRIG_GP_T_HELLO:
		if (f->mode == FAKE_GARBAGE) {
			fwrite_peer(f->fd, "HTTP/1.1 200 OK\r\n\r\nhello there", 30);
			return;
		}
		if (f->mode == FAKE_HUGE) {
			unsigned char b[12];
			brig_gp_hdr_write(b, BRIG_GP_T_HELLO_OK, 0, 0xffffffffu);
			fwrite_peer(f->fd, b, sizeof b);
			return;
		}
		if (f->mode == FAKE_SILENT)
			return;
		brig_gp_enc_begin(&f->e);
		brig_gp_put_int(&f->e, BRIG_GP_F_VERSION, BRIG_GP_VERSION);
		brig_gp_put_int(&f->e, BRIG_GP_F_PID, 1);
		brig_gp_put_str(&f->e, BRIG_GP_F_BOOT_ID, "0123456789abcdef0123456789abcdef");
		if (f->mode == FAKE_FLOW || f->mode == FAKE_BAD_CREDIT)
			brig_gp_put_int(&f->e, BRIG_GP_F_FLOW, 1);
		fsend(f, BRIG_GP_T_HELLO_OK, 0);
		return;
	case BRIG_GP_T_START:
		if (f->mode == FAKE_BAD_FIELD) {
			brig_gp_enc_begin(&f->e);
			brig_gp_put_str(&f->e, BRIG_GP_F_PROC, "not an integer");
			fsend(f, BRIG_GP_T_STARTED, h->id);
			return;
		}
		fstart(f, h, pl);
		return;
	case BRIG_GP_T_STDIN: {
		fproc *p = fproc_find(f, h->id);
		brig_gp_dec d;
		brig_gp_field fl;
		brig_gp_dec_init(&d, pl, h->len);
		while (p && p->live && brig_gp_dec_next(&d, &fl) == BRIG_GP_OK)
			if (fl.tag == BRIG_GP_F_DATA) {
				foutput(f, p->id, 1, fl.val, fl.len);
				f->unacked += fl.len;
				if (f->unacked > f->max_unacked)
					f->max_unacked = f->unacked;
				if (f->mode == FAKE_FLOW && f->unacked >= (int64_t)BRIG_GP_STDIN_WINDOW)
					fack(f, p->id);
			}
		return;
	}
	case BRIG_GP_T_CREDIT: {
		int64_t v = 0;
		brig_gp_dec d;
		brig_gp_field fl;
		brig_gp_dec_init(&d, pl, h->len);
		while (brig_gp_dec_next(&d, &fl) == BRIG_GP_OK)
			if (fl.tag == BRIG_GP_F_CREDIT)
				assert_int_equal(brig_gp_field_int(&fl, &v), 0);
		f->credit_in += v;
		return;
	}
	case BRIG_GP_T_STDIN_CLOSE: {
		fproc *p = fproc_find(f, h->id);
		if (p && p->live && p->cat)
			fexit(f, p, 0, false, false);
		return;
	}
	case BRIG_GP_T_KILL: {
		f->kills++;
		if (f->mode == FAKE_MUTE_AFTER_START)
			return;
		fproc *p = fproc_find(f, field_proc(h, pl));
		if (p && p->live)
			fexit(f, p, 137, false, true);
		brig_gp_enc_begin(&f->e);
		brig_gp_put_int(&f->e, BRIG_GP_F_CODE, 137);
		brig_gp_put_int(&f->e, BRIG_GP_F_KILLED, 1);
		fsend(f, BRIG_GP_T_OK, h->id);
		return;
	}
	case BRIG_GP_T_PS:
		for (int i = 0; i < f->nprocs; i++) {
			brig_gp_enc_begin(&f->e);
			brig_gp_put_int(&f->e, BRIG_GP_F_PROC, f->procs[i].id);
			brig_gp_put_str(&f->e, BRIG_GP_F_ARGV, "sleep");
			brig_gp_put_str(&f->e, BRIG_GP_F_STATE, f->procs[i].live ? "running" : "exited");
			fsend(f, BRIG_GP_T_PS_ENTRY, h->id);
		}
		brig_gp_enc_begin(&f->e);
		brig_gp_put_int(&f->e, BRIG_GP_F_COUNT, f->nprocs);
		fsend(f, BRIG_GP_T_OK, h->id);
		return;
	case BRIG_GP_T_STAT:
		brig_gp_enc_begin(&f->e);
		brig_gp_put_str(&f->e, BRIG_GP_F_TYPE, "file");
		brig_gp_put_int(&f->e, BRIG_GP_F_MODE, 0644);
		brig_gp_put_int(&f->e, BRIG_GP_F_SIZE, 5);
		fsend(f, BRIG_GP_T_OK, h->id);
		return;
	case BRIG_GP_T_READ:
		brig_gp_enc_begin(&f->e);
		brig_gp_put_bytes(&f->e, BRIG_GP_F_DATA, "hello", 5);
		fsend(f, BRIG_GP_T_DATA, h->id);
		brig_gp_enc_begin(&f->e);
		brig_gp_put_int(&f->e, BRIG_GP_F_COUNT, 5);
		fsend(f, BRIG_GP_T_OK, h->id);
		return;
	case BRIG_GP_T_MKDIR:
		brig_gp_enc_begin(&f->e);
		brig_gp_put_int(&f->e, BRIG_GP_F_ERRNO, EROFS);
		brig_gp_put_str(&f->e, BRIG_GP_F_MESSAGE, "read-only file system\x1b[31m");
		fsend(f, BRIG_GP_T_ERROR, h->id);
		return;
	default: return;
	}
}

static void *fake_main(void *arg)
{
	fake *f = arg;
	brig_gp_reader r;
	brig_gp_reader_init(&r);
	unsigned char buf[65536];
	for (;;) {
		int64_t due = 0;
		for (int i = 0; i < f->nprocs; i++)
			if (f->procs[i].live && f->procs[i].due_ms && (!due || f->procs[i].due_ms < due))
				due = f->procs[i].due_ms;
		struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
		int pr = poll(&pfd, 1, due ? brig_remaining_ms(due) : -1);
		if (pr == 0) {
			for (int i = 0; i < f->nprocs; i++)
				if (f->procs[i].live && f->procs[i].due_ms && f->procs[i].due_ms <= brig_now_ms())
					fexit(f, &f->procs[i], 124, true, false);
			continue;
		}
		ssize_t n = read(f->fd, buf, sizeof buf);
		if (n <= 0)
			break;
		size_t off = 0;
		while (off < (size_t)n) {
			size_t used = 0;
			int rc = brig_gp_reader_feed(&r, buf + off, (size_t)n - off, &used);
			off += used;
			if (rc == BRIG_GP_OK)
				fhandle(f, &r.hdr, r.payload);
			else if (rc != BRIG_GP_ENEED)
				fail_msg("the client sent a malformed frame: %d", rc);
		}
	}
	brig_gp_reader_free(&r);
	brig_gp_enc_free(&f->e);
	return NULL;
}

static brig_guest *fake_open(fake *f, int mode, int64_t deadline_ms, int *rc_out, brig_error **err)
{
	memset(f, 0, sizeof *f);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f->fd = sv[1];
	f->mode = mode;
	assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
	brig_guest *g = NULL;
	*rc_out = brig_guest__open_fd(&g, sv[0], deadline_ms, err);
	return g;
}

static void fake_close(fake *f, brig_guest *g)
{
	brig_guest_free(g);
	shutdown(f->fd, SHUT_RDWR);
	pthread_join(f->th, NULL);
	close(f->fd);
}

/* ---- output collection ---- */

typedef struct seen {
	pthread_mutex_t mu;
	brig_buf out, err;
} seen;

static int on_out(int stream, const char *d, size_t n, void *payload)
{
	seen *s = payload;
	brig_buf_put(stream == BRIG_STREAM_STDERR ? &s->err : &s->out, d, n);
	return 0;
}

static void seen_init(seen *s)
{
	brig_buf_init(&s->out, 1 << 20);
	brig_buf_init(&s->err, 1 << 20);
}

static void seen_free(seen *s)
{
	brig_buf_free(&s->out);
	brig_buf_free(&s->err);
}

static brig_guest_exec_opts opts_for(const char *const *argv, seen *s)
{
	return (brig_guest_exec_opts){.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				      .argv = argv,
				      .stdin_fd = -1,
				      .cancel_fd = -1,
				      .on_output = on_out,
				      .payload = s};
}

/* ---- tests ---- */

static void test_exec_basics(void **state)
{
	fake f;
	brig_error *err = NULL;
	int rc;
	brig_guest *g = fake_open(&f, FAKE_OK, 0, &rc, &err);
	assert_int_equal(rc, 0);
	assert_string_equal(brig_guest_boot_id(g), "0123456789abcdef0123456789abcdef");

	seen s;
	seen_init(&s);
	const char *echo[] = {"echo", "hello ", "world", NULL};
	brig_guest_exec_opts o = opts_for(echo, &s);
	brig_guest_exit x;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_int_equal(x.code, 0);
	assert_string_equal(brig_buf_cstr(&s.out), "hello world");

	brig_buf_reset(&s.out);
	const char *errc[] = {"err", NULL};
	o = opts_for(errc, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_int_equal(x.code, 3);
	assert_string_equal(brig_buf_cstr(&s.err), "oops");

	brig_buf_reset(&s.out);
	const char *envc[] = {"env", NULL};
	const char *env[] = {"SECRET=v", NULL};
	o = opts_for(envc, &s);
	o.env = env;
	o.env_count = 1;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_string_equal(brig_buf_cstr(&s.out), "SECRET=v");

	/* stdin as bytes, larger than one chunk */
	brig_buf_reset(&s.out);
	size_t big = 200 * 1024;
	char *data = xmalloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (char)('a' + i % 26);
	const char *cat[] = {"cat", NULL};
	o = opts_for(cat, &s);
	o.stdin_data = data;
	o.stdin_len = big;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_int_equal(x.code, 0);
	assert_int_equal(s.out.len, big);
	assert_memory_equal(s.out.data, data, big);

	/* stdin from an fd */
	brig_buf_reset(&s.out);
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(brig_write_all(p[1], "from a pipe", 11), 0);
	close(p[1]);
	o = opts_for(cat, &s);
	o.stdin_fd = p[0];
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	close(p[0]);
	assert_string_equal(brig_buf_cstr(&s.out), "from a pipe");
	free(data);

	/* not found: an answer, nothing ran */
	const char *nosuch[] = {"nosuch", NULL};
	o = opts_for(nosuch, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_ENOTFOUND);
	assert_int_equal(x.code, 127);
	assert_non_null(strstr(brig_error_message(err), "not found in the image"));
	brig_error_free(err);
	err = NULL;
	assert_true(brig_guest_alive(g));

	/* files */
	json_t *st = NULL;
	assert_int_equal(brig_guest_stat(g, &st, "/workspace/f", false, 0, &err), 0);
	assert_string_equal(json_string_value(json_object_get(st, "type")), "file");
	assert_int_equal(json_integer_value(json_object_get(st, "mode")), 0644);
	json_decref(st);
	assert_int_equal(brig_guest_stat(g, &st, "relative", false, 0, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	assert_int_equal(brig_guest_mkdir(g, "/etc/x", 0755, false, 0, &err), BRIG_EDENIED);
	assert_null(strchr(brig_error_message(err), '\x1b')); /* the guest's words are sanitized */
	brig_error_free(err);
	err = NULL;
	brig_buf_reset(&s.out);
	assert_int_equal(brig_guest_read(g, "/workspace/f", 0, -1, (brig_engine_data_cb)0, NULL, 0, &err), 0);

	seen_free(&s);
	fake_close(&f, g);
}

static void test_deadline_and_cancel(void **state)
{
	fake f;
	brig_error *err = NULL;
	int rc;
	brig_guest *g = fake_open(&f, FAKE_OK, 0, &rc, &err);
	assert_int_equal(rc, 0);
	seen s;
	seen_init(&s);
	const char *sl[] = {"sleep", NULL};

	/* the guest's deadline: certain, 124 */
	brig_guest_exec_opts o = opts_for(sl, &s);
	o.deadline_ms = brig_now_ms() + 200;
	brig_guest_exit x;
	int64_t t0 = brig_now_ms();
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_true(x.timed_out);
	assert_int_equal(x.code, 124);
	assert_true(brig_now_ms() - t0 < 2000);

	/* a cancel: KILL, certain, 130 */
	int p[2];
	assert_int_equal(pipe(p), 0);
	o = opts_for(sl, &s);
	o.cancel_fd = p[0];
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_true(x.canceled);
	assert_int_equal(x.code, 130);
	assert_int_equal(f.kills, 1);
	close(p[0]);
	close(p[1]);

	/* detached, listed, killed */
	int64_t proc = 0;
	o = opts_for(sl, &s);
	assert_int_equal(brig_guest_start(g, &o, &proc, &err), 0);
	assert_true(proc > 0);
	json_t *ps = NULL;
	assert_int_equal(brig_guest_ps(g, &ps, 0, &err), 0);
	assert_int_equal(json_array_size(ps), 3);
	assert_string_equal(json_string_value(json_array_get(json_object_get(json_array_get(ps, 2), "argv"), 0)),
			    "sleep");
	json_decref(ps);
	assert_int_equal(brig_guest_kill(g, proc, &x, 0, &err), 0);
	assert_true(x.killed);

	seen_free(&s);
	fake_close(&f, g);
}

typedef struct worker {
	brig_guest *g;
	int n;
	int bad;
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < 50; i++) {
		char word[64];
		snprintf(word, sizeof word, "t%d-c%d", w->n, i);
		const char *argv[] = {"echo", word, NULL};
		seen s;
		seen_init(&s);
		brig_guest_exec_opts o = opts_for(argv, &s);
		brig_guest_exit x;
		brig_error *err = NULL;
		if (brig_guest_exec(w->g, &o, &x, &err) != 0 || x.code != 0 || strcmp(brig_buf_cstr(&s.out), word))
			w->bad++;
		brig_error_free(err);
		seen_free(&s);
	}
	return NULL;
}

static void test_threads(void **state)
{
	fake f;
	brig_error *err = NULL;
	int rc;
	brig_guest *g = fake_open(&f, FAKE_OK, 0, &rc, &err);
	assert_int_equal(rc, 0);
	pthread_t th[8];
	worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (worker){.g = g, .n = i};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	fake_close(&f, g);
}

static void expect_open_fails(int mode, int code)
{
	fake f;
	brig_error *err = NULL;
	int rc;
	int64_t t0 = brig_now_ms();
	brig_guest *g = fake_open(&f, mode, t0 + 300, &rc, &err);
	assert_null(g);
	assert_int_equal(rc, code);
	assert_true(brig_now_ms() - t0 < 1500);
	brig_error_free(err);
	fake_close(&f, NULL);
}

static void test_hostile_hello(void **state)
{
	expect_open_fails(FAKE_GARBAGE, BRIG_EPROTO);
	expect_open_fails(FAKE_HUGE, BRIG_EPROTO);
	expect_open_fails(FAKE_SILENT, BRIG_ETIMEDOUT);
}

static void test_hostile_answers(void **state)
{
	fake f;
	brig_error *err = NULL;
	int rc;
	seen s;
	seen_init(&s);
	const char *sl[] = {"sleep", NULL};
	brig_guest_exit x;

	/* a field of the wrong shape: BRIG_EPROTO, the handle is dead */
	brig_guest *g = fake_open(&f, FAKE_BAD_FIELD, 0, &rc, &err);
	assert_int_equal(rc, 0);
	brig_guest_exec_opts o = opts_for(sl, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EPROTO);
	brig_error_free(err);
	err = NULL;
	assert_false(brig_guest_alive(g));
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_ENOTSENT);
	brig_error_free(err);
	err = NULL;
	fake_close(&f, g);

	/* an output frame on a stream that does not exist */
	g = fake_open(&f, FAKE_OK, 0, &rc, &err);
	const char *bs[] = {"badstream", NULL};
	o = opts_for(bs, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EPROTO);
	brig_error_free(err);
	err = NULL;
	fake_close(&f, g);

	/* started, then nothing: uncertain, no later than deadline + grace + grace */
	g = fake_open(&f, FAKE_MUTE_AFTER_START, 0, &rc, &err);
	assert_int_equal(rc, 0);
	o = opts_for(sl, &s);
	int64_t t0 = brig_now_ms();
	o.deadline_ms = t0 + 100;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EUNCERTAIN);
	int64_t took = brig_now_ms() - t0;
	assert_true(took >= 100 + BRIG_GUEST_GRACE_MS);
	assert_true(took < 100 + 2 * BRIG_GUEST_GRACE_MS + 1000);
	assert_int_equal(f.kills, 1);
	brig_error_free(err);
	err = NULL;
	fake_close(&f, g);
	seen_free(&s);
}

/* Fields over brig-init's own caps are refused before anything is sent (one
 * would make brig-init end the relay, and every command sharing it). */
static void test_fields_over_guest_caps(void **state)
{
	(void)state;
	fake f;
	brig_error *err = NULL;
	int rc;
	brig_guest *g = fake_open(&f, FAKE_OK, 0, &rc, &err);
	assert_int_equal(rc, 0);
	seen s;
	seen_init(&s);
	char *big = xmalloc(BRIG_GP_MAX_STR + 2);
	memset(big, 'a', BRIG_GP_MAX_STR + 1);
	big[BRIG_GP_MAX_STR + 1] = '\0';
	brig_guest_exit x;
	const char *av[] = {"echo", big, NULL};
	brig_guest_exec_opts o = opts_for(av, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EINVAL);
	assert_non_null(strstr(brig_error_message(err), "argument 1"));
	brig_error_free(err);
	err = NULL;
	const char *echo[] = {"echo", "ok", NULL};
	const char *env[] = {big};
	o = opts_for(echo, &s);
	o.env = env;
	o.env_count = 1;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EINVAL);
	assert_non_null(strstr(brig_error_message(err), "environment entry 0"));
	/* never the value */
	assert_null(strstr(brig_error_message(err), "aaaa"));
	brig_error_free(err);
	err = NULL;
	o = opts_for(echo, &s);
	big[5000] = '\0';
	o.cwd = big;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EINVAL);
	brig_error_free(err);
	err = NULL;
	/* the relay is still good */
	o = opts_for(echo, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_true(brig_guest_alive(g));
	free(big);
	seen_free(&s);
	fake_close(&f, g);
}

/* A relay that breaks after START went out never says "nothing ran":
 * a caller would run the command a second time. */
static void test_cut_after_start_is_not_notsent(void **state)
{
	(void)state;
	fake f;
	brig_error *err = NULL;
	int rc;
	brig_guest *g = fake_open(&f, FAKE_CLOSE_AFTER_START, 0, &rc, &err);
	assert_int_equal(rc, 0);
	seen s;
	seen_init(&s);
	const char *cat[] = {"cat", NULL};
	brig_guest_exec_opts o = opts_for(cat, &s);
	char *in = xmalloc(1 << 20);
	memset(in, 'x', 1 << 20);
	o.stdin_data = in;
	o.stdin_len = 1 << 20;
	o.deadline_ms = brig_now_ms() + 2000;
	brig_guest_exit x;
	rc = brig_guest_exec(g, &o, &x, &err);
	print_message("cut after START: %s: %s\n", brig_error_name(rc), brig_error_message(err));
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, BRIG_ENOTSENT);
	brig_error_free(err);
	free(in);
	seen_free(&s);
	fake_close(&f, g);
}

/* FLOW: stdin never runs more than its window ahead of brig-init's
 * acknowledgements, output is credited back as the caller takes it, and a
 * malformed CREDIT breaks the handle. */
static void test_flow(void **state)
{
	fake f;
	brig_error *err = NULL;
	int rc;
	brig_guest *g = fake_open(&f, FAKE_FLOW, 0, &rc, &err);
	assert_int_equal(rc, 0);
	seen s;
	brig_buf_init(&s.out, 8u << 20);
	brig_buf_init(&s.err, 1 << 20);
	size_t big = 3 * BRIG_GP_STDIN_WINDOW + 12345;
	char *data = xmalloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (char)('a' + i % 26);
	const char *cat[] = {"cat", NULL};
	brig_guest_exec_opts o = opts_for(cat, &s);
	o.stdin_data = data;
	o.stdin_len = big;
	brig_guest_exit x;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	assert_int_equal(s.out.len, big);
	assert_memory_equal(s.out.data, data, big);
	fake_close(&f, g);
	assert_true(f.max_unacked <= (int64_t)BRIG_GP_STDIN_WINDOW);
	assert_int_equal(f.windows, 1);
	assert_true(f.credit_in >= (int64_t)(big - BRIG_GUEST_WINDOW / 4));
	free(data);
	seen_free(&s);

	g = fake_open(&f, FAKE_BAD_CREDIT, 0, &rc, &err);
	assert_int_equal(rc, 0);
	seen_init(&s);
	const char *sl[] = {"sleep", NULL};
	o = opts_for(sl, &s);
	o.deadline_ms = brig_now_ms() + 5000;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EPROTO);
	assert_non_null(strstr(brig_error_message(err), "CREDIT"));
	brig_error_free(err);
	err = NULL;
	fake_close(&f, g);
	seen_free(&s);

	/* CREDIT from a brig-init that did not say FLOW: a lie */
	g = fake_open(&f, FAKE_UNASKED_CREDIT, 0, &rc, &err);
	assert_int_equal(rc, 0);
	seen_init(&s);
	o = opts_for(sl, &s);
	o.deadline_ms = brig_now_ms() + 5000;
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), BRIG_EPROTO);
	assert_non_null(strstr(brig_error_message(err), "CREDIT"));
	brig_error_free(err);
	err = NULL;
	fake_close(&f, g);
	seen_free(&s);

	/* an older brig-init (no FLOW): no WINDOW, no CREDIT */
	g = fake_open(&f, FAKE_OK, 0, &rc, &err);
	seen_init(&s);
	const char *echo[] = {"echo", "x", NULL};
	o = opts_for(echo, &s);
	assert_int_equal(brig_guest_exec(g, &o, &x, &err), 0);
	fake_close(&f, g);
	assert_int_equal(f.windows, 0);
	assert_int_equal(f.credit_in, 0);
	seen_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_basics),
		cmocka_unit_test(test_deadline_and_cancel),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_hostile_hello),
		cmocka_unit_test(test_hostile_answers),
		cmocka_unit_test(test_fields_over_guest_caps),
		cmocka_unit_test(test_cut_after_start_is_not_notsent),
		cmocka_unit_test(test_flow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
