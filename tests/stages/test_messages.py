"""Named examples for messages in OpenAI format."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings

from stages.log.messages import Message, ToolCall, canonical_arguments, canonical_json, from_openai
from tests.strategies.events import messages


def test_wire_excludes_reasoning_but_to_openai_keeps_it() -> None:
    m = Message(role="assistant", content="hi", reasoning="thinking hard")
    assert "reasoning" not in json.loads(m.wire)
    assert m.to_openai()["reasoning"] == "thinking hard"
    assert m.chars == len(m.wire)


def test_wire_is_canonical_json() -> None:
    m = Message(role="user", content="é \"q\"")
    assert m.wire == '{"content":"é \\"q\\"","role":"user"}'


def test_name_is_sent_only_for_tool_messages() -> None:
    assert "name" not in Message(role="user", content="x", name="bob").to_openai()
    assert Message(role="tool", content="x", tool_call_id="c", name="t").to_openai()["name"] == "t"


def test_assistant_tool_calls_in_openai_shape() -> None:
    m = Message(role="assistant", tool_calls=(ToolCall(id="c1", name="f", arguments='{"a":1}'),))
    assert m.to_openai() == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]}


def test_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError):
        Message(role="wizard")


def test_derived_fields_do_not_affect_equality() -> None:
    assert Message(role="user", content="x") == Message(role="user", content="x")


@settings(max_examples=150, deadline=None)
@given(messages())
def test_from_openai_round_trip(message: Message) -> None:
    """A message whose arguments are already canonical comes back equal (empty arguments
    read as ``{}``)."""
    calls = tuple(ToolCall(id=c.id, name=c.name, arguments=canonical_arguments(c.arguments or "{}"))
                  for c in message.tool_calls)
    message = attrs.evolve(message, tool_calls=calls)
    raw = message.to_openai()
    back = from_openai(raw)
    expected = message
    if message.role != "tool":
        expected = attrs.evolve(expected, name=None)  # name is only sent for tool messages
    if message.reasoning == "":
        expected = attrs.evolve(expected, reasoning=None)  # empty reasoning reads as none
    assert back == expected
    assert from_openai(json.loads(json.dumps(raw))) == back


def test_from_openai_canonicalises_arguments_and_keeps_bad_ones() -> None:
    raw = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function",
         "function": {"name": "f", "arguments": '{ "b": 2, "a": 1 }'}},
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{broken"}},
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}},
        {"id": "d", "type": "function", "function": {"name": "f"}},
    ]}
    m = from_openai(raw)
    assert [c.arguments for c in m.tool_calls] == ['{"a":1,"b":2}', "{broken", "{}", "{}"]


def test_from_openai_structured_content_and_reasoning_content() -> None:
    m = from_openai({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    assert m.content == '[{"text":"hi","type":"text"}]'
    m = from_openai({"role": "assistant", "content": "x", "reasoning_content": "because"})
    assert m.reasoning == "because"


@pytest.mark.parametrize("given_, expected", [
    ('{"b": 1, "a": [1, 2]}', '{"a":[1,2],"b":1}'),
    ('"é"', '"é"'),
    ("[1,  2]", "[1,2]"),
    ("not json", "not json"),
    ("", ""),
    ("[" * 100_000, "[" * 100_000),
])
def test_canonical_arguments(given_: str, expected: str) -> None:
    assert canonical_arguments(given_) == expected


def test_canonical_json_keeps_unicode_and_sorts_keys() -> None:
    assert canonical_json({"z": "日本", "a": None}) == '{"a":null,"z":"日本"}'


def _canonical_wire(m: Message) -> str:
    out = m.to_openai()
    out.pop("reasoning", None)
    out.pop("reasoning_parts", None)
    return canonical_json(out)


@given(messages())
def test_the_wire_is_the_canonical_json_of_the_openai_shape(m: Message) -> None:
    # Written field by field for speed; it must stay byte for byte what canonical_json writes
    # (request digests in every log are taken over it).
    assert m.wire == _canonical_wire(m)


@pytest.mark.parametrize("m", [
    Message(role="user", content='quotes " and \\ and \n\t\x00 \u2028 \ud800 é 😀'),
    Message(role="tool", content=None, tool_call_id="c1", name="read_file"),
    Message(role="user", content="x", name="ignored on a user message"),
    Message(role="assistant", content=None, tool_calls=(
        ToolCall(id="a", name="f", arguments='{"k": "v"}'), ToolCall(id="b", name="g",
                                                                   arguments="not json"))),
    Message(role="assistant", content=["not", "text"]),  # type: ignore[arg-type]
])
def test_named_wires_are_canonical(m: Message) -> None:
    assert m.wire == _canonical_wire(m)
