"""Searching a long text for a pattern only where the pattern can match (rules 7).

Python's ``re`` tries a case-insensitive alternation at every position of the text: over a
100 KB tool result the two pattern sets cost a second. Every match of a pattern contains one
of its *anchors* (a word it cannot match without), and is at most ``reach`` characters from it
on either side; so the pattern is searched in the windows around its anchors' occurrences,
merged, and not at all when none occurs. The result is the full search's whenever those two
facts hold (``tests/stages/test_injection_wide.py`` checks it over the whole corpus).

Three things keep that cheap on ordinary tool output:

- which anchors occur at all is read off the set of the text's distinct words, made in one
  pass (for ASCII text by ``bytes.translate`` and ``split``, in C): most patterns stop there;
- where an anchor occurs is looked up only for an anchor that does occur, by ``str.find``;
- a pattern whose matches all begin with a few words or strings
  (:mod:`stages.prompt.scan_starts`) is matched only where those begin inside the windows,
  not searched through them.

An anchor is a word prefix (``instruction`` finds ``instructions``, at the start of a word), or
with a leading ``*`` a substring (for non-Latin scripts and parts of identifiers). Anchors are
folded (:func:`stages.prompt.scan_starts.fold`); positions are looked up in the folded text,
which is used only when it has the text's length (``ß`` folds to ``ss``: then every search is a
full one).
"""

from __future__ import annotations

import bisect
import functools
import re

from stages.prompt.scan_starts import Starts, fold, starts

_WORD = re.compile(r"\w+")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# ASCII text with every byte that is not a word character (``\w``) made a space.
_SPACED = bytes(b if b in _WORD_BYTES else 0x20 for b in range(256))
_DENSE = 0.5  # windows covering more than this share of the text: one full search is cheaper
# More starts than one in this many characters: matching at each costs more than searching.
_SPARSE = 40
# So few starts that the pattern is matched at each, without looking for its windows.
_FEW = 16


@functools.cache
def _shape(prefixes: frozenset[str]) -> tuple[frozenset[str], tuple[int, ...], frozenset[str]]:
    """The anchors, their lengths, and their first one or two characters."""
    return (prefixes, tuple(sorted({len(p) for p in prefixes})),
            frozenset(p[:2] for p in prefixes))


@functools.cache
def _word_start(prefix: str) -> re.Pattern[str]:
    """``prefix`` at a word's start. The literal comes first and the look-behind after it, so
    that ``re`` finds the literal by its fast scan instead of trying every position."""
    return re.compile(f"{re.escape(prefix)}(?<!\\w.{{{len(prefix)}}})")


class Windows:
    """One text, searched by many patterns; what is learnt of it on the way (its words, where
    an anchor occurs) is kept for the next pattern."""

    def __init__(self, text: str, prefixes: frozenset[str]) -> None:
        self.text = text
        folded = fold(text)
        self.folded = folded if len(folded) == len(text) else None
        self._prefixes = prefixes
        self._present: frozenset[str] | None = None
        self._at: dict[str, list[int]] = {}
        self._found: dict[Starts, list[int] | None] = {}

    def _present_prefixes(self) -> frozenset[str]:
        """The anchors (of ``prefixes``) that begin at least one word of the text."""
        if self._present is None:
            folded = self.folded or ""
            if folded.isascii():
                words = set(folded.encode("ascii").translate(_SPACED).decode("ascii").split())
            else:
                words = set(_WORD.findall(folded))
            prefixes, sizes, heads = _shape(self._prefixes)
            # Most words (numbers, ids, hex) begin as no anchor does: one lookup skips them.
            self._present = frozenset(
                word[:size] for word in words if word[:2] in heads or word[:1] in heads
                for size in sizes if size <= len(word) and word[:size] in prefixes)
        return self._present

    def _word_starts(self, prefix: str) -> list[int]:
        """Where the words that begin with ``prefix`` begin."""
        found = self._at.get(prefix)
        if found is None:
            found = []
            if prefix in self._present_prefixes():
                found = [m.start() for m in _word_start(prefix).finditer(self.folded or "")]
            self._at[prefix] = found
        return found

    def _occurs(self, anchors: tuple[str, ...]) -> bool:
        present, folded = self._present_prefixes(), self.folded or ""
        return any(a[1:] in folded if a[0] == "*" else a in present for a in anchors)

    def _positions(self, anchors: tuple[str, ...]) -> list[int]:
        folded = self.folded or ""
        found: list[int] = []
        for anchor in anchors:
            if anchor[0] != "*":
                found.extend(self._word_starts(anchor))
                continue
            at = folded.find(anchor[1:])
            while at >= 0:
                found.append(at)
                at = folded.find(anchor[1:], at + 1)
        return sorted(found)

    def _occurrences(self, begins: Starts) -> list[int] | None:
        """Where matches may begin, sorted: the words that begin with ``begins.words`` and the
        occurrences of ``begins.strings``; None when they are so many that searching costs
        less than matching at each."""
        if begins in self._found:
            return self._found[begins]
        folded = self.folded or ""
        found = [at for word in begins.words for at in self._word_starts(word)]
        # Counted in C first: common strings give up at once, before a loop in Python.
        if len(found) + sum(folded.count(s) for s in begins.strings) > len(folded) // _SPARSE:
            self._found[begins] = None
            return None
        for string in begins.strings:
            at = folded.find(string)
            while at >= 0:
                found.append(at)
                at = folded.find(string, at + 1)
        found.sort()
        self._found[begins] = found
        return found

    def search(self, rx: re.Pattern[str], anchors: tuple[str, ...], reach: int,
               also: tuple[str, ...] = ()) -> bool:
        """Whether ``rx`` matches; ``also`` is a second set of anchors every match holds one
        of too (the sparser set's windows are searched). Where every match of ``rx`` begins
        with one of a few words or strings (:func:`stages.prompt.scan_starts.starts`), it is
        matched only where those begin inside the windows."""
        text = self.text
        if self.folded is None or len(text) <= 4 * reach:
            return rx.search(text) is not None
        if not self._occurs(anchors) or (also and not self._occurs(also)):
            return False
        begins = starts(rx)
        found = None if begins is None else self._occurrences(begins)
        if found is not None and len(found) <= _FEW:  # matching at each beats finding windows
            return any(rx.match(text, at) is not None for at in found)
        positions = self._positions(anchors)
        if also:
            positions = min(positions, self._positions(also), key=len)
        spans: list[list[int]] = []
        for at in positions:
            start, end = max(0, at - reach), min(len(text), at + reach)
            if spans and start <= spans[-1][1]:
                spans[-1][1] = end
            else:
                spans.append([start, end])
        if found is not None:
            return any(rx.match(text, at) is not None
                       for start, end in spans
                       for at in found[bisect.bisect_left(found, start):
                                       bisect.bisect_left(found, end)])
        if sum(end - start for start, end in spans) > _DENSE * len(text):
            return rx.search(text) is not None
        return any(rx.search(text, start, end) is not None for start, end in spans)
