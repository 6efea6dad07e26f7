"""The imperative shell of one session: runs the stage chain, performs effects through the
journal, folds every event into the state. Live runs and replays take this same path."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import attrs

from effects.protocols import CancelToken, Clock, DeltaSink, IdSource, ModelClient
from effects.tool_runner import ToolRunner
from pipeline.journal import EndOfLog, Journal
from stages.backoff import backoff_delay
from stages.chain import PRE_CALL_STAGES
from stages.decision import (
    CallModel,
    Decision,
    Finish,
    ModelRequest,
    Next,
    PrepareCall,
    RefreshCredential,
    RunTools,
    Wait,
)
from stages.errors import LogError, MibyanError, ModelBehaviourError, ProviderError
from stages.events import (
    ClockRead,
    CredentialRefreshed,
    Event,
    HistoryLoaded,
    Interrupted,
    ModelFailed,
    ModelReplied,
    SessionResumed,
    SessionSettings,
    SessionStarted,
    ToolRan,
    ToolsDeclared,
    TurnAborted,
    TurnStarted,
    Waited,
)
from stages.fold import apply_event
from stages.hints import decide_hints
from stages.messages import Message
from stages.prompt import decide_prompt
from stages.request import decide_request
from stages.state import State
from stages.step import decide_abandon, decide_next
from stages.tools import ToolSpec

INTERRUPT_POLL_SECONDS = 0.02


@attrs.define
class Effects:
    """The effect implementations a live session uses (a replay uses none of them)."""

    clock: Clock
    ids: IdSource
    model: ModelClient | None = None
    tools: ToolRunner | None = None
    # Renews a pooled key after an auth failure; True when it got a new one.
    refresh: Callable[[str], bool] | None = None


def _failure(exc: ProviderError | ModelBehaviourError, elapsed: float) -> ModelFailed:
    """A provider failure as plain facts the classifier can read (and replay can serve)."""
    body = getattr(exc, "body", None)
    return ModelFailed(error_type=type(exc).__name__, message=str(exc),
                       status=getattr(exc, "status", None), latency_ms=round(elapsed * 1000, 3),
                       code=getattr(exc, "code", None), body=body[:2000] if body else None,
                       retry_after=getattr(exc, "retry_after", None),
                       rate_limits=getattr(exc, "rate_limits", ()),
                       partial=getattr(exc, "partial", False))


class SessionRunner:
    def __init__(self, journal: Journal, effects: Effects, *, state: State | None = None,
                 interrupt: threading.Event | None = None,
                 listener: Callable[[Event], None] | None = None) -> None:
        self.journal = journal
        self.listener = listener
        self.effects = effects
        self.state = State() if state is None else state
        self.interrupt = interrupt or threading.Event()

    # --- plumbing ---------------------------------------------------------------------------
    def _fold(self, events: Sequence[Event]) -> None:
        for event in events:
            self.state = apply_event(self.state, event)
            if self.listener is not None:
                self.listener(event)

    def emit(self, stage: str, decision: Decision) -> Next | None:
        for event in decision.events:
            self.journal.record(stage, event)
            self._fold((event,))
        return decision.next

    def observe(self, stage: str, kinds: tuple[type, ...], perform: Callable[[], Sequence[Event]],
                count: int = 1) -> None:
        names = tuple(k.kind for k in kinds)
        self._fold(self.journal.observe(stage, names, count, perform))

    @property
    def settings(self) -> SessionSettings:
        assert self.state.settings is not None, "session not started"
        return self.state.settings

    # --- session ----------------------------------------------------------------------------
    def start(self, settings: SessionSettings, *, parent_session_id: str | None = None,
              session_id: str | None = None) -> None:
        clock, ids = self.effects.clock, self.effects.ids
        self.observe("session", (SessionStarted,), lambda: (SessionStarted(
            session_id=session_id or ids.session_id(), started_at=clock.now(), settings=settings,
            parent_session_id=parent_session_id),))

    def resume(self, settings: SessionSettings) -> None:
        """Continue a folded session in a new process; close a turn a crash left open."""
        self.observe("session", (SessionResumed,), lambda: (SessionResumed(resumed_at=self.effects.clock.now(),
                                                        settings=settings),))
        self.emit("recovery", decide_abandon(self.state))

    def declare_tools(self, specs: tuple[ToolSpec, ...]) -> None:
        if specs != self.state.tools:
            self.observe("session", (ToolsDeclared,), lambda: (ToolsDeclared(tools=specs),))

    # --- one turn ---------------------------------------------------------------------------
    def run_turn(self, user_message: str, *, system_message: str | None = None,
                 history: tuple[Message, ...] | None = None, task_id: str | None = None,
                 on_delta: DeltaSink | None = None) -> State:
        ids, clock = self.effects.ids, self.effects.clock
        if history is not None:
            self.observe("input", (HistoryLoaded,), lambda: (HistoryLoaded(messages=history),))
        self.observe("input", (TurnStarted,), lambda: (TurnStarted(
            turn_id=ids.new_id(), task_id=task_id or ids.new_id(), started_at=clock.now(),
            user_message=user_message, system_message=system_message),))
        try:
            self._drive_turn(on_delta)
        except BaseException as exc:
            self._abort(exc)
            raise
        self.journal.sync()
        return self.state

    def _drive_turn(self, on_delta: DeltaSink | None) -> None:
        config = self.settings
        self.emit("hints", decide_hints(self.state, config=config))
        self.emit("prompt", decide_prompt(self.state, (), config=config))
        while True:
            self._poll_interrupt("between_steps")
            step = self.emit("step", decide_next(self.state, config=self.settings))
            if isinstance(step, Finish):
                return
            if isinstance(step, PrepareCall):
                self._prepare_and_call(on_delta)
            elif isinstance(step, RunTools):
                self._run_tools(step)
            elif isinstance(step, Wait):
                self.observe("backoff", (Waited, Interrupted), lambda s=step: (self._wait(s),))
            elif isinstance(step, RefreshCredential):
                self.observe("credentials", (CredentialRefreshed,),
                             lambda s=step: (self._refresh(s.credential_id),))

    def _abort(self, exc: BaseException) -> None:
        """Close a turn an exception broke, so the session's next turn starts clean. If even
        the log cannot take that, the next process to resume closes it instead."""
        if isinstance(exc, (EndOfLog, LogError)) or self.state.turn is None:
            return
        if self.state.turn.finished is not None:
            return
        try:
            error = f"{type(exc).__name__}: {exc}"
            self.observe("recovery", (TurnAborted,), lambda: (TurnAborted(error=error),))
            self.emit("recovery", decide_abandon(self.state))
            self.journal.sync()
        except Exception:  # noqa: BLE001 - the original exception is the one to report
            pass

    def _poll_interrupt(self, during: str) -> None:
        def perform() -> Event | None:
            if not self.interrupt.is_set():
                return None
            self.interrupt.clear()
            return Interrupted(during=during)
        event = self.journal.observe_if("interrupt", Interrupted.kind, perform)
        if event is not None:
            self._fold((event,))

    def _wait(self, step: Wait) -> Event:
        """Sleep the backoff in short slices so that an interrupt cuts it short."""
        jitter = self.effects.ids.fraction()
        seconds = backoff_delay(step.attempt, jitter=jitter, retry_after=step.retry_after,
                                base=self.settings.retry_base_delay)
        deadline = self.effects.clock.monotonic() + seconds
        while (left := deadline - self.effects.clock.monotonic()) > 0:
            if self.interrupt.is_set():
                self.interrupt.clear()
                return Interrupted(during="backoff")
            self.effects.clock.sleep(min(left, INTERRUPT_POLL_SECONDS))
        return Waited(seconds=round(seconds, 6), jitter=jitter)

    def _refresh(self, credential_id: str) -> Event:
        refresh = self.effects.refresh
        return CredentialRefreshed(credential_id=credential_id,
                                   refreshed=bool(refresh and refresh(credential_id)))

    def _prepare_and_call(self, on_delta: DeltaSink | None) -> None:
        if self.settings.needs_clock:
            self.observe("clock", (ClockRead,),
                         lambda: (ClockRead(epoch=self.effects.clock.epoch()),))
        for name, stage in PRE_CALL_STAGES:
            self.emit(name, stage(self.state, config=self.settings))
        call = self.emit("request", decide_request(self.state, config=self.settings))
        assert isinstance(call, CallModel)
        self.observe("model_call", (ModelReplied, ModelFailed, Interrupted),
                     lambda: (self._call_model(call.request, on_delta),))

    def _call_model(self, request: ModelRequest, on_delta: DeltaSink | None) -> Event:
        """The call runs on a worker thread; this thread waits for it or for an interrupt,
        which closes the in-flight response and returns at once (the reply is discarded)."""
        model = self.effects.model
        if model is None:
            raise MibyanError("this session has no model client")
        cancel = CancelToken()
        outcome: list[Event | BaseException] = []
        started = self.effects.clock.monotonic()

        def deliver(delta: str) -> None:
            if on_delta is not None and not cancel.cancelled:
                on_delta(delta)

        # Without a sink nothing reaches the user, so a dropped stream stays retryable.
        sink = deliver if on_delta is not None else None

        def work() -> None:
            try:
                outcome.append(model.complete(request, on_delta=sink, cancel=cancel))
            except (ProviderError, ModelBehaviourError) as exc:
                outcome.append(_failure(exc, self.effects.clock.monotonic() - started))
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=work, name="mibyan-model-call", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(INTERRUPT_POLL_SECONDS)
            if self.interrupt.is_set() and worker.is_alive():
                cancel.cancel()
                self.interrupt.clear()
                return Interrupted(during="model_call")
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _run_tools(self, step: RunTools) -> None:
        if step.sync_first:
            self.journal.sync()

        def perform() -> Sequence[Event]:
            if self.effects.tools is None:
                raise MibyanError("this session has no tool runner")
            assert self.state.turn is not None
            outcomes = self.effects.tools.run(step.calls, concurrent=step.concurrent,
                                              task_id=self.state.turn.task_id)
            return [ToolRan(outcome=o) for o in outcomes]
        self.observe("tools", (ToolRan,), perform, count=len(step.calls))
