"""The imperative shell of one session: the interpreter of the session machine
(``stages.session.machine``). It performs what the machine asks through the journal (live: the
performers of ``effects.performers``; a replay: the log), folds every event into the state and
sends the state back; between commands it waits for the caller's next one. ``steps`` runs a
command one machine step at a time (``Agent.iter``); ``command`` runs it to its end."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import attrs

from effects.model_call import failure
from effects.performers import Performers
from pipeline.shell.journal import EndOfLog, Journal
from stages.decision import CallModel, Decision, Effect, Next
from stages.errors import EventEncodingError, LogError, ModelBehaviourError
from stages.fold import apply_event
from stages.log.events import Event
from stages.log.state import State
from stages.session.machine import Abort, Await, Command, Cut, Opening, SessionFlow, run_session
from stages.turn.machine import Perform, Record

__all__ = ["SessionRunner", "Step"]


@attrs.frozen
class Step:
    """One step of the machine, done: the stage that asked, the effect performed (None when
    the stage only decided) and the events it appended to the log."""

    stage: str
    effect: Effect | None
    events: tuple[Event, ...]


class SessionRunner:
    def __init__(self, journal: Journal, performers: Performers | None, *,
                 state: State | None = None,
                 listener: Callable[[Event], None] | None = None) -> None:
        self.journal = journal
        self.performers = performers
        self.listener = listener
        # Told of each ask before it is performed (tools about to run, an approval awaited).
        self.on_ask: Callable[[Record | Perform], None] | None = None
        self.state = State() if state is None else state
        self._flow: SessionFlow = run_session(None)
        # The machine returned: the session ended here, or went on in a split's child.
        self.ended = False

    # --- the caller's side ------------------------------------------------------------------
    def open(self, opening: Opening) -> State:
        """Start or resume the session, up to its first command."""
        self._flow = run_session(opening)
        self._drive(lambda: next(self._flow))
        self.journal.sync()
        return self.state

    def command(self, command: Command) -> State:
        """Run one command (a turn, a compression, ...) to its end. A command an exception
        stopped is cut: an open turn is closed (``TurnAborted``), so the next one starts clean;
        if even the log cannot take that, the next process to resume closes it instead."""
        steps = self.steps(command)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def steps(self, command: Command) -> Generator[Step, None, State]:
        """``command`` one step at a time (each step is done and logged when it is yielded);
        returns the state at its end. Closed part way, or stopped by an exception, the command
        is cut as ``command`` says."""
        if self.ended:
            raise LogError("this session went on in another session")
        try:
            ask = self._flow.send(command)
            while not isinstance(ask, Await):
                assert isinstance(ask, Record | Perform), ask
                if self.on_ask is not None:
                    self.on_ask(ask)
                appended = [self._append_observed(ask, event) for event in self._events(ask)]
                yield Step(ask.stage, ask.effect if isinstance(ask, Perform) else None,
                           tuple(appended))
                ask = self._flow.send(self.state)
        except StopIteration:
            self.ended = True
        except BaseException as exc:
            self._cut(exc)
            raise
        self.journal.sync()
        return self.state

    def emit(self, stage: str, decision: Decision) -> Next | None:
        for event in decision.events:
            self._append(stage, event)
        return decision.next

    # --- the interpreter --------------------------------------------------------------------
    def _drive(self, first: Callable[[], object]) -> None:
        """Record what the machine decides and perform what it asks, until it waits for a
        command or ends."""
        try:
            ask = first()
            while not isinstance(ask, Await):
                assert isinstance(ask, Record | Perform), ask
                for event in self._events(ask):
                    self._append_observed(ask, event)
                ask = self._flow.send(self.state)
        except StopIteration:
            self.ended = True

    def _events(self, ask: Record | Perform) -> Sequence[Event]:
        if isinstance(ask, Record):
            return ask.events
        if ask.optional:
            maybe = self.journal.observe_if(ask.stage, ask.kinds, lambda: self._perform_one(ask))
            return () if maybe is None else (maybe,)
        return self.journal.observe(ask.stage, ask.kinds, ask.count,
                                    lambda: self._perform(ask))

    def _perform(self, ask: Perform) -> Sequence[Event]:
        assert self.performers is not None, f"replay tried to perform an effect ({ask.effect})"
        return self.performers.perform(ask.effect, self.state)

    def _perform_one(self, ask: Perform) -> Event | None:
        events = self._perform(ask)
        assert len(events) <= 1, events
        return events[0] if events else None

    def _append(self, stage: str, event: Event) -> Event:
        """Fold first, then record: an event the fold cannot take never reaches the log."""
        state = apply_event(self.state, event)
        self.journal.record(stage, event)
        self.state = state
        if self.listener is not None:
            self.listener(event)
        return event

    def _append_observed(self, ask: Record | Perform, event: Event) -> Event:
        try:
            return self._append(ask.stage, event)
        except EventEncodingError as exc:
            if not (isinstance(ask, Perform) and isinstance(ask.effect, CallModel)):
                raise
            # A reply the log could not read back is a failed call (a format error), not a
            # crash; nothing of it was appended.
            unreadable = ModelBehaviourError(f"the provider's reply cannot be recorded: {exc}")
            return self._append(ask.stage,
                                failure(unreadable, getattr(event, "latency_ms", 0) / 1000))

    def _cut(self, exc: BaseException) -> None:
        """Back to waiting for a command; then close a turn the exception left open."""
        try:
            self._flow.throw(Cut())
        except StopIteration:
            self.ended = True
        except Cut:  # it stopped outside a command, or the machine itself raised: a new one
            self._flow = run_session(None)
            next(self._flow)
        turn = self.state.turn
        if isinstance(exc, EndOfLog | LogError) or turn is None or turn.finished is not None:
            return
        try:
            self._drive(lambda: self._flow.send(Abort(error=f"{type(exc).__name__}: {exc}")))
            self.journal.sync()
        except Exception:
            self._flow = run_session(None)
            next(self._flow)
