"""Smart routing through whole sessions: the cheap model, the fallback, replay."""

from __future__ import annotations

from pipeline.agent import Agent
from pipeline.shell.replay import replay
from pipeline.testing import CountingIds, FakeClock, ScriptedModel
from stages.errors import ProviderHTTPError


def _agent(tmp_path, model) -> Agent:
    return Agent(client=model, home=tmp_path / "home", clock=FakeClock(), ids=CountingIds(),
                 cheap_model={"provider": "custom", "model": "mini"}, retry_base_delay=0.0)


def test_a_simple_turn_goes_to_the_cheap_model_and_replays(tmp_path) -> None:
    model = ScriptedModel("Oslo.", "Here is the plan.")
    with _agent(tmp_path, model) as agent:
        agent.chat("Capital of Norway?")
        agent.chat("Plan the migration of our database to the new cluster")
        session_id = agent.session_id
    assert [r.model for r in model.requests] == ["mini", "scripted"]
    assert replay(tmp_path / "home" / "sessions", session_id).identical


def test_a_cheap_model_failure_falls_back_to_the_primary(tmp_path) -> None:
    model = ScriptedModel(ProviderHTTPError("overloaded", status=503), "Oslo.")
    with _agent(tmp_path, model) as agent:
        assert agent.chat("Capital of Norway?") == "Oslo."
        session_id = agent.session_id
    assert [r.model for r in model.requests] == ["mini", "scripted"]
    assert replay(tmp_path / "home" / "sessions", session_id).identical
