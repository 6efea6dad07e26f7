"""Parquet exports every consumer loads: tool schemas and TRL tool-call arguments are JSON
text, so rows whose arguments differ in shape (or in type) share one schema, and HF
``datasets``, pandas and DuckDB read back exactly what was exported."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from effects.performers import Effects
from pipeline.agent import Agent
from pipeline.export.exporter import export_sessions
from pipeline.providers import ProviderRouter
from pipeline.settings import AgentSettings
from pipeline.testing import CountingIds, FakeClock
from stages.log.events import SessionSettings
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.eval_sessions import lookup

# One argument a string, then an object, then another key altogether.
ARGUMENTS = ['{"query": "plain"}', '{"query": {"deep": [1, 2]}}', '{"limit": 3}']


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("consumers")
    with FakeOpenAIServer() as srv:
        for n, arguments in enumerate(ARGUMENTS):
            srv.script(Reply.tool_calls([("lookup", arguments)]), Reply.text(f"done {n}"))
            settings = SessionSettings(model="m", provider="openai", base_url=srv.base_url,
                                       stream=False)
            with Agent(settings=settings,
                       agent_settings=AgentSettings(home=home, durability="flush"),
                       effects=Effects(clock=FakeClock(), ids=CountingIds(prefix=f"c{n}_"),
                                       model=ProviderRouter(default_key="sk-c", keys={})),
                       tools=[lookup]) as agent:
                agent.run(f"look {n}")
    return home


def _calls(rows: list[dict]) -> list[str]:
    return [call["function"]["arguments"] for row in rows for m in row["messages"]
            for call in (m.get("tool_calls") or ())]


@pytest.mark.parametrize("fmt", ["trl", "openai"])
def test_parquet_keeps_arguments_and_tools_as_json_text(home, fmt, tmp_path):
    out = tmp_path / f"{fmt}.parquet"
    export_sessions(home / "sessions", out, fmt=fmt)
    table = pq.read_table(out)
    assert str(table.schema.field("tools").type) == "string"
    rows = table.to_pylist()
    assert [json.loads(a) for a in _calls(rows)] == [json.loads(a) for a in ARGUMENTS]
    originals = [json.loads(line) for line in _jsonl(home, fmt, tmp_path).open()]
    assert [json.loads(r["tools"]) for r in rows] == [o["tools"] for o in originals]
    # No row gains the keys of another row's arguments.
    assert all("null" not in a for a in _calls(rows))


def _jsonl(home: Path, fmt: str, tmp_path: Path) -> Path:
    out = tmp_path / f"{fmt}.jsonl"
    export_sessions(home / "sessions", out, fmt=fmt)
    return out


def test_datasets_pandas_and_duckdb_read_the_trl_parquet(home, tmp_path):
    import datasets
    out = tmp_path / "trl.parquet"
    export_sessions(home / "sessions", out, fmt="trl")
    data = datasets.load_dataset("parquet", data_files=str(out), split="train",
                                 cache_dir=str(tmp_path / "cache"))
    assert [json.loads(a) for a in _calls(list(data))] == [json.loads(a) for a in ARGUMENTS]
    frame = pq.read_table(out).to_pandas()
    assert len(frame) == 3 and all(json.loads(t)[0]["function"]["name"] == "lookup"
                                   for t in frame["tools"])
    found = duckdb.execute(f"SELECT count(*) FROM '{out}' WHERE tools LIKE '%lookup%'")
    assert found.fetchall() == [(3,)]
