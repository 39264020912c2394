#!/usr/bin/python3
# bench_cp.py — issue 14's `brig cp` against `docker cp`, side by side in one
# run, on one computer: a 4 KiB file, a 50 MB and a 100 MB file, and a
# directory of 5 000 small files, into the computer and out of it; median and
# p95 of each, both as processes (the CLI each time).
#
#   cmake --build build --target brig_cli
#   /usr/bin/python3 bench/bench_cp.py            # -n 30 small rounds, -N 8 big rounds,
#                                                 # -D 5 rounds of 5 000 files, -i image
#
# Each round runs the ways in a random order, so that load on a shared machine
# falls on all alike. It creates one computer in its own namespace and destroys
# it on every exit it can see (errors and Ctrl-C included); the brig CLI audits
# into a SQLite store in a temporary directory (unless BRIG_STORE is set).
import argparse
import hashlib
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BRIG = os.environ.get("BRIG_BIN", os.path.join(HERE, "..", "build", "brig"))


def run(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if r.returncode != 0:
        sys.exit("bench_cp: %s failed (%d): %s" % (" ".join(argv), r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout.decode().strip()


def timed(argv):
    t0 = time.monotonic()
    run(argv)
    return (time.monotonic() - t0) * 1000.0


def pct(xs, p):
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def clear(d):
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def digest(path):
    """A file's bytes, or a tree's names and bytes, hashed."""
    h = hashlib.sha256()
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(root, f)
                h.update(os.path.relpath(p, path).encode() + b"\0")
                with open(p, "rb") as fh:
                    h.update(fh.read())
    else:
        with open(path, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30, help="rounds with the small file")
    ap.add_argument("-N", type=int, default=8, help="rounds with the 50 MB and the 100 MB file")
    ap.add_argument("-D", type=int, default=5, help="rounds with the directory of 5 000 files")
    ap.add_argument("-i", default="brig-test:local", help="image")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="bench_cp.")
    if "BRIG_STORE" not in os.environ:
        os.environ["BRIG_STORE"] = os.path.join(tmp, "store.db")
    ns = "bench" + secrets.token_hex(4)
    name = None

    def cleanup(*_):
        if name:
            subprocess.run([BRIG, "destroy", "-f", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
        if _:
            sys.exit(130)

    signal.signal(signal.SIGINT, cleanup)
    signal.signal(signal.SIGTERM, cleanup)
    try:
        name = run([BRIG, "create", "--ns", ns, "--agent", "bench", "--session", "cp", "--image", a.i,
                    "--workspace-mb", "1024"]).splitlines()[-1]
        small = os.path.join(tmp, "small")
        big = os.path.join(tmp, "big")
        with open(small, "wb") as f:
            f.write(os.urandom(4096))
        with open(big, "wb") as f:
            for _ in range(100):
                f.write(os.urandom(1000 * 1000))
        mid = os.path.join(tmp, "mid")
        with open(mid, "wb") as f:
            for _ in range(50):
                f.write(os.urandom(1000 * 1000))
        tree = os.path.join(tmp, "tree")
        for d in range(50):
            os.makedirs(os.path.join(tree, "d%02d" % d))
            for i in range(100):
                with open(os.path.join(tree, "d%02d" % d, "f%03d" % i), "wb") as f:
                    f.write(os.urandom(random.randint(200, 4000)))
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        ways = {
            "brig cp in": lambda src, dst: [BRIG, "cp", src, "%s:/workspace/%s.b" % (name, dst)],
            "docker cp in": lambda src, dst: ["docker", "cp", src, "%s:/workspace/%s.d" % (name, dst)],
            "brig cp out": lambda src, dst: [BRIG, "cp", "%s:/workspace/%s.b" % (name, dst),
                                             os.path.join(out, dst + ".b")],
            "docker cp out": lambda src, dst: ["docker", "cp", "%s:/workspace/%s.d" % (name, dst),
                                               os.path.join(out, dst + ".d")],
        }
        print("brig cp against docker cp on %s (%s), ms" % (name, a.i))
        print("%-28s %9s %9s %5s" % ("", "median", "p95", "n"))
        for label, src, rounds in (("4 KiB file", small, a.n), ("50 MB file", mid, a.N), ("100 MB file", big, a.N),
                                   ("5 000 files", tree, a.D)):
            dst = os.path.basename(src)
            for w in ways.values():  # warm-up; also makes the files the out-copies read
                run(w(src, dst))
            t = {k: [] for k in ways}
            # a directory copied onto itself would nest (and neither the
            # sandbox's user nor the container's capless root may remove the
            # other's): each round of one gets its own name
            for r in range(rounds):
                # in before out in each round (out reads what in wrote), the
                # order of brig and docker random
                for pair in (("brig cp in", "docker cp in"), ("brig cp out", "docker cp out")):
                    for k in random.sample(pair, 2):
                        if k.endswith("out"):
                            clear(out)
                        t[k].append(timed(ways[k](src, "%s%d" % (dst, r) if os.path.isdir(src) else dst)))
            clear(out)
            run(ways["brig cp out"](src, dst))
            if digest(src) != digest(os.path.join(out, dst + ".b")):
                sys.exit("bench_cp: brig cp out gave other bytes")
            for k in ways:
                print("%-28s %9.1f %9.1f %5d" % ("%s, %s" % (k, label), pct(t[k], 50), pct(t[k], 95), len(t[k])))
    finally:
        cleanup()


if __name__ == "__main__":
    main()
