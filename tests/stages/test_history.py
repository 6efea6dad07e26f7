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


@given(st.lists(st.tuples(st.integers(0, 10), st.booleans()), max_size=30))
def test_the_count_of_messages_with_parts_is_the_plain_count(steps) -> None:
    """Kept as messages are appended (in a loop) and counted in C for a whole history: both
    give what a count over the messages gives, on every version."""
    from stages.log.content_parts import TextPart
    versions: list[History] = [History()]
    for pick, parts in steps:
        message = Message(role="user", content=(TextPart(text="a"),) if parts else "a")
        versions.append(versions[pick % len(versions)].append(message))
    for history in versions:
        plain = sum(type(m.content) is tuple for m in history)
        assert history.with_parts == plain == History(list(history)).with_parts


def test_iterating_a_view_stops_at_its_end_while_a_longer_one_grows() -> None:
    one = History([_m("a")])
    two = one.append(_m("b"))
    seen = []
    for message in one:  # the shared list grows under the iteration
        seen.append(message)
        two = two.append(_m("c"))
    assert seen == [_m("a")] and len(two) == 3


@given(st.lists(st.sampled_from("abc"), max_size=4), st.lists(st.sampled_from("abc"), max_size=4))
def test_a_history_equals_a_tuple_or_list_as_a_tuple_does(mine: list[str], other: list[str]
                                                          ) -> None:
    history = History([_m(t) for t in mine]).append(_m("z")).append()
    plain = (*(_m(t) for t in mine), _m("z"))
    for given_ in ((*(_m(t) for t in other), _m("z")), [*(_m(t) for t in other), _m("z")]):
        assert (history == given_) == (plain == tuple(given_)) == (given_ == history)
