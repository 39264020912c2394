#!/usr/bin/python3
"""brig serve's hardening (issue 17's security review): tar in/out as the
computer's user through brig-init, the server's spec policy, namespaced
runs, per-token transfer caps, cancel at the end of the drain, TLS 1.2+
only, and lifecycle routes recorded in the store. Same helpers, prefix and
clean-up as serve_test.py.

Usage: serve_harden_test.py [Class …]
Environment: BRIG_BIN, BRIG_TEST_IMAGE (as serve_test.py).
"""
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_test import (BRIG, LABEL, NS_A, NS_B, PREFIX, TOK_A, TOK_ALL, TOK_B, PyClient, Server,  # noqa: E402
                        UnixConnection, attach_open, docker_cleanup, free_port)

SECRET = "root-only-" + PREFIX


def tar_of(entries):
    """entries: (name, bytes) for files, (name, None) for dirs, (name, "->target") for symlinks;
    a third item is the entry's mode."""
    tb = io.BytesIO()
    with tarfile.open(fileobj=tb, mode="w") as tf:
        for name, data, *mode in entries:
            ti = tarfile.TarInfo(name)
            if mode:
                ti.mode = mode[0]
            if data is None:
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif isinstance(data, str):
                ti.type, ti.linkname = tarfile.SYMTYPE, data[2:]
                tf.addfile(ti)
            else:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    return tb.getvalue()


class Base(unittest.TestCase):
    extra = []

    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory()
        cls.srv = Server(cls.tmpdir.name, extra=cls.extra)
        cls.py = PyClient(cls.srv.sock)

    @classmethod
    def tearDownClass(cls):
        try:
            rc = cls.srv.stop()
        finally:
            docker_cleanup()
            cls.tmpdir.cleanup()
        assert rc == 0, "brig serve exited %s:\n%s" % (rc, cls.srv.logtext()[-4000:])

    def path(self, session, tail="", ns=NS_A):
        return "/v1/computers/%s/agent/%s%s" % (ns, session, tail)

    def create(self, session, spec=None, ns=NS_A, tok=TOK_A):
        sp = {"labels": {"brig.test": PREFIX}}
        sp.update(spec or {})
        return self.py.call("POST", "/v1/computers", {"ns": ns, "agent": "agent", "session": session, "spec": sp},
                            token=tok)

    def created(self, session):
        st, _, b = self.create(session)
        self.assertIn(st, (200, 201), b)
        return json.loads(b)

    def sh(self, session, script):
        st, _, b = self.py.call("POST", self.path(session, "/exec"), {"argv": ["sh", "-c", script]}, token=TOK_A)
        self.assertEqual(st, 200, b)
        r = json.loads(b)
        self.assertEqual(r["exit_code"], 0, b)
        return r["stdout"]["text"]

    def check_metadata(self, session):
        """stat and list of files/stat, files/list: numeric owner, mtime in
        seconds and exact nanoseconds, as stat(1) in the computer sees them."""
        self.sh(session, "mkdir -p /workspace/md && echo x > /workspace/md/new && "
                         "touch -d '2001-02-03 04:05:06' /workspace/md/old")
        want = {}
        for name in ("new", "old"):
            sec, _, hms, _ = self.sh(session, "stat -c '%Y %y' /workspace/md/" + name).split()
            frac = hms.split(".")[1] if "." in hms else ""
            want[name] = (int(sec), int(sec) * 10**9 + int((frac + "0" * 9)[:9]))
        for name, (sec, ns) in want.items():
            st, _, b = self.py.call("GET", self.path(session, "/files/stat?path=md/" + name), token=TOK_A)
            self.assertEqual(st, 200, b)
            j = json.loads(b)
            self.assertEqual((j["uid"], j["gid"], j["mtime"], j["mtime_ns"]), (1000, 1000, sec, ns), j)
            self.assertIsInstance(j["owner"], str)
        st, _, b = self.py.call("GET", self.path(session, "/files/list?path=md"), token=TOK_A)
        self.assertEqual(st, 200, b)
        got = {e["name"]: (e["uid"], e["gid"], e["mtime"], e["mtime_ns"]) for e in json.loads(b)["entries"]}
        self.assertEqual(got, {n: (1000, 1000, sec, ns) for n, (sec, ns) in want.items()})

    def assertFail(self, resp, status, code=None, *words):
        st, _, b = resp
        self.assertEqual(st, status, b)
        j = json.loads(b)
        if code:
            self.assertEqual(j["code"], code, b)
        for w in words:
            self.assertIn(w, j["message"])
        for t in (TOK_A, TOK_B, TOK_ALL):
            self.assertNotIn(t, b.decode(errors="replace"))
        return j


class Archive(Base):
    """Tar in and out through brig-init as uid 1000."""

    extra = ["--max-transfers", "1"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        st, _, b = cls.py.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "tar",
                                                          "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
        assert st in (200, 201), b
        cls.name = json.loads(b)["name"]

    def test_metadata_through_brig_init(self):
        self.created("md")
        self.check_metadata("md")

    def test_tar_out_does_not_follow_planted_links(self):
        self.sh("tar", "mkdir -p /workspace/d")
        # A root-only file, as the image or Docker could leave one.
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "rootonly")
            with open(f, "w") as fh:
                fh.write(SECRET + "\n")
            os.chmod(f, 0o600)
            for dst in ("/workspace/d/rootonly", "/runtime/rootonly"):  # docker cp: owned by root
                subprocess.run(["docker", "cp", f, self.name + ":" + dst], check=True, capture_output=True)
        # uid 1000 cannot read it
        self.assertFail(self.py.call("GET", self.path("tar", "/files?path=d/rootonly"), token=TOK_A), 403, "denied")
        self.sh("tar", "echo hi > /workspace/d/a && ln -sf /runtime/rootonly /workspace/d/s && "
                       "ln -sf /runtime/rootonly /workspace/top && ln -sfn /runtime /workspace/d/rt && "
                       "mkdir -p /workspace/d/e/f && echo deep > /workspace/d/e/f/g")
        st, h, b = self.py.call("GET", self.path("tar", "/archive?path=d"), token=TOK_A)
        self.assertEqual(st, 200, b)
        self.assertNotIn(SECRET.encode(), b)
        with tarfile.open(fileobj=io.BytesIO(b)) as tf:
            m = {x.name: x for x in tf.getmembers()}
            self.assertEqual(tf.extractfile(m["d/a"]).read(), b"hi\n")
            self.assertEqual(tf.extractfile(m["d/e/f/g"]).read(), b"deep\n")
            self.assertTrue(m["d/s"].issym())
            self.assertEqual(m["d/s"].linkname, "/runtime/rootonly")
            self.assertTrue(m["d/rt"].issym())
            self.assertNotIn("d/rt/rootonly", m)
            self.assertNotIn("d/rootonly", m, "a file uid 1000 cannot read was sent")
            self.assertTrue(m["d"].isdir())
            self.assertEqual(m["d/a"].uid, 1000)
        # The path itself a planted link: sent as the link, not what it names.
        st, _, b = self.py.call("GET", self.path("tar", "/archive?path=top"), token=TOK_A)
        self.assertEqual(st, 200, b)
        self.assertNotIn(SECRET.encode(), b)
        with tarfile.open(fileobj=io.BytesIO(b)) as tf:
            (m,) = tf.getmembers()
            self.assertEqual((m.name, m.issym(), m.linkname), ("top", True, "/runtime/rootonly"))
        # A root-only file named directly: left out, never read as root.
        st, _, b = self.py.call("GET", self.path("tar", "/archive?path=/runtime/rootonly"), token=TOK_A)
        self.assertEqual(st, 200, b)
        self.assertNotIn(SECRET.encode(), b)
        self.assertEqual(tarfile.open(fileobj=io.BytesIO(b)).getmembers(), [])
        self.assertFail(self.py.call("GET", self.path("tar", "/archive?path=nope"), token=TOK_A), 404, "not_found")
        self.assertFail(self.py.call("GET", self.path("tar", "/archive?path=/"), token=TOK_A), 400, "invalid")

    def test_tar_out_long_names_and_large_file(self):
        long = "n" * 120
        self.sh("tar", "mkdir -p /workspace/big/%s && head -c 3000000 /dev/urandom > /workspace/big/%s/f && "
                       "ln -sf %s /workspace/big/l && sha256sum /workspace/big/%s/f" % (long, long, "t" * 150, long))
        want = self.sh("tar", "sha256sum < /workspace/big/%s/f" % long).split()[0]
        st, _, b = self.py.call("GET", self.path("tar", "/archive?path=/workspace/big/"), token=TOK_A)
        self.assertEqual(st, 200, b)
        import hashlib
        with tarfile.open(fileobj=io.BytesIO(b)) as tf:
            data = tf.extractfile("big/%s/f" % long).read()
            self.assertEqual(hashlib.sha256(data).hexdigest(), want)
            self.assertEqual(tf.getmember("big/l").linkname, "t" * 150)

    def test_tar_in_as_uid_1000(self):
        st, _, b = self.py.call("PUT", self.path("tar", "/archive?path=/workspace"), token=TOK_A,
                                raw=tar_of([("in", None), ("in/sub/x.txt", b"x" * 70000), ("in/y", b"y")]))
        self.assertEqual(st, 204, b)
        out = self.sh("tar", "stat -c '%u %s %n' /workspace/in/sub/x.txt /workspace/in/y /workspace/in")
        self.assertEqual(out.split("\n")[0], "1000 70000 /workspace/in/sub/x.txt")
        self.assertIn("1000 1 /workspace/in/y", out)
        # /runtime/.brig is root's (the env file, brig's started markers).
        before = self.sh("tar", "ls -la /runtime/.brig; cat /runtime/.brig/* 2>/dev/null | sha256sum")
        self.assertRegex(before, r"d\S+ +\d+ root +root .* \.\n", "/runtime/.brig is not root's")
        j = self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/runtime"), token=TOK_A,
                                         raw=tar_of([(".brig/evil", b"x"), (".brig/env", b"X=1\n")])), 403, "denied")
        self.assertIn("/runtime/.brig", j["message"])
        self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/runtime/.brig"), token=TOK_A,
                                     raw=tar_of([("evil", b"x")])), 403, "denied")
        # …nor through a link the tenant planted.
        self.sh("tar", "ln -sfn /runtime/.brig /workspace/lnk")
        self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/workspace/lnk"), token=TOK_A,
                                     raw=tar_of([("evil", b"x")])), 403, "denied")
        self.assertEqual(self.sh("tar", "ls -la /runtime/.brig; cat /runtime/.brig/* 2>/dev/null | sha256sum"), before)
        # Links: made by brig-init as uid 1000 when they stay inside the tree
        # (an existing entry is replaced); others refuse the tar.
        self.sh("tar", "mkdir -p /workspace/ln && echo old > /workspace/ln/l")
        st, _, b = self.py.call("PUT", self.path("tar", "/archive?path=/workspace/ln"), token=TOK_A,
                                raw=tar_of([("t.txt", b"target"), ("l", "->t.txt"), ("d", None), ("d/up", "->../t.txt")]))
        self.assertEqual(st, 204, b)
        self.assertEqual(self.sh("tar", "cd /workspace/ln && readlink l && readlink d/up && cat l d/up && stat -c %u l"),
                         "t.txt\n../t.txt\ntargettarget1000\n")
        for bad in ("->/etc/passwd", "->../../x"):
            self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/workspace"), token=TOK_A,
                                         raw=tar_of([("ok.txt", b"1"), ("l2", bad)])), 400, "unsafe", "tar in")
        self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/runtime/.brig"), token=TOK_A,
                                     raw=tar_of([("l", "->x")])), 403, "denied", "symlink")
        self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/workspace"), token=TOK_A,
                                     raw=b"not a tar" * 100), 400, "invalid", "tar in")
        self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/workspace/in/y"), token=TOK_A,
                                     raw=tar_of([("z", b"1")])), 400, "invalid", "not a directory")
        self.assertFail(self.py.call("PUT", self.path("tar", "/archive?path=/nope"), token=TOK_A,
                                     raw=tar_of([("z", b"1")])), 404, "not_found")

    def test_tar_out_cut_when_over_a_cap(self):
        """A tar that breaks a cap mid-stream ends the connection without the
        chunked end: a client never takes a cut tar for a whole one."""
        self.sh("tar", "mkdir -p /workspace/many && cd /workspace/many && seq 50001 | xargs touch")
        conn = UnixConnection(self.srv.sock, timeout=120)
        conn.request("GET", self.path("tar", "/archive?path=many"), headers={"Authorization": "Bearer " + TOK_A})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        import http.client
        with self.assertRaises(http.client.IncompleteRead):
            r.read()
        conn.close()
        self.sh("tar", "rm -rf /workspace/many")
        self.assertIn("cut short", self.srv.logtext())

    def test_transfers_capped_per_token(self):
        self.sh("tar", "head -c 67108864 /dev/zero > /workspace/huge && echo s > /workspace/small")
        # A client that asks for a large tar and reads nothing holds its slot.
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.srv.sock)
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (self.path("tar", "/archive?path=huge"), TOK_A)).encode())
        s.recv(1024)  # the answer has begun
        try:
            c = PyClient(self.srv.sock)
            self.assertFail(c.call("GET", self.path("tar", "/archive?path=huge"), token=TOK_A), 429, "too_many",
                            "retry")
            self.assertFail(c.call("POST", "/v1/runs", {"ns": NS_A, "argv": ["true"]}, token=TOK_A), 429, "too_many")
            # Another token has its own slots: its own namespace's run goes.
            st, _, b = c.call("POST", "/v1/runs", {"ns": NS_B, "argv": ["true"],
                                                   "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_B)
            self.assertEqual(st, 200, b)
        finally:
            s.close()
        for _ in range(100):  # the slot comes back once the server sees the client leave
            st, _, b = PyClient(self.srv.sock).call("GET", self.path("tar", "/archive?path=small"), token=TOK_A)
            if st != 429:
                break
            time.sleep(0.1)
        self.assertEqual(st, 200, b)


class ArchiveNotRoot(Base):
    """brig serve as a user that is not root (in the docker group): a tar
    whose directories the user could not enter or empty (mode 0000, 0644) is
    unpacked whole, with its modes, and its staging removed."""

    UID = 65534

    @classmethod
    def setUpClass(cls):
        import grp
        try:
            gid = grp.getgrnam("docker").gr_gid
        except KeyError:
            raise unittest.SkipTest("no docker group")
        if os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"):
            raise unittest.SkipTest("needs root and setpriv to run brig serve as another user")
        cls.tmpdir = tempfile.TemporaryDirectory()
        os.chmod(cls.tmpdir.name, 0o777)
        wrap = ["/usr/bin/setpriv", "--reuid", str(cls.UID), "--regid", str(gid), "--clear-groups"]
        # its staging directory (/tmp need not be writable by it)
        cls.stage = os.path.join(cls.tmpdir.name, "stage")
        os.mkdir(cls.stage)
        os.chown(cls.stage, cls.UID, -1)
        saved = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = cls.stage
        try:
            cls.srv = Server(cls.tmpdir.name, wrap=wrap)
        finally:
            if saved is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = saved
        cls.py = PyClient(cls.srv.sock)

    def staged(self):
        return os.listdir(self.stage)

    def test_unreadable_directories(self):
        self.created("nr")
        st, _, b = self.py.call("PUT", self.path("nr", "/archive?path=/workspace"), token=TOK_A,
                                raw=tar_of([("d", None, 0o000), ("d/f", b"hello", 0o640), ("d/e", None, 0o555),
                                            ("d/e/g", b"g", 0o400), ("d/e/z", b"", 0o000), ("p", None)]))
        self.assertEqual(st, 204, b)
        out = self.sh("nr", "cd /workspace && stat -c '%a %u %n' d d/f d/e d/e/g d/e/z p && cat d/f d/e/g")
        self.assertEqual(out, "700 1000 d\n640 1000 d/f\n755 1000 d/e\n400 1000 d/e/g\n0 1000 d/e/z\n"
                              "744 1000 p\nhellog")
        self.assertEqual(self.staged(), [])


class Streams(Base):
    """One token holds at most --max-streams attach streams; a refusal comes
    before the upgrade, other tokens keep theirs, and a closed stream (or
    an attach answered without the upgrade) gives its slot back."""

    extra = ["--max-streams", "2"]

    def attach(self, ns=NS_A, tok=TOK_A, body=None):
        return attach_open(self.srv.sock, self.path("st", "/exec/attach", ns=ns), body or {"argv": ["cat"]}, tok)

    def test_streams_capped_per_token(self):
        self.created("st")
        st, _, b = self.create("st", ns=NS_B, tok=TOK_B)
        self.assertIn(st, (200, 201), b)
        # Answered without the upgrade (a bad body): no slot kept.
        for _ in range(3):
            st, _, body, s = self.attach(body={"argv": []})
            self.assertEqual(st, 400, body)
        opened = []
        try:
            for _ in range(2):
                st, _, rest, s = self.attach()
                self.assertEqual(st, 101, rest)
                opened.append(s)
            st, _, body, s = self.attach()
            self.assertIsNone(s)
            self.assertEqual(st, 429, body)
            j = json.loads(body)
            self.assertEqual(j["code"], "too_many", body)
            self.assertIn("attach streams", j["message"])
            st, _, rest, s = self.attach(ns=NS_B, tok=TOK_B)  # another token: its own slots
            self.assertEqual(st, 101, rest)
            opened.append(s)
        finally:
            for s in opened:
                s.close()
        for i in range(2):
            for _ in range(100):  # the slots come back once the server sees the streams close
                st, _, rest, s = self.attach()
                if st != 429:
                    break
                time.sleep(0.1)
            self.assertEqual(st, 101, rest)
            self.addCleanup(s.close)


class McpSessions(Base):
    """MCP over HTTP: 32 sessions per token; past that the token's own least
    recently used idle session ends, never another token's."""

    def mcp(self, tok, sid=None, method="initialize", id=1):
        body = {"jsonrpc": "2.0", "id": id, "method": method}
        if method == "initialize":
            body["params"] = {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "cap", "version": "1"}}
        h = {"Accept": "application/json, text/event-stream"}
        if sid:
            h["Mcp-Session-Id"] = sid
        ns = NS_A if tok == TOK_A else NS_B
        st, hs, b = self.py.call("POST", "/v1/mcp/%s/agent/mcpcap" % ns, body, token=tok, headers=h)
        return st, {k.lower(): v for k, v in hs.items()}.get("mcp-session-id"), b

    def test_sessions_capped_per_token(self):
        st, sid_b, b = self.mcp(TOK_B)
        self.assertEqual(st, 200, b)
        sids = []
        for _ in range(33):
            st, sid, b = self.mcp(TOK_A)
            self.assertEqual(st, 200, b)
            sids.append(sid)
        self.assertEqual(self.mcp(TOK_A, sids[0], "ping")[0], 404)  # A's oldest went
        for sid in sids[1:]:
            st, _, b = self.mcp(TOK_A, sid, "ping")
            self.assertEqual(st, 200, b)
        st, _, b = self.mcp(TOK_B, sid_b, "ping")  # B's stays
        self.assertEqual(st, 200, b)
        self.assertIn("least recently used", self.srv.logtext())

    def test_busy_sessions_refused(self):
        """All 32 of a token's sessions inside a call: its next initialize
        is 429, and no other token's session is ended for it."""
        self.created("mcpbusy")  # labelled, so the clean-up finds it
        path = "/v1/mcp/%s/agent/mcpbusy" % NS_A
        hdr = {"Accept": "application/json, text/event-stream"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "cap", "version": "1"}}}
        st, sid_b, b = self.mcp(TOK_B)
        self.assertEqual(st, 200, b)
        held = []
        try:
            for i in range(32):
                st, h, b = self.py.call("POST", path, init, token=TOK_A, headers=hdr)
                self.assertEqual(st, 200, b)
                sid = {k.lower(): v for k, v in h.items()}["mcp-session-id"]
                call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "run", "arguments": {"command": "sleep 60"}}}).encode()
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.srv.sock)
                s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\n"
                           "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                           "Content-Length: %d\r\n\r\n" % (path, TOK_A, sid, len(call))).encode() + call)
                held.append(s)
                s.settimeout(60)
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))  # the call runs
            st, _, b = self.py.call("POST", path, init, token=TOK_A, headers=hdr)
            self.assertEqual(st, 429, b)
            j = json.loads(b)
            self.assertEqual(j["code"], "too_many", b)
            self.assertIn("busy", j["message"])
            st, _, b = self.mcp(TOK_B, sid_b, "ping")
            self.assertEqual(st, 200, b)
        finally:
            for s in held:
                s.close()  # the client leaves: its call is cancelled


class NoGuest(Base):
    """A computer made without brig-init (BRIG_GUEST=0, as before it): tar
    in/out refuse instead of falling back to Docker's archive API as root."""

    @classmethod
    def setUpClass(cls):
        os.environ["BRIG_GUEST"] = "0"
        try:
            super().setUpClass()
        finally:
            del os.environ["BRIG_GUEST"]

    def test_metadata_through_exec(self):
        self.created("md")
        self.check_metadata("md")

    def test_tar_refused(self):
        self.created("old")
        for method, raw in (("GET", None), ("PUT", tar_of([("x", b"1")]))):
            self.assertFail(self.py.call(method, self.path("old", "/archive?path=/workspace"), raw=raw, token=TOK_A),
                            409, "state", "brig-init")

    def test_native_refused(self):
        # brig fs and brig ps through the server: brig_computer_guest's one message, 409 as before
        self.created("nat")
        for tail in ("/files/list?path=/workspace&native=true", "/processes?native=true"):
            self.assertFail(self.py.call("GET", self.path("nat", tail), token=TOK_A), 409, "state",
                            "has no brig-init", "brig recover")


class Options(unittest.TestCase):
    def test_bad_options(self):
        for args, words in ((["--allow-publish-address", "example.org"], "numeric"),
                            (["--allow-publish-address", "1.2.3.4:80"], "numeric"),
                            (["--max-transfers", "0"], "--max-transfers"),
                            (["--max-streams", "0"], "--max-streams"), (["--max-streams", "4097"], "--max-streams")):
            p = subprocess.run([BRIG, "serve", "--listen", "unix:///nonexistent/s"] + args, capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn(words, p.stderr)
        p = subprocess.run([BRIG, "serve", "--help"], capture_output=True, text=True, timeout=30)
        for o in ("--allow-runtime", "--allow-custom-seccomp", "--allow-publish-address", "--max-transfers",
                  "--max-streams"):
            self.assertIn(o, p.stdout)


class Policy(Base):
    """What a token's spec may ask for, and namespaced runs."""

    extra = ["--allow-runtime", "brig-test-no-such-runtime", "--allow-publish-address", "192.0.2.7"]

    def test_runtime(self):
        j = self.assertFail(self.create("rt", {"runtime": "runsc"}), 403, "policy", "runtime", "--allow-runtime")
        self.assertIn("brig-test-no-such-runtime", j["message"])
        # An allowed one passes the policy (and meets the daemon, which lacks it).
        st, _, b = self.create("rt", {"runtime": "brig-test-no-such-runtime"})
        self.assertNotEqual(st, 403, b)
        self.assertIn("runtime", json.loads(b)["message"])

    def test_seccomp(self):
        self.assertFail(self.create("sc", {"seccomp_profile": ""}), 403, "policy", "seccomp_profile",
                        "--allow-custom-seccomp")
        self.assertFail(self.create("sc", {"seccomp_profile": '{"defaultAction":"SCMP_ACT_ALLOW"}'}), 403, "policy",
                        "seccomp_profile")

    def test_publish(self):
        for addr in ("0.0.0.0", "[::]", "172.30.0.1"):
            j = self.assertFail(self.create("pub", {"network": "isolated", "publish": ["%s:18080:80" % addr]}), 403,
                                "policy", "publish", "--allow-publish-address")
            self.assertIn("192.0.2.7", j["message"])
        # Runs are checked too.
        self.assertFail(self.py.call("POST", "/v1/runs", {"ns": NS_A, "argv": ["true"], "spec": {"runtime": "runc"}},
                                     token=TOK_A), 403, "policy", "runtime")

    def test_runs_namespaced(self):
        self.assertFail(self.py.call("POST", "/v1/runs", {"argv": ["true"]}, token=TOK_A), 400, "invalid", "ns")
        self.assertFail(self.py.call("POST", "/v1/runs", {"ns": NS_B, "argv": ["true"]}, token=TOK_A), 403,
                        "forbidden")
        self.assertFail(self.py.call("POST", "/v1/runs", {"ns": "Bad NS!", "argv": ["true"]}, token=TOK_A), 400,
                        "invalid")
        st, _, b = self.py.call("POST", "/v1/runs", {"ns": NS_A, "argv": ["echo", "ok"],
                                                     "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
        self.assertEqual((st, json.loads(b)["stdout"]["text"]), (200, "ok\n"), b)

    def test_lifecycle_recorded(self):
        self.assertIn(self.create("life")[0], (200, 201))

        def state():
            st, _, b = self.py.call("GET", "/v1/sessions?ns=" + NS_A, token=TOK_A)
            return {x["session"]: x["state"] for x in json.loads(b)["sessions"]}["life"]

        self.assertEqual(state(), "running")
        for verb, want in (("pause", "paused"), ("resume", "running"), ("stop", "destroyed")):
            st, _, b = self.py.call("POST", self.path("life", "/" + verb), token=TOK_A)
            self.assertEqual(st, 200, b)
            self.assertEqual(state(), want, verb)
        # As brig up after brig stop: the files are gone, so only a fresh generation.
        self.assertFail(self.create("life"), 409, "state", "--fresh")
        st, _, b = self.py.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "life", "fresh": True,
                                                          "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
        self.assertEqual(st, 201, b)
        self.assertEqual(state(), "running")
        st, _, b = self.py.call("DELETE", self.path("life"), token=TOK_A)
        self.assertEqual(st, 204, b)
        self.assertEqual(state(), "destroyed")


class Drain(unittest.TestCase):
    """At the end of --drain, execs and runs still going are cancelled and answered."""

    def test_long_calls_cancelled(self):
        with tempfile.TemporaryDirectory() as d:
            srv = Server(d, extra=["--drain", "2"])
            try:
                c = PyClient(srv.sock)
                st, _, b = c.call("POST", "/v1/computers", {"ns": NS_A, "agent": "agent", "session": "drain",
                                                            "spec": {"labels": {"brig.test": PREFIX}}}, token=TOK_A)
                self.assertIn(st, (200, 201), b)
                name = json.loads(b)["name"]
                results = {}

                def call(key, path, body):
                    try:
                        results[key] = PyClient(srv.sock).call("POST", path, body, token=TOK_A)
                    except Exception as e:  # noqa: BLE001
                        results[key] = e

                ts = [threading.Thread(target=call, args=a) for a in (
                    ("exec", "/v1/computers/%s/agent/drain/exec" % NS_A, {"argv": ["sleep", "300"]}),
                    ("run", "/v1/runs", {"ns": NS_A, "argv": ["sleep", "300"],
                                         "spec": {"labels": {"brig.test": PREFIX}}}))]
                def stream(key, path, body=None):
                    try:
                        conn = UnixConnection(srv.sock, timeout=60)
                        conn.request("POST" if body else "GET", path, body=json.dumps(body) if body else None,
                                     headers={"Authorization": "Bearer " + TOK_A})
                        r = conn.getresponse()
                        lines = []
                        while True:
                            line = r.readline()
                            if not line:
                                break
                            lines.append(json.loads(line))
                        results[key] = (r.status, lines, time.monotonic())
                    except Exception as e:  # noqa: BLE001
                        results[key] = e

                ts.append(threading.Thread(target=stream, args=(
                    "stream", "/v1/computers/%s/agent/drain/exec?stream=true" % NS_A, {"argv": ["sleep", "300"]})))
                ts.append(threading.Thread(target=stream, args=("events", "/v1/events?ns=" + NS_A)))
                for t in ts:
                    t.start()
                time.sleep(3)
                t0 = time.monotonic()
                srv.p.send_signal(signal.SIGTERM)
                self.assertEqual(srv.p.wait(40), 0, srv.logtext()[-3000:])
                took = time.monotonic() - t0
                for t in ts:
                    t.join(30)
                self.assertLess(took, 2 + 10 + 5, "the drain did not end its calls")
                st, _, b = results["exec"]
                self.assertEqual(st, 200, b)
                self.assertTrue(json.loads(b)["canceled"], b)
                st, _, b = results["run"]
                self.assertEqual((st, json.loads(b)["code"]), (409, "canceled"), b)
                self.assertIn("cancelling them", srv.logtext())
                # A streamed exec gets its end (cancelled) as its last event;
                # an event stream ends whole as soon as the drain begins.
                st, lines, _ = results["stream"]
                self.assertEqual((st, lines[-1]["type"], lines[-1]["canceled"]), (200, "exit", True), lines)
                st, lines, ended = results["events"]
                self.assertEqual(st, 200)
                self.assertLess(ended - t0, 2, "the event stream held the drain")
                # Nothing half-made: the run's container is gone, the computer runs on.
                left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=" + LABEL, "--filter",
                                       "label=brig.kind=run"], capture_output=True, text=True).stdout.split()
                self.assertEqual(left, [])
                st = subprocess.run(["docker", "inspect", "-f", "{{.State.Status}}", name], capture_output=True,
                                    text=True).stdout.strip()
                self.assertEqual(st, "running")
            finally:
                srv.stop(signal.SIGKILL)
                docker_cleanup()


class Tls(unittest.TestCase):
    """TLS 1.2 and 1.3 only, AEAD ciphers with forward secrecy."""

    def test_old_tls_refused(self):
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
            url = "https://127.0.0.1:%d/v1/health" % port

            def curl(*args):
                return subprocess.run(["curl", "-sS", "--cacert", cert, "-o", "/dev/null", "-w", "%{http_code}"]
                                      + list(args) + [url], capture_output=True, text=True, timeout=30)

            def s_client(*args):
                return subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                                      input="", capture_output=True, text=True, timeout=30)

            try:
                for _ in range(100):
                    if curl().stdout == "200":
                        break
                    time.sleep(0.05)
                self.assertEqual(curl("--tlsv1.3").stdout, "200")
                self.assertEqual(curl("--tlsv1.2", "--tls-max", "1.2").stdout, "200")
                # The client lowered to allow TLS 1.0/1.1 (OpenSSL's own floor
                # would refuse them on its side otherwise): the server refuses.
                for v in ("-tls1", "-tls1_1"):
                    p = s_client(v, "-cipher", "DEFAULT:@SECLEVEL=0")
                    self.assertNotEqual(p.returncode, 0, v)
                    self.assertNotIn("Cipher is ECDHE", p.stdout, v)
                p = curl("--tlsv1.0", "--tls-max", "1.1", "--ciphers", "DEFAULT:@SECLEVEL=0")
                self.assertNotEqual(p.stdout, "200")
                # TLS 1.2 with a CBC cipher or RSA key exchange: refused too.
                for cipher in ("AES128-SHA", "ECDHE-RSA-AES128-SHA", "AES256-GCM-SHA384"):
                    p = s_client("-tls1_2", "-cipher", cipher)
                    self.assertNotEqual(p.returncode, 0, cipher)
                p = s_client("-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            finally:
                srv.terminate()
                self.assertEqual(srv.wait(30), 0)
                log.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
