"""Every export format against its JSON Schema, loaded back with Hugging Face ``datasets``
(JSONL and Parquet) and rendered through a tool-aware ChatML template."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jinja2
import jsonschema
import pytest

from pipeline.export.exporter import export_sessions
from pipeline.export.schemas import SCHEMAS
from tests.pipeline.export_sessions import calls_session, compressed_session, tool_session

TEMPLATE = jinja2.Environment().from_string(
    (Path(__file__).parent / "chatml_tools.jinja").read_text())
_ROLES = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("export")
    tool_session(home)
    compressed_session(home)
    calls_session(home)
    return home


def _export(home: Path, fmt: str, suffix: str, lineage: str = "stitched") -> Path:
    out = home / f"{fmt}.{lineage}.{suffix}"
    export_sessions(home / "sessions", out, fmt=fmt, lineage=lineage, provenance="inline")
    return out


@pytest.mark.parametrize("lineage", ["stitched", "segments"])
@pytest.mark.parametrize("fmt", sorted(SCHEMAS))
def test_every_sample_matches_its_schema(home, fmt, lineage) -> None:
    rows = [json.loads(line) for line in _export(home, fmt, "jsonl", lineage).open()]
    assert len(rows) == (3 if lineage == "stitched" else 5)
    for row in rows:
        jsonschema.validate(row, SCHEMAS[fmt])


@pytest.mark.parametrize("fmt", sorted(SCHEMAS))
def test_the_schema_rejects_a_stray_field(home, fmt) -> None:
    row = json.loads(_export(home, fmt, "jsonl").read_text().splitlines()[0])
    row["provenance"]["api_key"] = "x"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(row, SCHEMAS[fmt])


def _messages(fmt: str, row: dict) -> list[dict]:
    if fmt != "sharegpt":
        return row["messages"]
    return [{"role": _ROLES[t["from"]], "content": t["value"]} for t in row["conversations"]]


def _tools(row: dict) -> list[dict] | None:
    """The tool schemas: Parquet keeps them as JSON text, as chat datasets on the Hub do."""
    tools = row.get("tools")
    return json.loads(tools) if isinstance(tools, str) else tools


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
@pytest.mark.parametrize("fmt", sorted(SCHEMAS))
def test_datasets_loads_it_and_a_chat_template_renders_it(home, fmt, suffix, tmp_path) -> None:
    import datasets
    path = _export(home, fmt, suffix)
    loader = "json" if suffix == "jsonl" else "parquet"
    data = datasets.load_dataset(loader, data_files=str(path), split="train",
                                 cache_dir=str(tmp_path / "cache"))
    originals = [json.loads(line) for line in _export(home, fmt, "jsonl").open()]
    assert data.num_rows == len(originals) == 3
    for row, original in zip(data, originals, strict=True):
        assert row["provenance"]["session_id"] == original["provenance"]["session_id"]
        messages = _messages(fmt, row)
        text = TEMPLATE.render(messages=messages, tools=_tools(row),
                               add_generation_prompt=False)
        assert text.count("<|im_start|>") == text.count("<|im_end|>")
        assert text.count("<|im_start|>") == _turns(_messages(fmt, original))
        for message in _messages(fmt, original):
            if message.get("content"):
                assert message["content"] in text
        calls = sum(len(m.get("tool_calls") or ()) for m in _messages(fmt, original))
        if fmt != "sharegpt":
            assert text.count("<tool_call>") == calls
            results = sum(m["role"] == "tool" for m in _messages(fmt, original))
            assert text.count("<tool_response>") == results


def _turns(messages: list[dict]) -> int:
    """Rendered turns: consecutive tool results share one."""
    return sum(1 for i, m in enumerate(messages)
               if m["role"] != "tool" or i == 0 or messages[i - 1]["role"] != "tool")


def test_trl_reasoning_renders_as_think(home) -> None:
    row = json.loads(_export(home, "trl", "jsonl").read_text().splitlines()[-1])
    text = TEMPLATE.render(messages=row["messages"], tools=row["tools"])
    assert "<think>\nTwo sums; run them together.\n</think>\nLet me add." in text


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_the_logs_of_every_rules_version_export_and_match_the_schemas(version, tmp_path) -> None:
    # A copy: export indexes the logs beside their folder, and the corpus is tracked.
    corpus = tmp_path / "sessions"
    shutil.copytree(Path(__file__).parent.parent / "corpus" / version, corpus)
    for fmt in sorted(SCHEMAS):
        for lineage in ("stitched", "segments"):
            out = tmp_path / f"{fmt}.{lineage}.jsonl"
            report = export_sessions(corpus, out, fmt=fmt, lineage=lineage,
                                     provenance="inline")
            rows = [json.loads(line) for line in out.open()]
            assert report.lineages >= 1 and len(rows) >= report.lineages
            for row in rows:
                jsonschema.validate(row, SCHEMAS[fmt])
