"""The agents a gateway (or a cron run) makes: one configuration read once, then one agent
per session with its own toolset (a todo list, a terminal), its own memory manager, and the
shared provider router (one connection pool for every session). A session taken up again from
its log goes on with its own model, endpoint and settings, as ``mibyan run --resume`` does.

A gateway's agents answer dangerous commands from the gateway's own "always" list,
``<home>/serve/approvals.json`` (its operator's to write; no remote client can add to it), not
from the one a terminal's "always" answers fill, ``<home>/approvals.json``: a person who
allowed a kind of command at their own terminal allowed it for themselves, not for every
holder of a token. ``[serve] trust_terminal_approvals = true`` gives them the terminal's list.
Anything else is denied (no one is there to ask)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from effects.eventlog.store import session_path
from effects.mcp_client import McpServerSpec
from effects.protocols import ModelClient
from effects.tools.sandbox import SandboxPolicy
from pipeline.agent import Agent
from pipeline.config import load_file
from pipeline.hooks import Hooks, default_hooks
from pipeline.memory_providers import BuiltinMemory, MemoryManager
from pipeline.memory_tool import memory_tool
from pipeline.settings import Configured, configure
from pipeline.shell.approval import AllowList, Approver
from pipeline.skills_tools import skill_tools
from pipeline.tools import Tool
from pipeline.toolsets import builtin_tools
from stages.log.events import Event


def home_tools(home: Path, workdir: Path) -> tuple[Tool, ...]:
    """The tools over the home's files (memory, skills): stateless, so sessions share them."""
    return (memory_tool(home), *skill_tools(home, workdir))


def session_agent(parts: Configured, *, session_id: str | None, platform: str,
                  workdir: Path, toolsets: Iterable[str],
                  listener: Callable[[Event], None] | None = None,
                  shared: tuple[Tool, ...] | None = None, hooks: Hooks | None = None,
                  mcp: tuple[McpServerSpec, ...] = ()) -> Agent:
    """An agent for one session: its own built-in toolset (a todo list, a terminal), memory
    manager and ``mcp`` servers (started now, under the session's sandbox, stopped when the
    agent closes); ``shared`` tools (else the home's, made now) and ``hooks`` (else the
    installed plugins, loaded now)."""
    home = parts.agent_settings.home
    tools = builtin_tools(workdir, toolsets=toolsets)
    extra = home_tools(home, workdir) if shared is None else shared
    servers = _mcp_tools(mcp, parts, workdir)
    tools = attrs.evolve(tools, tools=(*tools, *extra, *servers),
                         also_close=(servers.close,) if servers else ())
    return Agent(settings=attrs.evolve(parts.settings, platform=platform),
                 agent_settings=attrs.evolve(parts.agent_settings, session_id=session_id),
                 effects=attrs.evolve(parts.effects, memory=MemoryManager(BuiltinMemory(home))),
                 secrets=parts.secrets, tools=tools, event_listener=listener, hooks=hooks)


def _mcp_tools(specs: tuple[McpServerSpec, ...], parts: Configured, workdir: Path) -> Any:
    """The session's own MCP servers, under its sandbox policy (as its commands run)."""
    if not specs:
        return ()
    from pipeline.mcp_tools import mcp_tools
    settings = parts.settings
    policy = SandboxPolicy(mode=settings.sandbox, network=settings.network,
                           home=parts.agent_settings.home)
    return mcp_tools(*specs, sandbox=policy, root=workdir)


def mcp_servers(home: Path) -> tuple[McpServerSpec, ...]:
    """The MCP servers config.toml declares (``[mcp.servers.NAME]``)."""
    file = load_file(home)
    if "mcp" not in file:  # the SDK is imported only for a config that uses it
        return ()
    from pipeline.mcp_tools import servers_from_config
    return servers_from_config(file)


def gateway_approvals(home: Path, *, trust_terminal_approvals: bool) -> AllowList:
    """The "always" list a gateway's agents answer from (the module's docstring says why)."""
    if trust_terminal_approvals:
        return AllowList(home / "approvals.json")
    return AllowList(home / "serve" / "approvals.json")


class AgentMaker:
    """Agents for the gateway's sessions (an ``AgentFactory``): the configuration is read
    once; ``config`` are ``pipeline.settings.configure``'s keywords."""

    def __init__(self, *, workdir: Path, toolsets: Iterable[str],
                 trust_terminal_approvals: bool = False, approvals: str = "deny",
                 **config: Any) -> None:
        self.parts = configure(cwd=workdir, **config)
        # "pause": a call that needs approval stops the turn until a client decides.
        self.approver = Approver(allowlist=gateway_approvals(
            self.parts.agent_settings.home, trust_terminal_approvals=trust_terminal_approvals),
            default=approvals)
        self.workdir = workdir
        self.toolsets = tuple(toolsets)
        self.shared = home_tools(self.parts.agent_settings.home, workdir)
        self.hooks = default_hooks()
        self.mcp = mcp_servers(self.parts.agent_settings.home)

    @property
    def model(self) -> str:
        return self.parts.settings.model

    def resumed(self, session_id: str) -> Configured:
        """The parts a logged session goes on with: the settings it recorded last (the
        gateway's are for new sessions), through the gateway's router when the session is on
        the gateway's endpoint, else through a client of its own (its key from the
        environment, as for ``mibyan run --resume``)."""
        home = self.parts.agent_settings.home
        if not session_path(home / "sessions", session_id).exists():
            return self.parts  # refused as unknown when the agent opens it
        ours = self.parts.agent_settings

        def resume(client: ModelClient | None) -> Configured:
            return configure(cwd=self.workdir, home=home, session_id=session_id,
                             durability=ours.durability, timeout=ours.timeout,
                             deadline=ours.deadline, client=client)

        own = resume(self.parts.effects.model).settings
        gateway = self.parts.settings
        if (own.provider, own.base_url) == (gateway.provider, gateway.base_url):
            return attrs.evolve(self.parts, settings=own)
        return resume(None)

    def __call__(self, session_id: str | None, platform: str,
                 listener: Callable[[Event], None]) -> Agent:
        parts = self.parts if session_id is None else self.resumed(session_id)
        parts = attrs.evolve(parts, effects=attrs.evolve(parts.effects, approver=self.approver))
        return session_agent(parts, session_id=session_id, platform=platform,
                             workdir=self.workdir, toolsets=self.toolsets, listener=listener,
                             shared=self.shared, hooks=self.hooks, mcp=self.mcp)

