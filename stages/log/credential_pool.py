"""Credential pool: several keys for one provider, chosen by strategy, rested after failures.

Pure state and transitions. The runner derives a :class:`PoolState` by replaying the events that
name a key (used, failed, succeeded, rate-limit headers), so the pool replays and survives a
restart; the secrets themselves never appear here, only the ids the adapter maps to them.

Strategies:

* ``fill_first``: always the first available key, in configured order;
* ``round_robin``: the next available key after the one used last, cyclically;
* ``least_used``: the available key with the fewest recorded uses (ties: configured order).

Failures:

* ``rate_limit`` (429) and ``billing`` (402): the key rests until ``retry_after`` seconds, else
  the rate-limit reset, else a default (``default_cooldown``, 60 s; ``billing_cooldown``,
  3600 s; every duration configurable, cf. hermes #33049). The key is rotated away from on the
  first 429, not retried once more (hermes #41836).
* ``auth`` / ``auth_permanent`` (401/403): the first failure marks ``refresh_tried`` and leaves
  the key available, so the caller runs its refresh hook once and tries again; a second failure
  before a success rests the key for ``auth_cooldown`` (300 s).
* any other reason says nothing about the key and changes nothing.

Rotation never counts as a retry of the request: the caller keeps its retry counter for
backoff on the same key, so a pool of ten keys gets all ten tried (hermes #16830). When
:func:`select` returns None every key is resting: the caller falls back to the next provider
(or waits until :func:`next_expiry`), it never spins.

Events naming a key the pool no longer holds are ignored, so a log keeps replaying after the
pool is reconfigured.
"""

from __future__ import annotations

import math
from typing import Literal, TypeVar

import attrs

from stages.errors import UsageError
from stages.log.ratelimits import RateLimitSnapshot, is_exhausted, seconds_until_reset

Strategy = Literal["round_robin", "least_used", "fill_first"]
STRATEGIES: tuple[str, ...] = ("fill_first", "least_used", "round_robin")
DEFAULT_COOLDOWN = 60.0
BILLING_COOLDOWN = 3600.0
AUTH_COOLDOWN = 300.0
_QUOTA_REASONS = frozenset({"rate_limit", "billing"})
_AUTH_REASONS = frozenset({"auth", "auth_permanent"})
V = TypeVar("V")


@attrs.frozen(kw_only=True)
class PoolEntry:
    id: str
    label: str = ""


def _check_entries(_: object, __: object, entries: tuple[PoolEntry, ...]) -> None:
    ids = [entry.id for entry in entries]
    if len(set(ids)) != len(ids):
        raise UsageError(f"credential pool has duplicate key ids: {ids}")


def _check_strategy(_: object, __: object, strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown credential pool strategy {strategy!r}; "
                         f"expected one of {', '.join(STRATEGIES)}")


@attrs.frozen(kw_only=True)
class PoolState:
    """The pool of one provider. Per-key data are ``(id, value)`` pairs in entry order;
    ``refresh_tried`` holds the ids whose refresh hook has been tried since their last
    success."""

    provider: str
    entries: tuple[PoolEntry, ...] = attrs.field(validator=_check_entries)
    strategy: str = attrs.field(default="fill_first", validator=_check_strategy)
    uses: tuple[tuple[str, int], ...] = ()
    cooldown_until: tuple[tuple[str, float], ...] = ()
    last_index: int = -1
    refresh_tried: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(entry.id for entry in self.entries)

    def uses_of(self, key: str) -> int:
        return dict(self.uses).get(key, 0)

    def cooling_until(self, key: str) -> float | None:
        return dict(self.cooldown_until).get(key)


def available(pool: PoolState, now: float) -> tuple[str, ...]:
    """The keys not resting at ``now``, in entry order."""
    resting = dict(pool.cooldown_until)
    return tuple(key for key in pool.ids if not now < resting.get(key, -math.inf))


def select(pool: PoolState, *, now: float) -> str | None:
    """The key to use next, or None when every key is resting (the caller falls back)."""
    ready = available(pool, now)
    if not ready:
        return None
    if pool.strategy == "least_used":
        return min(ready, key=pool.uses_of)
    if pool.strategy == "round_robin":
        count = len(pool.entries)
        for step in range(1, count + 1):
            key = pool.entries[(pool.last_index + step) % count].id
            if key in ready:
                return key
    return ready[0]


def record_use(pool: PoolState, key: str) -> PoolState:
    """``key`` was sent a request: count it, and remember it for round-robin."""
    if key not in pool.ids:
        return pool
    return attrs.evolve(pool, uses=_put(pool, pool.uses, key, pool.uses_of(key) + 1),
                        last_index=pool.ids.index(key))


def record_failure(pool: PoolState, key: str, *, reason: str, now: float,
                   retry_after: float | None = None, reset_seconds: float | None = None,
                   default_cooldown: float = DEFAULT_COOLDOWN,
                   billing_cooldown: float = BILLING_COOLDOWN,
                   auth_cooldown: float = AUTH_COOLDOWN) -> PoolState:
    """A request with ``key`` failed for ``reason`` (a ``FailureReason`` value)."""
    reason = str(reason)
    if key not in pool.ids:
        return pool
    if reason in _QUOTA_REASONS:
        default = billing_cooldown if reason == "billing" else default_cooldown
        return _rest(pool, key, now + _first_duration(retry_after, reset_seconds, default))
    if reason in _AUTH_REASONS:
        if key not in pool.refresh_tried:
            tried = tuple(k for k in pool.ids if k in pool.refresh_tried or k == key)
            return attrs.evolve(pool, refresh_tried=tried)
        return _rest(pool, key, now + _first_duration(None, None, auth_cooldown))
    return pool


def record_success(pool: PoolState, key: str) -> PoolState:
    """``key`` worked: its refresh hook may be tried again on a later auth failure."""
    if key not in pool.refresh_tried:
        return pool
    return attrs.evolve(pool, refresh_tried=tuple(k for k in pool.refresh_tried if k != key))


def record_rate_limits(pool: PoolState, key: str, snapshot: RateLimitSnapshot, *, now: float,
                       default_cooldown: float = DEFAULT_COOLDOWN) -> PoolState:
    """Rest ``key`` before it hits a 429 when its last response says a bucket is empty."""
    if key not in pool.ids or not is_exhausted(snapshot):
        return pool
    wait = seconds_until_reset(snapshot, now=now)
    return _rest(pool, key, now + _first_duration(wait, None, default_cooldown))


def next_expiry(pool: PoolState, *, now: float | None = None) -> float | None:
    """When the next resting key becomes available (after ``now`` when given), else None."""
    pending = [until for _, until in pool.cooldown_until if now is None or until > now]
    return min(pending, default=None)


# --- helpers ----------------------------------------------------------------------------------

def _first_duration(first: float | None, second: float | None, default: float) -> float:
    for value in (first, second, default):
        if value is not None and math.isfinite(value) and value >= 0:
            return float(value)
    return 0.0


def _rest(pool: PoolState, key: str, until: float) -> PoolState:
    current = pool.cooling_until(key)
    if current is not None and current >= until:
        return pool
    return attrs.evolve(pool, cooldown_until=_put(pool, pool.cooldown_until, key, until))


def _put(pool: PoolState, pairs: tuple[tuple[str, V], ...], key: str,
            value: V) -> tuple[tuple[str, V], ...]:
    table = dict(pairs)
    table[key] = value
    return tuple((k, table[k]) for k in pool.ids if k in table)
