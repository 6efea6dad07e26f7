"""Token-level samples end to end on the embedded model (llama.cpp's own server, a real
model): a two-turn session with tool calls recorded with ``record_tokens``, exported; the ids
decode back (the server's ``/detokenize``) to the text recorded, the masks cover exactly the
model's tokens, and the exports load in ``datasets`` and validate as Atropos' groups."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from effects.local.llama_server import LocalServer
from pipeline.agent import Agent
from pipeline.export.exporter import export_sessions
from pipeline.export.tokens import read_token_session
from pipeline.shell.replay import replay
from pipeline.tools import tool
from stages.log.events import ModelReplied
from tests.pipeline.atropos_schema import ScoredDataGroup

pytestmark = pytest.mark.local_model

EOS = "<|im_end|>"  # SmolLM2's end of turn, the last token of every reply


@pytest.fixture(autouse=True)
def no_provider(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MIBYAN_MODEL"):
        monkeypatch.delenv(name, raising=False)


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return f"It is sunny in {city}."


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("tokens-home")
    with Agent(home=home, tools=[get_weather], tool_choice="required", max_turns=1,
               max_tokens=48, record_tokens=True) as agent:
        first = agent.run_conversation("What is the weather in Paris?")
        agent.run_conversation("And in London?")
    return home, first["session_id"]


def _detokenize(home: Path, ids: list[int]) -> str:
    port = LocalServer.get(home).port
    answer = httpx2.post(f"http://127.0.0.1:{port}/detokenize", json={"tokens": ids},
                         timeout=30.0)
    answer.raise_for_status()
    return answer.json()["content"]


def _replies(home: Path, sid: str) -> list[ModelReplied]:
    events = [from_payload(e.kind, e.schema_version, e.payload)
              for e in read_envelopes(session_path(home / "sessions", sid))]
    return [e for e in events if isinstance(e, ModelReplied)]


def test_recorded_ids_decode_to_the_recorded_text(recorded):
    home, sid = recorded
    replies = _replies(home, sid)
    assert len(replies) == 4 and sum(bool(r.message.tool_calls) for r in replies) == 2
    for reply in replies:
        tokens = reply.tokens
        assert tokens is not None and tokens.ids is not None and tokens.prompt_ids
        assert tokens.prompt_source == "llama.cpp"
        text = _detokenize(home, list(tokens.ids))
        assert text == "".join(tokens.pieces) + (EOS if reply.finish_reason != "length" else "")
        assert not reply.streamed
        if reply.message.tool_calls:  # the model wrote the call; the server parsed it
            assert reply.message.tool_calls[0].name in text
        else:
            assert text.removesuffix(EOS).strip() == (reply.message.content or "").strip()
    assert replay(home / "sessions", sid).identical


def test_the_masks_cover_exactly_the_models_tokens(recorded):
    home, sid = recorded
    session = read_token_session(home / "sessions", sid)
    calls = [r.tokens for r in _replies(home, sid)]
    assert session.calls_without_tokens == 0
    assert sum(s.calls for s in session.samples) == len(calls)
    written = [i for c in calls if c is not None for i in (c.ids or ())]
    assert [t for s in session.samples for t in s.policy_tokens()] == written
    for sample in session.samples:
        context = _detokenize(home, [t for t, m in zip(sample.tokens, sample.mask,
                                                        strict=True) if not m])
        assert "<|im_start|>user" in context and "<|im_start|>assistant" in context
        model = _detokenize(home, sample.policy_tokens())
        assert "<|im_start|>" not in model  # no template token is the model's
    assert any("It is sunny in" in _detokenize(home, list(s.tokens)) for s in session.samples)


def test_the_exports_load_in_datasets_and_validate_as_atropos_groups(recorded, tmp_path):
    datasets = pytest.importorskip("datasets")
    home, _ = recorded
    atropos = tmp_path / "groups.jsonl"
    export_sessions(home / "sessions", atropos, fmt="atropos",
                    score=lambda s: 1.0 if s.completed else 0.0)
    groups: list[dict[str, Any]] = [json.loads(line) for line in atropos.open()]
    assert len(groups) == 1
    group = ScoredDataGroup.model_validate(groups[0])
    assert all(len(t) == len(m) for t, m in zip(group.tokens, group.masks, strict=True))
    loaded = datasets.load_dataset("json", data_files=str(atropos), split="train")
    assert loaded[0]["tokens"] == groups[0]["tokens"]
    trl = tmp_path / "rows.parquet"
    export_sessions(home / "sessions", trl, fmt="trl-tokens")
    rows = datasets.load_dataset("parquet", data_files=str(trl), split="train")
    assert len(rows) >= 1 and rows[0]["completion_mask"][0] == 1
    assert len(rows[0]["completion_ids"]) == len(rows[0]["completion_logprobs"])
