/* session.c — sessions through the store: up (create or adopt the current
 * generation), exec with an audit row and failure marking, and recovery into
 * generation + 1, every state change a compare-and-swap on the revision. */
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "brig/session.h"
#include "sandbox/exec.h"
#include "tar/tar.h"
#include "util/util.h"
#include <fcntl.h>

#define CAS_TRIES 50

static brig_store_session *session_dup(const brig_store_session *r)
{
	brig_store_session *d = xcalloc(1, sizeof *d);
	*d = *r;
	d->ns = r->ns ? xstrdup(r->ns) : NULL;
	d->agent = r->agent ? xstrdup(r->agent) : NULL;
	d->session = r->session ? xstrdup(r->session) : NULL;
	d->container_name = r->container_name ? xstrdup(r->container_name) : NULL;
	d->container_id = r->container_id ? xstrdup(r->container_id) : NULL;
	d->spec_json = r->spec_json ? xstrdup(r->spec_json) : NULL;
	return d;
}

static void set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = v ? xstrdup(v) : NULL;
}

int brig_session_resolve(brig_store *s, char **out, const char *ns, const char *agent, const char *session,
			 brig_error **err)
{
	brig_store_session *r = NULL;
	int rc = brig_store_session_get(s, &r, ns, agent, session, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "no session %s/%s/%s in the store; create it with brig up",
				       ns, agent, session);
	if (rc)
		return rc;
	if (r->container_name) {
		*out = xstrdup(r->container_name);
	} else {
		brig_identity id = {r->ns, r->agent, r->session, (uint32_t)r->generation};
		char name[BRIG_NAME_SIZE];
		rc = brig_identity_name(name, &id, err);
		if (rc == 0)
			*out = xstrdup(name);
	}
	brig_store_session_free(r);
	return rc;
}

static int spec_json_text(char **out, const brig_spec *spec)
{
	json_t *j = brig_spec_to_json(spec, BRIG_SPEC_JSON_ENV_VALUES);
	*out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return *out ? 0 : BRIG_EINVAL;
}

/* Sets state (and the container) of generation gen by CAS; gives up quietly
 * when the session moved to another generation. */
static int advance_state(brig_store *s, const char *ns, const char *agent, const char *session, int64_t gen,
			 brig_store_state state, const char *cname, const char *cid, brig_error **err)
{
	for (int t = 0; t < CAS_TRIES; t++) {
		brig_store_session *r = NULL;
		int rc = brig_store_session_get(s, &r, ns, agent, session, err);
		if (rc)
			return rc;
		if (r->generation != gen ||
		    (r->state == state && (!cid || (r->container_id && strcmp(r->container_id, cid) == 0)))) {
			brig_store_session_free(r);
			return 0;
		}
		brig_store_session *w = session_dup(r);
		w->state = state;
		if (cname)
			set_str(&w->container_name, cname);
		if (cid)
			set_str(&w->container_id, cid);
		brig_store_session *done = NULL;
		rc = brig_store_session_cas(s, &done, w, r->revision, err);
		brig_store_session_free(w);
		brig_store_session_free(r);
		brig_store_session_free(done);
		if (rc == 0)
			return 0;
		if (rc != BRIG_ECONFLICT)
			return rc;
		brig__error_clear(err);
	}
	return brig__error_set(err, BRIG_ESTORE, 0, "session %s/%s/%s: too much contention updating the store", ns,
			       agent, session);
}

int brig_session_mark_failed(brig_store *s, const char *ns, const char *agent, const char *session,
			     int64_t generation, brig_error **err)
{
	return advance_state(s, ns, agent, session, generation, BRIG_STORE_FAILED, NULL, NULL, err);
}

int brig_session_mark(brig_store *s, const char *ns, const char *agent, const char *session, int64_t generation,
		      brig_store_state state, brig_error **err)
{
	if (state != BRIG_STORE_RUNNING && state != BRIG_STORE_PAUSED && state != BRIG_STORE_FAILED &&
	    state != BRIG_STORE_DESTROYED && state != BRIG_STORE_STOPPED)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "session state: running, paused, failed, destroyed or stopped");
	if (state == BRIG_STORE_RUNNING || state == BRIG_STORE_PAUSED) {
		/* A pause or resume never hides a failed, destroyed or stopped generation. */
		brig_store_session *r = NULL;
		int g = brig_store_session_get(s, &r, ns, agent, session, err);
		if (g == BRIG_ENOTFOUND) {
			brig__error_clear(err);
			return 0;
		}
		if (g)
			return g;
		bool live = r->state == BRIG_STORE_RUNNING || r->state == BRIG_STORE_PAUSED;
		brig_store_session_free(r);
		if (!live)
			return 0;
	}
	int rc = advance_state(s, ns, agent, session, generation, state, NULL, NULL, err);
	if (rc == BRIG_ENOTFOUND) { /* not a session of this store */
		brig__error_clear(err);
		return 0;
	}
	return rc;
}

/* The computer of the session's highest generation in Docker; *out NULL
 * when it has none. */
static int newest_computer(brig_engine *e, brig_computer **out, const brig_identity *id, brig_error **err)
{
	*out = NULL;
	brig_computer **all = NULL;
	size_t n = 0;
	cleanup_free char *label = xasprintf(BRIG_LABEL_SESSION "=%s", id->session);
	int rc = brig_computer_list(e, &all, &n, id->ns, label, err);
	if (rc)
		return rc;
	size_t best = n;
	for (size_t i = 0; i < n; i++) {
		brig_computer *c = all[i];
		if (c->agent && strcmp(c->agent, id->agent) == 0 && c->session &&
		    strcmp(c->session, id->session) == 0 && c->generation >= 1 &&
		    (best == n || c->generation > all[best]->generation))
			best = i;
	}
	if (best < n) {
		*out = all[best];
		all[best] = NULL;
	}
	brig_computer_free_array(all, n);
	return 0;
}

static int wait_creating(brig_store *s, brig_store_session **r, brig_error **err);
static int recover(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns, const char *agent,
		   const char *session, const char *dir, int64_t lost_gen, int64_t checkpoint_id, brig_error **err);

void brig_up_result_clear(brig_up_result *r)
{
	if (!r)
		return;
	brig_computer_free(r->computer);
	free(r->lost);
	memset(r, 0, sizeof *r);
}

/* The current generation's computer lost its files (why): restore the
 * latest checkpoint into generation + 1, or refuse when there is none and
 * the caller did not ask for a fresh start. */
static int replace_lost(brig_engine *e, brig_store *s, brig_up_result *res, const brig_store_session *r,
			const char *why, const brig_up_opts *o, brig_error **err)
{
	brig_store_checkpoint *cp = NULL;
	int rc = brig_store_checkpoint_latest(s, &cp, r->ns, r->agent, r->session, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		if (!o->fresh)
			return brig__error_set(
				err, BRIG_ESTATE, 0,
				"session %s/%s/%s: its computer %s %s, so the files it had in /workspace "
				"and /runtime are gone, and the session has no checkpoint to restore them "
				"from; nothing was created. To go on without them in a new, empty "
				"generation, run brig up again with --fresh",
				r->ns, r->agent, r->session, r->container_name ? r->container_name : "", why);
	} else if (rc) {
		return rc;
	} else {
		res->checkpoint_created_ms = cp->created_ms;
		brig_store_checkpoint_free(cp);
	}
	/* Recovered as lost, never marked failed on the way: a racer that
	 * looks meanwhile sees the same running-but-lost generation and races
	 * the same compare-and-swap (one wins, the others adopt its work). */
	brig_recover_result rr;
	rc = recover(e, s, &rr, r->ns, r->agent, r->session, o->checkpoint_dir, r->generation, 0, err);
	if (rc == BRIG_ESTATE) {
		/* A racer replaced the lost computer before we looked: its new
		 * generation runs. Adopt it (it was checked as it was made). */
		brig_store_session *now = NULL;
		if (brig_store_session_get(s, &now, r->ns, r->agent, r->session, NULL) == 0 &&
		    now->generation > r->generation && now->state == BRIG_STORE_RUNNING && now->container_name) {
			brig__error_clear(err);
			rc = brig_computer_get(e, &res->computer, now->container_name, NULL, err);
			if (rc == 0)
				res->computer->adopted = true;
		}
		brig_store_session_free(now);
		return rc;
	}
	if (rc)
		return brig__error_prefix(err, rc, "session %s/%s/%s: its computer %s", r->ns, r->agent, r->session,
					  why);
	res->computer = rr.computer;
	rr.computer = NULL;
	res->lost = xstrdup(why);
	res->old_generation = rr.old_generation;
	res->checkpoint_id = rr.checkpoint_id;
	if (!rr.checkpoint_id)
		res->checkpoint_created_ms = 0;
	brig_recover_result_clear(&rr);
	return 0;
}

int brig_session_up(brig_engine *e, brig_store *s, brig_computer **out, const brig_identity *id,
		    const brig_spec *spec, brig_error **err)
{
	brig_up_result res;
	int rc = brig_session_open(e, s, &res, id, spec, NULL, err);
	if (rc)
		return rc;
	*out = res.computer;
	res.computer = NULL;
	brig_up_result_clear(&res);
	return 0;
}

int brig_session_open(brig_engine *e, brig_store *s, brig_up_result *res, const brig_identity *id,
		      const brig_spec *spec, const brig_up_opts *opts, brig_error **err)
{
	memset(res, 0, sizeof *res);
	brig_up_opts defaults = BRIG_UP_OPTS_INIT;
	const brig_up_opts *o = opts ? opts : &defaults;
	if (opts && brig__opts_check(opts->version, BRIG_UP_OPTS_VERSION, "up options", err) != 0)
		return BRIG_EINVAL;
	brig_computer **out = &res->computer;
	brig_identity base = *id;
	base.generation = 1;
	int rc = brig_identity_validate(&base, err);
	if (rc)
		return rc;
	brig_store_session *r = NULL;
	bool made = false; /* this call created the record: a failure removes it */
	bool kept = false; /* made over checkpoints that brig sessions rm kept */
	rc = brig_store_session_get(s, &r, id->ns, id->agent, id->session, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		if (!spec)
			return brig__error_set(err, BRIG_EINVAL, 0, "a new session needs a spec");
		if ((rc = brig_spec_validate(spec, NULL, err)) != 0)
			return rc;
		char name[BRIG_NAME_SIZE];
		if ((rc = brig_identity_name(name, &base, err)) != 0)
			return rc;
		cleanup_free char *sj = NULL;
		spec_json_text(&sj, spec);
		brig_store_session rec = {.ns = (char *)id->ns,
					  .agent = (char *)id->agent,
					  .session = (char *)id->session,
					  .generation = 1,
					  .state = BRIG_STORE_CREATING,
					  .container_name = name,
					  .spec_json = sj};
		/* Not in this store, but its computer may be in Docker (made with
		 * another store, or by brig create): adopt its newest generation
		 * rather than make a second computer for the same session. */
		brig_computer *found = NULL;
		if ((rc = newest_computer(e, &found, id, err)) != 0)
			return rc;
		brig_store_checkpoint *last = NULL;
		if (found) {
			rec.generation = found->generation;
			rec.state = BRIG_STORE_RUNNING;
			rec.container_name = found->name;
			rec.container_id = found->id;
		} else if ((rc = brig_store_checkpoint_latest(s, &last, id->ns, id->agent, id->session, err)) == 0) {
			/* brig sessions rm kept its checkpoints: the session goes on
			 * from the latest, restored below like a destroyed generation. */
			rec.generation = last->generation;
			rec.state = BRIG_STORE_DESTROYED;
			rec.container_name = NULL;
			kept = true;
		} else if (rc != BRIG_ENOTFOUND) {
			brig_computer_free(found);
			return rc;
		} else {
			brig__error_clear(err);
		}
		brig_store_checkpoint_free(last);
		rc = brig_store_session_create(s, &r, &rec, err);
		made = rc == 0;
		res->recorded = made && found;
		brig_computer_free(found);
		if (rc == BRIG_ECONFLICT) { /* a racer made it first: use theirs */
			brig__error_clear(err);
			rc = brig_store_session_get(s, &r, id->ns, id->agent, id->session, err);
		}
	}
	if (rc)
		return rc;
	if (r->state == BRIG_STORE_CREATING && r->generation > 1) {
		/* A recover is restoring this generation: taking it over now would
		 * let the agent work while the restore still writes. */
		if ((rc = wait_creating(s, &r, err)) != 0) {
			brig_store_session_free(r);
			return rc;
		}
		if (r->state == BRIG_STORE_CREATING) {
			rc = brig__error_set(err, BRIG_ESTATE, 0,
					     "session %s/%s/%s generation %lld was being recovered by a brig that "
					     "stopped: run `brig recover --ns %s --agent %s --session %s`",
					     r->ns, r->agent, r->session, (long long)r->generation, r->ns, r->agent,
					     r->session);
			brig_store_session_free(r);
			return rc;
		}
	}
	if (r->state == BRIG_STORE_DESTROYED || r->state == BRIG_STORE_STOPPED) {
		/* brig destroy or brig stop ended this generation's computer: its
		 * files are gone (a stopped container's tmpfs volumes are empty),
		 * as for one lost behind brig's back. */
		rc = replace_lost(e, s, res, r,
				  kept ? "was removed with its session (brig sessions rm kept the checkpoints)"
				  : r->state == BRIG_STORE_STOPPED ? "was stopped by brig"
								   : "was destroyed by brig",
				  o, err);
		if (rc && made) /* as below: no record without a computer */
			brig_store_session_forget(s, r->ns, r->agent, r->session, r->revision, NULL);
		brig_store_session_free(r);
		return rc;
	}
	if (r->state == BRIG_STORE_FAILED) {
		rc = brig__error_set(err, BRIG_ESTATE, 0,
				     "session %s/%s/%s generation %lld is %s: run `brig recover --ns %s --agent %s "
				     "--session %s`",
				     r->ns, r->agent, r->session, (long long)r->generation,
				     brig_store_state_to_string(r->state), r->ns, r->agent, r->session);
		brig_store_session_free(r);
		return rc;
	}
	brig_spec recorded;
	bool have_recorded = false;
	if (!spec && r->spec_json) {
		json_t *j = json_loads(r->spec_json, 0, NULL);
		if (j && brig_spec_from_json(&recorded, j, NULL) == 0)
			have_recorded = true;
		if (j)
			json_decref(j);
	}
	if (!spec && !have_recorded) {
		brig_store_session_free(r);
		return brig__error_set(err, BRIG_EINVAL, 0, "session has no recorded spec; pass one");
	}
	if ((r->state == BRIG_STORE_RUNNING || r->state == BRIG_STORE_PAUSED) && r->container_name) {
		bool lost = false;
		cleanup_free char *why = NULL;
		if ((rc = brig_computer_check_files(e, r->container_name, &lost, &why, err)) != 0) {
			if (have_recorded)
				brig_spec_clear(&recorded);
			brig_store_session_free(r);
			return brig__error_prefix(err, rc, "up %s/%s/%s", id->ns, id->agent, id->session);
		}
		if (lost) {
			if (have_recorded)
				brig_spec_clear(&recorded);
			rc = replace_lost(e, s, res, r, why, o, err);
			if (rc && made)
				brig_store_session_forget(s, r->ns, r->agent, r->session, r->revision, NULL);
			brig_store_session_free(r);
			return rc;
		}
	}
	brig_identity gid = {r->ns, r->agent, r->session, (uint32_t)r->generation};
	brig_computer *c = NULL;
	rc = brig_computer_create(e, &c, &gid, spec ? spec : &recorded, err);
	if (have_recorded)
		brig_spec_clear(&recorded);
	if (rc && made) /* nothing half-created: no session without its computer */
		brig_store_session_forget(s, r->ns, r->agent, r->session, r->revision, NULL);
	if (rc == 0)
		rc = advance_state(s, r->ns, r->agent, r->session, r->generation, BRIG_STORE_RUNNING, c->name, c->id,
				   err);
	brig_store_session_free(r);
	if (rc) {
		brig_computer_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* What the checkpoint taken before an uncertain stop left. */
typedef struct stop_checkpoint {
	brig_store *s;
	const char *dir;
	int64_t id;   /* 0: none was taken */
	char *failed; /* why not, when it was tried */
} stop_checkpoint;

/* brig_exec_opts.before_stop of a session's exec: the computer is about to
 * be stopped with whatever the command did so far; keep it if the daemon
 * still answers (the checkpoint freezes the computer while it copies). */
static void checkpoint_before_stop(brig_engine *e, const char *container_id, void *payload)
{
	stop_checkpoint *sc = payload;
	brig_store_checkpoint *cp = NULL;
	brig_error *err = NULL;
	brig_checkpoint_opts co = {.version = BRIG_CHECKPOINT_OPTS_VERSION, .dir = sc->dir};
	if (brig_checkpoint_create(e, sc->s, &cp, container_id, &co, &err) == 0)
		sc->id = cp->id;
	else
		sc->failed = xstrdup(brig_error_message(err) ? brig_error_message(err) : "no detail");
	brig_store_checkpoint_free(cp);
	brig_error_free(err);
}

static int session_exec(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts, bool keep,
			const char *dir, const char *actor, brig_exec_result *res, brig_error **err);
static int audit_exec(brig_store *s, const brig_computer *c, const brig_exec_opts *opts, const char *actor, int rc,
		      brig_exec_result *res, brig_error **err);

int brig_session_exec(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts, brig_exec_result *res,
		      brig_error **err)
{
	return session_exec(e, s, ref, opts, false, NULL, NULL, res, err);
}

int brig_session_exec_keep(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts,
			   const char *checkpoint_dir, brig_exec_result *res, brig_error **err)
{
	return session_exec(e, s, ref, opts, true, checkpoint_dir, NULL, res, err);
}

int brig_session_exec_by(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts,
			 const char *checkpoint_dir, const char *actor, brig_exec_result *res, brig_error **err)
{
	return session_exec(e, s, ref, opts, true, checkpoint_dir, actor, res, err);
}

static int session_exec(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts, bool keep,
			const char *dir, const char *actor, brig_exec_result *res, brig_error **err)
{
	stop_checkpoint sc = {.s = s, .dir = dir};
	brig_exec_opts o;
	const brig_exec_opts *use = opts;
	if (keep && s && opts && opts->version >= 1 && opts->version <= BRIG_EXEC_OPTS_VERSION) {
		memset(&o, 0, sizeof o);
		/* a version-1 caller's struct ends before the hook */
		memcpy(&o, opts, opts->version >= 2 ? sizeof o : offsetof(brig_exec_opts, before_stop));
		if (!o.before_stop) {
			o.version = BRIG_EXEC_OPTS_VERSION;
			o.before_stop = checkpoint_before_stop;
			o.stop_payload = &sc;
			use = &o;
		}
	}
	brig_computer *c = NULL;
	/* One inspect for the computer and the exec (issue 16: each is ~1 ms
	 * of a tool call that should cost a few). */
	int rc = brig_computer__exec_get(e, &c, ref, use, res, err);
	if (!c) {
		free(sc.failed);
		return rc;
	}
	if (rc && err && *err && (sc.id || sc.failed) && c->ns && c->agent && c->session) {
		/* The message says what became of the work. */
		brig_error *old = *err;
		*err = NULL;
		if (sc.id)
			brig__error_set_http(
				err, old->code, old->http_status,
				"%s; checkpoint %lld was taken just before the stop (brig recover restores "
				"it)",
				old->message, (long long)sc.id);
		else
			brig__error_set_http(err, old->code, old->http_status,
					     "%s; no checkpoint could be taken before the stop (%s): what the command "
					     "did since the last one is lost",
					     old->message, sc.failed);
		if (*err)
			(*err)->sys_errno = old->sys_errno;
		brig_error_free(old);
	}
	res->stop_checkpoint_id = sc.id;
	res->stop_checkpoint_failed = sc.failed != NULL;
	free(sc.failed);
	rc = audit_exec(s, c, opts, actor, rc, res, err);
	brig_computer_free(c);
	return rc;
}

/* The audit row of a command that ran in c (a session's computer), by actor
 * (NULL: this process's OS user), and the session marked failed when the
 * computer stopped; rc is the exec's and comes back unless it was 0 and the
 * store failed. */
static int audit_exec(brig_store *s, const brig_computer *c, const brig_exec_opts *opts, const char *actor, int rc,
		      brig_exec_result *res, brig_error **err)
{
	bool ran = rc == 0 || res->timed_out || res->canceled || res->uncertain;
	if (s && ran && c->ns && c->agent && c->session) {
		json_t *argv = json_array();
		for (const char *const *a = opts->argv; a && *a; a++) {
			json_t *v = json_string(*a);
			json_array_append_new(argv, v ? v : json_string("(not UTF-8)"));
		}
		cleanup_free char *argv_text = json_dumps(argv, JSON_COMPACT);
		json_decref(argv);
		const char *outcome = res->timed_out ? "timeout"
				      : res->canceled ? "cancel"
				      : res->uncertain ? "uncertain"
				      : rc ? "error"
					   : "ok";
		brig_store_audit a = {.ns = c->ns,
				      .agent = c->agent,
				      .session = c->session,
				      .generation = c->generation,
				      .container_name = c->name,
				      .argv_json = argv_text,
				      .exit_code = res->exit_code,
				      .timed_out = res->timed_out,
				      .outcome = (char *)outcome,
				      .duration_ms = res->duration_ms,
				      .stdout_bytes = (int64_t)res->out.total,
				      .stderr_bytes = (int64_t)res->err.total,
				      .actor = (char *)actor};
		brig_error *serr = NULL;
		int src = brig_store_audit_add(s, NULL, &a, &serr);
		/* A computer whose brig-init ended the command keeps running with
		 * its files: only a stopped computer (or an uncertain end) fails the
		 * session. */
		if (src == 0 && (res->container_stopped || res->uncertain))
			src = brig_session_mark_failed(s, c->ns, c->agent, c->session, c->generation, &serr);
		if (src && rc == 0) {
			rc = src;
			brig__error_move(err, steal_pointer(&serr));
		}
		brig_error_free(serr);
	}
	return rc;
}

int brig_session_exec_tty(brig_engine *e, brig_store *s, const char *ref, const brig_exec_opts *opts, const char *actor,
			  int rows,
			  int cols, int resize_fd, void (*size_cb)(int *rows, int *cols, void *payload),
			  void *size_payload, brig_exec_result *res, brig_error **err)
{
	int rc = brig_computer_exec_tty(e, ref, opts, rows, cols, resize_fd, size_cb, size_payload, res, err);
	if (!s)
		return rc;
	brig_computer *c = NULL;
	brig_error *gerr = NULL;
	if (brig_computer_get(e, &c, ref, NULL, &gerr) != 0) {
		/* gone since (a stop): nothing to record it under */
		brig_error_free(gerr);
		return rc;
	}
	rc = audit_exec(s, c, opts, actor, rc, res, err);
	brig_computer_free(c);
	return rc;
}

void brig_recover_result_clear(brig_recover_result *r)
{
	if (!r)
		return;
	brig_computer_free(r->computer);
	memset(r, 0, sizeof *r);
}

static bool container_alive(brig_engine *e, const char *name)
{
	json_t *j = NULL;
	bool alive = false;
	if (brig_engine_container_inspect(e, &j, name, NULL) == 0)
		alive = json_is_true(json_object_get(json_object_get(j, "State"), "Running"));
	if (j)
		json_decref(j);
	return alive;
}

/* A generation in state creating is being made by another brig (a recover
 * that won the CAS and is still restoring, or an up): racers wait for it
 * instead of advancing past it — which would destroy it mid-restore. One
 * that stays creating this long was abandoned (its brig died) and may be
 * recovered. */
#define CREATING_GRACE_MS (120 * 1000)

/* Re-reads *r until it leaves creating or its creation looks abandoned. */
static int wait_creating(brig_store *s, brig_store_session **r, brig_error **err)
{
	while ((*r)->state == BRIG_STORE_CREATING && brig_wall_ms() - (*r)->updated_ms < CREATING_GRACE_MS) {
		struct timespec ts = {0, 100 * 1000000L};
		nanosleep(&ts, NULL);
		brig_store_session *n = NULL;
		int rc = brig_store_session_get(s, &n, (*r)->ns, (*r)->agent, (*r)->session, err);
		if (rc)
			return rc;
		brig_store_session_free(*r);
		*r = n;
	}
	return 0;
}

/* Another brig recovered the session into r's generation: use its computer. */
static int adopt_generation(brig_engine *e, brig_recover_result *out, const brig_store_session *r, brig_error **err)
{
	out->won = false;
	out->new_generation = r->generation;
	if (r->state != BRIG_STORE_RUNNING && r->state != BRIG_STORE_PAUSED)
		return brig__error_set(err, BRIG_ESTATE, 0,
				       "session %s/%s/%s was recovered by another brig at the same time, but its "
				       "generation %lld is %s; run brig recover again",
				       r->ns, r->agent, r->session, (long long)r->generation,
				       brig_store_state_to_string(r->state));
	return brig_computer_get(e, &out->computer, r->container_name, NULL, err);
}

/* The session's checkpoint id (0: its latest), verified before the session
 * moves (a bad blob changes nothing); *cp stays NULL when it has none. */
static int usable_checkpoint(brig_store *s, brig_store_checkpoint **cp, const char *cdir, const char *ns,
			     const char *agent, const char *session, int64_t id, brig_error **err)
{
	*cp = NULL;
	int rc;
	if (id > 0) {
		rc = brig_store_checkpoint_get(s, cp, id, err);
		if (rc == BRIG_ENOTFOUND)
			return brig__error_set(err, BRIG_ENOTFOUND, 0,
					       "recover %s/%s/%s: no checkpoint %lld in the store (brig checkpoints "
					       "lists the session's); nothing was changed",
					       ns, agent, session, (long long)id);
		if (rc)
			return rc;
		if (strcmp((*cp)->ns, ns) != 0 || strcmp((*cp)->agent, agent) != 0 ||
		    strcmp((*cp)->session, session) != 0) {
			rc = brig__error_set(err, BRIG_EINVAL, 0,
					     "recover %s/%s/%s: checkpoint %lld belongs to session %s/%s/%s; nothing "
					     "was changed",
					     ns, agent, session, (long long)id, (*cp)->ns, (*cp)->agent,
					     (*cp)->session);
			brig_store_checkpoint_free(*cp);
			*cp = NULL;
			return rc;
		}
	} else {
		rc = brig_store_checkpoint_latest(s, cp, ns, agent, session, err);
		if (rc == BRIG_ENOTFOUND) {
			brig__error_clear(err);
			*cp = NULL;
			return 0;
		}
		if (rc)
			return rc;
	}
	cleanup_free char *path = xasprintf("%s/%s", cdir, (*cp)->blob);
	brig_tar_restore *chk = NULL;
	rc = brig_tar_restore_open(&chk, AT_FDCWD, path, (*cp)->digest, err);
	brig_tar_restore_free(chk);
	if (rc)
		brig__error_prefix(err, rc, "recover %s/%s/%s: %scheckpoint %lld is unusable; nothing was changed", ns,
				   agent, session, id > 0 ? "" : "latest ", (long long)(*cp)->id);
	return rc;
}

/* The spec the session was started with, from its record. */
static int recorded_spec(brig_spec *spec, const brig_store_session *r, brig_error **err)
{
	if (!r->spec_json)
		return brig__error_set(err, BRIG_EINVAL, 0, "session %s/%s/%s has no recorded spec", r->ns, r->agent,
				       r->session);
	json_t *j = json_loads(r->spec_json, 0, NULL);
	int rc = j ? brig_spec_from_json(spec, j, err)
		   : brig__error_set(err, BRIG_ECORRUPT, 0, "session's recorded spec is not JSON");
	if (j)
		json_decref(j);
	return rc;
}

/* The CAS to generation gen lost: a racer advanced the session. Wait for its
 * restore, then adopt its generation (restoring nothing ourselves). */
static int adopt_racer(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns, const char *agent,
		       const char *session, int64_t gen, brig_error **err)
{
	brig_store_session *now = NULL;
	int rc = brig_store_session_get(s, &now, ns, agent, session, err);
	if (rc)
		return rc;
	if (now->generation == gen && (rc = wait_creating(s, &now, err)) != 0) {
		brig_store_session_free(now);
		return rc;
	}
	if (now->generation != gen)
		rc = brig__error_set(err, BRIG_ECONFLICT, 0,
				     "session %s/%s/%s changed while recovering; look at it again", ns, agent, session);
	else
		rc = adopt_generation(e, out, now, err);
	brig_store_session_free(now);
	return rc;
}

/* Creates the won generation's computer and restores cp (may be NULL) into
 * it. A half-restored generation must not run on: on failure it is marked
 * failed and removed, and the verified checkpoint is still there for the
 * next recover. */
static int build_generation(brig_engine *e, brig_store *s, brig_recover_result *out, const brig_identity *nid,
			    const brig_spec *spec, const char *cdir, const brig_store_checkpoint *cp, brig_error **err)
{
	int rc = brig_computer_create(e, &out->computer, nid, spec, err);
	if (rc == 0 && cp) {
		rc = brig_checkpoint_restore(e, cdir, cp, out->computer->id, err);
		out->checkpoint_id = cp->id;
	}
	if (rc) {
		brig_session_mark_failed(s, nid->ns, nid->agent, nid->session, out->new_generation, NULL);
		if (out->computer) {
			brig_computer_destroy(e, out->computer->name, NULL);
			brig_computer_free(out->computer);
			out->computer = NULL;
		}
	}
	return rc;
}

/* Every generation older than gen goes, container and volumes — also one
 * that an earlier, failed recover left behind. */
static void remove_older(brig_engine *e, const char *old_name, const char *ns, const char *agent, const char *session,
			 int64_t gen)
{
	brig_computer_destroy(e, old_name, NULL);
	brig_computer **older = NULL;
	size_t nolder = 0;
	if (brig_computer_list(e, &older, &nolder, ns, NULL, NULL) != 0)
		return;
	for (size_t i = 0; i < nolder; i++) {
		brig_computer *o = older[i];
		if (o->agent && o->session && strcmp(o->agent, agent) == 0 && strcmp(o->session, session) == 0 &&
		    o->generation < (uint32_t)gen)
			brig_computer_destroy(e, o->name, NULL);
	}
	brig_computer_free_array(older, nolder);
}

int brig_session_recover(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns,
			 const char *agent, const char *session, const char *dir, brig_error **err)
{
	return recover(e, s, out, ns, agent, session, dir, 0, 0, err);
}

int brig_session_recover_at(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns, const char *agent,
			    const char *session, const char *dir, int64_t checkpoint_id, brig_error **err)
{
	if (checkpoint_id < 0)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "checkpoint id: must be 0 (the latest) or a checkpoint's id");
	return recover(e, s, out, ns, agent, session, dir, 0, checkpoint_id, err);
}

/* lost_gen > 0: the caller found that generation's computer had lost its
 * files (brig_computer_check_files), so it is recovered although it may
 * still run, empty. */
static int recover(brig_engine *e, brig_store *s, brig_recover_result *out, const char *ns, const char *agent,
		   const char *session, const char *dir, int64_t lost_gen, int64_t checkpoint_id, brig_error **err)
{
	memset(out, 0, sizeof *out);
	brig_store_session *r = NULL;
	brig_store_checkpoint *cp = NULL;
	cleanup_free char *cdir = NULL;
	cleanup_free char *old_name = NULL;
	brig_spec spec;
	bool have_spec = false;
	int rc = brig_store_session_get(s, &r, ns, agent, session, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0, "no session %s/%s/%s in the store", ns, agent, session);
	if (rc)
		return rc;
	if (r->state == BRIG_STORE_CREATING) {
		int64_t g = r->generation;
		if ((rc = wait_creating(s, &r, err)) != 0)
			goto out;
		if (r->generation == g && (r->state == BRIG_STORE_RUNNING || r->state == BRIG_STORE_PAUSED)) {
			out->old_generation = g - 1;
			rc = adopt_generation(e, out, r, err);
			goto out;
		}
	}
	int64_t gen = r->generation;
	out->old_generation = gen;
	{
		brig_identity oid = {r->ns, r->agent, r->session, (uint32_t)gen};
		char n[BRIG_NAME_SIZE];
		if ((rc = brig_identity_name(n, &oid, err)) != 0)
			goto out;
		old_name = xstrdup(r->container_name ? r->container_name : n);
	}
	if (r->state != BRIG_STORE_FAILED && r->state != BRIG_STORE_CREATING && gen != lost_gen &&
	    container_alive(e, old_name)) {
		rc = brig__error_set(
			err, BRIG_ESTATE, 0, "session %s/%s/%s generation %lld is running; nothing to recover%s", ns,
			agent, session, (long long)gen,
			checkpoint_id ? " (to go back to an older checkpoint, take one of what it has now, "
					"then brig stop it and recover again)"
				      : "");
		goto out;
	}
	if (dir)
		cdir = xstrdup(dir);
	else if ((rc = brig_checkpoint_dir(&cdir, s, err)) != 0)
		goto out;
	if ((rc = usable_checkpoint(s, &cp, cdir, ns, agent, session, checkpoint_id, err)) != 0)
		goto out;
	if ((rc = recorded_spec(&spec, r, err)) != 0)
		goto out;
	have_spec = true;

	/* Advance by CAS: exactly one racer moves gen → gen + 1. */
	brig_identity nid = {r->ns, r->agent, r->session, (uint32_t)(gen + 1)};
	char new_name[BRIG_NAME_SIZE];
	if ((rc = brig_identity_name(new_name, &nid, err)) != 0)
		goto out;
	out->new_generation = gen + 1;
	brig_store_session *w = session_dup(r);
	w->generation = gen + 1;
	w->state = BRIG_STORE_CREATING;
	set_str(&w->container_name, new_name);
	set_str(&w->container_id, NULL);
	brig_store_session *done = NULL;
	rc = brig_store_session_cas(s, &done, w, r->revision, err);
	brig_store_session_free(w);
	brig_store_session_free(done);
	if (rc == BRIG_ECONFLICT) {
		brig__error_clear(err);
		rc = adopt_racer(e, s, out, ns, agent, session, gen + 1, err);
		goto out;
	}
	if (rc)
		goto out;
	out->won = true;
	if ((rc = build_generation(e, s, out, &nid, &spec, cdir, cp, err)) != 0)
		goto out;
	if ((rc = advance_state(s, ns, agent, session, gen + 1, BRIG_STORE_RUNNING, out->computer->name,
				out->computer->id, err)) != 0)
		goto out;
	remove_older(e, old_name, ns, agent, session, gen + 1);
out:
	if (have_spec)
		brig_spec_clear(&spec);
	brig_store_checkpoint_free(cp);
	brig_store_session_free(r);
	return rc;
}
