"""Cache-marks stage: Anthropic ``cache_control`` breakpoints. Only the Anthropic Messages API
takes them and no Anthropic adapter is wired in yet, so there is nothing to mark."""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings
from stages.state import State


def decide_cache_marks(state: State, *, config: SessionSettings) -> Decision:
    del state, config
    return NOTHING
