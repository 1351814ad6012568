"""wasmbox runs untrusted Python or JavaScript — code an LLM wrote — inside a
WebAssembly sandbox with fuel, deadline and memory limits and no ambient capabilities.
The code reaches the world only through the tools you give it, each call checked by the
broker against the run's scope and limits.

>>> import wasmbox
>>> def add(a: int, b: int) -> int:
...     "Adds a and b"
...     return a + b
>>> sandbox = wasmbox.Sandbox(tools=[add], scope="all", limits=wasmbox.Limits(timeout_ms=5_000))
>>> sandbox.run("tools.add(a=1, b=2) * 10").value
30

The names mirror the Rust crate's (`Sandbox`, `Tool`, `Limits`, `Outcome`, `Status`);
docs/python.md in the repository has the whole story.
"""

from __future__ import annotations

import atexit

from ._errors import (
    CacheError,
    ConfigurationError,
    EngineError,
    GuestError,
    GuestNotBuiltError,
    IsolationError,
    LimitsError,
    SessionBusyError,
    SessionError,
    ToolRegistrationError,
    WasmboxError,
)
from ._native import _shutdown as _native_shutdown
from ._native import (
    ISOLATION_NAMES,
    CapturedOutput,
    ErrorDetail,
    Outcome,
    Stats,
    ToolCallRecord,
    configure_engine,
    guest_versions,
)
from ._sandbox import InputFiles, Language, Sandbox, ScopeLike
from ._session import Session
from ._tool import Tool, tool
from ._types import CallStatus, Limits, Status

# Before the interpreter finalizes: the extension's threads stop entering Python and those
# inside leave first (src/exit_guard.rs).
atexit.register(_native_shutdown)

__all__ = [
    "Sandbox",
    "Session",
    "Tool",
    "tool",
    "Limits",
    "Outcome",
    "Status",
    "CallStatus",
    "ErrorDetail",
    "CapturedOutput",
    "ToolCallRecord",
    "Stats",
    "Language",
    "ScopeLike",
    "InputFiles",
    "ISOLATION_NAMES",
    "configure_engine",
    "guest_versions",
    "WasmboxError",
    "ConfigurationError",
    "LimitsError",
    "ToolRegistrationError",
    "IsolationError",
    "EngineError",
    "CacheError",
    "GuestError",
    "GuestNotBuiltError",
    "SessionError",
    "SessionBusyError",
]
