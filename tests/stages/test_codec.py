"""The events codec: every kind round-trips, the union is covered, bad input is LogCorruptError."""

from __future__ import annotations

import json
import typing

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.eventlog.codec import from_payload, make_converter, to_payload
from effects.eventlog.envelope import decode_line, encode_line
from stages.errors import LogCorruptError
from stages.log import events as ev
from stages.log.messages import Message
from tests.strategies.events import EVENT_STRATEGIES, any_event, uncovered_fields


def test_event_types_cover_the_event_union() -> None:
    union = set(typing.get_args(ev.Event))
    assert set(ev.EVENT_TYPES.values()) == union
    assert len(ev.EVENT_TYPES) == len(union), "two event classes share a kind"
    for kind, cls in ev.EVENT_TYPES.items():
        assert cls.kind == kind
        assert isinstance(cls.schema_version, int) and cls.schema_version >= 1
        assert attrs.has(cls)


def test_observed_kinds_are_known() -> None:
    assert ev.OBSERVED <= set(ev.EVENT_TYPES)


def test_every_kind_has_a_strategy() -> None:
    assert set(EVENT_STRATEGIES) == set(ev.EVENT_TYPES)


def test_strategies_generate_every_field() -> None:
    """No field of an event (or of what it nests) is left at its default by the strategies."""
    assert uncovered_fields() == []


def test_events_are_frozen_and_keyword_only() -> None:
    for cls in ev.EVENT_TYPES.values():
        for field in attrs.fields(cls):
            assert field.kw_only, f"{cls.__name__}.{field.name} is positional"
        params = cls.__attrs_attrs__
        assert params
        with pytest.raises(TypeError):
            cls("positional")  # type: ignore[call-arg]


def test_converter_is_built_once() -> None:
    assert make_converter() is make_converter()


@pytest.mark.parametrize("kind", sorted(EVENT_STRATEGIES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_each_kind_round_trips(kind: str, data: st.DataObject) -> None:
    event = data.draw(EVENT_STRATEGIES[kind])
    payload = to_payload(event)
    assert "kind" not in payload and "schema_version" not in payload
    assert from_payload(event.kind, event.schema_version, payload) == event
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    assert from_payload(event.kind, event.schema_version, json.loads(text)) == event


@settings(max_examples=100, deadline=None)
@given(event=any_event)
def test_round_trip_through_a_log_line(event: ev.Event) -> None:
    """The payload survives the envelope's own canonical line encoding (sorted keys, UTF-8)."""
    line = encode_line("s1", 0, event.kind, event.schema_version, "t", "0" * 64,
                       to_payload(event))
    envelope = decode_line(line)
    assert from_payload(envelope.kind, envelope.schema_version, envelope.payload) == event


@settings(max_examples=60, deadline=None)
@given(event=any_event)
def test_payload_is_plain_json_data(event: ev.Event) -> None:
    def plain(value: object) -> bool:
        if value is None or isinstance(value, (str, int, float, bool)):
            return True
        if isinstance(value, (list, tuple)):  # a tuple is written as a JSON array
            return all(plain(v) for v in value)
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        return False
    assert plain(to_payload(event))


def test_derived_fields_are_not_serialised() -> None:
    from stages.log.messages import Message
    from stages.log.tool_specs import ToolSpec
    payload = to_payload(ev.HistoryLoaded(messages=(Message(role="user", content="hi"),)))
    assert "wire" not in payload["messages"][0]
    spec = ToolSpec(name="t", description="d", parameters="{}")
    assert "wire" not in to_payload(ev.ToolsDeclared(tools=(spec,)))["tools"][0]


def test_unknown_kind_is_corrupt() -> None:
    with pytest.raises(LogCorruptError, match="no_such_kind"):
        from_payload("no_such_kind", 1, {})


@pytest.mark.parametrize("kind, payload", [
    ("model_requested", {}),
    ("history_loaded", {"messages": [{"role": "wizard"}]}),
    ("history_loaded", {"messages": [], "extra": 1}),
    ("tools_planned", {"call_ids": [], "concurrent": True, "surprise": None}),
    ("model_requested", {"call_index": "one", "purpose": "step", "model": "m", "provider": "p",
                         "message_count": 0, "tool_count": 0, "estimated_tokens": 0}),
    ("tools_declared", {"tools": [{"name": "t", "description": "d", "parameters": "{not json"}]}),
    ("tool_ran", {"outcome": None}),
])
def test_bad_payload_is_corrupt(kind: str, payload: dict) -> None:
    with pytest.raises(LogCorruptError):
        from_payload(kind, 1, payload)


@pytest.mark.parametrize("kind", sorted(ev.EVENT_TYPES))
def test_newer_schema_version_is_corrupt(kind: str) -> None:
    cls = ev.EVENT_TYPES[kind]
    with pytest.raises(LogCorruptError, match="newer"):
        from_payload(kind, cls.schema_version + 1, {})


def test_older_schema_version_without_an_upcaster_is_corrupt() -> None:
    with pytest.raises(LogCorruptError):
        from_payload("model_requested", 0, {})


@pytest.mark.parametrize("payload", [[], None, "text", 3])
def test_payload_that_is_not_an_object_is_corrupt(payload: object) -> None:
    with pytest.raises(LogCorruptError):
        from_payload("tool_ran", 1, payload)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind, payload", [
    ("tool_ran", {"outcome": {"call_id": "a", "name": "b", "content": "c", "ok": "no"}}),
    ("model_requested", {"call_index": 1.7, "purpose": "step", "model": "m", "provider": "p",
                         "message_count": 0, "tool_count": 0, "estimated_tokens": 0}),
    ("system_prompt_set", {"text": 12}),
])
def test_wrongly_typed_scalars_are_corrupt(kind: str, payload: dict) -> None:
    with pytest.raises(LogCorruptError):
        from_payload(kind, 1, payload)


def test_every_kind_has_a_fold_rule() -> None:
    from stages.fold import _APPLY
    assert set(_APPLY) == set(ev.EVENT_TYPES.values())


def test_observed_and_redacted_are_declared_on_the_classes() -> None:
    assert ev.OBSERVED == {k for k, cls in ev.EVENT_TYPES.items() if cls.observed}
    assert ev.ModelFailed in ev.REDACTED_FIELDS
    assert set(ev.REDACTED_FIELDS[ev.ModelFailed]) == {"message", "body"}
    for cls, names in ev.REDACTED_FIELDS.items():
        assert cls.observed, f"{cls.__name__} is decided, its text comes from the stages"
        assert set(names) <= {f.name for f in attrs.fields(cls)}


def test_an_integer_error_code_is_kept_as_text_and_reads_back() -> None:
    """llama.cpp sends ``"code": 500``; it was logged as a number the codec then refused."""
    failed = ev.ModelFailed(error_type="ProviderHTTPError", message="boom", status=500, code=500)
    assert failed.code == "500"
    assert from_payload(failed.kind, failed.schema_version, to_payload(failed)) == failed


def test_usage_says_reasoning_in_output_only_when_it_was() -> None:
    # An additive field: a reply without it is written exactly as before.
    plain = ev.ModelReplied(message=Message(role="assistant", content="hi"), finish_reason="stop",
                            usage=ev.Usage(output_tokens=3), model="m", latency_ms=1.0)
    assert "reasoning_in_output" not in to_payload(plain)["usage"]
    thought = attrs.evolve(plain, usage=ev.Usage(output_tokens=3, reasoning_in_output=True))
    assert to_payload(thought)["usage"]["reasoning_in_output"] is True
    assert from_payload(thought.kind, thought.schema_version, to_payload(thought)) == thought


@given(st.builds(ev.Usage, input_tokens=st.integers(0, 9), output_tokens=st.integers(0, 9),
                 cache_read_tokens=st.integers(0, 9), cache_write_tokens=st.integers(0, 9),
                 reasoning_tokens=st.integers(0, 9), reasoning_in_output=st.booleans()))
def test_usage_as_dict_is_the_fields_with_the_total(usage: ev.Usage) -> None:
    """Written out by hand: the same keys, in the same order, as the fields give."""
    plain: dict = {**attrs.asdict(usage), "total_tokens": usage.total_tokens}
    del plain["reasoning_in_output"]
    if usage.reasoning_in_output:
        plain["reasoning_tokens"] = None
    assert list(usage.as_dict().items()) == list(plain.items())
