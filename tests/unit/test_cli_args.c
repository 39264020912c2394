/* test_cli_args.c — the brig command's flag parsing: numbers, durations,
 * and how getopt tells "options ended at --" from "at the first operand",
 * which decides where exec's and run's pass-through argv begins. */
#include "testutil.h"

#include <string.h>
#include <unistd.h>

/* args.c has no library dependencies beyond util: compile it in. */
#include "cli/args.c"

static void test_i64(void **state)
{
	int64_t v = 0;
	assert_int_equal(cli_parse_i64("--gen", "42", 1, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(cli_parse_i64("--gen", "1", 1, 100, &v), 0);
	assert_int_equal(cli_parse_i64("--gen", "100", 1, 100, &v), 0);
	v = 7;
	assert_int_equal(cli_parse_i64("--gen", "0", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_i64("--gen", "101", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_i64("--gen", "4x", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_i64("--gen", "", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_i64("--gen", " 5", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_i64("--gen", "+5", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_i64("--gen", "99999999999999999999999", 1, 100, &v), CLI_EXIT_FAIL);
	assert_int_equal(v, 7); /* untouched on error */
}

static void test_double(void **state)
{
	double d = 0;
	assert_int_equal(cli_parse_double("--cpus", "1.5", 0.01, 64, &d), 0);
	assert_true(d == 1.5);
	assert_int_equal(cli_parse_double("--cpus", "2", 0.01, 64, &d), 0);
	assert_true(d == 2.0);
	const char *bad[] = {"inf", "nan", "0x10", "1e3", "", "1.2.3", "-", "0", "65"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(cli_parse_double("--cpus", bad[i], 0.01, 64, &d), CLI_EXIT_FAIL);
}

static void test_duration(void **state)
{
	static const struct {
		const char *s;
		int64_t ms;
	} good[] = {{"30", 30000},     {"1.5", 1500},     {"90s", 90000}, {"90m", 5400000},
		    {"24h", 86400000}, {"2d", 172800000}, {"250ms", 250}, {"3600s", 3600000},
		    {"0", 0},          {"0.0005", 1} /* rounded up, never down to "no deadline" */};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		int64_t ms = -1;
		assert_int_equal(cli_parse_duration_ms("--timeout", good[i].s, 0, INT64_MAX / 2, &ms), 0);
		if (ms != good[i].ms)
			fail_msg("%s: got %lld ms, want %lld", good[i].s, (long long)ms, (long long)good[i].ms);
	}
	const char *bad[] = {"", "5x", "m", "s", ".", "-5", "5 s", "1h30m", "1e3", "inf", "nan", "0x10s"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t ms = 0;
		if (cli_parse_duration_ms("--timeout", bad[i], 0, INT64_MAX / 2, &ms) != CLI_EXIT_FAIL)
			fail_msg("'%s' was accepted", bad[i]);
	}
	int64_t ms;
	assert_int_equal(cli_parse_duration_ms("--timeout", "0.5", 1000, 10000, &ms), CLI_EXIT_FAIL);
	assert_int_equal(cli_parse_duration_ms("--timeout", "11", 1000, 10000, &ms), CLI_EXIT_FAIL);
}

static void test_format_secs(void **state)
{
	char b[32];
	cli_format_secs(b, sizeof b, 5000);
	assert_string_equal(b, "5s");
	cli_format_secs(b, sizeof b, 1500);
	assert_string_equal(b, "1.5s");
	cli_format_secs(b, sizeof b, 250);
	assert_string_equal(b, "0.25s");
	cli_format_secs(b, sizeof b, 600000);
	assert_string_equal(b, "600s");
}

static const struct option exec_opts[] = {
	{"env", required_argument, NULL, 'e'},
	{"interactive", no_argument, NULL, 'i'},
	{"timeout", required_argument, NULL, 300},
	{NULL, 0, NULL, 0},
};

/* Runs cli_getopt to the end over argv; returns the options seen as a
 * string of short letters ('T' for --timeout) and where operands start. */
static void scan(char **argv, char *seen, int *rest, bool *dashdash)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	optind = 0;
	int c;
	size_t n = 0;
	while ((c = cli_getopt("exec", argc, argv, "+:e:i", exec_opts, dashdash)) != -1)
		seen[n++] = c == 300 ? 'T' : (char)c;
	seen[n] = '\0';
	*rest = optind;
}

static void test_getopt_dashdash(void **state)
{
	char seen[16];
	int rest;
	bool dd;

	char *a1[] = {"exec", "-i", "--", "ls", "-l", NULL};
	scan(a1, seen, &rest, &dd);
	assert_string_equal(seen, "i");
	assert_true(dd);
	assert_int_equal(rest, 3);

	/* Stops at the first operand (NAME); what follows is left alone. */
	char *a2[] = {"exec", "-i", "name", "-e", "K=V", "ls", NULL};
	scan(a2, seen, &rest, &dd);
	assert_string_equal(seen, "i");
	assert_false(dd);
	assert_int_equal(rest, 2);

	/* "--" as the value of -e is a value, not the end of options. */
	char *a3[] = {"exec", "-e", "--", "name", NULL};
	scan(a3, seen, &rest, &dd);
	assert_string_equal(seen, "e");
	assert_false(dd);
	assert_int_equal(rest, 3);

	char *a4[] = {"exec", "--timeout=5", "--", NULL};
	scan(a4, seen, &rest, &dd);
	assert_string_equal(seen, "T");
	assert_true(dd);
	assert_int_equal(rest, 3);

	char *a5[] = {"exec", "--", NULL};
	scan(a5, seen, &rest, &dd);
	assert_string_equal(seen, "");
	assert_true(dd);
	assert_int_equal(rest, 2);

	char *a6[] = {"exec", NULL};
	scan(a6, seen, &rest, &dd);
	assert_false(dd);
	assert_int_equal(rest, 1);

	/* The command's own flags after -- are never parsed. */
	char *a7[] = {"exec", "--", "--timeout", "-i", NULL};
	scan(a7, seen, &rest, &dd);
	assert_string_equal(seen, "");
	assert_true(dd);
	assert_int_equal(rest, 2);
}

static void test_getopt_errors(void **state)
{
	char seen[16];
	int rest;
	bool dd;
	char *a1[] = {"exec", "--bogus", "x", NULL};
	scan(a1, seen, &rest, &dd);
	assert_string_equal(seen, "?");
	char *a2[] = {"exec", "-z", NULL};
	scan(a2, seen, &rest, &dd);
	assert_string_equal(seen, "?");
	char *a3[] = {"exec", "-e", NULL};
	scan(a3, seen, &rest, &dd);
	assert_string_equal(seen, "?");
	char *a4[] = {"exec", "--timeout", NULL};
	scan(a4, seen, &rest, &dd);
	assert_string_equal(seen, "?");
}

static void test_strv(void **state)
{
	cli_strv sv = {0};
	char buf[32][4];
	for (int i = 0; i < 20; i++) {
		snprintf(buf[i], sizeof buf[i], "%d", i);
		cli_strv_add(&sv, buf[i]);
	}
	assert_int_equal(sv.count, 20);
	assert_string_equal(sv.v[19], "19");
	assert_null(sv.v[20]);
	cli_strv_free(&sv);
	assert_null(sv.v);
}

/* Writes len bytes to a new temporary file; returns its path (static). */
static const char *env_file(const char *data, size_t len)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/brig-envfile-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	return path;
}

static void test_env_file(void **state)
{
	(void)state;
	static const char text[] = "# a comment\n"
				   "\n"
				   "   \t\n"
				   "A=1\n"
				   "  B=two words = and more\r\n"
				   "\tC\n"
				   "#D=commented\n"
				   "E=\n"
				   "F=last, no newline";
	const char *p = env_file(text, sizeof text - 1);
	cli_strv sv = {0};
	assert_int_equal(cli_env_file_read(&sv, p), 0);
	unlink(p);
	assert_int_equal(sv.count, 5);
	assert_string_equal(sv.v[0], "A=1");
	assert_string_equal(sv.v[1], "B=two words = and more");
	assert_string_equal(sv.v[2], "C");
	assert_string_equal(sv.v[3], "E=");
	assert_string_equal(sv.v[4], "F=last, no newline");
	cli_strv_free_all(&sv);
	assert_null(sv.v);

	/* A NUL byte is refused (a C string would cut the value short). */
	static const char nul[] = "A=1\nB=se\0cret\n";
	p = env_file(nul, sizeof nul - 1);
	assert_int_equal(cli_env_file_read(&sv, p), CLI_EXIT_FAIL);
	unlink(p);
	cli_strv_free_all(&sv);

	assert_int_equal(cli_env_file_read(&sv, "/nonexistent/brig.env"), CLI_EXIT_FAIL);
	assert_int_equal(sv.count, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_i64),
		cmocka_unit_test(test_double),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_format_secs),
		cmocka_unit_test(test_getopt_dashdash),
		cmocka_unit_test(test_getopt_errors),
		cmocka_unit_test(test_strv),
		cmocka_unit_test(test_env_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
