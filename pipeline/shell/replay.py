"""Replay a session from its log through the live code path, with every effect served from the
log and every decision re-derived and compared. The session machine runs as it ran live; the
commands it waited for (a turn, a compression, ...) are read off the log."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs

from effects.eventlog.codec import from_payload
from effects.eventlog.envelope import Envelope
from effects.eventlog.store import read_envelopes, session_path
from effects.images import BlobStore
from pipeline.shell.fork_journal import ForkJournal
from pipeline.shell.journal import EndOfLog, ReplayJournal
from pipeline.shell.runner import SessionRunner
from stages.errors import ReplayDivergenceError, UsageError
from stages.fold import fold
from stages.log.events import (
    ApprovalsDecided,
    CompressionRequested,
    HistoryLoaded,
    SessionForked,
    SessionResumed,
    ToolsDeclared,
    TreeRestored,
    TurnAborted,
    TurnStarted,
)
from stages.session.machine import (
    Abort,
    Command,
    Compress,
    Decide,
    End,
    ForkSwitch,
    Opening,
    Reopen,
    RollBack,
    Turn,
)


@attrs.frozen(kw_only=True)
class ReplayReport:
    session_id: str
    events: int
    divergence: ReplayDivergenceError | None = None
    unfinished_tail: bool = False
    # Stored images the log refers to that the home's blob store no longer holds: the replay
    # needs none of them (events hold references), but a fork going on live or an export does.
    missing_images: tuple[str, ...] = ()

    @property
    def identical(self) -> bool:
        return self.divergence is None

    def describe(self) -> str:
        if self.divergence is None:
            tail = ", the log ends inside an unfinished turn" if self.unfinished_tail else ""
            if self.missing_images:
                tail += (f"; {len(self.missing_images)} image(s) missing from the blob store ("
                         + ", ".join(f"sha256:{h[:16]}" for h in self.missing_images)
                         + "): a fork or an export of this session cannot send them")
            return f"identical ({self.events} events{tail})"
        d = self.divergence
        return (f"diverged at seq {d.seq} in stage {d.stage}\n"
                f"  expected: {d.expected}\n  produced: {d.produced}")


# The command that opens with each kind of record; the rest are asked for inside commands.
_COMMANDS: dict[str, Command] = {
    HistoryLoaded.kind: Turn(user_message="", history=()),
    TurnStarted.kind: Turn(user_message=""),
    CompressionRequested.kind: Compress(),
    # A turn that waited for approvals goes on with the decisions the log holds.
    ApprovalsDecided.kind: Decide(),
    TurnAborted.kind: Abort(error=""),
    # The log serves the rollback's outcome: a replay never touches the tree.
    TreeRestored.kind: RollBack(),
    SessionResumed.kind: Reopen(),
    SessionForked.kind: ForkSwitch(),
    ToolsDeclared.kind: ForkSwitch(),  # a fork's own tools, after a turn that switched
}


def next_command(envelope: Envelope | None) -> Command:
    """The command the log holds next (``End`` where it ends)."""
    if envelope is None:
        return End()
    command = _COMMANDS.get(envelope.kind)
    if command is None:
        raise ReplayDivergenceError(
            f"replay expected a session or turn start at seq {envelope.seq}",
            seq=envelope.seq, stage="session", expected=envelope.kind,
            produced="a session or turn start")
    return command


def drive(runner: SessionRunner, journal: ReplayJournal | ForkJournal) -> None:
    """Re-run the logged session ``journal`` serves, command by command, until its log ends
    (the session then waits for a command) or the session went on in a split's child."""
    runner.open(Opening())
    while not runner.ended:
        command = next_command(journal.peek())
        if isinstance(command, End):
            return
        at = journal.cursor
        try:
            runner.command(command)
        except EndOfLog as cut:
            if not cut.cut:
                raise
            if journal.cursor == at:  # the command took nothing: the log cannot open it
                raise ReplayDivergenceError(
                    f"replay could not start {type(command).__name__} at seq {at}", seq=at,
                    stage="session", expected=cut.produced, produced=type(command).__name__
                ) from cut
    if (envelope := journal.peek()) is not None:
        raise ReplayDivergenceError(
            f"the session went on in a child session before seq {envelope.seq}",
            seq=envelope.seq, stage="session", expected=envelope.kind, produced="(end of log)")


def logged_images(envelopes: Iterable[Envelope]) -> tuple[str, ...]:
    """The hashes of the stored images the log's turns and loaded histories refer to."""
    found: dict[str, None] = {}
    for envelope in envelopes:  # read off the payloads: a replay decodes them once already
        if envelope.kind == TurnStarted.kind:
            parts = envelope.payload.get("images") or ()
        elif envelope.kind == HistoryLoaded.kind:
            parts = [p for m in envelope.payload.get("messages") or ()
                     if isinstance(m.get("content"), list) for p in m["content"]]
        else:
            continue
        found.update((p["sha256"], None) for p in parts if p.get("sha256"))
    return tuple(found)


def replay(root: Path, session_id: str) -> ReplayReport:
    """Re-run ``session_id`` from its log under ``root`` (the sessions directory); the report
    names the stored images of the session that the home (``root``'s parent) has lost."""
    path = session_path(root, session_id)
    if not path.exists():
        raise UsageError(f"no session {session_id!r} under {root}")
    envelopes = list(read_envelopes(path))
    store = BlobStore.in_home(root.parent)
    missing = tuple(h for h in logged_images(envelopes) if not store.has(h))
    report = _replayed(session_id, envelopes)
    return attrs.evolve(report, missing_images=missing) if missing else report


def _replayed(session_id: str, envelopes: list[Envelope]) -> ReplayReport:
    journal = ReplayJournal(envelopes)
    runner = SessionRunner(journal, None)
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
