"""``mibyan serve``: the HTTP gateway (an OpenAI-compatible API and a session API) over many
agent sessions in one process. Needs the ``serve`` extra (starlette, uvicorn); importing this
package does not load them."""

from __future__ import annotations

from pipeline.lazy import lazy_exports

__all__ = ["AgentMaker", "BackgroundServer", "ServeConfig", "SessionPool", "create_app",
           "serve_config"]

_HOMES = {
    "AgentMaker": "pipeline.serve.agents",
    "BackgroundServer": "pipeline.serve.server",
    "ServeConfig": "pipeline.serve.gateway_config",
    "SessionPool": "pipeline.serve.pool",
    "create_app": "pipeline.serve.app",
    "serve_config": "pipeline.serve.gateway_config",
}


__getattr__ = lazy_exports(__name__, _HOMES)
