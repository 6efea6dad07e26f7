"""Named examples for the turn machine (``stages.turn.machine``): the order of its asks, read off the
generator with hand-served observations. The simulation (``tests.strategies.simulation``)
drives the same generator under hypothesis; the pipeline tests drive it live and in replay."""

from __future__ import annotations

import attrs

from stages.decision import BeginTurn, CallModel, PollInterrupt, RunTools, Wait
from stages.fold import apply_event
from stages.log import events as ev
from stages.log.state import State
from stages.log.tool_specs import ToolOutcome
from stages.turn import machine as turn
from tests.stages.helpers import SETTINGS, call, drive_turn, reply, spec


def _session(settings: ev.SessionSettings = SETTINGS) -> State:
    state = apply_event(State(), ev.SessionStarted(session_id="s", started_at="t",
                                                   settings=settings))
    return apply_event(state, ev.ToolsDeclared(tools=(spec("read", read_only=True),)))


def _drive(state: State, serve, text: str = "hello") -> list[tuple[str, str]]:
    return drive_turn(state, serve, text)[0]


def _server(*replies: ev.Event):
    queue = list(replies)

    def serve(ask: turn.Perform, state: State) -> tuple[ev.Event, ...]:
        effect = ask.effect
        if isinstance(effect, BeginTurn):
            return (ev.TurnStarted(turn_id="t1", task_id="k1", started_at="t",
                                   user_message=effect.user_message),)
        if isinstance(effect, PollInterrupt):
            return ()
        if isinstance(effect, CallModel):
            return (queue.pop(0),)
        if isinstance(effect, RunTools):
            return tuple(ev.ToolRan(outcome=ToolOutcome(
                call_id=c.call_id, name=c.name, content="ok", ok=True, error=None,
                duration_ms=1.0)) for c in effect.calls)
        if isinstance(effect, Wait):
            return (ev.Waited(seconds=0.0, jitter=0.5),)
        raise AssertionError(effect)
    return serve


def test_a_plain_answer_asks_in_the_documented_order() -> None:
    asks = _drive(_session(), _server(reply("hi")))
    assert asks == [
        ("input", "BeginTurn"),
        ("prompt", "system_prompt_set"),
        ("interrupt", "PollInterrupt"),
        ("request", "model_requested"),
        ("model_call", "CallModel"),
        ("interrupt", "PollInterrupt"),
        ("answer", "turn_finished"),
    ]


def test_a_tool_call_is_planned_run_and_answered() -> None:
    asks = _drive(_session(), _server(reply(None, call("c1", "read")), reply("done")))
    assert asks[4:] == [
        ("model_call", "CallModel"),
        ("interrupt", "PollInterrupt"),
        ("tool_plan", "tools_planned"),
        ("tools", "RunTools"),
        ("interrupt", "PollInterrupt"),
        ("request", "model_requested"),
        ("model_call", "CallModel"),
        ("interrupt", "PollInterrupt"),
        ("answer", "turn_finished"),
    ]


def test_a_retry_is_decided_by_recovery_and_waits_in_backoff() -> None:
    failed = ev.ModelFailed(error_type="ProviderHTTPError", message="overloaded", status=503)
    asks = _drive(_session(), _server(failed, reply("hi")))
    assert asks[4:8] == [
        ("model_call", "CallModel"),
        ("interrupt", "PollInterrupt"),
        ("recovery", "recovery_decided"),
        ("backoff", "Wait"),
    ]
    assert asks[-1] == ("answer", "turn_finished")


def test_an_unknown_tool_is_refused_by_the_tool_plan_and_the_model_asked_again() -> None:
    asks = _drive(_session(), _server(reply(None, call("c1", "nope")), reply("sorry")))
    assert ("tool_plan", "tool_call_rejected") in asks
    assert not any(what == "RunTools" for _, what in asks)
    assert asks[-1] == ("answer", "turn_finished")


def test_a_session_with_cooldowns_reads_the_clock_before_the_stages_of_a_call() -> None:
    pooled = attrs.evolve(SETTINGS, credentials=("KEY_A", "KEY_B"))

    def serve(ask: turn.Perform, state: State) -> tuple[ev.Event, ...]:
        if type(ask.effect).__name__ == "ReadClock":
            return (ev.ClockRead(epoch=1000.0),)
        return _server(reply("hi"))(ask, state)
    asks = _drive(_session(pooled), serve)
    assert asks[3:6] == [("clock", "ReadClock"), ("credentials", "credential_selected"),
                         ("request", "model_requested")]
