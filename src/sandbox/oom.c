/* oom.c — OOM kills of exec'd commands, which Docker records only as an
 * "oom" event on the container (State.OOMKilled is about PID 1). */
#include <jansson.h>

#include "sandbox/oom.h"
#include "util/util.h"

static int saw_oom(json_t *event, void *payload)
{
	(void)event; /* the filter already says it is this container's oom */
	*(bool *)payload = true;
	return 1; /* stop the stream */
}

bool brig_sandbox__oom_since(brig_engine *e, const char *id, int64_t since_unix)
{
	bool oom = false;
	cleanup_json json_t *filters =
		json_pack("{s:[s], s:[s], s:[s]}", "type", "container", "event", "oom", "container", id);
	/* until one second ahead: the kernel kills before the shim reports, so
	 * the event can trail the command's exit by a moment. The local clock
	 * stands in for the daemon's; a skewed remote daemon widens since. */
	int64_t now = brig_wall_s();
	brig_engine_events(e, since_unix > 2 ? since_unix - 2 : 1, now + 1, filters, brig_now_ms() + 3000, saw_oom,
			   &oom, NULL);
	return oom;
}
