"""Joining the parts of an answer cut at the output limit (rules 6).

A model asked in a new message to go on where its reply stopped begins that message without
the space the next word would have carried had the reply not been cut, so ``"".join`` glued
``"...and the quick brown"`` and ``"fox jumps"`` together. The seam between two parts gets a
space only where the text itself shows a word boundary; a part cut inside a word
(``"bro"`` + ``"wn"``) is joined as it is:

* whitespace on either side of the seam, or an empty part: nothing is added;
* inside code (an open ````` fence, or an odd number of backticks on the seam's line): nothing
  is added, since code must stay byte for byte what the model wrote;
* after ``!`` or ``?`` (and closing quotes or brackets) before a letter, after ``.`` before a
  capital, after ``,``, ``;`` or ``:`` before a letter: a space (``3.`` + ``14``, ``main.`` +
  ``py``, ``host:`` + ``8080`` stay joined);
* after an all-lower-case word before a capital (``done`` + ``Then``): a space (``getUser`` +
  ``Name``, ``HT`` + ``TP`` stay joined);
* letters on both sides otherwise: the text cannot tell ``brown|fox`` from ``bro|wn``, so it is
  kept as written; the continuation prompt of rules 6 (``LENGTH_PROMPT``) asks the model to
  begin with a space when it stopped between two words, which settles that case.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["join_parts", "needs_space"]

_CLOSERS = "\"')]}\u201d\u2019*_"
_SENTENCE_END = "!?"
_CLAUSE_END = ",;:"


def join_parts(parts: Sequence[str]) -> str:
    """The parts of one answer, oldest first, as one text with the seams spaced."""
    text = ""
    for part in parts:
        text += (" " if needs_space(text, part) else "") + part
    return text


def needs_space(before: str, after: str) -> bool:
    """Whether a space goes between ``before`` (the answer so far) and ``after`` (the next
    part): only where the text shows a word boundary (see the module doc)."""
    if not before or not after or before[-1].isspace() or after[0].isspace():
        return False
    if before.count("```") % 2 or before.rsplit("\n", 1)[-1].count("`") % 2:
        return False
    first = after[0]
    end = before.rstrip(_CLOSERS)
    if end and end[-1] in _SENTENCE_END:
        return first.isalpha()
    if end and end[-1] == ".":
        return first.isupper()
    if before[-1] in _CLAUSE_END:
        return first.isalpha()
    if first.isupper():
        return _lower_word_ends(before)
    return False


def _lower_word_ends(text: str) -> bool:
    """``text`` ends in a whole word of lower-case letters (``done``, not ``getUser``)."""
    start = len(text)
    while start and text[start - 1].isalpha() and text[start - 1].islower():
        start -= 1
    return start < len(text) and (start == 0 or not text[start - 1].isalpha())
