"""The whole-home work on a pool of processes writes what one process writes: ``export
--jobs N`` the same file, byte for byte, in the same order (and the same report), replay the
same verdicts."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pipeline.cli.cmd_replay import replay_every
from pipeline.export.exporter import export_sessions
from tests.pipeline.home_work import LATE_SECRET, record_home


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return record_home(tmp_path_factory.mktemp("home-jobs") / "home")


def _export(root: Path, out: Path, jobs: int, **kw) -> tuple[bytes, ...]:
    report = export_sessions(root, out, jobs=jobs, **kw)
    files = [out, *sorted(out.parent.glob(f"{out.name}.*"))]
    assert report.samples > 0
    return (repr(attrs.evolve(report, path=Path("-"))).encode(),
            *(path.read_bytes() for path in files))


@pytest.mark.parametrize(("fmt", "name", "kw"), [
    ("sharegpt", "out.jsonl", {}),
    ("openai", "out.jsonl", {"provenance": "sidecar", "lineage": "segments"}),
    ("trl", "out.parquet", {"trainable_only": False}),
])
def test_export_on_processes_writes_the_file_one_process_writes(root, tmp_path, fmt, name,
                                                                 kw) -> None:
    one = _export(root, tmp_path / "one" / name, 1, fmt=fmt, **kw)
    three = _export(root, tmp_path / "three" / name, 3, fmt=fmt, **kw)
    assert one == three


def test_a_key_one_log_names_is_redacted_in_every_worker_s_samples(root, tmp_path) -> None:
    """The keys to redact are those of every log's credential labels: a worker that never saw
    the labelled log must still redact its key (here, said in that very session)."""
    env = {"TEAM_KEY": LATE_SECRET}
    one = _export(root, tmp_path / "one" / "out.jsonl", 1, env=env)
    three = _export(root, tmp_path / "three" / "out.jsonl", 3, env=env)
    assert one == three
    assert LATE_SECRET not in three[1].decode()
    # without the label's key in the environment the words are exported as they were said
    plain = _export(root, tmp_path / "plain" / "out.jsonl", 3, env={})
    assert LATE_SECRET in plain[1].decode()


def test_replay_on_processes_gives_the_verdicts_of_one(root) -> None:
    one, two = replay_every(root, jobs=1), replay_every(root, jobs=2)
    assert one.held and one.sessions > 8
    assert attrs.evolve(one, seconds=0) == attrs.evolve(two, seconds=0)
