/* pool.c — brig serve's warm pools: one thread keeps each pool at its
 * size, replaces members past --pool-max-age, and lends members to claims
 * through the sandbox layer's hooks (src/sandbox/pool.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/computer_guest.h"
#include "sandbox/pool.h"
#include "serve/pool.h"
#include "util/sha256.h"

typedef struct member {
	char *id;
	int64_t created_s;
	bool lent; /* taken by a claim in progress */
} member;

typedef struct pool {
	char *image;
	unsigned size;
	brig_spec spec;
	char hash[BRIG_HASH_SIZE];
	member *m;
	size_t n;
	uint64_t claims, misses, made, replaced, failures;
} pool;

struct serve_pools {
	brig_engine *e;
	char sid[13];
	char host[65];
	int lock_fd;
	unsigned max_age_s;
	pool *p;
	size_t n;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	pthread_t thread;
	bool started;
};

static pool *by_hash(serve_pools *s, const char *hash)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->p[i].hash, hash) == 0)
			return &s->p[i];
	return NULL;
}

static size_t find(pool *p, const char *id)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->m[i].id, id) == 0)
			return i;
	return p->n;
}

static void drop(pool *p, size_t i)
{
	free(p->m[i].id);
	p->m[i] = p->m[--p->n];
}

static void add(pool *p, char *id, int64_t created)
{
	p->m = xrealloc(p->m, (p->n + 1) * sizeof *p->m);
	p->m[p->n++] = (member){.id = id, .created_s = created};
}

/* ---- the hooks (any thread) ---- */

static int take(void *payload, char **out_id, const char *hash)
{
	serve_pools *s = payload;
	int rc = BRIG_ENOTFOUND;
	pthread_mutex_lock(&s->lock);
	pool *p = by_hash(s, hash);
	member *best = NULL;
	for (size_t i = 0; p && i < p->n; i++) /* the oldest: it would be replaced first */
		if (!p->m[i].lent && (!best || p->m[i].created_s < best->created_s))
			best = &p->m[i];
	if (best) {
		best->lent = true;
		*out_id = xstrdup(best->id);
		rc = 0;
	} else if (p) {
		p->misses++;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static void give_back(void *payload, const char *id, const char *hash)
{
	serve_pools *s = payload;
	pthread_mutex_lock(&s->lock);
	pool *p = by_hash(s, hash);
	size_t i = p ? find(p, id) : 0;
	if (p && i < p->n)
		p->m[i].lent = false;
	pthread_mutex_unlock(&s->lock);
}

static void claimed(void *payload, const char *id, const char *hash)
{
	serve_pools *s = payload;
	pthread_mutex_lock(&s->lock);
	pool *p = by_hash(s, hash);
	size_t i = p ? find(p, id) : 0;
	if (p && i < p->n) {
		drop(p, i);
		p->claims++;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* ---- the thread ---- */

static json_t *member_labels(serve_pools *s, pool *p)
{
	char age[24];
	snprintf(age, sizeof age, "%u", s->max_age_s);
	return json_pack("{s:s, s:s, s:s, s:s}", BRIG_LABEL_POOL, s->sid, BRIG_LABEL_POOL_IMAGE, p->image,
			 BRIG_LABEL_POOL_MAX_AGE, age, BRIG_LABEL_POOL_HOST, s->host);
}

/* Makes one member of p (the lock not held). */
static void make_one(serve_pools *s, pool *p)
{
	unsigned char rnd[4];
	char hex[9];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return;
	brig_hex(hex, rnd, sizeof rnd);
	cleanup_free char *name = xasprintf(BRIG_POOL_NAME_PREFIX "%s-%s", s->sid, hex);
	cleanup_json json_t *labels = member_labels(s, p);
	char *id = NULL;
	brig_error *err = NULL;
	int rc = brig_computer__pool_make(s->e, &id, &p->spec, name, labels, &err);
	if (rc == 0 && brig_sandbox__guest_warm(s->e, id, NULL) != 0) {
		/* no brig-init relay: not the fast computer a claim expects */
		brig_sandbox__pool_remove(s->e, id);
		free(id);
		rc = BRIG_EIO;
	}
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		add(p, id, brig_wall_s());
		p->made++;
	} else {
		p->failures++;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc && err)
		fprintf(stderr, "brig: serve: pool %s: %s\n", p->image, brig_error_message(err));
	brig_error_free(err);
}

/* Members that stopped while they waited (killed, the daemon restarted):
 * out of the pool, and removed. Called with the lock held; drops it. */
static void drop_dead(serve_pools *s)
{
	cleanup_free char *l = xasprintf(BRIG_LABEL_POOL "=%s", s->sid);
	cleanup_json json_t *f = json_pack("{s:[s], s:[s]}", "label", l, "status", "running");
	cleanup_json json_t *list = NULL;
	pthread_mutex_unlock(&s->lock);
	int rc = brig_engine_container_list(s->e, &list, false, f, NULL);
	pthread_mutex_lock(&s->lock);
	if (rc)
		return;
	for (size_t i = 0; i < s->n; i++) {
		pool *p = &s->p[i];
		for (size_t k = 0; k < p->n;) {
			bool alive = p->m[k].lent;
			size_t x;
			json_t *c;
			json_array_foreach (list, x, c) {
				const char *id = json_string_value(json_object_get(c, "Id"));
				alive |= id && strcmp(id, p->m[k].id) == 0;
			}
			if (alive) {
				k++;
				continue;
			}
			char *id = xstrdup(p->m[k].id);
			drop(p, k);
			p->failures++;
			pthread_mutex_unlock(&s->lock);
			brig_sandbox__pool_remove(s->e, id);
			free(id);
			pthread_mutex_lock(&s->lock);
		}
	}
}

static void *pool_thread(void *arg)
{
	serve_pools *s = arg;
	unsigned backoff_s = 0;
	int64_t checked = brig_wall_s();
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		int64_t now = brig_wall_s();
		if (now - checked >= 10) {
			checked = now;
			drop_dead(s);
			continue;
		}
		/* Too old: out of the pool first (no claim can take it), then gone. */
		char *old = NULL;
		for (size_t i = 0; i < s->n && !old; i++) {
			pool *p = &s->p[i];
			for (size_t k = 0; k < p->n; k++) {
				if (!p->m[k].lent && now - p->m[k].created_s >= (int64_t)s->max_age_s) {
					old = xstrdup(p->m[k].id);
					drop(p, k);
					p->replaced++;
					break;
				}
			}
		}
		if (old) {
			pthread_mutex_unlock(&s->lock);
			brig_sandbox__pool_remove(s->e, old);
			free(old);
			pthread_mutex_lock(&s->lock);
			continue;
		}
		pool *short_of = NULL;
		for (size_t i = 0; i < s->n && !short_of; i++)
			if (s->p[i].n < s->p[i].size)
				short_of = &s->p[i];
		if (short_of && !backoff_s) {
			uint64_t failed = short_of->failures;
			pthread_mutex_unlock(&s->lock);
			make_one(s, short_of);
			pthread_mutex_lock(&s->lock);
			if (short_of->failures != failed)
				backoff_s = 5; /* a daemon that refuses: do not spin */
			continue;
		}
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += backoff_s ? backoff_s : 1;
		backoff_s = 0;
		pthread_cond_timedwait(&s->cond, &s->lock, &until);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- start and stop ---- */

/* Members a previous run of this server left: adopted while they fit,
 * removed otherwise. */
static void adopt_members(serve_pools *s)
{
	cleanup_free char *l = xasprintf(BRIG_LABEL_POOL "=%s", s->sid);
	cleanup_json json_t *f = json_pack("{s:[s,s]}", "label", BRIG_LABEL_MANAGED "=1", l);
	cleanup_json json_t *list = NULL;
	if (brig_engine_container_list(s->e, &list, true, f, NULL) != 0)
		return;
	size_t i;
	json_t *c;
	int64_t now = brig_wall_s();
	json_array_foreach (list, i, c) {
		const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
		const char *id = json_string_value(json_object_get(c, "Id"));
		const char *state = json_string_value(json_object_get(c, "State"));
		json_t *labels = json_object_get(c, "Labels");
		const char *hash = json_string_value(json_object_get(labels, BRIG_LABEL_SPEC));
		int64_t created = json_integer_value(json_object_get(c, "Created"));
		if (!name || !id || strncmp(name, "/" BRIG_POOL_NAME_PREFIX, strlen(BRIG_POOL_NAME_PREFIX) + 1) != 0)
			continue; /* claimed: a session's computer now */
		pool *p = hash ? by_hash(s, hash) : NULL;
		if (p && p->n < p->size && state && strcmp(state, "running") == 0 &&
		    now - created < (int64_t)s->max_age_s && brig_sandbox__guest_warm(s->e, id, NULL) == 0) {
			add(p, xstrdup(id), created);
			fprintf(stderr, "brig: serve: pool %s: adopted %s\n", p->image, name + 1);
		} else {
			brig_sandbox__pool_remove(s->e, id);
		}
	}
}

static int take_lock(serve_pools *s, brig_error **err)
{
	cleanup_free char *path = brig_sandbox__pool_lock_path(s->sid);
	cleanup_free char *dir = xstrndup(path, (size_t)(strrchr(path, '/') - path));
	cleanup_free char *parent = xstrndup(dir, (size_t)(strrchr(dir, '/') - dir));
	mkdir(parent, 0755);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return brig__error_set(err, BRIG_EIO, errno, "--pool: cannot make %s", dir);
	s->lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return brig__error_set(err, BRIG_EIO, errno, "--pool: cannot open %s", path);
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return brig__error_set(err, BRIG_ECONFLICT, errno,
				       "--pool: another brig serve on this address holds %s and its pools", path);
	return 0;
}

static void pools_free(serve_pools *s)
{
	for (size_t i = 0; i < s->n; i++) {
		pool *p = &s->p[i];
		free(p->image);
		brig_spec_clear(&p->spec);
		for (size_t k = 0; k < p->n; k++)
			free(p->m[k].id);
		free(p->m);
	}
	free(s->p);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

int serve_pools_start(serve_pools **out, const serve_config *cfg, const char *listen, brig_error **err)
{
	*out = NULL;
	if (!cfg->n_pools)
		return 0;
	serve_pools *s = xcalloc(1, sizeof *s);
	s->e = cfg->engine;
	s->lock_fd = -1;
	s->max_age_s = cfg->pool_max_age_s ? cfg->pool_max_age_s : SERVE_POOL_MAX_AGE_S;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (gethostname(s->host, sizeof s->host - 1) != 0)
		snprintf(s->host, sizeof s->host, "unknown");
	/* Stable across restarts of this server, distinct per address. */
	brig_sha256_ctx h;
	unsigned char d[BRIG_SHA256_SIZE];
	brig_sha256_init(&h);
	brig_sha256_update(&h, s->host, strlen(s->host));
	brig_sha256_update(&h, "\n", 1);
	brig_sha256_update(&h, listen, strlen(listen));
	brig_sha256_final(&h, d);
	brig_hex(s->sid, d, 6);
	int rc = 0;
	s->p = xcalloc(cfg->n_pools, sizeof *s->p);
	for (size_t i = 0; i < cfg->n_pools; i++) {
		const serve_pool_conf *c = &cfg->pools[i];
		pool *p = &s->p[s->n];
		brig_spec_init(&p->spec);
		p->image = xstrdup(c->image);
		p->size = c->size;
		s->n++;
		cleanup_json json_t *img = NULL;
		brig_error *why = NULL;
		if ((rc = brig_spec_set(&p->spec, "image", c->image, &why)) != 0 ||
		    (rc = brig_spec_validate(&p->spec, NULL, &why)) != 0 ||
		    (rc = brig_engine_image_inspect(s->e, &img, c->image, &why)) != 0) {
			rc = brig__error_set(err, BRIG_EINVAL, 0, "--pool %s=%u: %s%s", c->image, c->size,
					     rc == BRIG_ENOTFOUND ? "no such image (brig never pulls): " : "",
					     brig_error_message(why));
			brig_error_free(why);
			goto fail;
		}
		if ((rc = brig_spec_hash_salted(p->hash, &p->spec, NULL, err)) != 0)
			goto fail;
		for (size_t k = 0; k + 1 < s->n; k++)
			if (strcmp(s->p[k].hash, p->hash) == 0) {
				rc = brig__error_set(err, BRIG_EINVAL, 0, "--pool %s: the same image is given twice",
						     c->image);
				goto fail;
			}
	}
	if ((rc = take_lock(s, err)) != 0)
		goto fail;
	adopt_members(s);
	brig_pool_hooks hk = {.take = take, .give_back = give_back, .claimed = claimed, .payload = s};
	brig_sandbox__pool_hooks_set(&hk);
	if (pthread_create(&s->thread, NULL, pool_thread, s) != 0) {
		brig_sandbox__pool_hooks_set(NULL);
		rc = brig__error_set(err, BRIG_EIO, errno, "--pool: cannot start the pool thread");
		goto fail;
	}
	s->started = true;
	fprintf(stderr, "brig: serve: pools of server %s: %zu (members older than %us are replaced)\n", s->sid, s->n,
		s->max_age_s);
	*out = s;
	return 0;
fail:
	pools_free(s);
	return rc;
}

void serve_pools_stop(serve_pools *s)
{
	if (!s)
		return;
	brig_sandbox__pool_hooks_set(NULL);
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->started)
		pthread_join(s->thread, NULL);
	pools_free(s);
}

void serve_pools_metrics(serve_pools *s, brig_buf *b)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	brig_buf_puts(b, "# HELP brig_pool_size Started members waiting in a warm pool.\n"
			 "# TYPE brig_pool_size gauge\n");
	for (size_t i = 0; i < s->n; i++) {
		size_t free_n = 0;
		for (size_t k = 0; k < s->p[i].n; k++)
			free_n += !s->p[i].m[k].lent;
		brig_buf_putf(b, "brig_pool_size{image=\"%s\"} %zu\n", s->p[i].image, free_n);
	}
	brig_buf_puts(b, "# HELP brig_pool_target Members a warm pool keeps.\n# TYPE brig_pool_target gauge\n");
	for (size_t i = 0; i < s->n; i++)
		brig_buf_putf(b, "brig_pool_target{image=\"%s\"} %u\n", s->p[i].image, s->p[i].size);
#define COUNTER(nm, help, field)                                             \
	brig_buf_puts(b, "# HELP " nm " " help "\n# TYPE " nm " counter\n"); \
	for (size_t i = 0; i < s->n; i++)                                    \
		brig_buf_putf(b, nm "{image=\"%s\"} %" PRIu64 "\n", s->p[i].image, s->p[i].field);
	COUNTER("brig_pool_claims_total", "Creates served by a warm pool member.", claims)
	COUNTER("brig_pool_misses_total", "Creates of a pool's spec that found it empty.", misses)
	COUNTER("brig_pool_made_total", "Pool members made.", made)
	COUNTER("brig_pool_replaced_total", "Pool members replaced for their age.", replaced)
	COUNTER("brig_pool_failures_total", "Pool members that could not be made.", failures)
#undef COUNTER
	pthread_mutex_unlock(&s->lock);
}
