/* ledger.h — the egress ledger as JSON, one shape for `brig egress log
 * --json` and GET /v1/egress/log (whose rows the CLI prints when it goes
 * through a server). Private to src/.
 */
#ifndef BRIG_OPS_LEDGER_H
#define BRIG_OPS_LEDGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "brig/store.h"

/* One ledger row: id, sandbox, host, port, decision, reason, bytes_up,
 * bytes_down, start_ms, duration_ms, and session {ns, agent, session}
 * when the sandbox was a session's computer. New reference. */
json_t *ops_ledger_row_json(const brig_store_egress *r);

/* Reads a row made by ops_ledger_row_json into *r, whose strings point
 * into j (valid while j lives; ns, agent and session NULL without a
 * session). False when j lacks a field or holds one of the wrong type. */
bool ops_ledger_row_parse(const json_t *j, brig_store_egress *r);

#endif
