"""Trajectory samples in the three training formats. Pure: a :class:`Sample` in, a JSON-able dict
out.

* ``sharegpt``: as hermes-agent writes it: ``conversations`` of ``{"from", "value"}`` turns; the
  system turn is hermes-agent's function-calling preamble with the tools in ``<tools>`` (the
  session's own system prompt is not training data); every ``gpt`` turn opens with a
  ``<think>`` block (empty when the model gave no reasoning), then the text, then
  ``<tool_call>`` blocks; the results of one step form a single ``tool`` turn of
  ``<tool_response>`` blocks.
* ``openai``: OpenAI chat fine-tuning: ``messages`` (with the session's system prompt),
  ``tools``, ``parallel_tool_calls``. Reasoning is left out: the format has no field for it.
* ``trl``: Hugging Face TRL conversational ``messages`` with ``tools``; tool-call ``arguments``
  are objects and an assistant's reasoning is ``reasoning_content``, as transformers' chat
  templates read them.

In all three, each reply (an ``assistant`` message, a ``gpt`` turn) has a ``weight``: 1 for a
reply the model produced here, 0 for context carried over by a compression, for the replies a
fork repeats from its origin and for notes the engine wrote, so no reply is trained on twice,
whatever the format. OpenAI's fine-tuning reads it; for the other two it is the per-message
training field axolotl reads (``message_field_training: weight``). Every reply carries it, so a
dataset's rows share one schema.

Every sample also carries ``provenance`` (see ``pipeline.export.exporter``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from pipeline.export.trajectory import Entry
from stages.log.content_parts import Content, ImagePart, text_of
from stages.log.messages import Message
from stages.log.tool_specs import ToolSpec
from stages.prompt.untrusted import unwrapped

__all__ = ["FORMATS", "Sample", "hermes_system_prompt", "openai", "sharegpt", "trl"]


@attrs.frozen(kw_only=True)
class Sample:
    """One training example before formatting: its messages (tool calls all answered), the
    tools offered, and where it came from."""

    entries: tuple[Entry, ...]
    system_prompt: str | None
    tools: tuple[ToolSpec, ...]
    provenance: dict[str, Any]
    completed: bool
    model: str | None
    timestamp: str | None


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _parsed(text: str | None) -> Any:
    """JSON text as its value when it is an object or array, else the text itself."""
    if text is None:
        return ""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def _tool_schema(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                             "parameters": json.loads(spec.parameters)}}


def hermes_system_prompt(tools: tuple[ToolSpec, ...]) -> str:
    """The function-calling preamble of a ShareGPT sample, as hermes-agent's trajectories have
    it (its quirks kept: a sample trains best on the prompt its kind is run with): the tools
    as one JSON array in ``<tools>``."""
    listed = _dumps([{"name": t.name, "description": t.description,
                      "parameters": json.loads(t.parameters), "required": None}
                     for t in tools])
    return ("You are a function calling AI model. You are provided with function signatures "
            "within <tools> </tools> XML tags. You may call one or more functions to assist "
            "with the user query. If available tools are not relevant in assisting with user "
            "query, just respond in natural conversational language. Don't make assumptions "
            "about what values to plug into functions. After calling & executing the "
            "functions, you will be provided with function results within <tool_response> "
            "</tool_response> XML tags. Here are the available tools:\n"
            f"<tools>\n{listed}\n</tools>\n"
            "For each function call return a JSON object, with the following pydantic model "
            "json schema for each:\n"
            "{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': "
            "'Name', 'type': 'string'}, 'arguments': {'title': 'Arguments', 'type': "
            "'object'}}, 'required': ['name', 'arguments']}\n"
            "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
            "Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n"
            "</tool_call>")


def _gpt_value(message: Message) -> str:
    reasoning = (message.reasoning or "").strip()
    parts = [f"<think>\n{reasoning}\n</think>" if reasoning else "<think>\n</think>"]
    if message.text.strip():
        parts.append(message.text)
    parts.extend(f"<tool_call>\n{_dumps({'name': c.name, 'arguments': _parsed(c.arguments)})}"
                 "\n</tool_call>" for c in message.tool_calls)
    return "\n".join(parts).rstrip()


def _returned(content: Content) -> str | None:
    """A tool result as the tool returned it: a trajectory is the conversation's data, not
    the session's marking of it (rules 7 sends each result as a data block)."""
    return None if content is None else unwrapped(text_of(content))


# Images are written as their ``mibyan-blob:`` address here; the exporter puts the bytes in
# (a ``data:`` URL) after redaction, which is for text and never scans image bytes.
def _content_parts(message: Message) -> Any:
    """OpenAI's content: the text, or (with images) text and ``image_url`` parts."""
    content = message.content
    if content is None or isinstance(content, str):
        return content
    return [part.to_openai() for part in content]


def _trl_content(message: Message) -> Any:
    """TRL's conversational vision format: ``{"type": "image"}`` where each image was
    (its bytes in the sample's ``images``), the text as ``{"type": "text"}`` parts."""
    content = message.content
    if content is None or isinstance(content, str):
        return content or ""
    return [{"type": "image"} if isinstance(part, ImagePart) else part.to_openai()
            for part in content]


def _images(sample: Sample) -> list[str]:
    return [image.ref for e in _history(sample) for image in e.message.images]


def _human_value(message: Message) -> str:
    """ShareGPT's user turn: an ``<image>`` token for each image (LLaMA-Factory's
    convention, the images in the sample's ``images``), then the text."""
    return "".join("<image>" for _ in message.images) + message.text


def _tool_response(message: Message) -> str:
    body = {"tool_call_id": message.tool_call_id, "name": message.name,
            "content": _parsed(_returned(message.content))}
    return f"<tool_response>\n{_dumps(body)}\n</tool_response>"


def sharegpt(sample: Sample) -> dict[str, Any]:
    turns: list[dict[str, Any]] = [{"from": "system",
                                    "value": hermes_system_prompt(sample.tools)}]
    for entry in sample.entries:
        message = entry.message
        if message.role == "tool":
            value = _tool_response(message)
            if turns[-1]["from"] == "tool":  # all results of one step in one turn
                turns[-1]["value"] += "\n" + value
            else:
                turns.append({"from": "tool", "value": value})
        elif message.role == "assistant":
            turns.append({"from": "gpt", "value": _gpt_value(message),
                          "weight": _weight(entry)})
        elif message.role == "user":
            turns.append({"from": "human", "value": _human_value(message)})
    return {"conversations": turns, "timestamp": sample.timestamp, "model": sample.model,
            "completed": sample.completed, "provenance": sample.provenance,
            **_with_images(sample)}


def _with_images(sample: Sample) -> dict[str, Any]:
    """The sample's ``images`` field, only when it has images (text samples are unchanged)."""
    images = _images(sample)
    return {"images": images} if images else {}


def _weight(entry: Entry) -> int:
    return 0 if entry.inherited or entry.synthetic or entry.copied else 1


def _openai_message(entry: Entry) -> dict[str, Any]:
    message = entry.message
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id,
                "content": _returned(message.content)}
    out: dict[str, Any] = {"role": message.role, "content": _content_parts(message)}
    if message.role == "assistant":
        if message.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in message.tool_calls]
        out["weight"] = _weight(entry)
    return out


def _system(sample: Sample) -> list[dict[str, Any]]:
    if sample.system_prompt is None:
        return []
    return [{"role": "system", "content": sample.system_prompt}]


def _history(sample: Sample) -> list[Entry]:
    return [e for e in sample.entries if e.message.role != "system"]


def openai(sample: Sample) -> dict[str, Any]:
    messages = _system(sample) + [_openai_message(e) for e in _history(sample)]
    parallel = any(len(e.message.tool_calls) > 1 for e in sample.entries)
    return {"messages": messages, "tools": [_tool_schema(t) for t in sample.tools],
            "parallel_tool_calls": parallel, "provenance": sample.provenance}


def _trl_message(entry: Entry) -> dict[str, Any]:
    message = entry.message
    if message.role == "tool":
        return {"role": "tool", "name": message.name, "tool_call_id": message.tool_call_id,
                "content": _returned(message.content) or ""}
    out: dict[str, Any] = {"role": message.role, "content": _trl_content(message)}
    if message.role == "assistant":
        out["weight"] = _weight(entry)
        if message.reasoning:
            out["reasoning_content"] = message.reasoning
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
                for c in message.tool_calls]
    return out


def _arguments(text: str) -> Any:
    value = _parsed(text)
    return value if isinstance(value, dict) else {"_raw": text}


def trl(sample: Sample) -> dict[str, Any]:
    messages = _system(sample) + [_trl_message(e) for e in _history(sample)]
    return {"messages": messages, "tools": [_tool_schema(t) for t in sample.tools],
            "provenance": sample.provenance, **_with_images(sample)}


FORMATS: dict[str, Callable[[Sample], dict[str, Any]]] = {
    "openai": openai, "sharegpt": sharegpt, "trl": trl}
