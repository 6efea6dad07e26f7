"""A caller's history passed on every turn is converted, redacted and encoded once per message
(pipeline/intake.py, pipeline/shell/redacted.py), with the very results of doing it afresh."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.eventlog.codec import to_payload
from pipeline.agent import Agent
from pipeline.intake import HistoryIntake
from pipeline.providers import Secrets
from pipeline.shell.journal import encode
from pipeline.shell.redacted import RedactedHistory, history_payload
from stages.log.events import HistoryLoaded
from stages.log.messages import from_openai
from stages.log.redact import redact_event
from tests.fake_openai import Reply
from tests.strategies.events import messages

KEY = "sk-proj-ThisIsASecretKey0123456789"
OTHER = "sk-proj-AnotherSecretKey9876543210"


def test_equal_dicts_get_the_same_message_and_changed_ones_a_new_one():
    intake = HistoryIntake()
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    first = intake.messages(history)
    again = intake.messages([dict(m) for m in history])  # equal copies, not the same dicts
    assert all(a is b for a, b in zip(first, again, strict=True))
    history[1]["content"] = "changed"  # the caller edits a dict in place
    edited = intake.messages(history)
    assert edited[0] is first[0]
    assert edited[1] is not first[1] and edited[1].content == "changed"


def test_content_of_other_types_is_never_confused():
    intake = HistoryIntake()
    contents = ["1", 1, 1.0, True, [{"type": "text", "text": "1"}], {"a": 1}, {"a": True}]
    for _ in range(2):  # the second pass is served from the cache
        got = intake.messages([{"role": "user", "content": c} for c in contents])
        assert got == tuple(from_openai({"role": "user", "content": c}) for c in contents)


def test_tool_calls_and_unhashable_values_convert_as_from_openai_does():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    history = [{"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "3", "name": "f"},
               {"role": "user", "content": "x", "extra": bytearray(b"unhashable")}]
    intake = HistoryIntake()
    first = intake.messages(history)
    assert first == tuple(from_openai(dict(m)) for m in history)
    again = intake.messages(history)
    assert again[0] is first[0] and again[1] is first[1] and again[2] == first[2]


def test_a_history_passed_again_keeps_its_redacted_messages():
    redacted = RedactedHistory()
    intake = HistoryIntake()
    history = [{"role": "user", "content": f"my key is {KEY}"},
               {"role": "assistant", "content": "noted"}]
    secrets = Secrets([KEY])
    first = redacted.redact(HistoryLoaded(messages=intake.messages(history)), secrets)
    fresh = redact_event(HistoryLoaded(messages=intake.messages(history)), [KEY])
    assert first == fresh and KEY not in (first.messages[0].content or "")
    again = redacted.redact(HistoryLoaded(messages=intake.messages(history)), secrets)
    assert all(a is b for a, b in zip(first.messages, again.messages, strict=True))
    # A secret learned later (a renewed key) is masked in a history passed again.
    history.append({"role": "user", "content": f"and {OTHER}"})
    history[1]["content"] = f"noted {OTHER}"
    secrets.add(OTHER)
    later = redacted.redact(HistoryLoaded(messages=intake.messages(history)), secrets)
    assert later == redact_event(HistoryLoaded(messages=intake.messages(history)), [KEY, OTHER])
    assert not any(OTHER in (m.content or "") for m in later.messages)


@settings(max_examples=60, deadline=None)
@given(st.lists(messages(), max_size=6))
def test_a_history_payload_is_the_events_payload(history):
    event = HistoryLoaded(messages=tuple(history))
    assert history_payload(event) in (None, to_payload(event))
    assert encode(event) == to_payload(event)
    assert encode(event) == to_payload(event)  # the second time from the per-message cache


def test_a_caller_passing_its_history_each_turn_gets_the_same_messages(server, home):
    """The agent hands the model the same message objects turn after turn (so the adapters'
    wire cache hits), and logs what it logged before the history was cached."""
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} {KEY}"}
               for i in range(6)]
    server.script(Reply.text("one"), Reply.text("two"))
    with Agent(model="fake-model", base_url=server.base_url, api_key=KEY, home=home) as agent:
        agent.run_conversation("first", conversation_history=history)
        before = agent._runner.state.messages[:6]
        agent.run_conversation("second", conversation_history=history)
        after = agent._runner.state.messages[:6]
    assert [m.content for m in before] == [m.content for m in after]
    assert all(not (m.content or "").count(KEY) for m in after)
    assert all(a is b for a, b in zip(before, after, strict=True))
    sent = [body["messages"][:6] for body in server.requests]
    assert sent[0] == sent[1]


def test_the_logged_history_is_unchanged_by_the_caches():
    """What the journal logs for a history is what the uncached path logs."""
    history = [from_openai({"role": "user", "content": f"{i} {KEY}"}) for i in range(4)]
    redacted = RedactedHistory()
    for _ in range(2):
        event = redacted.redact(HistoryLoaded(messages=tuple(history)), [KEY])
        plain = redact_event(HistoryLoaded(messages=tuple(history)), [KEY])
        assert event == plain and encode(event) == to_payload(plain)
        assert attrs.asdict(event) == attrs.asdict(plain)
