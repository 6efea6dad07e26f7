"""The JSON depth measured on a body's bytes is the depth of the value it parses to."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.serve.json_limits import JsonRefused, nesting, parse

# Strings full of what a byte-level scan could mistake: brackets, quotes, backslashes.
TRICKY = st.text(alphabet="[]{}\"\\ü\n a", max_size=12)
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | TRICKY,
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(TRICKY, inner, max_size=3), max_leaves=30)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@given(VALUES, st.booleans())
def test_the_bytes_tell_the_depth_of_the_value(value, ascii_only):
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nesting(body) == depth(value)
    assert parse(body, max_depth=max(depth(value), 1)) == value


def test_deeper_than_the_limit_is_refused_before_python_s_parser_recurses():
    with pytest.raises(JsonRefused, match="nests 100000 levels deep"):
        parse(b"[" * 100_000 + b"]" * 100_000, max_depth=64)


def test_an_empty_body_is_none_and_a_utf8_bom_is_allowed():
    assert parse(b"", max_depth=1) is None
    assert parse('\ufeff{"a": 1}'.encode(), max_depth=1) == {"a": 1}
