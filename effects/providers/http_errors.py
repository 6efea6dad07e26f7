"""Reading a provider's HTTP error as plain data: the message and code of a body of any shape,
``Retry-After`` in every form providers use, and an endpoint safe to name in an error.

Bodies come as OpenAI's ``{"error": {"message", "type", "code"}}``, Anthropic's
``{"type": "error", "error": {"type", "message"}}``, llama.cpp's, OpenRouter's and vLLM's with an
*integer* ``code``, proxies' nested ``{"error": {"error": {...}}}``, bare ``{"error": "text"}``,
HTML pages and plain text. Whatever the shape, ``code`` reaches the project as ``str | None``.
"""

from __future__ import annotations

import email.utils
import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from stages.log.messages import canonical_json

__all__ = ["ErrorDetail", "endpoint_label", "error_detail", "retry_after_seconds"]

_NESTING = 4  # how deep ``error.error...`` is followed


@attrs.frozen
class ErrorDetail:
    """What an error body says, each part as text or ``None``."""

    message: str | None = None
    code: str | None = None
    type: str | None = None


def _text(value: Any) -> str | None:
    """A scalar or structure from an error body as text (``500`` -> ``"500"``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return canonical_json(value)[:300]


def error_detail(body: str) -> ErrorDetail:
    """The message, code and type of an error body; all ``None`` when it is not JSON."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return ErrorDetail()
    error: Any = data
    for _ in range(_NESTING):
        inner = error.get("error") if isinstance(error, dict) else None
        if isinstance(inner, dict):
            error = inner
        elif isinstance(inner, str):  # {"error": "text"}
            return ErrorDetail(message=inner)
        else:
            break
    if not isinstance(error, dict):
        return ErrorDetail()
    message = error.get("message") if "message" in error else error.get("detail")
    return ErrorDetail(message=_text(message), code=_text(error.get("code")),
                       type=_text(error.get("type")))


def retry_after_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """How long the provider asks to wait: ``retry-after-ms``, else ``Retry-After`` as
    seconds or as an HTTP-date (RFC 9110 section 10.2.3), counted from ``now`` (epoch
    seconds). ``None`` when absent or unreadable; never negative."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now) if when.tzinfo is not None else None


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return max(0.0, number) if number is not None and math.isfinite(number) else None


def endpoint_label(url: str) -> str:
    """``url`` without credentials (``user:pass@``) or query (``?key=``), for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unreadable URL)"
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))
