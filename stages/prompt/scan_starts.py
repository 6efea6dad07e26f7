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
from typing import Any, NamedTuple

__all__ = ["Starts", "fold", "starts"]

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


class Starts(NamedTuple):
    """Where every match of a pattern begins: at the start of a word that begins with one of
    ``words``, or where one of ``strings`` occurs (both folded)."""

    words: tuple[str, ...]
    strings: tuple[str, ...]


_AT_WORD = "\0"  # marks a start the pattern's ``\b`` puts at a word's start
_WORDLIKE = re.compile(r"\w+")


@functools.cache
def starts(rx: re.Pattern[str]) -> Starts | None:
    """Where every match of ``rx`` begins, or None when that cannot be said (a match may begin
    with any character, or there would be too many places to look)."""
    if not rx.flags & re.IGNORECASE or rx.flags & re.VERBOSE:
        return None
    try:
        found = _seq(list(_parser.parse(rx.pattern, rx.flags)), _LONGEST, 0, False)
    except (_Unknown, RecursionError):
        return None
    if "" in found or _AT_WORD in found:
        return None
    # A start that another one begins with adds no place to look: keep the shortest.
    kept: list[str] = []
    for start in sorted(found, key=lambda s: len(s.lstrip(_AT_WORD))):
        if not any(_covers(shorter, start) for shorter in kept):
            kept.append(start)
    if len(kept) > _MOST:
        return None
    words = tuple(dict.fromkeys(
        _WORDLIKE.match(s, 1).group() for s in kept if s[0] == _AT_WORD))  # type: ignore[union-attr]
    return Starts(words, tuple(s for s in kept if s[0] != _AT_WORD))


def _covers(shorter: str, start: str) -> bool:
    """Whether every place ``start`` names is one ``shorter`` names too."""
    if shorter[0] == _AT_WORD:
        return start.startswith(shorter)
    return start.lstrip(_AT_WORD).startswith(shorter)


def _seq(items: list[Any], room: int, depth: int, at_word: bool) -> set[str]:
    """The starts of the sequence ``items``, each at most ``room`` characters long; with
    ``at_word``, a ``\\b`` stands before them."""
    if depth > 40:
        raise _Unknown
    if room == 0 or not items:
        return {""}
    (op, av), rest = items[0], items[1:]
    if op in _ZERO_WIDTH:
        return _seq(rest, room, depth + 1, at_word or (op == sre.AT and av == sre.AT_BOUNDARY))
    if op == sre.LITERAL:
        return _then(_char(av), rest, room, depth, at_word)
    if op == sre.IN and 0 < len(av) <= _SMALL_CLASS and all(o == sre.LITERAL for o, _ in av):
        return _bounded(set().union(*(_then(_char(c), rest, room, depth, at_word)
                                      for _, c in av)))
    if op == sre.SUBPATTERN:
        _group, add, remove, body = av
        if add or remove:
            raise _Unknown
        return _seq([*body, *rest], room, depth + 1, at_word)
    if op == sre.BRANCH:
        return _bounded(set().union(*(_seq([*alt, *rest], room, depth + 1, at_word)
                                      for alt in av[1])))
    if op in _REPEATS:
        low, high, body = av
        more = [(op, (max(low - 1, 0), high if high == sre.MAXREPEAT else high - 1, body))]
        once = _seq([*body, *more, *rest], room, depth + 1, at_word) if high else set()
        return _bounded(once if low else once | _seq(rest, room, depth + 1, at_word))
    return {""}  # a character the parse cannot name: the starts end before it


def _bounded(found: set[str]) -> set[str]:
    if len(found) > 4 * _MOST:  # too many to look for: give up early, not after the work
        raise _Unknown
    return found


def _char(code: int) -> str:
    folded = fold(chr(code))
    if len(folded) != 1:
        raise _Unknown
    return folded


def _then(char: str, rest: list[Any], room: int, depth: int, at_word: bool) -> set[str]:
    mark = _AT_WORD if at_word and _WORDLIKE.match(char) else ""
    return {mark + char + tail for tail in _seq(rest, room - 1, depth + 1, False)}
