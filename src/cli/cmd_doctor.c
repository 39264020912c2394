/* cmd_doctor.c — `brig doctor`: checks the daemon brig talks to (and, when
 * it is local, this host) for the containment brig relies on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig/engine.h"
#include "cli/cli.h"

static const char usage[] =
	"Usage: brig doctor\n"
	"\n"
	"Check the Docker daemon brig talks to, and this host, for what brig's containment\n"
	"relies on. Prints one line per check (ok, WARN or FAIL) with the fix for what is\n"
	"missing; exits 0 when nothing FAILs, 1 when something does, 125 when the daemon\n"
	"does not answer.\n"
	"\n"
	"FAIL (brig's promises do not hold without it):\n"
	"  userns-remap       every sandbox is a real host uid without it (dockerd --userns-remap)\n"
	"  seccomp            the daemon must support seccomp profiles\n"
	"  runc               the default runtime\n"
	"  protected links    fs.protected_symlinks and fs.protected_hardlinks = 1 (local daemon)\n"
	"  firewall           the brig-sandbox bridge exists but brig's rules are not there\n"
	"WARN (brig works, with less):\n"
	"  runsc              gVisor, for --runtime runsc\n"
	"  apparmor           the daemon's docker-default AppArmor profile\n"
	"  cgroup v2          cgroup v1 still enforces brig's limits\n"
	"  firewall           no bridge yet (the rules come with it), or iptables unreadable\n"
	"\n"
	"  -h, --help   Print this help\n";

static int fails, warns;

static void report(int level, const char *name, const char *detail, const char *fix)
{
	static const char *const tag[] = {"ok  ", "WARN", "FAIL"};
	printf("%s %-16s %s\n", tag[level], name, detail);
	if (level && fix)
		printf("     %-16s fix: %s\n", "", fix);
	fails += level == 2;
	warns += level == 1;
}

static bool security_option(json_t *info, const char *prefix)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(info, "SecurityOptions"), i, v)
	{
		const char *s = json_string_value(v);
		if (s && strncmp(s, prefix, strlen(prefix)) == 0)
			return true;
	}
	return false;
}

/* -1: unreadable. */
static long read_sysctl(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* 1: a rule with brig's comment in filter INPUT; 0: none; -1: cannot tell. */
static int firewall_present(void)
{
	FILE *p = popen("iptables -w -S INPUT 2>/dev/null || iptables-legacy -w -S INPUT 2>/dev/null", "r");
	if (!p)
		return -1;
	char line[1024];
	bool any = false, found = false;
	while (fgets(line, sizeof line, p)) {
		any = true;
		found = found || strstr(line, "brig-sandbox") != NULL;
	}
	int st = pclose(p);
	return found ? 1 : any && st == 0 ? 0 : -1;
}

static bool local_daemon(void)
{
	const char *h = getenv("DOCKER_HOST");
	return !h || !*h || strncmp(h, "unix://", 7) == 0;
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt;
	while ((opt = cli_getopt("doctor", argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'h': return cli_help(usage);
		default: return CLI_EXIT_FAIL;
		}
	}
	if (optind < argc)
		return cli_usage("doctor", "unexpected argument '%s'", argv[optind]);

	brig_engine *e = NULL;
	json_t *info = NULL;
	brig_error *err = NULL;
	if (cli_engine_open(&e) != 0)
		return CLI_EXIT_FAIL;
	if (brig_engine_info(e, &info, &err) != 0) {
		brig_engine_free(e);
		return cli_error(err, "doctor");
	}

	if (security_option(info, "name=userns"))
		report(0, "userns-remap", "on: sandbox uids are unprivileged subordinate uids on the host", NULL);
	else
		report(2, "userns-remap", "off: sandbox uid 1000 is host uid 1000",
		       "\"userns-remap\": \"default\" in /etc/docker/daemon.json, restart dockerd, rebuild the images "
		       "(scripts/bootstrap does this on a fresh machine)");

	if (security_option(info, "name=seccomp"))
		report(0, "seccomp", "supported (brig passes its own profile)", NULL);
	else
		report(2, "seccomp", "not supported by the daemon",
		       "a dockerd and runc built with libseccomp (Debian's docker.io is)");

	json_t *rt = json_object_get(info, "Runtimes");
	if (json_object_get(rt, "runc"))
		report(0, "runc", "registered", NULL);
	else
		report(2, "runc", "not registered", "apt-get install runc");
	if (json_object_get(rt, "runsc"))
		report(0, "runsc", "registered (gVisor)", NULL);
	else
		report(1, "runsc", "not registered: --runtime runsc is unavailable",
		       "scripts/bootstrap (or apt-get install runsc, then \"runtimes\": {\"runsc\": {\"path\": "
		       "\"/usr/bin/runsc\", \"runtimeArgs\": [\"--network=host\"]}} in /etc/docker/daemon.json and "
		       "SIGHUP to dockerd)");

	if (security_option(info, "name=apparmor"))
		report(0, "apparmor", "on", NULL);
	else
		report(1, "apparmor", "off: containers run without docker-default",
		       "apt-get install apparmor and boot with apparmor=1 security=apparmor");

	const char *cg = json_string_value(json_object_get(info, "CgroupVersion"));
	if (cg && strcmp(cg, "2") == 0)
		report(0, "cgroup", "v2", NULL);
	else
		report(1, "cgroup", cg ? "v1: limits hold, but v2 is what Docker and the kernel develop"
				       : "version not reported",
		       "boot with systemd.unified_cgroup_hierarchy=1");

	if (!local_daemon()) {
		report(1, "host checks", "skipped: DOCKER_HOST is not a local socket", "run brig doctor on the daemon's host");
	} else {
		int fw = firewall_present();
		json_t *net = NULL;
		bool bridge = brig_engine_network_inspect(e, &net, BRIG_NETWORK_NAME, NULL) == 0;
		json_decref(net);
		if (fw == 1)
			report(0, "firewall", "brig-sandbox rules in filter INPUT", NULL);
		else if (fw == 0 && bridge)
			report(2, "firewall", "the brig-sandbox bridge exists but brig's rules are missing: host services are reachable",
			       "brig network rm && brig network create (as root), or remove and recreate the bridge");
		else
			report(1, "firewall",
			       fw == 0 ? "no brig-sandbox rules (no isolated computer yet?)"
				       : "cannot read iptables (not root, or no iptables)",
			       fw == 0 ? "brig network create (or any computer with --network isolated)"
				       : "run brig doctor as root");
		long sl = read_sysctl("/proc/sys/fs/protected_symlinks");
		long hl = read_sysctl("/proc/sys/fs/protected_hardlinks");
		char d[96];
		snprintf(d, sizeof d, "fs.protected_symlinks=%ld fs.protected_hardlinks=%ld", sl, hl);
		if (sl >= 1 && hl >= 1)
			report(0, "protected links", d, NULL);
		else
			report(2, "protected links", d,
			       "sysctl -w fs.protected_symlinks=1 fs.protected_hardlinks=1 (scripts/bootstrap makes it last)");
	}
	printf("%d failed, %d warnings\n", fails, warns);
	json_decref(info);
	brig_engine_free(e);
	return fails ? 1 : 0;
}
