"""The protocol-neutral core of the in-tree fake LLM servers.

Real HTTP/1.1 on loopback: a threaded keep-alive server woken at once by ``close()``, a queue
of scripted replies (then a ``default``), recording of request bodies and headers, unexpected
requests remembered for ``assert_done``, and the writing primitives (plain bodies, chunked
bodies sent at once or one piece per ``chunk_delay``, aborted connections). It counts the
connections it accepted and the clients that closed theirs while a reply was held back, and
every protocol's server accepts :class:`Stall` (keep-alive bytes, never an answer).

With a ``window`` (tokens) a server refuses a request whose prompt is over it, as the real API
does (its ``_overflow_body``, a 400 listed in ``rejections``, taking no scripted reply), and
keeps the largest prompt it served (``largest_prompt``). A prompt's tokens are its JSON text
at four characters a token: the envelope (roles, call ids, tool schemas) counts, so the count
is above mibyan's own rough estimate of the same request, as a real tokenizer's usually is.

A protocol builds on it with a handler and a server subclass::

    class _Handler(FakeHandler):
        route = "/v1/things"                     # the one POST path served
        error_headers = (("x-request-id", "fake"),)
        no_reply_body = b"..."                   # 500 when no scripted reply is left

        def _not_found_body(self) -> bytes: ...  # 404 for any other path or method
        def _bad_json_body(self, exc: ValueError) -> bytes: ...  # 400
        def _wait_seconds(self, reply) -> float: ...  # slept (cut short by close()) first
        def _answer(self, fake, reply, body) -> None: ...  # write the reply

    class FakeThingServer(FakeHTTPServer):
        handler = _Handler
        reply_type = ThingReply                  # what script() accepts
        base_path = "/v1"                        # appended to base_url
        thread_name = "fake-thing"

        def _overflow_body(self, tokens, window) -> bytes: ...  # 400 over the window
"""

from __future__ import annotations

import http.server
import itertools
import json
import selectors
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar, Iterable, Mapping, Self

__all__ = ["FakeHTTPServer", "FakeHandler", "Headers", "MAX_HANG", "LAST_CHUNK", "Stall",
           "dumps", "http_chunk"]

dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# What mibyan's window probe asks a self-hosted endpoint (effects.providers.window_probe).
_WINDOW_PROBES = frozenset({"/props", "/models", "/v1/models"})
MAX_HANG = 60.0  # hangs are bounded so a broken test cannot wedge the suite
LAST_CHUNK = b"0\r\n\r\n"
SLICE = 64  # bytes per write of a slowly sent (chunk_delay) plain body


@dataclass(frozen=True, slots=True)
class Stall:
    """A reply that never comes: a 200 head, then a keep-alive byte every ``interval`` seconds
    (an SSE comment when the request streams, a space of JSON whitespace when not) until the
    client closes the connection, the server closes, or ``seconds`` pass (then the connection
    is cut)."""

    interval: float = 0.05
    seconds: float = 30.0


def http_chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk holding ``data``."""
    return b"%x\r\n%s\r\n" % (len(data), data)


class Headers(dict):
    """A plain dict of request headers with case-insensitive lookup (keys stored lower-case)."""

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key.lower() if isinstance(key, str) else key)


class FakeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``POST <route>`` with JSON bodies; subclasses fill in the protocol hooks."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    route: ClassVar[str] = ""
    error_headers: ClassVar[tuple[tuple[str, str], ...]] = ()
    no_reply_body: ClassVar[bytes] = b""
    phrases: ClassVar[Mapping[int, str]] = {}  # reason phrases for codes HTTPStatus lacks

    # ---- protocol hooks ----

    def _not_found_body(self) -> bytes:
        raise NotImplementedError

    def _bad_json_body(self, exc: ValueError) -> bytes:
        raise NotImplementedError

    def _wait_seconds(self, reply: Any) -> float:
        return 0.0

    def _reject(self, fake: Any, body: dict[str, Any]) -> bytes | None:
        """A 400 error body for a request the real API refuses (None: served as usual). A
        refused request is recorded and listed in ``rejections``; it takes no scripted reply."""
        return None

    def _answer(self, fake: Any, reply: Any, body: dict[str, Any]) -> None:
        raise NotImplementedError

    # ---- plumbing ----

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True, accepted=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def parse_request(self) -> bool:
        self._t0 = time.perf_counter()
        return super().parse_request()

    def do_POST(self) -> None:  # noqa: N802
        self._handle(self._post)

    def do_GET(self) -> None:  # noqa: N802
        self._handle(self._window_probe if self.path in _WINDOW_PROBES else self._not_found)

    def _window_probe(self, fake: FakeHTTPServer) -> None:
        """mibyan asks a self-hosted endpoint for its window once per session: the fakes answer
        as a hosted API does, with no window (no ``/props``, a models listing without sizes)."""
        fake._probed(self.path)
        if self.path == "/props":
            self._send(404, "application/json", self._not_found_body(), self.error_headers)
        else:
            self._send(200, "application/json", b'{"object":"list","data":[]}', ())

    def _handle(self, serve: Any) -> None:
        fake = self.server.fake
        try:
            serve(fake)
        except OSError:  # the client went away (timeout, reset, broken pipe)
            self.close_connection = True
        finally:
            fake._add_seconds(time.perf_counter() - self._t0)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _not_found(self, fake: FakeHTTPServer) -> None:
        self._read_body()
        fake._unexpected(f"{self.command} {self.path}")
        self._send(404, "application/json", self._not_found_body(), self.error_headers)

    def _post(self, fake: FakeHTTPServer) -> None:
        if self.path.split("?", 1)[0].rstrip("/") != self.route:
            self._not_found(fake)
            return
        raw = self._read_body()
        headers = Headers((k.lower(), v) for k, v in self.headers.items())
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            fake._record(None, headers)
            fake._unexpected(f"unparseable request body: {exc}")
            self._send(400, "application/json", self._bad_json_body(exc), self.error_headers)
            return
        refused = fake._over_window(body)
        if refused is None:
            refused = self._reject(fake, body)
        if refused is not None:
            fake._record(body, headers, take=False, refused=refused)
            self._send(400, "application/json", refused, self.error_headers)
            return
        reply = fake._record(body, headers)
        if reply is None:
            self._send(500, "application/json", self.no_reply_body, self.error_headers)
            return
        if isinstance(reply, Stall):
            self._stall(reply, bool(body.get("stream")))
            return
        wait = self._wait_seconds(reply)
        if wait > 0 and not self._hold(wait):
            self.close_connection = True
            return
        self._answer(fake, reply, body)

    def _hold(self, seconds: float) -> bool:
        """Wait ``seconds`` before answering, watching the connection: False (answer nothing)
        when the server closes or the client closes its end, which is counted."""
        fake = self.server.fake
        until = time.monotonic() + seconds
        with selectors.DefaultSelector() as sel:
            sel.register(self.connection, selectors.EVENT_READ)
            while (left := until - time.monotonic()) > 0:
                if fake._stopping.is_set():
                    return False
                if sel.select(min(left, 0.01)) and not self._peek():
                    fake._client_closed()
                    return False
        return not fake._stopping.is_set()

    def _peek(self) -> bytes:
        try:
            return self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return b""

    def _stall(self, stall: Stall, stream: bool) -> None:
        kind = "text/event-stream" if stream else "application/json"
        self.wfile.write(self._head(200, (("Content-Type", kind),
                                          ("Transfer-Encoding", "chunked"))))
        beat = http_chunk(b": keep-alive\n\n" if stream else b" ")
        until = time.monotonic() + min(stall.seconds, MAX_HANG)
        while time.monotonic() < until:
            if not self._hold(stall.interval):
                break
            try:
                self.wfile.write(beat)
                self.wfile.flush()
            except OSError:
                self.server.fake._client_closed()
                break
        self._abort()

    # ---- writing ----

    def _phrase(self, status: int) -> str:
        try:
            return HTTPStatus(status).phrase
        except ValueError:
            return self.phrases.get(status, "Unknown")

    def _head(self, status: int, headers: Iterable[tuple[str, str]]) -> bytes:
        """The status line and headers (``Connection: close`` when closing), blank line included."""
        lines = [f"HTTP/1.1 {status} {self._phrase(status)}"]
        lines.extend(f"{k}: {v}" for k, v in headers)
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        extra: Iterable[tuple[str, str]] = (),
        *,
        chunk_delay: float = 0.0,
    ) -> None:
        """A plain body; with ``chunk_delay`` the head goes out at once, then ``SLICE``-byte
        pieces of the body that many seconds apart."""
        head = self._head(
            status,
            (("Content-Type", content_type), ("Content-Length", str(len(body))), *extra),
        )
        if chunk_delay > 0:
            self._trickle(head, [body[i : i + SLICE] for i in range(0, len(body), SLICE)],
                          chunk_delay)
        else:
            self.wfile.write(head + body)

    def _send_stream(
        self,
        extra: Iterable[tuple[str, str]],
        chunks: list[bytes],
        *,
        chunk_delay: float = 0.0,
        ends: bool = True,
    ) -> None:
        """A 200 chunked SSE body of ``chunks``: closed by the terminating chunk, or (not
        ``ends``) cut off by closing the connection after the last of them."""
        head = self._head(200, (
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Transfer-Encoding", "chunked"),
            ("Cache-Control", "no-cache"),
            *extra,
        ))
        if ends:
            chunks = [*chunks, LAST_CHUNK]
        if chunk_delay > 0:
            self._trickle(head, chunks, chunk_delay)
        else:
            self.wfile.write(head + b"".join(chunks))
        if not ends:
            self._abort()

    def _trickle(self, head: bytes, pieces: list[bytes], delay: float) -> None:
        """The head at once, then each piece after ``delay`` seconds (cut short by close())."""
        self.wfile.write(head)
        for piece in pieces:
            if self.server.fake._stopping.wait(delay):
                self._abort()
                return
            self.wfile.write(piece)

    def _abort(self) -> None:
        """Close the connection right here: no (further) response bytes."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive handler threads must not block close()
    request_queue_size = 128
    fake: FakeHTTPServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError) or self.fake._stopping.is_set():
            return
        super().handle_error(request, client_address)


class FakeHTTPServer:
    """A loopback fake server: lifecycle, scripted replies and request recording.

    Use as a context manager (or call close()). Subclasses set ``handler``, ``reply_type``,
    ``base_path`` and ``thread_name``.
    """

    handler: ClassVar[type[FakeHandler]] = FakeHandler
    reply_type: ClassVar[type] = object
    base_path: ClassVar[str] = ""
    thread_name: ClassVar[str] = "fake-http"

    def __init__(self, default: Any = None, *, piece_size: int = 3,
                 window: int | None = None) -> None:
        self.default = default
        self.piece_size = piece_size
        self.window = window
        self._largest = 0
        self._lock = threading.Lock()
        self._queue: deque[Any] = deque()
        self._requests: list[dict[str, Any] | None] = []
        self._headers: list[dict[str, str]] = []
        self._unexpected_list: list[str] = []
        self._window_probes: list[str] = []
        self._rejections: list[str] = []
        self._seconds = 0.0
        self._ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._accepted = 0
        self._client_gone = threading.Condition(self._lock)
        self._gone = 0
        self._stopping = threading.Event()
        self._closed = False
        self._httpd = _HTTPServer(("127.0.0.1", 0), self.handler)
        self._httpd.fake = self
        self.port: int = self._httpd.server_address[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(
            target=self._serve, name=f"{self.thread_name}-{self.port}", daemon=True
        )
        self._thread.start()

    # ---- lifecycle ----

    def __enter__(self) -> Self:
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
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def script(self, *replies: Any) -> Self:
        """Queue replies, answered in order by the next requests."""
        for r in replies:
            if not isinstance(r, self.reply_type | Stall):
                raise TypeError(f"expected {self.reply_type.__name__}, got {type(r).__name__}")
        with self._lock:
            self._queue.extend(replies)
        return self

    def reset(self) -> None:
        """Forget recorded requests, leftover replies and unexpected requests (the server and
        its keep-alive connections stay up, so one server can serve a whole test module)."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._headers.clear()
            self._rejections.clear()
            self._unexpected_list.clear()
            self._window_probes.clear()

    # ---- inspection ----

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies of every request on the route, in arrival order (a copy).
        An unparseable body is recorded as ``None``."""
        with self._lock:
            return list(self._requests)  # type: ignore[arg-type]

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Headers of every request on the route (lower-case keys, case-insensitive get)."""
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
    def rejections(self) -> list[str]:
        """The error bodies of requests refused as the real API would (``_reject``)."""
        with self._lock:
            return list(self._rejections)

    @property
    def largest_prompt(self) -> int:
        """The tokens (``prompt_tokens``) of the largest request served (refused ones aside)."""
        with self._lock:
            return self._largest

    @staticmethod
    def prompt_tokens(body: Mapping[str, Any]) -> int:
        """The fake's token count of a request: its JSON text (as ``json.dumps`` writes it by
        default), four characters a token."""
        return len(json.dumps(body)) // 4

    @property
    def unexpected(self) -> list[str]:
        with self._lock:
            return list(self._unexpected_list)

    @property
    def connections(self) -> int:
        """Connections accepted so far (a client that keeps its connection alive opens one)."""
        with self._lock:
            return self._accepted

    @property
    def disconnects(self) -> int:
        """Clients that closed their connection while a reply was held back (a hang, a
        delay or a :class:`Stall`)."""
        with self._lock:
            return self._gone

    def wait_for_disconnect(self, timeout: float = 5.0) -> bool:
        """Wait until a client closed its connection during a held-back reply."""
        with self._client_gone:
            return self._client_gone.wait_for(lambda: self._gone > 0, timeout)

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

    def _overflow_body(self, tokens: int, window: int) -> bytes:
        """The real API's 400 body refusing a prompt of ``tokens`` over a ``window``."""
        raise NotImplementedError

    def _over_window(self, body: Mapping[str, Any]) -> bytes | None:
        """The refusal of a request over the window (None: it fits, or there is no window)."""
        tokens = self.prompt_tokens(body)
        if self.window is not None and tokens > self.window:
            return self._overflow_body(tokens, self.window)
        with self._lock:
            self._largest = max(self._largest, tokens)
        return None

    def _record(self, body: dict[str, Any] | None, headers: dict[str, str], *,
                take: bool = True, refused: bytes | None = None) -> Any:
        """Remember a request; the reply it gets (``None``: answer with the no-reply error)."""
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            if refused is not None:
                self._rejections.append(refused.decode())
            if body is None or not take:
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

    def _probed(self, path: str) -> None:
        with self._lock:
            self._window_probes.append(path)

    @property
    def window_probes(self) -> list[str]:
        """The window probes answered (``GET /props``, ``GET /v1/models``)."""
        with self._lock:
            return list(self._window_probes)

    def _add_seconds(self, dt: float) -> None:
        with self._lock:
            self._seconds += dt

    def _client_closed(self) -> None:
        with self._client_gone:
            self._gone += 1
            self._client_gone.notify_all()

    def _track(self, conn: socket.socket, *, add: bool, accepted: bool = False) -> None:
        with self._lock:
            self._accepted += accepted
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)
