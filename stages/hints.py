"""Hints stage: which subdirectory context files (AGENTS.md, .cursorrules) join the prompt,
decided from the paths tool calls touched. No context-file roots exist in the settings yet, so
no path qualifies and there is nothing to load."""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings
from stages.state import State


def decide_hints(state: State, *, config: SessionSettings) -> Decision:
    del state, config
    return NOTHING
