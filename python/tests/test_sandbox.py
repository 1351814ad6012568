"""The API: both languages, values and output, configuration errors, limits."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Literal, Optional

import pytest

import wasmbox
from wasmbox import CallStatus, Limits, Sandbox, Status


def add(a: int, b: int) -> int:
    """Adds a and b."""
    return a + b


def test_python_value_stdout_and_stats() -> None:
    outcome = Sandbox("python").run("import math\nprint('hi')\nmath.factorial(10)")
    assert outcome.status == Status.OK and outcome.status == "ok" and outcome.is_ok()
    assert outcome.value == 3628800
    assert outcome.stdout.text == "hi\n" and not outcome.stdout.truncated
    assert outcome.error is None
    assert outcome.run_id and outcome.stats.wall_time_us > 0
    assert json.loads(outcome.to_json())["status"] == "ok"


def test_javascript_value_and_input() -> None:
    outcome = Sandbox("javascript").run("console.log('x'); return {n: INPUT.n * 2, s: 'é'}", {"n": 21})
    assert outcome.status is Status.OK, outcome
    assert outcome.value == {"n": 42, "s": "é"}
    assert outcome.stdout.text == "x\n"


def test_python_input_round_trips_json_types() -> None:
    data = {"list": [1, 2.5, None, True, "s"], "nested": {"deep": [[]]}, "big": 2**63}
    outcome = Sandbox().run("INPUT", data)
    assert outcome.value == data


def test_what_the_guest_did_is_an_outcome_not_an_exception() -> None:
    raised = Sandbox().run("def f():\n    return 1 / 0\nf()")
    assert raised.status is Status.ERROR
    assert raised.error is not None and raised.error.kind == "ZeroDivisionError"
    assert "f()" in raised.error.traceback and raised.value is None
    syntax = Sandbox().run("def (")
    assert syntax.status is Status.ERROR and syntax.error.kind == "SyntaxError"
    js = Sandbox("javascript").run("throw new TypeError('nope')")
    assert js.status is Status.ERROR and js.error.kind == "TypeError" and "nope" in js.error.message


# Reads /input/data.csv and /input/dir/note.txt, writes /output/sum.txt and a binary file.
FILES_CODE = {
    "python": "import pathlib\n"
    "rows = open('/input/data.csv').read().split()\n"
    "pathlib.Path('/output/sum.txt').write_text(str(sum(map(int, rows))))\n"
    "pathlib.Path('/output/bin').mkdir()\n"
    "pathlib.Path('/output/bin/raw').write_bytes(bytes([0, 255]))\n"
    "open('/input/dir/note.txt').read()",
    "javascript": "const rows = fs.readFileSync('/input/data.csv', 'utf8').split(/\\s+/).filter(Boolean);\n"
    "fs.writeFileSync('/output/sum.txt', String(rows.reduce((a, r) => a + Number(r), 0)));\n"
    "fs.mkdirSync('/output/bin'); fs.writeFileSync('/output/bin/raw', new Uint8Array([0, 255]));\n"
    "return fs.readFileSync('/input/dir/note.txt', 'utf8')",
}


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_input_files_in_and_output_files_out(language: str) -> None:
    files = {"data.csv": b"1\n2\n39\n", "dir/note.txt": "é as text"}
    outcome = Sandbox(language).run(FILES_CODE[language], files=files)
    assert outcome.status == Status.OK, outcome
    assert outcome.value == "é as text"
    assert outcome.files == {"bin/raw": b"\x00\xff", "sum.txt": b"42"}
    assert list(outcome.files) == ["bin/raw", "sum.txt"], "in name order"
    # bytearray and memoryview are bytes too; run_async takes files as run does.
    files = {"data.csv": bytearray(b"40 2"), "dir/note.txt": memoryview(b"mv")}
    outcome = asyncio.run(Sandbox(language).run_async(FILES_CODE[language], files=files))
    assert (outcome.value, outcome.files["sum.txt"]) == ("mv", b"42"), outcome
    assert Sandbox(language).run("1" if language == "python" else "return 1").files == {}


def test_input_files_that_cannot_be_files_raise() -> None:
    sandbox = Sandbox()
    for name in ["/etc/passwd", "../x", "", "a/./b"]:
        with pytest.raises(ValueError, match="input file name"):
            sandbox.run("1", files={name: b""})
    with pytest.raises(TypeError, match="expected bytes or str, not int"):
        sandbox.run("1", files={"a": 1})
    with pytest.raises(TypeError, match="mapping"):
        sandbox.run("1", files=[("a", b"")])
    with pytest.raises(TypeError, match="file name must be a str"):
        sandbox.run("1", files={1: b""})


def test_input_that_is_not_json_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"\$\.x"):
        Sandbox().run("1", {"x": {1, 2}})
    with pytest.raises(TypeError, match="not a JSON number"):
        Sandbox().run("1", float("nan"))


def test_configuration_errors_are_typed() -> None:
    with pytest.raises(wasmbox.LimitsError, match="timeout_ms"):
        Limits(timeout_ms=0)
    with pytest.raises(wasmbox.LimitsError, match="max_memory_bytes"):
        Limits(max_memory_bytes=1024)
    with pytest.raises(wasmbox.ConfigurationError, match="ruby"):
        Sandbox("ruby")  # type: ignore[arg-type]
    with pytest.raises(wasmbox.ConfigurationError, match="nope"):
        Sandbox(isolation="nope")
    with pytest.raises(wasmbox.ToolRegistrationError, match="Bad"):
        Sandbox(tools=[wasmbox.Tool(add, name="Bad-Name")])
    with pytest.raises(wasmbox.ToolRegistrationError, match="already registered"):
        Sandbox(tools=[add, add])
    with pytest.raises(wasmbox.ToolRegistrationError, match="invalid"):
        Sandbox(tools=[wasmbox.Tool(add, args_schema={"type": 12})])
    # All of them are ValueErrors too, and WasmboxErrors.
    assert issubclass(wasmbox.LimitsError, ValueError) and issubclass(wasmbox.IsolationError, wasmbox.WasmboxError)


def test_a_second_configure_engine_is_refused_once_the_engine_runs() -> None:
    Sandbox().run("1")
    with pytest.raises(wasmbox.ConfigurationError, match="already running"):
        wasmbox.configure_engine(max_concurrent_runs=4)


def test_prepared_instances_is_an_engine_setting() -> None:
    # An engine of its own, so in a child process.
    script = textwrap.dedent(
        """
        import asyncio, wasmbox
        for bad in (65, 1000):
            try:
                wasmbox.configure_engine(prepared_instances=bad)
            except wasmbox.ConfigurationError as refused:
                print("refused", bad, "at most 64" in str(refused), flush=True)
        wasmbox.configure_engine(prepared_instances=0)
        for language, code in (("python", "6 * 7"), ("javascript", "return 6 * 7")):
            sandbox = wasmbox.Sandbox(language)
            outcomes = [sandbox.run(code) for _ in range(3)] + [asyncio.run(sandbox.run_async(code))]
            # None prepared ahead: every run instantiates its own instance.
            print(language, [o.value for o in outcomes], all(o.stats.instantiate_time_us > 0 for o in outcomes), flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "refused 65 True",
        "refused 1000 True",
        "python [42, 42, 42, 42] True",
        "javascript [42, 42, 42, 42] True",
    ]


def test_schemas_are_derived_from_type_hints() -> None:
    def search(query: str, limit: int = 10, kind: Literal["a", "b"] = "a", tags: Optional[list[str]] = None) -> list:
        """Searches.

        More text."""
        return []

    tool = wasmbox.Tool(search)
    assert tool.name == "search" and tool.description == "Searches." and not tool.is_async
    assert tool.args_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "kind": {"enum": ["a", "b"], "default": "a"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    async def fetch(url: str) -> str:
        return url

    assert wasmbox.Tool(fetch).is_async


def test_the_broker_checks_arguments_against_the_derived_schema() -> None:
    sandbox = Sandbox(tools=[add], scope="all")
    code = "try:\n    tools.add(a='x', b=1)\nexcept ToolInvalidArgs as e:\n    output(str(e))"
    outcome = sandbox.run(code)
    assert outcome.status is Status.TOOL_LIMIT or outcome.status is Status.OK, outcome
    assert outcome.tool_calls[0].status is CallStatus.INVALID_ARGS
    assert "integer" in (outcome.tool_calls[0].message or "")


def test_scope_defaults_to_no_tool_as_in_the_rust_crate() -> None:
    code = "try:\n    tools.add(a=1, b=2)\nexcept ToolDenied:\n    output('denied')"
    assert Sandbox(tools=[add]).run(code).tool_calls[0].status is CallStatus.DENIED
    assert Sandbox(tools=[add], scope=["add"]).run("tools.add(a=1, b=2)").value == 3


def test_limits_end_runs_with_their_status() -> None:
    timeout = Sandbox(limits=Limits(timeout_ms=300)).run("while True:\n    pass")
    assert timeout.status is Status.TIMEOUT
    memory = Sandbox(limits=Limits(max_memory_bytes=48 << 20)).run("x = bytearray(200 << 20)")
    assert memory.status is Status.MEMORY_EXHAUSTED
    # Latched on the host: catching the MemoryError does not make the run ok.
    caught = Sandbox(limits=Limits(max_memory_bytes=48 << 20)).run("try:\n    x = bytearray(200 << 20)\nexcept MemoryError:\n    pass\n1")
    assert caught.status is Status.MEMORY_EXHAUSTED
    output = Sandbox(limits=Limits(max_stdout_bytes=1000)).run("print('x' * 5000)")
    assert output.status is Status.OUTPUT_LIMIT and output.stdout.truncated
    calls = Sandbox(tools=[add], scope="all", limits=Limits(max_tool_calls=2)).run(
        "for i in range(3):\n    tools.add(a=i, b=i)"
    )
    assert calls.status is Status.TOOL_LIMIT
    assert [c.status for c in calls.tool_calls] == [CallStatus.OK, CallStatus.OK, CallStatus.BUDGET_EXHAUSTED]
    big = Sandbox(limits=Limits(max_code_bytes=10)).run("x = 1 + 2 + 3")
    assert big.status is Status.INVALID_REQUEST


def test_guest_versions_name_the_built_in_guests() -> None:
    versions = wasmbox.guest_versions()
    assert versions["python"]["runtime"].startswith("CPython")
    assert "wit" in versions["js"]


def test_on_output_gets_the_output_while_the_code_runs() -> None:
    """The guest prints, then waits in a tool until ``on_output`` has had the line: were
    the output passed on only at the end, the tool would time out and the guest fail."""
    import threading

    for language, code in [
        ("python", "import sys\nprint('ready')\nprint('é', file=sys.stderr)\nseen = tools.wait_ready()\nprint('after')\nseen"),
        ("javascript", "console.log('ready'); console.error('é');\nconst seen = await tools.wait_ready();\nconsole.log('after'); return seen;"),
    ]:
        chunks: list[tuple[str, str]] = []
        ready = threading.Event()

        def wait_ready() -> bool:
            """Returns once the sandbox's output said ready."""
            return ready.wait(60)

        def on_output(stream: str, text: str) -> None:
            chunks.append((stream, text))
            if "".join(t for s, t in chunks if s == "stdout").startswith("ready\n"):
                ready.set()

        sandbox = Sandbox(language, tools=[wait_ready], scope="all", limits=Limits(tool_timeout_ms=60_000))
        outcome = sandbox.run(code, on_output=on_output)
        assert outcome.status is Status.OK and outcome.value is True, outcome
        assert "".join(t for s, t in chunks if s == "stdout") == outcome.stdout.text == "ready\nafter\n"
        assert "".join(t for s, t in chunks if s == "stderr") == outcome.stderr.text == "é\n"


def test_on_output_that_raises_does_not_stop_the_run_and_works_async() -> None:
    import asyncio

    def broken(stream: str, text: str) -> None:
        raise RuntimeError("a callback that fails")

    import sys

    unraisable: list[BaseException | None] = []
    hook, sys.unraisablehook = sys.unraisablehook, lambda raised: unraisable.append(raised.exc_value)
    try:
        outcome = Sandbox().run("print('a')\n1", on_output=broken)
    finally:
        sys.unraisablehook = hook
    assert outcome.status is Status.OK and outcome.stdout.text == "a\n"
    assert unraisable and isinstance(unraisable[0], RuntimeError), "the exception is reported, not lost"

    seen: list[str] = []
    outcome = asyncio.run(Sandbox().run_async("print('b')\n2", on_output=lambda stream, text: seen.append(text)))
    assert outcome.value == 2 and "".join(seen) == "b\n"
