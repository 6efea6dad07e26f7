"""``response_format`` through the gateway: the official SDK's ``beta.chat.completions.parse``
and plain ``response_format`` requests get answers that match their schema, checked (and asked
again) by the agent; the gateway's tools make it the final-answer tool upstream."""

from __future__ import annotations

import json

import openai
import pydantic
import pytest

from stages.log.events import OutputChecked, TurnStarted
from tests.fake_openai import Reply
from tests.pipeline.serve.conftest import TOKENS


class Weather(pydantic.BaseModel):
    city: str
    celsius: float


def sdk(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS["alice"], max_retries=0)


ASK = [{"role": "user", "content": "Weather in Oslo?"}]


def test_the_sdk_parse_gets_a_checked_answer_of_its_model(gateway):
    gateway.upstream.script(
        Reply.tool_calls([("final_result", '{"city": "Oslo", "celsius": "cold"}')]),
        Reply.tool_calls([("final_result", '{"city": "Oslo", "celsius": -3.5}')]))
    raw = sdk(gateway).chat.completions.with_raw_response.parse(
        model="mibyan", messages=ASK, response_format=Weather)
    completion = raw.parse()
    assert completion.choices[0].message.parsed == Weather(city="Oslo", celsius=-3.5)
    assert completion.choices[0].finish_reason == "stop"
    first = gateway.upstream.requests[0]
    assert first["tool_choice"] == "required"
    final = next(t for t in first["tools"] if t["function"]["name"] == "final_result")
    assert final["function"]["parameters"]["required"] == ["city", "celsius"]
    retried = gateway.upstream.requests[1]["messages"][-1]
    assert retried["role"] == "tool"
    assert "celsius: 'cold' is not of type 'number'" in retried["content"]  # jsonschema's
    events = gateway.events(raw.headers["x-mibyan-session-id"])
    started = next(e for e in events if isinstance(e, TurnStarted))
    assert started.output is not None and started.output.name == "Weather"
    assert started.output.strict  # as the SDK asked
    assert [e.valid for e in events if isinstance(e, OutputChecked)] == [False, True]
    gateway.assert_every_session_replays()


def test_a_streamed_structured_answer_comes_once_checked(gateway):
    gateway.upstream.script(Reply.tool_calls([("final_result", "{}")]),
                            Reply.tool_calls([("final_result", '{"city": "Oslo", "celsius": 1}')]))
    stream = sdk(gateway).chat.completions.create(
        model="mibyan", messages=ASK, stream=True,
        response_format={"type": "json_schema", "json_schema": {
            "name": "weather", "schema": Weather.model_json_schema()}})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert json.loads(text) == {"city": "Oslo", "celsius": 1}


def test_json_object_asks_for_any_object(gateway):
    gateway.upstream.script(Reply.tool_calls([("final_result", '{"ok": true}')]))
    completion = sdk(gateway).chat.completions.create(
        model="mibyan", messages=ASK, response_format={"type": "json_object"})
    assert json.loads(completion.choices[0].message.content) == {"ok": True}


def test_an_answer_that_never_matches_is_a_502(gateway):
    gateway.upstream.script(*[Reply.text("no JSON here")] * 3)
    with pytest.raises(openai.APIStatusError) as caught:
        sdk(gateway).chat.completions.parse(model="mibyan", messages=ASK,
                                            response_format=Weather)
    assert caught.value.status_code == 502
    assert "does not match the output type" in caught.value.message


@pytest.mark.parametrize(("response_format", "param"), [
    ({"type": "xml"}, "response_format.type"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}},
     "response_format.json_schema.schema"),
])
def test_a_bad_response_format_is_a_400_naming_it(gateway, response_format, param):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(gateway).chat.completions.create(model="mibyan", messages=ASK,
                                             response_format=response_format)
    assert caught.value.body["param"] == param
    assert gateway.upstream.requests == []
