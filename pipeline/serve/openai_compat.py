"""OpenAI's chat-completions wire shapes: the request checked, the answer and its stream
chunks built, errors in OpenAI's error body. Plain data in, plain data out (no HTTP here).

The request is checked the way OpenAI checks it: a missing or malformed field is a 400 naming
the ``param``; an unknown model is a 404 ``model_not_found``. Parameters the agent decides
for itself (sampling, ``max_tokens``...) are accepted and ignored. Client-side ``tools`` are
offered to the model next to the agent's own (rules 8): a call to one comes back with
``finish_reason: "tool_calls"``, and the next request ends in the ``tool`` messages answering
it (``pipeline.client_tools``).
``response_format`` is honoured: the answer is checked against its schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import attrs

from effects.images import decoded_data_url
from pipeline.output_types import spec_of_schema
from stages.errors import UsageError
from stages.log.content_parts import Content, ImagePart, TextPart, part_from_openai
from stages.log.messages import Message, from_openai
from stages.log.output_spec import OutputSpec

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
    # The images of the last message (``data:`` URLs are stored when the turn starts).
    images: tuple[ImagePart, ...] = ()
    system_message: str | None
    stream: bool
    include_usage: bool
    # ``response_format``'s schema: the answer must match it (None: free text).
    output: OutputSpec | None = None
    # The client's own tools (OpenAI function tools), and its results of the calls the last
    # turn ended on: the request's trailing ``tool`` messages (then ``user_message`` is "").
    client_tools: tuple[dict[str, Any], ...] = ()
    tool_results: tuple[dict[str, Any], ...] = ()
    # The results answer calls of no assistant message in the request: only a session that
    # made them can take them.
    results_need_session: bool = False


def _text(content: Any, param: str) -> Content:
    """A message's content: a string; a list of text parts (joined, as before images); or,
    with images, a tuple of text and image parts (an ``image_url`` by an http(s) or a base64
    ``data:`` URL, as OpenAI takes them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(f"Invalid type for '{param}': expected a string or an array of content "
                  "parts.", param)
    parts = [_part(part, f"{param}[{index}]") for index, part in enumerate(content)]
    if all(isinstance(part, TextPart) for part in parts):
        return "".join(cast(TextPart, part).text for part in parts)
    return tuple(parts)


def _part(raw: Any, param: str) -> TextPart | ImagePart:
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind not in ("text", "image_url"):
        raise bad(f"Invalid content part at {param}: text parts ({{'type': 'text', 'text': "
                  "...}) and image parts ({'type': 'image_url', 'image_url': {'url': ...}}) "
                  "are supported.", param)
    try:
        part = part_from_openai(dict(raw))
    except ValueError as exc:
        raise bad(f"Invalid content part at {param}: {exc}.", param) from exc
    if isinstance(part, ImagePart):
        url = part.url or ""
        if not url.startswith(("http://", "https://", "data:image/")):
            raise bad(f"Invalid image URL at {param}.image_url.url: expected an http(s) URL or "
                      "a base64 data URL (data:image/png;base64,...).", f"{param}.image_url")
        if url.startswith("data:"):
            try:  # checked now: a bad image is the caller's 400, not a failed turn
                decoded_data_url(url)
            except UsageError as exc:
                raise bad(f"Invalid image at {param}.image_url.url: {exc}.",
                          f"{param}.image_url") from exc
        if part.detail not in (None, "auto", "low", "high"):
            raise bad(f"Invalid value for '{param}.image_url.detail': {part.detail!r}; "
                      "expected 'auto', 'low' or 'high'.", f"{param}.image_url.detail")
    return part


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
        if not isinstance(content, str) and role != "user":
            raise bad(f"Invalid content at '{param}.content': image parts are only allowed in "
                      "messages with role 'user'.", f"{param}.content")
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
    if body.get("functions"):
        raise bad("'functions' is not supported: give client tools as 'tools'.", "functions")
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
    results = len(messages) - _trailing_tools(messages)
    lone = not any(m.role == "assistant" for m in messages[:results])
    _answered(messages[:results] if results < len(messages) and lone else messages)
    last = messages[-1]
    if last.role not in ("user", "tool"):
        raise bad("The last message must have role 'user' (what the agent answers) or 'tool' "
                  "(results of the calls to your tools).", f"messages[{len(raw) - 1}].role")
    stream = _flag(body, "stream")
    include_usage = _checked_options(body, stream)
    tools = client_tools(body.get("tools"))
    new = len(messages) - 1 if last.role == "user" else results
    system = [m.text for m in messages[:new] if m.role in _SYSTEM_ROLES]
    earlier = tuple(m.to_openai() for m in messages[:new] if m.role not in _SYSTEM_ROLES)
    return ChatRequest(model=model, user_message=last.text if last.role == "user" else "",
                       images=last.images if last.role == "user" else (),
                       history=earlier or None,
                       system_message="\n\n".join(system) or None, stream=stream,
                       include_usage=include_usage, client_tools=tools,
                       tool_results=tuple(m.to_openai() for m in messages[results:]),
                       results_need_session=results < len(messages) and lone,
                       output=_response_format(body.get("response_format")))


def _trailing_tools(messages: Sequence[Message]) -> int:
    count = 0
    while count < len(messages) and messages[-1 - count].role == "tool":
        count += 1
    return count


def client_tools(raw: Any) -> tuple[dict[str, Any], ...]:
    """The request's ``tools``: function tools, each with a name (OpenAI's checks)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise bad("Invalid type for 'tools': expected an array of tools.", "tools")
    for index, tool in enumerate(raw):
        param = f"tools[{index}]"
        tool = _object(tool, param)
        if tool.get("type") != "function":
            raise bad(f"Invalid value for '{param}.type': {tool.get('type')!r}; only "
                      "'function' tools are supported.", f"{param}.type")
        function = _object(tool.get("function"), f"{param}.function")
        _string(function, "name", f"{param}.function", required=True)
        _string(function, "description", f"{param}.function")
        if function.get("parameters") is not None and not isinstance(
                function["parameters"], Mapping):
            raise bad(f"Invalid type for '{param}.function.parameters': expected an object.",
                      f"{param}.function.parameters")
    return tuple(raw)


def _response_format(value: Any) -> OutputSpec | None:
    """``response_format``: ``text`` (or none), ``json_object`` (any JSON object) or
    ``json_schema`` (an answer matching its schema, checked, asked again when it does not)."""
    if value is None:
        return None
    kind = _object(value, "response_format").get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return spec_of_schema({"type": "object"}, name="json_object")
    if kind != "json_schema":
        raise bad("Invalid value for 'response_format.type': expected 'text', 'json_object' "
                  "or 'json_schema'.", "response_format.type")
    spec = _object(value.get("json_schema"), "response_format.json_schema")
    name, schema = spec.get("name"), spec.get("schema", {"type": "object"})
    if not isinstance(name, str) or not name:
        raise bad("Missing required parameter: 'response_format.json_schema.name'.",
                  "response_format.json_schema.name")
    if not isinstance(schema, Mapping):
        raise bad("Invalid type for 'response_format.json_schema.schema': expected an "
                  "object.", "response_format.json_schema.schema")
    description = spec.get("description")
    try:
        return spec_of_schema(schema, name=name, strict=spec.get("strict") is True,
                              description=description if isinstance(description, str)
                              else None)
    except UsageError as exc:
        raise bad(f"Invalid 'response_format.json_schema.schema': {exc}",
                  "response_format.json_schema.schema") from exc


def finish_reason(result: Any) -> str:
    """OpenAI's finish reason for a finished turn (a ``TurnResult``)."""
    reason = result.turn_exit_reason
    if reason == "client_tool_calls":
        return "tool_calls"
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
    message: dict[str, Any] = {"role": "assistant", "content": result.final_response or "",
                               "refusal": None}
    if result.tool_calls:  # the calls to the client's tools, for it to run
        message["content"] = result.final_response or None
        message["tool_calls"] = [call.to_openai() for call in result.tool_calls]
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


def tool_call_deltas(calls: Sequence[Any]) -> dict[str, Any]:
    """The calls to the client's tools as one chunk's delta (each call whole, by index)."""
    return {"tool_calls": [{"index": i, **call.to_openai()} for i, call in enumerate(calls)]}


def usage_chunk(completion_id: str, created: int, model: str, usage: Any) -> dict[str, Any]:
    """The last chunk of a stream asked for with ``include_usage``: no choices, the usage."""
    return {"id": completion_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "system_fingerprint": None, "choices": [],
            "usage": usage_body(usage)}


def models_body(models: Sequence[str], created: int) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created,
                                        "owned_by": "mibyan"} for name in models]}
