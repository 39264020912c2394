"""Commands: results, streamed output, and background processes."""

from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading
import time
from ctypes import byref, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import _lib
from ._core import FILE_TIMEOUT, MAX_OUTPUT, Stdin, _b, _deadline, _interruptible
from ._lib import lib
from .errors import ProtocolError, Timeout, Uncertain, check, make

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["ExecResult", "OutputEvent", "ExecStream", "Process"]


@dataclass
class ExecResult:
    """How a command ended. exit_code is the command's (124: timed out,
    130: cancelled, 126/127: could not be run, 128+n: killed by signal n)."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    canceled: bool = False
    duration: float = 0.0
    signal: int = 0
    stdout_dropped: int = 0
    stderr_dropped: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass
class OutputEvent:
    """A piece of a command's output as it came: stream is "stdout" or "stderr"."""

    stream: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


class _Collector:
    """Output callback state: keeps up to MAX_OUTPUT bytes per stream, or hands
    each piece to a sink."""

    def __init__(self, sink: Optional[Callable[[int, bytes], None]] = None):
        self.parts: List[List[bytes]] = [[], []]
        self.sizes = [0, 0]
        self.dropped = [0, 0]
        self.totals = [0, 0]
        self.sink = sink
        self.cb = _lib.OUTPUT_CB(self._on)

    def _on(self, stream: int, data: int, n: int, _payload: Any) -> int:
        try:
            b = ctypes.string_at(data, n)
            i = 1 if stream == 2 else 0
            self.totals[i] += n
            if self.sink is not None:
                self.sink(i, b)
                return 0
            if self.sizes[i] + n > MAX_OUTPUT:
                self.dropped[i] += n
                return 0
            self.parts[i].append(b)
            self.sizes[i] += n
        except BaseException:  # never let an exception cross into C
            pass
        return 0

    def out(self) -> bytes:
        return b"".join(self.parts[0])

    def err(self) -> bytes:
        return b"".join(self.parts[1])


class _Opts:
    """A brig_guest_exec_opts and the Python objects it points into."""

    def __init__(self, argv: Optional[List[bytes]], env: List[bytes], workdir: Optional[str], stdin: Stdin,
                 deadline_ms: int, cancel_fd: int, col: Optional[_Collector], tag: Optional[str] = None,
                 detached: bool = False, keep: int = 0):
        self.argv_list = argv or []
        self.argv = _lib.strv(argv) if argv else None
        self.env = _lib.strv(env) if env else None
        self.stdin = _b(stdin) if stdin is not None else None
        self.tag = _b(tag)
        self.workdir = _b(workdir)
        o = _lib.GuestExecOpts()
        o.version = _lib.GUEST_EXEC_OPTS_VERSION
        if self.argv is not None:
            o.argv = self.argv
        if self.env is not None:
            o.env = self.env
        o.env_count = len(env)
        o.cwd = self.workdir
        o.stdin_fd = -1
        if self.stdin is not None:
            self._stdin_buf = ctypes.create_string_buffer(self.stdin, len(self.stdin))
            o.stdin_data = ctypes.cast(self._stdin_buf, c_void_p)
            o.stdin_len = len(self.stdin)
        o.deadline_ms = deadline_ms
        o.cancel_fd = cancel_fd
        if col is not None:
            o.on_output = col.cb
        o.detached = detached
        o.keep = keep
        o.tag = self.tag
        o.resize_fd = -1
        self.c = o


def _result(ex: _lib.GuestExit, col: _Collector, t0: float) -> ExecResult:
    return ExecResult(ex.code, col.out(), col.err(), bool(ex.timed_out), bool(ex.canceled),
                      time.monotonic() - t0, ex.signal, col.dropped[0], col.dropped[1])


_seq = itertools.count(1)


def _exec_tag() -> str:
    """A tag naming one command, so brig-init can be asked about it over a new relay."""
    return f"py{os.getpid()}-{time.monotonic_ns()}-{next(_seq)}"


def _finish_exec(sb: "Sandbox", rc: int, err: c_void_p, ex: _lib.GuestExit, col: _Collector, t0: float,
                 opts: "_Opts") -> ExecResult:
    """The result of brig_guest_exec's return, audited as brig_session_exec audits."""
    tag = (opts.tag or b"").decode()
    if rc == 0:
        r = _result(ex, col, t0)
        sb._audit(opts.argv_list, "timeout" if r.timed_out else "cancel" if r.canceled else "ok", r, col)
        return r
    e = make(rc, err)
    if e.code in (-5, -15) and ex.code in (126, 127):  # not found / not executable: nothing ran
        r = _result(ex, col, t0)
        r.stderr += e.message.encode() + b"\n"
        sb._audit(opts.argv_list, "ok", r, col)
        return r
    if e.code in (Uncertain.code, ProtocolError.code):
        e = sb._after_broken_relay(e, ex.proc, tag)
        r = ExecResult(getattr(e, "exit_code", -1), duration=time.monotonic() - t0)
        sb._audit(opts.argv_list, "uncertain" if isinstance(e, Uncertain) else "error", r, col)
    raise e


class ExecStream:
    """Iterates a running command's OutputEvents; `result` is set once the
    iteration ends. Closing it early (break, close()) cancels the command."""

    def __init__(self, sb: "Sandbox", argv: List[bytes], env: List[bytes], workdir: Optional[str], stdin: Stdin,
                 timeout: Optional[float]):
        self.result: Optional[ExecResult] = None
        self._q: "queue.Queue[Any]" = queue.Queue()
        self._r, self._w = os.pipe()
        self._col = _Collector(lambda i, b: self._q.put(OutputEvent("stderr" if i else "stdout", b)))
        self._t0 = time.monotonic()
        self._tag = _exec_tag()
        self._opts = _Opts(argv, env, workdir, stdin, _deadline(timeout), self._r, self._col, self._tag)
        self._sb = sb
        self._th = threading.Thread(target=self._work, name="brig-stream", daemon=True)
        self._th.start()

    def _work(self) -> None:
        try:
            ex = _lib.GuestExit()

            def call(g: int) -> Tuple[int, c_void_p]:
                err = c_void_p()
                return lib.brig_guest_exec(g, byref(self._opts.c), byref(ex), byref(err)), err

            rc, err = self._sb._gcall(call)
            self._q.put(("done", _finish_exec(self._sb, rc, err, ex, self._col, self._t0, self._opts)))
        except BaseException as e:
            self._q.put(("error", e))

    def __iter__(self) -> Iterator[OutputEvent]:
        try:
            while True:
                item = self._q.get()
                if isinstance(item, OutputEvent):
                    yield item
                    continue
                kind, val = item
                if kind == "error":
                    raise val
                self.result = val
                return
        finally:
            self.close()

    def close(self) -> None:
        """Cancels the command if it still runs and waits for it to end."""
        if self._th.is_alive():
            try:
                os.write(self._w, b"x")
            except OSError:
                pass
            self._th.join()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._r = self._w = -1


class Process:
    """A background command started with Sandbox.start(): it runs in the
    computer detached from this process (brig-init keeps its output)."""

    def __init__(self, sb: "Sandbox", pid: int):
        self.sandbox = sb
        self.id = pid

    def __repr__(self) -> str:
        return f"Process(id={self.id}, sandbox={self.sandbox.name!r})"

    def status(self) -> Dict[str, Any]:
        """brig-init's state of the command: {"id","state", and the exit fields once exited}."""
        out = c_void_p()
        dl = _deadline(FILE_TIMEOUT)
        self.sandbox._gcheck(lambda g, err: lib.brig_guest_status(g, byref(out), self.id, None, dl, byref(err)))
        return _lib.json_take(out.value) or {}

    def _attach(self, timeout: Optional[float]) -> Tuple[int, c_void_p, _lib.GuestExit, _Collector, float]:
        col = _Collector()
        ex = _lib.GuestExit()
        t0 = time.monotonic()
        r, w = os.pipe()
        try:
            opts = _Opts(None, [], None, None, _deadline(timeout), r, col)

            def call(g: int) -> Tuple[int, c_void_p]:
                err = c_void_p()
                return lib.brig_guest_attach(g, self.id, byref(opts.c), byref(ex), byref(err)), err

            rc, err = _interruptible(lambda: self.sandbox._gcall(call), w)
        finally:
            os.close(r)
            os.close(w)
        return rc, err, ex, col, t0

    def wait(self, timeout: Optional[float] = None) -> ExecResult:
        """Waits for the command to end and returns its exit and kept output.
        Timeout (or Ctrl-C) ends only the waiting, not the command: brig.Timeout."""
        rc, err, ex, col, t0 = self._attach(timeout)
        check(rc, err)
        return _result(ex, col, t0)

    def output(self) -> Tuple[bytes, bytes]:
        """The output kept so far (stdout, stderr), without waiting for the end."""
        rc, err, ex, col, t0 = self._attach(0.3)
        if rc not in (0, Timeout.code):
            check(rc, err)
        elif rc:
            make(rc, err)  # frees it
        return col.out(), col.err()

    def kill(self) -> ExecResult:
        """Ends the command's whole tree (certain) and returns how it ended."""
        ex = _lib.GuestExit()
        dl = _deadline(FILE_TIMEOUT)
        self.sandbox._gcheck(lambda g, err: lib.brig_guest_kill(g, self.id, byref(ex), dl, byref(err)))
        return ExecResult(ex.code, timed_out=bool(ex.timed_out), canceled=bool(ex.canceled), signal=ex.signal)

    def signal(self, sig: int) -> None:
        """Sends one signal to the command's process group (brig.StateError: it ended)."""
        dl = _deadline(FILE_TIMEOUT)
        self.sandbox._gcheck(lambda g, err: lib.brig_guest_signal(g, self.id, sig, dl, byref(err)))
