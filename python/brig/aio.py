"""AsyncSandbox: the Sandbox API for asyncio. Every libbrig call runs in a
thread pool, so the event loop never blocks; cancelling the task of an
exec() ends the command in the computer (as Ctrl-C does)."""

from __future__ import annotations

import asyncio
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, TypeVar, Union

from ._core import Cmd, Env, Stdin
from .files import FileInfo
from .process import ExecResult, ExecStream, OutputEvent, Process
from .sandbox import Checkpoint, Sandbox, SandboxInfo, sandboxes

__all__ = ["AsyncSandbox", "AsyncFiles", "AsyncExecStream", "asandboxes"]

T = TypeVar("T")
_pool: Optional[ThreadPoolExecutor] = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="brig-aio")
    return _pool


async def _run(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(fn, *args, **kw))


async def asandboxes(ns: Optional[str] = None) -> List[SandboxInfo]:
    """brig.sandboxes() without blocking the loop."""
    return await _run(sandboxes, ns)


class AsyncFiles:
    """Sandbox.files, awaitable."""

    def __init__(self, sb: Sandbox):
        self._f = sb.files

    async def read(self, path: str, offset: int = 0, length: int = -1) -> bytes:
        return await _run(self._f.read, path, offset, length)

    async def write(self, path: str, data: Union[bytes, str], mode: int = 0o644, parents: bool = True) -> None:
        await _run(self._f.write, path, data, mode, parents)

    async def stat(self, path: str, follow: bool = True) -> FileInfo:
        return await _run(self._f.stat, path, follow)

    async def list(self, path: str = "/workspace", depth: int = 1) -> List[FileInfo]:
        return await _run(self._f.list, path, depth)

    async def remove(self, path: str, recursive: bool = False) -> None:
        await _run(self._f.remove, path, recursive)

    async def mkdir(self, path: str, mode: int = 0o755, parents: bool = True) -> None:
        await _run(self._f.mkdir, path, mode, parents)

    async def move(self, src: str, dst: str) -> None:
        await _run(self._f.move, src, dst)


class AsyncExecStream:
    """ExecStream for asyncio: `async for ev in stream`, then stream.result.
    Leaving the loop early (or aclose()) cancels the command."""

    def __init__(self, stream: ExecStream):
        self._s = stream
        self._it = iter(stream)

    @property
    def result(self) -> Optional[ExecResult]:
        return self._s.result

    def __aiter__(self) -> AsyncIterator[OutputEvent]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[OutputEvent]:
        try:
            while True:
                ev = await _run(next, self._it, None)
                if ev is None:
                    return
                yield ev
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        await _run(self._s.close)


class AsyncSandbox:
    """Create with `sb = await AsyncSandbox.create(...)` (same arguments as
    Sandbox) or `async with await AsyncSandbox.create(...) as sb`; the methods are
    Sandbox's, awaitable."""

    def __init__(self, sb: Sandbox):
        self.sync = sb
        self.files = AsyncFiles(sb)

    @classmethod
    async def create(cls, *args: Any, **kw: Any) -> "AsyncSandbox":
        return cls(await _run(Sandbox, *args, **kw))

    @classmethod
    async def connect(cls, name: str, *, store: Optional[str] = None) -> "AsyncSandbox":
        return cls(await _run(Sandbox.connect, name, store=store))

    @property
    def name(self) -> str:
        return self.sync.name

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def exec(self, cmd: Cmd, *, timeout: Optional[float] = None, env: Env = None,
                   workdir: Optional[str] = None, stdin: Stdin = None) -> ExecResult:
        """Sandbox.exec; cancelling the awaiting task ends the command (exit 130)."""
        r, w = os.pipe()
        fut = asyncio.get_running_loop().run_in_executor(
            _executor(), functools.partial(self.sync._exec, cmd, timeout, env, workdir, stdin, r, w))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            os.write(w, b"x")
            try:
                await fut
            except BaseException:
                pass
            raise
        finally:
            if fut.done():
                os.close(r)
                os.close(w)
            else:  # only when the loop itself goes away
                fut.add_done_callback(lambda _f: (os.close(r), os.close(w)))

    async def exec_stream(self, cmd: Cmd, *, timeout: Optional[float] = None, env: Env = None,
                          workdir: Optional[str] = None, stdin: Stdin = None) -> AsyncExecStream:
        """Sandbox.exec_stream: `async for ev in await sb.exec_stream(...)`."""
        return AsyncExecStream(await _run(self.sync.exec_stream, cmd, timeout=timeout, env=env, workdir=workdir,
                                          stdin=stdin))

    async def start(self, cmd: Cmd, *, env: Env = None, workdir: Optional[str] = None,
                    tag: Optional[str] = None) -> Process:
        return await _run(self.sync.start, cmd, env=env, workdir=workdir, tag=tag)

    async def wait(self, proc: Process, timeout: Optional[float] = None) -> ExecResult:
        return await _run(proc.wait, timeout)

    async def processes(self) -> List[Dict[str, Any]]:
        return await _run(self.sync.processes)

    async def upload(self, local: str, remote: str) -> None:
        await _run(self.sync.upload, local, remote)

    async def download(self, remote: str, local: str) -> None:
        await _run(self.sync.download, remote, local)

    async def pause(self) -> None:
        await _run(self.sync.pause)

    async def resume(self) -> None:
        await _run(self.sync.resume)

    async def checkpoint(self, keep: int = 0) -> Checkpoint:
        return await _run(self.sync.checkpoint, keep)

    async def checkpoints(self) -> List[Checkpoint]:
        return await _run(self.sync.checkpoints)

    async def recover(self, checkpoint: Optional[Union[int, Checkpoint]] = None) -> int:
        return await _run(self.sync.recover, checkpoint)

    async def stop(self) -> None:
        await _run(self.sync.stop)

    async def destroy(self) -> None:
        await _run(self.sync.destroy)

    async def close(self) -> None:
        await _run(self.sync.close)
