"""Where a pattern's matches can start, read off the pattern itself (rules 7).

Python's ``re`` tries a pattern such as ``\\b(?:upload|send|post)\\s+...`` at every position
of the text, each attempt a walk through its alternatives: over a 100 KB tool result, some
milliseconds per pattern. But every match of it begins with one of a few literal strings
(``upload``, ``send``, ``post``, case aside), which ``str.find`` locates at memory speed; the
pattern matched at just those positions (``rx.match(text, at)``, which sees the text before
``at`` for ``\\b`` and look-behinds as a search does) finds a match exactly when a search of
the whole text would.

:func:`starts` derives those strings from the parsed pattern: literals are followed through
groups, alternations, repeats, zero-width assertions (which only ever narrow the matches);
the first character the parse cannot name (a class, a category, any character) ends them. A
pattern with a match that can begin with such a character has no starts (None): it is
searched as before.
"""

from __future__ import annotations

import functools
import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

__all__ = ["fold", "starts"]

_LONGEST = 6  # characters of a start: longer ones find no fewer positions worth the work
_MOST = 64  # starts per pattern: more, and the pattern is searched as before
_SMALL_CLASS = 6  # a class of this many literal characters is followed like an alternation
_ZERO_WIDTH = {sre.AT, sre.ASSERT, sre.ASSERT_NOT}
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)}
# ``re``'s case-insensitive matching holds U+0131 (dotless i) equal to ``i``, casefolding does
# not: folded so, the folded text's starts are where the pattern can match.
_DOTLESS = {0x131: "i"}


def fold(text: str) -> str:
    """``text`` as the starts are looked up in: casefolded, U+0131 (dotless i) as ``i``."""
    return text.casefold().translate(_DOTLESS)


class _Unknown(Exception):
    """The pattern has a match whose start cannot be named."""


@functools.cache
def starts(rx: re.Pattern[str]) -> tuple[str, ...] | None:
    """The folded strings every match of ``rx`` begins with, or None when there are none
    (a match may begin with any character, or there would be too many of them)."""
    if not rx.flags & re.IGNORECASE or rx.flags & re.VERBOSE:
        return None
    try:
        found = _seq(list(_parser.parse(rx.pattern, rx.flags)), _LONGEST, 0)
    except (_Unknown, RecursionError):
        return None
    if "" in found:
        return None
    # A start that another one begins with adds no position: keep the shortest.
    kept: list[str] = []
    for start in sorted(found, key=len):
        if not any(start.startswith(shorter) for shorter in kept):
            kept.append(start)
    return tuple(kept) if len(kept) <= _MOST else None


def _seq(items: list[Any], room: int, depth: int) -> set[str]:
    """The starts of the sequence ``items``, each at most ``room`` characters long."""
    if depth > 40:
        raise _Unknown
    if room == 0 or not items:
        return {""}
    (op, av), rest = items[0], items[1:]
    if op in _ZERO_WIDTH:
        return _seq(rest, room, depth + 1)
    if op == sre.LITERAL:
        return _then(_char(av), rest, room, depth)
    if op == sre.IN and 0 < len(av) <= _SMALL_CLASS and all(o == sre.LITERAL for o, _ in av):
        return set().union(*(_then(_char(c), rest, room, depth) for _, c in av))
    if op == sre.SUBPATTERN:
        _group, add, remove, body = av
        if add or remove:
            raise _Unknown
        return _seq([*body, *rest], room, depth + 1)
    if op == sre.BRANCH:
        return set().union(*(_seq([*alt, *rest], room, depth + 1) for alt in av[1]))
    if op in _REPEATS:
        low, high, body = av
        more = [(op, (max(low - 1, 0), high if high == sre.MAXREPEAT else high - 1, body))]
        once = _seq([*body, *more, *rest], room, depth + 1) if high else set()
        return once if low else once | _seq(rest, room, depth + 1)
    return {""}  # a character the parse cannot name: the starts end before it


def _char(code: int) -> str:
    folded = fold(chr(code))
    if len(folded) != 1:
        raise _Unknown
    return folded


def _then(char: str, rest: list[Any], room: int, depth: int) -> set[str]:
    return {char + tail for tail in _seq(rest, room - 1, depth + 1)}
