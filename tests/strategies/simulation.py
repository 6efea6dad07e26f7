"""A pure simulation of the turn loop: ``Driver`` drives the real turn machine
(``stages.turn.machine``) as ``pipeline.shell.runner`` does, with every observation (turn start, model reply,
failure, interruption, tool result) taken from a generated
:class:`~tests.strategies.scripts.SessionScript`.

After every event the driver checks that the history alternates (the last calls may still await
results) and that the turn's model calls stay within ``max_turns + 1``. It records which script
steps each turn consumed, so a real pipeline can be fed exactly the same replies.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from stages.context.window import session_window
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.fold import apply_event
from stages.log.messages import Message, ToolCall
from stages.log.state import State
from stages.tools.checks import shares_a_path
from stages.tools.specs import ToolOutcome, ToolSpec
from stages.turn import machine as turn
from stages.turn.decision import (
    BeginTurn,
    CallModel,
    LoadHistory,
    ModelRequest,
    PollInterrupt,
    ReadClock,
    ReadHints,
    ReadPromptInputs,
    RunTools,
    Summarise,
)
from tests.strategies.scripts import (
    CutStep,
    FailStep,
    ReplyStep,
    SessionScript,
    Step,
    TurnScript,
)

__all__ = ["FALLBACK", "SIM_CWD", "TOOLS", "Driver", "check_pairs", "drive", "history"]

TOOLS = (
    ToolSpec(name="read", description="Read a file.", parameters='{"type":"object"}',
             read_only=True),
    ToolSpec(name="write", description="Write a file.", parameters='{"type":"object"}'),
    ToolSpec(name="ask", description="Ask the user.", parameters='{"type":"object"}',
             interactive=True),
)

SIM_CWD = "/work/sim"
"""The simulated working directory (a live run uses a directory of the same name)."""

FALLBACK = ReplyStep(content="(the script ran out: a plain answer)")


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
    state: State = attrs.field(factory=State)
    events: list[ev.Event] = attrs.field(factory=list)
    calls_made: int = 0
    consumed: list[list[Step]] = attrs.field(factory=list)
    """The script steps each turn used, in order (``FALLBACK`` where the script ran out)."""

    def add(self, event: ev.Event) -> None:
        latest = next((m.content for m in reversed(self.state.messages) if m.role == "user"),
                      None)
        self.state = apply_event(self.state, event)
        if isinstance(event, ev.ContextCompressed) and latest is not None:
            # Compression never loses the latest user message.
            assert any(m.role == "user" and latest in (m.content or "")
                       for m in self.state.messages), (latest, self.state.messages)
        self.events.append(event)
        problems = violations(self.state.messages, open_tail_ok=True)
        assert problems == [], (event, problems)
        turn = self.state.turn
        if turn is not None:
            assert turn.api_calls <= self.settings.max_turns + 1, turn

    def emit(self, events: tuple[ev.Event, ...]) -> None:
        for event in events:
            self.add(event)

    def start(self) -> None:
        self.add(ev.SessionStarted(session_id="s", started_at="t0", settings=self.settings))
        self.add(ev.ToolsDeclared(tools=TOOLS))

    def run_turn(self, index: int, script: TurnScript,
                 history: tuple[Message, ...] | None) -> None:
        """Drive the real turn machine, serving every observation from the script."""
        steps = list(script.steps)
        used: list[Step] = []
        self.consumed.append(used)
        interrupt, runs = script.interrupt_first, 0
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
                        turn_id=f"turn{index}", task_id=f"task{index}", started_at="t",
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
                    self.add(ev.ClockRead(epoch=1000.0 + 100 * len(self.events)))
                elif isinstance(effect, Summarise):
                    self.add(self.summarise(effect.request, index))
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
        assert request.messages is self.state.messages  # shared, never copied
        assert violations(request.messages) == [], "a request must send a closed history"
        if self.state.turn.budget_exhausted:
            assert request.tools == () and request.purpose == "budget_summary"
        if isinstance(step, CutStep):
            self.add(ev.Interrupted(during="model_call"))
            return False
        if isinstance(step, FailStep):
            self.add(ev.ModelFailed(error_type=step.error_type, message=step.message,
                                    status=step.status))
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


def history(pairs: tuple[tuple[str, str], ...] | None) -> tuple[Message, ...] | None:
    if pairs is None:
        return None
    return tuple(m for u, a in pairs for m in (Message(role="user", content=u),
                                                Message(role="assistant", content=a)))


def drive(script: SessionScript,
          after_turn: Callable[[Driver, TurnScript, list[ev.Event]], None] | None = None) -> Driver:
    """Run the whole session script; ``after_turn(driver, turn_script, turn_events)`` checks each
    turn as it ends."""
    # No retries: a failed call ends the turn here; the retry paths are tested end to end.
    config = ev.SessionSettings(model="m", provider="p", max_turns=script.max_turns,
                                context_length=script.context_length, max_retries=0,
                                load_context=True, compression_enabled=script.compression)
    driver = Driver(settings=config)
    driver.start()
    for index, turn_script in enumerate(script.turns):
        before = len(driver.events)
        driver.run_turn(index, turn_script, history(script.history) if index == 0 else None)
        if after_turn is not None:
            after_turn(driver, turn_script, driver.events[before:])
    return driver
