"""Anthropic Messages adapter: the codec only (stream events and replies); the request body
and the reading of a reply are pure and live in :mod:`effects.providers.anthropic_convert`
(re-exported here). Posting, SSE or JSON reading, deadlines, aborts and error mapping are
:mod:`effects.providers.http_shell`'s. The key goes in ``x-api-key`` (Anthropic's documented
header), never in ``Authorization``.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Mapping

from effects.protocols import CancelToken, DeltaSink
from effects.providers.anthropic_convert import (
    DEFAULT_MAX_TOKENS,
    STOP_REASONS,
    THINKING_BUDGET,
    finish_reason,
    message_from,
    request_body,
    to_anthropic,
    usage_from,
)
from effects.providers.http_errors import error_detail
from effects.providers.http_shell import Exchange, HttpShell, StopsOnCancel
from effects.providers.openai_chat import finish_of
from effects.providers.reasoning_wire import ContentSplit
from effects.providers.structured import answer_from_tool, forced_tool
from stages.decision import ModelRequest
from stages.errors import ModelBehaviourError
from stages.log.events import ModelReplied
from stages.log.messages import Message, canonical_json

__all__ = ["ANTHROPIC_VERSION", "AUTH_TOKEN_ENV", "DEFAULT_MAX_TOKENS", "STOP_REASONS",
           "THINKING_BUDGET", "AnthropicMessagesClient", "finish_reason", "message_from",
           "messages_url", "request_body", "to_anthropic", "usage_from"]

ANTHROPIC_VERSION = "2023-06-01"
AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"
# HTTP status of each Anthropic error type, for ``event: error`` arriving inside a 200 stream.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                "overloaded_error": 529}


def messages_url(base_url: str) -> str:
    """``POST /v1/messages`` under ``base_url``, whether it is configured with ``/v1`` or not."""
    url = base_url.rstrip("/")
    return (url[:-3] if url.endswith("/v1") else url) + "/v1/messages"


def _headers(key: str, bearer: str | None = None) -> dict[str, str]:
    """The key in ``x-api-key``; the SDK's ``ANTHROPIC_AUTH_TOKEN`` (``bearer``, for proxies
    and gateways that take a token instead of a key) as ``Authorization: Bearer``."""
    auth = {"Authorization": f"Bearer {key}"} if key == bearer else {"x-api-key": key}
    return {**auth, "anthropic-version": ANTHROPIC_VERSION,
            "Content-Type": "application/json", "Accept": "application/json"}


class _StreamAssembly:
    """Folds Anthropic stream events (plain dicts) into content blocks."""

    def __init__(self, on_delta: DeltaSink | None,
                 on_reasoning: DeltaSink | None = None) -> None:
        self.on_delta = on_delta
        self.split = ContentSplit(on_delta, on_reasoning)
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
            if delta["text"]:  # <think> tags of open models behind the API are reasoning
                self.split.content(delta["text"])
                self.emitted = self.split.delivered
        elif kind == "thinking_delta":
            block["parts"].append(delta["thinking"])
            if delta["thinking"]:
                self.split.thought(delta["thinking"])
        elif kind == "signature_delta":  # the signature that authenticates the thinking
            block["signature"] = (block.get("signature") or "") + delta["signature"]
        elif kind == "input_json_delta":
            block["parts"].append(delta.get("partial_json") or "")

    def content(self) -> list[dict]:
        self.split.finish()
        out = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            joined = "".join(block.pop("parts"))
            if block.get("type") == "tool_use":
                block["arguments"] = joined or canonical_json(block.get("input") or {})
            elif block.get("type") == "redacted_thinking":
                pass  # its data came whole in content_block_start
            else:
                block[block.get("type") or "text"] = joined
            out.append(block)
        return out


class AnthropicMessagesClient(StopsOnCancel):
    """A ``ModelClient`` for the Anthropic Messages API (``POST /v1/messages``).

    ``timeout`` is the read timeout, ``deadline`` the total time one call may take (default
    three read timeouts). ``keys`` maps credential ids (``ModelRequest.credential_id``) to
    secrets; a request without a credential id uses ``api_key``.
    """

    def __init__(self, *, base_url: str, api_key: str, provider: str = "anthropic",
                 timeout: float = 600.0, deadline: float | None = None,
                 keys: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url
        self.provider = provider
        self.shell = HttpShell(provider=provider, url=messages_url(base_url), timeout=timeout,
                               deadline=deadline, api_key=api_key, keys=keys,
                               headers=functools.partial(
                                   _headers, bearer=os.environ.get(AUTH_TOKEN_ENV) or None),
                               code_of=lambda detail: detail.type or detail.code)

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None,
                 on_reasoning: DeltaSink | None = None) -> ModelReplied:
        key = self.shell.key(request.credential_id)
        body = request_body(request if request.output is None else forced_tool(request))
        started = time.perf_counter()
        assembly = _StreamAssembly(on_delta, on_reasoning)
        return self.shell.call(
            body, key, lambda exchange: self._read(exchange, request, started, assembly),
            cancel=cancel, delivered=lambda: assembly.emitted)

    def _read(self, exchange: Exchange, request: ModelRequest, started: float,
              assembly: _StreamAssembly) -> ModelReplied:
        if not exchange.is_sse:  # unstreamed requests, and servers that ignore "stream": true
            return self._reply(exchange.json(), exchange, request, started)
        for name, data in exchange.events():
            event = json.loads(data)
            if name == "error" or (isinstance(event, dict) and event.get("type") == "error"):
                kind = error_detail(data).type or ""
                raise self.shell.http_error(ERROR_STATUS.get(kind, 500), data, exchange.headers,
                                            where="error event")
            try:
                assembly.feed(event)
            except (KeyError, TypeError, AttributeError) as exc:
                raise ModelBehaviourError(
                    f"{self.shell.who} sent a malformed stream event: {str(event)[:300]}"
                ) from exc
        if not (assembly.stopped or assembly.stop_reason):
            raise self.shell.cut_short(assembly.emitted)
        message = _answer(message_from(assembly.content(), request.provider), request)
        return ModelReplied(message=message,
                            finish_reason=_finish(assembly.stop_reason, message, request),
                            usage=usage_from(assembly.usage, thought=_thought(message)),
                            model=assembly.model or request.model, latency_ms=_ms(started),
                            streamed=True, rate_limits=exchange.rate_limits)

    def _reply(self, raw: object, exchange: Exchange, request: ModelRequest,
               started: float) -> ModelReplied:
        if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
            raise ModelBehaviourError(
                f"{self.shell.who} returned a reply without content blocks: {str(raw)[:300]}")
        message = _answer(message_from(raw["content"], request.provider), request)
        return ModelReplied(message=message,
                            finish_reason=_finish(raw.get("stop_reason"), message, request),
                            usage=usage_from(raw.get("usage"), thought=_thought(message)),
                            model=raw.get("model") or request.model,
                            latency_ms=_ms(started), rate_limits=exchange.rate_limits)


def _answer(message: Message, request: ModelRequest) -> Message:
    """A structured answer came as the forced tool's input: it is the reply's text."""
    return message if request.output is None else answer_from_tool(message, request.output)


def _finish(stop_reason: str | None, message: Message, request: ModelRequest) -> str:
    reason = finish_reason(stop_reason)
    if request.output is not None and reason == "tool_calls" and not message.tool_calls:
        reason = "stop"  # the forced tool's call became the answer: it asks for no tool
    return finish_of(reason, message)


def _thought(message: Message) -> bool:
    """The reply reasoned (thinking text, or redacted thinking with none)."""
    return bool(message.reasoning or message.reasoning_parts)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
