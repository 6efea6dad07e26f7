"""Anthropic extended thinking: when a request enables it, and which thinking blocks go back.

Thinking is enabled (``thinking: {type: enabled, budget_tokens}``, with ``max_tokens`` kept
above the budget) when the request asks for reasoning and either a turn starts cleanly (the last
message is the user's and the last assistant message asked for no tools) or the last assistant
message carries the signed thinking this provider issued: Anthropic requires the final
assistant turn to start with its thinking block, unmodified, whenever tool results follow it
(mid tool loop, and also when the user speaks after an interrupted tool loop, since the user's
text then shares a message with the tool results), so without one thinking stays off. A forced
tool choice never takes thinking.

When thinking is on, every assistant message sends back the thinking and ``redacted_thinking``
blocks this provider issued (exactly as received: text, signature, data), first in its content;
unsigned thinking, and thinking from another provider or API (a fallback), is never sent (the
plain reasoning text stays in the history). Earlier turns' blocks are accepted and ignored by
the API, so what a message becomes does not depend on its position: it is converted once.
"""

from __future__ import annotations

from stages.decision import ModelRequest
from stages.errors import UsageError
from stages.messages import Message
from stages.reasoning import EFFORT_BUDGETS

__all__ = ["MIN_BUDGET", "THINKING_BUDGET", "THINKING_TYPES", "replay_provider",
           "thinking_blocks", "thinking_config"]

THINKING_BUDGET = EFFORT_BUDGETS
MIN_BUDGET = 1024  # Anthropic's smallest budget_tokens
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


def _last_assistant(request: ModelRequest) -> Message | None:
    return next((m for m in reversed(request.messages) if m.role == "assistant"), None)


def _signed(message: Message, provider: str) -> bool:
    return any(p.replayable_to(API_MODE, provider) for p in message.reasoning_parts)


def _may_think(request: ModelRequest) -> bool:
    if request.tool_choice not in (None, "auto", "none"):
        return False
    last = next((m.role for m in reversed(request.messages) if m.role != "system"), None)
    assistant = _last_assistant(request)
    if last == "user" and (assistant is None or not assistant.tool_calls):
        return True
    return (request.replay_reasoning and assistant is not None
            and _signed(assistant, request.provider))


def thinking_config(request: ModelRequest, max_tokens: int,
                    default_max_tokens: int) -> tuple[dict | None, int]:
    """The ``thinking`` field (None: off) and the ``max_tokens`` to send with it."""
    budget = _budget(request)
    if budget is None or not _may_think(request):
        return None, max_tokens
    if request.max_tokens is None:
        return {"type": "enabled", "budget_tokens": budget}, budget + default_max_tokens
    budget = min(budget, max_tokens - 1)
    if budget < MIN_BUDGET:
        return None, max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


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
