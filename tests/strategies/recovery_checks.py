"""The recovery chain's rules, checked after every event a simulated turn records.

Plain statements of the order in ``stages.recovery.chain`` (after hermes §1.7 and §1.9), read off
the events and the states around them, never off the stages' own helpers: a retry is counted and
never passes ``max_retries``; a key's refresh hook runs once between its successes; a resting key
is chosen only when every key of its pool rests; the chain only moves forward, to an entry that
differs from the failing one, and only once retrying cannot help; nothing is re-issued once part
of an answer reached the user.
"""

from __future__ import annotations

from stages.log import events as ev
from stages.log.credential_pool import PoolState, available
from stages.log.state import State
from stages.recovery.classify import ACTIONS, FailureReason

__all__ = ["check_recovery"]

REISSUES = frozenset({"retry", "rotate", "refresh", "fallback", "compress", "strip_reasoning",
                      "stop_reasoning_replay"})


def check_recovery(before: State, event: ev.Event, after: State) -> None:
    settings = after.settings
    if settings is None or before.turn is None:
        return
    if after.turn is not None:
        assert after.turn.retries <= settings.max_retries, after.turn
    if isinstance(event, ev.RecoveryDecided):
        _check_decision(before, event, settings)
    elif isinstance(event, ev.CredentialSelected):
        _check_key(before, event, settings)


def _pool(state: State, index: int) -> PoolState | None:
    return state.pools[index] if index < len(state.pools) else None


def _check_decision(before: State, e: ev.RecoveryDecided, settings: ev.SessionSettings) -> None:
    turn = before.turn
    assert turn is not None
    failure = turn.failure
    if failure is not None and failure.partial:
        assert e.action not in REISSUES, e
    if e.action == "fallback":
        _check_fallback(before, e, settings)
    elif e.action == "retry":
        assert failure is not None and e.attempt == turn.retries + 1 <= settings.max_retries
        assert ACTIONS[FailureReason(e.reason)].retryable, e
    elif e.action == "refresh":
        pool = _pool(before, turn.provider_index)
        assert settings.credential_refresh and pool is not None, e
        assert e.reason in ("auth", "auth_permanent") and e.credential_id == turn.credential_id
        assert e.credential_id not in pool.refresh_tried, "a key's hook runs once per success"
    elif e.action == "rotate":
        pool = _pool(before, turn.provider_index)
        assert pool is not None and ACTIONS[FailureReason(e.reason)].rotate_credential
        assert set(available(pool, e.at)) - {e.credential_id}, "rotated with no key ready"


def _check_fallback(before: State, e: ev.RecoveryDecided, settings: ev.SessionSettings) -> None:
    turn = before.turn
    assert turn is not None
    chain = settings.chain
    assert e.provider_index > turn.provider_index, "the chain only moves forward"
    here, there = chain[turn.provider_index], chain[e.provider_index]
    assert (there.provider, there.model, there.base_url) != (
        here.provider, here.model, here.base_url), "fell back onto the failing entry"
    if e.reason in ("credentials_exhausted", "incomplete_response") or turn.failure is None:
        return
    # A failure falls back once retrying cannot help: retries are used up, the reason is not
    # one a retry helps, or no other key of the pool is ready.
    actions = ACTIONS[FailureReason(e.reason)]
    pool = _pool(before, turn.provider_index)
    keys_spent = (pool is not None and e.credential_id is not None and actions.rotate_credential
                  and not set(available(pool, e.at)) - {e.credential_id})
    assert turn.retries >= settings.max_retries or not actions.retryable or keys_spent, e

def _check_key(before: State, e: ev.CredentialSelected, settings: ev.SessionSettings) -> None:
    pool = _pool(before, e.provider_index)
    assert pool is not None and e.credential_id in pool.ids
    ready = available(pool, before.now or 0.0)
    if e.credential_id in ready:
        return
    # A resting key gets one try only when every key of its pool rests.
    assert not ready, (e, ready)
