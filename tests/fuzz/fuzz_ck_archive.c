/* fuzz_ck_archive.c — libFuzzer target for the checkpoint export archive
 * reader (src/checkpoint/manifest.c, ck_archive_read): any input either
 * fails or yields a manifest whose every blob came with its own digest;
 * and brig_checkpoint__archive_session, which reads it for its session. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint/cas.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct src {
	const uint8_t *p;
	size_t left;
} src;

/* Hands out at most 700 bytes a call, so reads straddle headers. */
static ssize_t reader(char *buf, size_t len, void *payload, brig_error **err)
{
	(void)err;
	src *s = payload;
	size_t k = len < s->left ? len : s->left;
	if (k > 700)
		k = 700;
	memcpy(buf, s->p, k);
	s->p += k;
	s->left -= k;
	return (ssize_t)k;
}

typedef struct seen {
	int blobs;
	bool open;
} seen;

static int on_begin(const char *digest, uint64_t size, void *payload, brig_error **err)
{
	(void)digest, (void)size, (void)err;
	seen *s = payload;
	if (s->open)
		abort();
	s->open = true;
	return 0;
}

static int on_end(void *payload, brig_error **err)
{
	(void)err;
	seen *s = payload;
	if (!s->open)
		abort();
	s->open = false;
	s->blobs++;
	return 0;
}

/* brig serve's look at whose an import is: all three names or none. */
static void session_of(const uint8_t *data, size_t size)
{
	char *ns = NULL, *agent = NULL, *session = NULL;
	brig_error *err = NULL;
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	int rc = brig_checkpoint__archive_session(fd, &ns, &agent, &session, &err);
	close(fd);
	if ((rc == 0) != (err == NULL) || (rc && ns) || !!ns != !!agent || !!ns != !!session)
		abort();
	brig_error_free(err);
	free(ns);
	free(agent);
	free(session);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	session_of(data, size);
	src in = {data, size};
	seen s = {0};
	ck_archive_sink sink = {.blob_begin = on_begin, .blob_end = on_end, .payload = &s};
	ck_manifest m;
	brig_error *err = NULL;
	/* the first 512 bytes as if read ahead, as brig_checkpoint_import does */
	size_t pre = size < 512 ? size : 512;
	in.p += pre;
	in.left -= pre;
	if (ck_archive_read(&m, (const char *)data, pre, reader, &in, &sink, &err) != 0) {
		brig_error_free(err);
		return 0;
	}
	size_t files = 0;
	for (size_t i = 0; i < m.n; i++)
		files += m.e[i].type == 'f';
	if ((size_t)s.blobs > files || s.open)
		abort();
	ck_manifest_free(&m);
	return 0;
}
