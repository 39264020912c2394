"""Every Sandbox method against the real daemon (label integration)."""

import os
import signal
import threading
import time

import pytest

import brig
from conftest import IMAGE, LABELS

pytestmark = pytest.mark.integration


def sleeps(sb):
    """How many `sleep` processes run in the computer (the test image has no pgrep)."""
    comms = sb.exec("for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done").text.split()
    return comms.count("sleep")


def test_seed_constructor_values_land_in_docker_inspect(make_sandbox, docker_client):
    sb = make_sandbox(cpus=2.0, memory_mb=2048, pids_limit=256, workspace_mb=512, runtime_mb=256,
                      network="none", env={"SEED": "1"})
    c = docker_client.api.inspect_container(sb.name)
    hc = c["HostConfig"]
    assert hc["NanoCpus"] == 2_000_000_000
    assert hc["Memory"] == 2048 << 20
    assert hc["MemorySwap"] == 2048 << 20
    assert hc["PidsLimit"] == 256
    assert hc["NetworkMode"] == "none"
    # env values reach commands through brig-init, never the container's configuration (issue 20)
    assert not any(e.startswith("SEED=") for e in c["Config"]["Env"])
    assert c["Config"]["Labels"]["brig.ns"] == sb.ns
    assert c["Config"]["Labels"]["brig.session"] == sb.session
    vols = {m["Destination"]: m["Name"] for m in c["Mounts"]}
    ws = docker_client.api.inspect_volume(vols["/workspace"])["Options"]["o"]
    rt = docker_client.api.inspect_volume(vols["/runtime"])["Options"]["o"]
    assert "size=512m" in ws.split(",")
    assert "size=256m" in rt.split(",")
    assert sb.exec("echo $SEED").text == "1\n"


def test_exec_results(sb):
    r = sb.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out, r.ok) == (3, b"out\n", b"err\n", False, False)
    assert r.duration > 0
    assert sb.exec(["printf", "%s|", "a b", "c"]).text == "a b|c|"
    assert sb.exec("echo $A-$B", env={"A": "1", "B": "2"}).text == "1-2\n"
    sb.files.mkdir("sub")
    assert sb.exec("pwd", workdir="/workspace/sub").text == "/workspace/sub\n"
    assert sb.exec("pwd").text == "/workspace\n"
    assert sb.exec("id -u").text == "1000\n"
    assert sb.exec("wc -c", stdin="hello").text.strip() == "5"
    nf = sb.exec(["no-such-program"])
    assert nf.exit_code == 127 and b"no-such-program" in nf.stderr


def test_binary_round_trip(sb):
    data = bytes(range(256)) * 64 + os.urandom(1 << 20)
    assert sb.exec("cat", stdin=data).stdout == data
    sb.files.write("/workspace/bin.dat", data)
    assert sb.files.read("/workspace/bin.dat") == data
    assert sb.files.read("bin.dat", offset=256, length=256) == data[256:512]
    assert sb.exec("sha256sum bin.dat").text.split()[0] == __import__("hashlib").sha256(data).hexdigest()
    out = sb.exec("head -c 4096 /dev/urandom | tee r.bin; head -c 300 r.bin >&2").stdout
    assert len(out) == 4096 and sb.files.read("r.bin") == out


def test_timeout_leaves_the_computer_running_with_its_files(sb, docker_client):
    sb.files.write("keep.txt", "kept")
    r = sb.exec("echo started; sleep 30", timeout=0.5)
    assert r.timed_out and r.exit_code == 124 and r.stdout == b"started\n"
    assert r.duration < 5
    assert docker_client.api.inspect_container(sb.name)["State"]["Status"] == "running"
    assert sb.files.read_text("keep.txt") == "kept"
    assert sleeps(sb) == 0  # the whole tree was ended
    assert sb.exec("true").ok


def test_keyboard_interrupt_cancels_the_command(sb, docker_client):
    sb.files.write("keep.txt", "kept")
    t = threading.Timer(0.7, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sb.exec("sleep 30")
    assert time.monotonic() - t0 < 10
    assert docker_client.api.inspect_container(sb.name)["State"]["Status"] == "running"
    assert sb.files.read_text("keep.txt") == "kept"
    assert sleeps(sb) == 0
    assert sb.exec("echo again").text == "again\n"


def test_exec_stream(sb):
    s = sb.exec_stream("echo one; sleep 0.3; echo two >&2; exit 4")
    events = [(e.stream, e.data) for e in s]
    assert events == [("stdout", b"one\n"), ("stderr", b"two\n")]
    assert s.result is not None and s.result.exit_code == 4
    s = sb.exec_stream("echo first; sleep 30")
    for e in s:
        assert e.data == b"first\n"
        break  # leaving early cancels the command
    assert sleeps(sb) == 0


def test_background_processes(sb):
    p = sb.start("echo begin; sleep 2; echo end >&2; exit 5", tag="bg1")
    assert p.status()["state"] == "running"
    assert any(x["id"] == p.id for x in sb.processes())
    for _ in range(50):  # the output kept so far, without waiting for the end
        out, _ = p.output()
        if out:
            break
        time.sleep(0.1)
    assert out == b"begin\n"
    r = p.wait(timeout=10)
    assert (r.exit_code, r.stdout, r.stderr) == (5, b"begin\n", b"end\n")
    q = sb.start(["sleep", "60"])
    with pytest.raises(brig.Timeout):
        q.wait(timeout=0.3)  # ends the waiting, not the command
    assert q.status()["state"] == "running"
    k = q.kill()
    assert k.exit_code != 0
    assert q.status()["state"] != "running"
    with pytest.raises(brig.StateError):
        q.signal(signal.SIGTERM)


def test_files(sb):
    f = sb.files
    f.mkdir("d/e")
    f.write("d/e/x.txt", "hello", mode=0o600)
    st = f.stat("d/e/x.txt")
    assert (st.type, st.size, st.mode, st.uid, st.name) == ("file", 5, 0o600, 1000, "x.txt")
    ns = int(sb.exec(["stat", "-c", "%Y", "/workspace/d/e/x.txt"]).stdout) * 10**9
    assert ns <= st.mtime_ns < ns + 10**9 and abs(st.mtime - st.mtime_ns / 1e9) < 1e-3
    assert f.stat("/workspace/d").is_dir
    assert [e.name for e in f.list("d")] == ["e"]
    assert {e.path for e in f.list("/workspace/d/e")} == {"/workspace/d/e/x.txt"}
    f.move("d/e/x.txt", "d/y.txt")
    assert not f.exists("d/e/x.txt") and f.read_text("d/y.txt") == "hello"
    f.remove("d/y.txt")
    assert not f.exists("d/y.txt")
    with pytest.raises(brig.Conflict):
        f.remove("d")  # not empty
    f.remove("d", recursive=True)
    assert not f.exists("d")


def test_upload_download(sb, tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "top.txt").write_bytes(b"top")
    (src / "a" / "b" / "deep.bin").write_bytes(bytes(range(256)))
    os.chmod(src / "top.txt", 0o755)
    os.symlink("/etc/passwd", src / "link")
    sb.upload(src, "/workspace/up")
    assert sb.files.read("up/a/b/deep.bin") == bytes(range(256))
    assert sb.files.stat("up/top.txt").mode == 0o755
    assert not sb.files.exists("up/link")
    sb.exec("ln -s /etc/passwd up/evil; mkfifo up/fifo")
    dst = tmp_path / "dst"
    sb.download("/workspace/up", dst)
    assert (dst / "a" / "b" / "deep.bin").read_bytes() == bytes(range(256))
    assert (dst / "top.txt").read_bytes() == b"top"
    assert not os.path.lexists(dst / "evil") and not os.path.lexists(dst / "fifo")
    sb.download("up/top.txt", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_bytes() == b"top"


def test_exceptions(sb, tmpstore):
    with pytest.raises(brig.NotFound) as ei:
        sb.files.read("/workspace/missing")
    assert "missing" in ei.value.message and ei.value.name == "BRIG_ENOTFOUND"
    with pytest.raises(brig.Denied):
        sb.files.write("/etc/brig-x", "no")
    sb.files.mkdir("c")
    with pytest.raises(brig.Conflict):
        sb.files.mkdir("c", parents=False)
    with pytest.raises(brig.NotFound):
        brig.Sandbox.connect("brig-" + "0" * 64, store=tmpstore)
    with pytest.raises(brig.InvalidSpec):
        brig.Sandbox(IMAGE, memory_mb=300, workspace_mb=512, store=tmpstore, ns=sb.ns, labels=LABELS)
    with pytest.raises(brig.StateError):
        sb.recover()  # runs fine
    with pytest.raises(brig.NotFound) as ei:
        brig.Sandbox("brig-no-such-image:never", store=tmpstore, ns=sb.ns, labels=LABELS)
    with pytest.raises(brig.InvalidSpec):
        sb.exec("true", env={"BAD KEY": "x"})
    sb.pause()
    with pytest.raises(brig.StateError):
        sb.exec("true")
    sb.resume()
    assert sb.exec("true").ok
    sb.close()
    with pytest.raises(brig.StateError):
        sb.exec("true")


def test_lifecycle_checkpoint_stop_recover(make_sandbox, tmpstore, docker_client):
    sb = make_sandbox(session="life")
    sb.files.write("work.txt", "v1")
    sb.pause()
    assert docker_client.api.inspect_container(sb.name)["State"]["Status"] == "paused"
    sb.resume()
    assert sb.exec("cat work.txt").text == "v1"
    cp1 = sb.checkpoint()
    sb.files.write("work.txt", "v2")
    cp2 = sb.checkpoint()
    assert [c.id for c in sb.checkpoints()] == [cp2.id, cp1.id]
    sb.files.write("work.txt", "v3")
    sb.recover(checkpoint=cp1)
    assert sb.files.read_text("work.txt") == "v1"
    old = sb.name
    sb.stop()
    assert docker_client.api.inspect_container(old)["State"]["Status"] == "exited"
    gen = sb.recover()
    assert gen == 2 and sb.name != old
    assert sb.files.read_text("work.txt") == "v2"  # the latest checkpoint
    # a stopped session recovered from a named, older checkpoint: exactly its
    # files (v1), nothing of the latest (v2) or of a file only the latest has
    sb.files.write("only-latest.txt", "x")
    cp3 = sb.checkpoint()
    sb.stop()
    gen = sb.recover(checkpoint=cp1)
    assert gen == 3
    assert sb.files.read_text("work.txt") == "v1"
    assert sb.exec("test -e only-latest.txt").exit_code == 1
    assert cp3.id != cp1.id
    again = make_sandbox(session="life")  # adopts
    assert again.name == sb.name and again.lost is None
    assert again.exec("cat work.txt").text == "v1"
    info = [s for s in brig.sandboxes(sb.ns) if s.session == "life"]
    assert [s.name for s in info] == [sb.name] and info[0].generation == 3
    c = brig.Sandbox.connect(sb.name, store=tmpstore)
    assert (c.ns, c.agent, c.session) == (sb.ns, sb.agent, "life")
    assert c.exec("cat work.txt").text == "v1"
    c.close()
    sb.destroy()
    assert [s for s in brig.sandboxes(sb.ns) if s.session == "life"] == []
    assert sb.checkpoints() == []


def test_lost_computer_is_restored_on_open(make_sandbox):
    sb = make_sandbox(session="lost")
    sb.files.write("f.txt", "saved")
    cp = sb.checkpoint()
    sb.stop()
    sb2 = make_sandbox(session="lost")
    assert sb2.lost and "stopped" in sb2.lost
    assert sb2.restored_checkpoint == cp.id and sb2.generation == 2
    assert sb2.files.read_text("f.txt") == "saved"


def test_anonymous_sandbox_is_destroyed_on_exit(tmpstore, ns, docker_client):
    with brig.Sandbox(IMAGE, ns=ns, store=tmpstore, labels=LABELS, cpus=1.0, memory_mb=1024,
                      workspace_mb=256, runtime_mb=128) as sb:
        assert sb.anonymous
        name = sb.name
        assert sb.exec("true").ok
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(name)


def test_disposable_run(tmp_path):
    inp = tmp_path / "in.txt"
    inp.write_text("data")
    out = tmp_path / "out"
    r = brig.run("cat /inbox/in.txt; cp /inbox/in.txt /outbox/copy.txt; echo e >&2", inputs=[inp], outputs=out,
                 image=IMAGE, labels=LABELS, timeout=60)
    assert (r.exit_code, r.stdout, r.stderr) == (0, b"data", b"e\n")
    assert r.outputs == ["copy.txt"] and (out / "copy.txt").read_text() == "data"
    t = brig.run(["sleep", "30"], image=IMAGE, labels=LABELS, timeout=1)
    assert t.timed_out and t.exit_code == 124


KILL_RELAY = (r"""for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); """
              r"""if [ "$c" = "/.brig/brig-init relay " ]; then kill -9 ${p#/proc/}; fi; done; sleep 2""")


def test_a_relay_broken_mid_command_is_asked_about_and_replaced(sb, docker_client):
    sb.files.write("keep.txt", "kept")
    with pytest.raises(brig.IOFailure) as ei:
        sb.exec(KILL_RELAY)  # the command kills the relay it runs over
    assert "has ended" in ei.value.message and ei.value.exit_code != 0
    assert docker_client.api.inspect_container(sb.name)["State"]["Status"] == "running"
    assert sb.exec("cat keep.txt").text == "kept"  # over a new relay


def test_keyboard_interrupt_cancels_a_disposable_run(docker_client):
    t = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        brig.run(["sleep", "30"], image=IMAGE, labels=LABELS, timeout=60)
    assert time.monotonic() - t0 < 20
    runs = docker_client.containers.list(all=True, filters={"label": [f"brig.test={LABELS['brig.test']}",
                                                                        "brig.kind=run"]})
    assert runs == []  # removed before run() returned


def test_commands_are_audited_without_env_values(sb, tmpstore):
    import sqlite3

    sb = brig.Sandbox.connect(sb.name, store=tmpstore, audit=True)
    sb.exec(["sh", "-c", "echo -n 12345"], env={"SECRET_TOKEN": "hunter2"})
    sb.exec("sleep 5", timeout=0.3)
    db = sqlite3.connect(tmpstore[len("sqlite://"):])
    try:
        rows = db.execute("SELECT argv_json, outcome, exit_code, timed_out, stdout_bytes, container_name FROM audit "
                          "WHERE ns = ? AND session = ? ORDER BY id", (sb.ns, sb.session)).fetchall()
    finally:
        db.close()
    assert rows[-2] == ('["sh","-c","echo -n 12345"]', "ok", 0, 0, 5, sb.name)
    assert rows[-1][:4] == ('["sh","-c","sleep 5"]', "timeout", 124, 1)
    assert not any("hunter2" in str(r) for r in rows)
    sb.close()
    quiet = brig.Sandbox.connect(sb.name, store=tmpstore)  # audit off by default
    quiet.exec("echo quiet")
    quiet.close()
    db = sqlite3.connect(tmpstore[len("sqlite://"):])
    try:
        assert db.execute("SELECT count(*) FROM audit WHERE argv_json LIKE '%quiet%'").fetchone() == (0,)
    finally:
        db.close()


def test_harness_credential_goes_with_each_command_only(make_sandbox, docker_client, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
    sb = make_sandbox(harness="claude", cpus=1.0, memory_mb=1024, workspace_mb=256, runtime_mb=128)
    assert sb.exec('echo "${ANTHROPIC_API_KEY:-unset}"').text == "sk-test-not-a-real-key\n"
    assert sb.exec('echo "$ANTHROPIC_API_KEY"', env={"ANTHROPIC_API_KEY": "given"}).text == "given\n"
    c = docker_client.api.inspect_container(sb.name)
    assert "sk-test-not-a-real-key" not in str(c["Config"])
    plain = make_sandbox(cpus=1.0, memory_mb=1024, workspace_mb=256, runtime_mb=128)
    assert plain.exec('echo "${ANTHROPIC_API_KEY:-unset}"').text == "unset\n"


def test_an_unclosed_anonymous_sandbox_is_removed(tmpstore, ns, docker_client):
    import gc
    import subprocess
    import sys

    import docker.errors

    sb = brig.Sandbox(IMAGE, ns=ns, store=tmpstore, labels=LABELS, cpus=1.0, memory_mb=1024, workspace_mb=256,
                      runtime_mb=128)
    name = sb.name
    del sb
    gc.collect()
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(name)
    # alive at the interpreter's exit, never closed
    code = ("import sys, brig\n"
            f"sb = brig.Sandbox({IMAGE!r}, ns={ns!r}, store={tmpstore!r}, labels={LABELS!r}, cpus=1.0,"
            " memory_mb=1024, workspace_mb=256, runtime_mb=128)\n"
            "print(sb.name)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(brig.__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with pytest.raises(docker.errors.NotFound):
        docker_client.api.inspect_container(r.stdout.strip())
