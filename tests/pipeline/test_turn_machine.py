"""The turn machine through the live shell: the retry budget per model call, fold before
record, replies the log could not read back, settings refused before anything is logged."""

from __future__ import annotations

import attrs
import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from stages.errors import ProviderHTTPError
from stages.log import events as ev
from stages.log.messages import Message, ToolCall


def ping() -> str:
    """Check that the service is up."""
    return "pong"


class Scripted:
    """A model client that plays ``steps``: an exception is raised, an event returned."""

    def __init__(self, steps: list) -> None:
        self.steps = list(steps)

    def complete(self, request, *, on_delta=None, cancel=None) -> ev.ModelReplied:
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def _reply(content: str | None = None, *calls: ToolCall, model: object = "m") -> ev.ModelReplied:
    return ev.ModelReplied(message=Message(role="assistant", content=content, tool_calls=calls),
                           finish_reason="tool_calls" if calls else "stop",
                           usage=ev.Usage(input_tokens=1), model=model, latency_ms=1.0)


def _events(home, session_id) -> list[ev.Event]:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", session_id))]


def test_a_long_turn_with_scattered_transient_failures_completes(tmp_path) -> None:
    """The retry budget is per model call (the seeds): a 100-call turn where 30% of the
    attempts fail, never four in a row, completes. Counted per turn it failed at the 4th."""
    steps: list = []
    for index in range(100):
        steps += [ProviderHTTPError("overloaded", status=503)] * (index % 3 == 0) * 1
        steps += [ProviderHTTPError("bad gateway", status=502)] * (index % 10 == 0)
        last = index == 99
        steps.append(_reply("done") if last else _reply(None, ToolCall(
            id=f"c{index}", name="ping", arguments="{}")))
    failures = sum(isinstance(s, Exception) for s in steps)
    assert failures / len(steps) >= 0.29
    with Agent(client=Scripted(steps), tools=[ping], home=tmp_path, max_retries=3,
               retry_base_delay=0.0) as agent:
        result = agent.run_conversation("check it a hundred times")
    assert result["completed"] and result["final_response"] == "done"
    assert result["api_calls"] == 100 + failures
    assert replay(tmp_path / "sessions", result["session_id"]).identical


def test_a_reply_the_log_could_not_read_back_is_a_failed_call_not_a_crash(tmp_path) -> None:
    broken = _reply("hi", model=5)  # a number where the log keeps text
    with Agent(client=Scripted([broken]), home=tmp_path, max_retries=0) as agent:
        result = agent.run_conversation("hello")
    assert result["failed"] and "cannot be recorded" in result["error"]
    events = _events(tmp_path, result["session_id"])
    assert [e.kind for e in events if isinstance(e, ev.ModelFailed)] == ["model_failed"]
    assert replay(tmp_path / "sessions", result["session_id"]).identical


def test_an_event_the_fold_refuses_never_reaches_the_log(tmp_path) -> None:
    with Agent(client=Scripted([_reply("hi")]), home=tmp_path) as agent:
        agent.run_conversation("hello")
        runner = agent._runner
        path = session_path(tmp_path / "sessions", agent.session_id)
        before = path.read_bytes()
        orphan = ev.ToolCallRejected(call=ToolCall(id="x", name="y", arguments="{}"),
                                     reason="r", content="c")
        closed = attrs.evolve(runner.state, turn=None)
        runner.state = closed
        with pytest.raises(ValueError):
            runner.emit("test", attrs.evolve(_decision(orphan)))
        assert path.read_bytes() == before and runner.state is closed


def _decision(*events: ev.Event):
    from stages.decision import Decision
    return Decision(events=events)


@pytest.mark.parametrize("change", [
    {"credential_strategy": "random"}, {"max_tokens": 0}, {"max_turns": 0},
    {"cache_ttl": "2h"}, {"api_mode": "chat"}, {"preflight_threshold": 0.0},
])
def test_settings_no_stage_can_follow_are_refused_when_built(change) -> None:
    with pytest.raises(ValueError, match=next(iter(change))):
        ev.SessionSettings(model="m", provider="p", **change)


def test_a_model_client_that_raises_a_bug_ends_the_turn_not_the_session(tmp_path) -> None:
    """No provider error escapes a turn: even an adapter's own bug (here a KeyError on an odd
    body) is a failed call with a clear error, and the session goes on."""
    steps: list = [KeyError("choices"), _reply("back")]
    with Agent(client=Scripted(steps), home=tmp_path, max_retries=0) as agent:
        failed = agent.run_conversation("hello")
        after = agent.run_conversation("again")
    assert failed["failed"] and "KeyError" in failed["error"]
    assert after["completed"] and after["final_response"] == "back"
    assert replay(tmp_path / "sessions", failed["session_id"]).identical


def test_the_session_s_own_history_passed_back_is_not_loaded_again(tmp_path) -> None:
    """Stateless callers pass the whole conversation every turn: when it is the session's own
    history, it is not redacted, encoded and logged again (it was 48% of intake at 2,000)."""
    steps = [_reply("one"), _reply("two"), _reply("three")]
    with Agent(client=Scripted(steps), home=tmp_path) as agent:
        first = agent.run_conversation("a", conversation_history=[])
        second = agent.run_conversation("b", conversation_history=first["messages"])
        edited = [*second["messages"][:-1], {"role": "assistant", "content": "changed"}]
        agent.run_conversation("c", conversation_history=edited)
        sid = agent.session_id
    kinds = [e.kind for e in _events(tmp_path, sid)]
    assert kinds.count("history_loaded") == 1  # only the edited one
    assert second["final_response"] == "two"
    assert replay(tmp_path / "sessions", sid).identical
