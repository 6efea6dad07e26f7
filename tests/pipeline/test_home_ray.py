"""The whole-home work on Ray gives what one process gives: ``replay --all``, ``export`` (the
same file, byte for byte) and the insights index (the same rows in the same order), on a local
Ray started here and, through the command line, on that cluster joined by its address."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from pipeline.cli.cmd_replay import replay_every
from pipeline.export.exporter import export_sessions
from pipeline.insights.index import open_index
from pipeline.ray_cluster import OnRay, join_ray
from tests.pipeline.home_work import LATE_SECRET, record_home

ROOT = Path(__file__).resolve().parent.parent.parent
ON_RAY = OnRay()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home-ray") / "home"
    sessions = record_home(home)
    # The workers the local Ray starts inherit this environment: they import mibyan from here.
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update(PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    ray = join_ray(None, 2)
    try:
        yield sessions
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_replay_on_ray_gives_the_verdicts_of_one_process(root) -> None:
    one, on_ray = replay_every(root, jobs=1), replay_every(root, jobs=2, ray=ON_RAY)
    assert one.held and one.sessions > 8
    assert attrs.evolve(one, seconds=0) == attrs.evolve(on_ray, seconds=0)


def test_export_on_ray_writes_the_file_one_process_writes(root, tmp_path) -> None:
    env = {"TEAM_KEY": LATE_SECRET}  # named by one log only: every worker must redact it
    one = export_sessions(root, tmp_path / "one.jsonl", jobs=1, env=env, lineage="segments")
    on_ray = export_sessions(root, tmp_path / "ray.jsonl", jobs=2, ray=ON_RAY, env=env,
                             lineage="segments")
    assert attrs.evolve(one, path=None) == attrs.evolve(on_ray, path=None)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "ray.jsonl").read_bytes()
    assert LATE_SECRET not in (tmp_path / "ray.jsonl").read_text()


def _index(root: Path, path: Path, **kw) -> tuple:
    with open_index(root, path=path, **kw) as (con, report):
        events = con.execute("SELECT * FROM events ORDER BY rowid").fetchall()
        logs = con.execute("SELECT * FROM logs ORDER BY rowid").fetchall()
    return events, logs, attrs.evolve(report, seconds=0.0)


def test_the_index_read_on_ray_holds_what_one_process_reads(root, tmp_path) -> None:
    one = _index(root, tmp_path / "one.duckdb", jobs=1)
    on_ray = _index(root, tmp_path / "ray.duckdb", jobs=2, ray=ON_RAY)
    assert one == on_ray and len(one[0]) > 100


def test_export_joins_a_cluster_by_its_address(root, tmp_path) -> None:
    """The command line's ``--backend ray --ray-address`` (the options ``replay --all`` and
    ``insights`` share): a second driver joins the running cluster."""
    address = join_ray(None, 2).get_runtime_context().gcs_address
    exported = subprocess.run(
        [sys.executable, "-m", "pipeline.cli.main", "--home", str(root.parent), "export",
         str(tmp_path / "cli.jsonl"), "--backend", "ray", "--ray-address", address,
         "--jobs", "2"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, check=False)
    assert exported.returncode == 0, exported.stderr[-3000:]
    export_sessions(root, tmp_path / "one.jsonl", jobs=1)
    assert (tmp_path / "cli.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


def test_export_on_ray_in_small_groups_streams_the_file_one_process_writes(
        root, tmp_path, monkeypatch) -> None:
    """Every session a Ray task of its own, a few in flight, each group written as its turn
    comes: the JSONL, its provenance sidecar and the Parquet are those of one process."""
    from pipeline.export import parallel, parquet_out
    monkeypatch.setattr(parallel, "GROUP_BYTES", 1)
    monkeypatch.setattr(parquet_out, "BATCH_ROWS", 2)
    env = {"TEAM_KEY": LATE_SECRET}
    for name, kw in (("out.jsonl", {"provenance": "sidecar"}), ("out.parquet", {})):
        files = []
        for where, ray in (("one", None), ("ray", ON_RAY)):
            out = tmp_path / where / name
            export_sessions(root, out, jobs=1 if ray is None else 2, ray=ray, env=env, **kw)
            files.append([p.read_bytes() for p in sorted(out.parent.glob(f"{name}*"))])
        assert files[0] == files[1]


def test_the_index_read_on_ray_in_small_groups_holds_what_one_process_reads(
        root, tmp_path, monkeypatch) -> None:
    """Every log a Ray task of its own, a few in flight, each loaded as its turn comes."""
    from pipeline.insights import parallel_plan
    one = _index(root, tmp_path / "one.duckdb", jobs=1)
    monkeypatch.setattr(parallel_plan, "GROUP_BYTES", 1)
    assert _index(root, tmp_path / "ray.duckdb", jobs=2, ray=ON_RAY) == one
