"""brig.Uncertain: brig-init cannot be reached after a command's relay broke
(label integration). A proxy in front of dockerd (as tests/integration's C
proxy does) cuts every connection mid-command and then every attempt to
open a new relay (exec start), while the rest of the API still passes: the
command's fate cannot be learnt, so brig stops the computer, marks the
session failed and raises brig.Uncertain; recover() restores the checkpoint."""

import os
import re
import socket
import sqlite3
import tempfile
import threading
import time

import pytest

import brig
from brig import _core
from conftest import IMAGE, LABELS

pytestmark = pytest.mark.integration

DOCKER_SOCK = "/var/run/docker.sock"
EXEC_START = re.compile(rb"^POST [^ ]*/exec/[^/ ]+/start ", re.M)


class CuttingProxy:
    """A unix socket forwarding to dockerd. cut() closes every open
    connection and from then on every connection that starts an exec."""

    def __init__(self, path):
        self.path = path
        self.cutting = False
        self.cut_starts = 0
        self.mu = threading.Lock()
        self.conns = []
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(path)
        self.srv.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            d = socket.socket(socket.AF_UNIX)
            d.connect(DOCKER_SOCK)
            with self.mu:
                self.conns += [c, d]
            threading.Thread(target=self._pump, args=(c, d, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(d, c, False), daemon=True).start()

    def _pump(self, src, dst, from_client):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if from_client and self.cutting and EXEC_START.search(b):
                    self.cut_starts += 1
                    break
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.cutting = True
        with self.mu:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.srv.close()
        with self.mu:
            for s in self.conns:
                s.close()


@pytest.fixture
def proxied_engine(monkeypatch):
    """This process's brig engine goes through a CuttingProxy for the test."""
    d = tempfile.mkdtemp(prefix="brig-pyproxy-")
    p = CuttingProxy(os.path.join(d, "docker.sock"))
    saved = dict(_core._engines)
    _core._engines.clear()
    monkeypatch.setenv("DOCKER_HOST", "unix://" + p.path)
    yield p
    monkeypatch.delenv("DOCKER_HOST")
    _core._engines.clear()
    _core._engines.update(saved)
    p.close()
    os.unlink(p.path)
    os.rmdir(d)


def test_uncertain_when_brig_init_cannot_be_reached(proxied_engine, tmpstore, ns, docker_client):
    sb = brig.Sandbox(IMAGE, ns=ns, agent="py", session="cut", store=tmpstore, labels=LABELS, cpus=1.0,
                      memory_mb=512, workspace_mb=128, runtime_mb=64)
    try:
        sb.files.write("work.txt", "checkpointed")
        sb.checkpoint()
        sb.files.write("work.txt", "after the checkpoint")
        threading.Timer(1.5, proxied_engine.cut).start()
        t0 = time.monotonic()
        with pytest.raises(brig.Uncertain) as ei:
            sb.exec("sleep 60")
        assert time.monotonic() - t0 < 45
        # (A new relay is refused at its exec start, or earlier when the
        # asking request met a connection cut at the same moment.)
        msg = ei.value.message
        assert "brig-init cannot be reached" in msg and "was stopped" in msg and "recover" in msg, msg
        # Nothing runs on unseen: the computer is stopped, the session failed.
        assert docker_client.api.inspect_container(sb.name)["State"]["Running"] is False
        db = sqlite3.connect(tmpstore[len("sqlite://"):])
        try:
            (state,) = db.execute("SELECT state FROM sessions WHERE ns = ? AND agent = 'py' AND session = 'cut'",
                                  (ns,)).fetchone()
        finally:
            db.close()
        assert state == "failed"
        proxied_engine.cutting = False
        old = sb.name
        assert sb.recover() == 2 and sb.name != old
        assert sb.files.read_text("work.txt") == "checkpointed"
    finally:
        proxied_engine.cutting = False
        sb.close()
        sb.destroy()
