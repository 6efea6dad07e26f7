"""Applying a compression plan: the new history from the old one, the plan and the summary
(or the marker that replaces a middle nobody could summarise). Pure; the fold calls it."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from stages.context.compression_plan import cut_text, is_compaction, prune_line
from stages.context.summary import without_compaction
from stages.log.content_parts import with_text
from stages.log.events import CompressionPlanned
from stages.log.messages import Message


def _kept(messages: Sequence[Message], plan: CompressionPlanned) -> list[Message]:
    pruned, cut = frozenset(plan.pruned), frozenset(plan.cut)
    kept = []
    for index in range(plan.tail_start, len(messages)):
        message = messages[index]
        if index in cut:
            message = attrs.evolve(message, content=with_text(
                message.content, cut_text(message.text, plan.cut_chars)))
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
    content = message.text
    joined = f"{text}\n\n{content}" if prefix else f"{content}\n\n{text}"
    return attrs.evolve(message, content=with_text(message.content, joined))


def compacted(messages: Sequence[Message], plan: CompressionPlanned,
              middle_text: str | None) -> tuple[Message, ...]:
    """Head, then the summary (when there was a middle), then the kept messages."""
    if plan.iterative:
        return _apart(messages, plan, middle_text)
    head = list(messages[:plan.head])
    kept = _kept(messages, plan)
    if middle_text is None or plan.tail_start <= plan.head:
        return (*head, *kept)
    return _placed(head, kept, middle_text)


def _without_summary(message: Message) -> Message:
    if not is_compaction(message):
        return message
    return attrs.evolve(message, content=with_text(message.content,
                                                   without_compaction(message.text)))


def _placed(head: list[Message], kept: list[Message], text: str) -> tuple[Message, ...]:
    """``text`` between ``head`` and ``kept``: a message of its own where a role fits, else
    joined to a neighbour."""
    before = head[-1].role if head else None
    after = kept[0].role if kept else None
    role = _role(before, after)
    if role is not None:
        return (*head, Message(role=role, content=text), *kept)
    # Neither role fits between its neighbours: the summary joins one of them.
    if head:
        return (*head[:-1], _joined(head[-1], text, prefix=False), *kept)
    return (_joined(kept[0], text, prefix=True), *kept[1:])


def _apart(messages: Sequence[Message], plan: CompressionPlanned,
           middle_text: str | None) -> tuple[Message, ...]:
    """Rules 7: head, the latest user message (``plan.kept``), the kept tail, with one summary.

    The new summary updates the previous one, so the previous one leaves whatever kept message
    carried it. Between a user head and the latest user message the summary is an assistant
    message of its own (two user messages may not meet); else it joins the latest user
    message, after its text, since no role fits between that message and the assistant that
    answers it. Without a kept user message it goes where the rules before 7 put it."""
    head = list(messages[:plan.head])
    user = [] if plan.kept is None else [messages[plan.kept]]
    kept = _kept(messages, plan)
    if middle_text is None or plan.tail_start <= plan.head:
        return (*head, *user, *kept)
    head, user, kept = ([_without_summary(m) for m in part] for part in (head, user, kept))
    if not user:
        return _placed(head, kept, middle_text)
    if head and head[-1].role == "user":
        return (*head, Message(role="assistant", content=middle_text), *user, *kept)
    return (*head, _joined(user[0], middle_text, prefix=False), *kept)


def moved(index: int, plan: CompressionPlanned, before: int, after: int) -> int:
    """Where the message at ``index`` of ``before`` messages sits once the plan compacted them
    to ``after``: the head keeps its place, the tail its distance from the end (the summary
    goes in between), and a message of the middle is now where the tail starts."""
    if index < plan.head:
        return index
    if index == plan.kept:  # the latest user message, just before the tail
        return after - (before - plan.tail_start) - 1
    return max(0, after - (before - max(index, plan.tail_start)))
