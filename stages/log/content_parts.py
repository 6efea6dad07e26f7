"""Content parts of a message: text and images, as immutable values.

A message's content is a string (the common case, and every log written before images) or a
tuple of parts. An image is either a URL the provider fetches itself (``url``) or bytes kept
once, by their SHA-256, in the home's blob store (``sha256`` and ``media_type``): events hold
that reference, never the bytes, and only the adapters, at send time, see them (as a ``data:``
URL put in ``url`` by ``effects.images``).
"""

from __future__ import annotations

import re

import attrs

# What an image costs in tokens when nothing better is known: about what OpenAI charges a
# detailed 1024x1024 image (765) and Anthropic a 1092x1092 one (w*h/750 = 1590), rounded up
# so that an estimate errs towards compressing early rather than overflowing.
IMAGE_TOKENS_DEFAULT = 1600
# Anthropic scales an image's long side to 1568 pixels: no image costs more than this.
IMAGE_TOKENS_MAX = 1568 * 1568 // 750

# How a stored image is named on the wire the stages digest: like a data URL, with the hash
# where the bytes would be (``mibyan-blob:image/png;sha256,<hex>``).
BLOB_SCHEME = "mibyan-blob:"
_BLOB_URL = re.compile(r"mibyan-blob:([\w.+-]+/[\w.+-]+);sha256,([0-9a-f]{64})\Z")
MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@attrs.frozen(kw_only=True)
class TextPart:
    text: str

    def to_openai(self) -> dict:
        return {"type": "text", "text": self.text}


@attrs.frozen(kw_only=True)
class ImagePart:
    """One image: by ``url`` (http(s), or ``data:`` once resolved for sending) or stored by
    ``sha256`` with its ``media_type``; ``width``/``height`` when the header told them."""

    url: str | None = None
    sha256: str | None = None
    media_type: str | None = None
    size: int = 0
    width: int | None = None
    height: int | None = None
    detail: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.url is None) == (self.sha256 is None):
            raise ValueError("an image is given by a url or by stored bytes, not both or none")

    @property
    def ref(self) -> str:
        """The image's address on the wire the stages see (stable, small)."""
        if self.url is not None:
            return self.url
        return f"{BLOB_SCHEME}{self.media_type};sha256,{self.sha256}"

    @property
    def tokens(self) -> int:
        """What the image costs in a request: Anthropic's w*h/750 when its size is known."""
        if self.width and self.height:
            return max(85, min(IMAGE_TOKENS_MAX, self.width * self.height // 750))
        return IMAGE_TOKENS_DEFAULT

    def to_openai(self) -> dict:
        image: dict = {"url": self.ref}
        if self.detail is not None:
            image["detail"] = self.detail
        return {"type": "image_url", "image_url": image}

    def describe(self) -> str:
        """A line naming the image, for text-only readers (summaries, notes, exports)."""
        where = self.url if self.url is not None and not self.url.startswith("data:") else (
            f"sha256:{(self.sha256 or '')[:16]}")
        size = f", {self.width}x{self.height}" if self.width and self.height else ""
        return f"[image: {self.media_type or 'image'}{size}, {where}]"


ContentPart = TextPart | ImagePart
Content = str | tuple[ContentPart, ...] | None


def blob_ref(url: str) -> tuple[str, str] | None:
    """(media type, sha256) of a ``mibyan-blob:`` address, else None."""
    match = _BLOB_URL.match(url)
    return None if match is None else (match.group(1), match.group(2))


def part_from_openai(raw: dict) -> ContentPart:
    """One OpenAI chat content part (``text`` or ``image_url``; Responses' ``input_text`` and
    ``input_image`` too); a ``data:`` URL is kept as a URL here, and stored by the caller."""
    kind = raw.get("type")
    if kind in ("text", "input_text"):
        text = raw.get("text")
        if not isinstance(text, str):
            raise ValueError("a text part needs its text")
        return TextPart(text=text)
    if kind in ("image_url", "input_image"):
        image: object = raw.get("image_url")
        detail = raw.get("detail")
        if isinstance(image, dict):
            detail = image.get("detail", detail)
            image = image.get("url")
        if not isinstance(image, str) or not image:
            raise ValueError("an image part needs its url")
        if (ref := blob_ref(image)) is not None:
            return ImagePart(sha256=ref[1], media_type=ref[0], detail=detail)
        return ImagePart(url=image, detail=detail)
    raise ValueError(f"unknown content part type {kind!r} (text and image_url are known)")


def text_of(content: Content) -> str:
    """The text of a content: the string itself, or its text parts joined by blank lines."""
    if content is None or isinstance(content, str):
        return content or ""
    return "\n\n".join(p.text for p in content if isinstance(p, TextPart))


def images_of(content: Content) -> tuple[ImagePart, ...]:
    if content is None or isinstance(content, str):
        return ()
    return tuple(p for p in content if isinstance(p, ImagePart))


def described(content: Content) -> str:
    """The text of a content with a line for each image in place: what a text-only reader
    (a summary, a note) is given, so that no image goes missing without a word."""
    if content is None or isinstance(content, str):
        return content or ""
    return "\n\n".join(p.text if isinstance(p, TextPart) else p.describe() for p in content)


def with_text(content: Content, text: str) -> Content:
    """``content`` with its text replaced by ``text`` (the images kept, after it)."""
    if content is None or isinstance(content, str):
        return text
    return (TextPart(text=text), *images_of(content))
