"""chuk-tool-processor: a code runner with `IsolatedCodeRunner`'s interface on wasmbox.

A chuk user switches from a subprocess backend to wasmbox in one line::

    # runner = IsolatedCodeRunner(DockerBackend(), registry=registry, limits=limits)
    runner = WasmboxCodeRunner(registry=registry, limits=limits)
    result = await runner.run("return await add(a=1, b=2)")   # an IsolatedResult

It takes chuk's tool registry, namespace and allowed tools (bare ``"name"`` or
``"ns.name"``) and its `IsolationLimits`, and returns its `IsolatedResult`, with the
meanings chuk's runner gives them (chuk-tool-processor 0.26, `execution/isolation`):

- The code sees each allowed tool as an awaitable global of its bare name
  (``await add(a=1, b=2)``) and ``initial_vars`` as globals. Code containing ``await ``
  or ``return `` is the body of a function whose return value is the result; other code
  leaves its result in ``__result__``. The value crosses back as JSON (``repr`` for
  what is not JSON).
- Tool calls run on the host through chuk's `ToolExecutor` (its wrappers and guards),
  by ``namespace.name``; a failed call raises in the guest.
- ``wall_timeout`` is the run's deadline (`timed_out`, error_type ``"timeout"``);
  ``memory_bytes`` caps the guest's memory; ``max_tool_calls`` the calls;
  stdout/stderr are cut at ``max_output_bytes`` with chuk's ``...[truncated]`` marker.

What differs, because the boundary is a WebAssembly guest rather than a process:
the code runs on wasmbox's CPython 3.14 guest, with its standard library and no
third-party packages; ``cpu_timeout`` and ``max_processes`` have nothing to bound (a
guest has one thread and no processes; its compute is bounded by ``wall_timeout``);
``allow_network=True`` is refused, since a guest has no network; and limits are
latched: a guest that exceeds ``max_tool_calls`` or its memory ends ``ok=False`` with
error_type ``"limit_exceeded"`` even if it catches the error. Output past
``max(max_output_bytes, 1 MiB)`` stops the guest (``"limit_exceeded"``).
"""

from __future__ import annotations

import re
import time
from typing import Any

from chuk_tool_processor.execution.isolation import IsolatedResult, IsolationError, IsolationLimits
from chuk_tool_processor.execution.tool_executor import ToolExecutor
from chuk_tool_processor.models.tool_call import ToolCall
from chuk_tool_processor.registry import get_default_registry

from .. import Limits, Sandbox, Status, Tool

__all__ = ["WasmboxCodeRunner", "DEFAULT_NAMESPACE"]

# chuk's `_wire.DEFAULT_NAMESPACE`.
DEFAULT_NAMESPACE = "default"

# Output up to this is kept and cut to max_output_bytes as chuk does; past it the guest
# is stopped.
_MIN_CAPTURE_BYTES = 1 << 20

# Runs inside the guest: chuk's guest bootstrap (`_run_user_code`), with its tool proxies
# calling wasmbox's `tools`. The code, the tool names and initial_vars come in INPUT,
# never spliced into source.
_DRIVER = '''
import json as __json

def __jsonable(obj):
    try:
        __json.dumps(obj)
        return obj
    except (TypeError, ValueError):
        if isinstance(obj, dict):
            return {str(k): __jsonable(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [__jsonable(v) for v in obj]
        for attr in ("model_dump", "dict"):
            method = getattr(obj, attr, None)
            if callable(method):
                try:
                    return __jsonable(method())
                except Exception:
                    pass
        return repr(obj)

def __proxy(name, tool):
    async def _proxy(**kwargs):
        return tool(**kwargs)
    _proxy.__name__ = name
    return _proxy

__globals = dict(INPUT["initial_vars"])
for __name, __tool in INPUT["tools"]:
    __globals[__name] = __proxy(__name, tools[__tool])
__code = INPUT["code"]
__local = {}
if "await " in __code or "return " in __code:
    __header = "async def __guest_main__():\\n" if "await " in __code else "def __guest_main__():\\n"
    __wrapped = __header + "".join(f"    {line}\\n" for line in __code.split("\\n"))
    exec(compile(__wrapped, "<guest>", "exec"), __globals, __local)
    __main = __local["__guest_main__"]
    __value = (await __main()) if "await " in __code else __main()
else:
    exec(compile(__code, "<guest>", "exec"), __globals, __local)
    __value = __local.get("__result__")
output(__jsonable(__value))
'''

try:  # the broker's own conversion, so results mean what they mean under chuk
    from chuk_tool_processor.execution.isolation.broker import _to_jsonable
except ImportError:  # pragma: no cover - a chuk without it
    from .._convert import to_jsonable as _to_jsonable


class ToolCallFailed(Exception):
    """A chuk tool call that failed (its error text is the message)."""


def _guest_name(namespace: str, name: str, taken: set[str]) -> str:
    """A wasmbox tool name (``[a-z_][a-z0-9_]*``, at most 64 bytes) for a chuk tool."""
    base = re.sub(r"[^a-z0-9_]", "_", f"{namespace}__{name}".lower())
    if not base or base[0].isdigit():
        base = "_" + base
    base = base[:56]
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    taken.add(candidate)
    return candidate


class WasmboxCodeRunner:
    """Runs code in a wasmbox guest with brokered access to a chuk tool registry.

    The arguments are `IsolatedCodeRunner`'s, without the backend: ``registry`` (default:
    chuk's global registry), ``limits`` (default `IsolationLimits()`), ``namespace`` and
    ``allowed_tools``. ``isolation`` adds a second wall around the guest (wasmbox's
    ``"worker"``, ``"bwrap"``, ...; default ``"inproc"``).
    """

    name = "wasmbox"
    provides_isolation = True

    def __init__(
        self,
        *,
        registry: Any = None,
        limits: IsolationLimits | None = None,
        namespace: str | None = None,
        allowed_tools: set[str] | None = None,
        isolation: str = "inproc",
    ) -> None:
        self.registry = registry
        self.limits = limits or IsolationLimits()
        if self.limits.allow_network:
            raise IsolationError("a wasmbox guest has no network: allow_network=True cannot be provided")
        self.namespace = namespace
        self.allowed_tools = allowed_tools
        self.isolation = isolation
        self._wasmbox_limits = _limits(self.limits)

    def _is_allowed(self, namespace: str, name: str) -> bool:
        if self.allowed_tools is None:
            return True
        return name in self.allowed_tools or f"{namespace}.{name}" in self.allowed_tools

    async def run(
        self,
        code: str,
        *,
        namespace: str | None = None,
        initial_vars: dict[str, Any] | None = None,
    ) -> IsolatedResult:
        """Execute ``code`` in a wasmbox guest and return an `IsolatedResult`."""
        registry = self.registry or await get_default_registry()
        ns = namespace if namespace is not None else self.namespace
        executor = ToolExecutor(registry=registry, default_timeout=self.limits.wall_timeout)
        try:
            bindings: list[tuple[str, str]] = []
            tools: list[Tool] = []
            taken: set[str] = set()
            for info in await registry.list_tools(namespace=ns):
                tool_name = getattr(info, "name", None)
                tool_ns = getattr(info, "namespace", None) or DEFAULT_NAMESPACE
                if not isinstance(tool_name, str) or not self._is_allowed(tool_ns, tool_name):
                    continue
                guest_name = _guest_name(tool_ns, tool_name, taken)
                bindings.append((tool_name, guest_name))
                tools.append(_brokered(executor, tool_ns, tool_name, guest_name))
            sandbox = Sandbox("python", tools=tools, scope="all", limits=self._wasmbox_limits, isolation=self.isolation)
            payload = {"code": code, "tools": bindings, "initial_vars": initial_vars or {}}
            started = time.monotonic()
            outcome = await sandbox.run_async(_DRIVER, payload)
            duration = time.monotonic() - started
        finally:
            await executor.shutdown()
        return self._assemble(outcome, duration)

    def _assemble(self, outcome: Any, duration: float) -> IsolatedResult:
        cap = self.limits.max_output_bytes
        timed_out = outcome.status == Status.TIMEOUT
        common: dict[str, Any] = {
            "stdout": _cut(outcome.stdout.text, cap),
            "stderr": _cut(outcome.stderr.text, cap),
            # As chuk's broker counts: calls it let through to the executor.
            "tool_calls": sum(1 for c in outcome.tool_calls if c.status not in ("denied", "budget_exhausted")),
            "duration": duration,
            "backend": self.name,
            "timed_out": timed_out,
            "meta": {"run_id": outcome.run_id, "status": str(outcome.status)},
        }
        if outcome.status == Status.OK:
            return IsolatedResult(ok=True, value=outcome.value, **common)
        if timed_out:
            error = f"execution timed out after {self.limits.wall_timeout}s"
            return IsolatedResult(ok=False, error=error, error_type="timeout", **common)
        detail = outcome.error
        error = f"{detail.kind}: {detail.message}" if detail is not None else str(outcome.status)
        if outcome.status == Status.ERROR:
            error_type = "protocol_error" if detail is not None and detail.kind == "ContractError" else "guest_exception"
        elif outcome.status in (Status.MEMORY_EXHAUSTED, Status.OUTPUT_LIMIT, Status.TOOL_LIMIT, Status.FUEL_EXHAUSTED):
            error_type = "limit_exceeded"
        else:
            error_type = "backend_error"
        return IsolatedResult(ok=False, error=error, error_type=error_type, **common)


def _limits(limits: IsolationLimits) -> Limits:
    capture = max(limits.max_output_bytes, _MIN_CAPTURE_BYTES)
    memory = Limits().max_memory_bytes if limits.memory_bytes is None else min(limits.memory_bytes, 4 << 30)
    return Limits(
        timeout_ms=max(1, round(limits.wall_timeout * 1000)),
        max_memory_bytes=memory,
        max_stdout_bytes=capture,
        max_stderr_bytes=capture,
        max_tool_calls=limits.max_tool_calls,
        # chuk's per-call bound is the executor's default_timeout (wall_timeout).
        tool_timeout_ms=max(1, round(limits.wall_timeout * 1000)),
    )


def _cut(text: str, cap: int) -> str:
    data = text.encode("utf-8")
    if len(data) > cap:
        data = data[:cap] + b"\n...[truncated]"
    return data.decode("utf-8", errors="replace")


def _brokered(executor: ToolExecutor, namespace: str, name: str, guest_name: str) -> Tool:
    async def call(**arguments: Any) -> Any:
        # As chuk's broker: by `namespace.name`, resolved strictly in that namespace.
        results = await executor.execute([ToolCall(tool=f"{namespace}.{name}", namespace=namespace, arguments=arguments)])
        if not results:
            raise ToolCallFailed(f"tool produced no result: {namespace}.{name}")
        if results[0].error is not None:
            raise ToolCallFailed(results[0].error)
        return _to_jsonable(results[0].result)

    return Tool(call, name=guest_name, description=f"{namespace}.{name}", args_schema={"type": "object"})
