"""Images end to end through the public ``Agent`` against the fake servers of all three APIs:
each API gets them in its own wire format, every later request of the session carries them,
the log holds references only (the bytes once, in the home's blob store), sessions replay,
a missing blob is named, an image too large is retried without it (rules 8), and exports
carry the images."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from effects.eventlog.codec import from_payload
from effects.eventlog.store import read_envelopes, session_path
from pipeline.agent import Agent
from pipeline.export.exporter import export_sessions
from pipeline.settings import configure
from pipeline.shell.replay import replay
from stages.errors import BlobMissingError
from stages.log.image_notes import DROPPED_NOTE
from tests.fake_anthropic import FakeAnthropicServer
from tests.fake_anthropic import Reply as AReply
from tests.fake_openai import FakeOpenAIServer, Reply
from tests.fake_responses import FakeResponsesServer, ResponsesReply
from tests.images import png

KEY = "sk-test-images-key-00000000"
IMAGE = png(8, 6, shade=7)
B64 = base64.b64encode(IMAGE).decode()
DATA_URL = f"data:image/png;base64,{B64}"
MODES = {
    "chat_completions": (FakeOpenAIServer, lambda t: Reply.text(t)),
    "codex_responses": (FakeResponsesServer, lambda t: ResponsesReply.text(t)),
    "anthropic_messages": (FakeAnthropicServer, lambda t: AReply.text(t)),
}


def agent(server: Any, home: Path, api_mode: str, **kw: Any) -> Agent:
    kw.setdefault("retry_base_delay", 0.001)
    kw.setdefault("context_length", 200_000)
    return Agent(model="fake-model", base_url=server.base_url, api_key=KEY, api_mode=api_mode,
                 provider=kw.pop("provider", "fake"), home=home, **kw)


def user_content(body: dict, api_mode: str) -> list:
    """The content of the first user message of a request body, as the API has it (without
    Anthropic's cache marks, which may sit on an image block as on any other)."""
    if api_mode == "codex_responses":
        return next(i["content"] for i in body["input"] if i.get("role") == "user")
    content = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return [{k: v for k, v in p.items() if k != "cache_control"} for p in content]


def expected_image(api_mode: str, url: str) -> dict:
    if api_mode == "chat_completions":
        return {"type": "image_url", "image_url": {"url": url}}
    if api_mode == "codex_responses":
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if url.startswith("data:"):
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                            "data": B64}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def texts(content: list) -> list[str]:
    return [p["text"] for p in content if p.get("type") in ("text", "input_text")]


@pytest.mark.parametrize("api_mode", sorted(MODES))
def test_an_image_reaches_each_api_and_the_session_replays(tmp_path, api_mode) -> None:
    server_type, reply = MODES[api_mode]
    home = tmp_path / "home"
    (tmp_path / "shot.png").write_bytes(IMAGE)
    with server_type() as server:
        server.script(reply("a grey square"), reply("still grey"))
        bot = agent(server, home, api_mode)
        bot.run("what is in this?", images=[tmp_path / "shot.png"])
        bot.run("and now?")
        bodies = server.requests
        server.assert_done()
    for body in bodies:  # the second request carries the image too
        content = user_content(body, api_mode)
        assert texts(content) == ["what is in this?"]
        assert expected_image(api_mode, DATA_URL) in content
    sid = bot.session_id
    log = session_path(home / "sessions", sid).read_text()
    assert B64 not in log and "mibyan-blob:" not in log  # events hold the hash, not bytes
    blobs = [p for p in (home / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 1 and blobs[0].read_bytes() == IMAGE
    report = replay(home / "sessions", sid)
    assert report.identical and report.missing_images == (), report.describe()


@pytest.mark.parametrize("api_mode", sorted(MODES))
def test_an_image_by_url_is_sent_as_a_url(tmp_path, api_mode) -> None:
    server_type, reply = MODES[api_mode]
    url = "https://example.com/cat.png"
    with server_type() as server:
        server.script(reply("a cat"))
        bot = agent(server, tmp_path, api_mode)
        bot.run([{"type": "text", "text": "name it"},
                 {"type": "image_url", "image_url": {"url": url}}])
        assert expected_image(api_mode, url) in user_content(server.last_request, api_mode)
        server.assert_done()
    assert not (tmp_path / "blobs").exists()
    assert replay(tmp_path / "sessions", bot.session_id).identical


def test_a_lost_blob_is_named_by_replay_and_refused_when_sent(tmp_path) -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.text("grey"))
        bot = agent(server, tmp_path, "chat_completions")
        bot.run("what is it?", images=[IMAGE])
        sid = bot.session_id
        bot.close()
        (blob,) = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
        blob.unlink()
        report = replay(tmp_path / "sessions", sid)
        assert report.identical and len(report.missing_images) == 1
        assert "1 image(s) missing from the blob store" in report.describe()
        again = agent(server, tmp_path, "chat_completions", session_id=sid)
        with pytest.raises(BlobMissingError, match="is not in the blob store"):
            again.run("and now?")
        assert server.requests and len(server.requests) == 1  # nothing was sent without it
        server.assert_done()


TOO_LARGE = "image exceeds 5 MB maximum: 6291456 bytes > 5242880 bytes"


def test_an_image_too_large_is_dropped_with_a_note_and_the_call_retried(tmp_path) -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.error(400, TOO_LARGE), Reply.text("I could not see it"))
        bot = agent(server, tmp_path, "chat_completions")
        result = bot.run("what is it?", images=[IMAGE])
        first, second = server.requests
        server.assert_done()
    assert result.final_response == "I could not see it"
    assert expected_image("chat_completions", DATA_URL) in user_content(first,
                                                                        "chat_completions")
    resent = user_content(second, "chat_completions")
    assert all(p["type"] == "text" for p in resent)
    assert resent[1]["text"].startswith(DROPPED_NOTE + "[image: image/png, 8x6, sha256:")
    decided = [from_payload(e.kind, e.schema_version, e.payload) for e in read_envelopes(
        session_path(tmp_path / "sessions", bot.session_id)) if e.kind == "recovery_decided"]
    assert [(e.reason, e.action) for e in decided] == [("image_too_large", "drop_images")]
    assert replay(tmp_path / "sessions", bot.session_id).identical


def test_under_rules_7_an_image_too_large_fails_as_before(tmp_path) -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.error(400, TOO_LARGE))
        parts = configure("fake-model", base_url=server.base_url, api_key=KEY, provider="fake",
                          home=tmp_path, context_length=200_000)
        bot = Agent(settings=attrs.evolve(parts.settings, rules=7),
                    agent_settings=parts.agent_settings, effects=parts.effects,
                    secrets=parts.secrets)
        result = bot.run("what is it?", images=[IMAGE])
        server.assert_done()
    assert result.failed
    assert replay(tmp_path / "sessions", bot.session_id).identical


@pytest.mark.parametrize("fmt", ["openai", "trl", "sharegpt"])
def test_exports_carry_the_images(tmp_path, fmt) -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.text("grey"))
        bot = agent(server, tmp_path, "chat_completions")
        bot.run("what is it?", images=[IMAGE, "https://example.com/b.png"])
        bot.close()
    out = tmp_path / "out.jsonl"
    report = export_sessions(tmp_path / "sessions", out, fmt=fmt)
    assert report.samples == 1, report.describe()
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    if fmt == "openai":
        user = next(m for m in row["messages"] if m["role"] == "user")
        assert user["content"] == [
            {"type": "text", "text": "what is it?"},
            {"type": "image_url", "image_url": {"url": DATA_URL}},
            {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}]
        return
    assert row["images"] == [DATA_URL, "https://example.com/b.png"]
    if fmt == "trl":
        user = next(m for m in row["messages"] if m["role"] == "user")
        assert user["content"] == [{"type": "text", "text": "what is it?"},
                                   {"type": "image"}, {"type": "image"}]
    else:
        human = next(t for t in row["conversations"] if t["from"] == "human")
        assert human["value"] == "<image><image>what is it?"


def test_an_export_names_a_lost_image(tmp_path) -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.text("grey"))
        bot = agent(server, tmp_path, "chat_completions")
        bot.run("what is it?", images=[IMAGE])
        bot.close()
    for blob in (tmp_path / "blobs").rglob("*"):
        if blob.is_file():
            blob.unlink()
    report = export_sessions(tmp_path / "sessions", tmp_path / "out.jsonl", fmt="openai")
    assert report.samples == 0
    assert "is not in the blob store" in report.describe()
