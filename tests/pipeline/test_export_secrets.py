"""An export redacts each sample in full before any of it reaches a file: the key that a later
session's credential label names is masked in an earlier session's text, and no file the
export writes (its output, a sidecar, a Parquet spool, their temporary files) ever holds that
key in clear, not even for a while. Before, a first pass wrote the earlier sessions' samples
unmasked to a temporary file and a second pass wrote them again once the label was met."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.agent import Agent
from pipeline.export import parallel, writers
from pipeline.export.exporter import export_sessions
from pipeline.export.parquet_out import ParquetSink
from tests.fake_openai import FakeOpenAIServer, Reply

LABEL = "LATER_TEAM_KEY"
# Said in the first session, which names no credential; the last session's label names it.
KEY = "later-team-key-0123456789abcdef"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home-secrets") / "home"
    with FakeOpenAIServer(Reply.text("noted")) as server:
        with Agent(base_url=server.base_url, home=home, model="m", stream=False) as agent:
            agent.run(f"our team key is {KEY}")
        os.environ[LABEL] = "sk-recorded-key-aaaaaaaaaaaa"  # the key the session ran with
        try:
            with Agent(base_url=server.base_url, home=home, model="m", stream=False,
                       credentials=[LABEL]) as agent:
                agent.run("hello")
        finally:
            del os.environ[LABEL]
    return home / "sessions"


@pytest.fixture
def rows_to_disk(monkeypatch) -> list[str]:
    """Every row handed to a file of the export, as the text it is written as."""
    seen: list[str] = []

    def spy(add: Callable[[Any, dict[str, Any]], None]) -> Callable[..., None]:
        def adding(sink: Any, row: dict[str, Any]) -> None:
            seen.append(json.dumps(row, ensure_ascii=False))
            add(sink, row)
        return adding

    monkeypatch.setattr(writers._JsonlSink, "add", spy(writers._JsonlSink.add))
    monkeypatch.setattr(ParquetSink, "add", spy(ParquetSink.add))
    return seen


@pytest.mark.parametrize(("fmt", "name", "kw"), [
    ("sharegpt", "out.jsonl", {}),
    ("openai", "out.jsonl", {"provenance": "sidecar"}),
    ("trl", "out.parquet", {}),
])
@pytest.mark.parametrize("jobs", [1, 2])
def test_no_file_ever_holds_a_key_a_later_session_names(root, tmp_path, monkeypatch,
                                                        rows_to_disk, fmt, name, kw,
                                                        jobs) -> None:
    monkeypatch.setattr(parallel, "GROUP_BYTES", 1)  # each session a group of its own
    out = tmp_path / name
    report = export_sessions(root, out, fmt=fmt, jobs=jobs, env={LABEL: KEY}, **kw)
    assert report.lineages == 2 and report.redacted == 1
    assert not [row for row in rows_to_disk if KEY in row]
    # each sample handed over once (and its provenance once to the sidecar)
    assert len(rows_to_disk) == report.samples * (2 if "provenance" in kw else 1)
    assert any("our team key is" in row for row in rows_to_disk)
    assert KEY.encode() not in out.read_bytes()
    assert {p.name for p in tmp_path.iterdir()} <= {name, f"{name}.provenance.jsonl"}
