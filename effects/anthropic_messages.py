"""Anthropic Messages adapter, through the official ``anthropic`` SDK.

The request body and the reading of a reply are pure and live in :mod:`effects.anthropic_convert`
(re-exported here). Requests go through the SDK client's low-level ``post`` (``content=`` bytes),
always in the SDK's streaming mode (a ``Stream[object]`` of plain dicts, or a JSON body read
whole), so no pydantic model is built per reply or SSE event and a :class:`CancelToken` can
abort the in-flight response from another thread (:func:`effects.openai_responses.
abort_on_cancel`). One SDK client per (base URL, key, timeout) per process, ``max_retries=0``
(retries are mibyan's job). Errors are mapped at this boundary into the project's error tree.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from effects.abort import abort_on_cancel
from effects.anthropic_convert import (
    DEFAULT_MAX_TOKENS,
    STOP_REASONS,
    THINKING_BUDGET,
    finish_reason,
    message_from,
    to_anthropic,
    usage_from,
)
from effects.headers import rate_limit_headers
from effects.openai_chat import finish_of
from effects.protocols import CancelToken, DeltaSink
from stages.decision import ModelRequest
from stages.errors import (
    ModelBehaviourError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    UsageError,
)
from stages.events import ModelReplied
from stages.messages import canonical_json

__all__ = ["DEFAULT_MAX_TOKENS", "STOP_REASONS", "THINKING_BUDGET", "AnthropicMessagesClient",
           "finish_reason", "map_error", "message_from", "shared_client", "to_anthropic",
           "usage_from"]

# HTTP status of each Anthropic error type, for ``event: error`` arriving inside a 200 stream.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                "overloaded_error": 529}
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
                                 rate_limits=rate_limit_headers(headers), partial=partial)
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
        self._keys = keys if keys is not None else {}  # shared: a refreshed key shows here
        self._client = shared_client(self.base_url, api_key, timeout)

    def _client_for(self, request: ModelRequest) -> Any:
        if request.credential_id is None:
            return self._client
        key = self._keys.get(request.credential_id)
        if key is None:
            raise UsageError(f"no key for credential id {request.credential_id!r} "
                             f"of provider {self.provider!r}")
        return shared_client(self.base_url, key, self.timeout)

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None) -> ModelReplied:
        import anthropic
        import httpx2
        client = self._client_for(request)
        body = json.dumps(to_anthropic(request), ensure_ascii=False,
                          separators=(",", ":")).encode()
        started = time.perf_counter()
        assembly = _StreamAssembly(on_delta)
        try:
            return self._exchange(client, body, request, assembly, started, cancel)
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
        message = message_from(raw["content"])
        return ModelReplied(message=message,
                            finish_reason=finish_of(finish_reason(raw.get("stop_reason")), message),
                            usage=usage_from(raw.get("usage")),
                            model=raw.get("model") or request.model,
                            latency_ms=_ms(started), rate_limits=rate_limit_headers(headers))

    def _exchange(self, client: Any, body: bytes, request: ModelRequest,
                  assembly: _StreamAssembly, started: float,
                  cancel: CancelToken | None) -> ModelReplied:
        """Both modes open the response in the SDK's streaming mode, so that ``cancel`` can
        abort it from another thread; a JSON body (no SSE) is read whole."""
        import anthropic
        stream = client.post("/v1/messages", cast_to=object, content=body, stream=True,
                             stream_cls=anthropic.Stream[object], options=_JSON)
        abort_on_cancel(stream.response, cancel)
        with stream:
            headers = stream.response.headers
            if not headers.get("content-type", "").startswith("text/event-stream"):
                # Unstreamed requests, and servers that ignore "stream": true.
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
        message = message_from(assembly.content())
        return ModelReplied(message=message,
                            finish_reason=finish_of(finish_reason(assembly.stop_reason), message),
                            usage=usage_from(assembly.usage),
                            model=assembly.model or request.model, latency_ms=_ms(started),
                            streamed=True, rate_limits=rate_limit_headers(headers))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
