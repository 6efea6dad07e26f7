"""Pure upcasters: old event payloads to the current schema, so old logs keep replaying.

``UPCASTERS[(kind, version)]`` turns a payload of ``version`` into one of ``version + 1``.
A bump adds its function here and a log to the frozen corpus in ``tests/corpus``.

* ``session_started``/``session_resumed`` v1 -> v2: provider resilience arrived with retries
  on by default; a v1 session never retried, so it replays with ``max_retries = 0``.
* ``session_started``/``session_resumed`` v2 -> v3: settings gained ``rules`` (see
  ``stages.log.rules``); a session written before it ran under rules 1.
* ``model_requested`` v1 -> v2: the request digest arrived; older requests have none.
* ``model_failed`` v1 -> v2: the error code is text; v1 logs may hold llama.cpp's or
  OpenRouter's integer code, which made them unreadable.
"""

from __future__ import annotations

from collections.abc import Callable

from stages.log.events import EVENT_TYPES

Upcaster = Callable[[dict], dict]


def _no_retries(payload: dict) -> dict:
    return {**payload, "settings": {**payload["settings"], "max_retries": 0}}


def _first_rules(payload: dict) -> dict:
    return {**payload, "settings": {**payload["settings"], "rules": 1}}


def _no_digest(payload: dict) -> dict:
    return {**payload, "digest": None}


def _code_as_text(payload: dict) -> dict:
    code = payload.get("code")
    return payload if code is None or isinstance(code, str) else {**payload, "code": str(code)}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("session_started", 1): _no_retries,
    ("session_resumed", 1): _no_retries,
    ("session_started", 2): _first_rules,
    ("session_resumed", 2): _first_rules,
    ("model_requested", 1): _no_digest,
    ("model_failed", 1): _code_as_text,
}


def upcast(kind: str, version: int, payload: dict) -> dict:
    """``payload`` raised from ``version`` to the current version of ``kind``."""
    current = EVENT_TYPES[kind].schema_version
    if version > current:
        raise ValueError(f"{kind} v{version} is newer than this mibyan understands (v{current})")
    while version < current:
        payload = UPCASTERS[(kind, version)](payload)
        version += 1
    return payload
