"""mibyan's public face: the Agent, tools, settings, results, replay and the errors.

    from pipeline import Agent, tool

Test doubles for your own agents are in :mod:`pipeline.testing`. Names are imported on first
use, so that ``mibyan --help`` does not pay for the SDKs.
"""

from __future__ import annotations

from pipeline.lazy import lazy_exports

__all__ = [
    "Agent",
    "AgentSettings",
    "Effects",
    "MibyanError",
    "ProviderEntry",
    "ReplayReport",
    "SessionSettings",
    "Tool",
    "ToolArgumentsError",
    "ToolRegistry",
    "TurnResult",
    "UsageError",
    "replay",
    "tool",
]

_HOMES = {
    "Agent": "pipeline.agent",
    "AgentSettings": "pipeline.settings",
    "Effects": "effects.performers",
    "MibyanError": "stages.errors",
    "ProviderEntry": "stages.log.events",
    "ReplayReport": "pipeline.shell.replay",
    "SessionSettings": "stages.log.events",
    "Tool": "pipeline.tools",
    "ToolArgumentsError": "pipeline.tools",
    "ToolRegistry": "pipeline.tools",
    "TurnResult": "pipeline.result",
    "UsageError": "stages.errors",
    "replay": "pipeline.shell.replay",
    "tool": "pipeline.tools",
}


__getattr__ = lazy_exports(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
