/* volume.c — the read-only volume that carries brig-init into every
 * computer: the binary embedded in libbrig, its name, and filling it once. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "brig/spec.h"
#include "engine/facts.h"
#include "guest/host.h"
#include "guest/proto.h"
#include "util/sha256.h"

/* The program, put in .rodata by the assembler from the file CMake built
 * (BRIG_INIT_BIN: build/guest/brig-init). An installed libbrig carries it:
 * no file to find at run time. */
#ifdef BRIG_INIT_BIN
__asm__(".section .rodata.brig_init,\"a\",@progbits\n"
	".balign 16\n"
	".globl brig__init_blob_start\n"
	".hidden brig__init_blob_start\n"
	"brig__init_blob_start:\n"
	".incbin \"" BRIG_INIT_BIN "\"\n"
	".globl brig__init_blob_end\n"
	".hidden brig__init_blob_end\n"
	"brig__init_blob_end:\n"
	".previous\n");
extern const unsigned char brig__init_blob_start[] __attribute__((visibility("hidden")));
extern const unsigned char brig__init_blob_end[] __attribute__((visibility("hidden")));
#endif

void brig_guest__binary(const unsigned char **data, size_t *len)
{
#ifdef BRIG_INIT_BIN
	*data = brig__init_blob_start;
	*len = (size_t)(brig__init_blob_end - brig__init_blob_start);
#else
	*data = NULL;
	*len = 0;
#endif
}

static pthread_once_t name_once = PTHREAD_ONCE_INIT;
static char volume_name[32];
static char readable_name[34];
static char full_hash[65];

static void name_init(void)
{
	const unsigned char *d;
	size_t n;
	brig_guest__binary(&d, &n);
	if (!n)
		return;
	unsigned char h[BRIG_SHA256_SIZE];
	brig_sha256(h, d, n);
	brig_hex(full_hash, h, sizeof h);
	snprintf(volume_name, sizeof volume_name, "brig-init-%.16s", full_hash);
	snprintf(readable_name, sizeof readable_name, "brig-init-%.16s-r", full_hash);
}

const char *brig_guest__volume_name(void)
{
	pthread_once(&name_once, name_init);
	return volume_name[0] ? volume_name : NULL;
}

const char *brig_guest__volume_name_readable(void)
{
	pthread_once(&name_once, name_init);
	return readable_name[0] ? readable_name : NULL;
}

const char *brig_guest__init_hash(void)
{
	pthread_once(&name_once, name_init);
	return full_hash[0] ? full_hash + 0 : NULL;
}

/* ---- a one-file tar, by hand (no libarchive for 1.5 KiB of headers) ---- */

static void octal(char *field, size_t width, uint64_t v)
{
	field[width - 1] = '\0';
	for (size_t i = width - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

static unsigned char *one_file_tar(const unsigned char *data, size_t len, unsigned mode, size_t *out_len)
{
	size_t pad = (512 - len % 512) % 512;
	size_t total = 512 + len + pad + 1024;
	unsigned char *t = xcalloc(1, total);
	char *h = (char *)t;
	memcpy(h, "brig-init", 9);
	/* execute-only (0511): a program its user cannot read is non-dumpable
	 * from execve on, so the sandbox (the same uid) cannot ptrace a new
	 * relay in the moment before it calls PR_SET_DUMPABLE itself. gVisor
	 * gets 0555 (see brig_container_opts.init_readable). */
	octal(h + 100, 8, mode);
	octal(h + 108, 8, 0);    /* uid */
	octal(h + 116, 8, 0);    /* gid */
	octal(h + 124, 12, len);
	octal(h + 136, 12, 0); /* mtime */
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	h[155] = ' ';
	memcpy(t + 512, data, len);
	*out_len = total;
	return t;
}

/* What GET /.brig/brig-init brought: the first entry's header and data,
 * compared with the embedded program as it streams (never held whole). */
typedef struct verify {
	const unsigned char *want;
	size_t want_len;
	unsigned char hdr[512];
	size_t hdr_have;
	size_t data_have;
	unsigned mode;
	uint64_t uid; /* the owner the daemon reported */
	bool mismatch;
	bool header_ok;
} verify;

static uint64_t parse_octal(const char *f, size_t w)
{
	uint64_t v = 0;
	for (size_t i = 0; i < w && f[i]; i++) {
		if (f[i] == ' ')
			continue;
		if (f[i] < '0' || f[i] > '7')
			return UINT64_MAX;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	return v;
}

static int verify_cb(const char *data, size_t len, void *payload)
{
	verify *v = payload;
	while (len && !v->mismatch) {
		if (v->hdr_have < 512) {
			size_t k = 512 - v->hdr_have < len ? 512 - v->hdr_have : len;
			memcpy(v->hdr + v->hdr_have, data, k);
			v->hdr_have += k;
			data += k;
			len -= k;
			if (v->hdr_have == 512) {
				const char *h = (const char *)v->hdr;
				v->header_ok =
					(h[156] == '0' || h[156] == '\0') && parse_octal(h + 124, 12) == v->want_len &&
					(parse_octal(h + 100, 8) & 07777) == v->mode;
				v->uid = parse_octal(h + 108, 8);
				if (!v->header_ok)
					v->mismatch = true;
			}
			continue;
		}
		size_t left = v->want_len - v->data_have;
		size_t k = len < left ? len : left;
		if (k && memcmp(v->want + v->data_have, data, k) != 0)
			v->mismatch = true;
		v->data_have += k;
		data += k;
		len -= k;
		if (v->data_have == v->want_len)
			break; /* padding and the end blocks follow */
	}
	return 0;
}

static void set_shift(brig_engine *e, uint32_t uid, uint32_t gid)
{
	brig_engine_facts *f = brig_engine__facts(e);
	pthread_mutex_lock(&f->mu);
	f->shift = (brig_idshift){uid, gid};
	f->shift_known = true;
	pthread_mutex_unlock(&f->mu);
}

/* The marker's BRIG_LABEL_USERNS ("UID:GID", written by a brig that asked
 * the daemon); a marker without it teaches nothing. */
static void learn_shift(brig_engine *e, const json_t *marker)
{
	const char *s = json_string_value(json_object_get(json_object_get(marker, "Labels"), BRIG_LABEL_USERNS));
	unsigned long u, g;
	char end;
	if (s && sscanf(s, "%lu:%lu%c", &u, &g, &end) == 2 && u <= UINT32_MAX && g <= UINT32_MAX)
		set_shift(e, (uint32_t)u, (uint32_t)g);
}

/* 0 when the container's /.brig/brig-init is the embedded program, mode
 * mode, owned by root; BRIG_ENOTFOUND when absent; BRIG_ECORRUPT when
 * different. */
static int check_copy(brig_engine *e, const char *cid, const unsigned char *d, size_t n, unsigned mode,
		      const char *vname, brig_error **err)
{
	verify v = {.want = d, .want_len = n, .mode = mode};
	int rc = brig_engine_archive_get(e, cid, BRIG_GP_INIT_PATH, NULL, verify_cb, &v, err);
	if (rc)
		return rc;
	if (v.mismatch || !v.header_ok || v.data_have != n)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "%s in volume %s is not this brig's brig-init",
				       BRIG_GP_INIT_PATH, vname);
	if (v.uid == 0) {
		set_shift(e, 0, 0); /* root is root: the daemon does not remap */
		return 0;
	}
	/* a daemon with userns-remap reports the host uid of the container's
	 * root: asked only then (/info forks runc on the daemon's side) */
	uint32_t root_uid, root_gid;
	rc = brig_engine_userns_root(e, &root_uid, &root_gid, err);
	if (rc)
		return rc;
	if (root_uid == 0 || v.uid != root_uid)
		return brig__error_set(err, BRIG_ECORRUPT, 0, "%s in volume %s is not owned by root",
				       BRIG_GP_INIT_PATH, vname);
	set_shift(e, root_uid, root_gid);
	return 0;
}

static bool ensured(brig_engine *e, bool readable)
{
	brig_engine_facts *f = brig_engine__facts(e);
	pthread_mutex_lock(&f->mu);
	bool done = f->init_ok[readable];
	pthread_mutex_unlock(&f->mu);
	return done;
}

static void mark_ensured(brig_engine *e, bool readable)
{
	brig_engine_facts *f = brig_engine__facts(e);
	pthread_mutex_lock(&f->mu);
	f->init_ok[readable] = true;
	pthread_mutex_unlock(&f->mu);
}

bool brig_guest__userns_shift_known(brig_engine *e, brig_idshift *out)
{
	brig_engine_facts *f = brig_engine__facts(e);
	pthread_mutex_lock(&f->mu);
	bool known = f->shift_known;
	*out = f->shift;
	pthread_mutex_unlock(&f->mu);
	return known;
}

int brig_guest__userns_shift(brig_engine *e, brig_idshift *out, brig_error **err)
{
	if (brig_guest__userns_shift_known(e, out))
		return 0;
	uint32_t u, g;
	int rc = brig_engine_userns_root(e, &u, &g, err);
	if (rc)
		return brig__error_prefix(err, rc, "user namespace remapping");
	set_shift(e, u, g);
	*out = (brig_idshift){u, g};
	return 0;
}

int brig_guest__volume_ensure(brig_engine *e, const char *image, brig_error **err)
{
	return brig_guest__volume_ensure_mode(e, image, false, err);
}

int brig_guest__volume_ensure_mode(brig_engine *e, const char *image, bool readable, brig_error **err)
{
	const unsigned char *d;
	size_t n;
	brig_guest__binary(&d, &n);
	const char *vname = readable ? brig_guest__volume_name_readable() : brig_guest__volume_name();
	unsigned mode = readable ? 0555 : 0511;
	if (!n || !vname)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "this build of brig carries no brig-init");
	if (ensured(e, readable))
		return 0;

	cleanup_json json_t *vol = NULL;
	cleanup_json json_t *vspec =
		json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "Name", vname, "Driver", "local", "Labels",
			  BRIG_LABEL_MANAGED, "1", BRIG_LABEL_KIND, "init", BRIG_LABEL_INIT, brig_guest__init_hash());
	int rc = brig_engine_volume_create(e, &vol, vspec, err);
	if (rc)
		return brig__error_prefix(err, rc, "create volume %s", vname);

	/* The filler's name is the lock: one filler per volume at a time. A
	 * filler whose brig died stays "created"; brig gc removes it. */
	char fname[64];
	snprintf(fname, sizeof fname, "%s-fill", vname);
	cleanup_json json_t *body =
		json_pack("{s:s, s:[s], s:s, s:{s:s, s:s, s:s}, s:b, s:{s:[{s:s, s:s, s:s, s:b}], s:b, s:s}}", "Image",
			  image, "Entrypoint", "/.brig/brig-init", "User", "0:0", "Labels", BRIG_LABEL_MANAGED, "1",
			  BRIG_LABEL_KIND, "init", BRIG_LABEL_INIT, brig_guest__init_hash(), "NetworkDisabled", 1,
			  "HostConfig", "Mounts", "Type", "volume", "Source", vname, "Target", BRIG_GP_MOUNT,
			  "ReadOnly", 0, "AutoRemove", 0, "NetworkMode", "none");
	cleanup_free char *cid = NULL;
	int64_t give_up = brig_now_ms() + 60000;
	int64_t stale_by = brig_now_ms() + 20000;
	for (;;) {
		rc = brig_engine_container_create(e, &cid, fname, body, err);
		if (rc == BRIG_EUNCERTAIN || rc == BRIG_EPROTO) {
			/* The answer was lost: a filler of that name is this call's
			 * (or a racer's, equally fit to fill through). */
			json_t *j = NULL;
			if (brig_engine_container_inspect(e, &j, fname, NULL) == 0) {
				free(cid);
				cid = xstrdup(json_string_value(json_object_get(j, "Id")));
				brig__error_clear(err);
				rc = 0;
			}
			json_decref(j);
			break;
		}
		if (rc != BRIG_ECONFLICT)
			break;
		/* another brig is filling it: wait for it to finish. A fill
		 * takes well under a second; a filler still there after 20 s
		 * was left by a brig that died (or lost its answer): remove it. */
		if (brig_now_ms() > stale_by) {
			brig_engine_container_remove(e, fname, true, false, NULL);
			stale_by = brig_now_ms() + 20000;
		}
		if (brig_now_ms() > give_up)
			return brig__error_prefix(err, rc,
						  "fill volume %s: container %s holds the lock for over a minute "
						  "(remove it if no brig is running: `docker rm -f %s`)",
						  vname, fname, fname);
		brig__error_clear(err);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (rc)
		return brig__error_prefix(err, rc, "fill volume %s", vname);
	rc = check_copy(e, cid, d, n, mode, vname, err);
	if (rc == BRIG_ENOTFOUND || rc == BRIG_ECORRUPT) {
		brig__error_clear(err);
		size_t tlen = 0;
		cleanup_free unsigned char *tar = one_file_tar(d, n, mode, &tlen);
		rc = brig_engine_archive_put_buf(e, cid, BRIG_GP_MOUNT, tar, tlen, err);
		if (!rc)
			rc = check_copy(e, cid, d, n, mode, vname, err);
	}
	brig_engine_container_remove(e, cid, true, false, NULL);
	if (rc)
		return brig__error_prefix(err, rc, "fill volume %s", vname);
	if (readable) {
		/* no marker: runs (the marker's readers) take the execute-only copy */
		mark_ensured(e, true);
		return 0;
	}
	mark_ensured(e, false);
	brig_guest__volume_mark(e);
	return 0;
}

/* The marker "<volume>-ok": an empty volume made only after this build's
 * copy was seen whole (a fill's byte-for-byte check, or a run's HEAD), so
 * one volume inspect tells a later process the copy can be trusted. */
static char *marker_name(void)
{
	return xasprintf("%s-ok", brig_guest__volume_name());
}

void brig_guest__volume_mark(brig_engine *e)
{
	cleanup_free char *m = marker_name();
	cleanup_json json_t *spec =
		json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "Name", m, "Driver", "local", "Labels", BRIG_LABEL_MANAGED,
			  "1", BRIG_LABEL_KIND, "init", BRIG_LABEL_INIT, brig_guest__init_hash());
	brig_idshift sh;
	if (brig_guest__userns_shift(e, &sh, NULL) == 0) {
		char v[32];
		snprintf(v, sizeof v, "%" PRIu32 ":%" PRIu32, sh.uid, sh.gid);
		json_object_set_new(json_object_get(spec, "Labels"), BRIG_LABEL_USERNS, json_string(v));
	}
	json_t *v = NULL;
	if (brig_engine_volume_create(e, &v, spec, NULL) == 0)
		json_decref(v);
}

void brig_guest__volume_distrust(brig_engine *e)
{
	brig_guest__volume_forget(e);
	cleanup_free char *m = marker_name();
	brig_engine_volume_remove(e, m, false, NULL);
}

/* A run pays for brig-init per process (each `brig run` is one), so it does
 * not fill through a container of its own: the marker, when present, says
 * the copy was seen whole; else a volume carrying this brig's label is
 * taken as filled and the run's own (created, not yet started) container
 * shows whether its copy is whole (*check: brig_guest__volume_check). */
int brig_guest__volume_quick(brig_engine *e, const char *image, bool *check, brig_error **err)
{
	*check = false;
	const char *vname = brig_guest__volume_name();
	if (!vname)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "this build of brig carries no brig-init");
	if (ensured(e, false))
		return 0;
	cleanup_free char *m = marker_name();
	cleanup_json json_t *mv = NULL;
	if (brig_engine_volume_inspect(e, &mv, m, NULL) == 0) {
		const char *h = json_string_value(json_object_get(json_object_get(mv, "Labels"), BRIG_LABEL_INIT));
		if (h && strcmp(h, brig_guest__init_hash()) == 0) {
			learn_shift(e, mv);
			mark_ensured(e, false);
			return 0;
		}
	}
	cleanup_json json_t *v = NULL;
	if (brig_engine_volume_inspect(e, &v, vname, NULL) == 0) {
		const char *h = json_string_value(json_object_get(json_object_get(v, "Labels"), BRIG_LABEL_INIT));
		if (h && strcmp(h, brig_guest__init_hash()) == 0) {
			*check = true;
			return 0;
		}
	}
	return brig_guest__volume_ensure(e, image, err);
}

int brig_guest__volume_check(brig_engine *e, const char *cid, brig_error **err)
{
	const unsigned char *d;
	size_t n;
	brig_guest__binary(&d, &n);
	/* Byte for byte (the program is ~100 KB: one archive GET): a copy of
	 * the right size and mode but other bytes passed a HEAD, failed every
	 * start, and was trusted again by the next run. */
	int rc = check_copy(e, cid, d, n, 0511, brig_guest__volume_name(), err);
	if (rc)
		return rc;
	/* seen whole: later runs (through this engine handle, and through the
	 * marker of any process) need not look again */
	mark_ensured(e, false);
	brig_guest__volume_mark(e);
	return 0;
}

void brig_guest__volume_forget(brig_engine *e)
{
	brig_engine_facts *f = brig_engine__facts(e);
	pthread_mutex_lock(&f->mu);
	f->init_ok[0] = f->init_ok[1] = false;
	pthread_mutex_unlock(&f->mu);
}
