"""A caller's OpenAI-format history as messages, each dict converted once.

A caller that keeps the conversation itself passes all of it on every turn; converting
2,000 dicts (and deriving each message's wire JSON) again for every new message made the
turn grow with the history. A dict equal to one of the last history's gets back the very
same :class:`Message`, which also lets the caches keyed by message (redaction, wire JSON)
hit. Dicts are mutable and cannot be weakly referenced, so they are matched by value, never
by identity: first against a snapshot of the dict at the same position of the last history
(a history that only grew costs one C-speed ``==`` per message), then, for a dict that moved,
by a frozen copy of its value.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

from stages.log.messages import Message, from_openai


def _frozen(value: object) -> Hashable:
    """A hashable stand-in for a JSON-like value; equal only for values ``from_openai`` reads
    alike (types are part of it: ``1``, ``1.0`` and ``True`` are different content)."""
    if type(value) is str or value is None:
        return value
    if isinstance(value, Mapping):
        return ("{", tuple((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return ("[", tuple(_frozen(item) for item in value))
    hash(value)  # anything else unhashable raises TypeError: no caching for that message
    return (type(value), value)


def _key(raw: Mapping[str, Any]) -> Hashable:
    """``_frozen(raw)``, faster for the common message of text fields only (its items as they
    are: a tuple of pairs, which no ``_frozen`` value of a mapping equals)."""
    if type(raw) is dict:
        for value in raw.values():
            if type(value) is not str and value is not None:
                return _frozen(raw)
        return tuple(raw.items())
    return _frozen(raw)


class _NotPlain(Exception):
    pass


def _plain_copy(value: Any) -> Any:
    """A deep copy of a value made of exact ``dict`` (text keys), ``list``, ``str`` and None
    only; raises ``_NotPlain`` for anything else. Only for such a copy does ``==`` mean "read
    alike": numbers compare across types (``1 == 1.0 == True``) and other types may define
    ``==`` as they please."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copy[key] = _plain_copy(item)
        return copy
    if kind is list:
        return [_plain_copy(item) for item in value]
    raise _NotPlain


@attrs.frozen
class _Seen:
    """One dict of a history: a snapshot of it (None when ``==`` cannot be trusted on it),
    its frozen key (None when it is unhashable) and its message."""

    snapshot: dict | None
    key: Hashable
    message: Message


def _seen(raw: Mapping[str, Any], known: dict[Hashable, Message]) -> _Seen:
    """A dict met for the first time at its position: converted, unless ``known`` (the
    messages by frozen key) has its value, which then gets it too."""
    try:
        snapshot = _plain_copy(raw)
    except _NotPlain:
        snapshot = None
    try:
        key: Hashable = _key(raw)
    except TypeError:
        return _Seen(snapshot, None, from_openai(dict(raw)))
    message = known.get(key) or from_openai(dict(raw))
    known[key] = message
    return _Seen(snapshot, key, message)


@attrs.frozen(eq=False)
class _Last:
    """The last history: what was seen at each position, its snapshots, its messages, and
    where those with content parts are (images, which the turn stores: a text-only history,
    the common case, is known without a look at its messages)."""

    seen: list[_Seen] = attrs.Factory(list)
    snapshots: list[dict | None] = attrs.Factory(list)
    messages: tuple[Message, ...] = ()
    parts: tuple[int, ...] = ()


class HistoryIntake:
    """Converts histories, remembering the messages of the last one only (as one value, so
    that threads taking histories in at once never mix theirs)."""

    def __init__(self) -> None:
        self._last = _Last()

    def messages(self, history: Sequence[Mapping[str, Any]]) -> tuple[Message, ...]:
        return self.taken(history)[0]

    def taken(self, history: Sequence[Mapping[str, Any]]
              ) -> tuple[tuple[Message, ...], tuple[int, ...]]:
        """The messages of ``history``, and where those with content parts are."""
        last = self._last
        # Each dict against the snapshot at its position, in one pass at C speed: a history
        # passed again or grown costs no Python step per message it shares with the last.
        same = list(map(bool, map(operator.eq, history, last.snapshots)))
        start = same.index(False) if False in same else len(same)
        if start == len(history) == len(last.seen):
            return last.messages, last.parts
        # The messages by frozen key, made at the first dict that differs from the one at its
        # position: a history that only grew never needs them.
        known: dict[Hashable, Message] | None = None
        seen = last.seen[:start]
        for index in range(start, len(history)):
            if index < len(same):
                if same[index]:
                    seen.append(last.seen[index])
                    continue
                if known is None:
                    known = {s.key: s.message for s in (*last.seen, *seen)
                             if s.key is not None}
            seen.append(_seen(history[index], {} if known is None else known))
        added = seen[start:]
        self._last = taken = _Last(
            seen=seen, snapshots=last.snapshots[:start] + [s.snapshot for s in added],
            messages=last.messages[:start] + tuple(s.message for s in added),
            parts=tuple(i for i in last.parts if i < start) + tuple(
                i for i, s in enumerate(added, start) if type(s.message.content) is tuple))
        return taken.messages, taken.parts
