"""What the context stages know between calls (part of ``State``, built by the fold)."""

from __future__ import annotations

import attrs

from stages.log.events import (
    CompressionPlanned,
    ContextSummarised,
    ContextWindowProbed,
    SummaryFailed,
)


# A __dict__, not slots: evolved on every event, it is copied in one dict update.
@attrs.frozen(kw_only=True, slots=False)
class ContextState:
    # The providers' own answers about their windows.
    windows: tuple[ContextWindowProbed, ...] = ()
    # Why the next call must compress first (preflight, tool_batch, between_turns, overflow).
    pressure: str | None = None
    # Request size (chars) at the last request, and the prompt tokens the provider reported for
    # the request sent at ``reported_chars``: the estimate is corrected by them.
    request_chars: int = 0
    reported_tokens: int | None = None
    reported_chars: int = 0
    # The summary in the history now (updated, not rewritten, by the next compression).
    summary: str | None = None
    plan: CompressionPlanned | None = None
    result: ContextSummarised | SummaryFailed | None = None
    compressions: int = 0
    # Compressions in a row that saved under 10%; two switch compression off.
    ineffective: int = 0
    disabled: bool = False
    cooldown_until: float | None = None
    # What an overflow taught: the real window is no larger than this.
    window_cap: int | None = None
    # The current call already compressed once after an overflow.
    overflow_retried: bool = False
    # A compression happened: the session goes on in a child session after this turn.
    split_pending: str | None = None
