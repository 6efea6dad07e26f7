"""A history handed in whole (``HistoryLoaded``), as the state holds it: its messages, size
and chained digest.

A caller that keeps the conversation itself hands all of it over again every turn
(``conversation_history=``). Folding it chained a SHA-256 over every message's wire text
(a fifth of a millisecond per 200 messages) and wrapped every tool result as data again (new
message objects, whose wire JSON every cache downstream then made afresh), for messages folded
the turn before. The last history folded is remembered with what was made at each of its
positions, so a history that starts with the same message objects (pipeline/intake.py hands a
caller's unchanged dicts back as the very same messages) is folded from where it departs.

The memory is a cache, never an input: the fold returns what it would compute afresh. It holds
one history (the last, replaced as one value, so threads never pair one history with another's
digests); sessions folded in turn in one process only miss.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterable

import attrs

from stages.log.evolve import evolve
from stages.log.messages import Message
from stages.prompt.untrusted import unwrapped, wrap

__all__ = ["chained_digest", "loaded_history", "same_start"]


def chained_digest(digest: str, messages: Iterable[Message]) -> str:
    """``digest`` chained over the wire text of ``messages``, one SHA-256 per message."""
    for message in messages:
        digest = hashlib.sha256((digest + message.wire).encode()).hexdigest()
    return digest


@attrs.frozen
class _Folded:
    """A history as given and as held, with the running size and digest after each message;
    ``code`` is the data marker the tool results were wrapped with (None: not wrapped)."""

    code: str | None
    given: tuple[Message, ...]
    held: tuple[Message, ...]
    chars: tuple[int, ...]
    digests: tuple[str, ...]


class _Last:
    folded = _Folded(None, (), (), (), ())


_LAST = _Last()


def same_start(a: tuple[Message, ...], b: tuple[Message, ...]) -> int:
    """How many messages ``a`` and ``b`` start with that are the very same objects (identity,
    not equality: equal messages need not have the same wire text, ``1 == 1.0``)."""
    same = list(map(operator.is_, a, b))
    try:
        return same.index(False)
    except ValueError:
        return len(same)


def _held(message: Message, code: str | None) -> Message:
    # Rules 7: the caller's tool results are data as much as the session's own.
    if code is None or message.role != "tool":
        return message
    return evolve(message, content=wrap(unwrapped(message.text), name=message.name, code=code))


def loaded_history(messages: tuple[Message, ...], code: str | None
                   ) -> tuple[tuple[Message, ...], int, str]:
    """The history ``messages`` as the state holds it (tool results wrapped as data with the
    marker ``code``, if one is given), its size in characters and its chained digest."""
    last = _LAST.folded
    start = same_start(messages, last.given) if code == last.code else 0
    if start == len(messages):
        if start == 0:
            return (), 0, ""
        # The last history or a start of it: the memory keeps serving both.
        return last.held[:start], last.chars[start - 1], last.digests[start - 1]
    held, chars, digests = list(last.held[:start]), list(last.chars[:start]), \
        list(last.digests[:start])
    size = chars[-1] if chars else 0
    digest = digests[-1] if digests else ""
    for message in messages[start:]:
        message = _held(message, code)
        size += message.chars
        digest = chained_digest(digest, (message,))
        held.append(message)
        chars.append(size)
        digests.append(digest)
    folded = _Folded(code, messages, tuple(held), tuple(chars), tuple(digests))
    _LAST.folded = folded
    return folded.held, size, digest
