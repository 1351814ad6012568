"""pydantic-ai: a "code mode" tool. The agent writes one script that calls the agent's
own tools, and wasmbox runs it, instead of one model turn per tool call::

    from pydantic_ai import Agent
    from wasmbox.integrations.pydantic_ai import code_mode_tool

    agent = Agent(model, tools=[code_mode_tool([get_weather, convert])])

Each tool keeps its pydantic-ai behaviour: its JSON Schema (what the broker checks the
guest's arguments against), its argument validation and its ``RunContext`` (the context
of the ``run_code`` call). The model gets back the run's status, value, stdout and error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai import Tool as AgentTool

from .. import Limits, Sandbox, Status, Tool
from .._sandbox import Language

__all__ = ["code_mode_tool"]


def code_mode_tool(
    tools: Sequence[AgentTool[Any] | Callable[..., Any]],
    *,
    language: Language = "python",
    limits: Limits | None = None,
    isolation: str = "inproc",
    name: str = "run_code",
    description: str | None = None,
) -> AgentTool[Any]:
    """A pydantic-ai tool ``run_code(code)`` that runs ``code`` in a wasmbox guest which
    may call ``tools`` (pydantic-ai `Tool`s or functions, which become `Tool`s)."""
    agent_tools = [t if isinstance(t, AgentTool) else AgentTool(t) for t in tools]
    limits = limits or Limits()
    # Made once here so that a bad tool name or schema fails now, not in a model turn,
    # and the guest is loaded before the first call.
    Sandbox(language, tools=[_bound(t, None) for t in agent_tools], scope="all", limits=limits, isolation=isolation)

    async def run_code(ctx: RunContext[Any], code: str) -> dict[str, Any]:
        sandbox = Sandbox(
            language, tools=[_bound(t, ctx) for t in agent_tools], scope="all", limits=limits, isolation=isolation
        )
        outcome = await sandbox.run_async(code)
        report: dict[str, Any] = {"status": str(outcome.status)}
        if outcome.status == Status.OK:
            report["value"] = outcome.value
        if outcome.stdout.text:
            report["stdout"] = outcome.stdout.text
        if outcome.error is not None:
            report["error"] = f"{outcome.error.kind}: {outcome.error.message}"
        return report

    return AgentTool(run_code, name=name, description=description or _describe(language, agent_tools))


def _bound(tool: AgentTool[Any], ctx: RunContext[Any] | None) -> Tool:
    schema = tool.function_schema

    async def call(**arguments: Any) -> Any:
        if ctx is None:
            raise RuntimeError("this sandbox only checks the tools; run_code makes the one that calls them")
        validated = schema.validator.validate_python(arguments)
        return await schema.call(validated, ctx)

    return Tool(call, name=tool.name, description=tool.description or "", args_schema=dict(schema.json_schema))


def _describe(language: Language, tools: Sequence[AgentTool[Any]]) -> str:
    if language == "python":
        how = "Runs Python code in a sandbox. Call a tool as `tools.<name>(arg=value)`; the value of the last expression (or `output(value)`) is returned."
    else:
        how = "Runs JavaScript code (the body of an async function) in a sandbox. Call a tool as `await tools.<name>({arg: value})`; `return` a value."
    lines = [how, "Tools:"]
    for tool in tools:
        schema = json.dumps(tool.function_schema.json_schema, separators=(",", ":"))
        lines.append(f"- {tool.name}: {tool.description or ''} Arguments: {schema}")
    return "\n".join(lines)
