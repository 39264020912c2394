/* test_checkpoint_cas.c — incremental, content-addressed checkpoints against
 * the real dockerd, computers with brig-init: unchanged / changed / deleted /
 * replaced by a symlink / mode-only checkpoints restore byte- and
 * mode-identical; a damaged blob shared by two checkpoints is refused for
 * both with nothing restored; retention during a checkpoint keeps what it
 * reuses; export → import into a fresh store (SQLite, and PostgreSQL with
 * $BRIG_TEST_PG) → recover; the full-copy format still restores. */
#include "testutil.h"
#include "helpers/pg_schema.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brig/session.h"
#include "brig/store.h"
#include "util/util.h"

static brig_engine *E;
static char NS[64];
static char TMP[64];
static char *SQLITE;
static char *PG;
static char PG_SCHEMA[64];

static int setup(void **state)
{
	(void)state;
	unsetenv("BRIG_GUEST");
	unsetenv("BRIG_CHECKPOINT_FULL");
	brig_test_setup(&E, NS, sizeof NS, "k");
	if (brig_test_tmpdir(TMP, sizeof TMP, "brig-cas") != 0)
		return -1;
	SQLITE = xasprintf("%s/store.db", TMP);
	PG = pg_schema_url(PG_SCHEMA, sizeof PG_SCHEMA, "brig_k_");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	brig_test_teardown(&E);
	if (PG)
		pg_schema_drop(PG_SCHEMA);
	brig_test_rmdir(TMP);
	free(SQLITE);
	free(PG);
	return 0;
}

static char *make_dir(const char *tag)
{
	char *d = xasprintf("%s/%s", TMP, tag);
	if (mkdir(d, 0700) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", d, strerror(errno));
	return d;
}

static brig_store *open_store(const char *url)
{
	brig_store *s = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_store_open(&s, url, &err), err);
	return s;
}

static char *sh_ok(const char *ref, const char *script)
{
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_exec_opts o = {.version = BRIG_EXEC_OPTS_VERSION,
			    .argv = argv,
			    .stdin_fd = -1,
			    .cancel_fd = -1,
			    .timeout_ms = 120000,
			    .capture_max = 8u << 20};
	brig_exec_result r;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_exec(E, ref, &o, &r, &err), err);
	if (r.exit_code != 0)
		fail_msg("`%s` exited %d: %s", script, r.exit_code, r.err.data);
	char *out = xstrdup(r.out.data);
	brig_exec_result_clear(&r);
	return out;
}

/* Names, modes, owners, sizes, types, link targets and every file's digest. */
static const char LISTING[] =
	"cd / && find workspace runtime ! -path 'runtime/.brig*' ! -path workspace ! -path runtime "
	"-exec stat -c '%n %a %u:%g %s %F %N' {} + | sort; "
	"find workspace runtime -type f ! -path 'runtime/.brig*' -exec sha256sum {} + | sort";

static brig_store_checkpoint *checkpoint(brig_store *s, const char *ref, const char *dir)
{
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = dir};
	brig_store_checkpoint *cp = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_checkpoint_create(E, s, &cp, ref, &co, &err), err);
	return cp;
}

/* A fresh computer (no session) to restore into; caller frees the name. */
static char *scratch(const char *tag)
{
	static int n;
	brig_spec spec;
	brig_test_spec(&spec, NULL);
	char sess[64];
	snprintf(sess, sizeof sess, "r-%s-%d", tag, ++n);
	brig_identity id = {NS, "scratch", sess, 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &spec, &err), err);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	brig_spec_clear(&spec);
	return name;
}

static void restore_equals(const char *dir, const brig_store_checkpoint *cp, const char *want, const char *tag)
{
	cleanup_free char *r = scratch(tag);
	brig_error *err = NULL;
	ASSERT_OK(brig_checkpoint_restore(E, dir, cp, r, &err), err);
	cleanup_free char *got = sh_ok(r, LISTING);
	if (strcmp(got, want) != 0)
		fail_msg("%s: the restore differs\n--- checkpointed:\n%s--- restored:\n%s", tag, want, got);
	ASSERT_OK(brig_computer_destroy(E, r, &err), err);
}

static int count_blobs(const char *dir)
{
	cleanup_free char *cmd = xasprintf("find '%s/blobs' -type f | wc -l", dir);
	FILE *f = popen(cmd, "r");
	int n = -1;
	if (f && fscanf(f, "%d", &n) != 1)
		n = -1;
	if (f)
		pclose(f);
	return n;
}

static char *session_up(brig_store *s, const char *session)
{
	brig_spec spec;
	brig_test_spec(&spec, NULL);
	brig_identity id = {NS, "agent", session, 1};
	brig_computer *c = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_session_up(E, s, &c, &id, &spec, &err), err);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	brig_spec_clear(&spec);
	return name;
}

#define TREE                                                                                                       \
	"set -e; cd /workspace; mkdir -p d/empty deep/a/b; echo one > d/f; echo two > g; echo same > deep/a/b/s; " \
	"cp deep/a/b/s same2; printf 'x y\\n' > 'sp ace'; ln -s d/f link; chmod 0700 deep; "                       \
	"dd if=/dev/urandom of=big bs=1M count=8 2>/dev/null; mkdir -p /runtime/.claude many/sub; "                \
	"i=0; while [ $i -lt 300 ]; do echo $i > many/f$i; i=$((i+1)); done; ln -s ../f1 many/sub/l; "             \
	"chmod 0640 many/f7; "                                                                                     \
	"echo conversation > /runtime/.claude/history.jsonl; chmod 0600 /runtime/.claude/history.jsonl"

static void test_incremental(void **state)
{
	(void)state;
	brig_store *s = open_store(SQLITE);
	cleanup_free char *dir = make_dir("ck-inc");
	cleanup_free char *ref = session_up(s, "inc");
	free(sh_ok(ref, TREE));
	cleanup_free char *l1 = sh_ok(ref, LISTING);
	brig_store_checkpoint *c1 = checkpoint(s, ref, dir);
	assert_non_null(strstr(c1->blob, ".manifest"));
	assert_true(c1->bytes_stored >= 8 << 20);
	int blobs1 = count_blobs(dir);

	/* unchanged: the same manifest, nothing new stored */
	brig_store_checkpoint *c2 = checkpoint(s, ref, dir);
	assert_string_equal(c2->digest, c1->digest);
	assert_true(c2->bytes_stored < 64 * 1024);
	assert_int_equal(count_blobs(dir), blobs1);

	/* one changed: one new blob, and only its bytes read */
	free(sh_ok(ref, "echo changed >> /workspace/g"));
	cleanup_free char *l3 = sh_ok(ref, LISTING);
	brig_store_checkpoint *c3 = checkpoint(s, ref, dir);
	assert_string_not_equal(c3->digest, c2->digest);
	assert_true(c3->bytes_stored < 64 * 1024);
	assert_int_equal(count_blobs(dir), blobs1 + 1);

	/* one deleted */
	free(sh_ok(ref, "rm /workspace/d/f"));
	cleanup_free char *l4 = sh_ok(ref, LISTING);
	brig_store_checkpoint *c4 = checkpoint(s, ref, dir);

	/* a file replaced by a symlink */
	free(sh_ok(ref, "rm /workspace/g && ln -s big /workspace/g"));
	cleanup_free char *l5 = sh_ok(ref, LISTING);
	brig_store_checkpoint *c5 = checkpoint(s, ref, dir);

	/* mode only */
	free(sh_ok(ref, "chmod 0600 /workspace/big && chmod 0711 /workspace/d"));
	cleanup_free char *l6 = sh_ok(ref, LISTING);
	assert_non_null(strstr(l6, "workspace/big 600 "));
	brig_store_checkpoint *c6 = checkpoint(s, ref, dir);
	assert_true(c6->bytes_stored < (8 << 20));

	/* A big file (at least 8 MiB) written: read by one archive GET of its
	 * own path, not through brig-init. The daemon reads as root, so even
	 * one brig-init may not read keeps the incremental format, and its
	 * bytes and mode come back exactly. */
	free(sh_ok(ref, "mkdir -p '/workspace/sub dir' && dd if=/dev/urandom of='/workspace/sub dir/big 2' bs=1M "
			"count=9 2>/dev/null"));
	cleanup_free char *l7 = sh_ok(ref, LISTING);
	free(sh_ok(ref, "chmod 0000 '/workspace/sub dir/big 2'"));
	brig_store_checkpoint *c7 = checkpoint(s, ref, dir);
	assert_non_null(strstr(c7->blob, ".manifest"));
	assert_true(c7->bytes_stored >= 9 << 20);
	{
		cleanup_free char *r = scratch("big");
		brig_error *rerr = NULL;
		ASSERT_OK(brig_checkpoint_restore(E, dir, c7, r, &rerr), rerr);
		cleanup_free char *mode = sh_ok(r, "stat -c %a '/workspace/sub dir/big 2'");
		assert_string_equal(mode, "0\n");
		free(sh_ok(r, "chmod 0644 '/workspace/sub dir/big 2'"));
		cleanup_free char *got = sh_ok(r, LISTING);
		if (strcmp(got, l7) != 0)
			fail_msg("big: the restore differs\n--- checkpointed:\n%s--- restored:\n%s", l7, got);
		ASSERT_OK(brig_computer_destroy(E, r, &rerr), rerr);
	}
	brig_store_checkpoint_free(c7);
	free(sh_ok(ref, "rm -r '/workspace/sub dir'"));

	restore_equals(dir, c1, l1, "unchanged");
	restore_equals(dir, c3, l3, "changed");
	restore_equals(dir, c4, l4, "deleted");
	restore_equals(dir, c5, l5, "symlink");
	restore_equals(dir, c6, l6, "mode");

	/* retention: removing checkpoints 1..5 leaves every blob 6 names, and
	 * removes the changed-away version of g */
	brig_error *err = NULL;
	brig_store_checkpoint *olds[] = {c1, c2, c3, c4, c5};
	for (size_t i = 0; i < 5; i++)
		ASSERT_OK(brig_checkpoint_remove(s, dir, olds[i]->id, &err), err);
	assert_true(count_blobs(dir) < blobs1 + 1);
	restore_equals(dir, c6, l6, "after-retention");

	for (size_t i = 0; i < 5; i++)
		brig_store_checkpoint_free(olds[i]);
	brig_store_checkpoint_free(c6);
	brig_store_close(s);
}

/* The full-copy format (BRIG_CHECKPOINT_FULL, or a computer without
 * brig-init) still restores, and the next incremental one after it too. */
static void test_old_format(void **state)
{
	(void)state;
	brig_store *s = open_store(SQLITE);
	cleanup_free char *dir = make_dir("ck-old");
	cleanup_free char *ref = session_up(s, "old");
	free(sh_ok(ref, TREE));
	cleanup_free char *l1 = sh_ok(ref, LISTING);
	setenv("BRIG_CHECKPOINT_FULL", "1", 1);
	brig_store_checkpoint *c1 = checkpoint(s, ref, dir);
	unsetenv("BRIG_CHECKPOINT_FULL");
	assert_non_null(strstr(c1->blob, ".tar.zst"));
	brig_store_checkpoint *c2 = checkpoint(s, ref, dir);
	assert_non_null(strstr(c2->blob, ".manifest"));
	restore_equals(dir, c1, l1, "old");
	restore_equals(dir, c2, l1, "old-then-new");
	/* a file brig-init may not read: the full copy (the daemon reads as root) */
	free(sh_ok(ref, "echo new >> /workspace/g && chmod 0000 /workspace/g"));
	brig_store_checkpoint *c3 = checkpoint(s, ref, dir);
	assert_non_null(strstr(c3->blob, ".tar.zst"));
	brig_store_checkpoint_free(c3);
	brig_store_checkpoint_free(c1);
	brig_store_checkpoint_free(c2);
	brig_store_close(s);
}

/* A damaged blob that two checkpoints share: both refused, nothing lands,
 * and export refuses it too. */
static void test_corrupt_shared_blob(void **state)
{
	(void)state;
	brig_store *s = open_store(SQLITE);
	cleanup_free char *dir = make_dir("ck-bad");
	cleanup_free char *ref = session_up(s, "bad");
	free(sh_ok(ref, TREE));
	brig_store_checkpoint *c1 = checkpoint(s, ref, dir);
	free(sh_ok(ref, "echo more > /workspace/g"));
	brig_store_checkpoint *c2 = checkpoint(s, ref, dir);
	/* the blob of deep/a/b/s ("same\n"), in both */
	cleanup_free char *sum = sh_ok(ref, "sha256sum /workspace/deep/a/b/s | cut -c1-64");
	sum[64] = '\0';
	cleanup_free char *blob = xasprintf("%s/blobs/%.2s/%s", dir, sum, sum);
	assert_int_equal(chmod(blob, 0600), 0);
	int fd = open(blob, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "S", 1, 0), 1);
	close(fd);
	brig_store_checkpoint *both[] = {c1, c2};
	for (size_t i = 0; i < 2; i++) {
		cleanup_free char *r = scratch("bad");
		brig_error *err = NULL;
		assert_int_equal(brig_checkpoint_restore(E, dir, both[i], r, &err), BRIG_ECORRUPT);
		assert_non_null(strstr(brig_error_message(err), "does not match its digest"));
		brig_error_free(err);
		err = NULL;
		cleanup_free char *left =
			sh_ok(r, "find /workspace /runtime -mindepth 1 ! -path '/runtime/.brig*' | wc -l");
		assert_string_equal(left, "0\n");
		ASSERT_OK(brig_computer_destroy(E, r, &err), err);
	}
	cleanup_free char *out = xasprintf("%s/bad.export", TMP);
	int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	brig_error *err = NULL;
	assert_int_equal(brig_checkpoint_export(s, dir, c1->id, ofd, &err), BRIG_ECORRUPT);
	brig_error_free(err);
	struct stat st;
	assert_int_equal(fstat(ofd, &st), 0);
	assert_int_equal(st.st_size, 0); /* nothing written */
	close(ofd);
	brig_store_checkpoint_free(c1);
	brig_store_checkpoint_free(c2);
	brig_store_close(s);
}

typedef struct ck_thread {
	const char *url, *ref, *dir;
	brig_store_checkpoint *cp;
	int rc;
	char msg[512];
} ck_thread;

static void *ck_run(void *p)
{
	ck_thread *t = p;
	brig_store *s = NULL;
	brig_engine *e = NULL;
	brig_error *err = NULL;
	t->rc = brig_store_open(&s, t->url, &err);
	if (!t->rc)
		t->rc = brig_engine_open(&e, NULL, &err);
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = t->dir};
	if (!t->rc)
		t->rc = brig_checkpoint_create(e, s, &t->cp, t->ref, &co, &err);
	if (t->rc)
		snprintf(t->msg, sizeof t->msg, "%s", brig_error_message(err));
	brig_error_free(err);
	brig_engine_free(e);
	brig_store_close(s);
	return NULL;
}

/* Retention while a checkpoint runs: the running one reuses the blobs of
 * the checkpoint being removed; they stay, and it restores whole. */
static void test_retention_during_checkpoint(void **state)
{
	(void)state;
	brig_store *s = open_store(SQLITE);
	cleanup_free char *dir = make_dir("ck-race");
	cleanup_free char *ref = session_up(s, "race");
	free(sh_ok(ref, TREE));
	brig_store_checkpoint *c1 = checkpoint(s, ref, dir);
	/* a change big enough that the next checkpoint takes a while */
	free(sh_ok(ref, "dd if=/dev/urandom of=/workspace/new bs=1M count=64 2>/dev/null"));
	cleanup_free char *want = sh_ok(ref, LISTING);
	ck_thread t = {.url = SQLITE, .ref = ref, .dir = dir};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, ck_run, &t), 0);
	/* wait until it holds the lock (it is deciding what to reuse), then remove c1 */
	cleanup_free char *lp = xasprintf("%s/.gc.lock", dir);
	bool held = false;
	for (int i = 0; i < 2000 && !held; i++) {
		int fd = open(lp, O_RDWR | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK)
			held = true;
		if (fd >= 0)
			close(fd); /* drops our lock if we got it */
		if (!held)
			brig_test_sleep_ms(2);
	}
	brig_error *err = NULL;
	ASSERT_OK(brig_checkpoint_remove(s, dir, c1->id, &err), err);
	pthread_join(th, NULL);
	if (t.rc)
		fail_msg("checkpoint: %s", t.msg);
	print_message("retention ran %s the checkpoint held the lock\n", held ? "while" : "before");
	restore_equals(dir, t.cp, want, "race");
	brig_store_checkpoint_free(t.cp);
	brig_store_checkpoint_free(c1);
	brig_store_close(s);
}

/* export → import into a fresh store → recover there: the same files. */
static void export_import(const char *to_url, const char *tag)
{
	brig_store *s = open_store(SQLITE);
	cleanup_free char *dir = make_dir("ck-src");
	char sess[32];
	snprintf(sess, sizeof sess, "x-%s", tag);
	cleanup_free char *ref = session_up(s, sess);
	free(sh_ok(ref, TREE));
	cleanup_free char *want = sh_ok(ref, LISTING);
	brig_store_checkpoint *c1 = checkpoint(s, ref, dir);
	cleanup_free char *arc = xasprintf("%s/%s.export", TMP, tag);
	int fd = open(arc, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	brig_error *err = NULL;
	ASSERT_OK(brig_checkpoint_export(s, dir, c1->id, fd, &err), err);
	close(fd);
	/* the other machine: its own store and checkpoint directory; the
	 * source computer is gone */
	ASSERT_OK(brig_computer_destroy(E, ref, &err), err);
	brig_store *t = open_store(to_url);
	cleanup_free char *tdir = xasprintf("%s/ck-dst-%s", TMP, tag);
	assert_int_equal(mkdir(tdir, 0700), 0);
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = tdir};
	fd = open(arc, O_RDONLY);
	/* through a pipe, as `brig checkpoint import < file` reads stdin */
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		char buf[65536];
		ssize_t n;
		while ((n = read(fd, buf, sizeof buf)) > 0)
			if (write(p[1], buf, (size_t)n) != n)
				_exit(1);
		_exit(0);
	}
	close(p[1]);
	close(fd);
	brig_store_checkpoint *imp = NULL;
	ASSERT_OK(brig_checkpoint_import(t, &imp, NULL, NULL, NULL, p[0], &co, &err), err);
	close(p[0]);
	waitpid(pid, NULL, 0);
	assert_string_equal(imp->digest, c1->digest);
	brig_store_session *rec = NULL;
	ASSERT_OK(brig_store_session_get(t, &rec, NS, "agent", sess, &err), err);
	assert_non_null(rec->spec_json);
	brig_store_session_free(rec);
	brig_recover_result rr;
	ASSERT_OK(brig_session_recover(E, t, &rr, NS, "agent", sess, tdir, &err), err);
	assert_int_equal(rr.checkpoint_id, imp->id);
	cleanup_free char *got = sh_ok(rr.computer->name, LISTING);
	if (strcmp(got, want) != 0)
		fail_msg("%s: the recovered computer differs\n--- exported:\n%s--- recovered:\n%s", tag, want, got);
	brig_recover_result_clear(&rr);

	/* a damaged archive (a byte of the 8 MiB blob) is refused, and records nothing */
	int afd = open(arc, O_RDWR);
	struct stat st;
	assert_int_equal(fstat(afd, &st), 0);
	assert_int_equal(pwrite(afd, "\xff", 1, st.st_size / 2), 1);
	assert_int_equal(lseek(afd, 0, SEEK_SET), 0);
	brig_store_checkpoint *none = NULL;
	assert_int_equal(brig_checkpoint_import(t, &none, NS, "agent", sess, afd, &co, &err), BRIG_ECORRUPT);
	brig_error_free(err);
	err = NULL;
	close(afd);
	brig_store_checkpoint *cps = NULL;
	size_t n = 0;
	ASSERT_OK(brig_store_checkpoint_list(t, &cps, &n, NS, "agent", sess, &err), err);
	assert_int_equal(n, 1);
	brig_store_checkpoint_free_array(cps, n);

	/* into a session the caller names that the store does not have: refused before a blob is written */
	afd = open(arc, O_RDONLY);
	assert_int_equal(brig_checkpoint_import(t, &none, NS, "agent", "nosuch", afd, &co, &err), BRIG_ENOTFOUND);
	assert_non_null(strstr(brig_error_message(err), "start it with brig up"));
	brig_error_free(err);
	err = NULL;
	close(afd);

	/* an archive whose spec breaks brig's rules (network host) creates no session */
	size_t alen = 0;
	cleanup_free char *orig = NULL;
	{
		FILE *f = fopen(arc, "rb");
		orig = xmalloc((size_t)st.st_size);
		alen = fread(orig, 1, (size_t)st.st_size, f);
		fclose(f);
	}
	unsigned long long msize = strtoull(orig + 124, NULL, 8);
	size_t rest = 512 + (size_t)((msize + 511) / 512 * 512);
	cleanup_free char *meta =
		xasprintf("{\"format\":1,\"ns\":\"%s\",\"agent\":\"agent\",\"session\":\"hostnet-%s\",\"generation\":1,"
			  "\"spec\":\"{\\\"network\\\":\\\"host\\\"}\"}",
			  NS, tag);
	cleanup_free char *evil = xasprintf("%s/%s-evil.export", TMP, tag);
	int efd = open(evil, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char h[512] = {0};
	snprintf(h, 100, "brig-checkpoint/session.json");
	snprintf(h + 100, 8, "%07o", 0600);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011o", (unsigned)strlen(meta));
	snprintf(h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	char pad[512] = {0};
	assert_int_equal(write(efd, h, 512), 512);
	assert_int_equal(write(efd, meta, strlen(meta)), (ssize_t)strlen(meta));
	assert_int_equal(write(efd, pad, 512 - strlen(meta) % 512), (ssize_t)(512 - strlen(meta) % 512));
	assert_int_equal(write(efd, orig + rest, alen - rest), (ssize_t)(alen - rest));
	close(efd);
	efd = open(evil, O_RDONLY);
	assert_int_not_equal(brig_checkpoint_import(t, &none, NULL, NULL, NULL, efd, &co, &err), 0);
	assert_non_null(strstr(brig_error_message(err), "spec"));
	brig_error_free(err);
	err = NULL;
	close(efd);
	cleanup_free char *hs = xasprintf("hostnet-%s", tag);
	assert_int_equal(brig_store_session_get(t, &rec, NS, "agent", hs, &err), BRIG_ENOTFOUND);
	brig_error_free(err);
	err = NULL;

	brig_store_checkpoint_free(imp);
	brig_store_checkpoint_free(c1);
	brig_store_close(t);
	brig_store_close(s);
}

static void test_export_import_sqlite(void **state)
{
	(void)state;
	cleanup_free char *url = xasprintf("%s/other.db", TMP);
	export_import(url, "sqlite");
}

static void test_export_import_postgresql(void **state)
{
	(void)state;
	if (!PG) {
		print_message(
			"[  SKIP    ] set BRIG_TEST_PG to a PostgreSQL URL to run export → import on PostgreSQL\n");
		skip();
	}
	export_import(PG, "pg");
}

static int sh_spawn(const char *script, char **out, char **errout)
{
	char *argv[] = {"sh", "-c", (char *)script, NULL};
	cleanup_free char *bin = xasprintf("BRIG=%s", brig_test_brig_bin());
	char *env[] = {bin, "BRIG_CHECKPOINT_DIR=", NULL};
	return brig_test_spawn(argv, NULL, env, out, errout);
}

/* The command line: export to a file, import from stdin into another store,
 * and the refusals (no such id, not an archive, half a session). */
static void test_cli_export_import(void **state)
{
	(void)state;
	cleanup_free char *d1 = make_dir("cli1");
	cleanup_free char *d2 = make_dir("cli2");
	cleanup_free char *u1 = xasprintf("%s/store.db", d1);
	cleanup_free char *u2 = xasprintf("%s/store.db", d2);
	unsetenv("BRIG_CHECKPOINT_DIR");
	brig_store *s = open_store(u1);
	cleanup_free char *ref = session_up(s, "cli");
	free(sh_ok(ref, TREE));
	brig_store_checkpoint *cp = checkpoint(s, ref, NULL); /* beside the store, where the CLI looks */
	char *out = NULL, *errout = NULL;
	cleanup_free char *ex =
		xasprintf("\"$BRIG\" checkpoint export --store '%s' %lld > '%s/ck.tar'", u1, (long long)cp->id, TMP);
	assert_int_equal(sh_spawn(ex, &out, &errout), 0);
	free(out);
	free(errout);
	cleanup_free char *im = xasprintf("\"$BRIG\" checkpoint import --store '%s' < '%s/ck.tar'", u2, TMP);
	assert_int_equal(sh_spawn(im, &out, &errout), 0);
	assert_non_null(strstr(out, cp->digest));
	assert_non_null(strstr(errout, "brig recover"));
	free(out);
	free(errout);

	/* a full-copy checkpoint travels as its blob; from a pipe it is spooled, into a named session */
	setenv("BRIG_CHECKPOINT_FULL", "1", 1);
	brig_store_checkpoint *full = checkpoint(s, ref, NULL);
	unsetenv("BRIG_CHECKPOINT_FULL");
	assert_non_null(strstr(full->blob, ".tar.zst"));
	cleanup_free char *fx = xasprintf("\"$BRIG\" checkpoint export --store '%s' %lld | \"$BRIG\" checkpoint import "
					  "--store '%s' --ns %s --agent agent --session cli",
					  u1, (long long)full->id, u2, NS);
	if (sh_spawn(fx, &out, &errout) != 0)
		fail_msg("export | import of a full-copy checkpoint: %s", errout);
	free(out);
	free(errout);
	cleanup_free char *bare =
		xasprintf("\"$BRIG\" checkpoint export --store '%s' %lld | \"$BRIG\" checkpoint import "
			  "--store '%s'",
			  u1, (long long)full->id, u2);
	assert_int_not_equal(sh_spawn(bare, &out, &errout), 0);
	assert_non_null(strstr(errout, "needs --ns, --agent and --session"));
	free(out);
	free(errout);
	brig_store_checkpoint_free(full);

	cleanup_free char *nosuch =
		xasprintf("\"$BRIG\" checkpoint export --store '%s' 999999 > '%s/none.tar'", u1, TMP);
	assert_int_not_equal(sh_spawn(nosuch, &out, &errout), 0);
	assert_non_null(strstr(errout, "999999"));
	free(out);
	free(errout);
	cleanup_free char *garbage = xasprintf("echo hello | \"$BRIG\" checkpoint import --store '%s'", u2);
	assert_int_not_equal(sh_spawn(garbage, &out, &errout), 0);
	assert_non_null(strstr(errout, "not an export archive"));
	free(out);
	free(errout);
	cleanup_free char *half = xasprintf("\"$BRIG\" checkpoint import --store '%s' --ns x < '%s/ck.tar'", u2, TMP);
	assert_int_not_equal(sh_spawn(half, &out, &errout), 0);
	assert_non_null(strstr(errout, "go together"));
	free(out);
	free(errout);
	cleanup_free char *o = xasprintf("\"$BRIG\" checkpoint export --store '%s' -o '%s/o.tar' 999999", u1, TMP);
	assert_int_not_equal(sh_spawn(o, &out, &errout), 0);
	free(out);
	free(errout);
	cleanup_free char *otar = xasprintf("%s/o.tar", TMP);
	assert_int_equal(access(otar, F_OK), -1); /* a failed export leaves no file under the name */
	brig_store_checkpoint_free(cp);
	brig_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_incremental),          cmocka_unit_test(test_old_format),
		cmocka_unit_test(test_corrupt_shared_blob),  cmocka_unit_test(test_retention_during_checkpoint),
		cmocka_unit_test(test_export_import_sqlite), cmocka_unit_test(test_export_import_postgresql),
		cmocka_unit_test(test_cli_export_import),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
