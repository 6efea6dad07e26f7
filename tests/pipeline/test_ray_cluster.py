"""The pieces of the Ray path that need no cluster: the command-line options and a task on a
node that does not see the home."""

from __future__ import annotations

import argparse

import pytest

from pipeline.ray_cluster import OnRay, check_home, on_ray
from stages.errors import UsageError


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
