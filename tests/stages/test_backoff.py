"""Named examples and properties for the retry backoff."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.recovery.backoff import (
    BASE_DELAY,
    MAX_DELAY,
    RETRY_AFTER_CAP,
    backoff_delay,
    duration_in_text,
    retry_after_of,
)


@pytest.mark.parametrize(("attempt", "expected"), [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0),
                                                   (5, 32.0), (6, 60.0), (50, 60.0)])
def test_exponential_without_jitter(attempt, expected) -> None:
    assert backoff_delay(attempt, jitter=0.0, retry_after=None) == expected


def test_jitter_adds_up_to_half_the_delay() -> None:
    assert backoff_delay(1, jitter=0.5, retry_after=None) == 2.5
    assert backoff_delay(3, jitter=0.25, retry_after=None) == 9.0
    assert backoff_delay(10, jitter=0.999, retry_after=None) < 1.5 * MAX_DELAY
    assert backoff_delay(1, jitter=1.0, retry_after=None) == 3.0


def test_retry_after_is_honoured_and_capped() -> None:
    assert backoff_delay(1, jitter=0.9, retry_after=7.0) == 7.0
    assert backoff_delay(9, jitter=0.9, retry_after=0.0) == 0.0
    assert backoff_delay(1, jitter=0.0, retry_after=3600.0) == RETRY_AFTER_CAP
    assert backoff_delay(1, jitter=0.0, retry_after=3600.0, retry_after_cap=30.0) == 30.0


def test_bad_inputs_are_tamed() -> None:
    assert backoff_delay(0, jitter=0.0, retry_after=None) == BASE_DELAY
    assert backoff_delay(-3, jitter=-1.0, retry_after=-5.0) == BASE_DELAY
    assert backoff_delay(1, jitter=float("nan"), retry_after=float("inf")) == BASE_DELAY
    assert backoff_delay(1, jitter=7.0, retry_after=float("nan")) == 1.5 * BASE_DELAY
    assert backoff_delay(10**9, jitter=0.0, retry_after=None) == MAX_DELAY


def test_custom_base_and_cap() -> None:
    assert backoff_delay(3, jitter=0.0, retry_after=None, base=5.0, cap=120.0) == 20.0
    assert backoff_delay(9, jitter=0.0, retry_after=None, base=5.0, cap=120.0) == 120.0


_attempts = st.integers(-5, 10_000)
_jitter = st.floats(0.0, 1.0, exclude_max=True)


@settings(max_examples=200, deadline=None)
@given(attempt=_attempts, jitter=_jitter)
def test_monotone_in_attempt(attempt, jitter) -> None:
    now = backoff_delay(attempt, jitter=jitter, retry_after=None)
    assert backoff_delay(attempt + 1, jitter=jitter, retry_after=None) >= now


@settings(max_examples=200, deadline=None)
@given(attempt=_attempts, jitter=st.floats(allow_nan=True, allow_infinity=True))
def test_bounded(attempt, jitter) -> None:
    delay = backoff_delay(attempt, jitter=jitter, retry_after=None)
    base = min(BASE_DELAY * 2.0 ** min(max(attempt, 1) - 1, 64), MAX_DELAY)
    assert base <= delay <= 1.5 * base
    assert BASE_DELAY <= delay <= 1.5 * MAX_DELAY


@settings(max_examples=200, deadline=None)
@given(attempt=_attempts, jitter=_jitter,
       retry_after=st.floats(0.0, 10**9, allow_nan=False, allow_infinity=False))
def test_retry_after_respected(attempt, jitter, retry_after) -> None:
    delay = backoff_delay(attempt, jitter=jitter, retry_after=retry_after)
    assert delay == min(retry_after, RETRY_AFTER_CAP)
    assert math.isfinite(delay)


# --- delays named in an error's text (issue 8: "7m12s" was read as 420 s) ---------------------

@pytest.mark.parametrize(("text", "seconds"), [
    ("7m12s", 432.0), ("20s", 20.0), ("1.5s", 1.5), ("20ms", 0.02), ("1h2m3s", 3723.0),
    ("6 seconds. Please go here", 6.0), ("2 hours", 7200.0), ("5 minutes 30 seconds", 330.0),
    ("35.43s.", 35.43), ("60", 60.0), ("7m 12", 420.0), ("soon", None), ("", None),
])
def test_duration_in_text(text, seconds) -> None:
    assert duration_in_text(text) == seconds


@pytest.mark.parametrize(("given_", "text", "hint", "seconds"), [
    (None, "Please try again in 7m12s. Visit https://platform.openai.com", None, 432.0),
    (None, "Please retry after 6 seconds. Please go here: https://aka.ms/oai", None, 6.0),
    (None, "Please retry in 35.43s.", None, 35.43),
    (None, "No deployments available, Try again in 60 seconds. Passed model=x", None, 60.0),
    (12.0, "try again in 7m12s", 3.0, 12.0),
    (None, "try again in 7m12s", 35.0, 35.0),
    (float("nan"), "no delay here", None, None),
    (-1.0, "try again in 2s", None, 2.0),
    ("12", "try again in 2s", None, 2.0),
])
def test_retry_after_of(given_, text, hint, seconds) -> None:
    assert retry_after_of(given_, text, hint) == seconds


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60))
def test_any_text_reads_to_no_delay_or_a_finite_one(text) -> None:
    seconds = duration_in_text(text)
    assert seconds is None or (math.isfinite(seconds) and seconds >= 0)
    after = retry_after_of(None, "try again in " + text)
    assert after is None or (math.isfinite(after) and after >= 0)
