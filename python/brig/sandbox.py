"""Sandbox: one long-lived, locked-down computer of an agent session, driven
through libbrig. Commands and file operations go over one brig-init relay
held by the Sandbox object (brig/guest.h), so a command costs milliseconds
rather than a Docker exec's tens."""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import stat as _stat
import threading
import time
import weakref
from ctypes import byref, c_char_p, c_int, c_int64, c_size_t, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._core import (DEFAULT_AGENT, DEFAULT_IMAGE, DEFAULT_NS, Cmd, Env, Stdin, _argv, _b,
                    _deadline, _engine, _exec_env, _interruptible, _Spec, _store, FILE_TIMEOUT)
from ._lib import lib
from .errors import Error, InvalidSpec, IOFailure, NotFound, NotSent, StateError, Uncertain, check, make
from .files import Files, _safe_name
from .process import ExecResult, ExecStream, Process, _Collector, _exec_tag, _finish_exec, _Opts

__all__ = [
    "Sandbox", "SandboxInfo", "Checkpoint", "sandboxes",
]


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


def _checkpoints(s: int, ns: str, agent: str, session: str) -> List[Checkpoint]:
    out, n, err = c_void_p(), c_size_t(), c_void_p()
    check(lib.brig_store_checkpoint_list(s, byref(out), byref(n), _b(ns), _b(agent), _b(session), byref(err)), err)
    try:
        arr = ctypes.cast(out, ctypes.POINTER(_lib.StoreCheckpoint))
        return [_checkpoint(arr[i]) for i in range(n.value)]
    finally:
        lib.brig_store_checkpoint_free_array(out, n.value)


def _forget(s: int, name: str, ns: str, agent: str, session: str) -> None:
    """Removes computer name and its volumes, then the session's checkpoints
    (records and blobs) and its record in store s."""
    err = c_void_p()
    check(lib.brig_computer_destroy(_engine(), _b(name), byref(err)), err)
    for cp in _checkpoints(s, ns, agent, session):
        err = c_void_p()
        rc = lib.brig_checkpoint_remove(s, None, cp.id, byref(err))
        if rc not in (0, NotFound.code):
            check(rc, err)
        elif rc:
            make(rc, err)
    err = c_void_p()
    rc = lib.brig_store_session_delete(s, None, None, _b(ns), _b(agent), _b(session), 0, byref(err))
    if rc not in (0, NotFound.code):
        check(rc, err)
    elif rc:
        make(rc, err)


def _forget_unclosed(pid: int, s: int, name: str, ns: str, agent: str, session: str) -> None:
    """An anonymous Sandbox collected or alive at exit without close(): its
    computer would be left running, unnamed to anyone; remove it (only in
    the process that made it, not in a fork)."""
    if os.getpid() != pid:
        return
    try:
        _forget(s, name, ns, agent, session)
    except Exception:
        pass  # at exit or in GC: nowhere to report


class Sandbox:
    """The computer of one agent session (ns, agent, session).

    Creating a Sandbox creates the session's computer or adopts the one that
    exists (brig_session_open: deterministic names, so racing creators in
    any number of processes land on one computer); a computer that lost its
    files (stopped, removed, restarted) is restored from the session's latest
    checkpoint into a new generation (`lost` then says why), or refused
    (brig.StateError) when there is none, unless fresh=True.

    network is "none" (default: only loopback), "isolated" (the internet,
    not the host or other sandboxes) or "egress" with allow=[rules]: only
    those hosts, through brig's egress proxy (a rule is "api.example.com",
    "*.example.org" or either with ":PORT"). With egress, secrets=
    {"NAME": ["host", ...]} gives the sandbox only a placeholder in NAME;
    brig's proxy puts the real value — os.environ["NAME"] of this process
    when the computer is made — into the requests to those hosts (header
    values only), so the value never enters the sandbox. runtime names an OCI runtime
    the daemon registers, e.g. "runsc" for gVisor (default: $BRIG_RUNTIME,
    then the daemon's own).

    Without `session`, the Sandbox is anonymous: a random session name, and
    leaving the `with` block (or close()) destroys the computer and forgets
    the session; so does garbage collection or the interpreter's exit when
    close() was never called. With a session name, leaving the block only closes this
    object's relay: the computer keeps running for the next Sandbox(...)
    of that identity (stop()/destroy() end it).

    audit=True writes a row per command (argv, never env values; outcome,
    exit code, duration, output sizes) into the store's audit log, as `brig
    exec` does; it costs a store commit per command (≈1.5 ms on SQLite), so
    it is off by default.
    """

    def __init__(self, image: str = DEFAULT_IMAGE, *, cpus: float = 2.0, memory_mb: int = 2048,
                 pids_limit: int = 256, workspace_mb: int = 512, runtime_mb: int = 256, network: str = "none",
                 allow: Optional[Sequence[str]] = None, env: Env = None, ns: Optional[str] = None,
                 agent: Optional[str] = None, session: Optional[str] = None, store: Optional[str] = None,
                 harness: str = "none", labels: Optional[Mapping[str, str]] = None, fresh: bool = False,
                 audit: bool = False, runtime: Optional[str] = None,
                 secrets: Optional[Mapping[str, Union[str, Sequence[str]]]] = None):
        spec = _Spec(image, cpus, memory_mb, pids_limit, workspace_mb, runtime_mb, network, env, harness, labels,
                     allow, runtime, secrets)
        try:
            self._setup(store, ns or DEFAULT_NS, agent or DEFAULT_AGENT, session, anonymous=session is None)
            self._audit_on = audit
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
                if self.anonymous:
                    self._finalizer = weakref.finalize(self, _forget_unclosed, os.getpid(), self._s, self.name,
                                                       self.ns, self.agent, self.session)
                if res.lost:
                    self.lost = ctypes.string_at(res.lost).decode("utf-8", "replace")
                    self.restored_checkpoint = res.checkpoint_id
            finally:
                lib.brig_up_result_clear(byref(res))
        finally:
            spec.close()

    def _setup(self, store: Optional[str], ns: str, agent: str, session: Optional[str], anonymous: bool) -> None:
        self._mu = threading.Lock()
        self._idle = threading.Condition(self._mu)
        self._inflight = 0
        self._pid = os.getpid()
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
        self._finalizer: Optional[weakref.finalize] = None

    def _adopt(self, j: Dict[str, Any]) -> None:
        self.info = SandboxInfo._from_json(j)
        self.name = self.info.name
        self._paused = self.info.state == "paused"
        self.generation = self.info.generation
        h = c_int(0)
        if lib.brig_harness_parse(byref(h), _b(self.info.harness or "none"), None) == 0:
            self._harness = h.value

    @classmethod
    def connect(cls, name: str, *, store: Optional[str] = None, audit: bool = False) -> "Sandbox":
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
        sb._audit_on = audit
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
        """The held relay (opened on first use, reopened once it broke).
        Called with self._inflight counted, so close() cannot free it under us."""
        if self._paused:
            # brig-init is frozen with everything else: a command would wait for the thaw.
            raise StateError(f"computer {self.name} is paused: resume it first (nothing was run)", -12)
        g = self._g
        if g and self._pid == os.getpid() and lib.brig_guest_alive(g):
            return g
        with self._mu:
            g = self._g
            if self._pid != os.getpid():  # a forked child: the parent's relay is not ours to use or free
                g = self._g = None
                self._dead = []
                self._pid = os.getpid()
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
        with self._mu:
            if self._closed:
                raise StateError(f"sandbox {self.name} is closed", -12)
            self._inflight += 1
        try:
            rc, err = call(self._guest())
            if rc == NotSent.code:
                make(rc, err)
                rc, err = call(self._guest())
            return rc, err
        finally:
            with self._mu:
                self._inflight -= 1
                if self._inflight == 0:
                    self._idle.notify_all()

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
        tag = _exec_tag()
        opts = _Opts(_argv(cmd), _exec_env(env, self._harness), workdir, stdin, _deadline(timeout), cancel_r, col,
                     tag)
        ex = _lib.GuestExit()
        t0 = time.monotonic()

        def call(g: int) -> Tuple[int, c_void_p]:
            err = c_void_p()
            return lib.brig_guest_exec(g, byref(opts.c), byref(ex), byref(err)), err

        rc, err = _interruptible(lambda: self._gcall(call), cancel_w)
        return _finish_exec(self, rc, err, ex, col, t0, opts)

    def _audit(self, argv: List[bytes], outcome: str, r: ExecResult, col: _Collector) -> None:
        """One row in the store's audit log (argv only, never env values), as
        brig exec writes. A store failure raises brig.StoreError carrying the
        command's result (.result): the command did run."""
        if not self._audit_on or not self.session:
            return
        argv_json = json.dumps([a.decode("utf-8", "replace") for a in argv], separators=(",", ":"))
        a = _lib.StoreAudit(0, _b(self.ns), _b(self.agent), _b(self.session), self.generation, _b(self.name),
                            argv_json.encode(), r.exit_code, r.timed_out, outcome.encode(), int(r.duration * 1000),
                            col.totals[0], col.totals[1], 0)
        err = c_void_p()
        rc = lib.brig_store_audit_add(self._s, None, byref(a), byref(err))
        if rc:
            e = make(rc, err)
            e.result = r  # type: ignore[attr-defined]
            raise e

    def _after_broken_relay(self, cause: Error, proc: int, tag: str) -> Error:
        """The relay broke mid-command, or brig-init said garbage or nothing
        (as brig_computer_exec does): ask brig-init over a new relay what
        became of the command, ending it if it still runs. When it answers,
        brig.IOFailure (the command ended, its output may be cut short; the
        computer runs on). When it cannot be reached, the computer is
        stopped and the session marked failed, so nothing runs on unseen:
        brig.Uncertain, and recovery goes through the last checkpoint."""
        self._drop_relay()
        code = -1
        try:
            dl = _deadline(10.0)
            if proc > 0:
                kx = _lib.GuestExit()
                self._gcheck(lambda g, err: lib.brig_guest_kill(g, proc, byref(kx), dl, byref(err)))
                code = kx.code
            else:
                out = c_void_p()
                try:
                    self._gcheck(lambda g, err: lib.brig_guest_status(g, byref(out), 0, _b(tag), dl, byref(err)))
                    st = _lib.json_take(out.value) or {}
                except NotFound:
                    st = {}  # it never started
                code = int(st.get("exit_code", -1) if isinstance(st.get("exit_code"), int) else -1)
                if st.get("state") == "running":
                    kx = _lib.GuestExit()
                    self._gcheck(lambda g, err: lib.brig_guest_kill(g, int(st["id"]), byref(kx), dl, byref(err)))
                    code = kx.code
        except Error:
            pass
        else:
            e = IOFailure(f"command in {self.name}: {cause.message}; brig-init says it has ended (it is not "
                          "retried; its output may be incomplete); the computer keeps running", IOFailure.code)
            e.exit_code = code  # type: ignore[attr-defined]
            return e
        stopped = "stopped"
        try:
            self._engine_call(lib.brig_computer_stop)
        except Error as se:
            stopped = f"NOT stopped ({se.message})"
        err = c_void_p()
        if lib.brig_session_mark_failed(self._s, _b(self.ns), _b(self.agent), _b(self.session), self.generation,
                                        byref(err)):
            make(-18, err)
        return Uncertain(f"command in {self.name}: {cause.message}; brig-init cannot be reached; the computer "
                         f"was {stopped}; it is not retried: recover the session from its checkpoint "
                         "(sb.recover())", Uncertain.code)

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
        """Freezes every process of the computer (cgroup freezer); memory and
        files stay. Until resume(), this object refuses commands and file
        calls with brig.StateError (brig-init is frozen too)."""
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
        opts = _lib.CheckpointOpts(_lib.CHECKPOINT_OPTS_VERSION, None, keep, 0)
        check(lib.brig_checkpoint_create(_engine(), self._s, byref(out), _b(self.name), byref(opts), byref(err)),
              err)
        try:
            return _checkpoint(_lib.StoreCheckpoint.from_address(out.value))
        finally:
            lib.brig_store_checkpoint_free(out)

    def checkpoints(self) -> List[Checkpoint]:
        """The session's checkpoints, newest first."""
        return _checkpoints(self._s, self.ns, self.agent, self.session)

    def recover(self, checkpoint: Optional[Union[int, Checkpoint]] = None) -> int:
        """Moves a failed, stopped or lost session to a new generation
        restored from its latest checkpoint, or from `checkpoint` when named
        (exactly one of racing callers advances it), and returns the new
        generation. When the computer runs fine, a named checkpoint's files
        are copied over the running computer's instead (nothing else
        changes). brig.StateError: the computer runs fine and no checkpoint
        was named."""
        cid = None if checkpoint is None else (checkpoint.id if isinstance(checkpoint, Checkpoint) else int(checkpoint))
        res, err = _lib.RecoverResult(), c_void_p()
        rc = lib.brig_session_recover_at(_engine(), self._s, byref(res), _b(self.ns), _b(self.agent),
                                         _b(self.session), None, cid or 0, byref(err))
        running = rc == StateError.code and cid is not None
        try:
            if running:
                make(rc, err)  # frees brig's error: the overlay below is the answer
            else:
                check(rc, err)
                self._drop_relay()
                self._adopt(_computer_json(res.computer))
        finally:
            lib.brig_recover_result_clear(byref(res))
        if running:
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
        _forget(self._s, self.name, self.ns, self.agent, self.session)

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
            if self._finalizer is not None:
                self._finalizer.detach()
            if self.anonymous:
                self.destroy()
        finally:
            with self._mu:
                self._closed = True  # no new call starts; wait for the running ones
                while self._inflight:
                    self._idle.wait()
                handles = self._dead + ([self._g] if self._g else [])
                self._g, self._dead = None, []
                if self._pid != os.getpid():
                    handles = []  # the parent's
            for g in handles:
                lib.brig_guest_free(g)
