# other-dockerd.sh — sourced: a second dockerd with the other userns-remap
# setting than the host's daemon, for tests/security/userns.sh and
# bench/runtime_remap.
#
# It has its own data root, exec root, socket and configuration file (dockerd
# reads /etc/docker/daemon.json otherwise, and that file carries the host
# daemon's remap); no iptables, no default bridge, so it never touches the
# host's firewall or the first daemon's networks. brig-test:local is loaded
# into it offline (docker save | docker load).
#
#   other_dockerd_start   sets OD_SOCK (its socket path), OD_REMAP (1: it
#                         remaps, 0: it does not); calls the caller's
#                         `skip MSG` when no second daemon can start here and
#                         `fail MSG` when it starts wrong
#   other_dockerd_stop    removes its containers, stops it, unmounts and
#                         removes everything it made; safe to call twice
#
# The caller runs as root and arranges other_dockerd_stop on EXIT.

OD_DATA= OD_RUN= OD_SOCK= OD_PID= OD_REMAP=
# the host's daemon: the one the caller (and brig) talks to
OD_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}

other_dockerd_start() {
	command -v dockerd >/dev/null || skip "no dockerd"
	OD_DATA=$(mktemp -d /var/lib/brig-other-dockerd.XXXXXX)
	OD_RUN=$(mktemp -d /run/brig-od.XXXXXX) # short: containerd's socket paths live under it
	OD_SOCK=$OD_RUN/docker.sock
	OD_REMAP=1
	DOCKER_HOST=$OD_HOST docker info --format '{{.SecurityOptions}}' 2>/dev/null |
		grep -q userns && OD_REMAP=0
	if [ "$OD_REMAP" = 1 ]; then
		echo '{"userns-remap": "default"}' >"$OD_RUN/daemon.json"
	else
		echo '{}' >"$OD_RUN/daemon.json"
	fi
	dockerd --config-file "$OD_RUN/daemon.json" --data-root "$OD_DATA" --exec-root "$OD_RUN/exec" \
		--pidfile "$OD_RUN/docker.pid" -H "unix://$OD_SOCK" --iptables=false --ip-masq=false \
		--bridge=none >"$OD_RUN/dockerd.log" 2>&1 &
	OD_PID=$!
	local _
	for _ in $(seq 1 300); do
		DOCKER_HOST=unix://$OD_SOCK docker version >/dev/null 2>&1 && break
		kill -0 "$OD_PID" 2>/dev/null || {
			tail -5 "$OD_RUN/dockerd.log" >&2
			skip "a second dockerd would not start here"
		}
		sleep 0.1
	done
	local has=0
	DOCKER_HOST=unix://$OD_SOCK docker info --format '{{.SecurityOptions}}' | grep -q userns && has=1
	[ "$has" = "$OD_REMAP" ] || fail "the second daemon's remap is $has, wanted $OD_REMAP"
	DOCKER_HOST=$OD_HOST docker save brig-test:local |
		DOCKER_HOST=unix://$OD_SOCK docker load >/dev/null ||
		fail "could not load brig-test:local into the second daemon"
}

other_dockerd_stop() {
	if [ -n "$OD_PID" ] && kill -0 "$OD_PID" 2>/dev/null; then
		local ids _
		ids=$(DOCKER_HOST=unix://$OD_SOCK docker ps -aq 2>/dev/null)
		[ -n "$ids" ] && DOCKER_HOST=unix://$OD_SOCK docker rm -f -v $ids >/dev/null 2>&1
		kill -TERM "$OD_PID"
		for _ in $(seq 1 150); do
			kill -0 "$OD_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$OD_PID" 2>/dev/null
		wait "$OD_PID" 2>/dev/null
	fi
	OD_PID=
	[ -n "$OD_DATA" ] || return 0
	# whatever the daemon left mounted (overlay layers, volumes, netns)
	grep -o " \(${OD_DATA}\|${OD_RUN}\)[^ ]*" /proc/self/mounts | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$OD_DATA" "$OD_RUN" "$OD_RUN".* # dockerd makes "$OD_RUN.UID.GID" for the remapped root
	OD_DATA= OD_RUN=
}
