"""Anthropic Messages adapter, through the official ``anthropic`` SDK.

:func:`to_anthropic` (pure) turns a canonical OpenAI-format :class:`ModelRequest` into the
``messages.create`` keyword arguments: ``system`` text blocks, ``tool_use`` blocks, each run of
tool results as ``tool_result`` blocks in ONE user turn (with any user text that follows),
orphan results dropped, a stub error result for each unanswered ``tool_use``, same-role
messages merged, and ``cache_control`` on the last block each marked canonical message became.

Reasoning on canonical assistant messages is **not** sent back: Anthropic accepts thinking
blocks only with the signature it issued, and the canonical history keeps none. Hence
``reasoning_effort`` enables thinking only when a turn starts (last message from the user):
mid tool loop the previous assistant message would lack its signed thinking block.

Requests go through the SDK client's low-level ``post`` (``content=`` bytes; replies as the raw
``httpx2.Response`` or a ``Stream[object]`` of plain dicts), so no pydantic model is built per
reply or SSE event. One SDK client per (base URL, key, timeout) per process, ``max_retries=0``
(retries are mibyan's job). Errors are mapped at this boundary into the project's error tree.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from effects.protocols import DeltaSink
from stages.decision import ModelRequest
from stages.errors import (
    ModelBehaviourError, ProviderError, ProviderHTTPError, ProviderTimeoutError,
    ProviderUnavailableError, UsageError,
)
from stages.events import ModelReplied, Usage
from stages.messages import Message, ToolCall, canonical_arguments, canonical_json

DEFAULT_MAX_TOKENS = 4096
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "model_context_window_exceeded": "length", "tool_use": "tool_calls",
                "refusal": "content_filter", "pause_turn": "incomplete"}
# HTTP status of each Anthropic error type, for ``event: error`` arriving inside a 200 stream.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                "overloaded_error": 529}
THINKING_BUDGET = {"minimal": 1024, "low": 4000, "medium": 8000, "high": 16000, "xhigh": 32000}
_RATE_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")
_BAD_ID = re.compile(r"[^a-zA-Z0-9_-]")
_JSON = {"headers": {"Content-Type": "application/json"}}

_clients: dict[tuple[str, str, float], Any] = {}
_clients_lock = threading.Lock()


def shared_client(base_url: str, api_key: str, timeout: float) -> Any:
    """The process-wide SDK client for an endpoint and key.

    The key goes in ``x-api-key`` (Anthropic's documented header); the SDK's own
    ``Authorization: Bearer`` for ``api_key`` is omitted.
    """
    key = (base_url, api_key, timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import anthropic
            client = anthropic.Anthropic(
                base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0,
                default_headers={"x-api-key": api_key, "Authorization": anthropic.omit})
            _clients[key] = client
        return client


def sdk_base_url(base_url: str) -> str:
    """The SDK appends ``/v1/messages`` itself, so a configured ``.../v1`` loses its suffix."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


# ---- canonical history -> Anthropic ------------------------------------------------------


def _tool_id(raw: str | None) -> str:
    return _BAD_ID.sub("_", raw or "") or "tool_0"


def _text(text: str) -> dict:
    return {"type": "text", "text": text}


def _arguments(text: str) -> dict:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _blocks(message: Message) -> tuple[str, list[dict]]:
    """The Anthropic role and content blocks of one canonical message."""
    if message.role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": _tool_id(message.tool_call_id),
                         "content": message.content or "(no output)"}]
    has_text = bool(message.content and message.content.strip())
    if message.role == "user":
        return "user", [_text(message.content if has_text else "(empty message)")]
    blocks = [_text(message.content)] if has_text else []
    blocks += [{"type": "tool_use", "id": _tool_id(c.id), "name": c.name,
                "input": _arguments(c.arguments)} for c in message.tool_calls]
    return "assistant", blocks or [_text("(empty)")]


def _merged(turns: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    out: list[tuple[str, list[dict]]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if out and out[-1][0] == role:
            out[-1] = (role, out[-1][1] + blocks)
        else:
            out.append((role, list(blocks)))
    return out


def _paired(turns: list[tuple[str, list[dict]]]) -> list[tuple[str, list[dict]]]:
    """Each user turn keeps only the results of the previous assistant's ``tool_use`` blocks
    (first), and gets a stub error result for each one left unanswered."""
    out: list[tuple[str, list[dict]]] = []
    for k, (role, blocks) in enumerate(turns):
        if role == "assistant":
            seen: set[str] = set()  # tool_use ids must be unique within a message
            blocks = [b for b in blocks if b["type"] != "tool_use"
                      or not (b["id"] in seen or seen.add(b["id"]))]
            out.append((role, blocks))
            wanted = [b["id"] for b in blocks if b["type"] == "tool_use"]
            if wanted and (k + 1 == len(turns) or turns[k + 1][0] != "user"):
                out.append(("user", _stubs(wanted)))
            continue
        previous = out[-1][1] if out and out[-1][0] == "assistant" else []
        wanted = [b["id"] for b in previous if b["type"] == "tool_use"]
        results: dict[str, dict] = {}
        for b in blocks:
            if b["type"] == "tool_result" and b["tool_use_id"] in wanted:
                results.setdefault(b["tool_use_id"], b)
        others = [b for b in blocks if b["type"] != "tool_result"]
        missing = [i for i in wanted if i not in results]
        out.append((role, list(results.values()) + _stubs(missing) + others))
    return _merged(out)


def _stubs(ids: list[str]) -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": i, "is_error": True,
             "content": "(tool result missing)"} for i in dict.fromkeys(ids)]


def _place_marks(request: ModelRequest, system: list[dict], emitted: list[list[dict]],
                 alive: set[int]) -> None:
    """``cache_control`` on the last surviving block of each marked canonical message (or of
    the nearest one before it, when the marked message was dropped)."""
    marker = {"type": "ephemeral", **({"ttl": "1h"} if request.cache_ttl == "1h" else {})}
    for index in request.cache_marks:
        if index == -1:
            if system:
                system[0 if request.system_prompt else -1]["cache_control"] = dict(marker)
            continue
        if not 0 <= index < len(emitted):
            raise UsageError(f"cache mark {index} is outside the {len(emitted)} messages")
        for j in range(index, -1, -1):
            block = next((b for b in reversed(emitted[j]) if id(b) in alive), None)
            if block is not None:
                block["cache_control"] = dict(marker)
                break


def _thinking(request: ModelRequest, max_tokens: int) -> tuple[dict | None, int]:
    effort = request.reasoning_effort
    if effort is None or effort == "none":
        return None, max_tokens
    if effort not in THINKING_BUDGET:
        raise UsageError(f"reasoning_effort {effort!r} is not one of none, "
                         + ", ".join(THINKING_BUDGET))
    last = next((m.role for m in reversed(request.messages) if m.role != "system"), None)
    if last != "user" or request.tool_choice not in (None, "auto", "none"):
        return None, max_tokens
    budget = THINKING_BUDGET[effort]
    if request.max_tokens is None:
        return {"type": "enabled", "budget_tokens": budget}, budget + DEFAULT_MAX_TOKENS
    budget = min(budget, max_tokens - 1)
    if budget < 1024:
        return None, max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


def _tool_choice(choice: str | None) -> dict | None:
    if choice is None:
        return None
    kinds = {"auto": "auto", "none": "none", "required": "any"}
    return {"type": kinds[choice]} if choice in kinds else {"type": "tool", "name": choice}


def to_anthropic(request: ModelRequest) -> dict:
    """The ``messages.create`` keyword arguments (also the JSON body) for ``request``."""
    system = [_text(request.system_prompt)] if request.system_prompt else []
    turns: list[tuple[str, list[dict]]] = []
    emitted: list[list[dict]] = []
    for message in request.messages:
        if message.role == "system":
            blocks = [_text(message.content)] if message.content else []
            system.extend(blocks)
        else:
            role, blocks = _blocks(message)
            turns.append((role, blocks))
        emitted.append(blocks)
    turns = _paired(_merged(turns))
    alive = {id(b) for _, blocks in turns for b in blocks} | {id(b) for b in system}
    _place_marks(request, system, emitted, alive)
    messages = [{"role": role, "content": _collapsed(blocks)} for role, blocks in turns]
    max_tokens = request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS
    thinking, max_tokens = _thinking(request, max_tokens)
    out: dict = {"model": request.model, "max_tokens": max_tokens, "messages": messages}
    if system:
        out["system"] = system
    if request.tools:
        out["tools"] = [{"name": t.name, "description": t.description,
                         "input_schema": json.loads(t.parameters)} for t in request.tools]
        if (choice := _tool_choice(request.tool_choice)) is not None:
            out["tool_choice"] = choice
    if thinking is not None:
        out["thinking"] = thinking
    if request.stream:
        out["stream"] = True
    return out


def _collapsed(blocks: list[dict]) -> str | list[dict]:
    only = blocks[0] if len(blocks) == 1 else None
    if only is not None and only["type"] == "text" and "cache_control" not in only:
        return only["text"]
    return blocks


# ---- Anthropic reply -> canonical --------------------------------------------------------


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


def message_from(blocks: list[Mapping]) -> Message:
    """A canonical assistant message from Anthropic content blocks (``tool_use`` inputs as
    dicts, or as JSON text under ``arguments`` when assembled from a stream)."""
    text, thoughts, calls = [], [], []
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


class _StreamAssembly:
    """Folds Anthropic stream events (plain dicts) into content blocks."""

    def __init__(self, on_delta: DeltaSink | None) -> None:
        self.on_delta = on_delta
        self.blocks: dict[int, dict] = {}
        self.usage: dict = {}
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.stopped = False
        self.emitted = False

    def feed(self, event: Mapping) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event["content_block"])
            block["parts"] = [block.get("text") or block.get("thinking") or ""]
            self.blocks[event["index"]] = block
        elif kind == "content_block_delta":
            self._delta(self.blocks[event["index"]], event["delta"])
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items()
                               if v is not None})
        elif kind == "message_stop":
            self.stopped = True

    def _delta(self, block: dict, delta: Mapping) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            block["parts"].append(delta["text"])
            if self.on_delta is not None and delta["text"]:
                self.emitted = True
                self.on_delta(delta["text"])
        elif kind == "thinking_delta":
            block["parts"].append(delta["thinking"])
        elif kind == "input_json_delta":
            block["parts"].append(delta.get("partial_json") or "")

    def content(self) -> list[dict]:
        out = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            joined = "".join(block.pop("parts"))
            if block.get("type") == "tool_use":
                block["arguments"] = joined or canonical_json(block.get("input") or {})
            else:
                block[block.get("type") or "text"] = joined
            out.append(block)
        return out


# ---- errors ------------------------------------------------------------------------------


def rate_limits(headers: Any) -> tuple[tuple[str, str], ...]:
    """``anthropic-ratelimit-*`` and ``x-ratelimit-*`` headers, lower-cased, in order."""
    return tuple((k.lower(), v) for k, v in headers.multi_items()
                 if k.lower().startswith(_RATE_PREFIXES))


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _body_text(exc: Any, mid_stream: bool) -> str:
    """The error body as sent; a mid-stream error's body is the event's parsed data."""
    import httpx2
    if not mid_stream:
        try:
            return exc.response.text
        except (httpx2.StreamError, UnicodeDecodeError):
            pass
    body = exc.body
    return body if isinstance(body, str) else "" if body is None else json.dumps(body)


def map_error(exc: BaseException, provider: str, *, partial: bool = False) -> ProviderError:
    """An SDK or transport exception as a project error (plain data only). An ``error`` SSE
    event arrives inside a 200 response; its status comes from the error type."""
    import anthropic
    import httpx2
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body
        error = body.get("error") if isinstance(body, dict) else None
        code = error.get("type") if isinstance(error, dict) else None
        detail = error.get("message") if isinstance(error, dict) else None
        status = exc.status_code
        mid_stream = status < 400
        if mid_stream:
            status = ERROR_STATUS.get(code or "", 500)
        text = _body_text(exc, mid_stream)
        where = f"{'error event' if mid_stream else 'HTTP'} {status} from {provider}"
        headers = exc.response.headers
        return ProviderHTTPError(f"{where}: {code or 'error'}: {detail or exc.message}",
                                 status=status, body=text[:4000], code=code, provider=provider,
                                 retry_after=_seconds(headers.get("retry-after")),
                                 rate_limits=rate_limits(headers), partial=partial)
    if isinstance(exc, (anthropic.APITimeoutError, httpx2.TimeoutException)):
        return ProviderTimeoutError(f"{provider} did not answer in time", provider=provider,
                                    partial=partial)
    return ProviderUnavailableError(f"{provider} unreachable or dropped the connection: {exc!r}",
                                    provider=provider, partial=partial)


# ---- the client --------------------------------------------------------------------------


class AnthropicMessagesClient:
    """A ``ModelClient`` for the Anthropic Messages API (``POST /v1/messages``).

    ``keys`` maps credential ids (``ModelRequest.credential_id``) to secrets; a request
    without a credential id uses ``api_key``.
    """

    def __init__(self, *, base_url: str, api_key: str, provider: str = "anthropic",
                 timeout: float = 600.0, keys: Mapping[str, str] | None = None) -> None:
        self.base_url = sdk_base_url(base_url)
        self.provider = provider
        self.timeout = timeout
        self._keys = dict(keys or {})
        self._client = shared_client(self.base_url, api_key, timeout)

    def _client_for(self, request: ModelRequest) -> Any:
        if request.credential_id is None:
            return self._client
        key = self._keys.get(request.credential_id)
        if key is None:
            raise UsageError(f"no key for credential id {request.credential_id!r} "
                             f"of provider {self.provider!r}")
        return shared_client(self.base_url, key, self.timeout)

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None) -> ModelReplied:
        import anthropic
        import httpx2
        client = self._client_for(request)
        body = json.dumps(to_anthropic(request), ensure_ascii=False,
                          separators=(",", ":")).encode()
        started = time.perf_counter()
        assembly = _StreamAssembly(on_delta)
        try:
            if request.stream:
                return self._stream(client, body, request, assembly, started)
            response = client.post("/v1/messages", cast_to=httpx2.Response, content=body,
                                   options=_JSON)
            return self._reply(response.json(), response.headers, request, started)
        except (anthropic.APIError, httpx2.HTTPError, httpx2.StreamError) as exc:
            raise map_error(exc, self.provider, partial=assembly.emitted) from exc
        except ValueError as exc:
            raise ModelBehaviourError(
                f"{self.provider} sent a body that is not JSON: {exc}") from exc

    def _reply(self, raw: Any, headers: Any, request: ModelRequest, started: float,
               ) -> ModelReplied:
        if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
            raise ModelBehaviourError(
                f"{self.provider} returned a reply without content blocks: {str(raw)[:300]}")
        return ModelReplied(message=message_from(raw["content"]),
                            finish_reason=finish_reason(raw.get("stop_reason")),
                            usage=usage_from(raw.get("usage")),
                            model=raw.get("model") or request.model,
                            latency_ms=_ms(started), rate_limits=rate_limits(headers))

    def _stream(self, client: Any, body: bytes, request: ModelRequest,
                assembly: _StreamAssembly, started: float) -> ModelReplied:
        import anthropic
        stream = client.post("/v1/messages", cast_to=object, content=body, stream=True,
                             stream_cls=anthropic.Stream[object], options=_JSON)
        with stream:
            headers = stream.response.headers
            if not headers.get("content-type", "").startswith("text/event-stream"):
                # A server that ignores "stream": true answers with one JSON message.
                return self._reply(json.loads(stream.response.read()), headers, request, started)
            for event in stream:
                try:
                    assembly.feed(event)
                except (KeyError, TypeError, AttributeError) as exc:
                    raise ModelBehaviourError(
                        f"{self.provider} sent a malformed stream event: {str(event)[:300]}"
                    ) from exc
        if not (assembly.stopped or assembly.stop_reason):
            raise ProviderUnavailableError(
                f"{self.provider} ended the stream before the reply was complete",
                provider=self.provider, partial=assembly.emitted)
        return ModelReplied(message=message_from(assembly.content()),
                            finish_reason=finish_reason(assembly.stop_reason),
                            usage=usage_from(assembly.usage),
                            model=assembly.model or request.model, latency_ms=_ms(started),
                            streamed=True, rate_limits=rate_limits(headers))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
