"""Searching a long text for a pattern only where the pattern can match (rules 7).

Python's ``re`` tries a case-insensitive alternation at every position of the text: over a
100 KB tool result the two pattern sets cost a second. Every match of a pattern contains one
of its *anchors* (a word it cannot match without), and is at most ``reach`` characters from it
on either side; so the pattern is searched in the windows around its anchors' occurrences,
merged, and not at all when none occurs. The result is the full search's whenever those two
facts hold (``tests/stages/test_injection_wide.py`` checks it over the whole corpus).

An anchor is a word prefix (``instruction`` finds ``instructions``, at the start of a word), or
with a leading ``*`` a substring (for non-Latin scripts and parts of identifiers). Anchors are
casefolded; positions are looked up in the casefolded text, which is used only when it has the
text's length (``ß`` folds to ``ss``: then every search is a full one).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from stages.prompt.scan_starts import fold, starts

_WORD = re.compile(r"\w+")
# More starts than one in this many characters: matching at each costs more than searching.
_SPARSE = 40
_DENSE = 0.5  # windows covering more than this share of the text: one full search is cheaper


@functools.cache
def _starter(prefixes: frozenset[str]) -> re.Pattern[str]:
    """A regex of the shortest anchor at each word start (a trie: one step per character)."""
    return re.compile(r"(?<!\w)" + _trie(prefixes))


def _trie(words: Iterable[str]) -> str:
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _alternatives(tree)


def _alternatives(node: dict[str, Any]) -> str:
    # A word that ends here matches already: its longer words are checked from the word.
    if "" in node:
        return ""
    alternatives = [re.escape(ch) + _alternatives(sub) for ch, sub in sorted(node.items())]
    return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"


class Windows:
    """One text, searched by many patterns: where each word anchor occurs is found in one
    pass over the text's words, for all the patterns' anchors (``prefixes``)."""

    def __init__(self, text: str, prefixes: frozenset[str]) -> None:
        self.text = text
        folded = fold(text)
        self.folded = folded if len(folded) == len(text) else None
        self._prefixes = prefixes
        self._longest = max(map(len, prefixes), default=0)
        self._starts: dict[str, list[int]] | None = None
        self._found: dict[tuple[str, ...], list[int] | None] = {}

    def _anchored(self) -> dict[str, list[int]]:
        """Where the words starting with each anchor start: the words that begin with any
        anchor are found by one regex (a trie of the anchors), so only they cost a step in
        Python, not every word of the text."""
        if self._starts is None:
            folded = self.folded or ""
            starts: dict[str, list[int]] = defaultdict(list)
            for found in _starter(self._prefixes).finditer(folded):
                at = found.start()
                word = _WORD.match(folded, at, at + self._longest)
                assert word is not None  # an anchor is a word's start
                word_text = word.group()
                for size in range(len(found.group()), len(word_text) + 1):
                    if word_text[:size] in self._prefixes:
                        starts[word_text[:size]].append(at)
            self._starts = starts
        return self._starts

    def _positions(self, anchors: tuple[str, ...]) -> list[int]:
        folded = self.folded or ""
        found: list[int] = []
        anchored = self._anchored()
        for anchor in anchors:
            if not anchor.startswith("*"):
                found.extend(anchored.get(anchor, ()))
        for anchor in (a[1:] for a in anchors if a.startswith("*")):
            at = folded.find(anchor)
            while at >= 0:
                found.append(at)
                at = folded.find(anchor, at + 1)
        return sorted(found)

    def _occurrences(self, strings: tuple[str, ...]) -> list[int] | None:
        """Where the (folded) ``strings`` occur, sorted; None when they are so many that
        searching costs less than matching at each."""
        if strings in self._found:
            return self._found[strings]
        found: list[int] = []
        folded = self.folded or ""
        # Counted in C first: the common strings of a pattern ("a", "the") give up at once.
        if sum(folded.count(string) for string in strings) > len(folded) // _SPARSE:
            self._found[strings] = None
            return None
        for string in strings:
            at = folded.find(string)
            while at >= 0:
                found.append(at)
                at = folded.find(string, at + 1)
        found.sort()
        self._found[strings] = found
        return found

    def search(self, rx: re.Pattern[str], anchors: tuple[str, ...], reach: int,
               also: tuple[str, ...] = ()) -> bool:
        """Whether ``rx`` matches; ``also`` is a second set of anchors every match holds one
        of too (the sparser set's windows are searched). Where every match of ``rx`` begins
        with one of a few strings (:func:`stages.prompt.scan_starts.starts`), it is matched
        only where those occur inside the windows."""
        text = self.text
        if self.folded is None or len(text) <= 4 * reach:
            return rx.search(text) is not None
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
        if not spans:
            return False
        begins = starts(rx)
        found = None if begins is None else self._occurrences(begins)
        if found is not None:
            return any(rx.match(text, at) is not None
                       for start, end in spans
                       for at in found[bisect.bisect_left(found, start):
                                       bisect.bisect_left(found, end)])
        if sum(end - start for start, end in spans) > _DENSE * len(text):
            return rx.search(text) is not None
        return any(rx.search(text, start, end) is not None for start, end in spans)
