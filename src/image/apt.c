/* apt.c — reading the machine's own apt sources (the mirror an image's root
 * filesystem comes from is never hard-coded) and dpkg's status file. */
#include "image/image_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define MAX_SOURCES_FILE (1u << 20)
#define MAX_SOURCES 256

static void add_source(brig_apt_sources *s, const char *uri, const char *suite, const char *components,
		       const char *signed_by)
{
	if (s->n >= MAX_SOURCES || !uri || !*uri || !suite || !*suite)
		return;
	s->v = xrealloc(s->v, (s->n + 1) * sizeof *s->v);
	brig_apt_source *src = &s->v[s->n++];
	size_t ul = strlen(uri);
	while (ul > 1 && uri[ul - 1] == '/')
		ul--;
	src->uri = xstrndup(uri, ul);
	src->suite = xstrdup(suite);
	src->components = xstrdup(components && *components ? components : "main");
	src->signed_by = signed_by && signed_by[0] == '/' && !strpbrk(signed_by, " \t\n") ? xstrdup(signed_by) : NULL;
}

char *brig_image__apt_uri_without_userinfo(const char *uri)
{
	const char *sep = uri ? strstr(uri, "://") : NULL;
	if (!sep)
		return NULL;
	const char *auth = sep + 3;
	/* The authority ends at the first '/'; the last '@' before it ends the
	 * user info (an unencoded '@' or '?' in a token must not leak a piece). */
	const char *end = auth + strcspn(auth, "/");
	const char *at = NULL;
	for (const char *c = auth; c < end; c++)
		if (*c == '@')
			at = c;
	if (!at)
		return NULL;
	return xasprintf("%.*s***%s", (int)(auth - uri), uri, at);
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = 0;
	return s;
}

/* True when the whitespace-separated list has word. */
static bool has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; p && *p;) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		size_t l = strcspn(p, " \t\n");
		if (l == wl && strncmp(p, word, wl) == 0)
			return true;
		p += l;
	}
	return false;
}

/* Joins the words of a (possibly multi-line) value with single spaces. */
static char *words(const char *v)
{
	brig_buf b;
	brig_buf_init(&b, strlen(v) + 1);
	for (const char *p = v; *p;) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		size_t l = strcspn(p, " \t\n");
		if (!l)
			break;
		/* One space per run of blanks: never longer than v, the cap. */
		if (b.len)
			brig_buf_puts(&b, " ");
		brig_buf_put(&b, p, l);
		p += l;
	}
	return brig_buf_steal(&b, NULL);
}

typedef struct stanza {
	char *types, *uris, *suites, *components, *enabled, *signed_by;
} stanza;

static void stanza_clear(stanza *st)
{
	free(st->types);
	free(st->uris);
	free(st->suites);
	free(st->components);
	free(st->enabled);
	free(st->signed_by);
	memset(st, 0, sizeof *st);
}

static void stanza_flush(brig_apt_sources *s, stanza *st)
{
	if (st->types && st->uris && st->suites && has_word(st->types, "deb") &&
	    !(st->enabled && strcasecmp(st->enabled, "no") == 0)) {
		cleanup_free char *comps = st->components ? words(st->components) : NULL;
		cleanup_free char *signed_by = st->signed_by ? words(st->signed_by) : NULL;
		cleanup_free char *uris = words(st->uris);
		cleanup_free char *suites = words(st->suites);
		char *su = NULL, *ss = NULL;
		for (char *u = strtok_r(uris, " ", &su); u; u = strtok_r(NULL, " ", &su)) {
			cleanup_free char *sc = xstrdup(suites);
			for (char *x = strtok_r(sc, " ", &ss); x; x = strtok_r(NULL, " ", &ss))
				add_source(s, u, x, comps, signed_by);
		}
	}
	stanza_clear(st);
}

void brig_image__apt_parse_deb822(brig_apt_sources *s, const char *text)
{
	cleanup_free char *copy = xstrdup(text);
	stanza st = {0};
	char **cur = NULL; /* the field a continuation line extends */
	char *p = copy;
	for (;;) {
		char *nl = strchr(p, '\n');
		bool last = nl == NULL;
		if (nl)
			*nl = 0;
		char *t = p;
		if (!*trim(t)) {
			/* A blank line ends a stanza. */
			stanza_flush(s, &st);
			cur = NULL;
		} else if (t[0] == '#') {
			/* a comment line */
		} else if (t[0] == ' ' || t[0] == '\t') {
			char *v = trim(t);
			if (cur && *cur && *v && strcmp(v, ".") != 0) {
				char *j = xasprintf("%s\n%s", *cur, v);
				free(*cur);
				*cur = j;
			}
		} else {
			char *colon = strchr(t, ':');
			cur = NULL;
			if (colon) {
				*colon = 0;
				char *key = trim(t), *val = trim(colon + 1);
				char **field = NULL;
				if (strcasecmp(key, "Types") == 0)
					field = &st.types;
				else if (strcasecmp(key, "URIs") == 0)
					field = &st.uris;
				else if (strcasecmp(key, "Suites") == 0)
					field = &st.suites;
				else if (strcasecmp(key, "Components") == 0)
					field = &st.components;
				else if (strcasecmp(key, "Enabled") == 0)
					field = &st.enabled;
				else if (strcasecmp(key, "Signed-By") == 0)
					field = &st.signed_by;
				if (field) {
					free(*field);
					*field = xstrdup(val);
				}
				cur = field;
			}
		}
		if (last)
			break;
		p = nl + 1;
	}
	stanza_flush(s, &st);
}

void brig_image__apt_parse_list(brig_apt_sources *s, const char *text)
{
	cleanup_free char *copy = xstrdup(text);
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *p = trim(line);
		if (strncmp(p, "deb", 3) != 0 || (p[3] != ' ' && p[3] != '\t'))
			continue; /* deb-src, blank, anything else */
		p = trim(p + 3);
		char *signed_by = NULL;
		if (*p == '[') {
			char *end = strchr(p, ']');
			if (!end)
				continue;
			*end = 0;
			for (char *o = p + 1; *o;) {
				while (*o == ' ' || *o == '\t')
					o++;
				size_t l = strcspn(o, " \t");
				if (strncmp(o, "signed-by=", 10) == 0) {
					char saved = o[l];
					o[l] = 0;
					signed_by = xstrdup(o + 10);
					o[l] = saved;
				}
				o += l;
			}
			p = trim(end + 1);
		}
		char *sv = NULL;
		char *uri = strtok_r(p, " \t", &sv);
		char *suite = uri ? strtok_r(NULL, " \t", &sv) : NULL;
		char *rest = suite ? sv : NULL;
		cleanup_free char *comps = rest ? words(rest) : NULL;
		if (uri && suite)
			add_source(s, uri, suite, comps, signed_by);
		free(signed_by);
	}
}

static char *read_small(const char *path, brig_error **err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	brig_buf b;
	brig_buf_init(&b, MAX_SOURCES_FILE);
	char buf[8192];
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			brig__error_set(err, BRIG_EIO, errno, "cannot read %s: %s", path, strerror(errno));
			brig_buf_free(&b);
			return NULL;
		}
		if (r == 0)
			break;
		if (brig_buf_add(&b, buf, (size_t)r) != 0) {
			brig__error_set(err, BRIG_ETOOBIG, 0, "%s is larger than 1 MiB", path);
			brig_buf_free(&b);
			return NULL;
		}
	}
	return brig_buf_steal(&b, NULL);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int brig_image__apt_read(brig_apt_sources *s, const char *apt_dir, brig_error **err)
{
	memset(s, 0, sizeof *s);
	const char *dir = apt_dir ? apt_dir : "/etc/apt";
	cleanup_free char *main_list = xasprintf("%s/sources.list", dir);
	if (access(main_list, F_OK) == 0) {
		char *t = read_small(main_list, err);
		if (!t)
			return err && *err ? (*err)->code : BRIG_EIO;
		brig_image__apt_parse_list(s, t);
		free(t);
	}
	cleanup_free char *d = xasprintf("%s/sources.list.d", dir);
	DIR *dh = opendir(d);
	if (!dh)
		return 0;
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(dh)) != NULL) {
		if (de->d_name[0] == '.' || !(ends_with(de->d_name, ".list") || ends_with(de->d_name, ".sources")))
			continue;
		names = xrealloc(names, (n + 1) * sizeof *names);
		names[n++] = xstrdup(de->d_name);
	}
	closedir(dh);
	if (n)
		qsort(names, n, sizeof *names, cmp_str);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		cleanup_free char *p = xasprintf("%s/%s", d, names[i]);
		char *t = rc == 0 ? read_small(p, err) : NULL;
		if (t) {
			if (ends_with(names[i], ".sources"))
				brig_image__apt_parse_deb822(s, t);
			else
				brig_image__apt_parse_list(s, t);
			free(t);
		} else if (rc == 0) {
			rc = err && *err ? (*err)->code : BRIG_EIO;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

const brig_apt_source *brig_image__apt_find(const brig_apt_sources *s, const char *suite)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].suite, suite) == 0)
			return &s->v[i];
	return NULL;
}

void brig_image__apt_free(brig_apt_sources *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].uri);
		free(s->v[i].suite);
		free(s->v[i].components);
		free(s->v[i].signed_by);
	}
	free(s->v);
	memset(s, 0, sizeof *s);
}

/* ---- dpkg status ---- */

json_t *brig_image__dpkg_status_parse(const char *text)
{
	json_t *out = json_object();
	cleanup_free char *copy = xstrdup(text);
	char *pkg = NULL, *ver = NULL, *arch = NULL;
	bool installed = false;
	char *p = copy;
	for (;;) {
		char *nl = strchr(p, '\n');
		bool last = nl == NULL;
		if (nl)
			*nl = 0;
		bool blank = *p == 0;
		if (!blank && (p[0] != ' ' && p[0] != '\t')) {
			if (strncmp(p, "Package:", 8) == 0)
				pkg = trim(p + 8);
			else if (strncmp(p, "Version:", 8) == 0)
				ver = trim(p + 8);
			else if (strncmp(p, "Architecture:", 13) == 0)
				arch = trim(p + 13);
			else if (strncmp(p, "Status:", 7) == 0)
				installed = strcmp(trim(p + 7), "install ok installed") == 0;
		}
		if (blank || last) {
			if (pkg && ver && installed && *pkg && *ver) {
				json_t *prev = json_object_get(out, pkg);
				if (prev && arch) {
					/* Multi-arch: a second architecture of one package. */
					cleanup_free char *k = xasprintf("%s:%s", pkg, arch);
					json_object_set_new(out, k, json_string(ver));
				} else {
					json_object_set_new(out, pkg, json_string(ver));
				}
			}
			pkg = ver = arch = NULL;
			installed = false;
		}
		if (last)
			break;
		p = nl + 1;
	}
	return out;
}
