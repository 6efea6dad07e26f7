"""The insights index read on a pool of processes (``jobs``) holds exactly what one process
gives it: the same rows in the same order, the same report, broken and appended logs alike;
the logs go to the workers in bounded groups, a bounded number in flight, loaded in order."""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest

from pipeline import ordered_work
from pipeline.insights import index, parallel_plan
from pipeline.insights.index import open_index
from pipeline.insights.parallel_plan import chosen_jobs, groups_of
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


def test_groups_are_consecutive_bounded_and_jobs_default_to_cores_for_large_homes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel_plan, "GROUP_BYTES", 10)
    sizes = {"a": 4, "b": 5, "c": 12, "d": 3, "e": 3, "f": 3, "g": 1}
    groups = groups_of(sizes, 1)
    assert [s for group in groups for s in group] == list(sizes)
    assert all(len(group) == 1 or sum(sizes[s] for s in group) <= 10 for group in groups)
    assert groups_of(sizes, 2) == [[s] for s in sizes]  # at least 4 groups per worker
    assert groups_of({"a": 1}, 4) == [["a"]]
    assert chosen_jobs(3, 0, 2) == 2 and chosen_jobs(None, 10, 50) == 1
    assert chosen_jobs(None, 10**9, 50) >= 1


def test_groups_go_out_bounded_and_are_loaded_in_the_order_of_the_logs(
        sample: Sample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _home(sample, tmp_path)
    sizes = {p.stem: p.stat().st_size for p in root.glob("*.jsonl")}
    limit = 2 * max(sizes.values())  # a few logs a group, many groups a worker
    monkeypatch.setattr(parallel_plan, "GROUP_BYTES", limit)
    loaded: list[list[str]] = []
    waiting: list[int] = []
    replace = index._replace

    def spy(con, touched, clear, part, rows) -> None:
        if part is not None:
            loaded.append(touched)
            waiting.append(len(list(Path(part).parent.glob("*.part"))))
        replace(con, touched, clear, part, rows)

    monkeypatch.setattr(index, "_replace", spy)
    with open_index(root, path=tmp_path / "i.duckdb", jobs=2) as (con, report):
        events = con.execute("SELECT * FROM events ORDER BY rowid").fetchall()
    assert len(loaded) > 2 * ordered_work.GROUPS_PER_WORKER
    assert all(sum(sizes[s] for s in group) <= limit for group in loaded)
    assert [s for group in loaded for s in group] == sorted(sizes) == list(report.indexed)
    # The groups' scratch files: the one being loaded and those handed out, never the home's.
    assert max(waiting) <= 2 * ordered_work.WINDOW_PER_WORKER + 1
    monkeypatch.setattr(index, "_replace", replace)
    assert _state(root, tmp_path / "one.duckdb", 1)[0] == events


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
