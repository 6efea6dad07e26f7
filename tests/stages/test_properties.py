"""Hypothesis properties of the pure stages, driven by a simulated model (no I/O at all).

A tiny driver plays the part of ``pipeline.shell.runner``: it runs the same stage chain, but its
observations (turn starts, model replies, failures, interruptions, tool results) come from a
generated script. After every event the history must alternate (calls may await results); at the
end of every turn it must alternate strictly, every call must sit right before its results in
call order, the budget must hold, and the fold of the whole log must equal the state the driver
built incrementally.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from stages.decision import Decision, Finish
from stages.fold import apply_event, fold
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.state import State
from stages.turn.step import decide_abandon
from tests.stages.helpers import decide_next
from tests.strategies.replay import replayed
from tests.strategies.scripts import (
    CallStep,
    FailStep,
    ReplyStep,
    SessionScript,
    TurnScript,
    session_scripts,
)
from tests.strategies.simulation import Driver, check_pairs, drive


def check_turn(driver: Driver, script: TurnScript, events: list[ev.Event]) -> None:
    state = driver.state
    turn = state.turn
    assert turn is not None and turn.finished is not None and turn.pending == ()
    assert violations(state.messages, open_tail_ok=False) == []
    check_pairs(state.messages)
    assert fold(driver.events) == state
    # Re-issues of a failed call (resilient sessions only) do not count against the bound.
    assert turn.api_calls - driver.reissued <= driver.settings.max_turns + 1
    requested = [e for e in events if isinstance(e, ev.ModelRequested)]
    assert [e.call_index for e in requested] == list(range(len(requested)))
    assert len(requested) == turn.api_calls
    # Compression never loops: at most once before a turn, before each call, and once more
    # after an overflow of that call.
    compressed = sum(isinstance(e, ev.ContextCompressed) for e in events)
    assert compressed <= 1 + 2 * len(requested)
    summaries = [e for e in requested if e.purpose == "budget_summary"]
    assert len(summaries) <= 1 + driver.reissued
    if summaries:  # the turn's last calls: the summary, then its re-issues
        assert requested[-len(summaries):] == summaries
        assert summaries[0].call_index == driver.settings.max_turns
    finished = turn.finished
    assert events[-1] is finished
    assert sum(isinstance(e, ev.TurnFinished) for e in events) == 1
    if any(isinstance(e, ev.Interrupted) for e in events) and not _answered_first(
            events, turn, driver.settings):
        assert finished.interrupted and not finished.completed
    elif isinstance(([e for e in events if isinstance(e, ev.ModelReplied | ev.ModelFailed)]
                     or [None])[-1], ev.ModelFailed):
        # The turn's last call failed (a failure that compression recovered from is not).
        assert finished.failed and not finished.completed
    elif finished.completed:
        assert state.messages[-1].role == "assistant"
        assert finished.final_response == (state.messages[-1].content or "")
    elif finished.exit_reason == "empty_response":
        # Rules 3: an empty reply is asked again once (budget allowing), then reported.
        replies = [e for e in events if isinstance(e, ev.ModelReplied)]
        assert finished.failed and not (replies[-1].message.content or "").strip()
        assert turn.empty_retries <= 1 and len(replies) >= 1 + turn.empty_retries
    else:
        assert finished.exit_reason.startswith("max_iterations_reached")
    answered = [e.call.id for e in events if isinstance(e, ev.ToolCallRejected)]
    answered += [e.outcome.call_id for e in events if isinstance(e, ev.ToolRan)]
    asked = [c.id for e in events if isinstance(e, ev.ModelReplied) for c in e.message.tool_calls]
    assert sorted(answered) == sorted(asked)
    assert decide_next(state, config=driver.settings) == Decision(next=Finish())


def _answered_first(events, turn, config) -> bool:
    """The model's final answer had arrived when the interrupt came: the answer wins. An
    empty reply is no answer (rules 3) while the budget allows asking again."""
    cut = max(i for i, e in enumerate(events) if isinstance(e, ev.Interrupted))
    # A message steered in after an answer (rules 8) makes the model answer again.
    before = [e for e in events[:cut]
              if isinstance(e, ev.ModelReplied | ev.ToolRan | ev.ToolCallRejected | ev.Steered)]
    if not (bool(before) and isinstance(before[-1], ev.ModelReplied)
            and (turn.budget_exhausted or not before[-1].message.tool_calls)):
        return False
    message = before[-1].message
    at = events.index(before[-1])
    asked_again = (not (message.content or "").strip() and not message.tool_calls
                   and sum(isinstance(e, ev.ModelRequested) for e in events[:at])
                   < config.max_turns)
    return not asked_again


_READ = ReplyStep(content=None, calls=(CallStep(name="read", arguments="{}"),))


@settings(max_examples=150, deadline=None)
@given(session_scripts())
# An interrupt after an empty reply stops the retry of that reply (found by CI).
@example(SessionScript(max_turns=2, compression=True, turns=(TurnScript(
    user="", steps=(ReplyStep(content=None, then_interrupt=True),), tool_ok=(True,)),)))
# A server error in a session over its tiny window is taken for an overflow: compression
# recovers it, so the turn does not end failed (found by CI).
@example(SessionScript(max_turns=1, context_length=110, compression=True, turns=(
    TurnScript(user="", steps=(_READ,), tool_ok=(False,)),
    TurnScript(user="", steps=(_READ,), tool_ok=(False,)),
    TurnScript(user="", steps=(FailStep(error_type="ProviderHTTPError", message="", status=500),
                               _READ), tool_ok=(False,)))))
def test_turn_loop_keeps_alternation_budget_and_fold_equality(script: SessionScript) -> None:
    driver = drive(script, check_turn)
    assert fold(driver.events) == driver.state
    check_logs(driver, script)


def check_logs(driver: Driver, script: SessionScript) -> None:
    """Each session's log (a compression goes on in a split's child) replays through the
    session machine record for record, and folds to a state that counts its own turns,
    characters and usage; together they hold every scripted turn."""
    for log in driver.logs:
        assert replayed(log) == log
    states = [fold(log) for log in driver.logs]
    assert sum(state.turns for state in states) == len(script.turns)
    for log, state in zip(driver.logs, states, strict=True):
        assert state.history_chars == sum(m.chars for m in state.messages)
        assert state.usage == sum(
            (e.usage for e in log if isinstance(e, ev.ModelReplied)), ev.Usage())


@settings(max_examples=60, deadline=None)
@given(session_scripts(max_turns=2), st.data())
def test_abandoning_at_any_point_closes_the_turn(script: SessionScript,
                                                 data: st.DataObject) -> None:
    """A process killed after any event leaves a log whose fold, closed by ``decide_abandon``,
    alternates strictly and can take another turn."""
    events = drive(script).events
    cut = data.draw(st.integers(2, len(events)), label="cut")
    state = fold(events[:cut])
    state = fold(decide_abandon(state).events, state)
    assert violations(state.messages) == []
    check_pairs(state.messages)
    if state.turn is not None:
        assert state.turn.finished is not None and state.turn.pending == ()
    # A new process resumes the session through the session machine, which closes the turn.
    resumed = Driver.resuming(events[:cut])
    # After the resume: the abandoned turn's closing, then the sandbox probe of the new process.
    closing = [e for e in resumed.events[cut + 1:] if not isinstance(e, ev.SandboxProbed)]
    assert closing == list(decide_abandon(fold(events[:cut])).events)
    assert isinstance(resumed.events[-1], ev.SandboxProbed)
    assert resumed.state.turn is None or resumed.state.turn.finished is not None
    resumed.run_turn(99, TurnScript(user="are you there?", steps=()), None)
    assert violations(resumed.state.messages) == []
    assert replayed(resumed.events) == resumed.events


@settings(max_examples=60, deadline=None)
@given(session_scripts(max_turns=1))
def test_the_fold_is_deterministic_and_prefix_consistent(script: SessionScript) -> None:
    events = drive(script).events
    state = State()
    for index, event in enumerate(events):
        state = apply_event(state, event)
        if index % 5 == 0:
            assert fold(events[:index + 1]) == state
            assert fold(events[index + 1:], fold(events[:index + 1])) == fold(events)
