"""Client-side tools through the gateway (rules 8), with OpenAI's semantics: a call to a
client's tool comes back as ``finish_reason: "tool_calls"`` (streamed and not), the next
request's ``tool`` messages carry the results into the same session, and the agent's own tools
still run server-side. Driven by the ``openai`` SDK and by ``openai-agents`` (a
``function_tool`` and a handoff) against a gateway whose upstream is the fake OpenAI server."""

from __future__ import annotations

import json

import agents
import openai
import pytest

from stages.log.events import ToolRan, TurnStarted
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import TOKENS

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def sdk(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS["alice"], max_retries=0)


def _offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


@pytest.mark.parametrize("stream", [False, True])
def test_the_sdk_gets_the_client_call_and_sends_its_result(gateway, tmp_path, stream):
    (tmp_path / "work" / "notes.txt").write_text("meet at noon")
    gateway.upstream.script(
        Reply.tool_calls([("read_file", '{"path": "notes.txt"}'),
                          ("get_weather", '{"city": "Paris"}')], ids=["own_1", "call_w"]),
        Reply.text("Noon, and sunny."))
    client = sdk(gateway)
    messages: list = [{"role": "user", "content": "When, and the weather?"}]
    if stream:
        chunks = list(client.chat.completions.create(
            model="mibyan", messages=messages, tools=[WEATHER], stream=True))
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        call = calls[0]
    else:
        first = client.chat.completions.create(model="mibyan", messages=messages,
                                               tools=[WEATHER])
        finish, (call,) = first.choices[0].finish_reason, first.choices[0].message.tool_calls
    assert finish == "tool_calls"
    assert (call.id, call.function.name) == ("call_w", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function",
         "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = client.chat.completions.create(model="mibyan", messages=messages, tools=[WEATHER])
    assert second.choices[0].message.content == "Noon, and sunny."
    assert second.choices[0].finish_reason == "stop"
    # One session: the stateless client's results found the turn that waited for them.
    sessions = gateway.pool.owned("alice")
    assert len(sessions) == 1
    events = gateway.events(sessions[0].id)
    assert any(isinstance(e, ToolRan) and e.outcome.name == "read_file" for e in events)
    assert [e.tool_results[0].content for e in events
            if isinstance(e, TurnStarted) and e.tool_results] == ["sunny"]
    assert _offered(gateway.upstream.requests[0])[-1] == "get_weather"
    sent = gateway.upstream.requests[1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]
    assert "meet at noon" in sent[-2]["content"] and "sunny" in sent[-1]["content"]
    assert gateway.assert_every_session_replays() == 1


def test_a_session_waiting_for_results_refuses_a_new_user_message(gateway):
    gateway.upstream.script(Reply.tool_calls([("get_weather", '{"city": "Rome"}')]))
    with gateway.client() as client:
        first = client.post("/v1/chat/completions", json={
            "model": "mibyan", "tools": [WEATHER],
            "messages": [{"role": "user", "content": "Rome?"}]})
        session = first.headers["x-mibyan-session-id"]
        again = client.post("/v1/chat/completions", headers={"x-mibyan-session-id": session},
                            json={"model": "mibyan",
                                  "messages": [{"role": "user", "content": "never mind"}]})
    assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert again.status_code == 400 and "must answer the calls" in again.json()["error"]["message"]


def test_a_client_tool_named_as_an_own_tool_is_refused(gateway):
    with gateway.client() as client:
        response = client.post("/v1/chat/completions", json={
            "model": "mibyan", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "read_file"}}]})
    assert response.status_code == 400 and "read_file" in response.json()["error"]["message"]


@agents.function_tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def _run_agents(gateway, starting: agents.Agent, prompt: str, *, stream: bool,
                responses: bool = False):
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS["alice"],
                                max_retries=0)
    kind = agents.OpenAIResponsesModel if responses else agents.OpenAIChatCompletionsModel
    model = kind(model="mibyan", openai_client=client)
    config = agents.RunConfig(model=model, tracing_disabled=True)
    if not stream:
        return agents.Runner.run_sync(starting, prompt, run_config=config)

    async def streamed():
        run = agents.Runner.run_streamed(starting, prompt, run_config=config)
        async for _ in run.stream_events():
            pass
        return run
    import asyncio
    return asyncio.run(streamed())


@pytest.mark.parametrize(("stream", "responses"), [
    (False, False), (True, False), (False, True), (True, True)])
def test_openai_agents_runs_a_function_tool_through_the_gateway(gateway, stream, responses):
    gateway.upstream.script(Reply.tool_calls([("get_weather", '{"city": "Lyon"}')]),
                            Reply.text("It is sunny in Lyon."))
    agent = agents.Agent(name="forecaster", instructions="Answer about the weather.",
                         tools=[get_weather])
    result = _run_agents(gateway, agent, "Weather in Lyon?", stream=stream,
                         responses=responses)
    assert result.final_output == "It is sunny in Lyon."
    sent = gateway.upstream.requests[1]["messages"]
    assert sent[-1]["role"] == "tool" and "sunny in Lyon" in sent[-1]["content"]
    assert "Answer about the weather." in sent[0]["content"]
    assert len(gateway.pool.owned("alice")) == 1
    assert gateway.assert_every_session_replays() == 1


def test_openai_agents_hands_off_through_the_gateway(gateway):
    gateway.upstream.script(
        Reply.tool_calls([("transfer_to_forecaster", "{}")]),
        Reply.tool_calls([("get_weather", '{"city": "Nice"}')]),
        Reply.text("Sunny in Nice."))
    forecaster = agents.Agent(name="forecaster", instructions="You forecast.",
                              tools=[get_weather])
    triage = agents.Agent(name="triage", instructions="Hand weather questions off.",
                          handoffs=[forecaster])
    result = _run_agents(gateway, triage, "Weather in Nice?", stream=False)
    assert result.final_output == "Sunny in Nice."
    assert result.last_agent.name == "forecaster"
    first, second, third = gateway.upstream.requests
    assert "transfer_to_forecaster" in _offered(first)
    assert "get_weather" in _offered(second) and "transfer_to_forecaster" not in _offered(second)
    assert "You forecast." in second["messages"][0]["content"]
    assert "sunny in Nice" in third["messages"][-1]["content"]
    assert gateway.assert_every_session_replays() == 1
