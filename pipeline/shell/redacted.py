"""A caller's history, redacted once per message instead of once per turn.

A caller that keeps the conversation itself hands the agent its whole history on every turn
(``conversation_history=``): 2,000 messages are then redacted, re-built and re-encoded for
each new one. Redaction is a pure function of a message and the secrets known, so a message
that is equal to one redacted for the previous history gets the very same redacted object
back: nothing is scanned again, and the identity caches downstream (the adapters' wire JSON)
hit as they do for the session's own history.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import attrs

from effects.eventlog.codec import make_converter
from effects.eventlog.encoded import EncodedPayload, payload_json
from effects.providers.wire import WireCache
from stages.history_loaded import RecentHistories, same_start
from stages.log.events import HistoryLoaded
from stages.log.messages import Message
from stages.log.redact import redact_event


class RedactedHistory:
    """Redacts ``HistoryLoaded`` events message by message, remembering the messages of the
    last history it saw (so it holds at most one history's worth, whatever the session's
    length). Forgets everything when the secrets known change."""

    def __init__(self) -> None:
        # The secrets known, and the last history as given and as redacted, replaced as one
        # value (so a thread never pairs one history with another's redaction). The caller's
        # history comes back as the very same message objects (pipeline/intake.py), mostly at
        # the same positions: those are found by identity, without hashing their text.
        self._last: tuple[tuple[str, ...], tuple[Message, ...], tuple[Message, ...]] = (
            (), (), ())

    def redact(self, event: HistoryLoaded, known: Iterable[str]) -> HistoryLoaded:
        secrets = tuple(known)
        known_then, given, cleaned = self._last
        if secrets != known_then:
            given, cleaned = (), ()
        messages = event.messages
        start = same_start(messages, given)
        if start == len(messages):
            # The last history or a start of it: the memory keeps serving both.
            return attrs.evolve(event, messages=cleaned[:start])
        # By value, made at the first message that differs from the one at its position: a
        # history that only grew never needs it.
        done: dict[Message, Message] | None = None
        out = list(cleaned[:start])
        for index in range(start, len(messages)):
            message = messages[index]
            if index < len(given):
                if given[index] is message:
                    out.append(cleaned[index])
                    continue
                if done is None:
                    done = dict(zip(given, cleaned, strict=True))
                    done.update(zip(messages[:index], out, strict=True))
            clean = None if done is None else done.get(message)
            if clean is None:
                clean = _redacted(message, secrets)
                if done is not None:
                    done[message] = clean
            out.append(clean)
        redacted = tuple(out)
        self._last = (secrets, messages, redacted)
        return attrs.evolve(event, messages=redacted)


def _redacted(message: Message, secrets: tuple[str, ...]) -> Message:
    """The message as ``redact_event`` redacts it inside a history (one message at a time)."""
    event = redact_event(HistoryLoaded(messages=(message,)), secrets)
    assert isinstance(event, HistoryLoaded)
    clean = event.messages[0]
    # An unchanged message keeps its identity (and the wire JSON already made for it).
    return message if clean == message else clean


def _checked_payload(message: Message) -> tuple[dict, str] | None:
    """The message's payload inside an event and its JSON text, or None when it does not
    read back as itself or is not JSON (the event's own encoding then says why)."""
    converter = make_converter()
    payload = converter.unstructure(message)
    try:
        back = converter.structure(payload, Message)
        text = payload_json(payload)
    except Exception:  # any failure: the general path raises its own, worded error
        return None
    return (payload, text) if back == message else None


# Per message object (messages are immutable): a history passed again costs a list of ready
# payloads and a join of their ready text, not 2,000 messages encoded (a millisecond per 200
# in the log's JSON encoder) and decoded back to check them.
_PAYLOADS: WireCache[Message, tuple[dict, str] | None] = WireCache(_checked_payload)


# The parts of the last few histories encoded, position by position, and the payload of each
# whole: a history passed again costs an identity check per message at C speed, not a cache
# lookup in Python and a join of its text.
_RECENT: RecentHistories[tuple[tuple[tuple[dict, str], ...], EncodedPayload]] = (
    RecentHistories())


def _encoded(parts: tuple[tuple[dict, str], ...]) -> EncodedPayload:
    # The one key, so sorting the keys changes nothing; the encoder's compact separators.
    return EncodedPayload({"messages": [payload for payload, _ in parts]},
                          '{"messages":[' + ",".join(text for _, text in parts) + "]}")


_NO_MESSAGES = _encoded(())


def history_payload(event: HistoryLoaded) -> EncodedPayload | None:
    """``to_payload(event)``, checked to read back as ``event``, from each message's own
    checked payload, with its log text; None when one of them does not read back (use the
    general path). The payloads are shared between calls: read them, never change them."""
    messages = event.messages
    if not messages:  # a session that keeps its own history: the caller hands in none
        return _NO_MESSAGES
    start, known = _RECENT.find(messages)
    if known is not None and start == len(messages):
        parts, whole = known
        return whole if start == len(parts) else _encoded(parts[:start])
    new = [_PAYLOADS(message) for message in messages[start:]]
    if None in new:
        return None
    parts = (() if known is None else known[0][:start]) + tuple(
        cast("list[tuple[dict, str]]", new))
    whole = _encoded(parts)
    _RECENT.keep(messages, (parts, whole))
    return whole
