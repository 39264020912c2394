"""Threads, processes and asyncio against the real daemon (label integration)."""

import asyncio
import multiprocessing
import threading
import time

import pytest

import brig
from conftest import IMAGE, LABELS

pytestmark = pytest.mark.integration

SMALL = dict(cpus=1.0, memory_mb=1024, workspace_mb=256, runtime_mb=128)


def test_16_threads_on_one_sandbox(sb):
    errors = []

    def worker(i):
        try:
            for j in range(8):
                r = sb.exec(f"echo {i}-{j}")
                assert r.text == f"{i}-{j}\n", r
                sb.files.write(f"t{i}.txt", f"{i}:{j}")
                assert sb.files.read_text(f"t{i}.txt") == f"{i}:{j}"
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    assert len(sb.files.list("/workspace")) == 16


def _open_identity(args):
    store, ns, labels = args
    import brig as b

    sb = b.Sandbox(IMAGE, ns=ns, session="race", store=store, labels=labels, **SMALL)
    out = sb.exec("echo alive").text
    sb.close()
    return sb.name, out


def test_4_processes_racing_one_identity_make_one_computer(tmpstore, ns, docker_client):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        res = pool.map(_open_identity, [(tmpstore, ns, LABELS)] * 4)  # a child's own RUN_ID would differ
    names = {n for n, _ in res}
    assert len(names) == 1 and all(o == "alive\n" for _, o in res)
    cs = docker_client.containers.list(all=True, filters={"label": [f"brig.ns={ns}", "brig.session=race"]})
    assert [c.name for c in cs] == list(names)
    brig.Sandbox.connect(names.pop(), store=tmpstore).destroy()


def test_asyncio_50_execs_on_5_sandboxes_keep_the_loop_responsive(tmpstore, ns):
    async def main():
        sbs = await asyncio.gather(*[
            brig.AsyncSandbox.create(IMAGE, ns=ns, store=tmpstore, labels=LABELS, **SMALL) for _ in range(5)])
        try:
            lags = []
            stop = asyncio.Event()

            async def ticker():
                while not stop.is_set():
                    t = time.monotonic()
                    await asyncio.sleep(0.01)
                    lags.append(time.monotonic() - t - 0.01)

            tick = asyncio.create_task(ticker())
            t0 = time.monotonic()
            results = await asyncio.gather(*[sbs[i % 5].exec(f"sleep 0.5; echo {i}") for i in range(50)])
            took = time.monotonic() - t0
            stop.set()
            await tick
            assert [r.text for r in results] == [f"{i}\n" for i in range(50)]
            assert took < 20, took  # concurrent, not 50 x 0.5 s run one by one
            # the loop kept ticking while 50 commands ran (a blocked loop would
            # show one lag as long as the whole batch); generous for a loaded box
            assert max(lags) < 0.5, max(lags)
            assert len(lags) > took / 0.1, (len(lags), took)
            # cancelling the task of an exec ends the command; the computer runs on
            task = asyncio.create_task(sbs[0].exec("sleep 30"))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await sbs[0].exec("echo ok")).text == "ok\n"
            st = await sbs[1].exec_stream("echo a; sleep 0.2; echo b >&2; exit 2")
            assert [(e.stream, e.data) async for e in st] == [("stdout", b"a\n"), ("stderr", b"b\n")]
            assert st.result is not None and st.result.exit_code == 2
            await sbs[0].files.write("a.txt", "x")
            assert await sbs[0].files.read("a.txt") == b"x"
        finally:
            await asyncio.gather(*[s.close() for s in sbs])  # anonymous: destroyed

    asyncio.run(main())
