/* standalone_driver.c — replays a fuzz target's corpus without libFuzzer: calls
 * LLVMFuzzerTestOneInput once per regular file of a directory, so ctest runs the corpus under any compiler. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target, as with libFuzzer. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Reads all of NAME (relative to DIRFD) into a buffer of exactly its size, so
 * a sanitizer catches a target reading one byte past the input. Returns 1 when
 * NAME is not a regular file, -1 on error. */
static int read_input(int dirfd, const char *name, uint8_t **out, size_t *out_len)
{
	struct stat st;
	uint8_t *buf;
	size_t len, done = 0;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		fprintf(stderr, "standalone_driver: open %s: %s\n", name, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		fprintf(stderr, "standalone_driver: stat %s: %s\n", name, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return 1;
	}
	len = (size_t)st.st_size;
	/* malloc(0) may return NULL; a target must still get a valid pointer. */
	buf = malloc(len ? len : 1);
	if (!buf) {
		fprintf(stderr, "standalone_driver: %s: out of memory (%zu bytes)\n", name, len);
		close(fd);
		return -1;
	}
	while (done < len) {
		ssize_t n = read(fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "standalone_driver: read %s: %s\n", name,
				n < 0 ? strerror(errno) : "file shrank");
			free(buf);
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	close(fd);
	*out = buf;
	*out_len = len;
	return 0;
}

static int skip_dots(const struct dirent *e)
{
	return strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
}

int main(int argc, char **argv)
{
	struct dirent **entries = NULL;
	const char *dir;
	int dirfd, n, i, ran = 0, failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argc > 0 ? argv[0] : "standalone_driver");
		return 2;
	}
	dir = argv[1];
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);

	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		fprintf(stderr, "standalone_driver: open %s: %s\n", dir, strerror(errno));
		return 1;
	}
	/* Sorted, so a failure reproduces in the same order every time. */
	n = scandir(dir, &entries, skip_dots, alphasort);
	if (n < 0) {
		fprintf(stderr, "standalone_driver: read %s: %s\n", dir, strerror(errno));
		close(dirfd);
		return 1;
	}
	for (i = 0; i < n; i++) {
		uint8_t *data = NULL;
		size_t len = 0;
		int r = read_input(dirfd, entries[i]->d_name, &data, &len);

		if (r == 0) {
			/* Named before the call: if the target crashes, this is the input. */
			printf("running %s (%zu bytes)\n", entries[i]->d_name, len);
			fflush(stdout);
			LLVMFuzzerTestOneInput(data, len);
			free(data);
			ran++;
		} else if (r < 0) {
			failed++;
		}
		free(entries[i]);
	}
	free(entries);
	close(dirfd);

	printf("standalone_driver: ran %d input%s from %s\n", ran, ran == 1 ? "" : "s", dir);
	if (failed) {
		fprintf(stderr, "standalone_driver: %d input%s could not be read\n", failed, failed == 1 ? "" : "s");
		return 1;
	}
	if (ran == 0) {
		fprintf(stderr, "standalone_driver: no inputs in %s; a fuzz target needs a seed corpus\n", dir);
		return 1;
	}
	return 0;
}
