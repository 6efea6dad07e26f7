"""Reading an Anthropic Messages reply back into mibyan's canonical shapes (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stages.events import Usage
from stages.messages import Message, ToolCall, canonical_arguments, canonical_json

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "model_context_window_exceeded": "length", "tool_use": "tool_calls",
                "refusal": "content_filter", "pause_turn": "incomplete"}


def usage_from(raw: Mapping | None) -> Usage:
    """Anthropic's ``input_tokens`` already exclude cache reads and writes. Thinking tokens
    are counted inside ``output_tokens`` and not reported apart."""
    raw = raw or {}
    return Usage(input_tokens=raw.get("input_tokens") or 0,
                 output_tokens=raw.get("output_tokens") or 0,
                 cache_read_tokens=raw.get("cache_read_input_tokens") or 0,
                 cache_write_tokens=raw.get("cache_creation_input_tokens") or 0)


def finish_reason(stop_reason: str | None) -> str:
    return STOP_REASONS.get(stop_reason or "end_turn", "stop")


def message_from(blocks: Sequence[Mapping]) -> Message:
    """A canonical assistant message from Anthropic content blocks (``tool_use`` inputs as
    dicts, or as JSON text under ``arguments`` when assembled from a stream)."""
    text: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text") or "")
        elif kind == "thinking":
            thoughts.append(block.get("thinking") or "")
        elif kind == "tool_use":
            arguments = block.get("arguments")
            arguments = (canonical_json(block.get("input") or {}) if arguments is None
                         else canonical_arguments(arguments))
            calls.append(ToolCall(id=block.get("id") or f"toolu_{len(calls)}",
                                  name=block.get("name") or "", arguments=arguments))
    content = "".join(text)
    return Message(role="assistant", content=content or (None if calls else ""),
                   tool_calls=tuple(calls),
                   reasoning="\n\n".join(t for t in thoughts if t) or None)
