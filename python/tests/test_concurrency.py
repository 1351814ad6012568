"""Many runs at once from asyncio and threads; cancellation; Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

import wasmbox
from wasmbox import Limits, Sandbox, Status


T = TypeVar("T")


def add(a: int, b: int) -> int:
    return a + b


async def double(n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


class _LoopWithoutReaders(asyncio.SelectorEventLoop):
    """A loop that cannot watch a descriptor, as Windows' ProactorEventLoop cannot."""

    def add_reader(self, *args: object) -> None:
        raise NotImplementedError


# The tests marked `@loops` run on both ways an outcome reaches the loop (src/loop_completions.rs).
loops = pytest.mark.parametrize(
    "new_loop", [asyncio.new_event_loop, _LoopWithoutReaders], ids=["add_reader", "call_soon_threadsafe"]
)


def run_on(new_loop: Callable[[], asyncio.AbstractEventLoop], main: Awaitable[T]) -> T:
    loop = new_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


@loops
def test_100_concurrent_runs_from_asyncio(new_loop: Callable[[], asyncio.AbstractEventLoop]) -> None:
    python = Sandbox("python", tools=[add, double], scope="all")
    js = Sandbox("javascript", tools=[add, double], scope="all")

    async def main() -> list[wasmbox.Outcome]:
        runs = []
        for i in range(100):
            if i % 2:
                runs.append(python.run_async("tools.add(a=INPUT, b=await tools.double(n=INPUT))", i))
            else:
                runs.append(js.run_async("return await tools.add({a: INPUT, b: await tools.double({n: INPUT})})", i))
        return await asyncio.gather(*runs)

    outcomes = run_on(new_loop, main())
    assert [o.status for o in outcomes] == [Status.OK] * 100, [o for o in outcomes if not o.is_ok()][:3]
    assert [o.value for o in outcomes] == [3 * i for i in range(100)]
    assert len({o.run_id for o in outcomes}) == 100


def test_a_loop_is_woken_through_a_non_blocking_pipe() -> None:
    # Not a socket pair: nothing in the core path needs Unix sockets (DESIGN.md), and a
    # reader that found no byte must not block the loop.
    import stat

    from wasmbox._native import LoopCompletions

    completions = LoopCompletions()
    fd = completions.fileno()
    assert stat.S_ISFIFO(os.fstat(fd).st_mode)
    assert not os.get_blocking(fd)
    completions()  # nothing written: returns at once


def test_runs_from_loops_on_many_threads() -> None:
    # Each loop has its own completion queue; every outcome reaches its own loop.
    sandbox = Sandbox(tools=[add, double], scope="all")

    def one_loop(offset: int) -> list[object]:
        async def main() -> list[wasmbox.Outcome]:
            runs = (sandbox.run_async("tools.add(a=INPUT, b=await tools.double(n=INPUT))", offset + i) for i in range(10))
            return await asyncio.gather(*runs)

        return [o.value for o in asyncio.run(main())]

    with ThreadPoolExecutor(4) as pool:
        values = list(pool.map(one_loop, range(0, 80, 10)))
    assert values == [[3 * (offset + i) for i in range(10)] for offset in range(0, 80, 10)]


def test_runs_from_many_threads() -> None:
    sandbox = Sandbox(tools=[add], scope="all")
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda i: sandbox.run("tools.add(a=INPUT, b=1)", i), range(32)))
    assert [o.value for o in outcomes] == [i + 1 for i in range(32)]


def test_blocking_tools_do_not_block_other_runs() -> None:
    # More blocked runs than the package has tokio threads (one per core): another run
    # still finishes while they all wait.
    release = threading.Event()
    started = threading.Semaphore(0)

    def block() -> str:
        started.release()
        release.wait(60)
        return "released"

    blocked = Sandbox(tools=[block], scope="all", limits=Limits(timeout_ms=60_000, tool_timeout_ms=60_000))
    free = Sandbox()
    count = (os.cpu_count() or 2) * 2 + 2

    async def main() -> tuple[wasmbox.Outcome, list[wasmbox.Outcome]]:
        waiting = [asyncio.ensure_future(blocked.run_async("tools.block()")) for _ in range(count)]
        for _ in range(count):
            while not started.acquire(blocking=False):
                await asyncio.sleep(0.01)
        other = await free.run_async("'free'")
        assert not any(w.done() for w in waiting)
        release.set()
        return other, await asyncio.gather(*waiting)

    other, released = asyncio.run(main())
    assert other.value == "free"
    assert [o.value for o in released] == ["released"] * count


@loops
@pytest.mark.parametrize("eager", [False, True], ids=["", "eager"])
def test_cancelling_the_task_cancels_the_run(new_loop: Callable[[], asyncio.AbstractEventLoop], eager: bool) -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    sandbox = Sandbox(tools=[forever], scope="all", limits=Limits(timeout_ms=600_000, tool_timeout_ms=600_000))

    async def main() -> None:
        task = asyncio.ensure_future(sandbox.run_async("tools.forever()", eager=eager))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The run ended, dropping its tool call, which cancelled the tool's task: without
        # the cancellation both would wait for an hour.
        assert await asyncio.get_running_loop().run_in_executor(None, cancelled.wait, 30)

    run_on(new_loop, main())
    assert Sandbox().run("1 + 1").value == 2


@pytest.mark.parametrize("loop_kind", ["add_reader", "call_soon_threadsafe"])
def test_an_eager_run_starts_on_the_loops_thread(loop_kind: str) -> None:
    # Until it first waits (here: an async tool call); the rest runs on wasmbox's threads.
    # In a process of its own whose epoch ticks (60 s apart) cannot end the first slice.
    script = textwrap.dedent(
        """
        import asyncio, sys, threading, wasmbox
        wasmbox.configure_engine(epoch_tick_ms=60_000)

        class LoopWithoutReaders(asyncio.SelectorEventLoop):
            def add_reader(self, *args):
                raise NotImplementedError

        threads = []
        def where(n: int) -> int:
            threads.append(threading.get_ident())
            return n
        def add(a: int, b: int) -> int:
            return a + b
        async def double(n: int) -> int:
            await asyncio.sleep(0)
            return n * 2

        sandbox = wasmbox.Sandbox(tools=[wasmbox.Tool(where, inline=True), add, double], scope="all")
        code = "x = tools.where(n=INPUT)\\ny = await tools.double(n=x)\\ntools.where(n=y) + tools.add(a=1, b=1)"

        async def main():
            outcomes = [await sandbox.run_async(code, 1, eager=True), await sandbox.run_async(code, 2)]
            outcomes += await asyncio.gather(*(sandbox.run_async(code, i, eager=True) for i in range(10)))
            js = wasmbox.Sandbox("javascript", tools=[add], scope="all")
            outcomes.append(await js.run_async("return await tools.add({a: 20, b: 22})", eager=True))
            outcomes.append(await js.run_async("return 6 * 7", eager=True))
            async with sandbox.session() as session:  # a session's step, eager
                # The session's idle reaper looks at the session once as it opens; a step
                # that found it looking would wait, and so leave the loop's thread.
                assert (await session.run_async("0")).is_ok()
                await asyncio.sleep(0.05)
                outcomes.append(await session.run_async("tools.where(n=INPUT)", 42, eager=True))
            assert all(o.is_ok() for o in outcomes), [o for o in outcomes if not o.is_ok()]
            return [o.value for o in outcomes], threading.get_ident()

        loop = asyncio.new_event_loop() if sys.argv[1] == "add_reader" else LoopWithoutReaders()
        values, loop_thread = loop.run_until_complete(main())
        assert values == [4, 6] + [2 * i + 2 for i in range(10)] + [42, 42, 42], values
        first, after_async, not_eager, step = threads[0], threads[1], threads[2:4], threads[-1]
        print(first == loop_thread, after_async == loop_thread, loop_thread in not_eager, step == loop_thread)
        """
    )
    done = subprocess.run([sys.executable, "-c", script, loop_kind], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The eager run's first slice on the loop's thread; after the async call, and all of
    # the run that was not eager, on threads of wasmbox's; the eager step on the loop's.
    assert done.stdout.split() == ["True", "False", "False", "True"]


def test_a_run_future_is_a_future_to_asyncio() -> None:
    # What `run_async` awaits is not an asyncio.Future, but asyncio's own helpers take it.
    sandbox = Sandbox(tools=[add], scope="all")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        future = sandbox._native.start("tools.add(a=1, b=2)", None, loop, None)
        assert asyncio.isfuture(future) and future.get_loop() is loop and not future.done()
        with pytest.raises(asyncio.InvalidStateError):
            future.result()
        seen: list[object] = []
        future.add_done_callback(seen.append)
        outcome = await asyncio.wait_for(future, 60)
        assert outcome.value == 3 and future.done() and not future.cancelled()
        assert future.result() is outcome and future.exception() is None and seen == [future]
        later: list[object] = []
        future.add_done_callback(later.append)  # done already: called soon
        await asyncio.sleep(0)
        assert later == [future]

        slow = sandbox._native.start("while True:\n    pass", None, loop, None)
        assert slow.remove_done_callback(seen.append) == 0
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow, 0.2)  # cancels it, which cancels the run
        assert slow.cancelled()
        with pytest.raises(asyncio.CancelledError):
            slow.result()

    asyncio.run(main())


def test_ctrl_c_cancels_a_sync_run() -> None:
    script = textwrap.dedent(
        """
        import signal, sys, wasmbox
        # Python leaves SIGINT ignored when it starts with it ignored, as a shell's
        # background job does (`.ci/run &`): install the handler a terminal's Python has.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        def started() -> None:
            print("started", flush=True)
        sandbox = wasmbox.Sandbox(tools=[started], scope="all", limits=wasmbox.Limits(timeout_ms=600_000))
        try:
            sandbox.run("tools.started()\\nwhile True:\\n    pass")
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            print(sandbox.run("6 * 7").value, flush=True)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "started"
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert out.split() == ["interrupted", "42"]
    assert child.returncode == 0


@pytest.mark.skipif(
    not os.environ.get("WASMBOX_WORKER") and not os.environ.get("WASMBOX_REQUIRE_WORKER"),
    reason="needs the wasmbox binary: set WASMBOX_WORKER=target/debug/wasmbox (cargo xtask test does)",
)
def test_worker_isolation_runs_tools_in_the_parent() -> None:
    sandbox = Sandbox(tools=[add], scope="all", isolation="worker")
    outcome = sandbox.run("[tools.add(a=2, b=3), 1]")
    assert outcome.status is Status.OK, outcome
    assert outcome.value == [5, 1]


def test_the_interpreter_exits_cleanly_after_async_runs() -> None:
    # The thread that hands an outcome to asyncio may still be inside Python when the
    # program, done with it, exits: without the exit hook this aborted the interpreter in
    # 7 of 8 tries.
    script = textwrap.dedent(
        """
        import asyncio, wasmbox
        def add(a: int, b: int) -> int:
            return a + b
        sandbox = wasmbox.Sandbox("javascript", tools=[add], scope="all")
        async def main():
            for _ in range(20):
                runs = (sandbox.run_async("return await tools.add({a: 1, b: 2})") for _ in range(10))
                await asyncio.gather(*runs)
        asyncio.run(main())
        print("done")
        """
    )
    for _ in range(3):
        child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert (child.returncode, child.stdout) == (0, "done\n"), child.stderr[-2000:]
