"""``Admission``: the turns let in at once, and the wait each refused client is told, on a
virtual schedule spaced by the gateway's measured rate of turns."""

from __future__ import annotations

import pytest

from pipeline.serve.admission import (
    FIRST_TURN_SECONDS,
    MIN_RETRY_AFTER,
    TURNS_PER_CORE,
    Admission,
    Full,
    default_max_busy,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _refusals(admission: Admission, n: int) -> list[float]:
    waits = []
    for _ in range(n):
        with pytest.raises(Full) as refused:
            admission.enter()
        waits.append(refused.value.retry_after)
    return waits


def test_the_wait_grows_with_the_refused_and_shrinks_as_they_come_back():
    clock = Clock()
    admission = Admission(4, clock=clock)
    started = [admission.enter() for _ in range(4)]
    clock.now += 8.0  # the four turns took 8 s each: the full gateway ends a turn every 2 s
    for at in started:
        admission.leave(at)
    assert admission.turn_seconds == pytest.approx(8.0 - (8.0 - FIRST_TURN_SECONDS) * 0.8 ** 4)
    spacing = admission.turn_seconds / 4
    started = [admission.enter() for _ in range(4)]
    assert admission.full()
    waits = _refusals(admission, 5)
    assert waits == pytest.approx([spacing * k for k in range(1, 6)])
    assert admission.refused == 5
    clock.now += 2 * spacing  # two of them are back (and refused again: still full)
    assert _refusals(admission, 1) == pytest.approx([4 * spacing])
    clock.now += 100.0  # all came back long ago: a new refusal waits one turn's share
    assert _refusals(admission, 1) == pytest.approx([spacing])
    admission.leave(started[0])
    assert not admission.full() and admission.enter()


def test_the_wait_is_never_under_the_floor_nor_over_the_ceiling():
    clock = Clock()
    admission = Admission(100, max_retry_after=3.0, clock=clock)
    for _ in range(100):
        admission.enter()
    waits = _refusals(admission, 400)  # 2 s / 100: 20 ms apart
    assert min(waits) == pytest.approx(MIN_RETRY_AFTER)
    assert max(waits) == pytest.approx(3.0)
    assert waits == sorted(waits)


def test_a_turn_that_leaves_frees_its_place():
    admission = Admission(1)
    started = admission.enter()
    assert admission.busy == 1 and admission.full()
    with pytest.raises(Full) as refused:
        admission.enter()
    assert refused.value.limit == 1
    assert refused.value.retry_after == pytest.approx(FIRST_TURN_SECONDS)
    admission.leave(started)
    assert admission.busy == 0 and not admission.full()


def test_the_default_limit_follows_the_cores():
    assert default_max_busy(1) == TURNS_PER_CORE
    assert default_max_busy(8) == 8 * TURNS_PER_CORE
    assert default_max_busy() >= TURNS_PER_CORE
