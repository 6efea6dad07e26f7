"""Images through the gateway: the ``openai`` SDK sends ``image_url`` parts (a base64 data URL,
an http URL) in the last message and in earlier ones; the agent's upstream call carries them,
the session's log holds references, and the session replays. Bad parts are OpenAI-style 400s."""

from __future__ import annotations

import base64

import openai
import pytest

from tests.fake_openai import Reply
from tests.images import png
from tests.pipeline.serve.conftest import TOKENS

IMAGE = png(5, 4, shade=40)
DATA_URL = "data:image/png;base64," + base64.b64encode(IMAGE).decode()


def sdk(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=TOKENS["alice"], max_retries=0)


def test_the_sdk_sends_image_parts_and_the_upstream_gets_them(gateway):
    gateway.upstream.script(Reply.text("two squares"))
    raw = sdk(gateway).chat.completions.with_raw_response.create(model="mibyan", messages=[
        {"role": "user", "content": [
            {"type": "text", "text": "remember this"},
            {"type": "image_url", "image_url": {"url": "https://example.com/first.png"}}]},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": [
            {"type": "text", "text": "and this one?"},
            {"type": "image_url", "image_url": {"url": DATA_URL, "detail": "low"}}]}])
    assert raw.parse().choices[0].message.content == "two squares"
    users = [m["content"] for m in gateway.upstream.requests[0]["messages"]
             if m["role"] == "user"]
    assert users == [
        [{"type": "text", "text": "remember this"},
         {"type": "image_url", "image_url": {"url": "https://example.com/first.png"}}],
        [{"type": "text", "text": "and this one?"},
         {"type": "image_url", "image_url": {"url": DATA_URL, "detail": "low"}}]]
    session = raw.headers["x-mibyan-session-id"]
    log = (gateway.home / "sessions").glob(f"{session}*.jsonl")
    assert all(DATA_URL[30:60] not in path.read_text() for path in log)
    assert [p.read_bytes() for p in (gateway.home / "blobs").rglob("*") if p.is_file()] \
        == [IMAGE]
    assert gateway.assert_every_session_replays() == 1


@pytest.mark.parametrize("content, words", [
    ([{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}],
     "expected an http(s) URL or a base64 data URL"),
    ([{"type": "input_audio", "input_audio": {}}], "image parts"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}],
     "not valid base64"),
])
def test_bad_image_parts_are_refused_before_a_turn(gateway, content, words):
    with pytest.raises(openai.BadRequestError, match=words.replace("(", r"\(").replace(
            ")", r"\)")):
        sdk(gateway).chat.completions.create(model="mibyan", messages=[
            {"role": "user", "content": content}])
    assert gateway.upstream.requests == []
