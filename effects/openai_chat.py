"""OpenAI chat-completions adapter, through the official SDK.

The request body is a join of the messages' ready wire JSON, posted with the SDK's own client
(``content=`` bytes), so no history message is re-validated per call. One SDK client (one HTTP
connection pool, one TLS context) per endpoint and key lives for the whole process. SDK
errors are mapped at this boundary into the project's error tree.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from effects.abort import abort_on_cancel
from effects.headers import rate_limit_headers
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
from stages.events import ModelReplied, Usage
from stages.messages import Message, ToolCall, canonical_arguments

_clients: dict[tuple[str, str, float], Any] = {}
_clients_lock = threading.Lock()


def shared_client(base_url: str, api_key: str, timeout: float) -> Any:
    """The process-wide SDK client for an endpoint and key (retries are mibyan's job)."""
    key = (base_url, api_key, timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import openai
            client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout,
                                   max_retries=0)
            _clients[key] = client
        return client


def request_body(request: ModelRequest) -> bytes:
    messages = [m.wire for m in request.messages]
    if request.system_prompt is not None:
        messages.insert(0, Message(role="system", content=request.system_prompt).wire)
    parts = ['{"model":', json.dumps(request.model), ',"messages":[', ",".join(messages), "]"]
    if request.tools:
        parts += [',"tools":[', ",".join(t.wire for t in request.tools), "]"]
        if request.tool_choice is not None:
            parts += [',"tool_choice":', json.dumps(_tool_choice(request.tool_choice))]
    if request.max_tokens is not None:
        parts.append(f',"max_tokens":{int(request.max_tokens)}')
    if request.stream:
        parts.append(',"stream":true,"stream_options":{"include_usage":true}')
    parts.append("}")
    return "".join(parts).encode()


def _tool_choice(choice: str) -> object:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def usage_from(raw: dict | None) -> Usage:
    """OpenAI counts cached tokens inside prompt_tokens; mibyan keeps them apart."""
    if not raw:
        return Usage()
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return Usage(input_tokens=max(0, (raw.get("prompt_tokens") or 0) - cached),
                 output_tokens=raw.get("completion_tokens") or 0,
                 cache_read_tokens=cached, reasoning_tokens=reasoning)


def finish_of(reason: str | None, message: Message) -> str:
    """The provider's finish reason, except that a reply with reasoning and nothing visible is
    ``incomplete`` (the loop asks the model to go on), as the Responses adapter reports it."""
    if not message.content and not message.tool_calls and message.reasoning:
        return "incomplete"
    return reason or "stop"


def _message(content: str | None, reasoning: str | None, calls: list[dict]) -> Message:
    tool_calls = tuple(
        ToolCall(id=c.get("id") or f"call_{i}", name=(c.get("function") or {}).get("name") or "",
                 arguments=canonical_arguments((c.get("function") or {}).get("arguments") or ""))
        for i, c in enumerate(calls))
    return Message(role="assistant", content=content or (None if tool_calls else ""),
                   tool_calls=tool_calls, reasoning=reasoning or None)


def _joined_name(name: str, fragment: str) -> str:
    """OpenAI sends a call's name once; some servers (llama.cpp) repeat it in every delta."""
    return name if fragment == name else name + fragment


class _StreamAssembly:
    """Folds chat.completion.chunk deltas into one reply; tool calls are keyed by index."""

    def __init__(self, on_delta: DeltaSink | None) -> None:
        self.on_delta = on_delta
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict] = {}
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.model: str | None = None

    def feed(self, chunk: dict) -> None:
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
                if self.on_delta is not None:
                    self.on_delta(delta["content"])
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str):
                self.reasoning.append(thought)
            for part in delta.get("tool_calls") or ():
                call = self.calls.setdefault(part.get("index", len(self.calls)),
                                             {"id": None, "function": {"name": "", "arguments": ""}})
                call["id"] = part.get("id") or call["id"]
                function = part.get("function") or {}
                call["function"]["name"] = _joined_name(call["function"]["name"],
                                                        function.get("name") or "")
                call["function"]["arguments"] += function.get("arguments") or ""
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def message(self) -> Message:
        return _message("".join(self.content), "".join(self.reasoning),
                        [self.calls[i] for i in sorted(self.calls)])


def map_error(exc: BaseException, provider: str) -> ProviderError:
    """An SDK or transport exception as a project error (plain data only)."""
    import openai
    if isinstance(exc, openai.APIStatusError):
        response = exc.response
        retry_after = response.headers.get("retry-after")
        body = response.text[:4000]
        code = exc.body.get("code") if isinstance(exc.body, dict) else None
        return ProviderHTTPError(f"HTTP {exc.status_code} from {provider}: {exc.message}",
                                 status=exc.status_code, body=body, code=code, provider=provider,
                                 retry_after=_seconds(retry_after),
                                 rate_limits=rate_limit_headers(response.headers))
    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeoutError(f"{provider} did not answer in time", provider=provider)
    return ProviderUnavailableError(f"{provider} unreachable or dropped the connection: {exc}",
                                    provider=provider)


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAIChatClient:
    """A ``ModelClient`` for any OpenAI-compatible ``/chat/completions`` endpoint.

    Both modes open the response in the SDK's streaming mode, so that a ``CancelToken`` can
    close it from another thread; a JSON body (no SSE) is read whole.
    """

    def __init__(self, *, base_url: str, api_key: str, provider: str = "openai",
                 timeout: float = 600.0, keys: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url
        self.provider = provider
        self.timeout = timeout
        self.keys = keys if keys is not None else {}
        self._client = shared_client(base_url, api_key, timeout)

    def _client_for(self, credential_id: str | None) -> Any:
        if credential_id is None:
            return self._client
        if credential_id not in self.keys:
            raise UsageError(f"no key for credential {credential_id!r} (known: "
                             f"{', '.join(sorted(self.keys)) or 'none'})")
        return shared_client(self.base_url, self.keys[credential_id], self.timeout)

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None) -> ModelReplied:
        import httpx2
        import openai
        started = time.perf_counter()
        assembly = _StreamAssembly(on_delta)
        client = self._client_for(request.credential_id)
        try:
            stream = client.post("/chat/completions", cast_to=object,
                                       content=request_body(request), stream=True,
                                       stream_cls=openai.Stream[object],
                                       options={"headers": {"Content-Type": "application/json"}})
            abort_on_cancel(stream.response, cancel)
            with stream:
                limits = rate_limit_headers(stream.response.headers)
                if not stream.response.headers.get("content-type", "").startswith(
                        "text/event-stream"):
                    # Unstreamed requests, and servers that ignore "stream": true.
                    return self._reply(json.loads(stream.response.read()), request, started,
                                       limits)
                for chunk in stream:
                    if not isinstance(chunk, dict):
                        raise ModelBehaviourError(f"{self.provider} sent a non-object chunk")
                    assembly.feed(chunk)
        except (openai.APIError, httpx2.TransportError) as exc:
            error = map_error(exc, self.provider)
            error.partial = bool(assembly.content) and on_delta is not None
            raise error from exc
        except ValueError as exc:
            raise ModelBehaviourError(f"{self.provider} sent a body that is not JSON: {exc}") from exc
        if assembly.finish_reason is None:
            raise ProviderUnavailableError(
                f"{self.provider} ended the stream before the reply was complete",
                provider=self.provider, partial=bool(assembly.content) and on_delta is not None)
        message = assembly.message()
        return ModelReplied(message=message, finish_reason=finish_of(assembly.finish_reason, message),
                            usage=usage_from(assembly.usage),
                            model=assembly.model or request.model,
                            latency_ms=_ms(started), streamed=True, rate_limits=limits)

    def _reply(self, raw: object, request: ModelRequest, started: float,
               limits: tuple[tuple[str, str], ...]) -> ModelReplied:
        try:
            choice = raw["choices"][0]  # type: ignore[index]
            message = choice["message"]
            reply = _message(message.get("content"),
                             message.get("reasoning_content") or message.get("reasoning"),
                             message.get("tool_calls") or [])
            return ModelReplied(message=reply,
                                finish_reason=finish_of(choice.get("finish_reason"), reply),
                                usage=usage_from(raw.get("usage")),  # type: ignore[union-attr]
                                model=raw.get("model") or request.model,  # type: ignore[union-attr]
                                latency_ms=_ms(started), rate_limits=limits)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelBehaviourError(
                f"{self.provider} returned a reply without a usable choice: {str(raw)[:300]}"
            ) from exc


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
