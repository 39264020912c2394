/* policy.c — what a client's spec may ask for: the runtime, the seccomp
 * profile and the addresses ports are published on stay within what the
 * server's operator allowed (brig serve --allow-*). */
#include <arpa/inet.h>
#include <string.h>

#include "egress/egress_internal.h"
#include "serve/serve.h"
#include "util/util.h"

static bool loopback(const char *ip)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, ip, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, ip, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return false;
}

static char *joined(const char *const *v, size_t n)
{
	brig_buf b;
	brig_buf_init(&b, 1 << 16);
	for (size_t i = 0; i < n; i++)
		brig_buf_putf(&b, "%s%s", i ? ", " : "", v[i]);
	size_t len;
	char *s = brig_buf_steal(&b, &len);
	return s ? s : xstrdup("");
}

int serve_spec_policy(const brig_spec *spec, const serve_config *cfg, brig_error **err)
{
	if (spec->runtime && *spec->runtime) {
		bool ok = false;
		for (size_t i = 0; i < cfg->allow_runtime_count && !ok; i++)
			ok = strcmp(cfg->allow_runtimes[i], spec->runtime) == 0;
		if (!ok) {
			cleanup_free char *list = joined(cfg->allow_runtimes, cfg->allow_runtime_count);
			return brig__error_set(err, BRIG_EDENIED, 0,
					       "runtime: '%.64s' is not allowed by this server (%s%s); its operator "
					       "allows one with brig serve --allow-runtime NAME",
					       spec->runtime, *list ? "allowed: " : "only the daemon's default", list);
		}
	}
	if (!cfg->allow_custom_seccomp &&
	    (!spec->seccomp_profile || strcmp(spec->seccomp_profile, brig_spec_seccomp_default()) != 0))
		return brig__error_set(err, BRIG_EDENIED, 0,
				       "seccomp_profile: this server allows only brig's own profile (leave the field "
				       "out); its operator allows others with brig serve --allow-custom-seccomp");
	for (size_t i = 0; i < spec->port_count; i++) {
		const char *ip = spec->ports[i].host_ip;
		bool ok = loopback(ip);
		for (size_t k = 0; k < cfg->allow_publish_count && !ok; k++)
			ok = strcmp(cfg->allow_publish[k], ip) == 0;
		if (!ok) {
			cleanup_free char *list = joined(cfg->allow_publish, cfg->allow_publish_count);
			return brig__error_set(err, BRIG_EDENIED, 0,
					       "publish: host address %s is not allowed by this server (allowed: "
					       "loopback%s%s); its operator allows one with brig serve "
					       "--allow-publish-address ADDR",
					       ip, *list ? ", " : "", list);
		}
	}
	return 0;
}

int serve_session_policy(brig_store *s, const serve_config *cfg, const brig_identity *id, brig_error **err)
{
	brig_store_session *rec = NULL;
	if (brig_store_session_get(s, &rec, id->ns, id->agent, id->session, NULL) != 0)
		return 0; /* no session: nothing recorded to hold */
	int rc = 0;
	json_t *j = rec->spec_json ? json_loads(rec->spec_json, JSON_REJECT_DUPLICATES, NULL) : NULL;
	if (j) {
		brig_spec spec;
		rc = brig_spec_from_json(&spec, j, err);
		if (rc == 0 && (rc = serve_spec_policy(&spec, cfg, err)) != 0)
			brig__error_prefix(err, rc, "%s/%s/%s: its recorded spec", id->ns, id->agent, id->session);
		brig_spec_clear(&spec); /* set up by from_json, also when it fails */
		json_decref(j);
	}
	brig_store_session_free(rec);
	return rc;
}

int serve_secret_values_check(const json_t *values, const brig_spec *spec, brig_error **err)
{
	if (!values)
		return 0;
	if (!json_is_object(values) || json_object_size(values) > BRIG_SPEC_SECRETS_MAX)
		return brig__error_set(err, BRIG_EINVAL, 0,
				       "secret_values: an object of at most %d secret names, each with its value (a "
				       "string)",
				       BRIG_SPEC_SECRETS_MAX);
	const char *key;
	json_t *v;
	json_object_foreach ((json_t *)values, key, v) {
		size_t kl = strlen(key);
		bool key_ok = kl > 0 && kl <= 128 && !(key[0] >= '0' && key[0] <= '9');
		for (size_t i = 0; i < kl && key_ok; i++)
			key_ok = (key[i] >= 'A' && key[i] <= 'Z') || (key[i] >= 'a' && key[i] <= 'z') ||
				 (key[i] >= '0' && key[i] <= '9') || key[i] == '_';
		if (!key_ok)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret_values: each name is a secret's, an environment variable name "
					       "(letters, digits, _)");
		const char *q = key;
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > BRIG_EGRESS_SECRET_MAX)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret_values.%s: a string of 1..%d printable ASCII characters", q,
					       BRIG_EGRESS_SECRET_MAX);
		const char *s = json_string_value(v);
		for (size_t i = 0; s[i]; i++)
			if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
				return brig__error_set(err, BRIG_EINVAL, 0,
						       "secret_values.%s: a string of 1..%d printable ASCII characters "
						       "(it goes into an HTTP header)",
						       q, BRIG_EGRESS_SECRET_MAX);
		bool named = !spec;
		size_t kn = kl;
		for (size_t i = 0; spec && i < spec->secret_count && !named; i++)
			named = strncmp(spec->secrets[i], key, kn) == 0 && spec->secrets[i][kn] == '@';
		if (!named)
			return brig__error_set(err, BRIG_EINVAL, 0,
					       "secret_values.%s: the spec has no such secret (give it in spec.secrets "
					       "as NAME@HOST[,HOST...])",
					       q);
	}
	return 0;
}
