"""Exceptions: one class per brig error code (include/brig/error.h), each
carrying brig's own message (which never holds a secret)."""

from __future__ import annotations

import ctypes
from typing import Dict, Optional, Type

from . import _lib


class Error(Exception):
    """Base of every error libbrig reports. `code` is the BRIG_E* value,
    `name` its constant name, `message` brig's message (what failed, on
    what, and what to do)."""

    code: int = 0

    def __init__(self, message: str, code: Optional[int] = None, sys_errno: int = 0, http_status: int = 0):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.sys_errno = sys_errno
        self.http_status = http_status

    @property
    def name(self) -> str:
        return _NAMES.get(self.code, "BRIG_E?")


class InvalidSpec(Error, ValueError):
    """BRIG_EINVAL: bad input from the caller (the message names the field); nothing was done."""
    code = -1


class NotSent(Error):
    """BRIG_ENOTSENT: nothing reached the daemon or brig-init; safe to retry."""
    code = -2


class Uncertain(Error):
    """BRIG_EUNCERTAIN: a request was sent and no complete answer came; it may have taken effect."""
    code = -3


class Timeout(Error):
    """BRIG_ETIMEDOUT: a deadline passed."""
    code = -4


class NotFound(Error, LookupError):
    """BRIG_ENOTFOUND: the object (computer, session, file, image, process) does not exist."""
    code = -5


class Conflict(Error):
    """BRIG_ECONFLICT: an object exists and differs (name taken, file exists, revision moved on)."""
    code = -6


class ProtocolError(Error):
    """BRIG_EPROTO: the peer (daemon or brig-init) sent something malformed."""
    code = -7


class DaemonError(Error):
    """BRIG_EDAEMON: the Docker daemon answered 5xx."""
    code = -8


class TooBig(Error):
    """BRIG_ETOOBIG: a peer exceeded a size cap."""
    code = -9


class IOFailure(Error):
    """BRIG_EIO: local I/O failed, or brig-init reported an I/O error."""
    code = -10


class Canceled(Error):
    """BRIG_ECANCELED: the caller cancelled."""
    code = -11


class StateError(Error):
    """BRIG_ESTATE: the object is in the wrong state (paused, not running, failed)."""
    code = -12


class Unsafe(Error):
    """BRIG_EUNSAFE: untrusted data broke a safety rule (tar entry, path)."""
    code = -13


class BadRequest(Error):
    """BRIG_EBADREQ: the daemon answered 400."""
    code = -14


class Denied(Error):
    """BRIG_EDENIED: permission denied (daemon 401/403, or in the sandbox)."""
    code = -15


class TLSError(Error):
    """BRIG_ETLS: TLS set-up or handshake with the daemon failed."""
    code = -16


class Busy(Error):
    """BRIG_EBUSY: the object is in use."""
    code = -17


class StoreError(Error):
    """BRIG_ESTORE: the session store failed."""
    code = -18


class Corrupt(Error):
    """BRIG_ECORRUPT: stored data (a checkpoint) failed its integrity check."""
    code = -19


_CLASSES: Dict[int, Type[Error]] = {
    c.code: c
    for c in (InvalidSpec, NotSent, Uncertain, Timeout, NotFound, Conflict, ProtocolError, DaemonError, TooBig,
              IOFailure, Canceled, StateError, Unsafe, BadRequest, Denied, TLSError, Busy, StoreError, Corrupt)
}
_NAMES = {
    -1: "BRIG_EINVAL", -2: "BRIG_ENOTSENT", -3: "BRIG_EUNCERTAIN", -4: "BRIG_ETIMEDOUT", -5: "BRIG_ENOTFOUND",
    -6: "BRIG_ECONFLICT", -7: "BRIG_EPROTO", -8: "BRIG_EDAEMON", -9: "BRIG_ETOOBIG", -10: "BRIG_EIO",
    -11: "BRIG_ECANCELED", -12: "BRIG_ESTATE", -13: "BRIG_EUNSAFE", -14: "BRIG_EBADREQ", -15: "BRIG_EDENIED",
    -16: "BRIG_ETLS", -17: "BRIG_EBUSY", -18: "BRIG_ESTORE", -19: "BRIG_ECORRUPT",
}


def error_class(code: int) -> Type[Error]:
    return _CLASSES.get(code, Error)


def make(rc: int, err: ctypes.c_void_p) -> Error:
    """Builds the exception of return code rc from a brig_error* and frees it."""
    p = err.value
    msg, errno_, http = "", 0, 0
    code = rc
    if p:
        e = _lib.Error.from_address(p)
        msg = (e.message or b"").decode("utf-8", "replace")
        errno_, http = e.sys_errno, e.http_status
        code = e.code or rc
        _lib.lib.brig_error_free(p)
        err.value = None
    if not msg:
        msg = _NAMES.get(code, f"brig error {code}")
    return error_class(code)(msg, code, errno_, http)


def check(rc: int, err: ctypes.c_void_p) -> None:
    """Raises the exception of a non-zero return code."""
    if rc != 0:
        raise make(rc, err)
