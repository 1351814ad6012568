"""Type stubs of the extension module `wasmbox._native` (src/lib.rs)."""

import asyncio
import contextvars
import os
from collections.abc import Callable, Generator, Mapping
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
class RunFuture:
    """What ``start`` returns (src/loop_completions.rs): awaited by the coroutine of
    ``run_async``; an asyncio ``Task`` waits on it as on a future. ``cancel()`` cancels
    the run; a session step's future stays pending until the step has stopped."""

    _asyncio_future_blocking: bool
    def __await__(self) -> Generator[Any, None, Outcome]: ...
    def __iter__(self) -> RunFuture: ...
    def __next__(self) -> RunFuture: ...
    def get_loop(self) -> asyncio.AbstractEventLoop: ...
    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def result(self) -> Outcome: ...
    def exception(self) -> BaseException | None: ...
    def add_done_callback(
        self, callback: Callable[[RunFuture], object], *, context: contextvars.Context | None = None
    ) -> None: ...
    def remove_done_callback(self, callback: Callable[[RunFuture], object]) -> int: ...
    def cancel(self, msg: Any | None = None) -> bool: ...
    def _settle(self, outcome: Outcome) -> None: ...

@final
class LoopCompletions:
    """One loop's queue of finished runs (src/loop_completions.rs): the loop watches
    ``fileno()`` with ``add_reader`` and calls the object, which settles the runs'
    futures. Raises ``NotImplementedError`` where there is no pipe to watch (Windows)."""

    def __init__(self) -> None: ...
    def fileno(self) -> int: ...
    def __call__(self) -> None: ...

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
        completions: LoopCompletions | None,
        on_output: Callable[[str, str], Any] | None = None,
        files: Mapping[str, bytes | bytearray | memoryview | str] | None = None,
        eager: bool = False,
    ) -> RunFuture: ...

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
        completions: LoopCompletions | None,
        on_output: Callable[[str, str], Any] | None = None,
        eager: bool = False,
    ) -> RunFuture: ...
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
