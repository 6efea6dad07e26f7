"""Compression stage (rules 3): when the preflight, the between-turns check or an overflow
put the context under pressure, the session's context engine plans what to keep, prune and
summarise; the summary is an effect (``Summarise``); ``decide_compressed`` then records the
outcome, and the fold replaces the history.

A summary that cannot be written drops the middle (head and tail kept, with a marker) and
cools summaries down for 600 seconds (marker-only compressions meanwhile); two compressions in
a row that save under 10% switch compression off for the session, with a notice. The summary
call is fitted to its own model's window, so compression never loops.
"""

from __future__ import annotations

from stages.context import summary as sm
from stages.context.engine import SUMMARY_FAILURE_COOLDOWN, engine_for
from stages.context.tasks import carried_tasks, with_tasks
from stages.decision import NOTHING, Decision, Summarise
from stages.log.context_fold import INEFFECTIVE_SAVING
from stages.log.context_tokens import CHARS_PER_TOKEN, context_tokens, window_of
from stages.log.events import ContextCompressed, ContextSummarised, SessionSettings
from stages.log.state import State

INEFFECTIVE_LIMIT = 2
# A summary may take this many times its budget (the summary call may write 1.3 times it).
SUMMARY_ROOM = 1.5
DISABLED_NOTICE = ("Context compression saved under 10% twice in a row, so it is off for the "
                   "rest of this session; start a new session if the context fills up.")


def wants_compression(state: State, config: SessionSettings) -> bool:
    """Pressure is pending and compression may run (an overflow tries even when the engine
    switched itself off)."""
    ctx = state.context
    if (not config.rule_set.context_management or ctx.pressure is None
            or not config.compression_enabled):
        return False
    return state.turn is not None and (not ctx.disabled or ctx.pressure == "overflow")


def decide_compression(state: State, *, config: SessionSettings) -> Decision:
    if not wants_compression(state, config):
        return NOTHING
    assert state.turn is not None and state.context.pressure is not None
    window = window_of(state, config)
    engine = engine_for(config)
    plan = engine.plan(state, config, reason=state.context.pressure, window=window.tokens,
                       estimate=context_tokens(state), now=state.now or 0.0)
    if plan is None:
        return NOTHING
    if not plan.summarise:
        return Decision(events=(plan,))
    return Decision(events=(plan,),
                    next=Summarise(request=engine.summary_request(state, config, plan)))


def _middle(state: State) -> tuple[str | None, str | None, float | None]:
    """The kept summary, the text replacing the middle, and the cooldown."""
    ctx = state.context
    plan = ctx.plan
    assert plan is not None
    dropped = plan.tail_start - plan.head
    if dropped <= 0:
        return ctx.summary, None, ctx.cooldown_until
    if isinstance(ctx.result, ContextSummarised) and plan.summarise:
        assert state.settings is not None
        summary = engine_for(state.settings).summary(ctx.summary, ctx.result.text)
        if plan.iterative:  # rules 7: a turn compressed again and again keeps it bounded
            summary = sm.bounded(summary, int(plan.summary_budget * CHARS_PER_TOKEN * SUMMARY_ROOM))
        return summary, sm.summary_text(summary), None
    cooldown = plan.at + SUMMARY_FAILURE_COOLDOWN if plan.summarise else ctx.cooldown_until
    return ctx.summary, sm.dropped_marker(dropped, ctx.summary), cooldown


def decide_compressed(state: State, *, config: SessionSettings) -> Decision:
    """The outcome of the plan in ``state.context.plan`` (and its summary, if asked for)."""
    ctx = state.context
    plan = ctx.plan
    if plan is None:
        return NOTHING
    summary, inserted, cooldown = _middle(state)
    if (inserted is not None and config.rule_set.todo_in_summary
            and (lines := carried_tasks(state.messages, plan))):
        inserted = with_tasks(inserted, lines)
    new = engine_for(config).compacted(state.messages, plan, inserted)
    removed = state.history_chars - sum(m.chars for m in new)
    before = context_tokens(state)
    after = max(0, before - removed // CHARS_PER_TOKEN)
    ineffective = ctx.ineffective + 1 if before - after < INEFFECTIVE_SAVING * before else 0
    disabled = ctx.disabled or ineffective >= INEFFECTIVE_LIMIT
    notice = DISABLED_NOTICE if disabled and not ctx.disabled else None
    return Decision(events=(ContextCompressed(
        summary=summary, inserted=inserted, before_tokens=before, after_tokens=after,
        cooldown_until=cooldown, disabled=disabled, notice=notice),))
