"""The request digest's text is written item by item: it must be ``canonical_json`` of the
fields, byte for byte, or every logged digest would stop replaying."""

from __future__ import annotations

import enum

from hypothesis import example, given
from hypothesis import strategies as st

from stages.log.messages import canonical_json
from stages.turn.request import digest_text


class _Mode(enum.StrEnum):
    CHAT = "chat_completions"


scalars = (st.none() | st.booleans() | st.integers() | st.text()
           | st.floats(allow_nan=False, allow_infinity=False) | st.just(_Mode.CHAT))
items = scalars | st.lists(scalars | st.lists(scalars, max_size=2), max_size=3) | st.dictionaries(
    st.text(max_size=4), scalars, max_size=3)


@given(st.lists(items, max_size=9), st.lists(st.text(), max_size=3).map(tuple),
       st.lists(items, max_size=8))
@example([], (), [])
@example(["\u2028\x00\"\\é"], ('{"type":"function"}',), [True, False, None, 0, -1, [2]])
def test_the_digest_text_is_the_canonical_json_of_the_fields(
        head: list[object], wires: tuple[str, ...], tail: list[object]) -> None:
    assert digest_text(head, wires, tail) == canonical_json([*head, list(wires), *tail])
