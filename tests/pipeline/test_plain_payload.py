"""The plain path of the journal's encoding (``pipeline.shell.plain_payload``) writes what the
codec writes and vouches only for events that read back as themselves; anything else goes
the general way, which checks and words it as before."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.eventlog.codec import from_payload, to_payload
from effects.eventlog.encoded import payload_json
from effects.eventlog.store import read_envelopes
from pipeline.shell.journal import encode
from pipeline.shell.plain_payload import plain_payload
from stages.errors import EventEncodingError
from stages.log import events as ev
from stages.log.content_parts import TextPart
from stages.log.messages import Message, ToolCall
from tests.strategies.events import EVENT_STRATEGIES

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def _text(payload: dict) -> str:
    """The payload as the log line holds it."""
    return payload_json(payload)


def _assert_same_as_codec(event: ev.Event) -> bool:
    plain = plain_payload(event)
    if plain is None:
        return False
    assert _text(plain) == _text(to_payload(event))
    assert from_payload(event.kind, event.schema_version, plain) == event
    return True


@settings(max_examples=40, deadline=None)
@given(st.data())
@pytest.mark.parametrize("kind", sorted(EVENT_STRATEGIES))
def test_a_plain_payload_is_the_codecs_and_reads_back(kind, data):
    _assert_same_as_codec(data.draw(EVENT_STRATEGIES[kind]))


def test_the_recorded_corpus_is_written_the_same_and_mostly_plainly():
    plain = total = 0
    for path in sorted(CORPUS.rglob("*.jsonl")):
        for envelope in read_envelopes(path):
            total += 1
            plain += _assert_same_as_codec(
                from_payload(envelope.kind, envelope.schema_version, envelope.payload))
    assert total > 300
    assert plain > total * 0.9  # the turn's common records take the plain path


REPLY = ev.ModelReplied(
    message=Message(role="assistant", content="hi",
                    tool_calls=(ToolCall(id="c1", name="f", arguments="{}"),)),
    finish_reason="stop", usage=ev.Usage(input_tokens=3, output_tokens=4), model="m",
    latency_ms=1.5, rate_limits=(("x-ratelimit-remaining-requests", "9"),))


class _Text(str):
    pass


def test_a_turns_reply_takes_the_plain_path():
    assert _assert_same_as_codec(REPLY)


@pytest.mark.parametrize("changed", [
    # A float field holding an int: the codec reads it back as a float (equal, written as 2).
    lambda e: attrs.evolve(e, latency_ms=2),
    lambda e: attrs.evolve(e, message=attrs.evolve(e.message, content=(TextPart(text="hi"),))),
])
def test_values_the_plain_path_does_not_vouch_for_go_the_general_way(changed):
    event = changed(REPLY)
    assert plain_payload(event) is None
    assert _text(encode(event)) == _text(to_payload(event))


@pytest.mark.parametrize("changed", [
    lambda e: attrs.evolve(e, usage=attrs.evolve(e.usage, input_tokens=True)),  # bool for int
    lambda e: attrs.evolve(e, streamed=1),  # int for bool
    lambda e: attrs.evolve(e, model=_Text("m")),  # a str subclass
])
def test_what_would_not_read_back_is_refused_as_before(changed):
    event = changed(REPLY)
    assert plain_payload(event) is None
    with pytest.raises(EventEncodingError):
        encode(event)


FINISHED = ev.TurnFinished(exit_reason="text_response", final_response="hi", completed=True)


@pytest.mark.parametrize("changed", [
    # Optional text fields are checked with the plain fields, each against its own types.
    lambda e: attrs.evolve(e, error=5),
    lambda e: attrs.evolve(e, note=b"x"),
    lambda e: attrs.evolve(e, final_response=_Text("hi")),
])
def test_an_optional_field_of_the_wrong_type_is_refused_as_before(changed):
    event = changed(FINISHED)
    assert plain_payload(event) is None
    with pytest.raises(EventEncodingError):
        encode(event)


@pytest.mark.parametrize("final_response", ["hi", None])
def test_an_optional_field_holding_either_of_its_types_is_written_plainly(final_response):
    assert _assert_same_as_codec(attrs.evolve(FINISHED, final_response=final_response))


def test_a_value_its_validator_refuses_is_refused_as_before():
    # A part changed behind its validator's back (a frozen class's slot set directly): the
    # read-back runs the validator, and so does the plain path.
    message = attrs.evolve(REPLY.message)
    object.__setattr__(message, "role", "robot")
    event = attrs.evolve(REPLY, message=message)
    assert plain_payload(event) is None
    with pytest.raises(EventEncodingError):
        encode(event)


@attrs.frozen
class _Node:
    name: str
    children: tuple[_Node, ...] = ()


@attrs.frozen
class _Hidden:
    name: str
    later: _NamedForTypeCheckersOnly | None = None  # type: ignore[name-defined]  # noqa: F821


def test_a_class_holding_itself_is_planned_and_written_plainly_down_to_itself():
    from pipeline.shell.plain_payload import _plan
    plan = _plan(_Node)  # no RecursionError
    assert plan is not None
    # Its own level is plain; a child, a _Node inside a _Node, is the codec's to judge.
    from pipeline.shell.plain_payload import _encode_plain
    assert _encode_plain(_Node, plan, _Node(name="a")) == {"name": "a", "children": []}


def test_a_class_whose_annotations_do_not_resolve_is_left_to_the_codec():
    from pipeline.shell.plain_payload import _plan
    assert _plan(_Hidden) is None
