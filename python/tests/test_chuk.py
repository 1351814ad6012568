"""chuk-tool-processor: `WasmboxCodeRunner` against chuk's own `IsolatedCodeRunner`.

Each case runs the same code through chuk's runner (its local subprocess backend, which
chuk's docs use for development and tests) and through wasmbox's, and compares the
`IsolatedResult`s: a chuk user switching backends sees the same results.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from chuk_tool_processor.execution.isolation import (
    IsolatedCodeRunner,
    IsolatedResult,
    IsolationError,
    IsolationLimits,
    LocalProcessBackend,
)
from chuk_tool_processor.registry.providers.memory import InMemoryToolRegistry

from wasmbox.integrations.chuk import WasmboxCodeRunner


class Add:
    async def execute(self, a: Any, b: Any) -> int:
        return int(a) + int(b)


class Multiply:
    async def execute(self, a: int, b: int) -> int:
        return a * b


class Weather:
    async def execute(self, city: str) -> dict[str, Any]:
        if city == "Atlantis":
            raise ValueError(f"unknown city {city}")
        return {"city": city, "temp_c": 21.5}


async def registry() -> InMemoryToolRegistry:
    reg = InMemoryToolRegistry()
    await reg.register_tool(Add, name="add", namespace="math")
    await reg.register_tool(Multiply, name="multiply", namespace="math")
    await reg.register_tool(Weather, name="weather", namespace="web")
    return reg


def run_both(code: str, **kwargs: Any) -> tuple[IsolatedResult, IsolatedResult]:
    run_kwargs = {k: kwargs.pop(k) for k in ("initial_vars",) if k in kwargs}

    async def main() -> tuple[IsolatedResult, IsolatedResult]:
        reg = await registry()
        chuk = IsolatedCodeRunner(LocalProcessBackend(), registry=reg, allow_no_isolation=True, **kwargs)
        ours = WasmboxCodeRunner(registry=reg, **kwargs)
        return await chuk.run(code, **run_kwargs), await ours.run(code, **run_kwargs)

    return asyncio.run(main())


def same(theirs: IsolatedResult, ours: IsolatedResult) -> None:
    assert ours.ok == theirs.ok, (theirs, ours)
    assert ours.value == theirs.value
    assert ours.error_type == theirs.error_type, (theirs, ours)
    assert ours.tool_calls == theirs.tool_calls
    assert ours.stdout == theirs.stdout
    assert ours.timed_out == theirs.timed_out
    assert ours.backend == "wasmbox"


# chuk's documented orchestration example (CodeSandbox's docstring, the contract
# IsolatedCodeRunner mirrors), with the tool's result read as JSON data.
DOCUMENTED = """
total = 0
for i in range(1, 6):
    result = await add(a=str(total), b=str(i))
    total = int(result)
return total
"""


@pytest.mark.parametrize(
    ("code", "kwargs"),
    [
        (DOCUMENTED, {}),
        ("return await add(a=1, b=2)", {}),
        ("x = await multiply(a=6, b=7)\nprint('product', x)\nreturn {'x': x, 'ok': True}", {}),
        ("__result__ = base * 2", {"initial_vars": {"base": 21}}),
        ("x = 1", {}),
        ("return [1, (2, 3), {4}]", {}),
        ("import asyncio\nr = await asyncio.gather(add(a=1, b=1), multiply(a=2, b=3))\nreturn r", {}),
        ("w = await weather(city='Paris')\nreturn w['temp_c']", {}),
        ("try:\n    await weather(city='Atlantis')\nexcept Exception as e:\n    return 'Atlantis' in str(e)", {}),
        ("return 1 / 0", {}),
        ("def f(:\n    pass", {}),
        ("return await weather(city='Paris')", {"namespace": "math"}),
        ("return await add(a=1, b=1)", {"allowed_tools": {"math.add"}}),
        ("return await multiply(a=1, b=1)", {"allowed_tools": {"add"}}),
        ("return await weather(city='Rome')", {"allowed_tools": {"math.weather"}}),
        ("print('a' * 100)\nreturn 1", {"limits": IsolationLimits(max_output_bytes=10)}),
    ],
)
def test_the_same_results_as_chucks_runner(code: str, kwargs: dict[str, Any]) -> None:
    theirs, ours = run_both(code, **kwargs)
    same(theirs, ours)
    if not theirs.ok:
        assert ours.error and theirs.error
        # The exception's type and message, in both.
        first = theirs.error.splitlines()[0]
        assert first.split(":")[0] in ours.error, (theirs.error, ours.error)


def test_a_timeout_is_a_timeout() -> None:
    theirs, ours = run_both("while True:\n    pass", limits=IsolationLimits(wall_timeout=1.0))
    same(theirs, ours)
    assert ours.error == theirs.error == "execution timed out after 1.0s"


def test_the_tool_call_ceiling_is_latched() -> None:
    code = "for i in range(3):\n    try:\n        await add(a=i, b=i)\n    except Exception:\n        pass\nreturn 'done'"
    theirs, ours = run_both(code, limits=IsolationLimits(max_tool_calls=2))
    assert theirs.ok and theirs.tool_calls == 2
    # wasmbox latches the breach on the host, whatever the guest caught.
    assert not ours.ok and ours.error_type == "limit_exceeded" and ours.tool_calls == 2


def test_network_is_refused_rather_than_ignored() -> None:
    with pytest.raises(IsolationError, match="network"):
        WasmboxCodeRunner(limits=IsolationLimits(allow_network=True))


def test_the_guest_cannot_reach_the_host() -> None:
    code = "import os\ntry:\n    return os.listdir('/')\nexcept OSError as e:\n    return 'refused'"
    _, ours = run_both(code)
    # The guest's only files are its own in-memory /input, /output and /tmp.
    assert ours.ok and ours.value in ("refused", [], ["input", "output", "tmp"])
