/* test_image_context.c — the image layer without Docker or network: the build
 * context holds exactly the listed files (read back from the very tar stream
 * that would be sent), cached inputs are used only when they verify, and the
 * parsers of apt sources, dpkg status and the lock. */
#include "testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brig/image.h"
#include "image/image_internal.h"
#include "tar/tar.h"
#include "util/util.h"

#define ASSERT_CONTAINS(hay, needle)                                                     \
	do {                                                                             \
		const char *h_ = (hay);                                                  \
		if (!h_ || !strstr(h_, (needle)))                                        \
			fail_msg("expected '%s' in '%s'", (needle), h_ ? h_ : "(null)"); \
	} while (0)

/* ---- fixtures: a fake machine (apt sources), a fake cache, a project ---- */

typedef struct fixture {
	char root[256];
	char apt[300], cache[300], image[300], lock[320], project[300], home[300];
	char oldcwd[4096];
	char *oldhome;
} fixture;

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		fail_msg("cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void mkdir_p(const char *path)
{
	char *p = strdup(path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0700);
			*s = '/';
		}
	if (mkdir(p, 0700) != 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", p, strerror(errno));
	free(p);
}

static void copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	if (!a || !b)
		fail_msg("copy %s -> %s: %s", from, to, strerror(errno));
	char buf[8192];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, a)) > 0)
		fwrite(buf, 1, n, b);
	fclose(a);
	fclose(b);
}

static const char apt_sources[] = "# deb822, as Debian 12 ships it\n"
				  "Types: deb\n"
				  "URIs: http://mirror.invalid/debian\n"
				  "Suites: bookworm bookworm-updates\n"
				  "Components: main\n"
				  "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
				  "\n"
				  "Types: deb\n"
				  "URIs: http://mirror.invalid/debian-security\n"
				  "Suites: bookworm-security\n"
				  "Components: main\n";

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof *f);
	snprintf(f->root, sizeof f->root, "/tmp/brig-test-image-XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	snprintf(f->apt, sizeof f->apt, "%s/apt", f->root);
	snprintf(f->cache, sizeof f->cache, "%s/cache", f->root);
	snprintf(f->image, sizeof f->image, "%s/image", f->root);
	snprintf(f->lock, sizeof f->lock, "%s/brig-image.lock", f->image);
	snprintf(f->project, sizeof f->project, "%s/project", f->root);
	snprintf(f->home, sizeof f->home, "%s/home", f->root);
	char p[512];
	snprintf(p, sizeof p, "%s/sources.list.d", f->apt);
	mkdir_p(p);
	snprintf(p, sizeof p, "%s/sources.list.d/debian.sources", f->apt);
	write_text(p, apt_sources);
	mkdir_p(f->image);
	/* The real Dockerfiles: the test proves what brig would send for them. */
	char from[512];
	snprintf(from, sizeof from, "%s/image/Dockerfile.minimal", BRIG_SOURCE_DIR);
	snprintf(p, sizeof p, "%s/Dockerfile.minimal", f->image);
	copy_file(from, p);
	snprintf(from, sizeof from, "%s/image/Dockerfile.agents", BRIG_SOURCE_DIR);
	snprintf(p, sizeof p, "%s/Dockerfile.agents", f->image);
	copy_file(from, p);
	/* A project tree and a home with secrets: brig runs from inside it. */
	snprintf(p, sizeof p, "%s/.git", f->project);
	mkdir_p(p);
	snprintf(p, sizeof p, "%s/secret.env", f->project);
	write_text(p, "ANTHROPIC_API_KEY=sk-project-secret\n");
	snprintf(p, sizeof p, "%s/Dockerfile", f->project);
	write_text(p, "FROM evil\n");
	snprintf(p, sizeof p, "%s/.ssh", f->home);
	mkdir_p(p);
	snprintf(p, sizeof p, "%s/.ssh/id_ed25519", f->home);
	write_text(p, "PRIVATE KEY\n");
	if (!getcwd(f->oldcwd, sizeof f->oldcwd))
		return -1;
	if (chdir(f->project) != 0)
		return -1;
	f->oldhome = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	setenv("HOME", f->home, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	if (chdir(f->oldcwd) != 0)
		return -1;
	if (f->oldhome)
		setenv("HOME", f->oldhome, 1);
	free(f->oldhome);
	brig_image__remove_tree(f->root);
	free(f);
	return 0;
}

/* Writes a fake npm tarball and returns its integrity. */
static char *fake_tgz(const char *path, const char *content)
{
	write_text(path, content);
	char *sri = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_image__sri_sha512(&sri, path, &err), err);
	return sri;
}

typedef struct npm_fake {
	const char *file, *name, *version, *flat;
	char *integrity;
} npm_fake;

static npm_fake npm_fakes[] = {
	{"npm/claude-code.tgz", "@anthropic-ai/claude-code", "2.1.0", "anthropic-ai-claude-code", NULL},
	{"npm/claude-code-native.tgz", "@anthropic-ai/claude-code-linux-x64", "2.1.0",
	 "anthropic-ai-claude-code-linux-x64", NULL},
	{"npm/codex.tgz", "@openai/codex", "0.1.0", "openai-codex", NULL},
	{"npm/codex-native.tgz", "@openai/codex", "0.1.0-linux-x64", "openai-codex", NULL},
};

/* A lock with a small package set; agents adds npm entries whose fake
 * tarballs are put into the cache. */
static void write_lock(fixture *f, bool with_npm)
{
	json_t *npm = json_array();
	char p[512];
	snprintf(p, sizeof p, "%s/npm", f->cache);
	mkdir_p(p);
	for (size_t i = 0; with_npm && i < sizeof npm_fakes / sizeof *npm_fakes; i++) {
		npm_fake *n = &npm_fakes[i];
		snprintf(p, sizeof p, "%s/npm/%s-%s.tgz", f->cache, n->flat, n->version);
		char content[128];
		snprintf(content, sizeof content, "fake tarball %s@%s\n", n->name, n->version);
		free(n->integrity);
		n->integrity = fake_tgz(p, content);
		json_array_append_new(npm, json_pack("{s:s, s:s, s:s, s:s}", "file", n->file, "name", n->name,
						     "version", n->version, "integrity", n->integrity));
	}
	json_t *pk = json_pack("{s:s, s:s, s:s}", "base-files", "12.4+deb12u11", "git", "1:2.39.5-0+deb12u2", "tini",
			       "0.19.0-1");
	json_t *lock =
		json_pack("{s:i, s:{s:s, s:s, s:[s, s]}, s:{s:{s:[s, s], s:O}, s:{s:[s, s], s:O, s:o}}}", "format", 1,
			  "debian", "suite", "bookworm", "variant", "minbase", "updates", "bookworm-updates",
			  "bookworm-security", "profiles", "minimal", "include", "git", "tini", "packages", pk,
			  "agents", "include", "git", "nodejs", "packages", pk, "npm", npm);
	brig_error *err = NULL;
	ASSERT_OK(brig_image__lock_write(f->lock, lock, &err), err);
	json_decref(lock);
	json_decref(pk);
}

static brig_image_build_opts dry_opts(fixture *f, brig_image_profile profile)
{
	brig_image_build_opts o = {.version = BRIG_IMAGE_BUILD_OPTS_VERSION,
				   .profile = profile,
				   .cache_dir = f->cache,
				   .image_dir = f->image,
				   .apt_dir = f->apt,
				   .dry_run = true,
				   .offline = true};
	return o;
}

/* Puts a fake root filesystem where the build looks for key. */
static void fake_rootfs(fixture *f, const char *key, const char *content, const char *record_sha)
{
	char tar[512], meta[512];
	snprintf(tar, sizeof tar, "%s/rootfs/%s.tar", f->cache, key);
	snprintf(meta, sizeof meta, "%s/rootfs/%s.json", f->cache, key);
	write_text(tar, content);
	char sha[65];
	brig_error *err = NULL;
	int fd = open(tar, O_RDONLY);
	ASSERT_OK(brig_tar_sha256_fd(fd, sha, NULL, &err), err);
	close(fd);
	json_t *lock = NULL;
	char lsha[65];
	ASSERT_OK(brig_image__lock_load(&lock, lsha, f->lock, &err), err);
	json_t *m = json_pack("{s:s, s:O}", "sha256", record_sha ? record_sha : sha, "packages",
			      json_object_get(brig_image__lock_profile(lock, "minimal"), "packages"));
	char *text = json_dumps(m, 0);
	write_text(meta, text);
	free(text);
	json_decref(m);
	json_decref(lock);
}

/* Everything in a tar stream: entry names, and the bytes of named files. */
typedef struct listing {
	char *names[64];
	size_t n;
	uint64_t stream_bytes;
	char *dockerfile;
} listing;

static void list_stream(const brig_image_result *res, listing *l)
{
	memset(l, 0, sizeof *l);
	brig_tar_builder *b = NULL;
	brig_error *err = NULL;
	ASSERT_OK(brig_image__context_open(&b, res, &err), err);
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (len + 65536 > cap)
			buf = realloc(buf, cap *= 2);
		ssize_t r = brig_tar_builder_read(b, buf + len, 65536, &err);
		if (r < 0)
			fail_msg("context stream: %s", brig_error_message(err));
		if (r == 0)
			break;
		len += (size_t)r;
	}
	brig_tar_builder_free(b);
	l->stream_bytes = len;
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, buf, len), ARCHIVE_OK);
	struct archive_entry *e;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		assert_true(l->n < 64);
		const char *name = archive_entry_pathname(e);
		l->names[l->n++] = strdup(name);
		assert_int_equal(archive_entry_uid(e), 0);
		assert_int_equal(archive_entry_gid(e), 0);
		assert_int_equal(archive_entry_perm(e) & 07022, 0); /* no setuid, no group/other write */
		if (strcmp(name, "Dockerfile") == 0) {
			size_t sz = (size_t)archive_entry_size(e);
			l->dockerfile = calloc(1, sz + 1);
			assert_int_equal(archive_read_data(a, l->dockerfile, sz), (la_ssize_t)sz);
		}
	}
	archive_read_free(a);
	free(buf);
}

static void listing_free(listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->dockerfile);
}

/* ---- the context ---- */

static void test_minimal_context_is_exactly_the_list(void **state)
{
	fixture *f = *state;
	write_lock(f, false);
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_MINIMAL);
	brig_image_result res;
	brig_error *err = NULL;

	/* Nothing cached: offline refuses, and says which key it wanted. */
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	ASSERT_CONTAINS(brig_error_message(err), "rootfs: ");
	ASSERT_CONTAINS(brig_error_message(err), "--offline");
	assert_non_null(res.rootfs_key);
	char key[65];
	snprintf(key, sizeof key, "%s", res.rootfs_key);
	brig_error_free(err);
	err = NULL;
	brig_image_result_clear(&res);

	fake_rootfs(f, key, "a fake root filesystem\n", NULL);
	ASSERT_OK(brig_image_build(NULL, &res, &o, &err), err);
	assert_string_equal(res.tag, BRIG_IMAGE_MINIMAL_TAG);
	assert_string_equal(res.profile, "minimal");
	assert_null(res.image_id); /* nothing was built */
	assert_true(res.rootfs_cached);
	assert_int_equal(res.file_count, 2);
	assert_string_equal(res.files[0].name, "Dockerfile");
	assert_string_equal(res.files[1].name, "rootfs.tar");
	ASSERT_CONTAINS(res.files[1].source, f->cache);
	assert_int_equal(res.context_bytes, res.files[0].size + res.files[1].size);

	listing l;
	list_stream(&res, &l);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.names[0], "Dockerfile");
	assert_string_equal(l.names[1], "rootfs.tar");
	/* The count the dry run reported is the stream's length. */
	assert_int_equal(res.context_tar_bytes, l.stream_bytes);
	ASSERT_CONTAINS(l.dockerfile, "FROM scratch");
	ASSERT_CONTAINS(l.dockerfile, "ADD rootfs.tar /");
	ASSERT_CONTAINS(l.dockerfile, "USER sandbox");
	ASSERT_CONTAINS(l.dockerfile, "WORKDIR /workspace");
	assert_null(strstr(l.dockerfile, "FROM evil")); /* the project's Dockerfile is not it */
	listing_free(&l);

	/* Stage timings: lock, rootfs (cached), context. */
	assert_int_equal(res.stage_count, 3);
	assert_string_equal(res.stages[1].name, "rootfs");
	assert_true(res.stages[1].cached);
	json_t *j = brig_image_result_to_json(&res);
	assert_int_equal(json_array_size(json_object_get(json_object_get(j, "context"), "files")), 2);
	char *dump = json_dumps(j, 0);
	assert_null(strstr(dump, "sk-project-secret"));
	free(dump);
	json_decref(j);
	brig_image_result_clear(&res);
}

static void test_agents_context_is_exactly_the_list(void **state)
{
	fixture *f = *state;
	write_lock(f, true);
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_AGENTS);
	brig_image_result res;
	brig_error *err = NULL;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	char key[65];
	snprintf(key, sizeof key, "%s", res.rootfs_key);
	brig_error_free(err);
	err = NULL;
	brig_image_result_clear(&res);
	fake_rootfs(f, key, "a fake agents root filesystem\n", NULL);

	ASSERT_OK(brig_image_build(NULL, &res, &o, &err), err);
	assert_string_equal(res.tag, BRIG_IMAGE_AGENTS_TAG);
	static const char *const want[] = {"Dockerfile",          "rootfs.tar",
					   "npm/claude-code.tgz", "npm/claude-code-native.tgz",
					   "npm/codex.tgz",       "npm/codex-native.tgz"};
	assert_int_equal(res.file_count, 6);
	for (size_t i = 0; i < 6; i++)
		assert_string_equal(res.files[i].name, want[i]);
	ASSERT_CONTAINS(res.files[2].origin, npm_fakes[0].integrity);

	listing l;
	list_stream(&res, &l);
	/* The listed files, plus the npm/ directory entry that holds them. */
	assert_int_equal(l.n, 7);
	assert_string_equal(l.names[0], "Dockerfile");
	assert_string_equal(l.names[1], "rootfs.tar");
	assert_string_equal(l.names[2], "npm/");
	for (size_t i = 2; i < 6; i++)
		assert_string_equal(l.names[i + 1], want[i]);
	assert_int_equal(res.context_tar_bytes, l.stream_bytes);
	ASSERT_CONTAINS(l.dockerfile, "npm/codex-native.tgz");
	listing_free(&l);
	/* lock, rootfs, npm (all cached), context */
	assert_int_equal(res.stage_count, 4);
	assert_string_equal(res.stages[2].name, "npm");
	assert_true(res.stages[2].cached);
	brig_image_result_clear(&res);
}

static void test_tampered_cache_is_not_used(void **state)
{
	fixture *f = *state;
	write_lock(f, true);
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_AGENTS);
	brig_image_result res;
	brig_error *err = NULL;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	char key[65];
	snprintf(key, sizeof key, "%s", res.rootfs_key);
	brig_error_free(err);
	err = NULL;
	brig_image_result_clear(&res);

	/* A root filesystem whose bytes differ from its record. */
	fake_rootfs(f, key, "swapped\n", "0000000000000000000000000000000000000000000000000000000000000000");
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	ASSERT_CONTAINS(brig_error_message(err), "rootfs: ");
	brig_error_free(err);
	err = NULL;
	brig_image_result_clear(&res);

	/* An npm tarball that is not the one the lock pins. */
	fake_rootfs(f, key, "a fake agents root filesystem\n", NULL);
	char p[512];
	snprintf(p, sizeof p, "%s/npm/openai-codex-0.1.0.tgz", f->cache);
	write_text(p, "a different tarball\n");
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	ASSERT_CONTAINS(brig_error_message(err), "npm: @openai/codex@0.1.0 is not cached");
	assert_int_equal(access(p, F_OK), -1); /* the bad copy is gone */
	brig_error_free(err);
	brig_image_result_clear(&res);
}

static void test_lock_and_dockerfile_must_agree(void **state)
{
	fixture *f = *state;
	write_lock(f, true);
	char p[512];
	snprintf(p, sizeof p, "%s/Dockerfile.agents", f->image);
	write_text(p, "FROM scratch\nADD rootfs.tar /\n");
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_AGENTS);
	brig_image_result res;
	brig_error *err = NULL;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ECORRUPT);
	ASSERT_CONTAINS(brig_error_message(err), "lock: ");
	ASSERT_CONTAINS(brig_error_message(err), "never uses it");
	brig_error_free(err);
	brig_image_result_clear(&res);
}

static void test_mirror_comes_from_apt_sources(void **state)
{
	fixture *f = *state;
	write_lock(f, false);
	char p[512];
	snprintf(p, sizeof p, "%s/sources.list.d/debian.sources", f->apt);
	unlink(p);
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_MINIMAL);
	brig_image_result res;
	brig_error *err = NULL;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	ASSERT_CONTAINS(brig_error_message(err), "rootfs: no apt source for suite 'bookworm'");
	brig_error_free(err);
	brig_image_result_clear(&res);

	/* A different mirror is a different root filesystem. */
	write_text(p, apt_sources);
	err = NULL;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	char key1[65];
	snprintf(key1, sizeof key1, "%s", res.rootfs_key);
	brig_error_free(err);
	brig_image_result_clear(&res);
	snprintf(p, sizeof p, "%s/sources.list.d/debian.sources", f->apt);
	write_text(p, "Types: deb\nURIs: http://other.invalid/debian\nSuites: bookworm\nComponents: main\n");
	err = NULL;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	assert_string_not_equal(key1, res.rootfs_key);
	brig_error_free(err);
	brig_image_result_clear(&res);
}

/* A mirror with a login in its URI is refused, and the token is never shown. */
static void test_mirror_with_credentials_refused(void **state)
{
	fixture *f = *state;
	write_lock(f, false);
	static const char *const sources[] = {
		"Types: deb\nURIs: https://user:Tok3nXYZ@mirror.invalid/debian\nSuites: bookworm\nComponents: main\n",
		"Types: deb\nURIs: https://Tok3nXYZ@mirror.invalid/debian\nSuites: bookworm\nComponents: main\n",
		"Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm\nComponents: main\n\n"
		"Types: deb\nURIs: https://u:Tok3n@XYZ@mirror.invalid/sec\nSuites: bookworm-security\n"
		"Components: main\n",
	};
	for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
		char p[512];
		snprintf(p, sizeof p, "%s/sources.list.d/debian.sources", f->apt);
		write_text(p, sources[i]);
		brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_MINIMAL);
		brig_image_result res;
		brig_error *err = NULL;
		assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_EINVAL);
		const char *m = brig_error_message(err);
		if (strstr(m, "Tok3n") || strstr(m, "XYZ"))
			fail_msg("token leaked: %s", m);
		ASSERT_CONTAINS(m, "https://***@mirror.invalid/");
		ASSERT_CONTAINS(m, "auth.conf");
		brig_error_free(err);
		brig_image_result_clear(&res);
	}
	char *r = brig_image__apt_uri_without_userinfo("http://mirror.invalid/debian");
	assert_null(r);
	r = brig_image__apt_uri_without_userinfo("https://a:b@h/p@q");
	assert_string_equal(r, "https://***@h/p@q");
	free(r);
}

/* The one rule for options versions: 1..current accepted, the rest refused
 * with a message naming the struct. */
static void test_opts_version(void **state)
{
	fixture *f = *state;
	write_lock(f, false);
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_MINIMAL);
	brig_image_result res;
	brig_error *err = NULL;
	o.version = 1; /* accepted: the build gets as far as the (uncached) rootfs */
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_ENOTFOUND);
	ASSERT_CONTAINS(brig_error_message(err), "rootfs: ");
	brig_error_free(err);
	err = NULL;
	brig_image_result_clear(&res);
	const unsigned bad[] = {0, BRIG_IMAGE_BUILD_OPTS_VERSION + 1};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		o.version = bad[i];
		assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_EINVAL);
		ASSERT_CONTAINS(brig_error_message(err), "image build options");
		brig_error_free(err);
		err = NULL;
		brig_image_result_clear(&res);
	}
	brig_image_build_opts init = BRIG_IMAGE_BUILD_OPTS_INIT;
	assert_int_equal(init.version, BRIG_IMAGE_BUILD_OPTS_VERSION);
	assert_int_equal(init.profile, BRIG_IMAGE_MINIMAL);
}

static void test_options_refused(void **state)
{
	fixture *f = *state;
	write_lock(f, false);
	brig_image_build_opts o = dry_opts(f, BRIG_IMAGE_MINIMAL);
	brig_image_result res;
	brig_error *err = NULL;
	o.tag = "Not A Tag";
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_EINVAL);
	ASSERT_CONTAINS(brig_error_message(err), "tag:");
	brig_error_free(err);
	err = NULL;
	o.tag = NULL;
	o.dry_run = false;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_EINVAL); /* no engine */
	brig_error_free(err);
	err = NULL;
	o.dry_run = true;
	o.update_lock = true;
	assert_int_equal(brig_image_build(NULL, &res, &o, &err), BRIG_EINVAL); /* offline */
	brig_error_free(err);
	brig_image_profile prof;
	err = NULL;
	assert_int_equal(brig_image_profile_parse(&prof, "full", &err), BRIG_EINVAL);
	brig_error_free(err);
	ASSERT_OK(brig_image_profile_parse(&prof, "agents", NULL), NULL);
	assert_int_equal(prof, BRIG_IMAGE_AGENTS);
}

/* ---- the lock ---- */

static int load_lock_text(fixture *f, const char *text, brig_error **err)
{
	write_text(f->lock, text);
	json_t *lock = NULL;
	char sha[65];
	int rc = brig_image__lock_load(&lock, sha, f->lock, err);
	json_decref(lock);
	return rc;
}

static void test_lock_checks(void **state)
{
	fixture *f = *state;
	brig_error *err = NULL;
	static const char ok[] = "{\"format\":1,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{\"minimal\":"
				 "{\"include\":[\"git\"],\"packages\":{\"git\":\"1:2.39.5-0+deb12u2\"}}}}";
	ASSERT_OK(load_lock_text(f, ok, &err), err);
	/* Values that would become options of debootstrap or npm. */
	static const char *const bad[] = {
		"{\"format\":1,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{\"minimal\":{\"include\":[\"--"
		"foreign\"]}}}",
		"{\"format\":1,\"debian\":{\"suite\":\"-x\"},\"profiles\":{}}",
		"{\"format\":2,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{}}",
		"{\"format\":1,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{\"agents\":{\"include\":[\"git\"],"
		"\"npm\":[{\"file\":\"npm/a.tgz\",\"name\":\"--registry=x\",\"version\":\"1.0.0\",\"integrity\":"
		"\"sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"}]}"
		"}}",
		"{\"format\":1,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{\"agents\":{\"include\":[\"git\"],"
		"\"npm\":[{\"file\":\"npm/a.tgz\",\"name\":\"a\",\"version\":\"latest\",\"integrity\":"
		"\"sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"}]}"
		"}}",
		"{\"format\":1,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{\"agents\":{\"include\":[\"git\"],"
		"\"npm\":[{\"file\":\"../x.tgz\",\"name\":\"a\",\"version\":\"1.0.0\",\"integrity\":"
		"\"sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"}]}"
		"}}",
		"{\"format\":1,\"debian\":{\"suite\":\"bookworm\"},\"profiles\":{\"minimal\":{\"include\":[\"git\"],"
		"\"packages\":{\"git\":\"1.0 ; rm\"}}}}",
		"not json",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err = NULL;
		int rc = load_lock_text(f, bad[i], &err);
		if (rc != BRIG_ECORRUPT)
			fail_msg("lock %zu: got %s, want BRIG_ECORRUPT", i, brig_error_name(rc));
		brig_error_free(err);
	}
	err = NULL;
	char missing[400];
	snprintf(missing, sizeof missing, "%s/none.lock", f->root);
	json_t *lock = NULL;
	char sha[65];
	assert_int_equal(brig_image__lock_load(&lock, sha, missing, &err), BRIG_ENOTFOUND);
	ASSERT_CONTAINS(brig_error_message(err), "scripts/update-image-lock");
	brig_error_free(err);
}

static void test_packages_diff(void **state)
{
	(void)state;
	json_t *a = json_pack("{s:s, s:s, s:s}", "git", "1", "perl", "5.36.0-7", "tini", "0.19");
	json_t *b = json_pack("{s:s, s:s, s:s}", "git", "1", "perl", "5.36.0-7+deb12u1", "zlib1g", "1.2");
	size_t n = 0;
	char *d = brig_image__packages_diff(a, b, &n);
	assert_int_equal(n, 3);
	assert_string_equal(d, "~ perl 5.36.0-7 -> 5.36.0-7+deb12u1\n- tini 0.19\n+ zlib1g 1.2\n");
	free(d);
	assert_null(brig_image__packages_diff(a, a, &n));
	assert_int_equal(n, 0);
	json_decref(a);
	json_decref(b);
}

/* The built image's package list is the image's: a diff past 16 MiB keeps
 * whole lines up to the cap and still counts every difference. */
static void test_packages_diff_cap(void **state)
{
	(void)state;
	json_t *a = json_object(), *b = json_object();
	char key[16], val[101];
	memset(val, 'v', 100);
	val[100] = '\0';
	for (int i = 0; i < 200000; i++) {
		snprintf(key, sizeof key, "pkg%06d", i);
		json_object_set_new(a, key, json_string(val));
	}
	size_t n = 0;
	char *d = brig_image__packages_diff(a, b, &n);
	assert_int_equal(n, 200000);
	const size_t line = 2 + 9 + 1 + 100 + 1; /* "- pkgNNNNNN vvv…\n" */
	assert_int_equal(strlen(d), (16u << 20) / line * line);
	assert_memory_equal(d, "- pkg000000 v", 13);
	assert_int_equal(d[strlen(d) - 1], '\n');
	free(d);
	json_decref(a);
	json_decref(b);
}

/* ---- apt sources and dpkg status ---- */

static void test_apt_sources(void **state)
{
	(void)state;
	brig_apt_sources s = {0};
	brig_image__apt_parse_deb822(&s, apt_sources);
	brig_image__apt_parse_deb822(&s, "Types: deb-src\nURIs: http://src.invalid/\nSuites: trixie\n\n"
					 "Enabled: no\nTypes: deb\nURIs: http://off.invalid/\nSuites: sid\n\n"
					 "Types: deb deb-src\nURIs: https://a.invalid/d/ https://b.invalid/d\n"
					 "Suites: trixie\nComponents: main\n contrib\n");
	brig_image__apt_parse_list(&s, "# comment\ndeb-src http://x.invalid/ buster main\n"
				       "deb [arch=amd64 signed-by=/etc/k.gpg] http://l.invalid/debian/ bullseye main "
				       "non-free # tail\n");
	const brig_apt_source *b = brig_image__apt_find(&s, "bookworm");
	assert_non_null(b);
	assert_string_equal(b->uri, "http://mirror.invalid/debian");
	assert_string_equal(b->components, "main");
	assert_string_equal(b->signed_by, "/usr/share/keyrings/debian-archive-keyring.gpg");
	assert_string_equal(brig_image__apt_find(&s, "bookworm-updates")->uri, "http://mirror.invalid/debian");
	assert_string_equal(brig_image__apt_find(&s, "bookworm-security")->uri,
			    "http://mirror.invalid/debian-security");
	assert_null(brig_image__apt_find(&s, "sid"));    /* Enabled: no */
	assert_null(brig_image__apt_find(&s, "buster")); /* deb-src only */
	const brig_apt_source *t = brig_image__apt_find(&s, "trixie");
	assert_non_null(t);
	assert_string_equal(t->uri, "https://a.invalid/d"); /* the first URI, slash trimmed */
	assert_string_equal(t->components, "main contrib");
	const brig_apt_source *l = brig_image__apt_find(&s, "bullseye");
	assert_non_null(l);
	assert_string_equal(l->uri, "http://l.invalid/debian");
	assert_string_equal(l->components, "main non-free");
	assert_string_equal(l->signed_by, "/etc/k.gpg");
	brig_image__apt_free(&s);
}

/* An unreadable sources.list (here a directory) is BRIG_EIO even when the
 * caller does not want the message. */
static void test_apt_read_unreadable_without_err(void **state)
{
	(void)state;
	char dir[] = "/tmp/brig-test-apt-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char p[512];
	snprintf(p, sizeof p, "%s/sources.list", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	brig_apt_sources s;
	assert_int_equal(brig_image__apt_read(&s, dir, NULL), BRIG_EIO);
	brig_image__apt_free(&s);
	brig_error *err = NULL;
	assert_int_equal(brig_image__apt_read(&s, dir, &err), BRIG_EIO);
	ASSERT_CONTAINS(brig_error_message(err), "sources.list");
	brig_error_free(err);
	brig_image__apt_free(&s);
	rmdir(p);
	rmdir(dir);
}

static bool pid_gone_within(pid_t pid, int ms)
{
	for (int i = 0; i < ms / 20; i++) {
		/* Reparented to init: gone, or at worst a zombie about to be reaped. */
		char path[64], st = 0;
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
		FILE *fp = fopen(path, "r");
		if (!fp)
			return true;
		int n = fscanf(fp, "%*d %*s %c", &st);
		fclose(fp);
		if (n == 1 && st == 'Z')
			return true;
		usleep(20 * 1000);
	}
	return false;
}

static pid_t read_pid(const char *path)
{
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	int pid = 0;
	assert_int_equal(fscanf(fp, "%d", &pid), 1);
	fclose(fp);
	return (pid_t)pid;
}

/* A step that leaves a background process holding its output pipes ends
 * when the step's own process ends, and the leftover is killed. */
static void test_run_leftover_child(void **state)
{
	(void)state;
	char pidf[] = "/tmp/brig-test-run-XXXXXX";
	int fd = mkstemp(pidf);
	assert_true(fd >= 0);
	close(fd);
	char script[256];
	snprintf(script, sizeof script, "sleep 30 & echo $! > %s; echo started", pidf);
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_image_cmd c = {.stage = "test", .what = "sh", .argv = argv, .timeout_ms = 20000};
	brig_error *err = NULL;
	int64_t t0 = brig_now_ms();
	assert_int_equal(brig_image__run(&c, NULL, &err), 0);
	assert_true(brig_now_ms() - t0 < 5000);
	assert_true(pid_gone_within(read_pid(pidf), 3000));
	unlink(pidf);
}

/* A timeout stops the step's whole process group, not just its first process. */
static void test_run_timeout_kills_group(void **state)
{
	(void)state;
	char pidf[] = "/tmp/brig-test-run-XXXXXX";
	int fd = mkstemp(pidf);
	assert_true(fd >= 0);
	close(fd);
	char script[256];
	snprintf(script, sizeof script, "sleep 30 </dev/null >/dev/null 2>&1 & echo $! > %s; sleep 30", pidf);
	const char *argv[] = {"sh", "-c", script, NULL};
	brig_image_cmd c = {.stage = "test", .what = "sh", .argv = argv, .timeout_ms = 1000};
	brig_error *err = NULL;
	assert_int_equal(brig_image__run(&c, NULL, &err), BRIG_ETIMEDOUT);
	brig_error_free(err);
	assert_true(pid_gone_within(read_pid(pidf), 3000));
	unlink(pidf);
}

static void *send_sigint(void *arg)
{
	(void)arg;
	usleep(500 * 1000);
	kill(getpid(), SIGINT);
	return NULL;
}

/* Ctrl-C during a step (which no longer shares brig's process group) stops
 * the step and reports the cancel; SIGINT's disposition is restored. */
static void test_run_sigint_cancels(void **state)
{
	(void)state;
	const char *argv[] = {"sleep", "30", NULL};
	brig_image_cmd c = {.stage = "test", .what = "sleep", .argv = argv, .timeout_ms = 20000};
	brig_error *err = NULL;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, send_sigint, NULL), 0);
	int64_t t0 = brig_now_ms();
	assert_int_equal(brig_image__run(&c, NULL, &err), BRIG_ECANCELED);
	assert_true(brig_now_ms() - t0 < 10000);
	ASSERT_CONTAINS(brig_error_message(err), "SIGINT");
	brig_error_free(err);
	pthread_join(t, NULL);
	struct sigaction now;
	sigaction(SIGINT, NULL, &now);
	assert_true(now.sa_handler == SIG_DFL);
}

static void test_dpkg_status(void **state)
{
	(void)state;
	json_t *p = brig_image__dpkg_status_parse("Package: git\nStatus: install ok installed\nVersion: 1:2.39\n"
						  "Description: x\n long text\n\n"
						  "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n"
						  "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\n"
						  "Version: 2.36\n\nPackage: libc6\nStatus: install ok installed\n"
						  "Architecture: i386\nVersion: 2.36\n");
	assert_int_equal(json_object_size(p), 3);
	assert_string_equal(json_string_value(json_object_get(p, "git")), "1:2.39");
	assert_non_null(json_object_get(p, "libc6"));
	assert_non_null(json_object_get(p, "libc6:i386"));
	assert_null(json_object_get(p, "gone"));
	json_decref(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_minimal_context_is_exactly_the_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agents_context_is_exactly_the_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tampered_cache_is_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_and_dockerfile_must_agree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mirror_comes_from_apt_sources, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mirror_with_credentials_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_opts_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_options_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_checks, setup, teardown),
		cmocka_unit_test(test_packages_diff),
		cmocka_unit_test(test_packages_diff_cap),
		cmocka_unit_test(test_apt_sources),
		cmocka_unit_test(test_dpkg_status),
		cmocka_unit_test(test_apt_read_unreadable_without_err),
		cmocka_unit_test(test_run_leftover_child),
		cmocka_unit_test(test_run_timeout_kills_group),
		cmocka_unit_test(test_run_sigint_cancels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
