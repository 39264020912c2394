#!/usr/bin/python3
"""Warm pools of brig serve (--pool IMAGE=N) through the API and brig's CLI:
claims, refill, races, restart, gc of a gone server, max-age. Each test
starts its own server (own socket, so its own server id and pool labels),
uses namespaces of its own, and removes every container and volume it or
its server made, even when a check fails.

Environment: BRIG_BIN (the brig binary), BRIG_TEST_IMAGE (default
brig-test:local).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_test import BRIG, IMAGE, PREFIX, PyClient, Server  # noqa: E402

NS = PREFIX + "p"


def docker(*args):
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True)


def metric(client, name):
    st, _, b = client.call("GET", "/metrics")
    assert st == 200, b
    m = re.search(r'^%s\{image="[^"]*"\} (\d+)$' % re.escape(name), b.decode(), re.M)
    return int(m.group(1)) if m else None


class Pool(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory()
        self.run_dir = os.path.join(self.tmpdir.name, "run")
        os.environ["BRIG_RUN_DIR"] = self.run_dir
        self.store = "sqlite://" + os.path.join(self.tmpdir.name, "db")
        self.srv = None
        self.sids = set()

    def tearDown(self):
        rc, log = 0, ""
        try:
            if self.srv:
                # SIGTERM: a sanitizer build reports leaks and errors at exit.
                rc = self.srv.stop()
                log = self.srv.logtext()
        finally:
            self.cleanup()
            self.tmpdir.cleanup()
        self.assertEqual(rc, 0, "brig serve exited %s:\n%s" % (rc, log[-4000:]))
        self.assertNotIn("runtime error", log)
        self.assertNotIn("Sanitizer", log)

    def cleanup(self):
        ids = []
        for sid in self.sids:
            ids += docker("ps", "-aq", "--filter", "label=brig.pool=" + sid).stdout.split()
        ids += docker("ps", "-aq", "--filter", "label=brig.ns=" + NS).stdout.split()
        if ids:
            docker("rm", "-f", "-v", *ids)
        vols = docker("volume", "ls", "-q").stdout.split()
        mine = [v for v in vols if any(v.startswith("brig-pool-" + s + "-") for s in self.sids)]
        mine += docker("volume", "ls", "-q", "--filter", "label=brig.ns=" + NS).stdout.split()
        if mine:
            docker("volume", "rm", "-f", *mine)

    def start(self, *extra, size=2):
        self.srv = Server(self.tmpdir.name, extra=["--pool", "%s=%d" % (IMAGE, size)] + list(extra), tokens=False)
        for _ in range(100):
            m = re.search(r"pools of server ([0-9a-f]{12})", self.srv.logtext())
            if m:
                self.sids.add(m.group(1))
                self.sid = m.group(1)
                break
            time.sleep(0.05)
        self.assertTrue(self.sid)
        return PyClient(self.srv.sock)

    def wait_pool(self, c, n, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            if metric(c, "brig_pool_size") == n:
                return
            time.sleep(0.2)
        self.fail("pool did not reach %d: %s\n%s" % (n, metric(c, "brig_pool_size"), self.srv.logtext()[-3000:]))

    def members(self):
        out = docker("ps", "-a", "--filter", "label=brig.pool=" + self.sid, "--format", "{{.ID}} {{.Names}}").stdout
        return sorted(line.split()[0] for line in out.splitlines() if " brig-pool-" in line)

    def create(self, c, session, spec=None):
        body = {"ns": NS, "agent": "agent", "session": session}
        if spec:
            body["spec"] = spec
        st, _, b = c.call("POST", "/v1/computers", body)
        self.assertIn(st, (200, 201), b)
        return json.loads(b)

    def cli(self, *args, extra_env=None, **kw):
        env = dict(os.environ, BRIG_STORE=self.store, BRIG_IMAGE=IMAGE, **(extra_env or {}))
        env.pop("BRIG_HOST", None)
        return subprocess.run([BRIG] + list(args), capture_output=True, text=True, env=env, **kw)

    def ident(self, session):
        return ["--ns", NS, "--agent", "agent", "--session", session]

    def test_claim_refill_identity(self):
        c = self.start(size=2)
        self.wait_pool(c, 2)
        before = self.members()
        t0 = time.time()
        # From t0 on, however late the stream subscribes.
        events = subprocess.Popen(["curl", "-sN", "--max-time", "60", "--unix-socket", self.srv.sock,
                                   "http://brig/v1/events?ns=%s&since_ms=%d" % (NS, t0 * 1000)],
                                  stdout=subprocess.PIPE)
        seen = []
        reader = threading.Thread(target=lambda: [seen.append(json.loads(line)) for line in events.stdout])
        reader.start()
        t = time.time()
        comp = self.create(c, "one")
        took = time.time() - t
        self.assertEqual((comp["ns"], comp["agent"], comp["session"], comp["generation"]), (NS, "agent", "one", 1))
        self.assertFalse(comp["name"].startswith("brig-pool-"), comp["name"])
        self.assertIn(comp["id"][:12], before, "a member was claimed (took %.0f ms)" % (took * 1000))
        want = ("rename", comp["name"], "one", 1)
        end = time.time() + 20
        while time.time() < end and want not in [(e["action"], e["name"], e["session"], e["generation"])
                                                 for e in list(seen)]:
            time.sleep(0.2)
        events.terminate()
        reader.join()
        events.wait()
        self.assertIn(want, [(e["action"], e["name"], e["session"], e["generation"]) for e in seen])
        labels = json.loads(docker("inspect", "--format", "{{json .Config.Labels}}", comp["name"]).stdout)
        self.assertEqual(labels.get("brig.pool"), self.sid)
        st, _, b = c.call("POST", "/v1/computers/%s/agent/one/exec" % NS, {"argv": ["sh", "-c", "id -u; echo hi"]})
        self.assertEqual(st, 200, b)
        self.assertEqual(json.loads(b)["stdout"]["text"], "1000\nhi\n")
        # The CLI, a process of its own (no cache): ls, inspect, exec --session.
        r = self.cli("ls", "--ns", NS, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        ls = json.loads(r.stdout)
        self.assertEqual([(x["name"], x["session"], x["generation"]) for x in ls], [(comp["name"], "one", 1)])
        r = self.cli("inspect", *self.ident("one"), "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["id"], comp["id"])
        r = self.cli("exec", *self.ident("one"), "--", "echo", "direct")
        self.assertEqual((r.returncode, r.stdout), (0, "direct\n"), r.stderr)
        # The same spec hash as a fresh create of the same spec (no pool).
        r = self.cli("up", *self.ident("fresh"), "--image", IMAGE, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        fresh = json.loads(r.stdout)
        fresh = fresh.get("computer", fresh)
        self.assertEqual(fresh["spec_hash"], comp["spec_hash"])
        # Sessions: the store recorded it like a fresh create.
        r = self.cli("sessions", "ls", "--ns", NS, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {s["session"]: s for s in json.loads(r.stdout)}
        self.assertEqual(rows["one"]["generation"], 1)
        self.assertIn("running", json.dumps(rows["one"]))
        # Refilled, and the member is no member any more.
        self.wait_pool(c, 2)
        self.assertNotIn(comp["id"][:12], self.members())
        # An unclaimed member is nobody's computer.
        r = self.cli("inspect", docker("ps", "--filter", "label=brig.pool=" + self.sid, "--filter",
                                       "name=brig-pool-", "--format", "{{.Names}}").stdout.split()[0])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("warm pool member", r.stderr)
        # Destroy through the CLI: container, pool-named volumes and the identity record go.
        vols = docker("inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}", comp["name"]).stdout.split()
        vols = [v for v in vols if v.startswith("brig-pool-")]
        self.assertEqual(len(vols), 2, vols)
        r = self.cli("destroy", *self.ident("one"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotEqual(docker("inspect", comp["name"]).returncode, 0)
        left = set(docker("volume", "ls", "-q").stdout.split())
        self.assertFalse(left & set(vols + [comp["name"] + "-identity"]), left & set(vols))
        # A spec that differs (a label) is a plain create: the pool is untouched.
        pool_before = self.members()
        comp2 = self.create(c, "labelled", {"labels": {"brig.test": PREFIX}})
        self.assertNotIn(comp2["id"][:12], pool_before)
        self.assertIsNone(json.loads(docker("inspect", "--format", "{{json .Config.Labels}}",
                                            comp2["name"]).stdout).get("brig.pool"))
        # Adopting an existing computer (another up of the same session) never touches the pool.
        claims = metric(c, "brig_pool_claims_total")
        again = self.create(c, "one-more")
        self.assertEqual(self.create(c, "one-more")["id"], again["id"])
        self.assertEqual(metric(c, "brig_pool_claims_total"), claims + 1)
        r = self.cli("up", *self.ident("fresh"), "--image", IMAGE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.create(c, "fresh")["id"], fresh["id"])
        self.assertEqual(metric(c, "brig_pool_claims_total"), claims + 1)
        self.assertNotIn(fresh["name"] + "-identity", docker("volume", "ls", "-q").stdout.split())

    def test_16_identities_from_4(self):
        c = self.start(size=4)
        self.wait_pool(c, 4)
        out, errs = {}, []

        def one(i):
            try:
                out[i] = self.create(PyClient(self.srv.sock), "many%d" % i)
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e))
        th = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        [t.start() for t in th]
        [t.join() for t in th]
        self.assertEqual(errs, [])
        self.assertEqual(len({v["id"] for v in out.values()}), 16)
        self.assertGreaterEqual(metric(c, "brig_pool_claims_total"), 4)
        for i, v in out.items():
            self.assertEqual(v["session"], "many%d" % i)
        r = self.cli("ls", "--ns", NS, "-q")
        self.assertEqual(sorted(r.stdout.split()), sorted(v["name"] for v in out.values()))
        for i in range(16):
            st, _, b = c.call("DELETE", "/v1/computers/%s/agent/many%d" % (NS, i))
            self.assertIn(st, (200, 204), b)
        self.assertEqual(self.cli("ls", "--ns", NS, "-q").stdout.split(), [])
        names = [v["name"] for v in out.values()]
        vols = docker("volume", "ls", "-q").stdout.split()
        self.assertEqual([v for v in vols if any(v.startswith(n) for n in names)], [])
        # No member leaked: the pool holds its size and nothing else is left.
        self.wait_pool(c, 4)
        self.assertEqual(len(self.members()), 4)

    def test_16_creates_one_identity(self):
        c = self.start(size=4)
        self.wait_pool(c, 4)
        out, errs = [], []

        def one():
            try:
                out.append(self.create(PyClient(self.srv.sock), "same"))
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e))
        th = [threading.Thread(target=one) for _ in range(16)]
        [t.start() for t in th]
        [t.join() for t in th]
        self.assertEqual(errs, [])
        self.assertEqual(len({v["id"] for v in out}), 1, out)
        self.assertLessEqual(metric(c, "brig_pool_claims_total"), 1)
        self.assertEqual(len(self.cli("ls", "--ns", NS, "-q").stdout.split()), 1)
        # Members that lost the rename went back: the pool is whole again.
        self.wait_pool(c, 4)
        self.assertEqual(len(self.members()), 4)

    def test_claim_races_plain_create(self):
        c = self.start(size=2)
        for i in range(3):
            self.wait_pool(c, 2)
            res = {}

            def api():
                res["api"] = self.create(PyClient(self.srv.sock), "race%d" % i)

            def direct():
                res["cli"] = self.cli("up", *self.ident("race%d" % i), "--image", IMAGE, "--json")
            th = [threading.Thread(target=api), threading.Thread(target=direct)]
            [t.start() for t in th]
            [t.join() for t in th]
            self.assertEqual(res["cli"].returncode, 0, res["cli"].stderr)
            d = json.loads(res["cli"].stdout)
            d = d.get("computer", d)
            self.assertEqual(d["id"], res["api"]["id"])
            self.assertEqual(len(self.cli("ls", "--ns", NS, "--label", "brig.session=race%d" % i, "-q").stdout.split()),
                             1)

    def test_restart_adopts_then_gc_of_gone_server(self):
        c = self.start(size=2)
        self.wait_pool(c, 2)
        before = self.members()
        self.assertEqual(self.srv.stop(), 0)
        self.assertEqual(self.members(), before, "members stay for a restart")
        c = self.start(size=2)
        self.wait_pool(c, 2)
        self.assertEqual(self.members(), before)
        self.assertEqual(metric(c, "brig_pool_made_total"), 0)
        self.assertIn("adopted", self.srv.logtext())
        # gc leaves a live server's members alone...
        r = self.cli("gc")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.members(), before)
        # ...also when it cannot see the lock (another BRIG_RUN_DIR): young members stay...
        r = self.cli("gc", extra_env={"BRIG_RUN_DIR": os.path.join(self.tmpdir.name, "elsewhere")})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.members(), before)
        # ...and removes those of one that is gone (kill -9: its lock is free).
        self.srv.stop(signal.SIGKILL)
        self.srv = None
        r = self.cli("gc")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.members(), [])
        vols = docker("volume", "ls", "-q").stdout.split()
        self.assertEqual([v for v in vols if v.startswith("brig-pool-" + self.sid)], [])

    def test_max_age_replaces(self):
        c = self.start("--pool-max-age", "4", size=1)
        self.wait_pool(c, 1)
        first = self.members()
        end = time.time() + 90
        while time.time() < end and (metric(c, "brig_pool_replaced_total") or 0) < 1:
            time.sleep(0.3)
        self.assertGreaterEqual(metric(c, "brig_pool_replaced_total"), 1)
        self.wait_pool(c, 1)
        now = self.members()
        self.assertEqual(len(now), 1)
        self.assertNotEqual(now, first)
        self.assertNotEqual(docker("inspect", first[0]).returncode, 0)

    def test_dead_member_replaced(self):
        c = self.start(size=1)
        self.wait_pool(c, 1)
        first = self.members()
        docker("kill", first[0])
        end = time.time() + 90
        while time.time() < end and (metric(c, "brig_pool_failures_total") or 0) < 1:
            time.sleep(0.3)
        self.wait_pool(c, 1)
        now = self.members()
        self.assertEqual(len(now), 1)
        self.assertNotEqual(now, first)
        comp = self.create(c, "afterdead")
        self.assertEqual(comp["state"], "running")

    def test_bad_pool_flags(self):
        for args, want in ((["--pool", IMAGE], "--pool"), (["--pool", IMAGE + "=0"], "--pool N"),
                           (["--pool", IMAGE + "=65"], "--pool N"), (["--pool", "=3"], "--pool"),
                           (["--pool", "brig-no-such-image:none=1"], "no such image"),
                           (["--pool", IMAGE + "=1", "--pool", IMAGE + "=2"], "given twice"),
                           (["--pool", IMAGE + "=1", "--pool-max-age", "0"], "--pool-max-age")):
            r = subprocess.run([BRIG, "serve", "--listen", "unix://" + os.path.join(self.tmpdir.name, "bad.sock"),
                                "--store", self.store] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 125, (args, r.stderr))
            self.assertIn(want, r.stderr, args)
            self.assertIn("--pool", r.stderr, args)
        self.assertEqual(docker("ps", "-aq", "--filter", "label=brig.pool.image=brig-no-such-image:none").stdout, "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
