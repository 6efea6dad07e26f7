"""Retry delays: jittered exponential backoff that honours ``Retry-After``.

Pure: the jitter is a number in ``[0, 1)`` the caller draws in the effects layer and records,
so a replay computes the same delay. The delay of attempt ``n`` (1-based) is

    d = min(base * 2**(n - 1), cap);  delay = d + jitter * 0.5 * d

so it lies in ``[d, 1.5 d]``. When the provider sent ``Retry-After`` (or the error message named
a delay) that is used instead, capped at ``retry_after_cap`` so one header cannot park a turn
for an hour. A credential rotation or a fallback switch is not a retry of the same request:
the caller does not count it as an attempt.

:func:`retry_after_of` picks that delay: the adapter's header, else one the error body names
(Google's ``retryDelay``), else one its message names ("try again in 7m12s" is 432 s, read by
:func:`duration_in_text`).
"""

from __future__ import annotations

import math
import re

BASE_DELAY = 2.0
MAX_DELAY = 60.0
RETRY_AFTER_CAP = 120.0
_MAX_EXPONENT = 64  # 2**64 * base is far beyond any cap; keeps the arithmetic finite


def backoff_delay(attempt: int, *, jitter: float, retry_after: float | None,
                  base: float = BASE_DELAY, cap: float = MAX_DELAY,
                  retry_after_cap: float = RETRY_AFTER_CAP) -> float:
    """Seconds to wait before attempt ``attempt`` (1 = the first retry).

    ``attempt`` below 1 counts as 1; ``jitter`` is clamped into ``[0, 1]`` (NaN counts as 0);
    a negative or non-finite ``retry_after`` is ignored.
    """
    if retry_after is not None and math.isfinite(retry_after) and retry_after >= 0:
        return min(float(retry_after), retry_after_cap)
    exponent = min(max(attempt, 1) - 1, _MAX_EXPONENT)
    delay = min(base * 2.0 ** exponent, cap)
    return delay + _unit(jitter) * 0.5 * delay


def _unit(jitter: float) -> float:
    if not math.isfinite(jitter) or jitter <= 0:
        return 0.0
    return min(jitter, 1.0)


# --- delays named in an error's text ----------------------------------------------------------

_TRIGGER = re.compile(r"(?:try again in|retry after|retry in|retry-after:?|retrydelay:?)\s*",
                      re.IGNORECASE)
_PART = re.compile(r"\s*(\d{1,7}(?:\.\d{1,9})?)\s*(milliseconds?|ms|hours?|hrs?|h|minutes?|mins?|m"
                   r"|seconds?|secs?|s)?(?![a-z])", re.IGNORECASE)
_SCALE = {"h": 3600.0, "m": 60.0, "s": 1.0}


def duration_in_text(text: str) -> float | None:
    """Seconds in a duration such as ``"20s"``, ``"1.5s"``, ``"7m12s"`` (432), ``"20ms"``,
    ``"2 hours"`` or ``"6 seconds"``; a bare number counts as seconds. None when there is none."""
    total, position, parts = 0.0, 0, 0
    while (found := _PART.match(text, position)) is not None:
        unit = found.group(2)
        if unit is None and parts:  # "7m 12" is not a duration this reads
            break
        total += float(found.group(1)) * _unit_scale(unit)
        position, parts = found.end(), parts + 1
        if unit is None:
            break
    return total if parts else None


def _unit_scale(unit: str | None) -> float:
    if not unit:
        return 1.0
    unit = unit.lower()
    if unit.startswith(("ms", "milli")):
        return 0.001
    if unit.startswith("min") or unit == "m":
        return 60.0
    return _SCALE.get(unit[0], 1.0)


def retry_after_of(given: object, text: str, hint: float | None = None) -> float | None:
    """The adapter's ``Retry-After``, else a delay the body names (``hint``), else one the
    message names ("try again in 7m12s"); a negative or non-finite value is no delay."""
    if (isinstance(given, (int, float)) and not isinstance(given, bool)
            and math.isfinite(given) and given >= 0):
        return float(given)
    if hint is not None and math.isfinite(hint) and hint >= 0:
        return hint
    found = _TRIGGER.search(text)
    if found is None:
        return None
    return duration_in_text(text[found.end():found.end() + 40])
