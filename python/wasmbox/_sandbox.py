"""`Sandbox`: a run configuration (the Rust `wasmbox::Sandbox`)."""

from __future__ import annotations

import os
from asyncio import get_running_loop
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Union

from . import _native
from ._errors import ConfigurationError
from ._awaiting import completions_of
from ._native import Outcome
from ._session import Session
from ._tool import Tool
from ._types import Limits

__all__ = ["Sandbox", "Language", "ScopeLike", "InputFiles"]

Language = Literal["python", "javascript"]
ScopeLike = Union[Literal["all", "none"], Iterable[str], None]
InputFiles = Mapping[str, Union[bytes, bytearray, memoryview, str]]
"""Files the guest reads under ``/input``: names (``"data.csv"``, ``"dir/a.txt"``) to
their contents (a ``str`` is stored as UTF-8)."""


def _scope(scope: ScopeLike) -> str | list[str]:
    if scope is None:
        return "none"
    if isinstance(scope, str):
        return scope
    names = list(scope)
    if not all(isinstance(n, str) for n in names):
        raise ConfigurationError("scope must be \"all\", \"none\" or tool names")
    return names


class Sandbox:
    """A reusable run configuration: a guest language, tools, a scope and limits.

    Every run gets a fresh instance, so nothing leaks between runs. ``scope`` says which
    of ``tools`` runs may call: ``"all"``, a list of names, or ``None``/``"none"`` (the
    default, as in the Rust crate: no tool). ``isolation`` is ``"inproc"`` (default),
    ``"worker"``, ``"bwrap"``, ``"docker"`` or ``"seatbelt"``; every choice but
    ``inproc`` runs guests in ``wasmbox worker`` processes, which needs the ``wasmbox``
    binary (``worker_program``, else ``$WASMBOX_WORKER``, else ``wasmbox`` beside the
    Python executable).

    Configuration errors raise at once: `LimitsError`, `ToolRegistrationError`,
    `IsolationError`, `ConfigurationError`. The first sandbox of a language in a process
    loads its guest (on a cold cache, compiling it takes ~20-30 s).
    """

    __slots__ = ("_native", "language", "tools", "limits", "isolation")

    def __init__(
        self,
        language: Language = "python",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        scope: ScopeLike = None,
        limits: Limits | None = None,
        isolation: str = "inproc",
        *,
        worker_program: str | os.PathLike[str] | None = None,
    ) -> None:
        self.language = language
        self.tools: tuple[Tool, ...] = tuple(t if isinstance(t, Tool) else Tool(t) for t in tools)
        self.limits = limits if limits is not None else Limits()
        self.isolation = isolation
        self._native = _native.NativeSandbox(
            language,
            [t._spec() for t in self.tools],
            _scope(scope),
            self.limits.to_dict(),
            isolation,
            os.fspath(worker_program) if worker_program is not None else None,
        )

    def run(
        self,
        code: str,
        input: Any = None,
        *,
        files: InputFiles | None = None,
        on_output: Callable[[str, str], Any] | None = None,
    ) -> Outcome:
        """Runs ``code`` with ``input`` (``INPUT`` in Python) and returns its `Outcome`.

        Never raises for what the guest did. Releases the GIL while the guest runs, so
        other threads run meanwhile; Ctrl-C cancels the run and raises
        ``KeyboardInterrupt``. Raises ``TypeError`` if ``input`` is not JSON data.

        ``files`` (``{name: bytes or str}``) are readable under the guest's ``/input``;
        what it leaves under ``/output`` comes back as ``Outcome.files``. Raises
        ``ValueError`` for a name that is absolute, empty or has a ``.``/``..`` part.

        ``on_output(stream, text)``, if given, is called as the guest writes, with
        ``stream`` ``"stdout"`` or ``"stderr"``: the text the outcome keeps, in order,
        within the output caps, from one of wasmbox's threads. An exception it raises
        goes to ``sys.unraisablehook``; the run goes on.
        """
        return self._native.run(code, input, on_output, files)

    async def run_async(
        self,
        code: str,
        input: Any = None,
        *,
        files: InputFiles | None = None,
        on_output: Callable[[str, str], Any] | None = None,
        eager: bool = False,
    ) -> Outcome:
        """Like `run`, awaiting the outcome without blocking the event loop. Async tools
        run on this loop; cancelling the awaiting task cancels the run. ``on_output`` is
        called from one of wasmbox's threads, not the loop's: use
        ``loop.call_soon_threadsafe`` to hand text to the loop.

        ``eager=True`` starts the run on the loop's thread (the GIL released) and hands it
        to wasmbox's threads only when it first waits (a tool call that is not inline) or
        at its first epoch tick (``epoch_tick_ms``, 10 ms by default): a short run
        finishes without a thread hand-off, but the loop is blocked for that first slice
        (instantiation and guest code, up to one epoch tick), and ``on_output`` and
        inline tools are called on the loop's thread meanwhile."""
        loop = get_running_loop()
        return await self._native.start(code, input, loop, completions_of(loop), on_output, files, eager)

    def session(
        self,
        *,
        files: InputFiles | None = None,
        idle_timeout_ms: int | None = None,
        max_lifetime_ms: int | None = None,
    ) -> Session:
        """Opens a `Session`: one guest instance kept across steps (``session.run``).
        ``files`` are under ``/input`` in every step, as for `run`; what steps write
        under ``/output`` and ``/tmp`` stays for later steps, and every step's
        ``Outcome.files`` holds all of ``/output``. ``idle_timeout_ms`` (default 5 min)
        and ``max_lifetime_ms`` (default 1 h) end it. Holds an admission slot until
        closed. Raises `ConfigurationError` for a zero duration, `IsolationError` for a
        sandbox with worker isolation, `SessionError` when admission control refuses it."""
        native = _native.NativeSession(self._native, idle_timeout_ms, max_lifetime_ms, files)
        return Session(native, self)

    def __repr__(self) -> str:
        names = ", ".join(t.name for t in self.tools)
        return f"Sandbox(language={self.language!r}, tools=[{names}], isolation={self.isolation!r})"
