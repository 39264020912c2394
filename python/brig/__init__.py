"""brig for Python: hardened Docker sandboxes for agents, through libbrig.

    import brig
    with brig.Sandbox(cpus=2.0, memory_mb=2048, network="none") as sb:
        print(sb.exec("echo hello").text)

Nothing but the standard library is needed at run time, and libbrig: it is
loaded on first use (BRIG_LIBRARY, a source checkout's build/, then the
system's library path), so `import brig` works without it and the first
call raises brig.LibraryNotFound saying how to install it.
"""

from ._lib import LibraryNotFound
from .errors import (
    BadRequest,
    Busy,
    Canceled,
    Conflict,
    Corrupt,
    DaemonError,
    Denied,
    Error,
    InvalidSpec,
    IOFailure,
    NotFound,
    NotSent,
    ProtocolError,
    StateError,
    StoreError,
    Timeout,
    TLSError,
    TooBig,
    Uncertain,
    Unsafe,
)
from ._core import DEFAULT_IMAGE
from .files import FileInfo, Files
from .process import ExecResult, ExecStream, OutputEvent, Process
from .sandbox import Checkpoint, Sandbox, SandboxInfo, sandboxes
from .run import RunResult, run
from .aio import AsyncExecStream, AsyncSandbox

__version__ = "0.1.0"

__all__ = [
    "AsyncExecStream", "AsyncSandbox", "BadRequest", "Busy", "Canceled", "Checkpoint", "Conflict", "Corrupt",
    "DaemonError", "DEFAULT_IMAGE", "Denied", "Error", "ExecResult", "ExecStream", "FileInfo", "Files",
    "InvalidSpec", "IOFailure", "LibraryNotFound", "NotFound", "NotSent", "OutputEvent", "Process", "ProtocolError",
    "run", "RunResult", "Sandbox", "sandboxes", "SandboxInfo", "StateError", "StoreError", "Timeout", "TLSError",
    "TooBig", "Uncertain", "Unsafe",
]
