"""libbrig through ctypes: finding the library, the C structs the package
passes, and the prototypes of the functions it calls.

Why ctypes and not cffi's ABI mode: ctypes is in the standard library, so
the package needs nothing at run time but libbrig itself (no python3-cffi
Debian package, no compiler). The price is that the structs below are
hand-written mirrors of include/brig/*.h; tests/test_layout.py compares
every one of them, field by field, with what the C compiler says
(python/tests/layout.c), so a header change fails brig's tests instead of
corrupting memory at a user's. brig_spec is never mirrored: it is held in an
opaque buffer and filled through brig_spec_set()/brig_spec_add_*().
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, List, Optional

__all__ = ["LibraryNotFound", "lib", "libc"]

INSTALL_HINT = (
    "libbrig was not found. Build and install it from a brig checkout with "
    "`cmake -S . -B build && cmake --build build -j2 && cmake --install build` "
    "(then `ldconfig`), or point BRIG_LIBRARY at libbrig.so."
)


class LibraryNotFound(ImportError):
    """libbrig could not be loaded; the message says how to install it."""


def _candidates() -> List[str]:
    out: List[str] = []
    env = os.environ.get("BRIG_LIBRARY")
    if env:
        return [env]  # explicit: no fallback that could hide a wrong path
    # A source checkout: python/brig/_lib.py -> <repo>/build/libbrig.so.
    repo = Path(__file__).resolve().parent.parent.parent
    out.append(str(repo / "build" / "libbrig.so"))
    found = ctypes.util.find_library("brig")
    if found:
        out.append(found)
    for d in ("/usr/local/lib", "/usr/local/lib64", "/usr/local/lib/x86_64-linux-gnu",
              "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"):
        out.append(os.path.join(d, "libbrig.so.0"))
        out.append(os.path.join(d, "libbrig.so"))
    return out


# ---- structs (mirrors of include/brig/*.h; checked by tests/test_layout.py) ----

OUTPUT_CB = CFUNCTYPE(c_int, c_int, c_void_p, c_size_t, c_void_p)
DATA_CB = CFUNCTYPE(c_int, c_void_p, c_size_t, c_void_p)

# brig_spec is opaque here: this many bytes are reserved for it (test_layout
# checks that sizeof(brig_spec) fits).
SPEC_SIZE = 512


class Error(Structure):
    _fields_ = [("code", c_int), ("sys_errno", c_int), ("http_status", c_int), ("message", c_char_p)]


class Identity(Structure):
    _fields_ = [("ns", c_char_p), ("agent", c_char_p), ("session", c_char_p), ("generation", c_uint32)]


class UpOpts(Structure):
    _fields_ = [("version", c_uint), ("fresh", c_bool), ("checkpoint_dir", c_char_p)]


class UpResult(Structure):
    _fields_ = [
        ("computer", c_void_p),
        ("lost", c_void_p),
        ("old_generation", c_int64),
        ("checkpoint_id", c_int64),
        ("checkpoint_created_ms", c_int64),
        ("recorded", c_bool),
    ]


class RecoverResult(Structure):
    _fields_ = [
        ("computer", c_void_p),
        ("old_generation", c_int64),
        ("new_generation", c_int64),
        ("checkpoint_id", c_int64),
        ("won", c_bool),
    ]


class StoreCheckpoint(Structure):
    _fields_ = [
        ("id", c_int64),
        ("ns", c_char_p),
        ("agent", c_char_p),
        ("session", c_char_p),
        ("generation", c_int64),
        ("digest", c_char_p),
        ("blob", c_char_p),
        ("bytes_raw", c_int64),
        ("bytes_stored", c_int64),
        ("created_ms", c_int64),
        ("blob_refs", c_int64),
        ("count", c_int64),
    ]


class StoreAudit(Structure):
    _fields_ = [
        ("id", c_int64),
        ("ns", c_char_p),
        ("agent", c_char_p),
        ("session", c_char_p),
        ("generation", c_int64),
        ("container_name", c_char_p),
        ("argv_json", c_char_p),
        ("exit_code", c_int),
        ("timed_out", c_bool),
        ("outcome", c_char_p),
        ("duration_ms", c_int64),
        ("stdout_bytes", c_int64),
        ("stderr_bytes", c_int64),
        ("created_ms", c_int64),
        ("actor", c_char_p),
    ]


class GuestExecOpts(Structure):
    _fields_ = [
        ("version", c_uint),
        ("argv", POINTER(c_char_p)),
        ("env", POINTER(c_char_p)),
        ("env_count", c_size_t),
        ("cwd", c_char_p),
        ("stdin_fd", c_int),
        ("stdin_data", c_void_p),
        ("stdin_len", c_size_t),
        ("deadline_ms", c_int64),
        ("cancel_fd", c_int),
        ("on_output", OUTPUT_CB),
        ("payload", c_void_p),
        ("detached", c_bool),
        ("keep", c_size_t),
        ("tag", c_char_p),
        ("rows", c_int),
        ("cols", c_int),
        ("resize_fd", c_int),
        ("size_cb", c_void_p),
        ("size_payload", c_void_p),
    ]


class GuestExit(Structure):
    _fields_ = [
        ("code", c_int),
        ("signal", c_int),
        ("timed_out", c_bool),
        ("canceled", c_bool),
        ("killed", c_bool),
        ("proc", c_int64),
        ("dropped", c_uint64),
    ]


class Capture(Structure):
    _fields_ = [("data", c_void_p), ("len", c_size_t), ("total", c_uint64), ("dropped", c_uint64)]


class ExecResult(Structure):
    _fields_ = [
        ("exit_code", c_int),
        ("timed_out", c_bool),
        ("canceled", c_bool),
        ("uncertain", c_bool),
        ("container_stopped", c_bool),
        ("duration_ms", c_int64),
        ("out", Capture),
        ("err", Capture),
        ("stop_checkpoint_id", c_int64),
        ("stop_checkpoint_failed", c_bool),
    ]


class RunOpts(Structure):
    _fields_ = [
        ("version", c_uint),
        ("spec", c_void_p),
        ("argv", POINTER(c_char_p)),
        ("inputs", POINTER(c_char_p)),
        ("input_count", c_size_t),
        ("out_dir", c_char_p),
        ("out_mb", c_int64),
        ("workdir", c_char_p),
        ("timeout_s", c_int64),
        ("stdin_fd", c_int),
        ("cancel_fd", c_int),
        ("on_output", OUTPUT_CB),
        ("payload", c_void_p),
        ("capture_max", c_size_t),
    ]


class RunResult(Structure):
    _fields_ = [
        ("exec", ExecResult),
        ("image_id", c_char_p),
        ("container", c_char_p),
        ("create_ms", c_int64),
        ("copy_in_ms", c_int64),
        ("run_ms", c_int64),
        ("copy_out_ms", c_int64),
        ("total_ms", c_int64),
        ("outputs", POINTER(c_char_p)),
        ("output_count", c_size_t),
        ("output_bytes", c_uint64),
        ("oom_killed", c_bool),
    ]


class CheckpointOpts(Structure):
    _fields_ = [("version", c_uint), ("dir", c_char_p), ("keep", c_size_t), ("zstd_level", c_int)]


class JsonHead(Structure):
    """The head of jansson's json_t (type, refcount): json_decref is inline."""

    _fields_ = [("type", c_int), ("refcount", c_size_t)]


STRUCTS = {
    "brig_error": Error,
    "brig_identity": Identity,
    "brig_up_opts": UpOpts,
    "brig_up_result": UpResult,
    "brig_recover_result": RecoverResult,
    "brig_store_checkpoint": StoreCheckpoint,
    "brig_store_audit": StoreAudit,
    "brig_guest_exec_opts": GuestExecOpts,
    "brig_guest_exit": GuestExit,
    "brig_capture": Capture,
    "brig_exec_result": ExecResult,
    "brig_run_opts": RunOpts,
    "brig_run_result": RunResult,
    "brig_checkpoint_opts": CheckpointOpts,
    "json_t": JsonHead,
}

# Versions of the versioned option structs this mirror was written against.
UP_OPTS_VERSION = 1
GUEST_EXEC_OPTS_VERSION = 1
RUN_OPTS_VERSION = 1
CHECKPOINT_OPTS_VERSION = 1

ERR = POINTER(c_void_p)  # brig_error **
P = c_void_p

_PROTOS = {
    "brig_error_free": (None, [P]),
    "brig_error_name": (c_char_p, [c_int]),
    "brig_engine_open": (c_int, [POINTER(c_void_p), P, ERR]),
    "brig_engine_free": (None, [P]),
    "brig_spec_init": (None, [P]),
    "brig_spec_clear": (None, [P]),
    "brig_spec_set": (c_int, [P, c_char_p, c_char_p, ERR]),
    "brig_spec_add_env": (c_int, [P, c_char_p, ERR]),
    "brig_spec_add_label": (c_int, [P, c_char_p, ERR]),
    "brig_spec_validate": (c_int, [P, P, ERR]),
    "brig_env_exec": (c_int, [POINTER(c_void_p), POINTER(c_char_p), c_size_t, c_int, ERR]),
    "brig_harness_parse": (c_int, [POINTER(c_int), c_char_p, ERR]),
    "brig_identity_validate": (c_int, [P, ERR]),
    "brig_store_open": (c_int, [POINTER(c_void_p), c_char_p, ERR]),
    "brig_store_close": (None, [P]),
    "brig_store_checkpoint_list": (
        c_int, [P, POINTER(c_void_p), POINTER(c_size_t), c_char_p, c_char_p, c_char_p, ERR]),
    "brig_store_checkpoint_get": (c_int, [P, POINTER(c_void_p), c_int64, ERR]),
    "brig_store_checkpoint_free": (None, [P]),
    "brig_store_checkpoint_free_array": (None, [P, c_size_t]),
    "brig_store_audit_add": (c_int, [P, POINTER(c_int64), P, ERR]),
    "brig_store_session_delete": (
        c_int, [P, P, P, c_char_p, c_char_p, c_char_p, c_int64, ERR]),
    "brig_session_open": (c_int, [P, P, P, P, P, P, ERR]),
    "brig_up_result_clear": (None, [P]),
    "brig_session_recover": (c_int, [P, P, P, c_char_p, c_char_p, c_char_p, c_char_p, ERR]),
    "brig_session_recover_at": (c_int, [P, P, P, c_char_p, c_char_p, c_char_p, c_char_p, c_int64, ERR]),
    "brig_recover_result_clear": (None, [P]),
    "brig_session_mark_failed": (c_int, [P, c_char_p, c_char_p, c_char_p, c_int64, ERR]),
    "brig_checkpoint_dir": (c_int, [POINTER(c_void_p), P, ERR]),
    "brig_checkpoint_create": (c_int, [P, P, POINTER(c_void_p), c_char_p, P, ERR]),
    "brig_checkpoint_remove": (c_int, [P, c_char_p, c_int64, ERR]),
    "brig_checkpoint_restore": (c_int, [P, c_char_p, P, c_char_p, ERR]),
    "brig_computer_get": (c_int, [P, POINTER(c_void_p), c_char_p, P, ERR]),
    "brig_computer_list": (c_int, [P, POINTER(c_void_p), POINTER(c_size_t), c_char_p, c_char_p, ERR]),
    "brig_computer_free": (None, [P]),
    "brig_computer_free_array": (None, [P, c_size_t]),
    "brig_computer_to_json": (P, [P]),
    "brig_computer_pause": (c_int, [P, c_char_p, ERR]),
    "brig_computer_resume": (c_int, [P, c_char_p, ERR]),
    "brig_computer_stop": (c_int, [P, c_char_p, ERR]),
    "brig_computer_destroy": (c_int, [P, c_char_p, ERR]),
    "brig_computer_guest": (c_int, [P, POINTER(c_void_p), c_char_p, ERR]),
    "brig_guest_free": (None, [P]),
    "brig_guest_alive": (c_bool, [P]),
    "brig_guest_exec": (c_int, [P, P, P, ERR]),
    "brig_guest_start": (c_int, [P, P, POINTER(c_int64), ERR]),
    "brig_guest_ps": (c_int, [P, POINTER(c_void_p), c_int64, ERR]),
    "brig_guest_status": (c_int, [P, POINTER(c_void_p), c_int64, c_char_p, c_int64, ERR]),
    "brig_guest_kill": (c_int, [P, c_int64, P, c_int64, ERR]),
    "brig_guest_signal": (c_int, [P, c_int64, c_int, c_int64, ERR]),
    "brig_guest_attach": (c_int, [P, c_int64, P, P, ERR]),
    "brig_guest_stat": (c_int, [P, POINTER(c_void_p), c_char_p, c_bool, c_int64, ERR]),
    "brig_guest_list": (c_int, [P, POINTER(c_void_p), c_char_p, c_int, c_int64, ERR]),
    "brig_guest_read": (c_int, [P, c_char_p, c_int64, c_int64, DATA_CB, P, c_int64, ERR]),
    "brig_guest_write": (c_int, [P, c_char_p, c_int, c_void_p, c_size_t, c_uint, c_bool, c_int64, ERR]),
    "brig_guest_mkdir": (c_int, [P, c_char_p, c_uint, c_bool, c_int64, ERR]),
    "brig_guest_remove": (c_int, [P, c_char_p, c_bool, c_int64, ERR]),
    "brig_guest_rename": (c_int, [P, c_char_p, c_char_p, c_int64, ERR]),
    "brig_run": (c_int, [P, P, P, ERR]),
    "brig_run_result_clear": (None, [P]),
    "json_dumps": (P, [P, c_size_t]),
    "json_delete": (None, [P]),
    "json_array_size": (c_size_t, [P]),
    "json_array_get": (P, [P, c_size_t]),
    "json_string_value": (c_char_p, [P]),
}


class _Lib:
    """Loads libbrig on first attribute access (so `import brig` never fails)."""

    def __init__(self) -> None:
        self._dll: Optional[ctypes.CDLL] = None
        self._mu = threading.Lock()
        self.path: Optional[str] = None

    def load(self) -> ctypes.CDLL:
        if self._dll is not None:
            return self._dll
        with self._mu:
            if self._dll is not None:
                return self._dll
            tried = []
            for cand in _candidates():
                if os.path.sep in cand and not os.path.exists(cand):
                    tried.append(cand)
                    continue
                try:
                    dll = ctypes.CDLL(cand)
                except OSError as e:
                    tried.append(f"{cand} ({e})")
                    continue
                for name, (res, args) in _PROTOS.items():
                    fn = getattr(dll, name)
                    fn.restype = res
                    fn.argtypes = args
                self.path = cand
                self._dll = dll
                return dll
            raise LibraryNotFound(INSTALL_HINT + " Tried: " + ", ".join(tried))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.load(), name)


lib = _Lib()
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.free.argtypes = [c_void_p]
libc.free.restype = None

SIZE_MAX = ctypes.c_size_t(-1).value


def json_take(j: Optional[int]) -> Any:
    """Decodes a json_t* the caller owns into Python and drops the reference."""
    import json

    if not j:
        return None
    try:
        s = lib.json_dumps(j, 0x200)  # JSON_ENCODE_ANY
        if not s:
            return None
        try:
            return json.loads(ctypes.string_at(s).decode("utf-8", "replace"))
        finally:
            libc.free(s)
    finally:
        head = JsonHead.from_address(j)
        if head.refcount != SIZE_MAX:
            head.refcount -= 1
            if head.refcount == 0:
                lib.json_delete(j)


def strv(items: List[bytes]) -> Any:
    """A NULL-terminated char*[] (the caller keeps `items` alive)."""
    arr = (c_char_p * (len(items) + 1))(*items, None)
    return arr


__all__ += ["c_double"]
