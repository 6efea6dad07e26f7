"""``History``: an immutable sequence with amortised O(1) append, checked against tuples."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stages.log.history import History
from stages.log.messages import Message


def _m(text: str) -> Message:
    return Message(role="user", content=text)


def test_append_leaves_the_older_view_unchanged() -> None:
    one = History([_m("a")])
    two = one.append(_m("b"))
    three = two.append(_m("c"))
    assert list(one) == [_m("a")] and len(two) == 2 and three[-1] == _m("c")
    assert two._items is three._items  # the newest view extends in place


def test_a_branch_from_an_older_view_copies_and_does_not_disturb_the_newer() -> None:
    one = History([_m("a")])
    two = one.append(_m("b"))
    branch = one.append(_m("x"))
    assert list(two) == [_m("a"), _m("b")]
    assert list(branch) == [_m("a"), _m("x")]


def test_equality_slicing_and_indexing_behave_like_a_tuple() -> None:
    history = History([_m("a"), _m("b"), _m("c")])
    assert history == (_m("a"), _m("b"), _m("c")) and (_m("a"), _m("b"), _m("c")) == history
    assert history[1:] == (_m("b"), _m("c")) and history[-1] == _m("c")
    assert list(reversed(history)) == [_m("c"), _m("b"), _m("a")]
    assert hash(history) == hash(History(list(history)))


@given(st.lists(st.tuples(st.integers(0, 10), st.text(max_size=3)), max_size=30))
def test_any_sequence_of_appends_and_branches_matches_tuples(steps) -> None:
    """Each step appends to some earlier version; every version keeps its own contents."""
    versions: list[tuple[History, tuple[Message, ...]]] = [(History(), ())]
    for pick, text in steps:
        history, model = versions[pick % len(versions)]
        versions.append((history.append(_m(text)), (*model, _m(text))))
    for history, model in versions:
        assert tuple(history) == model and len(history) == len(model)
