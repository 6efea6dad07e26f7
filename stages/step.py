"""The router and the stages that end or continue a turn.

``next_stage`` names the stage that decides after every step: it closes the turn (answer,
budget summary, interruption, failure), plans pending tool calls, or asks for another model
call. ``stages.turn`` asks it and records each decision under that stage's name.
Every way out of a turn leaves the history alternating: unanswered tool calls get an error
result, and a user message left without a reply gets a short assistant note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


STARTED_UNKNOWN = ("the process stopped while this call was running: it started, and its "
                   "outcome is unknown; check before running it again")
NEVER_STARTED = "the process stopped before this call started: it never ran"


def _reject_pending(state: State, reason: str, text: str) -> tuple[ToolCallRejected, ...]:
    assert state.turn is not None
    content = canonical_json({"error": text})
    return tuple(ToolCallRejected(call=c, reason=reason, content=content)
                 for c in state.turn.pending)


def _reject_abandoned(state: State) -> tuple[ToolCallRejected, ...]:
    """Calls planned (their intent durable before they ran) may have started; the others never
    did. The model reads which is which."""
    assert state.turn is not None
    started = set(state.turn.planned)
    return tuple(
        ToolCallRejected(call=c, reason="abandoned_started", content=canonical_json(
            {"error": STARTED_UNKNOWN})) if c.id in started else
        ToolCallRejected(call=c, reason="abandoned", content=canonical_json(
            {"error": NEVER_STARTED}))
        for c in state.turn.pending)


def _close(state: State, *, reason: str, text: str, exit_reason: str,
           **outcome: Any) -> Decision:
    """End the turn without a model answer, keeping the history alternating."""
    rejected = _reject_pending(state, reason, text)
    last = state.last_message
    unanswered = not rejected and last is not None and last.role == "user"
    finished = TurnFinished(exit_reason=exit_reason, final_response=None, completed=False,
                            note=f"[no reply: {text}]" if unanswered else None, **outcome)
    return Decision(events=(*rejected, finished), next=Finish())


def decide_answer(state: State, *, config: SessionSettings) -> Decision:
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


def decide_continuation(state: State, *, config: SessionSettings) -> Decision:
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


def next_stage(state: State) -> str:
    """Which stage decides next: ``finish`` (the turn is over), ``interrupt``, ``recovery``,
    ``tool_plan``, ``continuation``, ``answer``, or ``call`` (another model call)."""
    turn = state.turn
    if turn is None or turn.finished is not None:
        return "finish"
    last = state.last_message
    answered = (last is not None and last.role == "assistant"
                and (turn.budget_exhausted or not last.tool_calls))
    if turn.interruption is not None and not answered:
        return "interrupt"
    if turn.failure is not None:
        return "recovery"
    if turn.pending and not turn.budget_exhausted:
        return "tool_plan"
    if answered and turn.last_reply is not None and not turn.budget_exhausted \
            and turn.last_reply.finish_reason == "incomplete":
        return "continuation"
    return "answer" if answered else "call"


def decide_interrupted(state: State, *, config: SessionSettings) -> Decision:
    """The user stopped the turn: close it, answering pending calls with an error."""
    del config
    assert state.turn is not None and state.turn.interruption is not None
    during = state.turn.interruption.during
    return _close(state, reason="interrupted", text="interrupted by user", interrupted=True,
                  exit_reason=("interrupted_during_api_call" if during == "model_call"
                               else "interrupted_by_user"))


def decide_failed(state: State, *, config: SessionSettings) -> Decision:
    """A failed call: the recovery stage's move, or, when it has none, the turn fails."""
    recovery = decide_recovery(state, config=config)
    if recovery.next is not None:
        return recovery
    assert state.turn is not None and state.turn.failure is not None
    failure = state.turn.failure
    closing = _close(state, reason="model_failed",
                     text=f"the model call failed: {failure.message}",
                     exit_reason=f"model_error({failure.error_type})", failed=True,
                     error=f"{failure.error_type}: {failure.message}")
    return Decision(events=recovery.events + closing.events, next=Finish())


def decide_tools(state: State, *, config: SessionSettings) -> Decision:
    """Plan the pending calls; when all of them were refused, the model is asked again."""
    plan = decide_tool_plan(state, config=config)
    return plan if plan.next is not None else Decision(events=plan.events, next=PrepareCall())


ROUTES: dict[str, Callable[..., Decision]] = {
    "interrupt": decide_interrupted,
    "recovery": decide_failed,
    "tool_plan": decide_tools,
    "continuation": decide_continuation,
    "answer": decide_answer,
}


def decide_abandon(state: State) -> Decision:
    """A resumed session whose last turn never finished (the process was killed): close it."""
    if state.turn is None or state.turn.finished is not None:
        return Decision()
    text = "the process stopped before the turn finished"
    closing = _close(state, reason="abandoned", text=text, exit_reason="abandoned", failed=True,
                     error=text)
    if state.settings is None or state.settings.rules < 2 or not state.turn.pending:
        return closing
    return Decision(events=(*_reject_abandoned(state), *closing.events[-1:]), next=Finish())
