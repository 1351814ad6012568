"""A downstream MCP server for wasmbox's end-to-end tests, written with the official
Python SDK (PyPI `mcp`).

Usage: server.py http   — streamable HTTP on 127.0.0.1, a free port, printed on stdout
       server.py stdio  — over stdin and stdout
"""

import os
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("py-downstream")
CANCELLED = []


@server.tool(name="multiply.numbers", description="Multiplies a by b")
def multiply(a: int, b: int) -> int:
    return a * b


@server.tool(name="nap", description="Sleeps for `seconds`, unless the call is cancelled")
async def nap(seconds: float) -> str:
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        CANCELLED.append(seconds)
        raise
    return "rested"


@server.tool(name="cancellations", description="How many naps were cancelled")
def cancellations() -> int:
    return len(CANCELLED)


@server.tool(name="caller", description="The X-Caller header of the request (HTTP only)")
def caller(ctx: Context) -> str:
    return (ctx.headers or {}).get("x-caller", "")


@server.tool(name="crash", description="Exits the server process at once")
def crash() -> str:
    os._exit(3)


def main():
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is printed: a client that connects at once waits in the
    # backlog until uvicorn accepts, instead of being refused.
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


main()
