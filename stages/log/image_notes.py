"""Images taken out of a history, each replaced by a note that names it: what the recovery
of a call refused for an image too large sends instead (rules 8, ``image_recovery``)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from stages.log.content_parts import ImagePart, TextPart
from stages.log.messages import Message

DROPPED_NOTE = "[image left out: the provider refused it as too large] "


def has_images(messages: Sequence[Message]) -> bool:
    return any(m.content is not None and type(m.content) is not str and m.images
               for m in messages)


def without_images(message: Message) -> Message:
    """``message`` with each image replaced by a text note naming it (the same message when
    it has none): the model is told an image was there, and which."""
    content = message.content
    if content is None or isinstance(content, str) or not message.images:
        return message
    return attrs.evolve(message, content=tuple(
        TextPart(text=DROPPED_NOTE + part.describe()) if isinstance(part, ImagePart) else part
        for part in content))
