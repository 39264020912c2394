/* daemon.c — the small sandbox-layer helpers that speak to, or tidy up after,
 * the daemon: host limits, image resolution, secret padding, time parsing,
 * stop-now and the not-found exit code. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/internal.h"

int brig_sandbox__stop_now(brig_engine *e, const char *id, brig_error **err)
{
	/* No grace: the point is to end a process that nothing else can end. */
	int rc = brig_engine_container_stop(e, id, 0, err);
	if (rc == BRIG_ENOTFOUND) {
		brig__error_clear(err);
		return 0;
	}
	return rc;
}

int brig_sandbox__stop_after(brig_engine *e, const char *id, const brig_exec_opts *opts, brig_error **err)
{
	if (opts && opts->version >= 2 && opts->before_stop)
		opts->before_stop(e, id, opts->stop_payload);
	return brig_sandbox__stop_now(e, id, err);
}

int64_t brig_sandbox__parse_time(const char *s)
{
	if (!s)
		return 0;
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	return (int64_t)timegm(&tm);
}

static bool daemon_not_found(const brig_capture *c)
{
	/* runc's start failure, which the daemon writes into the stream (framed
	 * as stdout on 20.10): "OCI runtime exec failed: … executable file not
	 * found …" or "… no such file or directory …". */
	if (!c->data || c->len > 4096 || strncmp(c->data, "OCI runtime exec failed", 23) != 0)
		return false;
	return strstr(c->data, "executable file not found") || strstr(c->data, "no such file or directory");
}

void brig_sandbox__fix_not_found(brig_exec_result *res)
{
	if (res->exit_code == 126 && (daemon_not_found(&res->out) || daemon_not_found(&res->err)))
		res->exit_code = 127;
}

int brig_sandbox__host_limits(brig_engine *e, brig_host_limits *out, brig_error **err)
{
	memset(out, 0, sizeof *out);
	if (brig_engine_is_local(e)) {
		long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		if (pages > 0 && psize > 0 && ncpu > 0) {
			out->mem_bytes = (int64_t)pages * psize;
			out->ncpu = (int)ncpu;
			return 0;
		}
	}
	json_t *info = NULL;
	int rc = brig_engine_info(e, &info, err);
	if (rc)
		return rc;
	out->mem_bytes = json_integer_value(json_object_get(info, "MemTotal"));
	out->ncpu = (int)json_integer_value(json_object_get(info, "NCPU"));
	json_decref(info);
	return 0;
}

static bool is_gvisor(const json_t *rt)
{
	const char *path = json_string_value(json_object_get(rt, "path"));
	const char *type = json_string_value(json_object_get(rt, "runtimeType"));
	const char *base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	return (base && strcmp(base, "runsc") == 0) || (type && strstr(type, "runsc"));
}

int brig_sandbox__check_runtime(brig_engine *e, const char *runtime, bool *gvisor, brig_error **err)
{
	if (gvisor)
		*gvisor = false;
	if (!runtime)
		return 0;
	json_t *info = NULL;
	int rc = brig_engine_info(e, &info, err);
	if (rc)
		return brig__error_prefix(err, rc, "runtime %s", runtime);
	json_t *rts = json_object_get(info, "Runtimes");
	json_t *rt = json_is_object(rts) ? json_object_get(rts, runtime) : NULL;
	if (rt) {
		if (gvisor)
			*gvisor = is_gvisor(rt);
		json_decref(info);
		return 0;
	}
	/* The daemon's names are untrusted: only well-formed ones are shown. */
	char known[256] = "";
	size_t used = 0;
	const char *k;
	json_t *v;
	json_object_foreach (rts, k, v) {
		if (brig_runtime_validate(k, NULL) != 0)
			continue;
		int n = snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", k);
		if (n < 0 || (size_t)n >= sizeof known - used) {
			known[used] = '\0';
			break;
		}
		used += (size_t)n;
	}
	json_decref(info);
	return brig__error_set(err, BRIG_EINVAL, 0,
			       "runtime: the Docker daemon does not know runtime '%s' (it has: %s); run "
			       "scripts/bootstrap, which installs gVisor's runsc and registers it, or add it under "
			       "\"runtimes\" in /etc/docker/daemon.json and send dockerd SIGHUP",
			       runtime, used ? known : "none listed");
}

void brig_sandbox__pad_secret_body(json_t *cfg)
{
	size_t i;
	json_t *v;
	bool secret = false;
	json_array_foreach (json_object_get(cfg, "Env"), i, v) {
		if (brig_env_is_credential(json_string_value(v)))
			secret = true;
	}
	if (!secret)
		return;
	char pad[4200];
	memset(pad, ' ', sizeof pad - 1);
	pad[sizeof pad - 1] = '\0';
	json_object_set_new(cfg, "BrigPadding", json_string(pad));
}

int brig_sandbox__resolve_image(brig_engine *e, char **out, bool *etc_hosts, const char *image, brig_error **err)
{
	if (etc_hosts)
		*etc_hosts = false;
	json_t *img = NULL;
	int rc = brig_engine_image_inspect(e, &img, image, err);
	if (rc == BRIG_ENOTFOUND)
		return brig__error_set(err, BRIG_ENOTFOUND, 0,
				       "image %s is not in the local image store and brig never pulls: build it "
				       "with `brig image build` (or scripts/build-test-image for brig-test:local), "
				       "or pass --image",
				       image);
	if (rc)
		return rc;
	const char *id = json_string_value(json_object_get(img, "Id"));
	if (!id)
		rc = brig__error_set(err, BRIG_EPROTO, 0, "inspect image %s: no Id", image);
	else if (out)
		*out = xstrdup(id);
	if (!rc && etc_hosts) {
		const char *v = json_string_value(json_object_get(
			json_object_get(json_object_get(img, "Config"), "Labels"), BRIG_LABEL_ETC_HOSTS));
		*etc_hosts = v && strcmp(v, BRIG_ETC_HOSTS_OPTIONAL) == 0;
	}
	json_decref(img);
	return rc;
}

static atomic_int unremapped; /* 0 none, 1 seen, 2 reported */

void brig_sandbox__note_shift(const brig_idshift *sh)
{
	int none = 0;
	if (sh->uid == 0)
		atomic_compare_exchange_strong(&unremapped, &none, 1);
}

bool brig_userns_warning_due(void)
{
	int seen = 1;
	return atomic_compare_exchange_strong(&unremapped, &seen, 2);
}
