"""How credential pools, rate limits and the active provider follow from events (used by the
fold; kept apart so the fold stays a table)."""

from __future__ import annotations

import datetime as dt

import attrs

from stages.log import credential_pool as cp
from stages.log.events import (
    CredentialRefreshed,
    ModelReplied,
    RecoveryDecided,
    SessionSettings,
    TurnStarted,
)
from stages.log.ratelimits import parse_rate_limits
from stages.log.state import State, TurnState

QUOTA_REASONS = ("rate_limit", "billing")
AUTH_REASONS = ("auth", "auth_permanent")


def pools_for(settings: SessionSettings, old: tuple[cp.PoolState | None, ...]
              ) -> tuple[cp.PoolState | None, ...]:
    """A pool per provider with pooled keys; a pool whose keys did not change keeps its state."""
    pools: list[cp.PoolState | None] = []
    for index, entry in enumerate(settings.chain):
        previous = old[index] if index < len(old) else None
        ids = tuple(entry.credentials)
        if not ids:
            pools.append(None)
        elif previous is not None and previous.ids == ids:
            pools.append(attrs.evolve(previous, strategy=settings.credential_strategy))
        else:
            pools.append(cp.PoolState(provider=entry.provider,
                                      entries=tuple(cp.PoolEntry(id=i, label=i) for i in ids),
                                      strategy=settings.credential_strategy))
    return tuple(pools)


def _with_pool(state: State, index: int, pool: cp.PoolState) -> State:
    pools = list(state.pools)
    pools[index] = pool
    return attrs.evolve(state, pools=tuple(pools))


def _pool(state: State, index: int) -> cp.PoolState | None:
    return state.pools[index] if index < len(state.pools) else None


def start_provider(state: State, e: TurnStarted) -> int:
    """Fallback is turn-scoped: the primary comes back once its rest is over."""
    if state.primary_rest_until is None:
        return 0
    started = dt.datetime.fromisoformat(e.started_at).timestamp()
    return state.provider_index if started < state.primary_rest_until else 0


def on_credential(state: State, index: int, credential_id: str) -> State:
    pool = _pool(state, index)
    return state if pool is None else _with_pool(state, index, cp.record_use(pool, credential_id))


def on_reply(state: State, turn: TurnState, e: ModelReplied) -> State:
    """A success clears the key's refresh flag; its rate-limit headers may rest it early."""
    snapshot = parse_rate_limits(e.rate_limits, now=state.now) if e.rate_limits else None
    if snapshot is not None:
        state = attrs.evolve(state, rate_limits=snapshot)
    if turn.credential_id is None:  # no pooled key in use (most sessions): nothing to record
        return state
    pool = _pool(state, turn.provider_index)
    if pool is None:
        return state
    pool = cp.record_success(pool, turn.credential_id)
    if snapshot is not None and state.now is not None:
        now = state.now + e.latency_ms / 1000
        pool = cp.record_rate_limits(pool, turn.credential_id, snapshot, now=now,
                                     default_cooldown=_settings(state).rate_limit_cooldown)
    return _with_pool(state, turn.provider_index, pool)


def on_recovery(state: State, turn: TurnState, e: RecoveryDecided) -> State:
    settings = _settings(state)
    pool = _pool(state, turn.provider_index)
    # Resending without replayed reasoning (rules 4) is no fault of the key.
    if pool is not None and e.credential_id is not None and e.action not in (
            "retry", "strip_reasoning", "stop_reasoning_replay", "drop_images"):  # no key fault
        # Without a refresh (none configured, or already tried) an auth failure rests the key
        # at once; the pool's first auth failure only marks the refresh as tried.
        times = 2 if e.action != "refresh" and e.reason in AUTH_REASONS else 1
        for _ in range(times):
            pool = cp.record_failure(pool, e.credential_id, reason=e.reason, now=e.at,
                                     retry_after=e.retry_after,
                                     default_cooldown=settings.rate_limit_cooldown,
                                     billing_cooldown=settings.billing_cooldown)
        state = _with_pool(state, turn.provider_index, pool)
    if e.action != "fallback":
        return state
    if turn.provider_index == 0 and e.reason in QUOTA_REASONS:
        state = attrs.evolve(state, primary_rest_until=e.at + settings.rate_limit_cooldown)
    return attrs.evolve(state, provider_index=e.provider_index)


def _settings(state: State) -> SessionSettings:
    if state.settings is None:
        raise ValueError("a provider event arrived before the session started")
    return state.settings


def on_refreshed(state: State, turn: TurnState, e: CredentialRefreshed) -> State:
    """A key the hook could not renew rests like any other key that failed auth twice."""
    pool = _pool(state, turn.provider_index)
    if e.refreshed or pool is None:
        return state
    pool = cp.record_failure(pool, e.credential_id, reason="auth", now=state.now or 0.0)
    return _with_pool(state, turn.provider_index, pool)
