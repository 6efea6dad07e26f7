"""``/v1/responses`` driven by the ``openai`` SDK (``client.responses.create``, streamed and
not) against a gateway on loopback whose upstream is the fake OpenAI server:
``previous_response_id`` goes on in the session, function tools are the client's."""

from __future__ import annotations

import json

import openai
import pytest

from stages.log.events import TurnStarted
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import TOKENS

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}


def sdk(gateway, owner: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS[owner], max_retries=0)


def test_a_response_and_the_next_one_continue_the_session(gateway):
    gateway.upstream.script(Reply.text("Hello, Ada."), Reply.text("Your name is Ada."))
    client = sdk(gateway)
    first = client.responses.create(model="mibyan", input="My name is Ada.",
                                    instructions="Be brief.")
    assert first.status == "completed" and first.output_text == "Hello, Ada."
    assert first.usage.total_tokens > 0 and first.id.startswith("resp_")
    second = client.responses.create(model="mibyan", input="What is my name?",
                                     previous_response_id=first.id)
    assert second.output_text == "Your name is Ada."
    assert second.previous_response_id == first.id
    sent = gateway.upstream.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "Be brief." in gateway.upstream.requests[0]["messages"][0]["content"]
    assert len(gateway.pool.owned("alice")) == 1
    # Only the latest response of a session goes on (a branch is a fork).
    with pytest.raises(openai.BadRequestError, match="not the latest"):
        client.responses.create(model="mibyan", input="again", previous_response_id=first.id)
    assert gateway.assert_every_session_replays() == 1


def test_an_unknown_or_foreign_previous_response_is_not_found(gateway):
    gateway.upstream.script(Reply.text("hi"))
    mine = sdk(gateway).responses.create(model="mibyan", input="hi")
    for client, previous in ((sdk(gateway), "resp_nope"), (sdk(gateway, "bob"), mine.id)):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="mibyan", input="x", previous_response_id=previous)
        assert caught.value.body["code"] == "previous_response_not_found"


@pytest.mark.parametrize("stream", [False, True])
def test_function_tools_come_back_as_calls_and_their_outputs_go_on(gateway, stream):
    gateway.upstream.script(Reply.tool_calls([("get_weather", '{"city": "Oslo"}')],
                                             ids=["call_o"]),
                            Reply.text("Snow in Oslo."))
    client = sdk(gateway)
    if stream:
        events = list(client.responses.create(model="mibyan", input="Oslo weather?",
                                              tools=[WEATHER], stream=True))
        first = events[-1].response
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        assert "response.function_call_arguments.done" in kinds
        assert [e.sequence_number for e in events] == list(range(len(events)))
    else:
        first = client.responses.create(model="mibyan", input="Oslo weather?", tools=[WEATHER])
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert (call.call_id, call.name, json.loads(call.arguments)) == (
        "call_o", "get_weather", {"city": "Oslo"})
    second = client.responses.create(
        model="mibyan", previous_response_id=first.id, tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": "call_o", "output": "snow"}])
    assert second.output_text == "Snow in Oslo."
    session = gateway.pool.owned("alice")[0].id
    assert [e.tool_results[0].content for e in gateway.events(session)
            if isinstance(e, TurnStarted) and e.tool_results] == ["snow"]
    assert gateway.assert_every_session_replays() == 1


def test_a_streamed_response_sends_text_deltas_then_completed(gateway):
    gateway.upstream.script(Reply.text("streamed answer here"))
    events = list(sdk(gateway).responses.create(model="mibyan", input="hi", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "streamed answer here"
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    done = events[-1].response
    assert done.output_text == "streamed answer here" and done.status == "completed"
    assert done.id == events[0].response.id and done.usage.output_tokens > 0


def test_the_sdk_stream_helper_accumulates_the_response(gateway):
    gateway.upstream.script(Reply.text("accumulated"))
    with sdk(gateway).responses.stream(model="mibyan", input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "accumulated"


def test_a_failed_turn_is_a_502_or_a_failed_response(gateway):
    gateway.upstream.script(Reply.error(400, "bad upstream"), Reply.error(400, "bad upstream"))
    client = sdk(gateway)
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="mibyan", input="hi")
    assert caught.value.status_code == 502
    events = list(client.responses.create(model="mibyan", input="hi", stream=True))
    assert events[-1].type == "response.failed"
    assert events[-1].response.error.code == "upstream_failed"


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "mibyan"}, "input"),
    ({"model": "mibyan", "input": [{"type": "image_generation_call"}]}, "input[0].type"),
    ({"model": "mibyan", "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"model": "mibyan", "input": "x", "previous_response_id": 7}, "previous_response_id"),
])
def test_a_bad_request_names_its_field(gateway, body, param):
    with gateway.client() as client:
        response = client.post("/v1/responses", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
