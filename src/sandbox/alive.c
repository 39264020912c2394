/* alive.c — whether a computer still holds the files brig gave it: a
 * marker, named after the container's start time, that brig puts into
 * /runtime when it starts a computer it created. A container that was
 * stopped and started again (its tmpfs volumes emptied) has another start
 * time and no such marker. */
#include <stdio.h>
#include <string.h>

#include "brig/sandbox.h"
#include "sandbox/alive.h"
#include "util/util.h"

#define MARK_DIR ".brig"
#define MARK_PREFIX "started-"

/* The marker's path relative to /runtime, from State.StartedAt (untrusted
 * daemon text: anything but [0-9A-Za-z.:-] becomes '_', and it is cut). */
static void marker_name(char *out, size_t n, const char *started_at)
{
	int k = snprintf(out, n, MARK_DIR "/" MARK_PREFIX);
	for (const char *p = started_at; *p && (size_t)k + 1 < n && k < 96; p++) {
		char c = *p;
		bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
			  c == ':' || c == '-';
		out[k++] = ok ? c : '_';
	}
	out[k] = '\0';
}

/* A numeric field: octal, or past width - 1 octal digits GNU's base-256
 * (0x80, then big-endian bytes), which Docker's tar reader takes — a uid
 * above 2097151 needs it. */
static void octal(char *field, size_t width, unsigned long long v)
{
	unsigned long long max = (1ULL << (3 * (width - 1))) - 1;
	if (v > max) {
		memset(field, 0, width);
		field[0] = (char)0x80;
		for (size_t i = width - 1; i > 0 && v; i--, v >>= 8)
			field[i] = (char)(v & 0xff);
		return;
	}
	snprintf(field, width, "%0*llo", (int)width - 1, v & max);
}

/* One ustar header block of an entry owned by uid:gid. */
static void ustar_header_owned(unsigned char *h, const char *name, char type, unsigned mode, uint32_t uid, uint32_t gid,
			       size_t size)
{
	memset(h, 0, 512);
	memcpy(h, name, strlen(name)); /* names here are under 100 bytes */
	octal((char *)h + 100, 8, mode);
	octal((char *)h + 108, 8, uid);
	octal((char *)h + 116, 8, gid);
	octal((char *)h + 124, 12, size);
	octal((char *)h + 136, 12, (unsigned long long)brig_wall_s());
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* One ustar header block for a root-owned entry. */
static void ustar_header(unsigned char *h, const char *name, char type, unsigned mode)
{
	ustar_header_owned(h, name, type, mode, 0, 0, 0);
}

static int started_at(brig_engine *e, const char *ref, char **id, char **status, char **started, brig_error **err)
{
	cleanup_json json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, ref, err);
	if (rc)
		return rc;
	json_t *st = json_object_get(j, "State");
	const char *s = json_string_value(json_object_get(st, "StartedAt"));
	const char *x = json_string_value(json_object_get(st, "Status"));
	const char *i = json_string_value(json_object_get(j, "Id"));
	if (!s || !x || !i)
		return brig__error_set(err, BRIG_EPROTO, 0, "inspect of %s: no State.StartedAt, State.Status or Id", ref);
	*id = xstrdup(i);
	*status = xstrdup(x);
	*started = xstrdup(s);
	return 0;
}

int brig_computer__mark_started(brig_engine *e, const char *ref, brig_error **err)
{
	cleanup_free char *id = NULL, *status = NULL, *started = NULL;
	int rc = started_at(e, ref, &id, &status, &started, err);
	if (rc)
		return rc;
	char name[128];
	marker_name(name, sizeof name, started);
	/* A root-owned directory: the sandboxed user can neither delete the
	 * marker nor write one of its own into it. */
	unsigned char tar[512 * 5];
	memset(tar, 0, sizeof tar);
	ustar_header(tar, MARK_DIR "/", '5', 0755);
	ustar_header(tar + 512, name, '0', 0444);
	rc = brig_engine_archive_put_buf(e, id, "/runtime", tar, sizeof tar, err);
	return rc ? brig__error_prefix(err, rc, "mark computer %s as started", ref) : 0;
}

int brig_computer_check_files(brig_engine *e, const char *ref, bool *lost, char **why, brig_error **err)
{
	*lost = false;
	*why = NULL;
	cleanup_free char *id = NULL, *status = NULL, *started = NULL;
	int rc = started_at(e, ref, &id, &status, &started, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		*lost = true;
		*why = xstrdup("was removed");
		return 0;
	}
	if (rc)
		return rc;
	if (strcmp(status, "running") != 0 && strcmp(status, "paused") != 0) {
		*lost = true;
		*why = xasprintf("was stopped (it is %s)", status);
		return 0;
	}
	char name[128];
	marker_name(name, sizeof name, started);
	cleanup_free char *path = xasprintf("/runtime/%s", name);
	json_t *st = NULL;
	rc = brig_engine_archive_stat(e, &st, id, path, err);
	if (st)
		json_decref(st);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		*lost = true;
		*why = xstrdup("was restarted since brig started it (its /workspace and /runtime were emptied)");
		return 0;
	}
	return rc;
}

int brig_computer__put_env(brig_engine *e, const char *ref, const brig_spec *spec, brig_error **err)
{
	size_t len = 0, n = 0;
	for (size_t i = 0; i < spec->env_count; i++)
		if (!brig_env_is_credential(spec->env[i])) {
			len += strlen(spec->env[i]) + 1;
			n++;
		}
	if (n == 0)
		return 0;
	cleanup_json json_t *j = NULL;
	int rc = brig_engine_container_inspect(e, &j, ref, err);
	if (rc)
		return brig__error_prefix(err, rc, "env of computer %s", ref);
	const char *id = json_string_value(json_object_get(j, "Id"));
	json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
	if (!json_string_value(json_object_get(labels, BRIG_LABEL_INIT)))
		return 0; /* made before brig-init: its env is in its configuration */
	if (!id)
		return brig__error_set(err, BRIG_EPROTO, 0, "inspect of %s: no Id", ref);
	uint32_t uid = 1000, gid = 1000;
	if (sscanf(spec->user, "%u:%u", &uid, &gid) != 2) /* validated: cannot happen */
		return brig__error_set(err, BRIG_EINVAL, 0, "user: must be uid:gid");
	/* .brig/ root-owned as the marker's, the file the user's and 0400:
	 * brig-init (the user) reads it, the sandbox cannot swap it for a link. */
	size_t blocks = 2 + (len + 511) / 512 + 2;
	unsigned char *tar = xcalloc(blocks, 512);
	ustar_header(tar, MARK_DIR "/", '5', 0755);
	ustar_header_owned(tar + 512, MARK_DIR "/env", '0', 0400, uid, gid, len);
	unsigned char *p = tar + 1024;
	for (size_t i = 0; i < spec->env_count; i++) {
		if (brig_env_is_credential(spec->env[i]))
			continue;
		size_t l = strlen(spec->env[i]);
		memcpy(p, spec->env[i], l);
		p[l] = '\n';
		p += l + 1;
	}
	rc = brig_engine_archive_put_buf(e, id, "/runtime", tar, blocks * 512, err);
	explicit_bzero(tar, blocks * 512);
	free(tar);
	return rc ? brig__error_prefix(err, rc, "put the env of computer %s", ref) : 0;
}

int brig_computer__put_trust(brig_engine *e, const char *id, const char *ca, size_t ca_len, const char *bundle,
			     size_t bundle_len, brig_error **err)
{
	/* Root-owned 0444 in root-owned .brig/: the sandbox reads them and
	 * can neither change nor replace them. */
	size_t blocks = 1 + 1 + (ca_len + 511) / 512 + 1 + (bundle_len + 511) / 512 + 2;
	unsigned char *tar = xcalloc(blocks, 512);
	unsigned char *p = tar;
	ustar_header(p, MARK_DIR "/", '5', 0755);
	p += 512;
	ustar_header_owned(p, MARK_DIR "/ca.pem", '0', 0444, 0, 0, ca_len);
	memcpy(p + 512, ca, ca_len);
	p += 512 + (ca_len + 511) / 512 * 512;
	ustar_header_owned(p, MARK_DIR "/ca-bundle.pem", '0', 0444, 0, 0, bundle_len);
	memcpy(p + 512, bundle, bundle_len);
	int rc = brig_engine_archive_put_buf(e, id, "/runtime", tar, blocks * 512, err);
	free(tar);
	return rc ? brig__error_prefix(err, rc, "put brig's certificate authority into %s", id) : 0;
}
