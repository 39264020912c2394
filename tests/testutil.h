/* testutil.h — helpers shared by brig's tests: unique names and labels for
 * Docker objects, cleanup of everything a test created, running brig. */
#ifndef BRIG_TESTUTIL_H
#define BRIG_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the three above first */
#include <cmocka.h>
#include <jansson.h>
#include <stdbool.h>

#include "brig/engine.h"
#include "brig/spec.h"

#define BRIG_TEST_LABEL "brig.test"

/* The test image (env BRIG_TEST_IMAGE, default brig-test:local). */
const char *brig_test_image(void);
/* This process's unique run id, e.g. "t1234-5f3a"; stable for the process. */
const char *brig_test_run_id(void);
/* A unique object name: "brigtest-<run id>-<tag>". Caller frees. */
char *brig_test_name(const char *tag);
/* {"label":["brig.test=<run id>"]} — new reference. */
json_t *brig_test_filters(void);
/* Labels object {"brig.test": "<run id>"} — new reference. */
json_t *brig_test_labels(void);
/* Opens an engine against the local daemon; fails the test if none. */
brig_engine *brig_test_engine(void);
/* The host uid a daemon with userns-remap maps the containers' uid 0 to
 * (0 without the remap): a tmpfs volume the local driver mounts on the host
 * needs uid=<this + 1000> to belong to the sandbox user inside, and mount
 * options read inside show host ids. Asked once. */
unsigned brig_test_userns_shift(void);
/* Removes every container, volume and network labelled with this run id.
 * Returns how many objects it removed. */
int brig_test_cleanup(brig_engine *e);
/* Registers brig_test_cleanup at exit (and on SIGINT/SIGTERM/SIGABRT). */
void brig_test_cleanup_at_exit(void);

/* ---- the fixture the integration tests share ---- */

/* Group set-up: registers brig_test_cleanup at exit, opens *e on the local
 * daemon (failing the test if there is none) and writes "<prefix><run id>"
 * into ns (ns_size bytes), the namespace of the test's computers. Returns 0. */
int brig_test_setup(brig_engine **e, char *ns, size_t ns_size, const char *prefix);
/* Group teardown: removes every object of this run and frees *e (set to
 * NULL). Returns 0. */
int brig_test_teardown(brig_engine **e);
/* Makes a private directory "/tmp/<tag>-XXXXXX" into dir (dir_size bytes).
 * Returns 0, or -1 (with a message) when it cannot. */
int brig_test_tmpdir(char *dir, size_t dir_size, const char *tag);
/* Removes a directory brig_test_tmpdir made, with everything in it; says
 * so on stderr when it cannot. */
void brig_test_rmdir(const char *dir);
/* The default spec on image (NULL: brig_test_image()) carrying this run's
 * label, so brig_test_cleanup finds what it creates. */
void brig_test_spec(brig_spec *s, const char *image);
/* Sleeps ms milliseconds, resuming after signals. */
void brig_test_sleep_ms(long ms);

/* Runs argv (argv[0] resolved through PATH; "brig" means $BRIG_BIN) with
 * optional stdin text and extra env ("K=V", NULL-terminated); captures
 * stdout/stderr (each capped at 64 MiB). Returns the exit status (or 128+sig). */
int brig_test_spawn(char *const argv[], const char *stdin_text, char *const extra_env[], char **out, char **errout);
/* Path of the brig binary under test. */
const char *brig_test_brig_bin(void);

/* Output collector for brig_engine_exec_start. */
typedef struct brig_test_output {
	char *out;
	size_t out_len;
	char *err;
	size_t err_len;
} brig_test_output;
int brig_test_output_cb(int stream, const char *data, size_t len, void *payload);
void brig_test_output_free(brig_test_output *o);

/* Creates a started container from the test image with the test label; Cmd
 * sleeps. config_extra (may be NULL) is merged into the create body. */
char *brig_test_container(brig_engine *e, const char *tag, json_t *config_extra);
/* Creates a bridge network of this test run (labelled, name from tag, subnet
 * picked by Docker) and returns its name; removed by brig_test_cleanup.
 * Tests never rely on the default "bridge" network (docker0), which a
 * machine may lack. */
char *brig_test_network(brig_engine *e, const char *tag);
/* Runs argv in container id as the image's user; returns exit code. */
int brig_test_exec(brig_engine *e, const char *id, const char *const argv[], brig_test_output *out);
/* Fails the test unless ns (a container's `readlink /proc/self/ns/net`, a
 * trailing newline allowed) is a network namespace other than this
 * process's and, when /var/run/docker.pid names a local dockerd, the
 * daemon's. */
void brig_test_assert_own_netns(const char *ns);
/* Runs `head -c N /dev/zero; wc -c` in container id with N bytes of stdin,
 * from memory or (from_fd) from a pipe a thread fills: the command writes
 * all its output before it reads any input, so brig must keep reading while
 * stdin waits. Fails the test unless the output is N zero bytes and "N\n"
 * and the exit code 0, within 60 s. */
void brig_test_exec_write_before_read(brig_engine *e, const char *id, size_t n, bool from_fd);

/* Fails the test with the error's message when expr is not 0. */
#define ASSERT_OK(expr, err)                                                                                           \
	do {                                                                                                           \
		int brig_r_ = (expr);                                                                                  \
		if (brig_r_ != 0)                                                                                      \
			fail_msg("%s -> %s: %s", #expr, brig_error_name(brig_r_), brig_error_message(err));            \
	} while (0)

#endif
