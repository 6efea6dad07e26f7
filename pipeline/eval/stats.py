"""Paired differences and their bootstrap confidence intervals (percentile method), with the
standard library's random numbers, seeded, so that a report is the same on every run."""

from __future__ import annotations

import random
from collections.abc import Sequence

import attrs

__all__ = ["Paired", "paired"]


@attrs.frozen(kw_only=True)
class Paired:
    """The mean of fork - recorded over the pairs that have both values, and its interval."""

    n: int
    fork_mean: float | None
    recorded_mean: float | None
    diff: float | None
    low: float | None
    high: float | None

    @property
    def real(self) -> bool:
        """The interval leaves zero out: the difference is not chance at this level."""
        return self.low is not None and self.high is not None and (
            self.low > 0 or self.high < 0)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _quantile(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def paired(fork: Sequence[float | None], recorded: Sequence[float | None], *,
           resamples: int = 2000, level: float = 0.95, seed: int = 0) -> Paired:
    """Fork - recorded, pair by pair (a pair missing a side is left out)."""
    pairs = [(f, r) for f, r in zip(fork, recorded, strict=True)
             if f is not None and r is not None]
    if not pairs:
        return Paired(n=0, fork_mean=None, recorded_mean=None, diff=None, low=None, high=None)
    diffs = [f - r for f, r in pairs]
    n = len(diffs)
    draw = random.Random(seed)
    means = sorted(sum(draw.choices(diffs, k=n)) / n for _ in range(max(resamples, 1)))
    tail = (1 - level) / 2
    return Paired(n=n, fork_mean=_mean([f for f, _ in pairs]),
                  recorded_mean=_mean([r for _, r in pairs]), diff=_mean(diffs),
                  low=_quantile(means, tail), high=_quantile(means, 1 - tail))
