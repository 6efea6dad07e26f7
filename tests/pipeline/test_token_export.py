"""Token-level recording and export against a loopback server speaking llama.cpp's shape
(tests/fake_llamacpp.py): the ids recorded, the prompt tokenised by the server, the samples
laid end to end, the masks over the model's tokens only, both trainers' shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.export.exporter import export_sessions
from pipeline.export.token_formats import IGNORED, atropos_groups, trl_rows
from pipeline.export.tokens import read_token_session
from pipeline.shell.replay import replay
from pipeline.tools import tool
from stages.log.events import ModelReplied
from tests.fake_llamacpp import FakeLlamaServer, Written, detokenize, tokenize
from tests.pipeline.atropos_schema import ScoredDataGroup

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
# The same call as a model may write it, which the template renders otherwise.
LOOSE_CALL = '<tool_call>\n{"name":"get_weather",\n "arguments":{"city":"Paris"}}\n</tool_call>'
ANSWER = "It is sunny in Paris."


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


def _session(home: Path, *replies: str, stream: bool = False, record: bool = True,
             tools: bool = True) -> tuple[str, FakeLlamaServer]:
    with FakeLlamaServer() as server:
        server.script(*(Written(r) for r in replies))
        with Agent(model="fake", base_url=server.base_url, api_key="sk-test", provider="llama",
                   home=home, tools=[get_weather] if tools else [], stream=stream,
                   record_tokens=record) as agent:
            result = agent.run_conversation("What is the weather in Paris?")
    assert result["completed"], result
    return result["session_id"], server


def _replies(home: Path, sid: str) -> list[ModelReplied]:
    events = [from_payload(e.kind, e.schema_version, e.payload)
              for e in read_envelopes(session_path(home / "sessions", sid))]
    return [e for e in events if isinstance(e, ModelReplied)]


def test_a_reply_records_its_ids_logprobs_and_the_prompt_the_server_tokenised(tmp_path):
    # Streaming asked for, but a call offering tools goes whole (llama.cpp refuses logprobs
    # on a stream with tools).
    sid, server = _session(tmp_path, CALL, ANSWER, stream=True)
    first, second = (r.tokens for r in _replies(tmp_path, sid))
    assert first is not None and second is not None
    assert first.ids == (*tokenize(CALL, parse_special=False), 2)
    assert "".join(first.pieces) == CALL and detokenize(list(second.ids or ())) == \
        ANSWER + "<|im_end|>"
    assert len(first.logprobs) == len(first.ids) and all(lp < 0 for lp in first.logprobs)
    assert first.prompt_source == "llama.cpp"
    assert detokenize(list(first.prompt_ids or ())).endswith(
        "What is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n")
    assert server.side_calls.count("/apply-template") == 2
    assert not any(body.get("stream") for body in server.requests)
    assert replay(tmp_path / "sessions", sid).identical


def test_a_streamed_reply_records_the_logprobs_of_every_chunk(tmp_path):
    sid, server = _session(tmp_path, ANSWER, stream=True, tools=False)
    [reply] = _replies(tmp_path, sid)
    assert reply.streamed and server.requests[0]["stream"]
    assert reply.tokens is not None and reply.tokens.ids == (*tokenize(ANSWER), 2)
    assert "".join(reply.tokens.pieces) == ANSWER and len(reply.tokens.logprobs) == len(ANSWER) + 1
    assert replay(tmp_path / "sessions", sid).identical


def test_a_session_not_recording_tokens_asks_for_none(tmp_path):
    sid, server = _session(tmp_path, ANSWER, record=False)
    assert [r.tokens for r in _replies(tmp_path, sid)] == [None]
    assert server.side_calls == []
    assert "logprobs" not in server.requests[0]


def test_calls_whose_prompts_extend_each_other_make_one_sample_masked_on_the_model(tmp_path):
    sid, _ = _session(tmp_path, CALL, ANSWER)
    session = read_token_session(tmp_path / "sessions", sid)
    assert session.calls_without_tokens == 0 and len(session.samples) == 1
    sample = session.samples[0]
    assert sample.calls == 2
    written = [*tokenize(CALL, parse_special=False), 2, *tokenize(ANSWER), 2]
    assert sample.policy_tokens() == written
    # What the mask leaves out is the system prompt, the user's message, the tool result.
    context = detokenize([t for t, m in zip(sample.tokens, sample.mask, strict=True) if not m])
    assert "What is the weather in Paris?" in context and "Sunny in Paris." in context
    assert ANSWER not in context and "get_weather\", \"arguments" not in context.split(
        "<tools>")[0]
    assert [lp for lp, m in zip(sample.logprobs, sample.mask, strict=True) if not m] == \
        [0.0] * (len(sample.tokens) - len(written))


def test_a_template_rendering_a_reply_otherwise_starts_a_new_sample(tmp_path):
    sid, _ = _session(tmp_path, LOOSE_CALL, ANSWER)
    session = read_token_session(tmp_path / "sessions", sid)
    first, second = session.samples
    assert first.policy_tokens() == [*tokenize(LOOSE_CALL, parse_special=False), 2]
    assert second.policy_tokens() == [*tokenize(ANSWER), 2]
    # The second holds the call as the template rendered it, as context.
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in detokenize(
        list(second.tokens))


def test_atropos_groups_and_trl_rows(tmp_path):
    sessions = [read_token_session(tmp_path / "sessions", _session(tmp_path, CALL, a)[0])
                for a in (ANSWER, "Sunny.")]
    groups = atropos_groups(sessions, score=lambda s: float("Paris" in (s.final_response or "")))
    assert len(groups) == 1  # one prompt, two rollouts
    group = groups[0]
    assert group["scores"] == [1.0, 0.0]
    for tokens, masks, logprobs in zip(group["tokens"], group["masks"],
                                       group["inference_logprobs"], strict=True):
        assert len(tokens) == len(masks) == len(logprobs)
        assert all(m in (t, IGNORED) for t, m in zip(tokens, masks, strict=True))
    assert group["messages"][0][-1] == {"role": "assistant", "content": ANSWER}
    rows = trl_rows(sessions)
    assert [r["score"] for r in rows] == [None, None]
    row = rows[0]
    assert row["completion_ids"][: len(tokenize(CALL, parse_special=False))] == tokenize(
        CALL, parse_special=False)
    assert len(row["completion_ids"]) == len(row["completion_mask"]) == len(
        row["completion_logprobs"])
    assert row["completion_mask"][0] == 1 and row["completion_mask"][-1] == 1
    assert 0 in row["completion_mask"]  # the tool result inside the completion


def _exported(home: Path, suffixes: tuple[str, ...] = ("jsonl", "parquet")) -> list[Path]:
    _session(home, CALL, ANSWER)
    _session(home, ANSWER, record=False)  # nothing to train on: no row
    paths = []
    for fmt in ("atropos", "trl-tokens"):
        for suffix in suffixes:
            out = home / f"{fmt}.{suffix}"
            report = export_sessions(home / "sessions", out, fmt=fmt)
            assert report.samples == 1 and "1 model call(s) had no token ids" in \
                report.describe()
            paths.append(out)
    return paths


def test_export_writes_token_formats_as_json_lines(tmp_path):
    for path in _exported(tmp_path, ("jsonl",)):
        assert len(path.read_text().splitlines()) == 1
    line = json.loads((tmp_path / "trl-tokens.jsonl").read_text())
    assert set(line) == {"session_id", "sample", "prompt_ids", "completion_ids",
                         "completion_mask", "completion_logprobs", "score"}
    group = json.loads((tmp_path / "atropos.jsonl").read_text())
    assert ScoredDataGroup.model_validate(dict(group, scores=[0.0]))


def test_token_exports_load_in_datasets_as_json_lines_and_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    for path in _exported(tmp_path):
        kind = "json" if path.suffix == ".jsonl" else "parquet"
        loaded = datasets.load_dataset(kind, data_files=str(path), split="train")
        assert len(loaded) == 1
        row = loaded[0]
        if "tokens" in row:  # the whole sequence, from the system prompt's first token
            assert row["tokens"][0][0] == tokenize("<|im_start|>")[0]
        else:  # the completion, from the model's first token
            assert row["completion_ids"][:5] == tokenize(CALL[:5], parse_special=False)
