"""Credentials stage: pick the key for the next call from the active provider's pool, skipping
keys that rest after a 429/402/auth failure or whose rate-limit headers say they are spent.
When every key rests, fall back to the next provider rather than spin."""

from __future__ import annotations

from stages.decision import NOTHING, Decision
from stages.log import credential_pool as cp
from stages.log.events import CredentialSelected, Event, RecoveryDecided, SessionSettings
from stages.log.state import State
from stages.recovery.chain import next_provider


def decide_credentials(state: State, *, config: SessionSettings) -> Decision:
    turn = state.turn
    if turn is None:
        raise ValueError("credentials are chosen inside a turn")
    now = state.now or 0.0
    events: list[Event] = []
    index = turn.provider_index
    while True:
        pool = state.pools[index] if index < len(state.pools) else None
        if pool is None:
            return Decision(events=tuple(events)) if events else NOTHING
        key = cp.select(pool, now=now)
        if (turn.sticky_credential and index == turn.provider_index
                and turn.credential_id in cp.available(pool, now)):
            key = turn.credential_id
        fallback = next_provider(state, config) if key is None and index == turn.provider_index \
            else None
        if key is None and fallback is not None:
            events.append(RecoveryDecided(reason="credentials_exhausted", action="fallback",
                                          detail=f"every key of {pool.provider} is resting",
                                          at=now, provider_index=fallback))
            index = fallback
            continue
        # With nothing to fall back to, the key that wakes first gets one try.
        key = key or min(pool.ids, key=lambda k: dict(pool.cooldown_until).get(k, 0.0))
        events.append(CredentialSelected(provider_index=index, credential_id=key))
        return Decision(events=tuple(events))
