"""What the gateway checks of a request before any route sees it, so that no web page the user
visits can drive it (docs/gateway-security.md):

- ``Host`` must name the gateway: a loopback name, the address it is bound to, or one of
  ``[serve] allowed_hosts`` (421 otherwise, 400 without one). A page whose name was rebound to
  127.0.0.1 (DNS rebinding) still sends its own name.
- ``Origin``, which browsers send on every cross-origin request but a simple ``GET``, must be
  one of ``[serve] cors_origins`` (403 otherwise); only those get CORS headers and preflights.
- A request with a body must declare it ``application/json`` (415 otherwise): a browser can
  send ``text/plain`` across origins without asking first (a CORS "simple request"), never
  JSON.
- The body is read whole here, within ``[serve] max_body_bytes`` (413) and ``body_timeout``
  seconds (408), so a client trickling it cannot hold a connection; the routes get it from
  memory.
- A turn past ``[serve] max_busy`` is refused here (503), before any route works on it, once
  its bearer token is found valid (401 otherwise, as the route would answer).

Every refusal but the 503 closes the connection (``Connection: close``): the unread rest of
the request must not be taken for the next one.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from pipeline.serve.admission import Admission
from pipeline.serve.bearer import token_owner
from pipeline.serve.gateway_config import ServeConfig
from pipeline.serve.openai_compat import ApiError
from pipeline.serve.pool import busy

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# The headers a browser page may send (the SDKs' names), and the one it may read.
CORS_HEADERS = ("authorization", "content-type", "x-mibyan-session-id")
CORS_METHODS = ("GET", "POST", "DELETE")
# The routes whose POST runs a turn (besides ``/v1/sessions/{id}/messages``).
TURN_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})


def host_name(value: str) -> str:
    """A Host header's name without its port, lower case, an IPv6 address in brackets:
    ``[::1]:8642`` -> ``[::1]``, ``LocalHost.:80`` -> ``localhost``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[:value.find("]") + 1] if "]" in value else value
    name, colon, port = value.rpartition(":")
    if colon and port.isdecimal():
        value = name
    return value.rstrip(".")


def allowed_hosts(config: ServeConfig) -> frozenset[str]:
    """Loopback's names, the bound address (not a wildcard one: ``0.0.0.0`` is no name a
    client uses) and ``[serve] allowed_hosts``."""
    names = {*LOOPBACK_NAMES, *(host_name(h) for h in config.allowed_hosts)}
    try:
        address = ipaddress.ip_address(config.host)
    except ValueError:
        names.add(host_name(config.host))
    else:
        if not address.is_unspecified:
            names.add(f"[{address}]" if address.version == 6 else str(address))
    return frozenset(names)


def _json_type(value: str) -> bool:
    """``application/json``, with no charset or UTF-8's (RFC 8259: JSON on the wire is
    UTF-8)."""
    media, *params = (part.strip().lower() for part in value.split(";"))
    charsets = [p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")]
    return media == "application/json" and all(c in ("utf-8", "utf8") for c in charsets)


def _refused(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status,
                        headers={"Connection": "close", **(headers or {})})


class RequestGuard:
    """ASGI middleware in front of the gateway's app (``create_app`` puts it there)."""

    def __init__(self, app: ASGIApp, config: ServeConfig, admission: Admission) -> None:
        self.app = app
        self.config = config
        self.admission = admission
        self.hosts = allowed_hosts(config)
        self.origins = frozenset(config.cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self.refusal(headers)
        if refusal is not None:
            await _refused(refusal)(scope, receive, send)
            return
        if "content-length" not in headers and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body (RFC 9112 6.3)
            return
        body = await self._read(headers, receive)
        if isinstance(body, ApiError):
            await _refused(body)(scope, receive, send)
        elif body is not None and self._turn(scope) and self.admission.full():
            # Refused before a route parses the body, finds the session (or makes one, for a
            # stateless chat completion) and a thread: the 503 must cost next to nothing.
            # The body was read: the connection is kept.
            error = self._unauthenticated(headers) or busy(self.admission.refuse())
            await JSONResponse(error.body(), status_code=error.status, headers=error.headers)(
                scope, receive, send)
        elif body is not None:
            await self.app(scope, _replaying(body, receive), send)

    @staticmethod
    def _turn(scope: Scope) -> bool:
        """Whether the request asks for a turn (``SessionPool.turn`` would count it)."""
        path: str = scope["path"]
        return scope["method"] == "POST" and (
            path in TURN_PATHS or (path.startswith("/v1/sessions/")
                                   and path.endswith("/messages")))

    def _unauthenticated(self, headers: Headers) -> ApiError | None:
        """The 401 of a turn without a valid token. Asked only of a turn refused for the load
        (the route asks it of every other), before the refusal: a stranger learns that it is
        one, not how busy the gateway is, and takes no client's return slot."""
        try:
            token_owner(self.config, headers.get("authorization", ""))
        except ApiError as error:
            return error
        return None

    def refusal(self, headers: Headers) -> ApiError | None:
        """Why the request is refused before its body is read, or None."""
        host = headers.get("host")
        if not host:
            return ApiError(400, "The request has no Host header.", code="missing_host")
        if host_name(host) not in self.hosts:
            return ApiError(421, "This gateway does not answer for that Host name; add it to "
                            "[serve] allowed_hosts to allow it.", code="host_not_allowed")
        origin = headers.get("origin")
        if origin is not None and origin.rstrip("/") not in self.origins:
            return ApiError(403, "Requests from web pages of this Origin are refused; add it to "
                            "[serve] cors_origins to allow it.", code="origin_not_allowed")
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        if has_body and not _json_type(headers.get("content-type", "")):
            return ApiError(415, "The request body must be JSON: send it with 'Content-Type: "
                            "application/json'.", code="unsupported_media_type")
        return None

    async def _read(self, headers: Headers, receive: Receive) -> bytes | ApiError | None:
        """The whole body; a 413 past the limit, before more of it is read (a chunked body has
        no length to check first), a 408 past ``body_timeout``; None when the client left."""
        limit = self.config.max_body_bytes
        too_large = ApiError(413, f"The request body is larger than {limit:,} bytes.",
                             code="request_too_large")
        length = headers.get("content-length", "")
        if length.isdecimal() and int(length) > limit:
            return too_large
        deadline = asyncio.get_running_loop().time() + self.config.body_timeout
        chunks, size = [], 0
        while True:
            message = await _received(receive, deadline)
            if message is None:
                return ApiError(408, f"The request body did not arrive within "
                                f"{self.config.body_timeout:g} seconds.",
                                code="request_timeout")
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _received(receive: Receive, deadline: float) -> Message | None:
    """The client's next message, None when it had not arrived by ``deadline``. The deadline
    is for a slow client, not a busy gateway: when the event loop is behind, the timer can run
    in the very step that takes the client's bytes off the socket, before the wait for them
    wakes; a second look, which takes only what is there already, finds them."""
    for _ in range(2):
        try:
            async with asyncio.timeout_at(deadline):
                return await receive()
        except TimeoutError:
            continue
    return None


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` giving the body read first, then what the client sends next (its
    disconnect, which the routes watch for)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}
    return replay
