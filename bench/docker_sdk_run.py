#!/usr/bin/python3
# docker_sdk_run.py — the seed's disposable run through the Docker SDK for
# Python (Debian's python3-docker): `sh -c true` with --rm, no network, 512 MB,
# one CPU, read-only root. Prints one wall time in ms per run, on stdout.
#
#   /usr/bin/python3 bench/docker_sdk_run.py [-n N] [-i IMAGE]   N runs in a loop
#   /usr/bin/python3 bench/docker_sdk_run.py --serve [-i IMAGE]  one run per stdin line
#   --network-disabled: also Config.NetworkDisabled (no Docker network sandbox), what brig
#   asks of dockerd for an image labelled brig.etc-hosts=optional: not the seed's recipe
#
# --serve is how bench_run interleaves the SDK with its other columns: it
# prints "ready" once the client is connected, then answers each line it
# reads with that run's ms. Use Debian's /usr/bin/python3 (python3-docker is
# installed for it), not a pyenv one.
import argparse
import sys
import time

import docker


def run_once(client, image, network_disabled=False):
    t0 = time.perf_counter()
    client.containers.run(image, "sh -c true", remove=True, network_mode="none", mem_limit="512m",
                          nano_cpus=10**9, read_only=True, network_disabled=network_disabled)
    return (time.perf_counter() - t0) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("-i", "--image", default="brig-test:local")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--network-disabled", action="store_true",
                    help="also Config.NetworkDisabled: no Docker network sandbox, as brig asks for images "
                         "labelled brig.etc-hosts=optional")
    a = ap.parse_args()
    client = docker.from_env()
    client.ping()
    if a.serve:
        print("ready", flush=True)
        for _ in sys.stdin:
            print("%.3f" % run_once(client, a.image, a.network_disabled), flush=True)
        return
    for _ in range(a.n):
        print("%.3f" % run_once(client, a.image, a.network_disabled), flush=True)


if __name__ == "__main__":
    main()
