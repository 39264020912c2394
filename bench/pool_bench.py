#!/usr/bin/python3
"""pool_bench.py — issue 17's warm-pool benchmark: a new session's computer
to its first command's exit, in interleaved rounds of
  claim  POST /v1/computers + POST …/exec `true` to a server with
         --pool IMAGE=P (the round waits until the pool is full again, so
         every claim finds a member and no refill runs during the others);
  cold   the same two calls to a server without a pool (a create);
  docker `docker run -d` + `docker exec … true` (the docker CLI).
Each client holds one connection; removal is not timed (DELETE, docker rm).
Median and p95 in ms, table on stdout, progress on stderr.

Usage: bench/pool_bench.py [-n N] [-p P] [--brig PATH] [--image IMG]
Needs dockerd, the docker CLI and the image (default brig-test:local). It
starts its own two servers (temporary sockets, store and BRIG_RUN_DIR),
uses namespace brigpool-…, and removes every computer, pool member and
container it made on every exit.
"""
import argparse
import http.client
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    b = r.read()
    if r.status >= 300:
        raise RuntimeError("%s %s: %d %s" % (method, path, r.status, b[:300]))
    return json.loads(b) if b else None


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def start(brig, tmp, name, env, extra):
    sock = os.path.join(tmp, name + ".sock")
    log = open(os.path.join(tmp, name + ".log"), "wb")
    p = subprocess.Popen([brig, "serve", "--listen", "unix://" + sock] + extra, stderr=log, env=env)
    for _ in range(400):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return p, sock
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    raise RuntimeError("brig serve did not start: " + open(log.name).read())


def pool_size(conn):
    conn.request("GET", "/metrics")
    b = conn.getresponse().read().decode()
    m = re.search(r'^brig_pool_size\{[^}]*\} (\d+)$', b, re.M)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("-p", type=int, default=2, help="pool size")
    ap.add_argument("--brig", default=os.path.join(os.path.dirname(__file__), "..", "build", "brig"))
    ap.add_argument("--image", default="brig-test:local")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    env = dict(os.environ, BRIG_IMAGE=a.image, BRIG_STORE="sqlite://" + os.path.join(tmp.name, "db"),
               BRIG_RUN_DIR=os.path.join(tmp.name, "run"))
    env.pop("BRIG_HOST", None)
    ns = "brigpool-" + secrets.token_hex(3)
    procs, made, containers = [], [], []
    sid = None
    try:
        psrv, psock = start(a.brig, tmp.name, "pool", env, ["--pool", "%s=%d" % (a.image, a.p)])
        procs.append(psrv)
        for _ in range(600):
            m = re.search(r"pools of server ([0-9a-f]+)", open(os.path.join(tmp.name, "pool.log")).read())
            if m:
                sid = m.group(1)
                break
            time.sleep(0.05)
        csrv, csock = start(a.brig, tmp.name, "cold", env, [])
        procs.append(csrv)
        pc, cc = UnixConnection(psock), UnixConnection(csock)
        res = {"claim": [], "claim_call": [], "cold": [], "docker": []}

        def wait_full():
            end = time.time() + 300
            while pool_size(pc) < a.p:
                if time.time() > end:
                    raise RuntimeError("the pool did not fill")
                time.sleep(0.1)

        def brig_round(conn, session):
            t = time.perf_counter()
            c = call(conn, "POST", "/v1/computers", {"ns": ns, "agent": "bench", "session": session})
            created = (time.perf_counter() - t) * 1000
            made.append((conn, session))
            r = call(conn, "POST", "/v1/computers/%s/bench/%s/exec" % (ns, session), {"argv": ["true"]})
            dt = (time.perf_counter() - t) * 1000
            if r["exit_code"] != 0:
                raise RuntimeError("true exited %s" % r["exit_code"])
            return dt, c, created

        for i in range(a.n):
            wait_full()
            dt, c, created = brig_round(pc, "p%d" % i)
            res["claim_call"].append(created)
            if not c["name"] or call(pc, "GET", "/v1/computers/%s/bench/p%d" % (ns, i))["id"] != c["id"]:
                raise RuntimeError("claim answered another computer")
            res["claim"].append(dt)
            wait_full()  # no refill runs during the other two
            dt, _, _ = brig_round(cc, "c%d" % i)
            res["cold"].append(dt)
            t = time.perf_counter()
            cid = subprocess.run(["docker", "run", "-d", "--network", "none", "--label", "brig.bench.pool=" + ns,
                                  a.image, "sleep", "3600"], check=True, capture_output=True, text=True).stdout.strip()
            containers.append(cid)
            subprocess.run(["docker", "exec", cid, "true"], check=True)
            res["docker"].append((time.perf_counter() - t) * 1000)
            for conn, s in made:
                call(conn, "DELETE", "/v1/computers/%s/bench/%s" % (ns, s))
            made.clear()
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
            containers.remove(cid)
            print("round %d/%d: claim %.1f cold %.1f docker %.1f ms" % (i + 1, a.n, res["claim"][-1], res["cold"][-1],
                                                                      res["docker"][-1]), file=sys.stderr)
        load = open("/proc/loadavg").read().split()[0]
        print("new computer to first command's exit, n=%d, pool of %d, load %s, %d CPUs" % (a.n, a.p, load,
                                                                                           os.cpu_count()))
        print("%-44s %9s %9s" % ("path", "p50 ms", "p95 ms"))
        for k, label in (("claim", "claim from a warm pool (brig serve API)"),
                         ("claim_call", "  of which the create call (the claim)"),
                         ("cold", "cold create (same route, no pool)"),
                         ("docker", "docker run -d + docker exec (CLI)")):
            print("%-44s %9.1f %9.1f" % (label, statistics.median(res[k]), pct(res[k], 95)))
    finally:
        for conn, s in made:
            try:
                call(conn, "DELETE", "/v1/computers/%s/bench/%s" % (ns, s))
            except Exception:  # noqa: BLE001
                pass
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=brig.bench.pool=" + ns], capture_output=True,
                             text=True).stdout.split()
        if sid:
            ids += subprocess.run(["docker", "ps", "-aq", "--filter", "label=brig.pool=" + sid], capture_output=True,
                                  text=True).stdout.split()
        ids += subprocess.run(["docker", "ps", "-aq", "--filter", "label=brig.ns=" + ns], capture_output=True,
                              text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", "-v"] + ids, capture_output=True)
        vols = subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True).stdout.split()
        vols = [v for v in vols if sid and v.startswith("brig-pool-" + sid + "-")]
        vols += subprocess.run(["docker", "volume", "ls", "-q", "--filter", "label=brig.ns=" + ns],
                               capture_output=True, text=True).stdout.split()
        if vols:
            subprocess.run(["docker", "volume", "rm", "-f"] + vols, capture_output=True)
        tmp.cleanup()


if __name__ == "__main__":
    main()
