"""A caller's history passed on every turn is converted, redacted and encoded once per message
(pipeline/intake.py, pipeline/shell/redacted.py), with the very results of doing it afresh."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from effects.eventlog import line_encoder
from effects.eventlog.codec import to_payload
from effects.eventlog.envelope import GENESIS_HASH, encode_hashed
from pipeline import intake as intake_module
from pipeline.agent import Agent
from pipeline.intake import HistoryIntake
from pipeline.providers import Secrets
from pipeline.shell import redacted as redacted_module
from pipeline.shell.journal import encode
from pipeline.shell.redacted import RedactedHistory, history_payload
from stages.log.events import HistoryLoaded
from stages.log.messages import Message, from_openai
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


def _conversation(n):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
            for i in range(n)]


def _counted(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_grown_history_freezes_and_converts_only_its_new_dicts(monkeypatch):
    intake = HistoryIntake()
    history = _conversation(50)
    first = intake.messages(history)
    keys = _counted(monkeypatch, intake_module, "_key")
    converted = _counted(monkeypatch, intake_module, "from_openai")
    history += [{"role": "user", "content": "new"}, {"role": "assistant", "content": "reply"}]
    grown = intake.messages(history)
    assert len(keys) == 2 and len(converted) == 2
    assert all(a is b for a, b in zip(first, grown, strict=False))
    assert grown == tuple(from_openai(m) for m in history)


def test_a_history_that_moved_keeps_its_messages_without_converting_them(monkeypatch):
    intake = HistoryIntake()
    history = _conversation(10)
    first = intake.messages(history)
    converted = _counted(monkeypatch, intake_module, "from_openai")
    window = intake.messages(history[4:])  # the caller dropped the oldest messages
    assert not converted and all(a is b for a, b in zip(first[4:], window, strict=True))


def _edits_then_fresh(intake, history, edit):
    """The messages before an in-place edit of ``history``, and after it (with what a fresh
    conversion gives), for a caller that passes the very same list each time."""
    before = intake.messages(history)
    edit(history)
    return before, intake.messages(history), tuple(from_openai(m) for m in history)


def test_an_edited_content_part_gets_a_new_message():
    history = [{"role": "user", "content": [{"type": "text", "text": "old"}]}]
    before, after, fresh = _edits_then_fresh(
        HistoryIntake(), history, lambda h: h[0]["content"][0].update(text="new"))
    assert after == fresh and after[0] != before[0] and "new" in str(after[0].content)


def test_edited_tool_call_arguments_get_a_new_message():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    history = [{"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": "3"}]
    before, after, fresh = _edits_then_fresh(
        HistoryIntake(), history, lambda h: call["function"].update(arguments='{"x": 2}'))
    assert after == fresh and after[0].tool_calls[0].arguments == '{"x":2}'
    assert after[1] is before[1]


def test_the_same_list_edited_grown_and_shortened_reads_as_it_is_now():
    intake = HistoryIntake()
    history = _conversation(6)
    first = intake.messages(history)

    def edit(h):
        h[2]["content"] = "edited"
        h.append({"role": "user", "content": "more"})

    before, after, fresh = _edits_then_fresh(intake, history, edit)
    assert before == first and after == fresh and after[2].content == "edited"
    del history[3:]
    shorter = intake.messages(history)
    assert shorter == tuple(from_openai(m) for m in history)
    assert shorter[:2] == first[:2] and shorter[0] is first[0]


def test_values_equal_across_types_at_the_same_position_are_not_confused():
    intake = HistoryIntake()
    for content in (1, True, 1.0, [{"type": "text", "text": "a", "n": 1}],
                    [{"type": "text", "text": "a", "n": True}]):
        history = [{"role": "user", "content": content}]
        assert intake.messages(history) == (from_openai({"role": "user", "content": content}),)


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


def test_a_grown_history_redacts_and_hashes_only_its_new_messages(monkeypatch):
    intake = HistoryIntake()
    redacted = RedactedHistory()
    history = [{"role": "user", "content": f"m{i} {KEY}"} for i in range(20)]
    first = redacted.redact(HistoryLoaded(messages=intake.messages(history)), [KEY])
    hashed = _counted(monkeypatch, Message, "__hash__")
    history.append({"role": "assistant", "content": f"and {KEY}"})
    grown = redacted.redact(HistoryLoaded(messages=intake.messages(history)), [KEY])
    assert len(hashed) <= 2  # the new message, not the twenty known ones
    assert grown.messages[:20] == first.messages
    assert grown == redact_event(HistoryLoaded(messages=intake.messages(history)), [KEY])


def test_a_history_passed_again_is_not_encoded_again(monkeypatch):
    history = tuple(from_openai(m) for m in _conversation(30))
    history_payload(HistoryLoaded(messages=history))
    encoded = _counted(monkeypatch, line_encoder, "payload_json")
    encoded_here = _counted(monkeypatch, redacted_module, "payload_json")
    grown = HistoryLoaded(messages=(*history, from_openai({"role": "user", "content": "new"})))
    line = encode_hashed("s", 1, grown.kind, 1, "t", GENESIS_HASH, encode(grown))
    assert not encoded and len(encoded_here) == 1  # the new message alone
    assert line == encode_hashed("s", 1, grown.kind, 1, "t", GENESIS_HASH, to_payload(grown))


@settings(max_examples=60, deadline=None)
@given(st.lists(messages(), max_size=6))
def test_a_history_payload_is_the_events_payload(history):
    event = HistoryLoaded(messages=tuple(history))
    payload = history_payload(event)
    assert payload in (None, to_payload(event))
    if payload is not None:  # and the line is the very bytes the whole payload encodes to
        line = encode_hashed("s", 1, event.kind, 1, "t", GENESIS_HASH, payload)
        assert line == encode_hashed("s", 1, event.kind, 1, "t", GENESIS_HASH, dict(payload))
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


_CONTENTS = st.sampled_from(["a", "b", "", None, 1, 1.0, True, [{"type": "text", "text": "a"}],
                             [{"type": "text", "text": "a", "n": 1.0}]])


@given(st.lists(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _CONTENTS),
                         max_size=6), min_size=1, max_size=6),
       st.lists(st.booleans(), min_size=6, max_size=6))
def test_histories_passed_in_turn_read_as_converted_afresh(histories, in_place):
    intake = HistoryIntake()
    kept: list[dict] = []
    for pairs, edit in zip(histories, in_place, strict=False):
        if edit:  # the caller's one list, edited in place at the positions it still has
            for index, (role, content) in enumerate(pairs[:len(kept)]):
                kept[index].update(role=role, content=content)
            kept[len(pairs):] = []
            kept += [{"role": role, "content": content} for role, content in pairs[len(kept):]]
            history = kept
        else:
            history = [{"role": role, "content": content} for role, content in pairs]
        fresh = tuple(from_openai(dict(m)) for m in history)
        messages, parts = intake.taken(history)
        assert messages == fresh
        assert parts == tuple(i for i, m in enumerate(fresh) if type(m.content) is tuple)


def test_a_history_passed_again_is_not_looked_up_again(monkeypatch):
    history = tuple(from_openai(m) for m in _conversation(30))
    first = history_payload(HistoryLoaded(messages=history))
    looked_up = _counted(monkeypatch, redacted_module, "_PAYLOADS")
    again = history_payload(HistoryLoaded(messages=history))
    assert again == first and again is not None and first is not None
    assert again.text == first.text
    rewound = history_payload(HistoryLoaded(messages=history[:10]))
    grown = history_payload(HistoryLoaded(
        messages=(*history, from_openai({"role": "user", "content": "new"}))))
    assert len(looked_up) == 1  # the new message alone
    assert rewound == to_payload(HistoryLoaded(messages=history[:10]))
    assert grown is not None and len(grown["messages"]) == 31


@settings(max_examples=40, deadline=None)
@given(st.lists(messages(), min_size=1, max_size=6),
       st.lists(st.lists(st.integers(0, 5), max_size=6), min_size=1, max_size=5))
def test_histories_sharing_messages_get_the_events_payloads(pool, picks):
    for pick in picks:
        event = HistoryLoaded(messages=tuple(pool[i % len(pool)] for i in pick))
        payload = history_payload(event)
        assert payload in (None, to_payload(event))
        if payload is not None:
            assert payload.text == line_encoder.payload_json(to_payload(event))


def test_two_agents_passing_histories_in_turn_keep_each_their_payloads(monkeypatch):
    mine = tuple(from_openai(m) for m in _conversation(30))
    theirs = tuple(from_openai(m) for m in _conversation(30))  # equal values, other objects
    for history in (mine, theirs):
        history_payload(HistoryLoaded(messages=history))
    looked_up = _counted(monkeypatch, redacted_module, "_PAYLOADS")
    for history in (mine, theirs, mine):
        assert history_payload(HistoryLoaded(messages=history)) == to_payload(
            HistoryLoaded(messages=history))
    assert not looked_up
