"""How the chat's agents are built: ``mibyan chat``'s arguments (:mod:`pipeline.cli.cmd_chat`
reads them), which the session, and each agent it builds, go by."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pipeline import config as cfg
from pipeline.toolsets import DEFAULT_TOOLSETS

__all__ = ["ChatOptions"]


@attrs.frozen(kw_only=True)
class ChatOptions:
    """How the chat's agents are built (``mibyan chat``'s arguments). ``overrides`` are more
    ``Agent`` keywords (tests bring a fake clock or a scripted client)."""

    home: Path | None = None
    workdir: Path = attrs.field(factory=Path.cwd)
    model: str | None = None
    base_url: str | None = None
    provider: str | None = None
    api_mode: str | None = None
    session_id: str | None = None
    system: str | None = None
    max_turns: int | None = None  # None: 500 for a new session, its own for a resumed one
    max_tokens: int | None = None
    timeout: float | None = None
    deadline: float | None = None
    stream: bool = True
    durability: str = "durable"
    toolsets: tuple[str, ...] = DEFAULT_TOOLSETS
    no_tools: bool = False
    sandbox: str | None = None  # None: [sandbox] mode, or workspace-write
    overrides: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def state_home(self) -> Path:
        return self.home or cfg.home()
