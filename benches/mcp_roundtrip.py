"""One `run_python` round trip from a real MCP client: the official Python SDK (the venv
`cargo xtask test` installs) starts `wasmbox mcp` over stdio, or connects to one over
streamable HTTP, and times N calls of `run_python` with `1 + 1`, after a warm-up.

    target/mcp-tools/venv/bin/python benches/mcp_roundtrip.py target/release/wasmbox [N]
    target/mcp-tools/venv/bin/python benches/mcp_roundtrip.py http://127.0.0.1:PORT/mcp [N]

Prints the median, p90 and p99 in milliseconds (docs/performance.md, "MCP").
"""

import asyncio
import os
import statistics
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def measure(read, write, n):
    async with ClientSession(read, write) as session:
        await session.initialize()
        for _ in range(20):
            await session.call_tool("run_python", {"code": "1 + 1"})
        times = []
        for _ in range(n):
            started = time.perf_counter()
            result = await session.call_tool("run_python", {"code": "1 + 1"})
            times.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result
        return times


async def main():
    target = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    if target.startswith("http"):
        async with streamable_http_client(target) as (read, write):
            times = await measure(read, write, n)
    else:
        env = {"WASMBOX_CACHE_DIR": os.environ.get("WASMBOX_CACHE_DIR", "")} if "WASMBOX_CACHE_DIR" in os.environ else None
        params = StdioServerParameters(command=target, args=["mcp"], env=env)
        async with stdio_client(params) as (read, write):
            times = await measure(read, write, n)
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"run_python round trip, {n} calls: median {statistics.median(times):.2f} ms, p90 {p(0.9):.2f} ms, p99 {p(0.99):.2f} ms")


asyncio.run(main())
