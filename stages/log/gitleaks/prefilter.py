"""Which of many literals a text holds, in one pass: gitleaks' keyword prefilter (a rule runs
only when one of its keywords occurs in the lower-cased text) and redaction's hints, as one
RE2 set of case-insensitive literals. RE2 matches the whole set in a single linear scan in C++,
so text that holds none of them (most prose) is read once and never by a rule's pattern."""

from __future__ import annotations

from collections.abc import Iterable

import re2


class Literals:
    """A fixed set of lower-case literals, found case-insensitively."""

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = tuple(sorted({w.lower() for w in literals if w}))
        self._literal = self.literals.__getitem__
        options = re2.Options()
        options.case_sensitive = False
        # The set's automaton has about as many states as the literals have characters (a few
        # thousand): far below this, so the one-pass scan never runs out of memory.
        options.max_mem = 64 << 20
        self._set = re2.Set.SearchSet(options)
        for literal in self.literals:
            self._set.Add(re2.escape(literal))
        self._set.Compile()

    def present(self, text: str) -> frozenset[str]:
        """The literals that occur in ``text`` (case aside)."""
        # Bytes: the binding's own conversion of a str costs a Python call more.
        found = self._set.Match(text.encode())  # None when there is none
        if found is None:
            return _NONE
        return frozenset(map(self._literal, found))


_NONE: frozenset[str] = frozenset()
