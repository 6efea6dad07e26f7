"""``mibyan serve``: the HTTP gateway (an OpenAI-compatible API and a session API) over many
agent sessions in one process. Needs the ``serve`` extra (starlette, uvicorn); importing this
package does not load them."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AgentMaker", "BackgroundServer", "ServeConfig", "SessionPool", "create_app",
           "serve_config"]

_HOMES = {
    "AgentMaker": "pipeline.serve.agents",
    "BackgroundServer": "pipeline.serve.server",
    "ServeConfig": "pipeline.serve.config",
    "SessionPool": "pipeline.serve.pool",
    "create_app": "pipeline.serve.app",
    "serve_config": "pipeline.serve.config",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'pipeline.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
