"""The performers: one for each effect the turn and session machines ask for
(``stages.decision``). The shell's interpreter (``pipeline.shell.runner``) only looks
the performer up, journals what it returns and folds it.

A new effect is three edits: its type in ``stages.decision``, the ask in a machine, and its
performer here (or, for an effect that needs the shell, one it gives: ``Performers.split``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from effects.images import BlobStore, sendable_request
from effects.logs import get_logger
from effects.masked_stream import MaskedStream
from effects.model_call import INTERRUPT_POLL_SECONDS, call_model
from effects.prompt_files import ContextSource
from effects.protocols import Approvals, Clock, DeltaSink, IdSource, ModelClient
from effects.steering import SteeringQueue
from effects.tools.checkpoints import CheckpointError, TreeCheckpoints
from effects.tools.executor import ToolRunner
from effects.tools.processes import reap_orphans
from effects.tools.sandbox import Probe, SandboxPolicy, probe
from stages import decision as d
from stages.errors import MibyanError
from stages.log.events import (
    ApprovalAnswered,
    ApprovalsDecided,
    Checkpointed,
    ClockRead,
    CompressionRequested,
    ContextInherited,
    ContextSummarised,
    ContextWindowProbed,
    CredentialRefreshed,
    Event,
    HintsRead,
    HistoryLoaded,
    Interrupted,
    MemoryPrefetched,
    ModelFailed,
    ModelReplied,
    OutputChecked,
    PromptInputsRead,
    SandboxProbed,
    SessionForked,
    SessionResumed,
    SessionSettings,
    SessionSplit,
    SessionStarted,
    Steered,
    SummaryFailed,
    ToolRan,
    ToolsDeclared,
    TreeRestored,
    TurnAborted,
    TurnStarted,
    Waited,
)
from stages.log.state import State
from stages.prompt.untrusted import boundary, screened_outcome
from stages.recovery.backoff import backoff_delay
from stages.tools.checkpoints import rollback_to

log = get_logger(__name__)

# Answers how large a model's window is: (model, base_url) -> (tokens, source), or None.
WindowProbe = Callable[[str, str | None], tuple[int, str] | None]


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
    approver: Approvals | None = None
    # Reads the prompt's inputs and hint files (None: there are none to read).
    context: ContextSource | None = None
    # The memory providers (``pipeline.memory_providers.MemoryManager``) a turn's prefetch asks.
    memory: Any = None
    # Asks the provider how large a model's window is.
    window_probe: WindowProbe | None = None
    # Checkpoints of the working tree the tools change (None: none are kept).
    checkpoints: TreeCheckpoints | None = None


Performer = Callable[[Any, State], Sequence[Event]]


class Performers:
    """The live performers of one session. What the caller adds: the home (for the memory
    providers), its blob store (an agent's, shared by all its sessions), a toolset with state,
    the context a split's child inherits, the split itself, and a fork's switch."""

    def __init__(self, effects: Effects, *, interrupt: threading.Event,
                 sync: Callable[[], None], home: Path | None = None,
                 blobs: BlobStore | None = None, toolset: Any = None,
                 inherit: ContextInherited | None = None,
                 split: Callable[[d.SplitSession, State], SessionSplit] | None = None,
                 steering: SteeringQueue | None = None) -> None:
        self.effects = effects
        self.interrupt = interrupt
        self.sync = sync
        self.home = home
        # Where the session's images are kept; they are put back into requests at send time.
        if blobs is None and home is not None:
            blobs = BlobStore.in_home(home)
        self.blobs = blobs
        self.toolset = toolset
        self.inherit = inherit
        self.split = split
        self.steering = steering
        self.fork_switch: Callable[[State], SessionForked] | None = None
        self.on_delta: DeltaSink | None = None
        self.on_reasoning: DeltaSink | None = None
        # The check of this turn's answer against its output type (``pipeline.output_check``).
        self.output_check: Callable[[str], OutputChecked] | None = None
        clock = effects.clock
        self.table: dict[type, Performer] = {
            d.LoadHistory: lambda e, s: (HistoryLoaded(messages=e.messages),),
            d.BeginTurn: self._begin,
            d.PollInterrupt: self._poll,
            d.ReadClock: lambda e, s: (ClockRead(epoch=clock.epoch()),),
            d.CallModel: lambda e, s: (self.call_model(e.request, self.on_delta,
                                                       self.on_reasoning),),
            d.Wait: self._wait,
            d.RefreshCredential: self._refresh,
            d.RunTools: self._run_tools,
            d.AskApproval: self._approve,
            d.DecideApprovals: lambda e, s: (ApprovalsDecided(answers=e.answers),),
            d.ReadPromptInputs: self._read_inputs,
            d.ReadHints: self._read_hints,
            d.PrefetchMemory: self._prefetch,
            d.Summarise: self._summarise,
            d.RequestCompression: lambda e, s: (CompressionRequested(requested_at=clock.now()),),
            d.StartSession: self._start,
            d.ResumeSession: lambda e, s: (SessionResumed(resumed_at=clock.now(),
                                                          settings=e.settings),),
            d.InheritContext: lambda e, s: () if self.inherit is None else (self.inherit,),
            d.DeclareTools: lambda e, s: (
                () if e.tools is None or e.tools == s.tools else (ToolsDeclared(tools=e.tools),)),
            d.RestoreTools: self._restore,
            d.StartMemory: self._start_memory,
            d.ProbeWindow: self._probe,
            d.ProbeSandbox: self._probe_sandbox,
            d.SplitSession: lambda e, s: () if self.split is None else (self.split(e, s),),
            d.SyncMemory: self._sync_memory,
            d.AbortTurn: lambda e, s: (TurnAborted(error=e.error),),
            d.SwitchSettings: self._switch,
            d.TakeCheckpoint: self._checkpoint,
            d.RestoreTree: self._restore_tree,
            d.CheckOutput: self._check_output,
        }

    def perform(self, effect: object, state: State) -> Sequence[Event]:
        return self.table[type(effect)](effect, state)

    def call_model(self, request: d.ModelRequest, on_delta: DeltaSink | None = None,
                   on_reasoning: DeltaSink | None = None) -> Event:
        try:
            request = sendable_request(request, self.blobs)
            return call_model(self.effects.model, request, clock=self.effects.clock,
                              interrupt=self.interrupt, on_delta=on_delta,
                              on_reasoning=on_reasoning)
        finally:
            for sink in (on_delta, on_reasoning):
                if isinstance(sink, MaskedStream):  # the reply is whole: its held-back end
                    sink.flush()

    # --- the session ------------------------------------------------------------------------
    def _start(self, effect: d.StartSession, state: State) -> Sequence[Event]:
        assert effect.settings is not None, "a live start names its settings"
        session_id = effect.session_id or self.effects.ids.session_id()
        code = boundary(session_id) if effect.settings.rule_set.untrusted_marked else None
        return (SessionStarted(session_id=session_id, started_at=self.effects.clock.now(),
                               settings=effect.settings, data_boundary=code,
                               parent_session_id=effect.parent_session_id),)

    def _restore(self, effect: d.RestoreTools, state: State) -> Sequence[Event]:
        restore = getattr(self.toolset, "restore", None)
        if restore is not None:
            restore(state.messages)
        return ()

    def _start_memory(self, effect: d.StartMemory, state: State) -> Sequence[Event]:
        memory = self.effects.memory
        if memory is not None:
            assert state.settings is not None and state.session_id is not None
            memory.initialize(state.session_id, home=self.home, platform=state.settings.platform)
        return ()

    def _sync_memory(self, effect: d.SyncMemory, state: State) -> Sequence[Event]:
        memory = self.effects.memory
        if memory is not None:
            memory.sync_all(effect.user_message, effect.answer,
                            session_id=state.session_id or "")
        return ()

    def _probe(self, effect: d.ProbeWindow, state: State) -> Sequence[Event]:
        """The provider's own answer, when it gives one; a failing probe is no answer."""
        probe = self.effects.window_probe
        if probe is None:
            return ()
        try:
            answer = probe(effect.model, effect.base_url)
        except Exception as exc:  # a probe is a hint: the table and the default remain
            log.info("context_window_probe_failed", error=f"{type(exc).__name__}: {exc}")
            return ()
        if answer is None:
            return ()
        tokens, source = answer
        return (ContextWindowProbed(provider=effect.provider, model=effect.model, tokens=tokens,
                                    source=source),)

    def _probe_sandbox(self, effect: d.ProbeSandbox, state: State) -> Sequence[Event]:
        """Reap what killed processes left in the home; hand the session's policy to the
        toolset that runs commands; whether its sandbox starts (recorded under rules 7)."""
        settings = state.settings
        assert settings is not None
        if self.home is not None:
            reap_orphans(self.home)
        if self.fork_switch is not None:
            # A fork opening past its origin's records: its own settings come with the switch,
            # which confines the tools (its decisions go by the origin's recorded probe).
            return ()
        outcome = self._confine(settings)
        if not settings.rule_set.unconfined_asks:
            return ()
        return (SandboxProbed(mode=settings.sandbox, confined=outcome.started,
                              detail=outcome.detail),)

    def _confine(self, settings: SessionSettings) -> Probe:
        policy = SandboxPolicy(mode=settings.sandbox, network=settings.network, home=self.home,
                               env_exclude=settings.env_exclude, env_keep=settings.env_keep)
        confine = getattr(self.toolset, "confine", None)
        if confine is not None:
            return confine(policy)
        return probe() if policy.confining else Probe(False, "full access")

    def _switch(self, effect: d.SwitchSettings, state: State) -> Sequence[Event]:
        switch, self.fork_switch = self.fork_switch, None
        if switch is None:
            return ()
        forked = switch(state)
        self._confine(forked.settings)
        return (forked,)

    # --- the working tree -------------------------------------------------------------------
    def _checkpoint(self, effect: d.TakeCheckpoint, state: State) -> Sequence[Event]:
        """A failed checkpoint is an outcome: logged, and the turn goes on."""
        checkpoints = self.effects.checkpoints
        if checkpoints is None:
            return ()
        tree = str(checkpoints.tree)
        try:
            snap = checkpoints.take(effect.turn)
        except CheckpointError as exc:
            log.warning("checkpoint_failed", tree=tree, turn=effect.turn, error=str(exc))
            return (Checkpointed(turn=effect.turn, tree=tree, error=str(exc)),)
        return (Checkpointed(turn=effect.turn, tree=tree, commit=snap.commit, files=snap.files,
                             skipped=len(snap.skipped)),)

    def _restore_tree(self, effect: d.RestoreTree, state: State) -> Sequence[Event]:
        target = effect if effect.commit is not None else rollback_to(state, effect.turn)
        checkpoints = self.effects.checkpoints
        error = ("no checkpoint to go back to" if target.commit is None or target.tree is None
                 else "this agent keeps no checkpoints" if checkpoints is None else None)
        if error is None:
            assert checkpoints is not None and target.commit and target.tree
            try:
                done = checkpoints.restore(Path(target.tree), target.commit)
            except CheckpointError as exc:
                error = str(exc)
            else:
                log.info("tree_restored", tree=target.tree, turn=target.turn,
                         commit=target.commit, saved=done.saved)
                return (TreeRestored(turn=target.turn, tree=target.tree, commit=target.commit,
                                     saved=done.saved, removed=done.removed,
                                     restored=done.restored),)
        log.warning("rollback_failed", turn=target.turn, error=error)
        return (TreeRestored(turn=target.turn, tree=target.tree, commit=target.commit,
                             error=error),)

    # --- one turn ---------------------------------------------------------------------------
    def _begin(self, effect: d.BeginTurn, state: State) -> Sequence[Event]:
        ids, clock = self.effects.ids, self.effects.clock
        return (TurnStarted(turn_id=ids.new_id(), task_id=effect.task_id or ids.new_id(),
                            started_at=clock.now(), user_message=effect.user_message,
                            system_message=effect.system_message,
                            reasoning_effort=effect.reasoning_effort,
                            reasoning_budget=effect.reasoning_budget, output=effect.output,
                            client_tools=effect.client_tools,
                            tool_results=effect.tool_results, images=effect.images),)

    def _check_output(self, effect: d.CheckOutput, state: State) -> Sequence[Event]:
        check = self.output_check
        if check is None:  # the caller gave the turn its output type, and so its check
            raise MibyanError(f"no check of the output type {effect.spec.name!r} was given")
        return (check(effect.text),)

    def _poll(self, effect: d.PollInterrupt, state: State) -> Sequence[Event]:
        if self.fork_switch is not None:
            return self._switch(d.SwitchSettings(), state)
        if self.interrupt.is_set():
            self.interrupt.clear()
            return (Interrupted(during=effect.during),)
        steered = self.steering.take() if effect.steer and self.steering is not None else None
        return () if steered is None else (Steered(text=steered),)

    def _wait(self, step: d.Wait, state: State) -> Sequence[Event]:
        """Sleep the backoff in short slices so that an interrupt cuts it short."""
        clock = self.effects.clock
        jitter = self.effects.ids.fraction()
        assert state.settings is not None
        seconds = backoff_delay(step.attempt, jitter=jitter, retry_after=step.retry_after,
                                base=state.settings.retry_base_delay)
        deadline = clock.monotonic() + seconds
        while (left := deadline - clock.monotonic()) > 0:
            if self.interrupt.is_set():
                self.interrupt.clear()
                return (Interrupted(during="backoff"),)
            clock.sleep(min(left, INTERRUPT_POLL_SECONDS))
        return (Waited(seconds=round(seconds, 6), jitter=jitter),)

    def _refresh(self, step: d.RefreshCredential, state: State) -> Sequence[Event]:
        refresh = self.effects.refresh
        return (CredentialRefreshed(credential_id=step.credential_id,
                                    refreshed=bool(refresh and refresh(step.credential_id))),)

    def _approve(self, ask: d.AskApproval, state: State) -> Sequence[Event]:
        if self.effects.approver is None:
            return (ApprovalAnswered(call_id=ask.call_id, pattern=ask.pattern, choice="deny",
                                     source="default",
                                     reason="no approval callback is configured"),)
        assert state.settings is not None
        # Rules 8: an approver that pauses records the calls the turn then waits on.
        return (self.effects.approver.answer(
            ask, may_pause=state.settings.rule_set.paused_approvals),)

    def _read_inputs(self, effect: d.ReadPromptInputs, state: State) -> Sequence[Event]:
        context = self.effects.context
        return (PromptInputsRead() if context is None else context.read_inputs(),)

    def _read_hints(self, effect: d.ReadHints, state: State) -> Sequence[Event]:
        context = self.effects.context
        if context is None:
            return (HintsRead(dirs=effect.dirs),)
        return (context.read_hints(effect.dirs, effect.cwd),)

    def _prefetch(self, effect: d.PrefetchMemory, state: State) -> Sequence[Event]:
        memory = self.effects.memory
        if memory is None:
            return (MemoryPrefetched(),)
        return (memory.prefetch_all(effect.query, session_id=state.session_id or ""),)

    def _run_tools(self, step: d.RunTools, state: State) -> Sequence[Event]:
        if self.effects.tools is None:
            raise MibyanError("this session has no tool runner")
        if step.sync_first:
            # The intent to run a tool that changes things is durable before it starts.
            self.sync()
        assert state.turn is not None
        outcomes = self.effects.tools.run(step.calls, concurrent=step.concurrent,
                                          task_id=state.turn.task_id)
        if state.settings is not None and state.settings.rule_set.untrusted_marked:
            outcomes = tuple(screened_outcome(o) for o in outcomes)
        return [ToolRan(outcome=o) for o in outcomes]

    def _summarise(self, effect: d.Summarise, state: State) -> Sequence[Event]:
        """The auxiliary call through the session's own call path; its failure is an outcome.
        The memory providers see the conversation first (``on_pre_compress``): what they want
        kept is added to the summary, and so recorded with it."""
        memory = self.effects.memory
        kept = memory.on_pre_compress(state.messages) if memory is not None else ""
        event = self.call_model(effect.request)
        if isinstance(event, ModelReplied):
            text = event.message.text.strip()
            if text:
                if kept:
                    text = f"{text}\n\n{kept}"
                return (ContextSummarised(text=text, model=event.model, usage=event.usage,
                                          latency_ms=event.latency_ms),)
            return (SummaryFailed(error_type="EmptySummary",
                                  message="the summariser returned no text"),)
        if isinstance(event, Interrupted):
            # The turn's next poll sees the interrupt; the summary is given up.
            self.interrupt.set()
            return (SummaryFailed(error_type="Interrupted", message="interrupted by user"),)
        assert isinstance(event, ModelFailed), event
        return (SummaryFailed(error_type=event.error_type, message=event.message),)
