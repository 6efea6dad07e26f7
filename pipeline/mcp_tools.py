"""The tools of MCP servers as mibyan tools (needs the ``mcp`` extra).

    with mcp_tools({"name": "files", "command": "python", "args": ["server.py"]}) as mcp:
        agent = Agent(model=..., tools=[*builtin_tools("."), *mcp])

Each server's tools are named ``<server>__<tool>`` (valid OpenAI function names), their JSON
schemas passed through as the server lists them. The servers start here, because the model must
see the schemas in the session's first request; :meth:`McpTools.close` (or the ``with`` block,
or the agent's close when the ``McpTools`` itself is the agent's ``tools``) stops them.

``${VAR}`` in a server's command, args, env, url or headers is read from the environment when
the servers start; what it stands for is redacted from the tools' results, as header values are.
config.toml declares servers under ``[mcp.servers.NAME]`` (see :func:`servers_from_config`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

import attrs

from effects.mcp_client import McpCallError, McpServers, McpServerSpec, McpToolInfo
from effects.mcp_confined import confined
from effects.tools.sandbox import SandboxPolicy
from pipeline.tools import Tool
from stages.errors import UsageError

__all__ = ["McpServerSpec", "McpTools", "mcp_tools", "servers_from_config", "tool_name"]

SEPARATOR = "__"
_NAME_LIMIT = 64
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "allow", "deny",
                   "timeout", "startup_timeout"})


def tool_name(server: str, tool: str) -> str:
    """``server__tool``, made of [A-Za-z0-9_-] and at most 64 characters (a long name keeps a
    hash of the whole so that two long names stay apart)."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"
    if len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{name[:_NAME_LIMIT - 9]}_{digest}"


@attrs.frozen
class McpTools:
    """The tools of a group of MCP servers, and the servers to stop."""

    tools: tuple[Tool, ...]
    servers: McpServers = attrs.field(repr=False)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def close(self) -> None:
        """Stop the servers (stdio processes are killed with their process group)."""
        self.servers.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def mcp_tools(*servers: McpServerSpec | Mapping[str, Any],
              env: Mapping[str, str] | None = None, sandbox: SandboxPolicy | None = None,
              root: str | Path = ".") -> McpTools:
    """Start ``servers`` (specs, or tables as in config.toml with a ``name``) and make their
    allowed tools; a ``UsageError`` names a server that cannot start or list its tools.
    With ``sandbox`` (the session's policy), stdio servers start as the session's commands
    do: confined to the working tree ``root`` where the sandbox is on, and never outliving
    this process (``effects.mcp_confined``)."""
    env = os.environ if env is None else env
    specs = tuple(_expanded(_spec(s), env) for s in servers)
    if sandbox is not None:
        specs = tuple(confined(s, sandbox, Path(root), parent=os.getpid()) for s in specs)
    group = McpServers(specs)
    try:
        tools = tuple(_tool(group, info) for spec in specs
                      for info in _listed(group, spec.name) if spec.offers(info.name))
    except BaseException:
        group.close()
        raise
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        group.close()
        raise UsageError(f"two MCP tools have the same name: {sorted(names)}")
    return McpTools(tools, group)


def _listed(group: McpServers, server: str) -> tuple[McpToolInfo, ...]:
    try:
        return group.tools(server)
    except McpCallError as exc:
        raise UsageError(str(exc)) from None  # it names the server


def _tool(group: McpServers, info: McpToolInfo) -> Tool:
    server, remote = info.server, info.name

    def call(**arguments: Any) -> str:
        return group.call(server, remote, arguments)

    schema = dict(info.input_schema)
    schema.setdefault("type", "object")
    description = info.description or f"The tool {remote!r} of the MCP server {server!r}."
    return Tool.from_schema(tool_name(server, remote), description, schema, call,
                            read_only=info.read_only)


def _spec(server: McpServerSpec | Mapping[str, Any]) -> McpServerSpec:
    if isinstance(server, McpServerSpec):
        return server
    table = dict(server)
    name = table.pop("name", None)
    if not isinstance(name, str):
        raise UsageError(f"an MCP server needs a name, got {server!r}")
    return _from_table(name, table)


def _from_table(name: str, table: Mapping[str, Any]) -> McpServerSpec:
    if not _SERVER_NAME.match(name) or SEPARATOR in name:
        raise UsageError(f"MCP server name {name!r}: use 1-32 of [A-Za-z0-9_-], without '__'")
    unknown = set(table) - _KEYS
    if unknown:
        raise UsageError(f"MCP server {name!r}: unknown setting(s) {', '.join(sorted(unknown))}"
                         f"; expected {', '.join(sorted(_KEYS))}")
    _check(name, table, ("command", "cwd", "url"), str, "a string")
    _check(name, table, ("args", "allow", "deny"), list, "a list of strings")
    _check(name, table, ("env", "headers"), dict, "a table of strings")
    _check(name, table, ("timeout", "startup_timeout"), (int, float), "a number")
    return McpServerSpec(name=name, **table)


def _check(name: str, table: Mapping[str, Any], keys: Iterable[str], kind: Any,
           what: str) -> None:
    for key in keys:
        if key not in table:
            continue
        value = table[key]
        items = value.values() if isinstance(value, dict) else value if isinstance(
            value, list) else ()
        if isinstance(value, bool) or not isinstance(value, kind) \
                or not all(isinstance(item, str) for item in items):
            raise UsageError(f"MCP server {name!r}: {key} must be {what}, got {value!r}")


def _expanded(spec: McpServerSpec, env: Mapping[str, str]) -> McpServerSpec:
    """``spec`` with ``${VAR}`` replaced from ``env``; the values read become secrets."""
    read: list[str] = []

    def sub(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable not in env:
                raise UsageError(f"MCP server {spec.name!r} needs ${{{variable}}}, which is "
                                 "not set in the environment")
            read.append(env[variable])
            return env[variable]
        return _VARIABLE.sub(one, text)

    return attrs.evolve(
        spec,
        command=None if spec.command is None else sub(spec.command),
        args=tuple(sub(a) for a in spec.args),
        env=tuple((k, sub(v)) for k, v in spec.env),
        url=None if spec.url is None else sub(spec.url),
        headers=tuple((k, sub(v)) for k, v in spec.headers),
        secrets=(*spec.secrets, *read))


def servers_from_config(file: Mapping[str, Any]) -> tuple[McpServerSpec, ...]:
    """The servers config.toml declares, in the order written::

        [mcp.servers.files]
        command = "python"
        args = ["-m", "my_server"]
        env = { API_TOKEN = "${API_TOKEN}" }
        deny = ["delete_*"]
        timeout = 30

        [mcp.servers.search]
        url = "http://127.0.0.1:8000/mcp"
        headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
        allow = ["search", "fetch"]
    """
    section = file.get("mcp", {})
    if not isinstance(section, dict) or set(section) - {"servers"}:
        raise UsageError(f"[mcp] holds only servers ([mcp.servers.NAME]), got {section!r}")
    servers = section.get("servers", {})
    if not isinstance(servers, dict) or not all(isinstance(t, dict) for t in servers.values()):
        raise UsageError(f"MCP servers are tables ([mcp.servers.NAME]), got {servers!r}")
    return tuple(_from_table(name, table) for name, table in servers.items())
