"""An export holds a bounded part of the home at a time: the sessions are shaped in groups of
bounded size, at most a few groups are in flight, and each group's samples are written as the
group comes back, in order, so the file is the one a single pass writes, byte for byte, on
one process or many."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline.export.exporter as exporter
import pipeline.export.passes as passes
from pipeline.export import parallel, parquet_out
from pipeline.export.exporter import export_sessions
from pipeline.export.parallel import groups_of
from pipeline.export.parquet_out import ParquetSink, parquet_row
from tests.pipeline.home_work import LATE_SECRET, record_home


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return record_home(tmp_path_factory.mktemp("home-stream") / "home")


@pytest.fixture
def one_session_groups(monkeypatch) -> None:
    """Every session a group of its own (the test home is far smaller than a real group)."""
    monkeypatch.setattr(parallel, "GROUP_BYTES", 1)


def _files(out: Path) -> tuple[bytes, ...]:
    return tuple(path.read_bytes() for path in [out, *sorted(out.parent.glob(f"{out.name}.*"))])


def test_each_group_is_written_before_the_next_is_shaped(root, tmp_path, monkeypatch,
                                                         one_session_groups) -> None:
    """The driver hands a group's samples to the writer before it asks for the next group's:
    before, it shaped the whole home, held every sample, and then wrote them."""
    seen: list[tuple[str, int]] = []
    shape, write = exporter.shape_group, passes.write_samples

    def shaping(group, *args):
        shaped = shape(group, *args)
        seen.append(("shaped", sum(len(s.rows) for s in shaped)))
        return shaped

    def writing(rows, *args, **kw):
        def pulled():
            for row in rows:
                seen.append(("written", 1))
                yield row
        return write(pulled(), *args, **kw)

    monkeypatch.setattr(exporter, "shape_group", shaping)
    monkeypatch.setattr(passes, "write_samples", writing)
    report = export_sessions(root, tmp_path / "out.jsonl", jobs=1, env={})
    shaped = [i for i, (what, _) in enumerate(seen) if what == "shaped"]
    assert len(shaped) == report.lineages + len(report.skipped) > 8
    for before, after in itertools.pairwise([*shaped, len(seen)]):
        # everything between two shapings is the writing of the first one's samples
        assert [what for what, _ in seen[before + 1:after]] == ["written"] * seen[before][1]


@pytest.mark.parametrize(("fmt", "name", "kw"), [
    ("sharegpt", "out.jsonl", {}),
    ("openai", "out.jsonl", {"provenance": "sidecar", "lineage": "segments"}),
    ("trl", "out.parquet", {"trainable_only": False}),
])
def test_small_groups_on_processes_write_what_one_process_writes(
        root, tmp_path, monkeypatch, one_session_groups, fmt, name, kw) -> None:
    monkeypatch.setattr(parquet_out, "BATCH_ROWS", 2)  # many row groups
    reports = {}
    for jobs in (1, 2):
        report = export_sessions(root, tmp_path / str(jobs) / name, jobs=jobs, fmt=fmt,
                                 env={"TEAM_KEY": LATE_SECRET}, **kw)
        reports[jobs] = attrs.evolve(report, path=None)
        assert sorted(p.name for p in (tmp_path / str(jobs)).iterdir()) == sorted(
            p.name for p in (tmp_path / "1").iterdir())  # no spool or temporary file left
    assert reports[1] == reports[2] and reports[1].samples > 8
    assert _files(tmp_path / "1" / name) == _files(tmp_path / "2" / name)
    assert LATE_SECRET not in (tmp_path / "2" / name).read_bytes().decode(errors="replace")


def test_the_file_is_written_once_and_replaces_the_old_one_at_the_end(
        root, tmp_path, monkeypatch, one_session_groups) -> None:
    """The key a late log names is known before the first group is shaped: one pass writes
    the file (before, a first pass was dropped and a second one written)."""
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    writes: list[str] = []
    write = passes.write_samples

    def writing(rows, path, **kw):
        writes.append(path.read_text())
        return write(rows, path, **kw)

    monkeypatch.setattr(passes, "write_samples", writing)
    export_sessions(root, out, jobs=2, env={"TEAM_KEY": LATE_SECRET})
    assert writes == ["old\n"]
    assert LATE_SECRET not in out.read_text() and "old" not in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_groups_are_bounded_and_keep_the_order(monkeypatch) -> None:
    sizes = {f"s{i:03d}": size for i, size in enumerate([1, 5, 3, 9, 2, 2, 7, 1] * 20)}
    monkeypatch.setattr(parallel, "GROUP_BYTES", 10)
    groups = groups_of(sizes, workers=2)
    assert [sid for group in groups for sid in group] == list(sizes)
    assert all(sum(sizes[s] for s in group) <= 10 for group in groups)
    # a small home still gives every worker a few groups
    assert len(groups_of({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}, workers=2)) == 5


def test_parquet_in_row_groups_reads_as_one_table(tmp_path, monkeypatch) -> None:
    """A field null or missing in the first row groups and filled later gets its type from the
    later rows, as one table of every row infers it; a key the first row lacks is kept (one
    table inferred from the first row's keys dropped a later sample's ``images``)."""
    monkeypatch.setattr(parquet_out, "BATCH_ROWS", 1)
    rows = [{"a": None, "s": {"x": 1}, "n": 1},
            {"a": "text", "s": {"y": "z", "x": 2}, "n": 2.5, "images": ["u"]},
            {"a": None, "s": {"x": 3}, "n": 3, "messages": [{"role": "assistant",
             "tool_calls": [{"function": {"name": "f", "arguments": {"k": 1}}}]}]}]
    sink = ParquetSink(tmp_path / "out.parquet")
    for row in rows:
        sink.add(row)
    sink.close()
    written = pq.read_table(tmp_path / "out.parquet")
    whole = pa.Table.from_pylist([parquet_row(row) for row in rows])
    assert written.select(whole.column_names) == whole
    assert written.column("images").to_pylist() == [None, ["u"], None]
    assert written.column("s").to_pylist()[0] == {"x": 1, "y": None}
    assert pq.ParquetFile(tmp_path / "out.parquet").num_row_groups == 3
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]
    assert json.loads(written.to_pylist()[2]["messages"][0]["tool_calls"][0]["function"][
        "arguments"]) == {"k": 1}
