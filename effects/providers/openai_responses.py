"""OpenAI Responses API adapter (api mode ``codex_responses``), over the shared HTTP shell.

The canonical (OpenAI chat) history becomes Responses ``input`` items: the system prompt is sent
as ``instructions``; user text as ``message`` items with ``input_text`` parts; assistant text as
``message`` items with ``output_text`` parts and no item id (as the Codex CLI sends them: llama.cpp
refuses assistant text given as a plain string, and OpenAI accepts parts without the id and
status a stateless client does not keep); assistant tool
calls as ``function_call`` items; tool results as ``function_call_output`` items. Requests are
stateless (``store: false``). Each message's items are converted once and cached as JSON text,
so a request body is a join of ready strings, as in :mod:`effects.providers.openai_chat`.

Replies are mapped onto mibyan's closed finish-reason set: ``tool_calls``, ``length``
(incomplete at ``max_output_tokens``, or a text reply that used all of them, which llama.cpp's
server reports ``completed``), ``content_filter``, ``incomplete`` (queued, in progress,
incomplete for another reason, an incomplete item, commentary without a final answer, or
reasoning with no visible text and no call: the loop continues it) and ``stop``. A ``failed`` or
``cancelled`` response raises :class:`ModelBehaviourError`.

Posting, SSE or JSON reading, deadlines, aborts and error mapping are
:mod:`effects.providers.http_shell`'s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from effects.protocols import CancelToken, DeltaSink
from effects.providers.http_shell import Exchange, HttpShell, StopsOnCancel
from effects.providers.openai_chat import openai_shell, stream_error
from effects.providers.reasoning_wire import ContentSplit, is_openai
from effects.providers.structured import responses_text_format
from effects.providers.token_wire import LOGPROBS_INCLUDE, responses_tokens
from effects.providers.wire import WireCache, sendable_message
from stages.decision import ModelRequest
from stages.errors import ModelBehaviourError, ProviderUnavailableError, UsageError
from stages.log.content_parts import TextPart
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall, canonical_arguments, canonical_json
from stages.log.reasoning_parts import ReasoningPart
from stages.log.tool_specs import ToolSpec
from stages.recovery.reasoning import effort_of
from stages.turn.think_tags import split_think

# --- request ------------------------------------------------------------------------------------

def _reasoning_item(part: ReasoningPart) -> dict:
    """A reasoning item as a stateless request sends it back: summary and encrypted content,
    no id (items are not stored, so an id would name nothing the server has)."""
    return {"type": "reasoning", "encrypted_content": part.data,
            "summary": [{"type": "summary_text", "text": text} for text in part.summary]}


def _input_parts(message: Message) -> list[dict]:
    """A user or system message's input parts: its text, and its images as ``input_image``
    (a ``data:`` URL the send path made of the stored bytes, or a URL the server fetches)."""
    content = message.content
    if content is None or isinstance(content, str):
        return [{"type": "input_text", "text": content or ""}]
    parts: list[dict] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append({"type": "input_text", "text": part.text})
            continue
        if part.sha256 is not None:
            raise UsageError(f"an image that was not made sendable: {part.ref[:80]}")
        parts.append({"type": "input_image", "image_url": part.url,
                      "detail": part.detail or "auto"})
    return parts


def _message_items(message: Message, provider: str | None = None) -> list[dict]:
    """The input items of one message; with ``provider``, an assistant message's reasoning
    items issued by that provider come first (deduplicated: a continuation repeats none)."""
    message = sendable_message(message)
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id or "",
                 "output": message.text}]
    if message.role != "assistant":
        return [{"type": "message", "role": message.role, "content": _input_parts(message)}]
    items: list[dict] = []
    if provider is not None:
        seen: set[str] = set()
        for part in message.reasoning_parts:
            if part.replayable_to("codex_responses", provider) and part.data not in seen:
                seen.add(part.data or "")
                items.append(_reasoning_item(part))
    if message.content or not message.tool_calls:
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": message.text}]})
    items.extend({"type": "function_call", "call_id": call.id, "name": call.name,
                  "arguments": call.arguments} for call in message.tool_calls)
    return items


# The message's input items as comma-joined JSON (empty for an empty assistant message).
_items_json: WireCache[Message, str] = WireCache(
    lambda m: ",".join(canonical_json(item) for item in _message_items(m)))
# The same with the reasoning items a provider issued, one cache per provider.
_replay_json: dict[str, WireCache[Message, str]] = {}


def _items_for(message: Message, provider: str | None) -> str:
    if provider is None or not message.reasoning_parts:
        return _items_json(message)
    cache = _replay_json.get(provider)
    if cache is None:
        cache = _replay_json.setdefault(provider, WireCache(
            lambda m: ",".join(canonical_json(i) for i in _message_items(m, provider))))
    return cache(message)
_tool_json: WireCache[ToolSpec, str] = WireCache(lambda s: canonical_json({
    "type": "function", "name": s.name, "description": s.description,
    "parameters": json.loads(s.parameters), "strict": False}))


def _tool_choice(value: str | None) -> str | dict:
    if value is None or value in ("auto", "none", "required"):
        return value or "auto"
    return {"type": "function", "name": value}


def request_body(request: ModelRequest) -> bytes:
    """The ``POST /responses`` body: settings first, then the joined input items."""
    head: dict[str, Any] = {"model": request.model, "store": False}
    if request.system_prompt is not None:
        head["instructions"] = request.system_prompt
    if request.tools:
        head["tool_choice"] = _tool_choice(request.tool_choice)
        head["parallel_tool_calls"] = True
    if request.output is not None:
        head["text"] = responses_text_format(request.output)
    if request.max_tokens is not None:
        head["max_output_tokens"] = int(request.max_tokens)
    effort = effort_of(request.reasoning_effort, request.reasoning_budget)
    if effort is not None:
        head["reasoning"] = {"effort": effort, "summary": "auto"}
        if effort != "none" and request.replay_reasoning:
            # Stateless: the reasoning comes back encrypted, to be sent again next call.
            head["include"] = ["reasoning.encrypted_content"]
    if request.logprobs:  # the reply's tokens ride on its output_text parts (and deltas)
        head["include"] = [*head.get("include", ()), LOGPROBS_INCLUDE]
    if request.cache_key is not None and is_openai(request):
        head["prompt_cache_key"] = request.cache_key
    if request.stream:
        head["stream"] = True
    parts = [canonical_json(head)[:-1]]
    if request.tools:
        parts += [',"tools":[', ",".join(_tool_json(t) for t in request.tools), "]"]
    provider = request.provider if request.replay_reasoning else None
    items = (_items_for(m, provider) for m in request.messages)
    parts += [',"input":[', ",".join(i for i in items if i), "]}"]
    return "".join(parts).encode()


def to_responses_input(request: ModelRequest) -> dict:
    """The request body as a dict, exactly as it is sent (pure; for tests and inspection)."""
    return json.loads(request_body(request))


# --- reply --------------------------------------------------------------------------------------

def responses_usage(raw: dict | None) -> Usage:
    """Responses counts cached (and cache-written) tokens inside input_tokens; mibyan keeps
    them apart."""
    if not raw:
        return Usage()
    details = raw.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    return Usage(input_tokens=max(0, (raw.get("input_tokens") or 0) - cached - written),
                 output_tokens=raw.get("output_tokens") or 0, cache_read_tokens=cached,
                 cache_write_tokens=written, reasoning_tokens=reasoning)


class _Output:
    """What the output items say, in mibyan's terms."""

    def __init__(self, output: list, provider: str = "") -> None:
        self.provider = provider
        self.texts: list[str] = []
        self.refusals: list[str] = []
        self.thoughts: list[str] = []
        self.parts: list[ReasoningPart] = []
        self.calls: list[ToolCall] = []
        self.phases: set[str] = set()
        self.incomplete_item = False
        self.logprobs: list = []  # the output_text parts' token entries, in order
        for item in output:
            self._item(item)

    def _item(self, item: dict) -> None:
        kind = item.get("type")
        if kind == "message":
            parts = item.get("content") or ()
            text = "".join(p.get("text") or "" for p in parts if p.get("type") == "output_text")
            if text:
                self.texts.append(text)
            for p in parts:
                if p.get("type") == "output_text" and isinstance(p.get("logprobs"), list):
                    self.logprobs += p["logprobs"]
            self.refusals += [p.get("refusal") or "" for p in parts if p.get("type") == "refusal"]
            self.phases.add(item.get("phase") or "")
        elif kind == "function_call":
            self.calls.append(ToolCall(
                id=item.get("call_id") or item.get("id") or f"call_{len(self.calls)}",
                name=item.get("name") or "",
                arguments=canonical_arguments(item.get("arguments") or "")))
        elif kind == "reasoning":
            summary = [s.get("text") or "" for s in item.get("summary") or ()]
            self.thoughts += summary or [c.get("text") or "" for c in item.get("content") or ()]
            if item.get("encrypted_content"):
                self.parts.append(ReasoningPart(
                    type="reasoning", api_mode="codex_responses", provider=self.provider,
                    summary=tuple(summary), data=item["encrypted_content"],
                    item_id=item.get("id")))
        self.incomplete_item |= item.get("status") == "incomplete"

    def message(self) -> Message:
        # Open models behind a Responses server (llama.cpp) may reason in <think> tags.
        content, thought = split_think("\n\n".join(self.texts))
        content = content or "\n\n".join(self.refusals)
        return Message(role="assistant", content=content or (None if self.calls else ""),
                       tool_calls=tuple(self.calls),
                       reasoning="\n\n".join(t for t in (*self.thoughts, thought) if t) or None,
                       reasoning_parts=tuple(self.parts))


def finish_reason(status: str, reason: str | None, out: _Output, *,
                  at_limit: bool = False) -> str:
    """The reply's finish reason on mibyan's closed set. ``at_limit``: the reply used all of
    ``max_output_tokens``; a server that calls such a reply ``completed`` (llama.cpp's does)
    cut it there all the same."""
    if status in ("incomplete", "completed") and reason == "max_output_tokens":
        return "length"
    if at_limit and status == "completed" and not out.calls:
        return "length"
    if (status == "incomplete" and reason == "content_filter") or (out.refusals
                                                                     and not out.texts):
        return "content_filter"
    if out.calls and not out.incomplete_item:
        return "tool_calls"
    if status != "completed" or out.incomplete_item:
        return "incomplete"
    if "commentary" in out.phases and "final_answer" not in out.phases:
        return "incomplete"
    if not out.texts or not split_think("\n\n".join(out.texts))[0]:
        return "incomplete"  # only reasoning, no visible text and no call
    return "stop"


# --- streaming ----------------------------------------------------------------------------------

def _slot(parts: list, index: int, blank: dict) -> dict:
    while len(parts) <= index:
        parts.append(dict(blank))
    return parts[index]


class _StreamAssembly:
    """Folds Responses SSE events into one response object; items are keyed by output_index."""

    def __init__(self, on_delta: DeltaSink | None, shell: HttpShell,
                 on_reasoning: DeltaSink | None = None) -> None:
        self.on_delta = on_delta
        self.on_reasoning = on_reasoning
        self.split = ContentSplit(on_delta, on_reasoning)
        self.shell = shell
        self.items: dict[int, dict] = {}
        self.final: dict | None = None
        self.model: str | None = None
        self.delivered = False
        self.logprobs: list = []  # the text deltas' token entries, as they came

    def feed(self, event: dict) -> None:
        kind = event.get("type") or ""
        handler = self._HANDLERS.get(kind)
        if handler is not None:
            handler(self, event)
        elif kind.startswith("response.") and isinstance(event.get("response"), dict):
            self.model = event["response"].get("model") or self.model

    def _item(self, event: dict, kind: str) -> dict:
        return self.items.setdefault(event.get("output_index", 0), {"type": kind})

    def _added(self, event: dict) -> None:
        item = dict(event.get("item") or {})
        for key in ("content", "summary"):
            if isinstance(item.get(key), list):
                item[key] = [dict(p) for p in item[key]]
        self.items[event.get("output_index", len(self.items))] = item

    def _text(self, event: dict) -> None:
        item = self._item(event, "message")
        part = _slot(item.setdefault("content", []), event.get("content_index", 0),
                     {"type": "output_text", "text": ""})
        delta = event.get("delta") or ""
        part["text"] = (part.get("text") or "") + delta
        if isinstance(event.get("logprobs"), list):
            self.logprobs += event["logprobs"]
        if delta:
            self.split.content(delta)
            self.delivered = self.split.delivered

    def _arguments(self, event: dict) -> None:
        item = self._item(event, "function_call")
        item["arguments"] = (item.get("arguments") or "") + (event.get("delta") or "")

    def _arguments_done(self, event: dict) -> None:
        self._item(event, "function_call")["arguments"] = event.get("arguments") or ""

    def _summary(self, event: dict) -> None:
        self._reasoning_part(event, "summary", "summary_text")

    def _reasoning_text(self, event: dict) -> None:
        self._reasoning_part(event, "content", "reasoning_text")

    def _reasoning_part(self, event: dict, field: str, kind: str) -> None:
        """A reasoning item's ``field`` (its summary or its text) grows by the event's delta."""
        item = self._item(event, "reasoning")
        part = _slot(item.setdefault(field, []), event.get(f"{field}_index", 0),
                     {"type": kind, "text": ""})
        delta = event.get("delta") or ""
        part["text"] = (part.get("text") or "") + delta
        if delta:
            self.split.thought(delta)

    def _done(self, event: dict) -> None:
        if isinstance(event.get("item"), dict):
            self.items[event.get("output_index", len(self.items))] = event["item"]

    def _terminal(self, event: dict) -> None:
        self.final = event.get("response") if isinstance(event.get("response"), dict) else {}

    def _error(self, event: dict) -> None:
        code = event.get("code")
        code = code if code is None or isinstance(code, str) else json.dumps(code)
        message = event.get("message") or "stream error"
        raise ProviderUnavailableError(
            f"{self.shell.who} sent an error event: {code}: {message}", code=code,
            body=canonical_json(event)[:4000], provider=self.shell.provider,
            endpoint=self.shell.endpoint, partial=self.delivered)

    _HANDLERS: ClassVar[dict[str, Callable[..., None]]] = {
        "response.output_item.added": _added,
        "response.output_text.delta": _text,
        "response.function_call_arguments.delta": _arguments,
        "response.function_call_arguments.done": _arguments_done,
        "response.reasoning_summary_text.delta": _summary,
        "response.reasoning_text.delta": _reasoning_text,
        "response.output_item.done": _done,
        "response.completed": _terminal,
        "response.incomplete": _terminal,
        "response.failed": _terminal,
        "error": _error,
    }

    def response(self) -> dict:
        """The final response; its output is rebuilt from the items when it came empty."""
        if self.final is None:
            raise self.shell.cut_short(self.delivered)
        self.split.finish()
        response = dict(self.final)
        if not response.get("output"):
            response["output"] = [self.items[i] for i in sorted(self.items)]
        response.setdefault("model", self.model)
        return response


# --- the client ---------------------------------------------------------------------------------

class OpenAIResponsesClient(StopsOnCancel):
    """A ``ModelClient`` for ``POST /responses`` (OpenAI, Codex and compatible servers).

    ``timeout`` is the read timeout, ``deadline`` the total time one call may take (default
    three read timeouts). ``keys`` maps credential labels (``ModelRequest.credential_id``) to
    secrets; a request without a label uses ``api_key``.
    """

    def __init__(self, *, base_url: str, api_key: str, provider: str = "openai",
                 timeout: float = 600.0, deadline: float | None = None,
                 keys: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url
        self.provider = provider
        self.shell = openai_shell(provider=provider, url=base_url.rstrip("/") + "/responses",
                                  timeout=timeout, deadline=deadline, api_key=api_key, keys=keys)

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None,
                 on_reasoning: DeltaSink | None = None) -> ModelReplied:
        key = self.shell.key(request.credential_id)
        started = time.perf_counter()
        assembly = _StreamAssembly(on_delta, self.shell, on_reasoning)
        return self.shell.call(
            request_body(request), key,
            lambda exchange: self._read(exchange, request, started, assembly),
            cancel=cancel, delivered=lambda: assembly.delivered)

    def _read(self, exchange: Exchange, request: ModelRequest, started: float,
              assembly: _StreamAssembly) -> ModelReplied:
        if not exchange.is_sse:  # unstreamed requests, and servers that ignore "stream": true
            return self._reply(exchange.json(), request, started, exchange.rate_limits,
                               streamed=False, deltas=())
        for _, data in exchange.events():
            event = json.loads(data)
            if not isinstance(event, dict):
                raise ModelBehaviourError(f"{self.shell.who} sent a non-object event: {data!r}")
            if isinstance(event.get("error"), dict) and "type" not in event:
                raise stream_error(self.shell, data, exchange.headers)
            assembly.feed(event)
        return self._reply(assembly.response(), request, started, exchange.rate_limits,
                           streamed=True, deltas=assembly.logprobs)

    def _reply(self, data: Any, request: ModelRequest, started: float,
               limits: tuple[tuple[str, str], ...], *, streamed: bool,
               deltas: list | tuple) -> ModelReplied:
        try:
            status = data.get("status") or "completed"
            if status in ("failed", "cancelled"):
                error = data.get("error") or {}
                raise ModelBehaviourError(
                    f"{self.shell.who} response {status}: {error.get('code')}: "
                    f"{error.get('message') or 'no message'}")
            out = _Output(data["output"], request.provider)
            if not data["output"] and status == "completed":
                raise ModelBehaviourError(f"{self.shell.who} returned a response with no output")
            reason = (data.get("incomplete_details") or {}).get("reason")
            usage = responses_usage(data.get("usage"))
            limit = request.max_tokens or data.get("max_output_tokens")
            at_limit = isinstance(limit, int) and 0 < limit <= usage.output_tokens
            return ModelReplied(message=out.message(),
                                finish_reason=finish_reason(status, reason, out,
                                                            at_limit=at_limit),
                                usage=usage,
                                model=data.get("model") or request.model, latency_ms=_ms(started),
                                streamed=streamed, rate_limits=limits,
                                tokens=responses_tokens(out.logprobs, deltas)
                                if request.logprobs else None)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ModelBehaviourError(
                f"{self.shell.who} returned a response without usable output: {str(data)[:300]}"
            ) from exc


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
