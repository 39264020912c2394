/* run.c — disposable runs: pin the image, create a fresh self-ending
 * container, copy inputs in read-only, run one command under a deadline,
 * freeze, copy /outbox out safely, remove everything. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "brig/egress.h"
#include "brig/guest.h"
#include "brig/run.h"
#include "egress/egress_internal.h"
#include "guest/host.h"
#include "guest/proto.h"
#include "sandbox/capture.h"
#include "sandbox/internal.h"
#include "sandbox/oom.h"
#include "sandbox/outdir.h"
#include "tar/tar.h"
#include "util/util.h"

/* Time the container stays alive past the command's deadline, for copying
 * inputs in and outputs out (at a pessimistic 50 MB/s) plus a margin; after
 * it the container ends itself even if brig is gone. */
static int64_t run_grace_s(int64_t in_mb, int64_t out_mb) { return 10 + (in_mb + out_mb) / 50; }

void brig_run_result_clear(brig_run_result *r)
{
	if (!r)
		return;
	brig_exec_result_clear(&r->exec);
	free(r->image_id);
	free(r->container);
	for (size_t i = 0; i < r->output_count; i++)
		free(r->outputs[i]);
	free(r->outputs);
	memset(r, 0, sizeof *r);
}

json_t *brig_run_result_to_json(const brig_run_result *r)
{
	json_t *j = brig_exec_result_to_json(&r->exec);
	json_t *outs = json_array();
	for (size_t i = 0; i < r->output_count; i++) {
		json_t *s = json_string(r->outputs[i]);
		json_array_append_new(outs, s ? s : json_string("(name is not UTF-8)"));
	}
	json_object_set_new(j, "image_id", r->image_id ? json_string(r->image_id) : json_null());
	json_object_set_new(j, "container", r->container ? json_string(r->container) : json_null());
	json_object_set_new(j, "durations_ms",
			    json_pack("{s:I, s:I, s:I, s:I, s:I}", "create", (json_int_t)r->create_ms, "copy_in",
				      (json_int_t)r->copy_in_ms, "run", (json_int_t)r->run_ms, "copy_out",
				      (json_int_t)r->copy_out_ms, "total", (json_int_t)r->total_ms));
	json_object_set_new(j, "outputs", outs);
	json_object_set_new(j, "output_bytes", json_integer((json_int_t)r->output_bytes));
	json_object_set_new(j, "oom_killed", json_boolean(r->oom_killed));
	return j;
}

static void run_id(char out[25])
{
	unsigned char b[12];
	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
		int64_t t = brig_now_ms() ^ ((int64_t)getpid() << 20);
		memcpy(b, &t, sizeof t);
		memset(b + 8, 0x5a, 4);
	}
	brig_hex(out, b, sizeof b);
}

/* Sum of the sizes under the inputs, to size /inbox (links not followed). */
static _Thread_local uint64_t walk_total;

static int walk_add(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_F)
		walk_total += ((uint64_t)st->st_size + 4095) & ~(uint64_t)4095; /* tmpfs charges whole pages */
	else
		walk_total += 4096;
	return 0;
}

static int input_bytes(const char *const *inputs, size_t n, uint64_t *total, brig_error **err)
{
	*total = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (lstat(inputs[i], &st) < 0)
			return brig__error_set(err, BRIG_EINVAL, errno, "--in %s: %s", inputs[i], strerror(errno));
		walk_total = 0;
		if (S_ISDIR(st.st_mode)) {
			if (nftw(inputs[i], walk_add, 16, FTW_PHYS) != 0)
				return brig__error_set(err, BRIG_EINVAL, errno, "--in %s: cannot read it: %s",
						       inputs[i], strerror(errno));
		} else {
			walk_total = ((uint64_t)st.st_size + 4095) & ~(uint64_t)4095;
		}
		*total += walk_total;
	}
	return 0;
}

static void on_output_entry(const char *path, int type, uint64_t size, void *payload)
{
	brig_run_result *r = payload;
	/* up to 100 000 entries: the capacity doubles (it is implied, the next
	 * power of two from 16), so the copies stay linear in the count */
	size_t n = r->output_count;
	if (n < 16 ? n == 0 : (n & (n - 1)) == 0)
		r->outputs = xrealloc(r->outputs, (n < 16 ? 16 : 2 * n) * sizeof *r->outputs);
	r->outputs[r->output_count++] = xstrdup(path);
	r->output_bytes += size;
}

int brig_sandbox__inputs_tar(brig_tar_builder **out, const char *const *inputs, size_t n, brig_error **err)
{
	*out = NULL;
	uint64_t total = 0;
	int rc = input_bytes(inputs, n, &total, err);
	if (rc)
		return rc;
	brig_tar_build_opts bo = {.version = BRIG_TAR_BUILD_OPTS_VERSION,
				     .uid = 0,
				     .gid = 0,
				     .mode_mask = 0555, /* read-only to the command */
				     .skip_special = true};
	brig_tar_builder *b = NULL;
	rc = brig_tar_builder_new(&b, &bo, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		cleanup_free char *copy = xstrdup(inputs[i]);
		size_t len = strlen(copy);
		while (len > 1 && copy[len - 1] == '/')
			copy[--len] = '\0';
		const char *base = basename(copy);
		if (!*base || strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
			rc = brig__error_set(err, BRIG_EINVAL, 0, "--in %s: give a file or directory with a name",
					     inputs[i]);
		else
			rc = brig_tar_builder_add_path(b, inputs[i], base, err);
	}
	if (rc)
		brig_tar_builder_free(b);
	else
		*out = b;
	return rc;
}

static int copy_in(brig_engine *e, const char *id, const brig_run_opts *o, brig_error **err)
{
	brig_tar_builder *b = NULL;
	int rc = brig_sandbox__inputs_tar(&b, o->inputs, o->input_count, err);
	if (rc == 0)
		rc = brig_engine_archive_put(e, id, "/inbox", brig_tar_builder_reader, b, err);
	brig_tar_builder_free(b);
	return rc ? brig__error_prefix(err, rc, "copy inputs in") : 0;
}

/* Extracts /outbox into a fresh directory beside --out and moves it into
 * place only when the whole archive passed: a refused copy leaves --out as
 * it was (see brig_run in run.h). */
static int copy_out(brig_engine *e, const char *id, const brig_run_opts *o, int64_t out_mb, brig_run_result *res,
		    brig_error **err)
{
	cleanup_free char *tmp = NULL;
	int rc = brig_sandbox__outdir_begin(&tmp, o->out_dir, err);
	if (rc)
		return rc;
	brig_tar_extract_opts xo = BRIG_TAR_EXTRACT_OPTS_INIT;
	xo.strip_components = 1; /* the archive's root is "outbox/" */
	xo.allow_symlinks = true;
	xo.allow_hardlinks = true;
	xo.on_entry = on_output_entry;
	xo.payload = res;
	xo.limits.max_total_bytes = (uint64_t)out_mb << 20;
	xo.limits.max_entries = 100000;
	brig_tar_extract *x = NULL;
	rc = brig_tar_extract_new(&x, AT_FDCWD, tmp, &xo, err);
	if (rc == 0) {
		rc = brig_engine_archive_get(e, id, "/outbox", NULL, brig_tar_extract_data_cb, x, err);
		brig_error *xerr = NULL;
		int frc = brig_tar_extract_finish(x, &xerr);
		/* The extractor's reason (an unsafe entry, a cap) is the real one
		 * when the GET failed only because the extractor stopped it; a
		 * broken connection keeps its own (uncertain) error. */
		if (frc && (rc == 0 || rc == frc)) {
			rc = frc;
			brig__error_move(err, xerr);
		} else
			brig_error_free(xerr);
		brig_tar_extract_free(x);
	}
	if (rc == 0)
		rc = brig_sandbox__outdir_commit(tmp, o->out_dir, err);
	else
		brig_sandbox__outdir_abandon(tmp);
	return rc ? brig__error_prefix(err, rc, "copy outputs to %s", o->out_dir) : 0;
}

static void remove_run(brig_engine *e, const char *id)
{
	/* force: ends whatever still runs; v: the anonymous tmpfs volumes. */
	int rc = brig_engine_container_remove(e, id, true, true, NULL);
	(void)rc; /* ENOTFOUND: AutoRemove got there first */
}

/* Creates the run's container. Its name is fresh, so after a lost answer a
 * container of that name can only be this create's: look before answering. */
static int create_once(brig_engine *e, char **cid, const char *name, json_t *body, brig_error **err)
{
	int rc = brig_engine_container_create(e, cid, name, body, err);
	if (rc == BRIG_EUNCERTAIN) {
		json_t *j = NULL;
		if (brig_engine_container_inspect(e, &j, name, NULL) == 0) {
			*cid = xstrdup(json_string_value(json_object_get(j, "Id")));
			brig__error_clear(err);
			rc = 0;
		}
		if (j)
			json_decref(j);
	}
	return rc;
}

/* With check (brig_guest__volume_quick trusted brig-init's volume by its
 * label alone), the created container's copy of brig-init is checked
 * before anything starts: a copy cut short — a filler that died mid-copy —
 * is repaired through a filler once and the container made again. */
static int create_run_container(brig_engine *e, char **cid, const char *name, json_t *body, const char *image,
				bool check, brig_error **err)
{
	for (int attempt = 0;; attempt++) {
		int rc = create_once(e, cid, name, body, err);
		if (rc || !check)
			return rc;
		rc = brig_guest__volume_check(e, *cid, err);
		if (rc == 0)
			return 0;
		if (attempt > 0 || (rc != BRIG_ECORRUPT && rc != BRIG_ENOTFOUND))
			return brig__error_prefix(err, rc, "run %s: brig-init", name); /* the caller removes *cid */
		brig__error_clear(err);
		brig_engine_container_remove(e, *cid, true, true, NULL);
		free(*cid);
		*cid = NULL;
		brig_guest__volume_forget(e);
		if ((rc = brig_guest__volume_ensure(e, image, err)) != 0)
			return brig__error_prefix(err, rc, "run %s", name);
	}
}

/* A brig-init that could not be executed (a spoiled or missing copy the
 * marker vouched for): runc says so on the container's stderr, where
 * nothing else has written yet, and the container exits non-zero. Told
 * as an error, never as the command's exit code (it did not run); the
 * marker goes, so the next run checks the copy byte for byte and repairs
 * it. A command that prints the same words only spoils its own result. */
static bool init_never_ran(const brig_exec_result *x)
{
	static const char pfx[] = "exec " BRIG_GP_INIT_PATH ": ";
	return x->exit_code != 0 && x->out.len == 0 && x->err.data && x->err.len > strlen(pfx) &&
	       memcmp(x->err.data, pfx, strlen(pfx)) == 0;
}

static int init_failed(brig_engine *e, const char *name, const char *why, brig_error **err)
{
	brig_guest__volume_distrust(e);
	return brig__error_set(err, BRIG_ECORRUPT, 0,
			       "run %s: brig-init could not start (%s), so the command did not run; the next run "
			       "checks brig-init's volume byte for byte and repairs it",
			       name, why);
}

/* The direct path: nothing to copy in or out and no stdin, so the command
 * is the container's own process (no exec: one runc start instead of two),
 * attached before start so no output is missed, with /workspace and
 * /runtime as plain tmpfs mounts (no volumes to make and remove). PID 1 is
 * `brig-init run` (guest): the command is its child and the deadline its —
 * at it brig-init ends every process and exits 124, so the container ends
 * itself even if brig is gone. (Without brig-init, the image's `timeout`
 * holds the container's lifetime and brig the deadline.) AutoRemove then
 * takes the container: the daemon removes it as it ends, and a wait for
 * "removed" begun before the start hands brig the exit code once it is gone
 * — no inspect and no remove call on the way out. */
static int run_direct(brig_engine *e, const brig_run_opts *o, brig_run_result *res, json_t *body, const char *name,
		      const char *image, bool guest, bool check, int64_t lifetime, int64_t timeout_s, int64_t t0,
		      char **cid, brig_error **err)
{
	json_t *ep = json_array();
	char secs[24];
	if (guest) {
		json_array_append_new(ep, json_string(BRIG_GP_INIT_PATH));
		json_array_append_new(ep, json_string("run"));
		json_array_append_new(ep, json_string("--timeout-ms"));
		snprintf(secs, sizeof secs, "%lld", (long long)timeout_s * 1000);
		json_array_append_new(ep, json_string(secs));
		json_array_append_new(ep, json_string("--"));
	} else {
		json_array_append_new(ep, json_string("timeout"));
		json_array_append_new(ep, json_string("-s"));
		json_array_append_new(ep, json_string("KILL"));
		snprintf(secs, sizeof secs, "%lld", (long long)lifetime);
		json_array_append_new(ep, json_string(secs));
	}
	for (const char *const *a = o->argv; *a; a++)
		json_array_append_new(ep, json_string(*a));
	json_object_set_new(body, "Entrypoint", ep);
	json_object_set_new(body, "Cmd", json_null());
	json_object_set_new(body, "WorkingDir", json_string(o->workdir ? o->workdir : "/workspace"));
	json_object_set_new(body, "AttachStdout", json_true());
	json_object_set_new(body, "AttachStderr", json_true());

	int rc = create_run_container(e, cid, name, body, image, check, err);
	if (rc)
		return rc;
	brig_engine_stream *stream = NULL;
	brig_engine_waiter *waiter = NULL;
	int64_t ts = 0; /* brig-init starts after this: its deadline falls after ts + timeout */
	if ((rc = brig_engine_container_attach(e, &stream, *cid, false, err)) != 0 ||
	    (rc = brig_engine_container_wait_begin(e, &waiter, *cid, "removed", err)) != 0 ||
	    (ts = brig_now_ms(), rc = brig_engine_container_start(e, *cid, err)) != 0) {
		brig_engine_stream_free(stream);
		brig_engine_waiter_free(waiter);
		if (guest && ts) /* brig-init may be what could not start */
			brig_guest__volume_distrust(e);
		return rc;
	}
	res->create_ms = brig_now_ms() - t0;
	int64_t t2 = brig_now_ms();
	brig_output_tee tee;
	brig_output_tee_init(&tee, o->capture_max, o->on_output, o->payload);
	brig_engine_exec_io io = {.stdin_fd = -1,
				  .on_output = brig_output_tee_cb,
				  .payload = &tee,
				  .deadline_ms = t2 + timeout_s * 1000,
				  .cancel_fd = o->cancel_fd};
	if (guest) /* brig-init's deadline comes first; brig's is for one that does not end */
		io.deadline_ms += BRIG_GUEST_GRACE_MS;
	rc = brig_engine_stream_pump(stream, &io, err);
	brig_engine_stream_free(stream);
	int64_t code = -1;
	int wrc = 0;
	bool removed = false;
	brig_error *werr = NULL;
	if (rc == 0) {
		/* The output ended. The exit code arrives once the daemon has
		 * removed the container; a command that closed its output but
		 * runs on is still held to the deadline (plus a moment for the
		 * removal when the deadline is near). */
		int64_t by = brig_now_ms() + 5000;
		wrc = brig_engine_waiter_finish(waiter, by > io.deadline_ms ? by : io.deadline_ms, &code, &werr);
		removed = wrc == 0;
		if (wrc == BRIG_ETIMEDOUT) {
			brig_error_free(werr);
			werr = NULL;
			wrc = 0;
			rc = BRIG_ETIMEDOUT;
			/* That waiter is spent; a new one sees AutoRemove finish (or
			 * finds the container already gone). */
			brig_engine_container_kill(e, *cid, "KILL", NULL);
			int r2 = brig_engine_container_wait(e, *cid, "removed", brig_now_ms() + 30000, NULL, NULL);
			removed = r2 == 0 || r2 == BRIG_ENOTFOUND;
		}
	} else {
		/* Timed out, cancelled or cut off: end it; AutoRemove follows. */
		brig_engine_container_kill(e, *cid, "KILL", NULL);
		removed = brig_engine_waiter_finish(waiter, brig_now_ms() + 30000, NULL, NULL) == 0;
	}
	brig_engine_waiter_free(waiter);
	if (rc == BRIG_ETIMEDOUT) {
		brig__error_clear(err);
		res->exec.timed_out = true;
		res->exec.exit_code = 124;
		rc = 0;
	} else if (rc == BRIG_ECANCELED) {
		res->exec.canceled = true;
		res->exec.exit_code = 130;
		brig__error_set(err, rc, 0, "run %s was cancelled; its container was removed", name);
	} else if (rc) {
		res->exec.uncertain = rc == BRIG_EUNCERTAIN;
	} else if (wrc) {
		/* The command ran; its end could not be read. */
		brig__error_set(err, rc = BRIG_EUNCERTAIN, 0,
				"run %s: the command ran but its exit code could not be read from the daemon (%s); it is "
				"not retried",
				name, brig_error_message(werr));
		res->exec.uncertain = true;
	} else {
		res->exec.exit_code = (int)code;
		/* brig-init's deadline: 124, and not before it could have come (a
		 * command's own 124 earlier is its own) */
		if (guest && code == 124 && brig_now_ms() >= ts + timeout_s * 1000)
			res->exec.timed_out = true;
	}
	brig_error_free(werr);
	brig_output_tee_finish(&tee, &res->exec);
	if (guest && rc == 0 && !res->exec.timed_out && init_never_ran(&res->exec)) {
		/* runc's one line; the container's bytes: printable ASCII only */
		char why[160];
		size_t l = 0;
		for (; l < res->exec.err.len && l < sizeof why - 1 && res->exec.err.data[l] != '\n'; l++) {
			unsigned char ch = (unsigned char)res->exec.err.data[l];
			why[l] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
		}
		why[l] = '\0';
		rc = init_failed(e, name, why, err);
	}
	brig_sandbox__fix_not_found(&res->exec);
	res->run_ms = res->exec.duration_ms = brig_now_ms() - t2;
	/* A kernel OOM kill is a SIGKILL: only then ask the daemon's events
	 * (the container itself is gone). */
	if (rc == 0 && !res->exec.timed_out && res->exec.exit_code == 137)
		res->oom_killed = brig_sandbox__oom_since(e, *cid, brig_wall_s() - (brig_now_ms() - t0) / 1000 - 1);
	if (removed) {
		free(*cid); /* gone: nothing for brig_run to remove */
		*cid = NULL;
	}
	return rc;
}

/* The options a run cannot start without, and the sizes they imply. NULL
 * opts is refused: a run has no default spec or command. */
static int check_run_opts(const brig_run_opts *o, int64_t *timeout_out, int64_t *out_mb_out, uint64_t *in_bytes,
			  brig_error **err)
{
	if (!o) /* no defaults: a run needs a spec and argv */
		return brig__error_set(err, BRIG_EINVAL, 0, "run options: required (a spec and argv)");
	int rc = brig__opts_check(o->version, BRIG_RUN_OPTS_VERSION, "run options", err);
	if (rc)
		return rc;
	if (!o->spec)
		return brig__error_set(err, BRIG_EINVAL, 0, "run options: spec is required");
	if (!o->argv || !o->argv[0] || !*o->argv[0])
		return brig__error_set(err, BRIG_EINVAL, 0, "run: a command is required (argv is empty)");
	int64_t timeout_s = o->timeout_s ? o->timeout_s : BRIG_RUN_DEFAULT_TIMEOUT_S;
	if (timeout_s < 1 || timeout_s > 7 * 24 * 3600)
		return brig__error_set(err, BRIG_EINVAL, 0, "timeout: must be 1 to 604800 seconds, got %lld",
				       (long long)timeout_s);
	int64_t out_mb = o->out_mb ? o->out_mb : BRIG_DEFAULT_OUT_MB;
	if (out_mb < 1 || out_mb > 1 << 20)
		return brig__error_set(err, BRIG_EINVAL, 0, "out-mb: must be 1 to 1048576, got %lld",
				       (long long)out_mb);
	*timeout_out = timeout_s;
	*out_mb_out = out_mb;
	return input_bytes(o->inputs, o->input_count, in_bytes, err);
}

/* The exec path's command: an exec in the started container, held to the
 * deadline, its output captured. A deadline is not an error (exit 124). */
static int run_exec(brig_engine *e, const brig_run_opts *o, brig_run_result *res, const brig_spec *spec,
		    const char *cid, const char *name, int64_t timeout_s, brig_error **err)
{
	int64_t t2 = brig_now_ms();
	json_t *env = NULL;
	int rc = brig_spec_exec_env(&env, spec, NULL, 0, err);
	if (rc)
		return rc;
	json_t *cmd = json_array();
	for (const char *const *a = o->argv; *a; a++)
		json_array_append_new(cmd, json_string(*a));
	bool has_stdin = o->stdin_fd >= 0;
	cleanup_json json_t *xcfg = json_pack("{s:o, s:o, s:s, s:b, s:b, s:b, s:b}", "Cmd", cmd, "Env", env,
					      "WorkingDir", o->workdir ? o->workdir : "/workspace", "AttachStdin",
					      has_stdin, "AttachStdout", 1, "AttachStderr", 1, "Tty", 0);
	brig_sandbox__pad_secret_body(xcfg);
	cleanup_free char *xid = NULL;
	if ((rc = brig_engine_exec_create(e, &xid, cid, xcfg, err)) != 0)
		return rc;
	brig_output_tee tee;
	brig_output_tee_init(&tee, o->capture_max, o->on_output, o->payload);
	brig_engine_exec_io io = {.stdin_fd = o->stdin_fd,
				  .on_output = brig_output_tee_cb,
				  .payload = &tee,
				  .deadline_ms = t2 + timeout_s * 1000,
				  .cancel_fd = o->cancel_fd};
	rc = brig_engine_exec_start(e, xid, &io, err);
	if (rc == 0) {
		int64_t poll_by = brig_now_ms() + 10000;
		if (io.deadline_ms < poll_by)
			poll_by = io.deadline_ms;
		rc = brig_engine_exec_exit_code(e, xid, poll_by, &res->exec.exit_code, err);
		if (rc == BRIG_ETIMEDOUT && brig_now_ms() >= io.deadline_ms) {
			brig__error_clear(err); /* still running at its deadline */
			res->exec.timed_out = true;
			res->exec.exit_code = 124;
			rc = 0;
		}
		/* The command ran; if its end cannot be read (the daemon went
		 * away mid-run), that is uncertain, never "not sent". */
		if (rc && rc != BRIG_EUNCERTAIN)
			brig__error_set(
				err, rc = BRIG_EUNCERTAIN, 0,
				"run %s: the command ran but its exit code could not be read from the daemon; it "
				"is not retried",
				name);
	} else if (rc == BRIG_ETIMEDOUT) {
		brig__error_clear(err);
		res->exec.timed_out = true;
		res->exec.exit_code = 124;
		rc = 0;
	}
	brig_output_tee_finish(&tee, &res->exec);
	brig_sandbox__fix_not_found(&res->exec);
	res->run_ms = res->exec.duration_ms = brig_now_ms() - t2;
	if (rc == BRIG_ECANCELED) {
		res->exec.canceled = true;
		res->exec.exit_code = 130;
		brig__error_set(err, rc, 0, "run %s was cancelled; its container was removed", name);
	} else if (rc) {
		res->exec.uncertain = rc == BRIG_EUNCERTAIN;
	}
	return rc;
}

/* The exec path's command with brig-init as PID 1: a START over one relay,
 * the deadline brig-init's (it ends the command's whole tree and the
 * container stays up, so the outbox is still copied out), stdin pumped
 * over the relay. A deadline is not an error (exit 124). */
static int run_guest(brig_engine *e, const brig_run_opts *o, brig_run_result *res, const brig_spec *spec,
		     const char *cid, const char *name, int64_t timeout_s, brig_error **err)
{
	int64_t t2 = brig_now_ms();
	cleanup_json json_t *env = NULL;
	int rc = brig_spec_exec_env(&env, spec, NULL, 0, err);
	if (rc)
		return rc;
	size_t n = json_array_size(env);
	cleanup_free const char **envv = xcalloc(n + 1, sizeof *envv);
	for (size_t i = 0; i < n; i++)
		envv[i] = json_string_value(json_array_get(env, i));
	brig_output_tee tee;
	brig_output_tee_init(&tee, o->capture_max, o->on_output, o->payload);
	brig_guest_exec_opts go = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
				   .argv = o->argv,
				   .env = envv,
				   .env_count = n,
				   .cwd = o->workdir,
				   .stdin_fd = o->stdin_fd,
				   .deadline_ms = t2 + timeout_s * 1000,
				   .cancel_fd = o->cancel_fd,
				   .on_output = brig_output_tee_cb,
				   .payload = &tee,
				   .resize_fd = -1};
	brig_guest *g = NULL;
	brig_guest_exit x = {.code = -1};
	rc = brig_guest_open(&g, e, cid, go.deadline_ms, err);
	if (rc) {
		/* brig-init is PID 1: a container that ended before its relay
		 * could be reached never ran it */
		cleanup_json json_t *j = NULL;
		if (brig_engine_container_inspect(e, &j, cid, NULL) == 0 &&
		    !json_is_true(json_object_get(json_object_get(j, "State"), "Running"))) {
			cleanup_free char *why = xstrdup(brig_error_message(err ? *err : NULL));
			brig__error_clear(err);
			rc = init_failed(e, name, why, err);
		}
	}
	if (rc == 0)
		rc = brig_guest_exec(g, &go, &x, err);
	brig_guest_free(g);
	if ((rc == BRIG_ENOTFOUND || rc == BRIG_EDENIED) && (x.code == 127 || x.code == 126)) {
		/* brig-init's answer: the program cannot be run; nothing ran.
		 * Said as brig-init's own `run` says it (no "start: "). */
		const char *m = brig_error_message(err ? *err : NULL);
		if (strncmp(m, "start: ", 7) == 0)
			m += 7;
		char *line = xasprintf("brig: %s\n", m);
		brig_output_tee_cb(BRIG_STREAM_STDERR, line, strlen(line), &tee);
		free(line);
		brig__error_clear(err);
		res->exec.exit_code = x.code;
		rc = 0;
	} else if (rc == 0) {
		res->exec.exit_code = x.code;
		res->exec.timed_out = x.timed_out;
		if (x.canceled)
			rc = BRIG_ECANCELED;
	}
	brig_output_tee_finish(&tee, &res->exec);
	res->run_ms = res->exec.duration_ms = brig_now_ms() - t2;
	if (rc == BRIG_ECANCELED) {
		res->exec.canceled = true;
		res->exec.exit_code = 130;
		brig__error_set(err, rc, 0, "run %s was cancelled; its container was removed", name);
	} else if (rc) {
		res->exec.uncertain = rc == BRIG_EUNCERTAIN;
	}
	return rc;
}

/* After the command: freeze the container, read whether the OOM killer
 * struck, and copy /outbox out (all or nothing). */
static int freeze_and_copy_out(brig_engine *e, const brig_run_opts *o, brig_run_result *res, const char *cid,
			       const char *name, int64_t out_mb, int64_t t0, brig_error **err)
{
	/* Freeze: whatever the command left running can neither race the copy
	 * (a symlink swapped in mid-read) nor keep writing. Without --out there
	 * is no copy to protect: the forced remove below ends everything. */
	int64_t t3 = brig_now_ms();
	bool paused = false;
	if (o->out_dir) {
		brig_error *perr = NULL;
		paused = brig_engine_container_pause(e, cid, &perr) == 0;
		brig_error_free(perr);
	}
	cleanup_json json_t *st = NULL;
	if (brig_engine_container_inspect(e, &st, cid, NULL) == 0)
		res->oom_killed = json_is_true(json_object_get(json_object_get(st, "State"), "OOMKilled"));
	/* OOMKilled is about PID 1 only: the command is an exec, whose OOM
	 * kill the daemon records only as an "oom" event (exit code 137). */
	if (!res->oom_killed && res->exec.exit_code == 137)
		res->oom_killed = brig_sandbox__oom_since(e, cid, brig_wall_s() - (brig_now_ms() - t0) / 1000 - 1);
	int rc = 0;
	if (o->out_dir && !paused)
		rc = brig__error_set(err, BRIG_ESTATE, 0,
				     "run %s: could not freeze the container to copy its outputs safely", name);
	else if (o->out_dir)
		rc = copy_out(e, cid, o, out_mb, res, err);
	res->copy_out_ms = brig_now_ms() - t3;
	return rc;
}

int brig_run(brig_engine *e, const brig_run_opts *o, brig_run_result *res, brig_error **err)
{
	memset(res, 0, sizeof *res);
	res->exec.exit_code = -1;
	int64_t t0 = brig_now_ms();
	int64_t timeout_s = 0, out_mb = 0;
	uint64_t in_bytes = 0;
	int rc = check_run_opts(o, &timeout_s, &out_mb, &in_bytes, err);
	if (rc)
		return rc;

	brig_spec spec;
	brig_spec_copy(&spec, o->spec);
	char rid[25];
	run_id(rid);
	cleanup_free char *name = xasprintf("brig-run-%s", rid);
	cleanup_free char *cid = NULL;
	cleanup_json json_t *body = NULL;
	cleanup_free char *net_id = NULL;
	brig_host_limits host = {0};
	int64_t t1;

	bool etc_hosts = false, gvisor = false;
	if ((rc = brig_sandbox__resolve_image(e, &res->image_id, &etc_hosts, spec.image, err)) != 0)
		goto out;
	/* Pin: the run uses exactly the id resolved now. */
	free(spec.image);
	spec.image = xstrdup(res->image_id);
	if ((rc = brig_sandbox__host_limits(e, &host, err)) != 0)
		goto out;
	if ((rc = brig_spec_validate(&spec, &host, err)) != 0 ||
	    (rc = brig_sandbox__check_runtime(e, spec.runtime, &gvisor, err)) != 0)
		goto out;
	/* A secret's value is read from brig's environment now, before
	 * anything is made (brig_spec_validate has checked it goes with
	 * egress). */
	if (spec.secret_count && (rc = brig_egress__secrets_check(&spec, err)) != 0)
		goto out;
	if (spec.network == BRIG_NET_ISOLATED && (rc = brig_network_ensure(e, &net_id, &spec, err)) != 0)
		goto out;
	if (spec.network == BRIG_NET_EGRESS && (rc = brig_egress_ensure(e, &net_id, err)) != 0)
		goto out;
	/* /inbox sized to the inputs with room for tar's rounding. */
	int64_t inbox_mb = o->input_count ? (int64_t)((in_bytes + in_bytes / 8) >> 20) + 4 : 0;
	int64_t lifetime = timeout_s + run_grace_s(inbox_mb, o->out_dir ? out_mb : 0);
	brig_container_opts co = {.version = BRIG_CONTAINER_OPTS_VERSION,
				  .kind = BRIG_KIND_RUN,
				  .name = name,
				  .lifetime_s = lifetime,
				  .inbox_mb = inbox_mb,
				  .outbox_mb = o->out_dir ? out_mb : 0,
				  .run_id = rid,
				  .deadline_unix = brig_wall_s() + lifetime};
	/* brig-init as PID 1 when this build carries it (BRIG_GUEST=0, a
	 * test-only knob, docs/guest-protocol.md: as a build without it,
	 * docker-init and the image's `timeout` or `sleep`). */
	char init_hash[17] = "";
	bool check = false;
	const char *vname = brig_guest__volume_name();
	const char *genv = getenv("BRIG_GUEST");
	if (vname && !(genv && strcmp(genv, "0") == 0)) {
		/* gVisor loads brig-init only from the readable (0555) copy, which
		 * has no marker: it is filled (or found whole) once per engine handle */
		rc = gvisor ? brig_guest__volume_ensure_mode(e, spec.image, true, err)
			    : brig_guest__volume_quick(e, spec.image, &check, err);
		if (rc != 0) {
			brig__error_prefix(err, rc, "run");
			goto out;
		}
		snprintf(init_hash, sizeof init_hash, "%s", vname + strlen("brig-init-"));
		co.init_hash = init_hash;
	}
	bool guest = co.init_hash != NULL;
	/* Nothing to copy in or out and no stdin: the command is the container's
	 * own process (run_direct). Env values travel with an exec, never in a
	 * container's configuration (docker inspect shows it): runs with any
	 * entry or credential take the exec path, and so do egress runs (their
	 * default route is removed before the command starts). */
	bool direct = !o->input_count && !o->out_dir && o->stdin_fd < 0 && spec.network != BRIG_NET_EGRESS;
	if (direct) {
		json_t *env0 = NULL;
		if ((rc = brig_spec_exec_env(&env0, &spec, NULL, 0, err)) != 0)
			goto out;
		direct = json_array_size(env0) == 0;
		json_decref(env0);
	}
	co.plain_tmpfs = direct;
	co.gvisor = gvisor;
	/* volumes are mounted on the host (plain tmpfs inside the container's
	 * user namespace): on a daemon with userns-remap their owner is shifted */
	if (!direct && (rc = brig_guest__userns_shift(e, &co.shift, err)) != 0)
		goto out;
	brig_idshift known;
	if (!direct || brig_guest__userns_shift_known(e, &known))
		brig_sandbox__note_shift(direct ? &known : &co.shift);
	if (gvisor) /* the host's user namespace: ids are not shifted */
		co.shift = (brig_idshift){0, 0};
	co.network_disabled = spec.network == BRIG_NET_NONE && etc_hosts;
	if ((rc = brig_spec_container_json(&body, &spec, &co, err)) != 0)
		goto out;
	/* A secret's placeholder is no secret: in the configuration, where
	 * brig_egress__secrets_start reads it back. */
	if (spec.secret_count && (rc = brig_egress__placeholders_add(json_object_get(body, "Env"), &spec, err)) != 0)
		goto out;
	if (net_id)
		json_object_set_new(json_object_get(body, "HostConfig"), "NetworkMode", json_string(net_id));
	res->container = xstrdup(name);
	if (direct) {
		rc = run_direct(e, o, res, body, name, spec.image, guest, check, lifetime, timeout_s, t0, &cid, err);
		goto out;
	}
	rc = create_run_container(e, &cid, name, body, spec.image, check, err);
	if (rc)
		goto out;
	if ((rc = brig_engine_container_start(e, cid, err)) != 0) {
		if (guest) /* brig-init may be what could not start */
			brig_guest__volume_distrust(e);
		goto out;
	}
	/* Egress: rules and routes before the command (never direct, so it
	 * starts only with the exec below). */
	if (spec.network == BRIG_NET_EGRESS &&
	    ((rc = brig_egress__sandbox_start(e, cid, name, (const char *const *)spec.allow, spec.allow_count, true,
					      err)) != 0 ||
	     (rc = brig_egress__secrets_start(e, cid, name, &spec, err)) != 0))
		goto out;
	res->create_ms = brig_now_ms() - t0;

	t1 = brig_now_ms();
	if (o->input_count && (rc = copy_in(e, cid, o, err)) != 0)
		goto out;
	res->copy_in_ms = brig_now_ms() - t1;

	if ((rc = (guest ? run_guest : run_exec)(e, o, res, &spec, cid, name, timeout_s, err)) != 0)
		goto out;
	rc = freeze_and_copy_out(e, o, res, cid, name, out_mb, t0, err);

out:
	if (spec.network == BRIG_NET_EGRESS && res->container)
		brig_egress__rules_remove(res->container);
	if (cid)
		remove_run(e, cid);
	else if (res->container && rc)
		remove_run(e, name); /* a create with no clear answer may have landed */
	if (rc == BRIG_EUNCERTAIN && err && *err)
		brig__error_prefix(err, rc, "run %s (its container was removed; the command is not retried)", name);
	brig_spec_clear(&spec);
	res->total_ms = brig_now_ms() - t0;
	return rc;
}
