"""Preflight stage: estimate the request's tokens and flag context pressure.

The estimate is kept incrementally by the fold (``history_chars``), so it costs O(1) per call.
Under rules 3 the window is always known (``stages.log.context_window``), the estimate is
corrected by the provider's reported usage (``stages.log.context_tokens``), and the pressure it
records makes the compression stage compact the context before the call. The same check runs
at the start of a turn against the between-turns threshold (85% by default).
"""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.log.context_tokens import CHARS_PER_TOKEN, context_tokens, request_chars, window_of
from stages.log.events import ContextPressure, SessionSettings
from stages.log.state import State


def estimate_tokens(state: State) -> int:
    return request_chars(state) // CHARS_PER_TOKEN


def _pressure(state: State, config: SessionSettings, fraction: float, reason: str) -> Decision:
    if state.context.pressure is not None or state.turn is None:
        return NOTHING
    window = window_of(state, config)
    threshold = int(window.tokens * fraction)
    estimate = context_tokens(state)
    if estimate <= threshold:
        return NOTHING
    return Decision(events=(ContextPressure(estimated_tokens=estimate, threshold_tokens=threshold,
                                            reason=reason, window=window.tokens,
                                            window_source=window.source),))


def decide_preflight(state: State, *, config: SessionSettings) -> Decision:
    if config.rule_set.context_management:
        last = state.last_message
        reason = "tool_batch" if last is not None and last.role == "tool" else "preflight"
        return _pressure(state, config, config.preflight_threshold, reason)
    if config.context_length is None:
        return NOTHING
    threshold = int(config.context_length * config.preflight_threshold)
    estimate = estimate_tokens(state)
    if estimate <= threshold:
        return NOTHING
    return Decision(events=(ContextPressure(estimated_tokens=estimate,
                                            threshold_tokens=threshold),))


def decide_between_turns(state: State, *, config: SessionSettings) -> Decision:
    """At a turn's start: past the between-turns threshold, compress before anything else."""
    if not config.rule_set.context_management:
        return NOTHING
    return _pressure(state, config, config.between_turns_threshold, "between_turns")
