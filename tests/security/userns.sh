#!/usr/bin/env bash
# userns.sh — brig on the other kind of Docker daemon (issue 20 item 3).
#
# The machines brig sets up run dockerd with userns-remap (scripts/bootstrap),
# so the rest of the suite runs on a remapped daemon. This test starts a
# second dockerd of its own with the other setting — without the remap when
# the host's daemon remaps, with --userns-remap=default when it does not —
# (its own data root, exec root and socket; no iptables, no default bridge,
# so it never touches the host's firewall or the first daemon's networks),
# loads brig-test:local into it offline (docker save | docker load), then
#   - runs the whole containment suite against it (on a remapped daemon the
#     host cases sandbox_uid_on_host and host_uid_1000_environ_ptrace run:
#     the sandbox user is a subordinate uid no account has, and the host
#     account with uid 1000 can neither read a sandboxed process's environment
#     nor trace it; without the remap they are SKIP with the reason);
#   - runs test_two_daemons first (one process holding both daemons);
#   - runs test_env_secret (without the remap: a uid past 65535);
#   - walks the paths that depend on who owns what on the host: a computer's
#     tmpfs volumes, checkpoint, stop, restore, brig cp both ways, and runs
#     with --in/--out (volumes) and without (plain tmpfs).
# Everything it made goes with the daemon: containers, volumes, data root.
# What stays: the `dockremap` account and its /etc/subuid and /etc/subgid
# ranges, which dockerd creates on first use (as it does on any remapped host).
#
# Usage: tests/security/userns.sh BUILD_DIR   (exit 77 when it cannot run here)
set -uo pipefail

build=${1:?usage: userns.sh BUILD_DIR}
brig=$build/brig
harness=$build/tests/security/security_harness

log() { printf 'userns: %s\n' "$*" >&2; }
skip() {
	log "SKIP: $*"
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "needs root (starts a dockerd)"
command -v dockerd >/dev/null || skip "no dockerd"
command -v docker >/dev/null || skip "no docker CLI"
docker image inspect brig-test:local >/dev/null 2>&1 || skip "brig-test:local is missing (scripts/build-test-image)"

fail() {
	log "FAIL: $*"
	exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/lib/other-dockerd.sh"
trap other_dockerd_stop EXIT
trap 'exit 1' INT TERM
other_dockerd_start
remap=$OD_REMAP data=$OD_DATA run=$OD_RUN
first_host=${DOCKER_HOST:-unix:///var/run/docker.sock}
export DOCKER_HOST=unix://$OD_SOCK
log "second daemon: $([ "$remap" = 1 ] && echo "with" || echo "without") userns-remap"

failed=0
# first, while brig has not touched the second daemon: one process holding
# both, the first daemon used first (test_two_daemons.c)
if DOCKER_HOST=$first_host BRIG_OTHER_HOST=unix://$OD_SOCK "$build/tests/security/security_test_two_daemons" \
	>"$run/two_daemons.log" 2>&1; then
	log "ok    one process, two daemons (test_two_daemons)"
else
	log "FAIL  one process, two daemons (test_two_daemons): $(grep -E 'ERROR|FAILED|error' "$run/two_daemons.log" | head -5)"
	failed=1
fi

check() { # check NAME EXPECTED-SUBSTRING COMMAND... : exit 0, and the output holds it
	local name=$1 want=$2 out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -eq 0 ] && [[ $out == *"$want"* ]]; then
		log "ok    $name"
	else
		log "FAIL  $name: wanted exit 0 and '$want', got exit $rc: $(printf '%s' "$out" | tail -3)"
		failed=1
	fi
}

export BRIG_STORE=$data/store.db
id=(--ns userns --agent t --session s1)
spec=(--image brig-test:local --network none)
check "up" "brig-" "$brig" up "${id[@]}" "${spec[@]}"
check "workspace owned by the sandbox user" "1000 1000" "$brig" exec "${id[@]}" -- sh -c \
	'echo hello > /workspace/f && stat -c "%u %g" /workspace/f'
check "checkpoint" "1 " "$brig" checkpoint "${id[@]}"
check "stop" "brig-" "$brig" stop "${id[@]}"
check "up restores the checkpoint" "restored checkpoint 1" "$brig" up "${id[@]}" "${spec[@]}"
check "restored file" "hello" "$brig" exec "${id[@]}" -- cat /workspace/f
echo from-host >"$data/in.txt"
check "cp in" "" "$brig" cp "$data/in.txt" "$($brig up "${id[@]}" "${spec[@]}" 2>/dev/null):/workspace/in.txt"
check "cp in owner" "1000 from-host" "$brig" exec "${id[@]}" -- sh -c 'printf "%s " $(stat -c %u /workspace/in.txt); cat /workspace/in.txt'
check "cp out" "" "$brig" cp "$($brig up "${id[@]}" "${spec[@]}" 2>/dev/null):/workspace/f" "$data/f.out"
check "cp out content" "hello" cat "$data/f.out"
check "run, plain tmpfs" "1000" "$brig" run --image brig-test:local -- sh -c 'touch /workspace/x && stat -c %u /workspace/x'
mkdir -p "$data/in"
echo data >"$data/in/a.txt"
check "run --in/--out" "data" "$brig" run --image brig-test:local --in "$data/in" --out "$data/out" -- sh -c \
	'cat /inbox/in/a.txt; touch /workspace/w; cp /inbox/in/a.txt /outbox/b.txt'
check "run --out content" "data" cat "$data/out/b.txt"
check "destroy" "" "$brig" destroy "${id[@]}"

# environment values on this daemon too; without the remap its big-uid case
# is the base-256 tar owner (a default remap maps only 0-65535)
if BRIG_BIN=$brig BRIG_BINARY_DIR=$build "$build/tests/security/security_test_env_secret" >"$run/env_secret.log" 2>&1; then
	log "ok    environment values (test_env_secret)"
else
	log "FAIL  environment values (test_env_secret): $(grep -E 'ERROR|FAILED' "$run/env_secret.log" | head -5)"
	failed=1
fi

BRIG_BIN=$brig BRIG_BINARY_DIR=$build "$harness" >"$run/harness.log" 2>&1
hrc=$?
grep -E 'uid_on_host|uid_1000|passed,' "$run/harness.log" | grep -v '^security:' >&2
if [ "$hrc" -ne 0 ]; then
	grep -E 'FAIL' "$run/harness.log" >&2
	log "FAIL: the containment suite on the second daemon (exit $hrc)"
	failed=1
fi
if [ "$remap" = 1 ]; then
	grep -q 'host_uid_1000_environ_ptrace.*PASS' "$run/harness.log" || {
		log "FAIL: the host uid 1000 case did not run and pass"
		failed=1
	}
else
	grep -q 'host_uid_1000_environ_ptrace.*SKIP' "$run/harness.log" || {
		log "FAIL: the host uid 1000 case should say why it does not hold without the remap"
		failed=1
	}
fi
exit "$failed"
