"""The exceptions of the package. A run never raises for what the guest did: its
outcome says. These are for setting things up."""

from __future__ import annotations

__all__ = [
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


class WasmboxError(Exception):
    """Base class of every wasmbox exception."""


class ConfigurationError(WasmboxError, ValueError):
    """A sandbox was configured with something unusable (unknown language, scope,
    isolation name, engine settings after the engine started)."""


class LimitsError(ConfigurationError):
    """A `Limits` field is out of range or inconsistent with another (the Rust
    `Limits::validate`), or unknown."""


class ToolRegistrationError(ConfigurationError):
    """A tool's name is not `[a-z_][a-z0-9_]*` (at most 64 bytes), is registered twice,
    or its argument schema is not a valid JSON Schema object, or cannot be derived."""


class IsolationError(ConfigurationError):
    """The requested isolation cannot be provided on this host; nothing falls back to a
    weaker one."""


class EngineError(WasmboxError):
    """The wasm engine could not be created."""


class CacheError(EngineError):
    """The precompile cache directory cannot be used (unwritable, or not private to this
    user)."""


class GuestError(EngineError):
    """A guest component could not be loaded or compiled."""


class GuestNotBuiltError(GuestError):
    """This build of the package carries no such built-in guest."""


class SessionError(WasmboxError):
    """A session could not be opened or reset (``status`` ``rejected`` with ``kind``
    ``admission`` when admission control turned it away; ``session_ended`` when a reset
    comes after the lifetime), or was used after `Session.close` (``kind``
    ``session_closed``). A configuration the session cannot use raises
    `ConfigurationError` (`IsolationError` for worker isolation) instead."""

    def __init__(self, message: str, status: str = "rejected", kind: str = "") -> None:
        super().__init__(message)
        from ._types import Status

        self.status = Status(status)
        self.kind = kind


class SessionBusyError(WasmboxError, RuntimeError):
    """A call on a `Session` while one of its steps (or a reset) is in progress, from
    another thread or task: a session runs one step at a time."""
