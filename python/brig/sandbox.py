"""Sandbox: one long-lived, locked-down computer of an agent session, driven
through libbrig. Commands and file operations go over one brig-init relay
held by the Sandbox object (brig/guest.h), so a command costs milliseconds
rather than a Docker exec's tens."""

from __future__ import annotations

import ctypes
import os
import queue
import secrets
import stat as _stat
import threading
import time
from ctypes import byref, c_bool, c_char_p, c_int, c_int64, c_size_t, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._lib import lib
from .errors import Canceled, Error, InvalidSpec, NotFound, NotSent, StateError, Timeout, check, make

__all__ = [
    "Sandbox", "SandboxInfo", "ExecResult", "OutputEvent", "ExecStream", "Process", "Files", "FileInfo",
    "Checkpoint", "sandboxes", "DEFAULT_IMAGE",
]

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


# ---- results ----


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


@dataclass
class FileInfo:
    """A file in the computer as brig-init sees it."""

    path: str
    type: str  # file, dir, symlink, fifo, socket, char, block
    mode: int
    size: int
    mtime: float  # unix seconds
    uid: int
    gid: int
    link: Optional[str] = None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


@dataclass
class Checkpoint:
    """A stored checkpoint of a session's /workspace and /runtime."""

    id: int
    generation: int
    digest: str
    bytes_raw: int
    bytes_stored: int
    created_ms: int


@dataclass
class SandboxInfo:
    """A brig computer as Docker reports it (brig.sandboxes())."""

    name: str
    ns: str
    agent: str
    session: str
    generation: int
    state: str
    image: str
    network: str
    harness: str
    created: int
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def _from_json(cls, j: Dict[str, Any]) -> "SandboxInfo":
        return cls(j.get("name") or "", j.get("ns") or "", j.get("agent") or "", j.get("session") or "",
                   int(j.get("generation") or 0), j.get("state") or "", j.get("image") or "",
                   j.get("network") or "", j.get("harness") or "", int(j.get("created") or 0), j)


def _computer_json(c: int) -> Dict[str, Any]:
    return _lib.json_take(lib.brig_computer_to_json(c)) or {}


def _checkpoint(p: _lib.StoreCheckpoint) -> Checkpoint:
    return Checkpoint(p.id, p.generation, (p.digest or b"").decode(), p.bytes_raw, p.bytes_stored, p.created_ms)


def sandboxes(ns: Optional[str] = None) -> List[SandboxInfo]:
    """Lists brig's computers (all namespaces, or ns only) as Docker reports them."""
    out, n, err = c_void_p(), c_size_t(), c_void_p()
    check(lib.brig_computer_list(_engine(), byref(out), byref(n), _b(ns), None, byref(err)), err)
    try:
        arr = ctypes.cast(out, ctypes.POINTER(c_void_p))
        return [SandboxInfo._from_json(_computer_json(arr[i])) for i in range(n.value)]
    finally:
        lib.brig_computer_free_array(out, n.value)


# ---- exec plumbing ----


class _Collector:
    """Output callback state: keeps up to MAX_OUTPUT bytes per stream, or hands
    each piece to a sink."""

    def __init__(self, sink: Optional[Callable[[int, bytes], None]] = None):
        self.parts: List[List[bytes]] = [[], []]
        self.sizes = [0, 0]
        self.dropped = [0, 0]
        self.sink = sink
        self.cb = _lib.OUTPUT_CB(self._on)

    def _on(self, stream: int, data: int, n: int, _payload: Any) -> int:
        try:
            b = ctypes.string_at(data, n)
            i = 1 if stream == 2 else 0
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


def _finish_exec(rc: int, err: c_void_p, ex: _lib.GuestExit, col: _Collector, t0: float) -> ExecResult:
    if rc == 0:
        return _result(ex, col, t0)
    e = make(rc, err)
    if e.code in (-5, -15) and ex.code in (126, 127):  # not found / not executable: nothing ran
        r = _result(ex, col, t0)
        r.stderr += e.message.encode() + b"\n"
        return r
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
        self._opts = _Opts(argv, env, workdir, stdin, _deadline(timeout), self._r, self._col)
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
            self._q.put(("done", _finish_exec(rc, err, ex, self._col, self._t0)))
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


class Files:
    """Files in the computer, through brig-init as the sandbox's user (uid
    1000): only /workspace and /runtime are writable. Relative paths are
    /workspace's."""

    def __init__(self, sb: "Sandbox"):
        self._sb = sb

    @staticmethod
    def _abs(path: str) -> bytes:
        if not path.startswith("/"):
            path = "/workspace/" + path
        return path.encode("utf-8")

    def read(self, path: str, offset: int = 0, length: int = -1, timeout: Optional[float] = FILE_TIMEOUT) -> bytes:
        """Returns the file's bytes (length -1: to the end)."""
        parts: List[bytes] = []

        def on(data: int, n: int, _p: Any) -> int:
            parts.append(ctypes.string_at(data, n))
            return 0

        cb = _lib.DATA_CB(on)
        p, dl = self._abs(path), _deadline(timeout)
        self._sb._gcheck(lambda g, err: lib.brig_guest_read(g, p, offset, length, cb, None, dl, byref(err)))
        return b"".join(parts)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def write(self, path: str, data: Union[bytes, str], mode: int = 0o644, parents: bool = True,
              timeout: Optional[float] = FILE_TIMEOUT) -> None:
        """Writes the whole file (readers never see half of it); parents: make missing directories."""
        b = _b(data) or b""
        p, dl = self._abs(path), _deadline(timeout)
        self._sb._gcheck(lambda g, err: lib.brig_guest_write(g, p, -1, b, len(b), mode, parents, dl, byref(err)))

    def _info(self, path: str, j: Dict[str, Any]) -> FileInfo:
        return FileInfo(path, j.get("type", "unknown"), int(j.get("mode", 0)), int(j.get("size", 0)),
                        int(j.get("mtime_ns", 0)) / 1e9, int(j.get("uid", -1)), int(j.get("gid", -1)), j.get("link"))

    def stat(self, path: str, follow: bool = True) -> FileInfo:
        """The file's type, mode, size, mtime and owner (brig.NotFound when absent)."""
        out = c_void_p()
        p, dl = self._abs(path), _deadline(FILE_TIMEOUT)
        self._sb._gcheck(lambda g, err: lib.brig_guest_stat(g, byref(out), p, not follow, dl, byref(err)))
        return self._info(p.decode(), _lib.json_take(out.value) or {})

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def list(self, path: str = "/workspace", depth: int = 1) -> List[FileInfo]:
        """The directory's entries (depth 1), or deeper."""
        out = c_void_p()
        p, dl = self._abs(path), _deadline(FILE_TIMEOUT)
        self._sb._gcheck(lambda g, err: lib.brig_guest_list(g, byref(out), p, depth, dl, byref(err)))
        base = p.decode().rstrip("/")
        return [self._info(f"{base}/{j.get('name', '')}", j) for j in (_lib.json_take(out.value) or [])]

    def remove(self, path: str, recursive: bool = False) -> None:
        """Removes a file, or a directory (recursive for a non-empty one)."""
        p, dl = self._abs(path), _deadline(FILE_TIMEOUT)
        self._sb._gcheck(lambda g, err: lib.brig_guest_remove(g, p, recursive, dl, byref(err)))

    def mkdir(self, path: str, mode: int = 0o755, parents: bool = True) -> None:
        """Makes a directory (parents: and the missing ones above it; an existing one is fine then)."""
        p, dl = self._abs(path), _deadline(FILE_TIMEOUT)
        self._sb._gcheck(lambda g, err: lib.brig_guest_mkdir(g, p, mode, parents, dl, byref(err)))

    def move(self, src: str, dst: str) -> None:
        """Renames src to dst inside the computer."""
        a, b, dl = self._abs(src), self._abs(dst), _deadline(FILE_TIMEOUT)
        self._sb._gcheck(lambda g, err: lib.brig_guest_rename(g, a, b, dl, byref(err)))


def _safe_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


class Sandbox:
    """The computer of one agent session (ns, agent, session).

    Creating a Sandbox creates the session's computer or adopts the one that
    exists (brig_session_open: deterministic names, so racing creators in
    any number of processes land on one computer); a computer that lost its
    files (stopped, removed, restarted) is restored from the session's latest
    checkpoint into a new generation (`lost` then says why), or refused
    (brig.StateError) when there is none, unless fresh=True.

    Without `session`, the Sandbox is anonymous: a random session name, and
    leaving the `with` block (or close()) destroys the computer and forgets
    the session. With a session name, leaving the block only closes this
    object's relay: the computer keeps running for the next Sandbox(...)
    of that identity (stop()/destroy() end it).
    """

    def __init__(self, image: str = DEFAULT_IMAGE, *, cpus: float = 2.0, memory_mb: int = 2048,
                 pids_limit: int = 256, workspace_mb: int = 512, runtime_mb: int = 256, network: str = "none",
                 allow: Optional[Sequence[str]] = None, env: Env = None, ns: Optional[str] = None,
                 agent: Optional[str] = None, session: Optional[str] = None, store: Optional[str] = None,
                 harness: str = "none", labels: Optional[Mapping[str, str]] = None, fresh: bool = False):
        if allow:
            raise InvalidSpec("allow: this brig has no per-host egress allowlist; use network='isolated' "
                              "(the internet, not the host or other sandboxes) or 'none'", -1)
        spec = _Spec(image, cpus, memory_mb, pids_limit, workspace_mb, runtime_mb, network, env, harness, labels)
        try:
            self._setup(store, ns or DEFAULT_NS, agent or DEFAULT_AGENT, session, anonymous=session is None)
            self.lost: Optional[str] = None
            self.restored_checkpoint = 0
            ident = _lib.Identity(_b(self.ns), _b(self.agent), _b(self.session), 1)
            opts = _lib.UpOpts(_lib.UP_OPTS_VERSION, fresh, None)
            res, err = _lib.UpResult(), c_void_p()
            rc = lib.brig_session_open(_engine(), self._s, byref(res), byref(ident), spec.buf, byref(opts),
                                       byref(err))
            try:
                check(rc, err)
                self._adopt(_computer_json(res.computer))
                if res.lost:
                    self.lost = ctypes.string_at(res.lost).decode("utf-8", "replace")
                    self.restored_checkpoint = res.checkpoint_id
            finally:
                lib.brig_up_result_clear(byref(res))
        finally:
            spec.close()

    def _setup(self, store: Optional[str], ns: str, agent: str, session: Optional[str], anonymous: bool) -> None:
        self._mu = threading.Lock()
        self._g: Optional[int] = None
        self._dead: List[int] = []
        self._closed = False
        self._store_url = store
        self._s = _store(store)
        self.ns, self.agent = ns, agent
        self.session = session or "py-" + secrets.token_hex(6)
        self.anonymous = anonymous
        self.files = Files(self)
        self._harness = 0
        self._paused = False

    def _adopt(self, j: Dict[str, Any]) -> None:
        self.info = SandboxInfo._from_json(j)
        self.name = self.info.name
        self._paused = self.info.state == "paused"
        self.generation = self.info.generation
        h = c_int(0)
        if lib.brig_harness_parse(byref(h), _b(self.info.harness or "none"), None) == 0:
            self._harness = h.value

    @classmethod
    def connect(cls, name: str, *, store: Optional[str] = None) -> "Sandbox":
        """Attaches to an existing computer by container name (or id); creates nothing."""
        out, err = c_void_p(), c_void_p()
        check(lib.brig_computer_get(_engine(), byref(out), _b(name), None, byref(err)), err)
        try:
            j = _computer_json(out.value)
        finally:
            lib.brig_computer_free(out)
        sb = cls.__new__(cls)
        sb._setup(store, j.get("ns") or "", j.get("agent") or "", j.get("session") or "", anonymous=False)
        sb.lost, sb.restored_checkpoint = None, 0
        sb._adopt(j)
        return sb

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r}, ns={self.ns!r}, agent={self.agent!r}, session={self.session!r})"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the relay ----

    def _guest(self) -> int:
        if self._paused:
            # brig-init is frozen with everything else: a command would wait for the thaw.
            raise StateError(f"computer {self.name} is paused: resume it first (nothing was run)", -12)
        g = self._g
        if g and lib.brig_guest_alive(g):
            return g
        with self._mu:
            if self._closed:
                raise StateError(f"sandbox {self.name} is closed", -12)
            g = self._g
            if g and lib.brig_guest_alive(g):
                return g
            if g:
                self._dead.append(g)  # freed at close: another thread may still hold it
                self._g = None
            out, err = c_void_p(), c_void_p()
            check(lib.brig_computer_guest(_engine(), byref(out), _b(self.name), byref(err)), err)
            self._g = out.value
            return out.value  # type: ignore[return-value]

    def _gcall(self, call: Callable[[int], Tuple[int, c_void_p]]) -> Tuple[int, c_void_p]:
        """call(guest) over the held relay; when the relay had broken
        (BRIG_ENOTSENT: nothing ran) once more over a new one."""
        rc, err = call(self._guest())
        if rc == NotSent.code:
            make(rc, err)
            rc, err = call(self._guest())
        return rc, err

    def _gcheck(self, fn: Callable[[int, c_void_p], int]) -> None:
        def call(g: int) -> Tuple[int, c_void_p]:
            err = c_void_p()
            return fn(g, err), err

        rc, err = self._gcall(call)
        check(rc, err)

    # ---- commands ----

    def exec(self, cmd: Cmd, *, timeout: Optional[float] = None, env: Env = None, workdir: Optional[str] = None,
             stdin: Stdin = None) -> ExecResult:
        """Runs cmd in the computer as its user and waits for it to end.

        cmd is a shell string (run by `sh -c`) or an argv list (no shell).
        At the timeout brig-init ends the command's whole tree: exit 124,
        timed_out=True, the computer keeps running with its files. Ctrl-C
        (KeyboardInterrupt) does the same (exit 130) and is re-raised.
        A program that cannot be found or run gives exit 127 / 126.
        """
        r, w = os.pipe()
        try:
            return self._exec(cmd, timeout, env, workdir, stdin, r, w)
        finally:
            os.close(r)
            os.close(w)

    def _exec(self, cmd: Cmd, timeout: Optional[float], env: Env, workdir: Optional[str], stdin: Stdin,
              cancel_r: int, cancel_w: int) -> ExecResult:
        """exec with the caller's cancel pipe (cancel_r readable: the command is ended)."""
        col = _Collector()
        opts = _Opts(_argv(cmd), _exec_env(env, self._harness), workdir, stdin, _deadline(timeout), cancel_r, col)
        ex = _lib.GuestExit()
        t0 = time.monotonic()

        def call(g: int) -> Tuple[int, c_void_p]:
            err = c_void_p()
            return lib.brig_guest_exec(g, byref(opts.c), byref(ex), byref(err)), err

        rc, err = _interruptible(lambda: self._gcall(call), cancel_w)
        return _finish_exec(rc, err, ex, col, t0)

    def exec_stream(self, cmd: Cmd, *, timeout: Optional[float] = None, env: Env = None,
                    workdir: Optional[str] = None, stdin: Stdin = None) -> ExecStream:
        """Starts cmd and returns an iterator of its OutputEvents as they come;
        after the iteration `stream.result` holds the ExecResult (without the
        output, which went to the events). Leaving the loop early cancels it."""
        return ExecStream(self, _argv(cmd), _exec_env(env, self._harness), workdir, stdin, timeout)

    def start(self, cmd: Cmd, *, env: Env = None, workdir: Optional[str] = None, tag: Optional[str] = None,
              keep: int = 0) -> Process:
        """Starts cmd in the background, detached: it outlives this object and
        this process; brig-init keeps `keep` bytes of its output (0: 1 MiB)."""
        pid = c_int64()
        opts = _Opts(_argv(cmd), _exec_env(env, self._harness), workdir, None, 0, -1, None, tag, True, keep)
        self._gcheck(lambda g, err: lib.brig_guest_start(g, byref(opts.c), byref(pid), byref(err)))
        return Process(self, pid.value)

    def processes(self) -> List[Dict[str, Any]]:
        """brig-init's commands, running and recently ended: dicts with id,
        pid, tag, argv, state, detached, started_ms, ended_ms, exit_code…"""
        out = c_void_p()
        dl = _deadline(FILE_TIMEOUT)
        self._gcheck(lambda g, err: lib.brig_guest_ps(g, byref(out), dl, byref(err)))
        return _lib.json_take(out.value) or []

    def process(self, pid: int) -> Process:
        return Process(self, pid)

    # ---- host <-> computer ----

    def upload(self, local: Union[str, os.PathLike], remote: str) -> None:
        """Copies a host file or directory tree into the computer at remote
        (modes kept; symlinks are skipped, never followed)."""
        local = os.fspath(local)
        st = os.lstat(local)
        if _stat.S_ISREG(st.st_mode):
            with open(local, "rb") as f:
                self.files.write(remote, f.read(), st.st_mode & 0o777)
            return
        if not _stat.S_ISDIR(st.st_mode):
            raise InvalidSpec(f"upload: {local} is not a file or directory", -1)
        self.files.mkdir(remote, (st.st_mode & 0o777) | 0o700)
        for e in sorted(os.scandir(local), key=lambda e: e.name):
            if e.is_symlink():
                continue
            if e.is_dir() or e.is_file():
                self.upload(e.path, remote.rstrip("/") + "/" + e.name)

    def download(self, remote: str, local: Union[str, os.PathLike]) -> None:
        """Copies a file or directory tree out of the computer to the host
        path local. Names come from the sandbox and are untrusted: only plain
        names are used (nothing can land outside local); symlinks, devices
        and other special files are skipped."""
        local = os.fspath(local)
        info = self.files.stat(remote, follow=False)
        if info.is_file:
            data = self.files.read(remote)
            tmp = f"{local}.brig-{secrets.token_hex(4)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, info.mode & 0o777 or 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, local)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            return
        if not info.is_dir:
            return
        os.makedirs(local, exist_ok=True)
        for e in self.files.list(remote):
            if _safe_name(e.name) and e.type in ("file", "dir"):
                self.download(remote.rstrip("/") + "/" + e.name, os.path.join(local, e.name))

    # ---- lifecycle ----

    def _engine_call(self, fn: Callable[..., int]) -> None:
        err = c_void_p()
        check(fn(_engine(), _b(self.name), byref(err)), err)

    def pause(self) -> None:
        """Freezes every process of the computer (cgroup freezer); memory and files stay."""
        self._engine_call(lib.brig_computer_pause)
        self._paused = True

    def resume(self) -> None:
        """Thaws a paused computer."""
        self._engine_call(lib.brig_computer_resume)
        self._paused = False

    def stop(self) -> None:
        """Stops the computer. Its /workspace and /runtime are tmpfs and are
        lost: checkpoint first; the next Sandbox(...) of this session restores
        the latest checkpoint."""
        self._drop_relay()
        self._engine_call(lib.brig_computer_stop)

    def checkpoint(self, keep: int = 0) -> Checkpoint:
        """Pauses the computer, copies /workspace and /runtime out into a
        verified, content-addressed blob, resumes it, and records the
        checkpoint in the store (keep: retain only the newest N; 0 all)."""
        out, err = c_void_p(), c_void_p()
        opts = _CheckpointOpts(_lib.CHECKPOINT_OPTS_VERSION, None, keep, 0)
        check(lib.brig_checkpoint_create(_engine(), self._s, byref(out), _b(self.name), byref(opts), byref(err)),
              err)
        try:
            return _checkpoint(_lib.StoreCheckpoint.from_address(out.value))
        finally:
            lib.brig_store_checkpoint_free(out)

    def checkpoints(self) -> List[Checkpoint]:
        """The session's checkpoints, newest first."""
        out, n, err = c_void_p(), c_size_t(), c_void_p()
        check(lib.brig_store_checkpoint_list(self._s, byref(out), byref(n), _b(self.ns), _b(self.agent),
                                             _b(self.session), byref(err)), err)
        try:
            arr = ctypes.cast(out, ctypes.POINTER(_lib.StoreCheckpoint))
            return [_checkpoint(arr[i]) for i in range(n.value)]
        finally:
            lib.brig_store_checkpoint_free_array(out, n.value)

    def recover(self, checkpoint: Optional[Union[int, Checkpoint]] = None) -> int:
        """Moves a failed, stopped or lost session to a new generation
        restored from its latest checkpoint (exactly one of racing callers
        advances it) and returns the new generation. With checkpoint, that
        checkpoint's files are then copied over the (running) computer's.
        brig.StateError: the computer runs fine and no checkpoint was named."""
        res, err = _lib.RecoverResult(), c_void_p()
        rc = lib.brig_session_recover(_engine(), self._s, byref(res), _b(self.ns), _b(self.agent),
                                      _b(self.session), None, byref(err))
        try:
            if rc == StateError.code and checkpoint is not None:
                make(rc, err)
            else:
                check(rc, err)
                self._drop_relay()
                self._adopt(_computer_json(res.computer))
        finally:
            lib.brig_recover_result_clear(byref(res))
        if checkpoint is not None:
            cid = checkpoint.id if isinstance(checkpoint, Checkpoint) else int(checkpoint)
            cp, err = c_void_p(), c_void_p()
            check(lib.brig_store_checkpoint_get(self._s, byref(cp), cid, byref(err)), err)
            d, err = c_void_p(), c_void_p()
            try:
                check(lib.brig_checkpoint_dir(byref(d), self._s, byref(err)), err)
                check(lib.brig_checkpoint_restore(_engine(), ctypes.cast(d, c_char_p), cp, _b(self.name),
                                                  byref(err)), err)
            finally:
                _lib.libc.free(d)
                lib.brig_store_checkpoint_free(cp)
        return self.generation

    def destroy(self) -> None:
        """Removes the computer and its volumes, and forgets the session: its
        checkpoints (records and blobs) and its record in the store."""
        self._drop_relay()
        self._engine_call(lib.brig_computer_destroy)
        for cp in self.checkpoints():
            err = c_void_p()
            rc = lib.brig_checkpoint_remove(self._s, None, cp.id, byref(err))
            if rc not in (0, NotFound.code):
                check(rc, err)
            elif rc:
                make(rc, err)
        err = c_void_p()
        rc = lib.brig_store_session_delete(self._s, None, None, _b(self.ns), _b(self.agent), _b(self.session), 0,
                                           byref(err))
        if rc not in (0, NotFound.code):
            check(rc, err)
        elif rc:
            make(rc, err)

    def _drop_relay(self) -> None:
        with self._mu:
            if self._g:
                self._dead.append(self._g)
                self._g = None

    def close(self) -> None:
        """Ends this object's relay (background commands started with start()
        run on). An anonymous Sandbox (no session name) is destroyed."""
        if self._closed:
            return
        try:
            if self.anonymous:
                self.destroy()
        finally:
            with self._mu:
                self._closed = True
                handles = self._dead + ([self._g] if self._g else [])
                self._g, self._dead = None, []
            for g in handles:
                lib.brig_guest_free(g)


class _CheckpointOpts(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("dir", c_char_p), ("keep", c_size_t), ("zstd_level", c_int)]


_lib.STRUCTS["brig_checkpoint_opts"] = _CheckpointOpts


class _Spec:
    """A brig_spec in an opaque buffer, filled through brig_spec_set (so the
    struct itself needs no mirror)."""

    def __init__(self, image: str, cpus: float, memory_mb: int, pids_limit: int, workspace_mb: int,
                 runtime_mb: int, network: str, env: Env, harness: str, labels: Optional[Mapping[str, str]]):
        self.buf = ctypes.create_string_buffer(_lib.SPEC_SIZE)
        lib.brig_spec_init(self.buf)
        try:
            for k, v in (("image", image), ("cpus", repr(float(cpus))), ("memory-mb", memory_mb),
                         ("pids", pids_limit), ("workspace-mb", workspace_mb), ("runtime-mb", runtime_mb),
                         ("network", network), ("harness", harness)):
                err = c_void_p()
                check(lib.brig_spec_set(self.buf, _b(k), _b(str(v)), byref(err)), err)
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
