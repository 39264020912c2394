/* test_tls.c — the engine client over TCP+TLS with a client certificate, the
 * way DOCKER_HOST/DOCKER_TLS_VERIFY/DOCKER_CERT_PATH configure the docker CLI:
 * a socat TLS endpoint on 127.0.0.1 in front of the real daemon's socket. */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

static char dir[] = "/tmp/brigtest-tls-XXXXXX";
static pid_t socat_pid = -1;
static int port;
static char *host_url;

static int sh(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **state)
{
	brig_test_cleanup_at_exit();
	if (sh("command -v socat >/dev/null && command -v openssl >/dev/null") != 0) {
		fprintf(stderr, "test_tls: socat or openssl missing (scripts/bootstrap installs them)\n");
		return -1;
	}
	if (!mkdtemp(dir))
		return -1;
	/* A CA, a server certificate for 127.0.0.1 and a client certificate;
	 * a second CA signs nothing we trust. */
	cleanup_free char *cmd = xasprintf(
		"(cd %s && "
		"openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 1 -subj '/CN=brig test "
		"CA' && "
		"openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj '/CN=127.0.0.1' && "
		"printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > s.cnf && "
		"openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server.pem -days 1 "
		"-extfile s.cnf && "
		"openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj '/CN=client' && "
		"printf 'extendedKeyUsage=clientAuth\\n' > c.cnf && "
		"openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 1 "
		"-extfile c.cnf && "
		"mkdir other && openssl req -x509 -newkey rsa:2048 -nodes -keyout other/ca-key.pem -out other/ca.pem "
		"-days 1 -subj '/CN=other CA' && cp cert.pem key.pem other/ && "
		"mkdir nocert && cp ca.pem nocert/"
		") >/dev/null 2>&1",
		dir);
	if (sh(cmd) != 0)
		return -1;
	port = 20000 + (getpid() % 20000);
	socat_pid = fork();
	if (socat_pid == 0) {
		cleanup_free char *listen = xasprintf(
			"openssl-listen:%d,bind=127.0.0.1,reuseaddr,fork,cert=%s/server.pem,key=%s/server-key.pem,"
			"cafile=%s/ca.pem,verify=1",
			port, dir, dir, dir);
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		execlp("socat", "socat", listen, "unix-connect:/var/run/docker.sock", (char *)NULL);
		_exit(127);
	}
	host_url = xasprintf("tcp://127.0.0.1:%d", port);
	for (int i = 0; i < 50; i++) { /* wait for the listener */
		cleanup_free char *probe = xasprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null", port);
		if (sh(probe) == 0)
			return 0;
		usleep(100 * 1000);
	}
	return -1;
}

static int teardown(void **state)
{
	if (socat_pid > 0) {
		kill(socat_pid, SIGTERM);
		waitpid(socat_pid, NULL, 0);
	}
	cleanup_free char *rm = xasprintf("rm -rf %s", dir);
	sh(rm);
	brig_engine *e = brig_test_engine();
	brig_test_cleanup(e);
	brig_engine_free(e);
	free(host_url);
	return 0;
}

static int open_tls(brig_engine **e, const char *certs, brig_error **err)
{
	brig_engine_opts o = {.version = BRIG_ENGINE_OPTS_VERSION,
			      .host = host_url,
			      .tls_verify = 1,
			      .cert_path = certs,
			      .timeout_ms = 10000};
	return brig_engine_open(e, &o, err);
}

static void test_tls_ping_version_and_exec_with_stdin(void **state)
{
	brig_engine *e = NULL;
	brig_error *err = NULL;
	ASSERT_OK(open_tls(&e, dir, &err), err);
	json_t *v = NULL;
	ASSERT_OK(brig_engine_version(e, &v, &err), err);
	assert_non_null(json_string_value(json_object_get(v, "ApiVersion")));
	json_decref(v);

	/* The hijacked stream over TLS: stdin in, half-close by close_notify,
	 * output back. */
	cleanup_free char *id = brig_test_container(e, "tls", NULL);
	json_t *cfg = json_pack("{s:[s,s,s], s:b, s:b, s:b}", "Cmd", "sh", "-c", "cat; echo done", "AttachStdin", 1,
				"AttachStdout", 1, "AttachStderr", 1);
	char *xid = NULL;
	ASSERT_OK(brig_engine_exec_create(e, &xid, id, cfg, &err), err);
	static const char text[] = "over tls\n";
	brig_test_output o = {0};
	brig_engine_exec_io io = {.stdin_fd = -1,
				  .stdin_data = text,
				  .stdin_len = sizeof text - 1,
				  .cancel_fd = -1,
				  .on_output = brig_test_output_cb,
				  .payload = &o,
				  .deadline_ms = brig_now_ms() + 20000};
	ASSERT_OK(brig_engine_exec_start(e, xid, &io, &err), err);
	assert_string_equal(o.out, "over tls\ndone\n");
	brig_test_output_free(&o);
	json_decref(cfg);
	free(xid);
	/* Output before input, 4 MB each way, over TLS too. */
	brig_test_exec_write_before_read(e, id, 4u << 20, false);
	brig_test_exec_write_before_read(e, id, 4u << 20, true);
	brig_engine_free(e);
}

static void test_tls_refuses_unknown_server_and_missing_client_cert(void **state)
{
	brig_engine *e = NULL;
	brig_error *err = NULL;
	/* A CA that did not sign the server: nothing is sent. */
	cleanup_free char *other = xasprintf("%s/other", dir);
	assert_int_equal(open_tls(&e, other, &err), BRIG_ENOTSENT);
	assert_non_null(strstr(err->message, "TLS"));
	brig_error_free(err);
	err = NULL;
	/* No client certificate: the server refuses the handshake. */
	cleanup_free char *nocert = xasprintf("%s/nocert", dir);
	int rc = open_tls(&e, nocert, &err);
	assert_true(rc == BRIG_ENOTSENT || rc == BRIG_EUNCERTAIN);
	brig_error_free(err);
	err = NULL;
	/* A missing CA file is a configuration error, named. */
	assert_int_equal(open_tls(&e, "/nonexistent-brig-certs", &err), BRIG_ETLS);
	assert_non_null(strstr(err->message, "ca.pem"));
	brig_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tls_ping_version_and_exec_with_stdin),
		cmocka_unit_test(test_tls_refuses_unknown_server_and_missing_client_cert),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
