/* test_checkpoint.c — checkpoints against the real dockerd: the computer is
 * frozen during the copy and runs on afterwards; a truncated or altered blob
 * is refused and changes nothing; a disk-full or killed checkpoint leaves the
 * previous good one intact; retention keeps the newest N. Every object
 * carries brig.test=<run id> and is removed at exit. */
#include "testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brig/session.h"
#include "brig/store.h"
#include "util/util.h"

static brig_engine *E;
static brig_store *S;
static char NS[64];
static char TMP[64];
static char FULL[96]; /* the small tmpfs of the disk-full test, when mounted */

static int setup(void **state)
{
	/* a timeout fails a session only where it stops the computer: the plain exec path (computers made
	 * before brig-init) */
	setenv("BRIG_GUEST", "0", 1);
	(void)state;
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "c%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brig-checkpoint-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	cleanup_free char *url = xasprintf("%s/store.db", TMP);
	brig_error *err = NULL;
	if (brig_store_open(&S, url, &err) != 0) {
		print_error("store: %s\n", brig_error_message(err));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_cleanup(E);
	brig_engine_free(E);
	brig_store_close(S);
	if (FULL[0])
		umount2(FULL, MNT_DETACH);
	cleanup_free char *cmd = xasprintf("rm -rf '%s'", TMP);
	if (system(cmd) != 0)
		print_error("could not remove %s\n", TMP);
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static char *make_dir(const char *tag)
{
	char *d = xasprintf("%s/%s", TMP, tag);
	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", d, strerror(errno));
	return d;
}

/* brig up of session (ns NS, agent "agent") on the test image; returns the
 * computer's name (caller frees). */
static char *up(const char *session)
{
	brig_error *err = NULL;
	brig_spec spec;
	brig_spec_init(&spec);
	ASSERT_OK(brig_spec_set(&spec, "image", brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(&spec, l, &err), err);
	brig_identity id = {NS, "agent", session, 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_session_up(E, S, &c, &id, &spec, &err), err);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	brig_spec_clear(&spec);
	return name;
}

static int sh(const char *ref, const char *script, int64_t timeout_ms, brig_exec_result *res, brig_error **err)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = timeout_ms};
	return brig_session_exec(E, S, ref, &o, res, err);
}

static char *sh_ok(const char *ref, const char *script)
{
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(sh(ref, script, 300000, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("`%s` exited %d: %s", script, r.exit_code, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

/* Fails the session the way users meet it: a command times out. */
static void fail_session(const char *ref, const char *session)
{
	brig_exec_result r;
	brig_error *err = NULL;
	assert_int_equal(sh(ref, "sleep 60", 500, &r, &err), BRIG_ETIMEDOUT);
	brig_exec_result_clear(&r);
	brig_error_free(err);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(S, &rec, NS, "agent", session, &err), err);
	assert_int_equal(rec->state, BRIG_STORE_FAILED);
	brig_store_session_free(rec);
}

static brig_store_checkpoint *checkpoint(const char *ref, const char *dir, size_t keep)
{
	brig_error *err = NULL;
	/* Version 1, not the current one: the oldest callers stay accepted. */
	brig_checkpoint_opts co = {.version = 1, .dir = dir, .keep = keep};
	brig_store_checkpoint *cp = NULL;
	ASSERT_OK(brig_checkpoint_create(E, S, &cp, ref, &co, &err), err);
	return cp;
}

static json_t *inspect(const char *ref)
{
	json_t *j = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_inspect(E, &j, ref, &err), err);
	return j;
}

static bool is_paused(const char *ref)
{
	json_t *j = inspect(ref);
	bool p = json_is_true(json_object_get(json_object_get(j, "State"), "Paused"));
	json_decref(j);
	return p;
}

static const char *state_status(json_t *j)
{
	return json_string_value(json_object_get(json_object_get(j, "State"), "Status"));
}

/* Names in dir, one per line, sorted (caller frees). */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *dir_listing(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		fail_msg("opendir %s: %s", dir, strerror(errno));
	char *names[256];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL && n < 256)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			names[n++] = xstrdup(de->d_name);
	closedir(d);
	qsort(names, n, sizeof *names, cmp_str);
	brig_buf b;
	brig_buf_init(&b, 1u << 20);
	for (size_t i = 0; i < n; i++) {
		brig_buf_putf(&b, "%s\n", names[i]);
		free(names[i]);
	}
	brig_buf_put(&b, "", 1);
	return brig_buf_steal(&b, NULL);
}

/* One regular file out of a tar stream held in memory. */
static int tar_cb(const char *data, size_t len, void *payload)
{
	return brig_buf_add(payload, data, len);
}

static char *archive_file(const char *ref, const char *path)
{
	brig_buf b;
	brig_buf_init(&b, 4u << 20);
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_archive_get(E, ref, path, NULL, tar_cb, &b, &err), err);
	if (b.len < 512)
		fail_msg("archive of %s: %zu bytes", path, b.len);
	char sz[13];
	memcpy(sz, b.data + 124, 12);
	sz[12] = '\0';
	size_t size = (size_t)strtoull(sz, NULL, 8);
	if (512 + size > b.len)
		fail_msg("archive of %s: short", path);
	char *out = xstrndup(b.data + 512, size);
	brig_buf_free(&b);
	return out;
}

/* One entry's content out of a checkpoint blob (zstd tar), or NULL. */
static char *blob_file(const char *dir, const brig_store_checkpoint *cp, const char *name)
{
	cleanup_free char *path = xasprintf("%s/%s", dir, cp->blob);
	struct archive *a = archive_read_new();
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK)
		fail_msg("open %s: %s", path, archive_error_string(a));
	struct archive_entry *ent;
	char *out = NULL;
	while (archive_read_next_header(a, &ent) == ARCHIVE_OK) {
		if (strcmp(archive_entry_pathname(ent), name) != 0)
			continue;
		if (archive_entry_uid(ent) != 1000 || archive_entry_gid(ent) != 1000)
			fail_msg("%s in the checkpoint is owned by %lld:%lld", name, (long long)archive_entry_uid(ent),
				 (long long)archive_entry_gid(ent));
		size_t size = (size_t)archive_entry_size(ent);
		out = xmalloc(size + 1);
		if (archive_read_data(a, out, size) != (la_ssize_t)size)
			fail_msg("read %s: %s", name, archive_error_string(a));
		out[size] = '\0';
		break;
	}
	archive_read_free(a);
	return out;
}

static long long counter(const char *ref)
{
	cleanup_free char *v = archive_file(ref, "/workspace/n");
	return strtoll(v, NULL, 10);
}

/* ------------------------------------------------------------------------
 * Frozen during the copy, running after.
 * ---------------------------------------------------------------------- */

typedef struct events {
	char actions[16][32];
	size_t n;
} events;

static int event_cb(json_t *ev, void *payload)
{
	events *e = payload;
	const char *act = json_string_value(json_object_get(ev, "Action"));
	if (act && e->n < 16)
		snprintf(e->actions[e->n++], sizeof e->actions[0], "%s", act);
	return 0;
}

static void test_pause_during_checkpoint(void **state)
{
	(void)state;
	cleanup_free char *name = up("counter");
	cleanup_free char *dir = make_dir("ck-counter");
	/* The count is written to a side file and renamed into place, so a
	 * freeze can never catch /workspace/n half written. */
	free(sh_ok(name, "i=0; while true; do i=$((i+1)); echo $i > /workspace/n.tmp; "
			 "mv /workspace/n.tmp /workspace/n; done </dev/null >/dev/null 2>&1 &"));
	sleep_ms(500);
	long long before = counter(name);
	assert_true(before > 0);
	json_t *j = inspect(name);
	const char *cid = json_string_value(json_object_get(j, "Id"));
	cleanup_free char *id = xstrdup(cid);
	json_decref(j);

	int64_t t0 = brig_wall_s();
	brig_store_checkpoint *cp = checkpoint(name, dir, 0);
	int64_t t1 = brig_wall_s();

	cleanup_free char *copied = blob_file(dir, cp, "workspace/n");
	assert_non_null(copied);
	long long in_cp = strtoll(copied, NULL, 10);
	assert_true(in_cp >= before);

	/* Running again, and counting on. */
	j = inspect(name);
	assert_string_equal(state_status(j), "running");
	json_decref(j);
	long long after = counter(name);
	sleep_ms(500);
	long long later = counter(name);
	print_message("counter: %lld before, %lld in the checkpoint, %lld and %lld after\n", before, in_cp, after,
		      later);
	assert_true(after >= in_cp);
	assert_true(later > after);

	/* The daemon saw the freeze and the thaw, in that order, during the
	 * checkpoint — and nothing else pause-related. */
	events ev = {0};
	json_t *f = json_pack("{s:[s],s:[s,s]}", "container", id, "event", "pause", "unpause");
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_events(E, t0, t1 + 1, f, brig_now_ms() + 15000, event_cb, &ev, &err), err);
	json_decref(f);
	assert_int_equal(ev.n, 2);
	assert_string_equal(ev.actions[0], "pause");
	assert_string_equal(ev.actions[1], "unpause");

	/* A computer that was already paused is copied and left paused. */
	ASSERT_OK(brig_computer_pause(E, name, &err), err);
	long long frozen = counter(name);
	brig_store_checkpoint *cp2 = checkpoint(name, dir, 0);
	assert_true(is_paused(name));
	cleanup_free char *copied2 = blob_file(dir, cp2, "workspace/n");
	assert_int_equal(strtoll(copied2, NULL, 10), frozen);
	ASSERT_OK(brig_computer_resume(E, name, &err), err);
	brig_store_checkpoint_free(cp2);
	brig_store_checkpoint_free(cp);
}

/* ------------------------------------------------------------------------
 * A truncated or altered blob is refused; nothing changes.
 * ---------------------------------------------------------------------- */

static char *read_all(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("open %s: %s", path, strerror(errno));
	struct stat st;
	fstat(fd, &st);
	char *buf = xmalloc((size_t)st.st_size + 1);
	if (read(fd, buf, (size_t)st.st_size) != st.st_size)
		fail_msg("read %s", path);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void write_all(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		fail_msg("write %s: %s", path, strerror(errno));
	close(fd);
}

static int64_t containers_of(const char *session)
{
	char l1[96], l2[128];
	snprintf(l1, sizeof l1, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	snprintf(l2, sizeof l2, BRIG_LABEL_SESSION "=%s", session);
	json_t *f = json_pack("{s:[s,s]}", "label", l1, l2);
	json_t *list = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_engine_container_list(E, &list, true, f, &err), err);
	int64_t n = (int64_t)json_array_size(list);
	json_decref(list);
	json_decref(f);
	return n;
}

/* recover must fail with BRIG_ECORRUPT and leave session and Docker as they were. */
static void expect_refused(const char *session, const char *dir, const char *what)
{
	brig_error *err = NULL;
	brig_store_session *before = NULL;
	ASSERT_OK(brig_store_session_get(S, &before, NS, "agent", session, &err), err);
	int64_t n_before = containers_of(session);
	brig_recover_result rr;
	int rc = brig_session_recover(E, S, &rr, NS, "agent", session, dir, &err);
	if (rc != BRIG_ECORRUPT)
		fail_msg("recover with a %s blob: %s (%s), expected BRIG_ECORRUPT", what, brig_error_name(rc),
			 brig_error_message(err));
	print_message("%s blob: %s\n", what, brig_error_message(err));
	assert_null(rr.computer);
	brig_error_free(err);
	err = NULL;
	brig_store_session *after = NULL;
	ASSERT_OK(brig_store_session_get(S, &after, NS, "agent", session, &err), err);
	assert_int_equal(after->generation, before->generation);
	assert_int_equal(after->state, BRIG_STORE_FAILED);
	assert_int_equal(after->revision, before->revision);
	assert_string_equal(after->container_name, before->container_name);
	assert_int_equal(containers_of(session), n_before);
	brig_identity next = {NS, "agent", session, (uint32_t)before->generation + 1};
	char next_name[BRIG_NAME_SIZE];
	ASSERT_OK(brig_identity_name(next_name, &next, &err), err);
	json_t *j = NULL;
	assert_int_equal(brig_engine_container_inspect(E, &j, next_name, NULL), BRIG_ENOTFOUND);
	brig_store_session_free(before);
	brig_store_session_free(after);
}

static void test_corrupt_blob_refused(void **state)
{
	(void)state;
	cleanup_free char *name = up("corrupt");
	cleanup_free char *dir = make_dir("ck-corrupt");
	free(sh_ok(name, "echo v1 > /workspace/f; dd if=/dev/urandom of=/workspace/r bs=1k count=512 2>/dev/null"));
	brig_store_checkpoint *cp = checkpoint(name, dir, 0);
	fail_session(name, "corrupt");
	cleanup_free char *path = xasprintf("%s/%s", dir, cp->blob);
	size_t len = 0;
	cleanup_free char *orig = read_all(path, &len);
	assert_true(len > 1024);

	assert_int_equal(truncate(path, (off_t)len / 2), 0);
	expect_refused("corrupt", dir, "truncated");

	write_all(path, orig, len);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	char b = (char)(orig[len / 2] ^ 0x01);
	assert_int_equal(pwrite(fd, &b, 1, (off_t)len / 2), 1);
	close(fd);
	expect_refused("corrupt", dir, "altered");

	/* A running computer is not touched by a refused restore either. */
	cleanup_free char *other = up("corrupt-target");
	free(sh_ok(other, "echo mine > /workspace/f"));
	brig_error *err = NULL;
	assert_int_equal(brig_checkpoint_restore(E, dir, cp, other, &err), BRIG_ECORRUPT);
	brig_error_free(err);
	err = NULL;
	cleanup_free char *ls = sh_ok(other, "ls /workspace; cat /workspace/f");
	assert_string_equal(ls, "f\nmine\n");

	/* The intact blob restores. */
	write_all(path, orig, len);
	brig_recover_result rr;
	ASSERT_OK(brig_session_recover(E, S, &rr, NS, "agent", "corrupt", dir, &err), err);
	assert_int_equal(rr.new_generation, 2);
	assert_int_equal(rr.checkpoint_id, cp->id);
	cleanup_free char *f = sh_ok(rr.computer->name, "cat /workspace/f");
	assert_string_equal(f, "v1\n");
	brig_recover_result_clear(&rr);
	brig_store_checkpoint_free(cp);
}

/* ------------------------------------------------------------------------
 * Disk full: BRIG_EIO, the previous good checkpoint intact.
 * ---------------------------------------------------------------------- */

static void test_disk_full(void **state)
{
	(void)state;
	snprintf(FULL, sizeof FULL, "%s/full", TMP);
	assert_int_equal(mkdir(FULL, 0700), 0);
	if (mount("tmpfs", FULL, "tmpfs", 0, "size=1m,mode=0700") != 0) {
		int e = errno;
		FULL[0] = '\0';
		fail_msg("mount a 1 MB tmpfs: %s (the test needs root)", strerror(e));
	}
	cleanup_free char *name = up("full");
	free(sh_ok(name, "echo good > /workspace/good"));
	brig_store_checkpoint *good = checkpoint(name, FULL, 0);
	cleanup_free char *listing = dir_listing(FULL);

	free(sh_ok(name, "dd if=/dev/urandom of=/workspace/big bs=1M count=20 2>/dev/null"));
	brig_error *err = NULL;
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = FULL};
	brig_store_checkpoint *cp = NULL;
	int rc = brig_checkpoint_create(E, S, &cp, name, &co, &err);
	print_message("checkpoint of 20 MB into 1 MB: %s: %s\n", brig_error_name(rc), brig_error_message(err));
	assert_int_equal(rc, BRIG_EIO);
	assert_null(cp);
	assert_non_null(strstr(brig_error_message(err), "No space left on device"));
	brig_error_free(err);
	err = NULL;

	/* No temporary file left, the good blob as it was, the computer running. */
	cleanup_free char *after = dir_listing(FULL);
	assert_string_equal(after, listing);
	json_t *j = inspect(name);
	assert_string_equal(state_status(j), "running");
	json_decref(j);
	brig_store_checkpoint *latest = NULL;
	ASSERT_OK(brig_store_checkpoint_latest(S, &latest, NS, "agent", "full", &err), err);
	assert_int_equal(latest->id, good->id);
	brig_store_checkpoint_free(latest);

	/* And it still restores. */
	fail_session(name, "full");
	brig_recover_result rr;
	ASSERT_OK(brig_session_recover(E, S, &rr, NS, "agent", "full", FULL, &err), err);
	assert_int_equal(rr.checkpoint_id, good->id);
	cleanup_free char *ls = sh_ok(rr.computer->name, "ls /workspace; cat /workspace/good");
	assert_string_equal(ls, "good\ngood\n");
	brig_recover_result_clear(&rr);
	brig_store_checkpoint_free(good);
	umount2(FULL, MNT_DETACH);
	FULL[0] = '\0';
}

/* ------------------------------------------------------------------------
 * Killed (SIGKILL) mid-copy.
 * ---------------------------------------------------------------------- */

static off_t tmp_file_size(const char *dir, char **name_out)
{
	DIR *d = opendir(dir);
	off_t size = -1;
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, ".tmp-", 5) != 0)
			continue;
		struct stat st;
		cleanup_free char *p = xasprintf("%s/%s", dir, de->d_name);
		if (stat(p, &st) == 0) {
			size = st.st_size;
			if (name_out) {
				free(*name_out);
				*name_out = xstrdup(de->d_name);
			}
		}
	}
	if (d)
		closedir(d);
	return size;
}

static void test_killed_checkpoint(void **state)
{
	(void)state;
	cleanup_free char *name = up("killed");
	cleanup_free char *dir = make_dir("ck-killed");
	free(sh_ok(name, "echo good > /workspace/good"));
	brig_store_checkpoint *good = checkpoint(name, dir, 0);
	cleanup_free char *listing = dir_listing(dir);
	free(sh_ok(name, "dd if=/dev/urandom of=/workspace/big bs=1M count=400 2>/dev/null"));

	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		brig_engine *e = NULL;
		brig_store *s = NULL;
		cleanup_free char *url = xasprintf("%s/store.db", TMP);
		if (brig_engine_open(&e, NULL, NULL) != 0 || brig_store_open(&s, url, NULL) != 0)
			_exit(2);
		brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = dir};
		_exit(brig_checkpoint_create(e, s, NULL, name, &co, NULL) == 0 ? 0 : 1);
	}
	/* Kill it once the copy is under way: the computer is frozen for it.
	 * Soon after: big files go by one archive GET each, so a fast disk
	 * copies the 400 MB and thaws in well under a second. */
	int64_t deadline = brig_now_ms() + 60000;
	while (!is_paused(name) && brig_now_ms() < deadline) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			fail_msg("the checkpoint ended (status %d) before it could be killed", st);
		sleep_ms(1);
	}
	sleep_ms(20);
	assert_int_equal(kill(pid, SIGKILL), 0);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_true(is_paused(name));

	/* The blob was an anonymous file (O_TMPFILE): the kill left no
	 * temporary file, no new blob and no record. */
	cleanup_free char *after = dir_listing(dir);
	print_message("checkpoint dir after the kill:\n%s", after);
	assert_int_equal(tmp_file_size(dir, NULL), -1);
	size_t nblobs = 0;
	for (const char *p = after; (p = strstr(p, ".tar.zst")) != NULL; p++)
		nblobs++;
	assert_int_equal(nblobs, 1);
	assert_non_null(strstr(after, good->blob));
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_checkpoint_list(S, &cps, &n, NS, "agent", "killed", &err), err);
	assert_int_equal(n, 1);
	assert_int_equal(cps[0].id, good->id);
	brig_store_checkpoint_free_array(cps, n);

	/* The killed process never thawed the computer (SIGKILL cannot be
	 * handled): exec is refused while it is frozen... */
	brig_exec_result r;
	assert_int_equal(sh(name, "true", 10000, &r, &err), BRIG_ESTATE);
	brig_exec_result_clear(&r);
	brig_error_free(err);
	err = NULL;

	/* ...and the next checkpoint sees from the pause marker that its
	 * pauser is dead, thaws it, copies, and leaves it running. */
	brig_store_checkpoint *next = checkpoint(name, dir, 0);
	assert_false(is_paused(name));
	brig_store_checkpoint_free(next);

	/* `brig resume` (the user's way out) is harmless on a running one. */
	char *argv[] = {"brig", "resume", name, NULL};
	char *out = NULL, *errout = NULL;
	int code = brig_test_spawn(argv, NULL, NULL, &out, &errout);
	if (code != 0)
		fail_msg("brig resume exited %d: %s", code, errout);
	free(out);
	free(errout);
	cleanup_free char *ok = sh_ok(name, "cat /workspace/good");
	assert_string_equal(ok, "good\n");

	/* The good checkpoint is still there to restore (the newest is used). */
	fail_session(name, "killed");
	brig_recover_result rr;
	ASSERT_OK(brig_session_recover(E, S, &rr, NS, "agent", "killed", dir, &err), err);
	assert_true(rr.checkpoint_id > good->id);
	cleanup_free char *ls = sh_ok(rr.computer->name, "ls /workspace");
	assert_string_equal(ls, "big\ngood\n");
	brig_recover_result_clear(&rr);
	brig_store_checkpoint_free(good);
}

/* ------------------------------------------------------------------------
 * Retention.
 * ---------------------------------------------------------------------- */

static size_t count_blobs(const char *dir)
{
	cleanup_free char *l = dir_listing(dir);
	size_t n = 0;
	for (const char *p = l; (p = strstr(p, ".tar.zst\n")) != NULL; p++)
		n++;
	return n;
}

static void test_retention(void **state)
{
	(void)state;
	cleanup_free char *name = up("keep");
	cleanup_free char *dir = make_dir("ck-keep");
	int64_t ids[4];
	char *blobs[4];
	for (int i = 0; i < 4; i++) {
		cleanup_free char *script = xasprintf("echo %d > /workspace/f%d", i, i);
		free(sh_ok(name, script));
		brig_store_checkpoint *cp = checkpoint(name, dir, 2);
		ids[i] = cp->id;
		blobs[i] = xstrdup(cp->blob);
		brig_store_checkpoint_free(cp);
	}
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_checkpoint_list(S, &cps, &n, NS, "agent", "keep", &err), err);
	assert_int_equal(n, 2);
	assert_int_equal(cps[0].id, ids[3]);
	assert_int_equal(cps[1].id, ids[2]);
	brig_store_checkpoint_free_array(cps, n);
	assert_int_equal(count_blobs(dir), 2);
	cleanup_free char *l = dir_listing(dir);
	assert_null(strstr(l, blobs[0]));
	assert_null(strstr(l, blobs[1]));
	assert_non_null(strstr(l, blobs[2]));
	assert_non_null(strstr(l, blobs[3]));

	/* Removing one takes its record and its blob. */
	ASSERT_OK(brig_checkpoint_remove(S, dir, ids[2], &err), err);
	assert_int_equal(count_blobs(dir), 1);
	assert_int_equal(brig_checkpoint_remove(S, dir, ids[2], &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	for (int i = 0; i < 4; i++)
		free(blobs[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pause_during_checkpoint),
		cmocka_unit_test(test_corrupt_blob_refused),
		cmocka_unit_test(test_disk_full),
		cmocka_unit_test(test_killed_checkpoint),
		cmocka_unit_test(test_retention),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
