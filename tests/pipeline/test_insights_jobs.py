"""The insights index read on a pool of processes (``jobs``) holds exactly what one process
gives it: the same rows in the same order, the same report, broken and appended logs alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest

from pipeline.insights.index import open_index
from pipeline.insights.parallel_plan import chosen_jobs, shards
from stages.errors import UsageError
from tests.pipeline.test_insights import copy_home
from tests.sample_home import Sample, record


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Sample:
    return record(tmp_path_factory.mktemp("insights-jobs") / "home")


def _home(sample: Sample, to: Path) -> Path:
    root = to / "home" / "sessions"
    copy_home(sample.root, root)
    # More logs than workers, so that each worker checks several: copies under other names
    # (each a problem: its records name another session), one of them broken as well.
    for n, path in enumerate(sorted(root.glob("*.jsonl"))):
        for k in range(3):
            shutil.copy(path, root / f"copy{k}-{n}-{path.name}")
    broken = sorted(root.glob("copy1-*.jsonl"))[0]
    data = bytearray(broken.read_bytes())
    data[-2] = ord("]")
    broken.write_bytes(bytes(data))
    return root


def _state(root: Path, index: Path, jobs: int | None) -> tuple:
    with open_index(root, path=index, jobs=jobs) as (con, report):
        events = con.execute("SELECT * FROM events ORDER BY rowid").fetchall()
        # Every column but the modification time (each home has its own copies).
        logs = con.execute("SELECT * EXCLUDE (mtime_ns) FROM logs ORDER BY rowid").fetchall()
        sessions = con.execute("SELECT * FROM sessions ORDER BY ALL").fetchall()
    return events, logs, sessions, attrs.evolve(report, seconds=0.0)


def test_two_jobs_index_what_one_does(sample: Sample, tmp_path: Path) -> None:
    one_root, two_root = _home(sample, tmp_path / "one"), _home(sample, tmp_path / "two")
    one = _state(one_root, tmp_path / "one.duckdb", 1)
    two = _state(two_root, tmp_path / "two.duckdb", 2)
    assert one == two
    assert len(one[3].problems) == 12 and one[3].records_added == len(one[0]) > 0
    assert len(one[3].indexed) == 16
    # An update after a log grew: read on the pool too, from where the index left it.
    for root in (one_root, two_root):
        grown = sorted(root.glob("copy2-*.jsonl"))[0]
        lines = grown.read_bytes().splitlines(keepends=True)
        grown.write_bytes(b"".join(lines[:4]))
    assert _state(one_root, tmp_path / "one.duckdb", 1) == \
        _state(two_root, tmp_path / "two.duckdb", 2)


def test_shares_balance_bytes_and_jobs_default_to_cores_for_large_homes() -> None:
    sizes = {"a": 10, "b": 7, "c": 5, "d": 3, "e": 1}
    parts = shards(sizes, 2)
    assert sorted(s for part in parts for s in part) == sorted(sizes)
    assert [sum(sizes[s] for s in part) for part in parts] == [13, 13]
    assert shards({"a": 1}, 4) == [["a"]]
    assert chosen_jobs(3, 0, 2) == 2 and chosen_jobs(None, 10, 50) == 1
    assert chosen_jobs(None, 10**9, 50) >= 1


def test_the_index_holds_at_most_its_memory_limit_and_indexes_the_same(
        sample: Sample, tmp_path: Path) -> None:
    root = _home(sample, tmp_path)
    with open_index(root, path=tmp_path / "default.duckdb") as (con, _):
        default = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        events = con.execute("SELECT * FROM events ORDER BY rowid").fetchall()
    assert default == "953.6 MiB"  # MEMORY_LIMIT, 1GB, not 80 % of the machine
    with open_index(root, path=tmp_path / "small.duckdb", memory_limit="64MB") as (con, _):
        assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "61.0 MiB"
        assert con.execute("SELECT * FROM events ORDER BY rowid").fetchall() == events


def test_a_memory_limit_duckdb_cannot_read_is_a_usage_error(sample: Sample,
                                                              tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="memory limit 'lots'"):
        with open_index(_home(sample, tmp_path), path=tmp_path / "i.duckdb",
                        memory_limit="lots"):
            pass
