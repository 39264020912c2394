"""Files in the computer, through brig-init."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import _lib
from ._core import FILE_TIMEOUT, _b, _deadline
from ._lib import lib
from .errors import NotFound

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["FileInfo", "Files"]


@dataclass
class FileInfo:
    """A file in the computer as brig-init sees it."""

    path: str
    type: str  # file, dir, symlink, fifo, socket, char, block
    mode: int
    size: int
    mtime: float  # unix seconds (a float: to about a microsecond)
    uid: int
    gid: int
    link: Optional[str] = None
    mtime_ns: int = 0  # unix nanoseconds, exact

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


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
                        int(j.get("mtime_ns", 0)) / 1e9, int(j.get("uid", -1)), int(j.get("gid", -1)), j.get("link"),
                        int(j.get("mtime_ns", 0)))

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
