"""What redaction writes in a secret's place, and how it is found again: :func:`mask` (a long
secret keeps its ends, a short one becomes three stars), :func:`hidden` (a value masked unless it
is a mask already or a placeholder, so that redaction is idempotent), the private-key mark,
:func:`holds_mask` (for an export's provenance); and the form a text takes inside a JSON
string, where tool-call arguments hold it."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

from stages.log.gitleaks.scan import vendor_token_allowed
from stages.log.gitleaks.shapes import misfits_vendor
from stages.log.redact.patterns import TOKEN_HINTS

# Values that are no secret although a secret's name precedes them.
_PLACEHOLDERS = frozenset({"null", "none", "true", "false", "undefined", "empty", "required",
                           "optional", "changeme", "redacted", "xxxx", "****", "<redacted>",
                           "basic", "bearer", "token", "digest"})
# Exactly what mask() writes: a value of another shape with dots in it is a value to hide.
MASKED = re.compile(r"\*\*\*|.{6}\.\.\..{4}", re.S)  # a kept end may be a line break


def mask(secret: str) -> str:
    """Keep a little of a long token so a person can tell keys apart; hide short ones whole."""
    if len(secret) < 18:
        return "***"
    return f"{secret[:6]}...{secret[-4:]}"


# What mask() and the private-key substitution leave in a text. A mask replaced a whole value,
# so it stands where a value starts and ends: after no token character (or after a JSON escape
# such as \n, inside JSON-escaped tool arguments) and before none. Three stars glued to a word or
# to more stars are Markdown emphasis.
_TOKEN_CHARS = r"A-Za-z0-9_\-+/="
_STARTS = r"(?:(?<![A-Za-z0-9_\-+.\\])|(?<=\\[nrt]))"  # and after "=" or "/", as a value does
_SHORT_MASK = re.compile(r"(?:(?<![\w*])|(?<=\\[nrt]))\*\*\*(?![\w*])")
# After a secret's name (a field, a header, an assignment), a mask that reads as prose is one.
_NAMED = (r"(?i:(?:key|secret|token|pass\w*|pwd|credentials?|auth\w*)\\?[\"']?[ \t]*[:=][ \t]*"
          r"\\?[\"']?|(?:bearer|basic)[ \t]+)")
_LONG_MASK = re.compile(
    "(" + _NAMED + ")?" + _STARTS + r"([" + _TOKEN_CHARS + r".]{5}[" + _TOKEN_CHARS + r"])\.\.\."
    r"([" + _TOKEN_CHARS + r"][" + _TOKEN_CHARS + r".]{3})(?![" + _TOKEN_CHARS + r"])")
# A kept head and tail that each are a word (hyphens within, or in Markdown's underscores), a
# number or dotted are prose ("Please...wait", "e-mail...sent", "_wait_...1000", "v1.2.3...v2.0"),
# unless a secret's name comes before them or the head starts as a known kind of token does
# (AKIAIO...MPLE).
_PROSE = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*|_[A-Za-z]+_|[0-9]+|.*\..*")
PRIVATE_KEY_MARK = "[REDACTED PRIVATE KEY]"


def holds_mask(text: str, known: Iterable[str] = ()) -> bool:
    """Whether ``text`` holds what redaction leaves where it hid a secret: the mask of one of
    the ``known`` secrets (as it is, or as it stands inside a JSON string), or a mask of the
    shapes :func:`mask` writes where redaction writes them, told from ordinary text with dots
    and stars as above. A long secret whose kept head and tail read as prose is found only when
    it is known."""
    if PRIVATE_KEY_MARK in text:
        return True
    for secret in known:
        masked = mask(secret)  # three stars, for a short one, are told by their place below
        if masked != "***" and (masked in text or in_json(masked) in text):
            return True
    if "***" in text and _SHORT_MASK.search(text):
        return True
    return "..." in text and any(
        named or head.lower().startswith(TOKEN_HINTS)
        or not (_PROSE.fullmatch(head) and _PROSE.fullmatch(tail))
        for named, head, tail in _LONG_MASK.findall(text))


def scrub_surrogates(text: str) -> str:
    """Lone UTF-16 surrogates (half an emoji, legal in JSON) cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


# Eight of one character in a row: a placeholder (``ghp_xxxx...``, ``glc_1111...``), which a
# random key of any alphabet practically never holds; or a name in capitals (``YOUR_TOKEN``).
_FILLER = re.compile(r"([^.\s])\1{7}|^[A-Z]+(?:_[A-Z]+)+$")
def hidden(value: str) -> str:
    """``value`` masked, unless it is already a mask or a placeholder (so redaction is
    idempotent and ``password: null`` stays readable)."""
    if (MASKED.fullmatch(value) or value.lower() in _PLACEHOLDERS
            or _FILLER.search(value) or vendor_token_allowed(value) or misfits_vendor(value)):
        return value
    return mask(value)


@functools.lru_cache(maxsize=256)  # asked for every known secret on every redacted string
def in_json(text: str) -> str:
    """``text`` as it stands inside a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def unescaped(text: str) -> str:
    """The text a JSON string's inside stands for (itself when it is not one)."""
    try:
        value = json.loads(f'"{text}"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text
