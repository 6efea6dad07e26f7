"""Reading an Anthropic Messages reply back into mibyan's canonical shapes (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stages.log.events import Usage
from stages.log.messages import Message, ToolCall, canonical_arguments, canonical_json
from stages.log.reasoning_parts import ReasoningPart
from stages.turn.think_tags import split_think

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "model_context_window_exceeded": "length", "tool_use": "tool_calls",
                "refusal": "content_filter", "pause_turn": "incomplete"}


def usage_from(raw: Mapping | None, *, thought: bool = False) -> Usage:
    """Anthropic's ``input_tokens`` already exclude cache reads and writes. Thinking tokens
    are counted inside ``output_tokens`` and not reported apart: a reply that ``thought``
    says so (``reasoning_in_output``) rather than claim 0 reasoning tokens."""
    raw = raw or {}
    return Usage(input_tokens=raw.get("input_tokens") or 0,
                 output_tokens=raw.get("output_tokens") or 0,
                 cache_read_tokens=raw.get("cache_read_input_tokens") or 0,
                 cache_write_tokens=raw.get("cache_creation_input_tokens") or 0,
                 reasoning_in_output=thought)


def finish_reason(stop_reason: str | None) -> str:
    return STOP_REASONS.get(stop_reason or "end_turn", "stop")


def _part(block: Mapping, provider: str) -> ReasoningPart | None:
    """The block as a part to send back: signed thinking, redacted thinking, or the unsigned
    thinking of a compatible endpoint (sent back to it as text)."""
    if block.get("type") == "thinking" and (block.get("signature") or block.get("thinking")):
        return ReasoningPart(type="thinking", api_mode="anthropic_messages", provider=provider,
                             text=block.get("thinking") or "",
                             signature=block.get("signature") or None)
    if block.get("type") == "redacted_thinking" and block.get("data"):
        return ReasoningPart(type="redacted_thinking", api_mode="anthropic_messages",
                             provider=provider, data=block["data"])
    return None


def message_from(blocks: Sequence[Mapping], provider: str = "") -> Message:
    """A canonical assistant message from Anthropic content blocks (``tool_use`` inputs as
    dicts, or as JSON text under ``arguments`` when assembled from a stream); thinking blocks
    are kept as parts, the signed ones to be sent back unmodified."""
    text: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    parts: list[ReasoningPart] = []
    for block in blocks:
        kind = block.get("type")
        part = _part(block, provider)
        if part is not None:
            parts.append(part)
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
    # Open models behind a Messages server (llama.cpp) may reason in <think> tags.
    content, thought = split_think("".join(text))
    return Message(role="assistant", content=content or (None if calls else ""),
                   tool_calls=tuple(calls),
                   reasoning="\n\n".join(t for t in (*thoughts, thought) if t) or None,
                   reasoning_parts=tuple(parts))
