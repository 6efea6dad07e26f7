"""Secret redaction, applied to everything that enters the event log or a log line.

Known secrets (the keys mibyan was configured with) are replaced wherever they appear; common
credential shapes (vendor key prefixes, bearer tokens, ``KEY=value`` assignments, JSON secret
fields, PEM private keys, JWTs) are masked too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, cast

import attrs

from stages.events import REDACTED_FIELDS, Event
from stages.messages import Message
from stages.tools import ToolOutcome

_PREFIXES = (
    r"sk-[A-Za-z0-9_\-]{8,}", r"gh[pousr]_[A-Za-z0-9]{16,}", r"github_pat_[A-Za-z0-9_]{20,}",
    r"xox[abprs]-[A-Za-z0-9\-]{10,}", r"AIza[0-9A-Za-z_\-]{30,}", r"AKIA[0-9A-Z]{16}",
    r"hf_[A-Za-z0-9]{20,}", r"gsk_[A-Za-z0-9]{20,}", r"xai-[A-Za-z0-9]{20,}",
    r"r8_[A-Za-z0-9]{20,}", r"npm_[A-Za-z0-9]{20,}", r"pypi-[A-Za-z0-9_\-]{20,}",
    r"sk_(?:live|test)_[A-Za-z0-9]{16,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]+)?",
)
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])(?:" + "|".join(_PREFIXES) + r")")
_BEARER = re.compile(r"(?i)(authorization\s*[:=]\s*bearer\s+|bearer\s+)([A-Za-z0-9._~+/\-]{8,}=*)")
_ASSIGN = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Z0-9_]*\s*=\s*)"
    r"(['\"]?)([^\s'\"]{4,})\2")
_JSON_FIELD = re.compile(
    r"(?i)(\"(?:api_?key|apikey|token|secret|password|access_token|refresh_token|auth_token|"
    r"client_secret)\"\s*:\s*\")([^\"]{4,})(\")")
# Credentials in a URL's userinfo: https://user:password@host
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]*:)([^/\s@]+)(@)")
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)


# Every pattern above needs one of these; text with none of them (most text) skips the scans.
_MARKERS = ("sk-", "sk_", "gh", "github_pat_", "xox", "AIza", "AKIA", "hf_", "gsk_", "xai-",
            "r8_", "npm_", "pypi-", "eyJ", "earer", "EARER", "=", '"', "PRIVATE KEY", "@")


def mask(secret: str) -> str:
    """Keep a little of a long token so a person can tell keys apart; hide short ones whole."""
    if len(secret) < 18:
        return "***"
    return f"{secret[:6]}...{secret[-4:]}"


def scrub_surrogates(text: str) -> str:
    """Lone UTF-16 surrogates (half an emoji, legal in JSON) cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def redact(text: str, known: Iterable[str] = ()) -> str:
    text = scrub_surrogates(text)
    for secret in known:
        if secret and len(secret) >= 8 and secret in text:
            text = text.replace(secret, mask(secret))
    if not any(marker in text for marker in _MARKERS):
        return text
    text = _PEM.sub("[REDACTED PRIVATE KEY]", text)
    text = _USERINFO.sub(lambda m: m.group(1) + "***" + m.group(3), text)
    text = _TOKEN.sub(lambda m: mask(m.group(0)), text)
    text = _BEARER.sub(lambda m: m.group(1) + mask(m.group(2)), text)
    text = _ASSIGN.sub(lambda m: m.group(1) + m.group(2) + mask(m.group(3)) + m.group(2), text)
    return _JSON_FIELD.sub(lambda m: m.group(1) + mask(m.group(2)) + m.group(3), text)


def redact_event(event: Event, known: Iterable[str] = ()) -> Event:
    """The observation with every free-text field redacted (history is built from events, so
    the model never sees a secret the log does not)."""
    fields = REDACTED_FIELDS.get(type(event))
    if not fields:
        return event
    changes: dict[str, Any] = {name: _redact_value(getattr(event, name), known)
                               for name in fields}
    return attrs.evolve(cast(Any, event), **changes)


def _redact_value(value: object, known: Iterable[str]) -> object:
    if value is None:
        return None
    if isinstance(value, str):
        return redact(value, known)
    if isinstance(value, ToolOutcome):
        return attrs.evolve(value, content=redact(value.content, known),
                            error=None if value.error is None else redact(value.error, known))
    if isinstance(value, tuple):
        return tuple(_redact_value(item, known) for item in value)
    if isinstance(value, Message):
        return attrs.evolve(
            value, content=None if value.content is None else redact(value.content, known),
            reasoning=None if value.reasoning is None else redact(value.reasoning, known),
            tool_calls=tuple(attrs.evolve(c, arguments=redact(c.arguments, known))
                             for c in value.tool_calls))
    return value
