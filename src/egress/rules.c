/* rules.c — egress rules: parsing, matching, and the per-sandbox rules
 * files (NAME.rules in brig_egress_dir) the proxy reads on each connection. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/egress.h"
#include "egress/egress_internal.h"
#include "util/util.h"

#define RULES_FILE_MAX (BRIG_EGRESS_RULES_MAX * BRIG_EGRESS_RULE_SIZE)

static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

int brig_egress__host_check(char *out, size_t outlen, const char *s, size_t n)
{
	if (n == 0 || n > 253 || n >= outlen)
		return -1;
	size_t label = 0;
	bool alpha = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!host_char(c))
			return -1;
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return -1;
			label = 0;
		} else {
			if ((label == 0 && c == '-') || ++label > 63)
				return -1;
			if (!(c >= '0' && c <= '9'))
				alpha = true;
		}
		out[i] = c;
	}
	if (label == 0 || s[n - 1] == '-')
		return -1;
	out[n] = '\0';
	return alpha ? 0 : 1; /* 1: all digits and dots, an IPv4 literal */
}

int brig_egress_rule_parse(char out[BRIG_EGRESS_RULE_SIZE], const char *rule, brig_error **err)
{
	char q[80];
	if (!rule)
		rule = "";
	snprintf(q, sizeof q, "%.60s%s", rule, strlen(rule) > 60 ? "..." : "");
	for (char *p = q; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	if (strstr(rule, "://") || strchr(rule, '/'))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "egress rule '%s': give a host name (api.example.com), not a URL", q);
	const char *s = rule;
	bool wild = strncmp(s, "*.", 2) == 0;
	if (wild)
		s += 2;
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	long port = 0;
	if (colon) {
		char *end = NULL;
		errno = 0;
		if (!colon[1] || colon[1] < '0' || colon[1] > '9' || strlen(colon + 1) > 5)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "egress rule '%s': the port must be a number from 1 to 65535", q);
		port = strtol(colon + 1, &end, 10);
		if (*end || port < 1 || port > 65535)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "egress rule '%s': the port must be a number from 1 to 65535", q);
	}
	char host[256];
	int h = brig_egress__host_check(host, sizeof host, s, n);
	if (h < 0 || strchr(host, '*'))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "egress rule '%s': must be a host name such as api.example.com, a wildcard "
				       "such as *.example.com, optionally with :PORT",
				       q);
	if (h == 1)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "egress rule '%s': IP addresses are refused; name the host (the proxy "
				       "resolves names itself)",
				       q);
	if (wild && !strchr(host, '.'))
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "egress rule '%s': a wildcard needs a domain of two labels at least "
				       "(*.example.com)",
				       q);
	if (port)
		snprintf(out, BRIG_EGRESS_RULE_SIZE, "%s%s:%ld", wild ? "*." : "", host, port);
	else
		snprintf(out, BRIG_EGRESS_RULE_SIZE, "%s%s", wild ? "*." : "", host);
	return 0;
}

static bool rule_matches(const char *rule, const char *host, int port)
{
	bool wild = strncmp(rule, "*.", 2) == 0;
	const char *r = wild ? rule + 2 : rule;
	const char *colon = strchr(r, ':');
	size_t rn = colon ? (size_t)(colon - r) : strlen(r);
	if (colon) {
		if (atoi(colon + 1) != port)
			return false;
	} else if (port != 443 && port != 80) {
		return false;
	}
	size_t hn = strlen(host);
	if (!wild)
		return hn == rn && strncasecmp(host, r, rn) == 0;
	/* "*.example.com" matches "a.example.com" and "a.b.example.com" only. */
	return hn > rn + 1 && host[hn - rn - 1] == '.' && strncasecmp(host + hn - rn, r, rn) == 0;
}

bool brig_egress_allowed(const char *const *rules, size_t n, const char *host, int port)
{
	if (!host || !*host || port < 1 || port > 65535)
		return false;
	for (size_t i = 0; i < n; i++)
		if (rules[i] && rule_matches(rules[i], host, port))
			return true;
	return false;
}

bool brig_egress__bump_port(const char *const *rules, size_t n, const char *host, int port)
{
	if (port == 443)
		return true;
	for (size_t i = 0; i < n; i++) {
		const char *colon = rules[i] ? strchr(rules[i], ':') : NULL;
		if (colon && rule_matches(rules[i], host, port))
			return true;
	}
	return false;
}

int brig_egress_dir(char **out, brig_error **err)
{
	*out = NULL;
	const char *env = getenv("BRIG_EGRESS_DIR");
	if (env && env[0] == '/') {
		*out = xstrdup(env);
		return 0;
	}
	if (geteuid() == 0) {
		*out = xstrdup("/var/lib/brig/egress");
		return 0;
	}
	const char *xdg = getenv("XDG_DATA_HOME");
	if (xdg && xdg[0] == '/') {
		*out = xasprintf("%s/brig/egress", xdg);
		return 0;
	}
	const char *home = getenv("HOME");
	if (home && home[0] == '/') {
		*out = xasprintf("%s/.local/share/brig/egress", home);
		return 0;
	}
	return brig__error_set(err, BRIG_EINVAL, 0,
			       "no egress folder: neither $XDG_DATA_HOME nor $HOME is an absolute path; set "
			       "BRIG_EGRESS_DIR");
}

/* Container names as Docker allows them; nothing that could leave the folder. */
static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > 128 || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '-'))
			return false;
	}
	return true;
}

int brig_egress__sandbox_path(char **out, const char *name, const char *suffix, brig_error **err)
{
	if (!name_ok(name))
		return brig__error_set(err, BRIG_EINVAL, 0, "egress: bad sandbox name");
	cleanup_free char *dir = NULL;
	int rc = brig_egress_dir(&dir, err);
	if (rc)
		return rc;
	*out = xasprintf("%s/%s%s", dir, name, suffix);
	return 0;
}

static int rules_path(char **out, const char *name, brig_error **err)
{
	return brig_egress__sandbox_path(out, name, ".rules", err);
}

void brig_egress_rules_free(char **rules)
{
	if (!rules)
		return;
	for (char **r = rules; *r; r++)
		free(*r);
	free(rules);
}

int brig_egress_rules_get(char ***out, size_t *count, const char *name, brig_error **err)
{
	*out = NULL;
	if (count)
		*count = 0;
	cleanup_free char *path = NULL;
	int rc = rules_path(&path, name, err);
	if (rc)
		return rc;
	char **rules = xcalloc(BRIG_EGRESS_RULES_MAX + 1, sizeof *rules);
	size_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT) {
			*out = rules;
			return 0;
		}
		brig_egress_rules_free(rules);
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot read %s: %s", path, strerror(errno));
	}
	char *text = xmalloc(RULES_FILE_MAX + 1);
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, text + len, RULES_FILE_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (len == RULES_FILE_MAX)
			break;
	}
	close(fd);
	text[len] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line && n < BRIG_EGRESS_RULES_MAX;
	     line = strtok_r(NULL, "\n", &save)) {
		char canon[BRIG_EGRESS_RULE_SIZE];
		/* A line that does not parse is skipped: it allows nothing. */
		if (brig_egress_rule_parse(canon, line, NULL) == 0)
			rules[n++] = xstrdup(canon);
	}
	free(text);
	*out = rules;
	if (count)
		*count = n;
	return 0;
}

int brig_egress_rules_set(const char *name, const char *const *rules, size_t count, brig_error **err)
{
	if (count > BRIG_EGRESS_RULES_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0, "egress: %zu rules, at most %d", count,
				       BRIG_EGRESS_RULES_MAX);
	cleanup_free char *path = NULL;
	int rc = rules_path(&path, name, err);
	if (rc)
		return rc;
	brig_buf b;
	brig_buf_init(&b, RULES_FILE_MAX + 1);
	for (size_t i = 0; i < count; i++) {
		char canon[BRIG_EGRESS_RULE_SIZE];
		if ((rc = brig_egress_rule_parse(canon, rules[i], err)) != 0) {
			brig_buf_free(&b);
			return rc;
		}
		brig_buf_putf(&b, "%s\n", canon);
	}
	rc = brig_egress__file_write(path, b.data, b.len, err);
	brig_buf_free(&b);
	return rc;
}

int brig_egress__file_read(const char *path, size_t max, char **text, size_t *len, brig_error **err)
{
	*text = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0
				       : brig__error_set(err, BRIG_EIO, errno, "egress: cannot read %s: %s", path,
							 strerror(errno));
	char *t = xmalloc(max + 1);
	size_t n = 0;
	ssize_t r = 0;
	while (n <= max && (r = read(fd, t + n, max + 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += (size_t)r;
	}
	int e = errno;
	close(fd);
	if (r < 0 || n > max) {
		free(t);
		return r < 0 ? brig__error_set(err, BRIG_EIO, e, "egress: cannot read %s: %s", path, strerror(e))
			     : brig__error_set(err, BRIG_ETOOBIG, 0, "egress: %s is longer than %zu bytes", path, max);
	}
	t[n] = '\0';
	*text = t;
	*len = n;
	return 0;
}

int brig_egress__file_write(const char *path, const void *data, size_t len, brig_error **err)
{
	cleanup_free char *dir = xstrndup(path, (size_t)(strrchr(path, '/') - path));
	int rc = brig_mkdir_p(dir, 0700, "the egress folder", err);
	if (rc)
		return rc;
	cleanup_free char *tmp = xasprintf("%s.%ld.tmp", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot write %s: %s", tmp, strerror(errno));
	int w = brig_write_all(fd, data, len);
	if (w != 0 || fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return brig__error_set(err, BRIG_EIO, e, "egress: cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

int brig_egress__rules_remove(const char *name)
{
	cleanup_free char *path = NULL;
	if (rules_path(&path, name, NULL) != 0)
		return -1;
	int rc = unlink(path) == 0 || errno == ENOENT ? 0 : -1;
	static const char *const more[] = {".secrets", ".store"};
	for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
		cleanup_free char *p = NULL;
		if (brig_egress__sandbox_path(&p, name, more[i], NULL) != 0)
			return -1;
		if (unlink(p) != 0 && errno != ENOENT)
			rc = -1;
	}
	return rc;
}
