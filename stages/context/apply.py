"""Applying a compression plan: the new history from the old one, the plan and the summary
(or the marker that replaces a middle nobody could summarise). Pure; the fold calls it."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from stages.context.compression_plan import cut_text, prune_line
from stages.log.events import CompressionPlanned
from stages.log.messages import Message


def _kept(messages: Sequence[Message], plan: CompressionPlanned) -> list[Message]:
    pruned, cut = frozenset(plan.pruned), frozenset(plan.cut)
    kept = []
    for index in range(plan.tail_start, len(messages)):
        message = messages[index]
        if index in cut:
            message = attrs.evolve(message, content=cut_text(message.content or "",
                                                             plan.cut_chars))
        elif index in pruned:
            message = attrs.evolve(message, content=prune_line(message))
        kept.append(message)
    return kept


def _role(before: str | None, after: str | None) -> str | None:
    """The summary's role: unlike both neighbours, and a user message if it opens."""
    for role in ("user", "assistant"):
        if role != before and role != after and (before is not None or role == "user"):
            return role
    return None


def _joined(message: Message, text: str, *, prefix: bool) -> Message:
    content = message.content or ""
    joined = f"{text}\n\n{content}" if prefix else f"{content}\n\n{text}"
    return attrs.evolve(message, content=joined)


def compacted(messages: Sequence[Message], plan: CompressionPlanned,
              middle_text: str | None) -> tuple[Message, ...]:
    """Head, then the summary (when there was a middle), then the kept messages."""
    head = list(messages[:plan.head])
    kept = _kept(messages, plan)
    if middle_text is None or plan.tail_start <= plan.head:
        return (*head, *kept)
    before = head[-1].role if head else None
    after = kept[0].role if kept else None
    role = _role(before, after)
    if role is not None:
        return (*head, Message(role=role, content=middle_text), *kept)
    # Neither role fits between its neighbours: the summary joins one of them.
    if head:
        return (*head[:-1], _joined(head[-1], middle_text, prefix=False), *kept)
    return (_joined(kept[0], middle_text, prefix=True), *kept[1:])


def moved(index: int, plan: CompressionPlanned, before: int, after: int) -> int:
    """Where the message at ``index`` of ``before`` messages sits once the plan compacted them
    to ``after``: the head keeps its place, the tail its distance from the end (the summary
    goes in between), and a message of the middle is now where the tail starts."""
    if index < plan.head:
        return index
    return max(0, after - (before - max(index, plan.tail_start)))
