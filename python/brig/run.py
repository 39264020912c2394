"""brig.run: one command in one fresh, disposable hardened container."""

from __future__ import annotations

import os
import time
from ctypes import byref, c_void_p, string_at
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Union

from . import _lib
from ._lib import lib
from .errors import make
from ._core import DEFAULT_IMAGE, Cmd, Env, _argv, _b, _engine, _interruptible, _Spec
from .process import ExecResult

__all__ = ["run", "RunResult"]


@dataclass
class RunResult(ExecResult):
    """An ExecResult plus what the run copied out and how long its steps took."""

    outputs: List[str] = field(default_factory=list)  # paths relative to the outputs directory
    oom_killed: bool = False
    image_id: str = ""


def _cap(c: _lib.Capture) -> bytes:
    return string_at(c.data, c.len) if c.data and c.len else b""


def run(cmd: Cmd, *, inputs: Sequence[Union[str, os.PathLike]] = (), outputs: Optional[Union[str, os.PathLike]] = None,
        timeout: float = 600, image: str = DEFAULT_IMAGE, cpus: float = 1.0, memory_mb: int = 1024,
        pids_limit: int = 256, workspace_mb: int = 256, runtime_mb: int = 128, network: str = "none",
        env: Env = None, workdir: Optional[str] = None, labels: Optional[Mapping[str, str]] = None,
        allow: Optional[Sequence[str]] = None,
        secrets: Optional[Mapping[str, Union[str, Sequence[str]]]] = None) -> RunResult:
    """Runs cmd in a new container that is removed before this returns.

    inputs (host paths) appear read-only under /inbox; what the command
    leaves in /outbox is copied into the host directory `outputs` (all or
    nothing; nothing can land outside it). At the timeout the run ends with
    exit 124 and timed_out=True (outputs are still copied). Ctrl-C cancels
    the run (its container is removed) and is re-raised. network, allow
    and secrets are Sandbox's.
    """
    spec = _Spec(image, cpus, memory_mb, pids_limit, workspace_mb, runtime_mb, network, env, "none", labels,
                 allow, None, secrets)
    r, w = os.pipe()
    res = _lib.RunResult()
    try:
        argv = _lib.strv(_argv(cmd))
        ins = [_b(os.fspath(p)) for p in inputs]
        inv = _lib.strv(ins)  # type: ignore[arg-type]
        o = _lib.RunOpts()
        o.version = _lib.RUN_OPTS_VERSION
        o.spec = _lib.ctypes.cast(spec.buf, c_void_p)
        o.argv = argv
        o.inputs = inv
        o.input_count = len(ins)
        outdir = _b(os.fspath(outputs)) if outputs is not None else None
        o.out_dir = outdir
        o.workdir = _b(workdir)
        o.timeout_s = max(1, int(-(-timeout // 1)))
        o.stdin_fd = -1
        o.cancel_fd = r
        t0 = time.monotonic()
        err = c_void_p()
        rc = _interruptible(lambda: lib.brig_run(_engine(), byref(o), byref(res), byref(err)), w)
        if rc:
            raise make(rc, err)
        ex = res.exec
        return RunResult(ex.exit_code, _cap(ex.out), _cap(ex.err), bool(ex.timed_out), bool(ex.canceled),
                         time.monotonic() - t0, 0, ex.out.dropped, ex.err.dropped,
                         [res.outputs[i].decode("utf-8", "replace") for i in range(res.output_count)],
                         bool(res.oom_killed), (res.image_id or b"").decode())
    finally:
        lib.brig_run_result_clear(byref(res))
        spec.close()
        os.close(r)
        os.close(w)
