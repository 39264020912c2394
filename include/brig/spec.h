/* brig/spec.h — the sandbox policy: identities and deterministic names, the
 * hardened container spec, env/credential rules and the Docker JSON bodies. */
#ifndef BRIG_SPEC_H
#define BRIG_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brig/common.h"
#include "brig/error.h"

/* Everything here is pure: no call talks to Docker; the lifecycle code feeds
 * the bodies built here to the engine client (brig/engine.h).
 *
 * Conventions: functions that can fail return 0 or a negative BRIG_E* code
 * and fill *err (err may be NULL). JSON returned through `json_t **out` is a
 * new reference owned by the caller (json_decref). No message produced here
 * ever contains an env value; strings echoed from input are escaped (non
 * printable bytes as \xNN) and cut to 64 characters. */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Identity and naming
 * ---------------------------------------------------------------------- */

/* "brig-" + 64 lowercase hex digits + NUL. */
#define BRIG_NAME_SIZE 70
/* 64 lowercase hex digits + NUL (spec hashes, session keys). */
#define BRIG_HASH_SIZE 65
/* Longest namespace, agent or session name. */
#define BRIG_IDENT_MAX 63
#define BRIG_GENERATION_MAX 1000000u

/* A computer is (namespace, agent, session, generation). The strings are
 * borrowed by whoever fills the struct, except for identities returned by
 * brig_identity_from_labels(), which own them (brig_identity_free). */
typedef struct brig_identity {
	const char *ns;
	const char *agent;
	const char *session;
	uint32_t generation; /* 1..BRIG_GENERATION_MAX */
} brig_identity;

/* What a brig container is for; recorded in the brig.kind label. */
typedef enum brig_kind {
	BRIG_KIND_COMPUTER = 0, /* long-lived, one per identity, "computer" */
	BRIG_KIND_RUN = 1,      /* disposable, one per command, "run" */
} brig_kind;

/* Label keys brig writes on everything it creates. Callers may not set these
 * through brig_spec_add_label(). */
#define BRIG_LABEL_MANAGED "brig.managed" /* always "1" */
#define BRIG_LABEL_KIND "brig.kind"       /* computer | run | network | volume */
#define BRIG_LABEL_NS "brig.ns"
#define BRIG_LABEL_AGENT "brig.agent"
#define BRIG_LABEL_SESSION "brig.session"
#define BRIG_LABEL_GENERATION "brig.generation" /* decimal */
#define BRIG_LABEL_VERSION "brig.version"       /* BRIG_VERSION of the creator */
#define BRIG_LABEL_SPEC "brig.spec"             /* brig_spec_hash() */
#define BRIG_LABEL_HARNESS "brig.harness"       /* claude | codex | none */
#define BRIG_LABEL_RUN "brig.run"               /* run id (runs only) */
#define BRIG_LABEL_DEADLINE "brig.deadline"     /* unix seconds the run ends by */
#define BRIG_LABEL_CONTAINER "brig.container"   /* volumes: their container's name */
#define BRIG_LABEL_VOLUME "brig.volume"         /* volumes: workspace | runtime | … */
#define BRIG_LABEL_INIT "brig.init"             /* 16 hex of the brig-init a container runs as PID 1 */
#define BRIG_LABEL_USERNS "brig.userns"         /* brig-init marker volume: "UID:GID" a remapping daemon maps root to */
/* Computers with env entries: 32 random hex digits keying the env values'
 * digests in the spec hash (brig_spec_hash_salted). */
#define BRIG_LABEL_ENV_SALT "brig.env-salt"
/* Computers with secrets (brig_spec.secrets): their names, comma-separated
 * (never a value). Their commands get no model credential forwarded from
 * brig's environment: the placeholder stands in for it. */
#define BRIG_LABEL_SECRETS "brig.secrets"
/* Most secrets one spec may hold. */
#define BRIG_SPEC_SECRETS_MAX 16
#define BRIG_ENV_SALT_SIZE 33 /* 32 lowercase hex digits + NUL */
/* On an image: "optional" says it works without the /etc/hosts Docker writes
 * (Docker leaves an empty one in a container without its network sandbox,
 * whatever the image holds), so brig may start it with
 * brig_container_opts.network_disabled. brig's images carry it: they resolve
 * localhost and their own hostname through libnss-myhostname. */
#define BRIG_LABEL_ETC_HOSTS "brig.etc-hosts"
#define BRIG_ETC_HOSTS_OPTIONAL "optional"

/* Checks one user-given name: 1..63 characters of A-Z a-z 0-9 _ . - starting
 * with a letter or digit. field ("ns", "agent", "session") starts the
 * message. Errors: BRIG_EINVAL. */
BRIG_PUBLIC int brig_identity_check_name(const char *field, const char *value, brig_error **err);

/* Checks all four fields of id. Errors: BRIG_EINVAL naming the field. */
BRIG_PUBLIC int brig_identity_validate(const brig_identity *id, brig_error **err);

/* Writes the container name of id into out: "brig-" + hex SHA-256 over a
 * length-prefixed encoding of a domain tag, ns, agent, session (4-byte
 * big-endian length, then bytes) and the generation (4-byte big-endian), so
 * ("ab","c") and ("a","bc") differ. Deterministic across hosts and versions.
 * Errors: BRIG_EINVAL (id invalid; out is set to ""). */
BRIG_PUBLIC int brig_identity_name(char out[BRIG_NAME_SIZE], const brig_identity *id, brig_error **err);

/* Writes the session key of id (64 hex digits): the same encoding without the
 * generation and with another domain tag, so every generation of a session
 * shares it and it never equals any container name's digits.
 * Errors: BRIG_EINVAL (out is set to ""). */
BRIG_PUBLIC int brig_identity_session_key(char out[BRIG_HASH_SIZE], const brig_identity *id, brig_error **err);

/* Reads a computer's identity back from a container's Config.Labels object
 * (borrowed; untrusted). *out is one allocation owning its strings, freed
 * with brig_identity_free(). Errors: BRIG_ENOTFOUND when the labels are not
 * a brig computer's (no brig.managed=1 or brig.kind other than computer),
 * BRIG_EPROTO when brig's labels are missing or malformed. */
BRIG_PUBLIC int brig_identity_from_labels(brig_identity **out, const json_t *labels, brig_error **err);

/* Frees an identity returned by brig_identity_from_labels(); accepts NULL. */
BRIG_PUBLIC void brig_identity_free(brig_identity *id);

/* Decides whether a container whose Config.Labels is labels (borrowed,
 * untrusted, may be NULL) is the computer id created with spec_hash. Returns
 * 0 when it is. Otherwise returns BRIG_ECONFLICT and the message describes
 * the first difference, in this order: "not a brig container", "not a brig
 * computer (brig.kind is 'run')", "ns differs: container has 'x', wanted
 * 'y'" (then agent, session, generation), "spec hash differs: container has
 * X, wanted Y". brig.version is not compared: the spec hash already covers
 * every setting that shapes the container. BRIG_EINVAL when id is invalid. */
BRIG_PUBLIC int brig_labels_match(const json_t *labels, const brig_identity *id, const char *spec_hash,
				  brig_error **err);

/* ------------------------------------------------------------------------
 * The spec
 * ---------------------------------------------------------------------- */

#define BRIG_SPEC_VERSION 1

/* Bumped whenever the container body gains or changes a setting that is not
 * a spec field (a new hardening flag): it is part of the spec hash, so a
 * computer created by an older policy is never silently adopted. */
/* 2: brig's own seccomp profile by default; 3: brig-init is PID 1, no
 * dockerd logger, private cgroup namespace, more masked paths,
 * socket-family allowlist, no socketcall or mq_* (issues 14, 20);
 * 4: env values out of Config.Env (issue 20). */
#define BRIG_SPEC_POLICY 4

#define BRIG_DEFAULT_IMAGE "brig-sandbox:local"
#define BRIG_DEFAULT_USER "1000:1000"
#define BRIG_DEFAULT_SUBNET "172.30.0.0/22"
#define BRIG_NETWORK_NAME "brig-sandbox" /* the isolated bridge */
#define BRIG_NETWORK_BRIDGE "brig0"      /* its Linux interface */
/* Memory that must stay free for processes after every tmpfs is full. */
#define BRIG_MIN_FREE_MB 256
/* Default size of a run's /outbox. */
#define BRIG_DEFAULT_OUT_MB 256

typedef enum brig_network {
	BRIG_NET_NONE = 0,     /* "none": only lo */
	BRIG_NET_ISOLATED = 1, /* "isolated": the brig-sandbox bridge, icc off */
	BRIG_NET_EGRESS = 2,   /* "egress": brig-egress, internal; only the egress proxy (brig/egress.h) */
} brig_network;

/* One published port: TCP connections to host_ip:host_port on the daemon's
 * machine reach port `port` of a computer on the isolated bridge (Docker's
 * HostConfig.PortBindings). Spelled "[HOST_IP:]HOST_PORT:PORT" as docker's
 * -p ("[::1]:8080:80" for IPv6; an optional "/tcp" suffix); the host
 * address is 127.0.0.1 unless another is named. */
#define BRIG_IP_SIZE 46       /* INET6_ADDRSTRLEN */
#define BRIG_PORT_STR_SIZE 64 /* "[" + address + "]:65535:65535/tcp" + NUL */
#define BRIG_PORTS_MAX 64     /* published ports per computer */
typedef struct brig_port {
	char host_ip[BRIG_IP_SIZE]; /* "127.0.0.1": a numeric IPv4 or IPv6 address */
	uint16_t host_port;         /* 1..65535 */
	uint16_t port;              /* 1..65535, inside the computer */
} brig_port;

typedef enum brig_harness {
	BRIG_HARNESS_NONE = 0,   /* "none": forwards no credential */
	BRIG_HARNESS_CLAUDE = 1, /* "claude": ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN */
	BRIG_HARNESS_CODEX = 2,  /* "codex": OPENAI_API_KEY */
} brig_harness;

/* Host limits the spec is checked against; a field of 0 is unknown and not
 * checked. Fill from the daemon's /info (MemTotal, NCPU). */
typedef struct brig_host_limits {
	int64_t mem_bytes;
	int ncpu;
} brig_host_limits;

/* Every setting that shapes a container. Initialise with brig_spec_init()
 * and release with brig_spec_clear(). Strings and lists are owned by the
 * spec (malloc'd); replace them through brig_spec_set() and the add
 * functions. Numbers may be assigned directly; brig_spec_validate() checks
 * everything. */
typedef struct brig_spec {
	unsigned version;         /* BRIG_SPEC_VERSION */
	char *image;              /* "brig-sandbox:local"; a tag or sha256:… id */
	char *user;               /* "1000:1000": numeric uid:gid, never 0 */
	double cpus;              /* 2.0; 0.01 .. host CPUs */
	int64_t memory_mb;        /* 2048; no swap (MemorySwap = Memory) */
	int64_t pids;             /* 256; 16 .. 1048576 */
	int64_t workspace_mb;     /* 512: /workspace tmpfs volume */
	int64_t runtime_mb;       /* 256: /runtime tmpfs volume (HOME) */
	int64_t shm_mb;           /* 64: /dev/shm */
	int64_t workspace_inodes; /* 65536: nr_inodes of /workspace (and a run's /inbox, /outbox) */
	int64_t runtime_inodes;   /* 32768: nr_inodes of /runtime */
	int64_t nofile;           /* 1024: soft = hard open-files limit */
	brig_network network;     /* BRIG_NET_NONE */
	char *subnet;             /* "172.30.0.0/22"; used with BRIG_NET_ISOLATED */
	brig_harness harness;     /* BRIG_HARNESS_NONE */
	char *seccomp_profile;    /* brig_spec_seccomp_default(); NULL: the daemon's default; else profile JSON */
	char *runtime;            /* NULL: the daemon's default (runc); else a runtime it registers ("runsc") */
	char **env;               /* "KEY=VALUE", keys unique, in order added */
	size_t env_count;
	char **labels;            /* extra labels "key=value" (e.g. brig.test=ID) */
	size_t label_count;
	brig_port *ports;         /* published ports (computers on the isolated network only) */
	size_t port_count;        /* 0..BRIG_PORTS_MAX */
	char **allow;             /* egress rules (brig/egress.h), canonical; only with BRIG_NET_EGRESS */
	size_t allow_count;
	/* Credentials that never enter (--secret, only with BRIG_NET_EGRESS):
	 * "NAME@HOST[,HOST…]", canonical. Inside, NAME holds a placeholder
	 * (brig-placeholder-<32 hex>, random per computer); brig's egress
	 * proxy terminates TLS for those hosts only and puts the value (NAME
	 * in brig's environment when the computer is created) where the
	 * placeholder stands in request headers. Each HOST is also allowed. */
	char **secrets;
	size_t secret_count;
} brig_spec;

/* Fills spec with the defaults above (overwrites without freeing). */
BRIG_PUBLIC void brig_spec_init(brig_spec *spec);

/* brig's own seccomp profile (Docker's JSON format), the default of
 * spec->seccomp_profile: an allowlist that fails everything else with
 * EPERM, blocks io_uring, namespaces, mounts, keyrings, bpf, perf and
 * module loading, filters clone's namespace flags and personality's
 * values, and answers clone3 with ENOSYS (see src/spec/seccomp.c for
 * the reasoning). Static, borrowed; the same bytes on every build. */
BRIG_PUBLIC const char *brig_spec_seccomp_default(void);

/* Frees everything spec owns and zeroes it; accepts NULL. */
BRIG_PUBLIC void brig_spec_clear(brig_spec *spec);

/* Makes dst an independent deep copy of src (dst is overwritten without
 * being freed; clear it with brig_spec_clear()). */
BRIG_PUBLIC void brig_spec_copy(brig_spec *dst, const brig_spec *src);

/* Sets one field from a string, as the command line gives it. key is the
 * flag name with '-' or '_': image, user, cpus, memory-mb, pids,
 * workspace-mb, runtime-mb, shm-mb, workspace-inodes, runtime-inodes,
 * nofile, network (none|isolated|egress), subnet, harness (claude|codex|none),
 * allow (egress rules, comma-separated; each added once),
 * secret (NAME@HOST[,HOST…]: see brig_spec.secrets; adds the hosts to allow),
 * seccomp-profile (JSON text; "" for the daemon's default), runtime (an OCI
 * runtime name the daemon registers, e.g. runsc; "" for the daemon's
 * default), env (KEY=VALUE, or KEY to copy brig's own environment; adds or
 * replaces), label (key=value; adds or replaces) and
 * publish ([HOST_IP:]HOST_PORT:PORT; adds, see brig_spec_add_publish).
 * value is borrowed. On error spec is unchanged.
 * Errors: BRIG_EINVAL naming the field and what is allowed (network 'host',
 * 'bridge' and 'container:…' are refused here). */
BRIG_PUBLIC int brig_spec_set(brig_spec *spec, const char *key, const char *value, brig_error **err);

/* Adds or replaces an env entry. entry is "KEY=VALUE", or "KEY" to take the
 * value from brig's own environment (like docker -e KEY). Credential keys
 * are accepted and kept in memory only: they never reach the container's
 * configuration or the spec hash (see brig_env_is_credential()).
 * Errors: BRIG_EINVAL naming the key, never the value. */
BRIG_PUBLIC int brig_spec_add_env(brig_spec *spec, const char *entry, brig_error **err);

/* Adds or replaces an extra label "key=value" (keys of the brig.* set above
 * are refused). Errors: BRIG_EINVAL. */
BRIG_PUBLIC int brig_spec_add_label(brig_spec *spec, const char *entry, brig_error **err);

/* Adds a published port spelled "[HOST_IP:]HOST_PORT:PORT" (see
 * brig_port_parse). A host address and port already given — or one that
 * overlaps it, as 0.0.0.0:8080 overlaps 127.0.0.1:8080 — is refused, as is
 * a port past BRIG_PORTS_MAX. That the network is isolated is checked by
 * brig_spec_validate(), so flags may come in any order.
 * Errors: BRIG_EINVAL ("publish: …", naming what is allowed). */
BRIG_PUBLIC int brig_spec_add_publish(brig_spec *spec, const char *publish, brig_error **err);

/* Parses "[HOST_IP:]HOST_PORT:PORT[/tcp]" into *out: ports 1..65535, a
 * numeric IPv4 address or a bracketed IPv6 one ("[::1]"), 127.0.0.1 when
 * none is given. No name lookup. Errors: BRIG_EINVAL ("publish: …"). */
BRIG_PUBLIC int brig_port_parse(brig_port *out, const char *s, brig_error **err);

/* Writes p's canonical spelling, "127.0.0.1:8080:80" or "[::1]:8080:80",
 * into out. Returns out. */
BRIG_PUBLIC char *brig_port_format(char out[BRIG_PORT_STR_SIZE], const brig_port *p);

/* Checks every field: limits positive and in range, memory and cpus within
 * host (may be NULL), pids 16..1048576, and tmpfs charged to memory —
 * workspace-mb + runtime-mb + shm-mb must leave BRIG_MIN_FREE_MB of
 * memory-mb free, and published ports valid, without overlaps, and only
 * with network isolated. Errors: BRIG_EINVAL naming the field(s), the
 * numbers and what is allowed. */
BRIG_PUBLIC int brig_spec_validate(const brig_spec *spec, const brig_host_limits *host, brig_error **err);

/* Writes the spec hash (64 hex digits): SHA-256 over a canonical JSON of
 * every setting that shapes the container, BRIG_SPEC_POLICY included.
 * Env values never enter it as they are (the hash is a label anyone who
 * may ask the daemon reads, and a guessable value could be tried against
 * it): here env counts by its keys alone; brig_spec_hash_salted() adds each
 * value as an HMAC-SHA256 keyed with a random salt.
 * Credential env entries are excluded; the subnet counts only with
 * isolated networking, published ports only when there are some (so
 * computers made before ports existed keep their hash); neither env nor
 * port order counts. Errors: BRIG_EINVAL when
 * isolated networking; egress rules do not count (they change on a running
 * computer); env order does not count. Errors: BRIG_EINVAL when
 * the spec does not validate (host limits not checked; out set to ""). */
BRIG_PUBLIC int brig_spec_hash(char out[BRIG_HASH_SIZE], const brig_spec *spec, brig_error **err);

/* brig_spec_hash() with each env entry as KEY and the hex HMAC-SHA256 of
 * "KEY=VALUE" keyed with salt (BRIG_ENV_SALT_SIZE - 1 lowercase hex digits,
 * the computer's BRIG_LABEL_ENV_SALT), so the hash covers the values
 * without a way to test a guess at one short of that salt — the salt
 * sits beside the hash in the labels: it keeps digests apart between
 * computers and tables out, not a determined guesser with daemon access.
 * salt NULL is brig_spec_hash(). Errors: BRIG_EINVAL (spec, or salt not
 * 32 lowercase hex digits; out set to ""). */
BRIG_PUBLIC int brig_spec_hash_salted(char out[BRIG_HASH_SIZE], const brig_spec *spec, const char *salt,
				      brig_error **err);

/* Include the values of non-credential env entries (for a private store;
 * credentials are never included). Without it, env is a list of keys. */
#define BRIG_SPEC_JSON_ENV_VALUES 1u

/* The effective spec as a JSON object for `--json` output or a store:
 * {"image":…,"user":…,"cpus":2.0,"memory_mb":2048,…,"network":"none",
 *  "subnet":…,"harness":"none","env":[…],"labels":{…},
 *  "publish":["127.0.0.1:8080:80",…]}. Credential entries
 * never appear, not even their keys. Never fails. */
BRIG_PUBLIC json_t *brig_spec_to_json(const brig_spec *spec, unsigned flags);

/* Reads the object brig_spec_to_json() wrote (with env values) into spec:
 * spec is overwritten without being freed (pass a fresh or cleared one),
 * missing fields take defaults, the result is validated (host not
 * checked) and bare env keys are refused, never looked up. json is
 * borrowed. On error spec holds the defaults; either way the caller owns
 * spec and calls brig_spec_clear().
 * Errors: BRIG_EINVAL / BRIG_EPROTO (wrong types). */
BRIG_PUBLIC int brig_spec_from_json(brig_spec *spec, const json_t *json, brig_error **err);

/* Parsers of the enum spellings. Errors: BRIG_EINVAL (the network message
 * says why 'host', 'bridge' and 'container:…' are refused). */
BRIG_PUBLIC int brig_network_parse(brig_network *out, const char *s, brig_error **err);
BRIG_PUBLIC int brig_harness_parse(brig_harness *out, const char *s, brig_error **err);
/* Spellings: "none"/"isolated", "none"/"claude"/"codex",
 * "computer"/"run". Static strings. */
BRIG_PUBLIC const char *brig_network_name(brig_network n);
BRIG_PUBLIC const char *brig_harness_name(brig_harness h);
BRIG_PUBLIC const char *brig_kind_name(brig_kind k);

/* ------------------------------------------------------------------------
 * Env and credentials
 * ---------------------------------------------------------------------- */

/* True for ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN and OPENAI_API_KEY,
 * whatever the harness. key is a bare key or a "KEY=VALUE" entry. */
BRIG_PUBLIC bool brig_env_is_credential(const char *key);

/* The credential keys of harness, NULL-terminated (static; empty for none). */
BRIG_PUBLIC const char *const *brig_env_credential_keys(brig_harness harness);

/* Checks one "KEY=VALUE" entry: key non-empty, without '=', whitespace or
 * control characters (CR, LF, NUL…: a shell could not export it); value without CR, LF or NUL; valid UTF-8; at most 128 KiB.
 * (A spec also caps the total at 1 MiB and 4096 entries.) Errors:
 * BRIG_EINVAL naming the key (escaped) and never the value. */
BRIG_PUBLIC int brig_env_validate(const char *entry, brig_error **err);

/* Builds the Env array for one exec (a new JSON array of "KEY=VALUE"
 * strings): the entries of env (borrowed, n of them, each validated; a
 * later duplicate key replaces an earlier one), then — when none of the
 * harness's credential keys is among them — each of those keys that is set
 * and non-empty in brig's own environment (getenv). Credentials are
 * delivered this way, with each exec, so they never sit in the container's
 * configuration. Errors: BRIG_EINVAL (bad entry, or a forwarded value with
 * CR/LF), naming the key only. */
BRIG_PUBLIC int brig_env_exec(json_t **out, const char *const *env, size_t n, brig_harness harness,
			      brig_error **err);

/* brig_env_exec() over spec->env followed by extra (n_extra entries, may be
 * NULL), for spec->harness — for none when the spec has secrets (their
 * placeholders stand in for the credential). Errors: as brig_env_exec(). */
BRIG_PUBLIC int brig_spec_exec_env(json_t **out, const brig_spec *spec, const char *const *extra, size_t n_extra,
				   brig_error **err);

/* ------------------------------------------------------------------------
 * Docker JSON bodies
 * ---------------------------------------------------------------------- */

/* The tmpfs volumes of a container. */
typedef enum brig_volume {
	BRIG_VOLUME_WORKSPACE = 0, /* /workspace, uid of spec->user, 0700 */
	BRIG_VOLUME_RUNTIME = 1,   /* /runtime (HOME), uid of spec->user, 0700 */
	BRIG_VOLUME_INBOX = 2,     /* /inbox (runs), root-owned 0755: read-only to the user */
	BRIG_VOLUME_OUTBOX = 3,    /* /outbox (runs), uid of spec->user, 0700 */
} brig_volume;

/* "workspace", "runtime", "inbox", "outbox" (static). */
BRIG_PUBLIC const char *brig_volume_name(brig_volume v);
/* Mount point: "/workspace", … (static). */
BRIG_PUBLIC const char *brig_volume_target(brig_volume v);

/* Name of a computer's volume: "<container>-workspace". Caller frees. */
BRIG_PUBLIC char *brig_spec_volume_name(const char *container, brig_volume which);

/* Labels brig puts on a container: brig.managed=1, brig.kind, brig.version,
 * brig.spec=spec_hash, brig.harness, then for a computer (id non-NULL)
 * brig.ns/agent/session/generation, then the spec's extra labels.
 * spec_hash may be NULL to compute it. Errors: BRIG_EINVAL. */
BRIG_PUBLIC int brig_spec_labels(json_t **out, const brig_spec *spec, brig_kind kind, const brig_identity *id,
				 const char *spec_hash, brig_error **err);

/* Body of POST /volumes/create for a computer's volume:
 * {"Name":"<container>-workspace","Driver":"local","DriverOpts":{"type":"tmpfs",
 *  "device":"tmpfs","o":"size=512m,uid=1000,gid=1000,mode=0700,
 *  nr_inodes=65536,nosuid,nodev"},"Labels":{…}}. labels (borrowed, may be
 * NULL; typically the container's) are copied, then brig.managed=1,
 * brig.version (when absent), brig.kind=volume, brig.container and
 * brig.volume are set. Measured on Docker 20.10: when a volume of that name
 * already exists, create answers 201 with the OLD volume and a container
 * mount silently uses its old options — compare its labels (brig.spec) or
 * Options before trusting it; and removing a container with v=1 does not
 * remove named volumes: delete them by name.
 * Errors: BRIG_EINVAL (spec invalid, empty name, which not workspace or
 * runtime). */
BRIG_PUBLIC int brig_spec_volume_json(json_t **out, const brig_spec *spec, const char *container,
				      brig_volume which, const json_t *labels, brig_error **err);

/* Host ids a daemon with userns-remap maps the container's ids to: uid N
 * inside is N + uid on the host (brig_engine_userns_root). Zero when the
 * daemon does not remap. */
typedef struct brig_idshift {
	uint32_t uid;
	uint32_t gid;
} brig_idshift;

/* brig_spec_volume_json() for a daemon with userns-remap: the local driver
 * mounts the tmpfs on the host, so its uid/gid options are shifted by
 * *shift (NULL: none). */
BRIG_PUBLIC int brig_spec_volume_json_shifted(json_t **out, const brig_spec *spec, const char *container,
					      brig_volume which, const json_t *labels, const brig_idshift *shift,
					      brig_error **err);

#define BRIG_CONTAINER_OPTS_VERSION 2

/* What the container body needs besides the spec. Start from
 * BRIG_CONTAINER_OPTS_INIT (a computer); a computer needs id and name and a
 * run its lifetime, so there is no default body and a NULL opts is refused.
 * version: 1..BRIG_CONTAINER_OPTS_VERSION. */
typedef struct brig_container_opts {
	unsigned version;         /* BRIG_CONTAINER_OPTS_VERSION */
	brig_kind kind;
	const brig_identity *id;  /* computers: required; runs: ignored */
	const char *name;         /* the container's name: computers' volumes are "<name>-workspace" */
	const char *spec_hash;    /* NULL: computed */
	int64_t lifetime_s;       /* runs: seconds until the container ends itself (1..31536000) */
	int64_t inbox_mb;         /* runs: size of /inbox; 0: no /inbox */
	int64_t outbox_mb;        /* runs: size of /outbox; 0: no /outbox */
	const char *run_id;       /* runs: brig.run label (may be NULL) */
	int64_t deadline_unix;    /* runs: brig.deadline label (0: none) */
	/* runs: /workspace and /runtime as plain tmpfs mounts (HostConfig.Tmpfs)
	 * instead of anonymous volumes. Cheaper to start and end, but the archive
	 * endpoints cannot reach them: only for runs that copy nothing in or out
	 * (no inbox or outbox). Their mode follows the image's directory. */
	bool plain_tmpfs;
	/* Network none without Docker's network sandbox (Config.NetworkDisabled):
	 * the runtime still gives the container a new network namespace holding
	 * only lo, but dockerd makes no libnetwork sandbox, runs no prestart hook
	 * and writes no /etc/hosts or /etc/resolv.conf (they stay empty files).
	 * Two re-executions of dockerd fewer: ~120 ms less per start, measured.
	 * IPv6 is turned off in the namespace by HostConfig.Sysctls, as Docker's
	 * sandbox does, so lo holds 127.0.0.1 only. Only for images labelled
	 * BRIG_LABEL_ETC_HOSTS=optional; refused unless spec->network is none. */
	bool network_disabled;
	/* brig-init's hash (16 lowercase hex digits). PID 1 is then
	 * /.brig/brig-init init from the read-only volume "brig-init-<hash>"
	 * (HostConfig.Init off), labelled BRIG_LABEL_INIT; a run's is
	 * `init --lifetime <lifetime_s>`. NULL: docker-init and sleep, as
	 * before. */
	const char *init_hash;
	/* The runtime is gVisor (runsc). Computers with init_hash mount
	 * "brig-init-<hash>-r", the copy of brig-init with mode 0555, instead of
	 * the execute-only (0511) one: gVisor reads a program as its user to load
	 * it and refuses one it cannot read; inside it the sandbox's Yama
	 * ptrace_scope of 1 keeps a relay from being traced before it makes
	 * itself non-dumpable. And HostConfig.PidsLimit becomes
	 * BRIG_GVISOR_PIDS(spec->pids): the host cgroup counts gVisor's own
	 * threads (~8 per sandbox process on the ptrace platform, measured), not
	 * the sandbox's processes; at the limit gVisor ends the sandbox.
	 * HostConfig.UsernsMode is "host": on a daemon with userns-remap runsc
	 * fails to start inside the remapped user namespace (runsc 20221219:
	 * "cannot read client sync file"), and the remap would add nothing
	 * there: the sandbox's processes are not host processes of the sandbox
	 * user but run on gVisor's kernel inside runsc's sandbox process (host
	 * uid 0 with one capability, seccomp and no-new-privs, as without the
	 * remap). The volumes' owner is then not shifted (shift must be zero:
	 * callers clear it for gVisor), and the image's files show inside as
	 * owned by the remapped root the image store holds them as. */
	bool gvisor;
	/* version 2: the daemon remaps user namespaces (brig_engine_userns_root):
	 * the tmpfs volumes' uid/gid options (mounted on the host by the local
	 * driver) are shifted by it. Plain tmpfs mounts are made by runc inside
	 * the container's user namespace and are not. */
	brig_idshift shift;
} brig_container_opts;

/* The host PidsLimit of a gVisor container holding `pids` processes. */
#define BRIG_GVISOR_PIDS(pids) ((pids)*10 + 128)

#define BRIG_CONTAINER_OPTS_INIT                                                   \
	{                                                                          \
		.version = BRIG_CONTAINER_OPTS_VERSION, .kind = BRIG_KIND_COMPUTER \
	}

/* Body of POST /containers/create. Hardening that is not a spec field:
 * ReadonlyRootfs, CapDrop ALL, no-new-privileges, not privileged, Init,
 * private IPC, core dumps off, json-file log capped at 1 MB, no Binds, no
 * Tmpfs (unless plain_tmpfs), no ports but the spec's published ones
 * (HostConfig.PortBindings, computers only: a run with ports is refused),
 * Config.NetworkDisabled and IPv6-off
 * Sysctls only with network_disabled. Env is HOME=/runtime alone: a run's
 * entries come with its exec, a computer's brig-init reads them from the
 * env file brig puts on /runtime; only a computer without brig-init
 * (init_hash NULL) has HOME=/runtime plus spec->env without credentials.
 * A computer runs `sleep 2147483647` and mounts its named volumes
 * "<name>-workspace" and "<name>-runtime" (with DriverConfig, so Docker
 * creates them with the right options if they are missing). A run runs
 * `sleep <lifetime_s>` (with init_hash: brig-init init --lifetime), is AutoRemove'd, and mounts anonymous tmpfs volumes
 * at /workspace, /runtime and, when sized, /inbox and /outbox, which
 * Docker removes with it (or, with plain_tmpfs, HostConfig.Tmpfs mounts with
 * the same options plus exec); the run's tmpfs sum including inbox and outbox
 * must leave BRIG_MIN_FREE_MB of memory free. opts is borrowed.
 * Errors: BRIG_EINVAL (spec, identity or opts invalid). */
BRIG_PUBLIC int brig_spec_container_json(json_t **out, const brig_spec *spec, const brig_container_opts *opts,
					 brig_error **err);

/* Body of POST /networks/create for the isolated bridge: "brig-sandbox",
 * driver bridge, CheckDuplicate, enable_icc=false, enable_ip_masquerade=false
 * (brig's firewall masquerades, see brig_network_ensure), interface brig0, IPAM
 * subnet spec->subnet, labels brig.managed=1 and brig.kind=network.
 * Measured on Docker 20.10, which settles a creation race: a second create
 * with the same name answers 409; with another name but the same subnet
 * 403 "Pool overlaps with other one on this address space"; with the same
 * bridge interface 403 "networks have same bridge name". Removal while a
 * container is attached answers 403 "has active endpoints".
 * Errors: BRIG_EINVAL (subnet invalid). */
BRIG_PUBLIC int brig_spec_network_json(json_t **out, const brig_spec *spec, brig_error **err);

/* Reads a container's HostConfig.PortBindings (borrowed, untrusted, may be
 * NULL) back into *out (malloc'd, free() it; NULL when *n is 0): TCP
 * bindings whose ports are 1..65535 and whose HostIp is a numeric address
 * ("" is read as 0.0.0.0); anything else is skipped.
 * Errors: BRIG_EPROTO (not an object, more than BRIG_PORTS_MAX). */
BRIG_PUBLIC int brig_spec_ports_from_bindings(brig_port **out, size_t *n, const json_t *bindings, brig_error **err);
/* Checks a runtime name: 1-63 characters of A-Z a-z 0-9 _ . - starting with
 * a letter or digit (the daemon's own names). Whether the daemon knows it is
 * checked when a container is made (brig_computer_create, brig_run).
 * Errors: BRIG_EINVAL ("runtime: …"). */
BRIG_PUBLIC int brig_runtime_validate(const char *name, brig_error **err);

/* Checks an IPv4 CIDR for the bridge: a.b.c.d/p with p 8..28, no host bits
 * set, inside 10/8, 172.16/12, 192.168/16 or 100.64/10.
 * Errors: BRIG_EINVAL ("subnet: …"). */
BRIG_PUBLIC int brig_subnet_validate(const char *cidr, brig_error **err);

#ifdef __cplusplus
}
#endif
#endif
