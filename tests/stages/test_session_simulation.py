"""Whole sessions through the session machine, under hypothesis (``tests.strategies.simulation``
with ``sessions=True``): the session opens through the machine, compresses now, reopens, resumes
in a new process after a crash at any point of a turn, switches to a fork's settings between
turns and at a turn's poll, aborts a turn it cut, and goes on in a split's child; resilient ones
retry, back off, refresh and rotate keys, fall back, ask for approvals and recall memory on the
way. Every check of the turn simulation holds, and every session's log replays through the
machine record for record, with the commands read off the log.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import event, example, given, settings

from stages.fold import fold
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.messages import canonical_json
from tests.stages.test_properties import check_logs, check_turn
from tests.strategies.replay import replayed
from tests.strategies.scripts import (
    CallStep,
    ReplyStep,
    Resilience,
    SessionScript,
    TurnScript,
    session_scripts,
)
from tests.strategies.simulation import Driver, check_pairs, drive

Logs = list[list[ev.Event]]


def _any(kind: type, test: Callable[[ev.Event], bool] = lambda e: True) -> Callable[[Logs], bool]:
    return lambda logs: any(isinstance(e, kind) and test(e) for log in logs for e in log)


def _inside_a_turn(log: list[ev.Event], at: int) -> bool:
    starts = [i for i, e in enumerate(log[:at]) if isinstance(e, ev.TurnStarted)]
    return bool(starts) and not any(isinstance(e, ev.TurnFinished) for e in log[starts[-1]:at])


def _forked(inside: bool) -> Callable[[Logs], bool]:
    return lambda logs: any(isinstance(e, ev.SessionForked) and _inside_a_turn(log, i) == inside
                            for log in logs for i, e in enumerate(log))


PATHS = {
    "crash, then a new process resumes": _any(
        ev.TurnFinished, lambda e: e.exit_reason == "abandoned"),
    "abort": _any(ev.TurnAborted),
    "reopen or resume": _any(ev.SessionResumed),
    "fork inside a turn": _forked(True),
    "fork between turns": _forked(False),
    "compress now": _any(ev.CompressionRequested),
    "split": _any(ev.SessionSplit),
    "window probed": _any(ev.ContextWindowProbed),
    "backoff": _any(ev.Waited),
    "approval": _any(ev.ApprovalAnswered),
    "fallback": _any(ev.RecoveryDecided, lambda e: e.action == "fallback"),
}
"""The session paths a run may take; ``--hypothesis-show-statistics`` counts them."""


def check_session(driver: Driver, script: SessionScript) -> None:
    """Every session's log replays and folds to a closed history; a split's child starts from
    its parent's split; each stop left its mark; every completed answer went to memory."""
    assert fold(driver.events) == driver.state
    check_logs(driver, script)
    for log in driver.logs:
        state = fold(log)
        assert violations(state.messages) == []
        check_pairs(state.messages)
        assert state.turn is None or state.turn.finished is not None
    for parent, child in zip(driver.logs, driver.logs[1:], strict=False):
        split, start = parent[-1], child[0]
        assert isinstance(split, ev.SessionSplit) and isinstance(start, ev.SessionStarted)
        assert (split.child_session_id, start.parent_session_id) == (
            start.session_id, parent[0].session_id)
        assert isinstance(child[1], ev.ContextInherited)
    everything = [e for log in driver.logs for e in log]
    aborted = sum(isinstance(e, ev.TurnAborted) for e in everything)
    assert aborted == driver.stops.count("abort")
    abandoned = sum(isinstance(e, ev.TurnFinished) and e.exit_reason == "abandoned"
                    for e in everything)
    assert abandoned >= driver.stops.count("crash") + aborted
    completed = [e for e in everything if isinstance(e, ev.TurnFinished) and e.completed
                 and e.final_response]
    assert [answer for _, answer in driver.synced] == [e.final_response for e in completed]
    for path, reached in PATHS.items():
        if reached(driver.logs):
            event(path)


_READ2 = ReplyStep(content=None, calls=(CallStep(name="read", arguments='{"path":"a"}'),
                                        CallStep(name="read", arguments='{"path":"b"}')))


@settings(max_examples=100, deadline=None)
@given(session_scripts(sessions=True))
# A fork takes up its settings at the turn's second poll; the next turn is aborted at its tools.
@example(SessionScript(max_turns=3, turns=(
    TurnScript(user="go", steps=(_READ2,), fork_at_poll=1),
    TurnScript(user="again", steps=(_READ2,), stop_at=8, stop="abort"))))
# The process dies right after the turn started; the next one compresses now (and splits).
@example(SessionScript(max_turns=2, context_length=400, turns=(
    TurnScript(user="go " * 40, steps=(_READ2,)),
    TurnScript(user="more", steps=(_READ2,), stop_at=1),
    TurnScript(user="last", steps=(), before=("compress", "fork", "reopen", "resume")))))
def test_moving_sessions_keep_every_check_and_replay_from_their_logs(
        script: SessionScript) -> None:
    check_session(drive(script, check_turn), script)


@settings(max_examples=80, deadline=None)
@given(session_scripts(max_turns=2, resilient=True, sessions=True))
@example(SessionScript(max_turns=2, window=900, turns=(
    TurnScript(user="go", steps=(_READ2,), before=("fork",), stop_at=12, stop="abort"),
    TurnScript(user="again", steps=(_READ2,), fork_at_poll=0, before=("resume",))),
    resilience=Resilience(max_retries=2, chain=(("p", "m", 2), ("q", "m-q", 1)), refresh=True,
                          strategy="round_robin", memory=True, clock_step=5.0)))
def test_moving_resilient_sessions_keep_every_check_and_replay_from_their_logs(
        script: SessionScript) -> None:
    check_session(drive(script, check_turn), script)


def test_a_session_resumed_inside_a_tool_batch_replays() -> None:
    """A process killed between two results of one batch of tool runs: the session resumes and
    goes on, and its log replays (the results the batch holds are folded, then the turn is cut;
    this failed when the replay cut the batch before them)."""
    log = drive(SessionScript(max_turns=3, turns=(TurnScript(user="go", steps=(_READ2,)),))).events
    first = next(i for i, e in enumerate(log) if isinstance(e, ev.ToolRan))
    resumed = Driver.resuming(log[:first + 1])
    assert replayed(resumed.events) == resumed.events


def test_a_kill_during_a_sequential_batch_leaves_the_later_calls_never_started() -> None:
    """Three writes of one path run one after another; the process dies after the first
    result. Measured before rules 8: the whole batch was planned at once, so the two calls that
    never ran were reported "started, outcome unknown" (25 of 42 cut-off calls from outside)."""
    writes = ReplyStep(content=None, calls=tuple(
        CallStep(name="write", arguments=f'{{"path":"a","n":{n}}}') for n in range(3)))
    log = drive(SessionScript(max_turns=3, turns=(TurnScript(user="go", steps=(writes,)),))).events
    planned = [e.call_ids for e in log if isinstance(e, ev.ToolsPlanned)]
    assert [len(ids) for ids in planned] == [1, 1, 1]
    first = next(i for i, e in enumerate(log) if isinstance(e, ev.ToolRan))
    resumed = Driver.resuming(log[:first + 2])  # the second call's plan is durable, not its result
    rejected = [(e.call.id, e.reason) for e in resumed.events
                if isinstance(e, ev.ToolCallRejected)]
    assert [reason for _, reason in rejected] == ["abandoned_started", "abandoned"]
    assert replayed(resumed.events) == resumed.events

def _terminal(command: str) -> CallStep:
    return CallStep(name="terminal", arguments=canonical_json({"command": command}))


def test_a_disguised_delete_asks_a_root_delete_is_blocked_and_the_session_replays() -> None:
    """A scripted model calls terminal with ``r\\m -rf ./src`` (the regex table let it run
    unasked) and ``rm -rf //`` (the table only asked): the first waits for an approval, the
    second is blocked, and the log replays record for record."""
    reply = ReplyStep(content=None, calls=(_terminal(r"r\m -rf ./src"), _terminal("rm -rf //")))
    script = SessionScript(max_turns=2, turns=(
        TurnScript(user="tidy up", steps=(reply,), approvals=("deny",)),),
        resilience=Resilience(max_retries=0, chain=(("p", "m", 1),), refresh=False,
                              strategy="fill_first", memory=False, clock_step=1.0))
    driver = drive(script, check_turn)
    log = driver.events
    asked = [e for e in log if isinstance(e, ev.ApprovalAnswered)]
    assert [(a.pattern, a.choice) for a in asked] == [("recursive_delete", "deny")]
    rejected = {e.call.arguments: (e.reason, e.content) for e in log
                if isinstance(e, ev.ToolCallRejected)}
    reason, content = rejected[canonical_json({"command": "rm -rf //"})]
    assert reason == "blocked" and "rm_root" in content
    assert rejected[canonical_json({"command": r"r\m -rf ./src"})][0] == "denied"
    assert not any(isinstance(e, ev.ToolRan) for e in log)
    assert replayed(log) == log
