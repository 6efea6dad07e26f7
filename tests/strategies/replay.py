"""A pure replay of one session's log through the session machine (``stages.session.machine``),
as ``pipeline.shell.replay`` does with a ``ReplayJournal``, minus the codec: every observation is
served from the log, every record is re-derived and compared, and the commands the machine waits
for are read off the log (``pipeline.shell.replay.next_command``). Where the live process
stopped a command (``TURN_CUTS``: a resume, an aborted turn), the replay cuts it there too.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from stages.fold import apply_event
from stages.log import events as ev
from stages.log.state import State
from stages.session.machine import Await, Command, Cut, End, Opening, run_session
from stages.turn.machine import Perform, Record

__all__ = ["Replay", "replayed"]


@attrs.frozen
class _Envelope:
    kind: str
    seq: int


class _CutHere(Exception):
    """The log holds a turn cut where the replay asked for something else."""


class Replay:
    """Serves every observation from ``log`` and checks every record against it; the commands
    come off the log as ``pipeline.shell.replay`` reads them, and a command the log cuts short
    is cut (as ``pipeline.shell.journal.ReplayJournal`` does)."""

    def __init__(self, log: Sequence[ev.Event]) -> None:
        self.log, self.cursor = list(log), 0

    def peek(self, ahead: int = 0) -> ev.Event | None:
        index = self.cursor + ahead
        return self.log[index] if index < len(self.log) else None

    def take(self, kinds: tuple[str, ...]) -> ev.Event:
        event = self.peek()
        assert event is not None, f"the log ended where the replay asked for {kinds}"
        if event.kind in ev.TURN_CUTS and event.kind not in kinds:
            raise _CutHere
        assert event.kind in kinds, (self.cursor, event, kinds)
        self.cursor += 1
        return event

    def command(self) -> Command:
        # Imported here: the stages' own tests need the shell only for this one reading.
        from pipeline.shell.replay import next_command
        nxt = self.peek()
        return End() if nxt is None else next_command(_Envelope(kind=nxt.kind, seq=self.cursor))

    def serve(self, ask: Record | Perform) -> list[ev.Event]:
        """What ``ask`` records or observes, as the log holds it."""
        if isinstance(ask, Record):
            for event in ask.events:
                assert self.take((event.kind,)) == event, (self.cursor - 1, event)
            return list(ask.events)
        if ask.optional:
            nxt = self.peek()
            return [self.take(ask.kinds)] if nxt is not None and nxt.kind in ask.kinds else []
        # A batch the log cuts part way gives the results it holds (as the journal); the turn's
        # next ask meets the cut.
        taken: list[ev.Event] = []
        for _ in range(ask.count):
            try:
                taken.append(self.take(ask.kinds))
            except _CutHere:
                if not taken:
                    raise
                break
        return taken


def replayed(log: Sequence[ev.Event]) -> list[ev.Event]:
    """The log a replay of ``log`` produces: records re-derived, observations served; a record
    that differs from the logged one fails there."""
    source, out, state, opened_at = Replay(log), [], State(), 0
    flow = run_session(Opening())
    ask = next(flow)
    while True:
        if isinstance(ask, Await):
            command = source.command()
            opened_at = source.cursor
        else:
            before = source.cursor
            try:
                events = source.serve(ask)
            except _CutHere:
                assert source.cursor > opened_at, f"nothing of the command replayed at {before}"
                # The part of a record taken before the cut stays (it is in the log).
                for event in source.log[before:source.cursor]:
                    state = apply_event(state, event)
                    out.append(event)
                ask = flow.throw(Cut())
                continue
            for event in events:
                state = apply_event(state, event)
                out.append(event)
            command = state
        try:
            ask = flow.send(command)
        except StopIteration:
            # The log ended (``End``), or the session went on in a split's child here.
            assert source.cursor == len(log), (source.cursor, len(log))
            return out
