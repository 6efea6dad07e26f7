"""Reasoning models: which reasoning setting a request carries, the recoveries of reasoning
failures, and the turn's last reasoning.

The setting is an effort (none / minimal / low / medium / high / xhigh) or a token budget, per
provider entry (the chain's, the cheap route's) and per turn (rules 4: a turn's own setting
wins). Each adapter maps it onto its API (``reasoning_effort``, Responses ``reasoning``,
Anthropic ``thinking.budget_tokens``, OpenRouter's ``reasoning`` object).

Recoveries (rules 4): Anthropic rejecting a replayed thinking block's signature resends the
request without replayed reasoning, once a turn (``strip_reasoning``); a Responses server that
cannot read replayed ``encrypted_content`` stops its replay for the rest of the session
(``stop_reasoning_replay``). Both resend at once, with no backoff: the request changed. The
stored history always keeps the reasoning.
"""

from __future__ import annotations

from typing import Any

from stages.log.events import ProviderEntry, SessionSettings
from stages.log.messages import Message
from stages.log.state import State
from stages.recovery.classify import ClassifiedError
from stages.recovery.reasons import FailureReason

__all__ = ["EFFORT_BUDGETS", "THINKING_EXHAUSTED_TEXT", "effort_of", "last_reasoning",
           "reasoning_digest_fields", "reasoning_for", "reasoning_move", "thinking_only"]

# Token budgets for an effort, where the API takes a budget (Anthropic's documented scale).
EFFORT_BUDGETS = {"minimal": 1024, "low": 4000, "medium": 8000, "high": 16000, "xhigh": 32000}
THINKING_EXHAUSTED_TEXT = ("the model spent its whole output limit on reasoning and wrote no "
                           "answer; raise max_tokens or lower the reasoning effort")


def effort_of(effort: str | None, budget: int | None) -> str | None:
    """The effort for an API that takes only an effort: the given one, else the nearest to
    the budget."""
    if effort is not None or budget is None:
        return effort
    return next((name for name, size in EFFORT_BUDGETS.items() if budget <= size), "xhigh")


def reasoning_for(state: State, config: SessionSettings, entry: ProviderEntry) -> dict[str, Any]:
    """The reasoning fields of the next ``ModelRequest``."""
    turn = state.turn
    effort, budget = entry.reasoning_effort, entry.reasoning_budget
    out: dict[str, Any] = {}
    if config.rule_set.turn_reasoning and turn is not None:
        if turn.reasoning_effort is not None or turn.reasoning_budget is not None:
            effort, budget = turn.reasoning_effort, turn.reasoning_budget
        out["replay_reasoning"] = not (turn.reasoning_stripped or state.reasoning_replay_off)
        out["cache_key"] = state.session_id
    return {"reasoning_effort": effort, "reasoning_budget": budget, **out}


def reasoning_digest_fields(request: Any) -> dict[str, Any]:
    """What a request's digest adds for the reasoning fields, only those in use (so requests
    that use none keep the digest they always had). The cache key is left out: it is the
    session's id, which a fork changes while its prefix must replay as the origin's did."""
    extra: dict[str, Any] = {}
    if request.reasoning_budget is not None:
        extra["reasoning_budget"] = request.reasoning_budget
    if not request.replay_reasoning:
        extra["replay_reasoning"] = False
    return extra


def reasoning_move(state: State, c: ClassifiedError, config: SessionSettings) -> str | None:
    """Rules 4: ``strip_reasoning`` or ``stop_reasoning_replay`` when the failure is about
    replayed reasoning and resending without it can help; ``spent`` when it was resent without
    it already (another retry would fail the same way); None when reasoning is not the matter."""
    turn = state.turn
    assert turn is not None and turn.failure is not None
    if not config.rule_set.reasoning_recovery or turn.failure.partial:
        return None
    if c.reason == FailureReason.THINKING_SIGNATURE:
        return "spent" if turn.reasoning_stripped else "strip_reasoning"
    if c.reason == FailureReason.INVALID_ENCRYPTED_CONTENT:
        return "spent" if state.reasoning_replay_off else "stop_reasoning_replay"
    return None


def thinking_only(message: Message) -> bool:
    """A reply with reasoning and nothing else: no visible text, no call."""
    return (not message.text.strip() and not message.tool_calls
            and bool(message.reasoning or message.reasoning_parts))


def last_reasoning(state: State) -> str | None:
    """The most recent non-empty reasoning of the current turn (None: the model gave none)."""
    turn = state.turn
    if turn is None:
        return None
    for message in reversed(state.messages[turn.first_message:]):
        if message.role == "assistant" and message.reasoning:
            return message.reasoning
    return None
