"""A tiny real MCP server for the tests, built with the SDK's MCPServer (FastMCP in mcp 1.x).

    python tests/pipeline/mcp_server.py stdio        # over stdin/stdout
    python tests/pipeline/mcp_server.py http         # streamable HTTP on 127.0.0.1, a free
                                                     # port, printed as "PORT <n>" once bound
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("mibyan-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def secret_token() -> str:
    """The token the server was given (to check it is redacted)."""
    return f"token is {os.environ.get('TEST_TOKEN', '<none>')}"


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of a request header (streamable HTTP only)."""
    return (ctx.headers or {}).get(name.lower(), "<none>")


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "done"


@server.tool()
def crash() -> str:
    """Kill the server process mid-call."""
    os._exit(3)


@server.tool()
def fail(reason: str) -> str:
    """Raise: the result carries isError."""
    raise ToolError(reason)


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


def _serve_http() -> None:
    import anyio
    import uvicorn

    async def main() -> None:
        config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=0,
                                log_level="warning")
        web = uvicorn.Server(config)
        async with anyio.create_task_group() as tg:
            tg.start_soon(web.serve)
            while not web.started:
                await anyio.sleep(0.01)
            port = web.servers[0].sockets[0].getsockname()[1]
            print(f"PORT {port}", flush=True)

    anyio.run(main)


if __name__ == "__main__":
    if "MCP_TEST_PIDFILE" in os.environ:  # for the tests that look for orphans
        with open(os.environ["MCP_TEST_PIDFILE"], "w") as out:
            out.write(str(os.getpid()))
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        server.run("stdio")
