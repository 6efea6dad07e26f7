"""Preflight stage: estimate the request's tokens and flag context pressure.

The estimate is kept incrementally by the fold (``history_chars``), so it costs O(1) per call.
"""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.events import ContextPressure, SessionSettings
from stages.state import State

CHARS_PER_TOKEN = 4


def estimate_tokens(state: State) -> int:
    chars = state.history_chars + len(state.system_prompt or "")
    chars += sum(len(spec.wire) for spec in state.tools)
    return chars // CHARS_PER_TOKEN


def decide_preflight(state: State, *, config: SessionSettings) -> Decision:
    if config.context_length is None:
        return NOTHING
    threshold = int(config.context_length * config.preflight_threshold)
    estimate = estimate_tokens(state)
    if estimate <= threshold:
        return NOTHING
    return Decision(events=(ContextPressure(estimated_tokens=estimate,
                                            threshold_tokens=threshold),))
