"""Content parts: messages with images keep string content the fast path, name images by
reference on the wire the stages digest, count them in the estimate, and are redacted and
summarised without losing them."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages.context.summary import serialise
from stages.log.content_parts import (
    IMAGE_TOKENS_DEFAULT,
    ImagePart,
    TextPart,
    blob_ref,
    described,
    part_from_openai,
)
from stages.log.events import HistoryLoaded, TurnStarted
from stages.log.image_notes import DROPPED_NOTE, has_images, without_images
from stages.log.messages import Message, canonical_json, from_openai
from stages.log.redact import redact_event
from tests.strategies.events import image_parts, texts

SHA = hashlib.sha256(b"img").hexdigest()
STORED = ImagePart(sha256=SHA, media_type="image/png", size=3, width=750, height=100)


def test_string_content_is_unchanged_by_parts() -> None:
    m = Message(role="user", content="hi")
    assert m.wire == '{"content":"hi","role":"user"}'
    assert m.text == "hi" and m.images == () and m.chars == len(m.wire)


def test_a_stored_image_is_a_reference_on_the_wire() -> None:
    m = Message(role="user", content=(TextPart(text="what is this?"), STORED))
    assert m.wire == canonical_json({"content": [
        {"text": "what is this?", "type": "text"},
        {"image_url": {"url": f"mibyan-blob:image/png;sha256,{SHA}"}, "type": "image_url"}],
        "role": "user"})
    assert blob_ref(STORED.ref) == ("image/png", SHA)
    assert m.text == "what is this?" and m.images == (STORED,)


def test_an_image_counts_the_tokens_it_costs() -> None:
    m = Message(role="user", content=(STORED,))
    assert STORED.tokens == 100  # 750 * 100 / 750
    assert m.chars == len(m.wire) + 4 * 100
    unknown = ImagePart(url="https://example.com/a.png")
    assert unknown.tokens == IMAGE_TOKENS_DEFAULT
    huge = ImagePart(sha256=SHA, media_type="image/png", width=10_000, height=10_000)
    assert huge.tokens == 1568 * 1568 // 750  # providers scale the long side down


def test_from_openai_reads_image_parts_and_keeps_text_lists_as_before() -> None:
    m = from_openai({"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]})
    assert m.content == (TextPart(text="look"), ImagePart(url="https://x/y.png", detail="low"))
    assert from_openai({"role": "user", "content": [{"type": "text", "text": "a"}]}).content \
        == '[{"text":"a","type":"text"}]'
    back = from_openai(Message(role="user", content=(STORED,)).to_openai())
    assert back.images == (ImagePart(sha256=SHA, media_type="image/png"),)


@pytest.mark.parametrize("raw", [{"type": "image_url"}, {"type": "audio"},
                                 {"type": "text", "text": 3}])
def test_bad_parts_are_refused(raw: dict) -> None:
    with pytest.raises(ValueError):
        part_from_openai(raw)


def test_an_image_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError):
        ImagePart()
    with pytest.raises(ValueError):
        ImagePart(url="https://x/y.png", sha256=SHA)


def test_redaction_reads_text_parts_and_urls_but_never_image_bytes() -> None:
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    data = "data:image/png;base64," + "QUJD" * 10 + secret
    event = TurnStarted(turn_id="t", task_id="k", started_at="now", user_message="hi",
                        images=(ImagePart(url=f"https://h/x.png?key={secret}"),
                                ImagePart(url=data)))
    clean = redact_event(event, [secret])
    assert secret not in clean.images[0].url
    assert clean.images[1] == event.images[1]  # bytes are no text
    message = Message(role="user", content=(TextPart(text=f"key {secret}"), STORED))
    loaded = redact_event(HistoryLoaded(messages=(message,)), [secret])
    assert secret not in loaded.messages[0].text and loaded.messages[0].images == (STORED,)


def test_a_summary_is_told_of_each_image() -> None:
    m = Message(role="user", content=(TextPart(text="see"), STORED))
    (line,) = serialise([m])
    assert "see" in line and "[image: image/png, 750x100, sha256:" in line
    assert described(m.content) == f"see\n\n{STORED.describe()}"


def test_dropping_images_leaves_a_note_naming_each() -> None:
    m = Message(role="user", content=(TextPart(text="see"), STORED))
    dropped = without_images(m)
    assert not has_images([dropped]) and has_images([m])
    assert dropped.content == (TextPart(text="see"),
                               TextPart(text=DROPPED_NOTE + STORED.describe()))
    text = Message(role="user", content="plain")
    assert without_images(text) is text


@given(st.builds(lambda texts_, image: Message(role="user", content=(*texts_, image)),
                 st.lists(st.builds(TextPart, text=texts), max_size=2), image_parts))
def test_the_wire_of_parts_is_the_canonical_json_of_the_openai_shape(m: Message) -> None:
    out = m.to_openai()
    out.pop("reasoning", None)
    out.pop("reasoning_parts", None)
    assert m.wire == canonical_json(out)
    assert from_openai(out).text == m.text
    assert [i.ref for i in from_openai(out).images] == [i.ref for i in m.images]
