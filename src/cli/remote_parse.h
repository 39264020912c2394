/* remote_parse.h — the pure parts of the CLI as a client of `brig serve`
 * (no I/O, fuzzed by tests/fuzz/fuzz_remote.c): the NDJSON stream split
 * into lines, and a computer and the store's records read back from the
 * server's JSON. */
#ifndef BRIG_CLI_REMOTE_PARSE_H
#define BRIG_CLI_REMOTE_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "brig/sandbox.h"
#include "brig/store.h"
#include "util/util.h"

/* The longest NDJSON line taken (an output chunk, escaped). */
#define CLI_NDJSON_LINE_CAP (4 * 1024 * 1024)

typedef struct cli_ndjson {
	brig_buf line;
	int (*cb)(json_t *line, void *payload);
	void *payload;
	int stop;      /* the callback's non-zero answer */
	bool too_long; /* a line passed CLI_NDJSON_LINE_CAP */
	bool lines;    /* split into lines; false: everything is collected in line (an error answer) */
} cli_ndjson;

void cli_ndjson_init(cli_ndjson *s, int (*cb)(json_t *line, void *payload), void *payload);
void cli_ndjson_clear(cli_ndjson *s);
/* A brig_http_body_cb: splits data at newlines and hands each line, parsed,
 * to cb (borrowed). Returns 0, BRIG_ETOOBIG (too_long), BRIG_EPROTO (a line
 * is not JSON) or BRIG_ECANCELED (cb answered non-zero: stop). */
int cli_ndjson_feed(const char *data, size_t len, void *payload);

/* The computer of the server's JSON (brig_computer_to_json's form); fields
 * of the wrong type are left empty. Never fails; free with
 * brig_computer_free. */
brig_computer *cli_remote_computer(json_t *j);

/* The store's records of the server's JSON, filled into *out (zeroed
 * first), so the direct path's printers print them: strings the printers
 * need (names, digest) are "" when the server left them out or sent
 * another type, the others NULL; numbers of the wrong type are 0. Never
 * fail; free with the store's *_free_array. */
/* A session of GET /v1/sessions (container: the container's name). */
void cli_remote_session_parse(brig_store_session *out, json_t *j);
/* A checkpoint of GET …/checkpoints, of session ns/agent/session. */
void cli_remote_checkpoint_parse(brig_store_checkpoint *out, json_t *j, const char *ns, const char *agent,
				 const char *session);
/* A session of GET /v1/sessions' forgotten list: its newest checkpoint
 * (latest_checkpoint, updated_ms) and how many it has (checkpoints). */
void cli_remote_forgotten_parse(brig_store_checkpoint *out, json_t *j);
/* A command of GET …/history, of session ns/agent/session (argv_json: the
 * argv written back compactly; an outcome of "" is none). */
void cli_remote_audit_parse(brig_store_audit *out, json_t *j, const char *ns, const char *agent, const char *session);

#endif
