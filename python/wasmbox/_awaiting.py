"""Awaiting a run or a session step that the extension runs on its own threads."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, Union

from ._native import LoopCompletions, Outcome

OnDone = Union[Callable[[Outcome], None], "tuple[LoopCompletions, asyncio.Future[Outcome]]"]
Start = Callable[[asyncio.AbstractEventLoop, OnDone], Any]

# Each loop's completion queue, made on its first run; None for a loop that cannot watch
# the queue's descriptor (no `add_reader`: Windows' ProactorEventLoop), whose runs hand
# their outcome over with `call_soon_threadsafe` (src/loop_completions.rs says why).
_completions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopCompletions | None] = (
    weakref.WeakKeyDictionary()
)


def _completions_of(loop: asyncio.AbstractEventLoop) -> LoopCompletions | None:
    try:
        return _completions[loop]
    except KeyError:
        pass
    except TypeError:
        return None  # a loop that cannot be weakly referenced: call_soon_threadsafe
    completions: LoopCompletions | None
    try:
        completions = LoopCompletions()
        loop.add_reader(completions.fileno(), completions)
    except NotImplementedError:
        completions = None
    _completions[loop] = completions
    return completions


async def outcome_of(start: Start, *, wait_for_stop: bool) -> Outcome:
    """Starts the work with ``start(loop, on_done)``, which answers a handle with
    ``cancel()``, and awaits its outcome. Cancelling the awaiting task cancels the work;
    with ``wait_for_stop`` the task's ``CancelledError`` comes only once the work has
    stopped (a session step must have let go of its session)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Outcome] = loop.create_future()
    completions = _completions_of(loop)
    if completions is not None:
        handle = start(loop, (completions, future))
    else:

        def on_done(outcome: Outcome) -> None:
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting any more

        handle = start(loop, on_done)
    try:
        return await (asyncio.shield(future) if wait_for_stop else future)
    except asyncio.CancelledError:
        handle.cancel()
        if wait_for_stop:
            # The step stops within an epoch tick.
            await future
        raise


def _settle(future: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not future.done():
        future.set_result(outcome)
