"""A history handed in whole (``HistoryLoaded``), as the state holds it: its messages, size
and chained digest.

A caller that keeps the conversation itself hands all of it over again every turn
(``conversation_history=``). Folding it chained a SHA-256 over every message's wire text
(a fifth of a millisecond per 200 messages) and wrapped every tool result as data again (new
message objects, whose wire JSON every cache downstream then made afresh), for messages folded
the turn before. The last few histories folded are remembered with what was made at each of
their positions, so a history that starts with the same message objects (pipeline/intake.py
hands a caller's unchanged dicts back as the very same messages) is folded from where it
departs.

The memory is a cache, never an input: the fold returns what it would compute afresh. It holds
a few histories (see ``RecentHistories``), whatever the number of sessions.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

import attrs

from stages.log.evolve import evolve
from stages.log.messages import Message
from stages.prompt.untrusted import unwrapped, wrap

__all__ = ["RecentHistories", "chained_digest", "loaded_history", "same_start"]

V = TypeVar("V")


def chained_digest(digest: str, messages: Iterable[Message]) -> str:
    """``digest`` chained over the wire text of ``messages``, one SHA-256 per message."""
    for message in messages:
        digest = hashlib.sha256((digest + message.wire).encode()).hexdigest()
    return digest


def same_start(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many messages ``a`` and ``b`` start with that are the very same objects (identity,
    not equality: equal messages need not have the same wire text, ``1 == 1.0``)."""
    same = list(map(operator.is_, a, b))
    try:
        return same.index(False)
    except ValueError:
        return len(same)


class RecentHistories(Generic[V]):
    """The last few histories handed in, each with what was made for it position by position
    (a value the user slices), found by their first message's identity.

    Several, because one process runs several agents (each converts its caller's dicts into
    messages of its own), and one would keep dropping another's. Replaced as one value, so
    threads never pair one history with another's values: a race only loses an entry."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._entries: tuple[tuple[tuple[Message, ...], V], ...] = ()

    def find(self, messages: tuple[Message, ...]) -> tuple[int, V | None]:
        """How many of ``messages`` start a history remembered, and its value (``0, None``
        when none does)."""
        if messages:
            for given, value in self._entries:
                if given[0] is messages[0]:
                    return same_start(messages, given), value
        return 0, None

    def keep(self, messages: tuple[Message, ...], value: V) -> None:
        """Remember ``messages`` with ``value``, in place of a history with the same first
        message."""
        if not messages:
            return
        others = tuple(e for e in self._entries if e[0][0] is not messages[0])
        self._entries = ((messages, value), *others)[:self._size]


@attrs.frozen
class _Folded:
    """A history as held, with the running size and digest after each message; ``code`` is
    the data marker its tool results were wrapped with (None: not wrapped), ``unmarked`` how
    many messages come before its first tool result (which no marker changes)."""

    code: str | None
    unmarked: int
    held: tuple[Message, ...]
    chars: tuple[int, ...]
    digests: tuple[str, ...]


_RECENT: RecentHistories[_Folded] = RecentHistories()


def _held(message: Message, code: str | None) -> Message:
    # Rules 7: the caller's tool results are data as much as the session's own.
    if code is None or message.role != "tool":
        return message
    return evolve(message, content=wrap(unwrapped(message.text), name=message.name, code=code))


def loaded_history(messages: tuple[Message, ...], code: str | None
                   ) -> tuple[tuple[Message, ...], int, str]:
    """The history ``messages`` as the state holds it (tool results wrapped as data with the
    marker ``code``, if one is given), its size in characters and its chained digest."""
    if not messages:  # a caller keeping no history: nothing to fold or remember
        return (), 0, ""
    start, last = _RECENT.find(messages)
    if last is not None and last.code != code:
        # Each session has its marker (a compression's child too): what comes before the
        # first tool result is the same under any.
        start = min(start, last.unmarked)
    if last is not None and start == len(messages):
        # A history remembered or a start of it: the memory keeps serving both.
        return last.held[:start], last.chars[start - 1], last.digests[start - 1]
    held, chars, digests = [], [], []
    unmarked = None
    if last is not None:
        held, chars, digests = (list(last.held[:start]), list(last.chars[:start]),
                                list(last.digests[:start]))
        unmarked = last.unmarked if last.unmarked < start else None
    size = chars[-1] if chars else 0
    digest = digests[-1] if digests else ""
    for index in range(start, len(messages)):
        message = messages[index]
        if unmarked is None and message.role == "tool":
            unmarked = index
        message = _held(message, code)
        size += message.chars
        digest = chained_digest(digest, (message,))
        held.append(message)
        chars.append(size)
        digests.append(digest)
    folded = _Folded(code, len(messages) if unmarked is None else unmarked, tuple(held),
                     tuple(chars), tuple(digests))
    _RECENT.keep(messages, folded)
    return folded.held, size, digest
