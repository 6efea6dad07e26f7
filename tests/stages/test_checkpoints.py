"""The checkpoint decision (rules 7): named examples of ``stages.tools.checkpoints`` and the
turn machine's ask, and a property over whole simulated sessions: a turn takes exactly one
checkpoint before its first call that may write, none when it has no such call."""

from __future__ import annotations

import attrs
from hypothesis import example, given, settings

from stages.decision import RestoreTree, RunTools, TakeCheckpoint
from stages.fold import fold
from stages.log import events as ev
from stages.log.tool_specs import ToolInvocation
from stages.tools.checkpoints import checkpoint_before, rollback_to, writes_tree
from tests.stages.helpers import SETTINGS, call, drive_turn, ran, reply, session, spec
from tests.stages.helpers import then as then_
from tests.stages.helpers import turn as turn_
from tests.stages.test_properties import check_turn
from tests.strategies.scripts import (
    CallStep,
    FailStep,
    ReplyStep,
    SessionScript,
    TurnScript,
    session_scripts,
)
from tests.strategies.simulation import Driver, drive

TOOLS = (spec("read", read_only=True), spec("write"), spec("clarify", interactive=True),
         spec("todo"), spec("terminal"))


def _batch(*names: str) -> RunTools:
    return RunTools(calls=tuple(ToolInvocation(call_id=f"c{i}", name=n, arguments="{}")
                                for i, n in enumerate(names)), concurrent=False, sync_first=True)


def test_what_may_write_the_tree() -> None:
    kinds = {s.name: writes_tree(s) for s in TOOLS}
    assert kinds == {"read": False, "write": True, "clarify": False, "todo": False,
                     "terminal": True}
    # A tool mibyan does not know is taken to write.
    assert writes_tree(spec("deploy"))


def test_the_first_writing_batch_of_a_turn_asks_for_the_turns_checkpoint() -> None:
    state = turn_(turn_(session(*TOOLS)), index=1)
    assert checkpoint_before(state, _batch("read", "write"), config=SETTINGS) == TakeCheckpoint(
        turn=2)


def test_no_checkpoint_for_a_batch_that_cannot_write() -> None:
    state = turn_(session(*TOOLS))
    assert checkpoint_before(state, _batch("read", "clarify", "todo"), config=SETTINGS) is None


def test_one_checkpoint_per_turn_even_a_failed_one() -> None:
    state = then_(turn_(session(*TOOLS)), ev.Checkpointed(turn=1, tree="/t", error="no git"))
    assert checkpoint_before(state, _batch("write"), config=SETTINGS) is None
    # The next turn asks again; the failed one is nothing to roll back to.
    assert checkpoint_before(turn_(state, index=1), _batch("write"),
                             config=SETTINGS) == TakeCheckpoint(turn=2)
    assert state.checkpoints == ()


def test_sessions_under_rules_6_take_none() -> None:
    old = attrs.evolve(SETTINGS, rules=6)
    state = turn_(session(*TOOLS, settings=old))
    assert checkpoint_before(state, _batch("write"), config=old) is None


def test_rollback_goes_to_the_named_turn_or_the_latest() -> None:
    state = then_(session(*TOOLS),
                  ev.Checkpointed(turn=1, tree="/t", commit="a" * 40, files=2),
                  ev.Checkpointed(turn=2, tree="/t", error="tree unreadable"),
                  ev.Checkpointed(turn=3, tree="/t", commit="c" * 40, files=3))
    assert rollback_to(state, 1) == RestoreTree(turn=1, tree="/t", commit="a" * 40)
    assert rollback_to(state, None) == RestoreTree(turn=3, tree="/t", commit="c" * 40)
    assert rollback_to(state, 2) == RestoreTree(turn=2)  # its checkpoint failed
    assert rollback_to(state, 9) == RestoreTree(turn=9)


def test_the_turn_machine_asks_before_the_tools_and_not_again() -> None:
    """Write, then write again: one checkpoint, between the plan and the first run."""
    w1, w2 = call("c1", "write"), call("c2", "write")
    replies = iter((reply(None, w1), reply(None, w2), reply("done")))

    def serve(ask, state):  # type: ignore[no-untyped-def]
        effect = ask.effect
        if type(effect).__name__ in ("BeginTurn",):
            return (ev.TurnStarted(turn_id="t", task_id="k", started_at="t1",
                                   user_message="go"),)
        if isinstance(effect, TakeCheckpoint):
            return (ev.Checkpointed(turn=effect.turn, tree="/t", commit="a" * 40),)
        if isinstance(effect, RunTools):
            pending = {c.id: c for c in state.turn.pending}
            return tuple(ran(pending[c.call_id]) for c in effect.calls)
        if type(effect).__name__ == "CallModel":
            return (next(replies),)
        return ()

    seen, state = drive_turn(session(*TOOLS), serve)
    stages = [stage for stage, _ in seen]
    assert stages.count("checkpoint") == 1
    first_run = stages.index("tools")
    assert stages.index("checkpoint") == first_run - 1
    assert state.checkpoints[0].turn == 1 and state.turn.finished.completed


def _writers(state_tools: tuple, log: list[ev.Event]) -> set[str]:
    names = {s.name: s for s in state_tools}
    calls = {c.id: c.name for e in log if isinstance(e, ev.ModelReplied)
             for c in e.message.tool_calls}
    return {i for i, n in calls.items() if n in names and writes_tree(names[n])}


def check_checkpoints(driver: Driver, events: list[ev.Event]) -> None:
    """Exactly one checkpoint in a turn that ran a call that may write, taken before that
    call ran; none in a turn with no such call planned."""
    if not driver.settings.rule_set.checkpoints:
        assert not any(isinstance(e, ev.Checkpointed) for e in events)
        return
    writers = _writers(driver.state.tools, events)
    marks = [i for i, e in enumerate(events) if isinstance(e, ev.Checkpointed)]
    planned = [i for i, e in enumerate(events)
               if isinstance(e, ev.ToolsPlanned) and writers & set(e.call_ids)]
    wrote = [i for i, e in enumerate(events)
             if isinstance(e, ev.ToolRan) and e.outcome.call_id in writers]
    assert len(marks) <= 1
    if not planned:
        assert marks == []
    if wrote:
        assert len(marks) == 1 and planned[0] < marks[0] < wrote[0]
        assert events[marks[0]].turn == driver.state.turns


def _steered_on_a_tiny_window() -> SessionScript:
    """Found by hypothesis: a message steered in after a call, on a 50-token window, arrives
    behind the dropped-middle marker in the same user message."""
    failed = FailStep(error_type="ProviderHTTPError", message="", status=None,
                      retry_after=None, partial=False)
    called = ReplyStep(content=None, calls=(CallStep(name="read", arguments="{}"),),
                       reasoning=None, then_interrupt=False)
    return SessionScript(max_turns=1, history=(("", ""),), context_length=50, window=None,
                         turns=(TurnScript(user="", steps=(failed,), tool_ok=(False,)),
                                TurnScript(user="", steps=(called,), tool_ok=(False,),
                                           steer_at_poll=0)))


@settings(max_examples=80, deadline=None)
@given(session_scripts(sessions=True))
@example(_steered_on_a_tiny_window())
def test_every_turn_takes_one_checkpoint_before_its_first_write(script: SessionScript) -> None:
    def check(driver: Driver, turn_script: object, events: list[ev.Event]) -> None:
        check_turn(driver, turn_script, events)  # type: ignore[arg-type]
        check_checkpoints(driver, events)

    driver = drive(script, check)
    assert fold(driver.events) == driver.state
