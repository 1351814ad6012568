"""The background event loop that runs async tools of sync runs (`Sandbox.run`).

`Sandbox.run_async` runs its async tools on the caller's loop instead; a sync `run`
blocks its caller's thread, so its async tools need a loop of their own: one daemon
thread, started on first use.
"""

from __future__ import annotations

import asyncio
import threading

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The package's background loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="wasmbox-async-tools", daemon=True)
            thread.start()
            _loop = loop
        return _loop
