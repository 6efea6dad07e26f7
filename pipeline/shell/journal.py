"""Journals: where the runner's events go. The same runner code drives both.

* ``LiveJournal`` performs effects, redacts what they return, appends every event to the
  session's log.
* ``ReplayJournal`` never performs an effect: it serves each observation from the log, and
  compares every decision the stages re-derive with the logged one; the first difference is a
  ``ReplayDivergenceError`` with its sequence number, stage, and both events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import attrs

from effects.eventlog.codec import from_payload, to_payload
from effects.eventlog.envelope import Envelope
from effects.eventlog.store import SessionLog
from effects.protocols import Clock
from pipeline.shell.plain_payload import plain_payload
from pipeline.shell.redacted import RedactedHistory, history_payload
from stages.errors import EventEncodingError, LogError, ReplayDivergenceError
from stages.log.events import TURN_CUTS, Event, HistoryLoaded, ModelReplied
from stages.log.messages import unique_call_ids
from stages.log.redact import redact_event

Perform = Callable[[], Sequence[Event]]


class Journal(Protocol):
    def record(self, stage: str, event: Event) -> None:
        """Append ``event`` (live), or check it against the log (replay)."""
        ...

    def observe(self, stage: str, kinds: tuple[str, ...], count: int,
                perform: Perform) -> Sequence[Event]:
        """``count`` observations of ``kinds``: performed live, served from the log in replay.
        The caller folds and then records each one."""
        ...

    def observe_if(self, stage: str, kinds: tuple[str, ...],
                   perform: Callable[[], Event | None]) -> Event | None:
        """One observation of ``kinds`` that may or may not happen here (an interrupt)."""
        ...

    def sync(self) -> None: ...


def encode(event: Event) -> dict:
    """The event's payload, checked to read back as the same event."""
    fast = history_payload(event) if type(event) is HistoryLoaded else plain_payload(event)
    if fast is not None:
        return fast
    payload = to_payload(event)
    try:
        back = from_payload(event.kind, event.schema_version, payload)
    except LogError as exc:
        raise EventEncodingError(f"a {event.kind} event cannot be read back: {exc}") from exc
    if back != event:
        raise EventEncodingError(f"a {event.kind} event changes when read back: {event!r}")
    return payload


def _clean(event: Event) -> Event:
    if isinstance(event, ModelReplied):
        message = unique_call_ids(event.message)
        if message is not event.message:
            return attrs.evolve(event, message=message)
    return event


class LiveJournal:
    def __init__(self, log: SessionLog, clock: Clock, secrets: Iterable[str] = (),
                 history: RedactedHistory | None = None) -> None:
        self.log = log
        self.clock = clock
        self.secrets = secrets
        # An agent shares one across its sessions: a compression's child gets the same history.
        self.history = RedactedHistory() if history is None else history

    def _redacted(self, event: Event) -> Event:
        if isinstance(event, HistoryLoaded):
            return self.history.redact(event, self.secrets)
        return redact_event(event, self.secrets)

    def record(self, stage: str, event: Event) -> None:
        del stage
        self.log.add(event.kind, event.schema_version, encode(event), self.clock.now())

    def observe(self, stage: str, kinds: tuple[str, ...], count: int,
                perform: Perform) -> Sequence[Event]:
        events = [_clean(self._redacted(e)) for e in perform()]
        if len(events) != count:
            raise AssertionError(f"{stage}: expected {count} observations, got {len(events)}")
        return events

    def observe_if(self, stage: str, kinds: tuple[str, ...],
                   perform: Callable[[], Event | None]) -> Event | None:
        event = perform()
        return None if event is None else self.observe(stage, kinds, 1, lambda: (event,))[0]

    def sync(self) -> None:
        self.log.sync()


class EndOfLog(Exception):
    """The replay needs an event the log does not have here: the log ends, or (``cut``)
    the live turn stopped at this point (its process died, or the turn raised)."""

    def __init__(self, stage: str, produced: str, *, cut: bool = False) -> None:
        super().__init__(f"the log ended before stage {stage} produced {produced}")
        self.stage = stage
        self.produced = produced
        self.cut = cut


def _one_of(kinds: tuple[str, ...]) -> str:
    return f"one of {', '.join(kinds)}"


def _text(payload: dict) -> str:
    return json.dumps(payload, sort_keys=True, ensure_ascii=False)


@attrs.define
class ReplayJournal:
    expected: Sequence[Envelope]
    cursor: int = 0
    # Observations served from the log, by seq: recording one is only moving past it.
    _served: dict[int, Event] = attrs.field(factory=dict)

    @property
    def remaining(self) -> int:
        return len(self.expected) - self.cursor

    def peek(self) -> Envelope | None:
        return self.expected[self.cursor] if self.cursor < len(self.expected) else None

    def _next(self, stage: str, kinds: tuple[str, ...], ahead: int = 0,
              produced: str | None = None) -> Envelope:
        """The envelope ``ahead`` of the cursor; ``produced`` (by default "one of ``kinds``",
        written only when it is needed) names what the replay wanted when the log ends."""
        index = self.cursor + ahead
        envelope = self.expected[index] if index < len(self.expected) else None
        if envelope is None:
            raise EndOfLog(stage, produced or _one_of(kinds))
        if envelope.kind in TURN_CUTS and envelope.kind not in kinds:
            raise EndOfLog(stage, produced or _one_of(kinds), cut=True)
        return envelope

    def record(self, stage: str, event: Event) -> None:
        envelope = self.peek()
        if envelope is not None and self._served.pop(envelope.seq, None) is event:
            self.cursor += 1
            return
        payload = to_payload(event)
        if envelope is None or (envelope.kind in TURN_CUTS and envelope.kind != event.kind):
            self._next(stage, (event.kind,), produced=f"{event.kind} {_text(payload)}")  # raises
        assert envelope is not None
        # Same kind and version: the payloads compare as plain data, with no decoding.
        if (envelope.kind == event.kind and envelope.schema_version == event.schema_version
                and envelope.payload == payload):
            self.cursor += 1
            return
        logged = from_payload(envelope.kind, envelope.schema_version, envelope.payload)
        if logged != event:
            raise ReplayDivergenceError(
                f"replay diverged at seq {envelope.seq} in stage {stage}", seq=envelope.seq,
                stage=stage, expected=f"{logged.kind} {_text(to_payload(logged))}",
                produced=f"{event.kind} {_text(payload)}")
        self.cursor += 1

    def observe(self, stage: str, kinds: tuple[str, ...], count: int,
                perform: Perform) -> Sequence[Event]:
        del perform
        events: list[Event] = []
        for ahead in range(count):
            try:
                envelope = self._next(stage, kinds, ahead)
            except EndOfLog as end:
                if end.cut and events:
                    # A batch the process stopped part way (it was killed between two
                    # results): the results the log holds are folded, and what the turn asks
                    # next meets the cut.
                    return events
                if not end.cut:
                    # The log ends inside a batch (a tool batch cut part way): the observations
                    # it holds were read and checked, so they count as replayed.
                    self.cursor += ahead
                raise
            if envelope.kind not in kinds:
                raise ReplayDivergenceError(
                    f"replay diverged at seq {envelope.seq} in stage {stage}", seq=envelope.seq,
                    stage=stage, expected=f"{envelope.kind} {_text(envelope.payload)}",
                    produced=_one_of(kinds))
            event = from_payload(envelope.kind, envelope.schema_version, envelope.payload)
            self._served[envelope.seq] = event
            events.append(event)
        return events

    def observe_if(self, stage: str, kinds: tuple[str, ...],
                   perform: Callable[[], Event | None]) -> Event | None:
        envelope = self.peek()
        del perform
        if envelope is None or envelope.kind not in kinds:
            return None
        return self.observe(stage, kinds, 1, lambda: ())[0]

    def sync(self) -> None:
        return None
