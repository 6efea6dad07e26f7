"""OpenAI chat-completions adapter: the codec only (request body, reply, stream chunks).

The request body is a join of the messages' ready wire JSON (each assistant message with a tool
call whose arguments are not a JSON object is sent once fixed, with ``{}``; to DeepSeek and
Kimi, an assistant message carries its ``reasoning_content`` back, see
:mod:`effects.providers.reasoning_wire`); posting, SSE or JSON
reading, deadlines, aborts and error mapping are :mod:`effects.providers.http_shell`'s.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from effects.protocols import CancelToken, DeltaSink
from effects.providers.http_errors import error_detail
from effects.providers.http_shell import Exchange, HttpShell, StopsOnCancel
from effects.providers.reasoning_wire import (
    ContentSplit,
    chat_reasoning_fields,
    echoes_reasoning,
)
from effects.providers.structured import chat_response_format
from effects.providers.token_wire import TokenCollector, logprob_fields, prompt_tokens
from effects.providers.wire import WireCache, sendable_message
from stages.decision import ModelRequest
from stages.errors import ModelBehaviourError, ProviderHTTPError
from stages.log.events import ModelReplied, Usage
from stages.log.messages import Message, ToolCall, canonical_arguments, canonical_json
from stages.turn.think_tags import split_think


def _sent_wire(message: Message) -> str:
    return sendable_message(message).wire


_fixed_wire: WireCache[Message, str] = WireCache(_sent_wire)


def message_wire(message: Message) -> str:
    """What the provider receives for ``message`` (only tool-calling ones need a look)."""
    return _fixed_wire(message) if message.tool_calls else message.wire


def _with_reasoning(message: Message) -> str:
    wire = message_wire(message)
    return f'{wire[:-1]},"reasoning_content":{json.dumps(message.reasoning)}}}'


_echoed_wire: WireCache[Message, str] = WireCache(_with_reasoning)


def _sent(message: Message, echo: bool) -> str:
    """``message`` as sent, with its reasoning back when the endpoint takes it (``echo``)."""
    if echo and message.reasoning and message.role == "assistant":
        return _echoed_wire(message)
    return message_wire(message)


def openai_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
            "Accept": "application/json"}


# The official SDKs' variables for an organisation or project of the account: sent as their
# headers whenever set, as the SDK does (a key of several projects needs them to pick one).
_ACCOUNT_HEADERS = (("OPENAI_ORG_ID", "OpenAI-Organization"),
                    ("OPENAI_PROJECT_ID", "OpenAI-Project"))


def openai_shell(*, provider: str, url: str, timeout: float, deadline: float | None,
                 api_key: str, keys: Mapping[str, str] | None) -> HttpShell:
    """The shell for an OpenAI-shaped endpoint: bearer key, error code from ``error.code``."""
    account = {header: os.environ[name] for name, header in _ACCOUNT_HEADERS
               if os.environ.get(name)}

    def headers(key: str) -> dict[str, str]:
        return {**openai_headers(key), **account}
    return HttpShell(provider=provider, url=url, timeout=timeout, deadline=deadline,
                     api_key=api_key, keys=keys, headers=headers if account else openai_headers,
                     code_of=lambda detail: detail.code)


def stream_error(shell: HttpShell, data: str, headers: object) -> ProviderHTTPError:
    """An ``{"error": ...}`` chunk inside a 200 stream (llama.cpp, vLLM, OpenRouter): its
    status is its numeric code when that is an HTTP status, else 500."""
    code = error_detail(data).code or ""
    status = int(code) if code.isdigit() and 400 <= int(code) <= 599 else 500
    return shell.http_error(status, data, headers, where="error event")


def request_body(request: ModelRequest) -> bytes:
    echo = echoes_reasoning(request)
    messages = [_sent(m, echo) for m in request.messages]
    if request.system_prompt is not None:
        messages.insert(0, Message(role="system", content=request.system_prompt).wire)
    parts = ['{"model":', json.dumps(request.model), ',"messages":[', ",".join(messages), "]"]
    if request.tools:
        parts += [',"tools":[', ",".join(t.wire for t in request.tools), "]"]
        if request.tool_choice is not None:
            parts += [',"tool_choice":', json.dumps(_tool_choice(request.tool_choice))]
    if request.output is not None:
        parts += [',"response_format":', canonical_json(chat_response_format(request.output))]
    if request.max_tokens is not None:
        parts.append(f',"max_tokens":{int(request.max_tokens)}')
    for name, value in {**chat_reasoning_fields(request), **logprob_fields(request)}.items():
        parts += [",", json.dumps(name), ":", json.dumps(value)]
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
    ``incomplete`` (the loop asks the model to go on), as the Responses adapter reports it;
    cut at the output limit it stays ``length`` (the reasoning used the limit up)."""
    if (not message.content and not message.tool_calls and message.reasoning
            and reason != "length"):
        return "incomplete"
    return reason or "stop"


def _message(content: str | None, reasoning: str | None, calls: list[dict]) -> Message:
    """The reply as a message; reasoning written in ``<think>`` tags in the content is
    reasoning, after what the server sent apart."""
    tool_calls = tuple(
        ToolCall(id=c.get("id") or f"call_{i}", name=(c.get("function") or {}).get("name") or "",
                 arguments=canonical_arguments((c.get("function") or {}).get("arguments") or ""))
        for i, c in enumerate(calls))
    content, thought = split_think(content) if isinstance(content, str) else (content, None)
    reasoning = "\n\n".join(r for r in (reasoning, thought) if r) or None
    return Message(role="assistant", content=content or (None if tool_calls else ""),
                   tool_calls=tool_calls, reasoning=reasoning)


def _joined_name(name: str, fragment: str) -> str:
    """OpenAI sends a call's name once; some servers (llama.cpp) repeat it in every delta."""
    return name if fragment == name else name + fragment


class _StreamAssembly:
    """Folds chat.completion.chunk deltas into one reply; tool calls are keyed by index."""

    def __init__(self, on_delta: DeltaSink | None,
                 on_reasoning: DeltaSink | None = None) -> None:
        self.on_delta = on_delta
        self.split = ContentSplit(on_delta, on_reasoning)
        self.reasoning: list[str] = []  # what the server sent apart
        self.calls: dict[int, dict] = {}
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.model: str | None = None
        self.tokens = TokenCollector()

    def feed(self, chunk: dict) -> None:
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            self.tokens.feed(choice)
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.split.content(delta["content"])
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                if self.split.on_reasoning is not None:
                    self.split.on_reasoning(thought)
            for part in delta.get("tool_calls") or ():
                call = self.calls.setdefault(
                    part.get("index", len(self.calls)),
                    {"id": None, "function": {"name": "", "arguments": ""}})
                call["id"] = part.get("id") or call["id"]
                function = part.get("function") or {}
                call["function"]["name"] = _joined_name(call["function"]["name"],
                                                        function.get("name") or "")
                call["function"]["arguments"] += function.get("arguments") or ""
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def message(self) -> Message:
        self.split.finish()
        message = _message("".join(self.split.text), "".join(self.reasoning),
                           [self.calls[i] for i in sorted(self.calls)])
        thought = "".join(self.split.reasoning).strip()
        if thought:  # the <think> text, as the stream split it
            joined = "\n\n".join(r for r in ("".join(self.reasoning), thought) if r)
            message = attrs.evolve(message, reasoning=joined)
        return message


class OpenAIChatClient(StopsOnCancel):
    """A ``ModelClient`` for any OpenAI-compatible ``/chat/completions`` endpoint.

    ``timeout`` is the read timeout (seconds without a byte), ``deadline`` the total time one
    call may take (default three read timeouts). ``keys`` maps credential labels
    (``ModelRequest.credential_id``) to secrets; a request without a label uses ``api_key``.
    """

    def __init__(self, *, base_url: str, api_key: str, provider: str = "openai",
                 timeout: float = 600.0, deadline: float | None = None,
                 keys: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url
        self.provider = provider
        self.shell = openai_shell(provider=provider, url=base_url.rstrip("/") + "/chat/completions",
                                  timeout=timeout, deadline=deadline, api_key=api_key, keys=keys)
        self._shell_args: dict[str, Any] = {"provider": provider, "timeout": timeout,
                                            "deadline": deadline, "api_key": api_key,
                                            "keys": keys}
        self._side_shells: dict[str, HttpShell] = {}

    def _side_post(self, key: str) -> Callable[[str, bytes], Any]:
        """Posts to a path at the server's root (``/tokenize``: llama.cpp and vLLM serve it
        beside ``/v1``, not under it), with the call's key."""
        root = self.base_url.rstrip("/").removesuffix("/v1")

        def post(path: str, body: bytes) -> Any:
            shell = self._side_shells.get(path)
            if shell is None:
                shell = self._side_shells[path] = openai_shell(url=root + path,
                                                               **self._shell_args)
            return shell.call(body, key, lambda exchange: exchange.json())
        return post

    def _with_tokens(self, reply: ModelReplied, request: ModelRequest, body: bytes, key: str,
                     collected: TokenCollector) -> ModelReplied:
        if not request.logprobs:
            return reply
        # A tokenizer the user named tokenises the prompt instead (after the call, beside
        # this adapter): the server is not asked.
        prompt = ((None, None) if request.tokenizer is not None
                  else prompt_tokens(self._side_post(key), body, request))
        return attrs.evolve(reply, tokens=collected.record(prompt))

    def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None,
                 cancel: CancelToken | None = None,
                 on_reasoning: DeltaSink | None = None) -> ModelReplied:
        key = self.shell.key(request.credential_id)
        started = time.perf_counter()
        assembly = _StreamAssembly(on_delta, on_reasoning)
        body = request_body(request)
        reply = self.shell.call(
            body, key, lambda exchange: self._read(exchange, request, started, assembly),
            cancel=cancel, delivered=lambda: assembly.split.delivered)
        return self._with_tokens(reply, request, body, key, assembly.tokens)

    def _read(self, exchange: Exchange, request: ModelRequest, started: float,
              assembly: _StreamAssembly) -> ModelReplied:
        if not exchange.is_sse:  # unstreamed requests, and servers that ignore "stream": true
            return self._reply(exchange.json(), request, started, exchange.rate_limits,
                               assembly.tokens)
        for _, data in exchange.events():
            if data == "[DONE]":
                continue
            chunk = json.loads(data)
            if not isinstance(chunk, dict):
                raise ModelBehaviourError(f"{self.shell.who} sent a non-object chunk")
            if chunk.get("error"):
                raise stream_error(self.shell, data, exchange.headers)
            assembly.feed(chunk)
        if assembly.finish_reason is None:
            raise self.shell.cut_short(assembly.split.delivered)
        message = assembly.message()
        return ModelReplied(message=message,
                            finish_reason=finish_of(assembly.finish_reason, message),
                            usage=usage_from(assembly.usage),
                            model=assembly.model or request.model, latency_ms=_ms(started),
                            streamed=True, rate_limits=exchange.rate_limits)

    def _reply(self, raw: Any, request: ModelRequest, started: float,
               limits: tuple[tuple[str, str], ...], tokens: TokenCollector) -> ModelReplied:
        try:
            choice = raw["choices"][0]
            tokens.feed(choice)
            message = choice["message"]
            reply = _message(message.get("content"),
                             message.get("reasoning_content") or message.get("reasoning"),
                             message.get("tool_calls") or [])
            return ModelReplied(message=reply,
                                finish_reason=finish_of(choice.get("finish_reason"), reply),
                                usage=usage_from(raw.get("usage")),
                                model=raw.get("model") or request.model,
                                latency_ms=_ms(started), rate_limits=limits)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelBehaviourError(
                f"{self.shell.who} returned a reply without a usable choice: {str(raw)[:300]}"
            ) from exc


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
