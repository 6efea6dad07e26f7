"""A request body parsed as JSON within a nesting limit.

Python's parser recurses once per level and fails with ``RecursionError`` about 1000 levels
down: that is a client's mistake (400), not a server error. Below that, the parsed value's
depth is measured without recursion, and a value deeper than the limit is refused before any
handler walks it. (A scan of the bytes before parsing would spare the parse, but a regular
expression cutting the strings out runs at a third of ``json.loads``' speed: measured by
bench/gateway_guard.py.)
"""

from __future__ import annotations

import json
from typing import Any


class JsonRefused(ValueError):
    """The body is not JSON the gateway takes; the message says why, for the client."""


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value``'s lists and dicts nest more than ``limit`` levels (a scalar: 0),
    walked a level at a time: one list per level, not a tuple per container (the allocations
    set the garbage collector going over the whole fresh value, again and again)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [child for item in level
                 for child in (item.values() if isinstance(item, dict) else item)
                 if isinstance(child, dict | list)]
    return bool(level)


def parse(body: bytes, *, max_depth: int) -> Any:
    """The body's JSON value (an empty body: None); ``JsonRefused`` for a body that is not
    UTF-8 JSON, or nests deeper than ``max_depth``."""
    too_deep = JsonRefused(f"it nests more than the {max_depth} levels allowed")
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonRefused(f"the body is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    try:
        value = json.loads(text) if text else None
    except RecursionError as exc:
        raise too_deep from exc
    except ValueError as exc:
        raise JsonRefused(str(exc)) from exc
    # No more openers than the limit: nothing can nest deeper (most bodies; no walk).
    if body.count(b"[") + body.count(b"{") > max_depth and deeper_than(value, max_depth):
        raise too_deep
    return value
