"""The router: from the state, decide the loop's next step.

``decide_next`` is called after every batch of events. It closes the turn (answer, budget
summary, interruption, failure), plans pending tool calls, or asks for another model call.
Every way out of a turn leaves the history alternating: unanswered tool calls get an error
result, and a user message left without a reply gets a short assistant note.
"""

from __future__ import annotations

from stages.budget import NO_SUMMARY_TEXT
from stages.decision import Decision, Finish, PrepareCall
from stages.events import (
    ContinuationRequested,
    Event,
    RecoveryDecided,
    SessionSettings,
    ToolCallRejected,
    TurnFinished,
)
from stages.messages import canonical_json
from stages.recovery import decide_recovery, next_provider
from stages.state import State
from stages.tool_plan import decide_tool_plan

MAX_CONTINUATIONS = 3
CONTINUE_PROMPT = "Continue, and give your answer or call a tool."


def _reject_pending(state: State, reason: str, text: str) -> tuple[ToolCallRejected, ...]:
    assert state.turn is not None
    content = canonical_json({"error": text})
    return tuple(ToolCallRejected(call=c, reason=reason, content=content)
                 for c in state.turn.pending)


def _close(state: State, *, reason: str, text: str, exit_reason: str, **outcome: object) -> Decision:
    """End the turn without a model answer, keeping the history alternating."""
    rejected = _reject_pending(state, reason, text)
    last = state.last_message
    unanswered = not rejected and last is not None and last.role == "user"
    finished = TurnFinished(exit_reason=exit_reason, final_response=None, completed=False,
                            note=f"[no reply: {text}]" if unanswered else None, **outcome)
    return Decision(events=(*rejected, finished), next=Finish())


def _answer(state: State, config: SessionSettings) -> Decision:
    """The last message is the model's; finish with it (dropping tools asked for too late)."""
    assert state.turn is not None
    turn = state.turn
    reply = turn.last_reply
    assert reply is not None
    events: tuple[Event, ...] = ()
    if turn.budget_exhausted:
        events = _reject_pending(state, "budget_exhausted",
                                 "the iteration budget is used up; no more tools run this turn")
        finished = TurnFinished(
            exit_reason=f"max_iterations_reached({config.max_turns}/{config.max_turns})",
            final_response=reply.message.content or NO_SUMMARY_TEXT, completed=False)
    else:
        finished = TurnFinished(exit_reason=f"text_response(finish_reason={reply.finish_reason})",
                                final_response=reply.message.content or "", completed=True)
    return Decision(events=(*events, finished), next=Finish())


def _continue(state: State, config: SessionSettings) -> Decision:
    """An incomplete reply (reasoning only, or the provider stopped early) is continued up to
    three times; then the next provider takes over (``incomplete_response``), or the turn ends
    with what there is."""
    assert state.turn is not None
    turn = state.turn
    ask = ContinuationRequested(prompt=CONTINUE_PROMPT)
    if turn.continuations < MAX_CONTINUATIONS:
        return Decision(events=(ask,), next=PrepareCall())
    fallback = next_provider(state, config)
    if fallback is None:
        reply = turn.last_reply
        assert reply is not None
        return Decision(events=(TurnFinished(
            exit_reason="incomplete_response", final_response=reply.message.content or "",
            completed=False),), next=Finish())
    switch = RecoveryDecided(reason="incomplete_response", action="fallback",
                             detail=f"{MAX_CONTINUATIONS} continuations gave no complete answer",
                             at=state.now or 0.0, credential_id=turn.credential_id,
                             provider_index=fallback)
    return Decision(events=(switch, ask), next=PrepareCall())


def decide_next(state: State, *, config: SessionSettings) -> Decision:
    turn = state.turn
    if turn is None or turn.finished is not None:
        return Decision(next=Finish())
    last = state.last_message
    answered = (last is not None and last.role == "assistant"
                and (turn.budget_exhausted or not last.tool_calls))
    if turn.interruption is not None and not answered:
        during = turn.interruption.during
        return _close(state, reason="interrupted", text="interrupted by user", interrupted=True,
                      exit_reason=("interrupted_during_api_call" if during == "model_call"
                                   else "interrupted_by_user"))
    if turn.failure is not None:
        recovery = decide_recovery(state, config=config)
        if recovery.next is not None:
            return recovery
        failure = turn.failure
        closing = _close(state, reason="model_failed",
                         text=f"the model call failed: {failure.message}",
                         exit_reason=f"model_error({failure.error_type})", failed=True,
                         error=f"{failure.error_type}: {failure.message}")
        return Decision(events=recovery.events + closing.events, next=Finish())
    if turn.pending and not turn.budget_exhausted:
        plan = decide_tool_plan(state, config=config)
        return plan if plan.next is not None else Decision(events=plan.events, next=PrepareCall())
    if answered and turn.last_reply is not None and not turn.budget_exhausted \
            and turn.last_reply.finish_reason == "incomplete":
        return _continue(state, config)
    if answered:
        return _answer(state, config)
    return Decision(next=PrepareCall())


def decide_abandon(state: State) -> Decision:
    """A resumed session whose last turn never finished (the process was killed): close it."""
    if state.turn is None or state.turn.finished is not None:
        return Decision()
    return _close(state, reason="abandoned", text="the process stopped before the turn finished",
                  exit_reason="abandoned", failed=True,
                  error="the process stopped before the turn finished")
