"""An in-tree fake Anthropic Messages server.

Real HTTP/1.1 on loopback (keep-alive, chunked SSE with ``event:`` lines in the real event
sequence), no mocking of any SDK::

    with FakeAnthropicServer() as srv:
        srv.script(Reply.text("hi"), Reply.tool_use([("ls", '{"path": "."}')]))
        client = anthropic.Anthropic(base_url=srv.base_url, api_key="k", max_retries=0)
        ...
        srv.assert_done()

Only ``POST /v1/messages`` is served. Scripted replies are consumed in order; when none is
left the ``default`` reply answers, or (without a default) the request gets a 500
``api_error`` and the server remembers it had an unexpected request.

Streamed replies follow the documented sequence: ``message_start``, then per content block
``content_block_start`` / ``content_block_delta``... / ``content_block_stop`` (a ``ping`` after
the first block start), ``message_delta`` (stop reason, output tokens) and ``message_stop``.

Extended thinking as the real API does it: a thinking block carries a signature the server
computes over its text (``signature_of``), streamed as a ``signature_delta``; a
``redacted_thinking`` block carries opaque data. A request is refused with a 400
``invalid_request_error`` (listed in ``rejections``, taking no scripted reply) when a thinking
block comes back altered or unsigned (``Invalid `signature` in `thinking` block``), redacted data
was not issued here, thinking sits outside an assistant turn or carries ``cache_control``, the
budget is under 1024 or not below ``max_tokens``, or thinking is enabled and the assistant turn
whose tool calls the last user turn answers does not start with its thinking block.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from tests.fake_http import MAX_HANG, FakeHandler, FakeHTTPServer, dumps, http_chunk

__all__ = ["FakeAnthropicServer", "REDACTED_PREFIX", "Reply", "Usage", "signature_of"]

_dumps = dumps
_MAX_HANG = MAX_HANG
_tool_ids = itertools.count(1)
_DEFAULT_MODEL = "claude-fake"
_SIGNING_KEY = "fake-anthropic-signing-key"
REDACTED_PREFIX = "EqQBCkgIARABGAIiQL-fake-redacted-"


def signature_of(thinking: str) -> str:
    """The signature the fake issues for a thinking block's text (and checks on the way back)."""
    return "Eu" + hashlib.sha256((_SIGNING_KEY + thinking).encode()).hexdigest()[:48]
# Anthropic's error types and the HTTP status each comes with.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
                "overloaded_error": 529}


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as Anthropic reports them (``input`` excludes cache reads and writes)."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"input_tokens": self.input, "cache_creation_input_tokens": self.cache_write,
                "cache_read_input_tokens": self.cache_read, "output_tokens": self.output,
                "service_tier": "standard"}


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build it with the class-method constructors."""

    kind: str  # "message" | "error" | "raw" | "drop" | "error_event"
    content: str | None = None
    thinking: str | None = None
    calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, input JSON text)
    stop_reason: str = "end_turn"
    usage: Usage | None = None
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    after_events: int = 0
    error_type: str = "overloaded_error"
    hang_seconds: float = 0.0
    piece_size: int | None = None
    chunk_delay: float = 0.0  # seconds between written pieces (SSE events, or JSON body slices)
    redacted: bool = False  # a redacted_thinking block follows the thinking block
    unsigned: bool = False  # the thinking block has no signature (third-party endpoints)

    @classmethod
    def text(cls, content: str, *, thinking: str | None = None, stop_reason: str = "end_turn",
             usage: Usage | None = None, headers: Mapping[str, str] | None = None,
             piece_size: int | None = None, chunk_delay: float = 0.0, redacted: bool = False,
             unsigned: bool = False) -> Reply:
        """A text answer, optionally preceded by a (signed) thinking block and a redacted one.
        With ``chunk_delay`` the headers go out at once, then each SSE event (or each
        64 bytes of a JSON body) after that many seconds."""
        return cls(kind="message", content=content, thinking=thinking, stop_reason=stop_reason,
                   usage=usage, headers=tuple((headers or {}).items()), piece_size=piece_size,
                   chunk_delay=chunk_delay, redacted=redacted, unsigned=unsigned)

    @classmethod
    def tool_use(cls, calls: Iterable[tuple[str, str]], content: str | None = None,
                 ids: Sequence[str] | None = None, *, thinking: str | None = None,
                 stop_reason: str = "tool_use", usage: Usage | None = None,
                 headers: Mapping[str, str] | None = None, redacted: bool = False,
                 unsigned: bool = False) -> Reply:
        """``tool_use`` blocks for ``[(name, input_json_text), ...]``; ids default ``toolu_<n>``."""
        calls = list(calls)
        ids = list(ids) if ids is not None else [f"toolu_{next(_tool_ids):04d}" for _ in calls]
        if len(ids) != len(calls):
            raise ValueError("ids must have one entry per call")
        return cls(kind="message", content=content, thinking=thinking,
                   calls=tuple((i, n, a) for i, (n, a) in zip(ids, calls)),
                   stop_reason=stop_reason, usage=usage, headers=tuple((headers or {}).items()),
                   redacted=redacted, unsigned=unsigned)

    @classmethod
    def error(cls, status: int, message: str, *, type: str | None = None,  # noqa: A002
              headers: Mapping[str, str] | None = None) -> Reply:
        """``status`` with Anthropic's body ``{"type":"error","error":{"type","message"}}``."""
        if type is None:
            type = next((t for t, s in ERROR_STATUS.items() if s == status), "api_error")
        body = _error_body(type, message)
        return cls(kind="error", status=status, body=body, headers=tuple((headers or {}).items()))

    @classmethod
    def overloaded(cls, *, headers: Mapping[str, str] | None = None) -> Reply:
        """529 ``overloaded_error``, as Anthropic sends it when it is at capacity."""
        return cls.error(529, "Overloaded", type="overloaded_error", headers=headers)

    @classmethod
    def raw(cls, status: int, body: bytes | str, content_type: str = "application/json", *,
            headers: Mapping[str, str] | None = None) -> Reply:
        """Exactly ``body`` with ``status`` (malformed JSON, garbage SSE...)."""
        return cls(kind="raw", status=status, body=body.encode() if isinstance(body, str) else body,
                   content_type=content_type, headers=tuple((headers or {}).items()))

    @classmethod
    def drop_stream(cls, after_events: int = 0, *,
                    content: str = "This answer is cut off before it ends.") -> Reply:
        """Streaming: ``message_start`` then ``after_events`` more events, then the socket
        closes mid-body. Non-streaming: the connection closes without a response."""
        return cls(kind="drop", content=content, after_events=after_events)

    @classmethod
    def error_event(cls, type: str = "overloaded_error",  # noqa: A002
                    message: str = "Overloaded", *, after_events: int = 0,
                    content: str = "Partial answer") -> Reply:
        """Streaming: ``message_start``, ``after_events`` events of a text answer, then
        ``event: error`` and the end of the body. Non-streaming: the error's HTTP status."""
        return cls(kind="error_event", content=content, after_events=after_events,
                   error_type=type, body=_error_body(type, message))

    @classmethod
    def hang(cls, seconds: float) -> Reply:
        """Sleep ``seconds`` (at most 60, cut short by ``close()``), then answer text "late"."""
        return cls(kind="message", content="late", hang_seconds=min(float(seconds), _MAX_HANG))


def _error_body(type_: str, message: str) -> bytes:
    return _dumps({"type": "error", "error": {"type": type_, "message": message},
                   "request_id": "req_fake"}).encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _event(name: str, payload: Mapping[str, Any] | bytes) -> bytes:
    """One HTTP/1.1 chunk holding one SSE event."""
    data = payload if isinstance(payload, bytes) else _dumps(payload).encode()
    return http_chunk(b"event: " + name.encode() + b"\ndata: " + data + b"\n\n")


def _prompt_chars(body: Mapping[str, Any]) -> int:
    return len(json.dumps(body.get("messages") or [])) + len(json.dumps(body.get("system") or ""))


def _usage(reply: Reply, body: Mapping[str, Any]) -> Usage:
    if reply.usage is not None:
        return reply.usage
    out = len(reply.content or "") + len(reply.thinking or "")
    out += sum(len(n) + len(a) for _, n, a in reply.calls)
    return Usage(input=max(1, _prompt_chars(body) // 4), output=out // 4 + 1)


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    """The reply's content blocks as a non-streaming message holds them."""
    blocks: list[dict[str, Any]] = []
    if reply.thinking:
        blocks.append({"type": "thinking", "thinking": reply.thinking,
                       "signature": "" if reply.unsigned else signature_of(reply.thinking)})
    if reply.redacted:
        data = REDACTED_PREFIX + hashlib.sha256((reply.thinking or "").encode()).hexdigest()[:16]
        blocks.append({"type": "redacted_thinking", "data": data})
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    blocks.extend({"type": "tool_use", "id": i, "name": n, "input": json.loads(a or "{}")}
                  for i, n, a in reply.calls)
    return blocks


def _message(msg_id: str, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": msg_id, "type": "message", "role": "assistant",
            "model": body.get("model") or _DEFAULT_MODEL, "content": _blocks(reply),
            "stop_reason": reply.stop_reason, "stop_sequence": None,
            "usage": _usage(reply, body).to_json()}


def _block_events(index: int, block: Mapping[str, Any], size: int) -> list[bytes]:
    kind = block["type"]
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], size)]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p}
                  for p in _pieces(block["thinking"], size)]
        if block["signature"]:
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "redacted_thinking":
        start, deltas = dict(block), []
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        text = _dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": ""}]
        deltas += [{"type": "input_json_delta", "partial_json": p} for p in _pieces(text, size)]
    out = [_event("content_block_start",
                  {"type": "content_block_start", "index": index, "content_block": start})]
    if index == 0:
        out.append(_event("ping", {"type": "ping"}))
    out += [_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                           "delta": d}) for d in deltas]
    out.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


def stream_events(msg_id: str, reply: Reply, body: Mapping[str, Any],
                  size: int) -> list[bytes]:
    """Every HTTP chunk of the SSE body of ``reply`` (without the terminating chunk)."""
    message = _message(msg_id, reply, body)
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 1}}
    events = [_event("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block, size)
    events.append(_event("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(_event("message_stop", {"type": "message_stop"}))
    return events


def _thinking_budget_refusal(body: Mapping[str, Any]) -> str | None:
    budget = (body.get("thinking") or {}).get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= (body.get("max_tokens") or 0):
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    return None


def _block_refusal(i: int, role: str, j: int, block: Mapping[str, Any]) -> str | None:
    kind = block.get("type")
    if kind not in ("thinking", "redacted_thinking"):
        return None
    where = f"messages.{i}.content.{j}"
    if role != "assistant":
        return f"{where}: thinking blocks may only appear in assistant turns"
    if "cache_control" in block:
        return f"{where}: cache_control cannot be set for thinking blocks"
    if kind == "thinking" and block.get("signature") != signature_of(block.get("thinking") or ""):
        return f"{where}: Invalid `signature` in `thinking` block"
    if kind == "redacted_thinking" and not str(block.get("data") or "").startswith(
            REDACTED_PREFIX):
        return f"{where}: Invalid `data` in `redacted_thinking` block"
    return None


def _loop_refusal(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """With thinking on, the assistant turn a tool_result answers must start with thinking."""
    last = messages[-1] if messages else {}
    content = last.get("content")
    answers_tools = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    if last.get("role") != "user" or not answers_tools or len(messages) < 2:
        return None
    assistant = messages[-2].get("content")
    first = assistant[0].get("type") if isinstance(assistant, list) and assistant else "text"
    if first in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
            f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final "
            "`assistant` message must start with a thinking block (preceeding the lastmost set "
            "of `tool_use` and `tool_result` blocks). To avoid this requirement, disable "
            "`thinking`.")


def thinking_refusal(body: Mapping[str, Any]) -> str | None:
    """Why the real API would refuse this request's thinking (None: it would not)."""
    enabled = (body.get("thinking") or {}).get("type") == "enabled"
    if enabled and (why := _thinking_budget_refusal(body)):
        return why
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and (why := _block_refusal(
                    i, str(message.get("role")), j, block)):
                return why
    return _loop_refusal(messages) if enabled else None


_NO_REPLY = _error_body("api_error", "fake server: no scripted reply left")


# ---- the server -------------------------------------------------------------------------


class _Handler(FakeHandler):
    route = "/v1/messages"
    no_reply_body = _NO_REPLY
    phrases = {529: "Overloaded"}

    def _not_found_body(self) -> bytes:
        return _error_body("not_found_error", "no route")

    def _bad_json_body(self, exc: ValueError) -> bytes:
        return _error_body("invalid_request_error", str(exc))

    def _wait_seconds(self, reply: Reply) -> float:
        return reply.hang_seconds

    def _reject(self, fake: FakeAnthropicServer, body: dict[str, Any]) -> bytes | None:
        why = thinking_refusal(body)
        return None if why is None else _error_body("invalid_request_error", why)

    def _answer(self, fake: FakeAnthropicServer, reply: Reply, body: dict[str, Any]) -> None:
        stream = bool(body.get("stream"))
        extra = (("request-id", fake._next_id("req")),) + reply.headers
        if reply.kind in ("error", "raw"):
            self._send(reply.status, reply.content_type, reply.body, extra)
        elif reply.kind == "error_event" and not stream:
            self._send(ERROR_STATUS.get(reply.error_type, 500), "application/json", reply.body,
                       extra)
        elif reply.kind == "drop" and not stream:
            self._abort()
        elif stream:
            size = max(1, reply.piece_size or fake.piece_size)
            events = stream_events(fake._next_id("msg"), reply, body, size)
            if reply.kind == "drop":
                events = events[:1 + reply.after_events]
            elif reply.kind == "error_event":
                events = events[:1 + reply.after_events] + [_event("error", reply.body)]
            self._send_stream(extra, events, chunk_delay=reply.chunk_delay,
                              ends=reply.kind != "drop")
        else:
            payload = _dumps(_message(fake._next_id("msg"), reply, body)).encode()
            self._send(200, "application/json", payload, extra, chunk_delay=reply.chunk_delay)


class FakeAnthropicServer(FakeHTTPServer):
    """A loopback Anthropic Messages server. Use as a context manager (or call close()).

    Its ``base_url`` is the SDK's (the SDK appends ``/v1/messages`` itself)."""

    handler = _Handler
    reply_type = Reply
    thread_name = "fake-anthropic"

    def __init__(self, default: Reply | None = None, *, piece_size: int = 3,
                 window: int | None = None) -> None:
        super().__init__(default, piece_size=piece_size, window=window)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}_fake{next(self._ids)}"

    def _overflow_body(self, tokens: int, window: int) -> bytes:
        return _error_body("invalid_request_error",
                           f"prompt is too long: {tokens} tokens > {window} maximum")
