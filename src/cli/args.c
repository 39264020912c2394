/* args.c — flag parsing for every brig command: numbers and durations with
 * errors that name the flag, getopt with brig's own usage messages, and the
 * diagnostics printers. Uses only libc and util, so unit tests include it. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "util/util.h"

static void vnote(const char *fmt, va_list ap)
{
	/* One write per line so concurrent output from the command does not
	 * split a diagnostic in the middle. */
	char buf[2048];
	int n = snprintf(buf, sizeof buf, "brig: ");
	int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof buf - 2)
		len = sizeof buf - 2;
	buf[len++] = '\n';
	fflush(stdout);
	(void)!brig_write_all(2, buf, len);
}

int cli_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vnote(fmt, ap);
	va_end(ap);
	return CLI_EXIT_FAIL;
}

void cli_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vnote(fmt, ap);
	va_end(ap);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!cmd || !*cmd)
		return cli_fail("%s (see 'brig --help')", msg);
	return cli_fail("%s: %s (see 'brig %s --help')", cmd, msg, cmd);
}

int cli_help(const char *text)
{
	fputs(text, stdout);
	return 0;
}

/* Echoes user input in messages: printable, cut short. Env values never
 * reach these parsers, so echoing is safe. */
static const char *quote(char out[80], const char *s)
{
	size_t j = 0;
	for (size_t i = 0; s[i] && j < 64; i++) {
		unsigned char c = (unsigned char)s[i];
		out[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (strlen(s) > 64) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = '\0';
	return out;
}

int cli_parse_i64(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out)
{
	char q[80];
	if (!s || !*s)
		return cli_fail("%s: a number is required (%lld..%lld)", flag, (long long)min, (long long)max);
	errno = 0;
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (*end || end == s || s[0] == ' ' || s[0] == '\t' || s[0] == '+')
		return cli_fail("%s: '%s' is not a whole number (%lld..%lld)", flag, quote(q, s), (long long)min,
				(long long)max);
	if (errno == ERANGE || v < min || v > max)
		return cli_fail("%s: %s is out of range (%lld..%lld)", flag, quote(q, s), (long long)min,
				(long long)max);
	*out = v;
	return 0;
}

int cli_parse_double(const char *flag, const char *s, double min, double max, double *out)
{
	char q[80];
	if (!s || !*s)
		return cli_fail("%s: a number is required (%g..%g)", flag, min, max);
	/* strtod would take "inf", "nan" and hex floats; a limit is plain decimal. */
	for (const char *p = s; *p; p++)
		if (!strchr("0123456789.-", *p))
			return cli_fail("%s: '%s' is not a decimal number (%g..%g)", flag, quote(q, s), min, max);
	errno = 0;
	char *end = NULL;
	double v = strtod(s, &end);
	if (*end || end == s)
		return cli_fail("%s: '%s' is not a decimal number (%g..%g)", flag, quote(q, s), min, max);
	if (errno == ERANGE || !isfinite(v) || v < min || v > max)
		return cli_fail("%s: %s is out of range (%g..%g)", flag, quote(q, s), min, max);
	*out = v;
	return 0;
}

int cli_parse_duration_ms(const char *flag, const char *s, int64_t min_ms, int64_t max_ms, int64_t *out)
{
	char q[80];
	if (!s || !*s)
		return cli_fail("%s: a duration is required (e.g. 30, 90s, 15m, 24h)", flag);
	size_t len = strlen(s);
	size_t num_len = len;
	double unit = 1000.0; /* bare numbers are seconds */
	static const struct {
		const char *suffix;
		double ms;
	} units[] = {{"ms", 1.0}, {"s", 1000.0}, {"m", 60000.0}, {"h", 3600000.0}, {"d", 86400000.0}};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t sl = strlen(units[i].suffix);
		if (len > sl && strcmp(s + len - sl, units[i].suffix) == 0) {
			num_len = len - sl;
			unit = units[i].ms;
			break;
		}
	}
	char num[64];
	if (num_len >= sizeof num)
		return cli_fail("%s: '%s' is not a duration (e.g. 30, 90s, 15m, 24h)", flag, quote(q, s));
	memcpy(num, s, num_len);
	num[num_len] = '\0';
	bool digit = false;
	for (const char *p = num; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digit = true;
		else if (*p != '.')
			return cli_fail("%s: '%s' is not a duration (e.g. 30, 90s, 15m, 24h)", flag, quote(q, s));
	}
	char *end = NULL;
	errno = 0;
	double v = strtod(num, &end);
	if (!digit || *end || errno == ERANGE || !isfinite(v))
		return cli_fail("%s: '%s' is not a duration (e.g. 30, 90s, 15m, 24h)", flag, quote(q, s));
	double ms = ceil(v * unit);
	if (ms < (double)min_ms || ms > (double)max_ms)
		return cli_fail("%s: %s is out of range (%.3gs..%.3gs)", flag, quote(q, s), (double)min_ms / 1000.0,
				(double)max_ms / 1000.0);
	*out = (int64_t)ms;
	return 0;
}

void cli_format_secs(char *out, size_t n, int64_t ms)
{
	if (ms % 1000 == 0)
		snprintf(out, n, "%llds", (long long)(ms / 1000));
	else {
		char buf[64];
		snprintf(buf, sizeof buf, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
		size_t len = strlen(buf);
		while (buf[len - 1] == '0')
			buf[--len] = '\0';
		snprintf(out, n, "%ss", buf);
	}
}

static const char *long_name_of(const struct option *longopts, int val)
{
	for (const struct option *o = longopts; o && o->name; o++)
		if (!o->flag && o->val == val)
			return o->name;
	return NULL;
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts, const struct option *longopts,
	       bool *dashdash)
{
	opterr = 0;
	/* optind 0 asks glibc to re-initialise; it then starts at 1. */
	int before = optind ? optind : 1;
	int c = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (c == -1) {
		if (dashdash)
			*dashdash = optind == before + 1 && before < argc && strcmp(argv[before], "--") == 0;
		return -1;
	}
	if (c == '?' || c == ':') {
		char q[80];
		const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
		if (c == ':') {
			const char *ln = long_name_of(longopts, optopt);
			if (optopt > 0 && optopt < 256 && strncmp(arg, "--", 2) != 0)
				cli_usage(cmd, "option -%c needs a value", optopt);
			else if (ln)
				cli_usage(cmd, "option --%s needs a value", ln);
			else
				cli_usage(cmd, "option %s needs a value", quote(q, arg));
		} else if (optopt > 0 && strncmp(arg, "--", 2) != 0) {
			cli_usage(cmd, "unknown option -%c", optopt);
		} else {
			char name[80];
			quote(name, arg);
			name[strcspn(name, "=")] = '\0';
			cli_usage(cmd, "unknown option %s", name);
		}
		return '?';
	}
	return c;
}

void cli_strv_add(cli_strv *sv, const char *s)
{
	if (sv->count + 2 > sv->alloc) {
		sv->alloc = sv->alloc ? sv->alloc * 2 : 8;
		sv->v = xrealloc(sv->v, sv->alloc * sizeof *sv->v);
	}
	sv->v[sv->count++] = s;
	sv->v[sv->count] = NULL;
}

void cli_strv_free(cli_strv *sv)
{
	free(sv->v);
	sv->v = NULL;
	sv->count = sv->alloc = 0;
}

void cli_strv_free_all(cli_strv *sv)
{
	for (size_t i = 0; i < sv->count; i++)
		free((char *)sv->v[i]);
	cli_strv_free(sv);
}

/* Bigger than any file of env entries a spec can hold (1 MiB in all). */
#define ENV_FILE_MAX (4u << 20)

int cli_env_file_read(cli_strv *out, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return cli_fail("--env-file %s: %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0, total = 0, lineno = 0;
	ssize_t n;
	int rc = 0;
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		total += (size_t)n;
		if (total > ENV_FILE_MAX) {
			rc = cli_fail("--env-file %s: larger than %u bytes", path, ENV_FILE_MAX);
			break;
		}
		/* Never the line itself in a message: it may hold a secret. */
		if (memchr(line, '\0', (size_t)n)) {
			rc = cli_fail("--env-file %s: line %zu contains a NUL byte", path, lineno);
			break;
		}
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n > 0 && line[n - 1] == '\r')
			line[--n] = '\0';
		/* docker's format: leading whitespace goes, # starts a comment
		 * line, blank lines are skipped, the rest is KEY=VALUE or KEY
		 * (copied from brig's environment) taken as -e takes it. */
		const char *p = line + strspn(line, " \t");
		if (*p == '\0' || *p == '#')
			continue;
		cli_strv_add(out, xstrdup(p));
	}
	if (rc == 0 && ferror(f))
		rc = cli_fail("--env-file %s: %s", path, strerror(errno));
	free(line);
	fclose(f);
	return rc;
}
