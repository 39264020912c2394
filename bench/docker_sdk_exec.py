#!/usr/bin/python3
# docker_sdk_exec.py — exec of `true` in a running container through the
# Docker SDK for Python (Debian's python3-docker): container.exec_run(["true"]),
# what the SDK offers for `docker exec`. Prints one wall time in ms per exec.
#
#   /usr/bin/python3 bench/docker_sdk_exec.py -c NAME [-n N]   N execs in a loop
#   /usr/bin/python3 bench/docker_sdk_exec.py -c NAME --serve  one exec per stdin line
#
# --serve is how bench_guest interleaves the SDK with its other columns: one
# warm interpreter and client, the container looked up once; it prints
# "ready", then answers each line it reads with that exec's ms. Use Debian's
# /usr/bin/python3 (python3-docker is installed for it).
import argparse
import sys
import time

import docker


def exec_once(container):
    t0 = time.perf_counter()
    r = container.exec_run(["true"])
    t = (time.perf_counter() - t0) * 1000.0
    if r.exit_code != 0:
        raise SystemExit("exec_run of true exited %r" % (r.exit_code,))
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-c", "--container", required=True)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    client = docker.from_env()
    container = client.containers.get(a.container)
    if a.serve:
        print("ready", flush=True)
        for _ in sys.stdin:
            print("%.3f" % exec_once(container), flush=True)
        return
    for _ in range(a.n):
        print("%.3f" % exec_once(container), flush=True)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):  # bench_guest stopped (Ctrl-C)
        sys.exit(130)
