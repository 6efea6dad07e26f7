"""Secret redaction, applied to everything that enters the event log or a log line.

Known secrets (the keys mibyan was configured with) are replaced wherever they appear; common
credential shapes are masked too: vendor key prefixes (OpenAI, Anthropic, GitHub, GitLab,
Slack, Google, AWS, Stripe, SendGrid, Twilio, Hugging Face, ...), Slack and Discord webhooks,
Telegram bot tokens, ``Authorization`` headers of any scheme and API-key headers,
``KEY=value`` and ``password: value`` assignments, JSON secret fields, PEM and PGP private keys
(even cut off), passwords in URLs and connection strings, Azure connection strings, and JWTs.

Redaction is idempotent: a masked value is never masked again. :func:`holds_mask` finds what it
left behind (for an export's provenance), told from ordinary text with dots and stars.
"""

from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Callable, Iterable
from typing import Any, cast

import attrs
import re2

from stages.log.command_secrets import hide_in_commands
from stages.log.content_parts import Content, ImagePart, TextPart
from stages.log.events import REDACTED_FIELDS, Event
from stages.log.gated import Gated, on_gated_lines
from stages.log.gitleaks.prefilter import Literals
from stages.log.gitleaks.scan import (
    find_secrets,
    keywords,
    named_value_allowed,
    vendor_token_allowed,
)
from stages.log.gitleaks.shapes import misfits_vendor
from stages.log.messages import Message
from stages.log.named_values import is_code
from stages.log.reasoning_parts import ReasoningPart
from stages.log.tokens import ReplyTokens
from stages.log.tool_specs import ToolOutcome

_PREFIXES = (
    r"sk-[A-Za-z0-9_\-]{8,}", r"gh[pousr]_[A-Za-z0-9]{16,}", r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_\-]{20,}", r"gl(?:ptt|dt|rt|cbt|imt|agent|oas|ft)-[A-Za-z0-9_\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{30,}",
    r"ya29\.[0-9A-Za-z_\-]{20,}", r"GOCSPX-[A-Za-z0-9_\-]{20,}",
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}",
    r"hf_[A-Za-z0-9]{20,}", r"gsk_[A-Za-z0-9]{20,}", r"xai-[A-Za-z0-9]{20,}",
    r"r8_[A-Za-z0-9]{20,}", r"npm_[A-Za-z0-9]{20,}", r"pypi-[A-Za-z0-9_\-]{20,}",
    r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", r"whsec_[A-Za-z0-9]{20,}",
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    r"pplx-[A-Za-z0-9]{20,}", r"fc-[a-f0-9]{32}", r"bb_live_[A-Za-z0-9_\-]{16,}",
    r"gAAAA[A-Za-z0-9_\-=]{40,}", r"dop_v1_[a-f0-9]{64}", r"doo_v1_[a-f0-9]{64}",
    r"tvly-[A-Za-z0-9_\-]{20,}", r"syt_[A-Za-z0-9_\-]{20,}", r"hsk-[A-Za-z0-9_\-]{20,}",
    r"brv_[A-Za-z0-9_\-]{20,}", r"ntn_[A-Za-z0-9]{30,}", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
    r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{20,}", r"key-[a-f0-9]{32}", r"[a-f0-9]{32}-us[0-9]{1,2}",
    r"dapi[a-f0-9]{32}", r"figd_[A-Za-z0-9_\-]{30,}", r"lin_api_[A-Za-z0-9]{30,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]+)?",
)
# Where a token may start: not inside a word, or right after a JSON escape of a space or a
# line break (``\n``; tool-call arguments are JSON text), whose letter is no word of the text.
_AFTER_ESCAPE = r"(?<=\\[nrtbf])"
_TOKEN_START = r"(?:(?<![A-Za-z0-9_\-])|" + _AFTER_ESCAPE + ")"
# A token ends where the word does: ``hf_servingcell..._h_prio`` is a name in code.
_TOKEN = re.compile(_TOKEN_START + "(?:" + "|".join(_PREFIXES) + r")(?![A-Za-z0-9_\-])")
# A vendor's prefix followed by capitalised words is a name in code
# (``hf_requiredCharacteristicTypes``); a random token's capitals are not followed by words.
_CODE_NAME = re.compile(r"[A-Za-z0-9]+[_\-.](?:[a-z]{2,})?(?:[A-Z][a-z]{2,}){2,}")
_TWILIO = re.compile(_TOKEN_START + r"SK[0-9a-f]{32}")
_WEBHOOK = re.compile(
    r"(https://(?:hooks\.slack\.com/(?:services|workflows|triggers)|"
    r"(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks|[\w.-]+\.webhook\.office\.com/"
    r"webhookb2)/)([A-Za-z0-9_/@\-]{8,})")
_TELEGRAM = re.compile(r"(?:\b|" + _AFTER_ESCAPE + r")(?:bot)?(\d{8,10}:[A-Za-z0-9_\-]{30,})")
# Headers hold their value on their own line: the gaps are spaces and tabs, never a newline.
_BEARER = re.compile(r"(?i)(authorization[ \t]*[:=][ \t]*bearer[ \t]+|bearer[ \t]+)"
                     r"([A-Za-z0-9._~+/\-]{8,}=*)(?![\w:=])")
_AUTH = re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
                   r"(?:basic|token|digest|bot|apikey|sso-key|key)?[ \t]*)"
                   r"(?!bearer\b)([A-Za-z0-9._~+/\-:=]{6,})")
_KEY_HEADER = re.compile(r"(?i)(\b(?:x-api-key|api-key|x-auth-token|private-token|"
                         r"x-goog-api-key|ocp-apim-subscription-key|x-functions-key)"
                         r"[\"']?[ \t]*:[ \t]*[\"']?)([A-Za-z0-9._~+/\-=]{8,})")
_SECRET_NAME = (r"(?:API_?KEY|APIKEY|ACCESS_?KEY|ACCOUNT_?KEY|SHARED_?ACCESS_?KEY|PRIVATE_?KEY|"
                r"SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|PWD|CREDENTIAL|AUTH|"
                # a personal access token (AZURE_DEVOPS_EXT_PAT), not a PATH
                r"_PAT\b)")
# An ``&`` ends the value where a URL query's or a form's next parameter follows (``&next=``,
# HTML's ``&amp;``); elsewhere it is the value's own (``password=Tr0ub4dor&3`` in prose or a
# shell command), and stopping there would leave the password's tail readable.
_VALUE_AMPERSAND = r"&(?![\w.%\[\]\-]+=|amp;)"
# A quoted value ends at its quote only: the marks that end an unquoted one (``,``, ``;``,
# ``}``) are the password's own there; or where its line does, when the text lost the quote
# (an output cut off). The patterns are run on one line at a time (_names_in_lines). A
# backslash ends it still: in JSON text an escape is the JSON string's, redacted unescaped.
def _quoted_value(group: int) -> str:
    return rf"(?:(?!\{group})[^\s\\])"


def _quote_closed(group: int) -> str:
    return rf"(?:\{group}|(?=\s*\Z))"


_ASSIGN = re.compile(
    r"(?i)\b([A-Z0-9_.\-]*" + _SECRET_NAME + r"[A-Z0-9_]*\s*=\s*)(['\"])?"
    r"((?(2)" + _quoted_value(2) + r"|(?:[^\s'\";&,\\]|" + _VALUE_AMPERSAND + r")){4,})"
    r"(?(2)" + _quote_closed(2) + ")")
_COLON = re.compile(
    # After anything but a name's own characters: a line number (read_file's "4|", grep's
    # "file:4:"), a quote, a bracket, a prompt's ">".
    # A JSON key closes its quote before the colon ("SecretAccessKey": "...").
    r"(?i)(^|[^A-Z0-9_.\-])([A-Z0-9_.\-]*" + _SECRET_NAME + r"[A-Z0-9_]*[\"']?\s*:\s*)"
    # An unquoted value is no other name: "password: password: x" hides x.
    r"(['\"])?((?(3)" + _quoted_value(3) + r"|[^\s'\",}\\]){4,}+)"
    r"(?(3)" + _quote_closed(3) + r"|(?<!:)(?!:))", re.M)
_JSON_FIELD = re.compile(
    r"(?i)(\"(?:api_?key|apikey|x-api-key|token|secret|password|passwd|passphrase|access_token|"
    r"refresh_token|id_token|auth_token|bearer|client_secret|secret_key|access_key|"
    r"private_key|credentials?)\"\s*:\s*\")((?:[^\"\\]|\\.){4,})(\")")
# Credentials in a URL's userinfo (``user:pa@ss@host`` after the scheme): up to the
# authority's last '@'.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]*:)([^\s/]+)(@)(?=[^\s@/]*)")
_BREAK = r"\r?\n|(?:\\r)?\\n"
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    # Cut off: its headers (an encrypted key's Proc-Type and DEK-Info) and whole base64 lines,
    # their breaks real or escaped (in JSON text, in a repr); so it ends where other text
    # starts (a secret's name on the next line, the quote closing a string).
    r"|(?:(?:" + _BREAK + r")+(?:(?:Proc-Type|DEK-Info):[^\r\n\\]*"
    r"|[A-Za-z0-9+/=]+(?=[\s\"'\\]|$)))*)", re.S)

# Values that are no secret although a secret's name precedes them.
_PLACEHOLDERS = frozenset({"null", "none", "true", "false", "undefined", "empty", "required",
                           "optional", "changeme", "redacted", "xxxx", "****", "<redacted>",
                           "basic", "bearer", "token", "digest"})
# Exactly what mask() writes: a value of another shape with dots in it is a value to hide.
_MASKED = re.compile(r"\*\*\*|.{6}\.\.\..{4}", re.S)  # a kept end may be a line break

_TOKEN_HINTS = ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glp",
                "glft-", "gldt-", "glrt-", "glcbt-", "glimt-", "glagent-", "gloas-", "xox",
                "xapp-", "aiza", "ya29.", "gocspx-", "akia", "asia", "agpa", "aida", "aroa",
                "anpa", "hf_", "gsk_", "xai-", "r8_", "npm_", "pypi-", "whsec_", "sg.", "pplx-",
                "fc-", "bb_live_",
                "gaaaa", "_v1_", "tvly-", "syt_", "hsk-", "brv_", "ntn_", "shp", "sq0", "key-",
                "-us", "dapi", "figd_", "lin_api_", "eyj")
_NAME_HINTS = ("key", "secret", "token", "pass", "pwd", "credential", "auth", "_pat")

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
_PRIVATE_KEY_MARK = "[REDACTED PRIVATE KEY]"


# A key's body holds this many base64 characters at least; a shorter one is an example
# (``-----BEGIN PRIVATE KEY-----\nanything\n-----END...``) or a format's description.
_KEY_BODY = 16
_BASE64 = re.compile(r"[A-Za-z0-9+/=]")


def _private_key(match: re.Match[str]) -> str:
    block = match.group()
    body = block[block.index("-----", 10) + 5:]
    body = body[:body.find("-----END")] if "-----END" in body else body
    body = re.sub(r"(?:Proc-Type|DEK-Info):[^\r\n\\]*|\\[nr]", "", body)
    return _PRIVATE_KEY_MARK if len(_BASE64.findall(body)) >= _KEY_BODY else block


def holds_mask(text: str, known: Iterable[str] = ()) -> bool:
    """Whether ``text`` holds what redaction leaves where it hid a secret: the mask of one of
    the ``known`` secrets (as it is, or as it stands inside a JSON string), or a mask of the
    shapes :func:`mask` writes where redaction writes them, told from ordinary text with dots
    and stars as above. A long secret whose kept head and tail read as prose is found only when
    it is known."""
    if _PRIVATE_KEY_MARK in text:
        return True
    for secret in known:
        masked = mask(secret)  # three stars, for a short one, are told by their place below
        if masked != "***" and (masked in text or _in_json(masked) in text):
            return True
    if "***" in text and _SHORT_MASK.search(text):
        return True
    return "..." in text and any(
        named or head.lower().startswith(_TOKEN_HINTS)
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
def _hidden(value: str) -> str:
    """``value`` masked, unless it is already a mask or a placeholder (so redaction is
    idempotent and ``password: null`` stays readable)."""
    if (_MASKED.fullmatch(value) or value.lower() in _PLACEHOLDERS
            or _FILLER.search(value) or vendor_token_allowed(value) or misfits_vendor(value)):
        return value
    return mask(value)


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
    return text[match.start():start] + _hidden(value) + after + text[end:match.end()]


def _shape(match: re.Match[str]) -> str:
    """A ``prefix secret [suffix]`` match with only the secret hidden."""
    groups = match.groups()
    return groups[0] + _hidden(groups[1]) + "".join(groups[2:])


@functools.lru_cache(maxsize=256)  # asked for every known secret on every redacted string
def _in_json(text: str) -> str:
    """``text`` as it stands inside a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _unescaped(text: str) -> str:
    """The text a JSON string's inside stands for (itself when it is not one)."""
    try:
        value = json.loads(f'"{text}"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text


# RE2 gates of the patterns above (stages.log.gated): looser, within a line.
_TOKEN_GATE = "(?:" + "|".join(_PREFIXES) + ")"
_GATED_TOKEN = Gated(_TOKEN, _TOKEN_GATE)
_GATED_USERINFO = Gated(_USERINFO, r"(?i)[a-z][a-z0-9+.\-]*://[^/\s:@]*:[^\s/]+@")
_GATED_BEARER = Gated(_BEARER, r"(?i)bearer[ \t]+[A-Za-z0-9._~+/\-]{8}")
_GATED_AUTH = Gated(_AUTH, r"(?i)authorization[\"']?[ \t]*[:=]")
_GATED_KEY_HEADER = Gated(_KEY_HEADER, r"(?i)(?:x-api-key|api-key|x-auth-token|private-token|"
                          r"x-goog-api-key|ocp-apim-subscription-key|x-functions-key)"
                          r"[\"']?[ \t]*:")
_GATED_TWILIO = Gated(_TWILIO, r"SK[0-9a-f]{32}")
_GATED_TELEGRAM = Gated(_TELEGRAM, r"\p{Nd}{8,10}:[A-Za-z0-9_\-]{30}")  # re\'s \d: any digit
# A line naming a secret with an operator after the name: where _ASSIGN and _COLON can match.
_NAMED_GATE = re2.compile(r"(?i)(?:key|secret|token|pass|pwd|credential|auth|_pat)[^\n]*?[:=]")

# (pattern, replacement, hints): a pattern runs only when its lower-cased text holds a hint.
_SUBSTITUTIONS: tuple[tuple[Any, Any, tuple[str, ...]], ...] = (
    (_GATED_USERINFO, lambda m: m.group(1) + "***" + m.group(3), ("://",)),
    (_WEBHOOK, _shape, ("hooks.slack", "discord", "webhook")),
    (_GATED_TOKEN,
     lambda m: m.group(0) if _CODE_NAME.fullmatch(m.group(0)) else _hidden(m.group(0)),
     _TOKEN_HINTS),
    (_GATED_BEARER, _shape, ("bearer",)),
    (_GATED_AUTH, _shape, ("authorization",)),
    (_GATED_KEY_HEADER, _shape, ("-key", "-token")),
    (_JSON_FIELD, lambda m: m.group(1) + _in_json(_hidden(_unescaped(m.group(2)))) + m.group(3),
     _NAME_HINTS),
)


def _names_in_lines(text: str) -> str:
    """``NAME=value`` and ``name: value`` with a secret's name, line by line: only the lines
    naming a secret before an operator pay for the (slower) patterns."""
    return on_gated_lines(_NAMED_GATE, _names_in_line, text)


def _names_in_line(line: str) -> str:
    if "=" in line:
        line = _ASSIGN.sub(_named, line)
    if ":" in line:
        line = _COLON.sub(_named, line)
    return line


# The same, each hint tuple as a set: prose holds none of them, and a set says so in one step
# where a search of the tuple tried all 77 token prefixes every time.
_NAME_HINT_SET = frozenset(_NAME_HINTS)
_SUBSTITUTION_SETS = tuple((pattern, replacement, frozenset(hints))
                           for pattern, replacement, hints in _SUBSTITUTIONS)
_ALL_HINTS = _NAME_HINT_SET.union(*(hints for _, _, hints in _SUBSTITUTION_SETS))


@functools.cache
def _literals() -> Literals:
    """The hints of the patterns below and gitleaks' keywords, found together."""
    return Literals({*_NAME_HINTS, *(h for _, _, hints in _SUBSTITUTIONS for h in hints),
                     *keywords()})


# A URL found whole (a webhook): its scheme, host and the path's plain words stay readable.
_URL_HEAD = re.compile(r"[a-z][a-z0-9+.\-]*://[^/\s]+/(?:[A-Za-z]+/)*", re.I)


def _found(value: str) -> str:
    """A secret gitleaks found masked (its rule judged it already), a URL's head kept."""
    head = _URL_HEAD.match(value)
    if head is not None and head.end() < len(value):
        return head.group() + _found(value[head.end():])
    return value if _MASKED.fullmatch(value) else mask(value)


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
        text = _PRIVATE_KEY.sub(_private_key, text)
    # Every hint and keyword below, found in one pass of the text. Most text (prose) holds
    # none, and then no rule and no substitution below can apply.
    words = _literals().present(text)
    if words:
        text = _by_words(text, words)
    if "SK" in text:
        text = _GATED_TWILIO.sub(lambda m: _hidden(m.group(0)), text)
    if ":" in text:
        text = _GATED_TELEGRAM.sub(
            lambda m: m.group(0).replace(m.group(1), _hidden(m.group(1))), text)
    return hide_in_commands(text, _hidden)


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
        escaped = _in_json(secret)
        forms = [(escaped, _in_json(mask(secret)))] if escaped != secret else []
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
    value = _unescaped(inner) if "\\" in inner else inner
    if value is inner:
        return match.group(0)
    clean = redact(value, known)
    return match.group(0) if clean == value else f'"{_in_json(clean)}"'


def redact_event(event: Event, known: Iterable[str] = ()) -> Event:
    """The observation with every free-text field redacted (history is built from events, so
    the model never sees a secret the log does not). A value with nothing to hide comes back
    as the very object it was, and an event with nothing to hide too: most replies hold no
    secret, and rebuilding them (``attrs.evolve``, a message's wire text) cost more than
    reading them."""
    reader = _READERS.get(type(event))
    if reader is None:
        return event
    fields, read, single = reader
    values = read(event)
    changes: dict[str, Any] = {}
    for name, value in zip(fields, (values,) if single else values, strict=True):
        if value is None or (type(value) is tuple and not value):  # nothing to read
            continue
        clean = _same(value, known) if type(value) is str else _redact_value(value, known)
        if clean is not value:
            changes[name] = clean
    return attrs.evolve(cast(Any, event), **changes) if changes else event


# Each event class's redacted fields, read in one call (attrgetter gives one field's value
# bare, several as a tuple).
_READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], Any], bool]] = {
    cls: (names, operator.attrgetter(*names), len(names) == 1)
    for cls, names in REDACTED_FIELDS.items()}


def _same(value: str, known: Iterable[str]) -> str:
    """``value`` redacted, or ``value`` itself when that changes nothing."""
    clean = redact(value, known)
    return value if clean == value else clean


def _redact_value(value: object, known: Iterable[str]) -> object:
    if value is None:
        return None
    if type(value) is Message:  # a reply's: the common case first, without the checks below
        return _redact_message(value, known)
    if isinstance(value, str):
        return _same(value, known)
    if isinstance(value, ToolOutcome):
        content = _same(value.content, known)
        error = None if value.error is None else _same(value.error, known)
        if content is value.content and error is value.error:
            return value
        return attrs.evolve(value, content=content, error=error)
    if isinstance(value, tuple):
        items = tuple(_redact_value(item, known) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, TextPart):
        text = _same(value.text, known)
        return value if text is value.text else attrs.evolve(value, text=text)
    if isinstance(value, ImagePart):
        # An image's bytes are no text (and live in the blob store, not the log); an address
        # is, and a signed URL carries its key in the query.
        if value.url is None or value.url.startswith("data:"):
            return value
        url = _same(value.url, known)
        return value if url is value.url else attrs.evolve(value, url=url)
    if isinstance(value, Message):
        return _redact_message(value, known)
    if isinstance(value, ReplyTokens):
        return _redact_tokens(value, known)
    if attrs.has(type(value)):  # a value with text fields of its own (a pending approval)
        names = [f.name for f in attrs.fields(cast(Any, type(value))) if f.metadata.get("redact")]
        if names:
            return attrs.evolve(cast(Any, value),
                                **{n: _redact_value(getattr(value, n), known) for n in names})
    return value


def _redact_message(message: Message, known: Iterable[str]) -> Message:
    content = message.content
    if type(content) is str:
        content = _same(content, known)
    else:  # no cast() on the common path: it is a call too
        content = cast(Content, _redact_value(content, known))
    reasoning = None if message.reasoning is None else _same(message.reasoning, known)
    if not message.tool_calls and not message.reasoning_parts:  # a plain reply: its text only
        if content is message.content and reasoning is message.reasoning:
            return message
        return attrs.evolve(message, content=content, reasoning=reasoning)
    arguments = [_same(c.arguments, known) for c in message.tool_calls]
    parts = tuple(_redact_part(p, known) for p in message.reasoning_parts)
    if (content is message.content and reasoning is message.reasoning
            and all(a is c.arguments for a, c in zip(arguments, message.tool_calls, strict=True))
            and all(a is b for a, b in zip(parts, message.reasoning_parts, strict=True))):
        return message
    return attrs.evolve(
        message, content=content, reasoning=reasoning,
        tool_calls=tuple(c if a is c.arguments else attrs.evolve(c, arguments=a)
                         for a, c in zip(arguments, message.tool_calls, strict=True)),
        reasoning_parts=parts)


def _redact_tokens(tokens: ReplyTokens, known: Iterable[str]) -> ReplyTokens:
    """Token ids spell out their text: a reply whose text holds something to mask keeps
    neither its ids nor its pieces (its logprobs went with them), only why."""
    text = "".join(tokens.pieces)
    if redact(text, known) == text:
        return tokens
    return attrs.evolve(tokens, pieces=(), logprobs=(), ids=None, withheld="redacted")


def _redact_part(part: ReasoningPart, known: Iterable[str]) -> ReasoningPart:
    """Readable reasoning is redacted like any text (opaque data and signatures are not text);
    a signed thinking block whose text changed loses its signature, which no longer fits it:
    it is then never sent back."""
    text = redact(part.text, known)
    summary = tuple(redact(s, known) for s in part.summary)
    if text == part.text and summary == part.summary:
        return part
    signature = part.signature if text == part.text else None
    return attrs.evolve(part, text=text, summary=summary, signature=signature)
