"""Structured output end to end: ``Agent.run(..., output_type=X)`` against the fake servers of
the three API modes over loopback HTTP; the request each API gets, the typed value, the retry
with the validation errors, the log, and a replay of each session."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.shell.replay import replay
from stages.log.alternation import violations
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_anthropic import Reply as AReply
from tests.fake_openai import Reply
from tests.fake_responses import FakeResponsesServer, ResponsesReply

KEY = "sk-proj-ThisIsASecretKey0123456789"


class City(pydantic.BaseModel):
    """A city and its population."""

    name: str
    population: int = pydantic.Field(ge=0)


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Pair(TypedDict):
    left: str
    right: str


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@pytest.fixture
def anthropic():
    with FakeAnthropicServer() as srv:
        yield srv
        srv.assert_done()


@pytest.fixture
def responses():
    with FakeResponsesServer() as srv:
        yield srv
        srv.assert_done()


def agent(server: Any, home: Any, api_mode: str = "chat_completions", **kw: Any) -> Agent:
    kw.setdefault("context_length", 200_000)  # known: no window probe
    kw.setdefault("tools", [])
    return Agent(model="fake-model", base_url=server.base_url, api_key=KEY, api_mode=api_mode,
                 provider="fake", home=home, **kw)


def events(home: Any, sid: str) -> list:
    return [from_payload(e.kind, e.schema_version, e.payload)
            for e in read_envelopes(session_path(home / "sessions", sid))]


def assert_replays(home: Any, sid: str) -> None:
    report = replay(home / "sessions", sid)
    assert report.identical, report.describe()


PARIS = '{"name": "Paris", "population": 2100000}'


# --- the three API modes, natively ------------------------------------------------------------

@pytest.mark.parametrize("stream", [True, False])
def test_chat_completions_sends_response_format_and_returns_the_model(server, home, stream):
    server.script(Reply.text(PARIS))
    with agent(server, home, stream=stream) as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output == City(name="Paris", population=2_100_000)
    assert result.final_response == '{"name":"Paris","population":2100000}'
    assert result.completed and not result.failed
    body = server.last_request
    assert body["response_format"]["type"] == "json_schema"
    spec = body["response_format"]["json_schema"]
    assert spec["name"] == "City" and spec["strict"] is False
    assert spec["schema"] == City.model_json_schema()
    assert "tools" not in body
    checked = [e for e in events(home, result.session_id) if e.kind == "output_checked"]
    assert [(c.valid, c.output) for c in checked] == [(True, result.final_response)]
    assert_replays(home, result.session_id)


def test_responses_sends_text_format(responses, home):
    responses.script(ResponsesReply.text(PARIS))
    with agent(responses, home, "codex_responses") as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output == City(name="Paris", population=2_100_000)
    fmt = responses.last_request["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "City"
    assert fmt["schema"]["required"] == ["name", "population"]
    assert_replays(home, result.session_id)


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_forces_a_tool_whose_input_is_the_answer(anthropic, home, stream):
    anthropic.script(AReply.tool_use([("City", PARIS)], stop_reason="tool_use"))
    with agent(anthropic, home, "anthropic_messages", stream=stream) as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output == City(name="Paris", population=2_100_000)
    assert result.turn_exit_reason == "text_response(finish_reason=stop)"
    body = anthropic.last_request
    assert body["tool_choice"] == {"type": "tool", "name": "City"}
    assert [t["name"] for t in body["tools"]] == ["City"]
    assert body["tools"][0]["input_schema"] == City.model_json_schema()
    assert "thinking" not in body
    assert anthropic.rejections == []
    assert_replays(home, result.session_id)


# --- validation and retries ---------------------------------------------------------------------

def test_an_answer_that_does_not_match_is_sent_back_with_the_errors(server, home):
    server.script(Reply.text('{"name": "Paris", "population": -3}'), Reply.text(PARIS))
    with agent(server, home) as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output == City(name="Paris", population=2_100_000)
    assert result.api_calls == 2
    retry = server.requests[1]["messages"][-1]
    assert retry["role"] == "user"
    assert "population: Input should be greater than or equal to 0" in retry["content"]
    assert "response_format" in server.requests[1]
    checked = [e for e in events(home, result.session_id) if e.kind == "output_checked"]
    assert [c.valid for c in checked] == [False, True]
    assert "greater than or equal to 0" in checked[0].errors
    assert_replays(home, result.session_id)


def test_retries_are_bounded_by_the_setting_then_the_turn_fails(server, home):
    server.script(Reply.text("not json"), Reply.text('{"name": "Paris"}'))
    with agent(server, home, output_retries=1) as a:
        result = a.run("Largest city of France?", output_type=City)
        assert result.failed and not result.completed and result.output is None
        assert result.turn_exit_reason == "output_invalid"
        assert "population: Field required" in result.error
        assert result.final_response == '{"name": "Paris"}'
        server.script(Reply.text("plain text again"))
        later = a.run("Thanks. And a free answer?")  # the next turn has no output type
    assert later.final_response == "plain text again" and later.output is None
    assert "response_format" not in server.last_request
    assert violations(later.messages) == []
    assert_replays(home, result.session_id)


def test_fenced_json_is_accepted(server, home):
    server.script(Reply.text(f"```json\n{PARIS}\n```"))
    with agent(server, home) as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output.name == "Paris"


# --- a turn with tools: the final-answer tool ---------------------------------------------------

def test_a_turn_with_tools_ends_through_the_final_answer_tool(server, home):
    server.script(Reply.tool_calls([("add", '{"a": 2, "b": 3}')]),
                  Reply.tool_calls([("final_result", '{"name": "Five", "population": 5}')]))
    with agent(server, home, tools=[add]) as a:
        result = a.run("Add 2 and 3, name it.", output_type=City)
    assert result.output == City(name="Five", population=5)
    assert result.turn_exit_reason == "final_result"
    first = server.requests[0]
    assert first["tool_choice"] == "required" and "response_format" not in first
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "final_result"]
    assert first["tools"][1]["function"]["parameters"] == City.model_json_schema()
    assert violations(result.messages) == []
    assert_replays(home, result.session_id)


def test_a_bad_final_answer_call_gets_the_errors_as_its_result(server, home):
    server.script(Reply.tool_calls([("final_result", '{"name": "X", "population": "many"}'),
                                    ("add", '{"a": 1, "b": 1}')]),
                  Reply.tool_calls([("final_result", '{"name": "X", "population": 7}')]))
    with agent(server, home, tools=[add]) as a:
        result = a.run("Name a city.", output_type=City)
    assert result.output == City(name="X", population=7)
    results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "population: Input should be a valid integer" in results[0]["content"]
    assert "not run: the final answer was given" in results[1]["content"]
    assert_replays(home, result.session_id)


def test_output_mode_tool_uses_the_tool_without_other_tools(server, home):
    server.script(Reply.tool_calls([("final_result", PARIS)]))
    with agent(server, home, output_mode="tool") as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output.population == 2_100_000
    body = server.last_request
    assert [t["function"]["name"] for t in body["tools"]] == ["final_result"]
    assert "response_format" not in body


# --- the kinds of output type -------------------------------------------------------------------

@pytest.mark.parametrize(("output_type", "answer", "expected"), [
    (Point, '{"x": 1, "y": 2.5}', Point(x=1.0, y=2.5)),
    (Pair, '{"left": "a", "right": "b"}', {"left": "a", "right": "b"}),
    (list[int], '{"response": [1, 2, 3]}', [1, 2, 3]),
    ({"type": "object", "title": "Answer", "properties": {"n": {"type": "integer"}},
      "required": ["n"]}, '{"n": 4}', {"n": 4}),
])
def test_dataclasses_typeddicts_other_types_and_schemas(server, home, output_type, answer,
                                                        expected):
    server.script(Reply.text(answer))
    with agent(server, home) as a:
        result = a.run("Answer.", output_type=output_type)
    assert result.output == expected
    schema = server.last_request["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "object"
    assert_replays(home, result.session_id)


def test_a_json_schema_is_checked_by_jsonschema(server, home):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 10}},
              "required": ["n"]}
    server.script(Reply.text('{"n": 4}'), Reply.text('{"n": 40}'))
    with agent(server, home) as a:
        result = a.run("Answer.", output_type=schema)
    assert result.output == {"n": 40}
    assert "n: 4 is less than the minimum of 10" in server.requests[1]["messages"][-1]["content"]


def test_a_type_without_a_schema_is_a_usage_error(server, home):
    from stages.errors import UsageError
    with agent(server, home) as a, pytest.raises(UsageError, match="no JSON schema"):
        a.run("Answer.", output_type=object())
    assert server.requests == []


def test_run_conversation_gives_the_output_as_json_data(server, home):
    server.script(Reply.text(PARIS))
    with agent(server, home) as a:
        result = a.run("Largest city of France?", output_type=City).as_dict()
    assert result["output"] == {"name": "Paris", "population": 2_100_000}
    json.dumps(result)


# --- exports --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "trl"])
def test_exports_carry_the_final_json_answer(server, home, tmp_path, fmt):
    from pipeline.export.exporter import export_sessions
    from pipeline.export.schemas import SCHEMAS
    server.script(Reply.tool_calls([("add", '{"a": 1, "b": 1}')]),
                  Reply.tool_calls([("final_result", PARIS)]))
    with agent(server, home, tools=[add]) as a:
        result = a.run("Largest city of France?", output_type=City)
    out = tmp_path / "out.jsonl"
    export_sessions(home / "sessions", out, fmt=fmt, provenance="inline")
    # The sample ends on the structured answer, given through the final-answer tool.
    (row,) = [json.loads(line) for line in out.open()]
    assert [t["output"] for t in row["provenance"]["turns"]] == [result.final_response]
    import jsonschema
    jsonschema.validate(row, SCHEMAS[fmt])


# --- settings and secrets -------------------------------------------------------------------------

def test_the_output_section_of_config_toml_sets_the_retries(server, home):
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[output]\nretries = 0\nmode = "tool"\n')
    with agent(server, home) as a:
        assert (a.settings.output_retries, a.settings.output_mode) == (0, "tool")
    (home / "config.toml").write_text('[output]\nretries = -1\n')
    from stages.errors import UsageError
    with pytest.raises(UsageError, match=r"\[output\] retries"):
        agent(server, home)
    (home / "config.toml").write_text('[output]\ntries = 1\n')
    with pytest.raises(UsageError, match=r"unknown setting \[output\] tries"):
        agent(server, home)


def test_a_secret_in_the_answer_never_reaches_the_log(server, home):
    token = "ghp_Xk9mP2qR7sT4uV8wY1zA3bC5dE6fG0hJ1234"
    server.script(Reply.text(json.dumps({"name": f"token {token}", "population": 1})))
    with agent(server, home) as a:
        result = a.run("Largest city of France?", output_type=City)
    assert result.output is not None and token not in result.output.name
    assert token not in session_path(home / "sessions", result.session_id).read_text()
    assert_replays(home, result.session_id)
