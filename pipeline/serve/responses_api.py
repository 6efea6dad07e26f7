"""OpenAI's Responses API wire shapes (``POST /v1/responses``): the request made a chat request
(``openai_compat``'s checks then apply), the response object, and its stream's events. Plain
data in, plain data out (no HTTP here).

A response's id names its session and turn (``resp_<session>_<turn>``), so that
``previous_response_id`` goes on in that session after a restart too, with no table to keep;
it must name the session's latest response (a branch is a fork: ``POST
/v1/sessions/{id}/fork``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.serve import openai_compat as oa

_ID = re.compile(r"resp_([0-9A-Za-z_-]+)_([0-9]+)")
_TEXT_PARTS = ("input_text", "output_text", "text")


def response_id(session_id: str, turn: int) -> str:
    return f"resp_{session_id}_{turn}"


def previous(raw: Any) -> tuple[str, int] | None:
    """``previous_response_id``: the session and the turn it names, or None."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise oa.bad("Invalid type for 'previous_response_id': expected a string.",
                     "previous_response_id")
    found = _ID.fullmatch(raw)
    if found is None:
        raise not_found(raw)
    return found.group(1), int(found.group(2))


def not_found(raw: str) -> oa.ApiError:
    return oa.ApiError(404, f"Previous response with id '{oa.echoed(raw)}' not found.",
                       param="previous_response_id", code="previous_response_not_found")


def _text(content: Any, param: str) -> Any:
    """A message item's content: a string, or its text parts as chat text parts."""
    if isinstance(content, str) or not isinstance(content, list):
        return content
    parts = []
    for index, part in enumerate(content):
        if not isinstance(part, Mapping) or part.get("type") not in _TEXT_PARTS:
            raise oa.bad(f"Invalid content part at '{param}[{index}]': only text parts "
                         "(input_text, output_text) are supported.", f"{param}[{index}]")
        parts.append({"type": "text", "text": part.get("text")})
    return parts


def _call(item: Mapping[str, Any], param: str) -> dict[str, Any]:
    for name in ("call_id", "name", "arguments"):
        if not isinstance(item.get(name), str):
            raise oa.bad(f"Missing required parameter: '{param}.{name}'.", f"{param}.{name}")
    return {"id": item["call_id"], "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]}}


def _output(value: Any) -> Any:
    if isinstance(value, list):  # output parts: their text
        return "".join(p.get("text", "") for p in value if isinstance(p, Mapping))
    return value


def messages_of(raw_input: Any) -> list[dict[str, Any]]:
    """``input`` (a string, or items: messages, ``function_call``, ``function_call_output``)
    as chat messages; a run of calls joins the assistant message before it."""
    if isinstance(raw_input, str):
        return [{"role": "user", "content": raw_input}]
    if not isinstance(raw_input, list) or not raw_input:
        raise oa.bad("Missing required parameter: 'input' (a string or a non-empty array).",
                     "input")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(raw_input):
        param = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise oa.bad(f"Invalid type for '{param}': expected an object.", param)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role"),
                             "content": _text(item.get("content"), f"{param}.content")})
        elif kind == "function_call":
            last = messages[-1] if messages else None
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                messages.append(last)
            last.setdefault("tool_calls", []).append(_call(item, param))
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": _output(item.get("output"))})
        elif kind != "reasoning":  # a model's reasoning item, sent back: the session has it
            raise oa.bad(f"Invalid value for '{param}.type': {kind!r}; supported are message, "
                         "function_call, function_call_output.", f"{param}.type")
    return messages


def _tool(raw: Any, index: int) -> dict[str, Any]:
    """A Responses function tool (flat) as a chat one (nested under ``function``)."""
    if not isinstance(raw, Mapping) or raw.get("type") != "function":
        kind = raw.get("type") if isinstance(raw, Mapping) else raw
        raise oa.bad(f"Invalid value for 'tools[{index}].type': {kind!r}; only 'function' "
                     "tools are supported.", f"tools[{index}].type")
    return {"type": "function", "function": {
        k: raw[k] for k in ("name", "description", "parameters") if raw.get(k) is not None}}


def chat_body(body: Any) -> dict[str, Any]:
    """The request as a chat-completions body: ``instructions`` its system message."""
    if not isinstance(body, Mapping):
        raise oa.bad("The request body must be a JSON object.")
    messages = messages_of(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise oa.bad("Invalid type for 'instructions': expected a string.", "instructions")
        messages.insert(0, {"role": "system", "content": instructions})
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise oa.bad("Invalid type for 'tools': expected an array of tools.", "tools")
    chat = {"model": body.get("model"), "messages": messages, "stream": body.get("stream")}
    if tools:
        chat["tools"] = [_tool(t, i) for i, t in enumerate(tools)]
    return chat


def usage_body(usage: Any) -> dict[str, Any]:
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {"input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": prompt + usage.output_tokens}


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"id": item_id, "type": "message", "status": status, "role": "assistant",
            "content": content if status == "completed" else []}


def call_item(call: Any, status: str = "completed") -> dict[str, Any]:
    return {"id": f"fc_{call.id}", "type": "function_call", "status": status,
            "call_id": call.id, "name": call.name,
            "arguments": call.arguments if status == "completed" else ""}


def output_items(resp_id: str, result: Any) -> list[dict[str, Any]]:
    """The turn's answer (a message, when there is text) and its calls to the client's
    tools."""
    items = [message_item(f"msg_{resp_id[5:]}", result.final_response)] \
        if result.final_response else []
    return items + [call_item(c) for c in result.tool_calls]


def response_body(resp_id: str, body: Mapping[str, Any], *, status: str = "completed",
                  output: Sequence[dict[str, Any]] = (), usage: Any = None,
                  error: dict[str, Any] | None = None, previous_id: str | None = None,
                  created: int | None = None) -> dict[str, Any]:
    return {"id": resp_id, "object": "response",
            "created_at": int(time.time()) if created is None else created,
            "status": status, "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete"
            else None,
            "instructions": body.get("instructions"), "model": body.get("model"),
            "output": list(output), "parallel_tool_calls": True,
            "previous_response_id": previous_id, "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "store": True, "text": {"format": {"type": "text"}},
            "usage": None if usage is None else usage_body(usage), "metadata": {}}


def status_of(result: Any) -> str:
    return "incomplete" if oa.finish_reason(result) == "length" else "completed"
