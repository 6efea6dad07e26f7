"""The system clock's text is ``datetime``'s, though it formats each second once."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from effects.clock import SystemClock


def _datetime_text(ns: int) -> str:
    second, micro = divmod(ns // 1000, 1_000_000)
    stamp = dt.datetime.fromtimestamp(second, dt.UTC).replace(microsecond=micro)
    return stamp.isoformat(timespec="microseconds")


@pytest.mark.parametrize("readings", [
    # within one second, then the next; a whole second (.000000); the clock going back.
    [1_767_225_599_999_999_999, 1_767_225_599_000_000_001, 1_767_225_600_000_000_000,
     1_767_225_600_000_999_999, 1_767_225_599_500_000_000],
    [0, 999, 1_000, 86_400_000_000_000, 4_102_444_800_123_456_789],
])
def test_now_is_datetimes_isoformat_in_microseconds(monkeypatch, readings):
    clock = SystemClock()
    for ns in readings:
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        assert clock.now() == _datetime_text(ns)


def test_now_reads_the_system_clock():
    before = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
    now = SystemClock().now()
    assert before <= now <= dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def test_new_ids_are_version_4_uuids_in_hex() -> None:
    import uuid

    from effects.clock import RandomIds
    ids = [RandomIds().new_id() for _ in range(200)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
