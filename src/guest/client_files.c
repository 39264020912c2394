/* client_files.c — files over a brig-init relay: stat, list, read, write,
 * mkdir, remove, rename and symlink. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "guest/client.h"

/* ---- files ---- */

static int check_path(const char *path, brig_error **err)
{
	if (!path || path[0] != '/' || strlen(path) > 4096)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "a path in the computer must be absolute (and under 4 KiB)");
	return 0;
}

static json_t *stat_json(const gmsg *m)
{
	json_t *j = json_object();
	json_t *t = brig_guest__gets_json(m, BRIG_GP_F_TYPE);
	json_object_set_new(j, "type", t ? t : json_string("unknown"));
	json_object_set_new(j, "mode", json_integer(brig_guest__geti(m, BRIG_GP_F_MODE, 0) & 07777));
	json_object_set_new(j, "size", json_integer(brig_guest__geti(m, BRIG_GP_F_SIZE, 0)));
	json_object_set_new(j, "mtime_ns", json_integer(brig_guest__geti(m, BRIG_GP_F_MTIME_NS, 0)));
	json_object_set_new(j, "uid", json_integer(brig_guest__geti(m, BRIG_GP_F_UID, -1)));
	json_object_set_new(j, "gid", json_integer(brig_guest__geti(m, BRIG_GP_F_GID, -1)));
	json_t *l = brig_guest__gets_json(m, BRIG_GP_F_LINK);
	if (l)
		json_object_set_new(j, "link", l);
	return j;
}

int brig_guest_stat(brig_guest *g, json_t **out, const char *path, bool nofollow, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_NOFOLLOW, nofollow);
	gmsg m;
	gframe *f = NULL;
	cleanup_free char *op = xasprintf("stat %s", path);
	rc = brig_guest__simple_call(g, &e, BRIG_GP_T_STAT, op, &m, &f, deadline_ms, err);
	if (rc)
		return rc;
	*out = stat_json(&m);
	brig_guest__frame_free(f);
	return 0;
}

int brig_guest_list(brig_guest *g, json_t **out, const char *path, int depth, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (depth < 1 || depth > 64)
		return brig__error_set(err, BRIG_EINVAL, 0, "list depth must be 1..64");
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 60000;
	cleanup_free char *op = xasprintf("list %s", path);
	gwaiter *w = brig_guest__waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_DEPTH, depth);
	rc = brig_guest__send_frame(g, &e, BRIG_GP_T_LIST, w->req, deadline_ms, err);
	json_t *arr = json_array();
	while (!rc) {
		gframe *f = NULL;
		rc = brig_guest__waiter_next(g, w, &f, brig_guest__grace(deadline_ms), -1, err);
		if (rc == BRIG_ETIMEDOUT)
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
		if (rc)
			break;
		gmsg m;
		if (f->type == BRIG_GP_T_LIST_ENTRY) {
			rc = brig_guest__msg_parse(g, f, &m, false, err);
			if (!rc && !(m.shas >> BRIG_GP_F_NAME & 1))
				rc = brig_guest__unexpected(g, f, "LIST (an entry without a name)", err);
			if (!rc && json_array_size(arr) >= 100000)
				rc = brig__error_set(err, BRIG_ETOOBIG, 0, "%s: more than 100000 entries", op);
			if (!rc) {
				json_t *j = stat_json(&m);
				json_object_set_new(j, "name", brig_guest__gets_json(&m, BRIG_GP_F_NAME));
				json_array_append_new(arr, j);
			}
		} else if (f->type == BRIG_GP_T_OK) {
			brig_guest__frame_free(f);
			break;
		} else if (f->type == BRIG_GP_T_ERROR) {
			rc = brig_guest__error_from(g, f, op, err);
		} else {
			rc = brig_guest__unexpected(g, f, "LIST", err);
		}
		brig_guest__frame_free(f);
	}
	brig_guest__waiter_remove(g, w);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

int brig_guest_read(brig_guest *g, const char *path, int64_t offset, int64_t length, brig_engine_data_cb cb,
		    void *payload, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (offset < 0 || length < -1)
		return brig__error_set(err, BRIG_EINVAL, 0, "read: offset and length must not be negative");
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 600000;
	cleanup_free char *op = xasprintf("read %s", path);
	gwaiter *w = brig_guest__waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_OFFSET, offset);
	brig_gp_put_int(&e, BRIG_GP_F_LENGTH, length);
	rc = brig_guest__send_frame(g, &e, BRIG_GP_T_READ, w->req, deadline_ms, err);
	uint64_t got = 0;
	while (!rc) {
		gframe *f = NULL;
		rc = brig_guest__waiter_next(g, w, &f, brig_guest__grace(deadline_ms), -1, err);
		if (rc == BRIG_ETIMEDOUT)
			rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
		if (rc)
			break;
		gmsg m;
		if (f->type == BRIG_GP_T_DATA) {
			rc = brig_guest__msg_parse(g, f, &m, false, err);
			got += m.data_len;
			if (!rc && length >= 0 && got > (uint64_t)length)
				rc = brig_guest__unexpected(g, f, "READ (more bytes than asked for)", err);
			if (!rc && m.data_len && cb) {
				int r = cb((const char *)m.data, m.data_len, payload);
				if (r)
					rc = brig__error_set(err, r, 0, "%s: the receiver gave up", op);
			}
		} else if (f->type == BRIG_GP_T_OK) {
			rc = brig_guest__msg_parse(g, f, &m, false, err);
			if (!rc && brig_guest__has_i(&m, BRIG_GP_F_COUNT) &&
			    (uint64_t)brig_guest__geti(&m, BRIG_GP_F_COUNT, 0) != got)
				rc = brig_guest__unexpected(g, f, "READ (a count that is not what was sent)", err);
			brig_guest__frame_free(f);
			break;
		} else if (f->type == BRIG_GP_T_ERROR) {
			rc = brig_guest__error_from(g, f, op, err);
		} else {
			rc = brig_guest__unexpected(g, f, "READ", err);
		}
		brig_guest__frame_free(f);
	}
	brig_guest__waiter_remove(g, w);
	return rc;
}

int brig_guest_write(brig_guest *g, const char *path, int fd, const void *data, size_t len, unsigned mode, bool parents,
		     int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (!deadline_ms)
		deadline_ms = brig_now_ms() + 600000;
	cleanup_free char *op = xasprintf("write %s", path);
	gwaiter *w = brig_guest__waiter_add(g, false);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_MODE, mode & 07777);
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, parents);
	rc = brig_guest__send_frame(g, &e, BRIG_GP_T_WRITE, w->req, deadline_ms, err);
	char buf[BRIG_GP_MAX_DATA];
	const char *p = data;
	size_t left = fd >= 0 ? 0 : len;
	gframe *f = NULL;
	while (!rc) {
		/* an early ERROR ends the upload */
		pthread_mutex_lock(&g->mu);
		bool answered = w->head != NULL;
		pthread_mutex_unlock(&g->mu);
		if (answered)
			break;
		size_t k;
		const char *chunk;
		if (fd >= 0) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				rc = brig__error_set(err, BRIG_EIO, errno, "%s: reading the source: %s", op,
						     strerror(errno));
				break; /* no WRITE_END: the guest keeps a temporary file, never the target */
			}
			k = (size_t)r;
			chunk = buf;
		} else {
			k = left < BRIG_GP_MAX_DATA ? left : BRIG_GP_MAX_DATA;
			chunk = p;
			p += k;
			left -= k;
		}
		brig_gp_enc_begin(&e);
		if (!k) {
			rc = brig_guest__send_frame(g, &e, BRIG_GP_T_WRITE_END, w->req, deadline_ms, err);
			break;
		}
		brig_gp_put_bytes(&e, BRIG_GP_F_DATA, chunk, k);
		rc = brig_guest__send_frame(g, &e, BRIG_GP_T_DATA, w->req, deadline_ms, err);
	}
	brig_gp_enc_free(&e);
	if (rc == BRIG_ENOTSENT)
		rc = BRIG_EUNCERTAIN; /* the WRITE itself went out */
	if (!rc)
		rc = brig_guest__waiter_next(g, w, &f, brig_guest__grace(deadline_ms), -1, err);
	if (rc == BRIG_ETIMEDOUT)
		rc = brig__error_set(err, BRIG_EUNCERTAIN, 0, "%s: brig-init did not answer in time", op);
	if (!rc && f->type == BRIG_GP_T_ERROR)
		rc = brig_guest__error_from(g, f, op, err);
	else if (!rc && f->type != BRIG_GP_T_OK)
		rc = brig_guest__unexpected(g, f, "WRITE", err);
	brig_guest__frame_free(f);
	brig_guest__waiter_remove(g, w);
	return rc;
}

int brig_guest_mkdir(brig_guest *g, const char *path, unsigned mode, bool parents, int64_t deadline_ms,
		     brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_MODE, mode & 07777);
	brig_gp_put_int(&e, BRIG_GP_F_PARENTS, parents);
	gmsg m;
	cleanup_free char *op = xasprintf("mkdir %s", path);
	return brig_guest__simple_call(g, &e, BRIG_GP_T_MKDIR, op, &m, NULL, deadline_ms, err);
}

int brig_guest_remove(brig_guest *g, const char *path, bool recursive, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_int(&e, BRIG_GP_F_RECURSIVE, recursive);
	gmsg m;
	cleanup_free char *op = xasprintf("remove %s", path);
	return brig_guest__simple_call(g, &e, BRIG_GP_T_REMOVE, op, &m, NULL, deadline_ms, err);
}

int brig_guest_rename(brig_guest *g, const char *from, const char *to, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(from, err);
	if (!rc)
		rc = check_path(to, err);
	if (rc)
		return rc;
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, from);
	brig_gp_put_str(&e, BRIG_GP_F_PATH2, to);
	gmsg m;
	cleanup_free char *op = xasprintf("rename %s", from);
	return brig_guest__simple_call(g, &e, BRIG_GP_T_RENAME, op, &m, NULL, deadline_ms, err);
}

int brig_guest_symlink(brig_guest *g, const char *path, const char *target, int64_t deadline_ms, brig_error **err)
{
	int rc = check_path(path, err);
	if (rc)
		return rc;
	if (!target || !*target || strlen(target) > 4095)
		return brig__error_set(err, BRIG_EINVAL, 0, "symlink %s: give a target of 1..4095 bytes", path);
	brig_gp_enc e = {0};
	brig_gp_enc_begin(&e);
	brig_gp_put_str(&e, BRIG_GP_F_PATH, path);
	brig_gp_put_str(&e, BRIG_GP_F_PATH2, target);
	gmsg m;
	cleanup_free char *op = xasprintf("symlink %s", path);
	return brig_guest__simple_call(g, &e, BRIG_GP_T_SYMLINK, op, &m, NULL, deadline_ms, err);
}
