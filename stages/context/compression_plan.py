"""The compressor's pure planner: which messages stay (head and tail), which are summarised
(the middle), and how the kept messages are trimmed. Every budget scales with the window, so
the same defaults work for a 2,048-token local model and a 1M-token hosted one.

Invariants (property-tested): a tool call is never separated from its results, the latest
user message stays, and the result alternates as the history did.

Under rules 7 (``keep_user``) the latest user message is kept on its own when it lies before
the protected tail, so the calls that followed it are summarised too: a turn of hundreds of
tool calls compresses again and again (before, the tail began at that message, and a turn's
own calls were only ever pruned).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from stages.log.context_tokens import CHARS_PER_TOKEN
from stages.log.messages import Message

MESSAGE_OVERHEAD_TOKENS = 4
TAIL_TOKENS = 20_000
HEAD_TOKENS = 4_000
PRUNE_MIN_CHARS = 200
CUT_MARKER_ROOM = 120
SUMMARY_MIN, SUMMARY_MAX, SUMMARY_RATIO = 2_000, 12_000, 0.20


SUMMARY_PREFIX = ("[Summary of the earlier conversation, written when it was compacted. It is "
                  "reference only: answer the latest user message; where they differ, the "
                  "latest message wins.]")
DROPPED_TAG = "earlier messages were dropped to fit the context window"


def is_compaction(message: Message) -> bool:
    """A summary or a dropped-middle marker a compression put in the history."""
    text = message.text
    return SUMMARY_PREFIX in text or DROPPED_TAG in text


def message_tokens(message: Message) -> int:
    return message.chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS


@attrs.frozen(kw_only=True)
class Budgets:
    """Token budgets derived from the window."""

    window: int

    @property
    def head(self) -> int:
        return min(HEAD_TOKENS, self.window // 10)

    @property
    def tail(self) -> int:
        return min(TAIL_TOKENS, self.window // 5)

    @property
    def tool_result_chars(self) -> int:
        """The largest tool result kept whole: a quarter of the window."""
        return max(400, self.window * CHARS_PER_TOKEN // 4)

    def summary(self, content_tokens: int) -> int:
        """The seeds' ``max(2000, min(0.20 * content_tokens, 12000))``, capped at a tenth of
        the window so that the summary itself fits a small window."""
        wanted = max(SUMMARY_MIN, min(int(SUMMARY_RATIO * content_tokens), SUMMARY_MAX))
        return max(64, min(wanted, self.window // 10))


@attrs.frozen(kw_only=True)
class Boundaries:
    head: int
    tail_start: int
    # From here on messages stay whole; between ``tail_start`` and here old tool results are
    # pruned to one line.
    protected_from: int
    # The latest user message, kept although it lies between ``head`` and ``tail_start``.
    kept: int | None = None


def _head(messages: Sequence[Message], budget: int, latest_user: int) -> int:
    """The opening exchange: the first user message and the first answer without tool calls,
    within the budget. The latest user message, when it is the first, always stays."""
    if not messages or messages[0].role != "user" or is_compaction(messages[0]):
        return 0
    first = message_tokens(messages[0])
    if first > budget and latest_user != 0:
        return 0
    if (len(messages) > 2 and messages[1].role == "assistant" and not messages[1].tool_calls
            and not is_compaction(messages[1]) and first + message_tokens(messages[1]) <= budget):
        return 2
    return 1


def _group_start(messages: Sequence[Message], index: int) -> int:
    """The start of the call group holding ``index`` (a tool result belongs to its call)."""
    while index > 0 and messages[index].role == "tool":
        index -= 1
    return index


def boundaries(messages: Sequence[Message], *, window: int, protect_last_n: int,
               keep_user: bool = False) -> Boundaries:
    budgets = Budgets(window=window)
    n = len(messages)
    latest_user = next((i for i in range(n - 1, -1, -1) if messages[i].role == "user"), -1)
    head = min(_head(messages, budgets.head, latest_user), n)
    start, used = n, 0
    for index in range(n - 1, head - 1, -1):
        cost = message_tokens(messages[index])
        if n - index > max(1, protect_last_n) or used + cost > budgets.tail:
            break
        start, used = index, used + cost
    if start < n and messages[start].role == "tool":
        # Never split a group: the whole group stays when the budget reached into it.
        start = _group_start(messages, start)
    if start == n and n > head:
        start = max(head, _group_start(messages, n - 1))
    protected = max(start, head)
    if keep_user:
        kept = latest_user if head <= latest_user < protected else None
        return Boundaries(head=head, tail_start=protected, protected_from=protected, kept=kept)
    tail_start = protected if latest_user < head else min(protected, latest_user)
    return Boundaries(head=head, tail_start=max(head, tail_start), protected_from=protected)


def pruned_indices(messages: Sequence[Message], start: int, end: int) -> tuple[int, ...]:
    return tuple(i for i in range(start, end) if messages[i].role == "tool"
                 and len(messages[i].content or "") > PRUNE_MIN_CHARS)


def cut_indices(messages: Sequence[Message], start: int, limit: int) -> tuple[int, ...]:
    return tuple(i for i in range(start, len(messages)) if messages[i].role == "tool"
                 and len(messages[i].content or "") > limit)


def prune_line(message: Message) -> str:
    """A tool result as one line: the tool, the size, and how it began."""
    text = message.text
    first = text.strip().splitlines()[0][:80] if text.strip() else ""
    return f"[{message.name or 'tool'}] result pruned ({len(text)} chars): {first}"


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` chars, keeping its start and end, with a marker."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - CUT_MARKER_ROOM)
    head, tail = keep * 3 // 4, keep - keep * 3 // 4
    marker = (f"\n...[{len(text) - keep} chars cut: this tool result was larger than the "
              f"context window allows]...\n")
    return text[:head] + marker + text[len(text) - tail:]


def middle_tokens(messages: Sequence[Message], b: Boundaries) -> int:
    return sum(message_tokens(messages[i]) for i in range(b.head, b.tail_start) if i != b.kept)


def middle_chars(messages: Sequence[Message], b: Boundaries) -> int:
    return sum(messages[i].chars for i in range(b.head, b.tail_start) if i != b.kept)
