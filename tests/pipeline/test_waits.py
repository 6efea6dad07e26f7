"""What a run goes on with after a turn: the interrupts' messages, then what was steered too
late for the turn, as one message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.shell.waits import Waits


def test_nothing_held_is_no_follow_up() -> None:
    assert Waits().follow_up() is None


def test_an_interrupt_s_message_comes_before_a_late_steer_and_is_taken_once() -> None:
    waits = Waits()
    waits.steering.send("late")
    waits.interrupt_with("stop, do this")
    assert waits.follow_up() == "stop, do this\n\nlate"
    assert waits.follow_up() is None


@given(st.lists(st.text()), st.lists(st.text()))
def test_the_follow_up_joins_interrupts_then_steers_oldest_first(interrupts, steered) -> None:
    waits = Waits()
    for text in steered:
        waits.steering.send(text)
    for text in interrupts:
        waits.interrupt_with(text)
    texts = ["\n\n".join(part) for part in (interrupts, steered) if part]
    assert waits.follow_up() == ("\n\n".join(texts) if texts else None)
