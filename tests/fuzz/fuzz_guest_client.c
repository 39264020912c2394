/* fuzz_guest_client.c — libFuzzer target for the host side of brig-init's
 * protocol: the input is everything a (hostile) guest says on one relay,
 * while brig opens a handle and runs ps, a command and a stat over it. brig
 * must neither crash, nor leak, nor hand out a field that broke its shape
 * or cap. Request ids are brig's, from 0x80000001 in call order (HELLO is
 * id 0), so a corpus can answer them. */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brig/guest.h"
#include "guest/host.h"
#include "guest/proto.h"
#include "util/util.h"

typedef struct feed {
	int fd;
	const uint8_t *data;
	size_t size;
} feed;

/* The input is the guest's turns, split at "|||": turn k goes out once brig
 * has sent its k+1-th frame (or after 20 ms of silence, so a guest that
 * answers nothing costs little); then the guest closes its side. */
static void *feeder(void *arg)
{
	feed *f = arg;
	brig_gp_reader r;
	brig_gp_reader_init(&r);
	size_t frames = 0, turn = 0, off = 0;
	unsigned char buf[65536];
	while (off <= f->size) {
		const uint8_t *end = memmem(f->data + off, f->size - off, "|||", 3);
		size_t len = end ? (size_t)(end - (f->data + off)) : f->size - off;
		/* wait for brig's frame number turn+1 */
		while (frames < turn + 1) {
			struct pollfd p = {.fd = f->fd, .events = POLLIN};
			if (poll(&p, 1, 20) <= 0)
				break;
			ssize_t n = read(f->fd, buf, sizeof buf);
			if (n <= 0)
				break;
			size_t k = 0;
			while (k < (size_t)n) {
				size_t used = 0;
				int rc = brig_gp_reader_feed(&r, buf + k, (size_t)n - k, &used);
				k += used;
				if (rc == BRIG_GP_OK)
					frames++;
				else if (rc != BRIG_GP_ENEED)
					abort(); /* brig sent a malformed frame */
			}
		}
		/* send, not write: brig may have closed its side already (it
		 * gave up on a malformed frame), and SIGPIPE would end the run */
		for (size_t w = 0; w < len;) {
			ssize_t n = send(f->fd, f->data + off + w, len - w, MSG_NOSIGNAL);
			if (n <= 0)
				break;
			w += (size_t)n;
		}
		turn++;
		if (!end)
			break;
		off += len + 3;
	}
	brig_gp_reader_free(&r);
	shutdown(f->fd, SHUT_WR);
	return NULL;
}

static int on_output(int stream, const char *data, size_t len, void *payload)
{
	if ((stream != BRIG_STREAM_STDOUT && stream != BRIG_STREAM_STDERR) || len == 0 || len > 64 * 1024)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 20)
		return 0;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	feed f = {.fd = sv[1], .data = data, .size = size};
	pthread_t th;
	if (pthread_create(&th, NULL, feeder, &f) != 0)
		abort();
	brig_guest *g = NULL;
	int64_t by = brig_now_ms() + 2000;
	bool debug = getenv("BRIG_FUZZ_DEBUG") != NULL;
	int orc = brig_guest__open_fd(&g, sv[0], by, NULL);
	if (debug)
		fprintf(stderr, "open %d\n", orc);
	if (orc == 0) {
		json_t *ps = NULL;
		int prc = brig_guest_ps(g, &ps, by, NULL);
		if (debug)
			fprintf(stderr, "ps %d\n", prc);
		if (prc == 0) {
			if (!json_is_array(ps))
				abort();
			json_decref(ps);
		}
		const char *argv[] = {"echo", "x", NULL};
		brig_guest_exec_opts o = {.version = BRIG_GUEST_EXEC_OPTS_VERSION,
					  .argv = argv,
					  .stdin_fd = -1,
					  .cancel_fd = -1,
					  .resize_fd = -1,
					  .on_output = on_output,
					  .deadline_ms = by};
		brig_guest_exit x;
		int xrc = brig_guest_exec(g, &o, &x, NULL);
		json_t *st = NULL;
		int src = brig_guest_stat(g, &st, "/workspace", false, by, NULL);
		if (src == 0)
			json_decref(st);
		if (debug)
			fprintf(stderr, "exec %d (code %d), stat %d\n", xrc, x.code, src);
		brig_guest_free(g);
	}
	pthread_join(th, NULL);
	close(sv[1]);
	return 0;
}
