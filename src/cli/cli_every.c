/* cli_every.c — `--checkpoint-every D` of brig exec and brig agent: a thread
 * that checkpoints the session's computer at that interval while the
 * command runs, so a long run never has more than D of work at stake. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brig/session.h"
#include "brig/store.h"
#include "cli/cli.h"
#include "util/util.h"

struct cli_every {
	brig_engine *e; /* thread-safe: shared with the command */
	brig_store *s;  /* thread-safe: shared with the command */
	char *name;
	int64_t interval_ms;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
};

/* Waits interval_ms or until stopped; true when stopped. */
static bool wait_or_stop(cli_every *ev)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(ev->interval_ms / 1000);
	until.tv_nsec += (long)(ev->interval_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&ev->mu);
	while (!ev->stop && pthread_cond_timedwait(&ev->cv, &ev->mu, &until) == 0)
		;
	bool stop = ev->stop;
	pthread_mutex_unlock(&ev->mu);
	return stop;
}

static void *every_main(void *arg)
{
	cli_every *ev = arg;
	while (!wait_or_stop(ev)) {
		brig_store_checkpoint *cp = NULL;
		brig_error *err = NULL;
		if (brig_checkpoint_create(ev->e, ev->s, &cp, ev->name, NULL, &err) != 0) {
			cli_error(err, "periodic checkpoint (--checkpoint-every) failed; the command goes on");
			continue;
		}
		cli_note("checkpoint %lld of %s/%s/%s (--checkpoint-every)", (long long)cp->id, cp->ns, cp->agent,
			 cp->session);
		brig_store_checkpoint_free(cp);
	}
	return NULL;
}

cli_every *cli_every_start(brig_engine *e, brig_store *s, const char *name, int64_t interval_ms)
{
	if (interval_ms <= 0 || !s)
		return NULL;
	cli_every *ev = xcalloc(1, sizeof *ev);
	ev->e = e;
	ev->s = s;
	ev->name = xstrdup(name);
	ev->interval_ms = interval_ms;
	pthread_mutex_init(&ev->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ev->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&ev->thread, NULL, every_main, ev) != 0)
		abort(); /* as on allocation failure: no threads left */
	return ev;
}

void cli_every_stop(cli_every *ev)
{
	if (!ev)
		return;
	pthread_mutex_lock(&ev->mu);
	ev->stop = true;
	pthread_cond_signal(&ev->cv);
	pthread_mutex_unlock(&ev->mu);
	pthread_join(ev->thread, NULL);
	pthread_cond_destroy(&ev->cv);
	pthread_mutex_destroy(&ev->mu);
	free(ev->name);
	free(ev);
}
