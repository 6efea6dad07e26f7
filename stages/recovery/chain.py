"""Recovery stage: what a failed model call leads to.

The classifier names the failure; this stage applies the order of the seeds (under rules 3 a
context overflow or an oversized payload first compresses and retries once): the key's refresh
hook once on an auth failure, another key of the pool (never counted as a retry), a retry with
backoff while retries remain, the next fallback provider, else the turn fails. Nothing is
re-issued once part of a streamed answer reached the user.
"""

from __future__ import annotations

import attrs

from stages.context.engine import engine_for
from stages.context.preflight import estimate_tokens
from stages.decision import Decision, PrepareCall, RefreshCredential, Wait
from stages.log import credential_pool as cp
from stages.log.context_tokens import overflow_cap, window_of
from stages.log.events import ModelFailed, RecoveryDecided, SessionSettings
from stages.log.image_notes import has_images
from stages.log.state import State, TurnState
from stages.recovery.classify import ClassifiedError, classify_api_error
from stages.recovery.reasoning import reasoning_move

AUTH_REASONS = ("auth", "auth_permanent")


def _decided(turn: TurnState, failure: ModelFailed, c: ClassifiedError, action: str, *,
             at: float, provider_index: int | None = None, attempt: int | None = None
             ) -> RecoveryDecided:
    return RecoveryDecided(reason=str(c.reason), action=action, detail=c.detail, at=at,
                           attempt=turn.retries if attempt is None else attempt,
                           retry_after=c.retry_after, credential_id=turn.credential_id,
                           provider_index=(turn.provider_index if provider_index is None
                                           else provider_index))


def next_provider(state: State, config: SessionSettings) -> int | None:
    """The next entry of the chain that is not the provider and model already failing."""
    assert state.turn is not None
    chain = config.chain
    current = chain[state.turn.provider_index]
    for index in range(state.turn.provider_index + 1, len(chain)):
        entry = chain[index]
        if (entry.provider, entry.model, entry.base_url) != (
                current.provider, current.model, current.base_url):
            return index
    return None


def _key_move(state: State, c: ClassifiedError, at: float, config: SessionSettings) -> str | None:
    """``refresh`` (the key's hook, once), ``rotate`` (another key is ready), ``exhausted``
    (every key of the pool rests), or None when keys are not the matter."""
    turn = state.turn
    assert turn is not None
    pool = state.pools[turn.provider_index] if turn.provider_index < len(state.pools) else None
    if pool is None or turn.credential_id is None or not c.rotate_credential:
        return None
    if (str(c.reason) in AUTH_REASONS and config.credential_refresh
            and turn.credential_id not in pool.refresh_tried):
        return "refresh"
    ready = [k for k in cp.available(pool, at) if k != turn.credential_id]
    return "rotate" if ready else "exhausted"


def _window(state: State, config: SessionSettings) -> int | None:
    if not config.rule_set.context_management:
        return config.context_length
    assert state.turn is not None
    return window_of(state, config).tokens


def _compress_first(state: State, c: ClassifiedError, config: SessionSettings) -> bool:
    """Rules 3: a request too large for the window is compressed and retried, once a call."""
    assert state.turn is not None and state.turn.failure is not None
    if not (config.rule_set.context_management and c.compress and config.compression_enabled
            and not state.turn.failure.partial and not state.context.overflow_retried):
        return False
    # Only when compression can shrink something: else the retry would fail the same way.
    window = min(window_of(state, config).tokens, overflow_cap(state))
    plan = engine_for(config).plan(state, config, reason="overflow", window=window,
                                   estimate=0, now=state.now or 0.0)
    return plan is not None


def decide_recovery(state: State, *, config: SessionSettings) -> Decision:
    """Events and next step for ``state.turn.failure``; no next step means the turn fails and
    the router closes it."""
    turn = state.turn
    if turn is None or turn.failure is None:
        raise ValueError("recovery needs a failed call")
    failure = turn.failure
    entry = config.chain[turn.provider_index]
    c = classify_api_error(failure, provider=entry.provider, api_mode=entry.api_mode,
                           context_length=_window(state, config),
                           estimated_tokens=estimate_tokens(state))
    at = (state.now or 0.0) + failure.latency_ms / 1000
    if (config.rule_set.image_recovery and str(c.reason) == "image_too_large"
            and not failure.partial and has_images(state.messages)):
        # Rules 8: the same request would be refused again; without its images it may pass.
        return Decision(events=(_decided(turn, failure, c, "drop_images", at=at),),
                        next=PrepareCall())
    if _compress_first(state, c, config):
        return Decision(events=(_decided(turn, failure, c, "compress", at=at),), next=PrepareCall())
    reasoning = reasoning_move(state, c, config)
    if reasoning in ("strip_reasoning", "stop_reasoning_replay"):
        return Decision(events=(_decided(turn, failure, c, reasoning, at=at),), next=PrepareCall())
    if reasoning == "spent":  # resent without reasoning and failed the same way: no retry
        c = attrs.evolve(c, retryable=False)
    move = None if failure.partial else _key_move(state, c, at, config)
    if move == "refresh":
        assert turn.credential_id is not None
        return Decision(events=(_decided(turn, failure, c, "refresh", at=at),),
                        next=RefreshCredential(credential_id=turn.credential_id))
    if move == "rotate":
        return Decision(events=(_decided(turn, failure, c, "rotate", at=at),), next=PrepareCall())
    fallback = None if failure.partial else next_provider(state, config)
    if move == "exhausted" and fallback is not None:
        # Every key rests: fall back rather than spin on a key that just failed.
        return Decision(events=(_decided(turn, failure, c, "fallback", at=at,
                                         provider_index=fallback),), next=PrepareCall())
    if c.retryable and turn.retries < config.max_retries:
        attempt = turn.retries + 1
        return Decision(events=(_decided(turn, failure, c, "retry", at=at, attempt=attempt),),
                        next=Wait(attempt=attempt, retry_after=c.retry_after))
    if (c.fallback or c.retryable) and fallback is not None:
        return Decision(events=(_decided(turn, failure, c, "fallback", at=at,
                                         provider_index=fallback),), next=PrepareCall())
    # Failing records nothing of its own: the router's TurnFinished carries the error (and so
    # logs from before recovery existed replay unchanged).
    return Decision()
