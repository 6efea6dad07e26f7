"""The steering queue: what was sent and not yet taken, oldest first."""

from __future__ import annotations

from effects.steering import SteeringQueue


def test_take_joins_what_was_sent_and_empties_the_queue() -> None:
    queue = SteeringQueue()
    assert queue.take() is None
    queue.send("one")
    queue.send("two")
    assert queue.take() == "one\n\ntwo"
    assert queue.take() is None


def test_drop_forgets_what_was_sent_and_says_what_it_was() -> None:
    queue = SteeringQueue()
    queue.send("one")
    assert queue.drop() == ("one",)
    assert queue.drop() == () and queue.take() is None
