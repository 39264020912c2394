/* egress_testutil.c — the egress tests' shared set-up and teardown
 * (egress_testutil.h). */
#include "egress_testutil.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "brig/egress.h"
#include "util/util.h"

bool egress_test_proxy_listening(void)
{
	/* Only where the address is this machine's: never connect out. */
	if (access("/sys/class/net/" BRIG_EGRESS_BRIDGE, F_OK) != 0)
		return false;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(BRIG_EGRESS_PORT)};
	inet_pton(AF_INET, BRIG_EGRESS_GATEWAY, &a.sin_addr);
	bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

char *egress_test_slurp(const char *path, size_t cap)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	brig_buf b;
	brig_buf_init(&b, cap);
	char tmp[65536];
	size_t n;
	while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
		if (brig_buf_add(&b, tmp, n) != 0)
			break;
	fclose(f);
	return brig_buf_steal(&b, NULL);
}

int egress_test_prepare(egress_test *t, const char *who, const char *tmp_tag, const char *hosts)
{
	if (egress_test_proxy_listening()) {
		fprintf(stderr, "%s: an egress proxy already serves on %s:%d; skipping\n", who, BRIG_EGRESS_GATEWAY,
			BRIG_EGRESS_PORT);
		t->skip = true;
		return 0;
	}
	if (brig_test_tmpdir(t->dir, sizeof t->dir, tmp_tag) != 0)
		return -1;
	snprintf(t->egress_dir, sizeof t->egress_dir, "%s/egress", t->dir);
	setenv("BRIG_EGRESS_DIR", t->egress_dir, 1);
	char path[320];
	snprintf(path, sizeof path, "%s/hosts", t->dir);
	FILE *h = fopen(path, "we");
	if (!h)
		return -1;
	fputs(hosts, h);
	fclose(h);
	setenv("BRIG_EGRESS_HOSTS", path, 1);
	setenv("BRIG_EGRESS_TEST", "1", 1); /* the proxy accepts the overrides only with it */
	snprintf(path, sizeof path, "sqlite://%s/brig.db", t->dir);
	setenv("BRIG_STORE", path, 1);
	return 0;
}

int egress_test_upstreams(egress_test *t, const char *who)
{
	char ports[320];
	snprintf(ports, sizeof ports, "%s/ports", t->dir);
	int in[2];
	if (pipe2(in, O_CLOEXEC) != 0)
		return -1;
	t->upstream = fork();
	if (t->upstream == 0) {
		dup2(in[0], 0);
		char *const argv[] = {"python3", BRIG_SOURCE_DIR "/tests/integration/helpers/egress_upstream.py",
				      t->dir, ports, NULL};
		execv("/usr/bin/python3", argv);
		_exit(127);
	}
	close(in[0]);
	t->upstream_stdin = in[1];
	for (int i = 0; i < 300 && access(ports, F_OK) != 0; i++)
		brig_test_sleep_ms(100);
	char *p = egress_test_slurp(ports, 1 << 24);
	if (!p || sscanf(p, "%d %d", &t->https_port, &t->http_port) != 2) {
		fprintf(stderr, "%s: the upstream servers did not start\n", who);
		free(p);
		return -1;
	}
	free(p);
	char ca[320];
	snprintf(ca, sizeof ca, "%s/ca.pem", t->dir);
	t->ca = egress_test_slurp(ca, 1 << 24);
	return t->ca ? 0 : -1;
}

int egress_test_teardown(egress_test *t, brig_engine **e, const char *who)
{
	if (!t->skip) {
		brig_test_cleanup(*e); /* our computers first */
		brig_error *err = NULL;
		if (brig_egress_remove(*e, &err) != 0)
			fprintf(stderr, "%s: could not remove %s: %s\n", who, BRIG_EGRESS_NETWORK,
				brig_error_message(err));
		brig_error_free(err);
		/* The proxy ends once its network is gone; only ours, by its pid. */
		char pidf[400];
		snprintf(pidf, sizeof pidf, "%s/proxy.pid", t->egress_dir);
		for (int i = 0; i < 100 && access(pidf, F_OK) == 0; i++)
			brig_test_sleep_ms(100);
		char *pid = egress_test_slurp(pidf, 1 << 24);
		if (pid && atoi(pid) > 1)
			kill(atoi(pid), SIGTERM);
		free(pid);
		if (t->upstream_stdin >= 0)
			close(t->upstream_stdin);
		if (t->upstream > 0) {
			kill(t->upstream, SIGTERM);
			waitpid(t->upstream, NULL, 0);
		}
		free(t->ca);
		t->ca = NULL;
		brig_test_rmdir(t->dir);
	}
	return brig_test_teardown(e);
}

int egress_test_cli(char **out, const char *const *args, size_t cap)
{
	const char *bin = getenv("BRIG_BIN");
	assert_non_null(bin);
	const char *argv[40] = {"brig"};
	size_t n = 1;
	for (; args[n - 1] && n < 39; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	brig_buf b;
	brig_buf_init(&b, cap);
	char tmp[4096];
	ssize_t r;
	while ((r = read(p[0], tmp, sizeof tmp)) > 0)
		if (brig_buf_add(&b, tmp, (size_t)r) != 0)
			break;
	close(p[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	*out = brig_buf_steal(&b, NULL);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
