"""Named examples and properties for the rate-limit header parser."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.log.ratelimits import (
    Bucket,
    RateLimitSnapshot,
    format_count,
    format_seconds,
    format_usage,
    is_exhausted,
    parse_rate_limits,
    parse_reset,
    seconds_until_reset,
)

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()

OPENAI = (
    ("x-ratelimit-limit-requests", "60"),
    ("x-ratelimit-limit-tokens", "150000"),
    ("x-ratelimit-remaining-requests", "59"),
    ("x-ratelimit-remaining-tokens", "149984"),
    ("x-ratelimit-reset-requests", "1s"),
    ("x-ratelimit-reset-tokens", "6m0s"),
    ("content-type", "application/json"),
)

ANTHROPIC = (
    ("anthropic-ratelimit-requests-limit", "50"),
    ("anthropic-ratelimit-requests-remaining", "0"),
    ("anthropic-ratelimit-requests-reset", "2025-03-01T12:00:30Z"),
    ("anthropic-ratelimit-tokens-limit", "90000"),
    ("anthropic-ratelimit-tokens-remaining", "81000"),
    ("anthropic-ratelimit-tokens-reset", "2025-03-01T12:00:06Z"),
    ("anthropic-ratelimit-input-tokens-limit", "80000"),
    ("anthropic-ratelimit-input-tokens-remaining", "72000"),
    ("anthropic-ratelimit-input-tokens-reset", "2025-03-01T12:00:06.500000+00:00"),
    ("anthropic-ratelimit-output-tokens-limit", "16000"),
    ("anthropic-ratelimit-output-tokens-remaining", "16000"),
    ("anthropic-ratelimit-output-tokens-reset", "2025-03-01T12:00:01Z"),
    ("retry-after", "30"),
)


def test_openai_headers() -> None:
    snapshot = parse_rate_limits(OPENAI, now=NOW)
    assert snapshot.bucket("requests") == Bucket(limit=60, remaining=59, reset_seconds=1.0)
    assert snapshot.bucket("tokens") == Bucket(limit=150_000, remaining=149_984,
                                               reset_seconds=360.0)
    assert [name for name, _ in snapshot.buckets] == ["requests", "tokens"]
    assert snapshot.captured_at == NOW
    assert not is_exhausted(snapshot)
    assert is_exhausted(snapshot, reserve=59)
    assert seconds_until_reset(snapshot) is None


def test_anthropic_headers_with_rfc3339_resets() -> None:
    snapshot = parse_rate_limits(ANTHROPIC, now=NOW)
    assert snapshot.bucket("requests") == Bucket(limit=50, remaining=0, reset_seconds=30.0)
    assert snapshot.bucket("tokens") == Bucket(limit=90_000, remaining=81_000, reset_seconds=6.0)
    assert snapshot.bucket("input_tokens").reset_seconds == 6.5
    assert snapshot.bucket("output_tokens").used == 0
    assert is_exhausted(snapshot)
    assert seconds_until_reset(snapshot) == 30.0
    assert seconds_until_reset(snapshot, now=NOW + 12) == 18.0
    assert seconds_until_reset(snapshot, now=NOW + 99) == 0.0


def test_timestamps_need_now() -> None:
    snapshot = parse_rate_limits(ANTHROPIC)
    assert snapshot.bucket("requests") == Bucket(limit=50, remaining=0, reset_seconds=None)
    assert seconds_until_reset(snapshot) is None


def test_hourly_buckets_and_case() -> None:
    snapshot = parse_rate_limits((("X-RateLimit-Limit-Requests-1h", "1000"),
                                  ("X-RateLimit-Remaining-Requests-1h", "0"),
                                  ("X-RateLimit-Reset-Requests-1h", "59m59.5s")))
    assert snapshot.bucket("requests_1h") == Bucket(limit=1000, remaining=0,
                                                    reset_seconds=3599.5)
    assert format_usage(snapshot) == "requests/h 1k/1k, resets in 1h0m"


@pytest.mark.parametrize(("value", "seconds"), [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("2.5", 2.5), ("0", 0.0), ("1h2m3.5s", 3723.5),
    ("500us", 0.0005), (" 7s ", 7.0), ("-3", 0.0),
    ("2025-03-01T12:01:00Z", 60.0), ("2025-03-01T11:00:00Z", 0.0),
    ("2025-03-01T12:00:10", 10.0), (str(int(NOW) + 42), 42.0), (str(int(NOW * 1000) + 5000), 5.0),
    ("2025-03-01T12:00:10Z", 10.0), ("soon", None), ("", None), ("1.2.3s", None),
    ("nan", None), ("inf", None), ("9" * 80, None),
])
def test_parse_reset(value, seconds) -> None:
    parsed = parse_reset(value, now=NOW)
    if seconds is None:
        assert parsed is None
    else:
        assert parsed == pytest.approx(seconds)


def test_bad_values_are_skipped() -> None:
    snapshot = parse_rate_limits((("x-ratelimit-limit-requests", "lots"),
                                  ("x-ratelimit-remaining-requests", "1e999"),
                                  ("x-ratelimit-reset-requests", "whenever"),
                                  ("x-ratelimit-limit-tokens", "40000.0")))
    assert snapshot.bucket("requests") is None
    assert snapshot.bucket("tokens") == Bucket(limit=40_000)


def test_format_usage() -> None:
    snapshot = parse_rate_limits((
        ("x-ratelimit-limit-requests", "60"), ("x-ratelimit-remaining-requests", "48"),
        ("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-limit-tokens", "40000"),
        ("x-ratelimit-remaining-tokens", "31000"), ("x-ratelimit-reset-tokens", "6s")))
    assert format_usage(snapshot) == "requests 12/60, tokens 9k/40k, resets in 6s"
    assert format_usage(RateLimitSnapshot()) == "no rate-limit data"
    assert format_usage(parse_rate_limits(OPENAI)) == (
        "requests 1/60, tokens 16/150k, resets in 1s")


@pytest.mark.parametrize(("count", "text"), [
    (None, "?"), (0, "0"), (999, "999"), (1000, "1k"), (12_500, "12.5k"), (1_500_000, "1.5M")])
def test_format_count(count, text) -> None:
    assert format_count(count) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0.02, "20ms"), (6.2, "6s"), (360, "6m0s"), (3725, "1h2m"), (float("nan"), "?")])
def test_format_seconds(seconds, text) -> None:
    assert format_seconds(seconds) == text


_names = st.sampled_from([
    f"x-ratelimit-{f}-{b}{h}" for f in ("limit", "remaining", "reset")
    for b in ("requests", "tokens") for h in ("", "-1h")] + [
    f"anthropic-ratelimit-{b}-{f}" for f in ("limit", "remaining", "reset")
    for b in ("requests", "tokens", "input-tokens", "output-tokens")]) | st.text(max_size=30)
_values = (st.text(max_size=40) | st.integers().map(str)
           | st.floats(allow_nan=True, allow_infinity=True).map(str)
           | st.datetimes().map(lambda d: d.isoformat()))


@settings(max_examples=200, deadline=None)
@given(headers=st.lists(st.tuples(_names, _values), max_size=12),
       now=st.none() | st.floats(allow_nan=True, allow_infinity=True))
def test_parser_never_raises(headers, now) -> None:
    snapshot = parse_rate_limits(tuple(headers), now=now)
    format_usage(snapshot)
    is_exhausted(snapshot)
    wait = seconds_until_reset(snapshot, now=now)
    assert wait is None or 0 <= wait < float("inf")
    for _, bucket in snapshot.buckets:
        assert bucket.reset_seconds is None or bucket.reset_seconds >= 0


@settings(max_examples=100, deadline=None)
@given(h=st.integers(0, 99), m=st.integers(0, 59), s=st.integers(0, 59),
       ms=st.integers(0, 999))
def test_go_durations(h, m, s, ms) -> None:
    text = f"{h}h{m}m{s}s{ms}ms"
    assert parse_reset(text) == pytest.approx(3600 * h + 60 * m + s + ms / 1000)


def test_a_nonsense_clock_drops_timestamps_only() -> None:
    assert parse_reset("2025-03-01T12:01:00Z", now=float("nan")) is None
    assert parse_reset("6s", now=float("inf")) == 6.0
