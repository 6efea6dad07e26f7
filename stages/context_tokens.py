"""The context estimate the rules-3 stages decide from: the request's size in characters
(kept incrementally by the fold, O(1) a call), corrected by the prompt tokens the provider
reported for the last request."""

from __future__ import annotations

from stages.context_plan import CHARS_PER_TOKEN
from stages.events import Usage
from stages.state import State


def request_chars(state: State) -> int:
    chars = state.history_chars + len(state.system_prompt or "")
    return chars + sum(len(spec.wire) for spec in state.tools)


def prompt_tokens(usage: Usage) -> int:
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


def context_tokens(state: State) -> int:
    """Reported tokens of the last request plus the rough estimate of what came since; the
    rough estimate alone before any report (or after a compression). A report below the rough
    estimate does not lower it: chars/4 undercounts code and most non-English text, and a
    proxy or a test double may report nothing like the real count; too early a compression
    costs a summary, too late a failed call."""
    chars = request_chars(state)
    rough = chars // CHARS_PER_TOKEN
    ctx = state.context
    if ctx.reported_tokens is None:
        return rough
    return max(rough, ctx.reported_tokens + max(0, chars - ctx.reported_chars) // CHARS_PER_TOKEN)
