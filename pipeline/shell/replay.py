"""Replay a session from its log through the live code path, with every effect served from
the log and every decision re-derived and compared."""

from __future__ import annotations

from pathlib import Path

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.shell.fork_journal import ForkAwareRunner, ForkJournal, replay_switch
from pipeline.shell.journal import EndOfLog, ReplayJournal
from pipeline.shell.runner import Effects, SessionRunner
from stages.errors import ReplayDivergenceError, UsageError
from stages.log.events import (
    CompressionRequested,
    ContextInherited,
    ContextWindowProbed,
    HistoryLoaded,
    SessionForked,
    SessionResumed,
    SessionSplit,
    SessionStarted,
    ToolsDeclared,
    TurnAborted,
    TurnStarted,
)
from stages.log.fold import fold
from stages.turn.step import decide_abandon


class _NoEffects:
    """Replay performs no effect; reaching one is a bug in the journal, not a divergence."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"replay tried to perform an effect ({name})")


@attrs.frozen(kw_only=True)
class ReplayReport:
    session_id: str
    events: int
    divergence: ReplayDivergenceError | None = None
    unfinished_tail: bool = False

    @property
    def identical(self) -> bool:
        return self.divergence is None

    def describe(self) -> str:
        if self.divergence is None:
            tail = ", the log ends inside an unfinished turn" if self.unfinished_tail else ""
            return f"identical ({self.events} events{tail})"
        d = self.divergence
        return (f"diverged at seq {d.seq} in stage {d.stage}\n"
                f"  expected: {d.expected}\n  produced: {d.produced}")


def drive(runner: SessionRunner, journal: ReplayJournal | ForkJournal) -> None:
    """Re-run the logged session ``journal`` serves, record by record, until its log ends."""
    while (envelope := journal.peek()) is not None:
        kind = envelope.kind
        if kind in (HistoryLoaded.kind, TurnStarted.kind):
            # The runner serves (and so decodes) the turn's opening observation itself.
            try:
                runner.run_turn("", history=() if kind == HistoryLoaded.kind else None)
            except EndOfLog as cut:
                if not cut.cut:
                    raise
            continue
        if kind == CompressionRequested.kind:
            runner.compress()
            continue
        if kind == TurnAborted.kind:
            runner.observe("recovery", (TurnAborted,), lambda: ())
            runner.emit("recovery", decide_abandon(runner.state))
            continue
        event = from_payload(kind, envelope.schema_version, envelope.payload)
        if isinstance(event, SessionStarted):
            runner.start(event.settings, session_id=event.session_id,
                         parent_session_id=event.parent_session_id)
        elif isinstance(event, SessionResumed):
            runner.resume(event.settings)
        elif isinstance(event, ToolsDeclared):
            runner.declare_tools(event.tools)
        elif isinstance(event, ContextWindowProbed | ContextInherited | SessionSplit
                        | SessionForked):
            runner.observe("session", (type(event),), lambda: ())
        else:
            raise ReplayDivergenceError(
                f"replay expected a session or turn start at seq {envelope.seq}",
                seq=envelope.seq, stage="session", expected=envelope.kind,
                produced="a session or turn start")


def replay(root: Path, session_id: str) -> ReplayReport:
    """Re-run ``session_id`` from its log under ``root`` (the sessions directory)."""
    path = session_path(root, session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {root}")
    envelopes = list(read_envelopes(path))
    journal = ReplayJournal(envelopes)
    effects = Effects(clock=_NoEffects(), ids=_NoEffects())  # type: ignore[arg-type]
    # Only a fork's log needs its turns watched for the switch to the fork's settings.
    forked = any(e.kind == SessionForked.kind for e in envelopes)
    runner = (ForkAwareRunner(journal, effects, switch=replay_switch) if forked
              else SessionRunner(journal, effects))
    try:
        drive(runner, journal)
    except ReplayDivergenceError as exc:
        return ReplayReport(session_id=session_id, events=journal.cursor, divergence=exc)
    except EndOfLog as end:
        logged = fold(from_payload(e.kind, e.schema_version, e.payload) for e in envelopes)
        between_history_and_turn = envelopes[-1].kind == HistoryLoaded.kind
        if not between_history_and_turn and (logged.turn is None
                                             or logged.turn.finished is not None):
            return ReplayReport(session_id=session_id, events=journal.cursor,
                                divergence=ReplayDivergenceError(
                                    f"replay went on past the log's end in stage {end.stage}",
                                    seq=len(envelopes), stage=end.stage,
                                    expected="(end of log)", produced=end.produced))
        return ReplayReport(session_id=session_id, events=journal.cursor, unfinished_tail=True)
    return ReplayReport(session_id=session_id, events=journal.cursor)
