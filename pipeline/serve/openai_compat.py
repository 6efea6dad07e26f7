"""OpenAI's chat-completions wire shapes: the request checked, the answer and its stream
chunks built, errors in OpenAI's error body. Plain data in, plain data out (no HTTP here).

The request is checked the way OpenAI checks it: a missing or malformed field is a 400 naming
the ``param``; an unknown model is a 404 ``model_not_found``. Parameters the agent decides
for itself (sampling, ``max_tokens``...) are accepted and ignored; client-side ``tools`` are
refused, since the agent runs its own tools and a client could never be sent the calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from stages.log.messages import Message, from_openai

ROLES = ("system", "developer", "user", "assistant", "tool")
_SYSTEM_ROLES = ("system", "developer")


class ApiError(Exception):
    """A request refused, with the status and OpenAI's ``error`` fields."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = (
            status, message, type, param, code)
        self.headers = dict(headers or {})  # sent with the refusal (a 503's Retry-After)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


ECHOED_CHARS = 80


def echoed(value: str) -> str:
    """A client's value as an error message repeats it: cut to ``ECHOED_CHARS`` characters, so
    a 5,000-character id is not sent back whole."""
    return value if len(value) <= ECHOED_CHARS else value[:ECHOED_CHARS] + "…"


def upstream_failed(error_class: str, status: int | None) -> str:
    """What a client is told of a failed call to the model's provider: the error's class and
    the provider's HTTP status, never the error's text, which names the provider's address (an
    internal host, a query string) and repeats what it answered; the server logs that."""
    said = f", HTTP {status}" if status is not None else ""
    return f"the model call failed ({error_class}{said}); the server's log has the details"


def bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


@attrs.frozen(kw_only=True)
class ChatRequest:
    """What the agent needs from a request: the new user message, the caller's earlier
    messages (checked, in OpenAI format; None: none given), its system text, and how to
    answer."""

    model: str
    user_message: str
    history: tuple[dict[str, Any], ...] | None
    system_message: str | None
    stream: bool
    include_usage: bool


def _text(content: Any, param: str) -> str:
    """A message's content: a string, or a list of text parts (joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if not isinstance(part, Mapping) or part.get("type") != "text" \
                    or not isinstance(part.get("text"), str):
                raise bad(f"Invalid content part at {param}[{index}]: only text parts "
                          "({'type': 'text', 'text': ...}) are supported.", f"{param}[{index}]")
            texts.append(part["text"])
        return "".join(texts)
    raise bad(f"Invalid type for '{param}': expected a string or an array of text parts.",
              param)


def _string(raw: Mapping[str, Any], name: str, param: str, *, required: bool = False) -> None:
    value = raw.get(name)
    if value is None:
        if required:
            raise bad(f"Missing required parameter: '{param}.{name}'.", f"{param}.{name}")
    elif not isinstance(value, str):
        raise bad(f"Invalid type for '{param}.{name}': expected a string, got "
                  f"{type(value).__name__}.", f"{param}.{name}")


def _object(value: Any, param: str) -> Mapping[str, Any]:
    if value is None:
        raise bad(f"Missing required parameter: '{param}'.", param)
    if not isinstance(value, Mapping):
        raise bad(f"Invalid type for '{param}': expected an object.", param)
    return value


def _tool_calls(calls: Any, param: str) -> None:
    """An assistant message's tool calls, each an id and a function's name and arguments (a
    JSON text), as OpenAI takes them."""
    if not isinstance(calls, list):
        raise bad(f"Invalid type for '{param}': expected an array of tool calls.", param)
    for index, raw in enumerate(calls):
        call = _object(raw, f"{param}[{index}]")
        _string(call, "id", f"{param}[{index}]", required=True)
        if call.get("type", "function") != "function":
            raise bad(f"Invalid value for '{param}[{index}].type': {call['type']!r}; expected "
                      "'function'.", f"{param}[{index}].type")
        function = _object(call.get("function"), f"{param}[{index}].function")
        for name in ("name", "arguments"):
            _string(function, name, f"{param}[{index}].function", required=True)


def _message(raw: Any, index: int) -> Message:
    param = f"messages[{index}]"
    if not isinstance(raw, Mapping):
        raise bad(f"Invalid type for '{param}': expected an object.", param)
    role = raw.get("role")
    if role not in ROLES:
        raise bad(f"Invalid value for '{param}.role': {role!r}; expected one of "
                  f"{', '.join(ROLES)}.", f"{param}.role")
    content = raw.get("content")
    if content is not None:
        content = _text(content, f"{param}.content")
    elif role != "assistant":
        raise bad(f"Missing required parameter: '{param}.content'.", f"{param}.content")
    _string(raw, "tool_call_id", param, required=role == "tool")
    for name in ("name", "reasoning", "reasoning_content"):
        _string(raw, name, param)
    if raw.get("tool_calls") is not None:
        if role != "assistant":
            raise bad(f"Invalid parameter: '{param}.tool_calls' is only allowed on messages "
                      "with role 'assistant'.", f"{param}.tool_calls")
        _tool_calls(raw["tool_calls"], f"{param}.tool_calls")
    try:  # "developer" is OpenAI's newer name for "system"
        return from_openai({**raw, "content": content,
                            "role": "system" if role == "developer" else role})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # The checks above leave only mibyan's own field, as a session's messages carry it.
        raise bad(f"Invalid value for '{param}.reasoning_parts': expected the reasoning parts "
                  "of a message as a session's messages give them.",
                  f"{param}.reasoning_parts") from exc


def _answered(messages: Sequence[Message]) -> None:
    """Each tool call answered by a tool message right after the assistant message that made
    it, and each tool message answering such a call: OpenAI and Anthropic refuse other
    history with a 400, so the turn would fail on it (with their words, as a 502)."""
    open_calls: dict[str, None] = {}
    called_at = 0
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in open_calls:
                raise bad(f"Invalid parameter: messages with role 'tool' must be a response to "
                          f"a preceding message with 'tool_calls'; 'messages[{index}]' answers "
                          f"{message.tool_call_id!r}, a call no assistant message just before "
                          "it made (or one answered already).", f"messages[{index}].role")
            del open_calls[message.tool_call_id]
        elif open_calls:
            raise bad("An assistant message with 'tool_calls' must be followed by tool messages "
                      "responding to each 'tool_call_id'. The following tool_call_ids of "
                      f"'messages[{called_at}]' did not have response messages: "
                      f"{', '.join(open_calls)}.", f"messages[{called_at}].tool_calls")
        if message.role == "assistant":
            open_calls, called_at = dict.fromkeys(c.id for c in message.tool_calls), index


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad(f"Invalid type for '{name}': expected a boolean, got {value!r}.", name)
    return value


def _checked_options(body: Mapping[str, Any], stream: bool) -> bool:
    """The request's options the agent cannot honour are refused; ``include_usage``."""
    n = body.get("n")
    if n is not None and n != 1:
        raise bad("Invalid value for 'n': mibyan answers with one choice (n = 1).", "n")
    for name in ("tools", "functions"):
        if body.get(name):
            raise bad(f"'{name}' is not supported: the agent runs its own tools.", name)
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise bad("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                  "stream_options")
    if not isinstance(options, Mapping):
        raise bad("Invalid type for 'stream_options': expected an object.", "stream_options")
    return _flag(options, "include_usage")


def parse_chat_request(body: Any, models: Sequence[str]) -> ChatRequest:
    """A checked request; ``models`` are the names the server answers to."""
    if not isinstance(body, Mapping):
        raise bad("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("Missing required parameter: 'model'.", "model")
    if model not in models:
        raise ApiError(404, f"The model `{echoed(model)}` does not exist or you do not have "
                       f"access to it (this server serves {', '.join(models)}).", param="model",
                       code="model_not_found")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad("Missing required parameter: 'messages' (a non-empty array).", "messages")
    messages = [_message(m, i) for i, m in enumerate(raw)]
    _answered(messages)
    last = messages[-1]
    if last.role != "user":
        raise bad("The last message must have role 'user': it is what the agent answers.",
                  f"messages[{len(raw) - 1}].role")
    stream = _flag(body, "stream")
    include_usage = _checked_options(body, stream)
    system = [m.content or "" for m in messages[:-1] if m.role in _SYSTEM_ROLES]
    earlier = tuple(m.to_openai() for m in messages[:-1] if m.role not in _SYSTEM_ROLES)
    return ChatRequest(model=model, user_message=last.content or "",
                       history=earlier or None, system_message="\n\n".join(system) or None,
                       stream=stream, include_usage=include_usage)


def finish_reason(result: Any) -> str:
    """OpenAI's finish reason for a finished turn (a ``TurnResult``)."""
    reason = result.turn_exit_reason
    if reason == "content_filter":
        return "content_filter"
    if reason.startswith("max_iterations") or reason == "incomplete_response":
        return "length"
    return "stop"


def usage_body(usage: Any) -> dict[str, Any]:
    """A turn's ``Usage`` as OpenAI's usage object (every model call of the turn summed).
    OpenAI's prompt tokens include the cached ones, which mibyan's input tokens leave out."""
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    body = {"prompt_tokens": prompt, "completion_tokens": usage.output_tokens,
            "total_tokens": prompt + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens}}
    if usage.reasoning_in_output:  # not reported apart (Anthropic): no count rather than 0
        del body["completion_tokens_details"]
    return body


def completion_body(completion_id: str, created: int, model: str, result: Any
                    ) -> dict[str, Any]:
    message = {"role": "assistant", "content": result.final_response or "", "refusal": None}
    return {"id": completion_id, "object": "chat.completion", "created": created,
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish_reason(result)}],
            "usage": usage_body(result.usage)}


def chunk_body(completion_id: str, created: int, model: str, *, delta: Mapping[str, Any],
               finish: str | None = None, include_usage: bool = False) -> dict[str, Any]:
    """One ``chat.completion.chunk``; with ``include_usage`` every chunk but the last carries
    ``usage: null``, as OpenAI's do."""
    body: dict[str, Any] = {
        "id": completion_id, "object": "chat.completion.chunk", "created": created,
        "model": model, "system_fingerprint": None,
        "choices": [{"index": 0, "delta": dict(delta), "logprobs": None,
                     "finish_reason": finish}]}
    if include_usage:
        body["usage"] = None
    return body


def usage_chunk(completion_id: str, created: int, model: str, usage: Any) -> dict[str, Any]:
    """The last chunk of a stream asked for with ``include_usage``: no choices, the usage."""
    return {"id": completion_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "system_fingerprint": None, "choices": [],
            "usage": usage_body(usage)}


def models_body(models: Sequence[str], created: int) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created,
                                        "owned_by": "mibyan"} for name in models]}
