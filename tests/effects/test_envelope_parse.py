"""Log lines are parsed by a fast strict parser with the standard one behind it: together they
must read every line exactly as the standard parser alone does (same value, or an error)."""

from __future__ import annotations

import json
import math

from hypothesis import example, given
from hypothesis import strategies as st

from effects.eventlog.envelope import _parse


def _reject_constant(name: str) -> None:
    raise ValueError(name)


def _standard(line: bytes) -> object:
    return json.loads(line, parse_constant=_reject_constant)


def _same(a: object, b: object) -> bool:
    """Equal, with types (1 is not 1.0 nor True) and NaN-free floats compared bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        assert isinstance(b, float)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def _outcome(parse: object, line: bytes) -> tuple[str, object]:
    try:
        return "ok", parse(line)  # type: ignore[operator]
    except (ValueError, RecursionError):
        return "error", None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@given(json_values)
def test_every_json_value_reads_as_the_standard_parser_reads_it(value: object) -> None:
    line = json.dumps(value, ensure_ascii=False).encode()
    assert _same(_parse(line), _standard(line))


@given(st.binary(max_size=60) | json_values.map(
    lambda v: json.dumps(v, ensure_ascii=False).encode()).flatmap(
    lambda b: st.integers(0, max(len(b) - 1, 0)).map(lambda i: b[:i] + b"\x00\"{,"[i % 4:][:1]
                                                      + b[i + 1:])))
@example(b'{"a":"\\ud800"}')  # a lone surrogate escape: only the standard parser takes it
@example(b'{"a":1e400}')  # overflows to infinity in the standard parser
@example(b'{"a":NaN}')  # refused by both, with the standard parser's words
@example(b"\xef\xbb\xbf{}")  # a byte order mark
@example(b'{"a":123456789012345678901234567890}')  # a big integer stays an integer
@example(b'{"a":1,"a":2}')  # a repeated key: the last value wins, at the first's place
@example(b'{"a":"\t"}')  # a raw control character
def test_any_bytes_read_as_the_standard_parser_reads_them(line: bytes) -> None:
    fast, standard = _outcome(_parse, line), _outcome(_standard, line)
    assert fast[0] == standard[0], (line, fast, standard)
    assert _same(fast[1], standard[1])
