/* secret.c — credentials that never enter (issue 19.3), host side: the
 * placeholders a sandbox sees, the NAME.secrets file (0600, in brig's
 * egress folder) the proxy reads, and brig's authority put inside.
 * A value is read from brig's environment only, never from an argument
 * (which every user of the host sees in the process list), and never
 * reaches a message, label, log line or the ledger. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/egress.h"
#include "brig/spec.h"
#include "egress/egress_internal.h"
#include "sandbox/alive.h"
#include "util/util.h"

/* Zeroes what b holds (it may hold a secret); b may hold nothing yet. */
static void wipe(brig_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->len);
}

#define SECRETS_FILE_MAX (BRIG_SPEC_SECRETS_MAX * (2 * BRIG_EGRESS_SECRET_MAX + 16 * 256 + 256))
#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define SYSTEM_BUNDLE_MAX (8 * 1024 * 1024)

static size_t key_len(const char *secret)
{
	return strcspn(secret, "@");
}

static bool value_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > BRIG_EGRESS_SECRET_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
			return false;
	return true;
}

static atomic_bool env_off;
static __thread const json_t *given;

void brig_egress__secrets_env_off(void)
{
	atomic_store(&env_off, true);
}

void brig_egress__secrets_given(const void *json_values)
{
	given = json_values;
}

/* NAME's value: given with this thread's request, else from brig's
 * environment (unless that is off); NULL when neither has it. */
static const char *env_value(const char *secret)
{
	char key[130];
	snprintf(key, sizeof key, "%.*s", (int)key_len(secret), secret);
	const char *v = json_string_value(json_object_get(given, key));
	if (!v && !atomic_load(&env_off))
		v = getenv(key);
	return v && *v ? v : NULL;
}

int brig_egress__secrets_check(const brig_spec *spec, brig_error **err)
{
	for (size_t i = 0; i < spec->secret_count; i++) {
		const char *s = spec->secrets[i];
		const char *v = env_value(s);
		int kn = (int)key_len(s);
		if (!v && atomic_load(&env_off))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret_values.%.*s: required: through brig serve a secret's value "
					       "comes with the request, never from the server's environment",
					       kn, s);
		if (!v)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret %.*s: not set in brig's environment (its value is read from "
					       "there, never from the command line)",
					       kn, s);
		if (!value_ok(v))
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret %.*s: its value must be 1..%d printable ASCII characters (it "
					       "goes into an HTTP header)",
					       kn, s, BRIG_EGRESS_SECRET_MAX);
	}
	return 0;
}

int brig_egress__placeholders_add(void *json_env, const brig_spec *spec, brig_error **err)
{
	json_t *env = json_env;
	for (size_t i = 0; i < spec->secret_count; i++) {
		unsigned char rnd[16];
		if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
			return brig__error_set(err, BRIG_EIO, errno, "secret: no random bytes for a placeholder");
		char hex[33];
		brig_hex(hex, rnd, sizeof rnd);
		json_array_append_new(env, json_sprintf("%.*s=" BRIG_EGRESS_PLACEHOLDER_PREFIX "%s",
							(int)key_len(spec->secrets[i]), spec->secrets[i], hex));
	}
	return 0;
}

void brig_egress__secrets_free(brig_egress_secret *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++) {
		if (s[i].value) {
			explicit_bzero(s[i].value, strlen(s[i].value));
			free(s[i].value);
		}
		free(s[i].hosts);
	}
	free(s);
}

bool brig_egress__secret_covers(const brig_egress_secret *s, const char *host)
{
	size_t hl = strlen(host);
	for (const char *p = s->hosts; p && *p;) {
		size_t n = strcspn(p, ",");
		if (n == hl && strncasecmp(p, host, n) == 0)
			return true;
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

static int unhex(char *out, const char *in, size_t n)
{
	for (size_t i = 0; i < n; i += 2) {
		int v = 0;
		for (int k = 0; k < 2; k++) {
			char c = in[i + (size_t)k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return -1;
			v = v * 16 + d;
		}
		out[i / 2] = (char)v;
	}
	return 0;
}

int brig_egress__secrets_read(brig_egress_secret **out, size_t *count, const char *name, brig_error **err)
{
	*out = NULL;
	*count = 0;
	cleanup_free char *path = NULL;
	int rc = brig_egress__sandbox_path(&path, name, ".secrets", err);
	if (rc)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return brig__error_set(err, BRIG_EIO, errno, "egress: cannot read %s: %s", path, strerror(errno));
	}
	brig_buf b;
	brig_buf_init(&b, SECRETS_FILE_MAX);
	char chunk[4096];
	ssize_t r;
	bool big = false;
	while ((r = read(fd, chunk, sizeof chunk)) > 0)
		if (brig_buf_add(&b, chunk, (size_t)r)) {
			big = true;
			break;
		}
	close(fd);
	if (r < 0 || big) {
		wipe(&b);
		brig_buf_free(&b);
		return brig__error_set(err, BRIG_EIO, 0, "egress: cannot read %s", path);
	}
	char *text = brig_buf_steal(&b, NULL);
	brig_egress_secret *s = xcalloc(BRIG_SPEC_SECRETS_MAX, sizeof *s);
	size_t n = 0;
	rc = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4];
		char *fs = NULL;
		int k = 0;
		for (char *t = strtok_r(line, " ", &fs); t && k < 4; t = strtok_r(NULL, " ", &fs))
			f[k++] = t;
		size_t vl = k == 4 ? strlen(f[3]) : 0;
		if (k != 4 || n >= BRIG_SPEC_SECRETS_MAX || strlen(f[0]) >= sizeof s[n].name ||
		    strlen(f[1]) >= sizeof s[n].placeholder || vl == 0 || vl % 2 || vl > 2 * BRIG_EGRESS_SECRET_MAX) {
			rc = brig__error_set(err, BRIG_EINVAL, 0, "egress: %s is malformed", path);
			break;
		}
		snprintf(s[n].name, sizeof s[n].name, "%s", f[0]);
		snprintf(s[n].placeholder, sizeof s[n].placeholder, "%s", f[1]);
		s[n].hosts = xstrdup(f[2]);
		s[n].value = xcalloc(1, vl / 2 + 1);
		n++;
		if (unhex(s[n - 1].value, f[3], vl) != 0 || !value_ok(s[n - 1].value)) {
			rc = brig__error_set(err, BRIG_EINVAL, 0, "egress: %s is malformed", path);
			break;
		}
	}
	explicit_bzero(text, strlen(text));
	free(text);
	if (rc) {
		brig_egress__secrets_free(s, n);
		return rc;
	}
	*out = s;
	*count = n;
	return 0;
}

/* The placeholder container env gives NAME ("NAME=brig-placeholder-…"). */
static const char *placeholder_of(json_t *env, const char *secret)
{
	size_t kn = key_len(secret);
	size_t i;
	json_t *v;
	json_array_foreach (env, i, v) {
		const char *e = json_string_value(v);
		if (e && strncmp(e, secret, kn) == 0 && e[kn] == '=' &&
		    strncmp(e + kn + 1, BRIG_EGRESS_PLACEHOLDER_PREFIX, strlen(BRIG_EGRESS_PLACEHOLDER_PREFIX)) == 0 &&
		    strlen(e + kn + 1) < BRIG_EGRESS_PLACEHOLDER_SIZE)
			return e + kn + 1;
	}
	return NULL;
}

/* brig's authority, and the system's bundle with it, into the sandbox. */
static int put_trust(brig_engine *e, const char *cid, brig_error **err)
{
	cleanup_free char *pem = NULL;
	int rc = brig_egress__ca_ensure(&pem, err);
	if (rc)
		return rc;
	brig_buf b;
	brig_buf_init(&b, SYSTEM_BUNDLE_MAX + strlen(pem) + 2);
	int fd = open(SYSTEM_BUNDLE, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char chunk[65536];
		ssize_t r;
		while ((r = read(fd, chunk, sizeof chunk)) > 0)
			if (brig_buf_add(&b, chunk, (size_t)r))
				break;
		close(fd);
		if (b.len && b.data[b.len - 1] != '\n')
			brig_buf_put(&b, "\n", 1);
	}
	brig_buf_puts(&b, pem);
	rc = brig_computer__put_trust(e, cid, pem, strlen(pem), b.data, b.len, err);
	brig_buf_free(&b);
	return rc;
}

int brig_egress__secrets_start(brig_engine *e, const char *cid, const char *name, const brig_spec *spec,
			       brig_error **err)
{
	if (spec->secret_count == 0)
		return 0;
	cleanup_json json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, cid, err);
	if (rc)
		return rc;
	json_t *env = json_object_get(json_object_get(j, "Config"), "Env");
	brig_egress_secret *old = NULL;
	size_t nold = 0;
	if (brig_egress__secrets_read(&old, &nold, name, NULL) != 0)
		nold = 0;
	brig_buf b;
	brig_buf_init(&b, SECRETS_FILE_MAX);
	rc = 0;
	for (size_t i = 0; i < spec->secret_count && rc == 0; i++) {
		const char *s = spec->secrets[i];
		int kn = (int)key_len(s);
		const char *ph = placeholder_of(env, s);
		if (!ph) {
			rc = brig__error_set(err, BRIG_ECONFLICT, 0,
					     "secret %.*s: computer %s holds no placeholder for it (made without "
					     "--secret %.*s?); destroy it and create it again",
					     kn, s, name, kn, s);
			break;
		}
		const char *v = env_value(s);
		/* An adopting brig without the value keeps the one the proxy has,
		 * for the same hosts only: whoever gave it chose where it goes,
		 * and a spec naming other hosts (the spec hash leaves secrets
		 * out, so it adopts) must give the value again. */
		for (size_t k = 0; !v && k < nold; k++)
			if (strlen(old[k].name) == (size_t)kn && strncmp(old[k].name, s, (size_t)kn) == 0 &&
			    strcmp(old[k].placeholder, ph) == 0 && strcmp(old[k].hosts, s + kn + 1) == 0)
				v = old[k].value;
		if (!v || !value_ok(v)) {
			rc = brig_egress__secrets_check(spec, err);
			if (rc == 0)
				rc = brig__error_set(err, BRIG_EINVAL, 0, "secret %.*s: no value", kn, s);
			break;
		}
		brig_buf_putf(&b, "%.*s %s %s ", kn, s, ph, s + kn + 1);
		size_t vl = strlen(v);
		char *hex = xmalloc(2 * vl + 1);
		brig_hex(hex, (const unsigned char *)v, vl);
		brig_buf_puts(&b, hex);
		brig_buf_puts(&b, "\n");
		explicit_bzero(hex, 2 * vl);
		free(hex);
	}
	brig_egress__secrets_free(old, nold);
	cleanup_free char *path = NULL;
	if (rc == 0 && (rc = brig_egress__sandbox_path(&path, name, ".secrets", err)) == 0)
		rc = brig_egress__file_write(path, b.data, b.len, err);
	wipe(&b);
	brig_buf_free(&b);
	if (rc == 0)
		rc = put_trust(e, cid, err);
	return rc;
}
