"""Redacting an observation with nothing to hide gives back the very objects it was given
(rebuilding a reply cost more than reading it), and one with a secret changes only the parts
that hold it, to what a full rebuild gives."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from stages.log.events import ModelReplied, ToolRan, TurnStarted, Usage
from stages.log.messages import Message, ToolCall
from stages.log.redact import redact, redact_event
from stages.log.redact.text import _by_words, _literals
from stages.log.tool_specs import ToolOutcome

SECRET = "sk-proj-" + "Q7wz3Lk9Xa2Vb8Nc4Md6Pf1Rg5Th0Yj"


def _reply(content: str, arguments: str = '{"path": "a.txt"}') -> ModelReplied:
    calls = (ToolCall(id="c1", name="read", arguments='{"path": "b.txt"}'),
             ToolCall(id="c2", name="read", arguments=arguments))
    return ModelReplied(message=Message(role="assistant", content=content, tool_calls=calls,
                                        reasoning="I should read both files."),
                        finish_reason="tool_calls", usage=Usage(input_tokens=3, output_tokens=4),
                        model="m", latency_ms=1.0)


def test_a_reply_with_nothing_to_hide_is_the_same_object() -> None:
    event = _reply("Reading the two files now.")
    assert redact_event(event, ("sk-known-secret-value",)) is event
    ran = ToolRan(outcome=ToolOutcome(call_id="c1", name="read", content="plain text", ok=True))
    assert redact_event(ran) is ran


def test_a_secret_changes_only_the_part_that_holds_it() -> None:
    event = _reply("Reading the two files now.", arguments=f'{{"key": "{SECRET}"}}')
    clean = redact_event(event)
    assert SECRET not in clean.message.wire
    assert clean.message.tool_calls[1].arguments == redact(f'{{"key": "{SECRET}"}}')
    assert clean.message.tool_calls[0] is event.message.tool_calls[0]
    assert clean.message.content is event.message.content
    assert clean.usage is event.usage
    # The same event a rebuild of every part gives, its wire text included.
    assert clean == _reply("Reading the two files now.",
                           arguments=redact(f'{{"key": "{SECRET}"}}'))
    assert clean.message.wire == _reply(
        "Reading the two files now.", arguments=redact(f'{{"key": "{SECRET}"}}')).message.wire


def test_a_tool_result_with_a_secret_is_redacted() -> None:
    ran = ToolRan(outcome=ToolOutcome(call_id="c1", name="read", content=f"KEY={SECRET}",
                                      ok=True))
    clean = redact_event(ran)
    assert SECRET not in clean.outcome.content
    assert clean.outcome.call_id == "c1"


@given(st.text(max_size=80) | st.sampled_from(["The capital of France is Paris. " * 3,
                                               "hello " * 20, "api key= s3cr3t-value-x"]))
def test_text_no_literal_matches_needs_no_rule_nor_substitution(text: str) -> None:
    """The prefilter's shortcut: where it finds none of the hints and keywords, the rules and
    substitutions, run all the same, change nothing."""
    words = _literals().present(text)
    if not words:
        assert _by_words(text, words) == text


def test_a_plain_event_field_by_field_is_the_same_object() -> None:
    """A user's message (a str field) and a reply without calls take the short ways."""
    started = TurnStarted(user_message="hello " * 60, turn_id="t", task_id="k", started_at="now")
    assert redact_event(started) is started
    reply = ModelReplied(message=Message(role="assistant", content="Paris. " * 12),
                         finish_reason="stop", usage=Usage(), model="m", latency_ms=1.0)
    assert redact_event(reply) is reply
    hidden = redact_event(attrs.evolve(reply, message=Message(role="assistant",
                                                              content=f"key {SECRET}")))
    assert SECRET not in hidden.message.text
