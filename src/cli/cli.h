/* cli.h — what the `brig` command files share: the command table's entry
 * points, exit codes, error printing, flag parsing, engine opening, JSON
 * output and the cancel pipe that turns Ctrl-C into a clean stop. */
#ifndef BRIG_CLI_H
#define BRIG_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/engine.h"
#include "brig/error.h"
#include "brig/sandbox.h"
#include "brig/spec.h"

/* Exit codes, as `docker run` and `timeout` use them. A command's own exit
 * code passes through unchanged. */
#define CLI_EXIT_TIMEOUT 124  /* a deadline passed */
#define CLI_EXIT_FAIL 125     /* brig itself failed (usage, daemon, policy) */
#define CLI_EXIT_NOEXEC 126   /* the command could not be invoked */
#define CLI_EXIT_NOTFOUND 127 /* the command was not found */
#define CLI_EXIT_CANCELED 130 /* SIGINT/SIGTERM, as a shell reports it */

/* One entry of the commands[] table in main.c. fn gets argv with argv[0]
 * the command's name and returns the process's exit code. */
typedef struct cli_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} cli_command;

int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_destroy(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_network(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_checkpoints(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_fs(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_kill(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_port(int argc, char **argv);
int cmd_sessions(int argc, char **argv);
int cmd_history(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_egress(int argc, char **argv);
int cmd_egress_proxy(int argc, char **argv);

/* --debug: error messages also carry the code name and HTTP status. */
extern bool cli_debug;

/* ---- diagnostics (stderr, "brig: " prefix) ---- */

/* Prints "brig: <message>" and returns CLI_EXIT_FAIL. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "brig: <message>" (a note or warning; no exit code implied). */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints err as "brig: <message>" (context first when given: "context:
 * message"), frees it and returns CLI_EXIT_FAIL. Library messages are
 * already free of secrets. err may be NULL (then a generic message). */
int cli_error(brig_error *err, const char *context);
/* "brig: <cmd>: <problem> (see 'brig <cmd> --help')"; returns CLI_EXIT_FAIL. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints help text to stdout; returns 0. */
int cli_help(const char *text);

/* ---- argument parsing (args.c; no library calls, unit-tested) ---- */

/* Parses a whole number for flag (e.g. "--gen") within [min, max]. On error
 * prints "brig: --gen: …" naming the flag and the range, returns
 * CLI_EXIT_FAIL; 0 on success. */
int cli_parse_i64(const char *flag, const char *s, int64_t min, int64_t max, int64_t *out);
/* Parses a decimal number (no inf/nan) within [min, max]; as above. */
int cli_parse_double(const char *flag, const char *s, double min, double max, double *out);
/* Parses a duration into milliseconds: a number of seconds ("30", "1.5")
 * or a number with one unit suffix: ms, s, m, h, d ("90m", "24h",
 * "3600s"). Accepts [min_ms, max_ms]; as above. */
int cli_parse_duration_ms(const char *flag, const char *s, int64_t min_ms, int64_t max_ms, int64_t *out);

/* Writes ms as seconds for messages: "5s", "1.5s", "90s". */
void cli_format_secs(char *out, size_t n, int64_t ms);

/* getopt_long over argv (optind must be reset to 0 by the caller before
 * the first call on a new argv), with opterr off: unknown options and
 * missing arguments are reported here as usage errors of cmd and give
 * '?'. *dashdash (may be NULL) is set when -1 comes from a "--" that
 * getopt consumed, so callers can tell "options ended at --" from "options
 * ended at the first operand". shortopts should start with "+:". */
int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts, const struct option *longopts,
	       bool *dashdash);

/* A growing array of borrowed strings (repeated flags such as -e, --in). */
typedef struct cli_strv {
	const char **v; /* NULL-terminated when count > 0 */
	size_t count;
	size_t alloc;
} cli_strv;
void cli_strv_add(cli_strv *sv, const char *s);
void cli_strv_free(cli_strv *sv);
/* Frees the array and the strings (a strv that owns them). */
void cli_strv_free_all(cli_strv *sv);
/* Reads an --env-file in docker's format: one KEY=VALUE or KEY (copied
 * from brig's environment, as -e KEY) per line; leading blanks, blank lines
 * and lines starting with # are skipped; a CR before the LF goes. Appends
 * each entry (malloc'd: free with cli_strv_free_all) to out; the entries
 * are validated where -e's are. A NUL byte is refused; no message shows a
 * line. Returns 0 or CLI_EXIT_FAIL (message printed). */
int cli_env_file_read(cli_strv *out, const char *path);

/* ---- shared helpers (cli.c) ---- */

/* Opens the engine from DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH
 * (-H sets DOCKER_HOST). On failure prints why — and, when no daemon
 * answered, how to start one — and returns CLI_EXIT_FAIL. */
int cli_engine_open(brig_engine **out);

/* Prints j (consumed: the reference is released) to stdout, indented with
 * sorted keys, and a newline. Returns 0 or CLI_EXIT_FAIL when stdout
 * fails. */
int cli_print_json(json_t *j);

/* Writes s to stdout with bytes that could drive a terminal (controls,
 * DEL) replaced by '?': every string shown in human output came from the
 * daemon or from labels, which are untrusted. */
void cli_put_safe(const char *s);

/* Long options shared by create and run that map onto spec fields; each
 * command splices CLI_SPEC_LONGOPTS into its option table. -e/--env is
 * also a spec flag (key "env"), and so is --env-file (key "env-file"). */
enum {
	CLI_OPT_IMAGE = 0x200,
	CLI_OPT_CPUS,
	CLI_OPT_MEMORY_MB,
	CLI_OPT_PIDS,
	CLI_OPT_WORKSPACE_MB,
	CLI_OPT_RUNTIME_MB,
	CLI_OPT_NETWORK,
	CLI_OPT_SUBNET,
	CLI_OPT_HARNESS,
	CLI_OPT_LABEL,
	CLI_OPT_ENV_FILE,
	CLI_OPT_PUBLISH, /* computers only: create and up splice CLI_PUBLISH_LONGOPT */
	CLI_OPT_ALLOW,
	CLI_OPT_RUNTIME,
	CLI_OPT_SECRET,
	CLI_OPT_SPEC_END, /* commands number their own options from here */
};
#define CLI_SPEC_LONGOPTS                                                                                   \
	{"image", required_argument, NULL, CLI_OPT_IMAGE}, {"cpus", required_argument, NULL, CLI_OPT_CPUS}, \
		{"memory-mb", required_argument, NULL, CLI_OPT_MEMORY_MB},                                  \
		{"pids", required_argument, NULL, CLI_OPT_PIDS},                                            \
		{"workspace-mb", required_argument, NULL, CLI_OPT_WORKSPACE_MB},                            \
		{"runtime-mb", required_argument, NULL, CLI_OPT_RUNTIME_MB},                                \
		{"network", required_argument, NULL, CLI_OPT_NETWORK},                                      \
		{"subnet", required_argument, NULL, CLI_OPT_SUBNET},                                        \
		{"harness", required_argument, NULL, CLI_OPT_HARNESS},                                      \
		{"label", required_argument, NULL, CLI_OPT_LABEL},                                          \
		{"env-file", required_argument, NULL, CLI_OPT_ENV_FILE},                                    \
		{"allow", required_argument, NULL, CLI_OPT_ALLOW},                                          \
		{"runtime", required_argument, NULL, CLI_OPT_RUNTIME},                                      \
		{"secret", required_argument, NULL, CLI_OPT_SECRET},                                        \
	{                                                                                                   \
		"env", required_argument, NULL, 'e'                                                         \
	}
/* Help lines for -e and --env-file, written once. */
#define CLI_HELP_ENV                                                                                       \
	"  -e, --env KEY=VALUE     Environment entry (KEY alone copies brig's own value); repeatable\n"    \
	"      --env-file FILE     Entries from FILE, KEY=VALUE or KEY a line, # comments; keeps values\n" \
	"                          off brig's command line (`ps` shows -e values); repeatable\n"
/* -p/--publish, for the commands that make computers (create, up): their
 * shortopts take "p:". */
#define CLI_PUBLISH_LONGOPT                                       \
	{                                                         \
		"publish", required_argument, NULL, CLI_OPT_PUBLISH \
	}
#define CLI_HELP_PUBLISH                                                                                  \
	"  -p, --publish [IP:]HOST_PORT:PORT\n"                                                            \
	"                          Publish the computer's TCP PORT on the host, on 127.0.0.1 unless IP\n"  \
	"                          is named (0.0.0.0 opens it to the network); --network isolated\n"      \
	"                          only; repeatable. `brig port NAME` lists them\n"
/* Help line for --runtime, written once. */
#define CLI_HELP_RUNTIME                                                                              \
	"      --runtime NAME      OCI runtime the daemon registers: runsc (gVisor; see README) or\n" \
	"                          its default, runc (default $BRIG_RUNTIME, then the daemon's)\n"
/* The spec key of option value opt ("cpus", "env"…), or NULL when opt is
 * not a spec option. */
const char *cli_spec_key(int opt);

/* Spec flags shared by create and run: applies one to spec through
 * brig_spec_set()/add_env()/add_label() so every rule and message comes
 * from the library. key is the spec key ("cpus", "env", "label"…).
 * Returns 0 or CLI_EXIT_FAIL (message printed). */
int cli_spec_set(brig_spec *spec, const char *key, const char *value);
/* After the flags: the image falls back to $BRIG_IMAGE when --image was
 * not given (then to the spec's default), the runtime to $BRIG_RUNTIME when
 * none was chosen, and the spec is validated
 * without host limits so bad flags fail before anything is contacted.
 * Returns 0 or CLI_EXIT_FAIL. */
int cli_spec_finish(brig_spec *spec, bool image_given);

/* ---- naming a computer: NAME or its session (cli.c) ---- */

/* Opens url, else $BRIG_STORE, else the default; a SQLite path whose
 * directory does not exist is refused rather than made. Prints why on
 * failure and returns CLI_EXIT_FAIL. */
struct brig_store;
int cli_store_open(struct brig_store **out, const char *url);
/* As cli_store_open, but a SQLite store whose file does not exist is not
 * made: *out stays NULL and 0 is returned (nothing to update there). */
int cli_store_open_existing(struct brig_store **out, const char *url);
/* The current generation's container name of a session, from the store;
 * with fallback, a session the store does not know (s may be NULL) gets
 * its generation-1 name. *out is malloc'd. Returns 0 or CLI_EXIT_FAIL
 * (message printed). */
int cli_session_ref(char **out, struct brig_store *s, const char *ns, const char *agent, const char *session,
		    bool fallback);

/* The session flags every command that names a computer takes, spelled
 * once: commands splice CLI_TARGET_LONGOPTS (or CLI_SESSION_LONGOPTS,
 * without --gen, for commands that act on a whole session;
 * CLI_IDENTITY_LONGOPTS without --store for create) into their
 * table, hand each option to cli_target_opt() and name the computer with
 * cli_target_name(). Commands number their own options from
 * CLI_OPT_TARGET_END. */
enum {
	CLI_OPT_NS = CLI_OPT_SPEC_END,
	CLI_OPT_AGENT,
	CLI_OPT_SESSION,
	CLI_OPT_STORE,
	CLI_OPT_GEN,
	CLI_OPT_TARGET_END,
};
#define CLI_IDENTITY_LONGOPTS                                                                           \
	{"ns", required_argument, NULL, CLI_OPT_NS}, {"agent", required_argument, NULL, CLI_OPT_AGENT}, \
	{                                                                                               \
		"session", required_argument, NULL, CLI_OPT_SESSION                                     \
	}
#define CLI_SESSION_LONGOPTS                                    \
	CLI_IDENTITY_LONGOPTS,                                  \
	{                                                       \
		"store", required_argument, NULL, CLI_OPT_STORE \
	}
#define CLI_TARGET_LONGOPTS                                 \
	CLI_SESSION_LONGOPTS,                               \
	{                                                   \
		"gen", required_argument, NULL, CLI_OPT_GEN \
	}

/* Help lines for the shared flags, written once. */
#define CLI_HELP_STORE                                                                                   \
	"      --store URL         Session store: a SQLite path or sqlite:///path, or a postgresql://\n" \
	"                          URL (default $BRIG_STORE, then brig's data dir)\n"
#define CLI_HELP_SESSION                          \
	"      --ns NS, --agent A, --session S\n" \
	"                          The session (1-63 of A-Z a-z 0-9 _ . -)\n" CLI_HELP_STORE
#define CLI_HELP_TARGET                                                                             \
	"      --ns NS, --agent A, --session S\n"                                                   \
	"                          Name the computer by its session instead of NAME: the current\n" \
	"                          generation from the session store\n"                             \
	"      --gen N             That generation instead of the current one\n" CLI_HELP_STORE

typedef struct cli_target {
	brig_identity id; /* id.generation is 0 until --gen */
	bool id_given;    /* one of --ns/--agent/--session/--gen */
	const char *store;
} cli_target;

/* Takes opt when it is a session flag: returns 1 when it was (bad --gen:
 * message printed and *rc set to CLI_EXIT_FAIL), 0 when it was not. */
int cli_target_opt(cli_target *t, int opt, const char *arg, int *rc);
/* The session flags, all three and valid. Returns 0 or CLI_EXIT_FAIL
 * (usage of cmd printed). */
int cli_target_check(const char *cmd, const cli_target *t);
/* Names the computer of cmd: NAME (may be NULL) or the session flags,
 * exactly one of them. With --gen the name follows from the identity;
 * otherwise the store's current generation (s, may be NULL: then it is
 * opened from t->store for the look-up), with fallback the generation-1
 * name of a session the store does not know. *out is malloc'd. Returns 0
 * or CLI_EXIT_FAIL (message printed). */
int cli_target_name(char **out, const char *cmd, const cli_target *t, const char *name, struct brig_store *s,
		    bool fallback);

/* After the exact name was not found: the one brig computer whose name
 * starts with prefix (and is longer) goes to *out (malloc'd), returning 0;
 * 1 when none does (report the name as not found); CLI_EXIT_FAIL when
 * several do (message printed, naming them). */
int cli_name_prefix(brig_engine *e, const char *prefix, char **out);
/* After a call on *ref ended in rc: when rc is BRIG_ENOTFOUND, prefix is
 * set and *ref is a unique prefix, *ref is replaced by the full name, *err
 * freed and cleared, and 1 returned (make the call again); CLI_EXIT_FAIL
 * when the prefix is ambiguous (message printed, *err freed and cleared);
 * else 0 (*err kept: report it). */
int cli_prefix_again(brig_engine *e, int rc, bool prefix, char **ref, brig_error **err);
/* brig_computer_get of *ref; when not found and prefix, of the computer a
 * unique prefix names (*ref then replaced by its full name). Returns 0 or
 * CLI_EXIT_FAIL (message printed). */
int cli_computer_get(brig_engine *e, brig_computer **out, char **ref, bool prefix);
/* Opens the engine into *e, then a handle on *ref's brig-init (a unique
 * prefix as cli_computer_get takes one); brig_computer_guest's error (no
 * such computer, not running, no brig-init) printed in its words. Returns 0
 * or CLI_EXIT_FAIL. */
int cli_computer_guest(brig_engine **e, brig_guest **out, char **ref, bool prefix);

/* What brig_session_open did beyond the usual (recorded a computer found
 * in Docker, or replaced a lost one: ur->lost set): the checkpoint restored
 * into which generation, or that it started empty; one note on stderr.
 * Prints nothing when nothing was lost. */
struct brig_up_result;
void cli_up_report(const struct brig_up_result *ur);

/* ---- the end of a command in a computer (brig exec, brig agent) ---- */

typedef struct cli_exec_words {
	const char *label;    /* "exec", "claude": "<label> timed out after …", "<label> interrupted" */
	const char *noun;     /* "the command", "the agent" */
	const char *computer; /* as the user named it */
	const char *recover;  /* the command line that recovers its session */
	int64_t timeout_ms;
} cli_exec_words;

/* Turns brig_computer_exec's or brig_session_exec's answer (r, res, err) into
 * brig's exit code: the command's own, 124 timed out, 130 interrupted, 125
 * otherwise. A command that did not run to its end gets a note on what
 * happened to the computer and how to recover. Takes err. */
int cli_exec_end(int r, const brig_exec_result *res, brig_error *err, const cli_exec_words *w);

/* ---- periodic checkpoints (cli_every.c) ---- */

/* --checkpoint-every: a thread that checkpoints computer name (a session's)
 * into s every interval_ms, noting each (or its failure) on stderr, until
 * cli_every_stop. e and s are shared (both are thread-safe). NULL (nothing
 * started) when interval_ms is 0 or s is NULL. */
typedef struct cli_every cli_every;
cli_every *cli_every_start(brig_engine *e, struct brig_store *s, const char *name, int64_t interval_ms);
/* Stops the thread, after a checkpoint in progress; accepts NULL. */
void cli_every_stop(cli_every *ev);
/* Help line for --checkpoint-every, written once. */
#define CLI_HELP_EVERY                                                                                     \
	"      --checkpoint-every D  While it runs, checkpoint the session's computer every D (90s,\n" \
	"                          10m; at least 1s); each is a full copy: brig checkpoint --keep prunes\n"

/* ---- terminals (cli_tty.c) ---- */

/* brig_session_exec_tty (audited in store s, may be NULL) with the caller's
 * terminal: raw mode while the command runs (when opts->stdin_fd is 0 and a
 * terminal), its size and SIGWINCH resizes; the terminal is restored before
 * returning, at exit and by a second interrupt. */
int cli_exec_tty(brig_engine *e, struct brig_store *s, const char *ref, const brig_exec_opts *opts,
		 brig_exec_result *res, brig_error **err);
/* The parts of cli_exec_tty, for exec -t through a server: raw mode when
 * raw and stdin is a terminal (restored by cli_tty_end, at exit, by a second
 * interrupt); *rows, *cols the terminal's size (24x80 without one);
 * *winch_fd readable after a SIGWINCH (-1: none; drain it, then ask
 * cli_tty_size). */
void cli_tty_begin(bool raw, int *rows, int *cols, int *winch_fd);
void cli_tty_size(int *rows, int *cols);
void cli_tty_end(void);
/* The terminal settings a second interrupt restores before it exits. */
struct termios;
void cli_tty_remember(const struct termios *t);
void cli_tty_forget(void);

/* ---- cancellation ---- */

/* Installs SIGINT/SIGTERM/SIGHUP handlers that write one byte to a
 * self-pipe and returns its read end, for brig_exec_opts.cancel_fd /
 * brig_run_opts.cancel_fd. A second signal prints a note and exits 130 at
 * once, leaving cleanup to the library's safety nets (`brig gc`). Returns
 * -1 (with a note printed) if the pipe cannot be made: commands then run
 * without a cancel path. */
int cli_cancel_install(void);
/* True once a cancelling signal arrived. */
bool cli_canceled(void);

/* ---- output streaming ---- */

/* brig_engine_output_cb that writes stdout/stderr frames straight to fds
 * 1/2 as they arrive. payload is a cli_output. A closed reader (EPIPE) or
 * a failing fd stops writing to that fd but never aborts the command. */
typedef struct cli_output {
	bool stdout_live; /* false with --json: stdout is only captured */
	bool stderr_live;
	bool stdout_dead, stderr_dead;
} cli_output;
int cli_output_cb(int stream, const char *data, size_t len, void *payload);

/* Relative age for tables ("5 seconds ago", "3 hours ago"). */
void cli_format_age(char *out, size_t n, int64_t created_unix);

/* ---- the CLI as a client of `brig serve` (remote.c; exec in cmd_exec.c) ---- */

/* $BRIG_HOST when set and not empty (-H brig+… sets it), else NULL: then
 * the CLI talks to Docker directly. */
const char *cli_remote_host(void);
/* Checks $BRIG_HOST's form (brig+unix:///PATH, brig+https://HOST:PORT with
 * BRIG_CERT_PATH); 0 when unset. Returns 0 or CLI_EXIT_FAIL (printed). */
int cli_remote_check(void);
/* Runs command argv[0] through the server when it goes through one; any
 * other command is refused (cli_remote_unsupported). */

/* "brig CMD does not go through a brig server yet; …"; CLI_EXIT_FAIL. */
int cli_remote_unsupported(const char *cmd);

/* One connection to the server, with BRIG_TOKEN as a bearer token (never
 * printed). Returns 0 or CLI_EXIT_FAIL (printed). */
typedef struct cli_remote cli_remote;
int cli_remote_open(cli_remote **out);
void cli_remote_free(cli_remote *r);
/* A request with a JSON body (may be NULL); *out is the 2xx answer's JSON.
 * An error answer's message is printed: returns CLI_EXIT_FAIL. */
int cli_remote_call(cli_remote *r, const char *method, const char *target, json_t *body, json_t **out);
/* The same, but a 404 is not printed: *status says it (and *out is NULL). */
int cli_remote_request(cli_remote *r, const char *method, const char *target, json_t *body, int *status,
		       json_t **out);
/* A request whose 2xx answer is NDJSON: cb gets each line (borrowed) as it
 * comes; a non-zero return from cb stops reading and is returned. A byte
 * on cancel_fd (cli_cancel_install's; -1: none) closes the connection —
 * the server cancels what it was doing — and CLI_EXIT_CANCELED comes back
 * without a message. */
typedef int (*cli_remote_line_cb)(json_t *line, void *payload);
int cli_remote_stream(cli_remote *r, const char *method, const char *target, json_t *body, int cancel_fd,
		      cli_remote_line_cb cb, void *payload);
/* The session of computer name, from the server's list (malloc'd). Returns
 * 0 or CLI_EXIT_FAIL (printed). */
int cli_remote_identity(cli_remote *r, const char *name, char **ns, char **agent, char **session);
/* Puts spec (env values included) into a POST /v1/computers body, with its
 * secrets' values from this brig's environment (the server never reads
 * its own). Its image only when chosen (image_given: --image; or
 * $BRIG_IMAGE), else the server's default. 0, or CLI_EXIT_FAIL (message
 * printed: a secret unset, said of id's computer when id is given). */
int cli_remote_spec_put(json_t *body, const brig_spec *spec, bool image_given, const brig_identity *id);
/* "/v1/computers/NS/AGENT/SESSION" + tail (may be NULL), malloc'd. */
char *cli_remote_path(const char *ns, const char *agent, const char *session, const char *tail);
/* The computer of the server's JSON (brig_computer_to_json's form), so the
 * direct path's printers print it; free with brig_computer_free
 * (remote_parse.c). */
brig_computer *cli_remote_computer(json_t *j);
/* The server's path of the computer named by NAME or t's session flags
 * (--store and --gen are refused); *path malloc'd. Returns 0, 1 when the
 * server lists no computer by NAME (nothing printed), or CLI_EXIT_FAIL
 * (printed). */
int cli_remote_target(cli_remote *r, const char *cmd, const cli_target *t, const char *name, char **path);
/* The session store through the server, as the direct path's records
 * (free them with the store's *_free_array / _free; *n 0 and *out NULL
 * when there are none), for the direct path's printers: session
 * ns/agent/session's checkpoints (newest first), its newest limit commands
 * (0: all; newest first), and its record (*out NULL: the server's store
 * has none). Each returns 0 or CLI_EXIT_FAIL (printed: the server's
 * message, e.g. that the token does not cover the namespace). */
struct brig_store_checkpoint;
struct brig_store_audit;
struct brig_store_session;
int cli_remote_checkpoints(cli_remote *r, const char *ns, const char *agent, const char *session,
			   struct brig_store_checkpoint **out, size_t *n);
int cli_remote_history(cli_remote *r, const char *ns, const char *agent, const char *session, size_t limit,
		       struct brig_store_audit **out, size_t *n);
int cli_remote_session(cli_remote *r, const char *ns, const char *agent, const char *session,
		       struct brig_store_session **out);
/* brig cp's transfers, as brig codes with the server's message in *err:
 * a GET whose 2xx body goes to cb (a non-zero cb return stops it and is
 * returned; the receiver keeps its own story), a PUT of a streamed tar
 * body, and a GET of a JSON answer. target is encoded already. */
int cli_remote_get_raw(cli_remote *r, const char *target, brig_engine_data_cb cb, void *payload, brig_error **err);
int cli_remote_put_raw(cli_remote *r, const char *target, brig_engine_reader reader, void *payload,
		       brig_error **err);
int cli_remote_get_json(cli_remote *r, const char *target, json_t **out, brig_error **err);
/* A POST of a streamed body from reader (brig checkpoint import's), its
 * 2xx answer's JSON into *out; errors as cli_remote_get_raw's. */
int cli_remote_upload(cli_remote *r, const char *target, brig_engine_reader reader, void *payload, json_t **out,
		      brig_error **err);
/* brig fs's calls on the native file routes: method target with body (len
 * bytes of type; NULL: none), a 2xx answer's body to cb (NULL: dropped; a
 * non-zero return stops it and is returned). An error answer comes back
 * as the brig_error brig-init gave the server — its code, errno and
 * message — so the caller words it as the direct path does; the server's
 * own refusals (token, namespace) never take a code brig fs rewords.
 * target is encoded already. */
int cli_remote_fs(cli_remote *r, const char *method, const char *target, const char *type, const void *body, size_t len,
		  brig_engine_data_cb cb, void *payload, brig_error **err);
/* brig exec -d, ps and kill on the native process routes: method target
 * with a JSON body (may be NULL), *out (may be NULL: not wanted) the 2xx
 * answer's JSON. Errors come back as cli_remote_fs's do: brig-init's code,
 * errno and message, so cli_error words them as the direct path does. */
int cli_remote_native(cli_remote *r, const char *method, const char *target, json_t *body, json_t **out,
		      brig_error **err);
/* For remote_attach.c: the connection, the Authorization header line (or
 * NULL), and the error answer printer (returns CLI_EXIT_FAIL). */
struct brig_http_conn;
struct brig_http_conn *cli_remote__conn(cli_remote *r);
const char *cli_remote__auth(const cli_remote *r);
int cli_remote__error(int status, const char *body, size_t len);
/* exec -i/-t through the server (remote_attach.c): POST target (…/exec/attach
 * with its query) with body and an HTTP Upgrade, then stdin (interactive),
 * resizes (tty) and the output (on_output) over the framed stream until the
 * end frame, *end (a new reference: {"type":"exit",…} or {"type":"error",…}).
 * A byte on cancel_fd hangs up (the server cancels the command) and
 * CLI_EXIT_CANCELED comes back without a message; else 0 or CLI_EXIT_FAIL
 * (printed). */
int cli_remote_attach(cli_remote *r, const char *target, json_t *body, bool interactive, bool tty, int cancel_fd,
		      brig_engine_output_cb on_output, void *payload, json_t **end);
/* Adds to values (secret_values' form) the value of secret ("NAME@hosts")
 * from this brig's environment, as a local up, recover or run reads it,
 * when it is set; the server never reads its own. */
void cli_remote_secret_add(json_t *values, const char *secret);
/* brig run through a brig server: POST /v1/runs/attach with body, then the
 * inputs tar (from inputs; NULL: none), stdin (interactive) and the output
 * as cli_remote_attach, the outputs tar to outputs (which may refuse: the
 * rest is dropped, and the end still read) and the end frame in *end. A
 * byte on cancel_fd half-closes (the server cancels the run) and the end
 * frame, the container's removal, is waited for: CLI_EXIT_CANCELED comes
 * back without a message once it came. */
int cli_remote_run(cli_remote *r, json_t *body, bool interactive, int cancel_fd, brig_engine_reader inputs,
		   void *inputs_payload, brig_engine_data_cb outputs, void *outputs_payload,
		   brig_engine_output_cb on_output, void *payload, json_t **end);


#endif
