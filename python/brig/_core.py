"""What the rest of the package shares: the process's engine and stores,
argument conversion, deadlines, Ctrl-C handling, and brig_spec building."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from ctypes import byref, c_void_p
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._lib import lib
from .errors import InvalidSpec, check

DEFAULT_IMAGE = "brig-sandbox:local"
DEFAULT_NS = "python"
DEFAULT_AGENT = "sandbox"
FILE_TIMEOUT = 60.0  # seconds, for file and process calls without a timeout of their own
MAX_OUTPUT = 64 << 20  # bytes kept per stream by exec (the rest is counted, not kept)

Cmd = Union[str, Sequence[str]]
Env = Union[Mapping[str, str], Sequence[str], None]
Stdin = Union[bytes, str, None]

# ---- per-process handles: one engine, one store per URL ----

_proc_mu = threading.Lock()
_engines: Dict[int, int] = {}
_stores: Dict[Tuple[int, Optional[str]], int] = {}


def _after_fork() -> None:
    global _proc_mu
    _proc_mu = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork)


def _engine() -> int:
    """The process's brig_engine (thread-safe, pooled connections); a forked
    child opens its own rather than share the parent's sockets."""
    pid = os.getpid()
    e = _engines.get(pid)
    if e:
        return e
    with _proc_mu:
        e = _engines.get(pid)
        if not e:
            out, err = c_void_p(), c_void_p()
            check(lib.brig_engine_open(byref(out), None, byref(err)), err)
            e = _engines[pid] = out.value
        return e


def _store(url: Optional[str]) -> int:
    """The process's brig_store of url (None: $BRIG_STORE, else the default file)."""
    key = (os.getpid(), url)
    s = _stores.get(key)
    if s:
        return s
    with _proc_mu:
        s = _stores.get(key)
        if not s:
            out, err = c_void_p(), c_void_p()
            check(lib.brig_store_open(byref(out), _b(url), byref(err)), err)
            s = _stores[key] = out.value
        return s


def _b(s: Optional[Union[str, bytes]]) -> Optional[bytes]:
    if s is None:
        return None
    return s if isinstance(s, bytes) else s.encode("utf-8")


def _deadline(timeout: Optional[float]) -> int:
    """A monotonic deadline in ms (brig's clock is CLOCK_MONOTONIC, as Python's); 0: none."""
    if timeout is None:
        return 0
    return int(time.monotonic() * 1000 + max(timeout, 0.001) * 1000)


def _argv(cmd: Cmd) -> List[bytes]:
    if isinstance(cmd, (str, bytes)):
        return [b"sh", b"-c", _b(cmd)]  # type: ignore[list-item]
    argv = [_b(a) for a in cmd]
    if not argv:
        raise InvalidSpec("argv is empty", -1)
    return argv  # type: ignore[return-value]


def _env_entries(env: Env) -> List[bytes]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [_b(f"{k}={v}") for k, v in env.items()]  # type: ignore[misc]
    return [_b(e) for e in env]  # type: ignore[misc]


def _exec_env(env: Env, harness: int) -> List[bytes]:
    """env validated by brig, plus the harness's credentials from this
    process's environment when env leaves them out (brig_env_exec): they go
    with each command and never into the container's configuration."""
    entries = _env_entries(env)
    if not entries and harness == 0:
        return []
    arr = _lib.strv(entries)
    out, err = c_void_p(), c_void_p()
    check(lib.brig_env_exec(byref(out), arr, len(entries), harness, byref(err)), err)
    return [_b(x) for x in (_lib.json_take(out.value) or [])]  # type: ignore[misc]


def _interruptible(fn: Callable[[], Any], cancel_w: int) -> Any:
    """Runs fn (a blocking C call given a cancel fd) so that Ctrl-C cancels it.

    A C call in the main thread would hold off KeyboardInterrupt until it
    returned; so in the main thread it runs in a worker while the main
    thread waits interruptibly. On KeyboardInterrupt the cancel fd is made
    readable (brig-init then ends the command's whole tree; the computer runs
    on with its files), the worker is awaited, and the interrupt re-raised.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn()
    box: List[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append((True, fn()))
        except BaseException as e:  # handed to the caller
            box.append((False, e))
        finally:
            done.set()

    t = threading.Thread(target=work, name="brig-call", daemon=True)
    t.start()
    try:
        done.wait()
    except KeyboardInterrupt:
        os.write(cancel_w, b"x")
        while not done.is_set():
            try:
                done.wait()
            except KeyboardInterrupt:
                pass  # already cancelling; brig-init's kill is bounded
        raise
    ok, val = box[0]
    if not ok:
        raise val
    return val


def _secret_items(secrets: Optional[Mapping[str, Union[str, Sequence[str]]]]) -> List[Tuple[str, str]]:
    """secrets={"NAME": "host" or ["host", ...]} as (NAME, "host,host") pairs.
    Only names and hosts: each value is read from this process's environment
    (os.environ[NAME]) when the computer is made, never passed here."""
    if not secrets:
        return []
    if not isinstance(secrets, Mapping):
        raise InvalidSpec("secrets: give a mapping of environment names to hosts, e.g. "
                          "{'OPENAI_API_KEY': ['api.openai.com']}", -1)
    out = []
    for name, hosts in secrets.items():
        if not isinstance(name, str) or not name or "=" in name or "@" in name:
            raise InvalidSpec(f"secrets: {name!r} is not an environment variable name (the value is read "
                              "from os.environ, never given here)", -1)
        hl = [hosts] if isinstance(hosts, str) else list(hosts)
        if not hl or not all(isinstance(h, str) and h and "," not in h for h in hl):
            raise InvalidSpec(f"secrets: {name}: give its hosts as a name or a list of names, e.g. "
                              "['api.example.com']", -1)
        out.append((name, ",".join(hl)))
    return out


class _Spec:
    """A brig_spec in an opaque buffer, filled through brig_spec_set (so the
    struct itself needs no mirror)."""

    def __init__(self, image: str, cpus: float, memory_mb: int, pids_limit: int, workspace_mb: int,
                 runtime_mb: int, network: str, env: Env, harness: str, labels: Optional[Mapping[str, str]],
                 allow: Optional[Sequence[str]] = None, runtime: Optional[str] = None,
                 secrets: Optional[Mapping[str, Union[str, Sequence[str]]]] = None):
        self.buf = ctypes.create_string_buffer(_lib.SPEC_SIZE)
        lib.brig_spec_init(self.buf)
        try:
            for k, v in (("image", image), ("cpus", repr(float(cpus))), ("memory-mb", memory_mb),
                         ("pids", pids_limit), ("workspace-mb", workspace_mb), ("runtime-mb", runtime_mb),
                         ("network", network), ("harness", harness)):
                err = c_void_p()
                check(lib.brig_spec_set(self.buf, _b(k), _b(str(v)), byref(err)), err)
            if allow:
                if isinstance(allow, (str, bytes)):
                    raise InvalidSpec("allow: give a list of rules, e.g. ['api.example.com', '*.example.org:8443']",
                                      -1)
                err = c_void_p()
                check(lib.brig_spec_set(self.buf, b"allow", _b(",".join(allow)), byref(err)), err)
            if runtime:
                err = c_void_p()
                check(lib.brig_spec_set(self.buf, b"runtime", _b(runtime), byref(err)), err)
            for name, hosts in _secret_items(secrets):
                err = c_void_p()
                check(lib.brig_spec_set(self.buf, b"secret", _b(f"{name}@{hosts}"), byref(err)), err)
            for e in _env_entries(env):
                err = c_void_p()
                check(lib.brig_spec_add_env(self.buf, e, byref(err)), err)
            for k, v in (labels or {}).items():
                err = c_void_p()
                check(lib.brig_spec_add_label(self.buf, _b(f"{k}={v}"), byref(err)), err)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.buf is not None:
            lib.brig_spec_clear(self.buf)
            self.buf = None  # type: ignore[assignment]
