"""Named examples for the router (``step.next_stage`` and its stages, through the helpers'
``decide_next``) and ``decide_abandon``."""

from __future__ import annotations

import json

import attrs

from stages.context.notes import BUDGET_PROMPT
from stages.decision import Decision, Finish, PrepareCall, RunTools, Wait
from stages.log import events as ev
from stages.log.alternation import violations
from stages.turn.budget import NO_SUMMARY_TEXT, decide_budget
from stages.turn.request import decide_request
from stages.turn.step import LENGTH_PROMPT, decide_abandon, length_prompt, next_stage
from tests.stages.helpers import (
    SETTINGS,
    answered,
    call,
    decide_next,
    ran,
    reply,
    requested,
    session,
    spec,
    then,
    turn,
)

TOOLS = (spec("read", read_only=True),)


def _finished(decision: Decision) -> ev.TurnFinished:
    assert isinstance(decision.next, Finish)
    last = decision.events[-1]
    assert isinstance(last, ev.TurnFinished)
    return last


def test_no_turn_means_finish_with_nothing() -> None:
    assert decide_next(session(), config=SETTINGS) == Decision(next=Finish())


def test_a_fresh_turn_asks_for_a_model_call() -> None:
    assert decide_next(turn(session()), config=SETTINGS) == Decision(next=PrepareCall())


def test_finish_with_text() -> None:
    state = answered(turn(session()), reply("Hi there!"))
    decision = decide_next(state, config=SETTINGS)
    assert decision.events == (ev.TurnFinished(
        exit_reason="text_response(finish_reason=stop)", final_response="Hi there!",
        completed=True),)
    assert isinstance(decision.next, Finish)
    done = then(state, decision)
    assert done.turn.finished == decision.events[0]
    assert decide_next(done, config=SETTINGS) == Decision(next=Finish())
    assert violations(done.messages) == []


def test_finish_with_an_empty_reply_under_rules_2() -> None:
    rules_2 = attrs.evolve(SETTINGS, rules=2)
    state = answered(turn(session(settings=rules_2)), reply(None, finish_reason="length"))
    finished = _finished(decide_next(state, config=rules_2))
    assert finished.final_response == "" and finished.completed
    assert finished.exit_reason == "text_response(finish_reason=length)"


def test_tool_calls_are_planned() -> None:
    state = answered(turn(session(*TOOLS)), reply(None, call("c1", "read")))
    decision = decide_next(state, config=SETTINGS)
    assert isinstance(decision.next, RunTools)


def _spend_budget(max_turns: int):
    settings = attrs.evolve(SETTINGS, max_turns=max_turns)
    state = turn(session(*TOOLS, settings=settings))
    for i in range(max_turns):
        assert decide_next(state, config=settings).next == PrepareCall()
        assert decide_budget(state, config=settings).events == ()
        c = call(f"c{i}", "read")
        state = answered(state, reply(None, c))
        state = then(state, decide_next(state, config=settings), ran(c))
    return settings, state


def test_budget_exhausted_then_summary_without_tools_then_max_iterations() -> None:
    settings, state = _spend_budget(2)
    assert state.turn.api_calls == 2
    assert decide_next(state, config=settings).next == PrepareCall()

    budget = decide_budget(state, config=settings)
    assert budget.events == (ev.BudgetExhausted(api_calls=2, max_turns=2, prompt=BUDGET_PROMPT),)
    before = state.messages
    state = then(state, budget)
    # Rules 3: the budget's prompt is a note of the summary request, not history.
    assert state.messages == before and state.turn.budget_exhausted
    assert decide_budget(state, config=settings).events == ()  # only once per turn

    request = decide_request(state, config=settings)
    assert request.next.request.system_prompt.endswith(BUDGET_PROMPT)
    (asked,) = request.events
    assert asked.purpose == "budget_summary" and asked.tool_count == 0
    assert request.next.request.tools == () and request.next.request.purpose == "budget_summary"
    state = then(state, request, reply("Here is where I got to."))

    decision = decide_next(state, config=settings)
    assert decision.events == (ev.TurnFinished(
        exit_reason="max_iterations_reached(2/2)", final_response="Here is where I got to.",
        completed=False),)
    state = then(state, decision)
    assert state.turn.api_calls == 3
    assert violations(state.messages) == []


def test_a_summary_reply_with_tool_calls_gets_them_rejected() -> None:
    settings, state = _spend_budget(1)
    state = then(state, decide_budget(state, config=settings),
                 decide_request(state, config=settings).events)
    greedy = reply(None, call("x1", "read"), call("x2", "nope"))
    state = then(state, greedy)
    decision = decide_next(state, config=settings)
    *rejected, finished = decision.events
    assert [(r.call.id, r.reason) for r in rejected] == [("x1", "budget_exhausted"),
                                                         ("x2", "budget_exhausted")]
    assert "iteration budget is used up" in json.loads(rejected[0].content)["error"]
    assert finished.final_response == NO_SUMMARY_TEXT
    assert finished.exit_reason == "max_iterations_reached(1/1)" and not finished.completed
    state = then(state, decision)
    assert state.turn.pending == ()
    assert violations(state.messages) == []


def test_interruption_closes_pending_calls_with_rejections() -> None:
    state = answered(turn(session(*TOOLS)), reply("let me look", call("c1", "read"),
                                                   call("c2", "read")))
    state = then(state, ev.Interrupted(during="between_steps"))
    decision = decide_next(state, config=SETTINGS)
    *rejected, finished = decision.events
    assert [(r.call.id, r.reason) for r in rejected] == [("c1", "interrupted"),
                                                         ("c2", "interrupted")]
    assert json.loads(rejected[0].content) == {"error": "interrupted by user"}
    assert finished == ev.TurnFinished(exit_reason="interrupted_by_user", final_response=None,
                                       completed=False, interrupted=True, note=None)
    state = then(state, decision)
    assert violations(state.messages) == []


def test_interruption_right_after_the_user_message_adds_a_note() -> None:
    state = then(turn(session()), ev.Interrupted(during="between_steps"))
    decision = decide_next(state, config=SETTINGS)
    finished = _finished(decision)
    assert decision.events == (finished,)
    assert finished.note == "[no reply: interrupted by user]" and finished.interrupted
    state = then(state, decision)
    assert state.messages[-1].role == "assistant"
    assert state.messages[-1].content == "[no reply: interrupted by user]"
    assert violations(state.messages) == []


def test_interruption_during_the_model_call() -> None:
    state = then(turn(session()), requested(turn(session())),
                 ev.Interrupted(during="model_call"))
    finished = _finished(decide_next(state, config=SETTINGS))
    assert finished.exit_reason == "interrupted_during_api_call"


def test_interruption_after_tool_results_needs_no_note() -> None:
    c = call("c1", "read")
    state = answered(turn(session(*TOOLS)), reply(None, c))
    state = then(state, decide_next(state, config=SETTINGS), ran(c),
                 ev.Interrupted(during="between_steps"))
    decision = decide_next(state, config=SETTINGS)
    assert decision.events == (ev.TurnFinished(exit_reason="interrupted_by_user",
                                               final_response=None, completed=False,
                                               interrupted=True),)


def test_a_server_error_is_retried_with_backoff_while_retries_remain() -> None:
    state = turn(session())
    state = then(state, requested(state), ev.ModelFailed(error_type="ProviderHTTPError",
                                                         message="boom", status=500))
    decision = decide_next(state, config=SETTINGS)
    [recovery] = decision.events
    assert (recovery.action, recovery.reason, recovery.attempt) == ("retry", "server_error", 1)
    assert decision.next == Wait(attempt=1, retry_after=None)
    assert then(state, decision).turn.failure is None


def test_model_failure_closes_the_turn_as_failed() -> None:
    state = turn(session())
    state = then(state, requested(state), ev.ModelFailed(error_type="ProviderHTTPError",
                                                         message="boom", status=500))
    decision = decide_next(state, config=attrs.evolve(SETTINGS, max_retries=0))
    assert not any(isinstance(e, ev.RecoveryDecided) for e in decision.events)
    finished = _finished(decision)
    assert finished.failed and not finished.completed and not finished.interrupted
    assert finished.exit_reason == "model_error(ProviderHTTPError)"
    assert finished.error == "ProviderHTTPError: boom"
    assert finished.note == "[no reply: the model call failed: boom]"
    assert violations(then(state, decision).messages) == []


def test_interruption_wins_over_a_failure() -> None:
    state = turn(session())
    state = then(state, requested(state), ev.ModelFailed(error_type="E", message="m"),
                 ev.Interrupted(during="between_steps"))
    assert _finished(decide_next(state, config=SETTINGS)).interrupted


def test_abandon_closes_an_open_turn() -> None:
    state = answered(turn(session(*TOOLS)), reply(None, call("c1", "read")))
    decision = decide_abandon(state)
    *rejected, finished = decision.events
    assert [r.reason for r in rejected] == ["abandoned"]
    assert finished.exit_reason == "abandoned" and finished.failed
    assert finished.error == "the process stopped before the turn finished"
    assert isinstance(decision.next, Finish)
    assert violations(then(state, decision).messages) == []


def test_abandon_after_the_user_message_adds_a_note() -> None:
    decision = decide_abandon(turn(session()))
    (finished,) = decision.events
    assert finished.note == "[no reply: the process stopped before the turn finished]"


def test_abandon_does_nothing_without_an_open_turn() -> None:
    assert decide_abandon(session()) == Decision()
    done = answered(turn(session()), reply("hi"))
    done = then(done, decide_next(done, config=SETTINGS))
    assert decide_abandon(done) == Decision()


def test_an_abandoned_turn_says_which_calls_may_have_run() -> None:
    """After a crash during tools, a planned call (its intent was durable before it ran) is
    'started, outcome unknown'; a call never planned 'never ran'. Rules 1 logs keep one text."""
    first, second = call("c1", "write"), call("c2", "write")
    state = answered(turn(session(spec("write"))), reply(None, first, second))
    state = then(state, ev.ToolsPlanned(call_ids=("c1",), concurrent=False))
    decision = decide_abandon(state)
    rejected = [e for e in decision.events if isinstance(e, ev.ToolCallRejected)]
    assert [(e.call.id, e.reason) for e in rejected] == [("c1", "abandoned_started"),
                                                       ("c2", "abandoned")]
    assert "outcome is unknown" in rejected[0].content and "never ran" in rejected[1].content
    assert decision.events[-1].exit_reason == "abandoned"
    old = then(session(spec("write"), settings=attrs.evolve(SETTINGS, rules=1)))
    old = then(answered(turn(old), reply(None, first, second)),
               ev.ToolsPlanned(call_ids=("c1",), concurrent=False))
    assert {e.reason for e in decide_abandon(old).events
            if isinstance(e, ev.ToolCallRejected)} == {"abandoned"}


def _cut_then(first: str, second: str, *, settings: ev.SessionSettings = SETTINGS,
              second_finish: str = "length"):
    """A reply cut at the output limit, continued once, and the continuation's reply."""
    state = answered(turn(session(settings=settings)), reply(first, finish_reason="length"))
    decision = decide_next(state, config=settings)
    assert decision.events[0].kind == "continuation_requested"
    state = then(state, decision)
    return answered(state, reply(second, finish_reason=second_finish))


START = "This directory contains a variety of files:\n- `a.txt`\n- `b.t"


def test_a_continuation_that_starts_over_is_not_glued_to_the_cut_part_nor_continued() -> None:
    # SmolLM2 asked to go on wrote its answer again from the start, four times over, glued.
    state = _cut_then(START, START[:45] + " and more")
    finished = _finished(decide_next(state, config=SETTINGS))
    assert finished.exit_reason == "incomplete_response" and not finished.completed
    assert finished.final_response == START[:45] + " and more"


def test_a_restart_that_ends_is_the_whole_answer() -> None:
    state = _cut_then(START, "  " + START + "txt`", second_finish="stop")
    finished = _finished(decide_next(state, config=SETTINGS))
    assert finished.completed and finished.final_response == "  " + START + "txt`"


def test_a_true_continuation_is_joined_and_continued() -> None:
    state = _cut_then(START, "xt`\n- `c.t")
    decision = decide_next(state, config=SETTINGS)
    assert decision.events[0].kind == "continuation_requested"
    state = answered(then(state, decision), reply("xt`", finish_reason="stop"))
    assert _finished(decide_next(state, config=SETTINGS)).final_response == (
        START + "xt`\n- `c.t" + "xt`")


def test_under_rules_4_a_restart_is_glued_as_before() -> None:
    rules_4 = attrs.evolve(SETTINGS, rules=4)
    state = _cut_then("hey there, welcome to", "hey there, welcome to", settings=rules_4)
    decision = decide_next(state, config=rules_4)
    assert decision.events[0].kind == "continuation_requested"
    state = answered(then(state, decision), reply(" you", finish_reason="stop"))
    assert _finished(decide_next(state, config=rules_4)).final_response == (
        "hey there, welcome tohey there, welcome to you")


def test_a_short_cut_part_is_too_common_a_start_to_call_a_restart() -> None:
    state = _cut_then("The", "The end.", second_finish="stop")
    assert _finished(decide_next(state, config=SETTINGS)).final_response == "TheThe end."


def test_a_continuation_that_dropped_the_space_between_words_gets_it_back() -> None:
    # Asked in a new message to go on, a model drops the space its next word would carry.
    state = _cut_then("It is done.", "Then it ends.", second_finish="stop")
    assert _finished(decide_next(state, config=SETTINGS)).final_response == (
        "It is done. Then it ends.")
    cut_in_a_word = _cut_then("The answer is 3.", "14 exactly.", second_finish="stop")
    assert _finished(decide_next(cut_in_a_word, config=SETTINGS)).final_response == (
        "The answer is 3.14 exactly.")
    rules_5 = attrs.evolve(SETTINGS, rules=5)
    old = _cut_then("It is done.", "Then it ends.", settings=rules_5, second_finish="stop")
    assert _finished(decide_next(old, config=rules_5)).final_response == "It is done.Then it ends."
    # The embedded model goes on from its own text (prefilled): its parts are exact.
    local = attrs.evolve(SETTINGS, provider="local", max_turns=10)
    exact = _cut_then("It is done.", "Then", settings=local, second_finish="stop")
    assert _finished(decide_next(exact, config=local)).final_response == "It is done.Then"


def test_a_call_budget_spent_on_continuations_leaves_a_partial_answer() -> None:
    tight = attrs.evolve(SETTINGS, max_turns=2)
    state = _cut_then("It is", " not over", settings=tight)  # both calls cut at the limit
    assert next_stage(state) == "answer"
    finished = _finished(decide_next(state, config=tight))
    assert (finished.exit_reason, finished.completed) == ("incomplete_response", False)
    assert finished.final_response == "It is not over"
    rules_5 = attrs.evolve(tight, rules=5)
    old = _finished(decide_next(_cut_then("It is", " not over", settings=rules_5),
                                config=rules_5))
    assert old.completed and old.exit_reason == "text_response(finish_reason=length)"


LOCAL = attrs.evolve(SETTINGS, provider="local", max_turns=10)


def _sent(settings: ev.SessionSettings, *parts: str) -> list[tuple[str, str | None]]:
    """What the request after ``parts``, each cut at the output limit, sends."""
    state = turn(session(settings=settings))
    for part in parts:
        state = answered(state, reply(part, finish_reason="length"))
        state = then(state, decide_next(state, config=settings))
    request = decide_request(state, config=settings).next.request
    return [(m.role, m.content) for m in request.messages]


def test_the_local_model_goes_on_from_its_cut_reply_not_from_a_prompt() -> None:
    # Asked in a user message to go on, SmolLM2 started over or answered the prompt instead.
    assert _sent(LOCAL, "hey there,", " welcome to") == [
        ("user", "hello"), ("assistant", "hey there, welcome to")]


def test_other_providers_and_rules_4_are_asked_in_a_user_message() -> None:
    for settings in (SETTINGS, attrs.evolve(LOCAL, rules=4)):
        sent = _sent(settings, "hey there,")
        assert sent[1:] == [("assistant", "hey there,"), ("user", length_prompt(settings))]
    assert length_prompt(attrs.evolve(SETTINGS, rules=5)) == LENGTH_PROMPT
