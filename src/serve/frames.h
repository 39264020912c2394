/* frames.h — the framing of `brig serve`'s attach streams (POST
 * …/exec/attach and POST /v1/runs/attach, HTTP Upgrades to a raw two-way
 * stream), shared by the server (routes_attach.c) and the CLI as its client
 * (cli/remote_attach.c).
 * Pure: no I/O; fuzzed by tests/fuzz/fuzz_attach.c.
 *
 * Both ways carry frames with Docker's 8-byte header (its stdcopy format):
 *   byte 0: type, bytes 1-3: zero, bytes 4-7: payload length (big endian),
 * then the payload. Types:
 *   server → client: 1 stdout, 2 stderr (with a terminal all output is 1),
 *                    3 end: one JSON object, the last frame — the exec
 *                    result ({"type":"exit",…} as ?stream=true's last line)
 *                    or {"type":"error","code","message"};
 *   client → server: 0 stdin bytes, 4 stdin EOF (empty: the command reads
 *                    end-of-file; frames after it are refused), 5 resize
 *                    (4 bytes: rows, cols, each 16-bit big endian, 1..1000).
 * A run (POST /v1/runs/attach) adds, both ways, 6 tar bytes: first the
 * client's inputs, ended by 7 (empty; only then does the run start and
 * stdin frames follow), and at the end the server's outputs (/outbox),
 * just before the end frame. Each side checks the tar it receives with
 * brig's extractor (src/tar/tar.h).
 * Frames are framed with a terminal too, so that the end frame (the exit
 * code) arrives on the same stream. The client closing its side of the
 * socket (or the connection breaking) is a hang-up: the command is
 * cancelled. stdin ends with the EOF frame, never with a half-close, so a
 * client that is gone and one that only closed stdin cannot be confused.
 *
 * Caps: a data frame's length is checked against its cap before its bytes
 * are trusted; control frames (end, resize) are collected whole within
 * theirs. */
#ifndef BRIG_SERVE_FRAMES_H
#define BRIG_SERVE_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/error.h"

enum {
	SERVE_FRAME_STDIN = 0,
	SERVE_FRAME_STDOUT = 1,
	SERVE_FRAME_STDERR = 2,
	SERVE_FRAME_END = 3,
	SERVE_FRAME_EOF = 4,
	SERVE_FRAME_RESIZE = 5,
	SERVE_FRAME_TAR = 6,     /* a run's inputs (client → server) or outputs (server → client) */
	SERVE_FRAME_TAR_END = 7, /* empty: the inputs are all sent */
};

#define SERVE_FRAME_HDR 8
#define SERVE_FRAME_DATA_MAX ((uint32_t)1 << 20) /* a stdin/stdout/stderr frame */
#define SERVE_FRAME_END_MAX ((uint32_t)4 << 20)  /* the end frame's JSON (captured output inside) */
#define SERVE_FRAME_TTY_MAX 1000                 /* rows and cols */

/* A frame's header for type and len into hdr. */
void serve_frame_header(unsigned char hdr[SERVE_FRAME_HDR], unsigned type, uint32_t len);

/* Called per frame: data frames (0, 1, 2, 6) piece by piece as bytes arrive
 * (len > 0), control frames (3, 4, 5, 7) once, whole (EOF, TAR_END: len 0). A
 * non-zero answer stops the feed and is returned. */
typedef int (*serve_frame_cb)(unsigned type, const char *data, size_t len, void *payload);

typedef struct serve_frame_dec {
	unsigned allowed; /* bit mask of the types this side takes */
	unsigned char hdr[SERVE_FRAME_HDR];
	size_t hdr_len;
	unsigned type;
	uint32_t remaining; /* payload bytes of the current frame still to come */
	bool in_frame;
	bool eof_seen;  /* a stdin EOF frame came: no more stdin */
	char *ctl;      /* a control frame being collected */
	size_t ctl_len; /* its bytes so far */
} serve_frame_dec;

/* allowed: (1u << type) for each type taken; a callback may change
 * d->allowed (a run takes stdin only after its inputs). */
void serve_frame_dec_init(serve_frame_dec *d, unsigned allowed);
void serve_frame_dec_clear(serve_frame_dec *d);
/* Feeds bytes. Returns 0, the callback's non-zero answer, or BRIG_EPROTO
 * (a type this side does not take, non-zero bytes 1-3, a resize that is not
 * 4 bytes of 1..1000, an EOF or TAR_END with a payload, stdin after EOF) or
 * BRIG_ETOOBIG (a length over its cap), with a message in *err. */
int serve_frame_feed(serve_frame_dec *d, const char *data, size_t len, serve_frame_cb cb, void *payload,
		     brig_error **err);
/* Whether the bytes fed so far end on a frame boundary. */
bool serve_frame_dec_clean(const serve_frame_dec *d);
/* A resize frame's payload (checked by serve_frame_feed). */
void serve_frame_resize_get(const char *data, int *rows, int *cols);
void serve_frame_resize_put(char data[4], int rows, int cols);

#endif
