/* sessions.c — a session's computer as Docker sees it, and the store put
 * right when it lost its files (sessions.h). */
#include <stdio.h>
#include <string.h>

#include "brig/session.h"
#include "ops/sessions.h"

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
