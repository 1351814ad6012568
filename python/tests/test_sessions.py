"""Sessions (`Sandbox.session`): state across steps in both languages, how a session
ends, reset, tools inside steps, run_async, one step at a time, and closing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import wasmbox
from wasmbox import Limits, Sandbox, Session, SessionBusyError, SessionError, Status

# The same steps in each language: define state, use it, raise, use it again.
STEPS = {
    "python": ("import math\nsquares = [n * n for n in range(5)]", "math.fsum(squares)", "raise ValueError('boom')", "len(squares)"),
    "javascript": (
        "let squares = [0, 1, 2, 3, 4].map((n) => n * n)",
        "return squares.reduce((a, b) => a + b, 0)",
        "throw new Error('boom')",
        "return squares.length",
    ),
}
LOOP_FOREVER = {"python": "while True:\n    pass", "javascript": "while (true) {}"}
READ_X = {"python": "x", "javascript": "return typeof x === 'undefined' ? null : x"}
SET_X = {"python": "x = INPUT", "javascript": "var x = INPUT"}


def add(a: int, b: int) -> int:
    return a + b


async def double(n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_state_persists_across_steps_and_a_raise_keeps_the_session(language: str) -> None:
    define, use, fail, use_again = STEPS[language]
    with Sandbox(language).session() as session:
        assert isinstance(session, Session)
        assert session.run(define).status == Status.OK
        assert session.run(use).value == 30
        raised = session.run(fail)
        assert raised.status == Status.ERROR
        assert "boom" in raised.error.message
        assert session.end is None
        assert session.run(use_again).value == 5
    assert session.closed


# Step one reads /input/n.txt and writes /output/n.txt; step two reads that back.
FILE_STEPS = {
    "python": (
        "n = int(open('/input/n.txt').read())\nopen('/output/n.txt', 'w').write(str(n + 1))",
        "[open('/output/n.txt').read(), open('/input/n.txt').read()]",
    ),
    "javascript": (
        "const n = Number(fs.readFileSync('/input/n.txt', 'utf8'));\nfs.writeFileSync('/output/n.txt', String(n + 1))",
        "return [fs.readFileSync('/output/n.txt', 'utf8'), fs.readFileSync('/input/n.txt', 'utf8')]",
    ),
}


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_input_files_are_there_in_every_step_and_output_files_stay(language: str) -> None:
    write, read = FILE_STEPS[language]
    with Sandbox(language).session(files={"n.txt": b"41"}) as session:
        first = session.run(write)
        assert first.status == Status.OK, first
        assert first.files == {"n.txt": b"42"}
        second = session.run(read)
        assert second.value == ["42", "41"], second
        assert second.files == {"n.txt": b"42"}, "every step's outcome lists all of /output"
        # A reset starts on a fresh instance with the same input files and no output.
        session.reset()
        fresh = session.run(read)
        assert fresh.status == Status.ERROR, fresh
        assert session.run(write).files == {"n.txt": b"42"}
    with pytest.raises(ValueError, match="input file name"):
        Sandbox(language).session(files={"../n.txt": b""})


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_a_timeout_ends_the_session_and_later_steps_say_so(language: str) -> None:
    with Sandbox(language, limits=Limits(timeout_ms=300)).session() as session:
        assert session.run(SET_X[language], 7).status == Status.OK
        assert session.run(LOOP_FOREVER[language]).status == Status.TIMEOUT
        assert session.end is not None and "timeout" in session.end
        after = session.run(READ_X[language])
        assert after.status == Status.REJECTED
        assert after.error.kind == "session_ended"
        assert "timeout" in after.error.message
        # reset() starts it again, on a fresh instance: nothing of the earlier steps.
        session.reset()
        assert session.end is None
        fresh = session.run(READ_X[language])
        assert fresh.status == (Status.ERROR if language == "python" else Status.OK), fresh
        assert fresh.value is None


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_reset_starts_clean(language: str) -> None:
    with Sandbox(language).session() as session:
        session.run(SET_X[language], 3)
        assert session.run(READ_X[language]).value == 3
        session.reset()
        assert session.run(READ_X[language]).value is None


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_sync_and_async_tools_inside_steps(language: str) -> None:
    code = {
        "python": "total = tools.add(a=INPUT, b=await tools.double(n=INPUT))",
        "javascript": "var total = await tools.add({a: INPUT, b: await tools.double({n: INPUT})})",
    }[language]
    sandbox = Sandbox(language, tools=[add, double], scope="all")
    with sandbox.session() as session:
        # Sync steps: async tools run on the package's background loop.
        assert session.run(code, 2).status == Status.OK
        assert session.run(READ_X[language].replace("x", "total")).value == 6
        assert [c.tool for c in session.run(code, 1).tool_calls] == ["double", "add"]

    async def main() -> list[object]:
        # Async steps: async tools run on this loop.
        async with sandbox.session() as session:
            first = await session.run_async(code, 5)
            second = await session.run_async(READ_X[language].replace("x", "total"))
            return [first.status, second.value]

    assert asyncio.run(main()) == [Status.OK, 15]


def test_run_async_keeps_state_and_many_sessions_run_at_once() -> None:
    sandbox = Sandbox()

    async def one(i: int) -> list[object]:
        async with sandbox.session() as session:
            await session.run_async("n = INPUT", i)
            await session.run_async("n += 1")
            return [(await session.run_async("n")).value]

    async def main() -> list[list[object]]:
        return await asyncio.gather(*(one(i) for i in range(8)))

    assert asyncio.run(main()) == [[i + 1] for i in range(8)]


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_a_step_cancelled_from_asyncio_ends_the_session(language: str) -> None:
    started = threading.Event()

    def mark() -> None:
        started.set()

    code = {"python": "tools.mark()\nwhile True:\n    pass", "javascript": "await tools.mark(); while (true) {}"}[language]
    sandbox = Sandbox(language, tools=[mark], scope="all", limits=Limits(timeout_ms=600_000))

    async def main() -> tuple[str | None, wasmbox.Outcome]:
        with sandbox.session() as session:
            step = asyncio.ensure_future(session.run_async(code))
            await asyncio.get_running_loop().run_in_executor(None, started.wait)
            step.cancel()
            with pytest.raises(asyncio.CancelledError):
                await step
            # The cancelled step has stopped: the session is free, and ended.
            return session.end, await session.run_async("1")

    end, after = asyncio.run(main())
    assert end is not None and "cancelled" in end
    assert after.status == Status.REJECTED and after.error.kind == "session_ended"


def test_one_step_at_a_time() -> None:
    release = threading.Event()
    started = threading.Event()

    def block() -> str:
        started.set()
        release.wait(60)
        return "released"

    sandbox = Sandbox(tools=[block], scope="all", limits=Limits(timeout_ms=60_000, tool_timeout_ms=60_000))
    with sandbox.session() as session:
        outcomes: list[wasmbox.Outcome] = []
        first = threading.Thread(target=lambda: outcomes.append(session.run("r = tools.block()")))
        first.start()
        started.wait(60)
        with pytest.raises(SessionBusyError):
            session.run("1")
        with pytest.raises(SessionBusyError):
            session.reset()
        release.set()
        first.join(60)
        assert outcomes[0].status == Status.OK
        assert session.run("r").value == "released"


def test_an_idle_session_ends() -> None:
    with Sandbox().session(idle_timeout_ms=1) as session:
        time.sleep(0.05)  # anything longer than the idle timeout
        after = session.run("1")
        assert after.status == Status.REJECTED and after.error.kind == "session_ended"
        assert "idle" in after.error.message
        assert session.end is not None and "idle" in session.end


def test_configuration_errors_raise() -> None:
    with pytest.raises(wasmbox.ConfigurationError, match="idle_timeout_ms"):
        Sandbox().session(idle_timeout_ms=0)
    with pytest.raises(wasmbox.ConfigurationError, match="max_lifetime_ms"):
        Sandbox().session(max_lifetime_ms=0)


@pytest.mark.skipif(not os.environ.get("WASMBOX_WORKER"), reason="needs the wasmbox binary ($WASMBOX_WORKER)")
def test_a_sandbox_with_worker_isolation_cannot_open_one() -> None:
    with pytest.raises(wasmbox.IsolationError, match="worker isolation"):
        Sandbox(isolation="worker").session()


def test_a_closed_session_raises() -> None:
    session = Sandbox().session()
    session.close()
    session.close()
    assert session.closed
    with pytest.raises(SessionError) as raised:
        session.run("1")
    assert raised.value.kind == "session_closed"
    assert raised.value.status == Status.REJECTED


def test_closing_frees_the_admission_slot() -> None:
    # An engine of its own (two slots, no queue), so in a child process.
    script = textwrap.dedent(
        """
        import wasmbox
        wasmbox.configure_engine(max_concurrent_runs=2, max_queued_runs=0)
        sandbox = wasmbox.Sandbox()
        a, b = sandbox.session(), sandbox.session()
        try:
            sandbox.session()
        except wasmbox.SessionError as refused:
            print("refused", refused.status, refused.kind, flush=True)
        print("run", sandbox.run("1").status, flush=True)
        a.close()
        for i in range(20):
            with sandbox.session() as s:
                assert s.run("INPUT", i).value == i
        b.close()
        print("run", sandbox.run("2").value, flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["refused rejected admission", "run rejected", "run 2"]


def test_ctrl_c_cancels_a_sync_step_and_ends_the_session() -> None:
    script = textwrap.dedent(
        """
        import signal, wasmbox
        # As in test_concurrency: a background job's Python starts with SIGINT ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        def started() -> None:
            print("started", flush=True)
        sandbox = wasmbox.Sandbox(tools=[started], scope="all", limits=wasmbox.Limits(timeout_ms=600_000))
        with sandbox.session() as session:
            try:
                session.run("tools.started()\\nwhile True:\\n    pass")
            except KeyboardInterrupt:
                print("interrupted", flush=True)
            after = session.run("1")
            print(after.status, after.error.kind, "cancelled" in session.end, flush=True)
            session.reset()
            print(session.run("6 * 7").value, flush=True)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "started"
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert out.splitlines() == ["interrupted", "rejected session_ended True", "42"]
    assert child.returncode == 0


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_steps_have_live_output_of_their_own(language: str) -> None:
    say = {"python": "print(INPUT)", "javascript": "console.log(INPUT)"}[language]
    with Sandbox(language).session() as session:
        first: list[tuple[str, str]] = []
        assert session.run(say, "one", on_output=lambda stream, text: first.append((stream, text))).is_ok()
        second: list[tuple[str, str]] = []

        async def main() -> wasmbox.Outcome:
            return await session.run_async(say, "two", on_output=lambda stream, text: second.append((stream, text)))

        assert asyncio.run(main()).stdout.text == "two\n"
    assert "".join(text for stream, text in first if stream == "stdout") == "one\n"
    assert "".join(text for stream, text in second if stream == "stdout") == "two\n"


def test_close_cancels_a_step_in_progress() -> None:
    started = threading.Event()

    def mark() -> None:
        started.set()

    sandbox = Sandbox(tools=[mark], scope="all", limits=Limits(timeout_ms=600_000))
    session = sandbox.session()
    outcomes: list[wasmbox.Outcome] = []
    step = threading.Thread(target=lambda: outcomes.append(session.run("tools.mark()\nwhile True:\n    pass")))
    step.start()
    started.wait(60)
    session.close()
    step.join(60)
    assert outcomes[0].status == Status.CANCELLED
    assert session.closed
