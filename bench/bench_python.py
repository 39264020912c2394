#!/usr/bin/python3
# bench_python.py — issue 18's speed: the Python package (python/brig) against
# the Docker SDK for Python (Debian's python3-docker), in one interpreter.
#
#   /usr/bin/python3 bench/bench_python.py            # -n 500 execs, -c 10 cold starts, -i image
#
# 1. exec of `true` on one computer: brig's Sandbox.exec (over the relay the
#    Sandbox holds) and the SDK's container.exec_run(["true"]) on the SAME
#    container, alternating in chunks of 25 so load on the shared machine
#    falls on both alike; median and p95 of each.
# 2. cold to first exec: brig.Sandbox(...) + sb.exec("true") against
#    docker.from_env().containers.run(image, "sleep infinity", detach=True,
#    network_mode="none", mem_limit, nano_cpus, pids_limit) + exec_run(["true"]),
#    alternating; the client is created inside the timed part for the SDK, as
#    the seed's code does, and brig's engine is already open (the exec
#    benchmark opened it). Everything made carries brig.bench=1 and a unique
#    brig.test label and is removed on every exit, Ctrl-C included.
# Uses the build tree's libbrig (build/libbrig.so) unless BRIG_LIBRARY is set.
import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import brig  # noqa: E402
import docker  # noqa: E402

RUN = "bench-" + secrets.token_hex(4)
LABELS = {"brig.bench": "1", "brig.test": RUN}
CHUNK = 25  # execs of one way in a row before the other's


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def cleanup(client):
    for c in client.containers.list(all=True, filters={"label": f"brig.test={RUN}"}):
        c.remove(force=True, v=True)
    for v in client.volumes.list(filters={"label": f"brig.test={RUN}"}):
        v.remove(force=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("-c", "--cold", type=int, default=10)
    ap.add_argument("-i", "--image", default=os.environ.get("BRIG_TEST_IMAGE") or "brig-test:local")
    a = ap.parse_args()
    client = docker.from_env()
    tmp = tempfile.mkdtemp(prefix="brig-bench-")
    store = f"sqlite://{tmp}/brig.db"
    try:
        spec = dict(cpus=2.0, memory_mb=2048, pids_limit=256, workspace_mb=512, runtime_mb=256, network="none")
        sb = brig.Sandbox(a.image, store=store, labels=LABELS, ns="bench", **spec)
        ctr = client.containers.get(sb.name)
        for _ in range(20):  # warm-up both
            sb.exec("true")
            ctr.exec_run(["true"])
        b, d = [], []
        while len(b) < a.n:
            for _ in range(CHUNK):
                b.append(timed(lambda: sb.exec(["true"])))
            for _ in range(CHUNK):
                d.append(timed(lambda: ctr.exec_run(["true"])))
            print(f"\rexec {len(b)}/{a.n}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        sb.close()
        cb, cd = [], []
        for i in range(a.cold):
            t0 = time.perf_counter()
            s = brig.Sandbox(a.image, store=store, labels=LABELS, ns="bench", **spec)
            s.exec(["true"])
            cb.append((time.perf_counter() - t0) * 1000.0)
            s.close()  # anonymous: destroyed, outside the timing

            t0 = time.perf_counter()
            cl = docker.from_env()
            c = cl.containers.run(a.image, ["sleep", "infinity"], detach=True, network_mode="none",
                                  mem_limit="2048m", nano_cpus=2_000_000_000, pids_limit=256, user="1000:1000",
                                  labels=LABELS)
            c.exec_run(["true"])
            cd.append((time.perf_counter() - t0) * 1000.0)
            c.remove(force=True, v=True)
            print(f"\rcold {i + 1}/{a.cold}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        print("| way (ms) | median | p95 | n |")
        print("|---|---|---|---|")
        for name, xs in (("brig Sandbox.exec(['true'])", b), ("Docker SDK exec_run(['true'])", d),
                         ("brig Sandbox(...) + first exec", cb),
                         ("SDK from_env + containers.run + exec_run", cd)):
            m, p = stats(xs)
            print(f"| {name} | {m:.2f} | {p:.2f} | {len(xs)} |")
    finally:
        cleanup(client)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
