"""The machinery of a fork: a runner that can switch settings between two decisions of a turn,
and a journal that replays a prefix of another session's log and then goes on live.

A fork's log holds the origin's first records (re-derived and compared, then copied with their
own ``recorded_at``, under the fork's id), then live records, and a ``SessionForked`` record
with the settings the fork goes on with: between turns, or inside a turn at its next step (the
poll at the top of the turn machine's loop, where the turn takes up the state's settings), so
every step after it runs under the new settings. A replay of the fork folds it at the same
point (``ForkAwareRunner`` with ``replay_switch``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from effects.eventlog.envelope import Envelope
from effects.eventlog.store import SessionLog
from effects.protocols import Clock
from pipeline.shell.journal import LiveJournal, Perform, ReplayJournal, encode
from pipeline.shell.runner import SessionRunner
from stages.errors import UsageError
from stages.log.events import Event, SessionForked, SessionStarted
from stages.turn import machine as turn
from stages.turn.decision import PollInterrupt

Switch = Callable[[SessionRunner, Any], bool]


def between_steps(ask: Any) -> bool:
    """The turn machine's poll at the top of its loop: where a turn takes up new settings."""
    return isinstance(ask, turn.Perform) and isinstance(ask.effect, PollInterrupt) \
        and ask.effect.during == "between_steps"


class _Guarded:
    """The turn machine, with ``switch`` shown each ask before the runner handles it (so a
    record folded then is in the state the machine gets back for that ask)."""

    def __init__(self, flow: turn.Flow, runner: SessionRunner, switch: Switch) -> None:
        self.flow, self.runner, self.switch = flow, runner, switch

    def __iter__(self) -> _Guarded:
        return self

    def __next__(self) -> Any:
        ask = next(self.flow)
        self.switch(self.runner, ask)
        return ask

    def send(self, state: Any) -> Any:
        ask = self.flow.send(state)
        self.switch(self.runner, ask)
        return ask


class ForkAwareRunner(SessionRunner):
    """A ``SessionRunner`` whose turns let ``switch`` record a ``SessionForked`` between two
    steps (it returns True when it did)."""

    def __init__(self, journal: Any, effects: Any, *, switch: Switch, **options: Any) -> None:
        super().__init__(journal, effects, **options)
        self.switch = switch

    def _interpret(self, flow: turn.Flow) -> None:
        guarded = _Guarded(flow, self, self.switch)
        super()._interpret(guarded)  # type: ignore[arg-type]


def replay_switch(runner: SessionRunner, ask: Any = None) -> bool:
    """In a replay: fold the log's ``SessionForked`` where the live fork recorded it."""
    del ask
    journal = runner.journal
    envelope = journal.peek() if isinstance(journal, ReplayJournal | ForkJournal) else None
    if envelope is None or envelope.kind != SessionForked.kind:
        return False
    runner.observe("fork", (SessionForked,), lambda: ())
    return True


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

    def observe_if(self, stage: str, kind: str,
                   perform: Callable[[], Event | None]) -> Event | None:
        if self.in_prefix:
            return self.replay.observe_if(stage, kind, perform)
        return self.live.observe_if(stage, kind, perform)

    def sync(self) -> None:
        self.live.sync()


def live_switch(make: Callable[[SessionRunner], SessionForked]) -> Switch:
    """In the live fork: once the prefix is replayed, record ``SessionForked`` (once) at the
    next step of the turn (or, called with no ask, between turns); within the prefix, fold the
    origin's own ``SessionForked`` records where they are."""
    done: list[bool] = []

    def switch(runner: SessionRunner, ask: Any = None) -> bool:
        journal = runner.journal
        assert isinstance(journal, ForkJournal)
        if replay_switch(runner):  # the origin is a fork itself
            return True
        if done or journal.in_prefix or (ask is not None and not between_steps(ask)):
            return False
        done.append(True)
        forked = make(runner)
        runner.observe("fork", (SessionForked,), lambda: (forked,))
        return True
    return switch
