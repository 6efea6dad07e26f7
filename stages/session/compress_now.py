"""A compression the user asks for between turns (``/compress`` in the chat): the request is
an observation (``CompressionRequested``), then the same compression stages run as under
context pressure, with the pressure's reason ``manual``.

``run_compression`` is a machine of the same shape as ``stages.turn.machine.run_turn``: the live
shell
and the replay drive it alike.
"""

from __future__ import annotations

from stages.context.engine import engine_for
from stages.decision import NOTHING, Decision, RequestCompression
from stages.log.context_tokens import context_tokens, window_of
from stages.log.events import CompressionRequested, ContextPressure, SessionSettings
from stages.log.state import State
from stages.turn.machine import Flow, Perform, Record, compression

MANUAL = "manual"


def decide_requested(state: State, *, config: SessionSettings) -> Decision:
    """Pressure of reason ``manual``, when a finished turn left something to compact and
    compression is on for the session (rules 3)."""
    turn, ctx = state.turn, state.context
    if not config.rule_set.context_management or not config.compression_enabled or ctx.disabled:
        return NOTHING
    if turn is None or turn.finished is None or ctx.pressure is not None:
        return NOTHING
    window = window_of(state, config)
    estimate = context_tokens(state)
    # The plan's shape does not depend on the time (only whether it may summarise does).
    if engine_for(config).plan(state, config, reason=MANUAL, window=window.tokens,
                               estimate=estimate, now=state.now or 0.0) is None:
        return NOTHING
    return Decision(events=(ContextPressure(
        estimated_tokens=estimate, threshold_tokens=0, reason=MANUAL, window=window.tokens,
        window_source=window.source),))


def run_compression() -> Flow:
    """The user's request, then (when there is something to compact) the compression."""
    state = yield Perform("input", RequestCompression(), (CompressionRequested.kind,))
    assert state.settings is not None, "a compression needs a started session"
    config = state.settings
    decision = decide_requested(state, config=config)
    if not decision.events:
        return state
    state = yield Record("preflight", decision.events)
    return (yield from compression(state, config))
