"""How the context events change the state (``stages.fold`` maps them here)."""

from __future__ import annotations

from typing import Any

from stages.log import events as ev
from stages.log.context_state import ContextState
from stages.log.context_tokens import overflow_cap, prompt_tokens, request_chars
from stages.log.evolve import evolve
from stages.log.state import State

# A compression that saves less than this share of the context counts as ineffective.
INEFFECTIVE_SAVING = 0.10


def _context(state: State, **changes: Any) -> State:
    return evolve(state, context=evolve(state.context, **changes))


def probed(state: State, e: ev.ContextWindowProbed) -> State:
    others = tuple(w for w in state.context.windows
                   if (w.provider, w.model) != (e.provider, e.model))
    return _context(state, windows=(*others, e))


def pressure(state: State, e: ev.ContextPressure) -> State:
    return _context(state, pressure=e.reason)


# The two rules of every model call return the new context: the fold sets it together with
# its other changes, in one copy of the state (a replay's fold makes thousands of them).
def requested(state: State) -> ContextState:
    return evolve(state.context, pressure=None, request_chars=request_chars(state))


def replied(state: State, e: ev.ModelReplied) -> ContextState:
    tokens = prompt_tokens(e.usage)
    if tokens <= 0:
        return evolve(state.context, overflow_retried=False)
    return evolve(state.context, overflow_retried=False, reported_tokens=tokens,
                  reported_chars=state.context.request_chars)


def recovery(state: State, e: ev.RecoveryDecided) -> State:
    if e.action != "compress":
        return state
    cap = overflow_cap(state)
    if state.context.window_cap is not None:
        cap = min(cap, state.context.window_cap)
    return _context(state, pressure="overflow", overflow_retried=True, window_cap=cap)


def planned(state: State, e: ev.CompressionPlanned) -> State:
    return _context(state, plan=e, result=None)


def summarised(state: State, e: ev.ContextSummarised | ev.SummaryFailed) -> State:
    return _context(state, result=e)


def compressed(state: State, e: ev.ContextCompressed) -> State:
    """The context after the history was replaced (the fold replaces it first)."""
    ctx = state.context
    # The same rule the compression stage decided ``disabled`` by.
    little = e.before_tokens - e.after_tokens < INEFFECTIVE_SAVING * e.before_tokens
    return _context(state, pressure=None, plan=None, result=None, summary=e.summary,
                    reported_tokens=None, compressions=ctx.compressions + 1,
                    ineffective=ctx.ineffective + 1 if little else 0, disabled=e.disabled,
                    cooldown_until=e.cooldown_until, split_pending="compression")


def split(state: State, e: ev.SessionSplit) -> State:
    del e
    return _context(state, split_pending=None)


def inherited(state: State, e: ev.ContextInherited) -> State:
    return _context(state, summary=e.summary, compressions=e.compressions,
                    ineffective=e.ineffective, disabled=e.disabled,
                    cooldown_until=e.cooldown_until, windows=e.windows, window_cap=e.window_cap)


def compression_requested(state: State, e: ev.CompressionRequested) -> State:
    """The user asks to compress now: a summary cooldown (after a failed summary) no longer
    holds, so the compression may summarise instead of dropping the middle."""
    del e
    return _context(state, cooldown_until=None)
