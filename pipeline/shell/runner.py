"""The imperative shell of one session: runs the stage chain, performs effects through the
journal, folds every event into the state. Live runs and replays take this same path."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from effects.logs import get_logger
from effects.prompt_files import ContextSource
from effects.protocols import CancelToken, Clock, DeltaSink, IdSource, ModelClient
from effects.tools.runner import ToolRunner
from effects.workers import submit
from pipeline.shell import context_calls as context
from pipeline.shell.approval import Approver
from pipeline.shell.journal import EndOfLog, Journal
from stages.context import compress_now
from stages.errors import (
    EventEncodingError,
    LogError,
    MibyanError,
    ModelBehaviourError,
    ProviderError,
)
from stages.log.events import (
    ApprovalAnswered,
    ClockRead,
    CompressionRequested,
    CredentialRefreshed,
    Event,
    HintsRead,
    HistoryLoaded,
    Interrupted,
    MemoryPrefetched,
    ModelFailed,
    PromptInputsRead,
    SessionResumed,
    SessionSettings,
    SessionStarted,
    ToolRan,
    ToolsDeclared,
    TurnAborted,
    TurnStarted,
    Waited,
)
from stages.log.fold import apply_event
from stages.log.messages import Message
from stages.log.state import State
from stages.recovery.backoff import backoff_delay
from stages.tools.specs import ToolSpec
from stages.turn import machine as turn
from stages.turn.decision import (
    AskApproval,
    BeginTurn,
    CallModel,
    Decision,
    LoadHistory,
    ModelRequest,
    Next,
    PollInterrupt,
    PrefetchMemory,
    ReadClock,
    ReadHints,
    ReadPromptInputs,
    RefreshCredential,
    RequestCompression,
    RunTools,
    Summarise,
    Wait,
)
from stages.turn.step import decide_abandon

INTERRUPT_POLL_SECONDS = 0.02

log = get_logger(__name__)


@attrs.define
class Effects:
    """The effect implementations a live session uses (a replay uses none of them)."""

    clock: Clock
    ids: IdSource
    model: ModelClient | None = None
    tools: ToolRunner | None = None
    # Renews a pooled key after an auth failure; True when it got a new one.
    refresh: Callable[[str], bool] | None = None
    # Answers approvals of dangerous commands (``pipeline.shell.approval.Approver``); None denies.
    approver: Approver | None = None
    # Reads the prompt's inputs and hint files (None: there are none to read).
    context: ContextSource | None = None
    # The memory providers (``pipeline.memory.MemoryManager``) a turn's prefetch asks.
    memory: Any = None
    # Asks the provider how large a model's window is
    # (``pipeline.shell.context_calls.WindowProbe``).
    window_probe: Callable[[str, str | None], tuple[int, str] | None] | None = None


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
        self._on_delta: DeltaSink | None = None
        self._on_reasoning: DeltaSink | None = None
        # The shell is an interpreter: one performer per effect the turn machine asks for.
        self._performers: dict[type, Callable[[Any], Sequence[Event]]] = {
            LoadHistory: lambda e: (HistoryLoaded(messages=e.messages),),
            BeginTurn: self._begin,
            PollInterrupt: self._poll,
            ReadClock: lambda e: (ClockRead(epoch=self.effects.clock.epoch()),),
            CallModel: lambda e: (self._call_model(e.request, self._on_delta,
                                                   self._on_reasoning),),
            Wait: lambda e: (self._wait(e),),
            RefreshCredential: lambda e: (self._refresh(e.credential_id),),
            RunTools: self._run_tools,
            AskApproval: lambda e: (self._approve(e),),
            ReadPromptInputs: lambda e: (self._read_inputs(),),
            ReadHints: lambda e: (self._read_hints(e),),
            PrefetchMemory: lambda e: (self._prefetch(e),),
            Summarise: functools.partial(context.perform_summary, self),
            RequestCompression: lambda e: (
                CompressionRequested(requested_at=self.effects.clock.now()),),
        }

    # --- plumbing ---------------------------------------------------------------------------
    def _append(self, stage: str, event: Event) -> None:
        """Fold first, then record: an event the fold cannot take never reaches the log."""
        state = apply_event(self.state, event)
        self.journal.record(stage, event)
        self.state = state
        if self.listener is not None:
            self.listener(event)

    def emit(self, stage: str, decision: Decision) -> Next | None:
        for event in decision.events:
            self._append(stage, event)
        return decision.next

    def observe(self, stage: str, kinds: tuple[Any, ...], perform: Callable[[], Sequence[Event]],
                count: int = 1) -> None:
        names = tuple(k.kind for k in kinds)
        for event in self.journal.observe(stage, names, count, perform):
            self._append(stage, event)

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
        self.observe("session", (SessionResumed,), lambda: (SessionResumed(
            resumed_at=self.effects.clock.now(), settings=settings),))
        self.emit("recovery", decide_abandon(self.state))

    def declare_tools(self, specs: tuple[ToolSpec, ...]) -> None:
        if specs != self.state.tools:
            self.observe("session", (ToolsDeclared,), lambda: (ToolsDeclared(tools=specs),))

    # --- one turn ---------------------------------------------------------------------------
    def run_turn(self, user_message: str, *, system_message: str | None = None,
                 history: tuple[Message, ...] | None = None, task_id: str | None = None,
                 on_delta: DeltaSink | None = None, on_reasoning: DeltaSink | None = None,
                 reasoning_effort: str | None = None,
                 reasoning_budget: int | None = None) -> State:
        flow = turn.run_turn(user_message, system_message=system_message, history=history,
                             task_id=task_id, reasoning_effort=reasoning_effort,
                             reasoning_budget=reasoning_budget)
        self._on_delta, self._on_reasoning = on_delta, on_reasoning
        try:
            self._interpret(flow)
        except BaseException as exc:
            self._abort(exc)
            raise
        finally:
            self._on_delta = self._on_reasoning = None
        self.journal.sync()
        return self.state

    def compress(self) -> State:
        """Compress the context now, between turns (the user asked: ``/compress``)."""
        self._interpret(compress_now.run_compression())
        self.journal.sync()
        return self.state

    def _interpret(self, flow: turn.Flow) -> None:
        """Drive the turn machine: record what it decides, perform what it asks."""
        ask = next(flow)
        while True:
            if isinstance(ask, turn.Record):
                events: Sequence[Event] = ask.events
            elif ask.optional:
                maybe = self.journal.observe_if(ask.stage, ask.kinds[0],
                                                functools.partial(self._perform_optional, ask))
                events = () if maybe is None else (maybe,)
            else:
                events = self.journal.observe(ask.stage, ask.kinds, ask.count,
                                             functools.partial(self._perform, ask))
            for event in events:
                self._append_observed(ask, event)
            try:
                ask = flow.send(self.state)
            except StopIteration:
                return

    def _append_observed(self, ask: turn.Perform | turn.Record, event: Event) -> None:
        try:
            self._append(ask.stage, event)
        except EventEncodingError as exc:
            if not (isinstance(ask, turn.Perform) and isinstance(ask.effect, CallModel)):
                raise
            # A reply the log could not read back is a failed call (a format error), not a
            # crash; nothing of it was appended.
            unreadable = ModelBehaviourError(f"the provider's reply cannot be recorded: {exc}")
            self._append(ask.stage, _failure(unreadable, getattr(event, "latency_ms", 0) / 1000))

    def _perform(self, ask: turn.Perform) -> Sequence[Event]:
        return self._performers[type(ask.effect)](ask.effect)

    def _perform_optional(self, ask: turn.Perform) -> Event | None:
        return next(iter(self._perform(ask)), None)

    def _begin(self, effect: BeginTurn) -> Sequence[Event]:
        ids, clock = self.effects.ids, self.effects.clock
        return (TurnStarted(turn_id=ids.new_id(), task_id=effect.task_id or ids.new_id(),
                            started_at=clock.now(), user_message=effect.user_message,
                            system_message=effect.system_message,
                            reasoning_effort=effect.reasoning_effort,
                            reasoning_budget=effect.reasoning_budget),)

    def _poll(self, effect: PollInterrupt) -> Sequence[Event]:
        if not self.interrupt.is_set():
            return ()
        self.interrupt.clear()
        return (Interrupted(during=effect.during),)

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
        except Exception:
            pass

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

    def call_model(self, request: ModelRequest) -> Event:
        """A model call outside the turn's own (the compression summary), same path."""
        return self._call_model(request, None)

    def _call_model(self, request: ModelRequest, on_delta: DeltaSink | None,
                    on_reasoning: DeltaSink | None = None) -> Event:
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
        # Only a caller that listens for reasoning asks for it: other clients keep working.
        extra = {} if on_reasoning is None else {"on_reasoning": _guarded(on_reasoning, cancel)}

        def work() -> None:
            try:
                outcome.append(model.complete(request, on_delta=sink, cancel=cancel, **extra))
            except (ProviderError, ModelBehaviourError) as exc:
                outcome.append(_failure(exc, self.effects.clock.monotonic() - started))
            except AssertionError as exc:  # a broken invariant or a strict test double: loud
                outcome.append(exc)
            except Exception as exc:
                log.error("model_client_failed", error=f"{type(exc).__name__}: {exc}",
                          exc_info=True)
                unusable = ModelBehaviourError(
                    f"the model client failed on this call: {type(exc).__name__}: {exc}")
                outcome.append(_failure(unusable, self.effects.clock.monotonic() - started))
            except BaseException as exc:
                outcome.append(exc)

        # A reused worker thread: starting one per call cost about 0.17 ms.
        job = submit(work, name="mibyan-model-call")
        while not job.wait(INTERRUPT_POLL_SECONDS):
            if self.interrupt.is_set() and not job.done.is_set():
                cancel.cancel()
                self.interrupt.clear()
                return Interrupted(during="model_call")
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _approve(self, ask: AskApproval) -> Event:
        if self.effects.approver is None:
            return ApprovalAnswered(call_id=ask.call_id, pattern=ask.pattern, choice="deny",
                                    source="default", reason="no approval callback is configured")
        return self.effects.approver.answer(ask)
    def _read_inputs(self) -> Event:
        context = self.effects.context
        return PromptInputsRead() if context is None else context.read_inputs()

    def _read_hints(self, effect: ReadHints) -> Event:
        context = self.effects.context
        if context is None:
            return HintsRead(dirs=effect.dirs)
        return context.read_hints(effect.dirs, effect.cwd)

    def _prefetch(self, effect: PrefetchMemory) -> Event:
        memory = self.effects.memory
        if memory is None:
            return MemoryPrefetched()
        return memory.prefetch_all(effect.query, session_id=self.state.session_id or "")

    def _run_tools(self, step: RunTools) -> Sequence[Event]:
        if self.effects.tools is None:
            raise MibyanError("this session has no tool runner")
        if step.sync_first:
            # The intent to run a tool that changes things is durable before it starts.
            self.journal.sync()
        assert self.state.turn is not None
        outcomes = self.effects.tools.run(step.calls, concurrent=step.concurrent,
                                          task_id=self.state.turn.task_id)
        return [ToolRan(outcome=o) for o in outcomes]


def _guarded(sink: DeltaSink, cancel: CancelToken) -> DeltaSink:
    """``sink``, silent once the call was cancelled (the reply is discarded)."""
    def deliver(delta: str) -> None:
        if not cancel.cancelled:
            sink(delta)
    return deliver
