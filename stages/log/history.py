"""``History``: the conversation as an immutable sequence with amortised O(1) append.

Appending to a tuple copies it, which makes a session's fold quadratic. A ``History`` is a
view of the first ``n`` items of a list it may share with longer views. Appending to the
longest view extends the shared list in place (older views keep their length, so they do not
see the new items); appending to a shorter view (a branch, as when a replay or a fork goes on
from an older state) copies its prefix first. Either way no view ever changes.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from stages.log.messages import Message

_CONTENT = operator.attrgetter("content")


def _parts(messages: Iterable[Message]) -> int:
    # In C, with no Python step per message: a history handed in whole is counted each turn.
    return [*map(type, map(_CONTENT, messages))].count(tuple)


class History(Sequence[Message]):
    __slots__ = ("_items", "_parts", "_size")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._items: list[Message] = list(messages)
        self._size = len(self._items)
        self._parts = _parts(self._items)

    @classmethod
    def _view(cls, items: list[Message], size: int, parts: int) -> History:
        view = cls.__new__(cls)
        view._items, view._size, view._parts = items, size, parts
        return view

    @property
    def with_parts(self) -> int:
        """How many messages have content parts (images): kept as messages are appended, so
        the send path knows a text-only history without reading it."""
        return self._parts

    def append(self, *messages: Message) -> History:
        """This history followed by ``messages``; ``self`` is unchanged."""
        if not messages:
            return self
        items = self._items
        if len(items) != self._size:
            items = items[:self._size]
        items.extend(messages)
        parts = self._parts
        for message in messages:  # mostly one message: a loop costs less than a count's set-up
            if type(message.content) is tuple:
                parts += 1
        return History._view(items, len(items), parts)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if type(index) is slice:  # exactly: no class can derive from slice
            return tuple(self._items[:self._size][index])
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("history index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        # Stops at this view's end even while a longer view extends the shared list.
        return itertools.islice(self._items, self._size)

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        for index in range(self._size - 1, -1, -1):
            yield items[index]

    def __eq__(self, other: object) -> bool:
        if type(other) is tuple or type(other) is list:  # a caller's history, compared each turn
            return self._size == len(other) and self._items[:self._size] == list(other)
        if isinstance(other, History):
            return self._size == other._size and (
                self._items is other._items
                or self._items[:self._size] == other._items[:other._size])
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._size == len(other) and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"History({list(self)!r})"


def as_history(messages: Sequence[Message]) -> History:
    # ``type`` first: the fold's own history, on every evolve of the state, costs no call.
    if type(messages) is History or isinstance(messages, History):
        return messages
    return History(messages)
