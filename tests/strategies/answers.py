"""How a scripted turn (``tests.strategies.scripts.TurnScript``) answers what the turn machine
asks of the simulation (``tests.strategies.simulation``): model replies, failures and cuts,
tool results, backoffs, key refreshes, approvals, memory recalls, interrupts and a fork taking
up its own settings at a poll. Each answer also checks the ask against the state it was made in
(the request sends a closed, shared history; a backoff follows its retry decision; ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from stages import decision as d
from stages.log import events as ev
from stages.log.alternation import violations
from stages.log.context_window import session_window
from stages.log.messages import Message, ToolCall
from stages.log.tool_specs import ToolOutcome
from stages.prompt.memory import recall_block
from stages.prompt.untrusted import screened_outcome
from stages.recovery.backoff import backoff_delay
from stages.tools.checks import shares_a_path
from stages.tools.dangerous import detector
from tests.strategies.scripts import CutStep, FailStep, ReplyStep, Step, TurnScript

if TYPE_CHECKING:
    from tests.strategies.simulation import Driver

__all__ = ["FALLBACK", "Play", "forked"]

FALLBACK = ReplyStep(content="(the script ran out: a plain answer)")

_QUIET = TurnScript(user="", steps=())
"""What answers a command that is no turn (a compression asks for a summary, nothing else)."""


def forked(settings: ev.SessionSettings) -> ev.SessionSettings:
    """A fork's own settings: another model and another output cap (the rest is the origin's,
    so the budget and recovery checks keep their bounds)."""
    return attrs.evolve(settings, model="m-fork" if settings.model == "m" else "m",
                        max_tokens=None if settings.max_tokens else 256)


@attrs.define
class Play:
    """One command's answers, from its script; the lists of the script are cycled."""

    index: int
    script: TurnScript = _QUIET
    steps: list[Step] = attrs.field(init=False)
    used: list[Step] = attrs.field(factory=list)
    interrupt: bool = attrs.field(init=False)
    added: int = 0
    """Events the command recorded so far (where ``script.stop_at`` stops it)."""
    stopped: bool = False
    runs: int = 0
    waits: int = 0
    refreshes: int = 0
    approvals: int = 0
    polls: int = 0
    steer_waiting: bool = False
    steered: str | None = None
    """A message steered into the turn and not yet sent to the model."""

    def __attrs_post_init__(self) -> None:
        self.steps = list(self.script.steps)
        self.interrupt = self.script.interrupt_first

    def answer(self, effect: d.Effect, driver: Driver) -> tuple[ev.Event, ...]:
        if isinstance(effect, d.PollInterrupt):
            return self.poll(effect, driver)
        if isinstance(effect, d.CallModel):
            self.used.append(self.steps.pop(0) if self.steps else FALLBACK)
            return (self.call_model(effect.request, self.used[-1], driver),)
        if isinstance(effect, d.RunTools):
            return self.run_tools(effect, driver)
        if isinstance(effect, d.Summarise):
            return (summarise(effect.request, self.index, driver),)
        assert isinstance(effect, d.Wait | d.RefreshCredential | d.AskApproval
                          | d.PrefetchMemory), effect
        return (self.recover(effect, driver),)

    def poll(self, effect: d.PollInterrupt, driver: Driver) -> tuple[ev.Event, ...]:
        """A fork's switch first (an interrupt then waits for the next poll), as the live
        performers poll."""
        self.polls += 1
        if self.polls - 1 == self.script.fork_at_poll:
            return (driver.fork_switch(),)
        if self.polls - 1 == self.script.steer_at_poll:
            self.steer_waiting = True
        if self.interrupt:
            self.interrupt = False
            return (ev.Interrupted(during=effect.during),)
        if not (self.steer_waiting and effect.steer):
            return ()
        # As the live queue: the message waits for a poll at a step boundary.
        self.steer_waiting = False
        self.steered = f"steered into turn {self.index}"
        return (ev.Steered(text=self.steered),)

    def call_model(self, request: d.ModelRequest, step: Step, driver: Driver) -> ev.Event:
        state = driver.state
        recall = recall_block(state, driver.settings)
        if recall is None:
            assert request.messages is state.messages  # shared, never copied
        else:  # the recalled memory rides on the turn's user message, in a copy of the history
            first = state.turn.first_message
            assert request.messages[first].content.endswith(recall)
            assert request.messages[:first] + request.messages[first + 1:] == (
                state.messages[:first] + state.messages[first + 1:])
        assert violations(request.messages) == [], "a request must send a closed history"
        if self.steered is not None:
            # A steered message arrives in the very next request, as the user's last word (a
            # compaction's marker may stand before it, in the same message, on a tiny window).
            assert request.messages[-1].role == "user"
            assert request.messages[-1].text.endswith(self.steered), request.messages[-1]
            self.steered = None
        if state.turn.budget_exhausted:
            assert request.tools == () and request.purpose == "budget_summary"
        if isinstance(step, CutStep):
            return ev.Interrupted(during="model_call")
        if isinstance(step, FailStep):
            return ev.ModelFailed(error_type=step.error_type, message=step.message,
                                  status=step.status, retry_after=step.retry_after,
                                  partial=step.partial)
        calls = []
        for c in step.calls:
            driver.calls_made += 1
            calls.append(ToolCall(id=f"call{self.index}_{driver.calls_made}", name=c.name,
                                  arguments=c.arguments))
        message = Message(role="assistant", content=step.content, tool_calls=tuple(calls),
                          reasoning=step.reasoning)
        self.interrupt = self.interrupt or step.then_interrupt
        return ev.ModelReplied(message=message, finish_reason="tool_calls" if calls else "stop",
                               usage=ev.Usage(input_tokens=3, output_tokens=2), model="m",
                               latency_ms=1.0)

    def run_tools(self, step: d.RunTools, driver: Driver) -> tuple[ev.Event, ...]:
        state, settings = driver.state, driver.settings
        pending = {c.id: c for c in state.turn.pending}
        for invocation in step.calls:
            call = pending[invocation.call_id]
            assert invocation.name == call.name
            assert state.tool(call.name) is not None
        assert step.concurrent == (len(step.calls) > 1 and not any(
            state.tool(c.name).interactive for c in step.calls) and not (
            settings.rules >= 3 and shares_a_path(list(step.calls))))
        events = []
        for invocation in step.calls:
            ok = _cycled(self.script.tool_ok, self.runs)
            self.runs += 1
            text = self.script.tool_text or f"result of {invocation.arguments}"
            outcome = ToolOutcome(call_id=invocation.call_id, name=invocation.name, ok=ok,
                                  content=text if ok else '{"error":"failed"}',
                                  error=None if ok else "failed")
            if settings.rule_set.untrusted_marked:
                outcome = screened_outcome(outcome)
            events.append(ev.ToolRan(outcome=outcome))
        return tuple(events)

    def recover(self, effect: d.Wait | d.RefreshCredential | d.AskApproval | d.PrefetchMemory,
                driver: Driver) -> ev.Event:
        last, settings = driver.events[-1], driver.settings
        if isinstance(effect, d.Wait):
            # A backoff follows the retry decision it serves, with that decision's attempt.
            assert isinstance(last, ev.RecoveryDecided) and last.action == "retry", last
            assert effect.attempt == last.attempt <= settings.max_retries
            self.waits += 1
            if self.script.interrupt_backoff and self.waits == 1:
                return ev.Interrupted(during="backoff")
            jitter = (len(driver.events) % 10) / 10
            return ev.Waited(seconds=backoff_delay(effect.attempt, jitter=jitter,
                                                   retry_after=effect.retry_after,
                                                   base=settings.retry_base_delay),
                             jitter=jitter)
        if isinstance(effect, d.RefreshCredential):
            assert isinstance(last, ev.RecoveryDecided) and last.action == "refresh", last
            assert last.credential_id == effect.credential_id
            refreshed = _cycled(self.script.refreshed, self.refreshes)
            self.refreshes += 1
            return ev.CredentialRefreshed(credential_id=effect.credential_id,
                                          refreshed=refreshed)
        if isinstance(effect, d.AskApproval):
            danger = detector(driver.settings.rule_set)(effect.command,
                                                        driver.state.approved_patterns)
            assert danger is not None and not danger.hard and danger.key == effect.pattern
            assert effect.call_id in {c.id for c in driver.state.turn.pending}
            choice = _cycled(self.script.approvals, self.approvals)
            self.approvals += 1
            return ev.ApprovalAnswered(call_id=effect.call_id, pattern=effect.pattern,
                                       choice=choice, source="callback")
        if self.script.recall_fails:
            return ev.MemoryPrefetched(failed=("mem",))
        return ev.MemoryPrefetched(results=(("mem", f"recalled: {effect.query[:20]}"),))


def summarise(request: d.ModelRequest, index: int, driver: Driver) -> ev.Event:
    """The summary call fits its window; every other turn's summary fails."""
    assert request.purpose == "compression" and request.tools == ()
    window = session_window(driver.settings, driver.state.context.windows).tokens
    sent = sum(len(m.content or "") for m in request.messages) // 4
    assert sent + (request.max_tokens or 0) <= window or window < 1000, (sent, window)
    if index % 2:
        return ev.SummaryFailed(error_type="ProviderHTTPError", message="overloaded")
    return ev.ContextSummarised(text=f"## Done\n- turn {index} summarised\n## Facts\n- f",
                                model="m")


def _cycled(values: tuple, index: int):
    return values[index % len(values)]
