"""A session's line encoder makes the text of a kind once; what it remembers never lets a
record through that it would have refused."""

from __future__ import annotations

import pytest

from effects.eventlog.envelope import GENESIS_HASH, encode_hashed, line_hash
from effects.eventlog.line_encoder import LineEncoder
from effects.eventlog.store import SessionLog
from stages.errors import UsageError

T0 = "2026-01-01T00:00:00.000000+00:00"


def test_a_remembered_kind_still_refuses_a_bool_version_and_bad_values():
    encoder = LineEncoder("s1", None)
    encoder.encode(0, "note", 1, T0, GENESIS_HASH, {})
    for kind, version, at, payload in [
        ("note", True, T0, {}),  # True finds the text of version 1: still no version
        ("note", 1, 12345, {}),
        ("note", 1, T0, ["not", "a", "dict"]),
        (["note"], 1, T0, {}),  # not hashable, so never remembered
        ("", 1, T0, {}),
        ("note", -1, T0, {}),
    ]:
        with pytest.raises(UsageError):
            encoder.encode(1, kind, version, at, GENESIS_HASH, payload)


def test_each_record_is_the_line_encode_hashed_writes_with_its_newline():
    encoder = LineEncoder("s1", None)
    prev = GENESIS_HASH
    for seq, (kind, version) in enumerate([("a", 1), ("b", 2), ("a", 1), ("a", 3)]):
        line, digest = encoder.encode(seq, kind, version, T0, prev, {"seq": seq})
        assert (line[:-1], digest) == encode_hashed("s1", seq, kind, version, T0, prev,
                                                    {"seq": seq})
        assert line.endswith(b"\n") and digest == line_hash(line[:-1])
        prev = digest


def test_add_writes_what_append_writes_and_says_where(tmp_path):
    with SessionLog.open(tmp_path / "a", "same", durability="flush") as one, \
            SessionLog.open(tmp_path / "b", "same", durability="flush") as other:
        for i, kind in enumerate(["session_started", "note", "note"]):
            envelope = one.append(kind, 1, {"i": i}, T0)
            assert other.add(kind, 1, {"i": i}, T0) == (envelope.seq, envelope.prev_hash)
        with pytest.raises(UsageError):
            other.add("note", 1, {"x": object()}, T0)
        assert other.next_seq == 3
    assert one.path.read_bytes() == other.path.read_bytes()


def test_a_log_begins_with_its_session_start_through_add_too(tmp_path):
    with SessionLog.open(tmp_path, "first", durability="flush") as log:
        with pytest.raises(UsageError, match="begins with"):
            log.add("note", 1, {}, T0)
        assert log.next_seq == 0


def test_payload_json_without_the_c_encoder_writes_the_same_text(monkeypatch) -> None:
    from effects.eventlog import encoded
    payload = {"b": [1, 2.5, None, True], "a": "é\u2028\"", "c": {"z": -0.0, "y": 10**20}}
    fast = encoded.payload_json(payload)
    monkeypatch.setattr(encoded, "_MAKE_ENCODER", None)
    assert encoded.payload_json(payload) == fast
    assert fast == ('{"a":"é\u2028\\"","b":[1,2.5,null,true],'
                    '"c":{"y":100000000000000000000,"z":-0.0}}')
