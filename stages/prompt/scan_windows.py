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

import re
from collections import defaultdict

_WORD = re.compile(r"\w+")
_DENSE = 0.5  # windows covering more than this share of the text: one full search is cheaper


class Windows:
    """One text, searched by many patterns: where each word anchor occurs is found in one
    pass over the text's words, for all the patterns' anchors (``prefixes``)."""

    def __init__(self, text: str, prefixes: frozenset[str]) -> None:
        self.text = text
        folded = text.casefold()
        self.folded = folded if len(folded) == len(text) else None
        self._prefixes = prefixes
        self._longest = max(map(len, prefixes), default=0)
        self._starts: dict[str, list[int]] | None = None

    def _anchored(self) -> dict[str, list[int]]:
        """Where the words starting with each anchor start."""
        if self._starts is None:
            words: dict[str, list[int]] = defaultdict(list)
            for match in _WORD.finditer(self.folded or ""):
                words[match.group()].append(match.start())
            starts: dict[str, list[int]] = defaultdict(list)
            for word, at in words.items():
                for size in range(1, min(len(word), self._longest) + 1):
                    if word[:size] in self._prefixes:
                        starts[word[:size]].extend(at)
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

    def search(self, rx: re.Pattern[str], anchors: tuple[str, ...], reach: int,
               also: tuple[str, ...] = ()) -> bool:
        """Whether ``rx`` matches; ``also`` is a second set of anchors every match holds one
        of too (the sparser set's windows are searched)."""
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
        if sum(end - start for start, end in spans) > _DENSE * len(text):
            return rx.search(text) is not None
        return any(rx.search(text, start, end) is not None for start, end in spans)
