"""The blob store and the send path: an image is stored once by its hash, read back checked,
missing ones named clearly, and put back into requests as a data URL once per message."""

from __future__ import annotations

import base64
import hashlib

import attrs
import pytest

from effects.images import BlobStore, image_part, sendable_request, sniff, stored_message
from stages.decision import ModelRequest
from stages.errors import BlobMissingError, UsageError
from stages.log.content_parts import ImagePart, TextPart
from stages.log.messages import Message
from tests.images import png


def test_an_image_is_stored_once_under_its_hash(tmp_path) -> None:
    store = BlobStore.in_home(tmp_path)
    data = png(3, 5)
    first = image_part(data, store)
    second = image_part(data, store)
    digest = hashlib.sha256(data).hexdigest()
    assert first == second == ImagePart(sha256=digest, media_type="image/png", size=len(data),
                                        width=3, height=5)
    assert store.path(digest) == tmp_path / "blobs" / "sha256" / digest[:2] / digest[2:]
    assert [p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == [digest[2:]]
    assert store.get(digest) == data


def test_paths_urls_and_data_urls(tmp_path) -> None:
    store = BlobStore.in_home(tmp_path)
    (tmp_path / "shot.png").write_bytes(png(4, 4))
    from_path = image_part(tmp_path / "shot.png", store)
    encoded = base64.b64encode(png(4, 4)).decode()
    assert image_part(f"data:image/png;base64,{encoded}", store) == from_path
    assert image_part("https://example.com/a.png", store) == ImagePart(
        url="https://example.com/a.png")


@pytest.mark.parametrize("source, words", [
    (b"not an image at all", "not an image a provider takes"),
    ("data:image/png;base64,@@@", "not valid base64"),
    ("data:image/png,rawtext", "must be base64"),
    ("/no/such/image.png", "cannot read the image"),
])
def test_bad_images_are_usage_errors_and_store_nothing(tmp_path, source, words) -> None:
    with pytest.raises(UsageError, match=words):
        image_part(source, BlobStore.in_home(tmp_path))
    assert not (tmp_path / "blobs").exists()


def test_a_missing_or_altered_blob_is_named(tmp_path) -> None:
    store = BlobStore.in_home(tmp_path)
    part = image_part(png(), store)
    assert part.sha256 is not None
    store.path(part.sha256).write_bytes(b"changed")
    with pytest.raises(BlobMissingError, match="no longer matches"):
        store.get(part.sha256)
    store.path(part.sha256).unlink()
    with pytest.raises(BlobMissingError, match=f"sha256:{part.sha256} is not in the blob"):
        store.get(part.sha256)


def test_headers_tell_the_size() -> None:
    assert sniff(png(7, 9)) == ("image/png", 7, 9)
    gif = b"GIF89a" + (12).to_bytes(2, "little") + (34).to_bytes(2, "little") + b"\0" * 8
    assert sniff(gif) == ("image/gif", 12, 34)
    jpeg = (b"\xff\xd8\xff\xe0\x00\x04ab" + b"\xff\xc0\x00\x0b\x08" + (48).to_bytes(2, "big")
            + (64).to_bytes(2, "big") + b"\x01\x01\x11\x00")
    assert sniff(jpeg) == ("image/jpeg", 64, 48)
    assert sniff(b"hello") is None


def test_requests_get_the_bytes_once_per_message(tmp_path) -> None:
    store = BlobStore.in_home(tmp_path)
    data = png()
    image = image_part(data, store)
    text = Message(role="assistant", content="ok")
    user = Message(role="user", content=(TextPart(text="see"), image))
    request = ModelRequest(model="m", provider="p", api_mode="chat_completions", purpose="turn",
                           system_prompt=None, messages=(user, text))
    sent = sendable_request(request, store)
    url = sent.messages[0].images[0].url
    assert url == "data:image/png;base64," + base64.b64encode(data).decode()
    assert sent.messages[1] is text
    assert sendable_request(request, store).messages[0] is sent.messages[0]  # cached
    plain = attrs.evolve(request, messages=(text,))
    assert sendable_request(plain, store) is plain


def test_history_data_urls_are_stored(tmp_path) -> None:
    store = BlobStore.in_home(tmp_path)
    encoded = base64.b64encode(png(2, 3)).decode()
    message = Message(role="user", content=(ImagePart(url=f"data:image/png;base64,{encoded}"),))
    stored = stored_message(message, store)
    assert stored.images[0].sha256 is not None and stored.images[0].url is None
    assert "base64" not in stored.wire
