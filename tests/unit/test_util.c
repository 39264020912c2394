/* test_util.c — the bounded buffer: the checked appends refuse past the cap
 * and leave it unchanged; the infallible ones append, and abort at the cap. */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

static void test_add_refuses_past_cap(void **state)
{
	(void)state;
	brig_buf b;
	brig_buf_init(&b, 8);
	assert_int_equal(brig_buf_addstr(&b, "abcde"), 0);
	assert_int_equal(brig_buf_add(&b, "xyzw", 4), BRIG_ETOOBIG);
	assert_int_equal(brig_buf_printf(&b, "%d", 1234), BRIG_ETOOBIG);
	assert_int_equal(b.len, 5);
	assert_string_equal(brig_buf_cstr(&b), "abcde");
	assert_int_equal(brig_buf_add(&b, "xyz", 3), 0); /* exactly the cap */
	assert_string_equal(brig_buf_cstr(&b), "abcdexyz");
	brig_buf_free(&b);
}

static void test_put_appends(void **state)
{
	(void)state;
	brig_buf b;
	brig_buf_init(&b, 64);
	brig_buf_put(&b, "ab\0c", 4); /* binary-safe */
	brig_buf_puts(&b, "-");
	brig_buf_putf(&b, "%s=%d", "n", 42);
	assert_int_equal(b.len, 9);
	assert_memory_equal(b.data, "ab\0c-n=42", 10); /* NUL-terminated too */
	brig_buf_put(&b, "", 0);
	brig_buf_puts(&b, "");
	assert_int_equal(b.len, 9);
	/* Up to the cap exactly is fine. */
	char fill[55];
	memset(fill, 'x', sizeof fill);
	brig_buf_put(&b, fill, sizeof fill);
	assert_int_equal(b.len, 64);
	brig_buf_free(&b);

	/* Long formatted text grows the buffer. */
	brig_buf_init(&b, SIZE_MAX / 2);
	for (int i = 0; i < 1000; i++)
		brig_buf_putf(&b, "%04d,", i);
	assert_int_equal(b.len, 5000);
	assert_memory_equal(b.data + 4995, "0999,", 5);
	brig_buf_free(&b);
}

/* Runs put_fn in a child with stderr into a pipe; returns what it wrote
 * there and the wait status. */
static char *in_child(void (*put_fn)(brig_buf *), int *status)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 2);
		signal(SIGABRT, SIG_DFL); /* testutil's handler is for the parent's cleanup */
		brig_buf b;
		brig_buf_init(&b, 8);
		put_fn(&b);
		_exit(0);
	}
	close(p[1]);
	static char text[512];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof text - 1 && (r = read(p[0], text + n, sizeof text - 1 - n)) > 0)
		n += (size_t)r;
	text[n] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, status, 0), pid);
	return text;
}

static void put_over(brig_buf *b)
{
	brig_buf_puts(b, "abcdef");
	brig_buf_put(b, "ghi", 3);
}

static void putf_over(brig_buf *b)
{
	brig_buf_putf(b, "%s%d", "abcdefgh", 9);
}

static void puts_fits(brig_buf *b)
{
	brig_buf_puts(b, "abcdefgh");
}

static void test_put_past_cap_aborts(void **state)
{
	(void)state;
	int st = 0;
	const char *text = in_child(put_over, &st);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	assert_string_equal(text, "brig: internal buffer cap exceeded (len 6 + 3 > cap 8)\n");

	text = in_child(putf_over, &st);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	assert_string_equal(text, "brig: internal buffer cap exceeded (len 0 + 9 > cap 8)\n");

	text = in_child(puts_fits, &st);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_string_equal(text, "");
}

/* brig_send_all: everything out; a full socket that stays full past the
 * timeout, and a peer that is gone, are failures. */
static void test_send_all(void **state)
{
	(void)state;
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	assert_int_equal(brig_send_all(sv[0], "hello", 5, 100), 0);
	char got[8] = {0};
	assert_int_equal(read(sv[1], got, sizeof got), 5);
	assert_string_equal(got, "hello");
	char fill[4096] = {0};
	while (send(sv[0], fill, sizeof fill, MSG_NOSIGNAL) > 0)
		;
	assert_int_equal(brig_send_all(sv[0], "x", 1, 10), -1); /* nobody reads */
	close(sv[1]);
	assert_int_equal(brig_send_all(sv[0], "x", 1, -1), -1); /* the peer is gone */
	close(sv[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_refuses_past_cap),
		cmocka_unit_test(test_put_appends),
		cmocka_unit_test(test_put_past_cap_aborts),
		cmocka_unit_test(test_send_all),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
