"""A pure simulation of whole sessions: ``Driver`` drives the real session machine
(``stages.session.machine``) as ``pipeline.shell.runner`` does, with every observation taken from
a generated :class:`~tests.strategies.scripts.SessionScript` (the turn's answers:
``tests.strategies.answers``).

The session opens through the machine; each scripted turn is a ``Turn`` command; a moving session
(``sessions=True``) also compresses now, reopens, resumes in a new process (a new machine over
the folded log, as after a crash at any point of a turn), switches to a fork's settings between
turns and inside a turn, aborts a turn it cut, and goes on in a split's child when a compression
asks for one, as ``pipeline.agent`` does. Each session keeps its own log (``Driver.logs``).

After every event the driver checks that the history alternates (the last calls may still await
results) and that the turn's model calls stay within ``max_turns + 1``; in a resilient session
(``tests.strategies.resilience``) it checks the recovery chain's rules as well
(``tests.strategies.recovery_checks``). It records which script steps each turn consumed, so a
real pipeline can be fed exactly the same replies.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import attrs

from stages import decision as d
from stages.context.summary import without_compaction
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.messages import Message
from stages.log.state import State
from stages.log.tool_specs import ToolSpec
from stages.session.machine import (
    Abort,
    Await,
    Command,
    Compress,
    Cut,
    End,
    ForkSwitch,
    Opening,
    Reopen,
    SessionFlow,
    Turn,
    run_session,
)
from stages.turn.machine import Ask, Perform, Record
from tests.strategies.answers import FALLBACK, Play, forked
from tests.strategies.recovery_checks import check_recovery
from tests.strategies.scripts import SessionScript, Step, TurnScript

__all__ = ["FALLBACK", "SIM_CWD", "TERMINAL", "TOOLS", "Driver", "check_pairs", "drive",
           "history", "settings_of"]

TOOLS = (
    ToolSpec(name="read", description="Read a file.", parameters='{"type":"object"}',
             read_only=True),
    ToolSpec(name="write", description="Write a file.", parameters='{"type":"object"}'),
    ToolSpec(name="ask", description="Ask the user.", parameters='{"type":"object"}',
             interactive=True),
)

TERMINAL = ToolSpec(name="terminal", description="Run a shell command.",
                    parameters='{"type":"object"}')
"""Declared by resilient sessions: its dangerous commands wait for an approval."""

SIM_CWD = "/work/sim"
"""The simulated working directory (a live run uses a directory of the same name)."""

REISSUED = frozenset({"retry", "rotate", "refresh", "fallback"})
"""The recovery moves that send a failed call again (only resilient sessions make them)."""

ABORTED = "KeyboardInterrupt: stopped by the simulation"

TurnCheck = Callable[["Driver", TurnScript, list[ev.Event]], None]


def check_pairs(messages: tuple[Message, ...]) -> None:
    """Every assistant's calls are followed, immediately and in call order, by their results."""
    for index, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        results = messages[index + 1:index + 1 + len(message.tool_calls)]
        assert [m.role for m in results] == ["tool"] * len(message.tool_calls), (index, messages)
        assert [m.tool_call_id for m in results] == [c.id for c in message.tool_calls]
        assert [m.name for m in results] == [c.name for c in message.tool_calls]


@attrs.define
class _Session:
    """A session the driver left for a while: a split's child while its parent records the
    split."""

    flow: SessionFlow
    state: State
    events: list[ev.Event]


@attrs.define
class Driver:
    """A pure stand-in for ``SessionRunner`` (and for ``Agent``, which opens, resumes and
    splits sessions), fed by a script."""

    settings: ev.SessionSettings
    """The current session's settings (a fork or a resume may change them)."""
    tools: tuple[ToolSpec, ...] = TOOLS
    clock_step: float = 100.0
    """Seconds the simulated clock moves per event."""
    window: int | None = None
    """What the provider answers when its window is probed (None: nothing)."""
    state: State = attrs.field(factory=State)
    events: list[ev.Event] = attrs.field(factory=list)
    """The current session's log."""
    logs: list[list[ev.Event]] = attrs.field(factory=list)
    """Every session's log, the first one first (a split's child follows its parent)."""
    flow: SessionFlow | None = None
    calls_made: int = 0
    consumed: list[list[Step]] = attrs.field(factory=list)
    """The script steps each turn used, in order (``FALLBACK`` where the script ran out)."""
    reissued: int = 0
    """The current turn's calls that re-issued a failed one (a retry, another key, the next
    provider): they count as model calls, but not against the iteration budget's bound."""
    stops: list[str] = attrs.field(factory=list)
    """How each turn the script stopped part way stopped ("crash" or "abort")."""
    synced: list[tuple[str, str]] = attrs.field(factory=list)
    """The exchanges the memory providers learnt (``SyncMemory``)."""
    forking: bool = False
    """A fork's switch of settings waits for the next ``SwitchSettings``."""
    inherit: ev.ContextInherited | None = None
    child: _Session | None = None

    def __attrs_post_init__(self) -> None:
        self.logs.append(self.events)

    @classmethod
    def resuming(cls, log: list[ev.Event], **fields) -> Driver:
        """A new process resuming the session ``log`` holds, wherever it was cut."""
        first = log[0]
        assert isinstance(first, ev.SessionStarted)
        driver = cls(settings=first.settings, **fields)
        for event in log:  # the bookkeeping of the turn in progress too (its re-issues)
            driver.add(event)
        driver.tools = driver.state.tools
        driver.open(Opening(resume=True, settings=driver.settings, tools=driver.tools))
        return driver

    # --- checks on every event ---------------------------------------------------------------
    def add(self, event: ev.Event) -> None:
        # The user's own text: a summary a compression joined to it is replaced by the next.
        latest = next((without_compaction(m.content or "") for m in reversed(self.state.messages)
                       if m.role == "user"), None)
        if isinstance(event, ev.TurnStarted):
            self.reissued = 0
        elif isinstance(event, ev.RecoveryDecided) and event.action in REISSUED and (
                self.state.turn is not None and self.state.turn.failure is not None):
            self.reissued += 1
        before, self.state = self.state, apply_event(self.state, event)
        self.settings = self.state.settings or self.settings
        check_recovery(before, event, self.state)
        if isinstance(event, ev.ContextCompressed) and latest is not None:
            # Compression never loses the latest user message.
            assert any(m.role == "user" and latest in (m.content or "")
                       for m in self.state.messages), (latest, self.state.messages)
        self.events.append(event)
        problems = violations(self.state.messages, open_tail_ok=True)
        assert problems == [], (event, problems)
        turn = self.state.turn
        if turn is not None:
            assert turn.api_calls - self.reissued <= self.settings.max_turns + 1, turn

    def epoch(self) -> float:
        return 1000.0 + self.clock_step * sum(map(len, self.logs))

    def now(self) -> str:
        return dt.datetime.fromtimestamp(self.epoch(), dt.UTC).isoformat()

    # --- the caller's side ---------------------------------------------------------------------
    def open(self, opening: Opening) -> None:
        """A machine of this process: start or resume, up to its first command."""
        self.flow = run_session(opening)
        self._run(next(self.flow), Play(index=len(self.consumed)))

    def run_turn(self, index: int, script: TurnScript, history: tuple[Message, ...] | None,
                 after_turn: TurnCheck | None = None) -> None:
        """One ``Turn`` command, every observation served from ``script``; ``after_turn``
        checks it once it ended, unless the script stopped it part way."""
        play = Play(index=index, script=script)
        self.consumed.append(play.used)
        if history is not None and history == self.state.messages:
            history = None  # as Agent.run: the session's own history is not reloaded
        start = len(self.events)
        done = None if after_turn is None else (
            lambda: after_turn(self, script, self.events[start:]))
        self.command(Turn(user_message=script.user, system_message=script.system_message,
                          history=history), play, done)

    def move(self, move: str, index: int) -> None:
        """A session move between turns (``tests.strategies.scripts.MOVES``)."""
        assert self.flow is not None
        play = Play(index=index)
        if move == "compress":
            self.command(Compress(), play)
        elif move == "reopen":
            self.command(Reopen(tools=self.tools), play)
        elif move == "resume":
            self.flow.close()
            self.open(Opening(resume=True, settings=self.settings, tools=self.tools))
        else:
            assert move == "fork", move
            # The fork goes on with its own settings and without the interactive tool (or
            # with it again), so that its tools are declared too.
            self.forking = True
            self.tools = (tuple(t for t in self.tools if t.name != "ask")
                          if any(t.name == "ask" for t in self.tools) else (*self.tools, TOOLS[2]))
            self.command(ForkSwitch(tools=self.tools), play)
            assert not self.forking and self.state.tools == self.tools

    def command(self, command: Command, play: Play,
                done: Callable[[], None] | None = None) -> None:
        assert self.flow is not None
        self._run(self.flow.send(command), play, done)

    def end(self) -> None:
        assert self.flow is not None
        try:
            self.flow.send(End())
        except StopIteration:
            return
        raise AssertionError("the session went on after End")

    # --- the interpreter -------------------------------------------------------------------------
    def _run(self, ask: Ask | Await, play: Play, done: Callable[[], None] | None = None) -> None:
        """Answer the machine until it waits for a command, the session goes on in a split's
        child, or the script stops the command (then it is aborted, or a new process resumes).
        ``done`` runs once the command's turn is over, before its memory sync and split."""
        assert self.flow is not None
        while not isinstance(ask, Await):
            if done is not None and isinstance(ask, Perform) and isinstance(
                    ask.effect, d.SyncMemory | d.SplitSession):
                done()
                done = None
            events = ask.events if isinstance(ask, Record) else self._answer(ask, play)
            for event in events:
                self.add(event)
                play.added += 1
                # A process may stop after any event, between two results of a batch too.
                if self._stops(play):
                    break
            else:
                try:
                    ask = self.flow.send(self.state)
                except StopIteration:
                    self._go_on_in_child()
                    return
                continue
            play.stopped, done = True, None
            self.stops.append(play.script.stop)
            if play.script.stop == "crash":
                self.flow.close()
                self.open(Opening(resume=True, settings=self.settings, tools=self.tools))
                return
            assert isinstance(self.flow.throw(Cut()), Await)
            ask = self.flow.send(Abort(error=ABORTED))
        if done is not None:
            done()

    def _stops(self, play: Play) -> bool:
        """The script stops the command here: it recorded ``stop_at`` events, its turn open."""
        turn, stop_at = self.state.turn, play.script.stop_at
        return (stop_at is not None and not play.stopped and play.added >= stop_at
                and turn is not None and turn.finished is None)

    def _answer(self, ask: Perform, play: Play) -> tuple[ev.Event, ...]:
        effect, state, now = ask.effect, self.state, self.now()
        match effect:
            case d.StartSession():
                assert effect.settings is not None and effect.session_id is not None
                return (ev.SessionStarted(session_id=effect.session_id, started_at=now,
                                          settings=effect.settings,
                                          parent_session_id=effect.parent_session_id),)
            case d.ResumeSession():
                return (ev.SessionResumed(resumed_at=now,
                                          settings=effect.settings or state.settings),)
            case d.InheritContext():
                inherit, self.inherit = self.inherit, None
                return () if inherit is None else (inherit,)
            case d.DeclareTools():
                same = effect.tools is None or effect.tools == state.tools
                return () if same else (ev.ToolsDeclared(tools=effect.tools),)
            case d.RestoreTools() | d.StartMemory():
                return ()
            case d.SyncMemory():
                finished = state.turn.finished
                assert finished.completed and finished.final_response == effect.answer
                self.synced.append((effect.user_message, effect.answer))
                return ()
            case d.ProbeWindow():
                return () if self.window is None else (ev.ContextWindowProbed(
                    provider=effect.provider, model=effect.model, tokens=self.window,
                    source="props"),)
            case d.ProbeSandbox():
                # The machine a simulated session runs on has a working sandbox.
                rules = state.settings.rule_set
                return (ev.SandboxProbed(mode=state.settings.sandbox, confined=True),) \
                    if rules.unconfined_asks else ()
            case d.SplitSession():
                return (self._split(effect),)
            case d.AbortTurn():
                return (ev.TurnAborted(error=effect.error),)
            case d.SwitchSettings():
                forking, self.forking = self.forking, False
                return (self.fork_switch(),) if forking else ()
            case d.RequestCompression():
                return (ev.CompressionRequested(requested_at=now),)
            case d.LoadHistory():
                return (ev.HistoryLoaded(messages=effect.messages),)
            case d.BeginTurn():
                return (ev.TurnStarted(
                    turn_id=f"turn{play.index}", task_id=f"task{play.index}", started_at=now,
                    user_message=effect.user_message, system_message=effect.system_message),)
            case d.ReadPromptInputs():
                # A working directory with no files: the turn still records what it read.
                return (ev.PromptInputsRead(cwd=SIM_CWD),)
            case d.ReadHints():
                return (ev.HintsRead(dirs=effect.dirs),)
            case d.ReadClock():
                return (ev.ClockRead(epoch=self.epoch()),)
            case d.TakeCheckpoint():
                return (ev.Checkpointed(turn=effect.turn, tree=SIM_CWD,
                                        commit=f"{effect.turn:040x}", files=1),)
        return play.answer(effect, self)

    def fork_switch(self) -> ev.SessionForked:
        """This session becomes a fork of itself here, going on with ``forked`` settings."""
        assert self.state.settings is not None
        return ev.SessionForked(origin_session_id="origin", origin_seq=len(self.events),
                                forked_at=self.now(), settings=forked(self.state.settings))

    # --- splits ----------------------------------------------------------------------------------
    def _split(self, split: d.SplitSession) -> ev.SessionSplit:
        """The child starts, with the parent's compressed context, before the parent records
        the split (as ``pipeline.agent.Agent._split``)."""
        parent = _Session(flow=self.flow, state=self.state, events=self.events)
        child_id = f"{parent.state.session_id}.{len(self.logs)}"
        self.state, self.events, self.inherit = State(), [], split.context
        self.logs.append(self.events)
        self.open(Opening(settings=self.settings, session_id=child_id,
                          parent_session_id=parent.state.session_id, tools=self.tools,
                          child=True))
        assert self.state.context.split_pending is None and self.inherit is None
        self.child = _Session(flow=self.flow, state=self.state, events=self.events)
        self.flow, self.state, self.events = parent.flow, parent.state, parent.events
        return ev.SessionSplit(child_session_id=child_id, reason=split.context.reason)

    def _go_on_in_child(self) -> None:
        """The parent's machine returned after its split: the session goes on in the child."""
        child, self.child = self.child, None
        assert child is not None, "the machine ended without a split"
        self.flow, self.state, self.events = child.flow, child.state, child.events
        self.settings = self.state.settings or self.settings


def settings_of(script: SessionScript) -> ev.SessionSettings:
    """The session's settings; without resilience no retries: a failed call ends the turn (as
    in the live runs of ``tests/pipeline/test_replay_properties.py``)."""
    config = ev.SessionSettings(model="m", provider="p", max_turns=script.max_turns,
                                context_length=script.context_length, max_retries=0,
                                load_context=True, compression_enabled=script.compression)
    res = script.resilience
    if res is None:
        return config
    (_, _, keys), *fallbacks = res.chain
    return attrs.evolve(
        config, max_retries=res.max_retries, credentials=_keys("p", keys),
        credential_refresh=res.refresh, credential_strategy=res.strategy,
        fallback_providers=tuple(ev.ProviderEntry(provider=p, model=m, credentials=_keys(p, n))
                                 for p, m, n in fallbacks),
        memory_provider="mem" if res.memory else None)


def _keys(provider: str, count: int) -> tuple[str, ...]:
    return tuple(f"{provider.upper()}_KEY_{n}" for n in range(count))


def history(pairs: tuple[tuple[str, str], ...] | None) -> tuple[Message, ...] | None:
    if pairs is None:
        return None
    return tuple(m for u, a in pairs for m in (Message(role="user", content=u),
                                                Message(role="assistant", content=a)))


def drive(script: SessionScript, after_turn: TurnCheck | None = None) -> Driver:
    """Run the whole session script through the session machine; ``after_turn(driver,
    turn_script, turn_events)`` checks each turn as it ends (unless the script stopped it)."""
    config = settings_of(script)
    res = script.resilience
    tools = TOOLS if res is None else (*TOOLS, TERMINAL)
    driver = Driver(settings=config, tools=tools, window=script.window,
                    clock_step=100.0 if res is None else res.clock_step)
    driver.open(Opening(settings=config, session_id="s", tools=tools))
    for index, turn_script in enumerate(script.turns):
        for move in turn_script.before:
            driver.move(move, index)
        driver.run_turn(index, turn_script, history(script.history) if index == 0 else None,
                        after_turn)
    driver.end()
    return driver
