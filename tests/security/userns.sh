#!/usr/bin/env bash
# userns.sh — brig on a Docker daemon with userns-remap (issue 20 item 3).
#
# Starts a second dockerd of its own with --userns-remap=default (its own
# data root, exec root and socket; no iptables, no default bridge, so it never
# touches the host's firewall or the first daemon's networks), loads
# brig-test:local into it offline (docker save | docker load), then
#   - runs the whole containment suite against it (with the remap the host
#     cases sandbox_uid_on_host and host_uid_1000_environ_ptrace run instead
#     of being skipped: the sandbox user is a subordinate uid no account has,
#     and the host account with uid 1000 can neither read a sandboxed
#     process's environment nor trace it);
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

data=$(mktemp -d /var/lib/brig-userns-test.XXXXXX)
run=$(mktemp -d /run/brig-un.XXXXXX) # short: containerd's socket paths live under it
sock=$run/docker.sock
dpid=

cleanup() {
	local rc=$?
	if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
		ids=$(DOCKER_HOST=unix://$sock docker ps -aq 2>/dev/null)
		[ -n "$ids" ] && DOCKER_HOST=unix://$sock docker rm -f -v $ids >/dev/null 2>&1
		kill -TERM "$dpid"
		for _ in $(seq 1 150); do
			kill -0 "$dpid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$dpid" 2>/dev/null
		wait "$dpid" 2>/dev/null
	fi
	# whatever the daemon left mounted (overlay layers, volumes, netns)
	grep -o " \(${data}\|${run}\)[^ ]*" /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$data" "$run" "$run".*  # dockerd makes "$run.UID.GID" for the remapped root
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

dockerd --userns-remap=default --data-root "$data" --exec-root "$run/exec" --pidfile "$run/docker.pid" \
	-H "unix://$sock" --iptables=false --ip-masq=false --bridge=none >"$run/dockerd.log" 2>&1 &
dpid=$!
export DOCKER_HOST=unix://$sock
for _ in $(seq 1 300); do
	docker version >/dev/null 2>&1 && break
	kill -0 "$dpid" 2>/dev/null || {
		tail -5 "$run/dockerd.log" >&2
		skip "a second dockerd would not start here"
	}
	sleep 0.1
done
docker info --format '{{.SecurityOptions}}' | grep -q userns || {
	log "FAIL: the second daemon does not remap"
	exit 1
}
DOCKER_HOST=unix:///var/run/docker.sock docker save brig-test:local | docker load >/dev/null || {
	log "FAIL: could not load brig-test:local into the remapped daemon"
	exit 1
}

failed=0
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

BRIG_BIN=$brig BRIG_BINARY_DIR=$build "$harness" >"$run/harness.log" 2>&1
hrc=$?
grep -E 'uid_on_host|uid_1000|passed,' "$run/harness.log" | grep -v '^security:' >&2
if [ "$hrc" -ne 0 ]; then
	grep -E 'FAIL' "$run/harness.log" >&2
	log "FAIL: the containment suite on the remapped daemon (exit $hrc)"
	failed=1
fi
grep -q 'host_uid_1000_environ_ptrace.*PASS' "$run/harness.log" || {
	log "FAIL: the host uid 1000 case did not run and pass"
	failed=1
}
exit "$failed"
