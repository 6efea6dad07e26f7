"""Named examples for the credential pool, and a state machine against a dict-based model."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from stages.errors import UsageError
from stages.log.credential_pool import (
    AUTH_COOLDOWN,
    BILLING_COOLDOWN,
    DEFAULT_COOLDOWN,
    PoolEntry,
    PoolState,
    available,
    next_expiry,
    record_failure,
    record_rate_limits,
    record_success,
    record_use,
    select,
)
from stages.log.ratelimits import parse_rate_limits
from stages.recovery.classify import FailureReason


def pool(strategy: str = "fill_first", keys: str = "abc") -> PoolState:
    return PoolState(provider="openai", strategy=strategy,
                     entries=tuple(PoolEntry(id=k, label=f"key {k}") for k in keys))


def run(state: PoolState, n: int, now: float = 0.0) -> tuple[list[str | None], PoolState]:
    picked: list[str | None] = []
    for _ in range(n):
        key = select(state, now=now)
        picked.append(key)
        if key is not None:
            state = record_use(state, key)
    return picked, state


def test_fill_first_sticks_to_the_first_available_key() -> None:
    picked, state = run(pool(), 3)
    assert picked == ["a", "a", "a"] and state.uses == (("a", 3),)
    state = record_failure(state, "a", reason="rate_limit", now=0.0)
    assert select(state, now=0.0) == "b"
    assert select(state, now=DEFAULT_COOLDOWN) == "a"


def test_round_robin_cycles_and_skips_resting_keys() -> None:
    picked, state = run(pool("round_robin"), 4)
    assert picked == ["a", "b", "c", "a"]
    state = record_failure(state, "b", reason="rate_limit", now=0.0, retry_after=10.0)
    picked, state = run(state, 4, now=5.0)
    assert picked == ["c", "a", "c", "a"]
    picked, _ = run(state, 3, now=10.0)
    assert picked == ["b", "c", "a"]


def test_least_used_picks_the_fewest_uses() -> None:
    state = record_use(record_use(record_use(pool("least_used"), "a"), "a"), "b")
    assert select(state, now=0.0) == "c"
    picked, state = run(state, 4)
    assert picked == ["c", "b", "c", "a"]
    assert dict(state.uses) == {"a": 3, "b": 2, "c": 2}


def test_every_key_resting_means_none_and_an_expiry() -> None:
    state = pool()
    for key, wait in (("a", 30.0), ("b", 10.0), ("c", 20.0)):
        state = record_failure(state, key, reason="rate_limit", now=100.0, retry_after=wait)
    assert select(state, now=100.0) is None and available(state, 100.0) == ()
    assert next_expiry(state) == 110.0
    assert next_expiry(state, now=112.0) == 120.0
    assert next_expiry(state, now=200.0) is None
    assert select(state, now=110.0) == "b"


def test_cooldown_sources_in_order() -> None:
    state = pool()
    assert record_failure(state, "a", reason="rate_limit", now=0, retry_after=5,
                          reset_seconds=50).cooling_until("a") == 5.0
    assert record_failure(state, "a", reason="rate_limit", now=0,
                          reset_seconds=50).cooling_until("a") == 50.0
    assert record_failure(state, "a", reason="rate_limit", now=0).cooling_until("a") == (
        DEFAULT_COOLDOWN)
    assert record_failure(state, "a", reason="billing", now=0).cooling_until("a") == (
        BILLING_COOLDOWN)
    assert record_failure(state, "a", reason=FailureReason.BILLING, now=0,
                          billing_cooldown=900).cooling_until("a") == 900.0
    assert record_failure(state, "a", reason="rate_limit", now=0, retry_after=float("nan"),
                          default_cooldown=7).cooling_until("a") == 7.0


def test_a_cooldown_is_never_shortened() -> None:
    state = record_failure(pool(), "a", reason="billing", now=0.0)
    assert record_failure(state, "a", reason="rate_limit", now=1.0, retry_after=1.0) is state


def test_auth_tries_the_refresh_hook_once_then_rests() -> None:
    state = record_failure(pool(), "a", reason="auth", now=0.0)
    assert state.refresh_tried == ("a",) and select(state, now=0.0) == "a"
    state = record_failure(state, "a", reason="auth_permanent", now=1.0)
    assert state.cooling_until("a") == 1.0 + AUTH_COOLDOWN
    assert select(state, now=2.0) == "b"
    refreshed = record_success(record_failure(pool(), "a", reason="auth", now=0.0), "a")
    assert refreshed.refresh_tried == ()
    again = record_failure(refreshed, "a", reason="auth", now=5.0)
    assert again.cooling_until("a") is None


@pytest.mark.parametrize("reason", ["overloaded", "server_error", "timeout", "transport",
                                    "context_overflow", "unknown", "long_context_tier"])
def test_failures_that_are_not_the_keys_fault_change_nothing(reason) -> None:
    state = pool()
    assert record_failure(state, "a", reason=reason, now=0.0) is state


def test_unknown_keys_are_ignored_so_old_logs_replay() -> None:
    state = pool()
    assert record_use(state, "zz") is state
    assert record_failure(state, "zz", reason="rate_limit", now=0.0) is state
    assert record_success(state, "zz") is state


def test_exhausted_rate_limit_headers_rest_the_key_before_a_429() -> None:
    headers = (("x-ratelimit-limit-requests", "60"), ("x-ratelimit-remaining-requests", "0"),
               ("x-ratelimit-reset-requests", "12s"))
    state = record_rate_limits(pool(), "a", parse_rate_limits(headers, now=100.0), now=101.0)
    assert state.cooling_until("a") == 112.0
    fine = parse_rate_limits((("x-ratelimit-remaining-requests", "3"),), now=0.0)
    assert record_rate_limits(state, "b", fine, now=0.0) is state


def test_bad_configuration_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="duplicate"):
        pool(keys="aa")
    with pytest.raises(UsageError, match="strategy"):
        pool(strategy="random")


# --- state machine ----------------------------------------------------------------------------

KEYS = ("k0", "k1", "k2", "k3")
REASONS = ("rate_limit", "billing", "auth", "auth_permanent", "overloaded", "timeout")


class Model:
    """The pool as plain dicts, written the obvious way."""

    def __init__(self, strategy: str, keys: tuple[str, ...]) -> None:
        self.strategy, self.keys = strategy, keys
        self.uses: dict[str, int] = {}
        self.until: dict[str, float] = {}
        self.tried: set[str] = set()
        self.last = -1

    def ready(self, now: float) -> list[str]:
        return [k for k in self.keys if self.until.get(k, float("-inf")) <= now]

    def fail(self, key: str, reason: str, now: float, retry_after: float | None) -> None:
        if reason in ("rate_limit", "billing"):
            wait = retry_after if retry_after is not None else (
                BILLING_COOLDOWN if reason == "billing" else DEFAULT_COOLDOWN)
            self.until[key] = max(self.until.get(key, float("-inf")), now + wait)
        elif reason in ("auth", "auth_permanent"):
            if key in self.tried:
                self.until[key] = max(self.until.get(key, float("-inf")), now + AUTH_COOLDOWN)
            self.tried.add(key)


class PoolMachine(RuleBasedStateMachine):
    @initialize(strategy=st.sampled_from(["fill_first", "least_used", "round_robin"]),
                size=st.integers(1, len(KEYS)))
    def start(self, strategy: str, size: int) -> None:
        keys = KEYS[:size]
        self.pool = PoolState(provider="p", strategy=strategy,
                              entries=tuple(PoolEntry(id=k) for k in keys))
        self.model = Model(strategy, keys)
        self.now = 0.0
        self.window: set[str] = set()
        self.seen_ready: tuple[str, ...] = ()

    @rule()
    def select_and_use(self) -> None:
        key = select(self.pool, now=self.now)
        ready = self.model.ready(self.now)
        assert (key is None) == (not ready)
        if key is None:
            return
        assert key in ready, "selected a resting key"
        if self.model.strategy == "fill_first":
            assert key == ready[0]
        if self.model.strategy == "least_used":
            assert self.model.uses.get(key, 0) == min(self.model.uses.get(k, 0) for k in ready)
        if self.model.strategy == "round_robin":
            self._check_fair(key, tuple(ready))
        self.pool = record_use(self.pool, key)
        self.model.uses[key] = self.model.uses.get(key, 0) + 1
        self.model.last = self.model.keys.index(key)

    def _check_fair(self, key: str, ready: tuple[str, ...]) -> None:
        if ready != self.seen_ready:
            self.seen_ready, self.window = ready, set()
        if self.window >= set(ready):
            self.window = set()
        assert key not in self.window, f"{key} picked twice before every ready key had a turn"
        self.window.add(key)

    @rule(index=st.integers(0, len(KEYS) - 1), reason=st.sampled_from(REASONS),
          retry_after=st.none() | st.floats(0, 500))
    def fail(self, index: int, reason: str, retry_after: float | None) -> None:
        key = self.model.keys[index % len(self.model.keys)]
        self.pool = record_failure(self.pool, key, reason=reason, now=self.now,
                                   retry_after=retry_after)
        self.model.fail(key, reason, self.now, retry_after)

    @rule(index=st.integers(0, len(KEYS) - 1))
    def succeed(self, index: int) -> None:
        key = self.model.keys[index % len(self.model.keys)]
        self.pool = record_success(self.pool, key)
        self.model.tried.discard(key)

    @rule(seconds=st.sampled_from([0.5, 5.0, 30.0, 61.0, 301.0, 3601.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def agrees_with_the_model(self) -> None:
        if not hasattr(self, "pool"):
            return
        assert {k: v for k, v in self.pool.uses} == self.model.uses
        assert {k: v for k, v in self.pool.cooldown_until} == self.model.until
        assert set(self.pool.refresh_tried) == self.model.tried
        assert list(available(self.pool, self.now)) == self.model.ready(self.now)
        expiry = next_expiry(self.pool, now=self.now)
        pending = [u for u in self.model.until.values() if u > self.now]
        assert expiry == (min(pending) if pending else None)


PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                         deadline=None)
TestPoolMachine = PoolMachine.TestCase
