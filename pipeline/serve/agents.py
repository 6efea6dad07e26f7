"""The agents a gateway (or a cron run) makes: one configuration read once, then one agent
per session with its own toolset (a todo list, a terminal), its own memory manager, and the
shared provider router (one connection pool for every session)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from pipeline.agent import Agent
from pipeline.hooks import Hooks, default_hooks
from pipeline.memory_providers import BuiltinMemory, MemoryManager
from pipeline.memory_tool import memory_tool
from pipeline.settings import Configured, configure
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
                  shared: tuple[Tool, ...] | None = None, hooks: Hooks | None = None) -> Agent:
    """An agent for one session: its own built-in toolset (a todo list, a terminal) and memory
    manager; ``shared`` tools (else the home's, made now) and ``hooks`` (else the installed
    plugins, loaded now)."""
    home = parts.agent_settings.home
    tools = builtin_tools(workdir, toolsets=toolsets)
    extra = home_tools(home, workdir) if shared is None else shared
    tools = attrs.evolve(tools, tools=(*tools, *extra))
    return Agent(settings=attrs.evolve(parts.settings, platform=platform),
                 agent_settings=attrs.evolve(parts.agent_settings, session_id=session_id),
                 effects=attrs.evolve(parts.effects, memory=MemoryManager(BuiltinMemory(home))),
                 secrets=parts.secrets, tools=tools, event_listener=listener, hooks=hooks)


class AgentMaker:
    """Agents for the gateway's sessions (an ``AgentFactory``): the configuration is read
    once; ``config`` are ``pipeline.settings.configure``'s keywords."""

    def __init__(self, *, workdir: Path, toolsets: Iterable[str], **config: Any) -> None:
        self.parts = configure(cwd=workdir, **config)
        self.workdir = workdir
        self.toolsets = tuple(toolsets)
        self.shared = home_tools(self.parts.agent_settings.home, workdir)
        self.hooks = default_hooks()

    @property
    def model(self) -> str:
        return self.parts.settings.model

    def __call__(self, session_id: str | None, platform: str,
                 listener: Callable[[Event], None]) -> Agent:
        return session_agent(self.parts, session_id=session_id, platform=platform,
                             workdir=self.workdir, toolsets=self.toolsets, listener=listener,
                             shared=self.shared, hooks=self.hooks)

