"""A request body parsed as JSON within a nesting limit.

Python's parser recurses once per level and fails with ``RecursionError`` about 1000 levels
down: a 2 KB body of brackets would be a server error, and a few hundred levels a deep
recursion in every handler that walks the value. The depth is measured on the bytes first, at
C speed but for one step per bracket (strings, which may hold brackets, are cut out by a
regular expression).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

# A JSON string, unrolled so that a long one is matched without backtracking. In valid
# UTF-8 the byte '"' is only ever that character, never part of a longer one.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class JsonRefused(ValueError):
    """The body is not JSON the gateway takes; the message says why, for the client."""


def nesting(body: bytes) -> int:
    """How deep the body's arrays and objects nest (0 for a scalar)."""
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(accumulate(_STEP[b] for b in brackets), default=0)


def parse(body: bytes, *, max_depth: int) -> Any:
    """The body's JSON value (an empty body: None); ``JsonRefused`` for a body that is not
    UTF-8 JSON, or nests deeper than ``max_depth``."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonRefused(f"the body is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    depth = nesting(body)
    if depth > max_depth:
        raise JsonRefused(f"it nests {depth} levels deep, more than the {max_depth} allowed")
    try:
        return json.loads(text) if text else None
    except ValueError as exc:
        raise JsonRefused(str(exc)) from exc
