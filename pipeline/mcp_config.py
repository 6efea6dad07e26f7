"""The MCP servers config.toml declares (``[mcp.servers.NAME]``), started for ``mibyan run``
and ``mibyan chat`` under the sandbox policy their sessions' commands get.

The MCP SDK is imported only for a config that declares servers, so a plain ``run`` or
``chat`` does not pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline import config as cfg

if TYPE_CHECKING:
    from pipeline.mcp_tools import McpTools

__all__ = ["configured_mcp_tools"]


def configured_mcp_tools(home: Path, workdir: Path, sandbox: str | None) -> McpTools | None:
    """The tools of the servers ``home``'s config.toml declares (None when it declares none),
    its stdio servers confined as the session's commands are (``sandbox``: the command line's
    ``--sandbox``, else ``[sandbox]``); the caller closes them."""
    file = cfg.load_file(home)
    if "mcp" not in file:
        return None
    from effects.tools.sandbox import SandboxPolicy
    from pipeline.mcp_tools import mcp_tools, servers_from_config
    from pipeline.sandbox_settings import sandbox_values
    servers = servers_from_config(file)
    if not servers:
        return None
    values = sandbox_values(file.get("sandbox", {}), sandbox=sandbox)
    policy = SandboxPolicy(mode=values.get("sandbox", SandboxPolicy().mode),
                           network=values.get("network", False), home=home)
    return mcp_tools(*servers, sandbox=policy, root=workdir)
