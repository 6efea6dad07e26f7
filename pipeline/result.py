"""The dict ``Agent.run_conversation`` returns, read off the folded state."""

from __future__ import annotations

from typing import Any

from stages.ratelimits import format_usage
from stages.state import State


def turn_result(state: State) -> dict[str, Any]:
    """Keys: ``final_response``, ``messages`` (OpenAI format, without the system prompt),
    ``api_calls`` (this turn), ``completed``, ``interrupted``, ``failed``, ``error``,
    ``turn_exit_reason``, ``model`` and ``provider`` (those that answered: a fallback may have), ``usage`` (this turn: input, output, cache
    read, cache write, reasoning and total tokens), ``session_usage`` (the whole session),
    ``rate_limits`` (the provider's last rate-limit headers, as text, or None), ``session_id``,
    ``task_id``."""
    turn, settings = state.turn, state.settings
    if turn is None or turn.finished is None or settings is None:
        raise ValueError("no finished turn to describe")
    finished = turn.finished
    return {
        "final_response": finished.final_response,
        "messages": [m.to_openai() for m in state.messages],
        "api_calls": turn.api_calls,
        "completed": finished.completed,
        "interrupted": finished.interrupted,
        "failed": finished.failed,
        "error": finished.error,
        "turn_exit_reason": finished.exit_reason,
        "model": settings.chain[turn.provider_index].model,
        "provider": settings.chain[turn.provider_index].provider,
        "usage": turn.usage.as_dict(),
        "session_usage": state.usage.as_dict(),
        "rate_limits": format_usage(state.rate_limits) if state.rate_limits else None,
        "session_id": state.session_id,
        "task_id": turn.task_id,
    }
