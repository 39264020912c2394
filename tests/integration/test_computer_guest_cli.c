/* test_computer_guest_cli.c — brig-init from the command line, as a user
 * meets it: brig exec -d, ps, kill, attach, and brig exec -it driven
 * through tmux (tty, stty size, a resize observed, the terminal restored).
 * Runs when this build carries brig-init. Every object carries
 * brig.test=<run id> and is removed at exit. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brig/sandbox.h"
#include "brig/spec.h"
#include "guest/host.h"
#include "util/util.h"

static brig_engine *E;
static char TMP[64];
static char *ENV[2];
static char NS[64];

static int setup(void **state)
{
	brig_test_cleanup_at_exit();
	E = brig_test_engine();
	snprintf(NS, sizeof NS, "t%s", brig_test_run_id());
	snprintf(TMP, sizeof TMP, "/tmp/brig-guest-cli-XXXXXX");
	if (!mkdtemp(TMP))
		return -1;
	ENV[0] = xasprintf("BRIG_STORE=sqlite://%s/store.db", TMP);
	return 0;
}

static int teardown(void **state)
{
	brig_test_cleanup(E);
	brig_engine_free(E);
	char *rm = xasprintf("rm -rf %s", TMP);
	(void)!system(rm);
	free(rm);
	free(ENV[0]);
	return 0;
}

static char *computer(const char *session)
{
	brig_error *err = NULL;
	brig_spec s;
	brig_spec_init(&s);
	ASSERT_OK(brig_spec_set(&s, "image", brig_test_image(), &err), err);
	char l[96];
	snprintf(l, sizeof l, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	ASSERT_OK(brig_spec_add_label(&s, l, &err), err);
	brig_identity id = {.ns = NS, .agent = "agent", .session = session, .generation = 1};
	brig_computer *c = NULL;
	ASSERT_OK(brig_computer_create(E, &c, &id, &s, &err), err);
	brig_spec_clear(&s);
	char *name = xstrdup(c->name);
	brig_computer_free(c);
	return name;
}

typedef struct out {
	int code;
	char *out, *err;
} out;

static out brig(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5, const char *a6,
		const char *a7, const char *a8)
{
	char *argv[] = {"brig",     (char *)a1, (char *)a2, (char *)a3, (char *)a4,
			(char *)a5, (char *)a6, (char *)a7, (char *)a8, NULL};
	out o = {0};
	o.code = brig_test_spawn(argv, NULL, ENV, &o.out, &o.err);
	return o;
}

static void out_free(out *o)
{
	free(o->out);
	free(o->err);
}

static json_t *ps_entry(const char *name, long long id)
{
	out o = brig("ps", name, "--json", NULL, NULL, NULL, NULL, NULL);
	assert_int_equal(o.code, 0);
	json_t *list = json_loads(o.out, 0, NULL);
	assert_non_null(list);
	out_free(&o);
	size_t i;
	json_t *it, *found = NULL;
	json_array_foreach (list, i, it)
		if (json_integer_value(json_object_get(it, "id")) == id)
			found = json_incref(it);
	json_decref(list);
	return found;
}

static void test_background(void **state)
{
	if (!brig_guest__volume_name()) {
		print_message("skipped: this build carries no brig-init\n");
		return;
	}
	cleanup_free char *name = computer("bg");
	out o = brig("exec", "-d", name, "--", "sh", "-c", "echo hello; sleep 1004", NULL);
	if (o.code != 0)
		fail_msg("exec -d: %d %s", o.code, o.err);
	long long id = atoll(o.out);
	assert_true(id > 0);
	out_free(&o);

	json_t *e = ps_entry(name, id);
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "running");
	assert_true(json_is_true(json_object_get(e, "detached")));
	json_decref(e);

	char ids[32];
	snprintf(ids, sizeof ids, "%lld", id);
	o = brig("kill", name, ids, NULL, NULL, NULL, NULL, NULL);
	assert_int_equal(o.code, 0);
	out_free(&o);
	e = ps_entry(name, id);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "exited");
	assert_true(json_is_true(json_object_get(e, "killed")));
	json_decref(e);

	/* its kept output, then its end */
	o = brig("attach", name, ids, NULL, NULL, NULL, NULL, NULL);
	assert_string_equal(o.out, "hello\n");
	assert_int_equal(o.code, 137);
	out_free(&o);

	/* -s sends one signal */
	o = brig("exec", "-d", name, "--", "sleep", "1005", NULL, NULL);
	snprintf(ids, sizeof ids, "%lld", atoll(o.out));
	out_free(&o);
	o = brig("kill", "-s", "TERM", name, ids, NULL, NULL, NULL);
	assert_int_equal(o.code, 0);
	out_free(&o);
	o = brig("attach", name, ids, NULL, NULL, NULL, NULL, NULL);
	assert_int_equal(o.code, 143);
	out_free(&o);

	o = brig("kill", name, "99999", NULL, NULL, NULL, NULL, NULL);
	assert_int_equal(o.code, 125);
	out_free(&o);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return xstrdup("");
	char buf[8192];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return xstrdup(buf);
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *c = NULL;
	assert_true(vasprintf(&c, fmt, ap) >= 0);
	va_end(ap);
	(void)!system(c);
	free(c);
}

static void test_terminal(void **state)
{
	if (!brig_guest__volume_name() || system("command -v tmux >/dev/null 2>&1") != 0) {
		print_message("skipped: no brig-init in this build, or no tmux\n");
		return;
	}
	cleanup_free char *name = computer("tty");
	char sess[64];
	snprintf(sess, sizeof sess, "brigtest-%s", brig_test_run_id());
	const char *bin = getenv("BRIG_BIN");
	assert_non_null(bin);
	sh("tmux kill-session -t %s 2>/dev/null; tmux new-session -d -s %s -x 100 -y 30 'sh'", sess, sess);
	usleep(300000);
	sh("tmux send-keys -t %s 'stty -g > %s/before; %s %s exec -it %s -- sh; echo BRIGRC=$?; stty -g > %s/after' "
	   "Enter",
	   sess, TMP, ENV[0], bin, name, TMP);
	usleep(2500000);
	sh("tmux send-keys -t %s 'tty; stty size' Enter", sess);
	usleep(1000000);
	sh("tmux resize-window -t %s -x 120 -y 40", sess);
	usleep(1000000);
	sh("tmux send-keys -t %s 'stty size; exit 5' Enter", sess);
	usleep(2000000);
	sh("tmux capture-pane -t %s -p -S -100 > %s/pane; tmux kill-session -t %s", sess, TMP, sess);
	cleanup_free char *pane_path = xasprintf("%s/pane", TMP);
	cleanup_free char *pane = slurp(pane_path);
	print_message("%s", pane);
	assert_non_null(strstr(pane, "/dev/pts/"));
	assert_non_null(strstr(pane, "30 100"));
	assert_non_null(strstr(pane, "40 120"));
	assert_non_null(strstr(pane, "BRIGRC=5"));
	cleanup_free char *bp = xasprintf("%s/before", TMP);
	cleanup_free char *ap = xasprintf("%s/after", TMP);
	cleanup_free char *before = slurp(bp);
	cleanup_free char *after = slurp(ap);
	assert_true(*before);
	assert_string_equal(before, after);
}

/* `brig agent claude` with no prompt, on a terminal, gives the agent one
 * (its interactive TUI) and the run is audited like any other. The test
 * image has no claude: a script of that name on the computer's PATH stands
 * in for it. */
static void test_agent_tui(void **state)
{
	if (!brig_guest__volume_name() || system("command -v tmux >/dev/null 2>&1") != 0) {
		print_message("skipped: no brig-init in this build, or no tmux\n");
		return;
	}
	const char *bin = getenv("BRIG_BIN");
	assert_non_null(bin);
	char label[96];
	snprintf(label, sizeof label, BRIG_TEST_LABEL "=%s", brig_test_run_id());
	cleanup_free char *common =
		xasprintf("--ns %s --session tui --image %s --network none --label %s --no-checkpoint "
			  "-e PATH=/workspace/bin:/usr/local/bin:/usr/bin:/bin",
			  NS, brig_test_image(), label);
	/* the session's computer, then the stand-in */
	cleanup_free char *mk = xasprintf("%s %s agent claude %s -- --version >/dev/null 2>&1", ENV[0], bin, common);
	(void)!system(mk);
	char *xargv[] = {"brig",
			 "exec",
			 "--ns",
			 NS,
			 "--agent",
			 "claude",
			 "--session",
			 "tui",
			 "--",
			 "sh",
			 "-c",
			 "mkdir -p /workspace/bin && printf '#!/bin/sh\\necho ARGC=$#; tty; stty size; exit 7\\n' "
			 "> /workspace/bin/claude && chmod +x /workspace/bin/claude",
			 NULL};
	out o = {0};
	o.code = brig_test_spawn(xargv, NULL, ENV, &o.out, &o.err);
	assert_int_equal(o.code, 0);
	out_free(&o);
	char sess[64];
	snprintf(sess, sizeof sess, "brigtui-%s", brig_test_run_id());
	sh("tmux kill-session -t %s 2>/dev/null; tmux new-session -d -s %s -x 100 -y 30 'sh'", sess, sess);
	usleep(300000);
	sh("tmux send-keys -t %s '%s %s agent claude %s; echo BRIGRC=$?' Enter", sess, ENV[0], bin, common);
	int64_t until = brig_now_ms() + 30000;
	cleanup_free char *pane_path = xasprintf("%s/pane-tui", TMP);
	char *pane = NULL;
	for (;;) {
		sh("tmux capture-pane -t %s -p -S -100 > %s", sess, pane_path);
		free(pane);
		pane = slurp(pane_path);
		if (strstr(pane, "\nBRIGRC=") || brig_now_ms() > until)
			break;
		usleep(300000);
	}
	sh("tmux kill-session -t %s", sess);
	print_message("%s", pane);
	assert_non_null(strstr(pane, "ARGC=0"));
	assert_non_null(strstr(pane, "/dev/pts/"));
	assert_non_null(strstr(pane, "30 100"));
	assert_non_null(strstr(pane, "BRIGRC=7"));
	free(pane);
	/* audited: the history has the TUI's run, exit 7 */
	o = brig("history", "--ns", NS, "--agent", "claude", "--session", "tui", "--json");
	assert_int_equal(o.code, 0);
	print_message("%s\n", o.out);
	json_t *h = json_loads(o.out, 0, NULL);
	assert_non_null(h);
	bool seen = false;
	size_t i;
	json_t *it;
	json_t *cmds = json_is_array(h) ? h : json_object_get(h, "commands");
	json_array_foreach (cmds, i, it) {
		json_t *code = json_object_get(it, "exit_code");
		if (code && json_integer_value(code) == 7)
			seen = true;
	}
	assert_true(seen);
	json_decref(h);
	out_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_background),
		cmocka_unit_test(test_terminal),
		cmocka_unit_test(test_agent_tui),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
