"""`Session`: one guest instance kept alive across steps (the Rust `wasmbox::Session`)."""

from __future__ import annotations

from asyncio import get_running_loop
from collections.abc import Callable
from types import TracebackType
from typing import Any

from . import _native
from ._awaiting import completions_of
from ._native import Outcome

__all__ = ["Session"]


class Session:
    """A guest instance kept alive across steps, opened by `Sandbox.session`: what one
    step defines (globals, imports, functions, classes, files) is there in the next.

    Each step has its own deadline, fuel, tool budgets, output caps and `Outcome`; the
    memory limit, the files and the admission slot span the session. A step that raises
    leaves the session usable; one that breaches a limit (timeout, fuel, memory, output),
    is cancelled or traps ends it, and every later step is ``rejected`` with error kind
    ``session_ended`` saying why (`end` has the reason). `reset` starts it again on a
    fresh instance. The session also ends after ``idle_timeout_ms`` without a step and
    ``max_lifetime_ms`` after it opened.

    One step at a time: a call while a step (or a reset) is in progress, from another
    thread or task, raises `SessionBusyError`. `close` (or leaving a ``with`` / ``async
    with`` block) frees the instance and the admission slot at once.
    """

    __slots__ = ("_native", "sandbox")

    def __init__(self, native: _native.NativeSession, sandbox: Any) -> None:
        self._native = native
        self.sandbox = sandbox

    def run(
        self, code: str, input: Any = None, *, on_output: Callable[[str, str], Any] | None = None
    ) -> Outcome:
        """Runs ``code`` as the next step with ``input`` (``INPUT``) and returns its
        `Outcome`. Never raises for what the guest did. Releases the GIL while the guest
        runs; Ctrl-C cancels the step (which ends the session) and raises
        ``KeyboardInterrupt``. Raises `SessionError` once closed. ``on_output(stream,
        text)`` gets the step's output as the guest writes it, as in `Sandbox.run`."""
        return self._native.run(code, input, on_output)

    async def run_async(
        self,
        code: str,
        input: Any = None,
        *,
        on_output: Callable[[str, str], Any] | None = None,
        eager: bool = False,
    ) -> Outcome:
        """Like `run`, awaiting the outcome without blocking the event loop. Async tools
        run on this loop; cancelling the awaiting task cancels the step, which ends the
        session: the task's ``CancelledError`` comes once the step has stopped.
        ``on_output`` is called from one of wasmbox's threads, not the loop's.
        ``eager=True`` runs the step on the loop's thread until it would wait, blocking
        the loop meanwhile, as `Sandbox.run_async` does."""
        loop = get_running_loop()
        return await self._native.start(code, input, loop, completions_of(loop), on_output, eager)

    def reset(self) -> None:
        """Starts the session again on a fresh instance: nothing of the earlier steps
        stays. Works after the session ended too, unless its lifetime has passed. Raises
        `SessionError` if no new instance could be had (the session is then ended)."""
        self._native.reset()

    @property
    def end(self) -> str | None:
        """Why the session ended (e.g. ``"step 2 ended `timeout` (timeout)"``), or
        ``None`` while it is usable. Raises `SessionBusyError` while a step runs."""
        return self._native.end()

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._native.closed

    def close(self) -> None:
        """Frees the instance and the admission slot. A step still running is cancelled
        and frees them when it stops. Closing twice does nothing."""
        self._native.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"Session({state}, sandbox={self.sandbox!r})"
