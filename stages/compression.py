"""Compression stage: plan what to prune, keep and summarise when the context is under
pressure. Only planning lives here; the summary is an effect.

Compression is off unless the settings enable it; the summarising planner arrives with the
context-compression issue, until then an enabled session keeps its whole history.
"""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import SessionSettings
from stages.state import State


def decide_compression(state: State, *, config: SessionSettings) -> Decision:
    del state, config
    return NOTHING
