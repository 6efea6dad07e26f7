"""The one HTTP shell of the three provider adapters.

An adapter keeps only its codec (request body, reply parsing, stream events); this shell posts
the ready body bytes and owns the rest: the connection pool (one ``httpx2`` client per adapter
instance: keys are per-request headers, never part of a cache key), SSE or JSON reading, the
rate-limit headers, the mapping of every failure into the project's error tree, and each call's
**read timeout**, **total deadline** and **abort**.

The deadline and the abort live below httpx, in a network backend that wraps each connection's
stream: every read, write and connect of the calling thread is bounded by what is left of its
call's deadline (so a server that sends keep-alive bytes forever still times out), and a
``CancelToken`` shuts the socket down from another thread as soon as the request is being
written, before any response head (so a server stops generating for a caller who left).
``httpx2`` is the HTTP library the official SDKs use; they are no longer imported per call.

httpx2 has no public seam for a network backend, so the wrappers (which subclass httpcore2's
public ``NetworkBackend`` and ``NetworkStream``) are put in through four private attributes:
``Client._transport`` and ``Client._mounts``, ``HTTPTransport._pool`` and the pool's
``_network_backend``. pyproject.toml keeps httpx2 and httpcore2 within one minor version,
``tests/effects/test_http_internals.py`` checks each of them, and a client whose transports do
not have them is an error here, never a client without its deadline and abort.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from effects.protocols import CancelToken
from effects.providers.headers import rate_limit_headers
from effects.providers.http_errors import (
    ErrorDetail,
    endpoint_label,
    error_detail,
    retry_after_seconds,
)
from effects.workers import STOPPED, run_until
from stages.decision import ModelRequest
from stages.errors import (
    ModelBehaviourError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    UsageError,
)
from stages.log.setting_checks import default_deadline, positive_seconds

__all__ = ["Exchange", "HttpShell", "StopsOnCancel", "check_timeouts", "preload"]

T = TypeVar("T")
_SLACK = 0.005  # a read cut at the deadline may wake a hair early
_CONNECT_POLL = 0.02  # how often a connect's waiter looks for a cancel
_current: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "mibyan_model_call", default=None)


def check_timeouts(timeout: float, deadline: float | None) -> tuple[float, float]:
    """The read timeout and total deadline, or a ``UsageError`` for a value that is not a
    positive number of seconds."""
    timeout = positive_seconds("timeout", timeout)
    if deadline is None:
        return timeout, default_deadline(timeout)
    return timeout, positive_seconds("deadline", deadline)


class _Call:
    """One model call as the guarded network streams see it: its deadline, the stream that
    carries it, and whether it was cancelled or its connection went back to the pool."""

    def __init__(self, deadline_at: float) -> None:
        self.deadline_at = deadline_at
        # Re-entrant: an interrupt's signal handler may abort on the thread making the call.
        self.lock = threading.RLock()
        self.stream: Any = None
        self.cancelled = False
        self.released = False
        # Whether a connection was opened for it (not only taken from the pool).
        self.connected = False

    def clamp(self, timeout: float | None, error: type[Exception]) -> float:
        remaining = self.deadline_at - time.monotonic()
        if remaining <= 0:
            raise error("the call's total deadline has passed")
        return remaining if timeout is None else min(timeout, remaining)

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline_at - _SLACK

    def attach(self, stream: Any, error: type[Exception]) -> None:
        with self.lock:
            self.stream = stream
            if self.cancelled:
                raise error("the call was cancelled")

    def abort(self) -> None:
        """Shut the socket down (a bare ``close`` from another thread would wait for the next
        bytes): the blocked reader wakes, and the server sees the connection go."""
        with self.lock:
            self.cancelled = True
            if self.released or self.stream is None:
                return
            sock = self.stream.get_extra_info("socket")
            # No socket, or it is gone already: nothing left to close.
            with contextlib.suppress(TypeError, OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # beneath any TLS wrapper

    def release(self) -> None:
        with self.lock:
            self.released = True


@functools.cache
def _guarded_types() -> tuple[type, type, type]:
    """The wrappers, built on first use (``httpx2`` is imported lazily). The backend and its
    streams implement httpcore2's network interface; the errors they raise are httpx2's own,
    which pass through its transport unchanged."""
    import httpcore2
    import httpx2

    class GuardedStream(httpcore2.NetworkStream):
        """A connection's stream whose I/O is bounded by the current call's deadline."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            call = _current.get()
            if call is not None:
                timeout = call.clamp(timeout, httpx2.ReadTimeout)
            return self._inner.read(max_bytes, timeout)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            call = _current.get()
            if call is not None:
                call.attach(self, httpx2.WriteError)
                timeout = call.clamp(timeout, httpx2.WriteTimeout)
            self._inner.write(buffer, timeout)

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> Any:
            return GuardedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class GuardedBackend(httpcore2.NetworkBackend):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                        local_address: str | None = None, socket_options: Any = None) -> Any:
            call = _current.get()
            if call is None:
                return GuardedStream(self._inner.connect_tcp(host, port, timeout,
                                                             local_address, socket_options))
            timeout = call.clamp(timeout, httpx2.ConnectTimeout)
            call.connected = True
            stream = GuardedStream(_connected(call, lambda: self._inner.connect_tcp(
                host, port, timeout, local_address, socket_options), httpx2.ConnectError))
            try:  # from here a cancel shuts the socket down, the TLS handshake's included
                call.attach(stream, httpx2.ConnectError)
            except httpx2.ConnectError:
                stream.close()
                raise
            return stream

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Any = None) -> Any:
            return GuardedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    class HeldBody(httpx2.SyncByteStream):
        """A response body whose return of the connection to the pool is seen by the call
        (under its lock), so an abort never shuts down a connection that another call uses."""

        def __init__(self, inner: Any, call: _Call) -> None:
            self._inner, self._call = inner, call

        def __iter__(self) -> Iterator[bytes]:
            return iter(self._inner)

        def close(self) -> None:
            self._call.release()
            self._inner.close()

    return GuardedBackend, HeldBody, httpx2.Client


def _connected(call: _Call, connect: Callable[[], Any], error: type[Exception]) -> Any:
    """``connect`` (a name lookup and a TCP connect, which no socket shutdown reaches) on a
    worker thread, so that a call cancelled meanwhile leaves at once; a connection made for a
    call that left is closed. Once per connection: kept-alive ones are not connected again."""
    def work() -> Any:
        stream = connect()
        with call.lock:
            if call.cancelled:  # its caller left: nobody else will close it
                stream.close()
        return stream

    stream = run_until(work, lambda: call.cancelled, poll=_CONNECT_POLL, name="mibyan-connect")
    if stream is STOPPED:
        raise error("the call was cancelled while it connected")
    return stream


@functools.cache
def _tls_context() -> Any:
    """One verifying TLS context for the process (loading the CA bundle takes 0.1-0.5 s)."""
    import httpx2
    return httpx2.create_ssl_context()


def _verify(url: str) -> Any:
    """Plain HTTP with no proxy configured never does TLS: skip loading the CA bundle."""
    import ssl
    import urllib.request
    if urlsplit(url).scheme == "http" and not urllib.request.getproxies():
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return _tls_context()


def _new_client(url: str, timeout: float) -> Any:
    """An httpx2 client (environment proxies honoured, as the SDKs do) whose every pool
    connects through the guarded backend."""
    import httpx2
    backend_type, _, client_type = _guarded_types()
    client = client_type(timeout=httpx2.Timeout(timeout), follow_redirects=False,
                         verify=_verify(url),
                         limits=httpx2.Limits(max_connections=100,
                                              max_keepalive_connections=20))
    # A mount of None is a host that bypasses the proxies (NO_PROXY): it sends nothing itself.
    for transport in (client._transport, *client._mounts.values()):
        if transport is not None:
            pool = _pool_of(transport)
            pool._network_backend = backend_type(pool._network_backend)
    return client


def _pool_of(transport: Any) -> Any:
    """The httpcore2 pool of an httpx2 transport, or a ``UsageError`` naming the versions when
    the private attributes the guard relies on have moved (see the module doc)."""
    pool = getattr(transport, "_pool", None)
    if pool is None or not hasattr(pool, "_network_backend"):
        import httpcore2
        import httpx2
        raise UsageError(
            f"httpx2 {httpx2.__version__} with httpcore2 {httpcore2.__version__} no longer "
            f"exposes the connection pool ({type(transport).__name__}._pool._network_backend) "
            "that the model calls' deadline and abort wrap; install the versions pyproject.toml "
            "pins (httpx2 and httpcore2 >=2.16.2,<2.17)")
    return pool


def preload() -> None:
    """Pay now what a process's first call pays once (importing httpx2 and httpcore2, building
    the guarded types, the first pool: about 0.3 s), for a fork server whose workers then start
    warm. Nothing is sent."""
    _new_client("http://127.0.0.1:9/", 1.0).close()


class Exchange:
    """A successful response as a codec reads it: headers, then a JSON body or SSE events."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.headers = response.headers
        self.rate_limits = rate_limit_headers(response.headers)
        self.is_sse = response.headers.get("content-type", "").startswith("text/event-stream")

    def json(self) -> Any:
        return json.loads(self._response.read())

    def events(self) -> Iterator[tuple[str, str]]:
        """``(event name, data)`` of each SSE event; comments (keep-alives) are skipped. The
        body is read to its end, so the connection goes back to the pool for the next call."""
        name, rest = "", b""
        data: list[str] = []
        for chunk in self._response.iter_bytes():
            *lines, rest = (rest + chunk).split(b"\n")
            for raw in lines:
                line = raw.rstrip(b"\r").decode()
                if not line:
                    if data:
                        yield name or "message", "\n".join(data)
                    name, data = "", []
                elif not line.startswith(":"):
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "data":
                        data.append(value)
                    elif field == "event":
                        name = value


class StopsOnCancel:
    """What an adapter posting through an ``HttpShell`` says of its calls: a cancelled token
    shuts the call's socket down, so the call may run on the thread that would interrupt it
    (``effects.model_call``)."""

    def stops_on_cancel(self, request: ModelRequest) -> bool:
        del request
        return True


class HttpShell:
    """Posts ready request bodies to one endpoint for one provider (see the module doc).

    ``headers`` gives a call's request headers from its key; ``code_of`` picks the error code
    from what an error body says (OpenAI's ``code``, Anthropic's ``type``). ``keys`` maps
    credential labels to secrets; it is shared with the caller, so a refreshed key shows here.
    """

    def __init__(self, *, provider: str, url: str, timeout: float, deadline: float | None,
                 api_key: str, keys: Mapping[str, str] | None,
                 headers: Callable[[str], dict[str, str]],
                 code_of: Callable[[ErrorDetail], str | None]) -> None:
        self.timeout, self.deadline = check_timeouts(timeout, deadline)
        if urlsplit(url).scheme not in ("http", "https"):
            raise UsageError(f"the base URL of {provider} must start with http:// or https://, "
                             f"not {endpoint_label(url)!r}")
        self.provider, self.url, self.endpoint = provider, url, endpoint_label(url)
        self._headers, self._code_of = headers, code_of
        self._api_key = api_key
        self.keys = keys if keys is not None else {}
        self._client: Any = None
        self._target: Any = None  # ``url`` parsed once, with the client
        self._lock = threading.Lock()

    def key(self, credential_id: str | None) -> str:
        """The secret for a request's credential label (the default key without one)."""
        if credential_id is None:
            return self._api_key
        key = self.keys.get(credential_id)
        if key is None:
            raise UsageError(f"no key labelled {credential_id!r} is configured for "
                             f"{self.provider} (known: {', '.join(sorted(self.keys)) or 'none'})")
        return key

    @property
    def who(self) -> str:
        return f"{self.provider} at {self.endpoint}"

    def _http(self) -> tuple[Any, Any]:
        """The client and the endpoint as an ``httpx2.URL``: a request built from the parsed
        URL is the same request, without parsing the text again on every call (35 us of a
        call's CPU, about a twentieth of a bare httpx2 turn)."""
        with self._lock:
            if self._client is None:
                import httpx2
                self._target = httpx2.URL(self.url)
                self._client = _new_client(self.url, self.timeout)
            return self._client, self._target

    def call(self, body: bytes, key: str, read: Callable[[Exchange], T], *,
             cancel: CancelToken | None = None,
             delivered: Callable[[], bool] = lambda: False) -> T:
        """POST ``body``, hand the response to ``read``, map every failure; ``delivered``
        says whether text already reached the caller (the error is then ``partial``)."""
        import httpx2
        call = _Call(time.monotonic() + self.deadline)
        if cancel is not None:
            cancel.on_cancel(call.abort)
        token = _current.set(call)
        try:
            return self._exchange(call, body, key, read)
        except ProviderError as error:
            error.partial = error.partial or delivered()
            raise
        except httpx2.TimeoutException as exc:
            raise self._timeout(call, delivered()) from exc
        except (httpx2.TransportError, httpx2.StreamError) as exc:
            raise self._unavailable(exc, call, delivered()) from exc
        except ValueError as exc:
            raise ModelBehaviourError(f"{self.who} sent a body that is not JSON: {exc}") from exc
        finally:
            call.release()
            _current.reset(token)

    def _exchange(self, call: _Call, body: bytes, key: str, read: Callable[[Exchange], T]) -> T:
        import httpx2
        client, target = self._http()
        if call.cancelled:
            raise ProviderUnavailableError(f"the call to {self.who} was interrupted",
                                           provider=self.provider, endpoint=self.endpoint)
        request = client.build_request("POST", target, content=body, headers=self._headers(key))
        try:
            response = client.send(request, stream=True)
        except httpx2.RemoteProtocolError:
            if call.connected or call.cancelled:
                raise
            # A kept-alive connection the server had closed in the pool (llama.cpp's server
            # closes idle ones): nothing was answered, so the request goes again, once, on a
            # new connection, as the SDKs' own retries would send it.
            response = client.send(request, stream=True)
        response.stream = _guarded_types()[1](response.stream, call)
        try:
            if response.status_code >= 300:  # redirects are not followed: keys stay home
                text = response.read().decode("utf-8", "replace")
                raise self.http_error(response.status_code, text, response.headers)
            return read(Exchange(response))
        finally:
            response.close()

    def http_error(self, status: int, body: str, headers: Any = None, *,
                   where: str = "HTTP") -> ProviderHTTPError:
        """A provider's error answer (or an error event inside a 200 stream) as plain data."""
        detail = error_detail(body)
        code = self._code_of(detail)
        said = detail.message or " ".join(body.split())[:200] or "(empty body)"
        headers = headers if headers is not None else {}
        if 300 <= status < 400:
            said = (f"redirected to {endpoint_label(headers.get('location') or '?')}; "
                    "set the base URL to the final address")
        return ProviderHTTPError(
            f"{where} {status} from {self.who}: {code or 'error'}: {said}",
            status=status, body=body[:4000], code=code, provider=self.provider,
            endpoint=self.endpoint, retry_after=retry_after_seconds(headers, time.time()),
            rate_limits=rate_limit_headers(headers) if headers else ())

    def _timeout(self, call: _Call, partial: bool) -> ProviderTimeoutError:
        what = (f"did not finish within the total deadline of {self.deadline:g} s"
                if call.expired() else f"sent nothing for the read timeout of {self.timeout:g} s")
        return ProviderTimeoutError(f"{self.who} {what}", provider=self.provider,
                                    endpoint=self.endpoint, partial=partial)

    def _unavailable(self, exc: BaseException, call: _Call,
                     partial: bool) -> ProviderUnavailableError:
        what = ("the call was interrupted" if call.cancelled
                else f"unreachable or dropped the connection: {exc!r}")
        return ProviderUnavailableError(f"{self.who}: {what}", provider=self.provider,
                                        endpoint=self.endpoint, partial=partial)

    def cut_short(self, partial: bool) -> ProviderUnavailableError:
        """A stream that ended cleanly before the reply was complete."""
        return ProviderUnavailableError(
            f"{self.who} ended the stream before the reply was complete",
            provider=self.provider, endpoint=self.endpoint, partial=partial)
