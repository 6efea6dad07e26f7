"""The router and the stages that end or continue a turn.

``next_stage`` names the stage that decides after every step: it closes the turn (answer,
budget summary, interruption, failure), plans pending tool calls, or asks for another model
call. ``stages.turn.machine`` asks it and records each decision under that stage's name.
Every way out of a turn leaves the history alternating: unanswered tool calls get an error
result, and a user message left without a reply gets a short assistant note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stages.decision import Decision, Finish, PrepareCall
from stages.log.events import (
    LOCAL_PROVIDER,
    ContinuationRequested,
    Event,
    ModelReplied,
    RecoveryDecided,
    SessionSettings,
    ToolCallRejected,
    TurnFinished,
)
from stages.log.messages import Message, canonical_json
from stages.log.state import State
from stages.recovery.chain import decide_recovery, next_provider
from stages.recovery.reasoning import THINKING_EXHAUSTED_TEXT, thinking_only
from stages.tools.client_calls import own_calls
from stages.tools.plan import decide_tool_plan
from stages.turn.budget import NO_SUMMARY_TEXT
from stages.turn.seams import join_parts

MAX_CONTINUATIONS = 3
CONTINUE_PROMPT = "Continue, and give your answer or call a tool."
# Rules 3: a reply cut at the output limit goes on where it stopped; an empty one is asked
# again once, then reported.
LENGTH_PROMPT = ("Your reply was cut off at the output limit. Continue exactly where it "
                 "stopped, without repeating anything.")
# Rules 6: the parts are joined with a space where the text shows a word boundary
# (``stages.turn.seams``), and the model is told to give the one the text cannot show.
SPACED_LENGTH_PROMPT = ("Your reply was cut off at the output limit. Continue exactly where it "
                        "stopped, without repeating anything; if it stopped between two "
                        "words, begin with a space.")
LENGTH_PROMPTS = (LENGTH_PROMPT, SPACED_LENGTH_PROMPT)
# Rules 5: a continuation that begins as the cut answer began is the model starting over (small
# models do): it replaces the parts before it, and is not asked to go on again.
RESTART_HEAD = 40  # characters of the answer's start compared
RESTART_MIN = 12  # a shorter start is too common to tell a restart by
EMPTY_PROMPT = "Your reply was empty. Give your answer, or call a tool."
MAX_EMPTY_RETRIES = 1
EMPTY_REPLY_TEXT = "the model returned an empty reply, also when asked again"
FILTERED_TEXT = "the provider's content filter stopped the reply"


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
            final_response=reply.message.text or NO_SUMMARY_TEXT, completed=False)
    elif config.rule_set.content_filter_fails and reply.finish_reason == "content_filter":
        finished = TurnFinished(exit_reason="content_filter", final_response=_text(reply),
                                completed=False, failed=True, error=FILTERED_TEXT)
    elif config.rule_set.cut_answer_partial and reply.finish_reason == "length":
        # The call budget ran out while the answer was still cut at the output limit.
        finished = TurnFinished(exit_reason="incomplete_response",
                                final_response=_joined_answer(state), completed=False)
    else:
        text = answer_text(state)
        finished = TurnFinished(exit_reason=f"text_response(finish_reason={reply.finish_reason})",
                                final_response=text, completed=True)
    return Decision(events=(*events, finished), next=Finish())


def _text_or_none(message: Message) -> str | None:
    return None if message.content is None else message.text


def answer_text(state: State) -> str:
    """The last reply's answer (from rules 3 with the parts cut at the output limit before
    it)."""
    assert state.turn is not None and state.turn.last_reply is not None
    if state.settings is not None and state.settings.rule_set.early_end_retry:
        return _joined_answer(state)
    return state.turn.last_reply.message.text


def _joined_answer(state: State) -> str:
    """The answer, with the parts of it that were cut at the output limit before it (rules 5:
    from the last part that started the answer over)."""
    parts = _cut_parts(state)
    if len(parts) == 1:  # no cut before it (nearly every answer): no seam, no restart
        return parts[0]
    rules = None if state.settings is None else state.settings.rule_set
    if rules is not None and rules.restart_replaces_answer:
        parts = parts[max((i for i, part in enumerate(parts[1:], 1)
                           if _starts_over(parts[0], part)), default=0):]
    if rules is not None and rules.spaced_continuations and not _prefilled(state):
        return join_parts(parts)
    return "".join(parts)


def _prefilled(state: State) -> bool:
    """The parts went on from the cut text itself (rules 5, the embedded local model), so
    they are exact continuations, spaces and all."""
    assert state.turn is not None and state.settings is not None
    entry = state.turn.route or state.settings.chain[state.turn.provider_index]
    return (state.settings.rule_set.local_prefill and entry.provider == LOCAL_PROVIDER
            and entry.api_mode == "chat_completions")


def length_prompt(config: SessionSettings) -> str:
    """The user message that asks for the rest of a reply cut at the output limit."""
    return SPACED_LENGTH_PROMPT if config.rule_set.spaced_continuations else LENGTH_PROMPT


def _cut_parts(state: State) -> list[str]:
    """The last reply and the replies cut at the output limit just before it, oldest first."""
    return cut_parts(state.messages, len(state.messages) - 1)


def cut_parts(messages: Sequence[Message], last: int) -> list[str]:
    """The reply at ``last`` and the replies cut at the output limit just before it, each
    followed by the length prompt, oldest first."""
    parts = [messages[last].text]
    index = last - 1
    while (index >= 1 and messages[index].role == "user"
           and messages[index].content in LENGTH_PROMPTS
           and messages[index - 1].role == "assistant"):
        parts.append(messages[index - 1].text)
        index -= 2
    return parts[::-1]


def _starts_over(first: str, part: str) -> bool:
    """``part``, a later part of the answer, begins as ``first`` did."""
    first, part = first.lstrip(), part.lstrip()
    size = min(RESTART_HEAD, len(first), len(part))
    return size >= RESTART_MIN and first[:size] == part[:size]


def _text(reply: ModelReplied) -> str | None:
    """The reply's text, None when it had no content at all."""
    return None if reply.message.content is None else reply.message.text


def _empty(reply: ModelReplied) -> bool:
    return (not reply.message.text.strip() and not reply.message.tool_calls
            and reply.finish_reason not in ("content_filter", "incomplete"))


def _early_end(state: State) -> str | None:
    """Rules 3: why the last reply ended too early (``length``, ``empty``), if it did."""
    turn = state.turn
    assert turn is not None
    reply = turn.last_reply
    if state.settings is None or not state.settings.rule_set.early_end_retry or reply is None:
        return None
    if turn.api_calls >= state.settings.max_turns:
        # The iteration budget is used up: the turn ends with what there is.
        return "empty" if _empty(reply) else None
    if (state.settings.rule_set.thinking_only_ends and reply.finish_reason == "length"
            and thinking_only(reply.message)):
        return "thinking"  # the output limit went to reasoning alone: asking again repeats it
    if reply.finish_reason == "length" and not reply.message.tool_calls:
        return "length"
    return "empty" if _empty(reply) else None


def _asks_again(state: State) -> bool:
    """Rules 3: the last reply ended too early and the model would be asked again (an
    interrupt stops that: the person's stop wins over an automatic continuation)."""
    turn = state.turn
    assert turn is not None and state.settings is not None
    return (not turn.budget_exhausted and _early_end(state) not in (None, "thinking")
            and turn.api_calls < state.settings.max_turns)


def _decide_empty(state: State) -> Decision:
    assert state.turn is not None and state.settings is not None
    if (state.turn.empty_retries < MAX_EMPTY_RETRIES
            and state.turn.api_calls < state.settings.max_turns):
        return Decision(events=(ContinuationRequested(prompt=EMPTY_PROMPT, why="empty"),),
                        next=PrepareCall())
    return Decision(events=(TurnFinished(exit_reason="empty_response", final_response=None,
                                         completed=False, failed=True,
                                         error=EMPTY_REPLY_TEXT),), next=Finish())


def decide_continuation(state: State, *, config: SessionSettings) -> Decision:
    """An incomplete reply (reasoning only, or the provider stopped early) is continued up to
    three times; then the next provider takes over (``incomplete_response``), or the turn ends
    with what there is."""
    assert state.turn is not None
    turn = state.turn
    why = _early_end(state)
    if why == "empty":
        return _decide_empty(state)
    if why == "thinking":
        return Decision(events=(TurnFinished(
            exit_reason="thinking_budget_exhausted", final_response=None, completed=False,
            failed=True, error=THINKING_EXHAUSTED_TEXT),), next=Finish())
    ask = (ContinuationRequested(prompt=length_prompt(config), why="length") if why == "length"
           else ContinuationRequested(prompt=CONTINUE_PROMPT))
    if turn.continuations < MAX_CONTINUATIONS and not _restarted(state, why):
        return Decision(events=(ask,), next=PrepareCall())
    fallback = next_provider(state, config)
    if fallback is None:
        reply = turn.last_reply
        assert reply is not None
        text = _joined_answer(state) if why == "length" else reply.message.text
        return Decision(events=(TurnFinished(
            exit_reason="incomplete_response", final_response=text, completed=False),),
            next=Finish())
    switch = RecoveryDecided(reason="incomplete_response", action="fallback",
                             detail=f"{MAX_CONTINUATIONS} continuations gave no complete answer",
                             at=state.now or 0.0, credential_id=turn.credential_id,
                             provider_index=fallback)
    return Decision(events=(switch, ask), next=PrepareCall())


def _restarted(state: State, why: str | None) -> bool:
    """Rules 5: the cut reply started the answer over; asked again, it would once more."""
    parts = _cut_parts(state) if why == "length" else []
    return (state.settings is not None and state.settings.rule_set.restart_replaces_answer
            and len(parts) > 1
            and _starts_over(parts[0], parts[-1]))


def next_stage(state: State) -> str:
    """Which stage decides next: ``finish`` (the turn is over), ``interrupt``, ``recovery``,
    ``tool_plan``, ``continuation``, ``answer``, or ``call`` (another model call)."""
    turn = state.turn
    if turn is None or turn.finished is not None:
        return "finish"
    last = state.last_message
    answered = (last is not None and last.role == "assistant"
                and (turn.budget_exhausted or not last.tool_calls))
    if turn.interruption is not None and (not answered or _asks_again(state)):
        return "interrupt"
    if turn.failure is not None:
        return "recovery"
    if turn.pending and not turn.budget_exhausted:
        if turn.client_tools and state.settings is not None \
                and state.settings.rule_set.client_tools and not own_calls(state):
            return "client_calls"
        return "tool_plan"
    if answered and turn.last_reply is not None and not turn.budget_exhausted \
            and (turn.last_reply.finish_reason == "incomplete" or _early_end(state)):
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
    if plan.next is not None:
        return plan
    assert state.turn is not None
    if config.rule_set.client_tools and len(own_calls(state)) < len(state.turn.pending):
        return Decision(events=plan.events)  # the caller's calls end the turn (rules 8)
    return Decision(events=plan.events, next=PrepareCall())


def decide_client_calls(state: State, *, config: SessionSettings) -> Decision:
    """Rules 8: the session's own calls of the reply have run; the turn ends on the calls to
    the caller's tools, left pending for the caller to run (the next turn brings their
    results). The reply's text, if any, is the turn's answer so far."""
    del config
    assert state.turn is not None and state.turn.last_reply is not None
    return Decision(events=(TurnFinished(
        exit_reason="client_tool_calls",
        final_response=_text_or_none(state.turn.last_reply.message), completed=False),),
        next=Finish())


ROUTES: dict[str, Callable[..., Decision]] = {
    "client_calls": decide_client_calls,
    "interrupt": decide_interrupted,
    "recovery": decide_failed,
    "tool_plan": decide_tools,
    "continuation": decide_continuation,
    "answer": decide_answer,
}


def decide_abandon(state: State) -> Decision:
    """A resumed session whose last turn never finished (the process was killed): close it."""
    if state.turn is None or state.turn.finished is not None or state.turn.waiting:
        return Decision()  # a turn waiting for approvals goes on when they come (rules 8)
    text = "the process stopped before the turn finished"
    closing = _close(state, reason="abandoned", text=text, exit_reason="abandoned", failed=True,
                     error=text)
    if (state.settings is None or not state.settings.rule_set.abandoned_calls_rejected
            or not state.turn.pending):
        return closing
    return Decision(events=(*_reject_abandoned(state), *closing.events[-1:]), next=Finish())
