"""Retry delays: jittered exponential backoff that honours ``Retry-After``.

Pure: the jitter is a number in ``[0, 1)`` the caller draws in the effects layer and records,
so a replay computes the same delay. The delay of attempt ``n`` (1-based) is

    d = min(base * 2**(n - 1), cap);  delay = d + jitter * 0.5 * d

so it lies in ``[d, 1.5 d]``. When the provider sent ``Retry-After`` (or the error message named
a delay) that is used instead, capped at ``retry_after_cap`` so one header cannot park a turn
for an hour. A credential rotation or a fallback switch is not a retry of the same request:
the caller does not count it as an attempt.
"""

from __future__ import annotations

import math

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
