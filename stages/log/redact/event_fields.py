"""An event redacted, :func:`redact_event`: each field its class marks for redaction, walked
down to its texts (a message's content, reasoning and tool-call arguments, a tool's outcome,
content parts, reasoning parts, a reply's tokens) and each text through :func:`redact`. What
has nothing to hide comes back as the very object it was."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any, cast

import attrs

from stages.log.content_parts import Content, ImagePart, TextPart
from stages.log.events import REDACTED_FIELDS, Event
from stages.log.messages import Message
from stages.log.reasoning_parts import ReasoningPart
from stages.log.redact.text import redact
from stages.log.tokens import ReplyTokens
from stages.log.tool_specs import ToolOutcome


def redact_event(event: Event, known: Iterable[str] = ()) -> Event:
    """The observation with every free-text field redacted (history is built from events, so
    the model never sees a secret the log does not). A value with nothing to hide comes back
    as the very object it was, and an event with nothing to hide too: most replies hold no
    secret, and rebuilding them (``attrs.evolve``, a message's wire text) cost more than
    reading them."""
    reader = _READERS.get(type(event))
    if reader is None:
        return event
    fields, read, single = reader
    values = read(event)
    changes: dict[str, Any] = {}
    for name, value in zip(fields, (values,) if single else values, strict=True):
        if value is None or (type(value) is tuple and not value):  # nothing to read
            continue
        clean = _same(value, known) if type(value) is str else _redact_value(value, known)
        if clean is not value:
            changes[name] = clean
    return attrs.evolve(cast(Any, event), **changes) if changes else event


# Each event class's redacted fields, read in one call (attrgetter gives one field's value
# bare, several as a tuple).
_READERS: dict[type, tuple[tuple[str, ...], Callable[[Any], Any], bool]] = {
    cls: (names, operator.attrgetter(*names), len(names) == 1)
    for cls, names in REDACTED_FIELDS.items()}


def _same(value: str, known: Iterable[str]) -> str:
    """``value`` redacted, or ``value`` itself when that changes nothing."""
    clean = redact(value, known)
    return value if clean == value else clean


def _redact_value(value: object, known: Iterable[str]) -> object:
    if value is None:
        return None
    if type(value) is Message:  # a reply's: the common case first, without the checks below
        return _redact_message(value, known)
    if isinstance(value, str):
        return _same(value, known)
    if isinstance(value, ToolOutcome):
        content = _same(value.content, known)
        error = None if value.error is None else _same(value.error, known)
        if content is value.content and error is value.error:
            return value
        return attrs.evolve(value, content=content, error=error)
    if isinstance(value, tuple):
        items = tuple(_redact_value(item, known) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, TextPart):
        text = _same(value.text, known)
        return value if text is value.text else attrs.evolve(value, text=text)
    if isinstance(value, ImagePart):
        # An image's bytes are no text (and live in the blob store, not the log); an address
        # is, and a signed URL carries its key in the query.
        if value.url is None or value.url.startswith("data:"):
            return value
        url = _same(value.url, known)
        return value if url is value.url else attrs.evolve(value, url=url)
    if isinstance(value, Message):
        return _redact_message(value, known)
    if isinstance(value, ReplyTokens):
        return _redact_tokens(value, known)
    if attrs.has(type(value)):  # a value with text fields of its own (a pending approval)
        names = [f.name for f in attrs.fields(cast(Any, type(value))) if f.metadata.get("redact")]
        if names:
            return attrs.evolve(cast(Any, value),
                                **{n: _redact_value(getattr(value, n), known) for n in names})
    return value


def _redact_message(message: Message, known: Iterable[str]) -> Message:
    content = message.content
    if type(content) is str:
        content = _same(content, known)
    else:  # no cast() on the common path: it is a call too
        content = cast(Content, _redact_value(content, known))
    reasoning = None if message.reasoning is None else _same(message.reasoning, known)
    if not message.tool_calls and not message.reasoning_parts:  # a plain reply: its text only
        if content is message.content and reasoning is message.reasoning:
            return message
        return attrs.evolve(message, content=content, reasoning=reasoning)
    arguments = [_same(c.arguments, known) for c in message.tool_calls]
    parts = tuple(_redact_part(p, known) for p in message.reasoning_parts)
    if (content is message.content and reasoning is message.reasoning
            and all(a is c.arguments for a, c in zip(arguments, message.tool_calls, strict=True))
            and all(a is b for a, b in zip(parts, message.reasoning_parts, strict=True))):
        return message
    return attrs.evolve(
        message, content=content, reasoning=reasoning,
        tool_calls=tuple(c if a is c.arguments else attrs.evolve(c, arguments=a)
                         for a, c in zip(arguments, message.tool_calls, strict=True)),
        reasoning_parts=parts)


def _redact_tokens(tokens: ReplyTokens, known: Iterable[str]) -> ReplyTokens:
    """Token ids spell out their text: a reply whose text holds something to mask keeps
    neither its ids nor its pieces (its logprobs went with them), only why."""
    text = "".join(tokens.pieces)
    if redact(text, known) == text:
        return tokens
    return attrs.evolve(tokens, pieces=(), logprobs=(), ids=None, withheld="redacted")


def _redact_part(part: ReasoningPart, known: Iterable[str]) -> ReasoningPart:
    """Readable reasoning is redacted like any text (opaque data and signatures are not text);
    a signed thinking block whose text changed loses its signature, which no longer fits it:
    it is then never sent back."""
    text = redact(part.text, known)
    summary = tuple(redact(s, known) for s in part.summary)
    if text == part.text and summary == part.summary:
        return part
    signature = part.signature if text == part.text else None
    return attrs.evolve(part, text=text, summary=summary, signature=signature)
