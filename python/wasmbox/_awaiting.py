"""Awaiting a run or a session step that the extension runs on its own threads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ._native import Outcome


Start = Callable[[asyncio.AbstractEventLoop, Callable[[Outcome], None]], Any]


async def outcome_of(start: Start, *, wait_for_stop: bool) -> Outcome:
    """Starts the work with ``start(loop, on_done)``, which answers a handle with
    ``cancel()``, and awaits its outcome. Cancelling the awaiting task cancels the work;
    with ``wait_for_stop`` the task's ``CancelledError`` comes only once the work has
    stopped (a session step must have let go of its session)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Outcome] = loop.create_future()

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
