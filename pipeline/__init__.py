"""mibyan's imperative shell: the runner, replay, the Agent facade, the CLI, DuckDB queries.

Names are imported on first use, so that ``mibyan --help`` does not pay for the SDKs.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "Agent": "pipeline.agent",
    "ReplayReport": "pipeline.replay",
    "Tool": "pipeline.tools",
    "ToolRegistry": "pipeline.tools",
    "replay": "pipeline.replay",
    "tool": "pipeline.tools",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
