"""MCP servers as tool backends: one connection per declared server, over stdio or streamable
HTTP, through the official ``mcp`` SDK (the ``mcp`` extra).

The SDK is async and the tool runner calls handlers from its threads, so a group of servers
(:class:`McpServers`) owns one event loop in a daemon thread. Each server's SDK client lives in
one task of that loop, from connect to close (an anyio context must be left by the task that
entered it); the runner's threads submit calls to the loop and wait for them.

A server starts when its tools are listed (the model must see their schemas in the session's
first request). A server whose process dies or whose connection breaks is started again on the
next call. Every failure of a call (a timeout, a crash, a protocol error, the tool's own
``isError``) is raised as :class:`McpCallError`, which the tool runner turns into an error result
the model reads. Stdio servers run in a session of their own and are killed with their process
group on close (the SDK does this), as terminal commands are.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

import attrs

from effects.logs import get_logger
from effects.tools.executor import RUNNING_INTERRUPT
from stages.errors import UsageError
from stages.log.redact import redact

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "McpCallError", "McpServerSpec", "McpServers",
           "McpToolInfo", "render_result"]

DEFAULT_CALL_TIMEOUT_S = 60.0
DEFAULT_STARTUP_TIMEOUT_S = 30.0
# How often a waiting call looks at the turn's interrupt.
_POLL_S = 0.1
log = get_logger(__name__)


class McpCallError(Exception):
    """A call to an MCP tool failed; the message is what the model reads."""


def _pairs(value: Mapping[str, str] | tuple[tuple[str, str], ...] | None
           ) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((str(k), str(v)) for k, v in items)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class McpServerSpec:
    """One MCP server: ``command`` (stdio) or ``url`` (streamable HTTP), never both.

    ``allow`` and ``deny`` hold tool names or shell-style patterns (``read_*``); an empty
    ``allow`` allows every tool, ``deny`` wins. ``timeout`` bounds one call, ``startup_timeout``
    the start of the server and its handshake.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs,
                                                       repr=False)
    allow: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    deny: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    # Values the server is given that must not reach a log (tokens in env, headers): redacted
    # from what its tools return. Header values are always counted among them.
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strings, repr=False)
    timeout: float = DEFAULT_CALL_TIMEOUT_S
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise UsageError(f"MCP server {self.name!r}: give either command (stdio) or url "
                             "(streamable HTTP)")
        if self.timeout <= 0 or self.startup_timeout <= 0:
            raise UsageError(f"MCP server {self.name!r}: timeouts must be positive")

    def offers(self, tool: str) -> bool:
        """Whether the allow and deny lists let the model see ``tool``."""
        allowed = not self.allow or any(fnmatch.fnmatchcase(tool, p) for p in self.allow)
        return allowed and not any(fnmatch.fnmatchcase(tool, p) for p in self.deny)

    @property
    def redacted(self) -> tuple[str, ...]:
        """What is cut from the server's answers and errors before anyone sees them."""
        return tuple(v for v in (*self.secrets, *(v for _, v in self.headers)) if v)


@attrs.frozen(kw_only=True)
class McpToolInfo:
    """A tool a server lists, as the SDK reported it."""

    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool = False


def render_result(result: CallToolResult) -> str:
    """What the model reads of a tool result: its text blocks, a note for each other block,
    the structured content when there is nothing else."""
    from mcp_types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data) * 3 // 4} bytes, "
                         "not shown]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            parts.append(resource.text if isinstance(resource, TextResourceContents)
                         else f"[resource {resource.uri}]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{block.type} content, not shown]")
    if not parts and result.structured_content is not None:
        import json
        parts.append(json.dumps(result.structured_content, ensure_ascii=False,
                                sort_keys=True))
    return "\n".join(parts)


class _Connection:
    """One server's SDK client, held by a task of the group's loop; every method but
    ``__init__`` runs in that loop."""

    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._broken = False
        self._lock: asyncio.Lock | None = None

    def _transport(self) -> Any:
        from mcp.client.stdio import StdioServerParameters
        if self.spec.command is not None:
            return StdioServerParameters(command=self.spec.command, args=list(self.spec.args),
                                         env=dict(self.spec.env) or None, cwd=self.spec.cwd)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        assert self.spec.url is not None
        # The SDK's own defaults: a server may hold a response stream open for minutes.
        http = httpx2.AsyncClient(headers=dict(self.spec.headers),
                                  timeout=httpx2.Timeout(30.0, read=300.0))
        return _owning(http, streamable_http_client(self.spec.url, http_client=http))

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        try:
            from mcp import Client
            async with Client(self._transport(), mode="legacy") as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:  # the connection's end, reported below
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    McpCallError(f"the server stopped ({type(exc).__name__})"))
            elif not stop.is_set():
                log.warning("mcp.connection_lost", server=self.spec.name,
                            error=_describe(exc))
            if not isinstance(exc, Exception):
                raise

    async def client(self) -> Client:
        """The live client, the server started (again) when it is not running."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None and not self._broken and self._holder is not None \
                    and not self._holder.done():
                return self._client
            await self.close()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            self._stop, self._broken = asyncio.Event(), False
            self._holder = loop.create_task(self._hold(ready, self._stop))
            try:
                self._client = await asyncio.wait_for(asyncio.shield(ready),
                                                      self.spec.startup_timeout)
            except TimeoutError:
                await self.close()
                raise McpCallError(f"MCP server {self.spec.name!r} did not start within "
                                   f"{self.spec.startup_timeout:g}s") from None
            except Exception as exc:
                await self.close()
                raise McpCallError(f"MCP server {self.spec.name!r} could not start: "
                                   f"{_describe(exc)}") from None
            log.info("mcp.connected", server=self.spec.name)
            return self._client

    async def tools(self) -> tuple[McpToolInfo, ...]:
        client = await self.client()
        found: list[McpToolInfo] = []
        cursor: str | None = None
        while True:
            page = await asyncio.wait_for(client.list_tools(cursor=cursor),
                                          self.spec.startup_timeout)
            for tool in page.tools:
                hints = tool.annotations
                found.append(McpToolInfo(
                    server=self.spec.name, name=tool.name, description=tool.description or "",
                    input_schema=tool.input_schema,
                    read_only=bool(hints is not None and hints.read_only_hint)))
            cursor = page.next_cursor
            if not cursor:
                return tuple(found)

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED
        client = await self.client()
        try:
            result = await asyncio.wait_for(client.call_tool(tool, arguments),
                                            self.spec.timeout)
        except TimeoutError:
            raise McpCallError(f"MCP tool {tool!r} of server {self.spec.name!r} did not answer "
                               f"within {self.spec.timeout:g}s") from None
        except MCPError as exc:
            # An error the server answered (bad arguments, unknown tool) leaves it usable; a
            # closed connection does not.
            self._broken = (self._holder is None or self._holder.done()
                            or exc.code == CONNECTION_CLOSED)
            raise McpCallError(f"MCP server {self.spec.name!r}: {exc}") from None
        except Exception as exc:
            self._broken = True
            raise McpCallError(f"MCP server {self.spec.name!r} failed: {_describe(exc)}") \
                from None
        text = render_result(result)
        if result.is_error:
            raise McpCallError(text or f"MCP tool {tool!r} failed")
        return text

    async def close(self) -> None:
        holder, self._holder, self._client = self._holder, None, None
        if holder is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(holder), self.spec.startup_timeout)
        except TimeoutError:
            holder.cancel()
        except BaseException as exc:  # a dead server's end: logged, not raised
            log.debug("mcp.close_error", server=self.spec.name, error=_describe(exc))
        with contextlib.suppress(BaseException):
            await holder


@contextlib.asynccontextmanager
async def _owning(http: Any, transport: Any) -> Any:
    """The streamable HTTP transport, closing the HTTP client it was given when it ends."""
    async with http, transport as streams:
        yield streams


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class McpServers:
    """A group of MCP servers sharing one event loop thread; :meth:`close` stops them all."""

    def __init__(self, specs: tuple[McpServerSpec, ...]) -> None:
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise UsageError(f"MCP server names must differ, got {names}")
        self._connections = {spec.name: _Connection(spec) for spec in specs}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="mibyan-mcp")
        self._thread.start()
        self._closed = False

    @property
    def specs(self) -> tuple[McpServerSpec, ...]:
        return tuple(c.spec for c in self._connections.values())

    def tools(self, server: str) -> tuple[McpToolInfo, ...]:
        """The tools ``server`` lists (it starts if it is not running); McpCallError when it
        cannot be reached."""
        spec = self._connections[server].spec
        return self._wait(self._connections[server].tools(),
                          spec.startup_timeout * 2 + 1.0)

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        """Call ``tool`` on ``server``; its text, or McpCallError with what went wrong."""
        spec = self._connections[server].spec
        try:
            text = self._wait(self._connections[server].call(tool, arguments),
                              spec.startup_timeout + spec.timeout + 1.0)
        except McpCallError as exc:
            raise McpCallError(redact(str(exc), spec.redacted)) from None
        return redact(text, spec.redacted)

    def _wait(self, coroutine: Any, limit: float) -> Any:
        if self._closed:
            coroutine.close()
            raise McpCallError("the MCP servers are closed")
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        interrupt = RUNNING_INTERRUPT.get()
        waited = 0.0
        while True:
            try:
                return future.result(timeout=_POLL_S)
            except FutureTimeout:
                waited += _POLL_S
            if interrupt is not None and interrupt.is_set():
                future.cancel()
                raise McpCallError("interrupted by user")
            if waited >= limit:  # the loop itself is stuck: the per-call bounds did not hold
                future.cancel()
                raise McpCallError(f"no answer within {limit:g}s")

    def close(self) -> None:
        """Stop every server (stdio processes are killed with their group) and the loop."""
        if self._closed:
            return
        self._closed = True

        async def close_all() -> None:
            await asyncio.gather(*(c.close() for c in self._connections.values()),
                                 return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
