"""What the three adapters' request encoders share: per-message caches of ready JSON text, and
tool-call arguments a provider accepts back.

A tool call cut off by ``max_tokens`` leaves arguments like ``{`` or ``{"city``; the loop
refuses to run it, but the call stays in history, and servers (llama.cpp) reject every later
request that carries it. So history is always sent with a JSON object as arguments: ``{}``
replaces anything else (the history itself, and the log, keep what the model wrote).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

import attrs

from stages.log.messages import Message

__all__ = ["WireCache", "arguments_object", "sendable_message"]

K = TypeVar("K")
V = TypeVar("V")


class WireCache(Generic[K, V]):
    """``build(key)`` computed once per (immutable, weakly referenced) key, e.g. per message:
    a request body is then a join of ready strings, so a long history costs little per call.

    Keys are held by identity, not equality: a lookup then costs no hashing of the message
    (history is shared structurally, so the same objects come back call after call)."""

    def __init__(self, build: Callable[[K], V]) -> None:
        self._build = build
        self._entries: dict[int, tuple[weakref.ref, V]] = {}

    def __call__(self, key: K) -> V:
        entry = self._entries.get(id(key))
        if entry is not None and entry[0]() is key:
            return entry[1]
        value = self._build(key)
        # No lock: a dead key's callback can run on this very thread, inside any allocation
        # (the collector), and would deadlock on it. Single dict operations are atomic; a race
        # between threads can only drop an entry, which costs a rebuild, never a wrong value.
        self._entries[id(key)] = (weakref.ref(key, self._forget(id(key))), value)
        return value

    def _forget(self, ident: int) -> Callable[[weakref.ref], None]:
        def forget(ref: weakref.ref) -> None:
            entry = self._entries.get(ident)
            if entry is not None and entry[0] is ref:
                self._entries.pop(ident, None)
        return forget


def arguments_object(text: str) -> dict:
    """The arguments as a JSON object; ``{}`` when they are not one."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def sendable_message(message: Message) -> Message:
    """``message`` with every tool call's arguments a JSON object (the same object when they
    all are already)."""
    if all(_is_object(call.arguments) for call in message.tool_calls):
        return message
    return attrs.evolve(message, tool_calls=tuple(
        call if _is_object(call.arguments) else attrs.evolve(call, arguments="{}")
        for call in message.tool_calls))
