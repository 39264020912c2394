/* sessions.c — a session's computer as Docker sees it, the store put right
 * when it lost its files, and a session removed (sessions.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/session.h"
#include "ops/sessions.h"
#include "util/util.h"

int ops_session_observe(brig_engine *e, brig_store *s, brig_store_session *r, ops_session_seen *out, brig_error **err)
{
	memset(out, 0, sizeof *out);
	if (!e) {
		snprintf(out->computer, sizeof out->computer, "unknown");
		return 0;
	}
	if (!r->container_name) {
		snprintf(out->computer, sizeof out->computer, "gone");
	} else {
		json_t *j = NULL;
		int rc = brig_engine_container_inspect(e, &j, r->container_name, NULL);
		const char *st = NULL;
		if (rc == 0)
			st = json_string_value(json_object_get(json_object_get(j, "State"), "Status"));
		else if (rc == BRIG_ENOTFOUND)
			st = "gone";
		snprintf(out->computer, sizeof out->computer, "%s", st ? st : "unknown");
		json_decref(j);
	}
	bool live = r->state == BRIG_STORE_RUNNING || r->state == BRIG_STORE_PAUSED;
	bool gone = strcmp(out->computer, "gone") == 0;
	if (!live || !(gone || strcmp(out->computer, "exited") == 0 || strcmp(out->computer, "dead") == 0))
		return 0;
	out->fixed = true;
	out->was = r->state;
	out->now = gone ? BRIG_STORE_DESTROYED : BRIG_STORE_STOPPED;
	int rc = brig_session_mark(s, r->ns, r->agent, r->session, r->generation, out->now, err);
	if (rc == 0)
		r->state = out->now;
	return rc;
}

int ops_session_remove(brig_engine *e, brig_store *s, const brig_store_session *r, bool force, bool checkpoints,
		       ops_session_destroyed_cb destroyed, void *payload, ops_session_removed *out, brig_error **err)
{
	const char *ns = r->ns, *agent = r->agent, *session = r->session;
	memset(out, 0, sizeof *out);
	brig_store_checkpoint *cps = NULL;
	size_t ncp = 0;
	int rc = checkpoints ? 0 : brig_store_checkpoint_list(s, &cps, &ncp, ns, agent, session, err);
	brig_store_checkpoint_free_array(cps, ncp);
	if (rc != 0)
		return rc;
	brig_computer **cs = NULL;
	size_t n = 0;
	cleanup_free char *label = xasprintf(BRIG_LABEL_SESSION "=%s", session);
	rc = brig_computer_list(e, &cs, &n, ns, label, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!cs[i]->agent || strcmp(cs[i]->agent, agent) != 0)
			continue;
		if (!force) {
			rc = brig__error_set(
				err, BRIG_ECONFLICT, 0,
				"session %s/%s/%s still has computer %s (generation %u, %s): destroy it "
				"first, or pass --force to destroy it with the session; nothing was removed",
				ns, agent, session, cs[i]->name, cs[i]->generation,
				cs[i]->state ? cs[i]->state : "state unknown");
			break;
		}
		rc = brig_computer_destroy(e, cs[i]->name, err);
		if (rc != 0) {
			brig__error_prefix(err, rc, "sessions rm: the session stays in the store");
			break;
		}
		if (destroyed)
			destroyed(cs[i]->name, cs[i]->generation, payload);
	}
	brig_computer_free_array(cs, n);
	if (rc == 0)
		rc = brig_session_remove(s, NULL, ns, agent, session, checkpoints, &out->removed, err);
	if (rc == 0)
		out->kept = ncp;
	return rc;
}
