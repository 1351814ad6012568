"""Tools: sync and async, errors, deadlines, pydantic models, both languages."""

from __future__ import annotations

import asyncio
import threading
import time

import pydantic
import pytest

import wasmbox
from wasmbox import CallStatus, Limits, Sandbox, Status


def add(a: int, b: int) -> int:
    """Adds a and b."""
    return a + b


async def slow_upper(text: str) -> str:
    """Upper-cases text, asynchronously."""
    await asyncio.sleep(0.01)
    return text.upper()


def fails(reason: str) -> None:
    """Always raises."""
    raise ValueError(f"no luck: {reason}")


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_sync_and_async_tools_from_a_sync_run(language: str) -> None:
    sandbox = Sandbox(language, tools=[add, slow_upper], scope="all")
    code = {
        "python": "{'sum': tools.add(a=1, b=2), 'up': await tools.slow_upper(text='abc')}",
        "javascript": "return {sum: await tools.add({a: 1, b: 2}), up: await tools.slow_upper({text: 'abc'})}",
    }[language]
    outcome = sandbox.run(code)
    assert outcome.status is Status.OK, outcome
    assert outcome.value == {"sum": 3, "up": "ABC"}
    assert [c.tool for c in outcome.tool_calls] == ["add", "slow_upper"]
    assert all(c.status is CallStatus.OK for c in outcome.tool_calls)


def test_async_tools_of_run_async_run_on_the_callers_loop() -> None:
    seen: list[asyncio.AbstractEventLoop] = []

    async def where() -> str:
        seen.append(asyncio.get_running_loop())
        return "here"

    async def main() -> tuple[asyncio.AbstractEventLoop, wasmbox.Outcome]:
        outcome = await Sandbox(tools=[where], scope="all").run_async("tools.where()")
        return asyncio.get_running_loop(), outcome

    loop, outcome = asyncio.run(main())
    assert outcome.value == "here" and seen == [loop]


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_a_raising_tool_is_the_guests_tool_error(language: str) -> None:
    sandbox = Sandbox(language, tools=[fails], scope="all")
    code = {
        "python": "try:\n    tools.fails(reason='x')\nexcept ToolFailed as e:\n    output(['caught', str(e)])",
        "javascript": "try { await tools.fails({reason: 'x'}) } catch (e) { return ['caught', e instanceof ToolFailed, e.message] }",
    }[language]
    outcome = sandbox.run(code)
    assert outcome.status is Status.OK, outcome
    assert outcome.value[0] == "caught" and "ValueError: no luck: x" in outcome.value[-1]
    assert outcome.tool_calls[0].status is CallStatus.FAILED
    uncaught = sandbox.run({"python": "tools.fails(reason='y')", "javascript": "await tools.fails({reason: 'y'})"}[language])
    assert uncaught.status is Status.ERROR and "no luck: y" in uncaught.error.message


def test_an_async_tool_that_raises_is_a_tool_error_too() -> None:
    async def broken() -> None:
        raise KeyError("gone")

    outcome = Sandbox(tools=[broken], scope="all").run("tools.broken()")
    assert outcome.status is Status.ERROR and "KeyError" in outcome.error.message


def test_a_result_that_is_not_json_fails_the_call() -> None:
    def gives_set() -> object:
        return {1, 2}

    code = "try:\n    tools.gives_set()\nexcept ToolFailed as e:\n    output(str(e))"
    outcome = Sandbox(tools=[gives_set], scope="all").run(code)
    assert outcome.tool_calls[0].status is CallStatus.FAILED
    assert "set at $ is not JSON" in outcome.value


def test_tool_deadlines_for_blocking_and_async_tools() -> None:
    release = threading.Event()
    cancelled = threading.Event()

    def blocks() -> str:
        release.wait(60)
        return "late"

    async def sleeps() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    sandbox = Sandbox(
        tools=[wasmbox.Tool(blocks, timeout_ms=200), wasmbox.Tool(sleeps, timeout_ms=200)],
        scope="all",
        limits=Limits(timeout_ms=30_000),
    )
    code = "out = []\nfor name in ['blocks', 'sleeps']:\n    try:\n        tools[name]()\n    except ToolTimeout as e:\n        out.append(name)\noutput(out)"
    outcome = sandbox.run(code)
    release.set()
    assert [c.status for c in outcome.tool_calls] == [CallStatus.TIMEOUT, CallStatus.TIMEOUT], outcome
    assert outcome.status is Status.TOOL_LIMIT  # a tool deadline is latched on the host
    # The async tool's task was cancelled when the broker gave up on it.
    assert cancelled.wait(30)


def test_a_pydantic_model_as_the_argument_schema() -> None:
    class Order(pydantic.BaseModel):
        item: str
        quantity: int = pydantic.Field(ge=1)

    received: list[Order] = []

    def place(order: Order) -> dict:
        received.append(order)
        return {"ok": True, "total": order.quantity * 2}

    tool = wasmbox.Tool(place, args_schema=Order)
    assert tool.args_schema["properties"]["quantity"]["minimum"] == 1
    sandbox = Sandbox(tools=[tool], scope="all")
    outcome = sandbox.run("tools.place(item='tea', quantity=3)")
    assert outcome.value == {"ok": True, "total": 6}
    assert received == [Order(item="tea", quantity=3)]
    refused = sandbox.run("tools.place(item='tea', quantity=0)")
    assert refused.tool_calls[0].status is CallStatus.INVALID_ARGS


def test_a_tool_may_return_a_pydantic_model_or_dataclass() -> None:
    class Point(pydantic.BaseModel):
        x: int
        y: int

    def point() -> Point:
        return Point(x=1, y=2)

    assert Sandbox(tools=[point], scope="all").run("tools.point()").value == {"x": 1, "y": 2}


def test_the_gil_is_released_while_a_guest_runs() -> None:
    # The tool runs on another thread and needs the GIL while the run's thread waits in
    # the guest: were the GIL held there, the tool could not start and this would hang.
    entered = threading.Event()
    go = threading.Event()

    def rendezvous() -> str:
        entered.set()
        go.wait(30)
        return "met"

    sandbox = Sandbox(tools=[rendezvous], scope="all")
    results: list[wasmbox.Outcome] = []
    worker = threading.Thread(target=lambda: results.append(sandbox.run("tools.rendezvous()")))
    worker.start()
    assert entered.wait(30)
    go.set()
    worker.join(30)
    assert results[0].value == "met"


def test_a_pooled_tool_keeps_its_threads_python_state_from_call_to_call() -> None:
    # The extension's threads keep their Python thread state between calls, as the
    # threads of a thread pool do: what a tool keeps in a threading.local is there at its
    # next call on the same thread. More calls than the pool has threads (512) meet some
    # thread more than once.
    local = threading.local()
    calls: list[tuple[int, int]] = []

    def count() -> int:
        local.n = getattr(local, "n", 0) + 1
        calls.append((threading.get_ident(), local.n))
        return local.n

    sandbox = Sandbox(tools=[count], scope="all", limits=Limits(max_tool_calls=600))
    outcome = sandbox.run("for _ in range(600):\n    tools.count()")
    assert outcome.status is Status.OK, outcome
    by_thread: dict[int, list[int]] = {}
    for ident, n in calls:
        by_thread.setdefault(ident, []).append(n)
    assert len(calls) == 600 and any(len(ns) > 1 for ns in by_thread.values())
    assert all(ns == list(range(1, len(ns) + 1)) for ns in by_thread.values()), by_thread


def test_an_inline_tool_runs_on_the_thread_driving_the_run() -> None:
    threads: list[int] = []

    def where(n: int) -> int:
        threads.append(threading.get_ident())
        return n + 1

    pooled = Sandbox(tools=[where], scope="all")
    inline = Sandbox(tools=[wasmbox.Tool(where, inline=True)], scope="all")
    assert pooled.run("tools.where(n=1)").value == 2
    assert inline.run("tools.where(n=2)").value == 3
    assert threads[0] != threading.get_ident() and threads[1] == threading.get_ident()
    with pytest.raises(wasmbox.ToolRegistrationError, match="inline"):
        wasmbox.Tool(slow_upper, inline=True)


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_pooled_tool_calls_run_off_the_runs_thread(language: str) -> None:
    # Quick calls of a lone run go to the package's tool thread (woken as the run
    # starts); a sync run's, an eager run_async's and a run_async's calls all still run
    # off the thread driving the run, so their deadlines can end them.
    threads: list[int] = []

    def where(n: int) -> int:
        threads.append(threading.get_ident())
        return n + 1

    sandbox = Sandbox(language, tools=[where], scope="all")
    code = {
        "python": "t = 0\nfor i in range(20):\n    t += tools.where(n=i)\nt",
        "javascript": "let t = 0; for (let i = 0; i < 20; i++) t += await tools.where({n: i}); return t",
    }[language]
    expected = sum(range(1, 21))
    assert sandbox.run(code).value == expected
    caller = threading.get_ident()
    assert len(threads) == 20 and caller not in threads

    async def from_loop() -> list[int]:
        eager = await sandbox.run_async(code, eager=True)
        default = await sandbox.run_async(code)
        assert eager.value == expected and default.value == expected
        return [threading.get_ident()]

    threads.clear()
    loop_thread = asyncio.run(from_loop())
    assert len(threads) == 40 and loop_thread[0] not in threads


def test_a_hanging_tool_does_not_hold_the_next_runs_tool_calls() -> None:
    # A tool that blocks past its deadline keeps the thread it runs on (Python cannot
    # interrupt it): the run ends at the deadline, and the calls of the runs after it go
    # to other threads while it hangs.
    release = threading.Event()
    hanging = threading.Event()

    def blocks() -> str:
        hanging.set()
        release.wait(60)
        return "late"

    sandbox = Sandbox(tools=[wasmbox.Tool(blocks, timeout_ms=200), add], scope="all")
    try:
        first = sandbox.run("tools.blocks()")
        assert first.status is Status.TOOL_LIMIT, first
        assert [c.status for c in first.tool_calls] == [CallStatus.TIMEOUT]
        assert hanging.is_set() and not release.is_set()
        for i in range(3):
            outcome = sandbox.run("tools.add(a=INPUT, b=1) + tools.add(a=1, b=1)", i)
            assert outcome.status is Status.OK and outcome.value == i + 3, outcome
        second = sandbox.run("tools.blocks()")
        assert second.status is Status.TOOL_LIMIT, second
        assert asyncio.run(sandbox.run_async("tools.add(a=2, b=2)")).value == 4
    finally:
        release.set()
