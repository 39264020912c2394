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

static void octal(char *field, size_t width, unsigned long long v)
{
	snprintf(field, width, "%0*llo", (int)width - 1, v);
}

/* One ustar header block for a root-owned entry. */
static void ustar_header(unsigned char *h, const char *name, char type, unsigned mode)
{
	memset(h, 0, 512);
	memcpy(h, name, strlen(name)); /* names here are under 100 bytes */
	octal((char *)h + 100, 8, mode);
	octal((char *)h + 108, 8, 0);
	octal((char *)h + 116, 8, 0);
	octal((char *)h + 124, 12, 0);
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
