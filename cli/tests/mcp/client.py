"""The MCP client of wasmbox's end-to-end tests: the official Python SDK (PyPI `mcp`).

Usage: client.py PLAN, where PLAN is JSON:
  {"transport": "stdio", "command": [...], "env": {...}, "calls": [...]}
  {"transport": "http", "url": "http://127.0.0.1:PORT/mcp", "calls": [...]}
and each call is {"tool": NAME, "arguments": {...}}. Prints one JSON object: the tools
listed (name, description, inputSchema) and each call's result as the wire has it.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def exercise(read, write, calls):
    async with ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        out = {
            "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools],
            "results": [],
        }
        for call in calls:
            result = await session.call_tool(call["tool"], call.get("arguments", {}))
            out["results"].append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
        return out


async def main():
    plan = json.loads(sys.argv[1])
    if plan["transport"] == "stdio":
        command = plan["command"]
        params = StdioServerParameters(command=command[0], args=command[1:], env=plan.get("env"))
        async with stdio_client(params) as (read, write):
            out = await exercise(read, write, plan["calls"])
    else:
        async with streamable_http_client(plan["url"]) as (read, write):
            out = await exercise(read, write, plan["calls"])
    print(json.dumps(out))


asyncio.run(main())
