"""Work handed out in order (``pipeline.ordered_work``): groups of logs, the ordered window, and
a pool of processes, without Ray."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from pipeline.ordered_work import by_bytes, groups_of, in_order, on_processes


def test_groups_are_consecutive_and_of_about_the_same_bytes() -> None:
    sizes = {f"s{n}": size for n, size in enumerate([50, 10, 10, 10, 10, 5, 5, 100, 1])}
    groups = by_bytes(sizes, 4)
    assert [s for group in groups for s in group] == list(sizes)  # order kept, none lost
    assert all(sum(sizes[s] for s in group) <= 50 or len(group) == 1 for group in groups)
    assert by_bytes({"a": 0, "b": 0}, 3) == [["a", "b"]]
    assert by_bytes({}, 2) == []


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 4), st.integers(1, 200))
def test_groups_keep_the_order_and_hold_at_most_the_bytes(sizes, workers, limit) -> None:
    named = {f"s{n:03d}": size for n, size in enumerate(sizes)}
    groups = groups_of(named, workers, limit)
    assert [s for group in groups for s in group] == list(named)
    assert all(sum(named[s] for s in group) <= limit or len(group) == 1 for group in groups)


def test_in_order_keeps_the_order_and_holds_at_most_a_window() -> None:
    """The ordered streaming of the export (on processes and on Ray) and of ``map_in_order``:
    at most ``window`` items are in flight, and one result is handed on before the items after
    the next window are submitted."""
    started: list[int] = []
    taken: list[int] = []
    in_flight: list[int] = []

    def submit(item: int) -> int:
        started.append(item)
        in_flight.append(len(started) - len(taken))
        return item

    def result(item: int) -> int:
        taken.append(item)
        return -item

    out = []
    for value in in_order(submit, result, iter(range(10)), window=3):
        assert len(started) <= len(out) + 1 + 3  # not run ahead of the caller
        out.append(value)
    assert out == [-item for item in range(10)]
    assert max(in_flight) == 3


def test_a_caller_that_stops_early_cancels_what_it_did_not_take() -> None:
    cancelled: list[int] = []
    taken = in_order(lambda item: item, lambda item: item, iter(range(10)), window=3,
                     cancel=cancelled.append)
    assert [next(taken), next(taken)] == [0, 1]
    taken.close()
    assert cancelled == [2, 3, 4]


def _pid_and(item: int, offset: int) -> tuple[int, int]:
    return os.getpid(), item + offset


def test_a_pool_of_processes_gives_every_result_in_order() -> None:
    done = list(on_processes(_pid_and, range(20), 100, jobs=2, preload="pipeline.ordered_work"))
    assert [value for _, value in done] == list(range(100, 120))
    assert os.getpid() not in {pid for pid, _ in done}
