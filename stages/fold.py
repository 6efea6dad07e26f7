"""``apply_event``: the one function that turns events into state. Live runs, resumes and
replays all build their state with it, so they cannot disagree."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stages.context.apply import moved
from stages.context.engine import engine_for
from stages.history_loaded import chained_digest, loaded_history
from stages.log import context_fold as cf
from stages.log import events as ev
from stages.log import pools
from stages.log.content_parts import Content, TextPart
from stages.log.evolve import evolve
from stages.log.history import History
from stages.log.image_notes import without_images
from stages.log.messages import Message
from stages.log.state import State, TurnState
from stages.log.tool_specs import call_key
from stages.prompt.untrusted import data_code, escape, wrap


def _appended(state: State, *messages: Message) -> dict[str, Any]:
    """The state's changes for ``messages`` appended to the history (for one evolve with the
    event's other changes: each copy of the state costs microseconds, a replay makes many)."""
    chars = state.history_chars
    for message in messages:  # mostly one: a loop costs less than a sum's generator
        chars += message.chars
    return {"messages": state.messages.append(*messages), "history_chars": chars,
            "history_digest": chained_digest(state.history_digest, messages)}


def _append(state: State, *messages: Message) -> State:
    return evolve(state, **_appended(state, *messages))


def _current(state: State) -> TurnState:
    if state.turn is None:
        raise ValueError("a turn event arrived before any turn started")
    return state.turn


def _turn(state: State, **changes: Any) -> State:
    return evolve(state, turn=evolve(_current(state), **changes))


def _called_name(state: State, call_id: str, name: str) -> str:
    """The name the model called (a repaired call runs under another): the result answers the
    call as the history shows it."""
    reply = _current(state).last_reply
    calls = reply.message.tool_calls if reply is not None else ()
    return next((c.name for c in calls if c.id == call_id), name)


def _answer(state: State, call_id: str, name: str, content: str,
            findings: tuple[str, ...] = (), **turn_changes: Any) -> State:
    turn = _current(state)
    name = _called_name(state, call_id, name)
    hint = dict(turn.hints).get(call_id)
    code = None
    if state.settings is not None and state.settings.rule_set.untrusted_marked:
        # Rules 7: the history (which every request shares) holds the result as data.
        code = data_code(state)
        content = wrap(content, name=name, code=code, findings=findings)
    if hint is not None:
        content = f"{content}\n\n{hint if code is None else escape(hint, code)}"
    pending = list(turn.pending)
    index = next((i for i, c in enumerate(pending) if c.id == call_id), None)
    if index is not None:
        del pending[index]
    answer = Message(role="tool", content=content, tool_call_id=call_id, name=name)
    return evolve(state, **_appended(state, answer),
                  turn=evolve(turn, pending=tuple(pending), **turn_changes))


def _tool_ran(state: State, e: ev.ToolRan) -> State:
    turn = _current(state)
    failed: dict[str, Any] = {}
    if not e.outcome.ok:
        call = next((c for c in turn.pending if c.id == e.outcome.call_id), None)
        if call is not None:
            failed["failed_calls"] = (*turn.failed_calls, call_key(call))
    return _answer(state, e.outcome.call_id, e.outcome.name, e.outcome.content,
                   e.outcome.findings, **failed)


def _session_started(state: State, e: ev.SessionStarted) -> State:
    return evolve(state, session_id=e.session_id, started_at=e.started_at,
                        data_boundary=e.data_boundary,
                        parent_session_id=e.parent_session_id, settings=e.settings,
                        pools=pools.pools_for(e.settings, ()))


def _session_resumed(state: State, e: ev.SessionResumed) -> State:
    return evolve(state, settings=e.settings, pools=pools.pools_for(e.settings, state.pools))


def _history_loaded(state: State, e: ev.HistoryLoaded) -> State:
    marked = state.settings is not None and state.settings.rule_set.untrusted_marked
    messages, chars, digest = loaded_history(e.messages, data_code(state) if marked else None)
    return evolve(state, messages=History(messages), history_chars=chars,
                  history_digest=digest)


def user_content(e: ev.TurnStarted) -> Content:
    """The user's message: its text, or (with images) its text and the images after it."""
    if not e.images:
        return e.user_message
    text = (TextPart(text=e.user_message),) if e.user_message else ()
    return (*text, *e.images)


def _turn_started(state: State, e: ev.TurnStarted) -> State:
    turn = TurnState(index=state.turns, turn_id=e.turn_id, task_id=e.task_id,
                     system_message=e.system_message, first_message=len(state.messages),
                     provider_index=pools.start_provider(state, e),
                     reasoning_effort=e.reasoning_effort, reasoning_budget=e.reasoning_budget,
                     output=e.output, client_tools=e.client_tools)
    if e.tool_results:  # rules 8: the turn goes on from the caller's results
        state = _append(state, *_client_results(state, e.tool_results))
        return evolve(state, turns=state.turns + 1,
                      turn=evolve(turn, first_message=_last_user(state)))
    return evolve(state, turns=state.turns + 1, turn=turn,
                  **_appended(state, Message(role="user", content=user_content(e))))


def _client_results(state: State, results: tuple[Message, ...]) -> tuple[Message, ...]:
    """The caller's results, named as the calls they answer and, under rules 7, marked as
    data like the session's own tool results."""
    names = {c.id: c.name for m in _last_calls(state) for c in m.tool_calls}
    code = (data_code(state) if state.settings is not None
            and state.settings.rule_set.untrusted_marked else None)
    answers = []
    for result in results:
        name = names.get(result.tool_call_id or "", result.name)
        content = result.text
        if code is not None:
            content = wrap(content, name=name, code=code)
        answers.append(Message(role="tool", content=content, tool_call_id=result.tool_call_id,
                               name=name))
    return tuple(answers)


def _last_calls(state: State) -> tuple[Message, ...]:
    """The last assistant message, which the tool messages after it answer."""
    for index in range(len(state.messages) - 1, -1, -1):
        message = state.messages[index]
        if message.role == "assistant":
            return (message,)
        if message.role != "tool":
            break
    return ()


def _last_user(state: State) -> int:
    """Where the user message a continued turn answers stands (what routing and memory
    read)."""
    return next((i for i in range(len(state.messages) - 1, -1, -1)
                 if state.messages[i].role == "user"), 0)


def _model_requested(state: State, e: ev.ModelRequested) -> State:
    turn = _current(state)
    return evolve(state, api_calls=state.api_calls + 1, context=cf.requested(state),
                  turn=evolve(turn, api_calls=turn.api_calls + 1, pending=()))


def _model_replied(state: State, e: ev.ModelReplied) -> State:
    turn = _current(state)
    state = pools.on_reply(state, turn, e)
    # From rules 2 the retry budget is per model call: a reply starts the next call afresh.
    retries = 0 if state.settings is not None and state.settings.rule_set.retries_per_call \
        else turn.retries
    return evolve(state, context=cf.replied(state, e), usage=state.usage + e.usage,
                  **_appended(state, e.message),
                  turn=evolve(turn, last_reply=e, usage=turn.usage + e.usage,
                              pending=e.message.tool_calls, retries=retries))


def _credential_selected(state: State, e: ev.CredentialSelected) -> State:
    return _turn(pools.on_credential(state, e.provider_index, e.credential_id),
                 credential_id=e.credential_id, sticky_credential=False)


def _credential_refreshed(state: State, e: ev.CredentialRefreshed) -> State:
    turn = _current(state)
    return _turn(pools.on_refreshed(state, turn, e), sticky_credential=e.refreshed)


def _recovery_decided(state: State, e: ev.RecoveryDecided) -> State:
    turn = _current(state)
    state = cf.recovery(pools.on_recovery(state, turn, e), e)
    if e.action == "retry":
        return _turn(state, failure=None, retries=e.attempt, sticky_credential=True)
    if e.action == "fallback":
        return _turn(state, failure=None, retries=0, provider_index=e.provider_index,
                     credential_id=None)
    if e.action == "drop_images":  # rules 8
        messages = tuple(without_images(m) for m in state.messages)
        state = evolve(state, messages=History(messages),
                       history_chars=sum(m.chars for m in messages),
                       history_digest=chained_digest("", messages))
        return _turn(state, failure=None, sticky_credential=True)
    if e.action == "strip_reasoning":  # rules 4
        return _turn(state, failure=None, reasoning_stripped=True, sticky_credential=True)
    if e.action == "stop_reasoning_replay":  # rules 4
        return _turn(evolve(state, reasoning_replay_off=True), failure=None,
                     sticky_credential=True)
    return _turn(state, failure=None)


def _continuation(state: State, e: ev.ContinuationRequested) -> State:
    turn = _current(state)
    if e.why == "output":  # the answer's validation errors: not a continuation of a reply
        return _append(state, Message(role="user", content=e.prompt))
    if e.why == "empty":
        return _turn(_append(state, Message(role="user", content=e.prompt)),
                     empty_retries=turn.empty_retries + 1)
    return _turn(_append(state, Message(role="user", content=e.prompt)),
                 continuations=turn.continuations + 1)


def _replace_history(state: State, messages: tuple[Message, ...]) -> State:
    return evolve(state, messages=History(messages),
                        history_chars=sum(m.chars for m in messages),
                        history_digest=chained_digest("", messages))


def _context_compressed(state: State, e: ev.ContextCompressed) -> State:
    plan = state.context.plan
    assert plan is not None and state.settings is not None, "compressed without a plan"
    old = len(state.messages)
    new = engine_for(state.settings).compacted(state.messages, plan, e.inserted)
    state = cf.compressed(_replace_history(state, new), e)
    if state.turn is None:
        return state
    # The turn's own messages moved: its user message (where recalled memory rides, what
    # routing reads) is found again where the compaction put it.
    first = moved(state.turn.first_message, plan, old, len(new))
    return _turn(state, first_message=first)


def _context_inherited(state: State, e: ev.ContextInherited) -> State:
    state = evolve(state, approved_patterns=e.approved_patterns,
                   hint_dirs=state.hint_dirs | frozenset(e.hint_dirs),
                   reasoning_replay_off=state.reasoning_replay_off or e.reasoning_replay_off)
    return cf.inherited(_replace_history(state, e.messages), e)


def _budget_exhausted(state: State, e: ev.BudgetExhausted) -> State:
    if state.settings is not None and state.settings.rule_set.budget_note:
        # The prompt is a note of the request (stages.context.notes), not history.
        return _turn(state, budget_exhausted=True)
    return _turn(_append(state, Message(role="user", content=e.prompt)), budget_exhausted=True)


def _turn_finished(state: State, e: ev.TurnFinished) -> State:
    if e.note is not None:
        state = _append(state, Message(role="assistant", content=e.note))
    return _turn(state, finished=e)


def _call_repaired(state: State, e: ev.ToolCallRepaired) -> State:
    pending = tuple(evolve(c, name=e.name, arguments=e.arguments) if c.id == e.call_id
                    else c for c in _current(state).pending)
    return _turn(state, pending=pending)


PERSONS = ("callback", "decision")
"""Sources of approval answers that a person gave (their reasons are theirs)."""


def _approval_answered(state: State, e: ev.ApprovalAnswered) -> State:
    if e.choice in ("session", "always") and e.pattern not in state.approved_patterns:
        state = evolve(state, approved_patterns=(*state.approved_patterns, e.pattern))
    turn = _current(state)
    denials = turn.denials
    if e.choice == "deny" and e.reason and e.source in PERSONS:  # not a timeout's note
        denials = (*denials, (e.call_id, e.reason))
    return _turn(state, approvals=(*turn.approvals, (e.call_id, e.choice, e.source)),
                 denials=denials)


def _approvals_decided(state: State, e: ev.ApprovalsDecided) -> State:
    for answer in e.answers:
        state = _approval_answered(state, answer)
    return _turn(state, waiting=())


def _route_chosen(state: State, e: ev.RouteChosen) -> State:
    cheap = state.settings.cheap_model if state.settings is not None else None
    return _turn(state, route=cheap if e.route == "cheap" else None)
def _hints_read(state: State, e: ev.HintsRead) -> State:
    return _turn(evolve(state, hint_dirs=state.hint_dirs | frozenset(e.dirs)),
                 hints_read=e.files)


def _hint_attached(state: State, e: ev.HintAttached) -> State:
    turn = _current(state)
    return _turn(state, hints=(*turn.hints, (e.call_id, e.text)), hints_read=())


def _notice(state: State, e: ev.ContextNotice) -> State:
    text = f"{e.source} {e.name}: {e.detail}"
    return _turn(state, warnings=(*_current(state).warnings, text)) if state.turn else state


def _output_checked(state: State, e: ev.OutputChecked) -> State:
    turn = _current(state)
    return _turn(state, output_checked=e,
                 output_failures=turn.output_failures + (not e.valid))


def _checkpointed(state: State, e: ev.Checkpointed) -> State:
    if state.turn is not None:
        state = _turn(state, checkpointed=True)
    return state if e.commit is None else evolve(state, checkpoints=(*state.checkpoints, e))


_APPLY: dict[type, Callable[[State, Any], State]] = {
    ev.SessionStarted: _session_started,
    ev.SessionResumed: _session_resumed,
    ev.ToolsDeclared: lambda s, e: evolve(s, tools=e.tools),
    ev.HistoryLoaded: _history_loaded,
    ev.TurnStarted: _turn_started,
    ev.SystemPromptSet: lambda s, e: evolve(s, system_prompt=e.text, prompt_fresh=False),
    ev.ContextPressure: cf.pressure,
    ev.ModelRequested: _model_requested,
    ev.ModelReplied: _model_replied,
    # A failed call of the cheap model falls back to the primary (smart routing).
    ev.ModelFailed: lambda s, e: _turn(s, failure=e, route=None),
    ev.BudgetExhausted: _budget_exhausted,
    ev.ToolsPlanned: lambda s, e: _turn(s, planned=_current(s).planned + e.call_ids),
    ev.ToolCallRejected: lambda s, e: _answer(s, e.call.id, e.call.name, e.content),
    ev.ToolRan: _tool_ran,
    ev.Interrupted: lambda s, e: _turn(s, interruption=e),
    ev.TurnAborted: lambda s, e: s,
    ev.ClockRead: lambda s, e: evolve(s, now=e.epoch),
    ev.Waited: lambda s, e: s,
    ev.CredentialRefreshed: _credential_refreshed,
    ev.CredentialSelected: _credential_selected,
    ev.RecoveryDecided: _recovery_decided,
    ev.ContinuationRequested: _continuation,
    ev.TurnFinished: _turn_finished,
    ev.ToolCallRepaired: _call_repaired,
    ev.ApprovalAnswered: _approval_answered,
    ev.ApprovalsPending: lambda s, e: _turn(s, waiting=e.calls),
    ev.ApprovalsDecided: _approvals_decided,
    # A steered message joins as the user's (``stages.turn.steering`` says where it may).
    ev.Steered: lambda s, e: _append(s, Message(role="user", content=e.text)),
    ev.RouteChosen: _route_chosen,
    ev.PromptInputsRead: lambda s, e: evolve(s, prompt_inputs=e, prompt_stale=False,
                                                   prompt_fresh=True),
    ev.HintsRead: _hints_read,
    ev.HintAttached: _hint_attached,
    ev.ContextNotice: _notice,
    ev.MemoryPrefetched: lambda s, e: _turn(s, prefetched=tuple(t for _, t in e.results)),
    ev.ContextWindowProbed: cf.probed,
    ev.CompressionPlanned: cf.planned,
    ev.ContextSummarised: cf.summarised,
    ev.SummaryFailed: cf.summarised,
    ev.ContextCompressed: _context_compressed,
    ev.SessionSplit: cf.split,
    ev.ContextInherited: _context_inherited,
    ev.SessionForked: lambda s, e: evolve(s, settings=e.settings,
                                          pools=pools.pools_for(e.settings, s.pools)),
    ev.CompressionRequested: cf.compression_requested,
    ev.Checkpointed: _checkpointed,
    ev.OutputChecked: _output_checked,
    # The tree is outside the state: a rollback changes nothing the stages decide from.
    ev.TreeRestored: lambda s, e: s,
    ev.SandboxProbed: lambda s, e: evolve(s, sandbox=e),
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
