"""The journal of a fork: it replays a prefix of another session's log, then goes on live.

A fork's log holds the origin's first records (re-derived and compared, then copied with their
own ``recorded_at``, under the fork's id), then live records, and a ``SessionForked`` record
with the settings the fork goes on with: between turns (the session machine's ``ForkSwitch``),
or inside a turn at its next step (the poll at the top of the turn machine's loop, where the
turn takes up the state's settings), so every step after it runs under the new settings. A
replay of the fork serves it at the same point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from effects.eventlog.envelope import Envelope
from effects.eventlog.store import SessionLog
from effects.protocols import Clock
from pipeline.shell.journal import LiveJournal, Perform, ReplayJournal, encode
from stages.errors import UsageError
from stages.log.events import Event, SessionStarted


@attrs.define
class ForkJournal:
    """Replays ``prefix`` (every decision compared, every observation served) into the fork's
    ``log``, then records live. Seq 0 is served with the fork's own session id."""

    prefix: Sequence[Envelope]
    log: SessionLog
    clock: Clock
    session_id: str
    secrets: Any = ()
    replay: ReplayJournal = attrs.field(init=False)
    live: LiveJournal = attrs.field(init=False)
    # The record just made was the origin's: a listener has heard it already, from the origin.
    replayed: bool = attrs.field(init=False, default=False)

    def __attrs_post_init__(self) -> None:
        self.replay = ReplayJournal(self.prefix)
        self.live = LiveJournal(self.log, self.clock, self.secrets)

    @property
    def cursor(self) -> int:
        return self.replay.cursor

    @property
    def in_prefix(self) -> bool:
        return self.replay.cursor < len(self.prefix)

    def peek(self) -> Envelope | None:
        return self.replay.peek()

    def record(self, stage: str, event: Event) -> None:
        self.replayed = self.in_prefix
        if not self.in_prefix:
            self.live.record(stage, event)
            return
        envelope = self.prefix[self.replay.cursor]
        self.replay.record(stage, event)
        if envelope.seq == 0:  # the fork's own start: its id, in today's schema
            self.log.append(event.kind, event.schema_version, encode(event), envelope.recorded_at)
        else:
            self.log.append(envelope.kind, envelope.schema_version, envelope.payload,
                            envelope.recorded_at)

    def observe(self, stage: str, kinds: tuple[str, ...], count: int,
                perform: Perform) -> Sequence[Event]:
        left = len(self.prefix) - self.replay.cursor
        if left <= 0:
            return self.live.observe(stage, kinds, count, perform)
        if left < count:
            first = self.prefix[self.replay.cursor].seq
            raise UsageError(
                f"a fork cannot begin inside a batch of observations (seq {first} to "
                f"{first + count - 1}, {', '.join(kinds)}); fork at seq {first} or "
                f"{first + count}")
        events = list(self.replay.observe(stage, kinds, count, perform))
        if self.replay.cursor == 0 and isinstance(events[0], SessionStarted):
            own = attrs.evolve(events[0], session_id=self.session_id)
            del self.replay._served[0]
            self.replay._served[0] = own
            events[0] = own
        return events

    def observe_if(self, stage: str, kinds: tuple[str, ...],
                   perform: Callable[[], Event | None]) -> Event | None:
        if self.in_prefix:
            return self.replay.observe_if(stage, kinds, perform)
        return self.live.observe_if(stage, kinds, perform)

    def sync(self) -> None:
        self.live.sync()
