"""A Python pattern run only on the lines an RE2 gate finds something in.

Redaction's own patterns need what RE2 lacks (look-behind, possessive and conditional groups),
and Python's ``re`` tries them at every position of a text: a megabyte of source code costs
a tenth of a second per pattern. Each gets a gate, a looser RE2 pattern that matches wherever
the Python pattern can (on one line: none of them crosses a line break), which RE2 scans for in
linear time; the Python pattern then runs on those lines only, and ordinary text is read once.
Replacing line by line is replacing in the whole text: at a line's edges the patterns' look-
arounds and word boundaries see a line break there and nothing here, and treat both alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import re2


class Gated:
    def __init__(self, pattern: re.Pattern[str], gate: str) -> None:
        self.pattern = pattern
        self.gate: Any = re2.compile(gate)

    def sub(self, replacement: Any, text: str) -> str:
        return on_gated_lines(self.gate, lambda line: self.pattern.sub(replacement, line), text)


def on_gated_lines(gate: Any, change: Callable[[str], str], text: str) -> str:
    """``text`` with each line that ``gate`` (an RE2 pattern matching within a line) finds
    something in passed through ``change``."""
    if gate.search(_subject(text)) is None:  # most texts, in one call
        return text
    pieces: list[str] = []
    last = 0
    for block_start, block_end in _blocks(text):
        for at in _starts(gate, text[block_start:block_end]):
            at += block_start
            if at < last:  # on a line already changed
                continue
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            pieces += (text[last:start], change(text[start:end]))
            last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


# The RE2 binding copies the subject on every match it looks for, and turns byte offsets into
# characters by reading from the previous match: a megabyte costs per match what this costs.
_BLOCK = 1 << 15


def _blocks(text: str) -> list[tuple[int, int]]:
    """``text`` cut at line breaks into stretches of about ``_BLOCK`` characters (a line
    longer than that is one stretch)."""
    blocks = []
    start = 0
    while start < len(text):
        cut = text.find("\n", start + _BLOCK)
        end = len(text) if cut < 0 else cut + 1
        blocks.append((start, end))
        start = end
    return blocks


def _starts(gate: Any, block: str) -> list[int]:
    """Where ``gate`` matches in ``block``."""
    return [match.start() for match in gate.finditer(_subject(block))]


def _subject(text: str) -> str | bytes:
    """ASCII as bytes, whose offsets are the characters' (the binding need not convert)."""
    return text.encode("ascii") if text.isascii() else text
