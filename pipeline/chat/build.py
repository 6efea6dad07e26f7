"""The chat's agent: the built-in toolsets, memory, skills, the config's MCP servers' tools
and delegation (a subagent's progress shows under its parent's call), inline questions when
there is a terminal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from pipeline.agent import Agent
from pipeline.delegation import Delegation
from pipeline.memory_tool import memory_tool
from pipeline.skills_tools import skill_tools
from pipeline.tools import Tool
from pipeline.toolsets import builtin_tools

if TYPE_CHECKING:
    from pipeline.chat.inline import Inbox
    from pipeline.chat.listen import EventRouter
    from pipeline.chat.options import ChatOptions

__all__ = ["build_agent"]


def build_agent(options: ChatOptions, *, model: str | None, session_id: str | None,
                router: EventRouter, inbox: Inbox | None, mcp: Iterable[Tool] = ()) -> Agent:
    """``inbox`` None: nobody can answer (piped input), so no approvals (dangerous commands
    are denied) and no ``clarify``. ``mcp``: the MCP servers' tools, which the chat started
    and stops (they outlive the agent: /model, /new and /resume build another)."""
    home, workdir = options.state_home, options.workdir
    delegation = None
    tools: Iterable[Tool] = ()
    if not options.no_tools:
        toolsets = options.toolsets + (("interactive",) if inbox is not None else ())
        builtin = builtin_tools(workdir, toolsets=toolsets,
                                clarify=inbox.clarify if inbox is not None else None)
        delegation = Delegation(progress=router.child)
        # Still the toolset: the agent restores its todo list on resume and closes it.
        tools = attrs.evolve(builtin, tools=(*builtin, memory_tool(home),
                                             *skill_tools(home, workdir), *mcp,
                                             delegation.tool))
    agent = Agent(model=model, base_url=options.base_url, provider=options.provider,
                  api_mode=options.api_mode, tools=tools, home=options.home, cwd=workdir,
                  session_id=session_id, max_turns=options.max_turns,
                  max_tokens=options.max_tokens, timeout=options.timeout,
                  deadline=options.deadline, stream=options.stream,
                  durability=options.durability, event_listener=router.parent,
                  sandbox=options.sandbox,
                  approval_callback=inbox.approve if inbox is not None else None,
                  **dict(options.overrides))
    if delegation is not None:
        delegation.attach(agent)
    return agent
