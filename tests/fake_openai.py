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
import http.server
import itertools
import json
import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["FakeOpenAIServer", "Reply", "Usage"]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_MAX_HANG = 60.0  # Reply.hang is bounded so a broken test cannot wedge the suite
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
    chunk_delay: float = 0.0  # seconds between streamed chunks (0 = send in one write)

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
        body = _dumps({"error": {"message": message, "type": type, "param": None, "code": code}})
        return cls(
            kind="error",
            status=status,
            body=body.encode(),
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


# ---- the server -------------------------------------------------------------------------


class _Headers(dict):
    """A plain dict of request headers with case-insensitive lookup (keys stored lower-case)."""

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key.lower() if isinstance(key, str) else key)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


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
    data = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


_DONE_CHUNK = _chunk(b"[DONE]")
_LAST_CHUNK = b"0\r\n\r\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def parse_request(self) -> bool:
        self._t0 = time.perf_counter()
        return super().parse_request()

    # --- dispatch ---

    def do_POST(self) -> None:  # noqa: N802
        fake = self.server.fake
        try:
            self._post(fake)
        except OSError:  # the client went away (timeout, reset, broken pipe)
            self.close_connection = True
        finally:
            fake._add_seconds(time.perf_counter() - self._t0)

    def do_GET(self) -> None:  # noqa: N802
        fake = self.server.fake
        try:
            self._not_found(fake)
        finally:
            fake._add_seconds(time.perf_counter() - self._t0)

    def _not_found(self, fake: FakeOpenAIServer) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        fake._unexpected(f"{self.command} {self.path}")
        message = f"fake server: no route {self.command} {self.path}"
        self._send_json(404, _error_body(message, "invalid_request_error"))

    def _post(self, fake: FakeOpenAIServer) -> None:
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/chat/completions":
            self._not_found(fake)
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = _Headers((k.lower(), v) for k, v in self.headers.items())
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            fake._record(None, headers)
            fake._unexpected(f"unparseable request body: {exc}")
            message = f"fake server: bad JSON body: {exc}"
            self._send_json(400, _error_body(message, "invalid_request_error"))
            return
        reply = fake._record(body, headers)
        if reply is None:
            self._send_json(500, _NO_REPLY_BODY)
            return
        wait = reply.delay + reply.hang_seconds
        if wait > 0 and fake._stopping.wait(wait):
            self.close_connection = True
            return
        stream = bool(body.get("stream"))
        kind = reply.kind
        if kind == "error" or kind == "raw":
            self._send(reply.status, reply.content_type, reply.body, reply.headers)
        elif kind == "drop":
            if stream:
                self._stream(fake, reply, body)
            self._abort()
        elif stream:
            self._stream(fake, reply, body)
        else:
            self._send_json(200, _completion(fake, reply, body))

    # --- writing ---

    def _send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        extra: Iterable[tuple[str, str]] = (),
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_reason(status)}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        head.extend(f"{k}: {v}" for k, v in extra)
        if self.close_connection:
            head.append("Connection: close")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)

    def _send_json(self, status: int, payload: Mapping[str, Any] | bytes) -> None:
        body = payload if isinstance(payload, bytes) else _dumps(payload).encode()
        self._send(status, "application/json", body, _RESPONSE_HEADERS)

    def _stream(self, fake: FakeOpenAIServer, reply: Reply, body: Mapping[str, Any]) -> None:
        head = (
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: text/event-stream; charset=utf-8\r\n"
            "Transfer-Encoding: chunked\r\n"
            "Cache-Control: no-cache\r\n"
            "x-request-id: fake\r\n"
            + ("Connection: close\r\n" if self.close_connection else "")
            + "\r\n"
        ).encode("latin-1")
        chunks = _stream_chunks(fake, reply, body)
        if reply.kind == "drop":
            chunks = chunks[: 1 + max(0, reply.after_chunks)]
        else:
            chunks.append(_DONE_CHUNK)
            chunks.append(_LAST_CHUNK)
        if reply.chunk_delay <= 0:
            self.wfile.write(head + b"".join(chunks))
            return
        self.wfile.write(head)
        for c in chunks:
            if fake._stopping.wait(reply.chunk_delay):
                self._abort()
                return
            self.wfile.write(c)

    def _abort(self) -> None:
        """Close the connection right here: no (further) response bytes."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _error_body(message: str, type_: str, code: str | None = None) -> bytes:
    return _dumps(
        {"error": {"message": message, "type": type_, "param": None, "code": code}}
    ).encode()


_NO_REPLY_BODY = _error_body("fake server: no scripted reply left", "server_error")
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


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive handler threads must not block close()
    request_queue_size = 128
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) or self.fake._stopping.is_set():
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    """A loopback OpenAI chat-completions server. Use as a context manager (or call close())."""

    def __init__(self, default: Reply | None = None, *, piece_size: int = 3) -> None:
        self.default = default
        self.piece_size = piece_size
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._requests: list[dict[str, Any] | None] = []
        self._headers: list[dict[str, str]] = []
        self._unexpected_list: list[str] = []
        self._seconds = 0.0
        self._ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._closed = False
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self.port: int = self._httpd.server_address[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(
            target=self._serve, name=f"fake-openai-{self.port}", daemon=True
        )
        self._thread.start()

    # ---- lifecycle ----

    def __enter__(self) -> FakeOpenAIServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, wake hanging replies and cut any open keep-alive connections."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        self._wake_w.send(b"x")
        self._thread.join(timeout=5)
        self._httpd.server_close()
        self._wake_r.close()
        self._wake_w.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _serve(self) -> None:
        # Like serve_forever, but woken at once by close() instead of polling.
        with selectors.DefaultSelector() as sel:
            sel.register(self._httpd, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in sel.select():
                    if key.fileobj is self._httpd and not self._stopping.is_set():
                        self._httpd._handle_request_noblock()

    # ---- configuration ----

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> FakeOpenAIServer:
        """Queue replies, answered in order by the next requests."""
        for r in replies:
            if not isinstance(r, Reply):
                raise TypeError(f"expected Reply, got {type(r).__name__}")
        with self._lock:
            self._queue.extend(replies)
        return self

    # ---- inspection ----

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies of every chat-completions request, in arrival order (a copy).
        An unparseable body is recorded as ``None``."""
        with self._lock:
            return list(self._requests)  # type: ignore[arg-type]

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Headers of every chat-completions request (lower-case keys, case-insensitive get)."""
        with self._lock:
            return list(self._headers)

    @property
    def last_request(self) -> dict[str, Any]:
        with self._lock:
            if not self._requests:
                raise AssertionError("fake server: no request received")
            return self._requests[-1]  # type: ignore[return-value]

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        with self._lock:
            return len(self._queue)

    @property
    def unexpected(self) -> list[str]:
        with self._lock:
            return list(self._unexpected_list)

    @property
    def server_seconds(self) -> float:
        """Cumulative wall time spent inside request handling (all threads)."""
        with self._lock:
            return self._seconds

    def assert_done(self) -> None:
        """Fail if scripted replies are left over or an unexpected request arrived."""
        with self._lock:
            left = len(self._queue)
            bad = list(self._unexpected_list)
        problems = []
        if left:
            problems.append(f"{left} scripted repl{'y' if left == 1 else 'ies'} never requested")
        if bad:
            problems.append("unexpected request(s): " + "; ".join(bad))
        if problems:
            raise AssertionError("fake server: " + " and ".join(problems))

    # ---- used by the handler ----

    def _record(self, body: dict[str, Any] | None, headers: dict[str, str]) -> Reply | None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            if body is None:
                return None
            if self._queue:
                return self._queue.popleft()
            if self.default is not None:
                return self.default
            self._unexpected_list.append(
                f"request #{len(self._requests)} with no scripted reply left"
            )
            return None

    def _unexpected(self, what: str) -> None:
        with self._lock:
            self._unexpected_list.append(what)

    def _add_seconds(self, dt: float) -> None:
        with self._lock:
            self._seconds += dt

    def _next_id(self) -> str:
        return f"chatcmpl-fake{next(self._ids)}"

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)
