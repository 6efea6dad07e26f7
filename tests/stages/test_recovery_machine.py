"""A state machine over the recovery chain: calls fail with a status, succeed, keys are
refreshed, time passes; each step goes through the real stages (the fold, the router's
``decide_failed``, ``decide_credentials``), and each decision is compared with a plain model of
the rules written here (hermes §1.7, §1.9; ``stages.recovery.chain``): a key's refresh hook once
on an auth failure, another ready key, a fallback when every key rests, a retry while retries
remain, the next provider, else the turn fails. In the style of hypothesis's own stateful tests
and of ``test_credential_pool.PoolMachine``.
"""

from __future__ import annotations

import math

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from stages.decision import Finish, PrepareCall, RefreshCredential, Wait
from stages.fold import fold
from stages.log import events as ev
from stages.log.credential_pool import BILLING_COOLDOWN, available
from stages.recovery.credentials import decide_credentials
from stages.turn.step import ROUTES, next_stage
from tests.stages.helpers import reply, requested

COOLDOWN = 60.0  # the settings' rate_limit_cooldown
AUTH_REST = 300.0  # stages.log.credential_pool.AUTH_COOLDOWN
REASONS = {401: "auth", 403: "auth_permanent", 402: "billing", 429: "rate_limit",
           500: "server_error", 503: "overloaded", None: "timeout"}
RETRYABLE = {"rate_limit", "server_error", "overloaded", "timeout"}
KEYED = {"auth", "auth_permanent", "billing", "rate_limit"}


@attrs.define
class Model:
    """The chain as plain values: which provider, which key, what rests until when."""

    keys: list[tuple[str, ...]]
    max_retries: int
    refresh: bool
    provider: int = 0
    key: str | None = None
    sticky: bool = False
    retries: int = 0
    until: dict[str, float] = attrs.field(factory=dict)
    tried: set[str] = attrs.field(factory=set)

    def ready(self, provider: int, now: float) -> list[str]:
        return [k for k in self.keys[provider] if self.until.get(k, -math.inf) <= now]

    def fallback(self) -> int | None:
        return self.provider + 1 if self.provider + 1 < len(self.keys) else None

    def select(self, now: float) -> None:
        """The credentials stage: the first ready key (the same one after a retry), else the
        next provider, else the key that wakes first."""
        if not self.keys[self.provider]:
            return
        ready = self.ready(self.provider, now)
        if not ready and self.fallback() is not None:
            self.provider, self.retries, self.sticky = self.fallback(), 0, False
            ready = self.ready(self.provider, now)
            if not self.keys[self.provider]:
                self.key = None
                return
        self.key = (self.key if self.sticky and self.key in ready else ready[0] if ready
                    else min(self.keys[self.provider], key=lambda k: self.until.get(k, 0.0)))
        self.sticky = False

    def decide(self, reason: str, at: float) -> str:
        move = None
        if reason in KEYED and self.key is not None:
            if reason.startswith("auth") and self.refresh and self.key not in self.tried:
                move = "refresh"
            else:
                others = [k for k in self.ready(self.provider, at) if k != self.key]
                move = "rotate" if others else "exhausted"
        if move in ("refresh", "rotate"):
            return move
        if move == "exhausted" and self.fallback() is not None:
            return "fallback"
        if reason in RETRYABLE and self.retries < self.max_retries:
            return "retry"
        return "fallback" if self.fallback() is not None else "fail"

    def apply(self, action: str, reason: str, at: float, retry_after: float | None) -> None:
        # A retry is no fault of the key; failing records no decision, so no key rests.
        if self.key is not None and action not in ("retry", "fail"):
            self.fail_key(reason, at, retry_after, times=1 if action == "refresh" else 2)
        if action == "retry":
            self.retries, self.sticky = self.retries + 1, True
        elif action == "fallback":
            self.provider, self.retries, self.key = self.fallback(), 0, None

    def fail_key(self, reason: str, at: float, retry_after: float | None, times: int) -> None:
        assert self.key is not None
        if reason in ("rate_limit", "billing"):
            wait = retry_after if retry_after is not None else (
                BILLING_COOLDOWN if reason == "billing" else COOLDOWN)
            self.until[self.key] = max(self.until.get(self.key, -math.inf), at + wait)
        elif reason.startswith("auth"):
            for _ in range(times):
                if self.key in self.tried:
                    self.until[self.key] = max(self.until.get(self.key, -math.inf),
                                               at + AUTH_REST)
                self.tried.add(self.key)


class RecoveryMachine(RuleBasedStateMachine):
    @initialize(primary=st.integers(0, 3), fallbacks=st.lists(st.integers(0, 2), max_size=2),
                max_retries=st.integers(0, 3), refresh=st.booleans())
    def start(self, primary: int, fallbacks: list[int], max_retries: int,
              refresh: bool) -> None:
        names = ("p", "q", "r")
        keys = [tuple(f"{names[i]}{n}" for n in range(count))
                for i, count in enumerate((primary, *fallbacks))]
        self.settings = ev.SessionSettings(
            model="m", provider="p", max_turns=50, max_retries=max_retries,
            credentials=keys[0], credential_refresh=refresh, credential_strategy="fill_first",
            rate_limit_cooldown=COOLDOWN,
            fallback_providers=tuple(ev.ProviderEntry(provider=names[i], model=f"m{i}",
                                                      credentials=keys[i])
                                     for i in range(1, len(keys))))
        self.model = Model(keys=keys, max_retries=max_retries, refresh=refresh)
        self.now, self.turns = 1000.0, 0
        self.state = fold([ev.SessionStarted(session_id="s", started_at="t0",
                                             settings=self.settings)])
        self.refreshing: str | None = None
        self.new_turn()

    def add(self, *events: ev.Event) -> None:
        self.state = fold(events, self.state)

    @property
    def calling(self) -> bool:
        turn = self.state.turn
        return turn is not None and turn.finished is None and self.refreshing is None

    def call(self) -> None:
        """The stages before a call that concern the chain: the clock, the key, the request."""
        self.add(ev.ClockRead(epoch=self.now))
        self.add(*decide_credentials(self.state, config=self.settings).events)
        self.model.select(self.now)
        self.add(requested(self.state))

    @precondition(lambda self: not self.calling and self.refreshing is None)
    @rule()
    def new_turn(self) -> None:
        started = f"2026-01-01T00:00:{self.turns:02d}+00:00"
        self.turns += 1
        self.add(ev.TurnStarted(turn_id=f"t{self.turns}", task_id="k", started_at=started,
                                user_message="go"))
        # The fallback is turn-scoped; this model never rests the primary for a quota
        # fallback long enough to matter (primary_rest_until is checked in test_recovery).
        self.model.provider, self.model.retries, self.model.key = (
            self.state.turn.provider_index, 0, None)
        self.call()

    @precondition(lambda self: self.calling)
    @rule(status=st.sampled_from(sorted(REASONS, key=str)),
          retry_after=st.none() | st.sampled_from((0.0, 5.0, 500.0)))
    def fail(self, status: int | None, retry_after: float | None) -> None:
        self.add(ev.ModelFailed(error_type="ProviderTimeoutError" if status is None
                                else "ProviderHTTPError", message="", status=status,
                                retry_after=retry_after))
        assert next_stage(self.state) == "recovery"
        decision = ROUTES["recovery"](self.state, config=self.settings)
        reason = REASONS[status]
        at = self.state.now  # the time of the call (its clock reading), not of this rule
        expected = self.model.decide(reason, at)
        recovered = [e for e in decision.events if isinstance(e, ev.RecoveryDecided)]
        if expected == "fail":
            assert recovered == [] and isinstance(decision.next, Finish), decision
        else:
            (made,) = recovered
            assert (made.action, made.reason) == (expected, reason), (made, self.model)
            assert made.credential_id == self.model.key
        self.model.apply(expected, reason, at, retry_after)
        self.add(*decision.events)
        if isinstance(decision.next, Wait):
            self.add(ev.Waited(seconds=0.0, jitter=0.0))
        if isinstance(decision.next, RefreshCredential):
            self.refreshing = decision.next.credential_id
        elif isinstance(decision.next, Wait | PrepareCall):
            self.call()

    @precondition(lambda self: self.refreshing is not None)
    @rule(ok=st.booleans())
    def refreshed(self, ok: bool) -> None:
        key, self.refreshing = self.refreshing, None
        assert key == self.model.key
        self.add(ev.CredentialRefreshed(credential_id=key, refreshed=ok))
        if not ok:
            self.model.fail_key("auth", self.state.now, None, times=1)
        self.model.sticky = ok
        self.call()

    @precondition(lambda self: self.calling)
    @rule()
    def succeed(self) -> None:
        self.add(reply("done"))
        if self.model.key is not None:
            self.model.tried.discard(self.model.key)
        self.model.retries = 0
        decision = ROUTES[next_stage(self.state)](self.state, config=self.settings)
        assert isinstance(decision.next, Finish)
        self.add(*decision.events)

    @rule(seconds=st.sampled_from((1.0, 30.0, 61.0, 301.0)))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def agrees_with_the_model(self) -> None:
        turn = self.state.turn
        if turn is None:
            return
        assert turn.retries == self.model.retries <= self.settings.max_retries
        if turn.finished is None:
            assert turn.provider_index == self.model.provider
            assert turn.credential_id == self.model.key
        for index, keys in enumerate(self.model.keys):
            pool = self.state.pools[index]
            if pool is None:
                continue
            assert dict(pool.cooldown_until) == {k: v for k, v in self.model.until.items()
                                                 if k in keys}
            assert set(pool.refresh_tried) == self.model.tried & set(keys)

    @invariant()
    def a_resting_key_is_chosen_only_when_every_key_rests(self) -> None:
        turn = self.state.turn
        if turn is None or turn.credential_id is None or turn.finished is not None:
            return
        pool = self.state.pools[turn.provider_index]
        ready = available(pool, self.state.now or 0.0)
        assert turn.credential_id in ready or not ready


RecoveryMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30,
                                             deadline=None)
TestRecoveryMachine = RecoveryMachine.TestCase
