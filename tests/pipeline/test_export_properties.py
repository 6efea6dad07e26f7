"""Export properties over real logs: sessions of random scripts (tool calls to known and unknown
tools, bad arguments, failures, interrupts, resumes, loaded histories) run through the Agent,
then exported in every format. Every tool call in an export has its response, the roles come
in an order each format allows, and nothing a redacted field held survives."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.agent import Agent
from pipeline.export.exporter import export_sessions
from pipeline.testing import CountingIds, FakeClock, ScriptedModel
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall
from tests.pipeline.export_sessions import compressed_session
from tests.pipeline.test_replay_properties import SCRIPTS, run_live
from tests.strategies.events import texts
from tests.strategies.scripts import SessionScript

PROPERTY = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FORMATS = ("sharegpt", "openai", "trl")


def _exports(root: Path, out: Path, lineage: str = "stitched",
             trainable_only: bool = False) -> dict[str, list[dict]]:
    """Every sample (``trainable_only=False``, the properties hold for all of them) unless
    asked for the default's."""
    rows = {}
    for fmt in FORMATS:
        name = f"{fmt}.jsonl" if lineage == "stitched" else f"{fmt}.{lineage}.jsonl"
        path = out / (f"trainable.{name}" if trainable_only else name)
        export_sessions(root, path, fmt=fmt, lineage=lineage, provenance="inline",
                        trainable_only=trainable_only)
        rows[fmt] = [json.loads(line) for line in path.open()]
    return rows


# --- checks of each format ----------------------------------------------------------------------

def check_messages(messages: list[dict]) -> None:
    """OpenAI and TRL: an optional system message, then a user; no two user or assistant
    messages in a row; an assistant's calls answered, each once, by the tool messages right
    after it (a turn that failed after its tools ran goes on with the next user message);
    every assistant message has a weight, and nothing else has; the last message is no user
    message (it would have no answer to train on)."""
    roles = [m["role"] for m in messages]
    body = roles[1:] if roles and roles[0] == "system" else roles
    assert "system" not in body
    assert body and body[0] == "user", roles
    open_calls: list[str] = []
    previous = None
    for message in messages[len(roles) - len(body):]:
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in open_calls, (message, open_calls)
            open_calls.remove(message["tool_call_id"])
        else:
            assert not open_calls, f"calls {open_calls} have no result"
            assert role != previous, roles
            if role == "assistant":
                open_calls = [c["id"] for c in message.get("tool_calls") or ()]
                assert len(set(open_calls)) == len(open_calls)
        assert ("weight" in message) == (role == "assistant")
        previous = role
    assert not open_calls, f"calls {open_calls} have no result"
    assert roles[-1] != "user", roles


def check_sharegpt(turns: list[dict]) -> None:
    """ShareGPT: system, human, then gpt after human or tool; a gpt turn with calls is followed
    by one tool turn with a response to each call, in order; a tool turn only there; the last
    turn is no human turn."""
    sources = [t["from"] for t in turns]
    assert sources[0] == "system" and "system" not in sources[1:]
    assert sources[-1] != "human", sources
    assert len(sources) == 1 or sources[1] == "human", sources
    follows = {"human": {"gpt"}, "tool": {"gpt", "human"}}
    for index, turn in enumerate(turns[1:], 1):
        calls = [json.loads(block.split("</tool_call>")[0])
                 for block in turn["value"].split("<tool_call>\n")[1:]]
        following = turns[index + 1] if index + 1 < len(turns) else None
        assert ("weight" in turn) == (turn["from"] == "gpt")
        if turn["from"] in follows and following is not None:
            assert following["from"] in follows[turn["from"]], sources
        if turn["from"] == "gpt":
            assert turn["value"].startswith("<think>\n")
            if calls:
                assert following is not None and following["from"] == "tool", sources
                responses = [json.loads(block.split("</tool_response>")[0])
                             for block in following["value"].split("<tool_response>\n")[1:]]
                assert [r["name"] for r in responses] == [c["name"] for c in calls]
            else:
                assert following is None or following["from"] == "human", sources


@PROPERTY
@given(script=SCRIPTS, data=st.data())
def test_every_call_is_answered_and_roles_come_in_order(script: SessionScript,
                                                       data: st.DataObject) -> None:
    resume_at = None
    if len(script.turns) > 1:
        resume_at = data.draw(st.none() | st.integers(1, len(script.turns) - 1))
    with tempfile.TemporaryDirectory() as tmp:
        live = run_live(Path(tmp), script, resume_at)
        rows = _exports(live.root, Path(tmp))
        trainable = _exports(live.root, Path(tmp), trainable_only=True)
    for fmt, samples in trainable.items():  # by default: each ends on an answer to learn
        for sample in samples:
            last = (sample["conversations"] if fmt == "sharegpt" else sample["messages"])[-1]
            assert last.get("role", last.get("from")) in ("assistant", "gpt"), fmt
            assert last["weight"] == 1 and not last.get("tool_calls"), fmt
            assert "<tool_call>" not in last.get("value", ""), fmt
    for fmt, samples in rows.items():
        assert len(samples) == 1, fmt
        if fmt == "sharegpt":
            check_sharegpt(samples[0]["conversations"])
        else:
            check_messages(samples[0]["messages"])
    # the same conversation in each: as many replies, and as many calls as responses
    openai, trl = rows["openai"][0]["messages"], rows["trl"][0]["messages"]
    assert [m["role"] for m in openai] == [m["role"] for m in trl]
    gpt = [t for t in rows["sharegpt"][0]["conversations"] if t["from"] == "gpt"]
    assert len(gpt) == sum(m["role"] == "assistant" for m in openai)
    # and the same replies trained on
    weights = [m["weight"] for m in openai if m["role"] == "assistant"]
    assert [m["weight"] for m in trl if m["role"] == "assistant"] == weights
    assert [t["weight"] for t in gpt] == weights
    _check_samples(rows)


def _check_samples(rows: dict[str, list[dict]]) -> None:
    for fmt, samples in rows.items():
        for sample in samples:
            if fmt == "sharegpt":
                check_sharegpt(sample["conversations"])
            else:
                check_messages(sample["messages"])


@settings(PROPERTY, max_examples=5)
@given(turns=st.integers(2, 6), window=st.sampled_from((1024, 2048)),
       resume_at=st.none() | st.integers(1, 5))
def test_every_segment_of_a_compressed_session_ends_answered(turns: int, window: int,
                                                             resume_at: int | None) -> None:
    """Before, a segment that a compression closed between a user message and its reply
    ended on that message (the next segment answers it)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        compressed_session(home, turns=turns, window=window, resume_at=resume_at)
        rows = _exports(home / "sessions", home, "segments")
        stitched = _exports(home / "sessions", home)
    _check_samples(rows)
    _check_samples(stitched)
    assert all(len(samples) == 1 for samples in stitched.values())


# --- secrets ------------------------------------------------------------------------------------

KNOWN = "Zq9-the-configured-key-4471"  # the provider key: known to the journal, no pattern
TOKEN = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"  # a GitHub token by its shape
SECRETS = st.sampled_from((KNOWN, TOKEN, f"password={KNOWN}", f"Authorization: Bearer {TOKEN}"))


def _with(secret: str, text: str, where: int) -> str:
    where = min(where, len(text))
    return f"{text[:where]} {secret} {text[where:]}"


def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return f"you said: {text}"


@PROPERTY
@given(user=texts, answer=texts, secret=SECRETS, where=st.integers(0, 40),
       places=st.sets(st.sampled_from(("user", "reasoning", "arguments", "answer")),
                      min_size=1))
def test_nothing_from_a_redacted_field_survives(user, answer, secret, where, places) -> None:
    def put(place: str, text: str) -> str:
        return _with(secret, text, where) if place in places else text
    call = ToolCall(id="call_1", name="echo",
                    arguments=json.dumps({"text": put("arguments", "hello")}))
    first = ModelReplied(
        message=Message(role="assistant", content=None, tool_calls=(call,),
                        reasoning=put("reasoning", "thinking")),
        finish_reason="tool_calls", usage=Usage(), model="scripted", latency_ms=1.0)
    model = ScriptedModel(first, put("answer", answer) or "ok")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        with Agent(client=model, tools=[echo], clock=FakeClock(), ids=CountingIds(),
                   home=home, model="m", api_key=KNOWN, stream=False) as agent:
            agent.chat(put("user", user) or "hi")
        rows = _exports(home / "sessions", home)
        written = "".join((home / f"{fmt}.jsonl").read_text() for fmt in FORMATS)
    assert KNOWN not in written and TOKEN not in written
    for fmt in FORMATS:  # OpenAI's format leaves reasoning out
        if fmt != "openai" or places - {"reasoning"}:
            assert rows[fmt][0]["provenance"]["redactions"], fmt
