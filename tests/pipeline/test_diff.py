"""``pipeline.insights.diff``: the field-level diff of a divergence and the side-by-side session diff."""

from __future__ import annotations

import json

from effects.eventlog.envelope import Envelope
from pipeline.insights.diff import common_prefix, field_diff


def _event(kind: str, payload: dict) -> str:
    return f"{kind} {json.dumps(payload, sort_keys=True)}"


def test_field_diff_names_each_differing_field_by_its_path():
    expected = _event("model_replied", {"message": {"content": "a", "tool_calls": [
        {"id": "c1", "name": "ls"}]}, "model": "m", "usage": {"input_tokens": 3}})
    produced = _event("model_replied", {"message": {"content": "b", "tool_calls": [
        {"id": "c1", "name": "cat"}]}, "model": "m", "usage": {"input_tokens": 3}})
    assert field_diff(expected, produced) == [
        '  model_replied.message.content: expected "a", produced "b"',
        '  model_replied.message.tool_calls[0].name: expected "ls", produced "cat"']


def test_field_diff_shows_missing_fields_other_kinds_and_text_whole():
    assert field_diff(_event("k", {"a": 1}), _event("k", {"a": 1, "b": 2})) == [
        '  k.b: expected "(absent)", produced 2']
    assert field_diff(_event("k", {"a": [1]}), _event("k", {"a": [1, 2]})) == [
        "  k.a: expected [1], produced [1, 2]"]
    assert field_diff(_event("turn_finished", {}), "one of model_replied, model_failed") == [
        "  expected: turn_finished {}", "  produced: one of model_replied, model_failed"]
    long = _event("k", {"text": "x" * 500})
    line = field_diff(long, _event("k", {"text": "y"}))[0]
    assert line.endswith('produced "y"') and "... (502 chars)" in line


def _envelope(seq: int, kind: str, payload: dict, session_id: str = "s") -> Envelope:
    return Envelope(session_id=session_id, seq=seq, kind=kind, schema_version=1,
                    recorded_at="t", payload=payload, prev_hash="h")


def test_common_prefix_ignores_the_session_id_of_the_first_record_only():
    a = [_envelope(0, "session_started", {"session_id": "a", "x": 1}, "a"),
         _envelope(1, "turn_started", {"u": "hi"}, "a"), _envelope(2, "k", {"v": 1}, "a")]
    b = [_envelope(0, "session_started", {"session_id": "b", "x": 1}, "b"),
         _envelope(1, "turn_started", {"u": "hi"}, "b"), _envelope(2, "k", {"v": 2}, "b")]
    assert common_prefix(a, b) == 2
    assert common_prefix(a, a[:1]) == 1
    assert common_prefix(a, [_envelope(0, "session_started", {"session_id": "b", "x": 2})]) == 0
