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

import attrs

from effects.eventlog.codec import make_converter
from effects.providers.wire import WireCache
from stages.log.events import HistoryLoaded
from stages.log.messages import Message
from stages.log.redact import redact_event


class RedactedHistory:
    """Redacts ``HistoryLoaded`` events message by message, remembering the messages of the
    last history it saw (so it holds at most one history's worth, whatever the session's
    length). Forgets everything when the secrets known change."""

    def __init__(self) -> None:
        self._known: tuple[str, ...] = ()
        self._done: dict[Message, Message] = {}
        # The same entries by identity: the caller's history comes back as the very same
        # message objects (pipeline/intake.py), found without hashing their text. The key
        # objects are held by ``_done``, so an id is never reused while it is here.
        self._same: dict[int, tuple[Message, Message]] = {}

    def redact(self, event: HistoryLoaded, known: Iterable[str]) -> HistoryLoaded:
        secrets = tuple(known)
        fresh = secrets != self._known
        previous = {} if fresh else self._done
        same = {} if fresh else self._same
        done: dict[Message, Message] = {}
        out = []
        for message in event.messages:
            hit = same.get(id(message))
            found = hit[1] if hit is not None and hit[0] is message else (
                done.get(message) or previous.get(message))
            clean = found if found is not None else _redacted(message, secrets)
            done[message] = clean
            out.append(clean)
        self._known, self._done = secrets, done
        self._same = {id(raw): (raw, clean) for raw, clean in done.items()}
        return attrs.evolve(event, messages=tuple(out))


def _redacted(message: Message, secrets: tuple[str, ...]) -> Message:
    """The message as ``redact_event`` redacts it inside a history (one message at a time)."""
    event = redact_event(HistoryLoaded(messages=(message,)), secrets)
    assert isinstance(event, HistoryLoaded)
    clean = event.messages[0]
    # An unchanged message keeps its identity (and the wire JSON already made for it).
    return message if clean == message else clean


def _checked_payload(message: Message) -> dict | None:
    """The message's payload inside an event, or None when it does not read back as itself
    (the event's own encoding then says why)."""
    converter = make_converter()
    payload = converter.unstructure(message)
    try:
        back = converter.structure(payload, Message)
    except Exception:  # any failure: the general path raises its own, worded error
        return None
    return payload if back == message else None


# Per message object (messages are immutable): a history passed again costs a list of ready
# payloads, not 2,000 messages encoded and decoded back to check them.
_PAYLOADS: WireCache[Message, dict | None] = WireCache(_checked_payload)


def history_payload(event: HistoryLoaded) -> dict | None:
    """``to_payload(event)``, checked to read back as ``event``, from each message's own
    checked payload; None when one of them does not read back (use the general path). The
    payloads are shared between calls: read them, never change them."""
    payloads = [_PAYLOADS(message) for message in event.messages]
    if any(p is None for p in payloads):
        return None
    return {"messages": payloads}
