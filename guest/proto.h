/* guest/proto.h — the wire format between brig (the host side, src/guest/)
 * and brig-init (the guest, guest/): frames, message types, field tags and
 * the one codec both ends compile. docs/guest-protocol.md is the prose.
 *
 * Freestanding: libc's string and allocation calls only, no libbrig, so the
 * static brig-init links it as it is. Both ends treat the other as hostile:
 * every length is checked against a hard cap before anything is allocated,
 * every field is bounds-checked, and a malformed frame ends the connection.
 *
 * Frame: a 12-byte header, then `len` payload bytes.
 *   0  'b' 'g'   magic
 *   2  type      BRIG_GP_T_* (one byte)
 *   3  flags     0 (reserved; a receiver refuses other values)
 *   4  id        u32 big-endian: request id, or process id (per type)
 *   8  len       u32 big-endian: payload length, at most BRIG_GP_MAX_PAYLOAD
 * Payload: fields, each  tag (u8) · length (u32 big-endian) · value.
 *   integers are exactly 8 bytes, big-endian two's complement;
 *   strings are bytes without NUL (paths, argv, env, names);
 *   data is any bytes. A tag may repeat (argv, env): order is kept.
 * A receiver ignores fields it does not know (so a newer peer can add some)
 * but refuses a known field of the wrong shape.
 *
 * Flow control (still version 1: negotiated, so either end may be older).
 * A client that puts FLOW 1 in HELLO and reads FLOW 1 in HELLO_OK has, on
 * that connection, one window per call and direction:
 *   output: START/ATTACH carry WINDOW, the output bytes brig-init may send
 *     for the proc before the client grants more with CREDIT; while any
 *     attached connection's window is used up brig-init does not read the
 *     command's pipes, so the command blocks in write(2) (nothing is lost,
 *     nothing killed, other calls on the relay go on). CREDIT -1 lifts the
 *     limit (a client that stopped listening). A DETACHED start sends its
 *     starter no output (ATTACH for it).
 *   stdin: the client keeps at most BRIG_GP_STDIN_WINDOW bytes of one
 *     proc's stdin unacknowledged; brig-init answers CREDIT as the command
 *     takes them (or drops them), so brig-init never has to stop reading the
 *     relay and a KILL never waits behind stdin. */
#ifndef BRIG_GUEST_PROTO_H
#define BRIG_GUEST_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define BRIG_GP_VERSION 1
#define BRIG_GP_HDR_SIZE 12
/* Hard cap on one frame's payload: a header announcing more ends the
 * connection before a byte of it is read or allocated. */
#define BRIG_GP_MAX_PAYLOAD (1024u * 1024u + 4096u)
/* Data chunks (output, stdin, file bytes) are at most this long. */
#define BRIG_GP_MAX_DATA (64u * 1024u)
/* Strings (paths, argv entries, env entries) are at most this long;
 * argv and env together at most BRIG_GP_MAX_PAYLOAD. */
#define BRIG_GP_MAX_STR (128u * 1024u)
/* The abstract unix socket brig-init binds in the container's own network
 * namespace ("\0brig-init"; not a path). */
#define BRIG_GP_SOCKET_NAME "brig-init"
/* Where brig mounts its read-only volume holding brig-init, and the
 * program's path inside every container brig creates. */
#define BRIG_GP_MOUNT "/.brig"
#define BRIG_GP_INIT_PATH "/.brig/brig-init"
/* The computer's env entries ("KEY=VALUE\n" each), which brig puts on the
 * runtime volume (uid of the user, 0400, in a root-owned directory) so
 * their values stay out of the container's configuration: brig-init adds
 * them to every command it starts, under START's own ENV. At most
 * BRIG_GP_ENV_FILE_MAX bytes are read. */
#define BRIG_GP_ENV_FILE "/runtime/.brig/env"
#define BRIG_GP_ENV_FILE_MAX (1024u * 1024u + 64u * 1024u)
/* Output kept for one detached proc at most (what ATTACH replays at once). */
#define BRIG_GP_KEEP_MAX (16u * 1024u * 1024u)
/* Flow control: the stdin a client may have unacknowledged per proc. */
#define BRIG_GP_STDIN_WINDOW (1024u * 1024u)

/* Message types. c→g: from brig (through the relay) to brig-init;
 * g→c: back. "id" says what the header's id carries. */
enum {
	/* connection */
	BRIG_GP_T_HELLO = 1,     /* c→g id 0: VERSION. First frame; anything else first ends the connection */
	BRIG_GP_T_HELLO_OK = 2,  /* g→c id 0: VERSION, PID (brig-init's), BOOT_ID (random per brig-init start) */
	BRIG_GP_T_ERROR = 3,     /* g→c id: the request or process: ERRNO, MESSAGE (safe to show a user) */
	BRIG_GP_T_OK = 4,        /* g→c id: the request; fields per request */
	/* processes */
	BRIG_GP_T_START = 10,    /* c→g id: request. ARGV+, ENV*, CWD, ROWS+COLS (a terminal), TIMEOUT_MS,
				    DETACHED, STDIN, TAG, KEEP → STARTED or ERROR */
	BRIG_GP_T_STARTED = 11,  /* g→c id: request. PROC, PID */
	BRIG_GP_T_STDIN = 12,    /* c→g id: proc. DATA. No answer; dropped once the proc has ended */
	BRIG_GP_T_STDIN_CLOSE = 13, /* c→g id: proc. No answer */
	BRIG_GP_T_SIGNAL = 14,   /* c→g id: request. PROC or TAG, SIGNAL: sent to the command's process group
				    → OK, or ERROR (ENOENT: no such proc; ESRCH: it has ended) */
	BRIG_GP_T_KILL = 15,     /* c→g id: request. PROC or TAG. Ends the command's whole tree (SIGKILL to every
				    process under its subreaper, setsid'd and double-forked ones included) and
				    answers once all are gone: OK (PROC and the exit fields). The connections
				    attached to the proc get its EXIT (KILLED 1). An ended proc: OK with its exit */
	BRIG_GP_T_RESIZE = 16,   /* c→g id: proc. ROWS, COLS. No answer */
	BRIG_GP_T_OUTPUT = 17,   /* g→c id: proc. STREAM (1 stdout or terminal, 2 stderr), DATA */
	BRIG_GP_T_EXIT = 18,     /* g→c id: proc. CODE, SIGNAL, TIMED_OUT, KILLED, DROPPED. Last frame of a proc */
	BRIG_GP_T_CREDIT = 19,   /* both ways (FLOW connections), id: proc. CREDIT. c→g: the client took CREDIT
				    more output bytes (-1: no limit from now on); g→c: the command took (or
				    brig-init dropped) CREDIT bytes of its stdin. No answer */
	BRIG_GP_T_PS = 20,       /* c→g id: request → PS_ENTRY* then OK (COUNT) */
	BRIG_GP_T_PS_ENTRY = 21, /* g→c id: request. PROC, PID, TAG, ARGV*, STATE, DETACHED, STARTED_MS,
				    ENDED_MS, CODE, SIGNAL, TIMED_OUT, KILLED */
	BRIG_GP_T_ATTACH = 22,   /* c→g id: request. PROC or TAG, STDIN → OK (PROC, STATE, DROPPED), then the
				    kept output as OUTPUT frames (id: proc), then live output, then EXIT */
	BRIG_GP_T_STATUS = 23,   /* c→g id: request. PROC or TAG → OK (PROC, STATE; with exit fields when
				    exited) or ERROR ENOENT (never known, or forgotten) */
	/* files (paths absolute; brig-init's own permissions: uid 1000) */
	BRIG_GP_T_STAT = 30,     /* c→g id: request. PATH, NOFOLLOW → OK (TYPE, MODE, SIZE, MTIME_NS, UID, GID, LINK) */
	BRIG_GP_T_LIST = 31,     /* c→g id: request. PATH, DEPTH (1: the directory's entries) → LIST_ENTRY* then OK
				    (COUNT). Links are not followed */
	BRIG_GP_T_LIST_ENTRY = 32, /* g→c id: request. NAME (relative to PATH) and the stat fields */
	BRIG_GP_T_READ = 33,     /* c→g id: request. PATH, OFFSET, LENGTH (-1: to the end) → DATA* then OK (SIZE: the
				    file's size, COUNT: bytes sent) */
	BRIG_GP_T_DATA = 34,     /* both ways, id: request. DATA */
	BRIG_GP_T_WRITE = 35,    /* c→g id: request. PATH, MODE, APPEND, PARENTS; then DATA* and WRITE_END from the
				    client. Written to a temporary name beside PATH and renamed into place at
				    WRITE_END (not with APPEND) → one OK (SIZE) or one ERROR; after an ERROR the
				    guest discards that request's remaining DATA and WRITE_END */
	BRIG_GP_T_WRITE_END = 36, /* c→g id: request */
	BRIG_GP_T_MKDIR = 37,    /* c→g id: request. PATH, MODE, PARENTS → OK */
	BRIG_GP_T_REMOVE = 38,   /* c→g id: request. PATH, RECURSIVE → OK */
	BRIG_GP_T_RENAME = 39,   /* c→g id: request. PATH, PATH2 → OK */
	BRIG_GP_T_SYMLINK = 40,  /* c→g id: request. PATH (the link, must not exist), PATH2 (its target, verbatim) → OK */
};

/* Field tags. (i) integer, (s) string, (d) data. */
enum {
	BRIG_GP_F_VERSION = 1,     /* (i) */
	BRIG_GP_F_PID = 2,         /* (i) a pid inside the container */
	BRIG_GP_F_BOOT_ID = 3,     /* (s) 32 hex digits, new at every brig-init start */
	BRIG_GP_F_ERRNO = 4,       /* (i) Linux errno of the failure, 0 when none applies */
	BRIG_GP_F_MESSAGE = 5,     /* (s) what failed, for a user */
	BRIG_GP_F_ARGV = 10,       /* (s) repeated */
	BRIG_GP_F_ENV = 11,        /* (s) repeated "KEY=VALUE": added to brig-init's own environment, later wins */
	BRIG_GP_F_CWD = 12,        /* (s) default /workspace */
	BRIG_GP_F_ROWS = 13,       /* (i) 1..1000: with COLS, the command gets a pseudo-terminal */
	BRIG_GP_F_COLS = 14,       /* (i) 1..1000 */
	BRIG_GP_F_TIMEOUT_MS = 15, /* (i) 0: none. At the deadline the whole tree is killed: EXIT TIMED_OUT 1, CODE 124 */
	BRIG_GP_F_DETACHED = 16,   /* (i) 0/1: outlives the connection; output kept (KEEP bytes, head and tail) */
	BRIG_GP_F_STDIN = 17,      /* (i) 0/1: stdin from STDIN frames (else /dev/null) */
	BRIG_GP_F_TAG = 18,        /* (s) up to 64 bytes chosen by the client, unique: names the proc before
				      STARTED arrives (a connection that broke can still ask about it) */
	BRIG_GP_F_KEEP = 19,       /* (i) bytes of output kept for a detached proc; 0: 1 MiB; at most 64 MiB
				      accepted, BRIG_GP_KEEP_MAX used */
	BRIG_GP_F_PROC = 20,       /* (i) process id: 1.., unique for one BOOT_ID */
	BRIG_GP_F_STREAM = 21,     /* (i) 1 stdout (or the terminal), 2 stderr */
	BRIG_GP_F_DATA = 22,       /* (d) at most BRIG_GP_MAX_DATA */
	BRIG_GP_F_CODE = 23,       /* (i) exit code; 128+n when killed by signal n; 124 timed out */
	BRIG_GP_F_SIGNAL = 24,     /* (i) the signal that ended it, or to send; 0: none */
	BRIG_GP_F_TIMED_OUT = 25,  /* (i) 0/1 */
	BRIG_GP_F_KILLED = 26,     /* (i) 0/1: ended by KILL, by its connection closing, or by brig-init stopping */
	BRIG_GP_F_STATE = 27,      /* (s) "running" or "exited" */
	BRIG_GP_F_STARTED_MS = 28, /* (i) wall-clock ms */
	BRIG_GP_F_DROPPED = 29,    /* (i) output bytes not kept (between head and tail) */
	BRIG_GP_F_ENDED_MS = 30,   /* (i) wall-clock ms, 0 while running */
	BRIG_GP_F_FLOW = 31,       /* (i) HELLO, HELLO_OK: 1 this end does flow control */
	BRIG_GP_F_WINDOW = 32,     /* (i) START, ATTACH (FLOW): output bytes before CREDIT is needed; 0: no limit */
	BRIG_GP_F_CREDIT = 33,     /* (i) CREDIT's bytes */
	BRIG_GP_F_PATH = 40,       /* (s) absolute */
	BRIG_GP_F_PATH2 = 41,      /* (s) absolute: rename's target */
	BRIG_GP_F_TYPE = 42,       /* (s) file, dir, symlink, fifo, socket, char, block */
	BRIG_GP_F_MODE = 43,       /* (i) permission bits (07777) */
	BRIG_GP_F_SIZE = 44,       /* (i) bytes */
	BRIG_GP_F_MTIME_NS = 45,   /* (i) ns since the epoch */
	BRIG_GP_F_UID = 46,        /* (i) */
	BRIG_GP_F_GID = 47,        /* (i) */
	BRIG_GP_F_LINK = 48,       /* (s) a symlink's target */
	BRIG_GP_F_DEPTH = 49,      /* (i) 1..64 */
	BRIG_GP_F_OFFSET = 50,     /* (i) */
	BRIG_GP_F_LENGTH = 51,     /* (i) -1: to the end */
	BRIG_GP_F_PARENTS = 52,    /* (i) 0/1: make missing parent directories (0755) */
	BRIG_GP_F_RECURSIVE = 53,  /* (i) 0/1 */
	BRIG_GP_F_COUNT = 54,      /* (i) */
	BRIG_GP_F_NOFOLLOW = 55,   /* (i) 0/1: stat the link itself */
	BRIG_GP_F_APPEND = 56,     /* (i) 0/1 */
	BRIG_GP_F_NAME = 57,       /* (s) a path relative to the listed directory */
};

/* Results of the codec calls below. */
enum {
	BRIG_GP_OK = 0,
	BRIG_GP_ENEED = 1,     /* reader: more bytes needed */
	BRIG_GP_EMAGIC = -1,   /* not 'b' 'g', or flags not 0 */
	BRIG_GP_ETOOBIG = -2,  /* len over BRIG_GP_MAX_PAYLOAD, or a field over its cap */
	BRIG_GP_ETRUNC = -3,   /* a field's length runs past the payload */
	BRIG_GP_ESHAPE = -4,   /* an integer not 8 bytes, a string holding NUL */
	BRIG_GP_ENOMEM = -5,
};

typedef struct brig_gp_hdr {
	uint8_t type;
	uint8_t flags;
	uint32_t id;
	uint32_t len;
} brig_gp_hdr;

/* Parses and checks 12 header bytes (magic, flags, len cap). */
int brig_gp_hdr_parse(brig_gp_hdr *out, const unsigned char b[BRIG_GP_HDR_SIZE]);
void brig_gp_hdr_write(unsigned char b[BRIG_GP_HDR_SIZE], uint8_t type, uint32_t id, uint32_t len);

/* ---- encoding: one frame into a growing buffer ----
 * Frames are built in memory and written whole. The buffer grows with
 * realloc up to BRIG_GP_HDR_SIZE + BRIG_GP_MAX_PAYLOAD; past that (or when
 * realloc fails) the encoder is marked failed and brig_gp_enc_finish says
 * so: no partial frame is ever sent. */
typedef struct brig_gp_enc {
	unsigned char *buf;
	size_t len, alloc;
	int failed; /* BRIG_GP_ETOOBIG or BRIG_GP_ENOMEM once anything did not fit */
} brig_gp_enc;

/* Starts a frame (the header is written by finish). e->buf may be reused
 * across frames: begin keeps the allocation. */
void brig_gp_enc_begin(brig_gp_enc *e);
void brig_gp_put_bytes(brig_gp_enc *e, uint8_t tag, const void *p, size_t n);
void brig_gp_put_str(brig_gp_enc *e, uint8_t tag, const char *s); /* NULL: nothing is put */
void brig_gp_put_int(brig_gp_enc *e, uint8_t tag, int64_t v);
/* Writes the header. Returns the frame's total length, or a negative
 * BRIG_GP_E* when something did not fit (then nothing may be sent). */
long brig_gp_enc_finish(brig_gp_enc *e, uint8_t type, uint32_t id);
void brig_gp_enc_free(brig_gp_enc *e);

/* ---- decoding ---- */

/* Accumulates a byte stream into whole frames. The payload buffer is
 * allocated only after the header passed its checks, and only as large as
 * the header says. */
typedef struct brig_gp_reader {
	unsigned char hdr_bytes[BRIG_GP_HDR_SIZE];
	size_t hdr_have;
	brig_gp_hdr hdr;
	unsigned char *payload;
	size_t payload_have;
} brig_gp_reader;

void brig_gp_reader_init(brig_gp_reader *r);
/* Consumes bytes from data (n of them) and sets *used to how many it took.
 * Returns BRIG_GP_OK when a whole frame is ready (r->hdr and r->payload,
 * valid until the next feed), BRIG_GP_ENEED when every byte was taken and
 * more are needed, or a negative BRIG_GP_E* (the stream is broken: close
 * it). Call again with the rest of data after a frame. */
int brig_gp_reader_feed(brig_gp_reader *r, const unsigned char *data, size_t n, size_t *used);
void brig_gp_reader_free(brig_gp_reader *r);

typedef struct brig_gp_field {
	uint8_t tag;
	uint32_t len;
	const unsigned char *val;
} brig_gp_field;

typedef struct brig_gp_dec {
	const unsigned char *p;
	size_t left;
} brig_gp_dec;

void brig_gp_dec_init(brig_gp_dec *d, const unsigned char *payload, size_t len);
/* Next field: BRIG_GP_OK with *f filled, BRIG_GP_ENEED at the end,
 * BRIG_GP_ETRUNC when a length runs past the payload. */
int brig_gp_dec_next(brig_gp_dec *d, brig_gp_field *f);
/* An integer field's value: BRIG_GP_ESHAPE unless exactly 8 bytes. */
int brig_gp_field_int(const brig_gp_field *f, int64_t *out);
/* Checks a string field: no NUL, at most max bytes (0: BRIG_GP_MAX_STR).
 * BRIG_GP_ESHAPE / BRIG_GP_ETOOBIG otherwise. */
int brig_gp_field_str(const brig_gp_field *f, size_t max);
/* malloc'd NUL-terminated copy of a checked string field, or NULL (bad
 * shape or no memory). */
char *brig_gp_field_strdup(const brig_gp_field *f, size_t max);

/* Name of a message type for messages and logs ("START"), "?" if unknown. */
const char *brig_gp_type_name(uint8_t type);

/* ---- env entries (START's ENV, the lines of BRIG_GP_ENV_FILE) ---- */

/* Turns buf's lines (len bytes; buf[len] must be writable and is set to
 * NUL) into NUL-terminated strings in place and returns how many there are
 * (the newlines + 1). */
size_t brig_gp_env_lines(char *buf, size_t len);
/* Sets entry ("KEY=VALUE") into env (*k entries; room for one more
 * needed), replacing the entry with the same KEY; an entry without '=' or
 * with an empty KEY is skipped. env points at entry: it is not copied. */
void brig_gp_env_put(char **env, size_t *k, char *entry);

#endif
