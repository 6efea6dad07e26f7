"""The public entry point: ``Agent``.

    agent = Agent(model="gpt-4o-mini", tools=[get_weather])    # = Agent.from_config(...)
    agent.chat("What's the weather in Oslo?")                  # -> str
    agent.run("And tomorrow?")                                 # -> TurnResult
    agent.run_conversation("And the day after?")               # -> dict (TurnResult.as_dict())

An agent is built from values: the session's settings (``SessionSettings``, logged), the agent's
own (``AgentSettings``: home, durability, timeouts, delegation) and its effects (model client,
clock, ids, tool runner). ``Agent.from_config`` reads config.toml, the environment and key pools
and starts the embedded model when nothing is configured; ``Agent(...)`` with keyword arguments
does the same. Each agent owns one session (created on first use, or resumed with
``session_id=``, which keeps the settings the session recorded unless an argument replaces
one) whose event log lives under ``<home>/sessions``.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import attrs

from effects.clock import RandomIds, SystemClock
from effects.eventlog import lineage
from effects.eventlog.store import Durability, SessionLog, session_path
from effects.images import BlobStore, ImageSource
from effects.performers import Effects, Performers
from effects.prompt_files import ContextReader
from effects.protocols import DeltaSink, Interrupt, ModelClient
from effects.tools.checkpoints import CheckpointStore, TreeCheckpoints
from effects.tools.executor import ThreadPoolToolRunner
from pipeline import config as cfg
from pipeline.agent_run import AgentRun
from pipeline.agent_run import stream as stream_events
from pipeline.agent_turn import both_listeners, take_in, turn_command, turn_result, wired
from pipeline.hooks import Hooks, default_hooks
from pipeline.intake import HistoryIntake
from pipeline.providers import Secrets
from pipeline.result import ReturnedMessages, TurnResult
from pipeline.run_events import RunEvent
from pipeline.run_events import TurnFinished as RunTurnFinished
from pipeline.settings import AgentSettings, check_session_values, checked, configure
from pipeline.shell.approval import AllowList, ApprovalCallback, Approver
from pipeline.shell.decisions import Decisions
from pipeline.shell.fork import go_on, live_only, plan_fork
from pipeline.shell.fork_journal import ForkJournal
from pipeline.shell.journal import Journal, LiveJournal
from pipeline.shell.redacted import RedactedHistory
from pipeline.shell.rollback import checkpoint_after
from pipeline.shell.runner import SessionRunner, Step
from pipeline.shell.waits import Waits, waiting
from pipeline.telemetry.live import configured, live_spans
from pipeline.tools import Tool, ToolRegistry
from stages.decision import SplitSession
from stages.errors import LogError, UsageError
from stages.log.api_mode import resolve_api_mode
from stages.log.content_parts import ContentPart
from stages.log.events import (
    ContextInherited,
    Event,
    SessionSettings,
    SessionSplit,
    TreeRestored,
)
from stages.log.pause_events import PendingApproval
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.session.machine import Compress, Opening, RollBack, Turn
from stages.turn.budget import child_budget

ToolsArg = Iterable[Tool | Callable[..., Any]]
Listener = Callable[[Event], None]
_SESSION_FIELDS = frozenset(attrs.fields_dict(SessionSettings))
_AGENT_FIELDS = frozenset(attrs.fields_dict(AgentSettings)) - {"session_id", "parent_session_id"}


class Agent:
    def __init__(self, model: str | None = None, *, settings: SessionSettings | None = None,
                 agent_settings: AgentSettings | None = None, effects: Effects | None = None,
                 secrets: Iterable[str] = (), tools: ToolsArg = (),
                 event_listener: Listener | None = None,
                 approval_callback: ApprovalCallback | None = None, hooks: Hooks | None = None,
                 approvals: str = "deny", tool_approvals: Iterable[str] = (),
                 **overrides: Any) -> None:
        """From values (``settings=``, ``agent_settings=``, ``effects=``), or, without
        ``settings``, from config: ``Agent(model=..., **overrides)`` is ``Agent.from_config``.
        ``approvals`` answers a call that needs approval when no ``approval_callback`` does:
        "deny", "once", or "pause" (the turn stops with the calls pending: ``resume``);
        ``tool_approvals`` names tools each of whose calls needs one."""
        from_config = settings is None
        if settings is None:
            # Today's keyword arguments: the same as ``Agent.from_config`` (checked there).
            parts = configure(model, **overrides)
            settings, agent_settings = parts.settings, parts.agent_settings
            effects, secrets = parts.effects, parts.secrets
        elif model is not None or overrides:
            raise UsageError("pass either settings= or configuration keywords, not both "
                             f"(got {', '.join(sorted(overrides)) or 'model'})")
        else:
            settings = checked(settings)
        self.settings = settings
        self.agent_settings = agent_settings or AgentSettings(home=cfg.home())
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        if tool_approvals:
            self.registry = self.registry.needing_approval(tool_approvals)
        # A toolset with state (pipeline.toolsets.BuiltinTools): its todo list is restored on
        # resume, its background processes stopped on close.
        self._toolset = tools
        effects = effects or Effects(clock=SystemClock(), ids=RandomIds())
        external = getattr(effects.memory, "external", None)
        if external is not None:  # the external provider's tools (session_search, ...)
            self.registry = self.registry.with_tools(
                *(t for t in external.tools() if t.name not in self.registry))
        if effects.context is None and self.settings.load_context:
            effects = attrs.evolve(effects, context=ContextReader(
                home=self.home, cwd=self.agent_settings.cwd or Path.cwd()))
        # A provider router knows its keys (and learns renewed ones): redact with those.
        secrets = secrets or getattr(effects.model, "secrets", ())
        self._secrets = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
        self._interrupt = Interrupt()
        # Where live spans go (``pipeline.telemetry``): an agent built from values reads no
        # config, so only ``telemetry.instrument`` traces it (or the agent it was made from).
        self._tracer_provider = configured(self.home if from_config else None)
        self._waits = Waits()
        # Installed plugins register unless the caller brings its own hooks.
        self.hooks = default_hooks() if hooks is None else hooks
        self._effects = self._completed(effects, approval_callback, approvals)
        self._listener = event_listener
        self._runner: SessionRunner | None = None
        self._child: tuple[SessionRunner, SessionLog] | None = None
        self._ended = False
        self._log: SessionLog | None = None
        self._lock = threading.Lock()
        self._intake = HistoryIntake()
        self._redacted = RedactedHistory()
        self._returned = ReturnedMessages()
        self._blobs = BlobStore.in_home(self.home)
        # An agent dropped without close() still releases its sessions' locks when it is
        # collected, whatever else may still hold the log (the callback holds no agent).
        self._logs: list[SessionLog] = []
        weakref.finalize(self, _close_logs, self._logs)

    def _completed(self, effects: Effects, approval_callback: ApprovalCallback | None,
                   approvals: str = "deny") -> Effects:
        """The effects with a tool runner and an approver where the caller gave none."""
        if effects.tools is None:
            effects = attrs.evolve(effects, tools=ThreadPoolToolRunner(
                self.registry, interrupt=self._interrupt, hooks=self.hooks,
                max_result_chars=self.agent_settings.max_tool_result_chars,
                secrets=self._secrets))
        if effects.approver is None:
            effects = attrs.evolve(effects, approver=Approver(
                approval_callback, allowlist=AllowList(self.home / "approvals.json"),
                default=approvals))
        # The working tree: the built-in tools' root, else the directory the agent runs in.
        tree = getattr(self._toolset, "root", None) or self.agent_settings.cwd
        if effects.checkpoints is None and self.agent_settings.checkpoints and tree is not None:
            effects = attrs.evolve(effects, checkpoints=TreeCheckpoints(
                CheckpointStore(self.home / "checkpoints"), Path(tree)))
        return effects

    @classmethod
    def from_config(cls, model: str | None = None, *, tools: ToolsArg = (),
                    event_listener: Listener | None = None,
                    approval_callback: ApprovalCallback | None = None,
                    hooks: Hooks | None = None, approvals: str = "deny",
                    tool_approvals: Iterable[str] = (), **overrides: Any) -> Agent:
        """Settings from keyword arguments, then the environment, then
        ``<home>/config.toml``; the model client is the provider router over the key pool (or
        the embedded local model when no provider is configured). The keywords are those of
        :func:`pipeline.settings.configure`."""
        return cls(model, tools=tools, event_listener=event_listener,
                   approval_callback=approval_callback, hooks=hooks, approvals=approvals,
                   tool_approvals=tool_approvals, **overrides)

    # --- the agent's settings ---------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.agent_settings.home

    @property
    def durability(self) -> Durability:
        return self.agent_settings.durability

    @property
    def delegation_max_iterations(self) -> int:
        return self.agent_settings.delegation_max_iterations

    @property
    def parent_session_id(self) -> str | None:
        return self.agent_settings.parent_session_id

    @property
    def model_client(self) -> ModelClient | None:
        return self._effects.model

    # --- session ----------------------------------------------------------------------------
    @property
    def session_id(self) -> str | None:
        if self._runner is not None:
            return self._runner.state.session_id
        return self.agent_settings.session_id

    def _open(self) -> SessionRunner:
        if self._runner is not None:
            return self._runner
        root = self.home / "sessions"
        requested = self.agent_settings.session_id
        if requested is not None and session_path(root, requested).exists():
            requested = lineage.newest(root, requested)
        session_id = requested or self._effects.ids.session_id()
        exists = session_path(root, session_id).exists()
        if requested is not None and not exists:
            raise UsageError(f"no session {session_id!r} under {root}")
        try:
            self._log = SessionLog.open(root, session_id, durability=self.durability)
            self._logs.append(self._log)
        except LogError as exc:
            cause = exc.__cause__
            if type(exc) is not LogError or not isinstance(cause, OSError):
                raise  # a second writer, a corrupt log: not a matter of the home
            raise UsageError(f"cannot write session logs under {root}: "
                             f"{cause.strerror or cause}; "
                             "choose another home (--home or MIBYAN_HOME)") from exc
        journal = LiveJournal(self._log, self._effects.clock, self._secrets, self._redacted)
        runner = self._runner_for(journal,
                                  state=self._folded() if exists else None)
        runner.open(Opening(resume=exists, settings=self.settings, session_id=session_id,
                            parent_session_id=self.parent_session_id,
                            tools=self.registry.specs))
        self._runner = runner
        self.hooks.fire("session_start", session_id=runner.state.session_id, resumed=exists)
        return runner

    def _runner_for(self, journal: Journal, *, state: State | None = None,
                    inherit: ContextInherited | None = None,
                    listener: Listener | None = None) -> SessionRunner:
        """An interpreter of this agent's session machine over ``journal``."""
        performers = Performers(self._effects, interrupt=self._interrupt, sync=journal.sync,
                                home=self.home, blobs=self._blobs, toolset=self._toolset,
                                inherit=inherit, split=self._split,
                                steering=self._waits.steering)
        runner = SessionRunner(journal, performers, state=state,
                               listener=self._listener if listener is None else listener)
        # Spans of what runs live (a fork's copied prefix is not traced again).
        spans = None if listener is not None else live_spans(
            self._tracer_provider, self._secrets, lambda: runner.state.session_id)
        if spans is not None:
            runner.listener = both_listeners(runner.listener, spans)
        return runner

    def open(self) -> str:
        """Start (or resume) the session now, before its first turn; its id."""
        with self._lock:
            session_id = self._open().state.session_id
        assert session_id is not None
        return session_id

    def _split(self, split: SplitSession, state: State) -> SessionSplit:
        """The split's child, started under a new id with the parent's compressed context; the
        agent goes on in it once the parent's machine has recorded the split."""
        assert state.settings is not None and state.session_id is not None
        child_id = self._effects.ids.session_id()
        log = SessionLog.open(self.home / "sessions", child_id, durability=self.durability)
        self._logs.append(log)
        journal = LiveJournal(log, self._effects.clock, self._secrets, self._redacted)
        child = self._runner_for(journal,
                                 inherit=split.context)
        child.open(Opening(settings=state.settings, session_id=child_id,
                           parent_session_id=state.session_id, tools=self.registry.specs,
                           child=True))
        self._child = (child, log)
        return SessionSplit(child_session_id=child_id, reason=split.context.reason)

    def _continue_in_child(self) -> None:
        """After a command that split the session, the agent goes on in the child."""
        if self._child is None or self._runner is None or not self._runner.ended:
            return
        if self._log is not None:
            self._log.close()
        (self._runner, self._log), self._child = self._child, None

    def _folded(self) -> Any:
        assert self._log is not None
        return lineage.folded_log(self._log.path)

    # --- turns ------------------------------------------------------------------------------
    def run(self, user_message: str | Sequence[Mapping[str, Any] | ContentPart] | None = None,
            system_message: str | None = None,
            conversation_history: Sequence[Mapping[str, Any]] | None = None,
            task_id: str | None = None, stream_callback: DeltaSink | None = None, *,
            reasoning_callback: DeltaSink | None = None, reasoning_effort: str | None = None,
            reasoning_budget: int | None = None,
            on_event: Callable[[RunEvent], object] | None = None,
            output_type: Any = None, client_tools: Sequence[Mapping[str, Any] | ToolSpec] = (),
            tool_results: Sequence[Mapping[str, Any]] = (),
            decisions: Decisions | None = None, images: Sequence[ImageSource] = ()
            ) -> TurnResult:
        """Run one user turn to its end (or to a pause for approvals: ``result.paused``) and
        describe it; with ``decisions`` (and no message), go on with the turn that waits for
        them. ``reasoning_callback`` receives the
        model's reasoning as it streams (apart from ``stream_callback``'s text);
        ``reasoning_effort`` / ``reasoning_budget`` set this turn's reasoning over the
        provider's; ``on_event`` receives the turn's typed events (``pipeline.run_events``).
        ``output_type`` (a pydantic model, a dataclass, a TypedDict, any type pydantic
        validates, or a JSON schema dict) makes the answer structured: validated, asked again
        with the errors when it does not match, returned as ``result.output``.
        ``client_tools`` (OpenAI function tools) are offered next to the agent's own: a call to
        one ends the turn (``client_tool_calls``, the calls in ``result.tool_calls``), and the
        next turn passes their ``tool_results`` (tool messages) instead of a user message
        (``pipeline.client_tools``). ``images`` go with the message (paths, bytes, http(s) or
        ``data:`` URLs; see docs/images.md); ``user_message`` may also be a list of content
        parts (OpenAI's ``text`` and ``image_url`` dicts, or ``TextPart`` / ``ImagePart``)."""
        steps = self._turn(user_message, system_message, conversation_history, task_id,
                           stream_callback, reasoning_callback=reasoning_callback,
                           reasoning_effort=reasoning_effort, reasoning_budget=reasoning_budget,
                           on_event=on_event, output_type=output_type,
                           client_tools=client_tools, tool_results=tool_results,
                           decisions=decisions, images=images)
        while True:
            try:
                next(steps)
            except StopIteration as end:
                result: TurnResult = end.value
                return result

    def iter(self, user_message: str, system_message: str | None = None,
             conversation_history: Sequence[Mapping[str, Any]] | None = None,
             task_id: str | None = None, **options: Any) -> AgentRun:
        """One turn to step through (``for step in run`` or ``async for``): each step of the
        session machine is done and logged when the caller sees it, and the caller may stop
        (the turn then ends as an interrupt ends it). ``options`` are ``run``'s keywords
        (``stream_callback``, ``on_event``, ``reasoning_effort``, ...); see
        ``pipeline.agent_run``."""
        return AgentRun(self._turn(user_message, system_message, conversation_history,
                                   task_id, **options), self.interrupt)

    async def arun(self, user_message: str, system_message: str | None = None,
                   conversation_history: Sequence[Mapping[str, Any]] | None = None,
                   task_id: str | None = None, **options: Any) -> TurnResult:
        """``run`` for asyncio: the turn's blocking steps run in worker threads. Cancelling
        the awaiting task interrupts the turn, which ends cleanly before the cancellation
        goes on."""
        return await self.iter(user_message, system_message, conversation_history, task_id,
                               **options).finish()

    def stream(self, user_message: str, system_message: str | None = None,
               conversation_history: Sequence[Mapping[str, Any]] | None = None,
               task_id: str | None = None, **options: Any) -> AsyncIterator[RunEvent]:
        """The turn's typed events as they happen (``pipeline.run_events``: text and
        reasoning deltas, tools started and finished, approvals, compression, retries,
        fallbacks), ending with ``TurnFinished``; ``options`` as ``arun``'s. Leaving the loop
        early interrupts the turn."""
        queue: asyncio.Queue[RunEvent] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def put(event: RunEvent) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, event)
        return stream_events(self.iter(user_message, system_message, conversation_history,
                                       task_id, on_event=put, **options), queue)

    def _turn(self, user_message: str | Sequence[Mapping[str, Any] | ContentPart] | None,
              system_message: str | None,
              conversation_history: Sequence[Mapping[str, Any]] | None, task_id: str | None,
              stream_callback: DeltaSink | None = None, *,
              reasoning_callback: DeltaSink | None = None, reasoning_effort: str | None = None,
              reasoning_budget: int | None = None,
              on_event: Callable[[RunEvent], object] | None = None, output_type: Any = None,
              client_tools: Sequence[Mapping[str, Any] | ToolSpec] = (),
              tool_results: Sequence[Mapping[str, Any]] = (),
              decisions: Decisions | None = None, images: Sequence[ImageSource] = ()
              ) -> Generator[Step, None, TurnResult]:
        """The turn, one step of the session machine at a time; returns its result."""
        taken = take_in(user_message, conversation_history, decisions=decisions, images=images,
                        output_type=output_type, reasoning_effort=reasoning_effort,
                        reasoning_budget=reasoning_budget, store=self._blobs,
                        intake=self._intake)
        with self._lock:
            runner = self._open()
            command = turn_command(runner.state, taken, decisions,
                                   system_message=system_message, task_id=task_id,
                                   reasoning_effort=reasoning_effort,
                                   reasoning_budget=reasoning_budget,
                                   client_tools=client_tools, tool_results=tool_results)
            try:
                with wired(runner, self._secrets, taken.wanted, on_event=on_event,
                           stream_callback=stream_callback,
                           reasoning_callback=reasoning_callback):
                    while True:  # then a turn of a message steered in too late for the last
                        if isinstance(command, Turn):
                            self.hooks.fire("turn_start", session_id=runner.state.session_id,
                                            task_id=command.task_id,
                                            user_message=command.user_message)
                        state = yield from runner.steps(command)
                        self._continue_in_child()
                        runner = self._runner or runner
                        # An interrupt that came after this turn's last step must not stop
                        # the next one.
                        self._interrupt.clear()
                        follow = None if waiting(state) else self._waits.follow_up()
                        if follow is None:
                            break
                        command = Turn(user_message=follow)
            finally:
                self._interrupt.clear()
        result = turn_result(state, taken.wanted)
        self.hooks.fire("turn_end", session_id=state.session_id, result=result)
        if on_event is not None:
            on_event(RunTurnFinished(result=result))
        return result

    def resume(self, decisions: Decisions, stream_callback: DeltaSink | None = None,
               ) -> TurnResult:
        """Go on with the turn that waits for approvals (``result.pending_approvals``), with a
        decision on each pending call: ``approve()``, ``approve_for_session()``,
        ``deny("why")`` (``pipeline.shell.decisions``), keyed by call id."""
        return self.run(decisions=decisions, stream_callback=stream_callback)

    @property
    def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The calls the session's turn waits on (none: it waits for nothing)."""
        with self._lock:
            return waiting(self._open().state)

    def compress(self) -> bool:
        """Compress the session's context now, between turns (the chat's ``/compress``);
        the session then goes on in a child session, as after any compression. False when
        there was nothing to compact (no finished turn yet, too little history, compression
        off for the session)."""
        with self._lock:
            runner = self._open()
            before = runner.state.context.compressions
            try:
                compressed = runner.command(Compress()).context.compressions > before
                self._continue_in_child()
            finally:
                self._interrupt.clear()
        return compressed

    def rollback(self, turn: int | None = None, *, tree: str | None = None,
                 commit: str | None = None) -> TreeRestored:
        """Put the working tree back to the checkpoint taken before ``turn`` (None: the
        latest turn that took one), between turns; the outcome is recorded in the session
        (``TreeRestored``: ``error`` says why nothing was restored). ``tree`` and ``commit``
        name a checkpoint of another session (a fork's origin)."""
        outcome: list[TreeRestored] = []
        with self._lock:
            runner = self._open()
            listener = runner.listener

            def keep(event: Event) -> None:
                if isinstance(event, TreeRestored):
                    outcome.append(event)
                if listener is not None:
                    listener(event)

            runner.listener = keep
            try:
                runner.command(RollBack(turn=turn, tree=tree, commit=commit))
            finally:
                runner.listener = listener
        return outcome[-1]

    def run_conversation(self, user_message: str, system_message: str | None = None,
                         conversation_history: Sequence[Mapping[str, Any]] | None = None,
                         task_id: str | None = None,
                         stream_callback: DeltaSink | None = None,
                         **reasoning: Any) -> dict[str, Any]:
        """``run(...)`` as the plain dict of ``TurnResult.as_dict``."""
        return self.result_dict(self.run(user_message, system_message, conversation_history,
                                         task_id, stream_callback, **reasoning))

    def result_dict(self, result: TurnResult) -> dict[str, Any]:
        """``result.as_dict()`` for a result of this agent's, writing out only the messages
        its last one did not have (a session's histories share their start)."""
        return result.as_dict(self._returned)

    def chat(self, message: str, stream_callback: DeltaSink | None = None) -> str:
        return self.run(message, stream_callback=stream_callback).final_response or ""

    def interrupt(self, message: str | None = None) -> None:
        """Stop the running turn now (a model call's response is closed, a backoff is cut
        short, tools not yet started are skipped); safe from any thread. Between turns it
        stops the next turn at its first step. With a ``message``, the run goes on with a
        turn of it once the stopped one is closed (``run`` returns that turn)."""
        if message is not None:
            self._waits.interrupt_with(message)
        self._interrupt.set()

    def steer(self, text: str) -> None:
        """Send ``text`` into the running turn from any thread: it joins the conversation as
        the user's at the turn's next step boundary (after the tool batch running now, before
        the next model request; rules 8), so the model reads it in its very next request. A
        message no boundary took before the turn ended is answered by a turn of its own."""
        self._waits.steering.send(text)

    def forget_interrupt(self) -> None:
        """Drop an interrupt that came after the turn it was meant for (a gateway's client
        leaving as its turn ended), so that it cannot stop the next turn."""
        self._interrupt.clear()

    @property
    def interrupt_requested(self) -> bool:
        """An interrupt is waiting to stop the running turn (subagents pass it on)."""
        return self._interrupt.is_set()

    def child(self, *, max_turns: int | None = None, tools: ToolsArg | None = None,
              event_listener: Listener | None = None, **overrides: Any) -> Agent:
        """A subagent with its own session: the parent's settings evolved (same provider chain,
        key pool, retry and cache policy, model client, clock and ids), its budget capped by
        the delegation limit. ``overrides`` name fields of ``SessionSettings`` or
        ``AgentSettings``."""
        unknown = set(overrides) - _SESSION_FIELDS - _AGENT_FIELDS - {"max_turns"}
        if unknown:
            raise UsageError(f"child() got unknown settings: {', '.join(sorted(unknown))}")
        session = {k: v for k, v in overrides.items() if k in _SESSION_FIELDS}
        if {"model", "provider", "base_url"} & set(session) and "api_mode" not in session:
            merged = attrs.evolve(self.settings, **session)
            mode = resolve_api_mode(explicit=None, provider=merged.provider,
                                    base_url=merged.base_url, model=merged.model)
            session.update(api_mode=mode.mode, api_mode_reason=mode.reason)
        session["max_turns"] = child_budget(
            max_turns, delegation_max_iterations=self.delegation_max_iterations)
        session.setdefault("memory_provider", None)
        check_session_values(session)
        agent_settings = attrs.evolve(
            self.agent_settings, session_id=None, parent_session_id=self._open().state.session_id,
            **{k: v for k, v in overrides.items() if k in _AGENT_FIELDS})
        child = Agent(settings=attrs.evolve(self.settings, **session),
                      agent_settings=agent_settings,
                      # A child runs its own tools, nobody approves its dangerous commands, and
                      # its exchanges are not the user's: no memory provider.
                      effects=attrs.evolve(self._effects, tools=None, approver=Approver(),
                                           memory=None),
                      secrets=self._secrets, tools=self.registry if tools is None else tools,
                      event_listener=event_listener, hooks=self.hooks)
        return self._traced(child)

    def fork(self, session_id: str, *, at: int | None = None, restore_tree: bool = False,
             **changes: Any) -> Agent:
        """A new session that repeats ``session_id``'s first ``at`` records exactly (all when
        None), then goes on live with ``changes`` to its settings (``SessionSettings`` fields:
        ``model``, ``provider``, ``api_mode``, ``max_tokens``, ...) through this agent's model
        client and tools; a fork inside a turn finishes that turn first. Returns an agent bound
        to the fork (``.session_id``); ``restore_tree`` puts the working tree back as it was at
        the fork point. See ``fork_session`` for the details."""
        return fork_session(self, session_id, at=at, restore_tree=restore_tree,
                            **changes).agent

    def _forked(self, settings: SessionSettings, session_id: str) -> Agent:
        """The agent a fork goes on with: this one's model client, clock, ids, tools,
        approvals, hooks and secrets; its own tool runner. The memory providers stay here
        (closing the fork would shut them down), so a fork recalls nothing; the window is the
        origin's, so it asks for none."""
        forked = Agent(settings=settings,
                       agent_settings=attrs.evolve(self.agent_settings, session_id=session_id),
                       effects=attrs.evolve(self._effects, tools=None, memory=None,
                                            window_probe=None),
                       secrets=self._secrets, tools=self.registry, event_listener=self._listener,
                       hooks=self.hooks)
        return self._traced(forked)

    def _traced(self, agent: Agent) -> Agent:
        """``agent`` (a child, a fork) sending its spans where this one sends its own."""
        agent._tracer_provider = self._tracer_provider
        return agent

    def close(self) -> None:
        with self._lock:
            if self._runner is not None and not self._ended:
                self._ended = True
                self.hooks.fire("session_end", session_id=self._runner.state.session_id)
            if self._log is not None:
                self._log.close()
            if self._effects.memory is not None:
                self._effects.memory.shutdown(self.session_id)
            # close() also removes the oversized-result files; a caller's runner may have only
            # shutdown().
            tools = self._effects.tools
            stop = getattr(tools, "close", None) or getattr(tools, "shutdown", None)
            if stop is not None:
                stop()
            close_tools = getattr(self._toolset, "close", None)
            if close_tools is not None:
                close_tools()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _close_logs(logs: list[SessionLog]) -> None:
    """Close the logs an agent opened (each close is idempotent)."""
    for log in logs:
        log.close()


@attrs.frozen(kw_only=True)
class Fork:
    """A fork made: the agent bound to the new session, where it came from, and the turn it
    finished live when it began inside one (None between turns)."""

    agent: Agent
    session_id: str
    origin_session_id: str
    origin_seq: int
    continued: TurnResult | None = None
    # ``restore_tree``: the tree put back as it was at the fork point (None: nothing changed
    # it after that point, or it was not asked for).
    restored: TreeRestored | None = None


def fork_session(agent: Agent, session_id: str, *, at: int | None = None,
                 restore_tree: bool = False, **changes: Any) -> Fork:
    """Fork ``session_id`` (under ``agent``'s home) after its first ``at`` records (all when
    None), going on with ``changes`` to its settings, through ``agent``'s model client, tools
    and approvals (``pipeline.shell.fork``). Raises ``UsageError`` for an unknown session, a
    bad ``at`` or setting, and ``ReplayDivergenceError`` when the prefix no longer replays
    (nothing is left behind)."""
    root = agent.home / "sessions"
    plan = plan_fork(root, session_id, at, changes)
    new_id = agent._effects.ids.session_id()
    if session_path(root, new_id).exists():
        raise UsageError(f"the fork's new id {new_id!r} names a session that exists already")
    forked = agent._forked(plan.settings, new_id)
    log = SessionLog.open(root, new_id, durability=agent.durability)
    journal = ForkJournal(plan.prefix, log, forked._effects.clock, new_id, forked._secrets)
    runner = forked._runner_for(journal, listener=live_only(forked._listener, journal))
    inside = go_on(runner, journal, plan, clock=forked._effects.clock,
                   tools=forked.registry.specs)
    forked._runner, forked._log = runner, log
    forked._logs.append(log)
    restored = None
    if restore_tree and (point := checkpoint_after(agent.home, session_id,
                                                   plan.origin_seq)) is not None:
        restored = forked.rollback(point.turn, tree=point.tree, commit=point.commit)
    return Fork(agent=forked, session_id=new_id, origin_session_id=session_id,
                origin_seq=plan.origin_seq,
                continued=TurnResult.from_state(runner.state) if inside else None,
                restored=restored)

