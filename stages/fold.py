"""``apply_event``: the one function that turns events into state. Live runs, resumes and
replays all build their state with it, so they cannot disagree."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from stages import events as ev
from stages import pools
from stages.evolve import evolve
from stages.history import History
from stages.messages import Message
from stages.state import State, TurnState


def _digest(digest: str, messages: Iterable[Message]) -> str:
    for message in messages:
        digest = hashlib.sha256((digest + message.wire).encode()).hexdigest()
    return digest


def _append(state: State, *messages: Message) -> State:
    return evolve(state, messages=state.messages.append(*messages),
                        history_chars=state.history_chars + sum(m.chars for m in messages),
                        history_digest=_digest(state.history_digest, messages))


def _current(state: State) -> TurnState:
    if state.turn is None:
        raise ValueError("a turn event arrived before any turn started")
    return state.turn


def _turn(state: State, **changes: Any) -> State:
    return evolve(state, turn=evolve(_current(state), **changes))


def _answer(state: State, call_id: str, name: str, content: str) -> State:
    state = _append(state, Message(role="tool", content=content, tool_call_id=call_id, name=name))
    pending = list(_current(state).pending)
    index = next((i for i, c in enumerate(pending) if c.id == call_id), None)
    if index is not None:
        del pending[index]
    return _turn(state, pending=tuple(pending))


def _session_started(state: State, e: ev.SessionStarted) -> State:
    return evolve(state, session_id=e.session_id, started_at=e.started_at,
                        parent_session_id=e.parent_session_id, settings=e.settings,
                        pools=pools.pools_for(e.settings, ()))


def _session_resumed(state: State, e: ev.SessionResumed) -> State:
    return evolve(state, settings=e.settings, pools=pools.pools_for(e.settings, state.pools))


def _history_loaded(state: State, e: ev.HistoryLoaded) -> State:
    return evolve(state, messages=History(e.messages),
                        history_chars=sum(m.chars for m in e.messages),
                        history_digest=_digest("", e.messages))


def _turn_started(state: State, e: ev.TurnStarted) -> State:
    turn = TurnState(index=state.turns, turn_id=e.turn_id, task_id=e.task_id,
                     system_message=e.system_message, first_message=len(state.messages),
                     provider_index=pools.start_provider(state, e))
    state = evolve(state, turns=state.turns + 1, turn=turn)
    return _append(state, Message(role="user", content=e.user_message))


def _model_requested(state: State, e: ev.ModelRequested) -> State:
    turn = _current(state)
    state = evolve(state, api_calls=state.api_calls + 1)
    return _turn(state, api_calls=turn.api_calls + 1, pending=())


def _model_replied(state: State, e: ev.ModelReplied) -> State:
    turn = _current(state)
    state = pools.on_reply(state, turn, e)
    state = _append(evolve(state, usage=state.usage + e.usage), e.message)
    # Under rules 2 the retry budget is per model call: a reply starts the next call afresh.
    retries = 0 if state.settings is not None and state.settings.rules >= 2 else turn.retries
    return _turn(state, last_reply=e, usage=turn.usage + e.usage,
                 pending=e.message.tool_calls, retries=retries)


def _credential_selected(state: State, e: ev.CredentialSelected) -> State:
    return _turn(pools.on_credential(state, e.provider_index, e.credential_id),
                 credential_id=e.credential_id, sticky_credential=False)


def _credential_refreshed(state: State, e: ev.CredentialRefreshed) -> State:
    turn = _current(state)
    return _turn(pools.on_refreshed(state, turn, e), sticky_credential=e.refreshed)


def _recovery_decided(state: State, e: ev.RecoveryDecided) -> State:
    turn = _current(state)
    state = pools.on_recovery(state, turn, e)
    if e.action == "retry":
        return _turn(state, failure=None, retries=e.attempt, sticky_credential=True)
    if e.action == "fallback":
        return _turn(state, failure=None, retries=0, provider_index=e.provider_index,
                     credential_id=None)
    return _turn(state, failure=None)


def _continuation(state: State, e: ev.ContinuationRequested) -> State:
    turn = _current(state)
    return _turn(_append(state, Message(role="user", content=e.prompt)),
                 continuations=turn.continuations + 1)


def _budget_exhausted(state: State, e: ev.BudgetExhausted) -> State:
    return _turn(_append(state, Message(role="user", content=e.prompt)), budget_exhausted=True)


def _turn_finished(state: State, e: ev.TurnFinished) -> State:
    if e.note is not None:
        state = _append(state, Message(role="assistant", content=e.note))
    return _turn(state, finished=e)


_APPLY: dict[type, Callable[[State, Any], State]] = {
    ev.SessionStarted: _session_started,
    ev.SessionResumed: _session_resumed,
    ev.ToolsDeclared: lambda s, e: evolve(s, tools=e.tools),
    ev.HistoryLoaded: _history_loaded,
    ev.TurnStarted: _turn_started,
    ev.SystemPromptSet: lambda s, e: evolve(s, system_prompt=e.text),
    ev.ContextPressure: lambda s, e: s,
    ev.ModelRequested: _model_requested,
    ev.ModelReplied: _model_replied,
    ev.ModelFailed: lambda s, e: _turn(s, failure=e),
    ev.BudgetExhausted: _budget_exhausted,
    ev.ToolsPlanned: lambda s, e: _turn(s, planned=_current(s).planned + e.call_ids),
    ev.ToolCallRejected: lambda s, e: _answer(s, e.call.id, e.call.name, e.content),
    ev.ToolRan: lambda s, e: _answer(s, e.outcome.call_id, e.outcome.name, e.outcome.content),
    ev.Interrupted: lambda s, e: _turn(s, interruption=e),
    ev.TurnAborted: lambda s, e: s,
    ev.ClockRead: lambda s, e: evolve(s, now=e.epoch),
    ev.Waited: lambda s, e: s,
    ev.CredentialRefreshed: _credential_refreshed,
    ev.CredentialSelected: _credential_selected,
    ev.RecoveryDecided: _recovery_decided,
    ev.ContinuationRequested: _continuation,
    ev.TurnFinished: _turn_finished,
}


def apply_event(state: State, event: ev.Event) -> State:
    """Return the state after ``event``. Pure; never mutates ``state``."""
    return _APPLY[type(event)](state, event)


def fold(events: Iterable[ev.Event], state: State | None = None) -> State:
    """Apply ``events`` in order, starting from ``state`` (an empty session by default)."""
    state = State() if state is None else state
    for event in events:
        state = apply_event(state, event)
    return state
