"""Conversation messages in OpenAI chat format, immutable, each carrying its own wire JSON.

A message is serialised once, when it is made; a request body is then a join of ready strings,
so the per-turn cost of sending history does not grow with re-validation of old messages.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring as _text
from typing import cast

import attrs

from stages.log.content_parts import (
    Content,
    ImagePart,
    images_of,
    part_from_openai,
    text_of,
)
from stages.log.reasoning_parts import ReasoningPart

ROLES = ("system", "user", "assistant", "tool")


# One encoder for every call: ``json.dumps`` with these options builds a new one each time.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: object) -> str:
    """Canonical JSON text: sorted keys, no spaces, UTF-8 kept as is (byte-stable prefixes)."""
    return _CANONICAL.encode(value)


def canonical_arguments(arguments: str) -> str:
    """Canonicalise tool-call arguments when they parse; keep them verbatim when they do not."""
    try:
        return canonical_json(json.loads(arguments))
    except (ValueError, RecursionError):
        return arguments


@attrs.frozen(kw_only=True)
class ToolCall:
    """One function call requested by the model; ``arguments`` is JSON text as sent."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


def _wire(message: Message) -> str:
    """What providers receive: the OpenAI shape without mibyan's own reasoning field, which
    strict chat-completions servers reject. Exactly ``canonical_json`` of that shape; written
    out field by field (keys in sorted order), which is three times faster: every message
    of a session, live or replayed, is encoded once."""
    if not _all_text(message):
        out = message.to_openai()
        out.pop("reasoning", None)
        out.pop("reasoning_parts", None)
        return canonical_json(out)
    # _all_text saw a string or None here.
    content = "null" if message.content is None else _text(cast(str, message.content))
    parts = ['{"content":', content]
    if message.role == "tool" and message.name is not None:
        parts += [',"name":', _text(message.name)]
    parts += [',"role":', _text(message.role)]
    if message.tool_call_id is not None:
        parts += [',"tool_call_id":', _text(message.tool_call_id)]
    if message.tool_calls:
        parts.append(',"tool_calls":[' + ",".join(
            f'{{"function":{{"arguments":{_text(c.arguments)},"name":{_text(c.name)}}},'
            f'"id":{_text(c.id)},"type":"function"}}' for c in message.tool_calls) + "]")
    parts.append("}")
    return "".join(parts)


def _all_text(message: Message) -> bool:
    """Every field the wire shows is text (or an absent optional): what the fast path writes."""
    # Loops, not all() over generators: asked of every message made, most of them plain.
    if type(message.role) is not str:
        return False
    for value in (message.content, message.tool_call_id, message.name):
        if value is not None and type(value) is not str:
            return False
    for c in message.tool_calls:
        if type(c.id) is not str or type(c.name) is not str or type(c.arguments) is not str:
            return False
    return True


@attrs.frozen(kw_only=True)
class Message:
    """One history entry. ``wire`` and ``chars`` are derived once and never serialised."""

    role: str = attrs.field(validator=attrs.validators.in_(ROLES))
    # Text (nearly always), or a tuple of text and image parts (``stages.log.content_parts``).
    content: Content = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    # Provider-issued reasoning to send back to the API that issued it (signed thinking
    # blocks, encrypted Responses items); never part of the OpenAI shape or the wire text.
    reasoning_parts: tuple[ReasoningPart, ...] = ()
    wire: str = attrs.field(init=False, eq=False, repr=False,
                            default=attrs.Factory(_wire, takes_self=True))

    @property
    def chars(self) -> int:
        """The size the context estimate counts: the wire text, and an image as the characters
        of the tokens it costs (its wire is only a short reference)."""
        if self.content is None or type(self.content) is str:
            return len(self.wire)
        return len(self.wire) + 4 * sum(image.tokens for image in images_of(self.content))

    @property
    def text(self) -> str:
        """The content's text ("" for none; the text parts joined when there are parts)."""
        content = self.content
        return content if type(content) is str else text_of(content)

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return images_of(self.content)

    def to_openai(self) -> dict:
        content = self.content
        out: dict = {"role": self.role, "content": [part.to_openai() for part in content]
                     if type(content) is tuple else content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.role == "tool" and self.name is not None:
            out["name"] = self.name
        if self.reasoning is not None:
            out["reasoning"] = self.reasoning
        if self.reasoning_parts:
            out["reasoning_parts"] = [attrs.asdict(part) for part in self.reasoning_parts]
        return out


_PART_TYPES = ("text", "image_url", "input_text", "input_image")


def from_openai(raw: dict) -> Message:
    """Build a :class:`Message` from an OpenAI-format dict (e.g. a caller's history)."""
    calls = tuple(
        ToolCall(id=c["id"], name=c["function"]["name"],
                 arguments=canonical_arguments(c["function"].get("arguments") or "{}"))
        for c in raw.get("tool_calls") or ()
    )
    content = raw.get("content")
    # With an image, parts; text parts alone stay the JSON text they always were.
    if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") in _PART_TYPES for p in content) and any(
            p.get("type") in ("image_url", "input_image") for p in content):
        content = tuple(part_from_openai(p) for p in content)
    elif isinstance(content, tuple):  # parts already read (the gateway's checked messages)
        pass
    elif content is not None and not isinstance(content, str):
        content = canonical_json(content)
    parts = tuple(ReasoningPart(**{**p, "summary": tuple(p.get("summary") or ())})
                  for p in raw.get("reasoning_parts") or ())
    return Message(role=raw["role"], content=content, tool_calls=calls,
                   tool_call_id=raw.get("tool_call_id"), name=raw.get("name"),
                   reasoning=raw.get("reasoning") or raw.get("reasoning_content"),
                   reasoning_parts=parts)


def unique_call_ids(message: Message) -> Message:
    """The message with every tool call id present and unique; a missing or repeated id is
    replaced by a deterministic one (stable across replays and provider cache prefixes)."""
    seen: set[str] = set()
    calls = []
    for index, call in enumerate(message.tool_calls):
        if not call.id or call.id in seen:
            digest = hashlib.sha256(f"{call.name}:{call.arguments}:{index}".encode()).hexdigest()
            call = attrs.evolve(call, id=f"call_{digest[:12]}")
        seen.add(call.id)
        calls.append(call)
    if calls == list(message.tool_calls):
        return message
    return attrs.evolve(message, tool_calls=tuple(calls))
