"""An in-tree fake OpenAI-compatible chat-completions server.

Real HTTP/1.1 on loopback (keep-alive, chunked SSE), no mocking of any SDK. Used by
end-to-end tests and by the benchmark::

    with FakeOpenAIServer() as srv:
        srv.script(Reply.text("hi"), Reply.tool_calls([("ls", '{"path": "."}')]))
        client = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        ...
        srv.assert_done()

Only ``POST /v1/chat/completions`` is served. Scripted replies are consumed in order; when
none is left the ``default`` reply answers, or (without a default) the request gets a 500
OpenAI-style error and the server remembers it had an unexpected request.
"""

from __future__ import annotations

import functools
import itertools
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from tests.fake_http import MAX_HANG, FakeHandler, FakeHTTPServer, dumps, http_chunk

__all__ = ["FakeOpenAIServer", "Reply", "Usage", "OpenAIErrorsHandler", "error_body"]

_dumps = dumps
_MAX_HANG = MAX_HANG  # Reply.hang is bounded so a broken test cannot wedge the suite
_call_ids = itertools.count(1)
_DEFAULT_MODEL = "gpt-fake"



@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported for a reply (``total`` is prompt + completion)."""

    prompt: int
    completion: int
    cached: int = 0
    reasoning: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": {"cached_tokens": self.cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build it with the class-method constructors."""

    kind: str  # "completion" | "error" | "raw" | "drop"
    content: str | None = None
    reasoning: str | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments) of tool calls
    finish_reason: str = "stop"
    usage: Usage | None = None
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    after_chunks: int = 0
    hang_seconds: float = 0.0  # seconds slept before answering (Reply.hang)
    delay: float = 0.0  # seconds slept before answering (any reply)
    piece_size: int | None = None  # chars per streamed piece; None = the server's default
    chunk_delay: float = 0.0  # seconds between chunks or body slices (0 = one write)

    # ---- constructors -------------------------------------------------------------------

    @classmethod
    def text(
        cls,
        content: str,
        *,
        reasoning: str | None = None,
        finish_reason: str = "stop",
        usage: Usage | None = None,
        delay: float = 0.0,
        piece_size: int | None = None,
        chunk_delay: float = 0.0,
    ) -> Reply:
        """An assistant message with ``content`` (and optional ``reasoning_content``).

        Without ``usage`` the counts are rough: prompt = request text length // 4,
        completion = len(content) // 4 + 1 (+ reasoning tokens, reported separately too).
        """
        return cls(
            kind="completion",
            content=content,
            reasoning=reasoning,
            finish_reason=finish_reason,
            usage=usage,
            delay=delay,
            piece_size=piece_size,
            chunk_delay=chunk_delay,
        )

    @classmethod
    def tool_calls(
        cls,
        calls: Iterable[tuple[str, str]],
        content: str | None = None,
        ids: Sequence[str] | None = None,
        *,
        reasoning: str | None = None,
        finish_reason: str = "tool_calls",
        usage: Usage | None = None,
        delay: float = 0.0,
        piece_size: int | None = None,
        chunk_delay: float = 0.0,
    ) -> Reply:
        """Tool calls ``[(name, arguments_json_text), ...]``; ids default to unique ``call_<n>``."""
        calls = list(calls)
        if ids is None:
            ids = [f"call_{next(_call_ids)}" for _ in calls]
        if len(ids) != len(calls):
            raise ValueError("ids must have one entry per call")
        return cls(
            kind="completion",
            content=content,
            reasoning=reasoning,
            calls=tuple((i, n, a) for i, (n, a) in zip(ids, calls)),
            finish_reason=finish_reason,
            usage=usage,
            delay=delay,
            piece_size=piece_size,
            chunk_delay=chunk_delay,
        )

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",  # noqa: A002 - mirrors OpenAI's field name
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """``status`` with OpenAI's error body ``{"error": {message, type, param, code}}``."""
        return cls(
            kind="error",
            status=status,
            body=error_body(message, type, code),
            headers=tuple((headers or {}).items()),
            delay=delay,
        )

    @classmethod
    def raw(
        cls,
        status: int,
        body: bytes | str,
        content_type: str = "application/json",
        *,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """Exactly ``body`` with ``status`` (for malformed-JSON / garbage tests)."""
        if isinstance(body, str):
            body = body.encode()
        return cls(
            kind="raw",
            status=status,
            body=body,
            content_type=content_type,
            headers=tuple((headers or {}).items()),
            delay=delay,
        )

    @classmethod
    def drop_stream(
        cls,
        after_chunks: int = 0,
        *,
        content: str = "This answer is cut off before it ends.",
        delay: float = 0.0,
        piece_size: int | None = None,
    ) -> Reply:
        """Streaming: the role chunk, ``after_chunks`` content chunks, then the socket closes
        mid-body (no terminating chunk, no ``[DONE]``). Non-streaming: close without a response.
        """
        return cls(
            kind="drop",
            content=content,
            after_chunks=after_chunks,
            delay=delay,
            piece_size=piece_size,
        )

    @classmethod
    def hang(cls, seconds: float, *, piece_size: int | None = None) -> Reply:
        """Sleep ``seconds`` (at most 60, cut short by ``close()``), then answer text "late"."""
        return cls(
            kind="completion",
            content="late",
            hang_seconds=min(float(seconds), _MAX_HANG),
            piece_size=piece_size,
        )


def _prompt_chars(body: Mapping[str, Any]) -> int:
    n = 0
    for m in body.get("messages") or ():
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        if isinstance(c, str):
            n += len(c)
        elif isinstance(c, list):
            for part in c:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    n += len(part["text"])
        for tc in m.get("tool_calls") or ():
            if isinstance(tc, dict):
                fn = tc.get("function") or {}
                n += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
    return n


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk holding one SSE event."""
    return http_chunk(b"data: " + payload + b"\n\n")


_DONE_CHUNK = _chunk(b"[DONE]")


def error_body(message: str, type_: str = "invalid_request_error",
               code: str | None = None, param: str | None = None) -> bytes:
    """OpenAI's error body ``{"error": {message, type, param, code}}`` (both OpenAI fakes)."""
    return _dumps(
        {"error": {"message": message, "type": type_, "param": param, "code": code}}
    ).encode()


_NO_REPLY_BODY = error_body("fake server: no scripted reply left", "server_error")
_RESPONSE_HEADERS = (("x-request-id", "fake"),)


def _usage(reply: Reply, body: Mapping[str, Any]) -> Usage:
    if reply.usage is not None:
        return reply.usage
    out = len(reply.content or "")
    for _id, name, args in reply.calls:
        out += len(name) + len(args)
    reasoning = len(reply.reasoning) // 4 + 1 if reply.reasoning else 0
    return Usage(
        prompt=max(1, _prompt_chars(body) // 4),
        completion=out // 4 + 1 + reasoning,
        reasoning=reasoning,
    )


def _completion(fake: FakeOpenAIServer, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.calls
        ]
    return {
        "id": fake._next_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or _DEFAULT_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": _usage(reply, body).to_json(),
        "system_fingerprint": "fp_fake",
    }


@functools.lru_cache(maxsize=512)
def _stream_choices(reply: Reply, size: int) -> tuple[bytes, ...]:
    """The JSON of each chunk's ``choices[0]``, which depends only on the reply (cached)."""

    def choice(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        c = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _dumps(c).encode()

    only_tools = bool(reply.calls) and not reply.content
    out = [choice({"role": "assistant", "content": None if only_tools else ""})]
    if reply.reasoning:
        out.extend(choice({"reasoning_content": p}) for p in _pieces(reply.reasoning, size))
    if reply.content:
        out.extend(choice({"content": p}) for p in _pieces(reply.content, size))
    for index, (call_id, name, args) in enumerate(reply.calls):
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(choice({"tool_calls": [first]}))
        if args:
            out.extend(
                choice({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                for p in _pieces(args, size)
            )
    if reply.kind != "drop":
        out.append(choice({}, reply.finish_reason))
    return tuple(out)


def _stream_chunks(
    fake: FakeOpenAIServer, reply: Reply, body: Mapping[str, Any]
) -> list[bytes]:
    """All HTTP chunks of the SSE body except ``[DONE]`` and the terminating chunk."""
    size = max(1, reply.piece_size or fake.piece_size)
    opts = body.get("stream_options")
    include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
    # Every chunk shares this envelope; only "choices" (and "usage") differ.
    prefix = (
        '{"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,'
        '"system_fingerprint":"fp_fake","choices":['
        % (_dumps(fake._next_id()), int(time.time()), _dumps(body.get("model") or _DEFAULT_MODEL))
    ).encode()
    suffix = b'],"usage":null}' if include_usage else b"]}"
    chunks = [_chunk(prefix + c + suffix) for c in _stream_choices(reply, size)]
    if include_usage and reply.kind != "drop":
        usage = _dumps(_usage(reply, body).to_json()).encode()
        chunks.append(_chunk(prefix + b'],"usage":' + usage + b"}"))
    return chunks


# ---- the server -------------------------------------------------------------------------


class OpenAIErrorsHandler(FakeHandler):
    """A handler answering the fake's own errors (404, bad JSON, no reply left) OpenAI's way,
    each with ``x-request-id: fake``. The chat and the Responses fakes build on it."""

    error_headers = _RESPONSE_HEADERS
    no_reply_body = _NO_REPLY_BODY

    def _not_found_body(self) -> bytes:
        return error_body(f"fake server: no route {self.command} {self.path}")

    def _bad_json_body(self, exc: ValueError) -> bytes:
        return error_body(f"fake server: bad JSON body: {exc}")


class _Handler(OpenAIErrorsHandler):
    route = "/v1/chat/completions"

    def _wait_seconds(self, reply: Reply) -> float:
        return reply.delay + reply.hang_seconds

    def _answer(self, fake: FakeOpenAIServer, reply: Reply, body: dict[str, Any]) -> None:
        stream = bool(body.get("stream"))
        if reply.kind == "error" or reply.kind == "raw":
            self._send(reply.status, reply.content_type, reply.body, reply.headers)
        elif stream:
            chunks = _stream_chunks(fake, reply, body)
            drop = reply.kind == "drop"
            if drop:
                chunks = chunks[: 1 + max(0, reply.after_chunks)]
            else:
                chunks.append(_DONE_CHUNK)
            self._send_stream(_RESPONSE_HEADERS, chunks, chunk_delay=reply.chunk_delay,
                              ends=not drop)
        elif reply.kind == "drop":
            self._abort()
        else:
            payload = _dumps(_completion(fake, reply, body)).encode()
            self._send(200, "application/json", payload, _RESPONSE_HEADERS,
                       chunk_delay=reply.chunk_delay)


class FakeOpenAIServer(FakeHTTPServer):
    """A loopback OpenAI chat-completions server. Use as a context manager (or call close())."""

    handler = _Handler
    reply_type = Reply
    base_path = "/v1"
    thread_name = "fake-openai"

    def __init__(self, default: Reply | None = None, *, piece_size: int = 3,
                 window: int | None = None) -> None:
        super().__init__(default, piece_size=piece_size, window=window)

    def _next_id(self) -> str:
        return f"chatcmpl-fake{next(self._ids)}"

    def _overflow_body(self, tokens: int, window: int) -> bytes:
        return error_body(f"This model's maximum context length is {window} tokens. However, "
                          f"your messages resulted in {tokens} tokens. Please reduce the length "
                          "of the messages.", param="messages", code="context_length_exceeded")
