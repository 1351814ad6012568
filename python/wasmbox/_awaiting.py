"""The loop side of a run or session step that the extension runs on its own threads."""

from __future__ import annotations

import asyncio
import weakref

from ._native import LoopCompletions

# Each loop's completion queue, made on its first run; None for a loop that cannot watch
# the queue's descriptor (no `add_reader`: Windows' ProactorEventLoop), whose runs hand
# their outcome over with `call_soon_threadsafe` (src/loop_completions.rs says why).
_completions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopCompletions | None] = (
    weakref.WeakKeyDictionary()
)


def completions_of(loop: asyncio.AbstractEventLoop) -> LoopCompletions | None:
    """The completion queue of ``loop``, watched by it from its first run on; ``None``
    where outcomes go through ``call_soon_threadsafe``."""
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
