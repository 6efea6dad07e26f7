"""One text redacted, :func:`redact`: known secrets, private keys, gitleaks' rules, then the
substitutions that hide only a value (a ``NAME=value``'s, a header's, a JSON field's, a URL's
password) or a vendor's token, each run only where the one-pass prefilter finds its hints; a
JSON string with escapes is redacted as the text it stands for."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from stages.log.command_secrets import hide_in_commands
from stages.log.gated import on_gated_lines
from stages.log.gitleaks.prefilter import Literals
from stages.log.gitleaks.scan import find_secrets, keywords, named_value_allowed
from stages.log.gitleaks.shapes import misfits_vendor
from stages.log.named_values import is_code
from stages.log.redact.masks import (
    MASKED,
    PRIVATE_KEY_MARK,
    hidden,
    in_json,
    mask,
    scrub_surrogates,
    unescaped,
)
from stages.log.redact.patterns import (
    ASSIGN,
    CODE_NAME,
    COLON,
    GATED_AUTH,
    GATED_BEARER,
    GATED_KEY_HEADER,
    GATED_TELEGRAM,
    GATED_TOKEN,
    GATED_TWILIO,
    GATED_USERINFO,
    JSON_FIELD,
    NAME_HINTS,
    NAMED_GATE,
    PRIVATE_KEY,
    TOKEN_HINTS,
    WEBHOOK,
)

# A key's body holds this many base64 characters at least; a shorter one is an example
# (``-----BEGIN PRIVATE KEY-----\nanything\n-----END...``) or a format's description.
_KEY_BODY = 16
_BASE64 = re.compile(r"[A-Za-z0-9+/=]")


def _private_key(match: re.Match[str]) -> str:
    block = match.group()
    body = block[block.index("-----", 10) + 5:]
    body = body[:body.find("-----END")] if "-----END" in body else body
    body = re.sub(r"(?:Proc-Type|DEK-Info):[^\r\n\\]*|\\[nr]", "", body)
    return PRIVATE_KEY_MARK if len(_BASE64.findall(body)) >= _KEY_BODY else block


# An unquoted value may hold brackets (``getpass()``), so one closing after it is read as its
# own; a closing bracket it never opened closes the call or the note it stands in instead
# (``f(password=Hunt3r22)``), and so does a sentence's mark after that bracket.
_OPENING = {")": "(", "]": "[", "}": "{", ">": "<"}
_CLOSED_TAIL = re.compile(r"[)\]}>]+[.;:!?]*\Z")


def _without_closing(value: str) -> tuple[str, str]:
    """``value`` split before the brackets at its end that it did not open (and what follows
    them)."""
    tail = _CLOSED_TAIL.search(value)
    if tail is None:
        return value, ""
    end = tail.start() + len(tail.group().rstrip(".;:!?"))
    cut = end
    while cut > tail.start() and (value.count(value[cut - 1], 0, cut)
                                  > value.count(_OPENING[value[cut - 1]], 0, cut)):
        cut -= 1
    return (value, "") if cut == end else (value[:cut], value[cut:])


def _named(match: re.Match[str]) -> str:
    """A ``NAME=value`` or ``name: value`` match with only the value hidden."""
    *before, quote, value = match.groups(default="")
    after = ""
    if not quote:
        value, after = _without_closing(value)
    name = "".join(before)
    following = after[:1] or match.string[match.end():match.end() + 1]
    if is_code(value, quoted=bool(quote), name=name, after=following) or named_value_allowed(
            value, match.group(0), match.string):
        return match.group(0)
    start, end = match.span(match.re.groups)  # the value's; a quote may close it, or none
    text = match.string
    return text[match.start():start] + hidden(value) + after + text[end:match.end()]


def _shape(match: re.Match[str]) -> str:
    """A ``prefix secret [suffix]`` match with only the secret hidden."""
    groups = match.groups()
    return groups[0] + hidden(groups[1]) + "".join(groups[2:])


# (pattern, replacement, hints): a pattern runs only when its lower-cased text holds a hint.
_SUBSTITUTIONS: tuple[tuple[Any, Any, tuple[str, ...]], ...] = (
    (GATED_USERINFO, lambda m: m.group(1) + "***" + m.group(3), ("://",)),
    (WEBHOOK, _shape, ("hooks.slack", "discord", "webhook")),
    (GATED_TOKEN,
     lambda m: m.group(0) if CODE_NAME.fullmatch(m.group(0)) else hidden(m.group(0)),
     TOKEN_HINTS),
    (GATED_BEARER, _shape, ("bearer",)),
    (GATED_AUTH, _shape, ("authorization",)),
    (GATED_KEY_HEADER, _shape, ("-key", "-token")),
    (JSON_FIELD, lambda m: m.group(1) + in_json(hidden(unescaped(m.group(2)))) + m.group(3),
     NAME_HINTS),
)


def _names_in_lines(text: str) -> str:
    """``NAME=value`` and ``name: value`` with a secret's name, line by line: only the lines
    naming a secret before an operator pay for the (slower) patterns."""
    return on_gated_lines(NAMED_GATE, _names_in_line, text)


def _names_in_line(line: str) -> str:
    if "=" in line:
        line = ASSIGN.sub(_named, line)
    if ":" in line:
        line = COLON.sub(_named, line)
    return line


# The same, each hint tuple as a set: prose holds none of them, and a set says so in one step
# where a search of the tuple tried all 77 token prefixes every time.
_NAME_HINT_SET = frozenset(NAME_HINTS)
_SUBSTITUTION_SETS = tuple((pattern, replacement, frozenset(hints))
                           for pattern, replacement, hints in _SUBSTITUTIONS)
_ALL_HINTS = _NAME_HINT_SET.union(*(hints for _, _, hints in _SUBSTITUTION_SETS))


@functools.cache
def _literals() -> Literals:
    """The hints of the patterns below and gitleaks' keywords, found together."""
    return Literals({*NAME_HINTS, *(h for _, _, hints in _SUBSTITUTIONS for h in hints),
                     *keywords()})


# A URL found whole (a webhook): its scheme, host and the path's plain words stay readable.
_URL_HEAD = re.compile(r"[a-z][a-z0-9+.\-]*://[^/\s]+/(?:[A-Za-z]+/)*", re.I)


def _found(value: str) -> str:
    """A secret gitleaks found masked (its rule judged it already), a URL's head kept."""
    head = _URL_HEAD.match(value)
    if head is not None and head.end() < len(value):
        return head.group() + _found(value[head.end():])
    return value if MASKED.fullmatch(value) else mask(value)


def _masked_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span hidden (a span that is a mask already stays as it is)."""
    if not spans:
        return text
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces += (text[last:start], _found(text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def redact(text: str, known: Iterable[str] = ()) -> str:
    if not text.isascii():
        text = scrub_surrogates(text)
    if "\\" in text:  # JSON text with escapes: its strings first, as the text they stand for
        text = _JSON_STRING.sub(lambda m: _json_string(m, known), text)
    if known:  # an empty collection hides nothing; a generator is truthy, and read
        text = _known_hidden(text, known)
    if "PRIVATE KEY" in text:  # first: a key's lines hold what other patterns would take
        text = PRIVATE_KEY.sub(_private_key, text)
    # Every hint and keyword below, found in one pass of the text. Most text (prose) holds
    # none, and then no rule and no substitution below can apply.
    words = _literals().present(text)
    if words:
        text = _by_words(text, words)
    if "SK" in text:
        text = GATED_TWILIO.sub(lambda m: hidden(m.group(0)), text)
    if ":" in text:
        text = GATED_TELEGRAM.sub(
            lambda m: m.group(0).replace(m.group(1), hidden(m.group(1))), text)
    return hide_in_commands(text, hidden)


def _by_words(text: str, words: frozenset[str]) -> str:
    """``text`` through gitleaks' rules and the substitutions whose hints ``words`` holds."""
    # A token the generic rule found by its randomness alone, whose prefix names a vendor whose
    # rule does not find it, is not that vendor's key (``xoxp-1234567890``).
    spans = [(start, end) for start, end in find_secrets(text, words)
             if not misfits_vendor(text[start:end])]
    if spans:
        text = _masked_spans(text, spans)
        words = _literals().present(text)
    # A secret's name says where its value ends; a token's shape only guesses, and a guess
    # that runs over the name (``Bearer NAME="value"``) would leave the value for no pattern.
    if not words & _ALL_HINTS:  # a rule's keyword only (``api`` in "capital")
        return text
    if not _NAME_HINT_SET.isdisjoint(words):
        text = _names_in_lines(text)
    for pattern, replacement, hints in _SUBSTITUTION_SETS:
        if not hints.isdisjoint(words):
            text = pattern.sub(replacement, text)
    return text


def _known_hidden(text: str, known: Iterable[str]) -> str:
    """``text`` with every known secret masked, however short: a short one only where it
    stands alone (not inside a longer word), where it is the key and not a part of a word."""
    for secret in known:
        if not secret:
            continue
        # Inside a JSON string (tool-call arguments and results are JSON text) a secret's
        # quotes and backslashes are escaped; its mask there is escaped alike. That form
        # goes first: the plain one can be a part of it.
        escaped = in_json(secret)
        forms = [(escaped, in_json(mask(secret)))] if escaped != secret else []
        for form, masked in [*forms, (secret, mask(secret))]:
            if form not in text:
                continue
            if len(secret) >= _SHORT_KNOWN:
                text = text.replace(form, masked)
            else:
                text = re.sub(r"(?<![A-Za-z0-9])" + re.escape(form) + r"(?![A-Za-z0-9])",
                              masked.replace("\\", "\\\\"), text)
    return text


# A known secret this short may also be an ordinary word's part: it is masked where it stands
# alone only.
_SHORT_KNOWN = 8


_JSON_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"')


def _json_string(match: re.Match[str], known: Iterable[str]) -> str:
    """A JSON string of the text redacted as the text it stands for. Its escapes hide what the
    patterns look for (a secret's name on the line after an escaped line break, quotes of JSON
    inside JSON); one without escapes is its own text, which the patterns saw already."""
    inner = match.group(1)
    value = unescaped(inner) if "\\" in inner else inner
    if value is inner:
        return match.group(0)
    clean = redact(value, known)
    return match.group(0) if clean == value else f'"{in_json(clean)}"'
