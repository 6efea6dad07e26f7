"""What a provider error says: its codes and its text, normalised for ``stages.recovery.classify``.

:func:`read_error` normalises a :class:`~stages.log.events.ModelFailed` of any shape: the adapter's
fields may hold the wrong types (an integer ``code`` from llama.cpp, vLLM or OpenRouter), and the
body may be JSON of any shape (a list, nested ``error.error.message``, numbers and nulls where
strings were expected, Google's ``details``), HTML, plain text, invalid JSON or megabytes of it.
Reading is total and bounded: at most :data:`_MAX_NODES` JSON nodes are visited, no deeper than
:data:`_MAX_DEPTH`, and the text is cut at :data:`_MAX_TEXT` characters.

An aggregator (OpenRouter) wraps the upstream provider's error in ``error.metadata`` (``raw``,
``provider_name``, ``provider_error_code``); that part is read apart, as the *inner* error, so
the classifier can tell an upstream limit from one on our own key.

The phrase tables matched against the text are in ``stages.recovery.phrases``.
"""

from __future__ import annotations

import json
import re
from collections import deque

import attrs

from stages.log.events import ModelFailed
from stages.recovery.backoff import duration_in_text

__all__ = ["ErrorText", "output_limit_of", "read_error"]

_MAX_TEXT = 20_000
_MAX_BODY = 200_000
_MAX_NODES = 400
_MAX_DEPTH = 8

# Keys (lower-cased) whose string values are error codes, and those whose values are text.
_CODE_KEYS = frozenset({"code", "type", "status", "reason", "quotaid", "error_code",
                        "error_type", "provider_error_code"})
_TEXT_KEYS = frozenset({"message", "detail", "error_description", "msg", "error", "quotametric",
                        "quotaid", "raw"})
_NOT_CODES = frozenset({"", "error", "none", "null", "object"})


@attrs.frozen(kw_only=True)
class ErrorText:
    """What a failure says, normalised: codes and text lower-cased, bounded in size.

    ``inner_*`` is the upstream error an aggregator wrapped, ``upstream`` its provider's name
    (empty when the error is not wrapped), ``retry_hint`` a delay the body names (Google's
    ``RetryInfo.retryDelay``).
    """

    status: int | None
    codes: tuple[str, ...]
    text: str
    inner_codes: tuple[str, ...]
    inner_text: str
    error_type: str
    upstream: str = ""
    retry_hint: float | None = None


@attrs.define
class _Found:
    codes: list[str] = attrs.Factory(list)
    texts: list[str] = attrs.Factory(list)
    inner: list[object] = attrs.Factory(list)
    upstream: str = ""
    retry_hint: float | None = None


def read_error(failure: ModelFailed) -> ErrorText:
    """Collect the codes and text of ``failure``; never raises, whatever its fields hold."""
    found = _read_body(_as_text(getattr(failure, "body", None)))
    inner = _Found()
    for wrapped in found.inner:
        _walk(wrapped, inner)
    own = _code_of(getattr(failure, "code", None))
    inner_text = _join(inner.texts)
    status = _status_of(getattr(failure, "status", None))
    if status is None:  # an error event inside a 200 stream carries its status as its code
        status = next((int(c) for c in found.codes if c.isdigit() and 400 <= int(c) < 600), None)
    return ErrorText(
        status=status,
        codes=(own,) * bool(own) + tuple(found.codes),
        text=_join([_as_text(getattr(failure, "message", None)), *found.texts, inner_text]),
        inner_codes=tuple(inner.codes), inner_text=inner_text,
        error_type=_as_text(getattr(failure, "error_type", None)).rsplit(".", 1)[-1]
        .strip().lower()[:200],
        upstream=found.upstream, retry_hint=found.retry_hint)


def _as_text(value: object) -> str:
    """Any value as text: the adapters are typed, but a log or a caller may hold anything."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:_MAX_BODY]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value[:_MAX_BODY]).decode("utf-8", "replace")
    if isinstance(value, (bool, int, float)):
        return str(value)
    return ""


def _code_of(value: object) -> str:
    """An error code as lower-case text: strings, and integers (llama.cpp and vLLM send 500)."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int):
        return str(value)[:20]
    if isinstance(value, str):
        code = value.strip().lower()[:200]
        return "" if code in _NOT_CODES else code
    return ""


def _status_of(value: object) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip()[:4])
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 999:
        return value
    return None


def _join(parts: list[str]) -> str:
    text = " | ".join(p for p in parts if p)
    return text[:_MAX_TEXT].lower()


def _read_body(body: str) -> _Found:
    """The codes, text and wrapped errors of a body; what is not JSON is one message."""
    found = _Found()
    if not body.strip():
        return found
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        found.texts.append(body[:_MAX_TEXT])
        return found
    if isinstance(data, (dict, list)):
        _walk(data, found)
    else:
        found.texts.append(body[:_MAX_TEXT])
    return found


def _walk(root: object, found: _Found) -> None:
    """Breadth first over ``root``, so the outermost message comes first; bounded in nodes and
    depth, so a deep or huge body costs no more than a small one."""
    queue: deque[tuple[object, int]] = deque([(root, 0)])
    seen = 0
    while queue and seen < _MAX_NODES:
        node, depth = queue.popleft()
        seen += 1
        if isinstance(node, str):  # wrapped raw text, or a JSON string in a list
            found.texts.append(node[:_MAX_TEXT])
        elif isinstance(node, list) and depth < _MAX_DEPTH:
            queue.extend((item, depth + 1) for item in node[:_MAX_NODES])
        elif isinstance(node, dict) and depth < _MAX_DEPTH:
            _visit(node, depth, found, queue)


def _visit(node: dict, depth: int, found: _Found,
           queue: deque[tuple[object, int]]) -> None:
    for key, value in list(node.items())[:_MAX_NODES]:
        name = key.lower() if isinstance(key, str) else ""
        if name == "metadata" and isinstance(value, dict):
            _wrapped(value, found)
        elif name == "retrydelay" and isinstance(value, str):
            found.retry_hint = duration_in_text(value)
        elif isinstance(value, (dict, list)):
            queue.append((value, depth + 1))
        else:
            _leaf(name, value, found)


def _leaf(name: str, value: object, found: _Found) -> None:
    if name in _CODE_KEYS and (code := _code_of(value)):
        found.codes.append(code)
    if name in _TEXT_KEYS and isinstance(value, str) and value:
        found.texts.append(value[:_MAX_TEXT])


def _wrapped(metadata: dict, found: _Found) -> None:
    """OpenRouter's ``error.metadata``: the upstream error (``raw``, text or JSON), its
    provider's name and code. Other metadata (moderation reasons, headers) is not an error."""
    name = metadata.get("provider_name")
    if isinstance(name, str) and name.strip():
        found.upstream = name.strip()[:200]
    raw = metadata.get("raw")
    if isinstance(raw, str) and raw.strip():
        found.inner.append(_parsed(raw))
    elif isinstance(raw, (dict, list)):
        found.inner.append(raw)
    extra = {k: metadata.get(k) for k in ("provider_error_code", "error_type")}
    found.inner.append({k: v for k, v in extra.items() if v is not None})


def _parsed(raw: str) -> object:
    try:
        data = json.loads(raw[:_MAX_BODY])
    except (ValueError, RecursionError):
        return raw
    return data if isinstance(data, (dict, list)) else raw


# --- numbers an error names -------------------------------------------------------------------

_OUTPUT_LIMITS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic: "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000"
    (re.compile(r"exceed context limit: (\d{1,9}) \+ \d{1,9} > (\d{1,9})"), "window-input"),
    # Anthropic: "max_tokens: 200000 > 64000, which is the maximum allowed number of output ..."
    (re.compile(r"max_tokens: \d{1,9} > (\d{1,9}), which is the maximum"), "cap"),
    # OpenAI: "This model supports at most 16384 completion tokens"
    (re.compile(r"supports at most (\d{1,9}) completion tokens"), "cap"),
    # vLLM: "... and your request has 100 input tokens (5000 > 4096 - 100)"
    (re.compile(r"\(\d{1,9} > (\d{1,9}) - (\d{1,9})\)"), "window-input"),
    # OpenRouter: "You requested up to 16384 tokens, but can only afford 1234"
    (re.compile(r"can only afford (\d{1,9})"), "cap"),
)


def output_limit_of(text: str) -> int | None:
    """The largest ``max_tokens`` the error says the request could have had, if it says."""
    for pattern, kind in _OUTPUT_LIMITS:
        found = pattern.search(text)
        if found is None:
            continue
        if kind == "cap":
            return int(found.group(1))
        first, second = int(found.group(1)), int(found.group(2))
        window, used = (second, first) if pattern is _OUTPUT_LIMITS[0][0] else (first, second)
        return window - used if window > used else None
    return None
