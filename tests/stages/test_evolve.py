"""``stages.log.evolve.evolve`` behaves as ``attrs.evolve`` on the classes the fold evolves."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.log.events import Usage
from stages.log.evolve import evolve
from stages.log.history import History
from stages.log.messages import Message
from stages.log.state import State, TurnState


@given(turns=st.integers(0, 10), chars=st.integers(0, 10**6), digest=st.text(max_size=8),
       now=st.none() | st.floats(allow_nan=False))
def test_state_evolves_as_with_attrs(turns: int, chars: int, digest: str, now: float | None
                                     ) -> None:
    state = State(session_id="s", turn=TurnState(index=0, turn_id="t", task_id="k"))
    changes = {"turns": turns, "history_chars": chars, "history_digest": digest, "now": now}
    assert evolve(state, **changes) == attrs.evolve(state, **changes)
    assert state == State(session_id="s", turn=TurnState(index=0, turn_id="t", task_id="k"))


def test_a_changed_field_goes_through_its_converter() -> None:
    messages = (Message(role="user", content="hi"),)
    evolved = evolve(State(), messages=messages)
    assert isinstance(evolved.messages, History)
    assert evolved == attrs.evolve(State(), messages=messages)


def test_an_unknown_field_is_an_error() -> None:
    with pytest.raises(TypeError, match="no field"):
        evolve(TurnState(index=0, turn_id="t", task_id="k"), retrys=1)


@attrs.frozen
class _Checked:
    low: int
    high: int = attrs.field()

    @high.validator
    def _above(self, attribute: attrs.Attribute[int], value: int) -> None:
        if value < self.low:
            raise ValueError("high < low")


def test_a_class_with_validators_is_still_checked() -> None:
    with pytest.raises(ValueError, match="high < low"):
        evolve(_Checked(low=1, high=2), low=3)
    assert evolve(Usage(input_tokens=1), output_tokens=2) == Usage(input_tokens=1, output_tokens=2)


@attrs.frozen(kw_only=True, slots=False)
class _Dict:
    a: int = 0
    b: tuple[int, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True)
class _Slots:
    a: int = 0
    b: tuple[int, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True, slots=False)
class _DictOnSlots(_Slots):
    c: int = 0


@pytest.mark.parametrize("cls", [_Dict, _Slots, _DictOnSlots])
@given(a=st.integers(), b=st.lists(st.integers(), max_size=3))
def test_every_layout_evolves_as_with_attrs(cls: type, a: int, b: list[int]) -> None:
    """Fields in a __dict__, in slots, or (a dict class on a slotted one) in both."""
    original = cls(a=1, b=[2])
    for changes in ({"a": a}, {"b": b}, {"a": a, "b": b}):
        evolved = evolve(original, **changes)
        assert evolved == attrs.evolve(original, **changes)
        assert type(evolved.b) is tuple
    assert original == cls(a=1, b=[2])
