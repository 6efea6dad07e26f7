"""A pure simulation of the turn loop: ``Driver`` drives the real turn machine
(``stages.turn.machine``) as ``pipeline.shell.runner`` does, with every observation (turn start,
model reply, failure, interruption, tool result, backoff, key refresh, approval, memory recall)
taken from a generated :class:`~tests.strategies.scripts.SessionScript`.

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

from stages.decision import (
    AskApproval,
    BeginTurn,
    CallModel,
    LoadHistory,
    ModelRequest,
    PollInterrupt,
    PrefetchMemory,
    ReadClock,
    ReadHints,
    ReadPromptInputs,
    RefreshCredential,
    RunTools,
    Summarise,
    Wait,
)
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.context_window import session_window
from stages.log.messages import Message, ToolCall
from stages.log.state import State
from stages.log.tool_specs import ToolOutcome, ToolSpec
from stages.prompt.memory import recall_block
from stages.recovery.backoff import backoff_delay
from stages.tools.checks import shares_a_path
from stages.tools.dangerous import detect
from stages.turn import machine as turn
from tests.strategies.recovery_checks import check_recovery
from tests.strategies.scripts import (
    CutStep,
    FailStep,
    ReplyStep,
    SessionScript,
    Step,
    TurnScript,
)

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

FALLBACK = ReplyStep(content="(the script ran out: a plain answer)")

REISSUED = frozenset({"retry", "rotate", "refresh", "fallback"})
"""The recovery moves that send a failed call again (only resilient sessions make them)."""


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
class Driver:
    """A pure stand-in for ``SessionRunner``, fed by a script."""

    settings: ev.SessionSettings
    tools: tuple[ToolSpec, ...] = TOOLS
    clock_step: float = 100.0
    """Seconds the simulated clock moves per event."""
    state: State = attrs.field(factory=State)
    events: list[ev.Event] = attrs.field(factory=list)
    calls_made: int = 0
    consumed: list[list[Step]] = attrs.field(factory=list)
    """The script steps each turn used, in order (``FALLBACK`` where the script ran out)."""
    reissued: int = 0
    """The current turn's calls that re-issued a failed one (a retry, another key, the next
    provider): they count as model calls, but not against the iteration budget's bound."""

    def add(self, event: ev.Event) -> None:
        latest = next((m.content for m in reversed(self.state.messages) if m.role == "user"),
                      None)
        if isinstance(event, ev.TurnStarted):
            self.reissued = 0
        elif isinstance(event, ev.RecoveryDecided) and event.action in REISSUED and (
                self.state.turn is not None and self.state.turn.failure is not None):
            self.reissued += 1
        before, self.state = self.state, apply_event(self.state, event)
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

    def emit(self, events: tuple[ev.Event, ...]) -> None:
        for event in events:
            self.add(event)

    def start(self) -> None:
        self.add(ev.SessionStarted(session_id="s", started_at="t0", settings=self.settings))
        self.add(ev.ToolsDeclared(tools=self.tools))

    def epoch(self) -> float:
        return 1000.0 + self.clock_step * len(self.events)

    def run_turn(self, index: int, script: TurnScript,
                 history: tuple[Message, ...] | None) -> None:
        """Drive the real turn machine, serving every observation from the script."""
        steps = list(script.steps)
        used: list[Step] = []
        self.consumed.append(used)
        interrupt, runs = script.interrupt_first, 0
        answers = _Answers(script)
        if history is not None and history == self.state.messages:
            history = None  # as Agent.run_conversation: the session's own history is not reloaded
        flow = turn.run_turn(script.user, system_message=script.system_message, history=history)
        ask = next(flow)
        for _ in range(2000):
            if isinstance(ask, turn.Record):
                self.emit(ask.events)
            else:
                effect = ask.effect
                if isinstance(effect, LoadHistory):
                    self.add(ev.HistoryLoaded(messages=effect.messages))
                elif isinstance(effect, BeginTurn):
                    self.add(ev.TurnStarted(
                        turn_id=f"turn{index}", task_id=f"task{index}",
                        started_at=dt.datetime.fromtimestamp(self.epoch(), dt.UTC).isoformat(),
                        user_message=effect.user_message, system_message=effect.system_message))
                elif isinstance(effect, PollInterrupt):
                    if interrupt:
                        self.add(ev.Interrupted(during=effect.during))
                    interrupt = False
                elif isinstance(effect, ReadPromptInputs):
                    # A working directory with no files: the turn still records what it read.
                    self.add(ev.PromptInputsRead(cwd=SIM_CWD))
                elif isinstance(effect, ReadHints):
                    self.add(ev.HintsRead(dirs=effect.dirs))
                elif isinstance(effect, ReadClock):
                    self.add(ev.ClockRead(epoch=self.epoch()))
                elif isinstance(effect, Summarise):
                    self.add(self.summarise(effect.request, index))
                elif isinstance(effect, Wait | RefreshCredential | AskApproval | PrefetchMemory):
                    self.add(answers.answer(effect, self))
                elif isinstance(effect, CallModel):
                    used.append(steps.pop(0) if steps else FALLBACK)
                    interrupt = self.call_model(effect.request, used[-1], index)
                else:
                    assert isinstance(effect, RunTools), effect
                    runs = self.run_tools(effect, script.tool_ok, runs)
            try:
                ask = flow.send(self.state)
            except StopIteration:
                return
        raise AssertionError("the turn did not finish")

    def call_model(self, request: ModelRequest, step: ReplyStep | FailStep | CutStep,
                   index: int) -> bool:
        recall = recall_block(self.state, self.settings)
        if recall is None:
            assert request.messages is self.state.messages  # shared, never copied
        else:  # the recalled memory rides on the turn's user message, in a copy of the history
            first = self.state.turn.first_message
            assert request.messages[first].content.endswith(recall)
            assert request.messages[:first] + request.messages[first + 1:] == (
                self.state.messages[:first] + self.state.messages[first + 1:])
        assert violations(request.messages) == [], "a request must send a closed history"
        if self.state.turn.budget_exhausted:
            assert request.tools == () and request.purpose == "budget_summary"
        if isinstance(step, CutStep):
            self.add(ev.Interrupted(during="model_call"))
            return False
        if isinstance(step, FailStep):
            self.add(ev.ModelFailed(error_type=step.error_type, message=step.message,
                                    status=step.status, retry_after=step.retry_after,
                                    partial=step.partial))
            return False
        calls = []
        for c in step.calls:
            self.calls_made += 1
            calls.append(ToolCall(id=f"call{index}_{self.calls_made}", name=c.name,
                                  arguments=c.arguments))
        message = Message(role="assistant", content=step.content, tool_calls=tuple(calls),
                          reasoning=step.reasoning)
        self.add(ev.ModelReplied(message=message,
                                 finish_reason="tool_calls" if calls else "stop",
                                 usage=ev.Usage(input_tokens=3, output_tokens=2), model="m",
                                 latency_ms=1.0))
        return step.then_interrupt

    def summarise(self, request: ModelRequest, index: int) -> ev.Event:
        """The summary call fits its window; every other turn's summary fails."""
        assert request.purpose == "compression" and request.tools == ()
        window = session_window(self.settings, self.state.context.windows).tokens
        sent = sum(len(m.content or "") for m in request.messages) // 4
        assert sent + (request.max_tokens or 0) <= window or window < 1000, (sent, window)
        if index % 2:
            return ev.SummaryFailed(error_type="ProviderHTTPError", message="overloaded")
        return ev.ContextSummarised(text=f"## Done\n- turn {index} summarised\n## Facts\n- f",
                                    model="m")

    def run_tools(self, step: RunTools, tool_ok: tuple[bool, ...], runs: int) -> int:
        pending = {c.id: c for c in self.state.turn.pending}
        for invocation in step.calls:
            call = pending[invocation.call_id]
            assert invocation.name == call.name
            assert self.state.tool(call.name) is not None
        assert step.concurrent == (len(step.calls) > 1 and not any(
            self.state.tool(c.name).interactive for c in step.calls) and not (
            self.settings.rules >= 3 and shares_a_path(list(step.calls))))
        for invocation in step.calls:
            ok = tool_ok[runs % len(tool_ok)]
            runs += 1
            self.add(ev.ToolRan(outcome=ToolOutcome(
                call_id=invocation.call_id, name=invocation.name, ok=ok,
                content=f"result of {invocation.arguments}" if ok else '{"error":"failed"}',
                error=None if ok else "failed")))
        return runs


@attrs.define
class _Answers:
    """How a turn's script answers the resilience effects, each list cycled in turn."""

    script: TurnScript
    waits: int = 0
    refreshes: int = 0
    approvals: int = 0

    def answer(self, effect: Wait | RefreshCredential | AskApproval | PrefetchMemory,
               driver: Driver) -> ev.Event:
        last = driver.events[-1]
        if isinstance(effect, Wait):
            # A backoff follows the retry decision it serves, with that decision's attempt.
            assert isinstance(last, ev.RecoveryDecided) and last.action == "retry", last
            assert effect.attempt == last.attempt <= driver.settings.max_retries
            self.waits += 1
            if self.script.interrupt_backoff and self.waits == 1:
                return ev.Interrupted(during="backoff")
            jitter = (len(driver.events) % 10) / 10
            return ev.Waited(seconds=backoff_delay(effect.attempt, jitter=jitter,
                                                   retry_after=effect.retry_after,
                                                   base=driver.settings.retry_base_delay),
                             jitter=jitter)
        if isinstance(effect, RefreshCredential):
            assert isinstance(last, ev.RecoveryDecided) and last.action == "refresh", last
            assert last.credential_id == effect.credential_id
            refreshed = _cycled(self.script.refreshed, self.refreshes)
            self.refreshes += 1
            return ev.CredentialRefreshed(credential_id=effect.credential_id,
                                          refreshed=refreshed)
        if isinstance(effect, AskApproval):
            danger = detect(effect.command)
            assert danger is not None and not danger.hard and danger.key == effect.pattern
            assert effect.call_id in {c.id for c in driver.state.turn.pending}
            choice = _cycled(self.script.approvals, self.approvals)
            self.approvals += 1
            return ev.ApprovalAnswered(call_id=effect.call_id, pattern=effect.pattern,
                                       choice=choice, source="callback")
        if self.script.recall_fails:
            return ev.MemoryPrefetched(failed=("mem",))
        return ev.MemoryPrefetched(results=(("mem", f"recalled: {effect.query[:20]}"),))


def _cycled(values: tuple, index: int):
    return values[index % len(values)]


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


def drive(script: SessionScript,
          after_turn: Callable[[Driver, TurnScript, list[ev.Event]], None] | None = None) -> Driver:
    """Run the whole session script; ``after_turn(driver, turn_script, turn_events)`` checks each
    turn as it ends."""
    config = settings_of(script)
    res = script.resilience
    driver = Driver(settings=config) if res is None else Driver(
        settings=config, tools=(*TOOLS, TERMINAL), clock_step=res.clock_step)
    driver.start()
    for index, turn_script in enumerate(script.turns):
        before = len(driver.events)
        driver.run_turn(index, turn_script, history(script.history) if index == 0 else None)
        if after_turn is not None:
            after_turn(driver, turn_script, driver.events[before:])
    return driver
