"""Sandbox(network="egress", allow=[...]) through brig's egress proxy
(label integration). Traffic never leaves this machine: the upstreams are
the HTTPS and HTTP servers of tests/integration/helpers/egress_upstream.py on
127.0.0.1 (their own CA), and the proxy is told to resolve the test's names
to them (BRIG_EGRESS_HOSTS, the test-only resolver override). The egress
network and its proxy are one per host: the test skips when a proxy already
serves, and removes the network and its proxy after, as test_egress does."""

import os
import signal
import socket
import subprocess
import time

import pytest

import brig
from conftest import LABELS

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM = os.path.join(REPO, "tests", "integration", "helpers", "egress_upstream.py")
IMAGE = os.environ.get("BRIG_TEST_EGRESS_IMAGE") or "brig-sandbox:local"  # python3 with ssl
GATEWAY, PORT = "172.30.4.1", 3128  # BRIG_EGRESS_GATEWAY, BRIG_EGRESS_PORT

PROBE = r"""
import socket, ssl, sys, urllib.request
hp, pp = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
def get(url):
    try:
        tls = ctx if url.startswith("https") else None
        return urllib.request.urlopen(url, context=tls, timeout=20).read().decode().strip()
    except Exception as e:
        return "fail: %s" % e
print("HTTPS=" + get("https://allowed.brig.test:%s/a" % hp))
print("HTTP=" + get("http://allowed.brig.test:%s/b" % pp))
print("DENIED=" + get("https://denied.brig.test:%s/c" % hp))
try:
    socket.create_connection((sys.argv[3], int(hp)), timeout=5).close()
    print("DIRECT=reached")
except Exception as e:
    print("DIRECT=fail: %s" % e)
"""


def proxy_listening():
    # Only where the address is this machine's: never connect out.
    if not os.path.exists("/sys/class/net/brig-egress"):
        return False
    try:
        socket.create_connection((GATEWAY, PORT), timeout=2).close()
        return True
    except OSError:
        return False


@pytest.fixture
def upstreams(tmp_path, tmpstore, monkeypatch):
    if proxy_listening():
        pytest.skip(f"an egress proxy already serves on {GATEWAY}:{PORT} (one per host)")
    prog = os.environ.get("BRIG_BIN") or os.path.join(REPO, "build", "brig")
    if not os.access(prog, os.X_OK):
        pytest.skip("set BRIG_BIN to the brig program (brig runs it as the egress proxy)")
    hosts = tmp_path / "hosts"
    hosts.write_text("allowed.brig.test 127.0.0.1\ndenied.brig.test 127.0.0.1\nsecret.brig.test 127.0.0.1\n")
    monkeypatch.setenv("BRIG_BIN", prog)
    monkeypatch.setenv("BRIG_EGRESS_DIR", str(tmp_path / "egress"))
    monkeypatch.setenv("BRIG_EGRESS_HOSTS", str(hosts))
    monkeypatch.setenv("BRIG_EGRESS_TEST", "1")  # the proxy accepts the override only with it
    monkeypatch.setenv("BRIG_STORE", tmpstore)  # the proxy's ledger
    # The secret's upstream is verified against the test's CA (test-only override).
    monkeypatch.setenv("BRIG_EGRESS_UPSTREAM_CA", str(tmp_path / "ca.pem"))
    ports = tmp_path / "ports"
    up = subprocess.Popen(["/usr/bin/python3", UPSTREAM, str(tmp_path), str(ports)], stdin=subprocess.PIPE)
    try:
        for _ in range(300):
            if ports.exists():
                break
            time.sleep(0.1)
        https_port, http_port = map(int, ports.read_text().split())
        yield {"https": https_port, "http": http_port, "ca": (tmp_path / "ca.pem").read_text(), "dir": tmp_path,
               "prog": prog}
    finally:
        up.stdin.close()
        up.terminate()
        up.wait()
        # The test's computer is gone by now: the network, then its proxy (ours, by its pid).
        subprocess.run([prog, "egress", "rm"], capture_output=True)
        pidf = tmp_path / "egress" / "proxy.pid"
        for _ in range(100):
            if not pidf.exists():
                break
            time.sleep(0.1)
        try:
            pid = int(pidf.read_text())
            if pid > 1:
                os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            pass


def wait_for_our_proxy(u):
    """One proxy per host: another test's may have taken the slot meanwhile."""
    for _ in range(50):
        if (u["dir"] / "egress" / "proxy.pid").exists():
            return
        time.sleep(0.1)
    pytest.skip("another test's egress proxy serves (one per host)")


def test_egress_reaches_exactly_the_allowed_hosts(upstreams, tmpstore, ns, docker_client):
    u = upstreams
    allow = [f"allowed.brig.test:{u['https']}", f"allowed.brig.test:{u['http']}"]
    sb = brig.Sandbox(IMAGE, ns=ns, agent="py", session="egress", store=tmpstore, labels=LABELS, network="egress",
                      allow=allow, cpus=1.0, memory_mb=512, workspace_mb=128, runtime_mb=64)
    try:
        attrs = docker_client.api.inspect_container(sb.name)
        assert list(attrs["NetworkSettings"]["Networks"]) == ["brig-egress"]
        assert f"HTTPS_PROXY=http://{GATEWAY}:{PORT}" in attrs["Config"]["Env"]
        wait_for_our_proxy(u)
        rules = subprocess.run([u["prog"], "egress", "ls", sb.name], capture_output=True, text=True)
        assert all(a in rules.stdout for a in allow), (rules.stdout, rules.stderr)
        sb.files.write("ca.pem", u["ca"])
        r = sb.exec(["python3", "-c", PROBE, str(u["https"]), str(u["http"]), GATEWAY], timeout=120)
        assert r.exit_code == 0, r.stderr
        out = dict(line.split("=", 1) for line in r.text.splitlines())
        # Allowed: through the proxy, by name, verified against the test's CA.
        assert out["HTTPS"] == "hello from allowed.brig.test:%d path /a" % u["https"], out
        assert out["HTTP"].startswith("hello from allowed.brig.test"), out
        # Another name on the same upstream: the proxy's refusal.
        assert out["DENIED"].startswith("fail") and "403" in out["DENIED"], out
        # Around the proxy: nothing (its port only; the upstream's is not routed).
        assert out["DIRECT"].startswith("fail"), out
    finally:
        sb.close()
        sb.destroy()


SECRET_PROBE = r"""
import os, ssl, sys, urllib.request
ph = os.environ.get("BRIG_PY_SECRET", "")
print("PH=" + ph)
req = urllib.request.Request("https://secret.brig.test:%s/headers" % sys.argv[1], headers={"Authorization": "Bearer " + ph})
try:
    print("SECRET=" + urllib.request.urlopen(req, timeout=60, context=ssl.create_default_context()).read().decode().strip())
except Exception as e:
    print("SECRET=fail: %s" % e)
"""


def _seen(u):
    p = u["dir"] / "seen"
    return p.read_text() if p.exists() else ""


def test_secrets_never_enter(upstreams, tmpstore, ns, docker_client, monkeypatch):
    """secrets={NAME: hosts}: a placeholder inside, the value (from
    os.environ) only in the requests to those hosts, for a Sandbox and for
    brig.run."""
    u = upstreams
    value = "sk-py-" + os.urandom(12).hex()
    monkeypatch.setenv("BRIG_PY_SECRET", value)
    auth = f"Authorization: Bearer {value}\n"
    allow = [f"secret.brig.test:{u['https']}"]
    sb = brig.Sandbox(IMAGE, ns=ns, agent="py", session="secret", store=tmpstore, labels=LABELS, network="egress",
                      allow=allow, secrets={"BRIG_PY_SECRET": "secret.brig.test"}, cpus=1.0, memory_mb=512,
                      workspace_mb=128, runtime_mb=64)
    try:
        wait_for_our_proxy(u)
        before = _seen(u).count(auth)
        r = sb.exec(["python3", "-c", SECRET_PROBE, str(u["https"])], timeout=120)
        assert value not in r.text + r.stderr_text
        assert r.exit_code == 0, r.stderr
        out = dict(line.split("=", 1) for line in r.text.splitlines())
        assert out["PH"].startswith("brig-placeholder-"), out
        assert out["SECRET"] == "recorded", out
        assert _seen(u).count(auth) == before + 1
        env = sb.exec(["sh", "-c", "env; cat /proc/[0-9]*/environ"]).stdout
        assert value.encode() not in env and out["PH"].encode() in env
        attrs = docker_client.api.inspect_container(sb.name)
        assert value not in repr(attrs)
        assert attrs["Config"]["Labels"]["brig.secrets"] == "BRIG_PY_SECRET"
    finally:
        sb.close()
        sb.destroy()
    assert not (u["dir"] / "egress" / f"{sb.name}.secrets").exists()

    # brig.run: the same, for a disposable container.
    before = _seen(u).count(auth)
    r = brig.run(["python3", "-c", SECRET_PROBE, str(u["https"])], image=IMAGE, network="egress", allow=allow,
                 secrets={"BRIG_PY_SECRET": ["secret.brig.test"]}, labels=LABELS, timeout=120)
    assert value not in r.text + r.stderr_text
    assert r.exit_code == 0, r.stderr
    assert "SECRET=recorded" in r.text, r.text
    assert _seen(u).count(auth) == before + 1
    assert not list((u["dir"] / "egress").glob("brig-run-*.secrets"))


def test_secrets_refused():
    """Bad secrets= are refused before anything is made, naming the field."""
    for bad, words in (([("A", "h")], "mapping"), ({"A=v": "h"}, "not an environment variable name"),
                       ({"A": []}, "hosts"), ({"A": "a,b"}, "hosts")):
        with pytest.raises(brig.InvalidSpec, match=words):
            brig.Sandbox(IMAGE, network="egress", secrets=bad)
    os.environ.pop("BRIG_PY_UNSET_SECRET", None)
    with pytest.raises(brig.InvalidSpec, match="BRIG_PY_UNSET_SECRET: not set in brig's environment"):
        brig.run(["true"], image=IMAGE, network="egress", secrets={"BRIG_PY_UNSET_SECRET": "a.example"})
    with pytest.raises(brig.InvalidSpec, match="egress"):
        brig.run(["true"], image=IMAGE, network="none", secrets={"BRIG_PY_UNSET_SECRET": "a.example"})
