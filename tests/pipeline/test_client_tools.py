"""Rules 8: tools the caller runs itself (``Agent.run(client_tools=..., tool_results=...)``),
over real HTTP against the fake OpenAI server: offered next to the agent's own, a call to one
ends the turn, the next turn goes on from the caller's results; recorded and replayed."""

from __future__ import annotations

import json

import pytest

from pipeline.agent import Agent
from pipeline.client_tools import client_spec
from pipeline.shell.replay import replay
from stages.errors import UsageError
from stages.log.alternation import violations
from stages.prompt.untrusted import unwrapped
from tests.fake_openai import Reply

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def make(server, home) -> Agent:
    return Agent(model="fake-model", base_url=server.base_url, api_key="sk-test", home=home,
                 tools=[add])


def _offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def test_a_client_call_ends_the_turn_and_its_result_goes_on(server, home):
    server.script(
        Reply.tool_calls([("add", '{"a": 2, "b": 3}'), ("get_weather", '{"city": "Paris"}')],
                         content="Let me check.", ids=["call_add", "call_w"]),
        Reply.text("Sunny, and 2 + 3 is 5."))
    with make(server, home) as agent:
        first = agent.run("Weather in Paris, and 2 + 3?", client_tools=[WEATHER])
        assert first.turn_exit_reason == "client_tool_calls"
        assert not first.completed and not first.failed
        assert first.final_response == "Let me check."
        assert [(c.id, c.name) for c in first.tool_calls] == [("call_w", "get_weather")]
        # The agent's own call ran server-side; the client's waits for its result.
        assert unwrapped(first.messages[-1].content or "") == "5"
        second = agent.run("", client_tools=[WEATHER], tool_results=[
            {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 C"}])
    assert second.completed and second.final_response == "Sunny, and 2 + 3 is 5."
    assert second.tool_calls == ()
    assert _offered(server.requests[0]) == ["add", "get_weather"]
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "tool"]
    assert "sunny, 21 C" in sent[-1]["content"] and sent[-1]["tool_call_id"] == "call_w"
    assert sent[-1]["content"] != "sunny, 21 C"  # marked as data, as the agent's own results
    assert violations(second.messages) == []
    assert replay(home / "sessions", second.session_id).identical


def test_results_must_answer_exactly_the_calls_left_open(server, home):
    server.script(Reply.tool_calls([("get_weather", '{"city": "Oslo"}')], ids=["call_1"]))
    with make(server, home) as agent:
        agent.run("Oslo?", client_tools=[WEATHER])
        with pytest.raises(UsageError, match="must answer the calls"):
            agent.run("something else")  # the open call would break the history
        with pytest.raises(UsageError, match="call_1"):
            agent.run("", tool_results=[{"tool_call_id": "call_2", "content": "x"}])


def test_a_client_tool_may_not_shadow_the_agents_own(server, home):
    with make(server, home) as agent, pytest.raises(UsageError, match="add"):
        agent.run("hi", client_tools=[{"type": "function", "function": {"name": "add"}}])


def test_client_results_on_a_loaded_history_go_on_from_it(server, home):
    """A stateless caller (a new session each request) passes the history up to its calls and
    the results after them."""
    server.script(Reply.text("It is raining."))
    history = [{"role": "user", "content": "Rain in Bergen?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c9", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'}}]}]
    with make(server, home) as agent:
        result = agent.run("", conversation_history=history, client_tools=[WEATHER],
                           tool_results=[{"tool_call_id": "c9", "content": "rain"}])
    assert result.final_response == "It is raining."
    assert [m["role"] for m in server.requests[0]["messages"][1:]] == ["user", "assistant",
                                                                        "tool"]
    assert replay(home / "sessions", result.session_id).identical


def test_a_spec_from_openais_shape():
    spec = client_spec(WEATHER)
    assert spec.name == "get_weather" and json.loads(spec.parameters)["required"] == ["city"]
    with pytest.raises(UsageError):
        client_spec({"type": "function", "function": {"description": "no name"}})


def test_a_turn_going_on_from_client_results_syncs_memory_with_the_users_question(home):
    """The memory providers learn the exchange as the user asked it, not an empty message."""
    from pipeline.memory_providers import MemoryProvider
    from pipeline.testing import ScriptedModel, tool_calls

    class Recorder(MemoryProvider):
        name = "recorder"

        def __init__(self) -> None:
            self.synced: list[tuple[str, str]] = []

        def prefetch(self, query: str, *, session_id: str) -> str:
            return ""

        def sync_turn(self, user: str, assistant: str, *, session_id: str) -> None:
            self.synced.append((user, assistant))

    recorder = Recorder()
    model = ScriptedModel(tool_calls(("get_weather", {"city": "Oslo"})), "Snow in Oslo.")
    with Agent(client=model, home=home, memory_provider=recorder) as agent:
        asked = agent.run("Oslo weather?", client_tools=[WEATHER])
        agent.run("", tool_results=[{"tool_call_id": asked.tool_calls[0].id,
                                     "content": "snow"}])
    assert recorder.synced == [("Oslo weather?", "Snow in Oslo.")]
