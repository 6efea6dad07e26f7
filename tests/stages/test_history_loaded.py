"""The fold of a history handed in whole: the same state as folding it afresh, without
digesting or wrapping again the messages the last history folded had at the same places."""

from __future__ import annotations

import hashlib

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.fold import apply_event
from stages.history_loaded import RecentHistories, chained_digest
from stages.log import events as ev
from stages.log.messages import Message
from stages.log.state import State
from stages.prompt.untrusted import data_code, unwrapped, wrap
from tests.stages.helpers import SETTINGS, session

MARKED = attrs.evolve(SETTINGS, rules=7)
UNMARKED = attrs.evolve(SETTINGS, rules=6)


def _pool() -> list[Message]:
    return [Message(role="user", content=f"question {i}") if i % 3 == 0 else
            Message(role="tool", content=f"result {i}", tool_call_id=f"c{i}", name="look")
            if i % 3 == 1 else Message(role="assistant", content=f"answer {i}")
            for i in range(12)]


def _afresh(state: State, messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], int, str]:
    """The fold of the history as it was written before it remembered anything."""
    assert state.settings is not None
    if state.settings.rule_set.untrusted_marked:
        code = data_code(state)
        messages = tuple(attrs.evolve(m, content=wrap(unwrapped(m.text), name=m.name,
                                                      code=code)) if m.role == "tool" else m
                         for m in messages)
    return messages, sum(m.chars for m in messages), chained_digest("", messages)


def _loaded(state: State, messages: tuple[Message, ...]) -> State:
    return apply_event(state, ev.HistoryLoaded(messages=messages))


def test_the_rules_tell_which_sessions_wrap_tool_results() -> None:
    assert session(settings=MARKED).settings.rule_set.untrusted_marked  # type: ignore[union-attr]
    assert not session(settings=UNMARKED).settings.rule_set.untrusted_marked  # type: ignore[union-attr]


def _other_session(settings: ev.SessionSettings = MARKED) -> State:
    return apply_event(State(), ev.SessionStarted(session_id="s2", started_at="t0",
                                                  settings=settings))


_SESSIONS = [session(settings=MARKED), session(settings=UNMARKED), _other_session()]


@given(st.lists(st.tuples(st.lists(st.integers(0, 11), max_size=8), st.sampled_from(_SESSIONS)),
                min_size=1, max_size=6))
def test_histories_folded_in_turn_fold_as_afresh(histories: list[tuple[list[int], State]]
                                                 ) -> None:
    pool = _pool()
    for picks, state in histories:
        messages = tuple(pool[i] for i in picks)
        folded = _loaded(state, messages)
        assert (tuple(folded.messages), folded.history_chars,
                folded.history_digest) == _afresh(state, messages)


@pytest.mark.parametrize("settings", [MARKED, UNMARKED])
def test_a_history_handed_in_again_is_not_digested_again(
        settings: ev.SessionSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    state = session(settings=settings)
    history = tuple(_pool())
    _loaded(state, history)
    calls = []
    sha256 = hashlib.sha256

    def counted(data: bytes = b"") -> object:
        calls.append(data)
        return sha256(data)

    monkeypatch.setattr(hashlib, "sha256", counted)
    again = _loaded(state, history)
    grown = _loaded(state, (*history, Message(role="user", content="one more")))
    rewound = _loaded(state, history[:5])
    # The data marker is a digest too: count the digests of messages only.
    wires = {m.wire.encode() for m in (*again.messages, *grown.messages)}
    assert [c for c in calls if any(c.endswith(w) for w in wires)] == [
        again.history_digest.encode() + grown.messages[-1].wire.encode()]
    for folded, messages in ((again, history), (rewound, history[:5])):
        assert folded.history_digest == _afresh(state, messages)[2]
    assert grown.history_digest == chained_digest(again.history_digest, grown.messages[-1:])


def test_a_tool_result_handed_in_again_is_not_wrapped_again() -> None:
    state = session(settings=MARKED)
    history = tuple(_pool())
    first = _loaded(state, history)
    again = _loaded(state, history)
    tools = [i for i, m in enumerate(history) if m.role == "tool"]
    assert tools and all(first.messages[i] is not history[i] for i in tools)
    # The very same objects: the wire JSON made for them is made once.
    assert all(again.messages[i] is first.messages[i] for i in range(len(history)))


def test_an_edited_message_is_folded_again_from_where_it_departs() -> None:
    state = session(settings=MARKED)
    history = tuple(_pool())
    _loaded(state, history)
    edited = (*history[:4], Message(role="tool", content="edited", tool_call_id="c4",
                                    name="look"), *history[5:])
    folded = _loaded(state, edited)
    assert (tuple(folded.messages), folded.history_chars,
            folded.history_digest) == _afresh(state, edited)
    assert "edited" in folded.messages[4].text


def test_another_session_wraps_with_its_own_marker() -> None:
    history = tuple(_pool())
    first, other = session(settings=MARKED), _other_session()
    assert data_code(first) != data_code(other)
    _loaded(first, history)
    folded = _loaded(other, history)
    assert (tuple(folded.messages), folded.history_chars,
            folded.history_digest) == _afresh(other, history)


def test_another_marker_digests_again_from_the_first_tool_result_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    talk = tuple(Message(role="user" if i % 2 == 0 else "assistant", content=f"talk {i}")
                 for i in range(6))
    history = (*talk, *_pool())
    first_tool = next(i for i, m in enumerate(history) if m.role == "tool")
    _loaded(session(settings=MARKED), history)
    other = _other_session()  # as a compression's child, with a marker of its own
    expected = _afresh(other, history)
    digested = []
    sha256 = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda data=b"": digested.append(data) or sha256(data))
    folded = _loaded(other, history)
    assert (tuple(folded.messages), folded.history_chars, folded.history_digest) == expected
    wires = {m.wire.encode() for m in folded.messages}
    assert len([d for d in digested if any(d.endswith(w) for w in wires)]) == (
        len(history) - first_tool)


def test_two_agents_folding_in_turn_keep_each_their_history(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    state = session(settings=MARKED)
    # Equal values, other objects: what two agents make of the same dicts.
    mine, theirs = tuple(_pool()), tuple(_pool())
    _loaded(state, mine)
    _loaded(state, theirs)
    expected = _afresh(state, mine)[2]
    digested = []
    sha256 = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda data=b"": digested.append(data) or sha256(data))
    folded = [_loaded(state, history).history_digest for history in (mine, theirs, mine)]
    assert folded == [expected] * 3
    wires = {m.wire.encode() for m in _loaded(state, mine).messages}
    assert not [d for d in digested if any(d.endswith(w) for w in wires)]


def test_recent_histories_forget_the_oldest_past_their_size() -> None:
    recent: RecentHistories[str] = RecentHistories(size=2)
    one, two, three = ((Message(role="user", content=str(i)),) for i in range(3))
    recent.keep(one, "one")
    recent.keep(two, "two")
    assert recent.find(one) == (1, "one")
    recent.keep(three, "three")
    assert recent.find(one) == (0, None)
    assert recent.find((*two, *one)) == (1, "two")
    recent.keep(two, "two again")  # in place of the history that starts alike
    assert recent.find(two) == (1, "two again") and recent.find(three)[1] == "three"


def test_no_history_handed_in_folds_to_an_empty_one() -> None:
    from stages.history_loaded import loaded_history
    assert loaded_history((), None) == loaded_history((), "code") == ((), 0, "")
    state = apply_event(session(), ev.HistoryLoaded(messages=()))
    assert len(state.messages) == 0 and state.history_chars == 0 and state.history_digest == ""
