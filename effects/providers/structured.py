"""Structured output on the wire: each API's way of asking for an answer that matches a JSON
schema (``ModelRequest.output``). OpenAI's chat completions (and llama.cpp's server, which
turns the schema into a grammar) take ``response_format``; the Responses API ``text.format``;
Anthropic's Messages API has no such field for every model, so the schema becomes a tool the
model is made to call, whose input is the answer, given back as the reply's text."""

from __future__ import annotations

import json

import attrs

from stages.decision import ModelRequest
from stages.log.messages import Message
from stages.log.output_spec import OutputSpec
from stages.log.tool_specs import ToolSpec

__all__ = ["answer_from_tool", "chat_response_format", "forced_tool", "responses_text_format"]


def _format(spec: OutputSpec) -> dict:
    out: dict = {"name": spec.name, "schema": json.loads(spec.schema), "strict": spec.strict}
    if spec.description:
        out["description"] = spec.description
    return out


def chat_response_format(spec: OutputSpec) -> dict:
    """Chat completions' ``response_format``."""
    return {"type": "json_schema", "json_schema": _format(spec)}


def responses_text_format(spec: OutputSpec) -> dict:
    """The Responses API's ``text``."""
    return {"format": {"type": "json_schema", **_format(spec)}}


def forced_tool(request: ModelRequest) -> ModelRequest:
    """Anthropic: the request with the answer's schema as its one tool, which the model must
    call (``tool_choice: {"type": "tool"}``; extended thinking is then off, as the API
    requires)."""
    spec = request.output
    assert spec is not None
    tool = ToolSpec(name=spec.name, parameters=spec.schema,
                    description=spec.description or f"Give the answer as {spec.name}.")
    return attrs.evolve(request, tools=(tool,), tool_choice=spec.name, output=None)


def answer_from_tool(message: Message, spec: OutputSpec) -> Message:
    """The reply to a forced tool: its call's input is the answer, as text."""
    call = next((c for c in message.tool_calls if c.name == spec.name), None)
    if call is None:
        return message
    return attrs.evolve(message, content=call.arguments, tool_calls=())
