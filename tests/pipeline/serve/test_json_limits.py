"""A body is refused exactly when its JSON nests deeper than the limit, however deep."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.serve.json_limits import JsonRefused, parse

VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                      max_leaves=30)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@given(VALUES, st.integers(min_value=0, max_value=8))
def test_a_value_is_refused_exactly_when_it_nests_past_the_limit(value, limit):
    body = json.dumps(value).encode()
    if depth(value) > limit:
        with pytest.raises(JsonRefused, match=f"more than the {limit} levels allowed"):
            parse(body, max_depth=limit)
    else:
        assert parse(body, max_depth=limit) == value


@pytest.mark.parametrize("levels", [65, 999, 1000, 100_000])
def test_deeper_than_python_s_parser_recurses_is_refused_alike(levels):
    for opening, closing in ((b"[", b"]"), (b'{"a":', b"}")):
        with pytest.raises(JsonRefused, match="more than the 64 levels allowed"):
            parse(opening * levels + b"0" + closing * levels, max_depth=64)


def test_an_empty_body_is_none_and_a_utf8_bom_is_allowed():
    assert parse(b"", max_depth=1) is None
    assert parse('\ufeff{"a": 1}'.encode(), max_depth=1) == {"a": 1}
