"""Type stubs of the extension module `wasmbox._native` (src/lib.rs)."""

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any, final

from ._types import CallStatus, Status

ISOLATION_NAMES: list[str]

@final
class ErrorDetail:
    """What went wrong, for every status but ``ok``."""

    @property
    def kind(self) -> str:
        """The exception type for guest errors, else the status word or the budget that ran out."""
    @property
    def message(self) -> str: ...
    @property
    def traceback(self) -> str:
        """The guest's traceback, when there is one (else empty)."""

@final
class CapturedOutput:
    """Captured text of one output stream."""

    @property
    def text(self) -> str: ...
    @property
    def truncated(self) -> bool: ...

@final
class ToolCallRecord:
    """One entry of a run's tool-call trail."""

    @property
    def run_id(self) -> str: ...
    @property
    def call_id(self) -> int: ...
    @property
    def tool(self) -> str: ...
    @property
    def status(self) -> CallStatus: ...
    @property
    def duration_ms(self) -> float: ...
    @property
    def args_bytes(self) -> int: ...
    @property
    def result_bytes(self) -> int: ...
    @property
    def message(self) -> str | None: ...

@final
class Stats:
    """What a run cost."""

    @property
    def wall_time_us(self) -> int: ...
    @property
    def instantiate_time_us(self) -> int: ...
    @property
    def fuel_used(self) -> int: ...
    @property
    def peak_memory_bytes(self) -> int: ...

@final
class Outcome:
    """The result of one run (the Rust ``wasmbox::Outcome``)."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> Status: ...
    @property
    def value(self) -> Any:
        """The run's JSON value as Python data; ``None`` unless ``ok``."""
    @property
    def error(self) -> ErrorDetail | None: ...
    @property
    def stdout(self) -> CapturedOutput: ...
    @property
    def stderr(self) -> CapturedOutput: ...
    @property
    def tool_calls(self) -> list[ToolCallRecord]: ...
    @property
    def files(self) -> dict[str, bytes]:
        """The files the guest left under ``/output``, ``{name: bytes}`` in name order."""
    @property
    def stats(self) -> Stats: ...
    def is_ok(self) -> bool: ...
    def to_json(self) -> str: ...

@final
class RunHandle:
    def cancel(self) -> None: ...

@final
class LoopCompletions:
    """One loop's queue of finished runs (src/loop_completions.rs): the loop watches
    ``fileno()`` with ``add_reader`` and calls the object, which settles the runs'
    futures. Raises ``NotImplementedError`` where there is no socket pair (Windows)."""

    def __init__(self) -> None: ...
    def fileno(self) -> int: ...
    def __call__(self) -> None: ...

OnDone = Callable[[Outcome], None] | tuple[LoopCompletions, asyncio.Future[Outcome]]

@final
class NativeSandbox:
    def __init__(
        self,
        language: str,
        tools: list[tuple[str, str, dict[str, Any], Callable[..., Any], bool, int | None, bool]],
        scope: str | list[str],
        limits: dict[str, Any],
        isolation: str,
        worker_program: str | None = None,
    ) -> None: ...
    def run(
        self,
        code: str,
        input: Any,
        on_output: Callable[[str, str], Any] | None = None,
        files: Mapping[str, bytes | bytearray | memoryview | str] | None = None,
    ) -> Outcome: ...
    def start(
        self,
        code: str,
        input: Any,
        event_loop: asyncio.AbstractEventLoop,
        on_done: OnDone,
        on_output: Callable[[str, str], Any] | None = None,
        files: Mapping[str, bytes | bytearray | memoryview | str] | None = None,
    ) -> RunHandle: ...

@final
class NativeSession:
    def __init__(
        self,
        sandbox: NativeSandbox,
        idle_timeout_ms: int | None = None,
        max_lifetime_ms: int | None = None,
        files: Mapping[str, bytes | bytearray | memoryview | str] | None = None,
    ) -> None: ...
    def run(self, code: str, input: Any, on_output: Callable[[str, str], Any] | None = None) -> Outcome: ...
    def start(
        self,
        code: str,
        input: Any,
        event_loop: asyncio.AbstractEventLoop,
        on_done: OnDone,
        on_output: Callable[[str, str], Any] | None = None,
    ) -> RunHandle: ...
    def reset(self) -> None: ...
    def end(self) -> str | None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...

def configure_engine(
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    max_concurrent_runs: int | None = None,
    max_queued_runs: int | None = None,
    queue_timeout_ms: int | None = None,
    epoch_tick_ms: int | None = None,
    fuel_metering: bool | None = None,
    pooling: bool | None = None,
    prepared_instances: int | None = None,
) -> None:
    """Sets the process's engine settings; only before the first `Sandbox`."""

def default_limits() -> dict[str, Any]: ...
def validate_limits(limits: dict[str, Any]) -> None: ...
def guest_versions() -> dict[str, dict[str, str]]: ...
def _rust_baseline(sandbox: NativeSandbox, code: str, iterations: int) -> float: ...
def _rust_add_sandbox(language: str) -> NativeSandbox: ...
def _shutdown() -> None: ...
