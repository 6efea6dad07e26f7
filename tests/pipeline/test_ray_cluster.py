"""The pieces of the Ray path that need no cluster: how sessions are grouped into tasks, the
command-line options, a task on a node that does not see the home, and the ordered window."""

from __future__ import annotations

import argparse

import pytest

from pipeline.ray_cluster import OnRay, by_bytes, check_home, in_order, on_ray
from stages.errors import UsageError


def test_groups_are_consecutive_and_of_about_the_same_bytes() -> None:
    sizes = {f"s{n}": size for n, size in enumerate([50, 10, 10, 10, 10, 5, 5, 100, 1])}
    groups = by_bytes(sizes, 4)
    assert [s for group in groups for s in group] == list(sizes)  # order kept, none lost
    assert all(sum(sizes[s] for s in group) <= 50 or len(group) == 1 for group in groups)
    assert by_bytes({"a": 0, "b": 0}, 3) == [["a", "b"]]
    assert by_bytes({}, 2) == []


def test_the_backend_options() -> None:
    assert on_ray(argparse.Namespace(backend="processes", ray_address=None)) is None
    assert on_ray(argparse.Namespace(backend="ray", ray_address="10.0.0.1:6379")) == \
        OnRay("10.0.0.1:6379")
    with pytest.raises(UsageError, match="--ray-address goes with --backend ray"):
        on_ray(argparse.Namespace(backend="processes", ray_address="10.0.0.1:6379"))
    assert OnRay().workers(3) == 3  # given: no cluster joined to count its CPUs


def test_a_node_without_the_home_says_so(tmp_path) -> None:
    check_home(tmp_path)
    with pytest.raises(UsageError, match="filesystem every node mounts"):
        check_home(tmp_path / "elsewhere" / "sessions")


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
