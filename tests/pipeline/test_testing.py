"""The shipped test doubles (``pipeline.testing``) are strict and need no wall clock."""

from __future__ import annotations

import pytest

from pipeline import Agent
from pipeline.testing import CountingIds, FakeClock, ScriptedModel, UnexpectedModelCall
from stages.decision import ModelRequest
from stages.errors import ProviderHTTPError


def request(purpose: str = "turn") -> ModelRequest:
    return ModelRequest(model="m", provider="p", api_mode="chat_completions", purpose=purpose,
                        system_prompt=None, messages=())


def test_scripted_model_answers_in_order_and_records_requests():
    model = ScriptedModel("one", lambda req: f"echo {req.purpose}")
    deltas: list[str] = []
    first = model.complete(request(), on_delta=deltas.append)
    second = model.complete(request("summary"))
    assert (first.message.content, first.streamed, deltas) == ("one", True, ["one"])
    assert (second.message.content, second.streamed) == ("echo summary", False)
    assert [r.purpose for r in model.requests] == ["turn", "summary"]
    model.assert_complete()


def test_scripted_model_fails_on_an_unexpected_call_and_on_unused_steps():
    model = ScriptedModel()
    with pytest.raises(UnexpectedModelCall, match="unexpected model call #1"):
        model.complete(request())
    with pytest.raises(UnexpectedModelCall):
        model.assert_complete()  # remembered, even if the caller swallowed the error
    left = ScriptedModel("used", "unused")
    left.complete(request())
    with pytest.raises(AssertionError, match="1 scripted model step"):
        left.assert_complete()


def test_scripted_failures_drive_the_agents_recovery(home):
    model = ScriptedModel(ProviderHTTPError("HTTP 503 from p: busy", status=503), "back")
    clock = FakeClock()
    with Agent(client=model, home=home, clock=clock, ids=CountingIds(), retry_base_delay=30.0,
               durability="flush") as agent:
        result = agent.run("hi")
    model.assert_complete()
    assert result.final_response == "back"
    assert sum(clock.slept) >= 30.0  # a 30 s backoff, taken on the fake clock at once


def test_an_unexpected_call_fails_the_turn_loudly(home):
    model = ScriptedModel()
    with Agent(client=model, home=home, ids=CountingIds(), durability="flush") as agent, \
            pytest.raises(UnexpectedModelCall):
        agent.run("hi")


def test_fake_clock_moves_only_when_told_or_slept_on():
    clock = FakeClock()
    assert clock.now() == "2026-01-01T00:00:00.000000+00:00"
    clock.sleep(1.5)
    clock.advance(0.5)
    assert (clock.epoch() - 1_767_225_600.0, clock.monotonic(), clock.slept) == (2.0, 2.0, [1.5])
    ticking = FakeClock(tick=0.001)
    assert ticking.now() != ticking.now()


def test_counting_ids_count():
    ids = CountingIds(fraction=0.25)
    assert [ids.session_id(), ids.session_id()] == ["session_0001", "session_0002"]
    assert [ids.new_id(), ids.new_id(), ids.fraction()] == ["id0001", "id0002", 0.25]
