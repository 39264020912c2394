#!/usr/bin/python3
"""serve_bench.py — issue 17's exec benchmark: `true` run in one computer
over brig serve's API from a client holding one connection (http.client
over the unix socket), against `brig exec NAME -- true` as a process
through the server (BRIG_HOST=brig+unix://…) and direct (to Docker), and
`docker exec NAME true`, in interleaved rounds; and interactive round trips
over the exec attach stream (a line to `cat` and its echo back, on a kept
stream and on a new stream per round).
Median and p95 in ms, table on stdout, progress on stderr.

Usage: bench/serve_bench.py [-n N] [-w WARMUP] [--brig PATH] [--image IMG] [--flood]
--flood: instead, 50 clients (a connection each) x 20 commands over 10
computers: throughput, p50/p99 and errors.
Needs dockerd, the docker CLI and the image (default brig-test:local). It
starts its own server on a temporary socket and store, creates one computer
(namespace brigbench-…, label brig.bench=1) and removes it on every exit.
"""
import argparse
import http.client
import json
import os
import secrets
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


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("-w", type=int, default=20)
    ap.add_argument("--brig", default=os.path.join(os.path.dirname(__file__), "..", "build", "brig"))
    ap.add_argument("--image", default="brig-test:local")
    ap.add_argument("--flood", action="store_true")
    ap.add_argument("--store-dir", default=None, help="directory of the SQLite store (default: a temporary one)")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    sock = os.path.join(tmp.name, "brig.sock")
    store = "sqlite://" + os.path.join(a.store_dir or tmp.name, "bench-%d.db" % os.getpid())
    env = dict(os.environ, BRIG_IMAGE=a.image, BRIG_STORE=store)
    log = open(os.path.join(tmp.name, "log"), "wb")
    srv = subprocess.Popen([a.brig, "serve", "--listen", "unix://" + sock], stderr=log, env=env)
    ns = "brigbench-" + secrets.token_hex(3)
    conn = UnixConnection(sock)
    name = None

    def call(method, path, body=None):
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read()

    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        if a.flood:
            return flood(a, sock, ns, call)
        st, b = call("POST", "/v1/computers", {"ns": ns, "agent": "a", "session": "s",
                                                "spec": {"labels": {"brig.bench": "1"}}})
        if st not in (200, 201):
            sys.exit("create failed: %s" % b.decode())
        name = json.loads(b)["name"]
        path = "/v1/computers/%s/a/s/exec" % ns
        body = {"argv": ["true"]}
        devnull = subprocess.DEVNULL

        def api():
            st, b = call("POST", path, body)
            assert st == 200 and json.loads(b)["exit_code"] == 0, b

        def cli():
            subprocess.run([a.brig, "exec", name, "--", "true"], check=True, env=env, stdout=devnull)

        served = dict(env, BRIG_HOST="brig+unix://" + sock)
        ident = ["--ns", ns, "--agent", "a", "--session", "s"]

        def cli_served():
            subprocess.run([a.brig, "exec", *ident, "--", "true"], check=True, env=served, stdout=devnull)

        def cli_served_name():
            subprocess.run([a.brig, "exec", name, "--", "true"], check=True, env=served, stdout=devnull)

        def docker():
            subprocess.run(["docker", "exec", name, "true"], check=True, stdout=devnull)

        apath = "/v1/computers/%s/a/s/exec/attach" % ns

        def attach_open():
            """An upgraded stream to cat; returns (socket, bytes already read past the 101)."""
            sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sk.connect(sock)
            data = json.dumps({"argv": ["cat"]}).encode()
            sk.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                        "Content-Length: %d\r\n\r\n" % (apath, len(data))).encode() + data)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += sk.recv(65536)
            head, rest = buf.split(b"\r\n\r\n", 1)
            assert head.startswith(b"HTTP/1.1 101"), head
            return sk, rest

        def frame(t, p=b""):
            return bytes([t, 0, 0, 0]) + len(p).to_bytes(4, "big") + p

        def echo(sk, rest, line):
            """Sends line as stdin; reads frames until it came back as stdout."""
            sk.sendall(frame(0, line))
            buf, out = rest, b""
            while out != line:
                while len(buf) < 8 or len(buf) < 8 + int.from_bytes(buf[4:8], "big"):
                    buf += sk.recv(65536)
                n = int.from_bytes(buf[4:8], "big")
                assert buf[0] == 1, buf[:8]
                out, buf = out + buf[8:8 + n], buf[8 + n:]
            return buf

        kept = {"s": None, "rest": b""}

        def attach_kept():
            if not kept["s"]:
                kept["s"], kept["rest"] = attach_open()
            kept["rest"] = echo(kept["s"], kept["rest"], b"ping\n")

        def attach_new():
            sk, rest = attach_open()
            rest = echo(sk, rest, b"ping\n")
            sk.sendall(frame(4))
            while sk.recv(65536):  # the end frame, then the server closes
                pass
            sk.close()

        cases = [("API exec over one connection", api), ("brig exec --session (BRIG_HOST)", cli_served),
                 ("brig exec NAME (BRIG_HOST)", cli_served_name), ("brig exec (process, direct)", cli),
                 ("docker exec (process)", docker),
                 ("attach: line echoed (kept stream)", attach_kept), ("attach: open, echo, end", attach_new)]
        res = {n: [] for n, _ in cases}
        for i in range(a.w + a.n):
            k = i % len(cases)
            for n, f in cases[k:] + cases[:k]:
                if n in (cases[3][0], cases[4][0]) and i % 4:
                    continue  # the slow processes get a quarter of the rounds
                t0 = time.perf_counter()
                f()
                dt = (time.perf_counter() - t0) * 1000
                if i >= a.w:
                    res[n].append(dt)
            if i % 50 == 0:
                print("round %d/%d" % (i, a.w + a.n), file=sys.stderr)
        if kept["s"]:
            kept["s"].close()
        print("%-34s %6s %9s %9s" % ("exec of true", "n", "p50 ms", "p95 ms"))
        for n, v in res.items():
            print("%-34s %6d %9.2f %9.2f" % (n, len(v), statistics.median(v), pct(v, 95)))
    finally:
        if name:
            try:
                call("DELETE", "/v1/computers/%s/a/s" % ns)
            except Exception:  # noqa: BLE001
                subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True)
        srv.terminate()
        srv.wait(30)


def flood(a, sock, ns, call):
    import threading
    sessions = ["s%d" % i for i in range(10)]
    try:
        for sname in sessions:
            st, b = call("POST", "/v1/computers", {"ns": ns, "agent": "a", "session": sname,
                                                    "spec": {"labels": {"brig.bench": "1"}}})
            if st not in (200, 201):
                sys.exit("create failed: %s" % b.decode())
        lat, errors, lock = [], [], threading.Lock()

        def client(i):
            conn = UnixConnection(sock)
            path = "/v1/computers/%s/a/%s/exec" % (ns, sessions[i % 10])
            for _ in range(20):
                t0 = time.perf_counter()
                try:
                    conn.request("POST", path, body=json.dumps({"argv": ["true"]}),
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    body = r.read()
                    ok = r.status == 200 and json.loads(body)["exit_code"] == 0
                except Exception as e:  # noqa: BLE001
                    ok, body = False, str(e).encode()
                dt = (time.perf_counter() - t0) * 1000
                with lock:
                    lat.append(dt)
                    if not ok:
                        errors.append(body[:200])

        t0 = time.perf_counter()
        ts = [threading.Thread(target=client, args=(i,)) for i in range(50)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        total = time.perf_counter() - t0
        print("50 clients x 20 exec of true over 10 computers: %d commands in %.2f s = %.0f/s; "
              "p50 %.1f ms, p99 %.1f ms; %d errors" % (len(lat), total, len(lat) / total, statistics.median(lat),
                                                      pct(lat, 99), len(errors)))
        for e in errors[:5]:
            print("  error:", e, file=sys.stderr)
    finally:
        for sname in sessions:
            try:
                call("DELETE", "/v1/computers/%s/a/%s" % (ns, sname))
            except Exception:  # noqa: BLE001
                pass


if __name__ == "__main__":
    main()
