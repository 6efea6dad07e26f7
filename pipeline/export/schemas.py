"""JSON Schemas (draft 2020-12) of the three export formats, strict: no field beyond those
written. The tests validate every exported sample against them; use them to check a file
before training on it (e.g. with the ``jsonschema`` package)."""

from __future__ import annotations

from typing import Any

__all__ = ["SCHEMAS"]

_STR = {"type": "string"}
_NULLABLE_STR = {"type": ["string", "null"]}
_STRS = {"type": "array", "items": _STR}


def _object(properties: dict[str, Any], required: tuple[str, ...] | None = None) -> dict:
    return {"type": "object", "properties": properties,
            "required": list(properties if required is None else required),
            "additionalProperties": False}


_SPAN = _object({"session_id": _STR, "first_seq": {"type": "integer", "minimum": 0},
                 "last_seq": {"type": "integer", "minimum": 0},
                 "log_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"}})
_TURN = _object({
    "session_id": _STR, "seq": {"type": "integer"}, "turn_id": _STR, "task_id": _STR,
    "started_at": _STR, "models": _STRS, "providers": _STRS, "credentials": _STRS,
    "exit_reason": _NULLABLE_STR, "completed": {"type": "boolean"},
    "fallback": {"type": "boolean"}, "output": _NULLABLE_STR})
_COMPRESSION = _object({"session_id": _STR, "seq": {"type": "integer"},
                        "message_index": {"type": "integer"},
                        "before_tokens": {"type": ["integer", "null"]},
                        "after_tokens": {"type": ["integer", "null"]}})
_APPROVAL = _object({"session_id": _STR, "seq": {"type": "integer"}, "call_id": _STR,
                     "pattern": _STR, "choice": {"enum": ["once", "session", "always", "deny"]},
                     "source": _STR})
PROVENANCE = _object({
    "session_id": _STR, "segment": {"type": ["integer", "null"]},
    "spans": {"type": "array", "items": _SPAN, "minItems": 1},
    "turns": {"type": "array", "items": _TURN},
    "compressions": {"type": "array", "items": _COMPRESSION},
    "approvals": {"type": "array", "items": _APPROVAL},
    "unanswered_calls": _STRS,
    "redactions": {"type": "array", "items": {"type": "integer"}},
    "redacted_on_export": {"type": "integer", "minimum": 0}})

_FUNCTION_TOOL = _object({"type": {"const": "function"}, "function": _object(
    {"name": _STR, "description": _STR, "parameters": {"type": "object"}})})

SHAREGPT = _object({
    "conversations": {"type": "array", "minItems": 1, "items": _object({
        "from": {"enum": ["system", "human", "gpt", "tool"]}, "value": _STR,
        "weight": {"enum": [0, 1]}}, ("from", "value"))},
    "timestamp": _NULLABLE_STR, "model": _NULLABLE_STR, "completed": {"type": "boolean"},
    "provenance": PROVENANCE})

_OPENAI_CALL = _object({"id": _STR, "type": {"const": "function"},
                        "function": _object({"name": _STR, "arguments": _STR})})
_OPENAI_MESSAGE = {"oneOf": [
    _object({"role": {"enum": ["system", "user"]}, "content": _STR}),
    _object({"role": {"const": "assistant"}, "content": _NULLABLE_STR,
             "tool_calls": {"type": "array", "items": _OPENAI_CALL, "minItems": 1},
             "weight": {"enum": [0, 1]}}, ("role", "content", "weight")),
    _object({"role": {"const": "tool"}, "tool_call_id": _STR, "content": _NULLABLE_STR}),
]}
# provenance only when asked for inline: OpenAI's fine-tuning documents the other three keys.
OPENAI = _object({"messages": {"type": "array", "items": _OPENAI_MESSAGE, "minItems": 1},
                  "tools": {"type": "array", "items": _FUNCTION_TOOL},
                  "parallel_tool_calls": {"type": "boolean"}, "provenance": PROVENANCE},
                 ("messages", "tools", "parallel_tool_calls"))

_TRL_CALL = _object({"id": _STR, "type": {"const": "function"},
                     "function": _object({"name": _STR, "arguments": {"type": "object"}})})
_TRL_MESSAGE = {"oneOf": [
    _object({"role": {"enum": ["system", "user"]}, "content": _STR}),
    _object({"role": {"const": "assistant"}, "content": _STR, "reasoning_content": _STR,
             "tool_calls": {"type": "array", "items": _TRL_CALL, "minItems": 1},
             "weight": {"enum": [0, 1]}}, ("role", "content", "weight")),
    _object({"role": {"const": "tool"}, "name": _NULLABLE_STR, "tool_call_id": _STR,
             "content": _STR}),
]}
TRL = _object({"messages": {"type": "array", "items": _TRL_MESSAGE, "minItems": 1},
               "tools": {"type": "array", "items": _FUNCTION_TOOL}, "provenance": PROVENANCE})

SCHEMAS: dict[str, dict[str, Any]] = {"openai": OPENAI, "sharegpt": SHAREGPT, "trl": TRL}
