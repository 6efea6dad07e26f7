"""The context estimate the rules-3 stages decide from: the request's size in characters
(kept incrementally by the fold, O(1) a call), corrected by the prompt tokens the provider
reported for the last request."""

from __future__ import annotations

import re

from stages.log.context_window import Window, session_window
from stages.log.events import SessionSettings, Usage
from stages.log.state import State

# "maximum context length is 2048 tokens", "context window of 8,192 tokens", ...
_LIMIT = re.compile(r"(?:context length|context window|context size|context limit)"
                    r"\D{0,30}?(\d[\d,]{2,})\s*tokens", re.IGNORECASE)

# Rules 8 (``named_window_limits``): the window named in other words. Anthropic's "prompt is
# too long: 4028 tokens > 4000 maximum" and "... exceed context limit: 3100 + 1000 > 4,000,
# decrease ...", llama.cpp's body field ``"n_ctx": 4000``.
_NAMED = re.compile(r'tokens > (\d[\d,]{2,}) maximum|> (\d[\d,]{2,}), decrease input length'
                    r'|"n_ctx"\s*:\s*(\d{3,})')


# The rough size of a token in characters, for text no tokenizer has counted.
CHARS_PER_TOKEN = 4


def request_chars(state: State) -> int:
    chars = state.history_chars + len(state.system_prompt or "")
    for spec in state.tools:  # a loop: a sum over a generator costs two calls more
        chars += len(spec.wire)
    return chars


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


def window_of(state: State, config: SessionSettings) -> Window:
    """The window of the provider in use, capped by what an overflow taught."""
    index = state.turn.provider_index if state.turn is not None else 0
    window = session_window(config, state.context.windows, index)
    cap = state.context.window_cap
    return window if cap is None or cap >= window.tokens else Window(tokens=cap,
                                                                     source="overflow")


def overflow_cap(state: State) -> int:
    """After an overflow the real window is no larger than the limit the provider named, or
    (when it named none) than the request that failed."""
    failure = state.turn.failure if state.turn is not None else None
    text = "" if failure is None else f"{failure.message} {failure.body or ''}"
    if match := _LIMIT.search(text):
        return int(match.group(1).replace(",", ""))
    named = state.settings is not None and state.settings.rule_set.named_window_limits
    if named and (match := _NAMED.search(text)):
        return int(next(g for g in match.groups() if g).replace(",", ""))
    return max(256, context_tokens(state) * 9 // 10)
