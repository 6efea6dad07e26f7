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
from pipeline.cli.main import main
from pipeline.export.exporter import export_sessions
from pipeline.providers import ProviderRouter
from pipeline.settings import AgentSettings
from pipeline.testing import CountingIds, FakeClock
from stages.errors import UsageError
from stages.log.events import SessionSettings
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.pipeline.eval_sessions import lookup

# One argument a string, then an object, then another key altogether.
ARGUMENTS = ['{"query": "plain"}', '{"query": {"deep": [1, 2]}}', '{"limit": 3}']


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return record_argument_sessions(tmp_path_factory.mktemp("consumers"))


def record_argument_sessions(home: Path) -> Path:
    """Three sessions, each calling ``lookup`` with one of ``ARGUMENTS``, then answering."""
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


def test_openai_lines_hold_only_the_documented_keys_unless_provenance_is_asked(home,
                                                                               tmp_path):
    plain = tmp_path / "plain.jsonl"
    export_sessions(home / "sessions", plain, fmt="openai")
    rows = [json.loads(line) for line in plain.open()]
    assert len(rows) == 3
    assert all(set(r) == {"messages", "tools", "parallel_tool_calls"} for r in rows)
    assert not (tmp_path / "plain.jsonl.provenance.jsonl").exists()
    inline = tmp_path / "inline.jsonl"
    export_sessions(home / "sessions", inline, fmt="openai", provenance="inline")
    inlined = [json.loads(line) for line in inline.open()]
    for output in ("jsonl", "parquet"):
        side = tmp_path / f"side.{output}"
        export_sessions(home / "sessions", side, fmt="openai", provenance="sidecar")
        beside = [json.loads(line) for line in (tmp_path / f"side.{output}.provenance.jsonl")
                  .open()]
        assert [b["index"] for b in beside] == [0, 1, 2]
        assert [b["provenance"] for b in beside] == [r["provenance"] for r in inlined]
        if output == "parquet":
            assert set(pq.read_table(side).column_names) == {"messages", "tools",
                                                             "parallel_tool_calls"}
    # The other formats keep it inline by default.
    trl = tmp_path / "trl.jsonl"
    export_sessions(home / "sessions", trl, fmt="trl")
    assert all("provenance" in json.loads(line) for line in trl.open())
    with pytest.raises(UsageError, match="provenance mode 'beside'"):
        export_sessions(home / "sessions", tmp_path / "x.jsonl", provenance="beside")


@pytest.fixture(scope="module")
def unfinished(tmp_path_factory) -> Path:
    """A session whose turn failed after its tool ran (it ends on the tool's result), and one
    that answered."""
    home = tmp_path_factory.mktemp("unfinished")
    with FakeOpenAIServer() as srv:
        srv.script(Reply.tool_calls([("lookup", '{"query": "a"}')]), Reply.error(400, "no"),
                   Reply.text("fine"))
        for n, question in enumerate(("fails", "answers")):
            settings = SessionSettings(model="m", provider="openai", base_url=srv.base_url,
                                       stream=False, max_retries=0)
            with Agent(settings=settings,
                       agent_settings=AgentSettings(home=home, durability="flush"),
                       effects=Effects(clock=FakeClock(), ids=CountingIds(prefix=f"u{n}_"),
                                       model=ProviderRouter(default_key="sk-u", keys={})),
                       tools=[lookup]) as agent:
                agent.run(question)
    return home


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "trl"])
def test_samples_end_on_an_answer_to_train_on_by_default(unfinished, fmt, tmp_path):
    out = tmp_path / "default.jsonl"
    report = export_sessions(unfinished / "sessions", out, fmt=fmt)
    rows = [json.loads(line) for line in out.open()]
    assert report.samples == len(rows) == 1
    last = rows[0]["conversations" if fmt == "sharegpt" else "messages"][-1]
    assert last.get("role", last.get("from")) in ("assistant", "gpt") and last["weight"] == 1
    every = tmp_path / "every.jsonl"
    export_sessions(unfinished / "sessions", every, fmt=fmt, trainable_only=False)
    rows = [json.loads(line) for line in every.open()]
    ends = sorted(r["conversations"][-1]["from"] if fmt == "sharegpt"
                  else r["messages"][-1]["role"] for r in rows)
    assert ends == (["gpt", "tool"] if fmt == "sharegpt" else ["assistant", "tool"])


def test_the_export_command_takes_provenance_and_all_samples(unfinished, tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    assert main(["--home", str(unfinished), "export", str(out), "--format", "openai",
                 "--provenance", "sidecar", "--all-samples"]) == 0
    assert len(out.read_text().splitlines()) == 2
    assert len((tmp_path / "o.jsonl.provenance.jsonl").read_text().splitlines()) == 2


def test_a_tokenizer_s_chat_template_takes_the_trl_samples_with_their_tools(home, tmp_path):
    """``tokenizer.apply_chat_template(messages, tools=...)``, as TRL's trainers call it, on
    a tiny tokenizer made here with a tool-aware ChatML template (no download)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast
    words = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    words.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]")
    tokenizer.chat_template = (Path(__file__).parent / "chatml_tools.jinja").read_text()
    out = tmp_path / "trl.jsonl"
    export_sessions(home / "sessions", out, fmt="trl")
    rows = [json.loads(line) for line in out.open()]
    for row, arguments in zip(rows, ARGUMENTS, strict=True):
        text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"],
                                             tokenize=False)
        assert '"name": "lookup"' in text and text.count("<|im_start|>assistant") == 2
        called = text.split('"arguments": ', 1)[1].split("}\n</tool_call>")[0]
        assert json.loads(called) == json.loads(arguments)
        ids = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True)
        assert len(ids) > 0
