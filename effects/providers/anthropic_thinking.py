"""Anthropic extended thinking: when a request enables it, and which thinking blocks go back.

Thinking is enabled (``thinking: {type: enabled, budget_tokens}``, with ``max_tokens`` kept
above the budget) when the request asks for reasoning and either a turn starts cleanly (the last
message is the user's and the final assistant turn asked for no tools) or the final assistant
turn opens with the signed thinking this provider issued: Anthropic requires the final
assistant turn to start with its thinking block, unmodified, whenever tool results follow it
(mid tool loop, and also when the user speaks after an interrupted tool loop, since the user's
text then shares a message with the tool results), so without one thinking stays off. The final
assistant turn is the one sent, which may merge several assistant messages (see
:func:`_final_turn`): its tool calls are all of theirs, and only the first one's thinking opens
it. A forced tool choice never takes thinking.

With a ``max_tokens`` of the request's own (the whole reply, thinking included), the budget
takes at most three quarters of it, so at least a quarter is left for the answer
(:data:`THINKING_SHARE`); below ``MIN_MAX_TOKENS`` (1,366) not even Anthropic's smallest budget
fits, and thinking is not sent: a warning says so, once per model and limit.

When thinking is on, every assistant message sends back the thinking and ``redacted_thinking``
blocks this provider issued (exactly as received: text, signature, data), first in its content;
thinking from another provider or API (a fallback) is never sent (the plain reasoning text
stays in the history). The thinking of an Anthropic-compatible endpoint that does not sign its
blocks cannot go back as a thinking block: unless the reasoning-replay switch is off, it goes
back to that endpoint as text, a ``<thinking>`` text block before the message's own text, so
the model keeps the reasoning it built its calls on. Earlier turns' blocks are accepted and
ignored by the API, so what a message becomes does not depend on its position: it is
converted once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from itertools import groupby

from effects.logs import get_logger
from stages.decision import ModelRequest
from stages.errors import UsageError
from stages.log.messages import Message
from stages.recovery.reasoning import EFFORT_BUDGETS

__all__ = ["MIN_BUDGET", "MIN_MAX_TOKENS", "THINKING_BUDGET", "THINKING_SHARE", "THINKING_TYPES",
           "replay_provider", "thinking_blocks", "thinking_config",
           "unsigned_thinking"]

log = get_logger(__name__)
THINKING_BUDGET = EFFORT_BUDGETS
MIN_BUDGET = 1024  # Anthropic's smallest budget_tokens
# The most of a reply's max_tokens thinking may take: the rest is the answer's.
THINKING_SHARE = 0.75
MIN_MAX_TOKENS = math.ceil(MIN_BUDGET / THINKING_SHARE)  # 1,366: the smallest that can think
THINKING_TYPES = ("thinking", "redacted_thinking")
API_MODE = "anthropic_messages"


def _budget(request: ModelRequest) -> int | None:
    effort = request.reasoning_effort
    if effort is not None and effort != "none" and effort not in THINKING_BUDGET:
        raise UsageError(f"reasoning_effort {effort!r} is not one of none, "
                         + ", ".join(THINKING_BUDGET))
    if effort == "none":
        return None
    if effort is not None:
        return THINKING_BUDGET[effort]
    return request.reasoning_budget


def _final_turn(messages: Sequence[Message]) -> list[Message]:
    """The assistant messages the last assistant turn sent is made of, oldest first.

    Consecutive assistant messages (system messages go apart) are sent as one turn, and so are
    two runs of them with only tool results between when the earlier run made no call: the
    results answer nothing and are dropped (after a call they stay, answered or stubbed)."""
    turn: list[Message] = []
    orphans_between = False
    sides = groupby((m for m in reversed(messages) if m.role != "system"),
                    key=lambda m: m.role == "assistant")
    for assistant, group in sides:
        run = list(group)
        if not assistant:
            orphans_between = all(m.role == "tool" for m in run)
        elif not turn or (orphans_between and not any(m.tool_calls for m in run)):
            turn[:0] = reversed(run)
        else:
            break
    return turn


def _signed(message: Message, provider: str) -> bool:
    return any(p.replayable_to(API_MODE, provider) for p in message.reasoning_parts)


def _may_think(request: ModelRequest) -> bool:
    if request.tool_choice not in (None, "auto", "none"):
        return False
    last = next((m.role for m in reversed(request.messages) if m.role != "system"), None)
    turn = _final_turn(request.messages)
    if last == "user" and not any(m.tool_calls for m in turn):
        return True
    return request.replay_reasoning and bool(turn) and _signed(turn[0], request.provider)


def thinking_config(request: ModelRequest, max_tokens: int,
                    default_max_tokens: int) -> tuple[dict | None, int]:
    """The ``thinking`` field (None: off) and the ``max_tokens`` to send with it."""
    budget = _budget(request)
    if budget is None or not _may_think(request):
        return None, max_tokens
    if request.max_tokens is None:
        return {"type": "enabled", "budget_tokens": budget}, budget + default_max_tokens
    budget = min(budget, math.floor(max_tokens * THINKING_SHARE))
    if budget < MIN_BUDGET:
        _no_room(request.model, max_tokens)
        return None, max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


@functools.cache
def _no_room(model: str, max_tokens: int) -> None:
    """Say (once per model and limit) that reasoning was asked for and is not sent."""
    log.warning("anthropic_thinking_not_sent", model=model, max_tokens=max_tokens,
                reason=f"max_tokens {max_tokens} cannot hold Anthropic's smallest thinking "
                       f"budget ({MIN_BUDGET}) and an answer; raise it to {MIN_MAX_TOKENS} or "
                       "more to think")


def replay_provider(request: ModelRequest, thinking: dict | None) -> str | None:
    """The provider whose thinking blocks this request sends back (None: none)."""
    return request.provider if thinking is not None and request.replay_reasoning else None


def thinking_blocks(message: Message, provider: str) -> list[dict]:
    """The message's thinking blocks ``provider`` issued, exactly as it sent them."""
    blocks = []
    for part in message.reasoning_parts:
        if not part.replayable_to(API_MODE, provider):
            continue
        if part.type == "thinking":
            blocks.append({"type": "thinking", "thinking": part.text,
                           "signature": part.signature})
        elif part.type == "redacted_thinking":
            blocks.append({"type": "redacted_thinking", "data": part.data})
    return blocks


def unsigned_thinking(message: Message, provider: str) -> str | None:
    """The thinking ``provider`` issued for an assistant message without signing it (an
    Anthropic-compatible endpoint that does not sign), which goes back as text; None when
    there is none, or when any of the message's thinking from ``provider`` is signed."""
    if message.role != "assistant" or not message.reasoning_parts:
        return None
    own = [p for p in message.reasoning_parts if (p.api_mode, p.provider) == (API_MODE, provider)]
    if not own or any(p.type != "thinking" or p.signature for p in own):
        return None
    return "\n".join(p.text for p in own if p.text) or None
