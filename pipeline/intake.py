"""A caller's OpenAI-format history as messages, each dict converted once.

A caller that keeps the conversation itself passes all of it on every turn; converting
2,000 dicts (and deriving each message's wire JSON) again for every new message made the
turn grow with the history. A dict equal to one of the last history's gets back the very
same :class:`Message`, which also lets the caches keyed by message (redaction, wire JSON)
hit. Dicts are mutable and cannot be weakly referenced, so they are matched by a frozen copy
of their value, never by identity.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

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


class HistoryIntake:
    """Converts histories, remembering the messages of the last one only."""

    def __init__(self) -> None:
        self._last: dict[Hashable, Message] = {}

    def messages(self, history: Sequence[Mapping[str, Any]]) -> tuple[Message, ...]:
        seen: dict[Hashable, Message] = {}
        out = []
        for raw in history:
            try:
                key = _key(raw)
            except TypeError:
                out.append(from_openai(dict(raw)))
                continue
            message = seen.get(key) or self._last.get(key)
            if message is None:
                message = from_openai(dict(raw))
            seen[key] = message
            out.append(message)
        self._last = seen
        return tuple(out)
