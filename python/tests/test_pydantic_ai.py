"""pydantic-ai: an agent (driven by pydantic-ai's FunctionModel, no LLM) calls the
wasmbox code-mode tool, whose code calls the agent's own tools."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from wasmbox.integrations.pydantic_ai import code_mode_tool

calls: list[tuple[str, Any]] = []


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    calls.append(("get_weather", city))
    return {"city": city, "temp_c": {"Paris": 18, "Rome": 24}.get(city, 10)}


async def convert(ctx: RunContext[str], celsius: float) -> float:
    """Celsius to Fahrenheit."""
    calls.append(("convert", ctx.deps))
    return celsius * 9 / 5 + 32


CODE = """
out = {}
for city in ["Paris", "Rome"]:
    w = tools.get_weather(city=city)
    out[city] = tools.convert(celsius=w["temp_c"])
print("checked", len(out))
out
"""


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(json.dumps(returned[-1].content, sort_keys=True))])
    [tool] = info.function_tools
    assert tool.name == "run_code" and "get_weather" in (tool.description or "")
    return ModelResponse(parts=[ToolCallPart("run_code", {"code": CODE})])


def test_an_agent_runs_code_that_calls_its_tools() -> None:
    calls.clear()
    agent = Agent(FunctionModel(model), deps_type=str, tools=[code_mode_tool([get_weather, convert])])
    result = agent.run_sync("Weather in Paris and Rome, in Fahrenheit?", deps="the-deps")
    report = json.loads(result.output)
    assert report == {"status": "ok", "value": {"Paris": 64.4, "Rome": 75.2}, "stdout": "checked 2\n"}
    assert calls == [("get_weather", "Paris"), ("convert", "the-deps"), ("get_weather", "Rome"), ("convert", "the-deps")]


def test_guest_errors_go_back_to_the_model_not_up_the_stack() -> None:
    agent = Agent(TestModel(call_tools="all"), tools=[code_mode_tool([get_weather], language="javascript")])
    # TestModel invents arguments: `code` is some string that is no valid program.
    result = agent.run_sync("go")
    assert "run_code" in result.output and "error" in result.output
