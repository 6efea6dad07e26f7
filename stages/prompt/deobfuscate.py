"""The readings of a text that a scan must see besides the text itself (rules 7).

Payloads hide from patterns by encoding (base64, hex, URL escapes) and by characters that look
like or vanish into others (zero-width joiners, Cyrillic and Greek letters shaped like Latin
ones, fullwidth forms). Each reading undoes one trick; the scanner runs its patterns over
every reading and reports that the text was obfuscated when only a reading hits. All of it is
pure, bounded and deterministic: runs are capped in number and size.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from urllib.parse import unquote_plus

from stages.prompt.injection import INVISIBLE

_MAX_RUNS = 32  # decoded runs per text: enough for a payload, bounded for a huge output
_MAX_RUN = 20_000
# Matches begin where a run begins (the look-behind only spares the scanner from trying each
# position inside a run of ordinary words: it finds the same runs).
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}")
_SHORTEST = 20  # characters of a base64 run (a hex run of 28 or more is one too)
# ASCII with every byte that cannot be in a base64 run made a space.
_RUNS = bytes(b if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "+/_-") else 0x20
              for b in range(256))
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){14,}(?![0-9A-Fa-f])")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_INVISIBLE = {ord(ch): None for ch in INVISIBLE} | dict.fromkeys(range(0xE0000, 0xE0080))

# Letters of other scripts drawn like Latin ones (Unicode's confusables, the common subset).
_HOMOGLYPHS = str.maketrans(
    "АВЕЅІЈКМНОРСТХУаеѕіјорсхуԁһӏʏΑΒΕΖΗΙΚΜΝΟΡΤΥΧαοιρνϲ",  # noqa: RUF001
    "ABESIJKMHOPCTXYaesijopcxydhlyABEZHIKMNOPTYXaoipvc",
)


def _printable(raw: bytes) -> str | None:
    """``raw`` as text when it reads as words (mostly printable, with spaces), else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or " " not in text:
        return None
    shown = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    return text if shown >= 0.95 * len(text) else None


def _base64(run: str) -> str | None:
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _runs(text: str) -> list[str]:
    """The base64 runs of ``text`` in order (a run's ``=`` padding does not change what it
    decodes to). For ASCII text, the words of its base64 characters, split in C: no regex
    walks the text."""
    if text.isascii():
        return [run.decode("ascii") for run in text.encode("ascii").translate(_RUNS).split()
                if len(run) >= _SHORTEST]
    return [match.group() for match in _BASE64.finditer(text)]


def _decoded(text: str) -> list[str]:
    found: list[str] = []
    runs = _runs(text)
    for run in runs[:_MAX_RUNS]:
        plain = _base64(run[:_MAX_RUN])
        if plain is not None:
            found.append(plain)
    # A hex run is made of base64 characters too: it lies inside a base64 run (of 20 or more),
    # so hex is looked for there only, not by a second pass over the whole text.
    hexes = (match.group() for run in runs for match in _HEX.finditer(run))
    for n, run in enumerate(hexes):
        if n >= _MAX_RUNS:
            break
        plain = _printable(bytes.fromhex(run[:_MAX_RUN]))
        if plain is not None:
            found.append(plain)
    return found


def readings(text: str) -> tuple[str, ...]:
    """The other readings of ``text`` (none when it hides nothing): folded (compatibility
    forms, invisible characters dropped, homoglyphs made Latin), URL-unescaped, and the
    decoded base64 and hex runs."""
    out: list[str] = []
    # ASCII has no compatibility forms, invisible characters or homoglyphs: it folds to itself.
    folded = text if text.isascii() else (
        unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_HOMOGLYPHS))
    if folded != text:
        out.append(folded)
    if len(_PERCENT.findall(text, 0, _MAX_RUN * 4)) >= 3:
        out.append(unquote_plus(text))
    out.extend(_decoded(text))
    return tuple(out)
