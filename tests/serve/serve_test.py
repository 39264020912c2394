#!/usr/bin/python3
"""brig serve through real HTTP clients: Python's http.client over the unix
socket and curl. Starts its own servers (temporary socket, SQLite store and
tokens file), creates only computers labelled brig.test=<prefix> in
namespaces of its own, and removes them even when a check fails.

Usage: serve_test.py [routes]   (routes: only the route table vs the
OpenAPI document, no Docker needed)
Environment: BRIG_BIN (the brig binary), BRIG_TEST_IMAGE (default
brig-test:local).
"""
import base64
import hashlib
import http.client
import http.server
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "openapi.json")
BRIG = os.environ.get("BRIG_BIN", "brig")
IMAGE = os.environ.get("BRIG_TEST_IMAGE", "brig-test:local")
PREFIX = "svt" + secrets.token_hex(4)
NS_A, NS_B = PREFIX + "a", PREFIX + "b"
TOK_A, TOK_B, TOK_ALL = (secrets.token_hex(20) for _ in range(3))
LABEL = "brig.test=" + PREFIX


def doc_routes():
    doc = json.load(open(DOC))
    out = set()
    for path, item in doc["paths"].items():
        for m in item:
            if m in ("get", "put", "post", "delete", "patch"):
                out.add((m.upper(), path))
    return out


def server_routes():
    text = subprocess.run([BRIG, "serve", "--routes"], check=True, capture_output=True, text=True).stdout
    return {tuple(line.split(" ", 1)) for line in text.splitlines() if line}


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class PyClient:
    """http.client, one kept connection."""

    name = "python"

    def __init__(self, sock):
        self.sock = sock
        self.conn = UnixConnection(sock)

    def call(self, method, path, body=None, token=None, raw=None, headers=None):
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None and raw is None:
            h["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=data, headers=h)
                r = self.conn.getresponse()
                return r.status, dict(r.getheaders()), r.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = UnixConnection(self.sock)
                if attempt:
                    raise


class CurlClient:
    """curl --unix-socket, a process per call."""

    name = "curl"

    def __init__(self, sock):
        self.sock = sock

    def call(self, method, path, body=None, token=None, raw=None, headers=None):
        with tempfile.TemporaryDirectory() as d:
            out, hdr, auth = (os.path.join(d, n) for n in ("out", "hdr", "auth"))
            cmd = ["curl", "-sS", "--unix-socket", self.sock, "-X", method, "-o", out, "-D", hdr,
                   "-w", "%{http_code}", "http://localhost" + path]
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            if data is not None:
                cmd += ["--data-binary", "@-", "-H", "Content-Type: application/json"]
            for k, v in (headers or {}).items():
                cmd += ["-H", "%s: %s" % (k, v)]
            if token:
                # The token travels in a header file, not in argv.
                with open(auth, "w") as f:
                    f.write("Authorization: Bearer %s\n" % token)
                cmd += ["-H", "@" + auth]
            p = subprocess.run(cmd, input=data, capture_output=True, timeout=180)
            if p.returncode != 0:
                raise RuntimeError("curl failed: " + p.stderr.decode())
            hs = {}
            for line in open(hdr, "rb").read().decode().splitlines()[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    hs[k.strip()] = v.strip()
            return int(p.stdout), hs, open(out, "rb").read()


class Server:
    def __init__(self, tmp, extra=(), tokens=True, wrap=()):
        self.tmp = tmp
        self.sock = os.path.join(tmp, "brig.sock")
        self.log = open(os.path.join(tmp, "serve.log"), "ab")
        args = [BRIG, "serve", "--listen", "unix://" + self.sock, "--store", "sqlite://" + os.path.join(tmp, "db")]
        if tokens:
            tf = os.path.join(tmp, "tokens")
            with open(tf, "w") as f:
                f.write("# test tokens\n%s %s\n%s %s\n%s *\n" % (TOK_A, NS_A, TOK_B, NS_B, TOK_ALL))
            os.chmod(tf, 0o600)
            if wrap:  # run as another user (wrap: e.g. setpriv --reuid …): the tokens are its
                os.chown(tf, int(wrap[wrap.index("--reuid") + 1]), -1)
            args += ["--tokens", tf]
        env = dict(os.environ, BRIG_IMAGE=IMAGE, BRIG_CHECKPOINT_DIR=os.path.join(tmp, "cp"))
        self.p = subprocess.Popen(list(wrap) + args + list(extra), stdout=self.log, stderr=self.log, env=env)
        for _ in range(200):
            if os.path.exists(self.sock):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(self.sock)
                    s.close()
                    return
                except OSError:
                    pass
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("brig serve did not start: " + self.logtext())

    def logtext(self):
        if not self.log.closed:
            self.log.flush()
        return open(self.log.name, "rb").read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        return self.p.returncode


def docker_cleanup():
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=" + LABEL], capture_output=True,
                         text=True).stdout.split()
    for cid in ids:
        subprocess.run(["docker", "rm", "-f", "-v", cid], capture_output=True)
    # Volumes of those computers carry the identity's container name.
    vols = subprocess.run(["docker", "volume", "ls", "-q", "--filter", "label=" + LABEL], capture_output=True,
                          text=True).stdout.split()
    for v in vols:
        subprocess.run(["docker", "volume", "rm", "-f", v], capture_output=True)


class RouteTable(unittest.TestCase):
    def test_table_matches_document(self):
        doc, srv = doc_routes(), server_routes()
        self.assertEqual(sorted(srv - doc), [], "routes the server answers that docs/openapi.json lacks")
        self.assertEqual(sorted(doc - srv), [], "routes docs/openapi.json names that the server lacks")


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory()
        cls.srv = Server(cls.tmpdir.name, extra=["--body-max", "65536", "--upload-max", "8388608",
                                                 "--header-timeout", "2"])
        cls.py = PyClient(cls.srv.sock)

    @classmethod
    def tearDownClass(cls):
        try:
            for ns, tok in ((NS_A, TOK_A), (NS_B, TOK_B)):
                st, _, b = cls.py.call("GET", "/v1/computers?label=" + urllib.parse.quote(LABEL), token=tok)
                for c in json.loads(b).get("computers", []) if st == 200 else []:
                    cls.py.call("DELETE", "/v1/computers/%s/%s/%s" % (c["ns"], c["agent"], c["session"]), token=tok)
        finally:
            rc = cls.srv.stop()
            docker_cleanup()
            cls.tmpdir.cleanup()
        assert rc == 0, "brig serve exited %s:\n%s" % (rc, cls.srv.logtext()[-4000:])

    def cpath(self, ns, session, tail=""):
        return "/v1/computers/%s/agent/%s%s" % (ns, session, tail)

    def create(self, client, ns, tok, session):
        st, _, b = client.call("POST", "/v1/computers", {"ns": ns, "agent": "agent", "session": session,
                                                          "spec": {"labels": {"brig.test": PREFIX}}}, token=tok)
        self.assertIn(st, (200, 201), b)
        return json.loads(b)

    def assertError(self, resp, status, code=None):
        st, h, b = resp
        self.assertEqual(st, status, b)
        j = json.loads(b)
        self.assertIsInstance(j.get("message"), str)
        if code:
            self.assertEqual(j["code"], code, b)
        for t in (TOK_A, TOK_B, TOK_ALL):
            self.assertNotIn(t, b.decode(errors="replace"))

    def watch_events(self, c, tok, ns, action, until="pause", since_ms=None):
        """Events of GET /v1/events?ns= while action() runs, through c's kind
        of client; since_ms: asked from then (no wait for the subscription)."""
        q = (["ns=" + ns] if ns else []) + (["since_ms=%d" % since_ms] if since_ms is not None else [])
        path = "/v1/events" + ("?" + "&".join(q) if q else "")
        settle = 1.0 if since_ms is None else 0
        if c.name == "curl":
            with tempfile.TemporaryDirectory() as d:
                auth = os.path.join(d, "auth")
                with open(auth, "w") as f:
                    f.write("Authorization: Bearer %s\n" % tok)
                p = subprocess.Popen(["curl", "-sN", "--max-time", "6", "--unix-socket", self.srv.sock,
                                      "-H", "@" + auth, "http://localhost" + path], stdout=subprocess.PIPE)
                time.sleep(settle)
                action()
                out = p.communicate(timeout=30)[0]
            return [json.loads(x) for x in out.decode().splitlines() if x]
        conn = UnixConnection(self.srv.sock, timeout=10)
        conn.request("GET", path, headers={"Authorization": "Bearer " + tok})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        time.sleep(settle)
        action()
        events = []
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            try:
                line = r.readline()
            except socket.timeout:
                break
            if not line:
                break
            events.append(json.loads(line))
            if events[-1]["action"] == until:
                break
        conn.close()
        return events

    def walk(self, c, session):
        """Every route of the table once, through client c."""
        tok, ns = TOK_A, NS_A
        seen = set()

        def call(method, tmpl, path, **kw):
            seen.add((method, tmpl))
            return c.call(method, path, token=tok, **kw)

        C = "/v1/computers/{ns}/{agent}/{session}"
        p = lambda tail="": self.cpath(ns, session, tail)
        st, _, b = call("GET", "/v1/health", "/v1/health")
        self.assertEqual((st, json.loads(b)["status"]), (200, "ok"))
        st, _, b = call("GET", "/v1/openapi.json", "/v1/openapi.json")
        self.assertEqual(json.loads(b), json.load(open(DOC)), "the served document is not docs/openapi.json")
        st, _, b = c.call("GET", "/metrics", token=TOK_ALL)
        seen.add(("GET", "/metrics"))
        self.assertEqual(st, 200)
        self.assertIn(b"brig_serve_exec_seconds_bucket", b)
        self.assertIn(b'brig_computers{state="running"}', b)
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w") as tf:
            ti = tarfile.TarInfo("in.txt")
            ti.size = 3
            tf.addfile(ti, io.BytesIO(b"abc"))
        st, _, b = call("POST", "/v1/runs", "/v1/runs", body={"ns": ns,
            "argv": ["sh", "-c", "cat /inbox/in.txt; cp /inbox/in.txt /outbox/out.txt"], "outputs": True,
            "inputs_tar": base64.b64encode(tb.getvalue()).decode(), "spec": {"labels": {"brig.test": PREFIX}}})
        self.assertEqual(st, 200, b)
        r = json.loads(b)
        self.assertEqual((r["exit_code"], r["stdout"]["text"], r["outputs"]), (0, "abc", ["out.txt"]))
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r["outputs_tar"]))) as tf:
            self.assertEqual(tf.extractfile("out.txt").read(), b"abc")
        self.assertError(c.call("POST", "/v1/runs", {"ns": ns, "argv": ["true"], "inputs_tar": "!!"}, token=tok), 400, "invalid")
        # the streamed run upgrades (CliClient.test_run_* and Api.test_run_attach speak it)
        self.assertError(call("POST", "/v1/runs/attach", "/v1/runs/attach", body={"ns": ns, "argv": ["true"]}),
                         426, "upgrade_required")
        seen.add(("POST", "/v1/computers"))
        comp = self.create(c, ns, tok, session)
        self.assertEqual(comp["state"], "running")
        st, _, b = call("GET", "/v1/computers", "/v1/computers?label=" + urllib.parse.quote(LABEL))
        self.assertIn(comp["name"], [x["name"] for x in json.loads(b)["computers"]])
        st, _, b = call("GET", C, p())
        self.assertEqual((st, json.loads(b)["name"]), (200, comp["name"]))
        st, _, b = call("POST", C + "/exec", p("/exec"), body={"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]})
        r = json.loads(b)
        self.assertEqual((st, r["exit_code"], r["stdout"]["text"], r["stderr"]["text"]), (200, 3, "out\n", "err\n"))
        st, _, b = call("POST", C + "/exec", p("/exec?stream=true"), body={"argv": ["sh", "-c", "echo a; echo b >&2"]})
        events = [json.loads(x) for x in b.decode().splitlines()]
        self.assertEqual(events[-1]["type"], "exit", b)
        self.assertEqual(events[-1]["exit_code"], 0)
        self.assertIn({"type": "stdout", "data": "a\n"}, events)
        st, _, b = call("POST", C + "/exec", p("/exec"), body={"argv": ["sleep", "5"], "timeout_ms": 300})
        self.assertEqual((st, json.loads(b)["timed_out"], json.loads(b)["exit_code"]), (200, True, 124), b)
        st, _, b = call("POST", C + "/processes", p("/processes"), body={"argv": ["sh", "-c", "echo up; cat"]})
        self.assertEqual(st, 201, b)
        pid = json.loads(b)["id"]
        st, _, b = call("GET", C + "/processes", p("/processes"))
        self.assertIn(pid, [x["id"] for x in json.loads(b)["processes"]])
        st, _, b = call("POST", C + "/processes/{id}/input", p("/processes/%s/input" % pid), body={"data": "fed\n"})
        self.assertEqual(st, 204, b)
        out = ""
        for _ in range(50):
            st, _, b = call("GET", C + "/processes/{id}", p("/processes/%s" % pid))
            out = json.loads(b)["stdout"]
            if "fed" in out:
                break
            time.sleep(0.1)
        self.assertEqual(out, "up\nfed\n")
        st, _, b = call("POST", C + "/processes/{id}/kill", p("/processes/%s/kill" % pid), body={"signal": "KILL"})
        self.assertEqual(st, 204, b)
        st, _, b = call("PUT", C + "/files", p("/files?path=d/hello.txt"), raw=b"hello\x00bytes")
        self.assertEqual(st, 204, b)
        st, h, b = call("GET", C + "/files", p("/files?path=/workspace/d/hello.txt"))
        self.assertEqual((st, b), (200, b"hello\x00bytes"))
        self.assertEqual(h.get("X-Brig-File-Size"), "11")
        st, _, b = call("GET", C + "/files/stat", p("/files/stat?path=d/hello.txt"))
        self.assertEqual((st, json.loads(b)["size"]), (200, 11))
        st, _, b = call("POST", C + "/files/mkdir", p("/files/mkdir"), body={"path": "e/f"})
        self.assertEqual(st, 204, b)
        st, _, b = call("POST", C + "/files/move", p("/files/move"), body={"from": "d/hello.txt", "to": "e/f/x.txt"})
        self.assertEqual(st, 204, b)
        st, _, b = call("GET", C + "/files/list", p("/files/list?path=e&depth=3"))
        self.assertIn("f/x.txt", [x["name"] for x in json.loads(b)["entries"]])
        st, _, b = call("DELETE", C + "/files", p("/files?path=e&recursive=true"))
        self.assertEqual(st, 204, b)
        self.assertError(call("GET", C + "/files/stat", p("/files/stat?path=e")), 404, "not_found")
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w") as tf:
            data = b"from a tar"
            ti = tarfile.TarInfo("t/in.txt")
            ti.size, ti.uid, ti.gid = len(data), 0, 0
            tf.addfile(ti, io.BytesIO(data))
        st, _, b = call("PUT", C + "/archive", p("/archive?path=/workspace"), raw=tb.getvalue())
        self.assertEqual(st, 204, b)
        st, _, b = call("GET", C + "/archive", p("/archive?path=t"))
        self.assertEqual(st, 200, b)
        with tarfile.open(fileobj=io.BytesIO(b)) as tf:
            m = tf.getmember("t/in.txt")
            self.assertEqual((tf.extractfile(m).read(), m.uid), (b"from a tar", 1000))
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w") as tf:
            ti = tarfile.TarInfo("../evil")
            ti.size = 1
            tf.addfile(ti, io.BytesIO(b"x"))
        st, _, b = c.call("PUT", p("/archive?path=/workspace"), raw=tb.getvalue(), token=tok)
        self.assertEqual((st, json.loads(b)["code"]), (400, "unsafe"), b)
        st, _, b = c.call("PUT", p("/files?path=keep.txt"), raw=b"kept across recovery", token=tok)
        self.assertEqual(st, 204, b)
        st, _, b = call("GET", C + "/history", p("/history?limit=50"))
        self.assertEqual(st, 200, b)
        self.assertIn(["sh", "-c", "echo out; echo err >&2; exit 3"], [x["argv"] for x in json.loads(b)["history"]])
        # who: the token's line in the tokens file, never the token
        self.assertIn("serve token, line 2", [x.get("actor") for x in json.loads(b)["history"]])
        st, _, b = call("GET", "/v1/sessions", "/v1/sessions?ns=" + ns)
        self.assertIn(session, [x["session"] for x in json.loads(b)["sessions"]])
        self.assertNotIn("computer_state", json.loads(b)["sessions"][0])  # only when asked
        # computers=true: what Docker says of each, as brig sessions ls shows it
        st, _, b = c.call("GET", "/v1/sessions?computers=true&ns=" + ns, token=tok)
        mine = [x for x in json.loads(b)["sessions"] if x["session"] == session]
        self.assertEqual((st, mine[0]["computer_state"], mine[0]["container"], mine[0]["container_id"]),
                         (200, "running", comp["name"], comp["id"]), b)
        self.assertNotIn("fixed", mine[0])
        self.assertEqual(json.loads(b)["forgotten"], [])
        st, _, b = c.call("GET", p("/history?limit=0"), token=tok)  # 0: all
        self.assertGreaterEqual((st, len(json.loads(b)["history"])), (200, 3))
        st, _, b = c.call("GET", p("/history?limit=1"), token=tok)
        self.assertEqual(len(json.loads(b)["history"]), 1)
        st, _, b = call("POST", C + "/checkpoints", p("/checkpoints"))
        self.assertEqual(st, 201, b)
        cp = json.loads(b)["id"]
        st, _, b = call("GET", C + "/checkpoints", p("/checkpoints"))
        self.assertEqual(json.loads(b)["checkpoints"][0]["id"], cp)
        blob = json.loads(b)["checkpoints"][0]["blob"]  # its name, never a path of the server's
        self.assertTrue(blob.startswith(json.loads(b)["checkpoints"][0]["digest"]) and "/" not in blob, blob)
        st, h, b = call("GET", C + "/checkpoints/{id}/export", p("/checkpoints/%d/export" % cp))
        self.assertEqual(st, 200, b)
        self.assertEqual(h.get("X-Brig-Digest"), "sha256:" + hashlib.sha256(b).hexdigest())
        other = self.cpath(ns, session + "x", "/checkpoints/%d/export" % cp)
        self.assertError(c.call("GET", other, token=tok), 404, "not_found")
        self.assertError(c.call("GET", p("/checkpoints/0/export"), token=tok), 400, "invalid")
        # by id alone (brig checkpoint export), and back in by its own session (brig checkpoint import)
        st, h, arc = call("GET", "/v1/checkpoints/{id}/export", "/v1/checkpoints/%d/export" % cp)
        self.assertEqual((st, arc), (200, b), "the same archive either way")
        self.assertTrue(arc.startswith(b"brig-checkpoint/session.json"), arc[:64])  # incremental: an archive
        self.assertError(c.call("GET", "/v1/checkpoints/%d/export" % cp, token=TOK_B), 404, "not_found")
        st, _, b = call("POST", "/v1/checkpoints/import", "/v1/checkpoints/import", raw=arc)
        self.assertEqual((st, json.loads(b)["session"], json.loads(b)["digest"]), (201, session, blob[:64]), b)
        self.assertError(c.call("POST", "/v1/checkpoints/import", raw=arc, token=TOK_B), 403, "forbidden")
        self.assertError(c.call("POST", "/v1/checkpoints/import", raw=b"not an archive" * 64, token=tok), 400,
                         "invalid")

        def tar_of(files):
            tb = io.BytesIO()
            with tarfile.open(fileobj=tb, mode="w") as tf:
                for name, data in files:
                    ti = tarfile.TarInfo(name)
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
            return tb.getvalue()

        st, _, b = call("POST", C + "/checkpoints/import", p("/checkpoints/import"), raw=tar_of(
            [("workspace/keep.txt", b"kept across recovery"), ("workspace/imported.txt", b"imported")]))
        self.assertEqual(st, 201, b)
        cp = json.loads(b)["id"]
        self.assertError(c.call("POST", p("/checkpoints/import"), raw=tar_of([("etc/passwd", b"x")]), token=tok),
                         400, "unsafe")
        self.assertError(c.call("POST", p("/checkpoints/import"), raw=b"not a tar at all" * 64, token=tok), 400)
        # attach without the upgrade headers: 426 (Attach upgrades by hand)
        self.assertError(call("POST", C + "/exec/attach", p("/exec/attach"), body={"argv": ["true"]}), 426,
                         "upgrade_required")
        self.assertError(call("POST", C + "/processes/{id}/attach", p("/processes/1/attach?native=true"), body={}),
                         426, "upgrade_required")

        # egress rules: this computer is not of network egress (test_egress_rules has one that is)
        for method, tail, body in (("GET", "/egress", None), ("POST", "/egress/allow", {"rule": "a.example.com"}),
                                   ("POST", "/egress/deny", {"rule": "a.example.com"})):
            self.assertError(call(method, C + tail, p(tail), body=body), 409, "conflict")
        # its ledger: nothing (test_egress_rules and CliClient.test_egress have rows)
        st, _, b = call("GET", "/v1/egress/log", "/v1/egress/log?name=" + comp["name"])
        self.assertEqual((st, json.loads(b)), (200, {"ledger": []}), b)
        st, _, b = c.call("GET", "/v1/egress/log?limit=0&ns=%s&agent=agent&session=%s" % (ns, session), token=tok)
        self.assertEqual((st, json.loads(b)), (200, {"ledger": []}), b)
        for q in ("", "?name=x&ns=" + ns, "?ns=" + ns, "?ns=%s&agent=agent&session=a%%2Fb" % ns, "?name=",
                  "?name=" + "x" * 70, "?name=x&limit=-1", "?name=x&limit=10001"):
            self.assertError(c.call("GET", "/v1/egress/log" + q, token=tok), 400, "invalid")
        self.assertError(c.call("GET", "/v1/egress/log?ns=%s&agent=agent&session=%s" % (NS_B, session), token=tok),
                         403, "forbidden")
        seen.add(("GET", "/v1/events"))
        t_pause = int(time.time() * 1000)
        events = self.watch_events(c, tok, ns, lambda: call("POST", C + "/pause", p("/pause")))
        self.assertIn(("pause", comp["name"]), [(e["action"], e["name"]) for e in events])
        # since_ms: the same pause, asked for after it happened, and nothing older
        again = self.watch_events(c, tok, ns, lambda: None, since_ms=t_pause)
        self.assertIn(("pause", comp["name"]), [(e["action"], e["name"]) for e in again])
        self.assertEqual([e for e in again if e["time_ms"] < t_pause], [])
        self.assertError(call("POST", C + "/exec", p("/exec"), body={"argv": ["true"]}), 409, "state")
        st, _, b = call("POST", C + "/resume", p("/resume"))
        self.assertEqual((st, json.loads(b)["state"]), (200, "running"), b)
        st, _, b = call("POST", C + "/stop", p("/stop"))
        self.assertEqual((st, json.loads(b)["state"]), (200, "exited"), b)
        st, _, b = call("POST", C + "/recover", p("/recover"))
        self.assertEqual(st, 200, b)
        r = json.loads(b)
        self.assertEqual((r["new_generation"], r["checkpoint_id"]), (2, cp))
        st, _, b = call("POST", C + "/exec", p("/exec"), body={"argv": ["cat", "/workspace/keep.txt"]})
        self.assertEqual(json.loads(b)["stdout"]["text"], "kept across recovery", b)
        st, _, b = c.call("GET", p("/files?path=imported.txt"), token=tok)
        self.assertEqual((st, b), (200, b"imported"))
        # MCP over Streamable HTTP (tests/mcp/mcp_http.test.mjs drives it with the SDK).
        M, mp = "/v1/mcp/{ns}/{agent}/{session}", "/v1/mcp/%s/agent/%s" % (ns, session)
        st, h, b = call("POST", M, mp, body={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "walk", "version": "1"}}},
            headers={"Accept": "application/json, text/event-stream"})
        self.assertEqual((st, json.loads(b)["result"]["serverInfo"]["name"]), (200, "brig"), b)
        sid = {k.lower(): v for k, v in h.items()}["mcp-session-id"]
        st, _, b = call("DELETE", M, mp, headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 204, b)
        st, _, b = call("DELETE", C, p())
        self.assertEqual(st, 204, b)
        # one checkpoint by its id, then the session itself with the rest (the computer is gone already)
        st, _, b = call("DELETE", "/v1/checkpoints/{id}", "/v1/checkpoints/%d" % cp)
        self.assertEqual(st, 204, b)
        self.assertError(c.call("DELETE", "/v1/checkpoints/%d" % cp, token=tok), 404, "not_found")
        S, sp = "/v1/sessions/{ns}/{agent}/{session}", "/v1/sessions/%s/agent/%s" % (ns, session)
        st, _, b = call("DELETE", S, sp + "?checkpoints=true")
        self.assertEqual(st, 200, b)
        r = json.loads(b)
        self.assertEqual((r["destroyed"], r["checkpoints_kept"]), ([], 0), r)
        self.assertGreaterEqual(r["checkpoints_removed"], 1, r)
        self.assertError(c.call("DELETE", sp, token=tok), 404, "not_found")
        self.assertEqual(seen, server_routes(), "the walk missed a route")

    def test_guest_handles_released(self):
        """stat → stop → create in a loop: each stop retires the computer's
        brig-init handle (a reader thread, an eventfd, an exec socket); the
        server must free it, not keep it until exit."""
        c = PyClient(self.srv.sock)
        session = "handles"
        C = self.cpath(NS_A, session)

        def cycle():
            # fresh: the stopped generation kept no checkpoint; a new one starts.
            st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": session, "fresh": True,
                                                        "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
            self.assertIn(st, (200, 201), b)
            st, _, b = c.call("GET", C + "/files/stat?path=/", token=TOK_A)
            self.assertEqual(st, 200, b)
            st, _, b = c.call("POST", C + "/stop", token=TOK_A)
            self.assertEqual(st, 200, b)

        def counts():
            pid = self.srv.p.pid
            return len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid))

        try:
            cycle()  # the first one settles what the server keeps for good
            fds0, threads0 = counts()
            n = 5
            for _ in range(n):
                cycle()
            fds, threads = counts()
            # Each kept handle would add a thread and two descriptors per cycle.
            self.assertLess(fds - fds0, 4, "descriptors grow with stop/create cycles: %d → %d" % (fds0, fds))
            self.assertLess(threads - threads0, 3, "threads grow with stop/create cycles: %d → %d" % (threads0, threads))
        finally:
            c.call("DELETE", C, token=TOK_A)

    def test_spooled_bodies(self):
        """A tar sent in and a checkpoint import are kept in a file, not
        memory: past --body-max (64 KiB here), up to --upload-max (8 MiB)."""
        c = self.py
        p = self.cpath(NS_A, "spool")
        self.create(c, NS_A, TOK_A, "spool")
        try:
            data = os.urandom(1 << 20)  # a MiB that does not compress
            tb = io.BytesIO()
            with tarfile.open(fileobj=tb, mode="w") as tf:
                ti = tarfile.TarInfo("big.bin")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            st, _, b = c.call("PUT", p + "/archive?path=/workspace", raw=tb.getvalue(), token=TOK_A)
            self.assertEqual(st, 204, b)
            st, _, b = c.call("GET", p + "/files/stat?path=big.bin", token=TOK_A)
            self.assertEqual((st, json.loads(b)["size"]), (200, len(data)), b)
            st, _, b = c.call("POST", p + "/checkpoints", token=TOK_A)
            self.assertEqual(st, 201, b)
            st, _, arc = c.call("GET", "/v1/checkpoints/%d/export" % json.loads(b)["id"], token=TOK_A)
            self.assertGreater((st, len(arc)), (200, 1 << 20))
            st, _, b = c.call("POST", "/v1/checkpoints/import", raw=arc, token=TOK_A)
            self.assertEqual((st, json.loads(b)["session"]), (201, "spool"), b)
            st, _, b = c.call("POST", p + "/checkpoints/import", raw=arc, token=TOK_A)
            self.assertEqual(st, 201, b)
            self.assertError(c.call("POST", p + "/exec", raw=b"x" * 70000, token=TOK_A), 413, "too_big")  # JSON: memory
            for method, path in (("PUT", p + "/archive?path=/workspace"), ("POST", "/v1/checkpoints/import")):
                sk = socket.socket(socket.AF_UNIX)
                sk.connect(self.srv.sock)
                sk.sendall(("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
                            % (method, path, TOK_A, (8 << 20) + 1)).encode())
                self.assertIn(b" 413 ", sk.recv(4096), path)
                sk.close()
        finally:
            c.call("DELETE", p, token=TOK_A)

    # ---- egress rules (a computer of network egress: its proxy is the host's one) ----

    def test_egress_rules(self):
        c = self.py
        p = self.cpath(NS_A, "egr")
        try:
            st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "egr", "spec": {
                "network": "egress", "allow": ["a.example.com"], "labels": {"brig.test": PREFIX}}}, token=TOK_A)
            self.assertIn(st, (200, 201), b)
            name = json.loads(b)["name"]
            st, _, b = c.call("GET", p + "/egress", token=TOK_A)
            self.assertEqual((st, json.loads(b)), (200, {"name": name, "allow": ["a.example.com"]}), b)
            st, _, b = c.call("POST", p + "/egress/allow", body={"rule": "*.B.example.com:8443"}, token=TOK_A)
            self.assertEqual((st, json.loads(b)["allow"]), (200, ["a.example.com", "*.b.example.com:8443"]), b)
            st, _, b = c.call("POST", p + "/egress/allow", body={"rule": "a.example.com"}, token=TOK_A)  # once
            self.assertEqual(json.loads(b)["allow"], ["a.example.com", "*.b.example.com:8443"], b)
            st, _, b = c.call("POST", p + "/egress/deny", body={"rule": "a.example.com"}, token=TOK_A)
            self.assertEqual((st, json.loads(b)["allow"]), (200, ["*.b.example.com:8443"]), b)
            st, _, b = c.call("GET", p + "/egress", token=TOK_A)
            self.assertEqual(json.loads(b)["allow"], ["*.b.example.com:8443"], b)
            for bad in ("https://x.example.com", "x.example.com:0", "x.example.com:99999", "", 7, None):
                st, _, b = c.call("POST", p + "/egress/allow", body={"rule": bad} if bad is not None else {},
                                  token=TOK_A)
                self.assertError((st, _, b), 400, "invalid")
                self.assertTrue(json.loads(b)["message"].startswith("rule: "), b)
            self.assertError(c.call("POST", p + "/egress/allow", body={"rule": "x.example.com"}, token=TOK_B),
                             403, "forbidden")
            self.assertError(c.call("GET", p + "/egress", token=TOK_B), 403, "forbidden")
            self.assertError(c.call("GET", self.cpath(NS_A, "egrnope", "/egress"), token=TOK_A), 404, "not_found")
            st, _, b = c.call("GET", p + "/egress", token=TOK_A)  # B changed nothing
            self.assertEqual(json.loads(b)["allow"], ["*.b.example.com:8443"], b)
            # the ledger, in the server's store (which its sandboxes' rows go to,
            # whichever brig started the host's proxy): a refused connection
            deny = ("p=${HTTPS_PROXY#http://}; printf 'CONNECT denied.example.com:443 HTTP/1.1\\r\\n"
                    "Host: denied.example.com:443\\r\\n\\r\\n' | nc -w 5 ${p%:*} ${p##*:} | head -1")
            st, _, b = c.call("POST", p + "/exec", body={"argv": ["sh", "-c", deny]}, token=TOK_A)
            self.assertIn("403 Forbidden", json.loads(b)["stdout"]["text"], b)
            q = "/v1/egress/log?ns=%s&agent=agent&session=egr" % NS_A
            for _ in range(100):
                st, _, b = c.call("GET", q, token=TOK_A)
                if json.loads(b)["ledger"]:
                    break
                time.sleep(0.1)
            row = json.loads(b)["ledger"][0]
            self.assertEqual((row["sandbox"], row["host"], row["port"], row["decision"], row["session"]),
                             (name, "denied.example.com", 443, "denied",
                              {"ns": NS_A, "agent": "agent", "session": "egr"}), b)
            self.assertIn("is not allowed", row["reason"])
            st, _, b = c.call("GET", "/v1/egress/log?name=" + name, token=TOK_ALL)
            self.assertEqual(json.loads(b)["ledger"], [row], b)
            st, _, b = c.call("GET", "/v1/egress/log?name=" + name, token=TOK_B)  # not B's
            self.assertEqual((st, json.loads(b)), (200, {"ledger": []}), b)
            self.assertError(c.call("GET", q, token=TOK_B), 403, "forbidden")
        finally:
            c.call("DELETE", p, token=TOK_A)

    def test_run_attach(self):
        """POST /v1/runs/attach by hand: inputs as tar frames (past the 64 KiB
        body cap of this server), stdin, live output, the outputs tar and the
        result; unsafe inputs end it with an error; refusals before the 101."""
        big = os.urandom(200000)
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w") as tf:
            ti = tarfile.TarInfo("in.bin")
            ti.size = len(big)
            tf.addfile(ti, io.BytesIO(big))
        body = {"ns": NS_A, "argv": ["sh", "-c", "cat; echo err >&2; cp /inbox/in.bin /outbox/out.bin; exit 5"],
                "stdin": True, "outputs": True, "spec": {"labels": {"brig.test": PREFIX}}}
        st, _, rest, s = attach_open(self.srv.sock, "/v1/runs/attach", body, TOK_A)
        self.assertEqual(st, 101, rest)
        try:
            t = tb.getvalue()
            s.sendall(b"".join(frame(6, t[i:i + 65536]) for i in range(0, len(t), 65536)) + frame(7) +
                      frame(0, b"typed\n") + frame(4))
            f = Frames(s, rest).rest()
        finally:
            s.close()
        self.assertEqual((f.out, f.err, f.end["type"], f.end["exit_code"]), (b"typed\n", b"err\n", "exit", 5), f.end)
        self.assertEqual(f.end["outputs"], ["out.bin"])
        with tarfile.open(fileobj=io.BytesIO(f.tar)) as tf:
            self.assertEqual(tf.extractfile("out.bin").read(), big)
        # an input that climbs out: the extractor's refusal, nothing runs
        tb = io.BytesIO()
        with tarfile.open(fileobj=tb, mode="w") as tf:
            ti = tarfile.TarInfo("../evil")
            ti.size = 1
            tf.addfile(ti, io.BytesIO(b"x"))
        st, _, rest, s = attach_open(self.srv.sock, "/v1/runs/attach", {"ns": NS_A, "argv": ["true"]}, TOK_A)
        self.assertEqual(st, 101, rest)
        try:
            s.sendall(frame(6, tb.getvalue()) + frame(7))
            f = Frames(s, rest).rest()
        finally:
            s.close()
        self.assertEqual(f.end["type"], "error", f.end)
        self.assertTrue(f.end["message"].startswith("copy inputs in: "), f.end)
        for tok, b, status, code in ((TOK_B, {"ns": NS_A, "argv": ["true"]}, 403, "forbidden"),
                                     (TOK_A, {"ns": NS_A, "argv": ["true"], "inputs_tar": ""}, 400, "invalid"),
                                     (TOK_A, {"argv": ["true"]}, 400, "invalid"),
                                     (TOK_A, {"ns": NS_A, "argv": ["true"], "stdin": 1}, 400, "invalid")):
            st, _, rest, s = attach_open(self.srv.sock, "/v1/runs/attach", b, tok)
            self.assertEqual((st, json.loads(rest)["code"]), (status, code), rest)
        self.assertEqual(subprocess.run(["docker", "ps", "-aq", "--filter", "label=brig.test=" + PREFIX,
                                         "--filter", "name=brig-run-"], capture_output=True, text=True).stdout, "")

    def test_every_route_python(self):
        self.walk(self.py, "py")

    def test_every_route_curl(self):
        self.walk(CurlClient(self.srv.sock), "curl")

    def test_auth(self):
        c = self.py
        self.assertError(c.call("GET", "/v1/computers"), 401, "unauthorized")
        self.assertError(c.call("GET", "/v1/computers", token="x" * 40), 401, "unauthorized")
        self.assertError(c.call("GET", "/v1/computers?token=" + TOK_A), 401, "unauthorized")
        self.assertError(c.call("GET", "/v1/computers?access_token=" + TOK_A, token=TOK_A), 401, "unauthorized")
        self.assertError(c.call("GET", "/metrics", token=TOK_A), 403, "forbidden")
        self.assertNotIn(TOK_A, self.srv.logtext())
        self.assertNotIn(TOK_ALL, self.srv.logtext())

    def test_namespaces(self):
        c = self.py
        self.create(c, NS_B, TOK_B, "iso")
        try:
            # A sees nothing of B, on every route that names a computer.
            for method, tmpl in sorted(server_routes()):
                if "{ns}" not in tmpl:
                    continue
                path = tmpl.replace("{ns}", NS_B).replace("{agent}", "agent").replace("{session}", "iso")
                path = path.replace("{id}", "pAAAAAA")
                if ("/files" in path or "/archive" in path) and method in ("GET", "PUT", "DELETE"):
                    path += "?path=x"
                self.assertError(c.call(method, path, body={}, token=TOK_A), 403, "forbidden")
            self.assertError(c.call("POST", "/v1/computers", {"ns": NS_B, "agent": "agent", "session": "x"},
                                    token=TOK_A), 403, "forbidden")
            self.assertError(c.call("GET", "/v1/computers?ns=" + NS_B, token=TOK_A), 403, "forbidden")
            st, _, b = c.call("GET", "/v1/computers?label=" + urllib.parse.quote(LABEL), token=TOK_A)
            self.assertNotIn(NS_B, [x["ns"] for x in json.loads(b)["computers"]])
            self.assertError(c.call("GET", "/v1/sessions?ns=" + NS_B, token=TOK_A), 403, "forbidden")
            self.assertError(c.call("GET", "/v1/events?ns=" + NS_B, token=TOK_A), 403, "forbidden")
            seen_by_a = self.watch_events(c, TOK_A, None, lambda: (
                c.call("POST", self.cpath(NS_B, "iso", "/pause"), token=TOK_B),
                c.call("POST", self.cpath(NS_B, "iso", "/resume"), token=TOK_B)), until="never")
            self.assertEqual([e for e in seen_by_a if e["ns"] == NS_B], [])
            st, _, b = c.call("GET", "/v1/sessions", token=TOK_A)
            self.assertNotIn(NS_B, [x["ns"] for x in json.loads(b)["sessions"]])
            st, _, b = c.call("GET", "/v1/sessions?computers=true", token=TOK_A)
            self.assertNotIn(NS_B, [x["ns"] for x in json.loads(b)["sessions"] + json.loads(b)["forgotten"]])
            st, _, b = c.call("GET", "/v1/computers?label=" + urllib.parse.quote(LABEL), token=TOK_B)
            self.assertIn(NS_B, [x["ns"] for x in json.loads(b)["computers"]])
            # B's computer is untouched.
            st, _, b = c.call("GET", self.cpath(NS_B, "iso"), token=TOK_B)
            self.assertEqual(json.loads(b)["state"], "running")
        finally:
            c.call("DELETE", self.cpath(NS_B, "iso"), token=TOK_B)

    def test_bad_requests(self):
        c = self.py
        self.create(c, NS_A, TOK_A, "bad")
        try:
            p = self.cpath(NS_A, "bad")
            self.assertError(c.call("POST", p + "/exec", raw=b'{"argv": [', token=TOK_A), 400, "malformed_json")
            # a secret's value comes with the request, never from the server's
            # environment (PATH is set there)
            sec = {"network": "egress", "secrets": ["PATH@a.example.com"], "labels": {"brig.test": PREFIX}}
            st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "sec",
                                                        "spec": sec}, token=TOK_A)
            self.assertEqual(st, 400, b)
            self.assertIn("secret_values.PATH: required", json.loads(b)["message"])
            for vals, why in (({"PATH": 7}, "secret_values.PATH: a string"),
                              ({"PATH": "a\nb"}, "printable"),
                              ({"HOME": "x"}, "secret_values.HOME: the spec has no such secret"),
                              ({"1X": "x"}, "environment variable name"),
                              ([], "secret_values: an object")):
                st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "sec",
                                                            "spec": sec, "secret_values": vals}, token=TOK_A)
                self.assertEqual(st, 400, b)
                self.assertIn(why, json.loads(b)["message"])
            st, _, b = c.call("POST", "/v1/runs", {"ns": NS_A, "argv": ["true"], "spec": sec}, token=TOK_A)
            self.assertEqual(st, 400, b)
            self.assertIn("secret_values.PATH: required", json.loads(b)["message"])
            self.assertError(c.call("POST", p + "/exec", raw=b'[1]', token=TOK_A), 400, "malformed_json")
            self.assertError(c.call("POST", p + "/exec", body={"argv": []}, token=TOK_A), 400, "invalid")
            for bad in ("x", "12abc", "0", str(int(time.time() * 1000) + 3600000)):
                st, _, body = c.call("GET", "/v1/events?ns=%s&since_ms=%s" % (NS_A, bad), token=TOK_A)
                self.assertEqual(st, 400, body)
                self.assertIn("since_ms", json.loads(body)["message"])
            for bad in ("-1", "10001", "x"):
                self.assertError(c.call("GET", p + "/history?limit=" + bad, token=TOK_A), 400, "invalid")
            self.assertError(c.call("POST", p + "/exec", body={"argv": ["a\u0000b"]}, token=TOK_A), 400)
            self.assertError(c.call("POST", p + "/exec", body={"argv": ["true"], "bogus": 1}, token=TOK_A), 400)
            self.assertError(c.call("POST", p + "/exec", raw=b"x" * 70000, token=TOK_A), 413, "too_big")
            self.assertError(c.call("GET", p + "/files?path=../etc/passwd", token=TOK_A), 400, "invalid")
            self.assertError(c.call("GET", p + "/files?path=/workspace/a/../../etc", token=TOK_A), 400, "invalid")
            self.assertError(c.call("GET", p + "/files?path=a%00b", token=TOK_A), 400, "invalid")
            self.assertError(c.call("GET", p + "/files", token=TOK_A), 400, "invalid")
            # A %00 in the path would cut it short: "…/bad%00x" is not "…/bad".
            self.assertError(c.call("GET", p + "%00x", token=TOK_A), 400, "invalid")
            self.assertError(c.call("GET", "/v1/health%00", token=TOK_A), 400, "invalid")
            st, _, b = c.call("GET", p, token=TOK_A)  # the same connection serves on
            self.assertEqual(st, 200, b)
            self.assertError(c.call("POST", p + "/files/move", body={"from": "a", "to": "../b"}, token=TOK_A), 400)
            # native=true's own parameters: not without it, and in their forms
            for method, tail, body in (("PUT", "/files?path=x&mode=644", None),
                                       ("PUT", "/files?path=x&parents=true", None),
                                       ("PUT", "/files?path=x&native=true&mode=8", None),
                                       ("PUT", "/files?path=x&native=true&append=true", None),
                                       ("GET", "/files/list?path=/&depth=11", None),
                                       ("GET", "/files/list?path=/&native=true&depth=65", None),
                                       ("POST", "/files/mkdir", {"path": "x", "parents": True}),
                                       ("POST", "/files/mkdir?native=true", {"path": "x", "mode": 493}),
                                       ("POST", "/files/mkdir?native=true", {"path": "x", "parents": 1})):
                kw = {"body": body} if body is not None else {"raw": b""}
                self.assertError(c.call(method, p + tail, token=TOK_A, **kw), 400, "invalid")
            # the native process routes: brig-init's integer ids and signal numbers
            for method, tail, body in (("POST", "/processes/p1/kill?native=true", {}),
                                       ("POST", "/processes/0/kill?native=true", {}),
                                       ("POST", "/processes/12x/kill?native=true", {}),
                                       ("POST", "/processes/99999999999999999999/kill?native=true", {}),
                                       ("POST", "/processes/1/kill?native=true", {"signal": "TERM"}),
                                       ("POST", "/processes/1/kill?native=true", {"signal": 0}),
                                       ("POST", "/processes/1/kill?native=true", {"signal": 65}),
                                       ("POST", "/processes?native=true", {"argv": ["true"], "timeout_ms": 5}),
                                       ("POST", "/processes?native=true", {"argv": []})):
                self.assertError(c.call(method, p + tail, body=body, token=TOK_A), 400, "invalid")
            st, _, b = c.call("POST", p + "/processes/999999/kill?native=true", body={}, token=TOK_A)
            self.assertEqual(st, 404, b)
            st, _, b = c.call("POST", p + "/processes?native=true", body={"argv": ["sleep", "30"]}, token=TOK_A)
            self.assertEqual(st, 201, b)
            pid = json.loads(b)["id"]
            self.assertIsInstance(pid, int)
            st, _, b = c.call("GET", p + "/processes?native=true", token=TOK_A)
            self.assertEqual(st, 200, b)
            self.assertIn(pid, [x["id"] for x in json.loads(b)["processes"]])
            self.assertError(c.call("POST", p + "/processes/%d/kill?native=true" % pid, body={}, token=TOK_B),
                             403, "forbidden")
            st, _, b = c.call("POST", p + "/processes/%d/kill?native=true" % pid, body={"signal": 9}, token=TOK_A)
            self.assertEqual(st, 204, b)
            st, _, b = c.call("GET", p + "/files?path=/nope&native=true", token=TOK_A)
            self.assertEqual((st, json.loads(b)["errno"]), (404, 2), b)
            self.assertIn("read /nope: ", json.loads(b)["message"])
            self.assertError(c.call("GET", "/v1/computers/%s/ag$nt/s" % NS_A, token=TOK_A), 400, "invalid")
            self.assertError(c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "a b", "session": "s"},
                                    token=TOK_A), 400, "invalid")
            # record false (brig create's computer): generation only with it, fresh never
            for extra in ({"generation": 2}, {"record": "no"}, {"record": False, "fresh": True},
                          {"record": False, "generation": 0}, {"record": False, "generation": 2 ** 32},
                          {"record": False, "generation": "2"}):
                self.assertError(c.call("POST", "/v1/computers", dict({"ns": NS_A, "agent": "agent", "session": "s"},
                                                                      **extra), token=TOK_A), 400, "invalid")
            self.assertError(c.call("GET", "/v1/nothing", token=TOK_A), 404, "no_route")
            self.assertError(c.call("POST", self.cpath(NS_A, "nosuchsession", "/checkpoints/import"), raw=b"x",
                                    token=TOK_A), 404, "not_found")
            self.assertError(c.call("PATCH", p, token=TOK_A), 405, "method_not_allowed")
            # A chunked body over the cap (no Content-Length).
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.srv.sock)
            s.sendall(("POST %s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n" % (p, TOK_A)).encode())
            chunk = b"x" * 8192
            try:
                for _ in range(10):
                    s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                s.sendall(b"0\r\n\r\n")
            except OSError:
                pass
            s.settimeout(10)
            self.assertIn(b" 413 ", s.recv(4096))
            s.close()
            # The server still answers.
            st, _, b = c.call("POST", p + "/exec", body={"argv": ["true"]}, token=TOK_A)
            self.assertEqual(st, 200, b)
        finally:
            c.call("DELETE", self.cpath(NS_A, "bad"), token=TOK_A)

    def test_dribbled_headers(self):
        """A byte every 0.3 s keeps the connection busy but never ends the
        headers: cut after the header timeout (2 s here), the server serves on."""
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.srv.sock)
        t0 = time.monotonic()
        cut = False
        for ch in b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            try:
                s.sendall(bytes([ch]))
            except OSError:
                cut = True
                break
            time.sleep(0.3)
            if time.monotonic() - t0 > 12:
                break
        if not cut:
            s.settimeout(5)
            try:
                cut = s.recv(100) == b""
            except OSError:
                cut = True
        self.assertTrue(cut, "a client dribbling its headers was not cut")
        self.assertIn("sent no complete request", self.srv.logtext())
        self.assertLess(time.monotonic() - t0, 8)
        s.close()
        st, _, b = PyClient(self.srv.sock).call("GET", "/v1/health")
        self.assertEqual(st, 200)

    def test_slow_headers(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.srv.sock)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
        s.settimeout(10)
        t0 = time.monotonic()
        self.assertEqual(s.recv(100), b"")  # dropped, no answer
        self.assertLess(time.monotonic() - t0, 9)
        s.close()
        st, _, b = PyClient(self.srv.sock).call("GET", "/v1/health")
        self.assertEqual(st, 200)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Tcp(unittest.TestCase):
    """tcp:// needs TLS and tokens; with them, HTTPS with a bearer token."""

    def test_tcp_needs_tls_and_tokens(self):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([BRIG, "serve", "--listen", "tcp://127.0.0.1:%d" % free_port()], capture_output=True,
                               text=True, timeout=30, env=dict(os.environ, BRIG_STORE="sqlite://" + d + "/db"))
        self.assertEqual(p.returncode, 125, p.stderr)
        self.assertIn("needs --tls-cert, --tls-key and --tokens", p.stderr)

    def test_tokens_file_mode(self):
        with tempfile.TemporaryDirectory() as d:
            tf = os.path.join(d, "tokens")
            with open(tf, "w") as f:
                f.write("%s *\n" % TOK_ALL)
            os.chmod(tf, 0o644)
            p = subprocess.run([BRIG, "serve", "--listen", "unix://" + os.path.join(d, "s"), "--tokens", tf],
                               capture_output=True, text=True, timeout=30,
                               env=dict(os.environ, BRIG_STORE="sqlite://" + d + "/db"))
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn("chmod 600", p.stderr)
            self.assertNotIn(TOK_ALL, p.stderr)
            os.chmod(tf, 0o600)
            with open(tf, "w") as f:
                f.write("short *\n")
            p = subprocess.run([BRIG, "serve", "--listen", "unix://" + os.path.join(d, "s"), "--tokens", tf],
                               capture_output=True, text=True, timeout=30,
                               env=dict(os.environ, BRIG_STORE="sqlite://" + d + "/db"))
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn("line 1", p.stderr)
            self.assertNotIn("short", p.stderr)

    def test_https_with_token(self):
        with tempfile.TemporaryDirectory() as d:
            cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True)
            tf = os.path.join(d, "tokens")
            with open(tf, "w") as f:
                f.write("%s %s\n" % (TOK_A, NS_A))
            os.chmod(tf, 0o600)
            port = free_port()
            log = open(os.path.join(d, "log"), "wb")
            srv = subprocess.Popen([BRIG, "serve", "--listen", "tcp://127.0.0.1:%d" % port, "--tls-cert", cert,
                                    "--tls-key", key, "--tokens", tf, "--store", "sqlite://" + os.path.join(d, "db")],
                                   stdout=log, stderr=log)
            try:
                import ssl
                ctx = ssl.create_default_context(cafile=cert)
                for _ in range(100):
                    try:
                        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
                        conn.request("GET", "/v1/health")
                        r = conn.getresponse()
                        break
                    except (ConnectionRefusedError, ssl.SSLError):
                        time.sleep(0.05)
                self.assertEqual((r.status, json.loads(r.read())["status"]), (200, "ok"))
                conn.request("GET", "/v1/computers?ns=" + NS_A)
                r = conn.getresponse()
                self.assertEqual(r.status, 401, r.read())
                conn.request("GET", "/v1/computers?ns=" + NS_A, headers={"Authorization": "Bearer " + TOK_A})
                r = conn.getresponse()
                self.assertEqual((r.status, json.loads(r.read())["computers"]), (200, []))
                # The CLI as a client over brig+https (issue 17 point 3)
                ca = os.path.join(d, "ca")
                os.mkdir(ca)
                with open(cert) as src, open(os.path.join(ca, "ca.pem"), "w") as dst:
                    dst.write(src.read())
                e = dict(os.environ, BRIG_HOST="brig+https://127.0.0.1:%d" % port, BRIG_CERT_PATH=ca)
                for tok, rc, out in ((TOK_A, 0, b"[]\n"), ("x" + TOK_A[1:], 125, b"")):
                    p = subprocess.run([BRIG, "ls", "--json", "--ns", NS_A], capture_output=True,
                                       env=dict(e, BRIG_TOKEN=tok))
                    self.assertEqual((p.returncode, p.stdout), (rc, out), p.stderr)
                    self.assertNotIn(tok.encode(), p.stderr)
                p = subprocess.run([BRIG, "ls"], capture_output=True, env=dict(e, BRIG_TOKEN=TOK_A, BRIG_CERT_PATH=d + "/nope"))
                self.assertEqual(p.returncode, 125)
                self.assertIn(b"cannot reach the brig server", p.stderr)
                # Plain HTTP on the TLS port gets no API answer.
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                s.settimeout(10)
                self.assertNotIn(b'"ok"', s.recv(4096))
                s.close()
            finally:
                srv.terminate()
                self.assertEqual(srv.wait(30), 0)
                log.close()
            self.assertNotIn(TOK_A, open(os.path.join(d, "log")).read())


class Lifecycle(unittest.TestCase):
    """SIGTERM with calls in flight; kill -9 mid-exec and restart."""

    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory()
        self.srv = None

    def tearDown(self):
        try:
            if self.srv:
                self.srv.stop(signal.SIGKILL)
        finally:
            docker_cleanup()
            self.tmpdir.cleanup()

    def create(self, c, session):
        st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": session,
                                                     "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
        self.assertIn(st, (200, 201), b)
        return json.loads(b)

    def test_sigterm_drains(self):
        self.srv = Server(self.tmpdir.name)
        c = PyClient(self.srv.sock)
        self.create(c, "drain")
        path = "/v1/computers/%s/agent/drain/exec" % NS_A
        results = [None] * 20

        def one(i):
            try:
                results[i] = PyClient(self.srv.sock).call("POST", path, {"argv": ["sh", "-c", "sleep 1; echo %d" % i]},
                                                          token=TOK_A)
            except Exception as e:  # noqa: BLE001
                results[i] = e

        ts = [threading.Thread(target=one, args=(i,)) for i in range(20)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        self.srv.p.send_signal(signal.SIGTERM)
        for t in ts:
            t.join(120)
        self.assertEqual(self.srv.p.wait(60), 0)
        for i, r in enumerate(results):
            self.assertIsInstance(r, tuple, r)
            st, _, b = r
            if st == 200:
                self.assertEqual(json.loads(b)["stdout"]["text"], "%d\n" % i)
            else:  # arrived after the drain began: answered, not dropped
                self.assertEqual((st, json.loads(b)["code"]), (503, "shutting_down"))
        self.assertGreater(sum(1 for r in results if r[0] == 200), 0)
        self.assertFalse(os.path.exists(self.srv.sock))
        log = self.srv.logtext()
        self.assertIn("stopping:", log)
        self.srv = None

    def test_stream_client_leaves(self):
        self.srv = Server(self.tmpdir.name)
        c = PyClient(self.srv.sock)
        self.create(c, "leave")
        path = "/v1/computers/%s/agent/leave" % NS_A
        marker = "sleep 4343"
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.srv.sock)
        body = json.dumps({"argv": ["sh", "-c", marker]}).encode()
        s.sendall(b"POST %s/exec?stream=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (path.encode(), TOK_A.encode(), len(body), body))
        ps = {"argv": ["ps", "-o", "args"]}
        for _ in range(100):
            st, _, b = c.call("POST", path + "/exec", ps, token=TOK_A)
            if marker in json.loads(b)["stdout"]["text"]:
                break
            time.sleep(0.05)
        else:
            self.fail("the command did not start")
        s.close()  # the client leaves mid-command, which prints nothing
        for _ in range(100):
            st, _, b = c.call("POST", path + "/exec", ps, token=TOK_A)
            if marker not in json.loads(b)["stdout"]["text"]:
                break
            time.sleep(0.1)
        else:
            self.fail("the command of a client that left still runs")
        c.call("DELETE", path, token=TOK_A)

    def test_kill9_mid_exec_restart(self):
        self.srv = Server(self.tmpdir.name)
        c = PyClient(self.srv.sock)
        comp = self.create(c, "k9")
        path = "/v1/computers/%s/agent/k9" % NS_A
        marker = "sleep 4242"

        def run():
            try:
                PyClient(self.srv.sock).call("POST", path + "/exec", {"argv": ["sh", "-c", marker]}, token=TOK_A)
            except Exception:  # noqa: BLE001 (the server is killed under it)
                pass

        t = threading.Thread(target=run)
        t.start()
        ps = {"argv": ["ps", "-o", "args"]}
        for _ in range(100):
            st, _, b = c.call("POST", path + "/exec", ps, token=TOK_A)
            if marker in json.loads(b)["stdout"]["text"]:
                break
            time.sleep(0.05)
        else:
            self.fail("the command did not start")
        self.srv.stop(signal.SIGKILL)
        t.join(30)
        self.srv = Server(self.tmpdir.name)
        c = PyClient(self.srv.sock)
        again = self.create(c, "k9")
        self.assertEqual((again["name"], again["adopted"]), (comp["name"], True))
        text = marker
        for _ in range(100):
            st, _, b = c.call("POST", path + "/exec", ps, token=TOK_A)
            self.assertEqual(st, 200, b)
            text = json.loads(b)["stdout"]["text"]
            if marker not in text:
                break
            time.sleep(0.1)
        self.assertNotIn(marker, text, "brig-init did not end the command of the killed server")
        st, _, b = c.call("DELETE", path, token=TOK_A)
        self.assertEqual(st, 204, b)


class CliClient(unittest.TestCase):
    """brig's CLI through the server (BRIG_HOST): the same output and exit codes as direct."""

    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory()
        cls.srv = Server(cls.tmpdir.name)
        cls.store = "sqlite://" + os.path.join(cls.tmpdir.name, "db")
        cls.host = "brig+unix://" + cls.srv.sock
        p = cls.brig(None, "up", "--ns", NS_A, "--agent", "agent", "--session", "cli", "--label", LABEL)
        assert p.returncode == 0, p.stderr
        cls.name = p.stdout.decode().strip().splitlines()[-1]
        cls.ident = ["--ns", NS_A, "--agent", "agent", "--session", "cli"]

    @classmethod
    def tearDownClass(cls):
        try:
            cls.brig(None, "destroy", cls.name)
        finally:
            rc = cls.srv.stop()
            log = cls.srv.logtext()[-4000:]  # before its folder goes
            docker_cleanup()
            cls.tmpdir.cleanup()
        assert rc == 0, "brig serve exited %s:\n%s" % (rc, log)

    @classmethod
    def brig(cls, host, *args, token=TOK_A, env=None, input=None):
        e = dict(os.environ, BRIG_STORE=cls.store, BRIG_IMAGE=IMAGE)
        e.pop("BRIG_HOST", None)
        e.pop("BRIG_TOKEN", None)
        if host:
            e["BRIG_HOST"] = host
        if token:
            e["BRIG_TOKEN"] = token
        e.update(env or {})
        return subprocess.run([BRIG] + list(args), capture_output=True, env=e, timeout=120, input=input)

    def same(self, *args, env=None):
        """Runs args direct and through the server: the same bytes and exit code
        (an age such as "16 seconds ago" may tick between the two runs, and
        with it the padding of its column: "9 seconds ago " is "10 seconds ago")."""
        d = self.brig(None, *args, env=env)
        r = self.brig(self.host, *args, env=env)
        age = re.compile(rb"(\d+ (second|minute|hour|day|week)s? ago|just now) *")
        self.assertEqual((r.returncode, age.sub(b"AGE ", r.stdout), r.stderr),
                         (d.returncode, age.sub(b"AGE ", d.stdout), d.stderr), args)
        return r

    def test_exec_output_and_exit_code(self):
        cmd = ["--", "sh", "-c", "echo out; echo err >&2; printf 'x\\ty'; exit 3"]
        r = self.same("exec", self.name, *cmd)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (3, b"out\nx\ty", b"err\n"))
        self.same("exec", *self.ident, *cmd)
        r = self.same("exec", "-e", "X=1", "-w", "/tmp", self.name, "--", "sh", "-c", "echo $X; pwd")
        self.assertEqual(r.stdout, b"1\n/tmp\n")
        self.assertEqual(self.same("exec", self.name, "--", "nosuchcmd").returncode, 127)
        self.assertEqual(self.same("exec", "-e", "NOEQ", self.name, "--", "true").returncode, 125)
        r = self.same("exec", "-H", "x", self.name, "--", "true")  # an exec usage error, as direct
        self.assertEqual(r.returncode, 125)
        big = self.same("exec", self.name, "--", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a")
        self.assertEqual(big.stdout, b"a" * 300000)

    def test_exec_json(self):
        d = self.brig(None, "exec", "--json", self.name, "--", "sh", "-c", "echo hi; exit 4")
        r = self.brig(self.host, "exec", "--json", self.name, "--", "sh", "-c", "echo hi; exit 4")
        self.assertEqual((r.returncode, d.returncode), (4, 4), r.stderr)
        jd, jr = json.loads(d.stdout), json.loads(r.stdout)
        jd.pop("duration_ms")
        jr.pop("duration_ms")
        self.assertEqual(jr, jd)

    def test_exec_timeout(self):
        r = self.same("exec", "--timeout", "1", *self.ident, "--", "sleep", "30")
        self.assertEqual(r.returncode, 124)
        self.assertIn(b"timed out after 1s", r.stderr)
        self.assertEqual(self.same("exec", *self.ident, "--", "true").returncode, 0)  # still running

    def test_exec_missing_computer(self):
        r = self.same("exec", "--ns", NS_A, "--agent", "agent", "--session", "nope", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no computer named", r.stderr)
        r = self.brig(self.host, "exec", "brig-nope", "--", "true")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no computer named brig-nope on the brig server", r.stderr)

    def test_token_refused(self):
        for tok in (None, "wrong" + TOK_A[5:]):
            r = self.brig(self.host, "exec", *self.ident, "--", "true", token=tok)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"the brig server refused the request", r.stderr)
            self.assertIn(b"BRIG_TOKEN", r.stderr)
            if tok:
                self.assertNotIn(tok.encode(), r.stderr + r.stdout)
        # another namespace's token sees nothing of NS_A
        r = self.brig(self.host, "exec", self.name, "--", "true", token=TOK_B)
        self.assertEqual(r.returncode, 125)
        self.assertNotIn(TOK_B.encode(), r.stderr)
        self.assertIn(b"no computer named", r.stderr)
        r = self.brig(self.host, "exec", self.name, "--", "true", token="secret\nX-Evil: 1")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"BRIG_TOKEN holds a line break", r.stderr)
        self.assertNotIn(b"secret", r.stderr)

    def test_host_forms(self):
        r = self.brig(None, "-H", self.host, "exec", self.name, "--", "echo", "via-H")
        self.assertEqual((r.returncode, r.stdout), (0, b"via-H\n"), r.stderr)
        for host, words in (("tcp://127.0.0.1:1", b"is not a brig server"),
                            ("brig+unix://relative", b"absolute socket path"),
                            ("brig+https://127.0.0.1:1", b"BRIG_CERT_PATH"),
                            ("brig+unix://" + self.srv.sock + ".none", b"cannot reach the brig server")):
            r = self.brig(host, "exec", self.name, "--", "true")
            self.assertEqual(r.returncode, 125, host)
            self.assertIn(words, r.stderr, host)
        # a Docker -H after BRIG_HOST talks to Docker directly
        r = self.brig("brig+unix://" + self.srv.sock + ".none", "-H", "unix:///var/run/docker.sock", "exec",
                      self.name, "--", "echo", "direct")
        self.assertEqual((r.returncode, r.stdout), (0, b"direct\n"), r.stderr)

    def test_ls_inspect_lifecycle(self):
        r = self.same("ls", "--label", LABEL)
        self.assertIn(self.name.encode(), r.stdout)
        self.same("ls", "--ns", NS_A, "-q")
        self.assertEqual(json.loads(self.same("ls", "--json", "--label", LABEL).stdout)[0]["name"], self.name)
        self.same("inspect", self.name)
        self.same("inspect", "--json", *self.ident)
        cid = json.loads(self.brig(None, "inspect", "--json", self.name).stdout)["id"]
        self.same("inspect", cid[:12])  # a container id, as direct takes it
        self.same("exec", cid, "--", "echo", "by-id")
        for verb in ("pause", "resume"):  # each of them once through the server, then direct
            for host in (self.host, None):
                r = self.brig(host, verb, self.name)
                self.assertEqual((r.returncode, r.stdout), (0, (self.name + "\n").encode()), r.stderr)
        r = self.brig(self.host, "pause", *self.ident)
        self.assertEqual((r.returncode, r.stdout), (0, (self.name + "\n").encode()), r.stderr)
        r = self.brig(self.host, "exec", self.name, "--", "true")
        self.assertEqual(r.returncode, 125)
        self.brig(self.host, "resume", *self.ident)
        self.assertEqual(self.same("destroy", "brig-nope").returncode, 1)
        self.assertEqual(self.same("destroy", "-f", "brig-nope").returncode, 0)
        self.assertEqual(self.same("destroy", "--ns", NS_A, "--agent", "agent", "--session", "nope").returncode, 1)
        for args in (["pause", "brig-nope"], ["inspect", "brig-nope"], ["pause"], ["stop", "x", *self.ident]):
            r = self.same(*args)
            self.assertEqual(r.returncode, 125, args)
        for args, words in ((["inspect", "--store", self.store, self.name], b"its own store"),
                            (["inspect", "--gen", "2", *self.ident], b"--gen does not go through a brig server")):
            r = self.brig(self.host, *args)
            self.assertEqual(r.returncode, 125)
            self.assertIn(words, r.stderr)

    def test_stop_destroy(self):
        p = self.brig(None, "up", "--ns", NS_A, "--agent", "agent", "--session", "gone", "--label", LABEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        name = p.stdout.decode().strip().splitlines()[-1]
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "gone"]
        r = self.brig(self.host, "stop", *ident)
        self.assertEqual((r.returncode, r.stdout.decode()), (0, name + "\n"), r.stderr)
        r = self.brig(self.host, "destroy", name)
        self.assertEqual((r.returncode, r.stdout.decode()), (0, name + "\n"), r.stderr)
        r = self.brig(self.host, "destroy", name)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"no such computer", r.stderr)

    def test_up(self):
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "upx"]
        r = self.brig(self.host, "up", *ident, "--label", LABEL, "--cpus", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.decode().strip()
        r = self.same("up", *ident)
        self.assertEqual((r.stdout.decode(), r.stderr.decode()),
                         (name + "\n", "brig: adopted generation 1 of %s/agent/upx (running)\n" % NS_A))
        self.same("up", "--json", *ident, "--label", LABEL, "--cpus", "1")
        self.assertEqual(self.same("up", *ident, "--cpus", "2").returncode, 125)  # the spec differs
        self.assertEqual(self.same("up", *ident, "--cpus", "999").returncode, 125)
        self.assertEqual(self.brig(self.host, "stop", name).returncode, 0)
        r = self.brig(self.host, "up", *ident, "--fresh")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotEqual(r.stdout.decode().strip(), name)
        self.assertIn(b"generation 2 starts EMPTY", r.stderr)
        r = self.brig(self.host, "up", *ident, "--store", self.store)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"its own store", r.stderr)

    def test_create(self):
        """brig create through the server: create's computer (in no store, any
        generation), with the same note and output as direct."""
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "crx"]
        spec = ["--gen", "3", "--label", LABEL, "--cpus", "1"]
        r = self.brig(self.host, "create", *ident, *spec)
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.decode().strip()
        try:
            r = self.same("create", *ident, *spec)
            self.assertEqual((r.stdout.decode(), r.stderr.decode()),
                             (name + "\n", "brig: adopted existing computer %s (running)\n" % name))
            j = json.loads(self.same("create", "--json", *ident, *spec).stdout)
            self.assertEqual((j["name"], j["generation"], j["cpus"] if "cpus" in j else j["spec"]["cpus"]),
                             (name, 3, 1.0), j)
            self.assertEqual(self.same("create", *ident, *spec, "--cpus", "2").returncode, 125)  # the spec differs
            for args in (["create"], ["create", "--ns", NS_A], ["create", *ident, "--gen", "0"],
                         ["create", *ident, "--cpus", "999"], ["create", *ident, "extra"],
                         ["create", *ident, "--secret", "BRIG_NOPE_UNSET@a.example.com", "--network", "egress"]):
                self.assertEqual(self.same(*args).returncode, 125, args)
            # in no store: sessions ls shows it neither way
            for host in (None, self.host):
                r = self.brig(host, "sessions", "ls", "--ns", NS_A)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn(b"crx", r.stdout)
            r = self.brig(self.host, "create", *ident, *spec, token=TOK_B)
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"does not cover", r.stderr)
            # no image chosen here (no --image, no BRIG_IMAGE): the server's
            r = self.brig(self.host, "create", "--json", *ident, "--label", LABEL, env={"BRIG_IMAGE": ""})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual((json.loads(r.stdout)["generation"], json.loads(r.stdout)["image"]), (1, IMAGE), r.stdout)
        finally:
            self.brig(None, "destroy", name)
            self.brig(None, "destroy", *ident)

    def test_checkpoint_export_import(self):
        """checkpoint export and import through the server: the archive direct
        export writes, imported into a session named or into its own, which
        recover then restores; errors as direct's."""
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "cpx"]
        cpd = {"BRIG_CHECKPOINT_DIR": os.path.join(self.tmpdir.name, "cp")}  # the server's, as its store
        r = self.brig(None, "up", *ident, "--label", LABEL, env=cpd)
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.decode().strip()
        d = tempfile.mkdtemp(prefix="brig-cpx-")
        try:
            self.assertEqual(self.brig(None, "exec", name, "--", "sh", "-c", "echo exported > f").returncode, 0)
            cp = self.brig(None, "checkpoint", name, env=cpd).stdout.split()[0].decode()
            for host, f in ((None, "direct"), (self.host, "remote")):
                r = self.brig(host, "checkpoint", "export", "-o", os.path.join(d, f), cp, env=cpd)
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""), host)
            arc = open(os.path.join(d, "remote"), "rb").read()
            self.assertEqual(arc, open(os.path.join(d, "direct"), "rb").read())
            self.assertEqual(os.stat(os.path.join(d, "remote")).st_mode & 0o777, 0o600)
            r = self.brig(self.host, "checkpoint", "export", cp)  # to stdout (not a terminal here)
            self.assertEqual((r.returncode, r.stdout), (0, arc), r.stderr)
            # into another session, through the server: its note and line as direct's
            other = ["--ns", NS_A, "--agent", "agent", "--session", "cpx2"]
            self.assertEqual(self.brig(self.host, "up", *other, "--label", LABEL).returncode, 0)  # a session to join
            r = self.brig(self.host, "checkpoint", "import", *other, os.path.join(d, "remote"))
            self.assertEqual(r.returncode, 0, r.stderr)
            new_id, digest = r.stdout.decode().split()
            self.assertEqual(r.stderr.decode(), "brig: imported checkpoint %s of %s/agent/cpx2 generation 1: brig "
                             "recover --ns %s --agent agent --session cpx2 restores it\n" % (new_id, NS_A, NS_A))
            j = json.loads(self.brig(self.host, "checkpoint", "import", "--json", *other, "-", input=arc).stdout)
            dj = json.loads(self.brig(None, "checkpoint", "import", "--json", *other, "-", input=arc, env=cpd).stdout)
            self.assertEqual(dj.pop("id"), j.pop("id") + 1)
            self.assertEqual(j, dj)
            self.assertEqual(self.brig(self.host, "stop", *other).returncode, 0)
            r = self.brig(self.host, "recover", *other)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.brig(self.host, "exec", *other, "--", "cat", "f")
            self.assertEqual((r.returncode, r.stdout), (0, b"exported\n"), r.stderr)
            # into its own session (no --ns): the archive's
            r = self.brig(self.host, "checkpoint", "import", os.path.join(d, "remote"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b" of %s/agent/cpx generation 1:" % NS_A.encode(), r.stderr)
            # refused as direct refuses, or as the server must
            for args in (["checkpoint", "export"], ["checkpoint", "export", "0"], ["checkpoint", "export", "x", "y"],
                         ["checkpoint", "import", "--ns", NS_A], ["checkpoint", "import", "a", "b"]):
                self.assertEqual(self.same(*args, env=cpd).returncode, 125, args)
            r = self.brig(self.host, "checkpoint", "export", "-o", os.path.join(d, "gone"), "999999999")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"checkpoint 999999999 not found in the brig server's store", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "gone")))  # never half an archive
            r = self.brig(self.host, "checkpoint", "export", "-o", os.path.join(d, "b"), cp, token=TOK_B)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"checkpoint %s not found in the brig server's store" % cp.encode(), r.stderr)
            r = self.brig(self.host, "checkpoint", "import", os.path.join(d, "remote"), token=TOK_B)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"does not cover namespace " + NS_A.encode(), r.stderr)
            open(os.path.join(d, "junk"), "wb").write(b"junk" * 300)
            for host in (None, self.host):
                r = self.brig(host, "checkpoint", "import", os.path.join(d, "junk"), env=cpd)
                self.assertEqual(r.returncode, 125, host)
                self.assertIn(b"not an export archive", r.stderr, host)
            for args in (["export", "-o", os.path.join(d, "s"), cp], ["import", os.path.join(d, "remote")]):
                r = self.brig(self.host, "checkpoint", *args, "--store", self.store)
                self.assertEqual(r.returncode, 125, args)
                self.assertIn(b"its own store is used", r.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)
            self.brig(None, "destroy", name)
            self.brig(None, "destroy", "--ns", NS_A, "--agent", "agent", "--session", "cpx2")

    def test_recorded_spec_policy(self):
        """A session's recorded spec holds to the server's policy whoever
        recorded it (here brig direct, on the server's store): what the server
        would make from it (up without flags, recover, MCP's tools) is refused
        with 403 policy, and nothing is made."""
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "pol"]
        r = self.brig(None, "up", *ident, "--label", LABEL, "--runtime", "runc")  # not --allow-runtime'd
        self.assertEqual(r.returncode, 0, r.stderr)
        name = r.stdout.decode().strip()
        try:
            self.assertEqual(self.brig(None, "stop", name).returncode, 0)
            why = "%s/agent/pol: its recorded spec: runtime: 'runc' is not allowed by this server" % NS_A
            for args in (["up", *ident], ["up", "--fresh", *ident], ["recover", *ident]):
                r = self.brig(self.host, *args)
                self.assertEqual((r.returncode, r.stdout), (125, b""), r.stderr)
                self.assertIn(why.encode(), r.stderr, args)
            c = PyClient(self.srv.sock)
            st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "pol"}, token=TOK_A)
            self.assertEqual((st, json.loads(b)["code"]), (403, "policy"), b)
            mp, hd = "/v1/mcp/%s/agent/pol" % NS_A, {"Accept": "application/json, text/event-stream"}
            st, h, b = c.call("POST", mp, body={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                token=TOK_A, headers=hd)
            self.assertEqual(st, 200, b)
            hd["Mcp-Session-Id"] = {k.lower(): v for k, v in h.items()}["mcp-session-id"]
            for n, tool in enumerate(({"name": "run", "arguments": {"command": "true"}},
                                      {"name": "recover", "arguments": {}})):
                st, _, b = c.call("POST", mp, body={"jsonrpc": "2.0", "id": 2 + n, "method": "tools/call",
                                                    "params": tool}, token=TOK_A, headers=hd)
                data = [json.loads(x[5:]) for x in b.decode().splitlines() if x.startswith("data:")]
                res = [d for d in (data or [json.loads(b)]) if d.get("id") == 2 + n][0]["result"]
                self.assertTrue(res["isError"], res)
                self.assertIn(why, res["content"][0]["text"], tool)
            c.call("DELETE", mp, token=TOK_A, headers=hd)
            r = self.brig(None, "sessions", "ls", "--ns", NS_A, "--json")  # still generation 1, stopped
            mine = [x for x in json.loads(r.stdout) if x["session"] == "pol"]
            self.assertEqual([(x["generation"], x["state"]) for x in mine], [(1, "stopped")], r.stdout)
        finally:
            self.brig(None, "destroy", name)

    def test_checkpoint_recover(self):
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "cpr"]
        p = self.brig(None, "up", *ident, "--label", LABEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        name = p.stdout.decode().strip()
        self.assertEqual(self.brig(self.host, "exec", name, "--", "sh", "-c", "echo kept > /workspace/f").returncode, 0)
        d = self.brig(None, "checkpoint", name)
        r = self.brig(self.host, "checkpoint", name)
        self.assertEqual((r.returncode, d.returncode), (0, 0), r.stderr)
        did, ddig = d.stdout.decode().split()
        rid, rdig = r.stdout.decode().split()
        self.assertEqual((int(rid), rdig), (int(did) + 1, ddig))  # same content, the next id
        self.assertEqual(r.stderr.decode().replace(" %s of " % rid, " %s of " % did), d.stderr.decode())
        dj = json.loads(self.brig(None, "checkpoint", "--json", *ident).stdout)
        rj = json.loads(self.brig(self.host, "checkpoint", "--json", *ident).stdout)
        for k in ("id", "created_ms"):
            self.assertGreater(rj.pop(k), dj.pop(k))
        self.assertEqual(rj, dj)
        # rm through the server: by id, one after another, errors said as direct
        extra = json.loads(self.brig(None, "checkpoint", "--json", *ident).stdout)["id"]
        r = self.brig(self.host, "checkpoint", "rm", str(extra), "999999999", str(did))
        self.assertEqual((r.returncode, r.stdout), (125, b"%d\n%d\n" % (extra, int(did))), r.stderr)
        self.assertEqual(r.stderr, b"brig: checkpoint 999999999 not found in the brig server's store\n")
        for host in (None, self.host):  # gone, both ways
            self.assertEqual(self.brig(host, "checkpoint", "rm", str(extra)).returncode, 125, host)
        for args in (["checkpoint", "rm"], ["checkpoint", "rm", "0"], ["checkpoint", "rm", "x"]):
            self.assertEqual(self.same(*args).returncode, 125, args)
        r = self.brig(self.host, "checkpoint", "rm", "--store", self.store, str(rid))
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"--store names a local store", r.stderr)
        # --keep through the server: the session keeps its newest two
        ids = lambda: [c["id"] for c in json.loads(self.brig(None, "checkpoints", "--json", *ident).stdout)]
        before = ids()
        self.assertEqual(len(before), 3)
        r = self.brig(self.host, "checkpoint", "--keep", "2", name)
        self.assertEqual(r.returncode, 0, r.stderr)
        kept = ids()
        self.assertEqual(kept, [int(r.stdout.split()[0]), before[0]], kept)
        for args in (["checkpoint", "--keep", "0", name], ["recover", "--checkpoint", "0", *ident]):
            self.assertEqual(self.same(*args).returncode, 125, args)
        # newer content in the latest checkpoint; recover --checkpoint picks the older one
        self.assertEqual(self.brig(None, "exec", name, "--", "sh", "-c", "echo newer > /workspace/f").returncode, 0)
        self.assertEqual(self.brig(None, "checkpoint", name).returncode, 0)
        r = self.same("recover", *ident)  # running: nothing to recover
        self.assertEqual(r.returncode, 125)
        self.assertEqual(self.brig(self.host, "stop", name).returncode, 0)
        main_cp = json.loads(self.brig(None, "checkpoint", "--json", self.name).stdout)["id"]
        for cp in ("999999999", str(main_cp)):  # no such checkpoint; another session's: refused, as direct
            r = self.same("recover", "--checkpoint", cp, *ident)
            self.assertEqual(r.returncode, 125, cp)
        # another namespace's checkpoint: through the server as if there were none (its session unnamed)
        bident = ["--ns", NS_B, "--agent", "agent", "--session", "cprb"]
        b = self.brig(None, "up", *bident, "--label", LABEL)
        self.assertEqual(b.returncode, 0, b.stderr)
        try:
            bcp = json.loads(self.brig(None, "checkpoint", "--json", *bident).stdout)["id"]
            r = self.brig(self.host, "recover", "--checkpoint", str(bcp), *ident)
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"no checkpoint %d in the store" % bcp, r.stderr)
            self.assertNotIn(NS_B.encode(), r.stderr)
            r = self.brig(self.host, "checkpoint", "rm", str(bcp))
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertEqual(r.stderr, b"brig: checkpoint %d not found in the brig server's store\n" % bcp)
            self.assertIn(bcp, [c["id"] for c in json.loads(self.brig(None, "checkpoints", "--json", *bident).stdout)])
        finally:
            self.brig(None, "sessions", "rm", "--force", "--checkpoints", *bident)
        r = self.brig(self.host, "recover", "--json", "--checkpoint", str(kept[1]), *ident)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["old_generation"], j["new_generation"], j["won"], j["checkpoint_id"]),
                         (1, 2, True, kept[1]))
        self.assertEqual(j["name"], j["computer"]["name"])
        self.assertIn(("recovered %s/agent/cpr into generation 2 from checkpoint %d" % (NS_A, kept[1]))
                      .encode(), r.stderr)
        r = self.brig(self.host, "exec", *ident, "--", "cat", "/workspace/f")
        self.assertEqual((r.returncode, r.stdout), (0, b"kept\n"), r.stderr)

    def test_exec_interrupt(self):
        e = dict(os.environ, BRIG_HOST=self.host, BRIG_TOKEN=TOK_A)
        p = subprocess.Popen([BRIG, "exec", self.name, "--", "sh", "-c", "echo started; sleep 77"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.assertEqual(p.stdout.readline(), b"started\n")  # streamed before the end
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn(b"exec interrupted; the brig server was told to end the command", err)
        for _ in range(50):  # the server cancelled it: brig-init ended the tree, the computer runs on
            r = self.brig(self.host, "exec", self.name, "--", "sh", "-c", "ps -eo args | grep -c '[s]leep 77'")
            if r.stdout == b"0\n":
                break
            time.sleep(0.1)
        self.assertEqual(r.stdout, b"0\n", r.stderr)

    def same_input(self, data, *args):
        """same() with data on stdin."""
        d = subprocess.run([BRIG] + list(args), input=data, capture_output=True, timeout=120,
                           env=dict(os.environ, BRIG_STORE=self.store, BRIG_IMAGE=IMAGE, BRIG_HOST="", BRIG_TOKEN=""))
        r = subprocess.run([BRIG] + list(args), input=data, capture_output=True, timeout=120,
                           env=dict(os.environ, BRIG_STORE=self.store, BRIG_IMAGE=IMAGE, BRIG_HOST=self.host,
                                    BRIG_TOKEN=TOK_A))
        self.assertEqual((r.returncode, r.stdout, r.stderr), (d.returncode, d.stdout, d.stderr), args)
        return r

    def test_exec_interactive(self):
        big = bytes(range(256)) * 700
        r = self.same_input(big, "exec", "-i", self.name, "--", "sh", "-c", "cat; echo err >&2; exit 5")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (5, big, b"err\n"))
        r = self.same_input(b"", "exec", "-i", *self.ident, "--", "wc", "-c")
        self.assertEqual(r.stdout.strip(), b"0")
        r = subprocess.run([BRIG, "exec", "-i", "--json", self.name, "--", "cat"], input=b"x\n", capture_output=True,
                           timeout=120, env=dict(os.environ, BRIG_HOST=self.host, BRIG_TOKEN=TOK_A))
        self.assertEqual((r.returncode, json.loads(r.stdout)["stdout"]["text"]), (0, "x\n"), r.stderr)
        r = self.same_input(b"", "exec", "-i", "--timeout", "1", self.name, "--", "sleep", "30")
        self.assertEqual(r.returncode, 124)
        r = self.same_input(b"", "exec", "-i", self.name, "--", "no-such-program")
        self.assertEqual(r.returncode, 127)

    def test_exec_tty(self):
        # no terminal here: 24x80 both ways, the output through a terminal (CRLF)
        r = self.same_input(b"", "exec", "-t", self.name, "--", "sh", "-c", "stty size; exit 3")
        self.assertEqual((r.returncode, r.stdout), (3, b"24 80\r\n"))
        r = self.same_input(b"hi\n", "exec", "-i", "-t", self.name, "--", "sh", "-c", "read x; echo got $x")
        self.assertIn(b"got hi\r\n", r.stdout)
        r = self.brig(self.host, "exec", "-t", self.name, "--", "tty")
        self.assertRegex(r.stdout, rb"^/dev/pts/\d+\r\n$")

    def in_pty(self, host, args, steps):
        """Runs brig with a pseudo-terminal as its stdin/stdout (stderr apart).
        steps: (wait_for bytes, action) pairs; action(master_fd, proc). Returns (rc, output, stderr)."""
        import fcntl
        import pty
        import select
        import struct
        import termios
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
        before = termios.tcgetattr(slave)
        e = dict(os.environ, BRIG_STORE=self.store, BRIG_IMAGE=IMAGE, BRIG_HOST=host or "",
                 BRIG_TOKEN=TOK_A if host else "")
        p = subprocess.Popen([BRIG] + list(args), stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=e)
        out = b""
        try:
            for want, act in steps:
                deadline = time.monotonic() + 30
                while want not in out:
                    self.assertLess(time.monotonic(), deadline, (want, out))
                    if select.select([master], [], [], 0.5)[0]:
                        out += os.read(master, 65536)
                act(master, p)
            rc = p.wait(60)
            err = p.stderr.read()
            while select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            # the terminal is given back as it was
            self.assertEqual(termios.tcgetattr(slave), before)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(master)
            os.close(slave)
        return rc, out, err

    def test_exec_tty_resize_and_ctrl_c(self):
        import fcntl
        import struct
        import termios

        def resize(m, p):
            fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 41, 123, 0, 0))
            p.send_signal(signal.SIGWINCH)

        # the size is polled until it changes, then a line is read
        cmd = ["exec", "-i", "-t", self.name, "--", "sh", "-c",
               "stty size; while [ \"$(stty size)\" = '30 90' ]; do sleep 0.05; done; stty size; read x; exit 6"]
        for host in (None, self.host):
            rc, out, err = self.in_pty(host, cmd, [(b"30 90", resize), (b"41 123", lambda m, p: os.write(m, b"go\r"))])
            self.assertEqual(rc, 6, (host, out, err))
            self.assertIn(b"41 123", out, host)
        # Ctrl-C is a byte for the remote terminal (raw mode): it ends the command there
        cmd = ["exec", "-i", "-t", self.name, "--", "sh", "-c", "echo ready; exec cat"]
        for host in (None, self.host):
            rc, out, err = self.in_pty(host, cmd, [(b"ready", lambda m, p: (time.sleep(0.3), os.write(m, b"\x03")))])
            self.assertEqual(rc, 130, (host, out, err))

    def test_exec_interactive_interrupt(self):
        e = dict(os.environ, BRIG_HOST=self.host, BRIG_TOKEN=TOK_A)
        p = subprocess.Popen([BRIG, "exec", "-i", self.name, "--", "sh", "-c", "echo started; sleep 78"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
        self.assertEqual(p.stdout.readline(), b"started\n")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn(b"exec interrupted; the brig server was told to end the command", err)
        for _ in range(50):
            r = self.brig(self.host, "exec", self.name, "--", "sh", "-c", "ps -eo args | grep -c '^[s]leep 78'")
            if r.stdout == b"0\n":
                break
            time.sleep(0.1)
        self.assertEqual(r.stdout, b"0\n", r.stderr)

    def test_cp(self):
        """brig cp through the server: a tree in and out (binary, nested, an
        inner link), tar streams both ways, the session flags, and what is
        refused — as brig cp direct, but written and read by brig-init as
        the sandbox's user."""
        name, h = self.name, self.host
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "tree")
            os.makedirs(os.path.join(src, "sub", "deeper"))
            blob = os.urandom(3 << 20) + b"\0\xff"
            with open(os.path.join(src, "blob.bin"), "wb") as f:
                f.write(blob)
            with open(os.path.join(src, "sub", "deeper", "note.txt"), "w") as f:
                f.write("nested\n")
            os.symlink("sub/deeper/note.txt", os.path.join(src, "link"))
            r = self.brig(h, "cp", src, name + ":cptree")
            self.assertEqual(r.returncode, 0, r.stderr)
            # What landed, seen directly: the same bytes, the sandbox's user.
            r = self.brig(None, "exec", name, "--", "sh", "-c",
                          "cd /workspace/cptree && sha256sum blob.bin && cat link && stat -c '%u:%g' blob.bin sub")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = r.stdout.decode()
            self.assertIn(hashlib.sha256(blob).hexdigest(), out)
            self.assertIn("nested\n", out)
            self.assertEqual(out.count("1000:1000"), 2, out)
            # Out again, into a new directory: the same tree.
            back = os.path.join(tmp, "back")
            r = self.brig(h, "cp", name + ":/workspace/cptree", back)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(back, "blob.bin"), "rb") as f:
                self.assertEqual(f.read(), blob)
            self.assertEqual(os.readlink(os.path.join(back, "link")), "sub/deeper/note.txt")
            with open(os.path.join(back, "sub", "deeper", "note.txt")) as f:
                self.assertEqual(f.read(), "nested\n")
            # Into an existing directory: under its own name; once there, it
            # is not merged into (as direct).
            r = self.brig(h, "cp", name + ":/workspace/cptree", back)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isfile(os.path.join(back, "cptree", "blob.bin")))
            r = self.same("cp", name + ":/workspace/cptree", back)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"does not merge", r.stderr)
            # Tar streams, by the session flags.
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as t:
                ti = tarfile.TarInfo("streamed.txt")
                data = b"from a tar on stdin\n"
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            r = self.brig(h, "cp", *self.ident, "-", ":/workspace", input=buf.getvalue())
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.brig(h, "cp", *self.ident, ":streamed.txt", "-")
            self.assertEqual(r.returncode, 0, r.stderr)
            with tarfile.open(fileobj=io.BytesIO(r.stdout)) as t:
                self.assertEqual(t.getnames(), ["streamed.txt"])
                self.assertEqual(t.extractfile("streamed.txt").read(), data)
            # A link the sandbox points outside the copy refuses the copy;
            # the destination stays as it was (absent).
            r = self.brig(None, "exec", name, "--", "sh", "-c",
                          "mkdir -p /workspace/evil && ln -sf /etc/passwd /workspace/evil/pw")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.brig(h, "cp", name + ":/workspace/evil", os.path.join(tmp, "evil"))
            self.assertEqual(r.returncode, 125, r.stderr)
            self.assertFalse(os.path.lexists(os.path.join(tmp, "evil")))
            self.assertEqual([n for n in os.listdir(tmp) if n.startswith(".brig-cp")], [])
            # Missing source, a read-only destination, no such computer.
            r = self.brig(h, "cp", name + ":/workspace/nosuch", os.path.join(tmp, "x"))
            self.assertEqual(r.returncode, 125)
            self.assertEqual(r.stderr, b"brig: /workspace/nosuch: No such file or directory\n")
            r = self.brig(h, "cp", os.path.join(src, "blob.bin"), name + ":/etc/blob.bin")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"/etc", r.stderr)
            r = self.brig(h, "cp", os.path.join(src, "blob.bin"), "nosuchcomputer:/workspace/x")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"no computer named nosuchcomputer", r.stderr)
            r = self.brig(h, "cp", os.path.join(src, "blob.bin"), name + ":x", token="wrong")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"BRIG_TOKEN", r.stderr)

    # ---- brig fs: the native file routes, the direct path's calls on brig-init ----

    def sh(self, script):
        """script in the computer, run directly (to lay out files)."""
        r = self.brig(None, "exec", self.name, "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def same_after(self, setup, *args, input=None):
        """For a verb that changes what it touches: args direct and through
        the server, each after setup (a script run directly in the computer),
        with the same exit code, stdout and stderr."""
        self.sh(setup)
        d = self.brig(None, *args, input=input)
        self.sh(setup)
        r = self.brig(self.host, *args, input=input)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (d.returncode, d.stdout, d.stderr), args)
        return r

    def test_fs_read(self):
        """ls, cat and stat through the server: the same bytes and words as
        direct, for a tree with a link and a fifo, a binary file written
        through the server and read back in several pages, and the errors."""
        name, h = self.name, self.host
        self.sh("rm -rf /workspace/fst && mkdir -p /workspace/fst/sub/deeper && echo nested > "
                "/workspace/fst/sub/deeper/note.txt && ln -s sub/deeper/note.txt /workspace/fst/link && "
                "mkfifo /workspace/fst/fifo && : > /workspace/fst/empty")
        # A binary file bigger than one read page (1 MiB), in through stdin.
        blob = os.urandom(3 << 20) + b"\0\xff\n"
        r = self.brig(h, "fs", "write", name, "fst/sub/blob.bin", input=blob)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
        self.assertEqual(self.sh("sha256sum /workspace/fst/sub/blob.bin").split()[0],
                         hashlib.sha256(blob).hexdigest().encode())
        self.assertEqual(self.same("fs", "cat", name, "fst/sub/blob.bin").stdout, blob)
        # Exactly one page: the read ends on an empty page.
        page = os.urandom(1 << 20)
        self.assertEqual(self.brig(h, "fs", "write", name, "/workspace/fst/page.bin", input=page).returncode, 0)
        r = self.same("fs", "cat", name, "fst/page.bin", "fst/empty", "fst/sub/deeper/note.txt")
        self.assertEqual((r.returncode, r.stdout), (0, page + b"nested\n"))
        r = self.same("fs", "ls", name, "fst")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rb"(?m)^prw-r--r-- +1000 +1000 +0 .* fifo$")
        self.assertRegex(r.stdout, rb"(?m)^lrwxrwxrwx .* link -> sub/deeper/note\.txt$")
        r = self.same("fs", "ls", "--json", name, "/workspace/fst")
        entries = {e["name"]: e for e in json.loads(r.stdout)}
        self.assertEqual(entries["link"]["link"], "sub/deeper/note.txt")
        self.assertEqual((entries["sub"]["type"], entries["fifo"]["type"]), ("dir", "fifo"))
        r = self.same("fs", "ls", "-r", name, "fst")
        self.assertIn(b" sub/deeper/note.txt\n", r.stdout)
        self.assertIn(b" sub/blob.bin\n", r.stdout)
        self.same("fs", "ls", "--depth", "2", "--json", *self.ident, "fst")
        self.same("fs", "ls", name, "fst/link")  # a file: the link itself
        self.same("fs", "ls", name, "/etc/hostname")
        r = self.same("fs", "stat", name, "fst/sub/blob.bin")
        self.assertIn(b"size:  %d\n" % len(blob), r.stdout)
        self.assertIn(b"mode:  0644 (-rw-r--r--)\n", r.stdout)
        st = json.loads(self.same("fs", "stat", "--json", name, "fst/link").stdout)
        self.assertEqual((st["type"], st["link"], st["path"]),
                         ("symlink", "sub/deeper/note.txt", "/workspace/fst/link"))
        self.same("fs", "stat", "--json", *self.ident, "/runtime")
        # Outside the writable mounts reads work; what uid 1000 may not read fails alike.
        self.assertTrue(self.same("fs", "cat", name, "/etc/passwd").stdout)
        for args, words in ((["cat", name, "fst/nope"], b"brig: read /workspace/fst/nope: read /workspace/fst/nope: "
                                                        b"No such file or directory\n"),
                            (["cat", name, "fst/page.bin", "fst/nope", "fst/empty"], b"No such file or directory"),
                            (["cat", name, "fst/sub"], b"Is a directory"),
                            (["ls", name, "/workspace/nope"], b"brig: stat /workspace/nope: stat /workspace/nope: "
                                                             b"No such file or directory\n"),
                            (["ls", "--json", name, "/root"], b"Permission denied"),
                            (["stat", name, "nope"], b"No such file or directory"),
                            (["ls", name, "fst/sub/blob.bin/x"], b"Not a directory")):
            r = self.same("fs", *args)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(words, r.stderr, args)
        self.assertEqual(self.same("fs", "cat", name, "fst/page.bin", "fst/nope").stdout, page)

    def test_fs_change(self):
        """write, mkdir, rm and mv through the server: each direct and through
        the server from the same start, the same outcome and words."""
        name, h = self.name, self.host
        clean = "rm -rf /workspace/fsc /runtime/fsc.txt"
        # write: stdin whole, the mode, parents only with -p
        r = self.same_after(clean, "fs", "write", name, "fsc/a/f.txt", input=b"x")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"write /workspace/fsc/a/f.txt: No such file or directory", r.stderr)
        data = bytes(range(256)) * 1000
        r = self.same_after(clean, "fs", "write", "-p", "-m", "600", name, "fsc/a/f.txt", input=data)
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(self.brig(None, "fs", "cat", name, "fsc/a/f.txt").stdout, data)
        self.assertIn(b"mode:  0600 (-rw-------)\n", self.same("fs", "stat", name, "fsc/a/f.txt").stdout)
        r = self.same_after("mkdir -p /workspace/fsc && echo old > /workspace/fsc/g", "fs", "write", *self.ident,
                            "/workspace/fsc/g", input=b"")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.brig(None, "fs", "cat", name, "fsc/g").stdout, b"")
        self.assertEqual(self.same_after(clean, "fs", "write", name, "/runtime/fsc.txt", input=b"rt").returncode, 0)
        for path in ("/etc/fsc", "/fsc", "/workspace"):  # outside /workspace and /runtime, or onto a mount
            r = self.same_after(clean, "fs", "write", name, path, input=b"no")
            self.assertEqual(r.returncode, 125, path)
            self.assertIn(b"only /workspace and /runtime are writable in a computer", r.stderr, path)
        # mkdir: -p and -m, an existing one, a missing parent, outside
        r = self.same_after(clean, "fs", "mkdir", name, "fsc/d/e")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"mkdir /workspace/fsc/d/e: No such file or directory", r.stderr)
        r = self.same_after(clean, "fs", "mkdir", "-p", "-m", "700", name, "fsc/d/e", "fsc/x")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"mode:  0700 (drwx------)\n", self.same("fs", "stat", name, "fsc/d/e").stdout)
        r = self.same_after("mkdir -p /workspace/fsc/d", "fs", "mkdir", name, "fsc/d")
        self.assertIn(b"File exists", r.stderr)
        self.assertEqual(self.same_after("mkdir -p /workspace/fsc/d", "fs", "mkdir", "-p", name, "fsc/d").returncode, 0)
        r = self.same_after(clean, "fs", "mkdir", name, "/usr/fsc")
        self.assertIn(b"only /workspace and /runtime are writable", r.stderr)
        # rm: a file, a directory with and without -r, a missing one (the
        # ones before it go), outside
        tree = clean + " && mkdir -p /workspace/fsc/d/e && echo f > /workspace/fsc/d/e/f && echo g > /workspace/fsc/g"
        self.assertEqual(self.same_after(tree, "fs", "rm", name, "fsc/g").returncode, 0)
        self.assertEqual(self.sh("ls /workspace/fsc"), b"d\n")
        r = self.same_after(tree, "fs", "rm", name, "fsc/d")
        self.assertEqual(r.returncode, 125)
        self.assertEqual(r.stderr, b"brig: fs rm /workspace/fsc/d: the directory is not empty (rm -r removes it "
                                   b"and its contents)\n")
        self.assertEqual(self.same_after(tree, "fs", "rm", "-r", name, "fsc/d", "fsc/g").returncode, 0)
        self.assertEqual(self.sh("ls -A /workspace/fsc"), b"")
        r = self.same_after(tree, "fs", "rm", name, "fsc/g", "fsc/nope", "fsc/d/e/f")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"remove /workspace/fsc/nope: No such file or directory", r.stderr)
        self.assertEqual(self.sh("ls /workspace/fsc /workspace/fsc/d/e"),
                         b"/workspace/fsc:\nd\n\n/workspace/fsc/d/e:\nf\n")
        r = self.same_after(tree, "fs", "rm", name, "/etc/hostname")
        self.assertIn(b"fs rm /etc/hostname: read-only file system: only /workspace and /runtime", r.stderr)
        # mv: a rename (onto an existing file too), a missing source, across mounts
        self.assertEqual(self.same_after(tree, "fs", "mv", name, "fsc/g", "fsc/d/h").returncode, 0)
        self.assertEqual(self.sh("cat /workspace/fsc/d/h; ls /workspace/fsc"), b"g\nd\n")
        self.assertEqual(self.same_after(tree, "fs", "mv", *self.ident, "fsc/g", "fsc/d/e/f").returncode, 0)
        self.assertEqual(self.sh("cat /workspace/fsc/d/e/f"), b"g\n")
        r = self.same_after(tree, "fs", "mv", name, "fsc/nope", "fsc/x")
        self.assertIn(b"rename /workspace/fsc/nope: No such file or directory", r.stderr)
        r = self.same_after(tree, "fs", "mv", name, "fsc/g", "/runtime/g")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"fs mv /workspace/fsc/g: the source and the destination are on different mounts", r.stderr)
        self.sh(clean)

    def test_fs_refused(self):
        """Usage errors and missing computers as direct; what only the server
        refuses: a write larger than it takes, a '..' path, --store, a name it
        does not list."""
        name, h = self.name, self.host
        for args in (["fs"], ["fs", "bogus"], ["fs", "ls"], ["fs", "ls", name], ["fs", "mv", name, "a"],
                     ["fs", "stat", name, "a", "b"], ["fs", "cat", "--json", name, "a"], ["fs", "ls", "-p", name, "a"],
                     ["fs", "rm", "--depth", "2", name, "a"], ["fs", "write", "-m", "99", name, "a"],
                     ["fs", "ls", "--depth", "65", name, "a"], ["fs", "ls", "--nope", name, "a"],
                     ["fs", "ls", "--ns", NS_A, "/"], ["fs", "ls", *self.ident, name, "/"],
                     ["fs", "ls", "--ns", NS_A, "--agent", "agent", "--session", "nope", "/"]):
            r = self.same(*args)
            self.assertEqual(r.returncode, 125, args)
            self.assertTrue(r.stderr.startswith(b"brig: "), args)
        self.assertEqual(self.same("fs", "--help").returncode, 0)
        r = self.brig(h, "fs", "write", name, "fsbig", input=b"\0" * ((8 << 20) + 1))
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"stdin holds more than 8388608 bytes, the most a brig server writes at once", r.stderr)
        self.assertEqual(self.brig(None, "fs", "stat", name, "fsbig").returncode, 125)  # nothing was written
        r = self.brig(h, "fs", "stat", name, "../etc/passwd")
        self.assertEqual((r.returncode, r.stderr), (125, b"brig: path holds a '..' component\n"))
        r = self.brig(h, "fs", "ls", "brig-nope", "/")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"no computer named brig-nope on the brig server", r.stderr)
        r = self.brig(h, "fs", "ls", "--store", self.store, *self.ident, "/")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"--store names a local store", r.stderr)
        r = self.brig(h, "fs", "ls", name, "/", token="wrong")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"BRIG_TOKEN", r.stderr)
        # another namespace's computer, named by its session: the server's refusal
        r = self.brig(h, "fs", "rm", *self.ident, "x", token=TOK_B)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"the token does not cover this namespace", r.stderr)
        self.assertNotIn(b"writable", r.stderr)

    # ---- the session store through the server: checkpoints, history, sessions ls ----

    forgotten_ident = ["--ns", NS_A, "--agent", "agent", "--session", "fgt"]

    def forgotten(self):
        """A session removed from the store whose checkpoint stays (made once)."""
        if getattr(CliClient, "_forgotten", False):
            return
        p = self.brig(None, "up", *self.forgotten_ident, "--label", LABEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.brig(None, "checkpoint", *self.forgotten_ident).returncode, 0)
        p = self.brig(None, "sessions", "rm", "--force", *self.forgotten_ident)
        self.assertEqual(p.returncode, 0, p.stderr)
        CliClient._forgotten = True

    def test_checkpoints(self):
        # none yet: the header alone
        r = self.same("checkpoints", "--ns", NS_A, "--agent", "agent", "--session", "nocp")
        self.assertEqual((r.returncode, r.stdout.split(b"\n")[0].split(), r.stdout.count(b"\n")),
                         (0, [b"ID", b"GEN", b"DIGEST", b"ARCHIVED", b"STORED", b"CREATED"], 1))
        self.assertEqual(self.same("checkpoints", "--json", "--ns", NS_A, "--agent", "agent", "--session",
                                   "nocp").stdout, b"[]\n")
        p = self.brig(None, "checkpoint", *self.ident)
        self.assertEqual(p.returncode, 0, p.stderr)
        cid, digest = p.stdout.decode().split()
        r = self.same("checkpoints", *self.ident)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(cid.encode(), [line.split()[0] for line in r.stdout.splitlines()[1:]])
        r = self.same("checkpoints", "--json", *self.ident)
        mine = [c for c in json.loads(r.stdout) if c["id"] == int(cid)]
        self.assertEqual((mine[0]["digest"], mine[0]["ns"], mine[0]["session"]), (digest, NS_A, "cli"))
        self.assertTrue(mine[0]["blob"].startswith(digest), mine[0])  # its name, as direct
        self.assertEqual(self.same("checkpoints", "--ns", NS_A).returncode, 125)  # usage, as direct
        r = self.brig(self.host, "checkpoints", "--store", self.store, *self.ident)
        self.assertEqual((r.returncode, r.stderr), (125, b"brig: --store names a local store; through a brig "
                                                          b"server its own store is used\n"))

    def test_history(self):
        for host in (None, self.host, None):  # by the OS user and by the token
            self.assertEqual(self.brig(host, "exec", self.name, "--", "echo", "hist").returncode, 0)
        self.assertEqual(self.brig(None, "checkpoint", *self.ident).returncode, 0)
        self.assertEqual(self.brig(self.host, "exec", self.name, "--", "sh", "-c", "exit 7").returncode, 7)
        r = self.same("history", *self.ident)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(("# %s/agent/cli: generation " % NS_A).encode()), r.stdout)
        events = [line.split()[3] for line in r.stdout.splitlines()[2:]]
        self.assertIn(b"checkpoint", events)
        self.assertGreaterEqual(events.count(b"exec"), 4)
        self.assertTrue(r.stdout.endswith(b": sh -c exit 7\n"), r.stdout)  # oldest first
        j = json.loads(self.same("history", "--json", *self.ident).stdout)
        self.assertEqual((j["session"]["container_name"], j["commands"][-1]["exit_code"]), (self.name, 7))
        self.assertTrue(j["session"]["container_id"])
        self.assertIn("serve token, line 2", [x["actor"] for x in j["commands"]])
        r = self.same("history", "--limit", "2", *self.ident)
        self.assertEqual([line.split()[3] for line in r.stdout.splitlines()[2:]].count(b"exec"), 2)
        j = json.loads(self.same("history", "--json", "--limit", "1", *self.ident).stdout)
        self.assertEqual([x["argv"] for x in j["commands"]], [["sh", "-c", "exit 7"]])
        self.same("history", "--limit", "20000", *self.ident)  # past the server's most per request
        # a removed session: its commands and kept checkpoints
        self.forgotten()
        r = self.same("history", *self.forgotten_ident)
        self.assertIn(b"removed from the store", r.stdout.splitlines()[0])
        self.assertEqual(json.loads(self.same("history", "--json", *self.forgotten_ident).stdout)["session"], None)
        # no such session: the message names whose store
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "nohist"]
        d, r = self.brig(None, "history", *ident), self.brig(self.host, "history", *ident)
        self.assertEqual((d.returncode, d.stdout, r.returncode, r.stdout), (125, b"", 125, b""))
        self.assertEqual(d.stderr, ("brig: no session %s/agent/nohist in the store (%s) and no command recorded "
                                    "for it\n" % (NS_A, self.store)).encode())
        self.assertEqual(r.stderr, ("brig: no session %s/agent/nohist in the brig server's store and no command "
                                    "recorded for it\n" % NS_A).encode())
        self.assertEqual(self.same("history", "--limit", "0", *self.ident).returncode, 125)
        r = self.brig(self.host, "history", "--store", self.store, *self.ident)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"its own store", r.stderr)

    def test_sessions_ls(self):
        self.forgotten()
        r = self.same("sessions", "ls", "--ns", NS_A)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {line.split()[2]: line.split() for line in r.stdout.splitlines()[1:]}
        self.assertEqual(rows[b"cli"][4:6], [b"running", b"running"])
        self.assertEqual(rows[b"fgt"][4:6], [b"forgotten", b"-"])
        self.assertIn(b"brig: forgotten: the session's record was removed", r.stderr)
        j = json.loads(self.same("sessions", "ls", "--json", "--ns", NS_A).stdout)
        cli = [x for x in j if x["session"] == "cli"][0]
        cid = json.loads(self.brig(None, "inspect", "--json", self.name).stdout)["id"]
        self.assertEqual((cli["container_name"], cli["container_id"], cli["computer_state"]),
                         (self.name, cid, "running"))
        fgt = [x for x in j if x["session"] == "fgt"][0]
        self.assertEqual((fgt["state"], fgt["checkpoints"]), ("forgotten", 1))
        # every namespace: a token of all of them sees what the store has
        self.same("sessions", "ls", env={"BRIG_TOKEN": TOK_ALL})
        self.same("sessions", "ls", "--json", env={"BRIG_TOKEN": TOK_ALL})
        self.assertEqual(self.same("sessions", "ls", "--ns", "bad ns").returncode, 125)
        r = self.brig(self.host, "sessions", "ls", "--store", self.store)
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"its own store", r.stderr)

    def test_sessions_ls_lost_computer(self):
        """A computer removed (or killed) behind the store's back: the store is
        put right, with a note. The first run of a pair would fix what the
        second sees, so each run is checked against the words on its own,
        then a pair compared once nothing is left to fix."""
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "lost"]

        def lose(how):
            p = self.brig(None, "up", *ident, "--fresh", "--label", LABEL)
            self.assertEqual(p.returncode, 0, p.stderr)
            name = p.stdout.decode().strip().splitlines()[-1]
            gen = json.loads(self.brig(None, "inspect", "--json", name).stdout)["generation"]
            subprocess.run(["docker"] + how + [name], check=True, capture_output=True)
            return name, gen

        for host in (self.host, None):
            for how, computer, now in ((["rm", "-f", "-v"], "gone", "destroyed"), (["kill"], "exited", "stopped")):
                name, gen = lose(how)
                note = ("brig: %s/agent/lost: the store said running, but its computer %s is %s (its files are "
                        "gone): recorded as %s; `brig up` restores its latest checkpoint\n" % (NS_A, name, computer,
                                                                                               now))
                r = self.brig(host, "sessions", "ls", "--ns", NS_A)
                self.assertEqual(r.returncode, 0, (host, r.stderr))
                lost = [line for line in r.stderr.decode().splitlines(True) if "/agent/lost:" in line]
                self.assertEqual(lost, [note], host)
                row = [line.split() for line in r.stdout.decode().splitlines() if line.split()[2] == "lost"]
                self.assertEqual(row[0][3:6], [str(gen), now, computer], (host, r.stdout))
                r = self.brig(host, "sessions", "ls", "--json", "--ns", NS_A)  # put right once: no note again
                self.assertNotIn(b"/agent/lost:", r.stderr, host)
                j = [x for x in json.loads(r.stdout) if x["session"] == "lost"][0]
                self.assertEqual((j["state"], j["computer_state"], j["container_name"]), (now, computer, name))
        name, _ = lose(["kill"])
        r = self.brig(self.host, "sessions", "ls", "--json", "--ns", NS_A)
        self.assertIn(b"/agent/lost: the store said running, but its computer %s is exited" % name.encode(), r.stderr)
        self.assertEqual([x["state"] for x in json.loads(r.stdout) if x["session"] == "lost"], ["stopped"])
        self.same("sessions", "ls", "--ns", NS_A)
        self.same("sessions", "ls", "--json", "--ns", NS_A)

    def rm_up(self, ident):
        """A session of its own with a computer: its name and generation."""
        p = self.brig(None, "up", *ident, "--label", LABEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        name = p.stdout.decode().strip().splitlines()[-1]
        return name, json.loads(self.brig(None, "inspect", "--json", name).stdout)["generation"]

    def rm_cleanup(self, ident):
        self.brig(None, "sessions", "rm", "--force", "--checkpoints", *ident)

    def test_sessions_rm(self):
        """sessions rm direct and through the server, each on a session of its
        own: the same words (its names aside) and exit codes, and the same done."""
        runs = {}
        for host, sess in ((None, "rmd"), (self.host, "rmr")):
            ident = ["--ns", NS_A, "--agent", "agent", "--session", sess]
            what = "%s/agent/%s" % (NS_A, sess)
            out = []
            try:
                name, gen = self.rm_up(ident)
                self.assertEqual(self.brig(None, "checkpoint", *ident).returncode, 0)
                # a computer and no --force: refused, nothing removed
                r = self.brig(host, "sessions", "rm", *ident)
                self.assertEqual((r.returncode, r.stdout, r.stderr),
                                 (125, b"", ("brig: session %s still has computer %s (generation %d, running): "
                                             "destroy it first, or pass --force to destroy it with the session; "
                                             "nothing was removed\n" % (what, name, gen)).encode()), host)
                out.append(r)
                self.assertEqual(self.brig(None, "inspect", name).returncode, 0, host)
                self.assertEqual(len(json.loads(self.brig(None, "checkpoints", "--json", *ident).stdout)), 1)
                # --force: the computer destroyed, the checkpoint kept
                r = self.brig(host, "sessions", "rm", "--force", *ident)
                self.assertEqual((r.returncode, r.stdout), (0, ("%s\n" % what).encode()), (host, r.stderr))
                self.assertEqual(r.stderr, ("brig: destroyed %s (generation %d)\nbrig: kept 1 checkpoint of %s "
                                            "(`brig checkpoints` lists them; the next `brig up` restores the "
                                            "latest; `brig sessions rm --checkpoints` removes them)\n"
                                            % (name, gen, what)).encode(), host)
                out.append(r)
                self.assertNotEqual(self.brig(None, "inspect", name).returncode, 0, host)
                ls = self.brig(None, "sessions", "ls", "--json", "--ns", NS_A).stdout
                self.assertEqual([x["state"] for x in json.loads(ls) if x["session"] == sess], ["forgotten"])
                # no such session now
                r = self.brig(host, "sessions", "rm", "--force", *ident)
                self.assertEqual((r.returncode, r.stdout), (125, b""), host)
                words = "the brig server's store\n" if host else "store %s" % self.store
                self.assertTrue(r.stderr.startswith(("brig: sessions rm: session %s not found in %s"
                                                     % (what, words)).encode()), (host, r.stderr))
                # up restores it; --force --checkpoints removes the checkpoint too
                name2, gen2 = self.rm_up(ident)
                r = self.brig(host, "sessions", "rm", "--force", "--checkpoints", *ident)
                self.assertEqual((r.returncode, r.stdout), (0, ("%s\n" % what).encode()), (host, r.stderr))
                self.assertEqual(r.stderr, ("brig: destroyed %s (generation %d)\nbrig: removed 1 checkpoint of %s\n"
                                            % (name2, gen2, what)).encode(), host)
                out.append(r)
                self.assertEqual(self.brig(None, "checkpoints", "--json", *ident).stdout, b"[]\n")
                ls = self.brig(None, "sessions", "ls", "--json", "--ns", NS_A).stdout
                self.assertEqual([x for x in json.loads(ls) if x["session"] == sess], [])
                # nothing left: --checkpoints alone has nothing to say but the name
                self.rm_up(ident)
                self.assertEqual(self.brig(None, "destroy", *ident).returncode, 0)
                r = self.brig(host, "sessions", "rm", "--checkpoints", *ident)
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, ("%s\n" % what).encode(), b""), host)
                out.append(r)
                runs[sess] = [(x.returncode, x.stdout.replace(sess.encode(), b"S"),
                               re.sub(rb"brig-[0-9a-f]+", b"NAME", x.stderr.replace(sess.encode(), b"S")))
                              for x in out]
            finally:
                self.rm_cleanup(ident)
        self.assertEqual(runs["rmr"], runs["rmd"])

    def test_sessions_rm_refused(self):
        """Usage errors as direct; --store and another namespace's token refused,
        nothing removed."""
        ident = ["--ns", NS_A, "--agent", "agent", "--session", "rmb"]
        try:
            name, _ = self.rm_up(ident)
            for args in (["sessions"], ["sessions", "nope"], ["sessions", "rm", "--ns", NS_A],
                         ["sessions", "rm", "--ns", "bad ns", "--agent", "a", "--session", "s"],
                         ["sessions", "rm", "--force", *ident, "extra"]):
                self.assertEqual(self.same(*args).returncode, 125, args)
            r = self.brig(self.host, "sessions", "rm", "--force", "--store", self.store, *ident)
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (125, b"", b"brig: --store names a local store; through a brig server its own store "
                                        b"is used\n"))
            for args in (["--force", "--checkpoints", *ident], ident,
                         ["--ns", NS_A, "--agent", "agent", "--session", "nope"]):
                r = self.brig(self.host, "sessions", "rm", *args, token=TOK_B)
                self.assertEqual((r.returncode, r.stdout, r.stderr),
                                 (125, b"", b"brig: the token does not cover this namespace\n"), args)
            self.assertEqual(self.brig(None, "inspect", name).returncode, 0)
            ls = self.brig(None, "sessions", "ls", "--json", "--ns", NS_A).stdout
            self.assertEqual([x["state"] for x in json.loads(ls) if x["session"] == "rmb"], ["running"])
            # unknown session: the direct words name the local store, the server's its own
            nope = ["--ns", NS_A, "--agent", "agent", "--session", "nope"]
            d, r = self.brig(None, "sessions", "rm", *nope), self.brig(self.host, "sessions", "rm", *nope)
            self.assertEqual((d.returncode, d.stdout, r.returncode, r.stdout), (125, b"", 125, b""))
            self.assertTrue(d.stderr.startswith(("brig: sessions rm: session %s/agent/nope not found in store "
                                                 % NS_A).encode()), d.stderr)
            self.assertEqual(r.stderr, ("brig: sessions rm: session %s/agent/nope not found in the brig server's "
                                        "store\n" % NS_A).encode())
        finally:
            self.rm_cleanup(ident)

    def test_store_other_namespace(self):
        """A token of namespace B sees nothing of A's sessions, history or checkpoints."""
        self.forgotten()
        for args in (["checkpoints", *self.ident], ["checkpoints", "--json", *self.ident], ["history", *self.ident],
                     ["history", "--json", *self.forgotten_ident], ["sessions", "ls", "--ns", NS_A]):
            r = self.brig(self.host, *args, token=TOK_B)
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (125, b"", b"brig: the token does not cover this namespace\n"), args)
        for args in (["sessions", "ls"], ["sessions", "ls", "--json"], ["sessions", "ls", "--ns", NS_B]):
            r = self.brig(self.host, *args, token=TOK_B)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn(NS_A.encode(), r.stdout + r.stderr, args)
            self.assertNotIn(b"forgotten", r.stdout + r.stderr, args)
        d = self.brig(None, "sessions", "ls", "--ns", NS_A)  # A's are there
        self.assertIn(NS_A.encode(), d.stdout)

    def procs(self):
        """brig-init's commands in the computer by id, read directly."""
        r = self.brig(None, "ps", "--json", self.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {p["id"]: p for p in json.loads(r.stdout)}

    def wait_exited(self, pid):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            p = self.procs().get(pid)
            if p and p["state"] == "exited":
                return p
            time.sleep(0.2)
        self.fail("command %d did not end" % pid)

    def start(self, host, *cmd):
        r = self.brig(host, "exec", "-d", self.name, "--", *cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rb"^[1-9][0-9]*\n$")
        return int(r.stdout)

    # ---- brig run through the server (POST /v1/runs/attach) ----

    RUN = ("run", "--ns", NS_A, "--label", LABEL)

    def run_containers(self):
        """The runs' containers still there (each run labels its own with LABEL)."""
        return subprocess.run(["docker", "ps", "-aq", "--filter", "label=" + LABEL, "--filter", "name=brig-run-"],
                              capture_output=True, text=True).stdout.split()

    def rm_runs(self):
        """Removes what a failed run test left (never the class's computer)."""
        for cid in self.run_containers():
            subprocess.run(["docker", "rm", "-fv", cid], capture_output=True)

    def test_run_output_and_exit_codes(self):
        """stdout and stderr apart, the command's exit code, 124 on the
        deadline, 127 for a missing program: the same bytes as direct."""
        try:
            r = self.same(*self.RUN, "--", "sh", "-c", "echo out; echo err >&2; printf 'x\\ty'; exit 3")
            self.assertEqual((r.returncode, r.stdout, r.stderr), (3, b"out\nx\ty", b"err\n"))
            self.assertEqual(self.same(*self.RUN, "--", "true").returncode, 0)
            r = self.same(*self.RUN, "--timeout", "1", "--", "sleep", "30")
            self.assertEqual(r.returncode, 124)
            self.assertIn(b"run timed out after 1s", r.stderr)
            r = self.same(*self.RUN, "--", "nosuchcmd")
            self.assertEqual(r.returncode, 127)
            self.assertIn(b"nosuchcmd: not found", r.stderr)
            r = self.same(*self.RUN, "-e", "X=1", "-w", "/tmp", "--", "sh", "-c", "echo $X; pwd")
            self.assertEqual(r.stdout, b"1\n/tmp\n")
            big = self.same(*self.RUN, "--", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a")
            self.assertEqual(big.stdout, b"a" * 300000)
            self.assertEqual(self.run_containers(), [])
        finally:
            self.rm_runs()

    def test_run_stdin_json(self):
        """-i passes stdin (and without it the command has none); --json
        prints the same result as direct."""
        try:
            for host in (None, self.host):
                r = self.brig(host, *self.RUN, "-i", "--", "sh", "-c", "tr a-z A-Z; echo done >&2",
                              input=b"piped\n" * 20000)
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"PIPED\n" * 20000, b"done\n"), host)
                r = self.brig(host, *self.RUN, "--", "sh", "-c", "cat; echo end", input=b"not passed\n")
                self.assertEqual((r.returncode, r.stdout), (0, b"end\n"), host)
            cmd = [*self.RUN, "--json", "--", "sh", "-c", "echo hi; echo e >&2; exit 4"]
            d, r = self.brig(None, *cmd), self.brig(self.host, *cmd)
            self.assertEqual((r.returncode, d.returncode, r.stderr, d.stderr), (4, 4, b"e\n", b"e\n"))
            jd, jr = json.loads(d.stdout), json.loads(r.stdout)
            for j in (jd, jr):
                for k in ("duration_ms", "durations_ms", "container"):
                    j.pop(k)
            self.assertEqual(jr, jd)
            self.assertEqual((jr["stdout"]["text"], jr["exit_code"]), ("hi\n", 4))
            self.assertEqual(self.run_containers(), [])
        finally:
            self.rm_runs()

    def test_run_in_out(self):
        """--in copies files of this machine under /inbox, read-only; --out
        brings /outbox back here, merged as direct merges it."""
        base = tempfile.mkdtemp(prefix=PREFIX, dir=self.tmpdir.name)
        try:
            src = os.path.join(base, "src")
            os.makedirs(os.path.join(src, "sub"))
            with open(os.path.join(src, "sub", "a.txt"), "wb") as f:
                f.write(b"hello\n")
            with open(os.path.join(base, "one.bin"), "wb") as f:
                f.write(bytes(range(256)) * 4000)
            script = ("cat /inbox/src/sub/a.txt; md5sum /inbox/one.bin | cut -c1-32; "
                      "touch /inbox/src/x 2>/dev/null || echo read-only; "
                      "mkdir -p /outbox/d; cp /inbox/src/sub/a.txt /outbox/d/r.txt; ln -s r.txt /outbox/d/l; "
                      "head -c 2000000 /dev/urandom > /outbox/big")
            trees = []
            for host, out in ((None, "out-direct"), (self.host, "out-served")):
                od = os.path.join(base, out)
                os.makedirs(od)
                with open(os.path.join(od, "kept"), "wb") as f:
                    f.write(b"kept")
                r = self.brig(host, *self.RUN, "--in", src, "--in", os.path.join(base, "one.bin"), "--out", od,
                              "--", "sh", "-c", script)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, b"hello\n" + hashlib.md5(bytes(range(256)) * 4000).hexdigest().encode()
                                 + b"\nread-only\n")
                tree = {}
                for dp, dns, fns in os.walk(od):
                    for fn in fns:
                        fp = os.path.join(dp, fn)
                        rel = os.path.relpath(fp, od)
                        tree[rel] = os.readlink(fp) if os.path.islink(fp) else os.path.getsize(fp)
                trees.append(tree)
            self.assertEqual(trees[0], trees[1])
            self.assertEqual(trees[1], {"kept": 4, "d/r.txt": 6, "d/l": "r.txt", "big": 2000000})
            with open(os.path.join(base, "out-served", "d", "r.txt"), "rb") as f:
                self.assertEqual(f.read(), b"hello\n")
            # an output that points out of --out: refused the same way, --out left as it was
            od = os.path.join(base, "out-direct")
            r = self.same(*self.RUN, "--out", od, "--", "sh", "-c", "echo x > /outbox/new; ln -s /etc/passwd /outbox/x")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"copy outputs to %s: " % od.encode(), r.stderr)
            self.assertFalse(os.path.exists(os.path.join(od, "new")))
            # an --in that is not there: the same error, nothing sent
            r = self.same(*self.RUN, "--in", os.path.join(base, "nope"), "--", "true")
            self.assertEqual(r.returncode, 125)
            self.assertEqual(self.run_containers(), [])
        finally:
            shutil.rmtree(base, ignore_errors=True)
            self.rm_runs()

    def test_run_server_image(self):
        """No image chosen here (no --image, no BRIG_IMAGE): a run through the
        server gets the server's (the test image, busybox's), as up does."""
        r = self.brig(self.host, "run", "--ns", NS_A, "--label", LABEL, "--", "sh", "-c", "test -x /bin/busybox",
                      env={"BRIG_IMAGE": ""})
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_run_refused(self):
        """Usage errors as direct; through the server --ns is required, and a
        token must cover it (403, no container made); --help goes nowhere."""
        try:
            for args in (["run"], ["run", "--ns", NS_A], ["run", "--timeout", "x", "--", "true"],
                         ["run", "--nope", "--", "true"], ["run", "--out-mb", "0", "--", "true"]):
                r = self.same(*args)
                self.assertEqual(r.returncode, 125, args)
                self.assertTrue(r.stderr.startswith(b"brig: "), args)
            self.assertEqual(self.same("run", "--help").returncode, 0)
            r = self.brig(self.host, "run", "--label", LABEL, "--", "true")
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"--ns NS is required through a brig server", r.stderr)
            r = self.brig(self.host, *self.RUN, "--", "true", token=TOK_B)
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"the token does not cover this namespace", r.stderr)
            r = self.brig(self.host, *self.RUN, "-e", "SECRETV=hunter2-%s" % PREFIX, "--", "sh", "-c", "exit 9",
                          token=TOK_B)
            self.assertEqual(r.returncode, 125)
            self.assertNotIn(b"hunter2", r.stderr)
            self.assertNotIn(b"hunter2", open(os.path.join(self.tmpdir.name, "serve.log"), "rb").read())
            self.assertEqual(self.run_containers(), [])
        finally:
            self.rm_runs()

    def test_run_interrupt(self):
        """Ctrl-C: 130, and the run's container is gone once brig says so,
        as direct."""
        try:
            for host in (None, self.host):
                e = dict(os.environ, BRIG_STORE=self.store, BRIG_IMAGE=IMAGE, BRIG_TOKEN=TOK_A)
                e.pop("BRIG_HOST", None)
                if host:
                    e["BRIG_HOST"] = host
                p = subprocess.Popen([BRIG, *self.RUN, "--", "sh", "-c", "echo started; sleep 60"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
                self.assertEqual(p.stdout.readline(), b"started\n")
                p.send_signal(signal.SIGINT)
                out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 130, err)
                self.assertIn(b"run interrupted; its container was removed", err)
                self.assertEqual(self.run_containers(), [], host)
        finally:
            self.rm_runs()

    def test_ps_kill(self):
        """exec -d, ps and kill through the server work on brig-init's own
        commands: one started either way is listed and killed either way."""
        name, h = self.name, self.host
        direct = self.start(None, "sleep", "300")
        served = self.start(h, "sh", "-c", "sleep 300; echo never")
        r = self.brig(h, "exec", "-d", "-e", "X=1", "-w", "/tmp", name, "--", "sh", "-c",
                      "pwd >/runtime/psk; echo $X >>/runtime/psk")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_exited(int(r.stdout))
        self.assertEqual(self.sh("cat /runtime/psk; rm /runtime/psk"), b"/tmp\n1\n")
        # the same list both ways, text and JSON, by NAME and by session
        for args in (["ps", name], ["ps", *self.ident], ["ps", "--json", name]):
            out = self.same(*args)
            self.assertEqual(out.returncode, 0, out.stderr)
        listed = {p["id"]: p for p in json.loads(self.same("ps", "--json", name).stdout)}
        self.assertEqual((listed[direct]["state"], listed[served]["state"]), ("running", "running"))
        self.assertEqual(listed[served]["argv"], ["sh", "-c", "sleep 300; echo never"])
        # started direct, killed through the server (the whole tree), and
        # the other way round
        r = self.brig(h, "kill", name, str(direct))
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"", b""))
        self.assertEqual((self.procs()[direct]["state"], self.procs()[direct]["killed"]), ("exited", True))
        r = self.brig(None, "kill", *self.ident, str(served))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.procs()[served]["state"], "exited")
        # -s: one signal, through the server
        one = self.start(h, "sleep", "300")
        r = self.brig(h, "kill", "-s", "TERM", *self.ident, str(one))
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(self.wait_exited(one)["signal"], 15)
        r = self.same("ps", name)
        self.assertIn(b"\n%-6d " % one, r.stdout)
        # a signal to an ended command, a kill of one (its exit), ids brig-init never gave
        self.assertEqual(self.same("kill", "-s", "TERM", name, str(one)).returncode, 125)
        self.assertEqual(self.same("kill", name, str(one)).returncode, 0)
        for args in (["kill", name, "999999"], ["kill", "-s", "KILL", *self.ident, "999999"]):
            r = self.same(*args)
            self.assertEqual(r.returncode, 125, args)
            self.assertTrue(r.stderr.startswith(b"brig: "), args)
        r = self.same("exec", "-d", name, "--", "nosuchcmd")
        self.assertEqual(r.returncode, 125)
        self.assertIn(b"start in " + name.encode(), r.stderr)

    def test_ps_kill_refused(self):
        """Usage errors and missing computers as direct; another namespace's
        token reaches none of NS_A's commands."""
        name, h = self.name, self.host
        nope = ["--ns", NS_A, "--agent", "agent", "--session", "nope"]
        for args in (["ps"], ["ps", name, "x"], ["ps", "--nope", name], ["ps", *self.ident, name],
                     ["ps", "--ns", NS_A, name], ["kill", name], ["kill", name, "x"], ["kill", name, "0"],
                     ["kill", "-s", "BOGUS", name, "1"], ["kill", "-s", "65", name, "1"], ["kill", *self.ident],
                     ["exec", "-d", name], ["ps", *nope], ["kill", *nope, "1"], ["kill", "-s", "TERM", *nope, "1"]):
            r = self.same(*args)
            self.assertEqual(r.returncode, 125, args)
            self.assertTrue(r.stderr.startswith(b"brig: "), args)
        self.assertIn(b"no computer named", self.same("ps", *nope).stderr)
        self.assertEqual(self.same("ps", "--help").returncode, 0)
        self.assertEqual(self.same("kill", "--help").returncode, 0)
        for args in (["ps", "brig-nope"], ["kill", "brig-nope", "1"]):
            r = self.brig(h, *args)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(b"no computer named brig-nope on the brig server", r.stderr, args)
        pid = self.start(None, "sleep", "300")
        try:
            for args in (["ps", *self.ident], ["kill", *self.ident, str(pid)],
                         ["kill", "-s", "KILL", *self.ident, str(pid)]):
                r = self.brig(h, *args, token=TOK_B)
                self.assertEqual((r.returncode, r.stdout), (125, b""), args)
                self.assertIn(b"the token does not cover this namespace", r.stderr, args)
            r = self.brig(h, "exec", "-d", *self.ident, "--", "true", token=TOK_B)
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"the token does not cover this namespace", r.stderr)
            for args in (["ps", name], ["kill", name, str(pid)]):
                r = self.brig(h, *args, token=TOK_B)
                self.assertEqual(r.returncode, 125, args)
                self.assertIn(b"no computer named %s on the brig server" % name.encode(), r.stderr, args)
            self.assertEqual(self.procs()[pid]["state"], "running")
        finally:
            self.brig(None, "kill", name, str(pid))

    def test_attach(self):
        """brig attach through the server: the output from then on and the
        exit code, the same errors; Ctrl-C detaches and the command runs on."""
        name, h = self.name, self.host
        for host in (None, h):
            pid = self.start(None, "sh", "-c", "sleep 3; echo out; echo err >&2; exit 7")
            r = self.brig(host, "attach", name, str(pid))
            self.assertEqual((r.returncode, r.stdout, r.stderr), (7, b"out\n", b"err\n"), host)
            # one that has ended: its kept output and exit code at once
            r = self.brig(host, "attach", *self.ident, str(pid))
            self.assertEqual((r.returncode, r.stdout, r.stderr), (7, b"out\n", b"err\n"), host)
        # a signal's exit code, as direct
        for host in (None, h):
            pid = self.start(None, "sh", "-c", "sleep 2; kill -TERM $$")
            self.assertEqual(self.brig(host, "attach", "-i", name, str(pid)).returncode, 143, host)
        # Ctrl-C: the same note both ways, and the command still runs
        pid = self.start(None, "sleep", "300")
        try:
            notes = []
            for host, who in ((None, [name]), (h, [name]), (h, self.ident)):
                e = dict(os.environ, BRIG_STORE=self.store, BRIG_IMAGE=IMAGE, BRIG_TOKEN=TOK_A)
                e.pop("BRIG_HOST", None)
                if host:
                    e["BRIG_HOST"] = host
                p = subprocess.Popen([BRIG, "attach", *who, str(pid)], env=e, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
                time.sleep(1.5)
                p.send_signal(signal.SIGINT)
                out, err = p.communicate(timeout=30)
                notes.append((p.returncode, out, err))
                self.assertEqual(self.procs()[pid]["state"], "running", (host, who))
            self.assertEqual(notes[1], notes[0])
            self.assertEqual(notes[2], notes[0])
            self.assertEqual(notes[0][0], 130, notes[0])
            self.assertIn(b"detached; command %d keeps running (brig attach %s %d)" % (pid, name.encode(), pid),
                          notes[0][2])
            # errors as direct: usage, ids brig-init never gave, no such computer
            for args in (["attach", name], ["attach", name, "x"], ["attach", name, "0"],
                         ["attach", name, "999999"], ["attach", "-i", *self.ident, "999999"],
                         ["attach", "--ns", NS_A, "--agent", "agent", "--session", "nope", "1"]):
                r = self.same(*args)
                self.assertEqual(r.returncode, 125, args)
                self.assertTrue(r.stderr.startswith(b"brig: "), args)
            r = self.brig(h, "attach", "brig-nope", "1")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"no computer named brig-nope on the brig server", r.stderr)
            # another namespace's token reaches none of it
            r = self.brig(h, "attach", *self.ident, str(pid), token=TOK_B)
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"the token does not cover this namespace", r.stderr)
            # the route itself: brig-init's ids only, and the upgrade
            path = "/v1/computers/%s/agent/cli/processes/%d/attach" % (NS_A, pid)
            st, _, b, sk = attach_open(self.srv.sock, path, {}, TOK_A)
            self.assertEqual((st, json.loads(b)["code"]), (400, "invalid"), b)
            self.assertIn(b"native=true", b)
            st, _, b, sk = attach_open(self.srv.sock, path + "?native=true", {}, TOK_B)
            self.assertEqual(st, 403, b)
            st, _, b, sk = attach_open(self.srv.sock, path + "?native=true", {}, TOK_A, {"Upgrade": None})
            self.assertEqual(st, 426, b)
            self.assertEqual(self.procs()[pid]["state"], "running")
        finally:
            self.brig(None, "kill", name, str(pid))

    def test_egress(self):
        """egress allow, deny, ls and log through the server: the same output
        and exit codes as direct; rm (the host's network) stays refused."""
        h = self.host
        r = self.brig(None, "up", "--ns", NS_A, "--agent", "agent", "--session", "cliegr", "--label", LABEL,
                      "--network", "egress", "--allow", "a.example.com")
        self.assertEqual(r.returncode, 0, r.stderr)
        egr = r.stdout.decode().strip().splitlines()[-1]
        try:
            for args in (["egress", "ls", egr], ["egress", "ls", egr, "--json"],
                         ["egress", "allow", egr, "b.example.com:8080"], ["egress", "ls", egr],
                         ["egress", "deny", egr, "a.example.com"], ["egress", "ls", egr, "--json"],
                         ["egress", "allow", egr, "b.example.com:8080"], ["egress", "deny", egr, "nope.example.com"]):
                r = self.same(*args)
                self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertEqual(self.brig(h, "egress", "ls", egr).stdout, b"b.example.com:8080\n")
            r = self.brig(h, "egress", "allow", egr, "c.example.com")
            self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)
            self.assertEqual(self.brig(None, "egress", "ls", egr).stdout, b"b.example.com:8080\nc.example.com\n")
            for args in (["egress", "ls", self.name], ["egress", "allow", self.name, "x.example.com"],
                         ["egress", "ls"], ["egress", "allow", egr], ["egress", "bogus", egr],
                         ["egress", "ls", egr, "x"]):
                r = self.same(*args)
                self.assertEqual(r.returncode, 125, args)
                self.assertTrue(r.stderr.startswith(b"brig: "), args)
            self.assertIn(b"not of network egress", self.brig(h, "egress", "ls", self.name).stderr)
            r = self.brig(h, "egress", "allow", egr, "https://x.example.com")
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"rule: egress rule 'https://x.example.com': give a host name", r.stderr)
            r = self.brig(h, "egress", "ls", "brig-nope")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"no computer named brig-nope on the brig server", r.stderr)
            for args in (["egress", "ls", egr], ["egress", "deny", egr, "c.example.com"]):
                r = self.brig(h, *args, token=TOK_B)
                self.assertEqual((r.returncode, r.stdout), (125, b""), args)
                self.assertIn(b"no computer named %s on the brig server" % egr.encode(), r.stderr, args)
            self.assertEqual(self.brig(None, "egress", "ls", egr).stdout, b"b.example.com:8080\nc.example.com\n")
            r = self.brig(h, "egress", "rm")
            self.assertEqual(r.returncode, 125)
            self.assertIn(b"does not go through a brig server yet", r.stderr)

            # the ledger: a connection refused by the proxy (nothing leaves the
            # machine), read through the server as direct reads it
            deny = ("p=${HTTPS_PROXY#http://}; printf 'CONNECT denied.example.com:443 HTTP/1.1\\r\\n"
                    "Host: denied.example.com:443\\r\\n\\r\\n' | nc -w 5 ${p%:*} ${p##*:} | head -1")
            r = self.brig(None, "exec", egr, "--", "sh", "-c", deny)
            self.assertIn(b"403 Forbidden", r.stdout, r.stderr)
            for _ in range(100):
                if b"denied" in self.brig(None, "egress", "log", egr).stdout:
                    break
                time.sleep(0.1)
            ident = ["--ns", NS_A, "--agent", "agent", "--session", "cliegr"]
            for args in (["egress", "log", egr], ["egress", "log", egr, "--json"], ["egress", "log", *ident],
                         ["egress", "log", *ident, "--json", "--limit", "1"], ["egress", "log", "brig-nope"]):
                r = self.same(*args)
                self.assertEqual(r.returncode, 0, (args, r.stderr))
            r = self.brig(h, "egress", "log", egr, "--json")
            rows = json.loads(r.stdout)
            self.assertEqual([(x["decision"], x["host"], x["port"], x["session"]["session"]) for x in rows],
                             [("denied", "denied.example.com", 443, "cliegr")], rows)
            self.assertIn(b"denied   denied.example.com:443", self.brig(h, "egress", "log", egr).stdout)
            for args in (["egress", "log"], ["egress", "log", "--ns", NS_A], ["egress", "log", egr, "--limit", "x"],
                         ["egress", "log", egr, *ident], ["egress", "log", egr, "--bogus"]):
                r = self.same(*args)
                self.assertEqual(r.returncode, 125, args)
            r = self.brig(h, "egress", "log", egr, "--store", self.store)
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"through a brig server its own store is used", r.stderr)
            # another namespace's token: by name nothing of ours, by session refused
            r = self.brig(h, "egress", "log", egr, token=TOK_B)
            self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)
            r = self.brig(h, "egress", "log", *ident, token=TOK_B)
            self.assertEqual((r.returncode, r.stdout), (125, b""))
            self.assertIn(b"does not cover", r.stderr)
        finally:
            self.brig(None, "destroy", egr)

    def test_unsupported_refused(self):
        for args in (["doctor"], ["gc"], ["image", "build"], ["mcp"], ["agent", "claude"]):
            r = self.brig(self.host, *args)
            self.assertEqual(r.returncode, 125, args)
            self.assertIn(b"does not go through a brig server yet; unset BRIG_HOST to talk to Docker directly",
                          r.stderr, args)
        r = self.brig(self.host, "fs", "--help")  # help contacts nothing
        self.assertEqual(r.returncode, 0, r.stderr)


# ---- exec attach: the HTTP Upgrade to a framed two-way stream ----

def attach_open(sock_path, path, body, token, headers=None):
    """POST path with an upgrade by hand. Returns (status, headers, body or
    the stream's first bytes, socket or None)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock_path)
    data = json.dumps(body).encode()
    h = {"Host": "localhost", "Connection": "Upgrade", "Upgrade": "tcp", "Content-Type": "application/json",
         "Content-Length": str(len(data))}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    head = "POST %s HTTP/1.1\r\n%s\r\n" % (path, "".join("%s: %s\r\n" % kv for kv in h.items() if kv[1] is not None))
    s.sendall(head.encode() + data)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed before answering: %r" % buf)
        buf += chunk
    top, rest = buf.split(b"\r\n\r\n", 1)
    lines = top.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hs = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    if status == 101:
        return status, hs, rest, s
    n = int(hs.get("content-length", "0"))
    while len(rest) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    s.close()
    return status, hs, rest, None


def frame(t, payload=b""):
    return bytes([t, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


class RecoverList(unittest.TestCase):
    """brig recover through a server whose session list fails: the recover still goes, without values.

    A stand-in server (no Docker), since a real one that answers POST .../recover answers
    GET /v1/sessions too: each answer of the list brig may meet, then what brig sends and says.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, obj):
            body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.server.seen.append(("GET", self.path, None))
            if self.path.startswith("/v1/sessions?"):
                self.answer(*self.server.list_answer)
            else:
                self.answer(404, {"code": "not_found", "message": "no such route"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            self.server.seen.append(("POST", self.path, body))
            self.answer(*self.server.recover_answer)

    @classmethod
    def setUpClass(cls):
        import socketserver

        class Srv(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        cls.tmpdir = tempfile.TemporaryDirectory()
        cls.sock = os.path.join(cls.tmpdir.name, "brig.sock")
        cls.srv = Srv(cls.sock, cls.Handler)
        cls.srv.seen = []
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()
        cls.tmpdir.cleanup()

    WON = {"won": True, "old_generation": 1, "new_generation": 2, "checkpoint_id": 0,
           "computer": {"name": "brig-rl-2"}}
    MISSING = {"code": "invalid", "message": "secret API_KEY has no value: give it in the environment"}

    def recover(self, list_answer, recover_answer):
        self.srv.list_answer, self.srv.recover_answer = list_answer, recover_answer
        self.srv.seen.clear()
        e = dict(os.environ, BRIG_HOST="brig+unix://" + self.sock, BRIG_TOKEN=TOK_A, API_KEY="v-" + PREFIX)
        p = subprocess.run([BRIG, "recover", "--ns", "rl", "--agent", "a", "--session", "s"], capture_output=True,
                           env=e, timeout=60)
        posts = [b for m, path, b in self.srv.seen if m == "POST" and path == "/v1/computers/rl/a/s/recover"]
        self.assertEqual(len(posts), 1, (self.srv.seen, p.stderr))
        return p, posts[0]

    def test_list_fails(self):
        for what, answer in (("an error", (500, {"code": "internal", "message": "the store is unavailable"})),
                             ("a refusal", (403, {"code": "forbidden", "message": "not this token's"})),
                             ("no such route", (404, {"code": "not_found", "message": "no such route"})),
                             ("no sessions", (200, {})),
                             ("sessions not a list", (200, {"sessions": {"agent": "a"}})),
                             ("not JSON", (200, b"{sessions"))):
            with self.subTest(what):
                p, body = self.recover(answer, (200, self.WON))
                self.assertEqual((p.returncode, p.stdout), (0, b"brig-rl-2\n"), p.stderr)
                self.assertIsNone(body, "no secret_values when the list failed")
                self.assertIn(b"brig: cannot list rl's sessions on the brig server: recovering rl/a/s without "
                              b"secret values from this environment", p.stderr)
                self.assertNotIn(b"v-" + PREFIX.encode(), p.stderr)
                # and when the server then misses a value, it says which
                p, body = self.recover(answer, (400, self.MISSING))
                self.assertEqual(p.returncode, 125, p.stderr)
                self.assertIn(b"secret API_KEY has no value", p.stderr)

    def test_list_names_the_secret(self):
        # the control: a list that works gives this environment's value
        sessions = {"sessions": [{"agent": "a", "session": "s", "spec": {"secrets": ["API_KEY"]}},
                                 {"agent": "a", "session": "other", "spec": {"secrets": ["OTHER"]}}]}
        p, body = self.recover((200, sessions), (200, self.WON))
        self.assertEqual((p.returncode, p.stdout), (0, b"brig-rl-2\n"), p.stderr)
        self.assertEqual(body, {"secret_values": {"API_KEY": "v-" + PREFIX}})
        self.assertNotIn(b"cannot list", p.stderr)


class Frames:
    """The server's frames: 1 stdout, 2 stderr, 3 end (JSON), 6 a run's outputs tar."""

    def __init__(self, s, head=b""):
        self.s, self.buf = s, head
        self.out, self.err, self.end, self.tar = b"", b"", None, b""

    def _fill(self):
        chunk = self.s.recv(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def one(self):
        """Reads one frame; False at the stream's end."""
        while len(self.buf) < 8:
            if not self._fill():
                assert self.buf == b"", "the stream ended inside a frame header"
                return False
        t, n = self.buf[0], int.from_bytes(self.buf[4:8], "big")
        assert t in (1, 2, 3, 6) and self.buf[1:4] == b"\0\0\0", self.buf[:8]
        while len(self.buf) < 8 + n:
            assert self._fill(), "the stream ended inside a frame"
        p, self.buf = self.buf[8:8 + n], self.buf[8 + n:]
        if t == 1:
            self.out += p
        elif t == 2:
            self.err += p
        elif t == 6:
            self.tar += p
        else:
            self.end = json.loads(p)
        return True

    def until(self, pred):
        while not pred(self):
            assert self.end is None and self.one(), "ended before: %r %r %r" % (self.out, self.err, self.end)

    def rest(self):
        while self.end is None and self.one():
            pass
        return self


class Attach(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory()
        cls.srv = Server(cls.tmpdir.name)
        cls.py = PyClient(cls.srv.sock)
        st, _, b = cls.py.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "att",
                                                         "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
        assert st in (200, 201), b
        st, _, b = cls.py.call("POST", "/v1/computers", {"ns": NS_B, "agent": "agent", "session": "att",
                                                         "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_B)
        assert st in (200, 201), b

    @classmethod
    def tearDownClass(cls):
        try:
            cls.py.call("DELETE", "/v1/computers/%s/agent/att" % NS_A, token=TOK_A)
            cls.py.call("DELETE", "/v1/computers/%s/agent/att" % NS_B, token=TOK_B)
        finally:
            rc = cls.srv.stop()
            docker_cleanup()
            cls.tmpdir.cleanup()
        assert rc == 0, "brig serve exited %s:\n%s" % (rc, cls.srv.logtext()[-4000:])

    P = "/v1/computers/%s/agent/att/exec/attach" % NS_A

    def open(self, argv, query="", token=TOK_A, path=None, body=None):
        st, h, rest, s = attach_open(self.srv.sock, (path or self.P) + query, body or {"argv": argv}, token)
        self.assertEqual(st, 101, rest)
        self.assertEqual(h.get("upgrade"), "tcp")
        self.addCleanup(s.close)
        return s, Frames(s, rest)

    def count(self, marker):
        """How many processes of the computer run `marker`."""
        st, _, b = self.py.call("POST", "/v1/computers/%s/agent/att/exec" % NS_A, token=TOK_A,
                                body={"argv": ["sh", "-c", "ps -eo args | grep -c '^[%s]%s'" % (marker[0], marker[1:])]})
        return int(json.loads(b)["stdout"]["text"])

    def gone(self, marker):
        """Whether no process of the computer runs `marker` (brig-init ended it)."""
        for _ in range(50):  # "started" comes just before sh starts it
            if self.count(marker) == 1:
                break
            time.sleep(0.1)
        self.assertEqual(self.count(marker), 1, "the command does not run")
        self.closer()
        for _ in range(100):
            if self.count(marker) == 0:
                return True
            time.sleep(0.1)
        return False

    def test_stdin_echo(self):
        s, f = self.open(["cat"])
        s.sendall(frame(0, b"hello\n"))
        f.until(lambda f: f.out == b"hello\n")  # echoed before stdin ends
        big = bytes(range(256)) * 1024  # binary, more than a pipe holds
        for i in range(0, len(big), 70000):
            s.sendall(frame(0, big[i:i + 70000]))
        s.sendall(frame(4))
        f.rest()
        self.assertEqual(f.out, b"hello\n" + big)
        self.assertEqual((f.end["type"], f.end["exit_code"], f.end["timed_out"]), ("exit", 0, False), f.end)
        self.assertIsNone(s.recv(1) or None)  # the server closes after the end frame

    def test_eof_exit_code_stderr(self):
        s, f = self.open(["sh", "-c", "wc -c; echo err >&2; exit 7"])
        s.sendall(frame(4))
        f.rest()
        self.assertEqual((f.out.strip(), f.err, f.end["exit_code"]), (b"0", b"err\n", 7), f.end)

    def test_timeout(self):
        s, f = self.open(None, body={"argv": ["sleep", "60"], "timeout_ms": 500})
        f.rest()
        self.assertEqual((f.end["exit_code"], f.end["timed_out"]), (124, True), f.end)

    def test_tty_size_resize(self):
        # the size is polled until it changes: the resize and stdin travel on apart pipes
        s, f = self.open(["sh", "-c", "tty; stty size; while [ \"$(stty size)\" = '33 101' ]; do sleep 0.05; done; "
                          "stty size; read x; echo got $x"], "?tty=true&rows=33&cols=101")
        f.until(lambda f: b"33 101" in f.out)
        self.assertRegex(f.out, rb"^/dev/pts/\d+\r\n")
        s.sendall(frame(5, (50).to_bytes(2, "big") + (120).to_bytes(2, "big")))
        f.until(lambda f: b"50 120" in f.out)
        s.sendall(frame(0, b"yes\n"))
        f.rest()
        self.assertIn(b"50 120\r\n", f.out)
        self.assertIn(b"got yes", f.out)
        self.assertEqual(f.end["exit_code"], 0, f.end)
        # recorded like any exec, and by the token, not the server's OS user
        st, _, b = self.py.call("GET", "/v1/computers/%s/agent/att/history?limit=200" % NS_A, token=TOK_A)
        self.assertEqual(st, 200, b)
        rows = [x for x in json.loads(b)["history"] if x["argv"][:1] == ["sh"] and "got $x" in x["argv"][-1]]
        self.assertTrue(rows, b)
        self.assertEqual(rows[-1].get("actor"), "serve token, line 2", rows[-1])

    def test_hangup_cancels(self):
        s, f = self.open(["sh", "-c", "echo started; sleep 4242"])
        f.until(lambda f: f.out == b"started\n")
        self.closer = s.close
        self.assertTrue(self.gone("sleep 4242"), "the command outlived its client")
        self.assertIn(b"/exec/attach 101", open(os.path.join(self.tmpdir.name, "serve.log"), "rb").read())

    def test_half_close_is_a_hangup(self):
        s, f = self.open(["sh", "-c", "echo started; sleep 4244"])
        f.until(lambda f: f.out == b"started\n")
        self.closer = lambda: s.shutdown(socket.SHUT_WR)
        self.assertTrue(self.gone("sleep 4244"))

    def test_bad_frame_cancels(self):
        for bad in (frame(9, b"x"), frame(5, b"\0\0\0\0"), frame(4, b"x"), frame(0, b"") [:4] + (2 << 20).to_bytes(4, "big"),
                    frame(4) + frame(0, b"late")):
            s, f = self.open(["sh", "-c", "echo started; sleep 4243"])
            f.until(lambda f: f.out == b"started\n")
            self.closer = lambda: s.sendall(bad)
            self.assertTrue(self.gone("sleep 4243"), bad)
            f.rest()
            self.assertIsNone(f.end, bad)  # no end frame: the client broke the stream

    def test_refused_before_upgrade(self):
        P, body = self.P, {"argv": ["true"]}
        for token, path, hdrs, status, code in (
                (None, P, {}, 401, "unauthorized"),
                ("x" * 32, P, {}, 401, "unauthorized"),
                (TOK_A, "/v1/computers/%s/agent/att/exec/attach" % NS_B, {}, 403, "forbidden"),
                (TOK_A, P + "?token=" + TOK_A, {}, 401, "unauthorized"),
                (TOK_A, P, {"Upgrade": None}, 426, "upgrade_required"),
                (TOK_A, P, {"Connection": "keep-alive"}, 426, "upgrade_required"),
                (TOK_A, P, {"Upgrade": "websocket"}, 426, "upgrade_required"),
                (TOK_A, P + "?rows=0", {}, 400, "invalid"),
                (TOK_A, P + "?cols=1001", {}, 400, "invalid"),
                (TOK_A, "/v1/computers/%s/agent/b%%21d/exec/attach" % NS_A, {}, 400, None)):
            st, h, b, s = attach_open(self.srv.sock, path, body, token, hdrs)
            self.assertEqual(st, status, (path, hdrs, b))
            self.assertIsNone(s)
            if code:
                self.assertEqual(json.loads(b)["code"], code, b)
            self.assertNotIn(TOK_A, b.decode(errors="replace"))
        # a session without a computer: known once the command starts, as with ?stream=true
        s, f = self.open(["true"], path="/v1/computers/%s/agent/nope/exec/attach" % NS_A)
        f.rest()
        self.assertEqual((f.end["type"], f.end["code"]), ("error", "not_found"), f.end)
        for body in ({"argv": ["cat"], "stdin": "x"}, {"argv": []}, {"argv": ["true"], "nope": 1}):
            st, h, b, s = attach_open(self.srv.sock, P, body, TOK_A)
            self.assertEqual(st, 400, b)
        # B's computer untouched by A's attempt; B attaches to its own
        st, h, rest, s = attach_open(self.srv.sock, "/v1/computers/%s/agent/att/exec/attach" % NS_B,
                                     {"argv": ["echo", "b"]}, TOK_B)
        self.assertEqual(st, 101)
        s.sendall(frame(4))
        f = Frames(s, rest).rest()
        s.close()
        self.assertEqual((f.out, f.end["exit_code"]), (b"b\n", 0))

    def own_server(self, name, extra):
        """A server of its own (in tmpdir/name), for flags the class's server does not have."""
        d = os.path.join(self.tmpdir.name, name)
        os.mkdir(d)
        return Server(d, extra=extra)

    def test_drain_hangs_up_open_streams(self):
        srv = self.own_server("drain", ["--drain", "1"])
        try:
            st, h, rest, s = attach_open(srv.sock, self.P, {"argv": ["sh", "-c", "echo started; sleep 4245"]}, TOK_A)
            self.assertEqual(st, 101, rest)
            f = Frames(s, rest)
            f.until(lambda f: f.out == b"started\n")
            t0 = time.monotonic()
            self.closer = lambda: srv.p.send_signal(signal.SIGTERM)
            self.assertTrue(self.gone("sleep 4245"), "the drain left the command running")
            self.assertEqual(srv.p.wait(30), 0, srv.logtext())
            self.assertLess(time.monotonic() - t0, 20)
            f.rest()
            s.close()
        finally:
            srv.stop()
        self.assertIn("still running after 1s", srv.logtext())

    def test_outlives_the_header_timeout(self):
        # the header deadline is for requests; a stream that went quiet is not cut
        srv = self.own_server("quiet", ["--header-timeout", "1"])
        try:
            st, h, rest, s = attach_open(srv.sock, self.P, {"argv": ["sh", "-c", "sleep 3; cat"]}, TOK_A)
            self.assertEqual(st, 101, rest)
            time.sleep(2.5)
            s.sendall(frame(0, b"still here\n") + frame(4))
            f = Frames(s, rest).rest()
            s.close()
            self.assertEqual((f.out, f.end["exit_code"]), (b"still here\n", 0), f.end)
        finally:
            srv.stop()
        self.assertNotIn("dropped a connection", srv.logtext())

    def test_tls(self):
        """Over brig+https (libmicrohttpd forwards the upgraded TLS stream through a socketpair)."""
        d = os.path.join(self.tmpdir.name, "tls")
        os.mkdir(d)
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        tf = os.path.join(d, "tokens")
        with open(tf, "w") as f:
            f.write("%s %s\n" % (TOK_A, NS_A))
        os.chmod(tf, 0o600)
        ca = os.path.join(d, "ca")
        os.mkdir(ca)
        with open(cert) as src, open(os.path.join(ca, "ca.pem"), "w") as dst:
            dst.write(src.read())
        port = free_port()
        log = open(os.path.join(d, "log"), "wb")
        srv = subprocess.Popen([BRIG, "serve", "--listen", "tcp://127.0.0.1:%d" % port, "--tls-cert", cert,
                                "--tls-key", key, "--tokens", tf, "--store", "sqlite://" + os.path.join(d, "db")],
                               stdout=log, stderr=log)
        try:
            e = dict(os.environ, BRIG_HOST="brig+https://127.0.0.1:%d" % port, BRIG_CERT_PATH=ca, BRIG_TOKEN=TOK_A)
            ident = ["--ns", NS_A, "--agent", "agent", "--session", "att"]
            big = bytes(range(256)) * 2000
            for _ in range(100):
                p = subprocess.run([BRIG, "exec", "-i"] + ident + ["--", "sh", "-c", "cat; exit 4"], input=big,
                                   capture_output=True, env=e, timeout=120)
                if b"cannot reach" not in p.stderr:
                    break
                time.sleep(0.05)
            self.assertEqual((p.returncode, p.stdout), (4, big), p.stderr)
            p = subprocess.run([BRIG, "exec", "-t"] + ident + ["--", "sh", "-c", "tty; stty size"], capture_output=True,
                               env=e, timeout=120)
            self.assertRegex(p.stdout, rb"^/dev/pts/\d+\r\n24 80\r\n$", p.stderr)
        finally:
            srv.terminate()
            self.assertEqual(srv.wait(30), 0)
            log.close()
        self.assertNotIn(TOK_A, open(os.path.join(d, "log")).read())

    def test_frames_before_the_101(self):
        # a client that does not wait for the 101: its frames are kept
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        s.connect(self.srv.sock)
        self.addCleanup(s.close)
        data = json.dumps({"argv": ["cat"]}).encode()
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\n"
                   "Upgrade: tcp\r\nContent-Length: %d\r\n\r\n" % (self.P, TOK_A, len(data))).encode() + data +
                  frame(0, b"early\n") + frame(4))
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, rest = buf.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 101"), head)
        f = Frames(s, rest).rest()
        self.assertEqual((f.out, f.end["exit_code"]), (b"early\n", 0), f.end)

    def test_client_leaves_before_the_101(self):
        # the 101 may find the client gone (its payload is freed unused) or not
        # (the stream sees the hang-up): either way nothing is left running
        for _ in range(5):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.srv.sock)
            data = json.dumps({"argv": ["sleep", "4246"]}).encode()
            s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\n"
                       "Upgrade: tcp\r\nContent-Length: %d\r\n\r\n" % (self.P, TOK_A, len(data))).encode() + data)
            s.close()
        for _ in range(100):
            if self.count("sleep 4246") == 0:
                break
            time.sleep(0.1)
        self.assertEqual(self.count("sleep 4246"), 0)
        st, _, b = self.py.call("GET", "/v1/health")
        self.assertEqual(st, 200)

    def test_http10_gets_no_upgrade(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        s.connect(self.srv.sock)
        data = json.dumps({"argv": ["true"]}).encode()
        s.sendall(("POST %s HTTP/1.0\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                   "Content-Length: %d\r\n\r\n" % (self.P, TOK_A, len(data))).encode() + data)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        s.close()
        self.assertTrue(buf.startswith(b"HTTP/1.0 400 ") or buf.startswith(b"HTTP/1.1 400 "), buf)
        self.assertIn(b"needs HTTP/1.1", buf)
        st, _, b = self.py.call("GET", "/v1/health")  # and the server goes on
        self.assertEqual(st, 200)

    def test_tty_needs_no_stdin(self):
        s, f = self.open(["sh", "-c", "stty size"], "?tty=1")
        f.rest()  # no stdin frame at all: the command ends on its own
        self.assertEqual((f.out, f.end["exit_code"]), (b"24 80\r\n", 0), f.end)


def egress_network_exists():
    try:
        return subprocess.run(["docker", "network", "inspect", "brig-egress"], capture_output=True).returncode == 0
    except OSError:
        return True  # no docker CLI: nothing of ours to remove


def egress_teardown(egress_dir, had_network):
    """After the run: the egress network if this run made it (its proxy then
    ends; ours is killed by its pid if it has not), and the run's egress
    folder (its CA and rules)."""
    if not had_network and egress_network_exists():
        subprocess.run([BRIG, "egress", "rm"], capture_output=True)
    pidf = os.path.join(egress_dir, "proxy.pid")
    for _ in range(100):
        if not os.path.exists(pidf):
            break
        time.sleep(0.1)
    try:
        pid = int(open(pidf).read().split()[0])
        if pid > 1:
            os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        pass
    shutil.rmtree(egress_dir, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["routes"]:
        sys.argv[1:] = ["RouteTable"]
    # Computers of network egress (Api.test_egress_rules, CliClient.test_egress)
    # get a proxy folder (CA, rules, pid) of this run's own, never the host's,
    # shared by the servers and the CLI of the run.
    egress_dir = tempfile.mkdtemp(prefix="brig-serve-egress-")
    os.environ["BRIG_EGRESS_DIR"] = egress_dir
    had_network = egress_network_exists()
    try:
        prog = unittest.main(verbosity=2, exit=False)
    finally:
        egress_teardown(egress_dir, had_network)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
