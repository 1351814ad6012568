"""The value types of the API: `Status`, `CallStatus` and `Limits`, mirroring the Rust
crate's names and fields."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from . import _native

__all__ = ["Status", "CallStatus", "Limits"]


class Status(str, enum.Enum):
    """How a run ended. Compares equal to its word: ``outcome.status == "ok"``."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    FUEL_EXHAUSTED = "fuel_exhausted"
    MEMORY_EXHAUSTED = "memory_exhausted"
    OUTPUT_LIMIT = "output_limit"
    TOOL_LIMIT = "tool_limit"
    INVALID_REQUEST = "invalid_request"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    CRASHED = "crashed"
    INTERNAL = "internal"

    def __str__(self) -> str:
        return self.value


class CallStatus(str, enum.Enum):
    """How one tool call ended."""

    OK = "ok"
    DENIED = "denied"
    BUDGET_EXHAUSTED = "budget_exhausted"
    INVALID_ARGS = "invalid_args"
    FAILED = "failed"
    TIMEOUT = "timeout"

    def __str__(self) -> str:
        return self.value


_DEFAULTS: dict[str, Any] = _native.default_limits()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Limits:
    """Limits of each run: the Rust `wasmbox::Limits`, field for field, with its
    defaults. Checked when made: a field that makes no sense raises `LimitsError`.

    >>> Limits(timeout_ms=2_000, max_tool_calls=20).timeout_ms
    2000
    """

    timeout_ms: int = _DEFAULTS["timeout_ms"]
    """Wall-clock deadline of the whole run, tool waits included."""
    fuel: int | None = _DEFAULTS["fuel"]
    """A deterministic compute budget; needs `configure_engine(fuel_metering=True)`."""
    max_memory_bytes: int = _DEFAULTS["max_memory_bytes"]
    max_stdout_bytes: int = _DEFAULTS["max_stdout_bytes"]
    max_stderr_bytes: int = _DEFAULTS["max_stderr_bytes"]
    max_code_bytes: int = _DEFAULTS["max_code_bytes"]
    max_result_bytes: int = _DEFAULTS["max_result_bytes"]
    max_tool_calls: int = _DEFAULTS["max_tool_calls"]
    max_tree_tool_calls: int | None = _DEFAULTS["max_tree_tool_calls"]
    max_tool_args_bytes: int = _DEFAULTS["max_tool_args_bytes"]
    max_tool_result_bytes: int = _DEFAULTS["max_tool_result_bytes"]
    max_cumulative_result_bytes: int = _DEFAULTS["max_cumulative_result_bytes"]
    max_json_depth: int = _DEFAULTS["max_json_depth"]
    tool_timeout_ms: int = _DEFAULTS["tool_timeout_ms"]
    max_concurrent_tool_calls: int = _DEFAULTS["max_concurrent_tool_calls"]
    max_nesting_depth: int = _DEFAULTS["max_nesting_depth"]
    max_fs_bytes: int = _DEFAULTS["max_fs_bytes"]
    """Quota on the file bytes a run writes to its in-memory /output and /tmp."""
    max_fs_files: int = _DEFAULTS["max_fs_files"]
    """Cap on the files and directories a run creates there."""

    def __post_init__(self) -> None:
        _native.validate_limits(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The limits as the Rust crate's serde form."""
        return dataclasses.asdict(self)
