"""Images on disk: the home's content-addressed blob store, reading an image from a path, bytes
or a URL, and putting the bytes back into a request at send time.

An image's bytes are written once, under their SHA-256 (``<home>/blobs/sha256/ab/cdef...``);
events and history hold only that reference (``stages.log.content_parts.ImagePart``), so a
screenshot sent with every later request of a session is stored once, not once per record.
The adapters see the bytes as a ``data:`` URL, made here per message and cached, so a long
history costs its images' encoding once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from effects.providers.wire import WireCache
from stages.decision import ModelRequest
from stages.errors import BlobMissingError, UsageError
from stages.log.content_parts import (
    MEDIA_TYPES,
    ContentPart,
    ImagePart,
    TextPart,
    images_of,
    part_from_openai,
    text_of,
)
from stages.log.history import History
from stages.log.messages import Message

__all__ = ["BlobStore", "ImageSource", "data_url", "decoded_data_url", "image_part",
           "message_parts", "sendable_request", "sniff", "stored_message"]

# What a caller may give as an image.
ImageSource = str | os.PathLike[str] | bytes | ImagePart

# A larger image is refused before it is stored: the providers take 5 MB (Anthropic) to
# 20 MB (OpenAI) per image, and a request of several would be refused whole.
MAX_IMAGE_BYTES = 20 * 1024 * 1024


@attrs.frozen
class BlobStore:
    """Bytes by SHA-256 under ``root`` (``<home>/blobs/sha256``)."""

    root: Path

    @classmethod
    def in_home(cls, home: Path) -> BlobStore:
        return cls(home / "blobs" / "sha256")

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256[2:]

    def put(self, data: bytes) -> str:
        """Store ``data`` (once: a second put of the same bytes writes nothing)."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if path.exists():
            return digest
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        os.replace(partial, path)  # whole or absent, even for a reader in another process
        return digest

    def get(self, sha256: str) -> bytes:
        path = self.path(sha256)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobMissingError(
                f"image sha256:{sha256} is not in the blob store ({path}): the session refers "
                f"to it, but its bytes were removed or the log was copied without "
                f"{self.root.parent.parent}/blobs") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise BlobMissingError(f"image sha256:{sha256} in {path} no longer matches its hash")
        return data

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()


def sniff(data: bytes) -> tuple[str, int | None, int | None] | None:
    """(media type, width, height) from the header of a PNG, JPEG, GIF or WebP; None for
    anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return "image/png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "image/gif", width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", *_webp_size(data)
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg", *_jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int | None, int | None]:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return (int.from_bytes(data[24:27], "little") + 1,
                int.from_bytes(data[27:30], "little") + 1)
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None, None


def _jpeg_size(data: bytes) -> tuple[int | None, int | None]:
    """The size in the first start-of-frame marker (baseline, progressive, ...)."""
    index = 2
    while index + 9 < len(data):
        if data[index] != 0xFF:
            return None, None
        marker = data[index + 1]
        length = int.from_bytes(data[index + 2:index + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE,
                      0xCF):
            height, width = struct.unpack(">HH", data[index + 5:index + 9])
            return width, height
        index += 2 + length
    return None, None


def stored_image(data: bytes, store: BlobStore, *, media_type: str | None = None,
                 detail: str | None = None) -> ImagePart:
    """Keep ``data`` in ``store`` and return its reference; bytes that are no image a
    provider takes (PNG, JPEG, GIF, WebP) are refused with a usage error, before anything is
    stored."""
    if len(data) > MAX_IMAGE_BYTES:
        raise UsageError(f"an image of {len(data)} bytes is over the {MAX_IMAGE_BYTES} a "
                         "provider takes")
    found = sniff(data)
    if found is None:
        raise UsageError(f"not an image a provider takes ({', '.join(MEDIA_TYPES)}): "
                         f"{data[:12]!r}...")
    kind, width, height = found
    if media_type is not None and media_type != kind:
        media_type = kind  # the bytes say what they are; a wrong label is a refused request
    return ImagePart(sha256=store.put(data), media_type=kind, size=len(data), width=width,
                     height=height, detail=detail)


def image_part(source: ImageSource, store: BlobStore) -> ImagePart:
    """An image from what a caller has: bytes, a path, an ``http(s)`` URL (sent as is, the
    provider fetches it), or a ``data:`` URL (stored like bytes)."""
    if isinstance(source, ImagePart):
        return stored_part(source, store)
    if isinstance(source, bytes | bytearray):
        return stored_image(bytes(source), store)
    text = os.fspath(source)
    if text.startswith(("http://", "https://")):
        return ImagePart(url=text)
    if text.startswith("data:"):
        return stored_part(ImagePart(url=text), store)
    path = Path(text).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the image {path}: {exc.strerror or exc}") from exc
    return stored_image(data, store)


def message_parts(message: str | Sequence[Mapping[str, Any] | ContentPart]
                  ) -> tuple[str, tuple[ImagePart, ...]]:
    """A user message given as text, or as content parts (OpenAI dicts or parts): its text
    (the text parts joined by blank lines) and its images."""
    if isinstance(message, str):
        return message, ()
    try:
        parts = [p if isinstance(p, TextPart | ImagePart) else part_from_openai(dict(p))
                 for p in message]
    except (ValueError, TypeError) as exc:
        raise UsageError(f"a message's content parts: {exc}") from exc
    return text_of(tuple(parts)), images_of(tuple(parts))


def stored_part(part: ImagePart, store: BlobStore) -> ImagePart:
    """A ``data:`` URL part as a stored reference (others as they are)."""
    if part.url is None or not part.url.startswith("data:"):
        return part
    media_type, data = decoded_data_url(part.url)
    return stored_image(data, store, media_type=media_type, detail=part.detail)


def decoded_data_url(url: str) -> tuple[str | None, bytes]:
    """(media type, bytes) of a base64 ``data:`` URL of an image a provider takes; a usage
    error that says what is wrong otherwise."""
    head, _, payload = url.partition(",")
    if not head.endswith(";base64"):
        raise UsageError("a data: URL image must be base64 (data:image/png;base64,...)")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError(f"the data: URL image is not valid base64: {exc}") from exc
    if sniff(data) is None:
        raise UsageError(f"not an image a provider takes ({', '.join(MEDIA_TYPES)})")
    return head[5:-7] or None, data


def stored_message(message: Message, store: BlobStore) -> Message:
    """``message`` with its ``data:`` URL images stored (the same message when it has none)."""
    if message.content is None or isinstance(message.content, str):
        return message
    parts = tuple(stored_part(p, store) if isinstance(p, ImagePart) else p
                  for p in message.content)
    return message if parts == message.content else attrs.evolve(message, content=parts)


def data_url(part: ImagePart, store: BlobStore | None) -> ImagePart:
    """A stored image as the ``data:`` URL the adapters send."""
    if part.sha256 is None:
        return part
    if store is None:
        raise BlobMissingError(f"image sha256:{part.sha256} cannot be sent: no blob store "
                               "(the session has no home)")
    encoded = base64.b64encode(store.get(part.sha256)).decode("ascii")
    return attrs.evolve(part, sha256=None, url=f"data:{part.media_type};base64,{encoded}")


class _Sendable:
    """Per store: each message with stored images, resolved once (history is shared, so the
    same message objects come back call after call)."""

    def __init__(self, store: BlobStore | None) -> None:
        self.store = store
        self.cache: WireCache[Message, Message] = WireCache(self._resolve)

    def _resolve(self, message: Message) -> Message:
        assert not isinstance(message.content, str) and message.content is not None
        return attrs.evolve(message, content=tuple(
            data_url(p, self.store) if isinstance(p, ImagePart) else p
            for p in message.content))


_SENDABLE: dict[Path | None, _Sendable] = {}


def sendable_request(request: ModelRequest, store: BlobStore | None) -> ModelRequest:
    """``request`` with every stored image as bytes (a ``data:`` URL): the same request when
    it holds none, which is the common case: a session's history counts its messages with
    parts as they come, so a text-only one is known without a look at its messages."""
    messages = request.messages
    if isinstance(messages, History) and not messages.with_parts:
        return request
    if all(m.content is None or type(m.content) is str or not m.images for m in messages):
        return request
    sendable = _SENDABLE.get(None if store is None else store.root)
    if sendable is None:
        sendable = _SENDABLE.setdefault(None if store is None else store.root, _Sendable(store))
    return attrs.evolve(request, messages=tuple(
        m if m.content is None or type(m.content) is str or not m.images else sendable.cache(m)
        for m in request.messages))
