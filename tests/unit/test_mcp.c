/* test_mcp.c — the MCP server without a daemon: version negotiation, the
 * JSON-RPC errors, logging levels, tools/list, tool arguments refused before
 * anything is run, the line reader's size cap, and the text helpers. */
#include "testutil.h"

#include <string.h>
#include <unistd.h>

#include "mcp/mcp.h"
#include "util/util.h"

/* Collects what the server writes. */
typedef struct sink {
	json_t *lines;
} sink;

static int collect(const char *line, size_t len, void *payload)
{
	sink *k = payload;
	json_t *j = json_loadb(line, len, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
	json_array_append_new(k->lines, j);
	return 0;
}

static mcp_server *server(sink *k)
{
	k->lines = json_array();
	mcp_config cfg = {
		.ns = "n", .agent = "a", .session = "s", .write = collect, .payload = k, .inline_calls = true};
	return mcp_server_new(&cfg);
}

/* Sends line; returns the last answer (borrowed). */
static json_t *ask(mcp_server *s, sink *k, const char *line)
{
	size_t before = json_array_size(k->lines);
	mcp_server_handle(s, line, strlen(line));
	assert_true(json_array_size(k->lines) > before);
	return json_array_get(k->lines, json_array_size(k->lines) - 1);
}

static int error_code(json_t *m)
{
	return (int)json_integer_value(json_object_get(json_object_get(m, "error"), "code"));
}

static void test_initialize(void **state)
{
	sink k;
	mcp_server *s = server(&k);
	json_t *m = ask(s, &k,
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
			"\"2025-03-26\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
	json_t *r = json_object_get(m, "result");
	assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), "2025-03-26");
	assert_non_null(json_object_get(json_object_get(r, "capabilities"), "tools"));
	assert_non_null(json_object_get(json_object_get(r, "capabilities"), "logging"));
	m = ask(s, &k,
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"3000\"}}");
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion")),
			    mcp_protocol_versions[0]);
	m = ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}");
	assert_int_equal(error_code(m), -32602);
	mcp_server_free(s);
	json_decref(k.lines);
}

static void test_errors(void **state)
{
	sink k;
	mcp_server *s = server(&k);
	assert_int_equal(error_code(ask(s, &k, "{")), -32700);
	assert_int_equal(error_code(ask(s, &k, "[]")), -32600);
	assert_int_equal(error_code(ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":1}")), -32600);
	assert_int_equal(error_code(ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}")), -32600);
	assert_int_equal(error_code(ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}")),
			 -32602);
	assert_int_equal(error_code(ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x/y\"}")), -32601);
	assert_int_equal(error_code(ask(s, &k,
					"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
					"\"params\":{\"name\":\"nope\"}}")),
			 -32602);
	assert_int_equal(error_code(ask(s, &k,
					"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
					"\"params\":{\"name\":\"run\",\"arguments\":[]}}")),
			 -32602);
	assert_int_equal(error_code(ask(s, &k,
					"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\","
					"\"params\":{\"level\":\"loud\"}}")),
			 -32602);
	/* Notifications and responses get no answer. */
	size_t n = json_array_size(k.lines);
	const char *quiet[] = {
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9}}",
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}"};
	for (size_t i = 0; i < 3; i++)
		mcp_server_handle(s, quiet[i], strlen(quiet[i]));
	assert_int_equal(json_array_size(k.lines), n);
	json_t *m = ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
	assert_string_equal(json_string_value(json_object_get(m, "id")), "p");
	assert_int_equal(json_object_size(json_object_get(m, "result")), 0);
	mcp_server_free(s);
	json_decref(k.lines);
}

static void test_tools_list(void **state)
{
	sink k;
	mcp_server *s = server(&k);
	json_t *tools = json_object_get(
		json_object_get(ask(s, &k, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"), "result"),
		"tools");
	assert_int_equal(json_array_size(tools), 18);
	size_t i;
	json_t *t;
	json_array_foreach (tools, i, t) {
		assert_true(json_is_string(json_object_get(t, "name")));
		assert_string_equal(json_string_value(json_object_get(json_object_get(t, "inputSchema"), "type")),
				    "object");
		assert_string_equal(json_string_value(json_object_get(json_object_get(t, "outputSchema"), "type")),
				    "object");
	}
	mcp_server_free(s);
	json_decref(k.lines);
}

/* Tool failures are results with isError and a message; text of the result. */
static const char *tool_error(mcp_server *s, sink *k, const char *line)
{
	json_t *r = json_object_get(ask(s, k, line), "result");
	assert_true(json_is_true(json_object_get(r, "isError")));
	assert_null(json_object_get(r, "structuredContent"));
	return json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
}

static void test_tool_arguments(void **state)
{
	sink k;
	mcp_server *s = server(&k);
#define CALL(tool, args)                                                                       \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"" tool \
	"\",\"arguments\":" args "}}"
	assert_non_null(strstr(tool_error(s, &k, CALL("run", "{}")), "give either"));
	assert_non_null(strstr(tool_error(s, &k, CALL("run", "{\"command\":\"x\",\"argv\":[\"y\"]}")), "not both"));
	assert_non_null(strstr(tool_error(s, &k, CALL("run", "{\"argv\":[\"-x\"]}")), "not an option"));
	assert_non_null(strstr(tool_error(s, &k, CALL("run", "{\"command\":\"x\",\"timeout_seconds\":0}")), "1..3600"));
	assert_non_null(strstr(tool_error(s, &k, CALL("run", "{\"command\":\"x\",\"env\":{\"A=B\":\"c\"}}")), "NAME"));
	assert_non_null(strstr(tool_error(s, &k, CALL("run", "{\"command\":\"x\",\"bogus\":1}")), "unknown argument"));
	assert_non_null(strstr(tool_error(s, &k, CALL("read_file", "{}")), "\"path\" is required"));
	assert_non_null(strstr(tool_error(s, &k, CALL("read_file", "{\"path\":\"\"}")), "path is empty"));
	assert_non_null(
		strstr(tool_error(s, &k, CALL("read_file", "{\"path\":\"a\",\"encoding\":\"hex\"}")), "auto, text"));
	assert_non_null(strstr(
		tool_error(s, &k, CALL("write_file", "{\"path\":\"a\",\"content\":\"%%%\",\"encoding\":\"base64\"}")),
		"not valid base64"));
	assert_non_null(strstr(
		tool_error(s, &k, CALL("edit_file", "{\"path\":\"a\",\"old_string\":\"\",\"new_string\":\"x\"}")),
		"old_string is empty"));
	assert_non_null(strstr(
		tool_error(s, &k, CALL("edit_file", "{\"path\":\"a\",\"old_string\":\"x\",\"new_string\":\"x\"}")),
		"the same"));
	assert_non_null(strstr(tool_error(s, &k, CALL("list_directory", "{\"depth\":11}")), "1..10"));
	assert_non_null(
		strstr(tool_error(s, &k, CALL("move", "{\"source\":\"a\",\"destination\":\"b\",\"overwrite\":1}")),
		       "true or false"));
	assert_non_null(
		strstr(tool_error(s, &k, CALL("read_process_output", "{\"id\":\"../x\"}")), "not a process id"));
	assert_non_null(strstr(tool_error(s, &k, CALL("kill_process", "{\"id\":\"pAAAAAA\",\"signal\":\"STOP\"}")),
			       "TERM, KILL"));
	assert_non_null(strstr(tool_error(s, &k, CALL("start_process", "{\"argv\":[\"\"]}")), "non-empty string"));
	/* With valid arguments, no engine: the computer cannot be had. */
	assert_non_null(strstr(tool_error(s, &k, CALL("stat", "{\"path\":\"a\"}")), "no Docker engine"));
	assert_non_null(strstr(tool_error(s, &k, CALL("recover", "{}")), "no Docker engine"));
	assert_non_null(strstr(tool_error(s, &k, CALL("list_checkpoints", "{}")), "no session store"));
#undef CALL
	mcp_server_free(s);
	json_decref(k.lines);
}

static void test_line_cap(void **state)
{
	sink k;
	mcp_server *s = server(&k);
	int p[2];
	assert_int_equal(pipe(p), 0);
	/* The pipe holds 64 KiB: the 16 MiB line comes from a child. */
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		size_t big = MCP_MAX_LINE + 10;
		char *b = xmalloc(big);
		memset(b, 'a', big);
		const char *first = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n";
		brig_write_all(p[1], first, strlen(first));
		brig_write_all(p[1], b, big);
		brig_write_all(p[1], "\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n{\"jsonrpc\"", 53);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(mcp_server_serve(s, p[0], -1), 0);
	close(p[0]);
	assert_int_equal(json_array_size(k.lines), 3); /* the unfinished last line is dropped */
	assert_int_equal(json_integer_value(json_object_get(json_array_get(k.lines, 0), "id")), 1);
	assert_int_equal(error_code(json_array_get(k.lines, 1)), -32600);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(k.lines, 2), "id")), 2);
	mcp_server_free(s);
	json_decref(k.lines);
}

static void test_text(void **state)
{
	json_t *j = ops_string("a\xff"
			       "b\xe2\x82",
			       5);
	assert_string_equal(json_string_value(j), "a\xef\xbf\xbd"
						  "b\xef\xbf\xbd\xef\xbf\xbd");
	json_decref(j);
	assert_true(ops_is_text("h\xc3\xa9", 3));
	assert_false(ops_is_text("a\0b", 3));
	assert_false(ops_is_text("\xed\xa0\x80", 3)); /* a surrogate */
	assert_int_equal(ops_json_size("ab", 2), 2);
	assert_int_equal(ops_json_size("\"\\\n\t\r\b\f", 7), 14);
	assert_int_equal(ops_json_size("\x01\x1f\x7f\xc3\xa9", 5), 6 + 6 + 1 + 2);
	assert_int_equal(ops_json_size("a\xff\0", 3), 1 + 3 + 3); /* U+FFFD each */
	assert_int_equal(ops_json_fit("ab\xc3\xa9", 4, 3), 2); /* never half of é */
	assert_int_equal(ops_json_fit("\x01\x01\x01", 3, 13), 2);
	for (unsigned c = 0; c < 256; c++) { /* against what ops_string gives jansson */
		char in = (char)c;
		json_t *one = ops_string(&in, 1);
		char *dump = json_dumps(one, JSON_ENCODE_ANY | JSON_COMPACT);
		assert_non_null(dump);
		assert_int_equal(strlen(dump) - 2, ops_json_size(&in, 1));
		free(dump);
		json_decref(one);
	}
	char *e = ops_b64encode((const unsigned char *)"hello", 5);
	assert_string_equal(e, "aGVsbG8=");
	size_t n;
	unsigned char *d = ops_b64decode(e, strlen(e), &n);
	assert_int_equal(n, 5);
	assert_memory_equal(d, "hello", 5);
	free(d);
	free(e);
	assert_null(ops_b64decode("aGVsbG8", 7, &n));
	assert_null(ops_b64decode("aG=sbG8=", 8, &n));
	assert_null(ops_b64decode("aGVs\nG8=", 8, &n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_initialize), cmocka_unit_test(test_errors),
		cmocka_unit_test(test_tools_list), cmocka_unit_test(test_tool_arguments),
		cmocka_unit_test(test_line_cap),   cmocka_unit_test(test_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
