"""Text from a model or a tool, made safe to print: its control characters (escape sequences
that retitle the window, clear the screen, move the cursor, rewrite a line with a carriage
return) are shown escaped, ``\\x1b``, rather than obeyed, and so are Unicode's bidirectional
embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069, shown ``\\u202e``), which
would show the text around them reordered. Newlines and tabs stay; a CRLF is a
newline. The same on a terminal and in a pipe, where the text may still reach one (``cat``);
the event log keeps the text as it came."""

from __future__ import annotations

import re

__all__ = ["printable"]

# Unicode's Cc: C0 and C1 controls and DEL, less tab and newline; and the bidi controls that
# reorder what follows them (embeddings and overrides, isolates).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    return _CONTROL.sub(_escaped, text.replace("\r\n", "\n"))
